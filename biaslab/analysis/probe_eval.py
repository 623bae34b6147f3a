"""The causal probe run on every trained model (paper 000 sec. 2.1;
the logic of stage ``probe``, which only reads its inputs and writes its
files; the record's layout is in ``stages/probe.py``'s docstring). The probe's definitions
(pair sensitivities, summaries, the mask-neutrality record) are :mod:`biaslab.analysis.probe`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.captioning.clipcap import CONFIG_FILE, Captioner
from biaslab.analysis import probe as P
from biaslab.data.synthetic import FLIP_VALUES as S_FLIP, read_generator_params
from biaslab.classify import GenderObjectClassifier, encode_files, file_id, model_features
from biaslab.models.features import load_features, set_threads
from biaslab.runtime.io import InputError
from biaslab.runtime.parallel import map_jobs
from biaslab.runtime.paths import model_dir


@dataclass(frozen=True)
class ProbeSettings:
    """Everything :func:`run_probe` reads, built once by stage ``probe``
    (:meth:`from_params`).

    Attributes:
        classifiers: ``classifier.datasets`` then the model-level ``classifier.methods`` not
            among them (the classifier rows probed); classifier_seeds: ``classifier.seeds``.
        captioners, captioner_seeds: ``captioner.datasets``, ``captioner.seeds``.
        beam, max_len, no_repeat_ngram: decoding (``captioner.*``); captioner_workers:
            captioners probed at once (``captioner.workers``).
        threads: torch threads of the classifiers (``classifier.threads``).
        blackout, blackout_dilate_px, blackout_fill: how persons are blacked out
            (``classifier.blackout*``, as in training).
        min_seeds_t, n_boot, seed: the summaries' t-interval floor, bootstrap draws and seed
            (``probe.*``); flip_images: attribute-flip test images (``probe.flip_images``,
            0: off).
        words: the gender word list (``label.words``); attribute: ``attribute``.
        feature_cache, feature_batch_size: ``features.cache_dir``, ``features.batch_size``.
        executor: ``executor`` (where feature encoding runs; None: here).
    """
    classifiers: tuple[str, ...]
    classifier_seeds: tuple[int, ...]
    captioners: tuple[str, ...]
    captioner_seeds: tuple[int, ...]
    beam: int | None = None
    max_len: int | None = None
    no_repeat_ngram: int | None = None
    captioner_workers: int | None = 1
    threads: int | None = 1
    blackout: tuple[str, ...] = ("box",)
    blackout_dilate_px: int = 0
    blackout_fill: Any = 0
    min_seeds_t: int = P.MIN_SEEDS_T
    n_boot: int = 2000
    seed: int = 0
    flip_images: int = 0
    words: str = "lic"
    attribute: str = "gender"
    feature_cache: str = "data/cache/features"
    feature_batch_size: int = 32
    executor: Any = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "ProbeSettings":
        """From the composed params (``classifier``, ``captioner``, ``probe``,
        ``label.words``, ``features``, ``executor``, ``attribute``)."""
        c, cap = params["classifier"], params["captioner"]
        pp = params.get("probe") or {}
        f = params.get("features") or {}
        return cls(
            classifiers=tuple(c["datasets"]) + tuple(m for m in (c.get("methods") or [])
                                                     if m not in c["datasets"]),
            classifier_seeds=tuple(int(s) for s in c["seeds"]),
            captioners=tuple(cap["datasets"]),
            captioner_seeds=tuple(int(s) for s in cap["seeds"]),
            beam=cap.get("beam"), max_len=cap.get("max_len"),
            no_repeat_ngram=cap.get("no_repeat_ngram"),
            captioner_workers=cap.get("workers", 1), threads=c.get("threads", 1),
            blackout=tuple(c.get("blackout", ["box"])),
            blackout_dilate_px=int(c.get("blackout_dilate_px", 0)),
            blackout_fill=c.get("blackout_fill", 0),
            min_seeds_t=int(pp.get("min_seeds_t", P.MIN_SEEDS_T)),
            n_boot=int(pp.get("n_boot", 2000)), seed=int(pp.get("seed", 0)),
            flip_images=int(pp.get("flip_images") or 0),
            words=(params.get("label") or {}).get("words", "lic"),
            attribute=params.get("attribute") or "gender",
            feature_cache=f.get("cache_dir", "data/cache/features"),
            # encoding batch: 1 is fastest at one thread on CPU
            # (benchmarks/results/features.json); it does not change the features' meaning
            feature_batch_size=int(f.get("batch_size") or 32),
            executor=params.get("executor"))


def run_probe(settings: ProbeSettings, root: str, pairs: pd.DataFrame,
              neutral: pd.DataFrame | None,
              out_dir: Path) -> tuple[dict, list[pd.DataFrame], pd.DataFrame]:
    """Every classifier (datasets, then the model-level methods) and captioner of the settings
    on the probe pairs with the persons blacked out, and the mask-neutrality test.

    Args:
        settings: :class:`ProbeSettings` (the stage builds it from params.yaml).
        root: ``data.root`` (the probe images' directory).
        pairs: :func:`biaslab.data.synthetic.read_probe` (non-empty).
        neutral: :func:`biaslab.data.synthetic.read_neutral` (the context-free images) or
            None.
        out_dir: where the masked, neutral and person-free images are written.

    Returns:
        ``(record, rows, masked)``: the record's model parts ({"classifier",
        "classifier_logit", "captioner", "captioner_margin", "mask_neutral",
        "classifier_na"}), the per-(model, seed) pair tables, and the masked probe table.

    Raises:
        InputError: a trained captioner missing.
    """
    st = settings
    kw = dict(min_seeds_t=st.min_seeds_t, n_boot=st.n_boot, seed=st.seed)
    words, cache, fbs, executor = st.words, st.feature_cache, st.feature_batch_size, st.executor
    set_threads(st.threads)
    masked = P.blackout_probe(pairs, out_dir / "masked", sources=st.blackout,
                              dilate_px=st.blackout_dilate_px, fill=st.blackout_fill,
                              progress=True)
    table = masked[["path"]].assign(image_id=[file_id(p) for p in masked["path"]])
    rows, out = [], {"classifier": {}, "classifier_logit": {}, "captioner": {}}
    # the attribute-flip probe: test images with the person's gender / skin
    # tone flipped, person visible; object outputs, not gender
    attribute = st.attribute
    flip, flip_note = None, None
    if not st.flip_images:
        flip_note = "probe.flip_images = 0"
    elif not int(read_generator_params(root).get("test_images") or 0):
        flip_note = "no synthetic test split (synthetic.test_images = 0)"
    else:
        flip = P.flip_table(root, P.FLIP_DIMS[attribute], st.flip_images,
                            out_dir / "flip", progress=True)
        ftable = flip[["path"]].assign(image_id=[file_id(p) for p in flip["path"]])
        fout = {"classifier": {}, "captioner": {}}

    if neutral is not None and not neutral.empty:
        # the mask-neutrality test: masked images and the same images drawn
        # without their person, context-free (neutral.csv) and in context (the probe pairs)
        empty = P.person_free_images(neutral, root, out_dir / "empty", progress=True)
        empty_ctx = P.person_free_images(pairs, root, out_dir / "empty", progress=True)
        neutral = P.blackout_probe(neutral, out_dir / "neutral", sources=st.blackout,
                                   dilate_px=st.blackout_dilate_px, fill=st.blackout_fill,
                                   progress=True)
        ntables = {k: f[["path"]].assign(image_id=[file_id(p) for p in f["path"]])
                   for k, f in (("masked", neutral), ("empty", empty),
                                ("empty_ctx", empty_ctx))}
        out["mask_neutral"] = {}
    ids, base = load_features()
    for d in st.classifiers:
        per_seed, per_seed_logit, sums = {}, {}, {"masked": [], "empty": [], "ctx": [],
                                                   "empty_ctx": []}
        per_seed_flip = {}
        for s in st.classifier_seeds:
            clf = GenderObjectClassifier.load(model_dir("classifier", d, s))
            if flip is not None:
                # object outputs exist for every model, the adversarial one included
                fp = clf.objects_proba(model_features(clf, ftable, ids, base, cache, derived=True,
                                                      batch_size=fbs,
                                                      executor=executor))
                per_seed_flip[int(s)] = P.flip_sensitivities(
                    flip, P.flip_output(flip, probs=fp, labels=clf.labels))
            if not clf.has_gender:
                out.setdefault("classifier_na", {})[d] = "no gender outputs"
                continue
            feats = model_features(clf, table, ids, base, cache, derived=True, batch_size=fbs,
                                   executor=executor)
            probs = clf.gender_proba(feats)
            sens = P.pair_sensitivities(masked, P.classifier_output(*probs))
            per_seed[int(s)] = sens
            # the same pairs on the logit margin: no ceiling for saturated outputs
            per_seed_logit[int(s)] = P.pair_sensitivities(masked,
                                                          P.classifier_logit_output(*probs))
            rows.append(sens.assign(model="classifier", dataset=d, seed=int(s)))
            if "mask_neutral" in out:
                # what the mask itself reads as: gender calls on masked persons and on the
                # same images without the person
                sums["ctx"].append(probs)
                for k, t in ntables.items():
                    sums[k].append(clf.gender_proba(model_features(
                        clf, t, ids, base, cache, derived=True, batch_size=fbs,
                        executor=executor)))
        if per_seed_flip:
            fout["classifier"][d] = P.summarize_flip(per_seed_flip, attribute, **kw)
            rows += [f.assign(model="classifier_flip", dataset=d, seed=k)
                     for k, f in per_seed_flip.items()]
        if per_seed:
            out["classifier"][d] = P.summarize_sensitivity(per_seed, **kw)
            out["classifier_logit"][d] = P.summarize_sensitivity(per_seed_logit, **kw)
        if sums["masked"]:
            rec = P.mask_neutral_record(sums["masked"], neutral["value"], empty=sums["empty"],
                                        n_boot=kw["n_boot"], seed=kw["seed"])
            # in context: the probe pairs' masked images vs the same scenes without the person
            rec["context"] = P.mask_neutral_record(sums["ctx"], pairs["person_gender"],
                                                   empty=sums["empty_ctx"],
                                                   n_boot=kw["n_boot"], seed=kw["seed"])
            out["mask_neutral"][d] = rec

    feats_by_encoder: dict = {}
    flip_feats: dict = {}

    def encoded(store: dict, paths: list[str], key: tuple, num_threads, executor=None):
        """``paths``' features under captioner image encoder ``key`` = (encoder, image size),
        computed once per key (and content-keyed in the feature cache)."""
        if key not in store:
            store[key] = encode_files(paths, cache, key[0], image_size=key[1], batch_size=fbs,
                                      num_threads=num_threads, executor=executor)
        return store[key]

    cap_dirs = [(d, s) for d in st.captioners for s in st.captioner_seeds]
    missing = [f"{d}-{s}" for d, s in cap_dirs
               if not Path(f"{model_dir('captioner', d, s)}/{CONFIG_FILE}").exists()]
    if missing:
        raise InputError("data/models/captioner", f"no trained captioner for {missing}")
    # masked probe images encoded once, before the fork (content-keyed feature cache)
    first = Captioner.load(model_dir("captioner", *cap_dirs[0]))
    key0 = (first.config.image_encoder, first.config.image_size)
    encoded(feats_by_encoder, masked["path"].tolist(), key0, first.config.num_threads,
            executor)
    if flip is not None:
        encoded(flip_feats, flip["path"].tolist(), key0, first.config.num_threads, executor)

    def caption_pairs(job: tuple[str, int]):
        d, s = job
        model = Captioner.load(model_dir("captioner", d, s))
        key = (model.config.image_encoder, model.config.image_size)
        feats = encoded(feats_by_encoder, masked["path"].tolist(), key,
                        model.config.num_threads)
        caps = model.generate(feats, beam=st.beam, max_len=st.max_len,
                              no_repeat_ngram=st.no_repeat_ngram)
        sens = P.pair_sensitivities(masked, P.caption_output(caps, words))
        by = dict(zip(zip(masked["attribute"], masked["pair"], masked["value"]), caps))
        # the continuous probe: both images of a pair score the SAME caption pair (the
        # female-associated image's caption, gendered both ways), so only the image differs
        texts = [P.gendered_versions(by[(a, k, "female")], words)
                 for a, k in zip(masked["attribute"], masked["pair"])]
        margin = P.pair_sensitivities(masked, P.caption_margin_output(
            model, feats, texts))
        flipped = None
        if flip is not None:
            fcaps = model.generate(encoded(flip_feats, flip["path"].tolist(), key,
                                           model.config.num_threads), beam=st.beam,
                                   max_len=st.max_len, no_repeat_ngram=st.no_repeat_ngram)
            flipped = P.flip_sensitivities(flip, P.flip_output(flip, captions=fcaps))
        return flipped, sens.assign(
            caption_female=[by[(a, k, "female")] for a, k in zip(sens["attribute"],
                                                                  sens["pair"])],
            caption_male=[by[(a, k, "male")] for a, k in zip(sens["attribute"],
                                                              sens["pair"])],
            margin_out_female=margin["out_female"].to_numpy(),
            margin_out_male=margin["out_male"].to_numpy(),
            margin_sensitivity=margin["sensitivity"].to_numpy())

    # one job per captioner on captioner.workers processes; results in job order
    jobs = [(d, int(s)) for d, s in cap_dirs]
    by_job = dict(zip(jobs, map_jobs(caption_pairs, jobs, st.captioner_workers)))
    out["captioner_margin"] = {}
    for d in st.captioners:
        per_seed, per_seed_margin, per_seed_flip = {}, {}, {}
        for s in st.captioner_seeds:
            flipped, sens = by_job[(d, int(s))]
            if flipped is not None:
                per_seed_flip[int(s)] = flipped
                rows.append(flipped.assign(model="captioner_flip", dataset=d, seed=int(s)))
            mcols = ["margin_out_female", "margin_out_male", "margin_sensitivity"]
            per_seed[int(s)] = sens.drop(columns=mcols)
            per_seed_margin[int(s)] = sens[["attribute", "pair"]].assign(
                out_female=sens["margin_out_female"], out_male=sens["margin_out_male"],
                sensitivity=sens["margin_sensitivity"])
            rows.append(sens.assign(model="captioner", dataset=d, seed=int(s)))
        out["captioner"][d] = P.summarize_sensitivity(per_seed, **kw)
        out["captioner_margin"][d] = P.summarize_sensitivity(per_seed_margin, **kw)
        if per_seed_flip:
            fout["captioner"][d] = P.summarize_flip(per_seed_flip, attribute, **kw)
    if flip is None:
        out["flip"] = {"available": False, "reason": flip_note}
    else:
        out["flip"] = {"available": True, "attribute": attribute, "dims": list(P.FLIP_DIMS[attribute]),
                       "n_pairs": {k: int(n) for k, n in flip.drop_duplicates(
                           ["attribute", "pair"])["attribute"].value_counts().sort_index()
                           .items()},
                       "objects": {dm: dict(zip(S_FLIP[dm], P.flip_objects(dm)))
                                   for dm in P.FLIP_DIMS[attribute]},
                       # what a reader of the attribute alone learns from the training images
                       "reference": P.flip_reference(root, P.FLIP_DIMS[attribute],
                                                     n_boot=kw["n_boot"], seed=kw["seed"]),
                       **fout}

    return out, rows, masked
