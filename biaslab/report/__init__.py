"""The papers' tables from the pipeline's metrics (paper 000 Tables 1-4; thesis Table 2.1).

Pure functions over the JSON metrics the stages write (no file-system conventions here):

* :func:`table1` -- multi-label classification (paper 000 Table 1): mAP, Ratio, Leakage.
* :func:`table2` -- captioning (paper 000 Table 2 + thesis Table 2.1): METEOR, CLIPScore, Ratio,
  LIC, plus Error, BiasAmp, DBA_G, DBA_O, BLEU-4, CIDEr; an ``original+LIBRA`` row when present.
* :func:`table3` -- synthetic-artifact test (paper 000 Table 3): Ratio_orig, Ratio_inp, Delta.
* :func:`probe_table` -- the causal attribute-sensitivity probe (``biaslab.analysis.probe``).
* :func:`differences` -- each row's difference from Original with its 95 % CI.
* Table 4 -- filter ablation (paper 000 Table 4) over DVC experiments: the selected
  candidates' mean filter scores (automatic stand-ins for the paper's human ratings of object,
  colour and gender fidelity) and the CLIPScore of the captioner trained on S_synthetic.

Every cell of Tables 1-3 and the probe is ``mean ± 95 % CI`` from a ``biaslab.runtime.stats.record``
stored by the stage (t over seeds; ``n`` seeds in the table heading), an infinite seed shows
as ``∞ (k/n seeds)`` and a seed that could not be computed as ``(k missing)``
(``biaslab.runtime.stats.format_cell``). Ratio is paper 000's ``max(r, 1/r)`` in Tables 1-2 and the raw
``r = #man / #woman`` in Table 3 (as the paper prints it). A missing metric prints as an en
dash, never as a number.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from biaslab import registry
from biaslab.report.dvcview import (attach_out_metrics, exp_show, file_data,  # noqa: F401
                                    out_metric_files, walk_exp_records)
from biaslab.analysis import equivalence
from biaslab.runtime import stats

#: Row order and display names (paper 000 Tables 1-3, then plug-ins' rows): read from the
#: registry of components (biaslab.registry.row_names / row_order), so an installed package's
#: training set, method or caption post-processor gets its label and place in every table.
row_names = registry.row_names
row_order = registry.row_order

#: (metrics key, column header) per table; headers mark the better direction.
TABLE1_COLUMNS = (("mAP", "mAP ↑"), ("Ratio", "Ratio →1"), ("Ratio_expected", "Ratio_E →1"),
                  ("Leakage", "Leakage ↓"), ("LK_M", "LK_M"), ("LK_D", "LK_D"),
                  ("Leakage_F1", "Leakage@F1"), ("F1", "F1"))
#: Table 2's columns: the built-in captioning metrics of the registry (biaslab.registry.METRICS,
#: kind ``metrics``) in column order, headers from their label, display scale and direction;
#: the plug-ins' metrics follow them (:func:`caption_columns`).
TABLE2_HIDDEN = ("DBAC_direct_A_to_T", "LIC_M", "LIC_D")   # in metrics/captioning.json only
_ARROW = {"lower": " ↓", "higher": " ↑", "one": " →1", None: ""}


def metric_header(entry: registry.Entry) -> str:
    """A metric column's header: its label, ``×<scale>`` when not 1, and the arrow of its better
    direction (``↓`` lower, ``↑`` higher, ``→1`` a ratio whose ideal is 1, none when the
    metric has no better direction)."""
    scale = "" if entry.scale == 1 else f" ×{entry.scale:g}"
    return f"{entry.display}{scale}{_ARROW[entry.better]}"


TABLE2_COLUMNS = tuple((e.name, metric_header(e))
                       for e in registry.metric_entries("captioning", builtin_only=True)
                       if e.name not in TABLE2_HIDDEN)


def caption_columns(captioning: Mapping[str, Any] | None = None) -> tuple:
    """:data:`TABLE2_COLUMNS`, then one column per further metric that ``captioning`` (a
    ``metrics/captioning.json``) holds: the plug-in metrics of ``eval_captioner.metrics``.
    A registered metric gets its header and place (``order``); one whose package is not
    installed where the report runs, its key as header, after them (sorted)."""
    builtin = {e.name for e in registry.metric_entries("captioning", builtin_only=True)}
    found: set[str] = set()
    for rows in (captioning or {}, *(((captioning or {}).get("archs") or {}).values())):
        for r, v in rows.items():
            if isinstance(v, Mapping) and "per_seed" in v:
                found |= {k for k, x in v.items() if _record(x) is not None} - builtin
    known = [e for e in registry.metric_entries("captioning") if e.name in found]
    rest = sorted(found - {e.name for e in known})
    return TABLE2_COLUMNS + tuple((e.name, metric_header(e)) for e in known) + \
        tuple((k, k) for k in rest)


TABLE3_COLUMNS = (("ratio_orig", "Ratio_orig"), ("ratio_inp", "Ratio_inp"), ("delta", "Δ ↓"))
#: the classifier's Table 3 adds Δ_artifact = Δ(backend) - Δ(generator re-draw)
TABLE3_CLASSIFIER_COLUMNS = TABLE3_COLUMNS + (("delta_artifact", "Δ_artifact ↓"),
                                              ("delta_control", "Δ, other group"))
#: bias columns whose difference from Original the report prints, per table
TABLE1_DIFF = (("Ratio", "Ratio"), ("Leakage", "Leakage"), ("Leakage_F1", "Leakage@F1"))
TABLE2_DIFF = (("Ratio", "Ratio"), ("LIC", "LIC"), ("Error", "Error"), ("BiasAmp", "BiasAmp"))
#: probe attributes (biaslab.analysis.probe) and their headers
PROBE_COLUMNS = (("objects", "objects (labeled)"), ("scene", "scene (in captions)"),
                 ("cast", "colour cast (unlabeled)"))
#: filter-score columns of Table 4 (metrics/select.json keys) and their headers: the built-in
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


DASH = "–"


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def cell(mean: Any, std: Any = None, digits: int = 1) -> str:
    """``"12.3 ± 0.4"`` (``std`` None or absent: ``"12.3"``); a missing/non-finite mean: ``–``.
    For single numbers outside the seed tables (Table 4, LIBRA summary)."""
    m = _num(mean)
    if m is None:
        return DASH
    s = _num(std)
    return f"{m:.{digits}f}" if s is None else f"{m:.{digits}f} ± {s:.{digits}f}"


def _rows(metrics: Mapping[str, Any], order: Sequence[str] | None = None) -> list[str]:
    """Rows of a metrics dict in the papers' order, then any others (sorted); entries that are
    not per-method dicts (``test_set``, notes) are skipped."""
    keys = [k for k, v in metrics.items() if isinstance(v, Mapping) and "per_seed" in v]
    return _in_order(keys, order)


def _in_order(keys, order: Sequence[str] | None = None) -> list[str]:
    """``keys`` in the tables' row order (:func:`row_order` unless ``order``), then the
    others sorted."""
    order = row_order() if order is None else order
    keys = list(keys)
    return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)


def _record(v: Any) -> dict | None:
    """A stored ``stats.record`` (dict with ``mean``) or None."""
    return dict(v) if isinstance(v, Mapping) and "mean" in v else None


#: built-in metrics shown x100 in the tables (their headers say so): DBAC lies in [-1, 1], and
#: the tables print one decimal, as the papers print LIC and BiasAmp x100. Every metric's
#: display factor is its registry entry's ``scale`` (:func:`display_scale`).
SCALE_100 = tuple(e.name for e in registry.metric_entries("captioning", builtin_only=True)
                  if e.scale == 100)


def display_scale(key: str) -> float:
    """The display factor of metrics key ``key``: its registry entry's ``scale``; 1 for a key
    that is not a registered metric (Table 1's and Table 3's columns)."""
    return float(registry.METRICS.get(key).scale) if key in registry.METRICS else 1.0


def _scaled(rec: dict | None, k: float) -> dict | None:
    if rec is None:
        return None
    return {key: (v * k if key in ("mean", "ci95", "std", "lo", "hi") and
                  isinstance(v, (int, float)) and not isinstance(v, bool) else v)
            for key, v in rec.items()}


def table(metrics: Mapping[str, Any], columns) -> dict[str, dict[str, dict | None]]:
    """``{row: {column: record | None}}`` from a metrics file laid out as
    ``{row: {metric: stats.record, ..., "per_seed": [...]}, "test_set": {...}}``. A row with
    ``ratio_na`` (a model without gender outputs, paper 000 Table 1's Adversarial) gets
    ``{"mean": None, "na": why}`` in its Ratio columns, printed "n/a". Columns of
    a registered metric are multiplied by its display scale (:func:`display_scale`; DBAC x100,
    its header says so)."""
    out = {}
    scales = {c: display_scale(c) for c, _ in columns}
    for r in _rows(metrics):
        out[r] = {c: (_scaled(_record(metrics[r].get(c)), scales[c]) if scales[c] != 1 else
                      _record(metrics[r].get(c))) for c, _ in columns}
        if metrics[r].get("ratio_na"):        # a model without gender outputs (Adversarial)
            for c in ("ratio_raw", "Ratio", "Ratio_expected"):
                if c in out[r]:
                    out[r][c] = {"mean": None, "na": str(metrics[r]["ratio_na"])}
    return out


def table1(classification: Mapping[str, Any]) -> dict:
    """Paper 000 Table 1 from ``metrics/classification.json`` -> {row: {column: record}}."""
    return table(classification, TABLE1_COLUMNS)


#: which way the persons-masked calls lean, threshold-free and unfolded
DIRECTION_COLUMNS = (("log_r", "log r (signed)"), ("masked_gender_auc", "masked AUC →50"),
                     ("share_man", "man only %"), ("share_woman", "woman only %"),
                     ("share_both", "both %"), ("share_neither", "neither %"))


def direction_table(classification: Mapping[str, Any]) -> dict[str, dict[str, dict | None]]:
    """Direction-aware group measures of Table 1's rows, from the per-seed
    records of ``metrics/classification.json`` (persons-masked test images):

    * ``log_r``: the signed ``ln r``, r = #man / #woman calls (paper 000 sec. 3.1's r before
      its fold ``max(r, 1/r)``), averaged over seeds *before* any folding, so seeds leaning
      opposite ways cancel instead of adding; > 0 leans "man". A seed that never calls one
      gender is ``+-inf`` (printed ``∞ (k/n seeds)``, its sign kept).
    * ``masked_gender_auc``: ROC AUC (x100) of P(man) - P(woman) against the masked person's
      true gender (``biaslab.classify.evaluate``); 50 = the masked image tells nothing of the
      gender, above 50 = the model reads it from what is left (context).
    * ``share_man`` / ``share_woman`` / ``share_both`` / ``share_neither``: % of the masked
      images whose gender outputs above threshold are man only, woman only, both, neither
      (the four sum to 100 per seed).

    Each cell is ``biaslab.runtime.stats.record`` over seeds (mean ± 95 % t CI). A row without gender
    outputs (``ratio_na``, e.g. Adversarial) gets ``{"mean": None, "na": why}`` cells.
    """
    out: dict[str, dict[str, dict | None]] = {}
    for r in _rows(classification):
        rec = classification[r]
        if rec.get("ratio_na"):
            out[r] = {c: {"mean": None, "na": str(rec["ratio_na"])} for c, _ in DIRECTION_COLUMNS}
            continue
        logs, shares = [], {k: [] for k in ("man", "woman", "both", "neither")}
        for s in rec.get("per_seed") or []:
            m, w = s.get("n_man"), s.get("n_woman")
            b, n0 = s.get("n_both"), s.get("n_neither")
            if None in (m, w, b, n0):
                logs.append(None)
                for v in shares.values():
                    v.append(None)
                continue
            logs.append(math.nan if m == w == 0 else math.inf if w == 0 else
                        -math.inf if m == 0 else math.log(m / w))
            total = m + w - b + n0      # n_man and n_woman both count the "both" images
            for k, v in (("man", m - b), ("woman", w - b), ("both", b), ("neither", n0)):
                shares[k].append(100.0 * v / total if total else None)
        out[r] = {"log_r": stats.record(logs),
                  "masked_gender_auc": _record(rec.get("masked_gender_auc")),
                  **{f"share_{k}": stats.record(v) for k, v in shares.items()}}
    return out


def direction_note(classification: Mapping[str, Any], digits: int = 2) -> str:
    """The reference line under :func:`direction_table`: the test set's own signed log ratio
    (``test_set.ratio_gt``, what a pure context reader approaches) and 0, the masked image
    read as neither gender."""
    gt = _num((classification.get("test_set") or {}).get("ratio_gt"))
    ref = (f"the test set's own ln {gt:.2f} = {math.log(gt):+.{digits}f} (what a model that "
           f"reads only context approaches)" if gt and gt > 0 else "the test set's own ratio "
           "is unknown")
    return (f"log r: 0 = the masked persons read as neither gender; {ref}. Seeds are averaged "
            "before any fold, so a row whose seeds lean opposite ways reads near 0 here while "
            "its folded Ratio is large. Not in paper 000.")


def table2(captioning: Mapping[str, Any]) -> dict:
    """Paper 000 Table 2 (+ thesis Table 2.1) from ``metrics/captioning.json``; plug-in
    captioning metrics add columns after the built-ins (:func:`caption_columns`)."""
    return table(captioning, caption_columns(captioning))


def table3(artifact: Mapping[str, Any]) -> dict:
    """Paper 000 Table 3 from ``metrics/artifact.json`` / ``artifact_captioner.json``: Ratio_orig
    and Ratio_inp over seeds, Delta = 100 |Ratio_orig - Ratio_inp| / Ratio_orig of the seed-mean
    ratios (``biaslab.analysis.artifact``), and Δ_artifact where the file has it (the classifier's)."""
    cols = TABLE3_CLASSIFIER_COLUMNS if any(
        isinstance(v, Mapping) and "delta_artifact" in v for v in artifact.values()) \
        else TABLE3_COLUMNS
    return table(artifact, cols)


def probe_table(probe: Mapping[str, Any], model: str) -> dict:
    """``{row: {attribute: record}}`` of ``metrics/probe.json``'s ``model`` family."""
    fam = probe.get(model) or {}
    return {r: {a: _record((fam.get(r) or {}).get(a)) for a, _ in PROBE_COLUMNS}
            for r in _in_order(fam)}


def flip_columns(flip: Mapping[str, Any]) -> tuple:
    """The attribute-flip probe's columns ``(key, header)`` of ``metrics/probe.json``'s
    ``flip`` block: each flipped dimension, then (for ``gender_skin``) the dimension within each
    group of the other one (``skin|female``: the skin-tone flip among women)."""
    heads = {"gender": "gender (F→M)", "skin": "skin tone (D→L)"}
    cols = []
    for d in flip.get("dims") or ():
        cols.append((d, heads.get(d, d)))
        other = {"gender": ("dark", "light"), "skin": ("female", "male")}.get(d, ())
        if flip.get("attribute") == "gender_skin":
            cols += [(f"{d}|{g}", f"{heads.get(d, d)}, {g}") for g in other]
            cols.append((f"{d}|gap", f"gap ({other[1]} − {other[0]})"))
    return tuple(cols)


def flip_table(flip: Mapping[str, Any], model: str) -> dict:
    """``{row: {column: record}}`` of the flip block's ``model`` family (``classifier`` /
    ``captioner``), columns of :func:`flip_columns`."""
    fam = flip.get(model) or {}
    cols = flip_columns(flip)
    return {r: {c: _record((fam.get(r) or {}).get(c)) for c, _ in cols} for r in _in_order(fam)}


def seed_values(metrics: Mapping[str, Any], row: str, key: str) -> list | None:
    """Per-seed values of ``key`` in ``metrics[row]["per_seed"]`` (numbers, ``"inf"``, None)."""
    per = (metrics.get(row) or {}).get("per_seed")
    if not isinstance(per, list):
        return None
    return [p.get(key) if isinstance(p, Mapping) else None for p in per]


#: a metric's range (its cells and differences keep their intervals inside it): percentages
#: of images or of ranked pairs in [0, 100], the x100 attacker differences in [-100, 100],
#: paper 000's folded Ratio max(r, 1/r) >= 1
RANGES = {"mAP": (0.0, 100.0), "masked_gender_auc": (0.0, 100.0), "Error": (0.0, 100.0),
          "Leakage": (-100.0, 100.0), "Leakage_F1": (-100.0, 100.0), "LIC": (-100.0, 100.0),
          "LIC_M": (0.0, 100.0), "LIC_D": (0.0, 100.0), "Ratio": (1.0, math.inf),
          "Ratio_expected": (1.0, math.inf), "BLEU-4": (0.0, 100.0), "METEOR": (0.0, 100.0)}


def difference_range(column: str) -> tuple[float, float] | None:
    """The range of a difference of two values of ``column`` (:data:`RANGES`): ``(lo - hi,
    hi - lo)``; None for a column without a range."""
    b = RANGES.get(column)
    return None if b is None else (b[0] - b[1], b[1] - b[0])


def bounded(d: Mapping[str, Any], bounds: tuple[float, float] | None,
            lo: str = "lo", hi: str = "hi") -> dict:
    """``d`` with its interval ``[d[lo], d[hi]]`` intersected with ``bounds``
    (``biaslab.analysis.equivalence.clip_interval``: the coverage is unchanged) and
    ``clipped: True`` where that moved an end; ``d`` itself where nothing moved."""
    a, b = d.get(lo), d.get(hi)
    ca, cb = equivalence.clip_interval(a, b, bounds)
    if (ca, cb) == (a, b):
        return d
    return {**d, lo: ca, hi: cb, "clipped": True}


def differences(metrics: Mapping[str, Any], columns, ref: str = "original") -> dict:
    """``{row: {column: stats.difference}}``: each row's per-seed values minus the reference
    row's (Welch 95 % CI, ``biaslab.runtime.stats.difference``), the interval kept inside the
    difference's range (:func:`difference_range`); the reference row is left out."""
    base = {c: seed_values(metrics, ref, c) for c, _ in columns}
    out = {}
    for r in _rows(metrics):
        if r == ref:
            continue
        out[r] = {c: bounded(stats.difference(seed_values(metrics, r, c) or [], base[c] or []),
                             difference_range(c))
                  for c, _ in columns}
    return out


def bounded_cell(rec: Mapping[str, Any] | None, digits: int = 1,
                 bounds: tuple[float, float] | None = None) -> str:
    """One table cell: ``stats.format_cell`` (``mean ± half-width``), or ``mean [lo, hi]``
    with the ends inside ``bounds`` where ``mean ± half-width`` would cross the metric's
    range (a t interval on a bounded metric: e.g. an AUC of 95.6 ± 7.1 reads
    ``95.6 [88.5, 100.0]``)."""
    if rec and bounds is not None and rec.get("mean") is not None \
            and rec.get("ci95") is not None and not rec.get("n_inf"):
        m, hw = float(rec["mean"]), float(rec["ci95"])
        if m - hw < bounds[0] or m + hw > bounds[1]:
            lo, hi = equivalence.clip_interval(m - hw, m + hw, bounds)
            return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
    return stats.format_cell(rec, digits)


def n_seeds(metrics: Mapping[str, Any]) -> str:
    """``"3"`` or ``"2-3"``: the seeds per row of a metrics file (for table headings)."""
    ns = sorted({len(metrics[r]["per_seed"]) for r in _rows(metrics)})
    return DASH if not ns else (str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}")


def _direction(header: str) -> str | None:
    """The better direction a column header marks: ``"max"`` (↑), ``"min"`` (↓), ``"target"``
    (→x: closest to the number x, :func:`_target`), or None (unranked)."""
    if "↑" in header:
        return "max"
    if "↓" in header:
        return "min"
    if _target(header) is not None:
        return "target"
    return None


def _target(header: str) -> float | None:
    """The x of a ``"→x"`` header (``"Ratio →1"`` -> 1.0, ``"Ratio →2.28"`` -> 2.28)."""
    import re
    hit = re.search(r"→\s*([0-9]+(?:\.[0-9]+)?)", header)
    return float(hit.group(1)) if hit else None


def true_ratio(test_set: Mapping[str, Any] | None) -> float | None:
    """The test set's own folded man : woman ratio ``max(n_male / n_female, its inverse)``
    (None when a count is missing or 0): what the Ratio of a captioner that names every
    person's gender as annotated reads on *unmasked* images (Burns et al. 2018's reference).
    On persons-masked images (paper 000's classifier protocol) the
    reference is 1."""
    ts = test_set or {}
    m, f = _num(ts.get("n_male")), _num(ts.get("n_female"))
    if not m or not f:
        return None
    return max(m / f, f / m)


def table2_columns(captioning: Mapping[str, Any], digits: int = 2) -> tuple:
    """:func:`caption_columns` with Ratio's target set to the test set's own ratio
    (:func:`true_ratio`, rounded to ``digits``): captions are of unmasked images, so the
    "best" Ratio is the one closest to the truth, not to 1 (a captioner that drops gender
    words or says "woman" at random reads near 1). Unchanged when the counts are unknown."""
    gt = true_ratio(captioning.get("test_set"))
    if gt is None:
        return caption_columns(captioning)
    return tuple((k, f"Ratio →{gt:.{digits}f}") if k == "Ratio" else (k, h)
                 for k, h in caption_columns(captioning))


def made_by(script: str, cwd: str | os.PathLike = ".") -> dict:
    """Provenance of a file a script (not the DVC DAG) writes into ``plots/report/``:
    ``{"script", "data_source", "commit", "modified"}`` from ``params.yaml``'s
    ``data.source`` and ``git`` in ``cwd`` (None where unavailable). Such files stay after a
    run of another profile; the stamp says which run they belong to."""
    import subprocess
    out = {"script": script, "data_source": None, "commit": None, "modified": None}
    try:
        import yaml
        params = yaml.safe_load((Path(cwd) / "params.yaml").read_text()) or {}
        out["data_source"] = (params.get("data") or {}).get("source")
    except (OSError, ValueError, ImportError):
        pass
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=cwd,
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True, check=True).stdout
        out["commit"], out["modified"] = head or None, bool(dirty.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    return out


def stamp(text: str, prov: Mapping[str, Any]) -> str:
    """``text`` (markdown, title on its first line) with a provenance line (:func:`made_by`)
    after the title."""
    commit = prov.get("commit")
    line = (f"_Made by `{prov.get('script')}` on data `{prov.get('data_source') or '?'}` at "
            f"commit `{commit or '?'}`" + (" with uncommitted changes" if prov.get("modified")
                                          else "")
            + "; not written by `dvc repro`, so a run of another data profile leaves it as "
              "it is: it is that run's result only where data and commit match._")
    head, _, rest = text.partition("\n")
    return f"{head}\n\n{line}\n{rest}" if head.startswith("#") else f"{line}\n\n{text}"


def resample_note(datasets: Mapping[str, Any] | None, rows: Sequence[str] = (
        "oversample", "subsample"), names: Mapping[str, str] | None = None) -> str:
    """How the resampled training sets were reached, from
    ``metrics/datasets.json``: samples, distinct images, the most repeated image's count and
    share of the samples, Kish's effective number of images, and the skew bound reached
    ("" when the file has none of ``rows``). Over-sampling meets its skew bound on strongly
    biased multi-label data by repeating a few counter-stereotypical images; the note puts
    that beside the table so its row is read as what it is."""
    names = row_names() if names is None else names
    parts = []
    for r in rows:
        d = (datasets or {}).get(r)
        if not isinstance(d, Mapping) or d.get("n_samples") is None:
            continue
        txt = (f"{names.get(r, r)}: {int(d['n_samples']):,} samples of {int(d['n_images']):,} "
               f"images")
        if int(d.get("max_repeats") or 1) > 1:
            txt += (f", the most repeated image {int(d['max_repeats'])} times "
                    f"({100 * float(d.get('max_repeats_share') or 0):.0f} % of the samples), "
                    f"{int(d.get('n_repeated') or 0)} images repeated, Kish's effective "
                    f"number of images {float(d.get('effective_images') or 0):.1f}")
        if d.get("max_skew_bound") is not None:
            if d.get("group_objects_max_abs_skew") is not None:   # the groups
                groups = " / ".join(g for g in (d.get("by_group") or {})
                                    if g != "none") or "the attribute's groups"
                txt += (f", balanced over {groups}: skew bound reached "
                        f"{float(d['max_skew_bound']):.3f} (largest group |skew| "
                        f"{float(d['group_objects_max_abs_skew']):.3f}; "
                        f"{int(d.get('unlabelled_left_out') or 0)} images without a group "
                        "left out)")
            else:
                txt += (f", object skew bound reached {float(d['max_skew_bound']):.3f} "
                        f"(largest |skew| {float(d.get('objects_max_abs_skew') or 0):.3f})")
        parts.append(txt)
    if not parts:
        return ""
    return ("Training sets (metrics/datasets.json): " + "; ".join(parts) + ". "
            "datasets.max_copies caps the repeats and relaxes the skew bound to the smallest "
            "feasible one; plots/datasets/oversample_tradeoff.png shows the bound each cap "
            "allows.")


def leakage_f1_note(classification: Mapping[str, Any]) -> str:
    """The line under Table 1 that reads Leakage@F1 (Wang et al. 2019's accuracy-matched
    leakage) beside paper 000's Leakage; "" when the file has none."""
    rows = [r for r in _rows(classification)
            if _num((classification[r].get("Leakage_F1") or {}).get("mean")) is not None]
    if not rows:
        return ""
    clamped = sum(1 for r in rows for s in classification[r].get("per_seed") or []
                  if isinstance(s, Mapping) and s.get("leakage_F1_clamped"))
    return ("Leakage@F1 = LK_M - LK_D(F1) (Wang et al. 2019 sec. 4.2; not in paper 000): "
            "LK_D of ground-truth labels flipped at random until their macro F1 equals the "
            "model's own F1 (column F1, x100; classifier.leakage_f1_flips). Paper 000's "
            "Leakage compares a model with noiseless labels, so a weaker model leaks less by "
            "being noisier; Leakage@F1 compares it with labels as noisy as it is. A row whose "
            "Leakage is below Original's but whose Leakage@F1 is not reads less gender only "
            "because it is less accurate."
            + (f" {clamped} model seed(s) lie below the weakest perturbed F1: their LK_D(F1) "
               f"is the curve's end value." if clamped else ""))


def attributes_note(classification: Mapping[str, Any]) -> str:
    """The line under Table 1's heading naming its attributes (paper 000 app. B.1): how many
    object classes, by which co-occurrence rule, where the list is ("" for a record
    without ``attributes``)."""
    a = classification.get("attributes")
    if not isinstance(a, Mapping) or a.get("n") is None:
        return ""
    who = "woman and man each" if a.get("cooccur_rule") == "each" else "woman or man"
    names = list(a.get("names") or [])
    shown = ", ".join(names[:12]) + (f", ... ({len(names) - 12} more)" if len(names) > 12 else "")
    return (f"Attributes: {a['n']} object classes that co-occur with {who} in at least "
            f"{a.get('min_cooccur')} of the training images (paper 000 app. B.1: more than 100; "
            f"metrics/classification.json `attributes`): {shown}.")


def domain_note(classification: Mapping[str, Any]) -> str:
    """The line under Table 1 that gives the real-vs-generated domain check (
    ``metrics/classification.json`` ``domain``, :mod:`biaslab.classify.domain`): per training
    set, object mAP on the real photos and on the same-group generated counterfactuals of the
    train sources the model never trained on, their difference, and the feature probe's AUC
    ("" when the file has no domain block)."""
    dom = classification.get("domain") or {}
    rows = [r for r in row_order() if isinstance(dom.get(r), Mapping)
            and (dom[r].get("domain_gap") or {}).get("mean") is not None]
    if not rows:
        return ""

    def rec(r, k, d=1):
        return stats.format_cell(dom[r].get(k), d)
    names = row_names()
    parts = "; ".join(f"{names.get(r, r)} {rec(r, 'mAP_real')} real / "
                      f"{rec(r, 'mAP_generated')} generated (gap {rec(r, 'domain_gap')})"
                      for r in rows)
    probe = dom.get("probe_auc") or {}
    return ("Domain check (metrics/classification.json `domain`): object mAP of each "
            "model on the real photos and on the same-group generated counterfactuals of the "
            "train scenes it never trained on (same scenes, objects and gender; only the person "
            f"re-generated): {parts}. A logistic regression on the frozen features tells real "
            f"from generated images at AUC {stats.format_cell(probe, 1)} (50 = alike). A "
            "synthetic-only model with a positive gap is read on real photos outside its "
            "training domain, which can move its Leakage against the paper for reasons other "
            "than gender.")


def residue_note(residue: Mapping[str, Any] | None) -> str:
    """The line under Table 3 that gives the residue check (
    ``metrics/residue.json``, stage ``residue``); "" without the file's numbers."""
    if not isinstance(residue, Mapping) or not residue.get("erased_auc"):
        return ""
    er = residue["erased_auc"]
    shapes = ", ".join(f"{k} {stats.format_cell(v, 1)} (erasing "
                       f"{100 * float((residue.get('mask_fraction') or {}).get(k) or 0):.0f} % of "
                       f"the image)" for k, v in er.items())
    n = residue.get("n_images")
    txt = (f"Residue check (metrics/residue.json; n = {n} masked train images, "
           f"bootstrap 95 % CIs over them): a cross-fitted gender probe on the "
           f"frozen features reads the source gender at AUC "
           f"{stats.format_cell(residue.get('probe_auc'), 1)} on the real train images and, "
           f"with the masked persons erased (grey, unfilled), at {shapes}: what it reads there "
           f"is the person's residue plus the gender cue of the scene around them")
    rb = residue.get("residue_bound")
    if isinstance(rb, Mapping) and rb.get("mean") is not None:
        txt += (f"; polygon minus box {stats.format_cell(rb, 1)}, an upper bound of what the "
                f"polygon leaves of the person (the box erases more context too)")
    cf = residue.get("counterfactual") or {}
    if cf.get("target_auc_other"):
        txt += (f". On the run's `{cf.get('backend')}` counterfactuals the probe reads the "
                f"TARGET group at AUC {stats.format_cell(cf['target_auc_other'], 1)} for the "
                f"other group (100 = the new person reads as its group, below 50 = the original "
                f"shows through) and {stats.format_cell(cf.get('target_auc_same'), 1)} for the "
                f"same group")
    sk = residue.get("counterfactual_skin") or {}
    if sk.get("skipped"):
        txt += f". Skin-tone check of the counterfactuals: not measured ({sk['skipped']})"
    elif sk.get("target_auc"):
        txt += (f". Skin-tone check (a dark-vs-light probe cross-fitted on "
                f"{sk.get('n_real_dark')} dark / {sk.get('n_real_light')} light real images, "
                f"AUC {stats.format_cell(sk.get('probe_auc'), 1)} on them): it reads the "
                f"TARGET tone of the skin-tone counterfactuals at AUC "
                f"{stats.format_cell(sk['target_auc'], 1)} (50 = the tone is not seen)")
        if sk.get("target_auc_other"):
            txt += (f", {stats.format_cell(sk['target_auc_other'], 1)} where the source had "
                    f"the other tone (n = {sk.get('n_other')})")
        lo = _num((sk.get("probe_auc") or {}).get("lo"))
        if lo is not None and lo <= 50.0:   # a probe at chance on real people vouches for nothing
            txt += (" — but its CI on the real images reaches 50: it does not read real "
                    "people's tone, so its AUCs on the counterfactuals are no evidence of their "
                    "tone")
        if sk.get("n_unlabelled_source"):
            txt += f"; {sk['n_unlabelled_source']} sources have no perceived tone"
    return txt + "."


def ratio_reference_note(captioning: Mapping[str, Any]) -> str:
    """The line under Table 2 that says which reference its Ratio is ranked against
    (:func:`table2_columns`)."""
    ts = captioning.get("test_set") or {}
    gt = true_ratio(ts)
    if gt is None:
        return ("Ratio is ranked against 1: the test set's gender counts are unknown, so its "
                "own ratio cannot be the reference.")
    return (f"Ratio →{gt:.2f}: the captions describe unmasked test images, "
            f"{int(ts['n_male'])} men and {int(ts['n_female'])} women, so a captioner that "
            f"names each person's gender as annotated reads {gt:.2f} (Burns et al. 2018); "
            f"the closest row is best, not the one nearest 1 (paper 000 Table 2 prints \"1 "
            f"is unbiased\", which holds only on a balanced test set). \"no gender word %\": "
            f"gender-labelled images whose caption names no gender; \"words\": mean caption "
            f"length.")


def biasamp_null_note(captioning: Mapping[str, Any], digits: int = 2) -> str:
    """The line under Table 2 that gives caption BiasAmp's null: the BiasAmp of the test
    images' own human captions against the same training reference
    (``test_set.biasamp_human_null``, :func:`biaslab.metrics.biasamp.human_null`). Empty
    when the metrics file has none (older runs, data without captions)."""
    nul = (captioning.get("test_set") or {}).get("biasamp_human_null") or {}
    ba = _num(nul.get("ba"))
    if ba is None:
        return ""
    lo, hi = _num(nul.get("min")), _num(nul.get("max"))
    spread = (f" (caption indices {lo:.{digits}f} to {hi:.{digits}f})"
              if lo is not None and hi is not None and nul.get("n_indices", 0) > 1 else "")
    return (f"BiasAmp's null: the test images' own human captions, one caption per image as a "
            f"captioner writes them, score BiasAmp {ba:.{digits}f} against the same training "
            f"captions, the mean over {nul.get('n_indices', '?')} caption indices{spread}. "
            f"That is a captioner that writes like the annotators. Zhao's BiasAmp is 0 for it "
            f"only when the test images mix people and scenes as the training images do; read "
            f"a row against this value, not against 0 (biaslab.metrics.biasamp.human_null).")


#: a captioner row whose share of captions without a gender word exceeds Original's by more
#: than this many points is degenerate for Ratio (param report.max_gender_word_loss)
MAX_GENDER_WORD_LOSS = 10.0


def caption_degenerate_rows(tab: Mapping[str, Mapping[str, Any]], max_loss: float,
                            length_floor: float, reference: str = "original"
                            ) -> dict[str, str]:
    """Captioner rows that lose gender words or length: ``{row: why}`` for
    every row whose mean ``no_gender_word`` (% of gender-labelled images whose caption names
    no gender) exceeds the ``reference`` row's by more than ``max_loss`` points, or whose mean
    ``length`` (tokens per caption) is below ``length_floor`` x the reference's. Such a row's
    Ratio is near 1 because it stops naming people, so :func:`markdown` never ranks it best.
    Empty when the reference lacks the measure (older metrics files)."""
    def mean(r, k):
        return _num(((tab.get(r) or {}).get(k) or {}).get("mean"))
    out: dict[str, str] = {}
    nw0, ln0 = mean(reference, "no_gender_word"), mean(reference, "length")
    for r in tab:
        if r == reference:
            continue
        why = []
        nw, ln = mean(r, "no_gender_word"), mean(r, "length")
        if nw0 is not None and nw is not None and nw - nw0 > max_loss:
            why.append(f"{nw:.0f} % of captions name no gender (Original {nw0:.0f} %)")
        if ln0 and ln is not None and length_floor > 0 and ln < length_floor * ln0:
            why.append(f"{ln:.1f} words per caption (Original {ln0:.1f})")
        if why:
            out[r] = "; ".join(why)
    return out


def caption_degenerate_note(rows: Mapping[str, str], max_loss: float, length_floor: float,
                            names: Mapping[str, str] | None = None) -> str:
    """The sentence under Table 2 for :func:`caption_degenerate_rows` ("" when none)."""
    names = row_names() if names is None else names
    if not rows:
        return ""
    which = "; ".join(f"{names.get(r, r)}: {why}" for r, why in rows.items())
    return (f"† captions lose gender words (more than {max_loss:g} points above Original, "
            f"report.max_gender_word_loss) or length (under {100 * length_floor:.0f} % of "
            f"Original's): {which}. Their Ratio nears 1 by not naming people; never marked "
            f"best.")


#: the utility column of each table whose rows :func:`degenerate_rows` judges
UTILITY = {"table1": "mAP", "table2": "CIDEr"}


def degenerate_rows(tab: Mapping[str, Mapping[str, Any]], utility: str, floor: float,
                    reference: str = "original") -> dict[str, float]:
    """Rows whose mean ``utility`` is below ``floor`` x the ``reference`` row's (e.g. a
    sub-sampled set of 6 images: mAP 39 against Original's 77): ``{row: its fraction of the
    reference}``. Such a model is "unbiased" by not working; :func:`markdown` marks it † and
    never ranks it best. Empty when the reference has no positive utility or ``floor`` <= 0.
    """
    ref = _num(((tab.get(reference) or {}).get(utility) or {}).get("mean"))
    if ref is None or ref <= 0 or floor <= 0:
        return {}
    out = {}
    for r, row in tab.items():
        m = _num(((row or {}).get(utility) or {}).get("mean"))
        if r != reference and m is not None and m < floor * ref:
            out[r] = m / ref
    return out


def ranks(tab: Mapping[str, Mapping[str, Any]], columns, digits: int = 1,
          exclude: Iterable[str] = ()) -> dict[tuple[str, str], int]:
    """``{(row, column): 1 | 2}``: the best and second-best rows of every ranked column (header
    with ↑, ↓ or →x: closest to x), as paper 000's tables bold / underline them. Ranked on the seed mean
    rounded to the printed ``digits`` (equal printed means share a rank); a row whose mean is
    missing, "n/a" or has infinite seeds (a Ratio of ∞: the worst possible) is never ranked.
    Means only: overlapping 95 % CIs mean the order is not significant. Rows in ``exclude``
    (:func:`degenerate_rows`) are never ranked."""
    out: dict[tuple[str, str], int] = {}
    skip = set(exclude)
    for c, h in columns:
        how = _direction(h)
        if how is None:
            continue
        vals = {}
        for r, row in tab.items():
            if r in skip:
                continue
            rec = row.get(c) or {}
            m = _num(rec.get("mean"))
            if rec.get("na") or int(rec.get("n_inf") or 0) or m is None:
                continue
            m = round(m, digits)
            vals[r] = -m if how == "max" else (abs(m - _target(h)) if how == "target" else m)
        levels = sorted(set(vals.values()))
        for r, v in vals.items():
            k = levels.index(v) + 1
            if k <= 2 and len(vals) > 1:       # a lone row is not "best"
                out[(r, c)] = k
    return out


def markdown(tab: Mapping[str, Mapping[str, Any]], columns, digits: int = 1,
             first: str = "Method", names: Mapping[str, str] | None = None,
             rank: bool = False, degenerate: Iterable[str] = ()) -> str:
    """A GitHub markdown table of ``tab`` ({row: {column: record}}), cells
    ``mean ± 95 % CI`` (``biaslab.runtime.stats.format_cell``). ``rank``: the best cell of each ranked
    column in **bold**, the second best <u>underlined</u> (:func:`ranks`, paper 000 Tables 1-2);
    rows in ``degenerate`` (:func:`degenerate_rows`) are marked † and not ranked.
    """
    names = row_names() if names is None else names
    degenerate = set(degenerate)
    head = "| " + " | ".join([first, *[h for _, h in columns]]) + " |"
    sep = "|" + "---|" * (len(columns) + 1)
    lines = [head, sep]
    marks = ranks(tab, columns, digits, exclude=degenerate) if rank else {}
    for r, vals in tab.items():
        cells = []
        for c, _ in columns:
            txt = "n/a" if (vals.get(c) or {}).get("na") else \
                bounded_cell(vals.get(c), digits, RANGES.get(c))
            k = marks.get((r, c))
            cells.append(f"**{txt}**" if k == 1 else f"<u>{txt}</u>" if k == 2 else txt)
        name = names.get(r, r) + (" †" if r in degenerate else "")
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return "\n".join(lines)


def degenerate_note(rows: Mapping[str, float], utility: str, floor: float,
                    names: Mapping[str, str] | None = None) -> str:
    """The sentence under a table with † rows ("" when none)."""
    names = row_names() if names is None else names
    if not rows:
        return ""
    which = ", ".join(f"{names.get(r, r)} ({100 * f:.0f} %)" for r, f in rows.items())
    return (f"† utility below the floor: {utility} under {100 * floor:.0f} % of Original's "
            f"(report.utility_floor): {which}. Such a model looks unbiased by not working; "
            f"it is never marked best.")


def diff_markdown(diffs: Mapping[str, Mapping[str, Any]], columns, digits: int = 1,
                  names: Mapping[str, str] | None = None) -> str:
    """Markdown of :func:`differences`: ``+1.2 [-0.3, +2.7]`` per cell."""
    names = row_names() if names is None else names
    lines = ["| Method | " + " | ".join(f"Δ{h} vs Original [95 % CI]" for _, h in columns)
             + " |", "|" + "---|" * (len(columns) + 1)]
    for r, vals in diffs.items():
        cells = [stats.format_difference(vals.get(c), digits) for c, _ in columns]
        lines.append("| " + " | ".join([names.get(r, r), *cells]) + " |")
    return "\n".join(lines)


def flat_metrics(tables: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, float]:
    """``{"table1/original/mAP": mean, ...}``: one number per cell (means only), for
    ``dvc metrics diff`` across experiments; missing or infinite cells are left out."""
    out = {}
    for t, tab in tables.items():
        for r, vals in tab.items():
            for c, rec in vals.items():
                m = _num((rec or {}).get("mean"))
                if m is not None:
                    out[f"{t}/{r}/{c}"] = round(m, 4)
    return out


def weights_label(weights: Sequence[float], names: Sequence[str]) -> str:
    """``"prompt_adherence + color_fidelity"`` for weights (1, 0, 1); all zero: ``"No filter"``
    (selection falls back to candidate j = 0, an unfiltered draw)."""
    used = [n for n, w in zip(names, weights) if _num(w)]
    if not used:
        return "No filter"
    return " + ".join(n if _num(w) == 1 else f"{_num(w):g}·{n}"
                      for n, w in zip(names, weights) if _num(w))


# --------------------------------------------------------------------------------------------
# Table 4: the filter ablation over DVC experiments


#: the filter combinations of paper 000 Table 4 as weights on (prompt, object, color)
TABLE4_WEIGHTS = ((1, 1, 1), (1, 1, 0), (1, 0, 1), (0, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1),
                  (0, 0, 0))


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
               "CLIPScore": ((_record(cap.get("CLIPScore")) or {}).get("mean"),
                             (_record(cap.get("CLIPScore")) or {}).get("ci95"))}
        row["names"] = list(names)
        for k, h in table4_filters(names):
            row[h] = (_num(sel.get(k)), None)
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


__all__ = ["row_names", "row_order", "TABLE1_COLUMNS", "TABLE2_COLUMNS", "TABLE3_COLUMNS",
           "TABLE3_CLASSIFIER_COLUMNS",
           "TABLE1_DIFF", "TABLE2_DIFF", "PROBE_COLUMNS", "TABLE4_FILTERS", "TABLE4_WEIGHTS",
           "TABLE2_HIDDEN", "SCALE_100", "caption_columns", "display_scale", "metric_header",
           "table4_filters",
           "cell", "table", "table1", "table2", "table3", "probe_table", "flip_table",
           "flip_columns", "seed_values",
           "differences", "n_seeds", "markdown", "diff_markdown", "flat_metrics", "weights_label", "table4_from_experiments", "table4_markdown",
           "table4_current", "true_ratio", "table2_columns", "caption_degenerate_rows",
           "caption_degenerate_note", "MAX_GENDER_WORD_LOSS", "ratio_reference_note",
           "resample_note", "made_by", "stamp", "leakage_f1_note", "domain_note", "residue_note"]


def power_line(controls: Mapping[str, Any] | None, task: str, digits: int = 1,
               columns: Sequence | None = None) -> str:
    """One sentence under a table: the smallest difference between two of its rows that the
    test set detects (two-sided 95 %, 80 % power), per metric, from the control models'
    replicate spread (``metrics/controls.json["power"][task]``, stage ``controls``); "" when
    the controls were not run."""
    pw = ((controls or {}).get("power") or {}).get(task) or {}
    if not pw:
        return ""
    shown = None if columns is None else {c[0] for c in columns}
    parts = [f"{m} {v['mde']:.{digits}f}" for m, v in pw.items()
             if isinstance(v, Mapping) and v.get("mde") is not None
             and (shown is None or m in shown)]
    if not parts:
        return ""
    return ("Detectable difference between two rows (95 %, 80 % power; from the control "
            "models' replicate spread on this test set, metrics/controls.json): "
            + ", ".join(parts) + ". Smaller differences between rows are not readable here; "
            "Ratio and Error of a fixed model on a fixed test set carry only the seeds' spread. "
            "This is the largest spread of any control at 80 % power; "
            "`scripts/exp_table.py`'s noise floor is smaller by design: the 95 % CI half-width "
            "of a difference between two runs of Original, from Original's own seed spread, "
            "with no power requirement (the one to read when comparing experiments).")


#: the captioning bias metrics compared on the controls: key, label
def metric_comparison_markdown(controls: Mapping[str, Any] | None, digits: int = 2) -> str:
    """"Which captioning metric sees the planted bias" on the control models:
    :func:`biaslab.report.metric_compare.run_markdown` (per metric and attacker encoder:
    controls matched / missed / undecided, the strongest amplifier's and the human caption's
    values, the slope d/dq and the smallest detectable q). Empty string without captioner
    controls."""
    from biaslab.report.metric_compare import run_markdown
    return run_markdown(controls, digits)


def control_cells(r: Mapping[str, Any], digits: int = 2) -> tuple[str, str]:
    """The "expected" and "measured" cells of one judged control metric: ``= v`` / ``> ref``
    for an exact value or a direction; for a check paired with a base control
    (``expected["paired_with"]``, :func:`biaslab.analysis.controls_eval.judge_paired`)
    ``> <base> (paired)`` and ``Δ <difference> (own <value>)``: the verdict reads the
    difference; for an equivalence claim ``≈ ref ± margin``
    (:func:`biaslab.analysis.controls_eval.decide_equivalence`)."""
    e = r["expected"]
    own = stats.format_cell(r["measured"], digits)
    if "value" in e:
        try:
            return f"= {float(e['value']):g}", own
        except (TypeError, ValueError):
            return f"= {e['value']}", own
    if "paired_with" in e:
        return (f"{e['direction']} {e['paired_with']} (paired)",
                f"Δ {stats.format_cell(r.get('paired') or {}, digits)} (own {own})")
    mg = (r.get("margin") or {}).get("delta")
    if e["direction"] == "≈" and mg is not None:   # an equivalence claim: its margin
        return f"≈ {float(e['reference']):.3g} ± {float(mg):.{digits}g}", own
    return f"{e['direction']} {float(e['reference']):.3g}", own


def controls_markdown(controls: Mapping[str, Any] | None, digits: int = 2) -> str:
    """The metric-controls section: per task, one row per control and metric: expected,
    measured (mean ± 95 % CI over replicates), verdict (``metrics/controls.json``)."""
    if not controls:
        return "The controls stage did not run."
    lines = []
    for task in ("classifier", "captioner"):
        res = controls.get(task) or {}
        if not res:
            continue
        lines += [f"**{task}** (replicates: {len(controls.get('replicates') or [])})", "",
                  "| control | metric | expected | measured | verdict |",
                  "|---|---|---|---|---|"]
        for name, ms in res.items():
            for metric, r in ms.items():
                if "verdict" not in r:
                    continue
                exp, meas = control_cells(r, digits)
                lines.append(f"| {name} | {metric} | {exp} | {meas} | {r['verdict']} |")
        lines.append("")
    probe = controls.get("probe") or {}
    if probe:
        lines += ["**probe** (classifier output P(man) - P(woman); a reader of one attribute "
                  "swings it by 2)", "", "| control | attribute | expected | measured | verdict |",
                  "|---|---|---|---|---|"]
        for name, attrs in probe.items():
            for a, r in attrs.items():
                lines.append(f"| {name} | {a} | {r['expected']['value']:g} | "
                             f"{r['measured']['mean']:g} | {r['verdict']} |")
        lines.append("")
    sens = controls.get("sensitivity") or {}
    if sens:
        n = sum(1 for ctl in sens.values() for p in ctl.values() for r in p.values()
                if "verdict" in r)
        lines += [f"**feature sensitivity**: {n} checks of {len(sens)} controls under the "
                  "perturbed test images, in the section \"Table 1, feature sensitivity\".",
                  ""]
    s = controls.get("summary") or {}
    lines.append(f"{s.get('matches', 0)} of {s.get('n', 0)} control values match their known "
                 f"answer, {s.get('does_not_match', 0)} do not, {s.get('inconclusive', 0)} "
                 f"inconclusive (a direction the CI does not decide).")
    return "\n".join(lines)
