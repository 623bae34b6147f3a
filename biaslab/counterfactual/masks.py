"""Persons to inpaint and their masks omega (Hirota et al., "Resampled Datasets Are Not Enough",
EMNLP 2024 -- paper 000 -- sec. 2.2 and appendix A.1).

Person selection (appendix A.1, following Zhao et al. 2021 and Misra et al. 2016): the person
with the largest *bounding box* is inpainted; if the second largest person's box is larger than
55,000 px, it is inpainted too. Only these two are considered (the paper names no third).

Crowd regions are not persons: a box-only annotation that contains the box centres of >= 3
other persons (``crowd_like``) is skipped before selection. COCO flags crowds with ``iscrowd``,
which the prepared tables do not carry (and coco-mini's YOLO-derived boxes lost); in the
coco-mini train split the rule skips about 70 such boxes, most of which would otherwise have
been the "largest person" of their image (a whole audience wiped out and replaced by one
pasted person). ``crowd_min_inside=None`` restores the plain paper rule.

The 55,000 px rule is stated at original COCO resolution (long side 640 px for nearly all COCO
images). Tables from ``prepare`` hold boxes in pixels of the *stored* image, which for coco-mini
is downscaled to a long side <= 384 px with original sizes not stored. We therefore compare box
areas with ``threshold * scale`` where ``scale = (min(L, R) / R) ** 2``, ``L`` the stored long
side and ``R = reference_long_side`` (a param, 640 = COCO's usual long side). On full COCO
(``L = R = 640``) the factor is 1; ``reference_long_side=None`` disables scaling. Known
approximation: the few coco-mini images whose stored long side is below 384 px were probably not
downscaled at all (their originals were that small) but still get a factor below 1, i.e. a
lower threshold (more second persons inpainted); 14 of 3,004 coco-mini images are concerned.

Mask omega (``person_mask``), per selected person, in this order of preference:

1. ``polygon``: the COCO polygon(s), rasterised with pycocotools (``frPyObjects`` + ``decode``);
2. ``keypoints``: a body silhouette drawn with OpenCV from the 17 COCO keypoints when they are
   useful (>= ``MIN_KEYPOINTS`` visible, >= 2 of them torso points): thick limb segments, a torso
   polygon (convex hull of shoulders and hips), a neck segment, a head and a hair disc, scaled by a
   body unit (shoulder/hip width, torso length, box height), clipped to the person box;
3. ``box``: the bounding box (``floor(x) .. ceil(x + w)``).

``shape="sam"`` (paper 000 app. A.1's OpenImages masks, where MIAP gives boxes only)
replaces 1-3 by Segment Anything prompted with each selected person's box, cut to the box
(``biaslab.counterfactual.sam``; the paper tier, weights from ``masks.sam_model``).

``shape="box"`` (param ``masks.shape``) skips 1-2 and masks every selected
person's bounding box, paper 000's COCO wording ("the person's bounding box"): a polygon
tighter than the person leaves parts of the original (hair, a sleeve, a bag) and with them its
gender cue beside the pasted donor, a box leaves none but erases more context.

The union over the selected persons is dilated by a Euclidean disc of ``dilate_px`` pixels
(``dilate``). Masks are ``uint8`` arrays of shape ``(height, width)`` with values 0/1, saved as
0/255 single-channel PNGs.
"""
from __future__ import annotations

import json
import os
import warnings
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
from PIL import Image
from pycocotools import mask as mask_utils
from tqdm import tqdm

from biaslab.runtime.io import InputError, atomic_path

#: paper 000 appendix A.1: the second largest person is inpainted when its box exceeds this.
AREA_THRESHOLD_PX = 55_000
#: COCO keypoint order (17).
KEYPOINT_NAMES = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
                  "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
                  "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle",
                  "right_ankle")
#: a silhouette needs at least this many visible keypoints ...
MIN_KEYPOINTS = 5
#: ... of which at least 2 torso points (shoulders, hips).
_TORSO = (5, 6, 11, 12)
_FACE = (0, 1, 2, 3, 4)
_ARMS = ((5, 7), (7, 9), (6, 8), (8, 10))
_LEGS = ((11, 13), (13, 15), (12, 14), (14, 16))
_TORSO_EDGES = ((5, 6), (11, 12), (5, 11), (6, 12))
MASK_SOURCES = ("polygon", "keypoints", "box")
#: ``masks.shape`` -> the mask sources tried, in order (``person_mask``)
MASK_SHAPES = {"polygon": MASK_SOURCES, "box": ("box",),
               # SAM inside each box (a segmenter, biaslab.counterfactual.sam); box on failure
               "sam": ("box",)}


def area_scale(width: float, height: float, reference_long_side: float | None) -> float:
    """Factor that converts a pixel area at original resolution into stored-image pixels:
    ``(min(max(width, height), R) / R) ** 2`` with ``R = reference_long_side``; 1.0 when R is
    None. Never above 1 (images are never upscaled)."""
    if reference_long_side is None:
        return 1.0
    if reference_long_side <= 0:
        raise ValueError(f"reference_long_side must be positive, got {reference_long_side}")
    long_side = max(float(width), float(height))
    return (min(long_side, float(reference_long_side)) / float(reference_long_side)) ** 2


def has_polygon(polygons) -> bool:
    """True when a ``polygon`` cell (JSON string or list) holds a polygon with >= 3 points."""
    if isinstance(polygons, str):
        try:
            polygons = json.loads(polygons) if polygons else []
        except ValueError:
            return False
    return any(isinstance(q, (list, tuple)) and len(q) >= 6 for q in (polygons or []))


def crowd_like(persons: pd.DataFrame, min_inside: int | None = 3) -> pd.Series:
    """Boolean per person of ONE image: True for a box-only annotation (no polygon, no
    keypoints) whose box contains the box centres of at least ``min_inside`` other persons.

    COCO marks crowd regions with ``iscrowd = 1`` (RLE segmentation, no keypoints); the
    prepared tables do not carry that flag and coco-mini's YOLO-derived person boxes lost it,
    so a crowd region shows up as one large box-only "person" around many others. A crowd is
    not a person, so ``select_persons`` skips these. ``min_inside=None`` disables the rule.
    """
    if min_inside is None or persons.empty:
        return pd.Series(False, index=persons.index)
    b = persons[["x", "y", "w", "h"]].to_numpy(float)
    cx, cy = b[:, 0] + b[:, 2] / 2, b[:, 1] + b[:, 3] / 2
    inside = ((cx[None] >= b[:, [0]]) & (cx[None] <= b[:, [0]] + b[:, [2]])
              & (cy[None] >= b[:, [1]]) & (cy[None] <= b[:, [1]] + b[:, [3]]))
    np.fill_diagonal(inside, False)
    poly = persons["polygon"] if "polygon" in persons else pd.Series("[]", persons.index)
    kps = persons["keypoints"] if "keypoints" in persons else pd.Series(None, persons.index)
    box_only = ~poly.map(has_polygon) & kps.isna()
    return pd.Series((inside.sum(axis=1) >= int(min_inside)) & box_only.to_numpy(),
                     index=persons.index)


def select_persons(persons: pd.DataFrame, area_threshold_px: float = AREA_THRESHOLD_PX,
                   scale: float = 1.0, crowd_min_inside: int | None = None) -> pd.DataFrame:
    """Persons of ONE image to inpaint (paper 000 appendix A.1).

    Args:
        persons: rows of ``persons.parquet`` for one image (columns ann_id, w, h at least).
        area_threshold_px: threshold on the second largest box area at original resolution.
        scale: ``area_scale(...)`` of the image; the threshold applied is
            ``area_threshold_px * scale`` (stored-image pixels).
        crowd_min_inside: drop crowd-like boxes first (``crowd_like``); None keeps all.

    Returns:
        0, 1 or 2 rows, largest box (``w * h``) first; ties broken by ann_id.
    """
    if persons.empty:
        return persons.iloc[:0]
    if crowd_min_inside is not None:
        persons = persons[~crowd_like(persons, crowd_min_inside)]
    p = persons.assign(_box_area=persons["w"].astype(float) * persons["h"].astype(float))
    p = p.sort_values(["_box_area", "ann_id"], ascending=[False, True], kind="stable")
    keep = 1
    if len(p) > 1 and p["_box_area"].iloc[1] > area_threshold_px * scale:
        keep = 2
    return p.iloc[:keep].drop(columns="_box_area")


def box_mask(box, height: int, width: int) -> np.ndarray:
    """0/1 mask of a box ``(x, y, w, h)``: pixels ``floor(x) .. ceil(x + w) - 1`` (same rows
    for y), clipped to the image."""
    x, y, w, h = (float(v) for v in box)
    out = np.zeros((height, width), np.uint8)
    x0, y0 = max(int(np.floor(x)), 0), max(int(np.floor(y)), 0)
    x1, y1 = min(int(np.ceil(x + w)), width), min(int(np.ceil(y + h)), height)
    if x1 > x0 and y1 > y0:
        out[y0:y1, x0:x1] = 1
    return out


def polygon_mask(polygons, height: int, width: int) -> np.ndarray | None:
    """0/1 mask of COCO polygons (list of flat ``[x1, y1, x2, y2, ...]`` lists, or their JSON
    string) rasterised by pycocotools; None when there is no polygon with >= 3 points."""
    if isinstance(polygons, str):
        polygons = json.loads(polygons) if polygons else []
    polys = [[float(v) for v in p] for p in (polygons or [])
             if isinstance(p, (list, tuple)) and len(p) >= 6]
    if not polys:
        return None
    rles = mask_utils.frPyObjects(polys, int(height), int(width))
    with warnings.catch_warnings():  # pycocotools 2.0.x vs numpy 2 copy-keyword notice
        warnings.simplefilter("ignore", DeprecationWarning)
        return mask_utils.decode(mask_utils.merge(rles)).astype(np.uint8)


def visible_keypoints(keypoints) -> dict[int, tuple[float, float]]:
    """COCO keypoint index -> (x, y) of the labelled (v > 0) keypoints; {} unless 51 finite
    numbers are given."""
    if keypoints is None:
        return {}
    kp = np.asarray(keypoints, float).reshape(-1)
    if kp.size != 51 or not np.isfinite(kp).all():
        return {}
    kp = kp.reshape(17, 3)
    return {i: (float(x), float(y)) for i, (x, y, v) in enumerate(kp) if v > 0}


def body_unit(keypoints, box) -> float:
    """Body unit ``u`` in pixels (the width unit of the keypoint silhouette): max of shoulder
    width, hip width, half the shoulder-hip distance and 0.12 * box height (>= 2 px)."""
    vis = visible_keypoints(keypoints)
    h = float(box[3])

    def dist(a, b):
        return float(np.hypot(vis[a][0] - vis[b][0], vis[a][1] - vis[b][1]))

    cands = [0.12 * h]
    if 5 in vis and 6 in vis:
        cands.append(dist(5, 6))
    if 11 in vis and 12 in vis:
        cands.append(dist(11, 12))
    for s, hp in ((5, 11), (6, 12)):
        if s in vis and hp in vis:
            cands.append(0.5 * dist(s, hp))
    return max(max(cands), 2.0)


def keypoints_useful(keypoints) -> bool:
    """True when a silhouette can be drawn: >= MIN_KEYPOINTS visible, >= 2 torso points."""
    vis = visible_keypoints(keypoints)
    return len(vis) >= MIN_KEYPOINTS and sum(i in vis for i in _TORSO) >= 2


def keypoint_silhouette(keypoints, box, height: int, width: int,
                        thickness: float = 1.0) -> np.ndarray | None:
    """0/1 body silhouette drawn from 17 COCO keypoints (x, y, v triplets, v > 0 = labelled).

    Body unit ``u`` = max(shoulder width, hip width, 0.5 * torso length, 0.12 * box height).
    Arms are segments of ``0.45 u`` width, legs ``0.55 u``, the torso is the filled convex hull
    of the visible shoulders/hips plus ``0.5 u`` wide edges, the neck a ``0.5 u`` segment, the
    head a disc of radius ``r = max(0.5 u, 0.75 * face-keypoint spread)`` around the face
    keypoints (or ``0.8 u`` above the shoulders when no face keypoint is visible) plus a hair
    disc of radius ``0.9 r`` shifted ``0.5 r`` away from the shoulders. ``thickness`` scales
    all widths. The result is clipped to the person box.

    Returns None when ``keypoints_useful`` is False.
    """
    if not keypoints_useful(keypoints):
        return None
    vis = visible_keypoints(keypoints)
    x, y, w, h = (float(v) for v in box)
    u = body_unit(keypoints, box) * thickness
    # draw at 4x sub-pixel precision (shift=2)
    sh, f = 2, 4.0
    out = np.zeros((height, width), np.uint8)

    def pt(i):
        return (int(round(vis[i][0] * f)), int(round(vis[i][1] * f)))

    def seg(a, b, width_px):
        cv2.line(out, a, b, 1, thickness=max(int(round(width_px)), 1), lineType=cv2.LINE_8,
                 shift=sh)

    torso = [pt(i) for i in _TORSO if i in vis]
    if len(torso) >= 3:
        hull = cv2.convexHull(np.array(torso, np.int32))
        cv2.fillConvexPoly(out, hull, 1, lineType=cv2.LINE_8, shift=sh)
    for a, b in _TORSO_EDGES:
        if a in vis and b in vis:
            seg(pt(a), pt(b), 0.5 * u)
    for a, b in _ARMS:
        if a in vis and b in vis:
            seg(pt(a), pt(b), 0.45 * u)
    for a, b in _LEGS:
        if a in vis and b in vis:
            seg(pt(a), pt(b), 0.55 * u)
    for i in (*_TORSO, 7, 8, 9, 10, 13, 14, 15, 16):  # joints as discs (rounded limbs)
        if i in vis:
            cv2.circle(out, pt(i), int(round(0.25 * u * f)), 1, -1, shift=sh)
    face = [vis[i] for i in _FACE if i in vis]
    shoulders = [vis[i] for i in (5, 6) if i in vis]
    sc = np.mean(shoulders, axis=0) if shoulders else None
    if face:
        fc = np.mean(face, axis=0)
        spread = max((np.hypot(*(np.array(a) - np.array(b))) for a in face for b in face),
                     default=0.0)
        r = max(0.5 * u, 0.75 * spread)
    elif sc is not None:
        fc = np.array([sc[0], sc[1] - 0.8 * u])
        r = 0.5 * u
    else:
        fc, r = None, 0.0
    if fc is not None:
        center = (int(round(fc[0] * f)), int(round(fc[1] * f)))
        cv2.circle(out, center, int(round(r * f)), 1, -1, shift=sh)
        if sc is not None:
            seg(center, (int(round(sc[0] * f)), int(round(sc[1] * f))), 0.5 * u)
            # hair: a second disc half a radius further from the shoulders
            d = np.asarray(fc) - sc
            d = d / max(float(np.hypot(*d)), 1e-6)
            top = np.asarray(fc) + d * 0.5 * r
            cv2.circle(out, (int(round(top[0] * f)), int(round(top[1] * f))),
                       int(round(0.9 * r * f)), 1, -1, shift=sh)
    return out * box_mask(box, height, width)


def dilate(mask: np.ndarray, px: int) -> np.ndarray:
    """Dilate a 0/1 mask by a Euclidean disc of radius ``px`` (a pixel joins the mask when its
    centre is within ``px`` of a mask pixel's centre). ``px <= 0`` returns a copy."""
    if px <= 0:
        return mask.copy()
    r = int(px)
    yy, xx = np.mgrid[-r:r + 1, -r:r + 1]
    kernel = ((xx ** 2 + yy ** 2) <= r * r).astype(np.uint8)
    return cv2.dilate(mask.astype(np.uint8), kernel)


def person_mask(person, height: int, width: int,
                sources: tuple[str, ...] = MASK_SOURCES,
                thickness: float = 1.0) -> tuple[np.ndarray, str]:
    """Undilated 0/1 mask of one person and its source (``polygon``/``keypoints``/``box``).

    Args:
        person: a ``persons.parquet`` row (mapping with x, y, w, h, polygon, keypoints).
        height, width: image size in pixels.
        sources: allowed sources in order of preference (``("polygon", "keypoints")`` for
            donors that must be cut out precisely).
        thickness: keypoint silhouette width factor.

    Returns:
        ``(mask, source)``; ``(None, None)`` is never returned when ``box`` is allowed. When
        no allowed source applies, returns ``(None, None)``.
    """
    box = (person["x"], person["y"], person["w"], person["h"])
    for src in sources:
        if src == "polygon":
            m = polygon_mask(person.get("polygon"), height, width)
        elif src == "keypoints":
            kp = person.get("keypoints")
            m = None if kp is None else keypoint_silhouette(kp, box, height, width, thickness)
        elif src == "box":
            m = box_mask(box, height, width)
        else:
            raise ValueError(f"unknown mask source {src!r}; known: {MASK_SOURCES}")
        if m is not None and m.any():
            return m, src
    return None, None


def save_mask(path: str | os.PathLike, mask: np.ndarray) -> None:
    """Write a 0/1 mask as a 0/255 single-channel PNG, atomically."""
    with atomic_path(path, suffix=".png") as tmp:
        Image.fromarray((mask > 0).astype(np.uint8) * 255, mode="L").save(tmp, format="PNG")


def load_mask(path: str | os.PathLike) -> np.ndarray:
    """Read a mask PNG written by ``save_mask`` as a 0/1 uint8 array.

    Raises:
        InputError: the file is missing or unreadable.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, "mask file not found (did the masks stage run?)")
    try:
        return (np.asarray(Image.open(path).convert("L")) > 127).astype(np.uint8)
    except Exception as e:
        raise InputError(path, f"not a readable image ({e})") from e


MASKS_COLUMNS = ["image_id", "ann_ids", "gender", "mask_source", "mask_sources", "mask_path",
                 "area_fraction", "width", "height", "threshold_px"]


def build_masks(images: pd.DataFrame, persons: pd.DataFrame, image_labels: pd.DataFrame,
                split: pd.DataFrame | None, png_dir: str | os.PathLike, *,
                splits: list[str] | tuple[str, ...] | None = ("train",),
                area_threshold_px: float = AREA_THRESHOLD_PX,
                reference_long_side: float | None = 640, dilate_px: int = 0,
                crowd_min_inside: int | None = 3, shape: str = "polygon",
                segmenter=None, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Select persons and write one mask PNG per image (``<png_dir>/<image_id>.png``).

    Args:
        images: ``data/prepared/images.parquet`` (image_id, width, height).
        persons: ``data/prepared/persons.parquet``.
        image_labels: ``data/labels/images.parquet`` (image_id, gender).
        split: ``data/split.parquet`` (image_id, split) or None for all images.
        png_dir: directory for the mask PNGs (the ``mask_path`` column is
            ``os.path.join(png_dir, f"{image_id}.png")`` as given, so relative stays relative).
        splits: splits to mask (None = all).
        area_threshold_px, reference_long_side: the 55,000 px rule and its resolution scaling
            (module docstring).
        dilate_px: dilation radius in stored-image pixels.
        crowd_min_inside: crowd-region rule of ``crowd_like`` (None disables it).
        shape: ``polygon`` (polygon, else keypoint silhouette, else box), ``box`` (the
            bounding box of every selected person; module docstring) or ``sam`` (Segment
            Anything inside each selected person's box, paper 000's OpenImages masks; needs
            ``segmenter`` and an images ``path`` column; an empty SAM mask falls back to the
            box).
        segmenter: ``segmenter(image (H, W, 3) uint8, boxes [(x, y, w, h)]) -> [(H, W) 0/1
            masks]`` for ``shape="sam"`` (``biaslab.counterfactual.sam.SamBoxSegmenter``).

    Returns:
        ``(table, counts)``: table with ``MASKS_COLUMNS`` (ann_ids largest person first,
        mask_source = source of the largest person, mask_sources one per ann_id,
        area_fraction = dilated mask pixels / image pixels, threshold_px = scaled threshold
        applied), counts: images considered, masked, skipped by reason (``no_person``,
        ``gender_undefined``; an image with neither fails on ``no_person`` first), persons by
        mask source, images with a second person, crowd-like boxes skipped
        (``crowd_boxes_skipped``, over images of defined gender) and images whose persons are
        all crowd-like (``skipped_only_crowd``).

    Raises:
        InputError: a required column is missing.
        ValueError: ``shape`` is not one of ``MASK_SHAPES``, or ``sam`` without a segmenter.
    """
    if shape not in MASK_SHAPES:
        raise ValueError(f"masks.shape must be one of {sorted(MASK_SHAPES)}, got {shape!r}")
    if shape == "sam" and segmenter is None:
        raise ValueError("masks.shape sam needs a segmenter (masks.sam_model)")
    if shape == "sam" and "path" not in images.columns:
        raise InputError("images table", "masks.shape sam reads the pixels: needs a path column")
    for df, cols, name in ((images, ["image_id", "width", "height"], "images table"),
                           (persons, ["ann_id", "image_id", "x", "y", "w", "h"],
                            "persons table"),
                           (image_labels, ["image_id", "gender"], "image labels table")):
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise InputError(name, f"missing column(s) {missing}; has {list(df.columns)}")
    ims = images.sort_values("image_id")
    if split is not None and splits is not None:
        if not {"image_id", "split"} <= set(split.columns):
            raise InputError("split table", f"needs columns image_id, split; has "
                                            f"{list(split.columns)}")
        keep = set(split.loc[split["split"].isin(list(splits)), "image_id"])
        ims = ims[ims["image_id"].isin(keep)]
    gender = dict(zip(image_labels["image_id"], image_labels["gender"]))
    by_img = {iid: g for iid, g in persons.groupby("image_id", sort=False)}
    counts: Counter = Counter()
    rows = []
    for im in tqdm(ims.itertuples(index=False), total=len(ims), desc="masks",
                   disable=not progress):
        iid, w, h = int(im.image_id), int(im.width), int(im.height)
        counts["images_considered"] += 1
        ps = by_img.get(iid)
        if ps is None or ps.empty:
            counts["skipped_no_person"] += 1
            continue
        g = gender.get(iid, "undefined")
        if g not in ("female", "male"):
            counts["skipped_gender_undefined"] += 1
            continue
        scale = area_scale(w, h, reference_long_side)
        crowd = crowd_like(ps, crowd_min_inside)
        counts["crowd_boxes_skipped"] += int(crowd.sum())
        sel = select_persons(ps[~crowd], area_threshold_px, scale)
        if sel.empty:
            counts["skipped_only_crowd"] += 1
            continue
        union = np.zeros((h, w), np.uint8)
        srcs = []
        recs = sel.to_dict("records")
        seg = [None] * len(recs)
        if shape == "sam":
            from biaslab.runtime.io import load_image
            seg = segmenter(load_image(im.path), [(p["x"], p["y"], p["w"], p["h"])
                                                  for p in recs])
        for p, sm in zip(recs, seg):
            if sm is not None and sm.any():
                m, src = sm.astype(np.uint8), "sam"
            else:
                m, src = person_mask(p, h, w, sources=MASK_SHAPES[shape])
            union |= m
            srcs.append(src)
            counts[f"persons_{src}"] += 1
        union = dilate(union, dilate_px)
        path = os.path.join(str(png_dir), f"{iid}.png")
        save_mask(path, union)
        counts["masked"] += 1
        counts["second_person"] += int(len(sel) == 2)
        rows.append({"image_id": iid, "ann_ids": [int(a) for a in sel["ann_id"]],
                     "gender": g, "mask_source": srcs[0], "mask_sources": srcs,
                     "mask_path": path, "area_fraction": float(union.mean()),
                     "width": w, "height": h,
                     "threshold_px": float(area_threshold_px * scale)})
    table = pd.DataFrame(rows, columns=MASKS_COLUMNS)
    for k in ("images_considered", "masked", "skipped_no_person", "skipped_gender_undefined",
              "second_person", "crowd_boxes_skipped", "skipped_only_crowd",
              *(f"persons_{s}" for s in MASK_SOURCES + (("sam",) if shape == "sam" else ()))):
        counts.setdefault(k, 0)
    out = dict(sorted(counts.items()))
    out["mean_area_fraction"] = float(table["area_fraction"].mean()) if len(table) else None
    return table, out


def build_masks_from_params(mp: dict, images: pd.DataFrame, persons: pd.DataFrame,
                            image_labels: pd.DataFrame, split: pd.DataFrame | None,
                            png_dir: str | os.PathLike, *, splits=None, shape=None,
                            segmenter=None, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """:func:`build_masks` with the settings of params group ``masks`` (``area_threshold_px``,
    ``reference_long_side``, ``dilate_px``, ``crowd_min_inside``, ``shape``): one reading of
    the group for stages masks (the training split), contrast_set (the test split) and
    residue (each shape). ``splits`` / ``shape`` None = the group's own."""
    return build_masks(
        images, persons, image_labels, split, png_dir,
        splits=mp.get("splits") if splits is None else splits,
        area_threshold_px=float(mp["area_threshold_px"]),
        reference_long_side=mp.get("reference_long_side"), dilate_px=int(mp["dilate_px"]),
        crowd_min_inside=mp.get("crowd_min_inside", 3),
        shape=mp.get("shape", "polygon") if shape is None else shape, segmenter=segmenter,
        progress=progress)
