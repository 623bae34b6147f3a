"""Feature sensitivity: the perturbations (biaslab.analysis.perturb) and the change with its
CI (biaslab.analysis.sensitivity), on hand-computed cases and on a tiny COCO-layout set the
test writes itself (not the synthetic generator's)."""
import dataclasses

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from sklearn.metrics import roc_auc_score

from biaslab.analysis import perturb as PT
from biaslab.analysis import sensitivity as SE
from biaslab.analysis.sensitivity_settings import SensitivitySettings
from biaslab.analysis.sensitivity_eval import perturbed_truth, subset


# --------------------------------------------------------------------------- names
@pytest.mark.parametrize("name,parsed", [("objects@0.1", ("objects", 0.1)),
                                         ("blur@2", ("blur", 2.0)), ("swap", ("swap", None))])
def test_names_round_trip(name, parsed):
    assert PT.parse_name(name) == parsed
    assert PT.perturbation_name(*parsed) == name


@pytest.mark.parametrize("bad", ["objects@0", "objects@1.5", "blur@-1", "blur@x", "swap@1",
                                 "noise@1", "objects"])
def test_bad_names(bad):
    with pytest.raises(ValueError):
        PT.parse_name(bad)


def test_settings_checks_names_and_boot():
    assert SensitivitySettings.from_params({}).perturbations[0] == "objects@0.1"
    with pytest.raises(ValueError, match="unknown perturbation"):
        SensitivitySettings.from_params({"sensitivity": {"perturbations": ["rain@1"]}})
    with pytest.raises(ValueError, match="n_boot"):
        SensitivitySettings.from_params({"sensitivity": {"n_boot": 10}})
    for bad, word in (({"fill": "median"}, "fill"), ({"max_images": 5}, "max_images"),
                      ({"perturbation": []}, "unknown key"), ({"perturbations": []}, "list"),
                      ({"workers": 0}, "workers")):
        with pytest.raises(ValueError, match=word):
            SensitivitySettings.from_params({"sensitivity": bad})


def test_the_params_check_applies_the_stages_rules():
    from biaslab.runtime import validate as V
    with pytest.raises(V.ParamError) as e:
        V.check_params({"sensitivity": {"perturbations": ["rain@1"]}})
    assert e.value.param == "sensitivity" and "rain" in e.value.problem
    V.check_params({"sensitivity": dataclasses.asdict(SensitivitySettings())})


# --------------------------------------------------------------------------- perturbations
def test_choose_objects_exact_counts_and_nested():
    objs = pd.DataFrame({"image_id": np.arange(20) // 4}, index=np.arange(100, 120))
    ch = PT.choose_objects(objs, [0.1, 0.25, 0.5], seed=3)
    assert [len(ch[f]) for f in (0.1, 0.25, 0.5)] == [2, 5, 10]   # round(f * 20)
    assert ch[0.1] <= ch[0.25] <= ch[0.5]
    assert ch[0.5] <= set(objs.index)
    assert PT.choose_objects(objs, [0.25], seed=3)[0.25] == ch[0.25]   # seeded


def test_mask_objects_fills_with_mean_of_untouched_and_keeps_person():
    img = np.zeros((2, 3, 3), np.uint8)
    img[0] = [[10, 10, 10], [20, 20, 20], [30, 30, 30]]
    img[1] = [[40, 40, 40], [50, 50, 50], [60, 60, 60]]
    obj = np.array([[1, 1, 0], [0, 0, 0]], np.uint8)        # two pixels
    person = np.array([[0, 1, 0], [0, 0, 0]], np.uint8)     # overlaps the object
    out = PT.mask_objects(img, [obj], person)
    # only (0, 0) is filled; the untouched pixels are 20, 30, 40, 50, 60 -> mean 40
    assert out[0, 0].tolist() == [40, 40, 40]
    assert out[0, 1].tolist() == [20, 20, 20]               # the person's pixel kept
    assert (out[1] == img[1]).all() and out[0, 2].tolist() == [30, 30, 30]
    grey = PT.mask_objects(img, [obj], person, fill=0)
    assert grey[0, 0].tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="fill"):
        PT.mask_objects(img, [obj], person, fill="median")


def test_blur_keeps_person_and_a_flat_background():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, (20, 20, 3)).astype(np.uint8)
    person = np.zeros((20, 20), np.uint8)
    person[5:15, 8:12] = 1
    out = PT.blur_background(img, person, 4)
    assert (out[person > 0] == img[person > 0]).all()
    assert (out[person == 0] != img[person == 0]).any()
    flat = np.full((20, 20, 3), 77, np.uint8)
    assert (PT.blur_background(flat, person, 4) == 77).all()


def test_swap_pastes_person_on_donor_without_its_person():
    img = np.full((4, 4, 3), 200, np.uint8)
    person = np.zeros((4, 4), np.uint8)
    person[1:3, 1:3] = 1
    donor = np.zeros((4, 4, 3), np.uint8)
    donor[:, :2] = 10
    donor[:, 2:] = 30
    dperson = np.zeros((4, 4), np.uint8)
    dperson[0, 0] = 1                                        # the donor's own person
    out = PT.swap_background(img, person, donor, dperson)
    assert (out[1:3, 1:3] == 200).all()
    # the donor's person filled with the mean of its other 15 pixels: (7 * 10 + 8 * 30) / 15
    assert out[0, 0].tolist() == [21, 21, 21]
    assert out[3, 3].tolist() == [30, 30, 30]


def test_donors_are_of_the_other_group():
    t = pd.DataFrame({"image_id": [1, 2, 3, 4], "gender": ["male", "female", "male", "female"]})
    d = PT.choose_donors(t, seed=0)
    g = dict(zip(t["image_id"], t["gender"]))
    assert set(d) == {1, 2, 3, 4} and all(g[i] != g[j] for i, j in d.items())
    assert PT.choose_donors(t[t["gender"] == "male"], seed=0) == {}


def _coco_like(tmp_path):
    """Two 32 x 32 images: a grey person box in the middle, a red and a blue object."""
    rows, persons, objects = [], [], []
    for i, (g, colour) in enumerate([("male", (0, 120, 0)), ("female", (0, 0, 120))], start=1):
        a = np.zeros((32, 32, 3), np.uint8)
        a[:] = colour
        a[8:24, 12:20] = 128                                  # the person
        a[2:6, 2:6] = (255, 0, 0)                             # object 1
        a[26:30, 26:30] = (0, 0, 255)                         # object 2
        p = tmp_path / f"{i}.png"
        Image.fromarray(a).save(p)
        rows.append({"image_id": i, "path": str(p), "gender": g})
        persons.append({"image_id": i, "x": 12.0, "y": 8.0, "w": 8.0, "h": 16.0,
                        "polygon": None, "keypoints": None})
        objects += [{"image_id": i, "category": "cup", "x": 2.0, "y": 2.0, "w": 4.0, "h": 4.0},
                    {"image_id": i, "category": "dog", "x": 26.0, "y": 26.0, "w": 4.0,
                     "h": 4.0}]
    return pd.DataFrame(rows), pd.DataFrame(persons), pd.DataFrame(objects)


def test_write_perturbed_on_a_coco_layout_set(tmp_path):
    test, persons, objects = _coco_like(tmp_path)
    # an image-level label without a box (COCO image_labels, OpenImages): never drawn
    objects = pd.concat([objects, pd.DataFrame([{"image_id": 1, "category": "tie",
                                                 "x": np.nan, "y": np.nan, "w": np.nan,
                                                 "h": np.nan}])], ignore_index=True)
    assert len(PT.located(objects)) == 4
    out = PT.write_perturbed(test, persons, objects, ["objects@0.5", "blur@4", "swap"],
                             tmp_path / "out", seed=1)
    assert len(out) == 6
    obj = out[out["perturbation"] == "objects@0.5"]
    assert obj["n_masked"].sum() == 2                        # round(0.5 * 4) instances
    for r in out.to_dict("records"):
        a = np.asarray(Image.open(r["path"]).convert("RGB"))
        orig = np.asarray(Image.open(test.set_index("image_id").at[r["image_id"], "path"]))
        assert (a[8:24, 12:20] == orig[8:24, 12:20]).all(), r["perturbation"]   # person intact
        # an image none of whose objects was drawn is left as it was
        assert (r["changed_fraction"] > 0) == (r["perturbation"] != "objects@0.5"
                                                or r["n_masked"] > 0)
    sw = out[out["perturbation"] == "swap"].set_index("image_id")
    assert sw.at[1, "donor"] == 2 and sw.at[2, "donor"] == 1
    a = np.asarray(Image.open(sw.at[1, "path"]).convert("RGB"))
    assert a[0, 10].tolist() == [0, 0, 120]                  # the other image's background


def test_person_only_images_are_the_same_under_every_perturbation(tmp_path):
    """The pixel oracle's premise, on a set written here: every perturbation restores the
    persons, so the persons-only copy of each perturbed image equals the original's."""
    test, persons, objects = _coco_like(tmp_path)
    out = PT.write_perturbed(test, persons, objects, ["objects@0.5", "blur@4", "swap"],
                             tmp_path / "out", seed=1)
    ref = PT.write_person_only(test, persons, tmp_path / "p" / "none").set_index("image_id")
    a = np.asarray(Image.open(ref.at[1, "path"]).convert("RGB"))
    assert (a[8:24, 12:20] == 128).all() and (a[:8] == 0).all() and (a[24:] == 0).all()
    for name, t in out.groupby("perturbation"):
        po = PT.write_person_only(t, persons, tmp_path / "p" / name.replace("@", "_"))
        for r in po.to_dict("records"):
            b = np.asarray(Image.open(r["path"]).convert("RGB"))
            c = np.asarray(Image.open(ref.at[r["image_id"], "path"]).convert("RGB"))
            assert (b == c).all(), (name, r["image_id"])
    # an image without persons is left out
    assert PT.write_person_only(test, persons.iloc[:1], tmp_path / "q")["image_id"].tolist() \
        == [1]


def test_pixel_expectations():
    from biaslab.analysis.sensitivity_eval import pixel_expectation as pe
    assert pe("person_oracle_pixels", "swap", True, True) == "0"
    assert pe("person_oracle_pixels", "blur@1", True, False) == "0"
    assert pe("context_reader_pixels", "blur@1", False, True) == "0"
    assert pe("context_reader_pixels", "blur@1", True, True) == "!=0"
    assert pe("context_reader_pixels", "objects@0.1", True, True) == "!=0"
    assert pe("context_reader_pixels", "swap", True, True) == "<0"
    assert pe("context_reader_pixels", "swap", True, False) is None


def test_pixel_controls_on_features_built_by_hand():
    """Feature 0 carries the gender in the person view and in the context view; a 'blur'
    halves the context's signal under noise, a 'swap' flips it, the person view never
    changes."""
    from biaslab.analysis.sensitivity_eval import pixel_controls
    rng = np.random.default_rng(0)
    n = 120
    male = np.arange(n) % 2 == 0
    sign = np.where(male, 1.0, -1.0)
    noise = rng.normal(size=(n, 3))
    view = np.column_stack([sign, np.zeros(n), np.zeros(n)]) + 0.3 * noise
    train = {k: (view, male) for k in ("person_oracle_pixels", "context_reader_pixels")}
    blurred = view.copy()
    blurred[:, 0] = 0.1 * sign + 1.0 * noise[:, 0]
    swapped = view.copy()
    swapped[:, 0] = -view[:, 0]
    test = {"person_oracle_pixels": {"none": view, "blur@1": view.copy(), "swap": view.copy()},
            "context_reader_pixels": {"none": view, "blur@1": blurred, "swap": swapped}}
    out = pixel_controls(train, test, male, ["blur@1", "swap"], True, n_boot=200, seed=0)
    po, cr = out["person_oracle_pixels"], out["context_reader_pixels"]
    assert po["swap"]["AUC"]["measured"]["delta"] == 0.0 and po["swap"]["AUC"]["verdict"] \
        == "matches"
    assert cr["blur@1"]["AUC"]["verdict"] == "matches" and cr["blur@1"]["AUC"]["expected"] \
        == "!=0"
    # the flipped cue turns a perfect reader into a perfectly wrong one: 100 -> 0
    assert cr["swap"]["AUC"]["measured"]["base"] == 100.0
    assert cr["swap"]["AUC"]["measured"]["delta"] == -100.0
    # without a planted cue the context reader has no known answer: no verdict
    none = pixel_controls(train, test, male, ["swap"], False, n_boot=100, seed=0)
    assert none["context_reader_pixels"]["swap"]["AUC"]["expected"] is None
    assert "verdict" not in none["context_reader_pixels"]["swap"]["AUC"]


def test_controls_record_counts_the_sensitivity_checks():
    from biaslab.analysis.controls_eval import with_sensitivity
    out = {"classifier": {}, "summary": {"matches": 3, "does_not_match": 1, "inconclusive": 0,
                                         "n": 4}}
    sens = {"controls": {"a": {"swap": {"AUC": {"verdict": "matches"}},
                               "blur@1": {"AUC": {"verdict": "inconclusive"},
                                          "Ratio_E": {"expected": None}}}}}
    got = with_sensitivity(out, sens)
    assert got["summary"] == {"matches": 4, "does_not_match": 1, "inconclusive": 1, "n": 6}
    assert got["sensitivity"] == sens["controls"] and out["summary"]["n"] == 4
    assert with_sensitivity(out, None)["sensitivity"] == {}


def test_perturbed_truth_for_the_readers():
    test = pd.DataFrame({"image_id": [1, 2], "gender": ["male", "female"],
                         "scene": ["street", "kitchen"], "cast": ["cool", "warm"],
                         "objects": [["cup", "dog"], ["cup"]]})
    objects = pd.DataFrame({"image_id": [1, 1, 1, 2], "category": ["cup", "dog", "dog", "cup"]},
                           index=[10, 11, 12, 13])
    t = perturbed_truth(test, pd.DataFrame(), objects, {0.5: {10, 11}}, "objects@0.5")
    # image 1 lost its only cup and one of two dogs: the dog is still there
    assert t["objects"].tolist() == [["dog"], ["cup"]]
    pert = pd.DataFrame({"perturbation": ["swap", "swap"], "image_id": [1, 2], "donor": [2, 1]})
    t = perturbed_truth(test, pert, objects, {}, "swap")
    assert t["scene"].tolist() == ["kitchen", "street"] and t["objects"].tolist() == [["cup"],
                                                                                      ["cup",
                                                                                       "dog"]]
    assert perturbed_truth(test, pert, objects, {}, "blur@2").equals(test)


def test_subset_is_stratified_and_seeded():
    t = pd.DataFrame({"image_id": range(100), "gender": ["male"] * 70 + ["female"] * 30})
    s = subset(t, 20, seed=0)
    assert len(s) == 20 and (s["gender"] == "male").sum() == 14
    assert s.equals(subset(t, 20, seed=0)) and subset(t, None, 0).equals(t)


# --------------------------------------------------------------------------- metrics
def test_ratio_rows_by_hand():
    pw = np.array([0.9, 0.2, 0.6, 0.1])
    pm = np.array([0.1, 0.8, 0.7, 0.9])
    idx = np.array([[0, 1, 2, 3], [0, 0, 2, 2]])
    # row 0: man at 1, 2, 3 (3), woman at 0, 2 (2) -> 1.5; row 1: man 2, woman 4 -> 2
    assert SE.ratio_rows(pw, pm, idx).tolist() == [1.5, 2.0]
    # row 0: sum P(man) 2.5 / sum P(woman) 1.8
    assert SE.ratio_e_rows(pw, pm, idx)[0] == pytest.approx(2.5 / 1.8)
    assert np.isinf(SE.ratio_rows(pw, pm, np.array([[1, 3]]))[0])   # no woman call


def test_auc_rows_matches_sklearn_with_ties():
    rng = np.random.default_rng(0)
    pw, pm = rng.random(30).round(1), rng.random(30).round(1)     # many ties
    male = rng.random(30) < 0.5
    idx = rng.integers(30, size=(5, 30))
    got = SE.auc_rows(pw, pm, male, idx)
    for row, v in zip(idx, got):
        assert v == pytest.approx(100 * roc_auc_score(male[row], (pm - pw)[row]))
    assert np.isnan(SE.auc_rows(pw, pm, np.ones(30, bool), idx[:1])[0])


def test_paired_change_zero_and_shift():
    rng = np.random.default_rng(1)
    vals = [rng.random(50) for _ in range(3)]
    same = [lambda idx, v=v: v[idx].mean(-1) for v in vals]
    r = SE.paired_change(same, same, 50, n_boot=200)
    assert r["delta"] == 0 and r["lo"] == 0 and r["hi"] == 0
    shifted = [lambda idx, v=v: v[idx].mean(-1) + 0.25 for v in vals]
    r = SE.paired_change(same, shifted, 50, n_boot=200, null=0.1)
    assert r["delta"] == pytest.approx(0.25) and r["lo"] == pytest.approx(0.25)
    # the change as a share of the bias: the base's distance from the no-bias value 0.1
    assert r["pct"] == pytest.approx(100 * 0.25 / abs(np.mean([v.mean() for v in vals]) - 0.1))
    with pytest.raises(ValueError):
        SE.paired_change(same, shifted[:2], 50)


def test_paired_change_leaves_out_infinite_replicates():
    inf = [lambda idx: np.full(len(idx), np.inf)]
    r = SE.paired_change(inf, inf, 10, n_boot=100)
    assert r["delta"] is None and r["lo"] is None and r["n_undefined"] == 100


def test_seed_change_by_hand():
    r = SE.seed_change([10.0, 12.0, None], [11.0, 15.0, 3.0])
    # changes 1 and 3: mean 2, std sqrt(2), t(0.975, 1) = 12.706
    assert r["delta"] == pytest.approx(2.0) and r["n_seeds"] == 2
    assert r["hi"] - r["delta"] == pytest.approx(12.7062 * np.sqrt(2) / np.sqrt(2), rel=1e-4)
    assert r["pct"] == pytest.approx((10 + 25) / 2)
    assert SE.seed_change([60.0], [55.0], null=50.0)["pct"] == pytest.approx(-50.0)


@pytest.mark.parametrize("lo,hi,expected,verdict", [
    (0.0, 0.0, "0", "matches"), (-1, 1, "0", "matches"), (0.5, 1, "0", "does not match"),
    (0.5, 1, "!=0", "matches"), (-1, 1, "!=0", "inconclusive"), (None, None, "0", "no CI"),
    (-2, -1, "<0", "matches"), (1, 2, "<0", "does not match"), (-1, 1, "<0", "inconclusive")])
def test_control_check(lo, hi, expected, verdict):
    assert SE.control_check({"lo": lo, "hi": hi}, expected)["verdict"] == verdict


def test_confounded_needs_a_move_larger_than_the_claim():
    moved = {"delta": 3.0, "lo": 1.0, "hi": 5.0}
    assert SE.confounded(-2.0, moved) is True
    assert SE.confounded(-5.0, moved) is False                 # the claim is larger
    assert SE.confounded(-2.0, {**moved, "lo": -1.0}) is False   # no detected move
    assert SE.confounded(None, moved) is None
    assert SE.confounded(1.0, {"delta": float("nan"), "lo": 1, "hi": 2}) is None


def test_control_expectations():
    from biaslab.analysis.sensitivity_eval import control_expectation as ce
    assert ce("person_oracle", "swap", True, "masked_AUC") == "0"
    assert ce("context_reader", "blur@2", False, "Ratio_E") == "0"
    assert ce("context_reader", "swap", True, "masked_AUC") == "<0"
    assert ce("context_reader", "objects@0.5", True, "masked_AUC") == "!=0"
    assert ce("context_reader", "swap", True, "Ratio_E") is None


def test_confounded_reading_on_checks():
    from biaslab.report.sensitivity import confounded_checks
    sens = {"perturbations": ["objects@0.1", "swap"], "models": {
        "original": {"objects@0.1": {"masked_AUC": {"delta": -4.0, "lo": -6.0, "hi": -2.0}}},
        "synthetic": {"objects@0.1": {"masked_AUC": {"delta": 0.5, "lo": -1.0, "hi": 2.0}}}}}
    checks = [{"id": "classifier/synthetic-original/masked_auc<0", "mean": -3.0,
               "verdict": "holds", "reason": "r"},
              {"id": "classifier/synthetic-original/masked_auc<0", "mean": -30.0,
               "verdict": "holds", "reason": "r"},
              {"id": "captioner/synthetic-original/lic<0", "mean": -1.0, "verdict": "holds"}]
    out = confounded_checks(checks, sens)
    assert out[0]["confounded"] is True and "original moves -4.0" in out[0]["reason"]
    assert out[1]["confounded"] is False and out[2] == checks[2]
    # an instrument that misses a control's known answer is not read
    bad = {**sens, "controls_summary": {"does not match": 1, "matches": 3}}
    assert confounded_checks(checks, bad) == checks


def test_confounded_reading_on_captioner_checks():
    """Table 2's checks read the captioners' sensitivity: Error claimed 11.8 points against
    Original; a move of 12 (CI 10..14) is more, one of 20 whose CI holds 0 is no evidence,
    the +LIBRA row (no perturbed record of its own: it rewrites captions) is read through
    Original's alone, and a metric without a record stays as it was."""
    from biaslab.report.sensitivity import confounded_checks
    sens = {"perturbations": ["objects@0.1"], "models": {"original": {}}}
    capt = {"perturbations": ["objects@0.1", "swap"], "models": {
        "original": {"objects@0.1": {"Error": {"delta": 12.0, "lo": 10.0, "hi": 14.0},
                                     "Ratio": {"delta": 0.1, "lo": -0.5, "hi": 0.7}}},
        "synthetic": {"objects@0.1": {"Error": {"delta": 20.0, "lo": -1.0, "hi": 41.0},
                                      "Ratio": {"delta": 0.9, "lo": -0.2, "hi": 2.0}}},
        "oversample": {"objects@0.1": {"Error": {"delta": 1.0, "lo": 0.5, "hi": 1.5}}}}}
    checks = [{"id": "captioner/synthetic-original/error<0", "mean": 11.8, "verdict": "fails"},
              {"id": "captioner/synthetic-original/ratio<0", "mean": 0.58},
              {"id": "captioner/oversample-original/error<0", "mean": -12.5},
              {"id": "captioner/libra-original/error<0", "mean": -3.0},
              {"id": "captioner/synthetic-original/lic<0", "mean": -1.0}]
    out = confounded_checks(checks, sens, 1, capt)
    assert out[0]["confounded"] is True and out[0]["verdict"] == "fails"
    assert "original moves +12.0" in out[0]["reason"] and "synthetic" not in out[0]["reason"]
    assert out[0]["confounding"]["synthetic"] == {"delta": 20.0, "lo": -1.0, "hi": 41.0}
    assert out[1]["confounded"] is False          # no move whose CI excludes 0
    assert out[2]["confounded"] is False          # 12 > 12.5 is false: the claim is larger
    assert out[3]["confounded"] is True and "libra" not in out[3]["confounding"]
    assert out[4] == checks[4]
    # without the captioners' record Table 2's checks are not read
    assert confounded_checks(checks, sens, 1, None) == checks


def test_summarize_model_gender_free_model_gets_leakage_only():
    outs = [{"thresholds": (0.5, 0.5), "masked": {}, "leakage": {"none": 5.0, "swap": 6.0}},
            {"thresholds": (0.5, 0.5), "masked": {}, "leakage": {"none": 4.0, "swap": 6.0}}]
    r = SE.summarize_model(outs, ["swap"], np.array([True, False]))
    assert list(r["swap"]) == ["Leakage"] and r["swap"]["Leakage"]["delta"] == pytest.approx(1.5)


def _record():
    ch = {"base": 95.0, "perturbed": 90.0, "delta": -5.0, "lo": -8.0, "hi": -2.0, "pct": -11.1,
          "pct_lo": -17.8, "pct_hi": -4.4, "n_seeds": 5, "n_images": 200}
    return {"available": True, "perturbations": ["objects@0.1", "blur@2", "swap"],
            "test_set": {"n_images": 200, "n_female": 61, "n_male": 139, "seeds": [0, 1]},
            "models": {"synthetic": {p: {"masked_AUC": ch} for p in ("objects@0.1", "blur@2",
                                                                      "swap")},
                       "original": {p: {"masked_AUC": ch, "Leakage": {**ch, "base": 0.2}}
                                    for p in ("objects@0.1", "blur@2", "swap")}},
            "controls": {"person_oracle": {"swap": {"masked_AUC": SE.control_check(
                {"delta": 0.0, "lo": 0.0, "hi": 0.0}, "0")}}},
            "controls_summary": {"matches": 1}}


def test_report_section_and_figure(tmp_path):
    from biaslab.report import sensitivity as RS
    lines = RS.markdown(_record(), {"original": "Original", "synthetic": "S_synthetic"})
    text = "\n".join(lines)
    assert "| Original | -5.0 [-8.0, -2.0] (-11 %) |" in text          # table order: Original first
    assert text.index("| Original |") < text.index("| S_synthetic |")
    # Leakage of 0.2 is about no bias: no % of it
    assert "| Original | -5.0 [-8.0, -2.0] | " in text
    assert "| person_oracle | swap | 0: +0.0 [+0.0, +0.0] | matches |" in text
    assert RS.markdown({"available": False}, {}) == []
    cls = {"original": {"masked_gender_auc": {"mean": 95.0, "ci95": 1.0}},
           "synthetic": {"masked_gender_auc": {"mean": 65.0, "ci95": 3.0}}}
    assert RS.figure(tmp_path / "s.png", _record(), cls, {})
    assert (tmp_path / "s.png").stat().st_size > 1000
    assert not RS.figure(tmp_path / "t.png", None, cls, {})


# --------------------------------------------------------------------------- captioners
def test_caption_ratio_and_error_rows_equal_the_metrics_by_hand():
    from biaslab.analysis import sensitivity_captioner as SC
    from biaslab.metrics.captions import error, ratio_details
    caps = ["a man riding", "two men", "a woman cooking", "a dog", "a man and a woman",
            "a woman on a bench"]
    genders = ["male", "female", "female", "male", "female", "male"]
    man, woman = SC.caption_indicators(caps)
    assert man.tolist() == [True, True, False, False, False, False]
    assert woman.tolist() == [False, False, True, False, False, True]
    male = np.array([g == "male" for g in genders])
    full = np.arange(6)[None]
    # r = 2 / 2 = 1; errors: "two men" on a female image, "a woman ..." on a male one: 2 / 6
    assert SC.ratio_rows(man, woman, full)[0] == ratio_details(caps, genders)["ratio_max"] == 1.0
    assert SC.error_rows(man, woman, male, full)[0] == pytest.approx(error(caps, genders))
    assert SC.error_rows(man, woman, male, full)[0] == pytest.approx(100 * 2 / 6)
    # a resample without woman captions: an infinite Ratio, as the metric gives
    assert SC.ratio_rows(man, woman, np.array([[0, 1, 3]]))[0] == np.inf
    with pytest.raises(ValueError, match="no per-image bootstrap"):
        SC.boot_rows("LIC", (man, woman), male, full)


def test_summarize_captioner_pairs_labels_and_seeds():
    from biaslab.analysis import sensitivity_captioner as SC
    n = 40
    male = np.arange(n) % 2 == 0
    base = (male.copy(), ~male)                   # every caption names the right gender
    flipped = (~male, male.copy())                # every caption names the other one
    outs = [{"labels": {"none": base, "swap": flipped},
             "values": {"none": {"BiasAmp": 1.0 + s}, "swap": {"BiasAmp": 3.0 + s}}}
            for s in range(3)]
    rec = SC.summarize_captioner(outs, ["swap"], male, ["Ratio", "Error", "BiasAmp"],
                                 n_boot=200, seed=0, nulls={"BiasAmp": -1.0})["swap"]
    assert rec["Error"]["base"] == 0.0 and rec["Error"]["delta"] == 100.0
    assert rec["Error"]["lo"] == pytest.approx(100.0) and rec["Error"]["hi"] == pytest.approx(100.0)
    assert rec["Ratio"]["delta"] == 0.0           # 20 : 20 both ways
    # BiasAmp: +2 in every seed, t over seeds; % of each seed's distance from the null
    # (-1): bases 1, 2, 3 are 2, 3, 4 from it
    assert rec["BiasAmp"]["delta"] == pytest.approx(2.0) and rec["BiasAmp"]["n_seeds"] == 3
    assert rec["BiasAmp"]["ci_method"] == "t over seeds"
    assert rec["BiasAmp"]["pct"] == pytest.approx(100 * np.mean([2 / 2, 2 / 3, 2 / 4]))


def test_aligned_sets_keeps_images_with_every_copy():
    from biaslab.analysis.sensitivity_captioner import aligned_sets
    test = pd.DataFrame({"image_id": [3, 1, 2], "path": ["c.jpg", "a.jpg", "b.jpg"]})
    pert = pd.DataFrame({"perturbation": ["swap", "swap", "blur@1", "blur@1"],
                         "image_id": [1, 2, 1, 3], "path": ["s1", "s2", "b1", "b3"]})
    kept, sets = aligned_sets(test, pert, ["swap", "blur@1"])
    assert kept["image_id"].tolist() == [1] and sets["swap"]["path"].tolist() == ["s1"]
    assert sets["none"]["path"].tolist() == ["a.jpg"]
    with pytest.raises(ValueError, match="not written by stage sensitivity"):
        aligned_sets(test, pert, ["objects@0.1"])
    with pytest.raises(ValueError, match="no captioner test image"):
        aligned_sets(test[test["image_id"] == 2], pert, ["swap", "blur@1"])


@pytest.mark.parametrize("given,match", [
    ({"captioner_perturbations": ["blur@9"]}, "captioner_perturbations"),
    ({"captioner_metrics": ["CIDEr"]}, "captioner_metrics"),
    ({"captioner_metrics": ["Ratio", "Ratio"]}, "repeated"),
    ({"captioner_metrics": []}, "empty"),
    ({"captioner_perturbations": "swap"}, "must be a list")])
def test_captioner_settings_are_checked(given, match):
    with pytest.raises(ValueError, match=match):
        SensitivitySettings.from_params({"sensitivity": given})
    assert SensitivitySettings.from_params(
        {"sensitivity": {"captioner_perturbations": []}}).captioner_metrics


def test_captioner_report_section():
    from biaslab.report import sensitivity as RS
    rec = {"available": True, "perturbations": ["swap"], "nulls": {"BiasAmp": -5.0},
           "test_set": {"n_images": 10, "n_female": 4, "n_male": 6, "seeds": [0, 1]},
           "models": {"original": {"swap": {"Error": {
               "base": 4.0, "perturbed": 38.0, "delta": 34.0, "lo": 25.0, "hi": 43.0,
               "pct": 850.0}}}}}
    text = "\n".join(RS.captioner_markdown(rec, {"original": "Original"}))
    assert "### Table 2, feature sensitivity" in text and "BiasAmp -5.00" in text
    assert "| Original | +34.0 [+25.0, +43.0] (+850 %) |" in text
    assert RS.captioner_markdown(None, {}) == []
    # the figure: Table 2's score on x; an infinite Ratio has no point
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        caps = {"original": {"Error": {"mean": 4.0, "ci95": 1.0},
                             "Ratio": {"mean": float("inf")}}}
        assert RS.figure(Path(d) / "c.png", rec, caps, {}, RS.FIGURE_TABLE2, "Table 2")
        assert (Path(d) / "c.png").stat().st_size > 1000
        RS.write_captioner_figure(Path(d) / "n.png", {"sensitivity_captioner": {
            "skipped": "no captions"}})
        assert (Path(d) / "n.png").is_file()
    assert "not run (no captions)" in "\n".join(RS.captioner_markdown(
        {"available": False, "reason": "no captions"}, {}))


def test_sensitivity_settings_are_the_checked_group_as_a_typed_record():
    """``SensitivitySettings.from_params``: the ``sensitivity`` group over its defaults,
    checked by the same rules as every stage's params check, lists as tuples."""
    defaults = SensitivitySettings()
    s = SensitivitySettings.from_params({"sensitivity": {"perturbations": ["blur@2", "swap"],
                                                         "captioner_perturbations": ["swap"],
                                                         "workers": 2}})
    assert s.perturbations == ("blur@2", "swap") and s.captioner_perturbations == ("swap",)
    assert (s.workers, s.n_boot, s.fill) == (2, 1000, "mean") == (2, defaults.n_boot, "mean")
    assert SensitivitySettings.from_params({}) == defaults
    assert defaults.perturbations[-1] == "swap" and isinstance(s.captioner_metrics, tuple)
    with pytest.raises(ValueError, match="n_boot must be an integer >= 100"):
        SensitivitySettings.from_params({"sensitivity": {"n_boot": 5}})
