"""Figures people look at instead of reading tables (matplotlib, Agg backend)."""
from __future__ import annotations

import os
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PIL import Image  # noqa: E402

from biaslab.runtime.io import atomic_path  # noqa: E402


def _save(fig, path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    plt.close(fig)


def filter_grid(scores: pd.DataFrame, originals: dict[int, str], filters: Sequence[str],
                weights: Sequence[float], path: str | os.PathLike, n_rows: int = 6,
                seed: int = 0) -> None:
    """Paper 000 Fig. 4 style grid: for sampled (image, group) tuples, the original, then the
    best and worst candidate by each filter and by the weighted rank sum (Eq. 2).

    Args:
        scores: candidates with image_id, group, j, path and one column per filter.
        originals: image_id -> original image path.
    """
    from biaslab.counterfactual.filters import select

    keys = scores[["image_id", "group"]].drop_duplicates().sort_values(["image_id", "group"])
    keys = keys.sample(n=min(n_rows, len(keys)), random_state=seed).sort_values("image_id")
    cols = ["original"] + [f"{k} {f}" for f in list(filters) + ["overall"]
                           for k in ("best", "worst")]
    fig, axes = plt.subplots(len(keys), len(cols), figsize=(1.9 * len(cols), 1.9 * len(keys)),
                             squeeze=False)
    for r, (iid, g) in enumerate(keys.itertuples(index=False)):
        cand = scores[(scores.image_id == iid) & (scores.group == g)]
        picks = [(originals[iid], "")]
        for f, w in [(f, None) for f in filters] + [("overall", None)]:
            if f == "overall":
                ranked = select(cand, filters, weights)
                best = cand[cand.j == ranked.iloc[0]["j"]].iloc[0]
                inv = select(cand, filters, weights, worst=True)
                worst = cand[cand.j == inv.iloc[0]["j"]].iloc[0]
                picks += [(best.path, ""), (worst.path, "")]
            else:
                order = cand.sort_values([f, "j"], ascending=[False, True])
                picks += [(order.iloc[0].path, f"{order.iloc[0][f]:.3g}"),
                          (order.iloc[-1].path, f"{order.iloc[-1][f]:.3g}")]
        for c, (p, label) in enumerate(picks):
            ax = axes[r, c]
            ax.imshow(np.asarray(Image.open(p).convert("RGB")))
            ax.set_xticks([])
            ax.set_yticks([])
            if label:
                ax.set_xlabel(label, fontsize=7)
            if r == 0:
                ax.set_title(cols[c], fontsize=7)
        axes[r, 0].set_ylabel(f"{iid} -> {g}", fontsize=7)
    fig.suptitle(f"Best/worst candidate per filter and overall (weights {list(weights)})",
                 fontsize=9)
    _save(fig, path)


def score_distributions(scores: pd.DataFrame, filters: Sequence[str],
                        path: str | os.PathLike) -> None:
    """Histogram of each filter's scores over all candidates (finite values)."""
    fig, axes = plt.subplots(1, len(filters), figsize=(3.6 * len(filters), 2.8), squeeze=False)
    for ax, f in zip(axes[0], filters):
        v = scores[f].to_numpy(float)
        v = v[np.isfinite(v)]
        ax.hist(v, bins=30, color="#4477aa")
        ax.set_title(f, fontsize=9)
        ax.set_xlabel("score (higher = better)", fontsize=8)
    axes[0, 0].set_ylabel("candidates")
    _save(fig, path)


def oversample_tradeoff(curve: list[dict], path: str | os.PathLike, used: int | None = None,
                        title: str = "Over-sampling: repeat cap vs the skew it can meet") -> None:
    """Line plot of :func:`biaslab.data.datasets.oversample_tradeoff`'s rows: x = the cap on copies
    per image (log scale; the uncapped point at the right end, marked "none"), y = the smallest
    |skew| bound the cap allows; the cap ``used`` by the run is marked."""
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    caps = [r["max_copies"] for r in curve]
    finite = [c for c in caps if c is not None]
    top = (max(finite) * 2) if finite else 1
    xs = [top if c is None else c for c in caps]
    ax.plot(xs, [r["max_skew"] for r in curve], "o-", color="C0")
    for x, r in zip(xs, curve):
        ax.annotate(f"n_eff {r['effective_images']:.0f}", (x, r["max_skew"]), fontsize=6,
                    textcoords="offset points", xytext=(3, 3))
    if used in caps or (used is None and None in caps):
        r = curve[caps.index(used)]
        ax.plot([top if used is None else used], [r["max_skew"]], "s", color="C3", ms=9,
                mfc="none", label=f"datasets.max_copies = {used}")
        ax.legend(fontsize=8)
    ax.set_xscale("log")
    ax.set_xticks(xs, [("none" if c is None else str(c)) for c in caps], fontsize=7)
    ax.minorticks_off()
    ax.set_xlabel("largest copies of one image (cap)")
    ax.set_ylabel("smallest object |skew| bound")
    ax.set_title(title, fontsize=10)
    _save(fig, path)


def skew_by_dataset(series: dict[str, dict[str, float | None]], path: str | os.PathLike,
                    title: str = "Gender skew per training set") -> None:
    """Grouped bars: for each series (e.g. ``objects``, hidden ``cast``) the mean |skew| of
    each dataset variant (0 = independent of gender)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    names = list(next(iter(series.values())))
    width = 0.8 / len(series)
    for k, (label, vals) in enumerate(series.items()):
        x = np.arange(len(names)) + (k - (len(series) - 1) / 2) * width
        ax.bar(x, [np.nan if vals[n] is None else vals[n] for n in names], width, label=label)
    ax.set_xticks(np.arange(len(names)), names, fontsize=8)
    ax.set_ylabel("mean |skew|")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    _save(fig, path)
