"""Dataset variants: composition counts of S_augment / S_synthetic, resampling balance."""
import pandas as pd
import pytest

from biaslab import datasets as D


def _d():
    rows = [  # 4 female with umbrella, 1 male with umbrella, 2 male with tie
        ("1", 1, "f1.jpg", "female", ["A woman with an umbrella"], ["umbrella"]),
        ("2", 2, "f2.jpg", "female", ["A girl and her umbrella"], ["umbrella"]),
        ("3", 3, "f3.jpg", "female", ["A lady"], ["umbrella"]),
        ("4", 4, "f4.jpg", "female", ["A woman"], ["umbrella"]),
        ("5", 5, "m5.jpg", "male", ["A man with an umbrella"], ["umbrella"]),
        ("6", 6, "m6.jpg", "male", ["A man in a tie"], ["tie"]),
        ("7", 7, "m7.jpg", "male", ["A boy"], ["tie"]),
    ]
    df = pd.DataFrame(rows, columns=D.MANIFEST_COLUMNS[:-1])
    df["counterfactual"] = False
    return df


def _selected(ids):
    return pd.DataFrame([{"image_id": i, "group": g, "j": 0, "path": f"cf{i}{g}.jpg"}
                         for i in ids for g in ("female", "male")])


def test_s_augment_and_s_synthetic_composition():
    d = _d()
    cf = D.counterfactuals(_selected([1, 5, 6]), d)
    assert len(cf) == 6
    row = cf[(cf.image_id == 1) & (cf.gender == "male")].iloc[0]
    assert row.captions == ["A man with an umbrella"] and row.objects == ["umbrella"]
    aug = D.s_augment(d, cf)
    # D (7) + one counterfactual per source image for the other group (3)
    assert len(aug) == 10 and aug["counterfactual"].sum() == 3
    assert set(aug[aug.counterfactual].gender) == {"male", "female"}
    assert set(zip(aug[aug.counterfactual].image_id, aug[aug.counterfactual].gender)) == {
        (1, "male"), (5, "female"), (6, "female")}
    syn = D.s_synthetic(cf)
    assert len(syn) == 6 and syn.counterfactual.all()
    c = D.cooccurrence(syn)
    assert c["objects"] == {"tie": [1, 1], "umbrella": [2, 2]}
    assert c["objects_mean_abs_skew"] == 0.0


def test_oversample_balances_each_object():
    d = _d()
    over = D.oversample(d, seed=0)
    c = D.cooccurrence(over)["objects"]
    assert c["umbrella"][0] == c["umbrella"][1] == 4   # the one male umbrella image x4
    assert c["tie"] == [0, 2]                           # never with a woman: cannot balance
    assert len(over) == 7 + 3
    assert over["sample_id"].is_unique
    pd.testing.assert_frame_equal(over, D.oversample(d, seed=0))


def test_subsample_balances_each_object():
    sub = D.subsample(_d(), seed=0)
    c = D.cooccurrence(sub)["objects"]
    assert c.get("umbrella") == [1, 1]
    assert "tie" not in c                               # all tie images are dropped
    assert len(sub) == 2


def test_cooccurrence_with_hidden_attribute():
    d = _d()
    att = pd.DataFrame({"image_id": range(1, 8), "cast": ["warm"] * 4 + ["cool"] * 3})
    c = D.cooccurrence(d, att)
    assert c["cast"] == {"cool": [0, 3], "warm": [4, 0]}
    assert c["cast_mean_abs_skew"] == pytest.approx(1.0)
