"""LIBRA Debiasing Caption Generator (biaslab.libra.dcg) and ``biaslab libra debias``: masking,
forward/backward on a tiny batch, save/load, image-file lookup, the CLI on a tiny results file
with a tiny trained model."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from biaslab import cli
from biaslab.runtime.io import InputError
from biaslab.libra import dcg as D
from biaslab.libra import debias_results

CAPS = ["a woman riding a horse on the beach", "a man holding a surfboard near the ocean",
        "a girl eating pizza in a kitchen", "a boy playing baseball on a field"]
TINY = dict(hidden=32, heads=2, layers=1, min_count=1, num_threads=1, epochs=25, batch_size=8,
            lr=3e-3, n_image_tokens=2)


def test_mask_caption_rate():
    rng = np.random.default_rng(0)
    cap = "A man riding a wave on top of a surfboard."
    out = D.mask_caption(cap, 0.2, rng)
    assert out.count("[MASK]") == 2 and out.endswith("surfboard.") or out.endswith("[MASK].")
    assert D.mask_caption(cap, 0.0, rng) == cap
    assert D.mask_caption("", 0.2, rng) == ""


def test_settings_validation():
    with pytest.raises(ValueError):
        D.settings_from_dict({"image_input": "video"})
    with pytest.raises(ValueError):
        D.settings_from_dict({"hiddne": 3})


def _weights(m):
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def test_build_is_seeded_and_leaves_the_global_rng_alone():
    """Same seed -> identical initial weights whatever the global torch RNG state (the
    committed DCG changed between identical runs before the build was seeded)."""
    s = D.DCGSettings(**TINY)
    torch.manual_seed(123)
    a = _weights(D.build_dcg(s, CAPS, feat_dim=16, seed=5))
    state = torch.random.get_rng_state()
    torch.rand(7)                                        # move the global RNG on
    b = _weights(D.build_dcg(s, CAPS, feat_dim=16, seed=5))
    c = _weights(D.build_dcg(s, CAPS, feat_dim=16, seed=6))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if a[k].is_floating_point())
    torch.random.set_rng_state(state)
    before = torch.rand(3)
    torch.random.set_rng_state(state)
    D.build_dcg(s, CAPS, feat_dim=16, seed=5)
    assert torch.equal(torch.rand(3), before)            # caller's RNG untouched


def test_forward_backward_tiny_batch():
    s = D.DCGSettings(**TINY)
    m = D.build_dcg(s, CAPS, feat_dim=16)
    feats = np.random.default_rng(0).normal(size=(4, 16)).astype(np.float32)
    biased = ["a man riding a [MASK] on the beach", "a [MASK] holding a surfboard near the ocean",
              "a boy eating pizza in a kitchen", "a girl playing baseball on a field"]
    m.train()
    loss, ntok = m.loss(biased, feats, CAPS)
    assert loss.ndim == 0 and torch.isfinite(loss) and ntok == sum(len(c.split()) + 1
                                                                   for c in CAPS)
    loss.backward()
    enc_g = m.seq2seq.encoder.embeddings.text_embeddings.word_embeddings.weight.grad
    dec_g = m.seq2seq.decoder.transformer.h[0].crossattention.c_attn.weight.grad
    assert enc_g is not None and enc_g.abs().sum() > 0
    assert dec_g is not None and dec_g.abs().sum() > 0          # cross-attention is used
    assert m.img_proj.weight.grad.abs().sum() > 0               # the image reaches the loss
    h, mask = m.encode(biased, feats)
    assert h.shape[:2] == mask.shape and mask.shape[1] == h.shape[1]
    assert int(mask[0, -2:].sum()) == 2                          # image tokens attended


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    s = D.DCGSettings(**TINY, eta=0.0)
    feats = np.eye(4, 16, dtype=np.float32) * 3
    m = D.train_dcg(CAPS * 4, CAPS * 4, np.concatenate([feats] * 4), s, seed=0)
    d = D.save(m, tmp_path_factory.mktemp("dcg") / "model")
    return m, d, feats


def test_train_save_load_and_debias(trained):
    m, d, feats = trained
    assert m.meta["history"][-1]["loss"] < m.meta["history"][0]["loss"]
    out = D.debias(m, CAPS, feats)
    assert len(out) == 4 and all(isinstance(o, str) for o in out)
    m2 = D.load(d)
    assert D.debias(m2, CAPS, feats) == out
    assert D.debias(m2, CAPS, feats, num_beams=2) == D.debias(m, CAPS, feats, num_beams=2)
    with pytest.raises(InputError, match="dcg.json: missing"):
        D.load(d.parent)


def test_evaluate_reports_gender_recovery(trained):
    m, _, feats = trained
    biased = ["a man riding a horse on the beach", "a woman holding a surfboard near the ocean"]
    ev = D.evaluate(m, biased, CAPS[:2], ["female", "male"], ["swap", "swap"], feats[:2],
                    words="libra")
    assert ev["overall"]["n"] == 2 and ev["overall"]["gender_acc_input"] == 0.0
    assert set(ev) == {"overall", "swap", "outputs"}


def _write_images(root, ids, layout):
    for i in ids:
        im = Image.fromarray(np.full((24, 32, 3), (40 * i) % 256, np.uint8))
        if layout == "coco":
            (root / "images" / "val2017").mkdir(parents=True, exist_ok=True)
            im.save(root / "images" / "val2017" / f"{i:012d}.jpg")
        else:
            root.mkdir(parents=True, exist_ok=True)
            im.save(root / f"COCO_val2014_{i:012d}.jpg")


def test_image_files_layouts(tmp_path, tiny_coco):
    files = D.image_files(tiny_coco, [1, 2, 4])
    assert files[1].name == "000000000001.jpg" and files[4].parent.name == "val2017"
    flat = tmp_path / "flat"
    _write_images(flat, [7, 8], "flat")
    assert D.image_files(flat, [7, 8])[8].name == "COCO_val2014_000000000008.jpg"
    with pytest.raises(InputError, match="no image file for 1"):
        D.image_files(flat, [7, 9])
    with pytest.raises(InputError):
        D.image_files(tmp_path / "nope", [1])


@pytest.fixture(scope="module")
def cli_model(tmp_path_factory):
    """A tiny DCG trained on the EfficientNet features of 4 small images (the CLI recomputes
    them with the model's backbone)."""
    from biaslab.models.features import load_image_encoder
    root = tmp_path_factory.mktemp("imgs")
    _write_images(root / "coco", [1, 2, 3, 4], "coco")
    enc = load_image_encoder("efficientnet_lite0", num_threads=1)
    paths = [root / "coco" / "images" / "val2017" / f"{i:012d}.jpg" for i in (1, 2, 3, 4)]
    feats = enc.encode(paths)
    s = D.DCGSettings(**TINY, eta=0.0)
    m = D.train_dcg(CAPS * 4, CAPS * 4, np.concatenate([feats] * 4), s, seed=0)
    d = D.save(m, root / "model")
    return root, d


def test_cli_debias(cli_model, tmp_path, capsys):
    root, model = cli_model
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps([{"image_id": i, "caption": c}
                                for i, c in zip((1, 2, 3, 4), CAPS)]))
    out = tmp_path / "out" / "debiased.json"
    assert "libra" in cli.COMMANDS
    rc = cli.main(["libra", "debias", "--pred", str(pred), "--images", str(root / "coco"),
                   "--model", str(model), "--out", str(out), "--eta", "0", "--threads", "1"])
    assert rc == 0
    res = json.loads(out.read_text())
    assert [r["image_id"] for r in res] == [1, 2, 3, 4]
    assert all(isinstance(r["caption"], str) and r["caption"] for r in res)
    assert "4 captions" in capsys.readouterr().err
    # the library call gives the same captions (eta = 0: deterministic)
    again = debias_results({i: c for i, c in zip((1, 2, 3, 4), CAPS)}, str(root / "coco"),
                           str(model), eta=0.0)
    assert [again[i] for i in (1, 2, 3, 4)] == [r["caption"] for r in res]


def test_cli_errors_exit_2(cli_model, tmp_path, capsys):
    root, model = cli_model
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps([{"image_id": 99, "caption": "a man"}]))
    args = ["libra", "debias", "--pred", str(pred), "--images", str(root / "coco"),
            "--model", str(model), "--out", str(tmp_path / "o.json")]
    assert cli.main(args) == 2                                     # no image for id 99
    assert "99" in capsys.readouterr().err
    pred.write_text("[{\"image_id\": 1, ")
    assert cli.main(args) == 2                                     # truncated JSON
    assert "pred.json" in capsys.readouterr().err
    pred.write_text(json.dumps([{"image_id": 1, "caption": "a man"}]))
    bad = args[:]
    bad[bad.index("--model") + 1] = str(tmp_path)
    assert cli.main(bad) == 2                                      # not a model dir
    assert "DCG" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()
    with pytest.raises(SystemExit):
        cli.main(["libra", "debias", "--pred", str(pred)])         # missing arguments


def _json_edit(fn):
    def edit(m):
        d = json.loads((m / "dcg.json").read_text())
        fn(d)
        (m / "dcg.json").write_text(json.dumps(d))
    return edit


@pytest.mark.parametrize("damage,names", [
    (lambda m: (m / "dcg.json").write_text("{}"), ("dcg.json", "not a DCG description")),
    (lambda m: (m / "dcg.json").write_text("not json"), ("dcg.json", "not valid JSON")),
    (lambda m: (m / "dcg.json").unlink(), ("dcg.json", "missing")),
    (lambda m: shutil.rmtree(m / "seq2seq"), ("seq2seq", "missing")),
    (lambda m: (m / "image.pt").write_bytes(b"garbage"), ("image.pt", "cannot be loaded")),
    (lambda m: (m / "enc_tokenizer" / "tokenizer_config.json").write_text("{"),
     ("enc_tokenizer", "cannot be loaded")),
    (_json_edit(lambda d: d["settings"].update(backbone="some-org/some-model")),
     ("dcg.json", "some-org/some-model")),
    (_json_edit(lambda d: d["settings"].update(eta="x")), ("dcg.json", "eta")),
    (lambda m: shutil.rmtree(m), ("model", "not found")),
    (lambda m: (shutil.rmtree(m), m.write_text("x")), ("model", "not a directory")),
])
def test_damaged_model_directory_is_exit_2_naming_the_part(cli_model, tmp_path, capsys, damage,
                                                           names):
    """Every damage of a model directory is exit 2 with the file and the
    problem -- no traceback, no attempt to reach the Hugging Face Hub (an untrusted
    ``settings.backbone`` used to make the loader try it), nothing written."""
    root, model = cli_model
    m = tmp_path / "model"
    shutil.copytree(model, m)
    damage(m)
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps([{"image_id": 1, "caption": "a man"}]))
    rc = cli.main(["libra", "debias", "--pred", str(pred), "--images", str(root / "coco"),
                   "--model", str(m), "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert all(n in err for n in names), err
    assert "Traceback" not in err and "huggingface.co" not in err
    assert not (tmp_path / "o.json").exists()


def test_model_loader_never_goes_online(monkeypatch, tmp_path):
    """Every ``from_pretrained`` on the load path has ``local_files_only=True``: with the Hub
    made unreachable a missing part fails at once, naming itself."""
    import transformers
    calls = []
    real = transformers.AutoTokenizer.from_pretrained.__func__

    def spy(cls, *a, **k):
        calls.append(k.get("local_files_only"))
        return real(cls, *a, **k)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", classmethod(spy))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    s = D.DCGSettings(**TINY, eta=0.0)
    m = D.train_dcg(CAPS, CAPS, np.zeros((len(CAPS), 8), np.float32), s, seed=0)
    d = D.save(m, tmp_path / "model")
    D.load(d)
    assert calls and all(c is True for c in calls)


def test_pretrained_tier_code_path_with_local_dirs(tmp_path):
    """The paper tier loads ViLT / GPT-2 by name with ``from_pretrained``; offline we exercise
    the same path with tiny models saved to local directories (BERT tokenizer of the packaged
    MiniLM for ViLT) and the ``pixels`` image input (ViLT's own patch embedding)."""
    from transformers import GPT2Config, GPT2LMHeadModel, ViltConfig, ViltModel

    from biaslab.models.textclf import load_tokenizer
    bert_tok = load_tokenizer("minilm")
    enc_dir, dec_dir = tmp_path / "vilt", tmp_path / "gpt2"
    ViltModel(ViltConfig(vocab_size=len(bert_tok), hidden_size=32, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=64, image_size=32,
                         patch_size=16, max_position_embeddings=40)).save_pretrained(enc_dir)
    bert_tok.save_pretrained(enc_dir)
    dec_tok = D.build_tokenizer(CAPS, 200, 1)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(dec_tok), n_positions=48, n_embd=32, n_layer=1,
                               n_head=2, bos_token_id=dec_tok.bos_token_id,
                               eos_token_id=dec_tok.eos_token_id)).save_pretrained(dec_dir)
    dec_tok.save_pretrained(dec_dir)
    s = D.DCGSettings(encoder=str(enc_dir), decoder=str(dec_dir), image_input="pixels",
                      pixel_size=32, patch_size=16, epochs=2, batch_size=4, num_threads=1)
    imgs = [Image.fromarray(np.full((20, 30, 3), 60 * k, np.uint8)) for k in range(4)]
    m = D.train_dcg(CAPS, CAPS, imgs, s, seed=0)
    assert m.enc_tok.mask_token == "[MASK]" and m.feat_dim is None
    out = D.debias(m, CAPS, imgs, max_new_tokens=8)
    assert len(out) == 4
    d = D.save(m, tmp_path / "dcg")
    assert D.debias(D.load(d), CAPS, imgs, max_new_tokens=8) == out


def test_train_progress_bar_counts_every_batch(capsys):
    """dcg_train is not silent; the bar counts batches over all epochs on stderr."""
    s = D.DCGSettings(**TINY, eta=0.0)
    feats = np.eye(4, 16, dtype=np.float32) * 3
    D.train_dcg(CAPS * 4, CAPS * 4, np.concatenate([feats] * 4), s, seed=0, progress=True)
    n = -(-len(CAPS * 4) // s.batch_size) * s.epochs
    err = capsys.readouterr().err
    assert "DCG train" in err and f"{n}/{n}" in err


# ---------------------------------------------------------------------------------------------
# the edit formulation

EDIT = dict(TINY, formulation="edit", epochs=30, eta=0.2)


def test_align_words_in_place_and_through_difflib():
    assert D.align_words(["A", "man", "on", "a", "beach"], ["a", "Woman", "on", "a", "field"]) \
        == ["a", "woman", "on", "a", "field"]
    # one word more on both sides of an equal run: difflib aligns the replaced pair
    assert D.align_words(["a", "man", "riding", "a", "red", "bike"],
                         ["a", "woman", "riding", "a", "red", "bike"]) == \
        ["a", "woman", "riding", "a", "red", "bike"]
    assert D.align_words(["a", "man", "surfing"], ["a", "young", "man", "surfing"]) is None
    assert D.align_words(["a", "big", "man"], ["a", "man"]) is None


def test_output_vocabulary_and_edit_targets_hand_computed():
    voc = D.output_vocabulary(["A woman on a field.", "a man"])
    assert voc == ["[KEEP]", "a", "field", "man", "on", "woman"]
    m = D.build_dcg(D.DCGSettings(**EDIT), ["A woman on a field.", "a man"], feat_dim=4)
    assert m.out_vocab == voc
    # biased "A man on a beach" -> original "A woman on a field": keep, woman, keep, keep, field
    assert m.edit_targets("A man on a beach", "A woman on a field") == [0, 5, 0, 0, 2]
    # a masked word's target is its word even where it is right (position 0: "a" = 1)
    assert m.edit_targets("A man on a beach", "A woman on a field", masked=[0]) == \
        [1, 5, 0, 0, 2]
    assert m.edit_targets("a man on a", "a young man on a") is None
    assert m.edit_targets("a dog", "a cat") == [0, -100]          # "cat": not in the vocabulary


def test_context_balanced_pairs_equal_cells_and_replacement():
    g = ["female"] * 10 + ["male"] * 10
    ctx = ["female"] * 9 + ["male"] + ["male"] * 8 + ["female"] * 2   # 1 and 2 counter captions
    idx = D.context_balanced_pairs(g, ctx, 20, np.random.default_rng(0))
    assert len(idx) == 20
    cells = {}
    for i in idx:
        key = (g[i], g[i] == ctx[i])
        cells[key] = cells.get(key, 0) + 1
    assert cells == {("female", True): 5, ("female", False): 5, ("male", True): 5,
                     ("male", False): 5}
    assert set(idx[(np.array(g)[idx] == "female") & (np.array(ctx)[idx] == "male")]) == {9}
    # an empty cell gives its share to the others
    idx = D.context_balanced_pairs(["female", "male"], ["female", "male"], 6,
                                   np.random.default_rng(0))
    assert sorted(idx.tolist()) == [0, 0, 0, 1, 1, 1]
    assert len(D.context_balanced_pairs(["female"], ["male"], 0, np.random.default_rng(0))) == 0
    with pytest.raises(ValueError):
        D.context_balanced_pairs(["female"], [], 2, np.random.default_rng(0))


def test_edit_settings_validation():
    for bad in ({"formulation": "rewrite"}, {"identity_pairs": -1}, {"min_pairs": -1},
                {"min_edit_prob": 1.5},
                {"infer_eta": 1.0}):
        with pytest.raises(ValueError):
            D.settings_from_dict(bad)


def _gender_task(n=48, seed=0):
    """Captions whose gender only the image feature carries (dim 0 = woman, 1 = man): pairs
    y -> y and swap(y) -> y over the same captions and images."""
    rng = np.random.default_rng(seed)
    scenes = ["on the beach", "in a kitchen", "on a field", "near the ocean"]
    caps, feats = [], []
    for i in range(n):
        female = i % 2 == 0
        caps.append(f"A {'woman' if female else 'man'} standing {scenes[(i // 2) % 4]}.")
        f = rng.normal(0, 0.1, 8).astype(np.float32)
        f[0 if female else 1] += 2.0
        feats.append(f)
    swapped = [c.replace("woman", "MAN").replace(" man", " woman").replace("MAN", "man")
               for c in caps]
    return caps, swapped, np.stack(feats)


def test_edit_dcg_keeps_correct_captions_and_fixes_swapped_ones(tmp_path):
    """The gender is only in the image: a trained edit DCG must leave the right captions
    character for character and correct the swapped ones; the gate at probability 1 changes
    nothing; save/load gives the same edits."""
    caps, swapped, feats = _gender_task()
    s = D.DCGSettings(**EDIT)
    m = D.train_dcg(caps + swapped, caps + caps, np.concatenate([feats, feats]), s, seed=0)
    kept = D.debias(m, caps, feats, eta=0.0)
    fixed = D.debias(m, swapped, feats, eta=0.0)
    assert sum(a == b for a, b in zip(kept, caps)) >= 0.9 * len(caps), list(zip(kept, caps))
    assert sum(a == b for a, b in zip(fixed, caps)) >= 0.9 * len(caps), list(zip(fixed, caps))
    assert all(k[0] == "A" and k.endswith(".") for k in kept)       # case and punctuation kept
    gated = D.debias(D.load(D.save(m, tmp_path / "dcg")), swapped, feats, eta=0.0)
    assert gated == fixed
    shut = D.load(tmp_path / "dcg")
    shut.settings.min_edit_prob = 1.0
    assert D.debias(shut, swapped, feats, eta=0.0) == swapped


def test_edit_training_leaves_out_pairs_that_do_not_align():
    caps, swapped, feats = _gender_task(8)
    s = D.DCGSettings(**dict(EDIT, epochs=1))
    m = D.train_dcg(caps + ["a young man"], caps + ["a man"], np.concatenate([feats, feats[:1]]),
                    s, seed=0)
    assert m.meta["unaligned_pairs"] == 1
    with pytest.raises(ValueError):
        D.train_dcg(["a young man"], ["a man"], feats[:1], s, seed=0)
