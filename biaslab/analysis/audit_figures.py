"""Charts of the REVISE audit (paper 004 Sect. 5.1; statistics in :mod:`biaslab.analysis.audit`):
images per gender, person prominence, object and word skew, person-object distance.
matplotlib with the Agg backend, each PNG written atomically."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biaslab.analysis.audit import GENDER_VALUES, top_skewed
from biaslab.analysis.audit_run import AuditResult
from biaslab.data.gender import FEMALE, MALE, UNDEFINED
from biaslab.runtime.io import atomic_path

_COLORS = {FEMALE: "#E69F00", MALE: "#0072B2", UNDEFINED: "#999999"}


def _savefig(fig, path: str | os.PathLike) -> None:
    import matplotlib.pyplot as plt
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def _no_data(ax, msg: str = "no data") -> None:
    ax.text(0.5, 0.5, msg, ha="center", va="center", transform=ax.transAxes, fontsize=12,
            color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _fmt_p(p: float) -> str:
    if p is None or not np.isfinite(p):
        return "n/a"
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def plot_images_per_gender(images: dict[str, Any], path: str | os.PathLike) -> None:
    """Bar chart of image counts per gender label, annotated with count and percentage."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.6))
    names = list(GENDER_VALUES)
    vals = [images[n] for n in names]
    bars = ax.bar(names, vals, color=[_COLORS[n] for n in names])
    top = max(vals) if vals and max(vals) > 0 else 1
    for b, n in zip(bars, names):
        frac = images.get(f"frac_{n}")
        lab = f"{images[n]}" + (f"\n{100 * frac:.1f}%" if frac == frac else "")
        ax.text(b.get_x() + b.get_width() / 2, b.get_height() + 0.02 * top, lab, ha="center",
                va="bottom", fontsize=9)
    ax.set_ylim(0, top * 1.25)
    ax.set_ylabel("images")
    ax.set_title(f"Images per gender label (n = {images['total']})")
    ax.spines[["top", "right"]].set_visible(False)
    _savefig(fig, path)


def plot_prominence(prominence: pd.DataFrame, summary: dict[str, Any],
                    path: str | os.PathLike, center_norm: str = "unit") -> None:
    """Per-gender density histograms of person area fraction and centre distance (shared bins),
    titled with means, Cohen's d and the Welch p-value."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    norm = "image diagonal" if center_norm == "diagonal" else "unit-square image"
    labels = {"area_frac": "(largest) person box area / image area",
              "center_dist": f"distance of person box centre to image centre ({norm})"}
    for ax, m in zip(axes, ("area_frac", "center_dist")):
        s = summary[m]
        data = {g: prominence.loc[prominence["gender"] == g, m].to_numpy(float)
                for g in (FEMALE, MALE)}
        allv = np.concatenate(list(data.values()))
        allv = allv[np.isfinite(allv)]
        if len(allv) == 0:
            _no_data(ax)
        else:
            bins = np.histogram_bin_edges(allv, bins=min(30, max(5, len(allv) // 10)))
            for g, x in data.items():
                if len(x):
                    ax.hist(x, bins=bins, density=True, alpha=0.45, color=_COLORS[g],
                            label=f"{g} (n={len(x)}, mean={np.nanmean(x):.3f})")
                    ax.hist(x, bins=bins, density=True, histtype="step", color=_COLORS[g],
                            linewidth=1.2)
            ax.legend(fontsize=8, loc="best", framealpha=0.9)
            ax.set_ylabel("density")
        d = s["cohens_d"]
        ax.set_title(f"Cohen's d (f-m) = {d:.2f}, Welch p = {_fmt_p(s['p_welch'])}"
                     if d == d else "Cohen's d: n/a", fontsize=10)
        ax.set_xlabel(labels[m])
        ax.spines[["top", "right"]].set_visible(False)
    fig.suptitle("Person prominence by gender (REVISE Sect. 5.1.1)", fontsize=11)
    fig.tight_layout()
    _savefig(fig, path)


def plot_skew(table: pd.DataFrame, key: str, path: str | os.PathLike, top_k: int = 10,
              title: str = "") -> None:
    """Horizontal bars of the signed skew (r_f - r_m)/(r_f + r_m) of the ``top_k`` most
    female- and male-skewed tested items; significant items (after correction) are solid and
    marked ``*``, the others hatched and pale. Each bar is annotated with n_f/n_m."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    top = pd.concat([top_skewed(table, key, top_k, MALE).iloc[::-1],
                     top_skewed(table, key, top_k, FEMALE)], ignore_index=True)
    top = top.sort_values("skew", kind="stable").reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.32 * max(len(top), 3)))
    if top.empty:
        _no_data(ax, "no item reaches min_count")
    else:
        y = np.arange(len(top))
        for i, r in top.iterrows():
            g = FEMALE if r["skew"] > 0 else MALE
            sig = bool(r["significant"])
            ax.barh(i, r["skew"], color=_COLORS[g], alpha=1.0 if sig else 0.35,
                    hatch=None if sig else "//", edgecolor=_COLORS[g])
            txt = f"{'* ' if sig else ''}{r['n_female']}/{r['n_male']}"
            ax.text(r["skew"] + (0.02 if r["skew"] > 0 else -0.02), i, txt,
                    ha="left" if r["skew"] > 0 else "right", va="center", fontsize=8)
        ax.set_yticks(y, [str(v) for v in top[key]], fontsize=9)
        ax.axvline(0, color="0.3", linewidth=0.8)
        ax.set_xlim(-1.3, 1.3)
        ax.set_xticks([-1, -0.5, 0, 0.5, 1])
        ax.legend(handles=[Patch(color=_COLORS[FEMALE], label="female-skewed"),
                           Patch(color=_COLORS[MALE], label="male-skewed"),
                           Patch(facecolor="white", edgecolor="0.4", hatch="//",
                                 label="not significant")],
                  fontsize=8, loc="lower right", frameon=False)
    ax.set_xlabel("skew = (r_f - r_m) / (r_f + r_m)    [label: * significant, n_female/n_male]",
                  fontsize=9)
    ax.set_title(title, fontsize=11)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    _savefig(fig, path)


def plot_distance(table: pd.DataFrame, path: str | os.PathLike, top_k: int = 10) -> None:
    """Horizontal bars of Cohen's d (female vs male) of the Eq. 1 distance for the ``top_k``
    tested categories with the largest |d|; significant ones solid and marked ``*``."""
    import matplotlib.pyplot as plt
    top = table[table["tested"]].head(top_k).iloc[::-1].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.32 * max(len(top), 3)))
    if top.empty:
        _no_data(ax, "no category with enough boxes per gender")
    else:
        lim = max(1.0, float(np.nanmax(top["cohens_d"].abs())) * 1.35)
        for i, r in top.iterrows():
            g = MALE if r["cohens_d"] > 0 else FEMALE  # d > 0: female farther -> male closer
            sig = bool(r["significant"])
            ax.barh(i, r["cohens_d"], color=_COLORS[g], alpha=1.0 if sig else 0.35,
                    hatch=None if sig else "//", edgecolor=_COLORS[g])
            txt = (f"{'* ' if sig else ''}f {r['mean_female']:.2g} / m {r['mean_male']:.2g}")
            ax.text(r["cohens_d"] + (0.02 if r["cohens_d"] > 0 else -0.02) * lim, i, txt,
                    ha="left" if r["cohens_d"] > 0 else "right", va="center", fontsize=8)
        ax.set_yticks(np.arange(len(top)), [str(v) for v in top["category"]], fontsize=9)
        ax.axvline(0, color="0.3", linewidth=0.8)
        ax.set_xlim(-lim, lim)
        from matplotlib.patches import Patch
        ax.legend(handles=[Patch(color=_COLORS[FEMALE], label="female persons closer"),
                           Patch(color=_COLORS[MALE], label="male persons closer"),
                           Patch(facecolor="white", edgecolor="0.4", hatch="//",
                                 label="not significant")],
                  fontsize=8, loc="best", framealpha=0.9)
    ax.set_xlabel("Cohen's d of Eq. 1 distance, female vs male (< 0: female persons closer)\n"
                  "[label: * significant, mean distance female / male]", fontsize=9)
    ax.set_title("Person-object distance by gender (REVISE Eq. 1)", fontsize=11)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    _savefig(fig, path)


#: file names written by :func:`plot_audit`
PLOT_FILES = ("images_per_gender.png", "prominence.png", "objects_skew.png",
              "words_skew.png", "distance.png")


def plot_audit(result: AuditResult, out_dir: str | os.PathLike, top_k: int = 10) -> list[Path]:
    """Write the audit charts (PNG, matplotlib Agg) into ``out_dir``: :data:`PLOT_FILES`.
    Every file is written (with a "no data" note when empty) so DVC outs always exist."""
    import matplotlib
    matplotlib.use("Agg")
    out = Path(out_dir)
    cfg = result.config
    sub = (f"min_count={cfg.get('min_count')}, {cfg.get('correction')} "
           f"alpha={cfg.get('alpha')}")
    plot_images_per_gender(result.images, out / PLOT_FILES[0])
    plot_prominence(result.prominence, result.prominence_summary, out / PLOT_FILES[1],
                    cfg.get("center_norm", "unit"))
    plot_skew(result.objects, "category", out / PLOT_FILES[2], top_k,
              f"Most gender-skewed objects ({sub})")
    plot_skew(result.words, "word", out / PLOT_FILES[3], top_k,
              f"Most gender-skewed caption words ({sub})")
    plot_distance(result.distance_table, out / PLOT_FILES[4], top_k)
    return [out / f for f in PLOT_FILES]
