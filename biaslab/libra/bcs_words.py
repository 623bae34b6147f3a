"""Which words of a caption BCS may mask and which fills it must reject (paper 003 supp. 1.3):
content words by part of speech (NLTK's tagger, WordNet as the offline fall-back), the stop and
number words never filled, and the synonym / trivial-fill test. :mod:`biaslab.libra.bcs`
re-exports every public name.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence

from biaslab.data.gender import gender_words
from biaslab.libra.text import word_spans

#: Penn Treebank tag prefixes of content words (nouns, verbs, adjectives, adverbs)
CONTENT_TAGS = ("NN", "VB", "JJ", "RB")

# NLTK's English stop-word list (nltk_data corpora/stopwords/english, 179 words), embedded
# because the corpus is not available offline.
STOP_WORDS = frozenset("""i me my myself we our ours ourselves you you're you've you'll you'd
your yours yourself yourselves he him his himself she she's her hers herself it it's its itself
they them their theirs themselves what which who whom this that that'll these those am is are
was were be been being have has had having do does did doing a an the and but if or because as
until while of at by for with about against between into through during before after above
below to from up down in out on off over under again further then once here there when where
why how all any both each few more most other some such no nor not only own same so than too
very s t can will just don don't should should've now d ll m o re ve y ain aren aren't couldn
couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn
mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won
won't wouldn wouldn't""".split())
NUMBER_WORDS = frozenset("""zero one two three four five six seven eight nine ten eleven twelve
thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty
seventy eighty ninety hundred thousand million dozen""".split())


# --------------------------------------------------------------------------------------------
# POS choice and WordNet


@functools.lru_cache(maxsize=1)
def nltk_tagger_available() -> bool:
    """True when NLTK's averaged-perceptron tagger data is installed (nothing is downloaded)."""
    try:
        import nltk
    except ImportError:  # pragma: no cover - nltk is a dependency
        return False
    for res in ("taggers/averaged_perceptron_tagger_eng/", "taggers/averaged_perceptron_tagger/"):
        try:
            nltk.data.find(res)
            return True
        except LookupError:
            continue
    return False


@functools.lru_cache(maxsize=1)
def _wordnet():
    from nltk.corpus import wordnet as wn
    wn.ensure_loaded()
    return wn


@functools.lru_cache(maxsize=200_000)
def wordnet_content(word: str) -> bool:
    """Fallback POS test: WordNet knows ``word`` as noun/verb/adjective/adverb (any inflection,
    via ``morphy``) and it is neither a stop word nor a number word nor a number."""
    w = word.lower()
    if not w.isalpha() or w in STOP_WORDS or w in NUMBER_WORDS or len(w) < 2:
        return False
    wn = _wordnet()
    return any(wn.morphy(w, p) is not None for p in ("n", "v", "a", "r"))


def content_positions(caption: str, words: str = "libra", pos: str = "auto") -> list[int]:
    """Word positions (indices into ``t5.word_spans(caption)``) that Eq. 5 may mask: nouns,
    verbs, adjectives and adverbs (supp. 1.3), never gender words of list ``words``.

    ``pos``: ``nltk`` (``nltk.pos_tag``; tags NN*, VB*, JJ*, RB*; needs the tagger data),
    ``wordnet`` (offline fallback, ``wordnet_content``) or ``auto`` (nltk when available).

    Raises:
        ValueError: unknown ``pos``; LookupError: ``pos="nltk"`` without the tagger data.
    """
    if pos not in ("auto", "nltk", "wordnet"):
        raise ValueError(f"unknown pos method {pos!r}; known: auto, nltk, wordnet")
    toks = [w for _, _, w in word_spans(caption)]
    gw = gender_words(words)
    use_nltk = pos == "nltk" or (pos == "auto" and nltk_tagger_available())
    if use_nltk:
        import nltk
        tags = [t for _, t in nltk.pos_tag(toks)]
        content = [t.startswith(CONTENT_TAGS) for t in tags]
    else:
        content = [wordnet_content(w) for w in toks]
    return [i for i, (w, c) in enumerate(zip(toks, content)) if c and w.lower() not in gw]


@functools.lru_cache(maxsize=200_000)
def _base_forms(word: str) -> frozenset[str]:
    wn = _wordnet()
    w = word.lower().strip().replace(" ", "_")
    forms = {w}
    for p in ("n", "v", "a", "r"):
        b = wn.morphy(w, p)
        if b:
            forms.add(b)
    return frozenset(forms)


@functools.lru_cache(maxsize=200_000)
def _synonyms(word: str) -> frozenset[str]:
    wn = _wordnet()
    out = set()
    for b in _base_forms(word):
        for syn in wn.synsets(b):
            out.update(lem.name().lower() for lem in syn.lemmas())
    return frozenset(out)


def is_synonym(original: str, replacement: str) -> bool:
    """True when ``replacement`` is a trivial substitute for ``original`` (supp. 1.3): the same
    word or lemma (``sits``/``sitting``), or a WordNet synonym (the two share a synset, after
    ``morphy``: ``car``/``automobile``, ``cars``/``automobiles``). Multi-word replacements are
    looked up as WordNet collocations (``hot dog`` -> ``hot_dog``)."""
    a, b = original.lower().strip(), " ".join(replacement.lower().split())
    if not a or not b:
        return False
    fa, fb = _base_forms(a), _base_forms(b)
    if fa & fb:
        return True
    return bool(_synonyms(a) & fb)


def trivial_reason(originals: Sequence[str], fills: Sequence[str]) -> str | None:
    """Why a T5 edit is trivial (supp. 1.3), or None when it is a real modification.

    ``unchanged``: every fill equals its masked word; ``synonym``: some masked word was replaced
    by a synonym / another form of the same lemma (``is_synonym``). Fills equal to their masked
    word are allowed next to a real change."""
    changed = [(o, f) for o, f in zip(originals, fills) if o.lower() != f.strip().lower()]
    if not changed:
        return "unchanged"
    if any(is_synonym(o, f) for o, f in changed):
        return "synonym"
    return None
