"""Issue 26 item 2: experiments that cannot corrupt each other.

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


def test_second_experiment_is_refused_before_params_yaml_is_touched(tmp_path):
    repo, env = _dvc_repo(tmp_path, seconds=10)
    first = subprocess.Popen([DVC, "exp", "run", "-S", "x=2"], cwd=repo, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 120
        # wait until the first run's stage command runs (DVC has composed params.yaml and
        # stashed by then; under load that takes seconds)
        while not (tmp_path / "started").exists() and time.time() < deadline:
            time.sleep(0.1)
        assert (repo / guard.CLAIM).exists()
        params_during = (repo / "params.yaml").read_bytes()
        for cmd in ([DVC, "exp", "run", "-S", "x=3"], [DVC, "exp", "run", "--queue", "-S",
                                                        "x=4"], [DVC, "repro"]):
            r = _run(cmd, repo, env, timeout=60)
            assert r.returncode == 2, r.stdout + r.stderr
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
