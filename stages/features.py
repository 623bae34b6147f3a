"""Stage `features`: frozen image-backbone embeddings of every prepared image (params
`features`: backbone, image_size, batch_size, threads, cache_dir; `executor`: where the images
missing from the cache are encoded, biaslab.runtime.executor -- the output does not depend on it).

in:  data/prepared/images.parquet
out: data/features/images.npy (float32 (n, d); d = 1280 for efficientnet_lite0),
     data/features/images_ids.npy (int64 (n,), row i = image_id of row i),
     metrics/features.json (n, dim, backbone, image_size); run statistics (computed/cached
     rows, seconds, images_per_s) are printed and written to benchmarks/runs/features.json
     (biaslab.runtime.runstats), not to metrics/: they describe the machine and the cache, not the result
cache: <cache_dir>/<backbone>_<size>px_c3-<code digest>/ (persistent, see biaslab.models.features.encode_cached):
     an image is encoded once, an interrupted run resumes.
"""
import time

from biaslab.models.features import encode_cached, save_features
from biaslab.runtime.io import load_params, read_parquet, run_stage, stage_parser, write_json
from biaslab.runtime import executor, runstats

OUT = "data/features"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    p = params["features"]
    images = read_parquet("data/prepared/images.parquet")
    stats: dict = {}
    t0 = time.perf_counter()
    with executor.session(params.get("executor")) as ex:
        ids, feats = encode_cached(images[["image_id", "path"]],
                                   p.get("cache_dir", "data/cache/features"), p["backbone"],
                                   image_size=p.get("image_size"), batch_size=p["batch_size"],
                                   num_threads=p.get("threads"), progress=True, stats=stats,
                                   executor=ex)
    save_features(f"{OUT}/images", ids, feats)
    rate = stats["computed"] / stats["encode_seconds"] if stats["encode_seconds"] else None
    metrics = {"backbone": str(p["backbone"]), "image_size": p.get("image_size"),
               "n": int(len(ids)), "dim": int(feats.shape[1]), "computed": stats["computed"],
               "cached": stats["cached"], "seconds": round(time.perf_counter() - t0, 1)}
    if rate is not None:  # throughput of this run's encoding only (cached rows are free)
        metrics["images_per_s"] = round(rate, 2)
    metrics, run = runstats.split(metrics, extra=("computed",))
    write_json("metrics/features.json", metrics)
    runstats.publish("features", run)
    print(f"features: {feats.shape} ({stats['computed']} computed, {stats['cached']} cached)")
    return 0


if __name__ == "__main__":
    run_stage(main)
