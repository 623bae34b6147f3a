"""Counterfactual candidates x_i^(j,g') of paper 000 Eq. 1 (Hirota et al., EMNLP 2024, sec. 2.2):
for every masked image i, every group g' of the protected attribute (``generation_groups``:
{female, male} by default; {dark, light} for skin tone, paper 000 appendix B.1; the four
gender x skin groups, sec. 7) and j = 0..m-1, one inpainted image,
with guidance scales cycled over ``guidance_scales`` (appendix A.1: m = 30 over 7.5, 9.5 and
15.0, i.e. 10 per scale) and a deterministic per-candidate seed.

Prompts t^(g') (``make_prompt``): the image's FIRST caption (in caption_id order) that contains a
gender word of the word list, with its gender words set to g' by ``biaslab.data.gender.swap(caption,
to=g')`` (for a skin-tone group: the caption's own gender, with the skin-tone word before each
gender noun, ``describe_skin``). Under both image-level rules of ``biaslab.data.gender`` an image of defined gender has no
caption with words of the other gender, so that caption names the image's own gender. The paper
does not say which caption it used; "first gendered caption" is our deterministic choice.

Work is split into ``shards`` shards by a stable hash of image_id (``shard_of``). Each finished
shard writes its candidate table atomically to ``<out_dir>/shards/shard-XXX.parquet`` with a
fingerprint (params, backend settings, the shard's inputs incl. mask bytes, and the digest of
the code that computes it: ``biaslab.runtime.provenance.source_digest`` of this module, every backend
it can load and the backend's own module) in the parquet metadata; a shard whose file exists with the same fingerprint and whose images all exist is
never recomputed, so a killed run resumes at the first unfinished shard. After the last shard,
image and shard files no candidate refers to (stale params, temporary files of a killed write)
are deleted, so the output directory depends only on the final table.

Backends (``biaslab.counterfactual.copy_paste``, ``biaslab.counterfactual.sd_inpaint``,
``biaslab.counterfactual.render``) share one interface: ``name``, ``fingerprint() -> dict``
(cheap, no model load) and ``generate(item, image, mask, group, prompt, js, seeds, scales) ->
list[(image, donor_ids)]``; an optional ``image_format`` (``"jpg"``, the default, or ``"png"``)
names the candidates' file format (``render`` writes lossless PNGs so that pixels outside the
person stay identical to the source).
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image
from tqdm import tqdm

from biaslab.data import gender as G
from biaslab.data.groups import generation_groups, group_parts  # noqa: F401 (re-exported)
from biaslab.counterfactual.backend_settings import (CopyPasteSettings, InstructPix2PixSettings,
                                                     SDInpaintSettings)
from biaslab.counterfactual.masks import load_mask
from biaslab.runtime.executor import run_shards
from biaslab.runtime.io import InputError, atomic_path, load_image  # noqa: F401 (re-exported)

GROUPS = (G.FEMALE, G.MALE)
#: bump when the candidate format or the generation code changes incompatibly.
FORMAT_VERSION = 1
_FP_KEY = b"biaslab_fingerprint"

CANDIDATE_COLUMNS = ["image_id", "group", "j", "seed", "guidance_scale", "prompt", "path",
                     "donor_ann_id", "donor_ann_ids", "backend", "shard"]


def stable_hash(*parts) -> int:
    """Unsigned 64-bit hash of the parts' reprs (blake2b): identical across processes,
    machines and Python versions, unlike ``hash()``."""
    h = hashlib.blake2b("\x1f".join(repr(p) for p in parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "big")


def shard_of(image_id: int, shards: int) -> int:
    """Shard index in ``0 .. shards-1`` of an image (stable hash of its id)."""
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    return stable_hash("shard", int(image_id)) % shards


def candidate_seed(image_id: int, group: str, j: int, base_seed: int) -> int:
    """Seed of candidate j of (image, group): a 63-bit hash of (image_id, group, j, base seed),
    valid for ``numpy.random.default_rng`` and ``torch.Generator.manual_seed``."""
    return stable_hash("candidate", int(image_id), str(group), int(j), int(base_seed)) \
        & (2 ** 63 - 1)


def guidance_scale_for(j: int, scales: Sequence[float]) -> float:
    """Guidance scale of candidate j: ``scales[j % len(scales)]`` (cycled, so m = 30 over 3
    scales gives 10 candidates per scale as in paper 000 appendix A.1)."""
    if not scales:
        raise ValueError("guidance_scales must not be empty")
    return float(scales[j % len(scales)])


#: the skin-tone words of paper 000 appendix B.1 (G = {darker-skinned, lighter-skinned}).
SKIN_DESCRIPTORS = {"dark": "darker-skinned", "light": "lighter-skinned"}
#: gender words that are pronouns or adjectives: no skin-tone word goes before them.
_NOT_NOUN = frozenset({"she", "her", "hers", "herself", "he", "his", "him", "himself",
                       "pregnant"})


def describe_skin(caption: str, skin: str, words: str = "lic") -> str:
    """``caption`` with the skin-tone word of ``skin`` (:data:`SKIN_DESCRIPTORS`) before every
    gender noun of list ``words`` (``"A woman with a dog"`` -> ``"A darker-skinned woman with
    a dog"``; pronouns and ``pregnant`` are left alone). A caption without a gender noun gets
    ``"A <skin-tone word> person. "`` in front. Paper 000 appendix B.1 names the groups but
    not its prompts; this follows its sec. 7 example ("A woman with a dog" -> "An elderly
    woman with a dog"), and puts the word before every mention because the mask covers every
    selected person.

    Raises:
        KeyError: ``skin`` not dark/light."""
    desc = SKIN_DESCRIPTORS[skin]
    nouns = G.gender_words(words) - _NOT_NOUN
    seen = []

    def fn(w, i, ws):
        if w in nouns:
            seen.append(i)
            return f"{desc} {w}"
        return None

    out = G.replace_words(caption, fn)
    return out if seen else f"A {desc} person. {caption}"


def make_prompt(captions: Sequence[str], group: str, words: str = "lic") -> tuple[str, str] | None:
    """t^(g') of paper 000 Eq. 1: the first caption with a gender word, with its gender words
    set to the group's gender (``biaslab.data.gender.swap``; a skin-tone group keeps the
    caption's own gender) and, for a group with a skin tone, the skin-tone word before every
    gender noun (:func:`describe_skin`, appendix B.1).

    Args:
        captions: the image's captions in caption_id order.
        group: a target group (:func:`group_parts`): female/male, dark/light or
            ``<gender>_<skin>``.

    Returns:
        ``(source_caption, prompt)`` or None when no caption has a gender word.

    Raises:
        ValueError: unknown group.
    """
    gender, skin = group_parts(group)
    for c in captions:
        if G.caption_gender(c, words) != G.NONE:
            prompt = G.swap(c, to=gender, words=words) if gender else c
            return c, (describe_skin(prompt, skin, words) if skin else prompt)
    return None


def make_prompts(captions: pd.DataFrame, image_ids: Sequence[int] | None = None,
                 words: str = "lic", groups: Sequence[str] = GROUPS) -> pd.DataFrame:
    """Prompts of many images.

    Args:
        captions: columns caption_id, image_id, caption (``data/prepared/captions.parquet`` or
            ``data/labels/captions.parquet``).
        image_ids: images to prompt (None = all).

    Returns:
        one row per image that has a gendered caption: image_id, source_caption and one column
        ``prompt_<group>`` per group.
    """
    missing = [c for c in ("caption_id", "image_id", "caption") if c not in captions.columns]
    if missing:
        raise InputError("captions table", f"missing column(s) {missing}")
    caps = captions.sort_values("caption_id")
    if image_ids is not None:
        caps = caps[caps["image_id"].isin(set(int(i) for i in image_ids))]
    rows = []
    for iid, grp in caps.groupby("image_id", sort=True):
        texts = list(grp["caption"])
        row = {"image_id": int(iid)}
        for g in groups:
            res = make_prompt(texts, g, words)
            if res is None:
                break
            row["source_caption"], row[f"prompt_{g}"] = res
        else:
            rows.append(row)
    return pd.DataFrame(rows, columns=["image_id", "source_caption",
                                       *(f"prompt_{g}" for g in groups)])


WORK_COLUMNS = ["image_id", "path", "mask_path", "width", "height", "gender", "ann_ids",
                "boxes", "keypoints", "shard"]


def build_work(masks: pd.DataFrame, images: pd.DataFrame, persons: pd.DataFrame,
               prompts: pd.DataFrame, shards: int, max_images: int | None = None
               ) -> tuple[pd.DataFrame, dict]:
    """Join masks, image paths, person boxes and prompts into one work item per image.

    ``max_images`` keeps the first N images in the order of a stable hash of image_id (a
    deterministic pseudo-random sample, independent of the shard count).

    Returns:
        ``(work, counts)``: work with ``WORK_COLUMNS`` + ``prompt_<group>`` columns sorted by
        (shard, image_id), boxes = list of [x, y, w, h] in ann_ids order, keypoints = the
        persons' COCO keypoints in the same order (None where a person has none); counts of
        images dropped for having no gendered caption or by the cap.
    """
    for df, cols, name in ((masks, ["image_id", "ann_ids", "mask_path", "gender"], "masks"),
                           (images, ["image_id", "path", "width", "height"], "images"),
                           (persons, ["ann_id", "x", "y", "w", "h"], "persons")):
        miss = [c for c in cols if c not in df.columns]
        if miss:
            raise InputError(f"{name} table", f"missing column(s) {miss}")
    counts = {"masked_images": int(len(masks))}
    w = masks[["image_id", "ann_ids", "mask_path", "gender"]].merge(
        images[["image_id", "path", "width", "height"]], on="image_id", how="inner")
    n = len(w)
    w = w.merge(prompts.drop(columns=["source_caption"], errors="ignore"), on="image_id",
                how="inner")
    counts["skipped_no_gendered_caption"] = n - len(w)
    if max_images is not None and len(w) > max_images:
        order = np.argsort([stable_hash("sample", int(i)) for i in w["image_id"]],
                           kind="stable")
        counts["skipped_max_images"] = len(w) - int(max_images)
        w = w.iloc[order[:int(max_images)]]
    else:
        counts["skipped_max_images"] = 0
    boxes = persons.set_index("ann_id")[["x", "y", "w", "h"]]
    kp = persons.set_index("ann_id")["keypoints"] if "keypoints" in persons.columns else None

    def keypoints_of(a: int):
        k = None if kp is None else kp.loc[int(a)]
        return None if k is None or len(k) == 0 else [float(v) for v in k]

    w = w.assign(
        boxes=[[[float(v) for v in boxes.loc[int(a)]] for a in ids] for ids in w["ann_ids"]],
        keypoints=[[keypoints_of(a) for a in ids] for ids in w["ann_ids"]],
        ann_ids=[[int(a) for a in ids] for ids in w["ann_ids"]],
        shard=[shard_of(i, shards) for i in w["image_id"]])
    w = w.sort_values(["shard", "image_id"], ignore_index=True)
    counts["work_images"] = int(len(w))
    return w[[*WORK_COLUMNS, *[c for c in w.columns if c.startswith("prompt_")]]], counts


def make_render(p: dict, persons=None, images=None, labels=None, split=None, data_root=None):
    """Backend ``render`` (registry entry): the synthetic generator re-draws the person."""
    from biaslab.counterfactual.render import RenderBackend
    if not data_root:
        raise ValueError("generate.backend render needs params data.root (a synthetic "
                         "dataset)")
    return RenderBackend(data_root)


def make_copy_paste(p: dict, persons=None, images=None, labels=None, split=None,
                    data_root=None):
    """Backend ``copy_paste`` (registry entry): a donor person of the target group pasted into
    the inpainted hole; its donor pool comes from the four tables, at least ``m`` donors per
    group, of the run's ``attribute`` (:class:`~biaslab.counterfactual.backend_settings.
    CopyPasteSettings`)."""
    from biaslab.counterfactual.copy_paste import CopyPasteBackend, donor_pool
    if any(t is None for t in (persons, images, labels, split)):
        raise ValueError("generate.backend copy_paste needs the persons, images, labels "
                         "and split tables (its donor pool)")
    s = CopyPasteSettings.from_group(p)
    donors = donor_pool(persons, images, labels, split,
                        splits=None if s.donor_splits is None else list(s.donor_splits),
                        single_person=bool(s.donor_single_person),
                        min_pool=int(p.get("m", 1)), attribute=p.get("attribute", "gender"))
    return CopyPasteBackend(donors, inpaint_radius=float(s.inpaint_radius),
                            inpaint_method=s.inpaint_method, feather_px=float(s.feather_px),
                            extent_weight=float(s.extent_weight))


def make_sd_inpaint(p: dict, persons=None, images=None, labels=None, split=None,
                    data_root=None):
    """Backend ``sd_inpaint`` (registry entry): Stable Diffusion inpainting
    (:class:`~biaslab.counterfactual.backend_settings.SDInpaintSettings`)."""
    from biaslab.counterfactual.sd_inpaint import SDInpaintBackend
    s = SDInpaintSettings.from_group(p)
    return SDInpaintBackend(s.model, steps=int(s.steps), resolution=int(s.resolution),
                            batch_size=int(s.batch_size), feather_px=float(s.feather_px))


def make_instruct_pix2pix(p: dict, persons=None, images=None, labels=None, split=None,
                          data_root=None):
    """Backend ``instruct_pix2pix`` (registry entry): GenSynth's editor (paper 001 sec. 4.1),
    InstructPix2Pix on the person's box with paper 001 Table 6's instructions, one candidate
    per text guidance scale (:class:`~biaslab.counterfactual.backend_settings.
    InstructPix2PixSettings`)."""
    from biaslab.counterfactual.instruct_pix2pix import InstructPix2PixBackend
    s = InstructPix2PixSettings.from_group(p)
    return InstructPix2PixBackend(
        s.model, steps=int(s.steps), resolution=int(s.resolution),
        image_guidance_scale=float(s.image_guidance_scale), n_scales=len(s.guidance_scales),
        batch_size=int(s.batch_size))


def make_backend(p: dict, persons: pd.DataFrame | None = None,
                 images: pd.DataFrame | None = None, labels: pd.DataFrame | None = None,
                 split: pd.DataFrame | None = None, data_root: str | os.PathLike | None = None):
    """The generation backend named by params ``generate`` (``p["backend"]``), built the same
    way for stage ``generate`` (paper 000 Eq. 1's candidates) and stage ``artifact_test``
    (Table 3's inpainted parts), so both use one donor ranking / one pipeline setting. The
    name is looked up in :data:`biaslab.registry.BACKENDS` (built-ins: :func:`make_copy_paste`,
    :func:`make_render`, :func:`make_sd_inpaint`, :func:`make_instruct_pix2pix`; plug-ins:
    entry point group ``biaslab.backends``), whose target is called with these arguments.

    Args:
        p: params ``generate`` (backend, m, donor_splits, donor_single_person, inpaint_radius,
            inpaint_method, feather_px, extent_weight, model, steps, resolution, batch_size),
            plus ``attribute`` (the top-level param, added by the stage: copy_paste's donor
            groups; default gender).
        persons, images, labels, split: ``data/prepared/{persons,images}.parquet``,
            ``data/labels/images.parquet`` (with a ``skin`` column for a skin-tone
            attribute), ``data/split.parquet``; needed by ``copy_paste`` only (its donor
            pool).
        data_root: the synthetic dataset (params ``data.root``); needed by ``render`` only.

    Returns:
        ``RenderBackend`` | ``CopyPasteBackend`` | ``SDInpaintBackend`` |
        ``InstructPix2PixBackend`` | a plug-in's backend.

    Raises:
        ValueError: unknown backend, or a backend's input missing.
    """
    from biaslab import registry
    name = p.get("backend", "copy_paste")
    if name not in registry.BACKENDS:
        raise ValueError(f"unknown generate.backend {name!r}; known: "
                         f"{', '.join(registry.BACKENDS.names())}")
    return registry.BACKENDS.load(name)(p, persons=persons, images=images, labels=labels,
                                        split=split, data_root=data_root)


def _file_digest(path: str | os.PathLike) -> str:
    try:
        return hashlib.blake2b(Path(path).read_bytes(), digest_size=12).hexdigest()
    except FileNotFoundError:
        return "missing"


def shard_fingerprint(items: pd.DataFrame, backend_fp: dict, settings: dict) -> str:
    """sha256 over the settings, the backend fingerprint and the shard's work items (ids,
    image/mask paths, source-image and mask bytes, boxes, prompts). A source image rewritten
    in place changes its shard's fingerprint; donor image bytes enter through
    ``backend_fp`` (``donor_images_fingerprint``)."""
    rows = []
    for it in items.to_dict("records"):
        rows.append({k: (v if not isinstance(v, np.ndarray) else v.tolist())
                     for k, v in it.items()} | {"mask_digest": _file_digest(it["mask_path"]),
                                                "image_digest": _file_digest(it["path"])})
    blob = json.dumps({"version": FORMAT_VERSION, "settings": settings, "backend": backend_fp,
                       "items": rows}, sort_keys=True, default=_json_default)
    return hashlib.sha256(blob.encode()).hexdigest()


def code_digest(backend) -> str:
    """sha256 (hex) of the source of this module, the backends it imports and the module that
    defines ``backend``'s class (a plug-in backend outside this package included), with every
    module of their packages they import (``biaslab.runtime.provenance.source_digest``). Part of every
    shard fingerprint, so an edited backend or generate loop recomputes the shards with no
    version constant to bump."""
    from biaslab.runtime.provenance import source_digest
    try:
        return source_digest(__name__, type(backend).__module__)
    except ValueError:      # a class defined in __main__ or a notebook: no source file
        return source_digest(__name__) + ":" + type(backend).__qualname__


def donor_images_fingerprint(backend) -> dict:
    """``{"donor_images": sha256}`` over the bytes of every donor image of a backend that has a
    ``donors`` table with a ``path`` column (copy_paste), else ``{}``. Merged into the backend
    fingerprint, so a donor image rewritten in place invalidates the shards. Conservative: a
    shard's donors are only known after generating it, so a changed donor re-runs every shard.
    """
    donors = getattr(backend, "donors", None)
    if not isinstance(donors, pd.DataFrame) or "path" not in donors.columns:
        return {}
    paths = sorted(set(donors["path"].astype(str)))
    blob = json.dumps([[p, _file_digest(p)] for p in paths])
    return {"donor_images": hashlib.sha256(blob.encode()).hexdigest()}


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def shard_path(out_dir: str | os.PathLike, shard: int) -> Path:
    return Path(out_dir) / "shards" / f"shard-{shard:03d}.parquet"


def shard_done(path: Path, fingerprint: str) -> bool:
    """True when ``path`` exists, carries ``fingerprint`` and all its images exist."""
    if not path.exists():
        return False
    try:
        meta = pq.read_schema(path).metadata or {}
        if meta.get(_FP_KEY, b"").decode() != fingerprint:
            return False
        paths = pq.read_table(path, columns=["path"]).column("path").to_pylist()
    except Exception:
        return False
    return all(os.path.exists(p) for p in paths)


def _write_shard(path: Path, df: pd.DataFrame, fingerprint: str) -> None:
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           _FP_KEY: fingerprint.encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def _empty_candidates() -> pd.DataFrame:
    return pd.DataFrame({"image_id": pd.Series(dtype="int64"), "group": pd.Series(dtype=str),
                         "j": pd.Series(dtype="int64"), "seed": pd.Series(dtype="int64"),
                         "guidance_scale": pd.Series(dtype="float64"),
                         "prompt": pd.Series(dtype=str), "path": pd.Series(dtype=str),
                         "donor_ann_id": pd.Series(dtype="Int64"),
                         "donor_ann_ids": pd.Series(dtype=object),
                         "backend": pd.Series(dtype=str), "shard": pd.Series(dtype="int64")})


def _to_frame(rows: list[dict]) -> pd.DataFrame:
    if not rows:
        return _empty_candidates()
    df = pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)
    return df.astype({"image_id": "int64", "j": "int64", "seed": "int64",
                      "guidance_scale": "float64", "donor_ann_id": "Int64", "shard": "int64"})


@dataclass(frozen=True)
class ShardJob:
    """One shard of work (picklable): its index, work items (``build_work`` rows as dicts) and
    fingerprint."""
    shard: int
    items: list
    fingerprint: str


@dataclass(frozen=True)
class ShardSpec:
    """Settings shared by every shard (picklable)."""
    img_dir: str
    fmt: str
    m: int
    seed: int
    guidance_scales: list
    groups: list
    jpeg_quality: int
    callback: Callable | None = None


@dataclass
class ShardResult:
    """What ``compute_shard`` returns: the encoded candidate files ``[(path, bytes)]``, the
    shard's candidate table and how many source images the backend verified (render)."""
    files: list
    table: pd.DataFrame
    verified: int = 0


def _same(x):
    return x


def executor_is_remote(executor, n_shards: int | None = None) -> bool:
    """True when ``run_shards`` computes the shards outside this process (Ray, or forked local
    workers): the backend's counters must then be merged from the results."""
    from biaslab.runtime.executor import in_process
    return not in_process(executor, n_shards)


def _encode_candidate(arr: np.ndarray, fmt: str, quality: int) -> bytes:
    """The bytes of a candidate file (PNG, or JPEG at ``quality``)."""
    buf = io.BytesIO()
    if fmt == "png":
        Image.fromarray(arr).save(buf, format="PNG")
    else:
        Image.fromarray(arr).save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


def _write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path, suffix=path.suffix) as tmp, open(tmp, "wb") as f:
        f.write(data)


def compute_shard(backend, job: ShardJob, spec: ShardSpec) -> ShardResult:
    """Generate every candidate of one shard (``generate_candidates``' unit of work and of
    resumption): pure -- reads the sources and masks, writes nothing, returns the encoded
    files and the table, so the driver writes them whichever executor ran this
    (``biaslab.runtime.executor``). ``spec.callback(shard, image_id, group, j)`` runs where the shard
    is computed (a Ray worker for executor ray)."""
    s, rows, files = job.shard, [], []
    v0 = getattr(backend, "verified", 0)
    for it in job.items:
        image = load_image(it["path"])
        mask = load_mask(it["mask_path"])
        if mask.shape != image.shape[:2]:
            raise InputError(it["mask_path"], f"mask shape {mask.shape} != image shape "
                                              f"{image.shape[:2]}")
        for g in spec.groups:
            prompt = it[f"prompt_{g}"]
            js = list(range(spec.m))
            seeds = [candidate_seed(it["image_id"], g, j, spec.seed) for j in js]
            scales = [guidance_scale_for(j, spec.guidance_scales) for j in js]
            if spec.callback is not None:
                for j in js:
                    spec.callback(s, int(it["image_id"]), g, j)
            outs = backend.generate(it, image, mask, g, prompt, js, seeds, scales)
            for j, sd, sc, (arr, donors) in zip(js, seeds, scales, outs):
                if arr.shape != image.shape:
                    raise RuntimeError(f"backend {backend.name} returned shape "
                                       f"{arr.shape} for image of shape {image.shape}")
                p = os.path.join(spec.img_dir, f"{it['image_id']}_{g}_{j}.{spec.fmt}")
                files.append((p, _encode_candidate(arr, spec.fmt, spec.jpeg_quality)))
                rows.append({"image_id": int(it["image_id"]), "group": g, "j": j,
                             "seed": sd, "guidance_scale": sc, "prompt": prompt,
                             "path": p,
                             "donor_ann_id": donors[0] if donors else None,
                             "donor_ann_ids": list(donors) if donors else None,
                             "backend": backend.name, "shard": s})
    return ShardResult(files, _to_frame(rows), int(getattr(backend, "verified", 0) - v0))


def generate_candidates(work: pd.DataFrame, backend, out_dir: str | os.PathLike, *, m: int,
                        guidance_scales: Sequence[float], seed: int, shards: int,
                        groups: Sequence[str] = GROUPS, jpeg_quality: int = 95,
                        callback: Callable[[int, int, str, int], None] | None = None,
                        progress: bool = True, executor: dict | None = None
                        ) -> tuple[pd.DataFrame, dict]:
    """Generate m candidates per (image, group) shard by shard (paper 000 Eq. 1).

    Args:
        work: ``build_work`` output (one row per image, ``shard`` column computed with the same
            ``shards``).
        backend: a backend object (module docstring).
        out_dir: output directory: images go to ``<out_dir>/images/<image_id>_<group>_<j>.jpg``
            (``.png`` for a backend whose ``image_format`` is ``"png"``)
            (the ``path`` column joins ``out_dir`` as given, so relative stays relative),
            shard tables to ``<out_dir>/shards/``.
        m: candidates per (image, group).
        guidance_scales: cycled over j (``guidance_scale_for``).
        seed: base seed of ``candidate_seed``.
        shards: number of shards.
        callback: called as ``callback(shard, image_id, group, j)`` before each candidate is
            generated (progress hooks; an exception aborts the run like a crash would). With
            executor ray it runs in the worker (it must be picklable).
        executor: params ``executor`` (``biaslab.runtime.executor``; None = local): where the shards
            are computed. The files written do not depend on it: workers return encoded
            images, this process writes them and each shard's table as its result arrives.

    Returns:
        ``(candidates, stats)``: candidates with ``CANDIDATE_COLUMNS`` sorted by (image_id,
        group, j); stats: shards_total, shards_computed, shards_skipped, candidates,
        candidates_computed, seconds_computing, candidates_per_s (None when nothing was
        computed), stale_files_removed.
    """
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    if len(work) and not work["shard"].between(0, shards - 1).all():
        raise ValueError(f"work has shard indices outside 0..{shards - 1}: build_work() was "
                         f"called with another shard count")
    out_dir = Path(out_dir)
    img_dir = os.path.join(str(out_dir), "images")
    settings = {"m": int(m), "guidance_scales": [float(s) for s in guidance_scales],
                "seed": int(seed), "shards": int(shards), "groups": list(groups),
                "jpeg_quality": int(jpeg_quality), "out_dir": str(out_dir)}
    bfp = {**backend.fingerprint(), **donor_images_fingerprint(backend),
           "code": code_digest(backend)}
    fmt = getattr(backend, "image_format", "jpg")
    if fmt not in ("jpg", "png"):
        raise ValueError(f"backend {backend.name} has image_format {fmt!r} (jpg | png)")
    plan = []
    for s in range(shards):
        items = work[work["shard"] == s]
        fp = shard_fingerprint(items, bfp, settings)
        plan.append((s, items, fp, shard_done(shard_path(out_dir, s), fp)))
    todo = sum(len(items) for _, items, _, done in plan if not done) * len(groups) * m
    stats = {"shards_total": int(shards), "shards_computed": 0, "shards_skipped": 0,
             "candidates_computed": 0, "seconds_computing": 0.0}
    frames = []
    for s, items, fp, done in plan:
        if done:
            stats["shards_skipped"] += 1
            frames.append(pd.read_parquet(shard_path(out_dir, s)))
    jobs = [ShardJob(s, items.to_dict("records"), fp) for s, items, fp, done in plan
            if not done]
    spec = ShardSpec(img_dir=img_dir, fmt=fmt, m=int(m), seed=int(seed),
                     guidance_scales=[float(x) for x in guidance_scales], groups=list(groups),
                     jpeg_quality=int(jpeg_quality), callback=callback)
    bar = tqdm(total=todo, desc=f"generate ({backend.name})", disable=not progress,
               unit="cand")
    try:
        t0 = time.perf_counter()
        # the local executor runs ``compute_shard`` here with this backend (its lazy model
        # loads once); Ray pickles the backend to each worker (init) and sends the results
        # back: the files are written here, by the driver, whatever computed them
        results = run_shards(partial(compute_shard, spec=spec), jobs, executor,
                             init=partial(_same, backend))
        for job, res in zip(jobs, results):
            for p, data in res.files:
                _write_bytes(Path(p), data)
            if (res.verified and hasattr(backend, "verified")
                    and executor_is_remote(executor, len(jobs))):
                backend.verified += res.verified
            sp = shard_path(out_dir, job.shard)
            _write_shard(sp, res.table, job.fingerprint)
            frames.append(pd.read_parquet(sp))
            stats["shards_computed"] += 1
            stats["candidates_computed"] += len(res.table)
            stats["seconds_computing"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            bar.update(len(res.table))
    finally:
        bar.close()
    frames = [f for f in frames if len(f)]
    table = (pd.concat(frames, ignore_index=True) if frames else _empty_candidates())
    table = table.sort_values(["image_id", "group", "j"], ignore_index=True)
    stats["candidates"] = int(len(table))
    stats["seconds_computing"] = round(stats["seconds_computing"], 3)
    stats["candidates_per_s"] = (round(stats["candidates_computed"] /
                                       stats["seconds_computing"], 3)
                                 if stats["candidates_computed"] else None)
    stats["stale_files_removed"] = _remove_stale(out_dir, set(table["path"]), shards)
    return table, stats


def _remove_stale(out_dir: Path, keep_paths: set[str], shards: int) -> int:
    """Delete images no candidate refers to and shard files of indices >= shards."""
    removed = 0
    keep = {os.path.realpath(p) for p in keep_paths}
    img_dir = out_dir / "images"
    if img_dir.is_dir():
        for f in img_dir.iterdir():
            if f.is_file() and os.path.realpath(f) not in keep:
                f.unlink()
                removed += 1
    sh_dir = out_dir / "shards"
    if sh_dir.is_dir():
        valid = {shard_path(out_dir, s).name for s in range(shards)}
        for f in sh_dir.iterdir():
            if f.is_file() and f.name not in valid:
                f.unlink()
                removed += 1
    return removed
