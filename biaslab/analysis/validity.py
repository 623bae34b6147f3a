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

Each check: ``{"id", "claim", "expect", "reference", "mean", "lo", "hi", "n", "verdict",
"reason", "source"}`` (``reason``: why the verdict, in words with the numbers; ``source``: the
metrics file it was read from; both filled by :func:`explain`) with
``verdict`` from ``biaslab.runtime.stats.verdict`` on the 95 % CI: "holds" (the CI lies on the
expected side), "fails" (on the other side), "inconclusive" (it straddles). Differences between
rows are Welch t intervals over seeds (``biaslab.runtime.stats.difference``); single-row effects the
t interval over seeds (``biaslab.runtime.stats.summarize``).

"Not below" (claim 2's cast, ``≥``) is checked as "the CI of the difference reaches 0 or above",
"not above" (claim 3's Δ, ``≤``) as "it reaches 0 or below": an underpowered run passes these
trivially, so the report prints the interval beside the verdict.

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

import os
from collections.abc import Mapping, Sequence
from typing import Any

from biaslab import registry
from biaslab.runtime import stats

ATTRIBUTES = ("objects", "scene", "cast")
#: resampled row -> its size-matched control (a random subset of Original with the same size and
#: gender counts; ``biaslab.data.datasets.matched_subset``)
MATCHED = {"subsample": "matched"}
#: the mask-neutrality precondition's interval for Ratio_E
NEUTRAL_RANGE = (0.67, 1.5)
#: attribute -> whether label-based resampling can see it
LABELED = {"objects": True, "scene": False, "cast": False}


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


def _check(cid: str, claim: str, expect: str, ref: float, mean, lo, hi, n,
           source: str | None = None) -> dict:
    return {"id": cid, "claim": claim, "expect": expect, "reference": ref, "mean": mean,
            "lo": lo, "hi": hi, "n": n, "verdict": _verdict(lo, hi, expect, ref),
            "source": source}


def _not_testable(check: dict, reason: str) -> dict:
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
            source: str | None = None) -> dict:
    """A single row's effect: the CI the stage stored (``lo``/``hi``: t over seeds, or the
    pair bootstrap with fewer seeds, ``biaslab.analysis.probe``), else the t interval of its values."""
    if isinstance(node, Mapping) and node.get("lo") is not None and node.get("mean") is not None:
        n = node.get("n_seeds") or len(_values(node) or [])
        return _check(cid, claim, expect, ref, node["mean"], node["lo"], node["hi"], n, source)
    s = stats.summarize(_values(node) or [])
    return _check(cid, claim, expect, ref, s["mean"], s["lo"], s["hi"], s["n"], source)


def _diff(cid: str, claim: str, a: Sequence | None, b: Sequence | None, expect: str,
          source: str | None = None) -> dict:
    d = stats.difference(a or [], b or [])
    return _check(cid, claim, expect, 0.0, d["diff"], d["lo"], d["hi"], min(d["n"], d["n_ref"]),
                  source)


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

    for a in ATTRIBUTES:
        if vals("original", a) is not None:
            out.append(_effect(f"{model}/original/{a}>0",
                               f"{model} on Original is sensitive to the {a} (> 0)",
                               (fam.get("original") or {}).get(a), ">", 0.0))
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
                             vals(row, "objects"), vals(ref, "objects"), "<"))
        if vals(row, "cast") is not None and vals(ref, "cast") is not None:
            out.append(_diff(f"{model}/{row}-{ref}/cast≥0",
                             f"{model}: {row} not less sensitive to the unlabeled colour cast "
                             f"than {name}", vals(row, "cast"), vals(ref, "cast"), "≥"))
    for a in ATTRIBUTES:
        for ref in ("original", "oversample"):
            if vals("synthetic", a) is not None and vals(ref, a) is not None:
                out.append(_diff(f"{model}/synthetic-{ref}/{a}<0",
                                 f"{model}: S_synthetic less sensitive to the {a} than {ref}",
                                 vals("synthetic", a), vals(ref, a), "<"))
    return _from(out, "metrics/probe.json")


def _from(checks: list[dict], source: str) -> list[dict]:
    """``checks`` with ``source`` (the metrics file they were read from) where unset."""
    return [{**c, "source": c.get("source") or source} for c in checks]


def _seed_values(metrics: Mapping[str, Any], row: str, key: str) -> list | None:
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
    mark = (lambda c: _not_testable(c, why)) if why else (lambda c: c)
    rs, ro = _seed_values(classification, "synthetic", "Ratio"), \
        _seed_values(classification, "original", "Ratio")
    if rs is not None and ro is not None:
        out.append(mark(_diff("classifier/synthetic-original/ratio<0",
                              "classifier: S_synthetic's Ratio closer to 1 than Original's", rs,
                              ro, "<")))
    # the same claim on the threshold-free Ratio (biaslab.classify.evaluate.expected_ratio):
    # an addition beside, not instead of, paper 000's thresholded Ratio above
    es, eo = _seed_values(classification, "synthetic", "Ratio_expected"), \
        _seed_values(classification, "original", "Ratio_expected")
    if es is not None and eo is not None and any(v is not None for v in es + eo):
        out.append(mark(_diff("classifier/synthetic-original/ratio_expected<0",
                              "classifier: S_synthetic's expected-count Ratio_E closer to 1 "
                              "than Original's", es, eo, "<")))
    # the same claim without a threshold or a fold: the ROC AUC of
    # P(man) - P(woman) on the persons-masked images against the true gender (50 = the masked
    # image tells nothing). A ranking measure: the mask's overall lean (Ratio's precondition)
    # does not move it, and it needs no gender imbalance in the test set
    a_s, a_o = _seed_values(classification, "synthetic", "masked_gender_auc"), \
        _seed_values(classification, "original", "masked_gender_auc")
    if a_o is not None and any(v is not None for v in a_o):
        # the premise of every "reads less" claim, on any data: Original reads gender from
        # the scene around the masked person at all (50 = chance; no planted truth needed)
        s = stats.summarize([v for v in a_o if v is not None])
        out.append(_check("classifier/original/masked_auc>50",
                          "classifier: Original reads gender from the persons-masked images "
                          "(masked gender AUC above chance)", ">", 50.0, s["mean"], s["lo"],
                          s["hi"], s["n"]))
    if a_s is not None and a_o is not None and any(v is not None for v in a_s + a_o):
        out.append(_diff("classifier/synthetic-original/masked_auc<0",
                         "classifier: S_synthetic reads gender less from the persons-masked "
                         "images than Original (masked gender AUC)", a_s, a_o, "<"))
    # the real-vs-generated domain check: S_synthetic never trained on a real
    # photo; where it recognises objects better on generated images of unseen scenes than on
    # the real photos of the same scenes, its Leakage is read outside its training domain
    dom = (classification.get("domain") or {})
    gap = _seed_values(dom, "synthetic", "domain_gap")
    domain = None
    if gap is not None and any(v is not None for v in gap):
        s = stats.summarize([v for v in gap if v is not None])
        out.append(_check("classifier/synthetic/domain_gap>0",
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
        ls, lo_ = _seed_values(classification, "synthetic", key), \
            _seed_values(classification, "original", key)
        if ls is not None and lo_ is not None and any(v is not None for v in ls + lo_):
            c = _diff(f"classifier/synthetic-original/{cid}",
                      f"classifier: S_synthetic's {what} lower than Original's", ls, lo_, "<")
            if domain is not None:
                c["domain"] = domain   # read by explain: the cause beside the verdict
            out.append(c)
    # the artifact part of Δ, where the backend is not the re-draw itself
    backend = (artifact.get("test_set") or {}).get("backend")
    as_, ao = _seed_values(artifact, "synthetic", "delta_artifact"), \
        _seed_values(artifact, "original", "delta_artifact")
    if backend not in (None, "render") and as_ is not None and ao is not None and \
            any(v is not None for v in as_ + ao):
        out.append(_diff("classifier/synthetic-original/delta_artifact≤0",
                         "classifier: S_synthetic's Δ_artifact no larger than Original's",
                         as_, ao, "≤", "metrics/artifact.json"))
    ds, do = _seed_values(artifact, "synthetic", "delta"), _seed_values(artifact, "original",
                                                                          "delta")
    if ds is not None and do is not None:
        c = _diff("classifier/synthetic-original/delta≤0",
                  "classifier: S_synthetic's Table 3 Δ no larger than Original's", ds, do,
                  "≤", "metrics/artifact.json")
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


#: a table column (metrics key) -> the controls' metric name (metrics/controls.json)
CONTROL_NAME = {"Ratio_expected": "Ratio_E", "masked_gender_auc": "masked_AUC"}
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
                                            expect, "metrics/probe.json"),
                                    "rows": [row, "original"], "declared_by": by})
                continue
            for task, mfile, src in (("classifier", classification,
                                      "metrics/classification.json"),
                                     ("captioner", captioning, "metrics/captioning.json")):
                a, b = _seed_values(mfile, row, metric), _seed_values(mfile, "original", metric)
                if a is None or b is None or not any(v is not None for v in a + b):
                    continue
                c = _diff(f"{task}/{row}-original/{metric.lower()}{expect}0",
                          f"{task}: {e.display}'s {metric} {word} Original's (declared by "
                          f"{by})", a, b, expect, src)
                c.update(rows=[row, "original"], declared_by=by)
                name = CONTROL_NAME.get(metric, metric)
                if (task, name) in ctl:
                    c["controlled"] = [task, name]
                out.append(c)
    return out


#: paper 003's worst Error increase from LIBRA (OSCAR: 3.0 -> 4.6, Table 2), points
LIBRA_ERROR_TOLERANCE = 1.6
#: the bars for the DCG on the test split's human captions / their gender swaps
DCG_KEEP_CORRECT, DCG_FIX_SWAPPED = 0.97, 0.80


def _paired(cid: str, claim: str, a: Sequence | None, b: Sequence | None, expect: str,
            ref: float = 0.0) -> dict:
    """Per-seed paired difference ``a_s - b_s`` (the same captioner seed before / after
    LIBRA), its mean and t 95 % CI over seeds, judged against ``ref``."""
    pairs = [(x, y) for x, y in zip(a or [], b or []) if x is not None and y is not None]
    d = stats.summarize([float(x) - float(y) for x, y in pairs])
    return _check(cid, claim, expect, ref, d["mean"], d["lo"], d["hi"], d["n"],
                  "metrics/captioning.json")


def _proportion(cid: str, claim: str, part: Mapping[str, Any] | None, key: str, ref: float
                ) -> dict | None:
    """A fraction of captions (``metrics/dcg_apply.json``: ``after[key]`` over ``after.n``)
    with its Wilson 95 % interval, judged "not below" ``ref``."""
    after = (part or {}).get("after") or {}
    n = int(after.get("n") or 0)
    if not n or after.get(key) is None:
        return None
    from scipy.stats import binomtest
    k = int(round(float(after[key]) * n))
    ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
    return _check(cid, claim, "≥", ref, k / n, float(ci.low), float(ci.high), n,
                  "metrics/dcg_apply.json")


def libra_checks(captioning: Mapping[str, Any], dcg_apply: Mapping[str, Any] | None = None
                 ) -> list[dict]:
    """Paper 003's claims on the default, from ``metrics/captioning.json``
    (rows ``original`` and ``original+LIBRA``: LIBRA on the same captioner seeds, so the
    differences are paired by seed) and ``metrics/dcg_apply.json``:

    * LIC of Original + LIBRA lower than Original's (``<``);
    * Error not higher than Original's by more than ``LIBRA_ERROR_TOLERANCE`` (paper 003's
      worst case, +1.6 points; ``≤`` holds while the CI's lower end is at most +1.6);
    * BLEU-4, CIDEr and METEOR not lower than Original's (``≥``: the CI reaches 0);
    * the DCG keeps >= 97 % of the correct human captions' genders correct and makes >= 80 %
      of their gender swaps correct (``≥`` on the Wilson interval);
    * the DCG lowers the Error of the ``context_reader`` controls (every reader in
      ``dcg_apply.json`` whose name starts so: the full reader and ``context_reader[cast]``),
      captioners whose gender errors all come from context (``<`` on the paired per-image
      ``error_change``, percentage points; only on data with a planted truth).

    Rows absent (no DCG, no captioner) give no check."""
    out: list[dict] = []
    if "original" in captioning and "original+LIBRA" in captioning:
        def sv(row, key):
            return _seed_values(captioning, row, key)
        for key, cid, claim, expect, ref in (
                ("LIC", "lic<0", "LIC lower than Original's", "<", 0.0),
                ("Error", "error≤tol", f"Error not higher than Original's by more than "
                                       f"{LIBRA_ERROR_TOLERANCE:g} points (paper 003's worst "
                                       f"case)", "≤", LIBRA_ERROR_TOLERANCE),
                ("BLEU-4", "bleu4≥0", "BLEU-4 not lower than Original's", "≥", 0.0),
                ("CIDEr", "cider≥0", "CIDEr not lower than Original's", "≥", 0.0),
                ("METEOR", "meteor≥0", "METEOR not lower than Original's", "≥", 0.0)):
            a, b = sv("original+LIBRA", key), sv("original", key)
            if a is not None and b is not None:
                out.append(_paired(f"captioner/libra-original/{cid}",
                                   f"captioner: Original + LIBRA's {claim} (paired by seed)",
                                   a, b, expect, ref))
    for part, key, ref, cid, claim in (
            ("human", "correct", DCG_KEEP_CORRECT, "libra/dcg/human_correct≥",
             "LIBRA's DCG keeps the gender of correct human captions correct"),
            ("swapped", "correct", DCG_FIX_SWAPPED, "libra/dcg/swapped_correct≥",
             "LIBRA's DCG corrects gender-swapped human captions")):
        c = _proportion(f"{cid}{ref:g}", f"{claim} (>= {100 * ref:g} %)",
                        (dcg_apply or {}).get(part), key, ref)
        if c is not None:
            out.append(c)
    for name in sorted(k for k in (dcg_apply or {}) if k.startswith("context_reader")):
        ch = (dcg_apply[name] or {}).get("error_change") or {}
        if ch.get("n"):
            out.append(_check(f"libra/dcg/{name}_error<0",
                              f"LIBRA's DCG lowers the Error of the control {name} (paired "
                              f"by image, percentage points)", "<", 0.0, ch.get("mean"),
                              ch.get("lo"), ch.get("hi"), int(ch["n"]),
                              "metrics/dcg_apply.json"))
    return out


def retrieval_checks(retrieval: Mapping[str, Any] | None) -> list[dict]:
    """Paper 001's claims on retrieval bias metrics (sec. 3.3, Table 1; Table 2), from
    ``metrics/retrieval.json`` (stage eval_retrieval), at the smallest K for the signed
    Bias@K (paper 001: K = 5, 10) and the largest K below the number of gallery images of
    known gender for MaxSkew@K (paper 001: K = 100; a larger K holds them all and reads 0):

    * a gender-agnostic model (TF-IDF on gender-neutralised captions) has MaxSkew@K above a
      random ranking's on the natural gallery (``>``, paired over queries): the metric reads
      the data's context bias, not only the model's;
    * the gender-agnostic model's Bias@K is higher on the natural gallery than on the balanced
      one (``>``; natural minus balanced, the far ends of the bootstrap and t intervals): the
      signed metric follows the gallery's imbalance (paper 001: 0.22 vs -0.06 at K = 5). Not
      "≈ 0 on the balanced gallery": a precise estimate of any small value excludes 0 (paper
      001's own -0.06 ± 0.00 would);
    * and its MaxSkew@K there stays above the random ranking's (``>``, Welch over the
      resamples): balancing the counts leaves the spurious correlations in;
    * CLIP-clip lowers the scorer's MaxSkew@K on the natural gallery (``<``, paired over
      queries; paper 001 Table 2's COCO rows);
    * on the contrast set (stage contrast_set, ``retrieval["contrast"]``; the largest K there
      not above the natural one) the gender-agnostic model's MaxSkew@K is not above a random
      ranking's (``≤``): the contrast set leaves no context that goes with one group;
    * and the scorer's MaxSkew@K there is above a random ranking's (``>``): a model trained
      on biased data stays biased where the gallery is not.

    No retrieval rows (a skip record, no captions) give no check."""
    r = retrieval or {}
    setup = r.get("setup") or {}
    # a top K that can hold every image of known gender reads the gallery's own balance
    # (MaxSkew 0 by construction): only K below their number
    n_defined = (setup.get("n_female") or 0) + (setup.get("n_male") or 0) \
        if isinstance(setup.get("n_female"), int) else setup.get("n_gallery")
    ks = [int(k) for k in setup.get("ks") or [] if not isinstance(n_defined, int)
          or int(k) < n_defined]
    if not ks or not isinstance(r.get("differences"), Mapping):
        return []
    kb, km = min(ks), max(ks)
    src = "metrics/retrieval.json"
    out: list[dict] = []

    def diff(name, key, expect, cid, claim):
        d = ((r["differences"].get(name) or {}).get(key)) or {}
        if d.get("mean") is not None:
            out.append(_check(cid, claim, expect, 0.0, d["mean"], d.get("lo"), d.get("hi"),
                              d.get("n"), src))
    diff("tfidf-random", f"MaxSkew@{km}", ">", f"retrieval/tfidf-random/maxskew@{km}>0",
         f"retrieval: a gender-agnostic model (TF-IDF on neutralised captions) has MaxSkew@{km} "
         f"above a random ranking's on the natural gallery (paired over queries; paper 001 "
         f"sec. 3.3)")
    diff("clip_clip-scorer", f"MaxSkew@{km}", "<", f"retrieval/clip_clip-scorer/maxskew@{km}<0",
         f"retrieval: CLIP-clip lowers the scorer's MaxSkew@{km} on the natural gallery "
         f"(paired over queries; paper 001 Table 2)")
    bal = r.get("balanced") or {}
    nat = (r.get("tfidf") or {}).get(f"Bias@{kb}") or {}
    t = (bal.get("tfidf") or {}).get(f"Bias@{kb}") or {}
    if None not in (nat.get("lo"), nat.get("hi"), t.get("mean"), t.get("ci95")):
        # conservative: the far ends of the two intervals (bootstrap over queries, t over
        # resamples: no joint distribution to pair them by)
        out.append(_check(f"retrieval/natural-balanced/tfidf/bias@{kb}>0",
                          f"retrieval: the gender-agnostic model's Bias@{kb} is higher on the "
                          f"natural gallery (more men) than on the balanced one: the signed "
                          f"metric follows the gallery's imbalance (paper 001 sec. 3.3, "
                          f"Table 1)", ">", 0.0, nat["mean"] - t["mean"],
                          nat["lo"] - (t["mean"] + t["ci95"]),
                          nat["hi"] - (t["mean"] - t["ci95"]), t.get("n"), src))
    a, b = ((bal.get(x) or {}).get(f"MaxSkew@{km}") or {} for x in ("tfidf", "random"))
    if a.get("mean") is not None and b.get("mean") is not None:
        d = stats.difference_of_records(a, b)
        out.append(_check(f"retrieval/balanced/tfidf-random/maxskew@{km}>0",
                          f"retrieval: on the balanced gallery the gender-agnostic model's "
                          f"MaxSkew@{km} stays above a random ranking's (Welch over resamples; "
                          f"paper 001 sec. 3.3 and appendix D)", ">", 0.0, d["diff"], d["lo"],
                          d["hi"], min(int(a.get("n") or 0), int(b.get("n") or 0)), src))
    con = r.get("contrast") or {}
    cks = [int(k) for k in (con.get("setup") or {}).get("ks") or []]
    if isinstance(con.get("differences"), Mapping) and cks:
        kc = max(k for k in cks if k <= km) if any(k <= km for k in cks) else max(cks)
        d = con["differences"]

        def cdiff(name, expect, cid, claim):
            x = (d.get(name) or {}).get(f"MaxSkew@{kc}") or {}
            if x.get("mean") is not None:
                out.append(_check(cid, claim, expect, 0.0, x["mean"], x.get("lo"), x.get("hi"),
                                  x.get("n"), src))
        cdiff("tfidf-random", "≤", f"retrieval/contrast/tfidf-random/maxskew@{kc}≤0",
              f"retrieval: on the contrast set (both groups' versions of each image, "
              f"background fixed) the gender-agnostic model's MaxSkew@{kc} is not above a "
              f"random ranking's (paired over queries; paper 001 sec. 4: no spurious "
              f"correlation left to read)")
        cdiff("scorer-random", ">", f"retrieval/contrast/scorer-random/maxskew@{kc}>0",
              f"retrieval: on the contrast set the scorer trained on the biased data keeps "
              f"MaxSkew@{kc} above a random ranking's (paired over queries): the bias it "
              f"shows there is the model's, not the gallery's (paper 001 sec. 5)")
    return out


def spurious_checks(spurious: Mapping[str, Any] | None) -> list[dict]:
    """Paper 001's claims on spurious correlations in the data (appendix D, Table 7), from
    ``metrics/spurious.json`` (stage spurious):

    * the caption clusters deviate from gender parity (app. D.1 / D.3): a test image's
      cluster's male share among the train images predicts its gender (AUC ``>`` 0.5, with
      its bootstrap CI; ``biaslab.analysis.spurious.cluster_auc``);
    * a gender classifier on person-removed images ("background only", app. D.4) reads gender
      above chance on the natural test images (AUC ``>`` 0.5);
    * on the contrast set (stage contrast_set) it does not (``≤`` 0.5: holds when the CI
      reaches 0.5): with the background fixed, there is no context left to read;
    * its AUC falls from the natural images to the contrast set (``>`` 0, independent
      bootstrap);
    * a classifier on the neutralised captions reads gender above chance on the natural test
      images (app. D.4: 78 % AUC on COCO);
    * a classifier on the unmasked images reads gender on the contrast set (``>`` 0.5): the
      contrast set's versions carry their group (Table 7's zero-shot gender accuracy).

    No record (a skip record, no captions) gives no check."""
    sp = spurious or {}
    cls = sp.get("classifiers")
    if not isinstance(cls, Mapping):
        return []
    src = "metrics/spurious.json"
    out: list[dict] = []
    auc = ((sp.get("clusters") or {}).get("auc")) or {}
    if auc.get("mean") is not None:
        out.append(_check("spurious/clusters/natural/auc>0.5", (
            f"spurious correlations: the {(sp.get('clusters') or {}).get('m', '?')} caption "
            f"clusters deviate from gender parity: a test image's cluster's male share among "
            f"the train images predicts its gender (ROC AUC above chance; paper 001 app. D.1)"),
            ">", 0.5, auc["mean"], auc.get("lo"), auc.get("hi"), auc.get("n"), src))
    for name, where, expect, ref, claim in SPURIOUS_CLAIMS:
        node = ((cls.get(name) or {}).get(where)) or {}
        if node.get("mean") is not None:
            # ids: spurious/<input>/<set>/auc>0.5, a difference: spurious/<input>/<sets>>0
            cid = f"spurious/{name}/{where}" + (f"/auc{expect}{ref:g}" if ref else f"{expect}0")
            out.append(_check(cid, claim, expect, ref, node["mean"], node.get("lo"),
                              node.get("hi"), node.get("n"), src))
    return out


#: paper 001's claims on the gender classifiers of stage spurious: (input, set, expected
#: direction, reference, claim)
SPURIOUS_CLAIMS = (
    ("background", "natural", ">", 0.5,
     "spurious correlations: a gender classifier on person-removed test images (background "
     "only) has ROC AUC above chance (paper 001 app. D.4: 63.4 % on COCO)"),
    ("background", "contrast", "≤", 0.5,
     "spurious correlations: on the contrast set (background fixed, each image in both "
     "groups) the background-only classifier is at chance (paper 001 Table 7)"),
    ("background", "natural-contrast", ">", 0.0,
     "spurious correlations: the background-only classifier's AUC falls from the natural "
     "test images to the contrast set"),
    ("text", "natural", ">", 0.5,
     "spurious correlations: a gender classifier on gender-neutralised captions has ROC AUC "
     "above chance (paper 001 app. D.4: 78.0 % on COCO)"),
    ("image", "contrast", ">", 0.5,
     "contrast set: a gender classifier on the unmasked images reads each version's group "
     "(AUC above chance): the edits carry gender (paper 001 Table 7)"))


#: metric named in a check id -> the controls' (task, metric)
CONTROLLED_METRIC = {"ratio<0": ("classifier", "Ratio"),
                     "ratio_expected<0": ("classifier", "Ratio_E"),
                     "masked_auc<0": ("classifier", "masked_AUC"),
                     "original/masked_auc>50": ("classifier", "masked_AUC"),
                     "synthetic-original/leakage<0": ("classifier", "Leakage"),
                     "libra-original/lic<0": ("captioner", "LIC"),
                     "libra-original/error≤tol": ("captioner", "Error")}


def control_preconditions(controls: Mapping[str, Any] | None) -> dict:
    """Which metrics the control models validate on this data:
    ``{(task, metric): [names of controls that do not match]}`` for every metric with at least
    one control (``metrics/controls.json``, stage ``controls``); the probe's entry is
    ``("probe", None)``. Empty when no controls were run. An "inconclusive" control (a
    direction its CI does not decide) is not a miss: it is a lack of power, listed by
    :func:`precondition_rows`."""
    out: dict = {}
    if not isinstance(controls, Mapping):
        return out
    for task in ("classifier", "captioner"):
        for name, ms in (controls.get(task) or {}).items():
            for metric, r in (ms or {}).items():
                if isinstance(r, Mapping) and "verdict" in r:
                    bad = out.setdefault((task, metric), [])
                    if r["verdict"] == "does not match":
                        bad.append(name)
    for name, attrs in (controls.get("probe") or {}).items():
        for a, r in (attrs or {}).items():
            bad = out.setdefault(("probe", None), [])
            if isinstance(r, Mapping) and r.get("verdict") == "does not match":
                bad.append(f"{name}/{a}")
    return out


def apply_controls(checks: Sequence[Mapping[str, Any]], controls: Mapping[str, Any] | None
                   ) -> list[dict]:
    """``checks`` with verdict "metric not valid on this data" (and a ``reason`` naming the
    controls that missed their known answer) where a check's metric has a control that does
    not match (:func:`control_preconditions`); other checks unchanged. A check whose metric
    has no control keeps its verdict."""
    pre = control_preconditions(controls)
    out = []
    for c in checks:
        keys = []
        if c.get("controlled"):      # a declared check names its metric (declared_checks)
            keys.append(tuple(c["controlled"]))
        else:
            for suffix, key in CONTROLLED_METRIC.items():
                if c["id"].endswith(suffix):
                    keys.append(key)
        if not keys and c["id"].rsplit("/", 1)[-1].startswith(ATTRIBUTES):
            keys.append(("probe", None))   # a probe check: <model>/<rows>/<attribute><op>
        bad = [f"{k[0]}{'/' + k[1] if k[1] else ''}: {', '.join(pre[k])}" for k in keys
               if pre.get(k)]
        if bad:
            out.append({**c, "verdict": "metric not valid on this data",
                        "reason": "its control models miss their known answer ("
                                  + "; ".join(bad) + ", metrics/controls.json)"})
        else:
            out.append(dict(c))
    return out


def precondition_rows(controls: Mapping[str, Any] | None) -> list[dict]:
    """One row per (task, metric) validated by the controls: ``{"task", "metric", "valid",
    "not_matching": [...], "inconclusive": [controls whose expected direction the CI does not
    decide: the metric lacks power for that bias here]}`` (for ``metrics/validity.json``)."""
    weak: dict = {}
    for task in ("classifier", "captioner"):
        for name, ms in ((controls or {}).get(task) or {}).items():
            for metric, r in (ms or {}).items():
                if isinstance(r, Mapping) and r.get("verdict") == "inconclusive":
                    weak.setdefault((task, metric), []).append(name)
    return [{"task": t, "metric": m or "probe", "valid": not bad, "not_matching": bad,
             "inconclusive": weak.get((t, m), [])}
            for (t, m), bad in sorted(control_preconditions(controls).items(),
                                      key=lambda kv: (kv[0][0], kv[0][1] or ""))]


def attribute_precondition_rows(controls_attribute: Mapping[str, Any] | None) -> dict:
    """The attribute's controls as preconditions: ``{"attribute", "rows":
    :func:`precondition_rows` of ``metrics/controls_attribute.json`` (stage
    ``controls_attribute``, the same ``{task: {control: {metric: judged}}}`` layout as
    ``metrics/controls.json``)}``, or ``{"attribute", "skipped": why}`` where the stage
    skipped (``attribute: gender``: its controls are the preconditions above) or did not run.
    A row's ``valid`` says whether the attribute's Leakage / LIC on this data read their known
    answers; no gender check depends on it."""
    c = controls_attribute if isinstance(controls_attribute, Mapping) else {}
    name = c.get("attribute")
    if not c or "skipped" in c:
        return {"attribute": name, "skipped": c.get("skipped") or "no attribute controls"}
    # a task the stage skipped ({"skipped": why}, e.g. data without captions) has no rows
    tasks = {t: {k: v for k, v in (c.get(t) or {}).items() if isinstance(v, Mapping)}
             for t in ("classifier", "captioner") if isinstance(c.get(t), Mapping)}
    return {"attribute": name, "rows": precondition_rows(tasks)}


def mask_neutral_rows(probe: Mapping[str, Any] | None,
                      bounds: tuple[float, float] = NEUTRAL_RANGE) -> list[dict]:
    """The mask-neutrality precondition of the Ratio claims: one row per
    training set / method from ``metrics/probe.json["mask_neutral"]`` (stage ``probe``,
    :func:`biaslab.analysis.probe.mask_neutral_record`).

    A model that calls the masked person itself a man (or a woman) does so on every masked
    test image, so its Ratio measures the fill, not the context. The test is what the fill
    *adds*: the mask effect Ratio_E(masked) / Ratio_E(the same images drawn without the
    person), pooled over seeds, on the context-free images (``probe/neutral.csv``) and on the
    probe pairs in context; ``met`` when both lie in ``bounds``. The issue's reading, Ratio_E
    on masked context-free images alone (``ratio_expected``), mixes the fill with the model's
    call on an empty image (``ratio_expected_empty``): S_synthetic's models call an empty grey
    image a woman (Ratio_E ~0.25) whatever fills the box, which the Ratio metric rightly
    counts as the model's bias, not the mask's. Both are in the row. A probe.json without the
    person-free reference (older runs) falls back to ``ratio_expected``.

    Returns:
        ``[{"dataset", "ratio_expected", "lo", "hi", "per_seed", "ratio_expected_empty",
        "mask_effect", "mask_effect_lo", "mask_effect_hi", "mask_effect_per_seed",
        "context": {"mask_effect", "mask_effect_lo", "mask_effect_hi", "ratio_expected",
        "ratio_expected_empty", "n_images"} | None, "n_images", "bounds", "measure":
        "mask_effect" | "ratio_expected", "met"}]``; empty when the probe has no such images.
    """
    rows = []
    lo, hi = bounds

    def val(v, flag=None):
        if v is None:
            return float("inf") if flag == "r=inf" else None
        return float(v)

    for d, r in ((probe or {}).get("mask_neutral") or {}).items():
        if not isinstance(r, Mapping):
            continue
        v = val(r.get("ratio_expected"), r.get("ratio_flag"))
        ctx = r.get("context") if isinstance(r.get("context"), Mapping) else None
        row = {"dataset": d, "ratio_expected": v, "lo": r.get("lo"), "hi": r.get("hi"),
               "per_seed": r.get("per_seed"),
               "ratio_expected_empty": r.get("ratio_expected_empty"),
               "mask_effect": r.get("mask_effect"),
               "mask_effect_lo": r.get("mask_effect_lo"),
               "mask_effect_hi": r.get("mask_effect_hi"),
               "mask_effect_per_seed": r.get("mask_effect_per_seed"),
               "context": ({k: ctx.get(k) for k in ("mask_effect", "mask_effect_lo",
                                                    "mask_effect_hi", "ratio_expected",
                                                    "ratio_expected_empty", "n_images")}
                           if ctx else None),
               "n_images": r.get("n_images"), "bounds": [lo, hi]}
        if "mask_effect" in r:
            tested = [row["mask_effect"]] + ([ctx.get("mask_effect")] if ctx else [])
            row["measure"] = "mask_effect"
            row["met"] = all(t is not None and lo <= float(t) <= hi for t in tested)
        else:
            if v is None:
                continue
            row["measure"] = "ratio_expected"
            row["met"] = bool(lo <= v <= hi)
        rows.append(row)
    return rows


def _f2(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.2f}"


def _ci2(r: Mapping[str, Any], lo: str, hi: str) -> str:
    return (f" [{float(r[lo]):.2f}, {float(r[hi]):.2f}]"
            if r.get(lo) is not None and r.get(hi) is not None else "")


def mask_neutral_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Lines for the report: the mask-neutrality precondition per training set
    (:func:`mask_neutral_rows`)."""
    if not rows:
        return []
    lo, hi = rows[0]["bounds"]
    if any(r.get("measure") == "mask_effect" for r in rows):
        out = [f"Mask neutrality (precondition of the Ratio claims): the mask effect, Ratio_E "
               f"on persons-masked images / Ratio_E on the same images drawn without the "
               f"person, pooled over seeds, must lie in [{lo:g}, {hi:g}] without context "
               f"and in context (the probe pairs). Ratio_E of the masked and of the "
               f"person-free context-free images are shown too: the second is the model's "
               f"own call on an empty image, which the Ratio metric counts as its bias:", "",
               "| training set | mask effect, no context [95 % CI] | per seed | mask effect, "
               "in context [95 % CI] | Ratio_E masked, no context | Ratio_E person-free, no "
               "context | n images (no context / context) | met |",
               "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            c = r.get("context") or {}
            per = ", ".join(_f2(v) for v in (r.get("mask_effect_per_seed") or []))
            out.append(f"| {r['dataset']} | {_f2(r.get('mask_effect'))}"
                       f"{_ci2(r, 'mask_effect_lo', 'mask_effect_hi')} | {per} | "
                       f"{_f2(c.get('mask_effect'))}"
                       f"{_ci2(c, 'mask_effect_lo', 'mask_effect_hi')} | "
                       f"{_f2(r.get('ratio_expected'))}{_ci2(r, 'lo', 'hi')} | "
                       f"{_f2(r.get('ratio_expected_empty'))} | {r.get('n_images')} / "
                       f"{c.get('n_images')} | {'yes' if r['met'] else '**no**'} |")
        out += ["", "The verdict uses the point estimates. The intervals cover the finite "
                    "image sets only; the per-seed values show the spread over training "
                    "seeds."]
        return out + [""]
    out = [f"Mask neutrality (precondition of the Ratio claims): Ratio_E on persons-masked "
           f"images without context, pooled over seeds, must lie in [{lo:g}, {hi:g}]:", "",
           "| training set | Ratio_E (masked, no context) [95 % CI over images] | per seed | "
           "n images | met |",
           "|---|---|---|---|---|"]
    for r in rows:
        per = ", ".join(f"{v:.2f}" for v in (r.get("per_seed") or []) if v is not None)
        out.append(f"| {r['dataset']} | {r['ratio_expected']:.2f}{_ci2(r, 'lo', 'hi')} | "
                   f"{per} | {r.get('n_images')} | {'yes' if r['met'] else '**no**'} |")
    out += ["", "The verdict uses the point estimate (the issue's rule). The interval covers "
                "the finite image set only; the per-seed values show the spread over training "
                "seeds, which is far larger."]
    return out + [""]


#: the training sets each Ratio check compares
RATIO_ROWS = {"ratio<0": ("synthetic", "original"), "ratio_expected<0": ("synthetic", "original")}


def apply_mask_neutral(checks: Sequence[Mapping[str, Any]], probe: Mapping[str, Any] | None
                       ) -> list[dict]:
    """``checks`` with verdict "mask not neutral" (and a ``reason`` with the measured Ratio_E)
    on the Ratio claims whose training sets miss the mask-neutrality precondition
    (:func:`mask_neutral_rows`); other checks unchanged."""
    bad = {r["dataset"]: r for r in mask_neutral_rows(probe) if not r["met"]}
    out = []
    for c in checks:
        rows = next((v for k, v in RATIO_ROWS.items() if c["id"].endswith(k)), ())
        if rows and c.get("rows"):   # a declared Ratio claim compares its own rows
            rows = tuple(c["rows"])
        miss = [bad[d] for d in rows if d in bad]
        if miss:
            lo, hi = miss[0]["bounds"]

            def said(r):
                if r.get("measure") == "mask_effect":
                    c = r.get("context") or {}
                    return (f"{r['dataset']}'s mask effect is {_f2(r.get('mask_effect'))} "
                            f"without context and {_f2(c.get('mask_effect'))} in context")
                return f"{r['dataset']}'s Ratio_E on masked context-free images is " \
                       f"{r['ratio_expected']:.2f}"
            out.append({**c, "verdict": "mask not neutral",
                        "reason": "; ".join(said(r) for r in miss)
                                  + f", outside [{lo:g}, {hi:g}] (metrics/probe.json "
                                    "mask_neutral): the mask itself reads as one gender"})
        else:
            out.append(dict(c))
    return out


#: verdicts that :func:`explain` judges from the interval (the others carry their own reason)
JUDGED = ("holds", "fails", "inconclusive")


def _fmt(v: Any) -> str:
    return "–" if v is None else f"{float(v):+.3g}"


def _no_variance(c: Mapping[str, Any]) -> bool:
    """True when the check's 95 % CI has zero width: every seed of the compared rows reads
    the same value (``stats.difference`` / ``stats.summarize`` give [m, m] then)."""
    lo, hi = c.get("lo"), c.get("hi")
    if lo is None or hi is None:
        return False
    lo, hi = float(lo), float(hi)
    return abs(hi - lo) <= 1e-12 * max(1.0, abs(lo), abs(hi))


def _reason(c: Mapping[str, Any]) -> str:
    """Why an interval verdict (:data:`JUDGED`) is what it is, in words with its numbers."""
    lo, hi, ref, v, e = c.get("lo"), c.get("hi"), float(c["reference"]), c["verdict"], \
        c["expect"]
    if lo is None or hi is None:
        return (f"no interval: fewer than 2 seeds with a finite value (n = {c.get('n')}), or an "
                f"infinite seed")
    ci = f"the 95 % CI [{_fmt(lo)}, {_fmt(hi)}]"
    if e == "≈":
        return f"{ci} {'covers' if v == 'holds' else 'excludes'} {ref:g}"
    if e in ("≥", "≤"):
        side, other = ("above", "a decrease") if e == "≥" else ("below", "an increase")
        beyond = f" beyond {ref:g}" if ref else ""
        if v == "holds":
            return (f"{ci} reaches {ref:g} or {side}: no evidence of {other}{beyond} (a "
                    f"one-sided claim, which a run with wide intervals also passes; width "
                    f"{float(hi) - float(lo):.3g})")
        return f"{ci} lies entirely on the wrong side of {ref:g}: {other}{beyond} is shown"
    if v == "holds":
        return f"{ci} lies entirely {'above' if e == '>' else 'below'} {ref:g}"
    if v == "fails":
        return (f"{ci} lies at or {'below' if e == '>' else 'above'} {ref:g}, against the "
                f"claim")
    return f"{ci} contains {ref:g}: the run cannot decide the direction" + _seeds_needed(c)


def _seeds_needed(c: Mapping[str, Any]) -> str:
    """Why an interval cannot decide ("or says why not"): the seeds per row that
    would put an effect of the observed size ``|mean - reference|`` at the CI's edge, with the
    spread unchanged: n' = ceil(n (half-width / effect)^2) (a normal approximation; it
    ignores the t quantile's shrinking, so it errs low for n' near n). "" without the
    numbers or for an effect of 0."""
    try:
        mean, lo, hi, n = (float(c["mean"]), float(c["lo"]), float(c["hi"]), int(c["n"]))
    except (KeyError, TypeError, ValueError):
        return ""
    effect = abs(mean - float(c["reference"]))
    hw = (hi - lo) / 2
    if not (effect > 0 and hw > 0 and n > 0 and math.isfinite(hw)):
        return ""
    need = math.ceil(n * (hw / effect) ** 2)
    return (f" (half-width {hw:.3g} against an observed {effect:.3g}: at this spread "
            f"about {need} seeds per row, not {n}, would decide an effect of this size)")


def explain(checks: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Every check with a ``reason`` and a ``source``, and no empty verdict:

    * a check judged from its interval whose measure has no variance (zero-width CI: every
      seed of the compared rows gives the same value, e.g. a Table 3 Δ that is 0 for every
      model because the inpainting changed no gender call) reads **"not informative"**: the
      data cannot move the measure, so no outcome of the comparison is evidence;
    * every other interval verdict gets the reason in words (:func:`_reason`), one-sided
      ("not below" / "not above") passes saying that they are absence of evidence;
    * verdicts set earlier ("not testable", "metric not valid on this data", "mask not
      neutral") keep their reasons.

    Apply last, after :func:`apply_controls` and :func:`apply_mask_neutral`. Returns new dicts.
    """
    out = []
    for c in checks:
        c = {**c, "source": c.get("source") or "unknown"}
        judged = c["verdict"]
        if c["verdict"] in JUDGED and _no_variance(c):
            what = ("Table 3's Δ is the same in every seed of both rows"
                    if "delta" in c["id"] else "every seed of the compared rows gives the same "
                                                "value")
            c.update(verdict="not informative",
                     reason=f"no variance: {what} (the CI is the single value "
                            f"{_fmt(c.get('mean'))}, n = {c.get('n')}); the data cannot move "
                            f"this measure, so the comparison is no evidence either way"
                            + (" (a Δ of 0 means the inpainting changed no gender call: the "
                               "counterfactual left the gender cue intact)"
                               if "delta" in c["id"] and c.get("mean") == 0 else ""))
        elif c["verdict"] in JUDGED:
            c["reason"] = _reason(c)
        if c.get("control") and (c["verdict"] in JUDGED or c["verdict"] == "not informative"):
            c = _with_control(c, judged)
        if c.get("domain") and c["verdict"] in JUDGED:
            c = {**c, "reason": f"{c.get('reason', '')}; "
                                f"{_domain_words(c['domain'], c['verdict'])}"}
        out.append(c)
    return out


def _domain_words(d: Mapping[str, Any], verdict: str) -> str:
    """The real-vs-generated domain check beside a Leakage check of ``verdict``:
    whether S_synthetic's Leakage is read inside its training domain."""
    g = d["gap"]
    probe = (f"; a logistic regression on the frozen features tells real from generated at "
             f"AUC {_fmt(d['probe_auc'])} (50 = alike)" if d.get("probe_auc") is not None
             else "")
    head = (f"domain check: S_synthetic's object mAP on generated minus real photos of the "
            f"same unseen scenes is {_fmt(g['mean'])} [{_fmt(g['lo'])}, {_fmt(g['hi'])}] "
            f"(n = {g['n']}){probe}")
    against = verdict != "holds"
    if d.get("verdict") == "holds":
        return (f"{head}: S_synthetic is scored outside its training domain"
                + (", so its Leakage can go against the paper through the domain gap rather "
                   "than through gender" if against else
                   "; its Leakage is lower all the same"))
    gap = ("S_synthetic does better on real photos than on generated ones" if
           d.get("verdict") == "fails" else "no domain gap is shown")
    return (f"{head}: {gap}, so " + ("the domain does not explain this outcome" if against
                                     else "the Leakage is read inside its training domain"))


def _with_control(c: dict, judged: str) -> dict:
    """A Table 3 check beside its positive control (``c["control"]``: per row the Δ with the
    same parts filled from the other group, so the gender cue can change; ``judged``: the
    verdict from the interval alone). The control moved when its CI lies above 0 in some row.

    * Δ with no variance (every seed the same, e.g. 0: "not informative" so far): a control
      that moved makes the zero meaningful (the test can move a call, the same-group parts
      moved none), so the interval verdict stands; a control that did not move leaves it
      "not informative", now with that reason;
    * Δ with variance: the verdict stands; the reason gives the control's Δ beside the
      same-group Δ, and says when the other group's parts moved calls no more than the
      same group's (the parts carry no gender cue these models read: on the synthetic
      default heads and hands are drawn alike for both groups)."""
    ctl = c["control"]
    shown = "; ".join(f"{row} {_fmt(v['mean'])}" + (f" [{_fmt(v['lo'])}, {_fmt(v['hi'])}]"
                                                      if v.get("lo") is not None else "")
                      for row, v in ctl.items() if v.get("mean") is not None)
    moved = any(v.get("lo") is not None and v["lo"] > 0 for v in ctl.values())
    if c["verdict"] == "not informative":
        if moved:
            return {**c, "verdict": judged,
                    "reason": f"Δ is {_fmt(c.get('mean'))} in every seed, and the positive "
                              f"control (the same parts filled from the other group) moves "
                              f"it: {shown}; so the test can move a call and the same-group "
                              f"parts moved none"}
        return {**c, "reason": f"{c['reason']}; the positive control does not move either "
                               f"(the same parts filled from the other group: Δ {shown}): "
                               f"the test cannot change a gender call on this data"}
    same = c.get("same") or {}
    more = any(v.get("mean") is not None and same.get(row) is not None
               and v["mean"] > same[row] for row, v in ctl.items())
    tail = ("" if more else ": no more than with the same group's parts, so these parts carry "
                            "no gender cue the models read and Δ measures appearance changes only")
    return {**c, "reason": f"{c.get('reason', '')}; positive control (the same parts filled "
                           f"from the other group): Δ {shown}{tail}"}


def summary(checks: Sequence[Mapping[str, Any]]) -> dict:
    """``{"holds": k, "fails": k, "inconclusive": k, "not_testable": k,
    "metric_not_valid_on_this_data": k, "mask_not_neutral": k, "not_informative": k, "n": k}``
    (a verdict's spaces become ``_``)."""
    out = {"holds": 0, "fails": 0, "inconclusive": 0, "not_testable": 0,
           "metric_not_valid_on_this_data": 0, "mask_not_neutral": 0, "not_informative": 0}
    for c in checks:
        k = c["verdict"].replace(" ", "_")
        out[k] = out.get(k, 0) + 1
    out["n"] = len(checks)
    return out


def markdown(checks: Sequence[Mapping[str, Any]], digits: int = 3) -> str:
    """The validity section: one row per check (claim, measured effect [95 % CI], n, verdict)."""
    lines = ["| check | expected | measured [95 % CI] | n | verdict | from |",
             "|---|---|---|---|---|---|"]
    for c in checks:
        m = c.get("mean")
        meas = "–" if m is None else f"{m:+.{digits}f}" + (
            f" [{c['lo']:+.{digits}f}, {c['hi']:+.{digits}f}]" if c.get("lo") is not None else "")
        exp = {">": f"> {c['reference']:g}", "<": f"< {c['reference']:g}",
               "≈": f"≈ {c['reference']:g}", "≥": f"not < {c['reference']:g}",
               "≤": f"not > {c['reference']:g}"}[c["expect"]]
        one_sided = " (one-sided)" if c["expect"] in ("≥", "≤") and c["verdict"] == "holds" \
            else ""
        src = os.path.basename(str(c.get("source") or "")) or "–"
        lines.append(f"| {c['claim']} | {exp} | {meas} | {c.get('n')} | "
                     f"**{c['verdict']}**{one_sided} | {src} |")
    # the interval verdicts' reasons are the CI column itself; the others are spelled out
    reasons = [c for c in checks if c.get("reason") and c["verdict"] not in JUDGED]
    if reasons:
        lines.append("")
        lines += [f"{c['verdict'].capitalize()}: {c['claim']}: {c['reason']}." for c in reasons]
    return "\n".join(lines)


__all__ = ["ATTRIBUTES", "LABELED", "MATCHED", "NEUTRAL_RANGE", "mask_neutral_rows",
           "apply_mask_neutral", "declared_checks", "mask_neutral_markdown", "probe_checks", "ratio_testable", "table_checks", "summary",
           "markdown", "control_preconditions", "apply_controls", "precondition_rows", "explain",
           "JUDGED"]
