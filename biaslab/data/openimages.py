"""Read OpenImages (V6 / V7 CSV layout, as downloaded) with MIAP person boxes into the prepared
tables of ``schema.md`` (paper 000 appendix B.1, Table 5).

Layout (``root``; each CSV may also sit in ``root/annotations/``)::

    *class-descriptions*.csv                       required: MID -> name (``LabelName,DisplayName``
                                                   with a header, or headerless ``/m/..,Name``)
    open_images_extended_miap_boxes_<split>.csv    required: MIAP person boxes (Schumann et al.
                                                   2021) with GenderPresentation, AgePresentation
    *<split>*annotations-human-imagelabels*.csv    optional: ImageID,Source,LabelName,Confidence
    *<split>*annotations-bbox*.csv                 optional: ImageID,Source,LabelName,Confidence,
                                                   XMin,XMax,YMin,YMax,...,IsGroupOf,...
    images/<split>/<ImageID>.jpg  or  <split>/<ImageID>.jpg  or  images/<ImageID>.jpg  or
    <ImageID>.jpg (.jpeg, .png; the first found wins)

``<split>`` is ``train``, ``validation`` (also spelt ``val``) or ``test``, read from the file
name. An image is in the data when its file exists and some annotation file of the data names it
(its split is the directory's, else the annotation file's); an image file no annotation names is
dropped (``image_without_annotations``). Rows for ImageIDs without a file (a user downloads part
of OpenImages) are not errors: they are counted in ``excluded`` (``<kind>_image_not_downloaded``).

**Protocol (paper 000 app. A.1, B.1).**
* Persons are the MIAP boxes (``persons`` table, pixels of the stored image: the CSVs give
  coordinates normalised to [0, 1]); the mask stage then takes the largest box and the second
  when it exceeds 55,000 px, as for COCO.
* Image gender from MIAP's GenderPresentation over the image's person boxes: only
  "Predominantly Feminine" -> ``female``; only "Predominantly Masculine" -> ``male``; both, or
  only "Unknown" -> ``other`` (left out of every gendered result, as COCO's images that captions
  do not gender; counted in ``excluded``: ``gender_both``, ``gender_unknown``). A box with
  "Unknown" beside known ones does not change the image's gender (as a caption's "person").
* Objects: the bbox file's instance boxes (``source = instances``) and the positive human-verified
  image-level labels (Confidence 1; ``source = image_labels``, one box-less row per class without
  an instance in the image). Confidence-0 labels are verified absences, not objects (``excluded``:
  ``image_label_negative``). Names are the DisplayNames lower-cased ("baseball (sport)" as in
  paper 000's list). Person-related classes (``PERSON_CLASSES``: Person, Man, Woman, Boy, Girl
  and the Human body-part classes) are excluded (``excluded``: ``person_class``), as paper 000
  removes "person-related classes (e.g., person class)"; its OpenImages list keeps smile,
  forehead, baby, toddler and bride, so only these go.
* There are no captions: the captions table is empty and the caption stages (captioners, LIBRA,
  LIC on human captions) skip with a note (``biaslab.runtime.io.has_captions``).

**Malformed rows are dropped and counted** (``drops``, by reason ``<kind>_<problem>``, kinds
``class``, ``label``, ``bbox``, ``miap``): a row with the wrong number of fields or an ImageID
that is not 16 hex digits (``malformed_row``), coordinates that are not numbers
(``malformed_coordinates``) or outside [0, 1] or empty (``box_outside_image``), a MID not in the
class descriptions (``unknown_class``), a group box (``IsGroupOf`` = 1: ``group_box``), a
Confidence that is not a number in [0, 1] (``bad_confidence``), a GenderPresentation MIAP does
not define (``bad_gender_presentation``); image files as ``biaslab.data.coco.check_image``.
Whole-file problems (no class descriptions or MIAP file, a CSV without its required columns, an
empty file) raise ``InputError`` naming the file.

``image_id`` is the rank of the ImageID in sorted order (1-based, int64, as the schema's ids):
the same files give the same ids; ``file_name`` keeps ``<ImageID>.<ext>``.
"""
from __future__ import annotations

import csv
import io
import os
import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from biaslab.runtime.io import InputError

#: person-related OpenImages classes removed from the objects (lower-cased DisplayNames)
PERSON_CLASSES = frozenset({
    "person", "man", "woman", "boy", "girl",
    "human face", "human head", "human body", "human hair", "human eye", "human nose",
    "human mouth", "human ear", "human arm", "human hand", "human leg", "human foot",
    "human beard"})
#: MIAP GenderPresentation -> prepared perceived gender of one box
GENDER_PRESENTATION = {"predominantly feminine": "female", "predominantly masculine": "male",
                       "unknown": "unknown"}
#: the official column names, matched case-insensitively
_COLUMNS = {c.lower(): c for c in (
    "ImageID", "Source", "LabelName", "DisplayName", "Confidence", "XMin", "XMax", "YMin",
    "YMax", "IsOccluded", "IsTruncated", "IsGroupOf", "IsDepiction", "IsDepictionOf", "IsInside",
    "IsInsideOf", "GenderPresentation", "AgePresentation")}
_ID_RE = re.compile(r"^[0-9a-f]{16}$")
_SPLIT_RE = re.compile(r"(?:^|[_\-.])(train|validation|val|test)(?=[_\-.])")
_IMAGE_EXT = (".jpg", ".jpeg", ".png")
#: ``_reader``'s marker of a well-formed row whose image was not downloaded
ABSENT = object()


def _split_of(name: str) -> str | None:
    m = _SPLIT_RE.search(name.lower())
    if not m:
        return None
    return "validation" if m.group(1) == "val" else m.group(1)


def find(root: Path, pattern: str) -> list[Path]:
    """The files matching ``pattern`` in ``root`` and ``root/annotations``; InputError for
    one whose real path (symlinks resolved) leaves ``root``."""
    from biaslab.data.coco import inside
    found = {p for d in (root, root / "annotations") if d.is_dir() for p in d.glob(pattern)}
    for p in found:
        if not inside(p, root):
            raise InputError(p, f"leaves the dataset root {root} (a symlink to "
                                f"{os.path.realpath(p)}); inputs must lie inside data.root")
    return sorted(found)


def _reader(path: Path, required: tuple[str, ...], present=None):
    """Open a CSV with a header; yield (line number, row dict) and check the columns. A row
    with the wrong number of fields yields None; with ``present`` (a set of lower-case
    ImageIDs), a row of another image yields ``ABSENT`` before any dict is built (the full
    OpenImages CSVs hold tens of millions of rows, most of images not downloaded)."""
    try:
        fh = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise InputError(path, f"cannot read ({e})") from e
    with fh:
        r = csv.reader(fh)
        header = next(r, None)
        if not header:
            raise InputError(path, "file is empty (expected a CSV header)")
        header = [h.strip().lstrip("\ufeff") for h in header]
        names = [_COLUMNS.get(h.lower(), h) for h in header]
        missing = [c for c in required if c not in names]
        if missing:
            raise InputError(path, f"missing column(s) {missing} (has {header}); not the "
                                   f"OpenImages layout")
        n = len(header)
        k = names.index("ImageID")
        for line, row in enumerate(r, start=2):
            if len(row) != n:
                yield line, None
            elif present is not None and row[k].strip().lower() not in present:
                yield line, (ABSENT if _ID_RE.match(row[k].strip().lower()) else None)
            else:
                yield line, {c: v.strip() for c, v in zip(names, row)}


def read_classes(paths: list[Path], drops: Counter) -> dict[str, str]:
    """MID -> lower-cased DisplayName from one or more class-description CSVs (header
    ``LabelName,DisplayName`` or none). Raises InputError for an empty file or none at all."""
    if not paths:
        raise InputError("<root>/*class-descriptions*.csv", "no OpenImages class descriptions "
                         "file (e.g. oidv7-class-descriptions.csv)")
    out: dict[str, str] = {}
    for path in paths:
        text = path.read_text(encoding="utf-8-sig")
        rows = list(csv.reader(io.StringIO(text)))
        if not rows:
            raise InputError(path, "file is empty")
        if rows[0] and not rows[0][0].strip().startswith("/"):
            rows = rows[1:]   # a header (LabelName,DisplayName)
        for row in rows:
            if len(row) < 2 or not row[0].strip().startswith("/") or not row[1].strip():
                drops["class_malformed_row"] += 1
                continue
            out[row[0].strip()] = " ".join(row[1].split()).lower()
    return out


def _box(row: dict) -> tuple[str | None, tuple[float, float, float, float] | None]:
    try:
        x0, x1, y0, y1 = (float(row[k]) for k in ("XMin", "XMax", "YMin", "YMax"))
    except (TypeError, ValueError):
        return "malformed_coordinates", None
    if not all(np.isfinite([x0, x1, y0, y1])):
        return "malformed_coordinates", None
    eps = 1e-6
    if min(x0, y0) < -eps or max(x1, y1) > 1 + eps:
        return "box_outside_image", None
    # clip the rounding slack first: a box inside [-eps, 0] or [1, 1 + eps] has no area left
    x0, x1, y0, y1 = max(x0, 0.0), min(x1, 1.0), max(y0, 0.0), min(y1, 1.0)
    if x1 <= x0 or y1 <= y0:
        return "box_outside_image", None
    return None, (x0, x1, y0, y1)


def _flag(v: str) -> bool:
    return v.strip() in ("1", "1.0", "true", "True")


def _image_files(root: Path) -> dict[str, tuple[Path, str | None]]:
    """ImageID -> (file, split of its directory or None)."""
    out: dict[str, tuple[Path, str | None]] = {}
    dirs: list[tuple[Path, str | None]] = []
    for base in (root / "images", root):
        if base.is_dir():
            for d in sorted(base.iterdir()):
                if d.is_dir() and _split_of(f"_{d.name}_") and d.name.lower() in (
                        "train", "validation", "val", "test"):
                    dirs.append((d, _split_of(f"_{d.name}_")))
    if (root / "images").is_dir():
        dirs.append((root / "images", None))
    dirs.append((root, None))   # images beside the CSVs
    for d, split in dirs:
        for p in sorted(d.iterdir()):
            if p.is_file() and p.suffix.lower() in _IMAGE_EXT and _ID_RE.match(p.stem.lower()):
                out.setdefault(p.stem.lower(), (p, split))
    return out


def read_openimages(root: str | os.PathLike, check_files: bool = True,
                    person_classes=PERSON_CLASSES, progress: bool = True
                    ) -> tuple[dict[str, pd.DataFrame], dict[str, int], dict[str, int]]:
    """Read an OpenImages directory (module docstring) into the prepared tables.

    Args:
        root: dataset directory (kept as given in the ``path`` column).
        check_files: read and check every image (``biaslab.data.coco.check_image``); its size
            becomes width/height (the CSVs carry none), its digest the ``digest`` column.
        person_classes: lower-cased class names removed from the objects.
        progress: tqdm bars.

    Returns:
        ``(tables, drops, excluded)``: tables ``images, captions (empty), persons, objects,
        perceived_gender, attributes`` as ``schema.md`` (persons add ``gender_presentation``
        and ``age_presentation``); ``drops`` {reason: count} of malformed rows and files;
        ``excluded`` {reason: count} of well-formed rows the protocol leaves out.

    Raises:
        InputError: root missing, no class descriptions or MIAP file, a CSV without its
            required columns, no usable image.
    """
    from PIL import Image

    from biaslab.data.coco import check_image, inside
    root_str, root = str(root), Path(root)
    if not root.is_dir():
        raise InputError(root, "OpenImages root directory not found")
    drops: Counter = Counter()
    excluded: Counter = Counter()
    classes = read_classes(find(root, "*class-descriptions*.csv"), drops)
    miap_files = find(root, "open_images_extended_miap_boxes_*.csv")
    if not miap_files:
        raise InputError(root, "no MIAP person-box file (open_images_extended_miap_boxes_"
                               "<split>.csv): image gender comes from MIAP")
    label_files = find(root, "*annotations-human-imagelabels*.csv")
    bbox_files = find(root, "*annotations-bbox*.csv")
    files = _image_files(root)

    # -- annotation rows of the downloaded images -----------------------------------------
    named: dict[str, str | None] = {}    # ImageID -> split of the first annotation naming it
    miap_rows, label_rows, bbox_rows = [], [], []
    specs = [("miap", miap_files, ("ImageID", "LabelName", "XMin", "XMax", "YMin", "YMax",
                                   "IsGroupOf", "GenderPresentation"), miap_rows),
             ("label", label_files, ("ImageID", "LabelName", "Confidence"), label_rows),
             ("bbox", bbox_files, ("ImageID", "LabelName", "XMin", "XMax", "YMin", "YMax"),
              bbox_rows)]
    for kind, paths, required, sink in specs:
        for path in paths:
            fsplit = _split_of(path.name)
            for _, row in tqdm(_reader(path, required, set(files)), desc=path.name,
                               disable=not progress, leave=False, mininterval=2.0):
                if row is ABSENT:
                    excluded[f"{kind}_image_not_downloaded"] += 1
                    continue
                if row is None or not _ID_RE.match(row["ImageID"].lower()):
                    drops[f"{kind}_malformed_row"] += 1
                    continue
                oid = row["ImageID"].lower()
                named.setdefault(oid, fsplit)
                if row["LabelName"] not in classes:
                    drops[f"{kind}_unknown_class"] += 1
                    continue
                if kind == "label":
                    try:
                        conf = float(row["Confidence"])
                    except ValueError:
                        conf = -1.0
                    if not 0.0 <= conf <= 1.0:
                        drops["label_bad_confidence"] += 1
                        continue
                    if conf < 0.5:
                        excluded["image_label_negative"] += 1
                        continue
                    sink.append((oid, classes[row["LabelName"]]))
                    continue
                problem, box = _box(row)
                if problem:
                    drops[f"{kind}_{problem}"] += 1
                    continue
                if _flag(row.get("IsGroupOf", "0")):
                    drops[f"{kind}_group_box"] += 1
                    continue
                if kind == "miap":
                    gp = GENDER_PRESENTATION.get(" ".join(row["GenderPresentation"].split())
                                                 .lower())
                    if gp is None:
                        drops["miap_bad_gender_presentation"] += 1
                        continue
                    sink.append((oid, box, gp, row.get("AgePresentation") or "Unknown"))
                else:
                    sink.append((oid, box, classes[row["LabelName"]]))

    # -- images: a file some annotation names ----------------------------------------------
    drops["image_without_annotations"] += sum(1 for oid in files if oid not in named)
    if not drops["image_without_annotations"]:
        del drops["image_without_annotations"]
    ids = {oid: k + 1 for k, oid in enumerate(sorted(named))}
    images, sizes = [], {}
    for oid in tqdm(sorted(named), desc="images", disable=not progress, leave=False):
        path, dsplit = files[oid]
        digest = None
        if not inside(path, root):                   # a symlink out of the dataset
            drops["image_outside_root"] += 1
            continue
        if check_files:
            problem, digest = check_image(path)
            if problem:
                drops[problem] += 1
                continue
        with Image.open(path) as im:
            w, h = im.size
        sizes[oid] = (w, h)
        images.append({"image_id": ids[oid], "file_name": path.name,
                       "path": os.path.join(root_str, os.path.relpath(path, root)),
                       "width": int(w), "height": int(h),
                       "coco_split": dsplit or named[oid] or "unknown", "digest": digest})
    if not images:
        raise InputError(root, "no usable image (an image needs a file under images/<split>/ "
                               "and a row in an annotation file; dropped: "
                               f"{dict(drops)})")

    def px(oid, box):
        w, h = sizes[oid]
        x0, x1, y0, y1 = box
        return x0 * w, y0 * h, (x1 - x0) * w, (y1 - y0) * h

    persons, genders = [], defaultdict(set)
    for oid, box, gp, age in miap_rows:
        if oid not in sizes:
            drops["miap_of_dropped_image"] += 1
            continue
        x, y, w, h = px(oid, box)
        persons.append({"image_id": ids[oid], "x": x, "y": y, "w": w, "h": h,
                        "area": w * h, "polygon": "[]", "keypoints": None, "num_keypoints": 0,
                        "gender_presentation": gp, "age_presentation": age})
        genders[oid].add(gp)
    objects, boxed = [], set()
    for oid, box, name in bbox_rows:
        if oid not in sizes:
            drops["bbox_of_dropped_image"] += 1
        elif name in person_classes:
            excluded["person_class"] += 1
        else:
            x, y, w, h = px(oid, box)
            objects.append({"image_id": ids[oid], "category": name, "source": "instances",
                            "x": x, "y": y, "w": w, "h": h})
            boxed.add((oid, name))
    for oid, name in sorted(set(label_rows)):
        if oid not in sizes:
            drops["label_of_dropped_image"] += 1
        elif name in person_classes:
            excluded["person_class"] += 1
        elif (oid, name) not in boxed:
            objects.append({"image_id": ids[oid], "category": name, "source": "image_labels",
                            "x": np.nan, "y": np.nan, "w": np.nan, "h": np.nan})

    gender_rows = []
    for oid in sorted(sizes):
        known = genders.get(oid, set()) - {"unknown"}
        if not genders.get(oid):
            excluded["gender_no_person_box"] += 1
            continue
        g = known.pop() if len(known) == 1 else "other"
        if g == "other":
            excluded["gender_both" if known else "gender_unknown"] += 1
        gender_rows.append({"image_id": ids[oid], "perceived_gender": g, "skin": None})

    pcols = ["ann_id", "image_id", "x", "y", "w", "h", "area", "polygon", "keypoints",
             "num_keypoints", "gender_presentation", "age_presentation"]
    persons_df = pd.DataFrame(persons, columns=pcols[1:])
    persons_df = persons_df.sort_values(["image_id", "area"], ascending=[True, False],
                                        kind="stable", ignore_index=True)
    persons_df.insert(0, "ann_id", np.arange(1, len(persons_df) + 1, dtype=np.int64))
    persons_df["num_keypoints"] = persons_df["num_keypoints"].astype("int64")
    tables = {
        "images": pd.DataFrame(images).sort_values("image_id", ignore_index=True),
        "captions": pd.DataFrame({"caption_id": pd.Series(dtype="int64"),
                                  "image_id": pd.Series(dtype="int64"),
                                  "caption": pd.Series(dtype="object")}),
        "persons": persons_df,
        "objects": pd.DataFrame(objects, columns=["image_id", "category", "source", "x", "y",
                                                  "w", "h"]
                                ).sort_values(["image_id", "category", "source", "x", "y"],
                                              ignore_index=True),
        "perceived_gender": pd.DataFrame(gender_rows, columns=["image_id", "perceived_gender",
                                                               "skin"]),
        "attributes": pd.DataFrame({"image_id": pd.Series(dtype="int64")}),
    }
    tables["images"]["image_id"] = tables["images"]["image_id"].astype("int64")
    tables["perceived_gender"]["image_id"] = tables["perceived_gender"]["image_id"].astype(
        "int64")
    return tables, dict(sorted(drops.items())), dict(sorted(excluded.items()))
