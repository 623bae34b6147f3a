"""The attribute's controls (biaslab.analysis.controls_attribute) on tables
these tests write by hand, independent of biaslab.data.synthetic."""
import numpy as np
import pandas as pd
import pytest

from biaslab.analysis import controls_attribute as CA


def _table(n=120, seed=0, groups=("dark", "light")):
    """n images, one group each (cycled); objects drawn with group-dependent rates."""
    rng = np.random.default_rng(seed)
    rate = {"dark": {"dog": 0.6, "cup": 0.3, "car": 0.4},
            "light": {"dog": 0.2, "cup": 0.3, "car": 0.4}}
    for g in groups:
        rate.setdefault(g, {"dog": 0.4, "cup": 0.5, "car": 0.1})
    rows = []
    for i in range(n):
        g = groups[i % len(groups)]
        objs = [o for o, p in rate[g].items() if rng.random() < p] or ["car"]
        rows.append({"image_id": 1000 * seed + i, "objects": sorted(objs), "labelled": True,
                     "group": g})
    return pd.DataFrame(rows)


def test_stereotype_by_group_by_hand():
    # P(o | g) - P(o | not g) over the grouped images (the None one is ignored): dark: dog
    # 2/2 - 0/2 = 1; light: cup 2/2 - 1/2 = .5, car 1/2 - 0/2 = .5 (tie: label order, car)
    objs = [["dog"], ["dog", "cup"], ["cup"], ["cup", "car"], ["car"]]
    groups = ["dark", "dark", "light", "light", None]
    assert CA.stereotype_by_group(objs, groups, ["car", "cup", "dog"], ["dark", "light"]) == \
        {"dark": "dog", "light": "car"}
    assert CA.stereotype_by_group(objs, groups, ["cup", "dog"], ["dark", "light"]) == \
        {"dark": "dog", "light": "cup"}
    # ties break by label order: one image per group, both have "car" and "dog"
    assert CA.stereotype_by_group([["car", "dog"], []], ["a", "b"], ["car", "dog"],
                                  ["a", "b"])["a"] == "car"
    with pytest.raises(ValueError, match=r"no training image of group\(s\) \['b'\]"):
        CA.stereotype_by_group([["dog"]], ["a"], ["dog"], ["a", "b"])
    with pytest.raises(ValueError, match="outside group 'a'"):
        CA.stereotype_by_group([["dog"]], ["a"], ["dog"], ["a"])
    with pytest.raises(ValueError, match="no object label"):
        CA.stereotype_by_group([["dog"]], ["a"], [], ["a"])


def test_classifier_outputs_by_hand():
    ids, objs, groups = [1, 2, 3], [["dog"], [], ["cup"]], ["dark", "light", None]
    labels = ["cup", "dog"]
    truth = np.array([[0, 1], [0, 0], [1, 0]], np.float32)
    st = {"dark": "cup", "light": "dog"}
    np.testing.assert_array_equal(CA.classifier_outputs("oracle", ids, objs, groups, labels),
                                  truth)
    np.testing.assert_array_equal(CA.classifier_outputs("blind", ids, objs, groups, labels),
                                  np.zeros((3, 2)))
    # q = 1: every grouped image gets its group's stereotype; the ungrouped one is untouched
    np.testing.assert_array_equal(
        CA.classifier_outputs("amplifier", ids, objs, groups, labels, q=1.0, stereotypes=st),
        [[1, 1], [0, 1], [1, 0]])
    np.testing.assert_array_equal(
        CA.classifier_outputs("amplifier", ids, objs, groups, labels, q=0.0, stereotypes=st),
        truth)
    with pytest.raises(ValueError, match="stereotype"):
        CA.classifier_outputs("amplifier", ids, objs, groups, labels, q=0.5)
    with pytest.raises(ValueError, match="q must be in"):
        CA.classifier_outputs("oracle", ids, objs, groups, labels, q=2)
    with pytest.raises(ValueError, match="unknown classifier control"):
        CA.classifier_outputs("human", ids, objs, groups, labels)


def test_amplifier_rate_is_q():
    n = 4000
    out = CA.classifier_outputs("amplifier", range(n), [[]] * n, ["dark"] * n, ["dog"], q=0.3,
                                stereotypes={"dark": "dog"}, seed=1)
    assert abs(out.mean() - 0.3) < 0.03


def test_captioner_captions_by_hand():
    human = {1: ["A man on a bike.", "Someone riding"], 2: ["A dog."], 3: []}
    groups = {1: "dark", 2: "light", 3: "dark"}
    st = {"dark": "apple", "light": "dog"}
    h = CA.captioner_captions("human", [1, 2, 3], groups, human, seed=4)
    assert set(h) == {1, 2} and h[1] in human[1] and h[2] == "A dog."
    assert h[1] == CA.drawn_caption(1, human[1], 4)
    a = CA.captioner_captions("amplifier", [1, 2, 3], groups, human, q=1.0, stereotypes=st,
                              seed=4)
    # the same drawn caption, the group's object appended ("an" before a vowel)
    assert a[1] == h[1].rstrip(" .") + " with an apple." and a[2] == "A dog with a dog."
    with pytest.raises(ValueError, match="unknown captioner control"):
        CA.captioner_captions("blind", [1], groups, human)


def test_expected_answers():
    assert CA.expected_classifier("oracle")["Leakage"] == {"value": 0.0, "rule": "exact"}
    assert CA.expected_classifier("amplifier", 0.0)["Leakage"]["rule"] == "exact"
    assert CA.expected_classifier("amplifier", 0.5)["Leakage"] == {"direction": ">",
                                                                   "reference": 0.0}
    assert CA.expected_classifier("blind", n_groups=4)["LK_M"] == {"direction": "<",
                                                                   "reference": 25.0}
    assert CA.expected_captioner("human")["LIC"]["direction"] == "≈"
    assert CA.expected_captioner("amplifier", 1.0)["LIC"]["direction"] == ">"
    # judged paired with the human control whose drawn caption it extends
    assert CA.expected_captioner("amplifier", 1.0)["LIC"]["paired_with"] == "human"
    assert "paired_with" not in CA.expected_captioner("human")["LIC"]


@pytest.mark.parametrize("groups", [("dark", "light"),
                                    ("female_dark", "female_light", "male_dark", "male_light")])
def test_leakage_controls_give_their_known_answers(groups):
    """Through biaslab.classify.attribute_leakage (the attribute block of eval_classifier):
    the oracle's Leakage is exactly 0, the amplifier's CI lies above 0, the blind control's
    LK_M below 100 / K, for 2 and for 4 groups."""
    test, train = _table(160, 0, groups), _table(240, 1, groups)
    g = {int(i): x for t in (test, train) for i, x in zip(t["image_id"], t["group"])}
    labels = ["car", "cup", "dog"]
    st = CA.stereotype_by_group(list(train["objects"]), list(train["group"]), labels, groups)
    out, raw = CA.classifier_controls(test, train, labels, g, groups, st, [1.0], [0, 1, 2],
                                      rounds=2)
    assert out["oracle"]["Leakage"]["verdict"] == "matches", out["oracle"]
    assert raw["oracle"]["LK_M - LK_D"] == [0.0, 0.0, 0.0]
    assert out["amplifier@1"]["Leakage"]["verdict"] == "matches", out["amplifier@1"]
    assert out["blind"]["LK_M"]["verdict"] == "matches", out["blind"]
    assert max(raw["blind"]["LK_M"]) < 100 / len(groups)
    assert CA.summary(out) == {"matches": 4, "does_not_match": 0, "inconclusive": 0, "n": 4}


def test_verdict_fails_for_a_broken_metric(monkeypatch):
    """The check can fail: a Leakage that ignores the model (LK_M := LK_D + 1) does not match
    the oracle's exact 0."""
    import biaslab.classify as clf

    real = clf.attribute_leakage

    def broken(*a, **k):
        r = real(*a, **k)
        return {**r, "leakage": r["leakage"] + 1.0, "LK_M": r["LK_M"] + 1.0}
    monkeypatch.setattr(clf, "attribute_leakage", broken)
    test, train = _table(80, 0), _table(120, 1)
    g = {int(i): x for t in (test, train) for i, x in zip(t["image_id"], t["group"])}
    out, _ = CA.classifier_controls(test, train, ["car", "cup", "dog"], g, ["dark", "light"],
                                    {"dark": "dog", "light": "cup"}, [], [0, 1], rounds=1)
    assert out["oracle"]["Leakage"]["verdict"] == "does not match"


def test_report_section():
    from biaslab.report.sections import controls_attribute_markdown
    assert controls_attribute_markdown({"attribute": "gender", "skipped": "x"}) == []
    rec = {"attribute": "skin", "groups": ["dark", "light"], "stereotypes": {"dark": "dog"},
           "replicates": [0, 1], "test_set": {"classifier": {"n_labelled_by_group":
                                                             {"dark": 3, "light": 4}}},
           "classifier": {"oracle": {"Leakage": {
               "expected": {"value": 0.0, "rule": "exact"},
               "measured": {"mean": 0.0, "ci95": 0.0, "n": 2}, "verdict": "matches"}}},
           "captioner": {"skipped": "no captions"},
           "summary": {"matches": 1, "n": 1}}
    md = "\n".join(controls_attribute_markdown(rec))
    assert "| classifier | oracle | Leakage | = 0 | 0.00 ± 0.00 | matches |" in md
    assert "skipped: no captions" in md and "dark 3, light 4" in md
