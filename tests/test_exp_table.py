"""scripts/exp_table.py: the `dvc exp show` view that fits 120 columns."""
import importlib.util
import json
import os
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "exp_table", Path(__file__).resolve().parents[1] / "scripts" / "exp_table.py")
T = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(T)


def _summary(shift):
    ref = {"mean": 10.0 + shift, "ci95": 0.5, "n": 3, "n_inf": 0}
    return {"original": {"Leakage": ref, "Ratio (captioner)": {"mean": 1.25, "ci95": 0.1,
                                                               "n": 3, "n_inf": 0}},
            "synthetic": {"Leakage": {"mean": 8.0, "ci95": 0.4, "n": 3, "n_inf": 0,
                                      "diff": -2.0 - shift, "diff_lo": -3.0 - shift,
                                      "diff_hi": -1.0 - shift},
                          "Ratio (captioner)": {"mean": None, "ci95": None, "n": 2,
                                                "n_inf": 1, "diff": None, "diff_lo": None,
                                                "diff_hi": None}},
            "original+LIBRA": {"LIC": {"mean": 1.0, "ci95": 2.0, "n": 3, "n_inf": 0,
                                       "diff": -0.5, "diff_lo": -2.5, "diff_hi": 1.5}}}


def _rec(rev, name, params, summary):
    metrics = {"metrics/summary_full.json": {"data": summary}} if summary is not None else {}
    return {"rev": rev, "name": name, "data": {"rev": rev, "params": {
        "params.yaml": {"data": params}}, "metrics": metrics}, "error": None,
        "experiments": None}


BASE = {"classifier": {"epochs": 5, "seeds": [0, 1]}, "generate": {"m": 4, "backend": "render"}}
EXP_SHOW = [  # the shape `dvc exp show --json` (DVC 3) prints: baseline with nested experiments
    _rec("workspace", None, BASE, _summary(0.0)),
    {**_rec("a" * 40, "main", BASE, _summary(0.0)), "experiments": [
        {"revs": [_rec("b" * 40, "long-train", {**BASE, "classifier": {"epochs": 20,
                                                                       "seeds": [0, 1]}},
                       _summary(1.0))], "executor": None, "name": "long-train"},
        {"revs": [_rec("c" * 40, "failed", {**BASE, "generate": {"m": 8}}, None)],
         "executor": None, "name": "failed"}]}]


def test_cell_hand_computed():
    assert T.cell({"mean": 10.0, "ci95": 0.5, "n": 3}) == "10.0 ±0.5"
    # diff -2 with CI [-3, -1]: half-width 1, excludes 0 -> *
    assert T.cell({"mean": 8.04, "diff": -2.0, "diff_lo": -3.0, "diff_hi": -1.0}) \
        == "8.0 Δ-2.0±1.0*"
    assert T.cell({"mean": 1.0, "diff": -0.5, "diff_lo": -2.5, "diff_hi": 1.5}, 2) \
        == "1.00 Δ-0.50±2.00"
    assert T.cell({"mean": None, "n_inf": 1, "diff": None, "diff_lo": None}) == "∞ Δ–"
    assert T.cell(None) == "–" and T.cell({"mean": None, "n_inf": 0, "ci95": None}) == "–"


def test_records_and_varying_params():
    recs = T.records(EXP_SHOW)
    assert [r["name"] for r in recs] == ["workspace", "main", "long-train", "failed"]
    assert recs[1]["params"]["classifier.seeds"] == [0, 1]
    assert recs[3]["summary"] == {}
    # generate.backend is missing in 'failed' (its generate section is replaced) -> varies
    assert T.varying(recs) == ["classifier.epochs", "generate.backend", "generate.m"]
    assert T.varying(recs[:2]) == [] and T.varying(recs[:1]) == []


def test_table_fits_120_columns_and_shows_headline():
    out = T.format_exp_table(EXP_SHOW, width=120)
    lines = out.splitlines()
    assert max(map(len, lines)) <= 120
    assert "classifier.epochs" in out and "classifier.seeds" not in out
    row = next(ln for ln in lines if ln.startswith("long-train") and "original" in ln)
    assert "11.0 ±0.5" in row and "1.25 ±0.10" in row          # Ratio: 2 decimals
    syn = lines[lines.index(row) + 1]
    assert syn.split()[0] == "synthetic" and "8.0 Δ-3.0±1.0*" in syn and "∞ Δ–" in syn
    assert any("failed" in ln and "(no summary_full.json)" in ln for ln in lines)
    assert "1.0 Δ-0.5±2.0" in out and "1.00 Δ" not in out    # LIC column: 1 decimal


@pytest.mark.parametrize("width", [60, 80, 100])
def test_narrow_terminal_drops_columns_with_a_note(width):
    out = T.format_exp_table(EXP_SHOW, width=width, workspace=False)
    assert max(map(len, out.splitlines())) <= width
    assert "workspace" not in out
    if width == 60:
        assert "not shown (too wide)" in out and "use --metrics" in out


def test_main_reads_a_saved_json(tmp_path, capsys):
    import json
    f = tmp_path / "exp.json"
    f.write_text(json.dumps(EXP_SHOW))
    assert T.main(["--json-file", str(f), "--width", "120", "--metrics", "LIC",
                   "--methods", "original+LIBRA"]) == 0
    out = capsys.readouterr().out
    assert "original+LIBRA" in out and "synthetic" not in out and "Leakage" not in out


# ---- DVC shows only the compact summary; the collectors read the rest from Git ----

def test_noise_floor_hand_computed():
    from biaslab.runtime.stats import noise_floor
    # t_{0.975, 4} sqrt(2/3) = 2.776445 * 0.816497
    assert noise_floor(1.0, 3) == pytest.approx(2.266957, abs=1e-5)
    assert noise_floor(2.0, 5) == pytest.approx(2 * 2.306004 * (2 / 5) ** 0.5, abs=1e-5)
    assert noise_floor(None, 3) is None and noise_floor(1.0, 1) is None


def test_noise_line_names_each_metric_with_its_n():
    recs = [{"name": "w", "params": {}, "summary": {"original": {
        "Leakage": {"mean": 1.0, "ci95": 1.0, "std": 1.0, "n": 3}}}}]
    line = T.noise_line(recs, ["Leakage", "LIC"])
    assert "Leakage ±2.3 (n=3)" in line and "LIC" not in line
    assert "not available" in T.noise_line([{"name": "w", "params": {}, "summary": {}}],
                                             ["Leakage"])


def test_attach_out_metrics_reads_each_revision_from_git(tmp_path):
    import subprocess

    from biaslab.report.dvcview import attach_out_metrics, out_metric_files
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    (tmp_path / "metrics").mkdir()
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  a:\n    cmd: x\n    outs:\n      - data/a\n      - metrics/detail.json:\n"
        "          cache: false\n    metrics:\n      - metrics/summary.json:\n"
        "          cache: false\n")
    assert out_metric_files(tmp_path / "dvc.yaml") == ["metrics/detail.json"]
    revs = []
    for v in (1, 2):
        (tmp_path / "metrics/detail.json").write_text(json.dumps({"v": v}))
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "v"]):
            if cmd[1] == "init" and v == 2:
                continue
            subprocess.run(cmd, cwd=tmp_path, env=env, check=True, capture_output=True)
        revs.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, env=env,
                                   capture_output=True, text=True).stdout.strip())
    (tmp_path / "metrics/detail.json").write_text(json.dumps({"v": "workspace"}))
    shown = [_rec("workspace", None, {}, None), _rec(revs[0], "old", {}, None),
             _rec(revs[1], "new", {}, None), _rec("c" * 40, "gone", {}, None)]
    attach_out_metrics(shown, tmp_path)
    got = [r["data"]["metrics"].get("metrics/detail.json", {}).get("data") for r in shown]
    assert got == [{"v": "workspace"}, {"v": 1}, {"v": 2}, None]
