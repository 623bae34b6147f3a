"""Gender bias in text-to-image retrieval (GenSynth, paper 001 sec. 3 and 5, appendix C,
Eqs. 3-5; the logic of stage ``eval_retrieval``, which only reads its
inputs and writes ``metrics/retrieval.json``; the protocol and the record's layout are in that
stage's docstring).

:func:`neutral_queries` builds the gender-neutralised queries and the TF-IDF documents,
:func:`evaluate_retrieval` ranks the test gallery with the four models of paper 001's Tables
1 and 2 (the CLIP-style scorer, CLIP-clip, TF-IDF, random), on the natural gallery, its
balanced resamples (:func:`balanced_retrieval`) and the contrast set
(:func:`contrast_retrieval`). The metrics themselves are :mod:`biaslab.metrics.retrieval`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from biaslab.data.gender import caption_gender, neutralise
from biaslab.metrics.retrieval import (balanced_gallery, clip_clip_keep, recall_at_k,
                                       retrieval_bias, retrieval_difference, tfidf_scores)
from biaslab.models.clipscorer import l2  # the scorer's own re-normalisation
from biaslab.runtime import stats

@dataclass(frozen=True)
class RetrievalSettings:
    """Params group ``eval_retrieval`` (paper 001 sec. 3 and appendix C), its defaults here.

    Attributes:
        ks: the cut-offs K of Bias@K and MaxSkew@K.
        scorer: the CLIP-style scorer's directory (stage ``train_scorer``).
        n_boot, seed: bootstrap draws and seed of every interval.
        clip_m: CLIP-clip's dropped dimensions (Wang et al. 2021).
        n_balanced: runs of the gender-balanced gallery (paper 001 Table 1).
        recall_ks: the cut-offs of Recall@K.
    """
    ks: tuple[int, ...] = (10, 25, 50, 100)
    scorer: str = "data/scorer"
    n_boot: int = 2000
    seed: int = 0
    clip_m: int = 50
    n_balanced: int = 5
    recall_ks: tuple[int, ...] = (1, 5, 10)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "RetrievalSettings":
        """From the whole params.yaml (group ``eval_retrieval``; absent keys: the defaults).

        Raises:
            ValueError: an unknown key (named).
        """
        from biaslab.runtime.settings import from_params
        return from_params(cls, params.get("eval_retrieval"), "eval_retrieval")


def neutral_queries(captions: pd.DataFrame, ids: list[int],
                    words: str) -> tuple[list[str], list[int], dict]:
    """The retrieval queries of paper 001 sec. 3.2: every caption of ``captions`` (columns
    image_id, caption; the test images' only, sorted) that names one gender, neutralised
    (:func:`biaslab.data.gender.neutralise`), and each gallery image's document (its own
    neutralised captions).

    Returns ``(queries, targets, docs)``: the query texts, the gallery position of each
    query's own image (``ids.index``) and {image_id: [neutralised captions]}.

    Raises:
        ValueError: no gendered caption to neutralise into a query.
    """
    pos = {i: j for j, i in enumerate(ids)}
    queries, targets, docs = [], [], {i: [] for i in ids}
    for iid, c in zip(captions["image_id"].astype(int), captions["caption"].astype(str)):
        docs[iid].append(neutralise(c, words))
        if caption_gender(c, words) in ("female", "male"):
            queries.append(neutralise(c, words))
            targets.append(pos[iid])
    if not queries:
        raise ValueError("no gendered test caption to neutralise into a query")
    return queries, targets, docs


def evaluate_retrieval(e: RetrievalSettings, scorer, encode, table: pd.DataFrame,
                       train: pd.DataFrame, labels: dict, gender_source: str, queries: list[str],
                       targets: list[int], docs: dict,
                       contrast_pairs: pd.DataFrame | None = None,
                       contrast_candidates: pd.DataFrame | None = None) -> dict:
    """The record of ``metrics/retrieval.json`` (layout: ``stages/eval_retrieval.py``).

    Args:
        e: :class:`RetrievalSettings`.
        scorer: a :class:`biaslab.models.clipscorer` scorer (``encode_images``,
            ``encode_texts``).
        encode: ``encode(table) -> float32 (n, d)`` backbone features of a table with columns
            image_id, path (the scorer's image encoder, content-keyed cache).
        table, train: the test gallery and the training images (image_id, path), sorted.
        labels: {image_id: gender} from ``gender_source``; other images are "undefined".
        queries, targets, docs: :func:`neutral_queries` of the test captions.
        contrast_pairs, contrast_candidates: stage contrast_set's tables (None: no set).

    Raises:
        ValueError: CLIP-clip cannot rank the dimensions (:func:`clip_clip_keep`).
    """
    ids = table["image_id"].astype(int).tolist()
    gallery = [labels.get(i, "undefined") for i in ids]
    img = scorer.encode_images(np.asarray(encode(table), np.float32))
    txt = scorer.encode_texts(queries)
    # CLIP-clip: the m dimensions most informative of gender on the training images
    train_g = [labels.get(int(i), "undefined") for i in train["image_id"]]
    train_img = scorer.encode_images(np.asarray(encode(train), np.float32))
    m = int(e.clip_m)
    keep, mi = clip_clip_keep(train_img, train_g, m, seed=int(e.seed))
    ks = [int(k) for k in e.ks]
    n_boot, seed = int(e.n_boot), int(e.seed)
    rng = np.random.default_rng(seed)
    scores = {"scorer": txt @ img.T,
              "clip_clip": l2(txt[:, keep]) @ l2(img[:, keep]).T,
              "tfidf": tfidf_scores(queries, [" ".join(docs[i]) for i in ids]),
              "random": rng.random((len(queries), len(ids)))}
    out = {name: retrieval_bias(sc, gallery, ks, n_boot=n_boot, seed=seed)
           for name, sc in scores.items()}
    # paired by query: the claims of paper 001 (biaslab.analysis.validity_paper001.retrieval_checks)
    out["differences"] = {f"{x}-{y}": retrieval_difference(scores[x], scores[y], gallery, ks,
                                                         n_boot=n_boot, seed=seed)
                          for x, y in (("tfidf", "random"), ("clip_clip", "scorer"))}
    # paper 001 Table 1, "COCO Val (Balanced)": the majority group sampled down, 5 runs
    out["balanced"] = balanced_retrieval(scores, gallery, targets, ks, int(e.n_balanced), seed)
    out["recall"] = {name: recall_at_k(scores[name], targets, e.recall_ks, n_boot=n_boot,
                                       seed=seed) for name in ("scorer", "clip_clip", "tfidf")}
    n_f, n_m = gallery.count("female"), gallery.count("male")
    out["setup"] = {"n_queries": len(queries), "n_gallery": len(ids), "n_female": n_f,
                    "n_male": n_m, "n_undefined": len(ids) - n_f - n_m,
                    "gender_source": gender_source,
                    "desired_female": n_f / (n_f + n_m) if n_f + n_m else None, "ks": ks,
                    "n_boot": n_boot, "clip_m": m, "embedding_dim": int(img.shape[1]),
                    "clip_mi_images": int(sum(g in ("female", "male") for g in train_g)),
                    "clip_mi_top": [float(x) for x in np.sort(mi)[::-1][:5]],
                    "n_balanced": int(e.n_balanced), "recall_ks": list(e.recall_ks)}
    # paper 001's GenSynth: the contrast set of stage contrast_set (both groups' versions of
    # each kept test image, background fixed)
    out["contrast"] = contrast_retrieval(e, scorer, encode, keep, docs, queries, targets, ids,
                                         seed, n_boot, contrast_pairs, contrast_candidates)
    return out


def balanced_retrieval(scores: dict, gallery: list, targets: list, ks: list, n: int,
                       seed: int) -> dict:
    """Bias@K / MaxSkew@K of each model on ``n`` balanced resamples of the test set
    (``balanced_gallery``, seeds ``seed`` ... ``seed + n - 1``): the kept images are the
    gallery and their captions the queries (a balanced data set, images and captions, as
    paper 001's "COCO Val (Balanced)"; queries of dropped images would keep the natural
    set's 2.3 : 1 mix of contexts). Mean over the resamples, their std and t-based 95 % CI
    (paper 001 Table 1 reports mean ± std over 5 runs)."""
    per = {name: {} for name in scores}
    t = np.asarray(targets)
    for r in range(n):
        idx = balanced_gallery(gallery, seed + r)
        g = [gallery[j] for j in idx]
        rows = np.flatnonzero(np.isin(t, idx))
        for name, sc in scores.items():
            res = retrieval_bias(sc[np.ix_(rows, idx)], g, [k for k in ks if k < len(idx)],
                                 n_boot=100, seed=seed)
            for key, v in res.items():
                per[name].setdefault(key, []).append(v["mean"])
    return {name: {key: {k: v for k, v in stats.summarize(vals).items()
                         if k in ("mean", "ci95", "std", "n")} for key, vals in d.items()}
            for name, d in per.items()}


def contrast_retrieval(e: RetrievalSettings, scorer, encode, keep, docs: dict, queries: list,
                       targets: list, ids: list, seed: int, n_boot: int,
                       stored: pd.DataFrame | None,
                       candidates: pd.DataFrame | None) -> dict:
    """The four rankings on the contrast set (``stored``: ``data/contrast/pairs.parquet``,
    None where stage contrast_set wrote none; ``candidates``: its candidates.parquet;
    ``encode(table)``: backbone features of a table with columns image_id, path): the gallery is
    both versions of every kept source image (g(I) = the version's group, so the gallery is
    balanced by construction), the queries are the kept images' queries of the natural set.
    Both versions of an image share its captions, so TF-IDF scores them equally: the gallery
    is put in a seeded random order first, so that ties fall to either version alike (a stable
    sort would always rank the first-listed group higher)."""
    from biaslab.counterfactual.generate import stable_hash
    if stored is None:
        return {"note": "no contrast set (stage contrast_set did not write one)"}
    if stored.empty:
        return {"note": "the contrast set is empty: no test image kept both versions"}
    rng = np.random.default_rng(seed + 1)
    pairs = stored.iloc[rng.permutation(len(stored))].reset_index(drop=True)
    src = pairs["image_id"].astype(int).tolist()
    gallery = pairs["group"].astype(str).tolist()
    kept = set(src)
    rows = [q for q, t in enumerate(targets) if ids[t] in kept]
    if not rows:
        return {"note": "no gendered caption among the contrast set's source images"}
    paths = pairs["path"].astype(str).tolist()
    feats = encode(pd.DataFrame({"image_id": [stable_hash(p) >> 1 for p in paths],
                                 "path": paths}))
    img = scorer.encode_images(np.asarray(feats, np.float32))
    txt = scorer.encode_texts([queries[q] for q in rows])
    scores = {"scorer": txt @ img.T,
              "clip_clip": l2(txt[:, keep]) @ l2(img[:, keep]).T,
              "tfidf": tfidf_scores([queries[q] for q in rows], [" ".join(docs[i]) for i in src]),
              "random": rng.random((len(rows), len(src)))}
    ks = [int(k) for k in e.ks if int(k) < len(src)]
    out = {name: retrieval_bias(sc, gallery, ks, n_boot=n_boot, seed=seed)
           for name, sc in scores.items()}
    out["differences"] = {f"{x}-{y}": retrieval_difference(scores[x], scores[y], gallery, ks,
                                                         n_boot=n_boot, seed=seed)
                          for x, y in (("tfidf", "random"), ("scorer", "random"),
                                       ("clip_clip", "scorer"))}
    out["setup"] = {"n_queries": len(rows), "n_gallery": len(src),
                    "n_source_images": len(kept), "n_female": gallery.count("female"),
                    "n_male": gallery.count("male"), "n_undefined": 0, "ks": ks}
    from biaslab.counterfactual.contrast import contrast_counts
    out["set"] = contrast_counts(candidates, candidates["knn_accept"].to_numpy(), stored)
    return out
