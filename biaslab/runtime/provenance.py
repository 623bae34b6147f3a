"""Code digests for the caches that live outside DVC.

DVC re-runs a stage when one of its listed source files changes, but two of our stages keep
work between runs in places DVC does not manage: ``generate``'s shards (a ``persist`` out, so
an interrupted run resumes) and the feature cache (``data/cache/features``, shared by every
stage that encodes images). Their keys used to cover params, settings and input bytes, and the
code only through hand-bumped constants, so an edited backend re-ran the stage and then
skipped every shard as finished: stale pixels recorded as current in ``dvc.lock``.

:func:`source_digest` closes that hole without a constant to bump: it hashes the source of a
module and of every module of the same package it imports, found statically (``ast``; imports
inside functions included, e.g. ``make_backend``'s lazy backend imports), so any edit of code
that can reach a result changes the key. It over-invalidates (a docstring edit recomputes),
which costs time, never correctness.

One module is left out on purpose (:data:`NOT_IN_DIGEST`): ``biaslab.runtime.validate``, reached through
``biaslab.runtime.io.load_params``. It accepts or rejects params and computes nothing a shard or a
feature holds (a value that reaches a result is in the digested settings themselves), and it
grows with every param group: in the digest, each new check re-keyed every generate shard and
re-ran the whole pipeline for identical bytes.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path


#: modules :func:`import_closure` neither lists nor follows (see the module docstring)
NOT_IN_DIGEST = frozenset({"biaslab.runtime.validate"})


def module_file(name: str) -> Path | None:
    """The ``.py`` source file of importable module ``name``, or None (not found, not a
    Python source module)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _imports(path: Path, name: str, is_pkg: bool, package: str) -> set[str]:
    """Module names of ``package`` that the source at ``path`` imports (absolute and relative,
    at any depth of the file); for ``from a import b`` both ``a`` and ``a.b`` (``b`` may be a
    submodule). Unresolvable names are dropped by the caller."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    here = name if is_pkg else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names if a.name != "*")
    out = set()
    for m in found:
        if m == package or m.startswith(package + "."):
            parts = m.split(".")
            # importing a.b.c runs a/__init__ and a/b/__init__ too
            out.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
    return out


def import_closure(*modules: str, exclude: frozenset[str] = NOT_IN_DIGEST) -> dict[str, Path]:
    """``{module name: source file}`` of ``modules`` and every module of their top-level
    package that they import, transitively (static: nothing is imported or executed), less
    ``exclude`` (default :data:`NOT_IN_DIGEST`) and what only those import.

    Raises:
        ValueError: a named module that has no Python source file.
    """
    todo, seen = list(modules), {}
    for m in modules:
        if module_file(m) is None:
            raise ValueError(f"{m!r}: no Python source file found for this module")
    while todo:
        m = todo.pop()
        if m in seen or m in exclude:
            continue
        f = module_file(m)
        if f is None:
            continue
        seen[m] = f
        package = m.split(".")[0]
        todo.extend(_imports(f, m, f.name == "__init__.py", package) - set(seen))
    return dict(sorted(seen.items()))


@lru_cache(maxsize=None)
def source_digest(*modules: str) -> str:
    """sha256 (hex, 64 chars) over the names and source bytes of :func:`import_closure`
    (``modules``). Equal on any machine for equal source; any edit of a module in the closure
    changes it. Cached per process (the source does not change under a running stage).

    Raises:
        ValueError: a named module that has no Python source file.
    """
    h = hashlib.sha256()
    for name, path in import_closure(*modules).items():
        data = path.read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()
