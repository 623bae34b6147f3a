"""biaslab.analysis.validity and biaslab.analysis.sweep: verdicts from hand-made probe/metrics files."""
import pytest

from biaslab.analysis import sweep, validity, validity_libra
from biaslab.analysis import verdicts


def _rec(values):
    return {"values": values}


PROBE = {"classifier": {
    # Original reads every attribute; oversample dropped objects only; synthetic reads nothing
    "original": {"objects": _rec([0.30, 0.32, 0.31]), "scene": _rec([0.20, 0.22, 0.21]),
                 "cast": _rec([0.40, 0.41, 0.39])},
    "oversample": {"objects": _rec([0.02, 0.01, 0.03]), "scene": _rec([0.20, 0.19, 0.21]),
                   "cast": _rec([0.40, 0.42, 0.41])},
    "synthetic": {"objects": _rec([0.0, 0.01, -0.01]), "scene": _rec([0.01, 0.0, -0.01]),
                  "cast": _rec([0.02, -0.01, 0.0])},
}}


def test_probe_checks_verdicts_hand_made():
    checks = {c["id"]: c for c in validity.probe_checks(PROBE)}
    for a in ("objects", "scene", "cast"):
        assert checks[f"classifier/original/{a}>0"]["verdict"] == "holds"
        assert checks[f"classifier/synthetic-original/{a}<0"]["verdict"] == "holds"
    assert checks["classifier/oversample-original/objects<0"]["verdict"] == "holds"
    assert checks["classifier/oversample-original/cast≥0"]["verdict"] == "holds"
    # over-sampling left the scene as it was: S_synthetic is below it there too
    assert checks["classifier/synthetic-oversample/scene<0"]["verdict"] == "holds"
    d = checks["classifier/synthetic-original/cast<0"]
    assert d["mean"] == pytest.approx((0.02 - 0.01 + 0.0) / 3 - 0.40)
    assert verdicts.summary(checks.values())["fails"] == 0


def test_probe_checks_fail_when_truth_disagrees():
    probe = {"classifier": {"original": {"cast": _rec([-0.3, -0.31, -0.29])},
                            "oversample": {"cast": _rec([-0.6, -0.61, -0.62])}}}
    checks = {c["id"]: c for c in validity.probe_checks(probe)}
    assert checks["classifier/original/cast>0"]["verdict"] == "fails"
    assert checks["classifier/oversample-original/cast≥0"]["verdict"] == "fails"


def test_table_checks_ratio_and_delta():
    cls = {"original": {"per_seed": [{"Ratio": 3.0}, {"Ratio": 3.2}, {"Ratio": 2.9}]},
           "synthetic": {"per_seed": [{"Ratio": 1.1}, {"Ratio": 1.0}, {"Ratio": 1.2}]}}
    art = {"original": {"per_seed": [{"delta": 5.0}, {"delta": 6.0}, {"delta": 4.0}]},
           "synthetic": {"per_seed": [{"delta": 30.0}, {"delta": 31.0}, {"delta": 29.0}]}}
    checks = {c["id"]: c for c in validity.table_checks(cls, art)}
    assert checks["classifier/synthetic-original/ratio<0"]["verdict"] == "holds"
    assert checks["classifier/synthetic-original/delta≤0"]["verdict"] == "fails"
    assert "classifier/synthetic-original/ratio_expected<0" not in checks   # no such key
    # the threshold-free Ratio_E gets its own check beside the thresholded one: synthetic
    # 1.05 vs original 1.30 (3 seeds each, spread 0.01): difference -0.25 < 0, holds
    for row, v in (("original", 1.30), ("synthetic", 1.05)):
        for k, s in enumerate(cls[row]["per_seed"]):
            s["Ratio_expected"] = v + 0.01 * (k - 1)
    checks = {c["id"]: c for c in validity.table_checks(cls, art)}
    c = checks["classifier/synthetic-original/ratio_expected<0"]
    assert c["verdict"] == "holds" and c["mean"] == pytest.approx(-0.25)
    assert checks["classifier/synthetic-original/ratio<0"]["verdict"] == "holds"


def test_table_checks_masked_auc_ignores_the_mask_lean_and_the_balance():
    """S_synthetic's masked gender AUC against Original's, per seed; judged on a
    balanced test set too (no Ratio there) and never sent to "mask not neutral"."""
    cls = {"original": {"per_seed": [{"masked_gender_auc": v} for v in (90.0, 92.0, 91.0)]},
           "synthetic": {"per_seed": [{"masked_gender_auc": v} for v in (60.0, 58.0, 59.0)]},
           "test_set": {"n_female": 40, "n_male": 40}}
    checks = {c["id"]: c for c in validity.table_checks(cls, {})}
    c = checks["classifier/synthetic-original/masked_auc<0"]
    assert c["verdict"] == "holds" and c["mean"] == pytest.approx(-32.0)
    # its premise on any data: Original above chance, t over 3 seeds (mean 91, sd 1,
    # t_{0.975, 2} = 4.303: 91 +- 4.303 / sqrt 3 = +- 2.48)
    o = checks["classifier/original/masked_auc>50"]
    assert o["verdict"] == "holds" and o["mean"] == pytest.approx(91.0)
    assert o["lo"] == pytest.approx(91.0 - 4.3027 / 3 ** 0.5, abs=1e-3)
    assert verdicts.CONTROLLED_METRIC["original/masked_auc>50"] == ("classifier", "masked_AUC")
    probe = {"mask_neutral": {"synthetic": {"ratio_expected": 0.2, "lo": 0.1, "hi": 0.3,
                                            "per_seed": [0.2], "n_images": 10}}}
    after = {c["id"]: c for c in verdicts.apply_mask_neutral(list(checks.values()), probe)}
    assert after["classifier/synthetic-original/masked_auc<0"]["verdict"] == "holds"
    assert verdicts.CONTROLLED_METRIC["masked_auc<0"] == ("classifier", "masked_AUC")
    cls["synthetic"]["per_seed"] = [{"masked_gender_auc": v} for v in (95.0, 93.0, 94.0)]
    c = {c["id"]: c for c in validity.table_checks(cls, {})}[
        "classifier/synthetic-original/masked_auc<0"]
    assert c["verdict"] == "fails"
    cls["original"]["per_seed"] = [{"masked_gender_auc": v} for v in (49.0, 52.0, 50.0)]
    o = {c["id"]: c for c in validity.table_checks(cls, {})}["classifier/original/masked_auc>50"]
    assert o["verdict"] == "inconclusive"


def test_markdown_lists_every_check():
    checks = validity.probe_checks(PROBE)
    md = verdicts.markdown(checks)
    assert len(md.splitlines()) == 2 + len(checks)
    # S_synthetic vs over-sampling on objects: both near 0, the CI straddles 0
    c = {c["id"]: c for c in checks}["classifier/synthetic-oversample/objects<0"]
    assert c["verdict"] == "inconclusive" and f"**{c['verdict']}**" in md


def _exp(name, bias, leak_mean, leak_ci, sens):
    return {"name": name, "data": {
        "params": {"params.yaml": {"data": {"synthetic": {"bias": bias},
                                            "data": {"source": "synthetic"}}}},
        "metrics": {
            "metrics/classification.json": {"data": {
                "original": {"Leakage": {"mean": leak_mean, "ci95": leak_ci, "n": 3}}}},
            "metrics/probe.json": {"data": {"classifier": {
                "original": {"cast": {"mean": sens, "ci95": 0.05, "n": 3}}}}}}}}


def test_sweep_points_markdown_and_bias0_checks(tmp_path):
    show = [{"rev": "workspace", "data": {"params": {}, "metrics": {}}},
            {"experiments": [{"revs": [_exp("sweep-b0", 0.0, 0.5, 1.0, 0.01),
                                       _exp("sweep-b0.9", 0.9, 6.0, 1.0, 0.4)]}]}]
    pts = sweep.sweep_points(show)
    assert {(p["bias"], p["metric"]) for p in pts} == {
        (0.0, "leakage"), (0.9, "leakage"), (0.0, "sens_cast"), (0.9, "sens_cast")}
    md = sweep.sweep_markdown(pts)
    assert "| Original | 0.50 ± 1.00 | 6.00 ± 1.00 |" in md
    checks = sweep.bias0_checks(pts)
    assert {c["verdict"] for c in checks} == {"holds"} and len(checks) == 2
    sweep.plot_sweep(pts, tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 1000


def test_bias0_infinite_ratio_fails_and_error_is_not_checked():
    """A classifier that never predicts "woman" at b = 0 has r = ∞ on every seed: DVC drops
    the null mean, the point is kept (counted) and "r ≈ 1" fails; Error (a captioner's
    wrong-gender rate) and Ratio_E (symmetrised, >= 1) are drawn but not b = 0 claims."""
    def exp(name, bias, ratio, err):
        return {"name": name, "data": {
            "params": {"params.yaml": {"data": {"synthetic": {"bias": bias}}}},
            "metrics": {
                "metrics/classification.json": {"data": {"original": {
                    "ratio_raw": ratio, "Ratio_expected": {"mean": 1.5, "ci95": 0.2, "n": 3}}}},
                "metrics/captioning.json": {"data": {"original": {"Error": err}}}}}}
    show = [{"experiments": [{"revs": [
        exp("b0", 0.0, {"n": 3, "n_inf": 3, "n_missing": 0, "sign": 1},
            {"mean": 20.0, "ci95": 5.0, "n": 3}),
        exp("b9", 0.9, {"mean": 2.0, "ci95": 0.5, "n": 3},
            {"mean": 10.0, "ci95": 5.0, "n": 3})]}]}]
    pts = sweep.sweep_points(show)
    assert {(p["bias"], p["metric"]) for p in pts} == {
        (0.0, "ratio_raw"), (0.9, "ratio_raw"), (0.0, "Error"), (0.9, "Error"),
        (0.0, "ratio_e"), (0.9, "ratio_e")}
    assert "### Ratio_E (classifier) (unbiased = 1)" in sweep.sweep_markdown(pts)
    assert "∞ (3/3 seeds)" in sweep.sweep_markdown(pts)
    checks = sweep.bias0_checks(pts)
    assert [(c["id"], c["verdict"], c["n_inf"]) for c in checks] == [
        ("bias0/original/ratio_raw", "fails", 3)]


def test_sweep_plot_keeps_each_variant_in_one_colour():
    """Panels hold different variant subsets (the captioner has no model-level methods): a
    variant must keep its colour in every panel, and the one legend must name every variant.
    (The first version coloured by order within each panel, so the legend was wrong for the
    probe and captioner panels.)"""
    def pt(row, metric, bias, mean):
        return {"row": row, "metric": metric, "bias": bias, "mean": mean, "ci95": 0.1, "n": 3}
    pts = [pt("adversarial", "leakage", b, 1.0) for b in (0.0, 0.9)]
    pts += [pt(r, m, b, 0.5) for r in ("original", "synthetic")
            for m in ("leakage", "sens_cast", "Error") for b in (0.0, 0.9)]
    pts += [{"row": "original", "metric": "ratio_raw", "bias": 0.0, "mean": None, "n": 3,
             "n_inf": 3}]
    fig = sweep._sweep_figure(pts)
    colours: dict[str, set] = {}
    titles = []
    for ax in fig.axes:
        titles.append(ax.get_title())
        for c in ax.containers:
            colours.setdefault(c.get_label(), set()).add(tuple(c.lines[0].get_color()))
    assert set(colours) == {"Adversarial", "Original", "S_synthetic"}
    assert all(len(v) == 1 for v in colours.values()), colours
    assert len({next(iter(v)) for v in colours.values()}) == 3
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + fig.legends
    assert len(legends) == 1
    # in the tables' row order (biaslab.registry.row_order)
    assert [t.get_text() for t in legends[0].get_texts()] == ["Original", "Adversarial",
                                                             "S_synthetic"]
    assert any("1 points ∞, not drawn" in t for t in titles)


def test_ratio_claims_not_testable_on_a_gender_balanced_test_set():
    """On a balanced persons-masked test set a pure context reader's expected r is 1, so the
    "closer to 1" claims get "not testable" with the reason; the Δ check is unaffected, and a
    skewed test set (COCO's 2.3:1) keeps the ordinary verdicts."""
    cls = {"original": {"per_seed": [{"Ratio": 3.0, "Ratio_expected": 1.3},
                                     {"Ratio": 3.2, "Ratio_expected": 1.31},
                                     {"Ratio": 2.9, "Ratio_expected": 1.29}]},
           "synthetic": {"per_seed": [{"Ratio": 1.1, "Ratio_expected": 1.05},
                                      {"Ratio": 1.0, "Ratio_expected": 1.04},
                                      {"Ratio": 1.2, "Ratio_expected": 1.06}]},
           "test_set": {"n_male": 40, "n_female": 40}}
    art = {"original": {"per_seed": [{"delta": 5.0}, {"delta": 6.0}, {"delta": 4.0}]},
           "synthetic": {"per_seed": [{"delta": 5.0}, {"delta": 4.0}, {"delta": 6.0}]}}
    checks = {c["id"]: c for c in validity.table_checks(cls, art)}
    for k in ("ratio<0", "ratio_expected<0"):
        c = checks[f"classifier/synthetic-original/{k}"]
        assert c["verdict"] == "not testable" and "40 men, 40 women" in c["reason"]
        assert c["mean"] < 0                  # the measured effect is still reported
    assert checks["classifier/synthetic-original/delta≤0"]["verdict"] == "holds"
    s = verdicts.summary(checks.values())
    assert s == {"holds": 1, "fails": 0, "no_practical_effect": 0, "inconclusive": 0,
                 "not_testable": 2,
                 "metric_not_valid_on_this_data": 0, "mask_not_neutral": 0,
                 "not_informative": 0, "n": 3, "confounded": 0}
    md = verdicts.markdown(list(checks.values()))
    assert "**not testable**" in md and "Not testable: classifier: S_synthetic's Ratio" in md
    # 41 / 40 is still balanced to one image; 40 / 17 (2.35:1) is testable
    assert validity.ratio_testable({"n_male": 41, "n_female": 40}) is not None
    assert validity.ratio_testable({"n_male": 40, "n_female": 17}) is None
    assert validity.ratio_testable(None) is None and validity.ratio_testable({}) is None
    cls["test_set"] = {"n_male": 40, "n_female": 17}
    checks = {c["id"]: c for c in validity.table_checks(cls, art)}
    assert checks["classifier/synthetic-original/ratio<0"]["verdict"] == "holds"


def _cap(rows):
    return {r: {"per_seed": [{"seed": s, **{k: v[s] for k, v in ms.items()}}
                             for s in range(3)]} for r, ms in rows.items()}


def test_libra_checks_paired_by_seed_hand_computed():
    """Differences are per captioner seed: LIC 5,6,7 -> 4,5,6 is -1 at every seed, a zero-width
    CI below 0 (holds), where an unpaired Welch CI over these values would not decide."""
    cap = _cap({"original": {"LIC": [5, 6, 7], "Error": [2, 4, 6], "BLEU-4": [30, 31, 32],
                             "CIDEr": [90, 91, 92], "METEOR": [25, 25, 25]},
                "original+LIBRA": {"LIC": [4, 5, 6], "Error": [6, 8, 10],
                                   "BLEU-4": [30, 31, 32], "CIDEr": [80, 81, 82],
                                   "METEOR": [25, 26, 24]}})
    apply_ = {"human": {"after": {"n": 200, "correct": 0.98}},
              "swapped": {"after": {"n": 200, "correct": 0.5}}}
    c = {x["id"]: x for x in validity_libra.libra_checks(cap, apply_)}
    lic = c["captioner/libra-original/lic<0"]
    assert (lic["mean"], lic["lo"], lic["hi"], lic["n"]) == (-1.0, -1.0, -1.0, 3)
    assert lic["verdict"] == "holds"
    err = c["captioner/libra-original/error≤tol"]      # +4 at every seed > 1.6
    assert err["mean"] == 4.0 and err["reference"] == 1.6 and err["verdict"] == "fails"
    assert c["captioner/libra-original/bleu4≥0"]["verdict"] == "holds"
    assert c["captioner/libra-original/cider≥0"]["verdict"] == "fails"
    # METEOR 0, +1, -1: mean 0, t CI +-2.48: reaches 0, holds
    assert c["captioner/libra-original/meteor≥0"]["verdict"] == "holds"
    h = c["libra/dcg/human_correct≥0.97"]
    # Wilson 95 % interval of 196 / 200 (scipy): [0.9497, 0.9922]
    assert h["mean"] == pytest.approx(0.98) and h["lo"] == pytest.approx(0.9497, abs=1e-4)
    assert h["hi"] == pytest.approx(0.9922, abs=1e-4) and h["verdict"] == "holds"
    assert c["libra/dcg/swapped_correct≥0.8"]["verdict"] == "fails"
    # no LIBRA row, no apply metrics: no check
    assert validity_libra.libra_checks({"original": cap["original"]}, {}) == []


def test_libra_lic_claim_follows_the_lic_controls():
    cap = _cap({"original": {"LIC": [5, 6, 7]}, "original+LIBRA": {"LIC": [4, 5, 6]}})
    controls = {"captioner": {"human": {"LIC": {"verdict": "does not match"}}}}
    c = verdicts.apply_controls(validity_libra.libra_checks(cap), controls)
    assert c[0]["verdict"] == "metric not valid on this data" and "captioner/LIC" in c[0]["reason"]


def test_libra_context_reader_check_reads_the_paired_error_change():
    apply_ = {"context_reader": {"error_change": {"mean": -12.5, "lo": -17.1, "hi": -7.9,
                                                  "n": 200}}}
    c = {x["id"]: x for x in validity_libra.libra_checks({}, apply_)}
    chk = c["libra/dcg/context_reader_error<0"]
    assert (chk["mean"], chk["lo"], chk["hi"], chk["n"]) == (-12.5, -17.1, -7.9, 200)
    assert chk["verdict"] == "holds"
    apply_["context_reader"]["error_change"].update(lo=-3.0, hi=2.0)
    assert validity_libra.libra_checks({}, apply_)[0]["verdict"] == "inconclusive"
    apply_["context_reader"]["error_change"].update(mean=4.0, lo=1.0, hi=7.0)
    assert validity_libra.libra_checks({}, apply_)[0]["verdict"] == "fails"
    # no planted truth (real data): no context reader, no check
    assert validity_libra.libra_checks({}, {"context_reader": {}}) == []
    # one check per reader
    two = {"context_reader": apply_["context_reader"],
           "context_reader[cast]": {"error_change": {"mean": -9.0, "lo": -13.0, "hi": -5.0,
                                                     "n": 200}}}
    assert [(x["id"], x["verdict"]) for x in validity_libra.libra_checks({}, two)] == [
        ("libra/dcg/context_reader_error<0", "fails"),
        ("libra/dcg/context_reader[cast]_error<0", "holds")]


def test_a_measure_that_cannot_move_is_not_informative_never_a_pass():
    """Table 3's Δ is 0 in every seed of every model
    (the same-group donor left the gender cue intact), so "S_synthetic's Δ no larger" would
    hold trivially; it reads "not informative" with the reason. A Δ with seed spread keeps its
    interval verdict, and every check carries its reason and source file."""
    cls = {"original": {"per_seed": [{"Ratio": 3.0}, {"Ratio": 3.2}, {"Ratio": 2.9}]},
           "synthetic": {"per_seed": [{"Ratio": 1.1}, {"Ratio": 1.0}, {"Ratio": 1.2}]},
           "test_set": {"n_male": 60, "n_female": 30}}
    zero = {"original": {"per_seed": [{"delta": 0.0}] * 3},
            "synthetic": {"per_seed": [{"delta": 0.0}] * 3}}
    out = {c["id"]: c for c in verdicts.explain(validity.table_checks(cls, zero))}
    d = out["classifier/synthetic-original/delta≤0"]
    assert d["verdict"] == "not informative"
    assert "no variance" in d["reason"] and "changed no gender call" in d["reason"]
    assert d["source"] == "metrics/artifact.json"
    r = out["classifier/synthetic-original/ratio<0"]
    assert r["verdict"] == "holds" and r["source"] == "metrics/classification.json"
    assert r["reason"].startswith("the 95 % CI [") and "lies entirely below 0" in r["reason"]
    assert verdicts.summary(out.values())["not_informative"] == 1
    md = verdicts.markdown(list(out.values()))
    assert "**not informative**" in md and "| artifact.json |" in md
    assert "Not informative: classifier: S_synthetic's Table 3" in md
    # with seed spread the same check is judged, and a one-sided pass says what it is
    moved = {"original": {"per_seed": [{"delta": 5.0}, {"delta": 6.0}, {"delta": 4.0}]},
             "synthetic": {"per_seed": [{"delta": 5.0}, {"delta": 4.0}, {"delta": 6.0}]}}
    d = {c["id"]: c for c in verdicts.explain(validity.table_checks(cls, moved))}[
        "classifier/synthetic-original/delta≤0"]
    assert d["verdict"] == "holds" and "one-sided" in d["reason"]
    assert "(one-sided)" in verdicts.markdown([d])
    # constant but different rows: still no interval to judge from
    const = {"original": {"per_seed": [{"delta": 9.0}] * 3},
             "synthetic": {"per_seed": [{"delta": 0.0}] * 3}}
    d = {c["id"]: c for c in verdicts.explain(validity.table_checks(cls, const))}[
        "classifier/synthetic-original/delta≤0"]
    assert d["verdict"] == "not informative" and d["mean"] == -9.0
    # one seed: no interval, inconclusive with the reason; earlier verdicts keep theirs
    one = verdicts.explain([{"id": "x/a<0", "claim": "a", "expect": "<", "reference": 0.0,
                             "mean": -1.0, "lo": None, "hi": None, "n": 1,
                             "verdict": "inconclusive", "source": "metrics/probe.json"},
                            {"id": "x/b<0", "claim": "b", "expect": "<", "reference": 0.0,
                             "mean": 0.0, "lo": 0.0, "hi": 0.0, "n": 3,
                             "verdict": "not testable", "reason": "balanced"}])
    assert "fewer than 2 seeds" in one[0]["reason"]
    # an "≈" claim (the sweep's at b = 0) says whether the CI covers its reference
    near = verdicts.explain([{"id": "x/c≈1", "claim": "c", "expect": "≈", "reference": 1.0,
                              "mean": 1.1, "lo": 0.9, "hi": 1.3, "n": 3, "verdict": "holds"}])
    assert near[0]["reason"] == "the 95 % CI [+0.9, +1.3] covers 1 (no margin)"
    assert one[1]["verdict"] == "not testable" and one[1]["reason"] == "balanced"


def test_leakage_claim_and_its_accuracy_matched_twin():
    """Paper 000's Leakage claim is checked beside Leakage@F1; a model that
    leaks less only because it is noisier passes the first and not the second. The plain
    Leakage check is validated by the controls' Leakage, the F1 one has no control."""
    cls = {"original": {"per_seed": [{"Leakage": 1.0, "Leakage_F1": 1.0},
                                     {"Leakage": 2.0, "Leakage_F1": 2.0},
                                     {"Leakage": 1.5, "Leakage_F1": 1.5}]},
           "synthetic": {"per_seed": [{"Leakage": -9.0, "Leakage_F1": 1.2},
                                      {"Leakage": -10.0, "Leakage_F1": 2.1},
                                      {"Leakage": -9.5, "Leakage_F1": 1.4}]},
           "test_set": {"n_male": 60, "n_female": 30}}
    out = {c["id"]: c for c in verdicts.explain(validity.table_checks(cls, {}))}
    assert out["classifier/synthetic-original/leakage<0"]["verdict"] == "holds"
    assert out["classifier/synthetic-original/leakage<0"]["mean"] == pytest.approx(-11.0)
    assert out["classifier/synthetic-original/leakage_f1<0"]["verdict"] == "inconclusive"
    bad = {"classifier": {"context_reader": {"Leakage": {"verdict": "does not match"}}}}
    judged = {c["id"]: c["verdict"] for c in verdicts.apply_controls(list(out.values()), bad)}
    assert judged["classifier/synthetic-original/leakage<0"] == "metric not valid on this data"
    assert judged["classifier/synthetic-original/leakage_f1<0"] == "inconclusive"


def test_table3_positive_control_decides_whether_the_test_can_move():
    """Table 3 beside its positive control (the same parts filled from the
    other group). A Δ of 0 in every seed is evidence only when the control moved; a Δ with
    spread keeps its verdict, and the reason says whether the other group's parts moved calls
    more than the same group's."""
    cls = {"test_set": {"n_male": 60, "n_female": 30}}
    zero = {r: {"per_seed": [{"delta": 0.0}] * 3, "delta": {"mean": 0.0}}
            for r in ("original", "synthetic")}

    def check(art):
        return {c["id"]: c for c in verdicts.explain(validity.table_checks(cls, art))}[
            "classifier/synthetic-original/delta≤0"]

    still = {r: {**v, "delta_control": {"mean": 0.0, "lo": 0.0, "hi": 0.0}}
             for r, v in zero.items()}
    d = check(still)
    assert d["verdict"] == "not informative"
    assert "no variance" in d["reason"] and "positive control does not move either" in d["reason"]
    moved = {"original": {**zero["original"],
                          "delta_control": {"mean": 40.0, "lo": 25.0, "hi": 55.0}},
             "synthetic": {**zero["synthetic"],
                           "delta_control": {"mean": 60.0, "lo": 45.0, "hi": 75.0}}}
    d = check(moved)
    assert d["verdict"] == "holds"          # 0 <= 0, now meaningful
    assert "moves it: original +40 [+25, +55]; synthetic +60 [+45, +75]" in d["reason"]
    # Δ with spread, control equal to it (the default: heads and hands drawn alike)
    spread = {"original": {"per_seed": [{"delta": 5.0}, {"delta": 6.0}, {"delta": 4.0}],
                           "delta": {"mean": 5.0},
                           "delta_control": {"mean": 5.0, "lo": 1.0, "hi": 9.0}},
              "synthetic": {"per_seed": [{"delta": 5.0}, {"delta": 4.0}, {"delta": 6.0}],
                            "delta": {"mean": 5.0},
                            "delta_control": {"mean": 5.0, "lo": 1.0, "hi": 9.0}}}
    d = check(spread)
    assert d["verdict"] == "holds" and "no more than with the same group's parts" in d["reason"]
    spread["synthetic"]["delta_control"] = {"mean": 30.0, "lo": 20.0, "hi": 40.0}
    d = check(spread)
    assert "synthetic +30 [+20, +40]" in d["reason"] and "no more than" not in d["reason"]
    # no control recorded (an older artifact.json): the check is as before
    d = check({r: {"per_seed": v["per_seed"]} for r, v in spread.items()})
    assert "control" not in d and d["verdict"] == "holds"


def test_inconclusive_reason_says_how_many_seeds_would_decide():
    # the foreign set's S_synthetic masked-AUC difference (one CI run): -7.5 [-22.3,
    # +7.4] over 5 seeds: half-width 14.85, so 5 (14.85 / 7.5)^2 = 19.6 -> about 20 seeds
    from biaslab.analysis import verdicts
    c = {"id": "classifier/synthetic-original/masked_auc<0", "claim": "x", "expect": "<",
         "reference": 0.0, "mean": -7.5, "lo": -22.3, "hi": 7.4, "n": 5,
         "verdict": "inconclusive", "source": "metrics/classification.json"}
    r = verdicts.explain([c])[0]["reason"]
    assert "contains 0" in r and "about 20 seeds per row, not 5" in r
    # an effect of exactly the reference: no estimate
    assert "seeds per row" not in verdicts.explain([{**c, "mean": 0.0}])[0]["reason"]


def test_attribute_preconditions_from_the_attribute_controls():
    """Metrics/controls_attribute.json's verdicts become precondition rows of
    validity.json (the same rule as the gender controls'); gender's skip record says why."""
    from biaslab.analysis import verdicts
    ca = {"attribute": "skin", "classifier": {
              "oracle": {"Leakage": {"verdict": "matches"}},
              "amplifier@0.5": {"Leakage": {"verdict": "does not match"}},
              "blind": {"LK_M": {"verdict": "matches"}, "LK_D": {"measured": {}}}},
          "captioner": {"human": {"LIC": {"verdict": "matches"}},
                        "amplifier@0.5": {"LIC": {"verdict": "inconclusive"}}}}
    out = verdicts.attribute_precondition_rows(ca)
    assert out["attribute"] == "skin"
    rows = {(r["task"], r["metric"]): r for r in out["rows"]}
    assert set(rows) == {("classifier", "Leakage"), ("classifier", "LK_M"),
                         ("captioner", "LIC")}
    assert rows[("classifier", "Leakage")]["valid"] is False
    assert rows[("classifier", "Leakage")]["not_matching"] == ["amplifier@0.5"]
    # an amplifier the run cannot resolve leaves the metric unvalidated (for want of power)
    assert rows[("captioner", "LIC")]["valid"] is False
    assert rows[("captioner", "LIC")]["inconclusive"] == ["amplifier@0.5"]
    skip = verdicts.attribute_precondition_rows({"attribute": "gender", "skipped": "its controls"})
    assert skip == {"attribute": "gender", "skipped": "its controls"}
    assert "skipped" in verdicts.attribute_precondition_rows(None)
    # a task the stage skipped (data without captions) gives no row
    ca["captioner"] = {"skipped": "the data has no captions"}
    assert {r["task"] for r in verdicts.attribute_precondition_rows(ca)["rows"]} == {"classifier"}


def test_decide_gives_every_check_its_margin_and_the_four_outcomes():
    """Hand-computed: Original's objects sensitivity is 0.31 (mean of 0.30, 0.32, 0.31), so
    every check against Original on the objects gets the margin 0.1 x 0.31 = 0.031."""
    probe = {"classifier": {
        "original": {"objects": _rec([0.30, 0.32, 0.31]), "scene": _rec([0.20, 0.22, 0.21]),
                     "cast": _rec([0.40, 0.41, 0.39])},
        # oversample: objects the same as Original within 0.01: no practical effect
        "oversample": {"objects": _rec([0.31, 0.30, 0.315]), "scene": _rec([0.2, 0.21, 0.22]),
                       "cast": _rec([0.2, 0.6, 0.45])},
        "synthetic": {"objects": _rec([0.0, 0.01, -0.01]), "scene": _rec([0.01, 0.0, -0.01]),
                      "cast": _rec([0.02, -0.01, 0.0])}}}
    raw = {c["id"]: c for c in validity.probe_checks(probe)}
    # before decide: the old one-sided rule lets the noisy cast pass ("reaches 0")
    assert raw["classifier/oversample-original/cast≥0"]["verdict"] == "holds"
    checks = {c["id"]: c for c in validity.decide(list(raw.values()), 0.1)}
    o = checks["classifier/oversample-original/objects<0"]
    assert o["margin"]["delta"] == pytest.approx(0.031)
    assert o["margin"]["effect"] == pytest.approx(0.31)
    # Welch 90 % CI of (0.31, 0.30, 0.315) - (0.30, 0.32, 0.31): inside +-0.031
    assert -0.031 < o["lo90"] and o["hi90"] < 0.031
    assert o["verdict"] == "no practical effect"
    # the noisy cast (0.2, 0.6, 0.45 vs 0.40, 0.41, 0.39): the one-sided 5 % test cannot rule
    # out a decrease of 0.1 x 0.40 or more
    c = checks["classifier/oversample-original/cast≥0"]
    assert c["margin"]["delta"] == pytest.approx(0.04)
    assert c["verdict"] == "inconclusive" and "seeds per row" in verdicts.explain([c])[0][
        "reason"]
    assert checks["classifier/synthetic-original/objects<0"]["verdict"] == "holds"
    # single-row: the probe's full swing 2 -> margin 0.2
    assert checks["classifier/original/objects>0"]["margin"]["delta"] == pytest.approx(0.2)
    s = verdicts.summary(checks.values())
    assert s["no_practical_effect"] >= 1 and s["n"] == len(checks)
    md = verdicts.markdown(verdicts.explain(list(checks.values())))
    assert "| margin |" in md and "± 0.031" in md
    with pytest.raises(ValueError):
        validity.decide(list(raw.values()), 1.5)


def test_the_continuous_probe_views_get_the_probability_margin_in_their_unit():
    # P(man) 0.5 -> 0.55 on each image: logit(0.55) = 0.2006707; a pair of images moves
    # 2 x 2 x 0.2007 logit units (logit P(man) - logit P(woman), the two outputs apart) and
    # 2 x 0.2007 nats (log P(male caption) - log P(female caption))
    lg = validity.probe_full_swing("classifier_logit", 0.1)
    mg = validity.probe_full_swing("captioner_margin", 0.1)
    assert 0.1 * lg[0] == pytest.approx(4 * 0.2006707, rel=1e-6)
    assert 0.1 * mg[0] == pytest.approx(2 * 0.2006707, rel=1e-6)
    assert validity.probe_full_swing("classifier", 0.1)[0] == 2.0
    assert validity.probe_full_swing("unknown", 0.1) is None


def test_a_fixed_margin_and_a_claim_without_margin():
    c = validity.make_check("libra/dcg/human_correct≥0.97", "x", "≥", 0.97, 0.99, 0.975, 0.997,
                        200, ci90=(0.978, 0.996), margin=validity.fixed_margin(0.0, "the bar"))
    d = validity.decide([c])[0]
    assert d["margin"] == {"delta": 0.0, "basis": "the bar"} and d["verdict"] == "holds"
    c = validity.make_check("classifier/synthetic/domain_gap>0", "y", ">", 0.0, 1.0, -0.5, 2.5, 5)
    d = validity.decide([c])[0]
    assert d["margin"] is None and d["verdict"] == "inconclusive"
    assert "no margin" in verdicts.explain([d])[0]["reason"]


def test_a_bounded_quantity_keeps_its_interval_in_range():
    # masked AUCs 99, 90, 99.9 (%): the t interval reaches past 100; kept at 100
    cls = {"original": {"per_seed": [{"masked_gender_auc": v} for v in (99.0, 90.0, 99.9)]}}
    c = {x["id"]: x for x in validity.table_checks(cls, {})}["classifier/original/masked_auc>50"]
    assert c["hi"] == 100.0 and c["hi90"] <= 100.0 and c["lo"] < c["mean"]
    # the probe's sensitivities (in [-2, 2]) and their differences (in [-4, 4])
    probe = {"classifier": {"original": {"objects": _rec([2.0, 1.9, 0.5])}}}
    o = validity.probe_checks(probe)[0]
    assert o["hi"] == 2.0


def test_degenerate_rows_and_an_absent_effect_make_a_check_not_testable():
    checks = [
        {"id": "classifier/subsample-matched/objects<0", "verdict": "inconclusive", "mean": 0.0},
        {"id": "captioner/subsample-matched/objects<0", "verdict": "holds", "mean": -1.0},
        {"id": "captioner/synthetic-original/cast<0", "verdict": "inconclusive", "mean": 0.0},
        {"id": "captioner/original/cast>0", "verdict": "no practical effect", "mean": 0.01,
         "lo90": -0.05, "hi90": 0.07, "margin": {"delta": 0.2}},
        {"id": "captioner/synthetic-oversample/cast<0", "verdict": "inconclusive", "mean": 0.0},
        {"id": "captioner/libra-original/lic<0", "verdict": "inconclusive", "mean": 0.0},
        {"id": "retrieval/tfidf-random/maxskew@10>0", "verdict": "holds", "mean": 0.1}]
    # the classifier's degenerate rows do not touch the captioner's checks, and back
    out = {c["id"]: c for c in verdicts.apply_degenerate(
        checks, {"classifier": ["subsample"], "captioner": ["matched"]})}
    assert out["classifier/subsample-matched/objects<0"]["verdict"] == "not testable"
    assert "subsample is degenerate" in out["classifier/subsample-matched/objects<0"]["reason"]
    assert out["captioner/subsample-matched/objects<0"]["verdict"] == "not testable"
    assert out["captioner/subsample-matched/objects<0"]["mean"] == -1.0   # effect kept
    assert out["captioner/libra-original/lic<0"]["verdict"] == "inconclusive"
    assert out["retrieval/tfidf-random/maxskew@10>0"]["verdict"] == "holds"
    assert verdicts.check_rows({"id": "captioner/libra-original/lic<0"}) == ["original"]
    assert verdicts.check_rows({"id": "x", "rows": ["a", "original"]}) == ["a", "original"]
    red = {c["id"]: c for c in verdicts.apply_no_effect_to_reduce(checks)}
    assert red["captioner/synthetic-original/cast<0"]["verdict"] == "not testable"
    assert "no practical cast sensitivity" in red["captioner/synthetic-original/cast<0"]["reason"]
    # against over-sampling the premise is not Original's: unchanged
    assert red["captioner/synthetic-oversample/cast<0"]["verdict"] == "inconclusive"
    # an inconclusive premise is no premise
    checks[3] = {**checks[3], "verdict": "inconclusive"}
    red = {c["id"]: c for c in verdicts.apply_no_effect_to_reduce(checks)}
    assert red["captioner/synthetic-original/cast<0"]["verdict"] == "inconclusive"


def test_every_mitigation_gets_a_check_on_every_headline_metric():
    def rows(**cols):
        return {"per_seed": [dict(zip(cols, v)) for v in zip(*cols.values())]}
    cls = {"test_set": {"n_male": 40, "n_female": 20},
           "original": rows(Leakage=[5.0, 6.0, 7.0], masked_gender_auc=[80.0, 82.0, 84.0],
                            Ratio=[2.0, 2.01, 2.02]),
           "oversample": rows(Leakage=[1.0, 2.0, 3.0], masked_gender_auc=[40.0, 42.0, 44.0],
                              Ratio=[2.0, 2.01, 2.02]),
           "matched": rows(Leakage=[9.0, 9.0, 9.0], masked_gender_auc=[50.0, 50.0, 50.0],
                           Ratio=[1.0, 1.0, 1.0])}
    cap = {"test_set": {"n_male": 30, "n_female": 10},
           "original": rows(LIC=[10.0, 11.0, 12.0], Error=[5.0, 5.1, 5.2], Ratio=[4.0, 4.0, 4.2]),
           "augment": rows(LIC=[1.0, 2.0, 3.0], Error=[5.0, 5.1, 5.2], Ratio=[3.0, 3.1, 2.9])}
    out = {c["id"]: c for c in validity.decide(validity.headline_checks(cls, cap), 0.1)}
    assert set(out) == {"classifier/oversample-original/leakage<0",
                        "classifier/oversample-original/masked_auc<0",
                        "classifier/oversample-original/ratio<0",
                        "captioner/augment-original/lic<0", "captioner/augment-original/error<0",
                        "captioner/augment-original/ratio<0"}     # no matched, no Original
    lk = out["classifier/oversample-original/leakage<0"]
    assert lk["mean"] == pytest.approx(-4.0) and lk["verdict"] == "holds"
    assert lk["margin"]["delta"] == pytest.approx(0.6)       # 10 % of Original's 6.0
    # the masked AUC by its distance from 50: |41 ... 44 - 50| = 8 vs Original's 32 -> -24
    au = out["classifier/oversample-original/masked_auc<0"]
    assert au["mean"] == pytest.approx(8.0 - 32.0) and au["margin"]["delta"] == pytest.approx(3.2)
    # the same Ratios: Welch 90 % half-width 2.132 x 0.00816 = 0.017, inside 10 % of 1.01
    assert out["classifier/oversample-original/ratio<0"]["verdict"] == "no practical effect"
    # the same Errors (half-width 0.17 < 0.51); the captioner's Ratio against the test set's 3.0
    assert out["captioner/augment-original/error<0"]["verdict"] == "no practical effect"
    r = out["captioner/augment-original/ratio<0"]
    assert r["mean"] == pytest.approx((0.0 + 0.1 + 0.1) / 3 - (1.0 + 1.0 + 1.2) / 3)
    assert "3.00" in r["claim"] and r["margin"]["delta"] == pytest.approx(0.1 * 3.2 / 3)
    # a gender-balanced persons-masked test set: the classifier's Ratio claim is not testable
    bal = validity.headline_checks({**cls, "test_set": {"n_male": 20, "n_female": 20}}, {})
    assert {c["id"]: c["verdict"] for c in bal}["classifier/oversample-original/ratio<0"] == \
        "not testable"
    # ids another builder already made are left to it
    assert not validity.headline_checks(cls, {}, skip=[
        "classifier/oversample-original/leakage<0", "classifier/oversample-original/ratio<0",
        "classifier/oversample-original/masked_auc<0"])


def test_headline_checks_are_gated_by_their_metrics_controls():
    def rows(**cols):
        return {"per_seed": [dict(zip(cols, v)) for v in zip(*cols.values())]}
    cap = {"test_set": {"n_male": 30, "n_female": 10},
           "original": rows(LIC=[10.0, 11.0, 12.0], Error=[5.0, 6.0, 7.0]),
           "augment": rows(LIC=[1.0, 2.0, 3.0], Error=[1.0, 2.0, 3.0])}
    checks = validity.decide(validity.headline_checks({}, cap), 0.1)
    assert {c["id"]: c["controlled"] for c in checks} == {
        "captioner/augment-original/lic<0": ["captioner", "LIC"],
        "captioner/augment-original/error<0": ["captioner", "Error"]}
    ctl = {"captioner": {"human": {"LIC": {"verdict": "inconclusive"},
                                   "Error": {"verdict": "matches"}}}}
    out = {c["id"]: c["verdict"] for c in verdicts.apply_controls(checks, ctl)}
    assert out == {"captioner/augment-original/lic<0": "metric not valid on this data",
                   "captioner/augment-original/error<0": "holds"}


def test_the_domain_numbers_stay_beside_a_check_its_controls_do_not_validate():
    dom = {"gap": {"mean": 13.4, "lo": 7.4, "hi": 19.4, "n": 5}, "probe_auc": 100.0,
           "verdict": "holds"}
    c = {"id": "classifier/synthetic-original/leakage<0", "claim": "x", "expect": "<",
         "reference": 0.0, "mean": -8.0, "lo": -10.0, "hi": -5.9, "n": 5,
         "verdict": "metric not valid on this data", "reason": "its controls", "domain": dom}
    r = verdicts.explain([c])[0]["reason"]
    assert r.startswith("its controls; domain check: S_synthetic's object mAP") and \
        "+13.4 [+7.4, +19.4]" in r and "against the paper" not in r
