"""Input checks of the metrics, in one module: each raises ``ValueError`` (``TypeError`` for a
container of the wrong kind) with a message that names the argument and the problem, before any
number is computed."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def as_binary_2d(x, name: str) -> np.ndarray:
    """``x`` as a float (n, k) array of 0/1 (bool accepted).

    Raises:
        ValueError: ``x`` is not 2-D, or holds a value other than 0 and 1.
    """
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n, k) array, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr.astype(float)
    arr = arr.astype(float)
    if not np.isin(arr, (0.0, 1.0)).all():
        raise ValueError(f"{name} must be binary (0/1 or bool)")
    return arr


def check_rows(*named) -> None:
    """``named``: (name, array) pairs that must have the same, non-zero number of rows.

    Raises:
        ValueError: the row counts differ (naming each array's), or are 0.
    """
    n = {a.shape[0] for _, a in named}
    if len(n) != 1:
        raise ValueError("arrays differ in number of rows: "
                         + ", ".join(f"{k}={a.shape[0]}" for k, a in named))
    if n == {0}:
        raise ValueError("arrays have no rows")


def safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den elementwise with 0 where den == 0 (empty conditioning set)."""
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=np.broadcast_to(den, out.shape) > 0)
    return out


def aligned_captions(captions, genders) -> tuple[list[str], list | None]:
    """Captions and genders as parallel lists: sequences by position, mappings by key
    (Ratio, Error).

    Args:
        captions: a sequence of captions, or a mapping image id -> caption.
        genders: None, or a container of the same kind (a mapping with every caption key, or a
            sequence of the same length).

    Raises:
        TypeError: one string for ``captions``, or containers of different kinds.
        ValueError: a caption key without a gender, or sequences of different lengths.
    """
    if isinstance(captions, Mapping):
        keys = list(captions)
        caps = [captions[k] for k in keys]
        if genders is None:
            return caps, None
        if not isinstance(genders, Mapping):
            raise TypeError("captions is a mapping, so genders must be a mapping (image id -> "
                            "gender) or None")
        missing = [k for k in keys if k not in genders]
        if missing:
            raise ValueError(f"{len(missing)} caption keys have no gender entry, e.g. "
                             f"{missing[:3]!r}")
        return caps, [genders[k] for k in keys]
    if isinstance(captions, str):
        raise TypeError("captions must be a sequence or mapping of strings, not one string")
    caps = list(captions)
    if genders is None:
        return caps, None
    if isinstance(genders, Mapping):
        raise TypeError("captions is a sequence, so genders must be a sequence or None")
    gens = list(genders)
    if len(gens) != len(caps):
        raise ValueError(f"captions and genders differ in length: {len(caps)} != {len(gens)}")
    return caps, gens


def object_pair(gt, pred, genders, name: str) -> tuple[np.ndarray, np.ndarray, list]:
    """Ground-truth and predicted object matrices of the same (n, |O|) shape, without NaN, and
    n group labels (Leakage's inputs), as float32 arrays and a list; ``name`` ("test",
    "train") starts each message.

    Raises:
        ValueError: shapes that differ or are not 2-D, a label count other than n, NaN.
    """
    X_d = np.asarray(gt, dtype=np.float32)
    X_m = np.asarray(pred, dtype=np.float32)
    if X_d.ndim != 2 or X_m.shape != X_d.shape:
        raise ValueError(f"{name}: ground-truth and predicted objects must be 2-D of equal "
                         f"shape, got {X_d.shape} and {X_m.shape}")
    gen = list(genders)
    if len(gen) != X_d.shape[0]:
        raise ValueError(f"{name}: genders has {len(gen)} entries for {X_d.shape[0]} samples")
    if np.isnan(X_d).any() or np.isnan(X_m).any():
        raise ValueError(f"{name}: object arrays contain NaN")
    return X_d, X_m, gen


def check_k(k: int) -> None:
    """A retrieval cut-off K: a positive int (Bias@K, MaxSkew@K, Recall@K).

    Raises:
        ValueError: anything else.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")


def as_queries(retrieved) -> list[list]:
    """Per-query label lists from a sequence of rank-ordered sequences (retrieval metrics).

    Raises:
        TypeError: a string or mapping for the whole, or a string for one query.
        ValueError: no queries.
    """
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
