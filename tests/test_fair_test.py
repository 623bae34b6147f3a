"""A skewed test split, a neutral mask by construction, the size-matched
control of sub-sampling, and the mask-neutrality precondition of the Ratio claims. The split
and the verdict rules are tested on tables written here by hand, independently of
``biaslab.data.synthetic``."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from biaslab.data import synthetic as S
from biaslab.data.synthetic import figures as SF
from biaslab.analysis import validity
from biaslab.analysis import verdicts
from biaslab.data.datasets import matched_subset
from biaslab.runtime.io import InputError
from biaslab.data.labels import split_with_fixed
from biaslab.analysis.probe import mask_neutral_record


# ----------------------------------------------------------------------------- item 2: figure

def _raster(parts, H=400):
    from PIL import ImageDraw
    img = Image.new("RGB", (H, H), (0, 0, 0))
    d = ImageDraw.Draw(img)
    for poly, col in parts:
        d.polygon([(H / 2 + x * H, y * H) for x, y in poly], fill=col)
    return np.asarray(img)


def test_genders_share_the_silhouette_and_differ_only_in_stripe_direction():
    for seed in range(10):
        f, kf = SF.person_figure(np.random.default_rng(seed), S.FEMALE)
        m, km = SF.person_figure(np.random.default_rng(seed), S.MALE)
        assert kf == km
        fa, ma = _raster(f), _raster(m)
        # the same silhouette: the box and the polygon of the person cannot tell gender
        # (the stripes' rasterised edges may touch a torso edge pixel: <= 0.5 % of the body)
        fs, ms = (fa > 0).any(-1), (ma > 0).any(-1)
        assert (fs != ms).sum() <= 0.005 * (fs | ms).sum()
        assert {c for _, c in f} == {c for _, c in m}      # the same colours
        diff = (fa != ma).any(-1)
        ys, xs = np.nonzero(diff)
        # pixels differ only inside the torso (TORSO spans y 0.195..0.66 of 400 px)
        assert ys.min() >= 0.195 * 400 - 1 and ys.max() <= 0.66 * 400 + 1
    assert S.RENDER_VERSION == 3


def test_stripe_patterns_have_equal_area_and_luminance():
    """Equal extent (both fill the torso), equal accent area within 3 % of the torso, so a uniform fill is as
    far from one pattern as from the other in mean colour."""
    from PIL import ImageDraw
    areas = {}
    for name, angle in (("female", 0.0), ("male", 90.0)):
        img = Image.new("L", (800, 800), 0)
        d = ImageDraw.Draw(img)
        for band in SF._stripes(angle):
            d.polygon([(400 + x * 800, y * 800) for x, y in band], fill=1)
        areas[name] = int(np.asarray(img).sum())
    img = Image.new("L", (800, 800), 0)
    ImageDraw.Draw(img).polygon([(400 + x * 800, y * 800) for x, y in S.TORSO], fill=1)
    torso = int(np.asarray(img).sum())
    assert abs(areas["female"] - areas["male"]) / torso < 0.03      # measured 2.1 %
    assert 0.4 < areas["female"] / torso < 0.6 and 0.4 < areas["male"] / torso < 0.6


def test_clip_convex_by_hand():
    square = [(0, 0), (2, 0), (2, 2), (0, 2)]
    clipped = SF._clip_convex([(1, -1), (3, -1), (3, 1), (1, 1)], square)
    xs, ys = sorted({p[0] for p in clipped}), sorted({p[1] for p in clipped})
    assert xs == [1, 2] and ys == [0, 1]                     # the overlap [1,2] x [0,1]
    assert SF._clip_convex([(5, 5), (6, 5), (6, 6)], square) == []


# ----------------------------------------------------------------------------- item 1: test split

def test_test_gender_counts():
    assert S.test_gender_counts(200, 2.3) == (61, 139)     # 200 * 2.3 / 3.3 = 139.4
    assert S.test_gender_counts(10, 1.0) == (5, 5)
    assert S.test_gender_counts(2, 100.0) == (1, 1)        # both genders kept
    assert S.test_gender_counts(0, 2.3) == (0, 0)
    with pytest.raises(ValueError, match="test_gender_ratio"):
        S.test_gender_counts(10, 0)


@pytest.fixture(scope="module")
def with_test(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth_test_split")
    s = S.generate(out, n_images=12, bias=0.8, seed=2, image_size=64, probe_pairs=4,
                   test_images=10, test_gender_ratio=2.3)
    return out, s


def test_test_split_is_a_separate_coco_split_with_the_ratio(with_test):
    out, s = with_test
    assert s["test"]["gender"] == {"female": 3, "male": 7}
    assert s["gender"] == {"female": 6, "male": 6}            # the pool stays balanced
    caps = json.loads((out / "annotations" / "captions_synthtest.json").read_text())
    ids = sorted(i["id"] for i in caps["images"])
    assert ids == list(range(13, 23))
    assert all((out / "images" / "synthtest" / f"{i:012d}.png").is_file() for i in ids)
    truth = S.read_truth(out)
    assert sorted(truth) == list(range(1, 23))
    assert sum(truth[i]["gender"] == "male" for i in ids) == 7
    # pool annotations do not list test images
    pool = json.loads((out / "annotations" / "captions_synth.json").read_text())
    assert sorted(i["id"] for i in pool["images"]) == list(range(1, 13))


def test_test_split_is_read_as_its_own_coco_split(with_test):
    from biaslab.data.coco import read_coco
    out, _ = with_test
    tables, _ = read_coco(out)
    img = tables["images"]
    assert set(img.loc[img["image_id"] > 12, "coco_split"]) == {"synthtest"}
    assert set(img.loc[img["image_id"] <= 12, "coco_split"]) == {"synth"}


def test_rerun_without_test_split_removes_it(tmp_path):
    S.generate(tmp_path, n_images=4, image_size=64, test_images=4)
    S.generate(tmp_path, n_images=4, image_size=64, test_images=0)
    assert not (tmp_path / "annotations" / "captions_synthtest.json").exists()
    assert not list((tmp_path / "images" / "synthtest").glob("*.png"))


def test_neutral_images_have_no_context(with_test):
    out, s = with_test
    df = S.read_neutral(out)
    assert len(df) == 4 and list(df["value"]) == ["female", "male", "female", "male"]
    for r in df.to_dict("records"):
        a = np.asarray(Image.open(r["path"]).convert("RGB")).astype(int)
        x, y, w, h = (int(round(v)) for v in (r["x"], r["y"], r["w"], r["h"]))
        outside = np.ones(a.shape[:2], bool)
        outside[max(y - 1, 0):y + h + 2, max(x - 1, 0):x + w + 2] = False
        px = a[outside]
        # one uniform grey, no tint (a cast would move R and B apart)
        assert (px == px[0]).all() and px[0][0] == px[0][1] == px[0][2]
    assert s["neutral_images"] == 4


def test_person_free_images_equal_the_originals_but_for_the_person(with_test, tmp_path):
    """The mask-neutrality reference: each probe / neutral image drawn again without its
    person: identical outside the person's pixels, the background inside them."""
    from biaslab.analysis.probe import person_free_images
    out, _ = with_test
    for frame in (S.read_neutral(out), S.read_probe(out)):
        free = person_free_images(frame, out, tmp_path / "empty")
        assert len(free) == len(frame) and list(free["attribute"]) == list(frame["attribute"])
        g = S.read_generator_params(out)
        for r, f in zip(frame.to_dict("records"), free["path"]):
            a = np.asarray(Image.open(r["path"]).convert("RGB"))
            b = np.asarray(Image.open(f).convert("RGB"))
            if r["attribute"] == "neutral":
                rd = S.render_neutral(int(r["pair"]), g["seed"], g["image_size"])
            else:
                rd = S.render_probe(r["attribute"], int(r["pair"]), r["value"], g["seed"],
                                    g["image_size"])
            assert (a == rd.image).all()                   # the re-rendering is the file
            person = rd.person_mask
            assert (a[~person] == b[~person]).all()
            assert (a[person] != b[person]).any()          # the person is gone
            if r["attribute"] == "neutral":                # uniform grey without it
                assert (b == b[0, 0]).all()
    # an image that is not its re-rendering is refused, naming the file
    bad = S.read_neutral(out).iloc[:1].copy()
    img = np.asarray(Image.open(bad["path"].iloc[0]).convert("RGB")).copy()
    img[0, 0] = 255 - img[0, 0]
    p = tmp_path / "bad.png"
    Image.fromarray(img).save(p)
    bad["path"] = str(p)
    with pytest.raises(InputError, match="bad.png.*re-rendering"):
        person_free_images(bad, out, tmp_path / "empty2")


# ----------------------------------------------------------------------------- split.fixed

def _labels_and_images():
    labels = pd.DataFrame({"image_id": range(1, 13),
                           "gender": ["female", "male"] * 4 + ["male", "male", "male", "female"]})
    images = pd.DataFrame({"image_id": range(1, 13),
                           "coco_split": ["train2014"] * 8 + ["val2014"] * 4})
    return labels, images


def test_split_with_fixed_assigns_a_coco_split_whole():
    labels, images = _labels_and_images()
    out = split_with_fixed(labels, images, {"train": 0.75, "val": 0.25, "test": 0.0}, 0,
                           {"val2014": "test"})
    assert list(out.loc[out["split"] == "test", "image_id"]) == [9, 10, 11, 12]
    rest = out[out["image_id"] <= 8]
    assert rest["split"].value_counts().to_dict() == {"train": 6, "val": 2}
    assert rest.groupby(["split", "gender"]).size().to_dict() == {
        ("train", "female"): 3, ("train", "male"): 3, ("val", "female"): 1, ("val", "male"): 1}
    # no fixed split: the plain stratified split
    plain = split_with_fixed(labels, images, {"train": 0.5, "test": 0.5}, 0, {})
    assert len(plain) == 12 and set(plain["split"]) == {"train", "test"}


def test_split_with_fixed_names_a_missing_coco_split():
    labels, images = _labels_and_images()
    with pytest.raises(InputError, match="synthtest"):
        split_with_fixed(labels, images, {"train": 1.0}, 0, {"synthtest": "test"},
                         source="images.parquet")


# ----------------------------------------------------------------------------- item 3: matched

def test_matched_subset_has_the_resampled_sets_gender_counts():
    d = pd.DataFrame({"image_id": range(1, 21), "gender": ["female"] * 8 + ["male"] * 12,
                      "sample_id": [str(i) for i in range(1, 21)]})
    like = pd.DataFrame({"image_id": [1, 2, 9, 10, 11], "gender": ["female", "female", "male",
                                                                    "male", "male"]})
    m = matched_subset(d, like, seed=0)
    assert m["gender"].value_counts().to_dict() == {"male": 3, "female": 2}
    assert m["image_id"].is_unique and set(m["image_id"]) <= set(d["image_id"])
    assert m.equals(matched_subset(d, like, seed=0))         # deterministic
    assert not m.equals(matched_subset(d, like, seed=1))
    with pytest.raises(ValueError, match="9 female"):
        matched_subset(d, pd.DataFrame({"image_id": range(9), "gender": ["female"] * 9}))


def test_resampling_claims_use_the_matched_control_when_it_exists():
    rec = {"values": [0.1, 0.12, 0.11]}
    probe = {"classifier": {r: {"objects": rec, "scene": rec, "cast": rec}
                            for r in ("original", "subsample", "matched", "oversample")}}
    ids = [c["id"] for c in validity.probe_checks(probe)]
    assert "classifier/subsample-matched/objects<0" in ids
    assert "classifier/subsample-matched/cast≥0" in ids
    assert "classifier/subsample-original/objects<0" not in ids
    assert "classifier/oversample-original/objects<0" in ids
    del probe["classifier"]["matched"]
    ids = [c["id"] for c in validity.probe_checks(probe)]
    assert "classifier/subsample-original/objects<0" in ids


# ----------------------------------------------------------------------------- precondition

def test_mask_neutral_record_by_hand():
    pw = np.array([0.5, 0.5, 0.25, 0.75])
    pm = np.array([0.5, 0.5, 0.75, 0.25])
    r = mask_neutral_record([(pw, pm), (pw, 2 * pm * 0.5)], ["female", "male"] * 2)
    assert r["ratio_expected"] == pytest.approx(1.0)          # 4 / 4 pooled
    assert r["per_seed"] == [pytest.approx(1.0), pytest.approx(1.0)]
    # AUC of p_man - p_woman: females score (0, 0.5), males (0, -0.5): of the 4 (male,
    # female) pairs only (0, 0) ties (1/2) and no male scores higher -> 0.5 / 4
    assert r["masked_gender_auc"][0] == pytest.approx(0.125)
    r = mask_neutral_record([(np.zeros(2), np.ones(2))], ["female", "male"])
    assert r["ratio_expected"] is None and r["ratio_flag"] == "r=inf"


def test_ratio_claims_read_mask_not_neutral_outside_the_bounds():
    probe = {"mask_neutral": {"original": {"ratio_expected": 1.2, "per_seed": [1.1, 1.3],
                                           "n_images": 10},
                              "synthetic": {"ratio_expected": 2.0, "per_seed": [2.0],
                                            "n_images": 10},
                              "oversample": {"ratio_expected": None, "ratio_flag": "r=inf"}}}
    rows = {r["dataset"]: r for r in verdicts.mask_neutral_rows(probe)}
    assert rows["original"]["met"] and not rows["synthetic"]["met"]
    assert not rows["oversample"]["met"] and rows["oversample"]["ratio_expected"] == np.inf
    checks = [{"id": "classifier/synthetic-original/ratio<0", "verdict": "holds"},
              {"id": "classifier/original/objects>0", "verdict": "holds"}]
    out = verdicts.apply_mask_neutral(checks, probe)
    assert out[0]["verdict"] == "mask not neutral" and "2.00" in out[0]["reason"]
    assert out[1]["verdict"] == "holds"
    # within the bounds for both rows: verdict kept
    probe["mask_neutral"]["synthetic"]["ratio_expected"] = 0.7
    assert verdicts.apply_mask_neutral(checks, probe)[0]["verdict"] == "holds"
    assert verdicts.summary(out)["mask_not_neutral"] == 1
    assert "| synthetic | 2.00 |" in "\n".join(verdicts.mask_neutral_markdown(
        verdicts.mask_neutral_rows({"mask_neutral": {"synthetic": {"ratio_expected": 2.0,
                                                                   "per_seed": [2.0]}}})))


# ----------------------------------------------------------------------------- item 4

def _calls(man_o, woman_o, man_i, woman_i):
    return tuple(np.array(v, bool) for v in (man_o, woman_o, man_i, woman_i))


def test_delta_artifact_by_hand():
    from biaslab.analysis.artifact import delta_artifact
    # 4 images, 1 seed: orig r = 2 man / 2 woman = 1. Backend: one woman call flips to man,
    # r_inp = 3 / 1 = 3, Δ = 200. Re-draw: nothing flips, Δ = 0. Δ_artifact = 200.
    orig = ([1, 1, 0, 0], [0, 0, 1, 1])
    backend = [_calls(*orig, [1, 1, 1, 0], [0, 0, 0, 1])]
    redraw = [_calls(*orig, *orig)]
    r = delta_artifact(backend, redraw, n_boot=200, seed=0)
    assert r["mean"] == pytest.approx(200.0) and r["n"] == 4
    # the same set twice: 0 on every resample
    r0 = delta_artifact(backend, backend, n_boot=200, seed=0)
    assert r0["mean"] == 0.0 and r0["lo"] == 0.0 and r0["hi"] == 0.0
    with pytest.raises(ValueError, match="differ"):
        delta_artifact(backend, [_calls(*([1, 0],) * 4)], n_boot=200)


def test_delta_artifact_check_only_off_render():
    art = {"test_set": {"backend": "copy_paste"},
           "original": {"per_seed": [{"delta": 5.0, "delta_artifact": 4.0},
                                     {"delta": 6.0, "delta_artifact": 5.0},
                                     {"delta": 4.0, "delta_artifact": 3.0}]},
           "synthetic": {"per_seed": [{"delta": 5.0, "delta_artifact": 0.5},
                                      {"delta": 4.0, "delta_artifact": 0.2},
                                      {"delta": 6.0, "delta_artifact": 0.1}]}}
    ids = {c["id"]: c for c in validity.table_checks({}, art)}
    c = ids["classifier/synthetic-original/delta_artifact≤0"]
    assert c["verdict"] == "holds" and c["mean"] == pytest.approx(-3.7333, abs=1e-3)
    art["test_set"]["backend"] = "render"
    assert "classifier/synthetic-original/delta_artifact≤0" not in {
        c["id"] for c in validity.table_checks({}, art)}


def test_mask_effect_by_hand():
    """mask effect = Ratio_E(masked) / Ratio_E(person-free), pooled over seeds and images."""
    pw, pm = np.array([0.5, 0.5]), np.array([0.25, 0.25])       # masked: 0.5 / 1.0
    ew, em = np.array([0.4, 0.4]), np.array([0.2, 0.6])         # empty: 0.8 / 0.8
    r = mask_neutral_record([(pw, pm), (pw, 2 * pm)], ["female", "male"],
                            empty=[(ew, em), (ew, em)], n_boot=200)
    # masked pooled: (0.5 + 1.0) / (1.0 + 1.0) = 0.75; empty pooled 1.6 / 1.6 = 1
    assert r["ratio_expected"] == pytest.approx(0.75)
    assert r["ratio_expected_empty"] == pytest.approx(1.0)
    assert r["mask_effect"] == pytest.approx(0.75)
    assert r["mask_effect_per_seed"] == [pytest.approx(0.5), pytest.approx(1.0)]
    assert r["mask_effect_lo"] <= 0.75 <= r["mask_effect_hi"]
    # a model that calls every image a woman, masked or not: the mask adds nothing
    r = mask_neutral_record([(np.full(4, 0.8), np.full(4, 0.2))], ["female", "male"] * 2,
                            empty=[(np.full(4, 0.8), np.full(4, 0.2))], n_boot=200)
    assert r["ratio_expected"] == pytest.approx(0.25) and r["mask_effect"] == pytest.approx(1)
    with pytest.raises(ValueError, match="do not match"):
        mask_neutral_record([(pw, pm)], ["female", "male"], empty=[(ew, em), (ew, em)])


def test_mask_neutral_verdict_uses_the_mask_effect_in_and_out_of_context():
    def rec(effect, ctx_effect, ratio=0.25):
        return {"ratio_expected": ratio, "ratio_expected_empty": ratio / effect,
                "mask_effect": effect, "mask_effect_lo": effect - 0.1,
                "mask_effect_hi": effect + 0.1, "mask_effect_per_seed": [effect],
                "n_images": 10, "context": {"mask_effect": ctx_effect, "n_images": 20}}
    probe = {"mask_neutral": {"original": rec(1.0, 1.1), "synthetic": rec(1.0, 0.5)}}
    rows = {r["dataset"]: r for r in verdicts.mask_neutral_rows(probe)}
    # original reads an empty image as a woman (0.25) but its mask adds nothing: met
    assert rows["original"]["met"] and rows["original"]["measure"] == "mask_effect"
    assert not rows["synthetic"]["met"]                     # the mask reads "woman" in context
    checks = [{"id": "classifier/synthetic-original/ratio<0", "verdict": "fails"}]
    out = verdicts.apply_mask_neutral(checks, probe)[0]
    assert out["verdict"] == "mask not neutral"
    assert "synthetic's mask effect is 1.00 without context and 0.50 in context" in out["reason"]
    probe["mask_neutral"]["synthetic"] = rec(1.2, 0.9)
    assert verdicts.apply_mask_neutral(checks, probe)[0]["verdict"] == "fails"
    md = "\n".join(verdicts.mask_neutral_markdown(verdicts.mask_neutral_rows(probe)))
    assert "| original | 1.00 [0.90, 1.10] | 1.00 | 1.10 | 0.25 | 0.25 | 10 / 20 | yes |" in md


def test_mask_neutral_record_carries_a_bootstrap_interval():
    rng = np.random.default_rng(0)
    pw, pm = rng.uniform(0.2, 0.8, 40), rng.uniform(0.2, 0.8, 40)
    r = mask_neutral_record([(pw, pm)], ["female", "male"] * 20, n_boot=300, seed=1)
    assert r["lo"] <= r["ratio_expected"] <= r["hi"] and r["n_boot"] == 300
    assert r["ratio_expected"] == pytest.approx(pm.sum() / pw.sum())


def test_split_fixed_param_is_checked():
    from biaslab.runtime.validate import ParamError, check_split
    check_split({"fractions": {"train": 1.0}, "fixed": {"synthtest": "test"}})
    with pytest.raises(ParamError, match="split.fixed"):
        check_split({"fractions": {"train": 1.0}, "fixed": ["synthtest"]})
