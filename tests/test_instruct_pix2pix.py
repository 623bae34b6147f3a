"""instruct_pix2pix backend (GenSynth's editor, paper 001 sec. 4.1 / Table 6) end to end with a
tiny random InstructPix2Pix pipeline built from configs, saved with save_pretrained and loaded
from that directory by the same code path as a real checkpoint; and make_backend for the
diffusers backends of the paper tier."""
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from biaslab.counterfactual.generate import generate_candidates, make_backend
from biaslab.counterfactual.instruct_pix2pix import crop_box, instruction
from biaslab.counterfactual.masks import box_mask, save_mask

pytest.importorskip("diffusers")


def test_instructions_are_paper_001_table_6_over_both_scales():
    # m = 8 with two guidance scales: each of the four instructions at both scales
    assert [instruction("female", j, 2) for j in range(0, 8, 2)] == [
        "Make this person more feminine", "Make this person look like a woman",
        "Turn this person into a woman", "Convert this into a woman"]
    assert instruction("male", 1, 2) == "Make this person more masculine"
    assert instruction("male", 3, 2) == "Make this person look like a man"
    with pytest.raises(ValueError, match="female' or 'male"):
        instruction("both", 0)


def test_crop_box_covers_every_person_and_stays_inside():
    assert crop_box([[10.2, 5.5, 20.0, 30.0]], 96, 72) == (10, 5, 31, 36)
    assert crop_box([[10, 5, 20, 30], [50, 40, 60, 40]], 96, 72) == (10, 5, 96, 72)
    with pytest.raises(ValueError, match="box"):
        crop_box([], 96, 72)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch

    from biaslab.counterfactual.instruct_pix2pix import save_tiny_pipeline
    threads = torch.get_num_threads()
    torch.set_num_threads(1)      # tiny convolutions: one thread (see test_sd_inpaint)
    root = tmp_path_factory.mktemp("ip2p")
    model_dir = save_tiny_pipeline(root / "tiny-ip2p")
    rng = np.random.default_rng(0)
    img = (rng.random((72, 96, 3)) * 255).astype(np.uint8)
    Image.fromarray(img).save(root / "img.png")
    save_mask(root / "mask.png", box_mask((30, 10, 30, 50), 72, 96))
    work = pd.DataFrame([{"image_id": 7, "path": str(root / "img.png"),
                          "mask_path": str(root / "mask.png"), "width": 96, "height": 72,
                          "gender": "male", "ann_ids": [1], "boxes": [[30.0, 10.0, 30.0, 50.0]],
                          "shard": 0, "prompt_female": "A woman riding a horse.",
                          "prompt_male": "A man riding a horse."}])
    yield root, model_dir, work, img
    torch.set_num_threads(threads)


def test_candidates_edit_only_the_person_box(tiny):
    root, model_dir, work, img = tiny
    p = {"backend": "instruct_pix2pix", "model": str(model_dir), "steps": 2,
         "resolution": 32, "guidance_scales": [9.5, 15.0], "batch_size": 2}
    backend = make_backend(p)                       # through the registry, as the stages do
    assert backend.name == "instruct_pix2pix" and backend.n_scales == 2
    assert type(backend.pipe).__name__ == "StableDiffusionInstructPix2PixPipeline"
    assert backend.fingerprint()["model_index"]
    cands, _ = generate_candidates(work, backend, root / "out", m=2,
                                   guidance_scales=p["guidance_scales"], seed=0, shards=1,
                                   progress=False)
    assert len(cands) == 4 and set(cands["group"]) == {"female", "male"}
    assert set(cands["backend"]) == {"instruct_pix2pix"} and cands["donor_ann_id"].isna().all()
    for path in cands["path"]:
        assert np.asarray(Image.open(path)).shape == img.shape
    # array level: outside the person's box exact (the background is fixed), inside edited;
    # seeded, so a candidate is the same whatever its position in the batch
    item = work.iloc[0]
    mask = np.zeros(img.shape[:2], np.uint8)
    a = backend.generate(item, img, mask, "female", "", [0, 1], [11, 12], [9.5, 15.0])
    b = backend.generate(item, img, mask, "female", "", [2, 0], [11, 11], [9.5, 9.5])
    inside = np.zeros(img.shape[:2], bool)
    inside[10:60, 30:60] = True
    for out, donor in a:
        assert out.shape == img.shape and donor is None
        np.testing.assert_array_equal(out[~inside], img[~inside])
        assert (out[inside] != img[inside]).mean() > 0.5
    assert np.array_equal(a[0][0], b[1][0])        # j = 0, seed 11, scale 9.5: same edit
    assert not np.array_equal(a[0][0], b[0][0])    # j = 2: another instruction


def test_make_backend_builds_the_sd_inpaint_backend_from_params():
    # the paper tier's generate params (it once passed copy_paste's extent_weight and crashed)
    b = make_backend({"backend": "sd_inpaint", "model": "stabilityai/stable-diffusion-2-"
                      "inpainting", "steps": 50, "resolution": 512, "batch_size": 4,
                      "feather_px": 2.0, "extent_weight": 1.0, "guidance_scales": [7.5]})
    assert b.name == "sd_inpaint" and b.steps == 50 and b.resolution == 512
