"""Residue check of the person masks and of the counterfactuals.

Paper 000 (appendix A.1) erases the selected person under omega and fills omega with a person
of the other group. Where omega is tighter than the person (a COCO polygon misses hair, a
sleeve, a bag), parts of the original person, and with them its gender cue, stay beside the
new one. Two measurements, both with one gender classifier:

* the **gender probe**: a logistic regression (scikit-learn, standardised features, C = 1)
  on the frozen backbone features of the real images, cross-fitted over ``folds`` folds (an
  image is always scored by a probe that did not train on it);
* **erased AUC** per mask shape: the probe's ROC AUC (x100) for the source gender on the
  *erased, unfilled* images (omega painted a constant grey, :func:`erase`). What it reads
  there is the person's residue plus the gender cue of the scene around omega (the planted
  context). The box erases every pixel of the person, so ``erased AUC(polygon) - erased
  AUC(box)`` bounds the polygon's residue from above (the box also erases the context
  between the polygon and the box); 50 = nothing of gender is left;
* **target AUC** of the run's counterfactuals (the selected candidate per (image, group),
  whatever the backend): the probe's AUC for the *target* group on the other-group
  counterfactuals. 100 = they read as the new group, 50 = as neither, < 50 = as the source
  gender (the original person shows through); beside it the same on the same-group
  counterfactuals and the probe's own AUC on the real images (its skill).

AUCs are computed over the pooled cross-fitted scores with a percentile bootstrap 95 % CI
over source images (:func:`biaslab.runtime.stats.bootstrap`; paired where two are compared).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
from PIL import Image

#: the fill of the erased region: a constant mid grey (no colour of the person or scene; the
#: black box of paper 000's Ratio protocol looked like a dark torso on the synthetic data)
ERASE_FILL = 127


def erase(image: np.ndarray, mask: np.ndarray, fill: int = ERASE_FILL) -> np.ndarray:
    """``image`` (H, W, 3) uint8 with the pixels where ``mask`` (H, W; nonzero = omega) is set
    painted ``fill`` (0-255). Raises ValueError when the shapes differ."""
    img = np.asarray(image)
    m = np.asarray(mask)
    if img.ndim != 3 or m.shape != img.shape[:2]:
        raise ValueError(f"mask {m.shape} does not match image {img.shape}")
    out = img.copy()
    out[m > 0] = int(fill)
    return out


def keep_only(image: np.ndarray, mask: np.ndarray, fill: int = ERASE_FILL) -> np.ndarray:
    """The complement of :func:`erase`: ``image`` (H, W, 3) uint8 with every pixel OUTSIDE
    ``mask`` (nonzero = omega, the masked persons) painted ``fill``, so a probe on it sees the
    person and not the scene (the skin-tone check). A mask of another size is resized
    to the image (nearest neighbour: a counterfactual may be stored at another resolution)."""
    img = np.asarray(image)
    m = np.asarray(mask)
    if img.ndim != 3:
        raise ValueError(f"expected an (H, W, 3) image, got {img.shape}")
    if m.shape != img.shape[:2]:
        m = np.asarray(Image.fromarray((m > 0).astype(np.uint8) * 255).resize(
            (img.shape[1], img.shape[0]), Image.NEAREST))
    return erase(img, (m == 0).astype(np.uint8), fill)


def cross_fit_scores(train_feats: np.ndarray, train_man: np.ndarray,
                     eval_sets: Mapping[str, tuple[np.ndarray, np.ndarray]], folds: int = 5,
                     seed: int = 0) -> dict[str, np.ndarray]:
    """Cross-fitted P(man) of the gender probe (module docstring).

    Args:
        train_feats: float (n, d) features of the real images; ``train_man`` bool (n,).
        eval_sets: name -> (features (k, d), source (k,) int row index into the n real images
            each row derives from); a row is scored by the probe of the fold its source is
            held out in. A source of -1 (a row whose image is not among the n, e.g. a
            counterfactual of an image without a skin-tone label) gets the mean P over the
            fold probes: none of them saw it.
        folds: StratifiedKFold splits (shuffled with ``seed``); at most the smaller group's size.
    Returns: name -> float (k,) P(man). Raises ValueError with fewer than 2 images per gender.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    x = np.asarray(train_feats, float)
    y = np.asarray(train_man, bool)
    k = min(int(folds), int(y.sum()), int((~y).sum()))
    if k < 2:
        raise ValueError(f"the gender probe needs >= 2 images per gender, got {int(y.sum())} "
                         f"men and {int((~y).sum())} women")
    fold_of = np.zeros(len(y), int)
    for f, (_, te) in enumerate(StratifiedKFold(k, shuffle=True, random_state=seed)
                                .split(x, y)):
        fold_of[te] = f
    out = {name: np.full(len(src), np.nan) for name, (_, src) in eval_sets.items()}
    unseen = {name: np.flatnonzero(np.asarray(src, int) < 0) for name, (_, src) in
              eval_sets.items()}
    for name, rows in unseen.items():
        if len(rows):
            out[name][rows] = 0.0
    for f in range(k):
        probe = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
        probe.fit(x[fold_of != f], y[fold_of != f])
        for name, (feats, src) in eval_sets.items():
            s = np.asarray(src, int)
            rows = np.flatnonzero((s >= 0) & (fold_of[np.maximum(s, 0)] == f))
            if len(rows):
                out[name][rows] = probe.predict_proba(np.asarray(feats, float)[rows])[:, 1]
            if len(unseen[name]):
                out[name][unseen[name]] += probe.predict_proba(
                    np.asarray(feats, float)[unseen[name]])[:, 1] / k
    return out


def auc(truth_man: np.ndarray, p_man: np.ndarray) -> float | None:
    """ROC AUC x100 of P(man) for the boolean truth (None with one class), as the
    Mann-Whitney U of the men's scores over the women's divided by n_men n_women
    (``scipy.stats.mannwhitneyu``, mid-ranks for ties): equal to scikit-learn's
    ``roc_auc_score`` to 1e-16 and about 3x faster, which matters inside the bootstrap (2,000
    resamples per interval: 49 of the stage's 56 s with ``roc_auc_score``)."""
    from scipy.stats import mannwhitneyu
    t = np.asarray(truth_man, bool)
    if t.all() or not t.any():
        return None
    s = np.asarray(p_man, float)
    u = mannwhitneyu(s[t], s[~t], method="asymptotic", use_continuity=False).statistic
    return float(100.0 * u / (t.sum() * (~t).sum()))


def auc_ci(truth_man: np.ndarray, p_man: np.ndarray, seed: int = 0) -> dict:
    """:func:`auc` with its percentile bootstrap 95 % CI over rows (:func:`biaslab.runtime.stats.bootstrap`)."""
    from biaslab.runtime import stats
    return stats.bootstrap(auc, np.asarray(truth_man, bool), np.asarray(p_man, float),
                           seed=seed)


def auc_difference(truth_man: np.ndarray, p_a: np.ndarray, p_b: np.ndarray,
                   seed: int = 0) -> dict:
    """AUC(p_a) - AUC(p_b) on the same rows (x100 points), paired bootstrap 95 % CI."""
    from biaslab.runtime import stats

    def diff(t, a, b):
        x, y = auc(t, a), auc(t, b)
        return None if x is None or y is None else x - y
    return stats.bootstrap(diff, np.asarray(truth_man, bool), np.asarray(p_a, float),
                           np.asarray(p_b, float), seed=seed)
