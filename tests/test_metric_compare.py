""""which captioning metric sees the planted bias" from hand-built controls
records (biaslab.report.metric_compare), and the controls stage's ``controls.attackers``."""
import math

import pytest
from scipy.stats import t

from biaslab.report import metric_compare as MC

T2 = float(t.ppf(0.975, 2))     # 3 replicates


def _m(mean, ci=0.0, n=3):
    return {"mean": mean, "ci95": ci, "n": n}


def _rec(mean, ci, verdict):
    return {"measured": _m(mean, ci), "verdict": verdict}


def test_weighted_slope_exact_points_by_hand():
    sl = MC.weighted_slope([(0.0, _m(0.0)), (0.5, _m(1.0)), (1.0, _m(2.0))])
    assert sl["slope"] == pytest.approx(2.0) and sl["ci95"] == 0.0 and sl["df"] is None


def test_weighted_slope_ci_by_hand():
    # two doses 0 and 1, se = ci95 / t_{0.975,2} = 1 each: slope 1, Var = 1 + 1, df = 4
    sl = MC.weighted_slope([(0.0, _m(0.0, T2)), (1.0, _m(1.0, T2))])
    assert sl["slope"] == pytest.approx(1.0)
    assert sl["df"] == pytest.approx(4.0)
    assert sl["ci95"] == pytest.approx(float(t.ppf(0.975, 4)) * math.sqrt(2.0))
    assert MC.weighted_slope([(0.5, _m(1.0)), (0.5, _m(2.0))]) is None   # one dose only


def _controls(amp1, amp05, human, oracle, mde, key="LIC", extra=None):
    cap = {"amplifier@1": {key: amp1}, "amplifier@0.5": {key: amp05}, "human": {key: human},
           "person_oracle": {key: oracle}}
    for c, v in (extra or {}).items():
        cap[c].update(v)
    return {"captioner": cap, "attackers": ["lstm"],
            "power": {"captioner": {key: {"mde": mde}}}}


def test_amplification_response_and_the_run_table_by_hand():
    c = _controls(_rec(2.0, 0.0, "matches"), _rec(1.0, 0.0, "matches"),
                  _rec(0.0, 0.0, "matches"), _rec(0.0, 0.0, "matches"), mde=0.5)
    r = MC.amplification_response(c, "LIC")
    # slope 2 per unit q; one MDE (0.5) is q = 0.25
    assert r["slope"]["slope"] == pytest.approx(2.0)
    assert r["q_detectable"] == pytest.approx(0.25)
    assert r["amplifiers"] == {"matches": 2, "does not match": 0, "inconclusive": 0, "n": 2}
    md = MC.run_markdown(c)
    # records without a paired difference (older controls files): no Δ cell
    assert "| LIC (thesis Eq. 2.11) | lstm | 4 | 0 | 0 | – | 0.00 ± 0.00 | " \
        "2.000 ± 0.000 | 0.25 [0.25, 0.25] |" in md
    # paired with the oracle (judge_paired): the slope runs through 0 at q = 0 and the
    # differences, whatever the oracle's own value; the Δ column shows the strongest's
    pc = _controls({**_rec(12.0, 5.0, "matches"), "paired": _m(2.0, 0.0)},
                   {**_rec(11.0, 5.0, "matches"), "paired": _m(1.0, 0.0)},
                   _rec(0.0, 0.0, "matches"), _rec(10.0, 5.0, "matches"), mde=0.5)
    rp = MC.amplification_response(pc, "LIC")
    assert rp["slope"]["slope"] == pytest.approx(2.0) and rp["slope"]["ci95"] == 0.0
    assert "| 2.00 ± 0.00 | 0.00 ± 0.00 | 2.000 ± 0.000 |" in MC.run_markdown(pc)
    # noisy ends (se 0.1 each, q = 0 and 1; weights -1, 0, 1): slope 2 ± t_{0.975,4} * 0.1414,
    # q detectable 0.5 / 2 with the interval 0.5 / (slope's upper, lower bound)
    # (q = 0 is the person oracle, the amplifier's base captions; the human control's spread
    # does not enter the slope)
    noisy = _controls(_rec(2.0, 0.1 * T2, "matches"), _rec(1.0, 0.0, "matches"),
                      _rec(0.0, 5.0, "matches"), _rec(0.0, 0.1 * T2, "matches"), mde=0.5)
    r2 = MC.amplification_response(noisy, "LIC")
    h = float(t.ppf(0.975, 4)) * math.sqrt(0.02)
    assert r2["slope"]["ci95"] == pytest.approx(h)
    assert r2["q_detectable"] == pytest.approx(0.25)
    assert r2["q_detectable_ci"] == [pytest.approx(0.5 / (2 + h)), pytest.approx(0.5 / (2 - h))]
    # a metric whose slope's CI reaches 0 is "not seen": no detectable q
    flat = _controls(_rec(0.1, 1.0, "inconclusive"), _rec(0.0, 1.0, "inconclusive"),
                     _rec(0.0, 1.0, "matches"), _rec(0.0, 1.0, "matches"), mde=0.5)
    assert MC.amplification_response(flat, "LIC")["q_detectable"] is None
    assert "| not seen |" in MC.run_markdown(flat)


def test_extra_encoders_are_rows_after_their_metric():
    c = _controls(_rec(2.0, 0.0, "matches"), _rec(1.0, 0.0, "matches"),
                  _rec(0.0, 0.0, "matches"), _rec(0.0, 0.0, "matches"), mde=0.5,
                  extra={"amplifier@1": {"LIC@bert_pre": _rec(4.0, 0.0, "matches")},
                         "amplifier@0.5": {"LIC@bert_pre": _rec(2.0, 0.0, "matches")},
                         "person_oracle": {"LIC@bert_pre": _rec(0.0, 0.0, "matches")}})
    c["attackers"] = ["lstm", "bert_pre"]
    assert MC.metric_keys(c) == [("LIC", "LIC (thesis Eq. 2.11)", "lstm"),
                                 ("LIC@bert_pre", "LIC (thesis Eq. 2.11)", "bert_pre")]
    comp = MC.sweep_comparison({0.0: c, 0.9: c})
    (sp,) = comp["spread"]
    assert sp["slopes"] == {"lstm": pytest.approx(2.0), "bert_pre": pytest.approx(4.0)}
    assert sp["range"] == pytest.approx(2.0)
    assert "| LIC (thesis Eq. 2.11) | lstm 2.000 ± 0.000, bert_pre 4.000 ± 0.000 | 2.000 |" \
        in MC.sweep_markdown(comp)


def test_sweep_comparison_counts_and_detection_by_hand():
    # b = 0: q = 0.5 inconclusive, q = 1 matches; b = 0.9: both match; the oracle is a false
    # alarm at b = 0.9. LIC_D (person_oracle) 10 +- 1 at b = 0, 12 +- 1 at 0.5 (overlaps),
    # 20 +- 1 at 0.9 (above): the smallest b seen is 0.9.
    def run(amp05_verdict, oracle, lic_d):
        c = _controls(_rec(2.0, 0.0, "matches"), _rec(1.0, 0.0, amp05_verdict),
                      _rec(0.0, 0.0, "matches"), oracle, mde=1.0)
        c["captioner"]["person_oracle"]["LIC_D"] = {"measured": _m(lic_d, 1.0)}
        return c
    runs = {0.0: run("inconclusive", _rec(0.0, 0.0, "matches"), 10.0),
            0.5: run("matches", _rec(0.0, 0.0, "matches"), 12.0),
            0.9: run("matches", _rec(0.5, 0.1, "does not match"), 20.0)}
    comp = MC.sweep_comparison(runs)
    (a,) = comp["amplification"]
    assert a["sign"] == {"matches": 5, "wrong": 0, "n": 6}
    assert a["nulls"] == {"false_alarms": 1, "n": 6}
    assert a["q_min_detected"] == 1.0          # q = 0.5 is not seen at b = 0
    # q = 0 is the oracle: at b = 0.9 its 0.5 gives the points (0, 0.5), (0.5, 1), (1, 2),
    # least-squares slope 1.5; the others 2
    assert a["slope"]["mean"] == pytest.approx((2.0 + 2.0 + 1.5) / 3) and a["slope"]["n"] == 3
    assert a["q_detectable"]["mean"] == pytest.approx((0.5 + 0.5 + 1 / 1.5) / 3)   # MDE 1 / slope
    (d,) = comp["dataset"]
    assert d["key"] == "LIC_D" and d["b_min_detected"] == 0.9
    # least squares over b = 0, 0.5, 0.9 of 10, 12, 20
    xs, ys = [0.0, 0.5, 0.9], [10.0, 12.0, 20.0]
    xb, yb = sum(xs) / 3, sum(ys) / 3
    want = sum((x - xb) * (y - yb) for x, y in zip(xs, ys)) / sum((x - xb) ** 2 for x in xs)
    assert d["slope"]["slope"] == pytest.approx(want)
    md = MC.sweep_markdown(comp)
    assert "| LIC (thesis Eq. 2.11) | lstm | 1.833 ± 0.717 | 5 / 6 | 0 | 1 / 6 | 1 |" in md
    assert "| LIC_D (LIC's data leakage, %) | lstm |" in md and "| 0.9 |" in md


def _stage():
    """stage controls' checks live in the library (a thin stage)"""
    from biaslab.analysis import controls_eval
    return controls_eval


@pytest.mark.parametrize("value, words", [
    ("bert_pre", "must be a list"), (["gpt2"], "unknown name(s) ['gpt2']"),
    (["bert_pre", "bert_pre"], "names repeat"), (["lstm"], "include lic.classifier")])
def test_controls_attackers_are_checked(value, words):
    with pytest.raises(ValueError, match=r"^controls\.attackers: ") as e:
        _stage().check_attackers(value, "lstm")
    assert words in str(e.value)


def test_controls_attackers_accepts_other_encoders():
    st = _stage()
    assert st.check_attackers(None, "lstm") == [] and st.check_attackers([], "lstm") == []
    assert st.check_attackers(["bert_pre", "bert_ft"], "lstm") == ["bert_pre", "bert_ft"]
