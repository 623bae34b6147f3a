"""The papers' tables from the pipeline's metrics (paper 000 Tables 1-4; thesis Table 2.1).

Pure functions over the JSON metrics the stages write (no file-system conventions here):

* :func:`table1` -- multi-label classification (paper 000 Table 1): mAP, Ratio, Leakage.
* :func:`table2` -- captioning (paper 000 Table 2 + thesis Table 2.1): METEOR, CLIPScore, Ratio,
  LIC, plus Error, BiasAmp, DBA_G, DBA_O, BLEU-4, CIDEr; an ``original+LIBRA`` row when present.
* :func:`table3` -- synthetic-artifact test (paper 000 Table 3): Ratio_orig, Ratio_inp, Delta.
* :func:`probe_table` -- the causal attribute-sensitivity probe (``biaslab.analysis.probe``).
* :func:`differences` -- each row's difference from Original with its 95 % CI.
* Table 4 -- filter ablation (paper 000 Table 4) over DVC experiments:
  :mod:`biaslab.report.table4`.

The notes under the tables are in :mod:`biaslab.report.notes`, the controls section in
:mod:`biaslab.report.controls`, the other sections in :mod:`biaslab.report.sections`, the
document's assembly in :mod:`biaslab.report.document`, DVC's experiment records in
:mod:`biaslab.report.dvcview`.

Every cell of Tables 1-3 and the probe is ``mean ± 95 % CI`` from a ``biaslab.runtime.stats.record``
stored by the stage (t over seeds; ``n`` seeds in the table heading), an infinite seed shows
as ``∞ (k/n seeds)`` and a seed that could not be computed as ``(k missing)``
(``biaslab.runtime.stats.format_cell``). Ratio is paper 000's ``max(r, 1/r)`` in Tables 1-2 and the raw
``r = #man / #woman`` in Table 3 (as the paper prints it). A missing metric prints as an en
dash, never as a number.
"""
from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from biaslab import registry
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
                found |= {k for k, x in v.items() if as_record(x) is not None} - builtin
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


DASH = "–"


def number(v: Any) -> float | None:
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
    m = number(mean)
    if m is None:
        return DASH
    s = number(std)
    return f"{m:.{digits}f}" if s is None else f"{m:.{digits}f} ± {s:.{digits}f}"


def model_rows(metrics: Mapping[str, Any], order: Sequence[str] | None = None) -> list[str]:
    """Rows of a metrics dict in the papers' order, then any others (sorted); entries that are
    not per-method dicts (``test_set``, notes) are skipped."""
    keys = [k for k, v in metrics.items() if isinstance(v, Mapping) and "per_seed" in v]
    return in_order(keys, order)


def in_order(keys, order: Sequence[str] | None = None) -> list[str]:
    """``keys`` in the tables' row order (:func:`row_order` unless ``order``), then the
    others sorted."""
    order = row_order() if order is None else order
    keys = list(keys)
    return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)


def as_record(v: Any) -> dict | None:
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
    for r in model_rows(metrics):
        out[r] = {c: (_scaled(as_record(metrics[r].get(c)), scales[c]) if scales[c] != 1 else
                      as_record(metrics[r].get(c))) for c, _ in columns}
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
    for r in model_rows(classification):
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
                  "masked_gender_auc": as_record(rec.get("masked_gender_auc")),
                  **{f"share_{k}": stats.record(v) for k, v in shares.items()}}
    return out


def direction_note(classification: Mapping[str, Any], digits: int = 2) -> str:
    """The reference line under :func:`direction_table`: the test set's own signed log ratio
    (``test_set.ratio_gt``, what a pure context reader approaches) and 0, the masked image
    read as neither gender."""
    gt = number((classification.get("test_set") or {}).get("ratio_gt"))
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
    return {r: {a: as_record((fam.get(r) or {}).get(a)) for a, _ in PROBE_COLUMNS}
            for r in in_order(fam)}


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
    return {r: {c: as_record((fam.get(r) or {}).get(c)) for c, _ in cols} for r in in_order(fam)}


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
    for r in model_rows(metrics):
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
    ns = sorted({len(metrics[r]["per_seed"]) for r in model_rows(metrics)})
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
    m, f = number(ts.get("n_male")), number(ts.get("n_female"))
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
            m = number(rec.get("mean"))
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
                m = number((rec or {}).get("mean"))
                if m is not None:
                    out[f"{t}/{r}/{c}"] = round(m, 4)
    return out


__all__ = ["row_names", "row_order", "TABLE1_COLUMNS", "TABLE2_COLUMNS", "TABLE3_COLUMNS",
           "TABLE3_CLASSIFIER_COLUMNS", "TABLE1_DIFF", "TABLE2_DIFF", "PROBE_COLUMNS",
           "TABLE2_HIDDEN", "SCALE_100", "caption_columns", "display_scale", "metric_header",
           "cell", "number", "as_record", "model_rows", "table", "table1", "table2", "table3",
           "probe_table", "flip_table", "flip_columns", "seed_values", "differences", "n_seeds",
           "markdown", "diff_markdown", "flat_metrics", "true_ratio", "table2_columns",
           "made_by", "stamp"]
