"""One registry of the swappable components (issue 27 item 1): training-set variants, model-level
methods, caption post-processors, counterfactual backends and captioner architectures.

Every component is an :class:`Entry`: its ``name`` (the value in params.yaml, e.g.
``classifier.datasets: [..., reweighted]``), its display ``label`` and ``order`` (the row of
paper 000's Tables 1-3 and of every table, probe and verdict the report prints), where its
parameters live in params.yaml (``params``) with their defaults (``defaults``), the claims
its author makes about it (``claims``, judged in ``metrics/validity.json`` against Original),
and its implementation ``target``: an object, or ``"module:attribute"`` imported on first use,
so that looking a name up (as :mod:`biaslab.runtime.validate` does at every stage's start) imports
neither torch nor the component.

A separate package adds components without editing this repository through Python entry
points, one group per kind (``biaslab.datasets``, ``biaslab.methods``,
``biaslab.postprocessors``, ``biaslab.backends``, ``biaslab.archs``; group names, not modules),
each entry point naming an :class:`Entry`::

    [project.entry-points."biaslab.datasets"]
    reweighted = "my_package.variants:REWEIGHTED"     # an Entry(kind="datasets", ...)

``examples/biaslab-example-plugin`` is a worked package (docs/extending.md). The entries of
installed packages are read once per process, on the first look-up of their kind; a name
already taken (a built-in or another package's) raises :class:`RegistryError` naming both.

What each kind's ``target`` is (the contract its tests check, ``tests/test_registry.py``):

=================  ============================================================================
``datasets``       ``build(ctx: biaslab.data.variants.VariantContext) -> pd.DataFrame``: a training
                   manifest (one row per training example, Original's columns); stage
                   ``build_datasets`` writes it to ``data/datasets/<name>.parquet``
``methods``        a :class:`biaslab.classify.methods.base.Method` subclass (``name`` = the
                   entry's name); trained on Original by stage ``train_method``
``postprocessors`` ``apply(captions: list[str], ctx: biaslab.captioning.postprocess.
                   CaptionContext) -> list[str]`` (same length and order); stage
                   ``eval_captioner`` applies it to each seed of the ``base`` captioner (row
                   ``<base>+<name>``); raise :class:`Skipped` when its inputs are missing
``backends``       ``make(p, persons, images, labels, split, data_root) -> backend``
                   (:func:`biaslab.counterfactual.generate.make_backend`)
``archs``          a module with ``config_from_params``, ``train_captioner``, ``MODEL``,
                   ``CONFIG_FILE`` (:class:`biaslab.captioning.Arch`)
=================  ============================================================================

Claims (``Entry.claims``): ``{metric: expect}`` with ``expect`` one of ``<``, ``>``, ``≤``,
``≥``: the row's per-seed ``metric`` minus Original's, where ``metric`` is a probe attribute
(``objects``, ``scene``, ``cast``: the causal probe's sensitivity, on the classifier's
probability and logit scales, or the captioner's word rate and log-probability margin) or a
Table 1 / Table 2 column (``Ratio``, ``Leakage``, ``LIC``, ...). The paper's own claims about
the built-in rows stay in :mod:`biaslab.analysis.validity`.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the kinds and their entry point groups
KINDS = ("datasets", "methods", "postprocessors", "backends", "archs")
#: claim directions (biaslab.analysis.validity)
EXPECT = ("<", ">", "≤", "≥")
#: rows a plug-in gets when it gives no ``order``: after every built-in row
PLUGIN_ORDER = 1000.0


class RegistryError(ValueError):
    """A malformed entry, a name taken twice, or an unknown name (the message names it and
    lists the known ones)."""


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
        defaults: those hyper-parameters' defaults (documentation and tests; a ``Method``
            keeps its own in ``PARAMS``).
        claims: ``{metric: expect}`` its author claims against Original (module docstring).
        base: post-processors: the captioner row it post-processes (default ``original``).
        doc: one line for listings (``biaslab components``).
        fixture: ``"module:attribute"`` of a function returning a tiny input for its tests,
            or None (the kind's shared fixture, tests/test_registry.py).
    """
    kind: str
    name: str
    target: Any
    label: str | None = None
    order: float = PLUGIN_ORDER
    params: str | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    claims: Mapping[str, str] = field(default_factory=dict)
    base: str = "original"
    doc: str = ""
    fixture: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise RegistryError(f"entry {self.name!r}: unknown kind {self.kind!r}; known: "
                                f"{list(KINDS)}")
        ok = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+")
        if not self.name or not set(self.name) <= ok:
            raise RegistryError(f"{self.kind} entry name {self.name!r}: use letters, digits, "
                                f"'_', '-' or '+' (it names files and DVC stages)")
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
        t = self.target
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
        :class:`Entry` of this kind whose name is the entry point's name."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        from importlib.metadata import entry_points
        for ep in sorted(entry_points(group=self.group), key=lambda e: e.name):
            dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value
            try:
                entry = ep.load()
            except Exception as e:  # a broken plug-in must say which one
                raise RegistryError(f"entry point {ep.name!r} of {dist} (group {self.group}): "
                                    f"cannot load {ep.value!r}: {e}") from e
            if not isinstance(entry, Entry):
                raise RegistryError(f"entry point {ep.name!r} of {dist} (group {self.group}) "
                                    f"loads a {type(entry).__name__}, not a biaslab.registry."
                                    f"Entry")
            if entry.name != ep.name:
                raise RegistryError(f"entry point {ep.name!r} of {dist} names an Entry called "
                                    f"{entry.name!r}: the two must be equal")
            self.add(entry, origin=dist)

    def reset_plugins(self) -> None:
        """Forget the entries of installed packages (tests); they are read again on the next
        look-up."""
        for n in [n for n, o in self._origin.items() if o != "biaslab"]:
            del self._entries[n], self._origin[n]
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
            raise RegistryError(f"unknown {self.kind[:-1] if self.kind != 'archs' else 'arch'} "
                                f"{name!r}; known: {self.names()}")
        return self._entries[name]

    def load(self, name: str) -> Any:
        """``get(name).load()``: the implementation."""
        return self.get(name).load()

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


DATASETS = Registry("datasets")
METHODS = Registry("methods")
POSTPROCESSORS = Registry("postprocessors")
BACKENDS = Registry("backends")
ARCHS = Registry("archs")
REGISTRIES = {"datasets": DATASETS, "methods": METHODS, "postprocessors": POSTPROCESSORS,
              "backends": BACKENDS, "archs": ARCHS}


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
         params="datasets", doc="Original at sub-sampling's size and gender counts (issue 23)")

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
             params=f"classifier.method_params.{_name}")

# Caption post-processors: LIBRA's DCG (paper 003 sec. 4) on the Original captioner.
_builtin("postprocessors", "LIBRA", "biaslab.captioning.postprocess:libra", "Original + LIBRA",
         110, params="libra", doc="LIBRA's debiasing caption generator (paper 003)")

# Counterfactual backends (paper 000 Eq. 1; biaslab/counterfactual/).
_G = "biaslab.counterfactual.generate"
_builtin("backends", "copy_paste", f"{_G}:make_copy_paste", "copy-paste + OpenCV inpainting",
         params="generate")
_builtin("backends", "render", f"{_G}:make_render", "the synthetic generator's re-draw",
         params="generate")
_builtin("backends", "sd_inpaint", f"{_G}:make_sd_inpaint", "Stable Diffusion inpainting",
         params="generate")
_builtin("backends", "instruct_pix2pix", f"{_G}:make_instruct_pix2pix",
         "InstructPix2Pix on the person's box (GenSynth, paper 001)", params="generate")

# Captioner architectures of paper 000 Table 2 (biaslab/captioning/).
_builtin("archs", "clipcap", "biaslab.captioning.clipcap", "ClipCap", 0, params="captioner")
_builtin("archs", "transformer", "biaslab.captioning.transformer", "Transformer", 1,
         params="captioner.transformer")
_builtin("archs", "blip2", "biaslab.captioning.blip2", "BLIP-2", 2, params="captioner.blip2")


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


__all__ = ["ARCHS", "BACKENDS", "DATASETS", "EXPECT", "Entry", "KINDS", "METHODS",
           "PLUGIN_ORDER", "POSTPROCESSORS", "REGISTRIES", "Registry", "RegistryError",
           "Skipped", "claimed_rows", "row_entries", "row_names", "row_order"]
