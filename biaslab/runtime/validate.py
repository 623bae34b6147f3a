"""Validation of ``params.yaml``: one function per param group, run at stage start.

Each ``check_<group>(p)`` gets the group's dict (``params["filters"]`` ...) and raises
``ParamError(param, problem)`` for a value that would otherwise give a traceback or, worse, a
silently wrong result. ``biaslab.runtime.io.load_params`` runs the checks of the groups present in the
file (``check_params``) and turns the first error into ``ParamsError`` (an ``InputError``)
whose message reads ``params.yaml: filters.weights: ...``; a stage script that meets it prints
``<stage>: params.yaml: filters.weights: ...`` and exits 2.

Library functions that take the same values (``biaslab.counterfactual.filters.select``) call the same
checks (``check_weights``), so the rules live here once.

What is rejected, and why:

* ``filters.weights``: not a list of real numbers, NaN/inf (one NaN makes every rank sum NaN:
  all filters off), negative (a negative c_k in paper 000 Eq. 2 prefers the *worst*
  candidates), a length different from ``filters.names``. All-zero weights are allowed: that
  is the "no filter" row of paper 000 Table 4.
* ``filters.names``: not a non-empty list of distinct strings.
* ``data.max_images``: anything but null (all images) or an integer >= 1 (0 used to mean
  "all" and -5 "all but five").
* ``generate.max_images``: anything but null (all) or an integer >= 0; ``generate.m`` and
  ``generate.shards`` integers >= 1.
* ``split.fractions``: not a mapping of finite fractions in [0, 1] that sum to 1 (+-1e-6);
  ``split.fixed`` not a mapping of COCO split names to split names.
* ``synthetic``: ``bias`` / ``p_no_gender_word`` outside [0, 1] (a planted bias of 1.5 used to
  end in a traceback inside the generator), ``n_images`` < 2, ``image_size`` < 64,
  ``captions_per_image`` < 1, ``probe_pairs`` < 0, ``seed`` < 0.
* ``classifier``: ``methods`` / ``datasets`` with an unknown or repeated name (an unknown
  method used to fail only when ``train_method`` ran, after every upstream stage; a repeated
  one was trained and reported twice), ``seeds`` not a non-empty list of distinct integers,
  ``tuning`` a grid that cannot be drawn from (``trials`` < 0, a learning rate <= 0).
* ``controls``: ``q`` not rates in (0, 1], ``seeds`` fewer than two distinct integers (no CI),
  ``workers`` < 1.
* ``label``: ``rule`` not a rule of ``biaslab.data.gender``, ``words`` not one of its word lists,
  ``k`` < 1.
* ``generate``: ``backend`` not one of the backends (it used to fail inside ``generate``,
  after masks), ``guidance_scales`` not a non-empty list of positive numbers.
* ``captioner``: ``archs`` / ``datasets`` unknown or repeated, ``seeds`` as for classifiers,
  ``epochs`` < 1.
* ``artifact``: ``datasets`` unknown or repeated, ``parts`` not a non-empty list of names.
* ``contrast``, ``eval_retrieval``, ``spurious`` (paper 001's stages): counts out of range, an
  unknown key or backend (they were checked only when their stage started, after the whole
  training half of the DAG).
* ``executor`` (``biaslab.runtime.executor.resolve``'s rules), ``probe``, ``report``,
  ``datasets``, ``audit``, ``residue``, ``masks``, ``scale`` and ``models``: counts, rates and
  names out of range, unknown keys.
* ``lic``: its attacker names live in a module that imports torch, so
  :func:`biaslab.runtime.rules.literal` reads them from the source instead of importing it;
  ``objects`` and ``scorer``: their keys are the fields of the torch-free
  :mod:`biaslab.models.settings`. ``libra``, ``published`` and DBAC's settings (nested blocks of model
  settings) have their checks in :mod:`biaslab.runtime.validate_nested`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from biaslab import registry
from biaslab.runtime.rules import (ParamError, int_at_least, is_int, is_real,  # noqa: F401
                                    known_keys, literal, name_list, one_of, positive_ints,
                                    probability, real_in, registered_names, seed_list,
                                    settings_error, threads_count)
from biaslab.runtime.validate_nested import (LIBRA_APPLY_KEYS, LIBRA_KEYS,  # noqa: F401
                                             PUBLISHED_KEYS, check_dbac, check_libra,
                                             check_published)


def check_weights(weights: Any, names: Sequence[str] | None = None,
                  param: str = "filters.weights") -> list[float]:
    """Filter weights c_k of paper 000 Eq. 2 -> list of floats.

    Args:
        weights: one real number >= 0 per filter (all zero allowed: no filtering).
        names: the filters the weights go with; their number must match when given.
        param: the name used in error messages.

    Raises:
        ParamError: not a list of real numbers, NaN/inf, negative, or a length mismatch.
    """
    if isinstance(weights, (str, bytes, Mapping)) or not isinstance(weights, Sequence):
        if hasattr(weights, "tolist"):      # numpy array / pandas Series
            weights = weights.tolist()
        else:
            raise ParamError(param, f"must be a list of numbers, got {weights!r}")
    out = []
    for k, w in enumerate(weights):
        if hasattr(w, "item") and not isinstance(w, (str, bytes)):
            w = w.item()
        if not is_real(w):
            raise ParamError(param, f"entry {k} is {w!r}, not a number")
        w = float(w)
        if math.isnan(w) or math.isinf(w):
            raise ParamError(param, f"entry {k} is {w}; weights must be finite (one NaN "
                                    f"makes every rank sum NaN, i.e. turns all filters off)")
        if w < 0:
            raise ParamError(param, f"entry {k} is {w} < 0; a negative weight selects the "
                                    f"worst candidates of that filter")
        out.append(w)
    if names is not None and len(out) != len(names):
        raise ParamError(param, f"{len(out)} weight(s) for {len(names)} filter(s) "
                                f"{list(names)}; give one weight per name")
    return out


def check_filters(p: Mapping) -> None:
    """Group ``filters``: ``names`` distinct registered filter names
    (:data:`biaslab.registry.FILTERS`, plug-ins included), ``weights`` (``check_weights``),
    ``knn_k``/``grid_rows`` integers >= 1, ``filter_params`` keyed by filters that have
    settings (their values: :func:`check_component_settings`)."""
    names = p.get("names")
    if "names" in p:
        if (isinstance(names, (str, bytes)) or not isinstance(names, Sequence) or not names
                or not all(isinstance(n, str) and n for n in names)):
            raise ParamError("filters.names", f"must be a non-empty list of filter names, "
                                              f"got {names!r}")
        if len(set(names)) != len(names):
            raise ParamError("filters.names", f"names repeat: {list(names)}")
        unknown = [n for n in names if n not in registry.FILTERS]
        if unknown:
            raise ParamError("filters.names", f"unknown filter(s) {unknown}; known: "
                                              f"{registry.FILTERS.names()}")
    if "weights" in p:
        check_weights(p["weights"], names if "names" in p else None)
    int_at_least(p, "filters", "knn_k", 1, allow_null=False)
    int_at_least(p, "filters", "grid_rows", 1, allow_null=False)
    settings_by_name(p.get("filter_params"), "filters.filter_params", registry.FILTERS)


def check_data(p: Mapping) -> None:
    """Group ``data``: ``source`` a non-empty string (``openimages`` reads the OpenImages CSV
    layout, any other name the COCO layout: stage prepare), ``max_images`` null or >= 1,
    ``kp_iou`` in [0, 1]."""
    if "source" in p and not (isinstance(p["source"], str) and p["source"]):
        raise ParamError("data.source", f"must be a non-empty name, got {p['source']!r}")
    int_at_least(p, "data", "max_images", 1, allow_null=True)
    if "kp_iou" in p:
        v = p["kp_iou"]
        if not is_real(v) or not 0.0 <= float(v) <= 1.0:
            raise ParamError("data.kp_iou", f"must be a number in [0, 1], got {v!r}")


def check_generate(p: Mapping) -> None:
    """Group ``generate``: ``max_images`` null or >= 0, ``m`` and ``shards`` >= 1, a known
    ``backend``, ``guidance_scales`` positive numbers."""
    int_at_least(p, "generate", "max_images", 0, allow_null=True)
    int_at_least(p, "generate", "m", 1, allow_null=False)
    int_at_least(p, "generate", "shards", 1, allow_null=False)
    if "backend" in p and p["backend"] not in registry.BACKENDS:
        raise ParamError("generate.backend", f"unknown backend {p['backend']!r}; known: "
                                             f"{registry.BACKENDS.names()}")
    if "guidance_scales" in p:
        g = p["guidance_scales"]
        if (isinstance(g, (str, bytes)) or not isinstance(g, Sequence) or not g
                or not all(is_real(x) and math.isfinite(float(x)) and float(x) > 0
                           for x in g)):
            raise ParamError("generate.guidance_scales", f"must be a non-empty list of "
                                                         f"positive numbers, got {g!r}")


def check_split(p: Mapping) -> None:
    """Group ``split``: ``fractions`` {name: fraction in [0, 1]} summing to 1 (+-1e-6)."""
    if "fractions" not in p:
        return
    fr = p["fractions"]
    if not isinstance(fr, Mapping) or not fr:
        raise ParamError("split.fractions", f"must be a mapping such as {{train: 0.7, val: 0.1, "
                                            f"test: 0.2}}, got {fr!r}")
    for k, v in fr.items():
        if not is_real(v) or not math.isfinite(float(v)) or not 0.0 <= float(v) <= 1.0:
            raise ParamError(f"split.fractions.{k}", f"must be a number in [0, 1], got {v!r}")
    total = sum(float(v) for v in fr.values())
    if abs(total - 1.0) > 1e-6:
        raise ParamError("split.fractions", f"fractions sum to {total:g}, not 1: "
                                            f"{dict(fr)}")
    fixed = p.get("fixed")
    if fixed is not None and (not isinstance(fixed, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in fixed.items())):
        raise ParamError("split.fixed", f"must map COCO split names to split names, such as "
                                        f"{{synthtest: test}}, got {fixed!r}")


def check_synthetic(p: Mapping) -> None:
    """Group ``synthetic``: probabilities in [0, 1], counts and sizes in range."""
    probability(p, "synthetic", "bias")
    probability(p, "synthetic", "p_no_gender_word")
    probability(p, "synthetic", "skin_bias")
    int_at_least(p, "synthetic", "n_images", 2, allow_null=False)
    int_at_least(p, "synthetic", "image_size", 64, allow_null=False)
    int_at_least(p, "synthetic", "captions_per_image", 1, allow_null=False)
    int_at_least(p, "synthetic", "probe_pairs", 0, allow_null=False)
    int_at_least(p, "synthetic", "seed", 0, allow_null=False)
    int_at_least(p, "synthetic", "test_images", 0, allow_null=False)
    if "test_gender_ratio" in p:
        v = p["test_gender_ratio"]
        if not is_real(v) or not math.isfinite(float(v)) or float(v) <= 0:
            raise ParamError("synthetic.test_gender_ratio",
                             f"must be a positive number (men per woman; COCO 2.3), got {v!r}")


def settings_by_name(mp: Any, group: str, reg: registry.Registry) -> None:
    """``<group>`` (e.g. ``classifier.method_params``): None, or a mapping whose keys are
    components of ``reg`` that declare settings and whose values are mappings (or None); the
    values themselves are checked by :func:`check_component_settings`."""
    if mp is None:
        return
    if not isinstance(mp, Mapping):
        raise ParamError(group, f"must be a mapping of {reg.kind} names to their settings, "
                                f"got {mp!r}")
    for name, v in mp.items():
        e = reg.get(name) if name in reg else None
        if e is None or e.settings is None:
            known = [x.name for x in reg if x.settings is not None]
            raise ParamError(f"{group}.{name}", f"no such {reg.kind[:-1]} with settings; "
                                                f"known: {known}")
        if v is not None and not isinstance(v, Mapping):
            raise ParamError(f"{group}.{name}", f"must be a mapping of settings, got {v!r}")


def check_classifier(p: Mapping) -> None:
    """Group ``classifier``: known, distinct ``methods`` and ``datasets``; ``method_params``
    keyed by methods that have settings (their values: :func:`check_component_settings`);
    ``seeds``; ``tuning`` (:func:`check_tuning`)."""
    registered_names(p, "classifier", "methods", registry.METHODS)
    registered_names(p, "classifier", "datasets", registry.DATASETS)
    settings_by_name(p.get("method_params"), "classifier.method_params", registry.METHODS)
    seed_list(p, "classifier", "seeds", 1)
    if "tuning" in p:
        check_tuning(p["tuning"])


def check_tuning(t: Any, group: str = "classifier.tuning") -> None:
    """``classifier.tuning`` (:mod:`biaslab.classify.tune`): known keys, ``trials`` an
    integer >= 0, ``seed`` an integer >= 0, ``lr`` a non-empty list of positive numbers,
    ``weight_decay`` one of non-negative numbers (a bad grid used to surface only when the
    first training stage drew from it)."""
    if not isinstance(t, Mapping):
        raise ParamError(group, f"must be a mapping, got {t!r}")
    known_keys(t, group, ("trials", "seed", "lr", "weight_decay"))
    int_at_least(t, group, "trials", 0, False)
    int_at_least(t, group, "seed", 0, False)
    for k, low in (("lr", 0.0), ("weight_decay", None)):
        if k not in t:
            continue
        v = t[k]
        if (isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or not v
                or not all(is_real(x) and math.isfinite(float(x))
                           and (float(x) > 0 if low is not None else float(x) >= 0)
                           for x in v)):
            kind = "positive" if low is not None else "non-negative"
            raise ParamError(f"{group}.{k}", f"must be a non-empty list of {kind} numbers, "
                                             f"got {v!r}")


def check_controls(p: Mapping) -> None:
    """Group ``controls`` (stage controls): ``q`` rates in (0, 1], >= 2 replicate seeds."""
    if "q" in p:
        q = p["q"]
        if (isinstance(q, (str, bytes)) or not isinstance(q, Sequence) or not q
                or not all(is_real(x) and 0.0 < float(x) <= 1.0 for x in q)):
            raise ParamError("controls.q", f"must be a non-empty list of rates in (0, 1], "
                                           f"got {q!r}")
    seed_list(p, "controls", "seeds", 2)
    int_at_least(p, "controls", "workers", 1, allow_null=False)


#: image-level gender rules of ``biaslab.data.gender.image_gender``
LABEL_RULES = ("any_mention", "at_least_k")
#: where image gender comes from (stage label_gender)
LABEL_SOURCES = ("captions", "perceived")


def check_label(p: Mapping) -> None:
    """Group ``label``: a known ``source``, ``rule`` and word list ``words``, ``k`` >= 1."""
    if "source" in p and p["source"] not in LABEL_SOURCES:
        raise ParamError("label.source", f"unknown source {p['source']!r}; known: "
                                         f"{list(LABEL_SOURCES)}")
    if "rule" in p and p["rule"] not in LABEL_RULES:
        raise ParamError("label.rule", f"unknown rule {p['rule']!r}; known: {list(LABEL_RULES)}")
    if "words" in p:
        from biaslab.data.gender import WORD_LISTS
        if p["words"] not in WORD_LISTS:
            raise ParamError("label.words", f"unknown word list {p['words']!r}; known: "
                                            f"{sorted(WORD_LISTS)}")
    int_at_least(p, "label", "k", 1, allow_null=False)


def check_captioner(p: Mapping) -> None:
    """Group ``captioner``: known, distinct ``archs`` and ``datasets``; ``seeds``; ``epochs``."""
    registered_names(p, "captioner", "archs", registry.ARCHS)
    registered_names(p, "captioner", "datasets", registry.DATASETS)
    seed_list(p, "captioner", "seeds", 1)
    int_at_least(p, "captioner", "epochs", 1, allow_null=False)


def check_artifact(p: Mapping) -> None:
    """Group ``artifact`` (synthetic-artifact test): known, distinct ``datasets``; ``parts``
    a non-empty list of names."""
    registered_names(p, "artifact", "datasets", registry.DATASETS)
    if "parts" in p:
        v = p["parts"]
        if (isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or not v
                or not all(isinstance(x, str) and x for x in v)):
            raise ParamError("artifact.parts", f"must be a non-empty list of body-part names, "
                                               f"got {v!r}")


def check_eval_captioner(p: Mapping) -> None:
    """Group ``eval_captioner``: known, distinct caption ``postprocessors``
    (biaslab.registry.POSTPROCESSORS); ``metrics`` distinct plug-in captioning metrics
    (biaslab.registry.METRICS: the built-ins are always computed, so naming one is an error);
    ``dbac`` DBAC's settings (:func:`check_dbac`)."""
    registered_names(p, "eval_captioner", "postprocessors", registry.POSTPROCESSORS)
    registered_names(p, "eval_captioner", "metrics", registry.METRICS)
    plugins = {e.name for e in registry.plugin_metrics("captioning")}
    for n in p.get("metrics") or []:
        if n not in plugins:
            raise ParamError("eval_captioner.metrics", f"{n!r} is a built-in or not a "
                                                       f"captioning metric (the built-ins are "
                                                       f"always computed); name plug-in "
                                                       f"captioning metrics only")
    check_dbac(p.get("dbac"), "eval_captioner.dbac")


def check_contrast(p: Mapping) -> None:
    """Group ``contrast`` (stage contrast_set): ``splits`` a non-empty list of train / val /
    test, ``m`` and ``workers`` >= 1, ``generate`` a mapping of generate params whose ``backend`` (if given)
    is registered; its other keys are checked as group ``generate``'s."""
    known_keys(p, "contrast", ("splits", "m", "generate", "workers"))
    int_at_least(p, "contrast", "workers", 1, allow_null=False)
    if "splits" in p:
        v = p["splits"]
        if (isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or not v
                or not all(x in ("train", "val", "test") for x in v)):
            raise ParamError("contrast.splits", f"must be a non-empty list of train / val / "
                                                f"test, got {v!r}")
    int_at_least(p, "contrast", "m", 1, allow_null=False)
    if "generate" in p:
        g = p["generate"] if p["generate"] is not None else {}
        if not isinstance(g, Mapping):
            raise ParamError("contrast.generate", f"must be a mapping of generate params to "
                                                  f"override, got {g!r}")
        try:
            check_generate(g)
        except ParamError as e:
            raise ParamError(f"contrast.{e.param}", e.problem) from None


def check_eval_retrieval(p: Mapping) -> None:
    """Group ``eval_retrieval``: ``ks`` and ``recall_ks`` non-empty lists of positive
    integers, ``clip_m`` >= 0, ``n_balanced`` >= 1, ``n_boot`` >= 100."""
    positive_ints(p, "eval_retrieval", "ks")
    positive_ints(p, "eval_retrieval", "recall_ks")
    int_at_least(p, "eval_retrieval", "clip_m", 0, allow_null=False)
    int_at_least(p, "eval_retrieval", "n_balanced", 1, allow_null=False)
    int_at_least(p, "eval_retrieval", "n_boot", 100, allow_null=False)


def check_spurious(p: Mapping) -> None:
    """Group ``spurious`` (stage spurious): ``clusters`` >= 2, ``lda_words`` >= 1, ``n_boot``
    >= 100, ``workers`` >= 1, ``seed`` an integer, ``text_encoder`` a name, ``image_encoder``
    null or a name; no other key."""
    known_keys(p, "spurious", ("clusters", "lda_words", "text_encoder", "image_encoder",
                                "n_boot", "seed", "workers"))
    for key, low in (("clusters", 2), ("lda_words", 1), ("n_boot", 100), ("workers", 1)):
        int_at_least(p, "spurious", key, low, allow_null=False)
    if "seed" in p and not is_int(p["seed"]):
        raise ParamError("spurious.seed", f"must be an integer, got {p['seed']!r}")
    if "text_encoder" in p and not (isinstance(p["text_encoder"], str) and p["text_encoder"]):
        raise ParamError("spurious.text_encoder", f"must be a text encoder name (lsa, minilm "
                                                  f"or a Hugging Face model), got "
                                                  f"{p['text_encoder']!r}")
    if "image_encoder" in p and p["image_encoder"] is not None and \
            not (isinstance(p["image_encoder"], str) and p["image_encoder"]):
        raise ParamError("spurious.image_encoder", f"must be null (= features.backbone) or an "
                                                   f"image encoder name, got "
                                                   f"{p['image_encoder']!r}")

def _profile(group: str) -> Callable[[Mapping], None]:
    """Groups ``scale`` / ``models``: ``name``, the conf/ profile composed into params.yaml."""
    def check(p: Mapping) -> None:
        known_keys(p, group, ("name",))
        if not isinstance(p.get("name"), str) or not p["name"]:
            raise ParamError(f"{group}.name", f"must be the name of a conf/{group}/ profile, "
                                              f"got {p.get('name')!r}")
    check.__doc__ = f"Group ``{group}``: ``name`` a non-empty string (its conf/{group}/ profile)."
    return check


def check_executor(p: Mapping) -> None:
    """Group ``executor``: ``biaslab.runtime.executor.resolve``'s rules (a known ``name``,
    ``workers`` >= 1 or null, Ray's resources and address); its message, as a ParamError."""
    from biaslab.runtime import executor
    try:
        executor.resolve(p)
    except (TypeError, ValueError) as e:
        msg = str(e).removeprefix("params ")
        key = msg.split()[0].removesuffix(":") if msg.startswith("executor.") else "executor"
        raise ParamError(key, msg.removeprefix(key).lstrip(": ")) from None


def check_numerics(p: Mapping) -> None:
    """Group ``numerics``: ``mode`` (every stage) and ``decoding`` (LIBRA's stages and
    eval_captioner), each one of :data:`biaslab.runtime.numerics.MODES`."""
    from biaslab.runtime.numerics import MODES
    known_keys(p, "numerics", ("mode", "decoding"))
    for k in ("mode", "decoding"):
        if k in p and p[k] not in MODES:
            raise ParamError(f"numerics.{k}", f"must be one of {list(MODES)}, got {p[k]!r}")


def check_probe(p: Mapping) -> None:
    """Group ``probe``: ``min_seeds_t`` >= 2 (a t interval needs two seeds), ``n_boot`` >= 1,
    ``seed`` >= 0, ``flip_images`` >= 0 (0 = no attribute-flip probe)."""
    known_keys(p, "probe", ("min_seeds_t", "n_boot", "seed", "flip_images"))
    if "flip_images" in p:
        int_at_least(p, "probe", "flip_images", 0, allow_null=False)
    int_at_least(p, "probe", "min_seeds_t", 2, allow_null=False)
    int_at_least(p, "probe", "n_boot", 1, allow_null=False)
    int_at_least(p, "probe", "seed", 0, allow_null=False)


def check_sensitivity(p: Mapping) -> None:
    """Group ``sensitivity``: the rules its stages apply
    (:class:`biaslab.analysis.sensitivity_settings.SensitivitySettings`, standard library
    only): known keys, perturbation names, ``max_images`` null or >= 10, ``fill`` mean or
    0-255, ``seed`` >= 0, ``n_boot`` >= 100, ``leakage_rounds`` and ``workers`` >= 1."""
    from biaslab.analysis.sensitivity_settings import SensitivitySettings
    try:
        SensitivitySettings.from_params({"sensitivity": p})
    except ValueError as e:
        raise ParamError("sensitivity", str(e)) from None


def check_report(p: Mapping) -> None:
    """Group ``report``: ``digits`` 0-10, ``utility_floor`` in [0, 1] (a share of Original's
    utility), ``max_gender_word_loss`` >= 0 (percentage points)."""
    known_keys(p, "report", ("digits", "utility_floor", "max_gender_word_loss"))
    int_at_least(p, "report", "digits", 0, allow_null=False)
    if is_int(p.get("digits")) and p["digits"] > 10:
        raise ParamError("report.digits", f"must be at most 10, got {p['digits']!r}")
    probability(p, "report", "utility_floor")
    real_in(p, "report", "max_gender_word_loss", 0.0)


def check_validity(p: Mapping) -> None:
    """Params ``validity.*``: ``margin_fraction`` in [0, 1), the fraction of a check's
    reference effect that is its equivalence margin (``biaslab.analysis.validity.decide``,
    ``biaslab.analysis.controls_eval.decide_equivalence``)."""
    known_keys(p, "validity", ("margin_fraction",))
    v = p.get("margin_fraction")
    if not is_real(v) or not 0.0 <= float(v) < 1.0:
        raise ParamError("validity.margin_fraction", f"must be a number in [0, 1), got {v!r}")


def check_datasets(p: Mapping) -> None:
    """Group ``datasets`` (stage build_datasets): ``splits`` names, ``seed`` >= 0,
    ``same_sources`` a bool, ``max_skew`` in [0, 1], ``max_copies`` null or >= 1,
    ``max_factor`` null or >= 1, ``min_fraction`` null or in (0, 1]; a registered variant's
    own settings at ``datasets.<name>`` (checked by :func:`check_component_settings`)."""
    own = [e.name for e in registry.DATASETS
           if e.settings is not None and e.params == f"datasets.{e.name}"]
    known_keys(p, "datasets", ("splits", "seed", "same_sources", "max_skew", "max_copies",
                               "max_factor", "min_fraction", *own))
    name_list(p, "datasets", "splits")
    int_at_least(p, "datasets", "seed", 0, allow_null=False)
    if "same_sources" in p and not isinstance(p["same_sources"], bool):
        raise ParamError("datasets.same_sources", f"must be true or false, got "
                                                  f"{p['same_sources']!r}")
    probability(p, "datasets", "max_skew")
    int_at_least(p, "datasets", "max_copies", 1, allow_null=True)
    real_in(p, "datasets", "max_factor", 1.0, allow_null=True)
    real_in(p, "datasets", "min_fraction", 0.0, 1.0, open_low=True, allow_null=True)


def check_audit(p: Mapping) -> None:
    """Group ``audit`` (REVISE, paper 004): ``min_count`` and ``top_k`` >= 1, ``alpha`` in
    (0, 1], ``min_person_px`` >= 0. (The names of ``correction``, ``test``, ``area`` and
    ``center_norm`` are checked by ``biaslab.analysis.audit`` when the stage starts: importing
    it here would load scipy in every stage.)"""
    int_at_least(p, "audit", "min_count", 1, allow_null=False)
    int_at_least(p, "audit", "top_k", 1, allow_null=False)
    real_in(p, "audit", "alpha", 0.0, 1.0, open_low=True)
    real_in(p, "audit", "min_person_px", 0.0)


def check_residue(p: Mapping) -> None:
    """Group ``residue``: ``shapes`` distinct mask shape names, ``folds`` >= 2 (a
    cross-validated AUC needs two folds)."""
    known_keys(p, "residue", ("shapes", "folds"))
    name_list(p, "residue", "shapes")
    int_at_least(p, "residue", "folds", 2, allow_null=False)


def check_masks(p: Mapping) -> None:
    """Group ``masks`` (paper 000 app. A.1): ``area_threshold_px`` and ``dilate_px`` >= 0,
    ``reference_long_side`` null or >= 1, ``crowd_min_inside`` null or >= 0, ``splits``
    names, and ``shape: sam`` only with a ``sam_model``."""
    real_in(p, "masks", "area_threshold_px", 0.0)
    int_at_least(p, "masks", "dilate_px", 0, allow_null=False)
    real_in(p, "masks", "reference_long_side", 1.0, allow_null=True)
    int_at_least(p, "masks", "crowd_min_inside", 0, allow_null=True)
    name_list(p, "masks", "splits")
    if "shape" in p and (not isinstance(p["shape"], str) or not p["shape"]):
        raise ParamError("masks.shape", f"must be a mask shape name, got {p['shape']!r}")
    if p.get("shape") == "sam" and not p.get("sam_model"):
        raise ParamError("masks.sam_model", "shape sam needs a SAM checkpoint name or directory "
                                            "(e.g. facebook/sam-vit-base)")


def check_lic(p: Mapping) -> None:
    """Group ``lic`` (thesis sec. 2.5): a known attacker ``classifier`` and ``preset``
    (``biaslab.models.textclf.CLASSIFIERS`` / ``PRESETS``), ``seeds`` >= 1, ``num_threads``,
    ``workers`` and ``max_human_captions`` null or >= 1."""
    known_keys(p, "lic", ("classifier", "preset", "seeds", "num_threads", "workers",
                           "max_human_captions"))
    one_of(p, "lic", "classifier", literal("biaslab.models.textclf_config", "CLASSIFIERS"))
    one_of(p, "lic", "preset", literal("biaslab.models.textclf_config", "PRESETS"))
    int_at_least(p, "lic", "seeds", 1, allow_null=False)
    for k in ("num_threads", "workers", "max_human_captions"):
        int_at_least(p, "lic", k, 1, allow_null=True)


def check_features(p: Mapping) -> None:
    """Group ``features`` (frozen image backbone): ``backbone`` and ``cache_dir`` non-empty
    strings, ``image_size`` >= 16 pixels, ``batch_size`` >= 1, ``threads`` null or >= 1."""
    known_keys(p, "features", ("backbone", "image_size", "batch_size", "threads", "cache_dir"))
    for k in ("backbone", "cache_dir"):
        if k in p and (not isinstance(p[k], str) or not p[k]):
            raise ParamError(f"features.{k}", f"must be a non-empty string, got {p[k]!r}")
    int_at_least(p, "features", "image_size", 16, allow_null=False)
    int_at_least(p, "features", "batch_size", 1, allow_null=False)
    threads_count(p, "features")


def check_objects(p: Mapping) -> None:
    """Group ``objects`` (object predictor eta, paper 000 Eq. 5): the fields of
    :class:`biaslab.models.settings.ObjectsSettings` plus ``threads``; counts >= 1, ``lr`` >
    0, penalties >= 0, ``threshold`` ``val_f1`` or a probability in (0, 1), ``labelled_only``
    a bool."""
    from biaslab.models.settings import ObjectsSettings
    from biaslab.runtime.settings import field_names
    known_keys(p, "objects", (*sorted(field_names(ObjectsSettings)), "threads"))
    int_at_least(p, "objects", "min_count", 1, allow_null=False)
    int_at_least(p, "objects", "epochs", 1, allow_null=False)
    int_at_least(p, "objects", "min_val_pos", 0, allow_null=False)
    int_at_least(p, "objects", "seed", 0, allow_null=False)
    real_in(p, "objects", "lr", 0.0, open_low=True)
    real_in(p, "objects", "weight_decay", 0.0)
    real_in(p, "objects", "l2", 0.0)
    thr = p.get("threshold", "val_f1")
    if thr != "val_f1" and not (is_real(thr) and 0.0 < float(thr) < 1.0):
        raise ParamError("objects.threshold", f"must be val_f1 or a number in (0, 1), got {thr!r}")
    if "labelled_only" in p and not isinstance(p["labelled_only"], bool):
        raise ParamError("objects.labelled_only", f"must be true or false, got "
                                                  f"{p['labelled_only']!r}")
    threads_count(p, "objects")


def check_scorer(p: Mapping) -> None:
    """Group ``scorer`` (the LiT prompt-adherence scorer, paper 000 Eq. 4): the fields of
    :class:`biaslab.models.settings.ScorerSettings` plus ``text_encoder``, ``threads`` and
    ``cache_dir``; sizes and epochs >= 1, ``lr`` and ``init_temperature`` > 0, ``dropout`` and
    ``prefix_prob`` in [0, 1]."""
    from biaslab.models.settings import ScorerSettings
    from biaslab.runtime.settings import field_names
    known_keys(p, "scorer", (*sorted(field_names(ScorerSettings)), "text_encoder", "threads",
                             "cache_dir"))
    for k in ("proj_dim", "epochs", "batch_size", "patience"):
        int_at_least(p, "scorer", k, 1, allow_null=False)
    int_at_least(p, "scorer", "seed", 0, allow_null=False)
    real_in(p, "scorer", "lr", 0.0, open_low=True)
    real_in(p, "scorer", "init_temperature", 0.0, open_low=True)
    real_in(p, "scorer", "weight_decay", 0.0)
    probability(p, "scorer", "dropout")
    probability(p, "scorer", "prefix_prob")
    threads_count(p, "scorer")


#: group name -> its check; ``check_params`` runs those of the groups present.
CHECKS: dict[str, Callable[[Mapping], None]] = {
    "data": check_data,
    "split": check_split,
    "generate": check_generate,
    "filters": check_filters,
    "synthetic": check_synthetic,
    "classifier": check_classifier,
    "controls": check_controls,
    "label": check_label,
    "captioner": check_captioner,
    "artifact": check_artifact,
    "eval_captioner": check_eval_captioner,
    "contrast": check_contrast,
    "eval_retrieval": check_eval_retrieval,
    "spurious": check_spurious,
    "executor": check_executor,
    "numerics": check_numerics,
    "probe": check_probe,
    "sensitivity": check_sensitivity,
    "report": check_report,
    "validity": check_validity,
    "datasets": check_datasets,
    "audit": check_audit,
    "residue": check_residue,
    "masks": check_masks,
    "scale": _profile("scale"),
    "models": _profile("models"),
    "lic": check_lic,
    "features": check_features,
    "objects": check_objects,
    "scorer": check_scorer,
    "libra": check_libra,
    "published": check_published,
}


def check_attribute(v: Any) -> None:
    """Param ``attribute``: the protected attribute of the run, one of
    ``biaslab.metrics.files.ATTRIBUTES`` (gender, skin, gender_skin)."""
    known = list(literal("biaslab.metrics.files", "ATTRIBUTES"))
    if v not in known:
        raise ParamError("attribute", f"must be one of {known}, got {v!r}")


def check_params(params: Mapping, load_components: bool = False) -> None:
    """Run ``CHECKS`` for every group present in ``params`` (a loaded params.yaml), then
    :func:`check_component_settings` (``load=load_components``).

    Raises:
        ParamError: the first bad value (its ``param`` is the dotted name), or a group that
            is not a mapping.
    """
    if "attribute" in params:    # a scalar, not a group
        check_attribute(params["attribute"])
    for group, check in CHECKS.items():
        if group not in params or params[group] is None:
            continue
        if not isinstance(params[group], Mapping):
            raise ParamError(group, f"must be a mapping of parameters, got {params[group]!r}")
        check(params[group])
    check_component_settings(params, load=load_components)


#: the kinds whose entries may declare ``settings`` (read from the group of their stage)
SETTINGS_KINDS = ("datasets", "methods", "postprocessors", "filters", "backends", "archs")


def check_component_settings(params: Mapping, load: bool = False) -> None:
    """Every registered component's settings that params.yaml gives
    (:func:`biaslab.registry.settings_of`): known keys, each value's type from its field's
    annotation, the range its ``__post_init__`` checks.

    Args:
        params: the whole params.yaml.
        load: also check the entries whose settings are a ``"module:attribute"`` reference
            (the built-in methods': their module is the method's own). Every stage's start
            passes False: importing each method there would make every stage run (and, for
            DVC, depend on) the classifier's code. ``biaslab plan`` and the composition of
            ``-S`` overrides pass True; a method's stage checks its own when it builds it.

    Raises:
        ParamError: the first bad value, named by its dotted param.
    """
    for kind in SETTINGS_KINDS:
        for entry in registry.REGISTRIES[kind]:
            if entry.settings is None or (isinstance(entry.settings, str) and not load):
                continue
            try:
                registry.settings_of(entry, params)
            except (TypeError, ValueError) as e:
                raise settings_error(e, str(entry.params)) from None
