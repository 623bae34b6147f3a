"""biaslab plan: arithmetic on a toy profile, sources, composition, errors;
benchmarks/gpu.py skips cleanly without a GPU."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from biaslab.runtime import plan as P
from biaslab.runtime.io import InputError

ROOT = Path(__file__).resolve().parents[1]
TOY = P.Work(n_images=100, n_captions=500, n_train_gendered=10, n_test_gendered=4,
             source="toy")


@pytest.fixture(scope="module")
def paper():
    return P.compose(["data=coco", "scale=full", "models=paper"])


def test_composition_equals_compose_params_script(tmp_path):
    """The default composition is params.yaml as scripts/compose_params.py writes it."""
    assert P.compose([]) == yaml.safe_load((ROOT / "params.yaml").read_text())


def test_overrides_compose_like_dvc(paper):
    assert paper["generate"]["m"] == 30 and paper["generate"]["backend"] == "sd_inpaint"
    assert paper["filters"]["detector"] == "facebook/detr-resnet-50"
    assert paper["data"]["root"] == str(ROOT / "data" / "raw" / "coco")    # ${repo_path:...}


@pytest.mark.parametrize("bad, needle", [(["generate.mm=3"], "generate.mm"),
                                         (["data=cocoX"], "data/cocoX"),
                                         (["generate.m"], "key=value")])
def test_unknown_keys_are_clear_input_errors(bad, needle):
    with pytest.raises(InputError) as e:
        P.compose(bad)
    assert needle in str(e.value)


def test_non_integer_m_is_an_input_error(paper):
    # rejected when composed, by the params checks every stage runs
    with pytest.raises(InputError, match="generate.m"):
        P.compose(["data=coco", "models=paper", "generate.m=x3"])
    params = P.compose(["data=coco", "models=paper"])
    params["generate"]["m"] = "x3"
    with pytest.raises(InputError, match="generate.m"):
        P.plan(params, wk=TOY)


def test_sd_rate_is_paper_72h_on_6_a100():
    # 28,487 x 2 x 30 = 1,709,220 images / (72 h x 3600 s x 6 GPUs = 1,555,200 GPU-s)
    assert P.SD_A100_IMAGES_PER_S == pytest.approx(1_709_220 / 1_555_200)
    assert P.SD_A100_IMAGES_PER_S == pytest.approx(1.09904, abs=1e-5)
    r = P.sd_gpu_rate("a100", 25)                       # half the steps: twice the rate
    assert r.per_s == pytest.approx(2 * 1_709_220 / 1_555_200) and "72 h" in r.source


def test_toy_profile_arithmetic(paper):
    """10 source images x 2 groups x m=3 = 60 candidates at the paper's 1.099 img/s/A100:
    60 / 1.09904 = 54.59 s on one GPU, a third on three."""
    params = json.loads(json.dumps(paper))
    params["generate"]["m"] = 3
    one = P.plan(params, gpus=1, wk=TOY)
    three = P.plan(params, gpus=3, wk=TOY)
    gen1 = next(r for r in one["rows"] if r["stage"] == "generate")
    gen3 = next(r for r in three["rows"] if r["stage"] == "generate")
    assert gen1["n"] == 60 and gen1["unit"] == "candidates"
    assert gen1["gpu_s"] == pytest.approx(60 * 1_555_200 / 1_709_220)
    assert gen1["gpu_s"] == pytest.approx(54.593, abs=1e-3)
    assert gen3["gpu_s"] == pytest.approx(gen1["gpu_s"] / 3)
    # score: 60 candidates at 1/(1/28 + 1/(28*86/4.4)) = 26.633 /s
    sc = next(r for r in one["rows"] if r["stage"] == "score")
    assert sc["gpu"]["per_s"] == pytest.approx(1 / (1 / 28 + 4.4 / (28 * 86)))
    assert sc["gpu_s"] == pytest.approx(60 / 26.633, abs=1e-3)
    # max_images caps the sources: 4 x 2 x 3 = 24 candidates
    params["generate"]["max_images"] = 4
    capped = P.plan(params, gpus=1, wk=TOY)
    assert next(r for r in capped["rows"] if r["stage"] == "generate")["n"] == 24


def test_models_stages_are_whole_models_per_gpu():
    # 25 models of 10 s each: ceil(25/6) = 5 rounds -> 50 s; item-parallel: 25/(0.1*6)
    assert P.gpu_wall_s(25, 0.1, 6, per_model=True) == pytest.approx(50.0)
    assert P.gpu_wall_s(25, 0.1, 6) == pytest.approx(25 / 0.6)
    assert P.gpu_wall_s(25, None, 6) is None
    with pytest.raises(ValueError):
        P.gpu_wall_s(1, 1.0, 0)


def test_cpu_rates_come_from_benchmark_files():
    params = P.compose([])                               # tiny tier, copy_paste/render
    params["generate"]["backend"] = "copy_paste"
    p = P.plan(params, wk=TOY)
    rows = {r["stage"]: r for r in p["rows"]}
    gj = json.loads((ROOT / "benchmarks/results/generate.json").read_text())
    fj = json.loads((ROOT / "benchmarks/results/features.json").read_text())
    assert rows["generate"]["cpu"]["per_s"] == gj["copy_paste"]["candidates_per_s"]
    m = params["generate"]["m"]                          # the ci scale's candidates per group
    assert rows["generate"]["cpu_s"] == pytest.approx(10 * 2 * m / gj["copy_paste"]
                                                      ["candidates_per_s"])
    assert rows["features"]["cpu_s"] == pytest.approx(
        100 / fj["efficientnet_lite0"]["threads1_batch1_images_per_s_median"])
    assert "generate.json" in rows["generate"]["cpu"]["source"]
    assert "features.json" in rows["features"]["cpu"]["source"]


def test_every_row_has_sources_and_documented_full_coco(paper):
    p = P.plan(paper, gpus=6)
    assert p["work"]["n_images"] == 123_287 and p["work"]["n_train_gendered"] == 28_487
    for r in p["rows"]:
        assert r["gpu"]["source"].strip() and r["cpu"]["source"].strip(), r["stage"]
    gen = next(r for r in p["rows"] if r["stage"] == "generate")
    assert gen["n"] == 1_709_220
    assert gen["gpu_s"] == pytest.approx(72 * 3600)      # the paper's own 72 h on 6 A100
    text = P.format_plan(p)
    assert "generate" in text and "3.0 d" in text and "lower bound" in text


def test_unknown_gpu_kind_is_an_input_error(paper):
    with pytest.raises(InputError, match="--gpu"):
        P.plan(paper, gpu="tpu", wk=TOY)


def test_work_counted_from_a_coco_layout_root(tmp_path, paper):
    ann = tmp_path / "annotations"
    ann.mkdir()
    caps = [(1, "A man riding a horse."), (1, "A person on a horse."),
            (2, "A woman with a dog."), (3, "A bowl of fruit."), (4, "A man and a woman.")]
    ann.joinpath("captions_val2017.json").write_text(json.dumps(
        {"images": [{"id": i} for i in (1, 2, 3, 4)],
         "annotations": [{"image_id": i, "caption": c, "id": n} for n, (i, c) in
                         enumerate(caps)]}))
    params = json.loads(json.dumps(paper))
    params["data"]["root"] = str(tmp_path)
    wk = P.work(params)
    # gendered: images 1 (male) and 2 (female); 4 mentions both -> undefined
    assert (wk.n_images, wk.n_captions) == (4, 5)
    assert wk.n_train_gendered == round(2 * 0.7) and wk.n_test_gendered == round(2 * 0.2)


def test_cli_plan_prints_table_and_json(capsys):
    from biaslab import cli
    assert "plan" in {n for n in cli.build_parser()._subparsers._group_actions[0].choices}
    rc = cli.main(["plan", "-S", "data=coco", "-S", "scale=full", "-S", "models=paper",
                   "--gpus", "6", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["gpus"] == 6 and len(out["rows"]) >= 8
    rc = cli.main(["plan", "-S", "generate.nope=1"])
    assert rc == 2 and "generate.nope" in capsys.readouterr().err


def test_gpu_benchmark_skips_without_gpu(tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the benchmark would run")
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--out",
                        str(tmp_path / "x.json")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "skipped: no GPU" in p.stdout
    assert not (tmp_path / "x.json").exists()


def test_measured_gpu_rate_replaces_the_paper_derivation(tmp_path, monkeypatch):
    (tmp_path / "gpu_sd_inpaint.json").write_text(json.dumps(
        {"gpu_name": "NVIDIA H100 80GB HBM3", "model": "stabilityai/stable-diffusion-2-inpainting",
         "results": [{"batch_size": 1, "dtype": "float16", "steps": 50, "images_per_s": 2.0},
                     {"batch_size": 8, "dtype": "float16", "steps": 50, "images_per_s": 3.0},
                     {"batch_size": 8, "dtype": "float32", "steps": 50, "images_per_s": 9.0}]}))
    monkeypatch.setattr(P, "RESULTS", tmp_path)
    r = P.sd_gpu_rate("h100", 50)
    assert r.per_s == 3.0 and r.source.startswith("measured")        # best fp16 row
    a = P.sd_gpu_rate("a100", 50)                                    # other kind: derivation
    assert a.per_s == pytest.approx(P.SD_A100_IMAGES_PER_S) and "paper 000" in a.source
    h = P.sd_gpu_rate("h100", 25)                                    # no row at 25 steps
    assert h.per_s == pytest.approx(P.SD_A100_IMAGES_PER_S * 2 * 989 / 312)


def test_classifier_rows_count_every_backbone_and_method(paper):
    """Table 1's matrix: datasets (and methods) x seeds x backbones models; frozen heads need
    one features pass per further backbone; fine-tuning has no measured rate (stated)."""
    params = json.loads(json.dumps(paper))
    rows = {r["stage"]: r for r in P.plan(params, wk=TOY)["rows"]}
    c = params["classifier"]
    nb, ns = len(c["backbones"]), len(c["seeds"])
    assert nb == 3
    assert rows["train_classifier"]["n"] == len(c["datasets"]) * ns * nb
    assert rows["train_method"]["n"] == len(c["methods"]) * ns * nb == 7 * ns * 3
    extra = [s for s in rows if s.startswith("features (")]
    assert extra == [f"features ({b})" for b in c["backbones"]]
    assert all(rows[s]["n"] == TOY.n_images for s in extra)
    params["classifier"]["finetune"] = True
    ft = {r["stage"]: r for r in P.plan(params, wk=TOY)["rows"]}
    assert not [s for s in ft if s.startswith("features (")]
    for s in ("train_classifier", "train_method"):
        assert ft[s]["n"] == rows[s]["n"] and ft[s]["cpu_s"] is None and ft[s]["gpu_s"] is None
        assert "fine-tuning" in ft[s]["cpu"]["source"] and "fine-tuned" in ft[s]["detail"]


def test_captioner_rows_count_every_arch(paper):
    """Table 2's matrix at the paper tier: ClipCap, BLIP-2 and Transformer x datasets x
    seeds captioners (and eval_captioner's captions with them)."""
    rows = {r["stage"]: r for r in P.plan(paper, wk=TOY)["rows"]}
    cp = paper["captioner"]
    assert cp["archs"] == ["clipcap", "blip2", "transformer"]
    n = len(cp["datasets"]) * len(cp["seeds"]) * 3
    assert rows["train_captioner"]["n"] == n and "blip2" in rows["train_captioner"]["detail"]
    # + LIBRA on each arch's Original captioner, per seed
    assert rows["eval_captioner"]["n"] == TOY.n_test_gendered * (n + 3 * len(cp["seeds"]))


def test_plan_applies_data_max_images_and_checks_params(tmp_path):
    """``-S data.max_images=600`` planned every image; a bad value reached no
    check."""
    w = P.Work(3004, 15020, 1000, 400, "counted")
    c = P._capped(w, 600)
    assert (c.n_images, c.n_captions, c.n_train_gendered, c.n_test_gendered) == \
        (600, 3000, 200, 80)
    assert "data.max_images=600" in c.source
    assert P._capped(w, None) is w and P._capped(w, 5000) is w
    with pytest.raises(InputError, match="synthetic.bias"):
        P.compose(["synthetic.bias=1.5"])
    with pytest.raises(InputError, match="classifier.methods"):
        P.compose(["classifier.methods=[nonexistent]"])
