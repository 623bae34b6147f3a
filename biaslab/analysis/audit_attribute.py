"""REVISE's person- and object-based audit for the run's protected attribute (
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

* Context by supercategory (Sect. 5.1.2, Fig. 7 right): the same table over the
  supercategories of the objects an image has (the data's own category -> supercategory
  mapping, :func:`read_supercategories`).
* Person-object distance (Sect. 5.1.3, Eq. 1) per object category and group
  (:func:`distance_by_group`).
* Appearance differences (Sect. 5.1.4): per object category, a linear SVM on the image
  features, its cross-validated accuracy against a permutation test (:func:`appearance_table`).

Not here: the scene context of Fig. 7 left and Fig. 8 (a Places365 scene classifier, not
available offline), and the ordinal trend tests (Jonckheere, the Wald test on a regression
slope): the skin-tone labels here are binarised (bb_skin Light / Dark), not a Fitzpatrick
scale, so there is no order of more than two levels to test.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
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
    correction = AU.correction_name(correction)
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if len(names) < 2:
        raise ValueError(f"an attribute needs at least two groups, got {list(names)}")
    AU.require(presence, ["image_id", key], "presence")
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
            p[tested] = AU.two_by_two_p(n[tested, 0], int(N[0]), n[tested, 1], int(N[1]),
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


def read_supercategories(root: str | Path) -> dict[str, str]:
    """``{category name: supercategory}`` from the ``categories`` of the COCO-layout files
    ``<root>/annotations/instances_*.json`` (COCO's 12 supercategories: vehicle, animal,
    accessory, sports, kitchen, food, furniture, electronic, appliance, indoor, outdoor,
    person). Paper 004 Sect. 4.1 uses the dataset's own mapping where it has one (COCO) and
    bins other labels by word embeddings; the latter is not built: a dataset without the field
    (OpenImages) gives ``{}`` and the context table is left out.

    Raises:
        InputError: an instances file that is not valid JSON, or whose ``categories`` is not
            a list of objects with a ``name``.
    """
    from biaslab.runtime.io import InputError, read_json
    out: dict[str, str] = {}
    for f in sorted((Path(root) / "annotations").glob("instances_*.json")):
        cats = read_json(f).get("categories")
        if not isinstance(cats, list) or not all(isinstance(c, dict) and "name" in c
                                                 for c in cats):
            raise InputError(f, "'categories' must be a list of objects with a 'name'")
        out.update({str(c["name"]): str(c["supercategory"]) for c in cats
                    if c.get("supercategory")})
    return out


def supercategory_presence(objects: pd.DataFrame, supercategories: Mapping[str, str]
                           ) -> pd.DataFrame:
    """Unique ``(image_id, supercategory)`` rows: an image has a supercategory when it has an
    object of one of its categories (paper 004 Fig. 7 right, "fraction [of images] that ...
    have an object from the category"). Categories absent from the mapping and the ``person``
    supercategory (every audited image has a person) are left out.

    Raises:
        InputError("objects", ...): missing column.
    """
    pr = AU.object_presence(objects)
    sc = pr["category"].map(lambda c: supercategories.get(str(c)))
    out = pd.DataFrame({"image_id": pr["image_id"].astype("int64"), "supercategory": sc})
    out = out[out["supercategory"].notna() & (out["supercategory"] != "person")]
    return out.drop_duplicates().reset_index(drop=True)


#: columns of :func:`distance_by_group` besides the per-group ones
DISTANCE_COLUMNS = ("n_total", "closest_group", "farthest_group", "cohens_d", "p", "p_adj",
                    "tested", "significant")


def distance_by_group(images: pd.DataFrame, persons: pd.DataFrame, objects: pd.DataFrame,
                      groups: Mapping[int, str], names: Sequence[str], *,
                      person: str = "largest", min_count: int = 5, alpha: float = 0.05,
                      correction: str = "bh") -> pd.DataFrame:
    """Person-object distance (paper 004 Eq. 1, Sect. 5.1.3) per object category and group:
    :func:`biaslab.analysis.audit.distances_of` (per image and category, the closest instance
    to the image's largest person box; unitless, smaller = closer), then per category each
    group's image count and mean.

    Two groups: Cohen's d (first minus second group, pooled std) and Welch's p, as the gender
    audit's :func:`biaslab.analysis.audit.distance_table`; more: the Kruskal-Wallis p over the
    groups (``cohens_d`` NaN). A category is tested when every group has at least 2 distances
    and all groups together ``min_count``; ``correction`` over the tested categories.

    Returns:
        DataFrame ``category, n_<g> and mean_<g> for each group, n_total, closest_group,
        farthest_group, cohens_d, p, p_adj, tested, significant``, sorted by tested first, then
        p, then category.

    Raises:
        InputError: as :func:`biaslab.analysis.audit.distances_of`. ValueError: fewer than two
            groups, ``min_count`` < 1, an unknown ``person`` or correction.
    """
    from scipy.stats import kruskal
    correction = AU.correction_name(correction)
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if len(names) < 2:
        raise ValueError(f"an attribute needs at least two groups, got {list(names)}")
    d = AU.distances_of(images, persons, objects, _groups(groups, names), person=person)
    rows = []
    for cat, grp in d.groupby("category", sort=True):
        vals = [grp.loc[grp["group"] == n, "dist"].to_numpy(float) for n in names]
        means = [float(v.mean()) if len(v) else float("nan") for v in vals]
        tested = all(len(v) >= 2 for v in vals) and sum(map(len, vals)) >= min_count
        if not tested:
            p = float("nan")
        elif len(names) == 2:
            p = AU.welch_p(*vals)
        else:
            p = float(kruskal(*vals).pvalue)
        finite = [(m, n) for m, n in zip(means, names) if np.isfinite(m)]
        rows.append({"category": cat,
                     **{f"n_{n}": len(v) for n, v in zip(names, vals)},
                     **{f"mean_{n}": m for n, m in zip(names, means)},
                     "n_total": int(sum(map(len, vals))),
                     "closest_group": min(finite)[1] if finite else None,
                     "farthest_group": max(finite)[1] if finite else None,
                     "cohens_d": AU.cohens_d(*vals) if len(names) == 2 else float("nan"),
                     "p": p, "tested": tested})
    cols = ["category", *[f"n_{n}" for n in names], *[f"mean_{n}" for n in names],
            *DISTANCE_COLUMNS]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    out = pd.DataFrame(rows)
    out["p_adj"] = AU.adjust_pvalues(out["p"].to_numpy(float), correction)
    out["significant"] = out["tested"] & (out["p_adj"].fillna(np.inf) < alpha)
    out["_u"] = ~out["tested"]
    out = out.sort_values(["_u", "p", "category"], na_position="last", kind="stable")
    return out[cols].reset_index(drop=True)


#: columns of :func:`appearance_table` besides the per-group counts
APPEARANCE_COLUMNS = ("n_total", "n_dims", "accuracy", "accuracy_ci95", "chance", "ratio",
                      "p", "p_adj", "tested", "significant")


def appearance_table(features: np.ndarray, feature_ids: Sequence[int], objects: pd.DataFrame,
                     groups: Mapping[int, str], names: Sequence[str], *,
                     min_per_group: int = 10, max_per_group: int = 500,
                     n_permutations: int = 100, folds: int = 5, seed: int = 0,
                     workers: int = 1, alpha: float = 0.05,
                     correction: str = "bh") -> pd.DataFrame:
    """Appearance differences (paper 004 Sect. 5.1.4): per object category, can a linear SVM
    tell the groups apart from the features of the images that have the object?

    As the REVISE code (``Attribute Analysis.ipynb``, att_clu): at most ``max_per_group``
    images per group (500 there; here the lowest image ids, deterministic), features
    standardised, projected by PCA to ``int(sqrt(n))`` dimensions ("as recommended in Hua et
    al. 2005" to prevent over-fitting), standardised again; a linear SVM "with Sklearn's
    default L2 regularization" (the paper's words: ``sklearn.svm.LinearSVC()``, penalty l2,
    C = 1; the notebook's ``SVC(kernel="linear", max_iter=5000)`` stops at its iteration cap
    on shuffled labels and took 1.7 x as long here);
    ``sklearn.model_selection.permutation_test_score`` with ``n_permutations`` label shuffles
    (100 there; Ojala & Garriga 2010) on ``folds``-fold stratified cross-validation (the
    sklearn default the code uses). ``ratio = accuracy / chance`` is the code's ratio (chance =
    mean permuted accuracy). Deviation: the paper's features are AlexNet-Places FC7 scene
    features; here the run's frozen image features (stage ``features``), which also see the
    person, as the paper's scene features do.

    Args:
        features: ``(n_images, d)`` float image features; feature_ids: their image ids.
        objects: image_id, category (:func:`biaslab.analysis.audit.object_presence`'s input).
        groups: ``{image_id: group}``; names: the attribute's groups.
        min_per_group: test a category when every group has at least this many images with it
            (and at least ``folds``).
        seed: the random state of the permutations and of liblinear's coordinate descent.
        workers: joblib processes for the permutations (``n_jobs``; the shuffles are drawn
            in the parent, so the table is the same for any value: tested).

    Returns:
        DataFrame ``category, n_<g> for each group, n_total, n_dims, accuracy (mean over the
        folds, [0, 1]), accuracy_ci95 (t over the folds), chance, ratio, p (permutation p,
        at least 1 / (n_permutations + 1)), p_adj, tested, significant``; untested categories
        have NaN scores. Sorted by tested first, then p, then -ratio, then category.
        ``attrs``: ``folds``, ``n_permutations`` (the protocol, for the report).

    Raises:
        InputError("features", ...): ``features`` and ``feature_ids`` differ in length, or a
            grouped image with an object has no features.
        ValueError: fewer than two groups, ``folds`` < 2, ``n_permutations`` < 1, an unknown
            correction.
    """
    import warnings

    from sklearn.decomposition import PCA
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import StratifiedKFold, cross_val_score, permutation_test_score
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    from biaslab.runtime.io import InputError
    correction = AU.correction_name(correction)
    if len(names) < 2:
        raise ValueError(f"an attribute needs at least two groups, got {list(names)}")
    if folds < 2 or n_permutations < 1:
        raise ValueError(f"folds must be >= 2 and n_permutations >= 1, got {folds}, "
                         f"{n_permutations}")
    X_all = np.asarray(features, dtype=np.float64)
    ids = np.asarray(feature_ids, dtype="int64")
    if X_all.ndim != 2 or len(X_all) != len(ids):
        raise InputError("features", f"{X_all.shape} features for {len(ids)} image ids")
    row = pd.Series(np.arange(len(ids)), index=ids)
    g = _groups(groups, names)
    pr = AU.object_presence(objects)
    pr = pr[pr["image_id"].astype("int64").isin(g.index)]
    missing = sorted(set(pr["image_id"].astype("int64")) - set(ids))
    if missing:
        raise InputError("features", f"no features for image_id {missing[0]} (and "
                                     f"{len(missing) - 1} more)")
    code = {n: k for k, n in enumerate(names)}
    rows = []
    for cat, grp in pr.groupby("category", sort=True):
        img = np.sort(grp["image_id"].astype("int64").unique())
        by = {n: img[g.reindex(img).to_numpy() == n][:max_per_group] for n in names}
        n_g = {n: len(v) for n, v in by.items()}
        rec = {"category": cat, **{f"n_{n}": n_g[n] for n in names},
               "n_total": int(sum(n_g.values())), "n_dims": 0, "accuracy": np.nan,
               "accuracy_ci95": np.nan, "chance": np.nan, "ratio": np.nan, "p": np.nan,
               "tested": min(n_g.values()) >= max(min_per_group, folds)}
        if rec["tested"]:
            sel = np.concatenate([by[n] for n in names])
            y = np.concatenate([np.full(len(by[n]), code[n]) for n in names])
            X = StandardScaler().fit_transform(X_all[row.reindex(sel).to_numpy()])
            k = max(1, min(int(np.sqrt(len(sel))), *X.shape))
            # the exact SVD: sklearn's "auto" picks a randomized solver for these shapes
            X = StandardScaler().fit_transform(
                PCA(n_components=k, svd_solver="full").fit_transform(X))
            # liblinear's dual coordinate descent visits the samples in a random order:
            # without a seed the fitted SVM (and the accuracy) changes from run to run
            clf = LinearSVC(random_state=seed)
            cv = StratifiedKFold(n_splits=folds)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                per_fold = cross_val_score(clf, X, y, cv=cv, scoring="accuracy")
                acc, perm, p = permutation_test_score(
                    clf, X, y, cv=cv, scoring="accuracy", n_permutations=n_permutations,
                    random_state=seed, n_jobs=int(workers))
            ci = stats.summarize(list(per_fold))
            rec.update(n_dims=k, accuracy=float(acc), accuracy_ci95=ci["ci95"],
                       chance=float(np.mean(perm)), p=float(p),
                       ratio=float(acc / np.mean(perm)) if np.mean(perm) > 0 else np.inf)
        rows.append(rec)
    cols = ["category", *[f"n_{n}" for n in names], *APPEARANCE_COLUMNS]
    protocol = {"folds": int(folds), "n_permutations": int(n_permutations)}
    if not rows:
        empty = pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
        empty.attrs.update(protocol)
        return empty
    out = pd.DataFrame(rows)
    out["p_adj"] = AU.adjust_pvalues(out["p"].to_numpy(float), correction)
    out["significant"] = out["tested"] & (out["p_adj"].fillna(np.inf) < alpha)
    out["_u"], out["_r"] = ~out["tested"], -out["ratio"]
    out = out.sort_values(["_u", "p", "_r", "category"], na_position="last", kind="stable")
    out = out[cols].reset_index(drop=True)
    out.attrs.update(protocol)
    return out


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
                    center_norm: str = "unit", min_person_px: float = 0.0,
                    distance_person: str = "largest",
                    supercategories: Mapping[str, str] | None = None,
                    features: tuple[np.ndarray, Sequence[int]] | None = None,
                    appearance: Mapping[str, Any] | None = None
                    ) -> tuple[dict, dict[str, pd.DataFrame]]:
    """The audit of ``attribute`` on the schema.md tables (see the module docstring).

    Args:
        supercategories: ``{category: supercategory}`` (:func:`read_supercategories`); None
            or empty: no context table.
        features: ``(features, image ids)`` of the images (stage ``features``); None: no
            appearance table.
        appearance: keyword arguments of :func:`appearance_table` (min_per_group,
            max_per_group, n_permutations, folds, seed).

    Returns:
        ``(summary, tables)``: ``summary`` = ``{"attribute", "groups", "images": {group: n},
        "prominence": prominence_by_group, "objects" / "words" / "supercategories" /
        "distance" / "appearance": {"n_tested", "n_significant", "top": [...]}}``, the
        appearance block also with its ``folds`` and ``n_permutations``
        (JSON-ready; a section is ``{"skipped": reason}`` without its input); ``tables`` =
        ``{"objects", "words"[, "supercategories"], "distance"[, "appearance"]}``
        DataFrames (:func:`group_skew_table`, :func:`distance_by_group`,
        :func:`appearance_table`). Caption words leave out the gender words and English stop
        words (:func:`biaslab.analysis.audit.default_excluded_words`).
    """
    cfg = dict(min_count=min_count, alpha=alpha, correction=correction)
    tables = {"objects": group_skew_table(AU.object_presence(objects), groups, names,
                                          "category", **cfg),
              "words": group_skew_table(AU.caption_word_presence(captions), groups, names,
                                        "word", **cfg)}
    skipped = {}
    if supercategories:
        tables["supercategories"] = group_skew_table(
            supercategory_presence(objects, supercategories), groups, names, "supercategory",
            **cfg)
    else:
        skipped["supercategories"] = "the data's categories have no supercategory"
    tables["distance"] = distance_by_group(images, persons, objects, groups, names,
                                           person=distance_person, **cfg)
    if features is not None:
        tables["appearance"] = appearance_table(features[0], features[1], objects, groups,
                                                names, alpha=alpha, correction=correction,
                                                **dict(appearance or {}))
    else:
        skipped["appearance"] = "no image features"
    prom = prominence_by_group(images, persons, groups, names, area=area,
                               center_norm=center_norm, min_person_px=min_person_px)
    summary = {"attribute": attribute, "groups": list(names),
               "images": images_per_group(groups, names), "prominence": prom}
    keys = {"objects": "category", "words": "word", "supercategories": "supercategory",
            "distance": "category", "appearance": "category"}
    for name, key in keys.items():
        if name in skipped:
            summary[name] = {"skipped": skipped[name]}
            continue
        t = tables[name]
        top = {"distance": _top_distance, "appearance": _top_appearance}.get(name, _top)
        summary[name] = {"n_tested": int(t["tested"].sum()),
                         "n_significant": int(t["significant"].sum()),
                         "top": top(t, key, top_k)}
    if "appearance" in tables:   # the protocol the report states (folds: the CI's n)
        summary["appearance"].update(tables["appearance"].attrs)
    return summary, tables


def _top_distance(table: pd.DataFrame, key: str, k: int) -> list[dict]:
    """The ``k`` most significant tested categories of :func:`distance_by_group`."""
    t = table[table["tested"]].head(k)
    return [{"item": str(r[key]), "closest_group": r["closest_group"],
             "farthest_group": r["farthest_group"], "cohens_d": stats.to_json(r["cohens_d"]),
             "p_adj": stats.to_json(r["p_adj"])} for _, r in t.iterrows()]


def _top_appearance(table: pd.DataFrame, key: str, k: int) -> list[dict]:
    """The ``k`` most significant tested categories of :func:`appearance_table`."""
    t = table[table["tested"]].head(k)
    return [{"item": str(r[key]), "n": int(r["n_total"]),
             "accuracy": stats.to_json(r["accuracy"]),
             "accuracy_ci95": stats.to_json(r["accuracy_ci95"]),
             "chance": stats.to_json(r["chance"]), "ratio": stats.to_json(r["ratio"]),
             "p_adj": stats.to_json(r["p_adj"])} for _, r in t.iterrows()]
