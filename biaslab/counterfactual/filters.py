"""Filters for inpainted candidates and weighted rank selection (paper 000 sec. 2.3,
Eqs. 2 and 4-6), and the GenSynth KNN filter (paper 001 sec. 4.2, Eqs. 1-2).

Score conventions: every filter score is "higher is better" (the paper ranks in descending
order, rank 1 = best).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from PIL import Image

from biaslab import registry

#: Filters of paper 000 in the order of the default `filters.names`: the built-in entries of
#: biaslab.registry.FILTERS (plug-ins add more).
FILTERS = tuple(e.name for e in registry.FILTERS.builtins())


def downsample14(image: Image.Image | np.ndarray, size: int = 14) -> np.ndarray:
    """RGB image -> (size, size, 3) float64 in [0, 1], area-averaged (PIL BOX filter)."""
    if isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    return np.asarray(image.convert("RGB").resize((size, size), Image.BOX),
                      dtype=np.float64) / 255.0


def color_fidelity(candidate: Image.Image | np.ndarray, original: Image.Image | np.ndarray,
                   size: int = 14) -> float:
    """s_color = || down14(candidate) - down14(original) ||_F^-1 (paper 000 Eq. 6).

    Pixels are scaled to [0, 1] before the difference; the Frobenius norm is taken over the
    (14, 14, 3) difference flattened (all channels). Range (0, inf]: identical downsamples give
    ``inf`` (the best possible score, ranked first). Images of different sizes are fine: both
    are downsampled to 14x14.
    """
    return _inverse_frobenius(downsample14(candidate, size) - downsample14(original, size))


@dataclass(frozen=True)
class ColorFidelitySettings:
    """Color fidelity's settings (params ``filters.filter_params.color_fidelity``).

    Attributes:
        grid: side of the thumbnails compared (paper 000 Eq. 6: 14, "downsampled to 14 x
            14"); >= 1.
    """
    grid: int = 14

    def __post_init__(self):
        if isinstance(self.grid, bool) or not isinstance(self.grid, int) or self.grid < 1:
            raise ValueError(f"grid must be an integer >= 1, got {self.grid!r}")


def _inverse_frobenius(d: np.ndarray) -> float:
    norm = float(np.sqrt((d ** 2).sum()))
    return float("inf") if norm == 0 else 1.0 / norm


def attribute_weights(names: Sequence[str], weights: Sequence[float],
                      attribute: str = "gender") -> list[float]:
    """The weights of the weighted rank selection (paper 000 Eq. 2) for a protected attribute:
    ``weights`` unchanged for gender; for an attribute with a skin tone (``skin``,
    ``gender_skin``) ``color_fidelity`` gets weight 0, as paper 000 appendix B.1 runs its
    pipeline "excluding the color fidelity filter, as we aim to modify skin tone" (Eq. 6
    rewards a candidate whose colours stay close to the original's).

    Args:
        names, weights: params ``filters.names`` / ``filters.weights`` (same length).
        attribute: the param ``attribute``.

    Returns:
        list[float], one weight per name.

    Raises:
        ValueError: names and weights differ in length."""
    if len(names) != len(weights):
        raise ValueError(f"filters.names ({len(names)}) and filters.weights ({len(weights)}) "
                         f"differ in length")
    skin = attribute in ("skin", "gender_skin")
    return [0.0 if skin and n == "color_fidelity" else float(w)
            for n, w in zip(names, weights)]


def prompt_adherence(image_emb: np.ndarray, text_emb: np.ndarray) -> np.ndarray:
    """s_prompt = phi(x) . psi(t) in [-1, 1] (paper 000 Eq. 4): cosine similarity of paired rows
    of (n, d) image and text embeddings (normalised here, so raw embeddings are fine)."""
    a = np.asarray(image_emb, np.float64)
    b = np.asarray(text_emb, np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"need paired (n, d) embeddings, got {a.shape} and {b.shape}")
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a * b).sum(axis=1)


def knn_filter(real_emb: np.ndarray, real_groups: Sequence[str], synth_emb: np.ndarray,
               synth_groups: Sequence[str], k: int = 50, tau_r: float = 0.08,
               tau_g: float = 0.5) -> pd.DataFrame:
    """GenSynth KNN filter (paper 001 Eqs. 1-2; K=50, tau_R=0.08, tau_G=0.5 in its appendix B.3).

    For each synthetic embedding s_i, N(s_i) = its K nearest neighbours (Euclidean) in R u S,
    excluding s_i itself. P_R = fraction of real images in N; P_G = fraction of neighbours whose
    group (real: label, synthetic: target group) equals the target group of s_i.
    accept = P_R > tau_R and P_G > tau_G (both strict, Eq. 2). Which candidates survive per
    image is GenSynth's retention rule, :func:`knn_gate`. Neighbour ties at the K-th distance
    are broken by sklearn's order (index order for exact ties).

    Args:
        real_emb: (n_r, d) embeddings of real person crops/images; real_groups: (n_r,) labels.
        synth_emb: (n_s, d) embeddings of candidates; synth_groups: (n_s,) target groups.
        k: neighbourhood size (clipped to n_r + n_s - 1).

    Returns:
        DataFrame with P_R, P_G (in [0, 1]), accept (bool), one row per synthetic embedding.
    """
    from sklearn.neighbors import NearestNeighbors

    real_emb = np.asarray(real_emb, np.float64)
    synth_emb = np.asarray(synth_emb, np.float64)
    if len(real_groups) != len(real_emb) or len(synth_groups) != len(synth_emb):
        raise ValueError("embeddings and group labels differ in length")
    allx = np.vstack([real_emb, synth_emb])
    groups = np.array(list(real_groups) + list(synth_groups), dtype=object)
    is_real = np.r_[np.ones(len(real_emb), bool), np.zeros(len(synth_emb), bool)]
    kk = min(k, len(allx) - 1)
    if kk < 1:
        raise ValueError("the KNN filter needs at least two embeddings")
    nn = NearestNeighbors(n_neighbors=kk + 1).fit(allx)
    _, idx = nn.kneighbors(synth_emb)
    rows = []
    for s, neigh in enumerate(idx):
        own = len(real_emb) + s
        neigh = [j for j in neigh if j != own][:kk]
        p_r = float(is_real[neigh].mean())
        p_g = float((groups[neigh] == synth_groups[s]).mean())
        rows.append({"P_R": p_r, "P_G": p_g, "accept": p_r > tau_r and p_g > tau_g})
    return pd.DataFrame(rows)


def knn_gate(scores: pd.DataFrame, accept: str = "knn_accept", image: str = "image_id",
             group: str = "group", groups: Sequence[str] | None = None
             ) -> tuple[pd.DataFrame, dict]:
    """GenSynth's retention rule after the KNN filter (paper 001 sec. 4.2, after Eq. 2):
    "We only retain images where the entire set of edits per unique COCO ID has at least one
    accepted male and female edit, then randomly select one edit for each gender from images
    that pass the filter."

    So an image keeps its accepted edits only if every group has at least one accepted edit;
    if all edits of an image for some group are rejected, the image is dropped entirely (no
    edit of any group is kept, and no rejected edit is let back in). The choice among the
    accepted edits is left to :func:`select` (paper 000's weighted rank selection, Eq. 2,
    instead of GenSynth's random pick: a documented combination of the two papers).

    Args:
        scores: one row per candidate with columns ``image``, ``group`` and ``accept`` (bool).
        groups: the groups every image must cover; default: all groups in ``scores``.

    Returns:
        ``(kept, counts)``: the accepted candidates of the retained images (table order), and
        counts ``images`` (in ``scores``), ``images_kept``, ``images_dropped``,
        ``candidates_accepted`` (before the per-image rule), ``candidates_kept``.

    Raises:
        ValueError: a column is missing.
    """
    miss = [c for c in (accept, image, group) if c not in scores.columns]
    if miss:
        raise ValueError(f"score table lacks column(s) {miss} for the KNN gate")
    want = set(scores[group].unique() if groups is None else groups)
    acc = scores[scores[accept].astype(bool)]
    covered = acc.groupby(image)[group].agg(lambda g: want <= set(g))
    ok = set(covered.index[covered])
    kept = acc[acc[image].isin(ok)]
    n_img = int(scores[image].nunique())
    return kept, {"images": n_img, "images_kept": len(ok), "images_dropped": n_img - len(ok),
                  "candidates_accepted": int(len(acc)), "candidates_kept": int(len(kept))}


@dataclass
class FilterContext(registry.SettingsLookup):
    """What a filter (registry kind ``filters``) scores: the candidates, their originals, the
    scorer and object predictor, and the backbone features both already went through once.

    Attributes:
        candidates: one row per candidate (``image_id``, ``group``, ``path``, ``prompt``;
            index 0..n-1). Read-only for filters.
        candidate_paths: ``candidates["path"]`` as strings (n,).
        image_ids: the originals' image ids, sorted (m,).
        original_paths: the originals' files, aligned with ``image_ids`` (m,).
        originals: image_id -> original file.
        scorer: a ``ClipScorer`` (Eq. 4's phi and psi).
        object_predictor: eta of Eq. 5 (``predict_sets``).
        candidate_features, original_features: float32 (n, d) / (m, d) backbone features, or
            None when neither model accepts features.
        progress: show progress bars.
    """
    candidates: pd.DataFrame
    candidate_paths: list
    image_ids: list
    original_paths: list
    originals: Mapping
    scorer: Any
    object_predictor: Any
    candidate_features: np.ndarray | None = None
    original_features: np.ndarray | None = None
    progress: bool = False
    component_settings: Mapping[str, Any] = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False)

    settings_kind: ClassVar[str] = "filters"

    def inputs(self, model, which: str = "candidates"):
        """``model``'s input for the candidates (or ``"originals"``): the backbone features
        when it accepts them (``accepts_features``), else the image paths."""
        feats, paths = ((self.candidate_features, self.candidate_paths) if which == "candidates"
                        else (self.original_features, self.original_paths))
        return feats if getattr(model, "accepts_features", False) else paths

    def candidate_embeddings(self) -> np.ndarray:
        """phi(candidate), (n, d) from ``scorer.encode_images``, computed once (prompt
        adherence and the KNN filter share it)."""
        if "img_c" not in self._cache:
            self._cache["img_c"] = np.asarray(self.scorer.encode_images(
                self.inputs(self.scorer)))
        return self._cache["img_c"]


def score_prompt_adherence(ctx: FilterContext) -> np.ndarray:
    """Prompt adherence (paper 000 Eq. 4) of every candidate, float (n,) in [-1, 1]; a prompt
    shared by the m candidates of one (i, g') is text-encoded once."""
    prompts = ctx.candidates["prompt"].astype(str).to_numpy()
    uniq, inv = np.unique(prompts, return_inverse=True)
    text = np.asarray(ctx.scorer.encode_texts(list(uniq)))[inv]
    return prompt_adherence(ctx.candidate_embeddings(), text)


def score_object_consistency(ctx: FilterContext) -> np.ndarray:
    """Object consistency (paper 000 Eq. 5): F1 of the object sets predicted on the candidate
    and on its original, float (n,) in [0, 1]."""
    from biaslab.models.objects import object_f1
    op = ctx.object_predictor
    sets_c = op.predict_sets(ctx.inputs(op))
    sets_o = dict(zip(ctx.image_ids, op.predict_sets(ctx.inputs(op, "originals"))))
    return np.asarray([object_f1(sc, sets_o[int(i)])
                       for sc, i in zip(sets_c, ctx.candidates["image_id"])], dtype=np.float64)


def score_color_fidelity(ctx: FilterContext) -> np.ndarray:
    """Color fidelity (paper 000 Eq. 6) of every candidate against its original, float (n,) in
    (0, inf], on ``grid`` x ``grid`` thumbnails (:class:`ColorFidelitySettings`)."""
    from tqdm import tqdm

    from biaslab.models.encoders import open_rgb
    grid = ctx.settings("color_fidelity").grid
    # candidates of one image are adjacent in the generate table: keep one original decoded
    color, last = [], (None, None)
    for path, iid in tqdm(zip(ctx.candidate_paths, ctx.candidates["image_id"]),
                          total=len(ctx.candidates), disable=not ctx.progress,
                          desc="color fidelity"):
        if last[0] != iid:
            last = (iid, downsample14(open_rgb(ctx.originals[int(iid)]), grid))
        color.append(_inverse_frobenius(downsample14(open_rgb(path), grid) - last[1]))
    return np.asarray(color, dtype=np.float64)


def score_candidates(cands: pd.DataFrame, originals: Mapping[int, str], scorer,
                     object_predictor, encode: Callable[[pd.DataFrame], np.ndarray] | None = None,
                     real_groups: Mapping[int, str] | None = None, knn: Mapping | None = None,
                     progress: bool = False, timings: dict | None = None,
                     names: Sequence[str] = FILTERS,
                     settings: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The filters ``names`` (default: every filter of paper 000 sec. 2.3, Eqs. 4-6) on every
    candidate, plus optionally the GenSynth KNN filter (paper 001 Eqs. 1-2). The ``score``
    stage and ``benchmarks/score.py`` both call this, so the benchmark measures exactly what
    the stage runs. Each name is looked up in the registry (:data:`biaslab.registry.FILTERS`):
    a plug-in filter is a ``score(ctx: FilterContext) -> float (n,)`` function.

    Each candidate runs through the image backbone once: the backbone features feed both
    prompt adherence and object consistency when the scorer / object predictor accept features
    (``accepts_features``: the offline LiT scorer and object classifier); a Hugging Face CLIP
    or detector (paper tier) gets the paths instead. Colour fidelity decodes the candidate a
    second time (0.14 s of 10 s for 240 candidates in ``benchmarks/results/score.json``, not
    worth threading pixels through the feature cache). A prompt shared by the m candidates of
    one (i, g') is text-encoded once.

    Args:
        cands: one row per candidate with ``image_id`` (int, the original), ``group`` (g'),
            ``path`` (candidate image file) and ``prompt`` (t^(g')).
        originals: image_id -> path of the original image x_i, for every candidate's image_id.
        scorer: a ``ClipScorer`` (``encode_images``, ``encode_texts``; Eq. 4's phi and psi).
        object_predictor: eta of Eq. 5 (``predict_sets(images or features) -> list[set]``).
        encode: ``table(image_id int64, path) -> float32 (n, d)`` backbone features in table
            order (``biaslab.models.features.encode_cached`` bound to a cache); required when the
            scorer or the object predictor accepts features. Candidates are keyed by a stable
            63-bit hash of their path (they have no image id of their own).
        real_groups: image_id -> gender of the originals (the real images R of the KNN filter);
            needed with ``knn``.
        knn: ``{"k", "tau_r", "tau_g"}`` to add ``knn_P_R``, ``knn_P_G`` (in [0, 1]) and
            ``knn_accept`` (bool); ``None`` skips the KNN filter. GenSynth embeds person crops
            with CLIP; this embeds whole images with ``scorer`` (documented deviation).
        timings: filled with seconds per part (``features``, each filter's name, ``knn``)
            when given.
        names: the filters to compute (param ``filters.names``), registered names.
        settings: ``{name: settings}`` of the filters that declare settings (the stage
            resolves them from ``filters.filter_params``: ``registry.FILTERS.settings_for``); absent:
            their defaults.

    Returns:
        A copy of ``cands`` (same row order) plus one float column per filter, in ``names``'
        order: ``prompt_adherence`` in [-1, 1], ``object_consistency`` in [0, 1],
        ``color_fidelity`` in (0, inf], a plug-in's in its own range.

    Raises:
        ValueError: missing columns, an image_id without an original, ``encode`` missing
        when needed, or a filter returning other than one number per candidate (NaN is
        allowed and ranks last in :func:`select`).
        ``biaslab.registry.RegistryError``: an unknown filter name (the message lists the
        known ones). Unreadable images raise ``biaslab.runtime.io.InputError`` naming the file.
    """
    import time

    from biaslab.counterfactual.generate import stable_hash

    miss = [c for c in ("image_id", "group", "path", "prompt") if c not in cands.columns]
    if miss:
        raise ValueError(f"candidate table lacks column(s) {miss}")
    funcs = {n: registry.FILTERS.load(n) for n in names}     # unknown names fail before work
    out = cands.reset_index(drop=True).copy()
    ids = sorted(int(i) for i in out["image_id"].unique())
    lost = [i for i in ids if i not in originals]
    if lost:
        raise ValueError(f"no original image for image_id(s) {lost[:5]}")
    wants = [getattr(m, "accepts_features", False) for m in (scorer, object_predictor)]
    if any(wants) and encode is None:
        raise ValueError("encode is required: the scorer or object predictor takes features")
    t = timings if timings is not None else {}
    clock = time.perf_counter

    t0 = clock()
    cpaths = out["path"].astype(str).tolist()
    opaths = [str(originals[i]) for i in ids]
    fc = fo = None
    if any(wants):
        fc = encode(pd.DataFrame({"image_id": [stable_hash(x) >> 1 for x in cpaths],
                                  "path": cpaths}))
        fo = encode(pd.DataFrame({"image_id": ids, "path": opaths}))
    t["features"] = clock() - t0
    ctx = FilterContext(candidates=out.copy(), candidate_paths=cpaths, image_ids=ids,
                        original_paths=opaths, originals=originals, scorer=scorer,
                        object_predictor=object_predictor, candidate_features=fc,
                        original_features=fo, progress=progress,
                        component_settings=dict(settings or {}))

    for name, fn in funcs.items():
        t0 = clock()
        v = fn(ctx)
        try:
            v = np.asarray(v, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"filter {name!r} returned non-numbers: {e}") from e
        if v.shape != (len(out),):      # NaN is allowed: select ranks it last
            raise ValueError(f"filter {name!r} must return one number per candidate: shape "
                             f"{v.shape} for {len(out)} candidates")
        out[name] = v
        t[name] = clock() - t0

    if knn is not None:
        t0 = clock()
        if real_groups is None:
            raise ValueError("the KNN filter needs real_groups")
        img_o = np.asarray(scorer.encode_images(ctx.inputs(scorer, "originals")))
        r = knn_filter(img_o, [real_groups.get(i, "undefined") for i in ids],
                       ctx.candidate_embeddings(), out["group"].tolist(), k=int(knn["k"]),
                       tau_r=float(knn["tau_r"]), tau_g=float(knn["tau_g"]))
        out["knn_P_R"], out["knn_P_G"] = r["P_R"].to_numpy(), r["P_G"].to_numpy()
        out["knn_accept"] = r["accept"].to_numpy()
        t["knn"] = clock() - t0
    return out


def select(scores: pd.DataFrame, filters: Sequence[str], weights: Sequence[float],
           keys: Sequence[str] = ("image_id", "group"), worst: bool = False) -> pd.DataFrame:
    """Weighted rank selection (paper 000 Eq. 2): for each tuple (i, g'),
    j* = argmin_j sum_k c_k * r(s_k^(i,j,g')), with r the rank of the score among the m
    candidates of (i, g') in DESCENDING order (rank 1 = highest score = least biased).

    Ties in a filter's score share the lowest rank of the tie (``method="min"``), so equal
    scores never favour one candidate; ties in the weighted rank sum are broken by the smaller
    candidate index ``j`` (deterministic). A weight of 0 removes a filter; NaN scores rank last.

    Args:
        scores: one row per candidate with columns ``keys``, ``j`` and one column per filter.
        filters: the filter columns, aligned with ``weights``.
        weights: c_k, finite real numbers >= 0 (all zero: no filtering, the first candidate).
        worst: pick the candidate with the LARGEST weighted rank sum instead (the worst under
            the same weights; paper 000 Fig. 4's "worst" column), ties again by smaller ``j``.

    Returns:
        The selected rows (one per (i, g')) with extra columns ``rank_<filter>`` and
        ``rank_sum``, sorted by ``keys``.

    Raises:
        ValueError (``biaslab.runtime.validate.ParamError`` naming ``weights``): a weight that is not
            a number, NaN/inf or negative (a negative c_k would select the worst candidates;
            one NaN would turn every filter off), or weights and filters differ in length.
        ValueError: a filter column is missing.
    """
    from biaslab.runtime.validate import check_weights
    weights = check_weights(weights, list(filters), param="weights")
    missing = [f for f in filters if f not in scores.columns]
    if missing:
        raise ValueError(f"score table lacks filter column(s) {missing}")
    df = scores.copy()
    keys = list(keys)
    total = np.zeros(len(df))
    for f, c in zip(filters, weights):
        r = df.groupby(keys)[f].rank(method="min", ascending=False, na_option="bottom")
        df[f"rank_{f}"] = r.astype("int64")
        total = total + float(c) * r.to_numpy()
    df["rank_sum"] = total
    df = df.sort_values(keys + ["rank_sum", "j"], ascending=[True] * len(keys) + [not worst, True],
                        kind="stable")
    return df.groupby(keys, sort=True).head(1).sort_values(keys, ignore_index=True)


def choice_report(scores: pd.DataFrame, selected: pd.DataFrame, filters: Sequence[str],
                  weights: Sequence[float], keys: Sequence[str] = ("image_id", "group")) -> dict:
    """Whether the weights choose anything: the selection under ``weights`` against the one
    under equal weights (paper 000's c_k = 1 for every filter).

    Args:
        scores: every candidate (columns ``keys``, ``j`` and the filters), as given to
            :func:`select`.
        selected: :func:`select`'s output for ``weights``.
        filters, weights: as given to :func:`select`.

    Returns:
        ``{"candidates_per_tuple": {"min", "max"}, "tuples_with_choice": int,
        "changed_vs_equal_weights": int, "warnings": [str]}``: how many (i, g') tuples have
        more than one candidate, and for how many of them ``weights`` pick another candidate
        than equal weights. A warning when no tuple has a choice (m = 1: no weights can change
        the set) or when weights other than equal ones select the same set.
    """
    keys = list(keys)
    per = scores.groupby(keys).size()
    with_choice = int((per > 1).sum())
    equal = select(scores, filters, [1.0] * len(filters), keys=keys)
    a = selected.set_index(keys)["j"].sort_index()
    b = equal.set_index(keys)["j"].reindex(a.index)
    changed = int((a != b).sum())
    warnings = []
    if with_choice == 0:
        warnings.append("every (image, group) has one candidate (generate.m = 1): the filter "
                        "weights cannot change the selected set")
    elif changed == 0 and [float(w) for w in weights] != [1.0] * len(filters):
        warnings.append(f"weights {list(weights)} select the same set as equal weights "
                        f"({with_choice} tuples with a choice)")
    return {"candidates_per_tuple": {"min": int(per.min()) if len(per) else 0,
                                     "max": int(per.max()) if len(per) else 0},
            "tuples_with_choice": with_choice, "changed_vs_equal_weights": changed,
            "warnings": warnings}
