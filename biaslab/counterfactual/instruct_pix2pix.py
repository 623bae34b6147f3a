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

import os
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from biaslab.counterfactual.sd_inpaint import SDInpaintBackend, tiny_components, working_size

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


class InstructPix2PixBackend(SDInpaintBackend):
    """GenSynth's InstructPix2Pix editor (module docstring). Loading, device, dtype and the
    working-size multiple are ``SDInpaintBackend``'s; the edit is not.

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
    # DiffusionPipeline reads the class from model_index.json; it must be this one
    loader = "DiffusionPipeline"
    expect = "StableDiffusionInstructPix2PixPipeline"
    what = "an InstructPix2Pix pipeline"

    def __init__(self, model: str, steps: int = 500, resolution: int = 512,
                 image_guidance_scale: float = 1.5, n_scales: int = 2, batch_size: int = 4,
                 device: str | None = None, local_files_only: bool | None = None):
        if not model:
            raise ValueError("instruct_pix2pix needs generate.model (checkpoint name or "
                             "directory)")
        super().__init__(model, steps=steps, resolution=resolution, batch_size=batch_size,
                         device=device, local_files_only=local_files_only)
        self.image_guidance_scale = float(image_guidance_scale)
        self.n_scales = max(int(n_scales), 1)

    def fingerprint(self) -> dict:
        fp = super().fingerprint()
        del fp["feather_px"]           # no blending: the crop replaces the box
        return fp | {"image_guidance_scale": self.image_guidance_scale,
                     "n_scales": self.n_scales, "templates": list(TEMPLATES), "version": 1}

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
    """Build a tiny random InstructPix2Pix pipeline (``sd_inpaint.tiny_components`` with an
    8-channel UNet: the noisy latents and the source image's latents; the Euler ancestral
    scheduler of the released checkpoint) and ``save_pretrained`` it to ``path``. For tests:
    it runs the real checkpoint's code path with noise-like edits. Needs no network."""
    from diffusers import EulerAncestralDiscreteScheduler, StableDiffusionInstructPix2PixPipeline

    path = Path(path)
    scheduler = EulerAncestralDiscreteScheduler(beta_start=0.00085, beta_end=0.012,
                                                beta_schedule="scaled_linear")
    pipe = StableDiffusionInstructPix2PixPipeline(scheduler=scheduler,
                                                  **tiny_components(path, 8, seed))
    pipe.save_pretrained(path)
    return path
