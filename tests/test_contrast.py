"""GenSynth contrast sets (paper 001 sec. 4): the pairing rule by hand, and
stage contrast_set then eval_retrieval on a tiny synthetic workspace (render backend), where
the gender-blind TF-IDF model must read no bias on the balanced-by-construction gallery."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from biaslab.counterfactual.contrast import contrast_counts, contrast_pairs
from tests.test_captioner import _load_stage, _workspace

torch = pytest.importorskip("torch")


def _cands():
    # image 1: both groups accepted (female j=1 first accepted); image 2: only male accepted;
    # image 3: both accepted
    rows = [(1, "female", 0), (1, "female", 1), (1, "male", 0),
            (2, "female", 0), (2, "male", 0),
            (3, "male", 0), (3, "female", 0)]
    c = pd.DataFrame(rows, columns=["image_id", "group", "j"])
    c["path"] = [f"{i}_{g}_{j}.png" for i, g, j in rows]
    return c, [False, True, True, False, True, True, True]


def test_pairs_keep_an_image_only_when_both_groups_pass():
    c, ok = _cands()
    p = contrast_pairs(c, ok)
    assert p[["image_id", "group", "j"]].values.tolist() == [
        [1, "female", 1], [1, "male", 0], [3, "female", 0], [3, "male", 0]]
    assert p.groupby("image_id").size().tolist() == [2, 2]      # balanced by construction
    counts = contrast_counts(c, ok, p)
    assert counts == {"source_images": 3, "candidates": 7,
                      "accepted": {"female": 2, "male": 3}, "accept_fraction": 5 / 7,
                      "pairs": 2, "pair_fraction": 2 / 3}
    with pytest.raises(ValueError, match="6 verdicts for 7"):
        contrast_pairs(c, ok[:6])
    with pytest.raises(ValueError, match="lacks column"):
        contrast_pairs(c.drop(columns=["j"]), ok)
    assert contrast_pairs(c, [False] * 7).empty


def test_contrast_set_and_retrieval_stages_on_a_tiny_workspace(tmp_path, monkeypatch):
    from biaslab.models.clipscorer import LiTScorer, _heads
    monkeypatch.chdir(tmp_path)
    _workspace(tmp_path, n_images=40)
    torch.manual_seed(0)
    cfg = {"image_encoder": "efficientnet_lite0", "image_size": 64, "text_encoder": "minilm",
           "d_img": 1280, "d_txt": 384, "proj_dim": 8}
    LiTScorer(_heads(1280, 384, 8, 0.0, 0.07), cfg).save(tmp_path / "data/scorer")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "data": {"root": str(tmp_path / "data/raw/synthetic")},
        "label": {"words": "lic"}, "eval_captioner": {"gender_source": "caption"},
        "features": {"cache_dir": "data/cache/features"}, "lic": {"num_threads": 1},
        "masks": {"reference_long_side": 640, "area_threshold_px": 10, "dilate_px": 2,
                  "shape": "polygon", "crowd_min_inside": 3},
        "generate": {"backend": "render", "m": 1, "guidance_scales": [7.5], "seed": 0,
                     "shards": 2},
        "filters": {"clip": None, "knn_k": 5, "knn_tau_r": 0.0, "knn_tau_g": 0.0},
        "contrast": {"splits": ["test"], "m": 1},
        "eval_retrieval": {"ks": [2, 4], "scorer": "data/scorer", "n_boot": 200, "seed": 0,
                           "clip_m": 2, "n_balanced": 2, "recall_ks": [1]},
        "classifier": {"blackout": ["box"], "blackout_dilate_px": 2, "blackout_fill": "mean"},
        "spurious": {"clusters": 3, "n_boot": 200, "workers": 1}}))
    _load_stage("contrast_set").main()
    m = json.loads((tmp_path / "metrics/contrast.json").read_text())
    pairs = pd.read_parquet(tmp_path / "data/contrast/pairs.parquet")
    assert m["backend"] == "render" and m["pairs"] == pairs["image_id"].nunique() > 0
    assert (pairs.groupby("image_id")["group"].apply(sorted).map(tuple)
            == ("female", "male")).all()
    assert all((tmp_path / p).exists() for p in pairs["path"])
    split = pd.read_parquet(tmp_path / "data/split.parquet")
    assert set(pairs["image_id"]) <= set(split.loc[split["split"] == "test", "image_id"])
    _load_stage("eval_retrieval").main()
    con = json.loads((tmp_path / "metrics/retrieval.json").read_text())["contrast"]
    assert con["setup"]["n_female"] == con["setup"]["n_male"] == m["pairs"]
    assert con["set"]["pairs"] == m["pairs"]
    # both versions of an image share its captions: TF-IDF ties them, and a top K of whole
    # pairs holds as many women as men (K even)
    for k in con["setup"]["ks"]:
        if k % 2 == 0:
            assert con["tfidf"][f"Bias@{k}"]["mean"] == pytest.approx(0.0, abs=1e-9)
    # stage spurious (paper 001 appendix D) on the same workspace
    _load_stage("spurious").main()
    sp = json.loads((tmp_path / "metrics/spurious.json").read_text())
    assert sp["setup"]["n_contrast_sources"] == m["pairs"]
    assert sp["clusters"]["m"] == 3 and sum(r["n"] for r in sp["clusters"]["rows"]) == \
        sp["clusters"]["n"]
    # both versions share the source's captions: the caption classifier cannot tell them apart
    assert sp["classifiers"]["text"]["contrast"]["mean"] == 0.5
    for name in ("background", "image", "text"):
        r = sp["classifiers"][name]["natural"]
        assert 0 <= r["mean"] <= 1 and r["n"] == sp["setup"]["n_test"]
    scores = pd.read_parquet(tmp_path / "data/spurious/scores.parquet")
    assert (scores["set"] == "contrast").sum() == 2 * m["pairs"]
    assert (tmp_path / "plots/spurious_clusters.csv").read_text().startswith("cluster,label,n,")


@pytest.mark.parametrize("bad", [{"m": 0}, {"splits": []}, {"splits": ["dev"]},
                                 {"generate": {"backend": "dall-e"}}, {"generate": "sd"},
                                 {"editor": "x"}])
def test_contrast_set_rejects_bad_params_before_reading(tmp_path, monkeypatch, bad):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"contrast": bad}))
    from biaslab.runtime.io import ParamsError
    # load_params checks the group (biaslab.runtime.validate); run as a script, the stage exits 2
    with pytest.raises(ParamsError, match=r"params.yaml: contrast\."):
        _load_stage("contrast_set").main()
    assert list(tmp_path.iterdir()) == [tmp_path / "params.yaml"]


def test_contrast_set_writes_skip_records_without_captions(tmp_path, monkeypatch):
    """OpenImages (no captions): both DVC outs exist as skip records, so the run goes on."""
    from biaslab.runtime.io import is_skipped, write_parquet
    monkeypatch.chdir(tmp_path)
    write_parquet(tmp_path / "data/prepared/captions.parquet",
                  pd.DataFrame({"image_id": pd.Series(dtype="int64"),
                                "caption": pd.Series(dtype="object")}))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"contrast": {"splits": ["test"],
                                                                       "m": 1}}))
    _load_stage("contrast_set").main()
    assert is_skipped(tmp_path / "metrics/contrast.json")
    assert is_skipped(tmp_path / "data/contrast")


def test_the_contrast_stage_reads_its_group_through_typed_settings():
    """``ContrastSettings`` holds group ``contrast``'s defaults (paper 001 sec. 4: the test
    split, one version per group); a null ``generate`` is no override; a wrong type or an
    unknown key is named."""
    from biaslab.counterfactual.contrast import ContrastSettings
    assert ContrastSettings.from_params({}) == ContrastSettings(("test",), 1, {}, 2)
    s = ContrastSettings.from_params({"contrast": {"splits": ["val", "test"], "m": 2,
                                                   "generate": None, "workers": 1}})
    assert (s.splits, s.m, s.generate, s.workers) == (("val", "test"), 2, {}, 1)
    with pytest.raises(ValueError, match="contrast.m must be int"):
        ContrastSettings.from_params({"contrast": {"m": "two"}})
    with pytest.raises(ValueError, match=r"contrast: unknown key\(s\) \['mm'\]"):
        ContrastSettings.from_params({"contrast": {"mm": 2}})
