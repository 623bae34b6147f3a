"""Where per-shard work runs: on this machine (``executor.name: local``, the default: in this
process, or on ``workers`` forked processes) or on a Ray cluster (``executor.name: ray``).
Used by the stages ``features``, ``generate`` and ``score`` through one call,
:func:`run_shards`.

Contract (what makes the two executors interchangeable): a *shard* is a picklable description
of one unit of work (a generate shard's work items, a chunk of images to encode); the stage
gives ``init() -> state`` (loads the model / backend; called once per worker) and
``fn(state, shard) -> result`` (pure: the result depends only on ``state``'s parameters and the
shard). :func:`run_shards` yields the results **in shard order** and the *driver* (the stage
process) writes every output, so the bytes a stage writes do not depend on the executor, on
the number of workers or on which worker computed what. DVC still owns the DAG and the cache:
a stage submits its shards and waits.

Local specifics: ``workers: 1`` runs every shard in this process, in order, with one ``init``
(the code path the stages ran before executors existed). ``workers: N > 1`` forks N worker
processes (``multiprocessing`` ``fork``: they inherit the imported modules and any model the
stage already loaded, so a worker starts in milliseconds); each runs torch with one intra-op
thread (the fastest setting on 2 shared cores: benchmarks/results/features.json) and calls
``init`` once, at its first shard. ``null`` = the CPUs this process may use. A process that
has already initialised CUDA cannot fork usable CUDA workers, and a process that is itself a
forked worker (``biaslab.runtime.parallel``) would oversubscribe the cores: both run in process.
The default ``workers: 2`` was measured faster than 1 (benchmarks/results/ray_speedup.json,
``local_speedup_2v1``: features 2.06x, generate 1.74x, byte-identical).

Ray specifics (``ray`` is imported lazily, only for ``name: ray``; it is the optional extra
``pip install -e .[ray]``, pinned in pyproject.toml):

* ``address``: ``null`` starts a private local cluster for the stage (``ray.init(num_cpus=...,
  include_dashboard=False)`` with ``RAY_enable_metrics_collection=0``: on a loaded 2-core
  machine the metrics agent otherwise times the raylet out), on loopback, and stops it
  afterwards (once per stage when the stage runs inside :func:`session`); ``auto``
  or ``ray://host:port`` connects to a running cluster (whose nodes must have biaslab
  installed and see the data under the same path: workers ``chdir`` to the driver's working
  directory when it exists there, because the pipeline's paths are relative). An already
  initialised Ray (e.g. a test fixture's cluster) is used as it is and left running.
* one actor per worker (``workers``; null = the cluster's CPUs // ``num_cpus_per_task``, at
  most the number of shards), each reserving ``num_cpus_per_task`` CPUs and
  ``num_gpus_per_task`` GPUs (Ray sets ``CUDA_VISIBLE_DEVICES`` for it); ``init`` runs once
  per actor, at its first shard.
* a worker that dies (killed, OOM, node lost) is restarted up to ``max_retries`` times and its
  unfinished shard re-submitted (Ray ``max_restarts`` / ``max_task_retries``); the driver takes
  exactly one result per shard, so every shard is in the output exactly once.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

S = TypeVar("S")
R = TypeVar("R")

#: Executor names (params ``executor.name``).
NAMES = ("local", "ray")
#: Default of the local executor's ``workers`` (conf/executor/local.yaml).
LOCAL_DEFAULTS = {"workers": 2}
#: Defaults of the ray executor's params (conf/executor/ray.yaml).
RAY_DEFAULTS = {"address": None, "num_cpus": None, "workers": None, "num_cpus_per_task": 1,
                "num_gpus_per_task": 0, "max_retries": 3}
_REPO = str(Path(__file__).resolve().parents[2])


def resolve(params: Mapping | None) -> dict:
    """Validated executor params: ``None`` / ``{}`` -> ``{"name": "local", "workers": 1}`` (a
    caller that passes no executor keeps the in-process path); ``local`` with params gets
    :data:`LOCAL_DEFAULTS`, ``ray`` gets :data:`RAY_DEFAULTS` filled in.

    Raises:
        ValueError: unknown ``executor.name`` or a bad ray setting (naming the param)."""
    p = dict(params or {})
    name = str(p.get("name", "local"))
    if name not in NAMES:
        raise ValueError(f"params executor.name: unknown executor {name!r} (local | ray)")
    if name == "local":
        w = p.get("workers", LOCAL_DEFAULTS["workers"]) if params else 1
        if w is not None and int(w) < 1:
            raise ValueError(f"params executor.workers must be >= 1 or null, got {w!r}")
        return {"name": "local", "workers": None if w is None else int(w)}
    out = {"name": "ray", **RAY_DEFAULTS, **{k: v for k, v in p.items() if k != "name"}}
    for k in ("num_cpus_per_task", "num_gpus_per_task"):
        if out[k] is None or float(out[k]) < 0:
            raise ValueError(f"params executor.{k} must be >= 0, got {out[k]!r}")
    for k in ("workers", "num_cpus"):
        if out[k] is not None and int(out[k]) < 1:
            raise ValueError(f"params executor.{k} must be >= 1 or null, got {out[k]!r}")
    if int(out["max_retries"]) < 0:
        raise ValueError(f"params executor.max_retries must be >= 0, got "
                         f"{out['max_retries']!r}")
    a = out["address"]
    if a is not None and not (a == "auto" or str(a).startswith("ray://")
                              or ":" in str(a)):
        raise ValueError(f"params executor.address must be null, 'auto', 'ray://host:port' or "
                         f"'host:port', got {a!r}")
    return out


def is_ray(params: Mapping | None) -> bool:
    """True when ``params`` (the ``executor`` section) selects Ray."""
    return resolve(params)["name"] == "ray"


def in_process(params: Mapping | None, n_shards: int | None = None) -> bool:
    """True when :func:`run_shards` runs the shards in this process (local executor with one
    worker, or at most one shard): then ``init``'s state and side effects of ``fn`` are the
    caller's own. False for forked local workers and for Ray."""
    p = resolve(params)
    if p["name"] == "ray":
        return False
    return _local_workers(p, n_shards) <= 1


def _local_workers(p: Mapping, n_shards: int | None) -> int:
    from biaslab.runtime.parallel import in_worker, resolve_workers
    n = resolve_workers(p.get("workers"), n_shards if n_shards is not None else 1 << 30)
    if n > 1 and (not _can_fork() or _cuda_initialised() or in_worker()):
        return 1
    return n


def _can_fork() -> bool:
    import multiprocessing as mp
    return "fork" in mp.get_all_start_methods()


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # pragma: no cover - a torch without cuda module
        return False


def import_ray():
    """The ``ray`` module.

    Raises:
        ImportError: ray is not installed; the message names ``executor.name`` and the extra
        to install."""
    try:
        import ray
    except ImportError as e:
        raise ImportError("params executor.name is 'ray' but the ray package is not installed: "
                          "pip install -e '.[ray]' (or run with -S executor=local)") from e
    return ray


def run_shards(fn: Callable[[S, Any], R], shards: Sequence, executor: Mapping | None = None,
               *, init: Callable[[], S] | None = None) -> Iterator[R]:
    """Yield ``fn(state, shard)`` for every shard, in the order of ``shards``.

    Args:
        fn: the per-shard work; with Ray it is pickled (cloudpickle) to the workers, so it and
            its results must be picklable, and it must not rely on side effects in the driver
            (write outputs from the yielded results instead).
        shards: picklable shard descriptions.
        executor: the params ``executor`` section (None = local).
        init: ``() -> state`` (model / backend loading), called once per worker before its
            first shard and never when there is no shard; None gives ``state = None``.

    Local executor: one worker: in this process, in order, ``init`` once -- exactly the code
    path the stages ran before executors existed; ``workers`` > 1: forked processes, ``init``
    once per process, results yielded in shard order as they complete. Ray: see the module
    docstring. Both multi-worker paths pickle the results back, so ``fn``'s side effects in
    a worker are lost: write outputs from the yielded results.

    Raises:
        ImportError: Ray selected but not installed (:func:`import_ray`).
        RuntimeError: a Ray worker died more often than ``max_retries``.
        Whatever ``fn`` or ``init`` raises (a Ray task error is re-raised as the original
        exception type when Ray can, else as ``RuntimeError``).
    """
    p = resolve(executor)
    shards = list(shards)
    if not shards:
        return iter(())
    if p["name"] == "local":
        n = _local_workers(p, len(shards))
        return _run_local(fn, shards, init) if n <= 1 else _run_forked(fn, shards, init, n)
    import_ray()                  # fail here, naming the param, not at the first result
    return _run_ray(fn, shards, init, p)


def _run_local(fn, shards, init):
    state = init() if init is not None else None
    for s in shards:
        yield fn(state, s)


_FORKED: dict = {}        # the pool's (fn, init), inherited by forked workers; their state


def _forked_init() -> None:
    from biaslab.runtime.parallel import mark_worker
    mark_worker()                    # N workers x 1 thread: see the module docstring
    _FORKED["ready"] = False


def _forked_run(shard):
    if not _FORKED.get("ready"):
        init = _FORKED["init"]
        _FORKED["state"] = init() if init is not None else None
        _FORKED["ready"] = True
    return _FORKED["fn"](_FORKED["state"], shard)


def _run_forked(fn, shards, init, n):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    sys.stdout.flush()
    sys.stderr.flush()
    _FORKED.clear()
    _FORKED.update(fn=fn, init=init)
    try:
        with ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("fork"),
                                 initializer=_forked_init) as pool:
            futures = [pool.submit(_forked_run, s) for s in shards]
            try:
                for f in futures:             # shard order; later ones finish meanwhile
                    yield f.result()
            finally:
                for f in futures:
                    f.cancel()
    finally:
        _FORKED.clear()


class _Worker:
    """Ray actor body: ``init`` once (lazily), then ``fn(state, shard)`` per call."""

    def __init__(self, fn, init, cwd: str, path: list[str]):
        for p in reversed(path):
            if p not in sys.path:
                sys.path.insert(0, p)
        if os.path.isdir(cwd):
            os.chdir(cwd)
        self.fn, self.init, self.state, self.ready = fn, init, None, False

    def run(self, shard):
        if not self.ready:
            self.state = self.init() if self.init is not None else None
            self.ready = True
        return self.fn(self.state, shard)


def connect(p: Mapping) -> bool:
    """Initialise Ray for executor params ``p`` unless it already is. Returns True when this
    call initialised it (the caller then shuts it down)."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    # the mode's numeric paths (biaslab.runtime.numerics) on every worker, also on a cluster
    # whose workers were started from another shell; BIASLAB_NUMERICS travels with them
    from biaslab.runtime import numerics
    num_env = {**numerics.env(), "BIASLAB_NUMERICS": numerics.mode()}
    env = {"PYTHONPATH": os.pathsep.join([_REPO, *filter(None, [os.environ.get("PYTHONPATH")])]),
           **num_env}
    if p.get("address") is None:
        os.environ.setdefault("RAY_enable_metrics_collection", "0")
        kw = {"num_cpus": int(p["num_cpus"])} if p.get("num_cpus") else {}
        # a private head on loopback: nothing listens beyond this machine
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": env}, _node_ip_address="127.0.0.1", **kw)
    else:
        ray.init(address=str(p["address"]), log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": num_env})
    return True


_SESSION: dict = {"depth": 0, "owned": False}


@contextlib.contextmanager
def session(params: Mapping | None):
    """For a whole stage: the first :func:`run_shards` inside that needs Ray connects it (a
    local cluster starts then, not when everything is cached) and every later one reuses it;
    what was started stops at exit. Yields the resolved params. Local: does nothing."""
    p = resolve(params)
    _SESSION["depth"] += 1
    try:
        yield p
    finally:
        _SESSION["depth"] -= 1
        if _SESSION["depth"] == 0 and _SESSION["owned"]:
            _SESSION["owned"] = False
            import_ray().shutdown()


def _acquire(p: Mapping) -> bool:
    """Connect Ray for one :func:`run_shards`; True when that call must shut it down (it
    started it outside any :func:`session`; inside one, the session stops it)."""
    owned = connect(p)
    if owned and _SESSION["depth"]:
        _SESSION["owned"], owned = True, False
    return owned


def n_workers(p: Mapping, n_shards: int) -> int:
    """Actors to start: ``workers``, else the cluster's CPUs // ``num_cpus_per_task`` (GPUs //
    ``num_gpus_per_task`` when GPUs are asked for), at most ``n_shards``, at least 1."""
    ray = import_ray()
    if p.get("workers"):
        n = int(p["workers"])
    else:
        res = ray.cluster_resources()
        per_cpu = float(p["num_cpus_per_task"])
        n = int(res.get("CPU", 1) // per_cpu) if per_cpu > 0 else n_shards
        if float(p["num_gpus_per_task"]) > 0:
            n = min(n, int(res.get("GPU", 0) // float(p["num_gpus_per_task"])))
    return max(1, min(n, n_shards))


def _run_ray(fn, shards, init, p):
    ray = import_ray()
    owned = _acquire(p)
    retries = int(p["max_retries"])
    actor_cls = ray.remote(_Worker).options(
        num_cpus=float(p["num_cpus_per_task"]), num_gpus=float(p["num_gpus_per_task"]),
        max_restarts=retries, max_task_retries=retries)
    actors = []
    try:
        fn_ref, init_ref = ray.put(fn), ray.put(init)
        actors = [actor_cls.remote(fn_ref, init_ref, os.getcwd(), list(sys.path))
                  for _ in range(n_workers(p, len(shards)))]
        pending: dict = {}            # ObjectRef -> (shard index, actor)
        done: dict[int, Any] = {}
        nxt, emit = 0, 0
        free = list(actors)
        while emit < len(shards):
            while free and nxt < len(shards):
                a = free.pop(0)
                pending[a.run.remote(shards[nxt])] = (nxt, a)
                nxt += 1
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i, a = pending.pop(ref)
                try:
                    done[i] = ray.get(ref)
                except ray.exceptions.RayActorError as e:
                    raise RuntimeError(f"executor ray: a worker died more than "
                                       f"executor.max_retries={retries} times (shard {i}): "
                                       f"{e}") from e
                except ray.exceptions.RayTaskError as e:
                    cause = e.as_instanceof_cause() if hasattr(e, "as_instanceof_cause") else e
                    raise cause from None
                free.append(a)
            while emit in done:
                yield done.pop(emit)
                emit += 1
    finally:
        for a in actors:
            try:
                ray.kill(a)
            except Exception:  # pragma: no cover - already gone
                pass
        if owned:
            ray.shutdown()


__all__ = ["run_shards", "session", "resolve", "is_ray", "in_process", "import_ray", "connect",
           "n_workers", "NAMES", "LOCAL_DEFAULTS", "RAY_DEFAULTS"]
