"""The "Transformer" captioner of paper 000 Table 2 (app. B.2: "the Transformer-based
encoder-decoder model composed of Vision Transformer and GPT-2", trained with AdamW,
lr 1e-4, batch size 64, early stopping): the ``transformer`` architecture of
:mod:`biaslab.captioning`.

Model (offline tier, trained from scratch)::

    G      = grid of frozen backbone features before pooling     (N = g*g cells, C channels)
    z_0    = W_in ((G - mu) / sigma) + P_enc                      (N, d)  P_enc learned
    Z      = TransformerEncoder(z_0)                              (N, d)  bidirectional
    h_t    = TransformerDecoder(E[y_<t] + P_dec, Z)               causal self-attn + cross-attn
    p(y_t | y_<t, G) = softmax(W_out h_t)

``torch.nn.Transformer`` (pre-norm, GELU, ``batch_first``), the decoder's self-attention
masked causally (position t sees tokens <= t only) and its cross-attention over every grid
cell. The decoder input is ``[<eos>] + y_1..y_{T-1}`` (the end token doubles as the start
token, as in GPT-2) and the loss is the token cross-entropy of ``y_1..y_T, <eos>`` averaged
over caption tokens. ``mu``/``sigma``: per-channel mean/std of the training grids (std floored
as :func:`biaslab.captioning.training.standardiser`). Tokenizer: the tiny word-level one
(:func:`biaslab.captioning.tokens.build_tokenizer`).

Deviations (documented; the paper fine-tunes pretrained ViT + GPT-2 through Hugging Face
``VisionEncoderDecoderModel``): (1) the encoder reads the frozen backbone's last feature map
(EfficientNet-Lite0: 7 x 7 x 1280 at 224 px, pooled to ``grid`` x ``grid``) instead of
fine-tuning a ViT on pixels: a ViT's patch tokens are such a grid, and the frozen grid keeps
the offline tier cheap; (2) encoder and decoder are small and trained from scratch (there are
no offline ViT / GPT-2 weights); (3) the learning rate is the offline tier's 1e-3 (1e-4, the
paper's fine-tuning rate, is for pretrained weights: from scratch on a few hundred captions it
does not leave the unigram distribution within the embedded budget) -- ``lr`` is a parameter.

Training: :func:`biaslab.captioning.training.fit` (the same AdamW / warm-up / early-stopping
loop as ClipCap). Decoding: :func:`biaslab.captioning.decoding.beam_search` (the same rule as
ClipCap's Hugging Face ``generate``: mean log-probability, ``beam`` beams, at most ``max_len``
tokens plus the end token). Deterministic given ``seed``.
"""
from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from biaslab.captioning.decoding import beam_search
from biaslab.captioning.tokens import tidy_tokens, build_tokenizer, normalize_caption
from biaslab.captioning.training import json_default, standardiser, train_samples, val_loss
from biaslab.captioning.transformer_config import (  # noqa: F401 (re-exported)
    FORMAT, ARCH, CONFIG_FILE, SHARED, WEIGHTS_FILE, TransformerConfig, config_from_params)
from biaslab.models.features import torch_threads
from biaslab.runtime.io import InputError, atomic_dir, without_run_stats

__all__ = ["TransformerConfig", "config_from_params", "GridTransformer",
           "TransformerCaptioner", "build_captioner", "train_captioner", "ARCH", "CONFIG_FILE"]


def _torch_module():
    import torch
    return torch.nn.Module


class GridTransformer(_torch_module()):
    """Encoder-decoder over a feature grid (see module docstring). Shapes: ``grid`` (b, N, C)
    float32, tokens (b, T) int64 -> logits (b, T, V)."""

    def __init__(self, vocab: int, feature_dim: int, n_cells: int, d_model: int = 128,
                 heads: int = 4, enc_layers: int = 2, dec_layers: int = 2, ff: int = 512,
                 dropout: float = 0.1, max_positions: int = 32, pad_id: int = 0):
        import torch
        from torch import nn
        super().__init__()
        self.feature_dim, self.n_cells, self.d = int(feature_dim), int(n_cells), int(d_model)
        self.max_positions = int(max_positions)
        self.register_buffer("feat_mean", torch.zeros(self.feature_dim))
        self.register_buffer("feat_std", torch.ones(self.feature_dim))
        self.proj = nn.Linear(self.feature_dim, self.d)
        self.enc_pos = nn.Parameter(torch.randn(self.n_cells, self.d) * 0.02)
        self.embed = nn.Embedding(int(vocab), self.d, padding_idx=int(pad_id))
        self.dec_pos = nn.Embedding(self.max_positions, self.d)
        self.drop = nn.Dropout(dropout)
        with warnings.catch_warnings():   # "enable_nested_tensor ... norm_first": harmless
            warnings.simplefilter("ignore", UserWarning)
            self.transformer = nn.Transformer(
                d_model=self.d, nhead=int(heads), num_encoder_layers=int(enc_layers),
                num_decoder_layers=int(dec_layers), dim_feedforward=int(ff), dropout=dropout,
                activation="gelu", batch_first=True, norm_first=True)
        self.head = nn.Linear(self.d, int(vocab))

    def encode(self, grid):
        """(b, N, C) grid features -> (b, N, d) encoder memory."""
        x = (grid - self.feat_mean) / self.feat_std
        return self.transformer.encoder(self.drop(self.proj(x) + self.enc_pos))

    def decode(self, memory, tokens):
        """(b, N, d) memory, (b, T) decoder input tokens -> (b, T, V) next-token logits; the
        self-attention is causal (output t depends on tokens <= t only)."""
        import torch
        T = tokens.shape[1]
        if T > self.max_positions:
            raise ValueError(f"{T} decoder positions > max_positions {self.max_positions}")
        pos = self.dec_pos(torch.arange(T, device=tokens.device))
        causal = torch.nn.Transformer.generate_square_subsequent_mask(T, device=tokens.device)
        h = self.transformer.decoder(self.drop(self.embed(tokens) + pos), memory,
                                     tgt_mask=causal, tgt_is_causal=True)
        return self.head(h)

    def forward(self, grid, tokens):
        return self.decode(self.encode(grid), tokens)

    def token_losses(self, grid, input_ids, attention_mask, bos: int | None = None):
        """Sum of the token cross-entropies of ``input_ids`` (b, T: caption + end token,
        right-padded, ``attention_mask`` 1 on real tokens) given ``grid``, and the token count.
        The decoder input is ``[bos] + input_ids[:, :-1]`` (``bos`` default: the id stored
        at construction, the end token)."""
        import torch
        b = self.bos_id if bos is None else int(bos)
        start = torch.full((len(input_ids), 1), b, dtype=input_ids.dtype,
                           device=input_ids.device)
        logits = self(grid, torch.cat([start, input_ids[:, :-1]], dim=1))
        target = input_ids.masked_fill(attention_mask == 0, -100)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 target.reshape(-1), ignore_index=-100,
                                                 reduction="sum")
        return loss, int(attention_mask.sum())

    bos_id: int = 0


class TransformerCaptioner:
    """A trained Transformer captioner: :class:`GridTransformer` + tokenizer + config (+
    ``meta``). Build with :func:`build_captioner` / :func:`train_captioner`, or :meth:`load`;
    caption with :meth:`generate` (the same interface as
    :class:`biaslab.captioning.clipcap.Captioner`, on grid features)."""

    arch = ARCH

    def __init__(self, model: GridTransformer, tokenizer, config: TransformerConfig,
                 meta: dict | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.meta = dict(meta or {})
        self.model.bos_id = int(tokenizer.eos_token_id)

    def encode_captions(self, captions: Sequence[str], max_len: int | None = None
                        ) -> list[list[int]]:
        """Token ids of each caption, truncated to ``max_len`` (default ``config.max_len``),
        followed by the end token."""
        n = int(max_len or self.config.max_len)
        eos = self.tokenizer.eos_token_id
        enc = self.tokenizer([normalize_caption(c) for c in captions],
                             add_special_tokens=False)["input_ids"]
        return [list(ids[:n]) + [eos] for ids in enc]

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids -> caption text (special tokens dropped, words re-joined)."""
        return tidy_tokens(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def generate(self, grid: np.ndarray, beam: int | None = None, max_len: int | None = None,
                 batch_size: int = 64, no_repeat_ngram: int | None = None) -> list[str]:
        """Captions for ``grid`` (n, N, C) grid features
        (:func:`biaslab.captioning.data.grid_features` of ``config.image_encoder`` at
        ``config.grid``) by beam search (``beam``, default ``config.beam``; 1 = greedy), at
        most ``max_len`` tokens (default ``config.max_len``) plus the end token.
        Deterministic. Raises ``ValueError`` for a grid of the wrong shape or
        ``no_repeat_ngram`` > 0 (not implemented for this architecture)."""
        import torch
        grid = np.asarray(grid, np.float32)
        want = (self.model.n_cells, self.model.feature_dim)
        if grid.ndim != 3 or grid.shape[1:] != want:
            raise ValueError(f"grid features must be (n, {want[0]}, {want[1]}), got "
                             f"{grid.shape}")
        if no_repeat_ngram:
            raise ValueError("captioner.no_repeat_ngram > 0 is not implemented for the "
                             "transformer captioner")
        beam = int(beam or self.config.beam)
        max_len = int(max_len or self.config.max_len)
        max_len = min(max_len, self.model.max_positions - 1)
        eos = self.tokenizer.eos_token_id
        out: list[str] = []
        self.model.eval()
        with torch_threads(self.config.num_threads), torch.inference_mode():
            for s in range(0, len(grid), max(1, int(batch_size))):
                mem = self.model.encode(torch.from_numpy(grid[s:s + batch_size]))

                def step(rows, toks, mem=mem):
                    logits = self.model.decode(mem[rows], toks)[:, -1]
                    return torch.log_softmax(logits.float(), dim=-1)

                for ids in beam_search(step, len(mem), eos, eos, beam, max_len + 1):
                    out.append(self.decode(ids[:max_len]))
        return out

    def loss(self, grid: np.ndarray, captions: Sequence[str], batch_size: int = 256) -> float:
        """Mean token cross-entropy (nats) of ``captions`` given ``grid`` (row i <->
        caption i), eval mode."""
        import torch
        return val_loss(self, torch.from_numpy(np.asarray(grid, np.float32)),
                         self.encode_captions(captions), self.tokenizer.pad_token_id,
                         batch_size)

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``directory`` (replaced atomically): ``transformer.json`` (arch, format,
        config, shapes, meta), ``model.safetensors`` and ``tokenizer/``."""
        from safetensors.torch import save_file
        with atomic_dir(directory) as tmp:
            self.tokenizer.save_pretrained(tmp / "tokenizer")
            state = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
            save_file(state, str(tmp / WEIGHTS_FILE))
            meta = {"arch": ARCH, "format": FORMAT, "config": dataclasses.asdict(self.config),
                    "feature_dim": self.model.feature_dim, "n_cells": self.model.n_cells,
                    "vocab": len(self.tokenizer), "max_positions": self.model.max_positions,
                    "meta": without_run_stats(self.meta)}
            (tmp / CONFIG_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True,
                                                      default=json_default) + "\n")
        return Path(directory)

    @classmethod
    def load(cls, directory: str | os.PathLike,
             num_threads: int | None = None) -> "TransformerCaptioner":
        """Load a :meth:`save`d captioner (offline). Raises ``InputError`` naming the
        directory when it is not one."""
        from safetensors.torch import load_file
        from transformers import AutoTokenizer
        directory = Path(directory)
        meta_p = directory / CONFIG_FILE
        if not meta_p.is_file():
            raise InputError(directory, f"not a saved transformer captioner (no {CONFIG_FILE}; "
                                        f"did train_captioner run with this arch?)")
        meta = json.loads(meta_p.read_text())
        if meta.get("impl") == "vit_gpt2":          # the paper tier (ViT + GPT-2 on pixels)
            from biaslab.captioning.vit_gpt2 import ViTGPT2Captioner
            return ViTGPT2Captioner.load(directory, num_threads=num_threads)
        if meta.get("format") != FORMAT or meta.get("arch") != ARCH:
            raise InputError(meta_p, f"unsupported format {meta.get('format')!r} / arch "
                                     f"{meta.get('arch')!r}")
        cfg = TransformerConfig(**meta["config"])
        if num_threads is not None:
            cfg = dataclasses.replace(cfg, num_threads=num_threads)
        tok = AutoTokenizer.from_pretrained(directory / "tokenizer", local_files_only=True)
        model = _model(cfg, meta["vocab"], meta["feature_dim"], meta["n_cells"],
                       tok.pad_token_id, meta["max_positions"])
        try:
            model.load_state_dict(load_file(str(directory / WEIGHTS_FILE)), strict=True)
        except (RuntimeError, OSError) as e:
            raise InputError(directory / WEIGHTS_FILE, f"incomplete weights: {e}") from e
        model.eval()
        return cls(model, tok, cfg, meta.get("meta", {}))

    def __repr__(self) -> str:
        c = self.config
        return (f"TransformerCaptioner(grid={c.grid}, layers={c.enc_layers}+{c.dec_layers}, "
                f"d_model={c.d_model}, vocab={len(self.tokenizer)}, "
                f"image_encoder={c.image_encoder!r})")


def _model(cfg: TransformerConfig, vocab: int, feature_dim: int, n_cells: int, pad_id: int,
           max_positions: int | None = None) -> GridTransformer:
    return GridTransformer(vocab, feature_dim, n_cells, cfg.d_model, cfg.heads, cfg.enc_layers,
                           cfg.dec_layers, cfg.ff, cfg.dropout,
                           max_positions or cfg.max_len + 2, pad_id)


def build_captioner(config: TransformerConfig, captions: Sequence[str], n_cells: int,
                    feature_dim: int) -> TransformerCaptioner:
    """An untrained captioner: word-level tokenizer estimated on ``captions`` and a
    :class:`GridTransformer` for (``n_cells``, ``feature_dim``) grids. Initialisation uses
    the current torch RNG. Raises ``ValueError`` without captions."""
    if not len(captions):
        raise ValueError("the tokenizer needs training captions")
    tok = build_tokenizer(captions, config.vocab_size, config.min_count)
    return TransformerCaptioner(_model(config, len(tok), feature_dim, n_cells,
                                       tok.pad_token_id), tok, config)


def train_captioner(grid: np.ndarray, captions: Sequence[str], caption_image: Sequence[int],
                    val_grid: np.ndarray | None = None, val_captions: Sequence[str] = (),
                    val_caption_image: Sequence[int] = (),
                    config: TransformerConfig | None = None,
                    on_epoch: Callable[[int, dict], None] | None = None,
                    progress: bool = False) -> tuple[TransformerCaptioner, list[dict]]:
    """Train a Transformer captioner (see module docstring).

    Args:
        grid: (n_img, N, C) float32 grid features of the training images.
        captions: training captions (one sample each).
        caption_image: (n_cap,) row of ``grid`` each caption describes.
        val_grid, val_captions, val_caption_image: the same for the validation split (early
            stopping on the mean token cross-entropy); empty -> the last epoch is kept.
        config: hyper-parameters (default ``TransformerConfig()``).
        on_epoch: ``on_epoch(epoch, record)`` after every epoch (DVCLive).

    Returns:
        ``(captioner, history)``, as :func:`biaslab.captioning.clipcap.train_captioner`
        (same history records and ``meta`` keys).

    Raises:
        ValueError: shapes disagree, no training captions, an index out of range.
    """
    import torch
    cfg = config or TransformerConfig()
    if cfg.pixels:          # paper tier: ViT + GPT-2 fine-tuned on the images at `grid` (paths)
        from biaslab.captioning import vit_gpt2
        return vit_gpt2.train_captioner(grid, captions, caption_image, val_grid, val_captions,
                                        val_caption_image, cfg, on_epoch, progress)
    grid = np.asarray(grid, np.float32)
    if grid.ndim != 3 or len(grid) == 0:
        raise ValueError(f"grid must be a non-empty (n, cells, C) array, got {grid.shape}")

    def build(g: np.ndarray, used: np.ndarray, caps: list[str]) -> TransformerCaptioner:
        cap = build_captioner(cfg, caps, g.shape[1], g.shape[2])
        mu, sd = standardiser(g[used].reshape(-1, g.shape[-1]))
        cap.model.feat_mean.copy_(torch.from_numpy(mu))
        cap.model.feat_std.copy_(torch.from_numpy(sd))
        return cap

    return train_samples(build, grid, captions, caption_image, val_grid, val_captions,
                         val_caption_image, cfg, on_epoch, progress, desc="transformer")


#: the model class of this architecture (``biaslab.captioning.Arch.load``)
MODEL = TransformerCaptioner
