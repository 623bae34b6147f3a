"""Spurious correlations (paper 001 appendix D; biaslab.analysis.spurious, stage spurious, the report's
section and validity_paper001.spurious_checks): hand-computed expectations."""
import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import roc_auc_score

from biaslab.analysis import spurious as S
from biaslab.analysis import validity_paper001
from biaslab.analysis import verdicts
from biaslab.report.sections import spurious_markdown


@pytest.mark.parametrize("seed", range(5))
def test_auc_is_sklearns_roc_auc_with_ties(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 60)
    s = rng.integers(0, 5, 60).astype(float)      # many ties
    assert S._auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_auc_of_one_class_is_nan_and_perfect_separation_is_one():
    assert np.isnan(S._auc(np.ones(4), np.arange(4.0)))
    assert S._auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.2, 0.8, 0.9])) == 1.0
    assert S._auc(np.array([0, 0, 1, 1]), np.array([0.9, 0.8, 0.2, 0.1])) == 0.0


def test_mean_embeddings_average_each_images_captions():
    emb = np.array([[1.0, 0.0], [3.0, 2.0], [5.0, 5.0]])
    out = S.mean_embeddings(emb, [7, 7, 9], [9, 7])
    np.testing.assert_allclose(out, [[5.0, 5.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="image 4 has no caption"):
        S.mean_embeddings(emb, [7, 7, 9], [4])


def test_cluster_parity_by_hand():
    # overall male share 2/5 = 0.4; cluster 0: 2 of 3 male -> +26.67 points; cluster 1: 0 of 2
    t = S.cluster_parity([0, 0, 0, 1, 1], ["male", "male", "female", "female", "female"], 3)
    assert t["n"].tolist() == [3, 2, 0]
    assert t.loc[0, "delta_m"] == pytest.approx(100 * (2 / 3 - 0.4))
    assert t.loc[1, "delta_m"] == pytest.approx(-40.0)
    assert t.loc[2, "delta_m"] is None or np.isnan(t.loc[2, "delta_m"])
    ci = binomtest(2, 3).proportion_ci(method="wilson")
    assert t.loc[0, "lo"] == pytest.approx(100 * (ci.low - 0.4))
    assert t.loc[0, "hi"] == pytest.approx(100 * (ci.high - 0.4))
    assert t.loc[0, "lo"] <= t.loc[0, "delta_m"] <= t.loc[0, "hi"]
    with pytest.raises(ValueError, match="female' or 'male"):
        S.cluster_parity([0], ["both"], 1)


def test_parity_test_independent_vs_dependent():
    ind = S.parity_test([0, 0, 1, 1] * 10, ["male", "female"] * 20)
    assert ind["chi2"] == pytest.approx(0.0) and ind["p"] == pytest.approx(1.0)
    dep = S.parity_test([0] * 30 + [1] * 30, ["male"] * 28 + ["female"] * 2 +
                        ["female"] * 27 + ["male"] * 3)
    assert dep["p"] < 1e-6 and dep["dof"] == 1
    assert S.parity_test([0, 0], ["male", "female"])["p"] is None   # one cluster: no test


def test_cluster_auc_by_hand():
    # train: cluster 0 all male, cluster 1 all female; test images scored 1.0 / 0.0 -> AUC 1
    r = S.cluster_auc([0, 0, 1, 1], ["male", "male", "female", "female"],
                      [0, 1, 0, 1], ["male", "female", "male", "female"], n_boot=200)
    assert r["mean"] == 1.0 and r["n"] == 4
    # clusters at parity: every test image gets 0.5, AUC 0.5; a cluster unseen in training
    # gets the overall train share
    r = S.cluster_auc([0, 0, 1, 1], ["male", "female", "male", "female"],
                      [0, 1, 2, 2], ["male", "female", "male", "female"], n_boot=200)
    assert r["mean"] == 0.5


def test_caption_clusters_and_salient_words_find_two_topics():
    kitchen = ["a person cooking in a kitchen with a stove and an oven"] * 6
    sport = ["a person swinging a baseball bat on a field"] * 6
    docs = kitchen + sport
    emb = S.lsa_embeddings(docs, dim=5)
    assert emb.shape[0] == 12
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    lab, model = S.caption_clusters(emb, m=2, seed=0)
    assert len(set(lab[:6])) == 1 and len(set(lab[6:])) == 1 and lab[0] != lab[6]
    words = S.salient_words(docs, lab, 2, n_words=3, seed=0)
    assert set(words[lab[0]]) <= {"cooking", "kitchen", "stove", "oven"}
    assert set(words[lab[6]]) <= {"swinging", "baseball", "bat", "field"}
    with pytest.raises(ValueError, match="at least"):
        S.caption_clusters(emb[:1], m=2)


def test_gender_auc_on_a_contrast_set_is_chance_when_both_versions_score_alike():
    # each source twice (female, male version) with the same score: AUC 0.5 in every resample
    scores = np.repeat(np.linspace(0, 1, 20), 2)
    genders = ["female", "male"] * 20
    groups = np.repeat(np.arange(20), 2)
    r = S.gender_auc(scores, genders, groups=groups, n_boot=200)
    assert (r["mean"], r["lo"], r["hi"], r["n"]) == (0.5, 0.5, 0.5, 20)
    nat = S.gender_auc(np.r_[np.zeros(10), np.ones(10)], ["female"] * 10 + ["male"] * 10,
                       n_boot=200)
    assert nat["mean"] == 1.0 and nat["n"] == 20
    d = S.auc_difference((np.r_[np.zeros(10), np.ones(10)], ["female"] * 10 + ["male"] * 10,
                          None), (scores, genders, groups), n_boot=200)
    assert d["mean"] == pytest.approx(0.5) and d["lo"] == pytest.approx(0.5)


def test_fit_gender_classifier_reads_a_planted_background_cue():
    rng = np.random.default_rng(0)
    g = np.array(["female", "male"] * 50)
    x = rng.normal(size=(100, 8))
    x[:, 0] += (g == "male") * 2.0          # the context goes with one gender
    model = S.fit_gender_classifier(x, g)
    p = model.predict_proba(x)[:, 1]
    assert S._auc(g == "male", p) > 0.8
    with pytest.raises(ValueError, match="one gender"):
        S.fit_gender_classifier(x[:3], ["male"] * 3)


def _record(p=1e-9, bg_contrast=(0.504, 0.497, 0.512), cl_auc=(0.7, 0.6, 0.8)):
    def r(m, lo, hi, n=100):
        return {"mean": m, "lo": lo, "hi": hi, "ci95": max(m - lo, hi - m), "n": n}
    return {"clusters": {"m": 2, "n": 40, "encoder": "lsa", "overall_male_share": 0.5,
                         "test": {"chi2": 30.0, "dof": 1, "p": p, "n": 40, "clusters": 2},
                         "auc": r(*cl_auc, n=20),
                         "rows": [{"cluster": 0, "n": 20, "delta_m": 40.0, "lo": 20.0,
                                   "hi": 45.0, "words": "bat field"},
                                  {"cluster": 1, "n": 20, "delta_m": -40.0, "lo": -45.0,
                                   "hi": -20.0, "words": "kitchen stove"}],
                         "contrast": {"n": 20, "max_abs_delta_m": 0.0}},
            "classifiers": {"background": {"natural": r(0.8, 0.7, 0.9),
                                           "contrast": r(*bg_contrast),
                                           "natural-contrast": r(0.3, 0.2, 0.4)},
                            "text": {"natural": r(0.9, 0.85, 0.95), "contrast": r(0.5, 0.5, 0.5),
                                     "natural-contrast": r(0.4, 0.35, 0.45)},
                            "image": {"natural": r(0.99, 0.98, 1.0), "contrast": r(0.6, 0.4, 0.8),
                                      "natural-contrast": r(0.39, 0.2, 0.5)}},
            "setup": {"n_train": 100, "n_test": 100, "n_contrast_sources": 10,
                      "contrast_background_changed": 3,
                      "contrast_background_compared": 20}}


def test_spurious_checks_verdicts():
    v = {c["id"]: c for c in verdicts.explain(validity_paper001.spurious_checks(_record()))}
    assert v["spurious/clusters/natural/auc>0.5"]["verdict"] == "holds"
    assert v["spurious/clusters/natural/auc>0.5"]["n"] == 20
    # every check carries its interval (tests/test_foreign_data.py asks it of each verdict)
    assert all(c["lo"] is not None and c["hi"] > c["lo"] for c in v.values()
               if c["verdict"] == "holds")
    assert v["spurious/background/natural/auc>0.5"]["verdict"] == "holds"
    assert v["spurious/background/contrast/auc≤0.5"]["verdict"] == "holds"
    assert v["spurious/background/natural-contrast>0"]["verdict"] == "holds"
    assert v["spurious/text/natural/auc>0.5"]["verdict"] == "holds"
    assert v["spurious/image/contrast/auc>0.5"]["verdict"] == "inconclusive"
    # a background still read on the contrast set fails; a non-significant test is no verdict
    w = {c["id"]: c for c in verdicts.explain(validity_paper001.spurious_checks(
        _record(bg_contrast=(0.7, 0.6, 0.8), cl_auc=(0.55, 0.45, 0.65))))}
    assert w["spurious/background/contrast/auc≤0.5"]["verdict"] == "fails"
    assert w["spurious/clusters/natural/auc>0.5"]["verdict"] == "inconclusive"
    assert validity_paper001.spurious_checks({"skipped": "no captions"}) == []


def test_spurious_markdown_has_both_tables():
    md = "\n".join(spurious_markdown(_record()))
    assert "## Spurious correlations (paper 001 appendix D)" in md
    assert "| persons removed (background only) | 80.0 ± 10.0 | 50.4 ± 0.8 | 30.0 ± 10.0 |" in md
    assert "| 0 | 20 | +40.0 [+20.0, +45.0] | bat field |" in md
    assert "predicts its gender at ROC AUC 70.0 ± 10.0 %" in md
    assert "3 of 20 contrast versions (lossless pairs) differ" in md
    assert spurious_markdown({"skipped": "no captions"}) == []


@pytest.mark.parametrize("bad", [{"clusters": 1}, {"n_boot": 10}, {"workers": 0},
                                 {"text_encoder": ""}, {"image_encoder": 3}, {"seed": "a"},
                                 {"m": 20}])
def test_stage_rejects_bad_params_before_reading(tmp_path, monkeypatch, bad):
    import yaml

    from tests.test_captioner import _load_stage
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"spurious": bad}))
    from biaslab.runtime.io import ParamsError
    # load_params checks the group (biaslab.runtime.validate); run as a script, the stage exits 2
    with pytest.raises(ParamsError, match=r"params.yaml: spurious\."):
        _load_stage("spurious").main()
    assert list(tmp_path.iterdir()) == [tmp_path / "params.yaml"]
