"""What a validity check's verdict becomes once everything around it is known, and how it
is told: the structural premises (a degenerate row, an effect shown absent, a metric whose
controls do not validate it on this data, a mask that reads as one gender), the reason of
every verdict in words with its numbers and margin, the counts and the markdown section.

The checks come from :mod:`biaslab.analysis.validity` (paper 000's claims, LIBRA's, the
declared ones) and :mod:`biaslab.analysis.validity_paper001`, decided by
``validity.decide``; apply here, in this order: :func:`apply_degenerate`,
:func:`apply_no_effect_to_reduce`, :func:`apply_controls`, :func:`apply_mask_neutral`, then
:func:`explain` last.
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from biaslab.analysis.validity import ATTRIBUTES, JUDGED, NEUTRAL_RANGE, not_testable


#: metric named in a check id -> the controls' (task, metric)
CONTROLLED_METRIC = {"ratio<0": ("classifier", "Ratio"),
                     "ratio_expected<0": ("classifier", "Ratio_E"),
                     "masked_auc<0": ("classifier", "masked_AUC"),
                     "original/masked_auc>50": ("classifier", "masked_AUC"),
                     "synthetic-original/leakage<0": ("classifier", "Leakage"),
                     "libra-original/lic<0": ("captioner", "LIC"),
                     "libra-original/error≤tol": ("captioner", "Error")}


#: check family -> the model family whose degenerate rows (report's †) it reads
FAMILY_TASK = {"classifier": "classifier", "classifier_logit": "classifier",
               "captioner": "captioner", "captioner_margin": "captioner"}


def check_rows(c: Mapping[str, Any]) -> list[str]:
    """The model rows a check compares: its ``rows`` (declared checks), else read from its id
    ``<family>/<row>[-<row>]/<quantity>`` (``libra`` names LIBRA's row, not a model row)."""
    if c.get("rows"):
        return [str(r) for r in c["rows"]]
    parts = str(c["id"]).split("/")
    if len(parts) < 3 or parts[0] not in FAMILY_TASK:
        return []
    return [r for r in parts[1].split("-") if r != "libra"]


def apply_degenerate(checks: Sequence[Mapping[str, Any]],
                     degenerate: Mapping[str, Sequence[str]] | None) -> list[dict]:
    """``checks`` with verdict "not testable" where a compared row is degenerate
    (``degenerate``: ``{"classifier": rows, "captioner": rows}``, the rows the report marks
    † because their utility is below ``report.utility_floor`` of Original's, or their
    captions lose the gender words; ``biaslab.report.notes.degenerate_rows``): a model that does
    not work reads as unbiased by not working, so its bias is no evidence either way. The
    rule reads the rows' utility, never the check's effect; the measured effect is kept."""
    out = []
    deg = {t: set(v or []) for t, v in (degenerate or {}).items()}
    for c in checks:
        fam = str(c["id"]).split("/")[0]
        bad = [r for r in check_rows(c) if r in deg.get(FAMILY_TASK.get(fam, ""), ())]
        if bad and c["verdict"] in JUDGED:
            out.append(not_testable(dict(c), (
                f"{' and '.join(bad)} {'is' if len(bad) == 1 else 'are'} degenerate here "
                f"(utility below the report's floor, or captions without gender words: "
                f"marked † in the tables): a model that does not work reads as unbiased by "
                f"not working, so its bias is no evidence")))
        else:
            out.append(dict(c))
    return out


def apply_no_effect_to_reduce(checks: Sequence[Mapping[str, Any]]) -> list[dict]:
    """``checks`` with verdict "not testable" for a claim that a method *reduces* Original's
    sensitivity to an attribute (``<family>/<row>-original/<attribute><0``) where Original's
    own check on it (``<family>/original/<attribute>>0``) shows **no practical effect**: its
    90 % CI lies within the margin, so there is no effect for a method to reduce. Only a
    decided absence counts (an inconclusive premise keeps the claim as it is). Apply after
    :func:`decide`."""
    single = {c["id"]: c for c in checks}
    out = []
    for c in checks:
        parts = str(c["id"]).split("/")
        premise = None
        if len(parts) == 3 and parts[1].endswith("-original") and parts[2].endswith("<0"):
            premise = single.get(f"{parts[0]}/original/{parts[2][:-2]}>0")
        if premise is not None and premise["verdict"] == "no practical effect" \
                and c["verdict"] in JUDGED:
            m = premise.get("margin") or {}
            out.append(not_testable(dict(c), (
                f"Original shows no practical {parts[2][:-2]} sensitivity to reduce "
                f"({premise['id']}: 90 % CI [{_fmt(premise.get('lo90'))}, "
                f"{_fmt(premise.get('hi90'))}] within ± {_fmt(m.get('delta'))})")))
        else:
            out.append(dict(c))
    return out


def control_preconditions(controls: Mapping[str, Any] | None,
                          verdict: str = "does not match") -> dict:
    """Which metrics the control models validate on this data:
    ``{(task, metric): [names of controls whose verdict is verdict]}`` for every metric with
    at least one control (``metrics/controls.json``, stage ``controls``); the probe's entry is
    ``("probe", None)``. Empty when no controls were run. With ``verdict="inconclusive"``:
    the controls whose known answer the run cannot resolve (a direction or an equivalence
    its CI does not decide): the metric is not validated here either, for want of power."""
    out: dict = {}
    if not isinstance(controls, Mapping):
        return out
    for task in ("classifier", "captioner"):
        for name, ms in (controls.get(task) or {}).items():
            for metric, r in (ms or {}).items():
                if isinstance(r, Mapping) and "verdict" in r:
                    bad = out.setdefault((task, metric), [])
                    if r["verdict"] == verdict:
                        bad.append(name)
    for name, attrs in (controls.get("probe") or {}).items():
        for a, r in (attrs or {}).items():
            bad = out.setdefault(("probe", None), [])
            if isinstance(r, Mapping) and r.get("verdict") == verdict:
                bad.append(f"{name}/{a}")
    return out


def apply_controls(checks: Sequence[Mapping[str, Any]], controls: Mapping[str, Any] | None
                   ) -> list[dict]:
    """``checks`` with verdict "metric not valid on this data" (and a ``reason`` naming the
    controls) where a check's metric has a control that does not match its known answer, or
    one whose known answer the run cannot resolve ("inconclusive": the metric cannot tell the
    controls apart at this number of replicates) (:func:`control_preconditions`); other
    checks unchanged. A check whose metric has no control keeps its verdict."""
    pre = control_preconditions(controls)
    weak = control_preconditions(controls, "inconclusive")
    out = []
    for c in checks:
        keys = []
        if c.get("controlled"):      # a declared check names its metric (declared_checks)
            keys.append(tuple(c["controlled"]))
        else:
            for suffix, key in CONTROLLED_METRIC.items():
                if c["id"].endswith(suffix):
                    keys.append(key)
        if not keys and c["id"].rsplit("/", 1)[-1].startswith(ATTRIBUTES):
            keys.append(("probe", None))   # a probe check: <model>/<rows>/<attribute><op>
        bad = [f"{k[0]}{'/' + k[1] if k[1] else ''}: {', '.join(pre[k])}" for k in keys
               if pre.get(k)]
        unresolved = [f"{k[0]}{'/' + k[1] if k[1] else ''}: {', '.join(weak[k])}"
                      for k in keys if weak.get(k)]
        if bad or unresolved:
            why = (["its control models miss their known answer (" + "; ".join(bad) + ")"]
                   if bad else []) + \
                (["the run cannot resolve its control models' known answer at this number of "
                  "replicates (" + "; ".join(unresolved) + ")"] if unresolved else [])
            out.append({**c, "verdict": "metric not valid on this data",
                        "reason": "; ".join(why) + ", metrics/controls.json"})
        else:
            out.append(dict(c))
    return out


def precondition_rows(controls: Mapping[str, Any] | None) -> list[dict]:
    """One row per (task, metric) validated by the controls: ``{"task", "metric", "valid",
    "not_matching": [...], "inconclusive": [controls whose known answer (a direction, or an
    equivalence within its margin) the CI does not decide: the metric lacks power here]}``
    (for ``metrics/validity.json``). ``valid`` only when every control matches."""
    weak: dict = {}
    for task in ("classifier", "captioner"):
        for name, ms in ((controls or {}).get(task) or {}).items():
            for metric, r in (ms or {}).items():
                if isinstance(r, Mapping) and r.get("verdict") == "inconclusive":
                    weak.setdefault((task, metric), []).append(name)
    return [{"task": t, "metric": m or "probe", "valid": not bad and not weak.get((t, m)),
             "not_matching": bad,
             "inconclusive": weak.get((t, m), [])}
            for (t, m), bad in sorted(control_preconditions(controls).items(),
                                      key=lambda kv: (kv[0][0], kv[0][1] or ""))]


def attribute_precondition_rows(controls_attribute: Mapping[str, Any] | None) -> dict:
    """The attribute's controls as preconditions: ``{"attribute", "rows":
    :func:`precondition_rows` of ``metrics/controls_attribute.json`` (stage
    ``controls_attribute``, the same ``{task: {control: {metric: judged}}}`` layout as
    ``metrics/controls.json``)}``, or ``{"attribute", "skipped": why}`` where the stage
    skipped (``attribute: gender``: its controls are the preconditions above) or did not run.
    A row's ``valid`` says whether the attribute's Leakage / LIC on this data read their known
    answers; no gender check depends on it."""
    c = controls_attribute if isinstance(controls_attribute, Mapping) else {}
    name = c.get("attribute")
    if not c or "skipped" in c:
        return {"attribute": name, "skipped": c.get("skipped") or "no attribute controls"}
    # a task the stage skipped ({"skipped": why}, e.g. data without captions) has no rows
    tasks = {t: {k: v for k, v in (c.get(t) or {}).items() if isinstance(v, Mapping)}
             for t in ("classifier", "captioner") if isinstance(c.get(t), Mapping)}
    return {"attribute": name, "rows": precondition_rows(tasks)}


def mask_neutral_rows(probe: Mapping[str, Any] | None,
                      bounds: tuple[float, float] = NEUTRAL_RANGE) -> list[dict]:
    """The mask-neutrality precondition of the Ratio claims: one row per
    training set / method from ``metrics/probe.json["mask_neutral"]`` (stage ``probe``,
    :func:`biaslab.analysis.probe.mask_neutral_record`).

    A model that calls the masked person itself a man (or a woman) does so on every masked
    test image, so its Ratio measures the fill, not the context. The test is what the fill
    *adds*: the mask effect Ratio_E(masked) / Ratio_E(the same images drawn without the
    person), pooled over seeds, on the context-free images (``probe/neutral.csv``) and on the
    probe pairs in context; ``met`` when both lie in ``bounds``. The issue's reading, Ratio_E
    on masked context-free images alone (``ratio_expected``), mixes the fill with the model's
    call on an empty image (``ratio_expected_empty``): S_synthetic's models call an empty grey
    image a woman (Ratio_E ~0.25) whatever fills the box, which the Ratio metric rightly
    counts as the model's bias, not the mask's. Both are in the row. A probe.json without the
    person-free reference (older runs) falls back to ``ratio_expected``.

    Returns:
        ``[{"dataset", "ratio_expected", "lo", "hi", "per_seed", "ratio_expected_empty",
        "mask_effect", "mask_effect_lo", "mask_effect_hi", "mask_effect_per_seed",
        "context": {"mask_effect", "mask_effect_lo", "mask_effect_hi", "ratio_expected",
        "ratio_expected_empty", "n_images"} | None, "n_images", "bounds", "measure":
        "mask_effect" | "ratio_expected", "met"}]``; empty when the probe has no such images.
    """
    rows = []
    lo, hi = bounds

    def val(v, flag=None):
        if v is None:
            return float("inf") if flag == "r=inf" else None
        return float(v)

    for d, r in ((probe or {}).get("mask_neutral") or {}).items():
        if not isinstance(r, Mapping):
            continue
        v = val(r.get("ratio_expected"), r.get("ratio_flag"))
        ctx = r.get("context") if isinstance(r.get("context"), Mapping) else None
        row = {"dataset": d, "ratio_expected": v, "lo": r.get("lo"), "hi": r.get("hi"),
               "per_seed": r.get("per_seed"),
               "ratio_expected_empty": r.get("ratio_expected_empty"),
               "mask_effect": r.get("mask_effect"),
               "mask_effect_lo": r.get("mask_effect_lo"),
               "mask_effect_hi": r.get("mask_effect_hi"),
               "mask_effect_per_seed": r.get("mask_effect_per_seed"),
               "context": ({k: ctx.get(k) for k in ("mask_effect", "mask_effect_lo",
                                                    "mask_effect_hi", "ratio_expected",
                                                    "ratio_expected_empty", "n_images")}
                           if ctx else None),
               "n_images": r.get("n_images"), "bounds": [lo, hi]}
        if "mask_effect" in r:
            tested = [row["mask_effect"]] + ([ctx.get("mask_effect")] if ctx else [])
            row["measure"] = "mask_effect"
            row["met"] = all(t is not None and lo <= float(t) <= hi for t in tested)
        else:
            if v is None:
                continue
            row["measure"] = "ratio_expected"
            row["met"] = bool(lo <= v <= hi)
        rows.append(row)
    return rows


def _f2(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.2f}"


def _ci2(r: Mapping[str, Any], lo: str, hi: str) -> str:
    return (f" [{float(r[lo]):.2f}, {float(r[hi]):.2f}]"
            if r.get(lo) is not None and r.get(hi) is not None else "")


def mask_neutral_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Lines for the report: the mask-neutrality precondition per training set
    (:func:`mask_neutral_rows`)."""
    if not rows:
        return []
    lo, hi = rows[0]["bounds"]
    if any(r.get("measure") == "mask_effect" for r in rows):
        out = [f"Mask neutrality (precondition of the Ratio claims): the mask effect, Ratio_E "
               f"on persons-masked images / Ratio_E on the same images drawn without the "
               f"person, pooled over seeds, must lie in [{lo:g}, {hi:g}] without context "
               f"and in context (the probe pairs). Ratio_E of the masked and of the "
               f"person-free context-free images are shown too: the second is the model's "
               f"own call on an empty image, which the Ratio metric counts as its bias:", "",
               "| training set | mask effect, no context [95 % CI] | per seed | mask effect, "
               "in context [95 % CI] | Ratio_E masked, no context | Ratio_E person-free, no "
               "context | n images (no context / context) | met |",
               "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            c = r.get("context") or {}
            per = ", ".join(_f2(v) for v in (r.get("mask_effect_per_seed") or []))
            out.append(f"| {r['dataset']} | {_f2(r.get('mask_effect'))}"
                       f"{_ci2(r, 'mask_effect_lo', 'mask_effect_hi')} | {per} | "
                       f"{_f2(c.get('mask_effect'))}"
                       f"{_ci2(c, 'mask_effect_lo', 'mask_effect_hi')} | "
                       f"{_f2(r.get('ratio_expected'))}{_ci2(r, 'lo', 'hi')} | "
                       f"{_f2(r.get('ratio_expected_empty'))} | {r.get('n_images')} / "
                       f"{c.get('n_images')} | {'yes' if r['met'] else '**no**'} |")
        out += ["", "The verdict uses the point estimates. The intervals cover the finite "
                    "image sets only; the per-seed values show the spread over training "
                    "seeds."]
        return out + [""]
    out = [f"Mask neutrality (precondition of the Ratio claims): Ratio_E on persons-masked "
           f"images without context, pooled over seeds, must lie in [{lo:g}, {hi:g}]:", "",
           "| training set | Ratio_E (masked, no context) [95 % CI over images] | per seed | "
           "n images | met |",
           "|---|---|---|---|---|"]
    for r in rows:
        per = ", ".join(f"{v:.2f}" for v in (r.get("per_seed") or []) if v is not None)
        out.append(f"| {r['dataset']} | {r['ratio_expected']:.2f}{_ci2(r, 'lo', 'hi')} | "
                   f"{per} | {r.get('n_images')} | {'yes' if r['met'] else '**no**'} |")
    out += ["", "The verdict uses the point estimate (the issue's rule). The interval covers "
                "the finite image set only; the per-seed values show the spread over training "
                "seeds, which is far larger."]
    return out + [""]


#: the training sets each Ratio check compares
RATIO_ROWS = {"ratio<0": ("synthetic", "original"), "ratio_expected<0": ("synthetic", "original")}


def apply_mask_neutral(checks: Sequence[Mapping[str, Any]], probe: Mapping[str, Any] | None
                       ) -> list[dict]:
    """``checks`` with verdict "mask not neutral" (and a ``reason`` with the measured Ratio_E)
    on the Ratio claims whose training sets miss the mask-neutrality precondition
    (:func:`mask_neutral_rows`); other checks unchanged."""
    bad = {r["dataset"]: r for r in mask_neutral_rows(probe) if not r["met"]}
    out = []
    for c in checks:
        rows = next((v for k, v in RATIO_ROWS.items() if c["id"].endswith(k)), ())
        if rows and c.get("rows"):   # a declared Ratio claim compares its own rows
            rows = tuple(c["rows"])
        miss = [bad[d] for d in rows if d in bad]
        if miss:
            lo, hi = miss[0]["bounds"]

            def said(r):
                if r.get("measure") == "mask_effect":
                    c = r.get("context") or {}
                    return (f"{r['dataset']}'s mask effect is {_f2(r.get('mask_effect'))} "
                            f"without context and {_f2(c.get('mask_effect'))} in context")
                return f"{r['dataset']}'s Ratio_E on masked context-free images is " \
                       f"{r['ratio_expected']:.2f}"
            out.append({**c, "verdict": "mask not neutral",
                        "reason": "; ".join(said(r) for r in miss)
                                  + f", outside [{lo:g}, {hi:g}] (metrics/probe.json "
                                    "mask_neutral): the mask itself reads as one gender"})
        else:
            out.append(dict(c))
    return out


def _fmt(v: Any) -> str:
    return "–" if v is None else f"{float(v):+.3g}"


def _no_variance(c: Mapping[str, Any]) -> bool:
    """True when the check's 95 % CI has zero width: every seed of the compared rows reads
    the same value (``stats.difference`` / ``stats.summarize`` give [m, m] then)."""
    lo, hi = c.get("lo"), c.get("hi")
    if lo is None or hi is None:
        return False
    lo, hi = float(lo), float(hi)
    return abs(hi - lo) <= 1e-12 * max(1.0, abs(lo), abs(hi))


def _reason(c: Mapping[str, Any]) -> str:
    """Why an interval verdict (:data:`JUDGED`) is what it is, in words with its numbers."""
    lo, hi, ref, v, e = c.get("lo"), c.get("hi"), float(c["reference"]), c["verdict"], \
        c["expect"]
    if lo is None or hi is None:
        return (f"no interval: fewer than 2 seeds with a finite value (n = {c.get('n')}), or an "
                f"infinite seed")
    ci = f"the 95 % CI [{_fmt(lo)}, {_fmt(hi)}]"
    m = c.get("margin")
    d = None if not m else float(m["delta"])
    ci90 = f"the 90 % CI [{_fmt(c.get('lo90'))}, {_fmt(c.get('hi90'))}]"
    why = "" if not m else (f" (margin {d:.3g} = {m['fraction']:g} x {m['effect']:.3g}, "
                            f"{m['basis']})" if "fraction" in m else
                            f" (margin {d:.3g}: {m['basis']})")
    if e == "≈" and d is None:   # a CI-covers rule without a margin (the bias sweep's)
        return f"{ci} {'covers' if v == 'holds' else 'excludes'} {ref:g} (no margin)"
    if e == "≈":
        if v == "holds":
            return f"{ci90} lies inside {ref:g} ± {d:.3g}{why}"
        if v == "fails":
            return f"{ci} lies outside {ref:g} ± {d:.3g}{why}"
        return f"{ci90} reaches past {ref:g} ± {d:.3g}{why}: equivalence is not shown"
    if e in ("≥", "≤"):
        bound = ref - (d or 0.0) if e == "≥" else ref + (d or 0.0)
        word = "decrease" if e == "≥" else "increase"
        if v == "holds":
            return (f"{ci90} lies {'above' if e == '≥' else 'below'} {bound:.3g}: a one-sided "
                    f"5 % test rules out a{'n' if e == '≤' else ''} {word} of the margin or "
                    f"more{why}")
        if v == "fails":
            return (f"{ci} lies {'below' if e == '≥' else 'above'} {bound:.3g}: a {word} "
                    f"beyond the margin is shown{why}")
        return (f"{ci90} reaches {bound:.3g}: neither a {word} beyond the margin nor its "
                f"absence is shown{why}" + _seeds_needed(c))
    if v == "no practical effect":
        return (f"{ci90} lies inside {ref:g} ± {d:.3g}: any effect is smaller than the "
                f"margin{why}" + (" (the 95 % CI excludes the reference: a real but "
                                  "negligible difference)" if float(lo) > ref or float(hi) < ref
                                  else ""))
    if v == "holds":
        return f"{ci} lies entirely {'above' if e == '>' else 'below'} {ref:g}"
    if v == "fails":
        return (f"{ci} lies at or {'below' if e == '>' else 'above'} {ref:g}, against the "
                f"claim")
    tail = (f"; {ci90} also reaches past {ref:g} ± {d:.3g}, so no practical effect is not "
            f"shown either{why}" if m else "; the check has no margin")
    return (f"{ci} contains {ref:g}: the run cannot decide the direction{tail}"
            + _seeds_needed(c))


def _seeds_needed(c: Mapping[str, Any]) -> str:
    """Why an interval cannot decide ("or says why not"): the seeds per row that would put
    the observed mean at the decisive edge with the spread unchanged, n' = ceil(n (half-width
    / distance)^2) (a normal approximation; it ignores the t quantile's shrinking, so it errs
    low for n' near n). The distance is, for a direction, ``|mean - reference|`` (95 % CI);
    with a margin, also the room left inside it: ``delta - |mean - reference|`` for "no
    practical effect", ``mean - (reference - delta)`` for "not below" ("not above"
    mirrored) (90 % CI). The smallest such n' is given, with the outcome it would decide;
    "" without the numbers or when no distance is positive."""
    try:
        mean, lo, hi, n = (float(c["mean"]), float(c["lo"]), float(c["hi"]), int(c["n"]))
    except (KeyError, TypeError, ValueError):
        return ""
    ref, e = float(c["reference"]), c["expect"]
    hw = (hi - lo) / 2
    lo90, hi90 = c.get("lo90"), c.get("hi90")
    hw90 = (float(hi90) - float(lo90)) / 2 if lo90 is not None and hi90 is not None else hw
    d = (c.get("margin") or {}).get("delta")
    options = []
    if e in (">", "<"):
        options.append((abs(mean - ref), hw, "the direction"))
    if d is not None and e in (">", "<", "≈"):
        options.append((float(d) - abs(mean - ref), hw90, "an effect within the margin"))
    if d is not None and e == "≥":
        options.append((mean - (ref - float(d)), hw90, "no decrease beyond the margin"))
    if d is None and e == "≥":
        options.append((mean - ref, hw90, "no decrease"))
    if d is not None and e == "≤":
        options.append((ref + float(d) - mean, hw90, "no increase beyond the margin"))
    if d is None and e == "≤":
        options.append((ref - mean, hw90, "no increase"))
    needs = [(math.ceil(n * (w / dist) ** 2), what) for dist, w, what in options
             if dist > 0 and w > 0 and n > 0 and math.isfinite(w)]
    if not needs:
        return (" (the observed mean lies beyond the margin's bound: more seeds would show "
                "the opposite outcome, if any)" if d is not None and options else "")
    need, what = min(needs)
    return (f" (at this spread about {need} seeds per row, not {n}, would show {what} if the "
            f"mean stayed where it is)")


def explain(checks: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Every check with a ``reason`` and a ``source``, and no empty verdict:

    * a check judged from its interval whose measure has no variance (zero-width CI: every
      seed of the compared rows gives the same value, e.g. a Table 3 Δ that is 0 for every
      model because the inpainting changed no gender call) reads **"not informative"**: the
      data cannot move the measure, so no outcome of the comparison is evidence;
    * every other interval verdict gets the reason in words (:func:`_reason`), with its
      margin and, where it is undecided, the seeds that would decide it;
    * verdicts set earlier ("not testable", "metric not valid on this data", "mask not
      neutral") keep their reasons.

    Apply last, after :func:`apply_controls` and :func:`apply_mask_neutral`. Returns new dicts.
    """
    out = []
    for c in checks:
        c = {**c, "source": c.get("source") or "unknown"}
        judged = c["verdict"]
        if c["verdict"] in JUDGED and _no_variance(c):
            what = ("Table 3's Δ is the same in every seed of both rows"
                    if "delta" in c["id"] else "every seed of the compared rows gives the same "
                                                "value")
            c.update(verdict="not informative",
                     reason=f"no variance: {what} (the CI is the single value "
                            f"{_fmt(c.get('mean'))}, n = {c.get('n')}); the data cannot move "
                            f"this measure, so the comparison is no evidence either way"
                            + (" (a Δ of 0 means the inpainting changed no gender call: the "
                               "counterfactual left the gender cue intact)"
                               if "delta" in c["id"] and c.get("mean") == 0 else ""))
        elif c["verdict"] in JUDGED:
            c["reason"] = _reason(c)
        if c.get("control") and (c["verdict"] in JUDGED or c["verdict"] == "not informative"):
            c = _with_control(c, judged)
        if c.get("domain"):   # the domain check's numbers beside every verdict
            c = {**c, "reason": f"{c.get('reason', '')}; "
                                f"{_domain_words(c['domain'], c['verdict'])}"}
        out.append(c)
    return out


def _domain_words(d: Mapping[str, Any], verdict: str) -> str:
    """The real-vs-generated domain check beside a Leakage check of ``verdict``:
    whether S_synthetic's Leakage is read inside its training domain."""
    g = d["gap"]
    probe = (f"; a logistic regression on the frozen features tells real from generated at "
             f"AUC {_fmt(d['probe_auc'])} (50 = alike)" if d.get("probe_auc") is not None
             else "")
    head = (f"domain check: S_synthetic's object mAP on generated minus real photos of the "
            f"same unseen scenes is {_fmt(g['mean'])} [{_fmt(g['lo'])}, {_fmt(g['hi'])}] "
            f"(n = {g['n']}){probe}")
    if verdict not in JUDGED:   # not judged here (e.g. its metric is not validated): numbers only
        return head
    against = verdict != "holds"
    if d.get("verdict") == "holds":
        return (f"{head}: S_synthetic is scored outside its training domain"
                + (", so its Leakage can go against the paper through the domain gap rather "
                   "than through gender" if against else
                   "; its Leakage is lower all the same"))
    gap = ("S_synthetic does better on real photos than on generated ones" if
           d.get("verdict") == "fails" else "no domain gap is shown")
    return (f"{head}: {gap}, so " + ("the domain does not explain this outcome" if against
                                     else "the Leakage is read inside its training domain"))


def _with_control(c: dict, judged: str) -> dict:
    """A Table 3 check beside its positive control (``c["control"]``: per row the Δ with the
    same parts filled from the other group, so the gender cue can change; ``judged``: the
    verdict from the interval alone). The control moved when its CI lies above 0 in some row.

    * Δ with no variance (every seed the same, e.g. 0: "not informative" so far): a control
      that moved makes the zero meaningful (the test can move a call, the same-group parts
      moved none), so the interval verdict stands; a control that did not move leaves it
      "not informative", now with that reason;
    * Δ with variance: the verdict stands; the reason gives the control's Δ beside the
      same-group Δ, and says when the other group's parts moved calls no more than the
      same group's (the parts carry no gender cue these models read: on the synthetic
      default heads and hands are drawn alike for both groups)."""
    ctl = c["control"]
    shown = "; ".join(f"{row} {_fmt(v['mean'])}" + (f" [{_fmt(v['lo'])}, {_fmt(v['hi'])}]"
                                                      if v.get("lo") is not None else "")
                      for row, v in ctl.items() if v.get("mean") is not None)
    moved = any(v.get("lo") is not None and v["lo"] > 0 for v in ctl.values())
    if c["verdict"] == "not informative":
        if moved:
            return {**c, "verdict": judged,
                    "reason": f"Δ is {_fmt(c.get('mean'))} in every seed, and the positive "
                              f"control (the same parts filled from the other group) moves "
                              f"it: {shown}; so the test can move a call and the same-group "
                              f"parts moved none"}
        return {**c, "reason": f"{c['reason']}; the positive control does not move either "
                               f"(the same parts filled from the other group: Δ {shown}): "
                               f"the test cannot change a gender call on this data"}
    same = c.get("same") or {}
    more = any(v.get("mean") is not None and same.get(row) is not None
               and v["mean"] > same[row] for row, v in ctl.items())
    tail = ("" if more else ": no more than with the same group's parts, so these parts carry "
                            "no gender cue the models read and Δ measures appearance changes only")
    return {**c, "reason": f"{c.get('reason', '')}; positive control (the same parts filled "
                           f"from the other group): Δ {shown}{tail}"}


def summary(checks: Sequence[Mapping[str, Any]]) -> dict:
    """``{"holds": k, "fails": k, "no_practical_effect": k, "inconclusive": k, "not_testable": k,
    "metric_not_valid_on_this_data": k, "mask_not_neutral": k, "not_informative": k, "n": k,
    "confounded": k}`` (a verdict's spaces become ``_``; ``confounded`` counts the checks
    read as confounded by non-person features, whatever their verdict)."""
    out = {"holds": 0, "fails": 0, "no_practical_effect": 0, "inconclusive": 0,
           "not_testable": 0,
           "metric_not_valid_on_this_data": 0, "mask_not_neutral": 0, "not_informative": 0}
    for c in checks:
        k = c["verdict"].replace(" ", "_")
        out[k] = out.get(k, 0) + 1
    out["n"] = len(checks)
    # a reading beside the verdict, not a verdict (biaslab.report.sensitivity)
    out["confounded"] = sum(1 for c in checks if c.get("confounded"))
    return out


def markdown(checks: Sequence[Mapping[str, Any]], digits: int = 3) -> str:
    """The validity section: one row per check (claim, measured effect [95 % CI], n, verdict)."""
    lines = ["| check | expected | measured [95 % CI] | margin | n | verdict | from |",
             "|---|---|---|---|---|---|---|"]
    for c in checks:
        m = c.get("mean")
        meas = "–" if m is None else f"{m:+.{digits}f}" + (
            f" [{c['lo']:+.{digits}f}, {c['hi']:+.{digits}f}]" if c.get("lo") is not None else "")
        exp = {">": f"> {c['reference']:g}", "<": f"< {c['reference']:g}",
               "≈": f"≈ {c['reference']:g}", "≥": f"not < {c['reference']:g}",
               "≤": f"not > {c['reference']:g}"}[c["expect"]]
        one_sided = " (one-sided)" if c["expect"] in ("≥", "≤") and c["verdict"] == "holds" \
            else ""
        src = os.path.basename(str(c.get("source") or "")) or "–"
        mg = (c.get("margin") or {}).get("delta")
        mg = "–" if mg is None else f"± {mg:.{digits}g}"
        conf = ", confounded by non-person features" if c.get("confounded") else ""
        lines.append(f"| {c['claim']} | {exp} | {meas} | {mg} | {c.get('n')} | "
                     f"**{c['verdict']}**{one_sided}{conf} | {src} |")
    # the interval verdicts' reasons are the CI column itself; the others are spelled out
    reasons = [c for c in checks if c.get("reason") and (c["verdict"] not in JUDGED
                                                         or c.get("confounded"))]
    if reasons:
        lines.append("")
        lines += [f"{c['verdict'].capitalize()}: {c['claim']}: {c['reason']}." for c in reasons]
    return "\n".join(lines)


__all__ = ["CONTROLLED_METRIC", "FAMILY_TASK", "RATIO_ROWS", "check_rows", "apply_degenerate",
           "apply_no_effect_to_reduce", "control_preconditions", "apply_controls",
           "precondition_rows", "attribute_precondition_rows", "mask_neutral_rows",
           "mask_neutral_markdown", "apply_mask_neutral", "explain", "summary", "markdown"]
