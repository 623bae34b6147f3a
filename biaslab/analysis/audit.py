"""Dataset audit by gender: REVISE person-based and object-based metrics (paper 004).

Wang et al., "REVISE: A Tool for Measuring and Mitigating Bias in Visual Datasets", IJCV 2022
(``shared/papers/004_*.txt``), with details the text leaves open taken from the authors' code
(``princetonvisualai/revise-tool``: ``datasets.py``, ``measurements/gender_based.py``,
``analysis_notebooks/Gender Analysis.ipynb``), cited below as "REVISE code".

All functions are pure functions over pandas DataFrames with the columns of ``schema.md``:

* ``images``   -- ``data/prepared/images.parquet``: image_id, width, height (pixels).
* ``captions`` -- ``data/prepared/captions.parquet``: image_id, caption.
* ``persons``  -- ``data/prepared/persons.parquet``: image_id, x, y, w, h (box, pixels).
* ``objects``  -- ``data/prepared/objects.parquet``: image_id, category, x, y, w, h (NaN box for
  image-level labels).
* ``labels``   -- ``data/labels/images.parquet``: image_id, gender (female/male/undefined).

A missing column raises :class:`biaslab.runtime.io.InputError` naming the table and the column.
Only ``female`` and ``male`` images ("gendered images") enter the female-vs-male comparisons;
``undefined`` images are counted in :func:`images_per_gender` only.

Metrics (section numbers of paper 004):

1. :func:`images_per_gender` -- image counts per gender (Sect. 5, "Gender Labels").
2. :func:`person_prominence` / :func:`prominence_summary` -- person size and distance from the
   image centre per gender, mean/std, Cohen's d, Welch t-test (Sect. 5.1.1), plus the
   "too small to tell" count of Appendix A.1.
3. :func:`object_gender_table` -- object-gender co-occurrence counts, skew, per-object test with
   multiple-testing correction (Sect. 5.1.2 / 5.1.3 "instance counts").
4. :func:`person_object_distances` / :func:`distance_table` -- scaled person-object distance of
   Eq. 1 (Sect. 5.1.3) per gender per object, objects whose distance differs most.
5. :func:`word_gender_table` -- the same co-occurrence skew for caption words (our extension of
   Sect. 5.1.3 to the caption vocabulary).

:func:`biaslab.analysis.audit_run.run_audit` runs all of them and
:func:`~biaslab.analysis.audit_run.audit_metrics` makes the small JSON summary; the statistics
are in :mod:`biaslab.analysis.audit_stats`;
:func:`biaslab.analysis.audit_figures.plot_audit` draws the charts (matplotlib, Agg; a module
of its own, so the statistics import no plotting code).

Skew measures (used for objects and words, see :func:`skew_table`). With ``N_f``, ``N_m`` the
numbers of female and male images, ``n_f``, ``n_m`` the numbers of them containing the item, and
the per-gender rates ``r_f = n_f / N_f``, ``r_m = n_m / N_m``:

* ``majority_frac = max(n_f, n_m) / (n_f + n_m)`` -- fraction of the item's co-occurrences that
  are with its majority gender (raw counts, the Zhao et al. 2017 "bias" that REVISE builds on;
  NOT normalised for the gender base rates, so in a dataset with twice as many male images an
  unbiased object has majority_frac 2/3 toward male).
* ``skew = (r_f - r_m) / (r_f + r_m)`` in [-1, 1] -- signed, normalised by the base rates:
  > 0 the item is over-represented with female images, < 0 with male images, 0 when it
  appears in the same fraction of female and male images. ``(1 + |skew|) / 2`` is the
  majority fraction after normalising both genders to the same number of images.
* ``ratio`` -- REVISE code (Gender Analysis notebook, att_cnt): ``r_f / r_m`` if
  ``r_f > r_m`` else ``-r_m / r_f``; ratios of magnitude <= 1 (equal rates) are set to 0, and a
  zero rate gives +-inf.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from biaslab.data.gender import FEMALE, MALE, UNDEFINED, WORD_LISTS, tokenize
from biaslab.analysis.audit_stats import (CORRECTIONS, adjust_pvalues, cohens_d,  # noqa: F401
                                          correction_name, revise_ratio, two_by_two_p, welch_p)
from biaslab.runtime.io import InputError

GENDER_VALUES = (FEMALE, MALE, UNDEFINED)
TESTS = ("fisher", "chi2")
#: Appendix A.1: a person below 1000 pixels is too small for the gender to be identifiable.
TINY_PERSON_PX = 1000.0


# --------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------

def require(df: pd.DataFrame, columns: Sequence[str], table: str) -> None:
    """Raise ``InputError(table, ...)`` naming every column of ``columns`` absent from ``df``."""
    if not isinstance(df, pd.DataFrame):
        raise InputError(table, f"expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(table, f"missing column(s) {', '.join(repr(c) for c in missing)} "
                                f"(table has {list(map(str, df.columns))})")


def gender_by_image(labels: pd.DataFrame) -> pd.Series:
    """Image gender as a Series indexed by image_id.

    Input: ``labels`` with columns image_id, gender (``female``/``male``/``undefined``).

    Raises:
        InputError("labels", ...): missing column, duplicated image_id, or a gender value outside
            female/male/undefined (so that a mislabelled table, e.g. ``"Female"``, fails loudly
            instead of silently dropping images).
    """
    require(labels, ["image_id", "gender"], "labels")
    if labels["image_id"].duplicated().any():
        dup = labels.loc[labels["image_id"].duplicated(), "image_id"].iloc[0]
        raise InputError("labels", f"duplicated image_id {dup!r}")
    bad = sorted(set(labels["gender"].dropna().astype(str)) - set(GENDER_VALUES))
    if bad or labels["gender"].isna().any():
        raise InputError("labels", f"column 'gender' has values outside {GENDER_VALUES}: "
                                   f"{bad or ['<null>']}")
    return pd.Series(labels["gender"].astype(str).to_numpy(),
                     index=labels["image_id"].to_numpy(), name="gender")


def _image_sizes(images: pd.DataFrame) -> pd.DataFrame:
    """images indexed by image_id with float width/height; non-positive sizes are an error."""
    require(images, ["image_id", "width", "height"], "images")
    im = images[["image_id", "width", "height"]].drop_duplicates("image_id")
    im = im.astype({"width": float, "height": float})
    bad = ~((im["width"] > 0) & (im["height"] > 0))
    if bad.any():
        raise InputError("images", f"non-positive or missing width/height for image_id "
                                   f"{im.loc[bad, 'image_id'].iloc[0]!r}")
    return im.set_index("image_id")


def _join_sizes(df: pd.DataFrame, sizes: pd.DataFrame, table: str) -> pd.DataFrame:
    """Attach width/height to rows of ``df``; rows whose image is absent from ``images`` raise."""
    out = df.join(sizes, on="image_id")
    missing = out["width"].isna()
    if missing.any():
        raise InputError(table, f"image_id {out.loc[missing, 'image_id'].iloc[0]!r} is not in "
                                f"the images table")
    return out


def _valid_boxes(df: pd.DataFrame) -> pd.DataFrame:
    """Rows with a finite box of positive width and height (NaN boxes are image-level labels)."""
    box = df[["x", "y", "w", "h"]].astype(float)
    ok = np.isfinite(box.to_numpy()).all(axis=1) & (box["w"] > 0).to_numpy() & \
        (box["h"] > 0).to_numpy()
    out = df.loc[ok].copy()
    out[["x", "y", "w", "h"]] = box.loc[ok]
    return out


# --------------------------------------------------------------------------------------------
# statistics helpers
# --------------------------------------------------------------------------------------------
# 1. images per gender
# --------------------------------------------------------------------------------------------

def images_per_gender(labels: pd.DataFrame) -> dict[str, Any]:
    """Number and fraction of images per gender label (paper 004 Sect. 5, "Gender Labels").

    Input: ``labels`` (image_id, gender in female/male/undefined).

    Output: dict with ``total``; ``female``, ``male``, ``undefined`` (image counts);
    ``frac_female``, ``frac_male``, ``frac_undefined`` (fractions of ``total``, NaN when empty);
    ``female_share_gendered`` = female / (female + male) (NaN without gendered images).

    Raises:
        InputError: see :func:`gender_by_image`.
    """
    g = gender_by_image(labels)
    counts = {k: int((g == k).sum()) for k in GENDER_VALUES}
    total = int(len(g))
    out: dict[str, Any] = {"total": total, **counts}
    for k in GENDER_VALUES:
        out[f"frac_{k}"] = counts[k] / total if total else float("nan")
    fm = counts[FEMALE] + counts[MALE]
    out["female_share_gendered"] = counts[FEMALE] / fm if fm else float("nan")
    return out


# --------------------------------------------------------------------------------------------
# 2. person prominence
# --------------------------------------------------------------------------------------------

def _largest_person(persons: pd.DataFrame) -> pd.DataFrame:
    """One row per image: the person box of largest w*h (ties: the first in table order)."""
    p = persons.assign(box_px=persons["w"] * persons["h"])
    p = p.sort_values(["image_id", "box_px"], ascending=[True, False], kind="stable")
    return p.drop_duplicates("image_id", keep="first")


def person_prominence(images: pd.DataFrame, persons: pd.DataFrame, labels: pd.DataFrame, *,
                      area: str = "largest", center_norm: str = "unit",
                      min_person_px: float = 0.0) -> pd.DataFrame:
    """Person size and distance from the image centre, one row per gendered image with a person
    box (paper 004 Sect. 5.1.1 "Person Prominence").

    Which person: REVISE assigns one box per gendered image, the largest person box
    (REVISE code ``datasets.py``, OpenImagesDataset: ``biggest_bbox``), because gender is an image
    label (Zhao et al. 2017 caption rule) and not a person label. We do the same: the person of
    an image is its person box of largest ``w * h`` (boxes, not segmentation ``area``, as in
    REVISE code).

    Args:
        images: image_id, width, height (pixels).
        persons: image_id, x, y, w, h (pixels). Boxes with non-finite or non-positive w/h are
            ignored.
        labels: image_id, gender. Only ``female``/``male`` images are kept.
        area: ``"largest"`` (default, REVISE): area of the largest person box / image area;
            ``"sum"``: sum of all person-box areas of the image / image area (overlapping boxes
            are counted twice, so it can exceed 1; it is not clipped).
        center_norm: how the distance between the centre of the (largest) person box and the
            image centre is normalised.
            ``"unit"`` (default, REVISE): the image is scaled to the unit square (x / W,
            y / H, as REVISE code normalises every box) and the Euclidean distance of the box
            centre to (.5, .5) is taken there; range [0, sqrt(.5) ~ .707], not normalised by
            the person's size (REVISE code ``att_siz``). Paper 004 Sect. 5.1.1 reports COCO
            means .363 (male) and .510 (female) on this scale (.510 > .5 rules out the
            diagonal scale). (REVISE code computes the box centre as ``x1 + x2/2``, a bug we
            do not reproduce: we use the true centre ``x + w/2``.)
            ``"diagonal"``: Euclidean distance in pixels / image diagonal ``sqrt(W^2 + H^2)``,
            range [0, 0.5] (aspect-ratio free, but not comparable with the paper).
            The person-object distance of Eq. 1 (:func:`scaled_distance`) is always measured
            on the unit square too, and divided by sqrt(area_p * area_o) there.
        min_person_px: drop images whose largest person box is smaller than this many pixels
            (REVISE code drops persons < 1000 px from the size statistics, Appendix A.1);
            default 0 keeps all.

    Output: DataFrame with columns image_id, gender, n_persons (valid boxes in the image),
    person_px (pixels^2 of the largest box), area_frac (unitless fraction of image area),
    center_dist (unitless, per ``center_norm``). Sorted by image_id. Gendered images without a
    valid person box do not appear (see :func:`prominence_summary` for their count).

    Raises:
        InputError: missing column (tables ``images``, ``persons``, ``labels``), bad labels,
            non-positive image size, or a person whose image_id is not in ``images``.
        ValueError: unknown ``area`` or ``center_norm``.
    """
    g = gender_by_image(labels)
    out = prominence_of(images, persons, g[g.isin(GENDER_VALUES[:2])], area=area,
                        center_norm=center_norm, min_person_px=min_person_px)
    return out.rename(columns={"group": "gender"})


def prominence_of(images: pd.DataFrame, persons: pd.DataFrame, groups: pd.Series, *,
                  area: str = "largest", center_norm: str = "unit",
                  min_person_px: float = 0.0) -> pd.DataFrame:
    """:func:`person_prominence` for any grouping of the images: ``groups`` is a Series
    image_id -> group (any label: a gender, a skin tone, ...); only its images are measured.
    Same measures, arguments and errors; the output's group column is ``group``."""
    if area not in ("largest", "sum"):
        raise ValueError(f"area must be 'largest' or 'sum', got {area!r}")
    if center_norm not in ("diagonal", "unit"):
        raise ValueError(f"center_norm must be 'diagonal' or 'unit', got {center_norm!r}")
    require(persons, ["image_id", "x", "y", "w", "h"], "persons")
    sizes = _image_sizes(images)
    gendered = groups

    p = _valid_boxes(persons[["image_id", "x", "y", "w", "h"]])
    p = p[p["image_id"].isin(gendered.index)]
    p = _join_sizes(p, sizes, "persons")
    cols = ["image_id", "group", "n_persons", "person_px", "area_frac", "center_dist"]
    if p.empty:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in cols}).astype(
            {"image_id": "int64", "group": object, "n_persons": "int64"})
    n_persons = p.groupby("image_id").size()
    sum_px = (p["w"] * p["h"]).groupby(p["image_id"]).sum()
    big = _largest_person(p).set_index("image_id")
    W, H = big["width"], big["height"]
    cx, cy = big["x"] + big["w"] / 2.0, big["y"] + big["h"] / 2.0
    if center_norm == "diagonal":
        dist = np.hypot(cx - W / 2.0, cy - H / 2.0) / np.hypot(W, H)
    else:
        dist = np.hypot(cx / W - 0.5, cy / H - 0.5)
    px = big["box_px"] if area == "largest" else sum_px.reindex(big.index)
    out = pd.DataFrame({
        "image_id": big.index.to_numpy(),
        "group": gendered.reindex(big.index).to_numpy(),
        "n_persons": n_persons.reindex(big.index).to_numpy().astype("int64"),
        "person_px": big["box_px"].to_numpy(),
        "area_frac": (px / (W * H)).to_numpy(),
        "center_dist": dist.to_numpy(),
    })
    out = out[out["person_px"] >= min_person_px]
    return out.sort_values("image_id", kind="stable").reset_index(drop=True)


def _group_stats(values: pd.Series, gender: pd.Series) -> dict[str, Any]:
    f = values[gender == FEMALE].to_numpy(float)
    m = values[gender == MALE].to_numpy(float)
    out: dict[str, Any] = {}
    for name, x in ((FEMALE, f), (MALE, m)):
        out[f"{name}_n"] = int(len(x))
        out[f"{name}_mean"] = float(x.mean()) if len(x) else float("nan")
        out[f"{name}_std"] = float(x.std(ddof=1)) if len(x) > 1 else float("nan")
    out["cohens_d"] = cohens_d(f, m)
    out["p_welch"] = welch_p(f, m)
    return out


def prominence_summary(prominence: pd.DataFrame, labels: pd.DataFrame | None = None, *,
                       tiny_px: float = TINY_PERSON_PX) -> dict[str, Any]:
    """Per-gender statistics of :func:`person_prominence` (paper 004 Sect. 5.1.1).

    Input: the output of :func:`person_prominence` (columns gender, area_frac, center_dist,
    person_px); optionally ``labels`` to count gendered images without a person box.

    Output: dict with, for ``m`` in ``area_frac`` and ``center_dist``, a sub-dict
    ``{female_n, female_mean, female_std, male_n, male_mean, male_std, cohens_d, p_welch}``
    (std with ddof=1; ``cohens_d`` = female vs male with pooled std, see :func:`cohens_d`;
    ``p_welch`` two-sided Welch t-test); and ``tiny_person`` (Appendix A.1, gender label
    inference): ``{threshold_px, female, male, male_share}`` = number of images per gender whose
    largest person box has fewer than ``tiny_px`` pixels, and the male share among them (the
    paper finds 77% in COCO). With ``labels``: ``gendered_without_person`` = gendered images
    absent from ``prominence``.

    Raises:
        InputError("prominence", ...): missing column.
    """
    require(prominence, ["image_id", "gender", "area_frac", "center_dist", "person_px"],
             "prominence")
    out: dict[str, Any] = {m: _group_stats(prominence[m], prominence["gender"])
                           for m in ("area_frac", "center_dist")}
    tiny = prominence[prominence["person_px"] < tiny_px]
    tf, tm = int((tiny["gender"] == FEMALE).sum()), int((tiny["gender"] == MALE).sum())
    out["tiny_person"] = {"threshold_px": float(tiny_px), FEMALE: tf, MALE: tm,
                          "male_share": tm / (tf + tm) if tf + tm else float("nan")}
    if labels is not None:
        g = gender_by_image(labels)
        gendered = set(g[g.isin(GENDER_VALUES[:2])].index)
        out["gendered_without_person"] = len(gendered - set(prominence["image_id"]))
    return out


# --------------------------------------------------------------------------------------------
# 3. / 5. co-occurrence skew (objects and caption words)
# --------------------------------------------------------------------------------------------

def skew_table(presence: pd.DataFrame, labels: pd.DataFrame, key: str, *, min_count: int = 5,
               alpha: float = 0.05, correction: str = "bh", test: str = "fisher",
               table: str = "presence") -> pd.DataFrame:
    """Gender co-occurrence counts, skew and significance of each item (object category or
    word); the unit is the image (an item counts once per image).

    Counts (paper 004 Sect. 5.1.3 "instance counts"; REVISE code att_cnt): ``n_female`` /
    ``n_male`` = number of female / male images containing the item; the base numbers
    ``N_f`` / ``N_m`` are all female / male images of ``labels`` (with or without items).
    Skews ``majority_frac``, ``skew``, ``ratio``: see the module docstring.

    Test: independence of item presence and gender on the 2x2 table
    ``[[n_f, N_f - n_f], [n_m, N_m - n_m]]``, two-sided; ``test="fisher"`` (default, exact, valid
    for small counts) or ``"chi2"`` (Pearson with Yates' continuity correction). REVISE code uses
    a t-test on the 0/1 presence indicators, a large-sample approximation of the same
    two-proportion comparison. Only items with ``n_female + n_male >= min_count`` are tested
    (``tested``); the correction (``bh`` Benjamini-Hochberg FDR, default; ``bonferroni``;
    ``none``) is applied across the tested items only. ``significant`` = tested and
    ``p_adj < alpha``. Nothing is tested when there are no female or no male images.

    Args:
        presence: columns image_id and ``key``; duplicates are dropped; rows whose image is not
            female/male in ``labels`` are ignored.
        labels: image_id, gender.
        key: the item column name (``category`` or ``word``).
        table: name used in error messages.

    Output: DataFrame with columns ``key``, n_female, n_male, n_total, rate_female, rate_male
    (fractions of female/male images), majority (``female``/``male``/``tie`` by raw counts),
    majority_frac, skew, ratio, p, p_adj, tested, significant; sorted by tested first, then
    p, then -|skew|, then key.

    Raises:
        InputError: missing column in ``presence`` (named ``table``) or ``labels``.
        ValueError: unknown ``correction`` or ``test``, or ``min_count < 1``.
    """
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; known: {TESTS}")
    correction = correction_name(correction)
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    require(presence, ["image_id", key], table)
    g = gender_by_image(labels)
    gendered = g[g.isin(GENDER_VALUES[:2])]
    Nf, Nm = int((gendered == FEMALE).sum()), int((gendered == MALE).sum())

    pr = presence[["image_id", key]].dropna().drop_duplicates()
    pr = pr[pr["image_id"].isin(gendered.index)]
    pr = pr.assign(gender=gendered.reindex(pr["image_id"]).to_numpy())
    counts = pd.crosstab(pr[key], pr["gender"]).reindex(columns=[FEMALE, MALE], fill_value=0)
    items = sorted(set(presence[key].dropna()), key=str)
    counts = counts.reindex(items, fill_value=0)

    nf = counts[FEMALE].to_numpy(dtype="int64")
    nm = counts[MALE].to_numpy(dtype="int64")
    tot = nf + nm
    with np.errstate(divide="ignore", invalid="ignore"):
        rf = nf / Nf if Nf else np.full(len(nf), np.nan)
        rm = nm / Nm if Nm else np.full(len(nm), np.nan)
        skew = (rf - rm) / (rf + rm)
        maj_frac = np.maximum(nf, nm) / tot
    majority = np.where(nf > nm, FEMALE, np.where(nm > nf, MALE, "tie"))
    tested = (tot >= min_count) & (Nf > 0) & (Nm > 0)
    p = np.full(len(nf), np.nan)
    p[tested] = two_by_two_p(nf[tested], Nf, nm[tested], Nm, test)
    p_adj = adjust_pvalues(p, correction)
    out = pd.DataFrame({
        key: counts.index.to_numpy(),
        "n_female": nf, "n_male": nm, "n_total": tot,
        "rate_female": rf, "rate_male": rm,
        "majority": majority, "majority_frac": maj_frac,
        "skew": skew,
        "ratio": [revise_ratio(a, b) for a, b in zip(rf, rm)],
        "p": p, "p_adj": p_adj,
        "tested": tested,
        "significant": tested & (np.nan_to_num(p_adj, nan=np.inf) < alpha),
    })
    out["_abs"] = -out["skew"].abs()
    out["_untested"] = ~out["tested"]
    out = out.sort_values(["_untested", "p", "_abs", key], na_position="last", kind="stable")
    return out.drop(columns=["_abs", "_untested"]).reset_index(drop=True)


def object_presence(objects: pd.DataFrame) -> pd.DataFrame:
    """Image-level object set: unique (image_id, category) rows of ``objects`` (schema.md:
    ``objects.drop_duplicates(["image_id", "category"])``; ``person`` is already excluded).

    Raises:
        InputError("objects", ...): missing column.
    """
    require(objects, ["image_id", "category"], "objects")
    return objects[["image_id", "category"]].drop_duplicates().reset_index(drop=True)


def object_gender_table(objects: pd.DataFrame, labels: pd.DataFrame, *, min_count: int = 5,
                        alpha: float = 0.05, correction: str = "bh",
                        test: str = "fisher") -> pd.DataFrame:
    """Object-gender co-occurrence per object category (paper 004 Sect. 5.1.2-5.1.3): the
    :func:`skew_table` of :func:`object_presence` with ``key="category"``.

    Input: ``objects`` (image_id, category; boxes not needed), ``labels`` (image_id, gender).
    Output/Errors: see :func:`skew_table`. Significantly skewed objects:
    ``table.loc[table.significant, "category"]``.
    """
    return skew_table(object_presence(objects), labels, "category", min_count=min_count,
                      alpha=alpha, correction=correction, test=test, table="objects")


def default_excluded_words() -> frozenset[str]:
    """Words left out of :func:`word_gender_table` by default: the gender words of every list in
    :data:`biaslab.data.gender.WORD_LISTS` (they define the image gender, so their skew is trivially
    +-1) and scikit-learn's English stop words (318 words; offline, unlike nltk's corpus)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    gw: set[str] = set()
    for wl in WORD_LISTS.values():
        gw |= wl[FEMALE] | wl[MALE]
    return frozenset(gw) | frozenset(ENGLISH_STOP_WORDS)


def caption_word_presence(captions: pd.DataFrame,
                          exclude: Iterable[str] | None = None) -> pd.DataFrame:
    """Unique (image_id, word) pairs of the words of an image's captions.

    Words: :func:`biaslab.data.gender.tokenize` tokens, minus ``exclude`` (default
    :func:`default_excluded_words`), minus tokens shorter than 2 characters (the ``s`` of
    ``woman's``), purely numeric tokens and bracketed special tokens (``[MASK]``).

    Raises:
        InputError("captions", ...): missing column image_id or caption.
    """
    require(captions, ["image_id", "caption"], "captions")
    excl = default_excluded_words() if exclude is None else frozenset(exclude)
    rows_img, rows_word = [], []
    for img, cap in zip(captions["image_id"].to_numpy(), captions["caption"].to_numpy()):
        if not isinstance(cap, str):
            continue
        for t in set(tokenize(cap)):
            if len(t) < 2 or t in excl or t.isdigit() or t[0] in "[<":
                continue
            rows_img.append(img)
            rows_word.append(t)
    out = pd.DataFrame({"image_id": pd.Series(rows_img, dtype="int64"),
                        "word": pd.Series(rows_word, dtype=object)})
    return out.drop_duplicates().reset_index(drop=True)


def word_gender_table(captions: pd.DataFrame, labels: pd.DataFrame, *, min_count: int = 5,
                      alpha: float = 0.05, correction: str = "bh", test: str = "fisher",
                      exclude: Iterable[str] | None = None) -> pd.DataFrame:
    """Most gender-skewed caption words: :func:`skew_table` over
    :func:`caption_word_presence` with ``key="word"``. The unit is the image: ``n_female`` is
    the number of female images at least one of whose captions contains the word (so an image
    with 5 captions counts once), and ``min_count`` applies to ``n_female + n_male``.

    Input: ``captions`` (image_id, caption), ``labels`` (image_id, gender).
    Output/Errors: see :func:`skew_table` and :func:`caption_word_presence`.
    """
    return skew_table(caption_word_presence(captions, exclude), labels, "word",
                      min_count=min_count, alpha=alpha, correction=correction, test=test,
                      table="captions")


def top_skewed(table: pd.DataFrame, key: str, k: int = 10,
               direction: str = FEMALE) -> pd.DataFrame:
    """The ``k`` tested items most skewed toward ``direction`` (``skew > 0`` for female,
    ``< 0`` for male), by |skew| descending, then p ascending, then n_total descending, then
    key. Untested items (below ``min_count``) are never listed."""
    if direction not in (FEMALE, MALE):
        raise ValueError(f"direction must be 'female' or 'male', got {direction!r}")
    t = table[table["tested"]]
    t = t[t["skew"] > 0] if direction == FEMALE else t[t["skew"] < 0]
    t = t.assign(_a=-t["skew"].abs(), _n=-t["n_total"])
    t = t.sort_values(["_a", "p", "_n", key], kind="stable").head(k)
    return t.drop(columns=["_a", "_n"]).reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# 4. person-object distance (Eq. 1)
# --------------------------------------------------------------------------------------------

def scaled_distance(person_box: Sequence[float], object_box: Sequence[float], width: float,
                    height: float) -> float:
    """Paper 004 Eq. 1 (Sect. 5.1.3) for one person box and one object box (x, y, w, h, pixels):

        dist = ||c_p - c_o|| / sqrt(area_p * area_o)

    with centres and areas "measured on a normalized image of total area 1": x is divided by
    the image width and y by its height (as REVISE code normalises boxes), so ``area = w h /
    (W H)``. Unitless; smaller = closer (a proxy for interaction, Appendix A.2). The text of A.2
    repeats Eq. 1 with a garbled denominator; we follow Eq. 1.
    """
    W, H = float(width), float(height)
    px, py, pw, ph = map(float, person_box)
    ox, oy, ow, oh = map(float, object_box)
    d = math.hypot((px + pw / 2 - ox - ow / 2) / W, (py + ph / 2 - oy - oh / 2) / H)
    return d / math.sqrt((pw * ph / (W * H)) * (ow * oh / (W * H)))


def person_object_distances(images: pd.DataFrame, persons: pd.DataFrame,
                            objects: pd.DataFrame, labels: pd.DataFrame, *,
                            person: str = "largest") -> pd.DataFrame:
    """Eq. 1 distances, one row per (gendered image with a person, object category with a box).

    As in REVISE code (``gender_based.py`` att_dis), for each image and category the distance is
    the minimum of Eq. 1 (see :func:`scaled_distance`) over the category's instances in the
    image ("finds the person-object pair that has the shortest distance").

    Args:
        images: image_id, width, height.
        persons: image_id, x, y, w, h.
        objects: image_id, category, x, y, w, h; rows with a NaN or non-positive box (image-level
            labels) are ignored.
        labels: image_id, gender; only female/male images are used.
        person: ``"largest"`` (default, REVISE: the image's one gendered person is its largest
            person box, as in :func:`person_prominence`) or ``"nearest"`` (minimum over all
            person boxes of the image as well).

    Output: DataFrame with columns image_id, gender, category, dist (unitless), n_instances
    (object boxes of the category in the image); sorted by image_id, category.

    Raises:
        InputError: missing column (tables ``images``, ``persons``, ``objects``, ``labels``),
            bad labels or image sizes, or an image_id absent from ``images``.
        ValueError: unknown ``person``.
    """
    g = gender_by_image(labels)
    out = distances_of(images, persons, objects, g[g.isin(GENDER_VALUES[:2])], person=person)
    return out.rename(columns={"group": "gender"})


def distances_of(images: pd.DataFrame, persons: pd.DataFrame, objects: pd.DataFrame,
                 groups: pd.Series, *, person: str = "largest") -> pd.DataFrame:
    """Eq. 1 distances for any grouping of the images: :func:`person_object_distances` of the
    images in ``groups`` (a Series indexed by image_id, group names as values), with a
    ``group`` column in place of ``gender``. The gender audit and the per-attribute audit
    (:mod:`biaslab.analysis.audit_attribute`) both use it.

    Output: DataFrame image_id, group, category, dist (unitless), n_instances.

    Raises:
        InputError: missing column (tables ``images``, ``persons``, ``objects``), bad image
            sizes, or an image_id absent from ``images``.
        ValueError: unknown ``person``.
    """
    if person not in ("largest", "nearest"):
        raise ValueError(f"person must be 'largest' or 'nearest', got {person!r}")
    require(persons, ["image_id", "x", "y", "w", "h"], "persons")
    require(objects, ["image_id", "category", "x", "y", "w", "h"], "objects")
    sizes = _image_sizes(images)
    cols = ["image_id", "group", "category", "dist", "n_instances"]

    p = _valid_boxes(persons[["image_id", "x", "y", "w", "h"]])
    p = p[p["image_id"].isin(groups.index)]
    if person == "largest":
        p = _largest_person(p).drop(columns="box_px")
    o = _valid_boxes(objects[["image_id", "category", "x", "y", "w", "h"]])
    o = o[o["image_id"].isin(p["image_id"])]
    if p.empty or o.empty:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in cols}).astype(
            {"image_id": "int64", "group": object, "category": object,
             "n_instances": "int64"})
    pairs = o.merge(p, on="image_id", suffixes=("_o", "_p"))
    pairs = _join_sizes(pairs, sizes, "objects")
    W, H = pairs["width"], pairs["height"]
    d = np.hypot((pairs["x_p"] + pairs["w_p"] / 2 - pairs["x_o"] - pairs["w_o"] / 2) / W,
                 (pairs["y_p"] + pairs["h_p"] / 2 - pairs["y_o"] - pairs["h_o"] / 2) / H)
    area_p = pairs["w_p"] * pairs["h_p"] / (W * H)
    area_o = pairs["w_o"] * pairs["h_o"] / (W * H)
    pairs = pairs.assign(dist=d / np.sqrt(area_p * area_o))
    n_inst = o.groupby(["image_id", "category"]).size().rename("n_instances")
    out = pairs.groupby(["image_id", "category"])["dist"].min().to_frame().join(n_inst)
    out = out.reset_index()
    out["group"] = groups.reindex(out["image_id"]).to_numpy()
    return out[cols].sort_values(["image_id", "category"], kind="stable").reset_index(drop=True)


def distance_table(distances: pd.DataFrame, *, min_count: int = 5, alpha: float = 0.05,
                   correction: str = "bh") -> pd.DataFrame:
    """Per object category, Eq. 1 distance by gender and its difference (paper 004 Sect. 5.1.3;
    REVISE code att_dis analysis).

    Input: the output of :func:`person_object_distances` (gender, category, dist).

    Output: DataFrame with columns category, n_female, n_male (image counts), mean_female,
    mean_male, std_female, std_male (ddof=1), cohens_d (female vs male, pooled std: negative =
    female persons closer), ratio (REVISE code's signed ratio of the means, see
    :func:`revise_ratio`: > 0 female farther), p (Welch t-test), p_adj, tested, significant.
    A category is tested when it has >= 2 distances per gender and ``n_female + n_male >=
    min_count``; the correction runs across tested categories. Note: all categories of an
    image share its person box and Eq. 1 divides by ``sqrt(area_p)``, so a gender difference in
    person size (Sect. 5.1.1) shifts the distances of every category the same way (the tests are
    positively dependent, for which BH stays valid); REVISE (Appendix A.2) accordingly reads
    the distance as "a relative measure within each object class". "Objects whose distance differs
    most between genders" = tested categories by |cohens_d| (scale-free, unlike the mean
    difference), which is the sort order: tested first, then |cohens_d| descending, then p.

    Raises:
        InputError("distances", ...): missing column.
        ValueError: unknown ``correction``.
    """
    correction = correction_name(correction)
    require(distances, ["category", "gender", "dist"], "distances")
    rows = []
    for cat, grp in distances.groupby("category", sort=True):
        f = grp.loc[grp["gender"] == FEMALE, "dist"].to_numpy(float)
        m = grp.loc[grp["gender"] == MALE, "dist"].to_numpy(float)
        mf = float(f.mean()) if len(f) else float("nan")
        mm = float(m.mean()) if len(m) else float("nan")
        tested = len(f) >= 2 and len(m) >= 2 and len(f) + len(m) >= min_count
        rows.append({
            "category": cat, "n_female": len(f), "n_male": len(m),
            "mean_female": mf, "mean_male": mm,
            "std_female": float(f.std(ddof=1)) if len(f) > 1 else float("nan"),
            "std_male": float(m.std(ddof=1)) if len(m) > 1 else float("nan"),
            "cohens_d": cohens_d(f, m), "ratio": revise_ratio(mf, mm),
            "p": welch_p(f, m) if tested else float("nan"), "tested": tested,
        })
    cols = ["category", "n_female", "n_male", "mean_female", "mean_male", "std_female",
            "std_male", "cohens_d", "ratio", "p", "p_adj", "tested", "significant"]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in cols}).astype(
            {"category": object, "n_female": "int64", "n_male": "int64", "tested": bool,
             "significant": bool})
    out = pd.DataFrame(rows)
    out["p_adj"] = adjust_pvalues(out["p"].to_numpy(), correction)
    out["significant"] = out["tested"] & (out["p_adj"].fillna(np.inf) < alpha)
    out["_a"] = -out["cohens_d"].abs()
    out["_u"] = ~out["tested"]
    out = out.sort_values(["_u", "_a", "p", "category"], na_position="last", kind="stable")
    return out[cols].reset_index(drop=True)


# --------------------------------------------------------------------------------------------
