"""The settings of the built-in counterfactual backends (paper 000 Eq. 1): which keys of params
group ``generate`` each reads, with its defaults (the one place they live: ``steps`` is 50 for
Stable Diffusion inpainting and 500 for InstructPix2Pix, paper 001 sec. 4.1). The group is
shared by every backend and by stage ``generate`` itself (``m``, ``shards``, ...), so each
class reads its own fields and leaves the rest. Torch-free: the registry names these classes
(:attr:`biaslab.registry.Entry.settings`) and ``biaslab plan`` checks them without loading a
backend.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["CopyPasteSettings", "SDInpaintSettings", "InstructPix2PixSettings"]


class _FromGroup:
    """``from_group`` / ``from_params`` for a dataclass whose fields are keys of ``generate``."""

    @classmethod
    def from_group(cls, group: Mapping[str, Any] | None):
        """From the ``generate`` mapping: the fields it holds, the defaults for the rest; every
        other key is another backend's or the stage's."""
        g = group or {}
        return cls(**{f.name: g[f.name] for f in fields(cls) if f.name in g})

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None):
        """From the composed params (group ``generate``)."""
        return cls.from_group((params or {}).get("generate"))


@dataclass(frozen=True)
class CopyPasteSettings(_FromGroup):
    """Backend ``copy_paste``: a donor person of the target group pasted into the inpainted
    hole (:class:`biaslab.counterfactual.copy_paste.CopyPasteBackend`).

    Attributes:
        donor_splits: the splits donors come from (None: every split); donor_single_person:
            only images with one person donate.
        inpaint_radius (px), inpaint_method (``telea`` / ``ns``): OpenCV's inpainting of the
            removed person.
        feather_px: the pasted person's edge feathering.
        extent_weight: the body-extent mismatch's weight in the donor ranking.
    """
    donor_splits: tuple[str, ...] | None = ("train",)
    donor_single_person: bool = True
    inpaint_radius: float = 5.0
    inpaint_method: str = "telea"
    feather_px: float = 2.0
    extent_weight: float = 1.0

    def __post_init__(self):
        if self.donor_splits is not None:
            object.__setattr__(self, "donor_splits", tuple(self.donor_splits))


@dataclass(frozen=True)
class SDInpaintSettings(_FromGroup):
    """Backend ``sd_inpaint``: Stable Diffusion inpainting of the person's mask
    (:class:`biaslab.counterfactual.sd_inpaint.SDInpaintBackend`).

    Attributes:
        model: checkpoint (hub name or local directory; None: the stage says it is needed).
        steps: denoising steps; resolution: the working long side (px); batch_size: images
            per pipeline call; feather_px: the mask's edge feathering.
    """
    model: str | None = None
    steps: int = 50
    resolution: int = 512
    batch_size: int = 4
    feather_px: float = 2.0


@dataclass(frozen=True)
class InstructPix2PixSettings(_FromGroup):
    """Backend ``instruct_pix2pix``: GenSynth's editor on the person's box (paper 001
    sec. 4.1, :class:`biaslab.counterfactual.instruct_pix2pix.InstructPix2PixBackend`).

    Attributes:
        model: checkpoint (hub name or local directory).
        steps: denoising steps (paper 001: 500); resolution: the working long side (px).
        image_guidance_scale: the image guidance (paper 001: 1.5).
        guidance_scales: the text guidance scales, one candidate each (paper 001: 9.5, 15).
        batch_size: images per pipeline call.
    """
    model: str | None = None
    steps: int = 500
    resolution: int = 512
    image_guidance_scale: float = 1.5
    guidance_scales: tuple[float, ...] = (1.0,)
    batch_size: int = 4

    def __post_init__(self):
        object.__setattr__(self, "guidance_scales",
                           tuple(float(g) for g in self.guidance_scales or (1.0,)))
