"""Filters and weighted rank selection on hand-made inputs (paper 000 Eqs. 2, 4, 6;
GenSynth Eqs. 1-2)."""
import math

import numpy as np
import pandas as pd
import pytest

from biaslab.counterfactual.filters import (color_fidelity, knn_filter, knn_gate, prompt_adherence,
                                            select)


def test_color_fidelity_known_arrays():
    a = np.zeros((28, 28, 3), np.uint8)
    b = a.copy()
    assert color_fidelity(a, b) == math.inf
    b[:] = 51  # 0.2 everywhere: ||diff||_F = 0.2 * sqrt(14*14*3)
    assert color_fidelity(b, a) == pytest.approx(1 / (0.2 * math.sqrt(588)))
    # one 2x2 block of a 28x28 image -> one 14x14 pixel of one channel changes by 1.0
    c = a.copy()
    c[:2, :2, 0] = 255
    assert color_fidelity(c, a) == pytest.approx(1.0)
    # different sizes are compared after downsampling
    assert color_fidelity(np.zeros((56, 42, 3), np.uint8), a) == math.inf


def test_prompt_adherence_is_cosine():
    img = np.array([[1.0, 0.0], [3.0, 4.0]])
    txt = np.array([[2.0, 0.0], [-4.0, 3.0]])
    assert prompt_adherence(img, txt) == pytest.approx([1.0, 0.0])
    with pytest.raises(ValueError):
        prompt_adherence(img, txt[:1])


def _table(rows):
    return pd.DataFrame(rows, columns=["image_id", "group", "j", "p", "o", "c"])


def test_select_hand_made():
    t = _table([
        # (i=1, female): j0 best prompt, j1 best object+color
        (1, "female", 0, 0.9, 0.1, 1.0),
        (1, "female", 1, 0.5, 0.8, 3.0),
        (1, "female", 2, 0.1, 0.5, 2.0),
        # (i=1, male): all scores tied -> smallest j
        (1, "male", 0, 0.3, 0.3, 0.3),
        (1, "male", 1, 0.3, 0.3, 0.3),
    ])
    f = ["p", "o", "c"]
    # equal weights: ranks j0: 1+3+3=7, j1: 2+1+1=4, j2: 3+2+2=7 -> j1
    s = select(t, f, [1, 1, 1])
    assert s.set_index(["image_id", "group"])["j"].to_dict() == {(1, "female"): 1,
                                                                (1, "male"): 0}
    # only prompt adherence -> j0; weights 0 remove filters
    assert select(t, f, [1, 0, 0]).iloc[0]["j"] == 0
    # all weights 0: every rank sum 0 -> tie-break by j
    assert select(t, f, [0, 0, 0]).iloc[0]["j"] == 0
    # [1, 0, 1]: j0 1+3=4, j1 2+1=3, j2 3+2=5 -> j1
    assert select(t, f, [1, 0, 1]).iloc[0]["j"] == 1
    assert list(s.columns[-4:]) == ["rank_p", "rank_o", "rank_c", "rank_sum"]
    with pytest.raises(ValueError, match="weights"):
        select(t, f, [1, 1])


def test_select_ties_share_rank_and_nan_ranks_last():
    t = _table([(1, "f", 0, 0.5, np.nan, 0), (1, "f", 1, 0.5, 0.2, 0),
                (1, "f", 2, 0.1, 0.1, 0)])
    s = select(t, ["p", "o"], [1, 1])
    # p ranks: 1,1,3 (ties share min); o ranks: NaN last=3, 1, 2 -> sums 4, 2, 5 -> j1
    assert s.iloc[0]["j"] == 1 and s.iloc[0]["rank_sum"] == 2


def test_knn_filter_hand_made():
    real = np.array([[0.0, 0], [0, 1], [1, 0], [10, 10], [10, 11]])
    real_g = ["female", "female", "female", "male", "male"]
    synth = np.array([[0.5, 0.5], [10.5, 10.5], [100.0, 100.0], [101.0, 100.0]])
    synth_g = ["female", "female", "male", "male"]
    out = knn_filter(real, real_g, synth, synth_g, k=2, tau_r=0.08, tau_g=0.5)
    # s0: near 3 female reals -> P_R 1, P_G 1; s1: near males -> P_G 0 -> reject
    assert out.loc[0, ["P_R", "P_G"]].tolist() == [1.0, 1.0] and out.loc[0, "accept"]
    assert out.loc[1, "P_G"] == 0.0 and not out.loc[1, "accept"]
    # s2 (100,100): neighbours s3 (d=1) and s1 (d=127.3, closer than real (10,11) at 127.6):
    # a cluster of synthetic images far from every real one -> P_R = 0 -> rejected
    assert out.loc[2, "P_R"] == 0.0 and not out.loc[2, "accept"]


def test_knn_filter_thresholds_are_strict():
    # s0 at (0,1) between a female real (0,0) and a male real (0,2), K=2: P_R = 2/2 = 1,
    # P_G = 1/2 -> not > tau_G = 0.5 -> rejected (Eq. 2 uses strict inequalities)
    out = knn_filter(np.array([[0.0, 0], [0, 2]]), ["female", "male"], np.array([[0.0, 1]]),
                     ["female"], k=2, tau_r=0.08, tau_g=0.5)
    assert out.loc[0, "P_R"] == 1.0 and out.loc[0, "P_G"] == 0.5 and not out.loc[0, "accept"]
    # tau_G just below 0.5 accepts it
    assert knn_filter(np.array([[0.0, 0], [0, 2]]), ["female", "male"], np.array([[0.0, 1]]),
                      ["female"], k=2, tau_g=0.49).loc[0, "accept"]


def test_knn_gate_gensynth_retention_rule():
    # image 1: one accepted edit per group -> kept (its 2 accepted edits only);
    # image 2: every male edit rejected -> dropped entirely, its accepted female edits too;
    # image 3: nothing accepted -> dropped
    rows = [(1, "female", 0, True, 0.1), (1, "female", 1, False, 0.9),
            (1, "male", 0, False, 0.9), (1, "male", 1, True, 0.1),
            (2, "female", 0, True, 0.5), (2, "female", 1, True, 0.6),
            (2, "male", 0, False, 0.5), (2, "male", 1, False, 0.6),
            (3, "female", 0, False, 0.5), (3, "male", 0, False, 0.5)]
    scores = pd.DataFrame(rows, columns=["image_id", "group", "j", "knn_accept", "s"])
    kept, counts = knn_gate(scores)
    assert list(zip(kept.image_id, kept.group, kept.j)) == [(1, "female", 0), (1, "male", 1)]
    assert counts == {"images": 3, "images_kept": 1, "images_dropped": 2,
                      "candidates_accepted": 4, "candidates_kept": 2}
    # the rank selection then chooses among accepted edits only: the rejected j=1 female edit
    # of image 1 scores higher but is not eligible
    sel = select(kept, ["s"], [1])
    assert list(zip(sel.group, sel.j)) == [("female", 0), ("male", 1)]
    with pytest.raises(ValueError, match="knn_accept"):
        knn_gate(scores.drop(columns="knn_accept"))


class _FeatScorer:
    """Identity 'CLIP' on 2-d features; records the texts it encodes."""
    accepts_features = True

    def __init__(self):
        self.texts = []

    def encode_images(self, x):
        return np.asarray(x, np.float64)

    def encode_texts(self, texts):
        self.texts.append(list(texts))
        return np.array([[1.0, 0.0] if "woman" in t else [0.0, 1.0] for t in texts])


class _FeatObjects:
    """Objects from features: 'cup' when x[0] > 0.5, 'dog' when x[1] > 0.5."""
    accepts_features = True

    def predict_sets(self, x):
        return [{n for n, v in zip(("cup", "dog"), row) if v > 0.5} for row in x]


def _images(tmp_path):
    from PIL import Image
    paths = {}
    for name, value in (("orig", 0), ("c0", 0), ("c1", 51), ("c2", 255)):
        p = tmp_path / f"{name}.png"
        Image.new("RGB", (28, 28), (value,) * 3).save(p)
        paths[name] = str(p)
    return paths


def test_score_candidates_hand_computed(tmp_path):
    from biaslab.counterfactual.filters import score_candidates
    p = _images(tmp_path)
    # features by path: c0 -> (1, 0), c1 -> (0.6, 0.8), c2 -> (0, 1); original -> (1, 0)
    feats = {p["orig"]: [1.0, 0.0], p["c0"]: [1.0, 0.0], p["c1"]: [0.6, 0.8],
             p["c2"]: [0.0, 1.0]}
    calls = []

    def encode(table):
        calls.append(len(table))
        assert table["image_id"].is_unique
        return np.array([feats[x] for x in table["path"]], np.float32)

    cands = pd.DataFrame({"image_id": [7, 7, 7], "group": ["female"] * 3, "j": [0, 1, 2],
                          "path": [p["c0"], p["c1"], p["c2"]],
                          "prompt": ["a woman", "a woman", "a woman"]})
    scorer = _FeatScorer()
    timings = {}
    out = score_candidates(cands, {7: p["orig"]}, scorer, _FeatObjects(), encode=encode,
                           real_groups={7: "male"}, knn={"k": 3, "tau_r": 0.1, "tau_g": 0.5},
                           timings=timings)
    assert scorer.texts == [["a woman"]]          # one distinct prompt, encoded once
    assert calls == [3, 1]                        # candidates once, originals once
    assert out["j"].tolist() == [0, 1, 2]         # row order kept
    assert out["prompt_adherence"].tolist() == pytest.approx([1.0, 0.6, 0.0])
    # original {cup}; c0 {cup} -> F1 1; c1 {cup, dog} -> 2/3; c2 {dog} -> 0
    assert out["object_consistency"].tolist() == pytest.approx([1.0, 2 / 3, 0.0])
    assert out["color_fidelity"].tolist() == pytest.approx(
        [math.inf, 1 / (0.2 * math.sqrt(588)), 1 / math.sqrt(588)])
    # KNN over {orig (male), c0, c1, c2 (female)}, K = 3 -> every neighbourhood is the other 3
    assert out["knn_P_R"].tolist() == pytest.approx([1 / 3] * 3)
    assert out["knn_P_G"].tolist() == pytest.approx([2 / 3] * 3)
    assert out["knn_accept"].tolist() == [True] * 3
    assert set(timings) == {"features", "prompt_adherence", "object_consistency",
                            "color_fidelity", "knn"}


def test_score_candidates_errors(tmp_path):
    from biaslab.counterfactual.filters import score_candidates
    p = _images(tmp_path)
    cands = pd.DataFrame({"image_id": [7], "group": ["male"], "path": [p["c0"]],
                          "prompt": ["a man"]})
    with pytest.raises(ValueError, match="no original image"):
        score_candidates(cands, {8: p["orig"]}, _FeatScorer(), _FeatObjects(),
                         encode=lambda t: np.zeros((len(t), 2)))
    with pytest.raises(ValueError, match="encode is required"):
        score_candidates(cands, {7: p["orig"]}, _FeatScorer(), _FeatObjects())
    with pytest.raises(ValueError, match="lacks column"):
        score_candidates(cands.drop(columns="prompt"), {7: p["orig"]}, _FeatScorer(),
                         _FeatObjects(), encode=lambda t: np.zeros((len(t), 2)))


def test_select_worst_is_the_largest_rank_sum():
    import pandas as pd
    from biaslab.counterfactual.filters import select
    # one (image, group), three candidates: a is best on both filters, c worst on both
    s = pd.DataFrame({"image_id": [1, 1, 1], "group": ["male"] * 3, "j": [0, 1, 2],
                      "f1": [0.9, 0.5, 0.1], "f2": [0.8, 0.6, 0.2]})
    assert select(s, ["f1", "f2"], [1, 1]).iloc[0]["j"] == 0
    w = select(s, ["f1", "f2"], [1, 1], worst=True).iloc[0]
    assert w["j"] == 2 and w["rank_sum"] == 6.0


def test_a_filters_settings_come_from_its_params_group(tmp_path):
    """Colour fidelity's thumbnail side is its setting ``grid`` (paper 000 Eq. 6: 14), read
    from ``filters.filter_params.color_fidelity`` and checked by name."""
    from biaslab import registry
    from biaslab.counterfactual.filters import ColorFidelitySettings, score_candidates
    from biaslab.runtime.validate import ParamError, check_params
    assert registry.FILTERS.settings_for(["color_fidelity", "prompt_adherence"], None) == {
        "color_fidelity": ColorFidelitySettings(grid=14), "prompt_adherence": None}
    s = registry.FILTERS.settings_for(
        ["color_fidelity"], {"filters": {"filter_params": {"color_fidelity": {"grid": 1}}}})
    assert s["color_fidelity"].grid == 1
    p = _images(tmp_path)
    cands = pd.DataFrame({"image_id": [7, 7], "group": ["female"] * 2,
                          "path": [p["c1"], p["c2"]], "prompt": ["a woman"] * 2})

    def colour(settings):
        return score_candidates(cands, {7: p["orig"]}, _FeatScorer(), _FeatObjects(),
                                encode=lambda t: np.zeros((len(t), 2), np.float32),
                                names=["color_fidelity"], settings=settings)["color_fidelity"]
    # grey 51 against black: 0.2 per value; 1 x 1 x 3 values against 14 x 14 x 3
    assert colour(s).tolist() == pytest.approx([1 / (0.2 * math.sqrt(3)), 1 / math.sqrt(3)])
    assert colour(None).tolist() == pytest.approx([1 / (0.2 * math.sqrt(588)),
                                                   1 / math.sqrt(588)])
    for bad, param in (({"color_fidelity": {"grid": 0}}, "filters.filter_params.color_fidelity"),
                       ({"color_fidelity": {"size": 3}}, "filters.filter_params.color_fidelity"),
                       ({"prompt_adherence": {}}, "filters.filter_params.prompt_adherence"),
                       ([1], "filters.filter_params")):
        with pytest.raises(ParamError) as e:
            check_params({"filters": {"filter_params": bad}}, load_components=True)
        assert e.value.param.startswith(param), (bad, e.value.param)
