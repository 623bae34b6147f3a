"""Gender vocabulary, caption-level and image-level gender labels, and caption operations
(mask, swap, neutralise).

Word lists (``WORD_LISTS``), each given by the paper as singular forms "and their plurals":

* ``lic``      -- thesis (paper 002) appendix 2.9, the words masked for the LIC classifiers.
* ``libra``    -- LIBRA (paper 003) supplementary sec. 5: the ``lic`` list plus chairwoman,
  policewoman, girlfriend, boyfriend, chairman, policeman.
* ``gensynth`` -- GenSynth (paper 001) Table 3, masculine and feminine columns.

Image-level rules (``image_gender``):

* ``any_mention`` -- Zhao et al. 2017 as described in GenSynth sec. 3.2 and REVISE sec. 3:
  concatenate all captions of the image; only feminine words -> female, only masculine words ->
  male, both or neither -> undefined.
* ``at_least_k``  -- Meister et al. ("Gender artifacts in visual datasets"), k=2 by default: at
  least ``k`` captions are labelled g at caption level and no caption contains a word of the other
  gender; otherwise undefined. (The rule is stricter than ``any_mention``; a caption labelled
  ``both`` counts as a conflict.)

Swap follows the GenSynth Table 3 pairs, extended with plurals and with counterparts for the
words of the ``lic``/``libra`` lists that Table 3 lacks (uncle/aunt, actor/actress, ...). The
table maps ``his -> hers`` and ``him -> her``, which is ambiguous in both directions; we resolve
it from the next word (see ``_resolve_possessive``): ``her`` followed by a word that can start a
noun phrase is the possessive determiner (``her hand -> his hand``), otherwise the object pronoun
(``hands her a cup -> hands him a cup``); ``his`` followed by such a word becomes ``her``, a
stand-alone ``his`` becomes ``hers``. Words without a counterpart of the other gender (``guy``,
``dude``) swap one way only (``guy -> woman``) and ``pregnant`` is left as it is. Some
counterparts are not in the papers' lists (cowboy -> cowgirl, emperor -> empress,
queen -> king): a caption swapped through them is no longer gendered under that list.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

FEMALE = "female"
MALE = "male"
BOTH = "both"
NONE = "none"
UNDEFINED = "undefined"
GENDERS = (FEMALE, MALE)

_IRREGULAR_PLURALS = {
    "woman": "women", "man": "men", "lady": "ladies", "wife": "wives",
    "gentleman": "gentlemen", "chairman": "chairmen", "chairwoman": "chairwomen",
    "policeman": "policemen", "policewoman": "policewomen", "actress": "actresses",
    "princess": "princesses", "waitress": "waitresses", "prince": "princes",
}
# Pronouns and adjectives have no plural.
_NO_PLURAL = {"she", "her", "hers", "herself", "he", "his", "him", "himself", "pregnant"}


def plural(word: str) -> str | None:
    """English plural of a gender noun from the papers' lists, or None for pronouns/adjectives."""
    if word in _NO_PLURAL:
        return None
    if word in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[word]
    return word + "s"


def _with_plurals(words: Iterable[str]) -> frozenset[str]:
    out = set()
    for w in words:
        out.add(w)
        p = plural(w)
        if p:
            out.add(p)
    return frozenset(out)


_LIC_F = ["woman", "female", "lady", "mother", "girl", "aunt", "wife", "actress", "princess",
          "waitress", "sister", "queen", "pregnant", "daughter", "she", "her", "hers", "herself"]
_LIC_M = ["man", "male", "father", "gentleman", "boy", "uncle", "husband", "actor", "prince",
          "waiter", "son", "brother", "guy", "emperor", "dude", "cowboy", "he", "his", "him",
          "himself"]
_GENSYNTH_M = ["man", "male", "boy", "gentleman", "father", "husband", "boyfriend", "brother",
               "son", "he", "his", "him"]
_GENSYNTH_F = ["woman", "female", "girl", "lady", "mother", "wife", "girlfriend", "sister",
               "daughter", "she", "hers", "her"]

#: name -> {"female": frozenset, "male": frozenset}, plurals included.
WORD_LISTS: dict[str, dict[str, frozenset[str]]] = {
    "lic": {FEMALE: _with_plurals(_LIC_F), MALE: _with_plurals(_LIC_M)},
    "libra": {
        FEMALE: _with_plurals(_LIC_F + ["chairwoman", "policewoman", "girlfriend"]),
        MALE: _with_plurals(_LIC_M + ["boyfriend", "chairman", "policeman"]),
    },
    "gensynth": {FEMALE: _with_plurals(_GENSYNTH_F), MALE: _with_plurals(_GENSYNTH_M)},
}


def word_list(name: str) -> dict[str, frozenset[str]]:
    """Return ``{"female": words, "male": words}`` for a named list.

    Raises:
        KeyError: unknown list name (message lists the known names).
    """
    try:
        return WORD_LISTS[name]
    except KeyError:
        raise KeyError(f"unknown gender word list {name!r}; known: {sorted(WORD_LISTS)}") from None


def gender_words(name: str = "lic") -> frozenset[str]:
    """All gender words (both genders) of a named list."""
    wl = word_list(name)
    return wl[FEMALE] | wl[MALE]


# Special tokens such as [MASK], <mask>, <extra_id_0> survive tokenisation as one token.
_TOKEN_RE = re.compile(r"\[[A-Za-z_]+\]|<[A-Za-z_0-9]+>|[A-Za-z]+|[0-9]+")
_WORD_RE = re.compile(r"[A-Za-z]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of a caption, robust to punctuation and case.

    ``"A woman's hat, on a MAN."`` -> ``["a", "woman", "s", "hat", "on", "a", "man"]``.
    Special tokens in brackets (``[MASK]``, ``<mask>``, ``<extra_id_0>``) are kept whole and
    keep their case. Hyphenated words split (``mother-in-law`` -> ``mother in law``).
    """
    out = []
    for t in _TOKEN_RE.findall(text):
        out.append(t if t[0] in "[<" else t.lower())
    return out


def caption_gender(caption: str, words: str = "lic") -> Literal["female", "male", "both", "none"]:
    """Caption-level gender: ``female``/``male`` if it has words of only that gender, ``both`` if
    it has words of both, ``none`` otherwise (Burns et al. 2018; thesis Table 2.1 footnote)."""
    wl = word_list(words)
    toks = set(tokenize(caption))
    f = bool(toks & wl[FEMALE])
    m = bool(toks & wl[MALE])
    if f and m:
        return BOTH
    if f:
        return FEMALE
    if m:
        return MALE
    return NONE


def image_gender(captions: Sequence[str], rule: str = "any_mention", words: str = "lic",
                 k: int = 2) -> Literal["female", "male", "undefined"]:
    """Image-level gender from its captions (see module docstring for the rules).

    Args:
        captions: the image's captions (COCO: about 5).
        rule: ``any_mention`` or ``at_least_k``.
        words: word-list name.
        k: captions needed by ``at_least_k`` (Meister et al.: 2).

    Raises:
        ValueError: unknown rule or k < 1.
    """
    labels = [caption_gender(c, words) for c in captions]
    has_f = any(lab in (FEMALE, BOTH) for lab in labels)
    has_m = any(lab in (MALE, BOTH) for lab in labels)
    if rule == "any_mention":
        if has_f and not has_m:
            return FEMALE
        if has_m and not has_f:
            return MALE
        return UNDEFINED
    if rule == "at_least_k":
        if k < 1:
            raise ValueError(f"at_least_k needs k >= 1, got {k}")
        if has_f and has_m:
            return UNDEFINED
        if labels.count(FEMALE) >= k:
            return FEMALE
        if labels.count(MALE) >= k:
            return MALE
        return UNDEFINED
    raise ValueError(f"unknown gender rule {rule!r}; known: any_mention, at_least_k")


def _match_case(src: str, dst: str) -> str:
    if src.isupper() and len(src) > 1:
        return dst.upper()
    if src[0].isupper():
        return dst[0].upper() + dst[1:]
    return dst


def replace_words(caption: str, fn) -> str:
    """Apply ``fn(lower_word, index, words) -> str | None`` to every word, keeping punctuation,
    spacing and case. ``words`` is the list of lower-cased words, for look-ahead. An article
    right before a replaced word is fixed (``an actress`` -> ``a performer``)."""
    matches = list(_WORD_RE.finditer(caption))
    words = [m.group(0).lower() for m in matches]
    reps = [fn(w, i, words) for i, w in enumerate(words)]
    for i in range(1, len(matches)):
        if reps[i] is not None and words[i - 1] in ("a", "an") and reps[i - 1] is None:
            reps[i - 1] = "an" if reps[i][0] in "aeiou" else "a"
    out, last = [], 0
    for m, rep in zip(matches, reps):
        out.append(caption[last:m.start()])
        out.append(m.group(0) if rep is None else _match_case(m.group(0), rep))
        last = m.end()
    out.append(caption[last:])
    return "".join(out)


def mask(caption: str, words: str = "lic", mask_token: str = "[MASK]") -> str:
    """Replace every gender word of list ``words`` by ``mask_token`` (LIC, thesis Eq. 2.7;
    LIBRA mask(.)). The token is inserted verbatim (no case change); the result contains no word
    of the list. Example: ``"A man and his dog."`` -> ``"A [MASK] and [MASK] dog."``."""
    vocab = gender_words(words)
    return _WORD_RE.sub(lambda m: mask_token if m.group(0).lower() in vocab else m.group(0),
                        caption)


# GenSynth Table 3 pairs (masculine, feminine), plurals added, plus our extension for the
# lic/libra words Table 3 lacks. his/hers and him/her are resolved in _resolve_possessive.
_SWAP_PAIRS = [
    ("man", "woman"), ("men", "women"), ("male", "female"), ("males", "females"),
    ("boy", "girl"), ("boys", "girls"), ("gentleman", "lady"), ("gentlemen", "ladies"),
    ("father", "mother"), ("fathers", "mothers"), ("husband", "wife"),
    ("husbands", "wives"), ("boyfriend", "girlfriend"), ("boyfriends", "girlfriends"),
    ("brother", "sister"), ("brothers", "sisters"), ("son", "daughter"), ("sons", "daughters"),
    ("he", "she"), ("himself", "herself"),
    # extension (not in GenSynth Table 3)
    ("uncle", "aunt"), ("uncles", "aunts"), ("actor", "actress"), ("actors", "actresses"),
    ("prince", "princess"), ("princes", "princesses"), ("waiter", "waitress"),
    ("waiters", "waitresses"), ("king", "queen"), ("kings", "queens"),
    ("emperor", "empress"), ("emperors", "empresses"), ("cowboy", "cowgirl"),
    ("cowboys", "cowgirls"), ("chairman", "chairwoman"), ("chairmen", "chairwomen"),
    ("policeman", "policewoman"), ("policemen", "policewomen"),
]
_ONE_WAY = {"guy": "woman", "guys": "women", "dude": "woman", "dudes": "women"}
SWAP: dict[str, str] = {**{m: f for m, f in _SWAP_PAIRS}, **{f: m for m, f in _SWAP_PAIRS},
                        **_ONE_WAY}
#: Words whose swap is not an involution (swap(swap(w)) may differ from w).
AMBIGUOUS_SWAP = frozenset({"her", "his", "him", "hers"} | set(_ONE_WAY))

# Words after "her"/"his" that show it is NOT a determiner of a following noun phrase.
_NOT_NP_START = frozenset("""a an the to in on at of with and or but while as from for by into onto
over under near next up down out off away back around through across behind beside between
is are was were be been being has have had does do did that this these those it its they them
their there then than so who which what when where how very too again also just only not""".split())


def _np_follows(i: int, words: list[str]) -> bool:
    return i + 1 < len(words) and words[i + 1] not in _NOT_NP_START


def _resolve_possessive(word: str, i: int, words: list[str], target: str) -> str | None:
    """Swap of her/his/him/hers toward ``target`` gender, disambiguated by the next word."""
    if target == MALE:
        if word == "her":
            return "his" if _np_follows(i, words) else "him"
        if word == "hers":
            return "his"
    else:
        if word == "his":
            return "her" if _np_follows(i, words) else "hers"
        if word == "him":
            return "her"
    return None


def swap(caption: str, to: str | None = None, words: str = "lic") -> str:
    """Swap gender words (GenSynth Table 3 pairs; see module docstring).

    Args:
        caption: input caption.
        to: ``None`` swaps every gender word to the other gender (LIBRA swap(.)); ``"female"``
            or ``"male"`` sets every gender word to that gender (counterfactual prompts t^(g'),
            paper 000 Eq. 1), leaving words already of that gender as they are.
        words: the word list that decides which words are gendered.

    Raises:
        ValueError: ``to`` is not None, "female" or "male".
    """
    if to not in (None, FEMALE, MALE):
        raise ValueError(f"swap target must be None, 'female' or 'male', got {to!r}")
    wl = word_list(words)
    female_like = wl[FEMALE] | {"empress", "empresses", "cowgirl", "cowgirls", "queen",
                                "queens"}
    male_like = wl[MALE] | {"king", "kings"}

    def fn(w: str, i: int, ws: list[str]) -> str | None:
        if w in female_like and w not in male_like:
            g = FEMALE
        elif w in male_like:
            g = MALE
        else:
            return None
        target = (MALE if g == FEMALE else FEMALE) if to is None else to
        if g == target:
            return None
        if w in {"her", "his", "him", "hers"}:
            return _resolve_possessive(w, i, ws, target)
        return SWAP.get(w)

    return replace_words(caption, fn)


_NEUTRAL = {
    # GenSynth Table 3 neutral column
    "man": "person", "woman": "person", "men": "people", "women": "people", "male": "person",
    "female": "person", "boy": "child", "girl": "child", "boys": "children",
    "girls": "children", "gentleman": "person", "lady": "person", "father": "parent",
    "mother": "parent", "husband": "partner", "wife": "partner", "boyfriend": "partner",
    "girlfriend": "partner", "brother": "sibling", "sister": "sibling", "son": "child",
    "daughter": "child", "he": "they", "she": "they", "him": "them", "hers": "theirs",
    # extension: plurals and the lic/libra words Table 3 lacks
    "males": "people", "females": "people", "gentlemen": "people", "ladies": "people",
    "fathers": "parents", "mothers": "parents", "husbands": "partners", "wives": "partners",
    "boyfriends": "partners", "girlfriends": "partners", "brothers": "siblings",
    "sisters": "siblings", "sons": "children", "daughters": "children",
    "himself": "themselves", "herself": "themselves", "uncle": "relative", "aunt": "relative",
    "uncles": "relatives", "aunts": "relatives", "actor": "performer", "actress": "performer",
    "actors": "performers", "actresses": "performers", "prince": "royal", "princess": "royal",
    "princes": "royals", "princesses": "royals", "waiter": "server", "waitress": "server",
    "waiters": "servers", "waitresses": "servers", "queen": "monarch", "queens": "monarchs",
    "emperor": "monarch", "emperors": "monarchs", "guy": "person", "guys": "people",
    "dude": "person", "dudes": "people", "cowboy": "rider", "cowboys": "riders",
    "chairman": "chairperson", "chairwoman": "chairperson", "chairmen": "chairpeople",
    "chairwomen": "chairpeople", "policeman": "officer", "policewoman": "officer",
    "policemen": "officers", "policewomen": "officers",
}
_THEY_VERB = {"is": "are", "was": "were", "has": "have", "does": "do"}


def neutralise(caption: str, words: str = "lic") -> str:
    """Replace gender words by gender-neutral ones (GenSynth Table 3 neutral column, extended).

    ``her`` becomes ``their`` before a noun phrase and ``them`` otherwise; ``his`` becomes
    ``their`` (``theirs`` when stand-alone). A verb right after a neutralised ``he``/``she``
    is made plural (``she is`` -> ``they are``) so the sentence stays grammatical.
    ``pregnant`` is kept (it is in the lic list but has no neutral replacement).
    """
    vocab = gender_words(words)
    replaced_pronoun = set()

    def fn(w: str, i: int, ws: list[str]) -> str | None:
        if i > 0 and (i - 1) in replaced_pronoun and w in _THEY_VERB:
            return _THEY_VERB[w]
        if w not in vocab and w not in _NEUTRAL:
            return None
        if w in ("he", "she"):
            replaced_pronoun.add(i)
            return "they"
        if w == "her":
            return "their" if _np_follows(i, ws) else "them"
        if w == "his":
            return "their" if _np_follows(i, ws) else "theirs"
        return _NEUTRAL.get(w)

    return replace_words(caption, fn)
