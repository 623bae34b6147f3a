"""Training of the classifier head on frozen features and of the fine-tuned paper tier
(paper 000 appendix B.1)."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from biaslab.classify.manifest import label_targets, validation_split
from biaslab.classify.methods import get_method
from biaslab.classify.methods.base import masked_bce as _masked_bce
from biaslab.classify.model import GenderObjectClassifier, TrainSettings, build_head, thr_list
from biaslab.runtime.progress import bar as progress_bar


def _epoch_bar(desc: str, epochs: int, progress: bool | None):
    """tqdm bar over the epochs on stderr (``biaslab.runtime.progress``); :func:`_show_epoch` puts
    each epoch's losses in its postfix."""
    return progress_bar(desc=desc, total=int(epochs), unit="epoch", progress=progress)


def _show_epoch(bar, rec: dict) -> None:
    """Advance ``bar`` by one epoch, showing train/val loss and val mAP (when present)."""
    post = {"loss": f"{rec['train_loss']:.4f}"}
    if "val_loss" in rec:
        post.update(val_loss=f"{rec['val_loss']:.4f}", val_mAP=f"{rec['val_mAP']:.1f}")
    bar.set_postfix(post, refresh=False)
    bar.update(1)


def _val_map(y: np.ndarray, m: np.ndarray, p: np.ndarray, n_obj: int) -> float:
    from biaslab.models.objects import mean_average_precision
    rows = m[:, :n_obj].any(1) if n_obj else np.zeros(len(y), bool)
    if not rows.any() or n_obj == 0:
        return float("nan")
    return mean_average_precision(y[rows, :n_obj], p[rows, :n_obj])[0]


def train_classifier(feats: np.ndarray, manifest: pd.DataFrame, labels: Sequence[str], *,
                     seed: int = 0, settings: TrainSettings | None = None, backbone: str = "",
                     image_size: int | None = None, method: str = "erm",
                     method_params: dict | None = None,
                     on_epoch: Callable[[int, dict], None] | None = None,
                     progress: bool | None = None
                     ) -> tuple[GenderObjectClassifier, list[dict]]:
    """Train the head on frozen features (module docstring; paper 000 appendix B.1) with a
    training method of paper 000 Table 1 (:mod:`biaslab.classify.methods`).

    Args:
        feats: float32 (n, d) features of the manifest rows (:func:`manifest_features`).
        manifest: the training manifest (``biaslab.data.datasets``), n rows.
        labels: object labels (:func:`select_labels` on the ORIGINAL manifest).
        seed: validation split, initialisation and batch-order seed.
        settings: :class:`biaslab.classify.model.TrainSettings` (None: its defaults; the
            stage's from params ``classifier``).
        backbone, image_size: recorded in the config (what produced ``feats``).
        method, method_params: the training method (``erm`` = plain BCE, the Original row;
            ``adversarial``, ``domain_discriminative``, ``domain_independent``, ``upweight``,
            ``focal``, ``class_balanced``, ``group_dro``) and overrides of its ``PARAMS``;
            recorded in the config (``method``, ``method_params`` with every default).
        on_epoch: called ``on_epoch(epoch, record)`` after every epoch (DVCLive hook).
        progress: tqdm bar over the epochs on stderr with the epoch's train/val loss and val
            mAP in its postfix; True / False / None = auto (``biaslab.runtime.progress``: drawn on a
            terminal, in a log only for a run longer than 10 s). Nothing returned depends on it.

    Returns:
        ``(classifier, history)``; history: one dict per epoch with ``epoch``, ``train_loss``
        (mean of the method's batch loss over the epoch's batches; ERM: masked BCE), and with
        a validation split ``val_loss`` (masked BCE of the inference outputs, the early-
        stopping criterion of every method), ``val_mAP`` (objects), ``val_gender_acc`` (%;
        NaN without gender outputs). The config records ``best_epoch``,
        ``epochs_run``, ``n_train``, ``n_val``, ``seed`` and per-object ``thresholds``
        (validation-F1 ones when ``leakage_threshold == "val_f1"``, else the number).

    Raises:
        ValueError: feats and manifest differ in length, nothing to train on, or an
            unknown method / method parameter.
    """
    import torch
    st = TrainSettings() if settings is None else settings
    meth = get_method(method, method_params)
    feats = np.asarray(feats, np.float32)
    if len(feats) != len(manifest):
        raise ValueError(f"{len(feats)} feature rows for {len(manifest)} manifest rows")
    if len(manifest) < 2:
        raise ValueError("need at least 2 training rows")
    manifest = manifest.reset_index(drop=True)
    labels = list(labels)
    n_obj = len(labels)
    y, m = label_targets(manifest, labels, bool(st.labelled_only))
    n_out = meth.n_out(n_obj)
    yr, mr = meth.raw_targets(y, m, n_obj)           # raw targets of the head's outputs
    n_raw = meth.n_raw(n_obj)
    tr, va = validation_split(manifest, float(st.val_fraction), int(seed))
    has_val = len(va) > 0
    hidden = meth.hidden(list(st.hidden))
    meth.setup(y[tr], m[tr], n_obj)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        head = build_head(feats.shape[1], n_raw, list(hidden), float(st.dropout))
        extra = meth.modules(head)
        X = torch.from_numpy(feats[tr])
        Y, M = torch.from_numpy(yr[tr]), torch.from_numpy(mr[tr])
        head.mean.copy_(X.mean(0))
        sd = X.std(0) if len(tr) > 1 else torch.ones(X.shape[1])
        head.std.copy_(sd.clamp_min(0.1 * float(sd.mean()) + 1e-6))
        with torch.no_grad():   # output biases at the training log prior odds
            Yh, Mh = Y[:, :n_raw], M[:, :n_raw]
            prior = ((Yh * Mh).sum(0) / Mh.sum(0).clamp_min(1)).clamp(1e-3, 1 - 1e-3)
            last = head.net[-1]
            last.bias.copy_(torch.log(prior / (1 - prior)))
        opt = torch.optim.Adam([*head.parameters(), *(q for e in extra
                                                      for q in e.parameters())],
                               lr=float(st.lr), weight_decay=float(st.weight_decay))
        gen = torch.Generator().manual_seed(int(seed))
        bs = max(int(st.batch_size), 1)
        if has_val:
            Xv = torch.from_numpy(feats[va])
            Yv, Mv = torch.from_numpy(y[va, :n_out]), torch.from_numpy(m[va, :n_out])
        history, best, best_state, best_epoch, bad = [], math.inf, None, -1, 0
        bar = _epoch_bar(f"train {meth.name}", st.epochs, progress)
        for epoch in range(int(st.epochs)):
            head.train()
            for e in extra:
                e.train()
            perm = torch.randperm(len(tr), generator=gen)
            total, seen = 0.0, 0
            for s in range(0, len(tr), bs):
                idx = perm[s:s + bs]
                loss = meth.loss(head, X[idx], Y[idx], M[idx], idx)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
                seen += len(idx)
            rec = {"epoch": epoch, "train_loss": total / max(seen, 1)}
            if has_val:
                head.eval()
                with torch.inference_mode():
                    lv = meth.logits(head(Xv))
                    rec["val_loss"] = float(_masked_bce(lv, Yv, Mv))
                    pv = torch.sigmoid(lv).numpy()
                rec["val_mAP"] = _val_map(y[va], m[va], pv, n_obj)
                rec["val_gender_acc"] = _gender_acc(y[va], m[va], pv) \
                    if meth.gender_outputs else float("nan")
                if rec["val_loss"] < best - 1e-7:
                    best, best_epoch, bad = rec["val_loss"], epoch, 0
                    best_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
                else:
                    bad += 1
            history.append(rec)
            _show_epoch(bar, rec)
            if on_epoch is not None:
                on_epoch(epoch, rec)
            if has_val and bad >= int(st.patience):
                break
        bar.close()
        if best_state is not None:
            head.load_state_dict(best_state)
        head.eval()
    config = {"backbone": str(backbone), "image_size": image_size, "d_img": int(feats.shape[1]),
              "seed": int(seed), "finetune": False,
              **{k: v for k, v in st.config().items() if k != "finetune"}, "hidden": hidden,
              "method": meth.name, "method_params": dict(meth.params),
              "best_epoch": int(best_epoch if has_val else len(history) - 1),
              "epochs_run": len(history), "n_train": int(len(tr)), "n_val": int(len(va))}
    clf = GenderObjectClassifier(head, labels, config)
    clf.thresholds = _thresholds(clf, st, feats[va] if has_val else None,
                                 y[va] if has_val else None, m[va] if has_val else None)
    clf.config["thresholds"] = thr_list(clf.thresholds)
    return clf, history


def _gender_acc(y: np.ndarray, m: np.ndarray, p: np.ndarray) -> float:
    """% of rows with a gender whose larger gender output is the true one."""
    rows = m[:, -1] > 0
    if not rows.any():
        return float("nan")
    pred_man = p[rows, -1] > p[rows, -2]
    return float(100.0 * np.mean(pred_man == (y[rows, -1] > 0)))


def _thresholds(clf, st: TrainSettings, fv, yv, mv) -> np.ndarray:
    n_obj = len(clf.labels)
    t = st.leakage_threshold
    if t is None:
        return np.full(n_obj, np.nan)
    if t == "val_f1":
        from biaslab.models.objects import best_f1_thresholds
        if fv is None or not len(fv):
            return np.full(n_obj, 0.5)
        rows = mv[:, :n_obj].any(1)
        return best_f1_thresholds(yv[rows, :n_obj], clf.objects_proba(fv[rows]), min_pos=2)
    return np.full(n_obj, float(t))


# --------------------------------------------------------------------------- fine-tuning
def train_finetune(manifest: pd.DataFrame, labels: Sequence[str], *, backbone: str,
                   image_size: int | None = None, seed: int = 0,
                   settings: TrainSettings | None = None,
                   method: str = "erm", method_params: dict | None = None,
                   on_epoch: Callable[[int, dict], None] | None = None,
                   progress: bool | None = None, device: str | None = None
                   ) -> tuple[GenderObjectClassifier, list[dict]]:
    """Paper-tier training (appendix B.1): the backbone is fine-tuned end to end together with
    a linear head (Adam, lr, batch size, early stopping on the 20 % validation split as in
    :func:`train_classifier`). Images are read from the manifest ``path`` each epoch and
    preprocessed by the backbone's own preprocessing (no augmentation). Slow on CPU (about
    3x the encoding cost per epoch); meant for a GPU.

    ``backbone``: a Hugging Face vision backbone name or local directory (paper 000 appendix
    B.1 / Table 1: ``microsoft/resnet-50``, ``microsoft/swin-tiny-patch4-window7-224``,
    ``facebook/convnext-base-224``, :data:`~biaslab.classify.model.PAPER_BACKBONES`) or
    ``efficientnet_lite0``; its pooled feature is the one of
    :class:`biaslab.models.features.HFImageEncoder` (ResNet's ``(n, C, 1, 1)`` pooler output
    flattened, Swin's and ConvNeXt's ``(n, C)``). ``device``: where the backbone and head are
    trained (``None``: ``cuda`` when available, else ``cpu``); bitwise reproducibility given
    ``seed`` holds on CPU with one torch thread, not on CUDA.

    ``settings``: :class:`biaslab.classify.model.TrainSettings` as in :func:`train_classifier`
    (``hidden`` and ``dropout`` do not apply). ``method``, ``method_params``: a training method
    of paper 000 Table 1 as in
    :func:`train_classifier` (:mod:`biaslab.classify.methods`): its output layout, loss and
    inference rule apply to the head on the backbone's pooled feature, and the gradient of its
    loss (e.g. the adversary's reversed gradient) reaches the backbone; its extra modules
    (the adversary) are trained with it and not saved. The head has the method's hidden
    layers (``Method.hidden([])``: none except for ``adversarial``) and no dropout. The head
    and the method's modules run on CPU, the backbone on ``device`` (the pooled feature is
    moved; autograd follows it), so a method's own tensors never meet another device.

    Returns ``(classifier, history)`` like :func:`train_classifier`; the classifier carries its
    fine-tuned backbone (``encode``) and saves it. ``progress``: epoch bar as in
    :func:`train_classifier`.

    Raises:
        ValueError: an unknown method / method parameter.
    """
    import torch
    from biaslab.models.encoders import load_image_encoder, open_rgb
    st = TrainSettings() if settings is None else settings
    meth = get_method(method, method_params)
    manifest = manifest.reset_index(drop=True)
    labels = list(labels)
    n_obj = len(labels)
    y, m = label_targets(manifest, labels, bool(st.labelled_only))
    n_out, n_raw = meth.n_out(n_obj), meth.n_raw(n_obj)
    yr, mr = meth.raw_targets(y, m, n_obj)           # raw targets of the head's outputs
    hidden = meth.hidden([])
    tr, va = validation_split(manifest, float(st.val_fraction), int(seed))
    meth.setup(y[tr], m[tr], n_obj)
    paths = manifest["path"].astype(str).tolist()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        enc = load_image_encoder(backbone, device=device, image_size=image_size)
        head = build_head(enc.dim, n_raw, hidden, 0.0)   # on CPU; mean 0 / std 1: identity
        extra = meth.modules(head)
        with torch.no_grad():
            # the head's own outputs (the adversary's gender targets come after them)
            Yt, Mt = torch.from_numpy(yr[tr, :n_raw]), torch.from_numpy(mr[tr, :n_raw])
            prior = ((Yt * Mt).sum(0) / Mt.sum(0).clamp_min(1)).clamp(1e-3, 1 - 1e-3)
            head.net[-1].bias.copy_(torch.log(prior / (1 - prior)))
        enc.model.train()
        params_ = list(enc.model.parameters()) + list(head.parameters()) + \
            [q for e in extra for q in e.parameters()]
        opt = torch.optim.Adam(params_, lr=float(st.lr), weight_decay=float(st.weight_decay))
        gen = torch.Generator().manual_seed(int(seed))
        bs = max(int(st.batch_size), 1)

        def features(rows):
            x = enc._preprocess([open_rgb(paths[r]) for r in rows])
            return enc._forward(x).cpu()

        def train_mode(on: bool):
            for mod in (enc.model, head, *extra):
                mod.train(on)

        def evaluate(rows):
            train_mode(False)
            outs = []
            with torch.inference_mode():
                for s in range(0, len(rows), bs):
                    outs.append(meth.logits(head(features(rows[s:s + bs]))))
            train_mode(True)
            return torch.cat(outs) if outs else torch.zeros(0, n_out)

        history, best, best_state, best_epoch, bad = [], math.inf, None, -1, 0
        bar = _epoch_bar("finetune", st.epochs, progress)
        for epoch in range(int(st.epochs)):
            perm = torch.randperm(len(tr), generator=gen).numpy()
            total, seen = 0.0, 0
            for s in range(0, len(tr), bs):
                pos = perm[s:s + bs]             # positions in the training split (setup's)
                rows = tr[pos]
                loss = meth.loss(head, features(rows), torch.from_numpy(yr[rows]),
                                 torch.from_numpy(mr[rows]), torch.from_numpy(pos))
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(rows)
                seen += len(rows)
            rec = {"epoch": epoch, "train_loss": total / max(seen, 1)}
            if len(va):
                lv = evaluate(va)
                rec["val_loss"] = float(_masked_bce(lv, torch.from_numpy(y[va, :n_out]),
                                                    torch.from_numpy(m[va, :n_out])))
                pv = torch.sigmoid(lv).numpy()
                rec["val_mAP"] = _val_map(y[va], m[va], pv, n_obj)
                rec["val_gender_acc"] = _gender_acc(y[va], m[va], pv) \
                    if meth.gender_outputs else float("nan")
                if rec["val_loss"] < best - 1e-7:
                    best, best_epoch, bad = rec["val_loss"], epoch, 0
                    best_state = tuple({k: v.detach().clone() for k, v in mod.state_dict().items()}
                                       for mod in (enc.model, head))
                else:
                    bad += 1
            history.append(rec)
            _show_epoch(bar, rec)
            if on_epoch is not None:
                on_epoch(epoch, rec)
            if len(va) and bad >= int(st.patience):
                break
        bar.close()
        if best_state is not None:
            enc.model.load_state_dict(best_state[0])
            head.load_state_dict(best_state[1])
        enc.model.eval()
        head = head.eval()
    config = {"backbone": str(backbone), "image_size": enc.image_size or image_size,
              "d_img": int(enc.dim), "seed": int(seed),
              **st.config(), "hidden": hidden, "dropout": 0.0, "finetune": True,
              "method": meth.name, "method_params": dict(meth.params),
              "best_epoch": int(best_epoch if len(va) else len(history) - 1),
              "epochs_run": len(history), "n_train": int(len(tr)), "n_val": int(len(va))}
    clf = GenderObjectClassifier(head, labels, config, backbone=enc)
    fv = clf.encode([paths[r] for r in va]) if len(va) else None
    clf.thresholds = _thresholds(clf, st, fv, y[va] if len(va) else None,
                                 m[va] if len(va) else None)
    clf.config["thresholds"] = thr_list(clf.thresholds)
    return clf, history
