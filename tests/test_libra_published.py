"""scripts/libra_published.py's reader of the released caption files."""
from __future__ import annotations

import gzip
import importlib.util
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from biaslab.runtime.io import InputError
from tests.conftest import REPO


def _mod():
    spec = importlib.util.spec_from_file_location("libra_published",
                                                  REPO / "scripts" / "libra_published.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _write(path, records):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


def test_read_published_keeps_male_and_female_images(tmp_path):
    p = tmp_path / "nic.gender.jsonl.gz"
    _write(p, [{"image_id": 1, "caption": "a man.", "bb_gender": "Male", "bb_skin": "Light",
                "split": "val"},
               {"image_id": 2, "caption": "a woman.", "bb_gender": "Female"},
               {"image_id": 3, "caption": "people.", "bb_gender": "Both"},
               {"image_id": 4, "caption": "a person.", "bb_gender": ""}])
    caps, genders = _mod().read_published(p)
    assert caps == {1: "a man.", 2: "a woman."} and genders == {1: "male", 2: "female"}


def test_read_published_bad_input_names_the_file(tmp_path):
    m = _mod()
    with pytest.raises(InputError, match="missing.jsonl.gz"):
        m.read_published(tmp_path / "missing.jsonl.gz")
    p = tmp_path / "bad.gender.jsonl.gz"
    _write(p, [{"image_id": 1, "caption": "a man.", "bb_gender": "Male"}, "{not json"])
    with pytest.raises(InputError, match=r"bad.gender.jsonl.gz.*line 2"):
        m.read_published(p)
    _write(p, [{"image_id": "x", "caption": "a man.", "bb_gender": "Male"}])
    with pytest.raises(InputError, match="line 1"):
        m.read_published(p)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.text(max_size=30),
                          st.sampled_from(["Male", "Female", "male", "Unsure", "Both", "", None])),
                max_size=20, unique_by=lambda r: r[0]))
def test_read_published_round_trips_any_records(tmp_path_factory, recs):
    p = tmp_path_factory.mktemp("pub") / "m.gender.jsonl.gz"
    _write(p, [{"image_id": i, "caption": c, "bb_gender": g} for i, c, g in recs])
    caps, genders = _mod().read_published(p)
    want = {i: (c, g.lower()) for i, c, g in recs if g and g.lower() in ("male", "female")}
    assert caps == {i: c for i, (c, _) in want.items()}
    assert genders == {i: g for i, (_, g) in want.items()}
