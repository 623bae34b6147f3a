"""ClipCap-style image captioner (paper 000 sec. 3.2 and app. B.2; Mokady et al. 2021, "ClipCap:
CLIP Prefix for Image Captioning") and the captioning evaluation of paper 000 Table 2.

Model (ClipCap, "MLP mapping network" variant)::

    v      = (phi(x) - mu) / sigma                 frozen image feature, standardised (F,)
    p_1..k = MLP(v) = W2 tanh(W1 v + b1) + b2      reshaped to a prefix of k embeddings (k, d)
    p(y)   = prod_t p_LM(y_t | p_1..k, y_<t)      causal LM decoder over [prefix ; caption]

``phi`` is a frozen backbone (default EfficientNet-Lite0, 1280-d pooled features, see
:mod:`biaslab.features`); ``mu``/``sigma`` are the training mean/std (std floored at
0.1 x its mean over dimensions, as in :mod:`biaslab.clipscorer`). The MLP hidden size is
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

Training: AdamW, linear warm-up (``warmup`` of the steps) then linear decay to 0 over ``epochs``;
each (image, caption) pair of the training manifest is one sample (so the repeated rows of an
over-sampled manifest count repeatedly); early stopping on the validation loss (mean token
cross-entropy) with ``patience`` epochs; the best-validation weights are kept.

Decoding: beam search (``beam`` beams, Hugging Face ``generate`` with ``inputs_embeds`` = the
prefix, length penalty 1.0 = mean log-probability), at most ``max_len`` caption tokens plus the
end token. Deterministic: no sampling; training is seeded (forked torch RNG, global state
untouched).

Evaluation (:func:`caption_metrics`): METEOR, BLEU-4, CIDEr (pycocoevalcap, x100), CLIPScore
(x100, Hessel et al. 2021, with any :class:`biaslab.metrics.quality.ClipScorer`, e.g. the
offline LiT scorer), Ratio (``max(r, 1/r)``), Error (%), LIC / LIC_M / LIC_D and BiasAmp,
through :func:`biaslab.cli.evaluate_captions` (one implementation of the metric plumbing), and
DBA_G / DBA_O (:func:`biaslab.metrics.biasamp.caption_dba`). Over captioner seeds every metric
is a :func:`biaslab.stats.record` (:func:`seed_records`); image gender labels come from one
source (:func:`gender_labels`).
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biaslab.features import torch_threads
from biaslab.io import InputError, atomic_dir, without_run_stats

TINY = "tiny"
CONFIG_FILE = "captioner.json"
PREFIX_FILE = "prefix.safetensors"
_FORMAT = 1
PAD, UNK, EOS = "<pad>", "<unk>", "<eos>"

__all__ = ["CaptionerConfig", "config_from_params", "build_tokenizer", "normalize_caption",
           "ClipCapModel", "Captioner", "build_captioner", "train_captioner",
           "manifest_samples", "manifest_image_table", "image_features", "caption_metrics",
           "clip_score_for", "seed_records", "gender_labels", "apply_libra", "METRICS",
           "GENDER_SOURCES", "TINY"]


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


def config_from_params(p: Mapping | None, **overrides) -> CaptionerConfig:
    """``CaptionerConfig`` from a params dict (unknown keys such as ``datasets``/``seeds`` are
    ignored), then ``overrides``; raises ``ValueError`` for a bad value."""
    names = {f.name for f in dataclasses.fields(CaptionerConfig)}
    d = {k: v for k, v in dict(p or {}).items() if k in names}
    d.update({k: v for k, v in overrides.items() if v is not None})
    cfg = CaptionerConfig(**d)
    for k in ("layers", "d_model", "heads", "prefix_len", "max_len", "epochs", "batch_size",
              "beam"):
        if int(getattr(cfg, k)) < 1:
            raise ValueError(f"captioner.{k} must be >= 1, got {getattr(cfg, k)!r}")
    if cfg.decoder == TINY and cfg.d_model % cfg.heads:
        raise ValueError(f"captioner.d_model ({cfg.d_model}) must be divisible by heads "
                         f"({cfg.heads})")
    if not cfg.lr > 0:
        raise ValueError(f"captioner.lr must be > 0, got {cfg.lr!r}")
    return cfg




# --------------------------------------------------------------------------------------------
# tokenizer


_SPACES = re.compile(r"\s+")
_DETACH = re.compile(r"\s+([.,!?;:])")
_APOS = re.compile(r"\s*'\s*(s|t|re|ve|m|ll|d)\b")


def normalize_caption(text: str) -> str:
    """Whitespace-normalised caption (case and punctuation kept; the tiny tokenizer lower-cases)."""
    return _SPACES.sub(" ", str(text)).strip()


def _tidy(text: str) -> str:
    """Join word-level tokens back into text: no space before punctuation, ``woman ' s`` ->
    ``woman's``."""
    text = _SPACES.sub(" ", text).strip()
    text = _DETACH.sub(r"\1", text)
    return _APOS.sub(r"'\1", text)


def build_tokenizer(captions: Sequence[str], vocab_size: int = 10000, min_count: int = 2):
    """Word-level tokenizer estimated on ``captions`` (tiny tier), as a
    ``transformers.PreTrainedTokenizerFast``.

    Normaliser NFKC + lower-case; pre-tokenizer ``Whitespace`` (``\\w+|[^\\w\\s]+``: words and
    punctuation runs); vocabulary: ``<pad>`` = 0, ``<unk>`` = 1, ``<eos>`` = 2, then the tokens
    seen at least ``min_count`` times, most frequent first (``tokenizers.trainers.
    WordLevelTrainer``), ``vocab_size`` in all. Unknown words map to ``<unk>``. ``bos`` is the
    end token, as in GPT-2 (unused: the image prefix starts every caption).
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=int(vocab_size),
                                        min_frequency=max(1, int(min_count)),
                                        special_tokens=[PAD, UNK, EOS], show_progress=False)
    tok.train_from_iterator([normalize_caption(c) for c in captions], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, unk_token=UNK,
                                   eos_token=EOS, bos_token=EOS, model_max_length=1024)


def _load_pretrained_tokenizer(name: str, local_files_only: bool):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(name, local_files_only=local_files_only)
    if tok.eos_token is None:
        raise InputError(name, "the decoder's tokenizer has no end-of-sequence token")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


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
    from biaslab.textclf import resolve_model
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
        return _tidy(text) if self.config.decoder == TINY else normalize_caption(text)

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



def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _pad(seqs: Sequence[Sequence[int]], pad_id: int):
    import torch
    T = max(len(s) for s in seqs)
    inp = torch.full((len(seqs), T), int(pad_id), dtype=torch.long)
    att = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, s in enumerate(seqs):
        inp[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        att[i, :len(s)] = 1
    return inp, att


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
        from biaslab.textclf import resolve_model
        try:
            tok = _load_pretrained_tokenizer(resolve_model(config.decoder),
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


def _standardiser(feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu = feats.mean(0)
    sd = feats.std(0)
    floor = 0.1 * float(sd.mean()) if sd.size else 0.0
    return mu.astype(np.float32), np.maximum(sd, max(floor, 1e-6)).astype(np.float32)


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
    captions = [normalize_caption(c) for c in captions]
    cap_img = np.asarray(caption_image, np.int64)
    if feats.ndim != 2 or len(feats) == 0:
        raise ValueError(f"feats must be a non-empty (n, F) array, got {feats.shape}")
    if len(captions) == 0 or len(cap_img) != len(captions):
        raise ValueError(f"need >= 1 training caption and one image row per caption, got "
                         f"{len(captions)} captions and {len(cap_img)} rows")
    if cap_img.min() < 0 or cap_img.max() >= len(feats):
        raise ValueError("caption_image has rows outside 0..len(feats)-1")
    has_val = val_feats is not None and len(val_captions) > 0
    if has_val:
        val_feats = np.asarray(val_feats, np.float32)
        v_img = np.asarray(val_caption_image, np.int64)
        if len(v_img) != len(val_captions) or (len(v_img) and (v_img.min() < 0 or
                                                               v_img.max() >= len(val_feats))):
            raise ValueError("val_caption_image must give a valid val_feats row per caption")
        if val_feats.shape[1] != feats.shape[1]:
            raise ValueError(f"val features {val_feats.shape} differ in width from "
                             f"{feats.shape}")

    t_start = time.perf_counter()
    with torch_threads(cfg.num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(cfg.seed))
        cap = build_captioner(cfg, captions, feats.shape[1])
        mu, sd = _standardiser(feats[np.unique(cap_img)])
        cap.model.feat_mean.copy_(torch.from_numpy(mu))
        cap.model.feat_std.copy_(torch.from_numpy(sd))
        ids = cap.encode_captions(captions)
        X = torch.from_numpy(feats)
        if has_val:
            v_ids = cap.encode_captions([normalize_caption(c) for c in val_captions])
            VX = torch.from_numpy(val_feats[v_img])
        pad = cap.tokenizer.pad_token_id
        bs = max(1, int(cfg.batch_size))
        steps_per_epoch = math.ceil(len(ids) / bs)
        total = steps_per_epoch * int(cfg.epochs)
        warm = max(1, int(round(float(cfg.warmup) * total)))
        opt = torch.optim.AdamW(cap.model.parameters(), lr=float(cfg.lr),
                                weight_decay=float(cfg.weight_decay))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
        gen = torch.Generator().manual_seed(int(cfg.seed))
        hist: list[dict] = []
        best, best_state, best_epoch, bad = math.inf, None, -1, 0
        from tqdm import tqdm
        bar = tqdm(range(int(cfg.epochs)), disable=not progress, desc="captioner", unit="ep")
        for epoch in bar:
            t0 = time.perf_counter()
            cap.model.train()
            perm = torch.randperm(len(ids), generator=gen).tolist()
            tot, cnt = 0.0, 0
            for s in range(0, len(perm), bs):
                b = perm[s:s + bs]
                inp, att = _pad([ids[i] for i in b], pad)
                lsum, n = cap.model.token_losses(X[cap_img[b]], inp, att)
                loss = lsum / max(n, 1)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(cap.model.parameters(), 1.0)
                opt.step()
                sched.step()
                tot, cnt = tot + float(lsum.detach()), cnt + n
            rec = {"epoch": epoch, "train_loss": tot / max(cnt, 1),
                   "lr": float(sched.get_last_lr()[0])}
            if has_val:
                rec["val_loss"] = _val_loss(cap, VX, v_ids, pad)
                if rec["val_loss"] < best - 1e-4:
                    best, best_epoch, bad = rec["val_loss"], epoch, 0
                    best_state = copy.deepcopy(cap.model.state_dict())
                else:
                    bad += 1
            rec["seconds"] = time.perf_counter() - t0
            hist.append(rec)
            bar.set_postfix({k: round(v, 3) for k, v in rec.items() if k.endswith("loss")})
            if on_epoch is not None:
                on_epoch(epoch, rec)
            if has_val and bad >= int(cfg.patience):
                break
        if best_state is not None:
            cap.model.load_state_dict(best_state)
        cap.model.eval()
    cap.meta = {"best_epoch": best_epoch if has_val else len(hist) - 1,
                "best_val_loss": best if has_val else None, "epochs_run": len(hist),
                "n_train_captions": len(ids), "n_train_images": int(len(np.unique(cap_img))),
                "n_val_captions": len(val_captions) if has_val else 0,
                "vocab_size": len(cap.tokenizer),
                "train_seconds": round(time.perf_counter() - t_start, 2)}
    return cap, hist


def _val_loss(cap: Captioner, VX, v_ids, pad: int, batch_size: int = 256) -> float:
    import torch
    cap.model.eval()
    tot, cnt = 0.0, 0
    with torch.inference_mode():
        for s in range(0, len(v_ids), batch_size):
            inp, att = _pad(v_ids[s:s + batch_size], pad)
            lsum, n = cap.model.token_losses(VX[s:s + batch_size], inp, att)
            tot, cnt = tot + float(lsum), cnt + n
    return tot / max(cnt, 1)


# --------------------------------------------------------------------------------------------
# manifests and features


def _path_id(path: str) -> int:
    """Stable negative int64 id of a path (feature-cache key of an image that has no COCO id of
    its own, e.g. a counterfactual)."""
    h = int.from_bytes(hashlib.blake2b(str(path).encode(), digest_size=8).digest(), "big")
    return -(h & 0x7FFF_FFFF_FFFF_FFFF) - 1


def manifest_image_table(manifest: pd.DataFrame) -> pd.DataFrame:
    """Distinct images of a training manifest (``biaslab.datasets``) -> DataFrame
    ``image_id, path`` for :func:`biaslab.features.encode_cached`.

    A real image keeps its COCO ``image_id`` (so the ``features`` stage's cache is reused); a
    counterfactual image (``counterfactual`` True: same source id, another file) gets a stable
    negative id derived from its path."""
    cols = {"image_id", "path"} - set(manifest.columns)
    if cols:
        raise InputError("manifest", f"missing column(s) {sorted(cols)}")
    m = manifest.drop_duplicates("path")
    cf = m["counterfactual"].astype(bool) if "counterfactual" in m.columns else \
        pd.Series(False, index=m.index)
    ids = [(_path_id(p) if c else int(i)) for i, p, c in zip(m["image_id"], m["path"], cf)]
    out = pd.DataFrame({"image_id": np.asarray(ids, np.int64), "path": m["path"].astype(str)})
    dup = out["image_id"].duplicated()
    if dup.any():
        raise InputError("manifest", f"image {int(out.loc[dup, 'image_id'].iloc[0])} appears with "
                                     f"several paths but is not marked counterfactual")
    return out.reset_index(drop=True)


def manifest_samples(manifest: pd.DataFrame, table: pd.DataFrame | None = None
                     ) -> tuple[list[str], np.ndarray]:
    """One training sample per (manifest row, caption): ``(captions, rows)`` where ``rows[j]``
    is the row of ``table`` (default ``manifest_image_table(manifest)``) holding the image of
    caption j. Repeated manifest rows (over-sampling) give repeated samples."""
    table = manifest_image_table(manifest) if table is None else table
    pos = {p: k for k, p in enumerate(table["path"])}
    caps, rows = [], []
    for p, cs in zip(manifest["path"].astype(str), manifest["captions"]):
        for c in list(cs if cs is not None else []):
            if isinstance(c, str) and c.strip():
                caps.append(c)
                rows.append(pos[p])
    return caps, np.asarray(rows, np.int64)


def image_features(table: pd.DataFrame, cache_dir: str | os.PathLike,
                   image_encoder: str = "efficientnet_lite0", image_size: int | None = 224,
                   batch_size: int = 32, num_threads: int | None = 1,
                   progress: bool = False, stats: dict | None = None) -> np.ndarray:
    """(n, F) features of ``table`` (image_id, path) rows, in order, through the shared
    per-image cache (:func:`biaslab.features.encode_cached`)."""
    from biaslab.features import encode_cached
    _, f = encode_cached(table[["image_id", "path"]], cache_dir, image_encoder,
                         image_size=image_size, batch_size=batch_size, num_threads=num_threads,
                         progress=progress, stats=stats)
    return f


# --------------------------------------------------------------------------------------------
# evaluation


def clip_score_for(scorer, captions: Sequence[str], image_paths: Sequence[str] | None = None,
                   image_feats: np.ndarray | None = None, prefix: str | None = None) -> float:
    """CLIPScore x100 (Hessel et al. 2021; paper 000 Table 2 "CS") of ``captions``.

    With a LiT scorer (:class:`biaslab.clipscorer.LiTScorer`) whose image backbone produced
    ``image_feats``, the cached features are projected directly (no re-encoding); otherwise
    the scorer encodes ``image_paths``. ``prefix``: None = "A photo depicts " when the LiT
    scorer was trained with ``prefix_prob > 0`` (or for any other scorer), else "" (a LiT
    scorer that never saw the prefix would be scored off-distribution)."""
    from biaslab.metrics.quality import clip_score, clip_score_with
    cfg = getattr(scorer, "config", None)
    is_lit = isinstance(cfg, dict) and cfg.get("type") in (None, "lit") and "d_img" in cfg
    if prefix is None:
        prefix = (cfg.get("prefix", "A photo depicts ") if float(cfg.get("prefix_prob", 0)) > 0
                  else "") if is_lit else "A photo depicts "
    if is_lit and image_feats is not None and np.shape(image_feats)[1] == cfg["d_img"]:
        img = scorer.encode_images(np.asarray(image_feats, np.float32))
        txt = scorer.encode_texts([prefix + c for c in captions])
        return 100.0 * clip_score(img, txt)
    if image_paths is None:
        raise ValueError("clip_score_for needs image paths for this scorer")
    return 100.0 * clip_score_with(scorer, list(image_paths), list(captions), prefix=prefix)


#: flat metric names of :func:`caption_metrics` (paper 000 Table 2 + thesis Table 2.1), the
#: keys of each row of ``metrics/captioning.json``. ``Error`` is capitalised on purpose: DVC
#: reads any metrics key named exactly ``error`` as a load error (issue 14).
METRICS = ("METEOR", "BLEU-4", "CIDEr", "CLIPScore", "Ratio", "Error", "LIC", "LIC_M",
           "LIC_D", "BiasAmp", "DBA_G", "DBA_O")

#: gender label sources of the captioning evaluation (param ``eval_captioner.gender_source``).
GENDER_SOURCES = ("auto", "perceived", "caption")


def caption_metrics(predictions: Mapping[int, str], genders: Mapping[int, str],
                    human: Mapping[int, Sequence[str]], *, scorer=None,
                    image_paths: Mapping[int, str] | None = None,
                    image_feats: Mapping[int, np.ndarray] | None = None, words: str = "lic",
                    classifier: str = "lstm", preset: str = "ci", seeds: int = 3,
                    num_threads: int | None = 1, biasamp_min_count: int = 100,
                    metrics: Sequence[str] = ("ratio", "error", "biasamp", "lic", "quality"),
                    progress: bool = False, train_captions: Sequence[str] | None = None,
                    image_objects: Mapping[int, Sequence[str]] | None = None
                    ) -> tuple[dict, dict]:
    """All captioning metrics of one results set (one captioner seed) -> ``(flat, details)``.

    ``flat`` has the keys of :data:`METRICS`: a float, ``inf`` for a Ratio whose model never
    says "woman" or never "man" (r = 0 or infinite: counted by :func:`seed_records`, never
    dropped), or None when not computable (LIC when a gender has too few images, CLIPScore
    without a scorer, DBA without ``image_objects``, BiasAmp with no word in L); plus
    ``ratio_raw`` (#man/#woman) and ``n_images``. ``LIC``/``LIC_M``/``LIC_D`` are the means
    over the LIC classifier seeds (``seeds``) of this one results set; their spread over LIC
    seeds is in ``details["LIC_*_std"]``.

    ``details`` is :func:`biaslab.cli.evaluate_captions`'s dict (counts, LIC per-seed details,
    BiasAmp reference, skipped reasons) plus ``CLIPScore`` / ``CLIPScore_note`` and ``DBA``.

    Bias metrics use images labelled female/male in ``genders``; quality metrics every
    prediction with human captions. CLIPScore over every prediction (needs ``image_feats`` or
    ``image_paths``). BiasAmp's reference is ``train_captions`` (the training set's human
    captions, thesis 2.8.2 / LIBRA supp. 2) when given, else ``human``. DBA_G / DBA_O (thesis
    Eqs. 2.12-2.14, :func:`biaslab.metrics.biasamp.caption_dba`) need ``image_objects``
    (image id -> MSCOCO categories annotated on it); only labelled images WITH an entry are
    used (an image without one has an unknown object set, e.g. most coco-mini images);
    DBA_O's reference is the objects mentioned in ``human`` captions when given.
    """
    from biaslab.cli import evaluate_captions
    det = evaluate_captions(dict(predictions), dict(genders), dict(human), tuple(metrics),
                            words, classifier, preset, seeds, num_threads, progress,
                            biasamp_min_count, None, train_captions)
    ids = sorted(predictions)
    if scorer is None:
        det["CLIPScore_note"] = "skipped: no CLIP scorer (data/scorer missing)"
        cs = None
    else:
        feats = np.stack([image_feats[i] for i in ids]) if image_feats is not None else None
        paths = [image_paths[i] for i in ids] if image_paths is not None else None
        cs = clip_score_for(scorer, [predictions[i] for i in ids], paths, feats)
        det["CLIPScore"] = cs
    dba = {"DBA_G": None, "DBA_O": None}
    if image_objects is not None:
        from biaslab.metrics.biasamp import caption_dba
        gid = [i for i in ids if genders.get(i) in ("female", "male") and i in image_objects]
        d = caption_dba([predictions[i] for i in gid], [genders[i] for i in gid],
                        [image_objects.get(i, ()) for i in gid], words=words,
                        human_captions=([list(human.get(i) or []) for i in gid]
                                        if human else None))
        dba = {"DBA_G": d["DBA_G"], "DBA_O": d["DBA_O"]}
        det["DBA"] = {k: d[k] for k in ("DBA_G", "DBA_O", "n_images", "n_objects")}
    else:
        det["DBA"] = {"skipped": "no object annotations given"}
    q = det.get("quality", {})
    r = det.get("Ratio", {})
    flat = {"METEOR": q.get("METEOR"), "BLEU-4": q.get("BLEU-4"), "CIDEr": q.get("CIDEr"),
            "CLIPScore": cs, "Ratio": r.get("ratio_max"), "ratio_raw": r.get("ratio"),
            "Error": det.get("Error"),
            "LIC": det.get("LIC"), "LIC_M": det.get("LIC_M"), "LIC_D": det.get("LIC_D"),
            "BiasAmp": (det.get("BiasAmp") or {}).get("ba"), **dba, "n_images": len(ids)}
    return {k: _number(v) for k, v in flat.items()}, det


def _number(v):
    """int stays int; a float stays (+-inf kept: an infinite Ratio is counted, not dropped);
    NaN, dicts (``{"skipped": ...}``) and None -> None (missing)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(float(v)) else float(v)
    return None


def seed_records(rows: Sequence[Mapping[str, Any]], keys: Sequence[str] = METRICS,
                 seeds: Sequence[int] | None = None) -> dict:
    """One row of ``metrics/captioning.json``: every metric over captioner seeds as a
    :func:`biaslab.stats.record`, plus the per-seed values.

    Args:
        rows: one :func:`caption_metrics` ``flat`` dict per captioner seed.
        keys: the metrics to summarise.
        seeds: the captioner seed of each row (default 0..n-1).

    Returns:
        ``{key: stats.record(values over seeds) for key in keys, "per_seed": [{"seed": s,
        key: value, ...}, ...]}``. A None value (e.g. a LIC skipped for too few images) is
        counted in the record's ``n_missing``; an infinite one (a Ratio with r = 0 or inf) in
        ``n_inf`` and never dropped (the mean is then None, see :mod:`biaslab.stats`). In
        ``per_seed`` an infinite value is written as the string ``"inf"`` (strict JSON), a
        missing one as null.

    LIC over two kinds of seeds (decision): each captioner seed's LIC / LIC_M / LIC_D is
    already the mean over the LIC classifier seeds (``lic.seeds``, thesis 2.5: 10 seeds) of
    that captioner's captions; the record is then over captioner seeds, so its ``ci95`` is
    the spread of captioner training, with the LIC-classifier noise averaged inside each
    seed's value (the per-LIC-seed values stay in ``data/captions/eval.json``).

    Raises:
        ValueError: a value that is not a number; ``seeds`` of another length than ``rows``.
    """
    from biaslab import stats
    seeds = list(range(len(rows))) if seeds is None else [int(x) for x in seeds]
    if len(seeds) != len(rows):
        raise ValueError(f"{len(seeds)} seeds for {len(rows)} rows")
    out: dict[str, Any] = {k: stats.record([r.get(k) for r in rows]) for k in keys}

    def cell(v):
        if v is None:
            return None
        v = float(v)
        return v if math.isfinite(v) else ("inf" if v > 0 else "-inf")

    out["per_seed"] = [{"seed": s, **{k: cell(r.get(k)) for k in keys}}
                       for s, r in zip(seeds, rows)]
    return out


def gender_labels(source: str, perceived: pd.DataFrame | None,
                  caption_labels: pd.DataFrame | None) -> tuple[dict[int, str], str]:
    """Image gender labels of the captioning evaluation, from ONE documented source (issue 12
    item 11; the same rule in stages ``eval_captioner`` and ``human_bias``).

    Args:
        source: ``"perceived"``: crowd-sourced perceived gender (``perceived_gender.parquet``,
            columns ``image_id, perceived_gender``; COCO: Zhao et al. 2021 annotations, the
            labels paper 000 / the thesis evaluate against); ``"caption"``: labels derived
            from the human captions' gender words (``labels/images.parquet``, columns
            ``image_id, gender``; GenSynth / paper 000 sec. 3.1 rule); ``"auto"``: perceived
            when that table has any female/male label, else caption.
        perceived: the perceived-gender table, or None when the source has none.
        caption_labels: the caption-derived label table, or None.

    Returns:
        ``({image_id: "female"/"male"}, used)`` with ``used`` in ``("perceived",
        "caption")``; other values (unsure, both, none) are left out.

    Raises:
        InputError: an unknown source, or the chosen source has no female/male label.
    """
    if source not in GENDER_SOURCES:
        raise InputError("params.yaml", f"eval_captioner.gender_source must be one of "
                                        f"{list(GENDER_SOURCES)}, got {source!r}")

    def table(df, col):
        if df is None or df.empty:
            return {}
        df = df[df[col].isin(["female", "male"])]
        return {int(i): str(g) for i, g in zip(df["image_id"], df[col])}

    per = table(perceived, "perceived_gender")
    used = "perceived" if source == "perceived" or (source == "auto" and per) else "caption"
    labels = per if used == "perceived" else table(caption_labels, "gender")
    if not labels:
        where = ("data/prepared/perceived_gender.parquet" if used == "perceived"
                 else "data/labels/images.parquet")
        raise InputError(where, f"no female/male {used} gender label "
                                f"(eval_captioner.gender_source={source})")
    return labels, used


# --------------------------------------------------------------------------------------------
# LIBRA


def apply_libra(dcg_dir: str | os.PathLike, captions: Sequence[str], image_table: pd.DataFrame,
                cache_dir: str | os.PathLike, seed: int = 0, num_threads: int | None = 1,
                num_beams: int | None = None) -> list[str]:
    """LIBRA on top of a captioner (paper 003 sec. 4 "Inference"; paper 000 Table 2 "LIBRA"):
    the DCG at ``dcg_dir`` (``biaslab.libra.dcg.save``) debiases ``captions`` (row i of
    ``image_table`` (image_id, path) is caption i's image). Features-mode DCGs read the frozen
    backbone features recorded in their settings (through the shared cache); pixel-mode DCGs
    read the image files. Masking is seeded (``seed``); ``num_beams`` None = the DCG's own
    setting (the same call as stage ``dcg_apply`` / ``biaslab libra debias``).

    Raises ``InputError`` when ``dcg_dir`` is not a saved DCG."""
    from biaslab.libra import dcg as dcglib
    try:
        model = dcglib.load(dcg_dir, num_threads=num_threads)
    except (FileNotFoundError, ValueError) as e:
        raise InputError(dcg_dir, str(e)) from e
    s = model.settings
    if s.image_input == dcglib.FEATURES:
        images = image_features(image_table, cache_dir, s.backbone, s.image_size,
                                num_threads=num_threads)
    else:
        images = image_table["path"].astype(str).tolist()
    return dcglib.debias(model, list(captions), images, num_beams=num_beams, seed=seed)
