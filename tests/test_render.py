"""The oracle counterfactual backend ``render`` (biaslab.counterfactual.render) and the
re-drawing API of the synthetic generator it rests on (biaslab.data.synthetic.render_scene)."""

import numpy as np
import pandas as pd
import pytest
import yaml
from PIL import Image

from biaslab.data import synthetic as S
from biaslab.counterfactual.generate import (build_work, generate_candidates, load_image,
                                             make_prompts)
from biaslab.counterfactual.render import RenderBackend
from biaslab.runtime.io import InputError
from tests.conftest import synthetic_masked_set, write_generate_inputs

SEED, SIZE, N = 2, 96, 16


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return synthetic_masked_set(tmp_path_factory.mktemp("render"), N, SEED, SIZE, bias=0.8)


def _source(synth, iid):
    return np.asarray(Image.open(synth["root"] / "raw" / "images" / "synth" /
                                 f"{iid:012d}.png").convert("RGB"))


def test_render_scene_reproduces_every_original_exactly(synth):
    for iid, t in synth["truth"].items():
        r = S.render_scene(iid, seed=SEED, image_size=SIZE, **t)
        assert np.array_equal(r.image, _source(synth, iid)), iid
        # the person mask covers the person's annotated polygon area (pycocotools area)
        assert r.person_mask.sum() > 0


def test_other_person_changes_only_pixels_inside_the_two_persons(synth):
    changed_somewhere = 0
    for iid, t in synth["truth"].items():
        orig = S.render_scene(iid, seed=SEED, image_size=SIZE, **t)
        for g in ("female", "male"):
            for a in (0, 7, 2 ** 62 + 5):
                cf = S.render_scene(iid, seed=SEED, image_size=SIZE, gender=g,
                                    scene=t["scene"], cast=t["cast"], objects=t["objects"],
                                    appearance_seed=a)
                diff = (cf.image != orig.image).any(-1)
                omega = cf.person_mask | orig.person_mask
                assert not (diff & ~omega).any(), (iid, g, a)
                assert cf.placement == orig.placement
                assert [o["polys"] for o in cf.objects] == [o["polys"] for o in orig.objects]
                changed_somewhere += int(diff.any())
    assert changed_somewhere == len(synth["truth"]) * 6      # every candidate differs


def test_gender_changes_the_silhouette_and_appearance_seed_the_colours(synth):
    iid, t = next(iter(synth["truth"].items()))
    kw = dict(seed=SEED, image_size=SIZE, scene=t["scene"], cast=t["cast"],
              objects=t["objects"])
    f = S.render_scene(iid, gender="female", appearance_seed=1, **kw)
    m = S.render_scene(iid, gender="male", appearance_seed=1, **kw)
    assert (f.person_mask != m.person_mask).any()          # dress and long hair vs trousers
    # same appearance seed: same arm pose -> elbows and wrists at the same heights (their x
    # differs with the shoulder width of the body shape)
    assert [k[1] for k in f.person["keypoints"][7:11]] == \
        [k[1] for k in m.person["keypoints"][7:11]]
    again = S.render_scene(iid, gender="male", appearance_seed=1, **kw)
    other = S.render_scene(iid, gender="male", appearance_seed=2, **kw)
    assert np.array_equal(again.image, m.image)
    assert not np.array_equal(other.image, m.image)
    with pytest.raises(ValueError, match="gender"):
        S.render_scene(iid, gender="x", **kw)


def _work(synth, shards=2):
    t = synth["tables"]
    prompts = make_prompts(t["captions"], synth["masks"]["image_id"])
    return build_work(synth["masks"], t["images"], t["persons"], prompts, shards=shards)[0]


def test_backend_candidates_follow_the_generate_contract(synth, tmp_path):
    backend = RenderBackend(synth["root"] / "raw")
    work = _work(synth)
    kw = dict(m=2, guidance_scales=[7.5], seed=0, shards=2, progress=False)
    table, stats = generate_candidates(work, backend, tmp_path / "g", **kw)
    assert len(table) == len(work) * 2 * 2 and stats["shards_computed"] == 2
    assert (table["backend"] == "render").all() and table["donor_ann_id"].isna().all()
    assert table["path"].str.endswith(".png").all()
    assert backend.verified == len(work)
    for r in table.itertuples():
        src = _source(synth, r.image_id)
        cand = load_image(r.path)
        omega = backend.omega(r.image_id, r.group, r.seed)
        # lossless: bit-identical outside omega, and the file is the backend's rendering
        assert np.array_equal(cand[~omega], src[~omega])
        assert np.array_equal(cand, backend.render(r.image_id, r.group, r.seed).image)
    # resume: nothing recomputed, same table
    again, stats = generate_candidates(work, RenderBackend(synth["root"] / "raw"),
                                       tmp_path / "g", **kw)
    assert stats["shards_skipped"] == 2 and stats["candidates_computed"] == 0
    pd.testing.assert_frame_equal(again, table)
    # candidate j of (image, group) is deterministic across output directories
    other, _ = generate_candidates(work, RenderBackend(synth["root"] / "raw"),
                                   tmp_path / "h", **kw)
    for a, b in zip(table["path"], other["path"]):
        assert open(a, "rb").read() == open(b, "rb").read()


def test_backend_rejects_real_data_and_foreign_images(synth, tiny_coco):
    with pytest.raises(InputError, match="not a biaslab synthetic dataset"):
        RenderBackend(tiny_coco)
    backend = RenderBackend(synth["root"] / "raw")
    item = {"image_id": 1, "path": "x.png"}
    wrong = _source(synth, 2)
    with pytest.raises(InputError, match="differs from the synthetic generator"):
        backend.generate(item, wrong, None, "female", "", [0], [1], [7.5])
    with pytest.raises(InputError, match="no row for image 999"):
        backend.generate({"image_id": 999}, wrong, None, "female", "", [0], [1], [7.5])


def test_backend_rejects_another_renderer_version(synth, tmp_path):
    import json
    import shutil
    root = tmp_path / "old"
    shutil.copytree(synth["root"] / "raw" / "annotations", root / "annotations")
    p = root / S.PARAMS_FILE
    meta = json.loads(p.read_text())
    meta["render_version"] = S.RENDER_VERSION - 1
    p.write_text(json.dumps(meta))
    with pytest.raises(InputError, match="re-run the synthesize stage"):
        RenderBackend(root)


def test_generate_stage_with_render(synth, tmp_path, monkeypatch):
    from stages import generate as stage
    write_generate_inputs(tmp_path, synth)
    params = {"data": {"root": str(synth["root"] / "raw")}, "label": {"words": "lic"},
              "generate": {"backend": "render", "m": 1, "guidance_scales": [7.5],
                           "shards": 1, "seed": 0, "max_images": 3}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    assert stage.main([]) == 0
    c = pd.read_parquet("data/generate/candidates.parquet")
    assert len(c) == 3 * 2 and (c["backend"] == "render").all()
    import json
    m = json.loads(open("metrics/generate.json").read())
    assert m["backend"] == "render" and m["render"]["generator"]["seed"] == SEED
    params["data"]["root"] = None
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ValueError, match="data.root"):
        stage.main([])


def test_redraw_region_is_the_artifact_test_inpainter(synth, tmp_path):
    """render as the synthetic-artifact test's inpainter (biaslab.analysis.artifact): only the part's
    pixels change, they come from the same scene re-drawn for the person's own gender, and the
    test images are lossless PNGs like render's training candidates."""
    from biaslab.analysis.artifact import build_inpainted_test_set, choose_part_mask
    backend = RenderBackend(synth["root"] / "raw")
    persons = synth["tables"]["persons"]
    iid = int(persons["image_id"].iloc[0])
    src = _source(synth, iid)
    person = persons[persons["image_id"] == iid].iloc[0].to_dict()
    mask, part = choose_part_mask(person, *src.shape[:2], np.random.default_rng(0))
    gender = synth["truth"][iid]["gender"]
    out = backend.redraw_region({"image_id": iid}, src, mask, gender, 7)
    m = mask.astype(bool)
    assert np.array_equal(out[~m], src[~m])
    assert np.array_equal(out[m], backend.render(iid, gender, 7).image[m])
    assert not np.array_equal(out, src)          # a new appearance inside the part
    with pytest.raises(ValueError, match="does not match"):
        backend.redraw_region({"image_id": iid}, src, mask[:-1], gender, 7)
    with pytest.raises(InputError, match="differs"):
        backend.redraw_region({"image_id": iid}, 255 - src, mask, gender, 7)
    ids = sorted(persons["image_id"].unique())[:4]
    items = pd.DataFrame({"image_id": ids,
                          "path": [str(synth["root"] / "raw" / "images" / "synth" /
                                       f"{i:012d}.png") for i in ids],
                          "gender": [synth["truth"][i]["gender"] for i in ids],
                          "prompt": [""] * len(ids)})
    parts = build_inpainted_test_set(items, persons, backend, tmp_path / "a", seed=0)
    assert len(parts) == len(ids) and parts["path"].str.endswith(".png").all()
    assert parts["donor_ann_id"].isna().all()
    for r in parts.itertuples():
        a, b = load_image(r.path), load_image(r.source_path)
        changed = (a != b).any(-1)
        assert changed.sum() <= r.mask_pixels    # lossless: nothing outside the part


def test_make_backend_is_one_construction_for_generate_and_the_artifact_test(synth):
    """biaslab.counterfactual.generate.make_backend serves both stages: render needs the data
    root, copy_paste its donor tables; an unknown name is refused with the known ones."""
    from biaslab.counterfactual.generate import make_backend
    b = make_backend({"backend": "render"}, data_root=synth["root"] / "raw")
    assert isinstance(b, RenderBackend) and b.root == synth["root"] / "raw"
    with pytest.raises(ValueError, match="needs params data.root"):
        make_backend({"backend": "render"})
    with pytest.raises(ValueError, match="donor pool"):
        make_backend({"backend": "copy_paste", "m": 1})
    with pytest.raises(ValueError, match="known: copy_paste, render, sd_inpaint"):
        make_backend({"backend": "gan"})
