"""Wang et al. 2019's accuracy-matched dataset leakage, on object tables
written here (independent of the synthetic generator)."""
import numpy as np
import pytest

from biaslab.metrics import leakage as L


def test_macro_f1_by_hand():
    # column 0: tp 1, fp 0, fn 0 -> F1 1; column 1: tp 1, fp 1, fn 0 -> F1 2/3
    assert L.macro_f1([[1, 0], [0, 1]], [[1, 1], [0, 1]]) == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert L.macro_f1([[1, 0]], [[0.7, 0.2]]) == pytest.approx(50.0)   # scores binarised
    assert L.macro_f1(np.zeros((0, 2)), np.zeros((0, 2))) is None


def test_lk_d_at_f1_interpolates_and_says_when_clamped():
    curve = [{"f1": 50.0, "LK_D": 30.0}, {"f1": 100.0, "LK_D": 40.0}]
    assert L.lk_d_at_f1(curve, 75.0) == (pytest.approx(35.0), False)
    assert L.lk_d_at_f1(curve, 40.0) == (pytest.approx(30.0), True)
    with pytest.raises(ValueError):
        L.lk_d_at_f1([], 50.0)


def _planted(n, rng):
    """Two objects: 'a' mostly with men, 'b' mostly with women (85 %), one unrelated."""
    g = np.where(rng.random(n) < 0.5, "male", "female")
    man = g == "male"
    a = np.where(man, rng.random(n) < 0.85, rng.random(n) < 0.15)
    b = np.where(man, rng.random(n) < 0.15, rng.random(n) < 0.85)
    c = rng.random(n) < 0.5
    return np.stack([a, b, c], 1).astype(np.float32), list(g)


def test_dataset_leakage_falls_as_the_labels_get_noisier():
    rng = np.random.default_rng(0)
    X, g = _planted(300, rng)
    T, tg = _planted(400, rng)
    kw = dict(rounds=2, attacker=L.Attacker(epochs=10, hidden=(16,)))
    L._CURVE_MEMO.clear()
    curve = L.dataset_leakage_curve(X, g, train_gt=T, train_genders=tg,
                                    flips=(0.0, 0.1, 0.3, 0.5), **kw)
    by_p = {r["p"]: r for r in curve}
    assert by_p[0.0]["f1"] == pytest.approx(100.0)
    # the unperturbed point is paper 000's LK_D itself
    assert by_p[0.0]["LK_D"] == pytest.approx(
        L.leakage_details(X, X, g, train_gt=T, train_pred=T, train_genders=tg, threshold=None,
                          seed=0, **kw)["LK_D"])
    assert by_p[0.5]["f1"] < by_p[0.1]["f1"] < 100.0
    # labels flipped at random carry less gender: p = 0.5 leaves none (Eq. 7 of a chance
    # attacker lies between 25 and 50)
    assert by_p[0.5]["LK_D"] < by_p[0.1]["LK_D"] < by_p[0.0]["LK_D"]
    assert by_p[0.5]["LK_D"] <= 52.0
    assert [r["f1"] for r in curve] == sorted(r["f1"] for r in curve)
    again = L.dataset_leakage_curve(X, g, train_gt=T, train_genders=tg,
                                    flips=(0.0, 0.1, 0.3, 0.5), **kw)
    L._CURVE_MEMO.clear()
    fresh = L.dataset_leakage_curve(X, g, train_gt=T, train_genders=tg,
                                    flips=(0.0, 0.1, 0.3, 0.5), **kw)
    assert again == curve == fresh                       # deterministic, memo or not
    with pytest.raises(ValueError, match="flips"):
        L.dataset_leakage_curve(X, g, train_gt=T, train_genders=tg, flips=(0.7,))


def test_a_noisy_model_is_compared_with_equally_noisy_labels():
    """A model that predicts the ground truth with 20 % of its labels flipped: paper 000's
    Leakage reads negative (it leaks less than clean labels); at matched F1 it is about 0."""
    from biaslab.classify.evaluate import evaluate_outputs
    rng = np.random.default_rng(1)
    X, g = _planted(300, rng)
    T, tg = _planted(400, rng)
    noisy = lambda M, r: np.where(r.random(M.shape) < 0.2, 1 - M, M)   # noqa: E731
    probs = np.concatenate([noisy(X, rng), np.zeros((len(X), 2))], 1)
    tprobs = np.concatenate([noisy(T, rng), np.zeros((len(T), 2))], 1)
    kw = dict(rounds=3, attacker=L.Attacker(epochs=10, hidden=(16,)), seed=0,
              f1_flips=(0.0, 0.05, 0.1, 0.2, 0.3, 0.4))
    out = evaluate_outputs(probs, X, np.ones(len(X), bool), g, None, n_objects=3,
                           has_gender=False, train_probs=tprobs, train_objects=T,
                           train_genders=tg, leakage_kwargs=kw)
    assert out["leakage"] < -5.0
    assert out["LK_D_F1"] < out["LK_D"] and out["leakage_F1_clamped"] is False
    assert abs(out["leakage_F1"]) < abs(out["leakage"])
    assert out["leakage_F1"] == pytest.approx(out["LK_M"] - out["LK_D_F1"])
    # off by default: no f1_flips, no accuracy-matched keys
    kw.pop("f1_flips")
    out = evaluate_outputs(probs, X, np.ones(len(X), bool), g, None, n_objects=3,
                           has_gender=False, train_probs=tprobs, train_objects=T,
                           train_genders=tg, leakage_kwargs=kw)
    assert "leakage_F1" not in out
