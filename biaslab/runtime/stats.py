"""One statistics module for every table: seed summaries, 95 % CIs, differences, bootstrap.

Conventions, the same everywhere:

* **std** is the sample standard deviation (``ddof=1``); with one value it is None.
* **ci95** is the half-width of a two-sided 95 % confidence interval of the mean:
  Student's t over seeds, ``t_{0.975, n-1} * std / sqrt(n)`` (:func:`summarize`), or a
  percentile bootstrap over test items when one model is evaluated (:func:`bootstrap`).
  With one value there is no interval (None).
* **n** is the number of values the mean is taken over; every summary also carries
  ``n_total`` (values given), ``n_inf`` (infinite values: e.g. a Ratio whose r is 0 or
  infinite because a model never predicts one gender) and ``n_missing`` (None / NaN: the
  metric could not be computed for that seed, e.g. too few test images of a group).
* **Nothing is dropped silently.** An infinite value is never left out of the mean: the mean of
  values that include +inf is +inf (JSON ``null`` with ``n_inf > 0``) and the cell prints as
  ``∞ (1/3 seeds)`` (:func:`format_cell`). A missing value is left out of the mean *and
  counted* in ``n_missing``, which the cell shows.
* **Differences** from a reference row (Original) use Welch's t interval of the difference of
  two independent means (models trained on different datasets share no pairing beyond the seed
  number, which is not a pairing of outcomes) (:func:`difference`).

All functions are pure; results are JSON-serialisable dicts of floats/ints/None (non-finite
floats are stored as None, with the counts saying why).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

#: Confidence level of every interval in the project.
LEVEL = 0.95
#: Bootstrap resamples used by default (percentile method).
N_BOOT = 2000


def _t():
    """scipy's Student t, imported on first use: ``scipy.stats`` takes 0.5-0.7 s to import and
    this module is imported by every stage, most of which never build an interval."""
    from scipy.stats import t
    return t


def _floats(values: Sequence[Any]) -> tuple[np.ndarray, int, int, int]:
    """-> (finite or +-inf values as float64, n_total, n_missing, n_inf)."""
    vals = []
    n_missing = 0
    for v in values:
        if v is None or isinstance(v, bool):
            n_missing += 1
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"not a number: {v!r}") from None
        if math.isnan(f):
            n_missing += 1
        else:
            vals.append(f)
    a = np.asarray(vals, np.float64)
    return a, len(values), n_missing, int(np.isinf(a).sum())


def to_json(v: Any, digits: int | None = 6) -> float | str | None:
    """A per-seed value as stored in a metrics file's ``per_seed`` list: a finite float
    (rounded to ``digits``), ``"inf"`` / ``"-inf"`` for an infinite metric (JSON has no
    infinity; :func:`summarize` reads these strings back as infinities), None for a value that
    could not be computed (None / NaN)."""
    if v is None or isinstance(v, bool):
        return None
    f = float(v)
    if math.isnan(f):
        return None
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return round(f, digits) if digits is not None else f


def t_halfwidth(std: float | None, n: int, level: float = LEVEL) -> float | None:
    """Half-width of the t confidence interval of a mean: ``t_{(1+level)/2, n-1} std/sqrt(n)``.

    Args:
        std: sample std (ddof=1) of the n values; None -> None.
        n: number of values (>= 2 for an interval; fewer -> None).
        level: confidence level in (0, 1).

    Returns:
        float >= 0, or None when it is undefined (n < 2 or std None / non-finite).
    """
    if std is None or n < 2 or not math.isfinite(std):
        return None
    return float(_t().ppf((1.0 + level) / 2.0, n - 1) * std / math.sqrt(n))


def noise_floor(std: float | None, n: int, level: float = LEVEL) -> float | None:
    """Half-width of the CI of a difference between two n-seed means whose seeds spread by
    ``std`` each: ``t_{(1+level)/2, 2n-2} std sqrt(2/n)`` (the pooled two-sample t interval
    with equal spread). A difference between two revisions (same method, same n seeds)
    smaller than this is within seed-to-seed noise.

    Returns: float >= 0, or None for n < 2 or a missing / non-finite std.

    Example: std 1, n 3 -> t_{0.975, 4} sqrt(2/3) = 2.7764 * 0.8165 = 2.2670.
    """
    if std is None or n < 2 or not math.isfinite(std):
        return None
    return float(_t().ppf((1.0 + level) / 2.0, 2 * n - 2) * std * math.sqrt(2.0 / n))


def _clean(v: float | None) -> float | None:
    return float(v) if v is not None and math.isfinite(v) else None


def summarize(values: Sequence[Any], level: float = LEVEL) -> dict:
    """Mean, sample std and t-based 95 % CI of per-seed values, counting what is not finite.

    Args:
        values: sequence of numbers (one per seed; the strings ``"inf"``/``"-inf"`` of
            :func:`to_json` are infinities); None/NaN = could not be computed
            (counted in ``n_missing``, left out), +-inf = infinite metric (counted in
            ``n_inf``, kept: the mean becomes infinite).
        level: confidence level.

    Returns:
        ``{"mean", "std", "ci95", "lo", "hi", "n", "n_total", "n_missing", "n_inf", "sign",
        "values"}``. ``n`` counts the values the mean is over (finite + infinite). With any
        infinite value ``mean``/``std``/``ci95``/``lo``/``hi`` are None and ``sign`` is +1/-1
        (the sign of the infinity; mixed signs give None mean and sign 0). ``values`` is the
        input with non-finite entries as None, for the per-seed column.

    Raises:
        ValueError: a value that is not a number.

    Example (mean 2, std 1, ci95 = t_{0.975, 2} / sqrt(3) = 4.3027 / 1.7321):

    >>> s = summarize([1, 2, 3])
    >>> s["mean"], s["std"], round(s["ci95"], 4), s["n"]
    (2.0, 1.0, 2.4841, 3)
    >>> summarize([1.0, float("inf")])["n_inf"]
    1
    """
    a, n_total, n_missing, n_inf = _floats(values)
    out = {"mean": None, "std": None, "ci95": None, "lo": None, "hi": None, "n": int(len(a)),
           "n_total": int(n_total), "n_missing": int(n_missing), "n_inf": n_inf, "sign": 0,
           "values": [None if v is None or isinstance(v, bool) or not math.isfinite(float(v))
                      else float(v) for v in values]}
    if not len(a):
        return out
    if n_inf:
        signs = set(np.sign(a[np.isinf(a)]).tolist())
        out["sign"] = int(signs.pop()) if len(signs) == 1 else 0
        return out
    mean = float(a.mean())
    std = float(a.std(ddof=1)) if len(a) > 1 else None
    hw = t_halfwidth(std, len(a), level)
    out.update({"mean": mean, "std": std, "ci95": hw, "sign": int(np.sign(mean)),
                "lo": mean - hw if hw is not None else None,
                "hi": mean + hw if hw is not None else None})
    return out


def record(values: Sequence[Any], level: float = LEVEL) -> dict:
    """:func:`summarize` as stored in a metrics file: ``{"mean", "ci95", "std", "n", "n_inf",
    "n_missing", "sign"}`` (``values`` live in the file's ``per_seed`` list; ``lo``/``hi`` are
    ``mean -+ ci95``). Same arguments and errors as :func:`summarize`."""
    s = summarize(values, level)
    return {k: s[k] for k in ("mean", "ci95", "std", "n", "n_inf", "n_missing", "sign")}


def difference(values: Sequence[Any], reference: Sequence[Any], level: float = LEVEL) -> dict:
    """Difference of means ``mean(values) - mean(reference)`` with Welch's t 95 % CI.

    Args:
        values, reference: per-seed numbers of the two rows (e.g. S_synthetic and Original);
            None/NaN are left out (counted), any infinite value makes the difference undefined.
        level: confidence level.

    Returns:
        ``{"diff", "ci95", "lo", "hi", "n", "n_ref", "p"}``: ``ci95`` the half-width from
        Welch-Satterthwaite degrees of freedom; ``p`` the two-sided Welch p-value. Entries are
        None when undefined (fewer than 2 finite values on a side, or an infinite value; with
        zero variance on both sides the CI is [diff, diff] and p is None).
    """
    a, *_ = _floats(values)
    b, *_ = _floats(reference)
    if (len(a) and np.isinf(a).any()) or (len(b) and np.isinf(b).any()):
        return _welch(None, None, len(a), None, None, len(b), level)
    return _welch(float(a.mean()) if len(a) else None,
                  float(a.std(ddof=1)) if len(a) > 1 else None, len(a),
                  float(b.mean()) if len(b) else None,
                  float(b.std(ddof=1)) if len(b) > 1 else None, len(b), level)


def difference_of_records(rec: Mapping[str, Any] | None, ref: Mapping[str, Any] | None,
                          level: float = LEVEL) -> dict:
    """:func:`difference` from two :func:`record` summaries (``mean``, sample ``std``, ``n``,
    ``n_inf``) instead of the per-seed values: what ``dvc exp show --json`` keeps of a metrics
    file (it drops lists such as ``per_seed``). The same Welch CI as :func:`difference` on the
    values the records summarise; undefined (None entries) when either has infinite seeds,
    no mean, or ``n < 2`` for the interval."""
    def parts(r):
        r = r or {}
        if int(r.get("n_inf") or 0):
            return None, None, int(r.get("n") or 0), True
        m, sd = r.get("mean"), r.get("std")
        return (None if m is None else float(m), None if sd is None else float(sd),
                int(r.get("n") or 0), False)
    ma, sa, na, ia = parts(rec)
    mb, sb, nb, ib = parts(ref)
    if ia or ib:
        return _welch(None, None, na, None, None, nb, level)
    return _welch(ma, sa, na, mb, sb, nb, level)


def _welch(ma: float | None, sa: float | None, na: int, mb: float | None, sb: float | None,
           nb: int, level: float) -> dict:
    """Welch's t interval of ``ma - mb`` from means, sample stds and sizes (see
    :func:`difference` for the returned dict)."""
    out = {"diff": None, "ci95": None, "lo": None, "hi": None, "n": int(na), "n_ref": int(nb),
           "p": None}
    if ma is None or mb is None or not na or not nb:
        return out
    d = float(ma - mb)
    out["diff"] = d
    if na < 2 or nb < 2 or sa is None or sb is None:
        return out
    va, vb = sa ** 2 / na, sb ** 2 / nb
    se = math.sqrt(va + vb)
    if se == 0.0:
        out.update({"ci95": 0.0, "lo": d, "hi": d})
        return out
    df = (va + vb) ** 2 / ((va ** 2 / (na - 1) if va else 0.0)
                           + (vb ** 2 / (nb - 1) if vb else 0.0))
    hw = float(_t().ppf((1.0 + level) / 2.0, df) * se)
    out.update({"ci95": hw, "lo": d - hw, "hi": d + hw,
                "p": float(2.0 * _t().sf(abs(d) / se, df))})
    return out


def bootstrap(statistic: Callable[..., float], *arrays: Sequence[Any], n_boot: int = N_BOOT,
              seed: int = 0, level: float = LEVEL) -> dict:
    """Percentile bootstrap 95 % CI of ``statistic`` over items (rows resampled together).

    Use this where one model is evaluated on a test set: the uncertainty is the test sample's.

    Args:
        statistic: ``f(*arrays_resampled) -> float`` (may return None/NaN/inf: such
            resamples are counted in ``n_undefined`` and left out of the interval).
        *arrays: arrays of the same first length n (numpy-indexable along axis 0).
        n_boot: number of resamples (>= 100).
        seed: seed of the resampling generator (deterministic).
        level: confidence level.

    Returns:
        ``{"mean": statistic on the full data, "ci95": max distance of the percentile bounds
        from it, "lo", "hi", "n": items, "n_boot", "n_undefined"}``; None entries when the full
        statistic is not finite or fewer than half the resamples are.

    Raises:
        ValueError: no arrays, arrays of different lengths, or n_boot < 100.
    """
    if not arrays:
        raise ValueError("bootstrap needs at least one array")
    arrs = [np.asarray(a) if not isinstance(a, np.ndarray) else a for a in arrays]
    n = len(arrs[0])
    if any(len(a) != n for a in arrs):
        raise ValueError(f"arrays have different lengths: {[len(a) for a in arrs]}")
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100, got {n_boot}")
    full = statistic(*arrs)
    full = None if full is None else float(full)
    out = {"mean": _clean(full), "ci95": None, "lo": None, "hi": None, "n": int(n),
           "n_boot": int(n_boot), "n_undefined": 0}
    if out["mean"] is None or n < 2:
        return out
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        v = statistic(*[a[idx] for a in arrs])
        reps.append(np.nan if v is None else float(v))
    r = np.asarray(reps)
    ok = np.isfinite(r)
    out["n_undefined"] = int((~ok).sum())
    if ok.sum() < n_boot / 2:
        return out
    lo, hi = np.quantile(r[ok], [(1 - level) / 2, (1 + level) / 2])
    out.update({"lo": float(lo), "hi": float(hi),
                "ci95": float(max(full - lo, hi - full, 0.0))})
    return out


def format_cell(s: Mapping[str, Any] | None, digits: int = 1, scale: float = 1.0,
                show_n: bool = False) -> str:
    """One table cell from a :func:`summarize` / :func:`bootstrap` dict.

    ``"12.3 ± 0.4"`` (± the 95 % CI half-width); ``"12.3"`` when there is no interval (one
    seed); ``"∞ (1/3 seeds)"`` when ``n_inf`` seeds are infinite; ``" (1 missing)"`` appended
    when seeds could not be computed; ``"–"`` when nothing is known. ``scale`` multiplies the
    numbers (e.g. 100 for percentages); ``show_n`` appends ``" (n=3)"``.
    """
    if not s:
        return "–"
    n_inf, n_miss = int(s.get("n_inf") or 0), int(s.get("n_missing") or 0)
    n_total = int(s.get("n_total") or (int(s.get("n") or 0) + n_miss))
    tail = f" ({n_miss} missing)" if n_miss else ""
    if n_inf:
        sign = "-" if s.get("sign", 1) < 0 else ""
        return f"{sign}∞ ({n_inf}/{n_total} seeds)" + tail
    m = s.get("mean")
    if m is None or not math.isfinite(float(m)):
        return "–" + tail
    txt = f"{float(m) * scale:.{digits}f}"
    hw = s.get("ci95")
    if hw is not None and math.isfinite(float(hw)):
        txt += f" ± {float(hw) * scale:.{digits}f}"
    if show_n:
        txt += f" (n={s.get('n')})"
    return txt + tail


def format_difference(d: Mapping[str, Any] | None, digits: int = 1, scale: float = 1.0) -> str:
    """``"+1.2 [−0.3, +2.7]"`` from a :func:`difference` dict (``"–"`` when undefined)."""
    if not d or d.get("diff") is None:
        return "–"
    txt = f"{d['diff'] * scale:+.{digits}f}"
    if d.get("lo") is not None:
        txt += f" [{d['lo'] * scale:+.{digits}f}, {d['hi'] * scale:+.{digits}f}]"
    return txt


def verdict(lo: float | None, hi: float | None, expect: str, value: float = 0.0) -> str:
    """Verdict of an expected direction from a CI ``[lo, hi]``.

    Args:
        lo, hi: the 95 % CI bounds (None: "inconclusive").
        expect: ``">"`` (effect above ``value``), ``"<"`` (below), or ``"≈"`` (the CI covers
            ``value``).
        value: the reference value (0 for a difference or sensitivity, 1 for Ratio).

    Returns:
        ``"holds"`` when the CI lies entirely on the expected side (for ``"≈"``: covers
        ``value``), ``"fails"`` when it lies entirely on the other side (for ``"≈"``: excludes
        ``value``), else ``"inconclusive"``.

    Raises:
        ValueError: an unknown ``expect``.
    """
    if expect not in (">", "<", "≈"):
        raise ValueError(f"expect must be '>', '<' or '≈', got {expect!r}")
    if lo is None or hi is None:
        return "inconclusive"
    if expect == "≈":
        return "holds" if lo <= value <= hi else "fails"
    above, below = lo > value, hi < value
    if expect == ">":
        return "holds" if above else ("fails" if hi <= value else "inconclusive")
    return "holds" if below else ("fails" if lo >= value else "inconclusive")


__all__ = ["LEVEL", "N_BOOT", "to_json", "t_halfwidth", "summarize", "record", "difference", "bootstrap",
           "format_cell", "format_difference", "verdict"]
