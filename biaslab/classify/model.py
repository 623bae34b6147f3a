"""Model of the multi-label object + gender classifier (paper 000 appendix B.1): output
layout, training defaults, the head on backbone features and the saved classifier."""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from biaslab import registry as _registry
from biaslab.runtime.io import InputError, atomic_path, read_json, without_run_stats, write_json

#: Output names of the protected groups (appendix B.1), in this order after the objects.
GENDER_OUTPUTS = ("woman", "man")
#: manifest gender -> output name.
GENDER_OF = {"female": "woman", "male": "man"}
CONFIG_FILE = "classifier_config.json"
WEIGHTS_FILE = "classifier_head.safetensors"
BACKBONE_FILE = "classifier_backbone.safetensors"
#: The fine-tuned backbones of paper 000 Table 1 (appendix B.1: "ResNet-50, Swin-T, and
#: ConvNeXt-Base ... initialized with ImageNet pre-training"), Table 1 column group -> the
#: Hugging Face checkpoint of the paper tier (``features.backbone`` with
#: ``classifier.finetune: true``; conf/models/paper.yaml): the built-in Hugging Face entries of
#: the registry of backbones (biaslab.registry.BACKBONES), label -> name. Tested offline with
#: tiny random models of the same classes (tests/test_backbones.py).
PAPER_BACKBONES = {e.display: e.name for e in _registry.BACKBONES.builtins()
                   if e.target == "biaslab.models.features:HFImageEncoder"}


def classifier_backbones(params: dict) -> list[str]:
    """The backbones of Table 1's column groups (paper 000 Table 1: one group per backbone):
    ``classifier.backbones`` (a list of names: ``efficientnet_lite0``, a Hugging Face
    checkpoint such as ``microsoft/resnet-50``, or a local ``save_pretrained`` directory), or
    ``[features.backbone]`` when it is null/absent. The first is the *primary* backbone: its
    models keep the plain ``data/models/classifier/<name>/<name>-<seed>`` path and feed the
    probe, the artifact test and the headline; the others get ``-<slug>`` after the seed
    (``biaslab.runtime.paths.model_dir(..., variant=backbone)``).

    Args:
        params: the composed params (``classifier`` and ``features`` groups).

    Returns:
        the list, in order.

    Raises:
        InputError: ``classifier.backbones`` is not a non-empty list of distinct non-empty
            strings, or two names share a slug (their model directories would collide).
    """
    from biaslab.runtime.io import InputError
    from biaslab.runtime.paths import slug
    fb = (params.get("features") or {}).get("backbone", "efficientnet_lite0")
    raw = (params.get("classifier") or {}).get("backbones")
    if raw is None:
        return [str(fb)]
    if not isinstance(raw, (list, tuple)) or not raw or \
            not all(isinstance(b, str) and b.strip() for b in raw):
        raise InputError("params.yaml", f"classifier.backbones must be a non-empty list of "
                                        f"backbone names or null, got {raw!r}")
    slugs = [slug(b) for b in raw]
    if len(set(slugs)) != len(slugs):
        raise InputError("params.yaml", f"classifier.backbones: names must be distinct (and "
                                        f"their last path parts too), got {list(raw)}")
    return [str(b) for b in raw]


@dataclass(frozen=True)
class TrainSettings:
    """The classifier's training settings (params ``classifier``, whose other keys are read by
    the stages): ci values, paper 000 appendix B.1's in comments. The one place these defaults
    live; the field order is the key order of the saved model's config.

    Attributes:
        min_cooccur, cooccur_rule: the label set (:func:`biaslab.classify.select_labels`):
            objects that co-occur >= ``min_cooccur`` times with ``each`` gender / ``any``.
        epochs: the most epochs (early stopping on the validation loss, ``patience``).
        lr, batch_size, weight_decay: the optimiser's.
        val_fraction: the validation split, in [0, 1).
        hidden, dropout: the head's hidden widths (() = linear) and dropout.
        labelled_only: object targets only where the object set is annotated.
        finetune: train the backbone end to end from the images (paper tier).
        leakage_threshold: the object threshold of Leakage's inputs: a probability,
            ``"val_f1"`` (per object, the best validation F1) or None (no thresholds).
    """
    min_cooccur: int = 5            # paper: 100
    cooccur_rule: str = "each"      # each | any
    epochs: int = 60
    lr: float = 1e-3                # paper: 1e-5 (fine-tuning the whole backbone)
    batch_size: int = 32            # paper: 32
    patience: int = 5
    val_fraction: float = 0.2       # paper: 0.2
    hidden: tuple[int, ...] = ()
    dropout: float = 0.0
    weight_decay: float = 0.0
    labelled_only: bool = True
    finetune: bool = False
    leakage_threshold: float | str | None = 0.5

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden or ()))

    def config(self) -> dict[str, Any]:
        """The fields in order (``hidden`` as a list), as the saved config records them."""
        return {**asdict(self), "hidden": list(self.hidden)}


# --------------------------------------------------------------------------- model
def build_head(d: int, n_out: int, hidden: Sequence[int], dropout: float):
    """The classifier head on ``d``-dim features: standardisation buffers (``mean``, ``std``),
    an MLP with ``hidden`` widths and ``dropout``, ``n_out`` logits (a torch ``nn.Module``)."""
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.zeros(d))
            self.register_buffer("std", torch.ones(d))
            layers, k = [], d
            for h in hidden:
                layers += [nn.Linear(k, int(h)), nn.ReLU(), nn.Dropout(float(dropout))]
                k = int(h)
            layers.append(nn.Linear(k, n_out))
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net((x - self.mean) / self.std)

    return Head()


class GenderObjectClassifier:
    """Multi-label object + gender classifier (paper 000 appendix B.1) on backbone features.

    ``labels`` are the object names; outputs are ``labels + ["woman", "man"]`` (only
    ``labels`` for a method without gender outputs, ``config["method"] == "adversarial"``:
    :attr:`has_gender`). ``predict_proba(feats (n, d) float32) -> (n, |outputs|)`` sigmoid
    probabilities of the method's inference rule (:mod:`biaslab.classify.methods`; ERM: the
    head's outputs themselves); ``objects_proba`` / ``gender_proba`` slice it. For a
    fine-tuned model (``config["finetune"]``) features must come from :meth:`encode` (its own
    backbone).
    """

    def __init__(self, head, labels: Sequence[str], config: dict, backbone=None):
        from biaslab.classify.methods import get_method
        self.head = head.eval()
        self.labels = list(labels)
        self.config = dict(config)
        self.method = get_method(self.config.get("method", "erm"),
                                 self.config.get("method_params"))
        self.backbone = backbone          # fine-tuned encoder (ImageEncoder) or None
        thr = config.get("thresholds") or [0.5] * len(self.labels)
        self.thresholds = np.array([np.nan if t is None else t for t in thr], np.float64)

    @property
    def has_gender(self) -> bool:
        """Whether the model has ``woman`` / ``man`` outputs (not the adversarial model)."""
        return bool(self.method.gender_outputs)

    @property
    def outputs(self) -> list[str]:
        return [*self.labels, *(GENDER_OUTPUTS if self.has_gender else ())]

    def predict_proba(self, feats: np.ndarray, batch_size: int = 4096) -> np.ndarray:
        import torch
        x = np.asarray(feats, np.float32)
        if x.ndim != 2 or x.shape[1] != self.config["d_img"]:
            raise ValueError(f"features must be (n, {self.config['d_img']}), got {x.shape}")
        out = np.zeros((len(x), len(self.outputs)), np.float32)
        with torch.inference_mode():
            for s in range(0, len(x), batch_size):
                out[s:s + batch_size] = torch.sigmoid(self.method.logits(
                    self.head(torch.from_numpy(x[s:s + batch_size])))).numpy()
        return out

    def objects_proba(self, feats: np.ndarray) -> np.ndarray:
        return self.predict_proba(feats)[:, :len(self.labels)]

    def gender_proba(self, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(p_woman, p_man)`` float32 (n,) each. Raises ValueError for a model without
        gender outputs."""
        if not self.has_gender:
            raise ValueError(f"the {self.config.get('method')!r} classifier has no gender "
                             f"outputs")
        p = self.predict_proba(feats)
        return p[:, -2], p[:, -1]

    def encode(self, images: Sequence, batch_size: int = 32) -> np.ndarray:
        """Features of images (paths / PIL) with the model's backbone: the fine-tuned one, or
        the frozen ``config["backbone"]`` at ``config["image_size"]``."""
        if self.backbone is None:
            from biaslab.models.features import load_image_encoder
            self.backbone = load_image_encoder(self.config["backbone"],
                                               image_size=self.config.get("image_size"))
        return self.backbone.encode(list(images), batch_size=batch_size)

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``classifier_config.json`` (labels, outputs, config) and the head weights
        (safetensors); a fine-tuned backbone too."""
        from safetensors.torch import save_file
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        with atomic_path(d / WEIGHTS_FILE) as tmp:
            save_file({k: v.detach().cpu().contiguous()
                       for k, v in self.head.state_dict().items()}, str(tmp))
        if self.config.get("finetune") and self.backbone is not None:
            with atomic_path(d / BACKBONE_FILE) as tmp:
                save_file({k: v.detach().cpu().contiguous()
                           for k, v in self.backbone.model.state_dict().items()}, str(tmp))
        write_json(d / CONFIG_FILE, without_run_stats(
            {**self.config, "type": "gender_object_classifier", "labels": self.labels,
             "outputs": self.outputs, "thresholds": thr_list(self.thresholds)}))
        return d

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "GenderObjectClassifier":
        """Read a :meth:`save` directory. Raises ``InputError`` when it is not one."""
        from safetensors.torch import load_file
        d = Path(directory)
        if not ((d / CONFIG_FILE).is_file() and (d / WEIGHTS_FILE).is_file()):
            raise InputError(d, f"not a classifier directory (needs {CONFIG_FILE} and "
                                f"{WEIGHTS_FILE}; did train_classifier run?)")
        cfg = read_json(d / CONFIG_FILE)
        from biaslab.classify.methods import get_method
        n_raw = get_method(cfg.get("method", "erm"), cfg.get("method_params")).n_raw(
            len(cfg["labels"]))
        head = build_head(cfg["d_img"], n_raw, cfg.get("hidden", []), cfg.get("dropout", 0.0))
        head.load_state_dict(load_file(str(d / WEIGHTS_FILE)), strict=True)
        backbone = None
        if cfg.get("finetune"):
            from biaslab.models.features import load_image_encoder
            backbone = load_image_encoder(cfg["backbone"], image_size=cfg.get("image_size"))
            backbone.model.load_state_dict(load_file(str(d / BACKBONE_FILE)), strict=True)
            backbone.model.eval()
        return cls(head, cfg["labels"], cfg, backbone)


def thr_list(t) -> list:
    """Thresholds as a JSON-safe list (None for a non-finite one)."""
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(t, float)]
