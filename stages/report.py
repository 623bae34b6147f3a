"""Stage `report`: the papers' tables (paper 000 Tables 1-4; biaslab/report/) as markdown with
every cell mean ± 95 % CI and n, each bias metric's difference from Original with its CI, the
causal probe, the validity verdicts, a headline metrics file, and charts with CI error bars.

params: report, validity.margin_fraction, filters.names (Table 4's row order; its weights are
        those select recorded), generate.backend, data.source (named in the report)
in:   metrics/classification.json (eval_classifier), metrics/captioning.json (eval_captioner),
      metrics/artifact.json (artifact_test), metrics/artifact_captioner.json
      (artifact_captioner), metrics/probe.json (probe), metrics/select.json (select),
      metrics/human_bias.json (human_bias), metrics/bcs.json (bcs_synthesize),
      metrics/dcg_apply.json (dcg_apply), metrics/retrieval.json (eval_retrieval),
      metrics/controls.json (controls), metrics/datasets.json (build_datasets),
      metrics/attribute.json (eval_attribute), metrics/audit.json (audit: its attribute block),
      metrics/sensitivity.json (sensitivity: the section beside Table 1, the "confounded"
      reading of the Table 1 checks), metrics/sensitivity_captioner.json
      (sensitivity_captioner: the section beside Table 2)
out:  plots/report/tables.md,
      metrics/summary_full.json (per method mAP, Leakage, Ratio, LIC, Error, each
      {mean, ci95, std, n, diff, diff_lo, diff_hi} with the difference from Original and its
      Welch 95 % CI), metrics/summary.json (the one DVC metric, numbers only: ``compact``),
      metrics/validity.json ({"checks": [...] (each with its reason and source file),
      "summary": {holds, fails, inconclusive, not_testable, metric_not_valid_on_this_data,
      mask_not_neutral, not_informative, n}, "preconditions": [{task, metric, valid,
      not_matching}]: the metrics the control models validate, metrics/controls.json}),
      plots/report/forest.png (each mitigation's difference from Original per headline
      metric with its CI), table1.png, table2.png, table3.png, probe.png, sensitivity.png,
      sensitivity_captioner.png (bias score against feature sensitivity, one point per model),
      plots/report/index.html (tables.md and the figures as one page, biaslab.report.html)

Table 4 across filter combinations needs one experiment per combination:
`python scripts/filter_ablation.py --run` queues and runs them, `--collect` writes
plots/report/table4.md from `dvc exp show --json`. The dose-response sweep (and the checks at
planted bias 0) is `python scripts/bias_sweep.py --run --collect` (plots/report/bias_sweep.md).
"""
import json
from pathlib import Path

from biaslab.runtime.io import (InputError, atomic_path, load_params, run_stage, stage_parser,
                                write_json)
from biaslab.report import charts, document, html, sensitivity

OUT = Path("plots/report")


def _read(path: str) -> dict:
    p = Path(path)
    if not p.is_file():
        raise InputError(path, "missing (run the stage that writes it)")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise InputError(path, f"invalid JSON ({e})") from e


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    inputs = {k: _read(v) for k, v in document.INPUTS.items()}
    rep = document.build(inputs, document.ReportSettings.from_params(params))
    OUT.mkdir(parents=True, exist_ok=True)
    with atomic_path(OUT / "tables.md") as tmp:
        tmp.write_text(rep["markdown"])
    write_json("metrics/summary_full.json", rep["summary_full"])
    write_json("metrics/summary.json", rep["summary"])
    write_json("metrics/validity.json", rep["validity"])
    charts.forest_plot(OUT / "forest.png", rep["summary_full"])
    sensitivity.write_figures(OUT, inputs, document.INPUTS["sensitivity"])
    for name, table, columns, title, ideal, degenerate, xlabel in rep["charts"]:
        charts.bar_chart(OUT / name, table, columns, title, ideal, degenerate, xlabel)
    # the same report as one page with its figures, the answer first
    with atomic_path(OUT / "index.html") as tmp:
        tmp.write_text(html.page(rep["markdown"], [n for n in html.FIGURES
                                                   if (OUT / n).is_file()]), encoding="utf-8")
    print(rep["markdown"])
    return 0


if __name__ == "__main__":
    run_stage(main)
