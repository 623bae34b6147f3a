"""``sd_inpaint``: text-guided inpainting with a diffusers Stable Diffusion inpainting pipeline
(paper 000 sec. 2.2, Eq. 1; Rombach et al. 2022).

For each (image, group g') and candidate j the pipeline inpaints omega guided by t^(g') with
``guidance_scale`` = the candidate's scale and a ``torch.Generator`` seeded with the candidate's
seed (CPU generators, so the initial noise is the same on any device). Images are resized so the
long side is ``resolution`` (both sides rounded to a multiple the VAE/UNet accept), inpainted,
resized back and composited: ``out = x * (1 - a) + inpainted * a`` with ``a`` = omega feathered
inside omega, so pixels outside omega are exactly the original ones (the VAE round trip would
otherwise alter the whole scene).

``model`` is any diffusers inpainting checkpoint: a Hugging Face name (e.g. the paper-tier
``stabilityai/stable-diffusion-2-inpainting``; needs network the first time) or a local
directory written by ``save_pretrained`` (``save_tiny_pipeline`` writes a tiny random one for
tests and benchmarks). The same ``AutoPipelineForInpainting.from_pretrained`` call loads both. On
CUDA the pipeline runs in float16 and candidates of one (image, group, guidance scale) are
batched ``batch_size`` at a time; on CPU in float32. The checkpoint's own safety checker, if it
has one, is kept as shipped.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from biaslab.counterfactual.copy_paste import feather_alpha
from biaslab.runtime.io import InputError


def working_size(width: int, height: int, resolution: int, multiple: int = 8) -> tuple[int, int]:
    """(w, h) with the long side ~ ``resolution``, aspect kept, both multiples of ``multiple``
    (at least ``multiple``)."""
    f = resolution / max(width, height)
    w = max(int(round(width * f / multiple)) * multiple, multiple)
    h = max(int(round(height * f / multiple)) * multiple, multiple)
    return w, h


def composite(original: np.ndarray, inpainted: np.ndarray, omega: np.ndarray,
              feather_px: float) -> np.ndarray:
    """Blend ``inpainted`` into ``original`` inside omega only (feathered edge inside omega)."""
    a = feather_alpha(omega.astype(np.float32), feather_px) * (omega > 0)
    out = original.astype(np.float32) * (1 - a[..., None]) + \
        inpainted.astype(np.float32) * a[..., None]
    out = np.where((a > 0)[..., None], out, original)
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


class SDInpaintBackend:
    """Stable Diffusion inpainting backend (module docstring).

    Args:
        model: checkpoint name or local directory.
        steps: ``num_inference_steps``.
        resolution: long side of the working resolution (512 for SD 1.5/2 inpainting).
        batch_size: candidates per pipeline call (same image, group and guidance scale).
        feather_px: sigma of the composite's alpha blur.
        device: ``cuda`` when available, else ``cpu`` (None = auto).
        local_files_only: never download (default True when ``model`` is a local directory).
    """
    name = "sd_inpaint"

    def __init__(self, model: str, steps: int = 50, resolution: int = 512,
                 batch_size: int = 4, feather_px: float = 2.0, device: str | None = None,
                 local_files_only: bool | None = None):
        if not model:
            raise ValueError("sd_inpaint needs generate.model (checkpoint name or directory)")
        import torch
        self.model = str(model)
        self.steps = int(steps)
        self.resolution = int(resolution)
        self.batch_size = max(int(batch_size), 1)
        self.feather_px = float(feather_px)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = "float16" if self.device.startswith("cuda") else "float32"
        self.local_files_only = (os.path.isdir(self.model) if local_files_only is None
                                 else local_files_only)
        self._pipe = None

    def fingerprint(self) -> dict:
        fp = {"backend": self.name, "model": self.model, "steps": self.steps,
              "resolution": self.resolution, "feather_px": self.feather_px,
              "dtype": self.dtype, "version": 1}
        idx = Path(self.model) / "model_index.json"
        if idx.exists():  # a local checkpoint: its config identifies it
            fp["model_index"] = json.loads(idx.read_text())
        return fp

    #: the diffusers class that loads ``model`` (``from_pretrained``) and the pipeline class
    #: the loaded object must be (None: any); a subclass for another pipeline sets both
    loader = "AutoPipelineForInpainting"
    expect: str | None = None
    what = "an inpainting pipeline"

    @property
    def pipe(self):
        """The loaded pipeline (loaded on first use)."""
        if self._pipe is None:
            import torch
            try:
                import diffusers
            except ImportError as e:
                raise InputError("generate.backend", f"{self.name} needs diffusers "
                                 "(pip install diffusers==0.42.1)") from e
            if not os.path.isdir(self.model) and self.model.startswith(("/", ".", "~")):
                raise InputError(self.model, "local model directory not found")
            dtype = torch.float16 if self.dtype == "float16" else torch.float32
            try:
                pipe = getattr(diffusers, self.loader).from_pretrained(
                    self.model, dtype=dtype, local_files_only=self.local_files_only)
            except (OSError, ValueError) as e:
                raise InputError(self.model, f"cannot load {self.what} (a Hugging Face name "
                                 "needs network the first time; a local directory must hold "
                                 f"a diffusers model_index.json): {e}") from e
            if self.expect and type(pipe).__name__ != self.expect:
                raise InputError(self.model, f"is a {type(pipe).__name__}, not {self.what}")
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
        """One candidate per j: ``[(image (H, W, 3) uint8, None), ...]`` (no donor)."""
        import torch
        H, W = image.shape[:2]
        w, h = working_size(W, H, self.resolution, self._multiple())
        src = Image.fromarray(image).resize((w, h), Image.BICUBIC)
        msk = Image.fromarray((mask > 0).astype(np.uint8) * 255).resize((w, h), Image.NEAREST)
        results: dict[int, np.ndarray] = {}
        by_scale: dict[float, list[tuple[int, int]]] = {}
        for j, sd, sc in zip(js, seeds, scales):
            by_scale.setdefault(float(sc), []).append((j, int(sd)))
        for sc, cands in by_scale.items():
            for b in range(0, len(cands), self.batch_size):
                chunk = cands[b:b + self.batch_size]
                gens = [torch.Generator("cpu").manual_seed(sd) for _, sd in chunk]
                with torch.inference_mode():
                    out = self.pipe(prompt=[prompt] * len(chunk), image=[src] * len(chunk),
                                    mask_image=[msk] * len(chunk), height=h, width=w,
                                    guidance_scale=sc, num_inference_steps=self.steps,
                                    generator=gens, output_type="np").images
                for (j, _), arr in zip(chunk, out):
                    arr = np.clip(np.round(np.asarray(arr, np.float32) * 255), 0, 255)
                    big = cv2.resize(arr.astype(np.uint8), (W, H),
                                     interpolation=cv2.INTER_CUBIC)
                    results[j] = composite(image, big, mask, self.feather_px)
        return [(results[j], None) for j in js]


def _tiny_tokenizer_files(path: Path) -> None:
    """A byte-level CLIP BPE vocabulary without merges: every byte character, alone and as a
    word end (``</w>``), plus the special tokens."""
    # GPT-2/CLIP byte -> printable unicode table
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    chars = [chr(c) for c in cs]
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in chars:
        vocab.setdefault(c, len(vocab))
    for c in chars:
        vocab.setdefault(c + "</w>", len(vocab))
    (path / "vocab.json").write_text(json.dumps(vocab))
    (path / "merges.txt").write_text("#version: 0.2\n")


def tiny_components(path: Path, in_channels: int, seed: int = 0) -> dict:
    """The parts of a tiny random Stable Diffusion pipeline built from configs: a UNet with
    ``in_channels`` inputs (9 for inpainting, 8 for InstructPix2Pix), a 2-block VAE, a 2-layer
    CLIP text encoder and a byte-level CLIP tokenizer (its files written under ``path`` and
    removed again). For tests and benchmarks; needs no network."""
    import torch
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    tok_dir = Path(path) / "_tokenizer_src"
    tok_dir.mkdir(parents=True, exist_ok=True)
    _tiny_tokenizer_files(tok_dir)
    # from_pretrained on a directory holding vocab.json + merges.txt works across transformers
    # versions (the constructor's argument names changed in 5.x)
    tokenizer = CLIPTokenizer.from_pretrained(str(tok_dir), model_max_length=77,
                                              local_files_only=True)
    for f in tok_dir.iterdir():
        f.unlink()
    tok_dir.rmdir()
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=int(in_channels), out_channels=4, layers_per_block=1,
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
    return {"vae": vae, "text_encoder": text_encoder, "tokenizer": tokenizer, "unet": unet,
            "safety_checker": None, "feature_extractor": None,
            "requires_safety_checker": False}


def save_tiny_pipeline(path: str | os.PathLike, seed: int = 0) -> Path:
    """Build a tiny random Stable Diffusion inpainting pipeline (:func:`tiny_components` with
    a 9-channel UNet, DDIM scheduler) and ``save_pretrained`` it to ``path``. For tests and
    benchmarks: it produces noise-like inpaintings but runs through exactly the code path of a
    real checkpoint. Needs no network.
    """
    from diffusers import DDIMScheduler, StableDiffusionInpaintPipeline

    path = Path(path)
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                              clip_sample=False, set_alpha_to_one=False,
                              steps_offset=1)
    pipe = StableDiffusionInpaintPipeline(scheduler=scheduler,
                                          **tiny_components(path, 9, seed))
    pipe.save_pretrained(path)
    return path
