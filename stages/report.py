"""Stage `report`: the papers' tables (paper 000 Tables 1-4; biaslab/report.py) as markdown,
one flat metrics file for `dvc metrics diff`, and bar charts.

params: report.digits, filters.names, filters.weights (Table 4's current row)
in:   metrics/classification.json (eval_classifier), metrics/captioning.json (eval_captioner),
      metrics/artifact.json (artifact_test), metrics/artifact_captioner.json
      (artifact_captioner), metrics/select.json (select),
      metrics/human_bias.json (human_bias), metrics/bcs.json (bcs_synthesize),
      metrics/dcg_apply.json (dcg_apply)
out:  plots/report/tables.md, metrics/report.json ({"table1/<row>/<column>": mean, ...}),
      plots/report/table1.png, table2.png, table3.png

Table 4 across filter combinations needs one experiment per combination:
`python scripts/filter_ablation.py --run` queues and runs them, `--collect` writes
plots/report/table4.md from `dvc exp show --json`.
"""
import json
import sys
from pathlib import Path

from biaslab import report as R
from biaslab.io import InputError, atomic_path, load_params, write_json

IN = {"classification": "metrics/classification.json", "captioning": "metrics/captioning.json",
      "artifact": "metrics/artifact.json",
      "artifact_captioner": "metrics/artifact_captioner.json", "select": "metrics/select.json",
      "human_bias": "metrics/human_bias.json", "bcs": "metrics/bcs.json",
      "dcg_apply": "metrics/dcg_apply.json"}
OUT = Path("plots/report")


def _read(path: str) -> dict:
    p = Path(path)
    if not p.is_file():
        raise InputError(path, "missing (run the stage that writes it)")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise InputError(path, f"invalid JSON ({e})") from e


def _bar_chart(path: Path, table: dict, columns, title: str, ideal: dict | None = None) -> None:
    """One panel per column, one bar per method with the std as error bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = list(table)
    cols = [(c, h) for c, h in columns if any(table[r][c][0] is not None for r in rows)]
    if not rows or not cols:
        return
    fig, axes = plt.subplots(1, len(cols), figsize=(3.2 * len(cols), 0.45 * len(rows) + 1.2),
                             squeeze=False)
    for ax, (c, h) in zip(axes[0], cols):
        means = [table[r][c][0] if table[r][c][0] is not None else float("nan") for r in rows]
        stds = [table[r][c][1] or 0.0 for r in rows]
        ax.barh(range(len(rows)), means, xerr=stds, color="#4c72b0", alpha=0.85)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([R.ROW_NAMES.get(r, r) for r in rows] if ax is axes[0][0] else [])
        ax.invert_yaxis()
        ax.set_title(h, fontsize=10)
        if ideal and c in ideal:
            ax.axvline(ideal[c], color="k", lw=0.8, ls="--")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def main() -> None:
    params = load_params()
    digits = int((params.get("report") or {}).get("digits", 1))
    filt = params.get("filters") or {}
    m = {k: _read(v) for k, v in IN.items()}
    t1, t2, t3 = R.table1(m["classification"]), R.table2(m["captioning"]), \
        R.table3(m["artifact"])
    t3c = R.table3(m["artifact_captioner"])
    t4 = R.table4_current(m["select"], m["captioning"], filt.get("names", []),
                          filt.get("weights", []))
    hb = m["human_bias"]
    bcs = m["bcs"]
    apply_ = m["dcg_apply"]
    mix = ":".join(f"{float((bcs.get('mix') or {}).get(t, 0)):g}" for t in ("swap", "t5", "merged"))
    seeds1 = len((next(iter(m["classification"].values()), {}) or {}).get("per_seed", []))
    lines = [
        "# Bias report",
        "",
        "Every cell is mean ± std over seeds. Ratio = max(r, 1/r) with r = #man / #woman "
        "predictions (paper 000 sec. 3.1); 1 is unbiased. Leakage = LK_M - LK_D (Eq. 7) and "
        "LIC = LIC_M - LIC_D (thesis Eq. 2.11), x100. Models are the tiny offline tier unless "
        "`models: paper` is composed: not comparable with the papers' numbers.",
        "",
        f"## Table 1: multi-label classification ({seeds1} seeds)",
        "",
        R.markdown(t1, R.TABLE1_COLUMNS, digits),
        "",
        "## Table 2: image captioning",
        "",
        R.markdown(t2, R.TABLE2_COLUMNS, digits),
        "",
        f"Human captions of the dataset (stage human_bias): Ratio {R.cell(hb.get('ratio'), None, 2)}, "
        f"Error {R.cell(hb.get('error'), None, 1)}, LIC_D {R.cell(hb.get('LIC_D'), hb.get('LIC_D_std'), 1)} "
        f"(classifier {hb.get('lic_classifier', '?')}).",
        "",
        "## Table 3: synthetic-artifact test",
        "",
        "Ratio here is the raw r = #man / #woman on the real test images (orig) and on the same "
        "images with a random body part inpainted (inp); Δ = 100 |Ratio_orig - Ratio_inp| / "
        "Ratio_orig. A large Δ means the model reacts to inpainting artifacts.",
        "",
        "Multi-label classifiers (gender outputs):",
        "",
        R.markdown(t3, R.TABLE3_COLUMNS, 2),
        "",
        "Captioners (caption gender):",
        "",
        R.markdown(t3c, R.TABLE3_COLUMNS, 2),
        "",
        "## Table 4: filter ablation",
        "",
        "This workspace's row (filters.weights over " + ", ".join(filt.get("names", [])) + "); "
        "Object / Color / Prompt are the selected candidates' mean filter scores (automatic "
        "stand-ins for the paper's human ratings). All combinations: "
        "`python scripts/filter_ablation.py --run --collect` (writes plots/report/table4.md).",
        "",
        R.table4_markdown(t4),
        "",
        "## LIBRA",
        "",
        f"Biased caption synthesis (paper 003, Table 1 mix "
        f"swap:t5:merged = {mix}): "
        f"{bcs.get('total', DASH)} captions "
        f"({', '.join(f'{k}: {v}' for k, v in (bcs.get('selected') or {}).items())}); mean "
        f"increase of gender predictability d (Eq. 6) of the kept T5 captions = "
        f"{R.cell((bcs.get('d_mean') or {}).get('A_GC'), None, 3)}. Samples: "
        f"plots/libra/samples.md.",
    ]
    for name in ("human", "swapped", "pred"):
        a = apply_.get(name)
        if isinstance(a, dict) and a.get("before"):
            b, f = a["before"], a["after"]
            lines.append(f"DCG on `{name}` captions ({a.get('n')}): gender wrong "
                         f"{100 * b.get('wrong', 0):.1f}% -> {100 * f.get('wrong', 0):.1f}%, "
                         f"correct {100 * b.get('correct', 0):.1f}% -> "
                         f"{100 * f.get('correct', 0):.1f}%.")
    lines.append("")
    OUT.mkdir(parents=True, exist_ok=True)
    with atomic_path(OUT / "tables.md") as tmp:
        tmp.write_text("\n".join(lines))
    write_json("metrics/report.json", R.flat_metrics({"table1": t1, "table2": t2, "table3": t3,
                                                     "table3_captioner": t3c}))
    _bar_chart(OUT / "table1.png", t1, R.TABLE1_COLUMNS[:3], "Table 1: classification",
               {"ratio": 1.0, "leakage": 0.0})
    _bar_chart(OUT / "table2.png", t2, R.TABLE2_COLUMNS[:6], "Table 2: captioning",
               {"ratio": 1.0, "LIC": 0.0})
    _bar_chart(OUT / "table3.png", {**{f"{k} (clf)": v for k, v in t3.items()},
                                    **{f"{k} (cap)": v for k, v in t3c.items()}},
               R.TABLE3_COLUMNS, "Table 3: artifact test")
    print("\n".join(lines))


DASH = R.DASH

if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        sys.exit(f"report: {e}")
