"""Spurious correlations between context and gender in the data, and whether the contrast
set removes them (paper 001 appendix D; the logic of stage
``spurious``, which only reads its inputs and writes its files). The definitions and the
choices where paper 001 is silent are in :mod:`biaslab.analysis.spurious`; the record's
layout in ``stages/spurious.py``'s docstring.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biaslab.runtime.io import InputError, json_number

#: fewer contrast sources than this: no bootstrap over sources, the contrast part is left out
#: (coco-mini at 400 images kept 1; the default keeps 128)
MIN_CONTRAST_SOURCES = 5


@dataclass(frozen=True)
class SpuriousSettings:
    """Params group ``spurious`` (paper 001 appendix D), its defaults here.

    Attributes:
        clusters: caption clusters m (app. D.1); lda_words: salient words per cluster (D.3).
        text_encoder: the captions' encoder (``lsa``: TF-IDF + SVD, offline; else a text
            encoder name of :mod:`biaslab.models.encoders`); image_encoder: the gender
            classifiers' backbone (None: ``features.backbone``).
        n_boot, seed: bootstrap draws and seed; workers: classifiers fitted at once.
    """
    clusters: int = 20
    lda_words: int = 10
    text_encoder: str = "lsa"
    image_encoder: str | None = None
    n_boot: int = 1000
    seed: int = 0
    workers: int = 2

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "SpuriousSettings":
        """From the whole params.yaml (group ``spurious``; absent keys: the defaults).

        Raises:
            ValueError: an unknown key (named).
        """
        from biaslab.runtime.settings import from_params
        return from_params(cls, params.get("spurious"), "spurious")


def num_record(rec):
    """A record with every value JSON-safe (:func:`biaslab.runtime.io.json_number`)."""
    return None if rec is None else {k: json_number(v) for k, v in rec.items()}


def parity_record(t: dict) -> dict:
    """The chi-square record for JSON: p to 4 significant digits (a p of 1e-60 must not round
    to 0), the statistic to 4 decimals."""
    return {**t, "chi2": json_number(t["chi2"]),
            "p": None if t["p"] is None else float(f"{t['p']:.4g}")}


def run_spurious(s: SpuriousSettings, labels: dict, used: str, split: pd.DataFrame,
                 images: pd.DataFrame, persons: pd.DataFrame, caps: pd.DataFrame,
                 pairs: pd.DataFrame | None, *, words: str, blackout: dict, enc: str,
                 size, cache: str, text_cache: str,
                 out_dir: Path) -> tuple[dict, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Caption clusters (app. D.1, D.3) and gender classifiers with the gender removed (app.
    D.4) on the natural test split and the contrast set.

    Args:
        s: :class:`SpuriousSettings`.
        labels, used: {image_id: gender} and its source (eval_captioner.gender_source).
        split, images, persons, caps: ``data/split.parquet``,
            ``data/prepared/{images,persons,captions}.parquet`` (captions sorted).
        pairs: ``data/contrast/pairs.parquet`` (None: the contrast stage skipped).
        words: gender word list (label.words); blackout: {"sources", "dilate_px", "fill"} of
            the Ratio protocol's person removal; enc, size, cache: image backbone, its input
            size and the feature cache; text_cache: the text-feature cache.
        out_dir: where the person-removed images are written (``masked/``,
            ``masked_contrast/``).

    Returns:
        ``(record, parity, clusters, scores)``: the record of ``metrics/spurious.json``, the
        per-cluster parity table (cluster, n, delta_m, lo, hi, words), the images' clusters
        (image_id, split, gender, cluster) and the classifiers' scores (set, image_id, group,
        gender, p_background, p_image, p_text).

    Raises:
        InputError: a split without both genders (with captions, or with a person box), or
            too few images for the clusters.
    """
    from biaslab.analysis import spurious as S
    from biaslab.captioning.data import image_features
    from biaslab.classify.blackout import write_blackout_images
    from biaslab.data.gender import neutralise
    from biaslab.models.features import encode_texts_cached
    bo = blackout
    n_boot, seed = int(s.n_boot), int(s.seed)
    sp = split[["image_id", "split"]].assign(image_id=lambda d: d["image_id"].astype(int))
    sp["gender"] = [labels.get(int(i), "undefined") for i in sp["image_id"]]
    known = sp[sp["gender"].isin(S.GENDERS) & sp["image_id"].isin(set(caps["image_id"]))] \
        .sort_values("image_id", ignore_index=True)
    train, test = (known[known["split"] == x].reset_index(drop=True) for x in ("train", "test"))
    if train["gender"].nunique() < 2 or test["gender"].nunique() < 2:
        raise InputError("data/split.parquet", f"the train and test splits need images of both "
                                               f"genders with captions (train {len(train)}, "
                                               f"test {len(test)})")
    # ------------------------------------------------ caption clusters (app. D.1, D.3)
    neut = caps[caps["image_id"].isin(set(known["image_id"]))]
    texts = [neutralise(c, words) for c in neut["caption"].astype(str)]
    if s.text_encoder == "lsa":
        temb = S.lsa_embeddings(texts, seed=seed)
    else:
        temb = encode_texts_cached(texts, text_cache, s.text_encoder, progress=True)
    ids = known["image_id"].to_numpy()
    f = S.mean_embeddings(temb, neut["image_id"].astype(int), ids)
    m = int(s.clusters)
    try:
        lab, km = S.caption_clusters(f, m, seed=seed)
    except ValueError as err:
        raise InputError("data/labels/images.parquet", f"caption clusters: {err}") from None
    docs = pd.Series(texts, index=neut["image_id"].astype(int).to_numpy()).groupby(level=0) \
        .agg(" ".join).reindex(ids).tolist()
    words_c = S.salient_words(docs, lab, m, int(s.lda_words), seed=seed)
    parity = S.cluster_parity(lab, known["gender"], m)
    parity["words"] = [" ".join(w) for w in words_c]
    clusters = {"m": m, "n": int(len(ids)), "encoder": s.text_encoder,
                "overall_male_share": json_number(float((known["gender"] == "male").mean())),
                "test": parity_record(S.parity_test(lab, known["gender"])),
                "auc": num_record(S.cluster_auc(
                    lab[(known["split"] == "train").to_numpy()],
                    known.loc[known["split"] == "train", "gender"],
                    lab[(known["split"] == "test").to_numpy()],
                    known.loc[known["split"] == "test", "gender"], n_boot=n_boot, seed=seed)),
                "rows": [{k: (json_number(v) if k != "words" else v) for k, v in r.items()}
                         for r in parity.to_dict("records")], "contrast": None}
    # ------------------------------------------------ gender classifiers (app. D.4)
    out_dir.mkdir(parents=True, exist_ok=True)
    nat = pd.concat([train, test], ignore_index=True).merge(
        images[["image_id", "path"]], on="image_id", how="left")
    masked = write_blackout_images(nat, persons, out_dir / "masked", progress=True, **bo)
    # an image of known gender without a person box has nothing to remove (and may show an
    # unannotated person): it is left out of the classifiers, and counted
    no_box = int(len(nat) - len(masked))
    keep = set(masked["image_id"])
    nat = nat[nat["image_id"].isin(keep)].reset_index(drop=True)
    masked = masked.set_index("image_id").loc[nat["image_id"]].reset_index()
    train, test = (nat[nat["split"] == x].reset_index(drop=True) for x in ("train", "test"))
    if train["gender"].nunique() < 2 or test["gender"].nunique() < 2:
        raise InputError("data/prepared/persons.parquet", f"the train and test splits need "
                                                          f"images of both genders with a "
                                                          f"person box (train {len(train)}, "
                                                          f"test {len(test)})")
    con, changed, compared = None, None, 0
    n_kept = int(pairs["image_id"].nunique()) if pairs is not None and len(pairs) else 0
    if 0 < n_kept < MIN_CONTRAST_SOURCES:
        print(f"spurious: the contrast set keeps {n_kept} source image(s), fewer than "
              f"{MIN_CONTRAST_SOURCES}: no interval over sources; its part is left out")
    if n_kept >= MIN_CONTRAST_SOURCES:
        con = pairs.assign(image_id=pairs["image_id"].astype(int), gender=pairs["group"])
        vid = np.arange(len(con))               # version ids: one row per (source, group)
        # every version loses its source's persons (the same boxes): the edit is inside them
        vp = pd.DataFrame({"v": vid, "image_id": con["image_id"]}).merge(
            persons.assign(image_id=persons["image_id"].astype(int)), on="image_id") \
            .drop(columns="image_id").rename(columns={"v": "image_id"})
        cmasked = write_blackout_images(
            pd.DataFrame({"image_id": vid, "gender": con["gender"], "path": con["path"]}), vp,
            out_dir / "masked_contrast", **bo)
        # a version whose person-removed image differs from its source's: the edit reached
        # past the removed boxes (their fill is the rest's mean colour, so one pixel suffices).
        # Only lossless pairs compare (PNG both sides): a JPEG re-encoding changes every pixel,
        # and a source outside this stage's labelled set has no removed image to compare with
        from biaslab.models.features import file_digest
        src = {int(i): p for i, p in zip(masked["image_id"], masked["path"])
               if str(p).endswith(".png")}
        both = [(src[int(i)], p) for i, p in zip(con["image_id"], cmasked["path"])
                if int(i) in src and str(p).endswith(".png")]
        compared = len(both)
        changed = int(sum(file_digest(a) != file_digest(b) for a, b in both)) if both else None
        # the contrast sources' clusters: their captions are the source's (both versions)
        cpos = pd.Index(ids).get_indexer(con["image_id"])
        inside = cpos >= 0
        clab = km.predict(np.asarray(S.mean_embeddings(
            temb, neut["image_id"].astype(int), con["image_id"][inside]), np.float64)) \
            if inside.any() else np.zeros(0, np.int64)
        cpar = S.cluster_parity(clab, con["gender"][inside], m)
        d = cpar["delta_m"].dropna().abs()
        clusters["contrast"] = {"n": int(inside.sum()),
                                "max_abs_delta_m": json_number(float(d.max()) if len(d) else None)}

    def encode(table: pd.DataFrame) -> np.ndarray:
        """Backbone features of ``table`` (image_id, path), the images not yet in the feature
        cache encoded on ``spurious.workers`` forked processes."""
        return image_features(table, cache, enc, size, num_threads=1, progress=True,
                              workers=int(s.workers))

    ntr, nte = len(train), len(test)
    xm = encode(masked)
    xi = encode(nat)
    ti = pd.Index(ids).get_indexer(nat["image_id"])
    xt = f[ti]
    gtr, gte = nat["gender"][:ntr].tolist(), nat["gender"][ntr:].tolist()
    scores = {"set": ["natural"] * nte, "image_id": nat["image_id"][ntr:].tolist(),
              "group": [None] * nte, "gender": gte}
    cls = {}
    feats_c = {}
    if con is not None:
        feats_c = {"background": encode(cmasked), "image": encode(con.assign(image_id=vid)),
                   "text": np.asarray(S.mean_embeddings(temb, neut["image_id"].astype(int),
                                                        con["image_id"]))
                   if inside.all() else None}
    for name, x in (("background", xm), ("image", xi), ("text", xt)):
        model = S.fit_gender_classifier(x[:ntr], gtr, seed=seed)
        p = model.predict_proba(x[ntr:])[:, 1]
        scores[f"p_{name}"] = p.tolist()
        rec = {"natural": num_record(S.gender_auc(p, gte, n_boot=n_boot, seed=seed)),
               "contrast": None, "natural-contrast": None}
        xc = feats_c.get(name)
        if xc is not None:
            pc = model.predict_proba(xc)[:, 1]
            feats_c[f"p_{name}"] = pc
            rec["contrast"] = num_record(S.gender_auc(pc, con["gender"], groups=con["image_id"],
                                                n_boot=n_boot, seed=seed))
            rec["natural-contrast"] = num_record(S.auc_difference(
                (p, gte, None), (pc, con["gender"], con["image_id"]), n_boot=n_boot, seed=seed))
        cls[name] = rec
    table = pd.DataFrame(scores)
    if con is not None:
        ct = pd.DataFrame({"set": "contrast", "image_id": con["image_id"].to_numpy(),
                           "group": con["group"].to_numpy(), "gender": con["gender"].to_numpy()})
        for name in ("background", "image", "text"):
            ct[f"p_{name}"] = feats_c.get(f"p_{name}", np.full(len(ct), np.nan))
        table = pd.concat([table, ct], ignore_index=True)
    clusters_table = known[["image_id", "split", "gender"]].assign(cluster=lab)
    out = {"clusters": clusters, "classifiers": cls,
           "setup": {"n_train": ntr, "n_test": nte,
                     "n_contrast_sources_kept": n_kept,
                     "n_contrast_sources": int(con["image_id"].nunique()) if con is not None
                     else 0, "gender_source": used, "blackout": {**bo, "sources": list(
                         bo["sources"])}, "image_encoder": enc,
                     "text_encoder": s.text_encoder, "n_boot": n_boot,
                     "contrast_background_changed": changed,
                     "contrast_background_compared": compared,
                     "n_without_person_box": no_box}}
    return out, parity, clusters_table, table
