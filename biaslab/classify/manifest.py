"""Inputs of the classifier (paper 000 sec. 3.1, appendix B.1): label selection, targets,
validation split, the real test table, object matrices and features of manifest rows."""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from biaslab.classify.model import GENDER_OF, GENDER_OUTPUTS
from biaslab.runtime.io import InputError


# --------------------------------------------------------------------------- labels
def select_labels(manifest: pd.DataFrame, min_cooccur: int, rule: str = "each",
                  groups: Sequence[str] = ("female", "male")) -> list[str]:
    """Object labels of the classifier (paper 000 appendix B.1): objects that co-occur with
    each group (``rule="each"``) or with at least one group (``rule="any"``) in at least
    ``min_cooccur`` manifest rows. Counts are over rows (= images for the original manifest),
    an object counted once per row. Returns the names sorted.

    Raises:
        InputError: the manifest lacks ``gender`` / ``objects``; ValueError: unknown rule.
    """
    for col in ("gender", "objects"):
        if col not in manifest.columns:
            raise InputError("manifest", f"missing column {col!r}")
    if rule not in ("each", "any"):
        raise ValueError(f"cooccur_rule must be 'each' or 'any', got {rule!r}")
    counts: dict[str, dict[str, int]] = {}
    for g, objs in zip(manifest["gender"], manifest["objects"]):
        if g not in groups:
            continue
        for o in set(objs if objs is not None else ()):
            counts.setdefault(o, dict.fromkeys(groups, 0))[g] += 1
    agg = min if rule == "each" else max
    return sorted(o for o, c in counts.items() if agg(c.values()) >= int(min_cooccur))


def label_targets(manifest: pd.DataFrame, labels: Sequence[str], labelled_only: bool = True
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Targets and loss mask for a manifest.

    Returns:
        ``(y, mask)``: float32 (n, |labels| + 2) with the object presences then ``woman``,
        ``man`` (1 for the row's gender); mask float32 of the same shape, 0 for the object
        outputs of rows without any object (when ``labelled_only``) and for the gender outputs
        of rows whose gender is not female/male.
    """
    idx = {c: k for k, c in enumerate(labels)}
    n, c = len(manifest), len(labels)
    y = np.zeros((n, c + 2), np.float32)
    mask = np.ones((n, c + 2), np.float32)
    for r, (g, objs) in enumerate(zip(manifest["gender"], manifest["objects"])):
        objs = list(objs) if objs is not None else []
        for o in objs:
            if o in idx:
                y[r, idx[o]] = 1.0
        if labelled_only and not objs:
            mask[r, :c] = 0.0
        if g in GENDER_OF:
            y[r, c + GENDER_OUTPUTS.index(GENDER_OF[g])] = 1.0
        else:
            mask[r, c:] = 0.0
    return y, mask


def validation_split(manifest: pd.DataFrame, val_fraction: float, seed: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Row positions ``(train, val)``: ``round(val_fraction * #images)`` source images
    (distinct ``image_id``, sorted, permuted with ``default_rng(seed)``) and all their rows go
    to validation (at least one image when ``val_fraction > 0`` and there are >= 2 images)."""
    if not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    ids = np.sort(manifest["image_id"].astype(np.int64).unique())
    n_val = int(round(val_fraction * len(ids)))
    if val_fraction > 0 and len(ids) >= 2:
        n_val = min(max(n_val, 1), len(ids) - 1)
    perm = np.random.default_rng(int(seed)).permutation(len(ids))
    val_ids = set(ids[perm[:n_val]].tolist())
    is_val = manifest["image_id"].astype(np.int64).isin(val_ids).to_numpy()
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


# --------------------------------------------------------------------------- features
def file_id(path: str | os.PathLike) -> int:
    """A content id of an image file: the first 63 bits of its
    :func:`biaslab.models.features.file_digest`, so identical files share one cache row.
    Raises ``InputError`` naming a missing or unreadable file."""
    from biaslab.models.features import file_digest
    return int(file_digest(path)[:16], 16) >> 1


def encode_files(paths: Sequence[str], cache_dir: str | os.PathLike, backbone: str, *,
                 image_size: int | None = None, batch_size: int = 32,
                 num_threads: int | None = None, encoder=None,
                 stats: dict | None = None, executor: dict | None = None) -> np.ndarray:
    """Backbone features of image files (float32 (n, d), rows in input order) through
    :func:`biaslab.models.features.encode_cached`, keyed by (:func:`file_id`, path): derived images
    (counterfactuals, blacked-out or inpainted test images) are encoded once per content.
    ``executor``: params ``executor`` (where missing images are encoded; the features do not
    depend on it)."""
    from biaslab.models.features import encode_cached
    paths = [str(p) for p in paths]
    if not paths:
        return np.zeros((0, encoder.dim if encoder is not None else 0), np.float32)
    ids = [file_id(p) for p in paths]
    table = pd.DataFrame({"image_id": ids, "path": paths}).drop_duplicates("image_id")
    uid, feats = encode_cached(table, cache_dir, backbone, encoder=encoder,
                               image_size=image_size, batch_size=batch_size,
                               num_threads=num_threads, stats=stats, executor=executor)
    row = {int(i): k for k, i in enumerate(uid)}
    return feats[[row[i] for i in ids]]


def manifest_features(manifest: pd.DataFrame, base_ids: np.ndarray, base_feats: np.ndarray,
                      cache_dir: str | os.PathLike, backbone: str, *,
                      image_size: int | None = None, batch_size: int = 32,
                      num_threads: int | None = None, encoder=None, stats: dict | None = None,
                      executor: dict | None = None) -> np.ndarray:
    """Features (float32 (n, d)) of every manifest row: non-counterfactual rows whose
    ``image_id`` is in ``base_ids`` (the pipeline's ``data/features``) take those rows; the
    others (counterfactual images, or images missing from the base) are encoded from their
    ``path`` with :func:`encode_files`."""
    base_row = {int(i): k for k, i in enumerate(np.asarray(base_ids, np.int64))}
    cf = manifest["counterfactual"].fillna(False).astype(bool).to_numpy() \
        if "counterfactual" in manifest.columns else np.zeros(len(manifest), bool)
    iid = manifest["image_id"].astype(np.int64).to_numpy()
    from_base = np.array([not c and int(i) in base_row for c, i in zip(cf, iid)], bool)
    d = base_feats.shape[1] if len(base_feats) else None
    other = np.flatnonzero(~from_base)
    enc = None
    if len(other):
        enc = encode_files(manifest["path"].iloc[other].tolist(), cache_dir, backbone,
                           image_size=image_size, batch_size=batch_size,
                           num_threads=num_threads, encoder=encoder, stats=stats,
                           executor=executor)
        d = enc.shape[1]
    out = np.zeros((len(manifest), d or 0), np.float32)
    if from_base.any():
        out[from_base] = base_feats[[base_row[int(i)] for i in iid[from_base]]]
    if enc is not None:
        if base_feats is not None and len(base_feats) and enc.shape[1] != base_feats.shape[1]:
            raise InputError("features", f"encoded width {enc.shape[1]} differs from the base "
                                         f"features' {base_feats.shape[1]} (backbone mismatch)")
        out[other] = enc
    return out


# --------------------------------------------------------------------------- test set
TEST_COLUMNS = ["image_id", "path", "gender", "objects", "labelled", "n_persons"]


def test_table(images: pd.DataFrame, image_labels: pd.DataFrame, split: pd.DataFrame,
               objects: pd.DataFrame, persons: pd.DataFrame, split_name: str = "test"
               ) -> pd.DataFrame:
    """The real test images of paper 000 sec. 3.1: images of ``split_name`` whose
    caption-derived gender is female/male, with their image-level objects
    (``objects.parquet`` de-duplicated), ``labelled`` (the image has at least one object row,
    see ``labelled_only``) and ``n_persons`` (rows in ``persons.parquet``). Sorted by
    image_id; columns ``TEST_COLUMNS``."""
    ids = set(split.loc[split["split"] == split_name, "image_id"].astype(int))
    lab = image_labels[image_labels["gender"].isin(list(GENDER_OF))
                       & image_labels["image_id"].isin(ids)]
    df = lab[["image_id", "gender"]].merge(images[["image_id", "path"]], on="image_id")
    objs = objects.drop_duplicates(["image_id", "category"]).groupby("image_id")["category"] \
        .apply(sorted)
    df["objects"] = df["image_id"].map(objs).apply(lambda v: v if isinstance(v, list) else [])
    df["labelled"] = df["image_id"].isin(set(objects["image_id"].astype(int)))
    df["n_persons"] = df["image_id"].map(persons.groupby("image_id").size()).fillna(0) \
        .astype(int)
    return df[TEST_COLUMNS].sort_values("image_id", ignore_index=True)


def object_matrix(object_lists: Sequence, labels: Sequence[str]) -> np.ndarray:
    """(n, |labels|) float32 0/1 presence matrix from per-image object-name lists."""
    idx = {c: k for k, c in enumerate(labels)}
    y = np.zeros((len(object_lists), len(labels)), np.float32)
    for r, objs in enumerate(object_lists):
        for o in (objs if objs is not None else ()):
            if o in idx:
                y[r, idx[o]] = 1.0
    return y


def model_features(clf: "GenderObjectClassifier", table: pd.DataFrame, base_ids, base_feats,
                   cache_dir: str | os.PathLike, derived: bool = False,
                   base_backbone: str | None = None, **kw) -> np.ndarray:
    """Features of ``table`` (image_id, path) as ``clf`` needs them: its own backbone for a
    fine-tuned model, else the frozen ``config["backbone"]``: the base features
    (``data/features``) for real images, the content-keyed cache for ``derived`` images
    (blacked-out, inpainted). ``base_backbone``: the backbone of ``base_feats``
    (``features.backbone``); when it differs from the model's, the base is not used and every
    image is encoded through the cache with the model's backbone (a second Table 1 backbone)."""
    if clf.config.get("finetune"):
        return clf.encode(table["path"].tolist())
    if base_backbone is not None and str(base_backbone) != str(clf.config["backbone"]):
        base_ids, base_feats = np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    t = table[["image_id", "path"]].assign(counterfactual=bool(derived))
    return manifest_features(t, base_ids, base_feats, cache_dir, clf.config["backbone"],
                             image_size=clf.config.get("image_size"), **kw)
