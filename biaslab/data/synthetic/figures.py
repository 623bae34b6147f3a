"""The person: shared palettes, polygon helpers and the unit figure whose only gender cue is
the direction of the tunic's stripes, its placement box and its fit."""
from __future__ import annotations

import math

import numpy as np

from biaslab.data.synthetic.world import DARK, FEMALE, KEYPOINT_NAMES, LIGHT, SKIN_TONES

# Same palettes for both genders. The first N_LIGHT skin colours are the "light" tones
# (Fitzpatrick I-III, roughly), the rest "dark" (IV-VI); both halves have N_LIGHT colours.
_SKIN = [(255, 224, 189), (241, 194, 125), (224, 172, 105), (198, 134, 66), (141, 85, 36),
         (92, 58, 30)]
N_LIGHT = 3
_HAIR = [(30, 25, 20), (70, 45, 25), (120, 80, 40), (200, 160, 90), (150, 60, 30),
         (150, 150, 150)]
#: Accent (stripe) colours: light tones, so the stripes show on every cloth colour.
_ACCENT = [(245, 245, 245), (250, 220, 120), (170, 220, 250), (250, 180, 200), (200, 240, 180)]
_CLOTH = [(200, 40, 40), (40, 90, 200), (40, 150, 70), (230, 190, 40), (120, 60, 160),
          (240, 240, 240), (40, 40, 40), (230, 120, 30), (90, 170, 200), (160, 110, 80)]


# --------------------------------------------------------------------------- geometry helpers

def ellipse_points(cx, cy, rx, ry, n=16, a0=0.0, a1=2 * math.pi):
    """Points on an ellipse arc (angles in radians, y down)."""
    closed = abs((a1 - a0) - 2 * math.pi) < 1e-9
    k = n if closed else n + 1
    return [(cx + rx * math.cos(a0 + (a1 - a0) * i / n), cy + ry * math.sin(a0 + (a1 - a0) * i / n))
            for i in range(k)]


def segment_poly(p, q, width):
    """Quadrilateral of a thick segment p-q."""
    dx, dy = q[0] - p[0], q[1] - p[1]
    norm = math.hypot(dx, dy) or 1.0
    nx, ny = -dy / norm * width / 2, dx / norm * width / 2
    return [(p[0] + nx, p[1] + ny), (q[0] + nx, q[1] + ny), (q[0] - nx, q[1] - ny),
            (p[0] - nx, p[1] - ny)]


def band_poly(cx, cy, rx, ry, t, a0, a1, n=10):
    """Closed polygon of an elliptic arc band of thickness t (handles, rings)."""
    outer = ellipse_points(cx, cy, rx, ry, n, a0, a1)
    inner = ellipse_points(cx, cy, max(rx - t, 0.1), max(ry - t, 0.1), n, a0, a1)
    return outer + inner[::-1]


def rect(x0, y0, x1, y1):
    return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


def _rot(points, angle, cx, cy):
    c, s = math.cos(angle), math.sin(angle)
    return [(cx + (x - cx) * c - (y - cy) * s, cy + (x - cx) * s + (y - cy) * c)
            for x, y in points]


def round_poly(points):
    return [(round(float(x), 2), round(float(y), 2)) for x, y in points]


def flat(points):
    return [v for p in points for v in p]


def jitter(rng, colour, amount=18):
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
        band = _rot(rect(cx - reach, a, cx + reach, a + P / 2.0),
                    math.radians(angle_deg), cx, cy)
        poly = _clip_convex(band, TORSO)
        if len(poly) >= 3:
            bands.append(poly)
    return bands


def skin_tone_of(index: int) -> str:
    """Skin tone (``LIGHT`` / ``DARK``) of palette colour ``index`` (0 <= index < 6)."""
    if not 0 <= int(index) < len(_SKIN):
        raise ValueError(f"skin palette index must be in [0, {len(_SKIN)}), got {index!r}")
    return LIGHT if int(index) < N_LIGHT else DARK


def skin_draw(rng) -> int:
    """The person's skin palette index: the first draw of the appearance stream (so
    :func:`biaslab.data.synthetic.render.appearance_skin` can read the tone without drawing
    the figure)."""
    return int(rng.integers(len(_SKIN)))


def person_figure(rng, gender, skin: str | None = None):
    """Person parts in unit coordinates (head top y=0, feet y=1, centre x=0; x to the image
    right is the person's left, the figure faces the viewer).

    Renderer version 3 ("a neutral mask by construction"): both genders have
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

    ``skin`` (``LIGHT`` / ``DARK``) moves the drawn skin colour into that half of the
    palette (index i -> i mod N_LIGHT in the light half, + N_LIGHT in the dark half); None keeps
    the drawn colour. Every other draw is the same either way.

    Returns (parts, keypoints): parts = [(polygon, colour)] in drawing order,
    keypoints = 17 (x, y) in COCO order.
    """
    i = skin_draw(rng)
    if skin is not None:
        # Same draw, moved into the requested half: the other colours are drawn unchanged.
        if skin not in SKIN_TONES:
            raise ValueError(f"skin must be one of {SKIN_TONES}, got {skin!r}")
        i = i % N_LIGHT + (N_LIGHT if skin == DARK else 0)
    skin = jitter(rng, _SKIN[i], 8)
    hair = jitter(rng, _HAIR[rng.integers(len(_HAIR))], 10)
    top = jitter(rng, _CLOTH[rng.integers(len(_CLOTH))], 12)
    bottom = jitter(rng, _CLOTH[rng.integers(len(_CLOTH))], 12)
    shoes = jitter(rng, _CLOTH[rng.integers(len(_CLOTH))], 12)
    accent = jitter(rng, _ACCENT[rng.integers(len(_ACCENT))], 12)
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
        parts.append((segment_poly((side * 0.045, hip_y - 0.02), (side * lx, ankle_y), 0.06),
                      bottom))
        parts.append((rect(side * lx - 0.035, ankle_y - 0.01, side * lx + 0.035, 1.0),
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
        parts.append((segment_poly(el, wr, arm_w * 0.85), skin))
        parts.append((ellipse_points(wr[0], wr[1], 0.03, 0.03, 8), skin))
        parts.append((segment_poly(sh, el, arm_w), top))
        name = "left" if side > 0 else "right"
        kp[f"{name}_shoulder"] = (side * sx * 0.85, sy)
        kp[f"{name}_elbow"] = el
        kp[f"{name}_wrist"] = wr

    # torso (the same barrel for both) and its accent stripes: the only gender cue
    parts.append((list(TORSO), top))
    parts += [(band, accent) for band in _stripes(0.0 if female else 90.0)]
    # neck, head and hair (the same for both)
    parts.append((rect(-0.025, head_c[1] + head_r - 0.02, 0.025, sy + 0.005), skin))
    parts.append((ellipse_points(head_c[0], head_c[1], head_r, head_r * 1.1, 16), skin))
    cap = ellipse_points(head_c[0], head_c[1] - 0.005, head_r + 0.012, head_r + 0.015, 10,
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


def person_placement(rng, size, horizon):
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


def fit_figure(parts, kps, box):
    """Scale the unit figure to the box height and centre it in the placement box."""
    x0, y0, w, h = box
    ox, oy = x0 + w / 2.0, y0

    def tf(p):
        return (ox + p[0] * h, oy + p[1] * h)

    parts = [(round_poly([tf(p) for p in poly]), col) for poly, col in parts]
    kps = [tuple(round(v, 2) for v in tf(p)) for p in kps]
    return parts, kps, h
