"""Stage `train_scorer`: LiT-style CLIP scorer for prompt adherence (paper 000 Eq. 4; params
`scorer`, plus `features.backbone` / `features.image_size` recorded in the model config).

in:  data/features/images.npy, data/features/images_ids.npy (stage `features`),
     data/prepared/captions.parquet, data/split.parquet
out: data/scorer/ (lit_config.json + lit_heads.safetensors; biaslab.models.clipscorer.load_scorer),
     metrics/scorer.json (test image->text / text->image R@1, R@5, chance levels, n_test,
     final loss), dvclive/scorer/ (per-epoch train loss, val R@1, temperature; one line per
     epoch on stdout); train/text-encoding seconds: benchmarks/runs/train_scorer.json
cache: <scorer.cache_dir>/text_<encoder>/ caption embeddings (each distinct caption encoded
     once across runs; biaslab.models.features.encode_texts_cached)
"""
import time

import numpy as np

from biaslab.models.clipscorer import retrieval_recall, train_lit
from biaslab.models.settings import ScorerSettings
from biaslab.models.features import encode_texts_cached, load_features, split_rows
from biaslab.runtime.io import (InputError, load_params, read_parquet, run_stage, stage_parser,
                                write_json)
from biaslab.data.labels import captions_or_label_texts
from biaslab.runtime import runstats
from biaslab.runtime.settings import from_params


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    p = params["scorer"]
    # the group also holds text_encoder, threads and cache_dir (checked at the stage's start)
    settings = from_params(ScorerSettings, p, "scorer", unknown="ignore")
    fp = params.get("features", {})
    ids, feats = load_features()
    # data without captions (OpenImages): the scorer learns from label texts (biaslab.data.labels)
    caps, from_labels = captions_or_label_texts(read_parquet("data/prepared/captions.parquet"),
                                                "data/labels/images.parquet",
                                                "data/prepared/objects.parquet")
    split = read_parquet("data/split.parquet")
    row = {int(i): k for k, i in enumerate(ids)}
    caps = caps[caps["image_id"].isin(row)].reset_index(drop=True)
    txt_image = caps["image_id"].map(row).to_numpy(np.int64)
    texts = caps["caption"].astype(str).tolist()

    t0 = time.perf_counter()
    tkw = dict(cache_dir=p.get("cache_dir", "data/cache/text"),
               name=p.get("text_encoder", "minilm"), num_threads=p.get("threads", 1),
               progress=True)
    txt = encode_texts_cached(texts, **tkw)
    txt_pre = encode_texts_cached([settings.prefix + t for t in texts], **tkw) \
        if settings.prefix_prob > 0 else None
    text_seconds = time.perf_counter() - t0

    train, val, test = (split_rows(split, ids, s) for s in ("train", "val", "test"))
    if len(train) < 2 or len(test) < 1:
        raise InputError("data/split.parquet", f"need >= 2 train and >= 1 test images with "
                                               f"features, got {len(train)} / {len(test)}")
    from biaslab.runtime.live import Live
    t0 = time.perf_counter()
    with Live(dir="dvclive/scorer", dvcyaml=False, save_dvc_exp=False) as live:
        def on_epoch(epoch: int, rec: dict) -> None:
            live.log_metric("train/loss", rec["loss"])
            live.log_metric("temperature", rec["temperature"])
            if "val_R@1" in rec:
                live.log_metric("val/R@1", rec["val_R@1"])
            live.next_step()
            print(f"train_scorer epoch {epoch}: " + ", ".join(
                f"{k}={v:.4g}" for k, v in rec.items() if isinstance(v, float)), flush=True)

        scorer, hist = train_lit(feats, txt, txt_image, train, val, settings=settings,
                                 image_encoder=fp.get("backbone", "efficientnet_lite0"),
                                 image_size=fp.get("image_size", 224),
                                 text_encoder=p.get("text_encoder", "minilm"),
                                 txt_feats_prefixed=txt_pre, on_epoch=on_epoch,
                                 num_threads=p.get("threads", 1))
    train_seconds = time.perf_counter() - t0
    scorer.save("data/scorer")

    mask = np.isin(txt_image, test)
    pos = {int(r): k for k, r in enumerate(test)}
    gallery = np.array([pos[int(r)] for r in txt_image[mask]])
    m = retrieval_recall(scorer.encode_images(feats[test]), scorer.encode_texts(txt[mask]),
                         gallery, ks=(1, 5))
    out = {k: round(v, 4) for k, v in m.items()}
    if txt_pre is not None:  # as CLIPScore sees captions ("A photo depicts ...")
        mp = retrieval_recall(scorer.encode_images(feats[test]),
                              scorer.encode_texts(txt_pre[mask]), gallery, ks=(1, 5))
        out.update({f"prefixed/{k}": round(v, 4) for k, v in mp.items()
                    if not k.startswith("chance")})
    if from_labels:
        out["texts"] = "label texts (the data has no captions; biaslab.data.labels.label_texts)"
    out.update({"n_test_images": int(len(test)), "n_test_captions": int(mask.sum()),
                "n_train_images": int(len(train)), "n_val_images": int(len(val)),
                "final_loss": round(hist[-1]["loss"], 4), "epochs_run": len(hist),
                "best_epoch": scorer.config.get("best_epoch", len(hist) - 1),
                "effective_batch_size": scorer.config["effective_batch_size"],
                "temperature": round(scorer.temperature, 4),
                "train_seconds": round(train_seconds, 1),
                "text_seconds": round(text_seconds, 1)})
    out, run = runstats.split(out)  # timings: benchmarks/runs/, not metrics/
    write_json("metrics/scorer.json", out)
    runstats.publish("train_scorer", run)
    print({k: out[k] for k in ("i2t_R@1", "t2i_R@1", "chance_t2i_R@1", "i2t_R@5", "t2i_R@5")})
    return 0


if __name__ == "__main__":
    run_stage(main)
