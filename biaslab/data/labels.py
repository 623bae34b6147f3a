"""Gender labels of captions and images, their agreement with crowd-sourced perceived gender,
and the deterministic gender-stratified split."""
from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from biaslab.data import gender as G
from biaslab.runtime.io import InputError


def _require(df: pd.DataFrame, cols: list[str], name: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InputError(name, f"missing column(s) {missing}; has {list(df.columns)}")


def label_captions(captions: pd.DataFrame, words: str = "lic") -> pd.DataFrame:
    """Add ``caption_gender`` (female/male/both/none) to a captions table.

    Args:
        captions: columns caption_id, image_id, caption.
        words: word-list name (``biaslab.data.gender.WORD_LISTS``).
    """
    _require(captions, ["caption_id", "image_id", "caption"], "captions table")
    out = captions[["caption_id", "image_id", "caption"]].copy()
    out["caption_gender"] = [G.caption_gender(c, words) for c in out["caption"]]
    return out


def label_images(labeled_captions: pd.DataFrame, rule: str = "any_mention",
                 words: str = "lic", k: int = 2) -> pd.DataFrame:
    """Image-level gender from its captions (``biaslab.data.gender.image_gender``).

    Returns one row per image: image_id, gender (female/male/undefined), n_female, n_male,
    n_both, n_none (caption counts by caption-level label).
    """
    _require(labeled_captions, ["image_id", "caption", "caption_gender"], "labelled captions")
    rows = []
    for iid, grp in labeled_captions.groupby("image_id", sort=True):
        counts = grp["caption_gender"].value_counts()
        rows.append({"image_id": int(iid),
                     "gender": G.image_gender(list(grp["caption"]), rule=rule, words=words, k=k),
                     **{f"n_{lab}": int(counts.get(lab, 0))
                        for lab in (G.FEMALE, G.MALE, G.BOTH, G.NONE)}})
    return pd.DataFrame(rows, columns=["image_id", "gender", "n_female", "n_male", "n_both",
                                       "n_none"])


def label_images_perceived(perceived: pd.DataFrame) -> pd.DataFrame:
    """Image-level gender from perceived (crowd) labels, for data without captions
    (OpenImages: MIAP's GenderPresentation, ``biaslab.data.openimages``).

    Args:
        perceived: the prepared ``perceived_gender`` table (image_id, perceived_gender in
            female / male / other).

    Returns:
        the table of ``label_images`` (image_id, gender, n_female, n_male, n_both, n_none):
        gender female / male, ``undefined`` for ``other``; the caption counts are 0 (no
        captions were read).
    """
    _require(perceived, ["image_id", "perceived_gender"], "perceived gender table")
    g = perceived["perceived_gender"].where(perceived["perceived_gender"].isin(G.GENDERS),
                                            "undefined")
    out = pd.DataFrame({"image_id": perceived["image_id"].astype("int64"), "gender": g})
    for lab in (G.FEMALE, G.MALE, G.BOTH, G.NONE):
        out[f"n_{lab}"] = 0
    return out.sort_values("image_id", ignore_index=True)


#: the person word of a label text, by image gender (``label_texts``)
_PERSON_WORD = {G.FEMALE: "woman", G.MALE: "man"}


def label_texts(image_labels: pd.DataFrame, objects: pd.DataFrame,
                max_objects: int = 8) -> pd.DataFrame:
    """Caption stand-ins for data without captions (OpenImages): one text per labelled image,
    "a woman with a ball, a coffee cup and a handbag." (the person word from the image's
    gender: woman / man, "person" when undefined; the image's object classes in name order,
    at most ``max_objects``). They serve where a caption is an input, not an output: paper 000
    Eq. 1's inpainting prompt t^(g') (swapped to each group as a caption would be) and the
    LiT scorer's training texts for prompt adherence (Eq. 4). No captioning metric reads them.

    Args:
        image_labels: ``data/labels/images.parquet`` (image_id, gender).
        objects: ``data/prepared/objects.parquet`` (image_id, category).
        max_objects: classes named per text (>= 0).

    Returns:
        the captions table (caption_id = image_id, image_id, caption), int64 ids, sorted.
    """
    _require(image_labels, ["image_id", "gender"], "image labels")
    _require(objects, ["image_id", "category"], "objects table")
    cats = (objects.drop_duplicates(["image_id", "category"]).sort_values(["image_id",
                                                                           "category"])
            .groupby("image_id")["category"].apply(list).to_dict())
    rows = []
    for iid, g in zip(image_labels["image_id"], image_labels["gender"]):
        names = [f"a {c}" for c in cats.get(int(iid), [])[:max_objects]]
        text = f"a {_PERSON_WORD.get(g, 'person')}"
        if names:
            text += " with " + (names[0] if len(names) == 1 else
                                ", ".join(names[:-1]) + " and " + names[-1])
        rows.append({"caption_id": int(iid), "image_id": int(iid), "caption": text + "."})
    return pd.DataFrame(rows, columns=["caption_id", "image_id", "caption"]).astype(
        {"caption_id": "int64", "image_id": "int64"}).sort_values("caption_id",
                                                                  ignore_index=True)


def captions_or_label_texts(captions: pd.DataFrame, image_labels_path, objects_path
                            ) -> tuple[pd.DataFrame, bool]:
    """``(captions, False)`` when the data has captions, else ``(label_texts(...), True)``
    read from the two parquet paths (data without captions: OpenImages)."""
    from biaslab.runtime.io import read_parquet
    if len(captions):
        return captions, False
    return label_texts(read_parquet(image_labels_path), read_parquet(objects_path)), True


def agreement(image_labels: pd.DataFrame, perceived: pd.DataFrame) -> dict:
    """Agreement of caption-derived image gender with crowd-sourced perceived gender.

    Compared on images where both are female/male. Cohen's kappa (scikit-learn) corrects the
    accuracy for chance agreement. ``coverage`` is the fraction of images with a binary
    perceived gender that the caption rule labels (not undefined).

    Returns:
        dict with n_compared, accuracy (0-1), cohen_kappa (-1..1), confusion (rows: perceived
        female, male; columns: caption female, male), coverage; values are None when nothing
        can be compared.
    """
    _require(image_labels, ["image_id", "gender"], "image labels")
    _require(perceived, ["image_id", "perceived_gender"], "perceived gender table")
    binary = perceived[perceived["perceived_gender"].isin(G.GENDERS)]
    m = binary.merge(image_labels[["image_id", "gender"]], on="image_id", how="inner")
    both = m[m["gender"].isin(G.GENDERS)]
    out = {"n_perceived_binary": int(len(m)), "n_compared": int(len(both)),
           "coverage": float(len(both) / len(m)) if len(m) else None}
    if len(both) == 0:
        return {**out, "accuracy": None, "cohen_kappa": None, "confusion": None}
    y_true, y_pred = both["perceived_gender"], both["gender"]
    return {**out,
            "accuracy": float((y_true == y_pred).mean()),
            "cohen_kappa": float(cohen_kappa_score(y_true, y_pred, labels=list(G.GENDERS))),
            "confusion": confusion_matrix(y_true, y_pred, labels=list(G.GENDERS)).tolist()}


def stratified_split(image_labels: pd.DataFrame, fractions: dict[str, float],
                     seed: int) -> pd.DataFrame:
    """Deterministic train/val/test split stratified by ``gender``.

    Within each gender stratum the image ids are sorted, permuted with
    ``numpy.random.default_rng(seed)`` and cut at the cumulative fractions (rounded), so the
    same ids, fractions and seed always give the same split.

    Args:
        image_labels: columns image_id, gender.
        fractions: split name -> fraction, e.g. {train: 0.7, val: 0.1, test: 0.2}; each >= 0,
            summing to 1 (+- 1e-6).
        seed: permutation seed.

    Returns:
        DataFrame image_id, split, gender sorted by image_id.

    Raises:
        ValueError: fractions negative or not summing to 1.
    """
    _require(image_labels, ["image_id", "gender"], "image labels")
    names = list(fractions)
    fr = np.array([float(fractions[n]) for n in names])
    if (fr < 0).any() or abs(fr.sum() - 1) > 1e-6:
        raise ValueError(f"split fractions must be >= 0 and sum to 1, got {fractions}")
    rng = np.random.default_rng(seed)
    parts = []
    for g, grp in image_labels.sort_values("image_id").groupby("gender", sort=True):
        ids = grp["image_id"].to_numpy()
        ids = ids[rng.permutation(len(ids))]
        cuts = np.round(np.cumsum(fr) * len(ids)).astype(int)
        start = 0
        for name, end in zip(names, cuts):
            parts.append(pd.DataFrame({"image_id": ids[start:end], "split": name, "gender": g}))
            start = end
    return pd.concat(parts).sort_values("image_id", ignore_index=True)


def split_with_fixed(image_labels: pd.DataFrame, images: pd.DataFrame,
                     fractions: dict[str, float], seed: int,
                     fixed: dict[str, str] | None = None, source: str = "images") -> pd.DataFrame:
    """Train/val/test split where some COCO splits are assigned whole (``fixed``: COCO split
    name -> split name, e.g. ``{"synthtest": "test"}``: the synthetic generator's separate test
    set; ``{"val2014": "test"}`` on COCO) and the other images are split by
    :func:`stratified_split` with ``fractions``.

    Args:
        image_labels: columns image_id, gender.
        images: ``images.parquet`` (columns image_id, coco_split).
        fractions, seed: as :func:`stratified_split`, for the images not in a fixed split.
        fixed: COCO split -> split name; None / {} = every image through ``fractions``.
        source: the name of ``images`` in error messages.

    Returns:
        DataFrame image_id, split, gender sorted by image_id.

    Raises:
        InputError: a fixed COCO split has no image in ``images`` (a profile meant for other
            data: the fixed test set would silently be empty).
        ValueError: bad fractions.
    """
    from biaslab.runtime.io import InputError
    fixed = dict(fixed or {})
    if not fixed:
        return stratified_split(image_labels, fractions, seed)
    _require(images, ["image_id", "coco_split"], "images")
    present = set(images["coco_split"])
    missing = sorted(set(fixed) - present)
    if missing:
        raise InputError(source, f"split.fixed names COCO split(s) {missing} that the data "
                                 f"does not have (its splits: {sorted(present)})")
    where = images.set_index("image_id")["coco_split"]
    coco = image_labels["image_id"].map(where)
    is_fixed = coco.isin(list(fixed)).to_numpy()
    rest = stratified_split(image_labels[~is_fixed], fractions, seed)
    pinned = image_labels.loc[is_fixed, ["image_id", "gender"]].assign(
        split=coco[is_fixed].map(fixed).to_numpy())
    return pd.concat([rest, pinned[["image_id", "split", "gender"]]]).sort_values(
        "image_id", ignore_index=True)
