"""The run's protected attribute: group labels per attribute, the smallest
detectable difference, and stage eval_attribute on a tiny workspace written here (not by
biaslab.data.synthetic)."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import yaml

from biaslab.analysis import attribute_eval as A
from biaslab.metrics.leakage import Attacker
from biaslab.runtime.io import InputError


def _perceived(rows):
    return pd.DataFrame(rows, columns=["image_id", "perceived_gender", "skin"])


def test_group_labels_per_attribute():
    genders = {1: "female", 2: "male", 3: "female", 4: "male", 5: "unsure"}
    per = _perceived([(1, "female", "Light"), (2, "male", "DARK "), (3, "female", "Unsure"),
                      (4, "male", None), (5, None, "Dark"), (6, None, "Both")])
    assert A.group_labels("gender", genders, per) == {1: "female", 2: "male", 3: "female",
                                                      4: "male"}
    assert A.group_labels("skin", genders, per) == {1: "light", 2: "dark", 5: "dark"}
    assert A.group_labels("gender_skin", genders, per) == {1: "female_light", 2: "male_dark"}
    with pytest.raises(ValueError, match="unknown attribute"):
        A.group_labels("age", genders, per)


def test_skin_labels_errors_name_the_file():
    with pytest.raises(InputError, match="perceived_gender.parquet.*no perceived skin"):
        A.skin_labels(None)
    with pytest.raises(InputError, match="no image has a Light or Dark"):
        A.skin_labels(_perceived([(1, "female", None), (2, "male", "Unsure")]))


def test_min_detectable_difference_hand_computed():
    # (1.959964 + 0.841621) * sqrt(0.25 * (1/100 + 1/100)) * 100 = 19.8104 pp
    assert A.min_detectable_difference(100, 100) == pytest.approx(
        (1.959963985 + 0.841621234) * math.sqrt(0.25 * 0.02) * 100, rel=1e-6)
    assert A.min_detectable_difference(100, 100) == pytest.approx(19.8104, abs=1e-3)
    # a quarter of the images per group doubles it
    assert A.min_detectable_difference(25, 25) == pytest.approx(
        2 * A.min_detectable_difference(100, 100))
    assert A.min_detectable_difference(1, 100) is None
    with pytest.raises(ValueError, match="power"):
        A.min_detectable_difference(10, 10, power=1.0)


def test_group_sizes_names_the_two_smallest_groups():
    groups = {i: g for i, g in enumerate(["female_light"] * 30 + ["male_light"] * 20
                                         + ["male_dark"] * 5 + ["female_dark"] * 8)}
    s = A.group_sizes(groups, "gender_skin")
    assert s["per_group"] == {"female_dark": 8, "female_light": 30, "male_dark": 5,
                              "male_light": 20}
    assert s["n"] == 63 and s["smallest_pair"] == ["male_dark", "female_dark"]
    assert s["min_detectable_difference_pp"] == pytest.approx(A.min_detectable_difference(5, 8))
    # restricted to some ids; a group with no image is listed with 0
    s2 = A.group_sizes(groups, "gender_skin", ids=range(30))
    assert s2["per_group"]["male_dark"] == 0 and s2["min_detectable_difference_pp"] is None


def test_flat_metrics_keys_match_metric_keys():
    det = {"LIC_M": 30.0, "LIC_D": 25.0, "LIC": 5.0,
           "Error": {"pooled": 4.0, "worst_group_gap": {"gap": 6.0},
                     "per_group": {"female_dark": {"Error": 8.0}}}}
    f = A.flat_metrics(det, "gender_skin")
    assert tuple(f) == A.metric_keys("gender_skin")
    assert f["Error_female_dark"] == 8.0 and f["Error_male_light"] is None
    assert f["Error_worst_group_gap"] == 6.0
    assert A.flat_metrics({"LIC_M": {"skipped": "x"}}, "skin") == {"LIC_M": None, "LIC_D": None,
                                                                 "LIC": None}


# ----------------------------------------------------------------------------- the stage

N = 24


def _workspace(root, attribute):
    """2N test images: half dark, half light skin (bb_skin), genders alternating within each.
    Row "cue" says "a man" of every dark- and "a woman" of every light-skinned person,
    whatever their gender; row "fair" and the human captions say "a person" of everyone."""
    (root / "data" / "prepared").mkdir(parents=True)
    (root / "data" / "labels").mkdir()
    (root / "data" / "captions").mkdir()
    ids = list(range(1, 2 * N + 1))
    skin = {i: ("Dark" if i <= N else "Light") for i in ids}
    gender = {i: ("female" if i % 2 else "male") for i in ids}
    pd.DataFrame({"image_id": ids, "perceived_gender": [gender[i] for i in ids],
                  "skin": [skin[i] for i in ids]}).to_parquet(
        root / "data" / "prepared" / "perceived_gender.parquet")
    pd.DataFrame({"image_id": ids, "gender": [gender[i] for i in ids]}).to_parquet(
        root / "data" / "labels" / "images.parquet")
    caps = [(i, k, "a person standing on a street") for i in ids for k in range(2)]
    pd.DataFrame(caps, columns=["image_id", "caption_id", "caption"]).to_parquet(
        root / "data" / "prepared" / "captions.parquet")
    for seed in (0, 1):
        cue = [{"image_id": i, "caption": f"a {'man' if skin[i] == 'Dark' else 'woman'} "
                                          f"standing on a street"} for i in ids]
        fair = [{"image_id": i, "caption": "a person standing on a street"} for i in ids]
        (root / "data" / "captions" / f"cue-{seed}.json").write_text(json.dumps(cue))
        (root / "data" / "captions" / f"fair-{seed}.json").write_text(json.dumps(fair))
    (root / "data" / "captions" / "eval.json").write_text("{}")     # not a results set
    (root / "params.yaml").write_text(yaml.safe_dump({
        "attribute": attribute,
        "lic": {"classifier": "lstm", "preset": "ci", "seeds": 2, "num_threads": 1,
                "workers": 1, "max_human_captions": 1},
        "label": {"words": "lic"}, "eval_captioner": {"gender_source": "perceived"}}))


def _run(tmp_path, monkeypatch, attribute):
    from tests.test_captioner import _load_stage
    _workspace(tmp_path, attribute)
    monkeypatch.chdir(tmp_path)
    assert _load_stage("eval_attribute").main([]) == 0
    return json.loads((tmp_path / "metrics" / "attribute.json").read_text())


def test_stage_skin_reads_the_planted_cue(tmp_path, monkeypatch):
    m = _run(tmp_path, monkeypatch, "skin")
    assert m["attribute"] == "skin" and m["groups"] == ["dark", "light"]
    assert m["test_images"]["per_group"] == {"dark": N, "light": N}
    assert m["test_images"]["min_detectable_difference_pp"] == pytest.approx(
        A.min_detectable_difference(N, N))
    cue, fair = m["rows"]["cue"], m["rows"]["fair"]
    assert cue["LIC_M"]["n"] == 2 and [r["seed"] for r in cue["per_seed"]] == [0, 1]
    # the cue is read (skin-tone captions are not masked: thesis sec. 2.5.3); "a person"
    # carries nothing, in the model's captions or in the human ones
    assert cue["LIC_M"]["mean"] - fair["LIC_M"]["mean"] > 15, (cue["LIC_M"], fair["LIC_M"])
    assert cue["LIC"]["mean"] > 10 and abs(fair["LIC"]["mean"]) < 5, (cue["LIC"], fair["LIC"])
    csv_rows = (tmp_path / "plots" / "attribute.csv").read_text().splitlines()
    assert csv_rows[0] == "attribute,row,metric,mean,ci95,n"
    assert any(r.startswith("skin,cue,LIC_M,") for r in csv_rows)
    assert "skin,test_images,dark,24,," in csv_rows


def test_stage_gender_skin_has_error_per_group(tmp_path, monkeypatch):
    m = _run(tmp_path, monkeypatch, "gender_skin")
    assert m["test_images"]["per_group"] == {"female_dark": N // 2, "female_light": N // 2,
                                             "male_dark": N // 2, "male_light": N // 2}
    cue, fair = m["rows"]["cue"], m["rows"]["fair"]
    # Error per group by hand: "a man" of dark skin is wrong for women, "a woman" of light
    # skin wrong for men; "a person" is never the other gender's word
    want = {"female_dark": 100.0, "female_light": 0.0, "male_dark": 0.0, "male_light": 100.0}
    for g, e in want.items():
        assert cue[f"Error_{g}"]["mean"] == e, g
        assert fair[f"Error_{g}"]["mean"] == 0.0, g
    assert cue["Error_worst_group_gap"]["mean"] == 100.0
    assert cue["Error_pooled"]["mean"] == 50.0 and fair["Error_pooled"]["mean"] == 0.0
    assert cue["LIC_M"]["n"] == 2


def test_stage_gender_reports_sizes_only(tmp_path, monkeypatch):
    m = _run(tmp_path, monkeypatch, "gender")
    assert m["metrics"] == "metrics/captioning.json" and m["rows"] == {}
    assert m["test_images"]["per_group"] == {"female": N, "male": N}


def test_stage_refuses_an_unknown_attribute(tmp_path, monkeypatch):
    from tests.test_captioner import _load_stage
    _workspace(tmp_path, "age")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match="attribute"):
        _load_stage("eval_attribute").main([])
    assert not (tmp_path / "metrics").exists()


def test_which_stages_read_the_attribute_param():
    """`dvc exp run -S attribute=skin` re-runs the stages whose params list ``attribute`` and
    then only what reads their outputs (DVC compares the outs' hashes): the counterfactual
    pipeline (generate: the target groups; score: the KNN filter's real groups; select: no
    colour fidelity for skin tone; build_datasets: the training sets over the groups),
    eval_attribute and eval_classifier (its attribute Leakage), probe (its
    attribute-flip pairs), audit (the per-group audit) and controls_attribute (the
    attribute's controls) and residue (the skin-tone check of the counterfactuals), whose
    metrics files the report reads."""
    from pathlib import Path
    stages = yaml.safe_load((Path(__file__).parent.parent / "dvc.yaml").read_text())["stages"]
    readers = {name for name, st in stages.items()
               if any(p == "attribute" or (isinstance(p, str) and p.startswith("attribute."))
                      for p in st.get("params", []))}
    assert readers == {"generate", "score", "select", "build_datasets", "eval_attribute",
                       "eval_classifier", "probe", "audit", "controls_attribute", "residue"}
    consumers = {name for name, st in stages.items()
                 if "metrics/attribute.json" in st.get("deps", [])}
    assert consumers == {"report"}


# ----------------------------------------------------------------------------- classifiers

def _objects(n, rng):
    import numpy as np
    return (rng.random((n, 6)) < 0.4).astype("float32")


def test_attribute_leakage_zero_for_ground_truth_and_high_for_a_planted_cue():
    """Paper 000 Eq. 7 with skin-tone groups: a model that predicts the ground truth leaks
    exactly what the data leaks (LK_M = LK_D, same rows and attacker seeds: Leakage 0.0); a
    model whose object 0 fires for dark skin leaks the group (Leakage far above 0)."""
    import numpy as np
    from biaslab.classify import attribute_leakage
    rng = np.random.default_rng(0)
    n_tr, n_te = 200, 120
    tr_y, te_y = _objects(n_tr, rng), _objects(n_te, rng)
    tr_g = ["dark" if i % 2 else "light" for i in range(n_tr)]
    te_g = ["dark" if i % 2 else "light" for i in range(n_te)]
    te_g[0] = None                                  # no group: ignored
    lab = np.ones(n_te, bool)
    kw = {"rounds": 2, "seed": 0, "attacker": Attacker(epochs=20)}
    same = attribute_leakage(te_y, te_y, lab, te_g, tr_y, tr_y, tr_g, ("dark", "light"), kw)
    assert same["leakage"] == 0.0 and same["LK_M"] == same["LK_D"]
    cue = lambda y, g: np.column_stack([[1.0 if x == "dark" else 0.0 for x in g], y[:, 1:]])
    leak = attribute_leakage(cue(te_y, te_g), te_y, lab, te_g, cue(tr_y, tr_g), tr_y, tr_g,
                             ("dark", "light"), kw)
    assert leak["LK_M"] > 80 and leak["leakage"] > 20, leak
    few = attribute_leakage(te_y, te_y, np.zeros(n_te, bool), te_g, tr_y, tr_y, tr_g,
                            ("dark", "light"), kw)
    assert few["leakage"] is None and few["leakage_error"]


def test_attribute_leakage_at_f1_matches_a_noisy_copy_of_the_ground_truth():
    """Wang et al. 2019's accuracy-matched leakage for the attribute: the ground truth itself
    has F1 100 and LK_D@F1 = LK_D (Leakage@F1 exactly 0); a model that is the ground truth
    with every label flipped at p = 0.3 leaks less than the data by Eq. 7 (noise, not
    fairness); Leakage@F1, which compares it with ground truth as noisy, is much nearer 0
    (here -13.8 against Eq. 7's -49.0: what is left is one noise draw's own spread, LK 41-47
    over three draws at this p)."""
    import numpy as np
    from biaslab.classify import attribute_leakage
    rng = np.random.default_rng(1)
    n_tr, n_te = 400, 300

    def data(n):
        g = ["dark" if i % 2 else "light" for i in range(n)]
        y = (rng.random((n, 6)) < 0.4).astype("float32")
        y[:, 0] = [float(rng.random() < (0.9 if x == "dark" else 0.1)) for x in g]
        return y, g

    (tr_y, tr_g), (te_y, te_g) = data(n_tr), data(n_te)
    noisy = lambda y: np.where(rng.random(y.shape) < 0.3, 1.0 - y, y).astype("float32")
    lab = np.ones(n_te, bool)
    kw = {"rounds": 2, "seed": 0, "attacker": Attacker(epochs=20),
          "f1_flips": [0.0, 0.1, 0.2, 0.3, 0.4]}
    groups = ("dark", "light")
    same = attribute_leakage(te_y, te_y, lab, te_g, tr_y, tr_y, tr_g, groups, kw)
    assert same["F1"] == 100.0 and same["LK_D_F1"] == same["LK_D"]
    assert same["leakage_F1"] == 0.0 and not same["leakage_F1_clamped"]
    m = attribute_leakage(noisy(te_y), te_y, lab, te_g, noisy(tr_y), tr_y, tr_g, groups, kw)
    assert m["leakage"] < -10, m                   # Eq. 7: the noise looks like less bias
    assert abs(m["leakage_F1"]) < abs(m["leakage"]) / 2, m
    assert m["LK_D_F1"] < m["LK_D"]
    plain = attribute_leakage(te_y, te_y, lab, te_g, tr_y, tr_y, tr_g, groups,
                              {k: v for k, v in kw.items() if k != "f1_flips"})
    assert "leakage_F1" not in plain


def test_attribute_rows_summarise_over_seeds():
    from biaslab.analysis.classification_eval import attribute_rows
    test = pd.DataFrame({"image_id": [1, 2, 3, 4], "labelled": [True, True, False, True]})
    per_job = [{"attribute": {"leakage": 2.0, "LK_M": 60.0, "LK_D": 58.0}},
               {"attribute": {"leakage": 4.0, "LK_M": 62.0, "LK_D": 58.0}},
               {"attribute": {"leakage": None, "leakage_error": "too few"}},
               {"attribute": {"leakage": 1.0, "LK_M": 51.0, "LK_D": 50.0}}]
    out = attribute_rows("skin", ("dark", "light"), ["original", "augment"], [0, 1], per_job,
                         test, ["dark", "light", "dark", None], ["dark", "dark", "light"])
    assert out["n_test_labelled_by_group"] == {"dark": 1, "light": 1}
    assert out["n_train_by_group"] == {"dark": 2, "light": 1}
    rows = out["rows"]
    assert rows["original"]["Leakage"]["mean"] == 3.0 and rows["original"]["Leakage"]["n"] == 2
    assert rows["augment"]["Leakage"]["n"] == 1 and rows["augment"]["Leakage"]["n_missing"] == 1
    assert rows["augment"]["per_seed"][0] == {"seed": 0, "Leakage": None, "LK_M": None,
                                             "LK_D": None, "Leakage_F1": None,
                                             "LK_D_F1": None, "F1": None,
                                             "leakage_error": "too few"}
