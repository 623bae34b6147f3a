"""Checks of the param groups that nest model settings: DBAC's settings
(``eval_captioner.dbac``, ``published.dbac``), ``libra`` (LIBRA's stages: BCS, T5, DCG and its
application) and ``published`` (the nine released captioners). :mod:`biaslab.runtime.validate`
runs them with every other group's check at each stage's start.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from biaslab.runtime.rules import (ParamError, int_at_least, is_int, is_real, known_keys,
                                   literal, one_of, real_in, settings_error, threads_count)


def check_dbac(d: Any, param: str = "eval_captioner.dbac") -> None:
    """A DBAC settings mapping (None = off): :class:`biaslab.metrics.settings.DbacSettings`,
    whose fields are its keys, defaults and ranges. Torch-free, so every stage checks it at
    start.

    Raises:
        ParamError: ``"<param>.<key>: <problem>"`` for the first bad entry.
    """
    from biaslab.metrics.settings import DbacSettings
    try:
        DbacSettings.from_mapping(d, param)
    except ValueError as e:
        raise settings_error(e, param) from None


#: keys of group ``libra`` besides :class:`biaslab.libra.settings.BCSSettings`' fields, each
#: read by a LIBRA stage (t5_finetune, bcs_classifier, bcs_synthesize, dcg_train, dcg_apply)
LIBRA_KEYS = ("threads", "max_train_captions", "classifier", "auth_classifier", "auth_max_train",
              "t5", "dcg", "dcg_pretrain_epochs", "dcg_val_fraction", "dcg_eval_max",
              "dcg_max_pairs", "apply")
#: keys of ``libra.apply`` (stage dcg_apply) and of a LIBRA classifier spec besides the text
#: classifier's own config fields (``biaslab.libra.bcs.classifier_config``)
LIBRA_APPLY_KEYS = ("pred", "num_beams", "max_images")


def _from_settings(fn: Callable, arg: Any, group: str) -> None:
    """Run a settings constructor (``biaslab.libra.settings``) and turn its ValueError, whose
    message starts with the dotted param name, into a ParamError."""
    try:
        fn(arg)
    except ValueError as e:
        raise settings_error(e, group) from None


def _libra_classifier(v: Any, param: str) -> None:
    """A LIBRA text classifier spec (f_g, f_a): null, a model name, or a mapping with a
    ``model`` name, a known ``preset`` and ``val_fraction`` in (0, 1); its other keys override
    the text classifier's config and are checked when the stage builds it."""
    if v is None or (isinstance(v, str) and v):
        return
    if not isinstance(v, Mapping):
        raise ParamError(param, f"must be null, a model name or a mapping, got {v!r}")
    if "model" in v and not (isinstance(v["model"], str) and v["model"]):
        raise ParamError(f"{param}.model", f"must be a model name (lstm, minilm, a BERT name "
                                           f"or directory), got {v['model']!r}")
    one_of(v, param, "preset", literal("biaslab.models.textclf_config", "PRESETS"))
    if "val_fraction" in v:
        real_in(v, param, "val_fraction", 0.0, 1.0, open_low=True)
        if float(v["val_fraction"]) >= 1.0:
            raise ParamError(f"{param}.val_fraction", f"must be in (0, 1), got "
                                                      f"{v['val_fraction']!r}")


def check_libra(p: Mapping) -> None:
    """Group ``libra`` (paper 003): its keys (:class:`BCSSettings`' fields and
    :data:`LIBRA_KEYS`); BCS's settings, ``t5`` and ``dcg`` by the very rules their stages
    apply (``biaslab.libra.settings``: ``bcs_settings``, ``t5_settings``, ``dcg_settings``;
    torch-free); ``words`` a known list; the classifier specs; ``apply``'s keys, ``num_beams``
    >= 1 and ``max_images`` null or >= 1; counts >= 1 (``dcg_pretrain_epochs`` >= 0) and
    ``dcg_val_fraction`` in (0, 1)."""
    from biaslab.libra import settings as LS
    from biaslab.runtime.settings import field_names
    known_keys(p, "libra", (*sorted(field_names(LS.BCSSettings)), *LIBRA_KEYS))
    if "words" in p:
        from biaslab.data.gender import WORD_LISTS
        if p["words"] not in WORD_LISTS:
            raise ParamError("libra.words", f"unknown word list {p['words']!r}; known: "
                                            f"{sorted(WORD_LISTS)}")
    _from_settings(LS.bcs_settings, p, "libra")
    t5 = p.get("t5")
    if t5 is not None:
        if not isinstance(t5, Mapping):
            raise ParamError("libra.t5", f"must be a mapping, got {t5!r}")
        t5 = dict(t5)
        int_at_least(t5, "libra.t5", "max_val_captions", 1, allow_null=False)
        t5.pop("max_val_captions", None)          # read by stage t5_finetune itself
        _from_settings(LS.t5_settings, t5, "libra.t5")
    if p.get("dcg") is not None:
        _from_settings(LS.dcg_settings, p["dcg"], "libra.dcg")
    for k in ("classifier", "auth_classifier"):
        _libra_classifier(p.get(k), f"libra.{k}")
    threads_count(p, "libra")
    for k in ("max_train_captions", "auth_max_train", "dcg_max_pairs"):
        int_at_least(p, "libra", k, 1, allow_null=True)
    int_at_least(p, "libra", "dcg_eval_max", 1, allow_null=False)
    int_at_least(p, "libra", "dcg_pretrain_epochs", 0, allow_null=True)
    if "dcg_val_fraction" in p:
        v = p["dcg_val_fraction"]
        if not is_real(v) or not 0.0 < float(v) < 1.0:
            raise ParamError("libra.dcg_val_fraction", f"must be in (0, 1), got {v!r}")
    ap = p.get("apply")
    if ap is not None:
        if not isinstance(ap, Mapping):
            raise ParamError("libra.apply", f"must be a mapping, got {ap!r}")
        known_keys(ap, "libra.apply", LIBRA_APPLY_KEYS)
        int_at_least(ap, "libra.apply", "num_beams", 1, allow_null=False)
        int_at_least(ap, "libra.apply", "max_images", 1, allow_null=True)
        if ap.get("pred") is not None and not (isinstance(ap["pred"], str) and ap["pred"]):
            raise ParamError("libra.apply.pred", f"must be null or a COCO results file, got "
                                                 f"{ap['pred']!r}")


#: keys of group ``published`` (stages published_bias, published_report)
PUBLISHED_KEYS = ("root", "models", "words", "lic", "ba", "n_boot", "seed", "workers",
                  "human_captions", "dbac")


def check_published(p: Mapping) -> None:
    """Group ``published`` (the nine captioners the LIC paper evaluates): its keys; ``models``
    (required) a non-empty list of distinct names of ``biaslab.data.published.MODELS``; ``root`` a
    directory name; ``words`` a known list; ``lic``: a known ``classifier`` / ``preset``,
    ``seeds`` an integer >= 2 (a 95 % CI needs two seeds), ``max_human_captions`` null or
    >= 1; ``human_captions`` null, a COCO captions file or a non-empty list of them; ``dbac``
    (:func:`check_dbac`); ``ba``: ``top_k`` and ``min_count`` >= 1, ``n_boot`` >= 100;
    ``n_boot`` >= 100, ``seed`` an integer, ``workers`` >= 1."""
    known_keys(p, "published", PUBLISHED_KEYS)
    if "root" in p and not (isinstance(p["root"], str) and p["root"]):
        raise ParamError("published.root", f"must be a directory, got {p['root']!r}")
    models = p.get("models")
    known = literal("biaslab.data.published", "MODELS")
    if isinstance(models, (str, bytes)) or not isinstance(models, Sequence) or not models \
            or any(m not in known for m in models):        # required: nothing to do without
        raise ParamError("published.models", f"must list some of {list(known)}, got "
                                             f"{models!r}")
    if len(set(models)) != len(models):
        raise ParamError("published.models", f"names repeat: {list(models)}")
    if "words" in p:
        from biaslab.data.gender import WORD_LISTS
        if p["words"] not in WORD_LISTS:
            raise ParamError("published.words", f"unknown word list {p['words']!r}; known: "
                                                f"{sorted(WORD_LISTS)}")
    lp = p.get("lic")
    if lp is not None:
        if not isinstance(lp, Mapping):
            raise ParamError("published.lic", f"must be a mapping, got {lp!r}")
        known_keys(lp, "published.lic", ("classifier", "preset", "seeds",
                                          "max_human_captions"))
        one_of(lp, "published.lic", "classifier",
                literal("biaslab.models.textclf_config", "CLASSIFIERS"))
        one_of(lp, "published.lic", "preset", literal("biaslab.models.textclf_config", "PRESETS"))
        seeds = lp.get("seeds", 3)
        if not is_int(seeds) or seeds < 2:
            raise ParamError("published.lic.seeds", f"must be an integer >= 2 (a 95 % CI needs "
                                                    f"two seeds), got {seeds!r}")
        int_at_least(lp, "published.lic", "max_human_captions", 1, allow_null=True)
    hc = p.get("human_captions")
    if hc is not None and not (isinstance(hc, str) and hc) and not (
            isinstance(hc, list) and hc and all(isinstance(f, str) and f for f in hc)):
        raise ParamError("published.human_captions", f"must be null, a COCO captions file or "
                                                     f"a non-empty list of them, got {hc!r}")
    check_dbac(p.get("dbac"), "published.dbac")
    ba = p.get("ba")
    if ba is not None:
        if not isinstance(ba, Mapping):
            raise ParamError("published.ba", f"must be a mapping, got {ba!r}")
        known_keys(ba, "published.ba", ("top_k", "min_count", "n_boot"))
        int_at_least(ba, "published.ba", "top_k", 1, allow_null=False)
        int_at_least(ba, "published.ba", "min_count", 1, allow_null=False)
        int_at_least(ba, "published.ba", "n_boot", 100, allow_null=False)
    int_at_least(p, "published", "n_boot", 100, allow_null=False)
    if "seed" in p and not is_int(p["seed"]):
        raise ParamError("published.seed", f"must be an integer, got {p['seed']!r}")
    int_at_least(p, "published", "workers", 1, allow_null=False)
