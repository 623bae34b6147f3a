"""ClipCap-style captioner (biaslab/captioning/) and its stages (train_captioner,
eval_captioner)."""
import importlib.util
import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from biaslab.captioning import clipcap, data, evaluation, tokens, training
from biaslab.runtime import runstats
from biaslab.runtime.io import InputError, without_run_stats
from tests.conftest import REPO

torch = pytest.importorskip("torch")

#: a toy "image" -> caption mapping: 4 feature clusters, each with its own captions
TOY = {0: ["a red square on a table", "a red square"],
       1: ["a blue circle on the floor", "a blue circle"],
       2: ["a woman with an umbrella", "a woman holding an umbrella"],
       3: ["a man with a skateboard", "a man riding a skateboard"]}


def _toy(n_per=6, dim=16, seed=0):
    """(feats (n, dim), captions, caption rows, cluster of each image)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 3, (len(TOY), dim)).astype(np.float32)
    feats, cluster = [], []
    for k in TOY:
        for _ in range(n_per):
            feats.append(centers[k] + rng.normal(0, 0.3, dim).astype(np.float32))
            cluster.append(k)
    caps, rows = [], []
    for r, k in enumerate(cluster):
        for c in TOY[k]:
            caps.append(c)
            rows.append(r)
    return np.stack(feats), caps, np.array(rows), np.array(cluster)


def _cfg(**kw):
    base = dict(layers=1, d_model=32, heads=2, prefix_len=2, max_len=8, epochs=40, lr=3e-3,
                batch_size=16, patience=5, beam=2, dropout=0.0, min_count=1, warmup=0.05)
    return clipcap.CaptionerConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def toy_model():
    feats, caps, rows, cluster = _toy()
    model, hist = clipcap.train_captioner(feats, caps, rows, feats, caps, rows, _cfg())
    return model, hist, feats, cluster


# --------------------------------------------------------------------------------- tokenizer
def test_tokenizer_round_trip():
    caps = ["A woman holding an umbrella.", "a man riding a skateboard", "A woman, a man."]
    tok = tokens.build_tokenizer(caps, min_count=1)
    assert [tok.convert_ids_to_tokens(i) for i in range(3)] == [tokens.PAD, tokens.UNK, tokens.EOS]
    assert tok.pad_token_id == 0 and tok.eos_token_id == 2
    for c in caps:
        ids = tok(c, add_special_tokens=False)["input_ids"]
        assert tokens.UNK not in tok.convert_ids_to_tokens(ids)
        assert tokens.tidy_tokens(tok.decode(ids)) == c.lower()
    ids = tok("a woman with a giraffe", add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["a", "woman", tokens.UNK, "a", tokens.UNK]
    # min_count drops rare words
    assert "umbrella" not in tokens.build_tokenizer(caps, min_count=2).get_vocab()


def test_tidy_rejoins_punctuation_and_clitics():
    assert tokens.tidy_tokens("a woman ' s bag , on a table .") == "a woman's bag, on a table."


# --------------------------------------------------------------------------------- model
def test_forward_backward_shapes():
    feats, caps, rows, _ = _toy(n_per=2, dim=16)
    cfg = _cfg(prefix_len=3)
    torch.manual_seed(0)
    cap = clipcap.build_captioner(cfg, caps, feature_dim=16)
    x = torch.from_numpy(feats[:3])
    assert cap.model.prefix(x).shape == (3, 3, 32)
    ids = cap.encode_captions(caps[:3])
    assert all(s[-1] == cap.tokenizer.eos_token_id for s in ids)
    inp, att = training.pad(ids, cap.tokenizer.pad_token_id)
    lsum, n = cap.model.token_losses(x, inp, att)
    assert lsum.ndim == 0 and n == sum(len(s) for s in ids)
    assert math.isfinite(float(lsum.detach())) and float(lsum.detach()) / n > 0
    lsum.backward()
    assert cap.model.mapper[0].weight.grad is not None
    assert cap.model.decoder.get_input_embeddings().weight.grad is not None
    assert float(cap.model.mapper[0].weight.grad.abs().sum()) > 0


def test_truncation_to_max_len():
    cap = clipcap.build_captioner(_cfg(max_len=3), ["a b c d e f"], feature_dim=4)
    (ids,) = cap.encode_captions(["a b c d e f"])
    assert len(ids) == 4 and ids[-1] == cap.tokenizer.eos_token_id


def test_training_learns_the_toy_mapping(toy_model):
    model, hist, feats, cluster = toy_model
    assert hist[-1]["train_loss"] < hist[0]["train_loss"] / 3
    assert model.meta["best_epoch"] >= 0 and model.meta["n_train_captions"] == 48
    out = model.generate(feats)
    ok = [o in TOY[k] for o, k in zip(out, cluster)]
    assert np.mean(ok) >= 0.9, list(zip(out, cluster))


def test_beam_search_is_bounded_and_deterministic(toy_model):
    model, _, feats, _ = toy_model
    for beam in (1, 3):
        a = model.generate(feats, beam=beam, max_len=3)
        b = model.generate(feats, beam=beam, max_len=3)
        assert a == b
        assert all(isinstance(s, str) and len(s.split()) <= 3 for s in a)
    # the same seed gives the same model, hence the same captions
    f, caps, rows, _ = _toy(n_per=2)
    m1, _ = clipcap.train_captioner(f, caps, rows, config=_cfg(epochs=2, seed=3))
    m2, _ = clipcap.train_captioner(f, caps, rows, config=_cfg(epochs=2, seed=3))
    assert m1.generate(f) == m2.generate(f)
    with pytest.raises(ValueError, match="features must be"):
        model.generate(np.zeros((2, 5), np.float32))


def test_save_load_round_trip(toy_model, tmp_path):
    model, _, feats, _ = toy_model
    d = model.save(tmp_path / "m")
    assert (d / clipcap.CONFIG_FILE).is_file() and (d / "decoder").is_dir()
    loaded = clipcap.Captioner.load(d)
    assert loaded.config == model.config and loaded.meta == without_run_stats(model.meta)
    assert loaded.generate(feats) == model.generate(feats)
    caps = [c for k in TOY for c in TOY[k]]
    f = np.repeat(feats[::6], 2, axis=0)
    assert loaded.loss(f, caps) == pytest.approx(model.loss(f, caps), rel=1e-6)
    with pytest.raises(InputError, match="not a saved captioner"):
        clipcap.Captioner.load(tmp_path)


def test_pretrained_decoder_path_with_a_local_directory(tmp_path):
    """The paper-tier code path (``decoder`` = a Hugging Face name or directory, its own
    tokenizer, captions after a leading space) with a small GPT-2 saved locally."""
    from transformers import GPT2Config, GPT2LMHeadModel
    feats, caps, rows, cluster = _toy(n_per=3)
    tok = tokens.build_tokenizer(caps, min_count=1)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=32, n_embd=32, n_layer=1,
                               n_head=2)).save_pretrained(tmp_path / "lm")
    tok.save_pretrained(tmp_path / "lm")
    cfg = _cfg(decoder=str(tmp_path / "lm"), epochs=30)
    model, _ = clipcap.train_captioner(feats, caps, rows, config=cfg)
    out = model.generate(feats)
    assert np.mean([o in TOY[k] for o, k in zip(out, cluster)]) >= 0.75, out
    assert clipcap.Captioner.load(model.save(tmp_path / "m")).generate(feats) == out
    with pytest.raises(InputError, match="cannot load the decoder"):
        clipcap.build_captioner(_cfg(decoder=str(tmp_path / "no-such-model")), feature_dim=4)


def test_config_validation():
    cfg = clipcap.config_from_params({"layers": 3, "datasets": ["original"], "seeds": [0]}, seed=4)
    assert cfg.layers == 3 and cfg.seed == 4
    with pytest.raises(ValueError, match="divisible"):
        clipcap.config_from_params({"d_model": 30, "heads": 4})
    with pytest.raises(ValueError, match="beam"):
        clipcap.config_from_params({"beam": 0})


# --------------------------------------------------------------------------------- plumbing
def test_manifest_tables_key_counterfactuals_by_path():
    m = pd.DataFrame({
        "sample_id": ["1", "1#1", "1:male:0", "2"], "image_id": [1, 1, 1, 2],
        "path": ["a.png", "a.png", "cf/a_m.png", "b.png"], "gender": ["female"] * 3 + ["male"],
        "captions": [["a woman"], ["a woman"], ["a man", "he"], ["a man"]],
        "objects": [[]] * 4, "counterfactual": [False, False, True, False]})
    t = data.manifest_image_table(m)
    assert list(t["path"]) == ["a.png", "cf/a_m.png", "b.png"]
    assert t["image_id"].iloc[0] == 1 and t["image_id"].iloc[2] == 2
    assert t["image_id"].iloc[1] < 0 and t["image_id"].iloc[1] == data.path_id("cf/a_m.png")
    caps, rows = data.manifest_samples(m, t)
    assert caps == ["a woman", "a woman", "a man", "he", "a man"]   # over-sampled row repeats
    assert rows.tolist() == [0, 0, 1, 1, 2]


def test_seed_records_count_infinite_and_missing_seeds():
    rows = [{"LIC": 1.0, "Ratio": math.inf, "Error": None},
            {"LIC": 3.0, "Ratio": 2.0, "Error": 4.0},
            {"LIC": 5.0, "Ratio": 1.0, "Error": 6.0}]
    s = evaluation.seed_records(rows, keys=("LIC", "Ratio", "Error"), seeds=[0, 1, 2])
    # LIC: mean 3, sample std 2, ci95 = t(0.975, 2) * 2 / sqrt(3) = 4.3027 * 1.1547
    assert s["LIC"]["mean"] == pytest.approx(3.0) and s["LIC"]["std"] == pytest.approx(2.0)
    assert s["LIC"]["ci95"] == pytest.approx(4.302653 * 2 / math.sqrt(3), rel=1e-5)
    # an infinite Ratio seed is counted, never dropped: no finite mean
    assert s["Ratio"]["n_inf"] == 1 and s["Ratio"]["n"] == 3 and s["Ratio"]["mean"] is None
    # a missing Error seed is left out and counted
    assert s["Error"]["n_missing"] == 1 and s["Error"]["mean"] == pytest.approx(5.0)
    assert s["per_seed"][0] == {"seed": 0, "LIC": 1.0, "Ratio": "inf", "Error": None}
    json.dumps(s, allow_nan=False)                      # strict JSON
    with pytest.raises(ValueError):
        evaluation.seed_records(rows, seeds=[0])


def test_caption_metrics_keep_an_infinite_ratio_and_name_error_Error():
    preds = {1: "a man on a bike", 2: "a man in a kitchen", 3: "a man with a dog"}
    genders = {1: "male", 2: "female", 3: "male"}
    flat, det = evaluation.caption_metrics(preds, genders, {}, metrics=("ratio", "error"))
    assert flat["Ratio"] == math.inf                   # never says "woman": r = inf
    assert flat["Error"] == pytest.approx(100 / 3)     # image 2 called a man
    assert "error" not in flat and flat["DBA_G"] is None and flat["LIC"] is None
    flat, det = evaluation.caption_metrics(preds, genders, {}, metrics=("ratio",),
                                  image_objects={1: ["bicycle"], 2: ["oven"], 3: ["dog"]})
    assert det["DBA"]["n_images"] == 3 and det["DBA"]["n_objects"] == 3
    assert flat["DBA_O"] is not None and flat["DBA_G"] is not None


def test_caption_metrics_report_captions_without_gender_words_and_length():
    """Beside Ratio, the % of gender-labelled images whose caption names no
    gender (a caption with both genders names one, so it is not counted) and the mean tokens
    per caption over every prediction (the unlabelled image 4 too)."""
    preds = {1: "a man on a bike", 2: "kitchen.", 3: "a man and a woman", 4: "a dog"}
    genders = {1: "male", 2: "female", 3: "male", 4: "unsure"}
    flat, _ = evaluation.caption_metrics(preds, genders, {}, metrics=("ratio",))
    assert flat["no_gender_word"] == pytest.approx(100 / 3)     # image 2 of 1, 2, 3
    assert flat["length"] == pytest.approx((5 + 1 + 5 + 2) / 4)
    assert {"no_gender_word", "length"} <= set(evaluation.METRICS)


def test_gender_labels_one_source():
    per = pd.DataFrame({"image_id": [1, 2, 3], "perceived_gender": ["female", "male", "unsure"]})
    cap = pd.DataFrame({"image_id": [1, 2, 4], "gender": ["male", "male", "female"]})
    assert evaluation.gender_labels("auto", per, cap) == ({1: "female", 2: "male"}, "perceived")
    assert evaluation.gender_labels("caption", per, cap) == ({1: "male", 2: "male", 4: "female"},
                                                    "caption")
    empty = per.iloc[:0]
    assert evaluation.gender_labels("auto", empty, cap)[1] == "caption"
    assert evaluation.gender_labels("auto", None, cap)[1] == "caption"
    with pytest.raises(InputError, match="perceived"):
        evaluation.gender_labels("perceived", empty, cap)
    with pytest.raises(InputError, match="gender_source"):
        evaluation.gender_labels("crowd", per, cap)


def test_clip_score_for_uses_cached_features_with_a_lit_scorer():
    class FakeLiT:
        config = {"type": "lit", "d_img": 4, "prefix_prob": 0.0}

        def encode_images(self, x):
            assert isinstance(x, np.ndarray)
            return np.eye(4, dtype=np.float32)[:len(x)]

        def encode_texts(self, texts):
            assert not texts[0].startswith("A photo")   # no prefix: the scorer never saw one
            return np.eye(4, dtype=np.float32)[:len(texts)]

    assert evaluation.clip_score_for(FakeLiT(), ["a", "b"], image_feats=np.zeros((2, 4))) == \
        pytest.approx(250.0)


# --------------------------------------------------------------------------------- stages
def _load_stage(name):
    spec = importlib.util.spec_from_file_location(f"stage_{name}", REPO / "stages" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _workspace(root: Path, n_images=40, bias=0.5, size=64):
    """A pipeline working directory: synthetic COCO -> prepared/labels/split/datasets tables."""
    from biaslab.data import datasets as D
    from biaslab.data import synthetic
    from biaslab.data.coco import read_coco
    from biaslab.runtime.io import write_parquet
    from biaslab.data.labels import label_captions, label_images, stratified_split
    synthetic.generate(root / "data/raw/synthetic", n_images=n_images, bias=bias, seed=0,
                       image_size=size)
    tabs, _ = read_coco("data/raw/synthetic", progress=False)
    for k, v in tabs.items():
        write_parquet(root / f"data/prepared/{k}.parquet", v)
    lc = label_captions(tabs["captions"])
    li = label_images(lc)
    split = stratified_split(li, {"train": 0.6, "val": 0.2, "test": 0.2}, seed=0)
    write_parquet(root / "data/labels/images.parquet", li)
    write_parquet(root / "data/split.parquet", split)
    d = D.original(tabs["images"], tabs["captions"], tabs["objects"], li, split)
    write_parquet(root / "data/datasets/original.parquet", d)
    write_parquet(root / "data/datasets/oversample.parquet", D.oversample(d))
    return tabs, li, split


def test_stages_train_and_eval_smoke(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _workspace(tmp_path)
    params = {
        "label": {"words": "lic"},
        "features": {"backbone": "efficientnet_lite0", "image_size": 64,
                     "cache_dir": "data/cache/features"},
        "lic": {"classifier": "lstm", "preset": "ci", "seeds": 1, "num_threads": 1},
        "captioner": {"decoder": "tiny", "layers": 1, "d_model": 32, "heads": 2,
                      "prefix_len": 2, "max_len": 12, "epochs": 2, "lr": 0.003,
                      "batch_size": 32, "patience": 2, "beam": 2, "num_threads": 1,
                      "seeds": [0], "datasets": ["original", "oversample"]},
        "eval_captioner": {"biasamp_min_count": 1},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    train = _load_stage("train_captioner")
    for ds in ("original", "oversample"):
        train.main(["--dataset", ds, "--seed", "0"])
        model_dir = tmp_path / f"data/models/captioner/{ds}/{ds}-0"
        assert (model_dir / clipcap.CONFIG_FILE).is_file()
        live = json.loads((tmp_path / f"dvclive/captioner/{ds}/{ds}-0/metrics.json").read_text())
        assert live["epochs_run"] == 2 and "val" in live
        assert runstats.split(live)[1] == {}, live      # wall times: benchmarks/runs/
        assert (tmp_path / f"benchmarks/runs/train_captioner/{ds}-0.json").exists()
    _tiny_dcg(tmp_path, image_size=64)
    _load_stage("eval_captioner").main()
    split = pd.read_parquet(tmp_path / "data/split.parquet")
    n_test = int(((split["split"] == "test") & split["gender"].isin(["female", "male"])).sum())
    res = json.loads((tmp_path / "data/captions/original-0.json").read_text())
    assert len(res) == n_test and all(isinstance(r["caption"], str) for r in res)
    metrics = json.loads((tmp_path / "metrics/captioning.json").read_text())
    assert list(metrics) == ["original", "original+LIBRA", "oversample", "test_set"]
    deb = json.loads((tmp_path / "data/captions/original+LIBRA-0.json").read_text())
    assert [r["image_id"] for r in deb] == [r["image_id"] for r in res]
    ts = metrics.pop("test_set")
    assert ts["n_female"] + ts["n_male"] == ts["n_images"] == n_test
    assert ts["gender_source"] == "perceived"          # the synthetic source has crowd-style labels
    assert ts["gender_source_param"] == "auto"
    assert ts["biasamp_reference"] == "train" and ts["n_reference_captions"] > 0
    for m in metrics.values():
        assert set(m) == set(evaluation.METRICS) | {"per_seed"}
        assert m["METEOR"]["n"] == 1 and m["METEOR"]["mean"] is not None
        assert m["CIDEr"]["mean"] is not None
        assert m["CLIPScore"]["mean"] is None and m["CLIPScore"]["n_missing"] == 1  # no scorer
        assert [r["seed"] for r in m["per_seed"]] == [0]
    rows = (tmp_path / "plots/captioning.csv").read_text().splitlines()
    assert rows[0].split(",")[:3] == ["dataset", "METEOR_mean", "METEOR_ci95"]
    assert len(rows) == 4
    ev = json.loads((tmp_path / "data/captions/eval.json").read_text())
    assert "skipped" in ev["notes"]["CLIPScore"] and "original+LIBRA" not in ev["notes"]
    assert set(ev["models"]) == {"original-0", "original+LIBRA-0", "oversample-0"}
    # a cached out: no wall times, or identical inputs would give different bytes
    assert runstats.split(ev)[1] == {}
    assert (tmp_path / "benchmarks/runs/eval_captioner.json").exists()


def _tiny_dcg(root: Path, image_size: int) -> None:
    """A barely trained LIBRA DCG at data/libra/dcg (exercises the +LIBRA hook)."""
    from biaslab.libra import dcg as L
    m = pd.read_parquet(root / "data/datasets/original.parquet")
    t = data.manifest_image_table(m)
    caps, rows = data.manifest_samples(m, t)
    f = data.image_features(t, root / "data/cache/features", image_size=image_size)
    s = L.DCGSettings(epochs=1, hidden=32, layers=1, heads=2, image_size=image_size,
                      num_threads=1)
    L.save(L.train_dcg(caps, caps, f[rows], s, seed=0), root / "data/libra/dcg")


def test_eval_stage_names_a_missing_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _workspace(tmp_path, n_images=12)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "lic": {"classifier": "lstm", "preset": "ci", "seeds": 1},
        "captioner": {"seeds": [0], "datasets": ["original"]}}))
    with pytest.raises(InputError, match=r"original-0"):
        _load_stage("eval_captioner").main()


# --------------------------------------------------------------------------------- science
def _gender_word_share(captions, words="lic"):
    from biaslab.data.gender import caption_gender
    return float(np.mean([caption_gender(c, words) in ("female", "male") for c in captions]))


@pytest.mark.slow
def test_synthetic_truth_captioner_learns_and_bias_grows(tmp_path):
    """Tiny captioner on synthetic data with planted bias 0 vs 0.9 (known truth).

    Asserted: it learns (gender and scene words in its captions; CIDEr and BLEU-4 far above a
    random-training-caption baseline) at both biases, and LIC_M (gender-predictiveness of its
    masked captions) is higher at bias 0.9, where the scenes and objects it names are
    gender-correlated. Ratio, Error, LIC and BiasAmp are printed, not asserted (see the report
    in the docstring of ``_synthetic_run``): the synthetic person's gender is visible in the
    pixels and, on a test set drawn with the same bias, context *helps* guess it, so Error is
    not expected to grow with the bias there; the bias-0.9 model is also scored on the
    bias-0 test images ("ood": context independent of gender), where leaning on context hurts.
    """
    from biaslab.metrics.captions import error, ratio_details
    from biaslab.metrics.quality import coco_caption_scores
    torch.set_num_threads(1)
    from biaslab.runtime.parallel import map_jobs
    t_start = time.perf_counter()
    # the two biases train independently: one forked worker each (2 cores, 1 thread each)
    biases = (0.0, 0.9)
    runs = dict(zip(biases, map_jobs(lambda b: _synthetic_run(tmp_path, b), biases,
                                     workers=2)))
    out = {}
    for bias, r in runs.items():
        flat, _ = evaluation.caption_metrics(r["preds"], r["genders"], r["human"], seeds=3,
                                    biasamp_min_count=5)
        rng = np.random.default_rng(0)
        base = coco_caption_scores({i: r["train_caps"][rng.integers(len(r["train_caps"]))]
                                    for i in r["preds"]}, r["human"])
        preds = list(r["preds"].values())
        scene = float(np.mean([any(w in c for w in _SCENE_WORDS) for c in preds]))
        out[bias] = {**flat, "random_CIDEr": base["CIDEr"], "random_BLEU-4": base["BLEU-4"],
                     "gender_word_share": _gender_word_share(preds),
                     "scene_word_share": scene, "epochs": r["model"].meta["epochs_run"],
                     "train_s": r["model"].meta["train_seconds"]}
    # the bias-0.9 captioner on the bias-0 test images (context independent of gender)
    r0, m9 = runs[0.0], runs[0.9]["model"]
    ood = dict(zip(r0["preds"], m9.generate(r0["test_feats"])))
    for bias, preds in ((0.0, r0["preds"]), (0.9, ood)):
        out[bias]["ood_error"] = error(preds, r0["genders"])
        out[bias]["ood_ratio"] = ratio_details(preds, r0["genders"])["ratio_max"]
    print("\nsynthetic truth, tiny captioner (bias 0 | bias 0.9), %.0f s:"
          % (time.perf_counter() - t_start))
    for k in out[0.0]:
        print(f"  {k:18s} {out[0.0][k]!s:>22.22s} {out[0.9][k]!s:>22.22s}")
    for bias, r in out.items():
        assert r["gender_word_share"] > 0.6, (bias, r)
        assert r["scene_word_share"] > 0.8, (bias, r)
        assert r["CIDEr"] > 2 * r["random_CIDEr"] and r["CIDEr"] > 50, (bias, r)
        assert r["BLEU-4"] > r["random_BLEU-4"] + 10, (bias, r)
    assert out[0.9]["LIC_M"] > out[0.0]["LIC_M"] + 5, out


_SCENE_WORDS = ("kitchen", "beach", "ocean", "field", "street", "sidewalk", "road")


def _synthetic_run(tmp_path, bias, n_images=300, size=128):
    """Generate synthetic data with ``bias``, train a tiny captioner on its train split, caption
    its test split."""
    from biaslab.data import datasets as D
    from biaslab.data import synthetic
    from biaslab.data.coco import read_coco
    from biaslab.data.labels import label_captions, label_images, stratified_split
    root = tmp_path / f"b{bias}"
    synthetic.generate(root, n_images=n_images, bias=bias, seed=0, image_size=size)
    tabs, _ = read_coco(root, progress=False)
    li = label_images(label_captions(tabs["captions"]))
    sp = stratified_split(li, {"train": 0.6, "val": 0.1, "test": 0.3}, seed=0)
    args = (tabs["images"], tabs["captions"], tabs["objects"], li, sp)
    tr, va, te = (D.original(*args, splits=(s,)) for s in ("train", "val", "test"))
    tabs_ = [data.manifest_image_table(m) for m in (tr, va, te)]
    feats = [data.image_features(t, tmp_path / "cache", image_size=size) for t in tabs_]
    (tc, trow), (vc, vrow) = data.manifest_samples(tr, tabs_[0]), data.manifest_samples(va, tabs_[1])
    model, _ = clipcap.train_captioner(feats[0], tc, trow, feats[1], vc, vrow,
                                 clipcap.CaptionerConfig(image_size=size, epochs=20, patience=3))
    ids = tabs_[2]["image_id"].astype(int).tolist()
    return {"model": model, "train_caps": tc, "test_feats": feats[2],
            "preds": dict(zip(ids, model.generate(feats[2]))),
            "human": {int(i): list(c) for i, c in zip(te["image_id"], te["captions"])},
            "genders": dict(zip(te["image_id"].astype(int), te["gender"]))}


# --------------------------------------------------------------------------------- probe margin
def test_sequence_logprobs_agree_with_the_training_loss_and_the_margin_follows_the_image(
        toy_model):
    """biaslab.analysis.probe.sequence_logprobs is the teacher-forced log-probability of the training
    loss (sum of -log p over tokens), and the continuous captioner probe output prefers "man" on a skateboard image and "woman" on an umbrella image."""
    from biaslab.analysis import probe as P
    model, _, feats, cluster = toy_model
    caps = ["a woman with an umbrella", "a man with a skateboard", "a blue circle"]
    f = feats[[int(np.flatnonzero(cluster == k)[0]) for k in (2, 3, 1)]]
    lp = P.sequence_logprobs(model, f, caps)
    for i, c in enumerate(caps):
        n_tok = len(model.encode_captions([c])[0])
        assert -lp[i] == pytest.approx(model.loss(f[i:i + 1], [c]) * n_tok, rel=1e-5)
    assert P.gendered_versions("a woman with an umbrella") == ("a man with an umbrella",
                                                               "a woman with an umbrella")
    assert P.gendered_versions("a blue circle") == ("a man", "a woman")
    texts = [P.gendered_versions("a man with a skateboard")] * 2
    img = feats[[int(np.flatnonzero(cluster == 3)[0]), int(np.flatnonzero(cluster == 2)[0])]]
    margin = P.caption_margin_output(model, img, texts)
    assert margin[0] > 0 > margin[1]      # skateboard image: "man"; umbrella image: "woman"
