"""Control models: every bias metric checked against a known answer.

A trained model mixes two unknowns, what the metric measures and what the model learned. A
*control* is a model whose bias is known by construction: a deterministic function of the
ground truth of a test image (no training, no pixels). Feeding controls through the same
metric code as the trained models tells whether a metric can see a bias on this data at all.

Controls (both tasks unless said; ``q`` = the amplifier's rate, a parameter):

``person_oracle``
    gender from the person alone (the true gender), objects = the true labels; reads no
    context. On persons-masked images it sees no person and outputs P(man) = P(woman) = 0.5.
    Captions: a fresh draw of the generator's own caption grammar
    (:func:`biaslab.data.synthetic.captions.template_caption`) for the true gender, scene and objects, so they are
    distributed as the human captions are.
``context_reader`` (and ``context_reader[<attribute>]``)
    gender from the planted context alone, person ignored, objects as the oracle: the sign of
    the log-likelihood ratio of the context under the generator (:func:`context_llr`, the
    Bayes decision from the attributes it reads; a tie -- no evidence -- gives 0.5 / 0.5 and
    a gender-neutral caption). It reads the same context with the person masked, so its
    masked-image Ratio is the context-implied man/woman ratio. The per-attribute readers read
    one planted attribute each (the causal probe's controls: their sensitivity to that
    attribute is the full swing of the output, 2, and 0 to the others).
``amplifier@q``
    the oracle's outputs plus the *stereotype object* of the predicted gender (the object whose
    share P(o | g) - P(o | other) in the TRAINING split is largest: data, not the generator's
    tables, so it exists on any COCO-layout data) predicted present / named in the caption
    with probability ``q``. ``q = 0`` is the oracle.
``constant_man``
    always "man" (P(man) = 1, P(woman) = 0, every caption "a man ..."): Ratio is infinite
    (counted as such), Error = the share of women.
``human`` (captioning only)
    a held-out human caption of the same image (one drawn per image and seed; LIC_D then
    uses the others).

Expected values (:func:`expected_classifier`, :func:`expected_captioner`) are computed from the
test set's ground truth directly, not through the metric code, and where a value is only known
as a direction ("> 0") the verdict reads the measured 95 % CI; one known as "≈ x" is an
equivalence claim with a margin of ``validity.margin_fraction`` of the strongest amplifier's
effect on that metric in the same run (``biaslab.analysis.controls_eval.decide_equivalence``).

The context reader needs the generator's planted truth (``annotations/synth_truth.csv``,
:func:`biaslab.data.synthetic.read_truth`) and bias; on data without it (real COCO) only the
controls that need no planted truth run (oracle from the perceived-gender labels and the
annotated objects, amplifier, constant, human).

Decisions:

* Ties of the context reader: P(man) = P(woman) = 0.5. The classifier evaluation counts
  ``P(man) > P(woman)`` as "man" and else "woman" (``biaslab.classify.evaluate``), so a tie
  counts as "woman" in the gender decision (Error), and as both at the 0.5 thresholds of the
  Ratio; the expected values follow the same rule.
* Objects hidden by the persons' black box are still "read" by the context reader (the truth
  does not say which are occluded); the synthetic generator places objects outside the
  person's placement box when it can.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from biaslab.data import synthetic as S
from biaslab.data.synthetic import captions as SC
from biaslab.analysis import equivalence

FEMALE, MALE = "female", "male"
ATTRIBUTES = ("objects", "scene", "cast")
CLASSIFIER_CONTROLS = ("person_oracle", "context_reader", "amplifier", "constant_man")
CAPTIONER_CONTROLS = CLASSIFIER_CONTROLS + ("human",)
#: controls that need the generator's planted truth
NEEDS_TRUTH = ("context_reader",)
#: DBAC's flat metric names (registry kind ``metrics``) judged on the controls
DBAC_KEYS = ("DBAC_T_to_A", "DBAC_A_to_T", "DBAC_direct_T_to_A", "DBAC_direct_A_to_T")


def control_name(kind: str, q: float | None = None, reads: Sequence[str] | None = None) -> str:
    """Stable name of a control: ``amplifier@0.5``, ``context_reader[cast]``, ``person_oracle``."""
    if kind == "amplifier":
        return f"amplifier@{float(q):g}"
    if kind == "context_reader" and reads is not None and tuple(reads) != ATTRIBUTES:
        return f"context_reader[{'+'.join(reads)}]"
    return kind


# --------------------------------------------------------------------------- context evidence
def evidence_weights(bias: float, p_object: float = S.P_OBJECT) -> tuple[float, float]:
    """``(w_obj, w_ctx)``: the generator's log-likelihood ratio log P(context | male) /
    P(context | female) is ``w_obj * (#male-associated objects present - #female-associated
    present) + w_ctx * (s_scene + s_cast)`` with ``s = +1`` for a male-associated value and
    ``-1`` for a female-associated one (``biaslab.data.synthetic`` module docstring: P(object | g) =
    p (1 + s b), P(scene | g) = (1 + s b) / 4, P(warm | female) = (1 + b) / 2).

    ``w_ctx = log((1 + b) / (1 - b))``; ``w_obj = w_ctx + log((1 - p (1 - b)) / (1 - p (1 + b)))``
    (the present term plus the absent term of the same object, as there are equally many
    male- and female-associated objects). Both are 0 at b = 0 and +inf at b = 1.

    Raises:
        ValueError: bias outside [0, 1] or p_object outside (0, 0.5].
    """
    b = float(bias)
    if not 0.0 <= b <= 1.0:
        raise ValueError(f"bias must be in [0, 1], got {bias!r}")
    if not 0.0 < p_object <= 0.5:
        raise ValueError(f"p_object must be in (0, 0.5], got {p_object!r}")
    if b == 1.0:
        return math.inf, math.inf
    w_ctx = math.log1p(b) - math.log1p(-b)
    w_obj = w_ctx + math.log((1 - p_object * (1 - b)) / (1 - p_object * (1 + b)))
    return w_obj, w_ctx


def context_counts(scene: str, cast: str, objects: Sequence[str]) -> tuple[int, int, int]:
    """``(d_obj, s_scene, s_cast)``: #male- minus #female-associated objects present, and +1 /
    -1 for a male- / female-associated scene and cast (0 for a neutral or unknown value)."""
    assoc = {FEMALE: -1, MALE: 1}
    d = sum(assoc.get(S.OBJECT_ASSOCIATION.get(o, "neutral"), 0) for o in set(objects))
    return (int(d), assoc.get(S.SCENE_ASSOCIATION.get(scene), 0),
            assoc.get(S.CAST_ASSOCIATION.get(cast), 0))


def context_llr(truth: pd.DataFrame, bias: float, reads: Sequence[str] = ATTRIBUTES
                ) -> np.ndarray:
    """log P(context | male) / P(context | female) of each row, float64 (n,), reading only the
    attributes in ``reads`` (:func:`evidence_weights`). ``truth``: columns ``scene``, ``cast``,
    ``objects`` (lists of names). 0 where the read attributes carry no evidence (b = 0, or
    balanced evidence); +-inf at b = 1.

    Raises:
        ValueError: an unknown attribute in ``reads``.
    """
    bad = [a for a in reads if a not in ATTRIBUTES]
    if bad:
        raise ValueError(f"unknown context attribute(s) {bad}; known: {ATTRIBUTES}")
    w_obj, w_ctx = evidence_weights(bias)
    out = np.zeros(len(truth), np.float64)
    for k, (sc, ca, ob) in enumerate(zip(truth["scene"], truth["cast"], truth["objects"])):
        d, s1, s2 = context_counts(sc, ca, ob)
        terms = [(w_obj, d if "objects" in reads else 0),
                 (w_ctx, (s1 if "scene" in reads else 0) + (s2 if "cast" in reads else 0))]
        # 0 * inf is no evidence, not NaN; contradictory infinite evidence cannot occur at b = 1
        v = sum(w * c for w, c in terms if c != 0)
        out[k] = 0.0 if (isinstance(v, float) and math.isnan(v)) else float(v)
    return out


def context_gender(llr: np.ndarray) -> np.ndarray:
    """The context reader's decision per row: ``"male"`` (llr > 0), ``"female"`` (< 0) or
    ``""`` (a tie: no evidence), object array (n,)."""
    llr = np.asarray(llr, np.float64)
    return np.where(llr > 0, MALE, np.where(llr < 0, FEMALE, "")).astype(object)


# --------------------------------------------------------------------------- stereotypes
def stereotype_objects(object_lists: Sequence[Sequence[str]], genders: Sequence[str],
                       labels: Sequence[str]) -> dict[str, str]:
    """The stereotype object of each gender: the label with the largest ``P(o | g) -
    P(o | other gender)`` among the given (training) images; ties broken by label order.

    Args:
        object_lists: per image, the object names present.
        genders: per image, ``female`` / ``male`` (other values ignored).
        labels: candidate objects.

    Returns:
        ``{"female": name, "male": name}``.

    Raises:
        ValueError: no image of a gender, or no label.
    """
    if not labels:
        raise ValueError("no object label to pick a stereotype from")
    g = np.asarray(list(genders), object)
    y = np.zeros((len(g), len(labels)), np.float64)
    idx = {c: k for k, c in enumerate(labels)}
    for r, objs in enumerate(object_lists):
        for o in objs or ():
            if o in idx:
                y[r, idx[o]] = 1.0
    out = {}
    for a, b in ((FEMALE, MALE), (MALE, FEMALE)):
        if not (g == a).any() or not (g == b).any():
            raise ValueError(f"no training image of gender {a if not (g == a).any() else b}")
        diff = y[g == a].mean(0) - y[g == b].mean(0)
        out[a] = labels[int(np.argmax(diff))]
    return out


def stereotype_direction(test: pd.DataFrame, stereotypes: Mapping[str, str] | None,
                         rule: str = "dba") -> str | None:
    """The sign a directional amplification metric (BiasAmp, DBA_O) must show for the
    amplifier on ``test`` (columns ``gender``, ``objects``): adding the stereotype object
    ``o_g`` to gender g's predictions raises P̂(o_g | g), which counts positively where the
    test set's own truth associates o_g with g (``P(g, o_g) > P(g) P(o_g)``, thesis Eq. 2.13's
    y) and negatively where it does not. ``">"`` when both genders' stereotypes are
    associated with them in the test set, ``"<"`` when neither is, None when mixed or when an
    object never occurs (e.g. at planted bias 0 the training split's stereotype is noise and
    the test set may associate it with the other gender).

    ``rule="biasamp"``: Zhao et al.'s BiasAmp counts the pair (a, o) where ``b(a, o) = c(a, o)
    / sum_a' c(a', o) > 1 / |A|`` (thesis Eq. 2.3), which ignores the groups' base rates: on
    a test set with 2.3 men per woman (COCO) nearly every object counts for "man", so adding a
    woman's stereotype object to women's predictions LOWERS BiasAmp. The direction is then
    the sign the counted pairs give: + for ``c(g, o_g) > c(other, o_g)``, - otherwise."""
    if not stereotypes:
        return None
    if rule not in ("dba", "biasamp"):
        raise ValueError(f"rule must be 'dba' or 'biasamp', got {rule!r}")
    g = np.asarray(list(test["gender"]), object)
    ys = []
    for gender, o in stereotypes.items():
        has = np.array([o in (objs or ()) for objs in test["objects"]], bool)
        if not has.any() or not (g == gender).any():
            return None
        p_go = float(np.mean(has & (g == gender)))
        if rule == "dba":
            ys.append(p_go > float(np.mean(g == gender)) * float(np.mean(has)))
        else:
            ys.append(p_go > float(np.mean(has & (g != gender))))
    return ">" if all(ys) else "<" if not any(ys) else None


def _rng(seed: int, control: str, image_id: int) -> np.random.Generator:
    # one stream per (seed, control, image): a control's output never depends on the others
    key = [int(b) for b in control.encode()]
    return np.random.default_rng([int(seed), 0xC0, int(image_id), *key])


# --------------------------------------------------------------------------- classifier
def classifier_outputs(kind: str, test: pd.DataFrame, labels: Sequence[str], *,
                       bias: float | None = None, q: float = 0.0,
                       reads: Sequence[str] = ATTRIBUTES,
                       stereotypes: Mapping[str, str] | None = None, seed: int = 0,
                       name: str | None = None) -> dict:
    """Outputs of one classifier control on a table of images.

    Args:
        kind: one of :data:`CLASSIFIER_CONTROLS`.
        test: columns ``image_id``, ``gender`` (the true female / male), ``objects`` (lists);
            ``scene``, ``cast`` for the context reader.
        labels: the object label space (output order).
        bias: the generator's planted bias (context reader only).
        q: the amplifier's rate in [0, 1].
        reads: attributes the context reader reads.
        stereotypes: ``{"female": obj, "male": obj}`` (amplifier; :func:`stereotype_objects`).
        seed: seed of the amplifier's draws.
        name: the control's name in the random streams (default :func:`control_name`).

    Returns:
        ``{"probs": float32 (n, |labels| + 2) in the classifier's layout (objects, then
        P(woman), P(man)) on the unmasked images, "probs_masked": the same on the persons-
        masked images}``; object columns are 0/1.

    Raises:
        ValueError: an unknown kind, a missing bias / stereotype, q outside [0, 1].
    """
    from biaslab.classify import object_matrix
    if kind not in CLASSIFIER_CONTROLS:
        raise ValueError(f"unknown classifier control {kind!r}; known: {CLASSIFIER_CONTROLS}")
    if not 0.0 <= float(q) <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    name = name or control_name(kind, q, reads)
    n = len(test)
    objs = object_matrix(list(test["objects"]), list(labels))
    gender = np.asarray(list(test["gender"]), object)
    p_man = (gender == MALE).astype(np.float32)
    p_man_masked = np.full(n, 0.5, np.float32)      # no person: no evidence
    if kind == "context_reader":
        if bias is None:
            raise ValueError("the context reader needs the planted bias")
        dec = context_gender(context_llr(test, bias, reads))
        p_man = np.where(dec == MALE, 1.0, np.where(dec == FEMALE, 0.0, 0.5)).astype(np.float32)
        p_man_masked = p_man.copy()
    elif kind == "constant_man":
        p_man = np.ones(n, np.float32)
        p_man_masked = p_man.copy()
    elif kind == "amplifier":
        if not stereotypes:
            raise ValueError("the amplifier needs the stereotype objects")
        col = {c: k for k, c in enumerate(labels)}
        for r, (i, g) in enumerate(zip(test["image_id"], gender)):
            o = stereotypes.get(g)
            if o in col and _rng(seed, name, int(i)).random() < float(q):
                objs[r, col[o]] = 1.0
    p_woman = np.where(p_man == 0.5, 0.5, 1.0 - p_man).astype(np.float32)
    p_woman_masked = np.where(p_man_masked == 0.5, 0.5, 1.0 - p_man_masked).astype(np.float32)
    if kind == "constant_man":
        p_woman = np.zeros(n, np.float32)
        p_woman_masked = np.zeros(n, np.float32)
    return {"probs": np.column_stack([objs, p_woman, p_man]).astype(np.float32),
            "probs_masked": np.column_stack([objs, p_woman_masked, p_man_masked])
            .astype(np.float32)}


def probe_outputs(kind: str, pairs: pd.DataFrame, *, bias: float,
                  reads: Sequence[str] = ATTRIBUTES) -> np.ndarray:
    """The classifier probe output ``P(man) - P(woman)`` of a control on the probe images
    (``pairs``: ``biaslab.data.synthetic.read_probe``; the person is masked in the probe, so the
    oracle and the amplifier output 0), float64 (len(pairs),)."""
    t = pd.DataFrame({"image_id": np.arange(len(pairs)), "gender": [""] * len(pairs),
                      "scene": list(pairs["scene"]), "cast": list(pairs["cast"]),
                      "objects": [[o for o in str(v).split(";") if o] for v in pairs["objects"]]})
    if kind == "context_reader":
        dec = context_gender(context_llr(t, bias, reads))
        return np.where(dec == MALE, 1.0, np.where(dec == FEMALE, -1.0, 0.0))
    if kind == "constant_man":
        return np.ones(len(pairs))
    return np.zeros(len(pairs))


# --------------------------------------------------------------------------- captioner
def _append(caption: str, obj: str, rng: np.random.Generator) -> str:
    noun = SC.pick(rng, SC.NOUN[obj]) if obj in SC.NOUN else obj
    return caption.rstrip(". ") + " with " + SC.article(noun) + ("." if caption.endswith(".")
                                                                 else "")


def captioner_captions(kind: str, test: pd.DataFrame, *, bias: float | None = None,
                       q: float = 0.0, reads: Sequence[str] = ATTRIBUTES,
                       stereotypes: Mapping[str, str] | None = None,
                       human: Mapping[int, Sequence[str]] | None = None, seed: int = 0,
                       name: str | None = None) -> dict[int, str]:
    """One caption per image of a captioner control, built from the synthetic generator's
    caption grammar (:func:`biaslab.data.synthetic.captions.template_caption`, with no gender-neutral subject)
    so every caption metric runs on it unchanged.

    Args:
        kind: one of :data:`CAPTIONER_CONTROLS`.
        test: columns ``image_id``, ``gender``, ``objects``, and ``scene`` (the grammar needs
            a scene: on data without one, a scene is drawn uniformly -- no gender evidence),
            ``cast`` for the context reader.
        human: image id -> human captions (``human`` control: one of them, drawn per image
            and seed, is returned).
        bias, q, reads, stereotypes, seed, name: as :func:`classifier_outputs`.

    Returns:
        image id -> caption.

    Raises:
        ValueError: an unknown kind, missing inputs.
    """
    if kind not in CAPTIONER_CONTROLS:
        raise ValueError(f"unknown captioner control {kind!r}; known: {CAPTIONER_CONTROLS}")
    name = name or control_name(kind, q, reads)
    ids = [int(i) for i in test["image_id"]]
    if kind == "human":
        if human is None:
            raise ValueError("the human control needs the human captions")
        return {i: list(human[i])[int(_rng(seed, name, i).integers(len(human[i])))]
                for i in ids if human.get(i)}
    gender = list(test["gender"])
    if kind == "context_reader":
        if bias is None:
            raise ValueError("the context reader needs the planted bias")
        gender = [g or None for g in context_gender(context_llr(test, bias, reads))]
    elif kind == "constant_man":
        gender = [MALE] * len(ids)
    if kind == "amplifier" and not stereotypes:
        raise ValueError("the amplifier needs the stereotype objects")
    scenes = list(test["scene"]) if "scene" in test.columns else [None] * len(ids)
    # the amplifier is the oracle's caption plus the stereotype: it draws the oracle's stream,
    # so the two differ only by what the amplifier adds (a paired dose response)
    base = control_name("person_oracle") if kind == "amplifier" else name
    out = {}
    for i, g, sc, ob in zip(ids, gender, scenes, test["objects"]):
        rng = _rng(seed, base, i)
        sc = sc if sc in S.SCENES else S.SCENES[int(rng.integers(len(S.SCENES)))]
        objs = [o for o in (ob or ()) if o in SC.VP]
        cap = SC.template_caption(rng, g, sc, objs, 0.0)
        if kind == "amplifier":
            add = _rng(seed, name, i)
            if add.random() < float(q):
                cap = _append(cap, stereotypes[g], add)
        out[i] = cap
    return out


# --------------------------------------------------------------------------- expectations
def _pair_auc(score_pos: np.ndarray, score_neg: np.ndarray) -> float:
    """ROC AUC x100 by its definition, P(a positive scores above a negative) + P(tie) / 2 over
    all (positive, negative) pairs; nan without both classes. The expectation side of the
    masked-AUC control: counted here, not through scikit-learn as the metric is."""
    a = np.asarray(score_pos, np.float64)[:, None]
    b = np.asarray(score_neg, np.float64)[None, :]
    if not a.size or not b.size:
        return math.nan
    return float(100.0 * ((a > b).mean() + 0.5 * (a == b).mean()))


def expected_classifier(kind: str, test: pd.DataFrame, *, bias: float | None = None,
                        reads: Sequence[str] = ATTRIBUTES, q: float = 0.0,
                        stereotypes: Mapping[str, str] | None = None) -> dict:
    """Expected metric values of a classifier control on ``test`` (the evaluated, labelled
    test images), from the ground truth directly (not through the metric code).

    Returns ``{metric: {"value": float, "rule": "exact"} | {"direction": ">" | "≈",
    "reference": float}}`` for ``Error`` (% of images whose gender decision is wrong; a tie
    counts as "woman", module docstring), ``Ratio`` / ``Ratio_E`` (masked images; ``inf`` when
    no image is called "woman"), ``masked_AUC`` (ROC AUC x100 of P(man) - P(woman) on the
    masked images against the true gender: 50 where every masked score is the same, the
    context reader's from its decisions), ``mAP`` (the oracle's objects: 100), ``Leakage``, ``BiasAmp``
    and ``DBA_O`` (0 exactly with the true objects; for an amplifier with q > 0 the sign of
    :func:`stereotype_direction`, none when it is undecided; BiasAmp compares the
    *predicted* gender's co-occurrences, so it is 0 for the context reader only where its
    gender decisions are all right, and has no closed form otherwise). Leakage of the
    amplifier is > 0 whatever the association: the added object reveals the gender.
    """
    g = np.asarray(list(test["gender"]), object)
    n, n_f, n_m = len(g), int((g == FEMALE).sum()), int((g == MALE).sum())
    exp: dict = {}
    if kind == "person_oracle" or kind == "amplifier":
        exp["Error"] = _exact(0.0)
        exp["Ratio"] = _exact(1.0)       # 0.5 / 0.5 on masked images: both outputs on
        exp["Ratio_E"] = _exact(1.0)
        exp["masked_AUC"] = _exact(50.0)  # one score for every masked image: all ties
    elif kind == "constant_man":
        exp["Error"] = _exact(100.0 * n_f / n if n else math.nan)
        exp["Ratio"] = _exact(math.inf)
        exp["Ratio_E"] = _exact(math.inf)
        exp["masked_AUC"] = _exact(50.0)
    elif kind == "context_reader":
        dec = context_gender(context_llr(test, bias, reads))
        called_man = dec == MALE
        wrong = (called_man & (g == FEMALE)) | (~called_man & (g == MALE))
        exp["Error"] = _exact(100.0 * wrong.mean() if n else math.nan)
        n_man = int((dec != FEMALE).sum())     # ties: both outputs at 0.5 are on
        n_woman = int((dec != MALE).sum())
        exp["Ratio"] = _exact(_ratio_max(n_man, n_woman))
        pm = np.where(dec == MALE, 1.0, np.where(dec == FEMALE, 0.0, 0.5))
        exp["Ratio_E"] = _exact(_ratio_max(pm.sum(), (1 - pm).sum()))
        exp["masked_AUC"] = _exact(_pair_auc(pm[g == MALE], pm[g == FEMALE]))
    exp["mAP"] = _exact(100.0) if kind != "amplifier" or q == 0 else \
        {"direction": "<", "reference": 100.0}
    if kind == "amplifier" and q > 0:
        exp["Leakage"] = {"direction": ">", "reference": 0.0}
        for k, rule in (("BiasAmp", "biasamp"), ("DBA_O", "dba")):
            d = stereotype_direction(test, stereotypes, rule)
            if d is not None:
                exp[k] = {"direction": d, "reference": 0.0}
    else:
        for k in ("Leakage", "BiasAmp", "DBA_O"):
            exp[k] = _exact(0.0)
    if kind == "context_reader" and exp["Error"]["value"] != 0:
        del exp["BiasAmp"]   # misgendered images move the predicted gender's co-occurrences
    if kind == "constant_man":
        # BiasAmp compares the predicted gender's co-occurrences: a constant "man" moves every
        # object's b towards man, by amounts that depend on the data (no closed form here)
        del exp["BiasAmp"]
    exp["_counts"] = {"n": n, "n_female": n_f, "n_male": n_m}
    return exp


def expected_captioner(kind: str, test: pd.DataFrame, *, bias: float | None = None,
                       reads: Sequence[str] = ATTRIBUTES, q: float = 0.0,
                       stereotypes: Mapping[str, str] | None = None,
                       grammar_is_human: bool = True,
                       biasamp_null: float | None = None) -> dict:
    """Expected metric values of a captioner control on ``test`` (the gender-labelled test
    images): ``Ratio`` (n_man / n_woman captions as max(r, 1/r)), ``Error`` (%), exact; LIC,
    BiasAmp and DBA_O "≈ 0" for controls whose captions are drawn like the human ones (oracle,
    context reader: it misgenders but adds no context word; constant; human) and "> 0" for an
    amplifier with q > 0, DBAC's four values likewise (:data:`DBAC_KEYS`, Nair et al. 2025: both
    directions, with and without the prior) (its DBA_O: the sign of :func:`stereotype_direction`, which
    conditions on the test images' objects; its BiasAmp: above the null below, the
    reference being the training captions, where the stereotype is associated with its gender
    by construction).
    The constant control has no BiasAmp expectation (every caption says "man", which moves
    BiasAmp by data-dependent amounts). ``grammar_is_human`` False (real data: the human
    captions are not drawn from the synthetic generator's grammar): the grammar-built
    controls' LIC / BiasAmp / DBA_O have no "≈ 0" expectation, only the ``human`` control's.

    BiasAmp's reference is ``biasamp_null`` (:func:`biaslab.metrics.biasamp.human_null`: the
    BiasAmp of the test images' own human captions against the same training captions), not 0:
    Zhao's BiasAmp of captions written like the annotators is 0 only when the test images mix
    people and scenes as the training images do (on the default's 139 : 61 test set against
    299 : 221 training images it is -5.1). Controls drawn like the human captions are
    "≈ null". ``biasamp_null`` None (no human captions) falls back to 0.

    The amplifier is judged PAIRED with the person oracle (``"paired_with": "person_oracle"``):
    its captions are the oracle's plus the stereotype (:func:`captioner_captions`), and the
    LIC classifier and references of a replicate are shared, so the per-replicate difference
    amplifier - oracle is what the amplifier adds, with the noise both share removed. The known
    answer is that difference > 0 (DBA_O: the sign of :func:`stereotype_direction`), on any
    data: it needs no null, so it holds on real data too, where the grammar captions' own
    LIC / BiasAmp have no known value.
    """
    ba_ref = 0.0 if biasamp_null is None or not math.isfinite(biasamp_null) else \
        float(biasamp_null)
    g = np.asarray(list(test["gender"]), object)
    n, n_f, n_m = len(g), int((g == FEMALE).sum()), int((g == MALE).sum())
    exp: dict = {}
    if kind in ("person_oracle", "amplifier"):
        exp["Ratio"] = _exact(_ratio_max(n_m, n_f))
        exp["Error"] = _exact(0.0)
    elif kind == "constant_man":
        exp["Ratio"] = _exact(math.inf)
        exp["Error"] = _exact(100.0 * n_f / n if n else math.nan)
    elif kind == "context_reader":
        dec = context_gender(context_llr(test, bias, reads))
        exp["Ratio"] = _exact(_ratio_max(int((dec == MALE).sum()), int((dec == FEMALE).sum())))
        wrong = ((dec == MALE) & (g == FEMALE)) | ((dec == FEMALE) & (g == MALE))
        exp["Error"] = _exact(100.0 * wrong.mean() if n else math.nan)
    if kind == "amplifier" and q > 0:
        # DBAC (both directions, with and without the prior): the stereotype object follows
        # the gender (A -> T) and, masked gender words aside, tells it (T -> A)
        base = control_name("person_oracle")
        for k in ("LIC", "BiasAmp") + DBAC_KEYS:
            exp[k] = {"direction": ">", "reference": 0.0, "paired_with": base}
        d = stereotype_direction(test, stereotypes)
        if d is not None:
            exp["DBA_O"] = {"direction": d, "reference": 0.0, "paired_with": base}
    elif grammar_is_human or kind == "human":
        for k in ("LIC", "DBA_O") + DBAC_KEYS:
            exp[k] = {"direction": "≈", "reference": 0.0}
        exp["BiasAmp"] = {"direction": "≈", "reference": ba_ref}
    if kind == "constant_man":
        exp.pop("BiasAmp", None)   # every caption says "man": b moves by data-dependent amounts
    exp["_counts"] = {"n": n, "n_female": n_f, "n_male": n_m}
    return exp


def _exact(v: float) -> dict:
    return {"value": float(v), "rule": "exact"}


def _ratio_max(n_man: float, n_woman: float) -> float:
    if n_woman == 0 or n_man == 0:
        return math.inf if (n_man or n_woman) else math.nan
    r = n_man / n_woman
    return max(r, 1.0 / r)


def verdict(expected: Mapping, measured: float | None, lo: float | None = None,
            hi: float | None = None, tol: float = 1e-6, *, delta: float | None = None,
            ci90: tuple[float | None, float | None] = (None, None)) -> str:
    """"matches" / "does not match" / "inconclusive" of one control metric.

    Exact expectations match when ``|measured - value| <= tol * max(1, |value|)`` (both
    infinite counts as equal; an expected NaN -- 0/0, e.g. no caption with a gender word --
    matches a missing measurement). A direction ``>``/``<`` matches when the 95 % CI ``[lo, hi]``
    lies on that side of the reference (fails on the other side, else inconclusive). ``≈``
    is an equivalence claim (``biaslab.analysis.equivalence.decide``): it matches when the 90 % CI
    ``ci90`` lies inside ``reference ± delta`` and does not match when the 95 % CI lies
    outside it; without a margin ``delta`` it is "inconclusive" (a wide CI that covers the
    reference is no evidence of equality). A missing measurement does not match."""
    missing = measured is None or (isinstance(measured, float) and math.isnan(measured))
    if "value" in expected and math.isnan(float(expected["value"])):
        return "matches" if missing else "does not match"   # 0/0 expected (no gender word)
    if missing:
        return "does not match"
    if "value" in expected:
        v = float(expected["value"])
        m = float(measured)
        if math.isinf(v) or math.isinf(m):
            return "matches" if v == m else "does not match"
        return "matches" if abs(m - v) <= tol * max(1.0, abs(v)) else "does not match"
    ref, d = float(expected["reference"]), expected["direction"]
    if lo is None or hi is None:
        lo = hi = float(measured)
    if d == "≈":
        if delta is None:
            return "inconclusive"
        return {"holds": "matches", "fails": "does not match"}.get(
            equivalence.decide("≈", ref, float(delta), (lo, hi), ci90), "inconclusive")
    if d == ">":
        return "matches" if lo > ref else ("does not match" if hi < ref else "inconclusive")
    return "matches" if hi < ref else ("does not match" if lo > ref else "inconclusive")


__all__ = ["ATTRIBUTES", "CLASSIFIER_CONTROLS", "CAPTIONER_CONTROLS", "NEEDS_TRUTH",
           "control_name", "evidence_weights", "context_counts", "context_llr",
           "context_gender", "stereotype_objects",
           "stereotype_direction", "classifier_outputs",
           "probe_outputs", "captioner_captions", "expected_classifier", "expected_captioner",
           "verdict"]
