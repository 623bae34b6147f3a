"""Validity report: the planted truth of the synthetic data as referee (issue 11 item 5).

On the synthetic default the generator plants a gender-context correlation in labeled objects,
the scene and an unlabeled colour cast (``biaslab.synthetic``). The causal probe
(``biaslab.probe``, stage ``probe``) measures each model's sensitivity to each attribute with
the person masked out. Paper 000's claims then become checkable directions:

1. Original (trained on the biased data) is sensitive to every planted attribute (> 0).
2. Over-/sub-sampling (balance the *labeled* objects, paper 000 sec. 2.1): their labeled-object
   sensitivity is below Original's; their colour-cast sensitivity is not (the cast is in no
   label, so resampling cannot see it).
3. S_synthetic (every training image also in the other group's version, so no context predicts
   gender): every sensitivity below Original's and below over-sampling's; its Ratio closer to 1
   than Original's; its Table 3 Δ no larger than Original's (with the ``render`` oracle there
   are no inpainting artifacts to react to).

Each check: ``{"id", "claim", "expect", "reference", "mean", "lo", "hi", "n", "verdict"}`` with
``verdict`` from ``biaslab.stats.verdict`` on the 95 % CI: "holds" (the CI lies on the
expected side), "fails" (on the other side), "inconclusive" (it straddles). Differences between
rows are Welch t intervals over seeds (``biaslab.stats.difference``); single-row effects the
t interval over seeds (``biaslab.stats.summarize``).

"Not below" (claim 2's cast, ``≥``) is checked as "the CI of the difference reaches 0 or above",
"not above" (claim 3's Δ, ``≤``) as "it reaches 0 or below": an underpowered run passes these
trivially, so the report prints the interval beside the verdict.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from biaslab import stats

ATTRIBUTES = ("objects", "scene", "cast")
#: attribute -> whether label-based resampling can see it
LABELED = {"objects": True, "scene": False, "cast": False}


def _values(node: Any) -> list | None:
    """Per-seed values of a stored probe metric: ``node["values"]``, or the ``mean`` of each
    entry of ``node["per_seed"]`` (``metrics/probe.json``); None when absent."""
    if not isinstance(node, Mapping):
        return None
    if isinstance(node.get("values"), list):
        return node["values"]
    per = node.get("per_seed")
    if isinstance(per, list):
        return [p.get("mean") if isinstance(p, Mapping) else None for p in per]
    return None


def _check(cid: str, claim: str, expect: str, ref: float, mean, lo, hi, n) -> dict:
    return {"id": cid, "claim": claim, "expect": expect, "reference": ref, "mean": mean,
            "lo": lo, "hi": hi, "n": n, "verdict": _verdict(lo, hi, expect, ref)}


def _verdict(lo, hi, expect: str, ref: float) -> str:
    """``stats.verdict`` plus the one-sided "not below" (≥) and "not above" (≤) claims: they
    hold when the CI reaches ``ref`` on the allowed side and fail when it lies beyond it."""
    if expect not in ("≥", "≤"):
        return stats.verdict(lo, hi, expect, ref)
    if lo is None or hi is None:
        return "inconclusive"
    if expect == "≥":
        return "holds" if hi >= ref else "fails"
    return "holds" if lo <= ref else "fails"


def _effect(cid: str, claim: str, node: Any, expect: str, ref: float) -> dict:
    """A single row's effect: the CI the stage stored (``lo``/``hi``: t over seeds, or the
    pair bootstrap with fewer seeds, ``biaslab.probe``), else the t interval of its values."""
    if isinstance(node, Mapping) and node.get("lo") is not None and node.get("mean") is not None:
        n = node.get("n_seeds") or len(_values(node) or [])
        return _check(cid, claim, expect, ref, node["mean"], node["lo"], node["hi"], n)
    s = stats.summarize(_values(node) or [])
    return _check(cid, claim, expect, ref, s["mean"], s["lo"], s["hi"], s["n"])


def _diff(cid: str, claim: str, a: Sequence | None, b: Sequence | None, expect: str) -> dict:
    d = stats.difference(a or [], b or [])
    return _check(cid, claim, expect, 0.0, d["diff"], d["lo"], d["hi"], min(d["n"], d["n_ref"]))


def probe_checks(probe: Mapping[str, Any], model: str = "classifier") -> list[dict]:
    """Claims 1-3 on the probe sensitivities of ``model`` ("classifier" or "captioner").

    Args:
        probe: ``metrics/probe.json`` ({model: {dataset: {attribute: {..., "values": [per-seed
            mean sensitivity]}}}}).
        model: which model family.

    Returns:
        list of checks (see module docstring); rows absent from the probe are skipped.
    """
    fam = probe.get(model) or {}
    out = []

    def vals(row, attr):
        return _values((fam.get(row) or {}).get(attr))

    for a in ATTRIBUTES:
        if vals("original", a) is not None:
            out.append(_effect(f"{model}/original/{a}>0",
                               f"{model} on Original is sensitive to the {a} (> 0)",
                               (fam.get("original") or {}).get(a), ">", 0.0))
    for row in ("oversample", "subsample"):
        if vals(row, "objects") is not None and vals("original", "objects") is not None:
            out.append(_diff(f"{model}/{row}-original/objects<0",
                             f"{model}: {row} less sensitive to labeled objects than Original",
                             vals(row, "objects"), vals("original", "objects"), "<"))
        if vals(row, "cast") is not None and vals("original", "cast") is not None:
            out.append(_diff(f"{model}/{row}-original/cast≥0",
                             f"{model}: {row} not less sensitive to the unlabeled colour cast "
                             f"than Original", vals(row, "cast"), vals("original", "cast"), "≥"))
    for a in ATTRIBUTES:
        for ref in ("original", "oversample"):
            if vals("synthetic", a) is not None and vals(ref, a) is not None:
                out.append(_diff(f"{model}/synthetic-{ref}/{a}<0",
                                 f"{model}: S_synthetic less sensitive to the {a} than {ref}",
                                 vals("synthetic", a), vals(ref, a), "<"))
    return out


def _seed_values(metrics: Mapping[str, Any], row: str, key: str) -> list | None:
    per = (metrics.get(row) or {}).get("per_seed")
    if not isinstance(per, list):
        return None
    return [p.get(key) if isinstance(p, Mapping) else None for p in per]


def table_checks(classification: Mapping[str, Any], artifact: Mapping[str, Any]) -> list[dict]:
    """Claim 3's Ratio and Δ parts from ``metrics/classification.json`` (per-seed
    ``Ratio``) and ``metrics/artifact.json`` (per-seed ``delta``)."""
    out = []
    rs, ro = _seed_values(classification, "synthetic", "Ratio"), \
        _seed_values(classification, "original", "Ratio")
    if rs is not None and ro is not None:
        out.append(_diff("classifier/synthetic-original/ratio<0",
                         "classifier: S_synthetic's Ratio closer to 1 than Original's", rs, ro,
                         "<"))
    # the same claim on the threshold-free Ratio (biaslab.classify.evaluate.expected_ratio):
    # an addition beside, not instead of, paper 000's thresholded Ratio above
    es, eo = _seed_values(classification, "synthetic", "Ratio_expected"), \
        _seed_values(classification, "original", "Ratio_expected")
    if es is not None and eo is not None and any(v is not None for v in es + eo):
        out.append(_diff("classifier/synthetic-original/ratio_expected<0",
                         "classifier: S_synthetic's expected-count Ratio_E closer to 1 than "
                         "Original's", es, eo, "<"))
    ds, do = _seed_values(artifact, "synthetic", "delta"), _seed_values(artifact, "original",
                                                                          "delta")
    if ds is not None and do is not None:
        out.append(_diff("classifier/synthetic-original/delta≤0",
                         "classifier: S_synthetic's Table 3 Δ no larger than Original's", ds, do,
                         "≤"))
    return out


def summary(checks: Sequence[Mapping[str, Any]]) -> dict:
    """``{"holds": k, "fails": k, "inconclusive": k, "n": k}``."""
    out = {"holds": 0, "fails": 0, "inconclusive": 0}
    for c in checks:
        out[c["verdict"]] = out.get(c["verdict"], 0) + 1
    out["n"] = len(checks)
    return out


def markdown(checks: Sequence[Mapping[str, Any]], digits: int = 3) -> str:
    """The validity section: one row per check (claim, measured effect [95 % CI], n, verdict)."""
    lines = ["| check | expected | measured [95 % CI] | n | verdict |", "|---|---|---|---|---|"]
    for c in checks:
        m = c.get("mean")
        meas = "–" if m is None else f"{m:+.{digits}f}" + (
            f" [{c['lo']:+.{digits}f}, {c['hi']:+.{digits}f}]" if c.get("lo") is not None else "")
        exp = {">": f"> {c['reference']:g}", "<": f"< {c['reference']:g}",
               "≈": f"≈ {c['reference']:g}", "≥": f"not < {c['reference']:g}",
               "≤": f"not > {c['reference']:g}"}[c["expect"]]
        lines.append(f"| {c['claim']} | {exp} | {meas} | {c.get('n')} | **{c['verdict']}** |")
    return "\n".join(lines)


__all__ = ["ATTRIBUTES", "LABELED", "probe_checks", "table_checks", "summary", "markdown"]
