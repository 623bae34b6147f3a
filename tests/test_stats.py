"""biaslab.runtime.stats: hand-computed seed summaries, Welch differences, bootstrap, cells, verdicts."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from biaslab.runtime import stats


def test_summarize_hand_computed():
    s = stats.summarize([1.0, 2.0, 3.0])
    # mean 2, sample std 1, t_{0.975,2} = 4.302652729911275
    assert s["mean"] == 2.0 and s["std"] == pytest.approx(1.0)
    assert s["ci95"] == pytest.approx(4.302652729911275 / math.sqrt(3), rel=1e-9)
    assert s["lo"] == pytest.approx(2 - s["ci95"]) and s["hi"] == pytest.approx(2 + s["ci95"])
    assert (s["n"], s["n_total"], s["n_missing"], s["n_inf"]) == (3, 3, 0, 0)


def test_summarize_one_value_has_no_interval():
    s = stats.summarize([5.0])
    assert s["mean"] == 5.0 and s["std"] is None and s["ci95"] is None
    assert stats.format_cell(s) == "5.0"


def test_infinite_seed_is_counted_never_dropped():
    s = stats.summarize([2.0, math.inf, 3.0])
    assert s["mean"] is None and s["n_inf"] == 1 and s["n"] == 3 and s["sign"] == 1
    assert stats.format_cell(s) == "∞ (1/3 seeds)"
    assert s["values"] == [2.0, None, 3.0]


def test_missing_seed_is_counted_and_shown():
    s = stats.summarize([2.0, None, 4.0, float("nan")])
    assert s["mean"] == 3.0 and s["n"] == 2 and s["n_missing"] == 2 and s["n_total"] == 4
    assert stats.format_cell(s).endswith("(2 missing)")


def test_summarize_rejects_text():
    with pytest.raises(ValueError, match="not a number"):
        stats.summarize([1.0, "abc"])


def test_difference_welch_hand_computed():
    # a = [1,2,3] (mean 2, var 1), b = [4,6] (mean 5, var 2): se^2 = 1/3 + 1 = 4/3
    d = stats.difference([1, 2, 3], [4, 6])
    assert d["diff"] == pytest.approx(-3.0)
    va, vb = 1 / 3, 1.0
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 1)
    from scipy import stats as st_
    hw = st_.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert d["ci95"] == pytest.approx(hw)
    ref = st_.ttest_ind([1, 2, 3], [4, 6], equal_var=False)
    assert d["p"] == pytest.approx(ref.pvalue)


def test_difference_undefined_with_infinity_or_one_value():
    assert stats.difference([1, math.inf], [1, 2])["diff"] is None
    d = stats.difference([1.0], [2.0, 3.0])
    assert d["diff"] == pytest.approx(-1.5) and d["ci95"] is None


def test_bootstrap_mean_covers_and_is_deterministic():
    x = np.arange(100, dtype=float)
    a = stats.bootstrap(np.mean, x, seed=3)
    b = stats.bootstrap(np.mean, x, seed=3)
    assert a == b and a["mean"] == pytest.approx(49.5) and a["lo"] < 49.5 < a["hi"]
    # the standard error of the mean is 29.0 / 10: the 95 % half-width is about 1.96 * 2.9
    assert 4.0 < a["ci95"] < 7.5


def test_bootstrap_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="different lengths"):
        stats.bootstrap(lambda a, b: 0.0, np.zeros(3), np.zeros(4))


@pytest.mark.parametrize("lo,hi,expect,value,out", [
    (0.1, 0.5, ">", 0, "holds"), (-0.1, 0.5, ">", 0, "inconclusive"),
    (-0.5, -0.1, ">", 0, "fails"), (-0.5, -0.1, "<", 0, "holds"),
    (0.9, 1.2, "≈", 1, "holds"), (1.1, 1.2, "≈", 1, "fails"), (None, 1, ">", 0, "inconclusive"),
])
def test_verdict(lo, hi, expect, value, out):
    assert stats.verdict(lo, hi, expect, value) == out


def test_format_difference():
    assert stats.format_difference({"diff": 1.0, "lo": -0.5, "hi": 2.5}) == "+1.0 [-0.5, +2.5]"
    assert stats.format_difference({"diff": None}) == "–"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=12))
def test_ci_contains_mean_and_matches_numpy(xs):
    s = stats.summarize(xs)
    assert s["mean"] == pytest.approx(float(np.mean(xs)), abs=1e-6)
    assert s["std"] == pytest.approx(float(np.std(xs, ddof=1)), rel=1e-6, abs=1e-6)
    assert s["lo"] <= s["mean"] <= s["hi"]


def test_record_is_the_stored_subset():
    r = stats.record([1.0, 2.0, 3.0])
    assert set(r) == {"mean", "ci95", "std", "n", "n_inf", "n_missing", "sign"}
    assert r["mean"] == 2.0 and stats.format_cell(r) == "2.0 ± 2.5"
    assert stats.format_cell(stats.record([1.0, math.inf])) == "∞ (1/2 seeds)"


def test_to_json_round_trips_infinity_through_summarize():
    vals = [stats.to_json(v) for v in (1.23456789, math.inf, float("nan"), None, -math.inf)]
    assert vals == [1.234568, "inf", None, None, "-inf"]
    s = stats.summarize(vals)
    assert s["n_inf"] == 2 and s["n_missing"] == 2 and s["sign"] == 0


def test_difference_of_records_equals_difference_of_values():
    """dvc exp show drops per-seed lists: the Welch CI from two records (mean, sample std, n)
    is the one from the values; infinite seeds make it undefined, as for values."""
    a, b = [30.0, 32.0, 34.0], [10.0, 12.0, 14.0, 11.0]
    want = stats.difference(a, b)
    got = stats.difference_of_records(stats.record(a), stats.record(b))
    for k in ("diff", "ci95", "lo", "hi", "p", "n", "n_ref"):
        assert got[k] == pytest.approx(want[k]), k
    inf = stats.difference_of_records(stats.record([1.0, float("inf")]), stats.record(b))
    assert inf["diff"] is None and inf["n"] == 2
    one = stats.difference_of_records(stats.record([5.0]), stats.record(b))
    assert one["diff"] == pytest.approx(5.0 - 11.75) and one["ci95"] is None

