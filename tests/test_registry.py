"""biaslab.registry: one registry of components, entry-point plug-ins, the
contract of each kind on tiny inputs, and the example plug-in package installed with pip."""
from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab import registry as R
from biaslab.analysis import validity
from biaslab.analysis import verdicts
from biaslab.captioning import postprocess as PP
from biaslab.data.variants import VariantContext, build
from tests.conftest import REPO

PLUGIN = REPO / "examples" / "biaslab-example-plugin"


# ------------------------------------------------------------------------- the built-ins
def _builtin_rows():
    """Row keys of the built-in entries (a plug-in installed in this venv is left out)."""
    own = {e.row for e in R.row_entries() if R.REGISTRIES[e.kind].builtin(e.name)}
    return tuple(r for r in R.row_order() if r in own)


def test_builtin_rows_are_paper_000s_tables_in_order():
    assert _builtin_rows() == (
        "original", "oversample", "subsample", "matched", "adversarial",
        "domain_discriminative", "domain_independent", "upweight", "focal", "class_balanced",
        "group_dro", "original+LIBRA", "augment", "synthetic")
    names = R.row_names()
    assert names["synthetic"] == "S_synthetic" and names["original+LIBRA"] == "Original + LIBRA"
    assert "erm" not in names                # ERM is every dataset row's method, not a row


def test_every_builtin_target_loads():
    for reg in R.REGISTRIES.values():
        for e in reg:
            if e.kind == "archs" and e.name == "blip2":
                continue                     # paper tier: its module imports transformers
            assert e.load() is not None, e


def test_entries_reject_bad_kinds_names_and_claims():
    with pytest.raises(R.RegistryError, match="unknown kind 'losses'"):
        R.Entry(kind="losses", name="x", target=object())
    with pytest.raises(R.RegistryError, match="'a b'.*letters"):
        R.Entry(kind="datasets", name="a b", target=object())
    with pytest.raises(R.RegistryError, match=r"claims \{'Ratio': '='\}"):
        R.Entry(kind="datasets", name="x", target=object(), claims={"Ratio": "="})
    with pytest.raises(R.RegistryError, match="cannot load 'no_such_module:f'"):
        R.Entry(kind="datasets", name="x", target="no_such_module:f").load()


def test_a_name_is_taken_once_and_unknown_names_list_the_known():
    reg = R.Registry("datasets")
    reg.register("mine", label="Mine")(lambda ctx: ctx.original)
    with pytest.raises(R.RegistryError, match="'mine' is taken"):
        reg.register("mine")(lambda ctx: ctx.original)
    with pytest.raises(R.RegistryError, match="known: \\['mine'\\]"):
        reg.get("theirs")
    with pytest.raises(R.RegistryError, match="of kind 'methods', registered as 'datasets'"):
        reg.add(R.Entry(kind="methods", name="m", target=object()))


class _EP:
    """A stand-in importlib.metadata.EntryPoint."""

    def __init__(self, name, obj, dist="pkg"):
        self.name, self.value, self._obj = name, f"pkg:{name}", obj
        self.dist = type("D", (), {"name": dist})()

    def load(self):
        if isinstance(self._obj, Exception):
            raise self._obj
        return self._obj


def _with_entry_points(monkeypatch, reg, eps):
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: eps if group == reg.group else [])
    reg.reset_plugins()


def test_entry_points_add_rows_after_the_builtins(monkeypatch):
    e = R.Entry(kind="datasets", name="halved", target=lambda ctx: ctx.original.iloc[::2],
                label="Halved", claims={"objects": "<"})
    _with_entry_points(monkeypatch, R.DATASETS, [_EP("halved", e)])
    try:
        assert R.DATASETS.origin("halved") == "pkg" and not R.DATASETS.builtin("halved")
        assert R.row_order()[-1] == "halved" and R.row_names()["halved"] == "Halved"
        assert "halved" in [x.name for x in R.claimed_rows()]
    finally:
        monkeypatch.undo()
        R.DATASETS.reset_plugins()
    assert "halved" not in R.DATASETS


@pytest.mark.parametrize("ep,match", [
    (_EP("x", object()), "loads a object, not a biaslab.registry.Entry"),
    (_EP("x", R.Entry(kind="datasets", name="y", target=object())), "called 'y'"),
    (_EP("original", R.Entry(kind="datasets", name="original", target=object())),
     "'original' is taken \\(by biaslab\\)"),
    (_EP("x", ImportError("no module named foo")), "of pkg .*cannot load 'pkg:x'"),
])
def test_a_broken_plugin_names_itself(monkeypatch, ep, match):
    """A plug-in that cannot be loaded is a warning naming it and is left out: the built-ins
    still work; naming it raises the same reason."""
    _with_entry_points(monkeypatch, R.DATASETS, [ep])
    try:
        with pytest.warns(R.RegistryWarning, match=match):
            names = R.DATASETS.names()
        assert "original" in names and (ep.name == "original" or ep.name not in names)
        if ep.name != "original":
            with pytest.raises(R.RegistryError, match=match):
                R.DATASETS.get(ep.name)
    finally:
        monkeypatch.undo()
        R.DATASETS.reset_plugins()


# ------------------------------------------------------------- each kind's contract, tiny inputs
def _tiny_context(n=24, seed=0):
    """Original with two objects planted with gender (skewed) and one counterfactual per image
    and group, written here (not by biaslab.data.synthetic)."""
    rng = np.random.default_rng(seed)
    rows, cf = [], []
    for i in range(n):
        g = "female" if i % 2 else "male"
        objs = [o for o, p in (("oven", 0.7 if g == "female" else 0.2),
                               ("skis", 0.2 if g == "female" else 0.7)) if rng.random() < p]
        rows.append({"sample_id": str(i), "image_id": i, "path": f"im/{i}.png", "gender": g,
                     "captions": [f"a {'woman' if g == 'female' else 'man'} here"],
                     "objects": objs, "counterfactual": False})
        for h in ("female", "male"):
            cf.append({**rows[-1], "sample_id": f"{i}:{h}:0", "gender": h,
                       "path": f"cf/{i}_{h}.png", "counterfactual": True})
    cols = ["sample_id", "image_id", "path", "gender", "captions", "objects", "counterfactual"]
    return VariantContext(original=pd.DataFrame(rows, columns=cols),
                          counterfactuals=pd.DataFrame(cf, columns=cols),
                          params={"seed": 0, "max_skew": 0.05, "max_copies": 20,
                                  "max_factor": 6, "min_fraction": None})


@pytest.mark.parametrize("name", R.DATASETS.names())
def test_every_dataset_variant_builds_a_manifest(name):
    ctx = _own_input(R.DATASETS.get(name)) or _tiny_context()
    m = build(name, ctx)
    assert list(m.columns[:7]) == list(ctx.original.columns)
    assert m["sample_id"].is_unique and set(m["gender"]) <= {"female", "male"}
    assert set(m["image_id"]) <= set(ctx.original["image_id"])


def _own_input(entry):
    """The entry's own test input (``Entry.fixture``, "module:function"), or None."""
    if entry.fixture is None:
        return None
    import importlib
    mod, _, fn = entry.fixture.partition(":")
    return getattr(importlib.import_module(mod), fn)()


def test_an_entry_brings_its_own_test_input():
    e = R.Entry(kind="datasets", name="own", target=lambda ctx: ctx.original,
                fixture="tests.test_registry:_tiny_context")
    assert len(_own_input(e).original) == 24
    assert _own_input(R.Entry(kind="datasets", name="none", target=object())) is None


def test_a_builder_returning_no_manifest_is_named(monkeypatch):
    e = R.Entry(kind="datasets", name="broken", target=lambda ctx: [1, 2])
    _with_entry_points(monkeypatch, R.DATASETS, [_EP("broken", e)])
    try:
        with pytest.raises(TypeError, match="'broken' \\(pkg\\) returned list"):
            build("broken", _tiny_context())
    finally:
        monkeypatch.undo()
        R.DATASETS.reset_plugins()


@pytest.mark.parametrize("name", R.METHODS.names())
def test_every_method_gives_a_finite_loss_and_its_inference_layout(name):
    import torch

    from biaslab.classify.methods import get_method
    from biaslab.classify.model import build_head
    meth = get_method(name)
    n_obj, n = 3, 8
    rng = np.random.default_rng(0)
    y = (rng.random((n, n_obj + 2)) < 0.5).astype(np.float32)
    y[:, n_obj + 1] = 1 - y[:, n_obj]                    # one gender per row
    m = np.ones_like(y)
    yr, mr = meth.raw_targets(y, m, n_obj)
    meth.setup(y, m, n_obj)                   # as biaslab.classify.train does
    torch.manual_seed(0)
    head = build_head(5, meth.n_raw(n_obj), meth.hidden([]), 0.0)
    meth.modules(head)
    x = torch.randn(n, 5)
    loss = meth.loss(head, x, torch.tensor(yr), torch.tensor(mr), torch.arange(n))
    assert torch.isfinite(loss)
    assert meth.logits(head(x)).shape == (n, meth.n_out(n_obj))


def test_libra_skips_without_a_dcg(tmp_path):
    settings = R.POSTPROCESSORS.settings_for(
        ["LIBRA"], {"eval_captioner": {"dcg": str(tmp_path)}})
    assert settings["LIBRA"] == PP.LibraSettings(dcg=str(tmp_path))
    ctx = PP.CaptionContext(table=pd.DataFrame({"image_id": [1], "path": ["a.png"]}), seed=0,
                            feature_cache=str(tmp_path), component_settings=settings)
    with pytest.raises(R.Skipped, match="no DCG at"):
        PP.apply("LIBRA", ["a man riding a horse"], ctx)


def test_a_postprocessor_must_keep_length(monkeypatch, tmp_path):
    e = R.Entry(kind="postprocessors", name="drop", target=lambda caps, ctx: caps[1:])
    _with_entry_points(monkeypatch, R.POSTPROCESSORS, [_EP("drop", e)])
    try:
        assert R.POSTPROCESSORS.get("drop").row == "original+drop"
        ctx = PP.CaptionContext(table=pd.DataFrame({"image_id": [1, 2], "path": ["a", "b"]}),
                                seed=0, feature_cache=str(tmp_path))
        with pytest.raises(TypeError, match="'drop' \\(pkg\\) must return a list of 2 str, got "
                                            "list of 1"):
            PP.apply("drop", ["a", "b"], ctx)
    finally:
        monkeypatch.undo()
        R.POSTPROCESSORS.reset_plugins()


# --------------------------------------------------------- declared claims become verdicts
def test_declared_claims_are_judged_against_original_and_gated(monkeypatch):
    e = R.Entry(kind="datasets", name="mine", target=lambda ctx: ctx.original,
                label="Mine", claims={"objects": "<", "Ratio": "<", "Leakage": "≤"})
    _with_entry_points(monkeypatch, R.DATASETS, [_EP("mine", e)])
    try:
        probe = {"classifier": {"original": {"objects": {"values": [0.30, 0.32, 0.31]}},
                                "mine": {"objects": {"values": [0.10, 0.12, 0.11]}}}}
        clf = {"original": {"per_seed": [{"Ratio": 2.0, "Leakage": 5.0},
                                         {"Ratio": 2.2, "Leakage": 5.5},
                                         {"Ratio": 2.1, "Leakage": 5.2}]},
               "mine": {"per_seed": [{"Ratio": 1.1, "Leakage": 6.0},
                                     {"Ratio": 1.2, "Leakage": 6.4},
                                     {"Ratio": 1.0, "Leakage": 6.2}]}}
        controls = {"classifier": {"c": {"Ratio": {"verdict": "does not match"},
                                         "Leakage": {"verdict": "matches"}}}}
        checks = {c["id"]: c for c in validity.declared_checks(probe, clf, {}, controls)}
        assert set(checks) == {"classifier/mine-original/objects<0",
                               "classifier/mine-original/ratio<0",
                               "classifier/mine-original/leakage≤0"}
        obj = checks["classifier/mine-original/objects<0"]
        # hand-computed: mean difference 0.11 - 0.31 = -0.20
        assert obj["mean"] == pytest.approx(-0.20) and obj["verdict"] == "holds"
        assert obj["declared_by"] == "pkg" and "Mine" in obj["claim"]
        assert checks["classifier/mine-original/leakage≤0"]["verdict"] == "fails"
        gated = {c["id"]: c for c in verdicts.apply_controls(list(checks.values()), controls)}
        assert gated["classifier/mine-original/ratio<0"]["verdict"] == \
            "metric not valid on this data"
        assert gated["classifier/mine-original/leakage≤0"]["verdict"] == "fails"
        # a declared Ratio claim is gated by its own rows' mask neutrality, not S_synthetic's
        mn = {"mask_neutral": {"mine": {"mask_effect": 0.3, "context": {"mask_effect": 0.3}},
                               "original": {"mask_effect": 1.0, "context": {"mask_effect": 1.0}},
                               "synthetic": {"mask_effect": 1.0,
                                             "context": {"mask_effect": 1.0}}}}
        assert {r["dataset"] for r in verdicts.mask_neutral_rows(mn) if not r["met"]} == {"mine"}
        out = verdicts.apply_mask_neutral([checks["classifier/mine-original/ratio<0"]], mn)
        assert out[0]["verdict"] == "mask not neutral" and "mine's mask effect" in \
            out[0]["reason"]
        mn["mask_neutral"]["mine"] = mn["mask_neutral"]["original"]     # both neutral now
        out = verdicts.apply_mask_neutral([checks["classifier/mine-original/ratio<0"]], mn)
        assert out[0]["verdict"] == "holds"
    finally:
        monkeypatch.undo()
        R.DATASETS.reset_plugins()


# ------------------------------------------------------------------ the example plug-in, pip
@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """The example package installed with pip into a directory of its own (PYTHONPATH), from a
    copy (the build leaves nothing in the repository)."""
    tmp = tmp_path_factory.mktemp("plugin")
    src = tmp / "src"
    shutil.copytree(PLUGIN, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    site = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "--target", str(site), str(src)],
                   check=True, capture_output=True, text=True)
    return site


def _py(code, site):
    import os
    env = {**os.environ, "PYTHONPATH": str(site)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=REPO)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_installed_example_adds_one_component_of_each_row_kind(plugin_site):
    out = json.loads(_py("import json; from biaslab import registry as R; print(json.dumps("
                         "{'rows': R.row_names(), 'claimed': [e.row for e in R.claimed_rows()],"
                         " 'origin': R.METHODS.origin('label_smoothing')}))", plugin_site))
    rows = list(out["rows"])
    # reweighted sits after sub-sampling's control rows (order 25), the others after the paper's
    assert rows.index("reweighted") == rows.index("subsample") + 1
    assert rows[-3:] == ["label_smoothing", "original+neutral", "original+context_neutral"]
    assert out["claimed"] == ["reweighted", "label_smoothing", "original+neutral",
                              "original+context_neutral"]
    assert out["origin"] == "biaslab-example-plugin"
    # the CLI lists them, and the params check accepts them
    cli = subprocess.run([str(Path(sys.executable).with_name("biaslab")), "components"],
                         capture_output=True, text=True, cwd=REPO,
                         env={**__import__("os").environ, "PYTHONPATH": str(plugin_site)})
    assert cli.returncode == 0 and "Reweighted (plug-in)" in cli.stdout, cli.stderr
    _py("from biaslab.runtime.validate import check_params; check_params({'classifier': {'datasets': "
        "['original', 'reweighted'], 'methods': ['label_smoothing']}, 'eval_captioner': "
        "{'postprocessors': ['LIBRA', 'neutral']}})", plugin_site)


def test_the_example_components_work_on_tiny_inputs(plugin_site):
    out = _py(r'''
import json, numpy as np, pandas as pd, torch
from tests.test_registry import _tiny_context
from biaslab.data.variants import build
from biaslab.classify.methods import get_method
from biaslab.captioning import postprocess as PP
ctx = _tiny_context()
m = build("reweighted", ctx)
meth = get_method("label_smoothing", {"eps": 0.2})
y = torch.tensor([[1.0, 0.0]]); mask = torch.ones(1, 2)
head = lambda x: torch.zeros(1, 2)      # logits 0: p = 1/2 for every output
loss = float(meth.loss(head, None, y, mask, None))
c = PP.CaptionContext(table=pd.DataFrame({"image_id": [1], "path": ["a"]}), seed=0,
                      feature_cache=".")
print(json.dumps({"n": len(m), "n_orig": len(ctx.original), "unique": bool(m["sample_id"].is_unique),
                  "loss": loss, "caps": PP.apply("neutral", ["a man and his dog"], c)}))
''', plugin_site)
    r = json.loads(out)
    assert r["n"] >= r["n_orig"] and r["unique"]
    assert r["loss"] == pytest.approx(np.log(2))    # BCE at p = 1/2, whatever the targets
    assert r["caps"] == ["a person and their dog"]


def test_the_example_filter_and_metric_work_on_tiny_inputs(plugin_site, tmp_path):
    out = _py(r'''
import json, sys, numpy as np, pandas as pd
from PIL import Image
from biaslab import registry as R
from biaslab.counterfactual.filters import FilterContext
from biaslab.captioning.evaluation import MetricContext
d = sys.argv[1] if len(sys.argv) > 1 else "''' + str(tmp_path) + r'''"
rng = np.random.default_rng(0)
sharp = rng.integers(0, 256, (64, 64), dtype=np.uint8)
Image.fromarray(sharp).save(f"{d}/o.png"); Image.fromarray(sharp).save(f"{d}/same.png")
Image.fromarray(sharp).resize((8, 8)).resize((64, 64), Image.BILINEAR).save(f"{d}/blur.png")
paths = [f"{d}/same.png", f"{d}/blur.png"]
ctx = FilterContext(candidates=pd.DataFrame({"image_id": [1, 1], "path": paths}),
                    candidate_paths=paths, image_ids=[1], original_paths=[f"{d}/o.png"],
                    originals={1: f"{d}/o.png"}, scorer=None, object_predictor=None)
s = R.FILTERS.load("sharpness")(ctx)
m = R.METRICS.load("types")(MetricContext(predictions={1: "A man, a dog.", 2: "a DOG"},
                                          genders={}, human={}))
print(json.dumps({"s": [float(x) for x in s], "types": m,
                  "origin": [R.FILTERS.origin("sharpness"), R.METRICS.origin("types")]}))
''', plugin_site)
    r = json.loads(out)
    assert r["s"][0] == 0.0 and r["s"][1] < -1     # identical: 0; blurred: far below
    assert r["types"] == 3.0                       # a, man, dog (tokenize lower-cases)
    assert r["origin"] == ["biaslab-example-plugin"] * 2


def test_a_component_reads_its_own_settings_checked_at_stage_start(plugin_site):
    """The example's training set reads its one param at ``datasets.reweighted`` and its
    learned post-processor at ``eval_captioner.postprocessor_params.context_neutral``: defaults
    from the Settings dataclass, values from params.yaml, and a bad value (wrong type, out of
    range, unknown key) is a ParamError naming the dotted param when params.yaml is read."""
    out = _py(r"""
import json
from tests.test_registry import _tiny_context
from biaslab.data.variants import build
from biaslab.runtime.validate import ParamError, check_params
ctx = _tiny_context()
n = {}
for k in (None, 1):
    c = _tiny_context()
    if k is not None:
        c.params = {**c.params, "reweighted": {"max_copies": k}}
    n[str(k)] = [len(build("reweighted", c)), c.settings("reweighted").max_copies]
errs = []
for p in ({"datasets": {"reweighted": {"max_copies": 0}}},
          {"datasets": {"reweighted": {"max_copies": "3"}}},
          {"datasets": {"reweighted": {"copies": 3}}},
          {"datasets": {"reweightd": {"max_copies": 3}}},
          {"eval_captioner": {"postprocessor_params": {"context_neutral": {"threshold": 0.4}}}}):
    try:
        check_params(p)
        errs.append(None)
    except ParamError as e:
        errs.append(e.param)
check_params({"datasets": {"reweighted": {"max_copies": 3}}})
print(json.dumps({"n": n, "n_orig": len(ctx.original), "errs": errs}))
""", plugin_site)
    r = json.loads(out)
    assert r["n"]["None"][1] == 20 and r["n"]["1"] == [r["n_orig"], 1]   # 1 copy: Original
    assert r["n"]["None"][0] >= r["n_orig"]
    assert r["errs"] == ["datasets.reweighted.max_copies", "datasets.reweighted.max_copies",
                         "datasets.reweighted", "datasets.reweightd",
                         "eval_captioner.postprocessor_params.context_neutral.threshold"]


def test_the_learned_post_processor_trains_on_the_training_captions(plugin_site):
    """``context_neutral`` fits its context model on ``ctx.train_captions``: a gender word that
    the caption's other words predict (a woman in the kitchen, after training captions where
    the kitchen goes with women) is neutralised, one they contradict is kept, a caption without
    one is unchanged; with ``threshold`` 1 nothing is; without training captions the row is
    skipped."""
    out = _py(r"""
import json, pandas as pd
from biaslab import registry as R
from biaslab.captioning import postprocess as PP
train = (["a woman cooking in a kitchen", "a woman at the kitchen counter",
          "a girl in a kitchen with a cake"] * 4 +
         ["a man riding a skateboard", "a man doing a skateboard trick",
          "a boy on a skateboard at the park"] * 4)
caps = ["a woman in a kitchen", "a woman riding a skateboard", "a dog on a couch"]
table = pd.DataFrame({"image_id": [1, 2, 3], "path": ["a", "b", "c"]})
def run(params, train_captions=tuple(train)):
    c = PP.CaptionContext(table=table, seed=0, feature_cache=".",
                          train_captions=train_captions,
                          component_settings=R.POSTPROCESSORS.settings_for(
                              ["context_neutral"], params))
    try:
        return PP.apply("context_neutral", caps, c)
    except R.Skipped as why:
        return "skipped: " + str(why)
print(json.dumps({"default": run({}), "again": run({}),
                  "strict": run({"eval_captioner": {"postprocessor_params": {
                      "context_neutral": {"threshold": 1.0}}}}),
                  "none": run({}, ())}))
""", plugin_site)
    r = json.loads(out)
    assert r["default"] == ["a person in a kitchen", "a woman riding a skateboard",
                            "a dog on a couch"]
    assert r["again"] == r["default"]                     # the fit is deterministic
    assert r["strict"] == ["a woman in a kitchen", "a woman riding a skateboard",
                           "a dog on a couch"]
    assert r["none"].startswith("skipped: ")


def test_a_kinds_context_reads_the_settings_its_stage_resolved_else_the_defaults(tmp_path):
    """One lookup for every kind: ``Registry.settings_for`` resolves what a stage hands its
    components, ``ctx.settings(name)`` returns it, and a name the stage did not resolve gets
    its entry's defaults (a filter's ``grid`` 14, paper 000 Eq. 6)."""
    from biaslab.counterfactual.filters import ColorFidelitySettings, FilterContext
    given = R.FILTERS.settings_for(["color_fidelity"],
                                   {"filters": {"filter_params": {"color_fidelity": {"grid": 3}}}})
    ctx = FilterContext(candidates=pd.DataFrame(), candidate_paths=[], image_ids=[],
                        original_paths=[], originals={}, scorer=None, object_predictor=None,
                        component_settings=given)
    assert ctx.settings("color_fidelity") == ColorFidelitySettings(grid=3)
    bare = FilterContext(candidates=pd.DataFrame(), candidate_paths=[], image_ids=[],
                         original_paths=[], originals={}, scorer=None, object_predictor=None)
    assert bare.settings("color_fidelity") == ColorFidelitySettings(grid=14)
    assert bare.settings("prompt_adherence") is None
    cap = PP.CaptionContext(table=pd.DataFrame({"image_id": [1]}), seed=0,
                            feature_cache=str(tmp_path))
    assert cap.settings("LIBRA") == R.POSTPROCESSORS.settings("LIBRA")
    with pytest.raises(R.RegistryError, match="unknown filter 'colour'"):
        bare.settings("colour")


def test_backends_and_archs_declare_their_settings():
    """A backend's settings are the keys of the shared group ``generate`` it reads, with its
    own defaults (InstructPix2Pix's 500 steps, paper 001, against Stable Diffusion's 50); an
    arch's are the config it builds from group ``captioner``, with its checks."""
    gen = {"backend": "sd_inpaint", "m": 3, "shards": 2, "steps": 20, "extent_weight": 2.0}
    sd = R.BACKENDS.settings("sd_inpaint", {"generate": gen})
    assert (sd.steps, sd.resolution, sd.model) == (20, 512, None)
    ip = R.BACKENDS.settings("instruct_pix2pix", {})
    assert (ip.steps, ip.image_guidance_scale, ip.guidance_scales) == (500, 1.5, (1.0,))
    cp = R.BACKENDS.settings("copy_paste", {"generate": gen})
    assert (cp.extent_weight, cp.donor_splits, cp.inpaint_method) == (2.0, ("train",), "telea")
    assert R.BACKENDS.settings("render", {"generate": gen}) is None
    cfg = R.ARCHS.settings("clipcap", {"captioner": {"datasets": ["original"], "beam": 2}})
    assert (type(cfg).__name__, cfg.beam) == ("CaptionerConfig", 2)
    with pytest.raises(ValueError, match="captioner.beam must be >= 1"):
        R.ARCHS.settings("clipcap", {"captioner": {"beam": 0}})
    assert {e.name for e in R.ARCHS.builtins() if e.settings} == {"clipcap", "transformer",
                                                                   "blip2"}
