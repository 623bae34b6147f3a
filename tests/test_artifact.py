"""Synthetic-artifact test of paper 000 sec. 3.3 / Table 3 (biaslab.analysis.artifact): body-part masks
from keypoints, the seeded part choice with its box fallback, Delta against the paper's own
numbers, Table 3 scores, and inpainting a part with the copy_paste and sd_inpaint backends."""
import json

import numpy as np
import pytest

from biaslab.analysis import artifact as A


# small inputs on a shared 2-core machine: one torch thread is fastest (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _kp(points: dict[int, tuple[float, float]]) -> list[float]:
    kp = [0.0] * 51
    for i, (x, y) in points.items():
        kp[3 * i:3 * i + 3] = [x, y, 2.0]
    return kp


#: a standing person facing the viewer in a 100 x 100 image, box (30, 10, 40, 85)
PERSON = {"ann_id": 1, "image_id": 5, "x": 30.0, "y": 10.0, "w": 40.0, "h": 85.0,
          "polygon": "[]",
          "keypoints": _kp({0: (50, 18), 1: (52, 16), 2: (48, 16), 3: (54, 18), 4: (46, 18),
                            5: (60, 30), 6: (40, 30),        # shoulders: width 20
                            7: (64, 45), 8: (36, 45), 9: (66, 58), 10: (34, 58),
                            11: (57, 60), 12: (43, 60),      # hips: width 14
                            15: (56, 92), 16: (44, 92)})}


def test_body_part_discs_from_keypoints():
    box = (PERSON["x"], PERSON["y"], PERSON["w"], PERSON["h"])
    u = A.body_unit(PERSON["keypoints"], box)
    assert u == pytest.approx(20.0)                  # shoulder width beats 0.12 * 85 and hips
    cx, cy, r = A.part_disc(PERSON["keypoints"], box, "head")
    assert (cx, cy) == pytest.approx((50.0, 17.2))   # mean of nose, eyes, ears
    assert r == pytest.approx(max(0.5 * u, 0.75 * 8.0))
    hx, hy, hr = A.part_disc(PERSON["keypoints"], box, "left_hand")
    # the wrist (66, 58) moved 0.3 of the forearm (64, 45) -> (66, 58) outwards
    assert (hx, hy) == pytest.approx((66.6, 61.9)) and hr == pytest.approx(0.35 * u)
    fx, fy, _ = A.part_disc(PERSON["keypoints"], box, "right_foot")
    assert (fx, fy) == pytest.approx((44.0, 92.0))
    m = A.part_mask(PERSON, 100, 100, "head")
    assert m.dtype == np.uint8 and m.shape == (100, 100)
    assert m[18, 50] == 1 and m[17, 59] == 1 and m[60, 50] == 0 and m[17, 61] == 0
    assert m.sum() == pytest.approx(np.pi * 100, rel=0.08)
    h = A.part_mask(PERSON, 100, 100, "right_hand", radius_scale=0.5)
    assert h[61, 33] == 1 and h[18, 50] == 0 and h.sum() < m.sum() / 4
    assert A.available_parts(PERSON["keypoints"], ("head", "left_foot")) == ["head", "left_foot"]
    no_face = {**PERSON, "keypoints": _kp({5: (60, 30), 6: (40, 30)})}
    assert A.part_mask(no_face, 100, 100, "head") is None
    assert A.available_parts(no_face["keypoints"]) == []
    with pytest.raises(ValueError):
        A.part_disc(PERSON["keypoints"], box, "tail")


def test_part_choice_is_seeded_and_falls_back_to_a_sub_box():
    seen = set()
    for image_id in range(40):
        m1, p1 = A.choose_part_mask(PERSON, 100, 100, np.random.default_rng([0, image_id]))
        m2, p2 = A.choose_part_mask(PERSON, 100, 100, np.random.default_rng([0, image_id]))
        assert p1 == p2 and np.array_equal(m1, m2)
        seen.add(p1)
    assert seen == {"head", "left_hand", "right_hand"}
    for kps in (None, np.nan, [0.0] * 51):
        person = {**PERSON, "keypoints": kps}
        m, part = A.choose_part_mask(person, 100, 100, np.random.default_rng(3),
                                     box_fraction=0.25)
        assert part == "box"
        ys, xs = np.nonzero(m)
        assert xs.min() >= 30 and xs.max() < 70 and ys.min() >= 10 and ys.max() < 95
        assert 10 * 21 <= m.sum() <= 11 * 23           # 0.25 of each side (10 x 21.25 px)


def test_delta_formula_reproduces_paper_table_3():
    # Table 3 (ResNet-50): Original 3.5 -> 3.0: 14.3; S_augment 3.7 -> 1.5: 59.5;
    # S_synthetic 1.9 -> 1.8: 5.3; ClipCap S_augment 2.5 -> 0.8: 68.0
    for o, i, d in ((3.5, 3.0, 14.3), (3.7, 1.5, 59.5), (1.9, 1.8, 5.3), (2.5, 0.8, 68.0)):
        assert A.delta(o, i) == pytest.approx(d, abs=0.05)
    assert A.delta(2.0, 3.0) == pytest.approx(50.0)              # symmetric in the change
    for o, i in ((None, 1.0), (1.0, None), (0.0, 1.0), (np.inf, 1.0), (1.0, np.nan)):
        assert A.delta(o, i) is None


def test_artifact_scores_table_3_ratios():
    # gender outputs on at >= 0.5 (each output on its own; an image with both counts twice)
    orig = (np.array([.9, .8, .1, .1, .6]), np.array([.1, .2, .7, .9, .6]))  # (p_woman, p_man)
    inp = (np.array([.9, .8, .3, .6, .2]), np.array([.1, .2, .7, .2, .3]))
    s = A.artifact_scores(orig, inp)
    # orig: man on {2, 3, 4}, woman on {0, 1, 4} -> r = 3 / 3 = 1 (image 4 both)
    # inp: man on {2}, woman on {0, 1, 3} -> r = 1 / 3; image 4 neither
    assert (s["n_man_orig"], s["n_woman_orig"], s["n_both_orig"]) == (3, 3, 1)
    assert (s["n_man_inp"], s["n_woman_inp"], s["n_neither_inp"]) == (1, 3, 1)
    assert s["ratio_orig"] == pytest.approx(1.0) and s["ratio_inp"] == pytest.approx(1 / 3)
    assert s["delta"] == pytest.approx(100 * (2 / 3))
    assert s["flip_rate"] == pytest.approx(40.0)      # images 3 (man -> woman) and 4 (both
    #                                                   -> neither) change
    t = A.artifact_scores(orig, inp, thresholds=(0.5, 0.65))    # (woman, man): man needs .65
    assert t["n_man_orig"] == 2 and t["ratio_orig"] == pytest.approx(2 / 3)
    s0 = A.artifact_scores((np.ones(2), np.zeros(2)), (np.ones(2), np.zeros(2)))
    assert s0["ratio_orig"] == 0.0 and s0["delta"] is None      # no man predicted: undefined


def _calls(man, woman):
    return np.array(man, bool), np.array(woman, bool)


def test_artifact_summary_delta_of_seed_means_hand_computed():
    """Paper 000 Table 3 over seeds: Delta of the seed-mean ratios, per-seed spread beside."""
    # seed 0: orig man 3 / woman 2 (r 1.5), inp man 1 / woman 3 (r 1/3)
    # seed 1: orig man 2 / woman 1 (r 2),   inp man 2 / woman 2 (r 1)
    mo = np.array([[1, 1], [1, 1], [1, 0], [0, 0]], bool)
    wo = np.array([[0, 0], [0, 0], [1, 1], [1, 0]], bool)
    mi = np.array([[1, 1], [0, 1], [0, 0], [0, 0]], bool)
    wi = np.array([[0, 0], [1, 1], [1, 1], [1, 0]], bool)
    s = A.artifact_summary(mo, wo, mi, wi, n_boot=200, seed=0)
    assert s["ratio_orig"]["mean"] == pytest.approx(1.75)
    assert s["ratio_orig"]["std"] == pytest.approx(0.5 / np.sqrt(2))
    assert s["ratio_inp"]["mean"] == pytest.approx(2 / 3)
    # Delta = 100 |1.75 - 2/3| / 1.75 = 61.90 (not the mean of the per-seed 77.8 and 50)
    assert s["delta"]["mean"] == pytest.approx(100 * (1.75 - 2 / 3) / 1.75)
    assert s["delta_seeds"]["mean"] == pytest.approx((100 * (1.5 - 1 / 3) / 1.5 + 50) / 2)
    assert s["delta_seeds"]["n"] == 2 and s["delta"]["n"] == 4
    assert s["delta"]["lo"] <= s["delta"]["mean"] <= s["delta"]["hi"]
    assert s["delta"]["n_boot"] == 200
    # pairs are resampled together: identical predictions give Delta 0 in every resample
    z = A.artifact_summary(mo, wo, mo, wo, n_boot=200)
    assert z["delta"]["mean"] == 0.0 and (z["delta"]["lo"], z["delta"]["hi"]) == (0.0, 0.0)
    # a seed that never predicts woman on the originals: r = inf, counted, Delta undefined
    wo2 = wo.copy()
    wo2[:, 1] = False
    u = A.artifact_summary(mo, wo2, mi, wi, n_boot=200)
    assert u["ratio_orig"]["n_inf"] == 1 and u["ratio_orig"]["mean"] is None
    assert u["delta"]["mean"] is None and u["delta_seeds"]["n_missing"] == 1
    with pytest.raises(ValueError, match="2-D"):
        A.artifact_summary(mo[:, 0], wo[:, 0], mi[:, 0], wi[:, 0])


def test_table3_json_collects_seeds():
    calls = [(*_calls([1, 1, 0], [0, 1, 1]), *_calls([1, 0, 0], [0, 1, 1])),
             (*_calls([1, 1, 1], [0, 0, 1]), *_calls([1, 1, 0], [0, 0, 1]))]
    per_seed = [{"seed": 0, "flip_rate": 10.0}, {"seed": 1, "flip_rate": 30.0}]
    j = A.table3_json(calls, per_seed)
    # seed 0: r_orig 2/2 = 1, r_inp 1/2; seed 1: r_orig 3/1 = 3, r_inp 2/1 = 2
    assert j["ratio_orig"]["mean"] == 2.0 and j["ratio_inp"]["mean"] == 1.25
    assert j["delta"]["mean"] == pytest.approx(37.5)       # 100 |2 - 1.25| / 2
    assert j["flip_rate"]["mean"] == 20.0 and j["per_seed"] == per_seed
    assert set(j["ratio_orig"]) == {"mean", "ci95", "std", "n", "n_inf", "n_missing", "sign"}
    json.dumps(j)


def test_caption_prompt():
    caps = ["Two people outside.", "A man with a tie.", "A woman and her dog."]
    assert A.caption_prompt(caps, "female") == "A woman and her dog."
    assert A.caption_prompt(caps, "male") == "A man with a tie."
    assert A.caption_prompt(["A dog."], "male") == "A dog."
    assert A.caption_prompt([], "male") == ""


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from biaslab.data.coco import read_coco
    from biaslab.data.labels import label_captions, label_images
    from biaslab.data.synthetic import generate
    root = tmp_path_factory.mktemp("art")
    generate(root / "raw", n_images=16, image_size=96, seed=2, bias=0.5)
    t, _ = read_coco(root / "raw", progress=False)
    return root, t, label_images(label_captions(t["captions"]))


def test_copy_paste_inpaints_only_the_part_with_a_same_group_donor(synth):
    from biaslab.counterfactual.copy_paste import CopyPasteBackend, donor_pool
    from biaslab.runtime.io import load_image
    root, t, labels = synth
    backend = CopyPasteBackend(donor_pool(t["persons"], t["images"], labels), feather_px=1.0)
    gender = dict(zip(labels["image_id"], labels["gender"]))
    donor_gender = dict(zip(backend.donors["ann_id"], backend.donors["gender"]))
    for iid in (1, 2):
        person = t["persons"][t["persons"]["image_id"] == iid].iloc[0].to_dict()
        img = load_image(t["images"].set_index("image_id").loc[iid, "path"])
        mask, part = A.choose_part_mask(person, *img.shape[:2], np.random.default_rng(iid))
        assert part in A.DEFAULT_PARTS                 # synthetic persons have keypoints
        out, donor = A.inpaint_part(backend, img, mask, image_id=iid,
                                    box=(person["x"], person["y"], person["w"], person["h"]),
                                    group=gender[iid], prompt="", seed=0)
        assert out.shape == img.shape and out.dtype == np.uint8
        np.testing.assert_array_equal(out[mask == 0], img[mask == 0])
        assert np.abs(out[mask > 0].astype(int) - img[mask > 0]).mean() > 1
        assert donor_gender[donor] == gender[iid]       # a patch of the SAME group
        assert int(t["persons"].set_index("ann_id").loc[donor, "image_id"]) != iid


def test_build_inpainted_test_set(synth, tmp_path):
    root, t, labels = synth

    class Grey:                                          # a backend that paints the mask grey
        name = "grey"

        def generate(self, item, image, mask, group, prompt, js, seeds, scales):
            out = image.copy()
            out[mask > 0] = 128
            return [(out, None) for _ in js]

    items = t["images"][["image_id", "path"]].merge(labels[["image_id", "gender"]]) \
        .query("gender in ['female', 'male']").assign(prompt="a caption")
    persons = t["persons"][t["persons"]["image_id"] != int(items["image_id"].iloc[0])]
    parts = A.build_inpainted_test_set(items, persons, Grey(), tmp_path / "inp", seed=4)
    assert list(parts.columns) == A.PARTS_COLUMNS
    assert len(parts) == len(items) - 1                 # the image without a person: skipped
    assert parts["image_id"].is_monotonic_increasing
    assert (parts["mask_pixels"] > 0).all() and parts["donor_ann_id"].isna().all()
    again = A.build_inpainted_test_set(items, persons, Grey(), tmp_path / "inp2", seed=4)
    assert parts["part"].tolist() == again["part"].tolist()
    from PIL import Image
    im = np.asarray(Image.open(parts["path"].iloc[0]))
    assert Image.open(parts["path"].iloc[0]).format == "JPEG"
    assert (np.abs(im.astype(int) - 128).sum(-1) < 12).sum() >= 0.5 * parts["mask_pixels"].iloc[0]


def test_sd_inpaint_backend_inpaints_a_part_with_the_caption(tmp_path):
    pytest.importorskip("diffusers")
    from biaslab.counterfactual.sd_inpaint import SDInpaintBackend, save_tiny_pipeline
    model = save_tiny_pipeline(tmp_path / "tiny-sd")
    backend = SDInpaintBackend(str(model), steps=2, resolution=32, batch_size=1, device="cpu")
    rng = np.random.default_rng(0)
    img = (rng.random((100, 100, 3)) * 255).astype(np.uint8)
    mask = A.part_mask(PERSON, 100, 100, "head")
    out, donor = A.inpaint_part(backend, img, mask, image_id=5,
                                box=(30, 10, 40, 85), group="male",
                                prompt="A man riding a horse.", seed=1)
    assert donor is None and out.shape == img.shape
    np.testing.assert_array_equal(out[mask == 0], img[mask == 0])
    assert not np.array_equal(out[mask > 0], img[mask > 0])
    json.dumps(backend.fingerprint())


def test_caption_artifact_scores_hand_computed():
    from biaslab.analysis.artifact import caption_artifact_scores
    orig = ["a man on a bike", "a man with a dog", "a woman in a kitchen", "a person outside"]
    inp = ["a man on a bike", "a woman with a dog", "a woman in a kitchen", "a man outside"]
    g = ["male", "male", "female", "unsure"]           # the unsure image is not counted
    s = caption_artifact_scores(orig, inp, g)
    # orig: 2 man / 1 woman -> r = 2; inp (counted images): 1 man / 2 woman -> r = 0.5
    assert s["ratio_orig"] == 2.0 and s["ratio_inp"] == 0.5
    assert s["delta"] == 75.0                           # 100 * |2 - 0.5| / 2
    assert (s["n_man_orig"], s["n_woman_orig"], s["n_man_inp"], s["n_woman_inp"]) == (2, 1, 1, 2)
    assert s["flip_rate"] == 50.0                       # 2 of 4 captions change label
    # the same counts per image for the seed summary (the unsure image counts for neither)
    mo, wo = A.caption_calls(orig, g)
    assert mo.tolist() == [True, True, False, False] and wo.tolist() == [False, False, True,
                                                                          False]
    no_woman = caption_artifact_scores(["a man"], ["a man"], ["male"])
    assert no_woman["ratio_orig"] is None and no_woman["delta"] is None
    with pytest.raises(ValueError, match="aligned"):
        caption_artifact_scores(["a man"], [], ["male"])


def test_positive_control_fills_the_same_parts_from_the_other_group(synth, tmp_path):
    """Other_group=True asks the backend for the other gender, same parts."""
    root, t, labels = synth
    asked = []

    class Record:
        name = "record"

        def generate(self, item, image, mask, group, prompt, js, seeds, scales):
            asked.append((int(item["image_id"]), group))
            return [(image.copy(), None) for _ in js]

    items = t["images"][["image_id", "path"]].merge(labels[["image_id", "gender"]]) \
        .query("gender in ['female', 'male']").assign(prompt="a caption")
    own = A.build_inpainted_test_set(items, t["persons"], Record(), tmp_path / "a", seed=4)
    n = len(asked)
    ctl = A.build_inpainted_test_set(items, t["persons"], Record(), tmp_path / "b", seed=4,
                                     other_group=True)
    gender = dict(zip(items["image_id"], items["gender"]))
    assert [g for _, g in asked[:n]] == [gender[i] for i, _ in asked[:n]]
    assert [g for _, g in asked[n:]] == [A.OTHER[gender[i]] for i, _ in asked[n:]]
    assert own["part"].tolist() == ctl["part"].tolist()
    assert own["mask_pixels"].tolist() == ctl["mask_pixels"].tolist()
