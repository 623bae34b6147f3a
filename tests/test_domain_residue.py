"""The real-vs-generated domain check and the residue check."""
import numpy as np
import pandas as pd
import pytest

from biaslab.classify import domain as DOM
from biaslab.classify.manifest import validation_split
from biaslab.counterfactual import residue as R


def _manifest(ids, repeat=1):
    rows = [{"image_id": i, "gender": "male" if i % 2 else "female", "objects": ["cup"]}
            for i in ids for _ in range(repeat)]
    return pd.DataFrame(rows)


def test_unseen_sources_are_validation_plus_absent():
    universe = np.arange(1, 11)
    # a model trained on all ten sources (two rows each, as S_synthetic): its unseen sources
    # are exactly the validation sources the training drew
    m = _manifest(universe, repeat=2)
    tr, va = validation_split(m, 0.2, 3)
    held = sorted(set(m["image_id"].iloc[va]))
    assert len(held) == 2
    assert DOM.unseen_sources(m, universe, 0.2, 3).tolist() == held
    # sub-sampling kept 1-4 and trained on all of them (no validation): 5-10 are unseen
    assert DOM.unseen_sources(_manifest([1, 2, 3, 4]), universe, 0.0, 0).tolist() == \
        list(range(5, 11))


def test_scores_and_gap_hand_computed():
    labels = ["cup", "dog"]
    # rows: cup only, dog only, cup+dog, none (left out of mAP); columns cup, dog, woman, man
    probs = np.array([[0.9, 0.2, 0.1, 0.9],
                      [0.3, 0.8, 0.8, 0.2],
                      [0.6, 0.7, 0.4, 0.6],
                      [0.5, 0.5, 0.6, 0.4]])
    objects = [["cup"], ["dog"], ["cup", "dog"], []]
    genders = ["male", "female", "female", "female"]
    s = DOM.scores(probs, objects, genders, labels)
    # cup: positives rows 0, 2 have the two highest cup scores -> AP 1; dog: rows 1, 2 have
    # the two highest dog scores -> AP 1. Gender: man > woman in rows 0 and 2; truth male only
    # in row 0 -> rows 0, 1, 3 right: 75 %
    assert s["mAP"] == pytest.approx(100.0) and s["gender_acc"] == pytest.approx(75.0)
    worse = probs.copy()
    worse[:, 0] = [0.2, 0.9, 0.6, 0.5]   # cup: ranks row 1 (neg) first, then row 2, row 0
    g = DOM.domain_gap(s, DOM.scores(worse, objects, genders, labels))
    # cup AP: positives at ranks 2 and 3 -> (1/2 + 2/3) / 2 = 7/12; mAP (7/12 + 1) / 2
    assert g["mAP_generated"] == pytest.approx(100 * (7 / 12 + 1) / 2)
    assert g["domain_gap"] == pytest.approx(g["mAP_generated"] - 100.0)
    # no gender outputs (the adversarial model): accuracy is None, mAP still computed
    s2 = DOM.scores(probs[:, :2], objects, genders, labels, has_gender=False)
    assert s2["gender_acc"] is None and s2["mAP"] == pytest.approx(100.0)


def test_probe_auc_separable_and_alike():
    rng = np.random.default_rng(0)
    real = rng.normal(size=(40, 6))
    ids = np.arange(40)
    # generated = real shifted on one feature: every fold separates them perfectly
    auc = DOM.probe_auc(real, ids, real + np.r_[6.0, np.zeros(5)], ids, folds=4)
    assert len(auc) == 4 and min(auc) == pytest.approx(100.0)
    # generated drawn from the same distribution: near chance
    alike = DOM.probe_auc(real, ids, rng.normal(size=(40, 6)), ids, folds=4)
    assert 20 < np.mean(alike) < 80
    assert DOM.probe_auc(real, ids, np.zeros((0, 6)), [], folds=4) == []


def test_erase_paints_only_the_mask():
    img = np.full((4, 5, 3), 200, np.uint8)
    mask = np.zeros((4, 5), np.uint8)
    mask[1:3, 2] = 1
    out = R.erase(img, mask)
    assert (out[1:3, 2] == R.ERASE_FILL).all() and (out[0] == 200).all()
    assert (img == 200).all()   # the input is not changed
    with pytest.raises(ValueError, match="does not match"):
        R.erase(img, mask[:3])


def test_cross_fitted_probe_reads_the_cue_and_its_flip():
    rng = np.random.default_rng(1)
    man = np.arange(60) % 2 == 1
    x = rng.normal(size=(60, 4))
    x[:, 0] += np.where(man, 3.0, -3.0)
    src = np.arange(60)
    flipped = x.copy()
    flipped[:, 0] *= -1          # the cue of the other gender: a complete counterfactual
    p = R.cross_fit_scores(x, man, {"real": (x, src), "swap": (flipped, src),
                                    "none": (x * [0, 1, 1, 1], src)}, folds=5)
    assert not any(np.isnan(v).any() for v in p.values())
    assert R.auc(man, p["real"]) == pytest.approx(100.0)
    assert R.auc(~man, p["swap"]) == pytest.approx(100.0)   # reads the target group
    assert 20 < R.auc(man, p["none"]) < 80                 # cue erased: near chance
    d = R.auc_difference(man, p["real"], p["none"])
    assert d["mean"] == pytest.approx(100.0 - R.auc(man, p["none"]))
    assert d["lo"] <= d["mean"] <= d["hi"]
    assert R.auc(np.ones(3, bool), np.zeros(3)) is None
    # the rank formula is scikit-learn's ROC AUC, ties included
    from sklearn.metrics import roc_auc_score
    t = np.array([1, 0, 1, 1, 0, 0, 1], bool)
    q = np.array([0.9, 0.9, 0.2, 0.5, 0.5, 0.1, 0.7])
    assert R.auc(t, q) == pytest.approx(100 * roc_auc_score(t, q), abs=1e-12)
    with pytest.raises(ValueError, match="2 images per gender"):
        R.cross_fit_scores(x[:3], np.array([True, False, False]), {}, folds=5)


def test_unseen_sources_get_the_mean_of_the_fold_probes():
    """A source of -1 (an image outside the probe's training set) is scored by the mean of the
    fold probes; the other rows keep their held-out fold's score."""
    rng = np.random.default_rng(2)
    y = np.arange(40) % 2 == 1
    x = rng.normal(size=(40, 3))
    x[:, 0] += np.where(y, 2.0, -2.0)
    new = rng.normal(size=(6, 3))
    new[:, 0] += np.array([3.0, 3.0, 3.0, -3.0, -3.0, -3.0])
    both = R.cross_fit_scores(x, y, {"real": (x, np.arange(40)),
                                     "new": (new, np.full(6, -1))}, folds=4)
    alone = R.cross_fit_scores(x, y, {"real": (x, np.arange(40))}, folds=4)
    np.testing.assert_array_equal(both["real"], alone["real"])
    assert not np.isnan(both["new"]).any()
    assert both["new"][:3].min() > 0.5 > both["new"][3:].max()


def test_skin_check_reads_the_target_tone():
    """stages/residue.skin_check on hand-built features: tone is feature 0 (+ dark, - light).
    Counterfactuals that carry their target's cue read at AUC 100; a backend that leaves the
    source unchanged reads below 50 where the target is the other tone."""
    import pandas as pd
    from stages.residue import skin_check
    rng = np.random.default_rng(3)
    common = list(range(1, 31))
    tone = {i: ("dark" if i % 2 else "light") for i in common[:24]}   # 25-30: no label
    real = rng.normal(size=(30, 3))
    real[:24, 0] += np.array([3.0 if i % 2 else -3.0 for i in common[:24]])
    rows = [{"image_id": i, "group": g, "path": f"{i}_{g}"} for i in common
            for g in ("dark", "light")]
    sel = pd.DataFrame(rows)
    cue = {"dark": 3.0, "light": -3.0}

    def faithful(paths):
        f = rng.normal(size=(len(paths), 3))
        f[:, 0] += [cue[p.split("_")[1]] for p in paths]
        return f
    ok = skin_check(common, real, sel, tone, 4, faithful)
    assert ok["target_auc"]["mean"] == pytest.approx(100.0)
    assert ok["target_auc_other"]["mean"] == pytest.approx(100.0)
    assert (ok["n_real_dark"], ok["n_real_light"]) == (12, 12)
    assert (ok["n_other"], ok["n_same"], ok["n_unlabelled_source"]) == (24, 24, 12)

    def unchanged(paths):   # the source's own tone shows through (labelled sources only)
        f = rng.normal(size=(len(paths), 3))
        f[:, 0] += [cue[tone.get(int(p.split("_")[0]), "light")] for p in paths]
        return f
    bad = skin_check(common, real, sel, tone, 4, unchanged)
    assert bad["target_auc_other"]["mean"] == pytest.approx(0.0)
    assert bad["target_auc_same"]["mean"] == pytest.approx(100.0)
    gs = sel.assign(group=sel["group"].map({"dark": "male_dark", "light": "female_light"}))
    assert skin_check(common, real, gs, tone, 4, faithful)["target_auc"]["mean"] == \
        pytest.approx(100.0)
    assert "skipped" in skin_check(common, real, sel.assign(group="male"), tone, 4, faithful)
    assert "2 of each" in skin_check(common, real, sel, {1: "dark"}, 4, faithful)["skipped"]


def test_keep_only_is_the_complement_of_erase():
    img = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    m = np.zeros((4, 6), np.uint8)
    m[1:3, 2:4] = 1
    kept = R.keep_only(img, m, fill=9)
    np.testing.assert_array_equal(kept[1:3, 2:4], img[1:3, 2:4])
    assert (kept[m == 0] == 9).all()
    # a mask stored at half the resolution is resized to the image (nearest)
    big = np.zeros((8, 12, 3), np.uint8) + 50
    np.testing.assert_array_equal(R.keep_only(big, m, fill=9)[2:6, 4:8], big[2:6, 4:8])
    assert (R.keep_only(big, m, fill=9)[:2] == 9).all()


def test_person_images_keep_each_person_inside_its_source_mask(tmp_path):
    """stages/residue._person_images on files written here (not by biaslab.data.synthetic):
    each real image and each skin-tone counterfactual kept only inside its SOURCE's mask
    (grey elsewhere); counterfactuals without a skin-tone target are left out."""
    import pandas as pd
    from PIL import Image
    from biaslab.counterfactual.masks import save_mask
    from stages.residue import _person_images
    rng = np.random.default_rng(6)
    path_of, masks, rows = {}, [], []
    for i in (1, 2, 3):
        img = rng.integers(0, 256, (16, 12, 3)).astype(np.uint8)
        m = np.zeros((16, 12), np.uint8)
        m[2 + i:12, 3:3 + 2 * i] = 1
        path_of[i] = str(tmp_path / f"{i}.png")
        Image.fromarray(img).save(path_of[i])
        save_mask(tmp_path / f"{i}_mask.png", m)
        masks.append({"image_id": i, "mask_path": str(tmp_path / f"{i}_mask.png")})
        for g in ("dark", "light", "male"):
            Image.fromarray(rng.integers(0, 256, (16, 12, 3)).astype(np.uint8)).save(
                tmp_path / f"cf_{i}_{g}.png")
            rows.append({"image_id": i, "group": g, "path": str(tmp_path / f"cf_{i}_{g}.png")})
    out = tmp_path / "out"
    out.mkdir()
    sel = _person_images(out, pd.DataFrame(masks), [1, 2, 3], path_of, pd.DataFrame(rows))
    assert list(zip(sel["image_id"], sel["group"])) == [(i, g) for i in (1, 2, 3)
                                                       for g in ("dark", "light")]
    for i in (1, 2, 3):
        mask = np.asarray(Image.open(tmp_path / f"{i}_mask.png")) > 0
        kept = np.asarray(Image.open(out / "person" / f"{i}.png"))
        np.testing.assert_array_equal(kept[mask], np.asarray(Image.open(path_of[i]))[mask])
        assert (kept[~mask] == R.ERASE_FILL).all()
        cf = np.asarray(Image.open(out / "person_cf" / f"{i}_dark.png"))
        np.testing.assert_array_equal(
            cf[mask], np.asarray(Image.open(tmp_path / f"cf_{i}_dark.png"))[mask])
        assert (cf[~mask] == R.ERASE_FILL).all()
    assert sel["path"].iloc[0] == "data/residue/person_cf/1_dark.png"
