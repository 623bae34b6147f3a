"""The training-method interface of the classifier (paper 000 Table 1: the model-level
baselines) and plain empirical risk minimisation (``erm``, the "Original" row and every
dataset-level row).

A method decides four things, everything else (features, validation split, Adam, early
stopping, saving) is shared by :func:`biaslab.classify.train.train_classifier`:

* the raw output layout of the head (:meth:`Method.n_raw`): ERM has ``|O| + 2`` outputs
  (objects, then ``woman``, ``man``); the domain methods have one object head per gender;
  the adversarial model has no gender outputs;
* the raw targets and loss mask (:meth:`Method.raw_targets`) from the shared ones
  (:func:`biaslab.classify.manifest.label_targets`);
* the training loss of a mini-batch (:meth:`Method.loss`), with any statistics of the
  training rows it needs computed once by :meth:`Method.setup`;
* the inference rule (:meth:`Method.logits`): raw head outputs -> logits of the inference
  outputs ``|O|`` objects (+ ``woman``, ``man`` when :attr:`Method.gender_outputs`), whose
  sigmoids :meth:`biaslab.classify.GenderObjectClassifier.predict_proba` returns.

Early stopping of every method uses the same criterion: the masked binary cross-entropy of
the inference outputs on the validation split (our choice: the papers select by their task
metric on a validation split; a method-specific objective, e.g. GroupDRO's robust loss,
would make the stopping rule itself part of the comparison).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from biaslab.runtime.settings import from_params


def masked_bce(logits, y, m, w=None):
    """Mean binary cross-entropy with logits over the entries where ``m`` is 1 (torch tensors
    of one shape; ``w``: optional per-entry weights): ``sum(w * m * bce) / max(sum(m), 1)``.
    The weights are not renormalised: weights with mean 1 keep the loss scale."""
    import torch
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="none")
    if w is not None:
        loss = loss * w
    return (loss * m).sum() / m.sum().clamp_min(1.0)


class Method:
    """Empirical risk minimisation: masked binary cross-entropy on ``|O| + 2`` sigmoid outputs
    (paper 000 appendix B.1, the "Original" row of Table 1). Subclasses override what differs.

    Attributes:
        name: the ``--method`` / ``classifier.methods`` value.
        Settings: a frozen dataclass of the method's hyper-parameters: each field typed,
            with its default, its range checked by ``__post_init__`` (ValueError naming
            ``classifier.method_params.<name>.<field>``); ``classifier.method_params.<name>``
            in params.yaml overrides the defaults. ERM has none.
        settings: this instance's ``Settings``.
        params: ``settings`` as a dict (recorded in the saved model's config).
        gender_outputs: whether the model has ``woman`` / ``man`` outputs (Ratio needs them).
    """
    name = "erm"
    gender_outputs = True

    @dataclasses.dataclass(frozen=True)
    class Settings:
        pass

    def __init__(self, params: Mapping | None = None):
        """Raises ValueError naming ``classifier.method_params.<name>[.<key>]`` for an unknown
        key, a value of the wrong type or one out of range."""
        self.settings = from_params(self.Settings, params,
                                    f"classifier.method_params.{self.name}", check_types=True)
        self.params = dataclasses.asdict(self.settings)

    # ---------------------------------------------------------------- layout
    def n_raw(self, n_obj: int) -> int:
        """Number of raw head outputs for ``n_obj`` objects."""
        return n_obj + 2

    def n_out(self, n_obj: int) -> int:
        """Number of inference outputs: objects (+ 2 gender outputs)."""
        return n_obj + (2 if self.gender_outputs else 0)

    def hidden(self, hidden: list) -> list:
        """Hidden layer widths of the head (the adversarial model needs at least one)."""
        return list(hidden)

    def raw_targets(self, y: np.ndarray, m: np.ndarray, n_obj: int
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Raw targets and mask, float32 (n, n_raw) each, from ``label_targets``' ``(y, m)``
        (n, n_obj + 2). ERM: unchanged."""
        return y, m

    # ---------------------------------------------------------------- training
    def setup(self, y: np.ndarray, m: np.ndarray, n_obj: int) -> None:
        """Statistics of the training rows (``label_targets``' y, m restricted to the training
        split, in training-row order) that :meth:`loss` needs. ERM: none."""

    def modules(self, head) -> list:
        """Extra trainable modules (optimised with the head, not saved). ERM: none."""
        return []

    def loss(self, head, x, y, m, idx):
        """Training loss of a mini-batch (scalar tensor).

        Args:
            head: the head module (``head(x)`` = raw logits (b, n_raw)).
            x: float32 (b, d) features; ``y``, ``m``: float32 (b, n_raw) raw targets / mask;
            idx: int64 (b,) positions of the rows in the training split (for per-row
                statistics from :meth:`setup`).
        """
        return masked_bce(head(x), y, m)

    # ---------------------------------------------------------------- inference
    def logits(self, raw):
        """Logits (n, n_out) of the inference outputs from raw head outputs (n, n_raw)."""
        return raw


def gender_index(y: np.ndarray, m: np.ndarray, n_obj: int) -> np.ndarray:
    """Gender of each row from ``label_targets``' (y, m): 0 = woman, 1 = man, -1 = unknown
    (gender outputs masked). int64 (n,)."""
    known = m[:, n_obj] > 0
    return np.where(known, (y[:, n_obj + 1] > 0).astype(np.int64), -1)
