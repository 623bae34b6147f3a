"""DBAC (biaslab.metrics.dbac): hand-computed values of every step, then the metric on toy
caption sets whose bias and direction are known."""
from __future__ import annotations

import numpy as np
import pytest

from biaslab.metrics import dbac as D


def test_caption_probs_by_hand():
    # T->A: the attacker's probability of the true gender, no correctness indicator
    p = D.caption_probs([[0.2, 0.8], [0.6, 0.4], [0.7, 0.3]], [[0, 1], [1, 0], [0, 1]], "T->A")
    assert p.tolist() == pytest.approx([0.8, 0.6, 0.3])
    # A->T: product over categories of t p + (1 - t)(1 - p): 0.9 * (1 - 0.2) = 0.72
    q = D.caption_probs([[0.9, 0.2], [0.5, 0.5]], [[1, 0], [1, 1]], "A->T")
    assert q.tolist() == pytest.approx([0.72, 0.25])
    with pytest.raises(ValueError, match="direction"):
        D.caption_probs([[1.0, 0.0]], [[1, 0]], "A<-T")
    with pytest.raises(ValueError, match="shape"):
        D.caption_probs([[1.0, 0.0]], [[1, 0, 0]], "T->A")


def test_prior_ratio_by_hand():
    y = np.array([[1, 0], [0, 1], [0, 1], [0, 1]])          # P(y) = 1/4, 3/4, 3/4, 3/4
    z = np.array([[1, 1], [1, 1], [0, 1], [0, 0]])          # P(z) = 2/4, 2/4, 1/4, 1/4
    assert D.prior_ratio(y, z).tolist() == pytest.approx([2.0, 2 / 3, 1 / 3, 1 / 3])


def test_dbac_from_probs_by_hand():
    pred_d, tgt_d = [[0.2, 0.8], [0.6, 0.4]], [[0, 1], [1, 0]]     # p = 0.8, 0.6: lD = 0.7
    pred_m, tgt_m = [[0.1, 0.9], [0.9, 0.1]], [[0, 1], [1, 0]]     # p = 0.9, 0.9: lM = 0.9
    other_d, other_m = [[1, 0], [1, 0]], [[1, 0], [0, 1]]
    r = D.dbac_from_probs(pred_d, tgt_d, other_d, pred_m, tgt_m, other_m, "T->A", bayes=False)
    assert r["lambda_D"] == pytest.approx(0.7) and r["lambda_M"] == pytest.approx(0.9)
    assert r["DBAC"] == pytest.approx(0.2 / 1.6)
    # with the prior: D's objects are all equal (P(z) = 1) and its genders split (P(y) = 1/2):
    # factor 2 -> lD = 1.4; M's objects split (P(z) = 1/2): factor 1 -> lM = 0.9
    r = D.dbac_from_probs(pred_d, tgt_d, other_d, pred_m, tgt_m, other_m, "T->A", bayes=True)
    assert r["lambda_D"] == pytest.approx(1.4) and r["lambda_M"] == pytest.approx(0.9)
    assert r["DBAC"] == pytest.approx(-0.5 / 2.3)


def test_mask_objects_matches_caption_objects():
    from biaslab.metrics.dba import caption_objects
    cats = ["dog", "baseball bat", "sports ball", "cell phone", "knife"]
    cap = "A woman holding a baseball bat, two dogs, a soccer ball and her phone; knives."
    text, found = D.mask_objects(cap, cats)
    assert text == "a woman holding a [OBJ] two [OBJ] a soccer [OBJ] and her [OBJ] [OBJ]"
    assert found == set(cats) == caption_objects(cap, cats)
    assert D.mask_objects("a man on a bench", cats) == ("a man on a bench", set())


def test_substitute_nearest_word_above_threshold():
    v = {"dog": np.array([1.0, 0.0]), "cat": np.array([0.0, 1.0]),
         "puppy": np.array([0.9, np.sqrt(1 - 0.81)]),     # cos 0.9 with dog, 0.44 with cat
         "car": np.array([0.3, -np.sqrt(1 - 0.09)])}      # cos 0.3 with dog, < 0 with cat
    out = D.substitute(["a puppy and a car [MASK]"], {"a", "and", "dog", "cat"}, v, "<unk>",
                       threshold=0.5, keep=["[MASK]"])
    assert out == ["a dog and a <unk> [MASK]"]
    # the constant strategy (LIC's): every unseen word is unknown
    assert D.substitute(["a puppy"], {"a", "dog"}, None, "<unk>") == ["a <unk>"]
    # threshold 0.95 rejects the 0.9 neighbour
    assert D.substitute(["puppy"], {"dog", "cat"}, v, "<unk>", threshold=0.95) == ["<unk>"]


def _toy(n_per_gender: int, p_scene_human: float, p_scene_model: float, seed: int = 0):
    """Captions whose scene word follows the gender with a known agreement and whose object
    is independent of both: human captions at ``p_scene_human``, model at ``p_scene_model``."""
    rng = np.random.default_rng(seed)
    genders, human, model = {}, {}, {}
    i = 0
    for g, word, own in (("female", "woman", "kitchen"), ("male", "man", "field")):
        other = "field" if own == "kitchen" else "kitchen"
        for _ in range(n_per_gender):
            obj = ("dog", "cup")[rng.integers(2)]
            s_h = own if rng.random() < p_scene_human else other
            s_m = own if rng.random() < p_scene_model else other
            genders[i] = g
            human[i] = [f"a {word} standing in the {s_h} with a {obj}"]
            model[i] = f"a {word} standing in the {s_m} with a {obj}"
            i += 1
    return genders, human, model


CFG = {"preset": "ci", "epochs": 12, "progress": False}


def _run(model, human, genders, **kw):
    return D.dbac_details(model, human, genders, seeds=3, config=CFG, categories=["dog", "cup"],
                  test_ratio=0.2, **kw)


def test_no_amplification_gives_zero_and_amplifier_direction_is_recovered():
    """Control: model captions = human captions -> DBAC 0 within its CI in both directions.
    Amplifier: the model ties the scene to the gender (agreement 0.6 -> 1.0) and leaves the
    object independent: T->A (context -> gender) rises, its CI above 0; A->T (gender ->
    object) stays 0 within its CI."""
    g, h, _ = _toy(100, 0.6, 0.6)
    same = {i: v[0] for i, v in h.items()}
    ctrl = _run(same, h, g)
    for d in D.DIRECTIONS:
        for key in ("DBAC", "DBAC_direct"):
            r = ctrl[d][key]
            assert r["n"] == 3
            assert r["mean"] - r["ci95"] <= 0 <= r["mean"] + r["ci95"], (d, key, r)
    g, h, m = _toy(100, 0.6, 1.0)
    amp = _run(m, h, g, substitution="constant")
    ta, at = amp["T->A"]["DBAC_direct"], amp["A->T"]["DBAC_direct"]
    assert ta["mean"] - ta["ci95"] > 0, ta
    assert at["mean"] - at["ci95"] <= 0 <= at["mean"] + at["ci95"], at
    assert amp["T->A"]["lambda_M_direct"]["mean"] > amp["T->A"]["lambda_D_direct"]["mean"]
    assert amp["n_test_per_gender"] == 20 and amp["n_train_per_gender"] == 80
    # no reader of a 60 % scene cue beats the Bayes-optimal one: 0.6 * 0.6 + 0.4 * 0.4 = 0.52;
    # the model's scene is the gender itself, which the attacker learns
    assert amp["T->A"]["lambda_D_direct"]["mean"] <= 0.52 + 0.03
    assert amp["T->A"]["lambda_M_direct"]["mean"] > 0.9


def test_bad_arguments_are_named():
    g, h, m = _toy(10, 0.5, 0.5)
    with pytest.raises(ValueError, match="direction"):
        D.dbac_details(m, h, g, directions=("sideways",))
    with pytest.raises(ValueError, match="substitution"):
        D.dbac_details(m, h, g, substitution="glove")
    with pytest.raises(ValueError, match="no image"):
        D.dbac_details(m, {}, g)


@pytest.mark.parametrize("settings, problem", [
    ({"seeds": 0}, "seeds: must be null"), ({"bayes": "yes"}, "bayes: must be true or false"),
    ({"substitution": "glove"}, "substitution: must be"), ({"threshold": 1.5}, "threshold"),
    ({"directions": ["T->A", "T->A"]}, "directions"), ({"trials": 3}, "trials: unknown key"),
    ({"test_ratio": 1.0}, "test_ratio: must be a number in (0, 1)"),
    ("on", "must be null (off) or a mapping")])
def test_settings_are_checked_with_the_param_named(settings, problem):
    with pytest.raises(ValueError, match="eval_captioner.dbac") as e:
        D.DbacSettings.from_mapping(settings)
    assert problem in str(e.value)
    with pytest.raises(ValueError, match=r"published\.dbac\.seeds: must be"):
        D.DbacSettings.from_mapping({"seeds": True}, "published.dbac")    # a bool is no count
    assert D.DbacSettings.from_mapping(None) is None                      # off
    s = D.DbacSettings.from_mapping({"seeds": None, "bayes": False, "substitution": "none",
                                     "threshold": 0, "directions": ["A->T"]})
    assert (s.directions, s.test_ratio, s.seeds) == (("A->T",), 0.2, None)   # the defaults
    assert D.DbacSettings.from_mapping({}) == D.DbacSettings()


def test_evaluate_captions_cli_computes_dbac_on_a_results_file(tmp_path, capsys):
    """``biaslab evaluate-captions --metrics dbac`` on COCO-layout files the test writes: both
    directions with their CIs, L from --dbac-categories, the amplifier's T->A above 0."""
    import json
    from biaslab import cli
    g, h, m = _toy(100, 0.6, 1.0)
    (tmp_path / "pred.json").write_text(json.dumps(
        [{"image_id": i, "caption": c} for i, c in m.items()]))
    (tmp_path / "gender.csv").write_text("image_id,gender\n" + "".join(
        f"{i},{v.capitalize()}\n" for i, v in g.items()))
    (tmp_path / "human.json").write_text(json.dumps({"annotations": [
        {"id": i, "image_id": i, "caption": c[0]} for i, c in h.items()]}))
    (tmp_path / "inst.json").write_text(json.dumps({"categories": [
        {"id": 1, "name": "person"}, {"id": 18, "name": "dog"}, {"id": 47, "name": "cup"}]}))
    rc = cli.main(["evaluate-captions", "--pred", str(tmp_path / "pred.json"), "--gender",
                   str(tmp_path / "gender.csv"), "--human", str(tmp_path / "human.json"),
                   "--metrics", "dbac", "--seeds", "3", "--dbac-substitution", "constant",
                   "--dbac-categories", str(tmp_path / "inst.json"), "--no-progress",
                   "--out", str(tmp_path / "out.json")])
    assert rc == 0
    res = json.loads((tmp_path / "out.json").read_text())["DBAC"]
    assert res["categories"] == ["dog", "cup"] and res["seeds"] == [0, 1, 2]
    assert set(res) >= {"T->A", "A->T", "n_images", "bayes", "substitution"}
    ta = res["T->A"]["DBAC_direct"]
    assert ta["n"] == 3 and ta["mean"] - ta["ci95"] > 0
    # no --human: a usage error naming the option, before any work
    capsys.readouterr()
    assert cli.main(["evaluate-captions", "--pred", str(tmp_path / "pred.json"), "--gender",
                     str(tmp_path / "gender.csv"), "--metrics", "dbac"]) == 2
    assert "--metrics dbac: DBAC compares" in capsys.readouterr().err


def test_dbac_is_one_directions_number_in_points_with_its_details_beside_it():
    """The front door is the details' mean of one direction and correction, x100; a skipped
    direction and an unknown one are errors naming them."""
    g, h, m = _toy(60, 0.6, 1.0)
    det = _run(m, h, g, substitution="constant", directions=("T->A",), bayes=False)
    one = D.dbac(m, h, g, "T->A", prior=False, seeds=3, config=CFG, categories=["dog", "cup"],
                 test_ratio=0.2, substitution="constant")
    assert one == pytest.approx(100 * det["T->A"]["DBAC_direct"]["mean"])
    with pytest.raises(ValueError, match="unknown direction 'sideways'"):
        D.dbac(m, h, g, "sideways")
    with pytest.raises(ValueError, match="DBAC A->T: "):
        D.dbac(m, h, g, "A->T", seeds=1, config=CFG, categories=["tennis racket"],
               test_ratio=0.2, substitution="constant")
