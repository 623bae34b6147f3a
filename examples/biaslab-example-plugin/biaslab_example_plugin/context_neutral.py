"""``context_neutral``: a learned caption post-processor (entry point group
``biaslab.postprocessors``), trained on the training split's human captions when it runs.

LIC (paper 002 sec. 2.5) reads bias as gender that a caption's other words predict. This
post-processor learns that predictor and acts on it: a logistic regression (scikit-learn,
L2, lbfgs) on the bag of words of each training caption with its gender words removed, its
target the caption's gender (:func:`biaslab.data.gender.caption_gender`, captions that name
both or neither are left out). A generated caption whose context alone gives its own gender a
probability of at least ``threshold`` has its gender words neutralised
(:func:`biaslab.data.gender.neutralise`); the others are kept as they are. The gender word is
then kept only where the context does not already imply it, so the row trades some Error
(a neutral caption names nobody) for less context-driven gender.

Settings (``eval_captioner.postprocessor_params.context_neutral``, :class:`Settings`):
``threshold`` in (0.5, 1] and ``min_count`` >= 1, the number of training captions a word must
appear in to be a feature. The fit is deterministic (lbfgs from zeros), so the row is the same
on every run of the same captions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from biaslab.data.gender import FEMALE, MALE, caption_gender, gender_words, neutralise, tokenize
from biaslab.registry import Entry, Skipped


@dataclass(frozen=True)
class Settings:
    """``context_neutral``'s params and their defaults.

    Attributes:
        threshold: the context's probability of the caption's own gender at and above which
            its gender words are neutralised, in (0.5, 1].
        min_count: a word is a feature when at least this many training captions hold it.
    """
    threshold: float = 0.8
    min_count: int = 2

    def __post_init__(self):
        if not 0.5 < float(self.threshold) <= 1.0:
            raise ValueError(f"eval_captioner.postprocessor_params.context_neutral.threshold "
                             f"must be in (0.5, 1], got {self.threshold}")
        if int(self.min_count) < 1:
            raise ValueError(f"eval_captioner.postprocessor_params.context_neutral.min_count "
                             f"must be >= 1, got {self.min_count}")


def context_words(caption: str, gendered: frozenset[str]) -> str:
    """``caption``'s lower-cased words without its gender words, space-joined."""
    return " ".join(w for w in (t.lower() for t in tokenize(caption)) if w not in gendered)


def fit(captions: list[str], words: str, min_count: int):
    """The context model: ``(vectorizer, LogisticRegression)`` fitted on the gendered
    captions of ``captions``; None when they hold fewer than two of each gender."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    gendered = gender_words(words)
    y = [caption_gender(c, words) for c in captions]
    keep = [i for i, g in enumerate(y) if g in (FEMALE, MALE)]
    labels = np.array([y[i] == MALE for i in keep], int)
    if len(keep) < 4 or labels.sum() < 2 or (1 - labels).sum() < 2:
        return None
    vec = CountVectorizer(binary=True, min_df=min_count, token_pattern=r"(?u)\b\w+\b")
    x = vec.fit_transform([context_words(captions[i], gendered) for i in keep])
    return vec, LogisticRegression(max_iter=1000).fit(x, labels)


def apply(captions: list[str], ctx) -> list[str]:
    """Each caption, its gender words neutralised where its context predicts its gender with
    probability >= ``threshold`` (module docstring).

    Args:
        captions: one caption per test image.
        ctx: :class:`biaslab.captioning.postprocess.CaptionContext` (``train_captions``: the
            training split's human captions; ``settings("context_neutral")``).

    Raises:
        Skipped: no training captions, or too few of either gender to learn from.
    """
    s = ctx.settings("context_neutral")
    words = ctx.words
    model = fit(list(ctx.train_captions or []), words, int(s.min_count)) \
        if ctx.train_captions else None
    if model is None:
        raise Skipped("context_neutral: fewer than two training captions of each gender")
    vec, clf = model
    gendered = gender_words(words)
    out = []
    p_male = clf.predict_proba(vec.transform([context_words(c, gendered) for c in captions]))[:, 1]
    for c, pm in zip(captions, p_male):
        g = caption_gender(c, words)
        own = pm if g == MALE else 1.0 - pm if g == FEMALE else None
        out.append(neutralise(c, words=words) if own is not None and own >= s.threshold else c)
    return out


CONTEXT_NEUTRAL = Entry(
    "postprocessors", "context_neutral", apply, label="Original + context-neutral (plug-in)",
    order=1110, params="eval_captioner.postprocessor_params.context_neutral", settings=Settings,
    claims={"LIC": "≤"},
    doc="gender words neutralised where the caption's context predicts them (a learned "
        "LIC attacker, fitted on the training captions)")
