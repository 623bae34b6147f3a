"""Experiments that cannot corrupt each other.

* ``biaslab.runtime.guard``: a second ``dvc exp run`` / ``dvc repro`` in a workspace whose run is still
  going is refused before anything is written (``params.yaml`` included), pointing to
  ``--queue``; isolated runs (``--queue``) can be added once the workspace is free.
* ``${repo_path:...}``: a data root outside the repository composes to an absolute path, so
  ``dvc exp run --temp`` / ``--queue`` (run by DVC in a copy under ``.dvc/tmp/exps``) find it.

The DVC cases run the real ``dvc`` console script on a two-file repository written here (not
the project's pipeline), so they take seconds.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from biaslab.runtime import guard
from biaslab.runtime.paths import repo_path
from tests.conftest import REPO

DVC = str(Path(sys.executable).with_name("dvc"))


# ---------------------------------------------------------------------------- unit: the rule

@pytest.mark.parametrize("argv,kind", [
    (["/venv/bin/dvc", "exp", "run", "-S", "x=1"], "workspace"),
    (["dvc", "exp", "run"], "workspace"),
    (["dvc", "experiments", "run", "-n", "a"], "workspace"),
    (["dvc", "repro"], "workspace"),
    (["dvc", "repro", "train"], "workspace"),
    (["dvc", "exp", "run", "--queue", "-S", "x=1"], "isolated"),
    (["dvc", "exp", "run", "--temp"], "isolated"),
    (["dvc", "exp", "run", "--run-all"], "isolated"),
    (["dvc", "exp", "run", "--dry"], "isolated"),
    (["dvc", "repro", "--dry"], None),
    (["dvc", "exp", "show"], None),
    (["dvc", "queue", "start"], None),
    (["python", "stages/prepare.py"], None),
    ([], None),
])
def test_classify_command_lines(argv, kind):
    assert guard.classify(argv) == kind


@pytest.mark.parametrize("argv,orig,kind", [
    # `python -m dvc ...`: at start-up sys.argv is ["-m", ...], the module is in orig_argv
    (["-m", "exp", "run", "-S", "x=1"], ["/v/bin/python", "-m", "dvc", "exp", "run", "-S",
                                         "x=1"], "workspace"),
    (["-m", "repro"], ["python3", "-X", "utf8", "-m", "dvc", "repro"], "workspace"),
    (["-m", "exp", "run"], ["python", "-mdvc", "exp", "run"], "workspace"),
    (["-m", "exp", "run"], ["python", "-m", "dvcx", "exp", "run"], None),
    (["-c"], ["python", "-c", "import dvc", "-m", "dvc", "repro"], None),
    (["stages/x.py"], ["python", "stages/x.py", "-m", "dvc"], None),
    # --cd / -C before the command
    (["dvc", "--cd", "/r", "exp", "run", "-S", "x=1"], None, "workspace"),
    (["dvc", "--cd=/r", "repro"], None, "workspace"),
    (["dvc", "-C", "/r", "exp", "run", "--queue"], None, "isolated"),
    (["dvc", "-q", "--cd", "/r", "repro", "--dry"], None, None),
    # commands that rewrite the workspace
    (["dvc", "exp", "apply", "exp-1a2b3"], None, "changes"),
    (["dvc", "--cd", "r", "checkout"], None, "changes"),
    (["dvc", "pull"], None, "changes"),
    (["dvc", "exp", "show"], None, None),
])
def test_classify_recognises_every_way_dvc_is_started(argv, orig, kind):
    assert guard.classify(argv, orig) == kind


def test_a_registered_stage_process_holds_the_claim_after_dvc_is_gone(tmp_path):
    """``kill -9`` of dvc alone leaves its stage running: the claim holds while the stage
    process lives, and is taken over once it is gone."""
    root = _fake_repo(tmp_path)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)
    (root / guard.CLAIM).write_text(json.dumps({"pid": dead, "command": "dvc repro"}))
    (root / guard.PIDS).mkdir()
    (root / guard.PIDS / str(os.getppid())).write_text("")      # a live "stage"
    with pytest.raises(guard.Refused, match=rf"stage process \(pid {os.getppid()}\)"):
        guard.claim_or_refuse(["dvc", "repro"], cwd=root)
    with pytest.raises(guard.Refused):
        guard.claim_or_refuse(["dvc", "exp", "apply", "e"], cwd=root)
    (root / guard.PIDS / str(os.getppid())).unlink()
    (root / guard.PIDS / str(dead)).write_text("")                # a dead one
    claim = guard.claim_or_refuse(["dvc", "repro"], cwd=root)
    assert claim == root / guard.CLAIM and not list((root / guard.PIDS).iterdir())
    assert guard.register_stage(claim) == root / guard.PIDS / str(os.getpid())
    guard.release(claim)
    assert not claim.exists() and not list((root / guard.PIDS).iterdir())


def test_a_recycled_pid_is_not_the_claimant(tmp_path):
    root = _fake_repo(tmp_path)
    (root / guard.CLAIM).write_text(json.dumps({"pid": os.getppid(), "created": 1.0}))
    assert guard.holder(root) is None          # the live pid started long after the claim


def _fake_repo(tmp_path):
    (tmp_path / ".dvc" / "tmp").mkdir(parents=True)
    return tmp_path


def test_claim_refuse_release_and_take_over_a_dead_claim(tmp_path):
    root = _fake_repo(tmp_path)
    claim = guard.claim_or_refuse(["dvc", "repro"], cwd=root)
    assert claim == root / guard.CLAIM and json.loads(claim.read_text())["pid"] == os.getpid()
    # a live holder (here: this test's parent process) refuses every run, isolated ones too
    claim.write_text(json.dumps({"pid": os.getppid(), "command": "dvc exp run -S x=2"}))
    for argv in (["dvc", "exp", "run"], ["dvc", "exp", "run", "--queue"], ["dvc", "repro"]):
        with pytest.raises(guard.Refused, match=r"dvc exp run -S x=2.*--queue"):
            guard.claim_or_refuse(argv, cwd=root)
    assert guard.claim_or_refuse(["dvc", "exp", "show"], cwd=root) is None   # reads: free
    # a claim whose process is gone is taken over
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    claim.write_text(json.dumps({"pid": int(dead)}))
    assert guard.claim_or_refuse(["dvc", "exp", "run"], cwd=root) == claim
    guard.release(claim)
    assert not claim.exists()
    assert guard.claim_or_refuse(["dvc", "exp", "run"], cwd=tmp_path.parent / "elsewhere") \
        is None                                                  # not inside a repository


def test_repo_path_is_absolute_against_the_repository(tmp_path):
    root = _fake_repo(tmp_path / "proj")
    assert repo_path("../shared/coco-mini", root) == str(tmp_path / "shared" / "coco-mini")
    assert repo_path("/data/coco", root) == "/data/coco"
    assert repo_path("data/raw/coco", root) == str(root / "data" / "raw" / "coco")


# ----------------------------------------------------------------------- the user's commands

def _dvc_repo(tmp_path, seconds=0):
    """A git + DVC repository with the project's hydra_plugins/, a conf/ whose ``out`` profile
    names data outside the repository through ``${repo_path:...}``, and one stage that reads
    params.yaml, sleeps ``seconds`` and copies the data."""
    shared = tmp_path / "shared" / "mini"
    shared.mkdir(parents=True)
    (shared / "a.txt").write_text("outside\n")
    repo = tmp_path / "repo"
    (repo / "conf" / "data").mkdir(parents=True)
    (repo / "local").mkdir()
    (repo / "local" / "a.txt").write_text("inside\n")
    shutil.copytree(REPO / "hydra_plugins", repo / "hydra_plugins",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "conf" / "config.yaml").write_text("defaults:\n  - _self_\n  - data: local\n"
                                               "x: 1\n")
    (repo / "conf" / "data" / "local.yaml").write_text("# @package _global_\ndata:\n"
                                                       "  root: local\n")
    (repo / "conf" / "data" / "out.yaml").write_text(
        "# @package _global_\ndata:\n  root: ${repo_path:../shared/mini}\n")
    (repo / "params.yaml").write_text("data:\n  root: local\nx: 1\n")
    (repo / "dvc.yaml").write_text(textwrap.dedent(f"""\
        stages:
          copy:
            cmd: {sys.executable} -c "import time, shutil, pathlib; pathlib.Path('{tmp_path / 'started'}').touch(); time.sleep({seconds}); shutil.copy('${{data.root}}/a.txt', 'out.txt')"
            deps:
              - ${{data.root}}
            params:
              - x
              - data
            outs:
              - out.txt
        """))
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], [DVC, "init", "-q"],
                [DVC, "config", "hydra.enabled", "true"], ["git", "add", "-A"],
                ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=repo, check=True, env=env, capture_output=True)
    return repo, env


def _run(cmd, repo, env, **kw):
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, **kw)


def _wait_started(tmp_path, first):
    deadline = time.time() + 120
    while not (tmp_path / "started").exists() and time.time() < deadline:
        assert first.poll() is None, first.communicate()
        time.sleep(0.1)


def test_second_experiment_is_refused_before_params_yaml_is_touched(tmp_path):
    """A second run started any way (`dvc`, `python -m dvc`, `dvc --cd <repo>` from elsewhere),
    and `dvc exp apply` / `checkout`, are refused while the first holds the workspace, with
    params.yaml untouched; the first run then ends normally and frees it."""
    repo, env = _dvc_repo(tmp_path, seconds=25)
    first = subprocess.Popen([DVC, "exp", "run", "-S", "x=2"], cwd=repo, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_started(tmp_path, first)   # DVC has composed params.yaml and stashed
        assert (repo / guard.CLAIM).exists()
        params_during = (repo / "params.yaml").read_bytes()
        # every way of starting DVC, and the commands that rewrite the workspace
        for cmd, cwd in (([DVC, "exp", "run", "-S", "x=3"], repo),
                         ([DVC, "exp", "run", "--queue", "-S", "x=4"], repo),
                         ([DVC, "repro"], repo),
                         ([sys.executable, "-m", "dvc", "exp", "run", "-S", "x=3"], repo),
                         ([DVC, "--cd", str(repo), "exp", "run", "-S", "x=4"], tmp_path),
                         ([DVC, "exp", "apply", "HEAD"], repo),
                         ([DVC, "checkout"], repo)):
            r = _run(cmd, cwd, env, timeout=60)
            assert r.returncode == 2, (cmd, r.stdout + r.stderr)
            assert "refused" in r.stderr and "--queue" in r.stderr and "Traceback" not in r.stderr
            assert (repo / "params.yaml").read_bytes() == params_during
        out, _ = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, out
    assert not (repo / guard.CLAIM).exists()                  # released at exit
    lock = (repo / "dvc.lock").read_text()
    assert "x: 2" in lock and (repo / "out.txt").read_text() == "inside\n"
    # the workspace is free again: queueing works, and the queue runs in DVC's temp copies
    r = _run([DVC, "exp", "run", "--queue", "-S", "x=5"], repo, env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_killing_dvc_alone_does_not_free_the_workspace_while_its_stage_runs(tmp_path):
    import signal
    repo, env = _dvc_repo(tmp_path, seconds=15)
    first = subprocess.Popen([DVC, "repro"], cwd=repo, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        _wait_started(tmp_path, first)
        os.kill(first.pid, signal.SIGKILL)                  # dvc only: its stage goes on
        first.wait(timeout=30)
        r = _run([DVC, "repro"], repo, env, timeout=60)
        assert r.returncode == 2 and "stage process" in r.stderr, r.stdout + r.stderr
        assert not (repo / "out.txt").exists()
    finally:
        os.killpg(first.pid, signal.SIGKILL)               # the orphaned stage too
    deadline = time.time() + 30
    while guard.holder(repo) is not None and time.time() < deadline:
        time.sleep(0.2)
    r = _run([DVC, "repro"], repo, env, timeout=120)       # now free: taken over, runs
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_run_says_what_it_ignores_and_what_it_replaces(tmp_path):
    """BIASLAB_NUMERICS in the shell is named as ignored; a hand edit of params.yaml that
    `dvc exp run -S` is about to discard (Hydra recomposes from conf/) is named."""
    repo, env = _dvc_repo(tmp_path)
    (repo / "params.yaml").write_text("data:\n  root: local\nx: 7\n")       # by hand
    r = _run([DVC, "exp", "run", "-S", "data=local"], repo,
             {**env, "BIASLAB_NUMERICS": "native"}, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "BIASLAB_NUMERICS=native is ignored" in r.stderr
    assert "x: 7 -> 1" in r.stderr and "put it in conf/" in r.stderr
    assert "x: 1" in (repo / "params.yaml").read_text()      # what DVC then did
    # a value set by the overrides is not a loss
    r = _run([DVC, "exp", "run", "-S", "x=3"], repo, env, timeout=300)
    assert r.returncode == 0 and "are replaced" not in r.stderr, r.stderr


def test_temp_and_queued_runs_find_a_data_root_outside_the_repository(tmp_path):
    """Before: ``dvc exp run --temp -S data=coco_mini`` failed, the relative
    ``../shared/coco-mini`` not resolving from ``.dvc/tmp/exps/...``."""
    repo, env = _dvc_repo(tmp_path)
    r = _run([DVC, "exp", "run", "--temp", "-S", "data=out", "-n", "outside"], repo, env,
             timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    shown = json.loads(_run([DVC, "exp", "show", "--json"], repo, env, timeout=120).stdout)
    exps = [e for rev in shown for e in (rev.get("experiments") or [])]
    params = [run["data"]["params"]["params.yaml"]["data"] for e in exps for run in e["revs"]
              if run.get("name") == "outside"]
    assert params and params[0]["data"]["root"] == str(tmp_path / "shared" / "mini")
    r = _run([DVC, "exp", "run", "--dry", "--temp", "-S", "data=out"], repo, env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
