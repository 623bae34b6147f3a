"""The statistics of the dataset audit (paper 004, REVISE): Cohen's d, Welch's t-test, the
2 x 2 co-occurrence test (Fisher's exact or chi-squared) vectorised over items, multiple-testing
correction and REVISE's signed ratio. :mod:`biaslab.analysis.audit` and
:mod:`biaslab.analysis.audit_attribute` build their tables with them.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
from scipy import stats

CORRECTIONS = ("bh", "bonferroni", "none")
#: accepted spellings of the corrections (statsmodels' ``fdr_bh`` is used in params.yaml)
_CORRECTION_ALIASES = {"bh": "bh", "fdr_bh": "bh", "benjamini-hochberg": "bh",
                       "bonferroni": "bonferroni", "none": "none"}


def correction_name(method: str) -> str:
    """The canonical name (``bh``, ``bonferroni``, ``none``) of a multiple-testing
    correction, accepting statsmodels' ``fdr_bh`` spelling.

    Raises:
        ValueError: an unknown correction."""
    try:
        return _CORRECTION_ALIASES[str(method).lower()]
    except KeyError:
        raise ValueError(f"unknown correction {method!r}; known: "
                         f"{sorted(_CORRECTION_ALIASES)}") from None

def cohens_d(a: Iterable[float], b: Iterable[float]) -> float:
    """Cohen's d of ``a`` vs ``b`` with the pooled standard deviation.

    ``d = (mean(a) - mean(b)) / s_p``, ``s_p = sqrt(((n_a-1) s_a^2 + (n_b-1) s_b^2) /
    (n_a + n_b - 2))`` with sample variances (ddof=1). REVISE reports it for person size and
    distance (Sect. 5.1.1, e.g. d = .709 for size) without the sign; we keep the sign, so with
    ``a`` = female and ``b`` = male a negative d means the male values are larger.

    Returns NaN when a group has fewer than 2 finite values or ``s_p == 0``. NaNs in the inputs
    are dropped.
    """
    a = np.asarray(list(a) if not isinstance(a, np.ndarray) else a, dtype=float)
    b = np.asarray(list(b) if not isinstance(b, np.ndarray) else b, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return float("nan")
    sp2 = ((na - 1) * a.var(ddof=1) + (nb - 1) * b.var(ddof=1)) / (na + nb - 2)
    if not sp2 > 0:
        return float("nan")
    return float((a.mean() - b.mean()) / math.sqrt(sp2))


def welch_p(a: Iterable[float], b: Iterable[float]) -> float:
    """Two-sided p-value of Welch's t-test (unequal variances, ``scipy.stats.ttest_ind(...,
    equal_var=False)``). NaN when a group has fewer than 2 finite values or both variances are
    zero. (REVISE code uses Student's t-test; Welch is the robust choice for unequal group
    sizes and spreads.)"""
    a = np.asarray(list(a) if not isinstance(a, np.ndarray) else a, dtype=float)
    b = np.asarray(list(b) if not isinstance(b, np.ndarray) else b, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < 2 or len(b) < 2 or (a.var() == 0 and b.var() == 0):
        return float("nan")
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def adjust_pvalues(p: Sequence[float], method: str = "bh") -> np.ndarray:
    """Multiple-testing correction of the finite p-values in ``p`` (NaNs stay NaN and are not
    counted in the family).

    * ``bh``: Benjamini-Hochberg step-up adjusted p-values (false discovery rate;
      ``scipy.stats.false_discovery_control(method="bh")``); also spelt ``fdr_bh``.
    * ``bonferroni``: ``min(1, p * m)`` with m the number of finite p-values (family-wise error).
    * ``none``: unchanged.

    Raises:
        ValueError: unknown method.
    """
    method = correction_name(method)
    p = np.asarray(p, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if m == 0:
        return out
    if method == "bh":
        out[ok] = stats.false_discovery_control(p[ok], method="bh")
    elif method == "bonferroni":
        out[ok] = np.minimum(1.0, p[ok] * m)
    else:
        out[ok] = p[ok]
    return out


def revise_ratio(f: float, m: float) -> float:
    """REVISE code's signed ratio (Gender Analysis notebook, att_cnt / att_dis):
    ``f / m`` if ``f > m`` else ``-m / f``; magnitudes <= 1 (i.e. f == m) become 0. A zero
    denominator gives +-inf; NaN inputs give NaN."""
    if not (np.isfinite(f) and np.isfinite(m)):
        return float("nan")
    if f == m:
        return 0.0
    with np.errstate(divide="ignore"):
        r = float(np.divide(f, m)) if f > m else -float(np.divide(m, f))
    return 0.0 if abs(r) <= 1 else r


def two_by_two_p(nf: np.ndarray, Nf: int, nm: np.ndarray, Nm: int, test: str) -> np.ndarray:
    """Two-sided p-values of independence of item presence and gender on the 2x2 tables
    ``[[n_f, N_f - n_f], [n_m, N_m - n_m]]`` (rows: female, male; columns: present, absent),
    vectorised over the items (``nf``, ``nm`` arrays; ``Nf``, ``Nm`` > 0).

    ``fisher``: the same value as ``scipy.stats.fisher_exact(table).pvalue`` (sum of the
    hypergeometric probabilities not larger than the observed one, relative tolerance 1e-7),
    computed with log-gamma over the concatenated supports so that ~10^4 caption words cost
    O(total co-occurrences) instead of one scipy call each (tested against scipy).
    ``chi2``: Pearson chi-square with Yates' continuity correction, as
    ``scipy.stats.chi2_contingency(table, correction=True)``; a table with a zero margin (item
    present in all or no images) has nothing to test and gets p = 1.
    """
    from scipy.special import gammaln
    nf = np.asarray(nf, dtype="int64")
    nm = np.asarray(nm, dtype="int64")
    K = nf + nm                      # images with the item
    M = Nf + Nm
    if len(nf) == 0:
        return np.zeros(0)
    if test == "chi2":
        obs = np.stack([nf, Nf - nf, nm, Nm - nm], axis=1).astype(float)
        rows = np.array([Nf, Nf, Nm, Nm], dtype=float)
        cols = np.stack([K, M - K, K, M - K], axis=1).astype(float)
        exp = rows * cols / M
        with np.errstate(divide="ignore", invalid="ignore"):
            diff = exp - obs
            adj = obs + np.sign(diff) * np.minimum(0.5, np.abs(diff))
            chi = np.sum((adj - exp) ** 2 / exp, axis=1)
        p = stats.chi2.sf(chi, 1)
        return np.where((K == 0) | (K == M), 1.0, p)

    def lbinom(n, k):
        return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)

    lo = np.maximum(0, K - Nm)
    hi = np.minimum(K, Nf)
    size = hi - lo + 1
    item = np.repeat(np.arange(len(K)), size)
    starts = np.concatenate([[0], np.cumsum(size)[:-1]])
    k = lo[item] + (np.arange(size.sum()) - starts[item])
    Kk = K[item]
    logpmf = lbinom(Kk, k) + lbinom(M - Kk, Nf - k) - lbinom(M, Nf)
    lp_obs = lbinom(K, nf) + lbinom(M - K, Nf - nf) - lbinom(M, Nf)
    rel = logpmf - lp_obs[item]
    terms = np.where(rel <= np.log1p(1e-7), np.exp(np.minimum(rel, 0.0)), 0.0)
    p = np.add.reduceat(terms, starts) * np.exp(lp_obs)
    return np.minimum(p, 1.0)


# --------------------------------------------------------------------------------------------
