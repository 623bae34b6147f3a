"""Compare a fresh run's ``dvc.lock`` with a reference one: every stage whose
inputs (deps' md5 and params) equal the reference's must have byte-identical outs.

Used by the end-to-end test (fresh ``dvc repro`` against the *committed* lock, read from git so
that a ``dvc repro`` in the working tree cannot replace the reference) and by
``scripts/machine_profiles.py`` (the whole default under simulated machines).
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterable, Mapping

import yaml


def stages(text_or_path: str | Path) -> dict:
    """``{stage: entry}`` of a dvc.lock given as its text or a path to it.

    Raises:
        ValueError: the text is not a dvc.lock (no ``stages`` mapping)."""
    text = Path(text_or_path).read_text() if isinstance(text_or_path, Path) else text_or_path
    d = yaml.safe_load(text)
    if not isinstance(d, dict) or not isinstance(d.get("stages"), dict):
        raise ValueError("not a dvc.lock: no 'stages' mapping")
    return d["stages"]


def committed(repo: str | Path, rev: str = "HEAD", path: str = "dvc.lock") -> dict:
    """The stages of the lock file ``path`` (relative to the repository root; e.g.
    ``published/dvc.lock``) as committed at ``rev`` in the git repository ``repo``.

    Raises:
        FileNotFoundError: ``rev`` has no such file (or ``repo`` is not a git repository)."""
    r = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=repo, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise FileNotFoundError(f"{repo}: no {path} at {rev}: {r.stderr.strip()}")
    return stages(r.stdout)


def drop(params, ignore: frozenset):
    """``params`` without the keys whose last dotted part is in ``ignore`` (recursively)."""
    if isinstance(params, Mapping):
        return {k: drop(v, ignore) for k, v in params.items()
                if str(k).split(".")[-1] not in ignore}
    return params


def compare(fresh: Mapping, reference: Mapping, ignore_params: Iterable[str] = ()) -> dict:
    """Outs of ``fresh`` that differ from ``reference`` with identical inputs.

    Args:
        fresh, reference: ``{stage: lock entry}`` (:func:`stages`).
        ignore_params: parameter names (last key, at any depth) left out of the inputs, e.g.
            ``workers``: a setting that by contract never changes an out.

    Returns:
        ``{"compared": [stage], "skipped": [stage], "differ": ["stage: path"]}``: stages
        compared (same deps md5 and params), stages skipped (new, or other inputs) and the outs
        whose md5 differ (an out missing on one side counts as differing).
    """
    ignore = frozenset(ignore_params)

    def inputs(st):
        return ({d["path"]: d.get("md5") for d in st.get("deps", [])},
                drop(st.get("params") or {}, ignore))

    out = {"compared": [], "skipped": [], "differ": []}
    for name, st in fresh.items():
        old = reference.get(name)
        if old is None or inputs(st) != inputs(old):
            out["skipped"].append(name)
            continue
        out["compared"].append(name)
        before = {o["path"]: o.get("md5") for o in old.get("outs", [])}
        after = {o["path"]: o.get("md5") for o in st.get("outs", [])}
        for p in sorted(set(before) | set(after)):
            if before.get(p) != after.get(p):
                out["differ"].append(f"{name}: {p}")
    return out
