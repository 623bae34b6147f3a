"""The resampling baselines over the protected attribute's groups: skin tone (two
groups), gender x skin tone (four), images without a group left out. Expectations are
hand-computed; the manifests are written here, not by the synthetic generator."""
import numpy as np
import pandas as pd
import pytest

from biaslab.data import datasets as D

GS = ["female_dark", "female_light", "male_dark", "male_light"]


def _four():
    """Ten images, one object each: female_dark dog, bike; female_light dog, dog, bike;
    male_dark bike, bike, dog; male_light dog, bike. Gender is the group's gender part."""
    spec = [("female_dark", "dog"), ("female_dark", "bike"),
            ("female_light", "dog"), ("female_light", "dog"), ("female_light", "bike"),
            ("male_dark", "bike"), ("male_dark", "bike"), ("male_dark", "dog"),
            ("male_light", "dog"), ("male_light", "bike")]
    rows = [(str(i), i, f"{i}.jpg", g.split("_")[0], ["x"], [o], False, g)
            for i, (g, o) in enumerate(spec, start=1)]
    return pd.DataFrame(rows, columns=D.MANIFEST_COLUMNS + ["group"])


def _copies(m, n=10):
    return m.groupby("image_id").size().reindex(range(1, n + 1), fill_value=0).tolist()


def _per_group(m, obj):
    held = m[m["objects"].map(lambda o: obj in o)]
    return held["group"].value_counts().reindex(GS, fill_value=0).tolist()


def test_oversample_four_groups_hand_computed():
    # exact balance: every group holds D dogs and B bikes. female_light has two dog images
    # (D >= 2), male_dark two bike images (B >= 2); the fewest samples are D = B = 2, i.e.
    # copies fd 2, 2; fl 1, 1, 2; md 1, 1, 2; ml 2, 2 -> 16 samples, 4 per group
    over = D.oversample(_four(), max_skew=0.0)
    assert _copies(over) == [2, 2, 1, 1, 2, 1, 1, 2, 2, 2]
    assert over["group"].value_counts().reindex(GS).tolist() == [4, 4, 4, 4]
    assert _per_group(over, "dog") == _per_group(over, "bike") == [2, 2, 2, 2]
    c = D.cooccurrence(over)
    assert c["group_objects_max_abs_skew"] == 0.0 and c["n_unlabelled"] == 0
    assert over.attrs["n_unlabelled"] == 0   # set where the manifest has a group column


def test_subsample_four_groups_hand_computed():
    # binary keep, D = B = 1 in every group: fd both, one of fl's dogs + its bike, one of
    # md's bikes + its dog, ml both -> 8 images, 2 per group
    for seed in range(3):
        sub = D.subsample(_four(), seed=seed, max_skew=0.0)
        k = _copies(sub)
        assert len(sub) == 8 and k[0] == k[1] == k[4] == k[7] == k[8] == k[9] == 1
        assert k[2] + k[3] == 1 and k[5] + k[6] == 1
        assert _per_group(sub, "dog") == _per_group(sub, "bike") == [1, 1, 1, 1]
        # the size-matched control keeps as many images of each group, with no balancing
        matched = D.matched_subset(_four(), sub, seed=seed)
        assert matched["group"].value_counts().reindex(GS).tolist() == [2, 2, 2, 2]


def test_cooccurrence_group_skew_hand_computed():
    # dog share per group: fd 1/2, fl 2/3, md 1/3, ml 1/2 (sum 2): |4 r / 2 - 1| = 0, 1/3,
    # 1/3, 0 -> 1/3; bike mirrors it -> mean and max 1/3
    c = D.cooccurrence(_four())
    assert c["group_objects_mean_abs_skew"] == pytest.approx(1 / 3)
    assert c["group_objects_max_abs_skew"] == pytest.approx(1 / 3)


def _skin():
    """Dark dog, dog, bike; light bike, bike, dog; two dogs with no skin-tone label. Images
    1-4 are female, 5-8 male."""
    spec = [("dark", "dog"), ("dark", "dog"), ("dark", "bike"),
            ("light", "bike"), ("light", "bike"), ("light", "dog"), (None, "dog"), (None, "dog")]
    rows = [(str(i), i, f"{i}.jpg", "female" if i <= 4 else "male", ["x"], [o], False, g)
            for i, (g, o) in enumerate(spec, start=1)]
    return pd.DataFrame(rows, columns=D.MANIFEST_COLUMNS + ["group"])


def test_two_skin_groups_balance_skin_not_gender_and_leave_unlabelled_out():
    # dark: dogs 1, 2, bike 3; light: bikes 4, 5, dog 6 -> exact balance at the fewest
    # samples repeats 3 and 6 once (dog 2 = 2, bike 2 = 2): copies 1, 1, 2, 1, 1, 2
    over = D.oversample(_skin(), max_skew=0.0)
    assert _copies(over, 8) == [1, 1, 2, 1, 1, 2, 0, 0]
    assert over.attrs["n_unlabelled"] == 2 and over["group"].notna().all()
    dark, light = over[over.group == "dark"], over[over.group == "light"]
    assert len(dark) == len(light) == 4
    # the same programme as two genders: relabel the groups as female / male, drop the group
    as_gender = _skin().dropna(subset=["group"]).assign(
        gender=lambda d: d["group"].map({"dark": "female", "light": "male"}))
    twin = D.oversample(as_gender.drop(columns="group"), max_skew=0.0)
    assert _copies(twin, 8) == _copies(over, 8)
    # gender was not balanced: female 1 + 1 + 2 + 1, male 1 + 2
    assert (over["gender"] == "female").sum() == 5
    sub = D.subsample(_skin(), max_skew=0.0)
    assert sub.attrs["n_unlabelled"] == 2 and len(sub) == 4
    assert sorted(sub["group"]) == ["dark", "dark", "light", "light"]


def test_balancing_weights_four_groups():
    d = _four()
    w = D.balancing_weights(d, iters=5000)
    assert w.mean() == pytest.approx(1.0)
    for g in GS:
        in_g = (d["group"] == g).to_numpy()
        assert w[in_g].sum() == pytest.approx(len(d) / 4, abs=1e-6)
        dog = in_g & d["objects"].map(lambda o: "dog" in o).to_numpy()
        assert w[dog].sum() / w[in_g].sum() == pytest.approx(0.5, abs=1e-3)
    # rows without a group keep weight 1
    s = _skin()
    ws = D.balancing_weights(s)
    assert ws[-2:].tolist() == [1.0, 1.0] and ws[:-2].mean() == pytest.approx(1.0)


def test_one_labelled_group_is_a_clear_error():
    one = _skin().assign(group=lambda d: d["group"].where(d["group"] != "light"))
    with pytest.raises(ValueError, match="at least two groups"):
        D.oversample(one)
    with pytest.raises(ValueError, match="equal group sizes"):
        D.subsample(one)
