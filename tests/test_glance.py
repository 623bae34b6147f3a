"""The answer-first section of tables.md (biaslab.report.glance), on hand-written records."""
from __future__ import annotations

import pytest

from biaslab.report.glance import bias_direction, mitigation_blocks


@pytest.mark.parametrize("name,orig,lo,hi,want", [
    ("Leakage", 0.4, -11.1, -8.9, "less"),        # lower is less bias, even past 0
    ("Leakage", 0.4, 0.1, 2.0, "more"),
    ("LIC", 8.5, -17.8, 14.0, "undecided"),       # the CI holds no change
    ("Error", 4.3, 7.2, 16.5, "more"),
    ("masked AUC", 95.0, -36.2, -23.8, "less"),   # 95 -> 59..71: closer to 50
    ("masked AUC", 70.0, -50.0, -45.0, "more"),   # 70 -> 20..25: farther from 50
    ("masked AUC", 70.0, -30.0, -10.0, "less"),   # 40..60: at most 10 from 50, not 20
    ("masked AUC", 70.0, -45.0, -10.0, "undecided"),  # 25..60: 25 from 50 at one end
    ("Ratio (classifier)", 1.7, 1.4, 2.3, "more"),
    ("Ratio (classifier)", 1.7, -0.5, -0.1, "less"),   # 1.2..1.6: closer to 1
    ("Ratio (classifier)", 1.7, None, -0.1, "undecided"),
])
def test_which_way_a_difference_moves_bias(name, orig, lo, hi, want):
    d = None if lo is None else (lo + hi) / 2
    assert bias_direction(name, orig, d, lo, hi) == want


def test_a_block_per_mitigation_with_its_ci_n_verdict_and_net_line():
    full = {"original": {"Leakage": {"mean": 0.4, "ci95": 1.1, "n": 5},
                         "Ratio (classifier)": {"mean": 1.7, "n": 5},
                         "LIC": {"mean": 8.5, "n": 3}},
            "synthetic": {"Leakage": {"mean": -9.6, "n": 5, "diff": -10.0, "diff_lo": -11.1,
                                      "diff_hi": -8.9},
                          "Ratio (classifier)": {"mean": 3.5, "n": 5, "diff": 1.8,
                                                 "diff_lo": 1.4, "diff_hi": 2.3},
                          "mAP": {"mean": 71.7, "n": 5, "diff": -1.2, "diff_lo": -2.9,
                                  "diff_hi": 0.4},
                          "LIC": {"mean": 6.6, "n": 3, "diff": -1.9, "diff_lo": -17.8,
                                  "diff_hi": 14.0}}}
    checks = [{"id": "classifier/synthetic-original/leakage<0", "verdict": "holds"},
              {"id": "classifier/synthetic-original/ratio<0", "verdict": "fails"},
              {"id": "classifier/oversample-original/leakage<0", "verdict": "inconclusive"}]
    lines = mitigation_blocks(full, checks, {"original": "Original", "synthetic": "S_synthetic"},
                              {"synthetic": "the counterfactuals only"})
    text = "\n".join(lines)
    assert lines[0] == "## At a glance: each mitigation against Original"
    assert "**S_synthetic**: the counterfactuals only" in text
    assert ("- Classifier (n = 5): Leakage -10.0 [-11.1, -8.9]: less bias; check holds; "
            "Ratio +1.8 [+1.4, +2.3]: more bias; check fails; utility mAP -1.2 [-2.9, +0.4].") \
        in text
    assert "- Captioner (n = 3): LIC -1.9 [-17.8, +14.0]: not decided." in text
    assert "- Net: less bias on Leakage; more bias on Ratio; not decided on LIC." in text
    assert "oversample" not in text
    # nothing to compare: no section
    assert mitigation_blocks({"original": full["original"]}, [], {"original": "Original"}) == []


def test_the_forest_plot_shares_rows_across_panels_and_says_where_a_ci_is_missing(tmp_path):
    from biaslab.report import charts
    full = {"original": {"Leakage": {"mean": 0.4, "n": 5}},
            "synthetic": {"Leakage": {"diff": -10.0, "diff_lo": -11.0, "diff_hi": -8.5, "n": 5},
                          "LIC": {"diff": -2.0, "diff_lo": -18.0, "diff_hi": 14.0, "n": 3}},
            "adversarial": {"Leakage": {"diff": -5.0, "diff_lo": None, "diff_hi": None, "n": 5}}}
    rows = charts.forest_rows(full, {"original": "Original", "adversarial": "Adversarial",
                                     "synthetic": "S_synthetic"})
    assert rows == ["adversarial", "synthetic"]
    lk = charts.forest_layout(full, "Leakage", rows)
    assert lk["notes"] == ["n/a", ""] and lk["diffs"][1] == -10.0
    assert lk["lower"][1] == pytest.approx(1.0) and lk["upper"][1] == pytest.approx(1.5)
    assert lk["n"] == [5]
    lic = charts.forest_layout(full, "LIC", rows)
    assert lic["notes"] == ["", ""] and lic["diffs"][0] != lic["diffs"][0]   # NaN: no LIC row
    charts.forest_plot(tmp_path / "forest.png", full)
    assert (tmp_path / "forest.png").stat().st_size > 1000


def test_a_checks_margin_or_premise_overrides_the_bare_direction():
    from biaslab.report import glance
    full = {"original": {"Leakage": {"mean": 10.0, "ci95": 1.0, "n": 3},
                         "masked AUC": {"mean": 80.0, "ci95": 1.0, "n": 3}},
            "x": {"Leakage": {"mean": 9.9, "ci95": 0.1, "n": 3, "diff": -0.1,
                              "diff_lo": -0.2, "diff_hi": -0.05},
                  "masked AUC": {"mean": 60.0, "ci95": 1.0, "n": 3, "diff": -20.0,
                                 "diff_lo": -22.0, "diff_hi": -18.0}}}
    checks = [{"id": "classifier/x-original/leakage<0", "verdict": "no practical effect"},
              {"id": "classifier/x-original/masked_auc<0", "verdict": "not testable"}]
    text = "\n".join(glance.mitigation_blocks(full, checks, {"x": "X"}))
    assert "Leakage -0.1 [-0.2, -0.1]: a change too small to matter; check no practical " \
           "effect" in text
    assert "masked AUC -20.0 [-22.0, -18.0]: not readable here; check not testable" in text
    assert "Net: no practical effect on Leakage; not readable on masked AUC." in text
