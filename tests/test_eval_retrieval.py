"""Stage eval_retrieval (Bias@K / MaxSkew@K of the CLIP-style scorer, paper 001 sec. 5) on a
tiny synthetic workspace with an untrained LiT scorer."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.test_captioner import _load_stage, _workspace

torch = pytest.importorskip("torch")


def test_eval_retrieval_stage(tmp_path, monkeypatch):
    from biaslab.models.clipscorer import LiTScorer, _heads
    from biaslab.data.gender import caption_gender
    monkeypatch.chdir(tmp_path)
    _tabs, _li, split = _workspace(tmp_path, n_images=30)
    torch.manual_seed(0)
    cfg = {"image_encoder": "efficientnet_lite0", "image_size": 64, "text_encoder": "minilm",
           "d_img": 1280, "d_txt": 384, "proj_dim": 8}
    LiTScorer(_heads(1280, 384, 8, 0.0, 0.07), cfg).save(tmp_path / "data/scorer")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "label": {"words": "lic"}, "eval_captioner": {"gender_source": "caption"},
        "features": {"cache_dir": "data/cache/features"}, "lic": {"num_threads": 1},
        "eval_retrieval": {"ks": [2, 5], "scorer": "data/scorer", "n_boot": 200, "seed": 0,
                           "clip_m": 2, "n_balanced": 3, "recall_ks": [1, 5]}}))
    _load_stage("eval_retrieval").main()
    out = json.loads((tmp_path / "metrics/retrieval.json").read_text())
    assert set(out) == {"scorer", "clip_clip", "tfidf", "random", "balanced", "recall",
                        "differences", "contrast", "setup"}
    assert "no contrast set" in out["contrast"]["note"]      # stage contrast_set did not run
    assert set(out["differences"]) == {"tfidf-random", "clip_clip-scorer"}
    test_ids = set(split.loc[split["split"] == "test", "image_id"])
    caps = _tabs["captions"][_tabs["captions"]["image_id"].isin(test_ids)]
    n_q = sum(caption_gender(c) in ("female", "male") for c in caps["caption"])
    s = out["setup"]
    assert s["n_queries"] == n_q and s["n_gallery"] == len(test_ids)
    assert s["n_female"] + s["n_male"] + s["n_undefined"] == len(test_ids)
    assert s["gender_source"] == "caption" and s["ks"] == [2, 5]
    assert s["clip_m"] == 2 and s["embedding_dim"] == 8 and s["n_balanced"] == 3
    for row in ("scorer", "clip_clip", "tfidf", "random"):
        assert set(out[row]) == {"Bias@2", "MaxSkew@2", "Bias@5", "MaxSkew@5"}
        b = out[row]["Bias@5"]
        assert -1 <= b["mean"] <= 1 and b["n"] == n_q and b["lo"] <= b["mean"] <= b["hi"]
        assert out[row]["MaxSkew@5"]["mean"] >= 0
    for row in ("scorer", "clip_clip", "tfidf", "random"):
        b = out["balanced"][row]["Bias@2"]
        assert b["n"] == 3 and -1 <= b["mean"] <= 1, b
    for row in ("scorer", "clip_clip", "tfidf"):
        r1, r5 = out["recall"][row]["R@1"]["mean"], out["recall"][row]["R@5"]["mean"]
        assert 0 <= r1 <= r5 <= 1
    # the TF-IDF model ranks by the images' own captions: it finds a query's image far more
    # often than chance (1 / gallery size)
    assert out["recall"]["tfidf"]["R@1"]["mean"] > 3 / len(test_ids)


@pytest.mark.parametrize("bad", [{"clip_m": -1}, {"n_balanced": 0}, {"ks": []},
                                 {"recall_ks": [0]}, {"n_boot": 10}])
def test_eval_retrieval_rejects_bad_params_before_reading(tmp_path, monkeypatch, bad):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"eval_retrieval": bad}))
    from biaslab.runtime.io import ParamsError
    # load_params checks the group (biaslab.runtime.validate); run as a script, the stage exits 2
    with pytest.raises(ParamsError, match=r"params.yaml: eval_retrieval\."):
        _load_stage("eval_retrieval").main()
    assert list(tmp_path.iterdir()) == [tmp_path / "params.yaml"]
