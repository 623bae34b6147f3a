"""BLIP-2 as the ``blip2`` architecture of Table 2 (paper 000 app. B.2), offline: a tiny random
Blip2ForConditionalGeneration saved by save_pretrained is fine-tuned through the shared
training loop and the stages' arch entry. Images are real coco-mini photos; captions are made
up: the plumbing is tested, not what the model learns."""
import numpy as np
import pandas as pd
import pytest

from tests.conftest import COCO_MINI

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from biaslab import captioning as K  # noqa: E402
from biaslab.models.features import torch_threads  # noqa: E402
from tests.test_captioning import tiny_blip2  # noqa: E402

IMAGES = sorted((COCO_MINI / "images" / "train2017").glob("*.jpg"))[:6]
pytestmark = pytest.mark.skipif(len(IMAGES) < 6, reason="../shared/coco-mini not present")

CAPTIONS = ["a man riding a horse", "a woman holding a cup", "a man with a dog",
            "a woman riding a bike", "a dog on a couch", "a cup on a table",
            "a man holding a cup", "a woman with a dog"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return str(tiny_blip2(tmp_path_factory.mktemp("blip2") / "m", CAPTIONS))


def _train(checkpoint, seed=0):
    arch = K.get_arch("blip2")
    cfg = arch.config_from_params({"epochs": 2, "patience": 5, "num_threads": 1,
                                   "blip2": {"model": checkpoint, "lr": 1e-2, "batch_size": 4,
                                             "beam": 2, "max_len": 6}}, seed=seed)
    table = pd.DataFrame({"image_id": range(6), "path": [str(p) for p in IMAGES]})
    x = arch.features(table, "unused-cache", cfg)
    with torch_threads(1):
        model, hist = arch.train(x, CAPTIONS, [k % 4 for k in range(8)], x, CAPTIONS[:4],
                                 [4, 5, 4, 5], cfg)
    return model, hist, x, cfg


def test_blip2_arch_trains_the_qformer_generates_saves_and_loads(checkpoint, tmp_path):
    from transformers import Blip2ForConditionalGeneration
    arch = K.get_arch("blip2")
    before = Blip2ForConditionalGeneration.from_pretrained(checkpoint).state_dict()
    model, hist, x, cfg = _train(checkpoint)
    assert cfg.pixels and arch.feature_key(cfg) == ("pixels",) and x.dtype == object
    assert [h["epoch"] for h in hist] == [0, 1]
    assert all(np.isfinite([h["train_loss"], h["val_loss"]]).all() for h in hist)
    assert model.meta["n_train_captions"] == 8
    after = model.model.net.state_dict()
    changed = {k for k in after if not torch.equal(after[k], before[k])}
    assert "query_tokens" in changed and any(k.startswith("qformer.") for k in changed)
    assert not any(k.startswith(("language_model.", "vision_model.")) for k in changed)
    with torch_threads(1):
        caps = model.generate(x[:3])
    assert len(caps) == 3 and all(isinstance(c, str) and "<image>" not in c for c in caps)
    # same seed -> same training; save / load through the arch's loader
    model2, hist2, _, _ = _train(checkpoint)
    assert [h["train_loss"] for h in hist2] == [h["train_loss"] for h in hist]
    model.save(tmp_path / "m")
    assert (tmp_path / "m" / arch.config_file).is_file()
    back = arch.load(tmp_path / "m", num_threads=1)
    with torch_threads(1):
        assert back.generate(x[:3]) == caps
    assert back.config.lr == 1e-2 and back.meta["n_train_captions"] == 8


def test_blip2_params_are_checked():
    arch = K.get_arch("blip2")
    cfg = arch.config_from_params({})
    assert cfg.model == "Salesforce/blip2-opt-2.7b" and cfg.lr == 2e-6 and cfg.batch_size == 8
    with pytest.raises(ValueError, match="captioner.blip2: unknown"):
        arch.config_from_params({"blip2": {"nope": 1}})
    with pytest.raises(ValueError, match="captioner.blip2.lr"):
        arch.config_from_params({"blip2": {"lr": 0}})
    assert K.archs_from_params({"archs": ["clipcap", "blip2", "transformer"]}) == \
        ["clipcap", "blip2", "transformer"]
