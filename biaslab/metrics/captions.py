"""Gender prediction metrics for captions and classifiers: caption label, Ratio, Error.

* ``caption_label`` -- Burns et al. 2018 ("Women also snowboard") as used in the thesis
  (paper 002) Table 2.1 and LIBRA (paper 003) Table 2: a caption is ``man`` if it contains a
  masculine word and no feminine word, ``woman`` the reverse, ``neutral`` otherwise (no gender
  word, or words of both genders). The words are those of ``biaslab.data.gender.WORD_LISTS``
  (thesis appendix 2.9: the orange/olive words "used to calculate Ratio, Error, BA and DBA_G").
* ``ratio`` -- Burns et al. 2018 / thesis Table 2.1 "Ratio" (#man / #woman captions) and the
  paper 000 (sec. 3.1, 3.2) form ``max(r, 1/r)``.
* ``error`` -- Burns et al. 2018 / LIBRA sec. 4 "Error": the gender misclassification rate of
  generated captions, in percent.
* ``error_change`` -- the per-image paired change of Error between two captions of the same
  images (e.g. before / after LIBRA's DCG, paper 003 Table 2's Error columns), with its CI.
* ``error_by_group`` -- Error within each group of an intersectional attribute (gender x
  skin tone: is a dark-skinned woman misgendered more often than a light-skinned man?), with
  the worst-group gap.
* ``classification_ratio`` -- paper 000 sec. 3.1 "Ratio" for multi-label classifiers that also
  predict {woman, man}: persons are masked out of the test images and r = #man / #woman
  predictions, each gender output counted where it is above its threshold (an image with both
  on counts for both); reported as ``max(r, 1/r)``.

Gender values follow ``biaslab.data.gender``: images are ``"female"``/``"male"``; anything else
(``"undefined"``, ``None``, ``"other"``) is unlabelled and ignored where genders are used.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from biaslab.data.gender import BOTH, FEMALE, MALE, NONE, caption_gender
from biaslab.metrics.validation import aligned_captions

MAN = "man"
WOMAN = "woman"
NEUTRAL = "neutral"

_TO_LABEL = {MALE: MAN, FEMALE: WOMAN, BOTH: NEUTRAL, NONE: NEUTRAL}


def caption_label(caption: str, words: str = "lic") -> Literal["man", "woman", "neutral"]:
    """Gender predicted by one caption (Burns et al. 2018; thesis Table 2.1; LIBRA Error).

    Args:
        caption: a (generated) caption; case and punctuation do not matter
            (``biaslab.data.gender.tokenize``).
        words: gender word list name (``lic``, ``libra``, ``gensynth``).

    Returns:
        ``"man"`` if the caption has masculine words and no feminine word, ``"woman"`` the
        reverse, ``"neutral"`` if it has no gender word or words of both genders.

    Raises:
        KeyError: unknown word list.

    Examples:

    >>> caption_label("A man and his dog")
    'man'
    >>> caption_label("A man and a woman")
    'neutral'
    """
    return _TO_LABEL[caption_gender(caption, words)]


def _safe_div(a: float, b: float) -> float:
    """a / b with a/0 = inf (a > 0) and 0/0 = nan."""
    if b == 0:
        return math.inf if a > 0 else math.nan
    return a / b


def _ratio_max(r: float) -> float:
    """max(r, 1/r) (paper 000 sec. 3.1) with max(0, inf) = inf and nan kept."""
    if math.isnan(r):
        return math.nan
    if r == 0 or math.isinf(r):
        return math.inf
    return max(r, 1.0 / r)


def ratio_details(captions: Sequence[str] | Mapping, genders: Sequence | Mapping | None = None,
                  words: str = "lic") -> dict:
    """Ratio of man to woman captions (Burns et al. 2018; thesis Table 2.1; paper 000 Table 2),
    both ways of reporting it and the counts behind them (:func:`ratio` gives paper 000's
    number alone).

    One generated caption per image. Each caption is labelled with ``caption_label``;
    ``ratio = n_man / n_woman`` (thesis Table 2.1 reports this directly, e.g. 2.47 for NIC)
    and ``ratio_max = max(ratio, 1/ratio)`` (paper 000 sec. 3.1: "We report Ratio =
    max(r, r^-1)"; 1 is unbiased).

    Args:
        captions: sequence of captions (one per image) or mapping image id -> caption.
        genders: optional ground-truth image genders aligned with ``captions`` (sequence of
            the same length, or a mapping with every caption key). When given, only images
            whose gender is ``"female"`` or ``"male"`` are counted; other values are ignored.
        words: gender word list name.

    Returns:
        dict with ``ratio`` (float; ``inf`` if there are man but no woman captions, ``nan`` if
        neither), ``ratio_max`` (float; ``inf`` when ratio is 0 or inf, ``nan`` when ratio is
        nan), ``n_man``, ``n_woman``, ``n_neutral`` (no gender word), ``n_both`` (words of
        both genders: in neither count of the ratio either) (ints, over the counted images)
        and ``n_images`` (counted images = the sum of the four).

    Raises:
        ValueError: genders misaligned with captions.
        TypeError: captions is a single string or genders of the wrong container type.

    Example (the last caption names both genders: in no count of the ratio):

    >>> r = ratio_details(["a man riding", "two men", "a woman cooking", "a dog",
    ...                    "a man and a woman"])
    >>> r["ratio"], r["n_man"], r["n_woman"], r["n_neutral"], r["n_both"]
    (2.0, 2, 1, 1, 1)
    """
    caps, gens = aligned_captions(captions, genders)
    counts = {MAN: 0, WOMAN: 0, NEUTRAL: 0}
    n_both = 0
    for i, c in enumerate(caps):
        if gens is not None and gens[i] not in (FEMALE, MALE):
            continue
        g = caption_gender(c, words)
        counts[_TO_LABEL[g]] += 1
        n_both += g == BOTH
    r = _safe_div(counts[MAN], counts[WOMAN])
    return {"ratio": r, "ratio_max": _ratio_max(r), "n_man": counts[MAN],
            "n_woman": counts[WOMAN], "n_neutral": counts[NEUTRAL] - n_both,
            "n_both": n_both, "n_images": sum(counts.values())}


def ratio(captions: Sequence[str] | Mapping, genders: Sequence | Mapping | None = None,
          words: str = "lic") -> float:
    """Ratio = max(r, 1/r), r = #man / #woman captions (paper 000 sec. 3.1 and Table 2; Burns et
    al. 2018), a dimensionless number in [1, inf]: 1 is unbiased, inf when one gender is never
    named; nan when no caption names exactly one gender.

    Decision: paper 000's symmetric form, the Table 2 column. The thesis (Table 2.1) reports
    r itself, which :func:`ratio_details` gives as ``ratio`` with the counts.

    Args:
        captions: one generated caption per image (sequence, or mapping image id -> caption).
        genders: optional image genders aligned with ``captions``; only images labelled
            ``"female"``/``"male"`` are counted.
        words: gender word list name.

    Returns:
        float >= 1, ``inf`` or ``nan``.

    Raises:
        ValueError, TypeError: as :func:`ratio_details`.

    Example (one man caption, two woman captions: r = 1/2, Ratio = 2):

    >>> ratio(["a man riding", "a woman cooking", "a girl", "a dog"])
    2.0
    """
    return float(ratio_details(captions, genders, words)["ratio_max"])


def error(captions: Sequence[str] | Mapping, genders: Sequence | Mapping,
          words: str = "lic") -> float:
    """Gender misclassification rate of captions, in percent (Burns et al. 2018; LIBRA
    (paper 003) sec. 4 "Error"; thesis Table 2.1).

    ``Error = 100 * (#female images captioned "man" + #male images captioned "woman") /
    #labelled images``. Neutral captions (no gender word, or both genders) are *not* errors
    but stay in the denominator.

    Args:
        captions: one generated caption per image (sequence, or mapping image id -> caption).
        genders: ground-truth image genders aligned with ``captions``; only images labelled
            ``"female"``/``"male"`` are counted, other values are ignored.
        words: gender word list name.

    Returns:
        Error in [0, 100]; ``nan`` if no image is labelled.

    Raises:
        ValueError: genders missing or misaligned.

    Example (one of four labelled images captioned with the other gender; "a person" is no
    error):

    >>> error(["a man", "a man", "a woman", "a person"], ["male", "female", "female", "male"])
    25.0
    """
    if genders is None:
        raise ValueError("error() needs the ground-truth image genders")
    caps, gens = aligned_captions(captions, genders)
    n = wrong = 0
    for c, g in zip(caps, gens):
        if g not in (FEMALE, MALE):
            continue
        n += 1
        lab = caption_label(c, words)
        if (g == FEMALE and lab == MAN) or (g == MALE and lab == WOMAN):
            wrong += 1
    return 100.0 * wrong / n if n else math.nan


def error_by_group(captions: Mapping, groups: Mapping, words: str = "lic") -> dict:
    """Burns et al.'s Error (:func:`error`) within each group of an intersectional attribute
    whose groups are ``<gender>_<other>`` (``female_dark``, ``male_light``, ...: the gender
    half is the image's gender), and the worst-group gap.

    Args:
        captions: image id -> generated caption.
        groups: image id -> group (``<female|male>_<...>``); other values are ignored.
        words: gender word list name.

    Returns:
        ``{"pooled": Error over every grouped image, "per_group": {group: {"Error", "lo",
        "hi", "n"}}, "worst_group_gap": {"gap", "lo", "hi", "max_group", "min_group"}}``:
        Error in percent; each group's 95 % interval is Student t over its images' 0/100
        indicators (as :func:`error_change`), the gap (largest minus smallest group Error)
        has Welch's interval between those two groups (:func:`biaslab.runtime.stats.
        difference`); None entries where a group has fewer than 2 images. Decision: the gap
        names its groups after the fact (the largest and smallest observed), so its interval
        is optimistic for the claim "some group differs"; it is reported, not tested.

    Raises:
        ValueError: a group whose gender half is not female/male.
    """
    from biaslab.runtime import stats
    other = {FEMALE: MAN, MALE: WOMAN}
    ind: dict[str, list[float]] = {}
    for i, grp in groups.items():
        if i not in captions or not isinstance(grp, str):
            continue
        gender = grp.split("_", 1)[0]
        if gender not in other:
            raise ValueError(f"group {grp!r} of image {i}: its gender half must be "
                             f"female or male")
        ind.setdefault(grp, []).append(100.0 * float(caption_label(captions[i], words)
                                                     == other[gender]))
    per = {}
    for grp in sorted(ind):
        r = stats.summarize(ind[grp])
        per[grp] = {"Error": r["mean"], "lo": r["lo"], "hi": r["hi"], "n": r["n"]}
    pooled = [v for vs in ind.values() for v in vs]
    gap = {"gap": None, "lo": None, "hi": None, "max_group": None, "min_group": None}
    if len(per) >= 2:
        hi_g = max(per, key=lambda g: per[g]["Error"])
        lo_g = min(per, key=lambda g: per[g]["Error"])
        d = stats.difference(ind[hi_g], ind[lo_g])
        gap = {"gap": d["diff"], "lo": d["lo"], "hi": d["hi"], "max_group": hi_g,
               "min_group": lo_g}
    return {"pooled": float(np.mean(pooled)) if pooled else math.nan, "per_group": per,
            "worst_group_gap": gap}


def error_change(before: Mapping, after: Mapping, genders: Mapping,
                 words: str = "lic") -> dict:
    """Per-image paired change of Burns et al.'s gender Error from ``before`` to ``after``
    captions of the same images, in percentage points.

    Each image labelled ``"female"``/``"male"`` with a caption on both sides contributes
    ``100 * (wrong_after - wrong_before)`` in {-100, 0, +100}, where wrong means the caption's
    label (``caption_label``) is the other gender (neutral captions are not wrong, as in
    ``error``). The mean equals ``error(after) - error(before)`` over those images; the 95 %
    interval is Student t over images (``biaslab.runtime.stats.summarize``), the paired test of a
    debiasing step on one captioner's output.

    Args:
        before, after: mapping image id -> caption.
        genders: mapping image id -> ``"female"`` / ``"male"`` (other values ignored).
        words: gender word list (``biaslab.data.gender.WORD_LISTS``).

    Returns:
        ``{"mean", "lo", "hi", "n"}`` (floats, percentage points; None without 2 images).
    """
    from biaslab.runtime import stats
    other = {FEMALE: MAN, MALE: WOMAN}
    ids = [i for i in before if genders.get(i) in other and i in after]
    diffs = [100.0 * (float(caption_label(after[i], words) == other[genders[i]])
                      - float(caption_label(before[i], words) == other[genders[i]]))
             for i in ids]
    d = stats.summarize(diffs)
    return {k: d[k] for k in ("mean", "lo", "hi", "n")}


def classification_ratio(pred_man, pred_woman, threshold: float | Sequence[float] = 0.5
                         ) -> dict:
    """Ratio of a multi-label classifier's gender predictions (paper 000 sec. 3.1, Table 1).

    Persons are masked out of the test images and the classifier, whose outputs include
    ``man`` and ``woman`` (appendix B.1: "the classification layers predict both protected
    groups and object classes"), is run on them; ``r = #man / #woman`` predictions and paper
    000 reports ``max(r, 1/r)``.

    Counting (a decision; the paper only says "measuring the bias in group predictions (e.g.,
    #man-to-#woman ratio)"): predictions are counted the way a multi-label classifier
    predicts, each output independently: the ``man`` output is *on* when its value is
    ``>= threshold`` (per output), likewise ``woman``. ``#man`` is the number of images whose
    man output is on, ``#woman`` those whose woman output is on; an image with BOTH outputs
    on is one man prediction and one woman prediction (it counts for both), an image with
    neither on counts for none. So ``r`` is the ratio of the two outputs' positive-prediction
    counts, not a ratio of argmax calls (an argmax of two sigmoids would turn every image into
    a call although the classifier predicts no person for many masked images). ``n_both`` and
    ``n_neither`` are reported beside.

    Args:
        pred_man: array-like (n,) of man predictions: 0/1 / bool, or probabilities / scores.
        pred_woman: array-like (n,) of woman predictions, same length and kind.
        threshold: the decision threshold of both outputs (float), or ``(thr_man,
            thr_woman)``; default 0.5 (a sigmoid output's natural operating point; for 0/1
            predictions any threshold in (0, 1] gives the 0/1 values themselves).

    Returns:
        dict with ``ratio`` (float ``r = n_man / n_woman``: ``inf`` when no image has the
        woman output on but some the man output, ``nan`` when neither output is ever on, 0
        when only the woman output is), ``ratio_max`` (``max(r, 1/r)``; ``inf`` when r is 0
        or inf, ``nan`` when r is nan), ``n_man``, ``n_woman`` (images with that output on,
        both-images included), ``n_both``, ``n_neither``, ``n_images`` (ints).

    Raises:
        ValueError: shapes differ, are not 1-D, contain NaN, or a threshold is not finite or
            not one number / a pair.

    Example (image 3 counts for both):

    >>> r = classification_ratio([1, 1, 0, 1, 0], [0, 0, 1, 1, 0])
    >>> r["n_man"], r["n_woman"], r["n_both"], r["n_neither"], r["ratio"]
    (3, 2, 1, 1, 1.5)
    """
    m = np.asarray(pred_man, dtype=float)
    w = np.asarray(pred_woman, dtype=float)
    if m.ndim != 1 or w.shape != m.shape:
        raise ValueError(f"pred_man and pred_woman must be 1-D of equal length, got {m.shape} "
                         f"and {w.shape}")
    if np.isnan(m).any() or np.isnan(w).any():
        raise ValueError("predictions contain NaN")
    thr = np.atleast_1d(np.asarray(threshold, dtype=float))
    if thr.shape not in ((1,), (2,)) or not np.isfinite(thr).all():
        raise ValueError(f"threshold must be a finite number or a (man, woman) pair, got "
                         f"{threshold!r}")
    t_man, t_woman = (thr[0], thr[0]) if len(thr) == 1 else (thr[0], thr[1])
    is_man, is_woman = m >= t_man, w >= t_woman
    n_man, n_woman = int(is_man.sum()), int(is_woman.sum())
    r = _safe_div(n_man, n_woman)
    return {"ratio": r, "ratio_max": _ratio_max(r), "n_man": n_man, "n_woman": n_woman,
            "n_both": int((is_man & is_woman).sum()),
            "n_neither": int((~is_man & ~is_woman).sum()), "n_images": int(len(m))}
