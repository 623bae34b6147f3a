"""The five LIBRA stage scripts end to end on a tiny generated dataset (LSTM classifier, tiny T5,
tiny DCG, precomputed random image features), checking their outputs and metrics."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from biaslab.models.features import save_features
from biaslab.runtime.io import write_parquet

REPO = Path(__file__).resolve().parents[1]

WHO = {"female": ["woman", "girl", "lady"], "male": ["man", "boy", "guy"]}
CONTEXT = {"female": ["cooking in a kitchen", "holding an umbrella", "shopping at a market"],
           "male": ["riding a skateboard", "surfing a big wave", "playing baseball"]}


def _stage(name):
    spec = importlib.util.spec_from_file_location(f"stage_{name}", REPO / "stages" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """60 images x 5 captions with a planted gender-context correlation (80%)."""
    d = tmp_path_factory.mktemp("libra")
    rng = np.random.default_rng(0)
    caps, imgs, split = [], [], []
    cid = 0
    for iid in range(60):
        g = "female" if iid % 2 else "male"
        ctx_g = g if rng.random() < 0.8 else ("male" if g == "female" else "female")
        for k in range(5):
            who = WHO[g][rng.integers(3)] if k < 4 else "person"
            ctx = CONTEXT[ctx_g][rng.integers(3)]
            caps.append((cid, iid, f"A {who} {ctx} on a sunny day."))
            cid += 1
        imgs.append((iid, g))
        split.append((iid, "train" if iid < 40 else "val" if iid < 46 else "test", g))
    cap_df = pd.DataFrame(caps, columns=["caption_id", "image_id", "caption"])
    from biaslab.data.labels import label_captions
    write_parquet(d / "labels" / "captions.parquet", label_captions(cap_df, "lic"))
    write_parquet(d / "labels" / "images.parquet", pd.DataFrame(
        [(i, g, 4 * (g == "female"), 4 * (g == "male"), 0, 1) for i, g in imgs],
        columns=["image_id", "gender", "n_female", "n_male", "n_both", "n_none"]))
    write_parquet(d / "split.parquet", pd.DataFrame(split, columns=["image_id", "split",
                                                                    "gender"]))
    feats = rng.normal(size=(60, 12)).astype(np.float32)
    feats[:, 0] += np.array([2.0 if g == "female" else -2.0 for _, g in imgs])
    save_features(d / "features" / "images", np.arange(60), feats)
    params = {"features": {"backbone": "efficientnet_lite0", "image_size": 224},
              "libra": {
                  "words": "libra", "seed": 0, "threads": 1, "max_train_captions": 150,
                  "classifier": {"model": "lstm", "epochs": 3, "embedding_dim": 16,
                                 "hidden_dim": 16, "val_fraction": 0.2},
                  "auth_classifier": None, "auth_max_train": 100,
                  "t5": {"model": "tiny", "d_model": 32, "d_ff": 64, "layers": 1, "heads": 2,
                         "d_kv": 16, "epochs": 2, "pretrain_epochs": 1, "batch_size": 32,
                         "max_val_captions": 20},
                  "mask_rate": 0.15, "alpha": 0.3, "delta": 0.0,
                  "mix": {"swap": 1, "t5": 1, "merged": 1}, "target_count": None,
                  "samples_per_caption": 2, "top_k": 20, "pos": "wordnet",
                  "dcg": {"hidden": 32, "layers": 1, "heads": 2, "epochs": 2,
                          "n_image_tokens": 2, "min_count": 1},
                  "dcg_val_fraction": 0.2, "dcg_eval_max": 20,
                  "apply": {"pred": None, "num_beams": 1, "max_images": 10}}}
    (d / "params.yaml").write_text(yaml.safe_dump(params))
    return d


def _args(d, *pairs):
    return ["--params", str(d / "params.yaml")] + [str(x) for p in pairs for x in p]


def test_libra_chain(workdir, monkeypatch):
    d = workdir
    monkeypatch.chdir(d)    # run statistics go to ./benchmarks/runs/ (biaslab.runtime.runstats)
    lab = ("--captions", d / "labels" / "captions.parquet")
    spl = ("--split", d / "split.parquet")
    _stage("bcs_classifier").main(_args(d, lab, spl, ("--out", d / "f_g"),
                                        ("--metrics", d / "m" / "clf.json")))
    clf = json.loads((d / "m" / "clf.json").read_text())
    assert clf["n_D"] == 150 and clf["n_balanced"] % 2 == 0 and clf["classifier"] == "lstm"

    _stage("t5_finetune").main(_args(d, lab, spl, ("--out", d / "t5"),
                                     ("--metrics", d / "m" / "t5.json"),
                                     ("--live", d / "live" / "t5")))
    t5m = json.loads((d / "m" / "t5.json").read_text())
    for k in ("masked_word_accuracy", "baseline_accuracy", "content_masked_word_accuracy",
              "content_baseline_accuracy"):
        assert t5m[k] is not None, k
    run = json.loads((d / "benchmarks/runs/t5_finetune.json").read_text())
    assert run["train_tokens_per_s"] > 0 and not {"train_seconds", "train_tokens_per_s"} & set(t5m)
    assert (d / "live" / "t5" / "metrics.json").exists()
    # the DVCLive directory is an out: no throughput in it (same inputs -> same bytes)
    assert not list((d / "live" / "t5").rglob("*tokens_per_s*"))

    _stage("bcs_synthesize").main(_args(d, lab, spl, ("--f-g", d / "f_g"), ("--t5", d / "t5"),
                                        ("--out", d / "libra"),
                                        ("--metrics", d / "m" / "bcs.json"),
                                        ("--samples", d / "samples.md")))
    bm = json.loads((d / "m" / "bcs.json").read_text())
    synth = pd.read_parquet(d / "libra" / "synthesized.parquet")
    assert {"image_id", "original", "biased", "type"} <= set(synth.columns)
    assert bm["total"] == len(synth) and bm["n_D"] == 150
    assert "seconds" not in bm and "t5_generation_captions_per_s" not in bm
    assert json.loads((d / "benchmarks/runs/bcs_synthesize.json").read_text())["seconds"]["total"] > 0
    assert set(bm["removed_fraction"]) >= {"trivial_synonym", "F_GW", "authenticity_F_AF",
                                           "gender_filter_F_GF"}
    assert (d / "samples.md").read_text().startswith("# LIBRA")
    if len(synth) == 0:
        pytest.skip("the tiny chain synthesized nothing this time")
    _stage("dcg_train").main(_args(d, ("--synth", d / "libra" / "synthesized.parquet"),
                                   ("--features", d / "features" / "images"),
                                   ("--images", d / "none.parquet"),
                                   ("--out", d / "dcg"), ("--metrics", d / "m" / "dcg.json"),
                                   ("--live", d / "live" / "dcg")))
    dm = json.loads((d / "m" / "dcg.json").read_text())
    assert dm["n_train"] + dm["n_val"] == len(synth) and np.isfinite(dm["final_loss"])
    assert not list((d / "live" / "dcg").rglob("*per_s*"))
    _stage("dcg_apply").main(_args(d, ("--model", d / "dcg"),
                                   ("--features", d / "features" / "images"),
                                   ("--images", d / "none.parquet"),
                                   ("--labels", d / "labels" / "images.parquet"), lab, spl,
                                   ("--out", d / "apply"),
                                   ("--metrics", d / "m" / "apply.json")))
    am = json.loads((d / "m" / "apply.json").read_text())
    assert am["human"]["n"] == 10 and am["swapped"]["before"]["wrong"] == 1.0
    res = json.loads((d / "apply" / "debiased_swapped.json").read_text())
    assert len(res) == 10 and {"image_id", "caption"} == set(res[0])


def test_error_change_paired_hand_computed():
    """3 labelled images: one fixed (-100), one broken (+100), one fixed (-100), one
    unlabelled left out: mean -33.3, t CI over the 3 values."""
    from biaslab.metrics.captions import error, error_change
    labels = {1: "female", 2: "male", 3: "male", 4: None}
    before = {1: "a man on a beach", 2: "a man in a kitchen", 3: "a woman cooking", 4: "a man"}
    after = {1: "a woman on a beach", 2: "a woman in a kitchen", 3: "a man cooking", 4: "a woman"}
    ch = error_change(before, after, labels, "lic")
    assert ch["n"] == 3 and ch["mean"] == pytest.approx(-100 / 3)
    lab = {i: g for i, g in labels.items() if g}
    assert ch["mean"] == pytest.approx(error({i: after[i] for i in lab}, lab)
                                       - error({i: before[i] for i in lab}, lab))
    # t_{0.975, 2} = 4.3027, s = 115.47: half-width 286.8
    assert ch["hi"] - ch["mean"] == pytest.approx(4.302653 * 115.4701 / 3 ** 0.5, rel=1e-4)
    # a neutral caption is not wrong: "a person" -> "a man" on a man's image changes nothing
    assert error_change({2: "a person", 3: "a man"}, {2: "a man", 3: "a man"}, labels,
                        "lic")["mean"] == 0.0


def test_context_reader_captions_follow_the_planted_context(tmp_path):
    """A hand-written planted truth (not the generator's): image 1 is a woman in a
    male-associated context (field, cool cast, a tie), image 2 a man in the same context,
    image 3 a man in a female-associated one, image 4 has no evidence (b = 0.8, one object of
    each side, a female scene and a male cast). The control names the context's gender, person
    ignored, and no gender where the evidence ties; no truth, no control."""
    import csv
    from biaslab.data import synthetic as S
    mod = _stage("dcg_apply")
    labels = {1: "female", 2: "male", 3: "male", 4: "female"}
    assert mod.context_reader_captions(str(tmp_path), [1, 2, 3, 4], labels, 0) is None
    (tmp_path / "annotations").mkdir()
    with open(tmp_path / "annotations" / "synth_truth.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image_id", "gender", "scene", "cast", "objects"])
        w.writerows([(1, "female", "field", "cool", "tie"), (2, "male", "field", "cool", "tie"),
                     (3, "male", "kitchen", "warm", "handbag;cup"),
                     (4, "female", "beach", "cool", "tie;umbrella")])
    (tmp_path / S.PARAMS_FILE).write_text(json.dumps(
        {"params": {"bias": 0.8}, "render_version": S.RENDER_VERSION}))
    caps = mod.context_reader_captions(str(tmp_path), [1, 2, 3, 4, 5], labels, 0)
    from biaslab.data.gender import caption_gender
    assert sorted(caps) == [1, 2, 3, 4]                   # 5: not in the truth
    assert [caption_gender(caps[i], "lic") for i in (1, 2, 3)] == ["male", "male", "female"]
    assert caption_gender(caps[4], "lic") not in ("female", "male")
    # the cast reader: cool -> man, warm -> woman, whatever the objects and scene say
    cast = mod.context_reader_captions(str(tmp_path), [1, 2, 3, 4], labels, 0, ("cast",))
    assert [caption_gender(cast[i], "lic") for i in (1, 2, 3, 4)] == \
        ["male", "male", "female", "male"]
