"""Training methods of the classifier: ERM and the model-level baselines of paper 000 Table 1,
one module each (``--method`` of stages/train_classifier.py, ``classifier.methods``):

=====================  ==========  =======================================================
method                 Table 1     module
=====================  ==========  =======================================================
erm                    Original    :mod:`biaslab.classify.methods.base`
adversarial            Adversarial :mod:`biaslab.classify.methods.adversarial`
domain_discriminative  DomDisc     :mod:`biaslab.classify.methods.domain`
domain_independent     DomInd      :mod:`biaslab.classify.methods.domain`
upweight               Upweight    :mod:`biaslab.classify.methods.reweight`
focal                  Focal       :mod:`biaslab.classify.methods.focal`
class_balanced         CB          :mod:`biaslab.classify.methods.reweight`
group_dro              GroupDRO    :mod:`biaslab.classify.methods.group_dro`
=====================  ==========  =======================================================

Methods are entries of :data:`biaslab.registry.METHODS` (the table above is its built-in
part); an installed package adds one through the ``biaslab.methods`` entry point group, and
``get_method`` finds it like a built-in one.
"""
from __future__ import annotations

from collections.abc import Mapping

from biaslab import registry
from biaslab.classify.methods.base import Method


def get_method(name: str = "erm", params: Mapping | None = None) -> Method:
    """A fresh :class:`Method` instance by name with its params (defaults overridden by
    ``params``). Raises ValueError naming the unknown method or parameter, TypeError when a
    registered target is not a Method subclass named as its entry."""
    if name not in registry.METHODS:
        raise ValueError(f"unknown classifier method {name!r}; known: "
                         f"{sorted(registry.METHODS.names())}")
    cls = registry.METHODS.load(name)
    if not (isinstance(cls, type) and issubclass(cls, Method)) or cls.name != name:
        raise TypeError(f"classifier method {name!r} ({registry.METHODS.origin(name)}): the "
                        f"target must be a biaslab Method subclass with name = {name!r}, got "
                        f"{cls!r}")
    return cls(params)


__all__ = ["Method", "get_method"]
