"""Training manifests -> (image table, caption samples) and the frozen image features the
captioners read (shared by every captioner architecture; paper 000 sec. 3.2)."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import pandas as pd

from biaslab.io import InputError

__all__ = ["manifest_image_table", "manifest_samples", "image_features", "path_id"]


def _path_id(path: str) -> int:
    """Stable negative int64 id of a path (feature-cache key of an image that has no COCO id of
    its own, e.g. a counterfactual)."""
    h = int.from_bytes(hashlib.blake2b(str(path).encode(), digest_size=8).digest(), "big")
    return -(h & 0x7FFF_FFFF_FFFF_FFFF) - 1


def manifest_image_table(manifest: pd.DataFrame) -> pd.DataFrame:
    """Distinct images of a training manifest (``biaslab.datasets``) -> DataFrame
    ``image_id, path`` for :func:`biaslab.features.encode_cached`.

    A real image keeps its COCO ``image_id`` (so the ``features`` stage's cache is reused); a
    counterfactual image (``counterfactual`` True: same source id, another file) gets a stable
    negative id derived from its path."""
    cols = {"image_id", "path"} - set(manifest.columns)
    if cols:
        raise InputError("manifest", f"missing column(s) {sorted(cols)}")
    m = manifest.drop_duplicates("path")
    cf = m["counterfactual"].astype(bool) if "counterfactual" in m.columns else \
        pd.Series(False, index=m.index)
    ids = [(_path_id(p) if c else int(i)) for i, p, c in zip(m["image_id"], m["path"], cf)]
    out = pd.DataFrame({"image_id": np.asarray(ids, np.int64), "path": m["path"].astype(str)})
    dup = out["image_id"].duplicated()
    if dup.any():
        raise InputError("manifest", f"image {int(out.loc[dup, 'image_id'].iloc[0])} appears with "
                                     f"several paths but is not marked counterfactual")
    return out.reset_index(drop=True)


def manifest_samples(manifest: pd.DataFrame, table: pd.DataFrame | None = None
                     ) -> tuple[list[str], np.ndarray]:
    """One training sample per (manifest row, caption): ``(captions, rows)`` where ``rows[j]``
    is the row of ``table`` (default ``manifest_image_table(manifest)``) holding the image of
    caption j. Repeated manifest rows (over-sampling) give repeated samples."""
    table = manifest_image_table(manifest) if table is None else table
    pos = {p: k for k, p in enumerate(table["path"])}
    caps, rows = [], []
    for p, cs in zip(manifest["path"].astype(str), manifest["captions"]):
        for c in list(cs if cs is not None else []):
            if isinstance(c, str) and c.strip():
                caps.append(c)
                rows.append(pos[p])
    return caps, np.asarray(rows, np.int64)


def image_features(table: pd.DataFrame, cache_dir: str | os.PathLike,
                   image_encoder: str = "efficientnet_lite0", image_size: int | None = 224,
                   batch_size: int = 32, num_threads: int | None = 1,
                   progress: bool = False, stats: dict | None = None) -> np.ndarray:
    """(n, F) features of ``table`` (image_id, path) rows, in order, through the shared
    per-image cache (:func:`biaslab.features.encode_cached`)."""
    from biaslab.features import encode_cached
    _, f = encode_cached(table[["image_id", "path"]], cache_dir, image_encoder,
                         image_size=image_size, batch_size=batch_size, num_threads=num_threads,
                         progress=progress, stats=stats)
    return f


path_id = _path_id
