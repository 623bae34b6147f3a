"""Dose-response of the bias metrics against the planted bias.

The synthetic generator (``biaslab.data.synthetic``) plants a gender-context correlation of strength
``b = synthetic.bias``. One DVC experiment per ``b`` (``scripts/bias_sweep.py``) gives, for each
training-set variant, every bias metric as a function of ``b``. Ground truth: at ``b = 0`` every
metric must read "unbiased" (Leakage and every attribute sensitivity ~ 0, Ratio ~ 1), and the
metrics of models trained on Original must grow with ``b``.

Pure functions over ``dvc exp show --json`` output (no file-system conventions):

* :func:`sweep_points` -- one point per (experiment, variant, metric): bias, mean, ci95, n.
* :func:`sweep_markdown` -- one table per metric (rows: variants, columns: b).
* :func:`bias0_checks` -- the validity checks at ``b = 0`` (``biaslab.analysis.validity`` format).
* :func:`plot_sweep` -- one panel per metric, one line per variant, 95 % CI error bars.
* :func:`control_points`, :func:`control_response`, :func:`control_markdown` -- the control
  models' metrics per planted bias (stage ``controls``) and which metrics
  cannot see the planted bias.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from biaslab.runtime import stats
from biaslab.registry import row_names
from biaslab.report.dvcview import file_data, walk_exp_records

#: (key, metrics file, path inside the file (``{row}`` = the variant), label, reference value)
#: of every metric the sweep draws. Ratio uses the raw r = #man / #woman, whose unbiased value
#: is 1 (max(r, 1/r) is >= 1 by construction, so its CI can never cover 1 from below).
SWEEP_METRICS: tuple[tuple[str, str, tuple[str, ...], str, float], ...] = (
    ("leakage", "metrics/classification.json", ("{row}", "Leakage"), "Leakage (classifier)", 0.0),
    ("ratio_raw", "metrics/classification.json", ("{row}", "ratio_raw"),
     "Ratio r (classifier)", 1.0),
    # Ratio_E (threshold-free, finite where r is infinite) is drawn, not checked at b = 0: it is
    # symmetrised (>= 1), so its CI cannot cover 1 from below.
    ("ratio_e", "metrics/classification.json", ("{row}", "Ratio_expected"),
     "Ratio_E (classifier)", 1.0),
    ("LIC", "metrics/captioning.json", ("{row}", "LIC"), "LIC (captioner)", 0.0),
    ("Error", "metrics/captioning.json", ("{row}", "Error"), "Error (captioner)", 0.0),
    ("BiasAmp", "metrics/captioning.json", ("{row}", "BiasAmp"), "BiasAmp (captioner)", 0.0),
    ("sens_objects", "metrics/probe.json", ("classifier", "{row}", "objects"),
     "sensitivity: objects (classifier)", 0.0),
    ("sens_scene", "metrics/probe.json", ("classifier", "{row}", "scene"),
     "sensitivity: scene (classifier)", 0.0),
    ("sens_cast", "metrics/probe.json", ("classifier", "{row}", "cast"),
     "sensitivity: cast (classifier)", 0.0),
)


def dig(node: Any, path: Sequence[str]) -> Any:
    """The value at ``path`` (a sequence of keys) in nested mappings; None where a key is absent."""
    for k in path:
        if not isinstance(node, Mapping) or k not in node:
            return None
        node = node[k]
    return node


def _rows(data: Mapping[str, Any]) -> list[str]:
    rows = set()
    for _, f, path, _, _ in SWEEP_METRICS:
        d = file_data(data.get("metrics"), f)
        node = dig(d, path[:path.index("{row}")])
        if isinstance(node, Mapping):
            rows |= {k for k, v in node.items() if isinstance(v, Mapping) and k != "test_set"}
    return _in_table_order(rows)


def _in_table_order(rows) -> list[str]:
    """``rows`` in the tables' row order (:func:`biaslab.report.row_names`), others after,
    sorted."""
    order = list(row_names())
    return [r for r in order if r in rows] + sorted(r for r in rows if r not in order)


def _bias_records(exp_show: Any) -> Iterable[tuple[float, str, dict]]:
    """``(bias, experiment name, data)`` of every ``dvc exp show --json`` record of the
    synthetic data with ``synthetic.bias`` (the workspace, baselines, experiments)."""
    for rec in walk_exp_records(exp_show):
        data = rec["data"]
        params = file_data(data.get("params"), "params.yaml")
        b = dig(params, ("synthetic", "bias"))
        src = dig(params, ("data", "source"))
        if b is None or (src is not None and src != "synthetic"):
            continue
        yield float(b), rec.get("name") or data.get("name") or rec.get("rev"), data


def _bias_table(label: str, first: str, series: Mapping[str, Mapping[float, Any]],
                biases: Sequence[float], digits: int) -> list[str]:
    """Markdown lines of one metric: a row per series (``{row name: {bias: record}}``), a
    column per planted bias, cells ``mean ± 95 % CI`` (``stats.format_cell``), "–" where a
    series has no point."""
    out = [f"### {label}", "", f"| {first} | " + " | ".join(f"b = {b:g}" for b in biases) + " |",
           "|---|" + "---|" * len(biases)]
    for name, pts in series.items():
        cells = [stats.format_cell(pts[b], digits) if b in pts else "–" for b in biases]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out + [""]


def sweep_points(exp_show: Any) -> list[dict]:
    """One point per (experiment, variant, metric) from ``dvc exp show --json``.

    Args:
        exp_show: parsed ``dvc exp show --json`` output (DVC 3 layout).

    Returns:
        list of ``{"bias": float, "experiment": str, "row": variant, "metric": key,
        "mean", "ci95", "n", "n_inf", "n_missing"}`` (the record of that metric, see
        ``biaslab.runtime.stats.record``), one per distinct (bias, data.root) -- the first experiment
        DVC lists for it -- sorted by metric, row, bias. Records without ``synthetic.bias`` or
        without the metric are skipped.
    """
    pts, seen = [], set()
    for key, name, data in _bias_records(exp_show):
        if key in seen or str(name).startswith(CONTROLS_PREFIX):
            # a controls-only experiment re-ran only synthesize..controls: its other metrics
            # files are the baseline's (another bias), never a point of this bias
            continue
        seen.add(key)
        for row in _rows(data):
            for mkey, f, path, _, _ in SWEEP_METRICS:
                r = dig(file_data(data.get("metrics"), f),
                         [p.format(row=row) for p in path])
                # an all-infinite metric has no mean (DVC drops the null): keep it, counted
                if not isinstance(r, Mapping) or ("mean" not in r and not r.get("n_inf")):
                    continue
                pts.append({"bias": key, "experiment": name, "row": row, "metric": mkey,
                            **{k: r.get(k) for k in ("mean", "ci95", "n", "n_inf",
                                                     "n_missing", "sign")}})
    pts.sort(key=lambda p: (p["metric"], p["row"], p["bias"]))
    return pts


#: name prefix of the controls-only experiments (``scripts/bias_sweep.py --controls``)
CONTROLS_PREFIX = "ctl-"
#: (task, metric, label, what an unbiased control reads) of the controls' dose response
CONTROL_METRICS: tuple[tuple[str, str, str], ...] = (
    ("classifier", "Ratio", "Ratio (classifier, persons masked)"),
    ("classifier", "Ratio_E", "Ratio_E (classifier, persons masked)"),
    ("classifier", "Error", "Error (classifier gender, %)"),
    ("classifier", "Leakage", "Leakage (classifier)"),
    ("captioner", "Ratio", "Ratio (captioner)"),
    ("captioner", "Error", "Error (captioner, %)"),
    ("captioner", "LIC", "LIC (captioner)"),
    ("captioner", "BiasAmp", "BiasAmp (captioner)"),
    ("captioner", "DBA_O", "DBA_O (captioner)"),
    # DBAC (biaslab.metrics.dbac): both directions, the authors' prior and direct
    ("captioner", "DBAC_T_to_A", "DBAC T→A, prior (captioner)"),
    ("captioner", "DBAC_A_to_T", "DBAC A→T, prior (captioner)"),
    ("captioner", "DBAC_direct_T_to_A", "DBAC T→A, direct (captioner)"),
    ("captioner", "DBAC_direct_A_to_T", "DBAC A→T, direct (captioner)"),
    ("probe", "objects", "probe sensitivity: objects"),
    ("probe", "scene", "probe sensitivity: scene"),
    ("probe", "cast", "probe sensitivity: cast"),
)


def _controls_records(exp_show: Any) -> list[tuple[float, str, dict]]:
    """:func:`_bias_records` in the order the control sections take their one record per bias:
    controls-only experiments (:data:`CONTROLS_PREFIX`) first, newest first by their DVC
    timestamp (a sweep re-run on a later commit replaces an older one with the same name),
    then the others in ``exp show`` order (workspace, HEAD, other baselines)."""
    recs = [(b, str(name or ""), data) for b, name, data in _bias_records(exp_show)]
    ctl = sorted((r for r in recs if r[1].startswith(CONTROLS_PREFIX)),
                 key=lambda r: str(r[2].get("timestamp") or ""), reverse=True)
    return ctl + [r for r in recs if not r[1].startswith(CONTROLS_PREFIX)]


def control_points(exp_show: Any) -> list[dict]:
    """The control models' measured values per planted bias, from every
    record of ``dvc exp show --json`` with ``synthetic.bias`` and ``metrics/controls.json``
    (the controls-only experiments of ``scripts/bias_sweep.py --controls``, full sweep
    experiments and the workspace alike: the controls stage re-runs in each), one record per
    bias chosen by :func:`_controls_records` (the newest controls-only experiment first).

    Returns:
        ``[{"bias", "experiment", "task", "control", "metric", "mean", "ci95", "n", "n_inf",
        "expected"}]`` sorted by task, metric, control, bias; ``task`` "probe" has the
        probe's attributes as metrics and ``ci95`` None (an exact function of the pairs).
    """
    pts, seen = [], set()
    for b, name, data in _controls_records(exp_show):
        c = file_data(data.get("metrics"), "metrics/controls.json")
        if not c or b in seen:
            continue
        seen.add(b)
        sizes = {t: (((c.get("test_set") or {}).get(t) or {}).get("n"))
                 for t in ("classifier", "captioner")}
        for task in ("classifier", "captioner"):
            for ctl, ms in (c.get(task) or {}).items():
                for metric, r in (ms or {}).items():
                    m = (r or {}).get("measured") or {}
                    if "mean" not in m and not m.get("n_inf"):
                        continue
                    pts.append({"bias": b, "experiment": name, "task": task,
                                "control": ctl, "metric": metric,
                                **{k: m.get(k) for k in ("mean", "ci95", "n", "n_inf")},
                                "n_images": sizes.get(task),
                                "expected": (r or {}).get("expected")})
        for ctl, attrs in (c.get("probe") or {}).items():
            for a, r in (attrs or {}).items():
                m = (r or {}).get("measured") or {}
                pts.append({"bias": b, "experiment": name, "task": "probe",
                            "control": ctl, "metric": a, "mean": m.get("mean"), "ci95": None,
                            "n": m.get("n_pairs"), "n_inf": 0,
                            "expected": (r or {}).get("expected")})
    pts.sort(key=lambda p: (p["task"], p["metric"], p["control"], p["bias"]))
    return pts


def control_runs(exp_show: Any) -> dict[float, dict]:
    """planted bias -> that record's ``metrics/controls.json`` (the metric
    comparison over the sweep), one record per bias in :func:`_controls_records`' order (the
    newest controls-only experiment, where ``controls.attackers`` may add encoders, first), the
    same records :func:`control_points` reads."""
    out: dict[float, dict] = {}
    for b, _, data in _controls_records(exp_show):
        c = file_data(data.get("metrics"), "metrics/controls.json")
        if c and b not in out:
            out[b] = c
    return dict(sorted(out.items()))


#: the context reader's gender metrics: the controls' question "can this metric tell a model
#: that reads the context at the largest planted bias from one at b = 0?"
GENDER_METRICS = (("classifier", "Ratio"), ("classifier", "Ratio_E"), ("classifier", "Error"),
                  ("captioner", "Ratio"), ("captioner", "Error"))


def _resolution(metric: str, n_images: int | None) -> float:
    """What two of ``n_images`` test images flipping moves an exact metric by: Error 200 / n
    points, a Ratio about 4 / n (two images out of n / 2 per gender); 0 when n is unknown.
    Smaller differences between exact control values are not a response to the bias."""
    if not n_images:
        return 0.0
    return 200.0 / n_images if metric == "Error" else 4.0 / n_images


def control_response(points: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Whether each control's metric moves with the planted bias: for every (task, control,
    metric) with at least two biases, the value at the smallest and the largest bias and the
    verdict "rises" / "falls" (their 95 % CIs do not overlap; exact values: they differ by
    more than two test images' worth, :func:`_resolution`), "flat" (otherwise) or
    "infinite" (∞ or undefined at either end)."""
    out = []
    keys = dict.fromkeys((p["task"], p["control"], p["metric"]) for p in points)
    for task, ctl, metric in keys:
        ps = sorted((p for p in points if (p["task"], p["control"], p["metric"]) ==
                     (task, ctl, metric)), key=lambda p: p["bias"])
        if len({p["bias"] for p in ps}) < 2:
            continue
        a, z = ps[0], ps[-1]
        if a.get("n_inf") or z.get("n_inf") or a.get("mean") is None or z.get("mean") is None:
            verdict = "infinite"
        else:
            ha, hz = a.get("ci95") or 0.0, z.get("ci95") or 0.0
            d = z["mean"] - a["mean"]
            tol = (ha + hz) if (ha or hz) else max(1e-9, _resolution(metric, a.get("n_images")))
            verdict = "rises" if d > tol else "falls" if -d > tol else "flat"
        out.append({"task": task, "control": ctl, "metric": metric, "b_lo": a["bias"],
                    "b_hi": z["bias"], "lo": a.get("mean"), "hi": z.get("mean"),
                    "verdict": verdict})
    return out


def control_markdown(points: Sequence[Mapping[str, Any]], digits: int = 2) -> str:
    """The "metric response" section: per metric of :data:`CONTROL_METRICS`, one row per
    control, columns = planted bias (mean ± 95 % CI over the controls' replicates), then the
    list of (control, metric) curves that stay flat while the planted bias grows."""
    out = []
    biases = sorted({p["bias"] for p in points})
    for task, metric, label in CONTROL_METRICS:
        ps = [p for p in points if p["task"] == task and p["metric"] == metric]
        if not ps:
            continue
        series = {c: {p["bias"]: p for p in ps if p["control"] == c}
                  for c in dict.fromkeys(p["control"] for p in ps)}
        out += _bias_table(label, "control", series, biases, digits)
    resp = control_response(points)
    if resp:
        flat = [r for r in resp if r["control"] == "context_reader" and r["verdict"] in
                ("flat", "infinite") and (r["task"], r["metric"]) in GENDER_METRICS]
        out += ["### Which metrics see the planted bias", "",
                "The context reader predicts gender from the planted context alone: a gender "
                "metric (Ratio, Ratio_E, Error) whose context-reader value at the largest "
                "planted bias equals its value at the smallest (within the CIs, or within two "
                "test images for exact values) cannot tell a model that reads the context "
                "from one that has nothing to read, on this test set. The amplifier adds a "
                "fixed bias at every b, so its Leakage / LIC / BiasAmp measure what it adds "
                "*beyond* the data's own bias (LK_D, LIC_D and the reference grow with b).",
                "",
                "| task | control | metric | b (low → high) | value (low → high) | response |",
                "|---|---|---|---|---|---|"]
        for r in resp:
            lo = "∞" if r["lo"] is None else f"{r['lo']:.{digits}f}"
            hi = "∞" if r["hi"] is None else f"{r['hi']:.{digits}f}"
            out.append(f"| {r['task']} | {r['control']} | {r['metric']} | {r['b_lo']:g} → "
                       f"{r['b_hi']:g} | {lo} → {hi} | {r['verdict']} |")
        out.append("")
        if flat:
            out.append("Cannot see the planted bias on this data (context reader flat from "
                       "the smallest to the largest b): " +
                       ", ".join(f"{r['task']} {r['metric']}" for r in flat) + ".")
            out.append("")
    return "\n".join(out)


def sweep_markdown(points: Sequence[Mapping[str, Any]], digits: int = 2) -> str:
    """One markdown table per metric: rows = variants, columns = planted bias, cells
    ``mean ± 95 % CI`` (``biaslab.runtime.stats.format_cell``)."""
    out = []
    biases = sorted({p["bias"] for p in points})
    for mkey, _, _, label, ref in SWEEP_METRICS:
        ps = [p for p in points if p["metric"] == mkey]
        if not ps:
            continue
        series = {row_names().get(r, r): {p["bias"]: p for p in ps if p["row"] == r}
                  for r in dict.fromkeys(p["row"] for p in ps)}
        out += _bias_table(f"{label} (unbiased = {ref:g})", "variant", series, biases, digits)
    return "\n".join(out)


#: metrics the b = 0 checks cover ("every variant's sensitivities and Leakage
#: ≈ 0, Ratio ≈ 1"). LIC, Error and BiasAmp are drawn but not checked: Error is the rate of
#: wrong-gender captions, > 0 for any imperfect captioner whatever the planted bias, and LIC /
#: BiasAmp of a finite training sample need not vanish at b = 0 (no paper states they do).
BIAS0_CHECKED = ("leakage", "ratio_raw", "sens_objects", "sens_scene", "sens_cast")


def bias0_checks(points: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Validity at planted bias 0 (:data:`BIAS0_CHECKED`): every variant's Leakage and
    sensitivities have a 95 % CI that covers 0, and its Ratio r a CI that covers 1
    (``biaslab.runtime.stats.verdict`` with ``"≈"``). A metric with infinite seeds (r = ∞: a classifier
    that never predicts one gender) fails "≈": it is as far from 1 as r can be. Returns checks
    in the ``biaslab.analysis.validity`` format (empty without a b = 0 run)."""
    checks = []
    for p in points:
        if p["bias"] != 0.0 or p["metric"] not in BIAS0_CHECKED:
            continue
        ref = next(r for k, _, _, _, r in SWEEP_METRICS if k == p["metric"])
        m, hw = p.get("mean"), p.get("ci95")
        lo, hi = (m - hw, m + hw) if m is not None and hw is not None else (None, None)
        n_inf = int(p.get("n_inf") or 0)
        checks.append({
            "id": f"bias0/{p['row']}/{p['metric']}",
            "claim": f"at planted bias 0, {row_names().get(p['row'], p['row'])}: "
                     f"{p['metric']} ≈ {ref:g}",
            "expect": "≈", "reference": ref, "mean": None if n_inf else m,
            "lo": None if n_inf else lo, "hi": None if n_inf else hi, "n": p.get("n"),
            "n_inf": n_inf,
            "verdict": "fails" if n_inf else stats.verdict(lo, hi, "≈", ref)})
    return checks


def _sweep_figure(points: Sequence[Mapping[str, Any]]):
    """The sweep's matplotlib figure (None without points): one panel per metric, one line per
    variant, each variant in the same colour in every panel (panels hold different variant
    subsets: the captioner has no model-level methods) and one legend for the figure."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in SWEEP_METRICS if any(p["metric"] == m[0] for p in points)]
    if not metrics:
        return None
    rows = _in_table_order({p["row"] for p in points})
    cmap = plt.get_cmap("tab10")
    colour = {r: cmap(i % 10) for i, r in enumerate(rows)}
    ncol = min(4, len(metrics))
    nrow = -(-len(metrics) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.0 * ncol, 3.2 * nrow), squeeze=False)
    handles = {}
    for ax, (mkey, _, _, label, ref) in zip(axes.flat, metrics):
        ps = [p for p in points if p["metric"] == mkey and p.get("mean") is not None]
        n_inf = sum(1 for p in points if p["metric"] == mkey and p.get("mean") is None)
        for row in [r for r in rows if any(p["row"] == r for p in ps)]:
            q = sorted((p for p in ps if p["row"] == row), key=lambda p: p["bias"])
            h = ax.errorbar([p["bias"] for p in q], [p["mean"] for p in q],
                            yerr=[p.get("ci95") or 0.0 for p in q], marker="o", capsize=3,
                            color=colour[row], label=row_names().get(row, row))
            handles.setdefault(row, h)
        ax.axhline(ref, color="k", lw=0.8, ls="--")
        # a point whose mean is infinite/undefined on some seed is not drawn: say so
        ax.set_title(label + (f" ({n_inf} points ∞, not drawn)" if n_inf else ""), fontsize=10)
        ax.set_xlabel("planted bias b")
    spare = list(axes.flat)[len(metrics):]
    for ax in spare:
        ax.axis("off")
    legend_args = ([handles[r] for r in rows if r in handles],
                   [row_names().get(r, r) for r in rows if r in handles])
    if spare:
        spare[0].legend(*legend_args, fontsize=9, loc="center")
    else:
        fig.legend(*legend_args, fontsize=8, loc="lower center", ncol=min(8, len(rows)))
    fig.suptitle("Bias metrics against planted bias (mean ± 95 % CI over seeds)", fontsize=11)
    fig.tight_layout()
    return fig


def plot_sweep(points: Sequence[Mapping[str, Any]], path) -> None:
    """One panel per metric (x: planted bias b, y: metric), one line per variant with 95 % CI
    error bars, the unbiased value as a dashed line, and each variant in one colour across all
    panels (:func:`_sweep_figure`); written atomically as PNG. Nothing is written without
    points."""
    import matplotlib.pyplot as plt

    from biaslab.runtime.io import atomic_path
    fig = _sweep_figure(points)
    if fig is None:
        return
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


__all__ = ["SWEEP_METRICS", "BIAS0_CHECKED", "sweep_points", "sweep_markdown", "bias0_checks", "plot_sweep"]
