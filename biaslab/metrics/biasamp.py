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


def _as_binary_2d(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n, k) array, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr.astype(float)
    arr = arr.astype(float)
    if not np.isin(arr, (0.0, 1.0)).all():
        raise ValueError(f"{name} must be binary (0/1 or bool)")
    return arr


def _check_rows(*named) -> None:
    n = {a.shape[0] for _, a in named}
    if len(n) != 1:
        raise ValueError("arrays differ in number of rows: "
                         + ", ".join(f"{k}={a.shape[0]}" for k, a in named))
    if n == {0}:
        raise ValueError("arrays have no rows")


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den elementwise with 0 where den == 0 (empty conditioning set)."""
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=np.broadcast_to(den, out.shape) > 0)
    return out


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
    A = _as_binary_2d(A, "A")
    T = _as_binary_2d(T, "T")
    Tp = _as_binary_2d(T_pred, "T_pred")
    Ap = A if A_pred is None else _as_binary_2d(A_pred, "A_pred")
    _check_rows(("A", A), ("T", T), ("T_pred", Tp), ("A_pred", Ap))
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


def bias_amplification(model_captions: Sequence, human_captions: Sequence,
                       model_genders: Sequence | None = None,
                       human_genders: Sequence | None = None, *, words: str = "lic",
                       gender_source: Literal["caption", "image"] = "caption",
                       min_count: int = 100, top_k: int = 1000,
                       content_filter: str | Callable[[str], bool] = "stopwords",
                       vocab: Sequence[str] | None = None) -> dict:
    """BiasAmp for image captioning (thesis Eqs. 2.2-2.3 and appendix 2.8.2; LIBRA supp. 2).

    Set-up as in the papers:

    Reference: ``human_captions`` is the reference set ``D`` of Eqs. (2.2)-(2.3). The papers
    take the human captions of the TRAINING set (LIBRA supp. 2: "the top 1,000 frequent words
    in D", D = the training data; ``b`` "from the training data", Zhao et al. 2017); pass the
    training captions here (``biaslab evaluate-captions --train-captions``; stage
    ``eval_captioner`` passes the training split's human captions). Passing the test images'
    human captions instead measures amplification relative to the test references (the
    pre-issue-12 behaviour; the CLI says which reference it used).

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
    vals = [float(bias_amplification([c[k] for c in caps], human_captions, test_genders,
                                     human_genders, **kwargs)["ba"]) for k in range(k_n)]
    ok = [v for v in vals if math.isfinite(v)]
    return {"ba": float(np.mean(ok)) if ok else math.nan, "per_index": vals,
            "min": float(min(ok)) if ok else math.nan,
            "max": float(max(ok)) if ok else math.nan,
            "n_indices": k_n, "n_images": len(caps)}


# --------------------------------------------------------------------------------------------
# DBA (Wang & Russakovsky 2021; thesis Eqs. 2.12-2.14)
# --------------------------------------------------------------------------------------------

def _dba_core(A, T, delta, n_a_cols: int, n_t_cols: int) -> tuple[float, np.ndarray]:
    """Eq. (2.12) with y_al of Eq. (2.13); delta (|A|, |L|). Returns (x100 value, y)."""
    n = A.shape[0]
    p_al = (A.T @ T) / n
    p_a = A.mean(axis=0)
    p_l = T.mean(axis=0)
    y = (p_al > np.outer(p_a, p_l)).astype(float)
    terms = y * delta + (1 - y) * (-delta)
    return float(100.0 * terms.sum() / (n_a_cols * n_t_cols)), y


def _check_norm(norm: str) -> None:
    if norm not in ("image", "cooccurrence"):
        raise ValueError(f"norm must be 'image' or 'cooccurrence', got {norm!r}")


def dba_g(A, T, A_pred, norm: Literal["image", "cooccurrence"] = "image") -> dict:
    """DBA_G, object -> gender directional bias amplification (thesis Eqs. 2.12-2.14 with
    ``Delta_al = p_hat(a|l) - p(a|l)``; Wang & Russakovsky 2021 "T->A").

    ``DBA = 1/(|L||A|) sum_{a,l} y_al Delta_al + (1 - y_al)(-Delta_al)`` (2.12),
    ``y_al = 1[p(a,l) > p(a) p(l)]`` from the ground truth (2.13),
    ``p(a|l) = #{i: A_ia = 1, T_il = 1} / #{i: T_il = 1}`` and
    ``p_hat(a|l) = #{i: A_pred_ia = 1, T_il = 1} / #{i: T_il = 1}`` -- the *predicted*
    attribute conditioned on the *ground-truth* task (Wang & Russakovsky). The thesis uses
    MSCOCO objects on the images as L and gender words in the captions as A (appendix 2.8.2).

    A sample whose predicted row is all zeros (e.g. a gender-neutral caption) stays in the
    denominator (``norm="image"``). ``norm="cooccurrence"`` instead divides by
    ``sum_a' c(a', l)`` as the ``bias-amplification`` package does (identical when every row
    of A and A_pred has exactly one 1). An empty conditioning set gives p = 0 (as the package).

    Args:
        A: binary (n, |A|) ground-truth attributes (e.g. one-hot female/male).
        T: binary (n, |L|) ground-truth tasks/objects.
        A_pred: binary (n, |A|) predicted attributes.
        norm: ``"image"`` (default, the definition) or ``"cooccurrence"`` (package).

    Returns:
        dict: ``DBA_G`` (float, x100, in [-100, 100]), ``delta`` ((|A|, |L|) array),
        ``y`` ((|A|, |L|) 0/1 array).

    Raises:
        ValueError: non-binary or misshaped inputs, bad norm.
    """
    _check_norm(norm)
    A, T, Ap = (_as_binary_2d(A, "A"), _as_binary_2d(T, "T"), _as_binary_2d(A_pred, "A_pred"))
    _check_rows(("A", A), ("T", T), ("A_pred", Ap))
    if Ap.shape != A.shape:
        raise ValueError(f"A_pred shape {Ap.shape} != A shape {A.shape}")
    c, ch = A.T @ T, Ap.T @ T
    if norm == "image":
        p, ph = _ratio(c, T.sum(axis=0)[None, :]), _ratio(ch, T.sum(axis=0)[None, :])
    else:
        p, ph = _ratio(c, c.sum(axis=0, keepdims=True)), _ratio(ch, ch.sum(axis=0, keepdims=True))
    delta = ph - p
    val, y = _dba_core(A, T, delta, A.shape[1], T.shape[1])
    return {"DBA_G": val, "delta": delta, "y": y}


def dba_o(A, T, T_pred, norm: Literal["image", "cooccurrence"] = "image") -> dict:
    """DBA_O, gender -> object directional bias amplification (thesis Eqs. 2.12-2.14 with
    ``Delta_al = p_hat(l|a) - p(l|a)``; Wang & Russakovsky 2021 "A->T").

    ``p(l|a) = #{i: A_ia = 1, T_il = 1} / #{i: A_ia = 1}``,
    ``p_hat(l|a) = #{i: A_ia = 1, T_pred_il = 1} / #{i: A_ia = 1}`` (predicted task given the
    ground-truth attribute); ``y_al`` and the average as in ``dba_g``. The thesis uses gender
    annotations as A and MSCOCO objects mentioned in the captions as L.

    ``norm="cooccurrence"`` divides by ``sum_l' c(a, l')`` (``bias-amplification`` package);
    it equals the definition only when every row of T and T_pred has exactly one 1, so for
    multi-label objects the two differ. Empty conditioning sets give p = 0.

    Args:
        A: binary (n, |A|) ground-truth attributes.
        T: binary (n, |L|) ground-truth tasks/objects.
        T_pred: binary (n, |L|) predicted tasks/objects.
        norm: ``"image"`` (default) or ``"cooccurrence"``.

    Returns:
        dict: ``DBA_O`` (float, x100), ``delta``, ``y`` ((|A|, |L|) arrays).

    Raises:
        ValueError: non-binary or misshaped inputs, bad norm.
    """
    _check_norm(norm)
    A, T, Tp = (_as_binary_2d(A, "A"), _as_binary_2d(T, "T"), _as_binary_2d(T_pred, "T_pred"))
    _check_rows(("A", A), ("T", T), ("T_pred", Tp))
    if Tp.shape != T.shape:
        raise ValueError(f"T_pred shape {Tp.shape} != T shape {T.shape}")
    c, ch = A.T @ T, A.T @ Tp
    if norm == "image":
        n_a = A.sum(axis=0)[:, None]
        p, ph = _ratio(c, n_a), _ratio(ch, n_a)
    else:
        p, ph = _ratio(c, c.sum(axis=1, keepdims=True)), _ratio(ch, ch.sum(axis=1, keepdims=True))
    delta = ph - p
    val, y = _dba_core(A, T, delta, A.shape[1], T.shape[1])
    return {"DBA_O": val, "delta": delta, "y": y}


def dba(A, T, A_pred=None, T_pred=None,
        norm: Literal["image", "cooccurrence"] = "image") -> dict:
    """Both directions of directional bias amplification (thesis Eqs. 2.12-2.14).

    Args:
        A: binary (n, |A|) ground-truth attributes (gender).
        T: binary (n, |L|) ground-truth tasks (objects).
        A_pred: optional binary (n, |A|) predicted attributes -> ``DBA_G`` (``dba_g``).
        T_pred: optional binary (n, |L|) predicted tasks -> ``DBA_O`` (``dba_o``).
        norm: see ``dba_g`` / ``dba_o``.

    Returns:
        dict with ``DBA_G`` and/or ``DBA_O`` (x100) for the predictions given, and ``y``
        ((|A|, |L|), shared by both directions).

    Raises:
        ValueError: neither prediction given, or invalid inputs.
    """
    if A_pred is None and T_pred is None:
        raise ValueError("give A_pred (DBA_G) and/or T_pred (DBA_O)")
    out: dict = {}
    if A_pred is not None:
        r = dba_g(A, T, A_pred, norm)
        out["DBA_G"], out["delta_G"], out["y"] = r["DBA_G"], r["delta"], r["y"]
    if T_pred is not None:
        r = dba_o(A, T, T_pred, norm)
        out["DBA_O"], out["delta_O"], out["y"] = r["DBA_O"], r["delta"], r["y"]
    return out


# --------------------------------------------------------------------------------------------
# DBA_G / DBA_O of captions (thesis 2.8.2)
# --------------------------------------------------------------------------------------------

#: A few caption words for MSCOCO categories whose name is rarely the word used (offline
#: stand-in for the synonym lists of Hendricks et al. 2018; the thesis gives none). Keys are
#: single tokens; plurals of category names and of these words are matched too.
OBJECT_SYNONYMS: dict[str, str] = {
    "bike": "bicycle", "motorbike": "motorcycle", "plane": "airplane", "jet": "airplane",
    "phone": "cell phone", "cellphone": "cell phone", "television": "tv", "sofa": "couch",
    "ball": "sports ball", "puppy": "dog", "kitten": "cat", "doughnut": "donut",
    "table": "dining table", "glass": "wine glass", "bat": "baseball bat",
    "glove": "baseball glove", "racket": "tennis racket", "racquet": "tennis racket",
    "hydrant": "fire hydrant", "computer": "laptop", "fridge": "refrigerator",
    "skateboarder": "skateboard", "surfer": "surfboard", "teddy": "teddy bear",
}


def _plurals(word: str) -> set[str]:
    out = {word, word + "s", word + "es"}
    if word.endswith("y"):
        out.add(word[:-1] + "ies")
    if word.endswith("f"):
        out.add(word[:-1] + "ves")
    if word.endswith("fe"):
        out.add(word[:-2] + "ves")
    return out


def caption_objects(caption: str, categories: Sequence[str],
                    synonyms: dict[str, str] | None = None) -> set[str]:
    """MSCOCO categories mentioned in a caption ("MSCOCO objects in the captions", thesis
    2.8.2, DBA_O).

    A category is mentioned when its name's tokens (``biaslab.data.gender.tokenize``) occur
    contiguously, the last one possibly in a plural form (``dogs``, ``skis``, ``knives``), or
    when a word of ``synonyms`` (default :data:`OBJECT_SYNONYMS`) mapping to it occurs
    (plural forms too). Word matching only: no sense disambiguation (``bat`` of a baseball
    game and the animal are the same word).

    Args:
        caption: one caption.
        categories: category names (e.g. ``"baseball bat"``); only these can be returned.
        synonyms: word -> category.

    Returns:
        the set of mentioned categories (a subset of ``categories``).
    """
    toks = tokenize(caption)
    tokset = set(toks)
    syn = OBJECT_SYNONYMS if synonyms is None else synonyms
    out = set()
    for cat in categories:
        ct = tokenize(cat)
        if not ct:
            continue
        head, last = ct[:-1], _plurals(ct[-1])
        n = len(ct)
        for i in range(len(toks) - n + 1):
            if toks[i:i + n - 1] == head and toks[i + n - 1] in last:
                out.add(cat)
                break
    cats = set(categories)
    for w, cat in syn.items():
        if cat in cats and cat not in out and tokset & _plurals(w):
            out.add(cat)
    return out


def caption_dba(model_captions: Sequence[str], image_genders: Sequence,
                image_objects: Sequence[Iterable[str]], categories: Sequence[str] | None = None,
                *, human_captions: Sequence[Sequence[str]] | None = None, words: str = "lic",
                exclude: Iterable[str] = ("person",),
                synonyms: dict[str, str] | None = None) -> dict:
    """DBA_G and DBA_O of one set of generated captions (thesis 2.8.2, Eqs. 2.12-2.14).

    Per image ``i`` (only images labelled female/male are used):

    * ``A_i`` = one-hot ground-truth gender (the image's label), ``T_i`` = the MSCOCO objects
      annotated on the image (binary over ``categories``); ``y_al`` (Eq. 2.13) from (A, T).
    * DBA_G (object -> gender): ``A_pred_i`` = gender of the generated caption's gender words
      (``caption_gender``; a caption with none or both genders has an all-zero row, so it
      lowers every ``p_hat(a|l)``: "gender words in the captions as A"), conditioned on the
      ground-truth objects (:func:`dba_g`, ``norm="image"``).
    * DBA_O (gender -> object; "MSCOCO objects in the captions as L, gender annotations as
      A"): with ``human_captions`` (default of the stage), ``p(l|a)`` = the share of the
      HUMAN captions of gender-``a`` images that mention ``l`` (:func:`caption_objects`; every
      human caption is one sample) and ``p_hat(l|a)`` = the share of the generated captions of
      gender-``a`` images that mention ``l``; ``y_al`` from the human-caption samples. Both are
      rates of mentions per caption, so a captioner that names fewer objects than the image
      holds is not counted as de-amplifying (decision: the thesis gives no more detail).
      Without ``human_captions``, the ground truth is the objects annotated on the image
      (:func:`dba_o` with ``T``, ``T_pred`` = mentioned in the generated caption).

    ``L`` (decision: the thesis says "MSCOCO objects"): ``categories`` if given, else every
    category annotated on at least one counted image, minus ``exclude`` (``person`` is the
    protected subject, not a task).

    Args:
        model_captions: one generated caption per image.
        image_genders: aligned image labels (``"female"``/``"male"``; others skipped).
        image_objects: aligned iterables of the categories annotated on each image.
        categories: the category set L (see above).
        words: gender word list.
        exclude: categories never in L.
        synonyms: see :func:`caption_objects`.
        human_captions: aligned lists of each image's human captions (DBA_O's reference).

    Returns:
        ``{"DBA_G", "DBA_O"}`` (x100 floats; nan when fewer than one image of each gender or
        L is empty), ``n_images``, ``n_objects`` (|L|), ``categories`` (L).

    Raises:
        ValueError: sequences of different lengths.
    """
    caps, gens, objs = list(model_captions), list(image_genders), [set(o) for o in image_objects]
    if not (len(caps) == len(gens) == len(objs)):
        raise ValueError(f"captions, genders and objects differ in length: {len(caps)}, "
                         f"{len(gens)}, {len(objs)}")
    keep = [i for i, g in enumerate(gens) if g in GROUPS]
    ex = set(exclude)
    if categories is None:
        categories = sorted({c for i in keep for c in objs[i]} - ex)
    cats = [c for c in categories if c not in ex]
    out = {"DBA_G": math.nan, "DBA_O": math.nan, "n_images": len(keep), "n_objects": len(cats),
           "categories": list(cats)}
    if not keep or not cats or len({gens[i] for i in keep}) < 2:
        return out
    col = {c: j for j, c in enumerate(cats)}
    A = np.zeros((len(keep), 2))
    Ap = np.zeros((len(keep), 2))
    T = np.zeros((len(keep), len(cats)))
    Tp = np.zeros((len(keep), len(cats)))
    for r, i in enumerate(keep):
        A[r, GROUPS.index(gens[i])] = 1
        cg = caption_gender(caps[i], words)
        if cg in GROUPS:
            Ap[r, GROUPS.index(cg)] = 1
        for c in objs[i]:
            if c in col:
                T[r, col[c]] = 1
        for c in caption_objects(caps[i], cats, synonyms):
            Tp[r, col[c]] = 1
    out["DBA_G"] = dba_g(A, T, Ap)["DBA_G"]
    if human_captions is None:
        out["DBA_O"] = dba_o(A, T, Tp)["DBA_O"]
        return out
    hum = list(human_captions)
    if len(hum) != len(caps):
        raise ValueError(f"human_captions has {len(hum)} items for {len(caps)} captions")
    rows_a, rows_t = [], []
    for i in keep:
        for h in ([hum[i]] if isinstance(hum[i], str) else list(hum[i])):
            a = np.zeros(2)
            a[GROUPS.index(gens[i])] = 1
            t = np.zeros(len(cats))
            for c in caption_objects(h, cats, synonyms):
                t[col[c]] = 1
            rows_a.append(a)
            rows_t.append(t)
    if not rows_a:
        return out
    Ah, Th = np.array(rows_a), np.array(rows_t)
    if (Ah.sum(axis=0) == 0).any():
        return out
    p = (Ah.T @ Th) / Ah.sum(axis=0)[:, None]
    ph = (A.T @ Tp) / A.sum(axis=0)[:, None]
    out["DBA_O"], _ = _dba_core(Ah, Th, ph - p, 2, len(cats))
    out["n_human_captions"] = int(len(Ah))
    return out
