"""Directional bias amplification (Wang & Russakovsky, "Directional Bias Amplification", ICML
2021; thesis, paper 002, Eqs. 2.12-2.14): DBA_G (attribute -> task, "T->A" in the authors'
package) and DBA_O (task -> attribute), on label arrays and on captions (thesis sec. 2.8.2:
the objects a caption names, :func:`caption_objects`). Values are x100, like every bias
amplification of :mod:`biaslab.metrics.biasamp` (whose module docstring gives the package
correspondence and the ``norm`` choice).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

from biaslab.data.gender import caption_gender, tokenize
from biaslab.metrics.biasamp import GROUPS
from biaslab.metrics.validation import as_binary_2d, check_rows, safe_ratio

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


def dba_g_details(A, T, A_pred, norm: Literal["image", "cooccurrence"] = "image") -> dict:
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
    A, T, Ap = (as_binary_2d(A, "A"), as_binary_2d(T, "T"), as_binary_2d(A_pred, "A_pred"))
    check_rows(("A", A), ("T", T), ("A_pred", Ap))
    if Ap.shape != A.shape:
        raise ValueError(f"A_pred shape {Ap.shape} != A shape {A.shape}")
    c, ch = A.T @ T, Ap.T @ T
    if norm == "image":
        p, ph = safe_ratio(c, T.sum(axis=0)[None, :]), safe_ratio(ch, T.sum(axis=0)[None, :])
    else:
        p = safe_ratio(c, c.sum(axis=0, keepdims=True))
        ph = safe_ratio(ch, ch.sum(axis=0, keepdims=True))
    delta = ph - p
    val, y = _dba_core(A, T, delta, A.shape[1], T.shape[1])
    return {"DBA_G": val, "delta": delta, "y": y}


def dba_o_details(A, T, T_pred, norm: Literal["image", "cooccurrence"] = "image") -> dict:
    """DBA_O, gender -> object directional bias amplification (thesis Eqs. 2.12-2.14 with
    ``Delta_al = p_hat(l|a) - p(l|a)``; Wang & Russakovsky 2021 "A->T").

    ``p(l|a) = #{i: A_ia = 1, T_il = 1} / #{i: A_ia = 1}``,
    ``p_hat(l|a) = #{i: A_ia = 1, T_pred_il = 1} / #{i: A_ia = 1}`` (predicted task given the
    ground-truth attribute); ``y_al`` and the average as in ``dba_g_details``. The thesis uses
    gender annotations as A and MSCOCO objects mentioned in the captions as L.

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
    A, T, Tp = (as_binary_2d(A, "A"), as_binary_2d(T, "T"), as_binary_2d(T_pred, "T_pred"))
    check_rows(("A", A), ("T", T), ("T_pred", Tp))
    if Tp.shape != T.shape:
        raise ValueError(f"T_pred shape {Tp.shape} != T shape {T.shape}")
    c, ch = A.T @ T, A.T @ Tp
    if norm == "image":
        n_a = A.sum(axis=0)[:, None]
        p, ph = safe_ratio(c, n_a), safe_ratio(ch, n_a)
    else:
        p = safe_ratio(c, c.sum(axis=1, keepdims=True))
        ph = safe_ratio(ch, ch.sum(axis=1, keepdims=True))
    delta = ph - p
    val, y = _dba_core(A, T, delta, A.shape[1], T.shape[1])
    return {"DBA_O": val, "delta": delta, "y": y}


def dba_g(A, T, A_pred, norm: Literal["image", "cooccurrence"] = "image") -> float:
    """DBA_G, object -> gender (T->A): how much more the predicted gender follows
    the objects than the ground-truth gender does (thesis Eqs. 2.12-2.14; Wang &
    Russakovsky 2021), in percentage points (x100, range [-100, 100]).

    :func:`dba_g_details` gives the per-(attribute, task) ``delta`` and ``y`` and documents
    the conditioning and ``norm``.

    Args:
        A: binary (n, |A|) ground-truth attributes; T: binary (n, |L|) ground-truth tasks;
        A_pred: binary (n, |A|) predictions; norm: as :func:`dba_g_details`.

    Returns:
        float, percentage points.

    Raises:
        ValueError: as :func:`dba_g_details`.

    Example (a handbag on images 1-3 of a woman, a woman, a man; the model calls that man a
    woman: p_hat(f|handbag) = 1 against 2/3, p_hat(m|handbag) = 0 against 1/3, so both terms
    are +1/3 and their mean over the 2 x 1 pairs is 1/3):

    >>> A = [[1, 0], [1, 0], [0, 1], [0, 1]]          # female, female, male, male
    >>> T = [[1], [1], [1], [0]]                      # handbag
    >>> round(dba_g(A, T, [[1, 0], [1, 0], [1, 0], [0, 1]]), 2)
    33.33
    """
    return float(dba_g_details(A, T, A_pred, norm)["DBA_G"])


def dba_o(A, T, T_pred, norm: Literal["image", "cooccurrence"] = "image") -> float:
    """DBA_O, gender -> object (A->T): how much more the predicted objects follow
    the gender than the ground-truth objects do (thesis Eqs. 2.12-2.14; Wang &
    Russakovsky 2021), in percentage points (x100, range [-100, 100]).

    :func:`dba_o_details` gives the per-(attribute, task) ``delta`` and ``y`` and documents
    the conditioning and ``norm``.

    Args:
        A: binary (n, |A|) ground-truth attributes; T: binary (n, |L|) ground-truth tasks;
        T_pred: binary (n, |L|) predictions; norm: as :func:`dba_o_details`.

    Returns:
        float, percentage points.

    Raises:
        ValueError: as :func:`dba_o_details`.
    """
    return float(dba_o_details(A, T, T_pred, norm)["DBA_O"])


def dba(A, T, A_pred=None, T_pred=None,
        norm: Literal["image", "cooccurrence"] = "image") -> dict:
    """Both directions of directional bias amplification (thesis Eqs. 2.12-2.14).

    Args:
        A: binary (n, |A|) ground-truth attributes (gender).
        T: binary (n, |L|) ground-truth tasks (objects).
        A_pred: optional binary (n, |A|) predicted attributes -> ``DBA_G`` (``dba_g_details``).
        T_pred: optional binary (n, |L|) predicted tasks -> ``DBA_O`` (``dba_o_details``).
        norm: see ``dba_g_details`` / ``dba_o_details``.

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
        r = dba_g_details(A, T, A_pred, norm)
        out["DBA_G"], out["delta_G"], out["y"] = r["DBA_G"], r["delta"], r["y"]
    if T_pred is not None:
        r = dba_o_details(A, T, T_pred, norm)
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


def plurals(word: str) -> set[str]:
    """``word`` and its regular English plural forms (-s, -es, -ies, -ves)."""
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
        head, last = ct[:-1], plurals(ct[-1])
        n = len(ct)
        for i in range(len(toks) - n + 1):
            if toks[i:i + n - 1] == head and toks[i + n - 1] in last:
                out.add(cat)
                break
    cats = set(categories)
    for w, cat in syn.items():
        if cat in cats and cat not in out and tokset & plurals(w):
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
      ground-truth objects (:func:`dba_g_details`, ``norm="image"``).
    * DBA_O (gender -> object; "MSCOCO objects in the captions as L, gender annotations as
      A"): with ``human_captions`` (default of the stage), ``p(l|a)`` = the share of the
      HUMAN captions of gender-``a`` images that mention ``l`` (:func:`caption_objects`; every
      human caption is one sample) and ``p_hat(l|a)`` = the share of the generated captions of
      gender-``a`` images that mention ``l``; ``y_al`` from the human-caption samples. Both are
      rates of mentions per caption, so a captioner that names fewer objects than the image
      holds is not counted as de-amplifying (decision: the thesis gives no more detail).
      Without ``human_captions``, the ground truth is the objects annotated on the image
      (:func:`dba_o_details` with ``T``, ``T_pred`` = mentioned in the generated caption).

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
    out["DBA_G"] = dba_g_details(A, T, Ap)["DBA_G"]
    if human_captions is None:
        out["DBA_O"] = dba_o_details(A, T, Tp)["DBA_O"]
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
