"""Running the control models through the metric code (the logic of stage ``controls``,
which only reads its inputs and writes ``metrics/controls.json``).

:func:`run_controls` takes the prepared tables and the :class:`ControlsSettings` the stage
builds once from params.yaml, and returns the record the stage writes (its layout:
``stages/controls.py``'s docstring). The controls themselves (what each outputs and its
expected value) are :mod:`biaslab.analysis.controls`; this module feeds them through the
same code that evaluates the trained models: :func:`biaslab.classify.evaluate_outputs` (mAP,
Ratio, Ratio_E, Error = 100 - gender accuracy, Leakage), BiasAmp / DBA_O
(:mod:`biaslab.metrics.biasamp`), the captioning metrics of
:func:`biaslab.captioning.evaluation.caption_metrics` and the causal probe's pair
sensitivities (:mod:`biaslab.analysis.probe`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from biaslab.analysis import controls as K
from biaslab.captioning import evaluation as C
from biaslab.captioning.table2 import EvalSettings, LicSettings
from biaslab.classify import (evaluate_outputs, json_record, object_matrix, select_labels,
                              test_table)
from biaslab.data import synthetic as S
from biaslab.analysis import equivalence
from biaslab.runtime import stats
from biaslab.runtime.io import NO_CAPTIONS, InputError, json_number
from biaslab.runtime.parallel import map_jobs

#: the fraction of the strongest amplifier's effect that is an "≈" control's margin (param
#: ``validity.margin_fraction``, as the validity checks' margins)
MARGIN_FRACTION = 0.1


@dataclass(frozen=True)
class ControlsGroup:
    """Params group ``controls``, its defaults (the one place they live).

    Attributes:
        q: the amplifier's stereotype rates, each in (0, 1] (``controls.q``).
        seeds: the replicate seeds, >= 2 distinct (``controls.seeds``: a CI needs two).
        n_boot, seed: the probe controls' bootstrap resamples and seed.
        workers: processes for the captioner controls.
        attackers: extra LIC / DBAC attacker encoders (``controls.attackers``; checked
            against the installed ones by :func:`check_attackers`).
    """
    q: tuple[float, ...] = (0.5, 1.0)
    seeds: tuple[int, ...] = (0, 1, 2)
    n_boot: int = 1000
    seed: int = 0
    workers: int = 2
    attackers: tuple[str, ...] = ()

    def __post_init__(self):
        for k, conv in (("q", float), ("seeds", int), ("attackers", str)):
            object.__setattr__(self, k, tuple(conv(v) for v in getattr(self, k) or ()))


@dataclass(frozen=True)
class ControlsSettings(ControlsGroup):
    """Everything the controls read (:func:`run_controls`,
    :func:`biaslab.analysis.controls_attribute.run`), built once by the stage
    (:meth:`from_params`): group ``controls`` (:class:`ControlsGroup`'s fields) and what the
    controls share with six other groups.

    Attributes:
        min_cooccur, cooccur_rule, leakage_rounds: the classifier's object labels and
            Leakage attacker rounds, as stage ``eval_classifier`` (group ``classifier``).
        lic: :class:`biaslab.captioning.table2.LicSettings` (group ``lic``).
        eval: :class:`biaslab.captioning.table2.EvalSettings` (``gender_source``,
            ``biasamp_min_count``, ``dbac``: group ``eval_captioner``).
        words: the gender word list (``label.words``).
        root: the dataset (``data.root``): its planted truth, when it has one.
        margin_fraction: an equivalence margin as a fraction of the strongest amplifier's
            effect (``validity.margin_fraction``).
        attribute: the protected attribute (``attribute``).
    """
    min_cooccur: int = 5
    cooccur_rule: str = "each"
    leakage_rounds: int = 5
    lic: LicSettings = field(default_factory=LicSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    words: str = "lic"
    root: str = "data/raw"
    margin_fraction: float = MARGIN_FRACTION
    attribute: str = "gender"

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "ControlsSettings":
        """From the composed params (groups ``controls``, ``classifier``, ``lic``,
        ``eval_captioner``, ``label``, ``data``, ``validity``, ``attribute``). The ranges
        (q in (0, 1], >= 2 seeds) are checked by every stage's params check
        (:func:`biaslab.runtime.validate.check_controls`).

        Raises:
            ValueError: an unknown ``controls`` key or a bad value, naming the dotted param.
        """
        from biaslab.runtime.settings import from_params
        group = from_params(ControlsGroup, params.get("controls"), "controls")
        clf = params.get("classifier") or {}
        return cls(**{f.name: getattr(group, f.name) for f in fields(ControlsGroup)},
                   min_cooccur=int(clf.get("min_cooccur", 5)),
                   cooccur_rule=str(clf.get("cooccur_rule", "each")),
                   leakage_rounds=int(clf.get("leakage_rounds", 5)),
                   lic=from_params(LicSettings, params.get("lic"), "lic"),
                   eval=from_params(EvalSettings, params.get("eval_captioner"),
                                    "eval_captioner"),
                   words=str((params.get("label") or {}).get("words", "lic")),
                   root=str((params.get("data") or {}).get("root", "data/raw")),
                   margin_fraction=float((params.get("validity") or {}).get(
                       "margin_fraction", MARGIN_FRACTION)),
                   attribute=str(params.get("attribute", "gender")))


#: DBAC's dataset-side term lambda_D per direction (the attacker on the human captions, direct:
#: mean probability of the true value, no prior): the dose response of the *data's* bias
LAMBDA_D_KEYS = {"T->A": "DBAC_lambda_D_T_to_A", "A->T": "DBAC_lambda_D_A_to_T"}
DBAC_METRICS = K.DBAC_KEYS + tuple(LAMBDA_D_KEYS.values())
#: the captioning metrics that train an attacker (LIC and DBAC): recomputed per extra attacker
#: encoder of ``controls.attackers`` under the key ``<metric>@<encoder>`` (the
#: spread across encoders)
ATTACKER_METRICS = ("LIC", "LIC_M", "LIC_D") + DBAC_METRICS


def lambda_d(det: dict) -> dict:
    """{DBAC_lambda_D_<dir>: mean lambda_D} from caption_metrics' details (None if absent)."""
    d = det.get("DBAC") or {}
    return {k: ((d.get(direction) or {}).get("lambda_D_direct") or {}).get("mean")
            for direction, k in LAMBDA_D_KEYS.items()}


def check_attackers(value, lic_classifier: str) -> list[str]:
    """``controls.attackers``: a list of distinct LIC attacker kinds
    (:data:`biaslab.models.textclf.CLASSIFIERS`) other than ``lic.classifier`` (whose metrics the
    controls compute anyway). Raises ValueError "controls.attackers: <problem>"."""
    from biaslab.models.textclf import CLASSIFIERS
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"controls.attackers: must be a list of attacker names, got {value!r}")
    bad = [v for v in value if v not in CLASSIFIERS]
    if bad:
        raise ValueError(f"controls.attackers: unknown name(s) {bad}; known: "
                         f"{list(CLASSIFIERS)}")
    if len(set(value)) < len(value) or lic_classifier in value:
        raise ValueError(f"controls.attackers: names repeat or include lic.classifier "
                         f"({lic_classifier!r}, always computed): {value}")
    return list(value)


#: (t_{0.975} + t_{0.80}) * sqrt(2 / n) with df = 2n - 2: the smallest difference between two
#: rows of n replicates each that a two-sided 5 % test detects with 80 % power
POWER = 0.80


def read_truth(root: str) -> tuple[dict | None, float | None]:
    """``(truth, bias)``: the synthetic generator's planted truth ({image_id: {"scene",
    "cast", ...}}) and bias under ``root``, or ``(None, None)`` on data without them."""
    try:
        truth = S.read_truth(root)
        bias = float(S.read_generator_params(root)["bias"])
    except InputError:
        return None, None
    return truth, bias


def control_tables(images: pd.DataFrame, labels_df: pd.DataFrame, split: pd.DataFrame,
                   objects: pd.DataFrame, persons: pd.DataFrame, settings: ControlsSettings
                   ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The tables every control is scored on, as ``eval_classifier`` builds them: the test
    split's images (:func:`biaslab.classify.test_table`), the labelled training images, and
    the object labels that co-occur at least ``settings.min_cooccur`` times with each
    gender in training (``settings.cooccur_rule``; :func:`biaslab.classify.select_labels`).
    Used by :func:`run_controls` and :func:`biaslab.analysis.controls_attribute.run`.

    Returns:
        ``(test, train, labels)``.

    Raises:
        InputError("data/split.parquet", ...): no labelled test or training image, or no
            object label.
    """
    test = test_table(images, labels_df, split, objects, persons)
    train = test_table(images, labels_df, split, objects, persons, "train")
    train = train[train["labelled"]].reset_index(drop=True)
    if test.empty or train.empty:
        raise InputError("data/split.parquet", "no labelled test or training image")
    labels = select_labels(train, settings.min_cooccur, settings.cooccur_rule)
    if not labels:
        raise InputError("data/split.parquet", "no object co-occurs often enough with each "
                                               "gender in the training split")
    return test, train, labels


def with_truth(df: pd.DataFrame, truth: dict | None) -> pd.DataFrame:
    """A copy of ``df`` (column ``image_id``) with the planted ``scene`` and ``cast`` of each
    image (None without a planted truth)."""
    df = df.copy()
    if truth is None:
        df["scene"], df["cast"] = None, None
        return df
    df["scene"] = [truth.get(int(i), {}).get("scene") for i in df["image_id"]]
    df["cast"] = [truth.get(int(i), {}).get("cast") for i in df["image_id"]]
    return df


def judge(expected: dict, rec: dict) -> dict:
    """The verdict on the unrounded record; the record rounded for the metrics file."""
    lo = hi = None
    if rec.get("mean") is not None and rec.get("ci95") is not None:
        lo, hi = rec["mean"] - rec["ci95"], rec["mean"] + rec["ci95"]
    mean = rec.get("mean")
    if mean is None and rec.get("n_inf"):
        mean = math.inf if rec.get("sign", 1) >= 0 else -math.inf
    exp = {k: (stats.to_json(v, 6) if isinstance(v, float) else v) for k, v in expected.items()}
    return {"expected": exp, "measured": {k: json_number(v) for k, v in rec.items()},
            "verdict": K.verdict(expected, mean, lo, hi)}


def judge_paired(expected: dict, values, base_values) -> dict:
    """A control judged paired with its base control (``expected["paired_with"]``): the
    verdict reads the record of the per-replicate differences ``values[i] - base_values[i]``
    (replicates share the base's draws, LIC classifier seed and references), against
    ``expected``'s direction and reference. ``measured`` stays the control's own record;
    ``paired`` is the differences' record. A replicate missing on either side is missing."""
    diffs = [None if a is None or b is None else float(a) - float(b)
             for a, b in zip(values, base_values)]
    r = judge(expected, stats.record(diffs))
    return {"expected": r["expected"],
            "measured": {k: json_number(v) for k, v in stats.record(list(values)).items()},
            "paired": r["measured"], "verdict": r["verdict"]}


def _ci90(rec: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The 90 % t interval of a :func:`stats.record` (mean, sample std, n)."""
    m, sd, n = rec.get("mean"), rec.get("std"), int(rec.get("n") or 0)
    hw = stats.t_halfwidth(sd, n, equivalence.EQUIVALENCE_LEVEL)
    if m is None or hw is None:
        return None, None
    return float(m) - hw, float(m) + hw


def _amplifier_q(name: str) -> float | None:
    if not name.startswith("amplifier@"):
        return None
    try:
        return float(name.split("@", 1)[1])
    except ValueError:
        return None


def decide_equivalence(task: Mapping[str, Mapping[str, dict]], fraction: float) -> dict:
    """``task`` ({control: {metric: judged}}) with every "≈ reference" control decided as an
    equivalence claim (``biaslab.analysis.equivalence.decide``, two one-sided tests): the margin is
    ``fraction`` of the strongest amplifier's effect on the same metric in the same run (the
    amplifier with the largest q: its paired difference from its base control where it is
    judged paired, else its measured mean minus the reference), the control at the other
    end from the unbiased ones. The judged entry gains ``margin`` (``{"delta", "fraction",
    "effect", "basis"}``, None without an amplifier: then "inconclusive"). Other entries are
    returned unchanged.

    Args:
        task: the classifier or captioner part of ``metrics/controls.json``.
        fraction: ``validity.margin_fraction`` in [0, 1).

    Returns:
        a new ``{control: {metric: judged}}``."""
    amps = sorted((q, n) for n in task if (q := _amplifier_q(n)) is not None)
    strongest = task[amps[-1][1]] if amps else {}
    out = {}
    for name, ms in task.items():
        out[name] = {}
        for metric, r in ms.items():
            e = r.get("expected") if isinstance(r, Mapping) else None
            if not isinstance(e, Mapping) or e.get("direction") != "≈":
                out[name][metric] = r
                continue
            ref = float(e["reference"])
            a = strongest.get(metric) or {}
            eff = ((a.get("paired") or {}).get("mean") if "paired" in a else
                   None if (a.get("measured") or {}).get("mean") is None else
                   float(a["measured"]["mean"]) - ref)
            margin = None
            if eff is not None and math.isfinite(float(eff)):
                margin = {"delta": fraction * abs(float(eff)), "fraction": fraction,
                          "effect": abs(float(eff)),
                          "basis": f"{amps[-1][1]}'s effect on {metric}"
                                   + (" (paired)" if "paired" in a else "")}
            rec = r.get("measured") or {}
            mean, hw = rec.get("mean"), rec.get("ci95")
            lo = hi = None
            if mean is not None and hw is not None:
                lo, hi = float(mean) - float(hw), float(mean) + float(hw)
            v = K.verdict(e, mean, lo, hi, delta=None if margin is None else margin["delta"],
                          ci90=_ci90(rec))
            out[name][metric] = {**r, "margin": None if margin is None else
                                 {k: (stats.to_json(x, 6) if isinstance(x, float) else x)
                                  for k, x in margin.items()}, "verdict": v}
    return out


def judge_control(expected: Mapping, vals: Mapping[str, list],
                  raw: Mapping[str, Mapping]) -> dict:
    """{metric: judged} of one control: :func:`judge_paired` against its base control's
    replicates where the expectation names one, :func:`judge` where not, the bare record
    where there is no expectation."""
    out = {}
    for m, v in vals.items():
        e = expected.get(m)
        if e is None:
            out[m] = {"measured": json_record(v)}
        elif "paired_with" in e:
            out[m] = judge_paired(e, v, raw[e["paired_with"]][m])
        else:
            out[m] = judge(e, stats.record(list(v)))
    return out


def classifier_controls(kinds, test, train, labels, bias, stereo, seeds,
                        rounds) -> tuple[dict, dict]:
    """The classifier controls ``kinds`` ((kind, q, reads) triples) on the test table through
    :func:`biaslab.classify.evaluate_outputs` (Leakage attackers trained on ``train``, ``rounds``
    rounds), BiasAmp and DBA_O, once per seed of ``seeds``.

    Returns ``(judged, raw)``: {control: {metric: {"expected", "measured", "verdict"}}} and
    {control: {metric: [value per seed]}} for the power estimate."""
    y_test = object_matrix(list(test["objects"]), labels)
    y_train = object_matrix(list(train["objects"]), labels)
    A = np.column_stack([(test["gender"] == g).to_numpy() for g in (K.FEMALE, K.MALE)])
    lab = test["labelled"].to_numpy()
    out, raw = {}, {}
    from biaslab.metrics.biasamp import bias_amplification_arrays
    from biaslab.metrics.dba import dba_o_details
    for kind, q, reads in kinds:
        name = K.control_name(kind, q, reads)
        vals: dict[str, list] = {}
        for s in seeds:
            kw = dict(bias=bias, q=q or 0.0, reads=reads, stereotypes=stereo, seed=s, name=name)
            o = K.classifier_outputs(kind, test, labels, **kw)
            ot = K.classifier_outputs(kind, train, labels, **kw)
            r = evaluate_outputs(o["probs"], y_test, lab, list(test["gender"]),
                                 o["probs_masked"], n_objects=len(labels),
                                 train_probs=ot["probs"], train_objects=y_train,
                                 train_genders=list(train["gender"]),
                                 leakage_kwargs={"rounds": rounds, "seed": int(s)})
            tp = o["probs"][:, :len(labels)] >= 0.5
            # the gender decision of evaluate_outputs: "man" iff P(man) > P(woman)
            Ap = np.column_stack([o["probs"][:, -1] <= o["probs"][:, -2],
                                  o["probs"][:, -1] > o["probs"][:, -2]])
            ba = bias_amplification_arrays(A[lab], y_test[lab], tp[lab], Ap[lab])["ba"]
            do = dba_o_details(A[lab], y_test[lab], tp[lab])["DBA_O"]
            for k, v in (("mAP", r.get("mAP")), ("Ratio", r.get("ratio")),
                         ("Ratio_E", r.get("ratio_expected")),
                         ("masked_AUC", r.get("masked_gender_auc")),
                         ("Error", None if r.get("gender_acc") is None
                          else 100.0 - r["gender_acc"]),
                         ("Leakage", r.get("leakage")), ("BiasAmp", ba), ("DBA_O", do)):
                vals.setdefault(k, []).append(v)
        exp = K.expected_classifier(kind, test, bias=bias, reads=reads, q=q or 0.0,
                                    stereotypes=stereo)
        out[name] = {k: judge(exp[k], stats.record(list(v))) if k in exp else
                     {"measured": json_record(v)} for k, v in vals.items()}
        raw[name] = vals
    return out, raw


def captioner_controls(kinds, test, human, genders, train_caps, objects, bias, stereo, seeds,
                       lp, e, words, workers, categories=None,
                       attackers=(), biasamp_null: float | None = None) -> tuple[dict, dict]:
    """The captioner controls ``kinds`` (plus ``human``) through
    :func:`biaslab.captioning.evaluation.caption_metrics` (Ratio, Error, LIC, BiasAmp, DBA_O,
    DBAC when ``e.dbac``), one job per (control, seed) on ``workers`` processes; each
    encoder of ``attackers`` recomputes LIC and DBAC under ``<metric>@<encoder>``. ``lp``,
    ``e``: the :class:`ControlsSettings`' ``lic`` and ``eval``.
    ``biasamp_null``: BiasAmp's reference (:func:`biasamp_null`; None: 0).

    Returns ``(judged, raw)`` as :func:`classifier_controls`."""
    jobs = [(kind, q, reads, int(s)) for kind, q, reads in kinds for s in seeds]

    def one(job):
        kind, q, reads, s = job
        name = K.control_name(kind, q, reads)
        preds = K.captioner_captions(kind, test, bias=bias, q=q or 0.0, reads=reads,
                                     stereotypes=stereo, human=human, seed=s, name=name)
        # the human control's caption (one drawn per image and replicate) is held out of
        # LIC_D's references
        ref = human
        if kind == "human":
            ref = {i: [c for c in v if c != preds.get(i)] or list(v) for i, v in human.items()}
        # DBAC (eval_captioner.dbac): one attacker trial per replicate, seeded as LIC's
        dbac = None if not e.dbac else {**e.dbac, "seeds": [s], "categories": categories}
        flat, det = C.caption_metrics(preds, genders, ref, words=words,
                                    classifier=lp.classifier, preset=lp.preset,
                                    seeds=[s], num_threads=lp.num_threads,
                                    biasamp_min_count=int(e.biasamp_min_count),
                                    metrics=("ratio", "error", "biasamp", "lic"),
                                    train_captions=train_caps, image_objects=objects,
                                    max_human_captions=lp.max_human_captions,
                                    dbac=dbac)
        flat.update(lambda_d(det))
        for enc in attackers:   # the same captions and seeds, another attacker encoder
            f2, d2 = C.caption_metrics(preds, genders, ref, words=words, classifier=enc,
                                      preset=lp.preset, seeds=[s],
                                      num_threads=lp.num_threads, metrics=("lic",),
                                      max_human_captions=lp.max_human_captions,
                                      dbac=dbac)
            f2.update(lambda_d(d2))
            flat.update({f"{m}@{enc}": f2.get(m) for m in ATTACKER_METRICS})
        return flat

    results = map_jobs(one, jobs, workers)
    out, raw = {}, {}
    labelled = test[test["image_id"].isin(set(genders))]
    for kind, q, reads in kinds:
        name = K.control_name(kind, q, reads)
        rows = [r for (k, qq, rd, _), r in zip(jobs, results) if (k, qq, rd) == (kind, q, reads)]
        vals = {m: [r.get(m) for r in rows] for m in ("Ratio", "Error", "LIC", "LIC_M",
                                                     "LIC_D", "BiasAmp", "DBA_O")}
        if e.dbac:
            vals.update({m: [r.get(m) for r in rows] for m in DBAC_METRICS})
        for enc in attackers:
            vals.update({f"{m}@{enc}": [r.get(f"{m}@{enc}") for r in rows]
                         for m in ATTACKER_METRICS if m in vals})
        exp = K.expected_captioner(kind, labelled, bias=bias, reads=reads, q=q or 0.0,
                                   stereotypes=stereo, grammar_is_human=bias is not None,
                                   biasamp_null=biasamp_null)
        # an extra encoder's metric has its base metric's known answer
        exp.update({m: exp[m.split("@", 1)[0]] for m in vals
                    if "@" in m and m.split("@", 1)[0] in exp})
        raw[name] = vals    # the oracle comes first: the amplifiers are judged paired with it
        out[name] = judge_control(exp, vals, raw)
    return out, raw


def biasamp_null(test: pd.DataFrame, human: Mapping[int, Sequence[str]],
                 genders: Mapping[int, str], train_caps: Sequence[str], words: str,
                 min_count: int) -> dict | None:
    """:func:`biaslab.metrics.biasamp.human_null` on the captioner controls' test images (those
    of ``test`` with a gender in ``genders`` and a human caption) against ``train_caps``, as
    stage eval_captioner computes it: BiasAmp's known value for captions drawn like the human
    ones. None when no such image exists."""
    from biaslab.metrics.biasamp import human_null
    ids = [int(i) for i in test["image_id"] if genders.get(int(i)) and human.get(int(i))]
    if not ids:
        return None
    return human_null([human[i] for i in ids], train_caps, [genders[i] for i in ids], None,
                      words=words, min_count=min_count)


def probe_controls(pairs, bias, seeds, n_boot, seed) -> dict:
    """The causal probe's pair sensitivities of the person oracle and the context readers
    (all attributes, and one per attribute) on the probe pairs, judged against their exact
    expected values: {control: {attribute: {"expected", "measured", "verdict"}}}."""
    from biaslab.analysis import probe as P
    out = {}
    readers = [(K.control_name("context_reader", None, (a,)), (a,)) for a in K.ATTRIBUTES]
    for name, kind, reads in [("person_oracle", "person_oracle", K.ATTRIBUTES),
                              ("context_reader", "context_reader", K.ATTRIBUTES)] + \
            [(n, "context_reader", r) for n, r in readers]:
        o = K.probe_outputs(kind, pairs, bias=bias, reads=reads)
        sens = P.pair_sensitivities(pairs, o)
        summ = P.summarize_sensitivity({int(s): sens for s in seeds}, n_boot=n_boot, seed=seed)
        res = {}
        for a in K.ATTRIBUTES:
            if a not in summ:
                continue
            rec = summ[a]
            if kind == "person_oracle":
                exp = {"value": 0.0, "rule": "exact"}
            elif len(reads) == 1:
                exp = {"value": 2.0 if reads[0] == a else 0.0, "rule": "exact"}
            else:   # the full reader: the exact mean over pairs, from the specs directly
                exp = {"value": float(reader_swing(pairs, a, bias)), "rule": "exact"}
            res[a] = {"expected": exp, "measured": {"mean": json_number(rec["mean"]),
                                                    "n_pairs": rec["n_pairs"]},
                      "verdict": K.verdict(exp, rec["mean"])}
        out[name] = res
    return out


def reader_swing(pairs, attribute, bias) -> float:
    """Mean over the pairs of ``attribute`` of the full context reader's output difference
    (male- minus female-associated image), from its outputs directly: the expected value the
    probe's pairing and summary code (biaslab.analysis.probe) must reproduce."""
    o = K.probe_outputs("context_reader", pairs, bias=bias)
    by = {(p, v): x for a, p, v, x in zip(pairs["attribute"], pairs["pair"], pairs["value"], o)
          if a == attribute}
    pp = sorted({p for p, _ in by})
    return float(np.mean([by[(p, "male")] - by[(p, "female")] for p in pp])) if pp else math.nan


def power_table(raw: dict, metrics, rule: str) -> dict:
    """MDE of each metric from the replicate spread of the controls whose expected value is
    a direction (the noisy ones); the largest s among them (conservative)."""
    from scipy import stats as st
    out = {}
    for m in metrics:
        best = None
        for name, vals in raw.items():
            v = [x for x in vals.get(m, []) if x is not None and np.isfinite(x)]
            if len(v) < 2:
                continue
            s = float(np.std(v, ddof=1))
            if best is None or s > best[1]:
                best = (name, s, len(v))
        if best is None:
            continue
        name, s, n = best
        df = 2 * n - 2
        mde = (st.t.ppf(0.975, df) + st.t.ppf(POWER, df)) * s * math.sqrt(2.0 / n)
        out[m] = {"mde": json_number(mde), "s": json_number(s), "n": n, "source": name,
                  "rule": rule}
    return out


def run_controls(settings: ControlsSettings, images: pd.DataFrame, objects: pd.DataFrame,
                 persons: pd.DataFrame, labels_df: pd.DataFrame, split: pd.DataFrame,
                 captions: pd.DataFrame, perceived: pd.DataFrame | None,
                 attackers: list[str]) -> tuple[dict, dict, dict]:
    """Every control through the metric code: the record of ``metrics/controls.json``.

    Args:
        settings: :class:`ControlsSettings` (the planted truth and bias are read from
            ``<settings.root>/annotations`` when present).
        images, objects, persons, captions, perceived: ``data/prepared/*.parquet``
            (``perceived`` None where the file is absent).
        labels_df, split: ``data/labels/images.parquet``, ``data/split.parquet``.
        attackers: ``controls.attackers`` after :func:`check_attackers`.

    Returns:
        ``(out, clf, cap)``: the record (keys ``available``, ``bias``, ``stereotypes``,
        ``labels``, ``replicates``, ``attackers``, ``test_set``, ``classifier``,
        ``captioner``, ``probe``, ``biasamp_null``, ``power``, ``summary``) and its classifier and captioner
        parts ({control: {metric: judged}}).

    Raises:
        InputError: no labelled test or training image, no object that
            co-occurs often enough with each gender, or a degenerate training split.
    """
    st = settings
    seeds, qs = list(st.seeds), list(st.q)
    e, words = st.eval, st.words
    truth, bias = read_truth(st.root)

    test, train, labels = control_tables(images, labels_df, split, objects, persons, st)
    test, train = with_truth(test, truth), with_truth(train, truth)
    try:
        stereo = K.stereotype_objects(list(train["objects"]), list(train["gender"]), labels)
    except ValueError as err:
        raise InputError("data/split.parquet", f"training split: {err}") from err
    kinds = [("person_oracle", None, K.ATTRIBUTES)]
    if truth is not None:
        kinds.append(("context_reader", None, K.ATTRIBUTES))
    kinds += [("amplifier", q, K.ATTRIBUTES) for q in qs] + [("constant_man", None, K.ATTRIBUTES)]
    clf, clf_raw = classifier_controls(kinds, test, train, labels, bias, stereo, seeds,
                                       st.leakage_rounds)

    # captioning: the gender-labelled test images of eval_captioner
    genders, g_used = C.gender_labels(e.gender_source, perceived, labels_df)
    caps = captions.sort_values(["image_id", "caption_id"])
    test_ids = set(split.loc[split["split"] == "test", "image_id"].astype(int))
    train_ids = set(split.loc[split["split"] == "train", "image_id"].astype(int))
    cap_test = images[images["image_id"].isin(test_ids & set(genders))][["image_id"]] \
        .sort_values("image_id", ignore_index=True)
    objs = objects.drop_duplicates(["image_id", "category"]).groupby("image_id")["category"] \
        .apply(sorted)
    cap_test["objects"] = cap_test["image_id"].map(objs).apply(
        lambda v: v if isinstance(v, list) else [])
    cap_test["gender"] = cap_test["image_id"].map(genders)
    cap_test = with_truth(cap_test, truth)
    human = {int(i): list(g["caption"]) for i, g in caps[caps["image_id"].isin(test_ids)]
             .groupby("image_id")}
    train_caps = caps.loc[caps["image_id"].isin(train_ids), "caption"].astype(str).tolist()
    image_objects = {int(i): list(v) for i, v in objs.items() if int(i) in test_ids}
    cap_genders = {i: g for i, g in genders.items() if i in test_ids}
    cap_kinds = kinds + [("human", None, K.ATTRIBUTES)]
    cap, cap_raw, nul = {}, {}, None
    if len(caps):   # data without captions (OpenImages): no captioner controls
        nul = biasamp_null(cap_test, human, cap_genders, train_caps, words,
                           int(e.biasamp_min_count))
        cap, cap_raw = captioner_controls(cap_kinds, cap_test, human, cap_genders, train_caps,
                                          image_objects, bias, stereo, seeds, st.lic, e, words,
                                          st.workers,
                                          sorted(set(objects["category"].astype(str))) or None,
                                          attackers, (nul or {}).get("ba"))

    probe = {}
    pairs = S.read_probe(st.root) if truth is not None else None
    if pairs is not None and not pairs.empty:
        probe = probe_controls(pairs, bias, seeds, st.n_boot, st.seed)

    clf = decide_equivalence(clf, st.margin_fraction)
    cap = decide_equivalence(cap, st.margin_fraction)
    verdicts = [m["verdict"] for task in (clf, cap) for ctl in task.values()
                for m in ctl.values() if "verdict" in m]
    verdicts += [a["verdict"] for ctl in probe.values() for a in ctl.values()]
    note = "largest replicate std among the controls (t-based, two rows of n replicates)"
    out = {
        "available": {"planted_truth": truth is not None, "probe": bool(probe),
                      "skipped": ([] if truth is not None else
                                  ["context_reader (no planted truth: not a biaslab synthetic "
                                   "dataset)", "probe (no probe pairs)"])
                      + ([] if len(caps) else [f"captioner ({NO_CAPTIONS})"])},
        "bias": bias, "stereotypes": stereo, "labels": labels, "replicates": seeds,
        "attackers": [str(st.lic.classifier)] + attackers,
        "test_set": {"classifier": {"n": int(len(test)), "n_female":
                                    int((test["gender"] == "female").sum()),
                                    "n_male": int((test["gender"] == "male").sum()),
                                    "n_labelled": int(test["labelled"].sum())},
                     "captioner": {"n": int(len(cap_test)), "gender_source": g_used,
                                   "n_female": int((cap_test["gender"] == "female").sum()),
                                   "n_male": int((cap_test["gender"] == "male").sum())},
                     "leakage_train": {"n": int(len(train))}},
        "classifier": clf, "captioner": cap, "probe": probe,
        # the captioner controls' BiasAmp reference (biaslab.metrics.biasamp.human_null)
        "biasamp_null": nul,
        "power": {"classifier": power_table(clf_raw, ("Leakage", "BiasAmp", "DBA_O"), note),
                  "captioner": power_table(cap_raw, ("LIC", "BiasAmp", "DBA_O") + tuple(
                      m for m in K.DBAC_KEYS if e.dbac) + tuple(
                      f"{m}@{a}" for a in attackers for m in ("LIC",) + tuple(
                          k for k in K.DBAC_KEYS if e.dbac)), note)
                  if cap_raw else {}},
        "summary": {"matches": verdicts.count("matches"),
                    "does_not_match": verdicts.count("does not match"),
                    "inconclusive": verdicts.count("inconclusive"), "n": len(verdicts)},
    }
    return out, clf, cap


def with_sensitivity(out: dict, sensitivity: Mapping[str, Any] | None) -> dict:
    """``out`` (the record of :func:`run_controls`) with the feature-sensitivity controls of
    ``metrics/sensitivity.json`` (``{control: {perturbation: {metric: {"expected",
    "measured", "verdict"}}}}``, :mod:`biaslab.analysis.sensitivity_eval`) under
    ``"sensitivity"`` and their verdicts counted in ``summary`` (a check without a known
    answer carries no verdict and is not counted). None (the stage did not run): an empty
    section. Returns a new dict."""
    sens = dict((sensitivity or {}).get("controls") or {})
    vs = [m["verdict"] for ctl in sens.values() for p in ctl.values() for m in p.values()
          if "verdict" in m]
    s = dict(out.get("summary") or {})
    s["matches"] = s.get("matches", 0) + vs.count("matches")
    s["does_not_match"] = s.get("does_not_match", 0) + vs.count("does not match")
    s["inconclusive"] = s.get("inconclusive", 0) + vs.count("inconclusive")
    s["n"] = s.get("n", 0) + len(vs)
    return {**out, "sensitivity": sens, "summary": s}
