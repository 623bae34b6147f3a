"""COCO-layout reader: tables, keypoint matching, bad inputs (clear errors or counted drops)."""
import json

import pytest

from biaslab.data.coco import read_coco
from biaslab.runtime.io import InputError
from tests.conftest import COCO_MINI


def test_reads_tiny_coco(tiny_coco):
    t, drops = read_coco(tiny_coco, progress=False)
    assert list(t["images"]["image_id"]) == [1, 2, 3, 4]
    assert t["images"]["path"][0] == f"{tiny_coco}/images/val2017/000000000001.jpg"
    assert len(t["captions"]) == 12
    p = t["persons"].set_index("ann_id")
    assert json.loads(p.loc[101, "polygon"]) == [[10, 5, 30, 5, 30, 35, 10, 35]]
    assert p.loc[101, "keypoints"] is None
    assert len(p.loc[102, "keypoints"]) == 51 and p.loc[102, "num_keypoints"] == 17  # by IoU
    objs = t["objects"]
    assert set(zip(objs.image_id, objs.category, objs.source)) == {
        (1, "umbrella", "instances"), (2, "skateboard", "image_labels")}
    g = t["perceived_gender"].set_index("image_id")["perceived_gender"].to_dict()
    assert g == {1: "female", 2: "male", 3: "other"}
    assert drops == {"perceived_gender_unknown_image": 1}


def _edit(path, fn):
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


def test_missing_image_file_is_dropped_and_counted(tiny_coco):
    (tiny_coco / "images/val2017/000000000004.jpg").unlink()
    t, drops = read_coco(tiny_coco, progress=False)
    assert 4 not in set(t["images"]["image_id"])
    assert drops["image_file_missing"] == 1
    assert drops["caption_of_dropped_image"] == 3


def test_caption_for_unknown_image_is_dropped_and_counted(tiny_coco):
    _edit(tiny_coco / "annotations/captions_val2017.json",
          lambda d: d["annotations"].append({"id": 5000, "image_id": 77, "caption": "x"}))
    _, drops = read_coco(tiny_coco, progress=False)
    assert drops["caption_unknown_or_dropped_image"] == 1


def test_annotation_for_unknown_image_is_dropped_and_counted(tiny_coco):
    _edit(tiny_coco / "annotations/instances_val2017.json",
          lambda d: d["annotations"].append({"id": 5000, "image_id": 77, "category_id": 1,
                                             "bbox": [0, 0, 1, 1]}))
    _, drops = read_coco(tiny_coco, progress=False)
    assert drops["instance_unknown_or_dropped_image"] == 1


def test_duplicate_image_ids_raise_naming_the_file(tiny_coco):
    path = tiny_coco / "annotations/captions_val2017.json"
    _edit(path, lambda d: d["images"].append(dict(d["images"][0])))
    with pytest.raises(InputError, match=r"captions_val2017\.json: duplicate image id\(s\): \[1\]"):
        read_coco(tiny_coco, progress=False)


def test_duplicate_annotation_ids_raise(tiny_coco):
    path = tiny_coco / "annotations/instances_val2017.json"
    _edit(path, lambda d: d["annotations"].append(dict(d["annotations"][0])))
    with pytest.raises(InputError, match=r"instances_val2017\.json: duplicate annotation id"):
        read_coco(tiny_coco, progress=False)


def test_truncated_json_raises_naming_file_and_position(tiny_coco):
    path = tiny_coco / "annotations/instances_val2017.json"
    path.write_text(path.read_text()[:-40])
    with pytest.raises(InputError, match=r"instances_val2017\.json: invalid or truncated JSON at line 1"):
        read_coco(tiny_coco, progress=False)


def test_empty_captions_file_raises(tiny_coco):
    path = tiny_coco / "annotations/captions_val2017.json"
    path.write_text("")
    with pytest.raises(InputError, match="captions_val2017.json: file is empty"):
        read_coco(tiny_coco, progress=False)
    path.write_text(json.dumps({"images": [], "annotations": []}))
    with pytest.raises(InputError, match="has no captions"):
        read_coco(tiny_coco, progress=False)


def test_not_coco_layout_raises(tmp_path):
    with pytest.raises(InputError, match="annotations directory not found"):
        read_coco(tmp_path, progress=False)
    (tmp_path / "annotations").mkdir()
    with pytest.raises(InputError, match="no captions_<split>.json"):
        read_coco(tmp_path, progress=False)


def test_bad_perceived_gender_csv_raises(tiny_coco):
    (tiny_coco / "annotations/perceived_gender_skin.csv").write_text("id,sex\n1,Male\n")
    with pytest.raises(InputError, match="perceived_gender_skin.csv: needs columns image_id"):
        read_coco(tiny_coco, progress=False)


@pytest.mark.skipif(not COCO_MINI.exists(), reason="../shared/coco-mini not present")
def test_reads_real_coco_mini():
    t, drops = read_coco(COCO_MINI, progress=False)
    assert len(t["images"]) == 3004          # 2,874 val2017 + 130 train2017 (MANIFEST.md)
    assert len(t["captions"]) == 14377 + 650
    p = t["persons"]
    assert (p["polygon"] != "[]").sum() >= 444
    assert p["keypoints"].notna().sum() == 6352   # every keypoint person matched a box
    assert drops.get("keypoints_unmatched", 0) == 0
    assert t["objects"]["image_id"].nunique() >= 1500
    assert set(t["perceived_gender"]["perceived_gender"]) == {"female", "male", "other"}


# ---- bad images dropped and counted at prepare; bad items counted -------------

def _truncate(p):
    b = p.read_bytes()
    p.write_bytes(b[:len(b) // 2])


def _png_truncated(p):
    from PIL import Image
    import numpy as np
    Image.fromarray(np.zeros((40, 60, 3), np.uint8)).save(p.with_suffix(".png"), format="PNG")
    b = p.with_suffix(".png").read_bytes()
    p.write_bytes(b[:len(b) - 30])           # keeps the header, loses IDAT/IEND


def _resized(p):
    from PIL import Image
    import numpy as np
    Image.fromarray(np.zeros((41, 60, 3), np.uint8)).save(p, format="JPEG")


def _truncated_with_end_marker(p):
    """Half a JPEG plus an appended end marker: PIL decodes it without an error, its
    lower half libjpeg's flat grey."""
    from PIL import Image
    import numpy as np
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)).save(p, format="JPEG")
    b = p.read_bytes()
    p.write_bytes(b[:len(b) // 2] + b"\xff\xd9")


def _corrupt_scan(p):
    """A flipped byte in the scan header: ``Image.verify`` passes, the decode fails
    ("broken data stream"), which used to abort the features stage."""
    from PIL import Image
    import numpy as np
    Image.fromarray(np.zeros((40, 60, 3), np.uint8)).save(p, format="JPEG")
    b = bytearray(p.read_bytes())
    b[b.index(b"\xff\xda") + 5] ^= 0xFF
    p.write_bytes(bytes(b))


@pytest.mark.parametrize("damage,reason", [
    (lambda p: p.write_bytes(b""), "image_file_empty"),
    (_truncated_with_end_marker, "image_file_truncated"),
    (_corrupt_scan, "image_file_truncated"),
    (_truncate, "image_file_truncated"),
    (_png_truncated, "image_file_truncated"),
    (lambda p: p.write_text("not an image\n"), "image_not_an_image"),
    (_resized, "image_size_mismatch"),
    (lambda p: p.unlink(), "image_file_missing"),
])
def test_bad_image_files_are_dropped_with_a_reason(tiny_coco, damage, reason):
    damage(tiny_coco / "images/val2017/000000000003.jpg")
    t, drops = read_coco(tiny_coco, progress=False)
    assert list(t["images"]["image_id"]) == [1, 2, 4]
    assert drops[reason] == 1
    assert drops["caption_of_dropped_image"] == 3
    assert sum(drops[r] for r in ("image_file_empty", "image_file_truncated",
                                  "image_not_an_image", "image_size_mismatch",
                                  "image_file_missing") if r in drops) == 1


def test_damage_helpers_fool_pil_verify_as_described():
    """The two issue-26 files are what they claim: PIL's verify() accepts both, only a decode
    (or the grey-fill check) tells."""
    import io
    from pathlib import Path
    from tempfile import TemporaryDirectory

    import numpy as np
    from PIL import Image
    with TemporaryDirectory() as d:
        for damage in (_truncated_with_end_marker, _corrupt_scan):
            p = Path(d) / "x.jpg"
            damage(p)
            with Image.open(io.BytesIO(p.read_bytes())) as im:
                im.verify()
        _truncated_with_end_marker(p)
        with Image.open(p) as im:
            a = np.asarray(im.convert("RGB"))
        assert (a[-8:] == 128).all() and not (a[:8] == 128).all()


def test_caption_that_is_not_utf8_is_dropped_and_counted(tiny_coco, tmp_path):
    """A lone surrogate (valid JSON escape, not encodable) used to reach pyarrow in prepare
    and end in a traceback naming neither file nor caption."""
    path = tiny_coco / "annotations/captions_val2017.json"
    text = path.read_text().replace('"caption": "', '"caption": "\\ud800 ', 1)
    path.write_text(text)
    t, drops = read_coco(tiny_coco, progress=False)
    assert drops["caption_not_utf8"] == 1 and len(t["captions"]) == 11
    import pyarrow as pa
    pa.Table.from_pandas(t["captions"])          # what prepare writes: encodable now


def test_file_name_that_is_not_utf8_names_the_file(tiny_coco):
    path = tiny_coco / "annotations/captions_val2017.json"
    path.write_text(path.read_text().replace('"file_name": "', '"file_name": "\\udc80', 1))
    with pytest.raises(InputError, match="captions_val2017.json.*not valid Unicode"):
        read_coco(tiny_coco, progress=False)


def test_images_table_records_the_content_digest(tiny_coco):
    from biaslab.models.features import file_digest
    t, _ = read_coco(tiny_coco, progress=False)
    assert list(t["images"]["digest"]) == [file_digest(p) for p in t["images"]["path"]]
    assert t["images"]["digest"].nunique() == 4
    t2, _ = read_coco(tiny_coco, progress=False, check_files=False)
    assert t2["images"]["digest"].isna().all()


@pytest.mark.parametrize("fname", ["../000000000001.jpg", "/etc/passwd", "a/../../x.jpg",
                                   "..\\x.jpg"])
def test_file_name_leaving_the_root_is_an_input_error(tiny_coco, fname):
    path = tiny_coco / "annotations/captions_val2017.json"
    _edit(path, lambda d: d["images"][0].update(file_name=fname))
    with pytest.raises(InputError, match="leaves the dataset root") as e:
        read_coco(tiny_coco, progress=False)
    assert "captions_val2017.json" in str(e.value) and repr(fname) in str(e.value)


def test_blank_and_non_string_captions_and_boxless_instances_are_counted(tiny_coco):
    def caps(d):
        d["annotations"][0]["caption"] = "   "
        d["annotations"][1]["caption"] = 42
        d["annotations"][2]["caption"] = None

    def inst(d):
        del d["annotations"][0]["bbox"]                # person 101
        d["annotations"][2]["bbox"] = [1, 2, "x", 4]   # umbrella 103

    _edit(tiny_coco / "annotations/captions_val2017.json", caps)
    _edit(tiny_coco / "annotations/instances_val2017.json", inst)
    t, drops = read_coco(tiny_coco, progress=False)
    assert drops["caption_empty"] == 2 and drops["caption_not_a_string"] == 1
    assert drops["instance_without_valid_bbox"] == 2
    assert len(t["captions"]) == 12 - 3
    assert list(t["persons"]["ann_id"]) == [102]


def _run_prepare(tmp_path, monkeypatch, root):
    import runpy
    from pathlib import Path
    import yaml
    repo = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(
        {"data": {"source": "tiny", "root": str(root), "max_images": None, "seed": 0,
                  "kp_iou": 0.3}}))
    monkeypatch.setattr("sys.argv", [str(repo / "stages" / "prepare.py")])
    try:
        runpy.run_path(str(repo / "stages" / "prepare.py"), run_name="__main__")
    except SystemExit as e:
        return e.code
    return 0


def test_prepare_stage_counts_bad_images_in_its_metrics(tiny_coco, tmp_path, monkeypatch):
    (tiny_coco / "images/val2017/000000000002.jpg").write_bytes(b"")
    _truncate(tiny_coco / "images/val2017/000000000003.jpg")
    assert _run_prepare(tmp_path, monkeypatch, tiny_coco) == 0
    m = json.loads((tmp_path / "metrics/prepare.json").read_text())
    assert m["images"] == 2
    assert m["dropped"]["image_file_empty"] == 1 and m["dropped"]["image_file_truncated"] == 1


def test_prepare_stage_rejects_a_file_name_leaving_the_root(tiny_coco, tmp_path, monkeypatch,
                                                            capsys):
    _edit(tiny_coco / "annotations/captions_val2017.json",
          lambda d: d["images"][1].update(file_name="../../secret.jpg"))
    code = _run_prepare(tmp_path, monkeypatch, tiny_coco)
    assert code == "prepare: " + str(tiny_coco / "annotations/captions_val2017.json") + (
        ": image file_name '../../secret.jpg' leaves the dataset root (absolute or '..'); "
        "file names must be relative to images/<split>/")
    assert not (tmp_path / "data").exists() and not (tmp_path / "metrics").exists()
