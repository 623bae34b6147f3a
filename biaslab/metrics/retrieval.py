"""Retrieval bias: Bias@K and MaxSkew@K (GenSynth, paper 001, appendix C, Eqs. 3-5).

Inputs are, per text query, the gender labels of the retrieved images in rank order (best
first): ``"male"``, ``"female"``, or anything else (``"undefined"``, ``None``) for images whose
gender is undefined (``g(I)`` of appendix C, e.g. from ``biaslab.gender.image_gender``).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

from biaslab.gender import FEMALE, MALE

GROUPS = (FEMALE, MALE)


def _check_k(k: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")


def _queries(retrieved) -> list[list]:
    if isinstance(retrieved, (str, Mapping)):
        raise TypeError("retrieved_genders_per_query must be a sequence of per-query sequences")
    out = []
    for q in retrieved:
        if isinstance(q, str):
            raise TypeError("each query's retrieval must be a sequence of labels, not a string")
        out.append(list(q))
    if not out:
        raise ValueError("no queries")
    return out


def delta_at_k(retrieved: Sequence, k: int) -> float:
    """delta_K(q) of GenSynth appendix C: over the top-``k`` retrieved images,
    ``(N_male - N_female) / (N_male + N_female)``, and 0 when ``N_male + N_female = 0``.

    Undefined images take part in the top ``k`` but count for neither gender. A list shorter
    than ``k`` is used whole.

    Args:
        retrieved: one query's gender labels in rank order.
        k: cut-off K >= 1.

    Returns:
        value in [-1, 1] (positive: more men).
    """
    _check_k(k)
    top = list(retrieved)[:k]
    n_m = sum(1 for g in top if g == MALE)
    n_f = sum(1 for g in top if g == FEMALE)
    return 0.0 if n_m + n_f == 0 else (n_m - n_f) / (n_m + n_f)


def bias_at_k(retrieved_genders_per_query: Sequence[Sequence], k: int) -> float:
    """Bias@K = 1/|Q| sum_q delta_K(q) (GenSynth, paper 001, appendix C, Eq. 3).

    Args:
        retrieved_genders_per_query: sequence over queries of rank-ordered label sequences.
        k: cut-off K >= 1.

    Returns:
        Bias@K in [-1, 1] (signed; > 0 means men over-represented; not scaled).

    Raises:
        ValueError: no queries or bad k. TypeError: a query given as a string.
    """
    qs = _queries(retrieved_genders_per_query)
    return sum(delta_at_k(q, k) for q in qs) / len(qs)


def desired_proportions(labels: Sequence, groups: Sequence = GROUPS) -> dict:
    """Desired proportions p_d (GenSynth Eq. 4: "the actual attribute distribution over the
    entire dataset") from the dataset's image labels; undefined labels are ignored.

    Raises:
        ValueError: no defined label.
    """
    c = Counter(g for g in labels if g in groups)
    tot = sum(c.values())
    if tot == 0:
        raise ValueError("no image with a defined group label")
    return {g: c[g] / tot for g in groups}


def skew_at_k(retrieved: Sequence, k: int, desired: Mapping | Sequence | None = None,
              groups: Sequence = GROUPS,
              undefined: Literal["drop_before_k", "drop_after_k"] = "drop_before_k") -> dict:
    """Skew@K per group for one query (GenSynth Eq. 4):
    ``Skew_A@K = ln(p_{R_K(q), A} / p_{d, A})``.

    Undefined images are ignored (GenSynth appendix C). Decision: by default
    (``"drop_before_k"``) they are removed from the ranking before taking the top ``k``, which
    is the same as removing them from the gallery; ``"drop_after_k"`` takes the top ``k`` first
    and computes proportions among its defined images. A list with fewer than ``k`` usable
    images is used whole.

    Zero proportions (decision, no epsilon): an observed proportion of 0 gives ``-inf`` for that
    group (ln 0); groups whose desired proportion is 0 are skipped (Skew undefined). If no
    defined image is left, every group's Skew is ``nan``.

    Args:
        retrieved: one query's labels in rank order.
        k: cut-off K >= 1.
        desired: mapping group -> desired proportion, or a sequence of the dataset's image
            labels (-> ``desired_proportions``); None: equal proportions ``1/|groups|`` (the
            dataset distribution of a gender-balanced set such as GenSynth).
        groups: the attribute labels A (default female, male).
        undefined: see above.

    Returns:
        dict group -> Skew@K (float, may be -inf or nan).

    Raises:
        ValueError: bad k / undefined mode, desired proportions negative or not summing to 1
            (tolerance 1e-6).
    """
    _check_k(k)
    p_d = _desired(desired, groups)
    items = list(retrieved)
    if undefined == "drop_before_k":
        top = [g for g in items if g in groups][:k]
    elif undefined == "drop_after_k":
        top = [g for g in items[:k] if g in groups]
    else:
        raise ValueError(f"undefined must be 'drop_before_k' or 'drop_after_k', got "
                         f"{undefined!r}")
    out = {}
    for g in groups:
        if p_d[g] == 0:
            continue
        if not top:
            out[g] = math.nan
            continue
        p_r = sum(1 for x in top if x == g) / len(top)
        out[g] = -math.inf if p_r == 0 else math.log(p_r / p_d[g])
    return out


def _desired(desired, groups) -> dict:
    if desired is None:
        return {g: 1.0 / len(groups) for g in groups}
    if isinstance(desired, Mapping):
        p = {g: float(desired.get(g, 0.0)) for g in groups}
        if any(v < 0 for v in p.values()) or abs(sum(p.values()) - 1.0) > 1e-6:
            raise ValueError(f"desired proportions must be >= 0 and sum to 1 over {groups}, "
                             f"got {p}")
        return p
    if isinstance(desired, str):
        raise TypeError("desired must be a mapping, a sequence of labels or None")
    return desired_proportions(desired, groups)


def max_skew_at_k(retrieved_genders_per_query: Sequence[Sequence], k: int,
                  desired: Mapping | Sequence | None = None, groups: Sequence = GROUPS,
                  undefined: Literal["drop_before_k", "drop_after_k"] = "drop_before_k",
                  ) -> float:
    """Mean over queries of MaxSkew@K = max_A Skew_A@K (GenSynth, paper 001, Eqs. 4-5).

    Per query, ``skew_at_k``; MaxSkew is the maximum over groups (``-inf`` entries lose to any
    finite one). Queries without any defined image in their top ``k`` (MaxSkew undefined) are
    skipped (decision); the papers' tables report the average over queries (GenSynth Tables
    1, 2: e.g. 0.23 at K=100 for CLIP on COCO val), unscaled.

    Args:
        retrieved_genders_per_query: sequence over queries of rank-ordered label sequences.
        k: cut-off K >= 1.
        desired: see ``skew_at_k`` (mapping, dataset labels, or None for equal proportions).
        groups: attribute labels.
        undefined: see ``skew_at_k``.

    Returns:
        mean MaxSkew@K (>= 0 when ``desired`` comes from these groups' proportions); ``nan``
        if no query has a defined value.

    Raises:
        ValueError / TypeError: as ``skew_at_k`` and ``bias_at_k``.
    """
    qs = _queries(retrieved_genders_per_query)
    p_d = _desired(desired, groups)
    vals = []
    for q in qs:
        s = [v for v in skew_at_k(q, k, p_d, groups, undefined).values() if not math.isnan(v)]
        if s:
            vals.append(max(s))
    return sum(vals) / len(vals) if vals else math.nan


def per_query_max_skew(retrieved: Sequence, k: int, desired: Mapping | Sequence | None = None,
                       groups: Sequence = GROUPS,
                       undefined: Literal["drop_before_k", "drop_after_k"] = "drop_before_k",
                       ) -> float:
    """MaxSkew@K of ONE query (GenSynth Eq. 5): ``max_A Skew_A@K``; ``nan`` when no defined
    image is in its top ``k`` (see :func:`skew_at_k`)."""
    s = [v for v in skew_at_k(retrieved, k, desired, groups, undefined).values()
         if not math.isnan(v)]
    return max(s) if s else math.nan


def retrieval_bias(scores, gallery_genders: Sequence, ks: Sequence[int] = (10, 50, 100),
                   desired: Mapping | Sequence | None = None, n_boot: int = 2000,
                   seed: int = 0) -> dict:
    """Bias@K and MaxSkew@K of a text-to-image retrieval model, with percentile-bootstrap 95 %
    CIs over queries (GenSynth, paper 001, sec. 3.1 / 5 and appendix C, Eqs. 3-5).

    Each query ranks the whole gallery by ``scores`` (descending; ties keep gallery order).
    Per query ``delta_K`` (:func:`delta_at_k`) and MaxSkew@K (:func:`per_query_max_skew`);
    the reported value is their mean over queries (Eq. 3; GenSynth's tables average MaxSkew
    over queries too), and the CI resamples queries (``biaslab.stats.bootstrap``): the
    uncertainty of the query sample for this one model. Queries whose MaxSkew is undefined
    (no defined image in their top K) are left out of MaxSkew and counted.

    Args:
        scores: array (n_queries, n_gallery) of query-image similarities.
        gallery_genders: (n_gallery,) labels ``"female"``/``"male"``/anything else (= undefined,
            ``g(I)`` of appendix C).
        ks: cut-offs K (paper: 5, 10, 25, 100; a K >= n_gallery ranks the whole gallery, so
            it reads the gallery's own balance).
        desired: MaxSkew's desired proportions (default: the gallery's female/male
            distribution, GenSynth Eq. 4 "the actual attribute distribution over the entire
            dataset").
        n_boot, seed: bootstrap resamples and seed.

    Returns:
        ``{"Bias@K": {"mean", "ci95", "lo", "hi", "n"}, "MaxSkew@K": {..., "n_undefined"}}``
        for each K (unscaled; Bias@K in [-1, 1], > 0 = men over-represented).

    Raises:
        ValueError: ``scores`` not 2-D or not matching the gallery, no queries, bad K, no
            defined gallery label.
    """
    import numpy as np

    from biaslab import stats
    s = np.asarray(scores, dtype=np.float64)
    g = list(gallery_genders)
    if s.ndim != 2 or s.shape[1] != len(g):
        raise ValueError(f"scores must be (n_queries, {len(g)}), got {s.shape}")
    if s.shape[0] == 0:
        raise ValueError("no queries")
    for k in ks:
        _check_k(k)
    p_d = _desired(g if desired is None else desired, GROUPS)
    order = np.argsort(-s, axis=1, kind="stable")
    ranked = [[g[j] for j in row] for row in order]
    out = {}
    keys = ("mean", "ci95", "lo", "hi", "n")
    for k in ks:
        d = np.array([delta_at_k(r, k) for r in ranked])
        ms = np.array([per_query_max_skew(r, k, p_d) for r in ranked])
        ok = ~np.isnan(ms)
        b = stats.bootstrap(np.mean, d, n_boot=n_boot, seed=seed)
        out[f"Bias@{k}"] = {x: b[x] for x in keys}
        m = (stats.bootstrap(np.mean, ms[ok], n_boot=n_boot, seed=seed) if ok.any()
             else {x: None for x in keys} | {"n": 0})
        out[f"MaxSkew@{k}"] = {x: m[x] for x in keys} | {"n_undefined": int((~ok).sum())}
    return out
