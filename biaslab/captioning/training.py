"""The training loop shared by the captioners trained here (ClipCap, Transformer; paper 000
app. B.2: "we train the models with early stopping ... AdamW").

:func:`fit`: AdamW, linear warm-up (``warmup`` of the steps) then linear decay to 0 over
``epochs``; one optimiser step per mini-batch of a seeded permutation (``torch.Generator``
seeded with ``seed``) of the training samples; gradient norm clipped at 1.0; early stopping on
the validation loss (mean token cross-entropy, nats) with ``patience`` epochs; the
best-validation weights are restored at the end. The architecture supplies the per-batch loss
(:class:`Batches`), so every captioner has the same schedule and stopping rule.

Also the small pieces the architectures share: :func:`pad` (right-padding of token lists),
:func:`standardiser` (per-dimension mean/std of the training features, std floored) and
:func:`json_default` (numpy scalars in saved configs).
"""
from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Schedule", "fit", "pad", "standardiser", "json_default"]


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
                best_state = copy.deepcopy(model.state_dict())
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
        model.load_state_dict(best_state)
    model.eval()
    if val_loss is None:
        best_epoch = len(hist) - 1
    return hist, best_epoch, best


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
    0.1 x its mean over dimensions (and 1e-6), as in :mod:`biaslab.clipscorer`."""
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
