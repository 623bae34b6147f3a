"""Dataset variants: composition counts of S_augment / S_synthetic, resampling balance."""
import numpy as np
import pandas as pd
import pytest

from biaslab.data import datasets as D


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


def _six():
    """F1, F2 with an umbrella, F3 with a tie; M1, M2 with a tie, M3 with an umbrella."""
    rows = [(str(i), i, f"{i}.jpg", g, ["x"], [o]) for i, (g, o) in enumerate(
        [("female", "umbrella"), ("female", "umbrella"), ("female", "tie"),
         ("male", "tie"), ("male", "tie"), ("male", "umbrella")], start=1)]
    df = pd.DataFrame(rows, columns=D.MANIFEST_COLUMNS[:-1])
    df["counterfactual"] = False
    return df


def _copies(m):
    return m.groupby("image_id").size().reindex(range(1, 7), fill_value=0).tolist()


def test_oversample_hand_computed_exact_balance():
    # umbrella: c1 + c2 = c6 >= 2 and tie: c3 = c4 + c5 >= 2 (every c >= 1); the fewest
    # samples are all ones but c3 = c6 = 2: 8 samples, 4 per gender, skew 0 for both objects
    over = D.oversample(_six(), max_skew=0.0)
    assert _copies(over) == [1, 1, 2, 1, 1, 2]
    c = D.cooccurrence(over)
    assert c["objects"] == {"tie": [2, 2], "umbrella": [2, 2]}
    assert (c["n_female"], c["n_male"], c["objects_mean_abs_skew"]) == (4, 4, 0.0)
    assert over["sample_id"].is_unique and c["max_repeats"] == 2 and c["n_images"] == 6
    # the spread of the copies [1, 1, 2, 1, 1, 2]: median 1, 2 repeated,
    # the top image 2 / 8 of the samples, Kish's effective size 8^2 / (4 * 1 + 2 * 4) = 16 / 3
    assert (c["repeats_median"], c["n_repeated"], c["max_repeats_share"]) == (1.0, 2, 0.25)
    assert c["effective_images"] == pytest.approx(16 / 3)
    assert c["repeats_p90"] == pytest.approx(2.0)
    assert over.attrs["max_skew"] == 0.0
    pd.testing.assert_frame_equal(over, D.oversample(_six(), max_skew=0.0))


def test_oversample_cap_relaxes_the_bound():
    # max_copies=1 leaves the original: umbrella 2 vs 1 and tie 1 vs 2 -> |skew| = 1/3 each;
    # the bound is relaxed (bisection, 1e-3) to the smallest feasible one, just above 1/3
    over = D.oversample(_six(), max_skew=0.0, max_copies=1)
    assert _copies(over) == [1] * 6
    assert 1 / 3 <= over.attrs["max_skew"] <= 1 / 3 + 1e-3
    assert D.cooccurrence(over)["objects_mean_abs_skew"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="max_copies"):
        D.oversample(_six(), max_copies=0)
    with pytest.raises(ValueError, match="max_skew"):
        D.oversample(_six(), max_skew=1.0)
    # unequal groups that no copy count within the cap can equalise
    with pytest.raises(ValueError, match="max_copies=1"):
        D.oversample(_six().iloc[:5], max_copies=1)


def test_subsample_hand_computed_exact_balance():
    # binary keep: umbrella k1 + k2 = k6 <= 1, tie k3 = k4 + k5 <= 1 -> at most 4 images:
    # one of F1/F2, M3, F3 and one of M1/M2
    for seed in range(3):
        sub = D.subsample(_six(), seed=seed, max_skew=0.0)
        k = _copies(sub)
        assert len(sub) == 4 and k[0] + k[1] == 1 and k[2] == 1 and k[3] + k[4] == 1
        assert k[5] == 1
        c = D.cooccurrence(sub)
        assert c["objects"] == {"tie": [1, 1], "umbrella": [1, 1]}
        assert c["objects_mean_abs_skew"] == 0.0 and c["n_female"] == c["n_male"] == 2
        pd.testing.assert_frame_equal(sub, D.subsample(_six(), seed=seed, max_skew=0.0))
    # min_fraction=1 keeps all 6: the bound is relaxed to just above 1/3
    full = D.subsample(_six(), max_skew=0.0, min_fraction=1.0)
    assert len(full) == 6 and 1 / 3 <= full.attrs["max_skew"] <= 1 / 3 + 1e-3
    with pytest.raises(ValueError, match="min_fraction"):
        D.subsample(_six(), min_fraction=0)


def test_resampling_one_gender_object():
    # _d(): F1-F4 and M5 hold an umbrella, M6 and M7 a tie (men only). Over-sampling keeps
    # every image: n_f = n_m forces F = c5 + c6 + c7 = c5 + 2 (F = female copies, all with an
    # umbrella), so the umbrella skew is (F - c5) / (F + c5) = 2 / (2 c5 + 2) <= 0.2 ->
    # c5 >= 4, F = 6: 12 samples, umbrella [6, 4] (skew 0.2), the tie stays at [0, 2] (skew 1)
    over = D.oversample(_d(), max_skew=0.2, max_copies=None)
    c = D.cooccurrence(over)
    assert c["objects"] == {"tie": [0, 2], "umbrella": [6, 4]} and len(over) == 12
    assert (c["n_female"], c["n_male"], c["n_objects_one_gender"]) == (6, 6, 1)
    assert c["objects_mean_abs_skew"] == pytest.approx((0.2 + 1) / 2)
    assert c["objects_max_abs_skew"] == pytest.approx(1.0)
    # exact balance needs c6 + c7 = 0: infeasible, the bound is relaxed. With max_factor 15
    # the size 2 c5 + 4 <= 105 -> c5 <= 50.5 in the LP -> smallest bound 2 / 103 (bisection:
    # within 1e-3); rounding gives c5 = 50: 104 samples, reached skew 2 / 102
    over = D.oversample(_d(), max_skew=0.0, max_copies=None, max_factor=15)
    assert 2 / 103 <= over.attrs["max_skew"] <= 2 / 103 + 1e-3 and len(over) == 104
    assert D.cooccurrence(over)["objects"]["umbrella"] == [52, 50]
    with pytest.raises(ValueError, match="max_factor"):
        D.oversample(_d(), max_factor=0.5)
    # sub-sampling drops the tie images (an object seen with one gender must vanish) and keeps
    # one female umbrella image for M5
    sub = D.subsample(_d(), max_skew=0.0)
    assert D.cooccurrence(sub)["objects"] == {"umbrella": [1, 1]} and len(sub) == 2


def test_resampling_reaches_the_bound_on_strongly_biased_multilabel_data():
    rng = np.random.default_rng(0)
    rows = []
    for i in range(200):
        g = "female" if i % 2 else "male"
        objs = [o for o, fav in [("a", "female"), ("b", "female"), ("c", "male"), ("d", "male")]
                if rng.random() < (0.63 if fav == g else 0.07)]
        rows.append((str(i), i, f"{i}.jpg", g, ["x"], objs))
    d = pd.DataFrame(rows, columns=D.MANIFEST_COLUMNS[:-1])
    d["counterfactual"] = False
    before = D.cooccurrence(d)["objects_max_abs_skew"]
    # sub-sampling's integer programme meets the bound exactly; over-sampling's LP meets it and
    # its rounding (each image within one copy) may exceed it by a few copies' worth
    for m, slack in ((D.oversample(d, max_skew=0.05, max_copies=None), 0.01),
                     (D.subsample(d, max_skew=0.05), 1e-12)):
        c = D.cooccurrence(m)
        assert m.attrs["max_skew"] == 0.05 and before > 0.5
        assert c["objects_max_abs_skew"] <= 0.05 + slack and c["n_female"] == c["n_male"]
        assert c["objects_mean_abs_skew"] <= 0.05 + slack
    over = D.oversample(d, max_skew=0.05, max_copies=None)
    assert over.groupby("image_id").size().min() == 1 and over["image_id"].nunique() == 200
    # the cap: no image more than 20 times, the bound relaxed to what the cap
    # allows, which is the trade-off curve's value at 20; uncapped the top image repeats more
    capped = D.oversample(d, max_skew=0.05)
    reps = capped.groupby("image_id").size()
    assert reps.max() <= 20 < over.groupby("image_id").size().max()
    assert capped.attrs["max_skew"] > 0.05
    curve = {r["max_copies"]: r for r in D.oversample_tradeoff(d, caps=(1, 20, None))}
    assert curve[20]["max_skew"] == pytest.approx(capped.attrs["max_skew"], abs=1e-3)  # bisection
    assert curve[None]["max_skew"] == 0.0 or curve[None]["max_skew"] <= 0.05
    # a tighter cap never allows a tighter bound; 1 copy each = the original's own skew
    assert curve[1]["max_skew"] >= curve[20]["max_skew"] >= curve[None]["max_skew"]
    assert curve[1]["max_skew"] == pytest.approx(before, abs=1e-3)
    c = D.cooccurrence(capped)
    # rounding moves each image by < 1 copy: the reached skew stays near the LP's bound
    assert c["objects_max_abs_skew"] <= capped.attrs["max_skew"] + 0.02
    assert c["n_female"] == c["n_male"]


def test_round_counts_keeps_groups_equal_and_within_one_copy():
    codes = np.array([0, 0, 0, 1, 1])   # female = 0, male = 1
    c = np.array([1.5, 2.25, 1.25, 2.5, 2.5])  # both groups 5.0
    r = D._round_counts(c, codes, 2, seed=0)
    assert r[:3].sum() == r[3:].sum() == 5
    assert (np.floor(c) <= r).all() and (r <= np.ceil(c)).all()
    # the largest fractional part of the female group gets the extra copy
    assert r[:3].tolist() == [2, 2, 1]


def test_same_sources():
    d = _d()
    sel = pd.concat([_selected([1, 6]), _selected([5]).iloc[:1]])  # image 5: female only
    cf = D.counterfactuals(sel, d)
    d2, cf2 = D.same_sources(d, cf)
    assert d2["image_id"].tolist() == [1, 6] and sorted(set(cf2["image_id"])) == [1, 6]
    assert len(cf2) == 4


def test_cooccurrence_with_hidden_attribute():
    d = _d()
    att = pd.DataFrame({"image_id": range(1, 8), "cast": ["warm"] * 4 + ["cool"] * 3})
    c = D.cooccurrence(d, att)
    assert c["cast"] == {"cool": [0, 3], "warm": [4, 0]}
    assert c["cast_mean_abs_skew"] == pytest.approx(1.0)
