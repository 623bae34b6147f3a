"""Read any directory in official COCO layout into normalised tables (see ``schema.md``).

Layout (``root``)::

    annotations/captions_<S>.json          required, one or more splits S (val2017, train2017...)
    annotations/instances_<S>.json         optional: person boxes/polygons, object boxes
    annotations/person_keypoints_<S>.json  optional: 17 COCO keypoints per person
    annotations/image_labels.json          optional: complete image-level category sets
    annotations/perceived_gender_skin.csv  optional: image_id,bb_gender,bb_skin
    annotations/image_attributes.csv       optional: image_id + any per-image attribute columns
                                           (e.g. the synthetic scene and colour cast)
    images/<S>/<file_name>  or  <S>/<file_name>

Whole-file problems (missing, empty, truncated or invalid JSON, a captions file without
captions, missing keys, duplicate image or annotation ids) raise ``InputError`` naming the file.
Per-item problems (an image file that does not exist, a caption/annotation/label for an image
that is not in the captions file, an empty caption, a caption that is not valid Unicode (a lone
surrogate: ``caption_not_utf8``), an unknown category) drop the item and
count it under a reason in the returned ``drops`` dict; nothing is dropped silently.

Every image file is read once (``check_files``, see ``check_image``): a zero-byte file
(``image_file_empty``), a file PIL cannot identify (``image_not_an_image``), a truncated or
corrupt one (``image_file_truncated``: ``Image.verify`` plus a full decode, and for a JPEG
libjpeg's grey fill of missing data) and one whose header size differs from the annotation's width/height
(``image_size_mismatch``) are dropped and counted; the content digest
(``biaslab.models.features.bytes_digest``) goes to the ``digest`` column of the images table, so a
rewritten image changes ``prepare``'s output and DVC re-runs what depends on it. A
``file_name`` that leaves the image directory (absolute, or with ``..``) is an input error.

Keypoint annotations are attached to the instance person with the highest box IoU in the same
image (greedy, IoU >= ``kp_iou``) because in some COCO subsets (coco-mini) keypoint and
instance annotations do not share ids; exact id matches are used first.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from pycocotools.coco import COCO
from tqdm import tqdm

from biaslab.runtime.io import InputError, read_json

#: drop reasons of ``check_image``
IMAGE_PROBLEMS = ("image_file_missing", "image_file_empty", "image_not_an_image",
                  "image_file_truncated", "image_too_large", "image_size_mismatch",
                  "image_outside_root")

_CAPTIONS_RE = re.compile(r"^captions_(.+)\.json$")
#: a split name becomes a directory name (images/<split>): no separator, no dot
_SPLIT_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """True when ``path``, every symlink resolved (``os.path.realpath``), lies in ``root``
    (resolved too): what an input named by a dataset may open."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def _records(path: Path, data: dict, key: str, what: str) -> list[dict]:
    """``data[key]`` checked to be a list of JSON objects (the COCO layout)."""
    items = data[key]
    if not isinstance(items, list):
        raise InputError(path, f"'{key}' must be a list of {what} objects, got a JSON "
                               f"{type(items).__name__}")
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise InputError(path, f"{key}[{i}] must be a JSON object ({what}), got "
                                   f"{it!r:.60}")
    return items


def _int(path: Path, where: str, value) -> int:
    """A COCO id or count: a JSON integer (or an integral number); else one-line InputError
    naming the entry and the field."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise InputError(path, f"{where} = {value!r:.60} is not an integer")


def _coco_index(path: Path, data: dict) -> COCO:
    """Build a pycocotools index over already-validated JSON (pycocotools prints; silence it)."""
    coco = COCO()
    coco.dataset = data
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def _check_keys(path: Path, data, keys: tuple[str, ...]) -> None:
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object with keys {list(keys)}, got "
                               f"{type(data).__name__}")
    missing = [k for k in keys if k not in data]
    if missing:
        raise InputError(path, f"missing key(s) {missing} (not COCO format)")


def _check_unique(path: Path, data: dict, key: str, what: str) -> list[dict]:
    """``data[key]``: a list of objects with unique integer ``id`` (InputError otherwise)."""
    items = _records(path, data, key, what)
    ids = [it.get("id") for it in items]
    if any(i is None for i in ids):
        raise InputError(path, f"a {what} entry has no 'id'")
    ids = [_int(path, f"{key}[{n}].id", i) for n, i in enumerate(ids)]
    dup = [i for i, n in Counter(ids).items() if n > 1]
    if dup:
        raise InputError(path, f"duplicate {what} id(s): {sorted(dup)[:10]}"
                               f"{' ...' if len(dup) > 10 else ''}")
    return items


def _image_dir(root: Path, split: str) -> Path:
    for cand in (root / "images" / split, root / split):
        if cand.is_dir():
            return cand
    return root / "images" / split  # files will be reported missing one by one


def _grey_filled(im) -> bool:
    """True when the last 8 pixel rows of a decoded JPEG are exactly (128, 128, 128) across
    the whole width: what libjpeg writes for the MCUs after a premature end-of-image marker
    (zero DCT coefficients), i.e. a truncated file with an end marker appended, which PIL
    decodes without an error. A real photograph has JPEG noise there; a JPEG whose bottom
    band is a flat mid-grey by design is rejected too (documented trade-off)."""
    import numpy as np
    if im.height < 8:
        return False
    band = np.asarray(im.convert("RGB").crop((0, im.height - 8, im.width, im.height)))
    return bool((band == 128).all())


def check_image(path: str | os.PathLike, width: int = 0, height: int = 0
                ) -> tuple[str | None, str | None]:
    """Read one image file and check it: ``(problem, digest)``.

    ``problem`` is None for a good image, else one of ``IMAGE_PROBLEMS``: ``image_file_missing``
    (absent, unreadable or not a regular file), ``image_file_empty`` (0 bytes),
    ``image_not_an_image`` (PIL cannot identify it), ``image_file_truncated``
    (``Image.verify`` or a full decode fails, or a JPEG's last 8
    rows are libjpeg's flat grey fill of missing data: a truncated file with its end marker
    appended, ``_grey_filled``), ``image_too_large`` (more pixels than PIL's decompression-bomb
    limit, ``Image.MAX_IMAGE_PIXELS``: refused before decoding), ``image_size_mismatch (header size != ``width`` x ``height``;
    0 = not annotated, not compared). ``digest`` is ``biaslab.models.features.bytes_digest`` of the
    bytes (None when unreadable). Every file is fully decoded once here, so an image that
    passes ``prepare`` decodes in every later stage.
    """
    from PIL import Image, UnidentifiedImageError

    from biaslab.models.features import bytes_digest
    if not Path(path).is_file():          # absent, or a directory / FIFO / device
        return "image_file_missing", None
    try:
        data = Path(path).read_bytes()
    except OSError:
        return "image_file_missing", None
    digest = bytes_digest(data)
    if not data:
        return "image_file_empty", digest
    try:
        with Image.open(io.BytesIO(data)) as im:
            size, fmt = im.size, im.format
            im.verify()
        # verify() checks a JPEG's markers only: corrupt entropy-coded data surfaces at decode
        # (such a file used to pass prepare and abort the features stage)
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            if fmt == "JPEG" and _grey_filled(im):
                return "image_file_truncated", digest
    except UnidentifiedImageError:
        return "image_not_an_image", digest
    except Image.DecompressionBombError:
        return "image_too_large", digest
    except (OSError, SyntaxError, ValueError, EOFError):
        return "image_file_truncated", digest
    if (width and int(width) != size[0]) or (height and int(height) != size[1]):
        return "image_size_mismatch", digest
    return None, digest


def _check_file_name(path: Path, fname: str) -> None:
    """``file_name`` must stay inside the image directory: relative, without ``..``."""
    try:
        fname.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(path, f"image file_name {fname!r} is not valid Unicode (a lone "
                               f"surrogate escape in the JSON)") from None
    pure = Path(fname)
    if pure.is_absolute() or fname.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", fname):
        raise InputError(path, f"image file_name {fname!r} leaves the dataset root (absolute or "
                               f"'..'); file names must be relative to images/<split>/")


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of boxes a (n,4) and b (m,4) in x,y,w,h -> (n,m)."""
    ax2, ay2 = a[:, 0] + a[:, 2], a[:, 1] + a[:, 3]
    bx2, by2 = b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    iw = np.clip(np.minimum(ax2[:, None], bx2[None]) - np.maximum(a[:, 0][:, None], b[:, 0][None]), 0, None)
    ih = np.clip(np.minimum(ay2[:, None], by2[None]) - np.maximum(a[:, 1][:, None], b[:, 1][None]), 0, None)
    inter = iw * ih
    union = (a[:, 2] * a[:, 3])[:, None] + (b[:, 2] * b[:, 3])[None] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def read_coco(root: str | os.PathLike, kp_iou: float = 0.3, check_files: bool = True,
              progress: bool = True) -> tuple[dict[str, pd.DataFrame], dict[str, int]]:
    """Read a COCO-layout directory into the tables of ``schema.md``.

    Args:
        root: dataset directory (kept as given in the ``path`` column, so relative roots give
            machine-independent tables).
        kp_iou: minimum box IoU to attach a keypoint annotation to an instance person.
        check_files: read and check every image file (``check_image``) and record its
            ``digest``; bad ones are dropped under their reason. False: no file is opened
            and ``digest`` is None.
        progress: show a tqdm bar while checking files.

    Returns:
        ``(tables, drops)``: tables ``images, captions, persons, objects, perceived_gender``
        , attributes (pandas DataFrames) and ``drops`` {reason: count}.

    Every file is opened only when its real path (symlinks resolved) lies in ``root``: an
    image that leaves it is dropped as ``image_outside_root``, an annotation file that does
    raises.

    Raises:
        InputError: missing root/annotations, no captions file, a split name that is not
            letters, digits, ``_`` or ``-``, a whole-file problem, a malformed entry (an id
            that is not an integer, a list that is not a list of objects: the message names
            the file, the entry and the field), or a ``file_name`` / annotation file that
            leaves the dataset root.
    """
    root_str = str(root)
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, "dataset root not found (params data.root)")
    ann_dir = root / "annotations"
    if not ann_dir.is_dir():
        raise InputError(ann_dir, "annotations directory not found (expected COCO layout: "
                                  "<root>/annotations/captions_<split>.json)")
    cap_files = sorted(p for p in ann_dir.iterdir() if _CAPTIONS_RE.match(p.name))
    if not cap_files:
        raise InputError(ann_dir, "no captions_<split>.json file")
    for f in cap_files:
        if not _SPLIT_RE.match(_CAPTIONS_RE.match(f.name).group(1)):
            raise InputError(f, f"split name {_CAPTIONS_RE.match(f.name).group(1)!r} must be "
                                f"letters, digits, '_' or '-' (it names images/<split>/)")
    for f in ann_dir.iterdir():
        if not inside(f, root):
            raise InputError(f, f"leaves the dataset root {root} (a symlink to "
                                f"{os.path.realpath(f)}); inputs must lie inside data.root")
    drops: Counter = Counter()
    images, captions, persons, objects = [], [], [], []
    seen_images: dict[int, str] = {}
    cat_names: dict[int, str] = {}

    for cap_path in cap_files:
        split = _CAPTIONS_RE.match(cap_path.name).group(1)
        data = read_json(cap_path)
        _check_keys(cap_path, data, ("images", "annotations"))
        _check_unique(cap_path, data, "images", "image")
        _check_unique(cap_path, data, "annotations", "caption")
        if not data["annotations"]:
            raise InputError(cap_path, "captions file has no captions")
        coco = _coco_index(cap_path, data)
        img_dir = _image_dir(root, split)
        rel_dir = os.path.relpath(img_dir, root)
        split_ids = set()
        for img in tqdm(data["images"], desc=f"images {split}", disable=not progress,
                        leave=False):
            iid = _int(cap_path, "images[].id", img["id"])
            if iid in seen_images:
                raise InputError(cap_path, f"image id {iid} also appears in "
                                           f"{seen_images[iid]}")
            seen_images[iid] = cap_path.name
            fname = img.get("file_name")
            if not fname or not isinstance(fname, str):
                drops["image_without_file_name"] += 1
                continue
            _check_file_name(cap_path, fname)
            if not coco.imgToAnns.get(iid):
                drops["image_without_captions"] += 1
                continue
            try:
                width, height = int(img.get("width") or 0), int(img.get("height") or 0)
            except (TypeError, ValueError):
                raise InputError(cap_path, f"image {iid}: width/height {img.get('width')!r}/"
                                           f"{img.get('height')!r} are not integers") from None
            digest = None
            if check_files and not inside(img_dir / fname, root):
                drops["image_outside_root"] += 1        # a symlink out of the dataset
                continue
            if check_files:
                problem, digest = check_image(img_dir / fname, width, height)
                if problem:
                    drops[problem] += 1
                    continue
            split_ids.add(iid)
            images.append({"image_id": iid, "file_name": fname,
                           "path": os.path.join(root_str, rel_dir, fname),
                           "width": width, "height": height,
                           "coco_split": split, "digest": digest})
        for ann in data["annotations"]:
            iid = ann.get("image_id")
            if iid not in split_ids:
                drops["caption_unknown_or_dropped_image" if iid not in seen_images
                      else "caption_of_dropped_image"] += 1
                continue
            cap = ann.get("caption")
            if cap is not None and not isinstance(cap, str):
                drops["caption_not_a_string"] += 1
                continue
            text = (cap or "").strip()
            if not text:
                drops["caption_empty"] += 1
                continue
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the JSON)
                drops["caption_not_utf8"] += 1
                continue
            captions.append({"caption_id": int(ann["id"]), "image_id": int(iid),
                             "caption": " ".join(text.split())})

        inst_path = ann_dir / f"instances_{split}.json"
        if inst_path.exists():
            inst = read_json(inst_path)
            _check_keys(inst_path, inst, ("images", "annotations", "categories"))
            anns = _check_unique(inst_path, inst, "annotations", "annotation")
            for n, c in enumerate(_check_unique(inst_path, inst, "categories", "category")):
                if not isinstance(c.get("name"), str) or not c["name"]:
                    raise InputError(inst_path, f"categories[{n}].name = {c.get('name')!r:.60} "
                                                f"is not a category name")
                cat_names[int(c["id"])] = c["name"]
            for n, ann in enumerate(anns):
                iid = ann.get("image_id")
                if iid not in split_ids:
                    drops["instance_unknown_or_dropped_image"] += 1
                    continue
                cid = _int(inst_path, f"annotations[{n}].category_id",
                           ann.get("category_id", -1))
                if cid not in cat_names:
                    drops["instance_unknown_category"] += 1
                    continue
                box = _bbox(ann.get("bbox"))
                if box is None:
                    drops["instance_without_valid_bbox"] += 1
                    continue
                x, y, w, h = box
                seg = ann.get("segmentation") or []
                if cat_names[cid] == "person":
                    persons.append({"ann_id": int(ann["id"]), "image_id": int(iid), "x": x,
                                    "y": y, "w": w, "h": h,
                                    "area": float(ann.get("area", w * h)),
                                    "polygon": json.dumps(seg if isinstance(seg, list) else []),
                                    "keypoints": None, "num_keypoints": 0})
                else:
                    objects.append({"image_id": int(iid), "category": cat_names[cid],
                                    "source": "instances", "x": x, "y": y, "w": w, "h": h})
        kp_path = ann_dir / f"person_keypoints_{split}.json"
        if kp_path.exists():
            _attach_keypoints(kp_path, persons, split_ids, kp_iou, drops)

    if not images:
        raise InputError(root, "no usable image (all dropped: " + json.dumps(dict(drops)) + ")")
    image_ids = {im["image_id"] for im in images}
    objects = _image_labels(ann_dir / "image_labels.json", objects, image_ids,
                            set(cat_names.values()), drops)
    gender = _perceived_gender(ann_dir / "perceived_gender_skin.csv", image_ids, drops)
    attributes = _attributes(ann_dir / "image_attributes.csv", image_ids, drops)

    tables = {
        "images": pd.DataFrame(images).sort_values("image_id", ignore_index=True),
        "captions": pd.DataFrame(captions).sort_values("caption_id", ignore_index=True),
        "persons": pd.DataFrame(persons, columns=["ann_id", "image_id", "x", "y", "w", "h",
                                                  "area", "polygon", "keypoints",
                                                  "num_keypoints"]
                                ).sort_values("ann_id", ignore_index=True),
        "objects": pd.DataFrame(objects, columns=["image_id", "category", "source", "x", "y",
                                                  "w", "h"]
                                ).sort_values(["image_id", "category", "x", "y"],
                                              ignore_index=True),
        "perceived_gender": gender,
        "attributes": attributes,
    }
    tables["persons"]["num_keypoints"] = tables["persons"]["num_keypoints"].astype("int64")
    return tables, dict(sorted(drops.items()))


def _bbox(b) -> tuple[float, float, float, float] | None:
    """COCO ``[x, y, w, h]`` -> floats; None if missing, not 4 finite numbers, or w/h < 0."""
    if not isinstance(b, (list, tuple)) or len(b) != 4:
        return None
    try:
        x, y, w, h = (float(v) for v in b)
    except (TypeError, ValueError):
        return None
    if not all(np.isfinite([x, y, w, h])) or w < 0 or h < 0:
        return None
    return x, y, w, h


def _attach_keypoints(kp_path: Path, persons: list[dict], split_ids: set[int], kp_iou: float,
                      drops: Counter) -> None:
    kp = read_json(kp_path)
    _check_keys(kp_path, kp, ("images", "annotations"))
    _check_unique(kp_path, kp, "annotations", "annotation")
    by_img: dict[int, list[dict]] = {}
    for p in persons:
        by_img.setdefault(p["image_id"], []).append(p)
    by_id = {p["ann_id"]: p for p in persons}
    pending: dict[int, list[dict]] = {}
    for ann in kp["annotations"]:
        iid = ann.get("image_id")
        kps = ann.get("keypoints") or []
        if iid not in split_ids:
            drops["keypoints_unknown_or_dropped_image"] += 1
            continue
        if len(kps) != 51:
            drops["keypoints_not_17"] += 1
            continue
        if ann["id"] in by_id and by_id[ann["id"]]["keypoints"] is None:
            _set_kp(by_id[ann["id"]], kps)
        elif _bbox(ann.get("bbox")) is None:      # matched by box IoU: needs a box
            drops["keypoints_without_valid_bbox"] += 1
        else:
            pending.setdefault(iid, []).append(ann)
    for iid, anns in pending.items():
        cands = [p for p in by_img.get(iid, []) if p["keypoints"] is None]
        if not cands:
            drops["keypoints_unmatched"] += len(anns)
            continue
        iou = _iou(np.array([_bbox(a["bbox"]) for a in anns], float),
                   np.array([[p["x"], p["y"], p["w"], p["h"]] for p in cands], float))
        used_a, used_p = set(), set()
        for flat in np.argsort(-iou, axis=None, kind="stable"):
            i, j = divmod(int(flat), iou.shape[1])
            if iou[i, j] < kp_iou:
                break
            if i in used_a or j in used_p:
                continue
            used_a.add(i)
            used_p.add(j)
            _set_kp(cands[j], anns[i]["keypoints"])
        if len(anns) > len(used_a):
            drops["keypoints_unmatched"] += len(anns) - len(used_a)


def _set_kp(person: dict, kps: list) -> None:
    person["keypoints"] = [float(v) for v in kps]
    person["num_keypoints"] = int(sum(1 for v in kps[2::3] if v > 0))


def _image_labels(path: Path, objects: list[dict], image_ids: set[int], known: set[str],
                  drops: Counter) -> list[dict]:
    """Add image-level rows (no box) for the categories image_labels.json lists that have no
    instance annotation in that image; instance rows keep their boxes."""
    if not path.exists():
        return objects
    data = read_json(path)
    labels = data.get("labels") if isinstance(data, dict) else None
    if not isinstance(labels, dict):
        raise InputError(path, "expected {'labels': {image_id: [category names]}}")
    listed = {}
    for key, cats in labels.items():
        try:
            iid = int(key)
        except ValueError:
            raise InputError(path, f"image id {key!r} is not an integer") from None
        if iid not in image_ids:
            drops["image_labels_unknown_or_dropped_image"] += 1
            continue
        listed[iid] = cats
    out = list(objects)
    boxed = {(o["image_id"], o["category"]) for o in objects}
    for iid, cats in listed.items():
        for c in sorted(set(cats)):
            if known and c not in known:
                drops["image_labels_unknown_category"] += 1
                continue
            if c != "person" and (iid, c) not in boxed:
                out.append({"image_id": iid, "category": c, "source": "image_labels",
                            "x": np.nan, "y": np.nan, "w": np.nan, "h": np.nan})
    return out


_GENDER_MAP = {"female": "female", "male": "male"}


def _perceived_gender(path: Path, image_ids: set[int], drops: Counter) -> pd.DataFrame:
    cols = ["image_id", "perceived_gender", "skin"]
    if not path.exists():
        return pd.DataFrame(columns=cols).astype({"image_id": "int64"})
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise InputError(path, "file is empty")
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or "image_id" not in reader.fieldnames or \
            not ({"bb_gender", "gender"} & set(reader.fieldnames)):
        raise InputError(path, f"needs columns image_id and bb_gender (or gender); has "
                               f"{reader.fieldnames}")
    gcol = "bb_gender" if "bb_gender" in reader.fieldnames else "gender"
    rows, seen = [], set()
    for n, row in enumerate(reader, start=2):
        try:
            iid = int(row["image_id"])
        except (TypeError, ValueError):
            raise InputError(path, f"line {n}: image_id {row['image_id']!r} is not an "
                                   f"integer") from None
        if iid in seen:
            raise InputError(path, f"line {n}: duplicate image_id {iid}")
        seen.add(iid)
        if iid not in image_ids:
            drops["perceived_gender_unknown_image"] += 1
            continue
        g = _GENDER_MAP.get((row.get(gcol) or "").strip().lower(), "other")
        rows.append({"image_id": iid, "perceived_gender": g,
                     "skin": (row.get("bb_skin") or "").strip() or None})
    return pd.DataFrame(rows, columns=cols).sort_values("image_id", ignore_index=True)


def _attributes(path: Path, image_ids: set[int], drops: Counter) -> pd.DataFrame:
    """Optional per-image attributes (image_id + string columns); empty table when absent."""
    if not path.exists():
        return pd.DataFrame({"image_id": pd.Series(dtype="int64")})
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise InputError(path, f"unreadable CSV ({e})") from e
    if "image_id" not in df.columns:
        raise InputError(path, f"needs an image_id column; has {list(df.columns)}")
    try:
        df["image_id"] = df["image_id"].astype("int64")
    except ValueError:
        raise InputError(path, "image_id values must be integers") from None
    if df["image_id"].duplicated().any():
        raise InputError(path, "duplicate image_id values")
    known = df["image_id"].isin(image_ids)
    if (~known).sum():
        drops["attributes_unknown_image"] += int((~known).sum())
    return df[known].sort_values("image_id", ignore_index=True)
