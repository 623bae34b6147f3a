"""Retrieval bias: Bias@K and MaxSkew@K (GenSynth, paper 001, appendix C, Eqs. 3-5).

Inputs are, per text query, the gender labels of the retrieved images in rank order (best
first): ``"male"``, ``"female"``, or anything else (``"undefined"``, ``None``) for images whose
gender is undefined (``g(I)`` of appendix C, e.g. from ``biaslab.data.gender.image_gender``).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

from biaslab.data.gender import FEMALE, MALE
from biaslab.metrics.validation import as_queries, check_k

GROUPS = (FEMALE, MALE)


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
    check_k(k)
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
    qs = as_queries(retrieved_genders_per_query)
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
    check_k(k)
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
    qs = as_queries(retrieved_genders_per_query)
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
    over queries too), and the CI resamples queries (``biaslab.runtime.stats.bootstrap``): the
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

    from biaslab.runtime import stats
    s = np.asarray(scores, dtype=np.float64)
    g = list(gallery_genders)
    if s.ndim != 2 or s.shape[1] != len(g):
        raise ValueError(f"scores must be (n_queries, {len(g)}), got {s.shape}")
    if s.shape[0] == 0:
        raise ValueError("no queries")
    for k in ks:
        check_k(k)
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


# ------------------------------------------------------------------ paper 001 Tables 1 and 2
def tfidf_scores(queries: Sequence[str], documents: Sequence[str]):
    """Scores of paper 001's gender-agnostic retrieval model (sec. 3.3, Table 1: "a TF-IDF
    ranking model for caption-to-caption retrieval on gender-neutralised captions"): the
    cosine similarity of scikit-learn TF-IDF vectors (``TfidfVectorizer`` with its defaults,
    fit on the gallery's documents; rows L2-normalised, so the dot product is the cosine).

    Each gallery image's document is its gender-neutralised captions joined (the caller
    neutralises: the model then sees no gendered word, so any bias it shows is the data's).
    The paper does not say whether a query's own caption stays in its image's document; here
    it does (the query's image then tends to rank first, as in retrieval by its own caption).

    Args:
        queries: (n_queries,) gender-neutralised query texts.
        documents: (n_gallery,) one text per gallery image.

    Returns:
        float64 array (n_queries, n_gallery) in [0, 1].

    Raises:
        ValueError: no queries or no documents, or a vocabulary that is empty after
            tokenisation (scikit-learn's error).
    """
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer
    if not len(queries) or not len(documents):
        raise ValueError(f"tfidf_scores needs queries and documents, got {len(queries)} and "
                         f"{len(documents)}")
    vec = TfidfVectorizer()
    d = vec.fit_transform(list(documents))
    q = vec.transform(list(queries))
    return np.asarray((q @ d.T).toarray(), dtype=np.float64)


def balanced_gallery(gallery_genders: Sequence, seed: int):
    """Indices of paper 001's "COCO Val (Balanced)" gallery (sec. 3.3 and appendix D: "undersample
    the male images in order to arrive at a Balanced COCO dataset"): the larger of the two
    defined groups is sampled down, without replacement, to the size of the smaller; images of
    undefined gender are kept (the paper says nothing of them; they count for no group).

    Args:
        gallery_genders: (n_gallery,) labels ``"female"``/``"male"``/other.
        seed: seed of ``numpy.random.default_rng`` (one per resample: the paper's 5 runs).

    Returns:
        int64 array of kept gallery indices, ascending.

    Raises:
        ValueError: a group with no image (nothing to balance against).
    """
    import numpy as np
    g = np.asarray([str(x) for x in gallery_genders])
    f, m = np.flatnonzero(g == FEMALE), np.flatnonzero(g == MALE)
    if not len(f) or not len(m):
        raise ValueError(f"cannot balance a gallery with {len(f)} female and {len(m)} male "
                         f"images")
    small, big = (f, m) if len(f) <= len(m) else (m, f)
    keep = np.random.default_rng(seed).choice(big, size=len(small), replace=False)
    other = np.flatnonzero((g != FEMALE) & (g != MALE))
    return np.sort(np.concatenate([small, keep, other])).astype(np.int64)


def recall_at_k(scores, targets: Sequence[int], ks: Sequence[int] = (1, 5, 10),
                n_boot: int = 2000, seed: int = 0) -> dict:
    """Text-to-image Recall@K: the share of queries whose own image (``targets``) is among the
    ``k`` highest-scored gallery images, with a percentile-bootstrap 95 % CI over queries.
    What a debiased model pays in accuracy (paper 001 Table 2 reports zero-shot ImageNet
    accuracy beside MaxSkew for the same purpose; retrieval recall is its analogue here).

    Args:
        scores: (n_queries, n_gallery) similarities; ties keep gallery order.
        targets: (n_queries,) index in the gallery of each query's source image.
        ks: cut-offs >= 1.
        n_boot, seed: bootstrap resamples and seed.

    Returns:
        ``{"R@K": {"mean", "ci95", "lo", "hi", "n"}}`` in [0, 1] for each K.

    Raises:
        ValueError: shapes that do not match, or a target outside the gallery.
    """
    import numpy as np

    from biaslab.runtime import stats
    s = np.asarray(scores, dtype=np.float64)
    t = np.asarray(targets, dtype=np.int64)
    if s.ndim != 2 or len(t) != s.shape[0]:
        raise ValueError(f"scores {s.shape} and {len(t)} targets do not match")
    if len(t) and (t.min() < 0 or t.max() >= s.shape[1]):
        raise ValueError("a target index lies outside the gallery")
    order = np.argsort(-s, axis=1, kind="stable")
    rank = np.argmax(order == t[:, None], axis=1)       # 0 = retrieved first
    out = {}
    for k in ks:
        check_k(k)
        b = stats.bootstrap(np.mean, (rank < k).astype(np.float64), n_boot=n_boot, seed=seed)
        out[f"R@{k}"] = {x: b[x] for x in ("mean", "ci95", "lo", "hi", "n")}
    return out


def clip_clip_keep(embeddings, genders: Sequence, m: int, seed: int = 0):
    """CLIP-clip (Wang et al. 2021, "Are gender-neutral queries really gender-neutral?", the
    debiased CLIP of paper 001 Table 2, m = 100 of 512 dimensions): drop the ``m`` embedding
    dimensions with the highest mutual information with gender, estimated on images of a known
    gender (paper 001: on COCO train 2017; here the training split). Mutual information is
    scikit-learn's ``mutual_info_classif`` (k-nearest-neighbour estimate, ``random_state`` =
    ``seed``); the caller applies the kept dimensions to image and text embeddings alike and
    re-normalises them.

    Args:
        embeddings: float array (n_images, d), image embeddings of the retrieval model.
        genders: (n_images,) labels; only ``"female"``/``"male"`` rows are used.
        m: dimensions to clip, 0 <= m < d.
        seed: seed of the estimator's noise.

    Returns:
        ``(keep, mi)``: int64 array of the d - m kept dimensions (ascending) and the float64
        mutual information (nats) of every dimension.

    Raises:
        ValueError: m outside [0, d), or fewer than 2 images of each gender.
    """
    import numpy as np
    from sklearn.feature_selection import mutual_info_classif
    x = np.asarray(embeddings, dtype=np.float64)
    g = np.asarray([str(v) for v in genders])
    if x.ndim != 2 or len(g) != len(x):
        raise ValueError(f"embeddings {x.shape} and {len(g)} labels do not match")
    if not 0 <= int(m) < x.shape[1]:
        raise ValueError(f"m must lie in [0, {x.shape[1]}), got {m}")
    ok = (g == FEMALE) | (g == MALE)
    if min((g == FEMALE).sum(), (g == MALE).sum()) < 2:
        raise ValueError("clip_clip_keep needs at least 2 images of each gender")
    mi = mutual_info_classif(x[ok], (g[ok] == MALE).astype(int), random_state=seed)
    drop = np.argsort(-mi, kind="stable")[:int(m)]
    return np.setdiff1d(np.arange(x.shape[1]), drop).astype(np.int64), mi.astype(np.float64)


def retrieval_difference(scores_a, scores_b, gallery_genders: Sequence,
                         ks: Sequence[int] = (10, 50, 100), n_boot: int = 2000,
                         seed: int = 0) -> dict:
    """Model A minus model B on the same queries and gallery: Bias@K and MaxSkew@K differences
    with a paired percentile-bootstrap 95 % CI over queries (each query's delta_K and MaxSkew@K
    under both models resampled together; :func:`retrieval_bias` for the per-query values;
    queries whose MaxSkew is undefined under either model are left out of MaxSkew).

    Args:
        scores_a, scores_b: arrays (n_queries, n_gallery), the same queries in the same order.
        gallery_genders, ks, n_boot, seed: as :func:`retrieval_bias` (desired proportions =
            the gallery's).

    Returns:
        ``{"Bias@K": {"mean", "ci95", "lo", "hi", "n"}, "MaxSkew@K": {...}}`` of A - B.

    Raises:
        ValueError: shapes that differ or do not match the gallery; bad K.
    """
    import numpy as np

    from biaslab.runtime import stats
    a, b = np.asarray(scores_a, np.float64), np.asarray(scores_b, np.float64)
    g = list(gallery_genders)
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] != len(g):
        raise ValueError(f"scores {a.shape} and {b.shape} must both be (n_queries, {len(g)})")
    p_d = _desired(g, GROUPS)
    ranked = [[[g[j] for j in row] for row in np.argsort(-s, axis=1, kind="stable")]
              for s in (a, b)]
    keys = ("mean", "ci95", "lo", "hi", "n")
    out = {}
    for k in ks:
        check_k(k)
        d = [np.array([delta_at_k(r, k) for r in rs]) for rs in ranked]
        bd = stats.bootstrap(lambda x, y: float(np.mean(x - y)), d[0], d[1], n_boot=n_boot,
                             seed=seed)
        out[f"Bias@{k}"] = {x: bd[x] for x in keys}
        ms = [np.array([per_query_max_skew(r, k, p_d) for r in rs]) for rs in ranked]
        ok = ~np.isnan(ms[0]) & ~np.isnan(ms[1])
        bm = (stats.bootstrap(lambda x, y: float(np.mean(x - y)), ms[0][ok], ms[1][ok],
                              n_boot=n_boot, seed=seed) if ok.any()
              else {x: None for x in keys} | {"n": 0})
        out[f"MaxSkew@{k}"] = {x: bm[x] for x in keys}
    return out
