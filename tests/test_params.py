"""params.yaml must equal the Hydra composition of conf/ (what `dvc exp run -S` writes)."""
import sys
import yaml
from dvc.utils.hydra import compose_and_dump

from tests.conftest import REPO


def test_params_yaml_is_the_composed_default(tmp_path):
    out = tmp_path / "params.yaml"
    compose_and_dump(str(out), str(REPO / "conf"), None, "config", str(REPO), [])
    assert yaml.safe_load(out.read_text()) == yaml.safe_load((REPO / "params.yaml").read_text())


def test_coco_mini_profile_switches_the_data_source(tmp_path):
    out = tmp_path / "params.yaml"
    compose_and_dump(str(out), str(REPO / "conf"), None, "config", str(REPO), ["data=coco_mini"])
    p = yaml.safe_load(out.read_text())
    # absolute at composition (${repo_path:...}): queued runs work in a copy of the repo
    assert p["data"]["source"] == "coco" and p["data"]["root"] == str(REPO.parent / "shared"
                                                                       / "coco-mini")


def _defining_module(package_dir, name):
    """The module file of a package that defines ``name`` at top level (def, class or
    assignment), searched below ``package_dir`` (``__init__.py`` last: a re-export is not a
    definition); None when no module defines it."""
    import ast
    files = sorted(p for p in package_dir.rglob("*.py") if p.name != "__init__.py")
    for f in files + sorted(package_dir.rglob("__init__.py")):
        for node in ast.parse(f.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined = [node.name]
            elif isinstance(node, ast.Assign):
                defined = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                defined = [node.target.id]
            else:
                continue
            if name in defined:
                return f
    return None


def _direct_biaslab_modules(script):
    """Files of the biaslab modules a stage script imports itself (``import biaslab.x``,
    ``from biaslab.x import y``, ``from biaslab.x import submodule``). A name imported from a
    package's ``__init__`` (a re-export, e.g. ``from biaslab.classify import evaluate``) maps
    to the package module that defines it."""
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
            pkg = REPO / node.module.replace(".", "/")
            if (pkg / "__init__.py").exists():
                for a in node.names:
                    if path_of(f"{node.module}.{a.name}") is None:
                        f = _defining_module(pkg, a.name)
                        if f is not None:
                            out.add(f.relative_to(REPO).as_posix())
        for n in names:
            p = path_of(n) if n.startswith("biaslab") else None
            if p is not None:
                out.add(p.relative_to(REPO).as_posix())
    return out


def test_names_re_exported_by_a_package_map_to_their_defining_module(tmp_path):
    """``from biaslab.classify import GenderObjectClassifier, TrainSettings`` must require
    biaslab/classify/model.py, not only the exempt ``__init__``."""
    script = tmp_path / "stage.py"
    script.write_text("from biaslab.classify import TrainSettings, GenderObjectClassifier, "
                      "evaluate\n"
                      "from biaslab.classify import methods\n")
    mods = _direct_biaslab_modules(script)
    assert {"biaslab/classify/model.py", "biaslab/classify/evaluate.py",
            "biaslab/classify/methods/__init__.py"} <= mods


def test_every_stage_depends_on_its_scripts_whole_import_closure():
    """A module whose code can shape a stage's output must be a dep of that stage, or DVC
    serves a stale result after the module changes: every module the script imports,
    transitively (`biaslab/runtime/io.py`'s number rounding reaches every metrics file,
    `validate.py`'s normalised params reach `select`), none exempt. The fix is one command."""
    from biaslab.runtime.stagedeps import missing_deps
    for f in ("dvc.yaml", "published/dvc.yaml"):
        assert missing_deps(REPO / f, REPO) == {}, \
            f"run `python scripts/stage_deps.py --write --dvc-yaml {f}`"


def test_every_code_dep_exists():
    """A dep on code that is gone (a module deleted or moved) makes `dvc repro` fail at its
    first stage: every dep under biaslab/ or stages/ of both DAGs names a file or directory
    (relative to the stage's wdir)."""
    gone = []
    for f in (REPO / "dvc.yaml", REPO / "published" / "dvc.yaml"):
        for name, st in (yaml.safe_load(f.read_text())["stages"]).items():
            body = st.get("do", st)
            base = f.parent / body.get("wdir", ".")
            for dep in body.get("deps") or []:
                dep = dep if isinstance(dep, str) else next(iter(dep))
                if "${" in dep:
                    continue
                if dep.lstrip("./").startswith(("biaslab", "stages")) and \
                        not (base / dep).exists():
                    gone.append(f"{f.relative_to(REPO)} {name}: {dep}")
    assert gone == []


def test_the_deps_check_adds_what_a_stage_lacks_and_keeps_the_rest(tmp_path):
    """`scripts/stage_deps.py --write` on a dvc.yaml whose stage lists only its script: the
    closure is added under the marker, the hand-written comment and the data deps stay, and
    the check then passes; the check names the stage before."""
    import subprocess
    from biaslab.runtime.stagedeps import MARK, missing_deps, script_closure
    y = tmp_path / "dvc.yaml"
    y.write_text("stages:\n  prepare:\n    cmd: python stages/prepare.py\n    deps:\n"
                 "      - stages/prepare.py   # the script\n      - data/raw\n"
                 "    outs:\n      - data/prepared\n")
    before = missing_deps(y, REPO)
    assert set(before) == {"prepare"}
    assert "biaslab/data/coco.py" in before["prepare"] and \
        "biaslab/runtime/io.py" in before["prepare"]
    assert set(before["prepare"]) == set(script_closure("stages/prepare.py"))
    r = subprocess.run([sys.executable, "scripts/stage_deps.py", "--dvc-yaml", str(y)],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 1 and "stage prepare: imports, but does not list" in r.stdout
    r = subprocess.run([sys.executable, "scripts/stage_deps.py", "--dvc-yaml", str(y),
                        "--write"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = y.read_text()
    assert "- stages/prepare.py   # the script\n      - data/raw\n      " + MARK in text
    assert text.endswith("    outs:\n      - data/prepared\n")
    assert missing_deps(y, REPO) == {}
    deps = yaml.safe_load(text)["stages"]["prepare"]["deps"]
    assert "biaslab/runtime/" in deps          # most of the package: the directory


def test_every_stage_depends_on_the_numerics_and_the_library_versions():
    """The pinned float paths (biaslab/runtime/numerics.py) and the exact library versions
    (requirements.lock) decide the last bits of every out, so a change to either must re-run
    every stage; otherwise a fresh clone serves the old bits of a stage whose only outs are
    committed (human_bias, eval_retrieval, report) as if the new code had computed them."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    lack = {name: sorted({"biaslab/runtime/numerics.py", "requirements.lock"}
                         - {d if isinstance(d, str) else next(iter(d))
                            for d in st.get("do", st).get("deps", [])})
            for name, st in stages.items()}
    assert not {k: v for k, v in lack.items() if v}


def test_committed_lock_is_the_lock_of_the_committed_code_and_params():
    """Every git-tracked dep of every stage in dvc.lock has the md5 the lock records, and every
    param the lock records has params.yaml's value: the lock was produced by this code, so a
    fresh clone re-runs nothing it should not and the end-to-end test compares every stage
    (a lock committed beside a later edit of a dep is caught here in seconds, not by a
    15-minute run that finds no stage to compare)."""
    import hashlib
    import subprocess
    # both DAGs: published/dvc.yaml's stages run in the repository root (wdir: ..), so its
    # lock's paths are relative to the root too
    lock = {**yaml.safe_load((REPO / "dvc.lock").read_text())["stages"],
            **{f"published/dvc.yaml:{k}": v for k, v in yaml.safe_load(
                (REPO / "published/dvc.lock").read_text())["stages"].items()}}
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    tracked = set(subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                                 check=True).stdout.split())

    def value(key):
        v = params
        for k in key.split("."):
            v = v[k]
        return v

    def same(a, b):   # PyYAML reads DVC's "2e-06" as a string, params.yaml's 2.0e-6 as a float
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, str) != isinstance(b, str) and not isinstance(a, bool) \
                and not isinstance(b, bool):
            try:
                return float(a) == float(b)
            except (TypeError, ValueError):
                return False
        return a == b

    stale = []
    for name, st in lock.items():
        for d in st.get("deps", []):
            if d["path"] in tracked and "md5" in d and (REPO / d["path"]).is_file():
                if hashlib.md5((REPO / d["path"]).read_bytes()).hexdigest() != d["md5"]:
                    stale.append(f"{name}: {d['path']}")
        for key, v in (st.get("params") or {}).get("params.yaml", {}).items():
            if not same(value(key), v):
                stale.append(f"{name}: param {key}")
    assert not stale, f"a lock is not the lock of this code: {stale[:20]}"


def test_scale_profiles_choose_the_classifier_baselines(tmp_path):
    """ci: three model-level baselines (budget); full: every method of paper 000 Table 1."""
    from biaslab import registry
    from biaslab.runtime.settings import field_names
    out = tmp_path / "p.yaml"
    compose_and_dump(str(out), str(REPO / "conf"), None, "config", str(REPO), ["scale=full"])
    full = yaml.safe_load(out.read_text())["classifier"]
    assert sorted(full["methods"]) == sorted(set(registry.METHODS.names()) - {"erm"})
    ci = yaml.safe_load((REPO / "params.yaml").read_text())["classifier"]
    assert ci["methods"] == ["group_dro", "adversarial", "domain_independent"]
    for name, params in ci["method_params"].items():       # every param is a known one
        assert set(params) <= field_names(registry.METHODS.load(name).Settings), name


def test_overlay_plots_list_every_run_of_the_params():
    """Dvc.yaml's overlay plots name every training set x seed of
    params.yaml (scripts/plot_runs.py writes them), not the first three seeds."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("plot_runs", REPO / "scripts" / "plot_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check"]) == 0
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    plots = {next(iter(p)): next(iter(p.values())) for p in
             yaml.safe_load((REPO / "dvc.yaml").read_text())["plots"]
             if isinstance(p, dict)}     # an image plot is a bare path
    y = plots["classifier_loss"]["y"]
    c = params["classifier"]
    assert len(y) == 2 * len(c["seeds"]) * (len(c["datasets"]) + len(c.get("methods") or []))
    assert any(f"-{max(c['seeds'])}/plots" in f for f in y)


def test_only_the_headline_is_a_dvc_metric():
    """DVC's metric views (`dvc exp show`, `dvc metrics diff`) compare only
    metrics/summary.json; every other results file is a committed plain out."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    metrics = [next(iter(m)) if isinstance(m, dict) else m
               for st in stages.values() for m in (st.get("metrics") or [])]
    assert metrics == ["metrics/summary.json"]


def test_every_stage_records_its_numeric_mode_in_its_cmd():
    """The numeric mode decides the last bits of every float out, so it is part of each
    stage's record: the cmd sets BIASLAB_NUMERICS from params numerics.* (dvc.lock stores the
    resolved cmd), and a BIASLAB_NUMERICS in the user's shell cannot reach a stage."""
    import re
    for path in (REPO / "dvc.yaml", REPO / "published" / "dvc.yaml"):
        for name, st in yaml.safe_load(path.read_text())["stages"].items():
            cmd = st.get("do", st)["cmd"]
            assert re.match(r"^BIASLAB_NUMERICS=(\$\{numerics\.(mode|decoding)\}|standard) "
                            r"python stages/", cmd), (path.name, name, cmd)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    assert params["numerics"] == {"mode": "standard", "decoding": "portable"}
