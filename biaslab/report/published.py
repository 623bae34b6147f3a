"""The published captioners' report (the logic of stage
``published_report``, which now only parses its arguments and writes the files): the thesis'
numbers (``published/paper_tables.csv``, :func:`biaslab.data.published.read_paper_tables`)
beside ours (``metrics/published.json``, stage ``published_bias``) for the nine released
captioners.

:func:`compare_published` gives the compared rows and the orderings; :func:`render` the
markdown; :func:`plot_lic_m` the figure.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd

from biaslab.data import published as P
from biaslab.runtime.io import atomic_path

#: what the released files cannot give, and what a user must add
NOT_AVAILABLE = [
    ("LIC_D, LIC (Tables 2.1, 2.2, 2.3, 2.5)", "the human captions of the same COCO val2014 "
     "images (COCO 2014 `captions_val2014.json`): LIC_D trains the same classifier on them"),
    ("BA (Table 2.1)", "the human training captions, the reference of Eq. 2.3 (COCO 2014 "
     "`captions_train2014.json`); BA_label below uses the images' perceived gender instead"),
    ("DBA_G, DBA_O (Table 2.1)", "COCO's object annotations of the images "
     "(`instances_val2014.json`)"),
    ("BLEU-4, CIDEr, METEOR, ROUGE-L (Table 2.1)", "the reference captions "
     "(`captions_val2014.json`)"),
    ("DBAC (Nair, Tokas & Kerner 2025)", "the human captions of the same images "
     "(`published.human_captions`): DBAC's lambda_D trains the attacker on them"),
    ("LIC with BERT-ft / BERT-pre (Tables 2.2, 2.5)", "the paper tier's `bert-base-uncased` "
     "(Hugging Face cache; `published.lic.classifier: bert_ft`), a GPU for its time"),
]


QUALITY = ("BLEU-4", "CIDEr", "METEOR", "ROUGE-L")


def ours_records(metrics: dict) -> dict:
    """{model: {"<study>/<encoder>/<metric>": record}} from metrics/published.json."""
    enc = metrics["lic"]["classifier"]
    out = {}
    for m, d in metrics["models"].items():
        g, r = d["gender"], d["race"]
        o = out[m] = {"gender//Ratio": g["Ratio"], "gender//Error": g["Error"]}
        for study, rec in (("gender", g), ("race", r)):
            for k in ("LIC_M", "LIC_D", "LIC"):      # LIC_D, LIC: with human captions only
                if k in rec:
                    o[f"{study}/{enc}/{k}"] = rec[k]
        for k, v in (g.get("quality") or {}).items():
            if k != "n_images":      # corpus scores: no interval, n = images scored
                o[f"gender//{k}"] = {"mean": v, "ci95": None, "n": g["quality"]["n_images"]}
    return out


def available(metrics: dict) -> list[tuple[str, str]]:
    """NOT_AVAILABLE less what this run computed (human captions give LIC_D, LIC, quality)."""
    if not metrics.get("human_captions"):
        return NOT_AVAILABLE
    return [(a, b) for a, b in NOT_AVAILABLE if not a.startswith(("LIC_D", "BLEU", "DBAC"))]


#: DBAC columns of the published table: (direction, record key, heading)
DBAC_COLUMNS = (("T->A", "DBAC", "T→A (prior)"), ("T->A", "DBAC_direct", "T→A (direct)"),
                ("A->T", "DBAC", "A→T (prior)"), ("A->T", "DBAC_direct", "A→T (direct)"))


def dbac_markdown(metrics: dict) -> list[str]:
    """The DBAC table of the gender study (one row per model: each column mean ± 95 % CI over
    the DBAC seeds, x100 as Table 2, with the images and the number of seeds n; "skipped: why"
    where a direction could not run); empty when no model has DBAC results."""
    models = [m for m in P.MODELS if m in metrics["models"]]
    recs = {m: metrics["models"][m]["gender"].get("DBAC") for m in models}
    if not any(isinstance(r, dict) and "skipped" not in r for r in recs.values()):
        return []
    L = ["DBAC (Nair, Tokas & Kerner 2025; `biaslab.metrics.dbac`, the LIC attacker above, "
         "contextual substitution): > 0 means the captions make gender (T→A) or the objects "
         "(A→T) more predictable than the human captions do; × 100, mean ± 95 % CI over seeds.",
         "", "| model | " + " | ".join(h for _, _, h in DBAC_COLUMNS) + " | images | n seeds |",
         "|---|" + "---|" * (len(DBAC_COLUMNS) + 2)]
    for m in models:
        r = recs[m] or {}
        if "skipped" in r:
            L.append(f"| {P.MODELS[m]} | skipped: {r['skipped']} |"
                     + " |" * (len(DBAC_COLUMNS) + 1))
            continue
        cells = []
        for d, k, _ in DBAC_COLUMNS:
            rec = (r.get(d) or {}).get(k)
            if not isinstance(rec, dict) or rec.get("mean") is None:
                cells.append("skipped" if "skipped" in (r.get(d) or {}) else "–")
                continue
            ci = f" ± {100 * rec['ci95']:.1f}" if rec.get("ci95") is not None else ""
            cells.append(f"{100 * rec['mean']:.1f}{ci}")
        L.append(f"| {P.MODELS[m]} | " + " | ".join(cells) + f" | {r.get('n_images', '–')} | "
                 f"{len(r.get('seeds') or []) or '–'} |")
    return L + [""]


def _fmt(v, digits=1) -> str:
    """``v`` with ``digits`` decimals, "–" for None."""
    return "–" if v is None else f"{v:.{digits}f}"


def _cell(row: dict | None, digits: int) -> tuple[str, str, str, str]:
    """(paper, ours ± ci (n), diff, within) cells."""
    if row is None:
        return "–", "–", "–", "–"
    sp = (f"±{row['spread']:.{digits}f}" if row["spread_kind"] == "std"
          else f"rounding ±{row['spread']:g}")
    paper = f"{row['paper']:.{digits}f} ({sp})"
    if row["ours"] is None:
        return paper, "–", "–", "–"
    ci = f" ± {row['ci95']:.{digits}f}" if row.get("ci95") is not None else ""
    ours = f"{row['ours']:.{digits}f}{ci} (n={row['n']})"
    return paper, ours, f"{row['diff']:+.{digits}f}", "yes" if row["within"] else "**no**"


def ordering(rows: list[dict], study: str, encoder: str, metric: str) -> dict:
    """Pairs of models the thesis' spreads separate (``|a - b| > spread_a + spread_b``) and
    whether our means order them the same way.

    Returns ``{"metric", "study", "encoder", "n_separated", "n_agree", "disagree": [[lower,
    higher] by the paper], "paper_order", "our_order"}`` (orders ascending)."""
    rs = [r for r in rows if (r["study"], r["encoder"], r["metric"]) == (study, encoder, metric)
          and r["ours"] is not None]
    sep, agree, dis = 0, 0, []
    for a, b in itertools.combinations(rs, 2):
        if abs(a["paper"] - b["paper"]) <= a["spread"] + b["spread"]:
            continue
        lo, hi = (a, b) if a["paper"] < b["paper"] else (b, a)
        sep += 1
        if lo["ours"] < hi["ours"]:
            agree += 1
        else:
            dis.append([lo["model"], hi["model"]])
    return {"metric": metric, "study": study, "encoder": encoder, "n_separated": sep,
            "n_agree": agree, "disagree": dis,
            "paper_order": [r["model"] for r in sorted(rs, key=lambda r: r["paper"])],
            "our_order": [r["model"] for r in sorted(rs, key=lambda r: r["ours"])]}


def plot_lic_m(rows: list[dict], encoder: str, path: Path) -> None:
    """``path`` (PNG, written atomically): LIC_M ours (± 95 % CI) against the thesis' (± its
    std), one panel per study (gender, race), the diagonal and chance (25) marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, study in zip(axes, P.STUDIES):
        rs = [r for r in rows if (r["study"], r["encoder"], r["metric"]) ==
              (study, encoder, "LIC_M") and r["ours"] is not None]
        for r in rs:
            ax.errorbar(r["paper"], r["ours"], xerr=r["spread"], yerr=r["ci95"] or 0, fmt="o",
                        ms=4, capsize=2)
            ax.annotate(P.MODELS[r["model"]], (r["paper"], r["ours"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
        if rs:
            lo = min(min(r["paper"], r["ours"]) for r in rs) - 3
            hi = max(max(r["paper"], r["ours"]) for r in rs) + 3
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.axhline(25, color="grey", lw=0.6, ls=":")
        ax.set_title(f"{study}: LIC_M ({encoder})", fontsize=10)
        ax.set_xlabel("thesis (± its std over 10 runs)")
        ax.set_ylabel("ours (± 95 % CI over seeds)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, ".png") as tmp:
        fig.savefig(tmp, dpi=90, format="png", metadata={"Software": None})
    plt.close(fig)


def render(metrics: dict, rows: list[dict], orders: list[dict]) -> str:
    """The markdown of ``plots/report/published.md``: per model and metric the thesis' value,
    ours with its 95 % CI and n, the difference and whether ours lies within the thesis'
    spread; the orderings (:func:`ordering`); the DBAC and BA_label tables; what the released
    files cannot give (:func:`available`)."""
    enc, lp = metrics["lic"]["classifier"], metrics["lic"]
    by = {(r["model"], r["study"], r["encoder"], r["metric"]): r for r in rows}
    models = [m for m in P.MODELS if m in metrics["models"]]     # the thesis' row order
    L = ["# The nine published captioners: the thesis' numbers beside ours", "",
         f"Captions: the authors' released outputs (`{metrics['root']}`, README there). "
         f"LIC_M: {enc} classifier, preset `{lp['preset']}`, {lp['seeds']} seeds, mean ± 95 % "
         "CI (t over seeds); the thesis prints mean ± std over 10 runs. Ratio, Error, BA_label: "
         "mean ± 95 % percentile-bootstrap CI over images. *within*: |ours − thesis| ≤ the "
         "thesis' ± (or half a unit of its last printed digit where it prints none). "
         "Generated by `stages/published_report.py` from `metrics/published.json` and "
         "`published/paper_tables.csv`.", ""]
    if lp["preset"] != "paper":
        L += [f"The `{lp['preset']}` preset's classifier is smaller and shorter-trained than the "
              "thesis' (`biaslab.models.textclf.default_config`), so its LIC_M is not the thesis' "
              "instrument; the `paper` preset (`-S scale=full`) is.", ""]
    L += ["## Gender (thesis Tables 2.1 and 2.2)", "",
          "| model | Ratio: thesis | ours | Δ | within | Error %: thesis | ours | Δ | within |",
          "|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        c1 = _cell(by.get((m, "gender", "", "Ratio")), 2)
        c2 = _cell(by.get((m, "gender", "", "Error")), 1)
        L.append(f"| {P.MODELS[m]} | " + " | ".join(c1 + c2) + " |")
    off = [f"{P.MODELS[r['model']]} ({r['metric']}: {r['ours']:.3f} vs {r['paper']:g})"
           for r in rows if r["table"] == "2.1" and r["metric"] in ("Ratio", "Error")
           and r["within"] is False]
    if off:
        L += ["", "Ratio and Error need no classifier, so they are a check that the released "
              "captions are the ones the thesis evaluated. Outside Table 2.1's rounding: "
              + "; ".join(off) + ". For these models the released outputs (or the printed "
              "values) differ from what the thesis computed."]
    L += ["", f"| model | LIC_M ({enc}): thesis | ours | Δ | within | BA_label (ours; not "
              "Table 2.1's BA) |", "|---|---|---|---|---|---|"]
    for m in models:
        c = _cell(by.get((m, "gender", enc, "LIC_M")), 1)
        ba = metrics["models"][m]["gender"]["BA_label"]
        bac = (f"{ba['mean']:.2f} ± {ba['ci95']:.2f} (n={ba['n']})"
               if ba.get("ci95") is not None else _fmt(ba.get("mean"), 2))
        L.append(f"| {P.MODELS[m]} | " + " | ".join(c) + f" | {bac} |")
    if metrics.get("human_captions"):
        L += ["", f"With the human captions of `{metrics['human_captions']}`:", "",
              "| model | study | LIC_D: thesis | ours | Δ | within | LIC: thesis | ours | Δ | "
              "within |", "|---|---|---|---|---|---|---|---|---|---|"]
        for m in models:
            for study in P.STUDIES:
                c1 = _cell(by.get((m, study, enc, "LIC_D")), 1)
                c2 = _cell(by.get((m, study, enc, "LIC")), 1)
                L.append(f"| {P.MODELS[m]} | {study} | " + " | ".join(c1 + c2) + " |")
        L += [""] + dbac_markdown(metrics)
        L += ["| model | " + " | ".join(f"{q}: thesis | ours | Δ" for q in QUALITY) + " |",
              "|---|" + "---|" * (3 * len(QUALITY))]
        for m in models:
            cells = []
            for q in QUALITY:
                c = _cell(by.get((m, "gender", "", q)), 1)
                cells += c[:3]
            L.append(f"| {P.MODELS[m]} | " + " | ".join(cells) + " |")
    L += ["", "## Race (thesis Tables 2.3 and 2.5; Light / Dark, captions not masked; unbiased "
              "LIC_M = 25)", "", f"| model | LIC_M ({enc}): thesis | ours | Δ | within |",
          "|---|---|---|---|---|"]
    for m in models:
        L.append(f"| {P.MODELS[m]} | " + " | ".join(_cell(by.get((m, "race", enc, "LIC_M")), 1))
                 + " |")
    L += ["", "## Orderings", "",
          "Pairs of models whose thesis values are separated by more than the sum of their "
          "spreads, and how many of them our means order the same way.", "",
          "| metric | pairs the thesis separates | same order in ours | reversed (thesis: lower < "
          "higher) |", "|---|---|---|---|"]
    for o in orders:
        name = f"{o['study']} {o['metric']}" + (f" ({o['encoder']})" if o["encoder"] else "")
        dis = ", ".join(f"{P.MODELS[a]} < {P.MODELS[b]}" for a, b in o["disagree"]) or "none"
        L.append(f"| {name} | {o['n_separated']} | {o['n_agree']} | {dis} |")
    L += [""]
    for o in orders:
        if o["metric"] == "LIC_M":
            L.append(f"- {o['study']} LIC_M, ascending: thesis "
                     + " < ".join(P.MODELS[m] for m in o["paper_order"]) + "; ours "
                     + " < ".join(P.MODELS[m] for m in o["our_order"]) + ".")
    n_within = {k: (sum(1 for r in rows if (r["study"], r["metric"]) == k and r["within"]),
                    sum(1 for r in rows if (r["study"], r["metric"]) == k
                        and r["within"] is not None))
                for k in (("gender", "Ratio"), ("gender", "Error"), ("gender", "LIC_M"),
                          ("race", "LIC_M"))}
    L += ["", "Within the thesis' spread: " + "; ".join(
        f"{s} {m} {a}/{b}" for (s, m), (a, b) in n_within.items()) + ".", "",
        "## Not available from these files", "",
        "| columns | what to add |", "|---|---|"]
    L += [f"| {a} | {b} |" for a, b in available(metrics)]
    L += ["", "BA_label: Zhao et al.'s BA (thesis Eq. 2.3) over the captions' own vocabulary with "
          "the images' perceived gender as the reference (`biaslab.data.published.ba_label`): > 0 "
          "means that among the images a word is used for, the captions name the word's "
          "majority gender more often than the images show it; 0 for a captioner that names "
          "every gender right.", ""]
    return "\n".join(L)


def compare_published(metrics: dict, paper: pd.DataFrame) -> tuple[list[dict], list[dict]]:
    """``(rows, orders)``: :func:`biaslab.data.published.compare` of our records
    (:func:`ours_records`) with the thesis' rows of the models in ``metrics``, and the
    orderings of Ratio, Error (gender) and LIC_M (gender, race) under :func:`ordering`.

    Args:
        metrics: ``metrics/published.json`` (keys ``models``, ``lic``).
        paper: :func:`biaslab.data.published.read_paper_tables`'s table.
    """
    rows = P.compare(ours_records(metrics), paper[paper["model"].isin(list(metrics["models"]))])
    enc = metrics["lic"]["classifier"]
    orders = [ordering(rows, "gender", "", "Ratio"), ordering(rows, "gender", "", "Error"),
              ordering(rows, "gender", enc, "LIC_M"), ordering(rows, "race", enc, "LIC_M")]
    return rows, orders
