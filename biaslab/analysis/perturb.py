"""Perturbations of the non-person features of test images, the person kept intact: the
inputs of feature sensitivity (Hirota et al., "Bias in Gender Bias Benchmarks: How Spurious
Features Distort Evaluation", ICCV 2025, arXiv 2509.07596: mask a fraction of the objects,
blur the background; a bias score that moves under them measures the model's reaction to
objects and backgrounds, not only to the person).

Three kinds, each named ``<kind>@<level>``:

``objects@f``
    a fraction ``f`` of the non-person object instances of the evaluated images (those with a
    box: an image-level label without one cannot be masked) is filled.
    The paper's text available to us (abstract and summaries) does not say how instances are
    drawn or what fills them; our choices: the instances are drawn uniformly over the whole
    set (exactly ``round(f * N)`` of the ``N`` instances, so ``f`` is the fraction of objects
    the paper reports), from ONE seeded permutation, so the 10 % set is inside the 25 % set
    inside the 50 % set (a dose-response by construction); each is filled over its
    segmentation polygon (its box where it has none) with the mean colour of the image's
    untouched pixels (``fill="mean"``: a black blob would be a new object for the model to
    read; a grey level is allowed as the paper's "blackout" alternative).
``blur@s``
    Gaussian blur (PIL's ``GaussianBlur``, standard deviation ``s`` % of the image's long
    side) of everything outside the persons.
``swap``
    (ours) the background of a test image of the other group (drawn with the seed), resized
    to this image's size, its own persons filled with its mean colour, this image's persons
    pasted back.

In every kind the pixels of the persons' union mask (polygon, then keypoints, then box:
:func:`biaslab.counterfactual.masks.person_mask`) are restored from the original, so the
person is unchanged to the pixel. The ground-truth labels stay the original image's: the
measurement asks how a score moves when only the input changes (the paper keeps the
benchmark's labels).
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from biaslab.analysis.sensitivity_settings import (KINDS, parse_name,  # noqa: F401
                                                  perturbation_name)



def person_union(persons: pd.DataFrame, height: int, width: int,
                 sources: Sequence[str] = ("polygon", "keypoints", "box")) -> np.ndarray:
    """0/1 uint8 (H, W): the union of the image's persons' masks (each from the first source
    in ``sources`` it has, else its box)."""
    from biaslab.counterfactual.masks import person_mask
    union = np.zeros((height, width), np.uint8)
    for p in persons.to_dict("records"):
        m, _ = person_mask(p, height, width, sources=tuple(sources))
        if m is None:
            m, _ = person_mask(p, height, width, sources=("box",))
        union |= m.astype(np.uint8)
    return union


def object_mask(obj, height: int, width: int) -> np.ndarray:
    """0/1 uint8 (H, W) of one ``objects.parquet`` row: its polygon when it has one, else its
    box (x, y, w, h)."""
    from biaslab.counterfactual.masks import box_mask, polygon_mask
    m = polygon_mask(obj.get("polygon"), height, width) if "polygon" in obj else None
    if m is None or not m.any():
        m = box_mask((obj["x"], obj["y"], obj["w"], obj["h"]), height, width)
    return m.astype(np.uint8)


def _fill_value(image: np.ndarray, keep: np.ndarray, fill: int | str) -> np.ndarray:
    if isinstance(fill, str):
        if fill != "mean":
            raise ValueError(f"fill must be a grey level or 'mean', got {fill!r}")
        rest = image[keep > 0]
        return np.round(rest.reshape(-1, 3).mean(0)) if len(rest) else np.zeros(3)
    return np.full(3, int(fill))


def mask_objects(image: np.ndarray, masks: Sequence[np.ndarray], person: np.ndarray,
                 fill: int | str = "mean") -> np.ndarray:
    """``image`` (H, W, 3) uint8 with the union of ``masks`` (each 0/1 (H, W)) filled, the
    ``person`` pixels (0/1 (H, W)) kept. ``fill="mean"``: the mean colour of the pixels left
    untouched; an int: that grey level. Returns a new uint8 array."""
    out = np.array(image, np.uint8, copy=True)
    hole = np.zeros(image.shape[:2], np.uint8)
    for m in masks:
        hole |= np.asarray(m, np.uint8)
    hole &= (np.asarray(person, np.uint8) == 0).astype(np.uint8)
    if hole.any():
        out[hole > 0] = _fill_value(image, 1 - hole, fill)
    return out


def blur_background(image: np.ndarray, person: np.ndarray, strength_pct: float) -> np.ndarray:
    """``image`` with everything outside ``person`` Gaussian-blurred (PIL ``GaussianBlur``,
    standard deviation ``strength_pct`` % of the long side, in pixels). Returns uint8."""
    from PIL import Image, ImageFilter
    sigma = float(strength_pct) / 100.0 * max(image.shape[:2])
    blurred = np.asarray(Image.fromarray(np.asarray(image, np.uint8))
                         .filter(ImageFilter.GaussianBlur(radius=sigma)))
    keep = np.asarray(person, bool)[..., None]
    return np.where(keep, image, blurred).astype(np.uint8)


def swap_background(image: np.ndarray, person: np.ndarray, donor: np.ndarray,
                    donor_person: np.ndarray) -> np.ndarray:
    """``image``'s persons pasted onto ``donor`` (resized to ``image``'s size, bilinear), whose
    own persons (``donor_person``, 0/1 at the donor's size) are first filled with the
    donor's mean colour so that no second person is left. Returns uint8 (H, W, 3)."""
    from PIL import Image
    H, W = image.shape[:2]
    d = np.array(donor, np.uint8, copy=True)
    dp = np.asarray(donor_person, np.uint8)
    if dp.any():
        d[dp > 0] = _fill_value(donor, 1 - dp, "mean")
    if d.shape[:2] != (H, W):
        d = np.asarray(Image.fromarray(d).resize((W, H), Image.BILINEAR))
    keep = np.asarray(person, bool)[..., None]
    return np.where(keep, image, d).astype(np.uint8)


def save_png(image: np.ndarray, stem: str | os.PathLike) -> str:
    """Write ``image`` (H, W, 3) uint8 as ``<stem>.png``, atomically. Lossless whatever the
    source's format (a JPEG re-encode would change the person's pixels too); zlib level 1
    (the fastest: these are intermediate files). Returns the path."""
    from PIL import Image

    from biaslab.runtime.io import atomic_path
    path = f"{stem}.png"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with atomic_path(path, suffix=".png") as tmp:
        Image.fromarray(np.asarray(image, np.uint8)).save(tmp, format="PNG", compress_level=1)
    return path


def write_each(table: pd.DataFrame, persons: pd.DataFrame, out_dir: str | os.PathLike,
               transform) -> pd.DataFrame:
    """``transform(image, persons_of_image) -> image`` (uint8 (H, W, 3) in and out) applied to
    each image of ``table`` (``image_id, gender, path``) that has persons, written with
    :func:`save_png` as ``<out_dir>/<image_id>.png``. Returns ``image_id, gender, path``
    (images without persons left out): the loop every persons-based copy shares."""
    from biaslab.runtime.io import load_image
    by_p = {int(i): g for i, g in persons.groupby("image_id", sort=False)}
    rows = []
    for r in table.to_dict("records"):
        ps = by_p.get(int(r["image_id"]))
        if ps is None or ps.empty:
            continue
        out = transform(load_image(r["path"]), ps)
        rows.append({"image_id": int(r["image_id"]), "gender": r["gender"],
                     "path": save_png(out, os.path.join(str(out_dir), str(int(r["image_id"]))))})
    return pd.DataFrame(rows, columns=["image_id", "gender", "path"])


def write_masked(table: pd.DataFrame, persons: pd.DataFrame, out_dir: str | os.PathLike, *,
                 sources: Sequence[str] = ("box",), dilate_px: int = 0,
                 fill: int | str = 0) -> pd.DataFrame:
    """The images of ``table`` (``image_id, gender, path``) with every person blacked out
    (:func:`biaslab.classify.blackout.blackout_persons`, Table 1's Ratio protocol), written with
    :func:`save_png` as ``<out_dir>/<image_id>.png``. Returns ``image_id, gender, path``
    (images without persons left out)."""
    from biaslab.classify.blackout import blackout_persons
    return write_each(table, persons, out_dir, lambda img, ps: blackout_persons(
        img, ps, sources=sources, dilate_px=dilate_px, fill=fill)[0])


def keep_persons(image: np.ndarray, person: np.ndarray, fill: int = 0) -> np.ndarray:
    """uint8 (H, W, 3): ``image`` with everything outside ``person`` (0/1 (H, W), the union
    of :func:`person_union`) set to the constant ``fill`` (0-255): the input of the
    person-pixel control, which sees only what every perturbation restores to the pixel."""
    out = np.full_like(image, int(fill))
    keep = np.asarray(person, bool)
    out[keep] = image[keep]
    return out


def write_person_only(table: pd.DataFrame, persons: pd.DataFrame, out_dir: str | os.PathLike,
                      fill: int = 0) -> pd.DataFrame:
    """The images of ``table`` (``image_id, gender, path``) reduced to their persons
    (:func:`keep_persons`, the same union mask the perturbations restore), written with
    :func:`save_png` as ``<out_dir>/<image_id>.png``. Returns ``image_id, gender, path``
    (images without persons left out)."""
    return write_each(table, persons, out_dir, lambda img, ps: keep_persons(
        img, person_union(ps, *img.shape[:2]), fill))


def located(objects: pd.DataFrame) -> pd.DataFrame:
    """The object rows that can be masked: a finite box of positive size (image-level labels
    without a box, e.g. COCO's ``image_labels`` or OpenImages' verified labels, cannot)."""
    if objects.empty:
        return objects
    b = objects[["x", "y", "w", "h"]].apply(pd.to_numeric, errors="coerce")
    ok = np.isfinite(b.to_numpy(np.float64)).all(axis=1) & (b["w"] > 0).to_numpy() & \
        (b["h"] > 0).to_numpy()
    return objects[ok]


def choose_objects(objects: pd.DataFrame, fractions: Sequence[float], seed: int
                   ) -> dict[float, set]:
    """Which object instances each ``objects@f`` fills: ``{f: set of row labels}`` of
    ``objects`` with exactly ``round(f * len(objects))`` rows each, prefixes of one seeded
    permutation (so a smaller fraction's set is inside a larger one's).

    Raises:
        ValueError: a fraction outside (0, 1].
    """
    bad = [f for f in fractions if not 0 < float(f) <= 1]
    if bad:
        raise ValueError(f"object fractions must lie in (0, 1], got {bad}")
    order = np.random.default_rng(int(seed)).permutation(len(objects))
    labels = np.asarray(objects.index)
    return {float(f): set(labels[order[:int(round(float(f) * len(objects)))]].tolist())
            for f in fractions}


def choose_donors(table: pd.DataFrame, seed: int, column: str = "gender") -> dict[int, int]:
    """``{image_id: donor image_id}``: for each image, a seeded draw among the images of
    ``table`` whose ``column`` differs (the other group). Images with no other group get no
    donor."""
    rng = np.random.default_rng(int(seed))
    out = {}
    ids = table["image_id"].astype(int).to_numpy()
    groups = table[column].astype(str).to_numpy()
    for i, g in zip(ids, groups):
        pool = ids[groups != g]
        if len(pool):
            out[int(i)] = int(pool[rng.integers(len(pool))])
    return out


def write_perturbed(test: pd.DataFrame, persons: pd.DataFrame, objects: pd.DataFrame,
                    names: Sequence[str], out_dir: str | os.PathLike, *, seed: int = 0,
                    fill: int | str = "mean", chosen: dict[float, set] | None = None,
                    progress: bool = False) -> pd.DataFrame:
    """Every perturbation of ``names`` applied to every image of ``test``, written with
    :func:`save_png` as ``<out_dir>/<name>/<image_id>.png``.

    Args:
        test: ``image_id, path, gender`` (the evaluated images).
        persons: ``persons.parquet`` rows (the persons kept intact; the swap's donors'
            persons removed).
        objects: ``objects.parquet`` rows (x, y, w, h, optional polygon) of the non-person
            objects; rows without a box are left out (:func:`located`).
        names: perturbation names (:func:`parse_name`).
        seed: draws the objects and the donors.
        fill: what a masked object is filled with (:func:`mask_objects`).
        chosen: the instances each ``objects@f`` fills, as :func:`choose_objects` draws them
            from the located objects with ``seed`` (drawn here when None).

    Returns:
        one row per (perturbation, image): ``perturbation, image_id, gender, path,
        changed_fraction`` (share of pixels that differ from the original, a check that the
        perturbation did something), ``n_objects``, ``n_masked`` (object instances of the
        image and those filled; objects@ only, else 0), ``donor`` (swap, else -1).

    Raises:
        ValueError: a bad perturbation name.
        InputError: an unreadable image.
    """
    from tqdm import tqdm

    from biaslab.runtime.io import load_image
    parsed = [(n, *parse_name(n)) for n in names]
    ids = set(test["image_id"].astype(int))
    objs = located(objects[objects["image_id"].astype(int).isin(ids)])
    if chosen is None:
        chosen = choose_objects(objs, [lv for _, k, lv in parsed if k == "objects"], seed)
    donors = choose_donors(test, seed) if any(k == "swap" for _, k, _ in parsed) else {}
    paths = dict(zip(test["image_id"].astype(int), test["path"]))
    by_p = {int(i): g for i, g in persons.groupby("image_id", sort=False)}
    by_o = {int(i): g for i, g in objs.groupby("image_id", sort=False)}
    empty = persons.iloc[:0]
    rows = []
    for r in tqdm(test.to_dict("records"), disable=not progress, desc="perturb", unit="img"):
        i = int(r["image_id"])
        img = load_image(r["path"])
        H, W = img.shape[:2]
        person = person_union(by_p.get(i, empty), H, W)
        o = by_o.get(i, objs.iloc[:0])
        for name, kind, level in parsed:
            n_masked, donor = 0, -1
            if kind == "objects":
                pick = [rec for lab, rec in zip(o.index, o.to_dict("records"))
                        if lab in chosen[float(level)]]
                n_masked = len(pick)
                out = mask_objects(img, [object_mask(p, H, W) for p in pick], person, fill)
            elif kind == "blur":
                out = blur_background(img, person, level)
            else:
                donor = donors.get(i, -1)
                if donor < 0:
                    out = img
                else:
                    dimg = load_image(paths[donor])
                    out = swap_background(img, person, dimg, person_union(
                        by_p.get(donor, empty), *dimg.shape[:2]))
            path = save_png(out, os.path.join(str(out_dir), name, str(i)))
            rows.append({"perturbation": name, "image_id": i, "gender": r["gender"],
                         "path": path,
                         "changed_fraction": float(np.any(out != img, axis=-1).mean()),
                         "n_objects": int(len(o)), "n_masked": int(n_masked),
                         "donor": int(donor)})
    return pd.DataFrame(rows, columns=["perturbation", "image_id", "gender", "path",
                                       "changed_fraction", "n_objects", "n_masked", "donor"])
