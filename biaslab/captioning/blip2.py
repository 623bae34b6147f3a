"""BLIP-2 (Li et al. 2023) for paper 000 Table 2's "BLIP-2" column group, paper tier only:
``Salesforce/blip2-opt-2.7b`` through Hugging Face ``from_pretrained`` (GPU + network or the
HF cache). In the DAG as the ``blip2`` architecture of :mod:`biaslab.captioning`
(``captioner.archs``; ``models=paper`` lists it): :class:`Blip2Captioner`,
:func:`train_captioner` (the shared training loop on image paths) and ``captioner.blip2``
params (:class:`Blip2CaptionerConfig`). Tested offline with a tiny random
``Blip2ForConditionalGeneration`` saved by ``save_pretrained`` (tests/test_captioning.py,
tests/test_captioning_blip2.py), as the other paper-tier backbones are
(tests/test_backbones.py).

* :func:`load`: model + processor from a hub name or a local directory.
* :func:`caption`: images -> captions (beam search, no prompt: BLIP-2's captioning mode).
* :func:`finetune_step`: one AdamW step of the caption loss on (images, captions); paper 000
  app. B.2: "AdamW ... learning rate of 2e-6 ... batch size of 8" for BLIP-2
  (:func:`make_optimizer`, :data:`PAPER_LR`, :data:`PAPER_BATCH_SIZE`). Which weights train
  (the paper does not say): as BLIP-2's own captioning fine-tuning (Li et al. 2023 sec. 4.2),
  the language model stays frozen and the Q-Former, query tokens and language projection are
  trained; ``train_vision`` also trains the ViT (BLIP-2 fine-tunes it for COCO captioning;
  off by default to fit a 2.7B model's optimiser state on one GPU).
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from biaslab.runtime.io import InputError
from biaslab.runtime.settings import at_least, block_from_params

PAPER_MODEL = "Salesforce/blip2-opt-2.7b"
PAPER_LR = 2e-6
PAPER_BATCH_SIZE = 8

__all__ = ["PAPER_MODEL", "PAPER_LR", "PAPER_BATCH_SIZE", "load", "caption", "trainable",
           "make_optimizer", "finetune_step", "Blip2CaptionerConfig", "Blip2Captioner",
           "config_from_params", "train_captioner"]


def load(name: str | os.PathLike = PAPER_MODEL, local_files_only: bool = True,
         device: str = "cpu", dtype=None):
    """``(model, processor)``: ``Blip2ForConditionalGeneration`` and ``Blip2Processor`` from
    ``name`` (hub id or directory written by ``save_pretrained``), model in eval mode on
    ``device`` (``dtype`` e.g. ``torch.float16`` on GPU; None = the checkpoint's).
    ``local_files_only`` (default True): nothing is downloaded. Raises ``InputError`` naming
    ``name`` when it cannot be loaded."""
    from transformers import Blip2ForConditionalGeneration, Blip2Processor
    try:
        processor = Blip2Processor.from_pretrained(name, local_files_only=local_files_only)
        kw = {"dtype": dtype} if dtype is not None else {}
        model = Blip2ForConditionalGeneration.from_pretrained(
            name, local_files_only=local_files_only, **kw)
    except (OSError, ValueError) as e:     # ValueError: huggingface_hub's HFValidationError
        hint = (" (not available offline: a local directory, the Hugging Face cache, or "
                "local_files_only=False with network)") if local_files_only else ""
        raise InputError(name, f"cannot load BLIP-2{hint}: {e}") from e
    return model.to(device).eval(), processor


def _images(images):
    from PIL import Image
    return [im.convert("RGB") if isinstance(im, Image.Image) else Image.open(im).convert("RGB")
            for im in images]


def caption(model, processor, images: Sequence, max_new_tokens: int = 30, num_beams: int = 5,
            batch_size: int = 8) -> list[str]:
    """One caption per image (paths or PIL images), in order: ``generate`` with no text prompt
    (BLIP-2's captioning use; LAVIS: beam 5, at most 30 tokens), greedy when ``num_beams`` is
    1, deterministic; special tokens dropped and whitespace stripped."""
    import torch
    out: list[str] = []
    model.eval()
    dev = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    with torch.inference_mode():
        for s in range(0, len(images), max(1, int(batch_size))):
            ims = _images(images[s:s + batch_size])
            inputs = processor(images=ims, return_tensors="pt").to(dev)
            inputs["pixel_values"] = inputs["pixel_values"].to(dtype)
            ids = model.generate(**inputs, max_new_tokens=int(max_new_tokens),
                                 num_beams=int(num_beams), do_sample=False)
            prompt = inputs.get("input_ids")
            if prompt is not None and ids.shape[1] > prompt.shape[1] and bool(
                    (ids[:, :prompt.shape[1]] == prompt).all()):
                ids = ids[:, prompt.shape[1]:]                     # drop an echoed prompt
            out += [t.strip() for t in processor.batch_decode(ids, skip_special_tokens=True)]
    return out


def trainable(model, train_vision: bool = False) -> list:
    """Set ``requires_grad``: Q-Former, query tokens and language projection (+ the vision
    model when ``train_vision``) train, the language model is frozen (module docstring).
    Returns the trainable parameters."""
    for p in model.parameters():
        p.requires_grad_(False)
    mods = [model.qformer, model.language_projection] + ([model.vision_model]
                                                         if train_vision else [])
    params = [p for m in mods for p in m.parameters()] + [model.query_tokens]
    for p in params:
        p.requires_grad_(True)
    return params


def make_optimizer(model, lr: float = PAPER_LR, weight_decay: float = 0.05,
                   train_vision: bool = False):
    """AdamW over :func:`trainable` (paper 000 app. B.2: lr 2e-6; weight decay 0.05 as
    BLIP-2's fine-tuning)."""
    import torch
    return torch.optim.AdamW(trainable(model, train_vision), lr=float(lr),
                             weight_decay=float(weight_decay))


def finetune_step(model, processor, images: Sequence, captions: Sequence[str],
                  optimizer) -> float:
    """One optimiser step of the captioning loss (token cross-entropy of ``captions`` given
    the images; padding and image-query positions carry no loss). Returns the loss (nats per
    token). Raises ``ValueError`` when the numbers of images and captions differ."""
    if len(images) != len(captions) or not len(captions):
        raise ValueError(f"finetune_step needs one caption per image, got {len(images)} "
                         f"images and {len(captions)} captions")
    import torch
    dev = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    eos = processor.tokenizer.eos_token or ""
    inputs = processor(images=_images(images), text=[c.strip() + eos for c in captions],
                       padding=True, return_tensors="pt").to(dev)
    inputs["pixel_values"] = inputs["pixel_values"].to(dtype)
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    img_tok = getattr(model.config, "image_token_id", None)
    if img_tok is None:
        img_tok = getattr(model.config, "image_token_index", None)
    if img_tok is not None:
        labels = labels.masked_fill(labels == int(img_tok), -100)
    model.train()
    out = model(**inputs, labels=labels)
    optimizer.zero_grad(set_to_none=True)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]],
                                   1.0)
    optimizer.step()
    model.eval()
    return float(out.loss.detach())


# --------------------------------------------------------------------------------------------
# the ``blip2`` architecture of biaslab.captioning (stages train_captioner / eval_captioner)

ARCH = "blip2"
CONFIG_FILE = "blip2.json"
_FORMAT = 1


@dataclass
class Blip2CaptionerConfig:
    """Hyper-parameters of the ``blip2`` architecture (params.yaml ``captioner.blip2`` +
    the shared ``captioner`` keys of :data:`SHARED`).

    ``model``: checkpoint (hub id or local directory; paper: :data:`PAPER_MODEL`); ``lr``
    (paper 000 app. B.2: 2e-6), ``batch_size`` (app. B.2: 8), ``weight_decay`` (0.05, BLIP-2's
    own fine-tuning), ``train_vision`` (also train the ViT; off: the LM and ViT stay frozen,
    :func:`trainable`), ``beam`` (LAVIS: 5) and ``max_len`` (LAVIS: 30 new tokens) for
    captioning. Shared: ``epochs``, ``warmup``, ``patience``, ``seed``, ``num_threads``,
    ``local_files_only``. ``image_encoder`` / ``image_size`` are recorded, not used (BLIP-2
    reads pixels through its own processor).
    """
    model: str = PAPER_MODEL
    lr: float = PAPER_LR
    batch_size: int = PAPER_BATCH_SIZE
    weight_decay: float = 0.05
    train_vision: bool = False
    beam: int = 5
    max_len: int = 30
    epochs: int = 30
    warmup: float = 0.05
    patience: int = 4
    seed: int = 0
    num_threads: int | None = 1
    local_files_only: bool = True
    image_encoder: str = "efficientnet_lite0"
    image_size: int | None = 224

    @property
    def pixels(self) -> bool:
        """BLIP-2 reads image paths (``biaslab.captioning.Arch.features``)."""
        return True

    @classmethod
    def from_params(cls, params) -> "Blip2CaptionerConfig":
        """From the composed params' group ``captioner`` (:func:`config_from_params`): the
        arch's settings as its registry entry declares them."""
        return config_from_params((params or {}).get("captioner"))


#: keys of ``captioner`` that :class:`Blip2CaptionerConfig` reads (its own come from
#: ``captioner.blip2``; the ClipCap-sized ``lr`` / ``batch_size`` / ``beam`` / ``max_len``
#: of ``captioner`` do not apply: BLIP-2's are in its block)
SHARED = ("epochs", "warmup", "patience", "seed", "num_threads", "local_files_only",
          "image_encoder", "image_size")


def config_from_params(p: Mapping | None, **overrides) -> Blip2CaptionerConfig:
    """``Blip2CaptionerConfig`` from the ``captioner`` params dict: :data:`SHARED` from
    ``p``, the rest from ``p["blip2"]``, then ``overrides`` (None ignored). Raises
    ``ValueError`` naming the param for an unknown key or a bad value."""
    cfg = block_from_params(Blip2CaptionerConfig, p, "blip2", SHARED, "captioner", overrides)
    at_least(cfg, ("batch_size", "beam", "max_len", "epochs"), 1, "captioner.blip2")
    if not cfg.lr > 0:
        raise ValueError(f"captioner.blip2.lr must be > 0, got {cfg.lr!r}")
    return cfg


def _torch_module():
    import torch
    return torch.nn.Module


class Blip2Model(_torch_module()):
    """``Blip2ForConditionalGeneration`` + processor behind
    :func:`biaslab.captioning.training.fit`'s interface: ``token_losses(paths, input_ids,
    attention_mask)``. The text ids get the ``num_query_tokens`` image tokens in front (the
    processor's layout), which the model replaces by the Q-Former's outputs; image and padding
    positions carry no loss."""

    def __init__(self, net, processor):
        super().__init__()
        self.net = net
        self.processor = processor

    @property
    def device(self):
        return next(self.net.parameters()).device

    def pixels(self, paths):
        dtype = next(self.net.parameters()).dtype
        px = self.processor.image_processor(images=_images(paths), return_tensors="pt")
        return px["pixel_values"].to(self.device, dtype)

    def image_token(self) -> int | None:
        tok = getattr(self.net.config, "image_token_id", None)
        return getattr(self.net.config, "image_token_index", None) if tok is None else tok

    def token_losses(self, paths, input_ids, attention_mask):
        """Sum of the token cross-entropies of the caption ids (b, T, right-padded; they start
        with the tokenizer's BOS when it has one and end with the end token) given the
        images, and the count of predicted tokens."""
        import torch
        dev = self.device
        ids, att = input_ids.to(dev), attention_mask.to(dev)
        img = self.image_token()
        nq = int(self.net.config.num_query_tokens)
        if img is not None:     # transformers >= 4.47: image tokens inline in input_ids
            ids = torch.cat([torch.full((len(ids), nq), int(img), dtype=ids.dtype,
                                        device=dev), ids], dim=1)
            att = torch.cat([torch.ones((len(att), nq), dtype=att.dtype, device=dev), att],
                            dim=1)
        labels = ids.masked_fill(att == 0, -100)
        if img is not None:
            labels = labels.masked_fill(ids == int(img), -100)
        logits = self.net(pixel_values=self.pixels([str(p) for p in paths]), input_ids=ids,
                          attention_mask=att).logits
        logits = logits[:, -ids.shape[1]:]          # the text positions (queries in front)
        target = labels[:, 1:]
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(), target.reshape(-1),
            ignore_index=-100, reduction="sum")
        return loss, int((target != -100).sum())


class Blip2Captioner:
    """A (fine-tuned) BLIP-2 captioner with the interface of the other captioners
    (``encode_captions``, ``generate``, ``save``, ``load``), on image paths."""

    arch = ARCH

    def __init__(self, model: Blip2Model, config: Blip2CaptionerConfig,
                 meta: dict | None = None):
        self.model = model
        self.tokenizer = model.processor.tokenizer
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.config = config
        self.meta = dict(meta or {})

    def encode_captions(self, captions: Sequence[str], max_len: int | None = None
                        ) -> list[list[int]]:
        """Token ids of each caption (the tokenizer's own special tokens, e.g. OPT's BOS),
        truncated to ``max_len`` text tokens (default ``config.max_len``), plus the end
        token."""
        from biaslab.captioning.tokens import normalize_caption
        n = int(max_len or self.config.max_len)
        eos = self.tokenizer.eos_token_id
        enc = self.tokenizer([normalize_caption(c) for c in captions])["input_ids"]
        return [list(ids[:n + 1]) + [eos] for ids in enc]

    def generate(self, paths, beam: int | None = None, max_len: int | None = None,
                 batch_size: int = 8, no_repeat_ngram: int | None = None) -> list[str]:
        """Captions of the images at ``paths`` (:func:`caption`: no prompt, beam search with
        ``beam`` beams, default ``config.beam``; at most ``max_len`` + 1 new tokens).
        ``no_repeat_ngram`` is not used (BLIP-2's captioning has none)."""
        from biaslab.models.features import torch_threads
        with torch_threads(self.config.num_threads):
            return caption(self.model.net, self.model.processor, [str(p) for p in paths],
                           max_new_tokens=int(max_len or self.config.max_len) + 1,
                           num_beams=int(beam or self.config.beam), batch_size=batch_size)

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``directory`` (replaced atomically): ``blip2.json`` (config, meta) and
        ``model/`` (``save_pretrained`` of model and processor)."""
        import json
        from biaslab.captioning.training import json_default
        from biaslab.runtime.io import atomic_dir, without_run_stats
        with atomic_dir(directory) as tmp:
            self.model.net.save_pretrained(tmp / "model")
            self.model.processor.save_pretrained(tmp / "model")
            meta = {"arch": ARCH, "format": _FORMAT, "config": dataclasses.asdict(self.config),
                    "meta": without_run_stats(self.meta)}
            (tmp / CONFIG_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True,
                                                      default=json_default) + "\n")
        return Path(directory)

    @classmethod
    def load(cls, directory: str | os.PathLike, num_threads: int | None = None,
             device: str | None = None) -> "Blip2Captioner":
        """Load a :meth:`save`d captioner (offline; ``device`` None = cuda when available).
        Raises ``InputError`` naming the directory when it is not one."""
        import json
        d = Path(directory)
        try:
            data = json.loads((d / CONFIG_FILE).read_text())
            cfg = Blip2CaptionerConfig(**data["config"])
        except (OSError, KeyError, TypeError, ValueError) as e:
            raise InputError(d, f"not a saved BLIP-2 captioner: {e}") from e
        if num_threads is not None:
            cfg.num_threads = num_threads
        model, processor = load(d / "model", local_files_only=True, device=_device(device))
        return cls(Blip2Model(model, processor), cfg, data.get("meta"))


def _device(device: str | None) -> str:
    import torch
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def train_captioner(paths, captions: Sequence[str], caption_image: Sequence[int],
                    val_paths=None, val_captions: Sequence[str] = (),
                    val_caption_image: Sequence[int] = (),
                    config: Blip2CaptionerConfig | None = None, on_epoch=None,
                    progress: bool = False) -> tuple[Blip2Captioner, list[dict]]:
    """Fine-tune BLIP-2 on (image, caption) samples through the shared loop
    (:func:`biaslab.captioning.training.train_samples`: AdamW at ``config.lr``, warm-up +
    linear decay, early stopping on the validation token cross-entropy); only
    :func:`trainable`'s parameters get gradients (the others are skipped by AdamW).

    Args: as :func:`biaslab.captioning.vit_gpt2.train_captioner` (image paths, not features).
    Returns ``(captioner, history)``. Raises ``InputError`` when the checkpoint cannot be
    loaded, ``ValueError`` for inputs that are not paths or disagree in shape.

    Memory: the early-stopping copy of the best weights holds the trainable parameters and
    the buffers only (:func:`biaslab.captioning.training.fit`), not the frozen ViT and OPT.
    """
    import numpy as np

    from biaslab.captioning.training import train_samples
    from biaslab.captioning.vit_gpt2 import path_list
    cfg = config or Blip2CaptionerConfig()

    def build(*_):
        model, processor = load(cfg.model, local_files_only=cfg.local_files_only,
                                device=_device(None))
        trainable(model, cfg.train_vision)
        return Blip2Captioner(Blip2Model(model, processor), cfg)

    x = np.asarray(path_list(paths), dtype=object)
    vx = None if val_paths is None else np.asarray(path_list(val_paths), dtype=object)
    return train_samples(build, x, captions, caption_image, vx, val_captions,
                         val_caption_image, cfg, on_epoch, progress, desc="blip2")


#: the model class of this architecture (``biaslab.captioning.Arch.load``)
MODEL = Blip2Captioner
