"""Tests of the synthetic COCO-layout generator (biaslab.data.synthetic)."""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from pycocotools.coco import COCO

from biaslab.data import synthetic
from biaslab.data.gender import caption_gender
from biaslab.data.synthetic import (FEMALE_OBJECTS, FEMALE_SCENES, KEYPOINT_NAMES, MALE_OBJECTS,
                                    OBJECTS, P_OBJECT, generate, sample_truth)

N_SMALL = 40
SIZE = 96


def _coco(path: Path) -> COCO:
    with contextlib.redirect_stdout(io.StringIO()):
        return COCO(str(path))


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _truth(root: Path) -> list[dict]:
    with open(root / "annotations" / "synth_truth.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth_small")
    summary = generate(out, n_images=N_SMALL, bias=0.8, seed=3, image_size=SIZE)
    return out, summary


@pytest.fixture(scope="module")
def big_biased(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth_b09")
    return out, generate(out, n_images=400, bias=0.9, seed=11, image_size=64)


@pytest.fixture(scope="module")
def big_unbiased(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth_b0")
    return out, generate(out, n_images=400, bias=0.0, seed=12, image_size=64)


# ----------------------------------------------------------------------------- layout

def test_files_exist_and_load_with_pycocotools(small):
    out, _ = small
    ann = out / "annotations"
    for name in ("captions_synth.json", "instances_synth.json", "person_keypoints_synth.json",
                 "perceived_gender_skin.csv", "image_labels.json", "synth_truth.csv"):
        assert (ann / name).is_file(), name
    assert (out / "README.md").is_file()
    caps = _coco(ann / "captions_synth.json")
    inst = _coco(ann / "instances_synth.json")
    kps = _coco(ann / "person_keypoints_synth.json")
    ids = sorted(caps.getImgIds())
    assert ids == list(range(1, N_SMALL + 1))
    assert sorted(inst.getImgIds()) == ids and sorted(kps.getImgIds()) == ids
    for iid in ids:
        img = caps.imgs[iid]
        assert img["file_name"] == f"{iid:012d}.png"
        assert (out / "images" / "synth" / img["file_name"]).is_file()
        assert len(caps.getAnnIds(imgIds=iid)) == 5
        # exactly one person per image, in both files, same annotation id
        p_inst = inst.getAnnIds(imgIds=iid, catIds=[1])
        p_kp = kps.getAnnIds(imgIds=iid)
        assert len(p_inst) == 1 and p_kp == p_inst
    for c in (caps, inst, kps):
        for a in c.dataset["annotations"]:
            assert a["image_id"] in c.imgs
    # real COCO ids and names
    cats = {c["id"]: c["name"] for c in inst.dataset["categories"]}
    assert cats[1] == "person" and cats[31] == "handbag" and cats[28] == "umbrella"
    assert cats[32] == "tie" and cats[47] == "cup" and cats[37] == "sports ball"
    assert cats[41] == "skateboard" and cats[39] == "baseball bat" and cats[77] == "cell phone"
    assert cats[2] == "bicycle" and cats[18] == "dog"
    kcat = kps.dataset["categories"][0]
    assert kcat["id"] == 1 and kcat["keypoints"] == list(KEYPOINT_NAMES)
    assert len(kcat["keypoints"]) == 17 and len(kcat["skeleton"]) == 19
    for a in kps.dataset["annotations"]:
        assert len(a["keypoints"]) == 51 and a["num_keypoints"] == 17
    for a in inst.dataset["annotations"]:
        assert a["iscrowd"] == 0 and a["area"] > 0
        assert isinstance(a["segmentation"], list) and a["segmentation"]
        assert all(len(p) >= 6 and len(p) % 2 == 0 for p in a["segmentation"])


def test_truth_matches_annotations(small):
    out, summary = small
    ann = out / "annotations"
    inst = _coco(ann / "instances_synth.json")
    labels = json.loads((ann / "image_labels.json").read_text())
    assert set(labels) == {"description", "labels"}
    with open(ann / "perceived_gender_skin.csv", newline="") as f:
        gender_rows = list(csv.DictReader(f))
    assert list(gender_rows[0]) == ["image_id", "bb_gender", "bb_skin"]
    pg = {int(r["image_id"]): r for r in gender_rows}
    for row in _truth(out):
        iid = int(row["image_id"])
        objs = sorted(row["objects"].split(";")) if row["objects"] else []
        drawn = sorted(inst.cats[a["category_id"]]["name"]
                       for a in inst.loadAnns(inst.getAnnIds(imgIds=iid))
                       if a["category_id"] != 1)
        assert drawn == objs
        assert labels["labels"][str(iid)] == sorted(objs + ["person"])
        assert pg[iid]["bb_gender"] == {"female": "Female", "male": "Male"}[row["gender"]]
        assert pg[iid]["bb_skin"] == {"light": "Light", "dark": "Dark"}[row["skin"]]
        assert row["cast"] in ("warm", "cool")
    assert summary["gender"] == {"female": N_SMALL // 2, "male": N_SMALL // 2}


def test_cast_is_never_annotated(small):
    out, _ = small
    for p in (out / "annotations").glob("*_synth.json"):
        text = p.read_text().lower()
        assert "warm" not in text and "cool" not in text, p.name


def test_read_by_generic_coco_reader(small):
    coco_mod = pytest.importorskip("biaslab.data.coco")
    out, _ = small
    tables, drops = coco_mod.read_coco(out, progress=False)
    assert len(tables["images"]) == N_SMALL and not drops
    assert set(tables["images"]["coco_split"]) == {"synth"}
    assert tables["persons"]["keypoints"].notna().all()
    assert len(tables["perceived_gender"]) == N_SMALL


# ----------------------------------------------------------------------------- geometry

def test_person_polygon_inside_bbox_and_keypoints_inside_image(small):
    out, _ = small
    inst = _coco(out / "annotations" / "instances_synth.json")
    kps = _coco(out / "annotations" / "person_keypoints_synth.json")
    for a in inst.loadAnns(inst.getAnnIds(catIds=[1])):
        x, y, w, h = a["bbox"]
        pts = np.concatenate([np.reshape(p, (-1, 2)) for p in a["segmentation"]])
        assert (pts[:, 0] >= x - 1e-6).all() and (pts[:, 0] <= x + w + 1e-6).all()
        assert (pts[:, 1] >= y - 1e-6).all() and (pts[:, 1] <= y + h + 1e-6).all()
        assert 0 <= x and 0 <= y and x + w <= SIZE and y + h <= SIZE
        # the placement box (height = the figure's, width 0.8 x height) covers U(0.10, 0.35)
        # of the image; the figure's own box is as tall and at most as wide
        frac = 0.8 * h * h / SIZE ** 2
        assert 0.099 <= frac <= 0.351, frac
        assert w <= 0.8 * h + 0.01
        assert 0 < a["area"] <= w * h
    for a in kps.dataset["annotations"]:
        k = np.reshape(a["keypoints"], (17, 3))
        assert (k[:, 2] == 2).all()
        assert (k[:, :2] >= 0).all() and (k[:, :2] <= SIZE).all()
        x, y, w, h = a["bbox"]
        assert (k[:, 0] >= x - 1e-6).all() and (k[:, 0] <= x + w + 1e-6).all()
        # person faces the viewer: left_shoulder (5) is right of right_shoulder (6) in the image
        assert k[5, 0] > k[6, 0] and k[0, 1] < k[5, 1] < k[11, 1] < k[13, 1] < k[15, 1]


def test_images_are_rgb_png_of_the_right_size(small):
    from PIL import Image
    out, _ = small
    with Image.open(out / "images" / "synth" / "000000000001.png") as im:
        assert im.format == "PNG" and im.mode == "RGB" and im.size == (SIZE, SIZE)


# ----------------------------------------------------------------------------- determinism

def test_same_seed_identical_bytes_and_other_seed_differs(small, tmp_path):
    out, _ = small
    again = tmp_path / "again"
    generate(again, n_images=N_SMALL, bias=0.8, seed=3, image_size=SIZE)
    assert _hashes(again) == _hashes(out)
    other = tmp_path / "other"
    generate(other, n_images=N_SMALL, bias=0.8, seed=4, image_size=SIZE)
    h1, h2 = _hashes(out), _hashes(other)
    assert h1.keys() == h2.keys()
    assert h1["annotations/captions_synth.json"] != h2["annotations/captions_synth.json"]
    assert h1["images/synth/000000000001.png"] != h2["images/synth/000000000001.png"]


def test_rerun_smaller_removes_stale_images(tmp_path):
    generate(tmp_path, n_images=6, bias=0.5, seed=0, image_size=64)
    generate(tmp_path, n_images=4, bias=0.5, seed=0, image_size=64)
    names = sorted(p.name for p in (tmp_path / "images" / "synth").iterdir())
    assert names == [f"{i:012d}.png" for i in range(1, 5)]


# ----------------------------------------------------------------------------- planted bias

def _diffs(root: Path) -> dict[str, float]:
    """Empirical P(attr of the female group | female) - P(same | male) for objects (mean over
    the 4 female-associated objects, and separately for the male-associated ones, sign flipped),
    scene group and warm cast."""
    rows = _truth(root)
    g = np.array([r["gender"] for r in rows])
    f, m = g == "female", g == "male"
    pres = np.array([[o in r["objects"].split(";") for o in OBJECTS] for r in rows], float)
    fcol = [OBJECTS.index(o) for o in FEMALE_OBJECTS]
    mcol = [OBJECTS.index(o) for o in MALE_OBJECTS]
    fobj, mobj = pres[:, fcol].mean(1), pres[:, mcol].mean(1)
    fscene = np.array([r["scene"] in FEMALE_SCENES for r in rows], float)
    warm = np.array([r["cast"] == "warm" for r in rows], float)
    return {"fobj": fobj[f].mean() - fobj[m].mean(), "mobj": mobj[m].mean() - mobj[f].mean(),
            "scene": fscene[f].mean() - fscene[m].mean(),
            "cast": warm[f].mean() - warm[m].mean(), "n_f": f.sum(), "n_m": m.sum()}


def _sd(p: float, k: int, n_f: int, n_m: int) -> float:
    """Upper bound on the std of a difference of two group means of the average of k
    Bernoulli(<= p-ish) draws: var per image <= max Bernoulli var / k, bounded by 0.25/k."""
    v = min(p * (1 - p), 0.25) / k
    return math.sqrt(v / n_f + v / n_m)


def test_planted_strength_biased(big_biased):
    out, summary = big_biased
    d = _diffs(out)
    b = 0.9
    # object: per-image average of 4 Bernoullis with p <= 0.665 -> var <= 0.25/4
    sd_obj = _sd(0.5, 4, d["n_f"], d["n_m"])
    sd_grp = _sd(0.5, 1, d["n_f"], d["n_m"])
    for key in ("fobj", "mobj"):
        assert abs(d[key] - 2 * P_OBJECT * b) < 6 * sd_obj, (key, d[key])
        assert d[key] > 0.4
    for key in ("scene", "cast"):
        assert abs(d[key] - b) < 6 * sd_grp, (key, d[key])
        assert d[key] > 0.6
    # summary agrees with the truth file
    assert summary["casts"]["warm"]["female"] > summary["casts"]["warm"]["male"]
    assert summary["objects"]["handbag"]["female"] > summary["objects"]["handbag"]["male"]
    assert summary["objects"]["tie"]["male"] > summary["objects"]["tie"]["female"]


def test_planted_strength_zero_bias(big_unbiased):
    out, _ = big_unbiased
    d = _diffs(out)
    sd_obj = _sd(P_OBJECT, 4, d["n_f"], d["n_m"])
    sd_grp = _sd(0.5, 1, d["n_f"], d["n_m"])
    assert abs(d["fobj"]) < 6 * sd_obj and abs(d["mobj"]) < 6 * sd_obj, d
    assert abs(d["scene"]) < 6 * sd_grp and abs(d["cast"]) < 6 * sd_grp, d


@pytest.mark.parametrize("bias", [0.0, 0.5, 1.0])
def test_sample_truth_exact_probabilities(bias):
    """Large-n check of the exact planted probabilities (no rendering)."""
    n = 20000
    t = sample_truth(n, bias, seed=5)
    f = t["gender"] == "female"
    assert f.sum() == n // 2
    tol = 6 * math.sqrt(0.25 / (n / 2))
    for k, o in enumerate(OBJECTS):
        assoc = synthetic.OBJECT_ASSOCIATION[o]
        s = {"female": 1, "male": -1}.get(assoc, 0)
        assert abs(t["objects"][f, k].mean() - P_OBJECT * (1 + s * bias)) < tol, o
        assert abs(t["objects"][~f, k].mean() - P_OBJECT * (1 - s * bias)) < tol, o
    for sc in synthetic.SCENES:
        s = 1 if sc in FEMALE_SCENES else -1
        assert abs((t["scene"][f] == sc).mean() - (1 + s * bias) / 4) < tol, sc
    assert abs((t["cast"][f] == "warm").mean() - (1 + bias) / 2) < tol
    assert abs((t["cast"][~f] == "warm").mean() - (1 - bias) / 2) < tol


# ----------------------------------------------------------------------------- captions

def test_captions_never_contradict_gender(big_biased):
    out, summary = big_biased
    caps = json.loads((out / "annotations" / "captions_synth.json").read_text())
    truth = {int(r["image_id"]): r for r in _truth(out)}
    labels = [caption_gender(a["caption"]) for a in caps["annotations"]]
    for a, lab in zip(caps["annotations"], labels):
        assert lab in (truth[a["image_id"]]["gender"], "none"), a["caption"]
    n = len(labels)
    frac_none = labels.count("none") / n
    assert abs(frac_none - 0.2) < 6 * math.sqrt(0.2 * 0.8 / n)
    assert summary["captions"]["none"] == labels.count("none")
    assert summary["captions"]["both"] == 0


def test_captions_mention_scene_and_objects(big_biased):
    out, _ = big_biased
    caps = json.loads((out / "annotations" / "captions_synth.json").read_text())
    truth = {int(r["image_id"]): r for r in _truth(out)}
    scene_words = {"kitchen": ("kitchen",), "beach": ("beach", "ocean"),
                   "field": ("field",), "street": ("street", "sidewalk", "road")}
    obj_words = {"handbag": ("handbag", "purse"), "umbrella": ("umbrella",), "cup": ("cup",),
                 "cell phone": ("phone",), "tie": ("tie",), "sports ball": ("ball",),
                 "skateboard": ("skateboard",), "baseball bat": ("bat",),
                 "bicycle": ("bicycle", "bike"), "dog": ("dog",)}
    mentions = 0
    for a in caps["annotations"]:
        r = truth[a["image_id"]]
        text = a["caption"].lower()
        assert any(w in text for w in scene_words[r["scene"]]), text
        present = set(r["objects"].split(";")) - {""}
        for o, words in obj_words.items():
            if any(w in text.split() or w + "." in text.split() for w in words):
                assert o in present, (text, present)
                mentions += 1
        assert "warm" not in text and "cool" not in text
    assert mentions > len(caps["annotations"]) // 2
    assert len({a["caption"] for a in caps["annotations"]}) > 500  # varied templates


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_p_no_gender_word_extremes(tmp_path, p):
    generate(tmp_path, n_images=10, bias=0.5, seed=1, image_size=64, p_no_gender_word=p,
             captions_per_image=3)
    caps = json.loads((tmp_path / "annotations" / "captions_synth.json").read_text())
    labels = [caption_gender(a["caption"]) for a in caps["annotations"]]
    assert len(labels) == 30
    if p == 0.0:
        assert "none" not in labels
    else:
        assert set(labels) == {"none"}


# ----------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("kwargs, match", [
    ({"bias": -0.1}, "bias"), ({"bias": 1.5}, "bias"), ({"bias": float("nan")}, "bias"),
    ({"bias": "high"}, "bias"), ({"n_images": 1}, "n_images"), ({"n_images": 2.5}, "n_images"),
    ({"n_images": True}, "n_images"), ({"seed": -1}, "seed"), ({"image_size": 32}, "image_size"),
    ({"captions_per_image": 0}, "captions_per_image"),
    ({"p_no_gender_word": 1.2}, "p_no_gender_word"), ({"probe_pairs": -1}, "probe_pairs"),
])
def test_bad_arguments_raise(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        generate(tmp_path / "x", **kwargs)
    assert not (tmp_path / "x").exists()


def test_out_dir_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        generate(f, n_images=2)


# ----------------------------------------------------------------------------- probe pairs

@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth_probe")
    summary = generate(out, n_images=4, bias=0.8, seed=5, image_size=SIZE, probe_pairs=6)
    return out, summary


def _img(path):
    from PIL import Image
    return np.asarray(Image.open(path).convert("RGB")).astype(int)


def test_probe_manifest_pairs_and_params_file(probed):
    out, summary = probed
    df = synthetic.read_probe(out)
    assert len(df) == 3 * 6 * 2
    assert sorted(df["attribute"].unique()) == sorted(synthetic.PROBE_ATTRIBUTES)
    assert summary["probe_pairs"] == {"objects": 6, "scene": 6, "cast": 6}
    assert summary["files"]["probe"] == "probe/pairs.csv"
    assert all(Path(p).is_file() for p in df["path"])
    # never in the COCO annotations
    inst = json.loads((out / "annotations" / "instances_synth.json").read_text())
    assert len(inst["images"]) == 4
    params = synthetic.read_generator_params(out)
    assert params["seed"] == 5 and params["image_size"] == SIZE and params["probe_pairs"] == 6
    for (attr, _), g in df.groupby(["attribute", "pair"]):
        f, m = g[g["value"] == "female"].iloc[0], g[g["value"] == "male"].iloc[0]
        # the same person (box, polygon, keypoints, gender) in both images
        for col in ("person_gender", "x", "y", "w", "h", "polygon"):
            assert f[col] == m[col], (attr, col)
        assert f["keypoints"] == m["keypoints"]
        others = {"objects": ("scene", "cast"), "scene": ("cast", "objects"),
                  "cast": ("scene", "objects")}[attr]
        for col in others:
            assert f[col] == m[col], (attr, col)
        if attr == "objects":
            fo, mo = f["objects"].split(";"), m["objects"].split(";")
            assert len(fo) == len(mo) == synthetic.PROBE_OBJECTS
            assert set(fo) <= set(FEMALE_OBJECTS) and set(mo) <= set(MALE_OBJECTS)
        elif attr == "scene":
            assert f["scene"] in FEMALE_SCENES and m["scene"] in synthetic.MALE_SCENES
        else:
            assert (f["cast"], m["cast"]) == ("warm", "cool")


def test_probe_cast_pair_differs_by_the_tint_only(probed):
    out, _ = probed
    df = synthetic.read_probe(out)
    s = synthetic.CAST_STRENGTH
    # warm - cool = s * ((255, 150, 40) - (40, 130, 255)) = (38.7, 3.6, -38.7) per pixel,
    # up to the rounding of each image (|error| <= 1)
    expected = s * (np.array([255, 150, 40]) - np.array([40, 130, 255]))
    for _, g in df[df["attribute"] == "cast"].groupby("pair"):
        f = _img(g.loc[g["value"] == "female", "path"].iloc[0])
        m = _img(g.loc[g["value"] == "male", "path"].iloc[0])
        d = (f - m).reshape(-1, 3)
        assert (np.abs(d - expected) <= 1.0).all()


def test_probe_scene_and_object_pairs_keep_the_person_pixels(probed):
    out, _ = probed
    df = synthetic.read_probe(out)
    seed = 5
    for attr in ("scene", "objects"):
        for p in range(6):
            rf = synthetic.render_probe(attr, p, "female", seed, SIZE)
            rm = synthetic.render_probe(attr, p, "male", seed, SIZE)
            assert np.array_equal(rf.person_mask, rm.person_mask)
            assert rf.placement == rm.placement
            row = df[(df["attribute"] == attr) & (df["pair"] == p) & (df["value"] == "female")]
            assert np.array_equal(rf.image, _img(row["path"].iloc[0]))
            # person pixels not covered by an object are identical
            covered = np.zeros((SIZE, SIZE), bool)
            from PIL import Image, ImageDraw
            for r in (rf, rm):
                im = Image.new("L", (SIZE, SIZE), 0)
                d = ImageDraw.Draw(im)
                for o in r.objects:
                    for poly in o["polys"]:
                        d.polygon(poly, fill=1)
                covered |= np.asarray(im, bool)
            keep = rf.person_mask & ~covered
            assert np.array_equal(rf.image[keep], rm.image[keep]), (attr, p)


def test_probe_rerun_smaller_removes_stale_and_zero_removes_manifest(tmp_path):
    generate(tmp_path, n_images=2, bias=0.5, seed=0, image_size=64, probe_pairs=3)
    generate(tmp_path, n_images=2, bias=0.5, seed=0, image_size=64, probe_pairs=2)
    names = {p.name for p in (tmp_path / "probe" / "images").iterdir()}
    pairs = {n for n in names if not n.startswith("neutral_")}
    assert len(pairs) == 3 * 2 * 2 and "cast_0002_male.png" not in names
    # as many mask-neutrality images as pairs per attribute, the stale third one removed
    assert names - pairs == {"neutral_0000_female.png", "neutral_0001_male.png"}
    generate(tmp_path, n_images=2, bias=0.5, seed=0, image_size=64, probe_pairs=0)
    assert synthetic.read_probe(tmp_path) is None and synthetic.read_neutral(tmp_path) is None
    assert not any((tmp_path / "probe" / "images").iterdir())


def test_read_generator_params_rejects_real_data(tiny_coco):
    from biaslab.runtime.io import InputError
    with pytest.raises(InputError, match="not a biaslab synthetic dataset"):
        synthetic.read_generator_params(tiny_coco)
    assert synthetic.read_probe(tiny_coco) is None


def test_synthesize_stage_writes_no_dataset_under_another_profile(tmp_path, monkeypatch):
    """With data.source=coco the stage costs nothing and says why."""
    import json

    import yaml

    from stages import synthesize as stage
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "synthetic": {"n_images": 8}, "data": {"source": "coco", "root": "/x/coco"}}))
    monkeypatch.chdir(tmp_path)
    stage.main()
    assert [p.name for p in (tmp_path / "data/raw/synthetic").iterdir()] == ["NOT_USED.txt"]
    m = json.loads((tmp_path / "metrics/synthetic.json").read_text())
    assert m["skipped"] is True and "'coco'" in m["reason"]
    assert "/x/coco" not in m["reason"]       # no machine path in the output
