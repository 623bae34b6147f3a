"""Paper-tier classification backbones of paper 000 Table 1 (appendix B.1: ResNet-50, Swin-T,
ConvNeXt-B), tested offline.

No network: each architecture is a tiny randomly initialised model of the same transformers
class as the real checkpoint (``ResNetModel`` / ``SwinModel`` / ``ConvNextModel``) with the
image-processor class and resize convention of that checkpoint, saved with ``save_pretrained``
into a temporary directory and loaded by the same code path as a hub name
(``biaslab.models.features.load_image_encoder`` -> ``HFImageEncoder``; the classifier's
``train_finetune`` and ``GenderObjectClassifier.save`` / ``load``). Images are real
coco-mini photos; the classifier's labels are made up (alternating gender, ``cup`` on two
images in three): only the plumbing is tested, not what the model learns.
"""
import numpy as np
import pandas as pd
import pytest

from tests.conftest import COCO_MINI

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import biaslab.classify as C  # noqa: E402
from biaslab.data.datasets import MANIFEST_COLUMNS  # noqa: E402
from biaslab.models.encoders import _size_kwargs  # noqa: E402
from biaslab.models.features import (canonical_batch, encode_cached,  # noqa: E402
                                     load_image_encoder, torch_threads)

IMAGES = sorted((COCO_MINI / "images" / "train2017").glob("*.jpg"))[:8]
pytestmark = pytest.mark.skipif(len(IMAGES) < 8, reason="../shared/coco-mini not present")

WIDTH = 16          # channels of the tiny models' last stage = feature dim


def _tiny(arch):
    """(model, image processor) of ``arch`` (a PAPER_BACKBONES key): the checkpoint's classes,
    two stages, last stage WIDTH channels, 32 px crop."""
    T = transformers
    if arch == "ResNet-50":       # microsoft/resnet-50: bottleneck ResNet, ConvNeXt processor
        cfg = T.ResNetConfig(embedding_size=8, hidden_sizes=[8, WIDTH], depths=[1, 1],
                             layer_type="bottleneck")
        return T.ResNetModel(cfg), T.ConvNextImageProcessor(size={"shortest_edge": 32},
                                                            crop_pct=0.875)
    if arch == "Swin-T":          # microsoft/swin-tiny-patch4-window7-224: ViT processor
        cfg = T.SwinConfig(image_size=32, patch_size=4, embed_dim=WIDTH // 2, depths=[1, 1],
                           num_heads=[1, 2], window_size=2)
        return T.SwinModel(cfg), T.ViTImageProcessor(size={"height": 32, "width": 32})
    if arch == "ConvNeXt-B":      # facebook/convnext-base-224
        cfg = T.ConvNextConfig(hidden_sizes=[8, WIDTH], depths=[1, 1], num_stages=2)
        return T.ConvNextModel(cfg), T.ConvNextImageProcessor(size={"shortest_edge": 32},
                                                              crop_pct=0.875)
    raise KeyError(arch)


@pytest.fixture(scope="module", params=list(C.PAPER_BACKBONES))
def backbone(request, tmp_path_factory):
    """(arch, directory) of a tiny random model saved with save_pretrained."""
    arch = request.param
    torch.manual_seed(0)
    model, processor = _tiny(arch)
    d = tmp_path_factory.mktemp(arch.replace("-", "_").lower())
    model.save_pretrained(d)
    processor.save_pretrained(d)
    return arch, str(d)


def _hand_pool(model, px, arch):
    """The pooled feature as each architecture defines it, from its last hidden state."""
    h = model(pixel_values=px).last_hidden_state
    if arch == "ResNet-50":       # (n, C, h, w): global average pool (pooler (n, C, 1, 1))
        return h.mean(dim=(2, 3))
    if arch == "Swin-T":          # (n, tokens, C), already layer-normed: mean over tokens
        return h.mean(dim=1)
    return model.layernorm(h.mean(dim=(-2, -1)))   # ConvNeXt: layer norm of the spatial mean


def test_paper_backbone_names():
    assert C.PAPER_BACKBONES == {"ResNet-50": "microsoft/resnet-50",
                                 "Swin-T": "microsoft/swin-tiny-patch4-window7-224",
                                 "ConvNeXt-B": "facebook/convnext-base-224"}


def test_size_kwargs_follow_the_processor_convention():
    T = transformers
    assert _size_kwargs(T.ConvNextImageProcessor(size={"shortest_edge": 224}), 48) == \
        {"size": {"shortest_edge": 48}}
    assert _size_kwargs(T.ViTImageProcessor(size={"height": 224, "width": 224}), 48) == \
        {"size": {"height": 48, "width": 48}}
    clip = T.CLIPImageProcessor(size={"shortest_edge": 224},
                                crop_size={"height": 224, "width": 224})
    assert _size_kwargs(clip, 48) == {"size": {"shortest_edge": 48},
                                      "crop_size": {"height": 48, "width": 48}}


# ------------------------------------------------------------------ frozen feature backbone
def test_frozen_backbone_encodes_real_images(backbone):
    arch, d = backbone
    with torch_threads(1):
        enc = load_image_encoder(d)                       # image_size None: processor's 32 px
        f = enc.encode(IMAGES[:3], batch_size=2)
        assert enc.dim == WIDTH and f.shape == (3, WIDTH) and f.dtype == np.float32
        assert np.isfinite(f).all() and f.std() > 0
        from biaslab.models.encoders import open_rgb
        px = enc._preprocess([open_rgb(p) for p in IMAGES[:3]])
        assert tuple(px.shape) == (3, 3, 32, 32)
        with torch.inference_mode():
            hand = _hand_pool(enc.model, px, arch).numpy()
        np.testing.assert_allclose(f, hand, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(enc.encode(IMAGES[:3], batch_size=1), f, atol=1e-5)
        np.testing.assert_array_equal(load_image_encoder(d).encode(IMAGES[:3], batch_size=2), f)


def test_image_size_rescales_the_processors_crop(backbone):
    """features.image_size (default 224) used to crash ResNet / ConvNeXt processors under
    transformers 5 ({"height", "width"} passed to a shortest-edge processor)."""
    _, d = backbone
    from biaslab.models.encoders import open_rgb
    with torch_threads(1):
        native = load_image_encoder(d).encode(IMAGES[:2])
        same = load_image_encoder(d, image_size=32)       # = the processor's own crop
        np.testing.assert_array_equal(same.encode(IMAGES[:2]), native)
        for s in (48, 224):
            enc = load_image_encoder(d, image_size=s)
            assert tuple(enc._preprocess([open_rgb(IMAGES[0])]).shape) == (1, 3, s, s)
            f = enc.encode(IMAGES[:1])
            assert f.shape == (1, WIDTH) and np.isfinite(f).all()


def test_encode_cached_with_a_backbone_directory(backbone, tmp_path):
    """The `features` stage path: the content-keyed cache under the directory's name."""
    _, d = backbone
    table = pd.DataFrame({"image_id": range(3), "path": [str(p) for p in IMAGES[:3]]})
    with torch_threads(1):
        st = {}
        ids, f = encode_cached(table, tmp_path / "cache", d, image_size=32, stats=st)
        assert st["computed"] == 3 and f.shape == (3, WIDTH)
        # The cache's contract is bit-equality with a fresh *canonical* encoding (CPU: batch 1,
        # 1 thread); a batch of 3 may differ in the last float bit (GEMM blocking).
        bs, _ = canonical_batch("cpu", 32)
        fresh = load_image_encoder(d, image_size=32).encode(IMAGES[:3], batch_size=bs)
        np.testing.assert_array_equal(f, fresh)
        _, again = encode_cached(table, tmp_path / "cache", d, image_size=32, stats=st)
        assert st["computed"] == 0
        np.testing.assert_array_equal(again, f)


# ------------------------------------------------------------------ fine-tuned classifier
def _manifest():
    rows = [(k, "female" if k % 2 else "male", ["cup"] if k % 3 else []) for k in range(8)]
    df = pd.DataFrame(rows, columns=["image_id", "gender", "objects"])
    df["sample_id"] = df["image_id"].astype(str)
    df["path"] = [str(p) for p in IMAGES]
    df["captions"] = [[] for _ in range(len(df))]
    df["counterfactual"] = False
    return df[MANIFEST_COLUMNS]


def _finetune(d, seed):
    with torch_threads(1):
        return C.train_finetune(_manifest(), ["cup"], backbone=d, image_size=32, seed=seed,
                                device="cpu",
                                settings=C.TrainSettings(epochs=2, lr=1e-3, batch_size=4,
                                        val_fraction=0.25, patience=5))


def test_finetuned_classifier_trains_saves_and_loads(backbone, tmp_path):
    arch, d = backbone
    clf, hist = _finetune(d, seed=0)
    assert [h["epoch"] for h in hist] == [0, 1]
    assert all(np.isfinite([h["train_loss"], h["val_loss"]]).all() for h in hist)
    assert clf.outputs == ["cup", "woman", "man"]
    assert clf.config["finetune"] and clf.config["d_img"] == WIDTH
    assert clf.config["n_train"] == 6 and clf.config["n_val"] == 2
    with torch_threads(1):
        f = clf.encode(IMAGES[:3])
        frozen = load_image_encoder(d, image_size=32).encode(IMAGES[:3])
    assert f.shape == (3, WIDTH) and f.dtype == np.float32 and np.isfinite(f).all()
    assert not np.allclose(f, frozen)                     # the backbone was trained
    p = clf.predict_proba(f)
    assert p.shape == (3, 3) and ((p > 0) & (p < 1)).all()
    pw, pm = clf.gender_proba(f)
    np.testing.assert_array_equal(pw, p[:, 1])
    np.testing.assert_array_equal(pm, p[:, 2])

    # determinism given the seed (CPU, one thread): bitwise equal weights -> outputs
    clf2, hist2 = _finetune(d, seed=0)
    assert [h["train_loss"] for h in hist2] == [h["train_loss"] for h in hist]
    with torch_threads(1):
        np.testing.assert_array_equal(clf2.encode(IMAGES[:3]), f)
    np.testing.assert_array_equal(clf2.predict_proba(f), p)

    # save / load round trip: the fine-tuned backbone and head come back identical
    clf.save(tmp_path / "clf")
    assert (tmp_path / "clf" / C.BACKBONE_FILE).is_file()
    back = C.GenderObjectClassifier.load(tmp_path / "clf")
    with torch_threads(1):
        f_back = back.encode(IMAGES[:3])
    np.testing.assert_array_equal(f_back, f)
    np.testing.assert_array_equal(back.predict_proba(f_back), p)
    assert back.outputs == clf.outputs and back.config["backbone"] == d


def test_finetune_seed_changes_the_model(backbone):
    _, d = backbone
    a, _ = _finetune(d, seed=0)
    b, _ = _finetune(d, seed=1)
    with torch_threads(1):
        assert not np.allclose(a.encode(IMAGES[:2]), b.encode(IMAGES[:2]))


@pytest.mark.parametrize("method", ["adversarial", "group_dro", "domain_independent"])
def test_methods_fine_tune_the_backbone(backbone, method, tmp_path):
    """The model-level baselines on a fine-tuned backbone. The method's layout and
    inference rule hold (adversarial: no gender outputs; DomInd: objects + genders from two
    object heads), its loss reaches the backbone, and save/load round-trips."""
    arch, d = backbone
    if arch != "ResNet-50":
        pytest.skip("one architecture is enough for the method plumbing")
    with torch_threads(1):
        clf, hist = C.train_finetune(_manifest(), ["cup"], backbone=d, image_size=32, seed=0,
                                     device="cpu", method=method,
                                     settings=C.TrainSettings(epochs=2, lr=1e-3, batch_size=4,
                                             val_fraction=0.25, patience=5))
        f = clf.encode(IMAGES[:3])
        frozen = load_image_encoder(d, image_size=32).encode(IMAGES[:3])
    assert len(hist) == 2 and all(np.isfinite(h["val_loss"]) for h in hist)
    assert clf.config["finetune"] and clf.config["method"] == method
    assert not np.allclose(f, frozen)                     # the backbone was trained
    expected = ["cup"] if method == "adversarial" else ["cup", "woman", "man"]
    assert clf.outputs == expected and clf.has_gender == (method != "adversarial")
    p = clf.predict_proba(f)
    assert p.shape == (3, len(expected)) and ((p > 0) & (p < 1)).all()
    if method == "adversarial":
        assert clf.config["hidden"] == [clf.method.params["repr_dim"]]
        assert np.isnan(hist[0]["val_gender_acc"])
    clf.save(tmp_path / "clf")
    back = C.GenderObjectClassifier.load(tmp_path / "clf")
    with torch_threads(1):
        np.testing.assert_array_equal(back.encode(IMAGES[:3]), f)
    np.testing.assert_array_equal(back.predict_proba(f), p)
    assert back.config["method"] == method and back.outputs == expected
