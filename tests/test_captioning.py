"""biaslab/captioning/: the architecture registry, the Transformer captioner (grid features,
causal decoder, beam search, determinism), the train/eval stages over `captioner.archs`, and
BLIP-2 offline (a tiny random model through the paper tier's `from_pretrained` path)."""
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from biaslab import captioning as K
from biaslab.captioning import decoding
from biaslab.captioning import transformer as T
from biaslab.runtime.io import InputError
from tests.test_captioner import TOY, _load_stage, _tiny_dcg, _toy, _workspace

torch = pytest.importorskip("torch")


def _grid_toy(cells=4, seed=1):
    """The ClipCap toy task as grids: each image's feature repeated over ``cells`` cells with
    noise -> (grid (n, cells, dim), captions, rows, cluster)."""
    feats, caps, rows, cluster = _toy()
    rng = np.random.default_rng(seed)
    grid = np.stack([feats + rng.normal(0, 0.1, feats.shape).astype(np.float32)
                     for _ in range(cells)], 1)
    return grid, caps, rows, cluster


def _tcfg(**kw):
    base = dict(grid=2, enc_layers=1, dec_layers=1, d_model=32, heads=2, ff=64, dropout=0.0,
                max_len=8, epochs=40, lr=3e-3, batch_size=16, patience=5, beam=2, min_count=1)
    return T.TransformerConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def toy_transformer():
    grid, caps, rows, cluster = _grid_toy()
    model, hist = T.train_captioner(grid, caps, rows, grid, caps, rows, _tcfg())
    return model, hist, grid, cluster


# ------------------------------------------------------------------------------- registry
def test_registry_names_and_paths():
    from biaslab import registry
    assert sorted(registry.ARCHS.names()) == ["blip2", "clipcap", "transformer"]
    with pytest.raises(ValueError, match=r"captioner.archs.*'vit'.*known"):
        K.get_arch("vit")
    assert K.archs_from_params({}) == ["clipcap"]
    assert K.archs_from_params({"archs": ["clipcap", "transformer"]}) == ["clipcap", "transformer"]
    with pytest.raises(ValueError, match="repeated"):
        K.archs_from_params({"archs": ["transformer", "transformer"]})
    # ClipCap keeps its paths (dvc.lock outs unchanged); other archs carry their name
    assert K.arch_model_dir("original", 2) == "data/models/captioner/original/original-2"
    assert K.arch_model_dir("original", 2, "transformer") == \
        "data/models/captioner/original/original-transformer-2"
    assert K.arch_live_dir("augment", 0, "transformer") == \
        "dvclive/captioner/augment/augment-transformer-0"


def test_transformer_config_reads_shared_and_own_keys():
    p = {"max_len": 12, "epochs": 3, "lr": 0.5, "d_model": 999, "decoder": "gpt2",
         "transformer": {"d_model": 64, "heads": 4, "lr": 1e-4}}
    cfg = T.config_from_params(p, seed=7, image_size=None)
    # shared keys from captioner.*, architecture keys from captioner.transformer only
    assert (cfg.max_len, cfg.epochs, cfg.seed, cfg.d_model, cfg.lr) == (12, 3, 7, 64, 1e-4)
    assert cfg.image_size == 224          # a None override is ignored
    with pytest.raises(ValueError, match="unknown key.*'layers'"):
        T.config_from_params({"transformer": {"layers": 2}})
    with pytest.raises(ValueError, match="divisible"):
        T.config_from_params({"transformer": {"d_model": 30, "heads": 4}})
    with pytest.raises(ValueError, match="grid must be >= 1"):
        T.config_from_params({"transformer": {"grid": 0}})


# ------------------------------------------------------------------------------- model
def _tiny_net(vocab=11, n_cells=4, dim=6, seed=0):
    torch.manual_seed(seed)
    net = T.GridTransformer(vocab, dim, n_cells, d_model=16, heads=2, enc_layers=1,
                            dec_layers=2, ff=32, dropout=0.0, max_positions=10, pad_id=0)
    return net.eval()


def test_shapes():
    net = _tiny_net()
    grid = torch.randn(3, 4, 6)
    tokens = torch.randint(1, 11, (3, 5))
    assert net.encode(grid).shape == (3, 4, 16)
    assert net(grid, tokens).shape == (3, 5, 11)
    ids = torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0], [6, 7, 8, 2]])
    att = (ids != 0).long()
    loss, n = net.token_losses(grid, ids, att, bos=2)
    assert n == 3 + 2 + 4 and loss.shape == () and float(loss.detach()) > 0
    with pytest.raises(ValueError, match="max_positions"):
        net(grid, torch.ones(3, 11, dtype=torch.long))


def test_decoder_is_causal_and_reads_the_grid():
    """Output at t must not change when tokens after t change; it must change with the image."""
    net = _tiny_net()
    grid = torch.randn(2, 4, 6)
    a = torch.tensor([[2, 3, 4, 5, 6, 7], [2, 8, 9, 10, 3, 4]])
    b = a.clone()
    b[:, 3:] = torch.tensor([[9, 9, 9], [1, 1, 1]])      # only tokens > t=2 differ
    with torch.no_grad():
        la, lb = net(grid, a), net(grid, b)
        lg = net(grid.flip(0), a)
    assert torch.allclose(la[:, :3], lb[:, :3], atol=1e-6)
    assert not torch.allclose(la[:, 3:], lb[:, 3:], atol=1e-4)
    assert not torch.allclose(la[:, 0], lg[:, 0], atol=1e-4)


# ------------------------------------------------------------------------------- decoding
def _table_lm(table, eos, vocab=6):
    """next_logprobs from a dict: token prefix (tuple, after bos) -> {token: prob}; calls are
    counted in ``calls``."""
    calls = []

    def fn(rows, toks):
        calls.append(toks.shape)
        out = torch.full((len(rows), vocab), -1e9)
        for r, t in enumerate(toks.tolist()):
            for tok, p in table.get(tuple(t[1:]), {eos: 1.0}).items():
                out[r, tok] = float(np.log(p))
        return out

    return fn, calls


def test_beam_search_stops_at_eos_and_scores_by_mean_logprob():
    eos, bos = 0, 5
    # greedy: 1 (0.6) then EOS (0.6) -> mean log p = (ln .6 + ln .6) / 2 = -0.511
    # beam 2 also finds 2 (0.4), 3 (1.0), EOS (1.0) -> (ln .4 + 0 + 0) / 3 = -0.305: better
    table = {(): {1: 0.6, 2: 0.4}, (1,): {eos: 0.6, 4: 0.4}, (1, 4): {eos: 0.1, 4: 0.9},
             (2,): {3: 1.0}, (2, 3): {eos: 1.0}}
    fn, calls = _table_lm(table, eos)
    assert decoding.beam_search(fn, 1, bos, eos, beam=1, max_new=10) == [[1]]
    assert len(calls) == 2                    # stopped at the end token, not at max_new
    fn, calls = _table_lm(table, eos)
    assert decoding.beam_search(fn, 1, bos, eos, beam=2, max_new=10) == [[2, 3]]
    assert len(calls) == 3                    # both beams finished after 3 tokens
    # max_new bounds the length (the hypothesis is cut, no end token)
    fn, _ = _table_lm({(): {1: 1.0}, (1,): {1: 1.0}, (1, 1): {1: 1.0}}, eos)
    assert decoding.beam_search(fn, 2, bos, eos, beam=2, max_new=3) == [[1, 1, 1]] * 2
    with pytest.raises(ValueError):
        decoding.beam_search(fn, 1, bos, eos, beam=0)
    assert decoding.cut_at_eos([4, 3, 0, 5], 0) == [4, 3]


# ------------------------------------------------------------------------------- training
def test_transformer_learns_the_toy_mapping(toy_transformer):
    model, hist, grid, cluster = toy_transformer
    assert hist[-1]["train_loss"] < hist[0]["train_loss"] / 3
    caps = model.generate(grid)
    ok = [c in TOY[k] for c, k in zip(caps, cluster)]
    assert np.mean(ok) >= 0.9, list(zip(caps, cluster))
    assert model.meta["n_train_images"] == len(grid) and model.meta["vocab_size"] > 3


def test_transformer_generate_checks_and_bounds(toy_transformer):
    model, _, grid, _ = toy_transformer
    with pytest.raises(ValueError, match=r"\(n, 4, 16\)"):
        model.generate(grid[:, :2])
    with pytest.raises(ValueError, match="no_repeat_ngram"):
        model.generate(grid[:2], no_repeat_ngram=2)
    short = model.generate(grid[:8], max_len=2, beam=3)
    assert all(len(c.split()) <= 2 for c in short)
    assert model.generate(grid[:8], beam=3) == model.generate(grid[:8], beam=3)


def test_transformer_save_load_round_trip(toy_transformer, tmp_path):
    model, _, grid, _ = toy_transformer
    model.save(tmp_path / "m")
    back = K.get_arch("transformer").load(tmp_path / "m")
    assert back.generate(grid[:6]) == model.generate(grid[:6])
    assert back.loss(grid[:6], ["a red square"] * 6) == pytest.approx(
        model.loss(grid[:6], ["a red square"] * 6))
    with pytest.raises(InputError, match="not a saved transformer"):
        T.TransformerCaptioner.load(tmp_path)


def _md5(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def test_two_seed_training_is_deterministic_across_workers(tmp_path):
    """Seeds 0 and 1, trained sequentially and on 2 forked workers: identical bytes per seed,
    different bytes across seeds."""
    from biaslab.runtime.parallel import map_jobs
    grid, caps, rows, _ = _grid_toy()
    cfg = _tcfg(epochs=3, dropout=0.1)

    def job(args):
        run, seed = args
        m, _ = T.train_captioner(grid, caps, rows, grid, caps, rows,
                                 T.TransformerConfig(**{**cfg.__dict__, "seed": seed}))
        return _md5(m.save(tmp_path / f"{run}-{seed}"))

    seq = map_jobs(job, [("a", 0), ("a", 1)], 1)
    par = map_jobs(job, [("b", 0), ("b", 1)], 2)
    assert seq == par
    assert seq[0]["model.safetensors"] != seq[1]["model.safetensors"]
    assert seq[0]["transformer.json"] != seq[1]["transformer.json"]   # seed recorded


# ------------------------------------------------------------------------------- features
def test_grid_features_pool_to_the_pooled_feature(tmp_path):
    """EfficientNet-Lite0 at 224 px: the 7 x 7 grid's mean and the grid-1 feature are the
    cached pooled feature (the same map, pooled by the backbone)."""
    from PIL import Image

    from biaslab.captioning import data
    rng = np.random.default_rng(0)
    paths = []
    for i in range(2):
        p = tmp_path / f"im{i}.png"
        Image.fromarray(rng.integers(0, 255, (50, 70, 3), dtype=np.uint8)).save(p)
        paths.append(str(p))
    table = pd.DataFrame({"image_id": [1, 2], "path": paths})
    cache = tmp_path / "cache"
    g7 = data.grid_features(table, cache, grid=7)
    g1 = data.grid_features(table, cache, grid=1)
    pooled = data.image_features(table, cache)
    assert g7.shape == (2, 49, 1280) and g1.shape == (2, 1, 1280)
    np.testing.assert_allclose(g7.mean(1), pooled, atol=1e-5)
    np.testing.assert_allclose(g1[:, 0], pooled, atol=1e-5)
    from biaslab.models.features import cache_key
    assert {p.name for p in cache.iterdir()} == {cache_key("efficientnet_lite0-grid7", 224),
                                                  cache_key("efficientnet_lite0-grid1", 224),
                                                  cache_key("efficientnet_lite0", 224)}
    # ViT-style tokens: the CLS token is dropped, the 2 x 2 patch grid kept in row order
    tok = torch.arange(1 + 4, dtype=torch.float32).view(1, 5, 1).repeat(1, 1, 3)
    assert data._grid_of(tok, 2)[0].view(4, 3)[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert data._grid_of(tok, 1)[0].tolist() == [2.5] * 3


# ------------------------------------------------------------------------------- stages
def test_stages_train_and_eval_two_archs(tmp_path, monkeypatch):
    """captioner.archs [clipcap, transformer]: ClipCap's files and rows as before, the
    Transformer's beside them (names with -transformer, metrics under archs.transformer)."""
    monkeypatch.chdir(tmp_path)
    _workspace(tmp_path, n_images=30)
    params = {
        "label": {"words": "lic"},
        "features": {"backbone": "efficientnet_lite0", "image_size": 64,
                     "cache_dir": "data/cache/features"},
        "lic": {"classifier": "lstm", "preset": "ci", "seeds": 1, "num_threads": 1},
        "captioner": {"decoder": "tiny", "layers": 1, "d_model": 32, "heads": 2,
                      "prefix_len": 2, "max_len": 12, "epochs": 2, "lr": 0.003,
                      "batch_size": 32, "patience": 2, "beam": 2, "num_threads": 1,
                      "seeds": [0], "datasets": ["original"],
                      "archs": ["clipcap", "transformer"],
                      "transformer": {"grid": 2, "enc_layers": 1, "dec_layers": 1,
                                      "d_model": 32, "heads": 2, "ff": 64}},
        "eval_captioner": {"biasamp_min_count": 1, "workers": 1},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    _load_stage("train_captioner").main(["--dataset", "original", "--workers", "1"])
    assert (tmp_path / "data/models/captioner/original/original-0/captioner.json").is_file()
    tdir = tmp_path / "data/models/captioner/original/original-transformer-0"
    assert json.loads((tdir / "transformer.json").read_text())["config"]["grid"] == 2
    assert (tmp_path / "dvclive/captioner/original/original-transformer-0/metrics.json"
            ).is_file()
    from biaslab.models.features import cache_key
    assert (tmp_path / "data/cache/features" / cache_key("efficientnet_lite0-grid2", 64)).is_dir()
    _tiny_dcg(tmp_path, image_size=64)
    _load_stage("eval_captioner").main()
    metrics = json.loads((tmp_path / "metrics/captioning.json").read_text())
    assert set(metrics) == {"original", "original+LIBRA", "archs", "test_set"}
    assert list(metrics["archs"]) == ["transformer"]
    tr = metrics["archs"]["transformer"]
    assert set(tr) == {"original", "original+LIBRA"}
    assert set(tr["original"]) == set(metrics["original"])
    assert tr["original"]["METEOR"]["n"] == 1
    caps = json.loads((tmp_path / "data/captions/original-transformer-0.json").read_text())
    assert len(caps) == metrics["test_set"]["n_images"]
    assert (tmp_path / "data/captions/original+LIBRA-transformer-0.json").is_file()
    ev = json.loads((tmp_path / "data/captions/eval.json").read_text())
    assert set(ev["models"]) == {"original-0", "original+LIBRA-0", "original-transformer-0",
                                 "original+LIBRA-transformer-0"}
    rows = [r.split(",")[0] for r in
            (tmp_path / "plots/captioning.csv").read_text().splitlines()[1:]]
    assert rows == ["original", "original+LIBRA", "transformer/original",
                    "transformer/original+LIBRA"]


def test_train_stage_rejects_an_unknown_arch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _workspace(tmp_path, n_images=12)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "captioner": {"seeds": [0], "datasets": ["original"], "archs": ["vit"]}}))
    # checked with the params at stage start, before any architecture is looked up
    with pytest.raises(InputError, match=r"captioner\.archs: unknown name\(s\) \['vit'\]"):
        _load_stage("train_captioner").main(["--dataset", "original"])


# ------------------------------------------------------------------------------- BLIP-2
def tiny_blip2(directory, captions=("a man riding a horse", "a woman with a cat", "a dog")):
    """Save a tiny random Blip2ForConditionalGeneration (ViT + Q-Former + OPT, 32 px, 4
    queries) and its processor (word-level tokenizer on ``captions`` + an ``<image>`` token)
    to ``directory`` with save_pretrained; returns the directory."""
    from transformers import (Blip2Config, Blip2ForConditionalGeneration, Blip2Processor,
                              Blip2QFormerConfig, Blip2VisionConfig, BlipImageProcessor,
                              OPTConfig)

    from biaslab.captioning.tokens import build_tokenizer
    tok = build_tokenizer(list(captions), min_count=1)
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    V, eos = len(tok), tok.eos_token_id
    torch.manual_seed(0)
    cfg = Blip2Config(
        vision_config=Blip2VisionConfig(hidden_size=16, intermediate_size=32,
                                        num_hidden_layers=1, num_attention_heads=2,
                                        image_size=32, patch_size=16).to_dict(),
        qformer_config=Blip2QFormerConfig(hidden_size=16, num_hidden_layers=1,
                                          num_attention_heads=2, intermediate_size=32,
                                          encoder_hidden_size=16, vocab_size=V).to_dict(),
        text_config=OPTConfig(vocab_size=V, hidden_size=16, num_hidden_layers=1, ffn_dim=32,
                              num_attention_heads=2, max_position_embeddings=64,
                              word_embed_proj_dim=16, bos_token_id=eos, eos_token_id=eos,
                              pad_token_id=tok.pad_token_id).to_dict(),
        num_query_tokens=4, image_token_index=tok.convert_tokens_to_ids("<image>"))
    proc = Blip2Processor(image_processor=BlipImageProcessor(size={"height": 32, "width": 32}),
                          tokenizer=tok, num_query_tokens=4)
    Blip2ForConditionalGeneration(cfg).save_pretrained(directory)
    proc.save_pretrained(directory)
    return directory


def test_blip2_offline_tiny_random_model(tmp_path, monkeypatch):
    """A tiny random Blip2ForConditionalGeneration (ViT + Q-Former + OPT) saved with
    save_pretrained loads through biaslab.captioning.blip2.load (the paper tier's
    from_pretrained path), captions 2 images, and one fine-tuning step changes the trained
    weights (Q-Former, queries, projection) but not the frozen OPT."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from PIL import Image
    from transformers import Blip2ForConditionalGeneration

    from biaslab.captioning import blip2
    tiny_blip2(tmp_path / "blip2")

    model, processor = blip2.load(tmp_path / "blip2")
    assert isinstance(model, Blip2ForConditionalGeneration) and not model.training
    ims = [Image.new("RGB", (40, 30), (200, 10, 10)), Image.new("RGB", (30, 40), (10, 10, 200))]
    caps = blip2.caption(model, processor, ims, max_new_tokens=5, num_beams=2)
    assert len(caps) == 2 and all(isinstance(c, str) and "<image>" not in c for c in caps)
    assert caps == blip2.caption(model, processor, ims, max_new_tokens=5, num_beams=2)

    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = blip2.make_optimizer(model, lr=1e-2)
    loss = blip2.finetune_step(model, processor, ims, ["a man riding a horse", "a dog"], opt)
    assert np.isfinite(loss) and loss > 0
    changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    assert "query_tokens" in changed and any(k.startswith("qformer.") for k in changed)
    assert any(k.startswith("language_projection.") for k in changed)
    assert not any(k.startswith(("language_model.", "vision_model.")) for k in changed)
    with pytest.raises(ValueError, match="one caption per image"):
        blip2.finetune_step(model, processor, ims, ["a dog"], opt)
    with pytest.raises(InputError, match="cannot load BLIP-2"):
        blip2.load(tmp_path / "missing")
    assert blip2.PAPER_MODEL == "Salesforce/blip2-opt-2.7b" and blip2.PAPER_LR == 2e-6
