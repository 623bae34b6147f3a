"""Counterfactual candidates (paper 000 Eq. 1): prompts t^(g'), seeds and guidance scales,
copy_paste on real coco-mini images, sharding + resume after a simulated crash, and the stage.
The sd_inpaint backend is tested in test_sd_inpaint.py."""
import json
import os
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import yaml

from biaslab.data.coco import read_coco
from biaslab.counterfactual.copy_paste import CopyPasteBackend, donor_pool
from biaslab.counterfactual.generate import (build_work, candidate_seed, generate_candidates,
                                             guidance_scale_for, load_image, make_prompt,
                                             make_prompts, shard_of)
from biaslab.counterfactual.masks import (area_scale, build_masks, load_mask, person_mask,
                                          select_persons)
from biaslab.data.labels import label_captions, label_images, stratified_split
from biaslab.data.synthetic import generate as make_synthetic
from tests.conftest import COCO_MINI, write_generate_inputs


# ---------------------------------------------------------------- prompts, seeds, scales
def test_prompt_is_first_gendered_caption_swapped():
    caps = ["A dog on a couch.", "A man riding his horse.", "A woman on a horse."]
    assert make_prompt(caps, "female") == ("A man riding his horse.",
                                           "A woman riding her horse.")
    assert make_prompt(caps, "male") == ("A man riding his horse.", "A man riding his horse.")
    assert make_prompt(["A dog.", "Two cats."], "female") is None
    df = pd.DataFrame({"caption_id": [3, 1, 2, 4], "image_id": [1, 1, 1, 2],
                       "caption": ["A girl and her kite.", "A kite in the sky.",
                                   "A boy flies a kite.", "A bird."]})
    p = make_prompts(df)
    assert list(p["image_id"]) == [1]                    # image 2 has no gendered caption
    row = p.iloc[0]                                      # caption_id order: 1, 2, 3
    assert row["source_caption"] == "A boy flies a kite."
    assert row["prompt_female"] == "A girl flies a kite."
    assert row["prompt_male"] == "A boy flies a kite."


def test_seeds_guidance_scales_and_shards_are_deterministic():
    seeds = {candidate_seed(i, g, j, 0) for i in (1, 2) for g in ("female", "male")
             for j in range(30)}
    assert len(seeds) == 120 and all(0 <= s < 2 ** 63 for s in seeds)
    assert candidate_seed(5, "male", 3, 0) == candidate_seed(5, "male", 3, 0)
    assert candidate_seed(5, "male", 3, 0) != candidate_seed(5, "male", 3, 1)
    # stable across processes and machines (blake2b, not hash()): pinned values
    assert candidate_seed(139, "female", 0, 0) == 7077902362492518641
    assert [shard_of(i, 4) for i in (1, 2, 3, 139)] == [1, 0, 2, 0]
    # paper 000 appendix A.1: m = 30 over 7.5, 9.5, 15.0 -> 10 each
    scales = [guidance_scale_for(j, [7.5, 9.5, 15.0]) for j in range(30)]
    assert Counter(scales) == {7.5: 10, 9.5: 10, 15.0: 10}
    assert scales[:4] == [7.5, 9.5, 15.0, 7.5]


# ---------------------------------------------------------------- synthetic fixture
@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """24 synthetic images (one polygon person each) -> prepared tables, labels, masks."""
    root = tmp_path_factory.mktemp("synth")
    make_synthetic(root / "raw", n_images=24, image_size=96, seed=1)
    tables, _ = read_coco(root / "raw", progress=False)
    labels = label_images(label_captions(tables["captions"]))
    masks, _ = build_masks(tables["images"], tables["persons"], labels, None, root / "png",
                           splits=None, dilate_px=2, progress=False)
    prompts = make_prompts(tables["captions"], masks["image_id"])
    return {"root": root, "tables": tables, "labels": labels, "masks": masks,
            "prompts": prompts}


def _backend(s):
    t = s["tables"]
    return CopyPasteBackend(donor_pool(t["persons"], t["images"], s["labels"]), feather_px=1.0)


def _work(s, shards):
    t = s["tables"]
    return build_work(s["masks"], t["images"], t["persons"], s["prompts"], shards=shards)[0]


def _normalised(table: pd.DataFrame, out_dir) -> pd.DataFrame:
    t = table.copy()
    t["path"] = [os.path.relpath(p, out_dir) for p in t["path"]]
    return t


class Crash(RuntimeError):
    pass


def test_sharding_resumes_after_crash(synth, tmp_path):
    work = _work(synth, shards=4)
    assert set(work["shard"]) == {0, 1, 2, 3}
    kw = dict(m=2, guidance_scales=[7.5, 9.5, 15.0], seed=0, shards=4, progress=False)
    ref, ref_stats = generate_candidates(work, _backend(synth), tmp_path / "ref", **kw)
    assert ref_stats["shards_computed"] == 4 and len(ref) == len(work) * 2 * 2

    out = tmp_path / "run"
    seen = []

    def crash_in_shard_2(shard, image_id, group, j):
        seen.append(shard)
        if shard == 2 and seen.count(2) == 3:           # mid-shard, after images were saved
            raise Crash("simulated kill")

    with pytest.raises(Crash):
        generate_candidates(work, _backend(synth), out, **kw, callback=crash_in_shard_2)
    shards = out / "shards"
    assert sorted(p.name for p in shards.iterdir()) == ["shard-000.parquet",
                                                        "shard-001.parquet"]
    done_images = {p: p.stat().st_mtime_ns for p in (out / "images").iterdir()}
    mtimes = {p: p.stat().st_mtime_ns for p in shards.iterdir()}

    calls = Counter()
    table, stats = generate_candidates(work, _backend(synth), out, **kw,
                                       callback=lambda s, *a: calls.update([s]))
    assert stats["shards_skipped"] == 2 and stats["shards_computed"] == 2
    assert calls[0] == 0 and calls[1] == 0 and calls[2] > 0 and calls[3] > 0
    for p, t in mtimes.items():                          # finished shards not rewritten
        assert p.stat().st_mtime_ns == t
    n01 = len(table[table["shard"].isin([0, 1])])
    assert sum(1 for p, t in done_images.items()
               if p.exists() and p.stat().st_mtime_ns == t) >= n01
    # identical to the uninterrupted run: table and image bytes
    pd.testing.assert_frame_equal(_normalised(table, out), _normalised(ref, tmp_path / "ref"))
    for a, b in zip(table["path"], ref["path"]):
        assert open(a, "rb").read() == open(b, "rb").read()
    assert len(list((out / "images").iterdir())) == len(table)   # no stale/temp files

    # a third run computes nothing
    _, stats = generate_candidates(work, _backend(synth), out, **kw)
    assert stats["shards_skipped"] == 4 and stats["candidates_per_s"] is None


def test_shard_count_mismatch_is_an_error(synth, tmp_path):
    with pytest.raises(ValueError, match="shard count"):
        generate_candidates(_work(synth, shards=4), _backend(synth), tmp_path, m=1,
                            guidance_scales=[7.5], seed=0, shards=2, progress=False)


def test_changed_inputs_or_params_recompute_only_what_changed(synth, tmp_path):
    work = _work(synth, shards=3)
    kw = dict(guidance_scales=[7.5], seed=0, shards=3, progress=False)
    out = tmp_path / "g"
    generate_candidates(work, _backend(synth), out, m=2, **kw)
    # a changed mask invalidates only its image's shard
    row = work.iloc[0]
    mask_path = tmp_path / "changed.png"
    m = load_mask(row["mask_path"])
    m[:2, :2] = 1
    from biaslab.counterfactual.masks import save_mask
    save_mask(mask_path, m)
    work2 = work.copy()
    work2.loc[0, "mask_path"] = str(mask_path)
    _, stats = generate_candidates(work2, _backend(synth), out, m=2, **kw)
    assert stats["shards_computed"] == 1 and stats["shards_skipped"] == 2
    # fewer candidates: everything recomputed, images of j = 1 removed
    table, stats = generate_candidates(work2, _backend(synth), out, m=1, **kw)
    assert stats["shards_computed"] == 3 and (table["j"] == 0).all()
    assert stats["stale_files_removed"] >= len(work) * 2
    assert len(list((out / "images").iterdir())) == len(table)


# ---------------------------------------------------------------- copy_paste on coco-mini
@pytest.fixture(scope="module")
def coco_mini():
    if not COCO_MINI.is_dir():
        pytest.skip("../shared/coco-mini not found")
    tables, _ = read_coco(COCO_MINI, progress=False)
    labels = label_images(label_captions(tables["captions"]))
    split = stratified_split(labels, {"train": 0.7, "val": 0.1, "test": 0.2}, 0)
    return tables, labels, split


def _pick(tables, labels, split, source):
    """First train image (by id) of defined gender whose single selected person is at least
    100 px tall and has a mask of ``source``."""
    train = set(split.loc[split["split"] == "train", "image_id"])
    gender = labels.set_index("image_id")["gender"]
    ims = tables["images"].set_index("image_id")
    for iid, ps in tables["persons"].groupby("image_id", sort=True):
        if iid not in train or gender.get(iid) not in ("female", "male"):
            continue
        w, h = ims.loc[iid, "width"], ims.loc[iid, "height"]
        sel = select_persons(ps, 55_000, area_scale(w, h, 640))
        if len(sel) != 1 or sel["h"].iloc[0] < 100:
            continue
        if person_mask(sel.iloc[0], h, w)[1] == source:
            return iid
    raise AssertionError(f"no coco-mini image with a {source} mask")


def test_copy_paste_on_real_coco_mini(coco_mini, tmp_path):
    tables, labels, split = coco_mini
    ids = [_pick(tables, labels, split, s) for s in ("polygon", "keypoints", "box")]
    ims = tables["images"][tables["images"]["image_id"].isin(ids)]
    masks, counts = build_masks(ims, tables["persons"], labels, split, tmp_path / "png",
                                dilate_px=6, progress=False)
    assert sorted(masks["mask_source"]) == ["box", "keypoints", "polygon"]
    donors = donor_pool(tables["persons"], tables["images"], labels, split)
    assert set(donors["gender"]) == {"female", "male"}
    assert donors["image_id"].isin(split.loc[split["split"] == "train", "image_id"]).all()
    backend = CopyPasteBackend(donors)
    gender_of = labels.set_index("image_id")["gender"]
    donor_image = donors.set_index("ann_id")["image_id"]
    work = build_work(masks, tables["images"], tables["persons"],
                      make_prompts(tables["captions"], ids), shards=1)[0]
    for item in work.to_dict("records"):
        image = load_image(item["path"])
        omega = load_mask(item["mask_path"]).astype(bool)
        for g in ("female", "male"):
            outs = backend.generate(item, image, omega.astype(np.uint8), g, item[f"prompt_{g}"],
                                    [0, 1, 2], [candidate_seed(item["image_id"], g, j, 0)
                                                for j in range(3)], [7.5, 9.5, 15.0])
            used = [d[0] for _, d in outs]
            assert len(set(used)) == 3                           # m different donors
            for arr, (donor,) in outs:
                assert gender_of[donor_image[donor]] == g        # donor of the target group
                assert donor_image[donor] != item["image_id"]    # never the image itself
                assert arr.shape == image.shape and arr.dtype == np.uint8
                assert (arr[~omega] == image[~omega]).all()      # outside omega: unchanged
                diff = np.abs(arr.astype(int) - image.astype(int)).max(axis=2)
                assert (diff[omega] > 12).mean() > 0.5           # inside: replaced
    # through the shard writer: JPEGs keep the size; outside omega only JPEG noise
    table, stats = generate_candidates(work, backend, tmp_path / "gen", m=2,
                                       guidance_scales=[7.5, 9.5, 15.0], seed=0, shards=2,
                                       progress=False)
    assert len(table) == 3 * 2 * 2 and set(table["backend"]) == {"copy_paste"}
    assert table["donor_ann_id"].notna().all()
    for r in table.itertuples():
        item = work.set_index("image_id").loc[r.image_id]
        out, orig = load_image(r.path), load_image(item["path"])
        omega = load_mask(item["mask_path"]).astype(bool)
        assert out.shape == orig.shape
        assert np.abs(out.astype(int) - orig.astype(int))[~omega].mean() < 4
        assert r.prompt == item[f"prompt_{r.group}"]


def _kp(visible):
    """51 COCO keypoint numbers with the given indices labelled (v = 2)."""
    k = np.zeros((17, 3))
    for i in visible:
        k[i] = (10.0, 10.0 + 5 * i, 2)
    return k.reshape(-1).tolist()


FULL_BODY = _kp(range(17))
PORTRAIT = _kp([0, 1, 2, 5, 6])
UPPER = _kp([0, 5, 6, 11, 12])


def test_body_extent_and_cost_hand_computed():
    from biaslab.counterfactual.copy_paste import body_extent, extent_cost
    assert body_extent(FULL_BODY) == (0, 4)
    assert body_extent(PORTRAIT) == (0, 1)
    assert body_extent(UPPER) == (0, 2)
    assert body_extent(_kp([13, 15])) == (3, 4)           # legs only
    assert body_extent(_kp([7, 9])) is None                # arms say nothing
    assert body_extent(None) is None and body_extent([]) is None
    # (|0-0| + |4-1|) / 8, (|0-0| + |4-2|) / 8, 0 for the same extent and for unknown
    got = extent_cost((0, 4), [(0, 1), (0, 2), (0, 4), None])
    assert got.tolist() == pytest.approx([3 / 8, 2 / 8, 0.0, 0.0])
    assert extent_cost(None, [(0, 1)]).tolist() == [0.0]


def test_donor_ranking_prefers_matching_body_extent():
    """Two donors with the same cut-out shape: the one showing as much of the body as the
    target ranks first; with extent_weight 0 the tie is broken by ann_id."""
    poly = json.dumps([[0, 0, 20, 0, 20, 60, 0, 60]])
    donors = pd.DataFrame({
        "ann_id": [1, 2], "image_id": [10, 11], "gender": ["female", "female"],
        "path": ["a.jpg", "b.jpg"], "width": [40, 40], "height": [80, 80],
        "x": [0.0, 0.0], "y": [0.0, 0.0], "w": [20.0, 20.0], "h": [60.0, 60.0],
        "polygon": [poly, poly], "keypoints": [PORTRAIT, FULL_BODY],
        "mask_source": ["polygon", "polygon"], "single_person": [True, True]})
    omega = np.zeros((100, 100), np.uint8)
    omega[20:80, 40:60] = 1
    box = [40, 20, 20, 60]
    ranked = CopyPasteBackend(donors).ranked_donors("female", box, omega, 99, 2, FULL_BODY)
    assert ranked["ann_id"].tolist() == [2, 1]
    assert ranked["cost"].iloc[1] - ranked["cost"].iloc[0] == pytest.approx(3 / 8)
    flat = CopyPasteBackend(donors, extent_weight=0).ranked_donors("female", box, omega, 99, 2,
                                                                    FULL_BODY)
    assert flat["ann_id"].tolist() == [1, 2]
    assert flat["cost"].iloc[0] == pytest.approx(flat["cost"].iloc[1])


def test_extent_agreement_hand_computed():
    from biaslab.counterfactual.copy_paste import extent_agreement
    work = pd.DataFrame({"image_id": [1, 2], "keypoints": [[FULL_BODY], [UPPER, None]]})
    cands = pd.DataFrame({"image_id": [1, 1, 2, 2],
                          "donor_ann_ids": [[10], [11], [12, 10], [11, 10]]})
    donors = pd.DataFrame({"ann_id": [10, 11, 12], "keypoints": [FULL_BODY, PORTRAIT, None]})
    # pairs with both extents: (full, full) 0, (full, portrait) 3, (upper, portrait) 1;
    # image 2's second box has no keypoints and donor 12 has none
    got = extent_agreement(work, cands, donors)
    assert got == {"n": 3, "exact": pytest.approx(1 / 3), "off_by_2_or_more": pytest.approx(1 / 3)}


# ---------------------------------------------------------------- stage
def test_generate_stage(synth, tmp_path, monkeypatch):
    from stages import generate as stage
    from stages import masks as masks_stage
    write_generate_inputs(tmp_path, synth, masks=False)
    params = {"label": {"words": "lic"},
              "masks": {"reference_long_side": 640, "area_threshold_px": 55000,
                        "dilate_px": 2, "splits": ["train"]},
              "generate": {"backend": "copy_paste", "m": 2, "guidance_scales": [7.5, 9.5],
                           "shards": 2, "seed": 0, "max_images": 5, "model": None,
                           "steps": 2, "resolution": 64, "batch_size": 2,
                           "inpaint_radius": 3, "inpaint_method": "telea", "feather_px": 1.0,
                           "donor_splits": ["train"], "donor_single_person": True}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    assert masks_stage.main([]) == 0
    assert stage.main([]) == 0
    c = pd.read_parquet("data/generate/candidates.parquet")
    assert len(c) == 5 * 2 * 2 and c["image_id"].nunique() == 5
    assert list(c.columns[:9]) == ["image_id", "group", "j", "seed", "guidance_scale",
                                   "prompt", "path", "donor_ann_id", "donor_ann_ids"]
    assert c["path"].str.startswith("data/generate/images/").all()
    assert all(os.path.exists(p) for p in c["path"])
    assert set(c["guidance_scale"]) == {7.5, 9.5}
    metrics = json.loads(open("metrics/generate.json").read())
    run = json.loads(open("benchmarks/runs/generate.json").read())
    assert metrics["candidates"] == 20 and run["shards_computed"] == 2
    assert metrics["skipped_max_images"] == len(pd.read_parquet("data/masks/masks.parquet")) - 5
    assert not {"shards_computed", "seconds_computing", "candidates_per_s"} & set(metrics)
    assert stage.main([]) == 0                                   # resume: nothing to do
    first = metrics
    metrics = json.loads(open("metrics/generate.json").read())
    assert json.loads(open("benchmarks/runs/generate.json").read())["shards_skipped"] == 2
    assert metrics == first                  # a resumed run leaves the metrics unchanged
    pd.testing.assert_frame_equal(pd.read_parquet("data/generate/candidates.parquet"), c)
