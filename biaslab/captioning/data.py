"""Training manifests -> (image table, caption samples) and the frozen image features the
captioners read (shared by every captioner architecture; paper 000 sec. 3.2)."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import pandas as pd

from biaslab.runtime.io import InputError

__all__ = ["manifest_image_table", "manifest_samples", "image_features", "grid_features",
           "load_grid_encoder", "path_id"]


def path_id(path: str) -> int:
    """Stable negative int64 id of a path (feature-cache key of an image that has no COCO id of
    its own, e.g. a counterfactual)."""
    h = int.from_bytes(hashlib.blake2b(str(path).encode(), digest_size=8).digest(), "big")
    return -(h & 0x7FFF_FFFF_FFFF_FFFF) - 1


def manifest_image_table(manifest: pd.DataFrame) -> pd.DataFrame:
    """Distinct images of a training manifest (``biaslab.data.datasets``) -> DataFrame
    ``image_id, path`` for :func:`biaslab.models.features.encode_cached`.

    A real image keeps its COCO ``image_id`` (so the ``features`` stage's cache is reused); a
    counterfactual image (``counterfactual`` True: same source id, another file) gets a stable
    negative id derived from its path."""
    cols = {"image_id", "path"} - set(manifest.columns)
    if cols:
        raise InputError("manifest", f"missing column(s) {sorted(cols)}")
    m = manifest.drop_duplicates("path")
    cf = m["counterfactual"].astype(bool) if "counterfactual" in m.columns else \
        pd.Series(False, index=m.index)
    ids = [(path_id(p) if c else int(i)) for i, p, c in zip(m["image_id"], m["path"], cf)]
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
                   progress: bool = False, stats: dict | None = None,
                   executor: dict | None = None, workers: int = 1) -> np.ndarray:
    """(n, F) features of ``table`` (image_id, path) rows, in order, through the shared
    per-image cache (:func:`biaslab.models.features.encode_cached`; ``executor``: where missing
    images are encoded, params ``executor``; the features do not depend on it).

    ``workers`` > 1 (local executor only): the rows are first encoded on that many forked
    processes, interleaved slices of the table (the cache takes concurrent writers; every
    image is encoded alone on one thread, so its row is the same bits whichever process
    wrote it), then read from the cache in order. 2 workers halve a 2-core machine's time."""
    from biaslab.models.features import encode_cached
    from biaslab.runtime.parallel import map_jobs
    rows = table[["image_id", "path"]].reset_index(drop=True)
    w = int(workers or 1)
    if w > 1 and executor is None and len(rows) >= 2 * w:
        map_jobs(lambda part: len(encode_cached(
            part, cache_dir, image_encoder, image_size=image_size, batch_size=batch_size,
            num_threads=num_threads)[0]), [rows.iloc[i::w] for i in range(w)], workers=w)
    _, f = encode_cached(rows, cache_dir, image_encoder,
                         image_size=image_size, batch_size=batch_size, num_threads=num_threads,
                         progress=progress, stats=stats, executor=executor)
    return f



# --------------------------------------------------------------------------------------------
# grid features (the Transformer captioner's encoder input)


def _grid_of(x, grid: int):
    """Backbone output -> (b, grid*grid*C) flattened grid, cell-major (row by row, channels
    last). ``x``: a feature map (b, C, h, w), or tokens (b, T, C) whose last ``s*s`` tokens are
    an s x s patch grid (ViT: the first ``T - s*s`` tokens, CLS / registers, are dropped; Swin:
    T = s*s). The map is average-pooled to ``grid x grid`` (``adaptive_avg_pool2d``: the
    identity when the map already has that size)."""
    import math as _m

    import torch
    if x.dim() == 3:
        b, T, C = x.shape
        s = _m.isqrt(T)
        x = x[:, T - s * s:].transpose(1, 2).reshape(b, C, s, s)
    if x.dim() != 4:
        raise ValueError(f"cannot read a spatial grid from a backbone output of shape "
                         f"{tuple(x.shape)}")
    g = torch.nn.functional.adaptive_avg_pool2d(x.float(), (int(grid), int(grid)))
    return g.permute(0, 2, 3, 1).reshape(len(g), -1)


def load_grid_encoder(backbone: str, image_size: int | None, grid: int,
                      num_threads: int | None = None):
    """A frozen image backbone (:func:`biaslab.models.features.load_image_encoder`, same weights and
    preprocessing) whose ``encode(images)`` returns its last feature MAP before pooling,
    average-pooled to ``grid x grid`` cells and flattened: (n, grid*grid*C) float32
    (EfficientNet-Lite0 at 224 px has a 7 x 7 x 1280 map, so ``grid`` 7 is the map itself; HF
    backbones: ``last_hidden_state``, conv maps or ViT / Swin patch tokens, see
    :func:`_grid_of`). Its ``name`` is ``<backbone>-grid<g>``, so the feature cache keeps grid
    features apart from the pooled ones. Raises ``ValueError`` for ``grid < 1``."""
    import torch
    from PIL import Image

    from biaslab.models.features import load_image_encoder
    if int(grid) < 1:
        raise ValueError(f"captioner.transformer.grid must be >= 1, got {grid!r}")
    enc = load_image_encoder(backbone, image_size=image_size, num_threads=num_threads)
    model, g = enc.model, int(grid)

    def forward(x):
        if hasattr(model, "extract_features"):               # EfficientNet-Lite0
            return _grid_of(model.extract_features(x), g)
        return _grid_of(model(pixel_values=x).last_hidden_state, g)

    enc._forward = forward                                   # instance attribute: the grid
    enc.name = f"{backbone}-grid{g}"
    with torch.inference_mode():
        enc.dim = int(forward(enc._preprocess([Image.new("RGB", (64, 64))])).shape[-1])
    return enc


def grid_features(table: pd.DataFrame, cache_dir: str | os.PathLike,
                  image_encoder: str = "efficientnet_lite0", image_size: int | None = 224,
                  grid: int = 7, batch_size: int = 32, num_threads: int | None = 1,
                  progress: bool = False, stats: dict | None = None) -> np.ndarray:
    """(n, grid*grid, C) float32 grid features of ``table`` (image_id, path) rows, in order,
    through the shared per-image cache (:func:`biaslab.models.features.encode_cached`, directory
    ``<image_encoder>-grid<g>_<size>px``; 7 x 7 x 1280 float32 = 250 KB per image for
    EfficientNet-Lite0, grid 3 = 46 KB). The backbone is loaded only when an image is missing
    from the cache."""
    from biaslab.models.features import default_size, encode_cached
    holder: dict = {}
    size = default_size(image_encoder, image_size)

    class _Lazy:                 # what encode_cached reads of an encoder, loaded on demand
        name = f"{image_encoder}-grid{int(grid)}"
        image_size = size
        dim = None

        def encode(self, images, batch_size=32, progress=False):
            if "enc" not in holder:
                holder["enc"] = load_grid_encoder(image_encoder, image_size, grid, num_threads)
            return holder["enc"].encode(images, batch_size=batch_size, progress=progress)

    _, f = encode_cached(table[["image_id", "path"]], cache_dir, encoder=_Lazy(),
                         batch_size=batch_size, num_threads=num_threads, progress=progress,
                         stats=stats)
    g2 = int(grid) * int(grid)
    return f.reshape(len(f), g2, -1) if len(f) else np.zeros((0, g2, 0), np.float32)
