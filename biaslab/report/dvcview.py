"""The DVC client of the report's collectors: every experiment's params and metrics as
``dvc exp show --json`` gives them, completed by the detailed metrics files that DVC does not
register as metrics (plain outs under ``metrics/``), and the helpers that walk that output.
Used by Table 4 (:func:`biaslab.report.table4.table4_from_experiments`), the sweep and backend
comparisons (:mod:`biaslab.analysis.sweep`, :mod:`biaslab.analysis.backends`) and
``scripts/exp_table.py``. Runs ``dvc`` and ``git`` in the given directory; formats nothing."""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def exp_show(cwd: str | os.PathLike = ".") -> list:
    """``dvc exp show --json`` over the workspace, HEAD and every commit that has experiments.

    Plain ``dvc exp show`` lists only the experiments of HEAD: a commit made between queueing a
    sweep and collecting it hides the sweep. ``--all-commits`` reads the metrics of every
    commit (minutes on a long history), so the baselines come from ``dvc exp list
    --all-commits`` (lines ``<rev>:``) and are passed as ``--rev``.

    Returns:
        the parsed JSON list (workspace first, then HEAD, then the other baselines).

    Raises:
        subprocess.CalledProcessError: a DVC command failed.
    """
    import subprocess
    listed = subprocess.run(["dvc", "exp", "list", "--all-commits"], cwd=cwd, check=True,
                            capture_output=True, text=True).stdout
    revs = ["HEAD"] + [line[:-1].strip() for line in listed.splitlines()
                       if line.strip() and not line[0].isspace() and line.rstrip().endswith(":")]
    cmd = ["dvc", "exp", "show", "--json"] + [x for r in dict.fromkeys(revs)
                                              for x in ("--rev", r)]
    out = subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout
    return attach_out_metrics(json.loads(out), cwd)


def out_metric_files(dvc_yaml: str | os.PathLike = "dvc.yaml") -> list[str]:
    """The JSON files under ``metrics/`` that ``dvc.yaml`` declares as plain outs (not DVC
    ``metrics``): the detailed results, committed to Git (``cache: false``) but kept out of
    DVC's metric views so that those stay readable (only ``metrics/summary.json``
    is a DVC metric)."""
    import yaml
    stages = (yaml.safe_load(Path(dvc_yaml).read_text()) or {}).get("stages") or {}
    files = []
    for st in stages.values():
        for o in (st.get("outs") or []):
            path = o if isinstance(o, str) else next(iter(o))
            if str(path).startswith("metrics/") and str(path).endswith(".json"):
                files.append(str(path))
    return sorted(set(files))


def attach_out_metrics(shown: Any, cwd: str | os.PathLike = ".") -> Any:
    """``dvc exp show --json`` output with every record's ``data.metrics`` completed by the
    detailed metric files (:func:`out_metric_files`) as that record's revision holds them
    (``git cat-file`` of ``<rev>:<file>``; the workspace's from disk), in DVC's layout
    ``{path: {"data": ...}}``. DVC shows only registered metrics; the collectors (sweep,
    backend comparison, Table 4, ``scripts/exp_table.py``) read the detailed files through
    this. A file a revision does not have is left out. Returns ``shown`` (modified)."""
    import subprocess
    cwd = Path(cwd)
    files = out_metric_files(cwd / "dvc.yaml") if (cwd / "dvc.yaml").is_file() else []
    recs = [r for r in walk_exp_records(shown)]
    if not files or not recs:
        return shown
    wanted: list[tuple[dict, str, str]] = []
    for rec in recs:
        data = rec["data"]
        rev = str(rec.get("rev") or data.get("rev") or "")
        metrics = data.get("metrics")
        if metrics is None:
            metrics = data["metrics"] = {}
        if not isinstance(metrics, dict):
            continue
        for f in files:
            if isinstance(metrics.get(f), dict) and metrics[f].get("data"):
                continue
            if rev == "workspace":
                try:
                    metrics[f] = {"data": json.loads((cwd / f).read_text())}
                except (OSError, ValueError):
                    pass
            elif rev:
                wanted.append((metrics, f, f"{rev}:{f}"))
    if wanted:
        # one git process for every (revision, file): `cat-file --batch` answers in order
        blob = "".join(w[2] + "\n" for w in wanted).encode()
        res = subprocess.run(["git", "cat-file", "--batch"], cwd=cwd, input=blob,
                             capture_output=True, check=True).stdout
        pos = 0
        for metrics, f, _ in wanted:
            end = res.index(b"\n", pos)
            header = res[pos:end].split()
            pos = end + 1
            if len(header) >= 3 and header[1] == b"blob":
                size = int(header[2])
                body, pos = res[pos:pos + size], pos + size + 1
                try:
                    metrics[f] = {"data": json.loads(body)}
                except ValueError:
                    pass
    return shown


def walk_exp_records(node: Any) -> Iterable[dict]:
    """Every record of ``dvc exp show --json`` output that has ``data`` with params/metrics:
    the workspace, each baseline commit and each experiment (DVC 3 nests experiments under
    ``experiments[].revs[]``)."""
    if isinstance(node, list):
        for x in node:
            yield from walk_exp_records(x)
    elif isinstance(node, dict):
        data = node.get("data")
        if isinstance(data, dict) and ("params" in data or "metrics" in data):
            yield node
        for k in ("experiments", "revs"):
            if k in node:
                yield from walk_exp_records(node[k])


def file_data(section: Any, suffix: str) -> dict:
    """The ``data`` dict of the file in a DVC params/metrics section whose path ends with
    ``suffix`` (paths are relative to the repository root)."""
    if not isinstance(section, dict):
        return {}
    for path, v in section.items():
        if str(path).replace("\\", "/").endswith(suffix) and isinstance(v, dict):
            return v.get("data") or {}
    return {}


__all__ = ["attach_out_metrics", "exp_show", "file_data", "out_metric_files",
           "walk_exp_records"]
