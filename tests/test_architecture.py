"""The import graph of the library: no import cycles, counting lazy imports
inside functions too (a cycle that only a lazy import hides still ties two modules together:
neither can be understood, tested or replaced alone)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: biaslab modules it imports anywhere in its source}`` for ``root/biaslab``
    (``from biaslab.x import y`` counts ``biaslab.x.y`` when that is a module, else
    ``biaslab.x``)."""
    mods = {}
    for f in (root / "biaslab").rglob("*.py"):
        rel = f.relative_to(root).with_suffix("")
        mods[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = f

    def resolve(n: str) -> str:
        while n and n not in mods:
            n = n.rsplit(".", 1)[0] if "." in n else ""
        return n
    graph = {}
    for name, f in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps |= {resolve(a.name) for a in node.names if a.name.startswith("biaslab")}
            elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                  and node.module.startswith("biaslab")):
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    deps.add(full if full in mods else resolve(node.module))
        graph[name] = deps - {name, ""}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_cycle_finder_by_hand():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles({k: v - {k} for k, v in g.items()}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_library_has_no_import_cycles():
    graph = import_graph()
    assert "biaslab.cli" in graph and graph["biaslab.cli"]      # the graph is real
    assert cycles(graph) == []


def test_stage_scripts_do_not_patch_sys_path():
    """No stage inserts the repository into sys.path: the venv's biaslab_numerics.pth imports
    biaslab at interpreter start-up (scripts/setup.sh), so the installed package is the one
    every stage uses whatever a script inserts."""
    stages = sorted((ROOT / "stages").glob("*.py"))
    assert stages
    assert [p.name for p in stages if "sys.path.insert" in p.read_text()] == []


def test_the_report_stage_is_thin():
    """The report's markdown is library code (biaslab/report/document.py);
    the stage reads the files, calls build and writes what it returns."""
    tree = ast.parse((ROOT / "stages" / "report.py").read_text())
    defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert defs == ["_read", "main"]
    assert len((ROOT / "stages" / "report.py").read_text().splitlines()) < 80


#: the top of biaslab/ holds only the package marker and the entry modules; everything else
#: lives in a package named for its subject
TOP_LEVEL = {"__init__", "__main__", "cli", "registry"}
PACKAGES = {"analysis", "captioning", "classify", "counterfactual", "data", "libra", "metrics",
            "models", "report", "runtime"}


def test_the_top_level_holds_only_the_entry_modules():
    lib = ROOT / "biaslab"
    assert {p.stem for p in lib.glob("*.py")} == TOP_LEVEL
    assert {p.name for p in lib.iterdir() if (p / "__init__.py").is_file()} == PACKAGES


#: the longest a stage script may be: a stage reads params and files, calls
#: the library and writes its outs; dcg_train (245 lines, its DVCLive hooks) is the longest
STAGE_MAX_LINES = 260


def test_stages_are_thin_and_share_one_skeleton():
    """No stage script holds an analysis of its own: each stays within STAGE_MAX_LINES (the
    seven evaluation stages that held their logic now call biaslab.analysis.*_eval,
    biaslab.captioning.table2 and biaslab.report.published), none patches sys.path, and every
    one has the same skeleton: ``def main(argv: list[str] | None = None) -> int`` whose
    arguments come from ``stage_parser(__doc__)`` (``--help`` prints the docstring), run by
    ``run_stage(main)`` (biaslab.runtime.io: the expected errors as one line, exit 1)."""
    long, patched, skeleton = [], [], []
    for f in sorted((ROOT / "stages").glob("*.py")):
        text = f.read_text(encoding="utf-8")
        if len(text.splitlines()) > STAGE_MAX_LINES:
            long.append(f"{f.name}: {len(text.splitlines())} lines")
        if "sys.path.insert" in text or "sys.path.append" in text:
            patched.append(f.name)
        tree = ast.parse(text)
        mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
        tail = tree.body[-1]
        ok = (len(mains) == 1 and ast.unparse(mains[0].args) == "argv: list[str] | None=None"
              and ast.unparse(mains[0].returns) == "int"
              and "stage_parser(__doc__)" in ast.unparse(mains[0])
              and isinstance(tail, ast.If) and ast.unparse(tail.test) == "__name__ == '__main__'"
              and len(tail.body) == 1 and ast.unparse(tail.body[0]).startswith("run_stage(main"))
        if not ok:
            skeleton.append(f.name)
    assert long == [] and patched == [] and skeleton == [], (long, patched, skeleton)


def test_run_stage_prints_an_expected_error_as_one_line(tmp_path):
    """The shared entry point: exit 0 on success, the main's code otherwise, and an
    InputError (or a listed error) as ``<stage>: <message>`` with exit 1, no traceback;
    an unexpected error keeps its traceback."""
    import subprocess
    import sys
    script = tmp_path / "stages" / "demo.py"
    script.parent.mkdir()
    script.write_text(
        "import sys\n"
        "from biaslab.runtime.io import InputError, run_stage\n"
        "def main(argv=None):\n"
        "    kind = argv[0]\n"
        "    if kind == 'input':\n"
        "        raise InputError('x.csv', 'no rows')\n"
        "    if kind == 'value':\n"
        "        raise ValueError('bad value')\n"
        "    if kind == 'key':\n"
        "        raise KeyError('k')\n"
        "    return int(kind)\n"
        "if __name__ == '__main__':\n"
        "    run_stage(main, errors=(ValueError,))\n")

    def run(arg):
        return subprocess.run([sys.executable, str(script), arg], capture_output=True,
                              text=True, cwd=tmp_path)
    assert run("0").returncode == 0 and run("3").returncode == 3
    r = run("input")
    assert (r.returncode, r.stderr.strip()) == (1, "demo: x.csv: no rows")
    r = run("value")
    assert (r.returncode, r.stderr.strip()) == (1, "demo: bad value")
    r = run("key")
    assert r.returncode == 1 and "Traceback" in r.stderr and "KeyError" in r.stderr


#: where code, params and docs explain themselves: the tracker's numbers and the project's
#: history live in git and the issue notes, not in what a user reads
EXPLAINED = ("biaslab", "stages", "scripts", "benchmarks", "conf", "docs", "hydra_plugins",
             "examples", "dvc.yaml", "published/dvc.yaml", "README.md", ".ci/run")
HISTORY = r"\b(?:issues? #?\d|stop \d+\b|DESIGN\.md)"


def test_code_params_and_docs_say_why_not_which_issue_or_stop():
    import re
    history = re.compile(HISTORY, re.IGNORECASE)
    hits = []
    for entry in EXPLAINED:
        p = ROOT / entry
        files = [p] if p.is_file() else sorted(
            f for f in p.rglob("*") if f.is_file() and f.suffix in (".py", ".md", ".yaml", ".toml")
            and "__pycache__" not in f.parts)
        for f in files:
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                if history.search(line):
                    hits.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()[:100]}")
    assert hits == [], "\n".join(hits)


def test_the_history_check_sees_what_it_must():
    import re
    history = re.compile(HISTORY, re.IGNORECASE)
    assert history.search("the logic of stage probe (issue 27 item 4)")
    assert history.search("Since stop 65 the controls")
    assert history.search("see DESIGN.md")
    assert not history.search("early stopping after 2 epochs")
    assert not history.search("stage_times_ci_issue31.json")


#: the most lines a library module may have: past it, a module mixes concerns (split it along
#: its seams, as libra/dcg.py into dcg_model.py and dcg.py)
MAX_LINES = 700


def test_no_library_module_is_over_the_line_limit():
    long = {str(f.relative_to(ROOT)): n for f in (ROOT / "biaslab").rglob("*.py")
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, long


def private_imports(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(file, module, name)`` for every underscore name a library module takes from another
    library module: ``from biaslab.m import _x``, or ``m._x`` on an imported module ``m``."""
    out = []
    for f in (root / "biaslab").rglob("*.py"):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        mods: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.startswith("biaslab"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        out.append((str(f.relative_to(root)), node.module, a.name))
                    mods[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("biaslab"):
                        mods[a.asname or a.name] = a.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                    and node.value.id in mods
                    and (root / Path(*mods[node.value.id].split("."))).with_suffix(".py")
                    .exists()):
                out.append((str(f.relative_to(root)), mods[node.value.id], node.attr))
    return sorted(set(out))


def test_private_import_finder_by_hand(tmp_path):
    (tmp_path / "biaslab").mkdir()
    (tmp_path / "biaslab" / "m.py").write_text("_x = 1\ny = 2\n")
    (tmp_path / "biaslab" / "a.py").write_text("from biaslab.m import _x, y\n")
    (tmp_path / "biaslab" / "b.py").write_text("from biaslab import m\nz = m._x + m.y\n")
    (tmp_path / "biaslab" / "c.py").write_text("import os\nfrom biaslab import m\n"
                                               "z = os._exit, m.y\n")
    assert private_imports(tmp_path) == [("biaslab/a.py", "biaslab.m", "_x"),
                                         ("biaslab/b.py", "biaslab.m", "_x")]


def test_no_library_module_takes_another_modules_private_names():
    """A name another module needs is part of its module's interface: public, documented."""
    assert private_imports() == []
