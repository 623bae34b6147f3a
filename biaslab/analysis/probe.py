"""Causal attribute-sensitivity probe: how much a model's man-vs-woman output moves when one
planted context attribute changes and nothing else does.

Hirota et al., "Resampled Datasets Are Not Enough" (EMNLP 2024, paper 000) sec. 2.1 argue that
resampling balances labeled attributes but leaves correlations with unlabeled ones (here: the
colour cast) and with combinations. Observational metrics (Ratio, Leakage, LIC) mix all
attributes; the probe isolates each one. The synthetic generator writes, for every planted
attribute ``a`` in ``biaslab.data.synthetic.PROBE_ATTRIBUTES`` (``objects``, ``scene``, ``cast``),
pairs of test images identical except for ``a`` (its female-associated vs its male-associated
value; ``biaslab.data.synthetic.probe_specs``). The person of the pair is blacked out exactly as in
the Ratio protocol (``biaslab.classify.blackout_persons`` with the ``classifier.blackout*``
params) before any model sees the images, so only context remains.

Definitions (a model M, pair k of attribute a, images x_k^male / x_k^female):

* classifier output ``o(x) = P(man | x) - P(woman | x)`` (sigmoid outputs, in [-1, 1]);
* captioner output ``o(x) = +1`` if the caption has male words only, ``-1`` female words only,
  ``0`` otherwise (``biaslab.metrics.captions.caption_label``), so a mean of o is the rate of
  male minus the rate of female captions;
* pair sensitivity ``s_k = o(x_k^male) - o(x_k^female)`` (classifier in [-2, 2], captioner in
  {-2, ..., 2});
* sensitivity of M to a: ``S_a = mean_k s_k``. A model that ignores context has S_a = 0 for
  every a (ground truth); a model that learned the planted correlation has S_a > 0.

Over training seeds (:func:`summarize_sensitivity`): the per-seed means give
``stats.record`` (t interval over seeds), and a pooled interval comes from a percentile
bootstrap over *pairs* of the seed-averaged pair sensitivities (the same pairs are scored by
every seed, so pairs, not pair x seed cells, are the independent units; this interval reflects
the test-pair sample, not training noise). The headline ``ci95``/``lo``/``hi`` of a record --
the interval verdicts should use -- is the t interval over seeds when there are at least
``MIN_SEEDS_T`` (3) seeds and the pair bootstrap otherwise (``ci_method`` says which).
"""
from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from biaslab.runtime import stats
from biaslab.runtime.io import InputError

#: Seeds from which the headline interval is the t interval over seeds (else pair bootstrap).
MIN_SEEDS_T = 3
PAIR_COLUMNS = ("attribute", "pair", "value")


def blackout_probe(pairs: pd.DataFrame, out_dir: str | os.PathLike, *,
                   sources: Sequence[str] = ("box",), dilate_px: int = 0,
                   fill: int | str = 0, progress: bool = False) -> pd.DataFrame:
    """Person-blacked-out copies of the probe images (the Ratio protocol of paper 000 sec. 3.1,
    ``biaslab.classify.blackout_persons`` with the person's box / polygon / keypoints).

    Args:
        pairs: ``biaslab.data.synthetic.read_probe`` output (path, x, y, w, h, polygon, keypoints,
            attribute, pair, value).
        out_dir: where ``<attribute>_<pair>_<value>.png`` are written.
        sources, dilate_px, fill: as ``blackout_persons`` (params ``classifier.blackout``,
            ``classifier.blackout_dilate_px``, ``classifier.blackout_fill``).

    Returns:
        ``pairs`` with ``path`` replaced by the masked image and ``masked_fraction`` (share of
        pixels blacked out) added; row order kept.

    Raises:
        InputError: a missing column or image.
    """
    from tqdm import tqdm

    from biaslab.classify import blackout_persons, save_like
    from biaslab.runtime.io import load_image
    miss = [c for c in ("path", "x", "y", "w", "h", "polygon", "keypoints", *PAIR_COLUMNS)
            if c not in pairs.columns]
    if miss:
        raise InputError("probe manifest", f"missing column(s) {miss}")
    paths, fracs = [], []
    for r in tqdm(pairs.to_dict("records"), disable=not progress, desc="probe blackout",
                  unit="img"):
        img = load_image(r["path"])
        person = pd.DataFrame([{k: r[k] for k in ("x", "y", "w", "h", "polygon",
                                                  "keypoints")}])
        out, mask = blackout_persons(img, person, sources=tuple(sources),
                                     dilate_px=int(dilate_px), fill=fill)
        stem = os.path.join(str(out_dir), f"{r['attribute']}_{int(r['pair']):04d}_{r['value']}")
        paths.append(save_like(r["path"], out, stem))
        fracs.append(float(mask.mean()))
    return pairs.assign(path=paths, masked_fraction=fracs)


def classifier_output(p_woman: np.ndarray, p_man: np.ndarray) -> np.ndarray:
    """``P(man) - P(woman)`` per image, float64 (n,) in [-1, 1]."""
    return np.asarray(p_man, np.float64) - np.asarray(p_woman, np.float64)


def classifier_logit_output(p_woman: np.ndarray, p_man: np.ndarray,
                            eps: float = 1e-6) -> np.ndarray:
    """``logit P(man) - logit P(woman)`` per image, float64 (n,), unbounded.

    The probability difference saturates: a model whose masked-image output sits at
    P(man) ~ 0.99 can move it by at most 0.01 whatever the context does, so a near-zero
    probability sensitivity may be a ceiling, not independence. The logit margin has no
    ceiling (the two sigmoid outputs are independent, so each is inverted on its own);
    probabilities are clipped to ``[eps, 1 - eps]``. Not in paper 000 (the probe is ours)."""
    pw = np.clip(np.asarray(p_woman, np.float64), eps, 1 - eps)
    pm = np.clip(np.asarray(p_man, np.float64), eps, 1 - eps)
    return (np.log(pm) - np.log1p(-pm)) - (np.log(pw) - np.log1p(-pw))


def caption_output(captions: Sequence[str], words: str = "lic") -> np.ndarray:
    """+1 (male words only), -1 (female words only) or 0 per caption, float64 (n,)
    (``biaslab.metrics.captions.caption_label``; a caption with words of both genders is 0)."""
    from biaslab.metrics.captions import caption_label
    value = {"man": 1.0, "woman": -1.0, "neutral": 0.0}
    return np.array([value[caption_label(c, words)] for c in captions], np.float64)


def gendered_versions(caption: str, words: str = "lic") -> tuple[str, str]:
    """``(male version, female version)`` of a caption: every gender word set to one gender
    (:func:`biaslab.data.gender.swap`). A caption with no gender word gives the fixed pair
    ``("a man", "a woman")``: the model's gender preference at a caption's start."""
    from biaslab.data.gender import swap
    m, f = swap(caption, to="male", words=words), swap(caption, to="female", words=words)
    return (m, f) if m != f else ("a man", "a woman")


def sequence_logprobs(captioner, feats: np.ndarray, captions: Sequence[str],
                      batch_size: int = 64) -> np.ndarray:
    """Teacher-forced log-probability (nats) of each caption (its tokens and the end token)
    given the image features, float64 (n,); row i of ``feats`` (n, F) goes with caption i.
    ``captioner``: a ClipCap :class:`biaslab.captioning.clipcap.Captioner` (prefix + decoder)."""
    import torch
    from biaslab.captioning.training import pad
    from biaslab.models.features import torch_threads
    feats = np.asarray(feats, np.float32)
    if len(feats) != len(captions):
        raise ValueError(f"{len(feats)} feature rows for {len(captions)} captions")
    ids = captioner.encode_captions(list(captions))
    model = captioner.model
    model.eval()
    out = np.zeros(len(ids), np.float64)
    with torch_threads(captioner.config.num_threads), torch.inference_mode():
        for s in range(0, len(ids), max(1, int(batch_size))):
            inp, att = pad(ids[s:s + batch_size], captioner.tokenizer.pad_token_id)
            pre = model.prefix(torch.from_numpy(feats[s:s + batch_size]))
            emb = model.decoder.get_input_embeddings()(inp)
            x = torch.cat([pre, emb], dim=1)
            mask = torch.cat([torch.ones(pre.shape[:2], dtype=att.dtype), att], dim=1)
            logits = model.decoder(inputs_embeds=x, attention_mask=mask).logits
            k = model.prefix_len
            lp = torch.log_softmax(logits[:, k - 1:-1].double(), dim=-1)   # position k-1+t -> t
            tok = lp.gather(-1, inp.unsqueeze(-1)).squeeze(-1) * att
            out[s:s + len(inp)] = tok.sum(1).numpy()
    return out


def caption_margin_output(captioner, feats: np.ndarray, texts: Sequence[tuple[str, str]],
                          batch_size: int = 64) -> np.ndarray:
    """The continuous captioner probe output: per image, ``log P(male
    version | image) - log P(female version | image)`` (nats, float64 (n,)) of the caption
    pair ``texts[i]`` (:func:`gendered_versions`), teacher-forced. Unlike the sampled gender
    word (:func:`caption_output`, -1 / 0 / +1) it moves with every change of the model's
    preference, so fewer seeds decide a claim. Not in paper 000 (the probe is ours)."""
    m = sequence_logprobs(captioner, feats, [t[0] for t in texts], batch_size)
    f = sequence_logprobs(captioner, feats, [t[1] for t in texts], batch_size)
    return m - f


def person_free_images(frame: pd.DataFrame, root: str | os.PathLike,
                       out_dir: str | os.PathLike, *, progress: bool = False) -> pd.DataFrame:
    """The images of a probe or mask-neutrality manifest drawn again *without their person*
    (``biaslab.data.synthetic.render_probe`` / ``render_neutral`` with ``draw_person=False``): the
    reference of the mask-neutrality test (:func:`mask_neutral_record`).

    Args:
        frame: ``biaslab.data.synthetic.read_probe`` / ``read_neutral`` output (path, attribute,
            pair, value, x, y, w, h, ...; ``attribute == "neutral"`` for the context-free
            set).
        root: the synthetic dataset (its ``annotations/synth_params.json`` gives the
            generator's seed and image size).
        out_dir: where ``<attribute>_<pair>_<value>.png`` are written (atomically).

    Returns:
        ``frame`` with ``path`` replaced by the person-free image; row order kept.

    Raises:
        InputError: ``root`` is not a synthetic dataset of this renderer version, or a
            manifest image differs from its re-rendering outside the person's box (the data
            were written by other code or params: re-run stage ``synthesize``).
    """
    from tqdm import tqdm

    from biaslab.data import synthetic
    from biaslab.classify import save_like
    from biaslab.runtime.io import load_image
    g = synthetic.read_generator_params(root)
    seed, size = int(g["seed"]), int(g["image_size"])
    paths = []
    for r in tqdm(frame.to_dict("records"), disable=not progress, desc="person-free",
                  unit="img"):
        if r["attribute"] == "neutral":
            img = synthetic.render_neutral(int(r["pair"]), seed, size, draw_person=False)
        else:
            img = synthetic.render_probe(r["attribute"], int(r["pair"]), r["value"], seed,
                                         size, draw_person=False)
        img = img.image
        orig = load_image(r["path"])
        # outside the person's box both must be the same pixels: the same scene
        keep = np.ones(orig.shape[:2], bool)
        x0, y0 = max(int(np.floor(r["x"])) - 1, 0), max(int(np.floor(r["y"])) - 1, 0)
        x1, y1 = int(np.ceil(r["x"] + r["w"])) + 2, int(np.ceil(r["y"] + r["h"])) + 2
        keep[y0:y1, x0:x1] = False
        if orig.shape != img.shape or (orig[keep] != img[keep]).any():
            raise InputError(r["path"], "differs from its re-rendering outside the person's "
                                        "box: the probe images were written by other code "
                                        "or params (re-run stage synthesize)")
        stem = os.path.join(str(out_dir), f"{r['attribute']}_{int(r['pair']):04d}_{r['value']}")
        paths.append(save_like(r["path"], img, stem))
    return frame.assign(path=paths)


def mask_neutral_record(per_seed: Sequence[tuple[np.ndarray, np.ndarray]],
                        genders: Sequence[str], *,
                        empty: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
                        n_boot: int = 2000, seed: int = 0) -> dict:
    """What a persons-masked image reads as to one classifier, from its gender
    outputs on masked images and, when given, on the same images drawn without the person.

    Two quantities, because a model's call on a masked image mixes two things:

    * ``ratio_expected`` = Ratio_E on the masked images (the issue's precondition, read on its
      own): the model's reading of the fill *plus* its reading of a person-free image;
    * ``mask_effect`` = Ratio_E(masked) / Ratio_E(person-free), the same images rendered
      without the person (``biaslab.data.synthetic.render_probe`` / ``render_neutral`` with
      ``draw_person=False``): what the fill adds to what the empty image already reads as.
      1 = the mask reads as neither gender. ``ratio_expected_empty`` (the denominator) is a
      property of the model, not of the mask: a model that calls every person-free image a
      woman has Ratio > 1 on masked test images whatever the fill, and the Ratio metric of
      paper 000 sec. 3.1 rightly counts that.

    Our definition, not paper 000's (it does not test its mask).

    Args:
        per_seed: one ``(p_woman, p_man)`` pair of float arrays (n,) in [0, 1] per training
            seed, on the masked images.
        genders: (n,) the masked persons' true genders ("female" / "male").
        empty: the same per seed on the person-free versions of the same n images (row i of
            both is one image), or None (then no ``mask_effect``).
        n_boot, seed: the percentile bootstrap over images (``biaslab.runtime.stats.bootstrap``; a
            resample draws the same images for the masked and the person-free versions).

    Returns:
        ``{"ratio_expected": sum p_man / sum p_woman pooled over seeds and images
        (:func:`biaslab.classify.evaluate.expected_ratio`), "lo", "hi", "n_boot": its 95 %
        bootstrap interval over images (None when fewer than half the resamples are finite),
        "per_seed": [r_E of each seed], "masked_gender_auc": [ROC AUC of p_man - p_woman
        against the true gender, per seed; ~0.5 when the mask hides gender, None when one
        gender is absent], "n_images", "n_seeds"}``, and with ``empty`` also
        ``"ratio_expected_empty"``, ``"mask_effect"``, ``"mask_effect_lo"``,
        ``"mask_effect_hi"`` (bootstrap over images), ``"mask_effect_per_seed"``. Ratios are
        None where undefined (0/0) and JSON-safe (``inf`` becomes None with
        ``"ratio_flag"``).

    Raises:
        ValueError: ``empty`` has another number of seeds or images than ``per_seed``.
    """
    from sklearn.metrics import roc_auc_score

    from biaslab.classify.evaluate import expected_ratio
    y = np.asarray([g == "male" for g in genders])
    per, aucs, sw, sm = [], [], 0.0, 0.0
    for pw, pm in per_seed:
        pw, pm = np.asarray(pw, np.float64), np.asarray(pm, np.float64)
        sw, sm = sw + float(pw.sum()), sm + float(pm.sum())
        r = expected_ratio(pw, pm)["ratio"]
        per.append(float(r) if np.isfinite(r) else None)
        aucs.append(float(roc_auc_score(y, pm - pw)) if 0 < y.sum() < len(y) else None)
    pooled = expected_ratio([sw], [sm])["ratio"]
    # uncertainty of the finite image set: resample images (all seeds' outputs together)
    pw_all = np.stack([np.asarray(a, np.float64) for a, _ in per_seed], axis=1)
    pm_all = np.stack([np.asarray(b, np.float64) for _, b in per_seed], axis=1)
    boot = stats.bootstrap(lambda w, m: expected_ratio([w.sum()], [m.sum()])["ratio"],
                           pw_all, pm_all, n_boot=n_boot, seed=seed)
    out = {"ratio_expected": float(pooled) if np.isfinite(pooled) else None,
           "lo": boot["lo"], "hi": boot["hi"], "n_boot": boot["n_boot"],
           "per_seed": per, "masked_gender_auc": aucs, "n_images": int(len(y)),
           "n_seeds": len(per)}
    if not np.isfinite(pooled):
        out["ratio_flag"] = "r=inf" if sm > 0 else "0/0"
    if empty is None:
        return out
    ew_all = np.stack([np.asarray(a, np.float64) for a, _ in empty], axis=1)
    em_all = np.stack([np.asarray(b, np.float64) for _, b in empty], axis=1)
    if ew_all.shape != pw_all.shape:
        raise ValueError(f"person-free outputs {ew_all.shape} (images, seeds) do not match "
                         f"the masked ones {pw_all.shape}")

    def effect(w, m, ew, em):
        masked = expected_ratio([w.sum()], [m.sum()])["ratio"]
        free = expected_ratio([ew.sum()], [em.sum()])["ratio"]
        return masked / free if np.isfinite(masked) and np.isfinite(free) and free > 0 \
            else float("nan")

    def finite(v):
        return float(v) if np.isfinite(v) else None

    eboot = stats.bootstrap(effect, pw_all, pm_all, ew_all, em_all, n_boot=n_boot, seed=seed)
    out.update({"ratio_expected_empty": finite(
                    expected_ratio([ew_all.sum()], [em_all.sum()])["ratio"]),
                "mask_effect": finite(effect(pw_all, pm_all, ew_all, em_all)),
                "mask_effect_lo": eboot["lo"], "mask_effect_hi": eboot["hi"],
                "mask_effect_per_seed": [
                    finite(effect(pw_all[:, k], pm_all[:, k], ew_all[:, k], em_all[:, k]))
                    for k in range(pw_all.shape[1])]})
    return out


def pair_sensitivities(pairs: pd.DataFrame, outputs: Sequence[float],
                       values: tuple[str, str] = ("female", "male")) -> pd.DataFrame:
    """Pair sensitivities ``s_k = o(values[1] image) - o(values[0] image)``; by default
    ``o(male-associated image) - o(female-associated image)``.

    Args:
        pairs: rows with ``attribute``, ``pair``, ``value`` (one of ``values``), one row of
            each value per (attribute, pair).
        outputs: (len(pairs),) model output o per row, in row order.
        values: the two values ``(a, b)``; the sensitivity is o(b) - o(a) (the attribute-flip
            probe passes ``biaslab.data.synthetic.FLIP_VALUES[dim]``).

    Returns:
        DataFrame ``attribute, pair, out_<a>, out_<b>, sensitivity`` sorted by
        (attribute, pair).

    Raises:
        ValueError: lengths differ, or a pair lacks one of its two images.
    """
    a, b = values
    o = np.asarray(outputs, np.float64)
    if len(o) != len(pairs):
        raise ValueError(f"{len(o)} outputs for {len(pairs)} probe images")
    df = pairs[list(PAIR_COLUMNS)].assign(out=o)
    wide = df.pivot_table(index=["attribute", "pair"], columns="value", values="out",
                          aggfunc="first")
    for v in values:
        if v not in wide.columns or wide[v].isna().any():
            raise ValueError(f"probe pairs without a {v} image")
    wide = wide.reset_index().rename(columns={a: f"out_{a}", b: f"out_{b}"})
    wide["sensitivity"] = wide[f"out_{b}"] - wide[f"out_{a}"]
    wide.columns.name = None
    return wide[["attribute", "pair", f"out_{a}", f"out_{b}", "sensitivity"]] \
        .sort_values(["attribute", "pair"], ignore_index=True)


def summarize_sensitivity(per_seed: Mapping[int, pd.DataFrame], *,
                          min_seeds_t: int = MIN_SEEDS_T, n_boot: int = stats.N_BOOT,
                          seed: int = 0) -> dict:
    """Sensitivity records of one model family (one training dataset) over seeds.

    Args:
        per_seed: ``{training seed: pair_sensitivities(...)}``; every seed must score the same
            pairs.
        min_seeds_t: from this many seeds on, the headline interval is the t interval over
            seeds, else the pair bootstrap (module docstring).
        n_boot, seed: bootstrap resamples and generator seed.

    Returns:
        ``{attribute: {"mean", "ci95", "lo", "hi", "ci_method" ("t_over_seeds" |
        "pair_bootstrap"), "seeds": stats.record of the per-seed means, "pooled":
        stats.bootstrap over pairs of the seed-averaged pair sensitivities ({"mean", "ci95",
        "lo", "hi", "n", "n_boot", "n_undefined"}), "per_seed": [{"seed", "mean"}],
        "mean_output": {value: mean o} (each side, from the ``out_<value>`` columns),
        "n_pairs", "n_seeds"}}``.
        ``mean`` is the mean over seeds and pairs (equal in both intervals' centres).

    Raises:
        ValueError: no seeds, or seeds scored different pairs.
    """
    if not per_seed:
        raise ValueError("no seeds to summarise")
    seeds = sorted(per_seed)
    keys = None
    for s in seeds:
        k = list(zip(per_seed[s]["attribute"], per_seed[s]["pair"]))
        if keys is None:
            keys = k
        elif k != keys:
            raise ValueError(f"seed {s} scored other probe pairs than seed {seeds[0]}")
    out = {}
    attrs = list(dict.fromkeys(per_seed[seeds[0]]["attribute"]))
    for a in attrs:
        rows = [per_seed[s][per_seed[s]["attribute"] == a] for s in seeds]
        sens = np.stack([r["sensitivity"].to_numpy(np.float64) for r in rows])   # (seeds, pairs)
        seed_means = sens.mean(1)
        by_seed = stats.record(seed_means.tolist())
        pooled = stats.bootstrap(np.mean, sens.mean(0), n_boot=n_boot, seed=seed)
        use_t = len(seeds) >= int(min_seeds_t)
        mean = float(sens.mean())
        hw = by_seed["ci95"] if use_t else pooled["ci95"]
        if use_t:
            lo, hi = ((mean - hw, mean + hw) if hw is not None else (None, None))
        else:
            lo, hi = pooled["lo"], pooled["hi"]
        out[a] = {"mean": mean, "ci95": hw, "lo": lo, "hi": hi,
                  "ci_method": "t_over_seeds" if use_t else "pair_bootstrap",
                  "seeds": by_seed, "pooled": pooled,
                  "per_seed": [{"seed": int(s), "mean": float(m)}
                               for s, m in zip(seeds, seed_means)],
                  "mean_output": {
                      c[4:]: float(np.mean([r[c].mean() for r in rows]))
                      for c in rows[0].columns if c.startswith("out_")},
                  "n_pairs": int(sens.shape[1]), "n_seeds": len(seeds)}
    return out


# --------------------------------------------------------------------------------------------
# The attribute-flip probe
# --------------------------------------------------------------------------------------------

#: the person attributes each value of param ``attribute`` flips
FLIP_DIMS = {"gender": ("gender",), "skin": ("skin",), "gender_skin": ("gender", "skin")}


def flip_objects(dim: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The objects the synthetic generator associates with each value ``(a, b)`` of
    ``biaslab.data.synthetic.FLIP_VALUES[dim]``: gender (female, male) -> (FEMALE_OBJECTS,
    MALE_OBJECTS); skin (dark, light) -> (("dog",), ("bicycle",))
    (``SKIN_OBJECT_ASSOCIATION``). Raises ValueError for another ``dim``."""
    from biaslab.data import synthetic as S
    if dim not in S.FLIP_VALUES:
        raise ValueError(f"unknown flip dimension {dim!r}; known: {tuple(S.FLIP_VALUES)}")
    assoc = S.OBJECT_ASSOCIATION if dim == "gender" else S.SKIN_OBJECT_ASSOCIATION
    return tuple(tuple(o for o in S.OBJECTS if assoc.get(o) == v) for v in S.FLIP_VALUES[dim])


def flip_table(root: str | os.PathLike, dims: Sequence[str], n_images: int,
               out_dir: str | os.PathLike, *, progress: bool = False) -> pd.DataFrame:
    """The attribute-flip pairs: the first ``n_images`` images (by id) of the synthetic test
    split, each drawn with both values of each person attribute in ``dims``
    (``biaslab.data.synthetic.render_flip``; only the person's pixels differ within a pair,
    and one image of each pair is the test image itself). The person is NOT masked: the
    attribute is the person's.

    Args:
        root: the synthetic dataset (``annotations/synth_params.json`` with ``test_images``
            > 0, ``annotations/synth_truth.csv`` with a skin column for ``"skin"``).
        dims: keys of ``biaslab.data.synthetic.FLIP_VALUES``.
        n_images: pairs per dimension (>= 1; fewer when the test split is smaller).
        out_dir: where ``<dim>_<image id>_<value>.png`` are written (atomically).

    Returns:
        DataFrame ``path, attribute (= dim), pair (= image id), value, gender, skin`` (the
        test image's true gender and skin tone), two rows per pair.

    Raises:
        InputError: ``root`` is not a synthetic dataset of this renderer, has no test split, or
            its truth has no skin tone and ``"skin"`` is asked for.
        ValueError: ``n_images`` < 1 or an unknown dimension.
    """
    from tqdm import tqdm

    from biaslab.classify import save_like
    from biaslab.data import synthetic as S
    if int(n_images) < 1:
        raise ValueError(f"n_images must be >= 1, got {n_images}")
    bad = [d for d in dims if d not in S.FLIP_VALUES]
    if bad:
        raise ValueError(f"unknown flip dimension(s) {bad}; known: {tuple(S.FLIP_VALUES)}")
    g = S.read_generator_params(root)
    n_train, n_test = int(g["n_images"]), int(g.get("test_images") or 0)
    if n_test < 1:
        raise InputError(Path(root) / S.PARAMS_FILE,
                         "no test split (synthetic.test_images = 0): the attribute-flip "
                         "probe draws test images")
    truth = S.read_truth(root)
    ids = list(range(n_train + 1, n_train + n_test + 1))[:int(n_images)]
    if "skin" in dims and any(truth[i].get("skin") is None for i in ids):
        raise InputError(Path(root) / "annotations" / "synth_truth.csv",
                         "no skin column: re-run stage synthesize")
    rows = []
    todo = [(d, i, v) for d in dims for i in ids for v in S.FLIP_VALUES[d]]
    for d, i, v in tqdm(todo, disable=not progress, desc="flip pairs", unit="img"):
        t = truth[i]
        r = S.render_flip(i, t, seed=int(g["seed"]), image_size=int(g["image_size"]), dim=d,
                          value=v)
        stem = os.path.join(str(out_dir), f"{d}_{i:012d}_{v}")
        rows.append({"path": save_like(".png", r.image, stem), "attribute": d, "pair": i,
                     "value": v, "gender": t["gender"], "skin": t.get("skin")})
    return pd.DataFrame(rows, columns=["path", "attribute", "pair", "value", "gender", "skin"])


def association_sensitivity(values: Sequence[str], objects: Sequence[Sequence[str]],
                            dim: str) -> float | None:
    """The attribute-flip sensitivity of a reader that knows only the attribute: it predicts
    each object with its frequency among images of the attribute's value, so flipping the
    value from ``a`` to ``b`` moves :func:`object_output` by
    ``[mean_{o in B} P(o|b) - mean_{o in A} P(o|b)] - [mean_{o in B} P(o|a) - mean_{o in A} P(o|a)]``
    (``A``, ``B``: :func:`flip_objects`; ``(a, b) = FLIP_VALUES[dim]``). 0 when the objects are
    independent of the attribute in these images; 2 at most.

    Args:
        values: (n,) each image's value of ``dim`` (other values are ignored).
        objects: (n,) each image's object names.
        dim: the flipped attribute.

    Returns:
        The sensitivity, or None when either value has no image.
    """
    from biaslab.data import synthetic as S
    a, b = S.FLIP_VALUES[dim]
    objs_a, objs_b = flip_objects(dim)
    out = {}
    for v in (a, b):
        sets = [set(o) for x, o in zip(values, objects) if x == v]
        if not sets:
            return None
        rate = {o: sum(o in s for s in sets) / len(sets) for o in objs_a + objs_b}
        out[v] = np.mean([rate[o] for o in objs_b]) - np.mean([rate[o] for o in objs_a])
    return float(out[b] - out[a])


def flip_reference(root: str | os.PathLike, dims: Sequence[str], *, n_boot: int = stats.N_BOOT,
                   seed: int = 0) -> dict:
    """The association the models could learn, beside the attribute-flip probe: for each
    dimension, :func:`association_sensitivity` over the synthetic dataset's training images
    (ids ``1 .. n_images``, from which the split stage draws the training set), with a
    percentile bootstrap 95 % CI over those images (``biaslab.runtime.stats.bootstrap``).
    At ``synthetic.skin_bias = 0`` it is the chance association of a finite sample, which a
    model that learned the training images reproduces; a probe sensitivity near it is that,
    not a planted effect.

    Returns:
        ``{dim: {"mean", "ci95", "lo", "hi", "n", "n_boot", "n_undefined", "n_by_value"}}``.

    Raises:
        InputError: ``root`` is not a synthetic dataset, or has no skin tone and ``"skin"`` is
            asked for.
    """
    from biaslab.data import synthetic as S
    g = S.read_generator_params(root)
    truth = S.read_truth(root)
    ids = [i for i in range(1, int(g["n_images"]) + 1) if i in truth]
    out = {}
    for d in dims:
        vals = np.asarray([truth[i].get(d) for i in ids], dtype=object)
        if d == "skin" and any(v is None for v in vals):
            raise InputError(Path(root) / "annotations" / "synth_truth.csv",
                             "no skin column: re-run stage synthesize")
        objs = np.empty(len(ids), dtype=object)
        objs[:] = [truth[i]["objects"] for i in ids]
        rec = stats.bootstrap(lambda v, o: association_sensitivity(v, o, d), vals, objs,
                              n_boot=n_boot, seed=seed)
        rec["n_by_value"] = {v: int((vals == v).sum()) for v in S.FLIP_VALUES[d]}
        out[d] = rec
    return out


def object_output(probs: np.ndarray, labels: Sequence[str], dim: str) -> np.ndarray:
    """Classifier output of the attribute-flip probe: ``mean P(objects of b) - mean P(objects
    of a)`` per image, float64 (n,) in [-1, 1], for ``(a, b) = FLIP_VALUES[dim]`` and the
    objects of :func:`flip_objects` (gender: mean P(male-associated) - mean P(female-associated)
    objects; skin: P(bicycle) - P(dog)).

    Args:
        probs: (n, len(labels)) sigmoid object outputs.
        labels: the classifier's object labels.
        dim: the flipped attribute.

    Raises:
        ValueError: an associated object is not among ``labels``.
    """
    p = np.asarray(probs, np.float64)
    objs_a, objs_b = flip_objects(dim)
    miss = [o for o in objs_a + objs_b if o not in labels]
    if miss:
        raise ValueError(f"the classifier has no output for {miss}")
    col = {o: k for k, o in enumerate(labels)}
    return p[:, [col[o] for o in objs_b]].mean(1) - p[:, [col[o] for o in objs_a]].mean(1)


def caption_object_output(captions: Sequence[str], dim: str) -> np.ndarray:
    """Captioner output of the attribute-flip probe: the share of ``b``'s associated objects
    the caption names minus the share of ``a``'s (``biaslab.metrics.dba.caption_objects``
    with its synonyms and the generator's nouns), float64 (n,) in [-1, 1]; ``(a, b) = FLIP_VALUES[dim]``."""
    from biaslab.data.synthetic.captions import NOUN
    from biaslab.metrics.dba import OBJECT_SYNONYMS, caption_objects
    objs_a, objs_b = flip_objects(dim)
    cats = objs_a + objs_b
    # the generator's own one-word nouns ("purse" for handbag) beside the COCO synonyms: the
    # flip probe exists on synthetic data only, whose captions use exactly these words
    syn = {**OBJECT_SYNONYMS, **{w: o for o, ws in NOUN.items() for w in ws
                                 if " " not in w and w != o}}
    out = np.zeros(len(captions), np.float64)
    for k, c in enumerate(captions):
        named = caption_objects(c, cats, syn)
        out[k] = (sum(o in named for o in objs_b) / len(objs_b)
                  - sum(o in named for o in objs_a) / len(objs_a))
    return out


def flip_output(table: pd.DataFrame, *, probs: np.ndarray | None = None,
                labels: Sequence[str] | None = None,
                captions: Sequence[str] | None = None) -> np.ndarray:
    """The flip probe's output per row of ``table`` (:func:`flip_table`), each row by its own
    dimension (``attribute`` column): :func:`object_output` of ``probs`` (n, len(labels)) for a
    classifier, or :func:`caption_object_output` of ``captions`` (n,) for a captioner;
    float64 (n,)."""
    if (probs is None) == (captions is None):
        raise ValueError("give either probs (with labels) or captions")
    out = np.zeros(len(table), np.float64)
    dims = table["attribute"].to_numpy()
    for d in dict.fromkeys(dims):
        m = dims == d
        out[m] = (object_output(np.asarray(probs)[m], labels, d) if probs is not None
                  else caption_object_output([c for c, k in zip(captions, m) if k], d))
    return out


def flip_sensitivities(table: pd.DataFrame, outputs: Sequence[float]) -> pd.DataFrame:
    """Pair sensitivities of the attribute-flip probe, ``s_k = o(x_k^b) - o(x_k^a)`` with
    ``(a, b) = FLIP_VALUES[dim]`` per dimension (:func:`pair_sensitivities` on each), and the
    pair's true ``gender`` / ``skin`` kept for the per-group summaries.

    A model whose object outputs ignore the person's attribute has ``s_k = 0`` for every pair
    (ground truth: the two images differ in the person's pixels only, and the objects are
    the same); a model that learned the planted attribute-object association has ``S > 0``.
    Our definition (paper 000 measures attribute-to-object bias observationally, with Ratio
    and Leakage; this is its counterfactual form on the oracle renderer).

    Args:
        table: :func:`flip_table` rows (attribute = dim, pair, value, gender, skin).
        outputs: (len(table),) :func:`object_output` / :func:`caption_object_output` per row.

    Returns:
        DataFrame ``attribute, pair, out_a, out_b, sensitivity, gender, skin`` (``out_a`` /
        ``out_b``: the outputs on the two images, whatever the dimension's values).
    """
    from biaslab.data import synthetic as S
    o = np.asarray(outputs, np.float64)
    if len(o) != len(table):
        raise ValueError(f"{len(o)} outputs for {len(table)} flip images")
    parts = []
    keys = table.drop_duplicates(["attribute", "pair"]).set_index(["attribute", "pair"])
    for d in dict.fromkeys(table["attribute"]):
        m = (table["attribute"] == d).to_numpy()
        a, b = S.FLIP_VALUES[d]
        w = pair_sensitivities(table[m], o[m], values=(a, b)).rename(
            columns={f"out_{a}": "out_a", f"out_{b}": "out_b"})
        k = keys.loc[list(zip(w["attribute"], w["pair"]))]
        parts.append(w.assign(gender=k["gender"].to_numpy(), skin=k["skin"].to_numpy()))
    return pd.concat(parts, ignore_index=True)


def summarize_flip(per_seed: Mapping[int, pd.DataFrame], attribute: str, *,
                   min_seeds_t: int = MIN_SEEDS_T, n_boot: int = stats.N_BOOT,
                   seed: int = 0) -> dict:
    """Flip-probe records of one model family over seeds (:func:`summarize_sensitivity`):
    ``{dim: record}`` for each flipped dimension, and for ``attribute == "gender_skin"`` also
    ``{"<dim>|<group>": record}`` for each value of the other dimension (the skin-tone flip
    among women and among men, the gender flip among light- and dark-skinned persons: the
    per-group sensitivities of the intersectional groups) and ``{"<dim>|gap": {"groups",
    "mean", "ci95", "lo", "hi", "n", "n_ref", "p"}}``: the second group's sensitivity minus the
    first's, with the Welch interval over seeds (``biaslab.runtime.stats.difference``).

    Args:
        per_seed: ``{seed: flip_sensitivities(...)}``.
        attribute: the param ``attribute`` (``gender``, ``skin``, ``gender_skin``).
    """
    from biaslab.data import synthetic as S
    kw = dict(min_seeds_t=min_seeds_t, n_boot=n_boot, seed=seed)
    out = summarize_sensitivity(per_seed, **kw)
    if attribute != "gender_skin":
        return out
    for d in list(out):
        other = "skin" if d == "gender" else "gender"
        recs = {}
        for v in S.FLIP_VALUES[other]:
            sub = {s: f[(f["attribute"] == d) & (f[other] == v)].assign(
                attribute=f"{d}|{v}") for s, f in per_seed.items()}
            if len(next(iter(sub.values()))):
                recs[v] = summarize_sensitivity(sub, **kw)[f"{d}|{v}"]
                out[f"{d}|{v}"] = recs[v]
        if len(recs) == 2:
            g0, g1 = S.FLIP_VALUES[other]
            diff = stats.difference([p["mean"] for p in recs[g1]["per_seed"]],
                                    [p["mean"] for p in recs[g0]["per_seed"]])
            out[f"{d}|gap"] = {"groups": [g0, g1], "mean": diff.pop("diff"), **diff}
    return out


__all__ = ["MIN_SEEDS_T", "blackout_probe", "classifier_output", "caption_output",
           "gendered_versions", "sequence_logprobs", "caption_margin_output",
           "pair_sensitivities", "summarize_sensitivity", "FLIP_DIMS", "flip_objects",
           "flip_table", "object_output", "caption_object_output", "flip_output",
           "flip_sensitivities",
           "summarize_flip"]
