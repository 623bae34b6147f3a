"""biaslab.runtime.reprocheck: which stages are compared, which must be byte-identical, and the
tolerance each number gets -- hand-computed cases."""
import json

import pytest

from biaslab.runtime import reprocheck as R


def _st(deps, outs, params=None):
    return {"cmd": "x", "deps": [{"path": p, "md5": m} for p, m in deps.items()],
            "params": params or {}, "outs": [{"path": p, "md5": m} for p, m in outs.items()]}


def _locks():
    ref = {
        "synthesize": _st({"stages/synthesize.py": "s1"}, {"data/raw": "r1",
                                                          "metrics/synthetic.json": "j1"}),
        "features": _st({"stages/features.py": "f1", "data/raw": "r1"},
                        {"data/features": "F1", "metrics/features.json": "jf"}),
        "train": _st({"stages/train.py": "t1", "data/features": "F1"},
                     {"data/model": "M1", "metrics/train.json": "jt"}, {"train": {"lr": 1}}),
    }
    return ref


def test_another_machine_compares_data_stages_by_bytes_and_the_rest_by_numbers():
    ref = _locks()
    fresh = json.loads(json.dumps(ref))
    fresh["features"]["outs"][0]["md5"] = "F2"          # torch's last bits on another CPU
    fresh["train"]["deps"][1]["md5"] = "F2"
    fresh["train"]["outs"][0]["md5"] = "M2"
    files = {"metrics/synthetic.json": {"n": 3},
             "metrics/features.json": {"dim": 16},
             "metrics/train.json": {"acc": {"mean": 80.0, "ci95": 2.0, "n": 5}}}
    new = json.loads(json.dumps(files))
    new["metrics/train.json"]["acc"]["mean"] = 80.9       # 0.9 <= 0.5 * 2.0
    res = R.check(fresh, ref, lambda p: json.dumps(new[p]), lambda p: json.dumps(files[p]),
                  same_machine=False)
    assert res["comparable"] == ["synthesize", "features", "train"]
    assert res["bytes_compared"] == ["synthesize"]       # 'train' has other data deps
    assert res["ok"], R.summarize(res)
    new["metrics/train.json"]["acc"]["mean"] = 81.1       # 1.1 > 1.0
    res = R.check(fresh, ref, lambda p: json.dumps(new[p]), lambda p: json.dumps(files[p]),
                  same_machine=False)
    assert not res["ok"]
    [f] = res["failures"]
    assert (f["file"], f["key"], f["reference"], f["fresh"], f["tolerance"]) == \
        ("metrics/train.json", "acc.mean", 80.0, 81.1, 1.0)
    assert "metrics/train.json: acc.mean: reference 80.0, fresh 81.1, tolerance 1" in \
        R.summarize(res)


def test_the_same_machine_must_give_the_same_bytes_everywhere():
    ref = _locks()
    fresh = json.loads(json.dumps(ref))
    fresh["features"]["outs"][0]["md5"] = "F2"
    same = {"metrics/synthetic.json": "{}", "metrics/features.json": "{}",
            "metrics/train.json": "{}"}
    res = R.check(fresh, ref, same.__getitem__, same.__getitem__, same_machine=True)
    assert res["bytes_differ"] == ["features: data/features"] and not res["ok"]
    res = R.check(fresh, ref, same.__getitem__, same.__getitem__, same_machine=False)
    assert res["ok"]
    fresh["synthesize"]["outs"][0]["md5"] = "r2"         # a data stage: never allowed
    res = R.check(fresh, ref, same.__getitem__, same.__getitem__, same_machine=False)
    assert res["bytes_differ"] == ["synthesize: data/raw"]


def test_a_code_or_param_change_upstream_makes_the_stages_below_it_incomparable():
    ref = _locks()
    fresh = json.loads(json.dumps(ref))
    fresh["features"]["deps"][0]["md5"] = "f2"           # the features code was edited
    ok, skipped = R.comparable(fresh, ref)
    assert ok == ["synthesize"] and skipped == ["features", "train"]
    fresh = json.loads(json.dumps(ref))
    fresh["train"]["params"] = {"train": {"lr": 2}}
    assert R.comparable(fresh, ref) == (["synthesize", "features"], ["train"])
    fresh["train"]["params"] = {"train": {"lr": 1, "workers": 4}}
    ref["train"]["params"] = {"train": {"lr": 1, "workers": 2}}
    assert R.comparable(fresh, ref, ignore_params=["workers"])[0] == \
        ["synthesize", "features", "train"]


@pytest.mark.parametrize("ref, fresh, ok", [
    ({"v": {"lo": 1.0, "hi": 3.0, "mean": 2.0}}, {"v": {"lo": 1.4, "hi": 3.4, "mean": 2.4}},
     True),                                               # half-width 1 -> tolerance 0.5
    ({"v": {"lo": 1.0, "hi": 3.0, "mean": 2.0}}, {"v": {"lo": 1.0, "hi": 3.0, "mean": 2.6}},
     False),
    ({"x": 100.0}, {"x": 104.9}, True),                   # 5 % of 100
    ({"x": 100.0}, {"x": 105.1}, False),
    ({"x": 0.0}, {"x": 2e-6}, False),                     # abs floor 1e-6
    ({"verdict": "holds"}, {"verdict": "inconclusive"}, False),
    ({"s": "Δ-9.7±1.2"}, {"s": "Δ-9.1±1.2"}, True),      # the ±1.2 it carries: tol 0.6
    ({"s": "Δ-9.7±1.2"}, {"s": "Δ-8.9±1.2"}, False),
    ({"s": "n=200 of 520"}, {"s": "n=201 of 520"}, True),   # one unit of the last digit
    ({"s": "CI [+0.10, +0.30] holds"}, {"s": "CI [+0.14, +0.34] holds"}, True),  # tol 0.05
    ({"s": "CI [+0.10, +0.30] holds"}, {"s": "CI [+0.17, +0.30] holds"}, False),
    ({"k": [1, 2]}, {"k": [1, 2, 3]}, False),
    ({"a": 1}, {"b": 1}, False),
])
def test_tolerance_cases(ref, fresh, ok):
    fails, _ = R.compare_numbers(ref, fresh)
    assert (not fails) == ok, fails


def test_per_seed_values_are_judged_against_the_spread_over_seeds():
    ref = {"seeds": [{"seed": 0, "acc": 70.0}, {"seed": 1, "acc": 72.0},
                     {"seed": 2, "acc": 74.0}]}            # std 2.0
    fresh = {"seeds": [{"seed": 0, "acc": 71.9}, {"seed": 1, "acc": 72.0},
                       {"seed": 2, "acc": 74.0}]}
    assert R.compare_numbers(ref, fresh)[0] == []
    fresh["seeds"][0]["acc"] = 72.1
    [f] = R.compare_numbers(ref, fresh)[0]
    assert f["key"] == "seeds[0].acc" and f["tolerance"] == pytest.approx(2.0)


def test_machine_identity_reads_vendor_model_dispatch_flags_and_caches(tmp_path):
    info = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon X\n"
            "flags\t\t: fpu sse4_2 avx avx2 fma avx512f hypervisor\n")
    c = tmp_path / "index0"
    c.mkdir()
    (c / "level").write_text("2\n")
    (c / "type").write_text("Unified\n")
    (c / "size").write_text("1024K\n")
    m = R.machine(info, tmp_path)
    assert m == {"vendor": "GenuineIntel", "model": "Xeon X",
                 "flags": ["avx", "avx2", "avx512f", "fma", "sse4_2"], "caches": ["L2U:1024K"]}
    assert R.machine(info.replace(" avx512f", ""), tmp_path) != m


def test_fragile_verdicts_are_those_a_drift_within_tolerance_could_flip():
    v = {"checks": [
        {"id": "a", "verdict": "holds", "lo": 0.1, "hi": 2.1, "reference": 0.0},   # 0.1 < 0.5
        {"id": "b", "verdict": "holds", "lo": 0.6, "hi": 2.6, "reference": 0.0},   # 0.6 > 0.5
        {"id": "c", "verdict": "inconclusive", "lo": -1.8, "hi": 0.2, "reference": 0.0},
        {"id": "d", "verdict": "not testable", "lo": None, "hi": None, "reference": 0.0}]}
    got = R.fragile_verdicts(v)
    assert [r["id"] for r in got] == ["a", "c"]
    assert got[0]["margin"] == pytest.approx(0.1) and got[0]["half_width"] == pytest.approx(1.0)
    assert got[1]["margin_in_half_widths"] == pytest.approx(0.2)


def test_a_fragile_verdict_may_flip_when_its_numbers_stay_within_tolerance():
    # half-width 1.0 -> a bound's tolerance 0.5; the lower bound 0.1 lies 0.1 from the threshold
    ref = {"checks": [{"id": "a", "verdict": "holds", "lo": 0.1, "hi": 2.1, "mean": 1.1,
                       "reference": 0.0}]}
    fresh = {"checks": [{"id": "a", "verdict": "inconclusive", "lo": -0.2, "hi": 1.8,
                         "mean": 0.8, "reference": 0.0}]}
    fails, drifts = R.compare_numbers(ref, fresh)
    assert fails == []
    [flip] = [d for d in drifts if d["kind"] == "verdict"]
    assert flip["key"] == "checks[0].verdict" and flip["reference"] == "holds"
    assert flip["drift"] == pytest.approx(0.1) and flip["tolerance"] == pytest.approx(0.5)


def test_a_verdict_flip_fails_when_the_record_was_not_fragile_or_its_numbers_moved_too_far():
    sturdy = {"checks": [{"id": "b", "verdict": "holds", "lo": 0.6, "hi": 2.6, "mean": 1.6,
                          "reference": 0.0}]}     # margin 0.6 > tolerance 0.5
    moved = {"checks": [{"id": "b", "verdict": "inconclusive", "lo": -0.1, "hi": 1.9,
                         "mean": 0.9, "reference": 0.0}]}
    fails, _ = R.compare_numbers(sturdy, moved)
    assert [f["why"] for f in fails if f["key"].endswith("verdict")] == ["verdict changed"]
    fragile = {"checks": [{"id": "a", "verdict": "holds", "lo": 0.1, "hi": 2.1, "mean": 1.1,
                           "reference": 0.0}]}
    far = {"checks": [{"id": "a", "verdict": "inconclusive", "lo": -0.5, "hi": 1.5,
                       "mean": 0.5, "reference": 0.0}]}   # lo moved 0.6 > 0.5
    fails, _ = R.compare_numbers(fragile, far)
    assert {f["why"] for f in fails} == {"number beyond its tolerance", "verdict changed"}
    # without a numeric threshold the record's fragility is unknown: a flip fails
    fails, _ = R.compare_numbers({"verdict": "holds"}, {"verdict": "inconclusive"})
    assert fails and fails[0]["why"] == "verdict changed"


def test_the_sign_of_a_mean_may_flip_only_where_the_mean_was_within_tolerance_of_zero():
    ref = {"d": {"mean": -0.01, "ci95": 0.2, "std": 0.1, "n": 3, "sign": -1}}  # tolerance 0.1
    near = {"d": {"mean": 0.02, "ci95": 0.2, "std": 0.1, "n": 3, "sign": 1}}
    fails, drifts = R.compare_numbers(ref, near)
    assert fails == [] and [d["key"] for d in drifts if d["kind"] == "verdict"] == ["d.sign"]
    far_ref = {"d": {"mean": -0.15, "ci95": 0.2, "std": 0.1, "n": 3, "sign": -1}}
    fails, _ = R.compare_numbers(far_ref, {"d": {"mean": -0.15, "ci95": 0.2, "std": 0.1, "n": 3,
                                                 "sign": 1}})
    assert [f["why"] for f in fails] == ["sign changed"]


def test_a_verdict_near_its_equivalence_margin_is_fragile_too():
    from biaslab.runtime import reprocheck as RC
    # far from 0, but the 90 % CI's upper end sits 0.01 from the margin's bound (0 + 0.5)
    c = {"id": "x", "verdict": "no practical effect", "lo": -0.6, "hi": 0.6, "lo90": -0.45,
         "hi90": 0.49, "reference": 0.0, "margin": {"delta": 0.5}}
    out = RC.fragile_verdicts({"checks": [c]})
    assert [r["id"] for r in out] == ["x"] and out[0]["margin"] == pytest.approx(0.01)
    # without the margin only the reference counts: 0.45 from it, not fragile at half-width 0.6
    c2 = {k: v for k, v in c.items() if k not in ("margin", "lo90", "hi90")}
    c2["lo"], c2["hi"] = 0.45, 1.65
    assert RC.fragile_verdicts({"checks": [c2]}) == []
    ref = {"checks": [c]}
    new = {"checks": [{**c, "hi90": 0.51, "verdict": "inconclusive"}]}
    fails, drifts = RC.compare_numbers(ref, new)
    assert not fails and any(d["kind"] == "verdict" for d in drifts)


def test_a_number_with_its_own_ci_is_judged_by_it_not_by_its_records():
    # delta's CI [-44, -36]: half-width 4 -> tolerance 2; pct's own CI [-87000, 27000]:
    # half-width 57000 -> tolerance 28500 (a relative change over a base near 0)
    ref = {"r": {"delta": -40.0, "lo": -44.0, "hi": -36.0, "pct": -30000.0,
                 "pct_lo": -87000.0, "pct_hi": 27000.0}}
    near = {"r": {**ref["r"], "pct": -30004.0, "pct_lo": -87013.0}}
    fails, drifts = R.compare_numbers(ref, near)
    assert fails == []
    tol = {d["key"]: d["tolerance"] for d in drifts}
    assert tol["r.pct"] == pytest.approx(28500.0) and tol["r.delta"] == pytest.approx(2.0)
    far = {"r": {**ref["r"], "pct": -60000.0}}
    fails, _ = R.compare_numbers(ref, far)
    assert [(f["key"], f["tolerance"]) for f in fails] == [("r.pct", pytest.approx(28500.0))]


def _equivalence_check(mean, ci95, std, delta, verdict, sign):
    return {"expected": {"direction": "≈", "reference": 0.0},
            "margin": {"basis": "amplifier's effect", "delta": delta, "effect": 10 * delta,
                       "fraction": 0.1},
            "measured": {"ci95": ci95, "mean": mean, "n": 3, "sign": sign, "std": std},
            "verdict": verdict}


def test_a_nested_check_record_near_its_margin_may_flip():
    # controls' layout: the 90 % t bound -0.0005 - 2.919986 x 0.0027 / sqrt(3) = -0.0050518
    # lies 0.0000518 from the margin's end -0.005; a bound's tolerance is 0.5 x 0.0068 = 0.0034
    ref = {"human": _equivalence_check(-0.0005, 0.0068, 0.0027, 0.005, "inconclusive", -1)}
    fresh = {"human": _equivalence_check(0.0001, 0.0062, 0.0025, 0.00494, "matches", 1)}
    fails, drifts = R.compare_numbers(ref, fresh)
    assert fails == []
    flips = {d["key"]: d for d in drifts if d["kind"] == "verdict"}
    assert set(flips) == {"human.verdict", "human.measured.sign"}
    assert flips["human.verdict"]["drift"] == pytest.approx(0.0000518, abs=1e-7)
    # the bound's tolerance plus how far the margin moved (0.00006)
    assert flips["human.verdict"]["tolerance"] == pytest.approx(0.0034 + 0.00006)
    # the same flip with the mean 0.2 from the margin is a changed conclusion
    sturdy = {"human": _equivalence_check(0.2, 0.0068, 0.0027, 0.005, "fails", 1)}
    fails, _ = R.compare_numbers(sturdy, {"human": {**sturdy["human"], "verdict": "matches"}})
    assert [f["why"] for f in fails] == ["verdict changed"]


def test_a_margin_is_judged_on_the_scale_of_the_ci_it_is_compared_with():
    # the check's CI half-width 0.2762 -> delta's tolerance 0.1381, effect's 0.1381 / 0.1
    ref = {"c": _equivalence_check(-0.0211, 0.2762, 0.1112, 0.00191, "inconclusive", -1)}
    fresh = {"c": _equivalence_check(-0.0206, 0.2753, 0.1108, 0.00206, "inconclusive", -1)}
    fails, drifts = R.compare_numbers(ref, fresh)
    assert fails == []
    tol = {d["key"]: d["tolerance"] for d in drifts}
    assert tol["c.margin.delta"] == pytest.approx(0.1381)
    assert tol["c.margin.effect"] == pytest.approx(1.381)
    moved = {"c": _equivalence_check(-0.0211, 0.2762, 0.1112, 0.2, "inconclusive", -1)}
    fails, _ = R.compare_numbers(ref, moved)
    assert {f["key"] for f in fails} == {"c.margin.delta", "c.margin.effect"}


def test_a_list_of_names_may_change_only_by_the_names_of_fragile_flips():
    lock = {"controls": _st({"stages/controls.py": "c1"},
                            {"metrics/controls.json": "a", "metrics/validity.json": "b"})}
    fresh_lock = json.loads(json.dumps(lock))
    fresh_lock["controls"]["outs"][0]["md5"] = "a2"
    ref_docs = {"metrics/controls.json": {"captioner": {"human": {"DBAC": _equivalence_check(
                    -0.0005, 0.0068, 0.0027, 0.005, "inconclusive", -1)}}},
                "metrics/validity.json": {"preconditions": [
                    {"task": "captioner", "metric": "DBAC", "valid": False,
                     "inconclusive": ["amplifier", "human"]}]}}

    def run(inconclusive):
        new = {"metrics/controls.json": {"captioner": {"human": {"DBAC": _equivalence_check(
                   0.0001, 0.0062, 0.0025, 0.00494, "matches", 1)}}},
               "metrics/validity.json": {"preconditions": [
                   {**ref_docs["metrics/validity.json"]["preconditions"][0],
                    "inconclusive": inconclusive}]}}
        return R.check(fresh_lock, lock, lambda p: json.dumps(new[p]),
                       lambda p: json.dumps(ref_docs[p]), same_machine=False)

    res = run(["amplifier"])            # human left the list: its verdict flipped fragilely
    assert res["ok"], R.summarize(res)
    assert any(d["key"] == "preconditions[0].inconclusive" for d in res["fragile_flips"])
    res = run(["human"])                # amplifier left it without a flip of its own
    assert not res["ok"]
    [f] = res["failures"]
    assert (f["why"], f["items"]) == ("items changed", ["amplifier"])


def test_the_equivalence_level_is_the_one_the_controls_decide_by():
    # reprocheck recomputes the controls' 90 % bounds without importing the analysis layer
    from biaslab.analysis import equivalence
    assert R._EQUIVALENCE_LEVEL == equivalence.EQUIVALENCE_LEVEL
