"""Control models (biaslab.analysis.controls): closed forms checked by hand on small tables
written here (independent of biaslab.data.synthetic's generator), determinism, the verdict rule,
and the validity preconditions they feed."""
import math

import numpy as np
import pandas as pd
import pytest

from biaslab.analysis import controls as K
from biaslab.analysis import verdicts
from biaslab.classify import evaluate_outputs, object_matrix
from biaslab.runtime import stats


def _table(rows):
    return pd.DataFrame(rows, columns=["image_id", "gender", "scene", "cast", "objects"])


# four hand-made images: (id, gender, scene, cast, objects)
HAND = _table([
    (1, "female", "kitchen", "warm", ["handbag"]),        # all female evidence
    (2, "male", "kitchen", "cool", ["tie"]),               # d=+1, scene -1, cast +1: w_obj > 0
    (3, "male", "beach", "warm", []),                      # all female evidence: misread
    (4, "female", "street", "warm", ["dog"]),              # scene +1, cast -1: a tie
])


def test_evidence_weights_by_hand():
    assert K.evidence_weights(0.0) == (0.0, 0.0)
    w_obj, w_ctx = K.evidence_weights(0.5, p_object=0.35)
    assert w_ctx == pytest.approx(math.log(3.0))
    # present term log 3 plus the absent term log((1 - 0.175) / (1 - 0.525))
    assert w_obj == pytest.approx(math.log(3.0) + math.log(0.825 / 0.475))
    assert K.evidence_weights(1.0) == (math.inf, math.inf)
    with pytest.raises(ValueError):
        K.evidence_weights(1.5)


def test_context_llr_and_decision_by_hand():
    w_obj, w_ctx = K.evidence_weights(0.5)
    llr = K.context_llr(HAND, 0.5)
    assert llr == pytest.approx([-w_obj - 2 * w_ctx, w_obj, -2 * w_ctx, 0.0])
    assert list(K.context_gender(llr)) == ["female", "male", "female", ""]
    # a reader of the cast alone
    assert list(K.context_gender(K.context_llr(HAND, 0.5, ("cast",)))) == \
        ["female", "male", "female", "female"]
    assert np.all(K.context_llr(HAND, 0.0) == 0)
    with pytest.raises(ValueError):
        K.context_llr(HAND, 0.5, ("hair",))


def test_classifier_controls_outputs_by_hand():
    labels = ["dog", "handbag", "tie"]
    o = K.classifier_outputs("person_oracle", HAND, labels)
    assert o["probs"].shape == (4, 5)
    assert o["probs"][:, :3].tolist() == [[0, 1, 0], [0, 0, 1], [0, 0, 0], [1, 0, 0]]
    assert o["probs"][:, 4].tolist() == [0, 1, 1, 0]            # P(man) = the true gender
    assert np.all(o["probs_masked"][:, 3:] == 0.5)               # no person: no evidence
    c = K.classifier_outputs("context_reader", HAND, labels, bias=0.5)
    assert c["probs"][:, 4].tolist() == [0, 1, 0, 0.5]
    assert c["probs"][:, 3].tolist() == [1, 0, 1, 0.5]
    assert np.array_equal(c["probs_masked"], c["probs"])
    k = K.classifier_outputs("constant_man", HAND, labels)
    assert k["probs"][:, 3:].tolist() == [[0, 1]] * 4
    a = K.classifier_outputs("amplifier", HAND, labels, q=1.0,
                             stereotypes={"female": "handbag", "male": "tie"})
    assert a["probs"][:, :3].tolist() == [[0, 1, 0], [0, 0, 1], [0, 0, 1], [1, 1, 0]]
    with pytest.raises(ValueError):
        K.classifier_outputs("context_reader", HAND, labels)       # no bias
    with pytest.raises(ValueError):
        K.classifier_outputs("oracle", HAND, labels)


def test_expected_classifier_values_by_hand():
    e = K.expected_classifier("context_reader", HAND, bias=0.5)
    # decisions f, m, f, tie(-> "woman" in the gender decision): image 3 (male) is wrong
    assert e["Error"]["value"] == pytest.approx(25.0)
    # masked: n_man = 1 + the tie, n_woman = 2 + the tie -> r = 2/3, Ratio = 1.5
    assert e["Ratio"]["value"] == pytest.approx(1.5)
    # expected counts: P(man) = 0, 1, 0, .5 -> 1.5 / 2.5
    assert e["Ratio_E"]["value"] == pytest.approx(2.5 / 1.5)
    # masked AUC: men score P(man) 1, 0; women 0, 0.5 -> of the 4 (man, woman) pairs 2 above,
    # 1 tie, 1 below: (2 + 0.5) / 4 = 62.5
    assert e["masked_AUC"]["value"] == pytest.approx(62.5)
    assert K.expected_classifier("person_oracle", HAND)["masked_AUC"]["value"] == 50.0
    k = K.expected_classifier("constant_man", HAND)
    assert k["masked_AUC"]["value"] == 50.0
    assert k["Error"]["value"] == 50.0 and math.isinf(k["Ratio"]["value"])
    assert "BiasAmp" not in k
    amp = K.expected_classifier("amplifier", HAND, q=0.5)
    assert amp["Leakage"] == {"direction": ">", "reference": 0.0}


def _balanced(n_per: int, seed: int):
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(2 * n_per):
        g = "female" if k % 2 == 0 else "male"
        objs = [o for o in ("dog", "handbag", "tie", "cup") if rng.random() < 0.4] or ["dog"]
        rows.append((k + 1, g, "kitchen", "warm", objs))
    return _table(rows)


def test_oracle_through_the_classifier_metric_code_gives_the_known_answers():
    labels = ["cup", "dog", "handbag", "tie"]
    test, train = _balanced(30, 0), _balanced(40, 1)
    o = K.classifier_outputs("person_oracle", test, labels)
    ot = K.classifier_outputs("person_oracle", train, labels)
    r = evaluate_outputs(o["probs"], object_matrix(list(test["objects"]), labels),
                         np.ones(len(test), bool), list(test["gender"]), o["probs_masked"],
                         n_objects=4, train_probs=ot["probs"],
                         train_objects=object_matrix(list(train["objects"]), labels),
                         train_genders=list(train["gender"]),
                         leakage_kwargs={"rounds": 2, "seed": 0})
    assert r["mAP"] == pytest.approx(100.0)
    assert r["gender_acc"] == 100.0
    assert r["ratio"] == 1.0 and r["ratio_expected"] == 1.0
    assert r["leakage"] == 0.0            # LK_M = LK_D: the same inputs, paired attackers


def test_captioner_controls_are_deterministic_and_say_what_they_should():
    st = {"female": "handbag", "male": "tie"}
    a = K.captioner_captions("person_oracle", HAND, seed=3)
    assert a == K.captioner_captions("person_oracle", HAND, seed=3)
    assert a != K.captioner_captions("person_oracle", HAND, seed=4)
    from biaslab.metrics.captions import caption_label
    assert [caption_label(c) for c in a.values()] == ["woman", "man", "man", "woman"]
    c = K.captioner_captions("context_reader", HAND, bias=0.5)
    assert [caption_label(x) for x in c.values()] == ["woman", "man", "woman", "neutral"]
    k = K.captioner_captions("constant_man", HAND)
    assert {caption_label(x) for x in k.values()} == {"man"}
    amp = K.captioner_captions("amplifier", HAND, q=1.0, stereotypes=st)
    assert all(("purse" in x or "handbag" in x) for i, x in amp.items() if i in (1, 4))
    # the amplifier is the oracle's caption plus " with a <stereotype>", nothing else
    oracle = K.captioner_captions("person_oracle", HAND, seed=0)
    assert all(amp[i].startswith(oracle[i].rstrip(". ") + " with a") for i in amp)
    half = K.captioner_captions("amplifier", HAND, q=0.5, stereotypes=st, seed=3)
    assert all(half[i] == a[i] or half[i].startswith(a[i].rstrip(". ") + " with a")
               for i in half)
    assert K.captioner_captions("amplifier", HAND, q=0.0, stereotypes=st, seed=3) == a
    h = K.captioner_captions("human", HAND, human={i: [f"c{i}a", f"c{i}b"] for i in range(1, 5)})
    assert all(h[i] in (f"c{i}a", f"c{i}b") for i in range(1, 5))
    e = K.expected_captioner("context_reader", HAND, bias=0.5)
    assert e["Error"]["value"] == pytest.approx(25.0)      # image 3 called "woman"
    assert e["Ratio"]["value"] == pytest.approx(2.0)        # 1 man, 2 woman, 1 neutral


def test_stereotype_object_is_the_largest_share_difference():
    objs = [["cup"], ["cup"], ["tie"], ["tie", "dog"]]   # male: tie 1 - 0, dog 0.5 - 0
    g = ["female", "female", "male", "male"]
    assert K.stereotype_objects(objs, g, ["cup", "dog", "tie"]) == {"female": "cup",
                                                                    "male": "tie"}
    with pytest.raises(ValueError):
        K.stereotype_objects(objs, ["female"] * 4, ["cup"])


@pytest.mark.parametrize("expected,measured,lo,hi,want", [
    ({"value": 1.0}, 1.0, None, None, "matches"),
    ({"value": 1.0}, 1.01, None, None, "does not match"),
    ({"value": math.inf}, math.inf, None, None, "matches"),
    ({"value": 0.0}, None, None, None, "does not match"),
    ({"direction": ">", "reference": 0.0}, 2.0, 0.5, 3.5, "matches"),
    ({"direction": ">", "reference": 0.0}, 0.5, -1.0, 2.0, "inconclusive"),
    ({"direction": ">", "reference": 0.0}, -2.0, -3.0, -1.0, "does not match"),
    # "≈" without a margin: a CI that covers the reference is no evidence of equality
    ({"direction": "≈", "reference": 0.0}, 0.5, -1.0, 2.0, "inconclusive"),
    ({"direction": "≈", "reference": 0.0}, 2.0, 1.0, 3.0, "inconclusive"),
])
def test_verdict_rule(expected, measured, lo, hi, want):
    assert K.verdict(expected, measured, lo, hi) == want


@pytest.mark.parametrize("ci95,ci90,delta,want", [
    ((-0.9, 0.9), (-0.7, 0.7), 1.0, "matches"),          # 90 % CI inside +-1
    ((-1.3, 1.3), (-1.0, 1.0), 1.0, "inconclusive"),     # touches the bound: not inside
    ((1.1, 3.0), (1.3, 2.8), 1.0, "does not match"),     # 95 % CI wholly beyond +1
    ((0.5, 1.5), (0.6, 1.4), 1.0, "inconclusive"),
])
def test_equivalence_verdict_of_a_control(ci95, ci90, delta, want):
    e = {"direction": "≈", "reference": 0.0}
    m = (ci95[0] + ci95[1]) / 2
    assert K.verdict(e, m, *ci95, delta=delta, ci90=ci90) == want


def test_decide_equivalence_takes_the_margin_from_the_strongest_amplifier():
    from biaslab.analysis.controls_eval import decide_equivalence
    rec = lambda m, sd, n=3: {"mean": m, "std": sd, "n": n,  # noqa: E731
                              "ci95": stats.t_halfwidth(sd, n)}
    task = {
        "person_oracle": {"LIC": {"expected": {"direction": "≈", "reference": 0.0},
                                  "measured": rec(0.1, 0.2), "verdict": "matches"}},
        "amplifier@0.5": {"LIC": {"expected": {"direction": ">", "reference": 0.0},
                                  "paired": rec(4.0, 1.0), "measured": rec(4.1, 1.0),
                                  "verdict": "matches"}},
        "amplifier@1": {"LIC": {"expected": {"direction": ">", "reference": 0.0},
                                "paired": rec(10.0, 1.0), "measured": rec(10.1, 1.0),
                                "verdict": "matches"}},
        "human": {"LIC": {"expected": {"direction": "≈", "reference": 0.0},
                          "measured": rec(0.5, 2.0), "verdict": "matches"}}}
    out = decide_equivalence(task, 0.1)
    o = out["person_oracle"]["LIC"]
    # margin 0.1 x 10 (amplifier@1's paired effect) = 1; 90 % t CI: 0.1 +- 2.919986 x 0.2 /
    # sqrt(3) = [-0.237, 0.437], inside (-1, 1)
    assert o["margin"]["delta"] == pytest.approx(1.0) and o["verdict"] == "matches"
    assert "amplifier@1" in o["margin"]["basis"]
    # human: 0.5 +- 2.919986 x 2 / sqrt(3) = [-2.87, 3.87]: neither inside nor outside
    assert out["human"]["LIC"]["verdict"] == "inconclusive"
    assert out["amplifier@1"]["LIC"] == task["amplifier@1"]["LIC"]    # directions unchanged
    # no amplifier: no margin, no equality shown
    alone = decide_equivalence({"person_oracle": task["person_oracle"]}, 0.1)
    assert alone["person_oracle"]["LIC"]["verdict"] == "inconclusive"
    assert alone["person_oracle"]["LIC"]["margin"] is None


def test_an_unresolved_control_leaves_its_metric_unvalidated():
    checks = [{"id": "captioner/libra-original/lic<0", "claim": "x", "verdict": "holds"}]
    ctl = {"captioner": {"human": {"LIC": {"verdict": "inconclusive"}},
                         "person_oracle": {"LIC": {"verdict": "matches"}}}}
    out = verdicts.apply_controls(checks, ctl)
    assert out[0]["verdict"] == "metric not valid on this data"
    assert "cannot resolve" in out[0]["reason"] and "human" in out[0]["reason"]
    rows = verdicts.precondition_rows(ctl)
    assert rows == [{"task": "captioner", "metric": "LIC", "valid": False, "not_matching": [],
                     "inconclusive": ["human"]}]


def test_a_claim_on_a_metric_whose_control_misses_is_not_judged():
    checks = [{"id": "classifier/original/cast>0", "claim": "x", "verdict": "holds"},
              {"id": "classifier/synthetic-original/ratio<0", "claim": "y",
               "verdict": "fails"},
              {"id": "classifier/synthetic-original/delta≤0", "claim": "z",
               "verdict": "fails"}]
    ok = {"classifier": {"context_reader": {"Ratio": {"verdict": "matches"}}},
          "probe": {"context_reader[cast]": {"cast": {"verdict": "matches"}}}}
    assert [c["verdict"] for c in verdicts.apply_controls(checks, ok)] == \
        ["holds", "fails", "fails"]
    bad = {"classifier": {"context_reader": {"Ratio": {"verdict": "does not match"}}},
           "probe": {"context_reader[cast]": {"cast": {"verdict": "does not match"}}}}
    out = verdicts.apply_controls(checks, bad)
    assert [c["verdict"] for c in out] == ["metric not valid on this data"] * 2 + ["fails"]
    assert "context_reader[cast]/cast" in out[0]["reason"]
    assert verdicts.summary(out)["metric_not_valid_on_this_data"] == 2
    rows = verdicts.precondition_rows(bad)
    assert {(r["task"], r["metric"], r["valid"]) for r in rows} == \
        {("classifier", "Ratio", False), ("probe", "probe", False)}


def _ctl_exp(name, bias, ratio, error, lic_mean, lic_ci):
    """A `dvc exp show --json` record of a controls-only experiment (biaslab.analysis.sweep)."""
    meas = lambda m, ci=0.0: {"mean": m, "ci95": ci, "n": 3, "n_inf": 0}  # noqa: E731
    return {"name": name, "data": {
        "params": {"params.yaml": {"data": {"synthetic": {"bias": bias},
                                            "data": {"source": "synthetic"}}}},
        "metrics": {
            # a stale baseline file: must never become a trained-model point of this bias
            "metrics/classification.json": {"data": {"original": {
                "Leakage": {"mean": 9.0, "ci95": 1.0, "n": 3}}}},
            "metrics/controls.json": {"data": {
                "classifier": {"context_reader": {
                    "Ratio": {"expected": {"value": ratio}, "measured": meas(ratio)},
                    "Error": {"expected": {"value": error}, "measured": meas(error)}}},
                "captioner": {"amplifier@1": {
                    "LIC": {"expected": {"direction": ">", "reference": 0},
                            "measured": meas(lic_mean, lic_ci)}}},
                "probe": {"context_reader[cast]": {"cast": {
                    "expected": {"value": 2.0}, "measured": {"mean": 2.0, "n_pairs": 100}}}}}}}}}


def test_controls_sweep_points_response_and_section():
    from biaslab.analysis import sweep
    show = [{"experiments": [{"revs": [_ctl_exp("ctl-b0", 0.0, 1.0, 50.0, 1.0, 20.0),
                                       _ctl_exp("ctl-b0.9", 0.9, 1.0, 2.5, 5.0, 20.0)]}]}]
    assert sweep.sweep_points(show) == []          # controls-only runs are no trained points
    pts = sweep.control_points(show)
    assert {(p["task"], p["control"], p["metric"]) for p in pts} == {
        ("classifier", "context_reader", "Ratio"), ("classifier", "context_reader", "Error"),
        ("captioner", "amplifier@1", "LIC"), ("probe", "context_reader[cast]", "cast")}
    resp = {(r["task"], r["metric"]): r["verdict"] for r in sweep.control_response(pts)}
    # hand: Ratio 1.0 -> 1.0 exact: flat; Error 50 -> 2.5: falls; LIC 1 -> 5 with CI 20: flat
    assert resp == {("classifier", "Ratio"): "flat", ("classifier", "Error"): "falls",
                    ("captioner", "LIC"): "flat", ("probe", "cast"): "flat"}
    md = sweep.control_markdown(pts)
    assert "### Ratio (classifier, persons masked)" in md
    assert "| context_reader | 1.00 ± 0.00 | 1.00 ± 0.00 |" in md
    assert "Cannot see the planted bias on this data (context reader flat from the smallest " \
        "to the largest b): classifier Ratio." in md


def test_stereotype_direction_follows_the_test_sets_own_association():
    st = {"female": "handbag", "male": "tie"}
    # HAND: handbag only on image 1 (female), tie only on image 2 (male): both associated
    assert K.stereotype_direction(HAND, st) == ">"
    swapped = HAND.assign(gender=["male", "female", "female", "male"])
    assert K.stereotype_direction(swapped, st) == "<"
    assert K.stereotype_direction(HAND, {"female": "handbag", "male": "cup"}) is None
    e = K.expected_classifier("amplifier", swapped, q=1.0, stereotypes=st)
    assert e["DBA_O"] == {"direction": "<", "reference": 0.0}
    assert e["Leakage"] == {"direction": ">", "reference": 0.0}
    # a context reader that misgenders has no BiasAmp expectation; one that does not: 0
    assert "BiasAmp" not in K.expected_classifier("context_reader", HAND, bias=0.5)
    right = HAND.iloc[[0, 1]]
    assert K.expected_classifier("context_reader", right, bias=0.5)["BiasAmp"]["value"] == 0


def test_no_gender_word_at_all_is_the_expected_0_over_0():
    e = K.expected_captioner("context_reader", HAND, bias=0.0)
    assert math.isnan(e["Ratio"]["value"])          # every caption gender-neutral
    assert K.verdict(e["Ratio"], None) == "matches"
    assert K.verdict(e["Ratio"], 1.0) == "does not match"


def test_biasamp_direction_ignores_base_rates_as_zhao_defines_it():
    # 6 men, 2 women; the women's stereotype "cup" is on both women and on 3 of 6 men: it is
    # associated with women (P(woman, cup) = 2/8 > P(woman) P(cup) = 2/8 * 5/8), but Zhao's
    # b(woman, cup) = 2/5 < 1/2 (base rates ignored): "<" for cup, ">" for tie -> mixed
    rows = [(k, "male", "kitchen", "warm", ["cup"] if k < 3 else ["tie"]) for k in range(6)]
    rows += [(6, "female", "kitchen", "warm", ["cup"]), (7, "female", "kitchen", "warm", ["cup"])]
    t = _table(rows)
    st = {"female": "cup", "male": "tie"}
    assert K.stereotype_direction(t, st, "dba") == ">"
    assert K.stereotype_direction(t, st, "biasamp") is None     # cup "<", tie ">": mixed
    e = K.expected_classifier("amplifier", t, q=1.0, stereotypes=st)
    assert e["DBA_O"]["direction"] == ">" and "BiasAmp" not in e
    with pytest.raises(ValueError):
        K.stereotype_direction(t, st, "zhao")


def test_grammar_controls_make_no_human_like_claim_on_real_data():
    e = K.expected_captioner("person_oracle", HAND, grammar_is_human=False)
    assert "LIC" not in e and "BiasAmp" not in e and e["Error"]["value"] == 0
    assert K.expected_captioner("human", HAND, grammar_is_human=False)["LIC"]["direction"] == "≈"


def test_caption_biasamp_is_judged_against_the_human_captions_null_not_0():
    # the default's human control read -6.45 +- 4.20 and was called "does not match" against 0
    e = K.expected_captioner("human", HAND, biasamp_null=-6.1)
    assert e["BiasAmp"] == {"direction": "≈", "reference": -6.1}
    # an equivalence claim: without a margin a wide CI over the null shows nothing
    assert K.verdict(e["BiasAmp"], -6.45, -10.65, -2.25) == "inconclusive"
    assert K.verdict(e["BiasAmp"], -6.45, -7.0, -5.9, delta=1.0, ci90=(-6.9, -6.0)) == "matches"
    assert K.verdict(e["BiasAmp"], -0.5, -1.0, 0.0, delta=1.0) == "does not match"
    assert e["LIC"]["reference"] == 0.0 and e["DBA_O"]["reference"] == 0.0
    # the amplifier: paired with the oracle whose captions it extends, on any data
    st = {"female": "handbag", "male": "tie"}
    for human_like in (True, False):
        amp = K.expected_captioner("amplifier", HAND, q=1.0, biasamp_null=-6.1,
                                   stereotypes=st, grammar_is_human=human_like)
        for k in ("BiasAmp", "LIC"):
            assert amp[k] == {"direction": ">", "reference": 0.0,
                              "paired_with": "person_oracle"}
    # no null (no human captions): 0, as before
    assert K.expected_captioner("human", HAND)["BiasAmp"]["reference"] == 0.0
    assert K.expected_captioner("human", HAND, biasamp_null=math.nan)["BiasAmp"][
        "reference"] == 0.0


def test_a_paired_control_is_judged_on_its_differences_from_its_base():
    from scipy.stats import t
    from biaslab.analysis.controls_eval import judge_control, judge_paired
    from biaslab.report.controls import control_cells
    # the default's BiasAmp: amplifier@1 vs the oracle, 3 replicates; unpaired the
    # amplifier (-4.97 +- 5.47) cannot be told from the oracle (-5.61 +- 5.29)
    oracle, amp = [-4.91, -3.92, -8.00], [-4.29, -3.19, -7.43]
    e = {"direction": ">", "reference": 0.0, "paired_with": "person_oracle"}
    r = judge_paired(e, amp, oracle)
    d = [0.62, 0.73, 0.57]
    mean, sd = sum(d) / 3, (sum((x - sum(d) / 3) ** 2 for x in d) / 2) ** 0.5
    assert r["paired"]["mean"] == pytest.approx(mean, abs=1e-4)
    assert r["paired"]["ci95"] == pytest.approx(t.ppf(0.975, 2) * sd / 3 ** 0.5, abs=1e-4)
    assert r["measured"]["mean"] == pytest.approx(sum(amp) / 3, abs=1e-4)
    assert r["verdict"] == "matches"
    # the differences decide: an amplifier that adds nothing is "does not match" only when
    # it lies below its base in every replicate by more than the noise
    assert judge_paired(e, oracle, oracle)["verdict"] == "inconclusive"
    assert judge_paired(e, [x - 1 for x in oracle], oracle)["verdict"] == "does not match"
    # a replicate missing on either side is missing
    assert judge_paired(e, [1.0, None, 2.0], [0.0, 0.0, None])["paired"]["n_missing"] == 2
    # judge_control: paired, plain and bare metrics of one control
    raw = {"person_oracle": {"BiasAmp": oracle}}
    out = judge_control({"BiasAmp": e, "LIC": {"direction": "≈", "reference": 0.0}},
                        {"BiasAmp": amp, "LIC": [1.0, -1.0, 0.5], "LIC_M": [1, 2, 3]}, raw)
    assert out["BiasAmp"]["verdict"] == "matches" and "paired" in out["BiasAmp"]
    # "≈" waits for its margin (decide_equivalence, after every control has run)
    assert out["LIC"]["verdict"] == "inconclusive" and "paired" not in out["LIC"]
    assert "verdict" not in out["LIC_M"]
    exp, meas = control_cells(out["BiasAmp"])
    assert exp == "> person_oracle (paired)"
    assert meas.startswith("Δ 0.64 ± 0.") and "(own -4.97 ± " in meas
    assert control_cells({"expected": {"value": 0.0, "rule": "exact"},
                          "measured": {"mean": 0.0, "ci95": 0.0, "n": 3}})[0] == "= 0"
    assert control_cells({"expected": {"direction": "≈", "reference": -5.14678},
                          "measured": {"mean": -6.45, "ci95": 4.2, "n": 3}})[0] == "≈ -5.15"


def test_controls_biasamp_null_reads_the_labelled_test_images_with_captions():
    from biaslab.analysis.controls_eval import biasamp_null
    from biaslab.metrics.biasamp import human_null
    test = pd.DataFrame({"image_id": [1, 2, 3, 4]})
    human = {1: ["a woman in a kitchen", "a man in a kitchen"],
             2: ["a man in a kitchen", "a man in a kitchen"], 3: ["a woman in a kitchen"]}
    genders = {1: "female", 2: "male", 4: "male"}       # 3 unlabelled, 4 has no caption
    train = ["a woman in a kitchen"] * 3 + ["a man in a kitchen"]
    r = biasamp_null(test, human, genders, train, "lic", 1)
    assert r == human_null([human[1], human[2]], train, ["female", "male"], min_count=1)
    assert r["n_images"] == 2 and r["per_index"] == pytest.approx([100 * (0.5 - 0.75),
                                                                   100 * (0.0 - 0.75)])
    assert biasamp_null(test, {}, genders, train, "lic", 1) is None


def test_control_sections_take_the_newest_controls_only_run_per_bias():
    """Two sweeps of ctl-b0 on different commits (an old one first in `exp show` order): both
    control sections read the newer, and a controls-only run beats the workspace."""
    from biaslab.analysis import sweep
    old = _ctl_exp("ctl-b0", 0.0, 1.0, 50.0, 1.0, 20.0)
    new = _ctl_exp("ctl-b0", 0.0, 1.0, 50.0, 7.0, 20.0)
    ws = _ctl_exp(None, 0.0, 1.0, 50.0, 3.0, 20.0)
    old["data"]["timestamp"], new["data"]["timestamp"] = "2026-11-25T10:00:00", \
        "2026-11-27T18:00:00"
    show = [ws, {"experiments": [{"revs": [old]}]}, {"experiments": [{"revs": [new]}]}]
    lic = [p for p in sweep.control_points(show) if p["metric"] == "LIC"]
    assert [p["mean"] for p in lic] == [7.0]
    runs = sweep.control_runs(show)
    assert runs[0.0]["captioner"]["amplifier@1"]["LIC"]["measured"]["mean"] == 7.0


def test_the_controls_read_typed_settings_built_once_from_params():
    """``ControlsSettings.from_params`` gathers what the controls read from seven groups (the
    controls' own defaults live on the class); an unknown ``controls`` key is named."""
    from biaslab.analysis.controls_eval import ControlsSettings
    from biaslab.captioning.table2 import LicSettings
    s = ControlsSettings.from_params({
        "controls": {"q": [0.25], "seeds": [3, 4], "workers": 1},
        "classifier": {"min_cooccur": 7, "cooccur_rule": "any", "leakage_rounds": 2},
        "lic": {"classifier": "lstm", "preset": "ci", "seeds": 2},
        "eval_captioner": {"biasamp_min_count": 9}, "label": {"words": "lic"},
        "data": {"root": "somewhere"}, "validity": {"margin_fraction": 0.2},
        "attribute": "skin"})
    assert (s.q, s.seeds, s.workers, s.n_boot, s.attackers) == ((0.25,), (3, 4), 1, 1000, ())
    assert (s.min_cooccur, s.cooccur_rule, s.leakage_rounds) == (7, "any", 2)
    assert s.lic == LicSettings(seeds=2) and s.eval.biasamp_min_count == 9
    assert (s.root, s.margin_fraction, s.attribute) == ("somewhere", 0.2, "skin")
    bare = ControlsSettings.from_params({})
    assert (bare.q, bare.seeds, bare.workers, bare.eval.gender_source) == (
        (0.5, 1.0), (0, 1, 2), 2, "auto")
    with pytest.raises(ValueError, match=r"controls: unknown key\(s\) \['sedes'\]"):
        ControlsSettings.from_params({"controls": {"sedes": [0, 1]}})
    with pytest.raises(ValueError, match=r"controls: unknown key\(s\) \['min_cooccur'\]"):
        ControlsSettings.from_params({"controls": {"min_cooccur": 3}})   # group classifier's
    with pytest.raises(ValueError, match="lic: unknown key"):
        ControlsSettings.from_params({"lic": {"clasifier": "lstm"}})
