"""The nine published captioners of the LIC paper, from their authors' released outputs.

Input: a directory in the layout of ``../shared/published-captions`` (its README): for each
model ``<model>.gender.jsonl.gz`` (the 10,780 images of the gender study) and
``<model>.race.jsonl.gz`` (the racial-bias study's images), one JSON object per line
``{"image_id": int, "caption": str, "bb_gender": str, "bb_skin": str, "split": str}``, where
``bb_gender`` / ``bb_skin`` are Zhao et al. 2021's perceived labels as the LIC code uses them.

What these files allow (thesis = paper 002):

* Ratio and Error (thesis Table 2.1; Burns et al. 2018): ``biaslab.metrics.captions`` on the
  gender study, with a percentile bootstrap 95 % CI over images (one output per model, so the
  uncertainty is the image sample's).
* LIC_M for gender (thesis Tables 2.1, 2.2; Eq. 2.10): ``biaslab.metrics.lic.lic`` without
  human captions, gender words masked (list ``lic``), mean ± 95 % CI (Student's t) over LIC
  classifier seeds.
* LIC_M for race (thesis Tables 2.3, 2.5; sec. 2.5.3): the same with the two groups
  ``("dark", "light")`` of ``bb_skin`` and the captions not masked (Table 2.3: "Captions are not
  masked"; the authors' ``race_lstm_leakage.py`` defaults to ``--mask_race_words False``).
  Unbiased is LIC_M = 25, as for gender: the split is balanced per seed.
* ``BA_label``: bias amplification over the captions' own vocabulary with the images'
  perceived labels as the reference (:func:`ba_label`). This is *not* the thesis' BA (Table
  2.1), whose reference is the co-occurrence in the human training captions; those are not in
  these files, so Table 2.1's BA is not compared with it.

Not computable from these files (listed in the report): LIC_D and LIC (need the human captions
of the same images), BA with the thesis' reference (needs human captions), DBA_G / DBA_O (need
COCO's object annotations), BLEU-4 / CIDEr / METEOR / ROUGE-L (need the reference captions). The
files' ``split`` field is not used: LIC draws its own balanced split per seed, as the authors'
``make_train_test_split``.

Decision: an image whose ``bb_gender`` is not Male/Female (gender study) or whose ``bb_skin``
is not Light/Dark (race study) is left out of that study's metrics and counted
(``n_unlabelled``). The gender study's files hold only Male/Female images.
"""
from __future__ import annotations

import gzip
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from biaslab.data.gender import BOTH, FEMALE, MALE, caption_gender, tokenize
from biaslab.runtime.io import InputError
from biaslab.metrics.biasamp import bias_amplification_from_counts, caption_vocabulary
from biaslab.runtime.stats import bootstrap

#: file stem -> the row name of thesis Tables 2.1-2.5
MODELS: dict[str, str] = {
    "nic": "NIC", "sat": "SAT", "fc": "FC", "att2in": "Att2in", "updn": "UpDn",
    "transformer": "Transformer", "oscar": "OSCAR", "nic_plus": "NIC+",
    "nic_equalizer": "NIC+Equalizer",
}
STUDIES = ("gender", "race")
#: the two groups of each study, class 0 first (``biaslab.metrics.lic.lic``'s ``groups``)
GROUPS: dict[str, tuple[str, str]] = {"gender": (FEMALE, MALE), "race": ("dark", "light")}
_LABEL_FIELD = {"gender": "bb_gender", "race": "bb_skin"}
FIELDS = ("image_id", "caption", "bb_gender", "bb_skin", "split")


def outputs_path(root: str | Path, model: str, study: str) -> Path:
    """``<root>/<model>.<study>.jsonl.gz``."""
    return Path(root) / f"{model}.{study}.jsonl.gz"


def read_outputs(root: str | Path, model: str, study: str) -> pd.DataFrame:
    """One model's released captions for one study.

    Returns:
        DataFrame with columns ``image_id`` (int64), ``caption``, ``bb_gender``, ``bb_skin``,
        ``split`` (str), one row per image, in file order.

    Raises:
        InputError: the file is missing or unreadable, a line is not a JSON object, a field is
            missing or of the wrong type, or an image id repeats (the message names the file
            and the line).
        ValueError: unknown ``study``.
    """
    if study not in STUDIES:
        raise ValueError(f"unknown study {study!r}; known: {STUDIES}")
    path = outputs_path(root, model, study)
    if not path.is_file():
        raise InputError(path, f"missing: the released captions of {model!r} for the {study} "
                               f"study (see ../shared/published-captions/README.md)")
    rows, seen = [], set()
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for k, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(path, f"line {k}: not JSON ({e.msg})") from None
                if not isinstance(r, dict):
                    raise InputError(path, f"line {k}: not a JSON object")
                miss = [c for c in FIELDS if c not in r]
                if miss:
                    raise InputError(path, f"line {k}: missing field(s) {miss}")
                if isinstance(r["image_id"], bool) or not isinstance(r["image_id"], int):
                    raise InputError(path, f"line {k}: image_id must be an integer, got "
                                           f"{r['image_id']!r}")
                bad = [c for c in FIELDS[1:] if not isinstance(r[c], str)]
                if bad:
                    raise InputError(path, f"line {k}: field(s) {bad} must be strings")
                if r["image_id"] in seen:
                    raise InputError(path, f"line {k}: image_id {r['image_id']} repeats")
                seen.add(r["image_id"])
                rows.append({c: r[c] for c in FIELDS})
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputError(path, f"unreadable ({type(e).__name__}: {e})") from None
    if not rows:
        raise InputError(path, "no captions")
    df = pd.DataFrame(rows, columns=list(FIELDS))
    df["image_id"] = df["image_id"].astype("int64")
    return df


def labels(df: pd.DataFrame, study: str) -> dict[int, str]:
    """image id -> group of the study (``female``/``male`` or ``dark``/``light``, lower case);
    images with another label (Unsure, Both, empty) are left out."""
    want = set(GROUPS[study])
    lab = df[_LABEL_FIELD[study]].astype(str).str.strip().str.lower()
    return {int(i): g for i, g in zip(df["image_id"], lab) if g in want}


def _codes(df: pd.DataFrame, words: str) -> tuple[np.ndarray, np.ndarray]:
    """(caption gender code: 1 man / -1 woman / 0 neutral, image gender: 1 male / 0 female /
    -1 other) per row."""
    cg = {MALE: 1, FEMALE: -1}
    cap = np.array([cg.get(caption_gender(c, words), 0) for c in df["caption"]], np.int8)
    img = df["bb_gender"].astype(str).str.strip().str.lower().map(
        {MALE: 1, FEMALE: 0}).fillna(-1).to_numpy(np.int8)
    return cap, img


def _ratio_stat(cap: np.ndarray, img: np.ndarray) -> float:
    lab = img >= 0
    n_w = int(((cap == -1) & lab).sum())
    return float(((cap == 1) & lab).sum()) / n_w if n_w else math.nan


def _error_stat(cap: np.ndarray, img: np.ndarray) -> float:
    lab = img >= 0
    n = int(lab.sum())
    wrong = ((img == 0) & (cap == 1)) | ((img == 1) & (cap == -1))
    return 100.0 * float(wrong.sum()) / n if n else math.nan


def ratio_error(df: pd.DataFrame, words: str = "lic", n_boot: int = 2000,
                seed: int = 0) -> dict:
    """Ratio (#man / #woman captions) and Error (% of labelled images captioned with the other
    gender) of one model on the gender study (thesis Table 2.1; definitions as
    ``biaslab.metrics.captions.ratio`` / ``error``, which this equals on the full set), each
    with a percentile bootstrap 95 % CI over images (``biaslab.runtime.stats.bootstrap``).

    Returns:
        ``{"Ratio": bootstrap dict, "Error": bootstrap dict, "n_man", "n_woman", "n_neutral"
        (no gender word), "n_both" (words of both genders), "n_images", "n_unlabelled"}``;
        Ratio is a plain ratio (2.47 for NIC), Error in percent [0, 100].
    """
    cap, img = _codes(df, words)
    lab = img >= 0
    both = np.array([caption_gender(c, words) == BOTH for c in df["caption"]], bool)
    return {"Ratio": bootstrap(_ratio_stat, cap, img, n_boot=n_boot, seed=seed),
            "Error": bootstrap(_error_stat, cap, img, n_boot=n_boot, seed=seed + 1),
            "n_man": int(((cap == 1) & lab).sum()), "n_woman": int(((cap == -1) & lab).sum()),
            "n_neutral": int(((cap == 0) & lab & ~both).sum()),
            "n_both": int((both & lab).sum()), "n_images": int(lab.sum()),
            "n_unlabelled": int((~lab).sum())}


def ba_label(df: pd.DataFrame, words: str = "lic", top_k: int = 1000, min_count: int = 100,
             n_boot: int = 1000, seed: int = 0, vocab: Sequence[str] | None = None) -> dict:
    """Bias amplification of one model's captions relative to the images' perceived gender.

    Zhao et al.'s BA (thesis Eqs. 2.2-2.3, via
    ``biaslab.metrics.biasamp.bias_amplification_from_counts``) with

    * ``L``: content words among the ``top_k`` most frequent tokens of the model's captions
      (``caption_vocabulary``: the thesis' vocabulary rule applied to the only captions at
      hand), kept if each perceived gender's images have at least ``min_count`` captions with
      the word;
    * reference ``c(w, g)``: captions containing ``w`` on images perceived as ``g`` (all
      captions, gendered or not: the truth about the images the word is used for);
    * model ``c_hat(w, g)``: captions containing ``w`` whose own gender words say ``g``
      (``caption_gender``; neutral captions and captions with both genders abstain).

    BA_label > 0: among the images a word is used for, the captions name the word's majority
    gender more often than the images show it. A captioner that names every image's gender
    correctly scores 0. Decision: not the thesis' BA, whose reference is the human training
    captions (absent here); the report does not compare it with Table 2.1's BA.

    Returns:
        ``{"BA_label": bootstrap dict (x100, CI over images with L fixed), "n_words": |L|,
        "words": L, "top": the 10 words with the largest amplification, each
        {"word", "group", "b", "b_hat"}}``.

    Raises:
        ValueError: no word passes ``min_count``.
    """
    caps = df["caption"].astype(str).tolist()
    cap, img = _codes(df, words)
    toks = [set(tokenize(c)) for c in caps]
    cand = list(vocab) if vocab is not None else caption_vocabulary(caps, top_k, words)
    X = np.array([[w in t for w in cand] for t in toks], dtype=np.float64).reshape(len(caps),
                                                                                  len(cand))
    G_ref = np.stack([img == 0, img == 1], axis=1).astype(np.float64)      # (n, 2) f, m
    G_hat = np.stack([cap == -1, cap == 1], axis=1).astype(np.float64)
    c_ref = G_ref.T @ X
    keep = (c_ref >= min_count).all(axis=0)
    if not keep.any():
        raise ValueError(f"BA_label: no word of the {len(cand)} candidates has {min_count} "
                         f"captions on images of each gender")
    Xk = X[:, keep]
    L = [w for w, k in zip(cand, keep) if k]

    def stat(idx: np.ndarray) -> float:
        w = np.bincount(idx, minlength=len(caps)).astype(np.float64)
        return bias_amplification_from_counts((G_ref * w[:, None]).T @ Xk,
                                              (G_hat * w[:, None]).T @ Xk)["ba"]

    full = bias_amplification_from_counts(G_ref.T @ Xk, G_hat.T @ Xk)
    rec = bootstrap(stat, np.arange(len(caps)), n_boot=n_boot, seed=seed)
    order = np.argsort(-full["contrib"].sum(axis=0))[:10]
    top = []
    for j in order:
        gi = int(np.argmax(full["mask"][:, j])) if full["mask"][:, j].any() else 0
        top.append({"word": L[j], "group": (FEMALE, MALE)[gi],
                    "b": float(full["b_ref"][gi, j]),
                    "b_hat": (None if not np.isfinite(full["b_model"][gi, j])
                              else float(full["b_model"][gi, j]))})
    return {"BA_label": rec, "n_words": len(L), "words": L, "top": top}


def read_paper_tables(path: str | Path) -> pd.DataFrame:
    """The thesis' printed numbers (``published/paper_tables.csv``): one row per (table,
    model, study, encoder, metric) with ``value`` and ``spread`` (the printed ± -- the std
    over the thesis' 10 classifier runs -- where given, ``spread_kind="std"``; else half a unit
    of the last printed digit, ``"rounding"``). ``line`` is the line of the table's caption in
    ``../shared/papers/002_*.txt``.

    Raises:
        InputError: missing file, missing columns, an unknown model or a value that is not a
            number.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "missing: the thesis' tables typed for the comparison")
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    need = ["table", "line", "model", "study", "encoder", "metric", "value", "spread",
            "spread_kind"]
    miss = [c for c in need if c not in df.columns]
    if miss:
        raise InputError(path, f"missing column(s) {miss}")
    bad = sorted(set(df["model"]) - set(MODELS))
    if bad:
        raise InputError(path, f"unknown model(s) {bad}; known: {sorted(MODELS)}")
    for c in ("value", "spread"):
        num = pd.to_numeric(df[c], errors="coerce")
        if num.isna().any():
            k = int(np.flatnonzero(num.isna().to_numpy())[0])
            raise InputError(path, f"line {k + 2}: {c} {df[c].iloc[k]!r} is not a number")
        df[c] = num.astype(float)
    return df


def compare(ours: Mapping[str, Mapping], paper: pd.DataFrame) -> list[dict]:
    """Per model and metric: the paper's value and spread, ours (mean, ci95, n), the difference
    and ``within`` = ``|ours - paper| <= spread`` (the issue's rule: the printed ± where given,
    otherwise the rounding of the printed value), ``None`` where we have no value.

    ``ours``: ``{model: {"<study>/<encoder>/<metric>": record}}`` (records with ``mean``,
    ``ci95``, ``n``; encoder ``""`` for Ratio / Error). Where a (study, encoder, metric) is
    printed in several tables the row with a ± (Table 2.2 / 2.5) is preferred over Table 2.1's
    plain value.
    """
    out = []
    pref = paper.assign(_k=(paper["spread_kind"] != "std").astype(int)).sort_values(
        ["model", "study", "encoder", "metric", "_k", "table"], kind="stable")
    for (model, study, enc, metric), grp in pref.groupby(
            ["model", "study", "encoder", "metric"], sort=False):
        row = grp.iloc[0]
        rec = (ours.get(model) or {}).get(f"{study}/{enc}/{metric}")
        mean = None if not rec or rec.get("mean") is None else float(rec["mean"])
        diff = None if mean is None else mean - float(row["value"])
        out.append({"model": model, "study": study, "encoder": enc, "metric": metric,
                    "table": str(row["table"]), "paper": float(row["value"]),
                    "spread": float(row["spread"]), "spread_kind": str(row["spread_kind"]),
                    "ours": mean, "ci95": None if not rec else rec.get("ci95"),
                    "n": None if not rec else rec.get("n"),
                    "diff": diff,
                    "within": None if diff is None else bool(abs(diff) <= float(row["spread"])
                                                             + 1e-9)})
    return out
