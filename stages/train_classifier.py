"""Stages `train_classifier` (foreach dataset, plain ERM) and `train_method` (foreach method, a
model-level baseline of paper 000 Table 1 trained on Original): multi-label object + gender
classifier of paper 000 sec. 3.1 / appendix B.1 (biaslab.classify; params `classifier` except
datasets/methods, `features.backbone`, `features.image_size`; `train_method` also reads
`classifier.method_params`). One stage per training set trains every seed of
`classifier.seeds` for every backbone of `classifier.backbones` (null: `features.backbone`; one
Table 1 column group each, paper 000 Table 1) on `classifier.workers` forked processes
(biaslab.runtime.parallel: one torch thread each; the features are loaded once, before the fork).
With `classifier.tuning.trials` > 0 every row first tunes lr and weight decay on the same
candidates (biaslab.classify.tune: trained at `classifier.tuning.seed`, chosen by validation
mAP), and every seed trains with the choice; the model config records the trials (`tuning`: n_trials, seed, criterion, trials, chosen).

usage: python stages/train_classifier.py --dataset augment            (every seed)
       python stages/train_classifier.py --method group_dro --seeds 0 1 (dataset: original)

in:  data/datasets/original.parquet (label list: objects co-occurring with each gender >=
     classifier.min_cooccur times), data/datasets/<dataset>.parquet, data/features/images*.npy
     (frozen features of the real images), the counterfactual image files the manifest names
     (data/generate/images/, encoded through the feature cache)
out: data/models/classifier/<name>/<name>-<seed>/ (classifier_config.json incl. labels/outputs,
     method, method_params; classifier_head.safetensors, history.json),
     dvclive/classifier/<name>/<name>-<seed>/ (per-epoch train/loss, val/loss, val/mAP,
     val/gender_acc); <name> = the dataset for ERM, the method otherwise (biaslab.runtime.paths);
     backbones after the first: .../<name>-<seed>-<backbone slug>/ (biaslab.runtime.paths.slug)
"""
import dataclasses
import time
from pathlib import Path

from biaslab import registry
from biaslab.runtime import runstats
from biaslab.classify import (GenderObjectClassifier, TrainSettings, classifier_backbones,
                              manifest_features, select_labels, train_classifier, train_finetune)
from biaslab.classify import tune
from biaslab.models.features import load_features, set_threads
from biaslab.runtime.io import (InputError, load_params, read_parquet, run_stage, stage_parser,
                                write_json)
from biaslab.runtime.parallel import map_jobs
from biaslab.runtime.paths import live_dir, model_dir
from biaslab.runtime.settings import from_params


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--dataset", default="original")
    ap.add_argument("--method", default="erm", choices=sorted(registry.METHODS.names()))
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="seeds to train (default: params classifier.seeds)")
    ap.add_argument("--seed", type=int, default=None, help="one seed (same as --seeds N)")
    ap.add_argument("--workers", type=int, default=None,
                    help="worker processes (default: params classifier.workers)")
    args = ap.parse_args(argv)
    params = load_params()
    p = params.get("classifier", {})
    # the group's other keys (datasets, seeds, methods, ...) are the stages'
    settings = from_params(TrainSettings, p, "classifier", unknown="ignore")
    seeds = ([args.seed] if args.seed is not None else args.seeds) or \
        [int(s) for s in p.get("seeds", [0])]
    workers = args.workers if args.workers is not None else p.get("workers", 1)
    method_params = (p.get("method_params") or {}).get(args.method) or {}
    name = args.dataset if args.method == "erm" else args.method
    fp = params.get("features", {})
    base_backbone, size = fp.get("backbone", "efficientnet_lite0"), fp.get("image_size", 224)
    backbones = classifier_backbones(params)
    set_threads(p.get("threads", 1))
    labels = select_labels(read_parquet("data/datasets/original.parquet"),
                           settings.min_cooccur, settings.cooccur_rule)
    if not labels:
        raise InputError("data/datasets/original.parquet",
                         f"no object co-occurs >= {settings.min_cooccur} times with "
                         f"{settings.cooccur_rule} gender (lower "
                         f"classifier.min_cooccur)")
    manifest = read_parquet(f"data/datasets/{args.dataset}.parquet")
    if len(manifest) < 2:
        raise InputError(f"data/datasets/{args.dataset}.parquet",
                         f"{len(manifest)} training rows: nothing to train on")
    stats: dict = {}
    feats, feat_seconds = {}, 0.0
    if not settings.finetune:     # frozen features: encoded once, shared by every seed's worker
        ids, base = load_features()
        tf = time.perf_counter()
        for b in backbones:   # data/features is features.backbone's: other backbones encode
            bi, bf = (ids, base) if b == base_backbone else \
                (ids[:0], base[:0, :0])
            feats[b] = manifest_features(manifest, bi, bf,
                                         fp.get("cache_dir", "data/cache/features"), b,
                                         image_size=size, batch_size=fp.get("batch_size", 32),
                                         stats=stats)
        feat_seconds = time.perf_counter() - tf

    def fit(backbone: str, seed: int, s: TrainSettings, on_epoch=None):
        if s.finetune:
            return train_finetune(manifest, labels, backbone=backbone, image_size=size,
                                  seed=seed, settings=s, method=args.method,
                                  method_params=method_params, on_epoch=on_epoch)
        return train_classifier(feats[backbone], manifest, labels, seed=seed, settings=s,
                                backbone=backbone, image_size=size, method=args.method,
                                method_params=method_params, on_epoch=on_epoch)

    # the same budget for every row: trials on the same candidates, the choice for every seed
    ts = p.get("tuning") or {}
    chosen: dict[str, TrainSettings] = {b: settings for b in backbones}
    tuning: dict[str, dict] = {}
    if int(ts.get("trials") or 0) > 0:
        cands = tune.candidates(ts, int(ts["trials"]), int(ts.get("seed", 0)))
        for b in backbones:
            tt = time.perf_counter()
            rec = tune.select(
                lambda c, b=b: fit(b, int(ts.get("seed", 0)),
                                   dataclasses.replace(settings, **c)), cands,
                lambda f, xs: map_jobs(f, xs, workers))
            chosen[b] = dataclasses.replace(settings, **rec["chosen"])
            tuning[b] = {"n_trials": len(cands), "seed": int(ts.get("seed", 0)), **rec}
            print(f"train_classifier {name} ({b}): tuned over {len(cands)} trials -> "
                  f"lr {rec['chosen']['lr']:g}, weight_decay "
                  f"{rec['chosen']['weight_decay']:g} ({time.perf_counter() - tt:.1f} s)")

    def train_seed(job: tuple[str, int]) -> str:
        from biaslab.runtime.live import Live
        backbone, seed = job
        variant = None if backbone == backbones[0] else backbone
        t0 = time.perf_counter()
        out = model_dir("classifier", name, seed, variant)
        with Live(dir=live_dir("classifier", name, seed, variant), dvcyaml=False,
                  save_dvc_exp=False) as live:
            def on_epoch(epoch: int, rec: dict) -> None:
                live.log_metric("train/loss", rec["train_loss"])
                for k in ("val_loss", "val_mAP", "val_gender_acc"):
                    if rec.get(k) is not None and rec[k] == rec[k]:   # skip NaN
                        live.log_metric(k.replace("val_", "val/"), rec[k])
                live.next_step()

            clf, hist = fit(backbone, seed, chosen[backbone], on_epoch)
            seconds = time.perf_counter() - t0
        # run statistics go to benchmarks/runs/, not into the model or the DVCLive directory
        # (both are outs: the same inputs must give the same bytes)
        runstats.publish(f"train_classifier/{Path(out).name}",
                         {"feature_seconds": round(feat_seconds, 2),
                          "train_seconds": round(seconds, 2),
                          "encoded_now": int(stats.get("computed", 0))})
        clf.config.update({"dataset": args.dataset, "n_rows": int(len(manifest))})
        if backbone in tuning:   # untuned models keep their config (and bytes) as they were
            clf.config["tuning"] = tuning[backbone]
        clf.save(out)
        write_json(f"{out}/history.json", hist)
        GenderObjectClassifier.load(out)   # fail here, not in eval, if the directory is unusable
        last = hist[clf.config["best_epoch"]] if hist else {}
        return (f"train_classifier {name}-{seed} ({args.method} on {args.dataset}, "
                f"{backbone}): "
                f"{len(labels)} objects{' + 2 genders' if clf.has_gender else ''}, "
                f"{len(manifest)} rows, {len(hist)} epochs (best {clf.config['best_epoch']}), "
                f"val_loss {last.get('val_loss')}, val_mAP {last.get('val_mAP')}, "
                f"{seconds:.1f} s")

    t0 = time.perf_counter()
    for line in map_jobs(train_seed, [(b, s) for b in backbones for s in seeds], workers):
        print(line)
    print(f"train_classifier {name}: {len(seeds)} seeds x {len(backbones)} backbone(s) on "
          f"{workers} workers, "
          f"{time.perf_counter() - t0:.1f} s (features {feat_seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    run_stage(main)
