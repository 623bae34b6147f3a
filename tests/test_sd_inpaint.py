"""sd_inpaint backend end to end with a tiny Stable Diffusion inpainting pipeline built from
configs (UNet with 9 input channels, small VAE, tiny CLIP text encoder, a byte-level CLIP
tokenizer from a hand-written vocab.json/merges.txt, DDIM scheduler), saved with
save_pretrained and loaded from that directory by the same code path as a real checkpoint."""
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from biaslab.counterfactual.generate import generate_candidates, load_image
from biaslab.counterfactual.masks import box_mask, load_mask, save_mask
from biaslab.runtime.io import InputError

pytest.importorskip("diffusers")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import torch

    from biaslab.counterfactual.sd_inpaint import SDInpaintBackend, save_tiny_pipeline
    # one intra-op thread: on a shared, loaded 2-core machine two spinning OpenMP threads
    # make these tiny convolutions ~40x slower (measured: 4-9 s vs 0.1 s per call)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("sd")
    model_dir = save_tiny_pipeline(root / "tiny-sd")
    rng = np.random.default_rng(0)
    img = (rng.random((72, 96, 3)) * 255).astype(np.uint8)        # not square: 96 x 72
    Image.fromarray(img).save(root / "img.jpg", quality=95)
    save_mask(root / "mask.png", box_mask((30, 10, 30, 50), 72, 96))
    work = pd.DataFrame([{"image_id": 7, "path": str(root / "img.jpg"),
                          "mask_path": str(root / "mask.png"), "width": 96, "height": 72,
                          "gender": "male", "ann_ids": [1], "boxes": [[30.0, 10.0, 30.0, 50.0]],
                          "shard": 0, "prompt_female": "A woman riding a horse.",
                          "prompt_male": "A man riding a horse."}])
    backend = SDInpaintBackend(str(model_dir), steps=2, resolution=32, batch_size=2,
                               device="cpu")
    yield root, model_dir, work, backend
    torch.set_num_threads(threads)


def test_saved_tiny_pipeline_loads_through_the_same_path(tiny):
    _, model_dir, _, backend = tiny
    assert (model_dir / "model_index.json").exists()
    assert {"unet", "vae", "text_encoder", "tokenizer", "scheduler"} <= \
        {p.name for p in model_dir.iterdir()}
    pipe = backend.pipe                                           # AutoPipelineForInpainting
    assert type(pipe).__name__ == "StableDiffusionInpaintPipeline"
    assert pipe.unet.config.in_channels == 9
    ids = pipe.tokenizer("A woman riding a horse.").input_ids
    assert ids[0] == pipe.tokenizer.bos_token_id and len(ids) > 5
    assert max(ids) < pipe.text_encoder.config.vocab_size
    fp = backend.fingerprint()
    assert fp["backend"] == "sd_inpaint" and fp["dtype"] == "float32" and "model_index" in fp


def test_candidates_end_to_end(tiny):
    root, _, work, backend = tiny
    # one guidance scale and batch_size = m: one pipeline call per group
    table, stats = generate_candidates(work, backend, root / "gen", m=2,
                                       guidance_scales=[7.5], seed=0, shards=1,
                                       progress=False)
    assert len(table) == 4 and set(table["backend"]) == {"sd_inpaint"}
    assert table["donor_ann_id"].isna().all()
    assert set(table["prompt"]) == {"A woman riding a horse.", "A man riding a horse."}
    image = load_image(work.iloc[0]["path"])
    for p in table["path"]:
        assert load_image(p).shape == image.shape == (72, 96, 3)
    # array level: outside omega exact, inside changed, seeded = reproducible and
    # independent of the position in the batch
    item = work.iloc[0]
    omega = load_mask(item["mask_path"])
    a = backend.generate(item, image, omega, "female", item["prompt_female"], [0, 1],
                         [11, 12], [7.5, 7.5])
    b = backend.generate(item, image, omega, "female", item["prompt_female"], [0, 1],
                         [13, 11], [7.5, 7.5])
    assert a[0][0].shape == image.shape and a[0][1] is None
    assert (a[0][0][omega == 0] == image[omega == 0]).all()
    assert (np.abs(a[0][0].astype(int) - image)[omega == 1] > 0).mean() > 0.5
    assert np.array_equal(a[0][0], b[1][0])
    assert not np.array_equal(a[0][0], a[1][0])


def test_missing_model_is_an_input_error(tiny, tmp_path):
    from biaslab.counterfactual.sd_inpaint import SDInpaintBackend
    with pytest.raises(InputError, match="model_index.json"):
        SDInpaintBackend(str(tmp_path), steps=1).pipe
    with pytest.raises(InputError, match="not found"):
        SDInpaintBackend(str(tmp_path / "missing"), steps=1).pipe
    with pytest.raises(ValueError):
        SDInpaintBackend("", steps=1)
