"""Control models for another protected attribute: the attribute's Leakage
(paper 000 Eq. 7 with the attribute's groups, appendix B) and LIC (thesis sec. 2.5.3) checked
against known answers, on any COCO-layout data that has the attribute's labels.

A control is a model whose bias is known by construction, a function of a test image's ground
truth (its objects, its group, its human captions); no training, no pixels. The gender controls
are :mod:`biaslab.analysis.controls`; these are their counterparts for ``skin`` (dark / light)
and ``gender_skin`` (four groups), fed through the same code that evaluates the trained models:
:func:`biaslab.classify.attribute_leakage` (the attribute block of ``eval_classifier``) and
:func:`biaslab.metrics.evaluate.evaluate_captions` with ``attribute=...`` (``eval_attribute``).

Classifier controls (object predictions only: paper 000 appendix B's classifiers predict objects):

``oracle``
    the true objects. The model attacker then sees exactly what the data attacker sees, on the
    same rows with the same initialisation (:func:`biaslab.metrics.leakage.leakage` pairs
    them), so ``LK_M = LK_D`` and Leakage = 0 **exactly**.
``amplifier@q``
    the true objects plus the *stereotype object* of the image's group
    (:func:`stereotype_by_group`: the object with the largest ``P(o | g) - P(o | not g)`` in the
    TRAINING split, so it exists on any data) predicted present with probability ``q``: the
    output tells the group more than the truth does, so Leakage **> 0** (95 % CI over
    replicates above 0). Where a group's stereotype is already present in nearly all its
    images the added object changes little, and the verdict may honestly read inconclusive.
``blind``
    no object ever predicted. The attacker sees one constant input, so it predicts one group
    for every image; on the group-balanced test rows of each round its accuracy is exactly
    ``1 / K`` and Eq. 7's LK_M (the true group's probability, counted only where the
    prediction is right) is at most that: ``LK_M < 100 / K``.

Captioner controls (one caption per test image with a group and a human caption):

``human``
    a held-out human caption of the image (drawn per image and replicate; LIC_D then reads the
    others): the data's own bias, so LIC **≈ 0** (an equivalence claim: the 90 % CI over
    replicates within a margin of the strongest amplifier's effect, ``decide_equivalence``).
``amplifier@q``
    the same drawn human caption with "with a <stereotype object of the image's group>"
    appended with probability ``q``: a word that tells the group beyond the human captions, so
    LIC **> 0**, judged paired with the human control (the per-replicate difference
    amplifier - human > 0: both share the drawn caption, the LIC classifier seed and LIC_D, so
    the difference is what the appended word adds;
    :func:`biaslab.analysis.controls_eval.judge_paired`).

Decisions:

* The stereotype is one-vs-rest per group (for two groups it is the gender controls' rule,
  :func:`biaslab.analysis.controls.stereotype_objects`); ties break by label order.
* The label space is the classifiers' (``biaslab.classify.select_labels`` of the training split
  under ``classifier.min_cooccur`` / ``cooccur_rule``), so the attackers see what they see in
  ``eval_classifier``.
* Each replicate seed drives the controls' own draws and the attackers' seed (Leakage: the
  rounds' seed; LIC: the LIC classifier seed), as in stage ``controls``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:   # annotations only: controls_eval is imported where it is used
    from biaslab.analysis.controls_eval import ControlsSettings
    from biaslab.captioning.table2 import LicSettings

CLASSIFIER_CONTROLS = ("oracle", "amplifier", "blind")
CAPTIONER_CONTROLS = ("human", "amplifier")


def control_name(kind: str, q: float | None = None) -> str:
    """``amplifier@0.5``, ``oracle``, ``blind``, ``human``."""
    return f"amplifier@{float(q):g}" if kind == "amplifier" else kind


def stereotype_by_group(object_lists: Sequence[Sequence[str]], groups: Sequence,
                        labels: Sequence[str], group_names: Sequence[str]) -> dict[str, str]:
    """The stereotype object of each group: the label with the largest ``P(o | g) - P(o | not
    g)`` over the given (training) images that have a group; ties broken by label order.

    Args:
        object_lists: per image, the object names present.
        groups: per image, its group (None / a name outside ``group_names``: ignored).
        labels: candidate objects.
        group_names: the attribute's groups (e.g. ``("dark", "light")``).

    Returns:
        ``{group: object name}`` for every group of ``group_names``.

    Raises:
        ValueError: no label, or a group (or its complement) without an image.
    """
    if not labels:
        raise ValueError("no object label to pick a stereotype from")
    from biaslab.classify import object_matrix
    g = np.asarray([x if x in group_names else None for x in groups], object)
    keep = g != None  # noqa: E711 (elementwise on an object array)
    y = object_matrix(list(object_lists), list(labels)).astype(np.float64)[keep]
    g = g[keep]
    missing = [x for x in group_names if not (g == x).any()]
    if missing:
        raise ValueError(f"no training image of group(s) {missing}")
    out = {}
    for name in group_names:
        inside = g == name
        if inside.all():
            raise ValueError(f"no training image outside group {name!r}")
        diff = y[inside].mean(0) - y[~inside].mean(0)
        out[str(name)] = str(labels[int(np.argmax(diff))])
    return out


def _rng(seed: int, name: str, image_id: int) -> np.random.Generator:
    # one stream per (seed, control, image): a control's output never depends on the others
    return np.random.default_rng([int(seed), 0xA7, int(image_id), *name.encode()])


def _check_control(model: str, kind: str, known: Sequence[str], q: float,
                   stereotypes: Mapping[str, str] | None) -> None:
    """ValueError for an unknown control, a q outside [0, 1] or an amplifier without
    stereotypes (the checks :func:`classifier_outputs` and :func:`captioner_captions` share)."""
    if kind not in known:
        raise ValueError(f"unknown {model} control {kind!r}; known: {tuple(known)}")
    if not 0.0 <= float(q) <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    if kind == "amplifier" and not stereotypes:
        raise ValueError("the amplifier needs the stereotype objects")


def classifier_outputs(kind: str, image_ids: Sequence[int], object_lists: Sequence,
                       groups: Sequence, labels: Sequence[str], *, q: float = 0.0,
                       stereotypes: Mapping[str, str] | None = None, seed: int = 0) -> np.ndarray:
    """Object predictions of one classifier control, float32 (n, |labels|), 0/1.

    Args:
        kind: one of :data:`CLASSIFIER_CONTROLS`.
        image_ids, object_lists, groups: per image, its id, true objects and group (None: no
            group; the amplifier leaves such an image as the oracle does).
        labels: the label space (column order).
        q: the amplifier's rate in [0, 1].
        stereotypes: ``{group: object}`` (:func:`stereotype_by_group`; amplifier only).
        seed: the replicate's seed.

    Raises:
        ValueError: unknown kind, q outside [0, 1], an amplifier without stereotypes.
    """
    from biaslab.classify import object_matrix
    _check_control("classifier", kind, CLASSIFIER_CONTROLS, q, stereotypes)
    y = object_matrix(list(object_lists), list(labels))
    if kind == "blind":
        return np.zeros_like(y)
    if kind == "amplifier":
        name = control_name(kind, q)
        col = {c: k for k, c in enumerate(labels)}
        for r, (i, g) in enumerate(zip(image_ids, groups)):
            o = stereotypes.get(g) if g is not None else None
            if o in col and _rng(seed, name, int(i)).random() < float(q):
                y[r, col[o]] = 1.0
    return y


def drawn_caption(image_id: int, captions: Sequence[str], seed: int) -> str:
    """The human caption the captioner controls start from for an image and replicate (one
    stream per (seed, image), so the human control and every amplifier share it)."""
    return list(captions)[int(_rng(seed, "caption", int(image_id)).integers(len(captions)))]


def captioner_captions(kind: str, image_ids: Sequence[int], groups: Mapping[int, str],
                       human: Mapping[int, Sequence[str]], *, q: float = 0.0,
                       stereotypes: Mapping[str, str] | None = None,
                       seed: int = 0) -> dict[int, str]:
    """One caption per image of a captioner control: a human caption of the image drawn per
    (image, replicate), with the amplifier's stereotype object of the image's group appended
    ("..., with a bicycle") with probability ``q``. Images without a human caption get none.

    Raises:
        ValueError: unknown kind, q outside [0, 1], an amplifier without stereotypes.
    """
    _check_control("captioner", kind, CAPTIONER_CONTROLS, q, stereotypes)
    out = {}
    for i in (int(x) for x in image_ids):
        caps = list(human.get(i) or ())
        if not caps:
            continue
        cap = drawn_caption(i, caps, seed)
        g = groups.get(i)
        if kind == "amplifier" and g in stereotypes and \
                _rng(seed, control_name(kind, q), i).random() < float(q):
            obj = stereotypes[g]
            cap = f"{cap.rstrip(' .')} with {'an' if obj[:1] in 'aeiou' else 'a'} {obj}."
        out[i] = cap
    return out


def expected_classifier(kind: str, q: float = 0.0, n_groups: int = 2) -> dict:
    """Known answers of a classifier control: ``{metric: {"value", "rule": "exact"} |
    {"direction", "reference"}}`` (module docstring)."""
    if kind == "oracle" or (kind == "amplifier" and not q):
        return {"Leakage": {"value": 0.0, "rule": "exact"},
                "LK_M - LK_D": {"value": 0.0, "rule": "exact"}}
    if kind == "amplifier":
        return {"Leakage": {"direction": ">", "reference": 0.0}}
    return {"LK_M": {"direction": "<", "reference": 100.0 / n_groups}}


def expected_captioner(kind: str, q: float = 0.0) -> dict:
    """Known answers of a captioner control (module docstring)."""
    if kind == "amplifier" and q:
        return {"LIC": {"direction": ">", "reference": 0.0,
                        "paired_with": control_name("human", 0.0)}}
    return {"LIC": {"direction": "≈", "reference": 0.0}}


def _groups_of(table: pd.DataFrame, groups: Mapping[int, str]) -> list:
    return [groups.get(int(i)) for i in table["image_id"]]


def classifier_controls(test: pd.DataFrame, train: pd.DataFrame, labels: Sequence[str],
                        groups: Mapping[int, str], group_names: Sequence[str],
                        stereotypes: Mapping[str, str], qs: Sequence[float],
                        seeds: Sequence[int], rounds: int) -> tuple[dict, dict]:
    """Every classifier control through :func:`biaslab.classify.attribute_leakage`, once per
    replicate seed.

    Args:
        test, train: :func:`biaslab.classify.test_table` of the test split and of the labelled
            training images (columns ``image_id``, ``objects``, ``labelled``).
        labels: the label space; groups: ``{image_id: group}``; group_names: the groups.
        stereotypes: :func:`stereotype_by_group` of the training images.
        qs: the amplifier's rates; seeds: replicate seeds; rounds: attacker rounds.

    Returns:
        ``(judged, raw)``: ``{control: {metric: {"expected", "measured", "verdict"} |
        {"measured"}}}`` and ``{control: {metric: [value per seed]}}``.
    """
    from biaslab.analysis.controls_eval import judge
    from biaslab.classify import attribute_leakage, json_record, object_matrix
    from biaslab.runtime import stats
    y_test = object_matrix(list(test["objects"]), labels)
    y_train = object_matrix(list(train["objects"]), labels)
    g_test, g_train = _groups_of(test, groups), _groups_of(train, groups)
    lab = test["labelled"].to_numpy()
    kinds = [("oracle", 0.0)] + [("amplifier", float(q)) for q in qs] + [("blind", 0.0)]
    out, raw = {}, {}
    for kind, q in kinds:
        name = control_name(kind, q)
        vals: dict[str, list] = {}
        for s in seeds:
            kw = dict(q=q, stereotypes=stereotypes, seed=int(s))
            p_test = classifier_outputs(kind, test["image_id"], test["objects"], g_test,
                                        labels, **kw)
            p_train = classifier_outputs(kind, train["image_id"], train["objects"], g_train,
                                         labels, **kw)
            r = attribute_leakage(p_test, y_test, lab, g_test, p_train, y_train, g_train,
                                  list(group_names), {"rounds": int(rounds), "seed": int(s)})
            lk = r.get("leakage")
            vals.setdefault("Leakage", []).append(lk)
            vals.setdefault("LK_M", []).append(r.get("LK_M"))
            vals.setdefault("LK_D", []).append(r.get("LK_D"))
            vals.setdefault("LK_M - LK_D", []).append(
                None if lk is None else float(r["LK_M"]) - float(r["LK_D"]))
        exp = expected_classifier(kind, q, len(group_names))
        out[name] = {k: judge(exp[k], stats.record(list(v))) if k in exp else
                     {"measured": json_record(v)} for k, v in vals.items()}
        raw[name] = vals
    return out, raw


def captioner_controls(ids: Sequence[int], groups: Mapping[int, str],
                       human: Mapping[int, Sequence[str]], stereotypes: Mapping[str, str],
                       qs: Sequence[float], seeds: Sequence[int], attribute: str, lic: LicSettings,
                       words: str, workers: int = 1) -> tuple[dict, dict]:
    """Every captioner control through :func:`biaslab.metrics.evaluate.evaluate_captions`
    (``attribute``'s LIC: skin unmasked, gender_skin with gender words masked), one job per
    (control, seed) on ``workers`` forked processes, its attacker ``lic``
    (:class:`biaslab.captioning.table2.LicSettings`); returns ``(judged, raw)`` as
    :func:`classifier_controls`."""
    from biaslab.analysis.controls_eval import judge_control
    from biaslab.runtime.parallel import map_jobs
    kinds = [("human", 0.0)] + [("amplifier", float(q)) for q in qs]
    jobs = [(k, q, int(s)) for k, q in kinds for s in seeds]

    def one(job):
        from biaslab.analysis.attribute_eval import flat_metrics
        from biaslab.metrics.evaluate import evaluate_captions
        kind, q, s = job
        preds = captioner_captions(kind, ids, groups, human, q=q, stereotypes=stereotypes,
                                   seed=s)
        # the drawn caption is held out of LIC_D's references
        ref = {i: [c for c in v if c != drawn_caption(i, v, s)] or list(v)
               for i, v in human.items() if v}
        det = evaluate_captions(preds, groups, ref, metrics=("lic",), words=words,
                                classifier=lic.classifier, preset=lic.preset, seeds=[s],
                                num_threads=lic.num_threads,
                                max_human_captions=lic.max_human_captions,
                                attribute=attribute)
        return flat_metrics(det, attribute)

    results = map_jobs(one, jobs, workers)
    out, raw = {}, {}
    for kind, q in kinds:
        name = control_name(kind, q)
        rows = [r for (k, qq, _), r in zip(jobs, results) if (k, qq) == (kind, q)]
        vals = {m: [r.get(m) for r in rows] for m in ("LIC", "LIC_M", "LIC_D")}
        raw[name] = vals    # human comes first: the amplifiers are judged paired with it
        out[name] = judge_control(expected_captioner(kind, q), vals, raw)
    return out, raw


def summary(*parts: Mapping) -> dict:
    """``{"matches", "does_not_match", "inconclusive", "n"}`` over the judged metrics."""
    v = [m["verdict"] for part in parts for ctl in part.values() for m in ctl.values()
         if "verdict" in m]
    return {"matches": v.count("matches"), "does_not_match": v.count("does not match"),
            "inconclusive": v.count("inconclusive"), "n": len(v)}


def run(settings: ControlsSettings, images: pd.DataFrame, objects: pd.DataFrame,
        persons: pd.DataFrame, labels_df: pd.DataFrame, split: pd.DataFrame,
        captions: pd.DataFrame, perceived: pd.DataFrame | None) -> dict:
    """The record of ``metrics/controls_attribute.json`` for ``settings.attribute``.

    Args:
        settings: :class:`biaslab.analysis.controls_eval.ControlsSettings` (``attribute``,
            ``q``, ``seeds``, ``workers``, ``min_cooccur``, ``cooccur_rule``,
            ``leakage_rounds``, ``lic``, ``words``, ``margin_fraction``).
        images, objects, persons, captions: ``data/prepared/*.parquet``; perceived:
            ``data/prepared/perceived_gender.parquet`` (its ``skin`` column) or None.
        labels_df, split: ``data/labels/images.parquet``, ``data/split.parquet``.

    Returns:
        ``{"attribute", "groups", "stereotypes", "labels", "replicates", "test_set",
        "classifier": {control: {metric: judged}}, "captioner": {...} | {"skipped": why},
        "summary"}``; for ``attribute: gender`` only ``{"attribute", "skipped"}`` (the gender
        controls are stage ``controls``'s).

    Raises:
        InputError: no skin labels, no labelled test / training image of a group, no label.
    """
    from biaslab.analysis import attribute_eval as A
    from biaslab.analysis.controls_eval import control_tables, decide_equivalence
    from biaslab.runtime.io import NO_CAPTIONS, InputError
    attribute = settings.attribute
    if attribute == "gender":
        return {"attribute": attribute, "skipped": "attribute gender: its controls are stage "
                                                   "controls' (metrics/controls.json)"}
    group_names = list(A.attribute_groups(attribute))
    seeds, qs = list(settings.seeds), list(settings.q)
    genders = {int(i): str(g) for i, g in zip(labels_df["image_id"], labels_df["gender"])}
    groups = A.group_labels(attribute, genders, perceived)
    test, train, labels = control_tables(images, labels_df, split, objects, persons, settings)
    try:
        stereo = stereotype_by_group(list(train["objects"]), _groups_of(train, groups), labels,
                                     group_names)
    except ValueError as err:
        raise InputError("data/split.parquet", f"training split, attribute {attribute}: "
                                               f"{err}") from err
    clf, _ = classifier_controls(test, train, labels, groups, group_names, stereo, qs, seeds,
                                 settings.leakage_rounds)
    test_ids = set(split.loc[split["split"] == "test", "image_id"].astype(int))
    caps = captions.sort_values(["image_id", "caption_id"]) if len(captions) else captions
    human = {int(i): list(g["caption"].astype(str)) for i, g in
             caps[caps["image_id"].isin(test_ids)].groupby("image_id")} if len(caps) else {}
    cap_ids = sorted(i for i in human if i in groups)
    if cap_ids:
        cap, _ = captioner_controls(cap_ids, {i: groups[i] for i in cap_ids}, human, stereo,
                                    qs, seeds, attribute, settings.lic, settings.words,
                                    settings.workers)
    else:
        cap = {"skipped": NO_CAPTIONS if not len(caps) else
               "no test image with a human caption and a group"}

    clf = decide_equivalence(clf, settings.margin_fraction)
    if "skipped" not in cap:
        cap = decide_equivalence(cap, settings.margin_fraction)

    def per_group(ids):
        return {g: int(sum(groups.get(int(i)) == g for i in ids)) for g in group_names}
    lab_test = test.loc[test["labelled"], "image_id"]
    return {"attribute": attribute, "groups": group_names, "stereotypes": stereo,
            "labels": list(labels), "replicates": seeds, "q": qs,
            "test_set": {"classifier": {"n_labelled_by_group": per_group(lab_test)},
                         "leakage_train": {"n_by_group": per_group(train["image_id"])},
                         "captioner": {"n_by_group": per_group(cap_ids)}},
            "classifier": clf, "captioner": cap,
            "summary": summary(clf, cap if "skipped" not in cap else {})}


__all__ = ["CLASSIFIER_CONTROLS", "CAPTIONER_CONTROLS", "control_name", "stereotype_by_group",
           "classifier_outputs", "drawn_caption", "captioner_captions", "expected_classifier",
           "expected_captioner", "classifier_controls", "captioner_controls", "summary", "run"]
