"""Person masks from Segment Anything inside the person's box (paper 000 app. A.1: "For
OpenImages, we use person bounding boxes presented in ... MIAP annotations, then we generate
person masks within the boxes using Segment Anything Model"; Kirillov et al. 2023).

The paper tier's mask source where the data gives boxes only (``masks.shape: sam``,
``masks.sam_model``: a Hugging Face SAM checkpoint name or local directory, e.g.
``facebook/sam-vit-base``), through ``transformers``' ``SamModel`` / ``SamProcessor``: every
selected person's box is one box prompt; of SAM's three masks per prompt the one with the
highest predicted IoU is kept and cut to the box ("within the boxes"). An empty result falls
back to the box itself (``build_masks`` counts it as a ``box`` person). Weights are never
downloaded here: the checkpoint must be in the local Hugging Face cache or a directory.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class SamBoxSegmenter:
    """``segmenter(image, boxes) -> list of masks``: SAM with one box prompt per person.

    Args:
        model: a SAM checkpoint (Hugging Face name or directory with ``config.json``,
            weights and ``processor_config.json``).
        device: torch device; None = CUDA when available, else CPU.
        model_obj, processor: an already built ``SamModel`` / ``SamProcessor`` (tests: a
            randomly initialised small SAM from its config); ``model`` is then only a label.
    """

    def __init__(self, model: str, device: str | None = None, model_obj=None, processor=None):
        import torch
        from transformers import SamModel, SamProcessor
        self.name = str(model)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.processor = processor if processor is not None else \
            SamProcessor.from_pretrained(model)
        self.model = (model_obj if model_obj is not None else
                      SamModel.from_pretrained(model)).to(self.device).eval()

    def __call__(self, image: np.ndarray, boxes: Sequence[Sequence[float]]) -> list[np.ndarray]:
        """Masks of the persons in ``boxes``.

        Args:
            image: ``(H, W, 3)`` uint8 RGB.
            boxes: person boxes ``(x, y, w, h)`` in pixels of ``image``.

        Returns:
            one ``(H, W)`` uint8 0/1 mask per box, zero outside the box (possibly all zero).
        """
        import torch
        from PIL import Image
        if not len(boxes):
            return []
        h, w = image.shape[:2]
        xyxy = [[float(x), float(y), float(x + bw), float(y + bh)] for x, y, bw, bh in boxes]
        inputs = self.processor(images=Image.fromarray(image), input_boxes=[xyxy],
                                return_tensors="pt").to(self.device)
        with torch.no_grad():
            out = self.model(**inputs, multimask_output=True)
        masks = self.processor.image_processor.post_process_masks(
            out.pred_masks.cpu(), inputs["original_sizes"].cpu(),
            inputs["reshaped_input_sizes"].cpu())[0]          # (boxes, 3, H, W) bool
        best = out.iou_scores[0].argmax(dim=-1).cpu()           # (boxes,)
        from biaslab.counterfactual.masks import box_mask
        return [masks[k, int(best[k])].numpy().astype(np.uint8) & box_mask(b, h, w)
                for k, b in enumerate(boxes)]
