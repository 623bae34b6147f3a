"""The context: object shapes (real COCO categories) and their placement around the person,
and the four scene backgrounds."""
from __future__ import annotations

import math

import numpy as np

from biaslab.data.synthetic.world import PLAIN
from biaslab.data.synthetic.figures import band_poly, ellipse_points, jitter, rect, segment_poly

# --------------------------------------------------------------------------- objects

# base (w, h) in pixels at 160 px, and whether the object stands on the ground
OBJ_SIZE = {
    "handbag": (22, 20, False), "umbrella": (32, 30, False), "cup": (14, 14, False),
    "cell phone": (10, 17, False), "tie": (10, 30, False), "sports ball": (18, 18, True),
    "skateboard": (40, 11, True), "baseball bat": (9, 40, False), "bicycle": (44, 28, True),
    "dog": (36, 25, True),
}


def object_shapes(rng, name, x0, y0, w, h):
    """Polygons (pixels) of one object in box (x0, y0, w, h).

    Returns (mask_polys, drawing): mask_polys = polygons whose union is the object
    (segmentation), drawing = [(polygon, fill)] in drawing order (details included).
    """
    def P(pts):  # unit box -> pixels
        return [(x0 + u * w, y0 + v * h) for u, v in pts]

    draw = []
    if name == "handbag":
        col = jitter(rng, (190, 40, 110), 25)
        body = P([(0.08, 0.42), (0.92, 0.42), (1.0, 1.0), (0.0, 1.0)])
        handle = P(band_poly(0.5, 0.45, 0.32, 0.42, 0.09, math.pi, 2 * math.pi, 10))
        flap = P([(0.08, 0.42), (0.92, 0.42), (0.8, 0.62), (0.2, 0.62)])
        clasp = P(rect(0.45, 0.55, 0.55, 0.66))
        draw = [(handle, col), (body, col), (flap, jitter(rng, (120, 20, 70), 10)),
                (clasp, (230, 200, 60))]
        mask = [body, handle]
    elif name == "umbrella":
        col = jitter(rng, (130, 50, 190), 30)
        canopy = ellipse_points(0.5, 0.48, 0.5, 0.46, 12, math.pi, 2 * math.pi)
        canopy += [(0.75, 0.43), (0.5, 0.48), (0.25, 0.43)]
        canopy = P(canopy)
        shaft = P(rect(0.47, 0.45, 0.53, 0.92))
        hook = P(band_poly(0.39, 0.9, 0.14, 0.1, 0.06, 0, math.pi, 6))
        stripes = [P([(0.5, 0.02), (0.3, 0.44), (0.42, 0.45)]),
                   P([(0.5, 0.02), (0.7, 0.44), (0.58, 0.45)])]
        draw = [(canopy, col)] + [(s, jitter(rng, (240, 220, 250), 10)) for s in stripes] + \
               [(shaft, (60, 50, 50)), (hook, (60, 50, 50))]
        mask = [canopy, shaft, hook]
    elif name == "cup":
        col = jitter(rng, (245, 245, 250), 8)
        body = P(rect(0.05, 0.1, 0.72, 1.0))
        handle = P(band_poly(0.72, 0.55, 0.26, 0.25, 0.1, -math.pi / 2, math.pi / 2, 8))
        coffee = P(rect(0.1, 0.12, 0.67, 0.24))
        rim = P(rect(0.02, 0.06, 0.75, 0.14))
        draw = [(handle, (70, 70, 90)), (body, col), (rim, (70, 70, 90)),
                (coffee, (110, 60, 30))]
        mask = [body, handle, rim]
    elif name == "cell phone":
        body = P(rect(0.0, 0.0, 1.0, 1.0))
        screen = P(rect(0.13, 0.1, 0.87, 0.84))
        draw = [(body, (25, 25, 30)), (screen, jitter(rng, (110, 190, 255), 15))]
        mask = [body]
    elif name == "tie":
        col = jitter(rng, (170, 20, 35), 20)
        knot = P([(0.2, 0.0), (0.8, 0.0), (0.65, 0.15), (0.35, 0.15)])
        blade = P([(0.35, 0.15), (0.65, 0.15), (0.95, 0.86), (0.5, 1.0), (0.05, 0.86)])
        stripe_col = jitter(rng, (30, 30, 110), 10)
        stripes = [P([(0.3, 0.3 + k), (0.7, 0.22 + k), (0.74, 0.3 + k), (0.28, 0.38 + k)])
                   for k in (0.0, 0.22, 0.44)]
        draw = [(blade, col), (knot, col)] + [(s, stripe_col) for s in stripes]
        mask = [knot, blade]
    elif name == "sports ball":
        ball = P(ellipse_points(0.5, 0.5, 0.5, 0.5, 20))
        draw = [(ball, jitter(rng, (235, 115, 25), 15)),
                (P(rect(0.47, 0.02, 0.53, 0.98)), (30, 20, 10)),
                (P(rect(0.02, 0.47, 0.98, 0.53)), (30, 20, 10))]
        mask = [ball]
    elif name == "skateboard":
        deck = P(ellipse_points(0.12, 0.3, 0.12, 0.3, 6, math.pi / 2, 3 * math.pi / 2)
                 + ellipse_points(0.88, 0.3, 0.12, 0.3, 6, -math.pi / 2, math.pi / 2))
        wheels = [P(ellipse_points(c, 0.78, 0.07, 0.22, 10)) for c in (0.22, 0.78)]
        draw = [(deck, jitter(rng, (60, 160, 90), 40))] + \
               [(wl, (250, 220, 60)) for wl in wheels]
        mask = [deck] + wheels
    elif name == "baseball bat":
        local = [(0.42, 1.0), (0.58, 1.0), (0.56, 0.93), (0.55, 0.55), (0.72, 0.05),
                 (0.5, 0.0), (0.28, 0.05), (0.45, 0.55), (0.44, 0.93)]
        bat = P(local)
        draw = [(bat, jitter(rng, (215, 170, 100), 15)),
                (P(rect(0.4, 0.94, 0.6, 1.0)), (60, 40, 30))]
        mask = [bat]
    elif name == "bicycle":
        col = jitter(rng, (30, 90, 210), 30)
        wheels = [P(ellipse_points(c, 0.68, 0.2, 0.31, 16)) for c in (0.2, 0.8)]
        hubs = [P(ellipse_points(c, 0.68, 0.12, 0.19, 12)) for c in (0.2, 0.8)]
        tubes = [P(segment_poly(a, b, 0.07)) for a, b in
                 [((0.2, 0.68), (0.45, 0.35)), ((0.45, 0.35), (0.8, 0.68)),
                  ((0.45, 0.35), (0.5, 0.68)), ((0.2, 0.68), (0.5, 0.68)),
                  ((0.45, 0.35), (0.72, 0.3)), ((0.72, 0.3), (0.8, 0.68))]]
        seat = P(rect(0.36, 0.2, 0.52, 0.28))
        bar = P(rect(0.68, 0.1, 0.82, 0.18))
        draw = [(wl, (30, 30, 30)) for wl in wheels] + \
               [(hb, (200, 200, 200)) for hb in hubs] + [(t, col) for t in tubes] + \
               [(seat, (30, 30, 30)), (bar, (30, 30, 30))]
        mask = wheels + tubes + [seat, bar]
    elif name == "dog":
        col = jitter(rng, (150, 95, 45), 30)
        dark = tuple(max(c - 50, 0) for c in col)
        body = P(ellipse_points(0.45, 0.5, 0.32, 0.2, 14))
        head = P(ellipse_points(0.82, 0.28, 0.15, 0.2, 12))
        ear = P([(0.72, 0.12), (0.8, 0.12), (0.74, 0.42)])
        snout = P(rect(0.9, 0.28, 1.0, 0.4))
        legs = [P(rect(c, 0.55, c + 0.07, 1.0)) for c in (0.2, 0.3, 0.58, 0.66)]
        tail = P(segment_poly((0.15, 0.45), (0.0, 0.2), 0.06))
        draw = [(tail, col)] + [(lg, col) for lg in legs] + \
               [(body, col), (head, col), (snout, col), (ear, dark)]
        mask = [body, head, snout, tail] + legs
    else:  # pragma: no cover - names come from OBJECTS
        raise ValueError(f"unknown object {name!r}")
    return mask, draw


def _overlap(a, b, gap=2.0):
    return not (a[0] + a[2] + gap <= b[0] or b[0] + b[2] + gap <= a[0]
                or a[1] + a[3] + gap <= b[1] or b[1] + b[3] + gap <= a[1])


def place_box(rng, size, w, h, ground, horizon, person_box, others):
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

def draw_scene(rng, draw, size, scene):
    """Draw the background of ``scene``; returns the horizon y (pixels)."""
    S = size
    horizon = rng.uniform(0.38, 0.55) * S
    R = draw.rectangle
    if scene == "kitchen":
        wall = jitter(rng, (238, 226, 190), 10)
        R([0, 0, S, horizon], fill=wall)
        cab = jitter(rng, (150, 100, 60), 15)
        n = int(rng.integers(2, 4))
        for i in range(n):
            x0 = (i + 0.1) * S / n
            R([x0, 0.04 * S, x0 + 0.8 * S / n, 0.22 * S], fill=cab)
            R([x0 + 0.35 * S / n, 0.16 * S, x0 + 0.45 * S / n, 0.18 * S], fill=(200, 200, 200))
        R([0, horizon - 0.1 * S, S, horizon - 0.07 * S], fill=(190, 190, 200))   # counter top
        R([0, horizon - 0.07 * S, S, horizon], fill=cab)
        t = S / 10
        a, b = jitter(rng, (245, 245, 240), 5), jitter(rng, (120, 80, 60), 15)
        for j in range(int((S - horizon) / t) + 1):
            for i in range(11):
                R([i * t, horizon + j * t, (i + 1) * t, horizon + (j + 1) * t],
                  fill=a if (i + j) % 2 == 0 else b)
    elif scene == "beach":
        R([0, 0, S, horizon], fill=jitter(rng, (150, 205, 245), 10))
        R([0, horizon - 0.12 * S, S, horizon], fill=jitter(rng, (30, 110, 185), 12))
        for k in range(3):
            y = horizon - (0.03 + 0.035 * k) * S
            R([0, y, S, y + max(1, 0.006 * S)], fill=(200, 230, 250))
        R([0, horizon, S, S], fill=jitter(rng, (236, 214, 160), 8))
        for _ in range(12):
            x, y = rng.uniform(0, S), rng.uniform(horizon, S)
            R([x, y, x + 0.01 * S, y + 0.01 * S], fill=(210, 185, 130))
    elif scene == "field":
        R([0, 0, S, horizon], fill=jitter(rng, (165, 210, 240), 10))
        R([0, horizon - 0.05 * S, S, horizon], fill=(40, 90, 45))              # tree line
        g1, g2 = jitter(rng, (70, 160, 65), 10), jitter(rng, (95, 180, 80), 10)
        stripe = (S - horizon) / 5
        for k in range(5):
            R([0, horizon + k * stripe, S, horizon + (k + 1) * stripe + 1],
              fill=g1 if k % 2 == 0 else g2)
        y = rng.uniform(horizon + 0.1 * S, S - 0.05 * S)
        R([0, y, S, y + max(1, 0.012 * S)], fill=(245, 245, 245))
    elif scene == "street":
        R([0, 0, S, horizon], fill=jitter(rng, (195, 205, 215), 8))
        x = 0.0
        while x < S:
            bw = rng.uniform(0.18, 0.35) * S
            top = rng.uniform(0.02, 0.25) * S
            R([x, top, x + bw, horizon], fill=jitter(rng, (130, 120, 115), 30))
            for wy in np.arange(top + 0.04 * S, horizon - 0.08 * S, 0.09 * S):
                for wx in np.arange(x + 0.03 * S, x + bw - 0.06 * S, 0.08 * S):
                    R([wx, wy, wx + 0.04 * S, wy + 0.05 * S], fill=(230, 230, 170))
            x += bw
        R([0, horizon, S, horizon + 0.1 * S], fill=(175, 175, 170))               # sidewalk
        R([0, horizon + 0.1 * S, S, S], fill=jitter(rng, (70, 70, 75), 6))       # road
        y = horizon + 0.1 * S + (S - horizon - 0.1 * S) * 0.55
        for k in range(6):
            R([k * S / 5, y, k * S / 5 + S / 10, y + max(1, 0.015 * S)], fill=(240, 210, 60))
    elif scene == PLAIN:   # the mask-neutrality images: one uniform grey, no horizon drawn
        grey = int(rng.integers(90, 201))
        R([0, 0, S, S], fill=(grey, grey, grey))
    else:  # pragma: no cover
        raise ValueError(f"unknown scene {scene!r}")
    return horizon
