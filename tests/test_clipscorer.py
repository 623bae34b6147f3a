"""LiT-style offline CLIP scorer (biaslab.models.clipscorer)."""
import numpy as np
import pytest

from biaslab.models.clipscorer import (LiTScorer, clip_loss, is_lit_dir, load_scorer,
                                       retrieval_recall, train_lit)
from biaslab.models.settings import ScorerSettings
from biaslab.runtime.io import InputError


# small inputs on a shared 2-core machine: one torch thread is fastest (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def planted(n_img=300, d_img=48, d_txt=24, caps=2, noise=0.3, seed=0):
    """Image features + texts that are a fixed linear map of their image plus noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_img, d_img)).astype(np.float32) * 3 + 1   # unstandardised
    w = rng.normal(size=(d_img, d_txt)) / np.sqrt(d_img)
    txt_image = np.repeat(np.arange(n_img), caps)
    t = x[txt_image] @ w + noise * rng.normal(size=(len(txt_image), d_txt))
    return x, t.astype(np.float32), txt_image


def test_retrieval_recall_hand_case():
    img = np.array([[1.0, 0.0], [0.0, 1.0]])
    txt = np.array([[1.0, 0.1], [0.9, 1.0], [0.2, 1.0]])     # text 1 is closer to image 1
    r = retrieval_recall(img, txt, np.array([0, 0, 1]), ks=(1, 2))
    # i2t: image 0 -> best text 0 (own) ok; image 1 -> best text 2 (own) ok
    assert r["i2t_R@1"] == 1.0
    # t2i: text 0 -> image 0 ok; text 1 (of image 0) -> image 1 wrong; text 2 -> image 1 ok
    assert r["t2i_R@1"] == pytest.approx(2 / 3) and r["t2i_R@2"] == 1.0
    # chance: t2i k/n = 1/2; i2t image 0 has 2 of 3 texts: 2/3, image 1: 1/3 -> mean 1/2
    assert r["chance_t2i_R@1"] == 0.5
    assert r["chance_i2t_R@1"] == pytest.approx(0.5)
    # k=2: image 0: 1 - C(1,2)/C(3,2) = 1; image 1: 1 - C(2,2)/C(3,2) = 2/3
    assert r["chance_i2t_R@2"] == pytest.approx((1 + 2 / 3) / 2)
    with pytest.raises(ValueError):
        retrieval_recall(img, txt, np.array([0, 0, 2]))


def test_clip_loss_symmetric_and_low_for_matched():
    import torch
    z = torch.nn.functional.normalize(torch.randn(8, 4), dim=-1)
    s = torch.tensor(np.log(100.0))
    good, bad = clip_loss(z, z, s), clip_loss(z, z.roll(1, 0), s)
    assert float(good) < float(bad)
    a, b = torch.randn(6, 4), torch.randn(6, 4)
    a, b = (torch.nn.functional.normalize(v, dim=-1) for v in (a, b))
    assert float(clip_loss(a, b, s)) == pytest.approx(float(clip_loss(b, a, s)), rel=1e-6)


def test_lit_learns_planted_relation_and_round_trips(tmp_path):
    x, t, ti = planted()
    train, val, test = np.arange(200), np.arange(200, 240), np.arange(240, 300)
    seen = []
    scorer, hist = train_lit(x, t, ti, train, val,
                             settings=ScorerSettings(proj_dim=16, epochs=40, lr=1e-2,
                                                     batch_size=64, dropout=0.0, patience=40),
                             on_epoch=lambda e, r: seen.append(e))
    assert seen == list(range(len(hist))) and len(hist) == 40
    assert hist[-1]["loss"] < hist[0]["loss"]
    mask = np.isin(ti, test)
    pos = {int(i): k for k, i in enumerate(test)}
    r = retrieval_recall(scorer.encode_images(x[test]), scorer.encode_texts(t[mask]),
                         np.array([pos[int(i)] for i in ti[mask]]))
    assert r["chance_t2i_R@1"] == pytest.approx(1 / 60)
    assert r["t2i_R@1"] > 0.5 and r["i2t_R@1"] > 0.5           # chance is ~0.02-0.03
    assert r["t2i_R@5"] >= r["t2i_R@1"]
    zi = scorer.encode_images(x[:5])
    assert zi.shape == (5, 16)
    np.testing.assert_allclose(np.linalg.norm(zi, axis=1), 1.0, atol=1e-5)
    sim = scorer.similarity(x[test[:10]], t[np.searchsorted(ti, test[:10])])
    assert sim.shape == (10,) and (np.abs(sim) <= 1 + 1e-6).all()

    scorer.save(tmp_path / "lit")
    assert is_lit_dir(tmp_path / "lit")
    again = load_scorer(tmp_path / "lit")
    assert isinstance(again, LiTScorer) and again.config["d_img"] == 48
    np.testing.assert_array_equal(
        again.similarity(x[test[:10]], t[np.searchsorted(ti, test[:10])]), sim)
    with pytest.raises(ValueError):
        scorer.similarity(x[:3], t[:2])
    with pytest.raises(ValueError, match="image features"):
        scorer.encode_images(np.zeros((2, 5), np.float32))


def test_lit_untrained_is_at_chance_and_training_helps():
    # the same data with shuffled pairs must NOT be learnable: guards against leakage
    x, t, ti = planted(seed=1)
    rng = np.random.default_rng(0)
    ti_shuffled = rng.permutation(ti)
    train, test = np.arange(200), np.arange(240, 300)
    scorer, _ = train_lit(x, t, ti_shuffled, train, None,
                          settings=ScorerSettings(proj_dim=16, epochs=10, lr=1e-2, batch_size=64))
    mask = np.isin(ti_shuffled, test)
    pos = {int(i): k for k, i in enumerate(test)}
    r = retrieval_recall(scorer.encode_images(x[test]), scorer.encode_texts(t[mask]),
                         np.array([pos[int(i)] for i in ti_shuffled[mask]]))
    assert r["t2i_R@1"] < 0.15


def test_load_scorer_errors(tmp_path):
    with pytest.raises(InputError):
        LiTScorer.load(tmp_path)
    with pytest.raises(ValueError):
        train_lit(np.zeros((3, 4), np.float32), np.zeros((2, 3), np.float32),
                  np.array([0, 1, 2]), np.arange(3))


def test_lit_satisfies_clipscorer_protocol():
    quality = pytest.importorskip("biaslab.metrics.quality")
    x, t, ti = planted(n_img=20)
    scorer, _ = train_lit(x, t, ti, np.arange(20), None, settings=ScorerSettings(epochs=1, proj_dim=8))
    assert isinstance(scorer, quality.ClipScorer)


class FakeTextEncoder:
    """Caption "img <i> v<j>" -> base vector of image i + small noise (no MiniLM needed)."""
    name, dim = "fake", 12

    def encode(self, texts, batch_size=128, progress=False):
        out = []
        for t in texts:
            i, j = (int(w.strip("v")) for w in t.split()[1:3])
            base = np.random.default_rng(i).normal(size=self.dim)
            out.append(base + 0.1 * np.random.default_rng(1000 + 7 * i + j).normal(size=self.dim))
        return np.array(out, np.float32).reshape(-1, self.dim)


def test_train_scorer_stage(tmp_path, monkeypatch):
    import json
    import runpy
    from pathlib import Path

    import pandas as pd
    import yaml

    import biaslab.models.features
    monkeypatch.setattr(biaslab.models.features, "load_text_encoder", lambda *a, **k: FakeTextEncoder())
    n = 40
    ids = np.arange(500, 500 + n)
    base = np.stack([np.random.default_rng(i).normal(size=12) for i in range(n)])
    w = np.random.default_rng(0).normal(size=(12, 20))
    (tmp_path / "data" / "features").mkdir(parents=True)
    (tmp_path / "data" / "prepared").mkdir(parents=True)
    np.save(tmp_path / "data/features/images.npy", (base @ w).astype(np.float32))
    np.save(tmp_path / "data/features/images_ids.npy", ids)
    pd.DataFrame({"caption_id": np.arange(2 * n), "image_id": np.repeat(ids, 2),
                  "caption": [f"img {i} v{j}" for i in range(n) for j in range(2)]}
                 ).to_parquet(tmp_path / "data/prepared/captions.parquet")
    pd.DataFrame({"image_id": ids, "split": ["train"] * 24 + ["val"] * 6 + ["test"] * 10}
                 ).to_parquet(tmp_path / "data/split.parquet")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "features": {"backbone": "efficientnet_lite0", "image_size": 224},
        "scorer": {"proj_dim": 8, "epochs": 25, "lr": 0.02, "batch_size": 8, "dropout": 0.0,
                   "patience": 25, "text_encoder": "fake"}}))
    monkeypatch.chdir(tmp_path)
    script = str(Path(__file__).resolve().parents[1] / "stages" / "train_scorer.py")
    monkeypatch.setattr("sys.argv", [script])       # the script's own argv, not pytest's
    runpy.run_path(script, run_name="__main__")
    m = json.loads((tmp_path / "metrics/scorer.json").read_text())
    assert m["n_test_images"] == 10 and m["n_test_captions"] == 20
    assert m["chance_t2i_R@1"] == 0.1 and m["t2i_R@1"] >= 0.5 and m["i2t_R@5"] >= m["i2t_R@1"]
    assert m["epochs_run"] == 25
    loss = (tmp_path / "dvclive/scorer/plots/metrics/train/loss.tsv").read_text().splitlines()
    assert loss[0].split() == ["step", "loss"] and len(loss) == 26
    scorer = load_scorer(tmp_path / "data" / "scorer")
    assert scorer.config["text_encoder"] == "fake" and scorer.config["d_img"] == 20
    from biaslab.models.features import cache_key
    assert len(list((tmp_path / "data/cache/text" / f"text_{cache_key('fake', None)}"
                    ).glob("*.npy"))) >= 1


def test_encode_texts_encodes_each_distinct_text_once_in_any_order():
    """Captioners repeat captions: each distinct text reaches the text encoder once, in sorted
    order, so the result of a text does not depend on the others or on their order."""
    x, _, ti = planted(n_img=20, d_txt=FakeTextEncoder.dim)
    t = FakeTextEncoder().encode([f"img {i} v0" for i in ti])
    scorer, _ = train_lit(x, t, ti, np.arange(20), None, settings=ScorerSettings(epochs=1, proj_dim=8))
    seen = []

    class Counting(FakeTextEncoder):
        def encode(self, texts, batch_size=128, progress=False):
            seen.append(list(texts))
            return super().encode(texts, batch_size, progress)

    scorer._text_encoder = Counting()
    texts = ["img 3 v1", "img 1 v0", "img 3 v1", "img 2 v0", "img 1 v0"]
    z = scorer.encode_texts(texts)
    assert seen == [["img 1 v0", "img 2 v0", "img 3 v1"]]
    assert z.shape == (5, 8)
    np.testing.assert_array_equal(z[0], z[2])
    np.testing.assert_array_equal(z[1], z[4])
    again = scorer.encode_texts(list(reversed(texts)))
    np.testing.assert_array_equal(again, z[::-1])
    assert scorer.encode_texts([]).shape == (0, 8)
