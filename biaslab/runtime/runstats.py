"""Run statistics (timings, throughput, cache counters) kept OUT of ``metrics/``.

``metrics/*.json`` hold results only, so ``dvc metrics diff`` and ``dvc exp show`` compare what
an experiment changed, not how fast the machine was or how warm a cache was.
A stage splits its dict with :func:`split` and hands the run part to :func:`publish`, which
prints it (one line, stage name first) and writes ``benchmarks/runs/<name>.json`` (git-ignored:
per machine, last run only; ``benchmarks/stage_times.py`` records whole-stage wall times).
Stages with a DVCLive run put the same numbers into the DVCLive summary instead
(``live.summary``), which DVC does not read as metrics either.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from biaslab.runtime.io import write_json

#: Where :func:`publish` writes (relative to the repository root / working directory).
RUNS_DIR = Path("benchmarks/runs")

#: A key is a run statistic when it matches: wall/CPU time (``seconds``, ``train_seconds``,
#: ``seconds_computing``), throughput (``images_per_s``, ``throughput``) or a cache counter
#: (``cached``, ``encoded_now``, ``..._cached``).
RUN_KEY = re.compile(r"(^|_)seconds($|_)|_per_s($|_)|throughput|^cached$|_cached$|^cached_"
                     r"|encoded_now", re.IGNORECASE)


def is_run_key(key: str) -> bool:
    """True when ``key`` names a timing, throughput or cache counter (:data:`RUN_KEY`)."""
    return bool(RUN_KEY.search(str(key)))


def split(metrics: Mapping[str, Any], extra: Iterable[str] = ()) -> tuple[dict, dict]:
    """Separate run statistics from results, at any depth of nested dicts.

    Args:
        metrics: a stage's metrics dict (JSON-like; lists are kept whole in the results).
        extra: further key names (at any depth) to treat as run statistics, for counters whose
            name does not say so (e.g. ``computed`` beside ``cached`` in stage features).

    Returns:
        ``(results, run)``: two new dicts with the same nesting; a sub-dict whose every key is a
        run statistic moves whole to ``run``, and empty sub-dicts are dropped from both.
        A key matching :data:`RUN_KEY` moves with its whole value (``{"seconds": {...}}``).
    """
    extra = set(extra)
    res: dict = {}
    run: dict = {}
    for k, v in metrics.items():
        if is_run_key(k) or k in extra:
            run[k] = v
        elif isinstance(v, Mapping):
            r, t = split(v, extra)
            if r or not t:
                res[k] = r
            if t:
                run[k] = t
        else:
            res[k] = v
    return res, run


def publish(name: str, run: Mapping[str, Any], root: str | Path | None = None) -> Path | None:
    """Print run statistics and write them to ``<root>/<name>.json`` (root: :data:`RUNS_DIR`).

    ``name`` may contain ``/`` (``train_captioner/original-0``). Nothing is written for an empty
    ``run``. Returns the path written (or None). The write is atomic; a failure to write (e.g. a
    read-only checkout) is reported and ignored: run statistics never fail a stage.
    """
    if not run:
        return None
    print(f"{name} run statistics: {json.dumps(run, sort_keys=True, default=str)}")
    path = Path(root if root is not None else RUNS_DIR) / f"{name}.json"
    try:
        write_json(path, dict(run))
    except OSError as e:  # pragma: no cover - environment-dependent
        print(f"{name}: could not write {path}: {e}")
        return None
    return path
