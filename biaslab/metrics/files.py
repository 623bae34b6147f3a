"""Readers of the files a user brings to the captioning metrics (COCO results, gender labels,
COCO captions) and the strict-JSON conversion of their results. Every error names the file
and the problem (``biaslab.runtime.io.InputError``). Used by the ``biaslab`` CLI, the stages and
``biaslab.runtime.plan``; the library never imports ``biaslab.cli``."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biaslab.runtime.io import InputError, check_input_file, read_json

__all__ = ["ATTRIBUTES", "INTERSECTIONS", "is_json_lines", "read_records", "read_predictions", "read_gender_labels",
           "read_group_labels", "read_human_captions", "read_categories", "jsonable"]

#: protected attributes of the captioning metrics: label columns (first found wins) and the
#: groups, class 0 first. ``skin``: Zhao et al. 2021's perceived skin tone (``bb_skin``
#: Light/Dark, coco-mini's annotations/perceived_gender_skin.csv), the thesis' racial-bias LIC
#: (sec. 2.5.3); binarised perceived labels from crowd workers, not self-identification.
ATTRIBUTES = {"gender": (("gender", "bb_gender"), ("female", "male")),
              "skin": (("skin", "bb_skin"), ("dark", "light")),
              "gender_skin": (("gender", "bb_gender", "skin", "bb_skin"),
                              ("female_dark", "female_light", "male_dark", "male_light"))}
#: intersectional attributes: their parts (attributes above); a group is ``<part1>_<part2>``,
#: defined where every part's label is (paper 000 sec. 7's four gender x skin groups)
INTERSECTIONS = {"gender_skin": ("gender", "skin")}



#: the largest predictions file ``read_predictions`` accepts (bytes, 256 MiB): COCO's 123,287
#: images with a 100-word caption each take about 80 MB as a results file
MAX_PREDICTIONS_BYTES = 256 * 2 ** 20


def is_json_lines(path: str | Path) -> bool:
    """True for a JSON Lines file by its name: ``*.jsonl`` or ``*.jsonl.gz``."""
    name = Path(path).name.lower()
    return name.endswith(".jsonl") or name.endswith(".jsonl.gz")


def read_records(path: str | Path, max_bytes: int = MAX_PREDICTIONS_BYTES) -> Any:
    """A JSON file, or a JSON Lines file (``*.jsonl``; one object per line, blank lines
    skipped) as a list of its objects; either may be gzip-compressed (``*.gz``, e.g. the
    published captioners' ``<model>.gender.jsonl.gz``). ``max_bytes`` bounds the file and,
    for a gzip file, its decompressed text.

    Raises:
        InputError: what :func:`biaslab.runtime.io.read_json` raises; a gzip file that is
            corrupt or decompresses past ``max_bytes``; a JSON Lines line that is not a JSON
            object (named by its line number).
    """
    import gzip
    import json
    import zlib
    path = Path(path)
    if not path.name.lower().endswith(".gz") and not is_json_lines(path):
        return read_json(path, max_bytes)
    path = check_input_file(path, max_bytes)
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read(max_bytes + 1)
            if len(raw) > max_bytes:
                raise InputError(path, f"decompresses to more than {max_bytes:,} bytes")
        else:
            raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(path, f"not a readable gzip file ({e})") from e
    except UnicodeDecodeError as e:
        raise InputError(path, f"not UTF-8 text (offset {e.start})") from e
    if not text.strip():
        raise InputError(path, "file is empty")
    if not is_json_lines(path):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(path, f"invalid or truncated JSON at line {e.lineno} column "
                                   f"{e.colno}: {e.msg}") from e
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(path, f"line {n} is not valid JSON ({e.msg})") from e
        if not isinstance(obj, dict):
            raise InputError(path, f"line {n} is not a JSON object")
        rows.append(obj)
    return rows


def read_predictions(path: str | Path) -> dict[int, str]:
    """Captions of one model -> {image_id: caption}: a COCO results file ``[{"image_id":
    int, "caption": str}, ...]``, or JSON Lines with the same keys per line (``*.jsonl``,
    gzip allowed: :func:`read_records`; other keys, such as the published captioners'
    ``bb_gender``, are ignored here). ``image_id`` may be a JSON integer or a string of ASCII
    digits.

    Raises:
        InputError: missing/empty/invalid JSON, not a regular file (a device, a FIFO) or over
            :data:`MAX_PREDICTIONS_BYTES`, not a list, an entry without an int ``image_id`` or
            a string ``caption``, duplicate image ids, no entries.
    """
    data = read_records(path, MAX_PREDICTIONS_BYTES)
    if not isinstance(data, list):
        raise InputError(path, f"expected a JSON list of {{\"image_id\", \"caption\"}} objects "
                               f"(COCO results format), got {type(data).__name__}")
    if not data:
        raise InputError(path, "no predictions (empty list)")
    out: dict[int, str] = {}
    dups = []
    for n, item in enumerate(data):
        if not isinstance(item, dict) or "image_id" not in item or "caption" not in item:
            raise InputError(path, f"entry {n} is not an object with keys 'image_id' and "
                                   f"'caption': {str(item)[:80]}")
        iid, cap = item["image_id"], item["caption"]
        if isinstance(iid, bool) or not isinstance(iid, int):
            # ASCII digits only: str.isdigit() accepts "²", which int() refuses
            if isinstance(iid, str) and re.fullmatch(r"[0-9]+", iid.strip()):
                iid = int(iid)
            else:
                raise InputError(path, f"entry {n}: image_id {iid!r} is not an integer")
        if not isinstance(cap, str):
            raise InputError(path, f"entry {n} (image_id {iid}): caption is not a string")
        if iid in out:
            dups.append(iid)
        out[iid] = cap
    if dups:
        raise InputError(path, f"{len(dups)} duplicate image_id(s), e.g. {sorted(set(dups))[:5]}; "
                               f"one caption per image expected")
    return out


def read_gender_labels(path: str | Path) -> tuple[dict[int, str], dict]:
    """Labels CSV -> ({image_id: "female"/"male"}, info): :func:`read_group_labels` with
    ``attribute="gender"``; ``info["gender_column"]`` names the column read."""
    out, info = read_group_labels(path, "gender")
    info["gender_column"] = info.pop("column")
    return out, info


def read_group_labels(path: str | Path, attribute: str = "gender") -> tuple[dict[int, str], dict]:
    """Labels CSV -> ({image_id: group}, info) for a protected attribute of :data:`ATTRIBUTES`.

    Columns: ``image_id`` and the attribute's label column (gender: ``gender`` or
    ``bb_gender``; skin: ``skin`` or ``bb_skin``; the first found wins). Values are matched
    case-insensitively against the attribute's two groups (female/male; dark/light); anything
    else (``Unsure``, ``Both``, empty) is ignored and counted in ``info["n_ignored"]``.
    ``gender_skin`` (:data:`INTERSECTIONS`) reads both columns: an image's group is
    ``<gender>_<skin>`` (``female_dark``, ...) where both labels are valid, else it is
    ignored; ``info["column"]`` names both columns joined by ``+``.

    Returns:
        ``({image_id: group (lower case)}, {"n_rows", "n_ignored", "column", "attribute",
        "n_by_group"})``.

    Raises:
        ValueError: an attribute that is not in :data:`ATTRIBUTES`.
        InputError: missing/unreadable file, missing columns, non-integer ids, conflicting
            labels for one id, no rows.
    """
    import pandas as pd
    if attribute not in ATTRIBUTES:
        raise ValueError(f"unknown attribute {attribute!r}; known: {list(ATTRIBUTES)}")
    if attribute in INTERSECTIONS:
        return _read_intersection(path, attribute)
    columns, groups = ATTRIBUTES[attribute]
    path = check_input_file(path)
    try:
        df = _label_table(path)
    except pd.errors.EmptyDataError as e:
        raise InputError(path, "file is empty") from e
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise InputError(path, f"not a readable CSV file ({e})") from e
    except OSError as e:
        raise InputError(path, f"cannot read it ({e.strerror or e})") from e
    cols = {c.strip().lower(): c for c in df.columns}
    if "image_id" not in cols:
        raise InputError(path, f"missing column 'image_id'; has {list(df.columns)}")
    gcol = next((cols[c] for c in columns if c in cols), None)
    if gcol is None:
        raise InputError(path, f"missing column {' or '.join(repr(c) for c in columns)} "
                               f"({attribute} labels); has {list(df.columns)}")
    if df.empty:
        raise InputError(path, "no rows")
    out: dict[int, str] = {}
    n_ignored = 0
    conflicts = []
    for row, (raw_id, raw_g) in enumerate(zip(df[cols["image_id"]], df[gcol]), start=2):
        s = str(raw_id).strip()
        try:
            iid = int(float(s)) if s and float(s).is_integer() else None
        except ValueError:
            iid = None
        if iid is None:
            raise InputError(path, f"line {row}: image_id {raw_id!r} is not an integer")
        g = str(raw_g).strip().lower()
        if g not in groups:
            n_ignored += 1
            continue
        if out.get(iid, g) != g:
            conflicts.append(iid)
        out[iid] = g
    if conflicts:
        raise InputError(path, f"conflicting {'/'.join(groups)} labels for "
                               f"{len(set(conflicts))} image id(s), e.g. "
                               f"{sorted(set(conflicts))[:5]}")
    return out, {"n_rows": int(len(df)), "n_ignored": n_ignored, "column": gcol,
                 "attribute": attribute,
                 "n_by_group": {g: sum(1 for v in out.values() if v == g) for g in groups}}


def _label_table(path: Path):
    """A labels file as a DataFrame of strings: CSV, or JSON Lines (:func:`read_records`: the
    published captioners' files carry ``image_id``, ``bb_gender`` and ``bb_skin`` per line)."""
    import pandas as pd
    if not is_json_lines(path):
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    rows = read_records(path)
    df = pd.DataFrame.from_records(rows)
    return df.map(lambda v: "" if v is None else str(v)) if len(df) else df


def _read_intersection(path: str | Path, attribute: str) -> tuple[dict[int, str], dict]:
    """:func:`read_group_labels` of an intersectional attribute: its parts read one by one,
    an image's group the parts' groups joined by ``_`` where every part has one."""
    parts = [read_group_labels(path, a) for a in INTERSECTIONS[attribute]]
    first, rest = parts[0][0], [p[0] for p in parts[1:]]
    out = {i: "_".join([g] + [r[i] for r in rest]) for i, g in first.items()
           if all(i in r for r in rest)}
    groups = ATTRIBUTES[attribute][1]
    # rows without a group (a duplicate row of a grouped image is not ignored); the parts
    # have checked every id
    df = _label_table(Path(path))
    id_col = next(c for c in df.columns if c.strip().lower() == "image_id")
    n_ignored = sum(int(float(str(x).strip())) not in out for x in df[id_col])
    return out, {"n_rows": parts[0][1]["n_rows"], "n_ignored": n_ignored,
                 "column": "+".join(p[1]["column"] for p in parts), "attribute": attribute,
                 "n_by_group": {g: sum(1 for v in out.values() if v == g) for g in groups}}


def read_human_captions(path: str | Path) -> dict[int, list[str]]:
    """COCO captions file (``{"annotations": [{"image_id", "caption", "id"}, ...]}``) ->
    {image_id: captions ordered by annotation id (file order when ids are absent)}.

    Raises:
        InputError: missing/invalid JSON, no ``annotations`` list, malformed entries, no
            captions.
    """
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
        raise InputError(path, "expected a COCO captions file: a JSON object with an "
                               "'annotations' list")
    rows = []
    for n, a in enumerate(data["annotations"]):
        if (not isinstance(a, dict) or not isinstance(a.get("image_id"), int)
                or not isinstance(a.get("caption"), str)):
            raise InputError(path, f"annotation {n} lacks an integer 'image_id' or a string "
                                   f"'caption': {str(a)[:80]}")
        aid = a.get("id")
        rows.append((a["image_id"], aid if isinstance(aid, int) else n, n, a["caption"]))
    if not rows:
        raise InputError(path, "no captions (empty 'annotations')")
    out: dict[int, list[str]] = {}
    for iid, _, _, cap in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
        out.setdefault(iid, []).append(cap)
    return out


def read_categories(path: str | Path) -> list[str]:
    """COCO instances file (``{"categories": [{"id", "name"}, ...]}``) -> the category names
    in id order (DBAC's task list L, ``biaslab evaluate-captions --dbac-categories``).

    Raises:
        InputError: missing/invalid JSON, no ``categories`` list, a category without a
            string ``name``, no category.
    """
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("categories"), list):
        raise InputError(path, "expected a COCO instances file: a JSON object with a "
                               "'categories' list")
    cats = []
    for n, c in enumerate(data["categories"]):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
            raise InputError(path, f"category {n} lacks a string 'name': {str(c)[:80]}")
        cats.append((c.get("id") if isinstance(c.get("id"), int) else n, c["name"]))
    if not cats:
        raise InputError(path, "no categories (empty 'categories')")
    return [name for _, name in sorted(cats)]


def jsonable(x: Any) -> Any:
    """``x`` made strict-JSON safe, recursively: non-finite floats -> "inf"/"-inf"/"nan"
    strings, numpy scalars -> Python numbers, mapping keys -> str, tuples -> lists."""
    try:
        import numpy as np
        if isinstance(x, np.generic):
            x = x.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    return x
