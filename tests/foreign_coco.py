"""A COCO-layout dataset written by the tests, independent of ``biaslab.data.synthetic``:
a planted gender-context bias known by construction, a gender cue the project's
generator never draws, and a skewed gender ratio.

* People: one standing figure per image (head disc, torso, legs), the same silhouette and
  size for both groups. The gender cue is the **shirt's hue**: men teal (40, 120, 150), women
  rust (160, 90, 50), of nearly equal luma (97.4 / 100.1), so a person-masked image carries no
  cue and an unmasked one does (the project's generator uses stripe direction on grey).
* Context, agreeing with the person's gender in ``agree`` of images (per attribute,
  independently): the **scene** (men: a green field under a pale sky; women: a beige room with
  a brown floor) and two **objects** from COCO's categories (men: sports ball, skateboard;
  women: cup, handbag), drawn as distinct shapes away from the person and annotated with
  boxes, polygons and complete image-level labels.
* Captions: five per image, four naming the person with a gender word ("man", "woman", "he",
  "she"), one with "person"; each names the scene and one object.
* Men : women = ``ratio`` : 1 in every split (the default 2 : 1), one COCO split
  ``train2017``; the project's ``split`` stage divides it.

Nothing here imports ``biaslab``: the data must not share the generator's assumptions.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

SIZE = 128
SHIRT = {"male": (40, 120, 150), "female": (160, 90, 50)}
SCENE = {"male": ("field", (200, 220, 235), (70, 140, 60)),
         "female": ("kitchen", (215, 200, 175), (120, 85, 60))}
OBJECTS = {"male": ("sports ball", "skateboard"), "female": ("cup", "handbag")}
CATEGORIES = {"person": 1, "sports ball": 37, "skateboard": 41, "cup": 47, "handbag": 31}
# figure geometry (pixels, 128 x 128 image): the same for both groups
HEAD = (56, 24, 72, 40)
TORSO = (52, 40, 76, 78)
LEGS = [(53, 78, 62, 112), (66, 78, 75, 112)]
SKIN, TROUSERS = (205, 170, 140), (60, 60, 70)
PERSON_BOX = (52, 24, 76, 112)   # x0, y0, x1, y1
SLOTS = [(8, 70), (92, 70), (10, 92), (94, 92)]   # object anchors beside the person


def _draw_object(d: ImageDraw.ImageDraw, name: str, x: int, y: int) -> tuple[list, list]:
    """Draw ``name`` at anchor (x, y); return its COCO bbox [x, y, w, h] and polygon."""
    if name == "sports ball":
        d.ellipse((x, y, x + 18, y + 18), fill=(245, 245, 245), outline=(30, 30, 30))
        box = [x, y, 18, 18]
    elif name == "skateboard":
        d.rectangle((x, y + 8, x + 24, y + 13), fill=(150, 30, 40))
        d.ellipse((x + 2, y + 13, x + 7, y + 18), fill=(20, 20, 20))
        d.ellipse((x + 17, y + 13, x + 22, y + 18), fill=(20, 20, 20))
        box = [x, y + 8, 24, 10]
    elif name == "cup":
        d.rectangle((x + 4, y + 2, x + 16, y + 18), fill=(230, 200, 40))
        d.arc((x + 13, y + 6, x + 21, y + 14), 270, 90, fill=(230, 200, 40), width=2)
        box = [x + 4, y + 2, 17, 16]
    elif name == "handbag":
        d.polygon([(x + 2, y + 18), (x + 22, y + 18), (x + 18, y + 6), (x + 6, y + 6)],
                  fill=(110, 40, 130))
        d.arc((x + 7, y, x + 17, y + 10), 180, 360, fill=(110, 40, 130), width=2)
        box = [x + 2, y, 20, 18]
    else:
        raise ValueError(name)
    bx, by, bw, bh = box
    return box, [[bx, by, bx + bw, by, bx + bw, by + bh, bx, by + bh]]


def _person_polygon(head: str = "box") -> list:
    """The figure's outline as one COCO polygon, clockwise: torso and legs exact, the head as
    its bounding square (``head="box"``: like COCO's hand-drawn polygons, a little looser than
    the person, so a cut-out carries some of its background) or as a 16-gon on the disc
    (``"ellipse"``: the person's exact outline)."""
    (hx0, hy0, hx1, hy1), (tx0, ty0, tx1, ty1) = HEAD, TORSO
    (l0x0, _, l0x1, ly1), (l1x0, _, l1x1, _) = LEGS
    if head == "box":
        top, back = [hx0, hy0, hx1, hy0, hx1, ty0], [hx0, ty0]
    elif head == "ellipse":   # the disc touches the torso at its bottom point (cx, ty0)
        cx, cy, r = (hx0 + hx1) / 2, (hy0 + hy1) / 2, (hx1 - hx0) / 2

        def arc(t0, t1, k):
            return [v for t in np.linspace(t0, t1, k) for v in (cx + r * np.cos(t),
                                                                 cy + r * np.sin(t))]
        top = arc(np.pi, 2.5 * np.pi, 13)         # left, over the top, down to the bottom
        back = [cx, ty0] + arc(0.5 * np.pi, np.pi, 5)[2:]   # up the left side to the start
    else:
        raise ValueError(head)
    pts = top + [tx1, ty0, tx1, ty1, l1x1, ty1, l1x1, ly1, l1x0, ly1, l1x0, ty1, l0x1, ty1,
                 l0x1, ly1, l0x0, ly1, l0x0, ty1, tx0, ty1, tx0, ty0] + back
    return [[round(float(p), 2) for p in pts]]


def write_foreign_coco(root: str | Path, n_images: int = 300, ratio: float = 2.0,
                       agree: float = 0.85, seed: int = 7, head_polygon: str = "box",
                       flip_context: bool = False) -> dict:
    """Write the dataset under ``root`` (COCO layout: ``annotations/captions_train2017.json``,
    ``instances_train2017.json``, ``image_labels.json``, ``images/train2017/*.png``).

    Args:
        n_images: images in all (one person each).
        ratio: men per woman.
        agree: probability that each context attribute (scene, each object) agrees with the
            person's gender.
        seed: numpy seed.
        head_polygon: ``"box"`` or ``"ellipse"`` (:func:`_person_polygon`).
        flip_context: give each group the other group's scene and objects (men: kitchen,
            cup, handbag), so the planted context's colours no longer resemble the group's
            shirt (teal ~ the field's green and sky, rust ~ the kitchen's browns).

    Returns:
        the planted truth: ``{"n_male", "n_female", "ratio", "agree", "cue", "context"}``.
    """
    root = Path(root)
    split = "train2017"
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / "images" / split).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    n_male = int(round(n_images * ratio / (1 + ratio)))
    genders = np.array(["male"] * n_male + ["female"] * (n_images - n_male))
    rng.shuffle(genders)
    other = {"male": "female", "female": "male"}
    scene_of, objects_of = ({g: SCENE[other[g]] for g in SCENE}, {g: OBJECTS[other[g]] for g in
                            OBJECTS}) if flip_context else (SCENE, OBJECTS)
    images, captions, anns, labels = [], [], [], {}
    aid = 1
    for k, g in enumerate(genders):
        iid = 1000 + k
        ctx = g if rng.random() < agree else other[g]
        scene, sky, ground = scene_of[ctx]
        im = Image.new("RGB", (SIZE, SIZE), sky)
        d = ImageDraw.Draw(im)
        horizon = int(rng.integers(60, 76))
        d.rectangle((0, horizon, SIZE, SIZE), fill=ground)
        # the two objects, each agreeing with the gender with probability `agree`
        objs = [objects_of[g if rng.random() < agree else other[g]][int(rng.integers(2))]
                for _ in range(2)]
        slots = rng.choice(len(SLOTS), 2, replace=False)
        boxes = []
        for name, s in zip(objs, slots):
            x, y = SLOTS[s]
            box, poly = _draw_object(d, name, x + int(rng.integers(-4, 5)),
                                     y + int(rng.integers(-3, 4)))
            boxes.append((name, box, poly))
        # the person: same silhouette for both groups, the shirt's hue is the cue
        d.ellipse(HEAD, fill=SKIN)
        d.rectangle(TORSO, fill=SHIRT[g])
        for leg in LEGS:
            d.rectangle(leg, fill=TROUSERS)
        arr = np.asarray(im).astype(np.int16)
        arr = np.clip(arr + rng.integers(-6, 7, arr.shape), 0, 255).astype(np.uint8)
        fn = f"{iid:012d}.png"
        Image.fromarray(arr).save(root / "images" / split / fn)
        images.append({"id": iid, "file_name": fn, "width": SIZE, "height": SIZE})
        x0, y0, x1, y1 = PERSON_BOX
        anns.append({"id": aid, "image_id": iid, "category_id": 1, "iscrowd": 0,
                     "bbox": [x0, y0, x1 - x0, y1 - y0], "area": float((x1 - x0) * (y1 - y0)),
                     "segmentation": _person_polygon(head_polygon)})
        aid += 1
        for name, box, poly in boxes:
            anns.append({"id": aid, "image_id": iid, "category_id": CATEGORIES[name],
                         "iscrowd": 0, "bbox": box, "area": float(box[2] * box[3]),
                         "segmentation": poly})
            aid += 1
        labels[str(iid)] = sorted({"person", *objs})
        word, pron = ("man", "he") if g == "male" else ("woman", "she")
        place = "on a field" if scene == "field" else "in a kitchen"
        o = objs[0]
        texts = [f"a {word} standing {place} next to a {o}.",
                 f"a {word} {place} with a {o} nearby.",
                 f"the {word} is standing beside a {o} {place}.",
                 f"{pron} stands {place} near a {o}.",
                 f"a person {place} with a {o}."]
        for j, t in enumerate(texts):
            captions.append({"id": iid * 10 + j, "image_id": iid, "caption": t})
    cats = [{"id": v, "name": k, "supercategory": "x"} for k, v in CATEGORIES.items()]
    (root / "annotations" / f"captions_{split}.json").write_text(
        json.dumps({"images": images, "annotations": captions}))
    (root / "annotations" / f"instances_{split}.json").write_text(
        json.dumps({"images": images, "annotations": anns, "categories": cats}))
    (root / "annotations" / "image_labels.json").write_text(
        json.dumps({"description": "complete object sets", "labels": labels}))
    return {"n_male": int(n_male), "n_female": int(n_images - n_male), "ratio": float(ratio),
            "agree": float(agree), "cue": "shirt hue", "context": ["scene", "objects"],
            "male_scene": scene_of["male"][0]}


if __name__ == "__main__":
    import sys
    # python tests/foreign_coco.py DIR [N_IMAGES [HEAD_POLYGON [flip]]]
    print(write_foreign_coco(sys.argv[1], *(int(a) for a in sys.argv[2:3]),
                             **({"head_polygon": sys.argv[3]} if len(sys.argv) > 3 else {}),
                             flip_context=len(sys.argv) > 4 and sys.argv[4] == "flip"))
