"""copy_paste vs render: does the artifact test separate the two counterfactual backends?
.

The synthetic profile's default backend ``render`` re-draws the person (no pixel outside the
person changes: an oracle without inpainting artifacts); ``copy_paste`` pastes a donor person
into the masked box, with the seams, scale and lighting mismatches of a real edit. Paper 000's
synthetic-artifact test (sec. 4.3, Table 3) measures how much a model's gender predictions move
when a random body part of the *real* test images is inpainted: a model trained on
counterfactuals whose gender comes with an artifact should react to it more.

Expected on the synthetic profile, per model family (classifier: ``metrics/artifact.json``,
captioner: ``metrics/artifact_captioner.json``) and per counterfactual training set
(S_synthetic, S_augment): Δ (Table 3, per seed) is larger when the training set was made with
``copy_paste`` than with ``render`` (a Welch 95 % CI of the difference above 0 holds; below 0
fails; else inconclusive). The probe sensitivities and Table 1's Leakage are shown side by side
without a verdict (the backends should not differ there; nothing in the papers predicts a sign).

The two runs are two DVC experiments (or the workspace and one experiment) that differ in
``generate.backend``; ``scripts/backend_compare.py`` queues the missing one and writes
plots/report/backend_compare.md / .json.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from biaslab.runtime import stats
from biaslab.registry import row_names
from biaslab.report.dvcview import file_data, walk_exp_records
from biaslab.analysis.sweep import dig

#: (family, metrics file) of the synthetic-artifact test
ARTIFACT_FILES = (("classifier", "metrics/artifact.json"),
                  ("captioner", "metrics/artifact_captioner.json"))
#: counterfactual training sets whose backend matters
ROWS = ("synthetic", "augment")
#: side-by-side metrics without a verdict: (label, metrics file, path with {row})
CONTEXT = (("Leakage (classifier)", "metrics/classification.json", ("{row}", "Leakage")),
           ("sensitivity: cast (classifier)", "metrics/probe.json",
            ("classifier", "{row}", "cast")),
           ("sensitivity: objects (classifier)", "metrics/probe.json",
            ("classifier", "{row}", "objects")))


def runs_by_backend(exp_show: Any) -> dict[str, dict]:
    """``{backend: record}`` from ``dvc exp show --json``: the first record (DVC's order:
    workspace, baseline, experiments) of each ``generate.backend`` on the synthetic source,
    among records that have ``metrics/artifact.json``. ``record`` is the DVC ``data`` dict
    plus ``"name"``."""
    out: dict[str, dict] = {}
    for rec in walk_exp_records(exp_show):
        data = rec["data"]
        params = file_data(data.get("params"), "params.yaml")
        src = dig(params, ("data", "source"))
        backend = dig(params, ("generate", "backend"))
        if backend is None or (src is not None and src != "synthetic"):
            continue
        if not file_data(data.get("metrics"), "metrics/artifact.json"):
            continue
        if backend not in out:
            out[str(backend)] = {**data, "name": rec.get("name") or data.get("name")
                                 or rec.get("rev")}
    return out


def checks(runs: Mapping[str, Mapping[str, Any]], a: str = "copy_paste",
           b: str = "render") -> list[dict]:
    """The verdicts: per family and row, Δ(backend ``a``) - Δ(backend ``b``) over the
    per-seed Δ of Table 3, expected ``> 0``. From the ``delta_seeds`` records (mean, sample
    std, n over seeds; ``stats.difference_of_records``: Welch 95 % CI) because
    ``dvc exp show --json`` drops the ``per_seed`` lists.

    Args:
        runs: :func:`runs_by_backend` output.
        a, b: the backend expected to carry artifacts, and the oracle.

    Returns:
        checks in ``biaslab.analysis.validity``'s format (``id``, ``claim``, ``expect``, ``reference``,
        ``mean``, ``lo``, ``hi``, ``n``, ``verdict``); empty when either run is missing.
    """
    if a not in runs or b not in runs:
        return []
    out = []
    for fam, f in ARTIFACT_FILES:
        ma, mb = file_data(runs[a].get("metrics"), f), file_data(runs[b].get("metrics"), f)
        for row in ROWS:
            ra, rb = (dig(m, (row, "delta_seeds")) for m in (ma, mb))
            if not isinstance(ra, Mapping) or not isinstance(rb, Mapping):
                continue
            d = stats.difference_of_records(ra, rb)
            out.append({
                "id": f"backend/{fam}/{row}/delta:{a}>{b}",
                "claim": f"{fam}: {row_names().get(row, row)}'s Table 3 Δ larger with {a} "
                         f"counterfactuals than with {b}",
                "expect": ">", "reference": 0.0, "mean": d["diff"], "lo": d["lo"],
                "hi": d["hi"], "n": min(d["n"], d["n_ref"]),
                "verdict": stats.verdict(d["lo"], d["hi"], ">", 0.0)})
    return out


def markdown(runs: Mapping[str, Mapping[str, Any]], a: str = "copy_paste",
             b: str = "render", digits: int = 2) -> str:
    """Side-by-side tables (Δ per family, the CONTEXT metrics) of the two backends, cells
    ``mean ± 95 % CI``, and the verdicts (``biaslab.analysis.verdicts.markdown``)."""
    from biaslab.analysis import verdicts
    if a not in runs or b not in runs:
        have = ", ".join(f"`{k}` ({v.get('name')})" for k, v in runs.items()) or "none"
        return (f"Needs one synthetic run per backend (`{a}` and `{b}`); found: {have}. "
                "Run `python scripts/backend_compare.py --run --collect`.\n")
    lines = [f"Runs: `{b}` = {runs[b].get('name')}, `{a}` = {runs[a].get('name')}.", ""]
    rows = [(f"Table 3 Δ ({fam})", f, ("{row}", "delta_seeds")) for fam, f in ARTIFACT_FILES]
    lines += ["| metric | variant | " + f"{b} | {a} |", "|---|---|---|---|"]
    for label, f, path in (*rows, *CONTEXT):
        for row in ROWS:
            cells = []
            for k in (b, a):
                rec = dig(file_data(runs[k].get("metrics"), f),
                           [p.format(row=row) for p in path])
                cells.append(stats.format_cell(rec, digits) if isinstance(rec, Mapping)
                             else "–")
            lines.append(f"| {label} | {row_names().get(row, row)} | " + " | ".join(cells)
                         + " |")
    cs = checks(runs, a, b)
    lines += ["", verdicts.markdown(cs) if cs else "No Table 3 Δ over seeds in both runs.", ""]
    return "\n".join(lines)


__all__ = ["ARTIFACT_FILES", "ROWS", "runs_by_backend", "checks", "markdown"]
