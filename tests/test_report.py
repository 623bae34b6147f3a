"""biaslab.report: hand-computed table cells, row order, Table 4 from `dvc exp show --json`,
and the report stage on small metrics files."""
import importlib.util
from pathlib import Path
import json

import numpy as np
import pytest
import yaml

from biaslab import report as R
from biaslab.report import notes as NOTES
from biaslab.report import table4 as T4
from biaslab.runtime import stats
from tests.conftest import REPO


def test_cell_formats_mean_std_and_missing():
    assert R.cell(12.345, 0.456) == "12.3 ± 0.5"
    assert R.cell(12.345, None, digits=2) == "12.35"
    assert R.cell(None, 1.0) == R.DASH
    assert R.cell(float("nan"), 1.0) == R.DASH
    assert R.cell(float("inf")) == R.DASH
    assert R.cell("not a number") == R.DASH
    assert R.cell(True) == R.DASH     # a flag is not a metric


def _r(values):
    """A stored record plus its per-seed values (as the stages write them)."""
    return stats.record(values)


def _row(**metrics):
    n = max(len(v) for v in metrics.values())
    per = [{"seed": i, **{k: (v[i] if i < len(v) else None) for k, v in metrics.items()}}
           for i in range(n)]
    return {**{k: _r(v) for k, v in metrics.items()}, "per_seed": per}


CLASSIFICATION = {
    "synthetic": _row(mAP=[60.0, 61.0, 59.0], Ratio=[1.1, 1.0, 1.2],
                      Leakage=[-4.7, -5.0, -4.4], LK_M=[90.0, 90.0, 90.0]),
    "original": _row(mAP=[78.0, 79.0, 80.0], Ratio=[10.0, "inf", 11.0],
                     Leakage=[0.2, 0.4, 0.0]),
    "test_set": {"n_female": 40, "n_male": 40},
    "extra_method": _row(mAP=[1.0]),
    "adversarial": {**_row(mAP=[70.0, 71.0], Ratio=[None, None]), "ratio_na": "no gender outputs"},
}


def test_table1_rows_in_paper_order_and_cells_with_ci():
    t = R.table1(CLASSIFICATION)
    assert list(t) == ["original", "adversarial", "synthetic", "extra_method"]   # no test_set
    assert t["original"]["mAP"]["mean"] == 79.0 and t["original"]["LK_M"] is None
    md = R.markdown(t, R.TABLE1_COLUMNS).splitlines()
    assert md[0].startswith("| Method | mAP ↑ | Ratio →1 | Ratio_E →1 | Leakage ↓")
    # mAP 78, 79, 80: std 1, t(0.975, 2) * 1 / sqrt(3) = 2.48; one infinite Ratio seed is shown
    assert md[2] == "| Original | 79.0 ± 2.5 | ∞ (1/3 seeds) | – | 0.2 ± 0.5 | – | – | – | – |"
    assert md[3].startswith("| Adversarial | 70.5 ± 6.4 | n/a | n/a |")
    assert md[5] == "| extra_method | 1.0 | – | – | – | – | – | – | – |"  # one seed: no CI
    assert R.n_seeds(CLASSIFICATION) == "1-3"


def test_differences_from_original_hand_computed():
    d = R.differences(CLASSIFICATION, R.TABLE1_DIFF)
    # leakage: synthetic mean -4.7 minus original mean 0.2 = -4.9 (Welch interval)
    assert d["synthetic"]["Leakage"]["diff"] == pytest.approx(-4.9)
    assert d["synthetic"]["Leakage"]["hi"] < 0
    assert d["synthetic"]["Ratio"]["diff"] is None          # Original has an infinite seed
    md = R.diff_markdown(d, R.TABLE1_DIFF)
    assert "| S_synthetic | – | -4.9 [" in md


def test_table2_rows_and_records():
    cap = {"synthetic": _row(METEOR=[20.0, 21.0], LIC=[2.0, 3.0]),
           "original+LIBRA": _row(METEOR=[18.0, 18.0]),
           "original": _row(METEOR=[21.0, 21.2], Ratio=[2.5, None]),
           "subsample": _row(METEOR=[15.0])}
    t = R.table2(cap)
    assert list(t) == ["original", "subsample", "original+LIBRA", "synthetic"]
    assert t["synthetic"]["LIC"]["mean"] == 2.5
    md = R.markdown(t, R.TABLE2_COLUMNS)
    assert "| Original + LIBRA | 18.0 ± 0.0 |" in md
    assert "| Original | 21.1 ± 1.3 | – | 2.5 (1 missing) |" in md


def test_table3_probe_and_flat_metrics():
    art = {"original": _row(ratio_orig=[1.0, 1.0], ratio_inp=[1.0, 1.05], delta=[0.0, 5.0]),
           "test_set": {"backend": "render"}}
    t = R.table3(art)
    assert list(t) == ["original"]
    flat = R.flat_metrics({"table3": t, "table1": R.table1(CLASSIFICATION)})
    assert flat["table3/original/delta"] == 2.5
    assert flat["table1/original/mAP"] == 79.0
    assert "table1/original/Ratio" not in flat        # infinite cells are left out
    probe = {"classifier": {"original": {"cast": {**_r([0.3, 0.4]), "values": [0.3, 0.4]}}}}
    pt = R.probe_table(probe, "classifier")
    assert pt["original"]["cast"]["mean"] == pytest.approx(0.35) and pt["original"]["scene"] is None


def test_weights_label():
    names = ["prompt_adherence", "object_consistency", "color_fidelity"]
    assert T4.weights_label([1, 0, 1], names) == "prompt_adherence + color_fidelity"
    assert T4.weights_label([0, 0, 0], names) == "No filter"
    assert T4.weights_label([2, 1, 0], names) == "2·prompt_adherence + object_consistency"


def _rec(name, weights, obj, clip=None):
    data = {"params": {"params.yaml": {"data": {"filters": {
        "names": ["prompt_adherence", "object_consistency", "color_fidelity"],
        "weights": weights}}}},
        "metrics": {"metrics/select.json": {"data": {
            "object_consistency/mean_selected": obj, "color_fidelity/mean_selected": 0.5,
            "prompt_adherence/mean_selected": 0.3}}}}
    if clip is not None:
        data["metrics"]["metrics/captioning.json"] = {"data": {"synthetic": {
            "CLIPScore": {"mean": clip, "ci95": 1.0, "n": 3}}}}
    return {"rev": f"rev-{name}", "name": name, "data": data, "experiments": None}


def test_table4_keeps_one_row_per_weights_and_data_source():
    a, b = _rec("syn", [1, 1, 1], 0.7), _rec("coco", [1, 1, 1], 0.5)
    b["data"]["params"]["params.yaml"]["data"]["data"] = {"root": "../shared/coco-mini"}
    rows = T4.table4_from_experiments([a, b, _rec("again", [1, 1, 1], 0.1)])
    assert [(r["experiment"], r["data"]) for r in rows] == [("syn", None),
                                                           ("coco", "../shared/coco-mini")]


def test_table4_from_dvc_exp_show_json():
    # DVC 3 layout: workspace, then the baseline commit with experiments[].revs[]
    show = [
        _rec(None, [1, 1, 1], 0.71, 70.0),
        {"rev": "abc", "name": "main", "data": _rec("main", [1, 1, 1], 0.70)["data"],
         "experiments": [
             {"name": "abl-110", "executor": None, "revs": [_rec("abl-110", [1, 1, 0], 0.8)]},
             {"name": "abl-000", "executor": None, "revs": [_rec("abl-000", [0, 0, 0], 0.6)]},
             {"name": "broken", "executor": None, "revs": [{"rev": "x", "name": "broken",
                                                            "data": {"params": {}}}]},
         ]},
    ]
    rows = T4.table4_from_experiments(show)
    assert [r["filters"] for r in rows] == [
        "prompt_adherence + object_consistency + color_fidelity",
        "prompt_adherence + object_consistency", "No filter"]
    assert rows[0]["Object"] == (0.71, None) and rows[0]["CLIPScore"] == (70.0, 1.0)
    assert rows[1]["experiment"] == "abl-110" and rows[1]["CLIPScore"] == (None, None)
    md = T4.table4_markdown(rows).splitlines()
    assert md[0].startswith("| Filters | Object | Color | Prompt | CLIPScore")
    assert md[3] == ("| prompt_adherence + object_consistency | 0.800 | 0.500 | 0.300 | – | "
                     " | abl-110 |")


def test_report_stage_on_small_metrics(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("stage_report", REPO / "stages" / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"report": {"digits": 1}, "filters": {
        "names": ["prompt_adherence", "object_consistency", "color_fidelity"],
        "weights": [1, 1, 1]}, "generate": {"backend": "render"},
        "data": {"source": "synthetic"}}))
    # Table 4's row carries the weights select used (recorded), not the params' (a skin-tone
    # run drops colour fidelity's)
    m = tmp_path / "metrics"
    m.mkdir()
    sens = {"original": {"cast": {**_r([0.3, 0.31, 0.29]), "values": [0.3, 0.31, 0.29]}},
            "synthetic": {"cast": {**_r([0.0, 0.01, -0.01]), "values": [0.0, 0.01, -0.01]}}}
    cls = {**CLASSIFICATION, "test_set": {**CLASSIFICATION.get("test_set", {}),
                                          "backbone": "efficientnet_lite0"},
           "backbones": {"resnet-50": {"original": _row(mAP=[50.0, 52.0], Ratio=[1.2, 1.4]),
                                       "synthetic": _row(mAP=[48.0, 50.0], Ratio=[1.0, 1.0])}}}
    files = {"classification": cls,
             "captioning": {"original": _row(METEOR=[21.0, 21.2], CLIPScore=[60.0, 61.0]),
                            "synthetic": _row(METEOR=[20.0, 20.0], CLIPScore=[58.0, 59.0]),
                            "archs": {"transformer": {
                                "original": _row(METEOR=[25.0, 25.0], LIC=[1.0, 3.0]),
                                "synthetic": _row(METEOR=[24.0, 26.0], LIC=[0.0, 0.0])}}},
             "artifact": {"original": _row(ratio_orig=[1.0], delta=[2.0])},
             "artifact_captioner": {"synthetic": _row(ratio_inp=[1.5], delta=[4.0])},
             "probe": {"classifier": sens, "captioner": {}, "n_pairs": {"cast": 3}},
             "select": {"object_consistency/mean_selected": 0.7,
                        "weights": {"color_fidelity": 1, "object_consistency": 0,
                                    "prompt_adherence": 1}},
             "human_bias": {"Ratio": 1.03, "Error": 0.0, "LIC_D": _r([61.0, 62.0])},
             "bcs": {"total": 10, "selected": {"swap": 0, "t5": 5, "merged": 5},
                     "mix": {"swap": 0.0, "t5": 1.0, "merged": 1.0},
                     "d_mean": {"A_GC": 0.3125, "Dt5g": -0.04}},
             "dcg_apply": {"swapped": {"n": 4, "before": {"wrong": 1.0, "correct": 0.0},
                                       "after": {"wrong": 0.25, "correct": 0.5}}},
             "retrieval": {"scorer": {"Bias@10": {"mean": 0.0, "ci95": 0.1},
                                      "MaxSkew@10": {"mean": 0.655, "ci95": 0.008}},
                           "random": {"Bias@10": {"mean": -0.02, "ci95": 0.03}},
                           "setup": {"ks": [10, 100], "n_queries": 326, "n_gallery": 80}},
             "controls": {"replicates": [0, 1],
                          "classifier": {"context_reader": {"Ratio": {
                              "expected": {"value": 1.5}, "measured": _r([1.2, 1.2]),
                              "verdict": "does not match"}}},
                          "probe": {"context_reader[cast]": {"cast": {
                              "expected": {"value": 2.0}, "measured": {"mean": 2.0},
                              "verdict": "matches"}}},
                          "power": {"classifier": {"Leakage": {"mde": 3.25}},
                                    "captioner": {"LIC": {"mde": 30.6},
                                                  "Leakage": {"mde": 9.0}}},
                          "summary": {"matches": 1, "does_not_match": 1, "n": 2}}}
    files["datasets"] = {"original": {"n_samples": 80, "n_images": 80, "max_repeats": 1},
                         "oversample": {"n_samples": 200, "n_images": 80, "max_repeats": 40,
                                        "max_repeats_share": 0.2, "n_repeated": 3,
                                        "effective_images": 12.5, "max_skew_bound": 0.1,
                                        "objects_max_abs_skew": 0.09}}
    # paper 001 appendix D (tests/test_spurious.py's record)
    from tests.test_spurious import _record
    files["spurious"] = _record()
    # the domain check; item 6: the residue check
    cls["domain"] = {"probe_auc": _r([52.0, 58.0]),
                     "original": _row(mAP_real=[70.0, 72.0], mAP_generated=[69.0, 70.0],
                                      domain_gap=[-1.0, -2.0]),
                     "synthetic": _row(mAP_real=[60.0, 61.0], mAP_generated=[66.0, 69.0],
                                       domain_gap=[6.0, 8.0])}
    files["residue"] = {"n_images": 80, "probe_auc": {"mean": 99.0, "ci95": 1.0},
                        "erased_auc": {"polygon": {"mean": 90.8, "ci95": 3.7},
                                       "box": {"mean": 95.4, "ci95": 2.6}},
                        "mask_fraction": {"polygon": 0.139, "box": 0.237},
                        "residue_bound": {"mean": -4.6, "ci95": 3.0},
                        "counterfactual": {"backend": "render",
                                           "target_auc_other": {"mean": 87.2, "ci95": 4.2},
                                           "target_auc_same": {"mean": 100.0, "ci95": 0.0}}}
    # the protected attribute's section (stage eval_attribute)
    per = {"female_dark": 5, "female_light": 30, "male_dark": 8, "male_light": 40}
    files["attribute"] = {
        "attribute": "gender_skin", "metrics": "computed here",
        "test_images": {"n": 83, "per_group": per, "smallest_pair": ["female_dark", "male_dark"],
                        "min_detectable_difference_pp": 80.0, "alpha": 0.05, "power": 0.8},
        "rows": {"original": {"LIC_M": _r([10.0, 12.0]), "LIC_D": _r([6.0, 6.0]),
                              "LIC": _r([4.0, 6.0]), "Error_pooled": _r([3.0, 3.0]),
                              "Error_worst_group_gap": _r([20.0, 20.0]),
                              **{f"Error_{g}": _r([1.0, 1.0]) for g in per}}}}
    cls["attribute"] = {"name": "gender_skin", "groups": list(per),
                        "n_test_labelled_by_group": per, "n_train_by_group": per,
                        "rows": {"original": {"Leakage": _r([2.0, 4.0]),
                                              "LK_M": _r([30.0, 32.0]),
                                              "LK_D": _r([28.0, 28.0])}}}
    grp = {"mean": 0.2, "ci95": 0.01, "lo": 0.19, "hi": 0.21, "n": 5}
    files["audit"] = {"attribute": {
        "attribute": "gender_skin", "groups": list(per), "images": per,
        "prominence": {"area_frac": {"groups": {g: grp for g in per}, "p_kruskal": 0.5,
                                     "max_minus_min": 0.0},
                       "center_dist": {"groups": {g: grp for g in per}, "p_kruskal": None},
                       "n_without_person": 2},
        "objects": {"n_tested": 10, "n_significant": 1,
                    "top": [{"item": "bicycle", "max_group": "male_light",
                             "min_group": "female_dark", "rate_ratio": "inf", "p_adj": 0.001}]},
        "words": {"n_tested": 0, "n_significant": 0, "top": []},
        "supercategories": {"skipped": "the data's categories have no supercategory"},
        "distance": {"n_tested": 3, "n_significant": 1,
                     "top": [{"item": "dog", "closest_group": "male_dark",
                              "farthest_group": "female_light", "cohens_d": None,
                              "p_adj": 0.01}]},
        "appearance": {"n_tested": 2, "n_significant": 1,
                       "top": [{"item": "cup", "n": 40, "accuracy": 0.9,
                                "accuracy_ci95": 0.05, "chance": 0.45, "ratio": 2.0,
                                "p_adj": 0.0099}]}}}
    # the attribute's controls (stage controls_attribute)
    files["controls_attribute"] = {
        "attribute": "gender_skin", "groups": list(per), "stereotypes": {"male_light": "bicycle"},
        "replicates": [0, 1], "test_set": {"classifier": {"n_labelled_by_group": per}},
        "classifier": {"blind": {"LK_M": {"expected": {"direction": "<", "reference": 25.0},
                                          "measured": _r([6.0, 6.5]), "verdict": "matches"},
                                 "LK_D": {"measured": _r([30.0, 30.0])}}},
        "captioner": {"skipped": "the data has no captions"},
        "summary": {"matches": 1, "does_not_match": 0, "inconclusive": 0, "n": 1}}
    # the feature sensitivity beside Table 1 (stage sensitivity)
    from tests.test_sensitivity import _record as sensitivity_record
    files["sensitivity"] = sensitivity_record()
    files["sensitivity_captioner"] = {"available": False,
                                      "reason": "sensitivity.captioner_perturbations is empty"}
    for k, v in files.items():
        (m / f"{k}.json").write_text(json.dumps(v))
    mod.main()
    md = (tmp_path / "plots/report/tables.md").read_text()
    assert "### Table 1, feature sensitivity" in md
    assert (tmp_path / "plots/report/sensitivity.png").is_file()
    assert (tmp_path / "plots/report/sensitivity_captioner.png").is_file()   # says why not
    assert "Table 2, feature sensitivity: not run (sensitivity.captioner_perturbations is " \
        "empty)." in md
    assert "## Controls for gender_skin: the attribute's Leakage and LIC" in md
    assert "| classifier | blind | LK_M | < 25 | 6.25 ± " in md, md
    assert "| captioner | – | – | – | skipped: the data has no captions | – |" in md
    assert "1 of 1 match, 0 do not" in md
    assert "## Dataset audit by gender_skin (REVISE, paper 004 Sect. 5.1; stage audit)" in md
    assert ("| person size (fraction of the image) | 0.200 ± 0.010 | 0.200 ± 0.010 | "
            "0.200 ± 0.010 | 0.200 ± 0.010 | Kruskal-Wallis p = 0.5 |") in md, md
    assert "Objects: 1 of 10 tested categories differ between the groups (chi-square" in md
    assert "| bicycle | male_light | female_dark | inf | 0.001 |" in md
    # REVISE's context, distance and appearance
    assert ("Context by supercategory (Fig. 7): not measured (the data's categories have no "
            "supercategory).") in md
    assert "1 of 3 tested object categories differ between the groups (Kruskal-Wallis" in md
    assert "| dog | male_dark | female_light | – | 0.01 |" in md
    assert "| cup | 40 | 0.900 ± 0.050 | 0.450 | 2.00 | 0.0099 |" in md, md
    assert "## Protected attribute: gender_skin (stage eval_attribute)" in md
    assert ("female_dark 5, female_light 30, male_dark 8, male_light 40 (n = 83). The two "
            "smallest groups (female_dark, male_dark) detect a difference of a per-image rate "
            "(e.g. Error) of 80.0 percentage points") in md
    assert ("| Training set | LIC_M | LIC_D | LIC ↓ | Error (pooled) | Error female_dark (5 img) | "
            "Error female_light (30 img) | Error male_dark (8 img) | Error male_light (40 img) | "
            "worst-group gap ↓ |") in md
    # LIC_M (an accuracy x100, >= 0) keeps its interval in range: 11.0 ± 12.7 would reach -1.7
    assert "| Original | 11.0 [0.0, 23.7] | 6.0 ± 0.0 | 5.0 ± 12.7 | 3.0 ± 0.0 |" in md, md
    summary = json.loads((tmp_path / "metrics/summary.json").read_text())
    assert summary["attribute"] == {"name": "gender_skin",
                                    "original": {"LIC": {"mean": 5.0, "ci95": 12.7},
                                                 "Leakage": {"mean": 3.0, "ci95": 12.7}}}
    assert ("Classifiers: Leakage of gender_skin from their object predictions (paper 000 Eq. 7 "
            "and appendix B; a 4-way attacker") in md
    # the same models' mAP leads the attribute's classifier table (Table 1's utility)
    assert "| Method | mAP ↑ | Leakage ↓ | LK_M | LK_D |" in md
    assert "| Original | 79.0 ± 2.5 | 3.0 ± 12.7 | 31.0 ± 12.7 | 28.0 ± 0.0 |" in md
    assert "Cell: mean ± 95 % CI over n = 2 captioner seeds." in md
    assert "Cell: mean ± 95 % CI over n = 2 classifier seeds." in md
    assert ("S_synthetic 60.5 ± 6.4 real / 67.5 ± 19.1 generated (gap 7.0 ± 12.7)" in md
            and "AUC 55.0 ± 38.1 (50 = alike)" in md), md
    assert ("at polygon 90.8 ± 3.7 (erasing 14 % of the image), box 95.4 ± 2.6 (erasing 24 % "
            "of the image)") in md and "polygon minus box -4.6 ± 3.0" in md
    assert "`render` counterfactuals the probe reads the TARGET group at AUC 87.2 ± 4.2" in md
    assert "| Original | **79.0 ± 2.5** |" in md and "counterfactual backend" in md
    # the detectable difference under the table that shows the metric (Leakage is
    # no Table 2 column), the controls section, and a probe claim whose control missed
    assert "metrics/controls.json): Leakage 3.2." in md or "metrics/controls.json): Leakage 3.3" in md
    assert "metrics/controls.json): LIC 30.6." in md
    assert "## Metric controls (known answers)" in md
    assert "## Spurious correlations (paper 001 appendix D)" in md and "| 1 | 20 | -40.0" in md
    assert "| context_reader[cast] | cast | 2 | 2 | matches |" in md
    v = json.loads((tmp_path / "metrics/validity.json").read_text())
    assert {"task": "classifier", "metric": "Ratio", "valid": False,
            "not_matching": ["context_reader"], "inconclusive": []} in v["preconditions"]
    assert all(c["verdict"] == "metric not valid on this data"
               for c in v["checks"] if c["id"].endswith("/ratio<0"))
    # a second classifier backbone: its own Table 1 group (classifier.backbones)
    assert "Backbone `efficientnet_lite0` (the first of `classifier.backbones`" in md
    assert "### Table 1, backbone `resnet-50`" in md
    assert "| Original | **51.0 ± 12.7** |" in md
    # a second captioner architecture: its own Table 2 group (captioner.archs)
    assert "### Table 2, captioner `transformer` (n = 2 seeds)" in md
    assert "| Original | **25.0 ± 0.0** | – | – | – | – | <u>2.0 ± 12.7</u> |" in md  # ties
    assert "| S_synthetic | <u>49.0 ± 12.7</u> | **1.0 ± 0.0** |" in md
    assert "test images: 40 female / 40 male" in md
    assert "| prompt_adherence + color_fidelity | 0.700 |" in md
    assert "gender wrong 100.0% -> 25.0%" in md
    assert "swap:t5:merged = 0:1:1): 10 captions (swap: 0, t5: 5, merged: 5)" in md and "= 0.312." in md
    assert "| S_synthetic | – | 1.50 | 4.00 |" in md
    assert "## Validity" in md and "**holds**" in md
    # how over-sampling met its bound, beside Table 1
    assert ("Over-sampling: 200 samples of 80 images, the most repeated image 40 times (20 % "
            "of the samples), 3 images repeated, Kish's effective number of images 12.5") in md
    assert "| CLIP-style scorer | 0.000 ± 0.100 | 0.655 ± 0.008 |" in md
    # K = 100 on an 80-image gallery ranks the whole gallery: left out, and said so
    assert "Bias@100" not in md and "Not shown: K = 100 >= the gallery's 80 images" in md
    summary = json.loads((m / "summary_full.json").read_text())
    assert summary["synthetic"]["Leakage"]["diff"] == pytest.approx(-4.9)
    assert summary["original"]["mAP"]["mean"] == 79.0 and "diff" not in summary["original"]["mAP"]
    # the one DVC metric: numbers only (DVC's views diff numbers), the noise floor
    compact = json.loads((m / "summary.json").read_text())

    def leaves(x):
        return [v for y in x.values() for v in leaves(y)] if isinstance(x, dict) else [x]
    numeric = {k: v for k, v in compact.items() if k != "attribute"}   # attribute.name: a label
    assert all(v is None or isinstance(v, (int, float)) for v in leaves(numeric)), compact
    assert compact["original"]["mAP"] == {"mean": 79.0,
                                          "ci95": round(summary["original"]["mAP"]["ci95"], 1),
                                          "n": summary["original"]["mAP"]["n"]}
    assert compact["synthetic"]["Leakage"]["diff"] == pytest.approx(-4.9)
    lo, hi = compact["synthetic"]["Leakage"]["lo"], compact["synthetic"]["Leakage"]["hi"]
    assert lo < -4.9 < hi
    assert "Ratio (classifier)" in compact["original"]
    assert set(compact["validity"]) == {"holds", "fails", "no_practical_effect",
                                        "inconclusive", "not_testable",
                                        "metric_not_valid_on_this_data", "not_informative",
                                        "n"}
    assert set(compact["noise"]) <= {"Leakage", "mAP", "LIC", "Error", "masked AUC",
                                     "Ratio (classifier)", "Ratio (captioner)"}
    val = json.loads((m / "validity.json").read_text())
    ids = {c["id"]: c["verdict"] for c in val["checks"]}
    # every check carries its reason and the file it came from
    assert all(c.get("reason") and c.get("source", "").startswith("metrics/")
               for c in val["checks"]), val["checks"]
    assert ids["classifier/original/cast>0"] == "holds"
    # the domain check's own verdict (2 seeds: t CI 7 ± 12.7 contains 0), and its words beside
    # the Leakage verdict
    assert ids["classifier/synthetic/domain_gap>0"] == "inconclusive"
    lk = next(c for c in val["checks"] if c["id"] == "classifier/synthetic-original/leakage<0")
    assert "domain check: S_synthetic's object mAP on generated minus real" in lk["reason"]
    assert "no domain gap is shown, so the Leakage is read inside" in lk["reason"]
    assert ids["classifier/synthetic-original/cast<0"] == "holds"
    assert (tmp_path / "plots/report/table1.png").stat().st_size > 1000
    assert (tmp_path / "plots/report/forest.png").stat().st_size > 1000
    md_full = (tmp_path / "plots/report/tables.md").read_text()
    assert md_full.index("## At a glance") < md_full.index("## Table 1") < md_full.index("## Glossary")
    assert (tmp_path / "plots/report/probe.png").stat().st_size > 1000

    (m / "artifact.json").unlink()
    with pytest.raises(mod.InputError, match="metrics/artifact.json"):
        mod.main()


def test_atomic_dir_replaces_whole_or_keeps_the_old(tmp_path):
    from biaslab.runtime.io import atomic_dir
    target = tmp_path / "model"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("1")
    assert (target / "a.txt").read_text() == "1"
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as tmp:
            (tmp / "b.txt").write_text("2")
            raise RuntimeError("killed mid-save")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]   # no temp dir left
    assert [p.name for p in target.iterdir()] == ["a.txt"]            # old save intact
    assert oct(target.stat().st_mode & 0o077) != "0o0"                # not mkdtemp's 0700


def test_without_run_stats_and_json_number():
    from biaslab.runtime.io import json_number, without_run_stats
    meta = {"seed": 0, "train_seconds": 3.2, "history": [{"loss": 1.0, "seconds": 0.1,
                                                         "tokens_per_s": 9.0}],
            "encoded_now": 4, "n_train": 10, "per_sample": 2}
    assert without_run_stats(meta) == {"seed": 0, "history": [{"loss": 1.0}], "n_train": 10,
                                       "per_sample": 2}
    assert meta["train_seconds"] == 3.2                     # input untouched
    assert json_number(float("nan")) is None and json_number(None) is None
    assert json_number(np.int64(3)) == 3 and isinstance(json_number(np.int64(3)), int)
    assert json_number(1 / 3) == 0.3333 and json_number(2.5, 0) == 2.0


def test_bar_chart_without_values_still_writes_its_declared_figure(tmp_path):
    """An out of the report stage must exist even when nothing can be plotted (the probe on
    data without planted truth, e.g. coco-mini); it says why instead."""
    from biaslab.report import charts
    out = tmp_path / "probe.png"
    charts.bar_chart(out, {}, [("cast", "cast")], "Attribute sensitivity")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 1000


def test_ranks_bold_best_and_underline_second_by_direction():
    """paper 000 Tables 1-2: bold best / underline second per column. ↑ ranks the largest
    mean, ↓ the smallest, →1 the closest to 1; infinite and n/a cells are never ranked;
    equal printed means share a rank."""
    tab = {"a": {"mAP": {"mean": 80.0}, "Ratio": {"mean": 1.5}, "Leakage": {"mean": 2.0}},
           "b": {"mAP": {"mean": 70.0}, "Ratio": {"mean": 0.9}, "Leakage": {"mean": -1.0}},
           "c": {"mAP": {"mean": 79.96}, "Ratio": {"mean": None, "n_inf": 1},
                 "Leakage": {"mean": 0.5}},
           "d": {"mAP": {"mean": 60.0}, "Ratio": {"mean": None, "na": "no gender outputs"},
                 "Leakage": {"mean": 3.0}}}
    cols = (("mAP", "mAP ↑"), ("Ratio", "Ratio →1"), ("Leakage", "Leakage ↓"))
    r = R.ranks(tab, cols, digits=1)
    # mAP: 80.0 and 79.96 print as 80.0: both best; 70.0 is then the second level
    assert r[("a", "mAP")] == r[("c", "mAP")] == 1 and r[("b", "mAP")] == 2
    assert ("d", "mAP") not in r
    # Ratio: |0.9 - 1| = 0.1 beats |1.5 - 1| = 0.5; infinite (c) and n/a (d) unranked
    assert r[("b", "Ratio")] == 1 and r[("a", "Ratio")] == 2
    assert ("c", "Ratio") not in r and ("d", "Ratio") not in r
    assert r[("b", "Leakage")] == 1 and r[("c", "Leakage")] == 2 and ("a", "Leakage") not in r
    md = R.markdown(tab, cols, 1, rank=True)
    assert "| a | **80.0** | <u>1.5</u> | 2.0 |" in md
    assert "| b | <u>70.0</u> | **0.9** | **-1.0** |" in md
    assert "| d | 60.0 | n/a | 3.0 |" in md
    assert "**" not in R.markdown(tab, cols, 1)          # off by default


def test_bar_layout_labels_what_it_cannot_draw_and_clips_at_the_floor():
    """An infinite or missing value is labelled, not a blank bar; a CI arm
    below a metric's smallest value (Ratio >= 1, Error >= 0) is clipped; ratios use a log
    axis."""
    from biaslab.report import charts
    table = {"original": {"Ratio": {"mean": 1.2, "ci95": 0.5, "n": 3, "n_inf": 0},
                          "Error": {"mean": 2.0, "ci95": 3.0, "n": 3}},
             "synthetic": {"Ratio": {"mean": None, "ci95": None, "n": 5, "n_inf": 3},
                           "Error": {"mean": 1.0, "ci95": 0.5, "n": 3}},
             "adversarial": {"Ratio": {"mean": None, "n": 0, "n_inf": 0, "n_missing": 5}}}
    r = charts.bar_layout(table, "Ratio")
    assert r["log"] and r["labels"] == ["", "∞ (3/5 seeds)", "n/a"]
    assert r["lower"][0] == pytest.approx(0.2) and r["upper"][0] == 0.5    # 1.2 - 0.2 = 1
    e = charts.bar_layout(table, "Error")
    assert not e["log"] and e["lower"][:2] == [2.0, 0.5] and e["upper"][:2] == [3.0, 0.5]
    out = Path(pytest.importorskip("tempfile").mkdtemp()) / "t.png"
    charts.bar_chart(out, table, [("Ratio", "Ratio"), ("Error", "Error")], "T", {"Ratio": 1.0})
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_degenerate_rows_are_marked_and_never_ranked_best():
    """A hand-written Table 1 (not synthetic.py's): sub-sampling has the lowest
    Leakage only because its mAP collapsed to half of Original's. It is marked † and the
    "best" Leakage goes to the best working row."""
    from biaslab import report as R

    def rec(m):
        return {"mean": m, "ci95": 1.0, "n": 3, "n_inf": 0}
    tab = {"original": {"mAP": rec(80.0), "Leakage": rec(5.0)},
           "subsample": {"mAP": rec(40.0), "Leakage": rec(-30.0)},
           "synthetic": {"mAP": rec(78.0), "Leakage": rec(-2.0)},
           "oversample": {"mAP": rec(70.0), "Leakage": rec(1.0)}}
    cols = (("mAP", "mAP ↑"), ("Leakage", "Leakage ↓"))
    deg = NOTES.degenerate_rows(tab, "mAP", 0.75)
    assert deg == {"subsample": 0.5}                     # 70 / 80 = 0.875 stays
    md = R.markdown(tab, cols, 1, rank=True, degenerate=deg)
    assert "| Sub-sampling † | 40.0 ± 1.0 | -30.0 ± 1.0 |" in md
    assert "**-2.0 ± 1.0**" in md and "<u>1.0 ± 1.0</u>" in md
    assert "Sub-sampling (50 %)" in NOTES.degenerate_note(deg, "mAP", 0.75)
    assert NOTES.degenerate_rows(tab, "mAP", 0.0) == {} and NOTES.degenerate_rows({}, "mAP", 0.75) == {}


def test_direction_table_signed_log_ratio_shares_and_infinities():
    """Seeds are averaged before any fold (one seed leaning "man" 2:1 and one
    leaning "woman" 1:2 give ln r = 0, where the folded Ratio would read 2), a seed that never
    calls "woman" is +inf with its sign kept, and the four shares sum to 100."""
    import math
    seeds = [{"n_man": 80, "n_woman": 40, "n_both": 20, "n_neither": 0},     # 60/20/20/0 of 100
             {"n_man": 40, "n_woman": 80, "n_both": 20, "n_neither": 0}]     # 20/60/20/0
    cls = {"original": {"per_seed": seeds, "masked_gender_auc": {"mean": 70.0, "ci95": 1.0,
                                                                 "n": 2}},
           "synthetic": {"per_seed": [{"n_man": 10, "n_woman": 0, "n_both": 0,
                                       "n_neither": 90}] * 2},
           "adversarial": {"per_seed": [{}], "ratio_na": "no gender outputs"},
           "test_set": {"ratio_gt": 2.0}}
    t = R.direction_table(cls)
    o = t["original"]
    assert o["log_r"]["mean"] == pytest.approx(0.0)
    assert o["log_r"]["std"] == pytest.approx(math.sqrt(2) * math.log(2))
    assert o["share_man"]["mean"] == pytest.approx(40.0)      # (60 + 20) / 2
    assert o["share_woman"]["mean"] == pytest.approx(40.0)
    assert o["share_both"]["mean"] == pytest.approx(20.0)
    assert o["share_neither"]["mean"] == pytest.approx(0.0)
    assert o["masked_gender_auc"]["mean"] == 70.0
    s = t["synthetic"]
    assert s["log_r"]["n_inf"] == 2 and s["log_r"]["sign"] == 1
    assert s["share_neither"]["mean"] == pytest.approx(90.0)
    assert t["adversarial"]["log_r"]["na"] == "no gender outputs"
    md = R.markdown(t, R.DIRECTION_COLUMNS, 2)
    assert "| Original | 0.00 ± " in md and "∞ (2/2 seeds)" in md and "n/a" in md
    assert "ln 2.00 = +0.69" in R.direction_note(cls)
    assert "unknown" in R.direction_note({"original": cls["original"]})


def test_summary_files_carry_the_direction_measures():
    """Metrics/summary_full.json has each classifier row's signed ln r (mean,
    CI, infinite seeds with their sign), the masked gender AUC with its difference from
    Original, and the four masked-call shares; metrics/summary.json the masked AUC (Original
    absolute, other rows as Δ) and ln r signed on every row, never folded."""
    import math

    from biaslab.report import document as mod

    def seed(m, w, auc):
        return {"n_man": m, "n_woman": w, "n_both": 0, "n_neither": 100 - m - w,
                "masked_gender_auc": auc, "mAP": 50.0, "Leakage": 1.0}
    cls = {"original": {"per_seed": [seed(40, 20, 80.0), seed(40, 10, 84.0)]},
           "synthetic": {"per_seed": [seed(20, 40, 60.0), seed(10, 40, 62.0)]},
           "oversample": {"per_seed": [seed(30, 0, 55.0), seed(20, 0, 57.0)]}}
    for row in cls.values():
        for k in ("masked_gender_auc", "mAP", "Leakage"):
            from biaslab.runtime import stats
            row[k] = stats.record([s[k] for s in row["per_seed"]])
    m = {"classification": cls, "captioning": {}}
    full = mod.headline(m)
    lo = full["original"]["log r"]
    assert lo["mean"] == pytest.approx((math.log(2) + math.log(4)) / 2, abs=1e-4)
    assert full["synthetic"]["log r"]["mean"] == pytest.approx(-lo["mean"], abs=1e-4)
    assert full["oversample"]["log r"]["n_inf"] == 2
    assert full["synthetic"]["masked AUC"]["diff"] == pytest.approx(61.0 - 82.0)
    assert full["original"]["masked calls %"] == {"man": 40.0, "woman": 15.0, "both": 0.0,
                                                  "neither": 45.0}
    compact = mod.compact(full, m, {"holds": 1}, 1)
    assert compact["original"]["masked AUC"]["mean"] == 82.0
    assert compact["synthetic"]["masked AUC"]["diff"] == -21.0
    assert compact["original"]["log r"]["mean"] == 1.04
    assert compact["synthetic"]["log r"]["mean"] == -1.04
    # a seed that never calls one gender: no finite mean, and the count says why
    assert compact["oversample"]["log r"] == {"mean": None, "ci95": None, "n_inf": 2}
    assert compact["validity"]["not_informative"] == 0


def test_captioner_ratio_is_ranked_against_the_test_sets_own_ratio():
    """On unmasked images with 1.59 men per woman
    the captioner whose Ratio is 1.6 is best, not the one at 1.2 whose captions lost their
    gender words (8 and 17 of 96 two-word captions): that row is † and never bold."""
    def row(ratio, nw, ln, cider):
        return {"Ratio": {"mean": ratio, "ci95": 0.1, "n": 3},
                "no_gender_word": {"mean": nw, "ci95": 1.0, "n": 3},
                "length": {"mean": ln, "ci95": 0.1, "n": 3},
                "CIDEr": {"mean": cider, "ci95": 1.0, "n": 3}}
    cap = {"test_set": {"n_male": 59, "n_female": 37}}
    tab = {"original": row(1.6, 2.0, 9.5, 80.0), "synthetic": row(1.2, 14.0, 7.9, 78.0),
           "oversample": row(2.4, 3.0, 9.4, 79.0)}
    assert R.true_ratio(cap["test_set"]) == pytest.approx(59 / 37)
    assert R.true_ratio({"n_male": 10, "n_female": 20}) == 2.0
    assert R.true_ratio({"n_male": 10}) is None and R.true_ratio(None) is None
    cols = R.table2_columns(cap)
    assert dict(cols)["Ratio"] == "Ratio →1.59"
    assert dict(R.table2_columns({}))["Ratio"] == "Ratio →1"
    deg = NOTES.caption_degenerate_rows(tab, 10.0, 0.75)
    assert set(deg) == {"synthetic"} and "14 % of captions name no gender" in deg["synthetic"]
    marks = R.ranks(tab, cols, 1, exclude=deg)
    assert marks[("original", "Ratio")] == 1 and marks[("oversample", "Ratio")] == 2
    assert ("synthetic", "Ratio") not in marks
    # without the exclusion, 1.2 (distance 0.39) would still lose to 1.6 (0.01)
    assert R.ranks(tab, cols, 1)[("original", "Ratio")] == 1
    # against 1 (paper 000's header) the broken row would have won
    assert R.ranks(tab, R.TABLE2_COLUMNS, 1)[("synthetic", "Ratio")] == 1
    # a short-caption row is degenerate too; the note names both reasons
    tab["augment"] = row(1.5, 4.0, 5.0, 79.0)
    deg = NOTES.caption_degenerate_rows(tab, 10.0, 0.75)
    assert "5.0 words per caption (Original 9.5)" in deg["augment"]
    note = NOTES.caption_degenerate_note(deg, 10.0, 0.75)
    assert "S_synthetic: 14 % of captions" in note and "never marked best" in note
    assert "59 men and 37 women" in NOTES.ratio_reference_note(cap)
    # older metrics files without the measures: nothing is excluded
    assert NOTES.caption_degenerate_rows({"original": {}, "x": {}}, 10.0, 0.75) == {}


def test_biasamp_null_note_gives_the_human_captions_value_and_says_when_it_is_absent():
    cap = {"test_set": {"biasamp_human_null": {"ba": -6.125, "per_index": [-9.0, -3.25],
                                               "min": -9.0, "max": -3.25, "n_indices": 2,
                                               "n_images": 200}}}
    note = NOTES.biasamp_null_note(cap)
    assert "score BiasAmp -6.12 against the same training captions" in note
    assert "mean over 2 caption indices (caption indices -9.00 to -3.25)" in note
    assert "not against 0" in note
    # one index: no spread; a JSON "nan" (no word in L) or an older file: no line
    one = {"test_set": {"biasamp_human_null": {"ba": 1.5, "min": 1.5, "max": 1.5,
                                               "n_indices": 1}}}
    assert "caption indices 1.50" not in NOTES.biasamp_null_note(one)
    assert NOTES.biasamp_null_note({"test_set": {"biasamp_human_null": {"ba": "nan"}}}) == ""
    assert NOTES.biasamp_null_note({"test_set": {}}) == "" == NOTES.biasamp_null_note({})


def test_script_outputs_in_plots_report_name_the_run_they_belong_to(tmp_path):
    """A file a script writes into plots/report outlives runs of other data
    profiles, so it carries the profile and commit that made it (after its title)."""
    import subprocess
    (tmp_path / "params.yaml").write_text("data:\n  source: coco\n")
    prov = R.made_by("scripts/bias_sweep.py", tmp_path)
    assert prov["data_source"] == "coco" and prov["commit"] is None    # not a git repository
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "params.yaml"],
                   cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   cwd=tmp_path, check=True)
    prov = R.made_by("scripts/bias_sweep.py", tmp_path)
    assert len(prov["commit"]) >= 7 and prov["modified"] is False
    (tmp_path / "params.yaml").write_text("data:\n  source: synthetic\n")
    assert R.made_by("s.py", tmp_path)["modified"] is True
    text = R.stamp("# Dose-response\n\nbody\n", prov)
    title, blank, line = text.splitlines()[:3]
    assert title == "# Dose-response" and blank == ""
    assert line.startswith("_Made by `scripts/bias_sweep.py` on data `coco` at commit `")
    assert text.endswith("body\n")


def test_flip_probe_section_columns_cells_and_not_run_reason():
    from biaslab.report.sections import flip_markdown
    rec = {"mean": 0.25, "ci95": 0.05, "lo": 0.2, "hi": 0.3, "n": 3}
    flip = {"available": True, "attribute": "gender_skin", "dims": ["gender", "skin"],
            "n_pairs": {"gender": 100, "skin": 100},
            "objects": {"skin": {"dark": ["dog"], "light": ["bicycle"]}},
            "classifier": {"original": {"skin": rec, "skin|female": rec,
                                        "skin|gap": {**rec, "mean": -0.1, "groups": ["f", "m"]}}},
            "captioner": {},
            "reference": {"skin": {"mean": 0.118, "ci95": 0.149, "lo": -0.031, "hi": 0.264,
                                   "n": 320, "n_by_value": {"dark": 159, "light": 161}}}}
    cols = R.flip_columns(flip)
    assert [c for c, _ in cols] == ["gender", "gender|dark", "gender|light", "gender|gap",
                                    "skin", "skin|female", "skin|male", "skin|gap"]
    text = "\n".join(flip_markdown(flip))
    assert "dark → dog vs light → bicycle" in text and "skin 100" in text
    assert "Classifiers (mean object probability; n = 3 seeds):" in text
    assert ("scores skin 0.118 ± 0.149 (bootstrap 95 % CI over n = 320 images: dark 159, "
            "light 161)") in text
    row = next(line for line in text.splitlines() if line.startswith("| Original")
               or line.startswith("| original"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # gender columns are empty (–), skin cells mean ± CI, the gap is signed
    assert cells[1:5] == ["–"] * 4
    assert cells[5:] == ["0.250 ± 0.050", "0.250 ± 0.050", "–", "-0.100 ± 0.050"]
    assert "Captioners" not in text                        # no captioner rows: no table
    assert R.flip_columns({"attribute": "skin", "dims": ["skin"]}) == (
        ("skin", "skin tone (D→L)"),)
    off = flip_markdown({"available": False, "reason": "probe.flip_images = 0"})
    assert "Not run: probe.flip_images = 0." in off
    assert flip_markdown({}) == []


def test_attribute_tables_carry_utility_ranks_and_dagger_rows():
    """The skin-tone tables in the tables' row order, led by the models'
    utility, ranked as Tables 1-2, with a model under the utility floor never best."""
    from biaslab.report.sections import attribute_markdown

    def rec(v):
        return {"mean": v, "ci95": 1.0, "n": 3}
    att = {"attribute": "skin", "metrics": "computed here",
           "test_images": {"per_group": {"dark": 10, "light": 12}, "n": 22},
           "rows": {"synthetic": {"LIC_M": rec(26.0), "LIC_D": rec(25.0), "LIC": rec(1.0)},
                    "original": {"LIC_M": rec(30.0), "LIC_D": rec(25.0), "LIC": rec(5.0)},
                    "subsample": {"LIC_M": rec(20.0), "LIC_D": rec(25.0), "LIC": rec(-5.0)}}}
    cls = {"name": "skin", "groups": ["dark", "light"], "n_test_labelled_by_group":
           {"dark": 10, "light": 12},
           "rows": {"synthetic": {"Leakage": rec(2.0), "LK_M": rec(60.0), "LK_D": rec(58.0)},
                    "original": {"Leakage": rec(4.0), "LK_M": rec(62.0), "LK_D": rec(58.0)},
                    "subsample": {"Leakage": rec(-20.0), "LK_M": rec(38.0),
                                  "LK_D": rec(58.0)}}}
    t1 = {"original": {"mAP": rec(70.0)}, "synthetic": {"mAP": rec(69.0)},
          "subsample": {"mAP": rec(30.0)}}
    t2 = {"original": {"CIDEr": rec(90.0)}, "synthetic": {"CIDEr": rec(91.0)},
          "subsample": {"CIDEr": rec(5.0)}}
    md = "\n".join(attribute_markdown(att, cls, utility={
        "classifier": (t1, {"subsample": 30 / 70}), "captioner": (t2, {"subsample": 5 / 90}),
        "floor": 0.75}))
    lines = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert lines[0] == "| Training set | CIDEr ↑ | LIC_M | LIC_D | LIC ↓ |"
    # Original, Sub-sampling, S_synthetic: the tables' order, not the file's
    assert [ln.split(" | ")[0] for ln in lines[1:4]] == ["| Original", "| Sub-sampling †",
                                                         "| S_synthetic"]
    # Sub-sampling's LIC -5 is lowest but it is under the floor: S_synthetic's 1.0 is best
    assert lines[3] == "| S_synthetic | **91.0 ± 1.0** | 26.0 ± 1.0 | 25.0 ± 1.0 | **1.0 ± 1.0** |"
    assert lines[2] == "| Sub-sampling † | 5.0 ± 1.0 | 20.0 ± 1.0 | 25.0 ± 1.0 | -5.0 ± 1.0 |"
    assert lines[4] == "| Method | mAP ↑ | Leakage ↓ | LK_M | LK_D |"
    assert lines[7] == ("| S_synthetic | <u>69.0 ± 1.0</u> | **2.0 ± 1.0** | 60.0 ± 1.0 | "
                        "58.0 ± 1.0 |")
    assert "Sub-sampling (43 %)" in md and "Sub-sampling (6 %)" in md


def test_residue_note_says_when_the_skin_tone_probe_cannot_read_real_people():
    """The line under Table 3 gives the skin-tone check's AUC on real people and on
    the counterfactuals' target tone; where the probe's CI on real people reaches 50 it says
    that its counterfactual AUCs are no evidence of tone."""
    from biaslab.report.notes import residue_note

    def a(m):
        return {"mean": m, "ci95": 2.0, "lo": m - 2.0, "hi": m + 2.0}
    res = {"n_images": 80, "probe_auc": a(99.0), "erased_auc": {"polygon": a(90.0)},
           "counterfactual_skin": {"probe_auc": a(66.0), "target_auc": a(67.5),
                                   "target_auc_other": a(61.0), "n_real_dark": 139,
                                   "n_real_light": 141, "n_other": 140}}
    txt = residue_note(res)
    assert "Skin-tone check" in txt and "139 dark / 141 light" in txt
    assert txt.index("66.0") < txt.index("67.5") < txt.index("61.0")
    assert "no evidence" not in txt
    # coco-mini: the probe reads real people's tone at 49.7 (CI 43.1-56.3)
    res["counterfactual_skin"]["probe_auc"] = {"mean": 49.7, "ci95": 6.6, "lo": 43.1,
                                               "hi": 56.3}
    assert "no evidence of their tone" in residue_note(res)


def test_bounded_metrics_keep_their_intervals_inside_their_range():
    from biaslab import report as R
    # an AUC of 95.6 +- 7.1 over seeds: the t interval would reach 102.7
    rec = {"mean": 95.6, "ci95": 7.1, "n": 3, "n_inf": 0}
    assert R.bounded_cell(rec, 1, R.RANGES["masked_gender_auc"]) == "95.6 [88.5, 100.0]"
    assert R.bounded_cell({"mean": 50.0, "ci95": 7.1, "n": 3}, 1, (0.0, 100.0)) == "50.0 ± 7.1"
    # a paired difference of Errors (each in [0, 100]) never leaves [-100, 100]
    m = {"original": {"per_seed": [{"Error": 90.0}, {"Error": 0.0}, {"Error": 95.0}]},
         "x": {"per_seed": [{"Error": 0.0}, {"Error": 100.0}, {"Error": 2.0}]}}
    d = R.differences(m, (("Error", "Error"),))["x"]["Error"]
    assert d["lo"] == -100.0 and d["clipped"] is True and d["hi"] < 100.0
    assert R.difference_range("Error") == (-100.0, 100.0) and R.difference_range("x") is None
