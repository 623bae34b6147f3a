"""Causal attribute-sensitivity probe (biaslab.analysis.probe) on synthetic probe pairs."""
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from biaslab.analysis import probe as P
from biaslab.data import synthetic as S

SIZE = 64


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe")
    S.generate(root, n_images=2, bias=0.8, seed=1, image_size=SIZE, probe_pairs=8)
    return root, S.read_probe(root)


def _cast_model(df, noise=0.0, seed=0):
    """A 'model' that reads only the colour cast: o = +0.5 on cool, -0.5 on warm (+ noise)."""
    rng = np.random.default_rng(seed)
    o = np.where(df["cast"] == "cool", 0.5, -0.5)
    return o + noise * rng.standard_normal(len(df))


def test_cast_only_model_scores_one_on_cast_and_zero_elsewhere(pairs):
    _, df = pairs
    per_seed = {s: P.pair_sensitivities(df, _cast_model(df)) for s in (0, 1, 2)}
    rec = P.summarize_sensitivity(per_seed, n_boot=200)
    assert set(rec) == {"objects", "scene", "cast"}
    # cast pairs: cool (male-associated) - warm = 0.5 - (-0.5) = 1 exactly; other attributes
    # keep the cast fixed within a pair: 0 exactly
    assert rec["cast"]["mean"] == pytest.approx(1.0)
    assert rec["objects"]["mean"] == 0.0 and rec["scene"]["mean"] == 0.0
    assert rec["cast"]["n_pairs"] == 8 and rec["cast"]["n_seeds"] == 3
    assert rec["cast"]["ci_method"] == "t_over_seeds" and rec["cast"]["ci95"] == 0.0
    assert rec["cast"]["mean_output"] == {"female": -0.5, "male": 0.5}


def test_noisy_cast_model_with_few_seeds_uses_the_pair_bootstrap(pairs):
    _, df = pairs
    per_seed = {s: P.pair_sensitivities(df, _cast_model(df, noise=0.05, seed=s))
                for s in (0, 1)}
    rec = P.summarize_sensitivity(per_seed, n_boot=500)
    c = rec["cast"]
    assert c["ci_method"] == "pair_bootstrap"
    assert c["lo"] == c["pooled"]["lo"] and c["hi"] == c["pooled"]["hi"]
    assert c["lo"] < c["mean"] < c["hi"] and 0.9 < c["mean"] < 1.1
    assert c["lo"] > 0.5                                  # clearly away from 0
    for a in ("objects", "scene"):
        assert abs(rec[a]["mean"]) < 0.1 and rec[a]["lo"] < 0 < rec[a]["hi"]
    # the t record over the two seeds is kept beside it, hand-computed
    m = [float(np.mean(per_seed[s].loc[per_seed[s]["attribute"] == "cast", "sensitivity"]))
         for s in (0, 1)]
    assert c["seeds"]["mean"] == pytest.approx(np.mean(m))
    assert c["seeds"]["std"] == pytest.approx(np.std(m, ddof=1))
    assert c["seeds"]["n"] == 2


def test_constant_model_scores_zero_everywhere(pairs):
    _, df = pairs
    per_seed = {s: P.pair_sensitivities(df, np.full(len(df), 0.3)) for s in (0, 1, 2)}
    rec = P.summarize_sensitivity(per_seed, n_boot=200)
    for a, r in rec.items():
        assert r["mean"] == 0.0 and r["ci95"] == 0.0 and r["lo"] == r["hi"] == 0.0, a
        assert r["pooled"]["mean"] == 0.0


def test_pair_sensitivity_hand_computed():
    df = pd.DataFrame({"attribute": ["cast"] * 4, "pair": [0, 0, 1, 1],
                       "value": ["female", "male", "male", "female"]})
    s = P.pair_sensitivities(df, [0.1, 0.4, -0.2, 0.3])
    assert s["sensitivity"].tolist() == pytest.approx([0.3, -0.5])
    assert s["out_male"].tolist() == pytest.approx([0.4, -0.2])
    with pytest.raises(ValueError, match="outputs"):
        P.pair_sensitivities(df, [0.1])
    with pytest.raises(ValueError, match="without a (fe)?male image"):
        P.pair_sensitivities(df.iloc[:3], [0.1, 0.2, 0.3])


def test_caption_output_and_classifier_output():
    got = P.caption_output(["A man with a dog", "a woman in a kitchen", "a person",
                            "a man and a woman"])
    assert got.tolist() == [1.0, -1.0, 0.0, 0.0]
    assert P.classifier_output(np.array([0.2, 0.9]), np.array([0.7, 0.1])).tolist() == \
        pytest.approx([0.5, -0.8])


def test_seeds_must_score_the_same_pairs(pairs):
    _, df = pairs
    a = P.pair_sensitivities(df, np.zeros(len(df)))
    with pytest.raises(ValueError, match="other probe pairs"):
        P.summarize_sensitivity({0: a, 1: a.iloc[1:]})
    with pytest.raises(ValueError, match="no seeds"):
        P.summarize_sensitivity({})


def test_blackout_masks_the_same_box_in_both_images(pairs, tmp_path):
    _, df = pairs
    m = P.blackout_probe(df, tmp_path, sources=("box",), dilate_px=2, fill=0)
    assert len(m) == len(df) and (m["masked_fraction"] > 0).all()
    from biaslab.runtime.io import load_image
    for _, g in m.groupby(["attribute", "pair"]):
        a, b = (load_image(p) for p in g["path"])
        black_a, black_b = (a == 0).all(-1), (b == 0).all(-1)
        r = g.iloc[0]
        x0, y0 = int(np.floor(r["x"])) + 1, int(np.floor(r["y"])) + 1
        x1, y1 = int(np.ceil(r["x"] + r["w"])) - 1, int(np.ceil(r["y"] + r["h"])) - 1
        assert black_a[y0:y1, x0:x1].all() and black_b[y0:y1, x0:x1].all()
        assert g["masked_fraction"].nunique() == 1


def test_stage_without_probe_pairs_is_not_available(tiny_coco, tmp_path, monkeypatch):
    from stages import probe as stage
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(
        {"data": {"root": str(tiny_coco)}, "generate": {"backend": "copy_paste"}}))
    monkeypatch.chdir(tmp_path)
    stage.main()
    m = json.loads(open("metrics/probe.json").read())
    assert m["available"] is False and "not available (no planted truth)" in m["reason"]
    assert m["classifier"] == {} and m["backend"] == "copy_paste"


def test_logit_margin_does_not_saturate():
    from biaslab.analysis import probe as P
    # a saturated model: P(man) 0.99 vs 0.999 across a pair moves the probability difference
    # by 0.009 but the logit margin by logit(0.999) - logit(0.99) = 6.9068 - 4.5951 = 2.3116
    pw = np.array([0.5, 0.5])
    pm = np.array([0.99, 0.999])
    d_prob = np.diff(P.classifier_output(pw, pm))[0]
    d_logit = np.diff(P.classifier_logit_output(pw, pm))[0]
    assert d_prob == pytest.approx(0.009)
    assert d_logit == pytest.approx(np.log(0.999 / 0.001) - np.log(0.99 / 0.01))
    assert np.isfinite(P.classifier_logit_output(np.array([0.0]), np.array([1.0]))).all()
