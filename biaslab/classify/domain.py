"""Real-vs-generated domain check: is a classifier trained on generated
images (S_synthetic, paper 000 Eq. 2) scored on real test images outside its training domain?

Paper 000 trains S_synthetic on inpainted images only and reads its Leakage (Eq. 7) on real
photos. A model that never saw an un-inpainted person can lose accuracy on real photos for
reasons that have nothing to do with gender; a Leakage that goes against the paper then
comes from the domain gap, not from what the model learned about gender. Two measures:

* :func:`domain_gap`: per model, object mAP and gender accuracy on the real images of the
  source images the model never trained on, and on the generated counterfactuals of the
  same sources for the SAME group (the stage's choice: an other-group counterfactual also
  swaps the gender, and a model that reads objects through the person's gender loses mAP
  there for that reason). ``gap = mAP(generated) - mAP(real)`` on the same scenes: > 0 for
  a model at home on generated images, < 0 for one at home on real photos. Sources are
  paired, so scene, objects and gender are the same on both sides; only the person was
  re-generated.
* :func:`probe_auc`: how well a logistic regression on the frozen backbone features tells a
  real image from a generated one (grouped cross-validation by source image, so a source's
  real photo and its counterfactuals never fall on both sides). 50 = the domains look alike
  to the features every classifier here reads; 100 = perfectly separable.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from biaslab.classify.manifest import object_matrix, validation_split


def unseen_sources(model_manifest: pd.DataFrame, universe: Sequence[int], val_fraction: float,
                   seed: int) -> np.ndarray:
    """Source image ids (int64, sorted) of ``universe`` that a model trained on
    ``model_manifest`` with ``val_fraction`` / ``seed`` never trained on: its validation
    sources (:func:`biaslab.classify.manifest.validation_split`, the same call the training
    makes) and every source its manifest does not hold (sub-sampling drops most)."""
    tr, _ = validation_split(model_manifest, float(val_fraction), int(seed))
    trained = set(model_manifest["image_id"].astype(np.int64).to_numpy()[tr].tolist())
    return np.array(sorted(int(i) for i in set(np.asarray(universe, np.int64).tolist())
                           - trained), np.int64)


def scores(probs: np.ndarray, objects: Sequence, genders: Sequence[str], labels: Sequence[str],
           has_gender: bool = True) -> dict:
    """Object mAP (x100, :func:`biaslab.models.objects.mean_average_precision` over the rows with at
    least one object) and gender accuracy (%; the larger of P(woman), P(man) is the true
    gender; None without gender outputs) of outputs ``probs`` (n, len(labels) + 2) for rows
    with object lists ``objects`` and genders ``genders`` ("female" / "male")."""
    from biaslab.models.objects import mean_average_precision
    p = np.asarray(probs, float)
    y = object_matrix(list(objects), labels)
    has = y.sum(1) > 0
    out = {"n": int(len(p)), "mAP": None, "gender_acc": None}
    if has.any() and len(labels):
        m, _ = mean_average_precision(y[has], p[has, :len(labels)])
        out["mAP"] = 100.0 * m if np.isfinite(m) else None
    if has_gender and len(p):
        man = np.asarray(list(genders), object) == "male"
        out["gender_acc"] = float(100.0 * np.mean((p[:, -1] > p[:, -2]) == man))
    return out


def domain_gap(real: dict, generated: dict) -> dict:
    """Per-model result of one seed from :func:`scores` of its unseen real images and of their
    generated counterfactuals: ``{"mAP_real", "mAP_generated", "domain_gap" (generated - real,
    mAP points), "gender_acc_real", "gender_acc_generated", "n_real", "n_generated"}`` (None
    where a side has no value)."""
    gap = None if real["mAP"] is None or generated["mAP"] is None else \
        generated["mAP"] - real["mAP"]
    return {"mAP_real": real["mAP"], "mAP_generated": generated["mAP"], "domain_gap": gap,
            "gender_acc_real": real["gender_acc"],
            "gender_acc_generated": generated["gender_acc"],
            "n_real": real["n"], "n_generated": generated["n"]}


def probe_auc(real_feats: np.ndarray, real_ids: Sequence[int], gen_feats: np.ndarray,
              gen_ids: Sequence[int], folds: int = 5, seed: int = 0) -> list[float]:
    """ROC AUC x100 per fold of a real-vs-generated logistic regression (scikit-learn,
    standardised features, C = 1) on backbone features: real rows ``real_feats`` (n_r, d)
    with source ids ``real_ids``, generated rows ``gen_feats`` (n_g, d) with ``gen_ids``;
    ``GroupKFold`` over the source ids (a source's images stay in one fold; folds = min(
    ``folds``, number of sources)); ``seed`` shuffles the sources before the folds are made.
    Returns [] with fewer than 2 sources or images of one domain only."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    xr, xg = np.asarray(real_feats, float), np.asarray(gen_feats, float)
    if not len(xr) or not len(xg):
        return []
    x = np.vstack([xr, xg])
    y = np.r_[np.zeros(len(xr)), np.ones(len(xg))]
    ids = np.r_[np.asarray(real_ids, np.int64), np.asarray(gen_ids, np.int64)]
    src = np.unique(ids)
    k = min(int(folds), len(src))
    if k < 2:
        return []
    # GroupKFold is deterministic in the group sizes; a seeded relabelling of the sources
    # makes the fold assignment a seeded random one
    perm = dict(zip(src.tolist(), np.random.default_rng(seed).permutation(len(src)).tolist()))
    groups = np.array([perm[int(i)] for i in ids])
    out = []
    for tr, te in GroupKFold(n_splits=k).split(x, y, groups):
        if len(np.unique(y[tr])) < 2 or len(np.unique(y[te])) < 2:
            continue
        clf = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
        clf.fit(x[tr], y[tr])
        out.append(float(100.0 * roc_auc_score(y[te], clf.predict_proba(x[te])[:, 1])))
    return out
