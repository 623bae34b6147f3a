"""CPU numeric paths: which float paths every stage, forked worker, Ray task and test inherits,
set in one place.

Why. A float result depends on the order of its additions and on the instructions that
compute it, and every numeric library here picks both from the machine it runs on. Three
modes (``BIASLAB_NUMERICS``), measured on this project's own workloads
(``scripts/numerics_fingerprint.py``; costs in ``benchmarks/results/numerics.json``):

``standard`` (the default)
    The cheap pins: NumPy's baseline dispatch, OpenBLAS's ``Haswell`` kernels on one thread,
    OpenCV's baseline dispatch without IPP, one thread per library unless a stage sets its own
    (``threads`` params), no "dynamic" thread counts, ``PYTHONHASHSEED=0``. They cost little
    (the data stages spend their time in NumPy, PIL and OpenCV's integer paths) and make
    the data stages -- synthesis, labels, split, masks, rendering -- the same bytes on any
    x86-64 CPU with AVX2 + FMA. torch runs at native speed (its own SIMD dispatch, MKL's
    own code path, oneDNN): on one machine its results are the same bytes run after run,
    on another CPU they differ in the last bits. What the project promises across machines
    for them is the same *conclusions*: every verdict, and every number within a tolerance
    far below its noise floor (:mod:`biaslab.runtime.reprocheck`).
``portable``
    Everything above plus torch's portable paths (no SIMD dispatch, MKL's ``COMPATIBLE``
    branch, oneDNN and NNPACK off): training gives the same bits on every x86-64 AVX2 CPU
    the project simulated, at 1.86x the run time of the default pipeline -- and still not
    across CPU vendors (an Intel CPU gave other last bits for every training stage of an
    AMD-made lock).
``native``
    Nothing pinned: every library's own fastest paths, results that match only the same CPU
    and thread counts.

==========================  =====================================  ===========================
library                     what the machine chooses               pinned (mode)
==========================  =====================================  ===========================
NumPy ufuncs (exp, log,     AVX-512 / AVX2 implementations         baseline (x86-64-v2) only:
pow, arctan)                                                       ``NPY_DISABLE_CPU_FEATURES``
                                                                   (standard, portable)
OpenBLAS (numpy, scipy,     kernel per core type; thread count     ``OPENBLAS_CORETYPE=
scikit-learn)               splits dot products                    Haswell``, 1 thread
                                                                   (standard, portable)
OpenCV                      SSE4 / AVX2 / AVX-512 dispatch, IPP    baseline only, IPP off
                                                                   (standard, portable)
thread counts               cores detected (torch, OpenMP, MKL,    1 unless a stage sets its
                            OpenBLAS); MKL/OpenMP "dynamic" may    own (params ``threads``);
                            use fewer threads under load           dynamic off (standard,
                                                                   portable)
PyTorch ATen kernels        SIMD width of reductions, softmax,     ``ATEN_CPU_CAPABILITY=
                            exp (AVX-512 / AVX2 / none)            default`` (portable)
oneDNN (conv, LSTM,         ISA *and* the cache sizes it detects   disabled
linear)                     (blocking)                             (``torch.backends.mkldnn``;
                                                                   portable)
NNPACK (conv, batch >= 16)  its own AVX2 kernels                   disabled (portable)
MKL (torch's BLAS)          code path per ISA and vendor           ``MKL_CBWR=COMPATIBLE``
                                                                   (the SSE2 path; portable)
==========================  =====================================  ===========================

torch's deterministic-algorithms flag is set in ``standard`` and ``portable``, with warnings
only (it matters on a GPU). It is set through the flag itself
(``torch._C._set_deterministic_algorithms``), not ``torch.use_deterministic_algorithms``: that
function imports ``torch._inductor.config`` and with it ``torch._dynamo`` (1.2 s of a 2.6 s
``import torch`` here, in every stage and worker process) only to copy the flag into
inductor's config, which nothing compiles with (no ``torch.compile`` in this project).

Why these levels. NumPy's baseline is what NumPy 2.4 itself requires. OpenBLAS's ``Haswell``
kernels need AVX2 + FMA (every x86-64 server CPU since 2013 / 2015); it is the value this
project's machines already run with (the workplace sets ``OPENBLAS_CORETYPE=Haswell`` on CPUs
where OpenBLAS misdetects the core), and a CPU without AVX2 gets a warning (:func:`pin`).
glibc's libm selects FMA builds of ``exp``, ``log``, ``pow`` on such CPUs, so the same bits
also need the same glibc (the project's Debian 12 image) and library versions
(``requirements.lock``). In ``portable`` ATen's ``default`` and MKL's ``COMPATIBLE`` need only
SSE2.

How it is inherited. :func:`pin` writes the mode's variables into ``os.environ`` before NumPy,
torch or OpenCV load (they read them once, at load), and installs an import hook that
configures torch the moment it is imported. It runs

* at interpreter start-up of every Python in the project's ``.venv``: ``scripts/setup.sh``
  writes ``biaslab_numerics.pth`` into its site-packages, so ``dvc``, each stage, pytest,
  a user's own script and a Ray worker of that venv are pinned before their first import;
* by the ``biaslab`` console script (:mod:`biaslab.runtime.startup`), for an installation
  without that file; a user's own script there calls ``biaslab.runtime.startup.start()``
  first;
* child processes inherit the environment; forked workers inherit the loaded libraries;
  Ray's runtime environment carries :func:`env` (``biaslab.runtime.executor.connect``).

A GPU (paper tier) is outside every mode's guarantee: CUDA kernels differ between GPU models.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
from pathlib import Path
import sys
import warnings

#: The cheap pins of ``standard`` (and ``portable``): the data libraries' float paths, thread
#: counts and string hashing (see the module docstring for each).
ENV_STANDARD: dict[str, str] = {
    "MKL_DYNAMIC": "FALSE",
    "MKL_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "OMP_DYNAMIC": "FALSE",
    "OPENBLAS_CORETYPE": "Haswell",
    "OPENBLAS_NUM_THREADS": "1",
    # everything NumPy 2.4 dispatches above its x86-64-v2 baseline
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "OPENCV_CPU_DISABLE": "SSE4_1,SSE4_2,AVX,FP16,AVX2,AVX512_SKX",
    "OPENCV_IPP": "disabled",
    # str hashes (set / dict order of strings) in every child process: stages, workers
    "PYTHONHASHSEED": "0",
    # deterministic cuBLAS workspaces (paper tier on a GPU; harmless on the CPU)
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
}

#: What ``portable`` adds: torch's machine-independent paths (1.86x the default's run time).
ENV_TORCH: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    # oneDNN is disabled in configure_torch; if a path reaches it anyway, its lowest x86 ISA
    "ONEDNN_MAX_CPU_ISA": "SSE41",
}

#: Every variable a mode may set (the portable set): what a test or a profile clears from the
#: shell before it simulates a machine.
ENV: dict[str, str] = {**ENV_STANDARD, **ENV_TORCH}

#: Environments another x86-64 machine would present, for testing on one machine that the pins
#: neutralise them (tests/test_numerics.py, scripts/machine_profiles.py). Each caps the
#: libraries' own ISA and thread choices as such a CPU would: ``avx512`` is an AVX-512 CPU
#: left to its defaults, ``avx2`` a CPU without AVX-512, ``sse`` one without AVX, ``manycore``
#: an AVX-512 server whose libraries default to 4 threads and OpenBLAS's SkylakeX kernels.
#: Under ``BIASLAB_NUMERICS=native`` they give different bytes (the control).
SIMULATED_MACHINES: dict[str, dict[str, str]] = {
    "avx512": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
             "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
             "OPENCV_CPU_DISABLE": "AVX512_SKX"},
    "sse": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41",
            "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "OPENBLAS_CORETYPE": "Nehalem",
            "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
            "OPENCV_CPU_DISABLE": "AVX,FP16,AVX2,AVX512_SKX"},
    "manycore": {"ATEN_CPU_CAPABILITY": "avx512", "OPENBLAS_CORETYPE": "SkylakeX",
                 "OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4", "OPENBLAS_NUM_THREADS": "4",
                 "MKL_DYNAMIC": "TRUE"},
}

#: ``BIASLAB_NUMERICS`` values; the first is the default.
MODES = ("standard", "portable", "native")

#: Libraries that read :data:`ENV` once, when they load.
_READ_AT_LOAD = ("numpy", "torch", "cv2", "scipy")

_state = {"pinned": False, "late": (), "env": None}


def mode() -> str:
    """``BIASLAB_NUMERICS`` (``standard`` when unset).

    Raises:
        ValueError: a value other than :data:`MODES`."""
    m = os.environ.get("BIASLAB_NUMERICS", MODES[0]).strip().lower() or MODES[0]
    if m not in MODES:
        raise ValueError(f"BIASLAB_NUMERICS={m!r}: expected one of {', '.join(MODES)}")
    return m


def env(m: str | None = None) -> dict[str, str]:
    """The variables mode ``m`` (default: :func:`mode`) pins: :data:`ENV_STANDARD` for
    ``standard``, :data:`ENV` for ``portable``, nothing for ``native``.

    Raises:
        ValueError: an unknown mode."""
    m = mode() if m is None else m
    if m not in MODES:
        raise ValueError(f"numeric mode {m!r}: expected one of {', '.join(MODES)}")
    return {"standard": ENV_STANDARD, "portable": ENV, "native": {}}[m]


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def configure_torch(torch) -> None:
    """Set torch's paths for the mode: deterministic algorithms with warnings (``standard``,
    ``portable``), oneDNN and NNPACK off (``portable``). Called by the import hook right after
    ``import torch``; idempotent."""
    m = mode()
    if m == "native":
        return
    if m == "portable":
        torch.backends.mkldnn.enabled = False
        torch.backends.nnpack.set_flags(False)
    # the flag use_deterministic_algorithms sets, without its import of torch._inductor (module
    # docstring); inductor's copy is set too where something has already imported it
    torch._C._set_deterministic_algorithms(True, warn_only=True)
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.deterministic = True


class _TorchHook(importlib.abc.MetaPathFinder):
    """Runs :func:`configure_torch` once ``torch`` has finished importing."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_configure(module):
            exec_module(module)
            configure_torch(module)
        loader.exec_module = exec_and_configure
        _remove_hook()
        return spec


def _remove_hook() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _TorchHook)]


def pin() -> None:
    """Pin the mode's numeric paths for this process and its children (idempotent).

    Writes :func:`env` into ``os.environ`` (overriding the shell: a machine's own settings are
    what must not leak in) and configures torch now if it is loaded, else when it is imported.
    Libraries already loaded before this call keep the paths they chose at load: they are
    listed by :func:`status` (``late``) and named in a warning. With ``BIASLAB_NUMERICS=native``
    it does nothing.

    Raises:
        ValueError: a bad ``BIASLAB_NUMERICS``.
    """
    want = env()
    if not want:
        return
    if not _state["pinned"]:
        late = tuple(m for m in _READ_AT_LOAD if m in sys.modules
                     and any(os.environ.get(k) != v for k, v in want.items()))
        _state["late"] = late
        if late:
            warnings.warn(f"biaslab.runtime.numerics: {', '.join(late)} loaded before the "
                          "numeric paths were pinned; call biaslab.runtime.startup.start() "
                          "first (or use the project's .venv, which pins at start-up) for "
                          "results that match on any machine",
                          RuntimeWarning, stacklevel=2)
        flags = _cpu_flags()
        if flags and not {"avx2", "fma"} <= flags:
            warnings.warn("biaslab.runtime.numerics: this CPU lacks AVX2/FMA, which OpenBLAS's pinned "
                          "Haswell kernels need; NumPy/SciPy results will not match other "
                          "machines", RuntimeWarning, stacklevel=2)
            # OpenBLAS keeps its own choice here (status() reports the mismatch)
            want = {k: v for k, v in want.items() if k != "OPENBLAS_CORETYPE"}
        _state["env"] = want
        _state["pinned"] = True
    os.environ.update(_state["env"])
    if "torch" in sys.modules and hasattr(sys.modules["torch"], "backends"):
        configure_torch(sys.modules["torch"])
    elif not any(isinstance(f, _TorchHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchHook())


def stage_mode_note(stage: str, dvc_yaml: str | os.PathLike = "dvc.yaml",
                    params_yaml: str | os.PathLike = "params.yaml") -> str | None:
    """One line for a stage script run under another numeric mode than the pipeline gives
    it, else None.

    ``dvc.yaml`` runs each stage as ``BIASLAB_NUMERICS=${numerics.<group>} python
    stages/<stage>.py`` (the decoding stages under ``numerics.decoding``, the others under
    ``numerics.mode``); the mode is fixed when the interpreter starts, so a stage started by
    hand without that variable computes in ``standard`` and its floats differ in the last
    bits from what ``dvc repro`` records. Said, not raised: running by hand is legitimate.

    Args:
        stage: the stage script's name (``eval_captioner`` for ``stages/eval_captioner.py``).
        dvc_yaml, params_yaml: the pipeline and its params (absent or unreadable: None).

    Returns:
        ``"<stage>: numeric mode 'standard', but dvc.yaml runs it under numerics.decoding =
        'portable': ..."`` naming the command that matches, or None.
    """
    import re

    import yaml
    load = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml: 10 ms, not 90
    try:
        stages = (yaml.load(Path(dvc_yaml).read_text(), Loader=load) or {}).get("stages") or {}
        groups = (yaml.load(Path(params_yaml).read_text(), Loader=load) or {}) \
            .get("numerics") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return None
    script = f"stages/{stage}.py"
    for name, spec in stages.items():
        spec = spec if isinstance(spec, dict) else {}
        cmd = str(spec.get("cmd") or (spec.get("do") or {}).get("cmd") or "")
        if script not in cmd.split():
            continue
        m = re.search(r"BIASLAB_NUMERICS=\$\{numerics\.(\w+)\}", cmd)
        want = groups.get(m.group(1)) if m else None
        have = mode()
        if want is None or str(want) == have:
            return None
        return (f"{stage}: numeric mode {have!r}, but dvc.yaml runs it under numerics."
                f"{m.group(1)} = {want!r}: its floats will differ from the pipeline's in the "
                f"last bits (run BIASLAB_NUMERICS={want} python {script}, or "
                f"dvc repro -s {name})")
    return None


def status() -> dict:
    """What is in effect in this process: ``mode``, the pinned variables whose value differs
    from :func:`env` (``env_mismatch``), libraries loaded before pinning (``late``) and, where
    loaded, torch's CPU capability, oneDNN/NNPACK switches and intra-op threads, NumPy's
    active dispatch targets and OpenBLAS's core type and threads (threadpoolctl). For logs and
    tests; loads nothing that is not loaded yet."""
    out: dict = {"mode": mode(), "late": list(_state["late"]),
                 "env_mismatch": {k: os.environ.get(k) for k, v in env().items()
                                  if os.environ.get(k) != v}}
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "backends"):
        out["torch"] = {"cpu_capability": torch.backends.cpu.get_cpu_capability(),
                        "mkldnn": bool(torch.backends.mkldnn.enabled),
                        "nnpack": bool(torch._nnpack_available() and torch._C._get_nnpack_enabled()),
                        "deterministic": torch.are_deterministic_algorithms_enabled(),
                        "threads": torch.get_num_threads()}
    np_ = sys.modules.get("numpy")
    if np_ is not None:
        try:
            from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
            out["numpy_dispatch"] = [t for t in __cpu_dispatch__ if __cpu_features__.get(t)]
        except ImportError:
            pass
        try:
            import threadpoolctl
            out["blas"] = [{k: i.get(k) for k in ("internal_api", "architecture", "num_threads")}
                           for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
        except ImportError:
            pass
    return out
