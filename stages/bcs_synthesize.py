"""DVC stage `bcs_synthesize`: LIBRA's Biased Caption Synthesis (paper 003 Eqs. 3-8, supp. 1.3,
Table 1; logic: biaslab.libra.bcs.synthesize).

A_CG (Gender-swapping, Eqs. 3-4) from f_g's mispredictions on D_g; D_T5 (Eq. 5) from the T5 of
stage `t5_finetune` (15% of the content words masked, never gender words; WordNet-synonym edits
dropped); the authenticity classifier f_a (supp. Eqs. 2-3, same kind as f_g) is trained here
on D_T5,g vs D_g and drops captions with p(auth) <= alpha; A_GC (T5-generation, Eqs. 6-7:
predicted gender g and d > delta) and A (Merged, Eq. 8: swap of F_PG(D_T5,g)); the types are
mixed in the Table 1 ratio `libra.mix` up to `libra.target_count`.

Reads  data/labels/captions.parquet, data/split.parquet, data/libra/f_g/, data/libra/t5/,
       params `libra` (words, seed, threads, max_train_captions, classifier, auth_classifier,
       auth_max_train, mask_rate, alpha, delta, mix, target_count, samples_per_caption, top_k,
       temperature, batch_size, pos, source, auth_folds)
Writes data/libra/synthesized.parquet (image_id, caption_id, original, biased, type,
       original_gender, biased_gender, d), data/libra/candidates.parquet (every T5 sample with
       its filter status, p_auth, p(gender), d), metrics/bcs.json, plots/libra/samples.md
Progress: tqdm bars on stderr over the T5 samples, f_a's training batches and f_g's encoding
       (throttled lines when stderr is not a terminal; BIASLAB_PROGRESS=0 turns them off).

Usage: python stages/bcs_synthesize.py [--params params.yaml] [--captions ...] [--split ...]
       [--f-g data/libra/f_g] [--t5 data/libra/t5] [--out data/libra]
       [--metrics metrics/bcs.json] [--samples plots/libra/samples.md]
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from biaslab.models import textclf
from biaslab.runtime.io import (InputError, atomic_path, load_params, read_parquet, run_stage,
                                stage_parser, write_json, write_parquet)
from biaslab.libra import bcs, t5
from biaslab.runtime import runstats
from biaslab.runtime.io import skip_without_captions


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--captions", default="data/labels/captions.parquet")
    ap.add_argument("--split", default="data/split.parquet")
    ap.add_argument("--f-g", default="data/libra/f_g")
    ap.add_argument("--t5", default="data/libra/t5")
    ap.add_argument("--out", default="data/libra")
    ap.add_argument("--metrics", default="metrics/bcs.json")
    ap.add_argument("--samples", default="plots/libra/samples.md")
    a = ap.parse_args(argv)
    p = load_params(a.params)["libra"]
    if skip_without_captions("bcs_synthesize", [f"{a.out}/synthesized.parquet",
                                                f"{a.out}/candidates.parquet", a.metrics,
                                                a.samples], a.captions):
        return 0
    t0 = time.perf_counter()
    seed = p.get("seed", 0)
    words = p.get("words", "libra")
    threads = p.get("threads")
    d = bcs.training_set(read_parquet(a.captions), read_parquet(a.split),
                         p.get("max_train_captions"), seed)
    try:
        f_g = textclf.load(a.f_g)
        t5m = t5.load(a.t5, num_threads=threads)
    except FileNotFoundError as e:
        raise InputError(a.f_g if "classifier" in str(e) else a.t5, str(e)) from e
    f_g.config = dataclasses.replace(f_g.config, progress=None)   # auto bars (not saved here)
    if threads:
        f_g.config = dataclasses.replace(f_g.config, num_threads=threads)
    settings = bcs.settings_from_params(p)
    spec_a = dict(p.get("auth_classifier") or p.get("classifier") or {"model": "minilm"})
    cfg_a = bcs.classifier_config(spec_a, threads)
    cap_a = p.get("auth_max_train")

    def auth_fn(synthetic, authentic):
        import numpy as np
        rng = np.random.default_rng(seed)
        auth = list(authentic)
        if cap_a and len(auth) > cap_a:   # per class; synthetic is balanced to it inside
            auth = [auth[i] for i in rng.choice(len(auth), size=int(cap_a), replace=False)]
        return bcs.train_authenticity(synthetic, auth, cfg_a, seed=seed,
                                      folds=settings.auth_folds, progress=None)

    synth, cand, metrics = bcs.synthesize(
        d, lambda texts: bcs.gender_proba(f_g, texts, words), t5m, settings, auth_fn,
        progress=None)   # tqdm over the T5 samples on stderr (auto: throttled in a log)
    out = Path(a.out)
    write_parquet(out / "synthesized.parquet", synth)
    write_parquet(out / "candidates.parquet", cand)
    metrics["authenticity"]["classifier"] = spec_a.get("model", "minilm")
    metrics["seconds"]["total"] = round(time.perf_counter() - t0, 1)
    n_gen = metrics["t5"]["n_samples"] - metrics["t5"]["no_content_word"]
    gen_s = metrics["seconds"].get("t5_generation")
    metrics["t5_generation_captions_per_s"] = round(n_gen / gen_s, 1) if gen_s else None
    metrics, run = runstats.split(metrics)  # timings / throughput: benchmarks/runs/, not metrics/
    write_json(a.metrics, metrics)
    with atomic_path(a.samples) as tmp:
        tmp.write_text(bcs.samples_markdown(synth, cand, seed=seed))
    print({k: metrics[k] for k in ("n_D", "n_Dg", "available", "selected", "removed_fraction",
                                   "d_mean")})
    runstats.publish("bcs_synthesize", run)
    return 0


if __name__ == "__main__":
    run_stage(main, errors=(ValueError,))
