""":func:`generate`: the whole dataset in COCO layout, the probe and neutral manifests, the
README, each file written atomically."""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils
from tqdm import tqdm

from biaslab.runtime.io import atomic_path, write_json
from biaslab.data.synthetic.world import (CASTS, CAST_ASSOCIATION, CAST_STRENGTH, COCO_CATEGORY_IDS,
                                          DARK, FEMALE, FEMALE_OBJECTS, FEMALE_SCENES,
                                          KEYPOINT_NAMES, LIGHT, MALE, MALE_OBJECTS, MALE_SCENES, MIN_IMAGE_SIZE,
                                          NEUTRAL_OBJECTS, OBJECTS, OBJECT_ASSOCIATION, PARAMS_FILE,
                                          PLAIN, P_OBJECT, RENDER_VERSION, SCENES,
                                          SCENE_ASSOCIATION, SKELETON, SKIN_OBJECT_ASSOCIATION,
                                          SPLIT, TEST_SPLIT, FILE_RE,
                                          PROBE_RE, SUPERCATEGORY)
from biaslab.data.synthetic.figures import flat
from biaslab.data.synthetic.captions import template_caption
from biaslab.data.synthetic.render import (NEUTRAL_MANIFEST, PROBE_ATTRIBUTES, PROBE_COLUMNS,
                                           PROBE_MANIFEST, Rendering, as_int, as_prob, image_key,
                                           image_stream, probe_specs, render_neutral, render_probe,
                                           render_scene, sample_truth)

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
                      lambda n: bool(PROBE_RE.match(n)) and not n.startswith("neutral_"))
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
            json.dumps([flat(q) for q in r.person["polys"]]),
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
    seg = [flat(p) for p in polys]
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
             test_gender_ratio: float = 1.0, skin_bias: float = 0.0) -> dict:
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
            independent stream with :func:`test_gender_counts` (paper 000's
            Ratio needs a test set with COCO's gender imbalance, while training stays
            balanced). The ``split`` stage assigns it whole to ``test`` (``split.fixed``).
        test_gender_ratio: men per woman in the test split (> 0; COCO's test set: 2.3).
        skin_bias: planted skin-tone bias b_t in [0, 1] (:func:`sample_truth`):
            the gender-neutral objects (``SKIN_OBJECT_ASSOCIATION``) follow the person's skin
            tone. Skin tone is written as ``bb_skin`` Light / Dark in
            ``perceived_gender_skin.csv`` (Zhao et al. 2021's labels) at every ``b_t``.

    Returns:
        JSON-serialisable summary: ``params``; ``n_images``; ``gender`` {female, male: int};
        ``objects`` {name: {female, male: int images containing it}}; ``scenes`` {scene:
        {female, male}}; ``casts`` {warm/cool: {female, male}}; ``captions`` {female, male,
        none: caption counts by ``biaslab.data.gender.caption_gender``}; ``object_association``,
        ``scene_association``, ``cast_association`` {name: "female"/"male"/"neutral"};
        ``expected`` {probability name: value}; ``files`` {role: path relative to out_dir};
        ``probe_pairs`` {attribute: pairs} (empty without probe pairs); ``test`` (the test
        split's own ``n_images``, ``gender``, ``skin``, ``scenes``, ``casts``; absent without
        one); ``skin`` {light, dark: int}; ``skin_objects`` {name: {light, dark: int images
        containing it}} for the skin-associated objects.

    Raises:
        ValueError: an argument out of range or of the wrong type, or ``out_dir`` is a file.
    """
    from biaslab.data.gender import caption_gender  # local: keep import light for the module

    n = as_int("n_images", n_images, 2)
    b = as_prob("bias", bias)
    seed = as_int("seed", seed, 0)
    size = as_int("image_size", image_size, MIN_IMAGE_SIZE)
    if size > 4096:
        raise ValueError(f"image_size must be <= 4096, got {size}")
    cpi = as_int("captions_per_image", captions_per_image, 1)
    p_neutral = as_prob("p_no_gender_word", p_no_gender_word)
    bt = as_prob("skin_bias", skin_bias)
    n_probe = as_int("probe_pairs", probe_pairs, 0)
    n_test = as_int("test_images", test_images, 0)
    n_test_f, n_test_m = test_gender_counts(n_test, test_gender_ratio)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir {str(out)!r} exists and is not a directory")

    truth = sample_truth(n, b, seed, skin_bias=bt)
    splits = [(SPLIT, 1, truth)]
    test_truth = None
    if n_test:
        if n_test < 2:
            raise ValueError(f"test_images must be 0 or >= 2, got {n_test}")
        test_truth = sample_truth(n_test, b, seed, n_female=n_test_f, stream=1, skin_bias=bt,
                                  first_id=n + 1)
        splits.append((TEST_SPLIT, n + 1, test_truth))
    ann_dir = out / "annotations"
    ann_dir.mkdir(parents=True, exist_ok=True)

    info = {"description": f"biaslab synthetic dataset: {n} images (+ {n_test} test), planted "
                           f"bias {b}, seed {seed}; see README.md", "version": "1",
            "contributor": "biaslab.data.synthetic"}
    licenses = [{"id": 1, "name": "CC0 1.0 (synthetic images generated by biaslab)",
                 "url": "https://creativecommons.org/publicdomain/zero/1.0/"}]
    categories = [{"id": COCO_CATEGORY_IDS[c], "name": c, "supercategory": SUPERCATEGORY[c]}
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
            skin = str(tr["skin"][i])
            present = [o for o, p in zip(OBJECTS, tr["objects"][i]) if p]
            r = render_scene(iid, seed=seed, image_size=size, gender=gender, scene=scene,
                             cast=cast, objects=present)
            person, objs = r.person, r.objects
            with atomic_path(img_dir / fname) as tmp:
                Image.fromarray(r.image, "RGB").save(tmp, format="PNG")
            images.append({"id": iid, "file_name": fname, "width": size, "height": size,
                           "license": 1})
            crng = image_stream(seed, image_key(iid), "captions")
            for _ in range(cpi):
                text = template_caption(crng, gender, scene, present, p_neutral)
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
            truth_rows.append([iid, gender, scene, cast, ";".join(present), skin])
            gender_rows.append([iid, "Female" if gender == FEMALE else "Male",
                                "Light" if skin == LIGHT else "Dark"])
        for stale in img_dir.iterdir():
            if FILE_RE.match(stale.name) and stale.name not in wanted:
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
                if FILE_RE.match(stale.name):
                    stale.unlink()

    write_json(ann_dir / "image_labels.json",
               {"description": "Complete image-level category sets of the biaslab synthetic "
                               "dataset (every drawn object, person included); keys are image "
                               "ids.", "labels": labels})
    _write_csv(ann_dir / "perceived_gender_skin.csv", ["image_id", "bb_gender", "bb_skin"],
               gender_rows)
    _write_csv(ann_dir / "synth_truth.csv",
               ["image_id", "gender", "scene", "cast", "objects", "skin"], truth_rows)
    # Generic per-image attribute table read by biaslab.data.coco (hidden context attributes that
    # label-based resampling cannot see; used to report what each dataset variant balances).
    _write_csv(ann_dir / "image_attributes.csv", ["image_id", "scene", "cast"],
               [[r[0], r[2], r[3]] for r in truth_rows])

    probe = _write_probe(out, n_probe, seed, size)
    n_neutral = _write_neutral(out, n_probe, seed, size)
    summary = _summary(truth, n, b, seed, size, cpi, p_neutral, cap_counts, n_probe, bt)
    summary["params"].update(test_images=n_test, test_gender_ratio=float(test_gender_ratio))
    summary["probe_pairs"] = probe if n_probe else {}
    summary["neutral_images"] = n_neutral
    if n_neutral:
        summary["files"]["neutral"] = NEUTRAL_MANIFEST
    if test_truth is not None:
        t = _summary(test_truth, n_test, b, seed, size, cpi, p_neutral, cap_counts, 0, bt)
        summary["test"] = {k: t[k] for k in ("n_images", "gender", "skin", "scenes", "casts")}
        summary["files"]["test_captions"] = f"annotations/captions_{TEST_SPLIT}.json"
        summary["files"]["test_images"] = f"images/{TEST_SPLIT}"
    write_json(out / PARAMS_FILE, {"generator": "biaslab.data.synthetic",
                                   "render_version": RENDER_VERSION,
                                   "params": summary["params"]})
    with atomic_path(out / "README.md") as tmp:
        tmp.write_text(_readme(summary), encoding="utf-8")
    return summary


def _summary(truth, n, b, seed, size, cpi, p_neutral, cap_counts, n_probe=0, bt=0.0):
    g = truth["gender"]
    is_f, is_m = g == FEMALE, g == MALE
    is_l, is_d = truth["skin"] == LIGHT, truth["skin"] == DARK

    def by_gender(mask):
        return {FEMALE: int((mask & is_f).sum()), MALE: int((mask & is_m).sum())}

    def by_skin(mask):
        return {LIGHT: int((mask & is_l).sum()), DARK: int((mask & is_d).sum())}

    return {
        "params": {"n_images": n, "bias": b, "seed": seed, "image_size": size,
                   "captions_per_image": cpi, "p_no_gender_word": p_neutral,
                   "probe_pairs": n_probe, "p_object": P_OBJECT,
                   "cast_strength": CAST_STRENGTH, "skin_bias": bt},
        "n_images": n,
        "gender": {FEMALE: int(is_f.sum()), MALE: int(is_m.sum())},
        "skin": {LIGHT: int(is_l.sum()), DARK: int(is_d.sum())},
        "skin_objects": {o: by_skin(truth["objects"][:, OBJECTS.index(o)])
                         for o in SKIN_OBJECT_ASSOCIATION},
        "skin_object_association": dict(SKIN_OBJECT_ASSOCIATION),
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
            "p_associated_object_given_skin": P_OBJECT * (1 + bt),
            "p_other_skin_object_given_skin": P_OBJECT * (1 - bt),
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
        "Generated by `biaslab.data.synthetic.generate` (official COCO layout, split `synth`). "
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
        f"- Skin tone: drawn 50/50 from the shared palette, independent of gender; "
        f"written as `bb_skin` Light / Dark. Planted skin-tone bias b_t = {p['skin_bias']}: "
        f"P(present | associated tone) = {P_OBJECT} * (1 + b_t) = "
        f"{P_OBJECT * (1 + p['skin_bias']):.3f}, P(present | other tone) = "
        f"{P_OBJECT * (1 - p['skin_bias']):.3f} for "
        + ", ".join(f"{o} ({t})" for o, t in SKIN_OBJECT_ASSOCIATION.items())
        + " (the gender-neutral objects).",
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
    lines += ["", "| skin-associated object | tone | light | dark |", "|---|---|---|---|"]
    for o, c in s["skin_objects"].items():
        lines.append(f"| {o} | {SKIN_OBJECT_ASSOCIATION[o]} | {c[LIGHT]} | {c[DARK]} |")
    lines += ["", f"Skin tone: {s['skin'][LIGHT]} light / {s['skin'][DARK]} dark.", ""]
    lines += ["", "Caption-level gender counts: "
              + ", ".join(f"{k} {v}" for k, v in s["captions"].items()), ""]
    return "\n".join(lines)
