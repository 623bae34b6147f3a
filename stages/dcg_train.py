"""DVC stage `dcg_train`: LIBRA's Debiasing Caption Generator (paper 003 sec. 4, Eq. 9; logic:
biaslab.libra.dcg.train_dcg).

Trains DCG (ViLT encoder + GPT-2 decoder, tiny configs offline) to recover the original caption
from (image, biased caption with eta = 20% of its words masked) on the synthesized set of stage
`bcs_synthesize`. Images: the cached backbone features of stage `features`
(data/features/images.npy + images_ids.npy); images missing there are encoded from
data/prepared/images.parquet into the feature cache. A held-out fraction of the images
(`libra.dcg_val_fraction`) measures Eq. 9 loss and how often DCG restores the original gender.

Offline tier: the paper's DCG starts from pretrained ViLT and GPT-2, which already know the
caption language; a tiny DCG from scratch learns nothing from a few hundred synthesized pairs
(measured on the synthetic default: 94 pairs, final Eq. 9 loss 40, 21% gender accuracy on
held-out pairs). `libra.dcg_pretrain_epochs` > 0 first trains it with the same Eq. 9 objective
on the real captions D (input = y masked at eta, target = y, its image) -- the stand-in for the
pretrained language models, as T5's `pretrain_epochs` -- then on the synthesized pairs.
Set it to 0 for the paper tier.

Training set: the synthesized pairs (types and mix: `bcs_synthesize`) plus, with
`libra.dcg.identity_pairs` / `swap_pairs` > 0 (the default; 0 = the paper's set), that many
identity pairs (y -> y) and gender-swapped pairs (swap(y) -> y) per synthesized pair, drawn from
the gendered captions of D balanced over (gender) x (does f_g's context gender agree), at
least `libra.dcg.min_pairs` of each
(biaslab.libra.dcg.context_balanced_pairs): the paper's DCG never sees a caption that is
already right, so it learns to change every caption (measured, generate formulation on the
default: 91.5 % of human captions rewritten, 8 % made wrong), and random pairs from a biased D
would teach context -> gender.

Reads  data/libra/synthesized.parquet, data/libra/f_g/ (f_g: the context gender of the
       identity / swap pairs), data/features/images{,_ids}.npy,
       data/prepared/images.parquet, data/labels/captions.parquet + data/split.parquet (D for
       the pre-training), params `libra.dcg`, `libra.dcg_pretrain_epochs`,
       `libra.max_train_captions`, `libra.dcg_val_fraction`, `libra.dcg_max_pairs`,
       `libra.dcg_eval_max`, `libra.seed`, `libra.threads`, `libra.words`, `features.backbone`,
       `features.image_size`
Writes data/libra/dcg/ (biaslab.libra.dcg.save), metrics/dcg.json, dvclive/dcg/; timings and
       throughput: benchmarks/runs/dcg_train.json (biaslab.runtime.runstats)

Usage: python stages/dcg_train.py [--params params.yaml] [--synth ...] [--features ...]
       [--images ...] [--out data/libra/dcg] [--metrics metrics/dcg.json] [--live dvclive/dcg]
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from biaslab.data.gender import FEMALE, MALE, caption_gender, swap
from biaslab.runtime.io import (InputError, load_params, read_parquet, run_stage,
                                skip_without_captions, stage_parser, write_json)
from biaslab.libra import bcs
from biaslab.libra import dcg as D
from biaslab.runtime import runstats
from biaslab.models import textclf


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--synth", default="data/libra/synthesized.parquet")
    ap.add_argument("--features", default="data/features/images")
    ap.add_argument("--images", default="data/prepared/images.parquet")
    ap.add_argument("--captions", default="data/labels/captions.parquet")
    ap.add_argument("--split", default="data/split.parquet")
    ap.add_argument("--cache", default="data/cache/features")
    ap.add_argument("--f-g", default="data/libra/f_g")
    ap.add_argument("--out", default="data/libra/dcg")
    ap.add_argument("--metrics", default="metrics/dcg.json")
    ap.add_argument("--live", default="dvclive/dcg")
    a = ap.parse_args(argv)
    params = load_params(a.params)
    # the captions are optional here (read only for pre-training or identity / swap pairs)
    if Path(a.captions).exists() and skip_without_captions("dcg_train",
                                                           [a.out, a.live, a.metrics],
                                                           a.captions):
        return 0
    p = params["libra"]
    fp = params.get("features") or {}
    seed = p.get("seed", 0)
    dp = {"num_threads": p.get("threads"), "backbone": fp.get("backbone", "efficientnet_lite0"),
          "image_size": fp.get("image_size", 224), **(p.get("dcg") or {})}
    s = D.settings_from_dict(dp)
    synth = read_parquet(a.synth)
    if synth.empty:
        raise InputError(a.synth, "no synthesized captions (see metrics/bcs.json)")

    # held-out images
    rng = np.random.default_rng(seed)
    imgs = np.array(sorted(synth["image_id"].astype(int).unique()))
    n_val = int(round(float(p.get("dcg_val_fraction", 0.1)) * len(imgs)))
    val_imgs = set(rng.choice(imgs, size=n_val, replace=False).tolist()) if n_val else set()
    is_val = synth["image_id"].astype(int).isin(val_imgs).to_numpy()
    # libra.dcg_max_pairs: at most that many synthesized training pairs (a seeded random
    # subset; identity / swap pairs follow their ratios to it). The ci scale caps it so that
    # a real-data run's DCG trains in minutes (coco-mini at 600 images: ~3,900 pairs x 7 x 20
    # epochs took 1,114 s); where it does not bind nothing changes, not even the rng streams
    is_tr = ~is_val
    cap = p.get("dcg_max_pairs")
    n_synth_train = int(is_tr.sum())
    if cap is not None and n_synth_train > int(cap):
        if int(cap) < 1:
            raise InputError(a.params, f"libra.dcg_max_pairs must be >= 1 or null, got {cap!r}")
        idx = np.flatnonzero(is_tr)
        keep = np.sort(np.random.default_rng(seed + 7).choice(idx, size=int(cap), replace=False))
        is_tr = np.zeros(len(synth), dtype=bool)
        is_tr[keep] = True
    tr, va = synth[is_tr].reset_index(drop=True), synth[is_val].reset_index(drop=True)

    t0 = time.perf_counter()
    if s.image_input == D.FEATURES:
        table = read_parquet(a.images) if Path(a.images).exists() else None
        feats = D.image_features(synth["image_id"].astype(int).tolist(), s, a.features, table,
                                 a.cache, p.get("threads"))
        img_tr, img_va = feats[is_tr], feats[is_val]
    else:
        table = read_parquet(a.images)
        path = dict(zip(table["image_id"].astype(int), table["path"].astype(str)))
        img_tr = [path[int(i)] for i in tr["image_id"]]
        img_va = [path[int(i)] for i in va["image_id"]]
    feat_s = time.perf_counter() - t0

    # D: pre-training (see module doc, same vocabulary as the fine-tuning) and the source of
    # identity pairs
    pre_epochs = int(p.get("dcg_pretrain_epochs") or 0)
    model, pre_hist, d_caps = None, [], []
    if pre_epochs > 0 or s.identity_pairs > 0 or s.swap_pairs > 0:
        if not (Path(a.captions).exists() and Path(a.split).exists()):
            raise InputError(a.captions, "dcg_pretrain_epochs > 0 or identity / swap pairs "
                                         "need the training captions")
        dset = bcs.training_set(read_parquet(a.captions), read_parquet(a.split),
                                p.get("max_train_captions"), seed)
        dset = dset[~dset["image_id"].astype(int).isin(val_imgs)]   # keep held-out images out
        d_caps = dset["caption"].astype(str).tolist()
        table = read_parquet(a.images) if Path(a.images).exists() else None
        if s.image_input == D.FEATURES:
            d_imgs = D.image_features(dset["image_id"].astype(int).tolist(), s, a.features,
                                      table, a.cache, p.get("threads"))
            feat_dim = int(d_imgs.shape[1])
        else:
            path = dict(zip(table["image_id"].astype(int), table["path"].astype(str)))
            d_imgs, feat_dim = [path[int(i)] for i in dset["image_id"]], None
        model = D.build_dcg(s, d_caps + synth["original"].tolist() + synth["biased"].tolist(),
                            feat_dim, seed=seed)
    # identity pairs (y -> y) and swap pairs (swap(y) -> y): gendered captions of D, so that a
    # caption whose gender is already right is a training example too (the paper's DCG only
    # ever sees changed pairs), and so that the image, not the caption, decides the gender
    n_identity = n_swap = n_counter = 0
    tr_biased, tr_orig = tr["biased"].tolist(), tr["original"].tolist()
    if s.identity_pairs > 0 or s.swap_pairs > 0:
        words = p.get("words", "libra")
        g = dset["caption"].map(lambda c: caption_gender(c, words)).to_numpy(dtype=object)
        gi = np.flatnonzero(np.isin(g, [FEMALE, MALE]))
        try:
            f_g = textclf.load(a.f_g)
        except FileNotFoundError as e:
            raise InputError(a.f_g, str(e)) from e
        if p.get("threads"):
            f_g.config = dataclasses.replace(f_g.config, num_threads=p.get("threads"))
        ctx = bcs.predicted_gender(bcs.gender_proba(f_g, [d_caps[i] for i in gi], words))
        n_identity, n_swap = (max(int(round(r * len(tr))), int(s.min_pairs)) if r > 0 else 0
                              for r in (s.identity_pairs, s.swap_pairs))
        prng = np.random.default_rng(seed + 2)
        extra_b, extra_o, extra_i = [], [], []
        for n_k, fn in ((n_identity, lambda c: c), (n_swap, lambda c: swap(c, words=words))):
            pick = gi[D.context_balanced_pairs(g[gi], ctx, n_k, prng)]
            extra_o += [d_caps[i] for i in pick]
            extra_b += [fn(d_caps[i]) for i in pick]
            extra_i += list(pick)
        n_counter = int((ctx != g[gi]).sum())
        tr_biased, tr_orig = tr_biased + extra_b, tr_orig + extra_o
        img_tr = (np.concatenate([img_tr, d_imgs[np.asarray(extra_i, int)]])
                  if isinstance(img_tr, np.ndarray) else list(img_tr) + [d_imgs[i]
                                                                         for i in extra_i])
    if pre_epochs > 0:
        t0 = time.perf_counter()
        model = D.train_dcg(d_caps, d_caps, d_imgs, dataclasses.replace(s, epochs=pre_epochs),
                            seed=seed, model=model, progress=None,
                            on_epoch=lambda e, r: print(f"pretrain epoch {e}: loss="
                                                        f"{r['loss']:.4g}", flush=True))
        pre_hist = model.meta["history"]
        pre_s = time.perf_counter() - t0
    else:
        pre_s, d_caps = 0.0, []

    from biaslab.runtime.live import Live
    t0 = time.perf_counter()
    with Live(dir=a.live, dvcyaml=False, save_dvc_exp=False) as live:
        def on_epoch(epoch: int, rec: dict) -> None:
            live.log_metric("train/loss", rec["loss"])
            if rec.get("val_loss") is not None:
                live.log_metric("val/loss", rec["val_loss"])
            # samples_per_s: printed, and in benchmarks/runs/ (DVCLive's directory is an out)
            live.next_step()
            print(f"epoch {epoch}: " + ", ".join(f"{k}={v:.4g}" for k, v in rec.items()
                                                 if isinstance(v, float)), flush=True)

        model = D.train_dcg(tr_biased, tr_orig, img_tr, s,
                            seed=seed, on_epoch=on_epoch,
                            val=(va["biased"].tolist(), va["original"].tolist(), img_va)
                            if len(va) else None, model=model, progress=None)
    train_s = time.perf_counter() - t0
    D.save(model, a.out)

    ev: dict = {}
    infer_rate = None
    if len(va):
        k = min(len(va), int(p.get("dcg_eval_max", 300)))
        sel = np.sort(rng.choice(len(va), size=k, replace=False))
        sub = va.iloc[sel]
        imgs_sub = img_va[sel] if isinstance(img_va, np.ndarray) else [img_va[i] for i in sel]
        t1 = time.perf_counter()
        ev = D.evaluate(model, sub["biased"].tolist(), sub["original"].tolist(),
                        sub["original_gender"].tolist(), sub["type"].tolist(), imgs_sub,
                        words=p.get("words", "libra"), seed=seed)
        infer_rate = k / (time.perf_counter() - t1)
        ev.pop("outputs")
    hist = model.meta["history"]
    metrics = {**({"n_train_before_cap": n_synth_train} if len(tr) < n_synth_train else {}),
               "n_train": int(len(tr)), "n_identity": n_identity, "n_swap": n_swap,
               "n_counter_stereotypical": n_counter, "n_val": int(len(va)),
               "formulation": s.formulation,
               "unaligned_pairs": model.meta.get("unaligned_pairs", 0),
               "types": {t: int(n) for t, n in synth["type"].value_counts().items()},
               "final_loss": hist[-1]["loss"], "val_loss": hist[-1].get("val_loss"),
               "eta": s.eta, "encoder": s.encoder, "decoder": s.decoder,
               "image_input": s.image_input,
               "parameters": int(sum(q.numel() for q in model.parameters())),
               "train_samples_per_s": model.meta.get("train_samples_per_s"),
               "train_tokens_per_s": model.meta.get("train_tokens_per_s"),
               "inference_captions_per_s": infer_rate, "eval": ev,
               "feature_seconds": round(feat_s, 1), "train_seconds": round(train_s, 1),
               "pretrain": {"epochs": pre_epochs, "n_captions": len(d_caps),
                            "final_loss": pre_hist[-1]["loss"] if pre_hist else None,
                            "seconds": round(pre_s, 1)}}
    metrics, run = runstats.split(metrics)  # timings / throughput: benchmarks/runs/, not metrics/
    write_json(a.metrics, metrics)
    print({k: v for k, v in metrics.items() if k != "eval"}, ev.get("overall"))
    runstats.publish("dcg_train", run)
    return 0


if __name__ == "__main__":
    run_stage(main, errors=(ValueError,))
