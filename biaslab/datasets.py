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


def balancing_weights(manifest: pd.DataFrame, iters: int = 200) -> np.ndarray:
    """Per-sample weights w (n,), mean 1, under which every labelled object co-occurs equally
    often with each gender, p_w(o | female) = p_w(o | male) (paper 000 sec. 2.1:
    p(a | g) = p(a)).

    Found by raking (iterative proportional fitting): each sweep scales, for every object o,
    the weights of the female (male) images containing o by target / f (target / m) with
    target = (f + m) / 2, then equalises the two genders' total weights (equal counts then mean
    equal rates), then renormalises to mean 1. Objects seen with only one gender are left out.
    Exact balance can require weights near 0 for stereotypical images and very large ones for
    counter-stereotypical images: on strongly biased multi-label data resampling can only
    balance the labelled objects by (nearly) emptying the dataset. Raking is the multi-label
    generalisation of the per-object balancing of Wang et al. 2020b / Agarwal et al. 2022
    (balancing objects one at a time does not converge when images hold several objects).
    """
    cats, x = _presence(manifest)
    female = (manifest["gender"] == G.FEMALE).to_numpy()
    w = np.ones(len(manifest))
    if len(w) == 0:
        return w
    both = [k for k in range(len(cats)) if (x[:, k] & female).any() and (x[:, k] & ~female).any()]
    for _ in range(iters):
        for k in both:
            fm, mm = x[:, k] & female, x[:, k] & ~female
            f, m = w[fm].sum(), w[mm].sum()
            if f > 0 and m > 0:
                target = (f + m) / 2
                w[fm] *= target / f
                w[mm] *= target / m
        if female.any() and (~female).any():
            t = w.sum() / 2
            w[female] *= t / w[female].sum()
            w[~female] *= t / w[~female].sum()
        w = w / w.mean()
    return w


def oversample(manifest: pd.DataFrame, seed: int = 0, max_copies: int = 5,
               iters: int = 200) -> pd.DataFrame:
    """Over-sampling (Wang et al. 2020b): repeat images toward equal co-occurrence of each
    labelled object with each gender. Copies = round(w_i) of ``balancing_weights`` clipped to
    [1, ``max_copies``]: nothing is dropped and no image is repeated more than ``max_copies``
    times, so balance is partial where it would need more (reported by ``cooccurrence``).
    Deterministic (``seed`` unused, kept for a uniform signature). Unlabelled attributes are
    not seen at all (paper 000 sec. 2.1)."""
    w = balancing_weights(manifest, iters=iters)
    return _expand(manifest, np.clip(np.rint(w), 1, max_copies).astype(np.int64))


def subsample(manifest: pd.DataFrame, seed: int = 0, min_fraction: float = 0.25,
              iters: int = 200) -> pd.DataFrame:
    """Sub-sampling (Agarwal et al. 2022): keep image i with probability min(1, w_i / c)
    (``balancing_weights``), with c the largest value (best balance; c = max w is exact) that
    still keeps at least ``min_fraction`` of the images in expectation. Sampling is
    systematic, in table order, with one uniform offset from
    ``numpy.random.default_rng(seed)``: kept counts differ from their expectation by less than
    one, and the same seed gives the same subset."""
    if not 0 < min_fraction <= 1:
        raise ValueError(f"min_fraction must be in (0, 1], got {min_fraction}")
    w = balancing_weights(manifest, iters=iters)
    if len(w) == 0:
        return manifest.copy()
    need = min_fraction * len(w)
    lo, hi = 1e-12, float(w.max())
    if np.minimum(1, w / hi).sum() >= need:
        c = hi
    else:
        for _ in range(100):  # bisection: kept(c) decreases in c
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.minimum(1, w / mid).sum() >= need else (lo, mid)
        c = lo
    p = np.minimum(1.0, w / c)
    u = np.random.default_rng(seed).random()
    cum = np.cumsum(p)
    keep = (np.floor(cum + u) - np.floor(cum - p + u)).astype(np.int64)
    return _expand(manifest, keep)


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
