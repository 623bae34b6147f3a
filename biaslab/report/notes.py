"""The report's notes under Tables 1 and 2: what the numbers need beside them (the resampled
sets' sizes, Leakage@F1, the attributes, the domain shift, the masks' residue, the Ratio's
reference, BiasAmp's null) and the rows marked † because a utility or the gender words
collapsed. Pure functions of the stages' JSON metrics."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from biaslab.runtime import stats
from biaslab.report import model_rows, number, row_names, row_order, true_ratio


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
    rows = [r for r in model_rows(classification)
            if number((classification[r].get("Leakage_F1") or {}).get("mean")) is not None]
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


def baseline_note(classification: Mapping[str, Any]) -> str:
    """The line under Table 1's heading that says which baseline the rows are compared
    against (``metrics/classification.json`` ``<row>.training``,
    :mod:`biaslab.classify.tune`): every row at the same fixed settings (an equal budget of
    zero trials) or every row, Original included, tuned with the same trials, with each
    row's choice. "" when no row records how it was trained."""
    rows = [r for r in row_order() if isinstance((classification.get(r) or {}).get("training"),
                                                 Mapping)]
    if not rows:
        return ""
    names = row_names()
    tr = {r: classification[r]["training"] for r in rows}
    tuned = [r for r in rows if tr[r].get("tuning")]
    nh = ("NH-Fair (ICLR 2026) found that many debiasing methods do not beat a properly "
          "tuned standard model")
    if not tuned:
        fixed = sorted({(tr[r].get("lr"), tr[r].get("weight_decay")) for r in rows},
                       key=str)
        what = "; ".join(f"lr {a:g}, weight decay {b:g}" for a, b in fixed
                         if a is not None and b is not None)
        return (f"Baseline: untuned. Every row, Original included, trains with the same "
                f"fixed settings ({what}; epochs by early stopping on the validation loss): "
                f"an equal budget of zero trials (`classifier.tuning.trials: 0`). {nh}; "
                "`-S classifier.tuning.trials=4` gives every row the same tuning budget.")
    t0 = tr[tuned[0]]["tuning"]
    chosen = "; ".join(f"{names.get(r, r)} lr {tr[r]['tuning']['chosen']['lr']:g}, wd "
                       f"{tr[r]['tuning']['chosen']['weight_decay']:g}" for r in tuned)
    untuned = [names.get(r, r) for r in rows if r not in tuned]
    return (f"Baseline: tuned with the same budget ({nh}). Every row, Original included, "
            f"chose its learning rate and weight decay from the same {t0.get('n_trials')} "
            f"candidates by validation mAP at seed {t0.get('seed')} (epochs by early "
            f"stopping), then trained every seed with the choice: {chosen}."
            + (f" Not tuned: {', '.join(untuned)}." if untuned else ""))


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
        lo = number((sk.get("probe_auc") or {}).get("lo"))
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
    ba = number(nul.get("ba"))
    if ba is None:
        return ""
    lo, hi = number(nul.get("min")), number(nul.get("max"))
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
        return number(((tab.get(r) or {}).get(k) or {}).get("mean"))
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
    ref = number(((tab.get(reference) or {}).get(utility) or {}).get("mean"))
    if ref is None or ref <= 0 or floor <= 0:
        return {}
    out = {}
    for r, row in tab.items():
        m = number(((row or {}).get(utility) or {}).get("mean"))
        if r != reference and m is not None and m < floor * ref:
            out[r] = m / ref
    return out


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
