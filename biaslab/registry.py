"""One registry of the swappable components: training-set variants, model-level
methods, caption post-processors, counterfactual backends, captioner architectures, the
candidate filters of weighted rank selection, image backbones and captioning metrics.

Every component is an :class:`Entry`: its ``name`` (the value in params.yaml, e.g.
``classifier.datasets: [..., reweighted]``), its display ``label`` and ``order`` (the row of
paper 000's Tables 1-3 and of every table, probe and verdict the report prints), where its
parameters live in params.yaml (``params``) with their types and defaults (``settings``), the claims
its author makes about it (``claims``, judged in ``metrics/validity.json`` against Original),
and its implementation ``target``: an object, or ``"module:attribute"`` imported on first use,
so that looking a name up (as :mod:`biaslab.runtime.validate` does at every stage's start) imports
neither torch nor the component.

A separate package adds components without editing this repository through Python entry
points, one group per kind (``biaslab.datasets``, ``biaslab.methods``,
``biaslab.postprocessors``, ``biaslab.backends``, ``biaslab.archs``, ``biaslab.filters``,
``biaslab.backbones``, ``biaslab.metrics``; group names, not modules),
each entry point naming an :class:`Entry`::

    [project.entry-points."biaslab.datasets"]
    reweighted = "my_package.variants:REWEIGHTED"     # an Entry(kind="datasets", ...)

``examples/biaslab-example-plugin`` is a worked package (docs/extending.md). The entries of
installed packages are read once per process, on the first look-up of their kind. An entry
point that cannot be loaded, or whose name is already taken (a built-in or another package's),
is a :class:`RegistryWarning` naming it and is left out; naming it in params raises the same
reason (:class:`RegistryError`).

What each kind's ``target`` is (the contract its tests check, ``tests/test_registry.py``):

=================  ============================================================================
``datasets``       ``build(ctx: biaslab.data.variants.VariantContext) -> pd.DataFrame``: a training
                   manifest (one row per training example, Original's columns); stage
                   ``build_datasets`` writes it to ``data/datasets/<name>.parquet``
``methods``        a :class:`biaslab.classify.methods.base.Method` subclass (``name`` = the
                   entry's name, ``Settings`` its hyper-parameters, named by the entry's
                   ``settings``); trained on Original by stage ``train_method``
``postprocessors`` ``apply(captions: list[str], ctx: biaslab.captioning.postprocess.
                   CaptionContext) -> list[str]`` (same length and order); stage
                   ``eval_captioner`` applies it to each seed of the ``base`` captioner (row
                   ``<base>+<name>``); raise :class:`Skipped` when its inputs are missing
``backends``       ``make(p, persons, images, labels, split, data_root) -> backend``
                   (:func:`biaslab.counterfactual.generate.make_backend`)
``archs``          a module with ``config_from_params``, ``train_captioner``, ``MODEL``,
                   ``CONFIG_FILE`` (:class:`biaslab.captioning.Arch`)
``filters``        ``score(ctx: biaslab.counterfactual.filters.FilterContext) -> np.ndarray``
                   (float, one per candidate, higher = better: less biased, more faithful);
                   stage ``score`` computes the filters of ``filters.names``, stage ``select``
                   ranks them (paper 000 Eq. 2 with weights ``filters.weights``); ``label`` is
                   its Table 4 column, ``order`` the column's place; its settings (if any)
                   at ``filters.filter_params.<name>``, read by ``ctx.settings(name)``
``backbones``      ``make(name, device=, image_size=, num_threads=) -> biaslab.models.features.
                   ImageEncoder`` (``params.yaml`` ``features.backbone`` /
                   ``classifier.backbones``; a name that is not registered is read as a Hugging
                   Face checkpoint or local directory); names may hold ``/`` and ``.``
``metrics``        ``compute(ctx: biaslab.captioning.evaluation.MetricContext) -> float | None``
                   (``task="captioning"``): one number per captioner seed, a column of Table 2
                   (``label``, ``order``; ``scale`` multiplies it for display). Built-ins
                   (:mod:`biaslab.captioning.columns`) and plug-ins go through the same
                   :func:`biaslab.captioning.evaluation.compute_metric`; the built-ins always,
                   a plug-in when named in ``eval_captioner.metrics`` (installed alone it
                   adds no column)
=================  ============================================================================

Claims (``Entry.claims``): ``{metric: expect}`` with ``expect`` one of ``<``, ``>``, ``≤``,
``≥``: the row's per-seed ``metric`` minus Original's, where ``metric`` is a probe attribute
(``objects``, ``scene``, ``cast``: the causal probe's sensitivity, on the classifier's
probability and logit scales, or the captioner's word rate and log-probability margin) or a
Table 1 / Table 2 column (``Ratio``, ``Leakage``, ``LIC``, ...). The paper's own claims about
the built-in rows stay in :mod:`biaslab.analysis.validity`.
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

#: the kinds and their entry point groups
KINDS = ("datasets", "methods", "postprocessors", "backends", "archs", "filters", "backbones",
         "metrics")
#: metrics entries: the table they are a column of, and the better direction (header arrow)
METRIC_TASKS = ("captioning", "classification")
BETTER = ("lower", "higher", "one", None)
#: claim directions (biaslab.analysis.validity)
EXPECT = ("<", ">", "≤", "≥")
#: rows a plug-in gets when it gives no ``order``: after every built-in row
PLUGIN_ORDER = 1000.0


class RegistryError(ValueError):
    """A malformed entry, a name taken twice, or an unknown name (the message names it and
    lists the known ones)."""


class RegistryWarning(UserWarning):
    """An installed plug-in that cannot be loaded: it is left out, every other component
    still works, and naming it raises the reason (:meth:`Registry.get`)."""


class Skipped(Exception):
    """Raised by a post-processor whose inputs are missing (e.g. LIBRA without a trained DCG):
    its row is left out and the reason recorded in ``data/captions/eval.json`` notes."""


@dataclass(frozen=True)
class Entry:
    """One swappable component.

    Attributes:
        kind: one of :data:`KINDS`.
        name: its params.yaml value (letters, digits, ``_``, ``-``, ``+``).
        target: the implementation, or ``"module:attribute"`` imported by :meth:`load`.
        label: display name in every table (default: ``name``).
        order: row position (tables sort rows by it; built-ins 0-130, plug-ins default 1000).
        params: the params.yaml group of its hyper-parameters (e.g.
            ``classifier.method_params.focal``), or None.
        settings: a dataclass whose fields are its hyper-parameters, typed and with their
            defaults (the one place a default lives), or ``"module:attribute"`` naming one
            (imported by :meth:`settings_class`; a method's is its class's ``Settings``);
            read from ``params`` by :func:`settings_of` and checked at every stage's start
            (type from each field's annotation, range by the class's ``__post_init__``);
            needs ``params``. A training-set variant's params live at ``datasets.<name>``, a
            method's at ``classifier.method_params.<name>``, a caption post-processor's at
            ``eval_captioner.postprocessor_params.<name>``, a filter's at
            ``filters.filter_params.<name>``: inside its stage's DVC params, so a change
            re-runs what it affects. The built-in backends' settings read their keys of the
            shared group ``generate`` and the archs' their config from group ``captioner``
            (each class's ``from_params``); ``biaslab plan`` checks those, which are
            ``"module:attribute"`` references.
        claims: ``{metric: expect}`` its author claims against Original (module docstring).
        base: post-processors: the captioner row it post-processes (default ``original``).
        doc: one line for listings (``biaslab components``).
        fixture: ``"module:attribute"`` of a function returning a tiny input for its tests,
            or None (the kind's shared fixture, tests/test_registry.py).
        task: metrics: ``captioning`` (Table 2) or ``classification`` (Table 1).
        scale: metrics: the display factor (x100 for DBAC, which lies in [-1, 1]).
        better: metrics: ``lower``, ``higher``, ``one`` (a ratio whose ideal is 1) or None (a
            descriptive measure without a better direction); the header's arrow.
    """
    kind: str
    name: str
    target: Any
    label: str | None = None
    order: float = PLUGIN_ORDER
    params: str | None = None
    claims: Mapping[str, str] = field(default_factory=dict)
    base: str = "original"
    doc: str = ""
    fixture: str | None = None
    task: str | None = None
    scale: float = 1.0
    better: str | None = None
    settings: Any = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise RegistryError(f"entry {self.name!r}: unknown kind {self.kind!r}; known: "
                                f"{list(KINDS)}")
        ok = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+")
        extra = {"backbones": "/.", "metrics": "."}.get(self.kind, "")
        if not self.name or not set(self.name) <= ok | set(extra) or \
                self.name.startswith((".", "/")) or ".." in self.name:
            raise RegistryError(f"{self.kind} entry name {self.name!r}: use letters, digits, "
                                f"'_', '-' or '+'{' or ' + repr(extra) if extra else ''} (it "
                                f"names files, DVC stages and metrics keys)")
        if self.kind == "metrics":
            if self.task not in METRIC_TASKS:
                raise RegistryError(f"metrics entry {self.name!r}: task must be one of "
                                    f"{list(METRIC_TASKS)}, got {self.task!r}")
            if self.better not in BETTER:
                raise RegistryError(f"metrics entry {self.name!r}: better must be one of "
                                    f"{list(BETTER)}, got {self.better!r}")
            if not (isinstance(self.scale, (int, float)) and self.scale > 0):
                raise RegistryError(f"metrics entry {self.name!r}: scale must be a number > 0, "
                                    f"got {self.scale!r}")
        if self.settings is not None:
            ref = isinstance(self.settings, str) and ":" in self.settings
            if not ref and not (isinstance(self.settings, type)
                                and dataclasses.is_dataclass(self.settings)):
                raise RegistryError(f"{self.kind} entry {self.name!r}: settings must be a "
                                    f"dataclass type or 'module:attribute', got "
                                    f"{self.settings!r}")
            if not self.params:
                raise RegistryError(f"{self.kind} entry {self.name!r}: settings need the "
                                    f"params group they are read from (params=...)")
        bad = {k: v for k, v in dict(self.claims).items() if v not in EXPECT}
        if bad:
            raise RegistryError(f"{self.kind} entry {self.name!r}: claims {bad}: each expect "
                                f"must be one of {list(EXPECT)}")

    @property
    def display(self) -> str:
        return self.label or self.name

    @property
    def row(self) -> str:
        """The row key of its results: ``name``; a post-processor's ``<base>+<name>``."""
        return f"{self.base}+{self.name}" if self.kind == "postprocessors" else self.name

    def load(self) -> Any:
        """The implementation (imports ``"module:attribute"`` targets). Raises RegistryError
        naming the entry when the import fails."""
        return self._resolve(self.target)

    def settings_class(self) -> type | None:
        """The settings dataclass (imports a ``"module:attribute"`` reference), or None.
        Raises RegistryError naming the entry when the import fails or gives no dataclass."""
        cls = self._resolve(self.settings)
        if cls is not None and not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise RegistryError(f"{self.kind} entry {self.name!r}: settings {self.settings!r} "
                                f"is not a dataclass type")
        return cls

    def _resolve(self, t: Any) -> Any:
        if not isinstance(t, str):
            return t
        mod, _, attr = t.partition(":")
        try:
            obj = importlib.import_module(mod)
            for a in attr.split(".") if attr else ():
                obj = getattr(obj, a)
        except (ImportError, AttributeError) as e:
            raise RegistryError(f"{self.kind} entry {self.name!r}: cannot load {t!r}: {e}") \
                from e
        return obj


def settings_of(entry: Entry, params: Mapping[str, Any]) -> Any:
    """The settings of component ``entry``: its :attr:`Entry.settings` dataclass filled from
    the mapping at the dotted path ``entry.params`` of ``params`` (the whole params.yaml;
    absent: every default), or, when the class has a ``from_params(params)`` classmethod,
    what that builds from the whole params (a component whose settings live in several
    groups, as LIBRA's row shares ``libra`` and ``eval_captioner.dcg`` with other stages).

    Returns:
        an instance of ``entry.settings``, or None when the entry declares none.

    Raises:
        ValueError: the mapping holds a key that is not a field, a value of the wrong type or
            one its ``__post_init__`` rejects; the message starts with the dotted param name.
    """
    cls = entry.settings_class()
    if cls is None:
        return None
    if callable(getattr(cls, "from_params", None)):   # settings gathered from several groups
        return cls.from_params(params)
    from biaslab.runtime.settings import from_params
    node: Any = params
    for k in str(entry.params).split("."):
        node = node.get(k) if isinstance(node, Mapping) else None
    return from_params(cls, node, str(entry.params), check_types=True)


class SettingsLookup:
    """What a kind's context (``CaptionContext``, ``FilterContext``) gives its components:
    ``ctx.settings(name)``, the settings the stage resolved once into ``component_settings``
    (:meth:`Registry.settings_for`), else the entry's defaults. A subclass names its
    registry in ``settings_kind``."""
    settings_kind: ClassVar[str] = ""
    component_settings: Mapping[str, Any]

    def settings(self, name: str) -> Any:
        """The settings of component ``name`` (a dataclass instance), None when it declares
        none. Raises RegistryError for an unknown name."""
        if name in self.component_settings:
            return self.component_settings[name]
        return REGISTRIES[self.settings_kind].settings(name)


class Registry:
    """The entries of one kind: built-ins added here, then installed packages' entry points
    (group ``biaslab.<kind>``), read on the first look-up."""

    def __init__(self, kind: str):
        if kind not in KINDS:
            raise RegistryError(f"unknown kind {kind!r}; known: {list(KINDS)}")
        self.kind = kind
        self.group = f"biaslab.{kind}"
        self._entries: dict[str, Entry] = {}
        self._origin: dict[str, str] = {}
        self._failed: dict[str, str] = {}
        self._plugins_loaded = False

    # ------------------------------------------------------------------ adding
    def add(self, entry: Entry, origin: str = "biaslab") -> Entry:
        """Add ``entry`` (from package ``origin``). Raises RegistryError on a wrong kind or a
        name already registered."""
        if entry.kind != self.kind:
            raise RegistryError(f"{origin}: entry {entry.name!r} is of kind {entry.kind!r}, "
                                f"registered as {self.kind!r}")
        if entry.name in self._entries:
            raise RegistryError(f"{origin}: {self.kind} name {entry.name!r} is taken (by "
                                f"{self._origin[entry.name]})")
        self._entries[entry.name] = entry
        self._origin[entry.name] = origin
        return entry

    def register(self, name: str, **kw) -> Callable:
        """Decorator: ``@REGISTRY.register("name", label=..., order=...)`` adds the decorated
        object as the target of a new entry and returns it unchanged."""
        def deco(obj):
            self.add(Entry(kind=self.kind, name=name, target=obj, **kw),
                     origin=getattr(obj, "__module__", "biaslab"))
            return obj
        return deco

    def load_plugins(self) -> None:
        """Read the entry points of group ``biaslab.<kind>`` once: each must load to an
        :class:`Entry` of this kind whose name is the entry point's name. One that does not
        (an import error, another object, a name taken) is a :class:`RegistryWarning` naming
        the entry point and its package, and is left out: a broken plug-in stops only what
        names it (:meth:`get` raises its reason), not every stage."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        import warnings
        from importlib.metadata import entry_points
        for ep in sorted(entry_points(group=self.group), key=lambda e: e.name):
            dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value
            try:
                try:
                    entry = ep.load()
                except Exception as e:  # a broken plug-in must say which one
                    raise RegistryError(f"entry point {ep.name!r} of {dist} (group "
                                        f"{self.group}): cannot load {ep.value!r}: {e}") from e
                if not isinstance(entry, Entry):
                    raise RegistryError(f"entry point {ep.name!r} of {dist} (group "
                                        f"{self.group}) loads a {type(entry).__name__}, not a "
                                        f"biaslab.registry.Entry")
                if entry.name != ep.name:
                    raise RegistryError(f"entry point {ep.name!r} of {dist} names an Entry "
                                        f"called {entry.name!r}: the two must be equal")
                self.add(entry, origin=dist)
            except RegistryError as e:
                self._failed.setdefault(ep.name, str(e))
                warnings.warn(RegistryWarning(f"{e}; left out"), stacklevel=2)

    def reset_plugins(self) -> None:
        """Forget the entries of installed packages (tests); they are read again on the next
        look-up."""
        for n in [n for n, o in self._origin.items() if o != "biaslab"]:
            del self._entries[n], self._origin[n]
        self._failed.clear()
        self._plugins_loaded = False

    # ------------------------------------------------------------------ looking up
    def __contains__(self, name: object) -> bool:
        self.load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[Entry]:
        self.load_plugins()
        return iter(list(self._entries.values()))

    def get(self, name: str) -> Entry:
        """The entry ``name``. Raises RegistryError naming it and listing the known names."""
        self.load_plugins()
        if name not in self._entries:
            if name in self._failed:
                raise RegistryError(self._failed[name])
            what = {"archs": "arch", "metrics": "metric"}.get(self.kind, self.kind[:-1])
            raise RegistryError(f"unknown {what} {name!r}; known: {self.names()}")
        return self._entries[name]

    def load(self, name: str) -> Any:
        """``get(name).load()``: the implementation."""
        return self.get(name).load()

    def settings(self, name: str, params: Mapping[str, Any] | None = None) -> Any:
        """The settings of component ``name`` read from the whole params (``None``: every
        default): :func:`settings_of` of its entry; None when it declares none.

        Raises:
            RegistryError: an unknown name. ValueError: a bad value (named by its dotted
                param).
        """
        return settings_of(self.get(name), params or {})

    def settings_for(self, names: Iterable[str], params: Mapping[str, Any] | None = None
                     ) -> dict[str, Any]:
        """``{name: settings}`` of the components ``names`` (:meth:`settings`): what a stage
        resolves once and hands its components through their context
        (:class:`SettingsLookup`)."""
        return {n: self.settings(n, params) for n in names}

    def names(self) -> list[str]:
        """Every name, in registration order (built-ins first)."""
        self.load_plugins()
        return list(self._entries)

    def origin(self, name: str) -> str:
        """The package that registered ``name`` (``biaslab`` for built-ins)."""
        self.get(name)
        return self._origin[name]

    def builtin(self, name: str) -> bool:
        return self.origin(name) == "biaslab"

    def builtins(self) -> list[Entry]:
        """The built-in entries, in registration order, without reading installed packages
        (module-level constants such as the report's built-in columns)."""
        return [e for n, e in self._entries.items() if self._origin[n] == "biaslab"]


DATASETS = Registry("datasets")
METHODS = Registry("methods")
POSTPROCESSORS = Registry("postprocessors")
BACKENDS = Registry("backends")
ARCHS = Registry("archs")
FILTERS = Registry("filters")
BACKBONES = Registry("backbones")
METRICS = Registry("metrics")
REGISTRIES = {"datasets": DATASETS, "methods": METHODS, "postprocessors": POSTPROCESSORS,
              "backends": BACKENDS, "archs": ARCHS, "filters": FILTERS, "backbones": BACKBONES,
              "metrics": METRICS}


def _builtin(kind: str, name: str, target: str, label: str, order: float = PLUGIN_ORDER,
             **kw) -> None:
    REGISTRIES[kind].add(Entry(kind=kind, name=name, target=target, label=label, order=order,
                               **kw))


# Training-set variants (paper 000 Eqs. 2-3; biaslab/data/variants.py). Registered in the order
# stage build_datasets writes them; ``order`` is their row in the tables.
_V = "biaslab.data.variants"
_builtin("datasets", "original", f"{_V}:original", "Original", 0,
         doc="the training images with a gender label (paper 000's D)")
_builtin("datasets", "oversample", f"{_V}:oversample", "Over-sampling", 10,
         params="datasets", doc="repeat images until every object's gender skew is bounded")
_builtin("datasets", "subsample", f"{_V}:subsample", "Sub-sampling", 20,
         params="datasets", doc="drop images until every object's gender skew is bounded")
_builtin("datasets", "augment", f"{_V}:augment", "S_augment", 120,
         doc="Original plus its counterfactuals (paper 000 Eq. 3)")
_builtin("datasets", "synthetic", f"{_V}:synthetic", "S_synthetic", 130,
         doc="the counterfactuals only (paper 000 Eq. 2)")
_builtin("datasets", "matched", f"{_V}:matched", "Original, size-matched", 30,
         params="datasets", doc="Original at sub-sampling's size and gender counts")

# Model-level methods of paper 000 Table 1 (biaslab/classify/methods/, one module each).
_M = "biaslab.classify.methods"
_builtin("methods", "erm", f"{_M}.base:Method", "Original", 0,
         doc="empirical risk minimisation (every dataset-level row)")
for _order, (_name, _cls, _label) in enumerate((
        ("adversarial", "adversarial:Adversarial", "Adversarial"),
        ("domain_discriminative", "domain:DomainDiscriminative", "DomDisc"),
        ("domain_independent", "domain:DomainIndependent", "DomInd"),
        ("upweight", "reweight:Upweight", "Upweight"),
        ("focal", "focal:Focal", "Focal"),
        ("class_balanced", "reweight:ClassBalanced", "CB"),
        ("group_dro", "group_dro:GroupDRO", "GroupDRO"))):
    _builtin("methods", _name, f"{_M}.{_cls}", _label, 40 + 10 * _order,
             params=f"classifier.method_params.{_name}", settings=f"{_M}.{_cls}.Settings")

# Caption post-processors: LIBRA's DCG (paper 003 sec. 4) on the Original captioner.
_builtin("postprocessors", "LIBRA", "biaslab.captioning.postprocess:libra", "Original + LIBRA",
         110, params="libra", settings="biaslab.captioning.postprocess:LibraSettings",
         doc="LIBRA's debiasing caption generator (paper 003)")

# Counterfactual backends (paper 000 Eq. 1; biaslab/counterfactual/).
# Their settings read the keys of the shared group ``generate`` that each backend uses.
_G, _GS = "biaslab.counterfactual.generate", "biaslab.counterfactual.backend_settings"
_builtin("backends", "copy_paste", f"{_G}:make_copy_paste", "copy-paste + OpenCV inpainting",
         params="generate", settings=f"{_GS}:CopyPasteSettings")
_builtin("backends", "render", f"{_G}:make_render", "the synthetic generator's re-draw",
         params="generate")
_builtin("backends", "sd_inpaint", f"{_G}:make_sd_inpaint", "Stable Diffusion inpainting",
         params="generate", settings=f"{_GS}:SDInpaintSettings")
_builtin("backends", "instruct_pix2pix", f"{_G}:make_instruct_pix2pix",
         "InstructPix2Pix on the person's box (GenSynth, paper 001)", params="generate",
         settings=f"{_GS}:InstructPix2PixSettings")

# Captioner architectures of paper 000 Table 2 (biaslab/captioning/); their settings are the
# config each builds from group ``captioner`` (config_from_params).
_builtin("archs", "clipcap", "biaslab.captioning.clipcap", "ClipCap", 0, params="captioner",
         settings="biaslab.captioning.clipcap:CaptionerConfig")
_builtin("archs", "transformer", "biaslab.captioning.transformer", "Transformer", 1,
         params="captioner.transformer",
         settings="biaslab.captioning.transformer_config:TransformerConfig")
_builtin("archs", "blip2", "biaslab.captioning.blip2", "BLIP-2", 2, params="captioner.blip2",
         settings="biaslab.captioning.blip2:Blip2CaptionerConfig")

# Filters of weighted rank selection (paper 000 sec. 2.3, Eqs. 4-6; biaslab/counterfactual/
# filters.py), in the order of the default filters.names; ``order`` is Table 4's column.
_F = "biaslab.counterfactual.filters"
_builtin("filters", "prompt_adherence", f"{_F}:score_prompt_adherence", "Prompt", 2,
         params="filters", doc="CLIP similarity of candidate and prompt (Eq. 4)")
_builtin("filters", "object_consistency", f"{_F}:score_object_consistency", "Object", 0,
         params="filters", doc="F1 of predicted object sets, candidate vs original (Eq. 5)")
_builtin("filters", "color_fidelity", f"{_F}:score_color_fidelity", "Color", 1,
         params="filters.filter_params.color_fidelity",
         settings=f"{_F}:ColorFidelitySettings",
         doc="inverse Frobenius distance of 14 x 14 thumbnails (Eq. 6)")

# Image backbones (biaslab/models/features.py): the offline default and paper 000 Table 1's
# fine-tuned classification backbones (appendix B.1), with their Table 1 names as labels.
_B = "biaslab.models.features"
_builtin("backbones", "efficientnet_lite0", f"{_B}:make_efficientnet_lite0",
         "EfficientNet-Lite0", 0, params="features",
         doc="ImageNet EfficientNet-Lite0 from timm's weights in the repository (offline)")
for _order, (_name, _label) in enumerate((("microsoft/resnet-50", "ResNet-50"),
                                          ("microsoft/swin-tiny-patch4-window7-224", "Swin-T"),
                                          ("facebook/convnext-base-224", "ConvNeXt-B"))):
    _builtin("backbones", _name, f"{_B}:HFImageEncoder", _label, 1 + _order, params="features",
             doc="Hugging Face checkpoint (paper tier, paper 000 appendix B.1)")

# Captioning metrics: the columns of paper 000 Table 2 and thesis Table 2.1, each a
# compute(ctx) of biaslab.captioning.columns (what several share, e.g. pycocoevalcap's one call
# for METEOR, BLEU-4 and CIDEr, is computed once per results set and read from ctx.details).
# The registration order is the key order of each row of metrics/captioning.json; ``order``
# is the column order of Table 2.
_Q = "biaslab.captioning.columns"
for _name, _target, _label, _order, _better, _scale, _doc in (
        ("METEOR", "meteor", "METEOR", 0, "higher", 1,
         "pycocoevalcap METEOR x100 (paper 000 Table 2)"),
        ("BLEU-4", "bleu4", "BLEU-4", 13, "higher", 1, "pycocoevalcap BLEU-4 x100"),
        ("CIDEr", "cider", "CIDEr", 14, "higher", 1, "pycocoevalcap CIDEr-D x100"),
        ("CLIPScore", "clipscore", "CLIPScore", 1, "higher", 1,
         "Hessel et al. 2021 x100 (paper 000 Table 2 CS)"),
        ("Ratio", "ratio", "Ratio", 2, "one", 1,
         "max(r, 1/r), r = #man / #woman captions (paper 000 Table 2)"),
        ("Error", "error", "Error", 9, "lower", 1,
         "% of gender-labelled images misgendered (paper 000 Table 2)"),
        ("LIC", "lic", "LIC", 5, "lower", 1, "LIC_M - LIC_D x100 (paper 002 Eq. 4)"),
        ("LIC_M", "lic_m", "LIC_M", 16, "lower", 1,
         "the attacker's leakage on the model's captions x100 (paper 002; not a column)"),
        ("LIC_D", "lic_d", "LIC_D", 17, "lower", 1,
         "the attacker's leakage on human captions x100 (paper 002; not a column)"),
        ("BiasAmp", "biasamp", "BiasAmp", 10, "lower", 1,
         "bias amplification x100 (thesis Eq. 2.11)"),
        ("DBA_G", "dba_g", "DBA_G", 11, "lower", 1,
         "directional bias amplification, gender to objects (thesis Eq. 2.13)"),
        ("DBA_O", "dba_o", "DBA_O", 12, "lower", 1,
         "directional bias amplification, objects to gender (thesis Eq. 2.14)"),
        ("no_gender_word", "no_gender_word", "no gender word %", 3, None, 1,
         "% of gender-labelled images whose caption names no gender"),
        ("length", "length", "words", 4, None, 1, "mean tokens per caption"),
        ("DBAC_T_to_A", "dbac_t_to_a", "DBAC T→A", 6, "lower", 100,
         "DBAC, text to attribute, with the authors' prior correction"),
        ("DBAC_A_to_T", "dbac_a_to_t", "DBAC A→T", 7, "lower", 100,
         "DBAC, attribute to text, with the authors' prior correction"),
        ("DBAC_direct_T_to_A", "dbac_direct_t_to_a", "DBAC T→A direct", 8, "lower", 100,
         "DBAC, text to attribute, without the prior correction"),
        ("DBAC_direct_A_to_T", "dbac_direct_a_to_t", "DBAC A→T direct", 15, "lower", 100,
         "DBAC, attribute to text, without the prior correction (not a Table 2 column)")):
    _builtin("metrics", _name, f"{_Q}:{_target}", _label, _order, task="captioning",
             better=_better, scale=_scale, doc=_doc)


# ------------------------------------------------------------------------- rows of the tables
def row_entries() -> list[Entry]:
    """Every entry that is a row of the tables (training sets, methods other than ``erm``,
    post-processors), in table order (``order``, then registration)."""
    rows = [e for e in DATASETS] + [e for e in METHODS if e.name != "erm"] + \
        [e for e in POSTPROCESSORS]
    return sorted(rows, key=lambda e: e.order)      # stable: ties keep registration order


def row_names() -> dict[str, str]:
    """``{row key: display label}`` in table order (paper 000 Tables 1-3, then plug-ins)."""
    return {e.row: e.display for e in row_entries()}


def row_order() -> tuple[str, ...]:
    """Row keys in table order."""
    return tuple(row_names())


def claimed_rows() -> list[Entry]:
    """Row entries whose authors declared claims (:attr:`Entry.claims`), in table order."""
    return [e for e in row_entries() if e.claims]


def metric_entries(task: str = "captioning", builtin_only: bool = False) -> list[Entry]:
    """The metrics of ``task`` (:data:`METRIC_TASKS`) in column order (``order``, then
    registration); ``builtin_only``: without installed packages' metrics."""
    pool = METRICS.builtins() if builtin_only else list(METRICS)
    return sorted((e for e in pool if e.task == task), key=lambda e: e.order)


def plugin_metrics(task: str = "captioning") -> list[Entry]:
    """The metrics of ``task`` that installed packages add: computed when named in
    ``eval_captioner.metrics`` (the built-ins always are)."""
    return [e for e in metric_entries(task) if not METRICS.builtin(e.name)]


def filter_labels() -> dict[str, str]:
    """``{filter name: Table 4 column label}`` in column order (``order``)."""
    return {e.name: e.display for e in sorted(FILTERS, key=lambda e: e.order)}


__all__ = ["ARCHS", "BACKBONES", "BACKENDS", "BETTER", "DATASETS", "EXPECT", "Entry",
           "FILTERS", "KINDS", "METHODS", "METRICS", "METRIC_TASKS", "PLUGIN_ORDER",
           "POSTPROCESSORS", "REGISTRIES", "Registry", "RegistryError", "RegistryWarning",
           "SettingsLookup", "Skipped",
           "claimed_rows", "filter_labels", "metric_entries", "plugin_metrics", "row_entries",
           "row_names", "row_order", "settings_of"]
