"""`dvc exp show` that fits a terminal: the params that vary and the headline metrics.

usage (from the repository root):
    python scripts/exp_table.py                      # workspace, HEAD and its experiments
    python scripts/exp_table.py -- -a                # ... of every branch (args after `--`
    python scripts/exp_table.py -- --rev main -n 3   #     go to `dvc exp show`)
    python scripts/exp_table.py --metrics mAP LIC --methods original synthetic
    python scripts/exp_table.py --json-file exp.json # a saved `dvc exp show --json`

`dvc exp show` prints every param and every metric (over a thousand columns here). This view
reads `dvc exp show --json` and prints two tables, each at most --width columns (default: the
terminal's width, $COLUMNS, else 120):

1. **params that vary**: one row per experiment (workspace, baseline commits, experiments), one
   column per params.yaml key whose value differs between them (dotted names; a param absent
   from one record counts as different). Too many to fit as columns -> one `key=value` line per
   experiment, wrapped.
2. **headline**: metrics/summary_full.json (stage report; a plain out read from each
   revision's Git commit, ``biaslab.report.dvcview.attach_out_metrics``: DVC registers only the
   compact metrics/summary.json as a metric): one row per experiment x method
   (original, oversample, ..., original+LIBRA), one column per metric (default Leakage,
   Ratio (classifier), Ratio (captioner), LIC, Error). A cell is ``mean Δdiff±h``: the mean over
   seeds and the difference from Original with the half-width h of its Welch 95 % CI (the
   Original row shows ``mean ±ci95``); ``*`` marks a difference whose CI excludes 0; ``∞``
   a mean with infinite seeds (Ratio with a never-predicted gender); ``–`` not measured.
   Columns that do not fit are dropped from the right, with a note saying which.
3. **noise floor**: per metric, the half-width of the 95 % CI of a
   difference between two revisions of Original with its n seeds (``stats.noise_floor`` of
   the seed-to-seed std): a difference between two experiments smaller than it is seed noise.

For two branches: `dvc metrics diff main <branch>` (same metrics, as a diff) or
`python scripts/exp_table.py -- -a`.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from biaslab.report.dvcview import attach_out_metrics, file_data, walk_exp_records  # noqa: E402
from biaslab.runtime.stats import noise_floor  # noqa: E402

SUMMARY = "metrics/summary_full.json"
PARAMS = "params.yaml"
#: default metric columns (keys of metrics/summary.json rows) and their short headers
DEFAULT_METRICS = ("Leakage", "Ratio (classifier)", "Ratio (captioner)", "LIC", "Error")
HEADERS = {"Ratio (classifier)": "Ratio clf", "Ratio (captioner)": "Ratio cap"}
#: decimals per metric (prefix match); others 1 (the tables' x100 scale)
DIGITS = {"Ratio": 2}
GAP = "  "


def record_name(rec: Mapping[str, Any]) -> str:
    """workspace / the experiment or branch name / the short commit of a DVC exp record."""
    rev = str(rec.get("rev") or (rec.get("data") or {}).get("rev") or "?")
    if rev == "workspace":
        return "workspace"
    return str(rec.get("name") or rev[:7])


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    """Nested params -> {"a.b.c": value}; lists stay whole (one value)."""
    if not isinstance(d, Mapping):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def records(exp_show: Any, params_file: str = PARAMS,
            summary_file: str = SUMMARY) -> list[dict]:
    """One dict per record of ``dvc exp show --json`` output, in DVC's order:
    ``{"name", "rev", "params": {dotted key: value} of params_file, "summary": the data of
    summary_file ({} when the record has none, e.g. a failed experiment)}``."""
    out = []
    for rec in walk_exp_records(exp_show):
        data = rec["data"]
        out.append({"name": record_name(rec), "rev": str(data.get("rev") or rec.get("rev")),
                    "params": flatten(file_data(data.get("params"), params_file)),
                    "summary": file_data(data.get("metrics"), summary_file)})
    return out


def varying(recs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Dotted params keys whose value differs between the records (sorted); a key missing from
    some record counts as differing. Fewer than two records -> []."""
    if len(recs) < 2:
        return []
    keys = sorted(set().union(*(r["params"] for r in recs)))
    missing = object()

    def norm(v):
        return json.dumps(v, sort_keys=True) if v is not missing else "\0missing"
    return [k for k in keys if len({norm(r["params"].get(k, missing)) for r in recs}) > 1]


def _value(v: Any) -> str:
    if isinstance(v, str):
        return v
    if v is None:
        return "null"
    return json.dumps(v, separators=(",", ":"))


def _num(x: Any) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def cell(rec: Mapping[str, Any] | None, digits: int = 1) -> str:
    """One headline cell (see the module docstring): ``"12.3 Δ-1.2±0.8*"``, ``"12.3 ±0.8"``
    for Original, ``"∞"`` / ``"–"``.

    Args:
        rec: a metrics/summary.json entry ``{mean, ci95, n, n_inf, diff, diff_lo, diff_hi}``
            (diff* absent for Original), or None.
        digits: decimals.
    """
    if not rec:
        return "–"
    m = _num(rec.get("mean"))
    if m is None:
        txt = "∞" if int(rec.get("n_inf") or 0) else "–"
    else:
        txt = f"{m:.{digits}f}"
    if "diff" not in rec and "diff_lo" not in rec:      # the reference row
        ci = _num(rec.get("ci95"))
        return txt + (f" ±{ci:.{digits}f}" if ci is not None and m is not None else "")
    d, lo, hi = (_num(rec.get(k)) for k in ("diff", "diff_lo", "diff_hi"))
    if d is None:
        return txt + " Δ–"
    txt += f" Δ{d:+.{digits}f}"
    if lo is not None and hi is not None:
        txt += f"±{(hi - lo) / 2:.{digits}f}"
        if lo > 0 or hi < 0:
            txt += "*"
    return txt


def _digits(metric: str) -> int:
    return next((v for k, v in DIGITS.items() if metric.startswith(k)), 1)


def _clip(s: str, w: int) -> str:
    return s if len(s) <= w else s[:max(1, w - 1)] + "…"


def _render(header: Sequence[str], rows: Sequence[Sequence[str]], widths: Sequence[int],
            right: Sequence[bool]) -> list[str]:
    def line(vals):
        return GAP.join((_clip(v, w).rjust(w) if r else _clip(v, w).ljust(w))
                        for v, w, r in zip(vals, widths, right)).rstrip()
    return [line(header), GAP.join("-" * w for w in widths)] + [line(r) for r in rows]


def _fit(header: list[str], rows: list[list[str]], width: int, n_fixed: int,
         min_fixed: int = 8) -> tuple[list[str], list[list[str]], list[int], list[str]]:
    """Column widths that fit ``width``: first shrink the ``n_fixed`` leading (label) columns
    down to ``min_fixed``, then drop trailing columns. Returns header, rows, widths and the
    dropped headers."""
    header, rows = list(header), [list(r) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    dropped: list[str] = []

    def total():
        return sum(widths) + len(GAP) * (len(widths) - 1)
    for i in range(n_fixed):
        over = total() - width
        if over > 0:
            widths[i] = max(min(widths[i], min_fixed), widths[i] - over)
    while total() > width and len(widths) > n_fixed + 1:
        dropped.insert(0, header.pop())
        widths.pop()
        for r in rows:
            r.pop()
    return header, rows, widths, dropped


def params_table(recs: Sequence[Mapping[str, Any]], width: int = 120) -> str:
    """The params that vary (module docstring, part 1), at most ``width`` columns."""
    keys = varying(recs)
    if not recs:
        return "no experiments"
    if not keys:
        return "params: identical in all records" if len(recs) > 1 else "params: one record"
    names = [r["name"] for r in recs]
    header = ["experiment", *keys]
    rows = [[n, *(_value(r["params"].get(k, "–")) for k in keys)] for n, r in zip(names, recs)]
    h, rs, w, dropped = _fit(header, rows, width, n_fixed=1)
    if not dropped:
        return "\n".join(["params that vary:", *_render(h, rs, w, [False] * len(h))])
    lines = ["params that vary:"]       # too many columns: key=value lines
    nw = min(max(len(n) for n in names), 24)
    for n, r in zip(names, recs):
        body = "  ".join(f"{k}={_value(r['params'].get(k, '–'))}" for k in keys)
        lines += textwrap.wrap(body, width=width, initial_indent=_clip(n, nw).ljust(nw) + GAP,
                               subsequent_indent=" " * (nw + len(GAP)), break_on_hyphens=False)
    return "\n".join(lines)


def headline_table(recs: Sequence[Mapping[str, Any]], width: int = 120,
                   metrics: Sequence[str] = DEFAULT_METRICS,
                   methods: Iterable[str] | None = None) -> str:
    """The headline metrics (module docstring, part 2), at most ``width`` columns.

    Rows: each record's summary rows (methods) in the file's order, filtered to ``methods``
    when given; records without summary say so in one row. Columns: ``metrics`` that at least
    one row has."""
    want = list(methods) if methods else None
    present = {m for r in recs for row in r["summary"].values() if isinstance(row, Mapping)
               for m in row}
    cols = [m for m in metrics if m in present] or list(metrics)
    header = ["experiment", "method", *(HEADERS.get(m, m) for m in cols)]
    rows: list[list[str]] = []
    for r in recs:
        meth = [k for k, v in r["summary"].items() if isinstance(v, Mapping)]
        if want is not None:
            meth = [k for k in want if k in r["summary"]]
        if not meth:
            rows.append([r["name"], f"(no {Path(SUMMARY).name})", *[""] * len(cols)])
            continue
        for i, k in enumerate(meth):
            rows.append([r["name"] if i == 0 else "", k,
                         *(cell(r["summary"][k].get(m), _digits(m)) for m in cols)])
    h, rs, w, dropped = _fit(header, rows, width, n_fixed=2)
    out = _render(h, rs, w, [False, False] + [True] * (len(h) - 2))
    note = ("mean Δ difference from original ±95 % CI half-width (Welch, over seeds); "
            "* CI excludes 0")
    if dropped:
        note += f"; not shown (too wide): {', '.join(dropped)} -- use --metrics"
    return "\n".join([f"headline ({SUMMARY}):", *out, *textwrap.wrap(note, width=width),
                      *textwrap.wrap(noise_line(recs, cols), width=width)])


def noise_line(recs: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> str:
    """``noise floor (...): Leakage ±1.3, ...`` from the first record whose Original row has
    the metric with a std and n (module docstring, part 3)."""
    parts = []
    for m in metrics:
        for r in recs:
            rec = (r["summary"].get("original") or {}).get(m) if isinstance(
                r["summary"].get("original"), Mapping) else None
            std, n = _num((rec or {}).get("std")), int((rec or {}).get("n") or 0)
            nf = noise_floor(std, n) if std is not None else None
            if nf is not None:
                parts.append(f"{HEADERS.get(m, m)} ±{nf:.{_digits(m)}f} (n={n})")
                break
    if not parts:
        return "noise floor: not available (no seed std in the summary)"
    return ("noise floor (95 %, a difference between two revisions of original that is "
            "seed noise): " + ", ".join(parts) + ". Smaller than tables.md's detectable "
            "difference by design: that one is the widest control's spread at 80 % power")


def format_exp_table(exp_show: Any, width: int = 120, metrics: Sequence[str] = DEFAULT_METRICS,
                     methods: Iterable[str] | None = None, workspace: bool = True) -> str:
    """Both tables of the module docstring from ``dvc exp show --json`` output (a list of
    records as DVC 3 prints it); every line at most ``width`` characters."""
    recs = records(exp_show)
    if not workspace:
        recs = [r for r in recs if r["name"] != "workspace"]
    return params_table(recs, width) + "\n\n" + headline_table(recs, width, metrics, methods)


def exp_show_json(extra: Sequence[str]) -> Any:
    """Run ``dvc exp show --json [extra]`` in the current directory and parse its output."""
    try:
        p = subprocess.run(["dvc", "exp", "show", "--json", *extra], capture_output=True,
                           text=True, check=False)
    except FileNotFoundError:
        sys.exit("exp_table: `dvc` not found on PATH (activate the project's venv)")
    if p.returncode != 0:
        sys.exit(f"exp_table: dvc exp show failed:\n{p.stderr.strip()}")
    return json.loads(p.stdout)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--width", type=int, default=shutil.get_terminal_size((120, 24)).columns,
                    help="maximum line length (default: the terminal's, $COLUMNS, else 120)")
    ap.add_argument("--metrics", nargs="+", default=list(DEFAULT_METRICS),
                    help="metrics/summary.json columns (e.g. mAP Leakage LIC)")
    ap.add_argument("--methods", nargs="+", default=None,
                    help="summary rows to show (default: all)")
    ap.add_argument("--no-workspace", action="store_true", help="leave out the workspace")
    ap.add_argument("--json-file", help="read a saved `dvc exp show --json` instead of running it")
    ap.add_argument("dvc_args", nargs=argparse.REMAINDER,
                    help="after `--`: arguments for `dvc exp show` (-a, -A, --rev R, -n N)")
    a = ap.parse_args(argv)
    extra = [x for x in a.dvc_args if x != "--"]
    data = json.loads(Path(a.json_file).read_text()) if a.json_file else \
        attach_out_metrics(exp_show_json(extra), Path.cwd())
    print(format_exp_table(data, a.width, a.metrics, a.methods, not a.no_workspace))
    return 0


if __name__ == "__main__":
    sys.exit(main())
