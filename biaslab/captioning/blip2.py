"""BLIP-2 (Li et al. 2023) for paper 000 Table 2's "BLIP-2" column group, paper tier only:
``Salesforce/blip2-opt-2.7b`` through Hugging Face ``from_pretrained`` (GPU + network or the
HF cache; not in the offline DAG). Tested offline with a tiny random
``Blip2ForConditionalGeneration`` saved by ``save_pretrained`` (tests/test_captioning.py), as
the other paper-tier backbones are (tests/test_backbones.py).

* :func:`load`: model + processor from a hub name or a local directory.
* :func:`caption`: images -> captions (beam search, no prompt: BLIP-2's captioning mode).
* :func:`finetune_step`: one AdamW step of the caption loss on (images, captions); paper 000
  app. B.2: "AdamW ... learning rate of 2e-6 ... batch size of 8" for BLIP-2
  (:func:`make_optimizer`, :data:`PAPER_LR`, :data:`PAPER_BATCH_SIZE`). Which weights train
  (the paper does not say): as BLIP-2's own captioning fine-tuning (Li et al. 2023 sec. 4.2),
  the language model stays frozen and the Q-Former, query tokens and language projection are
  trained; ``train_vision`` also trains the ViT (BLIP-2 fine-tunes it for COCO captioning;
  off by default to fit a 2.7B model's optimiser state on one GPU).
"""
from __future__ import annotations

import os
from collections.abc import Sequence

from biaslab.io import InputError

PAPER_MODEL = "Salesforce/blip2-opt-2.7b"
PAPER_LR = 2e-6
PAPER_BATCH_SIZE = 8

__all__ = ["PAPER_MODEL", "PAPER_LR", "PAPER_BATCH_SIZE", "load", "caption", "trainable",
           "make_optimizer", "finetune_step"]


def load(name: str | os.PathLike = PAPER_MODEL, local_files_only: bool = True,
         device: str = "cpu", dtype=None):
    """``(model, processor)``: ``Blip2ForConditionalGeneration`` and ``Blip2Processor`` from
    ``name`` (hub id or directory written by ``save_pretrained``), model in eval mode on
    ``device`` (``dtype`` e.g. ``torch.float16`` on GPU; None = the checkpoint's).
    ``local_files_only`` (default True): nothing is downloaded. Raises ``InputError`` naming
    ``name`` when it cannot be loaded."""
    from transformers import Blip2ForConditionalGeneration, Blip2Processor
    try:
        processor = Blip2Processor.from_pretrained(name, local_files_only=local_files_only)
        kw = {"dtype": dtype} if dtype is not None else {}
        model = Blip2ForConditionalGeneration.from_pretrained(
            name, local_files_only=local_files_only, **kw)
    except (OSError, ValueError) as e:     # ValueError: huggingface_hub's HFValidationError
        hint = (" (not available offline: a local directory, the Hugging Face cache, or "
                "local_files_only=False with network)") if local_files_only else ""
        raise InputError(name, f"cannot load BLIP-2{hint}: {e}") from e
    return model.to(device).eval(), processor


def _images(images):
    from PIL import Image
    return [im.convert("RGB") if isinstance(im, Image.Image) else Image.open(im).convert("RGB")
            for im in images]


def caption(model, processor, images: Sequence, max_new_tokens: int = 30, num_beams: int = 5,
            batch_size: int = 8) -> list[str]:
    """One caption per image (paths or PIL images), in order: ``generate`` with no text prompt
    (BLIP-2's captioning use; LAVIS: beam 5, at most 30 tokens), greedy when ``num_beams`` is
    1, deterministic; special tokens dropped and whitespace stripped."""
    import torch
    out: list[str] = []
    model.eval()
    dev = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    with torch.inference_mode():
        for s in range(0, len(images), max(1, int(batch_size))):
            ims = _images(images[s:s + batch_size])
            inputs = processor(images=ims, return_tensors="pt").to(dev)
            inputs["pixel_values"] = inputs["pixel_values"].to(dtype)
            ids = model.generate(**inputs, max_new_tokens=int(max_new_tokens),
                                 num_beams=int(num_beams), do_sample=False)
            prompt = inputs.get("input_ids")
            if prompt is not None and ids.shape[1] > prompt.shape[1] and bool(
                    (ids[:, :prompt.shape[1]] == prompt).all()):
                ids = ids[:, prompt.shape[1]:]                     # drop an echoed prompt
            out += [t.strip() for t in processor.batch_decode(ids, skip_special_tokens=True)]
    return out


def trainable(model, train_vision: bool = False) -> list:
    """Set ``requires_grad``: Q-Former, query tokens and language projection (+ the vision
    model when ``train_vision``) train, the language model is frozen (module docstring).
    Returns the trainable parameters."""
    for p in model.parameters():
        p.requires_grad_(False)
    mods = [model.qformer, model.language_projection] + ([model.vision_model]
                                                         if train_vision else [])
    params = [p for m in mods for p in m.parameters()] + [model.query_tokens]
    for p in params:
        p.requires_grad_(True)
    return params


def make_optimizer(model, lr: float = PAPER_LR, weight_decay: float = 0.05,
                   train_vision: bool = False):
    """AdamW over :func:`trainable` (paper 000 app. B.2: lr 2e-6; weight decay 0.05 as
    BLIP-2's fine-tuning)."""
    import torch
    return torch.optim.AdamW(trainable(model, train_vision), lr=float(lr),
                             weight_decay=float(weight_decay))


def finetune_step(model, processor, images: Sequence, captions: Sequence[str],
                  optimizer) -> float:
    """One optimiser step of the captioning loss (token cross-entropy of ``captions`` given
    the images; padding and image-query positions carry no loss). Returns the loss (nats per
    token). Raises ``ValueError`` when the numbers of images and captions differ."""
    if len(images) != len(captions) or not len(captions):
        raise ValueError(f"finetune_step needs one caption per image, got {len(images)} "
                         f"images and {len(captions)} captions")
    import torch
    dev = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    eos = processor.tokenizer.eos_token or ""
    inputs = processor(images=_images(images), text=[c.strip() + eos for c in captions],
                       padding=True, return_tensors="pt").to(dev)
    inputs["pixel_values"] = inputs["pixel_values"].to(dtype)
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    img_tok = getattr(model.config, "image_token_id", None)
    if img_tok is None:
        img_tok = getattr(model.config, "image_token_index", None)
    if img_tok is not None:
        labels = labels.masked_fill(labels == int(img_tok), -100)
    model.train()
    out = model(**inputs, labels=labels)
    optimizer.zero_grad(set_to_none=True)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]],
                                   1.0)
    optimizer.step()
    model.eval()
    return float(out.loss.detach())
