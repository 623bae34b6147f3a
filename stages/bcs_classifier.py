"""DVC stage `bcs_classifier`: the gender classifier f_g of LIBRA (paper 003 Eq. 2, supp. 1.1).

D = the captions of the split == train images (at most `libra.max_train_captions`, seeded);
D_g = F_GW(D) (Eq. 1, word list `libra.words`); f_g is trained on a balanced split of D_g over
masked captions (biaslab.models.textclf: `libra.classifier.model` = minilm | lstm | a BERT name such as
bert-base-uncased). The authenticity classifier f_a (supp. Eqs. 2-3) needs the T5 captions, so
it is trained in stage `bcs_synthesize`.

Reads  data/labels/captions.parquet, data/split.parquet, params `libra` (words, seed, threads,
       max_train_captions, classifier)
Writes data/libra/f_g/ (biaslab.models.textclf.save), metrics/bcs_classifier.json
Progress: a tqdm bar over the training batches on stderr (throttled lines when stderr is not a
       terminal; BIASLAB_PROGRESS=0 turns it off; see biaslab.runtime.progress).

Usage: python stages/bcs_classifier.py [--params params.yaml] [--captions ...] [--split ...]
       [--out data/libra/f_g] [--metrics metrics/bcs_classifier.json]
"""
from __future__ import annotations

import time

from biaslab.models import textclf
from biaslab.runtime.io import (load_params, read_parquet, run_stage, skip_without_captions,
                                stage_parser, write_json)
from biaslab.libra import bcs
from biaslab.runtime import runstats


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--captions", default="data/labels/captions.parquet")
    ap.add_argument("--split", default="data/split.parquet")
    ap.add_argument("--out", default="data/libra/f_g")
    ap.add_argument("--metrics", default="metrics/bcs_classifier.json")
    a = ap.parse_args(argv)
    p = load_params(a.params)["libra"]
    if skip_without_captions("bcs_classifier", [a.out, a.metrics], a.captions):
        return 0
    t0 = time.perf_counter()
    d = bcs.training_set(read_parquet(a.captions), read_parquet(a.split),
                         p.get("max_train_captions"), p.get("seed", 0))
    dg = bcs.f_gw(d, p.get("words", "libra"))
    spec = dict(p.get("classifier") or {"model": "minilm"})
    cfg = bcs.classifier_config(spec, p.get("threads"))
    model, info = bcs.train_gender_classifier(dg, cfg, seed=p.get("seed", 0),
                                              val_fraction=spec.get("val_fraction", 0.1),
                                              words=p.get("words", "libra"),
                                              progress=None)   # tqdm on stderr (auto)
    textclf.save(model, a.out)
    metrics, run = runstats.split({"n_D": int(len(d)), **info,
                                   "classifier": spec.get("model", "minilm"),
                                   "seconds": round(time.perf_counter() - t0, 1)})
    write_json(a.metrics, metrics)
    print(metrics)
    runstats.publish("bcs_classifier", run)  # timings: benchmarks/runs/, not metrics/
    return 0


if __name__ == "__main__":
    run_stage(main, errors=(ValueError,))
