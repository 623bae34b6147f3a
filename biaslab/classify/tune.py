"""The same hyper-parameter budget for every Table 1 row, Original included.

NH-Fair (ICLR 2026) found that many debiasing methods do not beat a properly tuned standard
model: a method tuned against an untuned baseline wins by its tuning, not by its idea. Here
every row of Table 1 (each training set under ERM and each model-level method) gets the same
budget, drawn the same way:

* **Candidates** (:func:`candidates`): ``trials`` settings of the learning rate and the weight
  decay, drawn without replacement from the grid ``lr x weight_decay`` by one seeded
  permutation (``numpy.random.default_rng(seed)``), so every row sees the same candidates in
  the same order. ``trials`` at or above the grid's size is the whole grid; 0 tunes nothing
  (every row then trains with the same fixed settings: equal budgets at zero trials).
* **Epochs** are chosen on the validation split as in every run (early stopping on its loss,
  the best epoch's weights kept), so each trial's epoch count is its own.
* **Criterion** (:func:`select`): the object mAP on the validation split of the tuning seed's
  model (its utility, the column Table 1 reads first), the largest wins; ties and NaN
  (no labelled validation object) fall back to the lower validation loss, then to the earlier
  candidate. Our choice where NH-Fair tunes per method: a utility criterion is the same for
  every method, so no row can win by its selection rule, and it does not look at the bias
  metrics the table then compares.

The chosen setting then trains every seed of the row; the model's config records the trials
(``tuning``) so that Table 1 can say which baseline it compares against.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

#: the hyper-parameters tuned, in the order a candidate lists them
KEYS = ("lr", "weight_decay")


def candidates(space: Mapping[str, Sequence[float]], trials: int, seed: int = 0
               ) -> list[dict]:
    """The ``trials`` candidate settings every row is tuned over.

    Args:
        space: ``{"lr": [...], "weight_decay": [...]}``: the values of each key of
            :data:`KEYS` (floats; lr > 0, weight decay >= 0), at least one each.
        trials: how many settings (int >= 0); at or above the grid's size, the whole grid.
        seed: the draw's seed (the same for every row).

    Returns:
        ``[{"lr": float, "weight_decay": float}, ...]``, ``min(trials, grid)`` dicts in the
        order drawn.

    Raises:
        ValueError: a key missing; ``biaslab.runtime.validate.ParamError`` (a ValueError) for
            an empty list, a value out of range, ``trials`` or ``seed`` not an integer >= 0
            (:func:`biaslab.runtime.validate.check_tuning`, the params' rules).

    >>> candidates({"lr": [0.001, 0.01], "weight_decay": [0.0]}, 5)
    [{'lr': 0.001, 'weight_decay': 0.0}, {'lr': 0.01, 'weight_decay': 0.0}]
    >>> len(candidates({"lr": [1e-4, 1e-3, 1e-2], "weight_decay": [0.0, 1e-4]}, 4, seed=1))
    4
    """
    # the params' own rules (checked at every stage start), so a library caller meets the same
    from biaslab.runtime.validate import check_tuning
    missing = [k for k in KEYS if k not in space]
    if missing:
        raise ValueError(f"classifier.tuning.{missing[0]}: no value to draw from")
    check_tuning({**{k: space[k] for k in KEYS}, "trials": trials, "seed": seed})
    grid = [{"lr": float(a), "weight_decay": float(b)}
            for a in space["lr"] for b in space["weight_decay"]]
    if int(trials) >= len(grid):
        return grid
    order = np.random.default_rng(int(seed)).permutation(len(grid))[:int(trials)]
    return [grid[i] for i in order]


def _score(hist: Sequence[Mapping], best_epoch: int) -> tuple[float, float]:
    """``(val_mAP, val_loss)`` at the early-stopped epoch; NaN where absent."""
    rec = hist[best_epoch] if hist and 0 <= best_epoch < len(hist) else {}
    return (float(rec.get("val_mAP", math.nan)), float(rec.get("val_loss", math.nan)))


def select(train: Callable[[dict], tuple[object, list[dict]]], cands: Sequence[dict],
           map_fn: Callable = map) -> dict:
    """Train one model per candidate and choose one (module docstring: the criterion).

    Args:
        train: ``train(overrides) -> (classifier, history)``: the row's trainer at the tuning
            seed with ``overrides`` (a candidate) applied to its params; the classifier's
            ``config["best_epoch"]`` indexes ``history`` (as
            :func:`biaslab.classify.train.train_classifier` returns them).
        cands: the candidates (:func:`candidates`), at least one.
        map_fn: how the trials run (``map``, or :func:`biaslab.runtime.parallel.map_jobs`
            bound to the stage's workers); it must return results in ``cands`` order.

    Returns:
        ``{"criterion": "val_mAP", "trials": [{**candidate, "val_mAP", "val_loss",
        "best_epoch"}], "chosen": {**candidate}}``; mAP (0-1, as the training history records it) and
        loss as floats, None where the validation split had none (the record is written as
        JSON).

    Raises:
        ValueError: no candidate.
    """
    if not cands:
        raise ValueError("classifier.tuning: no candidate to choose from")

    def one(c: dict) -> dict:
        clf, hist = train(dict(c))
        be = int(clf.config.get("best_epoch", len(hist) - 1))
        m, lv = _score(hist, be)
        return {**c, "val_mAP": m, "val_loss": lv, "best_epoch": be}

    trials = list(map_fn(one, list(cands)))

    def key(i: int) -> tuple:
        t = trials[i]
        m, lv = t["val_mAP"], t["val_loss"]
        return (-m if math.isfinite(m) else math.inf, lv if math.isfinite(lv) else math.inf, i)

    best = min(range(len(trials)), key=key)
    for t in trials:
        for k in ("val_mAP", "val_loss"):
            t[k] = t[k] if math.isfinite(t[k]) else None
    return {"criterion": "val_mAP", "trials": trials,
            "chosen": {k: trials[best][k] for k in KEYS}}
