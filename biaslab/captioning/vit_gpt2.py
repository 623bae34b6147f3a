"""Paper tier of the "Transformer" captioner of paper 000 Table 2: a Vision Transformer
encoder and a GPT-2 decoder joined by cross-attention, Hugging Face
``VisionEncoderDecoderModel`` (app. B.2: "the Transformer-based encoder-decoder model composed
of Vision Transformer and GPT-2 ... we use the implementation in Hugging Face ... AdamW ...
learning rate of 1e-4 and batch size of 64"), fine-tuned end to end on pixels with early
stopping.

It is the ``transformer`` architecture of :mod:`biaslab.captioning` with other parameters:
``captioner.transformer.encoder`` names a ViT (hub id or local directory, e.g.
``google/vit-base-patch16-224-in21k``) instead of ``grid`` (the offline tier's small model on
the frozen backbone's feature grid, :mod:`biaslab.captioning.transformer`), and
``captioner.transformer.decoder`` a causal LM (``gpt2``). Training runs through the same
:func:`biaslab.captioning.training.train_samples` / :func:`~biaslab.captioning.training.fit`
loop (AdamW, warm-up + linear decay, early stopping on the validation token cross-entropy),
saved models through the same ``transformer.json`` (``impl: vit_gpt2``), so the stages,
evaluation and report do not know which tier they run.

Model::

    pixels = image processor of the ViT (resize, normalise)                   (b, 3, H, W)
    Z      = ViT(pixels)                                  patch tokens + [CLS]  (b, N+1, d_e)
    p(y_t | y_<t, image) = GPT-2 with cross-attention over Z (layers added by
                           ``from_encoder_decoder_pretrained``, randomly initialised)

The "features" this architecture reads are the image paths (object array, one per image row):
pixels are read and preprocessed per batch. Decoder input ``[<eos>] + y_1..y_{T-1}`` (GPT-2's
end token doubles as the start token, as ``decoder_start_token_id``), loss: token
cross-entropy of ``y_1..y_T, <eos>``. Decoding: Hugging Face ``generate`` (beam search,
``num_beams`` = ``beam``, at most ``max_len`` + 1 new tokens, no length penalty: the same rule
as ClipCap's). Deterministic given ``seed`` on CPU with one thread; meant for a GPU
(``device``), where it is not bitwise reproducible.

Tested offline with a tiny random ViT and GPT-2 saved by ``save_pretrained``
(tests/test_captioning_vit_gpt2.py), as the other paper-tier models are.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from biaslab.captioning.tokens import load_pretrained_tokenizer, tidy_tokens, normalize_caption
from biaslab.captioning.training import json_default
from biaslab.models.features import torch_threads
from biaslab.runtime.io import InputError, atomic_dir, without_run_stats

IMPL = "vit_gpt2"
#: paper 000 app. B.2 (Hugging Face): the ViT and GPT-2 checkpoints of the paper tier
PAPER_ENCODER = "google/vit-base-patch16-224-in21k"
PAPER_DECODER = "gpt2"
PAPER_LR = 1e-4
PAPER_BATCH_SIZE = 64

__all__ = ["IMPL", "PAPER_ENCODER", "PAPER_DECODER", "PAPER_LR", "PAPER_BATCH_SIZE",
           "ViTGPT2", "ViTGPT2Captioner", "build_captioner", "train_captioner", "image_inputs"]


def image_inputs(table) -> np.ndarray:
    """The input rows of this architecture: the image paths of ``table`` (a DataFrame with
    ``path``), object array (n,). Raises ``InputError`` naming a missing file."""
    paths = np.asarray([str(p) for p in table["path"]], dtype=object)
    for p in paths:
        if not Path(p).is_file():
            raise InputError(p, "image file not found (the transformer captioner with a ViT "
                                "encoder reads pixels)")
    return paths


def path_list(x) -> list[str]:
    """Image paths from a 1-d array / list of ``str`` or ``os.PathLike``.

    Raises:
        ValueError: anything else (the captioner reads files, not features)."""
    a = np.asarray(x, dtype=object)
    if a.ndim != 1 or not all(isinstance(p, (str, os.PathLike)) for p in a):
        raise ValueError("the ViT + GPT-2 captioner reads image paths: a 1-d array of paths, "
                         f"got {a.dtype} {a.shape}")
    return [str(p) for p in a]


def _torch_module():
    import torch
    return torch.nn.Module


class ViTGPT2(_torch_module()):
    """``VisionEncoderDecoderModel`` + its image processor behind the interface of
    :func:`biaslab.captioning.training.fit`: ``token_losses(paths, input_ids,
    attention_mask)``. Inputs are moved to the model's device here, so the training loop
    stays device-agnostic."""

    def __init__(self, net, processor):
        super().__init__()
        self.net = net
        self.processor = processor

    @property
    def device(self):
        return next(self.net.parameters()).device

    def pixels(self, paths: Sequence[str]):
        """(b, 3, H, W) float pixel values of the images at ``paths`` (the ViT's processor)."""
        from biaslab.models.encoders import open_rgb
        px = self.processor(images=[open_rgb(p) for p in paths], return_tensors="pt")
        return px["pixel_values"].to(self.device)

    def token_losses(self, paths, input_ids, attention_mask):
        """Sum of the token cross-entropies of ``input_ids`` (b, T: caption + end token,
        right-padded; ``attention_mask`` 1 on real tokens) given the images, and the token
        count. Decoder input: ``[decoder_start] + input_ids[:, :-1]``."""
        import torch
        dev = self.device
        ids, att = input_ids.to(dev), attention_mask.to(dev)
        start = torch.full((len(ids), 1), int(self.net.config.decoder_start_token_id),
                           dtype=ids.dtype, device=dev)
        dec_in = torch.cat([start, ids[:, :-1]], dim=1)
        dec_att = torch.cat([torch.ones_like(att[:, :1]), att[:, :-1]], dim=1)
        logits = self.net(pixel_values=self.pixels(path_list(paths)), decoder_input_ids=dec_in,
                          decoder_attention_mask=dec_att).logits
        target = ids.masked_fill(att == 0, -100)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                 target.reshape(-1), ignore_index=-100,
                                                 reduction="sum")
        return loss, int(att.sum())


class ViTGPT2Captioner:
    """A trained ViT + GPT-2 captioner: :class:`ViTGPT2` + tokenizer + config (the
    ``transformer`` architecture's :class:`~biaslab.captioning.transformer.TransformerConfig`)
    + ``meta``. The interface of the other captioners (``encode_captions``, ``generate``,
    ``loss``, ``save``, ``load``), on image paths instead of features."""

    arch = "transformer"

    def __init__(self, model: ViTGPT2, tokenizer, config, meta: dict | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.meta = dict(meta or {})

    def encode_captions(self, captions: Sequence[str], max_len: int | None = None
                        ) -> list[list[int]]:
        """Token ids of each caption (GPT-2 BPE: a leading space, as inside a sentence),
        truncated to ``max_len`` (default ``config.max_len``), followed by the end token."""
        n = int(max_len or self.config.max_len)
        eos = self.tokenizer.eos_token_id
        enc = self.tokenizer([" " + normalize_caption(c) for c in captions],
                             add_special_tokens=False)["input_ids"]
        return [list(ids[:n]) + [eos] for ids in enc]

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids -> caption text (special tokens dropped)."""
        return tidy_tokens(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def generate(self, paths, beam: int | None = None, max_len: int | None = None,
                 batch_size: int = 64, no_repeat_ngram: int | None = None) -> list[str]:
        """Captions for the images at ``paths`` (1-d array / list of paths) by beam search
        (``beam`` beams, default ``config.beam``; 1 = greedy), at most ``max_len`` tokens
        (default ``config.max_len``) plus the end token; ``no_repeat_ngram`` > 0 forbids
        repeated n-grams (Hugging Face). Deterministic on CPU. Raises ``ValueError`` for
        inputs that are not paths."""
        import torch
        from transformers import GenerationConfig
        paths = path_list(paths)
        beam = int(beam or self.config.beam)
        max_len = int(max_len or self.config.max_len)
        eos = self.tokenizer.eos_token_id
        gen = GenerationConfig(num_beams=beam, max_new_tokens=max_len + 1, do_sample=False,
                               early_stopping=True, length_penalty=1.0, eos_token_id=eos,
                               pad_token_id=self.tokenizer.pad_token_id,
                               decoder_start_token_id=eos, bos_token_id=eos,
                               no_repeat_ngram_size=int(no_repeat_ngram or 0))
        out: list[str] = []
        self.model.eval()
        with torch_threads(self.config.num_threads), torch.inference_mode():
            for s in range(0, len(paths), max(1, int(batch_size))):
                px = self.model.pixels(paths[s:s + batch_size])
                ids = self.model.net.generate(pixel_values=px, generation_config=gen)
                for row in ids[:, 1:].tolist():          # drop the decoder start token
                    if eos in row:
                        row = row[:row.index(eos)]
                    out.append(self.decode(row[:max_len]))
        return out

    def loss(self, paths, captions: Sequence[str], batch_size: int = 64) -> float:
        """Mean token cross-entropy (nats) of ``captions`` given the images (row i <->
        caption i), eval mode."""
        from biaslab.captioning.training import val_loss
        return val_loss(self, np.asarray(path_list(paths), dtype=object),
                        self.encode_captions(captions), self.tokenizer.pad_token_id,
                        batch_size)

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``directory`` (replaced atomically): ``transformer.json`` (``impl:
        vit_gpt2``, config, meta), ``model/`` (``save_pretrained``), ``processor/`` and
        ``tokenizer/``."""
        import dataclasses
        from biaslab.captioning.transformer_config import FORMAT, ARCH, CONFIG_FILE
        with atomic_dir(directory) as tmp:
            self.model.net.save_pretrained(tmp / "model")
            self.model.processor.save_pretrained(tmp / "processor")
            self.tokenizer.save_pretrained(tmp / "tokenizer")
            meta = {"arch": ARCH, "impl": IMPL, "format": FORMAT,
                    "config": dataclasses.asdict(self.config),
                    "meta": without_run_stats(self.meta)}
            (tmp / CONFIG_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True,
                                                      default=json_default) + "\n")
        return Path(directory)

    @classmethod
    def load(cls, directory: str | os.PathLike, num_threads: int | None = None,
             device: str = "cpu") -> "ViTGPT2Captioner":
        """Load a :meth:`save`d captioner (offline). Raises ``InputError`` naming the
        directory when it is not one."""
        from transformers import AutoImageProcessor, AutoTokenizer, VisionEncoderDecoderModel
        from biaslab.captioning.transformer_config import CONFIG_FILE, TransformerConfig
        d = Path(directory)
        try:
            data = json.loads((d / CONFIG_FILE).read_text())
            cfg = TransformerConfig(**data["config"])
            net = VisionEncoderDecoderModel.from_pretrained(d / "model", local_files_only=True)
            processor = AutoImageProcessor.from_pretrained(d / "processor",
                                                           local_files_only=True)
            tok = AutoTokenizer.from_pretrained(d / "tokenizer", local_files_only=True)
        except (OSError, KeyError, TypeError, ValueError) as e:
            raise InputError(d, f"not a saved ViT + GPT-2 captioner: {e}") from e
        if num_threads is not None:
            cfg.num_threads = num_threads
        return cls(ViTGPT2(net.to(device).eval(), processor), tok, cfg, data.get("meta"))


def build_captioner(config, device: str | None = None) -> ViTGPT2Captioner:
    """An untrained captioner: ``VisionEncoderDecoderModel.from_encoder_decoder_pretrained(
    config.encoder, config.decoder)`` (its cross-attention layers initialised from the current
    torch RNG), the ViT's image processor (at ``config.image_size`` when set) and the
    decoder's tokenizer (pad = end token when it has none). ``device``: None = ``cuda`` when
    available. Raises ``InputError`` naming the checkpoint that cannot be loaded."""
    import torch
    from transformers import AutoConfig, AutoImageProcessor, VisionEncoderDecoderModel
    from biaslab.models.textclf import resolve_model
    enc, dec = resolve_model(config.encoder), resolve_model(config.decoder)
    lfo = bool(getattr(config, "local_files_only", True))
    try:
        tok = load_pretrained_tokenizer(dec, lfo)
        processor = AutoImageProcessor.from_pretrained(enc, local_files_only=lfo)
        # the decoder's config made a cross-attending decoder here: transformers 5.x's own
        # branch reads `is_decoder`, which GPT2Config no longer has by default
        dconf = AutoConfig.from_pretrained(dec, local_files_only=lfo)
        dconf.is_decoder, dconf.add_cross_attention = True, True
        net = VisionEncoderDecoderModel.from_encoder_decoder_pretrained(
            enc, dec, encoder_local_files_only=lfo, decoder_local_files_only=lfo,
            decoder_config=dconf)
    except OSError as e:
        hint = (" (not available offline: a local directory, the Hugging Face cache, or "
                "captioner.local_files_only: false with network)") if lfo else ""
        raise InputError(f"{config.encoder} + {config.decoder}",
                         f"cannot load the ViT / GPT-2 checkpoints{hint}: {e}") from e
    net.config.decoder_start_token_id = tok.eos_token_id
    net.config.eos_token_id = tok.eos_token_id
    net.config.pad_token_id = tok.pad_token_id
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return ViTGPT2Captioner(ViTGPT2(net.to(device), processor), tok, config)


def train_captioner(paths, captions: Sequence[str], caption_image: Sequence[int],
                    val_paths=None, val_captions: Sequence[str] = (),
                    val_caption_image: Sequence[int] = (), config=None, on_epoch=None,
                    progress: bool = False) -> tuple[ViTGPT2Captioner, list[dict]]:
    """Fine-tune ViT + GPT-2 (module docstring) on (image, caption) samples.

    Args:
        paths: (n_img,) image paths (:func:`image_inputs`); ``captions``: training captions;
            ``caption_image``: (n_cap,) row of ``paths`` each caption describes.
        val_paths, val_captions, val_caption_image: the validation split (early stopping on
            the mean token cross-entropy); empty -> the last epoch is kept.
        config: a :class:`~biaslab.captioning.transformer.TransformerConfig` whose
            ``encoder`` / ``decoder`` name the checkpoints (paper: :data:`PAPER_ENCODER`,
            :data:`PAPER_DECODER`, ``lr`` :data:`PAPER_LR`, ``batch_size``
            :data:`PAPER_BATCH_SIZE`).

    Returns:
        ``(captioner, history)`` as :func:`biaslab.captioning.training.train_samples`.

    Raises:
        ValueError: inputs are not paths, shapes disagree; InputError: a checkpoint cannot be
            loaded.
    """
    from biaslab.captioning.training import train_samples
    paths = np.asarray(path_list(paths), dtype=object)
    vp = None if val_paths is None else np.asarray(path_list(val_paths), dtype=object)
    return train_samples(lambda *_: build_captioner(config), paths, captions, caption_image,
                         vp, val_captions, val_caption_image, config, on_epoch, progress,
                         desc="vit_gpt2")
