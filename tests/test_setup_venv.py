"""scripts/venv_check.sh: scripts/setup.sh re-creates a .venv that belongs to another checkout
(copied or moved: it would still run the other tree's biaslab)."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _checkout(path: Path) -> Path:
    """A minimal checkout: the check script and an importable biaslab package."""
    (path / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts/venv_check.sh", path / "scripts")
    (path / "biaslab").mkdir()
    (path / "biaslab/__init__.py").write_text("")
    return path


def _venv(checkout: Path, biaslab_from: Path | None) -> None:
    """A venv without pip (fast) whose biaslab comes from ``biaslab_from`` (a .pth file, as
    an editable install) and whose pip shebang names this checkout's python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(checkout / ".venv")],
                   check=True)
    site = next((checkout / ".venv/lib").glob("python*/site-packages"))
    if biaslab_from is not None:
        (site / "biaslab.pth").write_text(str(biaslab_from) + "\n")
    (checkout / ".venv/bin/pip").write_text(f"#!{checkout / '.venv/bin/python'}\n")


def check(checkout: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/venv_check.sh"], cwd=checkout, capture_output=True,
                          text=True)


def test_a_venv_of_this_checkout_passes_and_none_at_all_too(tmp_path):
    a = _checkout(tmp_path / "a")
    assert check(a).returncode == 0
    _venv(a, a)
    r = check(a)
    assert r.returncode == 0 and r.stdout == ""


def test_a_venv_that_runs_another_trees_biaslab_is_refused(tmp_path):
    a, b = _checkout(tmp_path / "a"), _checkout(tmp_path / "b")
    _venv(a, b)                      # a's .venv imports b's biaslab (copied from b)
    r = check(a)
    assert r.returncode == 1 and f"its biaslab: {b}" in r.stdout
    (next((a / ".venv/lib").glob("python*/site-packages")) / "biaslab.pth").unlink()
    r = check(a)
    assert r.returncode == 1 and "not importable" in r.stdout


def test_a_venv_made_at_another_path_is_refused(tmp_path):
    a = _checkout(tmp_path / "a")
    _venv(a, a)
    (a / ".venv/bin/pip").write_text("#!/elsewhere/.venv/bin/python\n")   # moved, not remade
    r = check(a)
    assert r.returncode == 1 and "/elsewhere/.venv/bin/python" in r.stdout
