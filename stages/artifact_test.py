"""Stage `artifact_test`: synthetic-artifact test of paper 000 sec. 3.3 / Table 3
(biaslab.analysis.artifact; params `artifact`, `classifier.seeds`, `generate.*` for the backend).

A random body part of the main person of every test image is inpainted by the generation
backend (render: the synthetic generator re-draws the part for the person's own gender;
copy_paste: cv2 inpainting + a patch of a same-group donor; sd_inpaint: SD with the caption as
prompt); the gender-prediction ratio r = #man / #woman of the classifiers trained on
`artifact.datasets` (original, augment, synthetic) is compared on the original and the
inpainted images (persons visible): Delta = 100 |Ratio_orig - Ratio_inp| / Ratio_orig.

in:  data/models/classifier/<dataset>/<dataset>-<seed>/, data/prepared/{images,persons,captions}.parquet,
     data/labels/images.parquet, data/split.parquet, data/features/images*.npy
Over the classifier seeds (biaslab.analysis.artifact.artifact_summary): Delta from the SEED-MEAN ratios
(as Table 3 reports one Delta per model), with a percentile bootstrap 95 % CI over test images,
beside the per-seed ratios and Deltas (biaslab.runtime.stats records). Gender outputs count as
predictions where they are >= their threshold (biaslab.classify.gender_thresholds; 0.5).

out: data/artifact/ (images/<image_id>.jpg or .png (render), parts.parquet: image, person, part, prompt, donor),
     metrics/artifact.json:
       {<dataset>: {ratio_orig, ratio_inp: record (per-seed raw r), delta: {mean, ci95, lo, hi,
                    n, n_boot, n_undefined} (Delta of the seed means, bootstrap CI),
                    delta_control: the same Delta with the parts filled from the OTHER group
                    (data/artifact/control/; the positive control),
                    delta_artifact: Delta(backend) - Delta(the same parts re-drawn by the
                    generator), bootstrap CI over images (0 by construction
                    on render runs, "not available" without a generator),
                    delta_seeds: record (per-seed Delta), flip_rate: record,
                    per_seed: [{seed, ratio_orig, ratio_inp, delta, flip_rate, n_man_orig,
                                n_woman_orig, n_both_orig, n_neither_orig, ..._inp}]},
        test_set: {n_images, n_male, n_female, ratio_gt, backend, parts, ...}}
     (record = {mean, ci95, std, n, n_inf, n_missing, sign})
"""
import time

from biaslab.analysis.artifact import (DELTA_ARTIFACT_BY_CONSTRUCTION, artifact_scores,
                                       build_inpainted_test_set, caption_prompt, classifier_calls,
                                       delta_artifact, table3_json)
from biaslab.counterfactual.generate import make_backend
from biaslab.classify import GenderObjectClassifier, gender_thresholds, model_features, test_table
from biaslab.models.features import load_features, set_threads
from biaslab.runtime.io import (InputError, json_number, load_params, read_parquet, run_stage,
                                stage_parser, write_json, write_parquet)
from biaslab.runtime import runstats
from biaslab.runtime.paths import model_dir

PREP = "data/prepared"
OUT = "data/artifact"


def inpainting_backend(a: dict, g: dict) -> str:
    """The backend that inpaints the test images' body parts: ``artifact.backend`` when set,
    else ``generate.backend``, so the test images carry the kind of artifacts the generated
    training images carry (render: none; it re-draws the part for the person's own gender,
    ``biaslab.analysis.artifact``)."""
    return a.get("backend") or g["backend"]


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    a, g, c = params["artifact"], params["generate"], params["classifier"]
    fp = params.get("features", {})
    cache = fp.get("cache_dir", "data/cache/features")
    fbs = int(fp.get("batch_size") or 32)   # encoding batch (1: fastest on CPU, one thread)
    words = params.get("label", {}).get("words", "lic")
    set_threads(c.get("threads", 1))
    images = read_parquet(f"{PREP}/images.parquet")
    persons = read_parquet(f"{PREP}/persons.parquet")
    labels = read_parquet("data/labels/images.parquet")
    split = read_parquet("data/split.parquet")
    test = test_table(images, labels, split, read_parquet(f"{PREP}/objects.parquet"), persons)
    test = test[test["n_persons"] > 0]
    caps = read_parquet(f"{PREP}/captions.parquet").sort_values("caption_id")
    caps = caps.groupby("image_id")["caption"].apply(list)
    test = test.assign(prompt=[caption_prompt(caps.get(i, []), gnd, words)
                               for i, gnd in zip(test["image_id"], test["gender"])])
    t0 = time.perf_counter()
    g = {**g, "backend": inpainting_backend(a, g)}
    try:     # the same construction as stage generate (one donor ranking)
        backend = make_backend(g, persons, images, labels, split,
                               data_root=params.get("data", {}).get("root"))
    except ValueError as e:
        raise InputError("params.yaml", str(e)) from e
    def inpaint(bk, out_dir, other_group=False):   # the same parts per image for any backend
        return build_inpainted_test_set(
            test, persons, bk, out_dir, seed=int(a.get("seed", 0)),
            parts=a.get("parts", ["head", "left_hand", "right_hand"]),
            radius_scale=float(a.get("radius_scale", 1.0)),
            box_fraction=float(a.get("box_fraction", 0.3)),
            guidance_scale=float(g.get("guidance_scales", [7.5])[0]),
            other_group=other_group, progress=True)

    parts = inpaint(backend, f"{OUT}/images")
    gen_seconds = time.perf_counter() - t0
    if parts.empty:
        raise InputError("data/split.parquet", "no test image with a person to inpaint")
    write_parquet(f"{OUT}/parts.parquet", parts)
    redraw, why_no_redraw = None, None
    if g["backend"] != "render":
        # the same parts of the same images re-drawn by the generator: Δ_artifact's baseline
        try:
            rb = make_backend({**g, "backend": "render"}, persons, images, labels, split,
                              data_root=params.get("data", {}).get("root"))
            redraw = inpaint(rb, f"{OUT}/redraw").set_index("image_id").loc[
                parts["image_id"]].reset_index()
        except (InputError, ValueError) as e:   # real data: no generator to re-draw with
            why_no_redraw = f"not available: {e}"
    # the positive control: the same parts filled from the other group, so
    # the gender cue can change; a test whose control moves no call cannot move at all
    control = inpaint(backend, f"{OUT}/control", other_group=True).set_index("image_id").loc[
        parts["image_id"]].reset_index()
    orig = test.set_index("image_id").loc[parts["image_id"]].reset_index()[["image_id", "path"]]
    ids, base = load_features()
    out = {}
    for dataset in a.get("datasets", ["original", "augment", "synthetic"]):
        per_seed, calls, calls_rd, calls_ctl = [], [], [], []
        for seed in c["seeds"]:
            clf = GenderObjectClassifier.load(model_dir("classifier", dataset, seed))
            thr = gender_thresholds(clf)
            # the first classifier.backbones' models; base features only if they match
            fo = model_features(clf, orig, ids, base, cache, batch_size=fbs,
                                base_backbone=fp.get("backbone", "efficientnet_lite0"))
            fi = model_features(clf, parts[["image_id", "path"]], ids, base, cache, derived=True,
                                batch_size=fbs, executor=params.get("executor"))
            po, pi = clf.gender_proba(fo), clf.gender_proba(fi)
            s = artifact_scores(po, pi, thr)
            row = {"seed": int(seed), **{k: json_number(v) for k, v in s.items()}}
            calls.append((*classifier_calls(*po, thr), *classifier_calls(*pi, thr)))
            fc = model_features(clf, control[["image_id", "path"]], ids, base, cache,
                                derived=True, batch_size=fbs, executor=params.get("executor"))
            pc = clf.gender_proba(fc)
            calls_ctl.append((*classifier_calls(*po, thr), *classifier_calls(*pc, thr)))
            row["delta_control"] = json_number(artifact_scores(po, pc, thr).get("delta"))
            if redraw is not None:
                fr = model_features(clf, redraw[["image_id", "path"]], ids, base, cache,
                                    derived=True, batch_size=fbs,
                                    executor=params.get("executor"))
                pr = clf.gender_proba(fr)
                sr = artifact_scores(po, pr, thr)
                calls_rd.append((*classifier_calls(*po, thr), *classifier_calls(*pr, thr)))
                d_b, d_r = s.get("delta"), sr.get("delta")
                row["delta_redraw"] = json_number(d_r)
                row["delta_artifact"] = (json_number(d_b - d_r) if d_b is not None
                                         and d_r is not None else None)
            elif g["backend"] == "render":
                row["delta_artifact"] = 0.0
            per_seed.append(row)
        out[dataset] = table3_json(calls, per_seed, seed=int(a.get("seed", 0)))
        out[dataset]["delta_control"] = table3_json(
            calls_ctl, per_seed, seed=int(a.get("seed", 0)))["delta"]
        if redraw is not None:
            out[dataset]["delta_artifact"] = {
                k: json_number(v) for k, v in delta_artifact(
                    calls, calls_rd, seed=int(a.get("seed", 0))).items()}
        elif g["backend"] == "render":
            out[dataset]["delta_artifact"] = {"mean": 0.0, "ci95": 0.0, "lo": 0.0, "hi": 0.0,
                                              "n": int(len(parts)),
                                              "note": DELTA_ARTIFACT_BY_CONSTRUCTION}
        else:
            out[dataset]["delta_artifact"] = {"mean": None, "note": why_no_redraw}
    n_m = int((parts["gender"] == "male").sum())
    n_f = int((parts["gender"] == "female").sum())
    out["test_set"] = {"n_images": int(len(parts)), "n_male": n_m, "n_female": n_f,
                       "ratio_gt": json_number(n_m / n_f) if n_f else None,
                       "backend": g["backend"],
                       "parts": {k: int(v) for k, v in parts["part"].value_counts()
                                 .sort_index().items()},
                       "mean_mask_pixels": json_number(float(parts["mask_pixels"].mean())),
                       "inpaint_seconds": round(gen_seconds, 1)}
    out, run = runstats.split(out)  # the inpainting time: benchmarks/runs/, not metrics/
    write_json("metrics/artifact.json", out)
    runstats.publish("artifact_test", run)
    for d, v in out.items():
        if d != "test_set":
            print(d, {"ratio_orig": v["ratio_orig"]["mean"], "ratio_inp": v["ratio_inp"]["mean"],
                      "delta": v["delta"]["mean"], "delta_ci95": v["delta"]["ci95"]})
    return 0



if __name__ == "__main__":
    run_stage(main)
