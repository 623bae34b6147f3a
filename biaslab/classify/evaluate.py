"""mAP, Ratio and Leakage of a trained classifier (paper 000 sec. 3.1, Eq. 7, Table 1)."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from biaslab.classify.model import GenderObjectClassifier

#: Why a model has no Ratio: it has no gender outputs (paper 000 Table 1, "Ratio is
#: inapplicable to Adversarial due to its gender prediction module for mitigation").
RATIO_NA = ("n/a: the model has no gender outputs (Adversarial, Wang et al. 2019); paper 000 "
            "Table 1: Ratio is inapplicable")
RATIO_NA_FLAG = "n/a"


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


def expected_ratio(p_woman, p_man) -> dict:
    """Threshold-free gender-prediction ratio: the *expected* counts of "man" and "woman"
    predictions under the model's own probabilities, ``r_E = sum(p_man) / sum(p_woman)`` over
    the images (float arrays (n,), values in [0, 1]), and ``max(r_E, 1 / r_E)`` (-> 1).

    Not in paper 000 (our addition): paper 000's Ratio counts thresholded
    predictions, and on person-masked images a model that ignores context has both outputs near
    their priors, so the validation-tuned thresholds put every image on one side and r is 0 or
    inf by the threshold, not by the model (metrics/classification.json n_man / n_woman).
    ``r_E`` moves continuously with the probabilities and equals the thresholded r when the
    outputs are 0/1. Returns ``{"ratio": r_E, "ratio_max": max(r_E, 1/r_E)}``; ``inf`` when
    ``sum(p_woman)`` is 0 (``nan`` for 0/0).

    Raises:
        ValueError: arrays of different lengths."""
    pw, pm = np.asarray(p_woman, np.float64), np.asarray(p_man, np.float64)
    if pw.shape != pm.shape:
        raise ValueError(f"p_woman {pw.shape} and p_man {pm.shape} differ in shape")
    sw, sm = float(pw.sum()), float(pm.sum())
    r = sm / sw if sw > 0 else (math.inf if sm > 0 else math.nan)
    rmax = max(r, 1.0 / r) if r > 0 and math.isfinite(r) else (math.nan if math.isnan(r)
                                                              else math.inf)
    return {"ratio": r, "ratio_max": rmax}


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
        leakage_kwargs: extra arguments of :func:`biaslab.metrics.leakage.leakage`; its key
            ``f1_flips`` (a list of flip probabilities, param
            ``classifier.leakage_f1_flips``) adds Wang et al. 2019's accuracy-matched
            leakage (needs the ``train_*`` arguments).

    Returns:
        dict: ``mAP`` (x100), ``n_map_labels``; Ratio on the masked images
        (:func:`ratio_of`, gender outputs at :func:`gender_thresholds`): ``ratio`` =
        max(r, 1/r) and ``ratio_raw`` = r as floats that may be ``inf`` (r = 0 or inf) or
        ``nan`` (0/0), ``ratio_flag`` (:func:`ratio_flag`), ``n_man``, ``n_woman``,
        ``n_both``, ``n_neither``; ``ratio_expected`` / ``ratio_expected_raw``: the
        threshold-free Ratio of the same images (:func:`expected_ratio`);
        ``leakage``, ``LK_M``, ``LK_D`` (x100; None with
        ``leakage_error`` when too few labelled images of a group), ``leakage_std`` (over
        attacker rounds), ``leakage_protocol``; with ``f1_flips``: ``F1`` (the model's
        macro F1 x100 on the labelled test images), ``LK_D_F1`` (LK_D of ground truth
        perturbed to that F1, :func:`biaslab.metrics.leakage.lk_d_at_f1`), ``leakage_F1`` =
        ``LK_M - LK_D_F1`` and ``leakage_F1_clamped`` (the F1 lay outside the curve);
        diagnostics: ``gender_acc`` (% of unmasked
        images whose larger gender output is the true gender), ``masked_gender_acc`` (the
        same on masked images) and ``masked_gender_auc`` (ROC AUC x100 of ``p_man -
        p_woman`` on masked images: how much gender the context alone gives away,
        insensitive to a constant offset that moves Ratio); ``n_test``, ``n_labelled``.
        A model without gender outputs (``clf.has_gender`` False: Adversarial) has every
        Ratio / gender key None, ``ratio_flag`` ``"n/a"`` and ``ratio_na`` (:data:`RATIO_NA`,
        why); its mAP and Leakage are computed as for any model.

    Raises:
        ValueError: masked genders misaligned with the masked features, or only some of the
            ``train_*`` arguments.
    """
    given = [v is not None for v in (train_feats, train_objects, train_genders)]
    if any(given) and not all(given):
        raise ValueError("give all of train_feats, train_objects and train_genders, or none")
    probs = clf.predict_proba(test_feats)
    return evaluate_outputs(
        probs, test_objects, labelled, genders,
        clf.predict_proba(masked_feats) if masked_feats is not None and len(masked_feats)
        and clf.has_gender else None,
        masked_genders=masked_genders, n_objects=len(clf.labels), has_gender=clf.has_gender,
        gender_thr=gender_thresholds(clf) if clf.has_gender else (0.5, 0.5),
        object_pred=lambda p: object_predictions(clf, p),
        train_probs=clf.predict_proba(train_feats) if all(given) else None,
        train_objects=train_objects, train_genders=train_genders,
        leakage_kwargs=leakage_kwargs)


def evaluate_outputs(probs: np.ndarray, test_objects: np.ndarray, labelled: np.ndarray,
                     genders: Sequence[str], masked_probs: np.ndarray | None, *,
                     masked_genders: Sequence[str] | None = None, n_objects: int,
                     has_gender: bool = True, gender_thr: tuple[float, float] = (0.5, 0.5),
                     object_pred=None, train_probs: np.ndarray | None = None,
                     train_objects: np.ndarray | None = None,
                     train_genders: Sequence[str] | None = None,
                     leakage_kwargs: dict | None = None) -> dict:
    """:func:`evaluate` on a model's outputs instead of the model: the one code path of the
    classification metrics, shared by the trained classifiers and the control models
    (:mod:`biaslab.analysis.controls`).

    Args:
        probs: float (n, n_objects + 2) outputs on the unmasked test images (objects, then
            P(woman), P(man)), values in [0, 1].
        masked_probs: the same on the persons-masked images, or None (no Ratio).
        n_objects: the number of object outputs.
        has_gender: False for a model without gender outputs (Ratio is n/a).
        gender_thr: ``(woman, man)`` decision thresholds of the gender outputs.
        object_pred: outputs (k, n_objects + 2) -> the 0/1 object predictions the Leakage
            attacker sees (default: object outputs ``>= 0.5``).
        train_probs: outputs on the labelled training images (LK_M's attacker), or None.
        other arguments and the result: as :func:`evaluate`.
    """
    from biaslab.metrics.leakage import leakage_details
    from biaslab.models.objects import mean_average_precision
    if object_pred is None:
        def object_pred(q):
            return (np.asarray(q)[:, :n_objects] >= 0.5).astype(np.float32)
    labelled = np.asarray(labelled, bool)
    genders = np.asarray(list(genders), object)
    y = np.asarray(test_objects, np.float32)
    p = np.asarray(probs)
    n_obj = int(n_objects)
    masked_feats = masked_probs
    out: dict = {"n_test": int(len(p)), "n_labelled": int(labelled.sum())}
    if not has_gender:
        masked_feats = None   # Ratio is inapplicable (paper 000 Table 1, Adversarial)
        out.update({"ratio": None, "ratio_raw": None, "ratio_expected": None,
                    "ratio_expected_raw": None, "ratio_flag": RATIO_NA_FLAG,
                    "ratio_na": RATIO_NA, "gender_acc": None, "masked_gender_acc": None,
                    "masked_gender_auc": None,
                    **dict.fromkeys(("n_man", "n_woman", "n_both", "n_neither"))})
    if labelled.any() and n_obj:
        m, ap = mean_average_precision(y[labelled], p[labelled, :n_obj])
        out["mAP"] = 100.0 * m if np.isfinite(m) else None
        out["n_map_labels"] = int(np.isfinite(ap).sum())
    else:
        out["mAP"], out["n_map_labels"] = None, 0
    truth_man = genders == "male"
    if has_gender:
        out["gender_acc"] = float(100.0 * np.mean((p[:, -1] > p[:, -2]) == truth_man)) \
            if len(p) else None
    if masked_feats is not None and len(masked_feats):
        pm = np.asarray(masked_feats)
        mg = genders if masked_genders is None else np.asarray(list(masked_genders), object)
        if len(mg) != len(pm):
            raise ValueError(f"{len(pm)} masked images but {len(mg)} genders")
        masked_man = mg == "male"
        r = ratio_of((pm[:, -2], pm[:, -1]), thresholds=gender_thr)
        re = expected_ratio(pm[:, -2], pm[:, -1])
        out.update({"ratio": float(r["ratio_max"]), "ratio_raw": float(r["ratio"]),
                    "ratio_expected": float(re["ratio_max"]),
                    "ratio_expected_raw": float(re["ratio"]),
                    "ratio_flag": ratio_flag(r["ratio"]),
                    **{k: r[k] for k in ("n_man", "n_woman", "n_both", "n_neither")},
                    "masked_gender_acc": float(100.0 * np.mean((pm[:, -1] > pm[:, -2])
                                                               == masked_man)),
                    "masked_gender_auc": _auc(masked_man, pm[:, -1] - pm[:, -2])})
    given = [v is not None for v in (train_probs, train_objects, train_genders)]
    if any(given) and not all(given):
        raise ValueError("give all of train_probs, train_objects and train_genders, or none")
    kw = {"threshold": None, **(leakage_kwargs or {})}
    flips = tuple(kw.pop("f1_flips", None) or ())
    if all(given):
        kw.update(train_gt=np.asarray(train_objects, np.float32),
                  train_pred=object_pred(train_probs),
                  train_genders=list(train_genders))
    pred = object_pred(p)
    try:
        lk = leakage_details(y[labelled], pred[labelled], list(genders[labelled]), **kw)
        out.update({"leakage": lk["leakage"], "LK_M": lk["LK_M"], "LK_D": lk["LK_D"],
                    "leakage_std": lk["leakage_std"], "acc_M": lk["acc_M"],
                    "acc_D": lk["acc_D"], "leakage_protocol": lk["protocol"]})
    except ValueError as e:   # too few labelled images of a group
        out.update({"leakage": None, "leakage_error": str(e)})
    if flips and out.get("leakage") is not None and all(given) and n_obj:
        # Wang et al. 2019's leakage at the model's own performance: LK_D
        # of ground truth perturbed to the model's macro F1, beside paper 000's Eq. 7
        from biaslab.metrics.leakage import dataset_leakage_curve, lk_d_at_f1, macro_f1
        dkw = {k: v for k, v in kw.items() if k not in ("train_gt", "train_pred",
                                                        "train_genders", "threshold")}
        curve = dataset_leakage_curve(y[labelled], list(genders[labelled]),
                                      train_gt=kw["train_gt"],
                                      train_genders=kw["train_genders"], flips=flips, **dkw)
        f1 = macro_f1(y[labelled], pred[labelled])
        lk_d, clamped = lk_d_at_f1(curve, f1)
        out.update({"F1": f1, "LK_D_F1": lk_d, "leakage_F1": out["LK_M"] - lk_d,
                    "leakage_F1_clamped": clamped})
    return out


def _auc(truth: np.ndarray, score: np.ndarray):
    """ROC AUC x100 of ``score`` for the boolean ``truth`` (None with a single class)."""
    from sklearn.metrics import roc_auc_score
    truth = np.asarray(truth, bool)
    if truth.all() or not truth.any():
        return None
    return float(100.0 * roc_auc_score(truth, score))


def json_record(values: Sequence) -> dict:
    """:func:`biaslab.runtime.stats.record` of per-seed values (None / NaN = missing, +-inf = infinite,
    counted) with its numbers rounded by :func:`biaslab.runtime.io.json_number` for a metrics file:
    ``{"mean", "ci95", "std", "n", "n_inf", "n_missing", "sign"}``."""
    from biaslab.runtime import stats
    from biaslab.runtime.io import json_number
    return {k: json_number(v) for k, v in stats.record(list(values)).items()}


def attribute_leakage(test_pred: np.ndarray, test_objects: np.ndarray, labelled: np.ndarray,
                      test_groups: Sequence, train_pred: np.ndarray, train_objects: np.ndarray,
                      train_groups: Sequence, groups: Sequence[str],
                      leakage_kwargs: dict | None = None) -> dict:
    """Leakage of another protected attribute (paper 000 appendix B: skin tone,
    where "the classifiers predict objects only") from a model's object predictions: paper 000
    Eq. 7 with the attribute's groups in place of gender, the same protocol as the gender
    Leakage of :func:`evaluate` (attackers trained on the training images' ground truth /
    predictions, scored on the test images', group-balanced rounds; a K-way attacker for K
    groups, :func:`biaslab.metrics.leakage.leakage_details`).

    Args:
        test_pred: float32 (n, |O|) the model's object predictions the attacker sees
            (:func:`object_predictions`) on the test images.
        test_objects: (n, |O|) 0/1 ground truth of the same images.
        labelled: (n,) bool, images with an object annotation (the only ones used).
        test_groups: (n,) each test image's group, None where it has none (ignored).
        train_pred, train_objects, train_groups: the same for the attackers' training images.
        groups: the attribute's groups (e.g. ``("dark", "light")``).
        leakage_kwargs: :func:`biaslab.metrics.leakage.leakage` settings (``rounds``,
            ``seed``, ...) and ``f1_flips``: the flip probabilities of the accuracy-matched
            LK_D (as for gender in :func:`evaluate`).

    Returns:
        ``{"leakage", "LK_M", "LK_D", "leakage_std"}`` (x100), with ``f1_flips`` also ``"F1"``
        (the predictions' macro F1 x100 on the labelled test images), ``"LK_D_F1"`` (LK_D of
        ground truth perturbed to that F1, Wang et al. 2019 sec. 4.2,
        :func:`biaslab.metrics.leakage.lk_d_at_f1`), ``"leakage_F1"`` = LK_M - LK_D_F1 and
        ``"leakage_F1_clamped"``; or ``{"leakage": None, "leakage_error": reason}`` when a
        group has too few labelled images.
    """
    from biaslab.metrics.leakage import (dataset_leakage_curve, leakage_details, lk_d_at_f1,
                                         macro_f1)
    kw = {"threshold": None, **(leakage_kwargs or {})}
    flips = tuple(kw.pop("f1_flips", None) or ())
    lab = np.asarray(labelled, bool)
    tg = np.asarray(list(test_groups), object)
    gt = np.asarray(test_objects, np.float32)[lab]
    pred = np.asarray(test_pred, np.float32)[lab]
    train_gt = np.asarray(train_objects, np.float32)
    try:
        lk = leakage_details(gt, pred, list(tg[lab]), train_gt=train_gt,
                             train_pred=np.asarray(train_pred, np.float32),
                             train_genders=list(train_groups), groups=list(groups), **kw)
    except ValueError as e:
        return {"leakage": None, "leakage_error": str(e)}
    out = {"leakage": lk["leakage"], "LK_M": lk["LK_M"], "LK_D": lk["LK_D"],
           "leakage_std": lk["leakage_std"]}
    if flips and gt.shape[1]:
        # a noisier model leaks less just by being noisier: LK_D at the model's own F1
        dkw = {k: v for k, v in kw.items() if k != "threshold"}
        curve = dataset_leakage_curve(gt, list(tg[lab]), train_gt=train_gt,
                                      train_genders=list(train_groups), flips=flips,
                                      groups=list(groups), **dkw)
        f1 = macro_f1(gt, pred)
        lk_d, clamped = lk_d_at_f1(curve, f1)
        out.update({"F1": f1, "LK_D_F1": lk_d, "leakage_F1": out["LK_M"] - lk_d,
                    "leakage_F1_clamped": clamped})
    return out
