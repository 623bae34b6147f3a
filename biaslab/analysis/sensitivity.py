"""Feature sensitivity of the classifiers' bias metrics: how much each metric moves when only
the non-person features of the test images are perturbed (Hirota et al., "Bias in Gender Bias
Benchmarks: How Spurious Features Distort Evaluation", ICCV 2025, arXiv 2509.07596: report
every bias score beside its feature sensitivity). The perturbations are
:mod:`biaslab.analysis.perturb`.

Sensitivity of metric M to perturbation P: ``Delta = M(P(test)) - M(test)`` in the metric's
points, and ``100 * Delta / |M(test) - M_0|`` in %, the change as a share of the bias itself
(``M_0`` the no-bias value, :data:`NULL`; the paper's relative change of a bias score whose
zero is no bias), the mean over
the model's training seeds. The 95 % CI is a percentile bootstrap over test images and seeds
together (each replicate draws seeds with replacement and images with replacement, the SAME
images in both sets: the change is paired); :data:`N_BOOT` replicates by default.
Leakage re-trains its attackers on every evaluation, so it has no per-image bootstrap: its CI
is the t interval over seeds of the per-seed changes (``ci_method`` says which).

Metrics (Table 1; the masked ones on the persons-blacked-out images, as Table 1 computes them):
``Ratio`` (thresholded max(r, 1/r)), ``Ratio_E`` (threshold-free, expected counts),
``masked_AUC`` (x100, ROC AUC of P(man) - P(woman) for the true gender on masked images),
``Leakage`` (x100, LK_M - LK_D, paper 000 Eq. 7; the ground truth stays the original
image's, so LK_D does not move and Delta Leakage is the model's own change).
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from biaslab.runtime import stats

N_BOOT = 1000
#: the Table 1 metrics the sensitivity is measured for, in table order
METRICS = ("Ratio", "Ratio_E", "masked_AUC", "Leakage")
#: metrics with a per-image bootstrap (computed from the masked outputs)
BOOT_METRICS = ("Ratio", "Ratio_E", "masked_AUC")
#: each metric's no-bias value: the % change is relative to the bias itself, the distance of
#: the unperturbed score from this value (a Ratio of 1.2 that moves by 0.1 moved by 50 %)
NULL = {"Ratio": 1.0, "Ratio_E": 1.0, "masked_AUC": 50.0, "Leakage": 0.0}


def _ratio_max(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = num / den
        return np.where(r > 0, np.maximum(r, 1.0 / r), np.where(r == 0, np.inf, np.nan))


def ratio_rows(p_woman: np.ndarray, p_man: np.ndarray, idx: np.ndarray,
               thresholds: tuple[float, float] = (0.5, 0.5)) -> np.ndarray:
    """Thresholded Ratio = max(r, 1/r), r = #(P(man) >= t_man) / #(P(woman) >= t_woman), of
    each row of ``idx`` (int (B, n), image indices). float64 (B,); inf where a count is 0
    (nan for 0/0). Same rule as :func:`biaslab.classify.evaluate.ratio_of`."""
    pw, pm = np.asarray(p_woman, np.float64)[idx], np.asarray(p_man, np.float64)[idx]
    return _ratio_max((pm >= thresholds[1]).sum(-1).astype(float),
                      (pw >= thresholds[0]).sum(-1).astype(float))


def ratio_e_rows(p_woman: np.ndarray, p_man: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Threshold-free Ratio_E = max(r_E, 1/r_E), r_E = sum P(man) / sum P(woman), of each row
    of ``idx`` (:func:`biaslab.classify.evaluate.expected_ratio`). float64 (B,)."""
    pw, pm = np.asarray(p_woman, np.float64)[idx], np.asarray(p_man, np.float64)[idx]
    return _ratio_max(pm.sum(-1), pw.sum(-1))


def auc_rows(p_woman: np.ndarray, p_man: np.ndarray, male: np.ndarray, idx: np.ndarray
             ) -> np.ndarray:
    """ROC AUC x100 of ``P(man) - P(woman)`` for ``male`` (bool (n,)) on each row of ``idx``
    (Mann-Whitney: mean rank of the positives, ties at their mid-rank; the value of
    :func:`sklearn.metrics.roc_auc_score`). float64 (B,); nan where a row has one class."""
    from scipy.stats import rankdata
    score = (np.asarray(p_man, np.float64) - np.asarray(p_woman, np.float64))[idx]
    pos = np.asarray(male, bool)[idx]
    ranks = rankdata(score, axis=-1)
    n1 = pos.sum(-1).astype(float)
    n0 = pos.shape[-1] - n1
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (ranks * pos).sum(-1) - n1 * (n1 + 1) / 2.0
        return np.where((n1 > 0) & (n0 > 0), 100.0 * u / (n1 * n0), np.nan)


def metric_rows(metric: str, masked: tuple[np.ndarray, np.ndarray], male: np.ndarray,
                idx: np.ndarray, thresholds: tuple[float, float] = (0.5, 0.5)) -> np.ndarray:
    """One of :data:`BOOT_METRICS` on the masked outputs ``(p_woman, p_man)`` for each row of
    ``idx``. Raises ValueError for another name."""
    pw, pm = masked
    if metric == "Ratio":
        return ratio_rows(pw, pm, idx, thresholds)
    if metric == "Ratio_E":
        return ratio_e_rows(pw, pm, idx)
    if metric == "masked_AUC":
        return auc_rows(pw, pm, male, idx)
    raise ValueError(f"no per-image bootstrap for {metric!r}; known: {BOOT_METRICS}")


def _finite_or_nan(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return np.where(np.isfinite(x), x, np.nan)


def paired_change(base: Sequence[Callable[[np.ndarray], np.ndarray]],
                  pert: Sequence[Callable[[np.ndarray], np.ndarray]], n_images: int, *,
                  null: float = 0.0, n_boot: int = N_BOOT, seed: int = 0,
                  level: float = stats.LEVEL) -> dict:
    """The change of a set-level metric from ``base`` to ``pert``, with its percentile
    bootstrap CI over images and seeds.

    Args:
        base, pert: one function per training seed (same order): ``f(idx) -> (B,)`` the
            metric on each row of the int index matrix ``idx`` (B, n_images).
        n_images: the images both sets share (index i is the same image in both).
        null: the metric's no-bias value (:data:`NULL`).
        n_boot: replicates (>= 100).
        seed: the resampling generator's seed.

    Returns:
        ``{"base", "perturbed", "delta", "lo", "hi", "pct", "pct_lo", "pct_hi", "n_seeds",
        "n_images", "n_boot", "n_undefined", "ci_method"}``: means over seeds on all images;
        ``delta = perturbed - base``; ``pct = 100 * delta / |base - null|`` (the change as a
        share of the unperturbed bias; None when that bias is 0); a replicate whose metric
        is infinite or undefined in some drawn seed is left out (``n_undefined``), and the CI
        is None when more than 5 % are (an infinite Ratio has no finite change). Point values
        that are not finite are None.

    Raises:
        ValueError: no seed, different numbers of seeds, no image, n_boot < 100.
    """
    S = len(base)
    if S == 0 or S != len(pert):
        raise ValueError(f"need the same non-zero number of seeds, got {len(base)} and "
                         f"{len(pert)}")
    if n_images < 1:
        raise ValueError("no image")
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100, got {n_boot}")
    full = np.arange(n_images)[None]
    b0 = np.array([_finite_or_nan(f(full))[0] for f in base])
    p0 = np.array([_finite_or_nan(f(full))[0] for f in pert])
    rng = np.random.default_rng(int(seed))
    idx = rng.integers(n_images, size=(n_boot, n_images))
    pick = rng.integers(S, size=(n_boot, S))
    weights = np.stack([np.bincount(r, minlength=S) for r in pick]) / S      # (B, S)
    bb = np.stack([_finite_or_nan(f(idx)) for f in base], axis=1)            # (B, S)
    pp = np.stack([_finite_or_nan(f(idx)) for f in pert], axis=1)
    used = weights > 0
    ok = ~np.any(used & (np.isnan(bb) | np.isnan(pp)), axis=1)
    mb = np.where(ok, (weights * np.nan_to_num(bb)).sum(1), np.nan)
    mp = np.where(ok, (weights * np.nan_to_num(pp)).sum(1), np.nan)
    d = mp - mb
    with np.errstate(divide="ignore", invalid="ignore"):
        pc = 100.0 * d / np.abs(mb - null)
    n_undef = int((~ok).sum())
    a = (1.0 - level) / 2.0
    good = ok & np.isfinite(pc)

    def q(v, m):
        if n_undef > 0.05 * n_boot or not m.any():
            return None, None
        lo, hi = np.quantile(v[m], [a, 1.0 - a])
        return float(lo), float(hi)

    base_m, pert_m = float(np.mean(b0)), float(np.mean(p0))
    delta = pert_m - base_m
    pct = 100.0 * delta / abs(base_m - null) if math.isfinite(delta) and base_m != null \
        else math.nan
    lo, hi = q(d, ok)
    plo, phi = q(pc, good)
    fin = (lambda v: float(v) if v is not None and math.isfinite(v) else None)
    return {"base": fin(base_m), "perturbed": fin(pert_m), "delta": fin(delta), "lo": lo,
            "hi": hi, "pct": fin(pct), "pct_lo": plo, "pct_hi": phi, "n_seeds": S,
            "n_images": int(n_images), "n_boot": int(n_boot), "n_undefined": n_undef,
            "ci_method": "bootstrap over images and seeds"}


def seed_change(base: Sequence[float | None], pert: Sequence[float | None],
                null: float = 0.0, level: float = stats.LEVEL) -> dict:
    """The change of a metric evaluated once per seed (Leakage), with the t CI over seeds of
    the per-seed changes (:func:`biaslab.runtime.stats.summarize`); ``pct`` relative to the
    seed's distance from ``null``. Same keys as :func:`paired_change` (``n_images`` None,
    ``n_boot`` 0). Seeds where either value is missing are left out."""
    pairs = [(float(b), float(p)) for b, p in zip(base, pert)
             if b is not None and p is not None and math.isfinite(b) and math.isfinite(p)]
    if not pairs:
        return {"base": None, "perturbed": None, "delta": None, "lo": None, "hi": None,
                "pct": None, "pct_lo": None, "pct_hi": None, "n_seeds": 0, "n_images": None,
                "n_boot": 0, "n_undefined": 0, "ci_method": "t over seeds"}
    b = np.array([x for x, _ in pairs])
    p = np.array([y for _, y in pairs])
    s = stats.summarize(list(p - b), level)
    pc = stats.summarize(list(100.0 * (p - b) / np.abs(b - null)), level) \
        if np.all(b != null) else None
    fin = (lambda v: float(v) if v is not None and math.isfinite(v) else None)
    return {"base": float(b.mean()), "perturbed": float(p.mean()), "delta": fin(s["mean"]),
            "lo": fin(s["lo"]), "hi": fin(s["hi"]),
            "pct": fin(pc["mean"]) if pc else None, "pct_lo": fin(pc["lo"]) if pc else None,
            "pct_hi": fin(pc["hi"]) if pc else None, "n_seeds": len(pairs), "n_images": None,
            "n_boot": 0, "n_undefined": 0, "ci_method": "t over seeds"}


def summarize_model(outputs: Sequence[Mapping], perturbations: Sequence[str],
                    male: np.ndarray, *, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Every metric's change under every perturbation for one model.

    Args:
        outputs: per seed, ``{"thresholds": (t_woman, t_man), "masked": {set: (p_woman,
            p_man)}, "leakage": {set: value or None}}`` where ``set`` is ``"none"`` (the
            unperturbed test images) or a perturbation name; the masked arrays are aligned
            with ``male`` (bool (n,), the images both sets share).
        perturbations: the perturbation names.

    Returns:
        ``{perturbation: {metric: paired_change / seed_change record}}``; a model without
        gender outputs (no ``masked``) gets Leakage only.
    """
    out: dict = {}
    n = len(male)

    def fn(o, key, m):
        arrs = o["masked"][key]
        return lambda idx: metric_rows(m, arrs, male, idx, o["thresholds"])

    def memo(f):
        # the unperturbed side is the same in every perturbation's bootstrap (same seed,
        # same draws): computed once
        cache: dict = {}

        def g(idx):
            k = hashlib.sha1(np.ascontiguousarray(idx).tobytes()).hexdigest()
            if k not in cache:
                cache[k] = f(idx)
            return cache[k]
        return g

    has_gender = all(o.get("masked") for o in outputs)
    base = {m: [memo(fn(o, "none", m)) for o in outputs] for m in BOOT_METRICS} \
        if has_gender else {}
    for name in perturbations:
        rec = {}
        if has_gender:
            for m in BOOT_METRICS:
                rec[m] = paired_change(base[m], [fn(o, name, m) for o in outputs], n,
                                       null=NULL[m], n_boot=n_boot, seed=seed)
        rec["Leakage"] = seed_change([o["leakage"].get("none") for o in outputs],
                                     [o["leakage"].get(name) for o in outputs],
                                     null=NULL["Leakage"])
        out[name] = rec
    return out


def excludes_zero(rec: Mapping) -> bool | None:
    """True when the record's CI lies wholly on one side of 0, False when it holds 0, None
    without a CI."""
    lo, hi = rec.get("lo"), rec.get("hi")
    if lo is None or hi is None:
        return None
    return bool(lo > 0 or hi < 0)


def control_check(rec: Mapping, expected: str) -> dict:
    """A control's sensitivity against its known answer: ``expected`` ``"0"`` (what the control
    reads did not change: the CI must hold 0), ``"<0"`` (a known fall: the CI must lie below
    0) or ``"!=0"`` (what it reads changed, direction not known: the CI must exclude 0).
    Returns ``{"expected", "measured" (the record), "verdict"}``: ``matches`` / ``does not
    match`` (a "0" whose CI excludes 0, or a "<0" whose CI lies above 0) / ``inconclusive``
    (a change the CI cannot resolve) / ``no CI``.

    Raises:
        ValueError: another ``expected``.
    """
    if expected not in ("0", "!=0", "<0"):
        raise ValueError(f"expected must be '0', '<0' or '!=0', got {expected!r}")
    ex = excludes_zero(rec)
    if ex is None:
        v = "no CI"
    elif expected == "0":
        v = "does not match" if ex else "matches"
    elif expected == "<0":
        v = "matches" if rec["hi"] < 0 else ("does not match" if rec["lo"] > 0
                                              else "inconclusive")
    else:
        v = "matches" if ex else "inconclusive"
    return {"expected": expected, "measured": dict(rec), "verdict": v}


def confounded(claim_effect: float | None, sensitivity: Mapping | None) -> bool | None:
    """Whether a claimed effect is confounded by non-person features: the metric *moves*
    under the perturbation (its 95 % CI excludes 0) by more than the effect claimed (point
    values, magnitudes, both in the metric's points). A move the CI cannot tell from 0 is not
    evidence of confounding. None when either number is missing.

    >>> confounded(-2.0, {"delta": 3.0, "lo": 1.0, "hi": 5.0})
    True
    >>> confounded(-2.0, {"delta": 3.0, "lo": -1.0, "hi": 7.0})
    False
    """
    if claim_effect is None or not sensitivity or sensitivity.get("delta") is None:
        return None
    d = float(sensitivity["delta"])
    if not (math.isfinite(claim_effect) and math.isfinite(d)):
        return None
    return bool(excludes_zero(sensitivity)) and abs(d) > abs(claim_effect)
