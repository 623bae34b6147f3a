"""Dataset variants: composition counts of S_augment / S_synthetic, resampling balance."""
import numpy as np
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


def test_balancing_weights_hand_computed():
    # All female images hold an umbrella, so p(umbrella | male) must be 1 too: the male
    # tie-only images go to weight 0, the male umbrella image carries the male total:
    # 4a = b, mean 1 -> a = 7/8, b = 3.5.
    # raking converges linearly to that fixed point
    assert D.balancing_weights(_d(), iters=5000) == pytest.approx([0.875] * 4 + [3.5, 0, 0],
                                                                  abs=2e-3)
    assert D.balancing_weights(_d()).mean() == pytest.approx(1.0)


def test_oversample_balances_each_object():
    d = _d()
    over = D.oversample(d, seed=0)
    c = D.cooccurrence(over)["objects"]
    # the one male umbrella image is repeated round(w) ~ round(3.47) = 3 times (limit 3.5)
    assert c["umbrella"][0] == 4 and c["umbrella"][1] == 3
    assert c["tie"] == [0, 2]                           # oversampling never drops an image
    assert len(over) == 4 + 3 + 2 and over["sample_id"].is_unique
    pd.testing.assert_frame_equal(over, D.oversample(d, seed=0))
    assert D.oversample(d, max_copies=2)["sample_id"].str.count("#").max() == 1


def test_subsample_balances_each_object():
    for seed in range(5):
        sub = D.subsample(_d(), seed=seed)
        c = D.cooccurrence(sub)["objects"]
        assert c == {"umbrella": [1, 1]}   # 4 x 0.25 -> exactly one female umbrella image
        assert D.cooccurrence(sub)["objects_mean_abs_skew"] == 0.0
    with pytest.raises(ValueError):
        D.subsample(_d(), min_fraction=0)


def test_resampling_stays_bounded_on_strongly_biased_multilabel_data():
    rng = np.random.default_rng(0)
    rows = []
    for i in range(400):
        g = "female" if i % 2 else "male"
        objs = [o for o, fav in [("a", "female"), ("b", "female"), ("c", "male"), ("d", "male")]
                if rng.random() < (0.63 if fav == g else 0.07)]
        rows.append((str(i), i, f"{i}.jpg", g, ["x"], objs))
    d = pd.DataFrame(rows, columns=D.MANIFEST_COLUMNS[:-1])
    d["counterfactual"] = False
    before = D.cooccurrence(d)["objects_mean_abs_skew"]
    over, sub = D.oversample(d), D.subsample(d)
    assert len(d) <= len(over) <= 5 * len(d) and 0.25 * len(d) - 1 <= len(sub) <= len(d)
    # bounded resampling only partly balances strongly correlated multi-label data
    assert D.cooccurrence(over)["objects_mean_abs_skew"] < before
    assert D.cooccurrence(sub)["objects_mean_abs_skew"] < before


def test_cooccurrence_with_hidden_attribute():
    d = _d()
    att = pd.DataFrame({"image_id": range(1, 8), "cast": ["warm"] * 4 + ["cool"] * 3})
    c = D.cooccurrence(d, att)
    assert c["cast"] == {"cool": [0, 3], "warm": [4, 0]}
    assert c["cast_mean_abs_skew"] == pytest.approx(1.0)
