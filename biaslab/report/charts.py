"""The report's figures (stage ``report``): bar charts of Tables 1-3 and the probe, every bar
the mean over seeds with its 95 % CI as error bar."""
from __future__ import annotations

from pathlib import Path

from biaslab.runtime import stats
from biaslab.runtime.io import atomic_path
from biaslab.report import row_names


#: a metric's smallest possible value: error bars are clipped there (Ratio = max(r, 1/r) >= 1)
FLOOR = {"Ratio": 1.0, "Ratio_expected": 1.0, "mAP": 0.0, "Error": 0.0, "METEOR": 0.0,
         "CLIPScore": 0.0, "BLEU-4": 0.0, "CIDEr": 0.0, "ratio_orig": 0.0, "ratio_inp": 0.0,
         "delta": 0.0, "delta_artifact": 0.0}
#: ratios are drawn on a log axis: one row's 40 must not flatten the others' 1.1 and 1.5
LOG_AXIS = ("Ratio", "Ratio_expected")


def bar_layout(table: dict, column: str) -> dict:
    """What one panel of :func:`bar_chart` draws for ``column``: per row the bar (``means``,
    NaN where there is none), the asymmetric 95 % CI (``lower``, ``upper``; the lower arm
    clipped at the metric's :data:`FLOOR`), the ``labels`` written where a bar cannot be
    drawn ("∞ (k/n seeds)" for infinite seeds, "n/a" where every seed is missing, "" else)
    and whether the axis is logarithmic (:data:`LOG_AXIS`)."""
    import math
    means, lower, upper, labels = [], [], [], []
    floor = FLOOR.get(column)
    for r in table:
        rec = table[r].get(column) or {}
        m, ci = rec.get("mean"), rec.get("ci95") or 0.0
        n_inf = rec.get("n_inf") or 0
        if m is None or (isinstance(m, float) and math.isnan(m)):
            means.append(float("nan"))
            lower.append(0.0)
            upper.append(0.0)
            labels.append(stats.format_cell(rec) if n_inf else "n/a")
            continue
        means.append(float(m))
        lower.append(float(min(ci, m - floor)) if floor is not None and m - ci < floor
                     else float(ci))
        upper.append(float(ci))
        labels.append("")
    return {"means": means, "lower": lower, "upper": upper, "labels": labels,
            "log": column in LOG_AXIS}


def bar_chart(path: Path, table: dict, columns, title: str, ideal: dict | None = None,
              degenerate=(), xlabel: str | None = None) -> None:
    """One panel per column, one bar per method, the 95 % CI as error bar (clipped at the
    metric's floor), the unbiased value as a dashed line (a header's "→x" says the same x);
    a row without a bar says why ("∞ (k/n seeds)", "n/a"); ratios on a log axis with plain
    tick labels; rows in ``degenerate`` (the tables' †) marked † and drawn pale;
    ``xlabel``: the unit of every panel where they share one."""
    import re

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
    rows = list(table)
    names = row_names()
    degenerate = set(degenerate)

    def mean(r, c):
        return (table[r].get(c) or {}).get("mean")
    cols = [(c, h) for c, h in columns
            if any(mean(r, c) is not None or (table[r].get(c) or {}).get("n_inf")
                   for r in rows)]
    if not rows or not cols:
        # the figure is a declared out: say why it is empty (e.g. the probe on data without
        # planted truth, such as coco-mini) instead of leaving no file (DVC would fail)
        fig, ax = plt.subplots(figsize=(6, 1.6))
        ax.axis("off")
        ax.text(0.5, 0.5, f"{title}: not available for this data\n(no values to plot; see "
                          "plots/report/tables.md)", ha="center", va="center", fontsize=10)
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)
        return
    fig, axes = plt.subplots(1, len(cols), figsize=(3.2 * len(cols), 0.45 * len(rows) + 1.4),
                             squeeze=False)
    for ax, (c, h) in zip(axes[0], cols):
        lay = bar_layout(table, c)
        ax.barh(range(len(rows)), lay["means"], xerr=[lay["lower"], lay["upper"]],
                color=["#c5cde0" if r in degenerate else "#4c72b0" for r in rows],
                alpha=0.9, capsize=3)
        if lay["log"]:
            ax.set_xscale("log")
            # plain numbers at 1-2-5 steps: the default "3×10⁰" minor labels collide
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([names.get(r, r) + (" †" if r in degenerate else "") for r in rows]
                           if ax is axes[0][0] else [])
        # the same rows in every panel, even where the last rows have no bar (NaN)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        if ideal and c in ideal and ideal[c] is not None:
            ax.axvline(ideal[c], color="k", lw=0.8, ls="--")
            h = re.sub(r"→\s*-?[0-9.]+", f"→{ideal[c]:.3g}", h)
        ax.set_title(h + (" (log)" if lay["log"] else ""), fontsize=10)

        for y, text in enumerate(lay["labels"]):
            if text:   # no bar: say why, at the panel's left edge
                ax.text(0.02, y, text, transform=ax.get_yaxis_transform(), va="center",
                        fontsize=8, color="#b22222")
    if xlabel:   # one unit for every panel, said once
        fig.supxlabel(xlabel, fontsize=9)
    fig.suptitle(title + " (mean ± 95 % CI over seeds" + ("; † degenerate: utility below the "
                                                           "floor, not ranked)" if degenerate
                                                           & set(rows) else ")"), fontsize=11)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)



__all__ = ["FLOOR", "LOG_AXIS", "bar_chart", "bar_layout"]


#: the forest plot's panels: (summary_full name, label, its no-effect value on the
#: difference scale, what a lower difference means)
FOREST = (("Leakage", "Leakage (classifier) ↓", "less bias"),
          ("masked AUC", "masked AUC (classifier) →50", "toward chance"),
          ("Ratio (classifier)", "Ratio (classifier) →1", "toward 1"),
          ("mAP", "mAP (classifier) ↑", "lower utility"),
          ("LIC", "LIC (captioner) ↓", "less bias"),
          ("Error", "Error (captioner) ↓", "less bias"))


def forest_rows(full: dict, names: dict) -> list[str]:
    """The mitigations of the forest plot: every row of ``full`` but Original that has a
    difference from it on one of :data:`FOREST`'s metrics, in ``names``' (table) order, then
    any other row."""
    def has(r):
        return any("diff" in ((full.get(r) or {}).get(m) or {}) for m, _, _ in FOREST)
    rows = [r for r in names if r != "original" and r in full and has(r)]
    return rows + [r for r in full if r not in names and r != "original" and has(r)]


def forest_layout(full: dict, metric: str, rows: list[str]) -> dict:
    """What one panel of :func:`forest_plot` draws for ``metric``, one entry per row of
    ``rows`` (so every panel shares the rows' positions): the difference from Original
    (``metrics/summary_full.json``: ``diff``, ``diff_lo``, ``diff_hi``, the Welch 95 % CI) and
    the CI's arms, NaN with a note where the row has no such difference ("") or no finite
    interval ("n/a"); ``n``: the seeds per row, as in the tables."""
    import math
    diffs, lower, upper, notes, ns = [], [], [], [], set()
    for r in rows:
        rec = (full.get(r) or {}).get(metric) or {}
        d, lo, hi = rec.get("diff"), rec.get("diff_lo"), rec.get("diff_hi")
        ok = all(isinstance(v, (int, float)) and math.isfinite(v) for v in (d, lo, hi))
        diffs.append(float(d) if ok else float("nan"))
        lower.append(float(d) - float(lo) if ok else 0.0)
        upper.append(float(hi) - float(d) if ok else 0.0)
        notes.append("" if ok or "diff" not in rec else "n/a")
        if ok and isinstance(rec.get("n"), int):
            ns.add(rec["n"])
    return {"diffs": diffs, "lower": lower, "upper": upper, "notes": notes, "n": sorted(ns)}


def forest_plot(path: Path, full: dict) -> None:
    """The answer in one figure: each mitigation's difference from Original (mean over seeds,
    Welch 95 % CI) on every headline metric, one panel per metric, a dashed line at no change
    (0); a row whose interval is not finite is written "n/a", a row without the metric (a
    classifier-only method on a captioner metric) is left empty. Mitigations top to bottom in
    table order; each panel's title gives the seeds per row (n).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = row_names()
    rows = forest_rows(full, names)
    panels = [(m, lab, note, forest_layout(full, m, rows)) for m, lab, note in FOREST]
    panels = [p for p in panels if any(x == x for x in p[3]["diffs"]) or any(p[3]["notes"])]
    if not rows or not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(2.9 * len(panels) + 1.2,
                                                      0.42 * len(rows) + 1.7),
                             squeeze=False, sharey=True)
    y = list(range(len(rows)))[::-1]
    for ax, (m, lab, note, lay) in zip(axes[0], panels):
        ax.errorbar(lay["diffs"], y, xerr=[lay["lower"], lay["upper"]], fmt="o", color="C0",
                    ecolor="C0", capsize=3, markersize=4)
        ax.axvline(0.0, color="grey", linestyle="--", linewidth=1)
        for yi, txt in zip(y, lay["notes"]):
            if txt:
                ax.text(0.0, yi, txt, ha="center", va="center", fontsize=8)
        ax.set_yticks(y)
        ax.set_yticklabels([names.get(r, r) for r in rows], fontsize=8)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        n = "/".join(map(str, lay["n"]))
        ax.set_title(lab + (f"\n(n = {n} seeds)" if n else ""), fontsize=9)
        ax.set_xlabel(f"difference from Original\n(< 0: {note})", fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Each mitigation against Original: mean difference over seeds, "
                 "Welch 95 % CI", fontsize=10)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
