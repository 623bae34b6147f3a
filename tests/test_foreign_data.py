"""The pipeline on a COCO-layout dataset the tests write themselves
(``tests/foreign_coco.py``: shirt hue as the gender cue, 2 men per woman, scene and objects
agreeing with the gender in 85 % of images), independent of ``biaslab.data.synthetic``, run as a user
would: ``dvc exp run -S data=coco -S data.root=<dir>`` in a clone of the working tree.

The checks are the planted truth's directions and the report's honesty, not its numbers:
Original reads gender from the persons-masked images (the planted context), every verdict
carries a reason and its numbers, no check passes on a measure that cannot move, over-sampling's
largest repeat is reported, the report holds only this run's files, and stage ``synthesize``
wrote no dataset."""
import json

import pytest

from tests.conftest import (REPO, install_example_plugin, plugin_column_overrides,
                            plugin_overrides, run_profile_in_clone)
from tests.foreign_coco import write_foreign_coco

pytestmark = pytest.mark.slow


# CI scale for this run (LIBRA's caption generator and T5 are not what it checks): fewer
# epochs than the ci preset's 20 and 5 (32 s and 31 s at 8 and 2 epochs). Two
# captioner and LIC seeds, not 3: the checks below need n >= 2 captioner seeds (DBAC) and
# n >= 3 classifier seeds (kept at the preset's 5); CI took 4,966 s with 3, over its
# 4,500 s budget, and this run 765 s of it on the dev machine
# Captioners at 5 epochs and, of the model-level methods, only the plug-in's label
# smoothing (no check here reads a captioner's quality or GroupDRO / the adversary / DomInd).
# Measured: this run took 1,019 s against 1,046 s before, so these are NOT where its time goes
# (a captioner stage took 21-37 s at 5 epochs, 18-28 s at 15: fixed costs dominate)
CI_SCALE = ["libra.dcg.epochs=4", "libra.t5.epochs=1", "libra.t5.pretrain_epochs=1",
            "libra.dcg_pretrain_epochs=1", "captioner.seeds=[0,1]", "lic.seeds=2",
            "captioner.epochs=5"]


@pytest.fixture(scope="module")
def foreign_run(tmp_path_factory):
    """A clone of the working tree after `dvc exp run -S data=coco -S data.root=<foreign>`,
    with the example plug-in (examples/biaslab-example-plugin, pip-installed beside biaslab)
    named in the same experiment: a user's own data and a user's own method together."""
    import yaml
    base = tmp_path_factory.mktemp("foreign")
    truth = write_foreign_coco(base / "coco")
    site = install_example_plugin(base)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    # the training sets the checks below read (Original, over-sampling, S_synthetic) and the
    # plug-in's: the rest are dropped here (CI ran 5,277 s with them, over its budget), ~35 s of
    # training and evaluation per classifier set and captioner set (the artifact test's sets
    # must be trained as classifiers and as captioners: artifact_captioner reads both)
    params = {**params,
              "classifier": {**params["classifier"], "methods": [],
                             "datasets": ["original", "oversample", "synthetic"]},
              "captioner": {**params["captioner"], "datasets": ["original", "synthetic"]},
              "artifact": {**params["artifact"], "datasets": ["original", "synthetic"]}}
    dst, out = run_profile_in_clone(
        base, "foreign", ["data=coco", f"data.root={base / 'coco'}", *CI_SCALE,
                          *plugin_overrides(params), *plugin_column_overrides(params)],
        extra_env={"PYTHONPATH": site})
    return dst, truth, out


def _json(repo, path):
    return json.loads((repo / path).read_text())


def test_labels_and_split_carry_the_planted_gender_ratio(foreign_run):
    repo, truth, _ = foreign_run
    labels = _json(repo, "metrics/labels.json")
    # four of five captions name the gender, one says "person": any_mention finds every image
    assert labels["images"] == {"female": truth["n_female"], "male": truth["n_male"]}
    assert labels["captions"]["none"] == truth["n_female"] + truth["n_male"]
    ts = _json(repo, "metrics/classification.json")["test_set"]
    # the split stage draws the test set at random: its ratio stays near the planted 2 : 1
    assert ts["n_male"] > ts["n_female"] > 0
    assert 1.3 < ts["n_male"] / ts["n_female"] < 3.0, ts


def test_original_reads_the_planted_context(foreign_run):
    """The planted context (scene + objects, 85 % agreement) is readable with the person masked
    out: Original's masked gender AUC lies above chance, with its CI, and validity says so."""
    repo, _, _ = foreign_run
    checks = {c["id"]: c for c in _json(repo, "metrics/validity.json")["checks"]}
    c = checks["classifier/original/masked_auc>50"]
    assert c["verdict"] == "holds", c
    assert c["lo"] > 50 and c["n"] >= 3, c
    # the paper's claim on this data is reported with its interval and reason, whatever it is
    s = checks["classifier/synthetic-original/masked_auc<0"]
    assert s["verdict"] in ("holds", "fails", "inconclusive", "metric not valid on this data")
    assert s["lo"] is not None and s["reason"] and s["source"] == "metrics/classification.json"


def test_the_other_groups_background_turns_originals_context_reading_around(foreign_run):
    """Feature sensitivity on data the generator never drew: the planted context (scene +
    objects, agreeing with the person's gender in 85 % of images) is what Original's masked
    AUC reads, so putting each person on the background of an image of the other gender must
    lower it (CI below 0); the unperturbed images give the Table 1 value; without a planted
    truth file no truth-reading control is run."""
    repo, _, _ = foreign_run
    sens = _json(repo, "metrics/sensitivity.json")
    # no planted truth: only the pixel readers, and the oracle's input never changes
    assert set(sens["controls"]) == {"person_oracle_pixels", "context_reader_pixels"}
    assert sens["controls_note"]
    assert all(r["AUC"]["verdict"] == "matches"
               for r in sens["controls"]["person_oracle_pixels"].values())
    r = sens["models"]["original"]["swap"]["masked_AUC"]
    assert r["hi"] < 0, r
    cls = _json(repo, "metrics/classification.json")["original"]["masked_gender_auc"]
    assert abs(r["base"] - cls["mean"]) < 1e-3, (r["base"], cls["mean"])   # 4 decimals stored
    assert sens["perturbed"]["objects@0.5"]["n_objects_masked"] > 0
    # the captioners caption the same perturbed files; their unperturbed Error is Table 2's
    sc = _json(repo, "metrics/sensitivity_captioner.json")
    cap = _json(repo, "metrics/captioning.json")["original"]["Error"]["mean"]
    assert sc["available"] and sc["test_set"]["n_images"] > 0
    assert abs(sc["models"]["original"]["swap"]["Error"]["base"] - cap) < 1e-6


def test_spurious_correlations_are_found_in_the_planted_context(foreign_run):
    """Paper 001 appendix D on data the generator did not write: the planted scene and objects
    (85 % agreement) let a classifier on person-removed images and one on neutralised captions
    (the scene and the object are named) read gender above chance, and the caption clusters
    deviate from parity. The contrast-set claim is reported with its interval, whatever it is
    (the copy_paste contrast set may be small here)."""
    repo, _, _ = foreign_run
    sp = _json(repo, "metrics/spurious.json")
    checks = {c["id"]: c for c in _json(repo, "metrics/validity.json")["checks"]}
    for cid in ("spurious/background/natural/auc>0.5", "spurious/text/natural/auc>0.5",
                "spurious/clusters/natural/auc>0.5"):
        assert checks[cid]["verdict"] == "holds", checks[cid]
    assert sp["classifiers"]["background"]["natural"]["lo"] > 0.5
    c = checks.get("spurious/background/contrast/auc≤0.5")
    if sp["setup"]["n_contrast_sources"]:
        assert c and c["verdict"] in ("holds", "fails") and c["reason"], c


def test_dbac_runs_on_foreign_data_in_table2_and_on_the_controls(foreign_run):
    """DBAC in both directions for every captioner row, with a CI over captioner
    seeds, and judged on the control models, on data the generator did not write (its object
    words are the COCO categories the set annotates)."""
    repo, _, _ = foreign_run
    cap = _json(repo, "metrics/captioning.json")
    for key in ("DBAC_T_to_A", "DBAC_A_to_T", "DBAC_direct_T_to_A", "DBAC_direct_A_to_T"):
        r = cap["original"][key]
        assert r["n"] >= 2 and r["mean"] is not None and -1 <= r["mean"] <= 1, (key, r)
    ctl = _json(repo, "metrics/controls.json")["captioner"]
    amp = max((n for n in ctl if n.startswith("amplifier@")), key=lambda n: float(n[10:]))
    assert ctl[amp]["DBAC_direct_A_to_T"]["verdict"] in ("matches", "does not match",
                                                         "inconclusive")
    assert "Which captioning metric sees the planted bias" in \
        (repo / "plots/report/tables.md").read_text()


def test_no_verdict_without_numbers_reason_and_source(foreign_run):
    """Every check carries its interval, reason and file; a 'holds' never rests on a measure
    with no variance (a zero-width interval reads 'not informative')."""
    repo, _, _ = foreign_run
    v = _json(repo, "metrics/validity.json")
    assert v["checks"], "no validity check on a COCO-layout run"
    for c in v["checks"]:
        assert c.get("reason") and c.get("source"), c
        assert (repo / c["source"]).exists(), c
        if c["verdict"] == "holds":
            assert c["lo"] is not None and c["hi"] is not None, c
            assert c["hi"] > c["lo"], f"a pass on a measure that cannot move: {c}"
    assert sum(v["summary"][k] for k in v["summary"] if k != "n") == v["summary"]["n"]


def test_oversampling_repeats_are_reported(foreign_run):
    repo, _, _ = foreign_run
    d = _json(repo, "metrics/datasets.json")["oversample"]
    assert d["max_repeats"] >= 1 and "repeats_median" in d and "effective_images" in d
    assert d["max_skew_bound"] >= 0.05
    # bounded: datasets.max_copies (20) caps every image's copies, and the
    # price of the cap is on record for this data
    assert d["max_repeats"] <= 20, d
    curve = d["tradeoff"]
    assert "20" in curve and "none" in curve
    assert curve["20"]["max_skew"] >= curve["none"]["max_skew"] - 1e-3
    tables = (repo / "plots/report/tables.md").read_text()
    assert "most repeated image" in tables or int(d["max_repeats"]) == 1


def test_the_report_holds_only_this_runs_results(foreign_run):
    """No link to the synthetic default's sweep; the synthesize stage wrote no dataset."""
    repo, _, _ = foreign_run
    tables = (repo / "plots/report/tables.md").read_text()
    assert "bias_sweep" not in tables
    syn = _json(repo, "metrics/synthetic.json")
    assert syn["skipped"] is True and "coco" in syn["reason"]
    assert sorted(p.name for p in (repo / "data/raw/synthetic").iterdir()) == ["NOT_USED.txt"]
    # the DVC metric carries the threshold-free, direction-aware measures
    summary = _json(repo, "metrics/summary.json")
    assert {"masked AUC", "log r"} <= set(summary["original"]), summary["original"]
    assert isinstance(summary["synthetic"]["masked AUC"]["diff"], float), summary["synthetic"]


def test_domain_and_residue_checks_report_their_numbers(foreign_run):
    """On data the project has never seen: the real-vs-generated
    domain check of every model and the residue check of both mask shapes are computed, with
    intervals, and the Leakage verdicts say what the domain check found."""
    repo, _, _ = foreign_run
    dom = _json(repo, "metrics/classification.json")["domain"]
    assert dom["probe_auc"]["n"] >= 2 and dom["probe_auc"]["mean"] is not None
    for row in ("original", "synthetic"):
        g = dom[row]["domain_gap"]
        assert g["n"] >= 3 and g["mean"] is not None and g["ci95"] is not None, (row, g)
    checks = {c["id"]: c for c in _json(repo, "metrics/validity.json")["checks"]}
    assert "classifier/synthetic/domain_gap>0" in checks
    lk = checks["classifier/synthetic-original/leakage<0"]
    assert "domain check:" in lk["reason"], lk
    res = _json(repo, "metrics/residue.json")
    assert set(res["erased_auc"]) == {"polygon", "box"}
    for shape, r in res["erased_auc"].items():
        assert r["lo"] is not None and r["lo"] <= r["mean"] <= r["hi"], (shape, r)
    cf = res["counterfactual"]
    assert cf["backend"] == "copy_paste" and cf["n_other"] > 0
    assert cf["target_auc_other"]["mean"] is not None
    tables = (repo / "plots/report/tables.md").read_text()
    assert "Residue check" in tables and "Domain check" in tables


def test_an_installed_plugin_adds_rows_to_every_table(foreign_run):
    """Examples/biaslab-example-plugin, installed with pip beside biaslab
    (a directory on PYTHONPATH, not this repository), adds a training set, a model-level method
    and a caption post-processor. Named in the params of the experiment (no file of this
    repository edited), their rows appear in Tables 1-3 and the validity verdicts (their
    declared claims that apply to this data, judged against Original). (On the default, tests/test_pipeline.py checks
    which stages the same experiment plans; the probe needs planted pairs, absent here.)"""
    repo, _, out = foreign_run
    for stage in ("train_classifier@reweighted", "train_method@label_smoothing",
                  "train_captioner@reweighted", "eval_captioner", "report"):
        assert (f"Running stage '{stage}'" in out
                or f"Stage '{stage}' is cached - skipping run" in out), stage
    md = (repo / "plots/report/tables.md").read_text()

    def section(title):
        s = md[md.index(title):]
        return s[:s.index("\n## ", 3)]
    t1, t2, t3 = section("## Table 1:"), section("## Table 2:"), section("## Table 3:")

    def row(label, text):     # a row of a markdown table; † marks a degenerate row
        return text.count(f"| {label} |") + text.count(f"| {label} † |")
    for label in ("Reweighted (plug-in)", "Label smoothing (plug-in)"):
        assert row(label, t1), label
    # the neutral post-processor names nobody's gender: a † row, not "best"
    assert row("Reweighted (plug-in)", t2) and "| Original + neutral words (plug-in) †" in t2
    # the learned post-processor trained on this data's training captions when it ran
    assert "| Original + context-neutral (plug-in)" in t2
    assert row("Reweighted (plug-in)", t3) == 2         # classifier and captioner parts
    v = _json(repo, "metrics/validity.json")
    declared = {c["id"]: c for c in v["checks"] if c.get("declared_by")}
    # the plug-in's classifier claims are about the probe's object sensitivity, which needs
    # planted pairs (tests/test_registry.py judges such claims on probe records): here only its
    # captioner claim applies
    assert "captioner/original+neutral-original/lic≤0" in declared, sorted(declared)
    assert not any(k.startswith("classifier/") for k in declared), sorted(declared)
    assert all(c["declared_by"] == "biaslab-example-plugin" and c["verdict"]
               for c in declared.values())
    assert ("Original + neutral words (plug-in)'s LIC not above Original's (declared by "
            "biaslab-example-plugin)") in section("## Validity")


def test_an_installed_plugin_adds_a_filter_and_a_metric_column(foreign_run):
    """The example plug-in's filter
    ``sharpness``, named in ``filters.names`` with a weight, is scored on every candidate, ranks
    in the selection and is a Table 4 column; its captioning metric ``types``, named in
    ``eval_captioner.metrics``, is a Table 2 column of every row, one value per seed."""
    repo, _, _ = foreign_run
    import pandas as pd
    scores = pd.read_parquet(repo / "data/score/scores.parquet")
    assert scores["sharpness"].notna().all() and (scores["sharpness"] <= 0).all()
    sel = pd.read_parquet(repo / "data/select/selected.parquet")
    assert "rank_sharpness" in sel.columns
    s = _json(repo, "metrics/select.json")
    assert s["weights"]["sharpness"] == 1 and s["sharpness/mean_selected"] <= 0
    cap = _json(repo, "metrics/captioning.json")
    rows = [r for r, v in cap.items() if isinstance(v, dict) and "per_seed" in v]
    for r in rows:
        assert all(isinstance(x["types"], float) and x["types"] >= 1
                   for x in cap[r]["per_seed"]), r
    md = (repo / "plots/report/tables.md").read_text()
    t2 = md[md.index("## Table 2:"):]
    assert "Types (plug-in) ↑" in t2[:t2.index("\n## ", 3)]
    assert "Sharpness (plug-in)" in md[md.index("## Table 4:"):]
