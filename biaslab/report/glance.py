"""The answer first: one block per mitigation at the top of ``tables.md``.

A reader's first question is "did this mitigation reduce bias against Original, by how much,
how sure?". Each block answers it from what the report already computed, with no number of
its own: the headline differences from Original (``metrics/summary_full.json``: the mean
over seeds and the Welch 95 % CI of the difference, n seeds per row, as in Tables 1 and 2)
and, where ``metrics/validity.json`` holds a check of that difference, its verdict. The net
line counts the bias metrics whose 95 % CI lies wholly on one side of 0; a CI that contains 0
is "not decided by these seeds", never "no effect".
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

#: the headline bias metrics as ``(task, summary_full name, label, key of its validity
#: check)``; each is read against its unbiased value (:data:`UNBIASED`, else 0)
BIAS_METRICS = (
    ("classifier", "Leakage", "Leakage", "leakage"),
    ("classifier", "masked AUC", "masked AUC", "masked_auc"),
    ("classifier", "Ratio (classifier)", "Ratio", "ratio"),
    ("captioner", "LIC", "LIC", "lic"),
    ("captioner", "Error", "Error", "error"),
)
UTILITY_METRICS = (("classifier", "mAP", "mAP"),)
TASK_LABEL = {"classifier": "Classifier", "captioner": "Captioner"}
#: a mitigation's key in the validity check ids where it differs from its row key
CHECK_ROW = {"original+LIBRA": "libra"}
#: the unbiased value of a bias metric other than 0: chance for the masked gender AUC, an even
#: man : woman split for the classifier's Ratio on persons-masked images (paper 000)
UNBIASED = {"masked AUC": 50.0, "Ratio (classifier)": 1.0}


def _finite(x: Any) -> float | None:
    if x is None or isinstance(x, (str, bool)):
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def bias_direction(name: str, original_mean: float | None, diff: float | None,
                   lo: float | None, hi: float | None) -> str:
    """``"less"``, ``"more"`` or ``"undecided"`` bias for a difference from Original of a
    bias metric, decided by its 95 % CI ``[lo, hi]``.

    Leakage, LIC and Error: lower is less bias (the papers' ↓; a negative Leakage or LIC
    amplifies less than the data), so a CI wholly below 0 is ``"less"`` and wholly above is
    ``"more"``. A metric with an unbiased value ``u`` (:data:`UNBIASED`: masked AUC 50, the
    classifier's Ratio 1) is read by the distance from ``u`` given Original's mean: ``"less"``
    when ``|Original + d - u| < |Original - u|`` for every d in the CI, ``"more"`` when it is
    larger for every d, so a difference that crosses ``u`` (masked AUC from 70 to 20) is not
    less bias. A missing bound or an interval that decides neither is ``"undecided"``.
    """
    if lo is None or hi is None or diff is None:
        return "undecided"
    if name not in UNBIASED or original_mean is None:
        return "less" if hi < 0 else "more" if lo > 0 else "undecided"
    u = UNBIASED[name]
    d0 = abs(original_mean - u)
    d_lo, d_hi = abs(original_mean + lo - u), abs(original_mean + hi - u)
    # the distance is convex in the difference: its largest over [lo, hi] is at a bound
    if max(d_lo, d_hi) < d0:
        return "less"
    # the smallest is at a bound unless the interval reaches the unbiased value
    reaches = (original_mean + lo - u) * (original_mean + hi - u) <= 0
    if not reaches and min(d_lo, d_hi) > d0:
        return "more"
    return "undecided"


def _fmt_diff(rec: Mapping[str, Any], digits: int) -> str:
    d, lo, hi = (_finite(rec.get(k)) for k in ("diff", "diff_lo", "diff_hi"))
    if d is None:
        return "n/a"
    if lo is None or hi is None:
        return f"{d:+.{digits}f} (no CI)"
    return f"{d:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def _check_for(checks: Sequence[Mapping[str, Any]], task: str, row: str,
               key: str) -> Mapping[str, Any] | None:
    """The validity check of ``row`` - Original on metric ``key`` (ids such as
    ``classifier/synthetic-original/leakage<0``), or None."""
    rx = re.compile(rf"^{task}/{re.escape(CHECK_ROW.get(row, row))}-original/{key}[<>≤≥]")
    return next((c for c in checks if rx.match(str(c.get("id", "")))), None)


def mitigation_blocks(full: Mapping[str, Mapping[str, Any]],
                      checks: Sequence[Mapping[str, Any]], names: Mapping[str, str],
                      docs: Mapping[str, str] | None = None, digits: int = 1) -> list[str]:
    """The markdown lines of the answer-first section.

    Args:
        full: ``metrics/summary_full.json`` (:func:`biaslab.report.document.headline`):
            ``{row: {metric name: {"mean", "ci95", "n", "diff", "diff_lo", "diff_hi"}}}``.
        checks: ``metrics/validity.json`` ``checks`` (each with ``id`` and ``verdict``).
        names: ``{row key: display label}`` in table order (``biaslab.registry.row_names``).
        docs: ``{row key: one-line description}`` (the registry's ``doc``), optional.
        digits: decimals of the differences.

    Returns:
        Lines (no trailing blank); empty when ``full`` has no row but Original.
    """
    docs = docs or {}
    base = full.get("original") or {}
    rows = [r for r in names if r != "original" and r in full]
    rows += [r for r in full if r not in names and r != "original"]
    if not rows:
        return []
    out = ["## At a glance: each mitigation against Original", "",
           "Difference from Original: mean over seeds [Welch 95 % CI], n seeds per model "
           "(Tables 1 and 2 have every column). Less bias: the whole CI lowers Leakage, LIC or "
           "Error, or brings the masked AUC closer to 50 or the classifier's Ratio closer to "
           "1. A CI that contains no change is *not decided* by these seeds, which is not the "
           "same as no effect. \"check\" is that difference's verdict in "
           "metrics/validity.json: holds / fails by the 95 % CI, \"no practical effect\" when "
           "the 90 % CI lies within the margin (10 % of Original's own value), \"metric not "
           "valid on this data\" when the metric's control models do not resolve their known "
           "answer.", ""]
    for row in rows:
        rec = full[row]
        doc = docs.get(row)
        out.append(f"**{names.get(row, row)}**" + (f": {doc}" if doc else ""))
        counts = {"less": [], "more": [], "negligible": [], "undecided": [],
                  "unreadable": []}
        for task in ("classifier", "captioner"):
            parts = []
            for t, name, label, key in BIAS_METRICS:
                r = rec.get(name)
                if t != task or not r or "diff" not in r:
                    continue
                orig = _finite((base.get(name) or {}).get("mean"))
                way = bias_direction(name, orig, _finite(r.get("diff")),
                                     _finite(r.get("diff_lo")), _finite(r.get("diff_hi")))
                chk = _check_for(checks, task, row, key)
                # the check's margin or premise overrides the bare direction of the CI
                way = CHECK_READING.get((chk or {}).get("verdict"), way)
                counts[way].append(label)
                word = {"less": "less bias", "more": "more bias",
                        "negligible": "a change too small to matter",
                        "undecided": "not decided",
                        "unreadable": "not readable here"}[way]
                verdict = f"; check {chk['verdict']}" if chk else ""
                parts.append(f"{label} {_fmt_diff(r, digits)}: {word}{verdict}")
            for t, name, label in UTILITY_METRICS:
                r = rec.get(name)
                if t == task and r and "diff" in r:
                    parts.append(f"utility {label} {_fmt_diff(r, digits)}")
            if parts:
                n = next(((rec.get(m[1]) or {}).get("n") for m in BIAS_METRICS
                          if m[0] == task and (rec.get(m[1]) or {}).get("n")), None)
                out.append(f"- {TASK_LABEL[task]} (n = {n}): " + "; ".join(parts) + ".")
        net = []
        for way, word in (("less", "less bias on"), ("more", "more bias on"),
                          ("negligible", "no practical effect on"),
                          ("undecided", "not decided on"), ("unreadable", "not readable on")):
            if counts[way]:
                net.append(f"{word} {', '.join(counts[way])}")
        if net:
            out.append("- Net: " + "; ".join(net) + ".")
        out.append("")
    return out[:-1] if out and out[-1] == "" else out


#: a check's verdict -> the reading of its difference where it says more than the CI's side:
#: within the margin, or not testable on this data (a degenerate row, a balanced test set) or
#: on a metric the controls do not validate here
CHECK_READING = {"no practical effect": "negligible", "not testable": "unreadable",
                 "metric not valid on this data": "unreadable"}


#: the terms the report uses, each in one line, for the glossary at its end
GLOSSARY = (
    ("Original", "the model trained on the training images as they are (paper 000's D)"),
    ("S_augment / S_synthetic", "trained on Original plus its counterfactual images / on the "
     "counterfactuals only: each person repainted as the other gender, objects and scene kept "
     "(paper 000 Eqs. 2-3)"),
    ("Over-sampling / Sub-sampling", "repeat / drop training images until every object's "
     "gender skew is bounded (paper 000 Table 1's resampling baselines); Original, "
     "size-matched: Original cut to sub-sampling's size and gender counts"),
    ("Adversarial, DomInd, GroupDRO", "model-level baselines: a gender adversary on the "
     "features (Wang et al. 2019), one classifier head per gender (Wang et al. 2020), the "
     "worst group's loss (Sagawa et al. 2020)"),
    ("Original + LIBRA", "Original's captions rewritten by LIBRA's debiasing caption "
     "generator (Hirota et al., CVPR 2023)"),
    ("Ratio", "#man / #woman predictions, folded as max(r, 1/r) in Tables 1-2 (1 = balanced; "
     "for captions of unmasked images the test set's own ratio is the reference)"),
    ("Ratio_E", "Ratio from the expected counts sum P(man) / sum P(woman): threshold-free"),
    ("masked AUC", "how well the classifier's gender score separates women from men on "
     "images with the persons masked out (50 = reads no gender from the context)"),
    ("log r", "the signed log of r on persons-masked images: its sign says which gender the "
     "context leans to (> 0: man)"),
    ("Leakage, LK_M, LK_D", "an attacker's accuracy at predicting gender from the model's "
     "predictions (LK_M) minus from the ground-truth labels (LK_D), x100 (paper 000 Eq. 7)"),
    ("LIC, LIC_M, LIC_D", "the same for captions, with gender words masked: an attacker's "
     "confidence-weighted accuracy on model captions minus on human captions, x100 "
     "(Hirota et al., CVPR 2022)"),
    ("Error", "% of images captioned with the other gender (Burns et al. 2018)"),
    ("BiasAmp, DBA_O, DBAC", "bias amplification of words or objects over the training data "
     "(Zhao et al. 2017; Wang & Russakovsky 2021; Nair et al. 2025); BiasAmp is read against "
     "the human captions' own value"),
    ("CI, n", "95 % confidence interval; n = seeds (training runs) behind a cell"),
    ("†", "a row whose utility is below the report's floor: its bias numbers are not ranked"),
    ("holds / fails / no practical effect / inconclusive", "a validity check's verdict: its "
     "95 % CI lies wholly on the claimed side / wholly on the other / its 90 % CI lies within "
     "the margin, so any effect is too small to matter / none of these. A claim of no change "
     "(\"not below\", \"not above\") holds when a one-sided 5 % test rules out a change of "
     "the margin or more (two one-sided tests: Schuirmann 1987; Lakens 2017)"),
    ("margin", "the smallest effect that matters, fixed before the run: 10 % of a reference "
     "effect the same run measures (Original's own effect on that quantity, or a bounded "
     "quantity's full span; param validity.margin_fraction)"),
    ("controls (oracle, context reader, amplifier@q)", "models whose bias is known by "
     "construction, used to check that each metric reads it"),
    ("papers", "000: Hirota et al., Resampled Datasets Are Not Enough (EMNLP 2024); 001: "
     "Smith et al., Balancing the Picture (GenSynth); 002: Hirota's thesis; 003: LIBRA "
     "(CVPR 2023); 004: REVISE (IJCV 2022)"),
)


def glossary_lines() -> list[str]:
    """The glossary section that ends ``tables.md`` (:data:`GLOSSARY`)."""
    return ["## Glossary", ""] + [f"- **{k}**: {v}." for k, v in GLOSSARY]


__all__ = ["BIAS_METRICS", "CHECK_READING", "GLOSSARY", "UNBIASED", "bias_direction",
           "glossary_lines",
           "mitigation_blocks"]
