"""Training-set variants (paper 000 sec. 2.3 and 3): original D, over-sampling (Wang et al.
2020b), sub-sampling (Agarwal et al. 2022), S_augment (Eq. 3) and S_synthetic (Eq. 2).

A manifest is a DataFrame with one row per training sample:
``sample_id`` (str), ``image_id`` (source COCO image), ``path`` (image file), ``gender``
(female/male: the depicted group), ``captions`` (list[str], gender words set to the depicted
group), ``objects`` (list[str], labelled image-level objects a_i), ``counterfactual`` (bool).
Resampled manifests repeat rows (over-sampling) or drop rows (sub-sampling).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from biaslab import gender as G

MANIFEST_COLUMNS = ["sample_id", "image_id", "path", "gender", "captions", "objects",
                    "counterfactual"]


def original(images: pd.DataFrame, captions: pd.DataFrame, objects: pd.DataFrame,
             labels: pd.DataFrame, split: pd.DataFrame, splits=("train",)) -> pd.DataFrame:
    """D: images of ``splits`` whose caption-derived gender is female or male."""
    ids = split[split["split"].isin(splits)]["image_id"]
    lab = labels[labels["gender"].isin(G.GENDERS) & labels["image_id"].isin(ids)]
    df = lab[["image_id", "gender"]].merge(images[["image_id", "path"]], on="image_id")
    caps = captions.groupby("image_id")["caption"].apply(list)
    objs = objects.drop_duplicates(["image_id", "category"]).groupby("image_id")["category"] \
        .apply(lambda s: sorted(s))
    df["captions"] = df["image_id"].map(caps)
    df["objects"] = df["image_id"].map(objs).apply(lambda v: v if isinstance(v, list) else [])
    df["counterfactual"] = False
    df["sample_id"] = df["image_id"].astype(str)
    return df[MANIFEST_COLUMNS].sort_values("image_id", ignore_index=True)


def _presence(manifest: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    cats = sorted({c for objs in manifest["objects"] for c in objs})
    idx = {c: k for k, c in enumerate(cats)}
    x = np.zeros((len(manifest), len(cats)), bool)
    for r, objs in enumerate(manifest["objects"]):
        for c in objs:
            x[r, idx[c]] = True
    return cats, x


def oversample(manifest: pd.DataFrame, seed: int = 0, passes: int = 3) -> pd.DataFrame:
    """Over-sampling (Wang et al. 2020b): repeat images of the minority gender of each object
    until the object co-occurs equally often with each gender.

    Greedy and deterministic: objects are visited in a fixed order (most imbalanced first, then
    name) for ``passes`` passes; for object o with co-occurrence counts (f, m) over the current
    copies, |f - m| copies of minority-gender images containing o are added, drawn uniformly
    with replacement (``numpy.random.default_rng(seed)``). Because images hold several objects,
    balancing one object can unbalance another: the remaining imbalance is what
    ``cooccurrence`` reports, and an object that never appears with one gender cannot be
    balanced at all. Unlabelled attributes are not seen (paper 000 sec. 2.1).
    """
    rng = np.random.default_rng(seed)
    cats, x = _presence(manifest)
    female = (manifest["gender"] == G.FEMALE).to_numpy()
    copies = np.ones(len(manifest), np.int64)
    order = _imbalance_order(cats, x, female, copies)
    for _ in range(passes):
        for k in order:
            f = int((copies * (x[:, k] & female)).sum())
            m = int((copies * (x[:, k] & ~female)).sum())
            if f == m:
                continue
            cand = np.flatnonzero(x[:, k] & (female if f < m else ~female))
            if len(cand) == 0:
                continue
            np.add.at(copies, rng.choice(cand, size=abs(f - m), replace=True), 1)
    return _expand(manifest, copies)


def subsample(manifest: pd.DataFrame, seed: int = 0, passes: int = 3) -> pd.DataFrame:
    """Sub-sampling (Agarwal et al. 2022): drop images of the majority gender of each object
    until the object co-occurs equally often with each gender.

    Greedy and deterministic like ``oversample``: for object o with counts (f, m) among the
    kept images, |f - m| kept majority-gender images containing o are dropped, drawn uniformly
    without replacement. Images without labelled objects are kept. An object that never
    appears with one gender loses all its images.
    """
    rng = np.random.default_rng(seed)
    cats, x = _presence(manifest)
    female = (manifest["gender"] == G.FEMALE).to_numpy()
    keep = np.ones(len(manifest), np.int64)
    order = _imbalance_order(cats, x, female, keep)
    for _ in range(passes):
        for k in order:
            f = int((keep * (x[:, k] & female)).sum())
            m = int((keep * (x[:, k] & ~female)).sum())
            if f == m:
                continue
            cand = np.flatnonzero(x[:, k] & (~female if f < m else female) & (keep > 0))
            drop = rng.choice(cand, size=min(abs(f - m), len(cand)), replace=False)
            keep[drop] = 0
    return _expand(manifest, keep)


def _imbalance_order(cats, x, female, w) -> list[int]:
    f = (w[:, None] * (x & female[:, None])).sum(0)
    m = (w[:, None] * (x & ~female[:, None])).sum(0)
    imb = np.abs(f - m) / np.maximum(f + m, 1)
    return sorted(range(len(cats)), key=lambda k: (-imb[k], cats[k]))


def _expand(manifest: pd.DataFrame, copies: np.ndarray) -> pd.DataFrame:
    rows = manifest.loc[manifest.index.repeat(copies)].copy()
    n = rows.groupby("sample_id").cumcount()
    rows["sample_id"] = rows["sample_id"] + np.where(n > 0, "#" + n.astype(str), "")
    return rows.reset_index(drop=True)


def counterfactuals(selected: pd.DataFrame, d: pd.DataFrame, words: str = "lic") -> pd.DataFrame:
    """Manifest rows for selected inpainted images x_i^(j*, g'): the source image's objects a_i
    and captions with gender words set to g' (``biaslab.gender.swap(c, to=g')``).

    Args:
        selected: one row per (image_id, group) with ``path`` and ``j`` (from ``filters.select``).
        d: the original manifest (source of captions and objects).
    """
    src = d.drop_duplicates("image_id").set_index("image_id")
    sel = selected[selected["image_id"].isin(src.index)]
    rows = []
    for r in sel.itertuples(index=False):
        s = src.loc[r.image_id]
        rows.append({"sample_id": f"{r.image_id}:{r.group}:{r.j}", "image_id": r.image_id,
                     "path": r.path, "gender": r.group,
                     "captions": [G.swap(c, to=r.group, words=words) for c in s["captions"]],
                     "objects": list(s["objects"]), "counterfactual": True})
    return pd.DataFrame(rows, columns=MANIFEST_COLUMNS)


def s_augment(d: pd.DataFrame, cf: pd.DataFrame) -> pd.DataFrame:
    """S_augment = D u {x_i^(j*, g') : g' != g_i} (paper 000 Eq. 3)."""
    g = d.drop_duplicates("image_id").set_index("image_id")["gender"]
    other = cf[cf["gender"].to_numpy() != cf["image_id"].map(g).to_numpy()]
    return pd.concat([d, other], ignore_index=True)


def s_synthetic(cf: pd.DataFrame) -> pd.DataFrame:
    """S_synthetic = {x_i^(j*, g') for all (i, g')} (paper 000 Eq. 2): only inpainted images,
    every group for every source image."""
    return cf.reset_index(drop=True)


def cooccurrence(manifest: pd.DataFrame, attributes: pd.DataFrame | None = None) -> dict:
    """Group/attribute co-occurrence of a manifest.

    Returns a dict: n_samples, n_female, n_male, ``objects_mean_abs_skew`` = mean over labelled
    objects of |f - m| / (f + m) computed on gender-normalised rates (0 = every object equally
    likely for each gender), ``objects`` {name: [f, m]}, and, when ``attributes`` (image_id +
    one column per attribute, e.g. the synthetic scene or colour cast) is given, for each
    attribute value the same normalised skew (what label-based resampling cannot see).
    """
    female = manifest["gender"] == G.FEMALE
    nf, nm = int(female.sum()), int((~female).sum())
    cats, x = _presence(manifest)
    f = x[female.to_numpy()].sum(0)
    m = x[~female.to_numpy()].sum(0)
    out = {"n_samples": int(len(manifest)), "n_female": nf, "n_male": nm,
           "objects": {c: [int(a), int(b)] for c, a, b in zip(cats, f, m)},
           "objects_mean_abs_skew": _mean_abs_skew(f, m, nf, nm)}
    if attributes is not None and len(manifest):
        att = manifest[["image_id", "gender"]].merge(attributes, on="image_id", how="left")
        for col in [c for c in attributes.columns if c != "image_id"]:
            vals = sorted(att[col].dropna().unique())
            fa = np.array([((att[col] == v) & (att["gender"] == G.FEMALE)).sum() for v in vals])
            ma = np.array([((att[col] == v) & (att["gender"] == G.MALE)).sum() for v in vals])
            out[f"{col}_mean_abs_skew"] = _mean_abs_skew(fa, ma, nf, nm)
            out[col] = {str(v): [int(a), int(b)] for v, a, b in zip(vals, fa, ma)}
    return out


def _mean_abs_skew(f, m, nf, nm) -> float | None:
    if len(f) == 0 or nf == 0 or nm == 0:
        return None
    rf, rm = np.asarray(f) / nf, np.asarray(m) / nm
    ok = (rf + rm) > 0
    return float(np.mean(np.abs(rf[ok] - rm[ok]) / (rf[ok] + rm[ok]))) if ok.any() else None
