"""The README and docs/ (issue 27 item 7): a short README that starts with the two commands,
links that resolve, and a pipeline graph that is the committed dvc.yaml's."""
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
