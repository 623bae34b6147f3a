"""The bias report as a document (the markdown assembly out of the stage).

:func:`build` turns the pipeline's metrics files into ``plots/report/tables.md`` (paper 000
Tables 1-4 with every cell mean ± 95 % CI and n, each bias metric's difference from Original,
the causal probe, retrieval bias, the validity verdicts, the metric controls and LIBRA), the
verdicts of ``metrics/validity.json`` (:mod:`biaslab.analysis.validity`), the headline
``metrics/summary_full.json`` / ``metrics/summary.json`` and the list of figures
(:mod:`biaslab.report.charts`). Stage ``report`` reads the files and writes what it returns.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from biaslab import registry
from biaslab import report as R
from biaslab.report import controls as RC
from biaslab.report import notes as NOTES
from biaslab.report import table4 as T4
from biaslab.report import sections as SECTIONS
from biaslab.report import sensitivity as SENS
from biaslab.report.glance import glossary_lines, mitigation_blocks
from biaslab.runtime import stats
from biaslab.analysis import validity, validity_libra
from biaslab.analysis import validity_paper001
from biaslab.analysis import verdicts
from biaslab.runtime.io import is_skipped

#: the metrics files :func:`build` reads (key -> path; stage ``report`` passes them in)
INPUTS = {"classification": "metrics/classification.json",
          "captioning": "metrics/captioning.json", "artifact": "metrics/artifact.json",
          "artifact_captioner": "metrics/artifact_captioner.json",
          "probe": "metrics/probe.json", "select": "metrics/select.json",
          "human_bias": "metrics/human_bias.json", "bcs": "metrics/bcs.json",
          "dcg_apply": "metrics/dcg_apply.json", "retrieval": "metrics/retrieval.json",
          "spurious": "metrics/spurious.json",
          "controls": "metrics/controls.json", "datasets": "metrics/datasets.json",
          "residue": "metrics/residue.json", "attribute": "metrics/attribute.json",
          "audit": "metrics/audit.json",
          "controls_attribute": "metrics/controls_attribute.json",
          "sensitivity": "metrics/sensitivity.json",
          "sensitivity_captioner": "metrics/sensitivity_captioner.json"}
#: headline metrics: (file key, metric key, name in summary.json)
HEADLINE = (("classification", "mAP", "mAP"), ("classification", "Leakage", "Leakage"),
            ("classification", "Ratio", "Ratio (classifier)"),
            ("classification", "masked_gender_auc", "masked AUC"),
            ("captioning", "Ratio", "Ratio (captioner)"), ("captioning", "LIC", "LIC"),
            ("captioning", "Error", "Error"))


def headline(m: dict) -> dict:
    """metrics/summary_full.json: per method the headline metrics with their CI, n, the
    seed-to-seed std and the difference from Original (Welch 95 % CI over seeds)."""
    out: dict = {}
    for fkey, key, name in HEADLINE:
        metrics = m[fkey]
        diffs = R.differences(metrics, ((key, key),))
        for row in R.model_rows(metrics):
            rec = R.as_record(metrics[row].get(key)) or {}
            d = (diffs.get(row) or {}).get(key) or {}
            out.setdefault(row, {})[name] = {
                "mean": stats.to_json(rec.get("mean"), 4), "ci95": stats.to_json(rec.get("ci95"), 4),
                "std": stats.to_json(rec.get("std"), 4),
                "n": rec.get("n"), "n_inf": rec.get("n_inf"),
                **({"diff": stats.to_json(d.get("diff"), 4), "diff_lo": stats.to_json(d.get("lo"), 4),
                    "diff_hi": stats.to_json(d.get("hi"), 4)} if row != "original" else {})}
    # which way the masked calls lean, signed and averaged before any fold
    for row, cols in R.direction_table(m["classification"]).items():
        if (cols.get("log_r") or {}).get("na"):
            continue
        rec = cols.get("log_r") or {}
        out.setdefault(row, {})["log r"] = {
            "mean": stats.to_json(rec.get("mean"), 4), "ci95": stats.to_json(rec.get("ci95"), 4),
            "std": stats.to_json(rec.get("std"), 4), "n": rec.get("n"),
            "n_inf": rec.get("n_inf"), "sign": rec.get("sign")}
        out[row]["masked calls %"] = {
            k: stats.to_json((cols.get(f"share_{k}") or {}).get("mean"), 2)
            for k in ("man", "woman", "both", "neither")}
    return out


#: what metrics/summary.json (the one DVC metric) compares per model family: the bias metrics
#: and the utility of each of paper 000's tables
COMPACT = (("classification", ("Leakage", "Ratio (classifier)", "masked AUC", "mAP")),
           ("captioning", ("LIC", "Ratio (captioner)", "Error")))


def number(v, digits: int) -> float | None:
    """A JSON number rounded to ``digits``, or None (missing, a string such as ``"inf"``,
    not finite): DVC's metric views compare numbers only."""
    if v is None or isinstance(v, (str, bool)):
        return None
    f = float(v)
    return round(f, digits) if math.isfinite(f) else None


def compact(full: dict, m: dict, vsum: dict, digits: int = 1) -> dict:
    """metrics/summary.json, the only file DVC registers as ``metrics``: numbers only, so
    ``dvc metrics diff`` and ``dvc exp show`` compare them as numbers.

    * ``original.<metric>``: ``{"mean", "ci95", "n"}``, Original's mean over its n seeds and
      the half-width of its 95 % t CI.
    * ``<row>.<metric>`` for every other row: ``{"diff", "lo", "hi", "n"}``, its difference
      from Original (Welch 95 % CI, ``lo`` and ``hi`` its bounds; n the row's seeds).
      Metrics (x100 scale, as the tables): Leakage, Ratio, the masked gender AUC and mAP for
      the classifier rows; LIC, Ratio and Error for the captioner rows. A value that is
      infinite or missing is null.
    * ``<row>."log r"``: ``{"mean", "ci95", "n_inf"}``, the signed ln r of the persons-masked
      calls on every classifier row, *not* as a difference (its sign is the direction, > 0
      leans "man"; ``n_inf`` seeds that never call one gender make the mean null). The man /
      woman / both / neither shares are in metrics/summary_full.json.
    * ``noise.<metric>``: the seed-to-seed noise floor, the half-width of the 95 % CI of a
      difference between two revisions of Original with its n seeds
      (``stats.noise_floor``): a change between two experiments below it is seed noise.
    * ``validity.{holds, fails, no_practical_effect, inconclusive, not_testable,
      metric_not_valid_on_this_data, not_informative, n}``: metrics/validity.json's
      counts.
    * ``attribute.name`` and ``attribute.<row>.{LIC, Leakage}`` ``{"mean", "ci95"}``: with
      ``attribute`` skin or gender_skin, that attribute's LIC of every captioner row and
      Leakage of every classifier row (absolute: 0 = no more than the human captions / the
      ground truth); absent for gender (Tables 1 and 2 have them).

    Per-seed values and n stay in metrics/summary_full.json and the stages' metrics/*.json
    (plain outs, committed), read by ``scripts/exp_table.py`` and tables.md."""
    out: dict = {}
    noise: dict = {}
    for fkey, names in COMPACT:
        for row in R.model_rows(m[fkey]):
            for name in names:
                rec = (full.get(row) or {}).get(name)
                if not rec or rec.get("n") in (None, 0):
                    continue
                if row == "original":
                    out.setdefault(row, {})[name] = {"mean": number(rec.get("mean"), digits),
                                                     "ci95": number(rec.get("ci95"), digits),
                                                     "n": rec.get("n")}
                    nf = stats.noise_floor(rec.get("std"), int(rec.get("n") or 0))
                    noise[name] = None if nf is None else round(nf, digits + 1)
                else:
                    out.setdefault(row, {})[name] = {
                        "diff": number(rec.get("diff"), digits), "lo": number(rec.get("diff_lo"), digits),
                        "hi": number(rec.get("diff_hi"), digits), "n": rec.get("n")}
    # the signed ln r of the masked calls: absolute on every row, its sign
    # is the direction (> 0 leans "man"); averaged over seeds before any fold
    for row in R.model_rows(m["classification"]):
        rec = (full.get(row) or {}).get("log r")
        if rec and rec.get("n"):
            n_inf = int(rec.get("n_inf") or 0)
            out.setdefault(row, {})["log r"] = {
                "mean": None if n_inf else number(rec.get("mean"), 2),
                "ci95": None if n_inf else number(rec.get("ci95"), 2), "n_inf": n_inf}
    # the protected attribute's LIC (stage eval_attribute), absolute on every row:
    # only when that stage computed it (skin, gender_skin), so the gender default is unchanged
    att = m.get("attribute") or {}
    if att.get("metrics") == "computed here" and att.get("rows"):
        block: dict = {"name": att.get("attribute")}
        for row, rec in att["rows"].items():
            r = rec.get("LIC") or {}
            if r.get("n"):
                block[row] = {"LIC": {"mean": number(r.get("mean"), digits),
                                      "ci95": number(r.get("ci95"), digits)}}
        cls_att = (m.get("classification") or {}).get("attribute") or {}
        if cls_att.get("name") == block["name"]:
            for row, rec in (cls_att.get("rows") or {}).items():
                r = rec.get("Leakage") or {}
                if r.get("n"):
                    block.setdefault(row, {})["Leakage"] = {"mean": number(r.get("mean"), digits),
                                                            "ci95": number(r.get("ci95"), digits)}
        out["attribute"] = block
    out["noise"] = noise
    out["validity"] = {k: int(vsum.get(k, 0)) for k in (
        "holds", "fails", "no_practical_effect", "inconclusive", "not_testable",
        "metric_not_valid_on_this_data", "not_informative", "n")}
    return out


@dataclass(frozen=True)
class ReportSettings:
    """What :func:`build` reads besides the metrics files, built once by stage ``report``
    (:meth:`from_params`).

    Attributes:
        digits: decimals of every table cell (``report.digits``).
        utility_floor: a row whose utility falls this far below Original's is marked † (not
            working; ``report.utility_floor``).
        max_gender_word_loss: a captioner row that names no gender on this many more images
            than Original is marked † (``report.max_gender_word_loss``).
        margin_fraction: each equivalence margin as a fraction of its reference effect
            (``validity.margin_fraction``).
        filter_names: ``filters.names``: the order of Table 4's current row (its weights are
            the ones stage ``select`` recorded and used).
        backend, source: ``generate.backend`` and ``data.source`` (named in the report).
    """
    digits: int = 1
    utility_floor: float = 0.0
    max_gender_word_loss: float = NOTES.MAX_GENDER_WORD_LOSS
    margin_fraction: float = validity.MARGIN_FRACTION
    filter_names: tuple[str, ...] = ()
    backend: str = "?"
    source: str = "?"

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "ReportSettings":
        """From the run's params.yaml (groups ``report``, ``validity``, ``filters``,
        ``generate``, ``data``)."""
        r = params.get("report") or {}
        return cls(digits=int(r.get("digits", 1)),
                   utility_floor=float(r.get("utility_floor", 0.0) or 0.0),
                   max_gender_word_loss=float(r.get("max_gender_word_loss",
                                                    NOTES.MAX_GENDER_WORD_LOSS)),
                   margin_fraction=float((params.get("validity") or {}).get(
                       "margin_fraction", validity.MARGIN_FRACTION)),
                   filter_names=tuple((params.get("filters") or {}).get("names") or ()),
                   backend=str((params.get("generate") or {}).get("backend", "?")),
                   source=str((params.get("data") or {}).get("source", "?")))


def selected_weights(select: Mapping[str, Any], names: Sequence[str]) -> tuple[list, list]:
    """``(names, weights)`` of the weighted rank selection as stage ``select`` recorded it
    (``metrics/select.json`` ``weights``: the weights it used, e.g. colour fidelity's 0 for a
    skin-tone run), in the order of ``names`` (then any recorded name not among them)."""
    used = dict(select.get("weights") or {})
    order = [n for n in names if n in used] + [n for n in used if n not in names]
    return order, [used[n] for n in order]


def build(m: dict[str, dict], settings: ReportSettings) -> dict[str, Any]:
    """The report of one run.

    Args:
        m: the metrics files by :data:`INPUTS` key (parsed JSON dicts).
        settings: :class:`ReportSettings` (the stage builds it from params.yaml).

    Returns:
        ``{"markdown": str (tables.md), "validity": dict (metrics/validity.json),
        "summary_full": dict, "summary": dict, "charts": [(file name, table, columns, title,
        ideal values)]}`` (:func:`biaslab.report.charts.bar_chart` arguments).

    Raises:
        KeyError: a metrics file of :data:`INPUTS` missing from ``m``.
    """
    digits, backend, source = settings.digits, settings.backend, settings.source
    t1, t2, t3 = R.table1(m["classification"]), R.table2(m["captioning"]), \
        R.table3(m["artifact"])
    t3c = R.table3(m["artifact_captioner"])
    ufloor = settings.utility_floor
    deg1 = NOTES.degenerate_rows(t1, NOTES.UTILITY["table1"], ufloor)
    deg2 = NOTES.degenerate_rows(t2, NOTES.UTILITY["table2"], ufloor)
    # captions that stop naming people read Ratio ≈ 1: never "best"
    gw_loss = settings.max_gender_word_loss
    cdeg2 = NOTES.caption_degenerate_rows(t2, gw_loss, ufloor)
    cols2 = R.table2_columns(m["captioning"])
    d1 = R.differences(m["classification"], R.TABLE1_DIFF)
    d2 = R.differences(m["captioning"], R.TABLE2_DIFF)
    p_clf, p_cap = R.probe_table(m["probe"], "classifier"), R.probe_table(m["probe"], "captioner")
    t4 = T4.table4_current(m["select"], m["captioning"],
                          *selected_weights(m["select"], settings.filter_names))
    p_lgt = R.probe_table(m["probe"], "classifier_logit")
    p_mrg = R.probe_table(m["probe"], "captioner_margin") if m["probe"].get("captioner_margin") \
        else None
    checks = validity.probe_checks(m["probe"], "classifier") + \
        validity.probe_checks(m["probe"], "classifier_logit") + \
        validity.probe_checks(m["probe"], "captioner") + \
        validity.probe_checks(m["probe"], "captioner_margin") + \
        validity.table_checks(m["classification"], m["artifact"]) + \
        validity_libra.libra_checks(m["captioning"], m["dcg_apply"]) + \
        validity_paper001.retrieval_checks(m["retrieval"]) + \
        validity_paper001.spurious_checks(m.get("spurious")) + \
        validity.declared_checks(m["probe"], m["classification"], m["captioning"], m["controls"])
    # every mitigation on every headline metric of Tables 1-2, where no check above has it
    checks += validity.headline_checks(m["classification"], m["captioning"],
                                       skip=[c["id"] for c in checks])
    # every claim with its margin: directional, equivalence or non-inferiority verdicts
    checks = validity.decide(checks, settings.margin_fraction)
    # a model that does not work (†) is no evidence; an effect shown absent cannot be reduced
    checks = verdicts.apply_degenerate(checks, {"classifier": list(deg1),
                                                "captioner": [*deg2, *cdeg2]})
    checks = verdicts.apply_no_effect_to_reduce(checks)
    # a claim whose metric misses its controls' known answer is not judged
    checks = verdicts.apply_controls(checks, m["controls"])
    # a Ratio claim on a mask that itself reads as one gender is not judged
    checks = verdicts.apply_mask_neutral(checks, m["probe"])
    # every check with its reason and file; a measure that cannot move is no pass
    checks = verdicts.explain(checks)
    # a claimed difference smaller than a model's own move under a small object mask
    checks = SENS.confounded_checks(checks, m.get("sensitivity"), digits,
                                    m.get("sensitivity_captioner"))
    vsum = verdicts.summary(checks)
    neutral = verdicts.mask_neutral_rows(m["probe"])
    hb = m["human_bias"]
    bcs = m["bcs"]
    apply_ = m["dcg_apply"]
    mix = ":".join(f"{float((bcs.get('mix') or {}).get(t, 0)):g}" for t in ("swap", "t5", "merged"))
    ts1 = m["classification"].get("test_set") or {}
    extra_bb = {k: v for k, v in (m["classification"].get("backbones") or {}).items()
                if isinstance(v, dict)}   # Table 1 column groups after the first backbone
    ts2 = m["captioning"].get("test_set") or {}
    extra_arch = {k: v for k, v in (m["captioning"].get("archs") or {}).items()
                  if isinstance(v, dict)}   # Table 2 groups after ClipCap (captioner.archs)
    no_captions = is_skipped(m["captioning"])   # data without captions (OpenImages)
    bn = ((m["controls"] or {}).get("biasamp_null") or {}).get("ba")
    ba_null = (f" ({bn:.2f} here)" if isinstance(bn, (int, float)) and math.isfinite(bn)
               else "")   # the captioner controls' BiasAmp reference
    table2_lines = [
        f"## Table 2: image captioning (n = {R.n_seeds(m['captioning'])} seeds; test images: "
        f"{ts2.get('n_female', '?')} female / {ts2.get('n_male', '?')} male, gender from "
        f"{ts2.get('gender_source', '?')})",
        "",
        *(["Captioner `clipcap` (the others of `captioner.archs` follow).", ""]
          if extra_arch else []),
        R.markdown(t2, cols2, digits, rank=True, degenerate=[*deg2, *cdeg2]),
        *(["", NOTES.degenerate_note(deg2, NOTES.UTILITY["table2"], ufloor)] if deg2 else []),
        *(["", NOTES.caption_degenerate_note(cdeg2, gw_loss, ufloor)] if cdeg2 else []),
        "",
        NOTES.ratio_reference_note(m["captioning"]),
        "",
        *([NOTES.biasamp_null_note(m["captioning"]), ""]
          if NOTES.biasamp_null_note(m["captioning"]) else []),
        R.diff_markdown(d2, R.TABLE2_DIFF, digits),
        "",
        RC.power_line(m["controls"], "captioner", digits, R.TABLE2_COLUMNS),
        "",
        *SENS.captioner_markdown(m.get("sensitivity_captioner"), R.row_names(), digits),
        *[x for name, v in extra_arch.items() for x in (
            f"### Table 2, captioner `{name}` (n = {R.n_seeds(v)} seeds)", "",
            R.markdown(R.table2(v), R.table2_columns(v), digits, rank=True,
                       degenerate=[*NOTES.degenerate_rows(R.table2(v), NOTES.UTILITY["table2"],
                                                      ufloor),
                                   *NOTES.caption_degenerate_rows(R.table2(v), gw_loss,
                                                              ufloor)]), "",
            R.diff_markdown(R.differences(v, R.TABLE2_DIFF), R.TABLE2_DIFF, digits), "")],
        f"Human captions of the dataset (stage human_bias, {hb.get('n_female', '?')} female / "
        f"{hb.get('n_male', '?')} male images, gender from {hb.get('gender_source', '?')}): "
        f"Ratio {R.cell(hb.get('Ratio'), None, 2)}, Error {R.cell(hb.get('Error'), None, 1)}, "
        f"LIC_D {stats.format_cell(hb.get('LIC_D'), 1)} over "
        f"{(hb.get('LIC_D') or {}).get('n', '?')} LIC classifier seeds "
        f"({hb.get('lic_classifier', '?')}).",
        "",
    ]
    glance = mitigation_blocks(headline(m), checks, R.row_names(),
                               {e.row: e.doc for e in registry.row_entries() if e.doc}, digits)
    lines = [
        "# Bias report",
        "",
        *([*glance, "", "## How to read the tables", ""] if glance else []),
        f"Data: `{source}`; counterfactual backend (S_augment, S_synthetic, Table 3): "
        f"`{backend}`. Every cell is mean ± 95 % CI over training seeds (Student t; n seeds in "
        "each heading); `∞ (k/n seeds)` marks seeds whose Ratio is infinite (a model that never "
        "predicts one gender), `(k missing)` seeds where a metric could not be computed. "
        "Ratio = max(r, 1/r) with r = #man / #woman predictions (paper 000 sec. 3.1); 1 is "
        "unbiased. Ratio_E (Table 1, our addition) is the same with the expected counts "
        "sum P(man) / sum P(woman): threshold-free, finite where a model that reads no context "
        "puts every masked image on one side of its threshold (Ratio ∞). Leakage = LK_M - LK_D (Eq. 7) and LIC = LIC_M - LIC_D (thesis Eq. 2.11), "
        "x100. In Tables 1 and 2 the best mean of each ranked column (↑ higher, ↓ lower, →x "
        "closest to x: 1 for the classifiers' calls on persons-masked images, as paper 000; "
        "the test set's own man : woman ratio for captions of unmasked images, Burns et al. "
        "2018) is **bold** and the second best <u>underlined</u>, as in paper 000; "
        "where their CIs overlap the order is not significant. Models are the tiny offline "
        "tier unless `models: paper` is composed: not comparable with the papers' numbers.",
        "",
        f"## Table 1: multi-label classification (n = {R.n_seeds(m['classification'])} seeds; "
        f"test images: {ts1.get('n_female', '?')} female / {ts1.get('n_male', '?')} male)",
        "",
        *([f"Backbone `{ts1['backbone']}`" + (" (the first of `classifier.backbones`; the "
                                               "others follow)." if extra_bb else "."), ""]
          if ts1.get("backbone") else []),
        *([NOTES.attributes_note(m["classification"]), ""]
          if NOTES.attributes_note(m["classification"]) else []),
        *([NOTES.baseline_note(m["classification"]), ""]
          if NOTES.baseline_note(m["classification"]) else []),
        R.markdown(t1, R.TABLE1_COLUMNS, digits, rank=True, degenerate=deg1),
        *(["", NOTES.degenerate_note(deg1, NOTES.UTILITY["table1"], ufloor)] if deg1 else []),
        *(["", NOTES.resample_note(m["datasets"])] if NOTES.resample_note(m["datasets"]) else []),
        *(["", NOTES.leakage_f1_note(m["classification"])]
          if NOTES.leakage_f1_note(m["classification"]) else []),
        *(["", NOTES.domain_note(m["classification"])]
          if NOTES.domain_note(m["classification"]) else []),
        "",
        R.diff_markdown(d1, R.TABLE1_DIFF, digits),
        "",
        RC.power_line(m["controls"], "classifier", digits, R.TABLE1_COLUMNS),
        "",
        "### Table 1, direction: which way the persons-masked calls lean",
        "",
        R.markdown(R.direction_table(m["classification"]), R.DIRECTION_COLUMNS, 2),
        "",
        R.direction_note(m["classification"]),
        "",
        *SENS.markdown(m.get("sensitivity"), R.row_names(), digits),
        *[x for name, v in extra_bb.items() for x in (
            f"### Table 1, backbone `{name}`", "",
            R.markdown(R.table1(v), R.TABLE1_COLUMNS, digits, rank=True,
                       degenerate=NOTES.degenerate_rows(R.table1(v), NOTES.UTILITY["table1"],
                                                    ufloor)), "",
            R.diff_markdown(R.differences(v, R.TABLE1_DIFF), R.TABLE1_DIFF, digits), "")],
        *(table2_lines if not no_captions else [
            "## Table 2: image captioning", "",
            f"Not run: {m['captioning']['skipped']}. Stages eval_captioner, artifact_captioner, "
            "human_bias, contrast_set, eval_retrieval and LIBRA's (bcs_classifier ... dcg_apply) wrote skip "
            "records; Tables 1 and 3, the audit, the controls and the validity checks are "
            "this data's results.", "",
            *SENS.captioner_markdown(m.get("sensitivity_captioner"), R.row_names(), digits)]),
        "## Table 3: synthetic-artifact test",
        "",
        "Ratio here is the raw r = #man / #woman on the real test images (orig) and on the same "
        "images with a random body part inpainted (inp); Δ = 100 |Ratio_orig - Ratio_inp| / "
        "Ratio_orig of the seed-mean ratios (paper 000 Table 3). A large Δ means the model "
        "reacts to the inpainted part, artifacts or not; Δ_artifact (our addition) "
        "= Δ(backend) - Δ(the same parts of the same images re-drawn by the generator): the "
        "part of Δ the backend's artifacts cause, 0 by construction when the backend is "
        "`render`, with a bootstrap 95 % CI over test images. Δ, other group: "
        "the positive control, the same parts filled from the other group, so the gender cue "
        "can change; where it stays near 0 the test cannot move a call on this data and a "
        "small Δ is no evidence. Test-set inpainting backend: "
        f"`{(m['artifact'].get('test_set') or {}).get('backend', '?')}` (the training sets' "
        f"counterfactuals: `{backend}`).",
        "",
        f"Multi-label classifiers (gender outputs; n = {R.n_seeds(m['artifact'])} seeds):",
        "",
        R.markdown(t3, R.TABLE3_CLASSIFIER_COLUMNS if any(
            "delta_artifact" in v for v in t3.values()) else R.TABLE3_COLUMNS, 2),
        "",
        *([f"Captioners (caption gender; n = {R.n_seeds(m['artifact_captioner'])} seeds):",
           "", R.markdown(t3c, R.TABLE3_COLUMNS, 2), ""] if not no_captions else
          ["Captioners: not run (the data has no captions).", ""]),
        *([NOTES.residue_note(m["residue"]), ""] if NOTES.residue_note(m["residue"]) else []),
        "## Causal attribute-sensitivity probe",
        "",
    ]
    if p_clf or p_cap:
        np_ = m["probe"].get("n_pairs") or {}
        lines += [
            "Paired test images identical except for one planted attribute (its male- vs "
            "female-associated value), person masked out as in the Ratio protocol. Cell: mean "
            "change of the model's man-vs-woman output across the pair (classifier: P(man) - "
            "P(woman); captioner: male-word rate - female-word rate), ± 95 % CI over seeds. "
            "A model that ignores context scores 0. Pairs per attribute: "
            + (", ".join(f"{k} {v}" for k, v in np_.items()) if np_ else "?") + ".",
            "",
            "Classifiers (P(man) - P(woman)):", "", R.markdown(p_clf, R.PROBE_COLUMNS, 3), "",
            "Classifiers on the logit margin (logit P(man) - logit P(woman); a probability near "
            "0 or 1 cannot move, the logit can, so a near-zero probability sensitivity of a "
            "saturated model shows here as what it is):", "",
            R.markdown(p_lgt, R.PROBE_COLUMNS, 2), "",
            "Captioners (sampled gender word):", "", R.markdown(p_cap, R.PROBE_COLUMNS, 3), "",
            *(["Captioners on the teacher-forced margin (log P(male version) - log P(female "
               "version) of the same caption under both images of a pair, nats; continuous, "
               "so fewer seeds decide a claim):", "",
               R.markdown(p_mrg, R.PROBE_COLUMNS, 2), ""] if p_mrg else [])]
    else:
        lines += [str(m["probe"].get("note") or "No probe on this data (no planted truth)."), ""]
    lines += SECTIONS.flip_markdown(m["probe"].get("flip") or {})
    lines += SECTIONS.attribute_markdown(m.get("attribute") or {},
                                (m.get("classification") or {}).get("attribute"),
                                utility={"classifier": (t1, deg1), "captioner": (t2, deg2),
                                         "floor": ufloor})
    lines += SECTIONS.audit_attribute_markdown((m.get("audit") or {}).get("attribute") or {})
    lines += SECTIONS.controls_attribute_markdown(m.get("controls_attribute") or {})
    lines += SECTIONS.retrieval_markdown(m["retrieval"])
    lines += SECTIONS.spurious_markdown(m.get("spurious") or {})
    lines += [
        "## Validity (planted truth as referee)",
        "",
        f"{vsum['holds']} hold, {vsum['fails']} fail, "
        f"{vsum['no_practical_effect']} show no practical effect, "
        f"{vsum['inconclusive']} inconclusive, "
        f"{vsum['not_testable']} not testable on this data"
        + (f", {vsum['metric_not_valid_on_this_data']} on a metric its controls do not "
           f"validate here" if vsum.get("metric_not_valid_on_this_data") else "")
        + (f", {vsum['mask_not_neutral']} not judged (mask not neutral)"
           if vsum.get("mask_not_neutral") else "")
        + (f", {vsum['not_informative']} not informative (a measure without variance)"
           if vsum.get("not_informative") else "")
        + f". A directional claim holds or fails by its 95 % CI; it shows no practical effect "
        f"when its 90 % CI lies within the margin; a claim of no change (\"not below\", "
        f"\"not above\") holds by a one-sided 5 % test against the margin (two one-sided "
        f"tests: Schuirmann 1987, Lakens 2017). Each margin is "
        f"{settings.margin_fraction:g}"
        f" of a reference effect the same run measures (Original's own effect on that "
        f"quantity; a bounded quantity's full span), fixed before the run "
        f"(biaslab/analysis/validity.py; each check's margin, reason and source file in "
        f"metrics/validity.json)."
        + (" Checks at planted bias 0 come from the sweep: `python scripts/bias_sweep.py --run "
           "--collect` (plots/report/bias_sweep.md)." if source == "synthetic" else "")
        + " Other files in plots/report (sweeps, backend comparison, diagnostics, Table 4 "
        "across experiments) are written by scripts, not by `dvc repro`: each names the data "
        "profile and commit it was made with, and belongs to this run only where both match.",
        "",
        *(verdicts.mask_neutral_markdown(neutral) if neutral else []),
        verdicts.markdown(checks) if checks else "No check applies to this data.",
        "",
        "## Metric controls (known answers)",
        "",
        "Control models whose bias is known by construction (biaslab/analysis/controls.py, stage "
        "controls: person oracle, context reader, stereotype amplifier at rate q, constant "
        "'man', a held-out human caption) through the same metric code as the trained models. "
        "A claim whose metric misses a control's known answer reads \"metric not valid on this "
        "data\" above.",
        "",
        RC.controls_markdown(m["controls"]),
        "",
        "### Which captioning metric sees the planted bias",
        "",
        "The captioning bias metrics on the same controls: LIC, BiasAmp, DBA_O and "
        "DBAC (Nair, Tokas & Kerner 2025, biaslab/metrics/dbac.py) in both directions, with "
        "the authors' prior correction and without it (direct). A metric that reads the "
        "planted bias matches every control: the stereotype amplifiers raise it above the "
        "person oracle whose captions they extend (the difference per replicate, paired: "
        "`Δ` in the controls table), and the controls drawn like the human captions read "
        "its null. The null is 0, except "
        f"BiasAmp's{ba_null}: the BiasAmp of the test images' own human captions against "
        "the same training captions (biaslab.metrics.biasamp.human_null). Slope d/dq: least "
        "squares of the replicate means on the amplifier's rate q (q = 0: the person oracle, "
        "whose captions the amplifier extends), 95 % CI from the "
        "replicates; q detectable: the power section's MDE over that slope, the smallest "
        "amplification this test set detects (\"not seen\": the slope's CI reaches 0). "
        "Encoder: the attacker of LIC / DBAC (`controls.attackers` adds others"
        + ("; the sweep's controls run bert_pre, plots/report/bias_sweep.md)."
           if source == "synthetic" else ")."),
        "",
        RC.metric_comparison_markdown(m["controls"]) or "No captioner controls on this data.",
        "",
        "## Table 4: filter ablation",
        "",
        "This workspace's row (filters.weights over " + ", ".join(settings.filter_names) + "); "
        "Object / Color / Prompt are the selected candidates' mean filter scores (automatic "
        "stand-ins for the paper's human ratings). All combinations: "
        "`python scripts/filter_ablation.py --run --collect` (writes plots/report/table4.md).",
        "",
        T4.table4_markdown(t4),
        "",
        "## LIBRA",
        "",
        "Not run (the data has no captions)." if no_captions else
        f"Biased caption synthesis (paper 003, Table 1 mix "
        f"swap:t5:merged = {mix}): "
        f"{bcs.get('total', R.DASH)} captions "
        f"({', '.join(f'{k}: {v}' for k, v in (bcs.get('selected') or {}).items())}); mean "
        f"increase of gender predictability d (Eq. 6) of the kept T5 captions = "
        f"{R.cell((bcs.get('d_mean') or {}).get('A_GC'), None, 3)}. Samples: "
        f"plots/libra/samples.md.",
    ]
    for name in ("human", "swapped", "pred",
                 *sorted(k for k in apply_ if k.startswith("context_reader"))):
        a = apply_.get(name)
        if isinstance(a, dict) and a.get("before"):
            b, f = a["before"], a["after"]
            ch = a.get("error_change") or {}
            paired = (f"; Error change {ch['mean']:+.1f} [{ch['lo']:+.1f}, {ch['hi']:+.1f}] "
                      f"points, paired over {ch.get('n')} images"
                      if ch.get("mean") is not None and ch.get("lo") is not None else "")
            lines.append(f"DCG on `{name}` captions ({a.get('n')}): gender wrong "
                         f"{100 * b.get('wrong', 0):.1f}% -> {100 * f.get('wrong', 0):.1f}%, "
                         f"correct {100 * b.get('correct', 0):.1f}% -> "
                         f"{100 * f.get('correct', 0):.1f}%, words changed in "
                         f"{100 * a.get('changed', 0):.1f}%{paired}.")
    lines.append("")
    lines += [*glossary_lines(), ""]
    full = headline(m)
    return {
        "markdown": "\n".join(lines),
        "validity": {"checks": checks, "summary": vsum,
                     "preconditions": verdicts.precondition_rows(m["controls"]),
                     "preconditions_attribute": verdicts.attribute_precondition_rows(
                         m.get("controls_attribute")),
                     "mask_neutral": neutral},
        "summary_full": full,
        "summary": compact(full, m, vsum, digits),
        # (file, table, columns, title, unbiased value per column, † rows, axis unit)
        "charts": [
            ("table1.png", t1, [c for c in R.TABLE1_COLUMNS if c[0] in (
                "mAP", "Ratio", "Ratio_expected", "Leakage")], "Table 1: classification",
             {"Ratio": 1.0, "Ratio_expected": 1.0, "Leakage": 0.0}, list(deg1), None),
            ("table2.png", t2, [c for c in cols2 if c[0] in (
                "METEOR", "Ratio", "LIC", "DBAC_direct_T_to_A", "Error", "BiasAmp")],
             "Table 2: captioning",
             {"Ratio": R.true_ratio(m["captioning"].get("test_set")) or 1.0, "LIC": 0.0,
              "DBAC_direct_T_to_A": 0.0, "Error": 0.0,
              # a captioner as biased as people reads the human captions' own BiasAmp
              "BiasAmp": ((m["captioning"].get("test_set") or {}).get("biasamp_human_null")
                          or {}).get("ba", 0.0)}, [*deg2, *cdeg2], None),
            ("probe.png", {**{f"{k} (clf)": v for k, v in p_clf.items()},
                           **{f"{k} (cap)": v for k, v in p_cap.items()}},
             R.PROBE_COLUMNS, "Attribute sensitivity", {a: 0.0 for a, _ in R.PROBE_COLUMNS},
             [], "pair sensitivity in [-2, 2]: (clf) P(man) - P(woman), (cap) male - female "
                 "word rate"),
            ("table3.png", {**{f"{k} (clf)": v for k, v in t3.items()},
                            **{f"{k} (cap)": v for k, v in t3c.items()}},
             R.TABLE3_COLUMNS, "Table 3: artifact test", None, [], None)]}


__all__ = ["COMPACT", "HEADLINE", "INPUTS", "build", "compact", "headline"]


