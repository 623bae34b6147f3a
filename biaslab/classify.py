"""Multi-label classification of objects and gender, and its bias metrics (Hirota et al.,
"Resampled Datasets Are Not Enough", EMNLP 2024 -- paper 000 -- sec. 3.1, Table 1, appendix
B.1, Eq. 7).

Task (appendix B.1). The label space is the objects that co-occur with the gender groups in the
ORIGINAL training set (paper: "attributes co-occurring with woman or man more than 100 times",
51 COCO objects), person-related classes excluded (``objects.parquet`` has no ``person``), plus
the two protected-group outputs ``woman`` and ``man`` ("the classification layers predict both
protected groups and object classes"). :func:`select_labels` keeps an object when it co-occurs
with EACH group at least ``min_cooccur`` times (``rule="each"``; ``rule="any"``: with at least
one group) -- the paper's wording is ambiguous between the two; "each" is the rule of Zhao et
al. 2017 that the paper cites, and the only one under which Leakage can be estimated for every
object. Paper value 100 (``> 100`` in the text; we use ``>=``); scaled down for small data.

Model. The paper fine-tunes ImageNet backbones (ResNet-50, Swin-T, ConvNeXt-B) with Adam, batch
32, lr 1e-5, early stopping on a validation split of 20 % of the training set. The offline
default here is a head on *frozen* backbone features (``finetune: false``; EfficientNet-Lite0,
:mod:`biaslab.features`): features standardised with the training mean/std, then ``hidden``
``Linear -> ReLU -> Dropout`` layers (``[]``: a linear layer, the paper's classification
layer) and ``Linear(|O| + 2)``; one sigmoid per output, trained with binary cross-entropy,
Adam, mini-batches of ``batch_size``, at most ``epochs`` epochs, early stopping when the
validation loss has not improved for ``patience`` epochs (the best epoch's weights are kept).
A frozen backbone needs a larger lr than fine-tuning (ci: 1e-3). ``finetune: true`` (paper
tier) trains the backbone end to end from the images (:func:`train_finetune`): slow on CPU.

Validation split (:func:`validation_split`): 20 % of the training manifest's *source images*
(``image_id``), drawn with ``numpy.random.default_rng(seed)``; every row of an image (an
over-sampled copy, a counterfactual of it) falls on the same side, so no copy of a validation
image is trained on.

Label completeness (``labelled_only``, default True): in COCO-layout data an image without any
object row may be unlabelled rather than empty (coco-mini: only ~1.6k images have complete
object sets). Such rows still train the gender outputs but their object outputs are masked out
of the loss, and evaluation uses only labelled images for mAP and Leakage. The synthetic source
has complete labels (an image without objects is rare), so this changes little there.

Metrics (sec. 3.1):

* mAP: macro mean of scikit-learn ``average_precision_score`` over the object labels with at
  least one positive in the test images (:func:`biaslab.objects.mean_average_precision`).
* Ratio: persons are blacked out of the test images (:func:`blackout_persons`), features are
  re-extracted and the gender outputs compared: ``r = #man / #woman`` predictions
  (:func:`biaslab.metrics.captions.classification_ratio`), counted the way a multi-label
  classifier predicts: each gender output is a prediction where it is at or above its
  threshold (:func:`gender_thresholds`: 0.5 unless the model stores validation-tuned ones);
  an image with both outputs on counts for both, one with neither for none (``n_both``,
  ``n_neither`` reported). Reported as ``max(r, 1/r)``; r = 0 or inf gives an infinite
  Ratio, which the seed summary counts and keeps (``biaslab.stats``). The paper does not say
  how persons are masked; the pipeline default blacks out whole person BOXES: a blacked-out
  polygon or keypoint silhouette keeps the body outline, which still shows gender (measured
  on the synthetic source, where gender is drawn only through body shape: a classifier
  trained without any planted bias reads gender from polygon-masked images with AUC 81-84 %,
  from box-masked ones with AUC ~50 %).
* Leakage: ``LK_M - LK_D`` (Eq. 7, x100; :func:`biaslab.metrics.leakage.leakage`). The
  attackers are trained on the TRAINING images (paper 000 sec. 3.1: f "is trained on a
  training set T"; Wang et al. 2019): LK_D's on their ground-truth objects, LK_M's on the
  model's object predictions for them, and both are scored on the labelled test images
  (ground truth / the model's predictions). The predictions are binarised at
  ``leakage_threshold`` (a number, ``"val_f1"`` = per-object thresholds maximising F1 on the
  validation split, or None = the predicted probabilities themselves, as the code of Wang et
  al. 2019 feeds its attacker the logits; :func:`object_predictions`).
* Diagnostics (not in the paper): ``masked_gender_auc`` = ROC AUC of ``p_man - p_woman`` on
  the masked images, i.e. how much gender the context alone gives away. Unlike Ratio it does
  not move with a constant offset of the gender decision.

What the metrics can and cannot see (measured on the synthetic source, 300 images per bias
level, 2 seeds, attackers trained on the training images, Ratio from thresholded outputs;
tests/test_classify.py): with a planted bias of 0.9 vs 0, the masked-image gender AUC rises
from ~49 to ~75-89 and LK_M/LK_D from ~33-51 to ~93-96, but Leakage (``LK_M - LK_D``) does NOT
rise (+15..+18 at bias 0, -3..-2 at bias 0.9: LK_D saturates near its ceiling and the model's
object errors lower LK_M), and Ratio FALLS (the man output is on and the woman output off for
every masked image, r = inf, at bias 0; 6-29 at bias 0.9). Ratio needs a gender imbalance to
read context bias: on a gender-balanced test set a model that reads gender from the context
splits its calls about evenly (r ~ 1), while a model that cannot read gender from a masked
image makes one constant call for all of them (r -> 0 or inf). COCO's test set is 2.3 : 1 men :
women; the synthetic source is balanced.

Determinism: given ``seed`` (validation split, initialisation, batch order) and one torch thread
the trained weights are bitwise reproducible on CPU.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from biaslab.io import InputError, atomic_path, read_json, without_run_stats, write_json

#: Output names of the protected groups (appendix B.1), in this order after the objects.
GENDER_OUTPUTS = ("woman", "man")
#: manifest gender -> output name.
GENDER_OF = {"female": "woman", "male": "man"}
CONFIG_FILE = "classifier_config.json"
WEIGHTS_FILE = "classifier_head.safetensors"
BACKBONE_FILE = "classifier_backbone.safetensors"

#: Training defaults (params.yaml ``classifier``); ci values, paper values in comments.
DEFAULTS = {
    "min_cooccur": 5,         # paper: 100
    "cooccur_rule": "each",   # each | any
    "epochs": 60,             # max epochs (early stopping)
    "lr": 1e-3,               # paper: 1e-5 (fine-tuning the whole backbone)
    "batch_size": 32,         # paper: 32
    "patience": 5,
    "val_fraction": 0.2,      # paper: 0.2
    "hidden": [],             # [] = linear head
    "dropout": 0.0,
    "weight_decay": 0.0,
    "labelled_only": True,
    "finetune": False,
    "leakage_threshold": 0.5,
}


# --------------------------------------------------------------------------- labels
def select_labels(manifest: pd.DataFrame, min_cooccur: int, rule: str = "each",
                  groups: Sequence[str] = ("female", "male")) -> list[str]:
    """Object labels of the classifier (paper 000 appendix B.1): objects that co-occur with
    each group (``rule="each"``) or with at least one group (``rule="any"``) in at least
    ``min_cooccur`` manifest rows. Counts are over rows (= images for the original manifest),
    an object counted once per row. Returns the names sorted.

    Raises:
        InputError: the manifest lacks ``gender`` / ``objects``; ValueError: unknown rule.
    """
    for col in ("gender", "objects"):
        if col not in manifest.columns:
            raise InputError("manifest", f"missing column {col!r}")
    if rule not in ("each", "any"):
        raise ValueError(f"cooccur_rule must be 'each' or 'any', got {rule!r}")
    counts: dict[str, dict[str, int]] = {}
    for g, objs in zip(manifest["gender"], manifest["objects"]):
        if g not in groups:
            continue
        for o in set(objs if objs is not None else ()):
            counts.setdefault(o, dict.fromkeys(groups, 0))[g] += 1
    agg = min if rule == "each" else max
    return sorted(o for o, c in counts.items() if agg(c.values()) >= int(min_cooccur))


def label_targets(manifest: pd.DataFrame, labels: Sequence[str], labelled_only: bool = True
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Targets and loss mask for a manifest.

    Returns:
        ``(y, mask)``: float32 (n, |labels| + 2) with the object presences then ``woman``,
        ``man`` (1 for the row's gender); mask float32 of the same shape, 0 for the object
        outputs of rows without any object (when ``labelled_only``) and for the gender outputs
        of rows whose gender is not female/male.
    """
    idx = {c: k for k, c in enumerate(labels)}
    n, c = len(manifest), len(labels)
    y = np.zeros((n, c + 2), np.float32)
    mask = np.ones((n, c + 2), np.float32)
    for r, (g, objs) in enumerate(zip(manifest["gender"], manifest["objects"])):
        objs = list(objs) if objs is not None else []
        for o in objs:
            if o in idx:
                y[r, idx[o]] = 1.0
        if labelled_only and not objs:
            mask[r, :c] = 0.0
        if g in GENDER_OF:
            y[r, c + GENDER_OUTPUTS.index(GENDER_OF[g])] = 1.0
        else:
            mask[r, c:] = 0.0
    return y, mask


def validation_split(manifest: pd.DataFrame, val_fraction: float, seed: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Row positions ``(train, val)``: ``round(val_fraction * #images)`` source images
    (distinct ``image_id``, sorted, permuted with ``default_rng(seed)``) and all their rows go
    to validation (at least one image when ``val_fraction > 0`` and there are >= 2 images)."""
    if not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    ids = np.sort(manifest["image_id"].astype(np.int64).unique())
    n_val = int(round(val_fraction * len(ids)))
    if val_fraction > 0 and len(ids) >= 2:
        n_val = min(max(n_val, 1), len(ids) - 1)
    perm = np.random.default_rng(int(seed)).permutation(len(ids))
    val_ids = set(ids[perm[:n_val]].tolist())
    is_val = manifest["image_id"].astype(np.int64).isin(val_ids).to_numpy()
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


# --------------------------------------------------------------------------- features
def file_id(path: str | os.PathLike) -> int:
    """A content id of an image file: the first 63 bits of its
    :func:`biaslab.features.file_digest`, so identical files share one cache row.
    Raises ``InputError`` naming a missing or unreadable file."""
    from biaslab.features import file_digest
    return int(file_digest(path)[:16], 16) >> 1


def encode_files(paths: Sequence[str], cache_dir: str | os.PathLike, backbone: str, *,
                 image_size: int | None = None, batch_size: int = 32,
                 num_threads: int | None = None, encoder=None,
                 stats: dict | None = None) -> np.ndarray:
    """Backbone features of image files (float32 (n, d), rows in input order) through
    :func:`biaslab.features.encode_cached`, keyed by (:func:`file_id`, path): derived images
    (counterfactuals, blacked-out or inpainted test images) are encoded once per content."""
    from biaslab.features import encode_cached
    paths = [str(p) for p in paths]
    if not paths:
        return np.zeros((0, encoder.dim if encoder is not None else 0), np.float32)
    ids = [file_id(p) for p in paths]
    table = pd.DataFrame({"image_id": ids, "path": paths}).drop_duplicates("image_id")
    uid, feats = encode_cached(table, cache_dir, backbone, encoder=encoder,
                               image_size=image_size, batch_size=batch_size,
                               num_threads=num_threads, stats=stats)
    row = {int(i): k for k, i in enumerate(uid)}
    return feats[[row[i] for i in ids]]


def manifest_features(manifest: pd.DataFrame, base_ids: np.ndarray, base_feats: np.ndarray,
                      cache_dir: str | os.PathLike, backbone: str, *,
                      image_size: int | None = None, batch_size: int = 32,
                      num_threads: int | None = None, encoder=None, stats: dict | None = None
                      ) -> np.ndarray:
    """Features (float32 (n, d)) of every manifest row: non-counterfactual rows whose
    ``image_id`` is in ``base_ids`` (the pipeline's ``data/features``) take those rows; the
    others (counterfactual images, or images missing from the base) are encoded from their
    ``path`` with :func:`encode_files`."""
    base_row = {int(i): k for k, i in enumerate(np.asarray(base_ids, np.int64))}
    cf = manifest["counterfactual"].fillna(False).astype(bool).to_numpy() \
        if "counterfactual" in manifest.columns else np.zeros(len(manifest), bool)
    iid = manifest["image_id"].astype(np.int64).to_numpy()
    from_base = np.array([not c and int(i) in base_row for c, i in zip(cf, iid)], bool)
    d = base_feats.shape[1] if len(base_feats) else None
    other = np.flatnonzero(~from_base)
    enc = None
    if len(other):
        enc = encode_files(manifest["path"].iloc[other].tolist(), cache_dir, backbone,
                           image_size=image_size, batch_size=batch_size,
                           num_threads=num_threads, encoder=encoder, stats=stats)
        d = enc.shape[1]
    out = np.zeros((len(manifest), d or 0), np.float32)
    if from_base.any():
        out[from_base] = base_feats[[base_row[int(i)] for i in iid[from_base]]]
    if enc is not None:
        if base_feats is not None and len(base_feats) and enc.shape[1] != base_feats.shape[1]:
            raise InputError("features", f"encoded width {enc.shape[1]} differs from the base "
                                         f"features' {base_feats.shape[1]} (backbone mismatch)")
        out[other] = enc
    return out


# --------------------------------------------------------------------------- model
def _head(d: int, n_out: int, hidden: Sequence[int], dropout: float):
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

    ``labels`` are the object names; outputs are ``labels + ["woman", "man"]``.
    ``predict_proba(feats (n, d) float32) -> (n, |labels| + 2)`` sigmoid probabilities;
    ``objects_proba`` / ``gender_proba`` slice it. For a fine-tuned model (``config
    ["finetune"]``) features must come from :meth:`encode` (its own backbone).
    """

    def __init__(self, head, labels: Sequence[str], config: dict, backbone=None):
        self.head = head.eval()
        self.labels = list(labels)
        self.config = dict(config)
        self.backbone = backbone          # fine-tuned encoder (ImageEncoder) or None
        thr = config.get("thresholds") or [0.5] * len(self.labels)
        self.thresholds = np.array([np.nan if t is None else t for t in thr], np.float64)

    @property
    def outputs(self) -> list[str]:
        return [*self.labels, *GENDER_OUTPUTS]

    def predict_proba(self, feats: np.ndarray, batch_size: int = 4096) -> np.ndarray:
        import torch
        x = np.asarray(feats, np.float32)
        if x.ndim != 2 or x.shape[1] != self.config["d_img"]:
            raise ValueError(f"features must be (n, {self.config['d_img']}), got {x.shape}")
        out = np.zeros((len(x), len(self.outputs)), np.float32)
        with torch.inference_mode():
            for s in range(0, len(x), batch_size):
                out[s:s + batch_size] = torch.sigmoid(
                    self.head(torch.from_numpy(x[s:s + batch_size]))).numpy()
        return out

    def objects_proba(self, feats: np.ndarray) -> np.ndarray:
        return self.predict_proba(feats)[:, :len(self.labels)]

    def gender_proba(self, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(p_woman, p_man)`` float32 (n,) each."""
        p = self.predict_proba(feats)
        return p[:, -2], p[:, -1]

    def encode(self, images: Sequence, batch_size: int = 32) -> np.ndarray:
        """Features of images (paths / PIL) with the model's backbone: the fine-tuned one, or
        the frozen ``config["backbone"]`` at ``config["image_size"]``."""
        if self.backbone is None:
            from biaslab.features import load_image_encoder
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
             "outputs": self.outputs, "thresholds": _thr_list(self.thresholds)}))
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
        head = _head(cfg["d_img"], len(cfg["labels"]) + 2, cfg.get("hidden", []),
                     cfg.get("dropout", 0.0))
        head.load_state_dict(load_file(str(d / WEIGHTS_FILE)), strict=True)
        backbone = None
        if cfg.get("finetune"):
            from biaslab.features import load_image_encoder
            backbone = load_image_encoder(cfg["backbone"], image_size=cfg.get("image_size"))
            backbone.model.load_state_dict(load_file(str(d / BACKBONE_FILE)), strict=True)
            backbone.model.eval()
        return cls(head, cfg["labels"], cfg, backbone)


def _masked_bce(logits, y, m):
    import torch
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="none")
    return (loss * m).sum() / m.sum().clamp_min(1.0)


def _val_map(y: np.ndarray, m: np.ndarray, p: np.ndarray, n_obj: int) -> float:
    from biaslab.objects import mean_average_precision
    rows = m[:, :n_obj].any(1) if n_obj else np.zeros(len(y), bool)
    if not rows.any() or n_obj == 0:
        return float("nan")
    return mean_average_precision(y[rows, :n_obj], p[rows, :n_obj])[0]


def train_classifier(feats: np.ndarray, manifest: pd.DataFrame, labels: Sequence[str], *,
                     seed: int = 0, params: dict | None = None, backbone: str = "",
                     image_size: int | None = None,
                     on_epoch: Callable[[int, dict], None] | None = None
                     ) -> tuple[GenderObjectClassifier, list[dict]]:
    """Train the head on frozen features (module docstring; paper 000 appendix B.1).

    Args:
        feats: float32 (n, d) features of the manifest rows (:func:`manifest_features`).
        manifest: the training manifest (``biaslab.datasets``), n rows.
        labels: object labels (:func:`select_labels` on the ORIGINAL manifest).
        seed: validation split, initialisation and batch-order seed.
        params: overrides of :data:`DEFAULTS` (epochs, lr, batch_size, patience, val_fraction,
            hidden, dropout, weight_decay, labelled_only, leakage_threshold).
        backbone, image_size: recorded in the config (what produced ``feats``).
        on_epoch: called ``on_epoch(epoch, record)`` after every epoch (DVCLive hook).

    Returns:
        ``(classifier, history)``; history: one dict per epoch with ``epoch``, ``train_loss``
        (mean masked BCE over the epoch's batches), and with a validation split ``val_loss``,
        ``val_mAP`` (objects), ``val_gender_acc`` (%). The config records ``best_epoch``,
        ``epochs_run``, ``n_train``, ``n_val``, ``seed`` and per-object ``thresholds``
        (validation-F1 ones when ``leakage_threshold == "val_f1"``, else the number).

    Raises:
        ValueError: feats and manifest differ in length, or nothing to train on.
    """
    import torch
    p = {**DEFAULTS, **(params or {})}
    feats = np.asarray(feats, np.float32)
    if len(feats) != len(manifest):
        raise ValueError(f"{len(feats)} feature rows for {len(manifest)} manifest rows")
    if len(manifest) < 2:
        raise ValueError("need at least 2 training rows")
    manifest = manifest.reset_index(drop=True)
    labels = list(labels)
    n_obj = len(labels)
    y, m = label_targets(manifest, labels, bool(p["labelled_only"]))
    tr, va = validation_split(manifest, float(p["val_fraction"]), int(seed))
    has_val = len(va) > 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        head = _head(feats.shape[1], n_obj + 2, list(p["hidden"]), float(p["dropout"]))
        X = torch.from_numpy(feats[tr])
        Y, M = torch.from_numpy(y[tr]), torch.from_numpy(m[tr])
        head.mean.copy_(X.mean(0))
        sd = X.std(0) if len(tr) > 1 else torch.ones(X.shape[1])
        head.std.copy_(sd.clamp_min(0.1 * float(sd.mean()) + 1e-6))
        with torch.no_grad():   # output biases at the training log prior odds
            prior = ((Y * M).sum(0) / M.sum(0).clamp_min(1)).clamp(1e-3, 1 - 1e-3)
            last = head.net[-1]
            last.bias.copy_(torch.log(prior / (1 - prior)))
        opt = torch.optim.Adam(head.parameters(), lr=float(p["lr"]),
                               weight_decay=float(p["weight_decay"]))
        gen = torch.Generator().manual_seed(int(seed))
        bs = max(int(p["batch_size"]), 1)
        if has_val:
            Xv = torch.from_numpy(feats[va])
            Yv, Mv = torch.from_numpy(y[va]), torch.from_numpy(m[va])
        history, best, best_state, best_epoch, bad = [], math.inf, None, -1, 0
        for epoch in range(int(p["epochs"])):
            head.train()
            perm = torch.randperm(len(tr), generator=gen)
            total, seen = 0.0, 0
            for s in range(0, len(tr), bs):
                idx = perm[s:s + bs]
                loss = _masked_bce(head(X[idx]), Y[idx], M[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
                seen += len(idx)
            rec = {"epoch": epoch, "train_loss": total / max(seen, 1)}
            if has_val:
                head.eval()
                with torch.inference_mode():
                    lv = head(Xv)
                    rec["val_loss"] = float(_masked_bce(lv, Yv, Mv))
                    pv = torch.sigmoid(lv).numpy()
                rec["val_mAP"] = _val_map(y[va], m[va], pv, n_obj)
                rec["val_gender_acc"] = _gender_acc(y[va], m[va], pv)
                if rec["val_loss"] < best - 1e-7:
                    best, best_epoch, bad = rec["val_loss"], epoch, 0
                    best_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
                else:
                    bad += 1
            history.append(rec)
            if on_epoch is not None:
                on_epoch(epoch, rec)
            if has_val and bad >= int(p["patience"]):
                break
        if best_state is not None:
            head.load_state_dict(best_state)
        head.eval()
    config = {"backbone": str(backbone), "image_size": image_size, "d_img": int(feats.shape[1]),
              "seed": int(seed), "finetune": False,
              **{k: p[k] for k in DEFAULTS if k not in ("finetune",)},
              "best_epoch": int(best_epoch if has_val else len(history) - 1),
              "epochs_run": len(history), "n_train": int(len(tr)), "n_val": int(len(va))}
    clf = GenderObjectClassifier(head, labels, config)
    clf.thresholds = _thresholds(clf, p, feats[va] if has_val else None,
                                 y[va] if has_val else None, m[va] if has_val else None)
    clf.config["thresholds"] = _thr_list(clf.thresholds)
    return clf, history


def _thr_list(t) -> list:
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(t, float)]


def _gender_acc(y: np.ndarray, m: np.ndarray, p: np.ndarray) -> float:
    """% of rows with a gender whose larger gender output is the true one."""
    rows = m[:, -1] > 0
    if not rows.any():
        return float("nan")
    pred_man = p[rows, -1] > p[rows, -2]
    return float(100.0 * np.mean(pred_man == (y[rows, -1] > 0)))


def _thresholds(clf, p, fv, yv, mv) -> np.ndarray:
    n_obj = len(clf.labels)
    t = p.get("leakage_threshold", 0.5)
    if t is None:
        return np.full(n_obj, np.nan)
    if t == "val_f1":
        from biaslab.objects import best_f1_thresholds
        if fv is None or not len(fv):
            return np.full(n_obj, 0.5)
        rows = mv[:, :n_obj].any(1)
        return best_f1_thresholds(yv[rows, :n_obj], clf.objects_proba(fv[rows]), min_pos=2)
    return np.full(n_obj, float(t))


# --------------------------------------------------------------------------- fine-tuning
def train_finetune(manifest: pd.DataFrame, labels: Sequence[str], *, backbone: str,
                   image_size: int | None = None, seed: int = 0, params: dict | None = None,
                   on_epoch: Callable[[int, dict], None] | None = None
                   ) -> tuple[GenderObjectClassifier, list[dict]]:
    """Paper-tier training (appendix B.1): the backbone is fine-tuned end to end together with
    a linear head (Adam, lr, batch size, early stopping on the 20 % validation split as in
    :func:`train_classifier`). Images are read from the manifest ``path`` each epoch and
    preprocessed by the backbone's own preprocessing (no augmentation). Slow on CPU (about
    3x the encoding cost per epoch); meant for a GPU.

    Returns ``(classifier, history)`` like :func:`train_classifier`; the classifier carries its
    fine-tuned backbone (``encode``) and saves it.
    """
    import torch
    from biaslab.features import _open_rgb, load_image_encoder
    p = {**DEFAULTS, **(params or {})}
    manifest = manifest.reset_index(drop=True)
    labels = list(labels)
    n_obj = len(labels)
    y, m = label_targets(manifest, labels, bool(p["labelled_only"]))
    tr, va = validation_split(manifest, float(p["val_fraction"]), int(seed))
    paths = manifest["path"].astype(str).tolist()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        enc = load_image_encoder(backbone, image_size=image_size)
        device = enc.device
        head = _head(enc.dim, n_obj + 2, [], 0.0).to(device)   # mean 0 / std 1: identity
        with torch.no_grad():
            Yt, Mt = torch.from_numpy(y[tr]), torch.from_numpy(m[tr])
            prior = ((Yt * Mt).sum(0) / Mt.sum(0).clamp_min(1)).clamp(1e-3, 1 - 1e-3)
            head.net[-1].bias.copy_(torch.log(prior / (1 - prior)))
        enc.model.train()
        params_ = list(enc.model.parameters()) + list(head.parameters())
        opt = torch.optim.Adam(params_, lr=float(p["lr"]), weight_decay=float(p["weight_decay"]))
        gen = torch.Generator().manual_seed(int(seed))
        bs = max(int(p["batch_size"]), 1)

        def batch(rows):
            x = enc._preprocess([_open_rgb(paths[r]) for r in rows])
            return head(enc._forward(x))

        def evaluate(rows):
            enc.model.eval()
            head.eval()
            outs = []
            with torch.inference_mode():
                for s in range(0, len(rows), bs):
                    outs.append(batch(rows[s:s + bs]).cpu())
            enc.model.train()
            head.train()
            return torch.cat(outs) if outs else torch.zeros(0, n_obj + 2)

        history, best, best_state, best_epoch, bad = [], math.inf, None, -1, 0
        for epoch in range(int(p["epochs"])):
            perm = torch.randperm(len(tr), generator=gen).numpy()
            total, seen = 0.0, 0
            for s in range(0, len(tr), bs):
                rows = tr[perm[s:s + bs]]
                loss = _masked_bce(batch(rows).cpu(), torch.from_numpy(y[rows]),
                                   torch.from_numpy(m[rows]))
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(rows)
                seen += len(rows)
            rec = {"epoch": epoch, "train_loss": total / max(seen, 1)}
            if len(va):
                lv = evaluate(va)
                rec["val_loss"] = float(_masked_bce(lv, torch.from_numpy(y[va]),
                                                    torch.from_numpy(m[va])))
                pv = torch.sigmoid(lv).numpy()
                rec["val_mAP"] = _val_map(y[va], m[va], pv, n_obj)
                rec["val_gender_acc"] = _gender_acc(y[va], m[va], pv)
                if rec["val_loss"] < best - 1e-7:
                    best, best_epoch, bad = rec["val_loss"], epoch, 0
                    best_state = tuple({k: v.detach().clone() for k, v in mod.state_dict().items()}
                                       for mod in (enc.model, head))
                else:
                    bad += 1
            history.append(rec)
            if on_epoch is not None:
                on_epoch(epoch, rec)
            if len(va) and bad >= int(p["patience"]):
                break
        if best_state is not None:
            enc.model.load_state_dict(best_state[0])
            head.load_state_dict(best_state[1])
        enc.model.eval()
        head = head.cpu().eval()
    config = {"backbone": str(backbone), "image_size": enc.image_size or image_size,
              "d_img": int(enc.dim), "seed": int(seed),
              **{k: p[k] for k in DEFAULTS}, "hidden": [], "dropout": 0.0, "finetune": True,
              "best_epoch": int(best_epoch if len(va) else len(history) - 1),
              "epochs_run": len(history), "n_train": int(len(tr)), "n_val": int(len(va))}
    clf = GenderObjectClassifier(head, labels, config, backbone=enc)
    fv = clf.encode([paths[r] for r in va]) if len(va) else None
    clf.thresholds = _thresholds(clf, p, fv, y[va] if len(va) else None,
                                 m[va] if len(va) else None)
    clf.config["thresholds"] = _thr_list(clf.thresholds)
    return clf, history


# --------------------------------------------------------------------------- persons masked
def blackout_persons(image: np.ndarray, persons: pd.DataFrame,
                     sources: Sequence[str] = ("polygon", "keypoints", "box"),
                     dilate_px: int = 0, fill: int | str = 0) -> tuple[np.ndarray, np.ndarray]:
    """Black out every person of one image (paper 000 sec. 3.1, Ratio: "masking individuals in
    test images").

    Args:
        image: (H, W, 3) uint8.
        persons: the image's ``persons.parquet`` rows (x, y, w, h, polygon, keypoints).
        sources: mask sources in order of preference (``biaslab.counterfactual.masks.
            person_mask``); ``("box",)`` blacks out whole boxes.
        dilate_px: grow the union mask by this radius (px) to cover silhouette edges.
        fill: what the mask is filled with: a grey level (0 = black, the default "blackout"
            of Wang et al. 2019), or ``"mean"`` = the mean colour of the unmasked pixels.

    Returns:
        ``(masked image, mask)``; pixels outside the mask are unchanged.
    """
    from biaslab.counterfactual.masks import dilate, person_mask
    H, W = image.shape[:2]
    union = np.zeros((H, W), np.uint8)
    for p in persons.to_dict("records"):
        msk, _ = person_mask(p, H, W, sources=tuple(sources))
        if msk is None:   # no allowed source: fall back to the box
            msk, _ = person_mask(p, H, W, sources=("box",))
        union |= msk.astype(np.uint8)
    union = dilate(union, int(dilate_px))
    out = np.array(image, np.uint8, copy=True)
    if isinstance(fill, str):
        if fill != "mean":
            raise ValueError(f"fill must be a grey level or 'mean', got {fill!r}")
        rest = image[union == 0]
        value = np.round(rest.reshape(-1, 3).mean(0)) if len(rest) else np.zeros(3)
    else:
        value = int(fill)
    out[union > 0] = value
    return out, union


# --------------------------------------------------------------------------- test set
TEST_COLUMNS = ["image_id", "path", "gender", "objects", "labelled", "n_persons"]


def test_table(images: pd.DataFrame, image_labels: pd.DataFrame, split: pd.DataFrame,
               objects: pd.DataFrame, persons: pd.DataFrame, split_name: str = "test"
               ) -> pd.DataFrame:
    """The real test images of paper 000 sec. 3.1: images of ``split_name`` whose
    caption-derived gender is female/male, with their image-level objects
    (``objects.parquet`` de-duplicated), ``labelled`` (the image has at least one object row,
    see ``labelled_only``) and ``n_persons`` (rows in ``persons.parquet``). Sorted by
    image_id; columns ``TEST_COLUMNS``."""
    ids = set(split.loc[split["split"] == split_name, "image_id"].astype(int))
    lab = image_labels[image_labels["gender"].isin(list(GENDER_OF))
                       & image_labels["image_id"].isin(ids)]
    df = lab[["image_id", "gender"]].merge(images[["image_id", "path"]], on="image_id")
    objs = objects.drop_duplicates(["image_id", "category"]).groupby("image_id")["category"] \
        .apply(sorted)
    df["objects"] = df["image_id"].map(objs).apply(lambda v: v if isinstance(v, list) else [])
    df["labelled"] = df["image_id"].isin(set(objects["image_id"].astype(int)))
    df["n_persons"] = df["image_id"].map(persons.groupby("image_id").size()).fillna(0) \
        .astype(int)
    return df[TEST_COLUMNS].sort_values("image_id", ignore_index=True)


def object_matrix(object_lists: Sequence, labels: Sequence[str]) -> np.ndarray:
    """(n, |labels|) float32 0/1 presence matrix from per-image object-name lists."""
    idx = {c: k for k, c in enumerate(labels)}
    y = np.zeros((len(object_lists), len(labels)), np.float32)
    for r, objs in enumerate(object_lists):
        for o in (objs if objs is not None else ()):
            if o in idx:
                y[r, idx[o]] = 1.0
    return y


def save_like(src_path: str | os.PathLike, image: np.ndarray, dst_stem: str | os.PathLike,
              jpeg_quality: int = 95) -> str:
    """Write ``image`` next to ``dst_stem`` in the source's format: ``<stem>.jpg`` (JPEG,
    ``jpeg_quality``) for a .jpg/.jpeg source, else ``<stem>.png``; atomically. Returns the
    path as a string."""
    from PIL import Image
    jpg = str(src_path).lower().endswith((".jpg", ".jpeg"))
    path = f"{dst_stem}.{'jpg' if jpg else 'png'}"
    with atomic_path(path, suffix=".jpg" if jpg else ".png") as tmp:
        im = Image.fromarray(np.asarray(image, np.uint8))
        if jpg:
            im.save(tmp, format="JPEG", quality=int(jpeg_quality))
        else:
            im.save(tmp, format="PNG")
    return path


def write_blackout_images(test: pd.DataFrame, persons: pd.DataFrame,
                          out_dir: str | os.PathLike, *,
                          sources: Sequence[str] = ("box",), dilate_px: int = 0,
                          fill: int | str = 0, progress: bool = False) -> pd.DataFrame:
    """Persons-blacked-out copies of the test images that have persons
    (:func:`blackout_persons`, every person of the image), written with :func:`save_like` as
    ``<out_dir>/<image_id>.(jpg|png)``. Returns ``image_id, gender, path, masked_fraction``
    (images without persons are left out: nothing to mask)."""
    from tqdm import tqdm

    from biaslab.counterfactual.generate import load_image
    by_img = {int(i): g for i, g in persons.groupby("image_id", sort=False)}
    rows = []
    for r in tqdm(test.to_dict("records"), disable=not progress, desc="blackout", unit="img"):
        ps = by_img.get(int(r["image_id"]))
        if ps is None or ps.empty:
            continue
        img = load_image(r["path"])
        out, mask = blackout_persons(img, ps, sources=sources, dilate_px=dilate_px,
                                     fill=fill)
        path = save_like(r["path"], out, os.path.join(str(out_dir), str(int(r["image_id"]))))
        rows.append({"image_id": int(r["image_id"]), "gender": r["gender"], "path": path,
                     "masked_fraction": float(mask.mean())})
    return pd.DataFrame(rows, columns=["image_id", "gender", "path", "masked_fraction"])


def model_features(clf: "GenderObjectClassifier", table: pd.DataFrame, base_ids, base_feats,
                   cache_dir: str | os.PathLike, derived: bool = False, **kw) -> np.ndarray:
    """Features of ``table`` (image_id, path) as ``clf`` needs them: its own backbone for a
    fine-tuned model, else the frozen ``config["backbone"]``: the base features
    (``data/features``) for real images, the content-keyed cache for ``derived`` images
    (blacked-out, inpainted)."""
    if clf.config.get("finetune"):
        return clf.encode(table["path"].tolist())
    t = table[["image_id", "path"]].assign(counterfactual=bool(derived))
    return manifest_features(t, base_ids, base_feats, cache_dir, clf.config["backbone"],
                             image_size=clf.config.get("image_size"), **kw)


# --------------------------------------------------------------------------- evaluation
def gender_thresholds(clf: "GenderObjectClassifier") -> tuple[float, float]:
    """Decision thresholds ``(woman, man)`` of the gender outputs: ``config
    ["gender_thresholds"]`` when the classifier stores validation-tuned ones (train_classifier
    does not today: its ``thresholds`` are per OBJECT output), else 0.5 each (a sigmoid
    output's operating point). Raises ValueError when the stored value is not two numbers."""
    t = clf.config.get("gender_thresholds")
    if t is None:
        return 0.5, 0.5
    t = [float(v) for v in t]
    if len(t) != 2 or not all(np.isfinite(t)):
        raise ValueError(f"config gender_thresholds must be two numbers (woman, man), got {t}")
    return t[0], t[1]


def ratio_of(clf_or_probs, feats: np.ndarray | None = None,
             thresholds: tuple[float, float] | None = None) -> dict:
    """Gender-prediction ratio of a classifier on features (or of ``(p_woman, p_man)``, float
    arrays (n,)): :func:`biaslab.metrics.captions.classification_ratio` with each gender output
    on where it is ``>=`` its threshold (``thresholds`` = ``(woman, man)``; default
    :func:`gender_thresholds` of the classifier, 0.5 for bare probabilities). Returns ``ratio``
    = #man / #woman (an image with both outputs on counts for both), ``ratio_max`` =
    max(r, 1/r), ``n_man``, ``n_woman``, ``n_both``, ``n_neither``, ``n_images``."""
    from biaslab.metrics.captions import classification_ratio
    if isinstance(clf_or_probs, GenderObjectClassifier):
        pw, pm = clf_or_probs.gender_proba(feats)
        thr = gender_thresholds(clf_or_probs) if thresholds is None else thresholds
    else:
        pw, pm = clf_or_probs
        thr = (0.5, 0.5) if thresholds is None else thresholds
    return classification_ratio(pm, pw, threshold=(thr[1], thr[0]))


def ratio_flag(r: float) -> str | None:
    """Why a raw ratio ``r = #man / #woman`` is not a finite positive number, for JSON (which
    has no inf / NaN): ``"r=inf"`` (no woman prediction), ``"r=0"`` (no man prediction; then
    Ratio = max(r, 1/r) is infinite too), ``"0/0"`` (no gender prediction at all), else None."""
    if r is None or math.isnan(r):
        return "0/0"
    if math.isinf(r):
        return "r=inf"
    return "r=0" if r == 0 else None


def object_predictions(clf: "GenderObjectClassifier", probs: np.ndarray) -> np.ndarray:
    """The object predictions the Leakage attacker sees, float32 (n, |labels|): the object
    probabilities ``probs[:, :|labels|]`` binarised at ``clf.thresholds`` (per object), or the
    probabilities themselves when ``config["leakage_threshold"]`` is None."""
    n_obj = len(clf.labels)
    if clf.config.get("leakage_threshold", 0.5) is None:   # scores (Wang et al. 2019 code)
        return probs[:, :n_obj].astype(np.float32)
    return (probs[:, :n_obj] >= clf.thresholds[None]).astype(np.float32)


def evaluate(clf: GenderObjectClassifier, test_feats: np.ndarray, test_objects: np.ndarray,
             labelled: np.ndarray, genders: Sequence[str], masked_feats: np.ndarray | None, *,
             masked_genders: Sequence[str] | None = None,
             train_feats: np.ndarray | None = None, train_objects: np.ndarray | None = None,
             train_genders: Sequence[str] | None = None,
             leakage_kwargs: dict | None = None) -> dict:
    """mAP, Ratio and Leakage of one classifier (paper 000 sec. 3.1, Table 1).

    Args:
        test_feats: float32 (n, d) features of the (unmasked) test images.
        test_objects: (n, |clf.labels|) 0/1 ground-truth objects of the test images.
        labelled: bool (n,) images whose object set is known (mAP and Leakage use these).
        genders: (n,) ``female`` / ``male``.
        masked_feats: features of the persons-blacked-out test images (Ratio), or None.
        masked_genders: genders of the masked images (default: ``genders``, i.e. every test
            image was masked).
        train_feats, train_objects, train_genders: features (m, d), 0/1 objects
            (m, |clf.labels|) and genders (m,) of the LABELLED training images: the Leakage
            attackers are trained on them (LK_D on ``train_objects``, LK_M on the model's
            predictions for ``train_feats``) and scored on the labelled test images
            (:func:`biaslab.metrics.leakage.leakage`, paper 000 Eq. 7). All three or none;
            none: the attackers split the test images (not the paper's protocol).
        leakage_kwargs: extra arguments of :func:`biaslab.metrics.leakage.leakage`.

    Returns:
        dict: ``mAP`` (x100), ``n_map_labels``; Ratio on the masked images
        (:func:`ratio_of`, gender outputs at :func:`gender_thresholds`): ``ratio`` =
        max(r, 1/r) and ``ratio_raw`` = r as floats that may be ``inf`` (r = 0 or inf) or
        ``nan`` (0/0), ``ratio_flag`` (:func:`ratio_flag`), ``n_man``, ``n_woman``,
        ``n_both``, ``n_neither``; ``leakage``, ``LK_M``, ``LK_D`` (x100; None with
        ``leakage_error`` when too few labelled images of a group), ``leakage_std`` (over
        attacker rounds), ``leakage_protocol``; diagnostics: ``gender_acc`` (% of unmasked
        images whose larger gender output is the true gender), ``masked_gender_acc`` (the
        same on masked images) and ``masked_gender_auc`` (ROC AUC x100 of ``p_man -
        p_woman`` on masked images: how much gender the context alone gives away,
        insensitive to a constant offset that moves Ratio); ``n_test``, ``n_labelled``.

    Raises:
        ValueError: masked genders misaligned with the masked features, or only some of the
            ``train_*`` arguments.
    """
    from biaslab.metrics.leakage import leakage
    from biaslab.objects import mean_average_precision
    labelled = np.asarray(labelled, bool)
    genders = np.asarray(list(genders), object)
    y = np.asarray(test_objects, np.float32)
    p = clf.predict_proba(test_feats)
    n_obj = len(clf.labels)
    out: dict = {"n_test": int(len(p)), "n_labelled": int(labelled.sum())}
    if labelled.any() and n_obj:
        m, ap = mean_average_precision(y[labelled], p[labelled, :n_obj])
        out["mAP"] = 100.0 * m if np.isfinite(m) else None
        out["n_map_labels"] = int(np.isfinite(ap).sum())
    else:
        out["mAP"], out["n_map_labels"] = None, 0
    truth_man = genders == "male"
    out["gender_acc"] = float(100.0 * np.mean((p[:, -1] > p[:, -2]) == truth_man)) \
        if len(p) else None
    if masked_feats is not None and len(masked_feats):
        pm = clf.predict_proba(masked_feats)
        mg = genders if masked_genders is None else np.asarray(list(masked_genders), object)
        if len(mg) != len(pm):
            raise ValueError(f"{len(pm)} masked images but {len(mg)} genders")
        masked_man = mg == "male"
        r = ratio_of((pm[:, -2], pm[:, -1]), thresholds=gender_thresholds(clf))
        out.update({"ratio": float(r["ratio_max"]), "ratio_raw": float(r["ratio"]),
                    "ratio_flag": ratio_flag(r["ratio"]),
                    **{k: r[k] for k in ("n_man", "n_woman", "n_both", "n_neither")},
                    "masked_gender_acc": float(100.0 * np.mean((pm[:, -1] > pm[:, -2])
                                                               == masked_man)),
                    "masked_gender_auc": _auc(masked_man, pm[:, -1] - pm[:, -2])})
    given = [v is not None for v in (train_feats, train_objects, train_genders)]
    if any(given) and not all(given):
        raise ValueError("give all of train_feats, train_objects and train_genders, or none")
    kw = {"threshold": None, **(leakage_kwargs or {})}
    if all(given):
        kw.update(train_gt=np.asarray(train_objects, np.float32),
                  train_pred=object_predictions(clf, clf.predict_proba(train_feats)),
                  train_genders=list(train_genders))
    pred = object_predictions(clf, p)
    try:
        lk = leakage(y[labelled], pred[labelled], list(genders[labelled]), **kw)
        out.update({"leakage": lk["leakage"], "LK_M": lk["LK_M"], "LK_D": lk["LK_D"],
                    "leakage_std": lk["leakage_std"], "acc_M": lk["acc_M"],
                    "acc_D": lk["acc_D"], "leakage_protocol": lk["protocol"]})
    except ValueError as e:   # too few labelled images of a group
        out.update({"leakage": None, "leakage_error": str(e)})
    return out


def _auc(truth: np.ndarray, score: np.ndarray):
    """ROC AUC x100 of ``score`` for the boolean ``truth`` (None with a single class)."""
    from sklearn.metrics import roc_auc_score
    truth = np.asarray(truth, bool)
    if truth.all() or not truth.any():
        return None
    return float(100.0 * roc_auc_score(truth, score))


def json_record(values: Sequence) -> dict:
    """:func:`biaslab.stats.record` of per-seed values (None / NaN = missing, +-inf = infinite,
    counted) with its numbers rounded by :func:`biaslab.io.json_number` for a metrics file:
    ``{"mean", "ci95", "std", "n", "n_inf", "n_missing", "sign"}``."""
    from biaslab import stats
    from biaslab.io import json_number
    return {k: json_number(v) for k, v in stats.record(list(values)).items()}


__all__ = ["GENDER_OUTPUTS", "DEFAULTS", "select_labels", "label_targets", "validation_split",
           "test_table", "object_matrix", "save_like", "write_blackout_images", "model_features",
           "file_id", "encode_files", "manifest_features", "GenderObjectClassifier",
           "train_classifier", "train_finetune", "blackout_persons", "gender_thresholds",
           "ratio_of", "ratio_flag", "object_predictions", "evaluate", "json_record"]
