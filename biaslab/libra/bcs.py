"""Biased Caption Synthesis (BCS) of LIBRA: paper 003 sec. 3 (Eqs. 1-8) and supp. 1.1-1.3;
thesis (paper 002) sec. 3.3 (Eqs. 3.1-3.8) and 3.7 (Eqs. 3.10-3.12).

Notation (paper 003): ``D`` training captions; ``F_GW`` keeps captions with gender words of
exactly one gender (Eq. 1, ``D_g = F_GW(D)``, word list ``libra``, supp. 5); ``mask(.)``
replaces gender words by the classifier's mask token; ``f_g`` predicts the gender of a masked
caption (Eq. 2); ``swap(.)`` swaps gender words (``biaslab.data.gender.swap``).

* ``F_PG`` (Eq. 3): keep ``y`` whose predicted gender differs from its gender ``g`` -> ``f_pg``.
* ``A_CG`` (Eq. 4, "Gender-swapping", type ``swap``): ``swap(y)`` for ``y in F_PG(D_g)``.
* ``D_T5`` (Eq. 5): ``T5(y_M)`` with ``M`` = 15% of the content words (nouns, verbs,
  adjectives, adverbs; supp. 1.3), never gender words; trivial edits (a masked word replaced by
  a WordNet synonym) are removed (footnote 5, supp. 1.3), and so are unnatural ones
  (authenticity filter ``F_AF``, supp. Eq. 3: keep ``p(B=auth|y) > alpha``, alpha = 0.3, where
  ``f_a`` is trained on ``D_T5,g`` (synthetic) vs ``D_g`` (authentic), supp. Eq. 2).
* ``F_GF`` (Eq. 6) / ``A_GC`` (Eq. 7, "T5-generation", type ``t5``): keep ``y' in D_T5,g``
  with ``f_g(y') = g`` and ``d(y', y) = p(g|mask(y')) - p(g|mask(y)) > delta`` (delta = 0.2).
* ``A`` (Eq. 8, "Merged", type ``merged``): ``swap(y')`` for ``y' in F_PG(D_T5,g)``.
* Mix (sec. 5, Table 1): the DCG training set mixes the types in a ratio ``swap:t5:merged``
  (paper default 0:1:1, "T5-generation and Merged").

Choices where the paper is silent (each documented at its function, and tested):

* POS (supp. 1.3 uses NLTK's tagger): ``pos_tag`` when its tagger data is installed, else an
  offline fallback: a word is content when WordNet knows it as a noun/verb/adjective/adverb and
  it is not a stop word (NLTK's English list, embedded) or a number word (``content_positions``).
* Trivial edit (``trivial_reason``): a candidate is dropped when no masked word changed
  (``unchanged``) or when a masked word was replaced by a WordNet synonym or another inflection
  of the same lemma (``synonym``); identical fills at other positions are allowed.
* Order of the filters: synonym -> ``F_GW`` (one gender, the original's) -> ``F_AF`` -> ``F_GF``
  / ``F_PG``; ``D_T5,g`` used by Eqs. 6-8 is the set after ``F_AF`` (footnote 5 removes
  unnatural captions from ``D_T5`` itself).
* ``D_T5`` sources: Eq. 5 samples from all of ``D``; by default (``source="gendered"``) we
  sample from ``D_g`` only, because a T5 edit of a caption without gender words never enters
  ``D_T5,g`` unless T5 writes a gender word into a content slot (and Eq. 6 needs the original
  in ``D_g``); ``source="all"`` follows Eq. 5 literally.
* A swap that does not yield a caption of the other gender under the word list (e.g. it keeps
  ``pregnant``, or ``queen -> king`` leaves the list) is dropped (``swap_failed``).
* f_g training (supp. 1.1): a balanced split of ``D_g`` (the majority gender subsampled to the
  minority count, seeded); ``val_fraction`` of it is held out to report accuracy. f_g is then
  applied to all of ``D_g``, as in the paper (captions it was trained on included).
* f_a training: balanced ``D_T5,g`` vs ``D_g`` (larger side subsampled); the same classifier
  kind as f_g (supp. 1.3: "use the same classifier as f_g for f_a"), trained separately, on
  unmasked captions; ``auth_folds > 1`` scores each synthetic caption with a model that did not
  see it (cross-fitting; 1 = paper, train on all and score all).
* Content fills (``fill_content_only``, default on): T5 may not write a stop word, a number,
  punctuation or a gender word into a masked content slot (``t5.banned_token_ids`` ->
  ``bad_words_ids``, or the allowed pieces of the ``reconstruct`` format). A pretrained T5 rarely does; a tiny T5 trained from scratch on a few
  thousand captions otherwise fills most slots with ``a``/``on``. Gender words are banned
  because they would change the gender attribute that Eqs. 6-8 rely on (``F_GW`` would drop
  such captions anyway).
* Mix: counts follow the ratio exactly; when a type has fewer captions than its share of
  ``target_count``, the total shrinks so the ratio holds (``mix``).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from biaslab.data.gender import FEMALE, MALE, caption_gender, gender_words, mask, swap
from biaslab.libra import t5 as t5lib
from biaslab.libra.settings import TABLE1_MIXES, BCSSettings, bcs_settings
from biaslab.libra.bcs_words import (CONTENT_TAGS, NUMBER_WORDS, STOP_WORDS,  # noqa: F401
                                     content_positions, is_synonym, nltk_tagger_available,
                                     trivial_reason, wordnet_content)

TYPES = ("swap", "t5", "merged")
OTHER = {FEMALE: MALE, MALE: FEMALE}

# --------------------------------------------------------------------------------------------
# D, D_g, balanced split


def training_set(captions: pd.DataFrame, split: pd.DataFrame | None = None,
                 max_captions: int | None = None, seed: int = 0) -> pd.DataFrame:
    """``D``: the captions of the ``split == "train"`` images (all captions when ``split`` is
    None), at most ``max_captions`` of them (a seeded random subset, kept in caption_id order).

    Raises:
        ValueError: missing columns or an empty result.
    """
    need = {"caption_id", "image_id", "caption"}
    if not need <= set(captions.columns):
        raise ValueError(f"captions table lacks columns {sorted(need - set(captions.columns))}")
    d = captions
    if split is not None:
        train = set(split.loc[split["split"] == "train", "image_id"].astype(int))
        d = d[d["image_id"].astype(int).isin(train)]
    d = d.sort_values("caption_id").reset_index(drop=True)
    if max_captions is not None and len(d) > int(max_captions):
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(len(d), size=int(max_captions), replace=False))
        d = d.iloc[keep].reset_index(drop=True)
    if d.empty:
        raise ValueError("no training captions (is the split from another dataset?)")
    return d[["caption_id", "image_id", "caption"]].copy()


def f_gw(captions: pd.DataFrame, words: str = "libra") -> pd.DataFrame:
    """``F_GW`` (Eq. 1): the captions with gender words of exactly one gender, with a column
    ``g`` (``female``/``male``) computed with word list ``words`` (recomputed from the text, so
    it does not depend on the labelling stage's list)."""
    g = captions["caption"].map(lambda c: caption_gender(c, words))
    out = captions[g.isin([FEMALE, MALE])].copy()
    out["g"] = g[out.index]
    return out.reset_index(drop=True)


def balanced_split(dg: pd.DataFrame, seed: int = 0, label: str = "g") -> pd.DataFrame:
    """Supp. 1.1: equal numbers of female and male captions (the majority subsampled to the
    minority count, seeded); rows keep their original order."""
    counts = dg[label].value_counts()
    if len(counts) < 2:
        raise ValueError(f"balanced split needs both genders, got {dict(counts)}")
    n = int(counts.min())
    rng = np.random.default_rng(seed)
    keep = []
    for g in sorted(counts.index):
        idx = np.flatnonzero((dg[label] == g).to_numpy())
        keep.extend(rng.choice(idx, size=n, replace=False).tolist())
    return dg.iloc[sorted(keep)].reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# classifiers (biaslab.models.textclf)


def classifier_config(spec: dict | str | None = None, num_threads: int | None = None):
    """``textclf`` config for f_g / f_a from a params dict.

    ``model``: ``lstm`` (textclf LSTM), ``minilm`` (offline BERT, textclf ``bert_ft``) or any
    BERT name/dir (paper: ``bert-base-uncased``, fine-tuned with lr 1e-5 for 5 epochs, supp.
    1.1). ``preset``: textclf preset (default ``ci`` for lstm/minilm, ``paper`` otherwise).
    Other keys override config fields (``epochs``, ``lr``, ``batch_size``, ...).
    """
    from biaslab.models import textclf
    spec = {"model": spec} if isinstance(spec, str) else dict(spec or {"model": "minilm"})
    spec.pop("val_fraction", None)
    model = spec.pop("model", "minilm")
    preset = spec.pop("preset", "ci" if model in ("lstm", textclf.MINILM) else "paper")
    over = {"progress": False, **spec}
    if num_threads is not None:
        over.setdefault("num_threads", num_threads)
    if model == "lstm":
        return textclf.default_config("lstm", preset, **over)
    return textclf.default_config("bert_ft", preset, model=model, **over)


def gender_proba(model, captions: Sequence[str], words: str = "libra") -> np.ndarray:
    """``p(G = g | mask(y))`` (Eq. 2) for each caption: ``(n, 2)``, columns (female, male),
    from a ``textclf`` classifier; captions are masked here with ``words``."""
    from biaslab.models import textclf
    tok = model.config.mask_token
    return textclf.predict_proba(model, [mask(c, words, tok) for c in captions])


def _train_shown(texts, labels, config, seed: int, progress: bool | None):
    """``textclf.train`` with its epoch bar following ``progress`` (True / False / None =
    auto, ``biaslab.runtime.progress``); the returned model keeps ``config`` itself, so what is saved
    (``classifier.json``) does not depend on whether a bar was shown."""
    import dataclasses

    from biaslab.models import textclf
    model = textclf.train(texts, labels, dataclasses.replace(config, progress=progress),
                          seed=seed)
    model.config = config
    return model


def train_gender_classifier(dg: pd.DataFrame, config, seed: int = 0,
                            val_fraction: float = 0.1, words: str = "libra",
                            progress: bool | None = False):
    """Train f_g (supp. 1.1) on a balanced split of ``D_g`` (``f_gw`` output, column ``g``).
    ``progress``: tqdm bar over the training batches on stderr (True / False / None = auto);
    the model and ``info`` do not depend on it.

    Returns:
        ``(model, info)``; info: ``n_dg``, ``n_female``, ``n_male``, ``n_balanced``,
        ``n_train``, ``n_val``, ``val_accuracy`` (None without validation), ``seconds``.
    """
    from biaslab.models import textclf
    bal = balanced_split(dg, seed)
    rng = np.random.default_rng(seed + 1)
    n_val = int(round(val_fraction * len(bal))) if val_fraction else 0
    perm = rng.permutation(len(bal))
    val_idx, tr_idx = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    tr, va = bal.iloc[tr_idx], bal.iloc[val_idx]
    tok = config.mask_token
    t0 = time.perf_counter()
    model = _train_shown([mask(c, words, tok) for c in tr["caption"]], tr["g"].tolist(),
                         config, seed, progress)
    secs = time.perf_counter() - t0
    acc = None
    if len(va):
        p = gender_proba(model, va["caption"].tolist(), words)
        acc = float(np.mean(predicted_gender(p) == va["g"].to_numpy()))
    counts = dg["g"].value_counts()
    info = {"n_dg": int(len(dg)), "n_female": int(counts.get(FEMALE, 0)),
            "n_male": int(counts.get(MALE, 0)), "n_balanced": int(len(bal)),
            "n_train": int(len(tr)), "n_val": int(len(va)), "val_accuracy": acc,
            "train_seconds": secs}
    model.meta.update({k: v for k, v in info.items()})
    return model, info


def train_authenticity(synthetic: Sequence[str], authentic: Sequence[str], config,
                       seed: int = 0, folds: int = 1,
                       progress: bool | None = False) -> tuple[np.ndarray, dict]:
    """Train f_a (supp. Eq. 2) on balanced synthetic (label ``syn``) vs authentic (``auth``)
    captions and return ``p(B = auth | y)`` for every synthetic caption.

    The textclf class slots are reused: ``syn`` -> column 0, ``auth`` -> column 1. Captions are
    not masked (supp. Eq. 2 reads ``y``). ``folds > 1``: k-fold cross-fitting (each synthetic
    caption is scored by a model trained without it). ``progress``: tqdm bars of the training
    (True / False / None = auto); the scores do not depend on it.

    Returns:
        ``(p_auth (n_synthetic,), info)``; info: ``n_train`` per fold, ``train_accuracy``.
    """
    from biaslab.models import textclf
    syn = list(synthetic)
    auth = list(authentic)
    p_auth = np.full(len(syn), np.nan)
    if not syn:
        return p_auth, {"n_train": 0, "folds": folds}
    rng = np.random.default_rng(seed)
    fold_of = rng.permutation(len(syn)) % max(1, folds)
    infos = []
    for k in range(max(1, folds)):
        tr_syn = np.flatnonzero(fold_of != k) if folds > 1 else np.arange(len(syn))
        score = np.flatnonzero(fold_of == k) if folds > 1 else np.arange(len(syn))
        n = min(len(tr_syn), len(auth))
        if n == 0:
            raise ValueError("authenticity classifier needs synthetic and authentic captions")
        s_idx = rng.choice(tr_syn, size=n, replace=False)
        a_idx = rng.choice(len(auth), size=n, replace=False)
        texts = [syn[i] for i in s_idx] + [auth[i] for i in a_idx]
        labels = [0] * n + [1] * n
        model = _train_shown(texts, labels, config, seed + k, progress)
        p_auth[score] = textclf.predict_proba(model, [syn[i] for i in score])[:, 1]
        p_tr = textclf.predict_proba(model, texts)[:, 1]
        infos.append({"n_train": 2 * n,
                      "train_accuracy": float(np.mean((p_tr > 0.5) == np.array(labels, bool)))})
    return p_auth, {"folds": int(folds), "n_train": sum(i["n_train"] for i in infos),
                    "train_accuracy": float(np.mean([i["train_accuracy"] for i in infos]))}


# --------------------------------------------------------------------------------------------
# filters (pure functions of probabilities)


#: decimals every score is rounded to before a threshold or an argmax: a
#: filter decision then depends on the 6th decimal, not on the last float bit a machine's BLAS
#: or thread count leaves there
SCORE_DECIMALS = 6


def rounded(x) -> np.ndarray:
    """``x`` as float64 rounded to ``SCORE_DECIMALS`` decimals."""
    return np.round(np.asarray(x, float), SCORE_DECIMALS)


def predicted_gender(proba: np.ndarray) -> np.ndarray:
    """``g_hat = argmax_g p(G=g|mask(y))`` (Eq. 2) -> array of ``female``/``male`` (ties ->
    female, column 0; probabilities compared after ``rounded``)."""
    proba = rounded(proba)
    return np.where(proba[:, 1] > proba[:, 0], MALE, FEMALE) if len(proba) else \
        np.array([], dtype=object)


def _gcol(genders: Sequence[str]) -> np.ndarray:
    g = np.asarray(list(genders), dtype=object)
    bad = set(g) - {FEMALE, MALE}
    if bad:
        raise ValueError(f"genders must be female/male, got {sorted(map(str, bad))}")
    return (g == MALE).astype(int)


def p_of(proba: np.ndarray, genders: Sequence[str]) -> np.ndarray:
    """``p(G = g | .)`` of each row's own gender ``g``."""
    proba = np.asarray(proba, float)
    return proba[np.arange(len(proba)), _gcol(genders)] if len(proba) else np.zeros(0)


def f_pg(genders: Sequence[str], proba: np.ndarray) -> np.ndarray:
    """``F_PG`` (Eq. 3 / Eq. 8): boolean mask of the captions whose predicted gender differs
    from their gender ``g`` (``g_hat(y) != g``)."""
    return predicted_gender(proba) != np.asarray(list(genders), dtype=object)


def d_increase(genders: Sequence[str], proba_new: np.ndarray,
               proba_orig: np.ndarray) -> np.ndarray:
    """``d(y', y) = p(G=g|mask(y')) - p(G=g|mask(y))`` (Eq. 6's condition), per row,
    ``rounded``."""
    return rounded(p_of(proba_new, genders) - p_of(proba_orig, genders))


def f_gf(genders: Sequence[str], proba_new: np.ndarray, proba_orig: np.ndarray,
         delta: float = 0.2) -> np.ndarray:
    """``F_GF`` (Eq. 6): keep ``y'`` with ``g_hat(y') = g`` and ``d(y', y) > delta``."""
    g = np.asarray(list(genders), dtype=object)
    return (predicted_gender(proba_new) == g) & (d_increase(g, proba_new, proba_orig) > delta)


def f_af(p_auth: np.ndarray, alpha: float = 0.3) -> np.ndarray:
    """``F_AF`` (supp. Eq. 3): keep captions with ``p(B = auth | y) > alpha``."""
    return rounded(p_auth) > alpha


def swap_to_other(captions: Sequence[str], genders: Sequence[str],
                  words: str = "libra") -> tuple[list[str], np.ndarray]:
    """``swap(y)`` (Eqs. 4, 8) and whether the result is a caption of the other gender under
    ``words`` (False for e.g. ``pregnant woman -> pregnant man``, a ``both`` caption)."""
    _gcol(genders)
    out, ok = [], []
    for c, g in zip(captions, genders):
        s = swap(c, None, words)
        out.append(s)
        ok.append(caption_gender(s, words) == OTHER[g])
    return out, np.array(ok, bool)


# --------------------------------------------------------------------------------------------
# T5 candidates (Eq. 5)


def t5_candidates(t5model, sources: pd.DataFrame, settings: BCSSettings,
                  progress: bool | None = False) -> pd.DataFrame:
    """Sample ``settings.samples_per_caption`` T5 edits of every source caption (Eq. 5).

    ``sources``: columns caption_id, image_id, caption. Per sample, ``mask_rate`` of the
    content words (``content_positions``; never gender words) are masked and T5 fills them
    (``t5.fill_words``: top-k sampling, batched). ``progress``: tqdm bar over the samples on
    stderr (True / False / None = auto); the candidates do not depend on it.

    Returns one row per sample: caption_id, image_id, original, candidate (None when dropped
    before filling), positions, masked (original words), fills, status (``ok``,
    ``no_content_word``, ``malformed``, ``unchanged``, ``synonym``).
    """
    s = settings
    rng = np.random.default_rng(s.seed)
    rows, todo = [], []
    for cid, iid, cap in zip(sources["caption_id"], sources["image_id"], sources["caption"]):
        elig = content_positions(cap, s.words, s.pos)
        n = len(t5lib.word_spans(cap))
        for _ in range(s.samples_per_caption):
            row = {"caption_id": int(cid), "image_id": int(iid), "original": cap,
                   "candidate": None, "positions": [], "masked": [], "fills": [],
                   "status": "no_content_word"}
            if elig:
                pos = t5lib.sample_positions(n, s.mask_rate, rng, elig)
                spans = t5lib.word_spans(cap)
                row.update(positions=pos, masked=[spans[q][2] for q in pos], status="pending")
                todo.append(len(rows))
            rows.append(row)
    banned = (STOP_WORDS | NUMBER_WORDS | gender_words(s.words)) if s.fill_content_only \
        else None
    fills = t5lib.fill_words(t5model, [rows[k]["original"] for k in todo],
                             [rows[k]["positions"] for k in todo], batch_size=s.batch_size,
                             sample=True, top_k=s.top_k, temperature=s.temperature, seed=s.seed,
                             banned_words=banned, progress=progress)
    for k, f in zip(todo, fills):
        row = rows[k]
        if f is None or any(not any(ch.isalpha() for ch in x) or "<" in x for x in f):
            row["status"] = "malformed"
            continue
        row["fills"] = list(f)
        reason = trivial_reason(row["masked"], f)
        row["candidate"] = t5lib.apply_fills(row["original"], row["positions"], f)
        row["status"] = reason or "ok"
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# the whole synthesis


def mix(pools: dict[str, pd.DataFrame], ratio: dict[str, float], target_count: int | None,
        seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """Mix the synthesized types in the ratio of Table 1 (paper 003).

    Per type ``t`` with weight ``w_t > 0``: ``n_t = floor(N * w_t / sum w)`` where ``N`` is
    ``target_count`` (None: unbounded) reduced until every ``n_t`` fits in its pool, so the
    ratio is exact and the total is as large as possible. Rows are drawn at random (seeded).

    A type with a positive weight but an EMPTY pool would make the exact ratio select nothing
    at all (on small data, e.g. 600 coco-mini images, every A_GC candidate can fail the gender
    filter, Eq. 6). Our choice, not the paper's: such a type is dropped and the ratio holds
    among the remaining positive-weight types (``info["dropped_empty"]``); only when every
    positive-weight pool is empty is the result empty.

    Returns:
        ``(mixed rows, info)``; info ``{"requested", "total", "per_type", "limited_by",
        "dropped_empty"}``.

    Raises:
        ValueError: unknown type, negative weight, or all weights zero.
    """
    bad = set(ratio) - set(TYPES)
    if bad:
        raise ValueError(f"unknown synthesis type(s) {sorted(bad)}; known: {list(TYPES)}")
    w = {t: float(ratio.get(t, 0)) for t in TYPES}
    if any(v < 0 for v in w.values()) or sum(w.values()) <= 0:
        raise ValueError(f"mix weights must be >= 0 with a positive sum, got {ratio}")
    avail = {t: len(pools.get(t, ())) for t in TYPES}
    dropped = [t for t in TYPES if w[t] > 0 and avail[t] == 0]
    if len(dropped) < sum(1 for t in TYPES if w[t] > 0):
        w.update({t: 0.0 for t in dropped})
    tot_w = sum(w.values())
    cap = min((avail[t] * tot_w / w[t] for t in TYPES if w[t] > 0), default=0.0)
    n_total = cap if target_count is None else min(float(target_count), cap)
    limited = None
    if target_count is None or cap < target_count:
        limited = min((t for t in TYPES if w[t] > 0), key=lambda t: avail[t] * tot_w / w[t])
    rng = np.random.default_rng(seed)
    parts, per = [], {}
    for t in TYPES:
        n = int(np.floor(n_total * w[t] / tot_w + 1e-9)) if w[t] > 0 else 0
        n = min(n, avail[t])
        per[t] = n
        if n:
            pool = pools[t]
            idx = np.sort(rng.choice(len(pool), size=n, replace=False))
            parts.append(pool.iloc[idx])
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["image_id", "caption_id", "original", "biased", "type"])
    return out, {"requested": target_count, "total": int(len(out)), "per_type": per,
                 "limited_by": limited, "dropped_empty": dropped}


def _frac(removed: int, of: int) -> float | None:
    return removed / of if of else None


def synthesize(d: pd.DataFrame, gender_proba_fn: Callable[[list[str]], np.ndarray],
               t5model, settings: BCSSettings | None = None,
               auth_fn: Callable[[list[str], list[str]], tuple[np.ndarray, dict]] | None = None,
               progress: bool | None = False) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Run BCS on ``D`` (Eqs. 1-8 + supp. 1.3) and mix the result (Table 1).

    Args:
        d: ``D`` (``training_set``): caption_id, image_id, caption.
        gender_proba_fn: ``texts -> (n, 2)`` p(female), p(male) of the *unmasked* captions
            (the function masks; e.g. ``lambda t: gender_proba(f_g, t, words)``).
        t5model: a ``t5.T5Model`` (filled with ``t5.fill_words``).
        settings: ``BCSSettings``.
        auth_fn: ``(synthetic, authentic) -> (p_auth for synthetic, info)`` (default: none ->
            the authenticity filter keeps everything; the stage passes ``train_authenticity``).
        progress: tqdm bar over the T5 samples on stderr (True / False / None = auto;
            ``biaslab.runtime.progress``); nothing returned depends on it.

    Returns:
        ``(synthesized, candidates, metrics)``: the mixed biased captions (columns image_id,
        caption_id, original, biased, type, original_gender, biased_gender, d), every T5
        candidate with its filter status, and the counts/fractions of ``metrics/bcs.json``.
    """
    s = settings or BCSSettings()
    timing: dict[str, float] = {}
    t0 = time.perf_counter()
    dg = f_gw(d, s.words)
    if dg.empty:
        raise ValueError("D_g is empty: no training caption has gender words of one gender")
    p_dg = np.asarray(gender_proba_fn(dg["caption"].tolist()), float)
    dg_p = dict(zip(dg["caption_id"].astype(int), map(tuple, p_dg)))
    g_of = dict(zip(dg["caption_id"].astype(int), dg["g"]))
    timing["f_g_on_dg"] = time.perf_counter() - t0

    # A_CG (Eqs. 3-4)
    pg = f_pg(dg["g"], p_dg)
    cg = dg[pg]
    sw, ok = swap_to_other(cg["caption"].tolist(), cg["g"].tolist(), s.words)
    a_cg = pd.DataFrame({"image_id": cg["image_id"].astype(int).to_numpy(),
                         "caption_id": cg["caption_id"].astype(int).to_numpy(),
                         "original": cg["caption"].to_numpy(), "biased": sw,
                         "type": "swap", "original_gender": cg["g"].to_numpy(),
                         "biased_gender": [OTHER[g] for g in cg["g"]],
                         "d": np.nan})[ok].reset_index(drop=True)

    # D_T5 (Eq. 5)
    t0 = time.perf_counter()
    src = dg if s.source == "gendered" else d
    if s.source not in ("gendered", "all"):
        raise ValueError(f"unknown T5 source {s.source!r}; known: gendered, all")
    cand = t5_candidates(t5model, src, s, progress)
    timing["t5_generation"] = time.perf_counter() - t0
    n_samples = len(cand)
    st = cand["status"]
    okc = cand[st == "ok"].copy()
    n_before_dup = len(okc)
    okc = okc.drop_duplicates(["caption_id", "candidate"])
    dup_idx = set(cand.index[st == "ok"]) - set(okc.index)
    cand.loc[sorted(dup_idx), "status"] = "duplicate"
    # F_GW (D_T5,g): one gender, the original's when the original is gendered
    cg_new = okc["candidate"].map(lambda c: caption_gender(c, s.words))
    orig_g = okc["caption_id"].map(lambda i: g_of.get(int(i)))
    keep_gw = cg_new.isin([FEMALE, MALE]) & (orig_g.isna() | (orig_g == cg_new))
    cand.loc[okc.index[~keep_gw.to_numpy()], "status"] = "no_single_gender"
    dt5g = okc[keep_gw.to_numpy()].copy()
    dt5g["g"] = cg_new[keep_gw].to_numpy()
    # F_AF (supp. Eqs. 2-3)
    t0 = time.perf_counter()
    auth_info: dict = {}
    if auth_fn is not None and len(dt5g):
        p_auth, auth_info = auth_fn(dt5g["candidate"].tolist(), dg["caption"].tolist())
    else:
        p_auth = np.ones(len(dt5g))
    dt5g["p_auth"] = p_auth
    keep_af = f_af(p_auth, s.alpha)
    cand.loc[dt5g.index[~keep_af], "status"] = "unnatural"
    timing["authenticity"] = time.perf_counter() - t0
    n_gw = len(dt5g)
    dt5g = dt5g[keep_af]
    # f_g on D_T5,g
    t0 = time.perf_counter()
    p_new = np.asarray(gender_proba_fn(dt5g["candidate"].tolist()), float) if len(dt5g) \
        else np.zeros((0, 2))
    timing["f_g_on_dt5g"] = time.perf_counter() - t0
    has_orig = dt5g["caption_id"].map(lambda i: int(i) in dg_p).to_numpy()
    p_orig = np.array([dg_p.get(int(i), (np.nan, np.nan)) for i in dt5g["caption_id"]],
                      float).reshape(-1, 2)
    g_arr = dt5g["g"].to_numpy()
    dvals = np.where(has_orig, d_increase(g_arr, p_new, np.nan_to_num(p_orig)), np.nan) \
        if len(dt5g) else np.zeros(0)
    dt5g["d"] = dvals
    # A_GC (Eqs. 6-7)
    gf = (f_gf(g_arr, p_new, np.nan_to_num(p_orig), s.delta) & has_orig) if len(dt5g) \
        else np.zeros(0, bool)
    a_gc_src = dt5g[gf]
    a_gc = pd.DataFrame({"image_id": a_gc_src["image_id"].astype(int).to_numpy(),
                         "caption_id": a_gc_src["caption_id"].astype(int).to_numpy(),
                         "original": a_gc_src["original"].to_numpy(),
                         "biased": a_gc_src["candidate"].to_numpy(), "type": "t5",
                         "original_gender": a_gc_src["g"].to_numpy(),
                         "biased_gender": a_gc_src["g"].to_numpy(),
                         "d": a_gc_src["d"].to_numpy()})
    # A (Eq. 8)
    pgm = f_pg(g_arr, p_new) if len(dt5g) else np.zeros(0, bool)
    m_src = dt5g[pgm]
    msw, mok = swap_to_other(m_src["candidate"].tolist(), m_src["g"].tolist(), s.words)
    a_m = pd.DataFrame({"image_id": m_src["image_id"].astype(int).to_numpy(),
                        "caption_id": m_src["caption_id"].astype(int).to_numpy(),
                        "original": m_src["original"].to_numpy(), "biased": msw,
                        "type": "merged", "original_gender": m_src["g"].to_numpy(),
                        "biased_gender": [OTHER[g] for g in m_src["g"]],
                        "d": m_src["d"].to_numpy()})[mok].reset_index(drop=True)
    cand["in_t5"] = cand.index.isin(a_gc_src.index)
    cand["in_merged_source"] = cand.index.isin(m_src.index)
    pools = {"swap": a_cg, "t5": a_gc, "merged": a_m}
    mixed, mix_info = mix(pools, s.mix, s.target_count, s.seed)
    for k in ("p_female", "p_male"):
        cand[k] = np.nan
    cand.loc[dt5g.index, "p_female"] = p_new[:, 0] if len(dt5g) else []
    cand.loc[dt5g.index, "p_male"] = p_new[:, 1] if len(dt5g) else []
    cand["d"] = np.nan
    cand.loc[dt5g.index, "d"] = dvals
    cand["p_auth"] = np.nan
    if n_gw:
        cand.loc[okc.index[keep_gw.to_numpy()], "p_auth"] = p_auth

    counts = cand["status"].value_counts().to_dict()
    n_filled = n_samples - counts.get("no_content_word", 0)
    n_parsed = n_filled - counts.get("malformed", 0)
    n_nontrivial = n_parsed - counts.get("unchanged", 0) - counts.get("synonym", 0)
    n_unique = n_nontrivial - counts.get("duplicate", 0)
    metrics = {
        "n_D": int(len(d)), "n_Dg": int(len(dg)),
        "n_Dg_female": int((dg["g"] == FEMALE).sum()), "n_Dg_male": int((dg["g"] == MALE).sum()),
        "f_g_accuracy_on_Dg": float(np.mean(~pg)),
        "n_F_PG_Dg": int(pg.sum()),
        "swap_failed": int((~ok).sum() + (~mok).sum()),
        "t5": {
            "n_sources": int(len(src)), "n_samples": int(n_samples),
            "no_content_word": int(counts.get("no_content_word", 0)),
            "malformed": int(counts.get("malformed", 0)),
            "unchanged": int(counts.get("unchanged", 0)),
            "synonym": int(counts.get("synonym", 0)),
            "duplicate": int(counts.get("duplicate", 0)),
            "no_single_gender": int(counts.get("no_single_gender", 0)),
            "unnatural": int(counts.get("unnatural", 0)),
            "n_Dt5g": int(len(dt5g)),
        },
        "removed_fraction": {
            "malformed": _frac(counts.get("malformed", 0), n_filled),
            "trivial_synonym": _frac(counts.get("synonym", 0), n_parsed),
            "trivial_unchanged": _frac(counts.get("unchanged", 0), n_parsed),
            "duplicate": _frac(counts.get("duplicate", 0), n_nontrivial),
            "F_GW": _frac(counts.get("no_single_gender", 0), n_unique),
            "authenticity_F_AF": _frac(counts.get("unnatural", 0), n_gw),
            "gender_filter_F_GF": _frac(int(len(dt5g) - gf.sum()), len(dt5g)),
            "F_PG_on_Dt5g": _frac(int(len(dt5g) - pgm.sum()), len(dt5g)),
        },
        "d_mean": {"A_GC": float(np.nanmean(a_gc["d"])) if len(a_gc) else None,
                   "Dt5g": float(np.nanmean(dvals)) if len(dvals) and
                   np.isfinite(dvals).any() else None},
        "available": {t: int(len(p)) for t, p in pools.items()},
        "selected": mix_info["per_type"], "total": mix_info["total"],
        "mix": {t: float(s.mix.get(t, 0)) for t in TYPES},
        "target_count": s.target_count, "limited_by": mix_info["limited_by"],
        "mix_dropped_empty": mix_info["dropped_empty"],
        "authenticity": auth_info, "alpha": s.alpha, "delta": s.delta,
        "mask_rate": s.mask_rate, "words": s.words,
        "pos_method": "nltk" if (s.pos == "nltk" or (s.pos == "auto" and
                                                     nltk_tagger_available())) else "wordnet",
        "seconds": {k: round(v, 2) for k, v in timing.items()},
    }
    return mixed, cand, metrics


def samples_markdown(synth: pd.DataFrame, candidates: pd.DataFrame | None = None,
                     n: int = 8, seed: int = 0) -> str:
    """A readable sample per type (and per T5 filter outcome) as markdown."""
    rng = np.random.default_rng(seed)
    names = {"swap": "Gender-swapping (A_CG, Eq. 4)", "t5": "T5-generation (A_GC, Eq. 7)",
             "merged": "Merged (A, Eq. 8; d is that of the T5 caption before the swap)"}
    lines = ["# LIBRA biased caption synthesis: samples", ""]
    for t in TYPES:
        part = synth[synth["type"] == t] if len(synth) else synth
        lines += [f"## {names[t]}: {len(part)} selected", ""]
        if len(part):
            lines += ["| original | biased | d |", "|---|---|---|"]
            idx = rng.choice(len(part), size=min(n, len(part)), replace=False)
            for _, r in part.iloc[np.sort(idx)].iterrows():
                dv = "" if pd.isna(r.get("d")) else f"{r['d']:+.2f}"
                lines.append(f"| {_md(r['original'])} | {_md(r['biased'])} | {dv} |")
        lines.append("")
    if candidates is not None and len(candidates):
        lines += ["## T5 candidates removed by each filter", ""]
        for st in ("synonym", "unchanged", "malformed", "no_single_gender", "unnatural"):
            part = candidates[candidates["status"] == st]
            if not len(part):
                continue
            lines += [f"### {st}: {len(part)}", "", "| original | candidate | masked -> fills |",
                      "|---|---|---|"]
            idx = rng.choice(len(part), size=min(4, len(part)), replace=False)
            for _, r in part.iloc[np.sort(idx)].iterrows():
                mf = ", ".join(f"{a} -> {b}" for a, b in zip(r["masked"], r["fills"]))
                lines.append(f"| {_md(r['original'])} | {_md(r['candidate'] or '')} | "
                             f"{_md(mf)} |")
            lines.append("")
        ok = candidates[candidates["status"] == "ok"]
        ok = ok[ok["d"].notna()] if "d" in ok else ok
        if len(ok):
            lines += ["### kept by F_AF but removed by the gender filter (d <= delta or "
                      "g_hat != g)", "", "| original | candidate | d |", "|---|---|---|"]
            rem = ok[~ok["in_t5"] & ~ok["in_merged_source"]]
            if len(rem):
                idx = rng.choice(len(rem), size=min(4, len(rem)), replace=False)
                for _, r in rem.iloc[np.sort(idx)].iterrows():
                    lines.append(f"| {_md(r['original'])} | {_md(r['candidate'])} | "
                                 f"{r['d']:+.2f} |")
            lines.append("")
    return "\n".join(lines) + "\n"


def _md(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def settings_from_params(p: dict) -> BCSSettings:
    """``BCSSettings`` from the ``libra`` params section (unknown keys ignored: the section
    also holds the classifier, T5 and DCG settings). ``mix`` may be a dict or a Table 1 name
    (``"0:1:1"``); values out of range raise ``ValueError`` naming them
    (:func:`biaslab.libra.settings.bcs_settings`)."""
    return bcs_settings(p)


__all__ = ["BCSSettings", "TYPES", "TABLE1_MIXES", "content_positions", "is_synonym",
           "trivial_reason", "training_set", "f_gw", "balanced_split", "classifier_config",
           "gender_proba", "train_gender_classifier", "train_authenticity", "predicted_gender",
           "p_of", "f_pg", "d_increase", "f_gf", "f_af", "swap_to_other", "t5_candidates",
           "mix", "synthesize", "samples_markdown", "settings_from_params",
           "nltk_tagger_available", "wordnet_content"]
