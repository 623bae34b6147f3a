"""Drawing one image: the planted truth per image (:func:`sample_truth`), the independent
seeded streams, :func:`render_scene` (the same scene with another person re-drawn), the
causal probe's pairs and the context-free images of the mask-neutrality check."""
from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageDraw

from biaslab.data.synthetic.world import (CASTS, CAST_STRENGTH, DARK, FEMALE, FEMALE_OBJECTS,
                                          FEMALE_SCENES, LIGHT, MALE, MALE_OBJECTS, MALE_SCENES,
                                          OBJECTS, OBJECT_ASSOCIATION, PLAIN, P_OBJECT, SCENES,
                                          SKIN_OBJECT_ASSOCIATION, SKIN_TONES, CAST_TINT)
from biaslab.data.synthetic.figures import (person_figure, fit_figure, person_placement, round_poly,
                                            skin_draw, skin_tone_of)
from biaslab.data.synthetic.scenes import OBJ_SIZE, object_shapes, place_box, draw_scene

# --------------------------------------------------------------------------- validation

def as_int(name, value, minimum):
    """``value`` as an int >= ``minimum``; a bool, a non-integer or a smaller value raises
    ``ValueError`` naming ``name``."""
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


def as_prob(name, value):
    """``value`` as a float in [0, 1]; a bool, a non-number, NaN or a value outside raises
    ``ValueError`` naming ``name``."""
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

def appearance_skin(seed: int, image_id: int) -> str:
    """Skin tone (``"light"`` / ``"dark"``) of dataset image ``image_id``'s person: the class of
    the first draw of the image's ``appearance`` stream, so it is independent of gender and of
    every other planted attribute, and :func:`render_scene` draws exactly that tone."""
    return skin_tone_of(skin_draw(image_stream(seed, image_key(image_id), "appearance")))


def sample_truth(n_images: int, bias: float, seed: int, n_female: int | None = None,
                 stream: int = 0, skin_bias: float = 0.0, first_id: int = 1
                 ) -> dict[str, np.ndarray]:
    """Draw the planted ground truth (no rendering).

    Args:
        n_images: number of images n (>= 2).
        bias: planted gender bias b in [0, 1].
        seed: non-negative integer seed.
        n_female: female images among the n (0..n); None = ``ceil(n / 2)`` (balanced).
        stream: 0 = ``default_rng(seed)`` (the training pool), k > 0 = ``default_rng([seed,
            k])`` (the test split: an independent draw of the same distribution).
        skin_bias: planted skin-tone bias b_t in [0, 1]: ``P(object | t) =
            P_OBJECT * (1 + s_t * b_t)`` for the objects of ``SKIN_OBJECT_ASSOCIATION``
            (``s_t = +1`` for the associated tone, -1 for the other). They are the
            gender-neutral objects, so both biases keep their own ground truth and the same
            uniform draws give the same objects when ``b_t = 0``.
        first_id: image id of row 0 (the skin tone is read from each image's own
            ``appearance`` stream: :func:`appearance_skin`).

    Returns:
        ``{"gender": (n,) str "female"/"male", "skin": (n,) str "light"/"dark", "scene": (n,)
        str, "cast": (n,) str "warm"/"cool", "objects": (n, len(OBJECTS)) bool presence
        matrix (columns in ``OBJECTS`` order)}``; row i is image id ``first_id + i``.
        Probabilities: see module docstring. Skin tone is about 50/50 (a Bernoulli(1/2) per
        image) and independent of gender.

    Raises:
        ValueError: bad arguments.
    """
    n = as_int("n_images", n_images, 2)
    b = as_prob("bias", bias)
    bt = as_prob("skin_bias", skin_bias)
    seed = as_int("seed", seed, 0)
    first_id = as_int("first_id", first_id, 1)
    rng = np.random.default_rng(seed if not stream else [seed, int(stream)])
    n_f = (n + 1) // 2 if n_female is None else int(n_female)
    if not 0 <= n_f <= n:
        raise ValueError(f"n_female must be in [0, {n}], got {n_female}")
    gender = rng.permutation(np.array([FEMALE] * n_f + [MALE] * (n - n_f)))
    sign = np.where(gender == FEMALE, 1.0, -1.0)
    assoc = np.array([{FEMALE: 1.0, MALE: -1.0}.get(OBJECT_ASSOCIATION[o], 0.0)
                      for o in OBJECTS])
    skin = np.array([appearance_skin(seed, first_id + i) for i in range(n)])
    sign_t = np.where(skin == LIGHT, 1.0, -1.0)
    assoc_t = np.array([{LIGHT: 1.0, DARK: -1.0}.get(SKIN_OBJECT_ASSOCIATION.get(o), 0.0)
                        for o in OBJECTS])
    # b_t = 0 adds exactly 0.0: the same thresholds, hence the same objects, as without a skin bias
    p_obj = P_OBJECT * (1.0 + b * sign[:, None] * assoc[None, :]
                        + bt * sign_t[:, None] * assoc_t[None, :])
    objects = rng.random((n, len(OBJECTS))) < p_obj
    female_group = rng.random(n) < (1.0 + sign * b) / 2.0
    within = rng.integers(0, 2, n)
    scene = np.where(female_group, np.array(FEMALE_SCENES)[within],
                     np.array(MALE_SCENES)[within])
    warm = rng.random(n) < (1.0 + sign * b) / 2.0
    cast = np.where(warm, "warm", "cool")
    return {"gender": gender, "skin": skin, "scene": scene, "cast": cast, "objects": objects}


# --------------------------------------------------------------------------- randomness

#: Independent random streams of one image (see the module docstring, "Randomness").
_STREAM = {"scene": 1, "placement": 2, "order": 3, "object": 4, "appearance": 5,
           "captions": 6, "probe": 7}
_DOMAIN_IMAGE, _DOMAIN_PROBE = 0, 1


def image_stream(seed, key, name, slot=0):
    """Generator of stream ``name`` of the image ``key`` = (domain, a, b): dataset image
    ``(0, image_id, 0)``, probe pair ``(1, attribute index, pair)``. Fixed-length entropy, so
    no two (seed, key, stream, slot) share a state."""
    return np.random.default_rng(np.random.SeedSequence(
        [int(seed), 0x5EED, *(int(k) for k in key), _STREAM[name], int(slot)]))


def image_key(image_id):
    """The stream key ``(domain, a, b)`` of dataset image ``image_id`` (:func:`image_stream`)."""
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
          draw_person: bool = True, skin=None) -> Rendering:
    """Draw one image from its streams: background (``scene`` stream), placement box
    (``placement``), person (``appearance`` stream or ``default_rng(appearance_seed)``),
    objects in the given order (object k from stream ``object``/slot k; boxes avoid the
    placement box), then the colour cast. ``draw_person=False`` draws the same image without the
    person's pixels (the true person-free background; ``Rendering.person``/``person_mask``
    still give where the person would be): the reference of the mask-neutrality test."""
    img = Image.new("RGB", (size, size))
    d = ImageDraw.Draw(img)
    horizon = draw_scene(image_stream(seed, key, "scene"), d, size, scene)
    box = person_placement(image_stream(seed, key, "placement"), size, horizon)
    arng = (image_stream(seed, key, "appearance") if appearance_seed is None
            else np.random.default_rng(int(appearance_seed)))
    parts, kps = person_figure(arng, gender, skin)
    parts, kps, scale = fit_figure(parts, kps, box)
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
        orng = image_stream(seed, key, "object", k)
        bw, bh, ground = OBJ_SIZE[name]
        f = orng.uniform(0.85, 1.25) * u
        w, h = min(bw * f, size - 3), min(bh * f, size - 3)
        obox = place_box(orng, size, w, h, ground, horizon, box, boxes)
        boxes.append(obox)
        mask, drawing = object_shapes(orng, name, *obox)
        for poly, col in drawing:
            d.polygon(round_poly(poly), fill=col)
        objs.append({"name": name, "polys": [round_poly(m) for m in mask]})

    if cast is None:   # no colour cast (the mask-neutrality images)
        out = np.asarray(img, dtype=np.uint8).copy()
    else:
        arr = np.asarray(img, dtype=np.float32)
        tint = np.array(CAST_TINT[cast], dtype=np.float32)
        arr = arr * (1.0 - CAST_STRENGTH) + tint * CAST_STRENGTH
        out = np.clip(np.rint(arr), 0, 255).astype(np.uint8)
    return Rendering(out, person, np.asarray(pm, bool), box, objs)


def render_scene(image_id: int, *, seed: int, image_size: int, gender: str, scene: str,
                 cast: str, objects: Sequence[str] = (), appearance_seed: int | None = None,
                 skin: str | None = None) -> Rendering:
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
        skin: None = the drawn skin colour; ``"light"`` / ``"dark"`` = the same draw moved into
            that half of the palette (the counterfactual of the other skin tone;
            every other colour and the pose are unchanged).

    Returns:
        :class:`Rendering`. With the image's true gender and ``appearance_seed=None`` the
        image equals ``images/synth/<id>.png`` pixel for pixel (also with ``skin`` = its true
        tone).

    Raises:
        ValueError: unknown gender, skin tone, scene, cast or object.
    """
    if skin is not None and skin not in SKIN_TONES:
        raise ValueError(f"skin must be one of {SKIN_TONES} or None, got {skin!r}")
    if gender not in (FEMALE, MALE):
        raise ValueError(f"gender must be 'female' or 'male', got {gender!r}")
    if scene not in SCENES:
        raise ValueError(f"unknown scene {scene!r}; known: {SCENES}")
    if cast not in CASTS:
        raise ValueError(f"unknown cast {cast!r}; known: {CASTS}")
    bad = [o for o in objects if o not in OBJECTS]
    if bad:
        raise ValueError(f"unknown object(s) {bad}; known: {OBJECTS}")
    key = image_key(image_id)
    present = sorted(set(objects), key=OBJECTS.index)
    order = image_stream(seed, key, "order").permutation(len(present))
    return _draw(seed, key, int(image_size), gender, scene, cast,
                 [present[k] for k in order], appearance_seed, skin=skin)


#: The person attributes the attribute-flip probe changes, each with its two
#: values in the order (a, b) of :func:`biaslab.analysis.probe.flip_sensitivities`: the
#: sensitivity is o(b) - o(a), positive when a model follows the planted association.
FLIP_VALUES = {"gender": (FEMALE, MALE), "skin": (DARK, LIGHT)}


def render_flip(image_id: int, truth: Mapping, *, seed: int, image_size: int, dim: str,
                value: str) -> Rendering:
    """Image ``image_id`` with its person's ``dim`` (``"gender"``: body shape; ``"skin"``:
    skin tone) set to ``value`` and everything else -- background, objects, cast, the person's
    placement, clothes and pose -- as drawn (:func:`render_scene`). One of the two values
    reproduces the dataset image pixel for pixel; the other is its oracle counterfactual.

    Args:
        image_id: dataset image id (>= 1).
        truth: the image's row of ``read_truth`` (gender, scene, cast, objects, skin).
        seed, image_size: the dataset's generator arguments.
        dim: a key of :data:`FLIP_VALUES`.
        value: one of ``FLIP_VALUES[dim]``.

    Raises:
        ValueError: unknown ``dim`` or ``value`` (and as :func:`render_scene`).
    """
    if dim not in FLIP_VALUES:
        raise ValueError(f"unknown flip dimension {dim!r}; known: {tuple(FLIP_VALUES)}")
    if value not in FLIP_VALUES[dim]:
        raise ValueError(f"{dim} must be one of {FLIP_VALUES[dim]}, got {value!r}")
    gender = value if dim == "gender" else truth["gender"]
    skin = value if dim == "skin" else truth.get("skin")
    return render_scene(int(image_id), seed=int(seed), image_size=int(image_size), gender=gender,
                        scene=truth["scene"], cast=truth["cast"], objects=truth["objects"],
                        skin=skin)


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
    rng = image_stream(seed, (_DOMAIN_PROBE, PROBE_ATTRIBUTES.index(attribute), pair), "probe")
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


#: Manifest of the context-free person images (is the Ratio protocol's mask
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
