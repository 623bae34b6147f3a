"""The settings of the LIC caption classifiers (thesis sec. 2.5 and 2.8.1; paper 003): the
LSTM and BERT configurations with the authors' defaults, the ``paper`` and ``ci`` presets, and
their JSON form. Imports no torch, so the param checks and the stages that only read settings
stay light; :mod:`biaslab.models.textclf` trains and runs the classifiers and re-exports every
name here.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

CLASSIFIERS = ("lstm", "bert_ft", "bert_pre")
PRESETS = ("paper", "ci")
#: the offline tier's BERT: MiniLM-L6 from the PyPI package (``textclf.resolve_model``)
MINILM = "minilm"


@dataclass
class LSTMConfig:
    """Hyper-parameters of the ``lstm`` classifier (defaults: thesis 2.8.1 + authors' code)."""
    embedding_dim: int = 100
    hidden_dim: int = 256
    n_layers: int = 2
    bidirectional: bool = True
    dropout: float = 0.5
    lr: float = 5e-5
    epochs: int = 20
    batch_size: int = 64
    optimizer: str = "adam"
    weight_decay: float = 0.0
    max_vocab_size: int | None = 25000   # authors' code (torchtext max_size)
    bucket: bool = True                  # length-bucketed batches (torchtext BucketIterator)
    mask_token: str = "[MASK]"
    eval_batch_size: int = 512
    num_threads: int | None = None
    progress: bool | None = True   # None: auto (biaslab.runtime.progress)

    @property
    def kind(self) -> str:
        return "lstm"


@dataclass
class BERTConfig:
    """Hyper-parameters of the ``bert_ft`` / ``bert_pre`` classifiers (defaults: ``bert_ft`` of
    thesis 2.8.1; ``default_config("bert_pre")`` sets freeze/epochs/lr)."""
    model: str = "bert-base-uncased"
    freeze: bool = False
    hidden_dim: int = 256
    head_batchnorm: bool = True
    lr: float = 1e-5
    epochs: int = 5
    batch_size: int = 64
    max_seq_length: int = 64
    optimizer: str = "adam"
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    cache_features: bool = True
    local_files_only: bool = True
    mask_token: str = "[MASK]"
    eval_batch_size: int = 128
    num_threads: int | None = None
    progress: bool | None = True   # None: auto (biaslab.runtime.progress)

    @property
    def kind(self) -> str:
        return "bert"


Config = LSTMConfig | BERTConfig


def default_config(classifier: str = "lstm", preset: str = "paper", **overrides) -> Config:
    """Config of a named classifier for a preset, with keyword overrides.

    Presets:
        ``paper`` -- thesis 2.8.1 (LSTM 20 epochs lr 5e-5; BERT-ft 5 epochs lr 1e-5 on
        ``bert-base-uncased``; BERT-pre 20 epochs lr 5e-5, frozen).
        ``ci``    -- a fast setting for pipelines and smoke runs, NOT comparable with paper numbers:
        LSTM embedding 64, hidden 64, 5 epochs, lr 1e-3; BERT on the packaged MiniLM (``minilm``),
        32 word pieces, BERT-ft 2 epochs lr 5e-5; ``num_threads=1`` (on a CPU shared with other
        jobs, torch's multi-threaded kernels spin-wait and train several times slower than one
        thread: measured 19-35 vs 114-188 captions/s for the paper LSTM on 2 loaded cores).

    Raises:
        ValueError: unknown classifier, preset or override name.
    """
    if classifier not in CLASSIFIERS:
        raise ValueError(f"unknown classifier {classifier!r}; known: {list(CLASSIFIERS)}")
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; known: {list(PRESETS)}")
    if classifier == "lstm":
        cfg: Config = LSTMConfig()
        if preset == "ci":
            cfg = dataclasses.replace(cfg, embedding_dim=64, hidden_dim=64, epochs=5, lr=1e-3,
                                      num_threads=1)
    else:
        cfg = BERTConfig()
        if classifier == "bert_pre":
            cfg = dataclasses.replace(cfg, freeze=True, epochs=20, lr=5e-5)
        if preset == "ci":
            cfg = dataclasses.replace(cfg, model=MINILM, max_seq_length=32, num_threads=1)
            if classifier == "bert_ft":
                cfg = dataclasses.replace(cfg, epochs=2, lr=5e-5)
    return _replace(cfg, overrides)


def _replace(cfg: Config, overrides: dict) -> Config:
    names = {f.name for f in dataclasses.fields(cfg)}
    bad = sorted(set(overrides) - names)
    if bad:
        raise ValueError(f"unknown {type(cfg).__name__} field(s) {bad}; known: {sorted(names)}")
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


def config_to_dict(cfg: Config) -> dict:
    """JSON-able dict of a config, with ``classifier_kind``."""
    d = dataclasses.asdict(cfg)
    if "betas" in d:
        d["betas"] = list(d["betas"])
    return {"classifier_kind": cfg.kind, **d}


def config_from_dict(d: dict) -> Config:
    d = dict(d)
    kind = d.pop("classifier_kind")
    if kind == "lstm":
        return LSTMConfig(**d)
    if "betas" in d:
        d["betas"] = tuple(d["betas"])
    return BERTConfig(**d)
