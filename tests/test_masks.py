"""Person selection (paper 000 appendix A.1, incl. the scaled 55,000 px rule), masks omega from
polygon / keypoints / box with hand-checked pixel counts, and the masks table + stage."""
import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from biaslab.counterfactual.masks import (area_scale, box_mask, build_masks, crowd_like,
                                          dilate, keypoint_silhouette, keypoints_useful,
                                          load_mask, person_mask, polygon_mask,
                                          select_persons)


def _persons(*boxes, image_id=1, areas=None):
    rows = []
    for i, (x, y, w, h) in enumerate(boxes):
        rows.append({"ann_id": 100 + i, "image_id": image_id, "x": x, "y": y, "w": w, "h": h,
                     "area": (areas[i] if areas else w * h), "polygon": "[]",
                     "keypoints": None, "num_keypoints": 0})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- selection + 55,000 px rule
def test_area_scale():
    assert area_scale(640, 480, 640) == 1.0            # full COCO: factor 1
    assert area_scale(384, 288, 640) == pytest.approx(0.36)   # coco-mini: (384/640)^2
    assert area_scale(288, 384, 640) == pytest.approx(0.36)   # portrait: long side counts
    assert area_scale(800, 600, 640) == 1.0            # never above 1
    assert area_scale(100, 50, None) == 1.0            # scaling disabled
    with pytest.raises(ValueError):
        area_scale(10, 10, 0)


def test_largest_box_only_when_second_is_small():
    p = _persons((0, 0, 100, 100), (0, 0, 300, 200), (0, 0, 200, 250))  # 1e4, 6e4, 5e4
    sel = select_persons(p, 55_000, 1.0)
    # largest 300x200 = 60,000; second 200x250 = 50,000 <= 55,000 -> only the largest
    assert list(sel["ann_id"]) == [101]


def test_second_person_above_threshold_is_added():
    p = _persons((0, 0, 100, 100), (0, 0, 300, 200), (0, 0, 250, 240))  # 1e4, 6e4, 6e4
    sel = select_persons(p, 55_000, 1.0)
    assert list(sel["ann_id"]) == [101, 102]           # tie on 60,000 broken by ann_id
    p = _persons((0, 0, 300, 200), (0, 0, 250, 220), (0, 0, 230, 240))  # 6e4, 5.5e4, 5.52e4
    assert list(select_persons(p, 55_000, 1.0)["ann_id"]) == [100, 102]  # third never


def test_threshold_is_strict_and_uses_box_not_segment_area():
    p = _persons((0, 0, 300, 200), (0, 0, 220, 250))      # second exactly 55,000: not "exceeds"
    assert list(select_persons(p, 55_000, 1.0)["ann_id"]) == [100]
    # segment areas say otherwise, but the paper ranks by bounding box
    p = _persons((0, 0, 10, 10), (0, 0, 20, 20), areas=[500.0, 100.0])
    assert list(select_persons(p, 55_000, 1.0)["ann_id"]) == [101]


def test_scaled_threshold_on_downscaled_image():
    scale = area_scale(384, 256, 640)                    # 0.36 -> threshold 19,800 px
    p = _persons((0, 0, 200, 120), (0, 0, 160, 125))    # 24,000 and 20,000 px
    assert list(select_persons(p, 55_000, scale)["ann_id"]) == [100, 101]
    p = _persons((0, 0, 200, 120), (0, 0, 150, 130))    # second 19,500 px < 19,800
    assert list(select_persons(p, 55_000, scale)["ann_id"]) == [100]
    # the same second box at full resolution would be far below 55,000
    assert list(select_persons(_persons((0, 0, 200, 120), (0, 0, 160, 125)), 55_000,
                               1.0)["ann_id"]) == [100]


def test_crowd_boxes_are_not_persons():
    # a box-only "person" around 3 others (a COCO crowd region without its iscrowd flag)
    p = _persons((0, 0, 300, 300), (10, 10, 50, 100), (100, 10, 50, 100), (200, 10, 50, 100))
    assert list(crowd_like(p, 3)) == [True, False, False, False]
    assert not crowd_like(p, 4).any() and not crowd_like(p, None).any()
    sel = select_persons(p, 55_000, 1.0, crowd_min_inside=3)
    assert list(sel["ann_id"]) == [101]                  # 5,000 px each: ties by ann_id
    assert list(select_persons(p, 55_000, 1.0)["ann_id"]) == [100]   # rule off
    # a real (polygon or keypoint) person in front of others is kept
    p.loc[0, "polygon"] = json.dumps([[0, 0, 300, 0, 300, 300, 0, 300]])
    assert not crowd_like(p, 3).any()
    p.loc[0, "polygon"] = "[]"
    p.at[0, "keypoints"] = [1.0] * 51
    assert not crowd_like(p, 3).any()


def test_no_person():
    assert select_persons(_persons(), 55_000).empty


# ---------------------------------------------------------------- masks, pixel counts
def test_box_mask_pixels():
    m = box_mask((10, 5, 20, 30), 40, 60)
    assert m.sum() == 600 and m[5, 10] == 1 and m[34, 29] == 1 and m[35, 29] == 0
    assert m[5, 30] == 0
    # fractional box: floor(x) .. ceil(x + w)
    assert box_mask((10.5, 5.2, 19.0, 29.0), 40, 60).sum() == 20 * 30
    # clipped at the border
    assert box_mask((50, 30, 20, 20), 40, 60).sum() == 10 * 10


def test_polygon_mask_pixels():
    rect = [[10, 5, 30, 5, 30, 35, 10, 35]]
    assert polygon_mask(rect, 40, 60).sum() == 600          # 20 x 30
    ell = [[10, 5, 30, 5, 30, 15, 20, 15, 20, 35, 10, 35]]   # L: 20x10 + 10x20
    assert polygon_mask(json.dumps(ell), 40, 60).sum() == 400
    # two polygons are merged (union)
    two = [[0, 0, 10, 0, 10, 10, 0, 10], [20, 20, 30, 20, 30, 30, 20, 30]]
    assert polygon_mask(two, 40, 60).sum() == 200
    assert polygon_mask("[]", 40, 60) is None
    assert polygon_mask([[1, 2, 3, 4]], 40, 60) is None      # < 3 points


def test_dilate_disc_pixels():
    m = box_mask((10, 5, 20, 30), 40, 60)
    # Euclidean disc of radius 2: sides grow by 2 px; each corner gains only the (1, 1)
    # offset (1^2 + 1^2 <= 4; (1, 2) and (2, 2) are too far): 600 + 2*2*(20+30) + 4 = 804
    assert dilate(m, 2).sum() == 804
    assert dilate(m, 0).sum() == 600
    one = np.zeros((9, 9), np.uint8)
    one[4, 4] = 1
    assert dilate(one, 1).sum() == 5                         # a plus sign
    assert dilate(one, 2).sum() == 13                        # offsets with dx^2+dy^2 <= 4


def _kp(points, v=2):
    kp = [0.0] * 51
    for i, (x, y) in points.items():
        kp[3 * i:3 * i + 3] = [x, y, v]
    return kp


STANDING = {0: (30, 12), 1: (31, 11), 2: (29, 11), 5: (36, 20), 6: (24, 20), 7: (38, 30),
            8: (22, 30), 9: (39, 38), 10: (21, 38), 11: (34, 40), 12: (26, 40), 13: (34, 52),
            14: (26, 52), 15: (34, 64), 16: (26, 64)}


def test_keypoint_silhouette():
    box = (15, 2, 30, 66)
    kp = _kp(STANDING)
    assert keypoints_useful(kp)
    m = keypoint_silhouette(kp, box, 80, 60)
    inside = box_mask(box, 80, 60)
    assert m is not None and m.dtype == np.uint8
    assert (m <= inside).all()                               # clipped to the box
    for x, y in STANDING.values():                           # covers every keypoint
        assert m[y, x] == 1
    assert m[33, 30] == 1                                    # torso centre
    assert m[2, 15] == 0 and m[67, 44] == 0                  # box corners are background
    assert 0.25 * inside.sum() < m.sum() < 0.9 * inside.sum()
    thin = keypoint_silhouette(kp, box, 80, 60, thickness=0.5)
    assert thin.sum() < m.sum()


def test_keypoints_not_useful_fall_back_to_box():
    few = _kp({0: (30, 12), 5: (36, 20), 6: (24, 20), 9: (39, 38)})   # 4 visible
    assert not keypoints_useful(few)
    no_torso = _kp({i: (30 + i, 10 + i) for i in (0, 1, 2, 3, 4, 7, 9)})  # no shoulder/hip
    assert not keypoints_useful(no_torso)
    assert not keypoints_useful(None)
    person = {"x": 10, "y": 5, "w": 20, "h": 30, "polygon": "[]", "keypoints": few}
    m, src = person_mask(person, 40, 60)
    assert src == "box" and m.sum() == 600


def test_mask_source_preference():
    poly = json.dumps([[10, 5, 30, 5, 30, 15, 20, 15, 20, 35, 10, 35]])
    p = {"x": 10, "y": 5, "w": 20, "h": 30, "polygon": poly, "keypoints": _kp(STANDING)}
    m, src = person_mask(p, 80, 60)
    assert src == "polygon" and m.sum() == 400
    p["polygon"] = "[]"
    _, src = person_mask(p, 80, 60)
    assert src == "keypoints"
    m, src = person_mask({**p, "keypoints": None}, 80, 60, sources=("polygon", "keypoints"))
    assert m is None and src is None


# ---------------------------------------------------------------- table + PNGs
def _tables():
    images = pd.DataFrame({"image_id": [1, 2, 3, 4, 5], "width": [60] * 5,
                           "height": [40] * 5, "path": ["x"] * 5, "file_name": ["x"] * 5})
    persons = pd.concat([
        _persons((10, 5, 20, 30), image_id=1),
        _persons((5, 5, 10, 10), (30, 10, 25, 25), image_id=2),   # 100, 625 px
        _persons((0, 0, 10, 10), image_id=3),
    ], ignore_index=True)
    persons["ann_id"] = range(1, len(persons) + 1)
    persons.loc[0, "polygon"] = json.dumps([[10, 5, 30, 5, 30, 35, 10, 35]])
    labels = pd.DataFrame({"image_id": [1, 2, 3, 4, 5],
                           "gender": ["female", "male", "undefined", "male", "female"]})
    split = pd.DataFrame({"image_id": [1, 2, 3, 4, 5],
                          "split": ["train", "train", "train", "train", "test"]})
    return images, persons, labels, split


def test_build_masks_table_and_counts(tmp_path):
    images, persons, labels, split = _tables()
    # reference 60 px = the stored long side: factor 1, so the threshold is in stored pixels
    table, counts = build_masks(images, persons, labels, split, tmp_path / "png",
                                splits=["train"], area_threshold_px=500,
                                reference_long_side=60, dilate_px=0, progress=False)
    assert counts["images_considered"] == 4                  # image 5 is in the test split
    assert counts["skipped_no_person"] == 1                  # image 4
    assert counts["skipped_gender_undefined"] == 1           # image 3
    assert counts["masked"] == 2 and counts["second_person"] == 0
    assert counts["persons_polygon"] == 1 and counts["persons_box"] == 1
    assert counts["crowd_boxes_skipped"] == 0 and counts["skipped_only_crowd"] == 0
    t = table.set_index("image_id")
    assert list(t.loc[1, "ann_ids"]) == [1] and t.loc[1, "mask_source"] == "polygon"
    assert list(t.loc[2, "ann_ids"]) == [3]                  # 625 px box, not the 100 px one
    assert t.loc[2, "gender"] == "male"
    m = load_mask(t.loc[1, "mask_path"])
    assert m.shape == (40, 60) and m.sum() == 600
    assert t.loc[1, "area_fraction"] == pytest.approx(600 / 2400)
    png = np.asarray(Image.open(t.loc[1, "mask_path"]))
    assert set(np.unique(png)) == {0, 255}
    # a lower threshold adds image 2's second person (100 px > 90); dilation grows the mask
    table, counts = build_masks(images, persons, labels, split, tmp_path / "png2",
                                splits=None, area_threshold_px=90, reference_long_side=60,
                                dilate_px=2, progress=False)
    t = table.set_index("image_id")
    assert list(t.loc[2, "ann_ids"]) == [3, 2] and counts["second_person"] == 1
    assert load_mask(t.loc[1, "mask_path"]).sum() == 804
    assert counts["images_considered"] == 5                  # splits=None: all images


def test_box_shape_masks_the_whole_box(tmp_path):
    """Masks.shape=box ignores a polygon tighter than the person and masks
    its bounding box (20 x 30 = 600 px), paper 000's COCO wording."""
    images, persons, labels, split = _tables()
    persons.loc[0, "polygon"] = json.dumps([[10, 5, 30, 5, 20, 35]])   # a triangle in the box
    kw = dict(splits=["train"], area_threshold_px=500, reference_long_side=60, dilate_px=0,
              progress=False)
    tight, _ = build_masks(images, persons, labels, split, tmp_path / "p", **kw)
    box, counts = build_masks(images, persons, labels, split, tmp_path / "b", shape="box", **kw)
    t, b = tight.set_index("image_id"), box.set_index("image_id")
    assert t.loc[1, "mask_source"] == "polygon" and b.loc[1, "mask_source"] == "box"
    assert load_mask(b.loc[1, "mask_path"]).sum() == 600
    assert 200 < load_mask(t.loc[1, "mask_path"]).sum() < 400     # about half the box
    assert counts["persons_box"] == 2 and counts["persons_polygon"] == 0
    with pytest.raises(ValueError, match="masks.shape"):
        build_masks(images, persons, labels, split, tmp_path / "x", shape="hull", **kw)


def test_masks_stage(tmp_path, monkeypatch):
    import yaml

    from stages import masks as stage
    images, persons, labels, split = _tables()
    (tmp_path / "data/prepared").mkdir(parents=True)
    (tmp_path / "data/labels").mkdir(parents=True)
    images.to_parquet(tmp_path / "data/prepared/images.parquet")
    persons.to_parquet(tmp_path / "data/prepared/persons.parquet")
    labels.to_parquet(tmp_path / "data/labels/images.parquet")
    split.to_parquet(tmp_path / "data/split.parquet")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"masks": {
        "reference_long_side": 640, "area_threshold_px": 55000, "dilate_px": 1,
        "splits": ["train"]}}))
    (tmp_path / "data/masks/png").mkdir(parents=True)
    (tmp_path / "data/masks/png/999.png").write_bytes(b"stale")
    monkeypatch.chdir(tmp_path)
    assert stage.main([]) == 0
    t = pd.read_parquet("data/masks/masks.parquet")
    assert sorted(t["image_id"]) == [1, 2]
    assert t["mask_path"].str.startswith("data/masks/png/").all()   # relative paths
    assert not (tmp_path / "data/masks/png/999.png").exists()
    metrics = json.loads((tmp_path / "metrics/masks.json").read_text())
    assert metrics["masked"] == 2 and metrics["skipped_no_person"] == 1
    assert metrics["shape"] == "polygon"      # the default when params.yaml names none
