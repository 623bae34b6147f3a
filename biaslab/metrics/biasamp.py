"""Co-occurrence bias amplification: BiasAmp / BA (Zhao et al. 2017) and directional bias
amplification DBA_G, DBA_O (Wang & Russakovsky 2021).

References (texts in ``shared/papers``):

* Thesis (paper 002) sec. 2.3.2, Eqs. (2.2)-(2.3): BA, and appendix 2.8.2: how BA is applied to
  captions (vocabulary, filter) and Eqs. (2.12)-(2.14): DBA_G, DBA_O.
* LIBRA (paper 003) supp. sec. 2 "BiasAmp": the same caption set-up (top 1,000 words, nouns /
  verbs / adjectives / adverbs, words co-occurring with each gender at least 100 times).
* Both report the metrics x100 (thesis Table 2.1: "BA, DBA_G, and DBA_O are scaled by 100";
  LIBRA Table 2: "BiasAmp [is] scaled by 100"). Every value named ``ba``/``DBA_*`` returned
  here is x100; per-pair tables are fractions (not scaled).

Cross-check with the ``bias-amplification`` PyPI package (0.2.1, ``bias_amplification``;
see ``tests/test_metrics_core.py``):

* ``DBA.computeBiasAmp(A, T, T_pred)`` is DBA_O (its "A->T") and ``DBA.computeBiasAmp(T, A,
  A_pred)`` is DBA_G (its "T->A"), both as fractions (x100 here). The package conditions on the
  sum of co-occurrences, ``P(t|a) = c(a,t) / sum_t' c(a,t')``, instead of on the number of
  samples with ``a`` (``c(a,t) / n_a``). The two agree exactly whenever every row of the
  conditioning variable has exactly one positive column (e.g. one-hot gender for DBA_G, or
  multi-class T for DBA_O); ``norm="cooccurrence"`` reproduces the package in every case.
* ``BA_MALS.computeBiasAmp(A, T, T_pred)`` uses the same mask ``1[b_at > 1/|A|]`` but
  accumulates the difference of *joint* probabilities ``(c_hat_at - c_at) / N`` instead of
  ``b_hat_at - b_at`` (Eq. 2.3). When the model preserves each task's count
  (``sum_a c_hat_at = sum_a c_at = n_t``) the per-pair terms are related by
  ``package_at = ours_at * n_t / N``.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import numpy as np
import pandas as pd

from biaslab.data.gender import FEMALE, MALE, caption_gender, gender_words, tokenize
from biaslab.metrics.validation import as_binary_2d, check_rows

GROUPS = (FEMALE, MALE)

#: Offline stand-in for the papers' part-of-speech filter ("nouns / verbs / adjectives /
#: adverbs", thesis 2.8.2): English function words -- articles, determiners, pronouns,
#: prepositions, conjunctions, auxiliaries / copulas / modals, quantifiers, numerals, wh-words
#: and clitic fragments left by ``biaslab.data.gender.tokenize`` (``woman's`` -> ``woman s``).
#: A few of them are adverbs in a POS tagger's eyes (``very``, ``too``, ``there``); they are
#: dropped anyway because they carry no content. Pass ``content_filter`` to use a tagger.
STOP_WORDS: frozenset[str] = frozenset("""
a an the this that these those some any each every either neither no another other such
all both half several many much more most few fewer less least own same
i me my mine myself we us our ours ourselves you your yours yourself yourselves it its itself
they them their theirs themselves one ones someone somebody something anyone anybody anything
everyone everybody everything nobody nothing none who whom whose which what whatever whoever
when where why how whether
of in on at by for with without within from to into onto upon about above across after against
along alongside amid among amongst around as before behind below beneath beside besides between
beyond but despite down during except inside like near next off out outside over past per
since than through throughout till toward towards under underneath unlike until up via
and or nor so yet if because although though while whereas unless then also just only even
very too quite rather really almost not
be am is are was were been being have has had having do does did doing done
can could may might must shall should will would
s t d ll m re ve don isn aren wasn weren doesn didn won wouldn can cannot couldn
there here
zero two three four five six seven eight nine ten eleven twelve dozen hundred first second
""".split())


# --------------------------------------------------------------------------------------------
# BA (Zhao et al. 2017; thesis Eqs. 2.2-2.3)
# --------------------------------------------------------------------------------------------

def bias_amplification_from_counts(c_ref, c_model) -> dict:
    """BA from co-occurrence counts (thesis Eqs. 2.2-2.3; Zhao et al. 2017).

    Eq. (2.2): ``b_al = c_al / sum_a' c_a'l`` (``b`` from the reference / training counts,
    ``b_hat`` from the model's). Eq. (2.3): ``BA = 1/|L| * sum_{a, l} (b_hat_al - b_al) *
    1[b_al > 1/|A|]``. BA > 0: the model amplifies the reference skew; a model reproducing the
    reference co-occurrences exactly gives 0; a model skewed less than the reference gives < 0.

    Note ``|L|`` counts every annotation given (every column), including ones with no ``a``
    above ``1/|A|`` (exact ties), as Eq. (2.3) divides by ``|L|``, not by the number of masked
    pairs.

    Decision: ``b_hat_al`` is undefined (0/0) for an annotation ``l`` the model never produces
    with any ``a`` (and ``b_al`` for one absent from the reference). Such an annotation
    contributes 0 to the sum (no measurable amplification) but stays in ``|L|`` (Eq. 2.3
    divides by the size of the annotation set, e.g. the 290 words of thesis 2.8.2, not by the
    words a model happens to use); ``defined`` marks the others, ``n_undefined`` counts them.

    Args:
        c_ref: array (|A|, |L|) of non-negative reference co-occurrence counts ``c_al``.
        c_model: array (|A|, |L|) of model co-occurrence counts ``c_hat_al``.

    Returns:
        dict: ``ba`` (float, x100; nan if no annotation is defined), ``b_ref``, ``b_model``
        (arrays (|A|, |L|), nan in undefined columns), ``mask`` (bool (|A|, |L|),
        ``b_ref > 1/|A|``), ``contrib`` ((b_model - b_ref) * mask, 0 in undefined columns),
        ``defined`` (bool (|L|,)), ``n_labels`` (|L|, every column), ``n_undefined``
        (columns with an undefined ``b`` or ``b_hat``).

    Raises:
        ValueError: shapes differ, not 2-D, negative counts, or |A| < 2.
    """
    c = np.asarray(c_ref, dtype=float)
    ch = np.asarray(c_model, dtype=float)
    if c.ndim != 2 or c.shape != ch.shape:
        raise ValueError(f"count arrays must be 2-D and of equal shape, got {c.shape} and "
                         f"{ch.shape}")
    if c.shape[0] < 2:
        raise ValueError("need at least two groups (rows)")
    if (c < 0).any() or (ch < 0).any():
        raise ValueError("counts must be non-negative")
    n_groups = c.shape[0]
    s, sh = c.sum(axis=0), ch.sum(axis=0)
    defined = (s > 0) & (sh > 0)
    b = np.full(c.shape, np.nan)
    bh = np.full(c.shape, np.nan)
    b[:, s > 0] = c[:, s > 0] / s[s > 0]
    bh[:, sh > 0] = ch[:, sh > 0] / sh[sh > 0]
    mask = np.nan_to_num(b, nan=0.0) > 1.0 / n_groups
    contrib = np.where(defined[None, :] & mask, np.nan_to_num(bh - b), 0.0)
    n_labels = int(c.shape[1])
    ba = 100.0 * contrib.sum() / n_labels if n_labels else math.nan
    return {"ba": float(ba), "b_ref": b, "b_model": bh, "mask": mask, "contrib": contrib,
            "defined": defined, "n_labels": n_labels,
            "n_undefined": int(n_labels - defined.sum())}


def bias_amplification_arrays(A, T, T_pred, A_pred=None) -> dict:
    """BA for multi-label classification (Zhao et al. 2017; thesis Eqs. 2.2-2.3).

    Counts ``c_al = sum_i A_ia T_il`` (ground truth) and ``c_hat_al = sum_i A'_ia T_pred_il``
    with ``A' = A_pred`` if given, else the ground-truth ``A`` (Zhao et al.'s original setting
    predicts both the agent's gender and the objects). Then ``bias_amplification_from_counts``.

    Args:
        A: binary (n, |A|) ground-truth group memberships (e.g. one-hot female/male).
        T: binary (n, |L|) ground-truth annotations (objects).
        T_pred: binary (n, |L|) predicted annotations.
        A_pred: optional binary (n, |A|) predicted groups.

    Returns:
        the dict of ``bias_amplification_from_counts`` (``ba`` x100).

    Raises:
        ValueError: non-binary or misshaped inputs.
    """
    A = as_binary_2d(A, "A")
    T = as_binary_2d(T, "T")
    Tp = as_binary_2d(T_pred, "T_pred")
    Ap = A if A_pred is None else as_binary_2d(A_pred, "A_pred")
    check_rows(("A", A), ("T", T), ("T_pred", Tp), ("A_pred", Ap))
    if Tp.shape != T.shape or Ap.shape != A.shape:
        raise ValueError("predictions must have the shape of the ground truth")
    return bias_amplification_from_counts(A.T @ T, Ap.T @ Tp)


def _flatten(captions, genders, need_genders: bool) -> list[tuple[str, str | None]]:
    """(caption, image gender) for every caption of every counted image. Items of
    ``captions`` are a str or a list of str per image; with ``genders`` only images labelled
    female/male are counted."""
    if isinstance(captions, str):
        raise TypeError("captions must be a sequence, not one string")
    caps = list(captions)
    if genders is not None:
        gens = list(genders)
        if len(gens) != len(caps):
            raise ValueError(f"captions and genders differ in length: {len(caps)} != "
                             f"{len(gens)}")
    elif need_genders:
        raise ValueError("gender_source='image' needs the image genders")
    else:
        gens = [None] * len(caps)
    out = []
    for item, g in zip(caps, gens):
        if genders is not None and g not in GROUPS:
            continue  # unlabelled image
        out.extend((cap, g) for cap in ([item] if isinstance(item, str) else list(item)))
    return out


def _groups(flat: list[tuple[str, str | None]], gender_source: str,
            words: str) -> list[tuple[str, str]]:
    """(caption, group) pairs: the caption's own gender words, or the image gender."""
    if gender_source == "image":
        return list(flat)
    out = []
    for cap, _ in flat:
        cg = caption_gender(cap, words)
        if cg in GROUPS:
            out.append((cap, cg))
    return out


def _cooccurrence(pairs: list[tuple[str, str]], vocab: Sequence[str]) -> np.ndarray:
    idx = {w: j for j, w in enumerate(vocab)}
    c = np.zeros((len(GROUPS), len(vocab)))
    gi = {g: i for i, g in enumerate(GROUPS)}
    for cap, g in pairs:
        for w in set(tokenize(cap)):
            j = idx.get(w)
            if j is not None:
                c[gi[g], j] += 1
    return c


def caption_vocabulary(human_captions: Iterable[str], top_k: int = 1000, words: str = "lic",
                       content_filter: str | Callable[[str], bool] = "stopwords") -> list[str]:
    """Candidate BiasAmp vocabulary (thesis appendix 2.8.2; LIBRA supp. 2): the ``top_k`` most
    frequent word tokens of the human captions, then only content words, minus gender words.

    Order follows the papers: frequency ranking first over all tokens (``tokenize``; ties
    broken alphabetically), content-word selection second ("we select nouns / verbs /
    adjectives / adverbs in the top 1,000 words"), so fewer than ``top_k`` words remain. The
    gender words of list ``words`` are removed (they define the groups; the papers count the
    co-occurrence "of the gender words and the common words").

    Args:
        human_captions: flat iterable of caption strings.
        top_k: number of most frequent tokens considered (papers: 1,000).
        words: gender word list removed from the vocabulary.
        content_filter: ``"stopwords"`` (default, offline, no data files): keep alphabetic
            tokens not in ``STOP_WORDS``; ``"wordnet"``: additionally require a WordNet entry
            (WordNet holds only nouns, verbs, adjectives and adverbs, so this is a
            dictionary POS test; needs NLTK's WordNet corpus from the set-up); ``"none"``:
            keep all; or a callable ``word -> bool`` (e.g. an NLTK POS tagger, when its model
            is installed: ``lambda w: nltk.pos_tag([w])[0][1][:2] in ("NN", "VB", "JJ",
            "RB")``).

    Returns:
        the vocabulary in frequency order.

    Raises:
        ValueError: top_k < 1 or unknown content_filter.
        RuntimeError: ``"wordnet"`` without the WordNet corpus.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if callable(content_filter):
        keep = content_filter
    elif content_filter == "stopwords":
        def keep(w: str) -> bool:
            return w.isalpha() and w not in STOP_WORDS
    elif content_filter == "wordnet":
        try:
            from nltk.corpus import wordnet as wn
            wn.ensure_loaded()
        except LookupError as e:
            raise RuntimeError("content_filter='wordnet' needs NLTK's WordNet corpus; run the "
                               "README set-up (scripts/setup.sh)") from e

        def keep(w: str) -> bool:
            return w.isalpha() and w not in STOP_WORDS and bool(wn.synsets(w))
    elif content_filter == "none":
        def keep(w: str) -> bool:
            return True
    else:
        raise ValueError(f"content_filter must be 'stopwords', 'wordnet', 'none' or a callable, "
                         f"got {content_filter!r}")
    freq = Counter(t for cap in human_captions for t in tokenize(cap))
    top = sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
    gw = gender_words(words)
    return [w for w, _ in top if w not in gw and keep(w)]


def bias_amplification_details(model_captions: Sequence, human_captions: Sequence,
                               model_genders: Sequence | None = None,
                               human_genders: Sequence | None = None, *, words: str = "lic",
                               gender_source: Literal["caption", "image"] = "caption",
                               min_count: int = 100, top_k: int = 1000,
                               content_filter: str | Callable[[str], bool] = "stopwords",
                               vocab: Sequence[str] | None = None) -> dict:
    """BiasAmp for image captioning (thesis Eqs. 2.2-2.3 and appendix 2.8.2; LIBRA supp. 2),
    with the kept vocabulary and each word's term (:func:`bias_amplification` gives the number
    alone).

    Set-up as in the papers:

    Reference: ``human_captions`` is the reference set ``D`` of Eqs. (2.2)-(2.3). The papers
    take the human captions of the TRAINING set (LIBRA supp. 2: "the top 1,000 frequent words
    in D", D = the training data; ``b`` "from the training data", Zhao et al. 2017); pass the
    training captions here (``biaslab evaluate-captions --train-captions``; stage
    ``eval_captioner`` passes the training split's human captions). Passing the test images'
    human captions instead measures amplification relative to the test references, a
    different question (the CLI says which reference it used).

    1. ``L`` = content words among the ``top_k`` (1,000) most frequent words of all reference
       captions, gendered or not (``caption_vocabulary``; offline POS stand-in:
       ``STOP_WORDS``), unless ``vocab`` is given.
    2. Co-occurrence ``c(w, g)`` = number of captions of group ``g`` containing ``w`` (each
       word counted once per caption). Decision on ``g``: with ``gender_source="caption"``
       (default) a caption's group is given by its gender words (``caption_gender``; thesis:
       "co-occurrence of the gender words and the common words in the captions"; captions with
       no or both genders are skipped); with ``"image"`` it is the image's ground-truth gender.
    3. Keep words that co-occur with *each* gender at least ``min_count`` times in the
       reference captions (thesis: "at least 100 times"; LIBRA says "more than 100" -- we use
       >=). The kept words are ``L``.
    4. ``b`` from human captions, ``b_hat`` from model captions (Eq. 2.2); BA by Eq. (2.3):
       ``1/|L| sum_{g, w} (b_hat(w,g) - b(w,g)) 1[b(w,g) > 1/2]`` (x100), ``|L|`` = every
       kept word. A word the model never uses with a gendered caption (``b_hat`` = 0/0)
       contributes 0 but counts in ``|L|`` (``n_undefined``; see
       ``bias_amplification_from_counts``).

    Sign: a model that exaggerates the human skew (e.g. ``little``: 70% women in human
    captions, 91% in the model's) gives BA > 0; one that reproduces it gives 0.

    Args:
        model_captions: sequence, one item per image: a generated caption (str) or a list of
            captions.
        human_captions: the reference captions D (training captions): a sequence, one item
            per image, of a list of captions or one str (a flat list of caption strings is
            fine: one caption per item).
        model_genders, human_genders: optional image genders aligned with the caption
            sequences; when given, only images labelled ``"female"``/``"male"`` are used
            (required for ``gender_source="image"``).
        words: gender word list name.
        gender_source: ``"caption"`` or ``"image"`` (see 2.).
        min_count: minimum co-occurrences with each gender in the human captions (papers:
            100; scale down for small data).
        top_k: vocabulary size before the content filter (papers: 1,000).
        content_filter: see ``caption_vocabulary``.
        vocab: explicit vocabulary (skips 1.; the ``min_count`` filter still applies).

    Returns:
        dict: ``ba`` (float, x100; nan when no word is left), ``n_words`` (|L|),
        ``n_undefined`` (words of L the model never uses with a gendered caption),
        ``vocab`` (L, in vocabulary order), ``table`` (pandas DataFrame, one row per word that passed the
        ``min_count`` filter -- words the model never uses have NaN ``b_hat_*`` and
        ``amplification`` -- columns
        ``word, c_female, c_male, c_hat_female, c_hat_male, b_female, b_male, b_hat_female,
        b_hat_male, skew`` (the group with b > 1/2, or "" on a tie), ``amplification``
        (the word's term of Eq. 2.3, fraction)), ``n_human_captions``, ``n_model_captions``
        (gendered captions counted).

    Raises:
        ValueError: misaligned genders, bad gender_source, min_count < 0.
    """
    if min_count < 0:
        raise ValueError(f"min_count must be >= 0, got {min_count}")
    if gender_source not in ("caption", "image"):
        raise ValueError(f"gender_source must be 'caption' or 'image', got {gender_source!r}")
    human_all = _flatten(human_captions, human_genders, gender_source == "image")
    human = _groups(human_all, gender_source, words)
    model = _groups(_flatten(model_captions, model_genders, gender_source == "image"),
                    gender_source, words)
    if vocab is None:
        vocab = caption_vocabulary((c for c, _ in human_all), top_k=top_k, words=words,
                                   content_filter=content_filter)
    vocab = list(dict.fromkeys(vocab))
    c_ref = _cooccurrence(human, vocab)
    keep = (c_ref >= min_count).all(axis=0)
    vocab = [w for w, k in zip(vocab, keep) if k]
    c_ref = c_ref[:, keep]
    c_mod = _cooccurrence(model, vocab)
    res = bias_amplification_from_counts(c_ref, c_mod) if vocab else None
    if res is None:
        table = pd.DataFrame(columns=["word", "c_female", "c_male", "c_hat_female",
                                      "c_hat_male", "b_female", "b_male", "b_hat_female",
                                      "b_hat_male", "skew", "amplification"])
        return {"ba": math.nan, "n_words": 0, "n_undefined": 0, "vocab": [], "table": table,
                "n_human_captions": len(human), "n_model_captions": len(model)}
    b, bh, mask = res["b_ref"], res["b_model"], res["mask"]
    skew = np.where(mask[0], FEMALE, np.where(mask[1], MALE, ""))
    amp = np.where(res["defined"], res["contrib"].sum(axis=0), np.nan)
    table = pd.DataFrame({
        "word": vocab, "c_female": c_ref[0], "c_male": c_ref[1], "c_hat_female": c_mod[0],
        "c_hat_male": c_mod[1], "b_female": b[0], "b_male": b[1], "b_hat_female": bh[0],
        "b_hat_male": bh[1], "skew": skew, "amplification": amp})
    return {"ba": res["ba"], "n_words": res["n_labels"], "n_undefined": res["n_undefined"],
            "vocab": list(vocab), "table": table,
            "n_human_captions": len(human), "n_model_captions": len(model)}


def bias_amplification(model_captions: Sequence, human_captions: Sequence,
                       model_genders: Sequence | None = None,
                       human_genders: Sequence | None = None, **options) -> float:
    """BiasAmp (thesis Eq. 2.3; LIBRA supp. 2), in percentage points (x100): how much more a
    model's captions tie the common words to the gender they lean to in the reference
    captions. Positive = amplified; 0 = the reference's skew reproduced; nan when no word
    passes ``min_count``.

    :func:`bias_amplification_details` gives the vocabulary and each word's term; the
    set-up (reference set, vocabulary, ``min_count``) is documented there.

    Args:
        model_captions: one generated caption (or list of captions) per image.
        human_captions: the reference captions D, one item (a caption or a list) per image.
        model_genders, human_genders: optional image genders aligned with them.
        **options: any keyword of :func:`bias_amplification_details` (``words``,
            ``gender_source``, ``min_count``, ``top_k``, ``content_filter``, ``vocab``).

    Returns:
        float, in percentage points (range [-50, 50]), or nan.

    Raises:
        ValueError: as :func:`bias_amplification_details`.

    Example (in the reference "cooking" is with women 2 times in 3; the model says it only
    of women: b_hat = 1 against b = 2/3, so the one word adds (1 - 2/3) x 100):

    >>> human = ["a woman cooking", "a woman cooking", "a man cooking", "a man surfing",
    ...          "a woman surfing"]
    >>> model = ["a woman cooking", "a woman cooking", "a woman cooking"]
    >>> round(bias_amplification(model, human, min_count=1, vocab=["cooking"]), 2)
    33.33
    """
    return float(bias_amplification_details(model_captions, human_captions, model_genders,
                                            human_genders, **options)["ba"])


def human_null(test_captions: Sequence[Sequence[str]], human_captions: Sequence,
               test_genders: Sequence | None = None, human_genders: Sequence | None = None,
               **kwargs) -> dict:
    """BiasAmp of the evaluated images' OWN human captions: what a captioner that writes like
    their annotators scores, the null a model's caption BiasAmp is read against.

    Eq. (2.3) compares a model's co-occurrences on the TEST images with ``b`` of the reference
    ``D`` (the training captions). When the test images' people and scenes are mixed otherwise
    than the training set's (e.g. 139 men : 61 women against 299 : 221), captions that copy
    the annotators already score BiasAmp != 0, and Zhao's mask ``1[b > 1/2]`` on a finite ``D``
    selects words whose skew regresses on new images. Neither paper gives this value; we add
    it (the metric controls) so a row's BiasAmp can be read against it and a
    control drawn like the human captions is judged against it instead of 0.

    Decision: a captioner writes ONE caption per image, so the null is computed the same way:
    for each caption index k below the smallest caption count, the k-th human caption of every
    image is the "model" of :func:`bias_amplification` against the same reference; the null
    is the mean over k (the indices' min and max give its spread).

    Args:
        test_captions: per evaluated image, its human captions (list of str, in the order
            given; COCO: by annotation id).
        human_captions, human_genders: the reference ``D`` exactly as passed to
            :func:`bias_amplification` (the training captions).
        test_genders: the evaluated images' genders, as ``model_genders`` there.
        **kwargs: the keyword arguments of :func:`bias_amplification` (``words``,
            ``gender_source``, ``min_count``, ``top_k``, ``content_filter``, ``vocab``).

    Returns:
        dict: ``ba`` (float, x100, mean over the indices; nan when no index has a word in L),
        ``per_index`` (list of float, x100, nan where undefined), ``min``, ``max``,
        ``n_indices`` (K), ``n_images``.

    Raises:
        ValueError: an image without a human caption; misaligned genders (as
            :func:`bias_amplification`).
    """
    caps = [[c] if isinstance(c, str) else list(c) for c in test_captions]
    if test_genders is not None and len(list(test_genders)) != len(caps):
        raise ValueError(f"test captions and genders differ in length: {len(caps)} != "
                         f"{len(list(test_genders))}")
    if any(not c for c in caps):
        raise ValueError("human_null: every evaluated image needs at least one human caption")
    k_n = min((len(c) for c in caps), default=0)
    vals = [float(bias_amplification_details([c[k] for c in caps], human_captions, test_genders,
                                             human_genders, **kwargs)["ba"])
            for k in range(k_n)]
    ok = [v for v in vals if math.isfinite(v)]
    return {"ba": float(np.mean(ok)) if ok else math.nan, "per_index": vals,
            "min": float(min(ok)) if ok else math.nan,
            "max": float(max(ok)) if ok else math.nan,
            "n_indices": k_n, "n_images": len(caps)}
