"""LIBRA Biased Caption Synthesis (biaslab.libra.bcs): swap/mask, F_PG, F_GF (delta), F_AF
(alpha), content-word masking (never gender words), WordNet synonym exclusion, Table 1 mixes,
and the whole synthesis with a stub classifier and a stub T5."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from biaslab.data.gender import caption_gender, gender_words, mask
from biaslab.libra import bcs, bcs_words
from biaslab.libra import t5 as t5lib

F, M = "female", "male"


# ------------------------------------------------------------------ swap / mask (paper 003 Eq. 4)
@pytest.mark.parametrize("caption, expected", [
    ("A woman and her dog.", "A man and his dog."),
    ("Someone hands her a cup", "Someone hands him a cup"),
    ("The girl's bike is red", "The boy's bike is red"),
    ("An actress on a stage", "An actor on a stage"),
    ("A waitress serving two girls", "A waiter serving two boys"),
    ("He is riding his bike", "She is riding her bike"),
    ("A policeman talks to a boy", "A policewoman talks to a girl"),
    ("Two Girls with their Mother", "Two Boys with their Father"),
])
def test_swap_to_other_grammatical(caption, expected):
    g = caption_gender(caption, "libra")
    out, ok = bcs.swap_to_other([caption], [g], "libra")
    assert out == [expected]
    assert ok.tolist() == [True]
    assert caption_gender(out[0], "libra") == bcs.OTHER[g]


@pytest.mark.parametrize("caption", ["A pregnant woman on a sofa",   # pregnant stays female
                                     "A queen waves at the crowd"])  # king is not in the list
def test_swap_that_does_not_change_gender_is_flagged(caption):
    g = caption_gender(caption, "libra")
    _, ok = bcs.swap_to_other([caption], [g], "libra")
    assert ok.tolist() == [False]


def test_mask_libra_list_tricky():
    assert mask("A man's hat, on the MAN.", "libra") == "A [MASK]'s hat, on the [MASK]."
    assert mask("Policewoman directing traffic", "libra") == "[MASK] directing traffic"
    assert mask("Policewoman directing traffic", "lic") == "Policewoman directing traffic"
    assert mask("a mannequin in a shop", "libra") == "a mannequin in a shop"


def test_f_gw_keeps_single_gender_with_libra_list():
    d = pd.DataFrame({"caption_id": [1, 2, 3, 4], "image_id": [1, 1, 2, 2],
                      "caption": ["a chairman at a desk", "a man and a woman", "a dog",
                                  "her girlfriend smiles"]})
    dg = bcs.f_gw(d, "libra")
    assert dg["caption_id"].tolist() == [1, 4]
    assert dg["g"].tolist() == [M, F]


def test_balanced_split():
    dg = pd.DataFrame({"caption": [f"c{i}" for i in range(10)],
                       "g": [F] * 3 + [M] * 7})
    bal = bcs.balanced_split(dg, seed=1)
    assert (bal["g"] == F).sum() == (bal["g"] == M).sum() == 3
    with pytest.raises(ValueError):
        bcs.balanced_split(dg[dg["g"] == M])


# ------------------------------------------------------------ filters (Eqs. 3, 6; supp. Eq. 3)
def test_f_pg_keeps_exactly_mispredicted():
    genders = [F, F, M, M, F]
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7], [0.6, 0.4], [0.5, 0.5]])
    # argmax: F, M, M, F, F (tie -> female)
    assert bcs.predicted_gender(proba).tolist() == [F, M, M, F, F]
    assert bcs.f_pg(genders, proba).tolist() == [False, True, False, True, False]


def test_f_gf_delta_filter_on_hand_made_probabilities():
    g = [F, M, F, F, M]
    p_new = np.array([[0.875, 0.125], [0.25, 0.75], [0.625, 0.375], [0.4375, 0.5625],
                      [0.25, 0.75]])
    p_orig = np.array([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.0625, 0.9375],
                       [0.5625, 0.4375]])
    d = bcs.d_increase(g, p_new, p_orig)
    assert d.tolist() == [0.375, 0.25, 0.125, 0.375, 0.3125]
    # row 2: d = 0.125 <= delta; row 3: d > delta but predicted male for a female caption
    assert bcs.f_gf(g, p_new, p_orig, 0.2).tolist() == [True, True, False, False, True]
    # strict inequality: d == delta is dropped
    assert bcs.f_gf(g, p_new, p_orig, 0.25).tolist() == [True, False, False, False, True]
    assert bcs.f_gf(g, p_new, p_orig, 0.0).tolist() == [True, True, True, False, True]


def test_f_af_alpha_filter():
    p_auth = np.array([0.1, 0.29, 0.3, 0.31, 0.95])
    assert bcs.f_af(p_auth, 0.3).tolist() == [False, False, False, True, True]
    assert bcs.f_af(p_auth, 0.0).tolist() == [True] * 5


def test_gender_labels_validated():
    with pytest.raises(ValueError):
        bcs.d_increase(["both"], np.array([[0.5, 0.5]]), np.array([[0.5, 0.5]]))


# ------------------------------------------------------------------ content words (supp. 1.3)
@pytest.fixture
def no_tagger(monkeypatch):
    monkeypatch.setattr(bcs_words, "nltk_tagger_available", lambda: False)


def test_wordnet_fallback_content_positions(no_tagger):
    cap = "A woman riding a red bike quickly down the street with two dogs"
    toks = [w for _, _, w in t5lib.word_spans(cap)]
    got = [toks[i] for i in bcs.content_positions(cap, "libra", "auto")]
    assert got == ["riding", "red", "bike", "quickly", "street", "dogs"]
    assert bcs.content_positions(cap, "libra", "wordnet") == bcs.content_positions(cap)


def test_pos_method_errors():
    with pytest.raises(ValueError):
        bcs.content_positions("a dog", pos="spacy")
    bcs.nltk_tagger_available.cache_clear()
    if not bcs.nltk_tagger_available():      # offline: the tagger data is not installed
        with pytest.raises(LookupError):
            bcs.content_positions("a dog runs", pos="nltk")


GW = sorted(gender_words("libra"))
OTHER_WORDS = ["dog", "kitchen", "riding", "red", "quickly", "a", "the", "on", "with", "two",
               "skateboard", "holding", "umbrella", "is", "very", "table", "surfing", "blue"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(GW + OTHER_WORDS), min_size=1, max_size=14),
       st.sampled_from(["", ".", " ,"]), st.integers(0, 2**31 - 1))
def test_masking_never_touches_gender_words(words, punct, seed):
    cap = " ".join(w.capitalize() if i == 0 else w for i, w in enumerate(words)) + punct
    pos = bcs.content_positions(cap, "libra", "wordnet")
    toks = [w for _, _, w in t5lib.word_spans(cap)]
    gw = gender_words("libra")
    assert all(toks[i].lower() not in gw for i in pos)
    chosen = t5lib.sample_positions(len(toks), 0.15, np.random.default_rng(seed), pos)
    assert set(chosen) <= set(pos)
    assert len(chosen) == (max(1, round(0.15 * len(pos))) if pos else 0)
    src, tgt, orig = t5lib.mask_words(cap, chosen)
    # every gender word of the caption survives in the T5 input, in order
    assert [w.lower() for _, _, w in t5lib.word_spans(src) if w.lower() in gw] == \
        [w.lower() for w in toks if w.lower() in gw]
    assert len(orig) == len(chosen) and all(o.lower() not in gw for o in orig)


# ------------------------------------------------------------------ synonyms (supp. 1.3)
@pytest.mark.parametrize("a, b, expected", [
    ("car", "automobile", True), ("car", "bus", False), ("cars", "automobiles", True),
    ("sitting", "sits", True), ("dog", "cat", False), ("couch", "sofa", True),
    ("kitchen", "bathroom", False), ("street", "road", False), ("big", "large", True),
])
def test_synonym_via_wordnet(a, b, expected):
    assert bcs.is_synonym(a, b) is expected


def test_trivial_reason():
    assert bcs.trivial_reason(["car"], ["automobile"]) == "synonym"
    assert bcs.trivial_reason(["car"], ["bus"]) is None
    assert bcs.trivial_reason(["car", "red"], ["car", "Red"]) == "unchanged"
    assert bcs.trivial_reason(["car", "red"], ["car", "blue"]) is None     # one real change
    assert bcs.trivial_reason(["car", "red"], ["automobile", "blue"]) == "synonym"


# ------------------------------------------------------------------ mixes (Table 1)
def _pool(n, t):
    return pd.DataFrame({"image_id": range(n), "caption_id": range(n), "original": ["o"] * n,
                         "biased": [f"{t}{i}" for i in range(n)], "type": t})


def test_mix_keeps_ratio_and_shrinks_to_the_scarcest_type():
    pools = {"swap": _pool(10, "swap"), "t5": _pool(3, "t5"), "merged": _pool(8, "merged")}
    out, info = bcs.mix(pools, bcs.TABLE1_MIXES["0:1:1"], 100)
    assert info["per_type"] == {"swap": 0, "t5": 3, "merged": 3}
    assert info["limited_by"] == "t5" and len(out) == 6
    out, info = bcs.mix(pools, bcs.TABLE1_MIXES["1:2:1"], 8)
    assert info["per_type"] == {"swap": 1, "t5": 3, "merged": 1}
    out, info = bcs.mix(pools, {"swap": 1, "t5": 1, "merged": 0}, 4)
    assert info["per_type"] == {"swap": 2, "t5": 2, "merged": 0} and info["limited_by"] is None
    assert set(out["biased"]) <= set(pools["swap"]["biased"]) | set(pools["t5"]["biased"])
    with pytest.raises(ValueError):
        bcs.mix(pools, {"swap": 0, "t5": 0}, 4)
    # an empty positive-weight pool is dropped, not allowed to zero the whole mix
    empty_t5 = {**pools, "t5": _pool(0, "t5")}
    out, info = bcs.mix(empty_t5, bcs.TABLE1_MIXES["0:1:1"], 5)
    assert info["per_type"] == {"swap": 0, "t5": 0, "merged": 5}
    assert info["dropped_empty"] == ["t5"] and len(out) == 5
    out, info = bcs.mix({"t5": _pool(0, "t5"), "merged": _pool(0, "merged")},
                        bcs.TABLE1_MIXES["0:1:1"], 5)
    assert len(out) == 0 and info["dropped_empty"] == ["t5", "merged"]
    with pytest.raises(ValueError):
        bcs.mix(pools, {"random": 1}, 4)


def test_settings_from_params():
    s = bcs.settings_from_params({"mix": "1:2:1", "alpha": 0.5, "t5": {"model": "tiny"}})
    assert s.mix == {"swap": 1, "t5": 2, "merged": 1} and s.alpha == 0.5
    with pytest.raises(ValueError):
        bcs.settings_from_params({"mix": "2:2:2"})


def test_training_set_and_cap():
    caps = pd.DataFrame({"caption_id": range(20), "image_id": [i // 5 for i in range(20)],
                         "caption": [f"c {i}" for i in range(20)]})
    split = pd.DataFrame({"image_id": [0, 1, 2, 3], "split": ["train", "train", "val", "test"]})
    d = bcs.training_set(caps, split)
    assert d["image_id"].unique().tolist() == [0, 1]
    d2 = bcs.training_set(caps, split, max_captions=4, seed=3)
    assert len(d2) == 4 and d2["caption_id"].is_monotonic_increasing
    with pytest.raises(ValueError):
        bcs.training_set(caps, split.assign(image_id=[9, 9, 9, 9]))


# ------------------------------------------------------------------ the whole synthesis
KEYWORDS = {"kitchen": (0.9, 0.1), "skateboard": (0.1, 0.9), "cooking": (0.95, 0.05),
            "surfing": (0.05, 0.95)}


def stub_proba(texts):
    """A stub f_g: p(female) set by the first keyword found, else 0.5 (known outputs)."""
    out = []
    for t in texts:
        p = (0.5, 0.5)
        for k, v in KEYWORDS.items():
            if k in t.lower():
                p = v
                break
        out.append(p)
    return np.array(out)


FILLS = {"riding": "cooking", "standing": "surfing", "street": "kitchen", "red": "large"}


def stub_fill(t5model, captions, positions, **kw):
    """A stub T5: each masked word is replaced by FILLS[word] (car -> automobile, a synonym;
    other words unchanged)."""
    out = []
    for c, pos in zip(captions, positions):
        words = [w for _, _, w in t5lib.word_spans(c)]
        out.append([FILLS.get(words[p].lower(), "automobile" if words[p].lower() == "car"
                              else words[p]) for p in pos])
    return out


def test_synthesize_with_stubs(monkeypatch):
    caps = ["A woman riding a skateboard",       # female, p(f)=0.1 -> F_PG -> swap
            "A man standing in the kitchen",     # male, p(m)=0.1 -> F_PG -> swap
            "A man riding a skateboard",         # male, predicted male: not in F_PG
            "A woman standing on the street",    # T5: standing->surfing, street->kitchen
            "A man near a red car",              # T5: car->automobile: synonym, dropped
            "A dog on a couch"]                  # not in D_g
    d = pd.DataFrame({"caption_id": range(len(caps)), "image_id": range(len(caps)),
                      "caption": caps})
    s = bcs.BCSSettings(mask_rate=1.0, samples_per_caption=1, pos="wordnet",
                        mix={"swap": 1, "t5": 1, "merged": 1})
    monkeypatch.setattr(t5lib, "fill_words", stub_fill)
    synth, cand, m = bcs.synthesize(d, stub_proba, None, s,
                                    auth_fn=lambda syn, auth: (np.full(len(syn), 0.9), {}))
    # F_PG(D_g): c0, c1 and c4 (stub tie 0.5/0.5 -> predicted female, c4 is male)
    assert m["n_Dg"] == 5 and m["n_F_PG_Dg"] == 3
    sw = synth[synth["type"] == "swap"]
    assert sw["biased"].iloc[0] in ("A man riding a skateboard",
                                     "A woman standing in the kitchen", "A woman near a red car")
    c = cand.set_index("caption_id")
    assert 5 not in c.index                      # not in D_g: no T5 sample (source=gendered)
    assert c.loc[4, "status"] == "synonym"       # car -> automobile
    assert c.loc[0, "candidate"] == "A woman cooking a skateboard"
    assert c.loc[3, "candidate"] == "A woman surfing on the kitchen"
    # c3: p(f|y') = 0.9 (kitchen), p(f|y) = 0.5 -> d = 0.4 > delta, predicted female -> A_GC
    assert c.loc[3, "d"] == pytest.approx(0.4) and c.loc[3, "in_t5"]
    # c0 (skateboard -> male) and c1 ("A man surfing in the kitchen" -> female): F_PG -> A
    assert c.loc[0, "in_merged_source"] and c.loc[1, "in_merged_source"]
    # c2: predicted male = g but d = 0 -> neither
    assert not c.loc[2, "in_t5"] and not c.loc[2, "in_merged_source"]
    assert m["available"] == {"swap": 3, "t5": 1, "merged": 2}
    assert m["selected"] == {"swap": 1, "t5": 1, "merged": 1}      # 1:1:1, limited by t5
    mg = synth[synth["type"] == "merged"]["biased"].iloc[0]
    assert mg in ("A man cooking a skateboard", "A woman surfing in the kitchen")
    assert m["removed_fraction"]["trivial_synonym"] == pytest.approx(1 / 5)
    assert m["d_mean"]["A_GC"] == pytest.approx(0.4)
    md = bcs.samples_markdown(synth, cand)
    assert "Gender-swapping" in md and "synonym" in md


def test_synthesize_authenticity_filter_removes(monkeypatch):
    caps = ["A woman standing on the street", "A man standing on the street"]
    d = pd.DataFrame({"caption_id": [0, 1], "image_id": [0, 1], "caption": caps})
    monkeypatch.setattr(t5lib, "fill_words", stub_fill)
    s = bcs.BCSSettings(mask_rate=1.0, samples_per_caption=1, pos="wordnet", alpha=0.3)
    _, cand, m = bcs.synthesize(d, stub_proba, None, s,
                                auth_fn=lambda syn, auth: (np.array([0.3, 0.31]), {}))
    assert m["t5"]["unnatural"] == 1 and m["removed_fraction"]["authenticity_F_AF"] == 0.5
    assert cand["status"].tolist().count("unnatural") == 1
