"""Paper tier of Table 2's Transformer (paper 000 app. B.2: ViT + GPT-2 through Hugging Face
``VisionEncoderDecoderModel``), offline: a tiny random ViT and GPT-2 saved by
``save_pretrained`` go through the same ``transformer`` architecture entry the stages use
(``captioner.transformer.encoder`` / ``decoder`` set to their directories). Images are real
coco-mini photos; captions are made up: the plumbing is tested, not what the model learns."""
import numpy as np
import pandas as pd
import pytest

from tests.conftest import COCO_MINI

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from biaslab import captioning as K  # noqa: E402
from biaslab.captioning.tokens import build_tokenizer  # noqa: E402
from biaslab.models.features import torch_threads  # noqa: E402
from biaslab.runtime.io import InputError  # noqa: E402

IMAGES = sorted((COCO_MINI / "images" / "train2017").glob("*.jpg"))[:6]
pytestmark = pytest.mark.skipif(len(IMAGES) < 6, reason="../shared/coco-mini not present")

CAPTIONS = ["a man riding a horse", "a woman holding a cup", "a man with a dog",
            "a woman riding a bike", "a dog on a couch", "a cup on a table",
            "a man holding a cup", "a woman with a dog"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(encoder dir, decoder dir): tiny random ViT (32 px, patch 8) + image processor, tiny
    GPT-2 + the word-level tokenizer, each saved with save_pretrained."""
    T = transformers
    d = tmp_path_factory.mktemp("vitgpt2")
    torch.manual_seed(0)
    T.ViTModel(T.ViTConfig(image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=32)
               ).save_pretrained(d / "vit")
    T.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(d / "vit")
    tok = build_tokenizer(CAPTIONS, min_count=1)
    eos = tok.eos_token_id
    T.GPT2LMHeadModel(T.GPT2Config(vocab_size=len(tok), n_positions=32, n_embd=16, n_layer=1,
                                   n_head=2, bos_token_id=eos, eos_token_id=eos,
                                   pad_token_id=tok.pad_token_id)).save_pretrained(d / "gpt2")
    tok.save_pretrained(d / "gpt2")
    return str(d / "vit"), str(d / "gpt2")


def _config(checkpoints, **kw):
    enc, dec = checkpoints
    p = {"epochs": 2, "max_len": 8, "beam": 2, "patience": 5, "seed": 0, "num_threads": 1,
         "transformer": {"encoder": enc, "decoder": dec, "lr": 1e-3, "batch_size": 4}}
    return K.get_arch("transformer").config_from_params(p, **kw)


def _train(checkpoints, seed=0):
    arch = K.get_arch("transformer")
    cfg = _config(checkpoints, seed=seed)
    table = pd.DataFrame({"image_id": range(6), "path": [str(p) for p in IMAGES]})
    x = arch.features(table, "unused-cache", cfg)
    rows = [k % 4 for k in range(8)]
    with torch_threads(1):
        return arch.train(x, CAPTIONS, rows, x, CAPTIONS[:4], [4, 5, 4, 5], cfg), x


def test_paper_tier_transformer_trains_generates_saves_and_loads(checkpoints, tmp_path):
    arch = K.get_arch("transformer")
    cfg = _config(checkpoints)
    assert cfg.pixels and arch.feature_key(cfg) == ("pixels",)
    (model, hist), x = _train(checkpoints)
    assert x.dtype == object and list(x) == [str(p) for p in IMAGES]
    assert [h["epoch"] for h in hist] == [0, 1]
    assert all(np.isfinite([h["train_loss"], h["val_loss"]]).all() for h in hist)
    assert model.meta["n_train_captions"] == 8 and model.meta["n_train_images"] == 4
    assert type(model).__name__ == "ViTGPT2Captioner"
    # the cross-attention layers exist and were trained with the rest
    assert any("crossattention" in n for n, _ in model.model.net.named_parameters())
    with torch_threads(1):
        caps = model.generate(x[:3])
        again = model.generate(x[:3])
    assert len(caps) == 3 and all(isinstance(c, str) for c in caps) and caps == again
    loss = model.loss(x[:2], CAPTIONS[:2])
    assert np.isfinite(loss) and loss > 0

    # same seed -> same training; the saved model comes back through the arch's loader
    (model2, hist2), _ = _train(checkpoints)
    assert [h["train_loss"] for h in hist2] == [h["train_loss"] for h in hist]
    model.save(tmp_path / "m")
    back = arch.load(tmp_path / "m", num_threads=1)
    assert type(back).__name__ == "ViTGPT2Captioner" and back.config.pixels
    with torch_threads(1):
        assert back.generate(x[:3]) == caps
    assert back.loss(x[:2], CAPTIONS[:2]) == pytest.approx(loss, rel=1e-6)
    assert back.meta["n_train_captions"] == 8 and "train_seconds" not in back.meta


def test_paper_tier_inputs_are_checked(checkpoints, tmp_path):
    arch = K.get_arch("transformer")
    cfg = _config(checkpoints)
    missing = pd.DataFrame({"image_id": [0], "path": [str(tmp_path / "nope.jpg")]})
    with pytest.raises(InputError, match="nope.jpg"):
        arch.features(missing, "unused", cfg)
    with pytest.raises(ValueError, match="image paths"):
        arch.train(np.zeros((4, 3), np.float32), CAPTIONS[:4], [0, 1, 2, 3], config=cfg)
    bad = _config((str(tmp_path / "no-vit"), checkpoints[1]))
    table = pd.DataFrame({"image_id": range(2), "path": [str(p) for p in IMAGES[:2]]})
    with pytest.raises(InputError, match="no-vit"):
        arch.train(arch.features(table, "unused", bad), CAPTIONS[:2], [0, 1], config=bad)


def test_offline_tier_is_unchanged_by_the_switch():
    cfg = K.get_arch("transformer").config_from_params({})
    assert cfg.encoder == "grid" and cfg.decoder == "tiny" and not cfg.pixels
    assert K.get_arch("transformer").feature_key(cfg)[0] == cfg.grid


def test_stages_run_the_paper_tier_transformer(checkpoints, tmp_path, monkeypatch):
    """train_captioner / eval_captioner with captioner.transformer.encoder / decoder set to
    the checkpoints: the same stages, files and Table 2 rows as the offline tier."""
    import json

    import yaml

    from tests.test_captioning import _load_stage, _workspace
    monkeypatch.chdir(tmp_path)
    _workspace(tmp_path, n_images=30)
    enc, dec = checkpoints
    params = {
        "label": {"words": "lic"},
        "features": {"backbone": "efficientnet_lite0", "image_size": 64,
                     "cache_dir": "data/cache/features"},
        "lic": {"classifier": "lstm", "preset": "ci", "seeds": 1, "num_threads": 1},
        "captioner": {"max_len": 8, "epochs": 1, "patience": 2, "beam": 1, "num_threads": 1,
                      "seeds": [0], "datasets": ["original"], "archs": ["transformer"],
                      "transformer": {"encoder": enc, "decoder": dec, "lr": 1e-3,
                                      "batch_size": 16}},
        "eval_captioner": {"biasamp_min_count": 1, "workers": 1},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    _load_stage("train_captioner").main(["--dataset", "original", "--workers", "1"])
    tdir = tmp_path / "data/models/captioner/original/original-transformer-0"
    saved = json.loads((tdir / "transformer.json").read_text())
    assert saved["impl"] == "vit_gpt2" and saved["config"]["encoder"] == enc
    assert not (tmp_path / "data/cache/features").exists() or not any(
        "grid" in p.name for p in (tmp_path / "data/cache/features").iterdir())
    _load_stage("eval_captioner").main()
    metrics = json.loads((tmp_path / "metrics/captioning.json").read_text())
    tr = metrics["archs"]["transformer"]
    # one epoch of a random tiny model: captions carry no gender words, so LIC is undefined;
    # the rows and their keys are what is checked here
    assert tr["original"]["METEOR"]["n"] == 1 and set(tr["original"]) >= {"LIC", "Ratio"}
    caps = json.loads((tmp_path / "data/captions/original-transformer-0.json").read_text())
    assert len(caps) == metrics["test_set"]["n_images"]
