"""Object predictor eta and object consistency (paper 000, sec. 2.3, Eq. 5):

    s_object(i, j, g') = F1[ eta(x_i^(j, g')), eta(x_i) ]  in [0, 1]

where eta(x) is the set of objects predicted in image x. The paper uses the Detic detector;
offline there are no detector weights, so the tiny tier's eta is a multi-label object classifier
(:class:`ObjectPredictor`): a linear logistic-regression head per category on frozen,
standardised image features (EfficientNet-Lite0, :mod:`biaslab.models.features`), trained full-batch
with binary cross-entropy plus a ridge penalty ``l2 * ||W||^2 / C`` (biases start at the
training log prior odds, so probabilities are calibrated from the first step) on the
training split's image-level object labels (``objects.parquet`` de-duplicated per
(image_id, category)). The paper tier is any Hugging Face detector
(:class:`HFObjectDetector`, ``AutoModelForObjectDetection``); both expose
``predict_sets(images) -> list[set[str]]``.

Label completeness: ``objects.parquet`` only lists objects of images whose object set is known
(in coco-mini: the official instance subset and ``image_labels.json``; every other image has
person boxes only). Training and evaluation therefore use *labelled images* = images with at
least one object row (``labelled_only=True``, the default); an image whose complete set is empty
cannot be told apart from an unlabelled one and is left out. With ``labelled_only=False`` every
image is used and a missing row means "absent" (right for the synthetic source, whose labels are
complete).

Thresholds: per category, the probability threshold that maximises F1 on the validation split
(:func:`best_f1_thresholds`: midway between the two validation scores around the best cut); a
category with fewer than ``min_val_pos`` validation positives keeps 0.5. ``threshold: 0.5`` (a
number) uses that value for every category instead.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from biaslab.models.features import DEFAULT_IMAGE_ENCODER, load_image_encoder, save_safetensors
from biaslab.models.settings import ObjectsSettings
from biaslab.runtime.io import InputError, read_json, write_json

CONFIG_FILE = "objects_config.json"
WEIGHTS_FILE = "objects_head.safetensors"



# --------------------------------------------------------------------------- Eq. 5
def object_f1(pred: Iterable[str], ref: Iterable[str]) -> float:
    """F1 between two predicted object sets (paper 000 Eq. 5), symmetric in its arguments:
    ``2 |A & B| / (|A| + |B|)`` (precision/recall F1 with one set as reference).

    Empty cases: both empty -> 1.0 (nothing added, nothing removed: the scene is preserved);
    exactly one empty -> 0.0 (precision or recall is 0).
    """
    a, b = set(pred), set(ref)
    if not a and not b:
        return 1.0
    return 2.0 * len(a & b) / (len(a) + len(b))


def mean_average_precision(y_true: np.ndarray, scores: np.ndarray) -> tuple[float, np.ndarray]:
    """Macro mean of scikit-learn ``average_precision_score`` over the classes (columns) that
    have at least one positive in ``y_true`` (AP is undefined without positives).
    Returns ``(mAP, per_class_AP)`` with NaN for the skipped classes; mAP is NaN if none."""
    from sklearn.metrics import average_precision_score
    y = np.asarray(y_true).astype(bool)
    s = np.asarray(scores, float)
    ap = np.full(y.shape[1], np.nan)
    for c in range(y.shape[1]):
        if y[:, c].any():
            ap[c] = average_precision_score(y[:, c], s[:, c])
    return (float(np.nanmean(ap)) if np.isfinite(ap).any() else float("nan")), ap


# --------------------------------------------------------------------------- labels
def object_label_matrix(objects: pd.DataFrame, image_ids: Sequence[int],
                        categories: Sequence[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """(n_images, n_categories) bool presence matrix from ``objects.parquet`` rows
    (de-duplicated per (image_id, category)); rows follow ``image_ids``. ``categories``
    defaults to all categories present, sorted."""
    for col in ("image_id", "category"):
        if col not in objects.columns:
            raise InputError("objects", f"missing column {col!r}")
    obj = objects.drop_duplicates(["image_id", "category"])
    cats = sorted(obj["category"].unique()) if categories is None else list(categories)
    col = {c: k for k, c in enumerate(cats)}
    row = {int(i): k for k, i in enumerate(image_ids)}
    y = np.zeros((len(row), len(cats)), bool)
    for i, c in zip(obj["image_id"], obj["category"]):
        if int(i) in row and c in col:
            y[row[int(i)], col[c]] = True
    return y, cats


def frequent_categories(objects: pd.DataFrame, train_ids: Iterable[int], min_count: int
                        ) -> list[str]:
    """Categories with >= ``min_count`` distinct positive training images, sorted by name."""
    obj = objects.drop_duplicates(["image_id", "category"])
    obj = obj[obj["image_id"].isin(set(int(i) for i in train_ids))]
    counts = obj["category"].value_counts()
    return sorted(counts[counts >= int(min_count)].index)


def best_f1_thresholds(y: np.ndarray, p: np.ndarray, min_pos: int = 1,
                       default: float = 0.5) -> np.ndarray:
    """Per column, the threshold t (predict ``p >= t``) maximising F1 on (y, p): the best cut
    between consecutive distinct observed scores (ties -> the higher cut), placed midway
    between the lowest included and the next lower score; columns with fewer than ``min_pos``
    positives get ``default``."""
    y = np.asarray(y, bool)
    out = np.full(y.shape[1], float(default))
    for c in range(y.shape[1]):
        pos = int(y[:, c].sum())
        if pos < max(1, min_pos):
            continue
        order = np.argsort(-p[:, c], kind="stable")
        s, t = p[order, c], y[order, c]
        tp = np.cumsum(t)
        k = np.arange(1, len(s) + 1)
        f1 = 2 * tp / (k + pos)
        # only cut between distinct scores (predict all with score >= s[k-1])
        last = np.r_[s[1:] != s[:-1], True]
        f1 = np.where(last, f1, -1)
        k = int(np.argmax(f1))
        # midway to the next lower score: the same F1 here, less brittle on new data
        out[c] = float((s[k] + s[k + 1]) / 2) if k + 1 < len(s) else float(s[k])
    return out


# --------------------------------------------------------------------------- offline predictor
def _linear_head(d: int, c: int):
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.zeros(d))
            self.register_buffer("std", torch.ones(d))
            self.linear = nn.Linear(d, c)

        def forward(self, x):
            return self.linear((x - self.mean) / self.std)

    return Head()


class ObjectPredictor:
    """Multi-label object classifier on frozen image features (offline eta of Eq. 5).

    ``predict_proba(images_or_feats) -> (n, C)``; ``predict_sets(...) -> list[set[str]]``
    (categories whose probability >= their threshold). Inputs: a float ``np.ndarray``
    (n, d) of backbone features, or image paths / PIL images (encoded with the stored
    backbone, loaded lazily).
    """

    #: ``predict_sets`` takes precomputed backbone features (n, d_img) as well as images.
    accepts_features = True

    def __init__(self, head, categories: Sequence[str], thresholds: np.ndarray, config: dict,
                 device: str = "cpu"):
        self.head = head.eval().to(device)
        self.categories = list(categories)
        self.thresholds = np.asarray(thresholds, np.float64)
        self.config = dict(config)
        self.device = device
        self._encoder = None

    def features(self, images) -> np.ndarray:
        if isinstance(images, np.ndarray) and images.dtype.kind == "f":
            return images.astype(np.float32, copy=False)
        images = list(images)
        if self._encoder is None:
            self._encoder = load_image_encoder(self.config["image_encoder"], self.device,
                                               self.config.get("image_size"))
        if not images:
            return np.zeros((0, self.config["d_img"]), np.float32)
        return self._encoder.encode(images)

    def predict_proba(self, images) -> np.ndarray:
        import torch
        x = self.features(images)
        if x.ndim != 2 or x.shape[1] != self.config["d_img"]:
            raise ValueError(f"features must be (n, {self.config['d_img']}), got {x.shape}")
        with torch.inference_mode():
            return torch.sigmoid(self.head(torch.from_numpy(x).to(self.device))).cpu().numpy()

    def predict_sets(self, images) -> list[set[str]]:
        p = self.predict_proba(images)
        return [{self.categories[c] for c in np.flatnonzero(row >= self.thresholds)}
                for row in p]

    def save(self, directory: str | os.PathLike) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        save_safetensors(self.head.state_dict(), d / WEIGHTS_FILE)
        write_json(d / CONFIG_FILE, {**self.config, "type": "object_predictor",
                                     "categories": self.categories,
                                     "thresholds": [float(t) for t in self.thresholds]})
        return d

    @classmethod
    def load(cls, directory: str | os.PathLike, device: str = "cpu") -> "ObjectPredictor":
        from safetensors.torch import load_file
        d = Path(directory)
        if not ((d / CONFIG_FILE).is_file() and (d / WEIGHTS_FILE).is_file()):
            raise InputError(d, f"not an object predictor directory (needs {CONFIG_FILE} "
                                f"and {WEIGHTS_FILE})")
        cfg = read_json(d / CONFIG_FILE)
        head = _linear_head(cfg["d_img"], len(cfg["categories"]))
        head.load_state_dict(load_file(str(d / WEIGHTS_FILE)), strict=True)
        return cls(head, cfg["categories"], np.asarray(cfg["thresholds"]), cfg, device)


def train_object_predictor(feats: np.ndarray, labels: np.ndarray, categories: Sequence[str],
                           train_rows: np.ndarray, val_rows: np.ndarray | None = None, *,
                           settings: ObjectsSettings | None = None,
                           image_encoder: str = DEFAULT_IMAGE_ENCODER,
                           image_size: int | None = 224,
                           on_epoch=None) -> tuple[ObjectPredictor, list[dict]]:
    """Fit the per-category logistic heads (full-batch AdamW on BCE + ridge penalty, features
    standardised with training mean/std); keep the checkpoint (every 5 epochs) with the lowest
    validation BCE (or the last when there is no validation split); pick thresholds (module
    docstring).

    Args:
        feats: (n, d) float image features; labels: (n, C) bool; rows indexed by
            ``train_rows`` / ``val_rows``.
        settings: :class:`biaslab.models.settings.ObjectsSettings` (None: its defaults;
            the stage's from params ``objects``).
    Returns ``(predictor, history)``, history = ``{epoch, loss (training objective incl.
    penalty), val_loss (BCE)}`` every 5 epochs and at the end.
    """
    import torch
    s = ObjectsSettings() if settings is None else settings
    feats = np.asarray(feats, np.float32)
    labels = np.asarray(labels, bool)
    if labels.shape != (len(feats), len(categories)):
        raise ValueError(f"labels {labels.shape} != (n_images={len(feats)}, "
                         f"n_categories={len(categories)})")
    train_rows = np.asarray(train_rows, np.int64)
    if len(train_rows) == 0 or len(categories) == 0:
        raise ValueError("no training images or no categories (lower objects.min_count?)")
    torch.manual_seed(int(s.seed))
    head = _linear_head(feats.shape[1], len(categories))
    X, Y = torch.from_numpy(feats[train_rows]), torch.from_numpy(labels[train_rows]).float()
    head.mean.copy_(X.mean(0))
    sd = X.std(0)   # floor: a dimension (nearly) constant in training must not explode later
    head.std.copy_(sd.clamp_min(0.1 * float(sd.mean()) + 1e-6))
    with torch.no_grad():   # start at the training prior: calibrated from step 0
        prior = Y.mean(0).clamp(1e-4, 1 - 1e-4)
        head.linear.bias.copy_(torch.log(prior / (1 - prior)))
        head.linear.weight.mul_(0.1)
    has_val = val_rows is not None and len(val_rows) > 0
    if has_val:
        Xv = torch.from_numpy(feats[val_rows])
        Yv = torch.from_numpy(labels[val_rows]).float()
    opt = torch.optim.AdamW(head.parameters(), lr=float(s.lr),
                            weight_decay=float(s.weight_decay))
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    l2 = float(s.l2)
    history, best, best_state = [], float("inf"), None
    for epoch in range(int(s.epochs)):
        head.train()
        loss = bce(head(X), Y)
        if l2 > 0:   # ridge penalty (logistic regression with C = 1 / (2 * l2 * n))
            loss = loss + l2 * head.linear.weight.pow(2).sum() / len(categories)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if epoch % 5 == 4 or epoch == int(s.epochs) - 1:
            rec = {"epoch": epoch, "loss": float(loss.detach())}
            if has_val:
                head.eval()
                with torch.inference_mode():
                    rec["val_loss"] = float(bce(head(Xv), Yv))
                if rec["val_loss"] < best:
                    best = rec["val_loss"]
                    best_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
            history.append(rec)
            if on_epoch is not None:
                on_epoch(epoch, rec)
    if best_state is not None:
        head.load_state_dict(best_state)
    head.eval()
    config = {"image_encoder": image_encoder, "image_size": image_size,
              "d_img": int(feats.shape[1]), **s.config()}
    pred = ObjectPredictor(head, categories, np.full(len(categories), 0.5), config)
    if s.threshold == "val_f1":
        if has_val:
            pred.thresholds = best_f1_thresholds(labels[val_rows], pred.predict_proba(
                feats[val_rows]), min_pos=int(s.min_val_pos))
    else:
        pred.thresholds = np.full(len(categories), float(s.threshold))
    return pred, history


# --------------------------------------------------------------------------- paper tier
class HFObjectDetector:
    """Hugging Face object detector (paper tier eta; e.g. ``facebook/detr-resnet-50``,
    ``hustvl/yolos-tiny``; the paper uses Detic, which is not in transformers) with the same
    ``predict_sets(images)`` interface: the set of ``id2label`` names of detections with
    score >= ``threshold`` (``post_process_object_detection``), minus ``exclude`` (default
    ``person``: the inpainted region, and ``objects.parquet`` has no person rows)."""

    def __init__(self, name_or_dir: str, device: str = "cpu", threshold: float = 0.5,
                 exclude: Iterable[str] = ("person",), batch_size: int = 8):
        from transformers import AutoImageProcessor, AutoModelForObjectDetection
        self.processor = AutoImageProcessor.from_pretrained(name_or_dir)
        self.model = AutoModelForObjectDetection.from_pretrained(name_or_dir).eval().to(device)
        self.device = device
        self.threshold = float(threshold)
        self.exclude = set(exclude)
        self.batch_size = int(batch_size)

    def predict_sets(self, images) -> list[set[str]]:
        import torch

        from biaslab.models.encoders import open_rgb
        images = list(images)
        id2label = self.model.config.id2label
        out: list[set[str]] = []
        for s in range(0, len(images), self.batch_size):
            ims = [open_rgb(im) for im in images[s:s + self.batch_size]]
            inp = self.processor(images=ims, return_tensors="pt").to(self.device)
            with torch.inference_mode():
                res = self.model(**inp)
            sizes = torch.tensor([[im.height, im.width] for im in ims])
            dets = self.processor.post_process_object_detection(
                res, threshold=self.threshold, target_sizes=sizes)
            for d in dets:
                names = {str(id2label.get(int(k), int(k))) for k in d["labels"].tolist()}
                out.append(names - self.exclude)
        return out


def load_object_predictor(name_or_dir: str | os.PathLike, device: str = "cpu", **kwargs):
    """:class:`ObjectPredictor` for a local directory written by ``ObjectPredictor.save``,
    else :class:`HFObjectDetector` (``kwargs``: threshold, exclude, batch_size)."""
    d = Path(name_or_dir)
    if (d / CONFIG_FILE).is_file():
        return ObjectPredictor.load(d, device=device)
    return HFObjectDetector(str(name_or_dir), device=device, **kwargs)


__all__ = ["object_f1", "mean_average_precision", "object_label_matrix", "frequent_categories",
           "best_f1_thresholds", "ObjectPredictor", "train_object_predictor", "HFObjectDetector",
           "load_object_predictor"]
