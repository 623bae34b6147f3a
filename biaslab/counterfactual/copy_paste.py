"""``copy_paste``: the CPU counterfactual backend that needs no generative weights.

For a masked image (mask omega from ``biaslab.counterfactual.masks``) and a target group g':

1. *remove* the selected person(s): classical inpainting of omega with OpenCV
   (``cv2.inpaint``, Telea's fast marching method or Navier-Stokes, radius ``inpaint_radius``);
   computed once per image and shared by all candidates;
2. *paste* a real person of group g' into each selected person's box: the donor is cut out of
   another image with its polygon (preferred) or a keypoint silhouette, scaled to fit the box
   keeping the donor's aspect ratio, horizontally centred and bottom-aligned, with the alpha
   feathered by a Gaussian blur of sigma ``feather_px``. The alpha is multiplied by omega, so
   pixels outside omega are never changed (paper 000 sec. 2.2: only the masked region is
   inpainted); donor parts that stick out of omega are cut.

Donor pool (``donor_pool``): persons of images whose caption-derived gender is g', from the
donor splits (train), with a polygon or a useful keypoint silhouette (a group none of whose
persons has an outline, as on OpenImages where MIAP gives boxes, takes box donors: the cut-out
is the whole box, background included); by default only
single-person images (the caption gender then refers to that person), widened to the largest
person of multi-person images for a group with fewer than ``min_pool`` single-person donors.
A donor never comes from the target image itself.

Donor choice for candidate j: the donors of g' are ranked by how well their cut-out, placed
as it would be pasted, covers the target mask inside the box (``shape_cost``: 1 - IoU on a
48 px grid, plus a small penalty for upscaling), plus ``extent_weight`` times the mismatch of
the visible body extents (``body_extent``: which of head ... ankles the keypoints show; a
portrait donor must not replace a full-body target), so a standing person replaces a standing
one and a portrait a portrait; among the ``top_k = max(3 m, 12)`` best, a seeded draw
(``numpy.random.default_rng([seed_j, k])``) picks the start, probing forward to the next unused
donor so that the m candidates use m different donors (repeats only when fewer exist). The guidance scale is meaningless here and only
recorded for schema parity with ``sd_inpaint``.

The pasted people are real people from other photos: the same consent questions as for any
use of COCO persons apply (see README "Limitations"). Seams are real, which the synthetic
artifact test (paper 000 sec. 3.3) must be able to detect.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

import cv2
import numpy as np
import pandas as pd

from biaslab.data.groups import group_parts
from biaslab.counterfactual.masks import visible_keypoints, has_polygon, keypoints_useful, person_mask
from biaslab.runtime.io import InputError

_METHODS = {"telea": cv2.INPAINT_TELEA, "ns": cv2.INPAINT_NS}
DONOR_COLUMNS = ["ann_id", "image_id", "gender", "path", "width", "height", "x", "y", "w", "h",
                 "polygon", "keypoints", "mask_source", "single_person", "group"]


def donor_group(group: str, source_gender: str | None) -> str:
    """The donor group that serves target group ``group``: the group itself when it names a
    gender (female, male, ``<gender>_<skin>``); for a skin tone alone, that tone within the
    source person's gender (``"dark"`` of a woman -> ``"female_dark"``), so a skin-tone
    counterfactual changes the skin tone, not the gender.

    Raises:
        ValueError: unknown group, or a skin tone with no source gender."""
    gender, skin = group_parts(group)
    if gender is not None:
        return group
    if source_gender not in ("female", "male"):
        raise ValueError(f"group {group!r} needs the source person's gender, got "
                         f"{source_gender!r}")
    return f"{source_gender}_{skin}"


def donor_pool(persons: pd.DataFrame, images: pd.DataFrame, image_labels: pd.DataFrame,
               split: pd.DataFrame | None = None, splits: Sequence[str] | None = ("train",),
               single_person: bool = True, min_pool: int = 1,
               attribute: str = "gender") -> pd.DataFrame:
    """Persons that can be cut out and pasted, labelled with their image's caption gender and
    their donor group (:func:`donor_group`).

    Args:
        persons: ``persons.parquet``; images: ``images.parquet`` (path, width, height);
        image_labels: ``labels/images.parquet`` (gender; for attribute ``skin`` /
            ``gender_skin`` also ``skin``: dark/light, e.g. the perceived ``bb_skin``; other
            values leave the person out); split: ``split.parquet`` or None.
        splits: donor splits (None = all).
        single_person: only persons of single-person images ...
        min_pool: ... unless a group then has fewer than ``min_pool`` donors: that group is
            widened to the largest maskable person of each multi-person image.
        attribute: ``gender``: donor groups female / male; ``skin`` or ``gender_skin``: the
            four ``<gender>_<skin>`` groups (a skin-tone target keeps the source's gender).

    Returns:
        ``DONOR_COLUMNS`` (mask_source ``polygon`` or ``keypoints``; ``box`` for a group with
        no outlined person), sorted by ann_id.
    """
    for df, cols, name in ((persons, ["ann_id", "image_id", "x", "y", "w", "h"], "persons"),
                           (images, ["image_id", "path", "width", "height"], "images"),
                           (image_labels, ["image_id", "gender"], "image labels")):
        miss = [c for c in cols if c not in df.columns]
        if miss:
            raise InputError(f"{name} table", f"missing column(s) {miss}")
    p = persons.copy()
    if "polygon" not in p.columns:
        p["polygon"] = "[]"
    if "keypoints" not in p.columns:
        p["keypoints"] = None
    n = p.groupby("image_id")["ann_id"].transform("size")
    p["single_person"] = n.to_numpy() == 1
    if attribute == "gender":
        p = p.merge(image_labels[["image_id", "gender"]], on="image_id", how="inner")
        p = p[p["gender"].isin(["female", "male"])]
        p["group"] = p["gender"]
        groups = ("female", "male")
    elif attribute in ("skin", "gender_skin"):
        if "skin" not in image_labels.columns:
            raise InputError("image labels", f"attribute {attribute}: no skin column (the "
                                             "donors' skin tone)")
        p = p.merge(image_labels[["image_id", "gender", "skin"]], on="image_id", how="inner")
        p = p[p["gender"].isin(["female", "male"]) & p["skin"].isin(["dark", "light"])]
        p["group"] = p["gender"] + "_" + p["skin"]
        p = p.drop(columns=["skin"])
        groups = tuple(f"{g}_{t}" for g in ("female", "male") for t in ("dark", "light"))
    else:
        raise ValueError(f"unknown attribute {attribute!r}")
    if split is not None and splits is not None:
        p = p[p["image_id"].isin(set(split.loc[split["split"].isin(list(splits)), "image_id"]))]
    p = p.merge(images[["image_id", "path", "width", "height"]], on="image_id", how="inner")
    poly = p["polygon"].map(has_polygon)
    kp = p["keypoints"].map(lambda k: k is not None and keypoints_useful(k))
    # box: a person with no outline (OpenImages' MIAP gives boxes only); used only for a group
    # with no outlined donor, and its cut-out carries the donor's background
    p["mask_source"] = np.where(poly, "polygon", np.where(kp, "keypoints", "box"))
    outlined = p[p["mask_source"] != "box"]
    p = pd.concat([outlined, p[(p["mask_source"] == "box") &
                             ~p["group"].isin(set(outlined["group"]))]])
    p = p.assign(_area=p["w"] * p["h"]).sort_values(["image_id", "_area", "ann_id"],
                                                     ascending=[True, False, True])
    largest = ~p["image_id"].duplicated()
    parts = []
    for g in groups:
        pg = p[p["group"] == g]
        sel = pg[pg["single_person"]] if single_person else pg
        if len(sel) < min_pool:
            sel = pg[pg["single_person"] | largest.loc[pg.index]]
        parts.append(sel)
    out = pd.concat(parts) if parts else p.iloc[:0]
    return out[DONOR_COLUMNS].sort_values("ann_id", ignore_index=True)


def _fit_geometry(cw: int, ch: int, bw: float, bh: float):
    """Scale and integer offsets that fit a (cw x ch) cut-out into a (bw x bh) box keeping its
    aspect ratio, centred horizontally and bottom-aligned."""
    s = min(bw / cw, bh / ch)
    nw, nh = max(int(round(cw * s)), 1), max(int(round(ch * s)), 1)
    return s, nw, nh, (bw - nw) / 2, bh - nh


def shape_cost(donor_alphas: Sequence[np.ndarray], donor_sizes: np.ndarray,
               target: np.ndarray, box_w: float, box_h: float,
               upscale_weight: float = 0.25) -> np.ndarray:
    """Fit of donors to one target (lower is better): ``1 - IoU`` between each donor's
    footprint, placed as ``paste`` would place it, and the target mask inside the box, plus
    ``upscale_weight * log(upscaling factor)`` when the donor must be enlarged.

    Args:
        donor_alphas: low-resolution 0/1 masks of the donors' cut-outs (any sizes).
        donor_sizes: (n, 2) full-resolution cut-out sizes (w, h), for the upscaling term.
        target: 0/1 target mask cropped to the box and resized to a grid (gh, gw).
        box_w, box_h: box size in image pixels.
    """
    gh, gw = target.shape
    t = target > 0
    cost = np.empty(len(donor_alphas))
    for i, a in enumerate(donor_alphas):
        _, nw, nh, ox, oy = _fit_geometry(a.shape[1], a.shape[0], gw, gh)
        foot = np.zeros((gh, gw), bool)
        x0, y0 = int(round(ox)), int(round(oy))
        r = cv2.resize(a.astype(np.uint8), (nw, nh), interpolation=cv2.INTER_NEAREST) > 0
        foot[y0:y0 + nh, x0:x0 + nw] = r[:gh - y0, :gw - x0]
        union = np.logical_or(foot, t).sum()
        cost[i] = 1.0 - (np.logical_and(foot, t).sum() / union if union else 0.0)
    sizes = np.asarray(donor_sizes, float).reshape(-1, 2)
    up = np.minimum(box_w / np.maximum(sizes[:, 0], 1), box_h / np.maximum(sizes[:, 1], 1))
    return cost + upscale_weight * np.log(np.maximum(up, 1.0))


#: COCO keypoint -> body level: head (nose, eyes, ears) 0, shoulders 1, hips 2, knees 3, ankles
#: 4. Elbows and wrists move with the arms and say little about how much of the body is shown.
BODY_LEVELS = {0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 1, 6: 1, 11: 2, 12: 2, 13: 3, 14: 3, 15: 4,
               16: 4}


def body_extent(keypoints) -> tuple[int, int] | None:
    """(top, bottom) body level (``BODY_LEVELS``: 0 head ... 4 ankles) among the labelled
    (v > 0) COCO keypoints of a person (51 numbers, x y v triplets); None without any.
    A full-body person is (0, 4), a head-and-shoulders portrait (0, 1)."""
    vis = visible_keypoints(keypoints)
    levels = [lv for i, lv in BODY_LEVELS.items() if i in vis]
    return (min(levels), max(levels)) if levels else None


def extent_cost(target: tuple[int, int] | None, donors: Sequence[tuple[int, int] | None]
                ) -> np.ndarray:
    """Body-extent mismatch in [0, 1]: (|top_t - top_d| + |bottom_t - bottom_d|) / 8, 0 when
    either extent is unknown (no keypoints)."""
    out = np.zeros(len(donors))
    if target is None:
        return out
    for i, d in enumerate(donors):
        if d is not None:
            out[i] = (abs(target[0] - d[0]) + abs(target[1] - d[1])) / 8.0
    return out


def extent_agreement(work: pd.DataFrame, candidates: pd.DataFrame,
                     donors: pd.DataFrame) -> dict:
    """How well pasted donors match their targets' visible body extent, over every (candidate,
    box) pair where both have keypoints: ``n`` pairs, ``exact`` (fraction with the same
    (top, bottom) levels) and ``off_by_2_or_more`` (|dtop| + |dbottom| >= 2). Inputs: the work
    table (``image_id``, ``keypoints`` per box), the candidate table (``image_id``,
    ``donor_ann_ids`` per box) and the donor pool (``ann_id``, ``keypoints``)."""
    target = {int(i): [body_extent(k) for k in kps]
              for i, kps in zip(work["image_id"], work["keypoints"])}
    donor = {int(a): body_extent(k) for a, k in zip(donors["ann_id"], donors["keypoints"])}
    gaps = []
    for iid, ids in zip(candidates["image_id"], candidates["donor_ann_ids"]):
        for t, a in zip(target.get(int(iid), []), list(ids)):
            d = donor.get(int(a))
            if t is not None and d is not None:
                gaps.append(abs(t[0] - d[0]) + abs(t[1] - d[1]))
    g = np.asarray(gaps)
    return {"n": int(len(g)), "exact": float((g == 0).mean()) if len(g) else None,
            "off_by_2_or_more": float((g >= 2).mean()) if len(g) else None}


def feather_alpha(alpha: np.ndarray, feather_px: float) -> np.ndarray:
    """Soft alpha: erode the 0..1 alpha by ``round(feather_px / 2)`` px, then Gaussian-blur it
    with sigma ``feather_px`` (so the soft edge stays mostly inside the donor)."""
    if feather_px <= 0:
        return alpha.astype(np.float32)
    a = alpha.astype(np.float32)
    e = int(round(feather_px / 2))
    if e > 0:
        a = cv2.erode(a, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * e + 1, 2 * e + 1)))
    return cv2.GaussianBlur(a, (0, 0), sigmaX=float(feather_px))


def paste(canvas: np.ndarray, cut_rgb: np.ndarray, cut_alpha: np.ndarray, box,
          omega: np.ndarray | None = None, feather_px: float = 2.0) -> np.ndarray:
    """Paste a cut-out into ``box`` of ``canvas``.

    Args:
        canvas: (H, W, 3) uint8 image (not modified).
        cut_rgb: (h, w, 3) donor crop; cut_alpha: (h, w) donor mask in 0..1.
        box: target (x, y, w, h); the cut-out is scaled by ``min(bw / w, bh / h)`` (aspect
            kept), centred horizontally and bottom-aligned in the box.
        omega: optional (H, W) 0/1 mask; the final alpha is multiplied by it.
        feather_px: sigma of the alpha's Gaussian blur (``feather_alpha``).

    Returns:
        (H, W, 3) uint8 image.
    """
    H, W = canvas.shape[:2]
    bx, by, bw, bh = (float(v) for v in box)
    ch, cw = cut_alpha.shape
    s, nw, nh, ox, oy = _fit_geometry(cw, ch, bw, bh)
    interp = cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR
    rgb = cv2.resize(cut_rgb, (nw, nh), interpolation=interp).astype(np.float32)
    a = cv2.resize(cut_alpha.astype(np.float32), (nw, nh), interpolation=cv2.INTER_LINEAR)
    x0 = int(round(bx + ox))
    y0 = int(round(by + oy))
    X0, Y0, X1, Y1 = max(x0, 0), max(y0, 0), min(x0 + nw, W), min(y0 + nh, H)
    if X1 <= X0 or Y1 <= Y0:
        return np.asarray(canvas, np.uint8).copy()
    # work on the pasted region plus the feather's reach only (4 sigma)
    pad = int(np.ceil(4 * max(feather_px, 0))) + 1
    rx0, ry0, rx1, ry1 = max(X0 - pad, 0), max(Y0 - pad, 0), min(X1 + pad, W), min(Y1 + pad, H)
    roi_a = np.zeros((ry1 - ry0, rx1 - rx0), np.float32)
    roi_rgb = np.zeros((ry1 - ry0, rx1 - rx0, 3), np.float32)
    roi_a[Y0 - ry0:Y1 - ry0, X0 - rx0:X1 - rx0] = a[Y0 - y0:Y1 - y0, X0 - x0:X1 - x0]
    roi_rgb[Y0 - ry0:Y1 - ry0, X0 - rx0:X1 - rx0] = rgb[Y0 - y0:Y1 - y0, X0 - x0:X1 - x0]
    roi_a = feather_alpha(roi_a, feather_px)
    if omega is not None:
        roi_a *= (omega[ry0:ry1, rx0:rx1] > 0)
    out = np.array(canvas, dtype=np.uint8, copy=True)
    base = out[ry0:ry1, rx0:rx1].astype(np.float32)
    blend = base * (1 - roi_a[..., None]) + roi_rgb * roi_a[..., None]
    blend = np.clip(np.round(blend), 0, 255).astype(np.uint8)
    keep = (roi_a > 0)[..., None]
    out[ry0:ry1, rx0:rx1] = np.where(keep, blend, out[ry0:ry1, rx0:rx1])
    return out


def remove_persons(image: np.ndarray, omega: np.ndarray, radius: float = 5,
                   method: str = "telea") -> np.ndarray:
    """Fill omega from its surroundings with ``cv2.inpaint`` (Telea 2004 or Navier-Stokes).
    Pixels outside omega are returned unchanged. (H, W, 3) uint8 RGB in and out."""
    if method not in _METHODS:
        raise ValueError(f"unknown inpaint method {method!r}; known: {sorted(_METHODS)}")
    m = (omega > 0).astype(np.uint8)
    if not m.any():
        return image.copy()
    out = cv2.inpaint(np.ascontiguousarray(image), m, float(radius), _METHODS[method])
    out[m == 0] = image[m == 0]
    return out


class CopyPasteBackend:
    """Remove the selected persons and paste real donors of the target group (module doc).

    Args:
        donors: ``donor_pool`` output (a table without ``group`` gets its ``gender``).
        inpaint_radius, inpaint_method: ``cv2.inpaint`` settings (``telea`` or ``ns``).
        feather_px: alpha blur sigma.
        silhouette_thickness: width factor of keypoint silhouettes used to cut donors out
            (below 1: tighter than the target masks, less donor background).
        extent_weight: weight of ``extent_cost`` (body-extent mismatch) in the donor ranking;
            0 ranks by shape alone.
        load_image: function path -> RGB array (``biaslab.runtime.io.load_image``).
        cache_size: donor cut-outs (pixels) kept in memory.
    """
    name = "copy_paste"
    #: long side of the grid on which donor footprints and target masks are compared.
    GRID = 48

    def __init__(self, donors: pd.DataFrame, inpaint_radius: float = 5,
                 inpaint_method: str = "telea", feather_px: float = 2.0,
                 silhouette_thickness: float = 0.8, extent_weight: float = 1.0,
                 load_image=None, cache_size: int = 256):
        if inpaint_method not in _METHODS:
            raise ValueError(f"unknown inpaint method {inpaint_method!r}; known: "
                             f"{sorted(_METHODS)}")
        if "group" not in donors.columns and "gender" in donors.columns:
            donors = donors.assign(group=donors["gender"])   # a pool built before groups
        miss = [c for c in DONOR_COLUMNS if c not in donors.columns]
        if miss:
            raise InputError("donor pool", f"missing column(s) {miss} (use donor_pool())")
        from biaslab.runtime.io import load_image as _load
        self.donors = donors.sort_values("ann_id", ignore_index=True)
        self.inpaint_radius = float(inpaint_radius)
        self.inpaint_method = inpaint_method
        self.feather_px = float(feather_px)
        self.silhouette_thickness = float(silhouette_thickness)
        self.extent_weight = float(extent_weight)
        self._load = load_image or _load
        self._cuts: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._cache_size = int(cache_size)
        self._removed_key = None
        self._removed = None
        self._shapes: dict[str, dict] = {}

    def fingerprint(self) -> dict:
        d = self.donors[["ann_id", "image_id", "gender", "path", "mask_source"]]
        if (self.donors["group"] != self.donors["gender"]).any():   # skin-tone donor groups
            d = d.assign(group=self.donors["group"])
        digest = hashlib.sha256(d.to_json(orient="values").encode()).hexdigest()
        return {"backend": self.name, "inpaint_radius": self.inpaint_radius,
                "inpaint_method": self.inpaint_method, "feather_px": self.feather_px,
                "silhouette_thickness": self.silhouette_thickness,
                "extent_weight": self.extent_weight, "donors": digest, "version": 3}

    def _donor_mask(self, donor) -> tuple[np.ndarray, tuple[int, int, int, int]]:
        """Full-resolution 0/1 mask crop of a donor and its crop box (y0, y1, x0, x1); needs
        only the annotations, not the pixels."""
        h, w = int(donor["height"]), int(donor["width"])
        m, _ = person_mask(donor, h, w, sources=(donor["mask_source"],),
                           thickness=self.silhouette_thickness)
        if m is None:
            raise InputError(donor["path"], f"donor {int(donor['ann_id'])}: no "
                                            f"{donor['mask_source']} mask")
        ys, xs = np.nonzero(m)
        y0, y1, x0, x1 = int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1
        return m[y0:y1, x0:x1], (y0, y1, x0, x1)

    def _group_shapes(self, group: str) -> dict:
        """Per group: donor rows, crop boxes, low-resolution footprints, full sizes."""
        if group not in self._shapes:
            d = self.donors[self.donors["group"] == group].reset_index(drop=True)
            crops, smalls, sizes, extents = [], [], [], []
            for row in d.to_dict("records"):
                extents.append(body_extent(row.get("keypoints")))
                m, crop = self._donor_mask(row)
                ch, cw = m.shape
                f = self.GRID / max(ch, cw)
                small = cv2.resize(m, (max(int(round(cw * f)), 1), max(int(round(ch * f)), 1)),
                                   interpolation=cv2.INTER_AREA if f < 1 else
                                   cv2.INTER_NEAREST)
                crops.append(crop)
                smalls.append(small)
                sizes.append((cw, ch))
            self._shapes[group] = {"rows": d, "crops": crops, "smalls": smalls,
                                   "extents": extents,
                                   "sizes": np.asarray(sizes, float).reshape(-1, 2)}
        return self._shapes[group]

    def cutout(self, donor, crop=None) -> tuple[np.ndarray, np.ndarray]:
        """(RGB crop, 0..1 alpha crop) of a donor row, cropped to its mask's bounding box."""
        aid = int(donor["ann_id"])
        if aid in self._cuts:
            self._cuts.move_to_end(aid)
            return self._cuts[aid]
        m, (y0, y1, x0, x1) = self._donor_mask(donor)
        img = self._load(donor["path"])
        if img.shape[:2] != (int(donor["height"]), int(donor["width"])):
            raise InputError(donor["path"], f"image size {img.shape[:2]} differs from the "
                                            "images table")
        cut = (img[y0:y1, x0:x1].copy(), m.astype(np.float32))
        self._cuts[aid] = cut
        if len(self._cuts) > self._cache_size:
            self._cuts.popitem(last=False)
        return cut

    def ranked_donors(self, group: str, box, omega: np.ndarray, exclude_image: int,
                      top_k: int, keypoints=None) -> pd.DataFrame:
        """The ``top_k`` donors of ``group`` that fit the target best (``shape_cost`` against
        omega inside ``box`` + ``extent_weight * extent_cost`` against the target person's
        ``keypoints``, when given), excluding the target image; ties broken by ann_id. Adds a
        ``cost`` column."""
        sh = self._group_shapes(group)
        d = sh["rows"]
        if d.empty:
            raise InputError("donor pool", f"no donor of group {group!r} (need persons with "
                                           "a polygon or keypoints in images of that group)")
        keep = np.flatnonzero(d["image_id"].to_numpy() != int(exclude_image))
        if not len(keep):
            raise InputError("donor pool", f"no donor of group {group!r} outside image "
                                           f"{exclude_image}")
        H, W = omega.shape
        bx, by, bw, bh = (float(v) for v in box)
        x0, y0 = max(int(np.floor(bx)), 0), max(int(np.floor(by)), 0)
        x1, y1 = min(int(np.ceil(bx + bw)), W), min(int(np.ceil(by + bh)), H)
        crop = omega[y0:y1, x0:x1] if (x1 > x0 and y1 > y0) else np.ones((1, 1), np.uint8)
        f = self.GRID / max(crop.shape)
        gw, gh = max(int(round(crop.shape[1] * f)), 1), max(int(round(crop.shape[0] * f)), 1)
        target = cv2.resize(crop.astype(np.uint8), (gw, gh), interpolation=cv2.INTER_NEAREST)
        cost = shape_cost([sh["smalls"][i] for i in keep], sh["sizes"][keep], target, bw, bh)
        if self.extent_weight:
            cost = cost + self.extent_weight * extent_cost(
                body_extent(keypoints), [sh["extents"][i] for i in keep])
        out = d.iloc[keep].assign(cost=np.round(cost, 9))
        return out.sort_values(["cost", "ann_id"], kind="stable").iloc[:top_k]

    def _background(self, image_id: int, image: np.ndarray, omega: np.ndarray) -> np.ndarray:
        key = (int(image_id), image.shape, hashlib.blake2b(omega.tobytes(),
                                                           digest_size=8).hexdigest())
        if key != self._removed_key:
            self._removed = remove_persons(image, omega, self.inpaint_radius,
                                           self.inpaint_method)
            self._removed_key = key
        return self._removed

    def generate(self, item, image: np.ndarray, mask: np.ndarray, group: str, prompt: str,
                 js: Sequence[int], seeds: Sequence[int], scales: Sequence[float]):
        """One candidate per j: ``[(image (H, W, 3) uint8, [donor ann_id per box]), ...]``."""
        bg = self._background(item["image_id"], image, mask)
        boxes = [list(b) for b in item["boxes"]]
        top_k = max(3 * len(js), 12)
        kps = item.get("keypoints")
        kps = list(kps) if kps is not None else [None] * len(boxes)
        dg = donor_group(group, item.get("gender"))
        ranked = [self.ranked_donors(dg, b, mask, item["image_id"], top_k, kp)
                  for b, kp in zip(boxes, kps)]
        used: list[set[int]] = [set() for _ in boxes]
        # paste far persons first (smaller bottom y), near ones on top
        order = sorted(range(len(boxes)), key=lambda k: boxes[k][1] + boxes[k][3])
        outs = []
        for j, sd in zip(js, seeds):
            canvas = bg
            donors = [None] * len(boxes)
            for k in order:
                cands = ranked[k]
                n = len(cands)
                start = int(np.random.default_rng([int(sd), k]).integers(n))
                pick = start
                for step in range(n):  # probe to the next unused donor
                    idx = (start + step) % n
                    if int(cands["ann_id"].iloc[idx]) not in used[k]:
                        pick = idx
                        break
                donor = cands.iloc[pick]
                used[k].add(int(donor["ann_id"]))
                if len(used[k]) >= n:  # every donor used once: allow repeats
                    used[k].clear()
                rgb, alpha = self.cutout(donor)
                canvas = paste(canvas, rgb, alpha, boxes[k], mask, self.feather_px)
                donors[k] = int(donor["ann_id"])
            outs.append((canvas, donors))
        return outs
