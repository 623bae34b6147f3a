"""Paper 003's claims about LIBRA, judged on this run (``metrics/validity.json``): with LIBRA a
captioner's LIC falls, its Error rises by no more than paper 003's worst case and its caption
quality holds, and the DCG keeps correct human captions and fixes their gender swaps. The
per-seed differences are paired (the same captioner seed before and after LIBRA); the decision
rules are :mod:`biaslab.analysis.validity`'s.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from biaslab.analysis import equivalence
from biaslab.analysis.validity import (fixed_margin, make_check, margin_of, mean_or_none,
                                       seed_values, span)
from biaslab.runtime import stats


#: paper 003's worst Error increase from LIBRA (OSCAR: 3.0 -> 4.6, Table 2), points
LIBRA_ERROR_TOLERANCE = 1.6


#: the range of one value of a LIBRA-checked metric (the paired change's is twice as wide)
LIBRA_RANGE = {"LIC": (-100.0, 100.0), "Error": (0.0, 100.0), "BLEU-4": (0.0, 100.0),
               "METEOR": (0.0, 100.0)}
#: the bars for the DCG on the test split's human captions / their gender swaps
DCG_KEEP_CORRECT, DCG_FIX_SWAPPED = 0.97, 0.80


def _paired(cid: str, claim: str, a: Sequence | None, b: Sequence | None, expect: str,
            ref: float = 0.0, margin: Mapping[str, Any] | None = None,
            bounds: tuple[float, float] | None = None) -> dict:
    """Per-seed paired difference ``a_s - b_s`` (the same captioner seed before / after
    LIBRA), its mean and t 95 % CI over seeds, judged against ``ref``."""
    pairs = [(x, y) for x, y in zip(a or [], b or []) if x is not None and y is not None]
    d = stats.summarize([float(x) - float(y) for x, y in pairs])
    d90 = stats.summarize([float(x) - float(y) for x, y in pairs], equivalence.EQUIVALENCE_LEVEL)
    return make_check(cid, claim, expect, ref, d["mean"], d["lo"], d["hi"], d["n"],
                  "metrics/captioning.json", (d90["lo"], d90["hi"]), margin, span(bounds))


def _proportion(cid: str, claim: str, part: Mapping[str, Any] | None, key: str, ref: float
                ) -> dict | None:
    """A fraction of captions (``metrics/dcg_apply.json``: ``after[key]`` over ``after.n``)
    with its Wilson 95 % interval, judged "not below" ``ref``."""
    after = (part or {}).get("after") or {}
    n = int(after.get("n") or 0)
    if not n or after.get(key) is None:
        return None
    from scipy.stats import binomtest
    k = int(round(float(after[key]) * n))
    ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
    ci90 = binomtest(k, n).proportion_ci(equivalence.EQUIVALENCE_LEVEL, method="wilson")
    return make_check(cid, claim, "≥", ref, k / n, float(ci.low), float(ci.high), n,
                  "metrics/dcg_apply.json", (float(ci90.low), float(ci90.high)),
                  fixed_margin(0.0, "the bar is the margin itself"))


def libra_checks(captioning: Mapping[str, Any], dcg_apply: Mapping[str, Any] | None = None
                 ) -> list[dict]:
    """Paper 003's claims on the default, from ``metrics/captioning.json``
    (rows ``original`` and ``original+LIBRA``: LIBRA on the same captioner seeds, so the
    differences are paired by seed) and ``metrics/dcg_apply.json``:

    * LIC of Original + LIBRA lower than Original's (``<``);
    * Error not higher than Original's by more than ``LIBRA_ERROR_TOLERANCE`` (paper 003's
      worst case, +1.6 points; ``≤`` holds while the CI's lower end is at most +1.6);
    * BLEU-4, CIDEr and METEOR not lower than Original's (``≥``: the CI reaches 0);
    * the DCG keeps >= 97 % of the correct human captions' genders correct and makes >= 80 %
      of their gender swaps correct (``≥`` on the Wilson interval);
    * the DCG lowers the Error of the ``context_reader`` controls (every reader in
      ``dcg_apply.json`` whose name starts so: the full reader and ``context_reader[cast]``),
      captioners whose gender errors all come from context (``<`` on the paired per-image
      ``error_change``, percentage points; only on data with a planted truth).

    Rows absent (no DCG, no captioner) give no check."""
    out: list[dict] = []
    if "original" in captioning and "original+LIBRA" in captioning:
        def sv(row, key):
            return seed_values(captioning, row, key)
        for key, cid, claim, expect, ref in (
                ("LIC", "lic<0", "LIC lower than Original's", "<", 0.0),
                ("Error", "error≤tol", f"Error not higher than Original's by more than "
                                       f"{LIBRA_ERROR_TOLERANCE:g} points (paper 003's worst "
                                       f"case)", "≤", LIBRA_ERROR_TOLERANCE),
                ("BLEU-4", "bleu4≥0", "BLEU-4 not lower than Original's", "≥", 0.0),
                ("CIDEr", "cider≥0", "CIDEr not lower than Original's", "≥", 0.0),
                ("METEOR", "meteor≥0", "METEOR not lower than Original's", "≥", 0.0)):
            a, b = sv("original+LIBRA", key), sv("original", key)
            if a is not None and b is not None:
                m = (fixed_margin(0.0, "paper 003's worst case is the margin itself")
                     if key == "Error" else margin_of(mean_or_none(b), f"Original's {key}"))
                out.append(_paired(f"captioner/libra-original/{cid}",
                                   f"captioner: Original + LIBRA's {claim} (paired by seed)",
                                   a, b, expect, ref, m, LIBRA_RANGE.get(key)))
    for part, key, ref, cid, claim in (
            ("human", "correct", DCG_KEEP_CORRECT, "libra/dcg/human_correct≥",
             "LIBRA's DCG keeps the gender of correct human captions correct"),
            ("swapped", "correct", DCG_FIX_SWAPPED, "libra/dcg/swapped_correct≥",
             "LIBRA's DCG corrects gender-swapped human captions")):
        c = _proportion(f"{cid}{ref:g}", f"{claim} (>= {100 * ref:g} %)",
                        (dcg_apply or {}).get(part), key, ref)
        if c is not None:
            out.append(c)
    for name in sorted(k for k in (dcg_apply or {}) if k.startswith("context_reader")):
        ch = (dcg_apply[name] or {}).get("error_change") or {}
        before = ((dcg_apply[name] or {}).get("before") or {}).get("wrong")
        if ch.get("n"):
            out.append(make_check(f"libra/dcg/{name}_error<0",
                              f"LIBRA's DCG lowers the Error of the control {name} (paired "
                              f"by image, percentage points)", "<", 0.0, ch.get("mean"),
                              ch.get("lo"), ch.get("hi"), int(ch["n"]),
                              "metrics/dcg_apply.json",
                              margin=margin_of(None if before is None else 100.0 * before,
                                               f"{name}'s Error before the DCG (points)")))
    return out
