"""The report's metric-controls section: every control's expected and measured value with its
verdict (``metrics/controls.json``), the power line of each task and the captioning metrics
compared on the same controls."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from biaslab.runtime import stats


def power_line(controls: Mapping[str, Any] | None, task: str, digits: int = 1,
               columns: Sequence | None = None) -> str:
    """One sentence under a table: the smallest difference between two of its rows that the
    test set detects (two-sided 95 %, 80 % power), per metric, from the control models'
    replicate spread (``metrics/controls.json["power"][task]``, stage ``controls``); "" when
    the controls were not run."""
    pw = ((controls or {}).get("power") or {}).get(task) or {}
    if not pw:
        return ""
    shown = None if columns is None else {c[0] for c in columns}
    parts = [f"{m} {v['mde']:.{digits}f}" for m, v in pw.items()
             if isinstance(v, Mapping) and v.get("mde") is not None
             and (shown is None or m in shown)]
    if not parts:
        return ""
    return ("Detectable difference between two rows (95 %, 80 % power; from the control "
            "models' replicate spread on this test set, metrics/controls.json): "
            + ", ".join(parts) + ". Smaller differences between rows are not readable here; "
            "Ratio and Error of a fixed model on a fixed test set carry only the seeds' spread. "
            "This is the largest spread of any control at 80 % power; "
            "`scripts/exp_table.py`'s noise floor is smaller by design: the 95 % CI half-width "
            "of a difference between two runs of Original, from Original's own seed spread, "
            "with no power requirement (the one to read when comparing experiments).")


#: the captioning bias metrics compared on the controls: key, label
def metric_comparison_markdown(controls: Mapping[str, Any] | None, digits: int = 2) -> str:
    """"Which captioning metric sees the planted bias" on the control models:
    :func:`biaslab.report.metric_compare.run_markdown` (per metric and attacker encoder:
    controls matched / missed / undecided, the strongest amplifier's and the human caption's
    values, the slope d/dq and the smallest detectable q). Empty string without captioner
    controls."""
    from biaslab.report.metric_compare import run_markdown
    return run_markdown(controls, digits)


def control_cells(r: Mapping[str, Any], digits: int = 2) -> tuple[str, str]:
    """The "expected" and "measured" cells of one judged control metric: ``= v`` / ``> ref``
    for an exact value or a direction; for a check paired with a base control
    (``expected["paired_with"]``, :func:`biaslab.analysis.controls_eval.judge_paired`)
    ``> <base> (paired)`` and ``Δ <difference> (own <value>)``: the verdict reads the
    difference; for an equivalence claim ``≈ ref ± margin``
    (:func:`biaslab.analysis.controls_eval.decide_equivalence`)."""
    e = r["expected"]
    own = stats.format_cell(r["measured"], digits)
    if "value" in e:
        try:
            return f"= {float(e['value']):g}", own
        except (TypeError, ValueError):
            return f"= {e['value']}", own
    if "paired_with" in e:
        return (f"{e['direction']} {e['paired_with']} (paired)",
                f"Δ {stats.format_cell(r.get('paired') or {}, digits)} (own {own})")
    mg = (r.get("margin") or {}).get("delta")
    if e["direction"] == "≈" and mg is not None:   # an equivalence claim: its margin
        return f"≈ {float(e['reference']):.3g} ± {float(mg):.{digits}g}", own
    return f"{e['direction']} {float(e['reference']):.3g}", own


def controls_markdown(controls: Mapping[str, Any] | None, digits: int = 2) -> str:
    """The metric-controls section: per task, one row per control and metric: expected,
    measured (mean ± 95 % CI over replicates), verdict (``metrics/controls.json``)."""
    if not controls:
        return "The controls stage did not run."
    lines = []
    for task in ("classifier", "captioner"):
        res = controls.get(task) or {}
        if not res:
            continue
        lines += [f"**{task}** (replicates: {len(controls.get('replicates') or [])})", "",
                  "| control | metric | expected | measured | verdict |",
                  "|---|---|---|---|---|"]
        for name, ms in res.items():
            for metric, r in ms.items():
                if "verdict" not in r:
                    continue
                exp, meas = control_cells(r, digits)
                lines.append(f"| {name} | {metric} | {exp} | {meas} | {r['verdict']} |")
        lines.append("")
    probe = controls.get("probe") or {}
    if probe:
        lines += ["**probe** (classifier output P(man) - P(woman); a reader of one attribute "
                  "swings it by 2)", "", "| control | attribute | expected | measured | verdict |",
                  "|---|---|---|---|---|"]
        for name, attrs in probe.items():
            for a, r in attrs.items():
                lines.append(f"| {name} | {a} | {r['expected']['value']:g} | "
                             f"{r['measured']['mean']:g} | {r['verdict']} |")
        lines.append("")
    sens = controls.get("sensitivity") or {}
    if sens:
        n = sum(1 for ctl in sens.values() for p in ctl.values() for r in p.values()
                if "verdict" in r)
        lines += [f"**feature sensitivity**: {n} checks of {len(sens)} controls under the "
                  "perturbed test images, in the section \"Table 1, feature sensitivity\".",
                  ""]
    s = controls.get("summary") or {}
    lines.append(f"{s.get('matches', 0)} of {s.get('n', 0)} control values match their known "
                 f"answer, {s.get('does_not_match', 0)} do not, {s.get('inconclusive', 0)} "
                 f"inconclusive (a direction the CI does not decide).")
    return "\n".join(lines)
