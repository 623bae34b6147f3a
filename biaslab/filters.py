"""Filters for inpainted candidates and weighted rank selection (paper 000 sec. 2.3,
Eqs. 2 and 4-6), and the GenSynth KNN filter (paper 001 sec. 4.2, Eqs. 1-2).

Score conventions: every filter score is "higher is better" (the paper ranks in descending
order, rank 1 = best).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from PIL import Image

#: Filters of paper 000 in the order `filters.weights` refers to them.
FILTERS = ("prompt_adherence", "object_consistency", "color_fidelity")


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
    d = downsample14(candidate, size) - downsample14(original, size)
    norm = float(np.sqrt((d ** 2).sum()))
    return float("inf") if norm == 0 else 1.0 / norm


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
    accept = P_R > tau_R and P_G > tau_G.

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


def select(scores: pd.DataFrame, filters: Sequence[str], weights: Sequence[float],
           keys: Sequence[str] = ("image_id", "group")) -> pd.DataFrame:
    """Weighted rank selection (paper 000 Eq. 2): for each tuple (i, g'),
    j* = argmin_j sum_k c_k * r(s_k^(i,j,g')), with r the rank of the score among the m
    candidates of (i, g') in DESCENDING order (rank 1 = highest score = least biased).

    Ties in a filter's score share the lowest rank of the tie (``method="min"``), so equal
    scores never favour one candidate; ties in the weighted rank sum are broken by the smaller
    candidate index ``j`` (deterministic). A weight of 0 removes a filter; NaN scores rank last.

    Args:
        scores: one row per candidate with columns ``keys``, ``j`` and one column per filter.
        filters: the filter columns, aligned with ``weights``.
        weights: c_k (real numbers).

    Returns:
        The selected rows (one per (i, g')) with extra columns ``rank_<filter>`` and
        ``rank_sum``, sorted by ``keys``.

    Raises:
        ValueError: weights and filters differ in length, or a filter column is missing.
    """
    if len(filters) != len(weights):
        raise ValueError(f"{len(weights)} weights for {len(filters)} filters {list(filters)}")
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
    df = df.sort_values(keys + ["rank_sum", "j"], kind="stable")
    return df.groupby(keys, sort=True).head(1).sort_values(keys, ignore_index=True)
