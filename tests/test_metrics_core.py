"""Hand-computed checks of the bias metrics: captions (Ratio, Error, classification Ratio),
BiasAmp, DBA_G/DBA_O (+ cross-check with the `bias-amplification` package), leakage,
Bias@K / MaxSkew@K."""
from __future__ import annotations

import math

import numpy as np
import pytest

from biaslab.metrics import biasamp, captions, dba, leakage, retrieval

# --------------------------------------------------------------------------------------------
# captions.py
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cap, lab", [
    ("A man riding a horse.", "man"),
    ("Two WOMEN, talking", "woman"),
    ("a man and a woman", "neutral"),        # both genders -> neutral
    ("a dog on a couch", "neutral"),         # no gender word
    ("the boy and his dog", "man"),
    ("a woman's hat", "woman"),              # possessive split by the tokenizer
    ("a mannequin in a shop", "neutral"),    # substring of "man" is not a gender word
])
def test_caption_label(cap, lab):
    assert captions.caption_label(cap) == lab


def test_caption_label_word_list():
    # "boyfriend" is only in the libra / gensynth lists
    assert captions.caption_label("her boyfriend", words="lic") == "woman"
    assert captions.caption_label("her boyfriend", words="libra") == "neutral"


def test_ratio_with_and_without_genders():
    caps = ["A man riding", "a woman cooking", "a man and a woman", "a dog", "two men"]
    gens = ["male", "female", "female", "undefined", "male"]
    r = captions.ratio_details(caps, gens)
    # counted: 0 (man), 1 (woman), 2 (both genders: in neither count), 4 (man); 3 unlabelled
    assert (r["n_man"], r["n_woman"], r["n_neutral"], r["n_both"], r["n_images"]) == \
        (2, 1, 0, 1, 4)
    assert r["ratio"] == 2.0 and r["ratio_max"] == 2.0
    r = captions.ratio_details(caps)     # "a dog" names no gender, "a man and a woman" both
    assert (r["n_man"], r["n_woman"], r["n_neutral"], r["n_both"]) == (2, 1, 1, 1)
    # mapping input aligned by key
    r = captions.ratio_details({10: "a woman", 11: "a woman", 12: "a man"},
                       {12: "male", 11: "female", 10: "female"})
    assert r["ratio"] == 0.5 and r["ratio_max"] == 2.0


def test_ratio_division_by_zero():
    r = captions.ratio_details(["a man", "a boy"])
    assert r["ratio"] == math.inf and r["ratio_max"] == math.inf
    r = captions.ratio_details(["a dog"])
    assert math.isnan(r["ratio"]) and math.isnan(r["ratio_max"])
    r = captions.ratio_details(["a woman"])
    assert r["ratio"] == 0.0 and r["ratio_max"] == math.inf


def test_ratio_input_errors():
    with pytest.raises(ValueError):
        captions.ratio_details(["a man"], ["male", "female"])
    with pytest.raises(TypeError):
        captions.ratio_details("a man")
    with pytest.raises(ValueError):
        captions.ratio_details({1: "a man"}, {2: "male"})


def test_error_neutral_is_not_an_error():
    caps = ["a man on a bike", "a woman with a dog", "a person cooking", "a man and a woman",
            "a girl"]
    gens = ["female", "female", "male", "male", "undefined"]
    # labelled: 4 images; only image 0 (female captioned man) is an error; 2 and 3 are neutral
    assert captions.error(caps, gens) == pytest.approx(25.0)
    assert captions.error(["a woman"], ["male"]) == 100.0
    assert math.isnan(captions.error(["a woman"], ["undefined"]))
    with pytest.raises(ValueError):
        captions.error(["a woman"], None)


def test_error_by_group_hand_computed():
    """Error within each gender x skin group (the gender half is the image's
    gender) and the worst-group gap with Welch's interval between the two extreme groups."""
    caps = {1: "a man on a bike", 2: "a woman on a bike", 3: "a man on a bike",    # female_dark
            4: "a woman cooking", 5: "a person cooking",                          # female_light
            6: "a woman in a car", 7: "a man in a car",                           # male_dark
            8: "a man surfing", 9: "a man surfing", 10: "a boy surfing",          # male_light
            11: "a woman"}                                                        # unlabelled
    groups = {1: "female_dark", 2: "female_dark", 3: "female_dark", 4: "female_light",
              5: "female_light", 6: "male_dark", 7: "male_dark", 8: "male_light",
              9: "male_light", 10: "male_light", 11: None, 12: "male_dark"}   # 12: no caption
    r = captions.error_by_group(caps, groups)
    # errors: female_dark 2 of 3 ("man"), female_light 0 of 2 (neutral is no error),
    # male_dark 1 of 2, male_light 0 of 3; pooled 3 of 10
    per = {g: (v["Error"], v["n"]) for g, v in r["per_group"].items()}
    assert per == {"female_dark": (pytest.approx(200 / 3), 3), "female_light": (0.0, 2),
                   "male_dark": (50.0, 2), "male_light": (0.0, 3)}
    assert r["pooled"] == pytest.approx(30.0)
    gap = r["worst_group_gap"]
    assert gap["max_group"] == "female_dark" and gap["min_group"] == "female_light"
    assert gap["gap"] == pytest.approx(200 / 3)
    # female_light has no variance: Welch's interval is the t interval of female_dark alone
    from scipy.stats import t
    sd = np.std([100.0, 0.0, 100.0], ddof=1)
    assert gap["hi"] - gap["gap"] == pytest.approx(t.ppf(0.975, 2) * sd / np.sqrt(3))
    with pytest.raises(ValueError, match="gender half"):
        captions.error_by_group({1: "a man"}, {1: "other_dark"})


def test_classification_ratio_binary():
    man = [1, 1, 0, 1, 0, 1]
    woman = [0, 0, 1, 1, 0, 0]
    r = captions.classification_ratio(man, woman)
    # man output on: 0, 1, 3, 5; woman on: 2, 3; image 3 (both) counts for both, 4 for none
    assert (r["n_man"], r["n_woman"], r["n_both"], r["n_neither"]) == (4, 2, 1, 1)
    assert r["ratio"] == 2.0 and r["ratio_max"] == 2.0 and r["n_images"] == 6
    r = captions.classification_ratio(np.array(woman, bool), np.array(man, bool))
    assert r["ratio"] == pytest.approx(0.5) and r["ratio_max"] == pytest.approx(2.0)


def test_classification_ratio_thresholds_each_output():
    man = [0.9, 0.2, 0.6, 0.5, 0.3]
    woman = [0.1, 0.7, 0.55, 0.2, 0.4]
    r = captions.classification_ratio(man, woman)      # both at 0.5, ">=": 0.5 is on
    # man on: 0, 2, 3; woman on: 1, 2 (image 2 both, image 4 neither) -- not argmax
    assert (r["n_man"], r["n_woman"], r["n_both"], r["n_neither"]) == (3, 2, 1, 1)
    assert r["ratio"] == pytest.approx(1.5)
    r = captions.classification_ratio(man, woman, threshold=(0.65, 0.5))  # (man, woman)
    assert (r["n_man"], r["n_woman"]) == (1, 2)
    assert r["ratio"] == pytest.approx(0.5) and r["ratio_max"] == pytest.approx(2.0)
    none = captions.classification_ratio([0.1, 0.2], [0.3, 0.4])
    assert math.isnan(none["ratio"]) and none["n_neither"] == 2
    no_woman = captions.classification_ratio([0.9], [0.1])
    assert no_woman["ratio"] == math.inf and no_woman["ratio_max"] == math.inf
    with pytest.raises(ValueError):
        captions.classification_ratio([1, 0], [1])
    with pytest.raises(ValueError, match="threshold"):
        captions.classification_ratio([1, 0], [1, 0], threshold=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="threshold"):
        captions.classification_ratio([1, 0], [1, 0], threshold=float("nan"))


# --------------------------------------------------------------------------------------------
# BiasAmp (thesis Eqs. 2.2-2.3)
# --------------------------------------------------------------------------------------------

def _caps(word, n_f, n_m):
    return [f"a woman in a {word}"] * n_f + [f"a man in a {word}"] * n_m


# Human captions: kitchen 3 female : 1 male (b = 0.75 female), skateboard 1 : 3 (0.75 male).
HUMAN = _caps("kitchen", 3, 1) + _caps("skateboard", 1, 3)


def test_biasamp_exaggerating_model_is_positive():
    model = _caps("kitchen", 4, 0) + _caps("skateboard", 0, 4)
    r = biasamp.bias_amplification_details(model, HUMAN, min_count=1)
    assert sorted(r["vocab"]) == ["kitchen", "skateboard"]
    # (1 - 0.75) for kitchen/female + (1 - 0.75) for skateboard/male, over |L| = 2 -> 0.25
    assert r["ba"] == pytest.approx(25.0)
    t = r["table"].set_index("word")
    assert t.loc["kitchen", "b_female"] == pytest.approx(0.75)
    assert t.loc["kitchen", "b_hat_female"] == pytest.approx(1.0)
    assert t.loc["kitchen", "skew"] == "female" and t.loc["skateboard", "skew"] == "male"
    assert t.loc["skateboard", "amplification"] == pytest.approx(0.25)


def test_biasamp_reproducing_model_is_zero_and_reversing_negative():
    r = biasamp.bias_amplification_details(list(HUMAN), HUMAN, min_count=1)
    assert r["ba"] == pytest.approx(0.0)
    balanced = _caps("kitchen", 2, 2) + _caps("skateboard", 2, 2)
    r = biasamp.bias_amplification_details(balanced, HUMAN, min_count=1)
    assert r["ba"] == pytest.approx(-25.0)   # (0.5 - 0.75) twice / 2


def test_biasamp_tie_counts_in_L_and_min_count_filter():
    human = HUMAN + _caps("dog", 2, 2)             # dog: no skew (b = 0.5 = 1/|A|)
    model = _caps("kitchen", 4, 0) + _caps("skateboard", 0, 4) + _caps("dog", 4, 0)
    r = biasamp.bias_amplification_details(model, human, min_count=1)
    # dog contributes nothing but is in |L| (Eq. 2.3 divides by |L|): 0.5 / 3
    assert r["n_words"] == 3
    assert r["ba"] == pytest.approx(100 * 0.5 / 3)
    # min_count=2: kitchen (1 male) and skateboard (1 female) drop out
    r = biasamp.bias_amplification_details(model, human, min_count=2)
    assert r["vocab"] == ["dog"] and r["ba"] == pytest.approx(0.0)
    r = biasamp.bias_amplification_details(model, human, min_count=3)
    assert r["n_words"] == 0 and math.isnan(r["ba"])


def test_biasamp_top_k_counts_all_human_captions():
    # Gender-neutral human captions take part in the top-k ranking (D = all captions):
    # counts a 26, dog 10, red 10, in 8, then kitchen / skateboard 4 each.
    human = HUMAN + ["a red dog"] * 10
    model = _caps("kitchen", 4, 0) + _caps("skateboard", 0, 4)
    assert biasamp.bias_amplification_details(model, human, min_count=1, top_k=4)["n_words"] == 0
    r = biasamp.bias_amplification_details(model, human, min_count=1, top_k=1000)
    assert sorted(r["vocab"]) == ["kitchen", "skateboard"]   # dog/red never co-occur


def test_biasamp_word_missing_from_model_counts_in_L_with_no_term():
    model = _caps("kitchen", 4, 0) + ["a dog"]     # model never says skateboard
    r = biasamp.bias_amplification_details(model, HUMAN, min_count=1)
    # Eq. 2.3 divides by |L| = 2 (kitchen, skateboard); skateboard's b_hat is 0/0 -> no term:
    # (1 - 0.75) / 2 = 0.125
    assert sorted(r["vocab"]) == ["kitchen", "skateboard"]
    assert r["n_words"] == 2 and r["n_undefined"] == 1
    assert r["ba"] == pytest.approx(12.5)
    t = r["table"].set_index("word")
    assert math.isnan(t.loc["skateboard", "amplification"])


def test_biasamp_reference_is_the_training_captions():
    # Training captions D: kitchen 3 f : 1 m (b_f = 0.75), skateboard 1 : 3; 'dog' is frequent
    # only in the TEST references, so with D = training captions it is not in L.
    train = HUMAN
    test_refs = _caps("dog", 3, 1) + _caps("kitchen", 1, 3)     # kitchen skews male here
    model = _caps("kitchen", 4, 0) + _caps("dog", 4, 0)
    r = biasamp.bias_amplification_details(model, train, min_count=1)
    # L = {kitchen, skateboard} from D; kitchen: 1 - 0.75; skateboard unused (0/0): /2
    assert sorted(r["vocab"]) == ["kitchen", "skateboard"]
    assert r["ba"] == pytest.approx(100 * 0.25 / 2)
    # the test references give another L and another b: dog 1 - 0.75, kitchen (b_m = 0.75)
    # 0 - 0.75 -> (0.25 - 0.75) / 2
    r = biasamp.bias_amplification_details(model, test_refs, min_count=1)
    assert sorted(r["vocab"]) == ["dog", "kitchen"]
    assert r["ba"] == pytest.approx(100 * (0.25 - 0.75) / 2)
    # min_count applies to D: kitchen has 1 male co-occurrence in D
    assert biasamp.bias_amplification_details(model, train, min_count=2)["n_words"] == 0


def test_caption_objects_matches_names_plurals_and_synonyms():
    cats = ["dog", "baseball bat", "knife", "cell phone", "person", "skis"]
    got = dba.caption_objects("Two dogs and a man with a baseball bat and knives", cats)
    assert got == {"dog", "baseball bat", "knife"}
    assert dba.caption_objects("a woman on her phone on skis", cats) == {"cell phone",
                                                                            "skis"}
    assert dba.caption_objects("a bat", ["baseball bat"], synonyms={}) == set()
    assert dba.caption_objects("a baseball game", cats) == set()


def test_caption_dba_by_hand():
    # 4 images: A (truth) f, f, m, m; objects on images: kitchen-ish 'oven' on images 0, 1, 2;
    # 'dog' on 3. Model captions: genders f, none, m, m; objects mentioned: oven on 0, 1, 3.
    caps = ["a woman at an oven", "someone at an oven", "a man near a table", "a man at an oven"]
    gens = ["female", "female", "male", "male"]
    objs = [["oven"], ["oven"], ["oven"], ["dog", "person"]]
    r = dba.caption_dba(caps, gens, objs)
    assert r["categories"] == ["dog", "oven"] and r["n_images"] == 4   # person excluded
    A = np.array([[1, 0], [1, 0], [0, 1], [0, 1]])
    T = np.array([[0, 1], [0, 1], [0, 1], [1, 0]])
    Ap = np.array([[1, 0], [0, 0], [0, 1], [0, 1]])
    Tp = np.array([[0, 1], [0, 1], [0, 0], [0, 1]])
    assert r["DBA_G"] == pytest.approx(dba.dba_g_details(A, T, Ap)["DBA_G"])
    assert r["DBA_O"] == pytest.approx(dba.dba_o_details(A, T, Tp)["DBA_O"])
    # by hand, DBA_O: p(l|a): f: dog 0, oven 1; m: dog .5, oven .5.  p_hat: f: dog 0, oven 1;
    # m: dog 0, oven .5 -> Delta only at (m, dog) = -0.5; y(m, dog) = 1 (p = 1/4 > 1/2 * 1/4)
    # -> term -0.5; DBA_O = 100 * -0.5 / 4 = -12.5
    assert r["DBA_O"] == pytest.approx(-12.5)
    # DBA_G: p(a|oven): f 2/3, m 1/3; p_hat(a|oven): f 1/3 (image 1 neutral), m 1/3;
    # p(a|dog): m 1; p_hat(m|dog) = 1. y: (f, oven) = 1 (2/4 > 1/2 * 3/4), (m, oven) = 0,
    # (f, dog) = 0, (m, dog) = 1. Terms: (f, oven) -1/3; (m, oven) -(0) = 0 -> -1/3 / 4
    assert r["DBA_G"] == pytest.approx(100 * (-1 / 3) / 4)
    with pytest.raises(ValueError):
        dba.caption_dba(caps, gens[:3], objs)


def test_biasamp_human_null_is_the_test_images_own_captions_one_index_at_a_time():
    # D = HUMAN: kitchen b_f = 0.75, skateboard b_m = 0.75. Four test images, two captions each
    # (a third on one image is ignored: K = the smallest count). Index 0 mixes kitchen 1 : 1
    # -> (0.5 - 0.75); skateboard 0 : 2 -> (1 - 0.75); index 1: kitchen 2 : 0 -> (1 - 0.75),
    # skateboard 1 : 0 -> (0 - 0.75) ("a dog" names no gender: not counted); |L| = 2.
    test = [["a woman in a kitchen", "a woman in a kitchen", "a man in a kitchen"],
            ["a man in a kitchen", "a woman in a kitchen"],
            ["a man on a skateboard", "a woman on a skateboard"],
            ["a man on a skateboard", "a dog"]]
    r = biasamp.human_null(test, HUMAN, min_count=1)
    assert r["n_indices"] == 2 and r["n_images"] == 4
    assert r["per_index"] == pytest.approx([100 * (-0.25 + 0.25) / 2, 100 * (0.25 - 0.75) / 2])
    assert r["ba"] == pytest.approx(-12.5)
    # a test set whose index 0 skews like D and index 1 reverses it: 0 and -25, mean -12.5
    test = [["a woman in a kitchen", "a man in a kitchen"]] * 3 + \
        [["a man in a kitchen", "a woman in a kitchen"]] + \
        [["a man on a skateboard", "a woman on a skateboard"]] * 3 + \
        [["a woman on a skateboard", "a man on a skateboard"]]
    r = biasamp.human_null(test, HUMAN, min_count=1)
    assert r["per_index"] == pytest.approx([0.0, -50.0])
    assert r["ba"] == pytest.approx(-25.0) and (r["min"], r["max"]) == (-50.0, 0.0)
    # each index is exactly bias_amplification of that caption of every image
    first = biasamp.bias_amplification_details([c[0] for c in test], HUMAN, min_count=1)["ba"]
    assert r["per_index"][0] == pytest.approx(first)
    with pytest.raises(ValueError, match="at least one human caption"):
        biasamp.human_null([["a man in a kitchen"], []], HUMAN, min_count=1)
    with pytest.raises(ValueError, match="differ in length"):
        biasamp.human_null(test, HUMAN, ["female"], min_count=1)


def test_biasamp_image_gender_source_and_nested_captions():
    # Per image: a list of human captions; gender from the image label.
    human = [["a person in a kitchen"] * 3, ["a person in a kitchen"],
             ["a person on a skateboard"], ["a person on a skateboard"] * 3]
    hg = ["female", "male", "female", "male"]
    model = ["a person in a kitchen", "a person on a skateboard",
             "a person on a skateboard", "a person on a skateboard"]
    r = biasamp.bias_amplification_details(model, human, hg, hg, gender_source="image", min_count=1,
                                           vocab=["kitchen", "skateboard"])
    # human: kitchen 3:1 (0.75 f), skateboard 1:3 (0.75 m); model: kitchen 1:0 -> +0.25;
    # skateboard 1 f : 2 m -> 2/3 - 3/4 = -1/12; BA = (0.25 - 1/12) / 2
    assert r["ba"] == pytest.approx(100 * (0.25 - 1 / 12) / 2)
    with pytest.raises(ValueError):
        biasamp.bias_amplification_details(model, human, gender_source="image")


def test_caption_vocabulary_order_and_filter():
    caps = ["a woman with a red umbrella", "a man with a red kite", "the red bus"]
    v = biasamp.caption_vocabulary(caps, top_k=1000)
    assert v == ["red", "bus", "kite", "umbrella"]   # frequency, then alphabetical
    # top_k is applied before the content filter: the top 3 tokens are a, red, with
    assert biasamp.caption_vocabulary(caps, top_k=3) == ["red"]
    assert biasamp.caption_vocabulary(caps, content_filter=lambda w: w.startswith("u")) == [
        "umbrella"]
    assert "woman" not in biasamp.caption_vocabulary(caps, content_filter="none")


def test_caption_vocabulary_wordnet_filter():
    try:
        from nltk.corpus import wordnet
        wordnet.ensure_loaded()
    except LookupError:
        pytest.skip("NLTK WordNet not installed (scripts/setup.sh)")
    caps = ["a woman with a red umbrella near the xqzt", "a man with a red kite"]
    assert biasamp.caption_vocabulary(caps) == ["red", "kite", "umbrella", "xqzt"]
    # a non-word has no WordNet (noun/verb/adjective/adverb) entry
    assert biasamp.caption_vocabulary(caps, content_filter="wordnet") == [
        "red", "kite", "umbrella"]


def test_ba_from_counts_matches_eq_2_3():
    c = np.array([[30, 10, 5], [10, 30, 5]])
    ch = np.array([[40, 5, 9], [0, 35, 1]])
    r = biasamp.bias_amplification_from_counts(c, ch)
    # word 0: 1.0 - 0.75; word 1: 35/40 - 0.75; word 2: tie -> no term; |L| = 3
    assert r["ba"] == pytest.approx(100 * (0.25 + 0.125) / 3)
    with pytest.raises(ValueError):
        biasamp.bias_amplification_from_counts(c, ch[:, :2])


# --------------------------------------------------------------------------------------------
# DBA (thesis Eqs. 2.12-2.14), 4-image example computed by hand
# --------------------------------------------------------------------------------------------
#
# Attributes A = (female, male), objects L = (handbag, skateboard).
#   image 1: female, {handbag}         image 2: female, {handbag, skateboard}
#   image 3: male,   {skateboard}      image 4: male,   {handbag, skateboard}
# p(f) = p(m) = 1/2, p(handbag) = p(skateboard) = 3/4.
# p(f, handbag) = 2/4 > 1/2 * 3/4  -> y = 1;  p(m, handbag) = 1/4 -> y = 0
# p(f, skateboard) = 1/4 -> y = 0;            p(m, skateboard) = 2/4 -> y = 1
#
# DBA_O (Delta = p_hat(l|a) - p(l|a)); predicted objects: 1 {handbag}, 2 {handbag},
# 3 {skateboard}, 4 {skateboard}.
#   p(l|f) = (1, 1/2), p(l|m) = (1/2, 1);  p_hat(l|f) = (1, 0), p_hat(l|m) = (0, 1)
#   Delta: f (0, -1/2), m (-1/2, 0); terms: y=1 -> Delta, y=0 -> -Delta:
#   0 + 1/2 + 1/2 + 0 = 1, / (|A||L| = 4) = 0.25 -> 25.0
#   Package normalisation (divide by sum_l c(a, l)): p(l|f) = (2/3, 1/3), p(l|m) = (1/3, 2/3),
#   p_hat(l|f) = (1, 0), p_hat(l|m) = (0, 1) -> four terms of 1/3 -> 4/3 / 4 -> 33.33
#
# DBA_G (Delta = p_hat(a|l) - p(a|l)); predicted genders: 1 female, 2 female, 3 none (neutral
# caption), 4 female.
#   p(f|handbag) = 2/3, p(m|handbag) = 1/3, p(f|skateboard) = 1/3, p(m|skateboard) = 2/3
#   p_hat(.|handbag) over images 1, 2, 4 = (f, f, f): (1, 0)
#   p_hat(.|skateboard) over images 2, 3, 4 = (f, none, f): (2/3, 0)
#   Delta: handbag (+1/3, -1/3), skateboard (+1/3, -2/3)
#   terms: f,handbag y=1 +1/3; m,handbag y=0 +1/3; f,skate y=0 -1/3; m,skate y=1 -2/3
#   sum = -1/3, / 4 -> -8.33
#   Package normalisation (divide by sum_a c_hat(a, l), dropping image 3):
#   p_hat(.|skateboard) = (1, 0): Delta (+2/3, -2/3) -> sum = 2/3 - 4/3 = -2/3, / 4 -> -16.67

A4 = np.array([[1, 0], [1, 0], [0, 1], [0, 1]])
T4 = np.array([[1, 0], [1, 1], [0, 1], [1, 1]])
T4_PRED = np.array([[1, 0], [1, 0], [0, 1], [0, 1]])
A4_PRED = np.array([[1, 0], [1, 0], [0, 0], [1, 0]])


def test_dba_o_by_hand():
    r = dba.dba_o_details(A4, T4, T4_PRED)
    np.testing.assert_array_equal(r["y"], [[1, 0], [0, 1]])
    np.testing.assert_allclose(r["delta"], [[0, -0.5], [-0.5, 0]])
    assert r["DBA_O"] == pytest.approx(25.0)
    assert dba.dba_o_details(A4, T4, T4_PRED, norm="cooccurrence")["DBA_O"] == pytest.approx(
        100 / 3)
    assert dba.dba_o_details(A4, T4, T4)["DBA_O"] == 0.0   # perfect predictions


def test_dba_g_by_hand():
    r = dba.dba_g_details(A4, T4, A4_PRED)
    np.testing.assert_allclose(r["delta"], [[1 / 3, 1 / 3], [-1 / 3, -2 / 3]])
    assert r["DBA_G"] == pytest.approx(-100 / 12)
    assert dba.dba_g_details(A4, T4, A4_PRED, norm="cooccurrence")["DBA_G"] == pytest.approx(
        -100 / 6)
    both = dba.dba(A4, T4, A_pred=A4_PRED, T_pred=T4_PRED)
    assert both["DBA_G"] == pytest.approx(-100 / 12) and both["DBA_O"] == pytest.approx(25.0)


def test_dba_g_sign_amplifying_model():
    # One object (handbag) on images 1-3; genders f, f, m, m. y(f) = 1, y(m) = 0.
    # The model calls the man with a handbag (image 3) a woman: p_hat(f|handbag) = 1 (+1/3),
    # p_hat(m|handbag) = 0 (-1/3) -> terms +1/3, +1/3 -> 2/3 / 2 = 1/3 -> +33.33
    A = np.array([[1, 0], [1, 0], [0, 1], [0, 1]])
    T = np.array([[1], [1], [1], [0]])
    A_pred = np.array([[1, 0], [1, 0], [1, 0], [0, 1]])
    assert dba.dba_g_details(A, T, A_pred)["DBA_G"] == pytest.approx(100 / 3)


def test_dba_input_validation():
    with pytest.raises(ValueError):
        dba.dba(A4, T4)
    with pytest.raises(ValueError):
        dba.dba_o_details(A4, T4, T4_PRED[:3])
    with pytest.raises(ValueError):
        dba.dba_o_details(A4, T4 * 0.5, T4_PRED)
    with pytest.raises(ValueError):
        dba.dba_g_details(A4, T4, A4_PRED, norm="other")


# --------------------------------------------------------------------------------------------
# Cross-check with the MIT-licensed `bias-amplification` package (0.2.1) on random data
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def random_data():
    rng = np.random.default_rng(123)
    n, k = 400, 8
    g = rng.integers(0, 2, n)
    A = np.eye(2)[g]
    T = (rng.random((n, k)) < 0.2 + 0.5 * g[:, None] * np.linspace(0, 1, k)).astype(float)
    T_pred = (rng.random((n, k)) < 0.35).astype(float)
    A_pred_onehot = np.eye(2)[rng.integers(0, 2, n)]
    A_pred_neutral = A_pred_onehot * (rng.random((n, 1)) < 0.7)   # ~30% rows all zero
    cls = rng.integers(0, k, n)                                  # multi-class tasks
    T_mc = np.eye(k)[np.where(rng.random(n) < 0.5, cls, (cls + g) % k)]
    T_mc_pred = np.eye(k)[rng.integers(0, k, n)]
    return dict(A=A, T=T, T_pred=T_pred, A1=A_pred_onehot, A0=A_pred_neutral, T_mc=T_mc,
                T_mc_pred=T_mc_pred, n=n, k=k)


def _pkg():
    bias_amplification = pytest.importorskip("bias_amplification")
    return bias_amplification


def _t(x):
    import torch
    return torch.tensor(np.asarray(x), dtype=torch.float)


def test_crosscheck_dba_g_with_package(random_data):
    pkg = _pkg()
    d, ref_dba = random_data, pkg.DBA()
    # T->A direction of the package == DBA_G; identical for one-hot predicted genders
    ref = ref_dba.computeBiasAmp(_t(d["T"]), _t(d["A"]), _t(d["A1"]))[0].item() * 100
    assert dba.dba_g_details(d["A"], d["T"], d["A1"])["DBA_G"] == pytest.approx(ref, abs=1e-4)
    # with gender-neutral predictions (zero rows) the package drops them from the
    # denominator; norm="cooccurrence" reproduces it and the definition differs
    ref0 = ref_dba.computeBiasAmp(_t(d["T"]), _t(d["A"]), _t(d["A0"]))[0].item() * 100
    ours0 = dba.dba_g_details(d["A"], d["T"], d["A0"])["DBA_G"]
    assert dba.dba_g_details(d["A"], d["T"], d["A0"], norm="cooccurrence")["DBA_G"] == \
        pytest.approx(ref0, abs=1e-4)
    assert abs(ours0 - ref0) > 0.1


def test_crosscheck_dba_o_with_package(random_data):
    pkg = _pkg()
    d, ref_dba = random_data, pkg.DBA()
    # multi-label objects: the package's P(t|a) divides by sum_t c(a, t), not by n_a
    ref = ref_dba.computeBiasAmp(_t(d["A"]), _t(d["T"]), _t(d["T_pred"]))[0].item() * 100
    assert dba.dba_o_details(d["A"], d["T"], d["T_pred"], norm="cooccurrence")["DBA_O"] == \
        pytest.approx(ref, abs=1e-4)
    assert abs(dba.dba_o_details(d["A"], d["T"], d["T_pred"])["DBA_O"] - ref) > 0.1
    # multi-class (one-hot) tasks: both normalisations coincide with the package
    ref_mc = ref_dba.computeBiasAmp(_t(d["A"]), _t(d["T_mc"]), _t(d["T_mc_pred"]))[0].item() * 100
    assert dba.dba_o_details(d["A"], d["T_mc"], d["T_mc_pred"])["DBA_O"] == pytest.approx(
        ref_mc, abs=1e-4)
    # y_al (Eq. 2.13) is the package's check_bias
    y_pkg = ref_dba.check_bias(_t(d["A"]), _t(d["T"])).numpy()
    np.testing.assert_array_equal(dba.dba_o_details(d["A"], d["T"], d["T_pred"])["y"], y_pkg)


def test_crosscheck_ba_with_package(random_data):
    pkg = _pkg()
    d = random_data
    rng = np.random.default_rng(7)
    # Model output that keeps each object's count: shuffle every column of T.
    T_perm = np.stack([rng.permutation(d["T"][:, j]) for j in range(d["k"])], axis=1)
    tot, table = pkg.BA_MALS().computeBiasAmp(_t(d["A"]), _t(d["T"]), _t(T_perm))
    ours = biasamp.bias_amplification_arrays(d["A"], d["T"], T_perm)
    # same mask 1[b_al > 1/|A|]
    mask_pkg = pkg.BA_MALS().check_bias(_t(d["A"]), _t(d["T"])).numpy().astype(bool)
    np.testing.assert_array_equal(ours["mask"], mask_pkg)
    # package term = mask * (c_hat - c) / N / |L|; ours = mask * (b_hat - b) (Eq. 2.3). With
    # preserved column counts n_t: package_at * |L| == ours_at * n_t / N
    n_t = d["T"].sum(axis=0)
    np.testing.assert_allclose(table.numpy() * d["k"], ours["contrib"] * n_t / d["n"],
                               atol=1e-6)
    assert ours["ba"] == pytest.approx(100 * ours["contrib"].sum() / d["k"])
    assert abs(ours["ba"] - 100 * tot.item()) > 1e-3   # the totals differ in general


# --------------------------------------------------------------------------------------------
# Leakage (paper 000 Eq. 7)
# --------------------------------------------------------------------------------------------

def test_eq7_score_is_confidence_weighted_accuracy():
    import torch
    p = torch.tensor([[0.8, 0.2], [0.4, 0.6], [0.3, 0.7]])
    lk, acc = leakage._scores(lambda x: torch.log(p), np.zeros((3, 1)), np.array([0, 0, 1]))
    # correct: rows 0 and 2 -> (0.8 + 0 + 0.7) / 3
    assert lk == pytest.approx(0.5) and acc == pytest.approx(2 / 3)


@pytest.fixture(scope="module")
def leak_result():
    rng = np.random.default_rng(0)
    n = 1100
    g = np.array(["female", "male"])[rng.integers(0, 2, n)].astype(object)
    g[:100] = "undefined"                              # ignored
    X = (rng.random((n, 20)) < 0.3).astype(float)      # independent of gender
    X_rev = X.copy()
    X_rev[:, 0] = g == "female"                        # object 0 reveals gender exactly
    scores = np.clip(X_rev * 0.8 + 0.1, 0, 1)          # scores -> binarised at 0.5 = X_rev
    return dict(X=X, X_rev=X_rev, scores=scores, g=list(g),
                res=leakage.leakage_details(X, scores, list(g), rounds=5, seed=0))


def test_leakage_chance_and_revealing(leak_result):
    r = leak_result["res"]
    # independent objects: accuracy at chance (50), Eq. 7 between acc/2 and acc
    assert r["acc_D"] == pytest.approx(50, abs=7)
    for p in r["rounds"]:
        assert p["acc_D"] / 2 - 1e-9 <= p["LK_D"] <= p["acc_D"] + 1e-9
    # perfectly revealing object: LK ~ 100
    assert r["acc_M"] == pytest.approx(100, abs=0.5)
    assert r["LK_M"] == pytest.approx(100, abs=5)
    assert r["leakage"] == pytest.approx(r["LK_M"] - r["LK_D"])
    assert r["leakage"] > 40
    # balanced sampling: equal numbers per gender, undefined ignored
    n_f = sum(x == "female" for x in leak_result["g"])
    n_m = sum(x == "male" for x in leak_result["g"])
    assert r["n_per_group"] == min(n_f, n_m)
    assert r["groups"] == ["female", "male"]
    assert len(r["rounds"]) == 5 and r["LK_D_std"] >= 0


def test_leakage_deterministic_and_threshold(leak_result):
    d = leak_result
    kw = dict(rounds=2, seed=3, attacker=leakage.Attacker(epochs=5))
    a = leakage.leakage_details(d["X"], d["scores"], d["g"], **kw)
    b = leakage.leakage_details(d["X"], d["X_rev"], d["g"], **kw)   # same after binarisation
    assert a["rounds"] == b["rounds"]
    c = leakage.leakage_details(d["X"], d["scores"], d["g"], threshold=None, **kw)
    assert c["LK_M"] != a["LK_M"]


def test_leakage_input_errors(leak_result):
    d = leak_result
    with pytest.raises(ValueError):
        leakage.leakage_details(d["X"], d["X"][:10], d["g"])
    with pytest.raises(ValueError):
        leakage.leakage_details(d["X"], d["X"], ["female"] * len(d["g"]))
    with pytest.raises(ValueError):
        leakage.leakage_details(d["X"][:3], d["X"][:3], ["female", "male", "male"])
    with pytest.raises(ValueError, match="train_gt, train_pred and train_genders"):
        leakage.leakage_details(d["X"], d["X"], d["g"], train_gt=d["X"])
    with pytest.raises(ValueError, match="columns"):
        leakage.leakage_details(d["X"], d["X"], d["g"], train_gt=d["X"][:, :3],
                                train_pred=d["X"][:, :3], train_genders=d["g"])


def _marked(n_f, n_m, base):
    """Object vectors whose column 0 names the row (base + row index), genders f then m."""
    x = np.zeros((n_f + n_m, 3))
    x[:, 0] = base + np.arange(n_f + n_m)
    return x, ["female"] * n_f + ["male"] * n_m


def test_leakage_attackers_are_fit_on_training_rows_only(monkeypatch):
    """Paper 000 Eq. 7 / Wang et al. 2019: LK_D's attacker is fit on the TRAINING ground truth,
    LK_M's on the model's predictions for the training images; both are scored on test rows
    only, gender-balanced (here 3 train and 2 test rows per group)."""
    import torch
    fits, scored = [], []

    class Constant:                      # softmax 0.5 / 0.5 -> argmax group 0
        def __call__(self, x):
            scored.append(x.numpy()[:, 0].copy())
            return torch.zeros(len(x), 2)

    def fake_train(x, y, n_classes, *args):
        fits.append((x[:, 0].copy(), np.bincount(y, minlength=2).tolist()))
        return Constant()

    monkeypatch.setattr(leakage, "_train_attacker", fake_train)
    monkeypatch.setattr(leakage, "_DATASET_MEMO", {})
    tr_gt, tr_g = _marked(3, 5, 1000)
    tr_pred, _ = _marked(3, 5, 2000)
    te_gt, te_g = _marked(4, 2, 3000)
    te_pred, _ = _marked(4, 2, 4000)
    r = leakage.leakage_details(te_gt, te_pred, te_g, train_gt=tr_gt, train_pred=tr_pred,
                                train_genders=tr_g, rounds=2, seed=0, threshold=None)
    assert r["protocol"] == "train_test" and (r["n_train"], r["n_test"]) == (6, 4)
    assert len(fits) == 4 and len(scored) == 4          # 2 rounds x (D, M)
    d_fits = [f for f in fits if f[0].min() < 2000]
    m_fits = [f for f in fits if f[0].min() >= 2000]
    assert len(d_fits) == len(m_fits) == 2
    for x, counts in d_fits:
        assert set(x) <= set(tr_gt[:, 0]) and counts == [3, 3]
    for x, counts in m_fits:
        assert set(x) <= set(tr_pred[:, 0]) and counts == [3, 3]
    for x in scored:
        assert len(x) == 4 and (set(x) <= set(te_gt[:, 0]) or set(x) <= set(te_pred[:, 0]))
    # the constant attacker is right on the female half with p = 0.5: Eq. 7 = 25
    assert r["LK_D"] == pytest.approx(25.0) and r["leakage"] == pytest.approx(0.0)
    # LK_D is memoised: a second model on the same images trains only its LK_M attackers
    r2 = leakage.leakage_details(te_gt, te_pred + 1, te_g, train_gt=tr_gt, train_pred=tr_pred + 1,
                                 train_genders=tr_g, rounds=2, seed=0, threshold=None)
    assert len(fits) == 6 and r2["rounds"][0]["LK_D"] == r["rounds"][0]["LK_D"]
    # without a training set: hold-out split of the given set (not the paper's protocol)
    h = leakage.leakage_details(te_gt, te_pred, te_g, rounds=1, test_fraction=0.5, threshold=None)
    assert h["protocol"] == "holdout"
    assert set(fits[-1][0]) <= set(te_pred[:, 0])


def test_leakage_train_test_learns_the_training_correlation():
    """An object that reveals gender in the training ground truth and the test ground truth
    gives LK_D near 100; model predictions that lost it give LK_M near chance."""
    rng = np.random.default_rng(1)

    def world(n):
        g = np.array(["female", "male"])[rng.integers(0, 2, n)]
        x = (rng.random((n, 5)) < 0.3).astype(float)
        x[:, 0] = g == "female"
        pred = x.copy()
        pred[:, 0] = rng.random(n) < 0.5                   # the model lost object 0
        return x, pred, list(g)

    tr, te = world(400), world(200)
    r = leakage.leakage_details(te[0], te[1], te[2], train_gt=tr[0], train_pred=tr[1],
                                train_genders=tr[2], rounds=2, seed=0,
                                attacker=leakage.Attacker(epochs=20))
    assert r["acc_D"] > 99 and r["LK_D"] > 90
    assert r["acc_M"] == pytest.approx(50, abs=10)
    assert r["leakage"] < -30


# --------------------------------------------------------------------------------------------
# Bias@K, MaxSkew@K (GenSynth appendix C, Eqs. 3-5)
# --------------------------------------------------------------------------------------------

M, F, U = "male", "female", "undefined"
Q1 = [M, M, F, U, M]
Q2 = [U, U, F, M]
Q3 = [F, F, F, F]


def test_delta_and_bias_at_k():
    assert retrieval.delta_at_k(Q1, 4) == pytest.approx(1 / 3)   # (2 - 1) / 3
    assert retrieval.delta_at_k(Q2, 2) == 0.0                    # zero case
    assert retrieval.delta_at_k(Q3, 4) == -1.0
    assert retrieval.bias_at_k([Q1, Q2, Q3], 2) == pytest.approx((1 + 0 - 1) / 3)
    assert retrieval.bias_at_k([Q1, Q2, Q3], 4) == pytest.approx((1 / 3 + 0 - 1) / 3)
    with pytest.raises(ValueError):
        retrieval.bias_at_k([Q1], 0)
    with pytest.raises(TypeError):
        retrieval.bias_at_k(["male"], 1)


def test_skew_and_max_skew_at_k():
    gallery = [M, M, M, F, U, U]                     # desired: female 1/4, male 3/4
    assert retrieval.desired_proportions(gallery) == {F: 0.25, M: 0.75}
    # Q1, drop undefined before K: (m, m, f, m) -> proportions = desired -> 0
    s = retrieval.skew_at_k(Q1, 4, gallery)
    assert s[F] == pytest.approx(0) and s[M] == pytest.approx(0)
    # drop after K: (m, m, f) -> female ln((1/3)/(1/4)), male ln((2/3)/(3/4))
    s = retrieval.skew_at_k(Q1, 4, gallery, undefined="drop_after_k")
    assert s[F] == pytest.approx(math.log(4 / 3)) and s[M] == pytest.approx(math.log(8 / 9))
    # Q3: male proportion 0 -> -inf; female ln(1 / 0.25)
    s = retrieval.skew_at_k(Q3, 4, gallery)
    assert s[M] == -math.inf and s[F] == pytest.approx(math.log(4))
    assert retrieval.max_skew_at_k([Q1, Q3], 4, gallery) == pytest.approx(math.log(4) / 2)
    # Q2 at K=2 with drop-after has no defined image -> skipped
    assert retrieval.max_skew_at_k([Q2, Q3], 2, gallery, undefined="drop_after_k") == \
        pytest.approx(math.log(4))
    assert math.isnan(retrieval.max_skew_at_k([Q2], 2, gallery, undefined="drop_after_k"))
    # default desired = equal proportions
    assert retrieval.max_skew_at_k([[M, F, M, F]], 4) == pytest.approx(0)
    assert retrieval.max_skew_at_k([[M, M, M, F]], 4) == pytest.approx(math.log(1.5))
    with pytest.raises(ValueError):
        retrieval.max_skew_at_k([Q1], 4, {F: 0.5, M: 0.6})


def test_retrieval_bias_ranks_scores_and_bootstraps_over_queries():
    # gallery: m, m, f, undefined -> desired female 1/3, male 2/3
    gallery = ["male", "male", "female", "undefined"]
    scores = np.array([[0.9, 0.8, 0.1, 0.5],      # ranks m, m, u, f
                       [0.1, 0.2, 0.9, 0.5]])     # ranks f, u, m, m
    r = retrieval.retrieval_bias(scores, gallery, ks=(1, 2), n_boot=200, seed=0)
    # delta_2: q0 (m, m) = +1; q1 (f, u) = -1 -> Bias@2 = 0; the CI spans both
    assert r["Bias@2"]["mean"] == pytest.approx(0.0) and r["Bias@2"]["n"] == 2
    assert r["Bias@2"]["lo"] == pytest.approx(-1.0) and r["Bias@2"]["hi"] == pytest.approx(1.0)
    # MaxSkew@2 (undefined dropped before K): q0 (m, m): ln(1 / (2/3)); q1 (f, m):
    # max(ln(.5 / (1/3)), ln(.5 / (2/3))) = ln 1.5 -> mean ln 1.5, no spread
    assert r["MaxSkew@2"]["mean"] == pytest.approx(math.log(1.5))
    assert r["MaxSkew@2"]["ci95"] == pytest.approx(0.0) and r["MaxSkew@2"]["n_undefined"] == 0
    # K=1: q0 m -> ln 1.5; q1 f -> ln 3
    assert r["MaxSkew@1"]["mean"] == pytest.approx((math.log(1.5) + math.log(3)) / 2)
    assert math.isnan(retrieval.per_query_max_skew(["undefined"], 1, {F: 0.5, M: 0.5}))
    with pytest.raises(ValueError):
        retrieval.retrieval_bias(scores[:, :3], gallery)


def test_caption_dba_o_against_human_caption_mentions():
    # 2 female, 2 male images; human captions (2 each) and model captions mention objects.
    gens = ["female", "female", "male", "male"]
    objs = [["oven"], ["oven"], ["dog"], ["dog"]]
    human = [["a woman at an oven", "a woman cooking"], ["a woman at an oven", "a woman"],
             ["a man with a dog", "a man with a dog"], ["a man", "a man and a dog"]]
    model = ["a woman at an oven", "a woman at an oven", "a man with a dog", "a man"]
    r = dba.caption_dba(model, gens, objs, human_captions=human)
    # p(l|a) per human caption: f: oven 2/4, dog 0; m: oven 0, dog 3/4.
    # p_hat per model caption:  f: oven 2/2, dog 0; m: oven 0, dog 1/2.
    # y (human samples, n = 8): (f, oven) 2/8 > 1/2 * 2/8 -> 1; (m, dog) 3/8 > 1/2 * 3/8 -> 1;
    # (f, dog), (m, oven) 0 -> y = 0 with Delta 0.
    # terms: (f, oven) +0.5; (m, dog) 1/2 - 3/4 = -0.25 -> 100 * 0.25 / (2 * 2) = 6.25
    assert r["DBA_O"] == pytest.approx(6.25) and r["n_human_captions"] == 8
    with pytest.raises(ValueError):
        dba.caption_dba(model, gens, objs, human_captions=human[:3])


def test_leakage_attacker_settings_are_one_checked_object(leak_result):
    """The attacker's build and training are one ``Attacker``, apart from what Leakage is:
    its defaults are the documented ones, a bad value names its field, and anything else in
    its place is refused."""
    A = leakage.Attacker
    assert A().training() == {"hidden": (128, 128), "epochs": 30, "lr": 2e-3,
                              "batch_size": 128, "weight_decay": 0.0}
    assert A(hidden=[16]).hidden == (16,)
    for bad, name in (({"hidden": (0,)}, "hidden"), ({"epochs": 0}, "epochs"),
                      ({"batch_size": 0}, "batch_size"), ({"lr": 0}, "lr"),
                      ({"weight_decay": -1}, "weight_decay")):
        with pytest.raises(ValueError, match=name):
            A(**bad)
    d = leak_result
    with pytest.raises(ValueError, match="Attacker"):
        leakage.leakage_details(d["X"], d["X"], d["g"], attacker={"epochs": 5})
    with pytest.raises(TypeError):
        leakage.leakage_details(d["X"], d["X"], d["g"], epochs=5)


def test_each_metric_is_one_number_with_its_details_beside_it(leak_result):
    """The front door returns a float in the metric's declared unit, equal to the headline
    value of its ``*_details`` record (biaslab.metrics' table)."""
    caps = ["a man riding", "a man surfing", "a woman cooking", "a dog"]
    gens = ["male", "male", "female", "female"]
    r = captions.ratio(caps, gens)
    assert isinstance(r, float) and r == captions.ratio_details(caps, gens)["ratio_max"] == 2.0
    assert captions.ratio(["a woman", "a woman", "a man"]) == 2.0   # max(r, 1/r), not r = 1/2

    human = ["a woman cooking", "a woman cooking", "a man cooking", "a man surfing",
             "a woman surfing"]
    model = ["a woman cooking"] * 3
    ba = biasamp.bias_amplification(model, human, min_count=1, vocab=["cooking"])
    assert isinstance(ba, float) and ba == pytest.approx(100 / 3)
    assert ba == biasamp.bias_amplification_details(model, human, min_count=1,
                                                    vocab=["cooking"])["ba"]

    assert dba.dba_o(A4, T4, T4_PRED) == dba.dba_o_details(A4, T4, T4_PRED)["DBA_O"] == 25.0
    assert isinstance(dba.dba_g(A4, T4, A4_PRED), float)
    assert dba.dba_g(A4, T4, A4_PRED) == dba.dba_g_details(A4, T4, A4_PRED)["DBA_G"]

    d = leak_result
    kw = dict(rounds=2, seed=0, attacker=leakage.Attacker(epochs=3))
    lk = leakage.leakage(d["X"], d["scores"], d["g"], **kw)
    assert isinstance(lk, float)
    assert lk == leakage.leakage_details(d["X"], d["scores"], d["g"], **kw)["leakage"]
