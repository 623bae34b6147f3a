"""Offline CLIP-style scorer for prompt adherence (paper 000, sec. 2.3, Eq. 4) built LiT-style.

No pretrained CLIP weights are installed offline, so the tiny tier builds a joint
image-text space the way LiT does (Zhai et al. 2022, "Locked-image Tuning"): both towers are
frozen pretrained encoders -- EfficientNet-Lite0 (1280-d pooled ImageNet features) for images and
MiniLM (384-d mean-pooled sentence embeddings) for texts, see :mod:`biaslab.models.features` -- and only
two projections into a shared ``proj_dim`` space plus a temperature are trained, with the
symmetric InfoNCE loss of CLIP (Radford et al. 2021, Fig. 3) on real caption-image pairs:

    logits = exp(t) * P_img(x) . P_txt(y)^T          (b, b), rows/cols L2-normalised
    loss   = (CE(logits, arange(b)) + CE(logits^T, arange(b))) / 2

``exp(t)`` is learnable (initialised to 1/0.07 as in CLIP, clamped to <= 100). Each epoch draws one
random caption per training image, so a batch never holds two captions of the same image (no
false negatives). Image features are standardised with the training mean/std (std floored at
0.1 x its mean over dimensions; stored with the model). AdamW, one-cycle learning rate. Early
stopping keeps the epoch with the best validation mean R@1 (image->text and text->image).

:class:`LiTScorer` satisfies ``biaslab.metrics.quality.ClipScorer`` (``encode_images(paths)``,
``encode_texts(texts)`` -> (n, d)), so ``clip_score_with(scorer, ...)`` works with it (pass
``prefix=""`` unless the scorer was trained with ``prefix_prob > 0``: the captions it saw had no
"A photo depicts" prefix). :func:`load_scorer` returns a LiTScorer for a local LiT directory and
defers every other name / directory to ``quality.HFClipScorer`` (paper tier, real CLIP).

The similarity is ``s_prompt = phi(x) . psi(t)`` of Eq. 4 with phi, psi the projected,
normalised towers (cosine in [-1, 1]).
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from biaslab.models.features import (DEFAULT_IMAGE_ENCODER, DEFAULT_TEXT_ENCODER,
                                     load_image_encoder, load_text_encoder, save_safetensors)
from biaslab.models.settings import ScorerSettings
from biaslab.runtime.io import InputError, write_json

CONFIG_FILE = "lit_config.json"
WEIGHTS_FILE = "lit_heads.safetensors"


# --------------------------------------------------------------------------- retrieval metric
def retrieval_recall(img_emb: np.ndarray, txt_emb: np.ndarray, txt_image: np.ndarray,
                     ks: Sequence[int] = (1, 5)) -> dict[str, float]:
    """Image->text and text->image Recall@k over a gallery of ``n_i`` images and ``n_t`` texts.

    Args:
        img_emb: (n_i, d) image embeddings; txt_emb: (n_t, d) text embeddings (cosine is taken).
        txt_image: (n_t,) int, index (0..n_i-1) of the image each text describes.
        ks: cut-offs.

    Returns (fractions in [0, 1]):
        ``i2t_R@k``: share of images with at least one of their own texts among the k most
        similar texts (COCO 5k protocol); ``t2i_R@k``: share of texts whose image is among the k
        most similar images; ``chance_i2t_R@k``: expected i2t R@k of a random ranking
        (hypergeometric: mean over images of 1 - C(n_t - c_i, k) / C(n_t, k), c_i = own texts);
        ``chance_t2i_R@k`` = min(k, n_i) / n_i. Ties are broken by index (stable sort).

    Raises ``ValueError`` for mismatched shapes or out-of-range indices.
    """
    img = l2(np.asarray(img_emb, np.float64))
    txt = l2(np.asarray(txt_emb, np.float64))
    txt_image = np.asarray(txt_image, np.int64)
    n_i, n_t = len(img), len(txt)
    if img.ndim != 2 or txt.ndim != 2 or img.shape[1] != txt.shape[1] or len(txt_image) != n_t:
        raise ValueError(f"shapes: images {img.shape}, texts {txt.shape}, "
                         f"txt_image {txt_image.shape}")
    if n_i == 0 or n_t == 0:
        raise ValueError("empty gallery")
    if txt_image.min() < 0 or txt_image.max() >= n_i:
        raise ValueError("txt_image has indices outside 0..n_images-1")
    sim = img @ txt.T                                      # (n_i, n_t)
    out: dict[str, float] = {}
    # text -> image: rank of the true image for every text
    s_true = sim[txt_image, np.arange(n_t)]
    rank_t2i = (sim.T > s_true[:, None]).sum(1)            # 0 = best
    # image -> text: best rank among the image's own texts
    order = np.argsort(-sim, axis=1, kind="stable")
    own = txt_image[order] == np.arange(n_i)[:, None]      # (n_i, n_t) bool in ranked order
    first = np.where(own.any(1), own.argmax(1), n_t)
    counts = np.bincount(txt_image, minlength=n_i)
    for k in ks:
        out[f"i2t_R@{k}"] = float((first < k).mean())
        out[f"t2i_R@{k}"] = float((rank_t2i < k).mean())
        out[f"chance_i2t_R@{k}"] = float(np.mean([_p_hit(n_t, c, k) for c in counts]))
        out[f"chance_t2i_R@{k}"] = min(k, n_i) / n_i
    return out


def _p_hit(n: int, c: int, k: int) -> float:
    """P(at least one of c marked items among k drawn without replacement from n)."""
    if c <= 0:
        return 0.0
    if k >= n or n - c < k:
        return 1.0
    return 1.0 - math.exp(math.lgamma(n - c + 1) - math.lgamma(n - c - k + 1)
                          - math.lgamma(n + 1) + math.lgamma(n - k + 1))


def l2(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` scaled to unit L2 norm (norms below 1e-12 treated as 1e-12)."""
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(n, 1e-12)


# --------------------------------------------------------------------------- model
def _heads(d_img: int, d_txt: int, proj_dim: int, dropout: float, init_temperature: float):
    import torch
    from torch import nn

    class LiTHeads(nn.Module):
        """Trainable part: standardise + linear projection per tower, log inverse temperature."""

        def __init__(self):
            super().__init__()
            self.register_buffer("img_mean", torch.zeros(d_img))
            self.register_buffer("img_std", torch.ones(d_img))
            self.drop = nn.Dropout(dropout)
            self.img = nn.Linear(d_img, proj_dim)
            self.txt = nn.Linear(d_txt, proj_dim)
            self.logit_scale = nn.Parameter(torch.tensor(math.log(1.0 / init_temperature)))

        def image(self, x):
            x = (x - self.img_mean) / self.img_std
            return nn.functional.normalize(self.img(self.drop(x)), dim=-1)

        def text(self, y):
            return nn.functional.normalize(self.txt(self.drop(y)), dim=-1)

    return LiTHeads()


def clip_loss(img_z, txt_z, logit_scale):
    """Symmetric InfoNCE (CLIP) on L2-normalised (b, d) batches; pair i <-> i is positive."""
    import torch
    logits = logit_scale.clamp(max=math.log(100.0)).exp() * img_z @ txt_z.T
    target = torch.arange(len(img_z), device=img_z.device)
    return 0.5 * (torch.nn.functional.cross_entropy(logits, target)
                  + torch.nn.functional.cross_entropy(logits.T, target))


class LiTScorer:
    """CLIP-style scorer: frozen image/text encoders + trained LiT projections (see module doc).

    ``encode_images`` / ``encode_texts`` return L2-normalised ``(n, proj_dim)`` float32 arrays.
    The frozen encoders are loaded lazily, on the first call that needs raw images or texts;
    precomputed backbone features (``np.ndarray`` (n, d_img) / (n, d_txt)) skip them.
    """

    #: ``encode_images`` takes precomputed backbone features (n, d_img) as well as images.
    accepts_features = True

    def __init__(self, heads, config: dict, device: str = "cpu"):
        self.heads = heads.eval().to(device)
        self.config = dict(config)
        self.device = device
        self._image_encoder = None
        self._text_encoder = None

    @property
    def dim(self) -> int:
        return int(self.config["proj_dim"])

    # -- towers
    def image_encoder(self):
        if self._image_encoder is None:
            self._image_encoder = load_image_encoder(self.config["image_encoder"], self.device,
                                                     self.config.get("image_size"))
        return self._image_encoder

    def text_encoder(self):
        if self._text_encoder is None:
            self._text_encoder = load_text_encoder(self.config["text_encoder"], self.device)
        return self._text_encoder

    def _project(self, feats: np.ndarray, tower: str) -> np.ndarray:
        import torch
        feats = np.asarray(feats, np.float32)
        want = self.config["d_img" if tower == "image" else "d_txt"]
        if feats.ndim != 2 or feats.shape[1] != want:
            raise ValueError(f"{tower} features must be (n, {want}), got {feats.shape}")
        with torch.inference_mode():
            x = torch.from_numpy(feats).to(self.device)
            z = self.heads.image(x) if tower == "image" else self.heads.text(x)
        return z.float().cpu().numpy()

    def encode_images(self, images, batch_size: int = 32) -> np.ndarray:
        """Images (paths / PIL images) or precomputed backbone features (n, d_img) ->
        (n, proj_dim) L2-normalised."""
        if isinstance(images, np.ndarray) and images.dtype.kind == "f":
            return self._project(images, "image")
        images = list(images)
        if not images:
            return np.zeros((0, self.dim), np.float32)
        return self._project(self.image_encoder().encode(images, batch_size=batch_size), "image")

    def encode_texts(self, texts, batch_size: int = 128) -> np.ndarray:
        """Texts (list[str]) or precomputed text-encoder features (n, d_txt) -> (n, proj_dim)
        L2-normalised."""
        if isinstance(texts, np.ndarray) and texts.dtype.kind == "f":
            return self._project(texts, "text")
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        # each distinct text encoded once (captioners and prompts repeat texts), in sorted
        # order: the batches, hence the bits, do not depend on the caller's order
        uniq = sorted(set(texts))
        row = {t: k for k, t in enumerate(uniq)}
        enc = self._project(self.text_encoder().encode(uniq, batch_size=batch_size), "text")
        return enc[[row[t] for t in texts]]

    def similarity(self, images, texts) -> np.ndarray:
        """Row-wise cosine ``s_prompt`` (paper 000 Eq. 4) of image i and text i -> (n,) in
        [-1, 1]. Raises ``ValueError`` when the counts differ."""
        a, b = self.encode_images(images), self.encode_texts(texts)
        if len(a) != len(b):
            raise ValueError(f"{len(a)} images but {len(b)} texts")
        return (a * b).sum(1)

    # -- persistence
    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``lit_config.json`` + ``lit_heads.safetensors`` (atomically) into
        ``directory``."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        save_safetensors(self.heads.state_dict(), d / WEIGHTS_FILE)
        write_json(d / CONFIG_FILE, {**self.config, "type": "lit"})
        return d

    @classmethod
    def load(cls, directory: str | os.PathLike, device: str = "cpu") -> "LiTScorer":
        """Load a directory written by :meth:`save`. Raises ``InputError`` if it is not one."""
        from safetensors.torch import load_file

        from biaslab.runtime.io import read_json
        d = Path(directory)
        if not is_lit_dir(d):
            raise InputError(d, f"not a LiT scorer directory (needs {CONFIG_FILE} and "
                                f"{WEIGHTS_FILE})")
        cfg = read_json(d / CONFIG_FILE)
        heads = _heads(cfg["d_img"], cfg["d_txt"], cfg["proj_dim"], cfg.get("dropout", 0.0),
                       cfg.get("init_temperature", 0.07))
        heads.load_state_dict(load_file(str(d / WEIGHTS_FILE)), strict=True)
        return cls(heads, cfg, device=device)

    @property
    def temperature(self) -> float:
        return float(1.0 / math.exp(min(float(self.heads.logit_scale.detach()), math.log(100.0))))

    def __repr__(self) -> str:
        c = self.config
        return (f"LiTScorer(image_encoder={c['image_encoder']!r}, text_encoder="
                f"{c['text_encoder']!r}, proj_dim={c['proj_dim']})")


def is_lit_dir(path: str | os.PathLike) -> bool:
    p = Path(path)
    return (p / CONFIG_FILE).is_file() and (p / WEIGHTS_FILE).is_file()


def load_scorer(name_or_dir: str | os.PathLike, device: str = "cpu", **kwargs):
    """A ``ClipScorer``: :class:`LiTScorer` for a local LiT directory, else
    ``biaslab.metrics.quality.HFClipScorer(name_or_dir, device=device, **kwargs)`` (a Hugging
    Face CLIP name or ``save_pretrained`` directory; paper tier)."""
    if is_lit_dir(name_or_dir):
        return LiTScorer.load(name_or_dir, device=device)
    from biaslab.metrics.quality import HFClipScorer
    return HFClipScorer(str(name_or_dir), device=device, **kwargs)


# --------------------------------------------------------------------------- training
def train_lit(img_feats: np.ndarray, txt_feats: np.ndarray, txt_image: np.ndarray,
              train_images: np.ndarray, val_images: np.ndarray | None = None, *,
              settings: ScorerSettings | None = None, image_encoder: str = DEFAULT_IMAGE_ENCODER,
              image_size: int | None = 224, text_encoder: str = DEFAULT_TEXT_ENCODER,
              txt_feats_prefixed: np.ndarray | None = None,
              on_epoch: Callable[[int, dict], None] | None = None,
              num_threads: int | None = None) -> tuple[LiTScorer, list[dict]]:
    """Train LiT projections with the symmetric InfoNCE loss.

    Args:
        img_feats: (n_i, d_img) frozen image features (all images; rows indexed below).
        txt_feats: (n_t, d_txt) frozen text features of all captions.
        txt_image: (n_t,) row of ``img_feats`` that caption j describes.
        train_images / val_images: rows of ``img_feats`` in the train / validation split
            (validation: early stopping on mean of i2t and t2i R@1; ``None`` -> last epoch).
        settings: :class:`biaslab.models.settings.ScorerSettings` (None: its defaults; the
            stage's from params ``scorer``). The batch size is capped
            at ``n_train // 4`` (>= 4 steps per epoch; recorded as ``effective_batch_size``).
            AdamW with a one-cycle learning-rate schedule (10 % warm-up) over all epochs.
        txt_feats_prefixed: optional (n_t, d_txt) features of ``prefix + caption``; with
            ``prefix_prob`` p > 0 a training caption uses them with probability p (makes the
            scorer robust to CLIPScore's "A photo depicts" prefix).
        on_epoch: called as ``on_epoch(epoch, record)`` after each epoch (for DVCLive).

    Returns ``(scorer, history)``; history: one dict per epoch with ``epoch``, ``loss`` (mean
    train loss), ``temperature``, ``val_R@1`` (mean of both directions, when val is given),
    ``seconds``. The scorer holds the best-validation weights.

    Raises ``ValueError`` for inconsistent shapes or a training split without captions.
    """
    import torch
    from biaslab.models.features import set_threads
    st = ScorerSettings() if settings is None else settings
    set_threads(num_threads)
    img_feats = np.asarray(img_feats, np.float32)
    txt_feats = np.asarray(txt_feats, np.float32)
    txt_image = np.asarray(txt_image, np.int64)
    if len(txt_feats) != len(txt_image):
        raise ValueError(f"{len(txt_feats)} text features but {len(txt_image)} txt_image rows")
    if txt_feats_prefixed is not None and np.shape(txt_feats_prefixed) != txt_feats.shape:
        raise ValueError("txt_feats_prefixed must have the shape of txt_feats")
    caps_list: dict[int, list[int]] = {}
    for j, i in enumerate(txt_image):
        caps_list.setdefault(int(i), []).append(j)
    caps_of = {i: np.asarray(v) for i, v in caps_list.items()}
    train_images = np.array([i for i in np.asarray(train_images, np.int64) if int(i) in caps_of])
    if len(train_images) < 2:
        raise ValueError("need at least 2 training images with captions")

    torch.manual_seed(int(st.seed))
    rng = np.random.default_rng(int(st.seed))
    heads = _heads(img_feats.shape[1], txt_feats.shape[1], int(st.proj_dim),
                   float(st.dropout), float(st.init_temperature))
    tr = img_feats[train_images]
    heads.img_mean.copy_(torch.from_numpy(tr.mean(0)))
    sd = tr.std(0)  # floor: a dimension (nearly) constant in training must not explode later
    heads.img_std.copy_(torch.from_numpy(np.maximum(sd, 0.1 * sd.mean() + 1e-6)))
    opt = torch.optim.AdamW(heads.parameters(), lr=float(st.lr),
                            weight_decay=float(st.weight_decay))
    epochs = int(st.epochs)
    # at least 4 steps per epoch: small datasets (ci scale) would otherwise take 1-2 steps
    # per epoch and early stopping would end training before it starts
    bs = max(2, min(int(st.batch_size), len(train_images) // 4))
    steps = epochs * math.ceil(len(train_images) / bs)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=float(st.lr), total_steps=steps,
                                                pct_start=0.1) if steps > 1 else None
    X = torch.from_numpy(img_feats)
    T = torch.from_numpy(txt_feats)
    TP = torch.from_numpy(np.asarray(txt_feats_prefixed, np.float32)) \
        if txt_feats_prefixed is not None else None
    config = {"image_encoder": image_encoder, "image_size": image_size,
              "text_encoder": text_encoder, "d_img": int(img_feats.shape[1]),
              "d_txt": int(txt_feats.shape[1]), **st.config(),
              "effective_batch_size": bs, "n_train_images": int(len(train_images))}
    scorer = LiTScorer(heads, config)

    val = None
    if val_images is not None:
        val_images = np.array([i for i in np.asarray(val_images, np.int64) if int(i) in caps_of])
        if len(val_images):
            pos = {int(i): k for k, i in enumerate(val_images)}
            vt = np.concatenate([caps_of[int(i)] for i in val_images])
            val = (val_images, vt, np.array([pos[int(txt_image[j])] for j in vt]))

    history: list[dict] = []
    best, best_state, bad = -1.0, None, 0
    for epoch in range(epochs):
        t0 = time.perf_counter()
        heads.train()
        perm = rng.permutation(train_images)
        caps = np.array([rng.choice(caps_of[int(i)]) for i in perm])
        use_prefix = (rng.random(len(caps)) < float(st.prefix_prob)) \
            if TP is not None and float(st.prefix_prob) > 0 else np.zeros(len(caps), bool)
        losses = []
        for s in range(0, len(perm), bs):
            bi, bc, bp = perm[s:s + bs], caps[s:s + bs], use_prefix[s:s + bs]
            if len(bi) < 2:
                continue
            y = T[bc]
            if bp.any():
                y = y.clone()
                y[torch.from_numpy(bp)] = TP[bc[bp]]
            loss = clip_loss(heads.image(X[bi]), heads.text(y), heads.logit_scale)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            losses.append(float(loss.detach()) * len(bi))
        heads.eval()
        rec = {"epoch": epoch, "loss": float(np.sum(losses) / len(perm)),
               "temperature": scorer.temperature}
        if val is not None:
            r = retrieval_recall(scorer.encode_images(img_feats[val[0]]),
                                 scorer.encode_texts(txt_feats[val[1]]), val[2], ks=(1,))
            rec["val_R@1"] = 0.5 * (r["i2t_R@1"] + r["t2i_R@1"])
            if rec["val_R@1"] > best:
                best, bad = rec["val_R@1"], 0
                best_state = {k: v.detach().clone() for k, v in heads.state_dict().items()}
            else:
                bad += 1
        rec["seconds"] = time.perf_counter() - t0
        history.append(rec)
        if on_epoch is not None:
            on_epoch(epoch, rec)
        if val is not None and bad >= int(st.patience):
            break
    if best_state is not None:
        heads.load_state_dict(best_state)
        scorer.config["best_epoch"] = int(max(history, key=lambda r: r.get("val_R@1", -1))
                                          ["epoch"])
    heads.eval()
    return scorer, history


__all__ = ["LiTScorer", "load_scorer", "train_lit", "retrieval_recall", "clip_loss",
           "is_lit_dir"]
