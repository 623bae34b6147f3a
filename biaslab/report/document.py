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
from collections.abc import Mapping
from typing import Any

from biaslab import registry
from biaslab import report as R
from biaslab.report import sensitivity as SENS
from biaslab.report.glance import glossary_lines, mitigation_blocks
from biaslab.runtime import stats
from biaslab.analysis import validity
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
          "sensitivity": "metrics/sensitivity.json"}
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
        for row in R._rows(metrics):
            rec = R._record(metrics[row].get(key)) or {}
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


def _num(v, digits: int) -> float | None:
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
        for row in R._rows(m[fkey]):
            for name in names:
                rec = (full.get(row) or {}).get(name)
                if not rec or rec.get("n") in (None, 0):
                    continue
                if row == "original":
                    out.setdefault(row, {})[name] = {"mean": _num(rec.get("mean"), digits),
                                                     "ci95": _num(rec.get("ci95"), digits),
                                                     "n": rec.get("n")}
                    nf = stats.noise_floor(rec.get("std"), int(rec.get("n") or 0))
                    noise[name] = None if nf is None else round(nf, digits + 1)
                else:
                    out.setdefault(row, {})[name] = {
                        "diff": _num(rec.get("diff"), digits), "lo": _num(rec.get("diff_lo"), digits),
                        "hi": _num(rec.get("diff_hi"), digits), "n": rec.get("n")}
    # the signed ln r of the masked calls: absolute on every row, its sign
    # is the direction (> 0 leans "man"); averaged over seeds before any fold
    for row in R._rows(m["classification"]):
        rec = (full.get(row) or {}).get("log r")
        if rec and rec.get("n"):
            n_inf = int(rec.get("n_inf") or 0)
            out.setdefault(row, {})["log r"] = {
                "mean": None if n_inf else _num(rec.get("mean"), 2),
                "ci95": None if n_inf else _num(rec.get("ci95"), 2), "n_inf": n_inf}
    # the protected attribute's LIC (stage eval_attribute), absolute on every row:
    # only when that stage computed it (skin, gender_skin), so the gender default is unchanged
    att = m.get("attribute") or {}
    if att.get("metrics") == "computed here" and att.get("rows"):
        block: dict = {"name": att.get("attribute")}
        for row, rec in att["rows"].items():
            r = rec.get("LIC") or {}
            if r.get("n"):
                block[row] = {"LIC": {"mean": _num(r.get("mean"), digits),
                                      "ci95": _num(r.get("ci95"), digits)}}
        cls_att = (m.get("classification") or {}).get("attribute") or {}
        if cls_att.get("name") == block["name"]:
            for row, rec in (cls_att.get("rows") or {}).items():
                r = rec.get("Leakage") or {}
                if r.get("n"):
                    block.setdefault(row, {})["Leakage"] = {"mean": _num(r.get("mean"), digits),
                                                            "ci95": _num(r.get("ci95"), digits)}
        out["attribute"] = block
    out["noise"] = noise
    out["validity"] = {k: int(vsum.get(k, 0)) for k in (
        "holds", "fails", "no_practical_effect", "inconclusive", "not_testable",
        "metric_not_valid_on_this_data", "not_informative", "n")}
    return out



def build(m: dict[str, dict], params: dict[str, Any]) -> dict[str, Any]:
    """The report of one run.

    Args:
        m: the metrics files by :data:`INPUTS` key (parsed JSON dicts).
        params: the run's params.yaml (groups ``report``, ``filters``, ``generate``, ``data``).

    Returns:
        ``{"markdown": str (tables.md), "validity": dict (metrics/validity.json),
        "summary_full": dict, "summary": dict, "charts": [(file name, table, columns, title,
        ideal values)]}`` (:func:`biaslab.report.charts.bar_chart` arguments).

    Raises:
        KeyError: a metrics file of :data:`INPUTS` missing from ``m``.
    """
    digits = int((params.get("report") or {}).get("digits", 1))
    filt = params.get("filters") or {}
    backend = (params.get("generate") or {}).get("backend", "?")
    source = (params.get("data") or {}).get("source", "?")
    t1, t2, t3 = R.table1(m["classification"]), R.table2(m["captioning"]), \
        R.table3(m["artifact"])
    t3c = R.table3(m["artifact_captioner"])
    ufloor = float((params.get("report") or {}).get("utility_floor", 0.0) or 0.0)
    deg1 = R.degenerate_rows(t1, R.UTILITY["table1"], ufloor)
    deg2 = R.degenerate_rows(t2, R.UTILITY["table2"], ufloor)
    # captions that stop naming people read Ratio ≈ 1: never "best"
    gw_loss = float((params.get("report") or {}).get("max_gender_word_loss",
                                                     R.MAX_GENDER_WORD_LOSS))
    cdeg2 = R.caption_degenerate_rows(t2, gw_loss, ufloor)
    cols2 = R.table2_columns(m["captioning"])
    d1 = R.differences(m["classification"], R.TABLE1_DIFF)
    d2 = R.differences(m["captioning"], R.TABLE2_DIFF)
    p_clf, p_cap = R.probe_table(m["probe"], "classifier"), R.probe_table(m["probe"], "captioner")
    t4 = R.table4_current(m["select"], m["captioning"], filt.get("names", []),
                          filt.get("weights", []))
    p_lgt = R.probe_table(m["probe"], "classifier_logit")
    p_mrg = R.probe_table(m["probe"], "captioner_margin") if m["probe"].get("captioner_margin") \
        else None
    checks = validity.probe_checks(m["probe"], "classifier") + \
        validity.probe_checks(m["probe"], "classifier_logit") + \
        validity.probe_checks(m["probe"], "captioner") + \
        validity.probe_checks(m["probe"], "captioner_margin") + \
        validity.table_checks(m["classification"], m["artifact"]) + \
        validity.libra_checks(m["captioning"], m["dcg_apply"]) + \
        validity_paper001.retrieval_checks(m["retrieval"]) + \
        validity_paper001.spurious_checks(m.get("spurious")) + \
        validity.declared_checks(m["probe"], m["classification"], m["captioning"], m["controls"])
    # every mitigation on every headline metric of Tables 1-2, where no check above has it
    checks += validity.headline_checks(m["classification"], m["captioning"],
                                       skip=[c["id"] for c in checks])
    # every claim with its margin: directional, equivalence or non-inferiority verdicts
    checks = validity.decide(checks, float((params.get("validity") or {}).get(
        "margin_fraction", validity.MARGIN_FRACTION)))
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
    # a claimed difference smaller than Original's own move under a small object mask
    checks = SENS.confounded_checks(checks, m.get("sensitivity"), digits)
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
        *(["", R.degenerate_note(deg2, R.UTILITY["table2"], ufloor)] if deg2 else []),
        *(["", R.caption_degenerate_note(cdeg2, gw_loss, ufloor)] if cdeg2 else []),
        "",
        R.ratio_reference_note(m["captioning"]),
        "",
        *([R.biasamp_null_note(m["captioning"]), ""]
          if R.biasamp_null_note(m["captioning"]) else []),
        R.diff_markdown(d2, R.TABLE2_DIFF, digits),
        "",
        R.power_line(m["controls"], "captioner", digits, R.TABLE2_COLUMNS),
        "",
        *[x for name, v in extra_arch.items() for x in (
            f"### Table 2, captioner `{name}` (n = {R.n_seeds(v)} seeds)", "",
            R.markdown(R.table2(v), R.table2_columns(v), digits, rank=True,
                       degenerate=[*R.degenerate_rows(R.table2(v), R.UTILITY["table2"],
                                                      ufloor),
                                   *R.caption_degenerate_rows(R.table2(v), gw_loss,
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
        *([R.attributes_note(m["classification"]), ""]
          if R.attributes_note(m["classification"]) else []),
        R.markdown(t1, R.TABLE1_COLUMNS, digits, rank=True, degenerate=deg1),
        *(["", R.degenerate_note(deg1, R.UTILITY["table1"], ufloor)] if deg1 else []),
        *(["", R.resample_note(m["datasets"])] if R.resample_note(m["datasets"]) else []),
        *(["", R.leakage_f1_note(m["classification"])]
          if R.leakage_f1_note(m["classification"]) else []),
        *(["", R.domain_note(m["classification"])]
          if R.domain_note(m["classification"]) else []),
        "",
        R.diff_markdown(d1, R.TABLE1_DIFF, digits),
        "",
        R.power_line(m["controls"], "classifier", digits, R.TABLE1_COLUMNS),
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
                       degenerate=R.degenerate_rows(R.table1(v), R.UTILITY["table1"],
                                                    ufloor)), "",
            R.diff_markdown(R.differences(v, R.TABLE1_DIFF), R.TABLE1_DIFF, digits), "")],
        *(table2_lines if not no_captions else [
            "## Table 2: image captioning", "",
            f"Not run: {m['captioning']['skipped']}. Stages eval_captioner, artifact_captioner, "
            "human_bias, contrast_set, eval_retrieval and LIBRA's (bcs_classifier ... dcg_apply) wrote skip "
            "records; Tables 1 and 3, the audit, the controls and the validity checks are "
            "this data's results.", ""]),
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
        *([R.residue_note(m["residue"]), ""] if R.residue_note(m["residue"]) else []),
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
    lines += flip_markdown(m["probe"].get("flip") or {})
    lines += attribute_markdown(m.get("attribute") or {},
                                (m.get("classification") or {}).get("attribute"),
                                utility={"classifier": (t1, deg1), "captioner": (t2, deg2),
                                         "floor": ufloor})
    lines += audit_attribute_markdown((m.get("audit") or {}).get("attribute") or {})
    lines += controls_attribute_markdown(m.get("controls_attribute") or {})
    lines += retrieval_markdown(m["retrieval"])
    lines += spurious_markdown(m.get("spurious") or {})
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
        f"{float((params.get('validity') or {}).get('margin_fraction', validity.MARGIN_FRACTION)):g}"
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
        R.controls_markdown(m["controls"]),
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
        R.metric_comparison_markdown(m["controls"]) or "No captioner controls on this data.",
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


RETRIEVAL_ROWS = (("random", "random ranking"), ("tfidf", "TF-IDF, gender-agnostic"),
                  ("scorer", "CLIP-style scorer"), ("clip_clip", "scorer, CLIP-clip"))


def spurious_markdown(sp: Mapping) -> list[str]:
    """The "Spurious correlations (paper 001 appendix D)" section from metrics/spurious.json
    (stage spurious): the gender classifiers without gender (ROC AUC, natural test images vs
    the contrast set) and the caption clusters (ΔM with its CI and LDA words, Table 5).
    Returns markdown lines; none for a skip record."""
    cls, cl = sp.get("classifiers"), sp.get("clusters") or {}
    if not isinstance(cls, Mapping):
        return []
    su = sp.get("setup") or {}
    labels = (("background", "persons removed (background only)"),
              ("text", "gender-neutralised captions"), ("image", "unmasked image"))

    def cell(r):
        return stats.format_cell(r, 1, 100.0) if r else "–"
    t = cl.get("test") or {}
    p = t.get("p")
    lines = [
        "## Spurious correlations (paper 001 appendix D)",
        "",
        f"Gender classifiers that cannot see the gender word or the person (logistic "
        f"regressions on frozen features, trained on {su.get('n_train', '?')} train images): "
        f"ROC AUC in %, 50 = chance, ± 95 % bootstrap CI over the {su.get('n_test', '?')} test "
        f"images or the {su.get('n_contrast_sources', '?')} contrast-set source images. On "
        f"the contrast set every image appears once per group with the background fixed, so "
        f"a classifier that reads only context is at chance there.",
        "",
        "| input | natural test images | contrast set | natural - contrast |",
        "|---|---|---|---|"]
    for key, label in labels:
        r = cls.get(key) or {}
        lines.append(f"| {label} | {cell(r.get('natural'))} | {cell(r.get('contrast'))} | "
                     f"{cell(r.get('natural-contrast'))} |")
    ch = su.get("contrast_background_changed")
    if ch is not None:
        lines += ["", f"{ch} of {su.get('contrast_background_compared', '?')} contrast "
                      f"versions (lossless pairs) differ from their source outside the removed "
                      f"persons (the edit reaches past the person boxes)."]
    rows = [r for r in cl.get("rows") or [] if r.get("n")]
    lines += ["", f"Caption clusters (K-Means, M = {cl.get('m', '?')}, of the averaged "
                  f"neutralised caption embeddings of {cl.get('n', '?')} images, encoder "
                  f"{cl.get('encoder', '?')}; ΔM = male share of the cluster minus the overall "
                  f"{100 * float(cl.get('overall_male_share') or 0):.1f} %, points, Wilson 95 % "
                  f"CI; words by LDA). Chi-square test of cluster x gender: "
                  f"χ² = {t.get('chi2', '?')} ({t.get('dof', '?')} dof), "
                  f"p = {'?' if p is None else f'{p:.3g}'}; a test image's cluster's male "
                  f"share among the train images predicts its gender at ROC AUC "
                  f"{stats.format_cell(cl.get('auc'), 1, 100.0)} %.", "",
              "| cluster | images | ΔM | salient words |", "|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: -(r.get("delta_m") or 0)):
        d = r.get("delta_m")
        ci = (f" [{r['lo']:+.1f}, {r['hi']:+.1f}]" if r.get("lo") is not None else "")
        lines.append(f"| {r['cluster']} | {r['n']} | "
                     f"{'' if d is None else f'{d:+.1f}'}{ci} | {r.get('words', '')} |")
    c = cl.get("contrast")
    if c:
        lines += ["", f"On the contrast set the same clusters hold each source once per group: "
                      f"the largest |ΔM| there is {c.get('max_abs_delta_m')} points "
                      f"({c.get('n')} versions)."]
    return lines + [""]


def retrieval_markdown(ret: Mapping) -> list[str]:
    """The "Retrieval (paper 001)" section from metrics/retrieval.json (stage eval_retrieval):
    its Table 1 (Bias@K / MaxSkew@K of a random ranking, the gender-agnostic TF-IDF model and
    the scorer, on the natural test gallery and on its balanced resamples) and its Table 2
    (scorer vs CLIP-clip, with Recall@K). A K that reaches the whole gallery ranks every image
    (Bias@K is then the gallery's own balance, MaxSkew@K 0 by construction) and is left out.
    Returns markdown lines; none when the file holds no scorer row (a skip record)."""
    setup = ret.get("setup") or {}
    ks = setup.get("ks") or []
    n_gallery = setup.get("n_gallery")
    big = [k for k in ks if isinstance(n_gallery, int) and k >= n_gallery]
    ks = [k for k in ks if k not in big]
    if not ks or not isinstance(ret.get("scorer"), dict):
        return []
    rows = [(key, label) for key, label in RETRIEVAL_ROWS if isinstance(ret.get(key), dict)]
    head = "| model | " + " | ".join(f"Bias@{k}" for k in ks) + " | " + \
        " | ".join(f"MaxSkew@{k}" for k in ks) + " |"
    rule = "|---|" + "---|" * (2 * len(ks))

    def table(src: Mapping) -> list[str]:
        out = [head, rule]
        for key, label in rows:
            r = src.get(key) or {}
            cells = [stats.format_cell(r.get(f"{m}@{k}"), 3) for m in ("Bias", "MaxSkew")
                     for k in ks]
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        return out
    lines = [
        "## Retrieval (paper 001)",
        "",
        f"{setup.get('n_queries', '?')} gender-neutralised test captions as queries over "
        f"{n_gallery if n_gallery is not None else '?'} test images "
        f"({setup.get('n_female', '?')} female / {setup.get('n_male', '?')} male / "
        f"{setup.get('n_undefined', '?')} undefined). Bias@K: (men - women) / (men + women) "
        "in the top K, 0 = balanced, signed; MaxSkew@K: the largest log-ratio of a group's "
        "share in the top K to its share of the gallery, 0 = the gallery's own balance. "
        "TF-IDF ranks by the images' own neutralised captions: it cannot see gender, so what it "
        "shows is the data's bias (paper 001 sec. 3.3).",
        "",
        "Table 1, natural gallery (± 95 % bootstrap CI over queries):",
        "",
        *table(ret),
        ""]
    bal = ret.get("balanced")
    if isinstance(bal, dict) and bal:
        lines += [f"Table 1, balanced gallery (the larger group sampled down to the smaller, "
                  f"undefined images kept, their captions the queries; mean ± 95 % t-CI over "
                  f"{setup.get('n_balanced', '?')} resamples):", "", *table(bal), ""]
    con = ret.get("contrast") or {}
    cset, csu = con.get("set") or {}, con.get("setup") or {}
    cks = [k for k in csu.get("ks") or [] if k in ks]
    if cks and isinstance(con.get("scorer"), dict):
        acc = cset.get("accepted") or {}
        lines += [
            f"Table 1, contrast set (paper 001's GenSynth, stage contrast_set: each of "
            f"{cset.get('source_images', '?')} maskable test images edited into both groups' "
            f"versions with the background fixed, KNN-filtered; {cset.get('pairs', '?')} kept "
            f"both ({acc.get('female', '?')} female / {acc.get('male', '?')} male versions "
            f"accepted of {cset.get('candidates', '?')}): a gallery of "
            f"{csu.get('n_gallery', '?')} images, {csu.get('n_queries', '?')} queries; ± 95 % "
            "bootstrap CI over queries):", "",
            "| model | " + " | ".join(f"Bias@{k}" for k in cks) + " | "
            + " | ".join(f"MaxSkew@{k}" for k in cks) + " |",
            "|---|" + "---|" * (2 * len(cks))]
        for key, label in rows:
            r = con.get(key) or {}
            cells = [stats.format_cell(r.get(f"{m}@{k}"), 3) for m in ("Bias", "MaxSkew")
                     for k in cks]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    elif con.get("note"):
        lines += [f"Contrast set: {con['note']}.", ""]
    rec = ret.get("recall") or {}
    if rec.get("scorer") and rec.get("clip_clip"):
        rks = setup.get("recall_ks") or []
        lines += [
            f"Table 2, the scorer and CLIP-clip (the {setup.get('clip_m', '?')} of "
            f"{setup.get('embedding_dim', '?')} embedding dimensions with the highest mutual "
            f"information with gender on {setup.get('clip_mi_images', '?')} training images "
            "dropped): MaxSkew@K, and Recall@K of each query's own image (the cost of "
            "debiasing; paper 001 reports ImageNet accuracy for it); natural gallery, and "
            "the contrast set's MaxSkew@K where it exists.",
            "",
            "| model | " + " | ".join(f"MaxSkew@{k}" for k in ks) + " | "
            + " | ".join(f"R@{k}" for k in rks) + " |",
            "|---|" + "---|" * (len(ks) + len(rks))]
        for key in ("scorer", "clip_clip", "tfidf"):
            if not isinstance(ret.get(key), dict):
                continue
            label = dict(RETRIEVAL_ROWS)[key]
            cells = [stats.format_cell(ret[key].get(f"MaxSkew@{k}"), 3) for k in ks] + \
                [stats.format_cell((rec.get(key) or {}).get(f"R@{k}"), 3) for k in rks]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
            if isinstance(con.get(key), dict):
                lines.append(f"| {label}, contrast set | " + " | ".join(
                    stats.format_cell(con[key].get(f"MaxSkew@{k}"), 3) if k in cks else "–"
                    for k in ks) + " | " + " | ".join("–" for _ in rks) + " |")
        lines.append("")
    if big:
        lines += [f"Not shown: K = {', '.join(map(str, big))} >= the gallery's {n_gallery} "
                  f"images (the whole gallery: the gallery's own balance, not the model's).", ""]
    return lines


#: columns of the protected-attribute table (metrics/attribute.json, stage eval_attribute)
ATTRIBUTE_COLUMNS = (("LIC_M", "LIC_M"), ("LIC_D", "LIC_D"), ("LIC", "LIC ↓"))


def flip_markdown(flip: Mapping[str, Any]) -> list[str]:
    """The attribute-flip probe's section (``metrics/probe.json``'s ``flip`` block;
    ``biaslab.analysis.probe.flip_sensitivities``), or nothing when the probe did not run it."""
    if not flip:
        return []
    head = ["### Attribute-flip probe (the person's own attribute)", ""]
    if not flip.get("available"):
        return head + [f"Not run: {flip.get('reason')}.", ""]
    cols = R.flip_columns(flip)
    objs = flip.get("objects") or {}
    assoc = "; ".join(f"{d}: " + " vs ".join(f"{v} → {', '.join(o)}" for v, o in
                                              objs[d].items()) for d in objs)
    n = ", ".join(f"{k} {v}" for k, v in (flip.get("n_pairs") or {}).items())

    def seeds(model):
        ks = sorted({int(rec.get("n_seeds", rec.get("n")))
                     for rows in (flip.get(model) or {}).values() for rec in rows.values()
                     if isinstance(rec, Mapping) and rec.get("n_seeds", rec.get("n"))})
        return "?" if not ks else str(ks[0]) if len(ks) == 1 else f"{ks[0]}-{ks[-1]}"
    lines = head + [
        "Each test image drawn twice by the generator, with the person's "
        + " / ".join(flip.get("dims") or []) + " flipped and nothing else (person visible). "
        "Cell: mean change of the model's output for the objects associated with the second "
        "value minus those of the first (" + assoc + "), second image minus first, "
        "± 95 % CI over seeds. The objects in the two images are the same, so a model that "
        "does not use the person's attribute to predict objects scores 0; a model that learned "
        f"the planted association scores > 0. Pairs: {n}.", "",
        f"Classifiers (mean object probability; n = {seeds('classifier')} seeds):", "",
        R.markdown(R.flip_table(flip, "classifier"), cols, 3), ""]
    ref = flip.get("reference") or {}
    if ref:
        lines += ["Reference, the association in the training images: a reader that predicts "
                  "each object from the attribute alone, with its frequency among the training "
                  "images of each value, scores " + "; ".join(
                      f"{d} {stats.format_cell(r, 3)} (bootstrap 95 % CI over n = {r.get('n')} "
                      "images: " + ", ".join(f"{v} {k}" for v, k in
                                            (r.get("n_by_value") or {}).items()) + ")"
                      for d, r in ref.items()) + ". A model's sensitivity near it is what the "
                  "data taught, planted or by chance.", ""]
    cap = R.flip_table(flip, "captioner")
    if cap:
        lines += ["Captioners (share of the associated objects the caption names; n = "
                  f"{seeds('captioner')} seeds):", "",
                  R.markdown(cap, cols, 3), ""]
    return lines


def audit_attribute_markdown(a: Mapping, top: int = 5) -> list[str]:
    """The dataset audit of the run's attribute (``metrics/audit.json``'s ``attribute`` block,
    ``biaslab.analysis.audit_attribute``; REVISE, paper 004 Sect. 5.1): images per group, the
    person's size and centre distance per group (mean ± t 95 % CI over images, the test
    between groups), and the ``top`` objects whose rate differs most significantly between
    the groups. Empty without the block."""
    if not a or not a.get("groups"):
        return []
    groups = list(a["groups"])
    imgs = a.get("images") or {}
    lines = [f"## Dataset audit by {a.get('attribute')} (REVISE, paper 004 Sect. 5.1; stage "
             "audit)", "",
             "Images per group: " + ", ".join(f"{g} {imgs.get(g, 0)}" for g in groups) + ".", ""]
    prom = a.get("prominence") or {}
    heads = {"area_frac": "person size (fraction of the image)",
             "center_dist": "person's distance from the image centre (unit square)"}
    rows = []
    for m, head in heads.items():
        rec = prom.get(m) or {}
        cells = [stats.format_cell((rec.get("groups") or {}).get(g), 3) for g in groups]
        if "p_welch" in rec:
            test = (f"d = {rec['cohens_d']:.2f}, Welch p = {rec['p_welch']:.3g}"
                    if rec.get("p_welch") is not None else "–")
        else:
            test = (f"Kruskal-Wallis p = {rec['p_kruskal']:.3g}"
                    if rec.get("p_kruskal") is not None else "–")
        rows.append(f"| {head} | " + " | ".join(cells) + f" | {test} |")
    lines += ["Person prominence (largest person box; mean ± t 95 % CI over images; "
              f"{prom.get('n_without_person', 0)} grouped images have no person box):", "",
              "| measure | " + " | ".join(groups) + " | between groups |",
              "|---|" + "---|" * (len(groups) + 1), *rows, ""]
    obj = a.get("objects") or {}
    lines += [f"Objects: {obj.get('n_significant', 0)} of {obj.get('n_tested', 0)} tested "
              "categories differ between the groups (" + ("Fisher's exact test" if len(groups)
                                                          == 2 else "chi-square test")
              + ", Benjamini-Hochberg); rate ratio = the highest group's image rate over the "
              "lowest's. Full tables: plots/audit/attribute_objects.csv, "
              "attribute_words.csv.", ""]
    tops = (obj.get("top") or [])[:top]
    if tops:
        lines += ["| object | most | least | rate ratio | adjusted p |", "|---|---|---|---|---|",
                  *(f"| {t['item']} | {t['max_group']} | {t['min_group']} | "
                    + (f"{R._num(t['rate_ratio']):.2f}" if R._num(t["rate_ratio"]) is not None
                       else str(t["rate_ratio"]))
                    + " | " + ("–" if t.get("p_adj") is None else "< 1e-6" if t["p_adj"] < 1e-6
                               else f"{t['p_adj']:.3g}")
                    + " |" for t in tops), ""]
    lines += _audit_context_markdown(a, groups, top)
    return lines


def _p_text(p) -> str:
    return "–" if p is None else "< 1e-6" if p < 1e-6 else f"{p:.3g}"


def _audit_context_markdown(a: Mapping, groups: list, top: int) -> list[str]:
    """The supercategory, distance and appearance sections of :func:`audit_attribute_markdown`
    (paper 004 Sect. 5.1.2-5.1.4); a section the block lacks or skipped says so."""
    lines: list[str] = []
    two = len(groups) == 2
    sup = a.get("supercategories") or {}
    if "skipped" in sup:
        lines += [f"Context by supercategory (Fig. 7): not measured ({sup['skipped']}).", ""]
    elif sup:
        lines += [f"Context by supercategory (Fig. 7 right; an image counts when it has an "
                  f"object of the supercategory): {sup.get('n_significant', 0)} of "
                  f"{sup.get('n_tested', 0)} tested supercategories differ between the groups "
                  "(plots/audit/attribute_supercategories.csv).", ""]
        if sup.get("top"):
            lines += ["| supercategory | most | least | rate ratio | adjusted p |",
                      "|---|---|---|---|---|",
                      *(f"| {t['item']} | {t['max_group']} | {t['min_group']} | "
                        + (f"{R._num(t['rate_ratio']):.2f}" if R._num(t["rate_ratio"])
                           is not None else str(t["rate_ratio"]))
                        + f" | {_p_text(t.get('p_adj'))} |" for t in sup["top"][:top]), ""]
    dist = a.get("distance") or {}
    if dist:
        lines += [f"Person-object distance (Eq. 1; smaller = closer): "
                  f"{dist.get('n_significant', 0)} of {dist.get('n_tested', 0)} tested object "
                  "categories differ between the groups ("
                  + ("Welch's t-test, Cohen's d first group minus second" if two
                     else "Kruskal-Wallis") + ", Benjamini-Hochberg; "
                  "plots/audit/attribute_distance.csv).", ""]
        if dist.get("top"):
            lines += ["| object | closest | farthest | Cohen's d | adjusted p |",
                      "|---|---|---|---|---|",
                      *(f"| {t['item']} | {t['closest_group']} | {t['farthest_group']} | "
                        + ("–" if R._num(t.get("cohens_d")) is None
                           else f"{R._num(t['cohens_d']):.2f}")
                        + f" | {_p_text(t.get('p_adj'))} |" for t in dist["top"][:top]), ""]
    app = a.get("appearance") or {}
    if "skipped" in app:
        lines += [f"Appearance differences (Sect. 5.1.4): not measured ({app['skipped']}).", ""]
    elif app:
        lines += [f"Appearance differences (Sect. 5.1.4; per object, a linear SVM on the "
                  "frozen image features of the images with it, projected to sqrt(n) "
                  f"dimensions; {app.get('folds', '?')}-fold accuracy ± t 95 % CI over the "
                  f"folds against its permutation-test chance, "
                  f"{app.get('n_permutations', '?')} permutations): "
                  f"{app.get('n_significant', 0)} of {app.get('n_tested', 0)} tested object "
                  "categories are told apart by group (plots/audit/"
                  "attribute_appearance.csv). The features see the person as well as the "
                  "scene, as the paper's scene features do.", ""]
        if app.get("top"):
            lines += ["| object | images | accuracy | chance | accuracy / chance | "
                      "adjusted p |", "|---|---|---|---|---|---|",
                      *(f"| {t['item']} | {t['n']} | "
                        + stats.format_cell({"mean": R._num(t.get("accuracy")),
                                             "ci95": R._num(t.get("accuracy_ci95")),
                                             "n": app.get("folds")},
                                            3)
                        + f" | {R._num(t['chance']):.3f} | {R._num(t['ratio']):.2f} | "
                        + f"{_p_text(t.get('p_adj'))} |" for t in app["top"][:top]), ""]
    return lines


def controls_attribute_markdown(c: Mapping) -> list[str]:
    """The attribute's controls (stage ``controls_attribute``,
    ``biaslab.analysis.controls_attribute``): per control and metric the known answer, the
    measured mean ± t 95 % CI over the replicates and the verdict. Empty for gender or
    without the file."""
    if not c or "skipped" in c or not c.get("classifier"):
        return []
    a, groups = c.get("attribute"), c.get("groups") or []
    tsets = c.get("test_set") or {}
    n_rep = len(c.get("replicates") or [])
    summ = c.get("summary") or {}
    lines = [f"## Controls for {a}: the attribute's Leakage and LIC against known answers "
             "(stage controls_attribute)", "",
             "Control models whose bias is known by construction, through the code that "
             "evaluates the trained models: oracle (the true objects: Leakage = 0 exactly), "
             "amplifier@q (adds the group's stereotype object, "
             + ", ".join(f"{g}: {o}" for g, o in (c.get("stereotypes") or {}).items())
             + ", with probability q: Leakage > 0, LIC > 0), blind (no object: the attacker "
             f"guesses one group, LK_M < 100 / {len(groups)}), human (a held-out human caption: "
             f"LIC ≈ 0). Cell: mean ± t 95 % CI over n = {n_rep} replicates. Test images per "
             "group: classifier "
             + ", ".join(f"{g} {v}" for g, v in ((tsets.get("classifier") or {})
                                                  .get("n_labelled_by_group") or {}).items())
             + "; captioner "
             + ", ".join(f"{g} {v}" for g, v in ((tsets.get("captioner") or {})
                                                  .get("n_by_group") or {}).items())
             + f". {summ.get('matches', 0)} of {summ.get('n', 0)} match, "
               f"{summ.get('does_not_match', 0)} do not, {summ.get('inconclusive', 0)} "
               "inconclusive.", "",
             "| task | control | metric | expected | measured | verdict |",
             "|---|---|---|---|---|---|"]
    for task in ("classifier", "captioner"):
        part = c.get(task) or {}
        if "skipped" in part:
            lines.append(f"| {task} | – | – | – | skipped: {part['skipped']} | – |")
            continue
        for name, ms in part.items():
            for metric, r in ms.items():
                if "verdict" not in r:
                    continue
                exp, meas = R.control_cells(r, 2)
                lines.append(f"| {task} | {name} | {metric} | {exp} | {meas} | {r['verdict']} |")
    return lines + [""]


def attribute_markdown(att: Mapping, classifiers: Mapping | None = None,
                       utility: Mapping[str, Any] | None = None
                       ) -> list[str]:
    """The protected attribute's section (stage ``eval_attribute``): the captioned
    test images per group, the smallest difference the two smallest groups detect, and for
    skin / gender_skin the captioners' LIC (and Error per group with the worst-group gap for
    gender_skin), mean ± 95 % CI over captioner seeds; with ``classifiers`` (the
    ``attribute`` block of metrics/classification.json) the classifiers' Leakage of the
    attribute too. Empty without the file.

    ``utility`` ({"classifier": (Table 1, its † rows), "captioner": (Table 2, its † rows),
    "floor": report.utility_floor}):
    each table then leads with the same models' utility (mAP, CIDEr; the attribute does not
    change it) and ranks its columns as Tables 1-2 do, never marking a † row (utility under
    the floor) best: a model that stops working leaks little of any attribute. Rows are in
    the tables' order."""
    if not att or is_skipped(att) or "attribute" not in att:
        return []
    a = att["attribute"]
    ti = att.get("test_images") or {}
    per = ti.get("per_group") or {}
    mdd = ti.get("min_detectable_difference_pp")
    pair = ti.get("smallest_pair") or []
    lines = [f"## Protected attribute: {a} (stage eval_attribute)", "",
             "Captioned test images per group: " + ", ".join(f"{g} {n}" for g, n in per.items())
             + f" (n = {ti.get('n', '?')}). "
             + (f"The two smallest groups ({', '.join(pair)}) detect a difference of a per-image "
                f"rate (e.g. Error) of {mdd:.1f} percentage points or more (two-sided α = "
                f"{ti.get('alpha', 0.05)}, power {ti.get('power', 0.8)}, at a rate of 50 %)."
                if mdd is not None else "A group has fewer than 2 images: no difference between "
                                        "groups is detectable."), ""]
    rows = att.get("rows") or {}
    if att.get("metrics") != "computed here":
        lines += [f"The {a} metrics are Table 2's (metrics/captioning.json).", ""]
        return lines
    cols = ATTRIBUTE_COLUMNS
    if a == "gender_skin":
        # the group's image count in its header: with 1 image the seeds agree (± 0.0), which
        # says nothing of the group
        cols += (("Error_pooled", "Error (pooled)"),
                 *((f"Error_{g}", f"Error {g} ({per[g]} img)") for g in per),
                 ("Error_worst_group_gap", "worst-group gap ↓"))
    util = utility or {}
    t2, deg2 = util.get("captioner") or ({}, {})
    t2 = t2 if any(R._num((t2.get(r, {}).get("CIDEr") or {}).get("mean")) is not None
                   for r in rows) else {}
    if t2:
        cols = (("CIDEr", "CIDEr ↑"), *cols)
    tab = {r: {c: (t2.get(r) or {}).get(c) if c == "CIDEr" else rows[r].get(c)
               for c, _ in cols} for r in R._in_order(rows)}
    n = max((int((v or {}).get("n") or 0) for rec in rows.values() for v in
             (rec.get("LIC"), rec.get("LIC_M"))), default=0)
    how = ("captions not masked, thesis sec. 2.5.3" if a == "skin" else
           "a 4-way attacker, gender words masked; Error in %, Burns et al., per group")
    lines += [f"Captioners by {a} ({how}). LIC = LIC_M - LIC_D: 0 = the captions tell the "
              f"group no better than the human captions do. Cell: mean ± 95 % CI over n = {n} "
              "captioner seeds.", "",
              R.markdown(tab, cols, 1, first="Training set", rank=bool(t2),
                         degenerate=[r for r in deg2 if r in tab]), ""]
    if t2 and any(r in tab for r in deg2):
        lines += [R.degenerate_note({r: v for r, v in deg2.items() if r in tab},
                                    R.UTILITY["table2"],
                                    float(util.get("floor") or 0.0)), ""]
    if classifiers and classifiers.get("name") == a:
        groups = classifiers.get("groups") or []
        crows = classifiers.get("rows") or {}
        ccols = (("Leakage", "Leakage ↓"), ("LK_M", "LK_M"), ("LK_D", "LK_D"))
        matched = any(R._num((rec.get("Leakage_F1") or {}).get("mean")) is not None
                      for rec in crows.values())
        if matched:
            ccols += (("Leakage_F1", "Leakage@F1 ↓"), ("LK_D_F1", "LK_D@F1"), ("F1", "F1"))
        t1, deg1 = util.get("classifier") or ({}, {})
        t1 = t1 if any(R._num((t1.get(r, {}).get("mAP") or {}).get("mean")) is not None
                       for r in crows) else {}
        if t1:
            ccols = (("mAP", "mAP ↑"), *ccols)
        ctab = {r: {c: (t1.get(r) or {}).get(c) if c == "mAP" else crows[r].get(c)
                    for c, _ in ccols} for r in R._in_order(crows)}
        cn = max((int((rec.get("Leakage") or {}).get("n") or 0) for rec in crows.values()),
                 default=0)
        nt = classifiers.get("n_test_labelled_by_group") or {}
        lines += [f"Classifiers: Leakage of {a} from their object predictions (paper 000 Eq. 7 "
                  f"and appendix B; a {len(groups)}-way attacker, group-balanced rounds). "
                  "Labelled test images per group: "
                  + ", ".join(f"{g} {k}" for g, k in nt.items()) + ". Cell: mean ± 95 % CI "
                  f"over n = {cn} classifier seeds."
                  + (" Leakage@F1 = LK_M - LK_D@F1: LK_D of the ground truth made as noisy as "
                     "the model (its macro F1; Wang et al. 2019 sec. 4.2), since a noisier model "
                     "leaks less by being noisier." if matched else ""), "",
                  R.markdown(ctab, ccols, 1, rank=bool(t1),
                             degenerate=[r for r in deg1 if r in ctab]), ""]
        if t1 and any(r in ctab for r in deg1):
            lines += [R.degenerate_note({r: v for r, v in deg1.items() if r in ctab},
                                        R.UTILITY["table1"],
                                        float(util.get("floor") or 0.0)), ""]
    return lines
