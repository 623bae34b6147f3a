"""An OpenImages-layout dataset written by the tests: the official CSV headers
and MID format, MIAP person boxes with GenderPresentation, and malformed rows of every kind the
reader must count, with the expected counts returned.

The pictures are ``tests/foreign_coco.py``'s (shirt hue as the gender cue, scene and two objects
agreeing with the gender in ``agree`` of images, ``ratio`` men per woman), independent of
``biaslab.data.synthetic``. What is OpenImages here is the layout:

* ``oidv7-class-descriptions.csv`` (``LabelName,DisplayName``), real MIDs;
* ``images/train/<ImageID>.jpg`` and ``images/validation/<ImageID>.jpg`` (16 hex digits);
* ``oidv7-{train,val}-annotations-human-imagelabels.csv`` (positives with Confidence 1, a few
  verified negatives with Confidence 0, the person classes Man / Woman / Person);
* ``oidv6-{train,validation}-annotations-bbox.csv`` (V6 header with the XClick columns,
  coordinates normalised), object boxes and Man / Woman boxes;
* ``open_images_extended_miap_boxes_{train,val}.csv``: one box per figure, "Predominantly
  Feminine" / "Masculine"; a fifth of images hold a second, small figure in the corner whose
  presentation is "Unknown" (the largest-box rule must pick the main one).

Extras with known effects: an image with a woman and a man (gender ``other``), an image whose
only box is "Unknown", an image file that no annotation names, rows for ImageIDs that were not
downloaded, and malformed rows (short row, bad ImageID, unknown MID, box outside the image,
non-numeric coordinates, group box, bad GenderPresentation, bad Confidence).

Nothing here imports ``biaslab``.
"""
from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

try:
    from tests.foreign_coco import HEAD, LEGS, OBJECTS, PERSON_BOX, SCENE, SHIRT, SIZE, SKIN, \
        SLOTS, TORSO, TROUSERS, _draw_object
except ImportError:   # run as a script: python tests/foreign_openimages.py DIR
    from foreign_coco import HEAD, LEGS, OBJECTS, PERSON_BOX, SCENE, SHIRT, SIZE, SKIN, \
        SLOTS, TORSO, TROUSERS, _draw_object

MIDS = {"Person": "/m/01g317", "Man": "/m/04yx4", "Woman": "/m/03bt1vf",
        "Ball": "/m/018xm", "Skateboard": "/m/06_fw", "Coffee cup": "/m/02p5f1q",
        "Handbag": "/m/080hkjn", "Grass": "/m/08t9c_", "Kitchen": "/m/01h4ys"}
OI_NAME = {"sports ball": "Ball", "skateboard": "Skateboard", "cup": "Coffee cup",
           "handbag": "Handbag"}
LABEL_HEADER = ["ImageID", "Source", "LabelName", "Confidence"]
BBOX_HEADER = ["ImageID", "Source", "LabelName", "Confidence", "XMin", "XMax", "YMin", "YMax",
               "IsOccluded", "IsTruncated", "IsGroupOf", "IsDepiction", "IsInside",
               "XClick1X", "XClick2X", "XClick3X", "XClick4X", "XClick1Y", "XClick2Y",
               "XClick3Y", "XClick4Y"]
MIAP_HEADER = ["ImageID", "LabelName", "Confidence", "XMin", "XMax", "YMin", "YMax",
               "IsOccluded", "IsTruncated", "IsGroupOf", "IsDepictionOf", "IsInsideOf",
               "GenderPresentation", "AgePresentation"]
PRESENT = {"female": "Predominantly Feminine", "male": "Predominantly Masculine"}
SMALL = (6, 96, 18, 124)   # a distant figure in the bottom-left corner (x0, y0, x1, y1)


def _oid(k: int) -> str:
    return hashlib.sha1(f"oi{k}".encode()).hexdigest()[:16]


def _norm(x0, y0, x1, y1):
    return [f"{x0 / SIZE:.6f}", f"{x1 / SIZE:.6f}", f"{y0 / SIZE:.6f}", f"{y1 / SIZE:.6f}"]


def _figure(d: ImageDraw.ImageDraw, shirt, box=PERSON_BOX) -> None:
    """The foreign figure, scaled into ``box``."""
    bx0, by0, bx1, by1 = box
    px0, py0, px1, py1 = PERSON_BOX
    s, t = (bx1 - bx0) / (px1 - px0), (by1 - by0) / (py1 - py0)

    def tr(r):
        return (bx0 + (r[0] - px0) * s, by0 + (r[1] - py0) * t,
                bx0 + (r[2] - px0) * s, by0 + (r[3] - py0) * t)
    d.ellipse(tr(HEAD), fill=SKIN)
    d.rectangle(tr(TORSO), fill=shirt)
    for leg in LEGS:
        d.rectangle(tr(leg), fill=TROUSERS)


def write_foreign_openimages(root: str | Path, n_images: int = 120, ratio: float = 2.0,
                             agree: float = 0.85, seed: int = 11, image_size: int = SIZE) -> dict:
    """Write the dataset under ``root``; return the expected counts and the planted truth:
    ``images`` (prepared images), ``female``/``male``/``other`` (perceived gender rows),
    ``persons`` (valid MIAP boxes), ``objects`` (prepared object rows), ``drops`` {reason: n},
    ``excluded`` {reason: n}, ``n_female``, ``n_male`` (single-gender images), ``ratio``,
    ``agree``. ``image_size`` > 128 stores each picture upscaled (bicubic) to that side, as
    OpenImages' 1,024 px downloads (the CSVs' coordinates are normalised: unchanged)."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    n_male = int(round(n_images * ratio / (1 + ratio)))
    genders = np.array(["male"] * n_male + ["female"] * (n_images - n_male))
    rng.shuffle(genders)
    other = {"male": "female", "female": "male"}
    rows = {"labels": {"train": [], "validation": []}, "bbox": {"train": [], "validation": []},
            "miap": {"train": [], "validation": []}}
    n_persons = n_objects = 0
    specs = [(k, str(g)) for k, g in enumerate(genders)]
    specs += [(n_images, "both"), (n_images + 1, "unknown")]
    for k, g in specs:
        split = "validation" if k % 6 == 5 else "train"
        oid = _oid(k)
        main = g if g in SHIRT else "male"
        ctx = main if rng.random() < agree else other[main]
        _, sky, ground = SCENE[ctx]
        im = Image.new("RGB", (SIZE, SIZE), sky)
        d = ImageDraw.Draw(im)
        d.rectangle((0, int(rng.integers(60, 76)), SIZE, SIZE), fill=ground)
        objs = sorted({OBJECTS[main if rng.random() < agree else other[main]]
                       [int(rng.integers(2))] for _ in range(2)})
        slots = rng.choice([0, 1, 3], len(objs), replace=False)   # slot 2 holds the small one
        for j, (name, s) in enumerate(zip(objs, slots)):
            x, y = SLOTS[s]
            box, _ = _draw_object(d, name, x, y)
            bx, by, bw, bh = box
            mid = MIDS[OI_NAME[name]]
            if j == 0:   # the first object has a box and a label, the second a label only
                rows["bbox"][split].append([oid, "xclick", mid, "1", *_norm(bx, by, bx + bw,
                                                                             by + bh),
                                            "0", "0", "0", "0", "0"] + ["-1"] * 8)
            rows["labels"][split].append([oid, "verification", mid, "1"])
            n_objects += 1
        # a verified absence: the other group's object is not in the picture
        absent = OBJECTS[other[main]][0]
        if absent not in objs:
            rows["labels"][split].append([oid, "verification", MIDS[OI_NAME[absent]], "0"])
        figures = [(PERSON_BOX, main, PRESENT.get(g, "Unknown"))]
        if g == "both":
            figures = [((30, 24, 54, 112), "female", PRESENT["female"]),
                       ((74, 24, 98, 112), "male", PRESENT["male"])]
        elif k % 5 == 0:
            figures.append((SMALL, other[main], "Unknown"))
        for box, shirt, present in figures:
            _figure(d, SHIRT[shirt], box)
            rows["miap"][split].append([oid, MIDS["Person"], "1", *_norm(*box), "0", "0", "0",
                                        "0", "0", present, "Middle"])
            n_persons += 1
            word = {"Predominantly Feminine": "Woman", "Predominantly Masculine": "Man"}.get(
                present, "Person")
            rows["bbox"][split].append([oid, "xclick", MIDS[word], "1", *_norm(*box),
                                        "0", "0", "0", "0", "0"] + ["-1"] * 8)
            rows["labels"][split].append([oid, "verification", MIDS[word], "1"])
        arr = np.asarray(im).astype(np.int16)
        arr = np.clip(arr + rng.integers(-6, 7, arr.shape), 0, 255).astype(np.uint8)
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        out = Image.fromarray(arr)
        if image_size != SIZE:
            out = out.resize((image_size, image_size), Image.BICUBIC)
        out.save(root / "images" / split / f"{oid}.jpg", quality=95)

    # an image file no annotation names, and rows for an image that was not downloaded
    Image.new("RGB", (SIZE, SIZE), (90, 90, 90)).save(
        root / "images" / "train" / f"{_oid(10_000)}.jpg", quality=95)
    ghost = _oid(20_000)
    rows["labels"]["train"].append([ghost, "verification", MIDS["Ball"], "1"])
    rows["miap"]["train"].append([ghost, MIDS["Person"], "1", "0.1", "0.5", "0.1", "0.9",
                                  "0", "0", "0", "0", "0", "Predominantly Masculine", "Young"])
    # malformed rows, each on a real image
    a, b = _oid(0), _oid(1)
    rows["labels"]["train"] += [[a, "verification", MIDS["Ball"]],            # short row
                                ["not-an-image-id", "verification", MIDS["Ball"], "1"],
                                [a, "verification", "/m/0zzzzzz", "1"],       # unknown MID
                                [b, "verification", MIDS["Ball"], "yes"]]     # bad confidence
    rows["bbox"]["train"] += [[a, "xclick", MIDS["Ball"], "1", "0.5", "1.20", "0.1", "0.3",
                               "0", "0", "0", "0", "0"] + ["-1"] * 8,         # outside
                              [b, "xclick", MIDS["Ball"], "1", "0.2", "abc", "0.1", "0.3",
                               "0", "0", "0", "0", "0"] + ["-1"] * 8,         # not a number
                              [b, "xclick", MIDS["Skateboard"], "1", "0.1", "0.3", "0.6",
                               "0.8", "0", "0", "1", "0", "0"] + ["-1"] * 8]  # group box
    rows["miap"]["train"] += [[a, MIDS["Person"], "1", "0.0", "0.9", "0.2", "0.1", "0", "0",
                               "0", "0", "0", "Predominantly Feminine", "Young"],  # y1 < y0
                              [b, MIDS["Person"], "1", "0.0", "0.9", "0.0", "1.0", "0", "0",
                               "1", "0", "0", "Unknown", "Unknown"],          # group box
                              [b, MIDS["Person"], "1", "0.1", "0.2", "0.1", "0.2", "0", "0",
                               "0", "0", "0", "Feminine?", "Young"],          # bad presentation
                              [b, "/m/0zzzzzz", "1", "0.1", "0.2", "0.1", "0.2", "0", "0",
                               "0", "0", "0", "Unknown", "Young"]]            # unknown MID

    def write(name, header, data):
        with open(root / name, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(data)
    with open(root / "oidv7-class-descriptions.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["LabelName", "DisplayName"])
        w.writerows([[m, n] for n, m in MIDS.items()])
        w.writerow(["not-a-mid"])   # malformed class row
    for split, tag in (("train", "train"), ("validation", "val")):
        write(f"oidv7-{tag}-annotations-human-imagelabels.csv", LABEL_HEADER,
              rows["labels"][split])
        write(f"oidv6-{split}-annotations-bbox.csv", BBOX_HEADER, rows["bbox"][split])
        write(f"open_images_extended_miap_boxes_{tag}.csv", MIAP_HEADER, rows["miap"][split])

    n = n_images + 2
    person_boxes = sum(len(v) for v in rows["miap"].values()) - 1 - 4   # ghost, 4 malformed
    return {
        "images": n, "n_male": n_male, "n_female": n_images - n_male,
        "male": n_male, "female": n_images - n_male, "other": 2,
        "persons": person_boxes, "person_boxes_drawn": n_persons,
        # each image's objects: one with a box, one label-only (one row each; person classes
        # excluded)
        "objects": n_objects,
        "drops": {"class_malformed_row": 1, "label_malformed_row": 2, "label_unknown_class": 1,
                  "label_bad_confidence": 1, "bbox_box_outside_image": 1,
                  "bbox_malformed_coordinates": 1, "bbox_group_box": 1,
                  "miap_box_outside_image": 1, "miap_group_box": 1,
                  "miap_bad_gender_presentation": 1, "miap_unknown_class": 1,
                  "image_without_annotations": 1},
        "excluded": {"gender_both": 1, "gender_unknown": 1, "label_image_not_downloaded": 1,
                     "miap_image_not_downloaded": 1},
        "ratio": float(ratio), "agree": float(agree),
    }


if __name__ == "__main__":
    import sys
    # python tests/foreign_openimages.py DIR [N_IMAGES [IMAGE_SIZE]]
    print(write_foreign_openimages(sys.argv[1], *(int(a) for a in sys.argv[2:3]),
                                   **({"image_size": int(sys.argv[3])} if len(sys.argv) > 3
                                      else {})))
