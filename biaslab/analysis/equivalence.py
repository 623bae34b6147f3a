"""Decisions from confidence intervals with an equivalence margin: a directional claim by its
95 % CI, a claim of no change or of equality by two one-sided tests (the 90 % CI), and the
outcome "no practical effect" for a difference smaller than the margin.

Sources: Schuirmann 1987, "A comparison of the two one-sided tests procedure and the power
approach for assessing the equivalence of average bioavailability", J. Pharmacokinet.
Biopharm. 15(6):657-680; Lakens 2017, "Equivalence tests: a practical primer for t tests,
correlations, and meta-analyses", Soc. Psychol. Personal. Sci. 8(4):355-362. The margin (the
smallest effect size of interest) is the caller's: ``biaslab.analysis.validity`` takes it as
a fraction (param ``validity.margin_fraction``) of a reference effect the same run measures.

Intervals themselves come from :mod:`biaslab.runtime.stats` (t over seeds, Welch, bootstrap);
this module only reads them. Pure functions.
"""
from __future__ import annotations

import math

from biaslab.runtime.stats import LEVEL

#: Level of the intervals that equivalence and non-inferiority verdicts read: two one-sided
#: tests at 5 % each are decided by the 90 % CI (:func:`decide`).
EQUIVALENCE_LEVEL = 0.90


def narrower(mean: float | None, lo: float | None, hi: float | None,
             level: float = EQUIVALENCE_LEVEL, from_level: float = LEVEL
             ) -> tuple[float | None, float | None]:
    """A ``level`` interval from a stored ``from_level`` one when the values behind it are
    gone: each side's distance from ``mean`` times ``z_{(1+level)/2} / z_{(1+from_level)/2}``
    (0.839 for 90 % from 95 %).

    For a t interval this is conservative: ``t_{0.95,df} / t_{0.975,df}`` rises with df
    towards the normal ratio (0.679 at df = 2, 0.784 at df = 5), so the result is never
    narrower than the exact t interval and a verdict read from it errs towards
    "inconclusive". For a percentile bootstrap interval it is the normal approximation.

    Returns:
        ``(lo, hi)``; ``(None, None)`` when any input is None.
    """
    if mean is None or lo is None or hi is None:
        return None, None
    from scipy.stats import norm
    k = float(norm.ppf((1 + level) / 2) / norm.ppf((1 + from_level) / 2))
    return float(mean) - k * (float(mean) - float(lo)), float(mean) + k * (float(hi) - float(mean))


def clip_interval(lo: float | None, hi: float | None, bounds: tuple[float, float] | None
                  ) -> tuple[float | None, float | None]:
    """``[lo, hi]`` intersected with the metric's range ``bounds`` (e.g. (0, 100) for an AUC
    or an Error in %, (-100, 100) for a difference of two such).

    The true value lies in its range, so the intersection covers it whenever the interval
    does: the coverage is unchanged (Mandelkern 2002, "Setting confidence intervals for
    bounded parameters", Statistical Science 17(2):149-172). None bounds: unchanged."""
    if bounds is None:
        return lo, hi
    b0, b1 = float(bounds[0]), float(bounds[1])
    return (None if lo is None else min(max(float(lo), b0), b1),
            None if hi is None else max(min(float(hi), b1), b0))


#: every outcome of :func:`decide`
DECISIONS = ("holds", "fails", "no practical effect", "inconclusive")


def decide(expect: str, value: float, delta: float | None,
           ci95: tuple[float | None, float | None],
           ci90: tuple[float | None, float | None] = (None, None)) -> str:
    """The verdict of one claim about a quantity, with an equivalence margin.

    Directional claims keep the 95 % CI test; claims of no effect or of a bounded change are
    decided by one-sided tests at 5 % each, i.e. by the 90 % CI (two one-sided tests,
    Schuirmann 1987, J. Pharmacokinet. Biopharm. 15(6); Lakens 2017, "Equivalence tests",
    Soc. Psychol. Personal. Sci. 8(4)). ``delta`` is the margin: the smallest effect that
    matters, fixed before the data are seen.

    * ``">"`` / ``"<"`` (the quantity is above / below ``value``): **no practical effect**
      when ``delta`` is given and the 90 % CI lies strictly inside ``(value - delta,
      value + delta)`` (Lakens' "equivalent", also where the 95 % CI excludes ``value``: a
      difference too small to matter); else **holds** when the 95 % CI lies strictly on the
      expected side, **fails** when it lies on the other side (reaching ``value`` counts),
      else **inconclusive**.
    * ``"≈"`` (equal to ``value`` within ``delta``): **holds** when the 90 % CI lies strictly
      inside ``(value - delta, value + delta)``, **fails** when the 95 % CI lies strictly
      outside ``[value - delta, value + delta]``, else **inconclusive**.
    * ``"≥"`` (not below ``value`` by ``delta`` or more; non-inferiority): **holds** when
      the 90 % CI's lower end is above ``value - delta`` (a one-sided 5 % test), **fails**
      when the 95 % CI's upper end is below it, else **inconclusive**. ``"≤"`` mirrors it
      about ``value + delta``. ``delta`` None means 0 (``value`` is the margin itself).

    Args:
        expect: one of ``">"``, ``"<"``, ``"≈"``, ``"≥"``, ``"≤"``.
        value: the reference value (0 for a difference).
        delta: the margin (>= 0), or None where the claim has none.
        ci95, ci90: ``(lo, hi)`` of the 95 % and 90 % CIs; None ends: "inconclusive". A
            missing 90 % CI is taken as the 95 % one (wider, so never a looser verdict).

    Returns:
        one of :data:`DECISIONS`.

    Raises:
        ValueError: an unknown ``expect``, a negative ``delta``, or ``"≈"`` without a margin.

    Examples (hand-computed, margin 1):

    >>> decide("<", 0.0, 1.0, (-3.0, -0.5), (-2.5, -0.8))
    'holds'
    >>> decide("<", 0.0, 1.0, (-0.9, 0.2), (-0.8, 0.1))
    'no practical effect'
    >>> decide("<", 0.0, 1.0, (-2.0, 0.5), (-1.5, 0.2))
    'inconclusive'
    >>> decide("≈", 0.0, 1.0, (-1.2, 0.5), (-0.9, 0.4))
    'holds'
    >>> decide("≈", 0.0, 1.0, (1.1, 2.0), (1.2, 1.9))
    'fails'
    >>> decide("≥", 0.0, 1.0, (-1.2, 0.5), (-0.9, 0.4))
    'holds'
    """
    if expect not in (">", "<", "≈", "≥", "≤"):
        raise ValueError(f"expect must be one of > < ≈ ≥ ≤, got {expect!r}")
    if delta is not None and (not math.isfinite(float(delta)) or delta < 0):
        raise ValueError(f"the margin must be a finite number >= 0, got {delta!r}")
    if expect == "≈" and delta is None:
        raise ValueError("an '≈' claim needs a margin (delta)")
    lo, hi = ci95
    if lo is None or hi is None:
        return "inconclusive"
    lo90, hi90 = ci90 if ci90[0] is not None and ci90[1] is not None else ci95
    v = float(value)
    d = float(delta or 0.0)
    inside = v - d < lo90 and hi90 < v + d
    if expect in (">", "<"):
        if delta is not None and inside:
            return "no practical effect"
        if expect == ">":
            return "holds" if lo > v else ("fails" if hi <= v else "inconclusive")
        return "holds" if hi < v else ("fails" if lo >= v else "inconclusive")
    if expect == "≈":
        if inside:
            return "holds"
        return "fails" if lo > v + d or hi < v - d else "inconclusive"
    if expect == "≥":
        return "holds" if lo90 > v - d else ("fails" if hi < v - d else "inconclusive")
    return "holds" if hi90 < v + d else ("fails" if lo > v + d else "inconclusive")


__all__ = ["EQUIVALENCE_LEVEL", "narrower", "clip_interval", "DECISIONS", "decide"]
