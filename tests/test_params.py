"""params.yaml must equal the Hydra composition of conf/ (what `dvc exp run -S` writes)."""
import yaml
from dvc.utils.hydra import compose_and_dump

from tests.conftest import REPO


def test_params_yaml_is_the_composed_default(tmp_path):
    out = tmp_path / "params.yaml"
    compose_and_dump(str(out), str(REPO / "conf"), None, "config", "", [])
    assert yaml.safe_load(out.read_text()) == yaml.safe_load((REPO / "params.yaml").read_text())


def test_coco_mini_profile_switches_the_data_source(tmp_path):
    out = tmp_path / "params.yaml"
    compose_and_dump(str(out), str(REPO / "conf"), None, "config", "", ["data=coco_mini"])
    p = yaml.safe_load(out.read_text())
    assert p["data"]["source"] == "coco" and p["data"]["root"] == "../shared/coco-mini"


def _direct_biaslab_modules(script):
    """Files of the biaslab modules a stage script imports itself (``import biaslab.x``,
    ``from biaslab.x import y``, ``from biaslab.x import submodule``)."""
    import ast
    from pathlib import Path

    def path_of(name):
        for p in (REPO / (name.replace(".", "/") + ".py"),
                  REPO / name.replace(".", "/") / "__init__.py"):
            if p.exists():
                return p
        return None

    out = set()
    for node in ast.walk(ast.parse(Path(script).read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("biaslab"):
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for n in names:
            p = path_of(n) if n.startswith("biaslab") else None
            if p is not None:
                out.add(p.relative_to(REPO).as_posix())
    return out


def test_every_stage_depends_on_the_modules_its_script_imports():
    """A module whose code shapes a stage's output must be a dep of that stage, or DVC serves a
    stale result after the module changes. Package ``__init__`` files (re-exports) and
    ``biaslab/io.py`` (file plumbing, read by every stage) are exempt."""
    import re
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    missing = {}
    for name, st in stages.items():
        script = re.search(r"python (stages/\S+\.py)", st["cmd"]).group(1)
        deps = {d if isinstance(d, str) else next(iter(d)) for d in st.get("deps", [])}
        lack = sorted(m for m in _direct_biaslab_modules(REPO / script)
                      if not m.endswith("__init__.py") and m != "biaslab/io.py"
                      and m not in deps and not any(m.startswith(d.rstrip("/") + "/")
                                                    for d in deps))
        if lack:
            missing[name] = lack
    assert not missing, f"dvc.yaml deps lack imported modules: {missing}"
