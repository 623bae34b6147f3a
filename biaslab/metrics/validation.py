"""Input checks shared by the metrics: each raises ``ValueError`` with a message that names the
argument and the problem, before any number is computed."""
from __future__ import annotations

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
