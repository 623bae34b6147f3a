"""biaslab.runtime.runstats: timings / throughput / cache counters kept out of metrics/."""
import json

from biaslab.runtime import runstats


def test_split_moves_run_keys_at_any_depth():
    m = {"n": 3, "seconds": {"total": 9.5, "t5_generation": 2.0}, "train_seconds": 1.0,
         "images_per_s": 4.2, "cached": 7, "computed": 1, "mask_rate": 0.15,
         "second_person": 2, "d_mean": {"A_GC": 0.4},
         "pretrain": {"epochs": 5, "seconds": 2.5},
         "human": {"n": 10, "captions_per_s": 3.0, "examples": [1, 2]},
         "timing": {"encode_seconds": 1.0}}
    res, run = runstats.split(m, extra=("computed",))
    assert res == {"n": 3, "mask_rate": 0.15, "second_person": 2, "d_mean": {"A_GC": 0.4},
                   "pretrain": {"epochs": 5}, "human": {"n": 10, "examples": [1, 2]}}
    assert run == {"seconds": {"total": 9.5, "t5_generation": 2.0}, "train_seconds": 1.0,
                   "images_per_s": 4.2, "cached": 7, "computed": 1,
                   "pretrain": {"seconds": 2.5}, "human": {"captions_per_s": 3.0},
                   "timing": {"encode_seconds": 1.0}}
    assert m["pretrain"] == {"epochs": 5, "seconds": 2.5}          # input untouched


def test_split_keeps_empty_result_dicts_and_names():
    res, run = runstats.split({"eval": {}, "seconds_computing": 1.0, "encoded_now": 2,
                               "text_cached": 5, "throughput": 1})
    assert res == {"eval": {}}
    assert set(run) == {"seconds_computing", "encoded_now", "text_cached", "throughput"}
    assert not any(runstats.is_run_key(k) for k in ("second_person", "precached_rate",
                                                      "LIC", "per_seed", "cache_dir"))


def test_publish_writes_and_prints(tmp_path, capsys):
    assert runstats.publish("x", {}, root=tmp_path) is None
    p = runstats.publish("train_captioner/original-0", {"seconds": 1.5}, root=tmp_path)
    assert p == tmp_path / "train_captioner/original-0.json"
    assert json.loads(p.read_text()) == {"seconds": 1.5}
    assert 'train_captioner/original-0 run statistics: {"seconds": 1.5}' in capsys.readouterr().out
