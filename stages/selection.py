"""Stage `select`: weighted rank selection of one candidate per (image, group) (paper 000
Eq. 2; params `filters`; with `filters.knn` first the GenSynth KNN gate and its per-image
retention rule, paper 001 sec. 4.2, counts in metrics/select.json `knn`) -> data/select/selected.parquet, metrics/select.json,
plots/filters/ (Fig. 4 style grid, score distributions). Only this stage and its dependents
re-run when `filters.weights` changes. Param `attribute`: for skin tone the colour fidelity
weight is 0 (paper 000 appendix B.1; `weights` in metrics/select.json are the ones used)."""
import sys

import numpy as np

from biaslab.analysis.figures import filter_grid, score_distributions
from biaslab.counterfactual.filters import attribute_weights, choice_report, knn_gate, select
from biaslab.runtime.io import (load_params, read_parquet, run_stage, stage_parser, write_json,
                                write_parquet)


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    p = params["filters"]
    scores = read_parquet("data/score/scores.parquet")
    names = list(p["names"])
    # skin tone: no colour fidelity (paper 000 appendix B.1)
    weights = attribute_weights(names, list(p["weights"]), params.get("attribute", "gender"))
    if weights == [float(w) for w in p["weights"]]:
        weights = list(p["weights"])    # as given (ints stay ints in metrics/select.json)
    knn = None
    if p.get("knn"):  # GenSynth KNN filter as a hard gate, with its per-image retention rule
        scores, knn = knn_gate(scores)
        if scores.empty:
            raise SystemExit("select: the KNN filter (filters.knn) left no image with an "
                             "accepted edit for every group")
    sel = select(scores, names, weights)
    write_parquet("data/select/selected.parquet", sel)
    metrics = {"weights": dict(zip(names, weights)), "selected": len(sel),
               "candidates": len(scores)}
    metrics.update(choice_report(scores, sel, names, weights))
    for line in metrics["warnings"]:
        print(f"select: warning: {line}", file=sys.stderr)
    if knn is not None:
        metrics["knn"] = knn
    for f in names:
        v_all = scores[f].replace([np.inf], np.nan)
        v_sel = sel[f].replace([np.inf], np.nan)
        metrics[f"{f}/mean_selected"] = float(v_sel.mean())
        metrics[f"{f}/mean_all"] = float(v_all.mean())
    write_json("metrics/select.json", metrics)
    originals = read_parquet("data/prepared/images.parquet").set_index("image_id")["path"]
    filter_grid(scores, originals.to_dict(), names, weights, "plots/filters/grid.png",
                n_rows=p.get("grid_rows", 6))
    score_distributions(scores, names, "plots/filters/distributions.png")
    print(metrics)
    return 0


if __name__ == "__main__":
    run_stage(main)
