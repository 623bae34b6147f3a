"""The captioning evaluation of paper 000 Table 2 (+ thesis Table 2.1): per-seed metrics
(:func:`caption_metrics`), their summary over captioner seeds (:func:`seed_records`), the one
source of image gender labels (:func:`gender_labels`) and LIBRA on top of any captioner
(:func:`apply_libra`). Shared by every captioner architecture."""
from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from biaslab import registry
from biaslab.captioning.data import image_features
from biaslab.runtime.io import InputError

__all__ = ["clip_score_for", "METRICS", "GENDER_SOURCES", "MetricContext", "caption_metrics",
           "compute_metric",
           "metric_keys", "seed_records", "gender_labels", "apply_libra"]


def clip_score_for(scorer, captions: Sequence[str], image_paths: Sequence[str] | None = None,
                   image_feats: np.ndarray | None = None, prefix: str | None = None) -> float:
    """CLIPScore x100 (Hessel et al. 2021; paper 000 Table 2 "CS") of ``captions``.

    With a LiT scorer (:class:`biaslab.models.clipscorer.LiTScorer`) whose image backbone produced
    ``image_feats``, the cached features are projected directly (no re-encoding); otherwise
    the scorer encodes ``image_paths``. ``prefix``: None = "A photo depicts " when the LiT
    scorer was trained with ``prefix_prob > 0`` (or for any other scorer), else "" (a LiT
    scorer that never saw the prefix would be scored off-distribution)."""
    from biaslab.metrics.quality import clip_score, clip_score_with
    cfg = getattr(scorer, "config", None)
    is_lit = isinstance(cfg, dict) and cfg.get("type") in (None, "lit") and "d_img" in cfg
    if prefix is None:
        prefix = (cfg.get("prefix", "A photo depicts ") if float(cfg.get("prefix_prob", 0)) > 0
                  else "") if is_lit else "A photo depicts "
    if is_lit and image_feats is not None and np.shape(image_feats)[1] == cfg["d_img"]:
        img = scorer.encode_images(np.asarray(image_feats, np.float32))
        txt = scorer.encode_texts([prefix + c for c in captions])
        return 100.0 * clip_score(img, txt)
    if image_paths is None:
        raise ValueError("clip_score_for needs image paths for this scorer")
    return 100.0 * clip_score_with(scorer, list(image_paths), list(captions), prefix=prefix)


#: flat metric names of :func:`caption_metrics` (paper 000 Table 2 + thesis Table 2.1), the
#: keys of each row of ``metrics/captioning.json``: the built-in captioning entries of
#: ``biaslab.registry.METRICS`` in registration order. ``Error`` is capitalised on purpose: DVC
#: reads any metrics key named exactly ``error`` as a load error.
METRICS = tuple(e.name for e in registry.METRICS.builtins() if e.task == "captioning")

#: gender label sources of the captioning evaluation (param ``eval_captioner.gender_source``).
GENDER_SOURCES = ("auto", "perceived", "caption")


@dataclass(frozen=True)
class MetricContext:
    """What a captioning metric (registry kind ``metrics``, ``task="captioning"``), built-in
    or plug-in, is given for one results set (one row, one captioner seed).

    Attributes:
        predictions: image id -> the model's caption (every evaluated image).
        genders: image id -> ``female`` / ``male`` / other (the image's gender label; bias
            metrics use the female/male ones).
        human: image id -> its human captions (may be empty for an image).
        words: the gender word list (``label.words``, :mod:`biaslab.data.gender`).
        flat: the built-in metrics of this results set (:data:`METRICS`, read-only), given
            to plug-in metrics, which are computed after them; empty for the built-ins.
        image_paths: image id -> image file, when the stage has them.
        details: what several metrics share, computed once per results set
            (:func:`caption_metrics`): :func:`biaslab.metrics.evaluate.evaluate_captions`'
            dict (``quality``, ``Ratio``, ``Error``, ``BiasAmp``, ``LIC*``, ``DBAC``) plus
            ``CLIPScore`` and ``DBA``; a group that could not be computed is
            ``{"skipped": reason}`` (read-only).
    """
    predictions: Mapping[int, str]
    genders: Mapping[int, str]
    human: Mapping[int, Sequence[str]]
    words: str = "lic"
    flat: Mapping[str, Any] = field(default_factory=dict)
    image_paths: Mapping[int, str] | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


def metric_keys(extra: Sequence[str] = ()) -> tuple[str, ...]:
    """:data:`METRICS` plus the ``extra`` metrics (param ``eval_captioner.metrics``): the keys
    of each row of ``metrics/captioning.json``."""
    return METRICS + tuple(n for n in extra if n not in METRICS)


def compute_metric(name: str, ctx: MetricContext) -> float | int | None:
    """Captioning metric ``name``'s ``compute(ctx)`` through its registry entry: the one path
    of the built-in columns and of plug-in metrics. NaN is None (missing); ``inf`` stays (a
    Ratio whose model never says one gender is counted, never dropped).

    Raises:
        biaslab.registry.RegistryError: an unknown name (listing the known ones).
        ValueError: a metric of another task, one that fails, or one returning other than a
            number or None; each names the metric and the package it comes from.
    """
    e = registry.METRICS.get(name)
    where = f"captioning metric {e.name!r} (from {registry.METRICS.origin(e.name)})"
    if e.task != "captioning":
        raise ValueError(f"{where} is a {e.task} metric")
    try:
        v = e.load()(ctx)
    except registry.RegistryError:
        raise
    except Exception as err:
        raise ValueError(f"{where} failed: {err}") from err
    if v is not None and not isinstance(v, (int, float, np.integer, np.floating)) or \
            isinstance(v, bool):
        raise ValueError(f"{where} returned {type(v).__name__}, not a number or None")
    return _number(v)


def _plugin_names(names: Sequence[str]) -> list[str]:
    """``names`` (param ``eval_captioner.metrics``), each checked to be a plug-in captioning
    metric: the built-ins are always computed."""
    plugins = {e.name for e in registry.plugin_metrics("captioning")}
    for name in names:
        registry.METRICS.get(name)      # an unknown name lists the known ones
        if name not in plugins:
            raise ValueError(f"eval_captioner.metrics: {name!r} is a built-in or not a "
                             f"captioning metric; name only plug-in captioning metrics")
    return list(names)


def caption_metrics(predictions: Mapping[int, str], genders: Mapping[int, str],
                    human: Mapping[int, Sequence[str]], *, scorer=None,
                    image_paths: Mapping[int, str] | None = None,
                    image_feats: Mapping[int, np.ndarray] | None = None, words: str = "lic",
                    classifier: str = "lstm", preset: str = "ci", seeds: int = 3,
                    num_threads: int | None = 1, biasamp_min_count: int = 100,
                    metrics: Sequence[str] = ("ratio", "error", "biasamp", "lic", "quality"),
                    progress: bool = False, train_captions: Sequence[str] | None = None,
                    image_objects: Mapping[int, Sequence[str]] | None = None,
                    max_human_captions: int | None = None,
                    dbac: Mapping[str, Any] | None = None,
                    extra_metrics: Sequence[str] = ()) -> tuple[dict, dict]:
    """All captioning metrics of one results set (one captioner seed) -> ``(flat, details)``.

    ``flat`` has the keys of :data:`METRICS`: a float, ``inf`` for a Ratio whose model never
    says "woman" or never "man" (r = 0 or infinite: counted by :func:`seed_records`, never
    dropped), or None when not computable (LIC when a gender has too few images, CLIPScore
    without a scorer, DBA without ``image_objects``, BiasAmp with no word in L); plus
    ``ratio_raw`` (#man/#woman) and ``n_images``. Two degeneracy measures sit beside Ratio
    (not in the papers): ``no_gender_word``, the % of the gender-labelled
    images whose caption has no word of the ``words`` list (``biaslab.data.gender.caption_gender``
    "none"; a captioner that drops the person reads "unbiased" on Ratio), and ``length``,
    the mean number of tokens (``biaslab.data.gender.tokenize``) per caption over every
    prediction. ``LIC``/``LIC_M``/``LIC_D`` are the means
    over the LIC classifier seeds (``seeds``) of this one results set; their spread over LIC
    seeds is in ``details["LIC_*_std"]``.

    ``details`` is :func:`biaslab.metrics.evaluate.evaluate_captions`'s dict (counts, LIC per-seed details,
    BiasAmp reference, skipped reasons) plus ``CLIPScore`` / ``CLIPScore_note`` and ``DBA``.

    Bias metrics use images labelled female/male in ``genders``; quality metrics every
    prediction with human captions. CLIPScore over every prediction (needs ``image_feats`` or
    ``image_paths``). BiasAmp's reference is ``train_captions`` (the training set's human
    captions, thesis 2.8.2 / LIBRA supp. 2) when given, else ``human``. DBA_G / DBA_O (thesis
    Eqs. 2.12-2.14, :func:`biaslab.metrics.dba.caption_dba`) need ``image_objects``
    (image id -> MSCOCO categories annotated on it); only labelled images WITH an entry are
    used (an image without one has an unknown object set, e.g. most coco-mini images);
    DBA_O's reference is the objects mentioned in ``human`` captions when given.
    ``max_human_captions``: LIC_D averages over the first that many human-caption indices
    (None: all; param ``lic.max_human_captions``).
    ``extra_metrics`` (param ``eval_captioner.metrics``): plug-in captioning metrics (registry
    kind ``metrics``), added to ``flat`` under their names, each computed from a
    :class:`MetricContext` of this results set.
    ``dbac``: when given (param ``eval_captioner.dbac``), DBAC in both directions
    (:mod:`biaslab.metrics.dbac`, the LIC attacker) with these settings: ``DBAC_T_to_A`` /
    ``DBAC_A_to_T`` (the authors' prior correction) and ``DBAC_direct_*`` (without it), each
    the mean over the DBAC seeds of this results set.
    """
    from biaslab.metrics.evaluate import evaluate_captions
    if dbac is not None and "dbac" not in metrics:
        metrics = (*metrics, "dbac")
    det = evaluate_captions(dict(predictions), dict(genders), dict(human), tuple(metrics),
                            words, classifier, preset, seeds, num_threads, progress,
                            biasamp_min_count, None, train_captions,
                            max_human_captions=max_human_captions,
                            dbac=None if dbac is None else dict(dbac))
    ids = sorted(predictions)
    if scorer is None:
        det["CLIPScore_note"] = "skipped: no CLIP scorer (data/scorer missing)"
    else:
        feats = np.stack([image_feats[i] for i in ids]) if image_feats is not None else None
        paths = [image_paths[i] for i in ids] if image_paths is not None else None
        det["CLIPScore"] = clip_score_for(scorer, [predictions[i] for i in ids], paths, feats)
    if image_objects is not None:
        from biaslab.metrics.dba import caption_dba
        gid = [i for i in ids if genders.get(i) in ("female", "male") and i in image_objects]
        d = caption_dba([predictions[i] for i in gid], [genders[i] for i in gid],
                        [image_objects.get(i, ()) for i in gid], words=words,
                        human_captions=([list(human.get(i) or []) for i in gid]
                                        if human else None))
        det["DBA"] = {k: d[k] for k in ("DBA_G", "DBA_O", "n_images", "n_objects")}
    else:
        det["DBA"] = {"skipped": "no object annotations given"}
    from biaslab.captioning.columns import COMPANIONS
    ctx = MetricContext(predictions=dict(predictions), genders=dict(genders), human=dict(human),
                        words=words, image_paths=None if image_paths is None
                        else dict(image_paths), details=det)
    flat: dict[str, Any] = {}
    for name in METRICS:
        flat[name] = compute_metric(name, ctx)
        if name in COMPANIONS:
            key, read = COMPANIONS[name]
            flat[key] = _number(read(ctx))
    plugin_ctx = dataclasses.replace(ctx, flat=dict(flat))
    for name in _plugin_names(extra_metrics):
        flat[name] = compute_metric(name, plugin_ctx)
    return flat, det


def _number(v):
    """int stays int; a float stays (+-inf kept: an infinite Ratio is counted, not dropped);
    NaN, dicts (``{"skipped": ...}``) and None -> None (missing)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(float(v)) else float(v)
    return None


def seed_records(rows: Sequence[Mapping[str, Any]], keys: Sequence[str] | None = None,
                 seeds: Sequence[int] | None = None) -> dict:
    """One row of ``metrics/captioning.json``: every metric over captioner seeds as a
    :func:`biaslab.runtime.stats.record`, plus the per-seed values.

    Args:
        rows: one :func:`caption_metrics` ``flat`` dict per captioner seed.
        keys: the metrics to summarise (default :data:`METRICS`; with plug-in metrics
            :func:`metric_keys`).
        seeds: the captioner seed of each row (default 0..n-1).

    Returns:
        ``{key: stats.record(values over seeds) for key in keys, "per_seed": [{"seed": s,
        key: value, ...}, ...]}``. A None value (e.g. a LIC skipped for too few images) is
        counted in the record's ``n_missing``; an infinite one (a Ratio with r = 0 or inf) in
        ``n_inf`` and never dropped (the mean is then None, see :mod:`biaslab.runtime.stats`). In
        ``per_seed`` an infinite value is written as the string ``"inf"`` (strict JSON), a
        missing one as null.

    LIC over two kinds of seeds (decision): each captioner seed's LIC / LIC_M / LIC_D is
    already the mean over the LIC classifier seeds (``lic.seeds``, thesis 2.5: 10 seeds) of
    that captioner's captions; the record is then over captioner seeds, so its ``ci95`` is
    the spread of captioner training, with the LIC-classifier noise averaged inside each
    seed's value (the per-LIC-seed values stay in ``data/captions/eval.json``).

    Raises:
        ValueError: a value that is not a number; ``seeds`` of another length than ``rows``.
    """
    from biaslab.runtime import stats
    keys = METRICS if keys is None else keys
    seeds = list(range(len(rows))) if seeds is None else [int(x) for x in seeds]
    if len(seeds) != len(rows):
        raise ValueError(f"{len(seeds)} seeds for {len(rows)} rows")
    out: dict[str, Any] = {k: stats.record([r.get(k) for r in rows]) for k in keys}

    def cell(v):
        if v is None:
            return None
        v = float(v)
        return v if math.isfinite(v) else ("inf" if v > 0 else "-inf")

    out["per_seed"] = [{"seed": s, **{k: cell(r.get(k)) for k in keys}}
                       for s, r in zip(seeds, rows)]
    return out


def gender_labels(source: str, perceived: pd.DataFrame | None,
                  caption_labels: pd.DataFrame | None) -> tuple[dict[int, str], str]:
    """Image gender labels of the captioning evaluation, from ONE documented source (the
    same rule in stages ``eval_captioner`` and ``human_bias``).

    Args:
        source: ``"perceived"``: crowd-sourced perceived gender (``perceived_gender.parquet``,
            columns ``image_id, perceived_gender``; COCO: Zhao et al. 2021 annotations, the
            labels paper 000 / the thesis evaluate against); ``"caption"``: labels derived
            from the human captions' gender words (``labels/images.parquet``, columns
            ``image_id, gender``; GenSynth / paper 000 sec. 3.1 rule); ``"auto"``: perceived
            when that table has any female/male label, else caption.
        perceived: the perceived-gender table, or None when the source has none.
        caption_labels: the caption-derived label table, or None.

    Returns:
        ``({image_id: "female"/"male"}, used)`` with ``used`` in ``("perceived",
        "caption")``; other values (unsure, both, none) are left out.

    Raises:
        InputError: an unknown source, or the chosen source has no female/male label.
    """
    if source not in GENDER_SOURCES:
        raise InputError("params.yaml", f"eval_captioner.gender_source must be one of "
                                        f"{list(GENDER_SOURCES)}, got {source!r}")

    def table(df, col):
        if df is None or df.empty:
            return {}
        df = df[df[col].isin(["female", "male"])]
        return {int(i): str(g) for i, g in zip(df["image_id"], df[col])}

    per = table(perceived, "perceived_gender")
    used = "perceived" if source == "perceived" or (source == "auto" and per) else "caption"
    labels = per if used == "perceived" else table(caption_labels, "gender")
    if not labels:
        where = ("data/prepared/perceived_gender.parquet" if used == "perceived"
                 else "data/labels/images.parquet")
        raise InputError(where, f"no female/male {used} gender label "
                                f"(eval_captioner.gender_source={source})")
    return labels, used

#: the pipeline's two gender-label tables (stages prepare / label_gender write them)
PERCEIVED_TABLE = "data/prepared/perceived_gender.parquet"
CAPTION_LABEL_TABLE = "data/labels/images.parquet"


def read_gender_labels(source: str, perceived: str | os.PathLike = PERCEIVED_TABLE,
                       caption_labels: str | os.PathLike = CAPTION_LABEL_TABLE
                       ) -> tuple[dict[int, str], str]:
    """:func:`gender_labels` on the label tables of a pipeline run: the perceived-gender one
    when the data has it (only real COCO-layout data does), the caption-derived one always.

    Returns and raises as :func:`gender_labels`; a missing ``caption_labels`` file is an
    ``InputError`` naming it (:func:`biaslab.runtime.io.read_parquet`)."""
    from biaslab.runtime.io import read_parquet
    per = read_parquet(perceived) if os.path.exists(perceived) else None
    return gender_labels(source, per, read_parquet(caption_labels))


def apply_libra(dcg_dir: str | os.PathLike, captions: Sequence[str], image_table: pd.DataFrame,
                cache_dir: str | os.PathLike, seed: int = 0, num_threads: int | None = 1,
                num_beams: int | None = None) -> list[str]:
    """LIBRA on top of a captioner (paper 003 sec. 4 "Inference"; paper 000 Table 2 "LIBRA"):
    the DCG at ``dcg_dir`` (``biaslab.libra.dcg.save``) debiases ``captions`` (row i of
    ``image_table`` (image_id, path) is caption i's image). Features-mode DCGs read the frozen
    backbone features recorded in their settings (through the shared cache); pixel-mode DCGs
    read the image files. Masking is seeded (``seed``); ``num_beams`` None = the DCG's own
    setting (the same call as stage ``dcg_apply`` / ``biaslab libra debias``).

    Raises ``InputError`` when ``dcg_dir`` is not a saved DCG."""
    from biaslab.libra import dcg as dcglib
    try:
        model = dcglib.load(dcg_dir, num_threads=num_threads)
    except (FileNotFoundError, ValueError) as e:
        raise InputError(dcg_dir, str(e)) from e
    s = model.settings
    if s.image_input == dcglib.FEATURES:
        images = image_features(image_table, cache_dir, s.backbone, s.image_size,
                                num_threads=num_threads)
    else:
        images = image_table["path"].astype(str).tolist()
    return dcglib.debias(model, list(captions), images, num_beams=num_beams, seed=seed)

