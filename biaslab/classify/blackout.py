"""Persons blacked out of test images for Ratio (paper 000 sec. 3.1: "masking individuals
in test images")."""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from biaslab.runtime.io import atomic_path


# --------------------------------------------------------------------------- persons masked
def blackout_persons(image: np.ndarray, persons: pd.DataFrame,
                     sources: Sequence[str] = ("polygon", "keypoints", "box"),
                     dilate_px: int = 0, fill: int | str = 0) -> tuple[np.ndarray, np.ndarray]:
    """Black out every person of one image (paper 000 sec. 3.1, Ratio: "masking individuals in
    test images").

    Args:
        image: (H, W, 3) uint8.
        persons: the image's ``persons.parquet`` rows (x, y, w, h, polygon, keypoints).
        sources: mask sources in order of preference (``biaslab.counterfactual.masks.
            person_mask``); ``("box",)`` blacks out whole boxes.
        dilate_px: grow the union mask by this radius (px) to cover silhouette edges.
        fill: what the mask is filled with: a grey level (0 = black, the default "blackout"
            of Wang et al. 2019), or ``"mean"`` = the mean colour of the unmasked pixels.

    Returns:
        ``(masked image, mask)``; pixels outside the mask are unchanged.
    """
    from biaslab.counterfactual.masks import dilate, person_mask
    H, W = image.shape[:2]
    union = np.zeros((H, W), np.uint8)
    for p in persons.to_dict("records"):
        msk, _ = person_mask(p, H, W, sources=tuple(sources))
        if msk is None:   # no allowed source: fall back to the box
            msk, _ = person_mask(p, H, W, sources=("box",))
        union |= msk.astype(np.uint8)
    union = dilate(union, int(dilate_px))
    out = np.array(image, np.uint8, copy=True)
    if isinstance(fill, str):
        if fill != "mean":
            raise ValueError(f"fill must be a grey level or 'mean', got {fill!r}")
        rest = image[union == 0]
        value = np.round(rest.reshape(-1, 3).mean(0)) if len(rest) else np.zeros(3)
    else:
        value = int(fill)
    out[union > 0] = value
    return out, union


def save_like(src_path: str | os.PathLike, image: np.ndarray, dst_stem: str | os.PathLike,
              jpeg_quality: int = 95) -> str:
    """Write ``image`` next to ``dst_stem`` in the source's format: ``<stem>.jpg`` (JPEG,
    ``jpeg_quality``) for a .jpg/.jpeg source, else ``<stem>.png``; atomically. Returns the
    path as a string."""
    from PIL import Image
    jpg = str(src_path).lower().endswith((".jpg", ".jpeg"))
    path = f"{dst_stem}.{'jpg' if jpg else 'png'}"
    with atomic_path(path, suffix=".jpg" if jpg else ".png") as tmp:
        im = Image.fromarray(np.asarray(image, np.uint8))
        if jpg:
            im.save(tmp, format="JPEG", quality=int(jpeg_quality))
        else:
            im.save(tmp, format="PNG")
    return path


def write_blackout_images(test: pd.DataFrame, persons: pd.DataFrame,
                          out_dir: str | os.PathLike, *,
                          sources: Sequence[str] = ("box",), dilate_px: int = 0,
                          fill: int | str = 0, progress: bool = False) -> pd.DataFrame:
    """Persons-blacked-out copies of the test images that have persons
    (:func:`blackout_persons`, every person of the image), written with :func:`save_like` as
    ``<out_dir>/<image_id>.(jpg|png)``. Returns ``image_id, gender, path, masked_fraction``
    (images without persons are left out: nothing to mask)."""
    from tqdm import tqdm

    from biaslab.runtime.io import load_image
    by_img = {int(i): g for i, g in persons.groupby("image_id", sort=False)}
    rows = []
    for r in tqdm(test.to_dict("records"), disable=not progress, desc="blackout", unit="img"):
        ps = by_img.get(int(r["image_id"]))
        if ps is None or ps.empty:
            continue
        img = load_image(r["path"])
        out, mask = blackout_persons(img, ps, sources=sources, dilate_px=dilate_px,
                                     fill=fill)
        path = save_like(r["path"], out, os.path.join(str(out_dir), str(int(r["image_id"]))))
        rows.append({"image_id": int(r["image_id"]), "gender": r["gender"], "path": path,
                     "masked_fraction": float(mask.mean())})
    return pd.DataFrame(rows, columns=["image_id", "gender", "path", "masked_fraction"])
