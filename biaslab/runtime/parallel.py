"""Run independent per-seed jobs of one stage on several worker processes.

The training stages (`train_classifier`, `train_method`, `train_captioner`) are one DVC stage per
training set, each training every seed in ``classifier.seeds`` / ``captioner.seeds``. The
models are small, so one torch thread per model is fastest and two seeds at once keep both
cores of a 2-core machine busy (benchmarks/results/train_workers.json: 1 vs 2 workers).

Workers are forked after the parent has loaded the shared inputs (features, manifests), so
each worker starts in milliseconds instead of re-importing torch (~5 s); every process runs
torch with one intra-op thread, which is what makes fork safe (no OpenMP pool exists to be
inherited). Results are identical to running the seeds one after another: each job is fully
determined by its own seed.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_JOB: Callable | None = None     # the job of the current pool (inherited by forked workers)
_IN_WORKER = False               # True inside a forked worker (of map_jobs or biaslab.runtime.executor)


def in_worker() -> bool:
    """True inside a worker process forked by :func:`map_jobs` or by the local executor
    (``biaslab.runtime.executor``): nested pools would oversubscribe the cores, so callers run
    in process there."""
    return _IN_WORKER


def mark_worker() -> None:
    """Mark this (forked) process as a worker with one torch thread."""
    global _IN_WORKER
    _IN_WORKER = True
    import torch
    torch.set_num_threads(1)


def _tolerate_shared_dvclive_signal() -> None:
    """DVCLive keeps one VS Code signal file per repository
    (``.dvc/tmp/exps/run/DVCLIVE_STEP_COMPLETED``): every ``Live`` writes it on each step and
    removes it in ``end()`` with "exists, then remove". Forked workers that end their ``Live``
    at the same moment race on it, and the loser raised ``FileNotFoundError`` (CI's coco-mini
    run, ``train_method@group_dro``). In a worker the removal tolerates a file another worker
    removed first; nothing else changes (the file only signals VS Code)."""
    live = sys.modules.get("dvclive.live")
    if live is None or getattr(live.cleanup_dvclive_step_completed, "_biaslab", False):
        return
    cleanup = live.cleanup_dvclive_step_completed

    def tolerant():
        try:
            cleanup()
        except FileNotFoundError:
            pass
    tolerant._biaslab = True
    live.cleanup_dvclive_step_completed = tolerant


def _run(arg):
    mark_worker()
    _tolerate_shared_dvclive_signal()
    return _JOB(arg)


def resolve_workers(workers: int | None, n_jobs: int) -> int:
    """Worker processes for ``n_jobs`` jobs: ``workers`` (``None`` or ``<= 0``: the number of
    CPUs this process may use), never more than ``n_jobs``, at least 1."""
    if workers is None or int(workers) <= 0:
        try:
            workers = len(os.sched_getaffinity(0))
        except AttributeError:      # not on Linux
            workers = os.cpu_count() or 1
    return max(1, min(int(workers), int(n_jobs)))


def map_jobs(job: Callable[[T], R], args: Sequence[T], workers: int | None = 1,
             on_done: Callable[[int, R], None] | None = None) -> list[R]:
    """``[job(a) for a in args]``, on up to ``workers`` forked processes.

    ``on_done(i, result)`` is called in this (the parent) process when job ``i`` has finished,
    in completion order: how a progress bar or a partial-results file of the parent follows
    forked workers.

    Only the results must be picklable (they travel back by pickle); ``job`` itself is
    inherited through fork, so it may be a closure over large arrays or loaded models. One worker (or one job, or a platform without ``fork``) runs
    in this process. Results come back in the order of ``args``; the first job that raises
    re-raises its exception here after the other workers stop.
    """
    global _JOB
    n = resolve_workers(workers, len(args))
    if n <= 1 or "fork" not in mp.get_all_start_methods():
        out = []
        for i, a in enumerate(args):
            out.append(job(a))
            if on_done is not None:
                on_done(i, out[-1])
        return out
    sys.stdout.flush()
    sys.stderr.flush()
    _JOB = job
    try:
        with ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("fork")) as ex:
            futures = [ex.submit(_run, a) for a in args]
            index = {f: i for i, f in enumerate(futures)}
            for f in as_completed(futures):
                r = f.result()                # the first failure raises here
                if on_done is not None:
                    on_done(index[f], r)
            return [f.result() for f in futures]
    finally:
        _JOB = None
