"""``biaslab.runtime.validate``: params that would give a traceback or a silently wrong result are
rejected naming the param; ``load_params`` runs the checks; ``filters.select``
rejects bad weights too."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from biaslab.runtime import validate as V
from biaslab.counterfactual.filters import select
from biaslab.runtime.io import InputError, ParamsError, load_params

NAMES = ["prompt_adherence", "object_consistency", "color_fidelity"]

# (params, dotted param named, words of the problem)
BAD = [
    ({"filters": {"names": NAMES, "weights": [1, -1, 1]}}, "filters.weights", "worst"),
    ({"filters": {"names": NAMES, "weights": [1, math.nan, 1]}}, "filters.weights", "finite"),
    ({"filters": {"names": NAMES, "weights": [1, math.inf, 1]}}, "filters.weights", "finite"),
    ({"filters": {"names": NAMES, "weights": [1, 1]}}, "filters.weights", "2 weight(s) for 3"),
    ({"filters": {"names": NAMES, "weights": [1, 1, 1, 1]}}, "filters.weights", "4 weight(s)"),
    ({"filters": {"names": NAMES, "weights": [1, "a", 1]}}, "filters.weights", "not a number"),
    ({"filters": {"names": NAMES, "weights": [1, True, 1]}}, "filters.weights", "not a number"),
    ({"filters": {"names": NAMES, "weights": "1,1,1"}}, "filters.weights", "list of numbers"),
    ({"filters": {"names": NAMES, "weights": None}}, "filters.weights", "list of numbers"),
    ({"filters": {"names": "prompt_adherence", "weights": [1]}}, "filters.names", "list"),
    ({"filters": {"names": [], "weights": []}}, "filters.names", "non-empty"),
    ({"filters": {"names": ["a", "a"], "weights": [1, 1]}}, "filters.names", "repeat"),
    ({"filters": {"knn_k": 0}}, "filters.knn_k", ">= 1"),
    ({"data": {"max_images": 0}}, "data.max_images", "null (all) or an integer >= 1"),
    ({"data": {"max_images": -5}}, "data.max_images", "got -5"),
    ({"data": {"max_images": 2.5}}, "data.max_images", "integer"),
    ({"data": {"kp_iou": 1.5}}, "data.kp_iou", "[0, 1]"),
    ({"generate": {"max_images": -1}}, "generate.max_images", ">= 0"),
    ({"generate": {"m": 0}}, "generate.m", ">= 1"),
    ({"generate": {"shards": 0}}, "generate.shards", ">= 1"),
    ({"split": {"fractions": {"train": 0.7, "val": 0.1, "test": 0.1}}}, "split.fractions",
     "sum to 0.9"),
    ({"split": {"fractions": {"train": 1.2, "val": -0.2}}}, "split.fractions.train", "[0, 1]"),
    ({"split": {"fractions": {"train": 0.5, "test": math.nan}}}, "split.fractions.test",
     "[0, 1]"),
    ({"split": {"fractions": [0.7, 0.3]}}, "split.fractions", "mapping"),
    ({"filters": [1, 1]}, "filters", "mapping"),
    # groups checked up front, not where they break
    ({"synthetic": {"bias": 1.5}}, "synthetic.bias", "[0, 1]"),
    ({"synthetic": {"n_images": 1}}, "synthetic.n_images", ">= 2"),
    ({"synthetic": {"image_size": 32}}, "synthetic.image_size", ">= 64"),
    ({"classifier": {"methods": ["nonexistent"]}}, "classifier.methods", "unknown"),
    ({"classifier": {"methods": ["focal", "focal"]}}, "classifier.methods", "repeat"),
    ({"classifier": {"datasets": ["original", "balanced"]}}, "classifier.datasets", "unknown"),
    ({"classifier": {"seeds": []}}, "classifier.seeds", "at least 1"),
    ({"classifier": {"seeds": [0, 0]}}, "classifier.seeds", "distinct"),
    ({"controls": {"q": [0.0]}}, "controls.q", "(0, 1]"),
    ({"controls": {"seeds": [0]}}, "controls.seeds", "at least 2"),
    ({"label": {"rule": "majority"}}, "label.rule", "unknown rule"),
    ({"label": {"words": "klingon"}}, "label.words", "unknown word list"),
    ({"label": {"k": 0}}, "label.k", ">= 1"),
    # paper 001's stages: checked at the first stage, not after the training half of the DAG
    ({"contrast": {"m": 0}}, "contrast.m", ">= 1"),
    ({"contrast": {"splits": ["dev"]}}, "contrast.splits", "train / val / test"),
    ({"contrast": {"generate": {"backend": "dall-e"}}}, "contrast.generate.backend",
     "unknown backend"),
    ({"contrast": {"generate": {"guidance_scales": [-1]}}}, "contrast.generate.guidance_scales",
     "positive"),
    ({"contrast": {"editor": "x"}}, "contrast.editor", "unknown key"),
    ({"eval_retrieval": {"ks": [0]}}, "eval_retrieval.ks", "positive integers"),
    ({"eval_retrieval": {"n_boot": 10}}, "eval_retrieval.n_boot", ">= 100"),
    ({"spurious": {"clusters": 1}}, "spurious.clusters", ">= 2"),
    ({"spurious": {"m": 20}}, "spurious.m", "unknown key"),
    ({"spurious": {"image_encoder": 3}}, "spurious.image_encoder", "null"),
    ({"generate": {"backend": "dalle"}}, "generate.backend", "unknown backend"),
    ({"generate": {"guidance_scales": []}}, "generate.guidance_scales", "positive"),
    ({"generate": {"guidance_scales": [7.5, -1]}}, "generate.guidance_scales", "positive"),
    ({"captioner": {"archs": ["lstm"]}}, "captioner.archs", "unknown"),
    ({"captioner": {"archs": ["clipcap", "clipcap"]}}, "captioner.archs", "repeat"),
    ({"captioner": {"datasets": ["orig"]}}, "captioner.datasets", "unknown"),
    ({"captioner": {"epochs": 0}}, "captioner.epochs", ">= 1"),
    # DBAC's settings: at every stage's start, not when eval_captioner reaches them
    ({"eval_captioner": {"dbac": {"trials": 3}}}, "eval_captioner.dbac.trials", "unknown key"),
    ({"eval_captioner": {"dbac": {"seeds": 0}}}, "eval_captioner.dbac.seeds", ">= 1"),
    ({"eval_captioner": {"dbac": {"directions": ["T->A", "T->A"]}}},
     "eval_captioner.dbac.directions", "distinct"),
    ({"eval_captioner": {"dbac": "on"}}, "eval_captioner.dbac", "mapping"),
    ({"artifact": {"datasets": ["synthetic", "synthetic"]}}, "artifact.datasets", "repeat"),
    ({"artifact": {"parts": []}}, "artifact.parts", "non-empty"),
    # the groups that had no check
    ({"executor": {"name": "slurm"}}, "executor.name", "unknown executor 'slurm'"),
    ({"executor": {"name": "local", "workers": 0}}, "executor.workers", ">= 1 or null"),
    ({"executor": {"name": "ray", "address": "nowhere"}}, "executor.address", "ray://"),
    ({"probe": {"min_seeds_t": 1}}, "probe.min_seeds_t", ">= 2"),
    ({"probe": {"n_bootstrap": 100}}, "probe.n_bootstrap", "unknown key"),
    ({"report": {"utility_floor": 1.5}}, "report.utility_floor", "[0, 1]"),
    ({"report": {"digits": 11}}, "report.digits", "at most 10"),
    ({"datasets": {"max_copies": 0}}, "datasets.max_copies", ">= 1"),
    ({"datasets": {"same_sources": "yes"}}, "datasets.same_sources", "true or false"),
    ({"datasets": {"min_fraction": 0}}, "datasets.min_fraction", "(0, 1]"),
    ({"audit": {"alpha": 0}}, "audit.alpha", "(0, 1]"),
    ({"audit": {"top_k": 0}}, "audit.top_k", ">= 1"),
    ({"residue": {"folds": 1}}, "residue.folds", ">= 2"),
    ({"residue": {"shapes": []}}, "residue.shapes", "non-empty"),
    ({"masks": {"shape": "sam", "sam_model": None}}, "masks.sam_model", "SAM checkpoint"),
    ({"masks": {"dilate_px": -1}}, "masks.dilate_px", ">= 0"),
    ({"scale": {"name": ""}}, "scale.name", "conf/scale/"),
    ({"models": {"nam": "tiny"}}, "models.nam", "unknown key"),
    ({"lic": {"classifier": "svm"}}, "lic.classifier", "unknown 'svm'"),
    ({"lic": {"preset": "fast"}}, "lic.preset", "unknown 'fast'"),
    ({"lic": {"seeds": 0}}, "lic.seeds", ">= 1"),
    ({"features": {"image_size": 8}}, "features.image_size", ">= 16"),
    ({"features": {"backbone": ""}}, "features.backbone", "non-empty"),
    ({"objects": {"threshold": 1.5}}, "objects.threshold", "val_f1 or a number"),
    ({"objects": {"epoch": 3}}, "objects.epoch", "unknown key"),
    ({"scorer": {"dropout": 2}}, "scorer.dropout", "[0, 1]"),
    ({"scorer": {"lr": 0}}, "scorer.lr", "(0, inf)"),
    # libra: BCS / T5 / DCG by the rules their stages apply (biaslab.libra.settings)
    ({"libra": {"anything": -1}}, "libra.anything", "unknown key"),
    ({"libra": {"words": "xx"}}, "libra.words", "unknown word list"),
    ({"libra": {"mix": "2:2:2"}}, "libra", "unknown mix '2:2:2'"),
    ({"libra": {"alpha": 1.5}}, "libra.alpha", "in [0, 1]"),
    ({"libra": {"mask_rate": 0}}, "libra.mask_rate", "in (0, 1)"),
    ({"libra": {"pos": "spacy"}}, "libra.pos", "one of"),
    ({"libra": {"samples_per_caption": 0}}, "libra.samples_per_caption", ">= 1"),
    ({"libra": {"t5": {"epoch": 3}}}, "libra.t5", "unknown key(s) ['epoch']"),
    ({"libra": {"t5": {"format": "span"}}}, "libra.t5.format", "one of"),
    ({"libra": {"t5": {"max_val_captions": 0}}}, "libra.t5.max_val_captions", ">= 1"),
    ({"libra": {"dcg": {"formulation": "rewrite"}}}, "libra.dcg.formulation", "'generate'"),
    ({"libra": {"dcg": {"eta": "high"}}}, "libra.dcg.eta", "must be"),
    ({"libra": {"classifier": {"preset": "fast"}}}, "libra.classifier.preset", "unknown"),
    ({"libra": {"dcg_val_fraction": 1}}, "libra.dcg_val_fraction", "(0, 1)"),
    ({"libra": {"apply": {"beams": 2}}}, "libra.apply.beams", "unknown key"),
    ({"libra": {"apply": {"num_beams": 0}}}, "libra.apply.num_beams", ">= 1"),
    ({"published": {"models": ["nic", "gpt4"]}}, "published.models", "must list some of"),
    ({"published": {"models": ["nic", "nic"]}}, "published.models", "names repeat"),
    ({"published": {"models": ["nic"], "lic": {"seeds": 1}}}, "published.lic.seeds", ">= 2"),
    ({"published": {"models": ["nic"], "human_captions": 3}}, "published.human_captions",
     "COCO captions file"),
    ({"published": {"models": ["nic"], "ba": {"n_boot": 10}}}, "published.ba.n_boot", ">= 100"),
    ({"published": {"models": ["nic"], "dbac": {"seeds": 0}}}, "published.dbac.seeds", ">= 1"),
    ({"published": {"models": ["nic"], "root": ""}}, "published.root", "directory"),
    ({"filters": {"names": ["prompt_adherence", "nope"]}}, "filters.names", "unknown filter"),
    ({"eval_captioner": {"metrics": ["LIC"]}}, "eval_captioner.metrics", "built-in"),
]


@pytest.mark.parametrize("params,param,problem", BAD)
def test_bad_params_are_rejected_naming_the_param(params, param, problem):
    with pytest.raises(V.ParamError) as e:
        V.check_params(params)
    assert e.value.param == param
    assert problem in e.value.problem


@pytest.mark.parametrize("params,param,problem", BAD[:3] + BAD[13:15] + BAD[20:21])
def test_load_params_raises_params_error(tmp_path, params, param, problem):
    f = tmp_path / "params.yaml"
    f.write_text(yaml.safe_dump(params))
    with pytest.raises(ParamsError) as e:
        load_params(f)
    assert str(e.value).startswith(f"{f}: {param}: ")
    assert isinstance(e.value, InputError) and e.value.param == param
    assert load_params(f, validate=False) == yaml.safe_load(f.read_text())


GOOD = [
    {"filters": {"names": NAMES, "weights": [0, 0, 0]}},           # Table 4 "no filter" row
    {"filters": {"names": NAMES, "weights": [1, 0.5, 2]}},
    {"data": {"max_images": None, "kp_iou": 0.3}},
    {"data": {"max_images": 1}},
    {"generate": {"max_images": None, "m": 4, "shards": 4}},
    {"generate": {"max_images": 0}},
    {"split": {"fractions": {"train": 0.7, "val": 0.1, "test": 0.2}}},   # 0.7+0.1+0.2 != 1.0
    {"libra": {"mix": {"swap": 1, "t5": 0, "merged": 2}, "t5": {"model": "t5-base"}}},
    {"published": {"models": ["nic"], "human_captions": ["a.json", "b.json"]}},
    {"objects": {"threshold": 0.5}},
    {"executor": {"name": "ray", "address": "auto", "workers": None}},
    {"datasets": {"max_copies": None, "max_factor": None, "min_fraction": None}},
]


@pytest.mark.parametrize("params", GOOD)
def test_good_params_pass(params):
    V.check_params(params)


def test_unknown_component_names_are_refused_with_the_registered_ones():
    with pytest.raises(V.ParamError, match=r"classifier.methods.*'nope'.*group_dro"):
        V.check_params({"classifier": {"methods": ["nope"]}})
    with pytest.raises(V.ParamError, match=r"captioner.archs.*'nope'.*clipcap"):
        V.check_params({"captioner": {"archs": ["nope"]}})
    with pytest.raises(V.ParamError, match=r"generate.backend.*'nope'.*copy_paste"):
        V.check_params({"generate": {"backend": "nope"}})
    with pytest.raises(V.ParamError, match=r"eval_captioner.postprocessors.*'nope'.*LIBRA"):
        V.check_params({"eval_captioner": {"postprocessors": ["nope"]}})
    V.check_params({"eval_captioner": {"postprocessors": ["LIBRA"]}})


def test_the_label_rules_are_the_labellers():
    from biaslab.data.gender import image_gender
    for rule in V.LABEL_RULES:
        image_gender(["a man"], rule=rule)                  # every listed rule is accepted
    with pytest.raises(Exception):
        image_gender(["a man"], rule="majority")


def test_the_committed_params_are_valid():
    load_params("params.yaml")


def test_every_profile_composition_is_valid(tmp_path):
    """Every combination of the conf/ profiles (data x scale x models x executor) passes every
    check: a new check must not refuse a profile the README offers."""
    import itertools

    from dvc.utils.hydra import compose_and_dump

    from tests.conftest import REPO
    groups = {g: sorted(p.stem for p in (REPO / "conf" / g).glob("*.yaml"))
              for g in ("data", "scale", "models", "executor")}
    assert all(len(v) >= 2 for v in groups.values())
    n = 0
    for combo in itertools.product(*groups.values()):
        out = tmp_path / f"params_{n}.yaml"
        compose_and_dump(str(out), str(REPO / "conf"), None, "config", str(REPO),
                         [f"{g}={v}" for g, v in zip(groups, combo)])
        V.check_params(yaml.safe_load(out.read_text()))
        n += 1
    assert n == 32


def test_every_param_group_has_a_check():
    """Validate covers every group of params.yaml, LIBRA's and the published
    captioners' included (their settings rules live in the torch-free
    biaslab.libra.settings, shared with the stages)."""
    groups = set(yaml.safe_load(open("params.yaml"))) - {"attribute"}   # a scalar: check_params
    assert groups - set(V.CHECKS) == set()


def test_libra_rules_are_the_stages_rules():
    """validate and the LIBRA stages apply the same settings functions: a value the stage's
    settings refuse is refused at start, with the same message."""
    from biaslab.libra import dcg, t5
    from biaslab.libra import settings as LS
    assert t5.T5Settings is LS.T5Settings and dcg.DCGSettings is LS.DCGSettings
    for bad, fn in (({"epochs": 0}, t5.settings_from_dict),
                    ({"min_edit_prob": 2.0}, dcg.settings_from_dict)):
        with pytest.raises(ValueError) as stage_err:
            fn(bad)
        key = "t5" if fn is t5.settings_from_dict else "dcg"
        with pytest.raises(V.ParamError) as start_err:
            V.check_params({"libra": {key: bad}})
        e = start_err.value
        assert f"{e.param} {e.problem}" == str(stage_err.value)
    V.check_params({"libra": yaml.safe_load(open("params.yaml"))["libra"]})


def test_the_literals_read_from_source_are_the_modules_values():
    """validate reads the attacker names and the model defaults from the source of modules that
    import torch; each value must be what importing the module gives."""
    from biaslab.models import textclf_config
    from biaslab.data import published
    from biaslab.metrics import files
    for mod, name in ((textclf_config, "CLASSIFIERS"), (textclf_config, "PRESETS"),
                      (published, "MODELS"), (files, "ATTRIBUTES")):
        assert V.literal(mod.__name__, name) == getattr(mod, name)
    with pytest.raises(LookupError):
        V.literal("biaslab.models.textclf", "NO_SUCH_NAME")


def test_load_params_input_errors(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        load_params(tmp_path)
    (tmp_path / "p.yaml").write_text("a: [1, 2\n")
    with pytest.raises(InputError, match="not a readable YAML"):
        load_params(tmp_path / "p.yaml")
    (tmp_path / "p.yaml").write_text("- 1\n")
    with pytest.raises(InputError, match="expected a mapping"):
        load_params(tmp_path / "p.yaml")


def test_check_weights_returns_floats_and_accepts_numpy():
    import numpy as np
    assert V.check_weights(np.array([1, 0, 2]), NAMES) == [1.0, 0.0, 2.0]


@pytest.mark.parametrize("weights,problem", [([1, -1, 1], "worst"), ([1, math.nan, 1], "NaN"),
                                             ([1, 1], "2 weight(s) for 3")])
def test_select_rejects_bad_weights(weights, problem):
    t = pd.DataFrame({"image_id": [1, 1], "group": ["f", "f"], "j": [0, 1],
                      NAMES[0]: [0.9, 0.1], NAMES[1]: [0.5, 0.5], NAMES[2]: [0.5, 0.5]})
    with pytest.raises(ValueError, match="weights") as e:
        select(t, NAMES, weights)
    assert problem in str(e.value)
    # the weight check is what failed: with a valid weight the best candidate (j=0) wins
    assert select(t, NAMES, [1, 0, 0]).iloc[0]["j"] == 0


@pytest.mark.parametrize("bad", ["race", None, ["skin"], "Skin"])
def test_attribute_is_one_of_the_known_attributes(bad):
    """``attribute`` is a scalar param (gender | skin | gender_skin)."""
    with pytest.raises(V.ParamError, match=r"^attribute: must be one of \['gender', 'skin', "
                                           r"'gender_skin'\]"):
        V.check_params({"attribute": bad})
    for ok in ("gender", "skin", "gender_skin"):
        V.check_params({"attribute": ok})
