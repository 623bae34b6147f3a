"""DVC stage `t5_finetune`: T5 masked-word model for LIBRA (paper 003 supp. 1.2, Eq. 1).

D = the captions of the split == train images (at most `libra.max_train_captions`, the same
seeded subset as `bcs_classifier`). `libra.t5.model`: tiny (T5Config from `libra.t5`, tokenizer
built on D, trained from scratch) or t5-base (paper tier, fine-tuned). Held-out captions: the
split == val captions (at most `libra.t5.max_val_captions`).

Reads  data/labels/captions.parquet, data/split.parquet, params `libra` (t5, seed, threads,
       max_train_captions, words)
Writes data/libra/t5/ (save_pretrained + libra_t5.json), metrics/t5.json (held-out masked-word
       accuracy at mask_rate over all words and at the synthesis rate over content words, each
       with a most-frequent-word baseline), dvclive/t5/ (per-epoch loss, Eq. 1 NLL,
       val loss, tokens/s); timings and throughput: benchmarks/runs/t5_finetune.json

Usage: python stages/t5_finetune.py [--params params.yaml] [--captions ...] [--split ...]
       [--out data/libra/t5] [--metrics metrics/t5.json] [--live dvclive/t5]
"""
from __future__ import annotations

import time
from collections import Counter

from biaslab.runtime.io import (load_params, read_parquet, run_stage, skip_without_captions,
                                stage_parser, write_json)
from biaslab.libra import bcs, t5
from biaslab.runtime import runstats


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--captions", default="data/labels/captions.parquet")
    ap.add_argument("--split", default="data/split.parquet")
    ap.add_argument("--out", default="data/libra/t5")
    ap.add_argument("--metrics", default="metrics/t5.json")
    ap.add_argument("--live", default="dvclive/t5")
    a = ap.parse_args(argv)
    p = load_params(a.params)["libra"]
    if skip_without_captions("t5_finetune", [a.out, a.live, a.metrics], a.captions):
        return 0
    tp = dict(p.get("t5") or {})
    max_val = tp.pop("max_val_captions", 1000)
    s = t5.settings_from_dict({"num_threads": p.get("threads"), **tp})
    seed = p.get("seed", 0)
    words = p.get("words", "libra")
    caps, split = read_parquet(a.captions), read_parquet(a.split)
    d = bcs.training_set(caps, split, p.get("max_train_captions"), seed)
    val_ids = set(split.loc[split["split"] == "val", "image_id"].astype(int))
    val = caps[caps["image_id"].astype(int).isin(val_ids)].sort_values("caption_id")
    if val.empty:   # no val split: hold out 5% of D
        val = d.sample(frac=0.05, random_state=seed)
        d = d.drop(val.index)
    if max_val and len(val) > max_val:
        val = val.sample(n=int(max_val), random_state=seed)
    train_caps, val_caps = d["caption"].tolist(), val["caption"].tolist()

    from biaslab.runtime.live import Live
    t0 = time.perf_counter()
    with Live(dir=a.live, dvcyaml=False, save_dvc_exp=False) as live:
        def on_epoch(epoch: int, rec: dict) -> None:
            # tokens_per_s is printed and goes to benchmarks/runs/, not to DVCLive (an out)
            for k in ("loss", "mlm_nll", "val_loss", "val_mlm_nll", "lr"):
                if rec.get(k) is not None:
                    live.log_metric(k if k.startswith("val") or k == "lr"
                                    else f"train/{k}", rec[k])
            live.next_step()
            print(f"epoch {epoch}: " + ", ".join(f"{k}={v:.4g}" for k, v in rec.items()
                                                 if isinstance(v, float)), flush=True)

        model = t5.finetune(train_caps, s, seed=seed, val_captions=val_caps, on_epoch=on_epoch,
                           progress=None)
    train_s = time.perf_counter() - t0
    t5.save(model, a.out)

    # held-out masked-word accuracy vs a most-frequent-word baseline
    t0 = time.perf_counter()
    all_counts = Counter(w.lower() for c in train_caps for _, _, w in t5.word_spans(c))
    acc_all = t5.masked_word_accuracy(model, val_caps, s.mask_rate, all_counts, seed=seed)
    rate = float(p.get("mask_rate", 0.15))
    pos = p.get("pos", "auto")
    elig = [bcs.content_positions(c, words, pos) for c in val_caps]
    content_counts: Counter = Counter()
    for c in train_caps:
        toks = [w.lower() for _, _, w in t5.word_spans(c)]
        content_counts.update(toks[i] for i in bcs.content_positions(c, words, pos))
    acc_content = t5.masked_word_accuracy(model, val_caps, rate, content_counts, seed=seed,
                                          eligible=elig)
    hist = model.meta["history"]
    metrics = {
        "model": s.model, "n_train": len(train_caps), "n_val": len(val_caps),
        "vocab_size": len(model.tokenizer),
        "parameters": int(sum(q.numel() for q in model.model.parameters())),
        "epochs": s.epochs, "pretrain_epochs": s.pretrain_epochs,
        "masked_word_accuracy": acc_all["accuracy"],
        "baseline_accuracy": acc_all["baseline_accuracy"],
        "baseline_word": acc_all["baseline_word"], "mask_rate": s.mask_rate,
        "content_masked_word_accuracy": acc_content["accuracy"],
        "content_baseline_accuracy": acc_content["baseline_accuracy"],
        "content_baseline_word": acc_content["baseline_word"], "content_mask_rate": rate,
        "unparsed_fraction": acc_all["n_unparsed"] / max(1, acc_all["n_captions"]),
        "final_loss": hist[-1]["loss"] if hist else None,
        "final_mlm_nll": hist[-1]["mlm_nll"] if hist else None,
        "val_mlm_nll": hist[-1].get("val_mlm_nll") if hist else None,
        "train_tokens_per_s": model.meta.get("train_tokens_per_s"),
        "train_seconds": round(train_s, 1),
        "eval_seconds": round(time.perf_counter() - t0, 1),
    }
    metrics, run = runstats.split(metrics)  # timings / throughput: benchmarks/runs/, not metrics/
    write_json(a.metrics, metrics)
    print(metrics)
    runstats.publish("t5_finetune", run)
    return 0


if __name__ == "__main__":
    run_stage(main, errors=(ValueError,))
