"""Deterministic synthetic dataset in official COCO layout with a planted gender-context bias.

This is the pipeline's embedded default data source: it needs no network and no pretrained
weights, and it gives ground truth. With ``bias = 0`` gender is independent of every context
attribute (objects, scene, colour cast), so bias metrics must read "unbiased"; they must grow
with ``bias``.

Every image shows exactly one person drawn with PIL. Gender is balanced in the training pool
(``ceil(n/2)`` female, ``floor(n/2)`` male, seeded shuffle); an optional separate test split
(``test_images``, COCO split ``synthtest``) has ``test_gender_ratio`` men per woman (COCO's
test set: 2.3). Both genders have the same silhouette and colours; gender is visible only in the
direction of the tunic's accent stripes (renderer version 3, issue 23 item 2: a uniform fill
over the person must not look like either gender, and the person's box must not tell gender):

* female: horizontal stripes;
* male: vertical stripes.

Head, hair, torso outline, arms, legs, shoes and every colour palette are shared; no part is
drawn rectangular or in a gender-specific colour (:func:`_figure` gives the measurements).

Skin, hair and clothing colours, arm pose, position and size are drawn from the *same*
distributions for both genders. The person stands in a placement box that covers 10-35 % of the
image (uniform; aspect 0.8 : 1, feet below the horizon when there is room); the figure is as tall
as the box and horizontally centred in it, so its own bounding box is narrower (its width depends
on the body shape and the arms). Objects avoid the placement box when they can.

Planted structure, for gender ``g`` and bias ``b`` in [0, 1] (``s = +1`` if the attribute is
associated with ``g``, ``-1`` if with the other gender, ``0`` if neutral):

(a) **Labeled objects** (real COCO ids and names, boxes + polygons in ``instances_synth.json``):
    ``P(object present | g) = P_OBJECT * (1 + s * b)`` with ``P_OBJECT = 0.35`` (so at most
    0.665, the clamp to [0, 1] never triggers), independently per object.
    Female-associated: handbag, umbrella, cup, cell phone. Male-associated: tie, sports ball,
    skateboard, baseball bat. Neutral (``s = 0``): bicycle, dog.
(b) **Scene** (background; named in captions, not in instances):
    ``P(scene group associated with g | g) = (1 + b) / 2``, split evenly between the two scenes
    of the group, so each scene has probability ``(1 + s * b) / 4``. Female-associated: kitchen,
    beach; male-associated: field, street.
(c) **Unlabeled attribute**: a global colour cast (the whole image is blended with an orange
    ("warm") or a blue ("cool") tint, ``CAST_STRENGTH``):
    ``P(warm | female) = (1 + b) / 2``, ``P(warm | male) = (1 - b) / 2``. The cast appears in no
    annotation and no caption: resampling on labels cannot see it (Hirota et al., "Resampled
    Datasets Are Not Enough", EMNLP 2024 -- paper 000 -- sec. 2.1). It is recorded only in the
    returned summary and in ``annotations/synth_truth.csv``.

With ``b = 0`` all three are independent of gender. All draws are independent Bernoulli /
categorical draws given gender, so e.g. the expected difference
``P(female-associated object | female) - P(... | male)`` is ``2 * P_OBJECT * b`` and the scene-
and cast-group differences are ``b``.

Captions (``captions_per_image`` per image, template based, COCO vocabulary) name the scene and
some of the present objects. Each caption independently uses a gender-neutral subject
("a person", "someone", possessive "their") with probability ``p_no_gender_word``, otherwise
words of the person's true gender from ``biaslab.gender.WORD_LISTS["lic"]`` (woman, lady, girl,
she, her / man, gentleman, boy, guy, he, his). A caption never contains a word of the other
gender.

Output layout (``out_dir``), readable by ``biaslab.coco.read_coco`` (split name ``synth``)::

    annotations/captions_synth.json          COCO captions
    annotations/instances_synth.json         COCO instances (person + objects, polygons)
    annotations/person_keypoints_synth.json  COCO keypoints (17, from the drawn figure)
    annotations/perceived_gender_skin.csv    image_id,bb_gender,bb_skin (Male/Female, skin empty)
    annotations/image_labels.json            {"description", "labels": {id: [category names]}}
    annotations/synth_truth.csv              image_id,gender,scene,cast,objects (';'-joined)
    annotations/image_attributes.csv         image_id,scene,cast (read by biaslab.coco)
    annotations/synth_params.json            generator arguments + renderer version
    images/synth/<12-digit id>.png           the images (ids start at 1)
    probe/pairs.csv                          probe manifest (PROBE_COLUMNS), if probe_pairs
    probe/images/<attr>_<pair>_<value>.png   probe images (value: female/male-associated)
    README.md                                what was planted, with the realised counts

Annotations: one person per image; ``bbox`` = [x, y, w, h] of the polygon points (pixels),
``segmentation`` = one polygon per drawn body/object part (COCO list of flat lists), ``area`` =
area of the union mask (pycocotools), ``iscrowd`` 0; the person's 17 keypoints (COCO order, the
figure faces the viewer so ``left_*`` is on the image right) come from the figure geometry, all
with visibility 2. Person and keypoint annotations share ids.

Randomness: each image draws from independent, separately seeded streams
(``SeedSequence([seed, 0x5EED, image key, stream, slot])``): ``scene`` (background and horizon),
``placement`` (the person's placement box, drawn before and independently of the figure),
``order`` (drawing order of the objects), ``object`` slot k (size, position and colours of the
k-th drawn object), ``appearance`` (colours and arm pose of the person; the same draws for both
genders) and ``captions``. The planted truth (gender, objects, scene, cast) comes from
:func:`sample_truth`. Hence :func:`render_scene` re-draws the *same* scene with a person of
another gender and/or appearance, and only pixels inside the union of the two persons' masks
change (the ``render`` counterfactual backend, ``biaslab.counterfactual.render``).

Probe pairs (``probe_pairs`` > 0; the causal attribute-sensitivity probe, ``biaslab.probe``):
for each planted attribute in ``PROBE_ATTRIBUTES`` (``objects``: ``PROBE_OBJECTS``
female-associated objects vs as many male-associated ones in the same slots; ``scene``: a
female- vs a male-associated scene; ``cast``: warm vs cool) and each pair, two images that are
identical except for that attribute (same person, same placement; :func:`probe_specs`). They
are written to ``probe/`` only, never into the COCO annotations, so they never enter training.

Every file is written atomically; the same arguments give byte-identical files.
"""
from __future__ import annotations

import csv
import io
import json
import math
import operator
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageDraw
from pycocotools import mask as mask_utils
from tqdm import tqdm

from biaslab.io import InputError, atomic_path, write_json

FEMALE, MALE = "female", "male"

#: Base presence probability of every object (``p`` in the module docstring).
P_OBJECT = 0.35
#: Blend weight of the warm/cool tint (0 = no cast, 1 = flat tint colour).
CAST_STRENGTH = 0.18
#: Smallest accepted ``image_size`` (pixels); below it figures and objects become too small.
MIN_IMAGE_SIZE = 64

#: Objects drawn, with their real COCO category ids.
COCO_CATEGORY_IDS = {
    "person": 1, "bicycle": 2, "dog": 18, "umbrella": 28, "handbag": 31, "tie": 32,
    "sports ball": 37, "baseball bat": 39, "skateboard": 41, "cup": 47, "cell phone": 77,
}
_SUPERCATEGORY = {
    "person": "person", "bicycle": "vehicle", "dog": "animal", "umbrella": "accessory",
    "handbag": "accessory", "tie": "accessory", "sports ball": "sports",
    "baseball bat": "sports", "skateboard": "sports", "cup": "kitchen",
    "cell phone": "electronic",
}
FEMALE_OBJECTS = ("handbag", "umbrella", "cup", "cell phone")
MALE_OBJECTS = ("tie", "sports ball", "skateboard", "baseball bat")
NEUTRAL_OBJECTS = ("bicycle", "dog")
#: Object names in COCO-id order (the column order of the presence matrix).
OBJECTS = tuple(sorted(FEMALE_OBJECTS + MALE_OBJECTS + NEUTRAL_OBJECTS,
                       key=COCO_CATEGORY_IDS.__getitem__))
#: object name -> "female" / "male" / "neutral"
OBJECT_ASSOCIATION = {**{o: FEMALE for o in FEMALE_OBJECTS}, **{o: MALE for o in MALE_OBJECTS},
                      **{o: "neutral" for o in NEUTRAL_OBJECTS}}

FEMALE_SCENES = ("kitchen", "beach")
MALE_SCENES = ("field", "street")
SCENES = FEMALE_SCENES + MALE_SCENES
#: Background of the mask-neutrality images only (a uniform grey; never in the dataset).
PLAIN = "plain"
SCENE_ASSOCIATION = {**{s: FEMALE for s in FEMALE_SCENES}, **{s: MALE for s in MALE_SCENES}}
#: Cast -> associated gender.
CASTS = ("warm", "cool")
CAST_ASSOCIATION = {"warm": FEMALE, "cool": MALE}
_CAST_TINT = {"warm": (255, 150, 40), "cool": (40, 130, 255)}

KEYPOINT_NAMES = (
    "nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
    "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
    "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle",
)
SKELETON = [[16, 14], [14, 12], [17, 15], [15, 13], [12, 13], [6, 12], [7, 13], [6, 7], [6, 8],
            [7, 9], [8, 10], [9, 11], [2, 3], [1, 2], [1, 3], [2, 4], [3, 5], [4, 6], [5, 7]]

SPLIT = "synth"
#: COCO split of the separate test set (``generate(test_images=...)``).
TEST_SPLIT = "synthtest"
_FILE_RE = re.compile(r"^\d{12}\.png$")
_PROBE_RE = re.compile(r"^[a-z]+_\d{4,}_(female|male)\.png$")
#: Generator parameters of a dataset, read by the ``render`` counterfactual backend.
PARAMS_FILE = "annotations/synth_params.json"
#: Bump when the same arguments draw different pixels (the render backend checks it).
RENDER_VERSION = 3

# Same palettes for both genders.
_SKIN = [(255, 224, 189), (241, 194, 125), (224, 172, 105), (198, 134, 66), (141, 85, 36),
         (92, 58, 30)]
_HAIR = [(30, 25, 20), (70, 45, 25), (120, 80, 40), (200, 160, 90), (150, 60, 30),
         (150, 150, 150)]
#: Accent (stripe) colours: light tones, so the stripes show on every cloth colour.
_ACCENT = [(245, 245, 245), (250, 220, 120), (170, 220, 250), (250, 180, 200), (200, 240, 180)]
_CLOTH = [(200, 40, 40), (40, 90, 200), (40, 150, 70), (230, 190, 40), (120, 60, 160),
          (240, 240, 240), (40, 40, 40), (230, 120, 30), (90, 170, 200), (160, 110, 80)]


# --------------------------------------------------------------------------- geometry helpers

def _ellipse(cx, cy, rx, ry, n=16, a0=0.0, a1=2 * math.pi):
    """Points on an ellipse arc (angles in radians, y down)."""
    closed = abs((a1 - a0) - 2 * math.pi) < 1e-9
    k = n if closed else n + 1
    return [(cx + rx * math.cos(a0 + (a1 - a0) * i / n), cy + ry * math.sin(a0 + (a1 - a0) * i / n))
            for i in range(k)]


def _segment(p, q, width):
    """Quadrilateral of a thick segment p-q."""
    dx, dy = q[0] - p[0], q[1] - p[1]
    norm = math.hypot(dx, dy) or 1.0
    nx, ny = -dy / norm * width / 2, dx / norm * width / 2
    return [(p[0] + nx, p[1] + ny), (q[0] + nx, q[1] + ny), (q[0] - nx, q[1] - ny),
            (p[0] - nx, p[1] - ny)]


def _band(cx, cy, rx, ry, t, a0, a1, n=10):
    """Closed polygon of an elliptic arc band of thickness t (handles, rings)."""
    outer = _ellipse(cx, cy, rx, ry, n, a0, a1)
    inner = _ellipse(cx, cy, max(rx - t, 0.1), max(ry - t, 0.1), n, a0, a1)
    return outer + inner[::-1]


def _rect(x0, y0, x1, y1):
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def _rot(points, angle, cx, cy):
    c, s = math.cos(angle), math.sin(angle)
    return [(cx + (x - cx) * c - (y - cy) * s, cy + (x - cx) * s + (y - cy) * c)
            for x, y in points]


def _round_poly(points):
    return [(round(float(x), 2), round(float(y), 2)) for x, y in points]


def _flat(points):
    return [v for p in points for v in p]


def _jitter(rng, colour, amount=18):
    return tuple(int(np.clip(c + rng.integers(-amount, amount + 1), 0, 255)) for c in colour)


# --------------------------------------------------------------------------- the person

def _clip_convex(subject, clip):
    """Sutherland-Hodgman: polygon ``subject`` clipped to the convex polygon ``clip`` (both
    lists of (x, y), ``clip`` counter-clockwise or clockwise); [] when they do not overlap."""
    def side(p, a, b):
        return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])
    area2 = sum(clip[i][0] * clip[i - 1][1] - clip[i - 1][0] * clip[i][1]
                for i in range(len(clip)))
    sign = -1.0 if area2 > 0 else 1.0
    out = list(subject)
    for i in range(len(clip)):
        a, b = clip[i - 1], clip[i]
        pts, out = out, []
        for j in range(len(pts)):
            p, q = pts[j - 1], pts[j]
            sp, sq = sign * side(p, a, b), sign * side(q, a, b)
            if sq >= 0:
                if sp < 0:
                    t = sp / (sp - sq)
                    out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
                out.append(q)
            elif sp >= 0:
                t = sp / (sp - sq)
                out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
        if not out:
            return []
    return out


#: Torso outline of both genders (unit figure): a convex barrel, widest at mid-torso.
TORSO = [(-0.12, 0.195), (0.12, 0.195), (0.14, 0.40), (0.12, 0.66), (-0.12, 0.66),
         (-0.14, 0.40)]
#: Stripe period of the tunic pattern (unit figure height); half of each period is the accent
#: colour.
STRIPE_PERIOD = 0.065


def _stripes(angle_deg: float, period: float = None):
    """Accent stripes of the torso: polygons (unit figure coordinates) of half-period bands at
    ``angle_deg`` from horizontal (0 = horizontal, the female pattern; 90 = vertical, the male
    one), period ``period`` (default :data:`STRIPE_PERIOD`), phased on the torso's centre and
    clipped to :data:`TORSO`. At the default period the two patterns cover 50.5 % and 52.6 %
    of the torso (tests/test_fair_test.py)."""
    P = STRIPE_PERIOD if period is None else period
    xs = [p[0] for p in TORSO]
    ys = [p[1] for p in TORSO]
    cx, cy = (min(xs) + max(xs)) / 2.0, (min(ys) + max(ys)) / 2.0
    reach = math.hypot(max(xs) - min(xs), max(ys) - min(ys))
    n = int(math.ceil(reach / P)) + 1
    bands = []
    for k in range(-n, n + 1):
        a = cy + (k - 0.25) * P
        band = _rot(_rect(cx - reach, a, cx + reach, a + P / 2.0),
                    math.radians(angle_deg), cx, cy)
        poly = _clip_convex(band, TORSO)
        if len(poly) >= 3:
            bands.append(poly)
    return bands


def _figure(rng, gender):
    """Person parts in unit coordinates (head top y=0, feet y=1, centre x=0; x to the image
    right is the person's left, the figure faces the viewer).

    Renderer version 3 (issue 23 item 2, "a neutral mask by construction"): both genders have
    the SAME silhouette (head, hair, torso, arms, legs, shoes: identical polygons for the same
    appearance draws) and the same colours; gender is visible only in the direction of the
    tunic's accent stripes: **horizontal for female, vertical for male**. The two patterns
    have equal extent (the torso), equal area (2 % of the torso apart) and, drawn in the same two
    colours, equal mean luminance; neither group's body is dark or rectangular, and neither
    the person's box nor its polygon tells gender. Version 2 drew women with a dress and long
    hair and men with a rectangular shirt and dark shoes: a black box read as a man to models
    that read the person (Ratio_E 171 on S_synthetic, README).

    Measured with a person-only gender classifier (efficientnet_lite0 features, logistic
    regression, 200 images at b = 0, 3 draws; 60 masked context-free images), Ratio_E of the
    box filled black / grey 128 / mean colour: a first draft (A-line dress + long hair vs
    V-shaped tunic + beard, equal areas) 18-28 / 13-34 / 14-36; mirror-image diagonal stripes ("/" vs "\\") 0.15-0.34 / 0.57-1.15 / 0.34-0.41
    with gender accuracy 67-73 % (ImageNet features are nearly flip-invariant); thin vs thick
    stripes 0.06-1.0 / 0.5-7.8 / 1.6-13.6 (accuracy 70-77 %); horizontal vs vertical (this
    version, stripe period 0.07) 1.9-2.7 / 0.77-0.78 / 0.84-1.67 with accuracy 100 %: a tall black box has long
    vertical edges and still leans "vertical", which the pipeline's mask-neutrality
    precondition measures and reports (stage ``probe``, ``metrics/validity.json``).

    Returns (parts, keypoints): parts = [(polygon, colour)] in drawing order,
    keypoints = 17 (x, y) in COCO order.
    """
    skin = _jitter(rng, _SKIN[rng.integers(len(_SKIN))], 8)
    hair = _jitter(rng, _HAIR[rng.integers(len(_HAIR))], 10)
    top = _jitter(rng, _CLOTH[rng.integers(len(_CLOTH))], 12)
    bottom = _jitter(rng, _CLOTH[rng.integers(len(_CLOTH))], 12)
    shoes = _jitter(rng, _CLOTH[rng.integers(len(_CLOTH))], 12)
    accent = _jitter(rng, _ACCENT[rng.integers(len(_ACCENT))], 12)
    female = gender == FEMALE
    head_c, head_r = (0.0, 0.09), 0.068
    sx = 0.11                                 # arm attachment half-width
    sy = 0.205
    hip_y, hx = 0.53, 0.07
    knee_y, ankle_y = 0.76, 0.965
    lx = 0.05                                 # leg centre offset
    parts = []
    kp = {}

    for side in (-1, 1):
        parts.append((_segment((side * 0.045, hip_y - 0.02), (side * lx, ankle_y), 0.06),
                      bottom))
        parts.append((_rect(side * lx - 0.035, ankle_y - 0.01, side * lx + 0.035, 1.0),
                      shoes))
        name = "left" if side > 0 else "right"
        kp[f"{name}_hip"] = (side * hx, hip_y)
        kp[f"{name}_knee"] = (side * (lx + 0.005), knee_y)
        kp[f"{name}_ankle"] = (side * lx, ankle_y)

    # arms: upper arm in the top colour (short sleeve), forearm + hand in skin colour
    arm_w = 0.05
    for side in (-1, 1):
        a_up = math.radians(rng.uniform(6, 40))
        a_lo = a_up + math.radians(rng.uniform(-15, 35))
        sh = (side * (sx - 0.02), sy + 0.015)
        el = (sh[0] + side * 0.16 * math.sin(a_up), sh[1] + 0.16 * math.cos(a_up))
        wr = (el[0] + side * 0.15 * math.sin(a_lo), el[1] + 0.15 * math.cos(a_lo))
        parts.append((_segment(el, wr, arm_w * 0.85), skin))
        parts.append((_ellipse(wr[0], wr[1], 0.03, 0.03, 8), skin))
        parts.append((_segment(sh, el, arm_w), top))
        name = "left" if side > 0 else "right"
        kp[f"{name}_shoulder"] = (side * sx * 0.85, sy)
        kp[f"{name}_elbow"] = el
        kp[f"{name}_wrist"] = wr

    # torso (the same barrel for both) and its accent stripes: the only gender cue
    parts.append((list(TORSO), top))
    parts += [(band, accent) for band in _stripes(0.0 if female else 90.0)]
    # neck, head and hair (the same for both)
    parts.append((_rect(-0.025, head_c[1] + head_r - 0.02, 0.025, sy + 0.005), skin))
    parts.append((_ellipse(head_c[0], head_c[1], head_r, head_r * 1.1, 16), skin))
    cap = _ellipse(head_c[0], head_c[1] - 0.005, head_r + 0.012, head_r + 0.015, 10,
                   math.pi, 2 * math.pi)
    cap += [(head_r + 0.012, head_c[1] + 0.03), (head_r - 0.008, head_c[1] + 0.03),
            (head_r - 0.012, head_c[1] - 0.02), (-head_r + 0.012, head_c[1] - 0.02),
            (-head_r + 0.008, head_c[1] + 0.03), (-head_r - 0.012, head_c[1] + 0.03)]
    parts.append((cap, hair))

    kp["nose"] = (0.0, head_c[1] + 0.02)
    kp["left_eye"], kp["right_eye"] = (0.025, head_c[1] + 0.0), (-0.025, head_c[1] + 0.0)
    kp["left_ear"], kp["right_ear"] = (head_r, head_c[1] + 0.01), (-head_r, head_c[1] + 0.01)
    return parts, [kp[k] for k in KEYPOINT_NAMES]


#: Half-width of the envelope of every unit figure (x in [-ENVELOPE_HALF_WIDTH, +...], y in
#: [0, 1]): bounds both genders' bodies, the widest arm pose and the hands (max |x| ~ 0.383).
ENVELOPE_HALF_WIDTH = 0.40


def _placement(rng, size, horizon):
    """The person's placement box (x, y, w, h) in pixels, drawn *before* the figure so that it
    does not depend on gender or appearance: area U(0.10, 0.35) of the image, aspect
    ``2 * ENVELOPE_HALF_WIDTH`` : 1, feet (box bottom) on the ground below the horizon when
    there is room. Every figure fits inside it (its height is the box height)."""
    aspect = 2 * ENVELOPE_HALF_WIDTH
    frac = rng.uniform(0.10, 0.35)
    h = math.sqrt(frac * size * size / aspect)
    h = min(h, size - 4, (size - 4) / aspect)
    w = aspect * h
    lo = max(h + 1, min(horizon + 0.08 * size, size - 2))
    bottom = rng.uniform(lo, size - 2) if lo < size - 2 else size - 2
    left = rng.uniform(1, size - 1 - w)
    return (float(left), float(bottom - h), float(w), float(h))


def _fit_figure(parts, kps, box):
    """Scale the unit figure to the box height and centre it in the placement box."""
    x0, y0, w, h = box
    ox, oy = x0 + w / 2.0, y0

    def tf(p):
        return (ox + p[0] * h, oy + p[1] * h)

    parts = [(_round_poly([tf(p) for p in poly]), col) for poly, col in parts]
    kps = [tuple(round(v, 2) for v in tf(p)) for p in kps]
    return parts, kps, h


# --------------------------------------------------------------------------- objects

# base (w, h) in pixels at 160 px, and whether the object stands on the ground
_OBJ_SIZE = {
    "handbag": (22, 20, False), "umbrella": (32, 30, False), "cup": (14, 14, False),
    "cell phone": (10, 17, False), "tie": (10, 30, False), "sports ball": (18, 18, True),
    "skateboard": (40, 11, True), "baseball bat": (9, 40, False), "bicycle": (44, 28, True),
    "dog": (36, 25, True),
}


def _object_shapes(rng, name, x0, y0, w, h):
    """Polygons (pixels) of one object in box (x0, y0, w, h).

    Returns (mask_polys, drawing): mask_polys = polygons whose union is the object
    (segmentation), drawing = [(polygon, fill)] in drawing order (details included).
    """
    def P(pts):  # unit box -> pixels
        return [(x0 + u * w, y0 + v * h) for u, v in pts]

    draw = []
    if name == "handbag":
        col = _jitter(rng, (190, 40, 110), 25)
        body = P([(0.08, 0.42), (0.92, 0.42), (1.0, 1.0), (0.0, 1.0)])
        handle = P(_band(0.5, 0.45, 0.32, 0.42, 0.09, math.pi, 2 * math.pi, 10))
        flap = P([(0.08, 0.42), (0.92, 0.42), (0.8, 0.62), (0.2, 0.62)])
        clasp = P(_rect(0.45, 0.55, 0.55, 0.66))
        draw = [(handle, col), (body, col), (flap, _jitter(rng, (120, 20, 70), 10)),
                (clasp, (230, 200, 60))]
        mask = [body, handle]
    elif name == "umbrella":
        col = _jitter(rng, (130, 50, 190), 30)
        canopy = _ellipse(0.5, 0.48, 0.5, 0.46, 12, math.pi, 2 * math.pi)
        canopy += [(0.75, 0.43), (0.5, 0.48), (0.25, 0.43)]
        canopy = P(canopy)
        shaft = P(_rect(0.47, 0.45, 0.53, 0.92))
        hook = P(_band(0.39, 0.9, 0.14, 0.1, 0.06, 0, math.pi, 6))
        stripes = [P([(0.5, 0.02), (0.3, 0.44), (0.42, 0.45)]),
                   P([(0.5, 0.02), (0.7, 0.44), (0.58, 0.45)])]
        draw = [(canopy, col)] + [(s, _jitter(rng, (240, 220, 250), 10)) for s in stripes] + \
               [(shaft, (60, 50, 50)), (hook, (60, 50, 50))]
        mask = [canopy, shaft, hook]
    elif name == "cup":
        col = _jitter(rng, (245, 245, 250), 8)
        body = P(_rect(0.05, 0.1, 0.72, 1.0))
        handle = P(_band(0.72, 0.55, 0.26, 0.25, 0.1, -math.pi / 2, math.pi / 2, 8))
        coffee = P(_rect(0.1, 0.12, 0.67, 0.24))
        rim = P(_rect(0.02, 0.06, 0.75, 0.14))
        draw = [(handle, (70, 70, 90)), (body, col), (rim, (70, 70, 90)),
                (coffee, (110, 60, 30))]
        mask = [body, handle, rim]
    elif name == "cell phone":
        body = P(_rect(0.0, 0.0, 1.0, 1.0))
        screen = P(_rect(0.13, 0.1, 0.87, 0.84))
        draw = [(body, (25, 25, 30)), (screen, _jitter(rng, (110, 190, 255), 15))]
        mask = [body]
    elif name == "tie":
        col = _jitter(rng, (170, 20, 35), 20)
        knot = P([(0.2, 0.0), (0.8, 0.0), (0.65, 0.15), (0.35, 0.15)])
        blade = P([(0.35, 0.15), (0.65, 0.15), (0.95, 0.86), (0.5, 1.0), (0.05, 0.86)])
        stripe_col = _jitter(rng, (30, 30, 110), 10)
        stripes = [P([(0.3, 0.3 + k), (0.7, 0.22 + k), (0.74, 0.3 + k), (0.28, 0.38 + k)])
                   for k in (0.0, 0.22, 0.44)]
        draw = [(blade, col), (knot, col)] + [(s, stripe_col) for s in stripes]
        mask = [knot, blade]
    elif name == "sports ball":
        ball = P(_ellipse(0.5, 0.5, 0.5, 0.5, 20))
        draw = [(ball, _jitter(rng, (235, 115, 25), 15)),
                (P(_rect(0.47, 0.02, 0.53, 0.98)), (30, 20, 10)),
                (P(_rect(0.02, 0.47, 0.98, 0.53)), (30, 20, 10))]
        mask = [ball]
    elif name == "skateboard":
        deck = P(_ellipse(0.12, 0.3, 0.12, 0.3, 6, math.pi / 2, 3 * math.pi / 2)
                 + _ellipse(0.88, 0.3, 0.12, 0.3, 6, -math.pi / 2, math.pi / 2))
        wheels = [P(_ellipse(c, 0.78, 0.07, 0.22, 10)) for c in (0.22, 0.78)]
        draw = [(deck, _jitter(rng, (60, 160, 90), 40))] + \
               [(wl, (250, 220, 60)) for wl in wheels]
        mask = [deck] + wheels
    elif name == "baseball bat":
        local = [(0.42, 1.0), (0.58, 1.0), (0.56, 0.93), (0.55, 0.55), (0.72, 0.05),
                 (0.5, 0.0), (0.28, 0.05), (0.45, 0.55), (0.44, 0.93)]
        bat = P(local)
        draw = [(bat, _jitter(rng, (215, 170, 100), 15)),
                (P(_rect(0.4, 0.94, 0.6, 1.0)), (60, 40, 30))]
        mask = [bat]
    elif name == "bicycle":
        col = _jitter(rng, (30, 90, 210), 30)
        wheels = [P(_ellipse(c, 0.68, 0.2, 0.31, 16)) for c in (0.2, 0.8)]
        hubs = [P(_ellipse(c, 0.68, 0.12, 0.19, 12)) for c in (0.2, 0.8)]
        tubes = [P(_segment(a, b, 0.07)) for a, b in
                 [((0.2, 0.68), (0.45, 0.35)), ((0.45, 0.35), (0.8, 0.68)),
                  ((0.45, 0.35), (0.5, 0.68)), ((0.2, 0.68), (0.5, 0.68)),
                  ((0.45, 0.35), (0.72, 0.3)), ((0.72, 0.3), (0.8, 0.68))]]
        seat = P(_rect(0.36, 0.2, 0.52, 0.28))
        bar = P(_rect(0.68, 0.1, 0.82, 0.18))
        draw = [(wl, (30, 30, 30)) for wl in wheels] + \
               [(hb, (200, 200, 200)) for hb in hubs] + [(t, col) for t in tubes] + \
               [(seat, (30, 30, 30)), (bar, (30, 30, 30))]
        mask = wheels + tubes + [seat, bar]
    elif name == "dog":
        col = _jitter(rng, (150, 95, 45), 30)
        dark = tuple(max(c - 50, 0) for c in col)
        body = P(_ellipse(0.45, 0.5, 0.32, 0.2, 14))
        head = P(_ellipse(0.82, 0.28, 0.15, 0.2, 12))
        ear = P([(0.72, 0.12), (0.8, 0.12), (0.74, 0.42)])
        snout = P(_rect(0.9, 0.28, 1.0, 0.4))
        legs = [P(_rect(c, 0.55, c + 0.07, 1.0)) for c in (0.2, 0.3, 0.58, 0.66)]
        tail = P(_segment((0.15, 0.45), (0.0, 0.2), 0.06))
        draw = [(tail, col)] + [(lg, col) for lg in legs] + \
               [(body, col), (head, col), (snout, col), (ear, dark)]
        mask = [body, head, snout, tail] + legs
    else:  # pragma: no cover - names come from OBJECTS
        raise ValueError(f"unknown object {name!r}")
    return mask, draw


def _overlap(a, b, gap=2.0):
    return not (a[0] + a[2] + gap <= b[0] or b[0] + b[2] + gap <= a[0]
                or a[1] + a[3] + gap <= b[1] or b[1] + b[3] + gap <= a[1])


def _place_box(rng, size, w, h, ground, horizon, person_box, others):
    """Random box (x, y, w, h) inside the image: avoid the person and other objects if
    possible (3 relaxation levels, 60 tries each), ground objects below the horizon."""
    for level in range(3):
        for _ in range(60):
            x = rng.uniform(1, size - 1 - w)
            ylo = max(1.0, horizon - 0.3 * h) if ground and level < 2 else 1.0
            ylo = min(ylo, size - 1 - h)
            y = rng.uniform(ylo, size - 1 - h)
            box = (x, y, w, h)
            if level < 2 and _overlap(box, person_box):
                continue
            if level < 1 and any(_overlap(box, o) for o in others):
                continue
            return box
    return box  # level 2 always returns on its first try


# --------------------------------------------------------------------------- scenes

def _scene(rng, draw, size, scene):
    """Draw the background of ``scene``; returns the horizon y (pixels)."""
    S = size
    horizon = rng.uniform(0.38, 0.55) * S
    R = draw.rectangle
    if scene == "kitchen":
        wall = _jitter(rng, (238, 226, 190), 10)
        R([0, 0, S, horizon], fill=wall)
        cab = _jitter(rng, (150, 100, 60), 15)
        n = int(rng.integers(2, 4))
        for i in range(n):
            x0 = (i + 0.1) * S / n
            R([x0, 0.04 * S, x0 + 0.8 * S / n, 0.22 * S], fill=cab)
            R([x0 + 0.35 * S / n, 0.16 * S, x0 + 0.45 * S / n, 0.18 * S], fill=(200, 200, 200))
        R([0, horizon - 0.1 * S, S, horizon - 0.07 * S], fill=(190, 190, 200))   # counter top
        R([0, horizon - 0.07 * S, S, horizon], fill=cab)
        t = S / 10
        a, b = _jitter(rng, (245, 245, 240), 5), _jitter(rng, (120, 80, 60), 15)
        for j in range(int((S - horizon) / t) + 1):
            for i in range(11):
                R([i * t, horizon + j * t, (i + 1) * t, horizon + (j + 1) * t],
                  fill=a if (i + j) % 2 == 0 else b)
    elif scene == "beach":
        R([0, 0, S, horizon], fill=_jitter(rng, (150, 205, 245), 10))
        R([0, horizon - 0.12 * S, S, horizon], fill=_jitter(rng, (30, 110, 185), 12))
        for k in range(3):
            y = horizon - (0.03 + 0.035 * k) * S
            R([0, y, S, y + max(1, 0.006 * S)], fill=(200, 230, 250))
        R([0, horizon, S, S], fill=_jitter(rng, (236, 214, 160), 8))
        for _ in range(12):
            x, y = rng.uniform(0, S), rng.uniform(horizon, S)
            R([x, y, x + 0.01 * S, y + 0.01 * S], fill=(210, 185, 130))
    elif scene == "field":
        R([0, 0, S, horizon], fill=_jitter(rng, (165, 210, 240), 10))
        R([0, horizon - 0.05 * S, S, horizon], fill=(40, 90, 45))              # tree line
        g1, g2 = _jitter(rng, (70, 160, 65), 10), _jitter(rng, (95, 180, 80), 10)
        stripe = (S - horizon) / 5
        for k in range(5):
            R([0, horizon + k * stripe, S, horizon + (k + 1) * stripe + 1],
              fill=g1 if k % 2 == 0 else g2)
        y = rng.uniform(horizon + 0.1 * S, S - 0.05 * S)
        R([0, y, S, y + max(1, 0.012 * S)], fill=(245, 245, 245))
    elif scene == "street":
        R([0, 0, S, horizon], fill=_jitter(rng, (195, 205, 215), 8))
        x = 0.0
        while x < S:
            bw = rng.uniform(0.18, 0.35) * S
            top = rng.uniform(0.02, 0.25) * S
            R([x, top, x + bw, horizon], fill=_jitter(rng, (130, 120, 115), 30))
            for wy in np.arange(top + 0.04 * S, horizon - 0.08 * S, 0.09 * S):
                for wx in np.arange(x + 0.03 * S, x + bw - 0.06 * S, 0.08 * S):
                    R([wx, wy, wx + 0.04 * S, wy + 0.05 * S], fill=(230, 230, 170))
            x += bw
        R([0, horizon, S, horizon + 0.1 * S], fill=(175, 175, 170))               # sidewalk
        R([0, horizon + 0.1 * S, S, S], fill=_jitter(rng, (70, 70, 75), 6))       # road
        y = horizon + 0.1 * S + (S - horizon - 0.1 * S) * 0.55
        for k in range(6):
            R([k * S / 5, y, k * S / 5 + S / 10, y + max(1, 0.015 * S)], fill=(240, 210, 60))
    elif scene == PLAIN:   # the mask-neutrality images: one uniform grey, no horizon drawn
        grey = int(rng.integers(90, 201))
        R([0, 0, S, S], fill=(grey, grey, grey))
    else:  # pragma: no cover
        raise ValueError(f"unknown scene {scene!r}")
    return horizon


# --------------------------------------------------------------------------- captions

_SUBJECT = {
    FEMALE: ["a woman", "a woman", "a young woman", "a lady", "a girl"],
    MALE: ["a man", "a man", "a young man", "a gentleman", "a boy", "a guy"],
    None: ["a person", "a person", "someone", "a young person"],
}
_PRONOUN = {FEMALE: "she", MALE: "he", None: "someone"}
_POSSESSIVE = {FEMALE: "her", MALE: "his", None: "their"}
_VP = {
    "handbag": ["carrying a handbag", "holding a purse", "with a handbag"],
    "umbrella": ["holding an umbrella", "with an umbrella", "carrying an umbrella"],
    "cup": ["holding a cup", "drinking from a cup", "with a cup of coffee"],
    "cell phone": ["talking on a cell phone", "looking at a cell phone", "using a phone"],
    "tie": ["wearing a tie", "in a tie", "with a tie"],
    "sports ball": ["playing with a ball", "kicking a soccer ball", "with a ball"],
    "skateboard": ["riding a skateboard", "holding a skateboard", "with a skateboard"],
    "baseball bat": ["swinging a baseball bat", "holding a baseball bat", "with a bat"],
    "bicycle": ["next to a bicycle", "with a bike", "standing by a bicycle"],
    "dog": ["with a dog", "walking a dog", "next to a dog"],
}
_NOUN = {
    "handbag": ["handbag", "purse"], "umbrella": ["umbrella"], "cup": ["cup", "coffee cup"],
    "cell phone": ["cell phone", "phone"], "tie": ["tie"], "sports ball": ["ball", "soccer ball"],
    "skateboard": ["skateboard"], "baseball bat": ["baseball bat", "bat"],
    "bicycle": ["bicycle", "bike"], "dog": ["dog"],
}
_SCENE_PP = {
    "kitchen": ["in a kitchen", "in the kitchen", "inside a kitchen", "in a small kitchen"],
    "beach": ["on a beach", "on the beach", "on a sandy beach", "near the ocean"],
    "field": ["in a field", "on a grassy field", "on the field", "on a grass field"],
    "street": ["on a street", "on a city street", "on the sidewalk", "by the road"],
}
_SCENE_NP = {"kitchen": ["a kitchen", "a small kitchen"], "beach": ["a beach", "a sandy beach"],
             "field": ["a grassy field", "a field"], "street": ["a city street", "a street"]}


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _article(noun):
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _caption(rng, gender, scene, objects, p_neutral):
    """One template caption. ``gender`` is the true gender; with probability ``p_neutral`` the
    caption is gender-neutral."""
    g = None if rng.random() < p_neutral else gender
    mentioned = []
    if objects:
        k = int(rng.choice(3, p=[0.15, 0.6, 0.25]))
        k = min(k, len(objects))
        if k:
            idx = rng.choice(len(objects), size=k, replace=False)
            mentioned = [objects[i] for i in sorted(idx)]
    np_ = _pick(rng, _SUBJECT[g])
    vps = [_pick(rng, _VP[o]) for o in mentioned]
    if len(vps) == 2 and not all(v.split()[0].endswith("ing") for v in vps):
        # "next to a dog and swinging a bat" reads badly: list the objects instead
        vp = "with " + " and ".join(_article(_pick(rng, _NOUN[o])) for o in mentioned)
    else:
        vp = " and ".join(vps)
    pp = _pick(rng, _SCENE_PP[scene])
    t = int(rng.integers(8))
    if t == 0:
        text = f"{np_} {vp or 'standing'} {pp}"
    elif t == 1:
        text = f"{np_} {pp} {vp}" if vp else f"{np_} standing alone {pp}"
    elif t == 2:
        verb = vp if vp.split()[:1] and vp.split()[0].endswith("ing") else \
            f"standing {vp}".strip()
        text = f"{_PRONOUN[g]} is {verb} {pp}"
    elif t == 3:
        text = f"there is {np_} {vp} {pp}" if vp else f"there is {np_} {pp}"
    elif t == 4 and mentioned:
        nouns = " and ".join(_pick(rng, _NOUN[o]) for o in mentioned)
        text = f"{np_} standing {pp} with {_POSSESSIVE[g]} {nouns}"
    elif t == 5 and vp:
        text = f"{_pick(rng, _SCENE_NP[scene])} with {np_} {vp}"
    elif t == 6:
        text = f"a photo of {np_} {vp} {pp}" if vp else f"a photo of {np_} {pp}"
    else:
        text = f"{np_} posing for a picture {pp}" + (f" {vp}" if vp else "")
    text = " ".join(text.split())
    if rng.random() < 0.6:
        text = text[0].upper() + text[1:]
    if rng.random() < 0.5:
        text += "."
    return text


# --------------------------------------------------------------------------- validation

def _as_int(name, value, minimum):
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got a bool ({value!r})")
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {type(value).__name__} "
                         f"({value!r})") from None
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    return int(v)


def _as_prob(name, value):
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number in [0, 1], got a bool ({value!r})")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}") from None
    if not (0.0 <= v <= 1.0):  # also rejects NaN
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return v


# --------------------------------------------------------------------------- main entry

def sample_truth(n_images: int, bias: float, seed: int, n_female: int | None = None,
                 stream: int = 0) -> dict[str, np.ndarray]:
    """Draw the planted ground truth (no rendering).

    Args:
        n_images: number of images n (>= 2).
        bias: planted bias b in [0, 1].
        seed: non-negative integer seed.
        n_female: female images among the n (0..n); None = ``ceil(n / 2)`` (balanced).
        stream: 0 = ``default_rng(seed)`` (the training pool), k > 0 = ``default_rng([seed,
            k])`` (the test split: an independent draw of the same distribution).

    Returns:
        ``{"gender": (n,) str "female"/"male", "scene": (n,) str, "cast": (n,) str
        "warm"/"cool", "objects": (n, len(OBJECTS)) bool presence matrix (columns in
        ``OBJECTS`` order)}``; row i is image id i + 1. Probabilities: see module docstring.

    Raises:
        ValueError: bad arguments.
    """
    n = _as_int("n_images", n_images, 2)
    b = _as_prob("bias", bias)
    seed = _as_int("seed", seed, 0)
    rng = np.random.default_rng(seed if not stream else [seed, int(stream)])
    n_f = (n + 1) // 2 if n_female is None else int(n_female)
    if not 0 <= n_f <= n:
        raise ValueError(f"n_female must be in [0, {n}], got {n_female}")
    gender = rng.permutation(np.array([FEMALE] * n_f + [MALE] * (n - n_f)))
    sign = np.where(gender == FEMALE, 1.0, -1.0)
    assoc = np.array([{FEMALE: 1.0, MALE: -1.0}.get(OBJECT_ASSOCIATION[o], 0.0)
                      for o in OBJECTS])
    p_obj = P_OBJECT * (1.0 + b * sign[:, None] * assoc[None, :])
    objects = rng.random((n, len(OBJECTS))) < p_obj
    female_group = rng.random(n) < (1.0 + sign * b) / 2.0
    within = rng.integers(0, 2, n)
    scene = np.where(female_group, np.array(FEMALE_SCENES)[within],
                     np.array(MALE_SCENES)[within])
    warm = rng.random(n) < (1.0 + sign * b) / 2.0
    cast = np.where(warm, "warm", "cool")
    return {"gender": gender, "scene": scene, "cast": cast, "objects": objects}


# --------------------------------------------------------------------------- randomness

#: Independent random streams of one image (see the module docstring, "Randomness").
_STREAM = {"scene": 1, "placement": 2, "order": 3, "object": 4, "appearance": 5,
           "captions": 6, "probe": 7}
_DOMAIN_IMAGE, _DOMAIN_PROBE = 0, 1


def _stream(seed, key, name, slot=0):
    """Generator of stream ``name`` of the image ``key`` = (domain, a, b): dataset image
    ``(0, image_id, 0)``, probe pair ``(1, attribute index, pair)``. Fixed-length entropy, so
    no two (seed, key, stream, slot) share a state."""
    return np.random.default_rng(np.random.SeedSequence(
        [int(seed), 0x5EED, *(int(k) for k in key), _STREAM[name], int(slot)]))


def _image_key(image_id):
    return (_DOMAIN_IMAGE, int(image_id), 0)


class Rendering(NamedTuple):
    """One drawn image.

    ``image``: (S, S, 3) uint8 RGB; ``person``: {"polys": [[(x, y), ...]], "box": (x, y, w, h)
    of the polygon points, "keypoints": 17 (x, y) in COCO order} (pixels); ``person_mask``:
    (S, S) bool, the pixels the person was painted on (before objects are drawn over it);
    ``placement``: the placement box (x, y, w, h) (pixels), independent of the figure;
    ``objects``: [{"name", "polys"}] in drawing order."""
    image: np.ndarray
    person: dict
    person_mask: np.ndarray
    placement: tuple
    objects: list


def _draw(seed, key, size, gender, scene, cast, objects, appearance_seed=None,
          draw_person: bool = True) -> Rendering:
    """Draw one image from its streams: background (``scene`` stream), placement box
    (``placement``), person (``appearance`` stream or ``default_rng(appearance_seed)``),
    objects in the given order (object k from stream ``object``/slot k; boxes avoid the
    placement box), then the colour cast. ``draw_person=False`` draws the same image without the
    person's pixels (the true person-free background; ``Rendering.person``/``person_mask``
    still give where the person would be): the reference of the mask-neutrality test."""
    img = Image.new("RGB", (size, size))
    d = ImageDraw.Draw(img)
    horizon = _scene(_stream(seed, key, "scene"), d, size, scene)
    box = _placement(_stream(seed, key, "placement"), size, horizon)
    arng = (_stream(seed, key, "appearance") if appearance_seed is None
            else np.random.default_rng(int(appearance_seed)))
    parts, kps = _figure(arng, gender)
    parts, kps, scale = _fit_figure(parts, kps, box)
    pm = Image.new("L", (size, size), 0)
    dm = ImageDraw.Draw(pm)
    for poly, col in parts:
        if draw_person:
            d.polygon(poly, fill=col)
        dm.polygon(poly, fill=1)
    # eyes (detail inside the head polygon), only where the head is big enough to show them
    eye = 0.008 * scale
    if eye >= 0.5 and draw_person:
        for ex, ey in kps[1:3]:
            d.ellipse([ex - eye, ey - eye, ex + eye, ey + eye], fill=(20, 20, 20))
            dm.ellipse([ex - eye, ey - eye, ex + eye, ey + eye], fill=1)
    person_polys = [poly for poly, _ in parts]
    pts = np.array([p for poly in person_polys for p in poly])
    px0, py0 = pts.min(0)
    px1, py1 = pts.max(0)
    person = {"polys": person_polys, "keypoints": kps,
              "box": (float(px0), float(py0), float(px1 - px0), float(py1 - py0))}

    u = size / 160.0
    boxes, objs = [], []
    for k, name in enumerate(objects):
        orng = _stream(seed, key, "object", k)
        bw, bh, ground = _OBJ_SIZE[name]
        f = orng.uniform(0.85, 1.25) * u
        w, h = min(bw * f, size - 3), min(bh * f, size - 3)
        obox = _place_box(orng, size, w, h, ground, horizon, box, boxes)
        boxes.append(obox)
        mask, drawing = _object_shapes(orng, name, *obox)
        for poly, col in drawing:
            d.polygon(_round_poly(poly), fill=col)
        objs.append({"name": name, "polys": [_round_poly(m) for m in mask]})

    if cast is None:   # no colour cast (the mask-neutrality images)
        out = np.asarray(img, dtype=np.uint8).copy()
    else:
        arr = np.asarray(img, dtype=np.float32)
        tint = np.array(_CAST_TINT[cast], dtype=np.float32)
        arr = arr * (1.0 - CAST_STRENGTH) + tint * CAST_STRENGTH
        out = np.clip(np.rint(arr), 0, 255).astype(np.uint8)
    return Rendering(out, person, np.asarray(pm, bool), box, objs)


def render_scene(image_id: int, *, seed: int, image_size: int, gender: str, scene: str,
                 cast: str, objects: Sequence[str] = (), appearance_seed: int | None = None
                 ) -> Rendering:
    """Draw image ``image_id`` of the dataset ``generate(..., seed, image_size)``, optionally
    with another person: the oracle counterfactual of ``biaslab.counterfactual.render``.

    Background, placement box, objects and cast come from the image's own streams and do not
    depend on the person, so ``gender`` / ``appearance_seed`` change only the pixels of the
    union of the two persons' masks (``Rendering.person_mask``); objects stay drawn over the
    person as in the original.

    Args:
        image_id: dataset image id (>= 1).
        seed, image_size: the dataset's generator arguments (``annotations/
            synth_params.json``).
        gender: ``"female"`` / ``"male"``: the person's body shape.
        scene, cast, objects: the image's truth (``annotations/synth_truth.csv``; objects in
            any order, drawn in the image's own order).
        appearance_seed: None = the original person's appearance (colours, arm pose); an int
            draws them from ``numpy.random.default_rng(appearance_seed)`` instead.

    Returns:
        :class:`Rendering`. With the image's true gender and ``appearance_seed=None`` the
        image equals ``images/synth/<id>.png`` pixel for pixel.

    Raises:
        ValueError: unknown gender, scene, cast or object.
    """
    if gender not in (FEMALE, MALE):
        raise ValueError(f"gender must be 'female' or 'male', got {gender!r}")
    if scene not in SCENES:
        raise ValueError(f"unknown scene {scene!r}; known: {SCENES}")
    if cast not in CASTS:
        raise ValueError(f"unknown cast {cast!r}; known: {CASTS}")
    bad = [o for o in objects if o not in OBJECTS]
    if bad:
        raise ValueError(f"unknown object(s) {bad}; known: {OBJECTS}")
    key = _image_key(image_id)
    present = sorted(set(objects), key=OBJECTS.index)
    order = _stream(seed, key, "order").permutation(len(present))
    return _draw(seed, key, int(image_size), gender, scene, cast,
                 [present[k] for k in order], appearance_seed)


# --------------------------------------------------------------------------- probe pairs

#: Planted attributes the causal probe varies, one at a time.
PROBE_ATTRIBUTES = ("objects", "scene", "cast")
#: Associated objects per probe image of attribute "objects" (female set vs male set).
PROBE_OBJECTS = 2
PROBE_MANIFEST = "probe/pairs.csv"
PROBE_COLUMNS = ["attribute", "pair", "value", "file", "person_gender", "scene", "cast",
                 "objects", "x", "y", "w", "h", "polygon", "keypoints"]


def probe_specs(attribute: str, pair: int, seed: int) -> dict:
    """The two scenes of probe pair ``pair`` of ``attribute``: ``{"female": spec, "male":
    spec}`` keyed by the associated gender of the varied value, spec = dict(gender, scene, cast,
    objects (drawing order)). Everything but ``attribute`` is equal in the two specs, and so
    is the person (gender drawn 50/50 here, placement and appearance from the pair's streams).

    Values: ``objects``: ``PROBE_OBJECTS`` random female-associated vs as many
    male-associated objects in the same slots (slot k has its own stream, so its position
    differs only through the objects' sizes), no other object; ``scene``: a female- vs a
    male-associated scene (same horizon, person, objects); ``cast``: warm vs cool. Scene and
    cast of the other probes are uniform, their objects independent Bernoulli(``P_OBJECT``)
    (the ``b = 0`` distribution), identical in both images."""
    if attribute not in PROBE_ATTRIBUTES:
        raise ValueError(f"unknown probe attribute {attribute!r}; known: {PROBE_ATTRIBUTES}")
    rng = _stream(seed, (_DOMAIN_PROBE, PROBE_ATTRIBUTES.index(attribute), pair), "probe")
    gender = FEMALE if rng.random() < 0.5 else MALE
    scene = SCENES[int(rng.integers(len(SCENES)))]
    cast = CASTS[int(rng.integers(len(CASTS)))]
    present = rng.random(len(OBJECTS)) < P_OBJECT
    base = [OBJECTS[k] for k in np.flatnonzero(present)]
    base = [base[k] for k in rng.permutation(len(base))]
    f_scene = FEMALE_SCENES[int(rng.integers(len(FEMALE_SCENES)))]
    m_scene = MALE_SCENES[int(rng.integers(len(MALE_SCENES)))]
    f_objs = [FEMALE_OBJECTS[k] for k in rng.permutation(len(FEMALE_OBJECTS))[:PROBE_OBJECTS]]
    m_objs = [MALE_OBJECTS[k] for k in rng.permutation(len(MALE_OBJECTS))[:PROBE_OBJECTS]]
    common = {"gender": gender, "scene": scene, "cast": cast, "objects": base}
    if attribute == "objects":
        return {FEMALE: {**common, "objects": f_objs}, MALE: {**common, "objects": m_objs}}
    if attribute == "scene":
        return {FEMALE: {**common, "scene": f_scene}, MALE: {**common, "scene": m_scene}}
    return {FEMALE: {**common, "cast": "warm"}, MALE: {**common, "cast": "cool"}}


def render_probe(attribute: str, pair: int, value: str, seed: int, image_size: int,
                 draw_person: bool = True) -> Rendering:
    """Draw image ``value`` (``"female"`` / ``"male"``: the associated gender of the varied
    attribute value) of probe pair ``pair`` of ``attribute`` (:func:`probe_specs`);
    ``draw_person=False``: the same image without the person (its background, objects and
    cast unchanged)."""
    spec = probe_specs(attribute, pair, seed)[value]
    key = (_DOMAIN_PROBE, PROBE_ATTRIBUTES.index(attribute), int(pair))
    return _draw(seed, key, int(image_size), spec["gender"], spec["scene"], spec["cast"],
                 spec["objects"], draw_person=draw_person)


def _write_probe(out: Path, n_pairs: int, seed: int, size: int) -> dict:
    """Write ``probe/images/<attribute>_<pair>_<value>.png`` and ``probe/pairs.csv``; remove
    probe files of an earlier, larger run. Returns ``{attribute: pairs}``."""
    img_dir = out / "probe" / "images"
    wanted, rows = set(), []
    if n_pairs:
        img_dir.mkdir(parents=True, exist_ok=True)
    total = n_pairs * len(PROBE_ATTRIBUTES)
    bar = tqdm(total=total, desc="probe pairs", unit="pair", leave=False)
    for attr in PROBE_ATTRIBUTES:
        for p in range(n_pairs):
            specs = probe_specs(attr, p, seed)
            for value in (FEMALE, MALE):
                r = render_probe(attr, p, value, seed, size)
                name = f"{attr}_{p:04d}_{value}.png"
                wanted.add(name)
                s = specs[value]
                rows.append(_manifest_row(img_dir, name, r, [attr, p, value, s["gender"],
                                                             s["scene"], s["cast"],
                                                             ";".join(s["objects"])]))
            bar.update(1)
    bar.close()
    _replace_manifest(out / PROBE_MANIFEST, img_dir, rows, wanted,
                      lambda n: bool(_PROBE_RE.match(n)) and not n.startswith("neutral_"))
    return {a: int(n_pairs) for a in PROBE_ATTRIBUTES}


def _manifest_row(img_dir: Path, name: str, r: Rendering, head: list) -> list:
    """Save ``r.image`` as ``img_dir/name`` (PNG, atomically) and return its manifest row
    (``PROBE_COLUMNS``): ``head`` = [attribute, pair, value, person_gender, scene, cast,
    objects] with ``file`` inserted after value, then the person's box, polygons and
    keypoints."""
    with atomic_path(img_dir / name) as tmp:
        Image.fromarray(r.image, "RGB").save(tmp, format="PNG")
    x, y, w, h = (round(v, 2) for v in r.person["box"])
    return [*head[:3], f"probe/images/{name}", *head[3:], x, y, w, h,
            json.dumps([_flat(q) for q in r.person["polys"]]),
            json.dumps([v for kp in r.person["keypoints"] for v in (kp[0], kp[1], 2)])]


def _replace_manifest(manifest: Path, img_dir: Path, rows: list, wanted: set, ours) -> None:
    """Remove the images of ``img_dir`` that ``ours(name)`` claims and ``wanted`` lacks (an
    earlier, larger run's), then write ``manifest`` (``PROBE_COLUMNS``), or remove it when
    there are no rows."""
    if img_dir.is_dir():
        for stale in img_dir.iterdir():
            if ours(stale.name) and stale.name not in wanted:
                stale.unlink()
    if rows:
        _write_csv(manifest, PROBE_COLUMNS, rows)
    elif manifest.exists():
        manifest.unlink()


#: Manifest of the context-free person images (issue 23 item 2: is the Ratio protocol's mask
#: neutral?), columns ``PROBE_COLUMNS`` with attribute ``"neutral"``, pair k, value = the
#: person's gender.
NEUTRAL_MANIFEST = "probe/neutral.csv"


def render_neutral(k: int, seed: int, image_size: int, draw_person: bool = True
                   ) -> Rendering:
    """Context-free image k of the mask-neutrality set: one person (gender ``female`` for even
    k, ``male`` for odd k; placement and appearance from the image's own streams) on a uniform
    grey background (grey level U{90..200}), no objects, no colour cast. Masking the person
    leaves nothing that the planted bias could have taught a model, so a model's gender calls
    on the masked images show what the mask itself reads as (:data:`NEUTRAL_MANIFEST`).
    ``draw_person=False``: the same grey image without the person."""
    key = (_DOMAIN_PROBE, len(PROBE_ATTRIBUTES), int(k))
    return _draw(seed, key, int(image_size), FEMALE if k % 2 == 0 else MALE, PLAIN, None, [],
                 draw_person=draw_person)


def _write_neutral(out: Path, n: int, seed: int, size: int) -> int:
    """Write ``probe/images/neutral_<k>_<gender>.png`` (k < n) and :data:`NEUTRAL_MANIFEST`;
    remove neutral files of an earlier, larger run. Returns n."""
    img_dir = out / "probe" / "images"
    rows, wanted = [], set()
    if n:
        img_dir.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        r = render_neutral(k, seed, size)
        g = FEMALE if k % 2 == 0 else MALE
        name = f"neutral_{k:04d}_{g}.png"
        wanted.add(name)
        rows.append(_manifest_row(img_dir, name, r, ["neutral", k, g, g, PLAIN, "", ""]))
    _replace_manifest(out / NEUTRAL_MANIFEST, img_dir, rows, wanted,
                      lambda n: n.startswith("neutral_"))
    return n


def _seg_box_area(polys, size):
    """COCO segmentation (list of flat lists), bbox [x,y,w,h] of the points, mask area (px^2)."""
    seg = [_flat(p) for p in polys]
    pts = np.array([p for poly in polys for p in poly])
    x0, y0 = pts.min(0)
    x1, y1 = pts.max(0)
    bbox = [round(float(x0), 2), round(float(y0), 2), round(float(x1 - x0), 2),
            round(float(y1 - y0), 2)]
    rles = mask_utils.frPyObjects(seg, size, size)
    area = float(mask_utils.area(mask_utils.merge(rles)))
    return seg, bbox, area


def _write_csv(path, header, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    with atomic_path(path) as tmp:
        tmp.write_text(buf.getvalue(), encoding="utf-8")


def test_gender_counts(n_test: int, ratio: float) -> tuple[int, int]:
    """``(n_female, n_male)`` of a test split of ``n_test`` images with ``ratio`` men per woman:
    ``n_male = round(n_test * ratio / (1 + ratio))`` (half-up), clamped so that each gender has
    at least one image when ``n_test >= 2``. Raises ValueError for ``ratio <= 0``."""
    r = float(ratio)
    if not (r > 0 and math.isfinite(r)):
        raise ValueError(f"test_gender_ratio must be a positive number, got {ratio!r}")
    n_m = int(math.floor(n_test * r / (1.0 + r) + 0.5))
    if n_test >= 2:
        n_m = min(max(n_m, 1), n_test - 1)
    return n_test - n_m, n_m


def generate(out_dir: str | Path, n_images: int = 400, bias: float = 0.8, seed: int = 0,
             image_size: int = 160, captions_per_image: int = 5,
             p_no_gender_word: float = 0.2, probe_pairs: int = 0, test_images: int = 0,
             test_gender_ratio: float = 1.0) -> dict:
    """Write the synthetic COCO-layout dataset (see the module docstring) into ``out_dir``.

    Args:
        out_dir: output directory (created; existing files of the layout are replaced, stale
            ``images/<split>/<12 digits>.png`` files from a larger earlier run are removed).
        n_images: images of the training pool, COCO split ``synth`` (int >= 2); ids
            1..n_images, ``ceil(n/2)`` female.
        bias: planted bias strength b in [0, 1] for objects, scene and colour cast
            (0 = gender independent of context). The colour cast is the unlabeled attribute of
            paper 000 sec. 2.1: it is in no annotation or caption.
        seed: non-negative integer; the same arguments give byte-identical files.
        image_size: side of the square RGB images in pixels (int >= 64).
        captions_per_image: captions per image (int >= 1).
        p_no_gender_word: probability in [0, 1] that a caption uses a gender-neutral subject.
        probe_pairs: causal-probe pairs per planted attribute (int >= 0; 0 = no ``probe/``
            directory): see the module docstring, "Probe pairs".
        test_images: images of a separate test split, COCO split ``synthtest`` (int >= 0; ids
            n_images+1..n_images+test_images), drawn at the same planted bias from an
            independent stream with :func:`test_gender_counts` (issue 23 item 1: paper 000's
            Ratio needs a test set with COCO's gender imbalance, while training stays
            balanced). The ``split`` stage assigns it whole to ``test`` (``split.fixed``).
        test_gender_ratio: men per woman in the test split (> 0; COCO's test set: 2.3).

    Returns:
        JSON-serialisable summary: ``params``; ``n_images``; ``gender`` {female, male: int};
        ``objects`` {name: {female, male: int images containing it}}; ``scenes`` {scene:
        {female, male}}; ``casts`` {warm/cool: {female, male}}; ``captions`` {female, male,
        none: caption counts by ``biaslab.gender.caption_gender``}; ``object_association``,
        ``scene_association``, ``cast_association`` {name: "female"/"male"/"neutral"};
        ``expected`` {probability name: value}; ``files`` {role: path relative to out_dir};
        ``probe_pairs`` {attribute: pairs} (empty without probe pairs); ``test`` (the test
        split's own ``n_images``, ``gender``, ``scenes``, ``casts``; absent without one).

    Raises:
        ValueError: an argument out of range or of the wrong type, or ``out_dir`` is a file.
    """
    from biaslab.gender import caption_gender  # local: keep import light for the module

    n = _as_int("n_images", n_images, 2)
    b = _as_prob("bias", bias)
    seed = _as_int("seed", seed, 0)
    size = _as_int("image_size", image_size, MIN_IMAGE_SIZE)
    if size > 4096:
        raise ValueError(f"image_size must be <= 4096, got {size}")
    cpi = _as_int("captions_per_image", captions_per_image, 1)
    p_neutral = _as_prob("p_no_gender_word", p_no_gender_word)
    n_probe = _as_int("probe_pairs", probe_pairs, 0)
    n_test = _as_int("test_images", test_images, 0)
    n_test_f, n_test_m = test_gender_counts(n_test, test_gender_ratio)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir {str(out)!r} exists and is not a directory")

    truth = sample_truth(n, b, seed)
    splits = [(SPLIT, 1, truth)]
    test_truth = None
    if n_test:
        if n_test < 2:
            raise ValueError(f"test_images must be 0 or >= 2, got {n_test}")
        test_truth = sample_truth(n_test, b, seed, n_female=n_test_f, stream=1)
        splits.append((TEST_SPLIT, n + 1, test_truth))
    ann_dir = out / "annotations"
    ann_dir.mkdir(parents=True, exist_ok=True)

    info = {"description": f"biaslab synthetic dataset: {n} images (+ {n_test} test), planted "
                           f"bias {b}, seed {seed}; see README.md", "version": "1",
            "contributor": "biaslab.synthetic"}
    licenses = [{"id": 1, "name": "CC0 1.0 (synthetic images generated by biaslab)",
                 "url": "https://creativecommons.org/publicdomain/zero/1.0/"}]
    categories = [{"id": COCO_CATEGORY_IDS[c], "name": c, "supercategory": _SUPERCATEGORY[c]}
                  for c in ("person",) + OBJECTS]
    kp_category = {"id": 1, "name": "person", "supercategory": "person",
                   "keypoints": list(KEYPOINT_NAMES), "skeleton": SKELETON}

    labels, truth_rows, gender_rows = {}, [], []
    cap_counts = {FEMALE: 0, MALE: 0, "both": 0, "none": 0}
    ann_id = cap_id = 0
    for split, first_id, tr in splits:
        img_dir = out / "images" / split
        img_dir.mkdir(parents=True, exist_ok=True)
        images, captions, instances, keypoints = [], [], [], []
        wanted = set()
        for i in tqdm(range(len(tr["gender"])), desc=f"synthetic images {split}", unit="img",
                      leave=False):
            iid = first_id + i
            fname = f"{iid:012d}.png"
            wanted.add(fname)
            gender, scene, cast = str(tr["gender"][i]), str(tr["scene"][i]), str(tr["cast"][i])
            present = [o for o, p in zip(OBJECTS, tr["objects"][i]) if p]
            r = render_scene(iid, seed=seed, image_size=size, gender=gender, scene=scene,
                             cast=cast, objects=present)
            person, objs = r.person, r.objects
            with atomic_path(img_dir / fname) as tmp:
                Image.fromarray(r.image, "RGB").save(tmp, format="PNG")
            images.append({"id": iid, "file_name": fname, "width": size, "height": size,
                           "license": 1})
            crng = _stream(seed, _image_key(iid), "captions")
            for _ in range(cpi):
                text = _caption(crng, gender, scene, present, p_neutral)
                if split == SPLIT:
                    cap_counts[caption_gender(text)] += 1
                cap_id += 1
                captions.append({"id": cap_id, "image_id": iid, "caption": text})
            ann_id += 1
            seg, bbox, area = _seg_box_area(person["polys"], size)
            base = {"id": ann_id, "image_id": iid, "category_id": 1, "bbox": bbox,
                    "area": round(area, 2), "segmentation": seg, "iscrowd": 0}
            instances.append(base)
            kp_flat = []
            for x, y in person["keypoints"]:
                kp_flat += [x, y, 2]
            keypoints.append({**base, "keypoints": kp_flat,
                              "num_keypoints": len(KEYPOINT_NAMES)})
            for o in objs:
                ann_id += 1
                seg, bbox, area = _seg_box_area(o["polys"], size)
                instances.append({"id": ann_id, "image_id": iid,
                                  "category_id": COCO_CATEGORY_IDS[o["name"]], "bbox": bbox,
                                  "area": round(area, 2), "segmentation": seg, "iscrowd": 0})
            labels[str(iid)] = sorted(["person"] + present)
            truth_rows.append([iid, gender, scene, cast, ";".join(present)])
            gender_rows.append([iid, "Female" if gender == FEMALE else "Male", ""])
        for stale in img_dir.iterdir():
            if _FILE_RE.match(stale.name) and stale.name not in wanted:
                stale.unlink()
        write_json(ann_dir / f"captions_{split}.json",
                   {"info": info, "licenses": licenses, "images": images,
                    "annotations": captions})
        write_json(ann_dir / f"instances_{split}.json",
                   {"info": info, "licenses": licenses, "images": images,
                    "categories": categories, "annotations": instances})
        write_json(ann_dir / f"person_keypoints_{split}.json",
                   {"info": info, "licenses": licenses, "images": images,
                    "categories": [kp_category], "annotations": keypoints})
    if not n_test:   # a smaller re-run without a test split: no stale test split left behind
        for name in ("captions", "instances", "person_keypoints"):
            (ann_dir / f"{name}_{TEST_SPLIT}.json").unlink(missing_ok=True)
        stale_dir = out / "images" / TEST_SPLIT
        if stale_dir.is_dir():
            for stale in stale_dir.iterdir():
                if _FILE_RE.match(stale.name):
                    stale.unlink()

    write_json(ann_dir / "image_labels.json",
               {"description": "Complete image-level category sets of the biaslab synthetic "
                               "dataset (every drawn object, person included); keys are image "
                               "ids.", "labels": labels})
    _write_csv(ann_dir / "perceived_gender_skin.csv", ["image_id", "bb_gender", "bb_skin"],
               gender_rows)
    _write_csv(ann_dir / "synth_truth.csv", ["image_id", "gender", "scene", "cast", "objects"],
               truth_rows)
    # Generic per-image attribute table read by biaslab.coco (hidden context attributes that
    # label-based resampling cannot see; used to report what each dataset variant balances).
    _write_csv(ann_dir / "image_attributes.csv", ["image_id", "scene", "cast"],
               [[r[0], r[2], r[3]] for r in truth_rows])

    probe = _write_probe(out, n_probe, seed, size)
    n_neutral = _write_neutral(out, n_probe, seed, size)
    summary = _summary(truth, n, b, seed, size, cpi, p_neutral, cap_counts, n_probe)
    summary["params"].update(test_images=n_test, test_gender_ratio=float(test_gender_ratio))
    summary["probe_pairs"] = probe if n_probe else {}
    summary["neutral_images"] = n_neutral
    if n_neutral:
        summary["files"]["neutral"] = NEUTRAL_MANIFEST
    if test_truth is not None:
        t = _summary(test_truth, n_test, b, seed, size, cpi, p_neutral, cap_counts)
        summary["test"] = {k: t[k] for k in ("n_images", "gender", "scenes", "casts")}
        summary["files"]["test_captions"] = f"annotations/captions_{TEST_SPLIT}.json"
        summary["files"]["test_images"] = f"images/{TEST_SPLIT}"
    write_json(out / PARAMS_FILE, {"generator": "biaslab.synthetic",
                                   "render_version": RENDER_VERSION,
                                   "params": summary["params"]})
    with atomic_path(out / "README.md") as tmp:
        tmp.write_text(_readme(summary), encoding="utf-8")
    return summary


def _summary(truth, n, b, seed, size, cpi, p_neutral, cap_counts, n_probe=0):
    g = truth["gender"]
    is_f, is_m = g == FEMALE, g == MALE

    def by_gender(mask):
        return {FEMALE: int((mask & is_f).sum()), MALE: int((mask & is_m).sum())}

    return {
        "params": {"n_images": n, "bias": b, "seed": seed, "image_size": size,
                   "captions_per_image": cpi, "p_no_gender_word": p_neutral,
                   "probe_pairs": n_probe, "p_object": P_OBJECT,
                   "cast_strength": CAST_STRENGTH},
        "n_images": n,
        "gender": {FEMALE: int(is_f.sum()), MALE: int(is_m.sum())},
        "objects": {o: by_gender(truth["objects"][:, k]) for k, o in enumerate(OBJECTS)},
        "scenes": {s: by_gender(truth["scene"] == s) for s in SCENES},
        "casts": {c: by_gender(truth["cast"] == c) for c in CASTS},
        "captions": {k: int(v) for k, v in cap_counts.items()},
        "object_association": dict(OBJECT_ASSOCIATION),
        "scene_association": dict(SCENE_ASSOCIATION),
        "cast_association": dict(CAST_ASSOCIATION),
        "expected": {
            "p_associated_object_given_gender": P_OBJECT * (1 + b),
            "p_other_gender_object_given_gender": P_OBJECT * (1 - b),
            "p_neutral_object": P_OBJECT,
            "p_associated_scene_group_given_gender": (1 + b) / 2,
            "p_associated_cast_given_gender": (1 + b) / 2,
            "p_neutral_caption": p_neutral,
        },
        "files": {
            "captions": f"annotations/captions_{SPLIT}.json",
            "instances": f"annotations/instances_{SPLIT}.json",
            "keypoints": f"annotations/person_keypoints_{SPLIT}.json",
            "perceived_gender": "annotations/perceived_gender_skin.csv",
            "image_labels": "annotations/image_labels.json",
            "truth": "annotations/synth_truth.csv",
            "generator_params": PARAMS_FILE,
            "images": f"images/{SPLIT}",
            **({"probe": PROBE_MANIFEST} if n_probe else {}),
        },
    }


def _readme(s):
    p = s["params"]
    b = p["bias"]
    lines = [
        "# biaslab synthetic dataset",
        "",
        "Generated by `biaslab.synthetic.generate` (official COCO layout, split `synth`). "
        "Not real data: for running and testing the pipeline with known ground truth.",
        "",
        "Parameters: " + ", ".join(f"{k}={v}" for k, v in p.items()),
        "",
        f"One person per image, {s['gender'][FEMALE]} female / {s['gender'][MALE]} male "
        "(same silhouette and colours for both; gender visible only in the tunic's stripes: "
        "horizontal for women, vertical for men).",
        "",
        f"## Planted correlations (bias b = {b})",
        "",
        f"- Objects (COCO instances): P(present | associated gender) = {P_OBJECT} * (1 + b) = "
        f"{P_OBJECT * (1 + b):.3f}, P(present | other gender) = {P_OBJECT} * (1 - b) = "
        f"{P_OBJECT * (1 - b):.3f}; neutral objects {P_OBJECT}. Female-associated: "
        f"{', '.join(FEMALE_OBJECTS)}; male-associated: {', '.join(MALE_OBJECTS)}; neutral: "
        f"{', '.join(NEUTRAL_OBJECTS)}.",
        f"- Scene (background, named in captions): P(scene group of the same gender) = "
        f"(1 + b) / 2 = {(1 + b) / 2:.3f}, split evenly. Female-associated: "
        f"{', '.join(FEMALE_SCENES)}; male-associated: {', '.join(MALE_SCENES)}.",
        f"- Colour cast (UNLABELED: in no annotation or caption; Hirota et al. EMNLP 2024 sec. "
        f"2.1): P(warm | female) = P(cool | male) = (1 + b) / 2 = {(1 + b) / 2:.3f}. Truth in "
        "`annotations/synth_truth.csv` only.",
        f"- Captions: {p['captions_per_image']} per image; a caption is gender-neutral with "
        f"probability {p['p_no_gender_word']}, otherwise it uses words of the true gender only.",
        f"- Causal probe: {p['probe_pairs']} pairs per attribute ({', '.join(PROBE_ATTRIBUTES)})"
        f" in `{PROBE_MANIFEST}`: two images identical except for the attribute (not part of "
        "the COCO annotations).",
        "",
        *([f"Test split `{TEST_SPLIT}`: {s['test']['n_images']} images, "
           f"{s['test']['gender'][FEMALE]} female / {s['test']['gender'][MALE]} male "
           f"({p['test_gender_ratio']} men per woman), same planted bias; the counts below are "
           "the training pool's.", ""] if "test" in s else []),
        f"Mask-neutrality images: {s.get('neutral_images', 0)} in `{NEUTRAL_MANIFEST}` (one "
        "person on uniform grey, no objects, no cast).",
        "",
        "## Realised counts (images)",
        "",
        "| attribute | association | female | male |",
        "|---|---|---|---|",
    ]
    for o, c in s["objects"].items():
        lines.append(f"| {o} | {OBJECT_ASSOCIATION[o]} | {c[FEMALE]} | {c[MALE]} |")
    for sc, c in s["scenes"].items():
        lines.append(f"| scene: {sc} | {SCENE_ASSOCIATION[sc]} | {c[FEMALE]} | {c[MALE]} |")
    for ca, c in s["casts"].items():
        lines.append(f"| cast: {ca} | {CAST_ASSOCIATION[ca]} | {c[FEMALE]} | {c[MALE]} |")
    lines += ["", "Caption-level gender counts: "
              + ", ".join(f"{k} {v}" for k, v in s["captions"].items()), ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- readers

def read_generator_params(root: str | Path) -> dict:
    """The generator arguments of the synthetic dataset in ``root`` (``PARAMS_FILE``).

    Returns:
        ``{"n_images", "bias", "seed", "image_size", "captions_per_image",
        "p_no_gender_word", "probe_pairs", "p_object", "cast_strength"}``.

    Raises:
        InputError: ``root`` has no ``PARAMS_FILE`` (not a dataset written by
            :func:`generate`, e.g. real COCO), or it was written by another renderer version
            (re-run the ``synthesize`` stage).
    """
    path = Path(root) / PARAMS_FILE
    if not path.is_file():
        raise InputError(path, "not found: the data root is not a biaslab synthetic dataset "
                               "(the render backend and the causal probe need one; use "
                               "generate.backend copy_paste or sd_inpaint on real data)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        params = dict(meta["params"])
        version = meta.get("render_version")
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(path, f"not a synthetic-dataset parameter file ({e})") from e
    if version != RENDER_VERSION:
        raise InputError(path, f"written by renderer version {version}, this code draws "
                               f"version {RENDER_VERSION}: re-run the synthesize stage")
    return params


def read_truth(root: str | Path) -> dict[int, dict]:
    """``annotations/synth_truth.csv`` of ``root`` as ``{image_id: {"gender", "scene", "cast",
    "objects": [names]}}``. Raises ``InputError`` when the file is missing or malformed."""
    path = Path(root) / "annotations" / "synth_truth.csv"
    if not path.is_file():
        raise InputError(path, "not found: the data root is not a biaslab synthetic dataset")
    out = {}
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            try:
                out[int(r["image_id"])] = {"gender": r["gender"], "scene": r["scene"],
                                           "cast": r["cast"],
                                           "objects": [o for o in r["objects"].split(";") if o]}
            except (KeyError, ValueError) as e:
                raise InputError(path, f"malformed row {r} ({e})") from e
    return out


def read_probe(root: str | Path):
    """The probe manifest ``probe/pairs.csv`` of ``root`` as a DataFrame (``PROBE_COLUMNS``;
    ``path`` = ``root / file``; ``polygon`` a JSON string, ``keypoints`` a list of 51 floats as
    in ``persons.parquet``), or None when ``root`` has no probe pairs (real data, or
    ``probe_pairs`` 0).

    Raises:
        InputError: the manifest lacks columns or a pair lacks one of its two images.
    """
    df = _read_manifest(root, PROBE_MANIFEST)
    if df is None:
        return None
    counts = df.groupby(["attribute", "pair"])["value"].apply(lambda v: sorted(v))
    bad = [k for k, v in counts.items() if v != [FEMALE, MALE]]
    if bad:
        raise InputError(Path(root) / PROBE_MANIFEST,
                         f"pairs without exactly one female and one male image: {bad[:5]}")
    return df


def _read_manifest(root: str | Path, rel: str):
    """``root / rel`` (a ``PROBE_COLUMNS`` manifest) as a DataFrame with ``path`` = ``root /
    file`` and ``keypoints`` parsed, or None when the file is absent. Raises InputError on a
    missing column."""
    import pandas as pd
    path = Path(root) / rel
    if not path.is_file():
        return None
    df = pd.read_csv(path, keep_default_na=False)
    miss = [c for c in PROBE_COLUMNS if c not in df.columns]
    if miss:
        raise InputError(path, f"missing column(s) {miss}")
    df["path"] = [str(Path(root) / f) for f in df["file"]]
    df["keypoints"] = [json.loads(k) for k in df["keypoints"]]
    return df


def read_neutral(root: str | Path):
    """The mask-neutrality manifest :data:`NEUTRAL_MANIFEST` of ``root`` as a DataFrame (columns
    as :func:`read_probe`), or None when ``root`` has none (real data, or ``probe_pairs`` 0).

    Raises:
        InputError: the manifest lacks columns."""
    return _read_manifest(root, NEUTRAL_MANIFEST)
