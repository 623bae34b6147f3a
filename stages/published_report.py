"""Stage `published_report` (published/dvc.yaml): the thesis' published numbers beside
ours for the nine released captioners (biaslab.report.published).

in:  metrics/published.json (stage published_bias), published/paper_tables.csv (the thesis'
     Tables 2.1, 2.2 and 2.5 typed in: value, printed ± or rounding, the caption's line)
out: plots/report/published.md (per model and metric: the paper's value, ours with its 95 % CI
     and n, the difference, whether ours lies within the paper's spread; the orderings; what
     these files cannot give), metrics/published_compare.json ({rows, ordering}),
     plots/published/lic_m.png (LIC_M ours vs the thesis', gender and race)

Usage: python stages/published_report.py [--metrics ...] [--paper ...] [--out ...]
"""
from __future__ import annotations

from pathlib import Path

from biaslab.data import published as P
from biaslab.report.published import compare_published, plot_lic_m, render
from biaslab.runtime.io import (InputError, atomic_path, load_params, read_json, run_stage,
                                stage_parser, write_json)


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml")   # validated (no param is read)
    ap.add_argument("--metrics", default="metrics/published.json")
    ap.add_argument("--paper", default="published/paper_tables.csv")
    ap.add_argument("--out", default="plots/report/published.md")
    ap.add_argument("--compare", default="metrics/published_compare.json")
    ap.add_argument("--plot", default="plots/published/lic_m.png")
    a = ap.parse_args(argv)
    load_params(a.params)      # a bad param anywhere stops here, as at every stage
    metrics = read_json(a.metrics)
    if not isinstance(metrics, dict) or "models" not in metrics:
        raise InputError(a.metrics, "not the output of stage published_bias (no `models`)")
    rows, orders = compare_published(metrics, P.read_paper_tables(a.paper))
    # the rows we have a value for (the others are the report's "not available" list)
    write_json(a.compare, {"rows": [r for r in rows if r["ours"] is not None],
                           "ordering": orders})
    plot_lic_m(rows, metrics["lic"]["classifier"], Path(a.plot))
    text = render(metrics, rows, orders)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(a.out, ".md") as tmp:
        tmp.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    run_stage(main)
