"""biaslab.analysis.equivalence: hand-computed verdicts at their boundaries (two one-sided tests,
"no practical effect", non-inferiority), the 90 % interval from a stored 95 % one, range clipping,
and the module's docstring examples."""
import pytest

from biaslab.analysis import equivalence
from biaslab.runtime import stats


# Equivalence decisions (equivalence.decide): hand-computed boundaries, margin 1 about 0 unless said.
@pytest.mark.parametrize("expect,ci95,ci90,delta,want", [
    ("<", (-3.0, -0.5), (-2.5, -0.8), 1.0, "holds"),
    ("<", (-3.0, 0.0), (-2.5, -0.2), 1.0, "inconclusive"),       # reaching 0 is not below
    ("<", (0.0, 2.0), (0.2, 1.8), 1.0, "fails"),                 # at 0 or above: against
    ("<", (-0.9, 0.9), (-0.7, 0.7), 1.0, "no practical effect"),
    ("<", (-0.9, -0.1), (-0.8, -0.2), 1.0, "no practical effect"),   # real but negligible
    ("<", (-1.0, 0.9), (-1.0, 0.7), 1.0, "inconclusive"),        # 90 % CI touches -1
    ("<", (-0.9, 0.9), (-0.7, 0.7), None, "inconclusive"),       # no margin: direction only
    (">", (0.5, 3.0), (0.8, 2.5), 1.0, "holds"),
    ("≈", (-1.2, 0.5), (-0.99, 0.4), 1.0, "holds"),
    ("≈", (-1.2, 0.5), (-1.0, 0.4), 1.0, "inconclusive"),
    ("≈", (1.01, 2.0), (1.2, 1.9), 1.0, "fails"),
    ("≈", (1.0, 2.0), (1.2, 1.9), 1.0, "inconclusive"),          # the 95 % CI reaches +1
    ("≥", (-1.2, 0.5), (-0.99, 0.4), 1.0, "holds"),
    ("≥", (-1.2, 0.5), (-1.0, 0.4), 1.0, "inconclusive"),
    ("≥", (-3.0, -1.01), (-2.8, -1.2), 1.0, "fails"),
    ("≥", (-0.5, 0.5), (-0.4, 0.4), None, "inconclusive"),       # no margin: 0 is the bound
    ("≥", (0.1, 0.5), (0.2, 0.4), None, "holds"),
    ("≤", (-0.5, 1.2), (-0.4, 0.99), 1.0, "holds"),
    ("≤", (1.01, 2.0), (1.1, 1.9), 1.0, "fails"),
    ("<", (None, None), (None, None), 1.0, "inconclusive"),
])
def test_decide_hand_computed(expect, ci95, ci90, delta, want):
    assert equivalence.decide(expect, 0.0, delta, ci95, ci90) == want


def test_decide_reads_the_95_interval_when_no_90_is_given_and_checks_its_input():
    # the 95 % CI (-0.9, 0.9) lies inside +-1 on its own
    assert equivalence.decide("≈", 0.0, 1.0, (-0.9, 0.9)) == "holds"
    assert equivalence.decide("≈", 5.0, 1.0, (4.5, 5.5), (4.6, 5.4)) == "holds"   # about 5
    with pytest.raises(ValueError):
        equivalence.decide("≈", 0.0, None, (-1, 1))
    with pytest.raises(ValueError):
        equivalence.decide("<", 0.0, -0.1, (-1, 1))
    with pytest.raises(ValueError):
        equivalence.decide("=", 0.0, 0.1, (-1, 1))


def test_narrower_is_the_normal_ratio_and_never_narrower_than_the_t_interval():
    lo, hi = equivalence.narrower(2.0, 0.0, 5.0)
    k = 1.6448536269514722 / 1.959963984540054
    assert lo == pytest.approx(2.0 - 2.0 * k) and hi == pytest.approx(2.0 + 3.0 * k)
    for n in (2, 3, 5, 10, 100):
        s95 = stats.summarize(list(range(n)))
        s90 = stats.summarize(list(range(n)), equivalence.EQUIVALENCE_LEVEL)
        lo, hi = equivalence.narrower(s95["mean"], s95["lo"], s95["hi"])
        assert lo <= s90["lo"] + 1e-12 and hi >= s90["hi"] - 1e-12
    assert equivalence.narrower(None, 0.0, 1.0) == (None, None)


def test_clip_interval_to_the_metric_range():
    assert equivalence.clip_interval(88.5, 102.7, (0.0, 100.0)) == (88.5, 100.0)
    assert equivalence.clip_interval(-121.0, 143.0, (-100.0, 100.0)) == (-100.0, 100.0)
    assert equivalence.clip_interval(1.0, 2.0, None) == (1.0, 2.0)
    assert equivalence.clip_interval(None, 2.0, (0.0, 1.0)) == (None, 1.0)

