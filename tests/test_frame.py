"""biaslab.metrics.frame: any metric by group (and by intersection, within control levels),
with per-group bootstrap intervals; hand-computed values."""
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score

from biaslab.metrics import captions as MC
from biaslab.metrics.frame import by_group, gaps


def test_group_values_are_the_metric_on_each_groups_rows():
    y_true = [1, 1, 0, 0, 1, 1, 0, 0, 1, 0]
    y_pred = [1, 0, 0, 0, 1, 1, 1, 1, 1, 0]
    g = ["f"] * 4 + ["m"] * 6
    t = by_group(accuracy_score, y_true=y_true, y_pred=y_pred, sensitive=g, n_boot=200)
    # f: 3 of 4 right; m: 4 of 6 right
    assert t.loc["f", "value"] == pytest.approx(0.75)
    assert t.loc["m", "value"] == pytest.approx(4 / 6)
    assert t["n"].tolist() == [4, 6]
    assert t.index.name == "sensitive"
    for _, r in t.iterrows():
        assert r["lo"] <= r["value"] <= r["hi"] and 0 <= r["lo"] and r["hi"] <= 1
    gp = gaps(t).iloc[0]
    assert gp["gap"] == pytest.approx(0.75 - 4 / 6)
    assert (gp["max_group"], gp["min_group"]) == ("f", "m")


def test_intersections_and_control_levels_come_from_several_features():
    gender = ["female", "female", "male", "male"] * 3
    skin = ["dark", "light"] * 6
    split = ["a"] * 8 + ["b"] * 4
    x = list(range(12))
    t = by_group(lambda x: float(np.mean(x)), x=x, n_boot=100,
                 sensitive={"gender": gender, "skin": skin}, control={"split": split})
    assert list(t.index.names) == ["split", "gender", "skin"]
    assert len(t) == 8                                  # 2 splits x 4 groups
    # split a, female dark: rows 0 and 4 -> mean 2
    assert t.loc[("a", "female", "dark"), "value"] == pytest.approx(2.0)
    # split b, male light: row 11 alone -> no interval
    r = t.loc[("b", "male", "light")]
    assert r["value"] == 11.0 and r["n"] == 1 and np.isnan(r["lo"])
    g = gaps(t, control=["split"])
    assert g.loc["a", "gap"] == pytest.approx(5.0 - 2.0)   # male light (3, 7) - female dark (0, 4)
    assert g.loc["a", "max_group"] == ("male", "light")


def test_a_library_metric_by_intersection():
    """Burns et al.'s Error (biaslab.metrics.captions.error) for each gender x skin group: the
    same numbers as calling it on each group's captions."""
    caps = ["a man on a bike", "a woman on a bike", "a person", "a man", "a woman", "a man"]
    gender = ["female", "female", "male", "male", "female", "male"]
    skin = ["dark", "dark", "light", "light", "light", "dark"]

    def err(captions, gender):
        return MC.error(list(captions), list(gender))
    t = by_group(err, captions=caps, gender=gender, n_boot=100,
                 sensitive={"gender": gender, "skin": skin})
    assert t.loc[("female", "dark"), "value"] == pytest.approx(50.0)
    assert t.loc[("male", "light"), "value"] == pytest.approx(0.0)
    assert t.loc[("female", "light"), "value"] == pytest.approx(0.0)
    assert t.loc[("male", "dark"), "value"] == pytest.approx(0.0)


def test_the_bootstrap_is_seeded_and_undefined_resamples_are_counted():
    x = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    a = by_group(lambda x: float(np.mean(x)), x=x, sensitive=["g"] * 6, n_boot=300, seed=3)
    b = by_group(lambda x: float(np.mean(x)), x=x, sensitive=["g"] * 6, n_boot=300, seed=3)
    pd.testing.assert_frame_equal(a, b)
    # a metric undefined when every resampled value is equal
    t = by_group(lambda x: 1.0 / float(np.std(np.asarray(x, float))) if np.std(
        np.asarray(x, float)) else None, x=[0.0, 1.0], sensitive=["g", "g"], n_boot=400)
    assert t.loc["g", "n_undefined"] > 0 and t.loc["g", "value"] == pytest.approx(2.0)


@pytest.mark.parametrize("kw,match", [
    ({"x": [1, 2], "sensitive": ["a"]}, "sensitive has 1 rows"),
    ({"x": [1, 2], "y": [1], "sensitive": ["a", "b"]}, "differ in length"),
    ({"x": [1, 2], "sensitive": ["a", None]}, "missing values"),
    ({"x": [1, 2], "sensitive": ["a", "b"], "n_boot": 10}, "n_boot must be >= 100"),
    ({"sensitive": ["a", "b"]}, "needs the metric's columns"),
    ({"x": [1, 2], "sensitive": {"g": ["a", "b"]}, "control": {"g": ["c", "c"]}},
     "control feature has a sensitive feature's name"),
])
def test_bad_input_is_named(kw, match):
    with pytest.raises(ValueError, match=match):
        by_group(lambda **c: 0.0, **kw)
