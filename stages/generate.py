"""DVC stage `generate`: m counterfactual candidates per (image, group) (paper 000 Eq. 1; logic:
biaslab.counterfactual.generate + the backend named by `generate.backend`), over the groups of
the param `attribute` (gender: female/male; skin: dark/light; gender_skin: the four).
copy_paste's donors of a skin-tone group come from the perceived skin tone of
data/prepared/perceived_gender.parquet (bb_skin).

Reads  data/masks/masks.parquet (+ the mask PNGs it names), data/prepared/{images,persons,
captions}.parquet, data/labels/images.parquet and data/split.parquet (donor pool of copy_paste),
the `generate:` section, `executor` (where the shards are computed: biaslab.runtime.executor; the
output does not depend on it), `label.words` and `data.root` (backend render: the synthetic
dataset's generator arguments and truth, <data.root>/annotations/synth_{params.json,truth.csv}) of
params.yaml; writes data/generate/images/*.jpg (*.png for render),
data/generate/shards/shard-XXX.parquet (one per finished shard; a re-run skips finished shards),
data/generate/candidates.parquet and metrics/generate.json (results only: the resume counters
RUN_COUNTERS, seconds_computing and candidates_per_s of this run are printed and written to
benchmarks/runs/generate.json, biaslab.runtime.runstats).

Usage (from the repository root): python stages/generate.py [--params params.yaml]
    [--prepared data/prepared] [--labels data/labels/images.parquet]
    [--split data/split.parquet] [--masks data/masks/masks.parquet] [--out data/generate]
    [--metrics metrics/generate.json]
"""
from __future__ import annotations


from biaslab.counterfactual import generate as gen
# noqa: E501
from biaslab.runtime.io import (load_params, read_parquet, run_stage, stage_parser, write_json,
                                write_parquet)
from biaslab.runtime import executor, runstats
from biaslab.data.labels import captions_or_label_texts
from biaslab.analysis.attribute_eval import skin_labels

#: Counters of what this run did (they differ between a fresh and a resumed run of the same
#: inputs), kept out of metrics/generate.json.
RUN_COUNTERS = ("candidates_computed", "shards_computed", "shards_skipped",
                "stale_files_removed", "sources_verified_this_run")


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--prepared", default="data/prepared")
    ap.add_argument("--labels", default="data/labels/images.parquet")
    ap.add_argument("--split", default="data/split.parquet")
    ap.add_argument("--masks", default="data/masks/masks.parquet")
    ap.add_argument("--perceived", default="data/prepared/perceived_gender.parquet")
    ap.add_argument("--out", default="data/generate")
    ap.add_argument("--metrics", default="metrics/generate.json")
    args = ap.parse_args(argv)
    params = load_params(args.params)
    p = params["generate"]
    words = params.get("label", {}).get("words", "lic")
    masks = read_parquet(args.masks)
    # data without captions (OpenImages): prompts from the image's labels (biaslab.data.labels)
    caps, _ = captions_or_label_texts(read_parquet(f"{args.prepared}/captions.parquet"),
                                      args.labels, f"{args.prepared}/objects.parquet")
    attribute = params.get("attribute", "gender")
    groups = gen.generation_groups(attribute)
    prompts = gen.make_prompts(caps, masks["image_id"], words=words, groups=groups)
    images = read_parquet(f"{args.prepared}/images.parquet")
    persons = read_parquet(f"{args.prepared}/persons.parquet")
    work, counts = gen.build_work(masks, images, persons, prompts,
                                  shards=int(p["shards"]), max_images=p.get("max_images"))
    tables = {}
    if p.get("backend", "copy_paste") == "copy_paste":   # the donor pool
        labels = read_parquet(args.labels)
        if attribute != "gender":   # the donors' perceived skin tone
            skin = skin_labels(read_parquet(args.perceived), where=args.perceived)
            labels = labels.assign(skin=labels["image_id"].map(skin))
        tables = dict(persons=persons, images=images, labels=labels,
                      split=read_parquet(args.split))
    backend = gen.make_backend({**p, "attribute": attribute},
                               data_root=(params.get("data") or {}).get("root"), **tables)
    with executor.session(params.get("executor")) as ex:
        table, stats = gen.generate_candidates(
            work, backend, args.out, m=int(p["m"]), guidance_scales=p["guidance_scales"],
            seed=int(p["seed"]), shards=int(p["shards"]), executor=ex, groups=groups)
    write_parquet(f"{args.out}/candidates.parquet", table)
    metrics = {"backend": backend.name, "m": int(p["m"]), **counts, **stats,
               **({} if attribute == "gender" else {"attribute": attribute}),
               "images": int(table["image_id"].nunique()),
               "candidates_by_group": {g: int(n) for g, n in
                                       table["group"].value_counts().sort_index().items()}}
    if backend.name == "copy_paste":
        metrics["donor_pool"] = {g: int(n) for g, n in
                                 backend.donors["group"].value_counts().sort_index().items()}
        metrics["distinct_donors_used"] = int(table["donor_ann_ids"].explode().nunique())
        from biaslab.counterfactual.copy_paste import extent_agreement
        metrics["donor_body_extent"] = extent_agreement(work, table, backend.donors)
    if backend.name == "render":
        metrics["render"] = {"data_root": str(backend.root), "generator": backend.params,
                             "sources_verified_this_run": int(backend.verified)}
    # resume counters and timings describe this run, not the candidates: benchmarks/runs/
    metrics, run = runstats.split(metrics, extra=RUN_COUNTERS)
    write_json(args.metrics, metrics)
    print({k: v for k, v in metrics.items()})
    runstats.publish("generate", run)
    return 0


if __name__ == "__main__":
    run_stage(main, errors=(KeyError, ValueError))
