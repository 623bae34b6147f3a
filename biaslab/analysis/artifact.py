"""Synthetic-artifact test (Hirota et al., "Resampled Datasets Are Not Enough", EMNLP 2024 --
paper 000 -- sec. 3.3, Table 3).

Hypothesis of the paper: a model trained on S_augment can learn a shortcut from inpainting
artifacts to the minority group (only counterfactual images of the under-represented group
carry artifacts), while S_synthetic spreads artifacts over every group. Test: inpaint a random
body part of the person in every test image, keeping the person and the caption (hence the
ground-truth gender ratio) unchanged, and compare the classifier's gender-prediction ratio on the
original (``Ratio_orig``) and the inpainted (``Ratio_inp``) test sets:

    Delta = 100 * |Ratio_orig - Ratio_inp| / Ratio_orig                       (Table 3)

Which Ratio: Table 3's ratios are the plain ``r = #man / #woman`` predictions on test images in
which the person is VISIBLE (only a body part is inpainted): they differ from Table 1's
persons-masked Ratio (e.g. ResNet-50 / Original: 3.5 in Table 3 vs 6.3 in Table 1), several
are below 1 (0.6, 0.8; so not ``max(r, 1/r)``), and masking the person would remove the
inpainted part itself. We therefore use r on unmasked images
(:func:`biaslab.metrics.captions.classification_ratio`, ``ratio``: each gender output counted
where it is at or above its threshold, an image with both on counting for both; captioners:
#man / #woman captions).

Over model seeds (:func:`artifact_summary`): Table 3 reports one Delta per model; we compute
it from the SEED-MEAN raw ratios, ``Delta = 100 |mean r_orig - mean r_inp| / mean r_orig``,
and give beside it the per-seed ratios and per-seed Deltas (``biaslab.runtime.stats.record``) and a
percentile bootstrap CI of Delta over test images (all seeds' predictions of an image
resampled together).

Body parts (:func:`part_mask`). The paper uses COCO-WholeBody part annotations and SAM masks,
neither of which exists offline; we draw small discs from the 17 COCO keypoints:

* ``head``: nose, eyes, ears -- disc around their mean, radius ``max(0.5 u, 0.75 * spread)``
  (spread = largest distance between visible face keypoints);
* ``left_hand`` / ``right_hand``: the wrist, moved ``0.3`` of the forearm (elbow -> wrist)
  further out when the elbow is visible, radius ``0.35 u``;
* ``left_foot`` / ``right_foot``: the ankle, radius ``0.35 u``;

with ``u`` the body unit of :func:`biaslab.counterfactual.masks.keypoint_silhouette`
(max of shoulder width, hip width, half the torso length, 0.12 * box height) and all radii
times ``radius_scale``. For each image the part is drawn uniformly among the configured parts
whose keypoints are visible (``numpy.random.default_rng([seed, image_id])``); a person without
any usable keypoint gets a random sub-box of its box instead (``box``: sides ``box_fraction``
of the box's, uniform position, same generator).

Inpainting (:func:`inpaint_part`) uses the configured generation backend, so the test images
carry the same kind of artifacts as the generated training images:

* ``copy_paste``: the part is removed with ``cv2.inpaint`` and a patch of a real person of the
  SAME group (a donor from the training split, pasted as in generation -- scaled to the person
  box, alpha restricted to the part mask) fills it; seams and colour breaks are real;
* ``sd_inpaint``: the Stable Diffusion inpainting pipeline with the image's caption as the
  prompt (the first caption naming the image's gender, else the first caption);
* ``render`` (synthetic data): the generator re-draws the scene with a person of the SAME
  group and a new appearance (colours, arm pose; ``RenderBackend.redraw_region``), copied in
  inside the part mask. Like the paper's prompt (the caption, so "identical gender ratios in
  the original and inpainted test sets") it keeps the person's gender; it adds no donor, no
  classical-inpainting smear and no JPEG compression, none of which the render-trained models
  saw in training. Its one artifact is the colour break at the part's edge (the new
  appearance meets the old one).

Images are written in the backend's format, as its training candidates: JPEG (quality 95) for
``copy_paste`` / ``sd_inpaint`` (on a PNG source, the synthetic data, the compression is then
itself one of the artifacts the test can detect), PNG for ``render``.

What the test measures on the synthetic data (``python scripts/artifact_flips.py`` writes
``plots/report/artifact_flips.md``: every flip of a classifier's gender call by part and
direction, copy_paste vs render, on the workspace's models). Measured on the default with
5 seeds x 80 test images: with ``copy_paste`` on a render run (this module's behaviour before
``render`` could inpaint a part) S_synthetic's call flipped on 54 of 400 image x seed cells,
52 of them towards "man", and its P(man) - P(woman) rose by 0.66 on female heads against 0.07
on male heads; with ``render`` 16 of 400 flipped, all towards "man" (0.22 vs 0.04 on heads).
The generator's female cues are extended shapes (long hair framing the face, the dress's
flare) that an edge inside the part cuts; the male ones (short hair cap, straight torso) lie
inside it. So on this data Δ grows with how much a model reads the person's shape, whatever its
training artifacts: a context reader (Original at b = 0.8) has a small Δ because it reads
context, not because it ignores artifacts. ``artifact.backend: copy_paste`` still runs the
donor-patch test.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
import numpy as np
import pandas as pd
from PIL import Image

from biaslab.counterfactual.masks import visible_keypoints, body_unit  # one definition of both
from biaslab.runtime.io import atomic_path

#: body part -> COCO keypoint indices (17-keypoint order of biaslab.counterfactual.masks).
PART_KEYPOINTS = {"head": (0, 1, 2, 3, 4), "left_hand": (9,), "right_hand": (10,),
                  "left_foot": (15,), "right_foot": (16,)}
#: the elbow / knee that orients a hand / foot disc.
_PART_JOINT = {"left_hand": 7, "right_hand": 8}
#: disc radius in body units (head: lower bound; see module docstring).
PART_RADIUS = {"head": 0.5, "left_hand": 0.35, "right_hand": 0.35, "left_foot": 0.35,
               "right_foot": 0.35}
DEFAULT_PARTS = ("head", "left_hand", "right_hand")
PARTS_COLUMNS = ["image_id", "ann_id", "gender", "part", "mask_pixels", "prompt", "source_path",
                 "path", "donor_ann_id"]


def available_parts(keypoints, parts: Sequence[str] = DEFAULT_PARTS) -> list[str]:
    """The parts of ``parts`` whose keypoints are visible (order kept)."""
    for p in parts:
        if p not in PART_KEYPOINTS:
            raise ValueError(f"unknown body part {p!r}; known: {sorted(PART_KEYPOINTS)}")
    vis = visible_keypoints(keypoints)
    return [p for p in parts if any(i in vis for i in PART_KEYPOINTS[p])]


def part_disc(keypoints, box, part: str, radius_scale: float = 1.0
              ) -> tuple[float, float, float] | None:
    """``(cx, cy, r)`` of a body part's disc in pixels (module docstring), or None when none of
    its keypoints is visible."""
    if part not in PART_KEYPOINTS:
        raise ValueError(f"unknown body part {part!r}; known: {sorted(PART_KEYPOINTS)}")
    vis = visible_keypoints(keypoints)
    pts = [vis[i] for i in PART_KEYPOINTS[part] if i in vis]
    if not pts:
        return None
    u = body_unit(keypoints, box)
    c = np.mean(np.asarray(pts, float), axis=0)
    r = PART_RADIUS[part] * u
    if part == "head":
        spread = max((math.dist(a, b) for a in pts for b in pts), default=0.0)
        r = max(r, 0.75 * spread)
    joint = _PART_JOINT.get(part)
    if joint is not None and joint in vis:   # the hand lies beyond the wrist
        c = c + 0.3 * (c - np.asarray(vis[joint], float))
    return float(c[0]), float(c[1]), float(r * radius_scale)


def disc_mask(cx: float, cy: float, r: float, height: int, width: int) -> np.ndarray:
    """0/1 uint8 mask of the pixels whose centres lie within ``r`` of ``(cx, cy)`` (pixel
    centres at integer + 0.5)."""
    yy, xx = np.mgrid[0:height, 0:width]
    return (((xx + 0.5 - cx) ** 2 + (yy + 0.5 - cy) ** 2) <= r * r).astype(np.uint8)


def part_mask(person, height: int, width: int, part: str, radius_scale: float = 1.0
              ) -> np.ndarray | None:
    """0/1 mask (height, width) of one body part of a ``persons.parquet`` row, or None when
    the part's keypoints are missing."""
    box = (person["x"], person["y"], person["w"], person["h"])
    d = part_disc(person.get("keypoints"), box, part, radius_scale)
    if d is None:
        return None
    m = disc_mask(*d, height, width)
    return m if m.any() else None


def random_box_mask(person, height: int, width: int, rng: np.random.Generator,
                    fraction: float = 0.3) -> np.ndarray:
    """0/1 mask of a random sub-box of the person box: sides ``fraction`` of the box's (at
    least 1 px), top-left uniform within the box; clipped to the image."""
    x, y, w, h = (float(person[k]) for k in ("x", "y", "w", "h"))
    sw, sh = max(w * fraction, 1.0), max(h * fraction, 1.0)
    x0 = x + float(rng.uniform(0, max(w - sw, 0)))
    y0 = y + float(rng.uniform(0, max(h - sh, 0)))
    from biaslab.counterfactual.masks import box_mask
    return box_mask((x0, y0, sw, sh), height, width)


def choose_part_mask(person, height: int, width: int, rng: np.random.Generator,
                     parts: Sequence[str] = DEFAULT_PARTS, radius_scale: float = 1.0,
                     box_fraction: float = 0.3) -> tuple[np.ndarray, str]:
    """A random body part of one person: ``(mask, part)``, part drawn uniformly among the
    available ``parts`` (``rng.integers``), else ``(random sub-box, "box")``."""
    avail = available_parts(person.get("keypoints"), parts)
    while avail:
        part = avail[int(rng.integers(len(avail)))]
        m = part_mask(person, height, width, part, radius_scale)
        if m is not None:
            return m, part
        avail.remove(part)   # the disc fell outside the image
    return random_box_mask(person, height, width, rng, box_fraction), "box"


def caption_prompt(captions: Sequence[str], gender: str, words: str = "lic") -> str:
    """The inpainting prompt: the first caption that names ``gender`` (paper 000 sec. 3.3:
    "inpainting with the caption as a prompt"), else the first caption ("" when none)."""
    from biaslab.data import gender as G
    for c in captions:
        if G.caption_gender(c, words) == gender:
            return str(c)
    return str(captions[0]) if len(captions) else ""


def inpaint_part(backend, image: np.ndarray, mask: np.ndarray, *, image_id: int, box,
                 group: str, prompt: str, seed: int, guidance_scale: float = 7.5
                 ) -> tuple[np.ndarray, int | None]:
    """Inpaint ``mask`` of ``image`` with a generation backend (``CopyPasteBackend`` /
    ``SDInpaintBackend`` ``generate`` API, or ``RenderBackend.redraw_region``): ``group`` =
    the person's own group (copy_paste: donor group; render: the re-drawn person's group),
    ``prompt`` = the caption (sd_inpaint). Returns ``(image, donor ann_id or None)``; pixels
    outside ``mask`` are unchanged by every backend."""
    item = {"image_id": int(image_id), "boxes": [[float(v) for v in box]]}
    if hasattr(backend, "redraw_region"):   # render: the oracle re-draws the region itself
        return backend.redraw_region(item, image, mask, group, int(seed)), None
    (arr, donors), = backend.generate(item, image, mask, group, prompt, [0], [int(seed)],
                                      [float(guidance_scale)])
    donor = None
    if donors:
        donor = next((int(d) for d in donors if d is not None), None)
    return arr, donor


#: the other group of a binary gender label (Table 3's positive control)
OTHER = {"female": "male", "male": "female"}


def build_inpainted_test_set(items: pd.DataFrame, persons: pd.DataFrame, backend,
                             out_dir: str | os.PathLike, *, seed: int = 0,
                             parts: Sequence[str] = DEFAULT_PARTS, radius_scale: float = 1.0,
                             box_fraction: float = 0.3, guidance_scale: float = 7.5,
                             jpeg_quality: int = 95, other_group: bool = False,
                             progress: bool = False) -> pd.DataFrame:
    """Inpaint a random body part of the main person of every test image.

    Args:
        items: one row per test image: ``image_id``, ``path``, ``gender`` (female/male),
            ``prompt`` (:func:`caption_prompt`).
        persons: ``persons.parquet`` rows (the person is the largest box of the image, crowd-
            like boxes skipped: :func:`biaslab.counterfactual.masks.select_persons`).
        backend: a generation backend (``generate`` API of biaslab.counterfactual).
        out_dir: images go to ``<out_dir>/<image_id>.jpg`` (``.png`` for a backend whose
            ``image_format`` is ``"png"``: render; path kept as given).
        seed: part choice (``default_rng([seed, image_id])``) and backend seed.
        other_group: fill the part from the OTHER group (copy_paste: a donor of the other
            gender; render: the part re-drawn for the other gender), the same parts as with
            ``False``: Table 3's positive control. Where the part can carry
            the gender cue, calls must move; a Δ of 0 on it too means the test cannot move
            on this data, so a Δ of 0 with the person's own group is no evidence.

    Returns:
        ``PARTS_COLUMNS`` table sorted by image_id; images without any person are skipped.
    """
    from tqdm import tqdm

    from biaslab.runtime.io import load_image
    from biaslab.counterfactual.masks import select_persons
    # the backend's own format: render's training candidates are lossless PNGs, so its test
    # images are too (JPEG would add a compression artifact the training images never had)
    ext = "png" if getattr(backend, "image_format", "jpg") == "png" else "jpg"
    by_img = {int(i): g for i, g in persons.groupby("image_id", sort=False)}
    rows = []
    for it in tqdm(items.sort_values("image_id").to_dict("records"), disable=not progress,
                   desc=f"artifact ({getattr(backend, 'name', 'backend')})", unit="img"):
        iid = int(it["image_id"])
        ps = by_img.get(iid)
        if ps is None or ps.empty:
            continue
        sel = select_persons(ps, crowd_min_inside=3)
        if sel.empty:
            continue
        person = sel.iloc[0].to_dict()
        image = load_image(it["path"])
        H, W = image.shape[:2]
        rng = np.random.default_rng([int(seed), iid])
        mask, part = choose_part_mask(person, H, W, rng, parts, radius_scale, box_fraction)
        box = (person["x"], person["y"], person["w"], person["h"])
        out, donor = inpaint_part(backend, image, mask, image_id=iid, box=box,
                                  group=(OTHER[it["gender"]] if other_group
                                         else it["gender"]), prompt=it.get("prompt", ""),
                                  seed=int(rng.integers(2**31 - 1)),
                                  guidance_scale=guidance_scale)
        path = os.path.join(str(out_dir), f"{iid}.{ext}")
        with atomic_path(path, suffix=f".{ext}") as tmp:
            if ext == "png":
                Image.fromarray(out).save(tmp, format="PNG")
            else:
                Image.fromarray(out).save(tmp, format="JPEG", quality=int(jpeg_quality))
        rows.append({"image_id": iid, "ann_id": int(person["ann_id"]), "gender": it["gender"],
                     "part": part, "mask_pixels": int(mask.sum()),
                     "prompt": it.get("prompt", ""), "source_path": str(it["path"]),
                     "path": path, "donor_ann_id": donor})
    df = pd.DataFrame(rows, columns=PARTS_COLUMNS)
    return df.astype({"donor_ann_id": "Int64"}) if len(df) else df


# --------------------------------------------------------------------------- scores
def delta(ratio_orig: float | None, ratio_inp: float | None) -> float | None:
    """Relative change of the gender ratio in percent (paper 000 Table 3):
    ``100 * |ratio_orig - ratio_inp| / ratio_orig``. None when either ratio is undefined
    (None / NaN / inf) or ``ratio_orig`` is 0."""
    if ratio_orig is None or ratio_inp is None:
        return None
    o, i = float(ratio_orig), float(ratio_inp)
    if not (np.isfinite(o) and np.isfinite(i)) or o == 0:
        return None
    return 100.0 * abs(o - i) / o


def _ratio_pair(ro: dict, ri: dict) -> dict:
    """Ratios (None when not finite), counts and Delta from the ``ratio`` dicts (keys ratio,
    n_man, n_woman, optionally n_both / n_neither / n_neutral) of the original and the
    inpainted images."""
    def fin(v):
        return float(v) if np.isfinite(v) else None

    out = {"ratio_orig": fin(ro["ratio"]), "ratio_inp": fin(ri["ratio"])}
    for k in ("n_man", "n_woman", "n_both", "n_neither", "n_neutral"):
        if k in ro:
            out[f"{k}_orig"], out[f"{k}_inp"] = ro[k], ri[k]
    out["delta"] = delta(out["ratio_orig"], out["ratio_inp"])
    return out


def classifier_calls(p_woman, p_man, thresholds: tuple[float, float] = (0.5, 0.5)
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Gender predictions of a multi-label classifier, counted as in
    :func:`biaslab.metrics.captions.classification_ratio`: ``(man_on, woman_on)`` bool (n,),
    an output on where its score is ``>=`` its threshold (``thresholds`` = ``(woman, man)``)."""
    return (np.asarray(p_man, float) >= float(thresholds[1]),
            np.asarray(p_woman, float) >= float(thresholds[0]))


def caption_calls(captions: Sequence[str], genders: Sequence[str], words: str = "lic"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Gender predictions of captions, counted as in :func:`biaslab.metrics.captions.ratio`:
    ``(is_man, is_woman)`` bool (n,) from ``caption_label``; images whose ground-truth gender
    is not female/male count for neither (ratio_details() ignores them)."""
    from biaslab.metrics.captions import caption_label
    if len(captions) != len(genders):
        raise ValueError(f"need aligned captions and genders, got {len(captions)}, "
                         f"{len(genders)}")
    lab = [caption_label(c, words) if g in ("female", "male") else "neutral"
           for c, g in zip(captions, genders)]
    return (np.array([v == "man" for v in lab], bool),
            np.array([v == "woman" for v in lab], bool))


def artifact_scores(p_orig: tuple[np.ndarray, np.ndarray],
                    p_inp: tuple[np.ndarray, np.ndarray],
                    thresholds: tuple[float, float] = (0.5, 0.5)) -> dict:
    """Table 3 for one model from its gender scores ``(p_woman, p_man)`` on the original and
    the inpainted versions of the same images: ``ratio_orig``, ``ratio_inp`` (r = #man /
    #woman predictions, each gender output on where it is ``>=`` its threshold, ``thresholds``
    = ``(woman, man)``, an image with both on counting for both --
    :func:`biaslab.metrics.captions.classification_ratio`; None when undefined), ``delta``
    (:func:`delta`), the counts (``n_man_orig``, ``n_woman_orig``, ``n_both_orig``,
    ``n_neither_orig`` and ``*_inp``), and ``flip_rate`` (% of images whose prediction -- the
    pair (man on, woman on) -- changes)."""
    from biaslab.metrics.captions import classification_ratio
    thr = (float(thresholds[1]), float(thresholds[0]))
    ro = classification_ratio(p_orig[1], p_orig[0], threshold=thr)
    ri = classification_ratio(p_inp[1], p_inp[0], threshold=thr)
    out = _ratio_pair(ro, ri)
    mo, wo = classifier_calls(*p_orig, thresholds)
    mi, wi = classifier_calls(*p_inp, thresholds)
    out["flip_rate"] = float(100.0 * np.mean((mo != mi) | (wo != wi))) if len(mo) else None
    return out


def caption_artifact_scores(orig: Sequence[str], inp: Sequence[str], genders: Sequence[str],
                            words: str = "lic") -> dict:
    """Table 3 (paper 000) for one captioner from its captions of the original and of the
    inpainted versions of the same images (aligned sequences of str; ``genders``: the images'
    female/male labels, other values are not counted): ``ratio_orig``, ``ratio_inp`` (r = #man
    / #woman captions, Burns et al. via ``biaslab.metrics.captions.ratio``; None when
    undefined), ``delta`` (:func:`delta`, %), the counts, and ``flip_rate`` (% of images whose
    caption label -- man, woman or neutral -- changes).

    Raises:
        ValueError: the three sequences differ in length.
    """
    from biaslab.metrics.captions import caption_label, ratio_details
    if not len(orig) == len(inp) == len(genders):
        raise ValueError(f"need aligned captions and genders, got {len(orig)}, {len(inp)}, "
                         f"{len(genders)}")
    ro = ratio_details(list(orig), list(genders), words)
    ri = ratio_details(list(inp), list(genders), words)
    out = _ratio_pair(ro, ri)
    flips = [caption_label(a, words) != caption_label(b, words) for a, b in zip(orig, inp)]
    out["flip_rate"] = float(100.0 * np.mean(flips)) if flips else None
    return out


def _seed_ratios(counts: np.ndarray) -> np.ndarray:
    """counts (n_seeds, 4) = (#man orig, #woman orig, #man inp, #woman inp) ->
    (n_seeds, 2) raw ratios r (inf for x/0, nan for 0/0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.stack([counts[:, 0] / counts[:, 1], counts[:, 2] / counts[:, 3]], axis=1)


def _seed_mean(r: np.ndarray) -> float:
    """Mean of per-seed ratios with :mod:`biaslab.runtime.stats` conventions: NaN seeds (0/0) are
    left out, any infinite seed makes the mean infinite (-> NaN here: Delta undefined)."""
    r = r[~np.isnan(r)]
    if not len(r) or np.isinf(r).any():
        return float("nan")
    return float(r.mean())


def _delta_of_means(calls: np.ndarray) -> float:
    """Delta (%) of the seed-mean ratios from calls (n_images, n_seeds, 4) bool; NaN when
    undefined."""
    r = _seed_ratios(calls.sum(axis=0, dtype=np.int64).astype(float))
    d = delta(_seed_mean(r[:, 0]), _seed_mean(r[:, 1]))
    return float("nan") if d is None else d


def artifact_summary(man_orig, woman_orig, man_inp, woman_inp, *, n_boot: int | None = None,
                     seed: int = 0) -> dict:
    """Table 3 of paper 000 over model seeds, with its uncertainty.

    ``Delta = 100 |Ratio_orig - Ratio_inp| / Ratio_orig`` is computed, as in Table 3, from the
    ratios of the model: here the SEED-MEAN raw ratios ``mean_s r_orig(s)`` and ``mean_s
    r_inp(s)`` (r = #man / #woman predictions on the same images, persons visible). Beside it:
    the per-seed ratios and the per-seed Deltas as :func:`biaslab.runtime.stats.record` (spread over
    seeds). Uncertainty of Delta (a choice): a percentile bootstrap over TEST IMAGES
    (:func:`biaslab.runtime.stats.bootstrap`): each resample draws images with replacement, keeps
    every image's original / inpainted pair and its predictions by all seeds together, and
    recomputes the seed-mean ratios and Delta -- so the interval reflects the finite test
    set, which is what a ratio of counts on a few hundred images is most sensitive to (the
    seed spread is in ``delta_seeds``). Resamples in which a ratio is undefined (a seed with
    no woman prediction) are counted in ``n_undefined`` and left out. Delta >= 0 by
    definition (an absolute change), so when the true change is near 0 the percentile
    interval's lower end sits at 0 and ``ci95`` (the larger distance from the estimate) is
    in effect an upper bound; read such a CI as "Delta is at most hi".

    Args:
        man_orig, woman_orig, man_inp, woman_inp: bool arrays (n_images, n_seeds): whether
            the seed's model predicts man / woman for the original / inpainted image
            (:func:`classifier_calls`, :func:`caption_calls`).
        n_boot: bootstrap resamples (default ``biaslab.runtime.stats.N_BOOT``).
        seed: bootstrap seed.

    Returns:
        ``{"ratio_orig": record, "ratio_inp": record`` (per-seed raw r: +inf counted in
        ``n_inf`` when a seed never predicts woman, 0/0 counted in ``n_missing``),
        ``"delta": {"mean": Delta of the seed means (%, None when undefined), "ci95", "lo",
        "hi", "n": images, "n_boot", "n_undefined"}`` (bootstrap), ``"delta_seeds": record``
        (per-seed Deltas, undefined ones as missing)``}``. Records are
        :func:`biaslab.runtime.stats.record` dicts.

    Raises:
        ValueError: arrays of different shapes or not 2-D.
    """
    from biaslab.runtime import stats
    arrs = [np.asarray(a, bool) for a in (man_orig, woman_orig, man_inp, woman_inp)]
    if arrs[0].ndim != 2 or any(a.shape != arrs[0].shape for a in arrs):
        raise ValueError(f"calls must be 2-D (n_images, n_seeds) of one shape, got "
                         f"{[a.shape for a in arrs]}")
    calls = np.stack(arrs, axis=2)                     # (n_images, n_seeds, 4)
    r = _seed_ratios(calls.sum(axis=0, dtype=np.int64).astype(float))
    per_delta = [delta(o, i) for o, i in r]
    boot = stats.bootstrap(_delta_of_means, calls, n_boot=n_boot or stats.N_BOOT, seed=seed)
    return {"ratio_orig": stats.record([None if np.isnan(v) else v for v in r[:, 0]]),
            "ratio_inp": stats.record([None if np.isnan(v) else v for v in r[:, 1]]),
            "delta": boot, "delta_seeds": stats.record(per_delta)}


def _calls_array(calls: Sequence[tuple]) -> np.ndarray:
    """[(man_orig, woman_orig, man_inp, woman_inp) bool (n,) per seed] -> (n, n_seeds, 4)."""
    return np.stack([np.stack([np.asarray(c[k], bool) for c in calls], axis=1)
                     for k in range(4)], axis=2)


def delta_artifact(calls_backend: Sequence[tuple], calls_redraw: Sequence[tuple], *,
                   n_boot: int | None = None, seed: int = 0) -> dict:
    """Δ_artifact = Δ(backend) - Δ(re-draw): paper 000's Table 3 Δ of the
    backend's inpainted parts minus the Δ of the same parts of the same test images re-drawn
    by the synthetic generator for the person's own gender (``render``: no artifact), for the
    same models. What is left is the part of Δ that the backend's artifacts cause; what
    re-drawing a part does to the models (e.g. cutting a gender cue) cancels.

    Args:
        calls_backend, calls_redraw: per seed ``(man_orig, woman_orig, man_inp, woman_inp)``
            bool arrays (n_images,) (:func:`classifier_calls`), the same images and seeds in
            the same order.
        n_boot, seed: the bootstrap (over test images, both sets resampled together).

    Returns:
        ``{"mean", "ci95", "lo", "hi", "n", "n_boot", "n_undefined"}`` (percentage points;
        :func:`biaslab.runtime.stats.bootstrap`), mean None when a Δ is undefined.

    Raises:
        ValueError: the two sets differ in shape.
    """
    from biaslab.runtime import stats
    a, b = _calls_array(calls_backend), _calls_array(calls_redraw)
    if a.shape != b.shape:
        raise ValueError(f"backend calls {a.shape} and re-draw calls {b.shape} differ")

    def diff(x, y):
        return _delta_of_means(x) - _delta_of_means(y)

    return stats.bootstrap(diff, a, b, n_boot=n_boot or stats.N_BOOT, seed=seed)


#: Δ_artifact on a ``render`` run: the backend is the re-draw itself.
DELTA_ARTIFACT_BY_CONSTRUCTION = ("0 by construction: the render backend re-draws the part "
                                  "with the generator, so Δ(backend) = Δ(re-draw)")


def table3_json(calls: Sequence[tuple], per_seed: Sequence[dict], seed: int = 0) -> dict:
    """One dataset's entry of ``metrics/artifact*.json``: :func:`artifact_summary` of the
    per-seed calls ``[(man_orig, woman_orig, man_inp, woman_inp) bool (n_images,) each, one
    tuple per seed]`` with numbers rounded (``biaslab.runtime.io.json_number``), plus ``flip_rate``
    (record over seeds of ``per_seed[i]["flip_rate"]``) and ``per_seed`` (the given rows):
    ``{"ratio_orig", "ratio_inp", "delta", "delta_seeds", "flip_rate", "per_seed"}``."""
    from biaslab.runtime import stats
    from biaslab.runtime.io import json_number
    if not calls:
        raise ValueError("no seed to summarise")
    arrs = [np.stack([c[k] for c in calls], axis=1) for k in range(4)]
    s = artifact_summary(*arrs, seed=seed)
    s["flip_rate"] = stats.record([r.get("flip_rate") for r in per_seed])
    out = {k: {f: json_number(v) for f, v in d.items()} for k, d in s.items()}
    out["per_seed"] = list(per_seed)
    return out


__all__ = ["caption_artifact_scores", "PART_KEYPOINTS", "DEFAULT_PARTS", "body_unit",
           "available_parts", "part_disc", "disc_mask", "part_mask", "random_box_mask", "choose_part_mask", "caption_prompt",
           "inpaint_part", "build_inpainted_test_set", "delta", "artifact_scores",
           "classifier_calls", "caption_calls", "artifact_summary", "table3_json",
           "delta_artifact", "DELTA_ARTIFACT_BY_CONSTRUCTION"]
