"""Paper 000's Table 2 and thesis Table 2.1 from the trained captioners (the
logic of stage ``eval_captioner``, which now only reads its inputs and writes its files; the
record's layout is in ``stages/eval_captioner.py``'s docstring).

:func:`test_set` picks the evaluated images, :func:`evaluate_captioners` captions them with
every (arch, dataset, seed) captioner, applies the caption post-processors of the registry
(LIBRA's DCG first) and scores every row with
:func:`biaslab.captioning.evaluation.caption_metrics`; :func:`summarize_rows` gives the record
over captioner seeds (:func:`biaslab.captioning.evaluation.seed_records`).
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biaslab import captioning as K
from biaslab import registry
from biaslab.captioning import data as CD
from biaslab.captioning import evaluation as C
from biaslab.captioning import postprocess as PP
from biaslab.runtime.io import InputError, write_json
from biaslab.runtime.parallel import map_jobs, resolve_workers
from biaslab.runtime.progress import bar as progress_bar

@dataclass(frozen=True)
class EvalSettings:
    """Params group ``eval_captioner`` (its defaults live here; ``stages/eval_captioner.py``
    says what each does). ``postprocessor_params`` is read by :func:`Table2Settings.
    from_params` into each post-processor's own settings."""
    test_images: str = "gendered"
    gender_source: str = "auto"
    biasamp_min_count: int = 5
    batch_size: int = 64
    scorer: str = "data/scorer"
    dcg: str = "data/libra/dcg"
    workers: int | None = 1
    postprocessors: tuple[str, ...] = ("LIBRA",)
    metrics: tuple[str, ...] = ()
    dbac: Mapping[str, Any] | None = None
    postprocessor_params: Mapping[str, Any] | None = None

    def __post_init__(self):
        object.__setattr__(self, "postprocessors", tuple(self.postprocessors or ()))
        object.__setattr__(self, "metrics", tuple(self.metrics or ()))
        if self.test_images not in ("gendered", "all"):
            raise ValueError(f"eval_captioner.test_images must be 'gendered' or 'all', got "
                             f"{self.test_images!r}")


@dataclass(frozen=True)
class LicSettings:
    """Params group ``lic``: the LIC classifier of every Table 2 row (thesis sec. 2.5)."""
    classifier: str = "lstm"
    preset: str = "ci"
    seeds: int | tuple[int, ...] = 3
    num_threads: int | None = 1
    workers: int | None = 1
    max_human_captions: int | None = None


@dataclass(frozen=True)
class Table2Settings:
    """Everything :func:`evaluate_captioners` reads, built once by the stage
    (:meth:`from_params`).

    Attributes:
        datasets, seeds, archs: the trained captioners (``captioner.datasets``,
            ``captioner.seeds``, ``captioner.archs``).
        beam, max_len, no_repeat_ngram: decoding (``captioner.*``; None: the model's own).
        eval: :class:`EvalSettings`; lic: :class:`LicSettings`.
        words: the gender word list (``label.words``).
        feature_cache: the backbone feature cache (``features.cache_dir``).
        postprocessors: ``{name: settings}`` of the caption post-processors
            (``registry.POSTPROCESSORS.settings_for``).
    """
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]
    archs: tuple[str, ...]
    eval: EvalSettings = EvalSettings()
    lic: LicSettings = LicSettings()
    beam: int | None = None
    max_len: int | None = None
    no_repeat_ngram: int | None = None
    words: str = "lic"
    feature_cache: str = "data/cache/features"
    postprocessors: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "Table2Settings":
        """From the composed params (``captioner``, ``eval_captioner``, ``lic``,
        ``label.words``, ``features.cache_dir`` and the post-processors' groups).

        Raises:
            InputError: an unknown arch or key, or a bad value (naming params.yaml and the
                dotted param).
        """
        from biaslab.runtime.settings import from_params
        p = params.get("captioner") or {}
        try:
            e = from_params(EvalSettings, params.get("eval_captioner"), "eval_captioner")
            lp = from_params(LicSettings, params.get("lic"), "lic")
            archs = K.archs_from_params(p)
            post = registry.POSTPROCESSORS.settings_for(e.postprocessors, params)
        except (ValueError, registry.RegistryError) as err:
            raise InputError("params.yaml", str(err)) from err
        return cls(datasets=tuple(p["datasets"]), seeds=tuple(int(s) for s in p["seeds"]),
                   archs=tuple(archs), eval=e, lic=lp, beam=p.get("beam"),
                   max_len=p.get("max_len"), no_repeat_ngram=p.get("no_repeat_ngram"),
                   words=(params.get("label") or {}).get("words", "lic"),
                   feature_cache=(params.get("features") or {}).get("cache_dir",
                                                                    "data/cache/features"),
                   postprocessors=post)


def test_set(which: str, split: pd.DataFrame, images: pd.DataFrame, captions: pd.DataFrame,
             labels: dict, used: str):
    """Test images (``gendered``: labelled female/male by the chosen source, the paper 000 test
    set "retaining only images with gender-specific terms"; ``all``: every test image), their
    human captions, female/male labels and the training split's human captions (BiasAmp's
    reference D).

    Args:
        which: ``eval_captioner.test_images``.
        split, images, captions: ``data/split.parquet``, ``data/prepared/images.parquet``,
            ``data/prepared/captions.parquet``.
        labels, used: {image_id: gender} and its source (:func:`C.gender_labels`).

    Returns:
        ``(table, human, genders, train_caps)``: the images (image_id, path; sorted),
        {image_id: [human captions]}, {image_id: gender} of the test images, and the
        training captions.

    Raises:
        InputError: an unknown ``which``, no test image, or no training caption.
    """
    if which not in ("gendered", "all"):
        raise InputError("params.yaml", f"eval_captioner.test_images must be 'gendered' or "
                                        f"'all', got {which!r}")
    test_ids = set(split.loc[split["split"] == "test", "image_id"].astype(int))
    train_ids = set(split.loc[split["split"] == "train", "image_id"].astype(int))
    if which == "gendered":
        test_ids &= set(labels)
    table = images[images["image_id"].isin(test_ids)][["image_id", "path"]] \
        .sort_values("image_id", ignore_index=True)
    if table.empty:
        raise InputError("data/split.parquet", f"no test images (labelled by {used})")
    caps = captions.sort_values(["image_id", "caption_id"])
    human = {int(i): list(g["caption"]) for i, g in caps[caps["image_id"].isin(test_ids)]
             .groupby("image_id")}
    train_caps = caps.loc[caps["image_id"].isin(train_ids), "caption"].astype(str).tolist()
    if not train_caps:
        raise InputError("data/split.parquet", "no training captions (BiasAmp's reference)")
    genders = {i: g for i, g in labels.items() if i in test_ids}
    return table, human, genders, train_caps


def image_objects(objects: pd.DataFrame | None, ids) -> dict:
    """image id -> MSCOCO categories annotated on it (images with at least one row);
    ``objects``: ``data/prepared/objects.parquet`` or None."""
    if objects is None:
        return {}
    o = objects[objects["image_id"].isin(set(ids))]
    return {int(i): sorted(set(g["category"].astype(str))) for i, g in o.groupby("image_id")}


def categories(objects: pd.DataFrame | None) -> list[str] | None:
    """DBAC's task list L: every category of the prepared object table (person included: the
    metric drops it), None when the data has no object table (the 80 MSCOCO categories)."""
    if objects is None:
        return None
    cats = sorted(set(objects["category"].astype(str)))
    return cats or None


def _write_results(path: str, ids, captions) -> None:
    write_json(path, [{"image_id": int(i), "caption": c} for i, c in zip(ids, captions)])


def evaluate_captioners(settings: Table2Settings, table: pd.DataFrame, human: dict,
                        genders: dict, g_used: str, train_caps: list[str], objects: dict,
                        cats: list[str] | None, scorer, captions_dir: str = "data/captions"):
    """Caption ``table`` with every trained captioner and score every row.

    Args:
        settings: :class:`Table2Settings` (the stage builds it from params.yaml).
        table, human, genders, train_caps: :func:`test_set`; g_used: the gender labels'
            source.
        objects, cats: :func:`image_objects`, :func:`categories`.
        scorer: the LiT CLIP scorer (:func:`biaslab.models.clipscorer.load_scorer`) or None
            (CLIPScore skipped).
        captions_dir: where each model's captions are written (COCO results format,
            ``<dataset>[-<arch>]-<seed>.json``, post-processed rows as ``<row>...``).

    Returns:
        ``(summary, per_model, notes)``: the record of ``metrics/captioning.json``,
        {result key: {"metrics", "details", "examples"}} and the notes of ``eval.json``
        (skipped rows, the human captions' CLIPScore).

    Raises:
        InputError: a trained captioner missing.
    """
    e, lp = settings.eval, settings.lic
    words, cache = settings.words, settings.feature_cache
    post = [registry.POSTPROCESSORS.get(n) for n in e.postprocessors]
    ids = table["image_id"].astype(int).tolist()
    paths = dict(zip(ids, table["path"].astype(str)))
    mkw = dict(scorer=scorer, image_paths=paths, words=words, classifier=lp.classifier,
               preset=lp.preset, seeds=lp.seeds, num_threads=lp.num_threads,
               biasamp_min_count=int(e.biasamp_min_count), train_captions=train_caps,
               image_objects=objects, progress=True,   # tqdm over the LIC classifiers
               max_human_captions=lp.max_human_captions,
               dbac=(None if not e.dbac else {**e.dbac, "categories": cats}),
               extra_metrics=list(e.metrics))
    feats_by_encoder: dict = {}

    def feats_for(arch, model):
        key = arch.feature_key(model.config)
        if key not in feats_by_encoder:
            feats_by_encoder[key] = arch.features(table, cache, model.config,
                                                  num_threads=model.config.num_threads,
                                                  progress=True)
        return feats_by_encoder[key]

    def scorer_feats():
        # the LiT scorer projects cached features of its own backbone (no re-encoding)
        cfg = getattr(scorer, "config", None)
        if not isinstance(cfg, dict) or "image_encoder" not in cfg:
            return None
        f = CD.image_features(table, cache, cfg["image_encoder"], cfg.get("image_size"),
                             num_threads=lp.num_threads)
        return dict(zip(ids, f))

    s_feats = scorer_feats() if scorer is not None else None
    datasets, seeds, archs = list(settings.datasets), list(settings.seeds), list(settings.archs)
    missing = [f"{K.arch_name(d, a)}-{s}" for a in archs for d in datasets for s in seeds
               if not Path(K.arch_model_dir(d, s, a), K.get_arch(a).config_file).exists()]
    if missing:
        raise InputError("data/models/captioner", f"no trained captioner for {missing} "
                                                  f"(run train_captioner)")
    per_model, rows, row_seeds, skipped = {}, {}, {}, {}
    # features of each arch's first captioner are read before the fork (every worker
    # inherits them); each (arch, dataset, seed) is one job on eval_captioner.workers processes
    for a in archs:
        feats_for(K.get_arch(a), K.get_arch(a).load(K.arch_model_dir(datasets[0], seeds[0], a)))

    def evaluate(job: tuple[str, str, int]) -> list[tuple]:
        a, d, s = job
        arch = K.get_arch(a)
        name = f"{K.arch_name(d, a)}-{s}"
        t0 = time.perf_counter()
        model = arch.load(K.arch_model_dir(d, s, a))
        preds = model.generate(feats_for(arch, model), beam=settings.beam,
                               max_len=settings.max_len, batch_size=e.batch_size,
                               no_repeat_ngram=settings.no_repeat_ngram)
        _write_results(f"{captions_dir}/{name}.json", ids, preds)
        variants, skips = [(d, name, preds)], []
        # caption post-processors (registry; LIBRA's DCG the first) on their base row's
        # captions, seeded by the captioner seed: row <base>+<name>
        ctx = PP.CaptionContext(table=table, seed=s, feature_cache=cache,
                                num_threads=lp.num_threads, train_captions=tuple(train_caps),
                                words=words, component_settings=settings.postprocessors)
        for pe in post:
            if pe.base != d:
                continue
            try:
                caps = PP.apply(pe.name, preds, ctx)
            except registry.Skipped as why:
                skips.append((pe.row, str(why)))
                continue
            pname = f"{K.arch_name(pe.row, a)}-{s}"
            _write_results(f"{captions_dir}/{pname}.json", ids, caps)
            variants.append((pe.row, pname, caps))
        out = []
        for row, key, caps in variants:
            flat, det = C.caption_metrics(dict(zip(ids, caps)), genders, human,
                                          image_feats=s_feats, **mkw)
            flat["seconds"] = round(time.perf_counter() - t0, 1)
            out.append((a, row, key, s, {
                "metrics": flat, "details": det,
                "examples": [{"image_id": i, "gender": genders.get(i), "caption": c,
                              "human": human.get(i, [""])[0]}
                             for i, c in list(zip(ids, caps))[:10]]}))
        return out, skips

    jobs = [(a, d, s) for a in archs for d in datasets for s in seeds]
    workers = resolve_workers(e.workers, len(jobs))
    if workers > 1:
        mkw["progress"] = False       # one bar per worker would interleave: the parent's
    bar = progress_bar(desc="eval_captioner", total=len(jobs), unit="captioner",
                       progress=None if workers > 1 else False)  # counts finished jobs
    with bar:
        done = map_jobs(evaluate, jobs, workers, on_done=lambda i, r: bar.update(1))
    for results, skips in done:
        skipped.update(skips)
        for a, row, key, s, res in results:   # job order: identical to a sequential run
            per_model[key] = res
            rows.setdefault((a, row), []).append(res["metrics"])
            row_seeds.setdefault((a, row), []).append(s)
            print(f"eval_captioner {key}: " + ", ".join(
                f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                for k, v in res["metrics"].items()))
    for row, why in skipped.items():
        print(f"eval_captioner: row {row} skipped: {why}")
    order = ["original"] + [pe.row for pe in post] + [d for d in datasets if d != "original"]

    def arch_summary(a: str) -> dict:
        return {r: C.seed_records(rows[(a, r)], keys=C.metric_keys(list(e.metrics)),
                                  seeds=row_seeds[(a, r)]) for r in order if (a, r) in rows}

    # ClipCap's rows stay at the top level (the layout before captioner.archs existed)
    summary = arch_summary(K.DEFAULT_ARCH) if K.DEFAULT_ARCH in archs else {}
    others = {a: arch_summary(a) for a in archs if a != K.DEFAULT_ARCH}
    if others:
        summary["archs"] = others
    n_g = {g: sum(1 for v in genders.values() if v == g) for g in ("female", "male")}
    ba0 = next(iter(per_model.values()))["details"].get("BiasAmp") or {}
    summary["test_set"] = {
        "n_images": len(ids), "n_female": n_g["female"], "n_male": n_g["male"],
        "gender_source": g_used, "gender_source_param": e.gender_source,
        "test_images": e.test_images, "biasamp_reference": ba0.get("reference"),
        "n_reference_captions": ba0.get("n_reference_captions"),
        "biasamp_min_count": int(e.biasamp_min_count),
        # BiasAmp of the test images' own human captions: the null a row is read against
        "biasamp_human_null": ba0.get("human_null"),
        "n_dba_images": sum(1 for i in ids if i in objects and i in genders),
        "lic_seeds": lp.seeds}
    notes = {}
    if scorer is not None:  # reference: the first human caption of each test image
        hid = [i for i in ids if human.get(i)]
        notes["CLIPScore_human_first_caption"] = C.clip_score_for(
            scorer, [human[i][0] for i in hid], [paths[i] for i in hid],
            None if s_feats is None else np.stack([s_feats[i] for i in hid]))
    if scorer is None:
        notes["CLIPScore"] = f"skipped: no scorer at {e.scorer}"
    for row, why in skipped.items():
        notes[row] = f"skipped: {why}"
    return summary, per_model, notes


def csv_rows(summary: dict, extra_metrics=()) -> tuple[list[str], list[list]]:
    """``(header, rows)`` of ``plots/captioning.csv``: one row per training set and arch
    (``<arch>/<row>`` for non-ClipCap archs), each metric's mean and 95 % CI half-width."""
    keys = C.metric_keys(list(extra_metrics))
    header = ["dataset", *[f"{k}_{x}" for k in keys for x in ("mean", "ci95")]]
    flat = [(r, m) for r, m in summary.items() if r not in ("test_set", "archs")]
    flat += [(f"{a}/{r}", m) for a, ms in summary.get("archs", {}).items()
             for r, m in ms.items()]
    return header, [[r, *["" if m[k][x] is None else round(m[k][x], 4)
                          for k in keys for x in ("mean", "ci95")]] for r, m in flat]
