"""End to end: `dvc repro` on the embedded default in a temporary clone of the working tree,
then a parameter experiment that must re-run only the stages depending on that parameter."""
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, clone_worktree, plugin_overrides, run_checked

pytestmark = pytest.mark.slow


def _reproduced(out: str, stage: str) -> bool:
    """DVC ran the stage, or restored its outputs from the (shared) run-cache."""
    return (f"Running stage '{stage}'" in out
            or f"Stage '{stage}' is cached - skipping run" in out)


_run = run_checked


@pytest.fixture(scope="module")
def pipeline_repo(tmp_path_factory):
    """A git + DVC repository holding the current working tree, with `dvc repro` done."""
    dst = tmp_path_factory.mktemp("e2e") / "repo"
    # no dvc.lock: the fresh run writes its own. The cache is the working tree's (and its
    # run-cache): a later `dvc repro` there (CI runs one right after the tests) restores
    # these results instead of recomputing them
    env = clone_worktree(dst, "e2e", drop=("dvc.lock",))
    env["BIASLAB_IMPORT_LOG"] = str(dst.parent / "imports")   # the modules each stage loads
    # timed per stage (benchmarks/stage_times.py passes DVC's output through unchanged)
    out = _run([sys.executable, "benchmarks/stage_times.py", "--name", "e2e", "--",
                "dvc", "repro"], dst, env)
    export = os.environ.get("BIASLAB_E2E_OUT")
    if export:   # CI prints the tables, verdicts and stage times of this fresh run
        Path(export).mkdir(parents=True, exist_ok=True)
        for f in ("plots/report/tables.md", "metrics/validity.json", "metrics/summary_full.json",
                  "benchmarks/results/stage_times_e2e.json", "dvc.lock"):
            shutil.copy2(dst / f, Path(export) / Path(f).name)
    _run(["git", "add", "-A"], dst, env)      # the reproduced state is the baseline of the
    _run(["git", "commit", "-qm", "repro"], dst, env)   # experiments below
    return dst, env, out


def test_repro_runs_every_stage_and_writes_metrics(pipeline_repo):
    repo, env, out = pipeline_repo
    for stage in ("synthesize", "prepare", "label_gender", "split", "audit"):
        assert _reproduced(out, stage), stage
    labels = json.loads((repo / "metrics/labels.json").read_text())
    # synthetic captions never contradict the drawn gender: caption labels agree perfectly
    agree = labels["agreement_with_perceived_gender"]
    assert agree["n_compared"] > 200 and agree["accuracy"] == 1.0
    prep = json.loads((repo / "metrics/prepare.json").read_text())
    # 320 training-pool images + the separate 200-image test split
    assert prep["images"] == 520 and prep["dropped_total"] == 0
    split = json.loads((repo / "metrics/split.json").read_text())
    assert (split["test/female"], split["test/male"]) == (61, 139)      # COCO's 2.3 : 1
    assert split["train/female"] == split["train/male"] == 140
    assert (repo / "data/split.parquet").exists()
    # the main pipeline (published/dvc.yaml reads ../shared, beside the repository only)
    assert "up to date" in _run(["dvc", "status", "dvc.yaml"], repo, env)


def test_every_stage_lists_the_library_modules_it_imported(pipeline_repo):
    """The dynamic half of the deps check (biaslab/runtime/stagedeps.py): a module a stage
    loaded by name (a registry target, a lazy submodule) must be one of its deps too, or an
    edit of it leaves that stage "up to date" in `dvc status`. Stages DVC restored from the
    run-cache ran no process and are not seen here."""
    from biaslab.runtime.stagedeps import read_import_log, uncovered_imports
    repo, env, _ = pipeline_repo
    seen = read_import_log(env["BIASLAB_IMPORT_LOG"])
    assert len(seen) >= 20, sorted(seen)               # the log itself works
    assert all("biaslab/runtime/io.py" in f for f in seen.values())
    assert uncovered_imports(seen, repo / "dvc.yaml") == {}


def test_repro_ends_with_the_papers_tables(pipeline_repo):
    repo, _, out = pipeline_repo
    for stage in ("bcs_synthesize", "dcg_train", "eval_captioner", "artifact_captioner",
                  "report"):
        assert _reproduced(out, stage), stage
    md = (repo / "plots/report/tables.md").read_text()
    for title in ("Table 1", "Table 2", "Table 3", "Table 4"):
        assert f"## {title}" in md
    summary = json.loads((repo / "metrics/summary_full.json").read_text())
    # real numbers for every training set in the headline, with their CI and n
    for d in ("original", "oversample", "subsample", "augment", "synthetic"):
        assert 0 <= summary[d]["mAP"]["mean"] <= 100 and summary[d]["mAP"]["n"] >= 3
        assert summary[d]["LIC"]["n"] >= 3
    assert "LIC" in summary["original+LIBRA"]
    assert "## Validity" in md


def test_captioner_sensitivity_stands_beside_table2(pipeline_repo):
    """Table 2's bias metrics beside their feature sensitivity: every captioner row has each
    metric's change under each captioned perturbation with its 95 % CI, and the unperturbed
    side is Table 2's own value (the same images, the same captions)."""
    repo, _, out = pipeline_repo
    assert _reproduced(out, "sensitivity_captioner")
    sc = json.loads((repo / "metrics/sensitivity_captioner.json").read_text())
    cap = json.loads((repo / "metrics/captioning.json").read_text())
    assert sc["available"] and sc["test_set"]["n_left_out"] == 0
    assert sc["test_set"]["n_images"] == cap["test_set"]["n_images"]
    for row, by_p in sc["models"].items():
        assert set(by_p) == set(sc["perturbations"]), row
        for p, recs in by_p.items():
            for m in ("Error", "BiasAmp"):
                r = recs[m]
                assert abs(r["base"] - cap[row][m]["mean"]) < 1e-6, (row, p, m)
                assert r["lo"] is not None and r["lo"] <= r["delta"] <= r["hi"], (row, p, m)
    md = (repo / "plots/report/tables.md").read_text()
    assert "### Table 2, feature sensitivity" in md


def test_planted_truth_core_claims(pipeline_repo):
    """On the embedded default (render backend) the causal probe must show that
    Original reads every planted attribute and that S_synthetic reads the unlabeled colour
    cast less than Original (verdicts from 95 % CIs over the default's 5 classifier seeds), on
    the probability scale of the issue and on the logit margin (which cannot saturate).

    S_synthetic against over-sampling: the direction must be right on both scales and the
    logit-margin check must hold; on the probability scale it held with 5 seeds on the
    development machine (-0.21 [-0.29, -0.12]) but was inconclusive with 3 (over-sampling's
    seeds spread widely: cast 0.09-0.26), so it is asserted as "not fails" -- said here, not hidden. On the default's 2.3 : 1 test split the
    Ratio claims are testable, and read "mask not neutral" exactly when a compared row's mask
    reads as one gender (metrics/validity.json mask_neutral)."""
    repo, _, _ = pipeline_repo
    checks = {c["id"]: c for c in
              json.loads((repo / "metrics/validity.json").read_text())["checks"]}
    for scale in ("classifier", "classifier_logit"):
        for a in ("objects", "scene", "cast"):
            c = checks[f"{scale}/original/{a}>0"]
            assert c["verdict"] == "holds", c
        c = checks[f"{scale}/synthetic-original/cast<0"]
        assert c["verdict"] == "holds", c
        c = checks[f"{scale}/synthetic-oversample/cast<0"]
        assert c["mean"] < 0 and c["verdict"] != "fails", c
    assert checks["classifier_logit/synthetic-oversample/cast<0"]["verdict"] == "holds"
    # the skewed test split makes the Ratio claims testable; they are judged
    # only where both compared rows' masks read as neither gender (item 2)
    v = json.loads((repo / "metrics/validity.json").read_text())
    rows = {r["dataset"]: r for r in v["mask_neutral"]}
    # the default's fill (the mean colour) adds no gender reading to any training set, in or
    # out of context (benchmarks/results/mask_fill.json: the black box did)
    assert all(r["measure"] == "mask_effect" and r["context"] for r in rows.values()), rows
    assert [d for d, r in rows.items() if not r["met"]] == [], rows
    neutral = rows["original"]["met"] and rows["synthetic"]["met"]
    for k in ("ratio<0", "ratio_expected<0"):
        verdict = checks[f"classifier/synthetic-original/{k}"]["verdict"]
        assert verdict != "not testable"
        assert (verdict == "mask not neutral") == (not neutral), (verdict, rows)


def test_fresh_run_reproduces_the_committed_record(pipeline_repo):
    """The reproducibility promise (``biaslab.runtime.reprocheck``) against the lock, metrics
    and lock machine *committed* at HEAD (``git show``, so that ``scripts/repro.sh`` in the
    working tree cannot replace the reference): on the machine the lock was made on, every
    stage with the lock's inputs gives byte-identical outs; on any machine the data stages
    do, every verdict is the same and every number of ``metrics/`` is within its declared
    tolerance. DVCLive directories are outs too: wall times go to ``benchmarks/runs/``, so a
    training log is a function of the inputs. Stages whose code or params differ from the
    lock's (a working tree ahead of it) are not compared; at least one must be."""
    from biaslab.runtime import reprocheck
    repo, _, _ = pipeline_repo
    res = reprocheck.check_against_git(repo, REPO)
    export = os.environ.get("BIASLAB_E2E_OUT")
    if export:
        Path(export, "reprocheck.json").write_text(json.dumps(
            {k: v for k, v in res.items() if k != "drifts"} |
            {"max_drift": reprocheck.max_drift(res)}, indent=1, default=str))
    assert res["comparable"], "no stage of the fresh run has the committed lock's code and params"
    assert res["ok"], reprocheck.summarize(res)


#: sha256 of the default's BCS captions (``_bcs_digest``) in the committed run: on the machine
#: the lock was made on, the captions the DCG learns from must be these. BCS picks captions by
#: the scores of trained LSTMs; it runs in portable numerics (dvc.yaml), which gave these same
#: captions on two AMD generations, but a CPU of another vendor may pick others; there the
#: reproducibility check judges metrics/bcs.json by its numbers. Update it only with a
#: change that is meant to change them (the digest of this checkout's own fresh repro).
BCS_SYNTHESIZED_SHA256 = "a847653a40c681b5cd22a45b9b19b902c8826f1f7dd2f269180f61f840de6181"


def _bcs_digest(path) -> str:
    """Digest of the synthesized captions' text (type, caption_id, original, biased; sorted),
    independent of parquet's bytes."""
    import hashlib

    import pandas as pd
    t = pd.read_parquet(path)
    rows = sorted(zip(t["type"].astype(str), t["caption_id"].astype(int),
                      t["original"].astype(str), t["biased"].astype(str)))
    text = "\n".join("\t".join(map(str, r)) for r in rows)
    return hashlib.sha256(text.encode()).hexdigest()


def test_artifacts_get_as_the_readme_shows_it(pipeline_repo, tmp_path):
    """`dvc artifacts get`'s --rev is the artifact *version* (a GTO tag
    ``<name>@v<semver>``), not a git revision: ``--rev main`` looks for a tag
    ``classifier@main`` and fails. The README's commands: tag a version, get it by version; an
    untagged revision through its path with `dvc get`."""
    repo, env, _ = pipeline_repo
    _run(["git", "tag", "-a", "classifier@v0.1.0", "-m", "classifier of the default run"],
         repo, env)
    try:
        out = _run(["dvc", "artifacts", "get", ".", "classifier", "--rev", "v0.1.0", "-o",
                    str(tmp_path / "by_version")], repo, env)
        assert "Downloaded" in out
        got = sorted(p.name for p in (tmp_path / "by_version").iterdir())
        assert got == sorted(p.name for p in (repo / "data/models/classifier").iterdir())
    finally:
        _run(["git", "tag", "-d", "classifier@v0.1.0"], repo, env)
    _run(["dvc", "get", ".", "data/models/classifier", "--rev", "HEAD", "-o",
          str(tmp_path / "by_rev")], repo, env)
    assert (tmp_path / "by_rev" / "original").is_dir()


def test_bcs_captions_are_the_committed_ones(pipeline_repo):
    from biaslab.runtime import reprocheck
    repo, _, _ = pipeline_repo
    lock_machine = json.loads((REPO / reprocheck.LOCK_MACHINE_FILE).read_text())
    if lock_machine != reprocheck.machine():
        pytest.skip("another CPU than the lock's: BCS's choices are judged by "
                    "test_fresh_run_reproduces_the_committed_record's numbers")
    got = _bcs_digest(repo / "data/libra/synthesized.parquet")
    assert got == BCS_SYNTHESIZED_SHA256, \
        f"BCS synthesized other captions than the committed digest: {got}"


def test_libra_keeps_correct_captions_on_the_default(pipeline_repo):
    """LIBRA's DCG bars, measured by stage dcg_apply on the test split's human captions."""
    repo, _, _ = pipeline_repo
    a = json.loads((repo / "metrics/dcg_apply.json").read_text())
    assert a["human"]["after"]["correct"] >= 0.97, a["human"]
    assert a["swapped"]["after"]["correct"] >= 0.80, a["swapped"]
    checks = {c["id"]: c for c in
              json.loads((repo / "metrics/validity.json").read_text())["checks"]}
    for cid in ("libra/dcg/human_correct≥0.97", "libra/dcg/swapped_correct≥0.8",
                "captioner/libra-original/error≤tol", "captioner/libra-original/lic<0"):
        assert checks[cid]["verdict"] in ("holds", "fails", "inconclusive",
                                          "metric not valid on this data"), checks[cid]


def _planned(repo, env):
    """Stages `dvc repro --dry` would run now (DVC's own change detection, nothing runs)."""
    out = _run(["dvc", "repro", "--dry"], repo, env)
    return {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}


def test_label_param_experiment_reruns_only_dependents(pipeline_repo):
    repo, env, _ = pipeline_repo
    # run the experiment up to `audit` (the full downstream is checked with --dry below, which
    # keeps the test to minutes: every model stage depends on the labels)
    out = _run(["dvc", "exp", "run", "-S", "label.rule=at_least_k", "audit"], repo, env)
    for skipped in ("synthesize", "prepare"):
        assert not _reproduced(out, skipped), out
    for ran in ("label_gender", "audit"):
        assert _reproduced(out, ran), out
    labels = json.loads((repo / "metrics/labels.json").read_text())
    assert labels["rule"] == "at_least_k"
    planned = _planned(repo, env)
    assert {"synthesize", "prepare", "features", "label_gender", "audit"}.isdisjoint(planned)
    # --dry lists the stages whose own deps or params changed (DVC only learns at run time
    # whether their outputs change, and so whether the stages after them must run)
    assert {"masks", "human_bias"} <= planned


def test_filter_weights_experiment_reruns_only_selection_and_after(pipeline_repo):
    repo, env, _ = pipeline_repo
    _run(["git", "checkout", "-q", "--", "."], repo, env)   # back to the reproduced baseline
    _run(["dvc", "checkout", "-f"], repo, env)
    before = {o["path"]: o["md5"] for o in
              yaml.safe_load((repo / "dvc.lock").read_text())["stages"]["build_datasets"]["outs"]}
    out = _run(["dvc", "exp", "run", "-S", "filters.weights=[1,0,1]", "build_datasets"], repo,
               env)
    for skipped in ("generate", "score", "train_scorer", "masks", "label_gender"):
        assert not _reproduced(out, skipped), out
    assert _reproduced(out, "select") and _reproduced(out, "build_datasets"), out
    sel = json.loads((repo / "metrics/select.json").read_text())
    assert sel["weights"] == {"prompt_adherence": 1, "object_consistency": 0,
                              "color_fidelity": 1}
    # the default generates 3 candidates per (image, group): the weights choose another set
    assert sel["candidates_per_tuple"]["min"] >= 3 and sel["warnings"] == [], sel
    assert sel["changed_vs_equal_weights"] > 0, sel
    after = {o["path"]: o["md5"] for o in
             yaml.safe_load((repo / "dvc.lock").read_text())["stages"]["build_datasets"]["outs"]}
    assert after != before, "another selection left the training sets unchanged"
    planned = _planned(repo, env)
    assert {"generate", "score", "masks", "features", "bcs_synthesize"}.isdisjoint(planned)
    # the S_* models train again (their datasets changed); DVC knows it before running them
    assert {"train_classifier@synthetic", "train_classifier@augment",
            "train_captioner@synthetic", "report"} <= planned, planned
    # with one small DVC metric file, DVC's own table of the experiments
    # fits a 200-column terminal without elided cells
    shown = _run(["dvc", "exp", "show", "--only-changed", "--no-pager"], repo,
                 {**env, "COLUMNS": "200"})
    assert max(len(line) for line in shown.splitlines()) <= 200
    assert "…" not in shown and "filters.weights" in shown, shown
    assert len(_run(["dvc", "metrics", "diff", "HEAD"], repo, env).splitlines()) <= 60


def test_controls_match_their_known_answers_on_the_default(pipeline_repo):
    """On the embedded default every control model's exact value matches its known
    answer, the probe's controls swing by their known amounts, and no claim is reported on a
    metric whose controls miss (metric not valid on this data). Caption BiasAmp
    is judged against its null (the test images' own human captions) and the amplifier paired
    with the oracle, so it must match; LIC and DBAC may still miss (recorded, not hidden:
    their preconditions read invalid in metrics/validity.json)."""
    repo, _, out = pipeline_repo
    assert _reproduced(out, "controls")
    c = json.loads((repo / "metrics/controls.json").read_text())
    assert c["available"]["planted_truth"] and c["available"]["probe"]
    # every classifier control matches; on the 2.3 : 1 test split the captioner's
    # BiasAmp sits near -6 for controls with no bias of their own, which is its null there
    # (biaslab.metrics.biasamp.human_null), so it matches; LIC and DBAC may miss
    for name, ms in c["classifier"].items():
        for metric, r in ms.items():
            assert r.get("verdict") != "does not match", ("classifier", name, metric, r)
    for task in ("classifier", "captioner"):
        for name, ms in c[task].items():
            for metric, r in ms.items():
                if "value" in r.get("expected", {}):
                    assert r["verdict"] == "matches", (task, name, metric, r)
                if r.get("verdict") == "does not match":
                    assert (task, metric) in MAY_MISS, (name, metric, r)
    assert c["probe"]["context_reader[cast]"]["cast"]["measured"]["mean"] == 2.0
    assert c["power"]["classifier"]["Leakage"]["mde"] > 0
    # feature sensitivity's controls: the oracles (truth and pixel) never move; the pixel
    # context reader moves under every blur and falls under a swap; no control misses
    sens = c["sensitivity"]
    for name in ("person_oracle", "person_oracle_pixels"):
        assert all(r["verdict"] == "matches" for p in sens[name].values()
                   for r in p.values()), sens[name]
    ctx = sens["context_reader_pixels"]
    blurs = [p for p in ctx if p.startswith("blur@")]
    assert blurs and all(ctx[p]["AUC"]["verdict"] == "matches" for p in blurs), ctx
    assert ctx["swap"]["AUC"]["measured"]["hi"] < 0
    assert any(ctx[p]["AUC"]["verdict"] == "matches" for p in ctx if p.startswith("objects@"))
    assert not any(r.get("verdict") == "does not match" for ctl in sens.values()
                   for p in ctl.values() for r in p.values())
    v = json.loads((repo / "metrics/validity.json").read_text())
    # a claim on such a metric (LIBRA's "LIC lower") is reported as not judged
    not_valid = [ch for ch in v["checks"] if ch["verdict"] == "metric not valid on this data"]
    assert v["summary"]["metric_not_valid_on_this_data"] == len(not_valid)
    assert all("captioner/LIC" in ch["reason"] or "captioner/DBAC" in ch["reason"]
               for ch in not_valid), not_valid
    # caption BiasAmp: the null (not 0) is recorded and the amplifier decided paired
    assert c["biasamp_null"]["n_indices"] >= 1
    assert c["captioner"]["amplifier@1"]["BiasAmp"]["verdict"] == "matches"
    assert "paired" in c["captioner"]["amplifier@1"]["BiasAmp"]
    # no control misses its known answer outside MAY_MISS; a metric whose controls the run
    # cannot resolve (inconclusive at 3 replicates) is reported as not validated, not as a miss
    assert all(not p["not_matching"] for p in v["preconditions"]
               if (p["task"], p["metric"]) not in MAY_MISS), v["preconditions"]
    assert all(p["valid"] == (not p["not_matching"] and not p["inconclusive"])
               for p in v["preconditions"])
    tables = (repo / "plots/report/tables.md").read_text()
    assert "Detectable difference between two rows" in tables
    # the captioning metrics side by side on the controls (DBAC's misses are
    # findings about the metric, reported there, not failures of the pipeline)
    assert "Which captioning metric sees the planted bias" in tables
    assert "| DBAC T→A (direct) |" in tables


#: captioner metrics whose controls may miss on the default (reported, not hidden): LIC on
#: the 2.3 : 1 test split, and DBAC, whose prior variant reads caption
#: diversity (0.40 on the context reader) and whose A->T variants have intervals
#: of +- 0.3 at 3 replicates. BiasAmp is not in the set (judged against its null)
MAY_MISS = {("captioner", "LIC"), ("captioner", "DBAC_T_to_A"),
            ("captioner", "DBAC_A_to_T"), ("captioner", "DBAC_direct_T_to_A"),
            ("captioner", "DBAC_direct_A_to_T")}


def test_a_plugin_experiment_changes_only_its_rows_and_the_aggregates(pipeline_repo):
    """On the default: naming the example plug-in's components in the
    params of an experiment changes their own stages and the stages that aggregate every row
    (evaluation, probe, artifact test), never a built-in row's training or the data stages.
    DVC's own change detection (``dvc status``), nothing runs: the plug-in's rows themselves are
    run end to end, with every table checked, on the foreign data set
    (tests/test_foreign_data.py), which keeps CI within its time."""
    import subprocess

    import yaml
    repo, env, _ = pipeline_repo
    _run(["git", "checkout", "-q", "--", "."], repo, env)   # back to the reproduced baseline
    _run(["dvc", "checkout", "-f"], repo, env)
    p = yaml.safe_load((repo / "params.yaml").read_text())
    args = [x for o in plugin_overrides(p) for x in ("-S", o)]
    # the experiment's params, run up to `synthesize` (unchanged: nothing runs), then DVC's
    # view of what changed (`dvc repro --dry` cannot plan a stage whose input, here
    # data/datasets/reweighted.parquet, an earlier stage has yet to write)
    out = _run(["dvc", "exp", "run", *args, "synthesize"], repo, env)
    assert not _reproduced(out, "synthesize"), out
    st = subprocess.run(["dvc", "status", "--json"], cwd=repo, env=env, capture_output=True,
                        text=True, check=True)
    changed = set(json.loads(st.stdout))
    assert {"train_classifier@reweighted", "train_method@label_smoothing",
            "train_captioner@reweighted", "build_datasets", "eval_classifier",
            "eval_captioner", "probe", "artifact_test"} <= changed, sorted(changed)
    assert {"synthesize", "prepare", "generate", "score", "features",
            "train_classifier@original", "train_method@group_dro",
            "train_captioner@original"}.isdisjoint(changed), sorted(changed)
    _run(["git", "checkout", "-q", "--", "."], repo, env)


def test_attribute_skin_changes_only_the_stages_that_read_it(pipeline_repo):
    """`dvc exp run -S attribute=skin` on the default re-runs the stages whose params
    list ``attribute`` (generate: the counterfactuals' groups; score: the KNN filter's real
    groups; select: no colour fidelity for skin tone; build_datasets: the training sets over
    the groups; eval_attribute, eval_classifier, probe: its attribute-flip pairs; audit: its
    per-group audit; controls_attribute: the attribute's controls; residue: the skin-tone
    check of the counterfactuals) and then what reads their
    outs (training, the report, once they differ): DVC's own change detection after the param
    is set (nothing runs here; the skin-tone results are measured in docs/attributes.md)."""
    import subprocess
    repo, env, _ = pipeline_repo
    _run(["git", "checkout", "-q", "--", "."], repo, env)
    _run(["dvc", "checkout", "-f"], repo, env)
    out = _run(["dvc", "exp", "run", "-S", "attribute=skin", "synthesize"], repo, env)
    assert not _reproduced(out, "synthesize"), out
    st = subprocess.run(["dvc", "status", "--json"], cwd=repo, env=env, capture_output=True,
                        text=True, check=True)
    assert set(json.loads(st.stdout)) == {"generate", "score", "select", "build_datasets",
                                          "eval_attribute", "eval_classifier", "probe",
                                          "audit", "controls_attribute", "residue"}, \
        st.stdout
    _run(["git", "checkout", "-q", "--", "."], repo, env)
