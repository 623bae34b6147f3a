"""End to end: `dvc repro` on the embedded default in a temporary clone of the working tree,
then a parameter experiment that must re-run only the stages depending on that parameter."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def _run(args, cwd, env):
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(args)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def pipeline_repo(tmp_path_factory):
    """A git + DVC repository holding the current working tree, with `dvc repro` done."""
    dst = tmp_path_factory.mktemp("e2e") / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (REPO / f).is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, dst / f)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for stale in ("dvc.lock",):
        (dst / stale).unlink(missing_ok=True)
    _run(["git", "init", "-q"], dst, env)
    _run(["git", "add", "-A"], dst, env)
    _run(["git", "commit", "-qm", "e2e"], dst, env)
    out = _run(["dvc", "repro"], dst, env)
    return dst, env, out


def test_repro_runs_every_stage_and_writes_metrics(pipeline_repo):
    repo, env, out = pipeline_repo
    for stage in ("synthesize", "prepare", "label_gender", "split", "audit"):
        assert f"Running stage '{stage}'" in out
    labels = json.loads((repo / "metrics/labels.json").read_text())
    # synthetic captions never contradict the drawn gender: caption labels agree perfectly
    agree = labels["agreement_with_perceived_gender"]
    assert agree["n_compared"] > 200 and agree["accuracy"] == 1.0
    prep = json.loads((repo / "metrics/prepare.json").read_text())
    assert prep["images"] == 400 and prep["dropped_total"] == 0
    assert (repo / "data/split.parquet").exists()
    assert "up to date" in _run(["dvc", "status"], repo, env)


def test_label_param_experiment_reruns_only_dependents(pipeline_repo):
    repo, env, _ = pipeline_repo
    out = _run(["dvc", "exp", "run", "-S", "label.rule=at_least_k"], repo, env)
    for skipped in ("synthesize", "prepare"):
        assert f"Running stage '{skipped}'" not in out, out
    for ran in ("label_gender", "split", "audit"):
        assert f"Running stage '{ran}'" in out, out
    labels = json.loads((repo / "metrics/labels.json").read_text())
    assert labels["rule"] == "at_least_k"
