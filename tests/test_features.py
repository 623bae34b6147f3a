"""Frozen backbones (biaslab.models.features) and the object predictor / Eq. 5 (biaslab.models.objects)."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from biaslab.runtime.provenance import source_digest
from biaslab.models.features import (CACHE_VERSION, ImageEncoder, cache_key, canonical_batch,
                                     encode_cached, encode_texts_cached,
                                     load_image_encoder, load_text_encoder)
from biaslab.runtime.io import InputError
from biaslab.models.settings import ObjectsSettings
from biaslab.models.objects import (ObjectPredictor, best_f1_thresholds, frequent_categories,
                                    load_object_predictor, mean_average_precision, object_f1,
                                    object_label_matrix, train_object_predictor)

REPO = Path(__file__).resolve().parents[1]


def _images(n=3, size=(80, 60)):
    rng = np.random.default_rng(0)
    ims = [Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
           for _ in range(n - 1)]
    ims.append(Image.new("RGB", size, (255, 0, 0)))
    return ims


# small inputs on a shared 2-core machine: one torch thread is fastest (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def effnet():
    return load_image_encoder("efficientnet_lite0")


# ------------------------------------------------------------------ EfficientNet-Lite0
def test_efficientnet_offline_shape_deterministic(effnet, tmp_path):
    ims = _images(3)
    paths = []
    for k, im in enumerate(ims):
        paths.append(tmp_path / f"{k}.png")
        im.save(paths[-1])
    a = effnet.encode(ims, batch_size=2)
    b = effnet.encode([str(p) for p in paths], batch_size=1)   # paths, other batching
    assert a.shape == (3, 1280) and a.dtype == np.float32
    assert np.isfinite(a).all()
    np.testing.assert_allclose(a, b, atol=1e-4)               # deterministic, batch-invariant
    # different images -> clearly different features
    assert np.abs(a[0] - a[2]).max() > 1e-2 and np.abs(a[0] - a[1]).max() > 1e-2
    assert effnet.encode([], batch_size=4).shape == (0, 1280)


def test_efficientnet_is_the_imagenet_model(effnet):
    # the shipped ImageNet classifier on top of our pooled features reproduces the model's own
    # logits: features are the penultimate layer of the pretrained network
    import torch
    im = _images(1)[0]
    f = effnet.encode([im])
    x = effnet._preprocess([im])
    with torch.inference_mode():
        logits = effnet.model(x).numpy()
        mine = effnet.model._fc(torch.from_numpy(f)).numpy()
    np.testing.assert_allclose(mine, logits, atol=1e-3)


def test_unreadable_image_names_file(effnet, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_text("not an image")
    with pytest.raises(InputError, match="bad.jpg"):
        effnet.encode([str(bad)])


def test_hf_backbone_same_code_path(tmp_path):
    from transformers import ResNetConfig, ResNetModel, ViTImageProcessor
    cfg = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_channels=3)
    ResNetModel(cfg).save_pretrained(tmp_path / "m")
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(tmp_path / "m")
    enc = load_image_encoder(str(tmp_path / "m"))
    f = enc.encode(_images(3), batch_size=2)
    assert f.shape == (3, 16) and np.isfinite(f).all()
    np.testing.assert_allclose(f, enc.encode(_images(3), batch_size=3), atol=1e-5)


# ------------------------------------------------------------------ caching
class CountingEncoder(ImageEncoder):
    """Fake encoder: feature = (image_id-like number from the file name, 1.0); counts calls."""

    def __init__(self):
        super().__init__("fake", image_size=8)
        self.dim = 2
        self.encoded = []

    def encode(self, images, batch_size=32, progress=False):
        images = list(images)
        self.encoded += images
        return np.array([[float(str(p).split("_")[-1].split(".")[0]), 1.0] for p in images],
                        np.float32).reshape(len(images), 2)


def _files(tmp_path, *names):
    """Write small distinct files; the fake encoder reads the number from the name."""
    out = []
    for n in names:
        p = tmp_path / n
        p.write_bytes(n.encode())
        out.append(str(p))
    return out


def test_encode_cached_reuses_rows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _files(tmp_path, "im_3.jpg", "im_1.jpg", "im_2.jpg", "im_7.jpg", "moved_5.jpg")
    table = pd.DataFrame({"image_id": [3, 1, 2], "path": ["im_3.jpg", "im_1.jpg", "im_2.jpg"]})
    enc = CountingEncoder()
    ids, f = encode_cached(table, tmp_path, encoder=enc, checkpoint_every=2)
    assert ids.tolist() == [3, 1, 2] and f[:, 0].tolist() == [3, 1, 2]
    assert len(enc.encoded) == 3
    d = tmp_path / cache_key("fake", 8)
    assert (d / "feats.npy").exists() and (d / "index.parquet").exists()

    enc2 = CountingEncoder()                       # second call: nothing new
    ids2, f2 = encode_cached(table.iloc[::-1], tmp_path, encoder=enc2)
    assert enc2.encoded == [] and ids2.tolist() == [2, 1, 3]
    np.testing.assert_array_equal(f2, f[::-1])

    enc3 = CountingEncoder()                       # one new image -> one new row
    bigger = pd.concat([table, pd.DataFrame({"image_id": [7], "path": ["im_7.jpg"]})])
    ids3, f3 = encode_cached(bigger, tmp_path, encoder=enc3)
    assert enc3.encoded == ["im_7.jpg"] and f3[:, 0].tolist() == [3, 1, 2, 7]
    assert np.load(d / "feats.npy").shape == (4, 2)

    enc4 = CountingEncoder()                       # same id, new path -> recomputed
    moved = pd.DataFrame({"image_id": [1], "path": ["moved_5.jpg"]})
    _, f4 = encode_cached(moved, tmp_path, encoder=enc4)
    assert enc4.encoded == ["moved_5.jpg"] and f4[0, 0] == 5

    enc5 = CountingEncoder()                       # same id and path, new content -> recomputed
    (tmp_path / "im_2.jpg").write_bytes(b"rewritten")
    _, f5 = encode_cached(table, tmp_path, encoder=enc5)
    assert enc5.encoded == ["im_2.jpg"] and f5[:, 0].tolist() == [3, 1, 2]
    enc6 = CountingEncoder()                       # ... and cached from then on
    encode_cached(table, tmp_path, encoder=enc6)
    assert enc6.encoded == []


def test_encode_cached_names_a_missing_file(tmp_path):
    table = pd.DataFrame({"image_id": [1], "path": [str(tmp_path / "gone_1.jpg")]})
    with pytest.raises(InputError, match="gone_1.jpg"):
        encode_cached(table, tmp_path, encoder=CountingEncoder())


class CountingTextEncoder:
    name, dim = "faketext", 3

    def __init__(self):
        self.encoded = []

    def encode(self, texts, batch_size=128, progress=False):
        self.encoded += list(texts)
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], np.float32).reshape(-1, 3)


def test_encode_texts_cached(tmp_path):
    enc = CountingTextEncoder()
    f = encode_texts_cached(["a cat", "dog", "a cat"], tmp_path, encoder=enc)
    assert enc.encoded == ["dog", "a cat"]       # each distinct text once, sorted by length
    assert f.tolist() == [[5, 2, 1], [3, 0, 1], [5, 2, 1]]
    enc2, stats = CountingTextEncoder(), {}
    f2 = encode_texts_cached(["a cat", "dog"], tmp_path, encoder=enc2, stats=stats)
    assert enc2.encoded == [] and stats == {"computed": 0, "cached": 2, "encode_seconds": 0.0}
    assert f2.tolist() == [[5, 2, 1], [3, 0, 1]]
    enc3, stats = CountingTextEncoder(), {}     # another set: encoded as a whole
    f3 = encode_texts_cached(["dog", "banana", "a cat"], tmp_path, encoder=enc3, stats=stats)
    assert enc3.encoded == ["dog", "a cat", "banana"] and stats["computed"] == 3
    assert f3.tolist() == [[3, 0, 1], [6, 3, 1], [5, 2, 1]]
    assert len(list((tmp_path / f"text_{cache_key('faketext', None)}").glob("*.npy"))) == 2


class BatchSensitiveTextEncoder(CountingTextEncoder):
    """Like a padded transformer: a row's last bits depend on the longest text of its batch."""

    def encode(self, texts, batch_size=128, progress=False):
        texts, out = list(texts), []
        for s in range(0, len(texts), batch_size):
            batch = texts[s:s + batch_size]
            out.append(super().encode(batch) + 1e-3 * max(len(t) for t in batch))
        return np.concatenate(out)


def test_encode_texts_cached_does_not_depend_on_the_caches_history(tmp_path):
    """A checkout whose cache saw other texts first gives the same rows as a fresh clone."""
    texts = ["a cat", "dog", "a long banana"]
    fresh = encode_texts_cached(texts, tmp_path / "fresh", encoder=BatchSensitiveTextEncoder())
    used = tmp_path / "used"
    encode_texts_cached(["dog"], used, encoder=BatchSensitiveTextEncoder())
    encode_texts_cached(["a cat", "x"], used, encoder=BatchSensitiveTextEncoder())
    again = encode_texts_cached(texts, used, encoder=BatchSensitiveTextEncoder())
    assert again.tobytes() == fresh.tobytes()


class BatchSensitiveImageEncoder(CountingEncoder):
    """Rows depend on the batch they are encoded in, and it records torch's thread count."""

    def encode(self, images, batch_size=32, progress=False):
        import torch
        images, out = list(images), []
        for s in range(0, len(images), batch_size):      # as the real encoders batch
            batch = images[s:s + batch_size]
            self.threads = getattr(self, "threads", []) + [torch.get_num_threads()]
            out.append(super().encode(batch) + 1e-3 * len(batch))
        return np.concatenate(out)


def test_encode_cached_rows_do_not_depend_on_history_batch_or_threads(tmp_path, monkeypatch):
    """On CPU every image is encoded alone with 1 torch thread (canonical_batch), whatever the
    caller's batch_size / thread count, so a cache filled in any order equals a fresh one."""
    import torch
    monkeypatch.chdir(tmp_path)
    _files(tmp_path, "im_1.jpg", "im_2.jpg", "im_3.jpg")
    table = pd.DataFrame({"image_id": [1, 2, 3], "path": ["im_1.jpg", "im_2.jpg", "im_3.jpg"]})
    enc = BatchSensitiveImageEncoder()
    _, fresh = encode_cached(table, tmp_path / "fresh", encoder=enc, batch_size=32)
    assert enc.threads == [1, 1, 1]                      # one image per call, one thread
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        encode_cached(table.iloc[[1]], tmp_path / "used", encoder=BatchSensitiveImageEncoder(),
                      batch_size=8, num_threads=2)
        _, again = encode_cached(table, tmp_path / "used", encoder=BatchSensitiveImageEncoder(),
                                 batch_size=2)
        assert torch.get_num_threads() == 2              # the caller's setting is restored
    finally:
        torch.set_num_threads(old)
    assert again.tobytes() == fresh.tobytes()
    assert canonical_batch("cpu", 32) == (1, 1) and canonical_batch("cuda:0", 32) == (32, 1)
    code = source_digest("biaslab.models.features")[:12]
    from biaslab.runtime import numerics
    mode = "" if numerics.mode() == "portable" else f"-{numerics.mode()}"
    assert cache_key("fake", 8) == f"fake_8px_{CACHE_VERSION}{mode}-{code}"
    assert cache_key("fake", 8, "cuda:0", 16) == \
        f"fake_8px_{CACHE_VERSION}{mode}-{code}_cuda0_b16"


def test_encode_cached_rejects_bad_tables(tmp_path):
    with pytest.raises(InputError, match="path"):
        encode_cached(pd.DataFrame({"image_id": [1]}), tmp_path, encoder=CountingEncoder())
    with pytest.raises(InputError, match="duplicate"):
        encode_cached(pd.DataFrame({"image_id": [1, 1], "path": ["a_1", "b_1"]}), tmp_path,
                      encoder=CountingEncoder())


def test_encode_cached_survives_corrupt_cache(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _files(tmp_path, "im_1.jpg")
    table = pd.DataFrame({"image_id": [1], "path": ["im_1.jpg"]})
    d = tmp_path / cache_key("fake", 8)
    d.mkdir()
    (d / "feats.npy").write_text("garbage")
    (d / "index.parquet").write_text("garbage")
    enc = CountingEncoder()
    _, f = encode_cached(table, tmp_path, encoder=enc)
    assert enc.encoded == ["im_1.jpg"] and f.tolist() == [[1.0, 1.0]]


# ------------------------------------------------------------------ MiniLM
def test_minilm_offline_similarity():
    enc = load_text_encoder("minilm")
    texts = ["A man riding a horse on a beach.", "A person rides a horse near the sea.",
             "A bowl of soup on a wooden table."]
    e = enc.encode(texts, batch_size=2)
    assert e.shape == (3, 384) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    sim = e @ e.T
    assert sim[0, 1] > sim[0, 2] + 0.3 and sim[0, 1] > sim[1, 2] + 0.3
    # order-independent (length-sorted batching) and equal to sentence-transformers' pooling
    np.testing.assert_allclose(enc.encode(texts[::-1])[::-1], e, atol=1e-5)
    from sentence_transformers import SentenceTransformer

    from biaslab.models.features import minilm_path
    st = SentenceTransformer(str(minilm_path()), device="cpu")
    np.testing.assert_allclose(st.encode(texts, normalize_embeddings=True), e, atol=1e-4)


# ------------------------------------------------------------------ objects / Eq. 5
def test_object_f1_hand_cases():
    assert object_f1(set(), set()) == 1.0
    assert object_f1({"dog"}, set()) == 0.0 and object_f1(set(), {"dog"}) == 0.0
    assert object_f1({"dog", "cat"}, {"dog", "cat"}) == 1.0
    assert object_f1({"dog"}, {"cat"}) == 0.0
    # P = 1/2, R = 1/1 -> F1 = 2/3
    assert object_f1({"dog", "cat"}, {"dog"}) == pytest.approx(2 / 3)
    # |A&B| = 2, |A| = 3, |B| = 4 -> 4/7, symmetric
    a, b = {"a", "b", "c"}, {"a", "b", "d", "e"}
    assert object_f1(a, b) == pytest.approx(4 / 7) == object_f1(b, a)


def test_best_f1_thresholds_and_map():
    y = np.array([[1, 0], [1, 0], [0, 0], [0, 1]], bool)
    p = np.array([[0.9, 0.2], [0.6, 0.1], [0.4, 0.3], [0.7, 0.8]])
    t = best_f1_thresholds(y, p, min_pos=2)
    # col 0: best cut keeps {0.9, 0.7, 0.6}: tp=2, F1 = 4/5 (keeping only 0.9: 2/3) -> midway
    # between 0.6 and the next score 0.4; col 1 has 1 positive < min_pos -> 0.5
    assert t[0] == pytest.approx(0.5) and t[1] == 0.5
    assert best_f1_thresholds(y, p, min_pos=1)[1] == pytest.approx(0.55)  # 0.8 | 0.3
    m, ap = mean_average_precision(np.c_[y, np.zeros(4, bool)], np.c_[p, p[:, 0]])
    # AP col0: ranks 0.9(+),0.7(-),0.6(+) -> (1 + 2/3)/2 = 5/6; col1: 1.0; col2 skipped
    assert ap[0] == pytest.approx(5 / 6) and ap[1] == 1.0 and np.isnan(ap[2])
    assert m == pytest.approx((5 / 6 + 1) / 2)


def test_label_matrix_and_frequent_categories():
    objs = pd.DataFrame({"image_id": [1, 1, 1, 2, 3], "category": ["dog", "dog", "cup", "dog",
                                                                   "cup"]})
    y, cats = object_label_matrix(objs, [3, 1, 2])
    assert cats == ["cup", "dog"]
    assert y.tolist() == [[True, False], [True, True], [False, True]]
    assert frequent_categories(objs, [1, 2], min_count=2) == ["dog"]


def test_object_predictor_learns_and_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    n, d = 300, 16
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = np.c_[x[:, 0] > 0.5, x[:, 1] < -0.5, x[:, 2] + x[:, 3] > 0]
    cats = ["cat", "dog", "cup"]
    pred, hist = train_object_predictor(x, y, cats, np.arange(200), np.arange(200, 250),
                                        settings=ObjectsSettings(epochs=200, lr=0.05))
    sets = pred.predict_sets(x[250:])
    assert len(sets) == 50 and all(isinstance(s, set) and s <= set(cats) for s in sets)
    m, _ = mean_average_precision(y[250:], pred.predict_proba(x[250:]))
    assert m > 0.9
    f1 = np.mean([object_f1(s, {c for c, v in zip(cats, row) if v})
                  for s, row in zip(sets, y[250:])])
    assert f1 > 0.8
    pred.save(tmp_path / "obj")
    again = load_object_predictor(tmp_path / "obj")
    assert isinstance(again, ObjectPredictor)
    np.testing.assert_allclose(again.predict_proba(x[:5]), pred.predict_proba(x[:5]))
    assert again.predict_sets(x[250:]) == sets


@pytest.mark.slow
def test_hf_detector_tiny_random(tmp_path):
    from transformers import YolosConfig, YolosForObjectDetection, YolosImageProcessor
    cfg = YolosConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=37, image_size=[64, 64], patch_size=16,
                      num_detection_tokens=5, num_labels=3,
                      id2label={0: "person", 1: "dog", 2: "cup"},
                      label2id={"person": 0, "dog": 1, "cup": 2})
    import torch
    model = YolosForObjectDetection(cfg)
    with torch.no_grad():   # random weights: make every detection token say "dog" (p ~ 0.98)
        model.class_labels_classifier.layers[-1].bias[1] = 6.0
    model.save_pretrained(tmp_path / "det")
    YolosImageProcessor(size={"shortest_edge": 64, "longest_edge": 64}).save_pretrained(
        tmp_path / "det")
    det = load_object_predictor(str(tmp_path / "det"), threshold=0.5)
    assert det.predict_sets(_images(2)) == [{"dog"}, {"dog"}]
    with torch.no_grad():   # now "person" everywhere: excluded by default -> empty sets
        det.model.class_labels_classifier.layers[-1].bias[:] = torch.tensor([12.0, 0, 0, 0])
    assert det.predict_sets(_images(2)) == [set(), set()]


# ------------------------------------------------------------------ stages
def _run_stage(script, cwd, monkeypatch):
    import runpy
    monkeypatch.chdir(cwd)
    monkeypatch.setattr("sys.argv", [str(REPO / "stages" / script)])   # not pytest's argv
    runpy.run_path(str(REPO / "stages" / script), run_name="__main__")


def test_features_and_objects_stages(tmp_path, monkeypatch):
    import json

    import yaml
    (tmp_path / "data" / "prepared").mkdir(parents=True)
    (tmp_path / "imgs").mkdir()
    rng = np.random.default_rng(0)
    n = 24
    ids = np.arange(100, 100 + n)
    paths = []
    for i in ids:   # two visual "objects": a red or a blue image, plus noise
        colour = (200, 30, 30) if i % 2 else (30, 30, 200)
        a = np.clip(np.array(colour) + rng.normal(0, 20, (40, 40, 3)), 0, 255).astype(np.uint8)
        paths.append(f"imgs/{i}.png")
        Image.fromarray(a).save(tmp_path / paths[-1])
    pd.DataFrame({"image_id": ids, "path": paths}).to_parquet(
        tmp_path / "data" / "prepared" / "images.parquet")
    pd.DataFrame({"image_id": ids, "category": np.where(ids % 2, "apple", "car")}).to_parquet(
        tmp_path / "data" / "prepared" / "objects.parquet")
    split = np.array(["train"] * 14 + ["val"] * 4 + ["test"] * 6)
    pd.DataFrame({"image_id": ids, "split": split}).to_parquet(tmp_path / "data" / "split.parquet")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "features": {"backbone": "efficientnet_lite0", "image_size": 64, "batch_size": 8,
                     "cache_dir": "data/cache/features"},
        "objects": {"min_count": 3, "epochs": 50, "lr": 0.01}}))
    _run_stage("features.py", tmp_path, monkeypatch)
    f = np.load(tmp_path / "data/features/images.npy")
    assert f.shape == (n, 1280) and f.dtype == np.float32
    assert np.load(tmp_path / "data/features/images_ids.npy").tolist() == ids.tolist()
    m = json.loads((tmp_path / "metrics/features.json").read_text())
    run = json.loads((tmp_path / "benchmarks/runs/features.json").read_text())
    assert m["n"] == n and m["dim"] == 1280 and run["computed"] == n and run["images_per_s"] > 0
    assert not {"computed", "cached", "seconds", "images_per_s"} & set(m)
    _run_stage("features.py", tmp_path, monkeypatch)            # second run: all cached
    assert json.loads((tmp_path / "benchmarks/runs/features.json").read_text())["computed"] == 0
    assert json.loads((tmp_path / "metrics/features.json").read_text()) == m

    _run_stage("train_objects.py", tmp_path, monkeypatch)
    m = json.loads((tmp_path / "metrics/objects.json").read_text())
    assert m["n_categories"] == 2 and m["n_test"] == 6 and m["test_mAP"] > 0.9
    pred = load_object_predictor(tmp_path / "data" / "objects")
    sets = pred.predict_sets([str(tmp_path / p) for p in paths[-6:]])  # raw images work too
    assert sets == [{"apple"} if i % 2 else {"car"} for i in ids[-6:]]


def _concurrent_writer(args):
    """One process of the concurrency test: encode ``keys`` into cache ``d`` one key per
    checkpoint, sleeping inside ``compute`` so that the two processes interleave."""
    import time as _t
    from pathlib import Path as _P

    from biaslab.models.features import _cached_rows
    d, keys = args

    def compute(positions):
        _t.sleep(0.01)
        return np.array([[keys[p], 2.0 * keys[p]] for p in positions], np.float32)

    out = _cached_rows(_P(d), ("text",), [(k,) for k in keys], lambda ps: compute(ps), None,
                       1, None)
    return out.tolist()


def test_feature_cache_is_safe_with_concurrent_writers(tmp_path):
    """Two processes append overlapping key sets to one cache at the same time, one row per
    checkpoint. Every key must end up with its own features (no lost or mismatched rows)."""
    import multiprocessing as mp

    from biaslab.models.features import _read_cache
    a = [(float(i),) for i in range(0, 30)]
    b = [(float(i),) for i in range(15, 45)]
    with mp.get_context("fork").Pool(2) as pool:
        res = pool.map(_concurrent_writer, [(str(tmp_path), [k[0] for k in a]),
                                            (str(tmp_path), [k[0] for k in b])])
    for keys, out in zip((a, b), res):
        assert out == [[k[0], 2 * k[0]] for k in keys]
    feats, index = _read_cache(tmp_path, ("text",), 2)
    got = {float(t): feats[r].tolist() for t, r in zip(index["text"], index["row"])}
    assert set(got) == {float(i) for i in range(45)}               # nothing lost
    assert all(v == [k, 2 * k] for k, v in got.items())             # nothing mismatched
    assert len(index) == 45 and len(feats) == 45                    # no duplicate rows
    assert (tmp_path / ".lock").exists()
