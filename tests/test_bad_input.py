"""Bad input at every entry point: the exit code, a first stderr line that names the
file or param and the problem, and nothing half-written.

* every stage script, run as ``__main__`` (``runpy``, all in ONE Python process so torch is
  imported once) in an empty directory holding only a params.yaml: a bad param -> exit 2 and
  ``<stage>: params.yaml: <param>: ...``; valid params but no inputs -> exit 1 and
  ``<stage>: <input file>: ...`` (no traceback), nothing created.
* the ``biaslab`` console script (subprocesses): unreadable/misplaced inputs and outputs.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
STAGES = sorted(p.stem for p in (ROOT / "stages").glob("*.py"))

DRIVER = r'''
import contextlib, io, json, os, runpy, sys, tempfile, traceback
from pathlib import Path
repo, cases = Path(sys.argv[1]).resolve(), json.load(open(sys.argv[2]))
argv_of = {"train_classifier": ["--dataset", "original", "--seed", "0"],
           "train_captioner": ["--dataset", "original", "--seed", "0"]}
for stage, params_text in cases:
    d = tempfile.mkdtemp()
    os.chdir(d)
    Path("params.yaml").write_text(params_text)
    err = io.StringIO()
    sys.argv = [str(repo / "stages" / f"{stage}.py"), *argv_of.get(stage, [])]
    rc = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
        except SystemExit as e:
            if isinstance(e.code, int) or e.code is None:
                rc = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                rc = 1
        except BaseException as e:      # what the interpreter would do: sys.excepthook, exit 1
            sys.excepthook(type(e), e, e.__traceback__)
            rc = 1
    created = sorted(str(p.relative_to(d)) for p in Path(d).rglob("*") if p.name != "params.yaml")
    print(json.dumps({"stage": stage, "rc": rc, "stderr": err.getvalue(), "created": created}),
          flush=True)
'''


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _params(**changes) -> str:
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    for dotted, v in changes.items():
        *head, last = dotted.split("__")
        d = p
        for k in head:
            d = d[k]
        d[last] = v
    return yaml.safe_dump(p)


# stage -> (param change, param named, words of the problem); stages not listed get the default
BAD_PARAM = {
    # a param of a late stage fails at the first one, before any work
    "synthesize": ({"captioner__archs": ["lstm"]}, "captioner.archs", "unknown name(s) ['lstm']"),
    "label_gender": ({"classifier__methods": ["focal", "focal"]}, "classifier.methods",
                     "names repeat"),
    "prepare": ({"data__max_images": -5}, "data.max_images", "null (all) or an integer >= 1"),
    "split": ({"split__fractions": {"train": 0.7, "val": 0.1, "test": 0.1}}, "split.fractions",
              "sum to 0.9"),
    "generate": ({"generate__max_images": -1}, "generate.max_images", ">= 0"),
    "selection": ({"filters__weights": [1, math.nan, 1]}, "filters.weights", "finite"),
    "report": ({"filters__weights": [1, 1]}, "filters.weights", "2 weight(s) for 3"),
    "score": ({"filters__names": "prompt_adherence"}, "filters.names", "list"),
    # biaslab.runtime.validate.check_dbac, at load_params
    "eval_captioner": ({"eval_captioner__dbac": {"seeds": 0}}, "eval_captioner.dbac.seeds",
                       "an integer >= 1"),
    # checked by the stage itself (biaslab.analysis.controls_eval.check_attackers, called by stages/controls.py), before any input
    "controls": ({"controls__attackers": ["gpt2"]}, "controls.attackers", "unknown name(s)"),
}
DEFAULT_BAD = ({"filters__weights": [1, -1, 1]}, "filters.weights", "worst candidates")


@pytest.fixture(scope="module")
def stage_runs(tmp_path_factory):
    """{(stage, case): result} for case "param" (a bad param) and "missing" (valid params, no
    input files; ``synthesize`` has no inputs and is skipped)."""
    d = tmp_path_factory.mktemp("stages")
    cases = []
    for s in STAGES:
        change = BAD_PARAM.get(s, DEFAULT_BAD)[0]
        cases.append([s, _params(**change)])
    good = _params()
    cases += [[s, good] for s in STAGES if s != "synthesize"]
    (d / "cases.json").write_text(json.dumps(cases))
    (d / "driver.py").write_text(DRIVER)
    p = subprocess.run([sys.executable, str(d / "driver.py"), str(ROOT), str(d / "cases.json")],
                       capture_output=True, text=True, env=_env(), timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    n = len(STAGES)
    return ({("param", r["stage"]): r for r in rows[:n]}
            | {("missing", r["stage"]): r for r in rows[n:]})


@pytest.mark.parametrize("stage", STAGES)
def test_stage_rejects_a_bad_param(stage_runs, stage):
    _, param, problem = BAD_PARAM.get(stage, DEFAULT_BAD)
    r = stage_runs[("param", stage)]
    first = r["stderr"].splitlines()[0]
    assert r["rc"] == 2, r["stderr"]
    assert first.startswith(f"{stage}: params.yaml: {param}: ") and problem in first
    assert "Traceback" not in r["stderr"] and r["created"] == []


@pytest.mark.parametrize("stage", [s for s in STAGES if s != "synthesize"])
def test_stage_without_inputs_names_the_missing_file(stage_runs, stage):
    r = stage_runs[("missing", stage)]
    first = r["stderr"].splitlines()[0]
    assert r["rc"] == 1, r["stderr"]
    assert first.startswith(f"{stage}: ") and ("not found" in first or "missing" in first
                                              or "not a saved" in first), first
    assert "Traceback" not in r["stderr"] and r["created"] == []


# --------------------------------------------------------------------------------------------
# the console script


def _console() -> list[str]:
    exe = Path(sys.executable).with_name("biaslab")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "biaslab.cli"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    pred = [{"image_id": i, "caption": ["A woman with a dog.", "A man with a tie."][i % 2]}
            for i in range(8)]
    (d / "pred.json").write_text(json.dumps(pred))
    (d / "labels.csv").write_text("image_id,gender\n" + "".join(
        f"{i},{['female', 'male'][i % 2]}\n" for i in range(8)))
    (d / "latin1.json").write_bytes('[{"image_id": 1, "caption": "caf\xe9"}]'.encode("latin-1"))
    (d / "truncated.json").write_text('{"annotations": [{"image_id": 1, ')
    (d / "a_dir").mkdir()
    (d / "empty_preds.json").write_text(json.dumps(
        [{"image_id": i, "caption": "" if i % 2 else "A dog on a sofa."} for i in range(8)]))
    return d


EVAL = ["evaluate-captions", "--json", "--metrics", "ratio", "error"]
# (argv with {d} for the inputs directory, exit code, words of the first stderr line)
CLI_CASES = [
    (EVAL + ["--pred", "{d}/latin1.json", "--gender", "{d}/labels.csv"], 2,
     "{d}/latin1.json: not UTF-8"),
    (EVAL + ["--pred", "{d}/a_dir", "--gender", "{d}/labels.csv"], 2,
     "{d}/a_dir: is a directory"),
    (EVAL + ["--pred", "{d}/pred.json", "--gender", "{d}/a_dir"], 2,
     "{d}/a_dir: is a directory"),
    (EVAL + ["--pred", "{d}/pred.json", "--gender", "{d}/labels.csv", "--human",
             "{d}/truncated.json"], 2, "{d}/truncated.json: invalid or truncated JSON"),
    (EVAL + ["--pred", "{d}/pred.json", "--gender", "{d}/labels.csv", "--out", "{d}/a_dir"], 2,
     "{d}/a_dir: is a directory; give a file name"),
    (EVAL + ["--pred", "{d}/pred.json", "--gender", "{d}/labels.csv", "--out",
             "{d}/pred.json/x.json"], 2, "cannot create it: {d}/pred.json is not a directory"),
    (EVAL + ["--pred", "{d}/pred.json", "--gender", "{d}/labels.csv", "--words", "foo"], 2,
     "argument --words: invalid choice: 'foo'"),
    (EVAL + ["--pred", "{d}/pred.json", "--gender", "{d}/labels.csv",
             "--biasamp-min-count", "-1"], 2, "argument --biasamp-min-count: must be >= 0"),
    (["libra", "debias", "--pred", "{d}/latin1.json", "--images", "{d}", "--model", "{d}",
      "--out", "{d}/o.json"], 2, "{d}/latin1.json: not UTF-8"),
    (["libra", "debias", "--pred", "{d}/pred.json", "--images", "{d}", "--model", "{d}",
      "--out", "{d}/a_dir"], 2, "{d}/a_dir: is a directory"),
    (["nope"], 2, "argument COMMAND: invalid choice: 'nope'"),
]


@pytest.mark.parametrize("argv,rc,first", CLI_CASES, ids=[" ".join(c[0][:1] + c[0][-2:])
                                                          for c in CLI_CASES])
def test_console_script_bad_input(inputs, argv, rc, first):
    d = str(inputs)
    before = sorted(os.listdir(d))
    p = subprocess.run(_console() + [a.format(d=d) for a in argv], capture_output=True,
                       text=True, env=_env(), timeout=120)
    assert p.returncode == rc, p.stderr
    line = p.stderr.splitlines()[0]
    cmd = "biaslab" if argv[0] == "nope" else "biaslab " + argv[0]
    assert line.startswith(f"{cmd}") and ": error: " in line and first.format(d=d) in line, line
    assert "Traceback" not in p.stderr
    assert sorted(os.listdir(d)) == before                 # nothing (half-)written
    assert os.listdir(inputs / "a_dir") == []


def test_all_empty_predictions_warn_that_no_caption_mentions_a_gender(inputs):
    p = subprocess.run(_console() + EVAL + ["--pred", str(inputs / "empty_preds.json"),
                                            "--gender", str(inputs / "labels.csv")],
                       capture_output=True, text=True, env=_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "no caption of the 8 labelled predictions mentions a gender" in p.stderr
    res = json.loads(p.stdout)
    assert res["inputs"]["n_labelled_predictions_mentioning_gender"] == 0
    assert res["Error"] == 0.0
