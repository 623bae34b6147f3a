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
