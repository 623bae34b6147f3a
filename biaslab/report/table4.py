"""Table 4 (paper 000): the filter ablation over DVC experiments -- the selected candidates'
mean filter scores (automatic stand-ins for the paper's human ratings of object, colour and
gender fidelity) and the CLIPScore of the captioner trained on S_synthetic, one row per
filter-weight setting (``dvc exp run -S filters.weights=[...]``)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from biaslab import registry
from biaslab.report import as_record, cell, number
from biaslab.report.dvcview import file_data, walk_exp_records


#: filter-score columns of Table 4 (metrics/select.json keys) and their headers: the built-in
#: the filter combinations of paper 000 Table 4 as weights on (prompt, object, color)
TABLE4_WEIGHTS = ((1, 1, 1), (1, 1, 0), (1, 0, 1), (0, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1),
                  (0, 0, 0))

#: filters of the registry (biaslab.registry.FILTERS) in column order; plug-in filters follow
#: (:func:`table4_filters`)
TABLE4_FILTERS = tuple((f"{e.name}/mean_selected", e.display)
                       for e in sorted(registry.FILTERS.builtins(), key=lambda e: e.order))


def table4_filters(names: Iterable[str] = ()) -> tuple:
    """Table 4's filter columns: the built-in filters, then the further filters of ``names``
    (the experiments' ``filters.names``: a plug-in's), each ``(select.json key, header)``. A
    registered filter gets its label and place (``order``); one whose package is not installed
    where the report runs, its name, after them."""
    labels = registry.filter_labels()
    builtin = [e.name for e in registry.FILTERS.builtins()]
    extra = [n for n in dict.fromkeys(names) if n not in builtin]
    known = [n for n in labels if n in builtin or n in extra]
    cols = known + [n for n in extra if n not in labels]
    return tuple((f"{n}/mean_selected", labels.get(n, n)) for n in cols)


def weights_label(weights: Sequence[float], names: Sequence[str]) -> str:
    """``"prompt_adherence + color_fidelity"`` for weights (1, 0, 1); all zero: ``"No filter"``
    (selection falls back to candidate j = 0, an unfiltered draw)."""
    used = [n for n, w in zip(names, weights) if number(w)]
    if not used:
        return "No filter"
    return " + ".join(n if number(w) == 1 else f"{number(w):g}·{n}"
                      for n, w in zip(names, weights) if number(w))


def table4_from_experiments(exp_show: Any, clip_row: str = "synthetic") -> list[dict]:
    """Rows of paper 000 Table 4 from ``dvc exp show --json`` output: one per distinct
    (``filters.weights``, ``data.root``) (the first record of each, in the order DVC lists
    them: workspace, baseline, experiments), with the
    selected candidates' mean Object / Color / Prompt scores (``metrics/select.json``) and the
    CLIPScore (mean, 95 % CI half-width) of the captioner trained on ``clip_row`` (``metrics/captioning.json``),
    and the experiment name.

    The paper's columns are human ratings (object, colour, skin, gender fidelity); here the
    filters' own scores on the selected candidates stand in for them (no raters offline).
    Records without params or select metrics (e.g. a failed experiment) are skipped.
    """
    rows, seen = [], set()
    for rec in walk_exp_records(exp_show):
        data = rec["data"]
        params = file_data(data.get("params"), "params.yaml")
        filt = params.get("filters") or {}
        weights, names = filt.get("weights"), filt.get("names")
        sel = file_data(data.get("metrics"), "metrics/select.json")
        if weights is None or names is None or not sel:
            continue
        root = (params.get("data") or {}).get("root")
        key = (tuple(float(w) for w in weights), root)   # one row per weights and data source
        if key in seen:
            continue
        seen.add(key)
        cap = file_data(data.get("metrics"), "metrics/captioning.json").get(clip_row) or {}
        row = {"filters": weights_label(weights, names), "weights": list(weights), "data": root,
               "experiment": rec.get("name") or data.get("name") or rec.get("rev"),
               "CLIPScore": ((as_record(cap.get("CLIPScore")) or {}).get("mean"),
                             (as_record(cap.get("CLIPScore")) or {}).get("ci95"))}
        row["names"] = list(names)
        for k, h in table4_filters(names):
            row[h] = (number(sel.get(k)), None)
        rows.append(row)
    return rows


def table4_markdown(rows: Sequence[Mapping[str, Any]], digits: int = 3) -> str:
    """Markdown of :func:`table4_from_experiments` rows."""
    hdr = [h for _, h in table4_filters([n for r in rows for n in r.get("names") or ()])]
    lines = ["| Filters | " + " | ".join(hdr) + " | CLIPScore (S_synthetic) | data | experiment |",
             "|" + "---|" * (len(hdr) + 4)]
    for r in rows:
        cells = [cell(*r.get(h, (None, None)), digits=digits) for h in hdr]
        lines.append(f"| {r['filters']} | " + " | ".join(cells)
                     + f" | {cell(*r['CLIPScore'], digits=1)} | {r.get('data') or ''}"
                     f" | {r.get('experiment') or ''} |")
    return "\n".join(lines)


def table4_current(select: Mapping[str, Any], captioning: Mapping[str, Any] | None,
                   names: Sequence[str], weights: Sequence[float]) -> list[dict]:
    """The one Table 4 row of the current workspace (the ``report`` stage sees no other
    experiment), in the same shape as :func:`table4_from_experiments`."""
    fake = {"data": {"params": {"params.yaml": {"data": {"filters": {
        "names": list(names), "weights": list(weights)}}}},
        "metrics": {"metrics/select.json": {"data": dict(select)},
                    "metrics/captioning.json": {"data": dict(captioning or {})}}},
        "name": "workspace"}
    return table4_from_experiments([fake])
