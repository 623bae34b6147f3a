"""The feature-sensitivity section beside Table 1 and its two-dimensional figure (bias score
against feature sensitivity, one point per model: Hirota et al., ICCV 2025, arXiv 2509.07596),
from ``metrics/sensitivity.json`` (stage ``sensitivity``, :mod:`biaslab.analysis.sensitivity`).
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from biaslab.runtime.io import atomic_path

#: metric -> (label, unit, key of the model's Table 1 record in metrics/classification.json)
METRICS = {"masked_AUC": ("masked AUC", "points", "masked_gender_auc"),
           "Ratio_E": ("Ratio_E", "ratio", "Ratio_expected"),
           "Leakage": ("Leakage", "points", "Leakage"),
           "Ratio": ("Ratio", "ratio", "Ratio")}
KIND_WORDS = {"objects": "of the objects masked", "blur": "background blurred (std, % of the "
              "long side)", "swap": "background of an image of the other gender"}


def _f(v, digits: int, sign: bool = True) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


#: below this distance from no bias (in the metric's unit) a % of the bias is not printed:
#: a change relative to a bias of about 0 is a division by noise
MIN_BIAS = {"Ratio": 0.05, "Ratio_E": 0.05, "masked_AUC": 1.0, "Leakage": 1.0}


def change_cell(rec: Mapping | None, digits: int = 1, metric: str | None = None) -> str:
    """``"-3.2 [-4.1, -2.3] (-5 %)"``: the change in points, its 95 % CI and the change as a
    % of the unperturbed bias; ``–`` without a value, the CI left out where there is none, the
    % left out where the unperturbed bias is within :data:`MIN_BIAS` of none."""
    if not rec or rec.get("delta") is None:
        return "–"
    s = _f(rec["delta"], digits)
    if rec.get("lo") is not None and rec.get("hi") is not None:
        s += f" [{_f(rec['lo'], digits)}, {_f(rec['hi'], digits)}]"
    from biaslab.analysis.sensitivity import NULL
    b = rec.get("base")
    small = metric in MIN_BIAS and b is not None and abs(b - NULL[metric]) < MIN_BIAS[metric]
    if rec.get("pct") is not None and not small:
        s += f" ({rec['pct']:+.0f} %)"
    return s


def perturbation_label(name: str) -> str:
    """``objects@0.1`` -> ``10 % objects``; ``blur@2`` -> ``blur 2 %``; ``swap``."""
    kind, _, lvl = name.partition("@")
    if kind == "objects":
        return f"{float(lvl) * 100:g} % objects"
    if kind == "blur":
        return f"blur {float(lvl):g} %"
    return name


def markdown(sens: Mapping | None, names: Mapping[str, str], digits: int = 1) -> list[str]:
    """The "Table 1, feature sensitivity" section: per metric, each model's change under each
    perturbation with its 95 % CI and in %, then the controls' known answers. An empty list
    when the stage did not run (no record)."""
    if not sens or not sens.get("available") or not sens.get("models"):
        return []
    perts = list(sens.get("perturbations") or [])
    ts = sens.get("test_set") or {}
    lines = [
        "### Table 1, feature sensitivity: how far each bias score moves when only the "
        "non-person features change",
        "",
        f"The same models on perturbed copies of the {ts.get('n_images', '?')} test images "
        f"({ts.get('n_female', '?')} female / {ts.get('n_male', '?')} male), the person kept "
        "to the pixel (Hirota et al., ICCV 2025: a bias score that moves under such changes "
        "partly measures the model's reaction to objects and backgrounds). Columns: "
        + "; ".join(f"{perturbation_label(p)}" for p in perts)
        + " (objects: that share of the object instances filled with the image's mean colour; "
          "blur: Gaussian, std as % of the image's long side; swap: the background of an "
          "image of the other gender). Each cell: perturbed minus unperturbed, mean over "
          f"{len(ts.get('seeds') or [])} seeds, [95 % CI: bootstrap over images and seeds; "
          "Leakage: t over seeds] and (the change as a % of the unperturbed bias, its distance "
          "from no bias: Ratio 1, masked AUC 50, Leakage 0; left out where that bias is about "
          "0).",
        "",
    ]
    lines += metric_tables(sens["models"], perts, METRICS, names, digits)
    ctl = sens.get("controls") or {}
    if ctl:
        keys = [k for k in ("Ratio_E", "masked_AUC", "AUC")
                if any(k in recs for by_p in ctl.values() for recs in by_p.values())]
        head = {"Ratio_E": "Ratio_E", "masked_AUC": "masked AUC", "AUC": "AUC on its input"}
        lines += ["Controls with a known answer. The truth readers (person_oracle, "
                  "context_reader) read the annotations: the person oracle must not move; the "
                  "context reader must not move where nothing it reads changed (a blur leaves "
                  "the planted scene, cast and objects in the image), its masked AUC must fall "
                  "when the background is the other gender's (swap) and move when object "
                  "evidence is removed. The pixel readers are logistic regressions on the "
                  "image features: person_oracle_pixels sees only the persons, which every "
                  "perturbation restores to the pixel, so it must not move; "
                  "context_reader_pixels sees the image with the persons blacked out, so where "
                  "a context cue is planted it must move under an object mask or a blur and "
                  "fall under a swap. Inconclusive: a change the test images cannot resolve.",
                  "", "| control | perturbation | " + " | ".join(
                      f"{head[k]}: expected, change [95 % CI]" for k in keys) + " | verdicts |",
                  "|---|---|" + "---|" * len(keys) + "---|"]
        sym = {"0": "0", "!=0": "≠ 0", "<0": "< 0", None: "no known answer"}
        for c, by_p in ctl.items():
            for p, recs in by_p.items():
                cells = [f"{sym[recs[k]['expected']]}: "
                         f"{change_cell(recs[k]['measured'], digits, k)}" if k in recs
                         else "–" for k in keys]
                lines.append(f"| {c} | {perturbation_label(p)} | " + " | ".join(cells) + " | "
                             + ", ".join(r.get("verdict", "–") for r in recs.values()) + " |")
        summ = sens.get("controls_summary") or {}
        lines += ["", "Controls: " + ", ".join(f"{n} {v}" for v, n in summ.items()) + "."
                  + (" A control misses its known answer: the sensitivities above are not "
                     "valid on this data, and no validity check is read through them."
                     if instrument_failed(sens) else ""), ""]
    elif sens.get("controls_note"):
        lines += [f"Controls: {sens['controls_note']}.", ""]
    return lines


def metric_tables(models: Mapping, perts: Sequence[str], metrics: Mapping[str, tuple],
                  names: Mapping[str, str], digits: int = 1) -> list[str]:
    """One markdown table per metric of ``metrics`` (key -> (label, unit, ...)) that any model
    has: a row per model (:func:`ordered`), a column per perturbation, each cell
    :func:`change_cell`."""
    lines: list[str] = []
    order = ordered(models)
    for m, (label, unit, *_) in metrics.items():
        if not any(m in (models[d].get(p) or {}) for d in models for p in perts):
            continue
        lines += [f"**{label}** ({unit})", "",
                  "| model | " + " | ".join(perturbation_label(p) for p in perts) + " |",
                  "|---|" + "---|" * len(perts)]
        for d in order:
            by_p = models[d]
            lines.append(f"| {names.get(d, d)} | " + " | ".join(
                change_cell((by_p.get(p) or {}).get(m), digits, m) for p in perts) + " |")
        lines.append("")
    return lines


#: the captioners' metrics (stage sensitivity_captioner) -> (label, unit)
CAPTION_METRICS = {"Ratio": ("Ratio", "ratio"), "Error": ("Error", "points"),
                   "BiasAmp": ("BiasAmp", "points"), "LIC": ("LIC", "points")}


def captioner_markdown(sens: Mapping | None, names: Mapping[str, str], digits: int = 1
                       ) -> list[str]:
    """The "Table 2, feature sensitivity" section (``metrics/sensitivity_captioner.json``):
    per metric, each captioner row's change under each perturbation with its 95 % CI and in
    %. A line saying why when the stage did not run; [] without a record."""
    if not sens:
        return []
    if not sens.get("available") or not sens.get("models"):
        why = sens.get("reason") or sens.get("skipped")
        return ([f"Table 2, feature sensitivity: not run ({why}).", ""] if why else [])
    perts = list(sens.get("perturbations") or [])
    ts = sens.get("test_set") or {}
    nulls = sens.get("nulls") or {}
    ba = nulls.get("BiasAmp")
    return [
        "### Table 2, feature sensitivity: how far each captioning bias score moves when only "
        "the non-person features change",
        "",
        f"Every captioner on the same perturbed copies of its {ts.get('n_images', '?')} test "
        f"images ({ts.get('n_female', '?')} female / {ts.get('n_male', '?')} male; "
        f"{ts.get('n_left_out', 0)} left out without a perturbed copy), the person kept to the "
        "pixel. Each cell: perturbed minus unperturbed, mean over "
        f"{len(ts.get('seeds') or [])} seeds, [95 % CI: bootstrap over images and seeds for "
        "Ratio and Error; t over seeds for BiasAmp and LIC] and (the change as a % of the "
        "unperturbed bias, its distance from no bias: Ratio 1, Error 0, LIC 0, BiasAmp "
        + (f"{ba:.2f}, the test images' own human captions" if ba is not None else "0")
        + "). The +LIBRA rows are not perturbed: LIBRA rewrites captions, not images.",
        "",
        *metric_tables(sens["models"], perts, CAPTION_METRICS, names, digits),
    ]


def ordered(models: Mapping) -> list[str]:
    """The model names in the tables' row order (:func:`biaslab.registry.row_order`), then
    any others sorted."""
    from biaslab.registry import row_order
    known = [r for r in row_order() if r in models]
    return known + sorted(r for r in models if r not in known)


def figure_panels(sens: Mapping) -> list[str]:
    """The perturbations drawn in the figure: the first of each kind (the smallest object
    mask, the weakest blur) and the swap."""
    seen, out = set(), []
    for p in sens.get("perturbations") or []:
        k = p.partition("@")[0]
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out


#: the figure's rows: (metric, label, unit, key of the model's record in the table's metrics)
FIGURE_TABLE1 = tuple((m, *METRICS[m]) for m in ("masked_AUC", "Ratio_E", "Leakage"))
FIGURE_TABLE2 = (("Error", "Error", "points", "Error"), ("BiasAmp", "BiasAmp", "points",
                                                          "BiasAmp"),
                 ("Ratio", "Ratio", "ratio", "Ratio"))


def figure(path: Path, sens: Mapping | None, scores: Mapping,
           names: Mapping[str, str], rows: Sequence[tuple] = FIGURE_TABLE1,
           table: str = "Table 1") -> bool:
    """The two-dimensional evaluation: per metric (rows: ``(metric, label, unit, key)``) and
    perturbation (columns), each model's bias score in ``scores`` (``metrics/
    classification.json`` or ``captioning.json``: x, mean ± 95 % CI over seeds) against its
    change under the perturbation (y, 95 % CI), a dashed line at no change. Returns False
    (nothing written) without a sensitivity record."""
    if not sens or not sens.get("available") or not sens.get("models"):
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    perts = figure_panels(sens)
    spec = {m: (label, unit, key) for m, label, unit, key in rows}
    mets = [m for m in spec
            if any(m in (v.get(p) or {}) for v in sens["models"].values() for p in perts)]
    if not perts or not mets:
        return False
    fig, axes = plt.subplots(len(mets), len(perts), figsize=(3.6 * len(perts),
                                                             3.0 * len(mets)), squeeze=False)
    labelled: set = set()   # each model named once in the legend, where it is first drawn
    for i, m in enumerate(mets):
        label, unit, key = spec[m]
        for j, p in enumerate(perts):
            ax = axes[i][j]
            for k, d in enumerate(ordered(sens["models"])):
                by_p = sens["models"][d]
                r = (by_p.get(p) or {}).get(m)
                base = (scores.get(d) or {}).get(key) or {}
                x, xe = base.get("mean"), base.get("ci95")
                if not r or r.get("delta") is None or not isinstance(x, (int, float)) \
                        or not math.isfinite(x):   # an infinite Ratio has no place on an axis
                    continue
                xe = xe if isinstance(xe, (int, float)) and math.isfinite(xe) else 0.0
                y = r["delta"]
                yerr = ([[max(y - r["lo"], 0)], [max(r["hi"] - y, 0)]]
                        if r.get("lo") is not None else None)
                ax.errorbar([x], [y], xerr=[[xe or 0], [xe or 0]], yerr=yerr, fmt="o",
                            color=f"C{k % 10}", capsize=2, markersize=4,
                            label=None if d in labelled else names.get(d, d))
                labelled.add(d)
            ax.axhline(0.0, color="grey", linestyle="--", linewidth=1)
            ax.set_xlabel(f"{label}, unperturbed ({unit})", fontsize=8)
            ax.set_ylabel(f"change of {label}", fontsize=8)
            ax.set_title(perturbation_label(p), fontsize=9)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
    if any(ax.get_legend_handles_labels()[1] for ax in fig.axes):
        fig.legend(loc="lower center", ncol=min(5, len(sens["models"])), fontsize=7,
                   frameon=False)
    fig.suptitle(f"{table}: bias score against feature sensitivity (one point per model; "
                 "95 % CIs)", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return True


#: the metric key of a check id ``<kind>/<row>-original/<key><0`` -> the sensitivity's, for
#: Table 1 (``classifier``, read in ``metrics/sensitivity.json``) and Table 2 (``captioner``,
#: read in ``metrics/sensitivity_captioner.json``)
SENS_KEY = {"masked_auc": "masked_AUC", "ratio": "Ratio", "ratio_expected": "Ratio_E",
            "leakage": "Leakage"}
SENS_KEY_CAPTIONER = {"ratio": "Ratio", "error": "Error", "lic": "LIC", "biasamp": "BiasAmp"}
_CHECK = re.compile(r"^(?P<kind>classifier|captioner)/(?P<row>[^/]+)-original/"
                    r"(?P<key>[a-z_0-9]+)<0$")


def instrument_failed(sens: Mapping) -> bool:
    """True when a control of the sensitivity record misses its known answer: the instrument
    then reads something that is not there, and no check is read through it."""
    return bool((sens.get("controls_summary") or {}).get("does not match"))


def write_figure(path: Path, inputs: Mapping[str, Mapping], source: str) -> None:
    """:func:`figure` from the report's inputs (``sensitivity``, ``classification``), the rows
    named as in the tables.

    Raises:
        InputError(source, ...): the sensitivity record has no model (the figure is one of the
            report stage's outputs).
    """
    from biaslab.registry import row_names
    from biaslab.runtime.io import InputError
    if not figure(path, inputs.get("sensitivity"), inputs["classification"], row_names()):
        raise InputError(source, "no model with a sensitivity record")


def write_figures(out_dir: Path, inputs: Mapping[str, Mapping], source: str) -> None:
    """``<out_dir>/sensitivity.png`` (:func:`write_figure`, Table 1) and
    ``<out_dir>/sensitivity_captioner.png`` (:func:`write_captioner_figure`, Table 2)."""
    write_figure(Path(out_dir) / "sensitivity.png", inputs, source)
    write_captioner_figure(Path(out_dir) / "sensitivity_captioner.png", inputs)


def write_captioner_figure(path: Path, inputs: Mapping[str, Mapping]) -> None:
    """:func:`figure` for Table 2 (``sensitivity_captioner`` against ``captioning``); where
    the captioners' sensitivity did not run (no captions, no perturbation asked), a figure
    that says so and why (the file is one of the report stage's outputs)."""
    from biaslab.registry import row_names
    sens = inputs.get("sensitivity_captioner") or {}
    if figure(path, sens, inputs.get("captioning") or {}, row_names(), FIGURE_TABLE2,
              "Table 2"):
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 1.2))
    ax.axis("off")
    why = sens.get("reason") or sens.get("skipped") or "no captioner with a record"
    ax.text(0.5, 0.5, f"Table 2, feature sensitivity: not run ({why})", ha="center",
            va="center", fontsize=9, wrap=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def confounded_checks(checks: Sequence[dict], sens: Mapping | None, digits: int = 1,
                      sens_captioner: Mapping | None = None) -> list[dict]:
    """The checks of a mitigation against Original on a Table 1 metric
    (``classifier/<row>-original/<key><0``, read in ``sens``) or a Table 2 metric
    (``captioner/<row>-original/<key><0``, read in ``sens_captioner``), each with
    ``confounded`` (True / False) and ``confounding`` (the numbers) where the rows have a
    sensitivity record: confounded when Original's score or the mitigation's moves under the
    smallest object mask (CI excluding 0) by more than the difference the check claims
    (:func:`biaslab.analysis.sensitivity.confounded`); a confounded check's ``reason`` says so
    with both numbers. Its verdict is kept: the reading qualifies it. A row without a record
    of its own (+LIBRA rewrites captions, so it is not perturbed) is read through Original's
    move alone; checks of other forms or metrics are returned unchanged.
    Nothing is read when the classifier side's controls miss their known answer
    (:func:`instrument_failed`): both tables share its perturbed images."""
    from biaslab.analysis.sensitivity import confounded
    if not sens or not sens.get("models") or instrument_failed(sens):
        return list(checks)
    sides = {"classifier": (sens, SENS_KEY), "captioner": (sens_captioner, SENS_KEY_CAPTIONER)}
    out = []
    for c in checks:
        mt = _CHECK.match(str(c.get("id", "")))
        eff = c.get("mean")
        rec, keys = sides[mt["kind"]] if mt else (None, {})
        first = next((p for p in (rec or {}).get("perturbations") or []
                      if p.startswith("objects@")), None)
        if not mt or first is None or keys.get(mt["key"]) is None or eff is None:
            out.append(c)
            continue
        key = keys[mt["key"]]
        # the reference's move and the mitigation's own: either can carry the difference
        recs = {r: (((rec.get("models") or {}).get(r) or {}).get(first) or {}).get(key)
                for r in ("original", mt["row"])}
        flags = {r: confounded(eff, v) for r, v in recs.items() if v}
        if not flags:
            out.append(c)
            continue
        c = dict(c)
        c["confounded"] = any(flags.values())
        c["confounding"] = {"perturbation": first, "claimed_effect": eff,
                            **{r: {k: v.get(k) for k in ("delta", "lo", "hi")}
                               for r, v in recs.items() if v}}
        if c["confounded"]:
            moved = "; ".join(f"{r} moves {change_cell(recs[r], digits)}"
                              for r, f in flags.items() if f)
            c["reason"] = (f"{c.get('reason', '')}; confounded by non-person features: with "
                           f"{perturbation_label(first)} masked, {moved}, more than the "
                           f"claimed difference {eff:+.{digits}f}").lstrip("; ")
        out.append(c)
    return out
