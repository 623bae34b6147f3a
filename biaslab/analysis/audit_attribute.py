"""REVISE's person- and object-based audit for the run's protected attribute (issue 29 item 8;
paper 004 Sect. 5.1, which audits gender, skin tone and their intersections alike).

:mod:`biaslab.analysis.audit` is the gender audit (female vs male, with every REVISE detail);
this module runs its person-prominence, object-skew and word-skew measures over the groups of
any attribute of :data:`biaslab.metrics.files.ATTRIBUTES` -- two groups (gender, skin: dark /
light) or four (gender_skin) -- from each image's group (``{image_id: group}``,
:func:`biaslab.analysis.attribute_eval.group_labels`).

* Images per group (Sect. 5, "labels").
* Person prominence (Sect. 5.1.1): the size (area fraction) and the distance from the image
  centre of the largest person box, per group, mean with a t 95 % CI over images; two groups:
  Cohen's d and Welch's p (as the gender audit); more: the Kruskal-Wallis p over the groups and
  the largest minus the smallest group mean.
* Object and caption-word co-occurrence (Sect. 5.1.2-5.1.3): each item's image rate per group
  ``r_g = n_g / N_g``; two groups: the gender audit's ``skew = (r_a - r_b) / (r_a + r_b)``
  and Fisher's exact test; more: the chi-square test of independence on the K x 2 table
  (present / absent by group; ``scipy.stats.chi2_contingency``). Benjamini-Hochberg (or the
  chosen correction) over the tested items; an item is tested when at least ``min_count``
  grouped images have it. ``rate_ratio = max_g r_g / min_g r_g`` names the over- and
  under-represented groups.

Not here (the gender audit has them, the attribute audit does not yet): the person-object
distance of Eq. 1, context by supercategory (Fig. 7), the appearance SVM (Sect. 5.1.4) and the
ordinal trend tests (the labels here are binarised, not a Fitzpatrick scale).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from biaslab.analysis import audit as AU
from biaslab.runtime import stats

#: columns of :func:`group_skew_table` besides the item and the per-group counts / rates
SKEW_COLUMNS = ("n_total", "max_group", "min_group", "rate_ratio", "skew", "p", "p_adj",
                "tested", "significant")


def _groups(groups: Mapping[int, str], names: Sequence[str]) -> pd.Series:
    """``groups`` as a Series indexed by image id, restricted to ``names``."""
    s = pd.Series({int(i): str(g) for i, g in groups.items() if g in set(names)}, dtype=object)
    s.index = s.index.astype("int64")
    return s


def _mean_ci(values: np.ndarray) -> dict:
    """``{"mean", "ci95", "lo", "hi", "n"}``: mean and t 95 % CI over images."""
    r = stats.summarize(list(values))
    return {k: r[k] for k in ("mean", "ci95", "lo", "hi", "n")}


def images_per_group(groups: Mapping[int, str], names: Sequence[str]) -> dict[str, int]:
    """``{group: number of images}`` for each group of ``names`` (0 for an absent group)."""
    g = _groups(groups, names)
    return {n: int((g == n).sum()) for n in names}


def prominence_by_group(images: pd.DataFrame, persons: pd.DataFrame,
                        groups: Mapping[int, str], names: Sequence[str], *,
                        area: str = "largest", center_norm: str = "unit",
                        min_person_px: float = 0.0) -> dict[str, Any]:
    """Person prominence per group (paper 004 Sect. 5.1.1) of the images with a group and a
    person box: :func:`biaslab.analysis.audit.prominence_of`'s per-image ``area_frac``
    (fraction of the image area) and ``center_dist`` (unit-square distance of the box centre
    from the image centre, [0, 0.707]), with its ``area``, ``center_norm``, ``min_person_px``.

    Returns:
        ``{"area_frac": rec, "center_dist": rec, "n_without_person": int}``; ``rec`` =
        ``{"groups": {group: {"mean", "ci95", "lo", "hi", "n"}}, "cohens_d", "p_welch"}`` for
        two groups (first minus second) or ``{"groups", "p_kruskal", "max_minus_min"}`` for
        more; a test is None where a group has fewer than 2 images.

    Raises:
        InputError: as :func:`biaslab.analysis.audit.prominence_of`.
    """
    from scipy.stats import kruskal
    g = _groups(groups, names)
    prom = AU.prominence_of(images, persons, g, area=area, center_norm=center_norm,
                            min_person_px=min_person_px)
    out: dict[str, Any] = {"n_without_person": int(len(set(g.index) - set(prom["image_id"])))}
    for m in ("area_frac", "center_dist"):
        vals = {n: prom.loc[prom["group"] == n, m].to_numpy(float) for n in names}
        rec: dict[str, Any] = {"groups": {n: _mean_ci(v) for n, v in vals.items()}}
        enough = [v for v in vals.values() if len(v) >= 2]
        if len(names) == 2:
            a, b = (vals[n] for n in names)
            ok = len(a) >= 2 and len(b) >= 2
            rec["cohens_d"] = AU.cohens_d(a, b) if ok else None
            rec["p_welch"] = AU.welch_p(a, b) if ok else None
        else:
            rec["p_kruskal"] = (float(kruskal(*enough).pvalue)
                                if len(enough) == len(names) else None)
            means = [float(v.mean()) for v in vals.values() if len(v)]
            rec["max_minus_min"] = max(means) - min(means) if len(means) >= 2 else None
        out[m] = rec
    return out


def group_skew_table(presence: pd.DataFrame, groups: Mapping[int, str], names: Sequence[str],
                     key: str, *, min_count: int = 5, alpha: float = 0.05,
                     correction: str = "bh") -> pd.DataFrame:
    """Each item's (object category's or word's) co-occurrence with each group; the unit is the
    image (an item counts once per image), the base ``N_g`` all images of group ``g``.

    Args:
        presence: columns ``image_id`` and ``key`` (e.g. :func:`biaslab.analysis.audit.
            object_presence`); rows of images without a group are ignored.
        groups: ``{image_id: group}``; names: the attribute's groups, in order.
        key: the item column.
        min_count: test an item when at least this many grouped images have it.
        alpha, correction: significance level and multiple-testing correction
            (:func:`biaslab.analysis.audit.adjust_pvalues`: bh, bonferroni, none).

    Returns:
        DataFrame ``key, n_<g> and rate_<g> for each group, n_total, max_group, min_group,
        rate_ratio (max rate / min rate; inf when a group never has it), skew ((r_a - r_b) /
        (r_a + r_b) for two groups, NaN for more), p (Fisher's exact test for two groups, the
        chi-square test of independence for more), p_adj, tested, significant``, sorted by
        tested first, then p, then item.

    Raises:
        InputError: ``presence`` lacks a column. ValueError: ``min_count`` < 1, fewer than two
            groups, or an unknown correction.
    """
    from scipy.stats import chi2_contingency
    correction = AU._correction(correction)
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if len(names) < 2:
        raise ValueError(f"an attribute needs at least two groups, got {list(names)}")
    AU._require(presence, ["image_id", key], "presence")
    g = _groups(groups, names)
    N = np.array([int((g == n).sum()) for n in names], dtype="int64")
    pr = presence[["image_id", key]].dropna().drop_duplicates()
    pr = pr[pr["image_id"].astype("int64").isin(g.index)]
    pr = pr.assign(group=g.reindex(pr["image_id"].astype("int64").to_numpy()).to_numpy())
    items = sorted(set(presence[key].dropna()), key=str)
    counts = pd.crosstab(pr[key], pr["group"]).reindex(index=items, columns=list(names),
                                                       fill_value=0)
    n = counts.to_numpy(dtype="int64")                              # (items, groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(N > 0, n / np.maximum(N, 1), np.nan)
        has = ~np.isnan(rate)
        # a group without images has no rate: the extremes are over the others (NaN if none)
        hi = np.where(has.any(1), np.max(np.where(has, rate, -np.inf), axis=1), np.nan)
        lo = np.where(has.any(1), np.min(np.where(has, rate, np.inf), axis=1), np.nan)
        ratio = np.where(lo > 0, hi / lo, np.where(hi > 0, np.inf, np.nan))
        skew = ((rate[:, 0] - rate[:, 1]) / (rate[:, 0] + rate[:, 1]) if len(names) == 2
                else np.full(len(items), np.nan))
    tot = n.sum(axis=1)
    tested = (tot >= min_count) & bool((N > 0).all())
    p = np.full(len(items), np.nan)
    if tested.any():
        if len(names) == 2:
            p[tested] = AU._two_by_two_p(n[tested, 0], int(N[0]), n[tested, 1], int(N[1]),
                                         "fisher")
        else:
            for k in np.flatnonzero(tested):
                table = np.stack([n[k], N - n[k]], axis=1)
                # an item in every grouped image has no absent column: nothing to test
                p[k] = 1.0 if (table[:, 1] == 0).all() else float(
                    chi2_contingency(table, correction=False).pvalue)
    p_adj = AU.adjust_pvalues(p, correction)
    names_arr = np.asarray(names, dtype=object)
    safe = np.where(np.isnan(rate), -np.inf, rate)
    safe_lo = np.where(np.isnan(rate), np.inf, rate)
    out = pd.DataFrame({key: items,
                        **{f"n_{nm}": n[:, j] for j, nm in enumerate(names)},
                        **{f"rate_{nm}": rate[:, j] for j, nm in enumerate(names)},
                        "n_total": tot,
                        "max_group": np.where(has.any(1), names_arr[np.argmax(safe, axis=1)],
                                              None) if len(items) else [],
                        "min_group": np.where(has.any(1), names_arr[np.argmin(safe_lo, axis=1)],
                                              None) if len(items) else [],
                        "rate_ratio": ratio, "skew": skew, "p": p, "p_adj": p_adj,
                        "tested": tested,
                        "significant": tested & (np.nan_to_num(p_adj, nan=np.inf) < alpha)})
    out["_untested"] = ~out["tested"]
    out = out.sort_values(["_untested", "p", key], na_position="last", kind="stable")
    return out.drop(columns=["_untested"]).reset_index(drop=True)


def _top(table: pd.DataFrame, key: str, k: int) -> list[dict]:
    """The ``k`` most significant tested items: item, over- and under-represented group,
    rate ratio and adjusted p."""
    t = table[table["tested"]].head(k)
    return [{"item": str(r[key]), "max_group": r["max_group"], "min_group": r["min_group"],
             "rate_ratio": stats.to_json(r["rate_ratio"]), "p_adj": stats.to_json(r["p_adj"])}
            for _, r in t.iterrows()]


def attribute_audit(images: pd.DataFrame, captions: pd.DataFrame, persons: pd.DataFrame,
                    objects: pd.DataFrame, groups: Mapping[int, str], attribute: str,
                    names: Sequence[str], *, min_count: int = 5, alpha: float = 0.05,
                    correction: str = "bh", top_k: int = 10, area: str = "largest",
                    center_norm: str = "unit",
                    min_person_px: float = 0.0) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """The audit of ``attribute`` on the schema.md tables (see the module docstring).

    Returns:
        ``(summary, objects_table, words_table)``: ``summary`` = ``{"attribute", "groups",
        "images": {group: n}, "prominence": prominence_by_group, "objects" / "words":
        {"n_tested", "n_significant", "top": [...]}}`` (JSON-ready), the two tables of
        :func:`group_skew_table`. Caption words leave out the gender words and English stop
        words (:func:`biaslab.analysis.audit.default_excluded_words`).
    """
    cfg = dict(min_count=min_count, alpha=alpha, correction=correction)
    obj = group_skew_table(AU.object_presence(objects), groups, names, "category", **cfg)
    words = group_skew_table(AU.caption_word_presence(captions), groups, names, "word", **cfg)
    prom = prominence_by_group(images, persons, groups, names, area=area,
                               center_norm=center_norm, min_person_px=min_person_px)
    summary = {"attribute": attribute, "groups": list(names),
               "images": images_per_group(groups, names), "prominence": prom,
               **{name: {"n_tested": int(t["tested"].sum()),
                         "n_significant": int(t["significant"].sum()),
                         "top": _top(t, key, top_k)}
                  for name, t, key in (("objects", obj, "category"), ("words", words, "word"))}}
    return summary, obj, words
