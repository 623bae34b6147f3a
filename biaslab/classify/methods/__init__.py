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
"""
from __future__ import annotations

from collections.abc import Mapping

from biaslab.classify.methods.adversarial import Adversarial
from biaslab.classify.methods.base import Method
from biaslab.classify.methods.domain import DomainDiscriminative, DomainIndependent
from biaslab.classify.methods.focal import Focal
from biaslab.classify.methods.group_dro import GroupDRO
from biaslab.classify.methods.reweight import ClassBalanced, Upweight

METHODS: dict[str, type[Method]] = {c.name: c for c in (
    Method, Adversarial, DomainDiscriminative, DomainIndependent, Upweight, Focal,
    ClassBalanced, GroupDRO)}


def get_method(name: str = "erm", params: Mapping | None = None) -> Method:
    """A fresh :class:`Method` instance by name with its params (defaults overridden by
    ``params``). Raises ValueError naming the unknown method or parameter."""
    if name not in METHODS:
        raise ValueError(f"unknown classifier method {name!r}; known: {sorted(METHODS)}")
    return METHODS[name](params)


__all__ = ["METHODS", "Method", "get_method"]
