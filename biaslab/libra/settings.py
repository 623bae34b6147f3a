"""The settings of LIBRA's components (paper 003): biased caption synthesis (BCS), T5
fine-tuning and the debiasing caption generator (DCG), with the rules of their params
(``libra``, ``libra.t5``, ``libra.dcg``).

Apart from :mod:`biaslab.libra.bcs`, :mod:`~biaslab.libra.t5` and :mod:`~biaslab.libra.dcg`
(which re-export these names) because those import torch, and
:func:`biaslab.runtime.validate.check_params` applies the same rules at every stage's start
without it: one place for each rule, used by the stage and by the start-up check.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from biaslab.runtime.settings import from_params

TINY = "tiny"
GENERATE = "generate"
EDIT = "edit"
FEATURES = "features"
PIXELS = "pixels"
#: Table 1 of paper 003 (Swap : T5 : Merged).
TABLE1_MIXES = {"1:1:0": {"swap": 1, "t5": 1, "merged": 0},
                "0:1:1": {"swap": 0, "t5": 1, "merged": 1},
                "1:2:1": {"swap": 1, "t5": 2, "merged": 1}}
#: ``libra.pos`` / ``libra.source`` / ``libra.t5.format`` / ``libra.t5.optimizer`` values
POS_METHODS = ("auto", "nltk", "wordnet")
SOURCES = ("gendered", "all")
T5_FORMATS = ("sentinel", "reconstruct")
T5_OPTIMIZERS = ("adafactor", "adamw")


# ------------------------------------------------------------------------------ BCS
@dataclass
class BCSSettings:
    """Parameters of the synthesis (defaults = paper 003 where it gives them).

    ``words``: gender word list (supp. 5: ``libra``). ``mask_rate``: fraction of content words
    masked for T5 (Eq. 5: 0.15). ``alpha``: authenticity threshold (supp. Eq. 3: 0.3).
    ``delta``: gender-filter margin (Eq. 6: 0.2). ``mix``: Table 1 ratio (paper: 0:1:1).
    ``target_count``: captions in the mixed output (None: as many as the ratio allows).
    ``samples_per_caption``: T5 samples ``M ~ R`` per source caption (Eq. 5).
    ``top_k``/``temperature``: T5 sampling. ``pos``: ``auto`` | ``nltk`` | ``wordnet``.
    ``source``: ``gendered`` (D_g) or ``all`` (D) for Eq. 5. ``auth_folds``: see module doc.
    ``fill_content_only``: T5 may not fill a content slot with a stop word, number, punctuation
    or gender word (see module doc).
    """
    words: str = "libra"
    mask_rate: float = 0.15
    alpha: float = 0.3
    delta: float = 0.2
    mix: dict = field(default_factory=lambda: dict(TABLE1_MIXES["0:1:1"]))
    target_count: int | None = None
    samples_per_caption: int = 2
    top_k: int = 20
    temperature: float = 1.0
    batch_size: int = 128
    pos: str = "auto"
    source: str = "gendered"
    auth_folds: int = 1
    fill_content_only: bool = True
    seed: int = 0


def _check(cond: bool, param: str, must: str, value) -> None:
    if not cond:
        raise ValueError(f"{param} must be {must}, got {value!r}")


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def bcs_settings(p: Mapping | None) -> BCSSettings:
    """``BCSSettings`` from the ``libra`` params section (unknown keys ignored: the section
    also holds the classifier, T5 and DCG settings). ``mix`` may be a dict or a Table 1 name
    (``"0:1:1"``).

    Raises:
        ValueError: ``"libra.<key> must be ..., got ..."``: ``mix`` not a Table 1 name or a
            mapping of the three types to counts >= 0; ``mask_rate`` not in (0, 1);
            ``alpha``/``delta`` not in [0, 1]; ``samples_per_caption``, ``top_k``,
            ``batch_size``, ``auth_folds`` not integers >= 1; ``temperature`` not > 0;
            ``target_count`` not null or >= 1; ``pos``/``source`` not known; ``seed`` not an
            integer.
    """
    kw = dict(p or {})
    if isinstance(kw.get("mix"), str):
        if kw["mix"] not in TABLE1_MIXES:
            raise ValueError(f"unknown mix {kw['mix']!r}; Table 1 mixes: {list(TABLE1_MIXES)}")
        kw["mix"] = dict(TABLE1_MIXES[kw["mix"]])
    s = from_params(BCSSettings, kw, "libra", unknown="ignore")
    _check(isinstance(s.mix, Mapping) and set(s.mix) == {"swap", "t5", "merged"}
           and all(_num(v) and v >= 0 for v in s.mix.values()), "libra.mix",
           f"a Table 1 mix {list(TABLE1_MIXES)} or counts of swap, t5, merged", s.mix)
    _check(_num(s.mask_rate) and 0 < s.mask_rate < 1, "libra.mask_rate", "in (0, 1)",
           s.mask_rate)
    for k in ("alpha", "delta"):
        v = getattr(s, k)
        _check(_num(v) and 0 <= v <= 1, f"libra.{k}", "in [0, 1]", v)
    for k in ("samples_per_caption", "top_k", "batch_size", "auth_folds"):
        v = getattr(s, k)
        _check(_int(v) and v >= 1, f"libra.{k}", "an integer >= 1", v)
    _check(_num(s.temperature) and s.temperature > 0, "libra.temperature", "> 0",
           s.temperature)
    _check(s.target_count is None or (_int(s.target_count) and s.target_count >= 1),
           "libra.target_count", "null or an integer >= 1", s.target_count)
    _check(s.pos in POS_METHODS, "libra.pos", f"one of {list(POS_METHODS)}", s.pos)
    _check(s.source in SOURCES, "libra.source", f"one of {list(SOURCES)}", s.source)
    _check(_int(s.seed), "libra.seed", "an integer", s.seed)
    return s


# ------------------------------------------------------------------------------ T5
@dataclass
class T5Settings:
    """Hyper-parameters of T5 fine-tuning (supp. 1.2) and of the tiny offline model.

    ``model``: ``"tiny"`` or a Hugging Face T5 name / local directory (paper: ``t5-base``).
    ``mask_rate``: fraction of words masked during fine-tuning (supp. 1.2: 0.1).
    Tiny-model fields (``d_model``, ``d_ff``, ``layers``, ``heads``, ``d_kv``, ``vocab_size``,
    ``min_count``, ``dropout``) are ignored for a pretrained model.
    ``optimizer``: ``adafactor`` (T5's own optimiser, with parameter-scaled updates:
    ``scale_parameter=True, relative_step=False``; essential for a T5 from scratch, whose
    embeddings start at std 1 and barely move under Adam's absolute steps) or ``adamw``;
    ``lr``: peak rate, linear warm-up over ``warmup`` of the steps then linear decay to 0.
    ``pretrain_epochs`` epochs at ``pretrain_mask_rate`` run before the ``epochs`` fine-tuning
    epochs at ``mask_rate`` (one learning-rate schedule over both): the offline tier's stand-in
    for T5's own pre-training (the paper fine-tunes a T5 pre-trained on C4; a tiny T5 from
    scratch learns little from one masked word per caption). 0 for a pretrained model.
    ``format``: ``sentinel`` (T5's span format, the paper's; the decoder emits
    ``<extra_id_i> word``) or ``reconstruct`` (the decoder target is the whole original caption,
    BERT/BART-style denoising, T5 paper sec. 3.3.1; Eq. 1 is the part of the loss on the masked
    words' pieces and the rest teaches copying). A tiny T5 from scratch learns the caption
    language much faster with ``reconstruct`` (every target piece is a training signal), and
    fills are then read from the decoder at the masked positions (``fill_words``).
    """
    model: str = TINY
    d_model: int = 128
    d_ff: int = 512
    layers: int = 2
    heads: int = 4
    d_kv: int = 32
    dropout: float = 0.1
    vocab_size: int = 8000
    min_count: int = 2
    mask_rate: float = 0.1
    epochs: int = 10
    pretrain_epochs: int = 0
    pretrain_mask_rate: float = 0.3
    format: str = "sentinel"
    batch_size: int = 64
    optimizer: str = "adafactor"
    lr: float = 1e-2
    weight_decay: float = 0.0
    warmup: float = 0.05
    max_length: int = 64
    num_threads: int | None = None
    local_files_only: bool = True
    progress: bool = False


def t5_settings(d: Mapping | None) -> T5Settings:
    """``T5Settings`` from a params dict (``libra.t5``).

    Raises:
        ValueError: naming the key: an unknown key; sizes, ``epochs``, ``batch_size``,
            ``max_length`` not integers >= 1; ``pretrain_epochs`` not >= 0; ``mask_rate`` /
            ``pretrain_mask_rate`` not in (0, 1); ``dropout`` / ``warmup`` not in [0, 1);
            ``lr`` not > 0; ``format`` / ``optimizer`` not known.
    """
    s = from_params(T5Settings, d, "libra.t5")
    for k in ("d_model", "d_ff", "layers", "heads", "d_kv", "vocab_size", "min_count",
              "epochs", "batch_size", "max_length"):
        v = getattr(s, k)
        _check(_int(v) and v >= 1, f"libra.t5.{k}", "an integer >= 1", v)
    _check(_int(s.pretrain_epochs) and s.pretrain_epochs >= 0, "libra.t5.pretrain_epochs",
           "an integer >= 0", s.pretrain_epochs)
    for k in ("mask_rate", "pretrain_mask_rate"):
        v = getattr(s, k)
        _check(_num(v) and 0 < v < 1, f"libra.t5.{k}", "in (0, 1)", v)
    for k in ("dropout", "warmup"):
        v = getattr(s, k)
        _check(_num(v) and 0 <= v < 1, f"libra.t5.{k}", "in [0, 1)", v)
    _check(_num(s.lr) and s.lr > 0, "libra.t5.lr", "> 0", s.lr)
    _check(_num(s.weight_decay) and s.weight_decay >= 0, "libra.t5.weight_decay", ">= 0",
           s.weight_decay)
    _check(s.format in T5_FORMATS, "libra.t5.format", f"one of {list(T5_FORMATS)}", s.format)
    _check(s.optimizer in T5_OPTIMIZERS, "libra.t5.optimizer", f"one of {list(T5_OPTIMIZERS)}",
           s.optimizer)
    return s


# ------------------------------------------------------------------------------ DCG
@dataclass
class DCGSettings:
    """DCG hyper-parameters (paper: ViLT + GPT-2, eta = 0.2; the rest are our choices).

    ``encoder``/``decoder``: ``tiny`` or a Hugging Face name / local dir (ViLT / GPT-2).
    ``image_input``: ``features`` (backbone vector -> ``n_image_tokens`` tokens) or ``pixels``.
    ``backbone``/``image_size``: the image backbone that computes the features (recorded so
    that ``debias`` on new images uses the same one). ``pixel_size``: ViLT input size.
    ``eta``: fraction of input words masked (Eq. 9 training and inference).
    ``formulation``: ``generate`` (paper 003 Eq. 9: a decoder regenerates the whole caption) or
    ``edit`` (per input word: keep it or replace it by one word; see ``EDIT`` in the module doc).
    ``infer_eta``: masking rate at inference (None: ``eta``, as the paper).
    ``identity_pairs``: unchanged pairs (``y -> y``, gendered training captions) added per
    synthesized pair by stage ``dcg_train`` (0 = the paper's training set).
    ``swap_pairs``: gender-swapped pairs (``swap(y) -> y``, the same captions as the identity
    pairs first) added per synthesized pair: every gender word of the pair is wrong for its
    image, so only the image can tell which of a pair and its identity twin to change.
    ``min_pairs``: each of the identity and swap sets has at least this many pairs when its
    rate is > 0 (a run whose BCS keeps few captions, e.g. coco-mini's first 600 images with 6,
    still sees captions to keep and captions to fix; 0 = rate x synthesized pairs only).
    ``min_edit_prob``: ``edit`` only; a word is replaced only when the replacement's probability
    is at least this (0 = argmax): the gate that leaves a caption alone on weak evidence.
    """
    formulation: str = "generate"
    encoder: str = TINY
    decoder: str = TINY
    image_input: str = FEATURES
    backbone: str = "efficientnet_lite0"
    image_size: int | None = 224
    n_image_tokens: int = 4
    pixel_size: int = 64
    patch_size: int = 16
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    dropout: float = 0.1
    vocab_size: int = 8000
    min_count: int = 2
    max_length: int = 40
    eta: float = 0.2
    infer_eta: float | None = None
    identity_pairs: float = 0.0
    swap_pairs: float = 0.0
    min_pairs: int = 0
    min_edit_prob: float = 0.0
    epochs: int = 8
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup: float = 0.05
    num_beams: int = 1
    max_new_tokens: int = 32
    num_threads: int | None = None
    local_files_only: bool = True
    progress: bool = False


def dcg_settings(d: dict | None) -> DCGSettings:
    """``DCGSettings`` from a params dict; unknown keys, values of the wrong type (by the
    field's annotation) and values out of range raise ``ValueError`` naming them."""
    s = from_params(DCGSettings, d, "libra.dcg", check_types=True)
    if s.formulation not in (GENERATE, EDIT):
        raise ValueError(f"libra.dcg.formulation must be {GENERATE!r} or {EDIT!r}, got "
                         f"{s.formulation!r}")
    for k in ("identity_pairs", "swap_pairs", "min_pairs"):
        if getattr(s, k) < 0:
            raise ValueError(f"libra.dcg.{k} must be >= 0, got {getattr(s, k)}")
    if not 0.0 <= s.min_edit_prob <= 1.0:
        raise ValueError(f"libra.dcg.min_edit_prob must be in [0, 1], got {s.min_edit_prob}")
    if s.infer_eta is not None and not 0.0 <= s.infer_eta < 1.0:
        raise ValueError(f"libra.dcg.infer_eta must be in [0, 1), got {s.infer_eta}")
    if s.image_input not in (FEATURES, PIXELS):
        raise ValueError(f"libra.dcg.image_input must be {FEATURES!r} or {PIXELS!r}, got "
                         f"{s.image_input!r}")
    return s


# --------------------------------------------------------------------------------------------
# masking


__all__ = ["BCSSettings", "DCGSettings", "EDIT", "FEATURES", "GENERATE", "PIXELS",
           "POS_METHODS", "SOURCES", "T5Settings", "T5_FORMATS", "T5_OPTIMIZERS",
           "TABLE1_MIXES", "TINY", "bcs_settings", "dcg_settings", "t5_settings"]
