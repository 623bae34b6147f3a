"""Paper 001's Tables 1-2 instruments (biaslab.metrics.retrieval): the gender-agnostic TF-IDF
model, the balanced gallery, Recall@K and CLIP-clip, on hand-computed cases."""
from __future__ import annotations

import math

import numpy as np
import pytest

from biaslab.metrics import retrieval as R


def test_tfidf_scores_are_sklearn_cosines_by_hand():
    # scikit-learn's defaults: tokens of >= 2 characters, smooth idf = ln((1 + n) / (1 + df)) + 1,
    # rows L2-normalised. Documents: {person, with, dog} and {person, on, board}; n = 2.
    docs = ["a person with a dog", "a person on a board"]
    s = R.tfidf_scores(["dog", "person"], docs)
    idf1 = math.log(3 / 2) + 1                   # df = 1 (with, dog, on, board)
    norm = math.sqrt(1 + 2 * idf1 ** 2)          # person has idf ln(3/3) + 1 = 1
    assert s.shape == (2, 2)
    assert s[0, 0] == pytest.approx(idf1 / norm) and s[0, 1] == 0.0
    assert s[1, 0] == pytest.approx(1 / norm) and s[1, 1] == pytest.approx(1 / norm)
    with pytest.raises(ValueError, match="queries and documents"):
        R.tfidf_scores([], docs)


def test_a_gender_blind_model_reads_the_datas_context_bias():
    """Paper 001 sec. 3.3: TF-IDF never sees a gendered word, yet where the context words go
    with one gender, a query about that context retrieves that gender: Bias@K measures the
    data. Women's captions say kitchen, men's say field; the gallery is balanced."""
    docs = ["a person in a kitchen"] * 3 + ["a person on a field"] * 3
    gallery = ["female"] * 3 + ["male"] * 3
    kitchen = R.tfidf_scores(["a person cooking in a kitchen"], docs)
    field = R.tfidf_scores(["a person running on a field"], docs)
    assert R.retrieval_bias(kitchen, gallery, [3], n_boot=100)["Bias@3"]["mean"] == -1.0
    assert R.retrieval_bias(field, gallery, [3], n_boot=100)["Bias@3"]["mean"] == 1.0
    both = np.vstack([kitchen, field])    # the two directions cancel in the signed mean
    r = R.retrieval_bias(both, gallery, [3], n_boot=100)
    assert r["Bias@3"]["mean"] == 0.0
    # MaxSkew@3 = ln(1 / 0.5) for each query: absolute, it does not cancel
    assert r["MaxSkew@3"]["mean"] == pytest.approx(math.log(2))


def test_balanced_gallery_samples_the_larger_group_down_and_keeps_undefined():
    g = ["male", "male", "male", "female", "undefined", "male"]
    idx = R.balanced_gallery(g, seed=0)
    kept = [g[i] for i in idx]
    assert kept.count("female") == kept.count("male") == 1 and kept.count("undefined") == 1
    assert {3, 4} <= set(idx.tolist()) and list(idx) == sorted(idx)
    assert np.array_equal(idx, R.balanced_gallery(g, seed=0))          # deterministic
    draws = {tuple(R.balanced_gallery(g, seed=s)) for s in range(20)}
    assert len(draws) > 1                                                # seeds differ
    with pytest.raises(ValueError, match="0 female"):
        R.balanced_gallery(["male", "undefined"], seed=0)


def test_recall_at_k_by_hand():
    scores = np.array([[0.9, 0.1, 0.5],      # own image 0 first
                       [0.9, 0.1, 0.5],      # own image 2 second
                       [0.9, 0.1, 0.5]])     # own image 1 last
    r = R.recall_at_k(scores, [0, 2, 1], ks=[1, 2, 3], n_boot=100)
    assert r["R@1"]["mean"] == pytest.approx(1 / 3)
    assert r["R@2"]["mean"] == pytest.approx(2 / 3)
    assert r["R@3"]["mean"] == 1.0 and r["R@3"]["n"] == 3
    with pytest.raises(ValueError, match="outside the gallery"):
        R.recall_at_k(scores, [0, 1, 3])
    with pytest.raises(ValueError, match="do not match"):
        R.recall_at_k(scores, [0, 1])


def test_clip_clip_drops_the_dimensions_that_carry_gender():
    rng = np.random.default_rng(0)
    n = 200
    g = np.array(["male", "female"] * (n // 2))
    x = rng.normal(size=(n, 5))
    x[:, 3] += np.where(g == "male", 3.0, -3.0)       # dimension 3 carries gender
    x[:, 1] += np.where(g == "male", 1.0, -1.0)       # dimension 1, less of it
    keep, mi = R.clip_clip_keep(x, g, m=1)
    assert keep.tolist() == [0, 1, 2, 4] and int(np.argmax(mi)) == 3
    keep2, _ = R.clip_clip_keep(x, g, m=2)
    assert keep2.tolist() == [0, 2, 4]
    assert R.clip_clip_keep(x, g, m=0)[0].tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="m must lie"):
        R.clip_clip_keep(x, g, m=5)
    with pytest.raises(ValueError, match="2 images of each gender"):
        R.clip_clip_keep(x[:3], ["male", "male", "female"], m=1)


def test_retrieval_difference_is_paired_over_queries():
    gallery = ["female", "male", "female", "male"]
    a = np.array([[4, 3, 2, 1.0], [1, 2, 3, 4.0]])   # top 1: female, then male
    b = np.array([[3, 4, 2, 1.0], [2, 1, 3, 4.0]])   # top 1: male, then male
    d = R.retrieval_difference(a, b, gallery, [1], n_boot=100)
    # delta_1: a = (-1, +1), b = (+1, +1): mean difference (-2 + 0) / 2 = -1
    assert d["Bias@1"]["mean"] == pytest.approx(-1.0) and d["Bias@1"]["n"] == 2
    # MaxSkew@1 = ln(1 / 0.5) for every query under both models: difference 0
    assert d["MaxSkew@1"]["mean"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="must both be"):
        R.retrieval_difference(a, b[:, :3], gallery, [1])


def _retrieval_json(diff_tfidf, diff_clip, nat_bias, bal_bias, bal_ms_tfidf, bal_ms_random):
    def rec(mean, ci, n=100, std=None):
        return {"mean": mean, "ci95": ci, "lo": mean - ci, "hi": mean + ci, "n": n, "std": std}
    return {"setup": {"ks": [10, 100, 200], "n_gallery": 300, "n_female": 61, "n_male": 139},
            "tfidf": {"Bias@10": rec(nat_bias, 0.05)},
            "differences": {"tfidf-random": {"MaxSkew@100": rec(diff_tfidf, 0.01)},
                            "clip_clip-scorer": {"MaxSkew@100": rec(diff_clip, 0.01)}},
            "balanced": {"tfidf": {"Bias@10": rec(bal_bias, 0.01, 5),
                                   "MaxSkew@100": rec(bal_ms_tfidf, 0.01, 5, 0.01)},
                         "random": {"MaxSkew@100": rec(bal_ms_random, 0.01, 5, 0.01)}}}


def test_paper001_checks_read_the_right_numbers_and_decide_both_ways():
    from biaslab.analysis import validity_paper001
    holds = {c["id"]: c for c in validity_paper001.retrieval_checks(
        _retrieval_json(0.18, -0.09, 0.39, -0.02, 0.15, 0.09))}
    # K = 200 would hold all 200 images of known gender: the largest K judged is 100
    assert set(holds) == {"retrieval/tfidf-random/maxskew@100>0",
                          "retrieval/clip_clip-scorer/maxskew@100<0",
                          "retrieval/natural-balanced/tfidf/bias@10>0",
                          "retrieval/balanced/tfidf-random/maxskew@100>0"}
    assert all(c["verdict"] == "holds" for c in holds.values()), holds
    nb = holds["retrieval/natural-balanced/tfidf/bias@10>0"]
    # conservative interval: 0.39 - 0.05 - (-0.02 + 0.01) and 0.39 + 0.05 - (-0.02 - 0.01)
    assert nb["mean"] == pytest.approx(0.41)
    assert (nb["lo"], nb["hi"]) == (pytest.approx(0.35), pytest.approx(0.47))
    fails = {c["id"]: c["verdict"] for c in validity_paper001.retrieval_checks(
        _retrieval_json(-0.05, 0.05, -0.10, 0.20, 0.05, 0.15))}
    assert set(fails.values()) == {"fails"}, fails
    assert validity_paper001.retrieval_checks({"skipped": True}) == []


def test_paper001_checks_skip_a_k_that_holds_every_gendered_image():
    """coco-mini at 600 images: 120 test images, 62 of known gender; at K = 100 the top K
    holds all of them and MaxSkew reads 0 whatever the model: K = 50 is judged instead."""
    from biaslab.analysis import validity_paper001
    r = _retrieval_json(0.18, -0.09, 0.39, -0.02, 0.15, 0.09)
    r["setup"] = {"ks": [10, 25, 50, 100], "n_gallery": 120, "n_female": 18, "n_male": 44}
    r["differences"] = {k: {"MaxSkew@50": v["MaxSkew@100"]} for k, v in r["differences"].items()}
    ids = {c["id"] for c in validity_paper001.retrieval_checks(r)}
    assert "retrieval/tfidf-random/maxskew@50>0" in ids
    assert not any("@100" in i for i in ids), ids
