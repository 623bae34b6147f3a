"""Readers of what :func:`biaslab.data.synthetic.generate` wrote: its parameters, the
planted truth and the probe / neutral manifests, with clear errors naming the file."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from biaslab.runtime.io import InputError
from biaslab.data.synthetic.world import FEMALE, MALE, PARAMS_FILE, RENDER_VERSION
from biaslab.data.synthetic.render import NEUTRAL_MANIFEST, PROBE_COLUMNS, PROBE_MANIFEST

# --------------------------------------------------------------------------- readers

def read_generator_params(root: str | Path) -> dict:
    """The generator arguments of the synthetic dataset in ``root`` (``PARAMS_FILE``).

    Returns:
        ``{"n_images", "bias", "seed", "image_size", "captions_per_image",
        "p_no_gender_word", "probe_pairs", "p_object", "cast_strength"}``.

    Raises:
        InputError: ``root`` has no ``PARAMS_FILE`` (not a dataset written by
            :func:`generate`, e.g. real COCO), or it was written by another renderer version
            (re-run the ``synthesize`` stage).
    """
    path = Path(root) / PARAMS_FILE
    if not path.is_file():
        raise InputError(path, "not found: the data root is not a biaslab synthetic dataset "
                               "(the render backend and the causal probe need one; use "
                               "generate.backend copy_paste or sd_inpaint on real data)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        params = dict(meta["params"])
        version = meta.get("render_version")
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(path, f"not a synthetic-dataset parameter file ({e})") from e
    if version != RENDER_VERSION:
        raise InputError(path, f"written by renderer version {version}, this code draws "
                               f"version {RENDER_VERSION}: re-run the synthesize stage")
    return params


def read_truth(root: str | Path) -> dict[int, dict]:
    """``annotations/synth_truth.csv`` of ``root`` as ``{image_id: {"gender", "scene", "cast",
    "objects": [names], "skin": "light"/"dark" or None}}`` (``skin`` is None for a dataset
    whose file has no skin column). Raises ``InputError`` when the
    file is missing or malformed."""
    path = Path(root) / "annotations" / "synth_truth.csv"
    if not path.is_file():
        raise InputError(path, "not found: the data root is not a biaslab synthetic dataset")
    out = {}
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            try:
                out[int(r["image_id"])] = {"gender": r["gender"], "scene": r["scene"],
                                           "cast": r["cast"],
                                           "objects": [o for o in r["objects"].split(";") if o],
                                           "skin": r.get("skin") or None}
            except (KeyError, ValueError) as e:
                raise InputError(path, f"malformed row {r} ({e})") from e
    return out


def read_probe(root: str | Path):
    """The probe manifest ``probe/pairs.csv`` of ``root`` as a DataFrame (``PROBE_COLUMNS``;
    ``path`` = ``root / file``; ``polygon`` a JSON string, ``keypoints`` a list of 51 floats as
    in ``persons.parquet``), or None when ``root`` has no probe pairs (real data, or
    ``probe_pairs`` 0).

    Raises:
        InputError: the manifest lacks columns or a pair lacks one of its two images.
    """
    df = _read_manifest(root, PROBE_MANIFEST)
    if df is None:
        return None
    counts = df.groupby(["attribute", "pair"])["value"].apply(lambda v: sorted(v))
    bad = [k for k, v in counts.items() if v != [FEMALE, MALE]]
    if bad:
        raise InputError(Path(root) / PROBE_MANIFEST,
                         f"pairs without exactly one female and one male image: {bad[:5]}")
    return df


def _read_manifest(root: str | Path, rel: str):
    """``root / rel`` (a ``PROBE_COLUMNS`` manifest) as a DataFrame with ``path`` = ``root /
    file`` and ``keypoints`` parsed, or None when the file is absent. Raises InputError on a
    missing column."""
    import pandas as pd
    path = Path(root) / rel
    if not path.is_file():
        return None
    df = pd.read_csv(path, keep_default_na=False)
    miss = [c for c in PROBE_COLUMNS if c not in df.columns]
    if miss:
        raise InputError(path, f"missing column(s) {miss}")
    df["path"] = [str(Path(root) / f) for f in df["file"]]
    df["keypoints"] = [json.loads(k) for k in df["keypoints"]]
    return df


def read_neutral(root: str | Path):
    """The mask-neutrality manifest :data:`NEUTRAL_MANIFEST` of ``root`` as a DataFrame (columns
    as :func:`read_probe`), or None when ``root`` has none (real data, or ``probe_pairs`` 0).

    Raises:
        InputError: the manifest lacks columns."""
    return _read_manifest(root, NEUTRAL_MANIFEST)
