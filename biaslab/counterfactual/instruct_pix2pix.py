"""``instruct_pix2pix``: GenSynth's editor (paper 001 sec. 4.1, appendix B.2 and E; Brooks et al.
2023): the person's bounding box is cropped, edited by a diffusers InstructPix2Pix pipeline with
a gender-editing instruction, and pasted back, so every pixel outside the box is the source's.

* Instructions (paper 001 Table 6), four per group; candidate ``j`` uses instruction
  ``(j // n_scales) % 4``, and the generator cycles the text guidance scales over ``j``
  (``generate.guidance_scales``; paper 001: 9.5 and 15), so ``m = 8`` gives every instruction
  at both scales as the paper does:

  ====================================  ==========  ===========
  template                              feminine    masculine
  ====================================  ==========  ===========
  Make this person more {}              feminine    masculine
  Make this person look like a {}       woman       man
  Turn this person into a {}            woman       man
  Convert this into a {}                woman       man
  ====================================  ==========  ===========

* The crop is the union of the work item's person boxes (GenSynth edits images with one
  person; ours may hold several, each of them inside the crop), resized so its long side is
  ``resolution`` (both sides a multiple of the VAE's), edited with ``num_inference_steps`` =
  ``steps`` (paper 001: 500), ``image_guidance_scale`` (diffusers' default 1.5; the paper does
  not say) and a CPU ``torch.Generator`` seeded with the candidate's seed, resized back and
  pasted into the box. Unlike ``sd_inpaint`` there is no mask: the paper replaces the whole
  crop. The caption prompt the generator passes is not used (the edit is an instruction).

``model``: any diffusers InstructPix2Pix checkpoint, a Hugging Face name (the paper tier's
``timbrooks/instruct-pix2pix``, network the first time) or a local directory
(``save_tiny_pipeline`` writes a tiny random one for the tests); loaded by
``DiffusionPipeline.from_pretrained``, which reads the class from ``model_index.json``.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from biaslab.counterfactual.sd_inpaint import working_size
from biaslab.io import InputError

#: paper 001 Table 6: (template, feminine word, masculine word)
TEMPLATES = (("Make this person more {}", "feminine", "masculine"),
             ("Make this person look like a {}", "woman", "man"),
             ("Turn this person into a {}", "woman", "man"),
             ("Convert this into a {}", "woman", "man"))


def instruction(group: str, j: int, n_scales: int = 1) -> str:
    """The edit instruction of candidate ``j`` towards ``group`` ("female" / "male"): template
    ``(j // n_scales) % 4`` of paper 001 Table 6. Raises ValueError for another group."""
    if group not in ("female", "male"):
        raise ValueError(f"instruct_pix2pix edits towards 'female' or 'male', got {group!r}")
    t, fem, masc = TEMPLATES[(int(j) // max(int(n_scales), 1)) % len(TEMPLATES)]
    return t.format(fem if group == "female" else masc)


def crop_box(boxes: Sequence[Sequence[float]], width: int, height: int) -> tuple[int, int, int, int]:
    """The integer crop ``(x0, y0, x1, y1)`` covering every COCO box ``[x, y, w, h]`` (floor /
    ceil, clipped to the image). Raises ValueError without a box or for an empty crop."""
    b = np.asarray([list(map(float, x)) for x in boxes], np.float64).reshape(-1, 4)
    if not len(b):
        raise ValueError("instruct_pix2pix needs the person's box")
    x0 = max(int(np.floor(b[:, 0].min())), 0)
    y0 = max(int(np.floor(b[:, 1].min())), 0)
    x1 = min(int(np.ceil((b[:, 0] + b[:, 2]).max())), int(width))
    y1 = min(int(np.ceil((b[:, 1] + b[:, 3]).max())), int(height))
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"empty person crop {(x0, y0, x1, y1)} in a {width} x {height} image")
    return x0, y0, x1, y1


class InstructPix2PixBackend:
    """GenSynth's InstructPix2Pix editor (module docstring).

    Args:
        model: checkpoint name or local directory.
        steps: ``num_inference_steps`` (paper 001: 500).
        resolution: long side of the crop's working resolution.
        image_guidance_scale: how closely the edit follows the source crop.
        n_scales: the number of text guidance scales the generator cycles over ``j``.
        batch_size: candidates per pipeline call (same image, group, scale and instruction).
        device: ``cuda`` when available, else ``cpu`` (None = auto).
        local_files_only: never download (default True when ``model`` is a local directory).
    """
    name = "instruct_pix2pix"

    def __init__(self, model: str, steps: int = 500, resolution: int = 512,
                 image_guidance_scale: float = 1.5, n_scales: int = 2, batch_size: int = 4,
                 device: str | None = None, local_files_only: bool | None = None):
        if not model:
            raise ValueError("instruct_pix2pix needs generate.model (checkpoint name or "
                             "directory)")
        import torch
        self.model = str(model)
        self.steps = int(steps)
        self.resolution = int(resolution)
        self.image_guidance_scale = float(image_guidance_scale)
        self.n_scales = max(int(n_scales), 1)
        self.batch_size = max(int(batch_size), 1)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = "float16" if self.device.startswith("cuda") else "float32"
        self.local_files_only = (os.path.isdir(self.model) if local_files_only is None
                                 else local_files_only)
        self._pipe = None

    def fingerprint(self) -> dict:
        fp = {"backend": self.name, "model": self.model, "steps": self.steps,
              "resolution": self.resolution, "image_guidance_scale": self.image_guidance_scale,
              "n_scales": self.n_scales, "dtype": self.dtype, "templates": list(TEMPLATES),
              "version": 1}
        idx = Path(self.model) / "model_index.json"
        if idx.exists():  # a local checkpoint: its config identifies it
            fp["model_index"] = json.loads(idx.read_text())
        return fp

    @property
    def pipe(self):
        """The loaded pipeline (loaded on first use)."""
        if self._pipe is None:
            import torch
            try:
                from diffusers import DiffusionPipeline
            except ImportError as e:
                raise InputError("generate.backend", "instruct_pix2pix needs diffusers "
                                 "(pip install diffusers==0.42.1)") from e
            if not os.path.isdir(self.model) and self.model.startswith(("/", ".", "~")):
                raise InputError(self.model, "local model directory not found")
            dtype = torch.float16 if self.dtype == "float16" else torch.float32
            try:
                pipe = DiffusionPipeline.from_pretrained(
                    self.model, dtype=dtype, local_files_only=self.local_files_only)
            except (OSError, ValueError) as e:
                raise InputError(self.model, "cannot load an InstructPix2Pix pipeline (a "
                                 "Hugging Face name needs network the first time; a local "
                                 f"directory must hold a diffusers model_index.json): {e}") from e
            if type(pipe).__name__ != "StableDiffusionInstructPix2PixPipeline":
                raise InputError(self.model, f"is a {type(pipe).__name__}, not an "
                                             f"InstructPix2Pix pipeline")
            pipe = pipe.to(self.device)
            pipe.set_progress_bar_config(disable=True)
            self._pipe = pipe
        return self._pipe

    def _multiple(self) -> int:
        p = self.pipe
        vae_f = int(getattr(p, "vae_scale_factor", 8))
        n_down = len(getattr(p.unet.config, "down_block_types", ()) or (1,))
        return max(8, vae_f * 2 ** (n_down - 1))

    def generate(self, item, image: np.ndarray, mask: np.ndarray, group: str, prompt: str,
                 js: Sequence[int], seeds: Sequence[int], scales: Sequence[float]):
        """One candidate per j: ``[(image (H, W, 3) uint8, None), ...]`` (no donor); pixels
        outside the person crop are the source's exactly."""
        import torch
        H, W = image.shape[:2]
        x0, y0, x1, y1 = crop_box(item["boxes"], W, H)
        crop = image[y0:y1, x0:x1]
        w, h = working_size(x1 - x0, y1 - y0, self.resolution, self._multiple())
        src = Image.fromarray(np.ascontiguousarray(crop)).resize((w, h), Image.BICUBIC)
        results: dict[int, np.ndarray] = {}
        calls: dict[tuple[float, str], list[tuple[int, int]]] = {}
        for j, sd, sc in zip(js, seeds, scales):
            calls.setdefault((float(sc), instruction(group, j, self.n_scales)), []).append(
                (j, int(sd)))
        for (sc, text), cands in calls.items():
            for b in range(0, len(cands), self.batch_size):
                chunk = cands[b:b + self.batch_size]
                gens = [torch.Generator("cpu").manual_seed(sd) for _, sd in chunk]
                with torch.inference_mode():
                    out = self.pipe(prompt=[text] * len(chunk), image=[src] * len(chunk),
                                    guidance_scale=sc,
                                    image_guidance_scale=self.image_guidance_scale,
                                    num_inference_steps=self.steps, generator=gens,
                                    output_type="np").images
                for (j, _), arr in zip(chunk, out):
                    arr = np.clip(np.round(np.asarray(arr, np.float32) * 255), 0, 255)
                    edited = cv2.resize(arr.astype(np.uint8), (x1 - x0, y1 - y0),
                                        interpolation=cv2.INTER_CUBIC)
                    res = np.array(image, np.uint8, copy=True)
                    res[y0:y1, x0:x1] = edited
                    results[j] = res
        return [(results[j], None) for j in js]


def save_tiny_pipeline(path: str | os.PathLike, seed: int = 0) -> Path:
    """Build a tiny random InstructPix2Pix pipeline from configs (UNet with 8 input channels:
    the noisy latents and the source image's latents, 2-block VAE, 2-layer CLIP text encoder,
    byte-level tokenizer, Euler ancestral scheduler as the released checkpoint uses) and
    ``save_pretrained`` it to ``path``. For tests: it runs the real checkpoint's code path with
    noise-like edits. Needs no network."""
    import torch
    from diffusers import (AutoencoderKL, EulerAncestralDiscreteScheduler,
                           StableDiffusionInstructPix2PixPipeline, UNet2DConditionModel)
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    from biaslab.counterfactual.sd_inpaint import _tiny_tokenizer_files
    path = Path(path)
    tok_dir = path / "_tokenizer_src"
    tok_dir.mkdir(parents=True, exist_ok=True)
    _tiny_tokenizer_files(tok_dir)
    tokenizer = CLIPTokenizer.from_pretrained(str(tok_dir), model_max_length=77,
                                              local_files_only=True)
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=8, out_channels=4, layers_per_block=1,
        block_out_channels=(32, 64), down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32,
        attention_head_dim=8, norm_num_groups=32)
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(32, 64),
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"), layers_per_block=1,
        norm_num_groups=32, sample_size=32)
    text_encoder = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=77, bos_token_id=0, eos_token_id=1,
        pad_token_id=1))
    scheduler = EulerAncestralDiscreteScheduler(beta_start=0.00085, beta_end=0.012,
                                                beta_schedule="scaled_linear")
    pipe = StableDiffusionInstructPix2PixPipeline(
        vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
        scheduler=scheduler, safety_checker=None, feature_extractor=None,
        requires_safety_checker=False)
    pipe.save_pretrained(path)
    for f in tok_dir.iterdir():
        f.unlink()
    tok_dir.rmdir()
    return path
