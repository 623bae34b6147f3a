"""The README and docs/: a short README that starts with the two commands,
links that resolve, and a pipeline graph that is the committed dvc.yaml's."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text) <= 10_000, len(text)
    first = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1)
    cmds = [l.split("#")[0].strip() for l in first.splitlines() if l.strip()]
    assert cmds == ["bash scripts/repro.sh", "bash scripts/test.sh"]


def test_every_relative_link_resolves():
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", md.read_text()):
            if "://" in target:
                continue
            assert (md.parent / target).exists(), f"{md.name}: broken link {target}"


@pytest.mark.skipif(shutil.which("dvc") is None, reason="dvc not installed")
def test_pipeline_doc_holds_the_current_dag():
    dag = subprocess.run(["dvc", "dag", "--md"], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=120).stdout.strip()
    assert dag in (ROOT / "docs/pipeline.md").read_text(), \
        "docs/pipeline.md: paste the output of `dvc dag --md` (the graph changed)"


def test_readme_exp_show_command_fits_200_columns_without_hash_columns():
    """The README's `dvc exp show` line, as written, on the committed metrics: every line of
    the table within 200 columns, no dependency (hash) column, S_synthetic's differences
    among the columns."""
    import shlex
    import sys
    line = next(l for l in (ROOT / "README.md").read_text().splitlines()
                if l.startswith("dvc exp show"))
    dvc = Path(sys.executable).with_name("dvc")
    env = {**os.environ, "COLUMNS": "200"}
    table = subprocess.run([str(dvc), *shlex.split(line)[1:]], cwd=ROOT, capture_output=True,
                           text=True, env=env, timeout=300)
    assert table.returncode == 0, table.stderr
    assert max(len(l) for l in table.stdout.splitlines()) <= 200
    csv = subprocess.run([str(dvc), *shlex.split(line)[1:], "--csv"], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=300)
    head = csv.stdout.splitlines()[0].split(",")
    assert not [c for c in head if "/" in c]
    # without --only-changed (a run with nothing to compare drops the equal columns): the
    # differences the command is for, and no other method's
    full = subprocess.run([str(dvc), *[a for a in shlex.split(line)[1:]
                                       if a != "--only-changed"], "--csv"], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=300)
    cols = full.stdout.splitlines()[0].split(",")
    assert "synthetic.Leakage.diff" in cols and "synthetic.LIC.diff" in cols
    assert not [c for c in cols if c.startswith(("oversample.", "original."))]
