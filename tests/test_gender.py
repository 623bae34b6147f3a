"""Gender vocabulary, caption labels and caption operations (hand-computed expectations and
hypothesis properties)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from biaslab.data import gender as G


def test_word_lists_follow_the_papers():
    lic = G.word_list("lic")
    # thesis appendix 2.9 words and their plurals
    assert {"woman", "women", "ladies", "actresses", "pregnant", "herself"} <= lic["female"]
    assert {"man", "men", "gentlemen", "cowboys", "dudes", "himself"} <= lic["male"]
    assert "girlfriend" not in lic["female"]  # only in LIBRA's list
    libra = G.word_list("libra")
    assert {"girlfriend", "policewomen", "chairwoman"} <= libra["female"]
    assert {"boyfriends", "policeman", "chairmen"} <= libra["male"]
    gs = G.word_list("gensynth")
    assert "guy" not in gs["male"] and "wife" in gs["female"] and "wives" in gs["female"]
    for lists in G.WORD_LISTS.values():
        assert not lists["female"] & lists["male"]
    with pytest.raises(KeyError, match="known"):
        G.word_list("nope")


@pytest.mark.parametrize("caption,expected", [
    ("A woman holding an umbrella.", "female"),
    ("Two MEN, riding horses!", "male"),
    ("A man and his wife on a bench", "both"),
    ("A person on a policeman's horse", "none"),   # policeman is not in the lic list
    ("The woman's dog", "female"),                  # possessive
    ("A mother-in-law smiles", "female"),           # hyphenated
    ("A manhole cover on the street", "none"),      # no substring matches
    ("Someone skiing", "none"),
])
def test_caption_gender(caption, expected):
    assert G.caption_gender(caption) == expected


def test_caption_gender_list_choice():
    assert G.caption_gender("a policeman on a horse", words="libra") == "male"
    assert G.caption_gender("a guy on a horse", words="gensynth") == "none"


def test_image_gender_rules():
    caps = ["A man riding a wave", "A surfer on a board", "A man surfing"]
    assert G.image_gender(caps, "any_mention") == "male"
    assert G.image_gender(caps, "at_least_k", k=2) == "male"
    assert G.image_gender(caps, "at_least_k", k=3) == "undefined"
    conflict = caps + ["A woman surfing"]
    assert G.image_gender(conflict, "any_mention") == "undefined"
    assert G.image_gender(conflict, "at_least_k") == "undefined"
    one = ["A girl with a kite", "A child with a kite"]
    assert G.image_gender(one, "any_mention") == "female"
    assert G.image_gender(one, "at_least_k", k=2) == "undefined"
    assert G.image_gender(["a dog"], "any_mention") == "undefined"
    with pytest.raises(ValueError, match="unknown gender rule"):
        G.image_gender(caps, "majority")
    with pytest.raises(ValueError, match="k >= 1"):
        G.image_gender(caps, "at_least_k", k=0)


def test_tokenize_keeps_special_tokens():
    assert G.tokenize("A [MASK] holds <extra_id_0>, ok?") == ["a", "[MASK]", "holds",
                                                              "<extra_id_0>", "ok"]


@pytest.mark.parametrize("caption,expected", [
    ("A man and his dog.", "A [MASK] and [MASK] dog."),
    ("WOMEN at a Table", "[MASK] at a Table"),
    ("A woman's hat", "A [MASK]'s hat"),
])
def test_mask(caption, expected):
    assert G.mask(caption) == expected


@pytest.mark.parametrize("caption,expected", [
    ("A woman holding her umbrella.", "A man holding his umbrella."),
    ("A man hands her a cup", "A woman hands him a cup"),
    ("She is cutting his hair", "He is cutting her hair"),
    ("The bike is his.", "The bike is hers."),
    ("A Man and a BOY", "A Woman and a GIRL"),
    ("An actress and two waiters", "An actor and two waitresses"),
    ("A guy on a skateboard", "A woman on a skateboard"),    # one-way
    ("A pregnant woman", "A pregnant man"),                 # pregnant left as is
    ("An uncle", "An aunt"),
])
def test_swap(caption, expected):
    assert G.swap(caption) == expected


def test_swap_to_target_group():
    # counterfactual prompts t^(g'): every gender word set to the target gender
    assert G.swap("A man and a woman", to="female") == "A woman and a woman"
    assert G.swap("A man holding his phone", to="male") == "A man holding his phone"
    assert G.swap("A girl hugging her mother", to="male") == "A boy hugging his father"
    with pytest.raises(ValueError):
        G.swap("a man", to="other")


@pytest.mark.parametrize("caption,expected", [
    ("The woman brushes her teeth in the bathroom.",
     "The person brushes their teeth in the bathroom."),          # GenSynth Table 4
    ("A man sleeping with his cat next to him.",
     "A person sleeping with their cat next to them."),           # GenSynth Table 4
    ("Two women and two girls in makeup", "Two people and two children in makeup"),
    ("She is riding a bike", "They are riding a bike"),
    ("An actress on stage", "A performer on stage"),
])
def test_neutralise(caption, expected):
    assert G.neutralise(caption) == expected


# --- properties --------------------------------------------------------------------------
_ALL = sorted(set().union(*(lst["female"] | lst["male"] for lst in G.WORD_LISTS.values())))
_FILLER = ["a", "the", "on", "with", "dog", "riding", "table", "red", "and", "is", "hand",
           "skateboard", "in", "kitchen", "manhole", "policewomanly"]
_word = st.sampled_from(_ALL + _FILLER)
_case = st.sampled_from([str.lower, str.upper, str.capitalize])
_sep = st.sampled_from([" ", ", ", " - ", "'s ", ". ", "  "])


@st.composite
def captions(draw):
    words = draw(st.lists(st.tuples(_word, _case, _sep), min_size=1, max_size=14))
    return "".join(c(w) + s for w, c, s in words).strip()


@settings(max_examples=300, deadline=None)
@given(captions(), st.sampled_from(sorted(G.WORD_LISTS)))
def test_mask_leaves_no_gender_word(caption, words):
    masked = G.mask(caption, words=words)
    assert not set(G.tokenize(masked)) & G.gender_words(words)
    assert G.caption_gender(masked, words) == "none"


@settings(max_examples=300, deadline=None)
@given(captions())
def test_neutralise_leaves_no_gender_word_but_pregnant(caption):
    out = G.neutralise(caption)
    assert set(G.tokenize(out)) & G.gender_words("lic") <= {"pregnant"}


_UNAMBIGUOUS = sorted(w for w in G.SWAP if w not in G.AMBIGUOUS_SWAP)
_NO_ARTICLE = [w for w in _FILLER if w not in ("a", "an")]  # swap also fixes a/an agreement


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_UNAMBIGUOUS + _NO_ARTICLE), _case), min_size=1,
                max_size=12))
def test_swap_twice_restores_unambiguous_words(parts):
    caption = " ".join(c(w) for w, c in parts)
    assert G.swap(G.swap(caption)) == caption


# Counterparts outside the lic list (cowgirl, empress, king) make a swapped caption unlabelled.
_LEAVES_LIST = {w for w, t in G.SWAP.items() if w in G.gender_words("lic")
                and t not in G.gender_words("lic")} | {"pregnant"}


@settings(max_examples=300, deadline=None)
@given(captions())
def test_swap_flips_caption_gender(caption):
    if set(G.tokenize(caption)) & _LEAVES_LIST:
        return
    before = G.caption_gender(caption)
    after = G.caption_gender(G.swap(caption))
    flip = {"female": "male", "male": "female"}
    if before in flip:
        assert after == flip[before]
    for target in ("female", "male"):
        assert G.caption_gender(G.swap(caption, to=target)) in (target, "none")


def test_swap_counterparts_outside_the_list_are_documented():
    assert _LEAVES_LIST == {"cowboy", "cowboys", "emperor", "emperors", "queen", "queens",
                            "pregnant"}
    assert G.caption_gender(G.swap("a cowboy on a horse")) == "none"  # "a cowgirl ..."
