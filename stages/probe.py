"""Stage `probe`: causal attribute sensitivity of every trained classifier and captioner on the
synthetic probe pairs (biaslab.analysis.probe; paper 000 sec. 2.1: does a model still use a planted
context attribute -- labeled objects, scene, the unlabeled colour cast -- once the person is
masked?).

params: data.root (the synthetic dataset with probe/pairs.csv), classifier.datasets,
        classifier.methods (the model-level baselines, after the datasets), classifier.seeds, classifier.blackout, classifier.blackout_dilate_px,
        classifier.blackout_fill (the Ratio protocol's person masking), captioner.datasets,
        captioner.seeds, captioner.beam, captioner.max_len, captioner.no_repeat_ngram,
        label.words, generate.backend (recorded: which counterfactuals the models saw), probe
        (min_seeds_t, n_boot, seed); features.cache_dir only locates the feature cache
in:   <data.root>/probe/ (written by stage synthesize), data/models/classifier/<dataset>/<dataset>-<seed>/,
      data/models/captioner/<dataset>/<dataset>-<seed>/, data/features/images*.npy
out:  data/probe/masked/*.png (person-blacked-out probe images), data/probe/neutral/*.png (the
      masked context-free images), data/probe/empty/*.png (both drawn without their person:
      the reference of the mask-neutrality test), data/probe/pairs.parquet (one
      row per model x pair: model, dataset, seed, attribute, pair, out_female, out_male,
      sensitivity, and the caption of each image for captioners), metrics/probe.json
      ({"available", "backend", "n_pairs": {attribute: n}, "classifier": {dataset:
      {attribute: record}} (output P(man) - P(woman)), "classifier_logit": {...} (the same
      pairs on the logit margin logit P(man) - logit P(woman), which does not saturate:
      biaslab.analysis.probe.classifier_logit_output), "captioner": {...} (the sampled gender word,
      -1 / 0 / +1), "captioner_margin": {...} (the teacher-forced margin log P(male version)
      - log P(female version) of one caption pair per probe pair, scored under both images:
      biaslab.analysis.probe.caption_margin_output; issue 23 item 5), "ci_rule", "blackout", and
      "classifier_na": {name: why} for models without gender outputs (adversarial), which
      the probe's output P(man) - P(woman) does not exist for}, "mask_neutral": {dataset:
      biaslab.analysis.probe.mask_neutral_record on the context-free images, with "context": the same
      on the probe pairs}; record: see
      biaslab.analysis.probe.summarize_sensitivity). Without probe pairs (real data) metrics/probe.json
      says "not available (no planted truth)" and the stage exits 0.
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from biaslab import captioner as C
from biaslab.analysis import probe as P
from biaslab.classify import GenderObjectClassifier, encode_files, file_id, model_features
from biaslab.models.features import load_features, set_threads
from biaslab.runtime.io import InputError, load_params, write_json, write_parquet
from biaslab.data.synthetic import read_neutral, read_probe
from biaslab.runtime.parallel import map_jobs
from biaslab.runtime.paths import model_dir

OUT = Path("data/probe")
METRICS = "metrics/probe.json"
CI_RULE = (f"ci95/lo/hi: t interval over training seeds when there are >= "
           f"{P.MIN_SEEDS_T} seeds, else percentile bootstrap over probe pairs of the "
           f"seed-averaged pair sensitivities (ci_method says which); 'seeds' and 'pooled' "
           f"hold both")


def _not_available(root: str, backend: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write_parquet(OUT / "pairs.parquet", pd.DataFrame(
        columns=["model", "dataset", "seed", "attribute", "pair", "out_female", "out_male",
                 "sensitivity"]))
    write_json(METRICS, {"available": False,
                         "reason": f"not available (no planted truth): {root} has no probe "
                                   f"pairs (only the synthetic dataset has them)",
                         "backend": backend, "n_pairs": {}, "classifier": {}, "classifier_logit": {},
                         "captioner": {}})
    print(f"probe: no probe pairs under {root}: not available (no planted truth)")


def main() -> None:
    params = load_params()
    root = params["data"]["root"]
    if not Path(root).is_dir():
        raise InputError(root, "missing: data.root is not a directory")
    backend = params.get("generate", {}).get("backend")
    pairs = read_probe(root)
    if pairs is None or pairs.empty:
        _not_available(root, backend)
        return
    c, cap = params["classifier"], params["captioner"]
    pp = params.get("probe") or {}
    kw = dict(min_seeds_t=int(pp.get("min_seeds_t", P.MIN_SEEDS_T)),
              n_boot=int(pp.get("n_boot", 2000)), seed=int(pp.get("seed", 0)))
    words = params.get("label", {}).get("words", "lic")
    cache = params.get("features", {}).get("cache_dir", "data/cache/features")
    # encoding batch: features.batch_size (1 is fastest at one thread on CPU,
    # benchmarks/results/features.json); it does not change the cached features' meaning
    fbs = int(params.get("features", {}).get("batch_size") or 32)
    set_threads(c.get("threads", 1))
    masked = P.blackout_probe(pairs, OUT / "masked",
                              sources=tuple(c.get("blackout", ["box"])),
                              dilate_px=int(c.get("blackout_dilate_px", 0)),
                              fill=c.get("blackout_fill", 0), progress=True)
    table = masked[["path"]].assign(image_id=[file_id(p) for p in masked["path"]])
    rows, out = [], {"classifier": {}, "classifier_logit": {}, "captioner": {}}

    neutral = read_neutral(root)
    if neutral is not None and not neutral.empty:
        # the mask-neutrality test (issue 23 item 2): masked images and the same images drawn
        # without their person, context-free (neutral.csv) and in context (the probe pairs)
        empty = P.person_free_images(neutral, root, OUT / "empty", progress=True)
        empty_ctx = P.person_free_images(pairs, root, OUT / "empty", progress=True)
        neutral = P.blackout_probe(neutral, OUT / "neutral",
                                   sources=tuple(c.get("blackout", ["box"])),
                                   dilate_px=int(c.get("blackout_dilate_px", 0)),
                                   fill=c.get("blackout_fill", 0), progress=True)
        ntables = {k: f[["path"]].assign(image_id=[file_id(p) for p in f["path"]])
                   for k, f in (("masked", neutral), ("empty", empty),
                                ("empty_ctx", empty_ctx))}
        out["mask_neutral"] = {}
    ids, base = load_features()
    for d in list(c["datasets"]) + [m for m in (c.get("methods") or [])
                                    if m not in c["datasets"]]:
        per_seed, per_seed_logit, sums = {}, {}, {"masked": [], "empty": [], "ctx": [],
                                                   "empty_ctx": []}
        for s in c["seeds"]:
            clf = GenderObjectClassifier.load(model_dir("classifier", d, s))
            if not clf.has_gender:
                out.setdefault("classifier_na", {})[d] = "no gender outputs"
                break
            feats = model_features(clf, table, ids, base, cache, derived=True, batch_size=fbs,
                                   executor=params.get("executor"))
            probs = clf.gender_proba(feats)
            sens = P.pair_sensitivities(masked, P.classifier_output(*probs))
            per_seed[int(s)] = sens
            # the same pairs on the logit margin: no ceiling for saturated outputs
            per_seed_logit[int(s)] = P.pair_sensitivities(masked,
                                                          P.classifier_logit_output(*probs))
            rows.append(sens.assign(model="classifier", dataset=d, seed=int(s)))
            if "mask_neutral" in out:
                # what the mask itself reads as: gender calls on masked persons and on the
                # same images without the person
                sums["ctx"].append(probs)
                for k, t in ntables.items():
                    sums[k].append(clf.gender_proba(model_features(
                        clf, t, ids, base, cache, derived=True, batch_size=fbs,
                        executor=params.get("executor"))))
        if per_seed:
            out["classifier"][d] = P.summarize_sensitivity(per_seed, **kw)
            out["classifier_logit"][d] = P.summarize_sensitivity(per_seed_logit, **kw)
        if sums["masked"]:
            rec = P.mask_neutral_record(sums["masked"], neutral["value"], empty=sums["empty"],
                                        n_boot=kw["n_boot"], seed=kw["seed"])
            # in context: the probe pairs' masked images vs the same scenes without the person
            rec["context"] = P.mask_neutral_record(sums["ctx"], pairs["person_gender"],
                                                   empty=sums["empty_ctx"],
                                                   n_boot=kw["n_boot"], seed=kw["seed"])
            out["mask_neutral"][d] = rec

    feats_by_encoder: dict = {}
    cap_dirs = [(d, s) for d in cap["datasets"] for s in cap["seeds"]]
    missing = [f"{d}-{s}" for d, s in cap_dirs
               if not Path(f"{model_dir('captioner', d, s)}/{C.CONFIG_FILE}").exists()]
    if missing:
        raise InputError("data/models/captioner", f"no trained captioner for {missing}")
    # masked probe images encoded once, before the fork (content-keyed feature cache)
    first = C.Captioner.load(model_dir("captioner", *cap_dirs[0]))
    key0 = (first.config.image_encoder, first.config.image_size)
    feats_by_encoder[key0] = encode_files(masked["path"].tolist(), cache, key0[0],
                                          image_size=key0[1], batch_size=fbs,
                                          num_threads=first.config.num_threads,
                                          executor=params.get("executor"))

    def caption_pairs(job: tuple[str, int]):
        d, s = job
        model = C.Captioner.load(model_dir("captioner", d, s))
        key = (model.config.image_encoder, model.config.image_size)
        if key not in feats_by_encoder:
            # content-keyed like the classifiers' derived images (same feature cache)
            feats_by_encoder[key] = encode_files(
                masked["path"].tolist(), cache, key[0], image_size=key[1],
                batch_size=fbs, num_threads=model.config.num_threads)
        caps = model.generate(feats_by_encoder[key], beam=cap.get("beam"),
                              max_len=cap.get("max_len"),
                              no_repeat_ngram=cap.get("no_repeat_ngram"))
        sens = P.pair_sensitivities(masked, P.caption_output(caps, words))
        by = dict(zip(zip(masked["attribute"], masked["pair"], masked["value"]), caps))
        # the continuous probe: both images of a pair score the SAME caption pair (the
        # female-associated image's caption, gendered both ways), so only the image differs
        texts = [P.gendered_versions(by[(a, k, "female")], words)
                 for a, k in zip(masked["attribute"], masked["pair"])]
        margin = P.pair_sensitivities(masked, P.caption_margin_output(
            model, feats_by_encoder[key], texts))
        return sens.assign(
            caption_female=[by[(a, k, "female")] for a, k in zip(sens["attribute"],
                                                                  sens["pair"])],
            caption_male=[by[(a, k, "male")] for a, k in zip(sens["attribute"],
                                                              sens["pair"])],
            margin_out_female=margin["out_female"].to_numpy(),
            margin_out_male=margin["out_male"].to_numpy(),
            margin_sensitivity=margin["sensitivity"].to_numpy())

    # one job per captioner on captioner.workers processes; results in job order
    jobs = [(d, int(s)) for d, s in cap_dirs]
    by_job = dict(zip(jobs, map_jobs(caption_pairs, jobs, cap.get("workers", 1))))
    out["captioner_margin"] = {}
    for d in cap["datasets"]:
        per_seed, per_seed_margin = {}, {}
        for s in cap["seeds"]:
            sens = by_job[(d, int(s))]
            mcols = ["margin_out_female", "margin_out_male", "margin_sensitivity"]
            per_seed[int(s)] = sens.drop(columns=mcols)
            per_seed_margin[int(s)] = sens[["attribute", "pair"]].assign(
                out_female=sens["margin_out_female"], out_male=sens["margin_out_male"],
                sensitivity=sens["margin_sensitivity"])
            rows.append(sens.assign(model="captioner", dataset=d, seed=int(s)))
        out["captioner"][d] = P.summarize_sensitivity(per_seed, **kw)
        out["captioner_margin"][d] = P.summarize_sensitivity(per_seed_margin, **kw)

    for d, r in (out.get("mask_neutral") or {}).items():
        print(f"mask neutrality {d}: Ratio_E masked {r['ratio_expected']}, person-free "
              f"{r['ratio_expected_empty']}, mask effect {r['mask_effect']} on "
              f"{r['n_images']} context-free images; in context mask effect "
              f"{r['context']['mask_effect']} on {r['context']['n_images']} images")
    n_pairs = {a: int(n) for a, n in
               pairs.drop_duplicates(["attribute", "pair"])["attribute"].value_counts()
               .sort_index().items()}
    write_parquet(OUT / "pairs.parquet", pd.concat(rows, ignore_index=True))
    write_json(METRICS, {"available": True, "backend": backend, "n_pairs": n_pairs,
                         **out, "ci_rule": CI_RULE,
                         "blackout": list(c.get("blackout", ["box"])),
                         "mean_masked_fraction": float(np.mean(masked["masked_fraction"]))})
    for model, by_d in ((k, v) for k, v in out.items()
                        if k not in ("classifier_na", "mask_neutral")):
        for d, recs in by_d.items():
            print(f"probe {model} {d}: " + ", ".join(
                f"{a}={r['mean']:+.3f}±{r['ci95'] if r['ci95'] is not None else float('nan'):.3f}"
                for a, r in recs.items()))


if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        sys.exit(f"probe: {e}")
