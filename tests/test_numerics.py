"""biaslab.runtime.numerics: each mode's CPU float paths are pinned in every process whatever the
shell or the machine sets. In the default ``standard`` mode the data workloads give the same bits
on every simulated machine and with 1 or 2 workers while torch runs its native kernels; in
``portable`` every workload does; without the pins the same simulations differ."""
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from biaslab.runtime import numerics
from tests.conftest import REPO

STATUS = ("import json, numpy, scipy, torch; from biaslab.runtime import numerics; "
          "print(json.dumps(numerics.status()))")


def _py(code_or_args, env_over=None, flags=()):
    env = {k: v for k, v in os.environ.items()
           if k not in numerics.ENV and k != "BIASLAB_NUMERICS"}
    env.update(env_over or {})
    args = code_or_args if isinstance(code_or_args, list) else ["-c", code_or_args]
    r = subprocess.run([sys.executable, *flags, *args], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _assert_pinned(st, mode="standard"):
    assert st["mode"] == mode and st["env_mismatch"] == {} and st["late"] == []
    if mode == "portable":
        assert st["torch"] == {"cpu_capability": "DEFAULT", "mkldnn": False, "nnpack": False,
                               "deterministic": True, "threads": 1}
    else:   # torch's own kernels, one thread unless a stage sets its own
        assert st["torch"]["mkldnn"] is True and st["torch"]["threads"] == 1
        assert st["torch"]["deterministic"] is True
        if _has("avx2", "fma"):
            assert st["torch"]["cpu_capability"] != "DEFAULT"
    assert st["numpy_dispatch"] == []
    assert st["blas"] and all(b["architecture"] == "Haswell" and b["num_threads"] == 1
                              for b in st["blas"])


def _has(*flags):
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    have = next((set(line.split(":", 1)[1].split()) for line in text.splitlines()
                 if line.startswith("flags")), set())
    return set(flags) <= have


def test_every_interpreter_of_the_venv_is_pinned_before_numpy_and_torch_load():
    """The .venv's start-up hook (scripts/setup.sh writes biaslab_numerics.pth) pins before a
    script's first import, also one that imports numpy and torch before biaslab, with a shell
    that sets every variable a machine could."""
    site = Path(sysconfig.get_paths()["purelib"])
    assert (site / "biaslab_numerics.pth").is_file(), \
        f"{site}/biaslab_numerics.pth missing: run scripts/setup.sh"
    hostile = {**numerics.SIMULATED_MACHINES["manycore"], "MKL_CBWR": "AUTO",
               "NPY_DISABLE_CPU_FEATURES": "", "OPENCV_IPP": "avx512"}
    _assert_pinned(json.loads(_py(STATUS, hostile).stdout))
    _assert_pinned(json.loads(_py(STATUS, {**hostile, "BIASLAB_NUMERICS": "portable"}).stdout),
                   "portable")


def test_the_entry_point_pins_without_the_venv_hook():
    """Another installation (no .pth): the start-up entry point, called before numpy/torch,
    pins them."""
    site = sysconfig.get_paths()["purelib"]
    code = (f"import sys; sys.path[:0] = [{str(REPO)!r}, {site!r}]; "
            "import biaslab.runtime.startup as s; s.start(); " + STATUS)
    _assert_pinned(json.loads(_py(code, numerics.SIMULATED_MACHINES["manycore"],
                                  flags=("-S",)).stdout))


def test_numpy_loaded_before_pinning_is_named_in_a_warning():
    site = sysconfig.get_paths()["purelib"]
    code = (f"import sys; sys.path[:0] = [{str(REPO)!r}, {site!r}]; import numpy; "
            "import biaslab.runtime.startup as s, json; s.start(); "
            "from biaslab.runtime import numerics; print(json.dumps(numerics.status()['late']))")
    r = _py(code, {"OPENBLAS_CORETYPE": "SkylakeX"}, flags=("-S",))
    assert json.loads(r.stdout.strip().splitlines()[-1]) == ["numpy"]
    assert "numpy loaded before the numeric paths were pinned" in r.stderr


def test_importing_the_library_changes_nothing_in_the_process():
    """``import biaslab`` (and its metrics) in an installation without the hook leaves the
    environment, the import hooks and the workspace alone: pins and guards are the entry
    points' (biaslab.runtime.startup)."""
    site = sysconfig.get_paths()["purelib"]
    code = (f"import sys, os, json; sys.path[:0] = [{str(REPO)!r}, {site!r}]; "
            "env = dict(os.environ); "
            "import biaslab, biaslab.metrics.lic, biaslab.registry; "
            "print(json.dumps([dict(os.environ) == env, "
            "any(type(f).__module__.startswith('biaslab') for f in sys.meta_path), "
            "'biaslab.runtime.guard' in sys.modules]))")
    r = _py(code, {"OPENBLAS_CORETYPE": "SkylakeX"}, flags=("-S",))
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [True, False, False], r.stderr


def test_native_mode_leaves_the_libraries_alone():
    st = json.loads(_py(STATUS, {"BIASLAB_NUMERICS": "native"}).stdout)
    assert st["mode"] == "native" and st["env_mismatch"] == {}
    assert st["torch"]["mkldnn"] is True
    if _has("avx2", "fma"):
        assert st["torch"]["cpu_capability"] != "DEFAULT"


def test_bad_mode_is_an_error(monkeypatch):
    monkeypatch.setenv("BIASLAB_NUMERICS", "fast")
    with pytest.raises(ValueError, match="BIASLAB_NUMERICS='fast'"):
        numerics.mode()


def test_each_mode_pins_its_own_set():
    assert numerics.env("native") == {}
    assert numerics.env("standard") == numerics.ENV_STANDARD
    assert numerics.env("portable") == {**numerics.ENV_STANDARD, **numerics.ENV_TORCH}
    # torch's paths are left to torch in the default: that is where the run time goes
    assert not set(numerics.ENV_TORCH) & set(numerics.ENV_STANDARD)
    with pytest.raises(ValueError, match="numeric mode 'fast'"):
        numerics.env("fast")


def test_ray_workers_get_the_pins(monkeypatch):
    """biaslab.runtime.executor.connect hands ENV to Ray's runtime environment (local head and a
    cluster address alike), so a worker started from another shell is pinned too."""
    from biaslab.runtime import executor
    seen = []

    class FakeRay:
        @staticmethod
        def is_initialized():
            return False

        @staticmethod
        def init(**kw):
            seen.append(kw["runtime_env"]["env_vars"])

    monkeypatch.setattr(executor, "import_ray", lambda: FakeRay)
    executor.connect({"address": None})
    executor.connect({"address": "ray://elsewhere:10001"})
    for env in seen:
        assert {k: env[k] for k in numerics.ENV_STANDARD} == numerics.ENV_STANDARD
        assert env["BIASLAB_NUMERICS"] == "standard"


def _fingerprint(env_over, *args):
    r = _py(["scripts/numerics_fingerprint.py", *args], {"TQDM_DISABLE": "1", **env_over})
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_workloads_give_the_same_bits_on_every_simulated_machine_and_worker_count():
    """On the training code paths (tiny inputs, seconds each): in the default ``standard``
    mode the data workloads (NumPy / SciPy / scikit-learn, the renderer and OpenCV) give the
    same md5 on every simulated machine of ``numerics.SIMULATED_MACHINES`` and with 1 vs 2
    forked workers -- the identity :data:`biaslab.runtime.reprocheck.EXACT_STAGES` rests on;
    under ``portable`` every workload does; with ``BIASLAB_NUMERICS=native`` the same
    simulations differ (the simulation has teeth), where this CPU has the ISA to differ."""
    data = ["--only", "numpy", "data"]
    base = _fingerprint({}, *data)
    _assert_pinned(base["numerics"])
    for name, env in numerics.SIMULATED_MACHINES.items():
        assert _fingerprint(env, *data)["md5"] == base["md5"], name
    assert _fingerprint({}, *data, "--workers", "2")["md5"] == base["md5"], "2 workers"

    port = {"BIASLAB_NUMERICS": "portable"}
    base = _fingerprint(port)
    _assert_pinned(base["numerics"], "portable")
    runs = {name: _fingerprint({**env, **port}) for name, env in
            numerics.SIMULATED_MACHINES.items() if name != "avx512"}
    runs["2 workers"] = _fingerprint(port, "--workers", "2")
    for name, fp in runs.items():
        assert fp["md5"] == base["md5"], name
    # t5 with 2 torch threads (libra.threads): a different but equally portable result
    two = {n: _fingerprint({**env, **port}, "--only", "t5", "--threads", "2")["md5"]["t5"]
           for n, env in numerics.SIMULATED_MACHINES.items()}
    assert len(set(two.values())) == 1, two
    if _has("avx2", "fma"):
        only = ["--only", "t5", "numpy", "lic_lstm"]
        native = {n: _fingerprint({**numerics.SIMULATED_MACHINES[n],
                                   "BIASLAB_NUMERICS": "native"}, *only)["md5"]
                  for n in ("avx2", "sse")}
        assert native["avx2"] != native["sse"], "the simulated machines did not differ " \
            "without the pins: the test would not see a machine dependence"


def test_pinning_sets_the_deterministic_flag_without_importing_dynamo():
    """configure_torch sets torch's deterministic flag (warn only) itself: through
    torch.use_deterministic_algorithms it would import torch._inductor and torch._dynamo, 1.2 s
    of every stage's start-up, for a config nothing here compiles with."""
    code = ("import sys, json, torch; print(json.dumps([torch.are_deterministic_algorithms_enabled(), "
            "torch.is_deterministic_algorithms_warn_only_enabled(), "
            "'torch._dynamo' in sys.modules, 'torch._inductor' in sys.modules]))")
    assert json.loads(_py(code).stdout) == [True, True, False, False]


def test_a_stage_run_outside_its_pipeline_mode_says_which_mode_dvc_gives_it(tmp_path,
                                                                             monkeypatch):
    """The decoding stages run under ``numerics.decoding`` in dvc.yaml; started by hand
    without it they compute in ``standard`` and differ in the last bits. The note names the
    param, its value and the command that matches; in the right mode, or for a stage dvc.yaml
    does not run, nothing is said."""
    from biaslab.runtime.numerics import stage_mode_note
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n"
        "  eval_captioner:\n"
        "    cmd: BIASLAB_NUMERICS=${numerics.decoding} python stages/eval_captioner.py\n"
        "  train:\n"
        "    foreach: [a, b]\n"
        "    do:\n"
        "      cmd: BIASLAB_NUMERICS=${numerics.mode} python stages/train.py --d ${item}\n")
    (tmp_path / "params.yaml").write_text("numerics:\n  mode: standard\n  decoding: portable\n")
    d, p = tmp_path / "dvc.yaml", tmp_path / "params.yaml"
    monkeypatch.delenv("BIASLAB_NUMERICS", raising=False)
    note = stage_mode_note("eval_captioner", d, p)
    assert note == ("eval_captioner: numeric mode 'standard', but dvc.yaml runs it under "
                    "numerics.decoding = 'portable': its floats will differ from the "
                    "pipeline's in the last bits (run BIASLAB_NUMERICS=portable python "
                    "stages/eval_captioner.py, or dvc repro -s eval_captioner)")
    assert stage_mode_note("train", d, p) is None
    assert stage_mode_note("nowhere", d, p) is None
    assert stage_mode_note("eval_captioner", tmp_path / "absent.yaml", p) is None
    monkeypatch.setenv("BIASLAB_NUMERICS", "portable")
    assert stage_mode_note("eval_captioner", d, p) is None
    assert "numerics.mode = 'standard'" in stage_mode_note("train", d, p)
