"""Validity report: the planted truth of the synthetic data as referee.

On the synthetic default the generator plants a gender-context correlation in labeled objects,
the scene and an unlabeled colour cast (``biaslab.data.synthetic``). The causal probe
(``biaslab.analysis.probe``, stage ``probe``) measures each model's sensitivity to each attribute with
the person masked out. Paper 000's claims then become checkable directions:

1. Original (trained on the biased data) is sensitive to every planted attribute (> 0).
2. Over-/sub-sampling (balance the *labeled* objects, paper 000 sec. 2.1): their labeled-object
   sensitivity is below Original's; their colour-cast sensitivity is not (the cast is in no
   label, so resampling cannot see it).
3. S_synthetic (every training image also in the other group's version, so no context predicts
   gender): every sensitivity below Original's and below over-sampling's; its Ratio closer to 1
   than Original's; its Table 3 Δ no larger than Original's (with the ``render`` oracle there
   are no inpainting artifacts to react to).

Each check: ``{"id", "claim", "expect", "reference", "mean", "lo", "hi", "lo90", "hi90",
"n", "margin", "verdict", "reason", "source"}`` (``lo``/``hi``: the 95 % CI, ``lo90``/``hi90``
the 90 % one; ``margin``: ``{"delta", "fraction", "effect", "basis"}`` or None; ``reason``:
why the verdict, in words with the numbers; ``source``: the metrics file it was read from;
both filled by :func:`explain`). Differences between rows are Welch t intervals over seeds
(``biaslab.runtime.stats.difference``); single-row effects the t interval over seeds
(``biaslab.runtime.stats.summarize``); intervals of bounded quantities are kept in range.

The verdict (:func:`decide`, ``biaslab.analysis.equivalence.decide``): a directional claim
(``>``, ``<``) "holds" / "fails" when its 95 % CI lies wholly on the expected / the other side
and shows "no practical effect" when its 90 % CI lies inside ±margin; a claim of no change
("not below" ``≥``: claim 2's cast; "not above" ``≤``: claim 3's Δ) holds when the one-sided
5 % test rules out a change of the margin or more, fails when the 95 % CI lies beyond that
bound; otherwise "inconclusive". The margin is ``validity.margin_fraction`` (0.1) of a
reference effect the same run measures (:func:`check_margin`): Original's own effect on the
quantity for a comparison with Original, the quantity's full span for a single row (two
one-sided tests: Schuirmann 1987; Lakens 2017).

A fourth verdict, "not testable", marks a check whose premise the data itself rules out; the
check keeps its measured effect and carries a ``reason``. One premise is checked
(:func:`table_checks`): paper 000 reads "Ratio closer to 1" as "less context bias", which
holds on a test set whose gender ratio is far from 1 (COCO: 2.3 men per woman). On the
persons-masked test set a model that reads only the context predicts each image's gender from
its context, so its expected r is the test set's own gender ratio ``ratio_gt``; a model that
reads no context gives every image the same output, so its r is set by its thresholds (often
0 or ∞). When the test set is gender-balanced (``|n_male - n_female| <= 1``), the most biased
model's expected r is therefore exactly 1, the value the claim calls unbiased, and no outcome
of the comparison can support or refute the claim. The rule is structural (the test set's
counts), not a cut on the measured effect.

A fifth, "not informative" (:func:`explain`), marks a check whose measure has no variance
(every seed of the compared rows reads the same value, e.g. a Table 3 Δ of 0 for every model
when the inpainting changed no gender call): such a test cannot move, so it is no pass.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from biaslab import registry
from biaslab.analysis import equivalence
from biaslab.runtime import stats

ATTRIBUTES = ("objects", "scene", "cast")


#: resampled row -> its size-matched control (a random subset of Original with the same size and
#: gender counts; ``biaslab.data.datasets.matched_subset``)
MATCHED = {"subsample": "matched"}


#: the mask-neutrality precondition's interval for Ratio_E
NEUTRAL_RANGE = (0.67, 1.5)


#: attribute -> whether label-based resampling can see it
LABELED = {"objects": True, "scene": False, "cast": False}


#: the default fraction of a reference effect that is a check's margin (param
#: ``validity.margin_fraction``; :func:`decide`)
MARGIN_FRACTION = 0.1


def _swing_logit(fraction_of_two: float) -> float:
    """The probe's full swing in probability units is 2 (a reader of the attribute alone
    scores s = 2 on every pair, one that ignores it 0: the probe controls). A margin of
    ``f x 2`` there moves each image's output o = P(man) - P(woman) by ``f`` about the
    undecided 0, i.e. P(man) from 1/2 to (1 + f)/2; this returns ``logit((1 + f) / 2)``,
    the same move on the logit scale, so the continuous views get the same margin."""
    p = (1.0 + fraction_of_two) / 2.0
    return math.log(p / (1.0 - p))


#: probe view -> the range of one sensitivity (the continuous views are unbounded)
PROBE_RANGE = {"classifier": (-2.0, 2.0), "captioner": (-2.0, 2.0)}


#: probe view -> (its full swing, why): a single-row claim's margin is a fraction of it. The
#: continuous views (logit, caption margin) are unbounded: :func:`probe_full_swing` converts
#: the probability views' margin to their unit at P(man) = 1/2.
PROBE_FULL_SWING = {
    "classifier": (2.0, "the probe's full swing (2: a reader of the attribute alone; 0: the "
                        "oracle)"),
    "captioner": (2.0, "the probe's full swing (2: a reader of the attribute alone; 0: the "
                       "oracle)"),
}


def probe_full_swing(view: str, fraction: float) -> tuple[float, str] | None:
    """The single-row reference effect of a probe ``view`` at margin ``fraction``
    (:data:`PROBE_FULL_SWING`; the logit and caption-margin views by :func:`_swing_logit`).
    None for an unknown view."""
    if view in PROBE_FULL_SWING:
        return PROBE_FULL_SWING[view]
    per_image = {"classifier_logit": 2.0, "captioner_margin": 1.0}.get(view)
    if per_image is None or fraction <= 0:
        return None
    delta = 2.0 * per_image * _swing_logit(fraction)   # a pair is two images
    return (delta / fraction,
            f"the probability views' margin (P(man) 1/2 -> {(1 + fraction) / 2:g} on each "
            f"image of a pair) in this view's unit, divided by the fraction")


def _values(node: Any) -> list | None:
    """Per-seed values of a stored probe metric: ``node["values"]``, or the ``mean`` of each
    entry of ``node["per_seed"]`` (``metrics/probe.json``); None when absent."""
    if not isinstance(node, Mapping):
        return None
    if isinstance(node.get("values"), list):
        return node["values"]
    per = node.get("per_seed")
    if isinstance(per, list):
        return [p.get("mean") if isinstance(p, Mapping) else None for p in per]
    return None


def make_check(cid: str, claim: str, expect: str, ref: float, mean, lo, hi, n,
           source: str | None = None, ci90: tuple | None = None,
           margin: Mapping[str, Any] | None = None,
           bounds: tuple[float, float] | None = None) -> dict:
    """One check (module docstring layout). ``ci90``: its 90 % CI where the values allow the
    exact one (else :func:`decide` derives it from the 95 % CI); ``margin``: what its
    equivalence margin is 10 % of (:func:`margin_of`); ``bounds``: the range of the measured
    quantity, which both intervals are kept inside (``equivalence.clip_interval``: a t
    interval on a bounded quantity can cross its bounds; the intersection keeps its
    coverage)."""
    lo, hi = equivalence.clip_interval(lo, hi, bounds)
    c = {"id": cid, "claim": claim, "expect": expect, "reference": ref, "mean": mean,
         "lo": lo, "hi": hi, "n": n, "verdict": _verdict(lo, hi, expect, ref),
         "source": source}
    if ci90 is not None and ci90[0] is not None and ci90[1] is not None:
        c["lo90"], c["hi90"] = equivalence.clip_interval(float(ci90[0]), float(ci90[1]),
                                                         bounds)
    if margin is not None:
        c["margin_of"] = dict(margin)
    return c


def margin_of(effect: Any, basis: str) -> dict | None:
    """The reference effect a check's margin is a fraction of: ``{"effect": |effect|,
    "basis": words}``; None where ``effect`` is not a finite number (the check then has no
    margin and keeps the directional 95 % test alone)."""
    try:
        e = abs(float(effect))
    except (TypeError, ValueError):
        return None
    return {"effect": e, "basis": basis} if math.isfinite(e) else None


def fixed_margin(delta: float, basis: str) -> dict:
    """A margin that is not a fraction of an effect: ``delta`` itself (e.g. 0 where the
    claim's reference already is the tolerated bound, a paper's worst case)."""
    return {"delta": float(delta), "basis": basis}


def mean_or_none(values: Sequence | None) -> float | None:
    """The mean of the non-missing entries of ``values``; None for no values."""
    return stats.summarize([v for v in values or [] if v is not None])["mean"] \
        if values else None


def not_testable(check: dict, reason: str) -> dict:
    """``check`` with verdict "not testable" and its ``reason`` (module docstring)."""
    return {**check, "verdict": "not testable", "reason": reason}


def ratio_testable(test_set: Mapping[str, Any] | None) -> str | None:
    """None when paper 000's "Ratio closer to 1" claim can be tested on this persons-masked
    test set, else the reason it cannot (module docstring): the test set is gender-balanced,
    so a model that reads only context has expected r = 1.

    Args:
        test_set: ``metrics/classification.json["test_set"]`` (``n_male``, ``n_female``:
            images per perceived / caption-derived gender); None or missing counts: testable
            (nothing is known against it).
    """
    if not isinstance(test_set, Mapping):
        return None
    m, f = test_set.get("n_male"), test_set.get("n_female")
    if m is None or f is None:
        return None
    if abs(int(m) - int(f)) <= 1:
        return (f"the persons-masked test set is gender-balanced ({int(m)} men, {int(f)} women): "
                f"a model that reads only context predicts r = {int(m)}/{int(f)} ≈ 1 there, the "
                f"value the claim calls unbiased (paper 000 relies on COCO's 2.3:1 test set)")
    return None


def _verdict(lo, hi, expect: str, ref: float) -> str:
    """``stats.verdict`` plus the one-sided "not below" (≥) and "not above" (≤) claims: they
    hold when the CI reaches ``ref`` on the allowed side and fail when it lies beyond it."""
    if expect not in ("≥", "≤"):
        return stats.verdict(lo, hi, expect, ref)
    if lo is None or hi is None:
        return "inconclusive"
    if expect == "≥":
        return "holds" if hi >= ref else "fails"
    return "holds" if lo <= ref else "fails"


def _effect(cid: str, claim: str, node: Any, expect: str, ref: float,
            source: str | None = None, margin: Mapping[str, Any] | None = None,
            bounds: tuple[float, float] | None = None) -> dict:
    """A single row's effect: the CI the stage stored (``lo``/``hi``: t over seeds, or the
    pair bootstrap with fewer seeds, ``biaslab.analysis.probe``), else the t interval of its values."""
    if isinstance(node, Mapping) and node.get("lo") is not None and node.get("mean") is not None:
        n = node.get("n_seeds") or len(_values(node) or [])
        ci90 = None
        if node.get("ci_method", "t_over_seeds") == "t_over_seeds" and _values(node):
            s90 = stats.summarize(_values(node), equivalence.EQUIVALENCE_LEVEL)
            ci90 = (s90["lo"], s90["hi"])
        return make_check(cid, claim, expect, ref, node["mean"], node["lo"], node["hi"], n, source,
                      ci90, margin, bounds)
    s = stats.summarize(_values(node) or [])
    s90 = stats.summarize(_values(node) or [], equivalence.EQUIVALENCE_LEVEL)
    return make_check(cid, claim, expect, ref, s["mean"], s["lo"], s["hi"], s["n"], source,
                  (s90["lo"], s90["hi"]), margin, bounds)


def _diff(cid: str, claim: str, a: Sequence | None, b: Sequence | None, expect: str,
          source: str | None = None, margin: Mapping[str, Any] | None = None,
          bounds: tuple[float, float] | None = None) -> dict:
    """Welch's difference ``mean(a) - mean(b)`` over seeds (95 % and 90 % CIs); ``bounds``:
    the range of one value (the difference's is ``(lo - hi, hi - lo)``)."""
    d = stats.difference(a or [], b or [])
    d90 = stats.difference(a or [], b or [], equivalence.EQUIVALENCE_LEVEL)
    return make_check(cid, claim, expect, 0.0, d["diff"], d["lo"], d["hi"], min(d["n"], d["n_ref"]),
                  source, (d90["lo"], d90["hi"]), margin, span(bounds))


def span(bounds: tuple[float, float] | None) -> tuple[float, float] | None:
    """The range of a difference of two values in ``bounds``."""
    return None if bounds is None else (bounds[0] - bounds[1], bounds[1] - bounds[0])


def probe_checks(probe: Mapping[str, Any], model: str = "classifier") -> list[dict]:
    """Claims 1-3 on the probe sensitivities of ``model`` ("classifier" or "captioner").

    Args:
        probe: ``metrics/probe.json`` ({model: {dataset: {attribute: {..., "values": [per-seed
            mean sensitivity]}}}}).
        model: which model family.

    Returns:
        list of checks (see module docstring); rows absent from the probe are skipped.
    """
    fam = probe.get(model) or {}
    out = []

    def vals(row, attr):
        return _values((fam.get(row) or {}).get(attr))

    def against_original(a):
        return margin_of(mean_or_none(vals("original", a)),
                         f"Original's {a} sensitivity ({model})")

    for a in ATTRIBUTES:
        if vals("original", a) is not None:
            out.append(_effect(f"{model}/original/{a}>0",
                               f"{model} on Original is sensitive to the {a} (> 0)",
                               (fam.get("original") or {}).get(a), ">", 0.0,
                               margin={"probe_view": model}, bounds=PROBE_RANGE.get(model)))
    for row in ("oversample", "subsample"):
        # sub-sampling keeps a fraction of Original: compared with a random subset of Original
        # of the same size and gender counts (row "matched") when there is
        # one, so that what balancing does is not confounded with what capacity does
        ref = MATCHED.get(row) if vals(MATCHED.get(row), "objects") is not None else None
        ref = ref or "original"
        name = "Original" if ref == "original" else f"the size-matched subset of Original ({ref})"
        if vals(row, "objects") is not None and vals(ref, "objects") is not None:
            out.append(_diff(f"{model}/{row}-{ref}/objects<0",
                             f"{model}: {row} less sensitive to labeled objects than {name}",
                             vals(row, "objects"), vals(ref, "objects"), "<",
                             margin=against_original("objects"),
                             bounds=PROBE_RANGE.get(model)))
        if vals(row, "cast") is not None and vals(ref, "cast") is not None:
            out.append(_diff(f"{model}/{row}-{ref}/cast≥0",
                             f"{model}: {row} not less sensitive to the unlabeled colour cast "
                             f"than {name}", vals(row, "cast"), vals(ref, "cast"), "≥",
                             margin=against_original("cast"), bounds=PROBE_RANGE.get(model)))
    for a in ATTRIBUTES:
        for ref in ("original", "oversample"):
            if vals("synthetic", a) is not None and vals(ref, a) is not None:
                out.append(_diff(f"{model}/synthetic-{ref}/{a}<0",
                                 f"{model}: S_synthetic less sensitive to the {a} than {ref}",
                                 vals("synthetic", a), vals(ref, a), "<",
                                 margin=against_original(a), bounds=PROBE_RANGE.get(model)))
    return _from(out, "metrics/probe.json")


def _from(checks: list[dict], source: str) -> list[dict]:
    """``checks`` with ``source`` (the metrics file they were read from) where unset."""
    return [{**c, "source": c.get("source") or source} for c in checks]


def seed_values(metrics: Mapping[str, Any], row: str, key: str) -> list | None:
    """``key`` of every seed of ``row`` (``metrics[row]["per_seed"]``, None where a seed lacks
    it); None when the row has no per-seed list."""
    per = (metrics.get(row) or {}).get("per_seed")
    if not isinstance(per, list):
        return None
    return [p.get(key) if isinstance(p, Mapping) else None for p in per]


def table_checks(classification: Mapping[str, Any], artifact: Mapping[str, Any]) -> list[dict]:
    """Claim 3's Ratio and Δ parts from ``metrics/classification.json`` (per-seed
    ``Ratio``; its ``test_set`` decides whether the Ratio claims are testable,
    :func:`ratio_testable`) and ``metrics/artifact.json`` (per-seed ``delta``)."""
    out = []
    why = ratio_testable(classification.get("test_set"))
    mark = (lambda c: not_testable(c, why)) if why else (lambda c: c)
    rs, ro = seed_values(classification, "synthetic", "Ratio"), \
        seed_values(classification, "original", "Ratio")
    def off(values, null, what):
        m = mean_or_none(values)
        return margin_of(None if m is None else m - null, what)

    if rs is not None and ro is not None:
        out.append(mark(_diff("classifier/synthetic-original/ratio<0",
                              "classifier: S_synthetic's Ratio closer to 1 than Original's", rs,
                              ro, "<", margin=off(ro, 1.0, "Original's Ratio - 1"))))
    # the same claim on the threshold-free Ratio (biaslab.classify.evaluate.expected_ratio):
    # an addition beside, not instead of, paper 000's thresholded Ratio above
    es, eo = seed_values(classification, "synthetic", "Ratio_expected"), \
        seed_values(classification, "original", "Ratio_expected")
    if es is not None and eo is not None and any(v is not None for v in es + eo):
        out.append(mark(_diff("classifier/synthetic-original/ratio_expected<0",
                              "classifier: S_synthetic's expected-count Ratio_E closer to 1 "
                              "than Original's", es, eo, "<",
                              margin=off(eo, 1.0, "Original's Ratio_E - 1"))))
    # the same claim without a threshold or a fold: the ROC AUC of
    # P(man) - P(woman) on the persons-masked images against the true gender (50 = the masked
    # image tells nothing). A ranking measure: the mask's overall lean (Ratio's precondition)
    # does not move it, and it needs no gender imbalance in the test set
    a_s, a_o = seed_values(classification, "synthetic", "masked_gender_auc"), \
        seed_values(classification, "original", "masked_gender_auc")
    if a_o is not None and any(v is not None for v in a_o):
        # the premise of every "reads less" claim, on any data: Original reads gender from
        # the scene around the masked person at all (50 = chance; no planted truth needed)
        s = stats.summarize([v for v in a_o if v is not None])
        s90 = stats.summarize([v for v in a_o if v is not None], equivalence.EQUIVALENCE_LEVEL)
        out.append(make_check("classifier/original/masked_auc>50",
                          "classifier: Original reads gender from the persons-masked images "
                          "(masked gender AUC above chance)", ">", 50.0, s["mean"], s["lo"],
                          s["hi"], s["n"], ci90=(s90["lo"], s90["hi"]),
                          margin=margin_of(50.0, "the AUC's span from chance (50) to a "
                                                 "perfect ranking (100)"),
                          bounds=(0.0, 100.0)))
    if a_s is not None and a_o is not None and any(v is not None for v in a_s + a_o):
        out.append(_diff("classifier/synthetic-original/masked_auc<0",
                         "classifier: S_synthetic reads gender less from the persons-masked "
                         "images than Original (masked gender AUC)", a_s, a_o, "<",
                         margin=off(a_o, 50.0, "Original's masked AUC - 50"),
                         bounds=(0.0, 100.0)))
    # the real-vs-generated domain check: S_synthetic never trained on a real
    # photo; where it recognises objects better on generated images of unseen scenes than on
    # the real photos of the same scenes, its Leakage is read outside its training domain
    dom = (classification.get("domain") or {})
    gap = seed_values(dom, "synthetic", "domain_gap")
    domain = None
    if gap is not None and any(v is not None for v in gap):
        s = stats.summarize([v for v in gap if v is not None])
        # no margin: no reference effect of a domain gap exists in the run (directional only)
        out.append(make_check("classifier/synthetic/domain_gap>0",
                          "classifier: S_synthetic is outside its training domain on real "
                          "photos (object mAP on generated images of unseen scenes above that "
                          "on the real photos of the same scenes)", ">", 0.0, s["mean"],
                          s["lo"], s["hi"], s["n"]))
        domain = {"gap": {k: s[k] for k in ("mean", "lo", "hi", "n")},
                  "probe_auc": (dom.get("probe_auc") or {}).get("mean"),
                  "verdict": out[-1]["verdict"]}
    # paper 000 Table 1's Leakage claim, and the same at the model's own F1 (Wang et al.
    # 2019): a model that leaks less only by being less accurate passes the
    # first and not the second
    for key, cid, what in (("Leakage", "leakage<0", "Leakage (Eq. 7)"),
                           ("Leakage_F1", "leakage_f1<0",
                            "accuracy-matched Leakage@F1 (Wang et al. 2019)")):
        ls, lo_ = seed_values(classification, "synthetic", key), \
            seed_values(classification, "original", key)
        if ls is not None and lo_ is not None and any(v is not None for v in ls + lo_):
            c = _diff(f"classifier/synthetic-original/{cid}",
                      f"classifier: S_synthetic's {what} lower than Original's", ls, lo_, "<",
                      margin=off(lo_, 0.0, f"Original's {key}"), bounds=(-100.0, 100.0))
            if domain is not None:
                c["domain"] = domain   # read by explain: the cause beside the verdict
            out.append(c)
    # the artifact part of Δ, where the backend is not the re-draw itself
    backend = (artifact.get("test_set") or {}).get("backend")
    as_, ao = seed_values(artifact, "synthetic", "delta_artifact"), \
        seed_values(artifact, "original", "delta_artifact")
    if backend not in (None, "render") and as_ is not None and ao is not None and \
            any(v is not None for v in as_ + ao):
        out.append(_diff("classifier/synthetic-original/delta_artifact≤0",
                         "classifier: S_synthetic's Δ_artifact no larger than Original's",
                         as_, ao, "≤", "metrics/artifact.json",
                         off(ao, 0.0, "Original's Δ_artifact")))
    ds, do = seed_values(artifact, "synthetic", "delta"), seed_values(artifact, "original",
                                                                          "delta")
    if ds is not None and do is not None:
        c = _diff("classifier/synthetic-original/delta≤0",
                  "classifier: S_synthetic's Table 3 Δ no larger than Original's", ds, do,
                  "≤", "metrics/artifact.json", off(do, 0.0, "Original's Δ"))
        # Table 3's positive control: the same parts filled from the other
        # group; :func:`explain` reads whether it moved
        ctl = {row: {k: (artifact.get(row) or {}).get("delta_control", {}).get(k)
                     for k in ("mean", "lo", "hi")} for row in ("original", "synthetic")}
        if any(v["mean"] is not None for v in ctl.values()):
            c["control"] = ctl
            c["same"] = {row: ((artifact.get(row) or {}).get("delta") or {}).get("mean")
                         for row in ("original", "synthetic")}
        out.append(c)
    return _from(out, "metrics/classification.json")


#: the rows of Tables 1-2 that are not a mitigation: the baseline, the size-matched control,
#: LIBRA (its own checks, :func:`biaslab.analysis.validity_libra.libra_checks`)
NOT_MITIGATIONS = ("original", "matched", "original+LIBRA")
#: Table 1's headline bias metrics: (metrics key, check key, the claim, the quantity's null,
#: the range of one value)
CLASSIFIER_HEADLINE = (
    ("Leakage", "leakage", "Leakage (Eq. 7) lower than Original's", 0.0, (-100.0, 100.0)),
    ("masked_gender_auc", "masked_auc", "masked gender AUC closer to chance (50) than "
                                         "Original's", 50.0, (0.0, 100.0)),
    ("Ratio", "ratio", "Ratio closer to 1 than Original's", 1.0, None))
#: Table 2's: Ratio is read against the test set's own man : woman ratio (Burns et al. 2018)
CAPTIONER_HEADLINE = (
    ("LIC", "lic", "LIC lower than Original's", 0.0, (-100.0, 100.0)),
    ("Error", "error", "Error lower than Original's", 0.0, (0.0, 100.0)))


def headline_checks(classification: Mapping[str, Any], captioning: Mapping[str, Any],
                    skip: Sequence[str] = ()) -> list[dict]:
    """"Less bias than Original" for every mitigation on every headline metric of Tables 1
    and 2 (the answer a reader asks first), Welch t intervals over seeds against Original:

    * classifier: Leakage lower, masked gender AUC closer to 50 (``|AUC - 50|`` per seed),
      Ratio closer to 1 (the folded Ratio minus 1; "not testable" on a gender-balanced
      persons-masked test set, :func:`ratio_testable`);
    * captioner: LIC lower, Error lower, Ratio closer to the test set's own man : woman ratio
      (``|Ratio - r_test|`` per seed).

    Each margin is 10 % of Original's own distance from the metric's unbiased value; each
    check names its metric's controls (``controlled``), which gate it as the built-in claims
    (``verdicts.apply_controls``). Rows in
    :data:`NOT_MITIGATIONS` and check ids in ``skip`` (the ones other builders already make)
    are left out; a row without values for a metric gives no check on it.

    Returns:
        list of checks (module docstring layout), ids ``<task>/<row>-original/<key><0``."""
    out: list[dict] = []
    why = ratio_testable(classification.get("test_set"))
    skip = set(skip)

    def rows(m):
        return [r for r, v in m.items() if isinstance(v, Mapping) and "per_seed" in v
                and r not in NOT_MITIGATIONS]

    def add(task, row, key, claim, a, b, null, bounds, src, distance=False):
        cid = f"{task}/{row}-original/{key}<0"
        if cid in skip or a is None or b is None or not any(v is not None for v in a) \
                or not any(v is not None for v in b):
            return
        if distance:   # closeness to the unbiased value: compare the distances from it
            a = [None if v is None else abs(float(v) - null) for v in a]
            b = [None if v is None else abs(float(v) - null) for v in b]
            ref_effect, rng = mean_or_none(b), None
        else:
            mb = mean_or_none(b)
            ref_effect, rng = None if mb is None else mb - null, bounds
        c = _diff(cid, f"{task}: {row}'s {claim}", a, b, "<", src,
                  margin_of(ref_effect, f"Original's distance from {null:g}"
                            if distance or null else f"Original's {claim.split()[0]}"),
                  rng)
        # gated by the controls of the same metric, as the built-in claims
        c["controlled"] = [task, CONTROL_NAME.get(key_of.get(key, key), key_of.get(key, key))]
        out.append(not_testable(c, why) if key == "ratio" and task == "classifier" and why
                   else c)

    key_of = {"leakage": "Leakage", "masked_auc": "masked_gender_auc", "ratio": "Ratio",
              "lic": "LIC", "error": "Error"}
    src = "metrics/classification.json"
    for row in rows(classification):
        for key, ck, claim, null, bounds in CLASSIFIER_HEADLINE:
            add("classifier", row, ck, claim, seed_values(classification, row, key),
                seed_values(classification, "original", key), null, bounds, src,
                distance=key == "masked_gender_auc")
    ts = captioning.get("test_set") or {}
    n_m, n_f = ts.get("n_male"), ts.get("n_female")
    r_test = max(n_m / n_f, n_f / n_m) if n_m and n_f else None
    src = "metrics/captioning.json"
    for row in rows(captioning):
        for key, ck, claim, null, bounds in CAPTIONER_HEADLINE:
            add("captioner", row, ck, claim, seed_values(captioning, row, key),
                seed_values(captioning, "original", key), null, bounds, src)
        if r_test is not None:
            add("captioner", row, "ratio", f"Ratio closer to the test set's own "
                                           f"{r_test:.2f} than Original's",
                seed_values(captioning, row, "Ratio"),
                seed_values(captioning, "original", "Ratio"), r_test, None, src,
                distance=True)
    return out


#: a table column (metrics key) -> the controls' metric name (metrics/controls.json)
CONTROL_NAME = {"Ratio_expected": "Ratio_E", "masked_gender_auc": "masked_AUC"}


#: a table column -> its no-bias value (0 where absent): a declared check's margin is a
#: fraction of Original's distance from it
NULL_VALUE = {"Ratio": 1.0, "Ratio_expected": 1.0, "masked_gender_auc": 50.0}


#: the words of a claim direction
EXPECT_WORDS = {"<": "lower than", ">": "higher than", "≤": "not above", "≥": "not below"}


def declared_checks(probe: Mapping[str, Any], classification: Mapping[str, Any],
                    captioning: Mapping[str, Any], controls: Mapping[str, Any] | None = None
                    ) -> list[dict]:
    """The claims that registered components declare about their own rows
    (:attr:`biaslab.registry.Entry.claims`, e.g. an installed plug-in's), each against
    Original on the same seeds' metrics (a new method gets verdicts with no
    edit of this module).

    ``{metric: expect}``: a probe attribute (``objects``, ``scene``, ``cast``) is checked on
    every probe family that has the row (classifier probability and logit, captioner word
    rate and margin), a Table 1 / Table 2 column on ``metrics/classification.json`` /
    ``metrics/captioning.json`` where the row is. Welch t intervals over seeds
    (:func:`_diff`), as the paper's own claims. A check carries ``rows`` (row, "original")
    and, for a table column with control models, ``controlled`` (task, metric), so that
    :func:`apply_controls` and :func:`apply_mask_neutral` gate it as the built-in ones;
    ``declared_by`` names the package. Rows without results are skipped.

    Args:
        probe, classification, captioning: the metrics files (``{}`` when absent).
        controls: ``metrics/controls.json`` (which metrics have controls), or None.

    Returns:
        list of checks (module docstring layout).
    """
    ctl = {(t, m) for t in ("classifier", "captioner")
           for ms in ((controls or {}).get(t) or {}).values() for m in (ms or {})}
    out = []
    for e in registry.claimed_rows():
        row, by = e.row, registry.REGISTRIES[e.kind].origin(e.name)
        for metric, expect in e.claims.items():
            word = EXPECT_WORDS[expect]
            if metric in ATTRIBUTES:
                for fam in ("classifier", "classifier_logit", "captioner", "captioner_margin"):
                    f = probe.get(fam) or {}
                    a, b = _values((f.get(row) or {}).get(metric)), \
                        _values((f.get("original") or {}).get(metric))
                    if a is not None and b is not None:
                        out.append({**_diff(f"{fam}/{row}-original/{metric}{expect}0",
                                            f"{fam}: {e.display}'s sensitivity to the {metric} "
                                            f"{word} Original's (declared by {by})", a, b,
                                            expect, "metrics/probe.json",
                                            margin_of(mean_or_none(b), f"Original's {metric} "
                                                                f"sensitivity ({fam})")),
                                    "rows": [row, "original"], "declared_by": by})
                continue
            for task, mfile, src in (("classifier", classification,
                                      "metrics/classification.json"),
                                     ("captioner", captioning, "metrics/captioning.json")):
                a, b = seed_values(mfile, row, metric), seed_values(mfile, "original", metric)
                if a is None or b is None or not any(v is not None for v in a + b):
                    continue
                mb = mean_or_none(b)
                null = NULL_VALUE.get(metric, 0.0)
                c = _diff(f"{task}/{row}-original/{metric.lower()}{expect}0",
                          f"{task}: {e.display}'s {metric} {word} Original's (declared by "
                          f"{by})", a, b, expect, src,
                          margin_of(None if mb is None else mb - null,
                                    f"Original's {metric}" + (f" - {null:g}" if null else "")))
                c.update(rows=[row, "original"], declared_by=by)
                name = CONTROL_NAME.get(metric, metric)
                if (task, name) in ctl:
                    c["controlled"] = [task, name]
                out.append(c)
    return out


#: verdicts that :func:`explain` judges from the interval (the others carry their own reason)
JUDGED = ("holds", "fails", "no practical effect", "inconclusive")


def check_margin(c: Mapping[str, Any], fraction: float = MARGIN_FRACTION) -> dict | None:
    """The margin of one check: ``{"delta", "fraction", "effect", "basis"}`` with ``delta =
    fraction x effect`` for a reference effect (:func:`margin_of`, a probe view's full swing
    :func:`probe_full_swing`), or ``{"delta", "basis"}`` for a fixed one
    (:func:`fixed_margin`); None where the check has none."""
    m = c.get("margin_of")
    if not isinstance(m, Mapping):
        return None
    if "delta" in m:
        return {"delta": float(m["delta"]), "basis": m["basis"]}
    if "probe_view" in m:
        sw = probe_full_swing(m["probe_view"], fraction)
        if sw is None:
            return None
        m = {"effect": sw[0], "basis": sw[1]}
    return {"delta": fraction * float(m["effect"]), "fraction": fraction,
            "effect": float(m["effect"]), "basis": m["basis"]}


def decide(checks: Sequence[Mapping[str, Any]], fraction: float = MARGIN_FRACTION
           ) -> list[dict]:
    """Every interval-judged check (verdict in :data:`JUDGED`) decided again with its margin
    (``equivalence.decide``): a directional claim by its 95 % CI, with "no practical effect" where
    its 90 % CI lies inside ``(-delta, +delta)`` of the reference; a "not below" / "not above"
    claim by the one-sided 5 % test against ``reference -+ delta``. ``delta`` is
    ``fraction`` (param ``validity.margin_fraction``) of the check's reference effect
    (:func:`check_margin`), stored as the check's ``margin``. The 90 % CI is the exact one
    where the builder had the values (``lo90``/``hi90``), else ``equivalence.narrower`` of the 95 %
    one (conservative for t intervals). Other verdicts ("not testable", ...) are kept.

    Raises:
        ValueError: ``fraction`` not in [0, 1)."""
    if not 0.0 <= float(fraction) < 1.0:
        raise ValueError(f"validity.margin_fraction must be in [0, 1), got {fraction!r}")
    out = []
    for c in checks:
        c = dict(c)
        m = check_margin(c, float(fraction))
        c.pop("margin_of", None)
        if c["verdict"] not in JUDGED:
            out.append(c)
            continue
        if "lo90" not in c:
            lo90, hi90 = equivalence.narrower(c.get("mean"), c.get("lo"), c.get("hi"))
            if lo90 is not None:
                c["lo90"], c["hi90"] = lo90, hi90
        c["margin"] = m
        c["verdict"] = equivalence.decide(c["expect"], float(c["reference"]),
                                    None if m is None else m["delta"],
                                    (c.get("lo"), c.get("hi")),
                                    (c.get("lo90"), c.get("hi90")))
        out.append(c)
    return out


__all__ = ["ATTRIBUTES", "LABELED", "MATCHED", "NEUTRAL_RANGE", "MARGIN_FRACTION", "JUDGED",
           "PROBE_RANGE", "PROBE_FULL_SWING", "probe_full_swing", "make_check", "margin_of",
           "fixed_margin", "not_testable", "ratio_testable", "probe_checks", "table_checks",
           "declared_checks", "check_margin", "decide", "NOT_MITIGATIONS",
           "CLASSIFIER_HEADLINE", "CAPTIONER_HEADLINE", "headline_checks"]
