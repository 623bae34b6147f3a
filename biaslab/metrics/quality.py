"""Caption quality: COCO reference metrics (BLEU, METEOR, ROUGE-L, CIDEr via pycocoevalcap)
and CLIPScore (Hessel et al. 2021).

The papers report BLEU-4, CIDEr, METEOR (thesis Table 2.1, LIBRA Table 2) and CLIPScore
(LIBRA Table 2, paper 000 Table 2) x100; ``coco_caption_scores`` returns x100 by default
(``scale``), ``clip_score`` returns the unscaled Hessel et al. value (multiply by 100 to
compare with the tables).
"""
from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

SUPPORTED_METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr")


def _require_java() -> None:
    if shutil.which("java") is None:
        raise RuntimeError(
            "pycocoevalcap needs Java (PTBTokenizer and METEOR run as Java programs) but "
            "`java` is not on PATH. Run the set-up in the README (install a Java runtime, e.g. "
            "`apt-get install -y openjdk-17-jre-headless`) and retry.")


def coco_caption_scores(predictions: Mapping[int, str], references: Mapping[int, Sequence[str]],
                        metrics: Sequence[str] = ("BLEU-4", "CIDEr", "METEOR"),
                        scale: float = 100.0) -> dict:
    """Corpus-level COCO caption metrics with the official pycocoevalcap code.

    Captions are tokenised with the Stanford PTBTokenizer (lower-cased, punctuation removed),
    as the COCO evaluation server does; then BLEU-n (Papineni et al.; pycocoevalcap's
    corpus-level "closest" reference length), METEOR 1.5, ROUGE-L and CIDEr-D (document
    frequencies from the given references, as in pycocoevalcap).

    Args:
        predictions: image id -> one generated caption.
        references: image id -> list of reference captions (>= 1); must cover every
            prediction id (extra reference ids are ignored).
        metrics: names from ``SUPPORTED_METRICS`` (SPICE is not supported: it needs the
            Stanford CoreNLP models download).
        scale: multiplier of the returned scores (default 100, as in the papers' tables).

    Returns:
        dict metric name -> corpus score x ``scale``.

    Raises:
        ValueError: empty predictions, unknown metric, a prediction without references, a
            non-string caption.
        RuntimeError: Java is not installed.
    """
    metrics = list(metrics)
    bad = [m for m in metrics if m not in SUPPORTED_METRICS]
    if bad:
        raise ValueError(f"unsupported metrics {bad}; supported: {SUPPORTED_METRICS}")
    if not predictions:
        raise ValueError("no predictions")
    missing = [i for i in predictions if not references.get(i)]
    if missing:
        raise ValueError(f"{len(missing)} predictions have no references, e.g. {missing[:3]}")
    for i, c in predictions.items():
        if not isinstance(c, str):
            raise ValueError(f"prediction for {i!r} is not a string")
    _require_java()

    ids = list(predictions)
    # pycocoevalcap indexes by key; use positions to avoid key-type surprises.
    gts_raw = {j: [{"caption": str(r)} for r in references[i]] for j, i in enumerate(ids)}
    res_raw = {j: [{"caption": predictions[i]}] for j, i in enumerate(ids)}
    # one PTBTokenizer run (one JVM start) for references and predictions: keys n + j are
    # the predictions (the tokenizer treats every caption independently)
    n = len(ids)
    both = tokenize_all({**gts_raw, **{n + j: v for j, v in res_raw.items()}})
    gts = {j: both[j] for j in range(n)}
    res = {j: both[n + j] for j in range(n)}

    out: dict[str, float] = {}
    bleu_n = [m for m in metrics if m.startswith("BLEU-")]
    if bleu_n:
        from pycocoevalcap.bleu.bleu import Bleu
        scores, _ = Bleu(4).compute_score(gts, res, verbose=0)
        for m in bleu_n:
            out[m] = scale * float(scores[int(m[-1]) - 1])
    if "CIDEr" in metrics:
        from pycocoevalcap.cider.cider import Cider
        out["CIDEr"] = scale * float(Cider().compute_score(gts, res)[0])
    if "ROUGE-L" in metrics:
        from pycocoevalcap.rouge.rouge import Rouge
        out["ROUGE-L"] = scale * float(Rouge().compute_score(gts, res)[0])
    if "METEOR" in metrics:
        out["METEOR"] = scale * _meteor(gts, res)
    return {m: out[m] for m in metrics}


_METEOR: tuple[int, object] | None = None     # (pid, pycocoevalcap Meteor) of this process


def tokenize_all(captions: dict) -> dict:
    """``PTBTokenizer().tokenize`` (pycocoevalcap): key -> list of tokenised captions."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
    return PTBTokenizer().tokenize(captions)


def _meteor(gts: dict, res: dict) -> float:
    """METEOR via pycocoevalcap's jar. One METEOR server per process, reused across calls:
    its first score costs ~9 s (JVM start and the paraphrase tables), later ones ~0.3 s, and
    each call is scored independently (identical to a fresh server; tested). A forked child
    starts its own server (the pipes of the parent's are not shared). The Java process is
    shut down at exit (pycocoevalcap relies on ``__del__``, which can hang or leak it)."""
    global _METEOR
    import os
    if _METEOR is None or _METEOR[0] != os.getpid():
        import atexit
        from pycocoevalcap.meteor.meteor import Meteor
        _METEOR = (os.getpid(), Meteor())
        atexit.register(close_meteor)
    score, _ = _METEOR[1].compute_score(gts, res)
    return float(score)


def close_meteor() -> None:
    """Shut down this process's METEOR server, if any (a later score starts a new one)."""
    global _METEOR
    import os
    if _METEOR is None or _METEOR[0] != os.getpid():
        return
    m = _METEOR[1]
    _METEOR = None
    p = m.meteor_p
    try:
        p.stdin.close()
    except Exception:
        pass
    p.kill()
    p.wait()
    m.meteor_p = _ClosedProcess()


class _ClosedProcess:
    """Stand-in so pycocoevalcap's ``Meteor.__del__`` is a no-op after we closed the jar."""

    class _Nothing:
        def close(self):
            pass

    stdin = _Nothing()

    def kill(self):
        pass

    def wait(self):
        pass


# --------------------------------------------------------------------------------------------
# CLIPScore
# --------------------------------------------------------------------------------------------

def clip_score(image_emb, text_emb, w: float = 2.5, per_item: bool = False):
    """CLIPScore (Hessel et al. 2021, Eq. 1): ``CLIP-S(c, v) = w * max(cos(c, v), 0)``, averaged
    over the pairs.

    Args:
        image_emb: array (n, d) of image embeddings (any norm; cosine is taken).
        text_emb: array (n, d) of caption embeddings, row i paired with image row i.
        w: re-scaling weight (Hessel et al.: 2.5).
        per_item: also return the (n,) per-pair scores.

    Returns:
        mean CLIP-S (float, in [0, w]; not x100), or ``(mean, per_pair_array)`` if
        ``per_item``.

    Raises:
        ValueError: shapes differ / not 2-D / empty, or a zero-norm embedding.
    """
    v = np.asarray(image_emb, dtype=np.float64)
    c = np.asarray(text_emb, dtype=np.float64)
    if v.ndim != 2 or v.shape != c.shape or v.shape[0] == 0:
        raise ValueError(f"embeddings must be non-empty 2-D arrays of equal shape, got "
                         f"{v.shape} and {c.shape}")
    nv = np.linalg.norm(v, axis=1)
    nc = np.linalg.norm(c, axis=1)
    if (nv == 0).any() or (nc == 0).any():
        raise ValueError("zero-norm embedding: cosine undefined")
    cos = (v * c).sum(axis=1) / (nv * nc)
    per = w * np.maximum(cos, 0.0)
    mean = float(per.mean())
    return (mean, per) if per_item else mean


@runtime_checkable
class ClipScorer(Protocol):
    """Anything that embeds images and texts into CLIP's joint space."""

    def encode_images(self, paths: Sequence[str]) -> np.ndarray:
        """(n, d) embeddings of the images at ``paths``."""
        ...

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) embeddings of ``texts``."""
        ...


class HFClipScorer:
    """``ClipScorer`` backed by Hugging Face ``transformers`` ``CLIPModel`` (imported lazily).

    Args:
        name_or_dir: a model id or a local directory saved with ``save_pretrained`` (the
            papers use ViT-B/32: ``openai/clip-vit-base-patch32``). Offline machines need a
            local directory.
        device: torch device string.
        batch_size: images / texts per forward pass.
        processor: optional CLIPProcessor-like object (``processor(images=..., text=...)``);
            default ``CLIPProcessor.from_pretrained(name_or_dir)``.
        tokenizer: optional callable ``list[str] -> dict of tensors`` (input_ids,
            attention_mask) used for texts instead of the processor's tokenizer (for models
            saved without tokenizer files).
        max_length: text truncation length (CLIP: 77 tokens).
    """

    def __init__(self, name_or_dir: str, device: str = "cpu", batch_size: int = 32,
                 processor=None, tokenizer: Callable | None = None, max_length: int = 77):
        from transformers import CLIPModel

        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.model = CLIPModel.from_pretrained(name_or_dir).to(device).eval()
        self.tokenizer = tokenizer
        if processor is None:
            from transformers import CLIPProcessor
            processor = CLIPProcessor.from_pretrained(name_or_dir)
        self.processor = processor

    @staticmethod
    def _features(out):
        # transformers >= 5 returns a ModelOutput whose pooler_output is the projection.
        return out if hasattr(out, "detach") else out.pooler_output

    def encode_images(self, paths: Sequence[str]) -> np.ndarray:
        """(n, d) float32 image embeddings (projected, not normalised)."""
        import torch
        from PIL import Image

        feats = []
        for s in range(0, len(paths), self.batch_size):
            imgs = []
            for p in paths[s:s + self.batch_size]:
                with Image.open(p) as im:
                    imgs.append(im.convert("RGB"))
            inp = self.processor(images=imgs, return_tensors="pt")
            with torch.no_grad():
                f = self._features(self.model.get_image_features(
                    pixel_values=inp["pixel_values"].to(self.device)))
            feats.append(f.float().cpu().numpy())
        d = self.model.config.projection_dim
        return np.concatenate(feats) if feats else np.zeros((0, d), np.float32)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) float32 text embeddings (projected, not normalised); truncated to
        ``max_length`` tokens."""
        import torch

        feats = []
        for s in range(0, len(texts), self.batch_size):
            batch = list(texts[s:s + self.batch_size])
            if self.tokenizer is not None:
                inp = self.tokenizer(batch)
            else:
                inp = self.processor(text=batch, return_tensors="pt", padding=True,
                                     truncation=True, max_length=self.max_length)
            kw = {"input_ids": inp["input_ids"].to(self.device)}
            if "attention_mask" in inp:
                kw["attention_mask"] = inp["attention_mask"].to(self.device)
            with torch.no_grad():
                f = self._features(self.model.get_text_features(**kw))
            feats.append(f.float().cpu().numpy())
        d = self.model.config.projection_dim
        return np.concatenate(feats) if feats else np.zeros((0, d), np.float32)


def clip_score_with(scorer: ClipScorer, image_paths: Sequence[str], captions: Sequence[str],
                    w: float = 2.5, prefix: str = "A photo depicts ") -> float:
    """CLIPScore of captions for images with a ``ClipScorer`` (Hessel et al. 2021).

    Hessel et al. prefix every candidate with "A photo depicts" before encoding (sec. 3 of their
    paper; their reference implementation uses ``"A photo depicts "``); pass ``prefix=""`` to
    disable.

    Args:
        scorer: a ``ClipScorer`` (e.g. ``HFClipScorer``).
        image_paths: n image files.
        captions: n captions, caption i for image i.
        w: CLIPScore weight (2.5).
        prefix: text prepended to every caption.

    Returns:
        mean CLIP-S (unscaled; the papers' tables show x100).

    Raises:
        ValueError: lengths differ or are zero.
    """
    if len(image_paths) != len(captions) or not captions:
        raise ValueError(f"need equally many (>0) images and captions, got {len(image_paths)} "
                         f"and {len(captions)}")
    img = scorer.encode_images(list(image_paths))
    txt = scorer.encode_texts([prefix + c for c in captions])
    return clip_score(img, txt, w=w)
