"""The registry's column kinds: candidate filters (Table 4, weighted rank
selection), image backbones and captioning metrics (Table 2): built-ins as the papers define
them, and a plug-in of each kind through entry points, with hand-computed expectations."""
from __future__ import annotations

import importlib.metadata

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from biaslab import registry as R
from biaslab import report as RP
from biaslab.report import table4 as T4
from biaslab.captioning import evaluation as C
from biaslab.counterfactual import filters as F
from biaslab.runtime.validate import ParamError, check_params


class _EP:
    """A stand-in for an importlib.metadata.EntryPoint."""
    def __init__(self, name, obj):
        self.name, self.value, self._obj = name, f"pkg:{name}", obj
        self.dist = type("D", (), {"name": "pkg"})()

    def load(self):
        return self._obj


@pytest.fixture
def plugged(monkeypatch):
    """``plug(entry)`` adds ``entry`` to its kind's registry as an installed package's."""
    touched = []

    def plug(*entries):
        by_group = {}
        for e in entries:
            by_group.setdefault(R.REGISTRIES[e.kind].group, []).append(_EP(e.name, e))
        monkeypatch.setattr(importlib.metadata, "entry_points",
                            lambda group=None: by_group.get(group, []))
        for e in entries:
            R.REGISTRIES[e.kind].reset_plugins()
            touched.append(R.REGISTRIES[e.kind])
    yield plug
    monkeypatch.undo()
    for reg in touched:
        reg.reset_plugins()


# ------------------------------------------------------------------------- built-ins
def test_the_builtin_filters_are_paper_000s_three_with_table_4s_labels():
    assert tuple(e.name for e in R.FILTERS.builtins()) == F.FILTERS == (
        "prompt_adherence", "object_consistency", "color_fidelity")
    # Table 4's column order (Object, Color, then the prompt score that stands in for gender)
    assert T4.TABLE4_FILTERS == (("object_consistency/mean_selected", "Object"),
                                 ("color_fidelity/mean_selected", "Color"),
                                 ("prompt_adherence/mean_selected", "Prompt"))
    for e in R.FILTERS.builtins():
        assert callable(e.load())


def test_the_builtin_backbones_are_the_default_and_table_1s_three():
    from biaslab.classify.model import PAPER_BACKBONES
    assert tuple(e.name for e in R.BACKBONES.builtins()) == (
        "efficientnet_lite0", "microsoft/resnet-50", "microsoft/swin-tiny-patch4-window7-224",
        "facebook/convnext-base-224")
    assert PAPER_BACKBONES == {"ResNet-50": "microsoft/resnet-50",
                               "Swin-T": "microsoft/swin-tiny-patch4-window7-224",
                               "ConvNeXt-B": "facebook/convnext-base-224"}


def test_the_builtin_metrics_are_the_keys_the_stage_writes_and_table_2s_headers():
    assert {e.name for e in R.metric_entries("captioning", builtin_only=True)} == set(C.METRICS)
    # the headers Table 2 has prints (written out by hand)
    assert RP.TABLE2_COLUMNS == (
        ("METEOR", "METEOR ↑"), ("CLIPScore", "CLIPScore ↑"), ("Ratio", "Ratio →1"),
        ("no_gender_word", "no gender word %"), ("length", "words"), ("LIC", "LIC ↓"),
        ("DBAC_T_to_A", "DBAC T→A ×100 ↓"), ("DBAC_A_to_T", "DBAC A→T ×100 ↓"),
        ("DBAC_direct_T_to_A", "DBAC T→A direct ×100 ↓"), ("Error", "Error ↓"),
        ("BiasAmp", "BiasAmp ↓"), ("DBA_G", "DBA_G ↓"), ("DBA_O", "DBA_O ↓"),
        ("BLEU-4", "BLEU-4 ↑"), ("CIDEr", "CIDEr ↑"))
    assert RP.SCALE_100 == ("DBAC_T_to_A", "DBAC_A_to_T", "DBAC_direct_T_to_A",
                            "DBAC_direct_A_to_T")
    assert RP.display_scale("DBAC_A_to_T") == 100 and RP.display_scale("mAP") == 1


def test_metric_and_backbone_entries_are_checked():
    with pytest.raises(R.RegistryError, match="task must be one of"):
        R.Entry(kind="metrics", name="m", target=object(), better="lower")
    with pytest.raises(R.RegistryError, match="better must be one of"):
        R.Entry(kind="metrics", name="m", target=object(), task="captioning", better="up")
    with pytest.raises(R.RegistryError, match="scale must be a number > 0"):
        R.Entry(kind="metrics", name="m", target=object(), task="captioning", better="lower",
                scale=0)
    # a Hugging Face name is a backbone's name, not a training set's
    R.Entry(kind="backbones", name="org/model-1.5", target=object())
    for bad in ("org/../x", "/abs"):
        with pytest.raises(R.RegistryError, match="use letters"):
            R.Entry(kind="backbones", name=bad, target=object())
    with pytest.raises(R.RegistryError, match="use letters"):
        R.Entry(kind="datasets", name="org/model", target=object())


# ------------------------------------------------------------------------- filters
class _Scorer:
    """phi(image) = (mean red, mean green) of the file; psi(prompt) = (1, 0) for a prompt
    with "red", else (0, 1)."""
    accepts_features = False

    def encode_images(self, paths):
        return np.asarray([np.asarray(Image.open(p).convert("RGB"), np.float64)
                           .mean(axis=(0, 1))[:2] + 1e-3 for p in paths])

    def encode_texts(self, texts):
        return np.asarray([[1.0, 0.0] if "red" in t else [0.0, 1.0] for t in texts])


class _Objects:
    """One object per file: {"red"} when it is mostly red, {"green"} otherwise."""
    accepts_features = False

    def predict_sets(self, paths):
        out = []
        for p in paths:
            r, g, _ = np.asarray(Image.open(p).convert("RGB"), np.float64).mean(axis=(0, 1))
            out.append({"red"} if r > g else {"green"})
        return out


def _candidates(tmp_path):
    """One original (red) and three candidates for (1, female): red, green, dark red."""
    def img(name, rgb):
        p = tmp_path / f"{name}.png"
        Image.new("RGB", (16, 16), rgb).save(p)
        return str(p)
    orig = img("orig", (200, 0, 0))
    paths = [img("c0", (200, 0, 0)), img("c1", (0, 200, 0)), img("c2", (100, 0, 0))]
    cands = pd.DataFrame({"image_id": [1, 1, 1], "group": ["female"] * 3, "j": [0, 1, 2],
                          "path": paths, "prompt": ["a red person"] * 3})
    return cands, {1: orig}


def _brightness(ctx):
    """A plug-in filter: the candidate's mean pixel value in [0, 1]."""
    return np.asarray([np.asarray(Image.open(p).convert("L"), np.float64).mean() / 255
                       for p in ctx.candidate_paths])


def test_the_builtin_filters_score_as_the_equations(tmp_path):
    cands, orig = _candidates(tmp_path)
    s = F.score_candidates(cands, orig, _Scorer(), _Objects())
    assert list(s.columns[-3:]) == list(F.FILTERS)
    # Eq. 4: cosine of (r, g) with (1, 0): the red ones ~1, the green one ~0
    assert s["prompt_adherence"].tolist() == pytest.approx([1.0, 0.0, 1.0], abs=1e-4)
    # Eq. 5: F1 of {red} / {green} against the original's {red}
    assert s["object_consistency"].tolist() == [1.0, 0.0, 1.0]
    # Eq. 6: identical thumbnails -> inf; the others 1 / ||difference||_F over 14 x 14 x 3
    assert s["color_fidelity"][0] == np.inf
    assert s["color_fidelity"][2] == pytest.approx(1 / np.sqrt(196 * (100 / 255) ** 2))


def test_a_plugin_filter_joins_scoring_and_selection(tmp_path, plugged):
    plugged(R.Entry(kind="filters", name="brightness", target=_brightness, label="Bright"))
    cands, orig = _candidates(tmp_path)
    names = ["color_fidelity", "brightness"]
    s = F.score_candidates(cands, orig, _Scorer(), _Objects(), names=names)
    assert list(s.columns[-2:]) == names and "prompt_adherence" not in s.columns
    assert s["brightness"].tolist() == pytest.approx(
        [np.mean([200, 0, 0]) * 0.299 * 3 / 255, 0.587 * 200 / 255, 0.299 * 100 / 255],
        abs=0.01)
    # brightness alone ranks the green candidate first (L: 117 > 60 > 30)
    assert F.select(s, ["brightness"], [1]).j.tolist() == [1]
    # colour fidelity alone keeps the identical one
    assert F.select(s, names, [1, 0]).j.tolist() == [0]
    # Table 4 gets its column after the built-ins
    assert T4.table4_filters(names)[-1] == ("brightness/mean_selected", "Bright")
    check_params({"filters": {"names": names, "weights": [1, 1]}})


def test_filter_errors_name_the_filter(tmp_path, plugged):
    plugged(R.Entry(kind="filters", name="short", target=lambda ctx: np.zeros(1)))
    cands, orig = _candidates(tmp_path)
    with pytest.raises(R.RegistryError, match=r"unknown filter 'nope'; known: \[.*'short'"):
        F.score_candidates(cands, orig, _Scorer(), _Objects(), names=["nope"])
    with pytest.raises(ValueError, match=r"filter 'short' must return one number per "
                                         r"candidate: shape \(1,\) for 3"):
        F.score_candidates(cands, orig, _Scorer(), _Objects(), names=["short"])
    with pytest.raises(ParamError, match=r"filters.names.*unknown filter\(s\) \['nope'\]"):
        check_params({"filters": {"names": ["nope"], "weights": [1]}})


def test_table_4_shows_a_filter_whose_package_is_absent_by_its_name():
    rows = [{"filters": "x", "names": ["color_fidelity", "mine"], "Color": (0.5, None),
             "mine": (0.25, None), "CLIPScore": (None, None), "data": "", "experiment": "e"}]
    md = T4.table4_markdown(rows)
    assert md.splitlines()[0].startswith("| Filters | Object | Color | Prompt | mine |")
    assert "| x | – | 0.500 | – | 0.250 |" in md


# ------------------------------------------------------------------------- backbones
class _Tiny:
    dim = 3

    def __init__(self, name, device="cpu", image_size=None, num_threads=None):
        self.name, self.image_size = name, image_size


def test_a_plugin_backbone_is_built_by_its_entry_and_may_be_saved(plugged):
    from biaslab.models import features as FT
    plugged(R.Entry(kind="backbones", name="lab/tiny-1", target=_Tiny, label="Tiny"))
    enc = FT.load_image_encoder("lab/tiny-1", image_size=32)
    assert isinstance(enc, _Tiny) and enc.image_size == 32
    assert "lab/tiny-1" in FT.allowed_image_encoders()
    assert "lab/tiny-1" not in [e.name for e in R.BACKBONES.builtins()]


# ------------------------------------------------------------------------- metrics
def _types(ctx):
    return float(len({w for c in ctx.predictions.values() for w in c.split()}))


TYPES = R.Entry(kind="metrics", name="types", target=_types, label="Types",
                task="captioning", better="higher")


def test_a_plugin_metric_is_computed_per_seed_and_becomes_a_table_2_column(plugged):
    plugged(TYPES)
    preds = {1: "a man on a horse", 2: "a woman on a bike", 3: "a dog"}
    genders = {1: "male", 2: "female", 3: "none"}
    flat, _ = C.caption_metrics(preds, genders, {}, metrics=("ratio",),
                                extra_metrics=["types"])
    assert flat["types"] == 7.0        # a, man, on, horse, woman, bike, dog
    flat2, _ = C.caption_metrics(preds, genders, {}, metrics=("ratio",))
    assert "types" not in flat2        # only when named (eval_captioner.metrics)
    keys = C.metric_keys(["types"])
    assert keys[-1] == "types" and keys[:-1] == C.METRICS
    rec = C.seed_records([flat, {**flat, "types": 10.0}], keys=keys)
    assert rec["types"]["mean"] == 8.5 and rec["per_seed"][1]["types"] == 10.0
    cap = {"original": rec, "gone": {**rec, "other": rec["types"]}}
    cols = RP.caption_columns(cap)
    assert cols[:len(RP.TABLE2_COLUMNS)] == RP.TABLE2_COLUMNS
    # registered: its header and arrow; a key without an installed entry: the key
    assert cols[len(RP.TABLE2_COLUMNS):] == (("types", "Types ↑"), ("other", "other"))
    assert RP.table2(cap)["original"]["types"]["mean"] == 8.5
    assert RP.caption_columns({"original": {k: v for k, v in rec.items() if k != "types"}}) \
        == RP.TABLE2_COLUMNS


def test_metric_errors_name_the_metric(plugged):
    bad = R.Entry(kind="metrics", name="words", target=lambda ctx: "many",
                  task="captioning", better=None)
    boom = R.Entry(kind="metrics", name="boom", target=lambda ctx: 1 / 0,
                   task="captioning", better=None)
    plugged(TYPES, bad, boom)
    preds, genders = {1: "a man"}, {1: "male"}
    with pytest.raises(ValueError, match="metric 'words' .*returned str"):
        C.caption_metrics(preds, genders, {}, metrics=("ratio",), extra_metrics=["words"])
    with pytest.raises(ValueError, match="metric 'boom' \\(from pkg\\) failed: division"):
        C.caption_metrics(preds, genders, {}, metrics=("ratio",), extra_metrics=["boom"])
    with pytest.raises(ValueError, match="'LIC' is a built-in"):
        C.caption_metrics(preds, genders, {}, metrics=("ratio",), extra_metrics=["LIC"])
    check_params({"eval_captioner": {"metrics": ["types"]}})
    with pytest.raises(ParamError, match="eval_captioner.metrics.*'LIC' is a built-in"):
        check_params({"eval_captioner": {"metrics": ["LIC"]}})
    with pytest.raises(ParamError, match=r"eval_captioner.metrics.*unknown name\(s\) \['x'\]"):
        check_params({"eval_captioner": {"metrics": ["x"]}})


def test_every_builtin_column_is_computed_through_its_registry_entry():
    """The built-in captioning metrics take the plug-ins' path: each row's number is its
    entry's ``compute(ctx)`` (biaslab.captioning.columns), read from the shared details or
    computed from the captions; the hand-countable ones by hand."""
    preds = {1: "a man riding a horse", 2: "a man on a bed", 3: "a woman with a cat",
             4: "a person"}
    genders = {1: "male", 2: "female", 3: "female", 4: "male"}
    flat, det = C.caption_metrics(preds, genders, {}, metrics=("ratio", "error"))
    ctx = C.MetricContext(predictions=preds, genders=genders, human={}, details=det)
    for e in R.metric_entries("captioning", builtin_only=True):
        assert e.target.startswith("biaslab.captioning.columns:"), e.name
        assert C.compute_metric(e.name, ctx) == flat[e.name], e.name
    # 1 of 4 labelled captions names no gender word; 5 + 5 + 5 + 2 tokens over 4 captions
    assert flat["no_gender_word"] == 25.0 and flat["length"] == 17 / 4
    # two "man", one "woman": r = 2; image 2 (female) is called a man: 1 error of 4 labelled
    # images (the neutral caption of image 4 is no error but counts, Burns et al.)
    assert (flat["Ratio"], flat["ratio_raw"], flat["n_images"]) == (2.0, 2.0, 4)
    assert flat["Error"] == 25.0
    # a group that was not computed is None, not a number read from elsewhere
    assert flat["LIC"] is None and flat["METEOR"] is None and flat["DBAC_T_to_A"] is None
    # the row keeps its documented key order: each count right after its metric
    keys = list(flat)
    assert keys[keys.index("Ratio") + 1] == "ratio_raw"
    assert keys[keys.index("DBA_O") + 1] == "n_images"
    assert [k for k in keys if k not in ("ratio_raw", "n_images")] == list(C.METRICS)
