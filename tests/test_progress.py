"""Progress bars (no stage silent for minutes): ``biaslab.runtime.progress.bar`` on stderr, its
terminal / log / off modes, and the loops that use it (leakage attackers, classifier epochs,
textclf training behind LIBRA's f_g / f_a) -- bars never change what is returned or saved."""
from __future__ import annotations

import io
import sys

import numpy as np

from biaslab.runtime import progress as P


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_explicit_bar_in_a_log_writes_whole_lines(capsys):
    for _ in P.bar(range(5), desc="tiny", progress=True):
        pass
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err and err.endswith("\n")
    assert lines[0].startswith("tiny:   0%") and "0/5" in lines[0]
    assert lines[-1].startswith("tiny: 100%") and "5/5" in lines[-1]
    assert len(lines) == 2   # start + end: the 30 s interval swallows the rest


def test_off_and_short_auto_bars_print_nothing(capsys, monkeypatch):
    monkeypatch.delenv(P.ENV, raising=False)
    for _ in P.bar(range(5), desc="off", progress=False):
        pass
    for _ in P.bar(range(5), desc="auto", progress=None):   # log mode: 10 s delay
        pass
    assert capsys.readouterr().err == ""


def test_auto_bar_on_a_terminal_is_an_ordinary_tqdm(monkeypatch):
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.delenv(P.ENV, raising=False)
    for _ in P.bar(range(3), desc="tty", progress=None, mininterval=0):
        pass
    out = tty.getvalue()
    assert "\r" in out and "3/3" in out and "tty" in out


def test_env_overrides_auto_only(monkeypatch):
    monkeypatch.setenv(P.ENV, "0")
    assert P.resolve(None) is False and P.resolve(True) is True
    monkeypatch.setenv(P.ENV, "1")
    assert P.resolve(None) is True and P.resolve(False) is False
    monkeypatch.setenv(P.ENV, "yes")   # not 0/1: ignored
    assert P.resolve(None) is True


def _leak_data(seed):
    rng = np.random.default_rng(seed)
    g = np.array(["female", "male"] * 20)
    gt = rng.integers(0, 2, (40, 3)).astype(float)
    return gt, gt.copy(), g


def test_leakage_bar_counts_attacker_fits_and_leaves_the_result_alone(capsys):
    from biaslab.metrics.leakage import Attacker, leakage_details as leakage
    gt, pred, g = _leak_data(123)
    kw = dict(rounds=2, seed=4711, attacker=Attacker(epochs=2), n_test_per_group=4)
    quiet = leakage(gt, pred, g, progress=False, **kw)   # fills the dataset-attacker memo
    assert capsys.readouterr().err == ""
    shown = leakage(gt, pred, g, progress=True, **kw)
    err = capsys.readouterr().err
    assert "leakage attackers" in err and "2/2" in err   # memo hit: model attackers only
    assert shown == quiet
    gt2, pred2, g2 = _leak_data(321)
    leakage(gt2, pred2, g2, progress=True, **kw)
    assert "4/4" in capsys.readouterr().err              # 2 rounds x (dataset + model)


def test_classifier_epochs_bar_shows_losses_and_keeps_history(capsys):
    import pandas as pd
    from biaslab.classify.train import TrainSettings, train_classifier
    rng = np.random.default_rng(0)
    n = 24
    man = pd.DataFrame({"image_id": np.arange(n), "gender": ["female", "male"] * (n // 2),
                        "objects": [["dog"] if i % 3 else [] for i in range(n)]})
    feats = rng.normal(size=(n, 4)).astype(np.float32)
    settings = TrainSettings(epochs=3, patience=10, val_fraction=0.25, batch_size=8)
    _, h0 = train_classifier(feats, man, ["dog"], settings=settings, progress=False)
    assert capsys.readouterr().err == ""
    _, h1 = train_classifier(feats, man, ["dog"], settings=settings, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("train erm: 100%") and "3/3" in lines[-1]
    assert f"loss={h1[-1]['train_loss']:.4f}" in lines[-1] and "val_mAP=" in lines[-1]
    assert h0 == h1


def test_bcs_training_bar_does_not_reach_the_saved_config(capsys):
    from biaslab.models import textclf
    from biaslab.libra import bcs
    cfg = textclf.default_config("lstm", "ci", progress=False, epochs=1, embedding_dim=8,
                                 hidden_dim=8)
    texts = ["a [MASK] with a dog", "a [MASK] on a bike"] * 4
    model = bcs._train_shown(texts, [0, 1] * 4, cfg, 0, True)
    assert "train lstm" in capsys.readouterr().err
    assert model.config.progress is False and model.config == cfg
