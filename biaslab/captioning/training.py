"""The training loop shared by the captioners trained here (ClipCap, Transformer; paper 000
app. B.2: "we train the models with early stopping ... AdamW").

:func:`fit`: AdamW, linear warm-up (``warmup`` of the steps) then linear decay to 0 over
``epochs``; one optimiser step per mini-batch of a seeded permutation (``torch.Generator``
seeded with ``seed``) of the training samples; gradient norm clipped at 1.0; early stopping on
the validation loss (mean token cross-entropy, nats) with ``patience`` epochs; the
best-validation weights are restored at the end. The architecture supplies the per-batch loss
(:class:`Batches`), so every captioner has the same schedule and stopping rule.

:func:`train_samples`: the rest of every architecture's ``train_captioner`` (input checks,
seeded construction, caption encoding, validation loss, :func:`fit`, the ``meta`` record), so
an architecture only says how to build its model from the training features.

Also the small pieces the architectures share: :func:`pad` (right-padding of token lists),
:func:`standardiser` (per-dimension mean/std of the training features, std floored),
:func:`val_loss` and :func:`json_default` (numpy scalars in saved configs).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Schedule", "fit", "train_samples", "check_samples", "check_val", "val_loss",
           "pad", "standardiser", "json_default"]


@dataclass
class Schedule:
    """Optimiser / stopping settings of :func:`fit` (a view of an architecture's config):
    ``epochs`` (max), ``lr`` (peak), ``weight_decay`` (AdamW), ``warmup`` (fraction of the
    steps in linear warm-up), ``batch_size``, ``patience`` (epochs without a validation
    improvement > 1e-4 before stopping), ``seed`` (the batch order)."""
    epochs: int
    lr: float
    weight_decay: float
    warmup: float
    batch_size: int
    patience: int
    seed: int


def fit(model, n_samples: int, batch_loss: Callable[[list[int]], tuple], schedule: Schedule,
        val_loss: Callable[[], float] | None = None,
        on_epoch: Callable[[int, dict], None] | None = None, progress: bool = False,
        desc: str = "captioner") -> tuple[list[dict], int, float]:
    """Train ``model`` (a ``torch.nn.Module``) in place.

    Args:
        model: its ``parameters()`` are optimised; ``train()``/``eval()`` are toggled.
        n_samples: number of training samples (indices 0..n-1 are permuted each epoch).
        batch_loss: ``batch_loss(indices) -> (sum of token losses (scalar tensor), token
            count)``; the step minimises the mean over the batch's tokens.
        schedule: see :class:`Schedule`.
        val_loss: ``() -> mean validation token CE`` (model already in eval mode), or None
            (no early stopping: the last epoch is kept).
        on_epoch: ``on_epoch(epoch, record)`` after every epoch (DVCLive).

    Returns:
        ``(history, best_epoch, best_val_loss)``; history: one dict per epoch with ``epoch``,
        ``train_loss`` (mean token CE), ``lr`` (at the end of the epoch), ``val_loss`` (when
        validating), ``seconds``. Without validation ``best_epoch`` is the last epoch and
        ``best_val_loss`` is ``inf``.

    The caller seeds the torch RNG (initialisation, dropout) before calling; the batch order
    uses its own generator, so the global state is only advanced by dropout.

    With validation, the model ends with the best epoch's parameters that require gradients
    and its buffers; frozen parameters are never copied (they cannot change).
    """
    import torch
    from tqdm import tqdm
    bs = max(1, int(schedule.batch_size))
    steps_per_epoch = math.ceil(n_samples / bs)
    total = steps_per_epoch * int(schedule.epochs)
    warm = max(1, int(round(float(schedule.warmup) * total)))
    opt = torch.optim.AdamW(model.parameters(), lr=float(schedule.lr),
                            weight_decay=float(schedule.weight_decay))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
    gen = torch.Generator().manual_seed(int(schedule.seed))
    hist: list[dict] = []
    best, best_state, best_epoch, bad = math.inf, None, -1, 0
    # the early-stopping copy holds what training can change: parameters that get gradients
    # and buffers (frozen parameters get no gradient, so AdamW and its weight decay skip them);
    # for BLIP-2 that is the Q-Former side, not the frozen ViT + OPT (~11 GB in fp32)
    changing = ({n for n, p in model.named_parameters() if p.requires_grad}
                | {n for n, _ in model.named_buffers()})
    bar = tqdm(range(int(schedule.epochs)), disable=not progress, desc=desc, unit="ep")
    for epoch in bar:
        t0 = time.perf_counter()
        model.train()
        perm = torch.randperm(n_samples, generator=gen).tolist()
        tot, cnt = 0.0, 0
        for s in range(0, len(perm), bs):
            lsum, n = batch_loss(perm[s:s + bs])
            loss = lsum / max(n, 1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            tot, cnt = tot + float(lsum.detach()), cnt + n
        rec = {"epoch": epoch, "train_loss": tot / max(cnt, 1),
               "lr": float(sched.get_last_lr()[0])}
        if val_loss is not None:
            model.eval()
            rec["val_loss"] = val_loss()
            if rec["val_loss"] < best - 1e-4:
                best, best_epoch, bad = rec["val_loss"], epoch, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()
                              if k in changing}
            else:
                bad += 1
        rec["seconds"] = time.perf_counter() - t0
        hist.append(rec)
        bar.set_postfix({k: round(v, 3) for k, v in rec.items() if k.endswith("loss")})
        if on_epoch is not None:
            on_epoch(epoch, rec)
        if val_loss is not None and bad >= int(schedule.patience):
            break
    if best_state is not None:
        model.load_state_dict(best_state, strict=False)  # a subset of this model's keys
    model.eval()
    if val_loss is None:
        best_epoch = len(hist) - 1
    return hist, best_epoch, best


def train_samples(build: Callable, feats: np.ndarray, captions: Sequence[str],
                  caption_image: Sequence[int], val_feats: np.ndarray | None,
                  val_captions: Sequence[str], val_caption_image: Sequence[int], config,
                  on_epoch: Callable[[int, dict], None] | None, progress: bool,
                  desc: str) -> tuple[object, list[dict]]:
    """Train a captioner on (image features, caption) samples: the shared body of
    :func:`biaslab.captioning.clipcap.train_captioner` and
    :func:`biaslab.captioning.transformer.train_captioner`.

    Args:
        build: ``build(feats, used_rows, captions) -> captioner`` (with ``model`` exposing
            ``token_losses``, ``tokenizer``, ``encode_captions``); called after the torch RNG
            is seeded with ``config.seed``, so its initialisation is deterministic. ``used_rows``:
            the sorted feature rows the training captions use (for the standardiser).
        feats: float32 (n_img, ...) features (pooled (n, F) or grid (n, N, C)), or an object
            array (n_img,) of image paths for a model that reads pixels (ViT + GPT-2).
        captions: training captions (normalised here, :func:`~biaslab.captioning.tokens.
            normalize_caption`); caption_image: (n_cap,) row of ``feats`` of each caption.
        val_feats, val_captions, val_caption_image: the same for the validation split (early
            stopping on the mean token cross-entropy); None / empty -> the last epoch is kept.
        config: the architecture's config (``num_threads``, ``seed``, ``epochs``, ``lr``,
            ``weight_decay``, ``warmup``, ``batch_size``, ``patience``).
        on_epoch, progress, desc: as :func:`fit`.

    Returns:
        ``(captioner, history)``: :func:`fit`'s history; ``captioner.meta`` holds
        ``best_epoch``, ``best_val_loss``, ``epochs_run``, ``n_train_captions``,
        ``n_train_images``, ``n_val_captions``, ``vocab_size``, ``train_seconds``.

    Raises:
        ValueError: no training captions, one image row per caption missing, a row out of
            range, validation features of another per-image shape.
    """
    import torch
    from biaslab.captioning.tokens import normalize_caption
    from biaslab.models.features import torch_threads
    captions = [normalize_caption(c) for c in captions]
    cap_img = np.asarray(caption_image, np.int64)
    check_samples(feats, captions, cap_img)
    has_val = val_feats is not None and len(val_captions) > 0
    if has_val:
        val_feats = _as_rows(val_feats)
        v_img = check_val(val_feats, val_captions, val_caption_image, feats.shape[1:])

    t_start = time.perf_counter()
    with torch_threads(config.num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(config.seed))
        cap = build(feats, np.unique(cap_img), captions)
        ids = cap.encode_captions(captions)
        X = _rows_tensor(feats)
        pad_id = cap.tokenizer.pad_token_id
        val = None
        if has_val:
            v_ids = cap.encode_captions([normalize_caption(c) for c in val_captions])
            VX = _rows_tensor(val_feats[v_img])

            def val():
                return val_loss(cap, VX, v_ids, pad_id)

        def batch_loss(b: list[int]):
            inp, att = pad([ids[i] for i in b], pad_id)
            return cap.model.token_losses(X[cap_img[b]], inp, att)

        sch = Schedule(epochs=int(config.epochs), lr=float(config.lr),
                       weight_decay=float(config.weight_decay), warmup=float(config.warmup),
                       batch_size=int(config.batch_size), patience=int(config.patience),
                       seed=int(config.seed))
        hist, best_epoch, best = fit(cap.model, len(ids), batch_loss, sch, val, on_epoch,
                                     progress, desc=desc)
    cap.meta = {"best_epoch": best_epoch,
                "best_val_loss": best if has_val else None, "epochs_run": len(hist),
                "n_train_captions": len(ids), "n_train_images": int(len(np.unique(cap_img))),
                "n_val_captions": len(val_captions) if has_val else 0,
                "vocab_size": len(cap.tokenizer),
                "train_seconds": round(time.perf_counter() - t_start, 2)}
    return cap, hist


def _as_rows(x) -> np.ndarray:
    """Input rows as an array: float32 features, or an object array of image paths (the
    pixel-reading paper-tier models) kept as is."""
    a = np.asarray(x)
    return a if a.dtype == object else a.astype(np.float32, copy=False)


def _rows_tensor(a: np.ndarray):
    """float32 features -> a torch tensor (shares memory); object arrays (paths) unchanged:
    indexing either with a row array gives the batch ``token_losses`` reads."""
    import torch
    return a if a.dtype == object else torch.from_numpy(a)


def check_samples(feats: np.ndarray, captions: Sequence[str], cap_img: np.ndarray) -> None:
    """ValueError unless there is >= 1 caption, one image row per caption, all in range."""
    if len(captions) == 0 or len(cap_img) != len(captions):
        raise ValueError(f"need >= 1 training caption and one image row per caption, got "
                         f"{len(captions)} captions and {len(cap_img)} rows")
    if cap_img.min() < 0 or cap_img.max() >= len(feats):
        raise ValueError("caption_image has rows outside 0..len(feats)-1")


def check_val(val_feats: np.ndarray, val_captions: Sequence[str],
              val_caption_image: Sequence[int], shape: tuple) -> np.ndarray:
    """The validation rows (int64) after checking them against ``val_feats``; ValueError when
    a row is out of range or the features' per-image shape differs from ``shape``."""
    v_img = np.asarray(val_caption_image, np.int64)
    if len(v_img) != len(val_captions) or (len(v_img) and (v_img.min() < 0 or
                                                           v_img.max() >= len(val_feats))):
        raise ValueError("val_caption_image must give a valid val_feats row per caption")
    if tuple(val_feats.shape[1:]) != tuple(shape):
        raise ValueError(f"val features {val_feats.shape} differ in shape from "
                         f"(n, {', '.join(map(str, shape))})")
    return v_img


def val_loss(model_holder, VX, v_ids, pad_id: int, batch_size: int = 256) -> float:
    """Mean token CE of the validation captions ``v_ids`` given their image features ``VX``
    (row i <-> caption i), eval mode, for any captioner whose ``model`` has
    ``token_losses``."""
    import torch
    model_holder.model.eval()
    tot, cnt = 0.0, 0
    with torch.inference_mode():
        for s in range(0, len(v_ids), batch_size):
            inp, att = pad(v_ids[s:s + batch_size], pad_id)
            lsum, n = model_holder.model.token_losses(VX[s:s + batch_size], inp, att)
            tot, cnt = tot + float(lsum), cnt + n
    return tot / max(cnt, 1)


def pad(seqs: Sequence[Sequence[int]], pad_id: int):
    """Right-pad token lists -> ``(input_ids, attention_mask)``, int64 (b, max length);
    the mask is 1 on real tokens."""
    import torch
    T = max(len(s) for s in seqs)
    inp = torch.full((len(seqs), T), int(pad_id), dtype=torch.long)
    att = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, s in enumerate(seqs):
        inp[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        att[i, :len(s)] = 1
    return inp, att


def standardiser(feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension mean and std (float32 (F,)) of ``feats`` (n, F); the std is floored at
    0.1 x its mean over dimensions (and 1e-6), as in :mod:`biaslab.models.clipscorer`."""
    mu = feats.mean(0)
    sd = feats.std(0)
    floor = 0.1 * float(sd.mean()) if sd.size else 0.0
    return mu.astype(np.float32), np.maximum(sd, max(floor, 1e-6)).astype(np.float32)


def json_default(o):
    """``json.dumps`` default: numpy integers / floats -> Python numbers."""
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
