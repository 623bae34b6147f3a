"""Model-level baselines of paper 000 Table 1 (biaslab.classify.methods): each loss / weight /
update / inference rule against a hand computation, gradient reversal, training + save/load
of every method, the n/a Ratio of the adversarial model, and (slow) the planted-bias check
that GroupDRO and the adversary lower Leakage relative to Original."""
import json
import math

import numpy as np
import pytest
import torch

from biaslab import classify as C
from biaslab import registry
from biaslab.classify.methods import get_method
from biaslab.runtime.settings import field_names
from biaslab.classify.methods.adversarial import grad_reverse
from biaslab.classify.methods.focal import focal_bce
from biaslab.classify.methods.group_dro import dro_update, group_losses
from biaslab.classify.methods.reweight import class_balanced_weights, upweight_weights
from tests.test_classify import _manifest, _toy

LN2, LN4, LN43 = math.log(2), math.log(4), math.log(4 / 3)
LN3 = math.log(3)


# small inputs on a shared 2-core machine: one torch thread is fastest (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _t(a):
    return torch.tensor(a, dtype=torch.float32)


# ------------------------------------------------------------------ losses and weights
def test_focal_loss_hand_computed():
    """Lin et al. 2017 Eq. 5, gamma 2: logit 0 -> p_t = .5 -> .25 ln 2; logit ln 3 with y=1
    -> p_t = .75 -> .0625 ln(4/3); with y=0 -> p_t = .25 -> .5625 ln 4."""
    z, y = _t([[0, LN3], [LN3, 0]]), _t([[1, 1], [0, 1]])
    e = [.25 * LN2, .0625 * LN43, .5625 * LN4, .25 * LN2]
    assert float(focal_bce(z, y, torch.ones(2, 2), 2.0)) == pytest.approx(sum(e) / 4, rel=1e-6)
    m = _t([[1, 0], [1, 1]])                       # the masked entry does not count
    assert float(focal_bce(z, y, m, 2.0)) == pytest.approx((e[0] + e[2] + e[3]) / 3, rel=1e-6)
    bce = (LN2 + LN43 + LN4 + LN2) / 4             # gamma 0 = plain BCE
    assert float(focal_bce(z, y, torch.ones(2, 2), 0.0)) == pytest.approx(bce, rel=1e-6)
    # alpha 0.25: positives x .25, negatives x .75
    ea = [.25 * e[0], .25 * e[1], .75 * e[2], .25 * e[3]]
    assert float(focal_bce(z, y, torch.ones(2, 2), 2.0, 0.25)) == pytest.approx(
        sum(ea) / 4, rel=1e-6)


def test_class_balanced_weights_hand_computed():
    """Cui et al. 2019 with beta 0.5: output 0 has 1 positive, 3 negatives -> E = 1 and
    (1 - .125) / .5 = 1.75 -> weights 1 : 4/7, normalised to sum 2: 14/11, 8/11 (row 4 is
    masked out of output 0: not counted)."""
    y = np.array([[1, 1], [0, 1], [0, 0], [0, 0], [1, 0]], np.float32)
    m = np.array([[1, 1], [1, 1], [1, 1], [1, 1], [0, 1]], np.float32)   # row 4 out of output 0
    w = class_balanced_weights(y, m, 0.5)
    np.testing.assert_allclose(w[:4, 0], [14 / 11, 8 / 11, 8 / 11, 8 / 11], rtol=1e-6)
    # output 1: 2 positives, 3 negatives: E = 1.5 and 1.75 -> 2/3 : 4/7 = 14 : 12 -> 14/13, 12/13
    np.testing.assert_allclose(w[:, 1], [14 / 13, 14 / 13, 12 / 13, 12 / 13, 12 / 13],
                               rtol=1e-6)
    np.testing.assert_allclose(class_balanced_weights(y, m, 0.0), 1.0)   # beta 0: none
    with pytest.raises(ValueError, match="beta"):
        class_balanced_weights(y, m, 1.0)


def test_upweight_weights_make_gender_independent_of_each_object():
    """Object c: woman with c x3, woman without x1, man with x1, man without x3 (N = 8, all
    marginals 4): w = 4 * 4 / (8 * n_cell) -> 2/3, 2, 2, 2/3; every weighted cell = 2."""
    rows = [(i, "female", ["cup"]) for i in range(3)] + [(3, "female", ["tie"])] + \
        [(4, "male", ["cup"])] + [(i, "male", ["tie"]) for i in (5, 6, 7)]
    m = _manifest(rows)
    y, mask = C.label_targets(m, ["cup"], labelled_only=True)
    w = upweight_weights(y, mask, 1)
    np.testing.assert_allclose(w[:, 0], [2 / 3] * 3 + [2, 2] + [2 / 3] * 3, rtol=1e-6)
    assert (w[:, 1:] == 1).all()                         # gender outputs keep weight 1
    for g in ("female", "male"):
        for v in (0, 1):
            cell = (m["gender"] == g).to_numpy() & (y[:, 0] == v)
            assert w[cell, 0].sum() == pytest.approx(2.0)


def test_group_dro_update_and_loss_hand_computed():
    """Sagawa et al. Algorithm 1 on one object: groups k = 2 * gender + presence. Rows
    (woman, cup), (woman, -), (man, cup), (man, -) with object logits 0, 0, ln 3, ln 3 ->
    losses ln 2, ln 2, ln(4/3), ln 4 in groups 1, 0, 3, 2."""
    q = dro_update(torch.full((1, 4), .25), _t([[1.0, 0.0, 2.0, 0.5]]), 0.1)
    e = np.exp([0.1, 0.0, 0.2, 0.05])
    np.testing.assert_allclose(q.numpy()[0], e / e.sum(), rtol=1e-6)

    m = _manifest([(0, "female", ["cup"]), (1, "female", ["x"]), (2, "male", ["cup"]),
                   (3, "male", ["x"])])
    y, mask = C.label_targets(m, ["cup"])
    meth = get_method("group_dro", {"eta": 0.5})
    meth.setup(y, mask, 1)
    assert meth.groups[:, 0].tolist() == [1, 0, 3, 2]
    logits = _t([[0, 0, 0], [0, 0, 0], [LN3, 0, 0], [LN3, 0, 0]])
    L, counts = group_losses(logits, _t(y), _t(mask), meth.groups, 1)
    np.testing.assert_allclose(L.numpy()[0], [LN2, LN2, LN4, LN43], rtol=1e-6)
    assert counts.numpy()[0].tolist() == [1, 1, 1, 1]
    loss = meth.loss(lambda x: logits, None, _t(y), _t(mask), torch.arange(4))
    w = np.exp(0.5 * np.array([LN2, LN2, LN4, LN43]))
    q = w / w.sum()
    expected = (float(q @ [LN2, LN2, LN4, LN43]) + 2 * LN2) / 3   # + gender outputs at 0
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    np.testing.assert_allclose(meth.q.numpy()[0], q, rtol=1e-6)
    # the worst group (man without cup, loss ln 4) gains weight
    assert int(np.argmax(meth.q.numpy()[0])) == 2


def test_gradient_reversal_flips_the_adversary_gradient_into_the_encoder():
    torch.manual_seed(0)
    enc, adv = torch.nn.Linear(4, 3), torch.nn.Linear(3, 1)
    x, g = torch.randn(5, 4), _t([1, 0, 1, 1, 0])

    def grads(reverse, lam=0.7):
        enc.zero_grad()
        adv.zero_grad()
        h = enc(x)
        z = adv(grad_reverse(h, lam) if reverse else h)[:, 0]
        torch.nn.functional.binary_cross_entropy_with_logits(z, g).backward()
        return enc.weight.grad.clone(), adv.weight.grad.clone()

    e_plain, a_plain = grads(False)
    e_rev, a_rev = grads(True)
    torch.testing.assert_close(e_rev, -0.7 * e_plain)          # encoder: -lambda x gradient
    torch.testing.assert_close(a_rev, a_plain)                  # adversary: unchanged
    assert e_plain.abs().sum() > 0


# ------------------------------------------------------------------ domain methods
def _hand_model(method, raw_weight):
    """A classifier on 4-d features whose raw outputs are ``features @ raw_weight.T``."""
    raw_weight = np.asarray(raw_weight, np.float32)
    head = C.build_head(4, raw_weight.shape[0], [], 0.0)
    with torch.no_grad():
        head.net[0].weight.copy_(torch.from_numpy(raw_weight))
        head.net[0].bias.zero_()
    return C.GenderObjectClassifier(head, ["cup"], {"d_img": 4, "hidden": [], "dropout": 0.0,
                                                     "method": method})


def test_domain_independent_sums_the_per_domain_logits():
    """One object, raw outputs [cup|woman, cup|man, woman, man] = the features: DomInd's
    P(cup) = sigmoid(z_w + z_m) (sum of scores, Wang et al. 2020b); DomDisc's =
    sigmoid(z_w) + sigmoid(z_m) (sum of the joint probabilities)."""
    x = np.array([[1.0, -3.0, 0.5, -0.5], [2.0, 1.0, 0.0, 0.0]], np.float32)
    ind = _hand_model("domain_independent", np.eye(4))
    p = ind.predict_proba(x)
    assert ind.outputs == ["cup", "woman", "man"] and p.shape == (2, 3)
    sig = lambda v: 1 / (1 + np.exp(-np.asarray(v, np.float64)))  # noqa: E731
    np.testing.assert_allclose(p[:, 0], sig([-2.0, 3.0]), rtol=1e-6)
    np.testing.assert_allclose(p[:, 1:], sig(x[:, 2:]), rtol=1e-6)
    disc = _hand_model("domain_discriminative", np.eye(4))
    pd_ = disc.predict_proba(x)
    np.testing.assert_allclose(pd_[0, 0], sig(1.0) + sig(-3.0), rtol=1e-5)
    assert pd_[1, 0] == pytest.approx(1 - 1e-6, abs=1e-6)     # 0.88 + 0.73 clipped below 1
    # targets: DomInd trains each head on its own gender only; DomDisc on the joint label
    m = _manifest([(0, "female", ["cup"]), (1, "male", ["cup"]), (2, "male", ["x"])])
    y, mask = C.label_targets(m, ["cup"])
    yi, mi = get_method("domain_independent").raw_targets(y, mask, 1)
    assert yi[:, :2].tolist() == [[1, 1], [1, 1], [0, 0]]
    assert mi[:, :2].tolist() == [[1, 0], [0, 1], [0, 1]]
    yd, md = get_method("domain_discriminative").raw_targets(y, mask, 1)
    assert yd[:, :2].tolist() == [[1, 0], [0, 1], [0, 0]] and (md[:, :2] == 1).all()
    assert (yi[:, 2:] == y[:, 1:]).all() and (yd[:, 2:] == y[:, 1:]).all()


def test_domain_independent_learns_a_two_domain_toy():
    """Two domains whose object cue differs: in woman images the cup shows on feature 1, in
    man images on feature 2 (the other feature is noise). Each domain head learns its own
    cue; the summed-logit rule then finds cups of both domains (AP > 0.9 on each)."""
    from sklearn.metrics import average_precision_score
    rng = np.random.default_rng(0)
    n = 400
    g = rng.integers(0, 2, n)
    cup = rng.random(n) < 0.5
    x = rng.normal(0, 1, (n, 4)).astype(np.float32)
    x[:, 0] += 4 * (g - 0.5)
    x[:, 1] += np.where((g == 0) & cup, 3.0, 0.0)
    x[:, 2] += np.where((g == 1) & cup, 3.0, 0.0)
    m = _manifest([(i, "male" if gi else "female", ["cup"] if c else ["x"])
                   for i, (gi, c) in enumerate(zip(g, cup))])
    clf, _ = C.train_classifier(x, m, ["cup"], seed=0, method="domain_independent",
                                settings=C.TrainSettings(epochs=80, lr=1e-2, patience=10))
    p = clf.predict_proba(x)[:, 0]
    for d in (0, 1):
        assert average_precision_score(cup[g == d], p[g == d]) > 0.9


# ------------------------------------------------------------------ every method trains
@pytest.mark.parametrize("method", sorted(set(registry.METHODS.names()) - {"erm"}))
def test_every_method_trains_saves_and_reloads(method, tmp_path):
    x, m = _toy(n=80)
    clf, hist = C.train_classifier(x, m, ["cup", "tie"], seed=0, method=method,
                                   settings=C.TrainSettings(epochs=4, lr=1e-2))
    assert clf.config["method"] == method and len(hist) == 4
    assert set(clf.config["method_params"]) == field_names(registry.METHODS.load(method).Settings)
    assert np.isfinite([h["train_loss"] for h in hist]).all()
    again, _ = C.train_classifier(x, m, ["cup", "tie"], seed=0, method=method,
                                  settings=C.TrainSettings(epochs=4, lr=1e-2))
    for k, v in clf.head.state_dict().items():           # deterministic given the seed
        assert torch.equal(v, again.head.state_dict()[k]), k
    clf.save(tmp_path / method)
    back = C.GenderObjectClassifier.load(tmp_path / method)
    np.testing.assert_array_equal(back.predict_proba(x), clf.predict_proba(x))
    p = clf.predict_proba(x)
    assert p.shape == (80, 2 if method == "adversarial" else 4)
    assert ((p >= 0) & (p <= 1)).all()


def test_adversarial_has_no_gender_outputs_and_ratio_is_na():
    x, m = _toy(n=80)
    clf, _ = C.train_classifier(x, m, ["cup", "tie"], seed=0, method="adversarial",
                                settings=C.TrainSettings(epochs=3))
    assert clf.outputs == ["cup", "tie"] and not clf.has_gender
    assert clf.config["hidden"] == [256]                 # an encoder layer to clean
    with pytest.raises(ValueError, match="no gender outputs"):
        clf.gender_proba(x)
    y = C.object_matrix(m["objects"], clf.labels)
    r = C.evaluate(clf, x, y, np.ones(80, bool), m["gender"].tolist(), x,
                   leakage_kwargs={"rounds": 1})
    assert r["ratio"] is None and r["ratio_flag"] == "n/a" and "no gender" in r["ratio_na"]
    assert r["gender_acc"] is None and r["masked_gender_auc"] is None
    assert r["mAP"] is not None and r["leakage"] is not None
    rec = C.json_record([r["ratio"]] * 3)                # counted as missing, not dropped
    assert rec["n"] == 0 and rec["n_missing"] == 3


def test_erm_is_the_default_and_unknown_methods_or_params_fail():
    x, m = _toy(n=40)
    a, _ = C.train_classifier(x, m, ["cup"], seed=0, settings=C.TrainSettings(epochs=2))
    b, _ = C.train_classifier(x, m, ["cup"], seed=0, settings=C.TrainSettings(epochs=2),
                              method="erm")
    np.testing.assert_array_equal(a.predict_proba(x), b.predict_proba(x))
    assert a.config["method"] == "erm" and a.config["method_params"] == {}
    with pytest.raises(ValueError, match="unknown classifier method"):
        get_method("dro")
    with pytest.raises(ValueError, match="group_dro"):
        get_method("group_dro", {"step": 1})
    with pytest.raises(ValueError, match="focal.gamma"):
        get_method("focal", {"gamma": -1})


# ------------------------------------------------------------------ planted bias (slow)
@pytest.fixture(scope="module")
def planted_methods(tmp_path_factory):
    """Original vs GroupDRO vs Adversarial on the planted-bias synthetic data (bias 0.9, 300
    images, the world of tests/test_classify.py), 3 seeds each."""
    from biaslab.models.features import load_image_encoder
    from tests.test_classify import _synthetic_world
    enc = load_image_encoder("efficientnet_lite0", image_size=128)
    w = _synthetic_world(tmp_path_factory.mktemp("planted_m") / "bias0.9", 0.9, 300, enc)
    labels = C.select_labels(w["train"], 1, rule="any")
    y = C.object_matrix(w["test"]["objects"], labels)
    lab = w["train"]["objects"].apply(len).gt(0).to_numpy()
    out = {}
    for method in ("erm", "group_dro", "adversarial"):
        rows = []
        for seed in (0, 1, 2):
            clf, _ = C.train_classifier(w["f_train"], w["train"], labels, seed=seed,
                                        method=method, settings=C.TrainSettings(epochs=60, lr=1e-3))
            rows.append(C.evaluate(clf, w["f_test"], y, w["test"]["labelled"].to_numpy(),
                                   w["test"]["gender"].tolist(), w["f_masked"],
                                   masked_genders=w["masked"]["gender"].tolist(),
                                   train_feats=w["f_train"][lab],
                                   train_objects=C.object_matrix(w["train"]["objects"][lab],
                                                                 labels),
                                   train_genders=w["train"]["gender"][lab].tolist(),
                                   leakage_kwargs={"rounds": 10}))
        out[method] = {k: [r.get(k) for r in rows] for k in ("mAP", "leakage", "LK_M", "LK_D",
                                                             "ratio")}
    print(json.dumps(out, indent=1))
    return out


def _mean(v):
    v = [x for x in v if x is not None]
    return float(np.mean(v)) if v else float("nan")


@pytest.mark.slow
def test_adversary_lowers_leakage_on_planted_bias(planted_methods):
    """Paper 000 Table 1 / Wang et al. 2019: removing gender from the representation lowers
    Leakage (LK_M - LK_D) relative to Original, at some cost in mAP."""
    erm, adv = planted_methods["erm"], planted_methods["adversarial"]
    assert _mean(adv["leakage"]) < _mean(erm["leakage"])
    assert all(r is None for r in adv["ratio"])


@pytest.mark.slow
def test_group_dro_lowers_leakage_on_planted_bias(planted_methods):
    erm, dro = planted_methods["erm"], planted_methods["group_dro"]
    assert _mean(dro["leakage"]) < _mean(erm["leakage"])


# ------------------------------------------------------------------ a method's settings
def test_a_methods_settings_are_its_class_settings_checked_by_name():
    """Each method's hyper-parameters are its class's ``Settings`` (typed fields, defaults,
    range): the entry names them, ``get_method`` fills them, params.yaml's composition checks
    them by dotted name, and a stage start checks the method names without importing any
    method's module."""
    import subprocess
    import sys
    from biaslab import registry
    from biaslab.runtime.validate import ParamError, check_params
    for e in registry.METHODS.builtins():
        if e.name != "erm":
            assert e.settings_class() is registry.METHODS.load(e.name).Settings, e.name
    m = get_method("focal", {"gamma": 3})
    assert (m.settings.gamma, m.settings.alpha) == (3, None)
    assert m.params == {"gamma": 3, "alpha": None}              # recorded in the model config
    with pytest.raises(ValueError, match=r"classifier.method_params.focal.gamma must be float"):
        get_method("focal", {"gamma": "2"})
    bad = {"classifier": {"method_params": {"focal": {"gamma": -1.0}}}}
    check_params(bad)                                          # a stage start: names only
    with pytest.raises(ParamError) as e:
        check_params(bad, load_components=True)                # composition, biaslab plan
    assert e.value.param == "classifier.method_params.focal.gamma"
    for p, param in (({"method_params": {"focl": {"gamma": 1}}}, "classifier.method_params.focl"),
                     ({"method_params": {"erm": {}}}, "classifier.method_params.erm"),
                     ({"method_params": {"focal": 2}}, "classifier.method_params.focal"),
                     ({"method_params": [1]}, "classifier.method_params")):
        with pytest.raises(ParamError) as e:
            check_params({"classifier": p})
        assert e.value.param == param
    code = ("import sys; from biaslab.runtime.validate import check_params; "
            "check_params({'classifier': {'method_params': {'focal': {'gamma': 1.0}}}}); "
            "print(any(m.startswith('biaslab.classify') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
