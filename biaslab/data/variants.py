"""Training-set variants as registry components: the builders stage
``build_datasets`` calls, one per :data:`biaslab.registry.DATASETS` entry.

A builder takes a :class:`VariantContext` and returns a training manifest
(:data:`biaslab.data.datasets.MANIFEST_COLUMNS`, one row per training example; a repeated image is a
repeated row with its own ``sample_id``). The context holds Original (``D``: the gendered
training images with counterfactuals for every group), the selected counterfactuals, params
``datasets`` and the variants already built (:meth:`VariantContext.variant` builds another on
demand, e.g. ``matched`` reads ``subsample``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from biaslab.data import datasets as D
from biaslab import registry


@dataclass
class VariantContext:
    """What a training-set builder reads.

    Attributes:
        original: Original's manifest (D), one row per image.
        counterfactuals: the selected counterfactual rows (``datasets.counterfactuals``).
        params: params ``datasets`` (seed, max_skew, max_copies, max_factor, min_fraction, ...;
            a variant's own settings at ``datasets.<name>``, read by :meth:`settings`).
        built: variants built so far, by name.
    """
    original: pd.DataFrame
    counterfactuals: pd.DataFrame
    params: Mapping[str, Any]
    built: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def seed(self) -> int:
        return int(self.params.get("seed", 0))

    def settings(self, name: str) -> Any:
        """The settings of variant ``name`` (its entry's ``settings`` dataclass filled from
        ``datasets.<name>``; :func:`biaslab.registry.settings_of`), None when it declares
        none."""
        return registry.DATASETS.settings(name, {"datasets": self.params})

    def variant(self, name: str) -> pd.DataFrame:
        """The variant ``name``, built now (through the registry) if not built yet."""
        if name not in self.built:
            self.built[name] = build(name, self)
        return self.built[name]


def build(name: str, ctx: VariantContext) -> pd.DataFrame:
    """Variant ``name`` of ``ctx`` by its registered builder. Raises
    :class:`biaslab.registry.RegistryError` for an unknown name, ``TypeError`` when the builder
    returns no DataFrame or one without Original's columns (naming the variant)."""
    out = registry.DATASETS.load(name)(ctx)
    if not isinstance(out, pd.DataFrame):
        raise TypeError(f"dataset variant {name!r} ({registry.DATASETS.origin(name)}) returned "
                        f"{type(out).__name__}, not a manifest DataFrame")
    missing = [c for c in D.MANIFEST_COLUMNS if c not in out.columns]
    if missing:
        raise TypeError(f"dataset variant {name!r} ({registry.DATASETS.origin(name)}): manifest "
                        f"lacks column(s) {missing}")
    return out


# ------------------------------------------------------------------ the built-in variants
def original(ctx: VariantContext) -> pd.DataFrame:
    """Original: D itself."""
    return ctx.original


def oversample(ctx: VariantContext) -> pd.DataFrame:
    """Over-sampling (paper 000 sec. 2.1): :func:`biaslab.data.datasets.oversample`."""
    p = ctx.params
    return D.oversample(ctx.original, seed=ctx.seed, max_skew=p["max_skew"],
                        max_copies=p["max_copies"], max_factor=p["max_factor"])


def subsample(ctx: VariantContext) -> pd.DataFrame:
    """Sub-sampling (paper 000 sec. 2.1): :func:`biaslab.data.datasets.subsample`."""
    p = ctx.params
    return D.subsample(ctx.original, seed=ctx.seed, max_skew=p["max_skew"],
                       min_fraction=p["min_fraction"])


def augment(ctx: VariantContext) -> pd.DataFrame:
    """S_augment (paper 000 Eq. 3)."""
    return D.s_augment(ctx.original, ctx.counterfactuals)


def synthetic(ctx: VariantContext) -> pd.DataFrame:
    """S_synthetic (paper 000 Eq. 2)."""
    return D.s_synthetic(ctx.counterfactuals)


def matched(ctx: VariantContext) -> pd.DataFrame:
    """Original at sub-sampling's size and gender counts."""
    return D.matched_subset(ctx.original, ctx.variant("subsample"), seed=ctx.seed)


__all__ = ["VariantContext", "augment", "build", "matched", "original", "oversample",
           "subsample", "synthetic"]
