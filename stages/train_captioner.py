"""Stage `train_captioner` (foreach dataset): the captioners of `captioner.archs` (paper 000
Table 2; biaslab/captioning/: `clipcap` = ClipCap, `transformer` = the encoder-decoder
Transformer on the backbone's feature grid) trained on one training-set variant, one per arch x
seed of `captioner.seeds`, on `captioner.workers` forked processes (biaslab.runtime.parallel: one torch
thread each; features are loaded once per arch, before the fork).

usage: python stages/train_captioner.py --dataset augment [--archs clipcap transformer]
       [--seeds 0 1] [--workers 2]

params: captioner (captions_per_image: the first k captions of each training image, null =
        all; decoder, layers, d_model, heads, dropout, prefix_len, vocab_size, min_count,
        max_len, epochs, lr, weight_decay, warmup, batch_size, patience, num_threads,
        seeds, workers, archs, transformer: the Transformer's own hyper-parameters,
        biaslab.captioning.transformer.TransformerConfig),
        features.backbone / features.image_size / features.cache_dir (the frozen image features)
in:   data/datasets/<dataset>.parquet (every caption of every row is a training sample),
      data/prepared/{images,captions,objects}.parquet, data/labels/images.parquet,
      data/split.parquet (validation = the real `val` images with a female/male label)
out:  data/models/captioner/<dataset>/<dataset>-<seed>/ (clipcap) and
      data/models/captioner/<dataset>/<dataset>-<arch>-<seed>/ (other archs), loaded by
      biaslab.captioning.get_arch(arch).load; dvclive/captioner/<dataset>/<same name>/
      (per-epoch train/val loss and lr; metrics.json); paths from
      biaslab.captioning.arch_model_dir / arch_live_dir
cache: <features.cache_dir>/<backbone>_<size>px_c3-<code digest>/ (pooled, clipcap) and
      <backbone>-grid<g>_<size>px_c3-<code digest>/ (grid, transformer): each image encoded once; counterfactual
      images are keyed by their path
"""
import time

from biaslab import registry
from biaslab.runtime import runstats
from biaslab import captioning as K
from biaslab.data import datasets as D
from biaslab.captioning import data as CD
from biaslab.runtime.io import (InputError, load_params, read_parquet, run_stage,
                                skip_without_captions, stage_parser)
from biaslab.runtime.parallel import map_jobs

PREP = "data/prepared"


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--dataset", required=True, help="training-set variant "
                    "(data/datasets/<dataset>.parquet)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="seeds to train (default: params captioner.seeds)")
    ap.add_argument("--seed", type=int, default=None, help="one seed (same as --seeds N)")
    ap.add_argument("--workers", type=int, default=None,
                    help="worker processes (default: params captioner.workers)")
    ap.add_argument("--archs", nargs="+", default=None,
                    help=f"architectures (default: params captioner.archs; known: "
                         f"{sorted(registry.ARCHS.names())})")
    args = ap.parse_args(argv)
    params = load_params()
    if skip_without_captions("train_captioner", [f"data/models/captioner/{args.dataset}",
                                                 f"dvclive/captioner/{args.dataset}"]):
        return 0
    p, fp = params["captioner"], params.get("features", {})
    seeds = ([args.seed] if args.seed is not None else args.seeds) or \
        [int(s) for s in p.get("seeds", [0])]
    workers = args.workers if args.workers is not None else p.get("workers", 1)
    try:
        archs = K.archs_from_params({"archs": args.archs} if args.archs else p)

        def config(arch: str, seed: int):
            return K.get_arch(arch).config_from_params(
                p, seed=seed, image_encoder=fp.get("backbone"),
                image_size=fp.get("image_size", 224))

        cfgs = {a: config(a, seeds[0]) for a in archs}
    except ValueError as e:
        raise InputError("params.yaml", str(e)) from e
    cache = fp.get("cache_dir", "data/cache/features")

    train = read_parquet(f"data/datasets/{args.dataset}.parquet")
    if train.empty:
        raise InputError(f"data/datasets/{args.dataset}.parquet", "empty training manifest")
    k = p.get("captions_per_image")
    if k:   # ci scale: the first k captions of each image (every image kept)
        train = train.assign(captions=[list(c)[:int(k)] for c in train["captions"]])
    val = D.original(read_parquet(f"{PREP}/images.parquet"),
                     read_parquet(f"{PREP}/captions.parquet"),
                     read_parquet(f"{PREP}/objects.parquet"),
                     read_parquet("data/labels/images.parquet"),
                     read_parquet("data/split.parquet"), splits=("val",))
    t_tab = CD.manifest_image_table(train)
    t_caps, t_rows = CD.manifest_samples(train, t_tab)
    v_tab = CD.manifest_image_table(val)
    v_caps, v_rows = CD.manifest_samples(val, v_tab)
    feats: dict = {}        # arch -> (train, val) features, read before the fork
    for a in archs:
        arch, cfg = K.get_arch(a), cfgs[a]
        fkw = dict(batch_size=fp.get("batch_size", 32), num_threads=cfg.num_threads,
                   progress=True)
        feats[a] = (arch.features(t_tab, cache, cfg, **fkw),
                    arch.features(v_tab, cache, cfg, **fkw) if len(v_tab) else None)

    def train_seed(job: tuple[str, int]) -> str:
        from biaslab.runtime.live import Live
        a, seed = job
        arch, scfg = K.get_arch(a), config(a, seed)
        t_feats, v_feats = feats[a]
        with Live(dir=K.arch_live_dir(args.dataset, seed, a), dvcyaml=False,
                  save_dvc_exp=False) as live:
            def on_epoch(epoch: int, rec: dict) -> None:
                live.log_metric("train/loss", rec["train_loss"])
                if "val_loss" in rec:
                    live.log_metric("val/loss", rec["val_loss"])
                live.log_metric("lr", rec["lr"])
                live.next_step()

            # one bar per run would interleave across workers: progress only when sequential
            model, hist = arch.train(t_feats, t_caps, t_rows, v_feats, v_caps, v_rows,
                                     scfg, on_epoch=on_epoch,
                                     progress=len(jobs) == 1 or workers == 1)
            model.meta.update(dataset=args.dataset, seed=seed, n_train_samples=len(train))
            model.save(K.arch_model_dir(args.dataset, seed, a))
            for k in ("best_epoch", "best_val_loss", "epochs_run", "n_train_captions",
                      "n_train_images", "vocab_size"):
                if model.meta.get(k) is not None:
                    live.summary[k] = model.meta[k]
        # wall time: benchmarks/runs/, not the DVCLive directory (an out: same inputs, same bytes)
        runstats.publish(f"train_captioner/{K.arch_name(args.dataset, a)}-{seed}",
                         {"train_seconds": model.meta.get("train_seconds")})
        return f"train_captioner {K.arch_name(args.dataset, a)}-{seed}: {model.meta}"

    t0 = time.perf_counter()
    jobs = [(a, s) for a in archs for s in seeds]
    for line in map_jobs(train_seed, jobs, workers):
        print(line)
    print(f"train_captioner {args.dataset}: {len(archs)} arch(s) x {len(seeds)} seeds on "
          f"{workers} workers, {time.perf_counter() - t0:.1f} s")
    return 0

if __name__ == "__main__":
    run_stage(main)
