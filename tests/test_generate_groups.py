"""Counterfactual generation per group of the protected attribute: the groups
and their prompts (paper 000 appendix B.1, sec. 7), the render backend drawing the target skin
tone, copy_paste's donors by the target group, and the training sets over every group."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from biaslab.counterfactual.copy_paste import donor_group, donor_pool
from biaslab.counterfactual.generate import (SKIN_DESCRIPTORS, build_work, describe_skin, generate_candidates,
                                             load_image, make_prompt, make_prompts)
from biaslab.counterfactual.render import RenderBackend
from biaslab.data import datasets as D
from biaslab.data import synthetic as S
from biaslab.data.groups import generation_groups, group_parts
from biaslab.data.synthetic import figures as SF
from biaslab.metrics.files import ATTRIBUTES
from biaslab.runtime.io import InputError
from tests.conftest import synthetic_masked_set, write_generate_inputs


def test_groups_are_the_metrics_groups_and_parse():
    for a in ATTRIBUTES:
        assert generation_groups(a) == tuple(ATTRIBUTES[a][1])
    assert group_parts("female") == ("female", None)
    assert group_parts("dark") == (None, "dark")
    assert group_parts("male_light") == ("male", "light")
    for bad in ("dark_female", "female_male", "dark_light", "medium", "", "female_dark_x"):
        with pytest.raises(ValueError, match="unknown group"):
            group_parts(bad)
    with pytest.raises(ValueError, match="unknown attribute"):
        generation_groups("age")


def test_prompts_per_group_hand_written():
    caps = ["A photo of a kitchen.", "A man is an actor with his dog.", "A woman."]
    # gender: the first gendered caption swapped (unchanged behaviour)
    assert make_prompt(caps, "female") == (caps[1], "A woman is an actress with her dog.")
    # skin: the caption's own gender, the skin-tone word before every gender noun, the article
    # before a changed noun fixed, the pronoun left alone
    assert make_prompt(caps, "dark") == (
        caps[1], "A darker-skinned man is a darker-skinned actor with his dog.")
    assert make_prompt(caps, "light")[1] == \
        "A lighter-skinned man is a lighter-skinned actor with his dog."
    # gender x skin: both
    assert make_prompt(caps, "female_dark")[1] == \
        "A darker-skinned woman is a darker-skinned actress with her dog."
    # no gender noun (a pronoun only): the person is named in front
    assert describe_skin("Someone walking her dog", "light") == \
        "A lighter-skinned person. Someone walking her dog"
    assert describe_skin("Woman on a bench", "dark") == "Darker-skinned woman on a bench"
    assert make_prompt(["A kitchen."], "dark") is None
    with pytest.raises(ValueError, match="unknown group"):
        make_prompt(caps, "medium")
    t = make_prompts(pd.DataFrame({"caption_id": [1, 2, 3], "image_id": [7, 7, 8],
                                   "caption": ["A kitchen.", "A girl.", "A bowl."]}),
                     groups=generation_groups("skin"))
    assert list(t.columns) == ["image_id", "source_caption", "prompt_dark", "prompt_light"]
    assert t.to_dict("records") == [{"image_id": 7, "source_caption": "A girl.",
                                     "prompt_dark": "A darker-skinned girl.",
                                     "prompt_light": "A lighter-skinned girl."}]


SEED, SIZE, N = 2, 96, 16


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return synthetic_masked_set(tmp_path_factory.mktemp("groups"), N, SEED, SIZE, bias=0.8)


@pytest.mark.parametrize("attribute", ["skin", "gender_skin"])
def test_render_draws_every_group_of_the_attribute(synth, tmp_path, attribute):
    """Each candidate is the scene re-drawn with the target group: a skin-tone target keeps
    the image's true gender and draws the requested tone (the head colour of the figure that
    the candidate's appearance seed draws is in the light / dark half of the palette, and it
    is in the candidate's pixels)."""
    groups = generation_groups(attribute)
    t = synth["tables"]
    prompts = make_prompts(t["captions"], synth["masks"]["image_id"], groups=groups)
    work = build_work(synth["masks"], t["images"], t["persons"], prompts, shards=1)[0]
    backend = RenderBackend(synth["root"] / "raw")
    table, _ = generate_candidates(work, backend, tmp_path / "g", m=1, guidance_scales=[7.5],
                                   seed=0, shards=1, progress=False, groups=groups)
    assert sorted(table["group"].unique()) == sorted(groups)
    assert len(table) == len(work) * len(groups)
    for r in table.itertuples():
        truth = synth["truth"][int(r.image_id)]
        gender, skin = group_parts(r.group)
        gender = gender or truth["gender"]

        def ref(tone):
            return S.render_scene(int(r.image_id), seed=SEED, image_size=SIZE, gender=gender,
                                  scene=truth["scene"], cast=truth["cast"],
                                  objects=truth["objects"], appearance_seed=int(r.seed),
                                  skin=tone)
        cand = load_image(r.path)
        assert np.array_equal(cand, ref(skin).image)
        # the figure's drawn skin colour is in the requested half of the palette ...
        parts, _ = SF.person_figure(np.random.default_rng(int(r.seed)), gender, skin)
        assert (sum(parts[-2][1]) > 450) == (skin == S.LIGHT)
        # ... and the pixels it changes are brighter for light than for dark skin
        other = ref(S.DARK if skin == S.LIGHT else S.LIGHT).image
        diff = (cand != other).any(-1)
        assert diff.any()
        brighter = cand[diff].astype(int).sum() > other[diff].astype(int).sum()
        assert brighter == (skin == S.LIGHT)
        assert SKIN_DESCRIPTORS[skin] in r.prompt.lower()


def test_donor_pool_by_skin_and_the_donor_group_of_a_target():
    persons = pd.DataFrame({"ann_id": [1, 2, 3, 4, 5], "image_id": [10, 11, 12, 13, 14],
                            "x": 1.0, "y": 1.0, "w": 10.0, "h": 20.0,
                            "polygon": ["[[1,1,11,1,11,21,1,21]]"] * 5})
    images = pd.DataFrame({"image_id": [10, 11, 12, 13, 14], "path": "p", "width": 50,
                           "height": 50})
    labels = pd.DataFrame({"image_id": [10, 11, 12, 13, 14],
                           "gender": ["female", "female", "male", "male", "female"],
                           "skin": ["dark", "light", "dark", "light", None]})
    pool = donor_pool(persons, images, labels, None, attribute="skin")
    assert dict(zip(pool["ann_id"], pool["group"])) == {
        1: "female_dark", 2: "female_light", 3: "male_dark", 4: "male_light"}
    g = donor_pool(persons, images, labels, None)
    assert list(g["group"]) == list(g["gender"]) and len(g) == 5
    assert donor_group("dark", "female") == "female_dark"
    assert donor_group("light", "male") == "male_light"
    assert donor_group("male_dark", "female") == "male_dark"
    assert donor_group("female", None) == "female"
    with pytest.raises(ValueError, match="source person's gender"):
        donor_group("dark", None)
    with pytest.raises(InputError, match="skin"):
        donor_pool(persons, images, labels.drop(columns=["skin"]), None, attribute="skin")


def _original():
    return pd.DataFrame({"sample_id": ["1", "2"], "image_id": [1, 2], "path": ["a", "b"],
                         "gender": ["male", "female"],
                         "captions": [["A man with his dog."], ["A woman."]],
                         "objects": [["dog"], []], "counterfactual": False,
                         "group": ["dark", None]})


def test_training_sets_over_skin_groups_hand_computed():
    d = _original()
    sel = pd.DataFrame({"image_id": [1, 1, 2, 2], "group": ["dark", "light", "dark", "light"],
                        "j": 0, "path": ["c1d", "c1l", "c2d", "c2l"]})
    cf = D.counterfactuals(sel, d)
    assert list(cf["gender"]) == ["male", "male", "female", "female"]     # gender kept
    assert list(cf["captions"]) == [["A man with his dog."]] * 2 + [["A woman."]] * 2
    assert list(cf["group"]) == ["dark", "light", "dark", "light"]
    assert list(D.s_synthetic(cf)["path"]) == ["c1d", "c1l", "c2d", "c2l"]
    # S_augment: image 1 (dark) adds its light version; image 2 (no label) adds both
    aug = D.s_augment(d, cf)
    assert list(aug["path"]) == ["a", "b", "c1l", "c2d", "c2l"]
    d2, cf2 = D.same_sources(d, cf[cf["path"] != "c2l"])
    assert list(d2["image_id"]) == [1] and list(cf2["path"]) == ["c1d", "c1l"]


def test_training_sets_over_gender_x_skin_groups_and_gender_unchanged():
    d = _original().assign(group=["male_dark", None])   # the stage's gender_skin groups
    groups = generation_groups("gender_skin")
    sel = pd.DataFrame({"image_id": [1] * 4, "group": list(groups), "j": 1,
                        "path": [f"c{g}" for g in groups]})
    cf = D.counterfactuals(sel, d)
    assert list(cf["gender"]) == ["female", "female", "male", "male"]
    assert cf["captions"].iloc[0] == ["A woman with her dog."]
    assert cf["captions"].iloc[3] == ["A man with his dog."]
    assert list(D.s_augment(d, cf)["path"]) == ["a", "b", "cfemale_dark", "cfemale_light",
                                               "cmale_light"]
    # gender: no group column, the manifest as before this change
    g = D.counterfactuals(pd.DataFrame({"image_id": [1, 1], "group": ["female", "male"],
                                        "j": 0, "path": ["f", "m"]}), d.drop(columns="group"))
    assert list(g.columns) == D.MANIFEST_COLUMNS
    assert list(D.s_augment(d.drop(columns="group"), g)["path"]) == ["a", "b", "f"]


def test_generate_stage_over_skin_groups(synth, tmp_path, monkeypatch):
    """`attribute: skin` -> the stage generates the two skin-tone groups, records them, and
    nothing else in params changes."""
    from stages import generate as stage
    write_generate_inputs(tmp_path, synth)
    params = {"attribute": "skin", "data": {"root": str(synth["root"] / "raw")},
              "label": {"words": "lic"},
              "generate": {"backend": "render", "m": 1, "guidance_scales": [7.5],
                           "shards": 1, "seed": 0, "max_images": 3}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    assert stage.main([]) == 0
    c = pd.read_parquet("data/generate/candidates.parquet")
    assert sorted(c["group"].unique()) == ["dark", "light"] and len(c) == 3 * 2
    m = json.loads(open("metrics/generate.json").read())
    assert m["attribute"] == "skin" and m["candidates_by_group"] == {"dark": 3, "light": 3}


def test_skin_tone_selection_drops_colour_fidelity():
    """Paper 000 appendix B.1: no colour fidelity filter for skin tone."""
    from biaslab.counterfactual.filters import attribute_weights, select
    names = ["prompt_adherence", "object_consistency", "color_fidelity"]
    assert attribute_weights(names, [1, 2, 3]) == [1.0, 2.0, 3.0]
    assert attribute_weights(names, [1, 2, 3], "skin") == [1.0, 2.0, 0.0]
    assert attribute_weights(names, [1, 2, 3], "gender_skin") == [1.0, 2.0, 0.0]
    with pytest.raises(ValueError, match="differ in length"):
        attribute_weights(names, [1, 2])
    # two candidates: b is better on colour fidelity only, a on prompt adherence only
    scores = pd.DataFrame({"image_id": [1, 1], "group": ["dark", "dark"], "j": [0, 1],
                           "prompt_adherence": [0.3, 0.2], "object_consistency": [0.5, 0.5],
                           "color_fidelity": [1.0, 9.0]})
    assert select(scores, names, [1, 1, 2])["j"].tolist() == [1]
    assert select(scores, names, attribute_weights(names, [1, 1, 2], "skin"))["j"].tolist() \
        == [0]


def test_build_datasets_stage_over_skin_groups(tmp_path, monkeypatch):
    """Stage build_datasets with `attribute: skin` on hand-written tables: S_synthetic holds
    both tones of every source with its gender and captions, the originals carry their
    perceived tone (None without a label), S_augment adds the other tone (both without a
    label), and metrics/datasets.json counts the samples per group."""
    from stages import build_datasets as stage
    ids = list(range(1, 9))
    gender = ["female", "male"] * 4
    skin = ["Dark", "Light", "Light", "Dark", None, "Unsure", "Dark", "Light"]
    prep = tmp_path / "data/prepared"
    prep.mkdir(parents=True)
    pd.DataFrame({"image_id": ids, "path": [f"i{i}.png" for i in ids]}).to_parquet(
        prep / "images.parquet")
    pd.DataFrame({"caption_id": ids, "image_id": ids,
                  "caption": [f"A {'woman' if g == 'female' else 'man'} with a dog."
                              for g in gender]}).to_parquet(prep / "captions.parquet")
    pd.DataFrame({"image_id": ids * 2, "category": ["dog"] * 8 + ["cup"] * 8}).to_parquet(
        prep / "objects.parquet")
    pd.DataFrame({"image_id": ids}).to_parquet(prep / "attributes.parquet")
    pd.DataFrame({"image_id": ids, "perceived_gender": gender, "skin": skin}).to_parquet(
        prep / "perceived_gender.parquet")
    (tmp_path / "data/labels").mkdir()
    pd.DataFrame({"image_id": ids, "gender": gender}).to_parquet(
        tmp_path / "data/labels/images.parquet")
    pd.DataFrame({"image_id": ids, "split": "train", "gender": gender}).to_parquet(
        tmp_path / "data/split.parquet")
    (tmp_path / "data/select").mkdir()
    pd.DataFrame({"image_id": [i for i in ids for _ in (0, 1)], "group": ["dark", "light"] * 8,
                  "j": 0, "path": [f"c{i}{t}.png" for i in ids for t in "dl"]}).to_parquet(
        tmp_path / "data/select/selected.parquet")
    params = {"attribute": "skin", "label": {"words": "lic"},
              "datasets": {"splits": ["train"], "seed": 0, "same_sources": True,
                           "max_skew": 0.05, "max_copies": 20, "max_factor": 6,
                           "min_fraction": None},
              "classifier": {"datasets": ["original", "synthetic"]},
              "captioner": {"datasets": ["original"]}, "artifact": {"datasets": []}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    assert stage.main([]) == 0
    syn = pd.read_parquet("data/datasets/synthetic.parquet")
    assert len(syn) == 16 and syn["counterfactual"].all()
    assert list(syn["group"]) == ["dark", "light"] * 8
    assert list(syn["gender"]) == [g for g in gender for _ in (0, 1)]
    assert syn["captions"].map(list).tolist()[:2] == [["A woman with a dog."]] * 2
    orig = pd.read_parquet("data/datasets/original.parquet")
    assert [None if pd.isna(g) else g for g in orig["group"]] == [
        "dark", "light", "light", "dark", None, None, "dark", "light"]
    aug = pd.read_parquet("data/datasets/augment.parquet")
    # 8 originals + the other tone of the 6 labelled images + both tones of images 5 and 6
    assert len(aug) == 8 + 6 + 4
    assert set(aug.loc[aug["image_id"] == 1, "path"]) == {"i1.png", "c1l.png"}
    assert set(aug.loc[aug["image_id"] == 5, "path"]) == {"i5.png", "c5d.png", "c5l.png"}
    m = json.loads(open("metrics/datasets.json").read())
    assert m["synthetic"]["by_group"] == {"dark": 8, "light": 8}
    assert m["original"]["by_group"] == {"dark": 3, "light": 3, "none": 2}
    # the resampling baselines balance skin tone over the six labelled images (every image
    # holds a dog and a cup, so nothing needs repeating): images 5 and 6 are left out
    for name in ("oversample", "subsample", "matched"):
        assert m[name]["by_group"] == {"dark": 3, "light": 3}, name
    assert m["oversample"]["unlabelled_left_out"] == m["subsample"]["unlabelled_left_out"] == 2
    assert m["oversample"]["group_objects_max_abs_skew"] == 0.0
    from biaslab.report.notes import resample_note
    note = resample_note(m)
    assert "balanced over dark / light" in note and "2 images without a group left out" in note
