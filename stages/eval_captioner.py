"""Stage `eval_captioner` (biaslab.captioning.table2): caption the real test images with every trained captioner (each
architecture of `captioner.archs` x dataset x seed) and score them as paper 000 Table 2 (METEOR, CLIPScore, Ratio, LIC) plus BLEU-4, CIDEr, Error, LIC_M,
LIC_D, BiasAmp, DBA_G and DBA_O (thesis Table 2.1) and DBAC in both directions (Nair et al.
2025, biaslab.metrics.dbac; settings eval_captioner.dbac, null = off). Each caption post-processor named in
`eval_captioner.postprocessors` (biaslab.registry.POSTPROCESSORS; default [LIBRA]: the LIBRA DCG,
when one exists) rewrites every seed of its base captioner's captions (Original) as row
`<base>+<name>` ("original+LIBRA"; biaslab/captioning/postprocess.py).

params: captioner.archs, captioner.datasets, captioner.seeds, captioner.beam, captioner.max_len,
        captioner.no_repeat_ngram (decoding),
        eval_captioner (test_images, gender_source, biasamp_min_count, batch_size, scorer, dcg,
        workers: captioners evaluated at once, biaslab.runtime.parallel; postprocessors; dbac: seeds,
        bayes, substitution, threshold, directions; metrics: plug-in captioning metrics,
        biaslab.registry.METRICS, each a further column of every row),
        lic (classifier, preset, seeds, num_threads), label.words, features.cache_dir,
        libra.seed and libra.apply.num_beams (the +LIBRA row: DCG masking seed + captioner
        seed, beams; as stage dcg_apply)
in:   data/models/captioner/<dataset>/<dataset>[-<arch>]-<seed>/ (stage train_captioner;
      biaslab.captioning.arch_model_dir), data/split.parquet
      (split == test: evaluated images; split == train: BiasAmp's reference captions D),
      data/prepared/{images,captions}.parquet (references = human captions),
      data/labels/images.parquet (caption-derived female/male) and
      data/prepared/perceived_gender.parquet (perceived labels): ONE source chosen by
      eval_captioner.gender_source (auto = perceived where the data has it, else caption;
      captioner.gender_labels), data/prepared/objects.parquet (MSCOCO objects on the images,
      for DBA_G / DBA_O), <eval_captioner.scorer> (LiT CLIP scorer, optional: CLIPScore is
      skipped with a note when absent), <eval_captioner.dcg> (LIBRA DCG, optional: the +LIBRA
      row is skipped when absent)
out:  data/captions/<dataset>[-<arch>]-<seed>.json (COCO results format), data/captions/
      original+LIBRA[-<arch>]-<seed>.json (no -<arch> for clipcap), data/captions/eval.json
      (per-model metrics and details, keyed by those file stems), metrics/captioning.json
      (layout below), plots/captioning.csv (one row per training set and arch: dataset
      (``<arch>/<row>`` for non-clipcap archs), <metric>_mean, <metric>_ci95)

metrics/captioning.json::

    {"<row>": {"<metric>": stats.record over captioner seeds
                           ({mean, ci95, std, n, n_inf, n_missing, sign}),   # C.METRICS
               "per_seed": [{"seed", "<metric>": value | null | "inf"}, ...]},
     ...,                       # rows: original, original+LIBRA, oversample, subsample, ...
                                # (ClipCap: the top-level rows, as before archs existed)
     "archs": {"<arch>": {"<row>": {same as above}, ...}, ...},   # other archs (e.g.
                                # transformer); present only when captioner.archs has one
     "test_set": {"n_images", "n_female", "n_male", "gender_source", "gender_source_param",
                  "test_images", "biasamp_reference", "n_reference_captions",
                  "biasamp_min_count", "biasamp_human_null": {ba, per_index, min, max,
                  n_indices, n_images} (BiasAmp of the test images' own human captions,
                  biaslab.metrics.biasamp.human_null), "n_dba_images", "lic_seeds"}}

LIC per row: each captioner seed's LIC is the mean over the LIC classifier seeds (lic.seeds) of
its captions; the record is over captioner seeds (captioner.seed_records).
"""
import csv
from pathlib import Path

from biaslab.captioning import evaluation as C
from biaslab.captioning.table2 import (Table2Settings, categories, csv_rows,
                                       evaluate_captioners, image_objects, test_set)
from biaslab.metrics.files import jsonable
from biaslab.runtime import runstats
from biaslab.runtime.io import (atomic_path, load_params, read_parquet, run_stage,
                                skip_without_captions, stage_parser, write_json)


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()      # checks eval_captioner.dbac too (biaslab.runtime.validate, exit 2)
    if skip_without_captions("eval_captioner", ["data/captions", "plots/captioning.csv",
                                                "metrics/captioning.json"]):
        return 0
    settings = Table2Settings.from_params(params)
    e = settings.eval
    labels, g_used = C.read_gender_labels(e.gender_source)
    table, human, genders, train_caps = test_set(
        e.test_images, read_parquet("data/split.parquet"),
        read_parquet("data/prepared/images.parquet"),
        read_parquet("data/prepared/captions.parquet"), labels, g_used)
    ids = table["image_id"].astype(int).tolist()
    op = Path("data/prepared/objects.parquet")
    obj_table = read_parquet(op) if op.exists() else None
    objects = image_objects(obj_table, ids)
    print(f"eval_captioner: {len(ids)} test images, gender labels from {g_used} "
          f"(gender_source={e.gender_source}), BiasAmp reference = {len(train_caps)} "
          f"training captions, object sets for {len(objects)} images")
    scorer = None
    if Path(e.scorer).exists():
        from biaslab.models.clipscorer import load_scorer
        scorer = load_scorer(e.scorer)
    else:
        print(f"eval_captioner: no CLIP scorer at {e.scorer}: CLIPScore skipped")
    summary, per_model, notes = evaluate_captioners(settings, table, human, genders, g_used,
                                                    train_caps, objects, categories(obj_table),
                                                    scorer)
    # eval.json is a cached out: wall times go to benchmarks/runs/, or a re-run with the same
    # inputs would give different bytes (found comparing a fresh clone's dvc.lock with main's).
    per_model, run = runstats.split(per_model)
    runstats.publish("eval_captioner", run)
    write_json("data/captions/eval.json", jsonable({"models": per_model, "notes": notes,
                                                     "n_test_images": len(ids),
                                                     "n_test_gendered": len(genders),
                                                     "gender_source": g_used}))
    write_json("metrics/captioning.json", summary)
    header, rows = csv_rows(summary, e.metrics)
    with atomic_path("plots/captioning.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    n_g = {g: sum(1 for v in genders.values() if v == g) for g in ("female", "male")}
    print(f"eval_captioner: {len(per_model)} result sets on {len(ids)} test images "
          f"({n_g['female']} female, {n_g['male']} male; labels from {g_used})")
    return 0


if __name__ == "__main__":
    run_stage(main)
