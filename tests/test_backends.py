"""biaslab.analysis.backends: copy_paste vs render from `dvc exp show --json`."""
import pytest

from biaslab.analysis import backends as B
from biaslab.runtime import stats


def _rec(name, backend, deltas_syn, deltas_aug=None, source="synthetic"):
    """One `dvc exp show` record: Table 3's delta_seeds records (exp show drops per_seed)."""
    art = {"synthetic": {"delta_seeds": {**stats.record(deltas_syn), "ci95": 1.0}}}
    if deltas_aug is not None:
        art["augment"] = {"delta_seeds": stats.record(deltas_aug)}
    return {"name": name, "data": {
        "params": {"params.yaml": {"data": {"generate": {"backend": backend},
                                            "data": {"source": source}}}},
        "metrics": {"metrics/artifact.json": {"data": art},
                    "metrics/classification.json": {"data": {
                        "synthetic": {"Leakage": {"mean": 2.0, "ci95": 0.5, "n": 3}}}}}}}


def test_runs_and_welch_verdict_hand_computed():
    show = [{"rev": "workspace", **_rec("workspace", "render", [10.0, 12.0, 14.0])},
            {"experiments": [{"revs": [_rec("backend-copy_paste", "copy_paste",
                                            [30.0, 32.0, 34.0], [5.0, 6.0, 7.0]),
                                       _rec("later-render", "render", [90.0, 90.0, 90.0]),
                                       _rec("coco", "sd_inpaint", [1.0, 2.0],
                                            source="coco")]}]}]
    runs = B.runs_by_backend(show)
    # the first record per backend wins; the COCO run is not the synthetic profile
    assert {k: v["name"] for k, v in runs.items()} == {"render": "workspace",
                                                        "copy_paste": "backend-copy_paste"}
    cs = B.checks(runs)
    assert len(cs) == 1                        # augment has no render Δ: no check
    # an infinite seed (a Ratio_orig of 0 makes Δ undefined) gives no interval: inconclusive
    runs["render"]["metrics"]["metrics/artifact.json"]["data"]["synthetic"]["delta_seeds"][
        "n_inf"] = 1
    assert B.checks(runs)[0]["verdict"] == "inconclusive"
    runs["render"]["metrics"]["metrics/artifact.json"]["data"]["synthetic"]["delta_seeds"][
        "n_inf"] = 0
    c = cs[0]
    # means 32 - 12 = 20; both sides var 4 (sd 2), se = sqrt(4/3 + 4/3) = 1.633, Welch df = 4,
    # t(0.975, 4) = 2.776: CI 20 ± 4.533
    assert c["mean"] == pytest.approx(20.0)
    assert c["lo"] == pytest.approx(20.0 - 2.7764 * 1.63299, abs=1e-3)
    assert c["verdict"] == "holds" and c["n"] == 3
    assert c["id"] == "backend/classifier/synthetic/delta:copy_paste>render"
    md = B.markdown(runs)
    assert "| Table 3 Δ (classifier) | S_synthetic | 12.00 ± 1.00 | 32.00 ± 1.00 |" in md
    assert "| Leakage (classifier) | S_synthetic | 2.00 ± 0.50 | 2.00 ± 0.50 |" in md
    assert "**holds**" in md


def test_reversed_effect_fails_and_missing_run_says_how_to_get_it():
    show = [_rec("a", "render", [30.0, 31.0, 32.0]), _rec("b", "copy_paste", [1.0, 2.0, 3.0])]
    assert B.checks(B.runs_by_backend(show))[0]["verdict"] == "fails"
    only = B.runs_by_backend([_rec("a", "render", [1.0, 2.0])])
    assert B.checks(only) == []
    assert "backend_compare.py --run --collect" in B.markdown(only)
