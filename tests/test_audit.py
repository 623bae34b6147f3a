"""Tests of biaslab.analysis.audit (REVISE person-/object-based audit, paper 004) and stages/audit.py.

Expected values are computed by hand in the comments."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab.analysis import audit, audit_figures, audit_run
from biaslab.runtime.io import InputError

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def _labels(genders: dict[int, str]) -> pd.DataFrame:
    return pd.DataFrame({"image_id": list(genders), "gender": list(genders.values())})


def _planted(n_per_gender: int = 300, seed: int = 0, planted: dict | None = None,
             n_null: int = 10, null_rate: float = 0.2) -> dict[str, pd.DataFrame]:
    """Schema tables with planted object-gender correlations.

    ``planted``: category -> (P(present | female), P(present | male)); ``n_null`` further
    categories ``null0..`` are present with probability ``null_rate`` whatever the gender.
    Every gendered image has one person; every object instance has a box. Captions mention the
    gender ("a woman ..."/"a man ...") plus a planted word ("shopping" for female,
    "skateboarding" for male, with probability 0.5 vs 0.05) and a neutral word ("outside",
    probability 0.5 for both)."""
    rng = np.random.default_rng(seed)
    planted = planted if planted is not None else {"handbag": (0.5, 0.1),
                                                  "skateboard": (0.05, 0.4)}
    cats = {**planted, **{f"null{i}": (null_rate, null_rate) for i in range(n_null)}}
    n = 2 * n_per_gender
    ids = np.arange(1, n + 1, dtype="int64")
    gender = np.array(["female"] * n_per_gender + ["male"] * n_per_gender)
    images = pd.DataFrame({"image_id": ids, "file_name": [f"{i}.jpg" for i in ids],
                           "path": [f"img/{i}.jpg" for i in ids],
                           "width": rng.integers(300, 640, n), "height": rng.integers(300, 480, n),
                           "coco_split": "val2017"})
    W, H = images["width"].to_numpy(float), images["height"].to_numpy(float)
    pw, ph = W * rng.uniform(0.2, 0.5, n), H * rng.uniform(0.3, 0.8, n)
    persons = pd.DataFrame({"ann_id": ids + 10_000, "image_id": ids,
                            "x": rng.uniform(0, W - pw), "y": rng.uniform(0, H - ph),
                            "w": pw, "h": ph})
    persons["area"] = persons["w"] * persons["h"]
    rows = []
    for i in range(n):
        for c, (pf, pm) in cats.items():
            if rng.random() < (pf if gender[i] == "female" else pm):
                ow, oh = W[i] * 0.1, H[i] * 0.1
                rows.append((ids[i], c, "instances", rng.uniform(0, W[i] - ow),
                             rng.uniform(0, H[i] - oh), ow, oh))
    objects = pd.DataFrame(rows, columns=["image_id", "category", "source", "x", "y", "w", "h"])
    caps = []
    for i in range(n):
        f = gender[i] == "female"
        for j in range(2):
            words = ["a", "woman" if f else "man"]
            if rng.random() < (0.5 if f else 0.05):
                words.append("shopping")
            if rng.random() < (0.05 if f else 0.5):
                words.append("skateboarding")
            if rng.random() < 0.5:
                words.append("outside")
            caps.append((ids[i] * 10 + j, ids[i], " ".join(words)))
    captions = pd.DataFrame(caps, columns=["caption_id", "image_id", "caption"])
    labels = pd.DataFrame({"image_id": ids, "gender": gender})
    return dict(images=images, captions=captions, persons=persons, objects=objects,
                labels=labels)


# --------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------

def test_cohens_d_hand_computed():
    # a = [1,2,3]: mean 2, var 1; b = [3,5,7]: mean 5, var 4
    # s_p^2 = (2*1 + 2*4) / (3+3-2) = 2.5  ->  d = (2-5)/sqrt(2.5) = -1.897366
    assert audit.cohens_d([1, 2, 3], [3, 5, 7]) == pytest.approx(-3 / math.sqrt(2.5))
    # unequal sizes: a = [0,2]: mean 1, var 2; b = [1,1,4]: mean 2, var (1+1+4)/2 = 3
    # s_p^2 = (1*2 + 2*3) / (2+3-2) = 8/3  ->  d = -1/sqrt(8/3) = -0.612372
    assert audit.cohens_d([0, 2], [1, 1, 4]) == pytest.approx(-1 / math.sqrt(8 / 3))
    # antisymmetric, NaN when a group has < 2 values or zero pooled std
    assert audit.cohens_d([3, 5, 7], [1, 2, 3]) == pytest.approx(3 / math.sqrt(2.5))
    assert math.isnan(audit.cohens_d([1], [1, 2]))
    assert math.isnan(audit.cohens_d([1, 1], [1, 1]))


def test_welch_p_matches_scipy_and_nan_cases():
    from scipy import stats
    a, b = [1.0, 2, 3, 4], [2.0, 4, 6, 8, 10]
    assert audit.welch_p(a, b) == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)
    assert math.isnan(audit.welch_p([1.0], b))


def test_adjust_pvalues_hand_computed():
    p = [0.01, 0.04, 0.03, 0.5, float("nan")]
    # BH over the 4 finite p: sorted 0.01, 0.03, 0.04, 0.5 -> 0.04, 0.06, 0.0533, 0.5,
    # then the running minimum from the top: 0.04, 0.0533, 0.0533, 0.5
    bh = audit.adjust_pvalues(p, "bh")
    assert bh[:4] == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert math.isnan(bh[4])
    assert audit.adjust_pvalues(p, "bonferroni")[:4] == pytest.approx([0.04, 0.16, 0.12, 1.0])
    assert audit.adjust_pvalues(p, "none")[:4] == pytest.approx(p[:4])
    with pytest.raises(ValueError):
        audit.adjust_pvalues(p, "holm")


def test_revise_ratio():
    assert audit.revise_ratio(0.5, 0.25) == 2.0
    assert audit.revise_ratio(0.25, 0.75) == -3.0
    assert audit.revise_ratio(0.3, 0.3) == 0.0
    assert audit.revise_ratio(0.3, 0.0) == math.inf


# --------------------------------------------------------------------------------------------
# 1. images per gender
# --------------------------------------------------------------------------------------------

def test_images_per_gender():
    lab = _labels({1: "female", 2: "male", 3: "male", 4: "undefined"})
    out = audit.images_per_gender(lab)
    assert (out["total"], out["female"], out["male"], out["undefined"]) == (4, 1, 2, 1)
    assert out["frac_male"] == 0.5 and out["frac_female"] == 0.25
    assert out["female_share_gendered"] == pytest.approx(1 / 3)


def test_labels_validation():
    with pytest.raises(InputError, match="gender"):
        audit.images_per_gender(_labels({1: "Female"}))
    with pytest.raises(InputError, match="duplicated"):
        audit.images_per_gender(pd.DataFrame({"image_id": [1, 1], "gender": ["male"] * 2}))


# --------------------------------------------------------------------------------------------
# 2. prominence
# --------------------------------------------------------------------------------------------

def _prominence_tables():
    images = pd.DataFrame({"image_id": [1, 2, 3, 4], "width": [200, 100, 100, 100],
                           "height": [100, 100, 100, 100]})
    persons = pd.DataFrame({"image_id": [1, 1, 2, 3],
                            "x": [0, 100, 25, 0], "y": [0, 50, 25, 0],
                            "w": [20, 100, 50, 10], "h": [10, 50, 50, 10]})
    labels = _labels({1: "female", 2: "male", 3: "undefined", 4: "female"})
    return images, persons, labels


def test_person_prominence_hand_computed():
    images, persons, labels = _prominence_tables()
    prom = audit.person_prominence(images, persons, labels).set_index("image_id")
    # image 3 is undefined, image 4 has no person -> only 1 and 2
    assert list(prom.index) == [1, 2]
    # image 1 (200x100): largest box (100,50,100,50) = 5000 px of 20000 -> 0.25; its centre
    # (150,75) on the unit square (REVISE, the default): (150/200-.5, 75/100-.5) = (.25, .25)
    # -> sqrt(.125) = 0.353553
    assert prom.loc[1, "area_frac"] == pytest.approx(0.25)
    assert prom.loc[1, "center_dist"] == pytest.approx(math.sqrt(0.125))
    assert prom.loc[1, "n_persons"] == 2 and prom.loc[1, "person_px"] == 5000
    # image 2: centred 50x50 box in 100x100 -> area 0.25, distance 0
    assert prom.loc[2, "area_frac"] == pytest.approx(0.25)
    assert prom.loc[2, "center_dist"] == pytest.approx(0.0)
    # area="sum": (200 + 5000) / 20000 = 0.26; center_norm="diagonal": (50,25) px from
    # (100,50): sqrt(3125)/sqrt(50000) = 0.25 of the diagonal
    p2 = audit.person_prominence(images, persons, labels, area="sum",
                                 center_norm="diagonal").set_index("image_id")
    assert p2.loc[1, "area_frac"] == pytest.approx(0.26)
    assert p2.loc[1, "center_dist"] == pytest.approx(0.25)
    # min_person_px drops image 2 (2500 px) at 3000
    assert list(audit.person_prominence(images, persons, labels,
                                        min_person_px=3000)["image_id"]) == [1]


def test_center_dist_unit_square_reaches_paper_range():
    # REVISE's COCO female mean (.510) exceeds 0.5, the maximum on the diagonal scale; on the
    # unit square a person box centred in a corner region reaches it. 400x100 image, box
    # (360,0,40,20): centre (380,10) -> (.95, .1) -> |(.45, -.4)| = sqrt(.2025+.16) = .602080;
    # on the diagonal scale: |(180, -40)| / |(400, 100)| = 184.391 / 412.311 = .447214
    images = pd.DataFrame({"image_id": [1], "width": [400], "height": [100]})
    persons = pd.DataFrame({"image_id": [1], "x": [360], "y": [0], "w": [40], "h": [20]})
    labels = _labels({1: "female"})
    unit = audit.person_prominence(images, persons, labels)["center_dist"].iloc[0]
    diag = audit.person_prominence(images, persons, labels,
                                   center_norm="diagonal")["center_dist"].iloc[0]
    assert unit == pytest.approx(0.602080, abs=1e-6) and unit > 0.5
    assert diag == pytest.approx(0.447214, abs=1e-6)


def test_prominence_summary():
    images, persons, labels = _prominence_tables()
    prom = audit.person_prominence(images, persons, labels)
    s = audit.prominence_summary(prom, labels, tiny_px=3000)
    assert s["area_frac"]["female_n"] == 1 and s["area_frac"]["male_n"] == 1
    assert s["center_dist"]["female_mean"] == pytest.approx(math.sqrt(0.125))
    assert math.isnan(s["area_frac"]["cohens_d"])  # one image per gender
    assert s["gendered_without_person"] == 1  # image 4
    # tiny (< 3000 px): only image 2 (male, 2500 px) -> male share 1
    assert s["tiny_person"] == {"threshold_px": 3000.0, "female": 0, "male": 1,
                                "male_share": 1.0}


# --------------------------------------------------------------------------------------------
# 3. object-gender skew
# --------------------------------------------------------------------------------------------

def test_skew_hand_computed():
    # 4 female images (1-4), 8 male (5-12), one undefined (13).
    lab = _labels({**{i: "female" for i in range(1, 5)}, **{i: "male" for i in range(5, 13)},
                   13: "undefined"})
    objs = pd.DataFrame({
        "image_id": [1, 1, 2, 5, 6, 13] + [3] + [5, 6, 7, 8, 9, 10],
        "category": ["cup"] * 6 + ["tie"] * 7,
    })  # cup twice in image 1 counts once; image 13 (undefined) does not count
    t = audit.object_gender_table(objs, lab, min_count=1).set_index("category")
    # cup: n_f = 2 of 4, n_m = 2 of 8 -> r_f = .5, r_m = .25
    #   skew = (.5-.25)/(.5+.25) = 1/3; majority_frac = 2/4 = .5 (tie); ratio = .5/.25 = 2
    c = t.loc["cup"]
    assert (c.n_female, c.n_male, c.majority) == (2, 2, "tie")
    assert c["skew"] == pytest.approx(1 / 3) and c.majority_frac == 0.5 and c.ratio == 2.0
    # Fisher two-sided on [[2,2],[2,6]]: P(X=k) = C(4,k) C(8,4-k) / C(12,4) = (70, 224, 168, 32,
    # 1)/495 for k=0..4; observed k=2 (168): p = (70+168+32+1)/495 = 271/495
    assert c.p == pytest.approx(271 / 495)
    # tie: n_f = 1 (r_f .25), n_m = 6 (r_m .75): skew = -.5/1 = -.5; majority_frac 6/7; ratio -3
    k = t.loc["tie"]
    assert (k.n_female, k.n_male, k.majority) == (1, 6, "male")
    assert k["skew"] == pytest.approx(-0.5) and k.majority_frac == pytest.approx(6 / 7)
    assert k.ratio == pytest.approx(-3.0)
    # BH over the two tested objects; nothing is significant with so few images
    assert not t["significant"].any()
    # min_count filters what is tested (and corrected): cup has 4 co-occurrences, tie 7
    t5 = audit.object_gender_table(objs, lab, min_count=5).set_index("category")
    assert not t5.loc["cup", "tested"] and math.isnan(t5.loc["cup", "p"])
    assert t5.loc["tie", "tested"] and t5.loc["tie", "p_adj"] == pytest.approx(t5.loc["tie", "p"])


@pytest.mark.parametrize("test", ["fisher", "chi2"])
def test_vectorised_2x2_tests_match_scipy(test):
    from scipy import stats
    rng = np.random.default_rng(0)
    for _ in range(30):
        Nf, Nm = (int(v) for v in rng.integers(1, 300, 2))
        nf = np.concatenate([[0, Nf, 0], rng.integers(0, Nf + 1, 10)])
        nm = np.concatenate([[0, Nm, Nm], rng.integers(0, Nm + 1, 10)])
        got = audit.two_by_two_p(nf, Nf, nm, Nm, test)
        for i in range(len(nf)):
            t = [[nf[i], Nf - nf[i]], [nm[i], Nm - nm[i]]]
            if test == "fisher":
                ref = stats.fisher_exact(t).pvalue
            else:
                try:
                    ref = stats.chi2_contingency(t, correction=True).pvalue
                except ValueError:  # zero margin
                    ref = 1.0
            assert got[i] == pytest.approx(ref, rel=1e-9, abs=1e-300)


def test_chi2_option_and_bad_args():
    lab = _labels({1: "female", 2: "female", 3: "male", 4: "male"})
    objs = pd.DataFrame({"image_id": [1, 2, 3], "category": ["a", "a", "b"]})
    t = audit.object_gender_table(objs, lab, min_count=1, test="chi2")
    assert t["p"].between(0, 1).all()
    with pytest.raises(ValueError):
        audit.object_gender_table(objs, lab, test="t")
    with pytest.raises(ValueError):
        audit.object_gender_table(objs, lab, correction="holm")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_objects_flagged_exactly(seed):
    d = _planted(seed=seed)
    t = audit.object_gender_table(d["objects"], d["labels"], min_count=5, alpha=0.001,
                                  correction="bonferroni")
    assert set(t.loc[t["significant"], "category"]) == {"handbag", "skateboard"}
    s = t.set_index("category")["skew"]
    assert s["handbag"] > 0.5 and s["skateboard"] < -0.5  # (.5-.1)/.6 = .67, (.05-.4)/.45 = -.78
    top_f = audit.top_skewed(t, "category", 3, "female")
    top_m = audit.top_skewed(t, "category", 3, "male")
    assert top_f["category"].iloc[0] == "handbag" and top_m["category"].iloc[0] == "skateboard"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_independence_nothing_significant(seed):
    # bias 0: every category present with probability .2 whatever the gender, 300 images per
    # gender, 12 categories; Bonferroni at alpha .001 bounds the chance of any false positive by
    # 0.1% per seed (seeds are fixed, so the test is deterministic; seeds 0-99 all pass, and the
    # planted tests also find exactly the planted items for seeds 0-99).
    d = _planted(seed=seed, planted={}, n_null=12)
    t = audit.object_gender_table(d["objects"], d["labels"], min_count=5, alpha=0.001,
                                  correction="bonferroni")
    assert t["tested"].all() and not t["significant"].any()
    assert t["skew"].abs().max() < 0.35


def test_exact_independence_gives_zero_skew():
    # 10 female and 20 male images; "a" in 3 female and 6 male images: r_f = r_m = .3
    lab = _labels({**{i: "female" for i in range(10)}, **{i: "male" for i in range(10, 30)}})
    objs = pd.DataFrame({"image_id": [0, 1, 2, 10, 11, 12, 13, 14, 15], "category": "a"})
    t = audit.object_gender_table(objs, lab, min_count=1)
    assert t["skew"].iloc[0] == 0.0 and t["ratio"].iloc[0] == 0.0
    assert t["majority"].iloc[0] == "male" and t["majority_frac"].iloc[0] == pytest.approx(6 / 9)
    assert t["p"].iloc[0] == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------
# 4. person-object distance (Eq. 1)
# --------------------------------------------------------------------------------------------

def test_scaled_distance_hand_computed():
    # 100x100 image: person (0,0,20,20): centre (.1,.1), area .04; object (35,45,10,10): centre
    # (.4,.5), area .01 -> |(.3,.4)| = .5, sqrt(.04*.01) = .02 -> dist = 25
    assert audit.scaled_distance((0, 0, 20, 20), (35, 45, 10, 10), 100, 100) == pytest.approx(25)
    # the same boxes stretched to 200x100 (x doubled) give the same value: Eq. 1 is measured on
    # the image normalised to area 1
    assert audit.scaled_distance((0, 0, 40, 20), (70, 45, 20, 10), 200, 100) == pytest.approx(25)


def test_person_object_distances_table():
    images = pd.DataFrame({"image_id": [1, 2], "width": [200, 100], "height": [100, 100]})
    persons = pd.DataFrame({"image_id": [1, 1, 2], "x": [0, 150, 0], "y": [0, 0, 0],
                            "w": [40, 10, 20], "h": [20, 10, 20]})
    objects = pd.DataFrame({
        "image_id": [1, 1, 1, 2],
        "category": ["cup", "cup", "tv", "cup"],
        "x": [70, 180, np.nan, 35], "y": [45, 90, np.nan, 45],
        "w": [20, 20, np.nan, 10], "h": [10, 10, np.nan, 10]})
    labels = _labels({1: "female", 2: "male"})
    d = audit.person_object_distances(images, persons, objects, labels)
    # image 1: largest person (0,0,40,20); cup instances: (70,45,20,10) -> 25 (hand computed
    # above) and (180,90,20,10): centre (.95,.95), person centre (.1,.1): |(.85,.85)| =
    # 1.2021 / .02 = 60.1 -> the minimum, 25, is kept; tv has no box -> no row
    assert list(d["category"]) == ["cup", "cup"]
    r1 = d[d["image_id"] == 1].iloc[0]
    assert r1["dist"] == pytest.approx(25) and r1["n_instances"] == 2
    assert r1["gender"] == "female"
    # image 2 (male, 100x100): the first hand-computed pair -> 25
    assert d.loc[d["image_id"] == 2, "dist"].iloc[0] == pytest.approx(25)
    # person="nearest": the small person (150,0,10,10) of image 1: centre (.775,.05), area
    # .005; to the 2nd cup (centre (.95,.95), area .01): |(.175,.9)| = .916856 /
    # sqrt(.00005) = 129.66; to the 1st cup: |(.375,.45)| = .585768 / .007071 = 82.84;
    # so the minimum over all pairs is still 25
    dn = audit.person_object_distances(images, persons, objects, labels, person="nearest")
    assert dn.loc[dn["image_id"] == 1, "dist"].iloc[0] == pytest.approx(25)


def test_distance_table_planted():
    rng = np.random.default_rng(0)
    n = 40
    # "organ": male persons close (dist ~ 2), female far (~ 6); "dog": same for both
    rows = [(i, "female" if i < n else "male", "organ",
             rng.normal(6 if i < n else 2, 1)) for i in range(2 * n)]
    rows += [(i, "female" if i < n else "male", "dog", rng.normal(3, 1)) for i in range(2 * n)]
    dists = pd.DataFrame(rows, columns=["image_id", "gender", "category", "dist"])
    t = audit.distance_table(dists, min_count=5, alpha=0.01, correction="bonferroni")
    assert t["category"].iloc[0] == "organ" and t["significant"].iloc[0]
    assert t["cohens_d"].iloc[0] > 2 and t["ratio"].iloc[0] > 2
    assert not t.set_index("category").loc["dog", "significant"]


# --------------------------------------------------------------------------------------------
# 5. caption words
# --------------------------------------------------------------------------------------------

def test_word_presence_excludes_gender_and_stop_words():
    caps = pd.DataFrame({"image_id": [1, 1, 2],
                         "caption": ["A woman's red hat, on the table.", "A red [MASK] hat",
                                     "He is 2 in the park"]})
    wp = audit.caption_word_presence(caps)
    got = {(int(i), w) for i, w in zip(wp["image_id"], wp["word"])}
    # woman/he: gender words; a/on/the/is/in: stop words; "s" too short; "2" numeric;
    # [MASK] special token; "red" and "hat" counted once per image
    assert got == {(1, "red"), (1, "hat"), (1, "table"), (2, "park")}


def test_planted_words():
    d = _planted(seed=0)
    t = audit.word_gender_table(d["captions"], d["labels"], min_count=5, alpha=0.001,
                                correction="bonferroni")
    assert set(t.loc[t["significant"], "word"]) == {"shopping", "skateboarding"}
    assert "woman" not in set(t["word"]) and "outside" in set(t["word"])


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("table,drop", [("objects", "category"), ("persons", "w"),
                                        ("images", "width"), ("labels", "gender"),
                                        ("captions", "caption")])
def test_missing_column_raises_input_error(table, drop):
    d = _planted(n_per_gender=5)
    d[table] = d[table].drop(columns=drop)
    with pytest.raises(InputError) as e:
        audit_run.run_audit(**d)
    assert e.value.path == table and repr(drop) in str(e.value)


def test_person_with_unknown_image_raises():
    images, persons, labels = _prominence_tables()
    with pytest.raises(InputError, match="not in the images table"):
        audit.person_prominence(images[images.image_id != 1], persons, labels)


# --------------------------------------------------------------------------------------------
# run_audit, metrics, stage script
# --------------------------------------------------------------------------------------------

def test_run_audit_metrics_json_safe():
    d = _planted(n_per_gender=60, seed=3)
    res = audit_run.run_audit(**d, min_count=5, alpha=0.01, correction="bonferroni")
    m = audit_run.audit_metrics(res, top_k=3)
    json.dumps(m, allow_nan=False)  # NaN/inf became null
    assert m["images"]["female"] == 60 and m["images"]["male"] == 60
    assert set(m["objects"]["significant"]) <= {"handbag", "skateboard"}
    assert len(m["objects"]["top_female"]) <= 3
    assert m["prominence"]["area_frac_female_n"] == 60


def _write_tables(root: Path, d: dict[str, pd.DataFrame]) -> None:
    (root / "data/prepared").mkdir(parents=True)
    (root / "data/labels").mkdir(parents=True)
    for name in ("images", "captions", "persons", "objects"):
        d[name].to_parquet(root / f"data/prepared/{name}.parquet", index=False)
    lab = d["labels"].assign(n_female=0, n_male=0, n_both=0, n_none=0)
    lab.to_parquet(root / "data/labels/images.parquet", index=False)
    # stage features' files (the appearance test) and a COCO categories file with
    # supercategories (the context table)
    (root / "data/features").mkdir(parents=True)
    ids = d["images"]["image_id"].to_numpy("int64")
    np.save(root / "data/features/images.npy",
            np.random.default_rng(0).normal(size=(len(ids), 8)).astype("float32"))
    np.save(root / "data/features/images_ids.npy", ids)
    (root / "raw/annotations").mkdir(parents=True)
    cats = sorted(set(d["objects"]["category"]))
    (root / "raw/annotations/instances_x.json").write_text(json.dumps({"categories": [
        {"id": k, "name": c, "supercategory": "sports" if k % 2 else "kitchen"}
        for k, c in enumerate(cats)]}))


def test_stage_script(tmp_path, monkeypatch):
    d = _planted(n_per_gender=80, seed=1)
    _write_tables(tmp_path, d)
    (tmp_path / "params.yaml").write_text(
        "audit:\n  min_count: 5\n  alpha: 0.01\n  top_k: 4\n  correction: bonferroni\n"
        "  appearance:\n    n_permutations: 10\ndata:\n  root: raw\n")
    monkeypatch.chdir(tmp_path)
    import importlib.util
    spec = importlib.util.spec_from_file_location("_stage_audit", REPO / "stages/audit.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    assert stage.main([]) == 0
    m = json.loads((tmp_path / "metrics/audit.json").read_text())
    assert set(m) == {"images", "prominence", "objects", "words", "distance", "config",
                      "attribute"}
    # the per-group audit of the run's attribute (no `attribute` param: gender), the same
    # objects as the gender audit's
    assert m["attribute"]["attribute"] == "gender"
    assert m["attribute"]["objects"]["n_significant"] == m["objects"]["n_significant"]
    assert (tmp_path / "plots/audit/attribute_objects.csv").is_file()
    # REVISE's context, distance and appearance per group
    sup = pd.read_csv(tmp_path / "plots/audit/attribute_supercategories.csv")
    assert set(sup["supercategory"]) == {"sports", "kitchen"}
    app = pd.read_csv(tmp_path / "plots/audit/attribute_appearance.csv")
    assert {"category", "accuracy", "chance", "p_adj"} <= set(app.columns)
    assert m["attribute"]["appearance"]["n_tested"] == int(app["tested"].sum()) > 0
    assert "n_tested" in m["attribute"]["distance"]
    assert m["config"]["correction"] == "bonferroni" and m["config"]["top_k"] == 4
    assert {"n_significant", "top_female", "top_male", "significant"} <= set(m["objects"])
    assert m["objects"]["significant"] == ["handbag", "skateboard"]
    assert "area_frac_cohens_d" in m["prominence"]
    for f in audit_figures.PLOT_FILES:
        data = (tmp_path / "plots/audit" / f).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", f
    objs = pd.read_csv(tmp_path / "plots/audit/objects.csv")
    assert {"category", "skew", "p_adj", "significant"} <= set(objs.columns)
    assert len(objs) == 12
    assert not list((tmp_path / "plots/audit").glob(".*"))  # no temp files left


def test_stage_script_cli_and_bad_params(tmp_path, monkeypatch):
    d = _planted(n_per_gender=10, seed=2)
    _write_tables(tmp_path, d)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("audit:\n  min_cnt: 5\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location("_stage_audit2", REPO / "stages/audit.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    from biaslab.runtime.io import InputError
    with pytest.raises(InputError, match=r"params.yaml: audit: unknown key\(s\) \['min_cnt'\]"):
        stage.main([])
    # as a script from another directory: no audit section -> defaults; a missing input gives
    # a one-line error naming the file, exit status 1
    (tmp_path / "params.yaml").write_text("other: 1\n")
    (tmp_path / "data/prepared/objects.parquet").unlink()
    r = subprocess.run([sys.executable, str(REPO / "stages/audit.py")], cwd=tmp_path,
                       capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"})
    assert r.returncode == 1 and "objects.parquet" in r.stderr and "Traceback" not in r.stderr
