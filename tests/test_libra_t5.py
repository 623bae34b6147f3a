"""LIBRA T5 masked-word model (biaslab.libra.t5): sentinel format, tokenizer, tiny training,
batched generation shape, save/load round trip."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import torch

from biaslab.libra import t5

CAPS = [f"A {who} {act} a {obj} on the {place}."
        for who in ("man", "woman", "dog") for act in ("riding", "holding")
        for obj in ("skateboard", "umbrella", "frisbee") for place in ("street", "beach")]

TINY = dict(d_model=32, d_ff=64, layers=1, heads=2, d_kv=16, epochs=2, batch_size=16,
            num_threads=1, lr=1e-2)


def test_mask_words_and_parse_roundtrip():
    cap = "A Man holding an umbrella, near the street."
    src, tgt, orig = t5.mask_words(cap, [1, 4])
    assert src == "a <extra_id_0> holding an <extra_id_1> , near the street."
    assert tgt == "<extra_id_0> man <extra_id_1> umbrella <extra_id_2>"
    assert orig == ["Man", "umbrella"]
    assert t5.parse_fills("<pad> <extra_id_0> woman<extra_id_1> red car <extra_id_2></s>", 2) \
        == ["woman", "red car"]
    assert t5.parse_fills("<extra_id_0> woman</s>", 2) is None          # missing sentinel
    assert t5.parse_fills("<extra_id_0><extra_id_1> x", 2) is None      # empty fill
    with pytest.raises(ValueError):
        t5.mask_words(cap, [20])


def test_apply_fills_keeps_case_punctuation_and_fixes_articles():
    cap = "A Man holding an umbrella, near the street."
    assert t5.apply_fills(cap, [1, 4], ["woman", "kite"]) == \
        "A Woman holding a kite, near the street."
    assert t5.apply_fills("a dog with a bone", [4], ["apple"]) == "a dog with an apple"


def test_sample_positions_rate_and_eligibility():
    rng = np.random.default_rng(0)
    assert t5.n_to_mask(10, 0.15) == 2 and t5.n_to_mask(3, 0.1) == 1
    assert t5.n_to_mask(0, 0.5) == 0 and t5.n_to_mask(5, 0.0) == 0
    pos = t5.sample_positions(20, 0.1, rng)
    assert len(pos) == 2 and pos == sorted(pos)
    assert set(t5.sample_positions(20, 0.5, rng, [3, 5, 7])) <= {3, 5, 7}
    assert t5.sample_positions(20, 0.5, rng, []) == []


def test_tokenizer_word_level_with_sentinels():
    tok = t5.train_t5_tokenizer(CAPS, vocab_size=300, min_count=1)
    assert (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    assert tok.convert_tokens_to_ids("<extra_id_0>") == len(tok) - 1
    toks = tok.convert_ids_to_tokens(tok("a man <extra_id_0> a skateboard.")["input_ids"])
    assert toks == ["\u2581a", "\u2581man", "<extra_id_0>", "\u2581a", "\u2581skateboard",
                    ".", "</s>"]
    # unseen words fall back to characters, never <unk>
    ids = tok("a zebra")["input_ids"]
    assert tok.unk_token_id not in ids


def test_settings_validation():
    with pytest.raises(ValueError):
        t5.settings_from_dict({"d_modle": 3})
    assert t5.settings_from_dict({"epochs": 1}).epochs == 1


@pytest.fixture(scope="module")
def tiny_t5():
    hist = []
    m = t5.finetune(CAPS, t5.T5Settings(**TINY, pretrain_epochs=1), seed=0,
                    val_captions=CAPS[:6], on_epoch=lambda e, r: hist.append(r))
    return m, hist


def test_finetune_records(tiny_t5):
    m, hist = tiny_t5
    assert len(hist) == 3 and [h["mask_rate"] for h in hist] == [0.3, 0.1, 0.1]
    for h in hist:
        assert np.isfinite(h["loss"]) and np.isfinite(h["val_mlm_nll"])
        assert h["loss"] >= h["mlm_nll"] > 0     # Eq. 1 is a part of the training loss
    assert m.meta["n_train"] == len(CAPS) and m.meta["train_tokens_per_s"] > 0


def test_generation_shape_and_batching(tiny_t5):
    m, _ = tiny_t5
    rng = np.random.default_rng(1)
    srcs, ns = [], []
    for c in CAPS[:7]:
        pos = t5.sample_positions(len(t5.word_spans(c)), 0.3, rng)
        srcs.append(t5.mask_words(c, pos)[0])
        ns.append(len(pos))
    out = t5.fill_masks(m, srcs, ns, batch_size=3, sample=True, seed=0)
    assert len(out) == 7
    for f, n in zip(out, ns):
        assert f is None or (len(f) == n and all(isinstance(x, str) and x for x in f))
    # batched and one-at-a-time greedy decoding agree
    g_batch = t5.fill_masks(m, srcs, ns, batch_size=8, sample=False)
    g_one = t5.fill_masks(m, srcs, ns, batch_size=1, sample=False)
    assert g_batch == g_one
    # sampling is reproducible with a seed
    assert t5.fill_masks(m, srcs, ns, sample=True, seed=5) == \
        t5.fill_masks(m, srcs, ns, sample=True, seed=5)
    assert t5.fill_masks(m, [], []) == []


def test_save_load_roundtrip(tiny_t5, tmp_path):
    m, _ = tiny_t5
    d = t5.save(m, tmp_path / "t5")
    m2 = t5.load(d)
    assert m2.settings == m.settings and len(m2.tokenizer) == len(m.tokenizer)
    srcs = [t5.mask_words(c, [1])[0] for c in CAPS[:5]]
    assert t5.fill_masks(m, srcs, [1] * 5, sample=False) == \
        t5.fill_masks(m2, srcs, [1] * 5, sample=False)
    with pytest.raises(FileNotFoundError):
        t5.load(tmp_path)


@pytest.fixture(scope="module")
def tiny_reconstruct():
    return t5.finetune(CAPS, t5.T5Settings(**TINY, format="reconstruct", pretrain_epochs=1),
                       seed=0, val_captions=CAPS[:6])


def test_reconstruct_format_training_and_fills(tiny_reconstruct):
    m = tiny_reconstruct
    hist = m.meta["history"]
    assert len(hist) == 3
    for h in hist:   # Eq. 1 terms are the masked words' pieces, a part of the whole target
        assert h["loss"] > h["mlm_nll"] > 0 and h["val_loss"] > h["val_mlm_nll"] > 0
    caps = CAPS[:9]
    pos = [[1, 4], [3], [6]] * 3
    out = t5.fill_words(m, caps, pos, batch_size=4, sample=True, seed=0,
                        banned_words={"a", "the", "on", "man", "woman"})
    for f, p in zip(out, pos):
        assert f is not None and len(f) == len(p)
        assert all(w.isalpha() and w not in {"a", "the", "on", "man", "woman"} for w in f)
    assert out == t5.fill_words(m, caps, pos, batch_size=4, sample=True, seed=0,
                                banned_words={"a", "the", "on", "man", "woman"})
    g1 = t5.fill_words(m, caps, pos, batch_size=9, sample=False)
    g2 = t5.fill_words(m, caps, pos, batch_size=1, sample=False)
    assert g1 == g2


def test_fill_words_sentinel_bans_words(tiny_t5):
    m, _ = tiny_t5
    banned = {"a", "the", "on"}
    out = t5.fill_words(m, CAPS[:6], [[3]] * 6, sample=True, seed=1, banned_words=banned)
    for f in out:
        assert f is None or all(w.split()[0] not in banned for w in f)
    ids = t5.banned_token_ids(m.tokenizer, banned)
    toks = {m.tokenizer.convert_ids_to_tokens(i[0]) for i in ids}
    assert "\u2581the" in toks and "." in toks and "<extra_id_0>" not in toks
    assert "</s>" not in toks


def test_masked_word_accuracy_and_baseline(tiny_t5):
    m, _ = tiny_t5
    counts = Counter(w.lower() for c in CAPS for _, _, w in t5.word_spans(c))
    res = t5.masked_word_accuracy(m, CAPS, 0.1, counts, seed=0)
    assert res["n_captions"] == len(CAPS) and res["n_masked"] == len(CAPS)
    assert res["baseline_word"] == "a"
    assert 0 <= res["accuracy"] <= 1 and 0 < res["baseline_accuracy"] < 1


def test_pretrained_tier_code_path_with_local_dir(tiny_t5, tmp_path):
    """The paper tier fine-tunes ``t5-base`` by name; offline the same ``from_pretrained``
    path runs on a saved tiny T5 directory (its own tokenizer, sentinel format)."""
    m, _ = tiny_t5
    src = t5.save(m, tmp_path / "pre")
    s = t5.T5Settings(model=str(src), epochs=1, batch_size=16, num_threads=1, lr=1e-3)
    m2 = t5.finetune(CAPS, s, seed=0)
    assert len(m2.tokenizer) == len(m.tokenizer)
    assert m2.model.config.d_model == m.model.config.d_model
    out = t5.fill_words(m2, CAPS[:3], [[1], [3], [6]], sample=False)
    assert len(out) == 3


def test_finetune_progress_bar_counts_every_batch_and_leaves_the_model_unchanged(capsys):
    """t5_finetune is not silent. The bar counts batches over all epochs
    (pretrain + fine-tune) on stderr; the weights are those of a run without it."""
    s = t5.T5Settings(**TINY, pretrain_epochs=1)
    quiet = t5.finetune(CAPS, s, seed=0)
    capsys.readouterr()
    loud = t5.finetune(CAPS, s, seed=0, progress=True)
    err = capsys.readouterr().err
    n = -(-len([c for c in CAPS if t5.word_spans(c)]) // s.batch_size) * (s.epochs + 1)
    assert "T5 fine-tune" in err and f"{n}/{n}" in err
    for (k, a), b in zip(quiet.model.state_dict().items(), loud.model.state_dict().values()):
        assert torch.equal(a, b), k
