"""Fingerprint of the project's numeric code paths: an md5 per workload of the bytes it
computes, so two machines (or two simulated ones) can be compared in seconds.

usage: python scripts/numerics_fingerprint.py [--workers N] [--only NAME ...] [--threads T]

Each workload runs the library function a training or scoring stage runs, on tiny seeded
inputs: ``features`` (EfficientNet-Lite0 and MiniLM encodings, stage features / the text
cache), ``classifier`` (``train_classifier``, stages train_classifier / train_method),
``captioner`` (ClipCap ``train_captioner`` + beam search, stage train_captioner),
``lic_lstm`` (the LIC / f_g text classifier, stages human_bias / eval_captioner),
``t5`` (the LIBRA T5, stage t5_finetune; with ``--threads`` torch threads, as libra.threads),
``dcg`` (LIBRA's edit DCG training and its edits, stages dcg_train / dcg_apply),
``scorer`` (the LiT CLIP scorer, stage train_scorer), ``numpy`` (NumPy ufuncs, OpenBLAS
matmul, SciPy and scikit-learn) and ``data`` (the synthetic renderer and OpenCV's resize and
blur, stages synthesize / masks / generate). ``numpy`` and ``data`` are what the ``standard``
numeric mode pins; the torch workloads are portable only under ``BIASLAB_NUMERICS=portable``. With ``--workers 2`` they run on forked workers
(``biaslab.runtime.parallel.map_jobs``), as the stages do.

Prints one JSON object: ``{"numerics": biaslab.runtime.numerics.status(), "md5": {workload: hex},
"seconds": {workload: s}}``. Two runs agree on ``md5`` exactly when every workload computed
the same bits. ``tests/test_numerics.py`` runs it under simulated machines;
``benchmarks/numerics.py`` times it with and without the pins.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

from biaslab.runtime import numerics, startup

startup.start()     # pins the numeric paths first, also outside the project's .venv

import numpy as np  # noqa: E402


def _md5(*parts) -> str:
    h = hashlib.md5()
    for p in parts:
        if hasattr(p, "state_dict"):
            p = p.state_dict()
        if isinstance(p, dict):
            for k in sorted(p):
                h.update(k.encode())
                h.update(_md5(p[k]).encode())
            continue
        if hasattr(p, "detach"):
            p = p.detach().cpu().numpy()
        if isinstance(p, (list, tuple)) and p and all(isinstance(v, str) for v in p):
            h.update("\n".join(p).encode())
            continue
        h.update(np.ascontiguousarray(np.asarray(p)).tobytes())
    return h.hexdigest()


CAPS = [f"A {who} {act} a {obj} on the {place}."
        for who in ("man", "woman", "dog") for act in ("riding", "holding")
        for obj in ("skateboard", "umbrella", "frisbee") for place in ("street", "beach")]


def features() -> str:
    from PIL import Image

    from biaslab.models.features import load_image_encoder, load_text_encoder
    rng = np.random.default_rng(0)
    ims = [Image.fromarray(rng.integers(0, 255, (120 + 20 * i, 150, 3), dtype=np.uint8))
           for i in range(3)]
    img = load_image_encoder("efficientnet_lite0", num_threads=1).encode(ims, batch_size=1)
    txt = load_text_encoder("minilm", num_threads=1).encode(CAPS[:8], batch_size=4)
    return _md5(img, txt)


def _toy_features(n=120, d=32, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 2, n)
    cup, tie = rng.random(n) < 0.5, rng.random(n) < 0.4
    x = rng.normal(0, 1, (n, d)).astype(np.float32)
    x[:, 0] += 3 * (g - 0.5)
    x[:, 1] += 3 * cup
    x[:, 2] += 3 * tie
    return x, g, cup, tie


def classifier() -> str:
    import pandas as pd

    from biaslab import classify as C
    from biaslab.data.datasets import MANIFEST_COLUMNS
    x, g, cup, tie = _toy_features()
    df = pd.DataFrame({"image_id": np.arange(len(x)),
                       "gender": np.where(g == 1, "male", "female"),
                       "objects": [[o for o, v in (("cup", a), ("tie", b)) if v]
                                   for a, b in zip(cup, tie)]})
    df["sample_id"] = df["image_id"].astype(str)
    df["path"] = [f"{i}.jpg" for i in df["image_id"]]
    df["captions"] = [[] for _ in range(len(df))]
    df["counterfactual"] = False
    m, hist = C.train_classifier(x, df[MANIFEST_COLUMNS], ["cup", "tie"], seed=1,
                                 settings=C.TrainSettings(epochs=15, lr=1e-2, patience=5,
                                         hidden=[16]))
    return _md5(m.head, m.predict_proba(x), [h["val_loss"] for h in hist])


def captioner() -> str:
    from biaslab.captioning import clipcap
    x, g, cup, _ = _toy_features(n=60, d=32)
    caps = [f"a {'man' if a else 'woman'} with a {'cup' if b else 'dog'}"
            for a, b in zip(g, cup)]
    cfg = clipcap.CaptionerConfig(layers=1, d_model=32, heads=2, prefix_len=2, min_count=1,
                                  max_len=8, epochs=3, batch_size=16, beam=2, num_threads=1)
    m, hist = clipcap.train_captioner(x, caps, list(range(len(x))), x[:10], caps[:10],
                                      list(range(10)), config=cfg)
    return _md5(m.model, m.generate(x[:8]), [h["val_loss"] for h in hist])


def lic_lstm() -> str:
    from biaslab.models import textclf
    texts = [c.replace("man", "[MASK]").replace("wo[MASK]", "[MASK]") for c in CAPS] * 2
    labels = [int("woman" not in c) for c in CAPS] * 2
    cfg = textclf.default_config("lstm", "ci", progress=False)
    m = textclf.train(texts, labels, cfg, seed=3)
    return _md5(textclf.predict_proba(m, texts))


def t5(threads: int = 1) -> str:
    from biaslab.libra import t5 as T5
    s = T5.T5Settings(d_model=32, d_ff=64, layers=1, heads=2, d_kv=16, epochs=2, batch_size=16,
                      num_threads=threads, lr=1e-2, pretrain_epochs=1)
    m = T5.finetune(CAPS, s, seed=0, val_captions=CAPS[:6])
    return _md5({k: v for k, v in m.model.state_dict().items()})


def dcg() -> str:
    """LIBRA's edit DCG (stage dcg_train's default formulation): training and its edits on
    gender-swapped captions (the DCG's outputs must not depend on the CPU)."""
    from biaslab.libra import dcg as D
    x, g, cup, _ = _toy_features(n=48, d=16)
    caps = [f"a {'man' if a else 'woman'} with a {'cup' if b else 'dog'}"
            for a, b in zip(g, cup)]
    swapped = [c.replace("woman", "MAN").replace(" man", " woman").replace("MAN", "man")
               for c in caps]
    s = D.DCGSettings(formulation="edit", hidden=32, layers=1, heads=2, n_image_tokens=2,
                      min_count=1, epochs=2, batch_size=16, num_threads=1)
    m = D.train_dcg(caps + swapped, caps + caps, np.concatenate([x, x]), s, seed=0)
    return _md5(m, D.debias(m, swapped, x, eta=0.0))


def scorer() -> str:
    from biaslab.models.clipscorer import train_lit
    from biaslab.models.settings import ScorerSettings
    x, _, _, _ = _toy_features(n=64, d=32)
    rng = np.random.default_rng(1)
    t = (x @ rng.normal(0, 1, (32, 24))).astype(np.float32)
    s, hist = train_lit(x, t, np.arange(64), np.arange(48), np.arange(48, 64),
                        settings=ScorerSettings(proj_dim=16, epochs=4, batch_size=16, seed=0),
                        num_threads=1)
    hist = [{k: v for k, v in h.items() if k != "seconds"} for h in hist]   # wall time
    return _md5(s.heads, s._project(x, "image"),
                [json.dumps(hist, sort_keys=True, default=repr)])


def numpy_() -> str:
    from scipy import stats as ss
    from sklearn.linear_model import LogisticRegression
    rng = np.random.default_rng(0)
    a32 = rng.standard_normal(20011).astype(np.float32)
    a64 = rng.standard_normal(20011)
    M = rng.standard_normal((257, 300))
    y = (M[:, 0] + rng.standard_normal(257) > 0).astype(int)
    lr = LogisticRegression(max_iter=300).fit(M, y)
    return _md5(np.exp(a32), np.log1p(np.abs(a64)), np.abs(a32) ** 0.7, np.arctan(a64),
                M @ M.T, a64 @ a64, [a64.std(ddof=1)], lr.coef_,
                [ss.t.ppf(0.975, 4), ss.ttest_ind(a64[:50], a64[50:120]).pvalue])


def data() -> str:
    import cv2

    from biaslab.data.synthetic import render as R
    from biaslab.data.synthetic.world import OBJECTS
    t = R.sample_truth(4, 0.8, 0)
    imgs = []
    for i in range(4):
        objs = [o for o, on in zip(OBJECTS, t["objects"][i]) if on]
        r = R.render_scene(i + 1, seed=0, image_size=96, gender=str(t["gender"][i]),
                           scene=str(t["scene"][i]), cast=str(t["cast"][i]), objects=objs,
                           appearance_seed=7)
        a = np.asarray(r.image, dtype=np.uint8)
        imgs += [a, cv2.resize(a, (61, 61), interpolation=cv2.INTER_AREA),
                 cv2.GaussianBlur(a.astype(np.float32), (7, 7), 1.3),
                 np.asarray(r.person_mask)]
    return _md5(*imgs)


WORKLOADS = {"features": features, "classifier": classifier, "captioner": captioner,
             "lic_lstm": lic_lstm, "t5": t5, "dcg": dcg, "scorer": scorer, "numpy": numpy_, "data": data}


def run(only: list[str] | None = None, workers: int = 1, threads: int = 1) -> dict:
    """Run the workloads (all, or ``only``) on ``workers`` forked processes; returns the JSON
    object described in the module docstring."""
    from biaslab.runtime.parallel import map_jobs
    names = list(only or WORKLOADS)
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        raise SystemExit(f"numerics_fingerprint: unknown workload(s) {unknown}; "
                         f"choose from {sorted(WORKLOADS)}")

    def job(name):
        import torch
        torch.set_num_threads(1)
        t0 = time.perf_counter()
        h = WORKLOADS[name](threads) if name == "t5" else WORKLOADS[name]()
        return h, round(time.perf_counter() - t0, 3)

    res = map_jobs(job, names, workers)
    return {"numerics": numerics.status(), "md5": {n: r[0] for n, r in zip(names, res)},
            "seconds": {n: r[1] for n, r in zip(names, res)}}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the t5 workload")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args(argv)
    os.environ.setdefault("TQDM_DISABLE", "1")
    json.dump(run(a.only, a.workers, a.threads), sys.stdout)
    print()


if __name__ == "__main__":
    main()
