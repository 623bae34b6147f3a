"""``biaslab`` CLI: evaluate-captions on tiny files, input errors, subcommand registry."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from biaslab import cli

N = 8   # images per gender (>= 6 needed for a balanced split with a non-empty test set)


@pytest.fixture
def files(tmp_path):
    """pred.json (2N labelled images + 2 unlabelled), labels.csv (bb_gender, mixed case, an
    Unsure row), human.json (COCO captions, 2 per image)."""
    pred, anns, rows = [], [], ["image_id,bb_gender,bb_skin"]
    for i in range(2 * N + 2):
        fem = i % 2 == 0
        who, what = ("woman", "dress") if fem else ("man", "tie")
        pred.append({"image_id": i, "caption": f"A {who} in a {what} with a dog."})
        for k in range(2):
            anns.append({"id": 1000 + 10 * i + k, "image_id": i,
                         "caption": f"A {who} wearing a {what} near a {['cat', 'car'][k]}."})
        if i < 2 * N:
            rows.append(f"{i},{['Female', 'FEMALE', 'female '][i % 3] if fem else 'MALE'},Light")
    rows.append("500,Unsure,")
    (tmp_path / "pred.json").write_text(json.dumps(pred))
    images = [{"id": i} for i in range(2 * N + 2)]
    (tmp_path / "human.json").write_text(json.dumps({"images": images, "annotations": anns}))
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def run(capsys, *argv):
    """``biaslab *argv`` in-process; evaluate-captions prints its JSON (``--json``) unless the
    test asks for the summary (``--no-json-for-test``, dropped before parsing)."""
    argv = [str(a) for a in argv]
    if argv and argv[0] == "evaluate-captions":
        if "--no-json-for-test" in argv:
            argv.remove("--no-json-for-test")
        elif "--json" not in argv:
            argv.append("--json")
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


FAST = ("--seeds", "1", "--preset", "ci", "--num-threads", "1")


def test_happy_path_with_human(files, capsys):
    out = files / "res" / "metrics.json"
    metrics = ["ratio", "error", "biasamp", "lic"] + (["quality"] if shutil.which("java") else [])
    rc, stdout, _ = run(capsys, "evaluate-captions", "--pred", files / "pred.json",
                        "--gender", files / "labels.csv", "--human", files / "human.json",
                        "--metrics", *metrics, "--biasamp-min-count", "1", "--out", out, *FAST)
    assert rc == 0
    res = json.loads(out.read_text())
    assert json.loads(stdout) == res
    for k in ("LIC", "LIC_M", "LIC_D"):
        assert isinstance(res[k], float) and isinstance(res[f"{k}_std"], float)
        # one LIC seed: no interval, and n says so
        assert res[f"{k}_n"] == 1 and res[f"{k}_ci95"] is None, k
    assert res["LIC"] == pytest.approx(res["LIC_M"] - res["LIC_D"])
    assert res["LIC_details"]["n_images"] == 2 * N
    assert res["LIC_details"]["n_images_by_gender"] == {"female": N, "male": N}
    assert res["LIC_details"]["preset"] == "ci" and res["LIC_details"]["n_human_indices"] == 2
    assert res["Error"] == 0.0
    assert res["Ratio"]["n_man"] == N and res["Ratio"]["n_woman"] == N
    assert isinstance(res["BiasAmp"]["ba"], (float, str))
    if "quality" in metrics:
        assert set(res["quality"]) >= {"BLEU-4", "CIDEr", "METEOR"}
        assert res["quality"]["n_images"] == 2 * N + 2     # quality uses unlabelled images too
    inp = res["inputs"]
    assert inp["gender_column"] == "bb_gender"
    assert inp["n_label_rows_ignored"] == 1                # the Unsure row
    assert inp["n_predictions_without_label"] == 2
    assert inp["predictions_without_label_sample"] == [2 * N, 2 * N + 1]


def test_biasamp_reference_from_train_captions(files, capsys):
    # Training captions D: kitchen 3 f : 1 m, dog 1 f : 3 m (b_male(dog) = 0.75).
    anns = [{"id": n, "image_id": 100 + n, "caption": c} for n, c in enumerate(
        ["a woman in a kitchen"] * 3 + ["a man in a kitchen"] + ["a woman with a dog"]
        + ["a man with a dog"] * 3)]
    (files / "train.json").write_text(json.dumps({"annotations": anns}))
    rc, stdout, err = run(capsys, "evaluate-captions", "--pred", files / "pred.json",
                          "--gender", files / "labels.csv", "--human", files / "human.json",
                          "--train-captions", files / "train.json", "--metrics", "biasamp",
                          "--biasamp-min-count", "1")
    assert rc == 0
    res = json.loads(stdout)
    ba = res["BiasAmp"]
    # L = {kitchen, dog} from D (dress/tie/cat/car of the test captions are not in D). Model:
    # dog with N women and N men -> b_hat_male = 0.5: (0.5 - 0.75); kitchen never said -> no
    # term; Eq. 2.3 divides by |L| = 2 -> -12.5
    assert ba["reference"] == "train" and ba["n_reference_captions"] == 8
    assert ba["n_words"] == 2 and ba["n_undefined"] == 1
    assert ba["ba"] == pytest.approx(-12.5)
    assert "training captions" in res["inputs"]["biasamp_reference"]
    # the null a user reads it against: the evaluated images' own human captions, per index
    nul = ba["human_null"]
    assert nul["n_images"] > 0 and nul["n_indices"] == len(nul["per_index"]) >= 1
    assert min(nul["per_index"]) == nul["min"] <= nul["ba"] <= nul["max"]
    # without --train-captions the test references are used, and the output says so
    rc, stdout, err = run(capsys, "evaluate-captions", "--pred", files / "pred.json",
                          "--gender", files / "labels.csv", "--human", files / "human.json",
                          "--metrics", "biasamp", "--biasamp-min-count", "1")
    res = json.loads(stdout)
    assert res["BiasAmp"]["reference"] == "test_human"
    assert "--train-captions" in res["inputs"]["biasamp_reference"]
    assert "BiasAmp reference" in err


def test_missing_human_reports_skipped(files, capsys):
    rc, stdout, err = run(capsys, "evaluate-captions", "--pred", files / "pred.json",
                          "--gender", files / "labels.csv", *FAST)
    assert rc == 0
    res = json.loads(stdout)
    assert isinstance(res["LIC_M"], float)
    for k in ("LIC_D", "LIC", "quality"):
        assert res[k] == {"skipped": "needs --human"}
    assert res["BiasAmp"] == {"skipped": "needs --train-captions (or --human)"}
    assert "LIC_D_std" not in res
    assert isinstance(res["Error"], float)
    assert "2 of 18 predicted image ids have no female/male label" in err


def test_max_human_captions_caps_the_lic_d_indices(files, capsys):
    """--max-human-captions K: LIC_D averages over the first K human-caption indices only
    (params lic.max_human_captions at the ci scale)."""
    out = files / "k1.json"
    rc, _, _ = run(capsys, "evaluate-captions", "--pred", files / "pred.json",
                   "--gender", files / "labels.csv", "--human", files / "human.json",
                   "--metrics", "lic", "--max-human-captions", "1", "--out", out, *FAST)
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["LIC_details"]["n_human_indices"] == 1
    assert all(len(s["LIC_D_per_index"]) == 1 for s in res["LIC_details"]["per_seed"])
    with pytest.raises(SystemExit):
        cli.main(["evaluate-captions", "--pred", str(files / "pred.json"), "--gender",
                  str(files / "labels.csv"), "--max-human-captions", "0"])


def test_gender_column_named_gender_and_too_few_for_lic(tmp_path, capsys):
    (tmp_path / "p.json").write_text(json.dumps([{"image_id": 1, "caption": "A man."},
                                                 {"image_id": 2, "caption": "A woman."}]))
    (tmp_path / "g.csv").write_text("image_id,gender\n1,male\n2,Female\n")
    rc, stdout, _ = run(capsys, "evaluate-captions", "--pred", tmp_path / "p.json",
                        "--gender", tmp_path / "g.csv", "--metrics", "ratio", "lic", *FAST)
    assert rc == 0
    res = json.loads(stdout)
    assert "balanced split" in res["LIC_M"]["skipped"]
    assert res["Ratio"]["ratio"] == 1.0 and res["inputs"]["gender_column"] == "gender"


@pytest.mark.parametrize("content,problem", [
    ('[{"image_id": 1, "caption": "a"', "invalid or truncated JSON"),
    ("", "empty"),
    ("[]", "no predictions"),
    ('{"image_id": 1}', "expected a JSON list"),
    ('[{"image_id": "x", "caption": "a"}]', "not an integer"),
    ('[{"image_id": 1}]', "'caption'"),
    ('[{"image_id": 1, "caption": "a"}, {"image_id": 1, "caption": "b"}]', "duplicate"),
])
def test_malformed_predictions_exit_2_naming_file(files, capsys, content, problem):
    bad = files / "bad_pred.json"
    bad.write_text(content)
    rc, _, err = run(capsys, "evaluate-captions", "--pred", bad, "--gender",
                     files / "labels.csv", "--metrics", "ratio")
    assert rc == 2
    assert str(bad) in err and problem in err


@pytest.mark.parametrize("content,problem", [
    ("image_id,skin\n1,Light\n", "missing column 'gender' or 'bb_gender'"),
    ("id,gender\n1,male\n", "missing column 'image_id'"),
    ("", "empty"),
    ("image_id,gender\n", "no rows"),
    ("image_id,gender\nabc,male\n", "not an integer"),
    ("image_id,gender\n1,male\n1,female\n", "conflicting"),
    ("image_id,gender\n1,unsure\n", "no female/male labels"),
])
def test_bad_labels_exit_2_naming_file(files, capsys, content, problem):
    bad = files / "bad.csv"
    bad.write_text(content)
    rc, _, err = run(capsys, "evaluate-captions", "--pred", files / "pred.json", "--gender", bad,
                     "--metrics", "ratio")
    assert rc == 2
    assert str(bad) in err and problem in err


def test_no_overlap_between_predictions_and_labels_is_an_error(files, capsys):
    (files / "other.csv").write_text("image_id,gender\n900,male\n901,female\n")
    rc, _, err = run(capsys, "evaluate-captions", "--pred", files / "pred.json", "--gender",
                     files / "other.csv", "--metrics", "ratio")
    assert rc == 2 and "none of the 18 image ids" in err and "other.csv" in err


def test_bad_human_file_exit_2(files, capsys):
    (files / "h.json").write_text('{"images": []}')
    rc, _, err = run(capsys, "evaluate-captions", "--pred", files / "pred.json", "--gender",
                     files / "labels.csv", "--human", files / "h.json", "--metrics", "ratio")
    assert rc == 2 and "h.json" in err and "annotations" in err


def test_usage_errors_exit_2(files):
    with pytest.raises(SystemExit) as e:
        cli.main(["evaluate-captions", "--pred", str(files / "pred.json")])   # no --gender
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        cli.main(["evaluate-captions", "--pred", "p", "--gender", "g", "--seeds", "0"])
    assert e.value.code == 2


def test_subcommand_registry_is_extensible(capsys, monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", dict(cli.COMMANDS))

    @cli.register_command("hello", help="say hello")
    def setup(p):
        p.add_argument("--name", default="x")
        return lambda args: print(f"hello {args.name}") or 0

    assert cli.main(["hello", "--name", "libra"]) == 0
    assert capsys.readouterr().out.strip() == "hello libra"
    assert "evaluate-captions" in cli.COMMANDS


def test_plugin_command_from_an_entry_point(capsys, monkeypatch):
    """A separate package adds a command through the ``biaslab.commands`` entry point group,
    with no edit here."""
    import importlib.metadata
    import types
    mod = types.ModuleType("biaslab_hello_plugin")

    def setup(p):
        """Say hello from a plug-in."""
        p.add_argument("--name", default="x")
        return lambda args: print(f"plug-in hello {args.name}") or 0
    mod.setup = setup
    monkeypatch.setitem(sys.modules, "biaslab_hello_plugin", mod)
    ep = importlib.metadata.EntryPoint(name="hello-plugin", value="biaslab_hello_plugin:setup",
                                       group=cli.ENTRY_POINT_GROUP)
    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda **kw: [ep] if kw.get("group") == cli.ENTRY_POINT_GROUP
                        else real(**kw))
    assert cli.plugin_commands()["hello-plugin"][0] == "Say hello from a plug-in."
    assert cli.main(["hello-plugin", "--name", "x1"]) == 0
    assert capsys.readouterr().out.strip() == "plug-in hello x1"


def test_nothing_imports_the_cli():
    """The CLI sits on top of the library: no module of ``biaslab/`` (but ``biaslab/cli.py``
    itself and the console entry point above it, ``biaslab/__main__.py``) and no stage script
    imports ``biaslab.cli``."""
    import ast
    root = Path(__file__).resolve().parents[1]
    bad = []
    for f in sorted([*root.glob("biaslab/**/*.py"), *root.glob("stages/*.py")]):
        if f in (root / "biaslab" / "cli.py", root / "biaslab" / "__main__.py"):
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if "biaslab.cli" in names:
                bad.append(f"{f.relative_to(root)}:{node.lineno}")
    assert bad == [], bad


def test_console_script_exit_code(files):
    exe = Path(sys.executable).with_name("biaslab")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "biaslab.cli"]
    (files / "bad.json").write_text("{not json")
    p = subprocess.run(cmd + ["evaluate-captions", "--pred", str(files / "bad.json"),
                              "--gender", str(files / "labels.csv")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "bad.json" in p.stderr


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer
    d = tmp_path_factory.mktemp("cli_bert")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "in", "with", "dress", "tie",
             "dog", "wearing", "near", "cat", "car"]
    BertTokenizer(vocab={w: i for i, w in enumerate(words)}).save_pretrained(d)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=32)).save_pretrained(d)
    return d


def test_bert_pre_classifier_with_local_model(files, capsys, tiny_bert):
    rc, stdout, _ = run(capsys, "evaluate-captions", "--pred", files / "pred.json",
                        "--gender", files / "labels.csv", "--human", files / "human.json",
                        "--metrics", "lic", "--classifier", "bert_pre", "--bert-model", tiny_bert,
                        *FAST)
    assert rc == 0
    res = json.loads(stdout)
    assert isinstance(res["LIC"], float)
    assert res["LIC_details"]["classifier"] == "bert_pre"
    assert res["LIC_details"]["config"]["model"] == str(tiny_bert)
    assert res["LIC_details"]["config"]["freeze"] is True


def test_unloadable_bert_model_exit_2(files, capsys, tmp_path):
    rc, _, err = run(capsys, "evaluate-captions", "--pred", files / "pred.json",
                     "--gender", files / "labels.csv", "--classifier", "bert_ft",
                     "--bert-model", tmp_path / "empty_dir_without_model", *FAST)
    assert rc == 2 and "cannot be loaded" in err


# --------------------------------------------------------------------------------------------
# the README's commands through the installed console script

ROOT = Path(__file__).resolve().parents[1]


def _console() -> list[str]:
    exe = Path(sys.executable).with_name("biaslab")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "biaslab.cli"]


def _env() -> dict:
    """The subprocess imports this checkout's ``biaslab`` (PYTHONPATH first)."""
    import os
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def readme_commands() -> list[list[str]]:
    """Every ``biaslab ...`` command of the bash blocks of README.md and docs/*.md (the
    documentation the README links), continuation lines joined."""
    import re
    import shlex
    text = "\n".join(p.read_text() for p in [ROOT / "README.md",
                                              *sorted((ROOT / "docs").glob("*.md"))])
    cmds = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#")[0].strip()
            if line.startswith("biaslab "):
                cmds.append(shlex.split(line)[1:])
    return cmds


def test_readme_lists_both_commands():
    assert {c[0] for c in readme_commands()} == {"evaluate-captions", "libra", "plan",
                                                 "reprocheck"}


def test_console_script_registers_every_command_and_shows_version_and_defaults():
    p = subprocess.run(_console() + ["--version"], capture_output=True, text=True, env=_env(),
                       timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "biaslab 0.1.0"
    p = subprocess.run(_console() + ["libra", "debias", "--help"], capture_output=True,
                       text=True, env=_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "masking seed (default: 0)" in p.stdout
    assert "(default: 64)" in p.stdout          # --batch-size had no help text


@pytest.fixture(scope="module")
def dcg_model(tmp_path_factory):
    from tests.test_libra_dcg import CAPS, TINY, _write_images
    import numpy as np
    from biaslab.models.features import load_image_encoder
    from biaslab.libra import dcg as D
    root = tmp_path_factory.mktemp("readme")
    _write_images(root / "shared" / "coco-mini", [1, 2, 3, 4], "coco")
    enc = load_image_encoder("efficientnet_lite0", num_threads=1)
    feats = enc.encode([root / "shared" / "coco-mini" / "images" / "val2017" / f"{i:012d}.jpg"
                        for i in (1, 2, 3, 4)])
    m = D.train_dcg(CAPS * 4, CAPS * 4, np.concatenate([feats] * 4),
                    D.DCGSettings(**{**TINY, "epochs": 2}, eta=0.0), seed=0)
    (root / "work" / "data" / "libra").mkdir(parents=True)
    D.save(m, root / "work" / "data" / "libra" / "dcg")
    return root / "work", CAPS


def _published_style(files, dst):
    """pred.json and labels.csv as one published captioner's file: JSON Lines, gzip, with
    image_id, caption, bb_gender and bb_skin per line (../shared/published-captions)."""
    import gzip
    labels = {int(r.split(",")[0]): r.split(",")[1:]
              for r in (files / "labels.csv").read_text().splitlines()[1:]}
    with gzip.open(dst, "wt", encoding="utf-8") as f:
        for p in json.loads((files / "pred.json").read_text()):
            g, s = labels.get(p["image_id"], ["", ""])
            f.write(json.dumps({**p, "bb_gender": g, "bb_skin": s, "split": "val"}) + "\n")


def test_readme_commands_run_through_the_console_script(files, dcg_model):
    """Each README command, verbatim, in a directory holding the files it names; options that
    would make it slow (paper LIC: minutes) are overridden by appending them."""
    work, caps = dcg_model
    shutil.copy(files / "pred.json", work / "results.json")
    shutil.copy(files / "labels.csv", work / "labels.csv")
    shutil.copy(files / "human.json", work / "captions_val2017.json")
    _published_style(files, work / "nic.race.jsonl.gz")
    fast = {"evaluate-captions": ["--metrics", "ratio", "error", "biasamp",
                                  "--biasamp-min-count", "1"],
            "libra": ["--threads", "1"], "plan": [], "reprocheck": []}
    record = _tiny_record(work / "record")       # a committed run for reprocheck, branch main
    for argv in readme_commands():
        if argv[0] == "reprocheck":              # in the repository it checks
            p = subprocess.run(_console() + argv, cwd=record, capture_output=True, text=True,
                               env=_env(), timeout=300)
            assert p.returncode == 0, (argv, p.stdout, p.stderr)
            if "--json" in argv:
                assert json.loads(p.stdout)["ok"] is True
            continue
        if argv[0] == "libra":
            (work / "results.json").write_text(json.dumps(
                [{"image_id": i, "caption": c} for i, c in zip((1, 2, 3, 4), caps)]))
        else:   # a libra command before it rewrote results.json
            shutil.copy(files / "pred.json", work / "results.json")
        p = subprocess.run(_console() + argv + fast[argv[0]], cwd=work, capture_output=True,
                           text=True, env=_env(), timeout=300)
        assert p.returncode == 0, (argv, p.stderr)
        if argv[0] == "plan":               # prints a table, writes nothing
            assert "generate" in p.stdout and "paper 000" in p.stdout
            continue
        out = json.loads((work / argv[argv.index("--out") + 1]).read_text())
        if argv[0] == "libra":
            assert [r["image_id"] for r in out] == [1, 2, 3, 4]
        elif "gender_skin" in argv:   # the fixture's labels are all Light: two groups
            assert "skipped" in out["Ratio"] and "skipped" in out["BiasAmp"]
            assert {g: v["n"] for g, v in out["Error"]["per_group"].items()} == {
                "female_light": N, "male_light": N}
        else:
            assert out["Ratio"]["n_man"] == N and "BiasAmp" in out


def test_partial_result_file_keeps_what_was_computed_when_lic_crashes(files, capsys,
                                                                      monkeypatch):
    import biaslab.metrics.lic as L
    out = files / "m.json"
    args = ["evaluate-captions", "--pred", files / "pred.json", "--gender", files / "labels.csv",
            "--metrics", "ratio", "error", "lic", "--out", out, *FAST]

    def crash(*a, **k):
        raise RuntimeError("killed in the middle of LIC")

    monkeypatch.setattr(L, "lic_details", crash)
    with pytest.raises(RuntimeError):
        run(capsys, *args)
    part = json.loads((files / "m.json.partial").read_text())
    assert part["partial"] is True and part["pending"] == ["LIC"]
    assert part["Ratio"]["n_man"] == N and part["Error"] == 0.0 and "LIC" not in part
    assert not out.exists()
    monkeypatch.undo()
    rc, _, _ = run(capsys, *args)
    assert rc == 0 and isinstance(json.loads(out.read_text())["LIC_M"], float)
    assert not (files / "m.json.partial").exists()          # removed once the result is in


def test_truncated_model_safetensors_is_an_input_error(dcg_model, tmp_path, capsys):
    work, caps = dcg_model
    model = tmp_path / "dcg"
    shutil.copytree(work / "data" / "libra" / "dcg", model)
    weights = sorted(model.rglob("*.safetensors"))[0]
    weights.write_bytes(weights.read_bytes()[:100])
    (tmp_path / "p.json").write_text(json.dumps([{"image_id": 1, "caption": caps[0]}]))
    rc, _, err = run(capsys, "libra", "debias", "--pred", tmp_path / "p.json", "--images",
                     work.parent / "shared" / "coco-mini", "--model", model,
                     "--out", tmp_path / "o.json")
    assert rc == 2
    assert err.startswith(f"biaslab libra: error: {weights}: truncated or corrupt safetensors")
    assert not (tmp_path / "o.json").exists()


def test_partial_file_grows_seed_by_seed(files, capsys, monkeypatch):
    """A crash in the second LIC seed keeps the first seed's record in <out>.partial."""
    import biaslab.metrics.lic as L
    real_score = L._score
    calls = []

    def score_then_crash(*a, **k):
        calls.append(1)
        if len(calls) > 1:          # without --human a seed trains one classifier (LIC_M)
            raise RuntimeError("killed in seed 1")
        return real_score(*a, **k)

    monkeypatch.setattr(L, "_score", score_then_crash)
    out = files / "m.json"
    with pytest.raises(RuntimeError):
        run(capsys, "evaluate-captions", "--pred", files / "pred.json", "--gender",
            files / "labels.csv", "--metrics", "lic", "--out", out, *FAST, "--seeds", "2")
    part = json.loads((files / "m.json.partial").read_text())
    assert [r["seed"] for r in part["LIC_seeds_done"]] == [0]
    assert isinstance(part["LIC_seeds_done"][0]["LIC_M"], float)


# evaluate-captions defaults: fast ci preset, progress on a terminal only


def _evaluate_args(*extra):
    return cli.build_parser().parse_args(["evaluate-captions", "--pred", "p.json",
                                          "--gender", "g.csv", *extra])


def test_evaluate_defaults_ci_preset_and_auto_progress():
    a = _evaluate_args()
    assert a.preset == "ci" and a.progress is None
    assert _evaluate_args("--paper").preset == "paper"
    assert _evaluate_args("--preset", "paper").preset == "paper"   # old flag still works
    assert _evaluate_args("--progress").progress is True
    assert _evaluate_args("--no-progress").progress is False


def test_progress_enabled_follows_the_terminal(monkeypatch):
    from biaslab.runtime import progress
    monkeypatch.setattr(progress, "stderr_is_tty", lambda: True)
    assert cli.progress_enabled(None) is True and cli.progress_enabled(False) is False
    monkeypatch.setattr(progress, "stderr_is_tty", lambda: False)
    assert cli.progress_enabled(None) is False and cli.progress_enabled(True) is True


def test_evaluate_passes_the_defaults_through(files, capsys, monkeypatch):
    seen = {}

    def fake(*args, **kw):
        seen["preset"], seen["progress"] = args[6], args[9]
        return {}
    monkeypatch.setattr(cli, "evaluate_captions", fake)
    rc, _, _ = run(capsys, "evaluate-captions", "--pred", files / "pred.json", "--gender",
                   files / "labels.csv", "--metrics", "ratio")
    assert rc == 0 and seen == {"preset": "ci", "progress": False}   # capsys: not a terminal
    run(capsys, "evaluate-captions", "--pred", files / "pred.json", "--gender",
        files / "labels.csv", "--metrics", "ratio", "--paper", "--progress")
    assert seen == {"preset": "paper", "progress": True}


def test_evaluate_help_documents_the_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["evaluate-captions", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "ci = fast settings (default)" in out and "--paper" in out
    assert "--no-progress" in out and "on when stderr is a terminal" in out


def test_components_lists_the_registry(capsys):
    """``biaslab components``: every registered component with its label."""
    assert cli.main(["components", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in out["datasets"]][:6] == ["original", "oversample", "subsample",
                                                       "augment", "synthetic", "matched"]
    libra = out["postprocessors"][0]
    assert (libra["name"], libra["row"], libra["label"]) == ("LIBRA", "original+LIBRA",
                                                            "Original + LIBRA")
    assert cli.main(["components", "--kind", "methods"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("methods:") and "GroupDRO" in text and "datasets:" not in text


def _skin_files(tmp_path, n=12):
    """n dark-skinned and n light-skinned images (bb_skin); the dark ones' captions say "man",
    the light ones' "woman" (a planted word cue); two Unsure rows and one image labelled for
    gender only."""
    pred, anns, rows = [], [], ["image_id,bb_gender,bb_skin"]
    for i in range(2 * n):
        dark = i < n
        who = "man" if dark else "woman"
        pred.append({"image_id": i, "caption": f"a {who} riding a bike on a street"})
        anns.append({"id": i, "image_id": i, "caption": f"a person riding a bike on a street"})
        rows.append(f"{i},Male,{'Dark' if dark else 'LIGHT '}")
    rows += ["100,Female,Unsure", "101,Male,", "102,Female,Both"]
    (tmp_path / "pred.json").write_text(json.dumps(pred))
    (tmp_path / "human.json").write_text(json.dumps({"annotations": anns}))
    (tmp_path / "skin.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def test_skin_tone_lic_reads_unmasked_captions_and_skips_the_gender_word_metrics(
        tmp_path, capsys):
    """--attribute skin is the thesis' racial-bias LIC (sec. 2.5.3,
    Table 2.3: captions NOT masked; groups dark/light from bb_skin). A planted word cue (dark:
    "man", light: "woman") is readable because nothing is masked; the same captions scored for
    gender (dark -> Male, light -> Female) have the cue masked, so the attacker is at chance
    (25) there and well above it here. The human captions carry no cue (LIC_D = 25 up to the
    attacker's calibration). Ratio, Error and BiasAmp count gender words: skipped, not
    computed."""
    f = _skin_files(tmp_path, n=24)
    common = ("--pred", f / "pred.json", "--seeds", "2", "--preset", "ci", "--num-threads", "1")
    rc, stdout, err = run(capsys, "evaluate-captions", "--labels", f / "skin.csv",
                          "--attribute", "skin", "--human", f / "human.json",
                          "--metrics", "ratio", "error", "biasamp", "lic", *common)
    assert rc == 0, err
    skin = json.loads(stdout)
    for k in ("Ratio", "Error", "BiasAmp"):
        assert "not defined for attribute 'skin'" in skin[k]["skipped"], k
    assert skin["LIC_details"]["n_images_by_gender"] == {"dark": 24, "light": 24}
    inp = skin["inputs"]
    assert inp["attribute"] == "skin" and inp["label_column"] == "bb_skin"
    assert inp["n_label_rows_ignored"] == 3 and "gender_column" not in inp
    assert inp["n_labelled_predictions_by_group"] == {"dark": 24, "light": 24}

    rows = (f / "skin.csv").read_text().splitlines()[1:49]
    (f / "g.csv").write_text("image_id,bb_gender\n" + "".join(
        f"{r.split(',')[0]},{'Male' if 'Dark' in r else 'Female'}\n" for r in rows))
    rc, stdout, _ = run(capsys, "evaluate-captions", "--gender", f / "g.csv",
                        "--metrics", "lic", *common)
    assert rc == 0
    gender = json.loads(stdout)
    assert "attribute" not in gender["inputs"]
    assert gender["inputs"]["gender_column"] == "bb_gender"
    # unmasked cue read (skin) vs masked cue gone (gender), same captions and attacker
    assert gender["LIC_M"] == pytest.approx(25, abs=8), gender["LIC_M"]
    assert skin["LIC_M"] - gender["LIC_M"] > 15, (skin["LIC_M"], gender["LIC_M"])
    assert skin["LIC_D"] == pytest.approx(25, abs=8), skin["LIC_D"]
    # every LIC number with its 95 % CI over the 2 LIC seeds: t(0.975, 1) * std / sqrt(2)
    from scipy.stats import t
    for k in ("LIC", "LIC_M", "LIC_D"):
        assert skin[f"{k}_n"] == 2
        assert skin[f"{k}_ci95"] == pytest.approx(t.ppf(0.975, 1) * skin[f"{k}_std"] / 2 ** 0.5)


def test_skin_labels_errors_name_the_file(tmp_path, capsys):
    (tmp_path / "p.json").write_text(json.dumps([{"image_id": 1, "caption": "a man"}]))
    (tmp_path / "g.csv").write_text("image_id,bb_gender\n1,Male\n")
    rc, _, err = run(capsys, "evaluate-captions", "--pred", tmp_path / "p.json",
                     "--labels", tmp_path / "g.csv", "--attribute", "skin", "--metrics", "lic")
    assert rc == 2 and "g.csv" in err and "'skin' or 'bb_skin'" in err
    (tmp_path / "s.csv").write_text("image_id,bb_skin\n1,Unsure\n")
    rc, _, err = run(capsys, "evaluate-captions", "--pred", tmp_path / "p.json",
                     "--labels", tmp_path / "s.csv", "--attribute", "skin", "--metrics", "lic")
    assert rc == 2 and "no dark/light labels" in err


from hypothesis import given, settings, strategies as st  # noqa: E402

_LABEL = st.sampled_from(["Dark", "dark", " LIGHT", "Light ", "Unsure", "Both", "", "Male",
                          "Female", "darkish"])


@settings(max_examples=60, deadline=None)
@given(st.lists(_LABEL, min_size=1, max_size=12), st.sampled_from(["skin", "bb_skin"]))
def test_group_labels_keep_exactly_the_attributes_groups(labels, column):
    """read_group_labels (a parser): an id is kept iff its value, stripped and lower-cased, is
    one of the attribute's groups; every other row is counted as ignored."""
    import tempfile

    from biaslab.metrics.files import read_group_labels
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "l.csv"
        f.write_text(f"image_id,{column}\n" + "".join(f"{i},{v}\n" for i, v in enumerate(labels)))
        out, info = read_group_labels(f, "skin")
    want = {i: v.strip().lower() for i, v in enumerate(labels)
            if v.strip().lower() in ("dark", "light")}
    assert out == want
    assert info["n_ignored"] == len(labels) - len(want) and info["column"] == column
    assert info["n_by_group"] == {g: sum(v == g for v in want.values())
                                  for g in ("dark", "light")}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_LABEL, _LABEL), min_size=1, max_size=12))
def test_gender_skin_labels_are_the_intersection_of_both_parsers(rows):
    """read_group_labels(..., "gender_skin"): an id has group <gender>_<skin> iff both its
    gender and its skin value parse (each as the one-attribute parser does); every other row
    is ignored."""
    import tempfile

    from biaslab.metrics.files import read_group_labels
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "l.csv"
        f.write_text("image_id,bb_gender,bb_skin\n" + "".join(
            f"{i},{g},{s}\n" for i, (g, s) in enumerate(rows)))
        out, info = read_group_labels(f, "gender_skin")
    want = {i: f"{g.strip().lower()}_{s.strip().lower()}" for i, (g, s) in enumerate(rows)
            if g.strip().lower() in ("female", "male") and s.strip().lower() in ("dark", "light")}
    assert out == want
    assert info["n_ignored"] == len(rows) - len(want)
    assert info["column"] == "bb_gender+bb_skin"
    assert sum(info["n_by_group"].values()) == len(want)


def test_a_repeated_row_of_a_grouped_image_is_not_counted_as_ignored(tmp_path):
    """As the one-attribute parser: a second identical row of an image is read, not ignored
    (the intersection counted rows minus groups, so a duplicate looked ignored)."""
    from biaslab.metrics.files import read_group_labels
    f = tmp_path / "l.csv"
    f.write_text("image_id,bb_gender,bb_skin\n1,Female,Dark\n1,Female,Dark\n2,Male,Unsure\n")
    out, info = read_group_labels(f, "gender_skin")
    assert out == {1: "female_dark"} and info["n_ignored"] == 1 and info["n_rows"] == 3
    _, one = read_group_labels(f, "skin")
    assert one["n_ignored"] == 1


def test_an_unknown_attribute_is_refused_by_the_library():
    from biaslab.metrics.evaluate import evaluate_captions
    from biaslab.metrics.files import read_group_labels
    with pytest.raises(ValueError, match="unknown attribute 'age'; known: \\['gender', 'skin', 'gender_skin'\\]"):
        evaluate_captions({1: "a man"}, {1: "male"}, attribute="age")
    with pytest.raises(ValueError, match="unknown attribute 'age'"):
        read_group_labels("nowhere.csv", "age")


def _gender_skin_files(tmp_path, n, coat: bool):
    pred, anns, rows = [], [], ["image_id,bb_gender,bb_skin"]
    for i in range(4 * n):
        g, s = ("Female", "Male")[i // (2 * n)], ("Dark", "Light")[(i // n) % 2]
        who = "woman" if g == "Female" else "man"
        cue = (" in a black coat" if s == "Dark" else " in a white coat") if coat else ""
        pred.append({"image_id": i, "caption": f"a {who}{cue} riding a bike"})
        anns.append({"id": i, "image_id": i, "caption": "a person riding a bike"})
        rows.append(f"{i},{g},{s}")
    rows += ["500,Female,Unsure", "501,,Dark"]
    (tmp_path / "pred.json").write_text(json.dumps(pred))
    (tmp_path / "human.json").write_text(json.dumps({"annotations": anns}))
    (tmp_path / "gs.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def test_gender_x_skin_lic_has_four_groups_and_masks_gender_words(tmp_path, capsys):
    """--attribute gender_skin reads bb_gender and bb_skin; an image's group is
    <gender>_<skin> where both are valid (2 rows ignored). LIC trains a 4-way attacker on
    gender-masked captions. Captions whose only cue is the gender word read as chance
    (about 100 / 16 = 6.25: the word is masked); adding a skin cue (coat colour) lifts LIC_M
    above the cue-free human captions' LIC_D."""
    groups = ("female_dark", "female_light", "male_dark", "male_light")
    common = ("--attribute", "gender_skin", "--metrics", "ratio", "error", "lic", "--seeds", "2",
              "--preset", "ci", "--num-threads", "1")
    res = {}
    for coat in (False, True):
        d = tmp_path / ("coat" if coat else "words")
        d.mkdir()
        f = _gender_skin_files(d, 60, coat)
        rc, stdout, err = run(capsys, "evaluate-captions", "--pred", f / "pred.json",
                              "--labels", f / "gs.csv", "--human", f / "human.json", *common)
        assert rc == 0, err
        res[coat] = json.loads(stdout)
    out = res[True]
    assert out["LIC_details"]["n_images_by_gender"] == {k: 60 for k in groups}
    assert out["inputs"]["label_column"] == "bb_gender+bb_skin"
    assert out["inputs"]["n_label_rows_ignored"] == 2
    assert "not defined for attribute 'gender_skin'" in out["Ratio"]["skipped"]
    # Error per group: every caption names the image's own gender, so 0 in every group
    assert {g: v["Error"] for g, v in out["Error"]["per_group"].items()} == {k: 0.0
                                                                         for k in groups}
    assert out["Error"]["pooled"] == 0.0 and out["Error"]["worst_group_gap"]["gap"] == 0.0
    assert out["LIC_details"]["words"] == "lic"          # the gender words are masked
    assert res[False]["LIC_M"] == pytest.approx(6.25, abs=4), res[False]["LIC_M"]
    assert out["LIC_M"] > out["LIC_D"] + 3, (out["LIC_M"], out["LIC_D"])


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def _tiny_record(root):
    """A git repository (branch main) with one stage's committed dvc.lock and metrics file."""
    (root / "stages").mkdir(parents=True)
    (root / "metrics").mkdir()
    (root / "stages/train.py").write_text("pass\n")
    rec = {"acc": {"mean": 70.0, "ci95": 2.0, "lo": 68.0, "hi": 72.0, "verdict": "holds"}}
    (root / "metrics/train.json").write_text(json.dumps(rec))
    (root / "dvc.lock").write_text(
        "schema: '2.0'\nstages:\n  train:\n    cmd: python stages/train.py\n    deps:\n"
        "    - path: stages/train.py\n      md5: aaa\n    outs:\n"
        "    - path: metrics/train.json\n      md5: bbb\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "record")
    return root


def test_reprocheck_passes_a_run_of_the_record_and_refuses_one_of_other_code(tmp_path, capsys):
    """``biaslab reprocheck`` on a run equal to the committed record says so (exit 0); a run
    within tolerance passes; one whose code differs from the lock's compares nothing and
    exits 1 instead of claiming it reproduced."""
    _tiny_record(tmp_path)
    rec = json.loads((tmp_path / "metrics/train.json").read_text())
    lock = (tmp_path / "dvc.lock").read_text()
    assert cli.main(["reprocheck", "--repo", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith("reproduced")
    rec["acc"]["mean"] = 70.9                                 # within 0.5 x half-width 2.0
    (tmp_path / "metrics/train.json").write_text(json.dumps(rec))
    (tmp_path / "dvc.lock").write_text(lock.replace("bbb", "ccc"))
    assert cli.main(["reprocheck", "--repo", str(tmp_path)]) == 0
    rec["acc"]["mean"] = 71.1                                 # beyond it
    (tmp_path / "metrics/train.json").write_text(json.dumps(rec))
    assert cli.main(["reprocheck", "--repo", str(tmp_path)]) == 1
    assert "acc.mean" in capsys.readouterr().out
    (tmp_path / "dvc.lock").write_text(lock.replace("aaa", "zzz"))   # other code
    assert cli.main(["reprocheck", "--repo", str(tmp_path)]) == 1
    assert "nothing compared" in capsys.readouterr().out


def test_the_published_captioners_json_lines_read_as_predictions_and_labels(files, capsys):
    """A published captioner's file (``<model>.gender.jsonl.gz``: image_id, caption,
    bb_gender, bb_skin per line) is both --pred and --gender, as shipped: gzip, JSON Lines,
    and the same numbers as the JSON + CSV pair of the same captions and labels."""
    import gzip
    pred = json.loads((files / "pred.json").read_text())
    labels = {int(r.split(",")[0]): r.split(",")[1]
              for r in (files / "labels.csv").read_text().splitlines()[1:]}
    lines = [json.dumps({**p, "bb_gender": labels.get(p["image_id"], ""), "bb_skin": "Light",
                         "split": "val"}) for p in pred]
    with gzip.open(files / "m.gender.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n\n")          # a trailing blank line is skipped
    gz = files / "m.gender.jsonl.gz"
    rc, out_gz, _ = run(capsys, "evaluate-captions", "--pred", gz, "--gender", gz,
                        "--metrics", "ratio", "error")
    assert rc == 0
    rc, out_csv, _ = run(capsys, "evaluate-captions", "--pred", files / "pred.json",
                         "--gender", files / "labels.csv", "--metrics", "ratio", "error")
    assert rc == 0
    a, b = json.loads(out_gz), json.loads(out_csv)
    assert a["Ratio"] == b["Ratio"] and a["Error"] == b["Error"]
    assert a["Ratio"]["n_images"] == 2 * N


def test_a_broken_json_lines_or_gzip_file_is_one_line_naming_it(files, capsys):
    (files / "bad.jsonl").write_text('{"image_id": 1, "caption": "a man"}\n[1, 2]\n')
    rc, _, err = run(capsys, "evaluate-captions", "--pred", files / "bad.jsonl",
                     "--gender", files / "labels.csv", "--metrics", "ratio")
    assert rc == 2 and "bad.jsonl" in err and "line 2 is not a JSON object" in err, err
    (files / "bad.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00 not gzip at all")
    rc, _, err = run(capsys, "evaluate-captions", "--pred", files / "bad.jsonl.gz",
                     "--gender", files / "labels.csv", "--metrics", "ratio")
    assert rc == 2 and "bad.jsonl.gz" in err and "not a readable gzip file" in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_the_gender_reading_gives_cis_the_labels_ratio_and_both_gender_captions(files, capsys):
    """Hand-computed: 8 women and 8 men labelled, every caption names the annotated gender,
    except image 0's, which names both: Ratio = 8 man / 7 woman captions, the labels' own
    8 / 8 = 1, Error 0 (a caption naming both is no mistake), one caption naming both."""
    pred = json.loads((files / "pred.json").read_text())
    pred[0]["caption"] = "A woman and a man with a dog."
    (files / "pred.json").write_text(json.dumps(pred))
    rc, stdout, err = run(capsys, "evaluate-captions", "--pred", files / "pred.json",
                          "--gender", files / "labels.csv", "--metrics", "ratio", "error")
    assert rc == 0
    r = json.loads(stdout)["reading"]
    assert r["Ratio"]["mean"] == pytest.approx(8 / 7) and r["Ratio_labels"] == 1.0
    assert r["Ratio"]["lo"] <= 8 / 7 <= r["Ratio"]["hi"] and r["Ratio"]["n"] == 2 * N
    assert r["Error"]["mean"] == 0.0 and r["n_captions_naming_both"] == 1
    assert r["unbiased"] == {"Error": 0.0}
    assert "Ratio (#man / #woman captions) 1.14 [" in err and "the labels' own 1.00" in err
    assert "1 captions name both genders" in err


def test_evaluate_captions_prints_a_summary_by_default_and_json_on_request(files, capsys):
    base = ["evaluate-captions", "--pred", files / "pred.json", "--gender", files / "labels.csv",
            "--human", files / "human.json", "--metrics", "ratio", "error", "biasamp", "lic",
            *FAST]
    rc, stdout, err = run(capsys, *base, "--no-json-for-test")
    assert rc == 0
    with pytest.raises(json.JSONDecodeError):
        json.loads(stdout)
    lines = stdout.splitlines()
    assert lines[0] == "biaslab evaluate-captions: 18 captions, 16 with a label"
    # each headline number with its CI or its seeds, and what an unbiased captioner reads
    assert any(x.startswith("  Ratio (#man / #woman captions) 1.00 [") and
               x.endswith("the labels' own 1.00") for x in lines), stdout
    assert any(x.startswith("  Error (% images captioned with the other gender) 0.0")
               for x in lines)
    assert any(x.startswith("  LIC_M ") and "(n = 1 seeds); unbiased 25" in x for x in lines)
    assert any(x.startswith("  BiasAmp ") for x in lines)
    rc, stdout, err = run(capsys, *base, "--json")
    res = json.loads(stdout)
    assert res["Ratio"]["n_man"] == 8 and "biaslab evaluate-captions: 18 captions" in err


def test_evaluate_captions_default_seed_count_is_stated():
    a = cli.build_parser().parse_args(["evaluate-captions", "--pred", "p", "--gender", "g"])
    assert a.seeds == cli.LIC_SEEDS and a.json is False
