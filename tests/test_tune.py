"""The same hyper-parameter budget for every Table 1 row (biaslab.classify.tune): the draw,
the choice, the params check, the stage and Table 1's baseline line."""
import json
import math

import numpy as np
import pytest
import yaml

from biaslab.classify import tune
from biaslab.runtime.validate import ParamError, check_classifier

SPACE = {"lr": [1e-4, 1e-3, 1e-2], "weight_decay": [0.0, 1e-3]}


def test_candidates_whole_grid_in_order_when_trials_cover_it():
    c = tune.candidates(SPACE, 6)
    assert c == [{"lr": a, "weight_decay": b} for a in SPACE["lr"] for b in SPACE["weight_decay"]]
    assert tune.candidates(SPACE, 100) == c
    assert tune.candidates(SPACE, 0) == []


def test_candidates_are_one_seeded_permutation_of_the_grid():
    grid = tune.candidates(SPACE, 6)
    perm = np.random.default_rng(7).permutation(6)        # the rule, by hand
    c3 = tune.candidates(SPACE, 3, seed=7)
    assert c3 == [grid[i] for i in perm[:3]]
    assert tune.candidates(SPACE, 3, seed=7) == c3        # the same for every row
    assert tune.candidates(SPACE, 5, seed=7)[:3] == c3    # nested: more trials, a superset
    assert len({(d["lr"], d["weight_decay"]) for d in c3}) == 3   # without replacement


@pytest.mark.parametrize("space, trials, msg", [
    ({"lr": [], "weight_decay": [0.0]}, 1, "lr"),
    ({"lr": [0.0], "weight_decay": [0.0]}, 1, "positive"),
    ({"lr": [1e-3], "weight_decay": [-1.0]}, 1, "non-negative"),
    ({"lr": [1e-3], "weight_decay": [float("nan")]}, 1, "weight_decay"),
    ({"lr": [1e-3], "weight_decay": [0.0]}, -1, "trials"),
])
def test_candidates_refuse_a_bad_grid(space, trials, msg):
    with pytest.raises(ValueError, match=msg):
        tune.candidates(space, trials)


class _Clf:
    def __init__(self, best):
        self.config = {"best_epoch": best}


def _trainer(table):
    """A fake trainer: each candidate's lr -> (best epoch, its history's val mAP / loss)."""
    def train(c):
        best, m, lv = table[c["lr"]]
        hist = [{"val_mAP": 0.0, "val_loss": 9.0}] * best + [{"val_mAP": m, "val_loss": lv}]
        return _Clf(best), hist + [{"val_mAP": 0.0, "val_loss": 9.0}]
    return train


def test_select_takes_the_best_validation_map_at_the_early_stopped_epoch():
    cands = [{"lr": a, "weight_decay": 0.0} for a in (1e-4, 1e-3, 1e-2)]
    r = tune.select(_trainer({1e-4: (2, 40.0, 0.5), 1e-3: (0, 55.0, 0.7),
                              1e-2: (5, 50.0, 0.3)}), cands)
    assert r["chosen"] == {"lr": 1e-3, "weight_decay": 0.0} and r["criterion"] == "val_mAP"
    assert [t["best_epoch"] for t in r["trials"]] == [2, 0, 5]
    assert [t["val_mAP"] for t in r["trials"]] == [40.0, 55.0, 50.0]


def test_select_breaks_ties_by_validation_loss_then_order_and_skips_nan():
    cands = [{"lr": a, "weight_decay": 0.0} for a in (1e-4, 1e-3, 1e-2)]
    tie = tune.select(_trainer({1e-4: (0, 50.0, 0.5), 1e-3: (0, 50.0, 0.4),
                                1e-2: (0, 50.0, 0.4)}), cands)
    assert tie["chosen"]["lr"] == 1e-3                    # lower loss; then the earlier one
    nan = tune.select(_trainer({1e-4: (0, math.nan, 0.1), 1e-3: (0, 10.0, 0.9),
                                1e-2: (0, math.nan, 0.2)}), cands)
    assert nan["chosen"]["lr"] == 1e-3                    # a number beats no number
    assert nan["trials"][0]["val_mAP"] is None            # JSON-safe
    allnan = tune.select(_trainer({1e-4: (0, math.nan, 0.3), 1e-3: (0, math.nan, 0.2),
                                   1e-2: (0, math.nan, 0.25)}), cands)
    assert allnan["chosen"]["lr"] == 1e-3                 # then the validation loss
    with pytest.raises(ValueError, match="no candidate"):
        tune.select(_trainer({}), [])


@pytest.mark.parametrize("bad, param", [
    ({"trials": -1}, "classifier.tuning.trials"),
    ({"trials": 1.5}, "classifier.tuning.trials"),
    ({"lr": [0.001, 0.0]}, "classifier.tuning.lr"),
    ({"lr": "0.001"}, "classifier.tuning.lr"),
    ({"weight_decay": []}, "classifier.tuning.weight_decay"),
    ({"epochs": [10]}, "classifier.tuning.epochs"),
    ({"seed": -2}, "classifier.tuning.seed"),
])
def test_params_check_names_the_bad_tuning_key(bad, param):
    with pytest.raises(ParamError) as e:
        check_classifier({"tuning": {"trials": 2, "seed": 0, **SPACE, **bad}})
    assert e.value.param == param
    check_classifier({"tuning": {"trials": 2, "seed": 0, **SPACE}})   # the good one passes


def test_stage_tunes_every_row_on_the_same_candidates(tmp_path, monkeypatch):
    """On a tiny COCO-layout set: with 3 trials the stage records the same 3 candidates for
    Original and a method, trains every seed with the choice (whose tuning-seed model is
    the winning trial itself), and Table 1's line names it; with 0 trials the model's config
    is the untuned one, byte for byte."""
    from stages import train_classifier
    from tests.test_classify import _tiny_repo
    from biaslab.analysis.classification_eval import training_record
    from biaslab.report.notes import baseline_note
    params = _tiny_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    train_classifier.main(["--dataset", "original", "--seed", "0"])
    d0 = tmp_path / "data/models/classifier/original/original-0"
    untuned = (d0 / "classifier_config.json").read_bytes()
    assert "tuning" not in json.loads(untuned)
    params["classifier"]["tuning"] = {"trials": 3, "seed": 1, "lr": [1e-4, 1e-3, 3e-2],
                                      "weight_decay": [0.0, 1e-2]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    cfgs = {}
    for args, row in ((["--dataset", "original", "--seeds", "0", "1"], "original"),
                      (["--method", "group_dro", "--seed", "0"], "group_dro")):
        train_classifier.main(args)
        cfgs[row] = json.loads((tmp_path / f"data/models/classifier/{row}/{row}-0/"
                                "classifier_config.json").read_text())
    want = tune.candidates(params["classifier"]["tuning"], 3, 1)
    for row, cfg in cfgs.items():
        t = cfg["tuning"]
        assert [{k: x[k] for k in tune.KEYS} for x in t["trials"]] == want   # same order
        assert t["n_trials"] == 3 and t["seed"] == 1 and t["criterion"] == "val_mAP"
        assert (cfg["lr"], cfg["weight_decay"]) == (t["chosen"]["lr"],
                                                   t["chosen"]["weight_decay"])
        maps = [x["val_mAP"] for x in t["trials"]]
        best = maps.index(max(m for m in maps if m is not None))
        assert {k: t["trials"][best][k] for k in tune.KEYS} == t["chosen"]
    s1 = json.loads((tmp_path / "data/models/classifier/original/original-1/"
                     "classifier_config.json").read_text())
    assert s1["tuning"] == cfgs["original"]["tuning"] and s1["lr"] == cfgs["original"]["lr"]
    # Table 1's line, from what each row recorded
    cls = {r: {"training": training_record(c)} for r, c in cfgs.items()}
    line = baseline_note(cls)
    assert "same 3 candidates" in line and "seed 1" in line and "Original lr" in line
    fixed = baseline_note({"original": {"training": training_record(json.loads(untuned))}})
    assert fixed.startswith("Baseline: untuned") and "lr 0.001, weight decay 0" in fixed
    assert baseline_note({"original": {"mAP": {}}}) == ""
