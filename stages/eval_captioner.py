"""Stage `eval_captioner`: caption the real test images with every trained captioner (each
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
                  "biasamp_min_count", "n_dba_images", "lic_seeds"}}

LIC per row: each captioner seed's LIC is the mean over the LIC classifier seeds (lic.seeds) of
its captions; the record is over captioner seeds (captioner.seed_records).
"""
import csv
import sys
import time
from pathlib import Path

import numpy as np

from biaslab import captioning as K
from biaslab import registry
from biaslab.captioning import data as CD
from biaslab.captioning import evaluation as C
from biaslab.captioning import postprocess as PP
from biaslab.metrics.files import jsonable
from biaslab.runtime.io import InputError, atomic_path, load_params, read_parquet, write_json
from biaslab.runtime.parallel import map_jobs, resolve_workers
from biaslab.runtime.progress import bar as progress_bar
from biaslab.runtime import runstats
from biaslab.runtime.io import skip_without_captions

DEFAULTS = {"biasamp_min_count": 5, "batch_size": 64, "scorer": "data/scorer", "workers": 1,
            "dcg": "data/libra/dcg", "test_images": "gendered", "gender_source": "auto",
            "postprocessors": ["LIBRA"], "dbac": None, "metrics": []}


def load_gender_labels(source: str) -> tuple[dict, str]:
    """``C.gender_labels`` on the pipeline's two label tables (shared with stage human_bias)."""
    per = Path("data/prepared/perceived_gender.parquet")
    lab = Path("data/labels/images.parquet")
    return C.gender_labels(source, read_parquet(per) if per.exists() else None,
                           read_parquet(lab))  # label_gender always writes it


def _test_set(which: str, source: str):
    """Test images (``gendered``: labelled female/male by the chosen source, the paper 000 test
    set "retaining only images with gender-specific terms"; ``all``: every test image), their
    human captions, female/male labels, the source used, and the training split's human
    captions (BiasAmp's reference D)."""
    if which not in ("gendered", "all"):
        raise InputError("params.yaml", f"eval_captioner.test_images must be 'gendered' or "
                                        f"'all', got {which!r}")
    split = read_parquet("data/split.parquet")
    images = read_parquet("data/prepared/images.parquet")
    labels, used = load_gender_labels(source)
    test_ids = set(split.loc[split["split"] == "test", "image_id"].astype(int))
    train_ids = set(split.loc[split["split"] == "train", "image_id"].astype(int))
    if which == "gendered":
        test_ids &= set(labels)
    table = images[images["image_id"].isin(test_ids)][["image_id", "path"]] \
        .sort_values("image_id", ignore_index=True)
    if table.empty:
        raise InputError("data/split.parquet", f"no test images (labelled by {used})")
    caps = read_parquet("data/prepared/captions.parquet").sort_values(["image_id", "caption_id"])
    human = {int(i): list(g["caption"]) for i, g in caps[caps["image_id"].isin(test_ids)]
             .groupby("image_id")}
    train_caps = caps.loc[caps["image_id"].isin(train_ids), "caption"].astype(str).tolist()
    if not train_caps:
        raise InputError("data/split.parquet", "no training captions (BiasAmp's reference)")
    genders = {i: g for i, g in labels.items() if i in test_ids}
    return table, human, genders, used, train_caps


def _image_objects(ids) -> dict:
    """image id -> MSCOCO categories annotated on it (images with at least one row)."""
    p = Path("data/prepared/objects.parquet")
    if not p.exists():
        return {}
    o = read_parquet(p)
    o = o[o["image_id"].isin(set(ids))]
    return {int(i): sorted(set(g["category"].astype(str))) for i, g in o.groupby("image_id")}


def _categories() -> list[str] | None:
    """DBAC's task list L: every category of the prepared object table (person included: the
    metric drops it), None when the data has no object table (the 80 MSCOCO categories)."""
    p = Path("data/prepared/objects.parquet")
    if not p.exists():
        return None
    cats = sorted(set(read_parquet(p)["category"].astype(str)))
    return cats or None


def _write_results(path: str, ids, captions) -> None:
    write_json(path, [{"image_id": int(i), "caption": c} for i, c in zip(ids, captions)])


def main() -> None:
    params = load_params()      # checks eval_captioner.dbac too (biaslab.runtime.validate, exit 2)
    if skip_without_captions("eval_captioner", ["data/captions", "plots/captioning.csv",
                                                "metrics/captioning.json"]):
        return
    p, lp = params["captioner"], params["lic"]
    e = {**DEFAULTS, **(params.get("eval_captioner") or {})}
    words = params.get("label", {}).get("words", "lic")
    cache = params.get("features", {}).get("cache_dir", "data/cache/features")
    post = [registry.POSTPROCESSORS.get(n) for n in e["postprocessors"] or []]
    table, human, genders, g_used, train_caps = _test_set(e["test_images"],
                                                          e["gender_source"])
    ids = table["image_id"].astype(int).tolist()
    objects = _image_objects(ids)
    print(f"eval_captioner: {len(ids)} test images, gender labels from {g_used} "
          f"(gender_source={e['gender_source']}), BiasAmp reference = {len(train_caps)} "
          f"training captions, object sets for {len(objects)} images")
    paths = dict(zip(ids, table["path"].astype(str)))

    scorer = None
    if Path(e["scorer"]).exists():
        from biaslab.models.clipscorer import load_scorer
        scorer = load_scorer(e["scorer"])
    else:
        print(f"eval_captioner: no CLIP scorer at {e['scorer']}: CLIPScore skipped")
    mkw = dict(scorer=scorer, image_paths=paths, words=words, classifier=lp["classifier"],
               preset=lp["preset"], seeds=lp["seeds"], num_threads=lp.get("num_threads"),
               biasamp_min_count=int(e["biasamp_min_count"]), train_captions=train_caps,
               image_objects=objects, progress=True,   # tqdm over the LIC classifiers
               max_human_captions=lp.get("max_human_captions"),
               dbac=(None if not e["dbac"] else {**e["dbac"], "categories": _categories()}),
               extra_metrics=list(e["metrics"] or []))
    feats_by_encoder: dict = {}

    def feats_for(arch, model):
        key = arch.feature_key(model.config)
        if key not in feats_by_encoder:
            feats_by_encoder[key] = arch.features(table, cache, model.config,
                                                  num_threads=model.config.num_threads,
                                                  progress=True)
        return feats_by_encoder[key]

    def scorer_feats():
        # the LiT scorer projects cached features of its own backbone (no re-encoding)
        cfg = getattr(scorer, "config", None)
        if not isinstance(cfg, dict) or "image_encoder" not in cfg:
            return None
        f = CD.image_features(table, cache, cfg["image_encoder"], cfg.get("image_size"),
                             num_threads=lp.get("num_threads"))
        return dict(zip(ids, f))

    s_feats = scorer_feats() if scorer is not None else None
    datasets, seeds = list(p["datasets"]), [int(s) for s in p["seeds"]]
    try:
        archs = K.archs_from_params(p)
    except ValueError as err:
        raise InputError("params.yaml", str(err)) from err
    missing = [f"{K.arch_name(d, a)}-{s}" for a in archs for d in datasets for s in seeds
               if not Path(K.arch_model_dir(d, s, a), K.get_arch(a).config_file).exists()]
    if missing:
        raise InputError("data/models/captioner", f"no trained captioner for {missing} "
                                                  f"(run train_captioner)")
    per_model, rows, row_seeds, skipped = {}, {}, {}, {}
    # features of each arch's first captioner are read before the fork (every worker
    # inherits them); each (arch, dataset, seed) is one job on eval_captioner.workers processes
    for a in archs:
        feats_for(K.get_arch(a), K.get_arch(a).load(K.arch_model_dir(datasets[0], seeds[0], a)))

    def evaluate(job: tuple[str, str, int]) -> list[tuple]:
        a, d, s = job
        arch = K.get_arch(a)
        name = f"{K.arch_name(d, a)}-{s}"
        t0 = time.perf_counter()
        model = arch.load(K.arch_model_dir(d, s, a))
        preds = model.generate(feats_for(arch, model), beam=p.get("beam"),
                               max_len=p.get("max_len"), batch_size=e["batch_size"],
                               no_repeat_ngram=p.get("no_repeat_ngram"))
        _write_results(f"data/captions/{name}.json", ids, preds)
        variants, skips = [(d, name, preds)], []
        # caption post-processors (registry; LIBRA's DCG the first) on their base row's
        # captions, seeded by the captioner seed: row <base>+<name>
        ctx = PP.CaptionContext(table=table, params=params, seed=s, feature_cache=cache,
                                num_threads=lp.get("num_threads"))
        for pe in post:
            if pe.base != d:
                continue
            try:
                caps = PP.apply(pe.name, preds, ctx)
            except registry.Skipped as why:
                skips.append((pe.row, str(why)))
                continue
            pname = f"{K.arch_name(pe.row, a)}-{s}"
            _write_results(f"data/captions/{pname}.json", ids, caps)
            variants.append((pe.row, pname, caps))
        out = []
        for row, key, caps in variants:
            flat, det = C.caption_metrics(dict(zip(ids, caps)), genders, human,
                                          image_feats=s_feats, **mkw)
            flat["seconds"] = round(time.perf_counter() - t0, 1)
            out.append((a, row, key, s, {
                "metrics": flat, "details": det,
                "examples": [{"image_id": i, "gender": genders.get(i), "caption": c,
                              "human": human.get(i, [""])[0]}
                             for i, c in list(zip(ids, caps))[:10]]}))
        return out, skips

    jobs = [(a, d, s) for a in archs for d in datasets for s in seeds]
    workers = resolve_workers(e["workers"], len(jobs))
    if workers > 1:
        mkw["progress"] = False       # one bar per worker would interleave: the parent's
    bar = progress_bar(desc="eval_captioner", total=len(jobs), unit="captioner",
                       progress=None if workers > 1 else False)  # counts finished jobs
    with bar:
        done = map_jobs(evaluate, jobs, workers, on_done=lambda i, r: bar.update(1))
    for results, skips in done:
        skipped.update(skips)
        for a, row, key, s, res in results:   # job order: identical to a sequential run
            per_model[key] = res
            rows.setdefault((a, row), []).append(res["metrics"])
            row_seeds.setdefault((a, row), []).append(s)
            print(f"eval_captioner {key}: " + ", ".join(
                f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                for k, v in res["metrics"].items()))
    for row, why in skipped.items():
        print(f"eval_captioner: row {row} skipped: {why}")
    order = ["original"] + [pe.row for pe in post] + [d for d in datasets if d != "original"]

    def arch_summary(a: str) -> dict:
        return {r: C.seed_records(rows[(a, r)], keys=C.metric_keys(e["metrics"] or []),
                                  seeds=row_seeds[(a, r)]) for r in order if (a, r) in rows}

    # ClipCap's rows stay at the top level (the layout before captioner.archs existed)
    summary = arch_summary(K.DEFAULT_ARCH) if K.DEFAULT_ARCH in archs else {}
    others = {a: arch_summary(a) for a in archs if a != K.DEFAULT_ARCH}
    if others:
        summary["archs"] = others
    n_g = {g: sum(1 for v in genders.values() if v == g) for g in ("female", "male")}
    ba0 = next(iter(per_model.values()))["details"].get("BiasAmp") or {}
    summary["test_set"] = {
        "n_images": len(ids), "n_female": n_g["female"], "n_male": n_g["male"],
        "gender_source": g_used, "gender_source_param": e["gender_source"],
        "test_images": e["test_images"], "biasamp_reference": ba0.get("reference"),
        "n_reference_captions": ba0.get("n_reference_captions"),
        "biasamp_min_count": int(e["biasamp_min_count"]),
        "n_dba_images": sum(1 for i in ids if i in objects and i in genders),
        "lic_seeds": lp["seeds"]}
    notes = {}
    if scorer is not None:  # reference: the first human caption of each test image
        hid = [i for i in ids if human.get(i)]
        notes["CLIPScore_human_first_caption"] = C.clip_score_for(
            scorer, [human[i][0] for i in hid], [paths[i] for i in hid],
            None if s_feats is None else np.stack([s_feats[i] for i in hid]))
    if scorer is None:
        notes["CLIPScore"] = f"skipped: no scorer at {e['scorer']}"
    for row, why in skipped.items():
        notes[row] = f"skipped: {why}"
    # eval.json is a cached out: wall times go to benchmarks/runs/, or a re-run with the same
    # inputs would give different bytes (found comparing a fresh clone's dvc.lock with main's).
    per_model, run = runstats.split(per_model)
    runstats.publish("eval_captioner", run)
    write_json("data/captions/eval.json", jsonable({"models": per_model, "notes": notes,
                                                     "n_test_images": len(ids),
                                                     "n_test_gendered": len(genders),
                                                     "gender_source": g_used}))
    write_json("metrics/captioning.json", summary)
    with atomic_path("plots/captioning.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        keys = C.metric_keys(e["metrics"] or [])
        w.writerow(["dataset", *[f"{k}_{x}" for k in keys for x in ("mean", "ci95")]])
        flat = [(r, m) for r, m in summary.items() if r not in ("test_set", "archs")]
        flat += [(f"{a}/{r}", m) for a, ms in summary.get("archs", {}).items()
                 for r, m in ms.items()]
        for r, m in flat:
            w.writerow([r, *["" if m[k][x] is None else round(m[k][x], 4)
                             for k in keys for x in ("mean", "ci95")]])
    print(f"eval_captioner: {len(per_model)} result sets on {len(ids)} test images "
          f"({n_g['female']} female, {n_g['male']} male; labels from {g_used})")


if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        sys.exit(f"eval_captioner: {e}")
