"""Multi-label object + gender classifier of paper 000 sec. 3.1 (biaslab.classify): label
selection, targets, validation split, training determinism, mAP vs scikit-learn, person
blackout, the content-keyed feature cache, the train/eval stages, and the scientific check on
synthetic data with a known planted bias."""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from PIL import Image

from biaslab import classify as C
from biaslab.metrics.leakage import Attacker
from biaslab.runtime import runstats
from biaslab.data.datasets import MANIFEST_COLUMNS


# small inputs on a shared 2-core machine: one torch thread is fastest (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _manifest(rows):
    df = pd.DataFrame(rows, columns=["image_id", "gender", "objects"])
    df["sample_id"] = df["image_id"].astype(str)
    df["path"] = [f"{i}.jpg" for i in df["image_id"]]
    df["captions"] = [[] for _ in range(len(df))]
    df["counterfactual"] = False
    return df[MANIFEST_COLUMNS]


# ------------------------------------------------------------------ labels and targets
def test_select_labels_by_min_cooccur():
    rows = []
    iid = 0
    # cup: 3 female, 3 male; tie: 1 female, 5 male; dog: 2 female, 2 male; kite: 4 female only
    for obj, nf, nm in (("cup", 3, 3), ("tie", 1, 5), ("dog", 2, 2), ("kite", 4, 0)):
        for g, n in (("female", nf), ("male", nm)):
            for _ in range(n):
                iid += 1
                rows.append((iid, g, [obj, obj]))      # an object counts once per image
    rows.append((999, "undefined", ["cup"] * 5))        # other groups are not counted
    m = _manifest(rows)
    assert C.select_labels(m, 3) == ["cup"]
    assert C.select_labels(m, 2) == ["cup", "dog"]
    assert C.select_labels(m, 1) == ["cup", "dog", "tie"]
    assert C.select_labels(m, 4, rule="any") == ["kite", "tie"]
    assert C.select_labels(m, 100) == []
    with pytest.raises(ValueError):
        C.select_labels(m, 1, rule="most")


def test_label_targets_mask_unlabelled_rows():
    m = _manifest([(1, "female", ["cup", "zebra"]), (2, "male", []), (3, "undefined", ["cup"])])
    y, mask = C.label_targets(m, ["cup", "tie"], labelled_only=True)
    assert y.tolist() == [[1, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]]   # woman, man last
    assert mask.tolist() == [[1, 1, 1, 1], [0, 0, 1, 1], [1, 1, 0, 0]]
    _, mask = C.label_targets(m, ["cup", "tie"], labelled_only=False)
    assert mask[1].tolist() == [1, 1, 1, 1]


def test_validation_split_keeps_copies_of_an_image_together():
    m = _manifest([(i % 10, "female" if i % 2 else "male", ["cup"]) for i in range(40)])
    tr, va = C.validation_split(m, 0.2, seed=3)
    assert len(set(tr) | set(va)) == 40 and not set(tr) & set(va)
    assert m.iloc[va]["image_id"].nunique() == 2                       # 20 % of 10 images
    assert not set(m.iloc[va]["image_id"]) & set(m.iloc[tr]["image_id"])
    tr2, va2 = C.validation_split(m, 0.2, seed=3)
    assert va.tolist() == va2.tolist()
    assert len(C.validation_split(m, 0.0, seed=0)[1]) == 0


# ------------------------------------------------------------------ training
def _toy(n=120, d=16, seed=0):
    """Features where dim 0 encodes gender and dims 1-2 two objects (+ noise)."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 2, n)
    cup, tie = rng.random(n) < 0.5, rng.random(n) < 0.4
    x = rng.normal(0, 1, (n, d)).astype(np.float32)
    x[:, 0] += 3 * (g - 0.5)
    x[:, 1] += 3 * cup
    x[:, 2] += 3 * tie
    objs = [[o for o, v in (("cup", a), ("tie", b)) if v] for a, b in zip(cup, tie)]
    m = _manifest([(i, "male" if gi else "female", o) for i, (gi, o) in enumerate(zip(g, objs))])
    return x, m


def test_training_is_deterministic_and_learns():
    x, m = _toy()
    kw = dict(seed=1, settings=C.TrainSettings(epochs=30, lr=1e-2, patience=5, hidden=[8]))
    a, hist = C.train_classifier(x, m, ["cup", "tie"], **kw)
    b, _ = C.train_classifier(x, m, ["cup", "tie"], **kw)
    c, _ = C.train_classifier(x, m, ["cup", "tie"], **{**kw, "seed": 2})
    for k, v in a.head.state_dict().items():
        assert np.array_equal(v.numpy(), b.head.state_dict()[k].numpy()), k
    assert not np.array_equal(a.predict_proba(x), c.predict_proba(x))
    assert a.outputs == ["cup", "tie", "woman", "man"]
    assert {"epoch", "train_loss", "val_loss", "val_mAP", "val_gender_acc"} <= set(hist[0])
    assert hist[-1]["train_loss"] < hist[0]["train_loss"]
    assert a.config["best_epoch"] == int(np.argmin([h["val_loss"] for h in hist]))
    assert len(hist) <= 30 and a.config["n_val"] == 24
    p = a.predict_proba(x)
    assert ((p[:, 3] > p[:, 2]) == (m["gender"] == "male")).mean() > 0.9
    assert max(h["val_mAP"] for h in hist) > 0.8


def test_early_stopping_patience():
    x, m = _toy(n=60)
    _, hist = C.train_classifier(x, m, ["cup", "tie"], seed=0,
                                 settings=C.TrainSettings(epochs=200, lr=0.3, patience=2))
    best = int(np.argmin([h["val_loss"] for h in hist]))
    assert len(hist) == best + 3          # stopped 2 epochs without improvement after best


def test_save_load_roundtrip(tmp_path):
    x, m = _toy(n=60)
    clf, _ = C.train_classifier(x, m, ["cup", "tie"], seed=0, backbone="fake", image_size=32,
                                settings=C.TrainSettings(epochs=3, leakage_threshold="val_f1"))
    clf.save(tmp_path / "m")
    cfg = json.loads((tmp_path / "m/classifier_config.json").read_text())
    assert cfg["labels"] == ["cup", "tie"] and cfg["outputs"][-2:] == ["woman", "man"]
    assert cfg["backbone"] == "fake" and cfg["image_size"] == 32 and cfg["seed"] == 0
    back = C.GenderObjectClassifier.load(tmp_path / "m")
    np.testing.assert_array_equal(back.predict_proba(x), clf.predict_proba(x))
    np.testing.assert_allclose(back.thresholds, clf.thresholds)
    with pytest.raises(C.InputError):
        C.GenderObjectClassifier.load(tmp_path)


# ------------------------------------------------------------------ metrics
def _identity_classifier(labels):
    """A classifier whose probabilities are sigmoid(features): feed logit(scores)."""
    import torch
    k = len(labels) + 2
    head = C.build_head(k, k, [], 0.0)
    with torch.no_grad():
        head.net[0].weight.copy_(torch.eye(k))
        head.net[0].bias.zero_()
    return C.GenderObjectClassifier(head, labels, {"d_img": k, "hidden": [], "dropout": 0.0})


def _logit(p):
    p = np.clip(np.asarray(p, np.float64), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p)).astype(np.float32)


def test_map_matches_sklearn_on_hand_made_scores():
    from sklearn.metrics import average_precision_score
    labels = ["a", "b", "c"]
    y = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 0], [1, 0, 0], [0, 1, 0]])
    s = np.array([[.9, .2, .1], [.3, .8, .2], [.6, .4, .3], [.2, .1, .9], [.4, .7, .5],
                  [.7, .6, .1]])
    genders = ["female", "male"] * 3
    pg = np.tile([[0.3, 0.7]], (6, 1))
    clf = _identity_classifier(labels)
    r = C.evaluate(clf, _logit(np.c_[s, pg]), y, np.ones(6, bool), genders, None,
                   leakage_kwargs={"rounds": 1, "test_fraction": 0.34,
                                  "attacker": Attacker(epochs=2)})
    # label c has no positive in the test set: left out of the macro mean
    expected = np.mean([average_precision_score(y[:, c], s[:, c]) for c in (0, 1)])
    assert r["mAP"] == pytest.approx(100 * expected)
    assert r["n_map_labels"] == 2
    assert r["mAP"] == pytest.approx(100 * average_precision_score(y[:, :2], s[:, :2],
                                                                   average="macro"))
    # only labelled images count
    lab = np.array([1, 1, 1, 1, 0, 0], bool)
    r2 = C.evaluate(clf, _logit(np.c_[s, pg]), y, lab, genders, None,
                    leakage_kwargs={"rounds": 1, "test_fraction": 0.5,
                                   "attacker": Attacker(epochs=2)})
    assert r2["mAP"] == pytest.approx(100 * np.mean(
        [average_precision_score(y[:4, c], s[:4, c]) for c in (0, 1)]))


def test_expected_ratio_is_threshold_free_hand_computed():
    """r_E = sum P(man) / sum P(woman): (.9 + .6 + .1 + .7) / (.2 + .6 + .8 + .4) = 2.3 / 2.0;
    outputs all just below/above a threshold (the masked-image case) give a finite
    r_E near 1 where the thresholded r is 0 or inf."""
    r = C.expected_ratio([.2, .6, .8, .4], [.9, .6, .1, .7])
    assert r["ratio"] == pytest.approx(1.15) and r["ratio_max"] == pytest.approx(1.15)
    r = C.expected_ratio([.5, .5], [.25, .25])            # r_E = 0.5 -> max(r, 1/r) = 2
    assert r["ratio"] == pytest.approx(0.5) and r["ratio_max"] == pytest.approx(2.0)
    assert C.expected_ratio([0.0, 0.0], [0.3, 0.1])["ratio_max"] == math.inf
    assert math.isnan(C.expected_ratio([0.0], [0.0])["ratio"])
    assert C.expected_ratio([1, 0, 1], [0, 1, 0])["ratio"] == pytest.approx(0.5)  # 0/1: counts
    with pytest.raises(ValueError, match="shape"):
        C.expected_ratio([.1, .2], [.3])
    # the masked-image protocol case: man output 0.55 > its threshold 0.5 on every image,
    # woman 0.45 below: thresholded r = inf, r_E = 2.2 / 1.8
    clf = _identity_classifier(["a"])
    p = np.array([[.5, .45, .55]] * 4)
    r = C.evaluate(clf, _logit(p), np.zeros((4, 1)), np.zeros(4, bool), ["male"] * 4,
                   _logit(p))
    assert r["ratio"] == math.inf
    assert r["ratio_expected"] == pytest.approx(0.55 / 0.45)
    assert r["ratio_expected_raw"] == pytest.approx(0.55 / 0.45)


def test_ratio_counts_each_gender_output_above_its_threshold():
    """Paper 000 sec. 3.1 Ratio counted as a multi-label classifier predicts: man on 0, 1, 3;
    woman on 1, 2 (image 1 counts for both) -> r = 3 / 2; argmax would give 2 / 1."""
    clf = _identity_classifier(["a"])
    p = np.array([[.5, .2, .9], [.5, .6, .6], [.5, .8, .1], [.5, .4, .7]])   # obj, woman, man
    r = C.evaluate(clf, _logit(p), np.zeros((4, 1)), np.zeros(4, bool),
                   ["male", "female", "female", "male"], _logit(p))
    assert (r["n_man"], r["n_woman"], r["n_both"], r["n_neither"]) == (3, 2, 1, 0)
    assert r["ratio"] == pytest.approx(1.5) and r["ratio_raw"] == pytest.approx(1.5)
    assert r["ratio_flag"] is None
    assert r["masked_gender_acc"] == pytest.approx(100.0)  # argmax diagnostic: tie -> woman
    assert r["leakage"] is None              # no labelled image: no Leakage
    p2 = p[:, [0, 2, 1]]                     # swap: 2 man, 3 woman -> max(r, 1/r) = 1.5
    r2 = C.evaluate(clf, _logit(p2), np.zeros((4, 1)), np.zeros(4, bool),
                    ["male"] * 4, _logit(p2))
    assert r2["ratio"] == pytest.approx(1.5) and r2["ratio_raw"] == pytest.approx(2 / 3)
    # stored validation-tuned gender thresholds (woman, man) are used when present
    clf.config["gender_thresholds"] = [0.5, 0.75]
    assert C.gender_thresholds(clf) == (0.5, 0.75)
    r3 = C.ratio_of(clf, _logit(p))          # man on 0 only (0.9): 1 / 2
    assert (r3["n_man"], r3["n_woman"]) == (1, 2) and r3["ratio"] == pytest.approx(0.5)
    # no woman output on any masked image: Ratio infinite, flagged
    p4 = np.array([[.5, .1, .9], [.5, .2, .8]])
    r4 = C.evaluate(_identity_classifier(["a"]), _logit(p4), np.zeros((2, 1)),
                    np.zeros(2, bool), ["male", "female"], _logit(p4))
    assert r4["ratio"] == np.inf and r4["ratio_flag"] == "r=inf"
    assert C.ratio_flag(0.0) == "r=0" and C.ratio_flag(float("nan")) == "0/0"


def test_json_record_keeps_infinite_seeds():
    rec = C.json_record([2.0, np.inf, None])
    assert rec["n_inf"] == 1 and rec["n_missing"] == 1 and rec["n"] == 2
    assert rec["mean"] is None and rec["sign"] == 1
    assert C.json_record([1.0, 2.0, 3.0])["ci95"] == pytest.approx(2.4841, abs=1e-4)


def test_evaluate_trains_leakage_attackers_on_the_training_images(monkeypatch):
    """LK_D's attacker sees the training ground truth, LK_M's the classifier's (thresholded)
    predictions for the training images (paper 000 Eq. 7; Wang et al. 2019)."""
    import torch
    from biaslab.metrics import leakage as L
    fits = []

    class Constant:
        def __call__(self, x):
            return torch.zeros(len(x), 2)

    def fake_train(x, y, *args):
        fits.append(x.copy())
        return Constant()

    monkeypatch.setattr(L, "_train_attacker", fake_train)
    monkeypatch.setattr(L, "_DATASET_MEMO", {})
    clf = _identity_classifier(["a", "b"])
    # training images: ground truth has b = 1 everywhere, the classifier predicts b = 0 (0.2)
    n = 8
    tr_gt = np.c_[np.arange(n) % 2, np.ones(n)]
    tr_p = np.c_[np.full(n, .9), np.full(n, .2), np.full(n, .5), np.full(n, .5)]
    te_p = np.c_[np.full(6, .9), np.full(6, .2), np.full(6, .5), np.full(6, .5)]
    g_tr, g_te = ["female", "male"] * (n // 2), ["female", "male"] * 3
    r = C.evaluate(clf, _logit(te_p), np.zeros((6, 2)), np.ones(6, bool), g_te, None,
                   train_feats=_logit(tr_p), train_objects=tr_gt, train_genders=g_tr,
                   leakage_kwargs={"rounds": 1})
    assert r["leakage_protocol"] == "train_test"
    d_fit, m_fit = fits
    assert len(d_fit) == len(m_fit) == n                 # 4 per group, balanced
    assert (d_fit[:, 1] == 1).all()                      # ground truth of the training images
    assert (m_fit == [1, 0]).all()                       # predictions at 0.5: a on, b off
    with pytest.raises(ValueError, match="train_feats"):
        C.evaluate(clf, _logit(te_p), np.zeros((6, 2)), np.ones(6, bool), g_te, None,
                   train_feats=_logit(tr_p))


# ------------------------------------------------------------------ persons masked
def test_blackout_leaves_non_person_pixels_unchanged():
    rng = np.random.default_rng(0)
    img = rng.integers(1, 256, (40, 60, 3), dtype=np.uint8)
    persons = pd.DataFrame([
        {"ann_id": 1, "image_id": 7, "x": 5.0, "y": 5.0, "w": 10.0, "h": 20.0,
         "polygon": json.dumps([[5, 5, 15, 5, 15, 25, 5, 25]]), "keypoints": None},
        {"ann_id": 2, "image_id": 7, "x": 30.0, "y": 10.0, "w": 8.0, "h": 8.0,
         "polygon": "[]", "keypoints": None},
    ])
    out, mask = C.blackout_persons(img, persons)
    assert mask.shape == (40, 60) and mask.dtype == np.uint8
    assert (out[mask > 0] == 0).all()
    np.testing.assert_array_equal(out[mask == 0], img[mask == 0])
    assert mask[10, 10] and mask[12, 33] and not mask[35, 50]
    assert int(mask[10:18, 30:38].sum()) == 64               # the box-only person: its box
    boxed, bmask = C.blackout_persons(img, persons, sources=("box",), dilate_px=1)
    assert bmask.sum() > mask.sum()
    np.testing.assert_array_equal(boxed[bmask == 0], img[bmask == 0])
    assert img.min() > 0                                     # the input is not modified


# ------------------------------------------------------------------ feature cache by content
class _MeanColour:
    name, image_size, dim = "meancolour", 8, 3

    def __init__(self):
        self.calls = 0

    def encode(self, images, batch_size=32):
        self.calls += len(images)
        return np.stack([np.asarray(Image.open(p).convert("RGB"), np.float32).mean((0, 1))
                         for p in images])


def test_encode_files_is_keyed_by_content(tmp_path):
    enc = _MeanColour()
    paths = []
    for k, v in enumerate((10, 20, 10)):
        paths.append(str(tmp_path / f"{k}.png"))
        Image.new("RGB", (4, 4), (v, v, v)).save(paths[-1])
    f = C.encode_files(paths, tmp_path / "cache", "meancolour", encoder=enc)
    assert f[:, 0].tolist() == [10, 20, 10] and enc.calls == 2   # same content: once
    C.encode_files(paths, tmp_path / "cache", "meancolour", encoder=enc)
    assert enc.calls == 2                                    # cached
    Image.new("RGB", (4, 4), (99, 99, 99)).save(paths[1])    # same path, new pixels
    f = C.encode_files(paths, tmp_path / "cache", "meancolour", encoder=enc)
    assert f[:, 0].tolist() == [10, 99, 10] and enc.calls == 3
    # manifest features: real rows from the base, counterfactual rows encoded
    m = _manifest([(1, "female", []), (2, "male", [])])
    m["path"] = [paths[0], paths[1]]
    m["counterfactual"] = [False, True]
    out = C.manifest_features(m, np.array([1, 2]), np.array([[7, 7, 7], [8, 8, 8]], np.float32),
                              tmp_path / "cache", "meancolour", encoder=enc)
    assert out[:, 0].tolist() == [7, 99]


# ------------------------------------------------------------------ stages on tiny inputs
def _tiny_repo(root: Path, n=48, size=64):
    """A synthetic dataset laid out like the pipeline's data/ (prepared tables, labels, split,
    features, dataset manifests incl. counterfactual rows) under ``root``."""
    from biaslab.data import datasets as D
    from biaslab.data import synthetic
    from biaslab.data.coco import read_coco
    from biaslab.models.features import encode_cached, save_features
    from biaslab.data.labels import label_captions, label_images, stratified_split
    synthetic.generate(root / "raw", n_images=n, bias=0.8, seed=3, image_size=size)
    t, _ = read_coco(root / "raw", progress=False)
    for name in ("images", "persons", "objects", "captions"):
        (root / "data/prepared").mkdir(parents=True, exist_ok=True)
        t[name].to_parquet(root / f"data/prepared/{name}.parquet")
    labels = label_images(label_captions(t["captions"]))
    (root / "data/labels").mkdir(parents=True)
    labels.to_parquet(root / "data/labels/images.parquet")
    split = stratified_split(labels, {"train": 0.6, "val": 0.1, "test": 0.3}, 0)
    split.to_parquet(root / "data/split.parquet")
    ids, feats = encode_cached(t["images"][["image_id", "path"]], root / "cache",
                               "efficientnet_lite0", image_size=size, num_threads=1)
    save_features(root / "data/features/images", ids, feats)
    d = D.original(t["images"], t["captions"], t["objects"], labels, split)
    # counterfactual stand-ins: mirrored images labelled with the other gender
    (root / "data/cf").mkdir(parents=True)
    cf = d.iloc[:8].copy()
    cf["path"] = [str(root / f"data/cf/{i}.png") for i in cf["image_id"]]
    for src, dst in zip(d.iloc[:8]["path"], cf["path"]):
        Image.open(src).transpose(Image.FLIP_LEFT_RIGHT).save(dst)
    cf["gender"] = cf["gender"].map({"female": "male", "male": "female"})
    cf["counterfactual"] = True
    cf["sample_id"] = cf["sample_id"] + ":cf"
    (root / "data/datasets").mkdir(parents=True)
    d.to_parquet(root / "data/datasets/original.parquet")
    pd.concat([d, cf], ignore_index=True).to_parquet(root / "data/datasets/augment.parquet")
    pd.concat([cf, cf.assign(gender=d.iloc[:8]["gender"].to_numpy(),
                             sample_id=cf["sample_id"] + "2")], ignore_index=True) \
        .to_parquet(root / "data/datasets/synthetic.parquet")
    params = {
        "label": {"words": "lic"},
        "features": {"backbone": "efficientnet_lite0", "image_size": size, "batch_size": 16,
                     "cache_dir": str(root / "cache")},
        "classifier": {"min_cooccur": 2, "cooccur_rule": "each", "epochs": 4, "lr": 1e-3,
                       "batch_size": 8, "patience": 2, "val_fraction": 0.2, "hidden": [],
                       "dropout": 0.0, "weight_decay": 0.0, "labelled_only": True,
                       "finetune": False, "leakage_threshold": 0.5, "threads": 1,
                       "seeds": [0], "datasets": ["original", "augment", "synthetic"],
                       "methods": ["adversarial", "group_dro"],
                       "method_params": {"group_dro": {"eta": 0.05}},
                       "blackout": ["box"], "blackout_dilate_px": 1, "leakage_rounds": 2},
        "artifact": {"seed": 0, "parts": ["head", "left_hand", "right_hand"],
                     "radius_scale": 1.0, "box_fraction": 0.3,
                     "datasets": ["original", "augment", "synthetic"]},
        "generate": {"backend": "copy_paste", "m": 1, "guidance_scales": [7.5],
                     "inpaint_radius": 3, "inpaint_method": "telea", "feather_px": 1.0,
                     "donor_splits": ["train"], "donor_single_person": True},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return params


def test_stages_on_tiny_inputs(tmp_path, monkeypatch):
    from stages import artifact_test, eval_classifier, train_classifier
    _tiny_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    for ds in ("original", "augment", "synthetic"):
        train_classifier.main(["--dataset", ds, "--seed", "0"])
        d = tmp_path / f"data/models/classifier/{ds}/{ds}-0"
        cfg = json.loads((d / "classifier_config.json").read_text())
        assert cfg["dataset"] == ds and cfg["outputs"][-2:] == ["woman", "man"]
        assert (tmp_path / f"dvclive/classifier/{ds}/{ds}-0/metrics.json").exists()
        loss = tmp_path / f"dvclive/classifier/{ds}/{ds}-0/plots/metrics/train/loss.tsv"
        assert len(loss.read_text().splitlines()) == len(json.loads(
            (d / "history.json").read_text())) + 1
    # two seeds on two forked workers: byte-identical to training them one after another
    heads = {}
    for w in ("1", "2"):
        train_classifier.main(["--dataset", "original", "--seeds", "0", "1", "--workers", w])
        heads[w] = [(tmp_path / f"data/models/classifier/original/original-{s}/"
                     "classifier_head.safetensors").read_bytes() for s in (0, 1)]
    assert heads["1"] == heads["2"] and heads["1"][0] != heads["1"][1]
    for method in ("adversarial", "group_dro"):      # stage train_method: on Original
        train_classifier.main(["--method", method, "--seed", "0"])
        cfg = json.loads((tmp_path / f"data/models/classifier/{method}/{method}-0/"
                          "classifier_config.json").read_text())
        assert cfg["method"] == method and cfg["dataset"] == "original"
        assert (tmp_path / f"dvclive/classifier/{method}/{method}-0/metrics.json").exists()
    assert cfg["method_params"] == {"eta": 0.05}      # classifier.method_params.group_dro
    labels = json.loads((tmp_path / "data/models/classifier/original/original-0/"
                         "classifier_config.json").read_text())["labels"]
    assert labels == json.loads((tmp_path / "data/models/classifier/synthetic/synthetic-0/"
                                 "classifier_config.json").read_text())["labels"]
    # run statistics in benchmarks/runs/; the DVCLive directory (an out) holds none
    assert json.loads((tmp_path / "benchmarks/runs/train_classifier/augment-0.json").read_text()
                      )["encoded_now"] == 8
    for ds in ("original", "augment", "synthetic"):
        live = json.loads((tmp_path / f"dvclive/classifier/{ds}/{ds}-0/metrics.json").read_text())
        assert runstats.split(live)[1] == {}, live

    eval_classifier.main()
    m = json.loads((tmp_path / "metrics/classification.json").read_text())
    # the (model, seed) jobs on two forked workers give the same metrics as one process
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["classifier"]["workers"] = 2
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    eval_classifier.main()
    assert json.loads((tmp_path / "metrics/classification.json").read_text()) == m
    assert set(m) == {"original", "augment", "synthetic", "adversarial", "group_dro",
                      "test_set", "leakage_train", "domain", "attributes"}
    # paper 000 app. B.1's attribute list: the first model's object labels
    a = m["attributes"]
    assert a["model"] == "original" and a["n"] == len(a["names"]) > 0
    assert a["names"] == json.loads((tmp_path / "data/models/classifier/original/original-0/"
                                     "classifier_config.json").read_text())["labels"]
    # the domain check: every model on the real photos and the same-group
    # counterfactuals of the train sources it never trained on, one pair per source
    from biaslab.classify import domain as DOM
    orig = pd.read_parquet(tmp_path / "data/datasets/original.parquet")
    for name in ("original", "synthetic", "group_dro"):
        d = m["domain"][name]
        ds = name if name != "group_dro" else "original"
        man = pd.read_parquet(tmp_path / f"data/datasets/{ds}.parquet")
        cfg = json.loads((tmp_path / f"data/models/classifier/{name}/{name}-0/"
                                     "classifier_config.json").read_text())
        unseen = DOM.unseen_sources(man, orig["image_id"].unique(), cfg["val_fraction"], 0)
        syn = pd.read_parquet(tmp_path / "data/datasets/synthetic.parquet")
        g = dict(zip(orig["image_id"], orig["gender"]))
        same = syn[[g[i] == x and i in set(unseen) for i, x in zip(syn["image_id"],
                                                                    syn["gender"])]]
        assert d["per_seed"][0]["n_real"] == len(unseen) > 0
        assert d["per_seed"][0]["n_generated"] == len(same)
        assert set(d["domain_gap"]) == {"mean", "ci95", "std", "n", "n_inf", "n_missing",
                                        "sign"}
    assert m["domain"]["adversarial"]["gender_acc_real"]["n_missing"] == 1
    rec_keys = {"mean", "ci95", "std", "n", "n_inf", "n_missing", "sign"}
    assert m["group_dro"]["method"] == "group_dro" and m["original"]["method"] == "erm"
    # adversarial: no gender outputs -> Ratio n/a, counted as missing; mAP and Leakage exist
    adv = m["adversarial"]
    assert "no gender outputs" in adv["ratio_na"] and "ratio_na" not in m["group_dro"]
    assert adv["Ratio"]["n"] == 0 and adv["Ratio"]["n_missing"] == 1
    assert adv["per_seed"][0]["ratio_flag"] == "n/a" and adv["mAP"]["n"] == 1
    for ds in ("original", "augment", "synthetic"):
        for k in ("mAP", "Ratio", "ratio_raw", "Leakage", "LK_M", "LK_D"):
            assert set(m[ds][k]) == rec_keys, k
        assert len(m[ds]["per_seed"]) == 1 and 0 <= m[ds]["mAP"]["mean"] <= 100
        s = m[ds]["per_seed"][0]
        assert s["n_man"] + s["n_woman"] - s["n_both"] + s["n_neither"] == \
            m["test_set"]["n_masked"]
        assert (s["Ratio"] is None) == (s["ratio_flag"] is not None)
        # a seed with an infinite Ratio is counted, not dropped
        assert m[ds]["Ratio"]["n"] + m[ds]["Ratio"]["n_missing"] == 1
    # LK_D depends only on the images: the same for every classifier
    assert len({m[ds]["per_seed"][0]["LK_D"] for ds in ("original", "augment",
                                                          "synthetic")}) == 1
    train = pd.read_parquet(tmp_path / "data/datasets/original.parquet")
    assert m["leakage_train"]["n_images"] == int(train["objects"].apply(len).gt(0).sum()) > 0
    assert m["test_set"]["n_masked"] == m["test_set"]["n_test"] > 0
    csv = pd.read_csv(tmp_path / "plots/classification.csv")
    assert list(csv["dataset"]) == ["original", "augment", "synthetic", "adversarial",
                                    "group_dro"]
    assert {"mAP_mean", "mAP_ci95", "Ratio_mean", "Ratio_ci95", "Leakage_mean",
            "Leakage_ci95", "Ratio_n_inf"} <= set(csv.columns)
    assert len(list((tmp_path / "data/eval_classifier/masked").iterdir())) == \
        m["test_set"]["n_masked"]

    artifact_test.main()
    a = json.loads((tmp_path / "metrics/artifact.json").read_text())
    assert set(a) == {"original", "augment", "synthetic", "test_set"}
    for ds in ("original", "augment", "synthetic"):
        assert {"ratio_orig", "ratio_inp", "delta", "delta_seeds", "flip_rate",
                "per_seed"} <= set(a[ds])
        assert {"mean", "ci95", "lo", "hi", "n_boot"} <= set(a[ds]["delta"])
    parts = pd.read_parquet(tmp_path / "data/artifact/parts.parquet")
    assert len(parts) == a["test_set"]["n_images"] > 0
    assert set(parts["part"]) <= {"head", "left_hand", "right_hand", "box"}
    assert all(Path(p).exists() for p in parts["path"])
    assert parts["donor_ann_id"].notna().all()       # copy_paste: a same-group donor patch


# ------------------------------------------------------------------ scientific check
def _synthetic_world(root: Path, bias: float, n: int, enc):
    """Synthetic images with planted ``bias`` -> original manifest, test table, features of the
    training images, the test images and their persons-blacked-out versions."""
    from biaslab.data import datasets as D
    from biaslab.data import synthetic
    from biaslab.data.coco import read_coco
    from biaslab.data.labels import label_captions, label_images, stratified_split
    synthetic.generate(root, n_images=n, bias=bias, seed=0, image_size=128)
    t, _ = read_coco(root, progress=False)
    labels = label_images(label_captions(t["captions"]))
    split = stratified_split(labels[labels["gender"].isin(["female", "male"])],
                             {"train": 0.7, "test": 0.3}, 0)
    train = D.original(t["images"], t["captions"], t["objects"], labels, split)
    test = C.test_table(t["images"], labels, split, t["objects"], t["persons"])
    masked = C.write_blackout_images(test, t["persons"], root / "masked", sources=("box",),
                                     dilate_px=2)
    cache = root.parent / "cache"
    f = lambda paths: C.encode_files(paths, cache, "efficientnet_lite0", encoder=enc)  # noqa
    return {"train": train, "test": test, "masked": masked, "f_train": f(train["path"]),
            "f_test": f(test["path"]), "f_masked": f(masked["path"])}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    from biaslab.models.features import load_image_encoder
    enc = load_image_encoder("efficientnet_lite0", image_size=128)
    root = tmp_path_factory.mktemp("planted")
    worlds = {b: _synthetic_world(root / f"bias{b}", b, 300, enc) for b in (0.0, 0.9)}
    results = {}
    for b, w in worlds.items():
        labels = C.select_labels(w["train"], 1, rule="any")
        y = C.object_matrix(w["test"]["objects"], labels)
        rows = []
        for seed in (0, 1):
            clf, _ = C.train_classifier(w["f_train"], w["train"], labels, seed=seed,
                                        settings=C.TrainSettings(epochs=60, lr=1e-3))
            lab = w["train"]["objects"].apply(len).gt(0).to_numpy()
            rows.append(C.evaluate(clf, w["f_test"], y, w["test"]["labelled"].to_numpy(),
                                   w["test"]["gender"].tolist(), w["f_masked"],
                                   masked_genders=w["masked"]["gender"].tolist(),
                                   train_feats=w["f_train"][lab],
                                   train_objects=C.object_matrix(
                                       w["train"]["objects"][lab], labels),
                                   train_genders=w["train"]["gender"][lab].tolist(),
                                   leakage_kwargs={"rounds": 10}))
        keys = ("mAP", "gender_acc", "ratio", "n_man", "n_woman", "masked_gender_acc",
                "masked_gender_auc", "leakage", "LK_M", "LK_D")
        results[b] = {k: [r.get(k) for r in rows] for k in keys}
    print(json.dumps(results, indent=1))
    return results


def _mean(v):
    v = [x for x in v if x is not None]
    return float(np.mean(v)) if v else float("nan")


@pytest.mark.slow
def test_planted_bias_is_seen_by_the_classifier(planted):
    """What the data supports (measured, see the report in the module docstring of
    biaslab.classify / the PR): with the persons blacked out, a classifier trained on Original
    reads gender from the planted context only when there is one (AUC of p_man - p_woman on
    the masked images ~50 at bias 0, high at bias 0.9), and the objects it predicts carry the
    planted object-gender correlation (LK_M rises with LK_D)."""
    b0, b9 = planted[0.0], planted[0.9]
    assert min(b0["gender_acc"]) > 80 and min(b9["gender_acc"]) > 80   # persons visible
    assert abs(_mean(b0["masked_gender_auc"]) - 50) < 12
    assert _mean(b9["masked_gender_auc"]) > _mean(b0["masked_gender_auc"]) + 20
    assert _mean(b9["LK_D"]) > _mean(b0["LK_D"]) + 30
    assert _mean(b9["LK_M"]) > _mean(b0["LK_M"]) + 30


@pytest.mark.slow
@pytest.mark.xfail(reason="measured on this synthetic source: Leakage (LK_M - LK_D) does not "
                          "grow with the planted bias (LK_D saturates near 96 at bias 0.9 and "
                          "the model's object errors lower LK_M; at bias 0 finite-sample "
                          "amplification gives +15..+18), and |Ratio - 1| shrinks: with gender-"
                          "balanced test data a context-reading model splits its calls evenly, "
                          "while a model that cannot read gender from a masked image makes "
                          "one constant call (r -> inf)", strict=False)
def test_leakage_and_ratio_grow_with_planted_bias(planted):
    """The expectation of the brief, kept visible: Leakage and |Ratio - 1| clearly higher with
    strong planted bias than with bias 0."""
    b0, b9 = planted[0.0], planted[0.9]
    assert _mean(b9["leakage"]) > _mean(b0["leakage"]) + 5
    r0 = [np.inf if r is None else r for r in b0["ratio"]]
    r9 = [np.inf if r is None else r for r in b9["ratio"]]
    assert np.mean(r9) - 1 > np.mean(r0) - 1


def test_finetune_trains_the_backbone_and_reloads(tmp_path):
    """Paper tier (appendix B.1): backbone + linear head trained end to end; tiny run."""
    rng = np.random.default_rng(0)
    paths = []
    for k in range(8):
        paths.append(str(tmp_path / f"{k}.png"))
        Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(paths[-1])
    m = _manifest([(k, "female" if k % 2 else "male", ["cup"] if k % 3 else [])
                   for k in range(8)])
    m["path"] = paths
    clf, hist = C.train_finetune(m, ["cup"], backbone="efficientnet_lite0", image_size=32,
                                 seed=0, settings=C.TrainSettings(epochs=2, lr=1e-4, batch_size=4,
                                                 val_fraction=0.25))
    assert len(hist) == 2 and clf.config["finetune"] and clf.config["n_val"] == 2
    from biaslab.models.features import load_image_encoder
    frozen = load_image_encoder("efficientnet_lite0", image_size=32)
    f_tuned, f_frozen = clf.encode(paths[:2]), frozen.encode(paths[:2])
    assert not np.allclose(f_tuned, f_frozen)                 # the backbone moved
    clf.save(tmp_path / "ft")
    back = C.GenderObjectClassifier.load(tmp_path / "ft")
    np.testing.assert_allclose(back.encode(paths[:2]), f_tuned, atol=1e-5)
    np.testing.assert_allclose(back.predict_proba(f_tuned), clf.predict_proba(f_tuned),
                               atol=1e-6)


def test_two_backbones_one_table1_group_each(tmp_path, monkeypatch):
    """classifier.backbones: the first backbone's models keep the plain paths and
    the top-level rows (byte-identical to a run without the list); a second backbone (a tiny
    random ResNet saved by save_pretrained, the paper tier's class) trains under
    <name>-<seed>-<slug> on features encoded with ITS backbone -- never the base features of
    another -- and is reported under classification.json["backbones"][slug]."""
    import torch

    from stages import eval_classifier, train_classifier
    from tests.test_backbones import _tiny
    params = _tiny_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    params["classifier"].update(datasets=["original"], methods=[], seeds=[0])
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    train_classifier.main(["--dataset", "original"])
    head = tmp_path / "data/models/classifier/original/original-0/classifier_head.safetensors"
    plain = head.read_bytes()
    torch.manual_seed(0)
    model, processor = _tiny("ResNet-50")
    rn = tmp_path / "tiny-resnet"
    model.save_pretrained(rn)
    processor.save_pretrained(rn)
    params["classifier"]["backbones"] = ["efficientnet_lite0", str(rn)]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    train_classifier.main(["--dataset", "original"])
    assert head.read_bytes() == plain                       # the primary is unchanged
    second = tmp_path / "data/models/classifier/original/original-0-tiny-resnet"
    cfg = json.loads((second / "classifier_config.json").read_text())
    assert cfg["backbone"] == str(rn)
    assert (tmp_path / "dvclive/classifier/original/original-0-tiny-resnet/metrics.json").exists()
    eval_classifier.main()
    m = json.loads((tmp_path / "metrics/classification.json").read_text())
    assert set(m["backbones"]) == {"tiny-resnet"} and m["test_set"]["backbone"] == \
        "efficientnet_lite0"
    a, b = m["original"], m["backbones"]["tiny-resnet"]["original"]
    assert a["mAP"]["n"] == b["mAP"]["n"] == 1 and a["mAP"]["mean"] != b["mAP"]["mean"]
    csv = pd.read_csv(tmp_path / "plots/classification.csv")
    assert list(csv["backbone"]) == ["efficientnet_lite0", "tiny-resnet"]
    # a bad list is refused before any work, naming the param
    params["classifier"]["backbones"] = ["a/x", "b/x"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(Exception, match="classifier.backbones"):
        train_classifier.main(["--dataset", "original"])
