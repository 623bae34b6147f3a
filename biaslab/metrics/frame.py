"""Any metric by group, with a bootstrap interval per group: fairlearn's ``MetricFrame`` idea
(Weerts et al., "Fairlearn: Assessing and Improving Fairness of AI Systems", JMLR 24, 2023)
for the metrics of this library and for a user's own.

:func:`by_group` splits the rows (images, captions) by one or more sensitive features, and
optionally by control features within which the groups are compared; several sensitive
features give their intersections (``gender`` x ``skin``: ``female_dark``, ...) with no extra
code. Each group's value is the metric on its rows, its interval a percentile bootstrap over
those rows (:func:`biaslab.runtime.stats.bootstrap`, rows resampled together, seeded), so a
group's uncertainty is its own sample's. :func:`gaps` gives, per control cell, the largest minus
the smallest group value.

A metric is any ``f(**columns) -> float`` (None or NaN where undefined): sklearn's
``accuracy_score(y_true, y_pred)``, or a closure over this library's metrics, e.g.
``lambda captions, gender: error(dict(enumerate(captions)), dict(enumerate(gender)))``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from biaslab.runtime import stats

#: the columns of :func:`by_group`'s table
COLUMNS = ("value", "lo", "hi", "ci95", "n", "n_undefined")


def _features(x: Any, what: str, n: int) -> pd.DataFrame:
    """``x`` (one array, or a mapping / DataFrame of named arrays) as a DataFrame of n rows."""
    if isinstance(x, pd.DataFrame):
        df = x.reset_index(drop=True)
    elif isinstance(x, Mapping):
        df = pd.DataFrame({str(k): list(v) for k, v in x.items()})
    else:
        df = pd.DataFrame({what: list(x)})
    if df.shape[1] == 0:
        raise ValueError(f"{what}: no feature given")
    if len(df) != n:
        raise ValueError(f"{what} has {len(df)} rows, the metric's columns {n}")
    if df.isna().any().any():
        raise ValueError(f"{what}: missing values (give every row a group, or drop the row)")
    return df


def by_group(metric: Callable[..., Any], *, sensitive: Any, control: Any = None,
             n_boot: int = stats.N_BOOT, seed: int = 0, level: float = stats.LEVEL,
             **columns: Sequence[Any]) -> pd.DataFrame:
    """``metric`` on the rows of each group, with a bootstrap interval.

    Args:
        metric: ``f(**columns) -> float`` (None / NaN / inf where undefined on a subset).
        sensitive: the group of each row: one array (its name in the index is
            ``"sensitive"``), or a mapping / DataFrame of named arrays, whose combinations
            (intersections) are the groups.
        control: as ``sensitive``, or None: the groups are formed within each of its levels.
        n_boot: bootstrap resamples per group (>= 100).
        seed: resampling seed; group k of the table uses ``seed + k`` (deterministic).
        level: the interval's confidence level.
        **columns: the metric's keyword arguments, each an array of the same length n.

    Returns:
        a DataFrame indexed by the control then the sensitive features (a MultiIndex when
        there are several), groups in sorted order, with :data:`COLUMNS`: ``value`` the
        metric on the group's rows, ``lo`` / ``hi`` the percentile interval, ``ci95`` the
        largest distance of a bound from ``value``, ``n`` the rows, ``n_undefined`` the
        resamples on which the metric was undefined (a group of one row, or one where more than
        half are undefined, has no interval: NaN).

    Raises:
        ValueError: no columns, columns or features of different lengths, a missing group
            value, or ``n_boot`` < 100.

    Examples:
        >>> err = lambda y_true, y_pred: float(np.mean(np.asarray(y_true) != np.asarray(y_pred)))
        >>> t = by_group(err, y_true=[1, 1, 0, 0, 1, 0, 1, 1], y_pred=[1, 0, 0, 0, 1, 1, 1, 1],
        ...              sensitive=["f", "f", "f", "f", "m", "m", "m", "m"], n_boot=200)
        >>> t["value"].to_dict(), t["n"].to_dict()
        ({'f': 0.25, 'm': 0.25}, {'f': 4, 'm': 4})
        >>> t2 = by_group(err, y_true=[1, 0, 1, 0], y_pred=[1, 1, 1, 0], n_boot=100,
        ...               sensitive={"gender": ["f", "f", "m", "m"],
        ...                          "skin": ["dark", "light", "dark", "light"]})
        >>> list(t2.index), t2["value"].tolist()
        ([('f', 'dark'), ('f', 'light'), ('m', 'dark'), ('m', 'light')], [0.0, 1.0, 0.0, 0.0])
    """
    if not columns:
        raise ValueError("by_group needs the metric's columns as keyword arguments")
    names = list(columns)
    arrs = [np.asarray(columns[k]) for k in names]
    n = len(arrs[0])
    bad = {k: len(a) for k, a in zip(names, arrs) if len(a) != n}
    if bad:
        raise ValueError(f"the metric's columns differ in length: {names[0]} has {n}, {bad}")
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100, got {n_boot}")
    s = _features(sensitive, "sensitive", n)
    c = _features(control, "control", n) if control is not None else None
    keys = pd.concat([c, s], axis=1) if c is not None else s
    if keys.columns.duplicated().any():
        raise ValueError(f"a control feature has a sensitive feature's name: "
                         f"{list(keys.columns)}")

    def stat(*a):
        return metric(**dict(zip(names, a)))

    rows, index = [], []
    groups = keys.groupby(list(keys.columns), sort=True).indices
    for k, (g, idx) in enumerate(groups.items()):
        b = stats.bootstrap(stat, *[a[idx] for a in arrs], n_boot=n_boot, seed=seed + k,
                            level=level)
        rows.append([b["mean"], b["lo"], b["hi"], b["ci95"], b["n"], b["n_undefined"]])
        index.append(g if isinstance(g, tuple) and len(g) > 1
                     else (g[0] if isinstance(g, tuple) else g))
    out = pd.DataFrame(rows, columns=list(COLUMNS), dtype=object)
    for col in ("value", "lo", "hi", "ci95"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    for col in ("n", "n_undefined"):
        out[col] = out[col].astype(int)
    if keys.shape[1] > 1:
        out.index = pd.MultiIndex.from_tuples(index, names=list(keys.columns))
    else:
        out.index = pd.Index(index, name=keys.columns[0])
    return out


def gaps(table: pd.DataFrame, control: Sequence[str] | None = None) -> pd.DataFrame:
    """The largest minus the smallest group ``value`` of a :func:`by_group` table, overall or
    within each level of the ``control`` index levels, and which groups they are.

    Args:
        table: :func:`by_group`'s output.
        control: its control index level names (None: one gap over every group).

    Returns:
        a DataFrame with ``gap``, ``max_group``, ``min_group`` (one row, or one per control
        level). The gap names its groups after looking, so it describes, it does not test.

    Examples:
        >>> t = pd.DataFrame({"value": [0.1, 0.4, 0.2]}, index=pd.Index(["a", "b", "c"]))
        >>> gaps(t).round(3).to_dict("records")
        [{'gap': 0.3, 'max_group': 'b', 'min_group': 'a'}]
    """
    def one(t: pd.DataFrame) -> dict:
        v = t["value"].astype(float).dropna()
        if v.empty:
            return {"gap": float("nan"), "max_group": None, "min_group": None}
        return {"gap": float(v.max() - v.min()), "max_group": v.idxmax(),
                "min_group": v.idxmin()}
    if not control:
        return pd.DataFrame([one(table)])
    rest = [n for n in table.index.names if n not in control]
    out = {}
    for lvl, t in table.groupby(level=list(control), sort=True):
        t = t.droplevel(list(control)) if rest else t
        out[lvl if not isinstance(lvl, tuple) or len(lvl) > 1 else lvl[0]] = one(t)
    return pd.DataFrame.from_dict(out, orient="index")


__all__ = ["COLUMNS", "by_group", "gaps"]
