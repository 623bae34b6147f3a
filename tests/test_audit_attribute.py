"""The REVISE audit per protected attribute (biaslab.analysis.audit_attribute):
hand-computed counts, rates and tests on tables written here (not by biaslab.data.synthetic),
and agreement with the gender audit when the attribute is gender."""
import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2_contingency, fisher_exact

from biaslab.analysis import audit as AU
from biaslab.analysis import audit_attribute as AA


def _presence(rows):
    return pd.DataFrame(rows, columns=["image_id", "category"])


def test_two_groups_hand_computed():
    # 4 dark images (1-4), 2 light (5-6); dog in 3 dark, 0 light; cup in 1 dark, 2 light
    groups = {1: "dark", 2: "dark", 3: "dark", 4: "dark", 5: "light", 6: "light", 7: None}
    pres = _presence([(1, "dog"), (2, "dog"), (3, "dog"), (1, "cup"), (5, "cup"), (6, "cup"),
                      (7, "dog"), (1, "dog")])           # 7 has no group; a duplicate row
    t = AA.group_skew_table(pres, groups, ("dark", "light"), "category", min_count=1,
                            correction="none").set_index("category")
    dog, cup = t.loc["dog"], t.loc["cup"]
    assert (dog["n_dark"], dog["n_light"], dog["n_total"]) == (3, 0, 3)
    assert dog["rate_dark"] == 0.75 and dog["rate_light"] == 0.0
    assert dog["skew"] == 1.0 and dog["rate_ratio"] == np.inf
    assert (dog["max_group"], dog["min_group"]) == ("dark", "light")
    assert dog["p"] == pytest.approx(fisher_exact([[3, 1], [0, 2]]).pvalue)
    # cup: r_dark 1/4, r_light 2/2 -> skew (0.25 - 1) / 1.25 = -0.6, ratio 4
    assert cup["skew"] == pytest.approx(-0.6) and cup["rate_ratio"] == pytest.approx(4.0)
    assert cup["p"] == pytest.approx(fisher_exact([[1, 3], [2, 0]]).pvalue)
    assert AA.images_per_group(groups, ("dark", "light")) == {"dark": 4, "light": 2}


def test_four_groups_use_the_chi_square_test_and_name_the_extremes():
    names = ("female_dark", "female_light", "male_dark", "male_light")
    groups = {i: names[i % 4] for i in range(40)}                 # 10 images per group
    # bicycle: 1, 2, 5 and 8 images of the four groups
    have = {"female_dark": 1, "female_light": 2, "male_dark": 5, "male_light": 8}
    rows, seen = [], {g: 0 for g in names}
    for i, g in groups.items():
        if seen[g] < have[g]:
            rows.append((i, "bicycle"))
            seen[g] += 1
    t = AA.group_skew_table(_presence(rows), groups, names, "category",
                            min_count=5).set_index("category")
    b = t.loc["bicycle"]
    assert [b[f"n_{g}"] for g in names] == [1, 2, 5, 8]
    assert (b["max_group"], b["min_group"]) == ("male_light", "female_dark")
    assert b["rate_ratio"] == pytest.approx(8.0) and np.isnan(b["skew"])
    table = np.array([[1, 9], [2, 8], [5, 5], [8, 2]])
    assert b["p"] == pytest.approx(chi2_contingency(table, correction=False).pvalue)
    assert b["tested"] and b["p_adj"] == pytest.approx(b["p"])    # one tested item


def test_untested_items_and_bad_arguments():
    groups = {1: "dark", 2: "light"}
    t = AA.group_skew_table(_presence([(1, "dog")]), groups, ("dark", "light"), "category",
                            min_count=5)
    assert not t["tested"].any() and t["p"].isna().all()
    with pytest.raises(ValueError, match="min_count"):
        AA.group_skew_table(_presence([]), groups, ("dark", "light"), "category", min_count=0)
    with pytest.raises(ValueError, match="two groups"):
        AA.group_skew_table(_presence([]), groups, ("dark",), "category")


def test_gender_attribute_agrees_with_the_gender_audit():
    rng = np.random.default_rng(0)
    n = 120
    gender = ["female" if rng.random() < 0.4 else "male" for _ in range(n)]
    cats = ["dog", "cup", "tie", "bicycle"]
    rows = [(i + 1, c) for i in range(n) for c in cats
            if rng.random() < (0.6 if (c == "cup") == (gender[i] == "female") else 0.2)]
    pres = _presence(rows)
    labels = pd.DataFrame({"image_id": range(1, n + 1), "gender": gender})
    ref = AU.skew_table(pres, labels, "category", min_count=5).set_index("category")
    ours = AA.group_skew_table(pres, dict(zip(range(1, n + 1), gender)), ("female", "male"),
                               "category", min_count=5).set_index("category")
    for c in cats:
        for col in ("n_female", "n_male", "rate_female", "rate_male", "skew", "p", "p_adj"):
            assert ours.loc[c, col] == pytest.approx(ref.loc[c, col]), (c, col)


def test_prominence_by_group_hand_computed():
    images = pd.DataFrame({"image_id": [1, 2, 3, 4], "width": [100] * 4, "height": [100] * 4})
    # the largest box per image; areas 0.25, 0.09 (dark) and 0.04, 0.01 (light); image 4's
    # box is centred, the others are not
    persons = pd.DataFrame({"image_id": [1, 1, 2, 3, 4], "x": [0, 0, 0, 0, 45],
                            "y": [0, 0, 0, 0, 45], "w": [50, 10, 30, 20, 10],
                            "h": [50, 10, 30, 20, 10]})
    groups = {1: "dark", 2: "dark", 3: "light", 4: "light", 5: "light"}
    out = AA.prominence_by_group(images, persons, groups, ("dark", "light"))
    a = out["area_frac"]
    assert a["groups"]["dark"]["mean"] == pytest.approx(0.17)
    assert a["groups"]["light"]["mean"] == pytest.approx(0.025)
    assert a["groups"]["dark"]["n"] == 2 and out["n_without_person"] == 1     # image 5
    assert a["cohens_d"] == pytest.approx(AU.cohens_d([0.25, 0.09], [0.04, 0.01]))
    assert a["p_welch"] == pytest.approx(AU.welch_p([0.25, 0.09], [0.04, 0.01]))
    d = out["center_dist"]["groups"]["light"]
    assert d["mean"] == pytest.approx((np.hypot(0.4, 0.4) + 0.0) / 2)


def test_attribute_audit_summary():
    images = pd.DataFrame({"image_id": [1, 2, 3, 4], "width": [10] * 4, "height": [10] * 4})
    persons = pd.DataFrame({"image_id": [1, 2, 3, 4], "x": [0] * 4, "y": [0] * 4,
                            "w": [5, 4, 3, 2], "h": [5, 4, 3, 2]})
    objects = pd.DataFrame({"image_id": [1, 2, 3], "category": ["dog", "dog", "cup"],
                            "x": [0.0] * 3, "y": [0.0] * 3, "w": [1.0] * 3, "h": [1.0] * 3})
    captions = pd.DataFrame({"image_id": [1, 2, 3, 4],
                             "caption": ["a dog runs", "a dog sits", "a cup", "a man"]})
    groups = {1: "dark", 2: "dark", 3: "light", 4: "light"}
    s, t = AA.attribute_audit(images, captions, persons, objects, groups, "skin",
                              ("dark", "light"), min_count=2)
    words = t["words"]
    assert s["attribute"] == "skin" and s["images"] == {"dark": 2, "light": 2}
    assert s["objects"]["n_tested"] == 1 and s["objects"]["top"][0]["item"] == "dog"
    assert "man" not in set(words["word"])              # gender words are left out
    assert set(words["word"]) >= {"dog", "runs", "sits", "cup"}


def test_groups_without_images_give_no_rates_and_no_tests():
    images = pd.DataFrame({"image_id": [1, 2], "width": [10] * 2, "height": [10] * 2})
    persons = pd.DataFrame({"image_id": [1], "x": [0], "y": [0], "w": [5], "h": [5]})
    objects = pd.DataFrame({"image_id": [1], "category": ["dog"], "x": [0.0], "y": [0.0],
                            "w": [1.0], "h": [1.0]})
    captions = pd.DataFrame({"image_id": [1, 2], "caption": ["a dog", "a cat"]})
    s, t = AA.attribute_audit(images, captions, persons, objects, {}, "skin",
                              ("dark", "light"))
    obj = t["objects"]
    assert s["images"] == {"dark": 0, "light": 0} and s["objects"]["n_tested"] == 0
    assert obj.loc[0, "max_group"] is None and np.isnan(obj.loc[0, "rate_ratio"])
    s, _ = AA.attribute_audit(images, captions, persons, objects, {1: "dark"}, "skin",
                              ("dark", "light"))
    area = s["prominence"]["area_frac"]
    assert area["groups"]["dark"]["mean"] == 0.25 and area["groups"]["light"]["n"] == 0
    assert area["p_welch"] is None


def test_prominence_of_any_grouping_by_hand():
    """audit.prominence_of measures the images of any grouping (no placeholder gender): a
    100 x 100 image with a 20 x 50 box at (0, 0) -> area .1, centre (.1, .25), distance
    sqrt(.4^2 + .25^2); an image outside the grouping is not measured; person_prominence
    gives the same numbers under its gender column."""
    images = pd.DataFrame({"image_id": [1, 2], "width": [100, 100], "height": [100, 100]})
    persons = pd.DataFrame({"image_id": [1, 2], "x": [0, 0], "y": [0, 0], "w": [20, 20],
                            "h": [50, 50]})
    out = AU.prominence_of(images, persons, pd.Series({1: "dark"}))
    assert list(out["image_id"]) == [1] and list(out["group"]) == ["dark"]
    assert out["area_frac"].iloc[0] == pytest.approx(0.1)
    assert out["center_dist"].iloc[0] == pytest.approx(np.hypot(0.4, 0.25))
    g = AU.person_prominence(images, persons, pd.DataFrame({"image_id": [1], "gender":
                                                             ["female"]}))
    assert list(g["gender"]) == ["female"]
    assert g["center_dist"].iloc[0] == out["center_dist"].iloc[0]


# ---------------------------------------------------------------- context, distance, appearance
def test_supercategories_from_the_annotations_and_their_presence(tmp_path):
    """Fig. 7 right: an image has a supercategory when it has one of its objects; person and
    unmapped categories are left out; files without the field give no mapping."""
    import json
    ann = tmp_path / "annotations"
    ann.mkdir()
    (ann / "instances_a.json").write_text(json.dumps({"categories": [
        {"id": 1, "name": "person", "supercategory": "person"},
        {"id": 2, "name": "dog", "supercategory": "animal"},
        {"id": 3, "name": "cat", "supercategory": "animal"}]}))
    (ann / "instances_b.json").write_text(json.dumps({"categories": [
        {"id": 4, "name": "cup", "supercategory": "kitchen"}, {"id": 5, "name": "kite"}]}))
    sc = AA.read_supercategories(tmp_path)
    assert sc == {"person": "person", "dog": "animal", "cat": "animal", "cup": "kitchen"}
    objects = _presence([(1, "dog"), (1, "cat"), (2, "cup"), (2, "person"), (3, "kite")])
    pr = AA.supercategory_presence(objects, sc)
    assert sorted(map(tuple, pr.to_numpy().tolist())) == [(1, "animal"), (2, "kitchen")]
    # 3 dark images with an animal of 3, 0 of 2 light: the skew table of the supercategories
    groups = {1: "dark", 4: "dark", 5: "dark", 2: "light", 6: "light"}
    pres = _presence([(1, "dog"), (4, "cat"), (5, "dog"), (2, "cup")])
    t = AA.group_skew_table(AA.supercategory_presence(pres, sc).rename(
        columns={"supercategory": "category"}), groups, ("dark", "light"), "category",
        min_count=1, correction="none").set_index("category")
    assert t.loc["animal", "rate_dark"] == 1.0 and t.loc["animal", "rate_light"] == 0.0
    assert t.loc["animal", "p"] == pytest.approx(fisher_exact([[3, 0], [0, 2]]).pvalue)
    assert AA.read_supercategories(tmp_path / "nowhere") == {}
    (ann / "instances_c.json").write_text(json.dumps({"categories": {"a": 1}}))
    with pytest.raises(AU.InputError, match="instances_c.json"):
        AA.read_supercategories(tmp_path)


def _scene(n_img=12):
    """n_img 100 x 100 images, a 20 x 20 person at (0, 0); a 10 x 10 dog at x = 5 k."""
    ids = list(range(1, n_img + 1))
    images = pd.DataFrame({"image_id": ids, "width": 100, "height": 100})
    persons = pd.DataFrame({"image_id": ids, "x": 0.0, "y": 0.0, "w": 20.0, "h": 20.0})
    objects = pd.DataFrame({"image_id": ids, "category": "dog", "x": [5.0 * k for k in ids],
                            "y": 0.0, "w": 10.0, "h": 10.0})
    return images, persons, objects


def test_distance_by_group_two_groups_is_the_gender_audits_table():
    images, persons, objects = _scene()
    gender = {i: ("female" if i % 2 else "male") for i in images["image_id"]}
    ours = AA.distance_by_group(images, persons, objects, gender, ("female", "male"),
                                min_count=2, correction="none").set_index("category")
    labels = pd.DataFrame({"image_id": list(gender), "gender": list(gender.values())})
    ref = AU.distance_table(AU.person_object_distances(images, persons, objects, labels),
                            min_count=2, correction="none").set_index("category")
    for a, b in (("n_female", "n_female"), ("mean_female", "mean_female"),
                 ("mean_male", "mean_male"), ("cohens_d", "cohens_d"), ("p", "p")):
        assert ours.loc["dog", a] == pytest.approx(ref.loc["dog", b])
    # by hand: Eq. 1 for image 2 (dog at x = 10): centres (.1, .1) and (.15, .05),
    # areas .04 and .01 -> hypot(.05, .05) / sqrt(.0004)
    d = AU.distances_of(images, persons, objects, pd.Series(gender))
    assert d.set_index("image_id").loc[2, "dist"] == pytest.approx(np.hypot(.05, .05) / .02)


def test_distance_by_group_four_groups_kruskal():
    from scipy.stats import kruskal
    images, persons, objects = _scene(12)
    names = ("a", "b", "c", "d")
    groups = {i: names[(i - 1) % 4] for i in images["image_id"]}
    t = AA.distance_by_group(images, persons, objects, groups, names, min_count=8)
    d = AU.distances_of(images, persons, objects, pd.Series(groups))
    vals = [d.loc[d["group"] == n, "dist"].to_numpy() for n in names]
    assert t.loc[0, "p"] == pytest.approx(kruskal(*vals).pvalue)
    assert np.isnan(t.loc[0, "cohens_d"]) and bool(t.loc[0, "tested"])
    means = {n: v.mean() for n, v in zip(names, vals)}
    assert t.loc[0, "closest_group"] == min(means, key=means.get)
    assert t.loc[0, "farthest_group"] == max(means, key=means.get)
    # too few images per group: not tested
    t = AA.distance_by_group(images, persons, objects, {1: "a", 2: "b"}, names)
    assert not t["tested"].any() and np.isnan(t.loc[0, "p"])


def _appearance_data(separation, n=60, d=40, seed=0):
    """n images per group of two object categories (dog: the groups differ by
    ``separation`` along each of the first 10 features, a direction PCA keeps; cup: the same
    distribution), d features."""
    rng = np.random.default_rng(seed)
    ids = np.arange(1, 4 * n + 1)
    X = rng.normal(size=(len(ids), d))
    group = np.where(ids % 2 == 1, "dark", "light")
    cat = np.where(ids <= 2 * n, "dog", "cup")
    X[(cat == "dog") & (group == "dark"), :10] += separation
    objects = pd.DataFrame({"image_id": ids, "category": cat})
    return X, ids, objects, dict(zip(ids.tolist(), group))


def test_appearance_finds_a_planted_difference_and_not_a_null_one():
    """Sect. 5.1.4 on features written here: a group difference planted in the dog images is
    found (accuracy well above chance, permutation p at its floor 1/101); the cup images,
    drawn alike for both groups, stay at chance and are not significant."""
    X, ids, objects, groups = _appearance_data(separation=1.0)
    t = AA.appearance_table(X, ids, objects, groups, ("dark", "light")).set_index("category")
    dog, cup = t.loc["dog"], t.loc["cup"]
    assert dog["n_dark"] == dog["n_light"] == 60 and dog["n_dims"] == int(np.sqrt(120))
    assert dog["accuracy"] > 0.85 and dog["p"] == pytest.approx(1 / 101)
    assert bool(dog["significant"]) and dog["ratio"] > 1.5
    assert abs(cup["chance"] - 0.5) < 0.1 and not bool(cup["significant"])
    assert cup["p"] > 0.05
    # deterministic: the same inputs give the same table, on 1 or 2 worker processes, also
    # with as many features as stage features writes (sklearn's PCA "auto" would pick its
    # randomized solver there, LinearSVC shuffles its coordinate descent: both are seeded)
    X, ids, objects, groups = _appearance_data(separation=0.3, d=600)
    a = AA.appearance_table(X, ids, objects, groups, ("dark", "light"), n_permutations=20)
    pd.testing.assert_frame_equal(a, AA.appearance_table(X, ids, objects, groups,
                                                         ("dark", "light"), n_permutations=20,
                                                         workers=2))


def test_appearance_tests_only_categories_with_enough_images_and_checks_features():
    X, ids, objects, groups = _appearance_data(separation=4.0, n=8)
    t = AA.appearance_table(X, ids, objects, groups, ("dark", "light"), min_per_group=10)
    assert not t["tested"].any() and t["accuracy"].isna().all()
    t = AA.appearance_table(X, ids, objects, groups, ("dark", "light"), min_per_group=2,
                            max_per_group=6)      # 6 per group: 5 folds need >= 5
    assert (t["n_dark"] == 6).all() and t["tested"].all()
    t = AA.appearance_table(X, ids, objects, groups, ("dark", "light"), min_per_group=2,
                            max_per_group=4)
    assert not t["tested"].any()
    with pytest.raises(AU.InputError, match="features"):
        AA.appearance_table(X[:-1], ids, objects, groups, ("dark", "light"))
    with pytest.raises(AU.InputError, match="no features for image_id"):
        AA.appearance_table(X[:5], ids[:5], objects, groups, ("dark", "light"))
    with pytest.raises(ValueError, match="two groups"):
        AA.appearance_table(X, ids, objects, groups, ("dark",))


def test_attribute_audit_writes_every_section_or_says_why_not():
    X, ids, objects, groups = _appearance_data(separation=4.0, n=12)
    images = pd.DataFrame({"image_id": ids, "width": 100, "height": 100})
    persons = pd.DataFrame({"image_id": ids, "x": 0.0, "y": 0.0, "w": 20.0, "h": 20.0})
    boxes = objects.assign(x=10.0, y=10.0, w=5.0, h=5.0)
    captions = pd.DataFrame({"image_id": ids, "caption": "a photo"})
    s, t = AA.attribute_audit(images, captions, persons, boxes, groups, "skin",
                              ("dark", "light"), supercategories={"dog": "animal"},
                              features=(X, ids), appearance={"n_permutations": 20})
    assert set(t) == {"objects", "words", "supercategories", "distance", "appearance"}
    assert s["supercategories"]["top"][0]["item"] == "animal"
    assert s["appearance"]["n_tested"] == 2 and s["distance"]["n_tested"] == 2
    # the protocol travels with the numbers (the report states it; folds = the CI's n)
    assert (s["appearance"]["folds"], s["appearance"]["n_permutations"]) == (5, 20)
    from biaslab.report.sections import audit_attribute_markdown
    text = "\n".join(audit_attribute_markdown(s))
    assert "5-fold accuracy" in text and "20 permutations" in text
    s, t = AA.attribute_audit(images, captions, persons, boxes, groups, "skin",
                              ("dark", "light"))
    assert set(t) == {"objects", "words", "distance"}
    assert "skipped" in s["supercategories"] and "skipped" in s["appearance"]
