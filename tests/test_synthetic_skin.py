"""Skin tone in the synthetic generator: the second protected attribute's labels,
its planted bias at b_t = 0 and 0.9, and the renderer drawing the requested tone."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from biaslab.data import synthetic as S
from biaslab.data.synthetic import figures as SF
from biaslab.data.synthetic.render import image_stream, image_key

N = 20000


def _rate(x: np.ndarray) -> tuple[float, float]:
    """Mean and its 6-sigma tolerance of a Bernoulli sample."""
    m = float(x.mean())
    return m, 6 * math.sqrt(max(m * (1 - m), 0.01) / len(x))


def test_skin_tone_is_a_fair_coin_independent_of_gender():
    t = S.sample_truth(N, 0.8, seed=5)
    light = t["skin"] == S.LIGHT
    assert set(np.unique(t["skin"])) == {S.LIGHT, S.DARK}
    m, tol = _rate(light)
    assert abs(m - 0.5) < tol
    f = t["gender"] == S.FEMALE
    # P(light | female) - P(light | male): 0 up to sampling error
    assert abs(light[f].mean() - light[~f].mean()) < 6 * math.sqrt(0.25 / (N / 4))


@pytest.mark.parametrize("skin_bias", [0.0, 0.9])
def test_planted_skin_bias_recovered(skin_bias):
    """P(object | tone) = P_OBJECT (1 + s_t b_t) for bicycle (light) and dog (dark); every
    gender-associated object column is the same draw at any b_t (disjoint objects)."""
    t = S.sample_truth(N, 0.8, seed=5, skin_bias=skin_bias)
    t0 = S.sample_truth(N, 0.8, seed=5, skin_bias=0.0)
    light = t["skin"] == S.LIGHT
    for k, o in enumerate(S.OBJECTS):
        tone = S.SKIN_OBJECT_ASSOCIATION.get(o)
        if tone is None:
            assert np.array_equal(t["objects"][:, k], t0["objects"][:, k]), o
            continue
        s = 1.0 if tone == S.LIGHT else -1.0
        p_l, tol_l = _rate(t["objects"][light, k])
        p_d, tol_d = _rate(t["objects"][~light, k])
        assert abs(p_l - S.P_OBJECT * (1 + s * skin_bias)) < tol_l, (o, p_l)
        assert abs(p_d - S.P_OBJECT * (1 - s * skin_bias)) < tol_d, (o, p_d)
    assert np.array_equal(t["gender"], t0["gender"]) and np.array_equal(t["skin"], t0["skin"])
    assert np.array_equal(t["scene"], t0["scene"]) and np.array_equal(t["cast"], t0["cast"])


def test_skin_bias_out_of_range_is_refused():
    with pytest.raises(ValueError, match="skin_bias"):
        S.sample_truth(10, 0.5, seed=0, skin_bias=1.5)


def _luminance_sum(colour) -> int:
    return int(sum(colour))


def test_figure_draws_the_requested_tone_and_nothing_else():
    """The head is the second-last part (the hair cap is last); light colours sum to >= 477
    after jitter, dark ones to <= 422."""
    for seed in range(40):
        base, kb = SF.person_figure(np.random.default_rng(seed), S.FEMALE)
        i = int(np.random.default_rng(seed).integers(6))
        assert S.skin_tone_of(i) == (S.LIGHT if i < S.N_LIGHT else S.DARK)
        for tone in S.SKIN_TONES:
            parts, kps = SF.person_figure(np.random.default_rng(seed), S.FEMALE, tone)
            head = parts[-2][1]
            assert (_luminance_sum(head) > 450) == (tone == S.LIGHT), (seed, tone, head)
            assert kps == kb                                    # pose unchanged
            changed = [k for k, ((_, c), (_, c0)) in enumerate(zip(parts, base)) if c != c0]
            if tone == S.skin_tone_of(i):
                assert not changed
            else:                                               # only skin-coloured parts
                assert changed and all(parts[k][1] == head for k in changed)
    with pytest.raises(ValueError, match="skin"):
        SF.person_figure(np.random.default_rng(0), S.FEMALE, "medium")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    out = tmp_path_factory.mktemp("skin") / "raw"
    summary = S.generate(out, n_images=24, bias=0.8, seed=2, image_size=96, skin_bias=0.9,
                         test_images=6, test_gender_ratio=2.0)
    return out, summary


def test_generate_writes_bb_skin_and_truth(planted):
    out, summary = planted
    with open(out / "annotations" / "perceived_gender_skin.csv", newline="") as f:
        rows = {int(r["image_id"]): r for r in csv.DictReader(f)}
    truth = S.read_truth(out)
    assert set(rows) == set(truth) and len(truth) == 30
    for iid, t in truth.items():
        assert rows[iid]["bb_skin"] == {"light": "Light", "dark": "Dark"}[t["skin"]]
        assert t["skin"] == S.appearance_skin(2, iid)
    assert summary["params"]["skin_bias"] == 0.9
    assert sum(summary["skin"].values()) == 24
    assert sum(summary["test"]["skin"].values()) == 6
    assert set(summary["skin_objects"]) == set(S.SKIN_OBJECT_ASSOCIATION)
    assert "Skin tone" in (out / "README.md").read_text()


def test_render_scene_skin_counterfactual_changes_only_the_person(planted):
    out, _ = planted
    truth = S.read_truth(out)
    iid = 1
    t = truth[iid]
    kw = dict(seed=2, image_size=96, gender=t["gender"], scene=t["scene"], cast=t["cast"],
              objects=t["objects"])
    orig = S.render_scene(iid, **kw)
    same = S.render_scene(iid, **kw, skin=t["skin"])
    assert np.array_equal(orig.image, same.image)
    other = S.LIGHT if t["skin"] == S.DARK else S.DARK
    cf = S.render_scene(iid, **kw, skin=other)
    diff = np.any(cf.image != orig.image, axis=2)
    assert diff.any() and not (diff & ~orig.person_mask).any()
    with pytest.raises(ValueError, match="skin"):
        S.render_scene(iid, **kw, skin="olive")


def test_coco_reader_keeps_the_skin_labels(planted):
    """The prepared perceived table carries bb_skin (biaslab.data.coco)."""
    from biaslab.data.coco import read_coco
    out, _ = planted
    tables, _ = read_coco(out, check_files=False, progress=False)
    perceived = tables["perceived_gender"]
    truth = S.read_truth(out)
    assert len(perceived) == 30
    for r in perceived.itertuples():
        assert r.skin == {"light": "Light", "dark": "Dark"}[truth[r.image_id]["skin"]]


def test_stream_helper_matches_appearance_skin():
    rng = image_stream(7, image_key(3), "appearance")
    assert S.appearance_skin(7, 3) == S.skin_tone_of(int(rng.integers(6)))
