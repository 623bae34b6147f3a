"""Training-set variants (paper 000 sec. 2.3 and 3): original D, over-sampling (Wang et al.
2020b), sub-sampling (Agarwal et al. 2022), S_augment (Eq. 3) and S_synthetic (Eq. 2).

A manifest is a DataFrame with one row per training sample:
``sample_id`` (str), ``image_id`` (source COCO image), ``path`` (image file), ``gender``
(female/male: the depicted group), ``captions`` (list[str], gender words set to the depicted
group), ``objects`` (list[str], labelled image-level objects a_i), ``counterfactual`` (bool).
Resampled manifests repeat rows (over-sampling) or drop rows (sub-sampling).

For a protected attribute other than gender (counterfactuals of skin tone or
of the four gender x skin groups) the manifests have one more column, ``group`` (str or None):
the depicted group of the attribute (a counterfactual's target group; an original image's
perceived group where it has one). ``gender`` stays the depicted gender: a skin-tone
counterfactual keeps its source's gender and captions.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from biaslab.data import gender as G
from biaslab.data.groups import group_parts

MANIFEST_COLUMNS = ["sample_id", "image_id", "path", "gender", "captions", "objects",
                    "counterfactual"]


def original(images: pd.DataFrame, captions: pd.DataFrame, objects: pd.DataFrame,
             labels: pd.DataFrame, split: pd.DataFrame, splits=("train",)) -> pd.DataFrame:
    """D: images of ``splits`` whose caption-derived gender is female or male."""
    ids = split[split["split"].isin(splits)]["image_id"]
    lab = labels[labels["gender"].isin(G.GENDERS) & labels["image_id"].isin(ids)]
    df = lab[["image_id", "gender"]].merge(images[["image_id", "path"]], on="image_id")
    caps = captions.groupby("image_id")["caption"].apply(list)
    objs = objects.drop_duplicates(["image_id", "category"]).groupby("image_id")["category"] \
        .apply(lambda s: sorted(s))
    # [] for an image without captions (OpenImages: gender from perceived labels)
    df["captions"] = df["image_id"].map(caps).apply(lambda v: v if isinstance(v, list) else [])
    df["objects"] = df["image_id"].map(objs).apply(lambda v: v if isinstance(v, list) else [])
    df["counterfactual"] = False
    df["sample_id"] = df["image_id"].astype(str)
    return df[MANIFEST_COLUMNS].sort_values("image_id", ignore_index=True)


def _presence(manifest: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    cats = sorted({c for objs in manifest["objects"] for c in objs})
    idx = {c: k for k, c in enumerate(cats)}
    x = np.zeros((len(manifest), len(cats)), bool)
    for r, objs in enumerate(manifest["objects"]):
        for c in objs:
            x[r, idx[c]] = True
    return cats, x


def _codes(manifest: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Group codes (n,) int in [0, K) and the K sorted group names of a manifest whose rows
    all have a group: its ``group`` column where it has one (a non-gender attribute),
    else ``gender``. Two genders give female = 0, male = 1."""
    col = _group_column(manifest)
    lab = manifest[col]
    if lab.isna().any():
        raise ValueError(f"{int(lab.isna().sum())} rows have no {col}; pass "
                         "resampling_set(manifest)")
    groups = sorted(lab.unique())
    idx = {g: k for k, g in enumerate(groups)}
    return np.array([idx[g] for g in lab], dtype=np.int64), groups


def resampling_set(manifest: pd.DataFrame) -> pd.DataFrame:
    """The rows the resampling baselines can use: those with a group of the protected
    attribute (column ``group`` where the manifest has one, else ``gender``). Over- and
    sub-sampling balance p(o | g) over groups, so they need every image's group (paper 000
    appendix B.1: "requiring protected group labels for all training set samples"); images
    without one (None: e.g. COCO images without a perceived skin-tone label) are left out.
    ``result.attrs["n_unlabelled"]`` counts them."""
    col = _group_column(manifest)
    ok = manifest[col].notna()
    out = manifest[ok]
    out.attrs["n_unlabelled"] = int((~ok).sum())
    return out


#: MILP settings of the resampling baselines: a 1 % optimality gap on the size (the balance
#: constraints are always met exactly) and a node limit instead of a time limit, so that the
#: result does not depend on the machine's speed.
MILP_OPTIONS = {"mip_rel_gap": 0.01, "node_limit": 20000, "presolve": True}


def _group_rows(X: np.ndarray, codes: np.ndarray, k: int, tol: float) -> list[np.ndarray]:
    """The balance rows A (A c <= 0) of the resampling programmes for ``k`` groups: for every
    group g and object o, K n_o^g - n_o <= tol n_o, i.e. (K - 1 - tol) N_g - (1 + tol) N_rest
    <= 0 (N_g = X restricted to g's rows); for K > 2 also the lower side K n_o^g - n_o >= -tol
    n_o (for K = 2 it is the other group's upper side). With equal group sizes this is
    max_g |K p(o | g) / sum_h p(o | h) - 1| <= tol: :func:`cooccurrence`'s skew for two groups,
    |f_o - m_o| <= tol (f_o + m_o)."""
    rows = []
    for g in range(k):
        mine, rest = X * (codes == g), X * (codes != g)
        rows.append((k - 1 - tol) * mine - (1 + tol) * rest)
    if k > 2:
        for g in range(k):
            mine, rest = X * (codes == g), X * (codes != g)
            rows.append((1 - tol) * rest - (k - 1 + tol) * mine)
    return rows


def _equal_sizes(codes: np.ndarray, k: int) -> np.ndarray:
    """(k - 1, n) rows E with E c = 0 <=> every group has the same sum of c (group 0 minus
    group g; for two groups the single row +1 / -1)."""
    first = np.where(codes == 0, 1.0, 0.0)
    return np.vstack([first - np.where(codes == g, 1.0, 0.0) for g in range(1, k)])


def _milp_counts(x: np.ndarray, codes: np.ndarray, k: int, tol: float, *, lower: float,
                 upper: float, maximize: bool, seed: int, min_total: float = 0.0,
                 max_total: float = np.inf) -> np.ndarray | None:
    """Integer copies c (n,) in [lower, upper] with equal sums of c over the ``k`` groups of
    ``codes`` (n,) int in [0, k) and, for each column o of ``x``, the balance rows of
    :func:`_group_rows` (two groups: |f_o - m_o| <= tol (f_o + m_o), f_o (m_o) = sum of c
    over the group-0 (group-1) rows holding o); minimising (or maximising) sum c (1 + 1e-4 u),
    u ~ U(0, 1) from ``seed`` (a deterministic tie-break among equally large solutions), with
    ``min_total`` <= sum c <= ``max_total``. None when the solver finds no feasible point
    (within ``MILP_OPTIONS``' node limit)."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    n = len(codes)
    X = x.T.astype(float)
    eq = _equal_sizes(codes, k)
    rows = [eq]
    lo, hi = [0.0] * len(eq), [0.0] * len(eq)
    if X.shape[0]:
        bal = _group_rows(X, codes, k, tol)
        rows += bal
        lo += [-np.inf] * (len(bal) * X.shape[0])
        hi += [0.0] * (len(bal) * X.shape[0])
    if min_total > 0 or np.isfinite(max_total):
        rows.append(np.ones((1, n)))
        lo.append(float(min_total))
        hi.append(float(max_total))
    cons = LinearConstraint(np.vstack(rows), np.array(lo), np.array(hi))
    cost = 1.0 + 1e-4 * np.random.default_rng(seed).random(n)
    r = milp(-cost if maximize else cost, constraints=cons, integrality=np.ones(n),
             bounds=Bounds(lower, upper), options=MILP_OPTIONS)
    if r.x is None:
        return None
    return np.rint(r.x).astype(np.int64)


def _relaxed(solve, tol: float, what: str) -> tuple[np.ndarray, float]:
    """``solve(tol)`` at ``tol``; if infeasible, the smallest feasible tolerance in (tol, 1]
    found by bisection to 1e-3 (``solve`` must be feasible at 1)."""
    c = solve(tol)
    if c is not None:
        return c, tol
    lo, hi = tol, 1.0
    best = solve(hi)
    if best is None:
        raise ValueError(f"{what}: no balanced resample exists even at skew bound 1")
    while hi - lo > 1e-3:
        mid = (lo + hi) / 2
        c = solve(mid)
        lo, hi, best = (lo, mid, c) if c is not None else (mid, hi, best)
    return best, hi


def _check_skew(max_skew: float) -> float:
    if not 0 <= float(max_skew) < 1:
        raise ValueError(f"datasets.max_skew must be in [0, 1), got {max_skew}")
    return float(max_skew)


def balancing_weights(manifest: pd.DataFrame, iters: int = 200) -> np.ndarray:
    """Per-sample weights w (n,), mean 1, under which every labelled object co-occurs equally
    often with each gender, p_w(o | female) = p_w(o | male) (paper 000 sec. 2.1:
    p(a | g) = p(a)). Groups as in :func:`oversample` (``group`` where the manifest has that
    column, K groups raked alike); rows without a group keep weight 1 and the labelled rows'
    weights have mean 1.

    Found by raking (iterative proportional fitting): each sweep scales, for every object o,
    the weights of the female (male) images containing o by target / f (target / m) with
    target = (f + m) / 2, then equalises the two genders' total weights (equal counts then mean
    equal rates), then renormalises to mean 1. Objects seen with only one gender are left out.
    Exact balance can require weights near 0 for stereotypical images and very large ones for
    counter-stereotypical images: on strongly biased multi-label data resampling can only
    balance the labelled objects by (nearly) emptying the dataset. Raking is the multi-label
    generalisation of the per-object balancing of Wang et al. 2020b / Agarwal et al. 2022
    (balancing objects one at a time does not converge when images hold several objects).
    Real-valued weights are the limit the integer resamples :func:`oversample` /
    :func:`subsample` approach; the training stages take whole rows, so those are used.
    """
    lab = resampling_set(manifest)
    if lab.attrs["n_unlabelled"]:
        out = np.ones(len(manifest))
        out[manifest[_group_column(manifest)].notna().to_numpy()] = balancing_weights(lab, iters)
        return out
    cats, x = _presence(manifest)
    w = np.ones(len(manifest))
    if len(w) == 0:
        return w
    codes, groups = _codes(manifest)
    k_g = len(groups)
    masks = [codes == g for g in range(k_g)]
    seen = [k for k in range(len(cats)) if all((x[:, k] & m).any() for m in masks)]
    for _ in range(iters):
        for k in seen:
            held = [x[:, k] & m for m in masks]
            tot = [w[h].sum() for h in held]
            if all(t > 0 for t in tot):
                target = sum(tot) / k_g
                for h, t in zip(held, tot):
                    w[h] *= target / t
        if k_g >= 2:
            t = w.sum() / k_g
            sums = [w[m].sum() for m in masks]
            for m, s_ in zip(masks, sums):
                w[m] *= t / s_
        w = w / w.mean()
    return w


def _lp_counts(x: np.ndarray, codes: np.ndarray, k: int, tol: float, *, upper: float,
               max_total: float, seed: int) -> np.ndarray | None:
    """The LP relaxation of over-sampling: real copies c (n,) in [1, ``upper``] with equal
    sums of c over the ``k`` groups of ``codes`` (n,) int, the balance rows of
    :func:`_group_rows` for every column o of ``x`` (two groups: |f_o - m_o| <= tol (f_o +
    m_o)) and sum c <= ``max_total``, minimising sum c (1 + 1e-4 u), u ~ U(0, 1) from ``seed``
    (a unique, deterministic optimum). ``scipy.optimize.linprog`` (HiGHS). None when
    infeasible."""
    from scipy.optimize import linprog

    n = len(codes)
    X = x.T.astype(float)
    a_ub = [np.ones((1, n))] if np.isfinite(max_total) else []
    b_ub = [float(max_total)] if np.isfinite(max_total) else []
    if X.shape[0]:
        bal = _group_rows(X, codes, k, tol)
        a_ub += bal
        b_ub += [0.0] * (len(bal) * X.shape[0])
    eq = _equal_sizes(codes, k)
    cost = 1.0 + 1e-4 * np.random.default_rng(seed).random(n)
    r = linprog(cost, A_ub=np.vstack(a_ub) if a_ub else None,
                b_ub=np.array(b_ub) if b_ub else None,
                A_eq=eq, b_eq=[0.0] * len(eq),
                bounds=[(1.0, None if not np.isfinite(upper) else float(upper))] * n,
                method="highs")
    return r.x if r.status == 0 else None


def _round_counts(c: np.ndarray, codes: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Integer copies from real ones ``c`` (n,) >= 1: each of the ``k`` groups' totals
    (``codes`` (n,) int) is rounded to the nearest integer of the groups' mean total (so every
    group has exactly as many samples) and reached by flooring every c_i and adding one copy
    to the largest fractional parts (ties broken by ``seed``). Every result lies in
    [floor(c_i), ceil(c_i)], so an integer cap and the floor 1 stay met."""
    c = np.asarray(c, float)
    fl = np.floor(c + 1e-9)
    frac = np.clip(c - fl, 0.0, None)
    frac[frac < 1e-9] = 0.0
    u = np.random.default_rng(seed).random(len(c))
    out = fl.copy()
    target = np.rint(sum(c[codes == g].sum() for g in range(k)) / k)
    for g in range(k):
        idx = np.flatnonzero(codes == g)
        need = int(target - fl[idx].sum())
        if need < 0 or need > int((frac[idx] > 0).sum()):
            # only reachable if the LP's group totals differ by more than rounding
            raise ValueError("over-sampling: the LP's group totals cannot be rounded to equal")
        order = idx[np.lexsort((u[idx], -frac[idx]))]
        out[order[:need]] += 1
    return out.astype(np.int64)


def _oversample_problem(manifest: pd.DataFrame, max_factor: float | None
                        ) -> tuple[np.ndarray, np.ndarray, int, float]:
    """The data of :func:`oversample`'s programme on a manifest whose rows all have a group
    (:func:`resampling_groups`): the presence matrix of the objects seen with every group
    (n, k_o) bool, the group codes (n,), the number of groups and the size limit (inf without
    ``max_factor``). Raises ValueError when a group is missing."""
    _, x = _presence(manifest)
    codes, groups = _codes(manifest)
    if len(groups) < 2:
        raise ValueError(f"over-sampling needs images of at least two groups, got {groups}")
    every = np.logical_and.reduce([x[codes == g].any(0) for g in range(len(groups))])
    total = np.inf if max_factor is None else np.floor(float(max_factor) * len(manifest))
    return x[:, every], codes, len(groups), total


def oversample(manifest: pd.DataFrame, seed: int = 0, max_skew: float = 0.05,
               max_copies: int | None = 20, max_factor: float | None = 15.0) -> pd.DataFrame:
    """Over-sampling (Wang et al. 2020b; paper 000 sec. 2.1 and Tables 1-2): repeat images
    until every labelled object co-occurs equally often with each gender, p(o | female) =
    p(o | male), with equally many female and male samples. Nothing is dropped.

    Groups: the manifest's ``group`` column where it has one (skin tone: dark /
    light; gender x skin: four groups), else ``gender``. Images without a group are left out
    (:func:`resampling_set`; ``result.attrs["n_unlabelled"]``). For K groups the constraints
    below become equal group sizes and, for every object seen with every group,
    |K n_o^g - n_o| <= ``max_skew`` n_o for each group g (n_o^g: copies of g's images holding
    o; n_o = sum over groups), which for K = 2 is exactly the female / male bound.

    Algorithm (Wang et al. repeat minority-group images, which for multi-label data has no
    closed form): copies c_i in [1, ``max_copies``] (None = no cap) of each image, at most
    ``max_factor`` * n samples in all (None = no limit), with

    * n_female = n_male (sum of c over each gender), and
    * for every labelled object o seen with both genders, |f_o - m_o| <= ``max_skew`` *
      (f_o + m_o), f_o / m_o = copies of female / male images holding o; with equal group
      sizes this is |skew_o| <= max_skew for the skew of :func:`cooccurrence`,

    and the fewest samples sum c. Solved as a linear programme (``scipy.optimize.linprog``,
    HiGHS; ties broken by ``seed``) and rounded by :func:`_round_counts` (equal group sizes
    kept exactly; each c_i moves by less than one copy, so the reached skew can exceed the
    bound by the rounding, and is what :func:`cooccurrence` reports). The integer programme
    is not solved: near the smallest feasible bound HiGHS found no integer point within 100 s
    on the embedded default, while the LP takes milliseconds and its rounding is off by at most
    one copy per image.

    Why a cap: the bound is met by repeating the few counter-stereotypical
    images. Uncapped, the embedded default (bias 0.8, 3.6 objects per image) needs one image
    475 times (28 % of the samples; effective size 6.6 images of 280); the smallest possible
    largest repeat at |skew| <= 0.05 is ~1,070 copies (an LP bound). The default cap, 20,
    is the largest repeat of Wang et al.'s own over-sampling on CIFAR-10S (95 : 5 -> 19 copies
    of each minority image); the skew the cap allows is what :func:`oversample_tradeoff`
    reports. If the bound is infeasible under ``max_copies`` / ``max_factor`` it is relaxed to
    the smallest LP-feasible one (bisection to 1e-3); that bound is
    ``result.attrs["max_skew"]``. Objects seen with only one gender cannot be balanced
    without dropping images: they keep |skew| = 1. Unlabelled attributes are not seen at all
    (the paper's point).

    Returns the manifest with rows repeated (``sample_id`` suffixed ``#k`` for the k-th copy),
    in table order. Raises ValueError for ``max_skew`` outside [0, 1), ``max_copies`` < 1 or
    ``max_factor`` < 1, or when no group-balanced over-sample exists under ``max_copies`` and
    ``max_factor``.
    """
    tol = _check_skew(max_skew)
    if max_copies is not None and int(max_copies) < 1:
        raise ValueError(f"datasets.max_copies must be >= 1 or null, got {max_copies}")
    if max_factor is not None and not float(max_factor) >= 1:
        raise ValueError(f"datasets.max_factor must be >= 1 or null, got {max_factor}")
    manifest = resampling_set(manifest)
    dropped = manifest.attrs["n_unlabelled"]
    if len(manifest) == 0:
        return manifest.copy()
    xb, codes, k, total = _oversample_problem(manifest, max_factor)
    upper = np.inf if max_copies is None else int(max_copies)
    c, used = _relaxed(
        lambda t: _lp_counts(xb, codes, k, t, upper=upper, max_total=total, seed=seed),
        tol, f"over-sampling with datasets.max_copies={max_copies}, "
             f"datasets.max_factor={max_factor}")
    out = _expand(manifest, _round_counts(c, codes, k, seed))
    out.attrs["max_skew"] = used
    out.attrs.pop("n_unlabelled", None)   # inherited from resampling_set's frame
    if "group" in out.columns:   # a gender manifest's parquet stays byte-identical
        out.attrs["n_unlabelled"] = dropped
    return out


def oversample_tradeoff(manifest: pd.DataFrame, caps=(1, 2, 5, 10, 20, 50, 100, 200, 500, None),
                        max_factor: float | None = 15.0, seed: int = 0) -> list[dict]:
    """What a repeat cap costs in balance: for each cap K in ``caps`` (None = uncapped), the
    smallest |skew| bound an over-sample with c_i <= K can meet (LP relaxation of
    :func:`oversample`, bisection to 1e-3) and that LP's size and Kish effective size
    (sum c)^2 / sum c^2. Returns [{"max_copies": K or None, "max_skew": float,
    "n_samples": float, "effective_images": float}], one per feasible cap (a cap under which
    no group-balanced resample exists is left out). Groups and unlabelled images as in
    :func:`oversample`."""
    manifest = resampling_set(manifest)
    if len(manifest) == 0 or manifest[_group_column(manifest)].nunique() < 2:
        return []
    xb, codes, k_g, total = _oversample_problem(manifest, max_factor)
    out = []
    for k in caps:
        upper = np.inf if k is None else int(k)
        solve = lambda t: _lp_counts(xb, codes, k_g, t, upper=upper,  # noqa: E731
                                     max_total=total, seed=seed)
        try:
            c, used = _relaxed(solve, 0.0, "over-sampling trade-off")
        except ValueError:
            continue
        out.append({"max_copies": None if k is None else int(k), "max_skew": float(used),
                    "n_samples": float(c.sum()),
                    "effective_images": float(c.sum() ** 2 / (c ** 2).sum())})
    return out


def subsample(manifest: pd.DataFrame, seed: int = 0, max_skew: float = 0.05,
              min_fraction: float | None = None) -> pd.DataFrame:
    """Sub-sampling (Agarwal et al. 2022; paper 000 sec. 2.1 and Tables 1-2): keep a subset
    of the images in which every labelled object co-occurs equally often with each gender,
    with equally many female and male images.

    Algorithm: the largest subset (binary keep c_i) with n_female = n_male and, for every
    labelled object o, |f_o - m_o| <= ``max_skew`` * (f_o + m_o) (so |skew_o| <= max_skew,
    :func:`cooccurrence`; an object seen with one gender only must vanish), solved as an
    integer programme (``scipy.optimize.milp``; ties broken by ``seed``). Agarwal et al. curate
    a "contextually fair" subset greedily; the ILP reaches the same target exactly. On strongly
    biased multi-label data the balanced subset is small (embedded default: 10 of 280 images
    at 0.05): sub-sampling pays for balance with data, as the paper reports (lower mAP).
    ``min_fraction`` (None = off) trades balance for size: keep at least that share of the
    images (and always at least one per gender) with the smallest feasible bound >=
    ``max_skew`` (bisection to 1e-3); the bound used is ``result.attrs["max_skew"]``. Any
    bound < 1 needs every kept object seen with both genders; where no such subset of >= 2
    images exists (e.g. 60 capped images of the default) the bound relaxes to 1 and the
    subsample only balances the group sizes.

    Groups as in :func:`oversample`: the ``group`` column where the manifest has
    one, images without a group left out (``result.attrs["n_unlabelled"]``); for K groups
    every group keeps as many images and |K n_o^g - n_o| <= ``max_skew`` n_o for every object
    and group (an object missing from one group must vanish).

    Returns the kept rows in table order. Raises ValueError for ``max_skew`` outside [0, 1) or
    ``min_fraction`` outside (0, 1].
    """
    tol = _check_skew(max_skew)
    if min_fraction is not None and not 0 < float(min_fraction) <= 1:
        raise ValueError(f"datasets.min_fraction must be in (0, 1] or null, got {min_fraction}")
    manifest = resampling_set(manifest)
    dropped = manifest.attrs["n_unlabelled"]
    if len(manifest) == 0:
        return manifest.copy()
    cats, x = _presence(manifest)
    codes, groups = _codes(manifest)
    k = len(groups)
    smallest = int(np.bincount(codes, minlength=k).min())
    # at least one image per group (an empty training set is no baseline)
    need = max(float(k), 0.0 if min_fraction is None else float(min_fraction) * len(manifest))
    if k < 2 or need > k * smallest:
        raise ValueError(f"sub-sampling (datasets.min_fraction={min_fraction}): at most "
                         f"{k * smallest} of {len(manifest)} images can be kept with equal "
                         f"group sizes (groups {groups})")
    keep, used = _relaxed(
        lambda t: _milp_counts(x, codes, k, t, lower=0, upper=1, maximize=True, seed=seed,
                               min_total=np.ceil(need - 1e-9)),
        tol, "sub-sampling")
    out = _expand(manifest, keep)
    out.attrs["max_skew"] = used
    out.attrs.pop("n_unlabelled", None)   # inherited from resampling_set's frame
    if "group" in out.columns:   # a gender manifest's parquet stays byte-identical
        out.attrs["n_unlabelled"] = dropped
    return out


def matched_subset(manifest: pd.DataFrame, like: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The size-matched control of a resampled set: a uniformly random subset
    of ``manifest`` (Original) with as many images of each group (``group`` where the
    manifests have that column, else gender) as ``like`` has distinct source images (sub-sampling keeps each image at most once), drawn with
    ``numpy.random.default_rng(seed)`` from the rows sorted by image_id. It has sub-sampling's
    capacity but none of its balancing, so "sub-sampling vs matched" isolates what balancing
    does from what the smaller training set does (paper 000 compares sub-sampling with all of
    Original, which confounds the two).

    Args:
        manifest: Original's rows (MANIFEST_COLUMNS; one row per image).
        like: the resampled manifest whose per-group image counts are matched.
        seed: the draw's seed.

    Returns:
        the kept rows in table order.

    Raises:
        ValueError: ``like`` has more images of a group than ``manifest``.
    """
    col = _group_column(like)
    want = like.drop_duplicates("image_id")[col].value_counts()
    rng = np.random.default_rng(seed)
    keep = []
    groups = G.GENDERS if col == "gender" else sorted(manifest[col].dropna().unique())
    for g in groups:
        ids = np.sort(manifest.loc[manifest[col] == g, "image_id"].unique())
        k = int(want.get(g, 0))
        if k > len(ids):
            raise ValueError(f"matched subset: {k} {g} images wanted, Original has {len(ids)}")
        keep += list(ids[rng.permutation(len(ids))[:k]])
    return manifest[manifest["image_id"].isin(keep)].reset_index(drop=True)


def _expand(manifest: pd.DataFrame, copies: np.ndarray) -> pd.DataFrame:
    rows = manifest.loc[manifest.index.repeat(copies)].copy()
    n = rows.groupby("sample_id").cumcount()
    rows["sample_id"] = rows["sample_id"] + np.where(n > 0, "#" + n.astype(str), "")
    return rows.reset_index(drop=True)


def counterfactuals(selected: pd.DataFrame, d: pd.DataFrame, words: str = "lic") -> pd.DataFrame:
    """Manifest rows for selected inpainted images x_i^(j*, g'): the source image's objects a_i
    and captions with gender words set to the gender of g' (``biaslab.data.gender.swap(c,
    to=g')``). A skin-tone group (dark / light) keeps the source's gender and captions (COCO
    captions name no skin tone; paper 000 appendix B.1); a gender x skin group sets the gender.

    Args:
        selected: one row per (image_id, group) with ``path`` and ``j`` (from ``filters.select``).
        d: the original manifest (source of captions, objects and gender).

    Returns:
        ``MANIFEST_COLUMNS``, plus ``group`` (the target group) when a group is not a gender.

    Raises:
        ValueError: a group that is no group of any attribute.
    """
    src = d.drop_duplicates("image_id").set_index("image_id")
    sel = selected[selected["image_id"].isin(src.index)]
    rows = []
    for r in sel.itertuples(index=False):
        s = src.loc[r.image_id]
        gender, _ = group_parts(r.group)
        caps = [G.swap(c, to=gender, words=words) for c in s["captions"]] if gender \
            else list(s["captions"])
        rows.append({"sample_id": f"{r.image_id}:{r.group}:{r.j}", "image_id": r.image_id,
                     "path": r.path, "gender": gender or s["gender"], "captions": caps,
                     "objects": list(s["objects"]), "counterfactual": True, "group": r.group})
    out = pd.DataFrame(rows, columns=MANIFEST_COLUMNS + ["group"])
    return out if (out["group"] != out["gender"]).any() else out[MANIFEST_COLUMNS]


def _group_column(cf: pd.DataFrame) -> str:
    return "group" if "group" in cf.columns else "gender"


def same_sources(d: pd.DataFrame, cf: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Restrict D and the counterfactual rows to the source images that have a selected
    counterfactual for every group present in ``cf`` (paper 000 sec. 2.2: D is the set of
    tuples (x_i, omega_i, ...) that are inpainted), so that every variant built from them
    (original, resampled, S_augment, S_synthetic) draws on the same images, e.g. when
    ``generate.max_images`` caps the images inpainted or a filter gate drops some. Returns
    ``(d', cf')``; with no counterfactuals at all, both are empty."""
    col = _group_column(cf)
    groups = sorted(cf[col].unique()) if len(cf) else []
    per = cf.groupby("image_id")[col].nunique() if len(cf) else pd.Series(dtype=int)
    ids = set(per.index[per == len(groups)]) if groups else set()
    return (d[d["image_id"].isin(ids)].reset_index(drop=True),
            cf[cf["image_id"].isin(ids)].reset_index(drop=True))


def s_augment(d: pd.DataFrame, cf: pd.DataFrame) -> pd.DataFrame:
    """S_augment = D u {x_i^(j*, g') : g' != g_i} (paper 000 Eq. 3).

    For counterfactuals with a ``group`` column (skin tone, gender x skin), g_i is ``d``'s
    ``group`` (the image's perceived group); an image with no group (no ``group`` column, or
    None: COCO has skin-tone labels for few training images) gets every group's
    counterfactual, since none of them is known to repeat its own group. This is our choice;
    paper 000 appendix B.1 reports only Original and S_synthetic for skin tone."""
    col = _group_column(cf)
    if col == "group" and "group" not in d.columns:
        d = d.assign(group=None)
    g = d.drop_duplicates("image_id").set_index("image_id")[col]
    own = cf["image_id"].map(g)
    other = cf[own.isna().to_numpy() | (cf[col].to_numpy() != own.to_numpy())]
    return pd.concat([d, other], ignore_index=True)


def s_synthetic(cf: pd.DataFrame) -> pd.DataFrame:
    """S_synthetic = {x_i^(j*, g') for all (i, g')} (paper 000 Eq. 2): only inpainted images,
    every group for every source image."""
    return cf.reset_index(drop=True)


def cooccurrence(manifest: pd.DataFrame, attributes: pd.DataFrame | None = None) -> dict:
    """Group/attribute co-occurrence of a manifest (the balance that resampling targets,
    paper 000 sec. 2.1: p(a | g) = p(a)).

    Skew of an item a (labelled object or attribute value): with n_f, n_m the numbers of
    female and male samples and f_a, m_a the numbers of them holding a,

        skew_a = (f_a / n_f - m_a / n_m) / (f_a / n_f + m_a / n_m)   in [-1, 1]

    (0: a is equally likely for each gender; +-1: seen with one gender only). Items with
    f_a + m_a = 0 are left out. Repeated rows (over-sampling) count once per copy.

    Returns a dict: n_samples, n_female, n_male, n_images (distinct image_id),
    max_repeats (most rows of one image_id and gender), the spread of the repeats over the
    (image_id, gender) copies c_i: ``repeats_median``, ``repeats_p90``, ``n_repeated``
    (copies > 1), ``max_repeats_share`` (max c_i / n_samples: the share of the training set
    that is its most repeated image) and ``effective_images`` (Kish's effective sample size
    (sum c_i)^2 / sum c_i^2: n_images when nothing repeats, ~1 when one image dominates),
    ``objects_mean_abs_skew`` /
    ``objects_max_abs_skew`` = mean / max of |skew_o| over the labelled objects present (None
    without objects or without one of the genders), n_objects (present),
    n_objects_one_gender (present with one gender only: |skew| = 1, which over-sampling cannot
    change), ``objects`` {name: [f, m]}, and, when
    ``attributes`` (image_id + one column per attribute, e.g. the synthetic scene or colour
    cast) is given, for each attribute ``<col>_mean_abs_skew`` over its values and ``<col>``
    {value: [f, m]} (what label-based resampling cannot see).

    With a ``group`` column (a non-gender attribute) also ``n_unlabelled`` (rows
    without a group) and ``group_objects_mean_abs_skew`` / ``group_objects_max_abs_skew``: the
    K-group skew max_g |K r_o^g / sum_h r_o^h - 1| of each object present (r_o^g: share of
    g's samples holding o; in [0, K - 1]; for K = 2 it is |skew_o| above), over the labelled
    rows; None with fewer than two groups.
    """
    female = manifest["gender"] == G.FEMALE
    nf, nm = int(female.sum()), int((~female).sum())
    cats, x = _presence(manifest)
    f = x[female.to_numpy()].sum(0)
    m = x[~female.to_numpy()].sum(0)
    reps = manifest.groupby(["image_id", "gender"]).size()
    out = {"n_samples": int(len(manifest)), "n_female": nf, "n_male": nm,
           "n_images": int(manifest["image_id"].nunique()),
           "max_repeats": int(reps.max()) if len(reps) else 0,
           # how the repeats spread: a resample that meets its skew bound
           # by repeating one image hundreds of times trains on that image, not on the data
           "repeats_median": float(np.median(reps)) if len(reps) else 0.0,
           "repeats_p90": float(np.quantile(reps, 0.9)) if len(reps) else 0.0,
           "n_repeated": int((reps > 1).sum()),
           "max_repeats_share": float(reps.max() / len(manifest)) if len(reps) else 0.0,
           "effective_images": float(reps.sum() ** 2 / (reps ** 2).sum()) if len(reps)
           else 0.0,
           "objects": {c: [int(a), int(b)] for c, a, b in zip(cats, f, m)},
           "objects_mean_abs_skew": _mean_abs_skew(f, m, nf, nm),
           "objects_max_abs_skew": _mean_abs_skew(f, m, nf, nm, np.max),
           "n_objects": int(((f + m) > 0).sum()),
           "n_objects_one_gender": int((((f > 0) ^ (m > 0))).sum())}
    if attributes is not None and len(manifest):
        att = manifest[["image_id", "gender"]].merge(attributes, on="image_id", how="left")
        for col in [c for c in attributes.columns if c != "image_id"]:
            vals = sorted(att[col].dropna().unique())
            fa = np.array([((att[col] == v) & (att["gender"] == G.FEMALE)).sum() for v in vals])
            ma = np.array([((att[col] == v) & (att["gender"] == G.MALE)).sum() for v in vals])
            out[f"{col}_mean_abs_skew"] = _mean_abs_skew(fa, ma, nf, nm)
            out[col] = {str(v): [int(a), int(b)] for v, a, b in zip(vals, fa, ma)}
    if "group" in manifest.columns:
        out.update(_group_skew(manifest))
    return out


def _group_skew(manifest: pd.DataFrame) -> dict:
    """:func:`cooccurrence`'s per-group block (see there)."""
    lab = resampling_set(manifest)
    out = {"n_unlabelled": lab.attrs["n_unlabelled"],
           "group_objects_mean_abs_skew": None, "group_objects_max_abs_skew": None}
    if len(lab) == 0:
        return out
    codes, groups = _codes(lab)
    _, x = _presence(lab)
    n = np.bincount(codes, minlength=len(groups))
    if len(groups) < 2 or x.shape[1] == 0:
        return out
    r = np.vstack([x[codes == g].sum(0) / n[g] for g in range(len(groups))])   # (K, objects)
    tot = r.sum(0)
    ok = tot > 0
    if ok.any():
        skew = np.abs(len(groups) * r[:, ok] / tot[ok] - 1).max(0)
        out["group_objects_mean_abs_skew"] = float(skew.mean())
        out["group_objects_max_abs_skew"] = float(skew.max())
    return out


def _mean_abs_skew(f, m, nf, nm, reduce=np.mean) -> float | None:
    """``reduce`` (mean) of |skew_a| over items with f_a + m_a > 0 (see :func:`cooccurrence`)."""
    if len(f) == 0 or nf == 0 or nm == 0:
        return None
    rf, rm = np.asarray(f) / nf, np.asarray(m) / nm
    ok = (rf + rm) > 0
    return float(reduce(np.abs(rf[ok] - rm[ok]) / (rf[ok] + rm[ok]))) if ok.any() else None
