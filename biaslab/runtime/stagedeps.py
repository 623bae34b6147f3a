"""Every stage's library deps, checked against the code the stage can run.

DVC re-runs a stage only when a listed dep changes, so a library module that shapes an output
but is missing from the stage's ``deps`` lets ``dvc status`` say "up to date" over a result the
current code would not produce. Two views of "the code a stage can run", both enforced:

* **static** (:func:`script_closure`): the stage script's imports of ``biaslab``, followed
  transitively through every module they import, imports inside functions included
  (:func:`biaslab.runtime.provenance.import_closure`, nothing excluded). ``scripts/stage_deps.py``
  checks ``dvc.yaml`` against it and, with ``--write``, adds what is missing; a test runs the
  check.
* **dynamic** (:func:`log_imports`): a module loaded by name (a registry target such as
  ``"biaslab.data.variants:original"``, ``biaslab.libra``'s lazy submodules) is invisible to
  the static view. With ``BIASLAB_IMPORT_LOG=<dir>`` set, every Python process of the project
  writes the ``biaslab`` source files it imported when it exits; the end-to-end test runs
  ``dvc repro`` so and checks each stage's files against its deps.

A dep covers a module when it is the module's file or a directory above it.
"""
from __future__ import annotations

import ast
import json
import os
import re
import sys
from pathlib import Path

from biaslab.runtime.provenance import module_file, import_closure

REPO = Path(__file__).resolve().parents[2]
_SCRIPT = re.compile(r"python (stages/\S+\.py)")
#: the module every Python of the project's venv runs at start-up (its numeric pins shape
#: every output), so a part of every stage's closure
STARTUP = "biaslab.runtime.startup"
#: the line written above the deps that the check adds to a stage
MARK = "# the script's import closure (scripts/stage_deps.py)"


def _script_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_bytes(), filename=str(path))
    mods: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            mods.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            mods.add(n.module)
            mods.update(f"{n.module}.{a.name}" for a in n.names if a.name != "*")
    out = set()
    for m in mods:
        parts = m.split(".")
        if parts[0] == "biaslab":
            out.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
    return {m for m in out if module_file(m) is not None}


def script_closure(script: str | os.PathLike, root: Path = REPO) -> list[str]:
    """Repository-relative source files (sorted ``str``, e.g. ``"biaslab/runtime/io.py"``) of
    every ``biaslab`` module the stage script at ``script`` imports, transitively and statically
    (function-level imports included; nothing executed), and of the start-up hook
    (:data:`STARTUP`) that runs before it.

    Raises:
        FileNotFoundError: ``script`` does not exist.
        SyntaxError: a module of the closure does not parse.
    """
    path = Path(script)
    if not path.is_absolute():
        path = root / path
    mods = _script_imports(path)
    if mods:    # every process of the venv runs the start-up hook before the script
        mods.add(STARTUP)
    files = import_closure(*sorted(mods), exclude=frozenset()).values() if mods else []
    return sorted(str(Path(f).resolve().relative_to(root)) for f in files)


def _covered(module_file: str, deps: set[str]) -> bool:
    return module_file in deps or any(module_file.startswith(d.rstrip("/") + "/") for d in deps)


def _stage_templates(dvc_yaml: Path) -> dict[str, dict]:
    import yaml
    stages = yaml.safe_load(dvc_yaml.read_text())["stages"]
    return {name: st.get("do", st) for name, st in stages.items()}


def _deps(st: dict) -> set[str]:
    return {d if isinstance(d, str) else next(iter(d)) for d in st.get("deps") or []}


def missing_deps(dvc_yaml: str | os.PathLike = REPO / "dvc.yaml",
                 root: Path = REPO) -> dict[str, list[str]]:
    """``{stage: [module files its script's static import closure reaches that no dep
    covers]}`` for the stages of ``dvc_yaml`` (foreach stages by their template); stages
    with nothing missing are left out.

    Raises:
        ValueError: a stage whose ``cmd`` runs no ``python stages/<name>.py``.
    """
    out = {}
    for name, st in _stage_templates(Path(dvc_yaml)).items():
        m = _SCRIPT.search(st["cmd"])
        if not m:
            raise ValueError(f"{dvc_yaml}: stage {name!r}: its cmd runs no stages/*.py script")
        deps = _deps(st)
        lack = [f for f in script_closure(m.group(1), root) if not _covered(f, deps)]
        if lack:
            out[name] = lack
    return out


def uncovered_imports(stage_files: dict[str, set[str]],
                      dvc_yaml: str | os.PathLike = REPO / "dvc.yaml") -> dict[str, list[str]]:
    """The dynamic check: ``stage_files`` maps a stage script (``"stages/probe.py"``) to the
    ``biaslab`` files its processes imported (from :func:`read_import_log`); returns
    ``{stage: [files no dep of a stage running that script covers]}``, empty when all are
    declared."""
    templates = _stage_templates(Path(dvc_yaml))
    out = {}
    for name, st in templates.items():
        m = _SCRIPT.search(st["cmd"])
        files = stage_files.get(m.group(1), set()) if m else set()
        lack = sorted(f for f in files if not _covered(f, _deps(st)))
        if lack:
            out[name] = lack
    return out


def compact(files: list[str], root: Path = REPO, share: float = 0.5) -> list[str]:
    """``files`` (repository-relative module files) with every package directory of which they
    hold at least ``share`` of the ``.py`` files (recursively) replaced by the directory
    (``"biaslab/runtime/"``), deepest first. A directory dep also covers the modules of it the
    stage does not import: edits to those re-run the stage for nothing, which costs time,
    never correctness; ``share`` trades that against the length of ``dvc.yaml``."""
    lib = root / "biaslab"
    allpy = sorted(str(p.relative_to(root)) for p in lib.rglob("*.py"))
    dirs = sorted({str(q) for f in allpy for q in Path(f).parents
                   if str(q) not in (".", "biaslab")}, key=lambda d: (-d.count("/"), d))
    out = set(files)
    for d in dirs:
        inside = [f for f in allpy if f.startswith(d + "/")]
        covered = [f for f in inside if _covered(f, out)]
        if inside and len(covered) >= share * len(inside) and \
                any(f.startswith(d + "/") for f in files):
            out = {x for x in out if not x.startswith(d + "/")} | {d + "/"}
    return sorted(out)


def write_missing(dvc_yaml: str | os.PathLike = REPO / "dvc.yaml",
                  root: Path = REPO) -> dict[str, list[str]]:
    """Add :func:`missing_deps` to ``dvc_yaml`` in place: each stage's missing files go at the
    end of its ``deps`` list, under :data:`MARK`, comments and order of the rest kept. Returns
    what was added, package directories compacted by :func:`compact` (the file is rewritten
    atomically, and only when something is missing)."""
    from biaslab.runtime.io import atomic_path
    path = Path(dvc_yaml)
    missing = {k: compact(v, root) for k, v in missing_deps(path, root).items()}
    if not missing:
        return {}
    lines = path.read_text().splitlines(keepends=True)
    stage = None
    i, out = 0, []
    while i < len(lines):
        line = lines[i]
        top = re.match(r"^  (\w[\w-]*):\s*$", line)
        if top:
            stage = top.group(1)
        dep = re.match(r"^(\s+)deps:\s*$", line)
        out.append(line)
        i += 1
        if dep and stage in missing:
            indent, marked = None, False
            while i < len(lines) and re.match(r"^\s+(- |# )", lines[i]):
                marked = marked or lines[i].strip() == MARK
                if lines[i].lstrip().startswith("- "):
                    indent = indent or re.match(r"^(\s+)- ", lines[i]).group(1)
                out.append(lines[i])
                i += 1
                while i < len(lines) and lines[i].strip() and \
                        len(lines[i]) - len(lines[i].lstrip()) > len(indent or "") + 2:
                    out.append(lines[i])            # a dict-form dep's own keys
                    i += 1
            indent = indent or dep.group(1) + "  "
            if not marked:
                out.append(f"{indent}{MARK}\n")
            out.extend(f"{indent}- {f}\n" for f in missing[stage])
    with atomic_path(path) as tmp:
        Path(tmp).write_text("".join(out))
    return missing


def log_imports() -> None:
    """With ``BIASLAB_IMPORT_LOG=<dir>`` set, register an exit handler that writes this
    process's ``argv`` and the repository-relative ``biaslab`` source files it imported to
    ``<dir>/<pid>.json``. A no-op otherwise."""
    target = os.environ.get("BIASLAB_IMPORT_LOG")
    if not target:
        return
    import atexit

    def _write():
        files = set()
        for mod in list(sys.modules.values()):
            f = getattr(mod, "__file__", None)
            if f and getattr(mod, "__name__", "").split(".")[0] == "biaslab":
                try:
                    files.add(str(Path(f).resolve().relative_to(REPO)))
                except ValueError:
                    pass
        try:
            Path(target).mkdir(parents=True, exist_ok=True)
            (Path(target) / f"{os.getpid()}.json").write_text(
                json.dumps({"argv": list(sys.argv), "files": sorted(files)}))
        except OSError:
            pass
    atexit.register(_write)


def read_import_log(directory: str | os.PathLike) -> dict[str, set[str]]:
    """``{stage script: union of the files its processes imported}`` from the
    :func:`log_imports` records in ``directory``."""
    out: dict[str, set[str]] = {}
    for f in sorted(Path(directory).glob("*.json")):
        rec = json.loads(f.read_text())
        argv = rec.get("argv") or [""]
        script = next((a for a in argv if a.startswith("stages/") and a.endswith(".py")), None)
        if script:
            out.setdefault(script, set()).update(rec["files"])
    return out
