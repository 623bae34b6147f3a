"""Counterfactual images of paper 000 (Hirota et al., "Resampled Datasets Are Not Enough",
EMNLP 2024) sec. 2.2: person masks omega (``masks``), prompts t^(g') and m candidates per
(image, group) (``generate``, Eq. 1) with two backends: ``copy_paste`` (CPU, real donors) and
``sd_inpaint`` (diffusers Stable Diffusion inpainting; imported lazily, diffusers optional);
the filters and weighted rank selection of sec. 2.3 (``filters``) and GenSynth's contrast sets
(paper 001 sec. 4, ``contrast``).
"""
from biaslab.counterfactual.copy_paste import (CopyPasteBackend, donor_pool, paste,
                                               remove_persons)
from biaslab.counterfactual.generate import (GROUPS, build_work, candidate_seed,
                                             generate_candidates, guidance_scale_for,
                                             make_prompt, make_prompts, shard_of)
from biaslab.counterfactual.masks import (area_scale, build_masks, dilate, keypoint_silhouette,
                                          load_mask, person_mask, select_persons)

__all__ = ["CopyPasteBackend", "donor_pool", "paste", "remove_persons", "GROUPS", "build_work",
           "candidate_seed", "generate_candidates", "guidance_scale_for", "make_prompt",
           "make_prompts", "shard_of", "area_scale", "build_masks", "dilate",
           "keypoint_silhouette", "load_mask", "person_mask", "select_persons",
           "SDInpaintBackend", "save_tiny_pipeline"]


def __getattr__(name):  # sd_inpaint needs torch/diffusers: import on demand
    if name in ("SDInpaintBackend", "save_tiny_pipeline"):
        from biaslab.counterfactual import sd_inpaint
        return getattr(sd_inpaint, name)
    raise AttributeError(name)
