"""ClipCap-style image captioner (paper 000 sec. 3.2 and app. B.2; Mokady et al. 2021, "ClipCap:
CLIP Prefix for Image Captioning"): the ``clipcap`` architecture of :mod:`biaslab.captioning`.

Model (ClipCap, "MLP mapping network" variant)::

    v      = (phi(x) - mu) / sigma                 frozen image feature, standardised (F,)
    p_1..k = MLP(v) = W2 tanh(W1 v + b1) + b2      reshaped to a prefix of k embeddings (k, d)
    p(y)   = prod_t p_LM(y_t | p_1..k, y_<t)      causal LM decoder over [prefix ; caption]

``phi`` is a frozen backbone (default EfficientNet-Lite0, 1280-d pooled features, see
:mod:`biaslab.models.features`); ``mu``/``sigma`` are the training mean/std (std floored at
0.1 x its mean over dimensions, as in :mod:`biaslab.models.clipscorer`). The MLP hidden size is
``k * d / 2`` (ClipCap). The loss is the token cross-entropy of the caption and its end token
given the prefix (prefix positions carry no loss), averaged over caption tokens. Both the
mapping network and the decoder are trained (ClipCap's default, not its "only prefix" variant).

Tiers (one ``decoder`` parameter, same code path):

* ``decoder: tiny`` (offline): a ``GPT2LMHeadModel`` built from ``GPT2Config`` (``layers``,
  ``d_model``, ``heads``) and trained from scratch, with a word-level tokenizer estimated on the
  training captions (``tokenizers`` ``WordLevel`` model, NFKC + lower-case normaliser,
  ``Whitespace`` pre-tokenizer (words and punctuation), words seen fewer than ``min_count``
  times -> ``<unk>``), wrapped as ``transformers.PreTrainedTokenizerFast``.
* ``decoder: gpt2`` (paper tier) or any Hugging Face causal LM name / local directory:
  ``AutoModelForCausalLM.from_pretrained`` and its own tokenizer (pad = eos). Loaded with
  ``local_files_only`` unless the config says otherwise: nothing is downloaded by default.

Training: :func:`biaslab.captioning.training.fit` (AdamW, warm-up + linear decay, early
stopping on the validation loss, best weights kept); each (image, caption) pair of the
training manifest is one sample (so the repeated rows of an over-sampled manifest count
repeatedly).

Decoding: beam search (``beam`` beams, Hugging Face ``generate`` with ``inputs_embeds`` = the
prefix, length penalty 1.0 = mean log-probability), at most ``max_len`` caption tokens plus the
end token. Deterministic: no sampling; training is seeded (forked torch RNG, global state
untouched). The evaluation (paper 000 Table 2) is :mod:`biaslab.captioning.evaluation`.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from biaslab.captioning.tokens import (EOS, load_pretrained_tokenizer, tidy_tokens, build_tokenizer,
                                       normalize_caption)
from biaslab.captioning.training import check_samples, check_val, train_samples, val_loss
from biaslab.captioning.training import json_default as _json_default
from biaslab.captioning.training import pad as _pad
from biaslab.captioning.training import standardiser as _standardiser
from biaslab.models.features import torch_threads
from biaslab.runtime.io import InputError, atomic_dir, without_run_stats
from biaslab.runtime.settings import at_least, from_params

TINY = "tiny"
CONFIG_FILE = "captioner.json"
PREFIX_FILE = "prefix.safetensors"
_FORMAT = 1
ARCH = "clipcap"

__all__ = ["CaptionerConfig", "config_from_params", "ClipCapModel", "Captioner",
           "build_captioner", "train_captioner", "TINY", "CONFIG_FILE", "ARCH"]


# --------------------------------------------------------------------------------------------
# configuration


@dataclass
class CaptionerConfig:
    """Hyper-parameters (params.yaml ``captioner``).

    ``decoder``: ``tiny`` or a Hugging Face causal LM name / local dir (paper tier: ``gpt2``).
    Tiny-decoder fields (``layers``, ``d_model``, ``heads``, ``dropout``, ``vocab_size``,
    ``min_count``) are ignored for a pretrained decoder. ``prefix_len``: k prefix embeddings.
    ``max_len``: caption tokens kept in training (longer captions are truncated) and generated
    at most (plus the end token). ``warmup``: fraction of the optimiser steps with a linear
    warm-up. ``beam``: beam width at decoding (1 = greedy). ``no_repeat_ngram``: 0 = off.
    ``image_encoder``/``image_size``: the frozen backbone whose features the model reads
    (recorded, so new images are encoded the same way). ``num_threads``: torch threads
    (1 is fastest on a shared 2-core machine).
    """
    decoder: str = TINY
    layers: int = 2
    d_model: int = 128
    heads: int = 4
    dropout: float = 0.1
    prefix_len: int = 10
    vocab_size: int = 10000
    min_count: int = 2
    max_len: int = 20
    epochs: int = 30
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup: float = 0.05
    batch_size: int = 64
    patience: int = 4
    beam: int = 3
    no_repeat_ngram: int = 0
    seed: int = 0
    image_encoder: str = "efficientnet_lite0"
    image_size: int | None = 224
    num_threads: int | None = 1
    local_files_only: bool = True

    @classmethod
    def from_params(cls, params) -> "CaptionerConfig":
        """From the composed params' group ``captioner`` (:func:`config_from_params`): the
        arch's settings as its registry entry declares them."""
        return config_from_params((params or {}).get("captioner"))


def config_from_params(p: Mapping | None, **overrides) -> CaptionerConfig:
    """``CaptionerConfig`` from a params dict (unknown keys such as ``datasets``/``seeds`` are
    ignored), then ``overrides``; raises ``ValueError`` for a bad value."""
    cfg = from_params(CaptionerConfig, p, "captioner", unknown="ignore", overrides=overrides)
    at_least(cfg, ("layers", "d_model", "heads", "prefix_len", "max_len", "epochs", "batch_size",
                   "beam"), 1, "captioner")
    if cfg.decoder == TINY and cfg.d_model % cfg.heads:
        raise ValueError(f"captioner.d_model ({cfg.d_model}) must be divisible by heads "
                         f"({cfg.heads})")
    if not cfg.lr > 0:
        raise ValueError(f"captioner.lr must be > 0, got {cfg.lr!r}")
    return cfg




# --------------------------------------------------------------------------------------------
# model


def _torch_module():
    import torch
    return torch.nn.Module


class ClipCapModel(_torch_module()):
    """Mapping network + causal LM decoder (see module docstring). ``feat_mean``/``feat_std``
    are buffers (saved with the weights)."""

    def __init__(self, decoder, feature_dim: int, prefix_len: int, dropout: float = 0.0):
        import torch
        from torch import nn
        super().__init__()
        d = int(decoder.config.hidden_size)
        self.feature_dim, self.prefix_len, self.d = int(feature_dim), int(prefix_len), d
        self.register_buffer("feat_mean", torch.zeros(self.feature_dim))
        self.register_buffer("feat_std", torch.ones(self.feature_dim))
        hidden = max(1, (d * self.prefix_len) // 2)
        self.mapper = nn.Sequential(nn.Linear(self.feature_dim, hidden), nn.Tanh(),
                                    nn.Dropout(dropout), nn.Linear(hidden, d * self.prefix_len))
        self.decoder = decoder

    def prefix(self, feats):
        """(b, F) features -> (b, k, d) prefix embeddings."""
        x = (feats - self.feat_mean) / self.feat_std
        return self.mapper(x).view(len(feats), self.prefix_len, self.d)

    def token_losses(self, feats, input_ids, attention_mask):
        """Per-token cross-entropy of ``input_ids`` (b, T) (caption + end token, right-padded;
        ``attention_mask`` 1 on real tokens) given the prefix -> (sum of losses, token count)."""
        import torch
        pre = self.prefix(feats)
        emb = self.decoder.get_input_embeddings()(input_ids)
        x = torch.cat([pre, emb], dim=1)
        mask = torch.cat([torch.ones(pre.shape[:2], dtype=attention_mask.dtype,
                                     device=attention_mask.device), attention_mask], dim=1)
        logits = self.decoder(inputs_embeds=x, attention_mask=mask).logits
        k = self.prefix_len
        pred = logits[:, k - 1:-1]                           # position k-1+t predicts token t
        target = input_ids.masked_fill(attention_mask == 0, -100)
        loss = torch.nn.functional.cross_entropy(pred.reshape(-1, pred.shape[-1]),
                                                 target.reshape(-1), ignore_index=-100,
                                                 reduction="sum")
        return loss, int(attention_mask.sum())


def _build_decoder(cfg: CaptionerConfig, tokenizer):
    if cfg.decoder == TINY:
        from transformers import GPT2Config, GPT2LMHeadModel
        eos = tokenizer.convert_tokens_to_ids(EOS)
        conf = GPT2Config(vocab_size=len(tokenizer), n_positions=cfg.prefix_len + cfg.max_len + 8,
                          n_embd=cfg.d_model, n_layer=cfg.layers, n_head=cfg.heads,
                          resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout,
                          attn_pdrop=cfg.dropout, bos_token_id=eos, eos_token_id=eos,
                          pad_token_id=tokenizer.pad_token_id)
        return GPT2LMHeadModel(conf)
    from transformers import AutoModelForCausalLM
    from biaslab.models.textclf import resolve_model
    m = AutoModelForCausalLM.from_pretrained(resolve_model(cfg.decoder),
                                             local_files_only=cfg.local_files_only)
    m.config.pad_token_id = tokenizer.pad_token_id
    return m


class Captioner:
    """A trained captioner: :class:`ClipCapModel` + tokenizer + config (+ ``meta``: training
    summary). Build with :func:`build_captioner` / :func:`train_captioner`, or
    :meth:`load`; caption with :meth:`generate`."""

    def __init__(self, model: ClipCapModel, tokenizer, config: CaptionerConfig,
                 meta: dict | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.meta = dict(meta or {})

    # -- tokens
    def encode_captions(self, captions: Sequence[str], max_len: int | None = None
                        ) -> list[list[int]]:
        """Token ids of each caption, truncated to ``max_len`` (default ``config.max_len``),
        followed by the end token."""
        n = int(max_len or self.config.max_len)
        eos = self.tokenizer.eos_token_id
        # GPT-2 BPE marks a word start with a leading space: captions start with one, as they
        # follow the prefix mid-"sentence" (harmless for the word-level tokenizer).
        lead = "" if self.config.decoder == TINY else " "
        enc = self.tokenizer([lead + normalize_caption(c) for c in captions],
                             add_special_tokens=False)["input_ids"]
        return [list(ids[:n]) + [eos] for ids in enc]

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids -> caption text (special tokens dropped; word-level tokens re-joined)."""
        text = self.tokenizer.decode(list(ids), skip_special_tokens=True)
        return tidy_tokens(text) if self.config.decoder == TINY else normalize_caption(text)

    # -- inference
    def generate(self, feats: np.ndarray, beam: int | None = None, max_len: int | None = None,
                 batch_size: int = 64, no_repeat_ngram: int | None = None) -> list[str]:
        """Captions for ``feats`` (n, F) backbone features (``config.image_encoder``) by beam
        search (``beam`` beams, default ``config.beam``; 1 = greedy), at most ``max_len``
        tokens (default ``config.max_len``) plus the end token; ``no_repeat_ngram`` (default
        ``config.no_repeat_ngram``; 0 = off) forbids repeating n-grams. Deterministic.

        Raises ``ValueError`` for features of the wrong width."""
        import torch
        from transformers import GenerationConfig
        feats = np.asarray(feats, np.float32)
        if feats.ndim != 2 or feats.shape[1] != self.model.feature_dim:
            raise ValueError(f"features must be (n, {self.model.feature_dim}), got {feats.shape}")
        beam = int(beam or self.config.beam)
        max_len = int(max_len or self.config.max_len)
        eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        gen = GenerationConfig(num_beams=beam, max_new_tokens=max_len + 1, do_sample=False,
                               early_stopping=True, length_penalty=1.0, eos_token_id=eos,
                               pad_token_id=pad, bos_token_id=eos,
                               no_repeat_ngram_size=int(self.config.no_repeat_ngram or 0
                                                        if no_repeat_ngram is None
                                                        else no_repeat_ngram))
        out: list[str] = []
        self.model.eval()
        with torch_threads(self.config.num_threads), torch.inference_mode():
            for s in range(0, len(feats), max(1, int(batch_size))):
                x = torch.from_numpy(feats[s:s + batch_size])
                pre = self.model.prefix(x)
                mask = torch.ones(pre.shape[:2], dtype=torch.long)
                ids = self.model.decoder.generate(inputs_embeds=pre, attention_mask=mask,
                                                  generation_config=gen)
                for row in ids.tolist():
                    if eos in row:
                        row = row[:row.index(eos)]
                    out.append(self.decode(row[:max_len]))
        return out

    def loss(self, feats: np.ndarray, captions: Sequence[str], batch_size: int = 256) -> float:
        """Mean token cross-entropy (nats) of ``captions`` given ``feats`` (row i <-> caption
        i), in eval mode."""
        import torch
        ids = self.encode_captions(captions)
        self.model.eval()
        tot, cnt = 0.0, 0
        with torch_threads(self.config.num_threads), torch.inference_mode():
            for s in range(0, len(ids), batch_size):
                f = torch.from_numpy(np.asarray(feats[s:s + batch_size], np.float32))
                inp, att = _pad(ids[s:s + batch_size], self.tokenizer.pad_token_id)
                lsum, n = self.model.token_losses(f, inp, att)
                tot, cnt = tot + float(lsum), cnt + n
        return tot / max(cnt, 1)

    # -- persistence
    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``directory`` (replaced atomically): ``captioner.json`` (config, format,
        feature_dim, meta), ``prefix.safetensors`` (mapping network + feature mean/std),
        ``decoder/`` (``save_pretrained``) and ``tokenizer/``."""
        from safetensors.torch import save_file
        with atomic_dir(directory) as tmp:
            self.model.decoder.save_pretrained(tmp / "decoder")
            self.tokenizer.save_pretrained(tmp / "tokenizer")
            state = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()
                     if not k.startswith("decoder.")}
            save_file(state, str(tmp / PREFIX_FILE))
            meta = {"format": _FORMAT, "config": dataclasses.asdict(self.config),
                    "feature_dim": self.model.feature_dim, "meta": without_run_stats(self.meta)}
            (tmp / CONFIG_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True,
                                                      default=_json_default) + "\n")
        return Path(directory)

    @classmethod
    def load(cls, directory: str | os.PathLike, num_threads: int | None = None) -> "Captioner":
        """Load a :meth:`save`d captioner (offline). Raises ``InputError`` naming the directory
        when it is not one."""
        from safetensors.torch import load_file
        from transformers import AutoModelForCausalLM, AutoTokenizer
        directory = Path(directory)
        meta_p = directory / CONFIG_FILE
        if not meta_p.is_file():
            raise InputError(directory, f"not a saved captioner (no {CONFIG_FILE}; did "
                                        f"train_captioner run?)")
        meta = json.loads(meta_p.read_text())
        if meta.get("format") != _FORMAT:
            raise InputError(meta_p, f"unsupported format {meta.get('format')!r}")
        cfg = CaptionerConfig(**meta["config"])
        if num_threads is not None:
            cfg = dataclasses.replace(cfg, num_threads=num_threads)
        tok = AutoTokenizer.from_pretrained(directory / "tokenizer", local_files_only=True)
        dec = AutoModelForCausalLM.from_pretrained(directory / "decoder", local_files_only=True)
        model = ClipCapModel(dec, meta["feature_dim"], cfg.prefix_len, cfg.dropout)
        missing = model.load_state_dict(load_file(str(directory / PREFIX_FILE)), strict=False)
        bad = [k for k in missing.missing_keys if not k.startswith("decoder.")]
        if bad or missing.unexpected_keys:
            raise InputError(directory / PREFIX_FILE, f"incomplete weights (missing {bad}, "
                                                      f"unexpected {missing.unexpected_keys})")
        model.eval()
        return cls(model, tok, cfg, meta.get("meta", {}))

    def __repr__(self) -> str:
        c = self.config
        return (f"Captioner(decoder={c.decoder!r}, prefix_len={c.prefix_len}, "
                f"vocab={len(self.tokenizer)}, image_encoder={c.image_encoder!r})")



def build_captioner(config: CaptionerConfig, captions: Sequence[str] = (),
                    feature_dim: int = 1280) -> Captioner:
    """An untrained captioner: tokenizer (tiny: estimated on ``captions``; else the decoder's
    own), decoder (tiny: from ``GPT2Config``; else ``from_pretrained``) and mapping network.
    Initialisation uses the current torch RNG."""
    if config.decoder == TINY:
        if not len(captions):
            raise ValueError("the tiny tokenizer needs training captions")
        tok = build_tokenizer(captions, config.vocab_size, config.min_count)
        dec = _build_decoder(config, tok)
    else:
        from biaslab.models.textclf import resolve_model
        try:
            tok = load_pretrained_tokenizer(resolve_model(config.decoder),
                                             config.local_files_only)
            dec = _build_decoder(config, tok)
        except OSError as e:
            hint = (" (not available offline: use a local directory, the Hugging Face cache, or "
                    "local_files_only: false with network)") if config.local_files_only else ""
            raise InputError(config.decoder, f"cannot load the decoder{hint}: {e}") from e
    return Captioner(ClipCapModel(dec, feature_dim, config.prefix_len, config.dropout), tok,
                     config)


# --------------------------------------------------------------------------------------------
# training


def train_captioner(feats: np.ndarray, captions: Sequence[str], caption_image: Sequence[int],
                    val_feats: np.ndarray | None = None, val_captions: Sequence[str] = (),
                    val_caption_image: Sequence[int] = (), config: CaptionerConfig | None = None,
                    on_epoch: Callable[[int, dict], None] | None = None,
                    progress: bool = False) -> tuple[Captioner, list[dict]]:
    """Train a ClipCap-style captioner (see module docstring).

    Args:
        feats: (n_img, F) float32 frozen backbone features of the training images.
        captions: training captions (one sample each).
        caption_image: (n_cap,) row of ``feats`` each caption describes.
        val_feats, val_captions, val_caption_image: the same for the validation split (early
            stopping on the mean token cross-entropy); empty -> the last epoch is kept.
        config: hyper-parameters (default ``CaptionerConfig()``).
        on_epoch: ``on_epoch(epoch, record)`` after every epoch (DVCLive).

    Returns:
        ``(captioner, history)``; history: one dict per epoch with ``epoch``, ``train_loss``
        (mean token CE over the epoch), ``val_loss`` (when validating), ``lr`` (at the end of
        the epoch), ``seconds``. ``captioner.meta`` holds ``best_epoch``, ``best_val_loss``,
        ``epochs_run``, ``n_train_captions``, ``n_train_images``, ``n_val_captions``,
        ``train_seconds``.

    Raises:
        ValueError: shapes disagree, no training captions, an index out of range.
    """
    import torch
    cfg = config or CaptionerConfig()
    feats = np.asarray(feats, np.float32)
    if feats.ndim != 2 or len(feats) == 0:
        raise ValueError(f"feats must be a non-empty (n, F) array, got {feats.shape}")

    def build(f: np.ndarray, used: np.ndarray, caps: list[str]) -> Captioner:
        cap = build_captioner(cfg, caps, f.shape[1])
        mu, sd = _standardiser(f[used])
        cap.model.feat_mean.copy_(torch.from_numpy(mu))
        cap.model.feat_std.copy_(torch.from_numpy(sd))
        return cap

    return train_samples(build, feats, captions, caption_image, val_feats, val_captions,
                         val_caption_image, cfg, on_epoch, progress, desc="captioner")



#: the model class of this architecture (``biaslab.captioning.Arch.load``)
MODEL = Captioner
