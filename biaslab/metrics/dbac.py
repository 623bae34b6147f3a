"""DBAC -- Directional Bias Amplification in Captioning (Nair, Tokas & Kerner, "A Woman with a
Knife or A Knife with a Woman? Measuring Directional Bias Amplification in Image Captions",
arXiv 2503.07878 v4/v5; v1-v2 called it DPAC, "Measuring directional bias amplification in
image captions using predictability").

Version implemented: the authors' package (github.com/kerner-lab/Bias-Amplification, file
``bias_amplification/text/metrics.py``, class ``DBAC``, and ``text/utils/text.py``,
``CaptionProcessor.equalize_vocab``; commit 0254e0e). The paper's PDF is not in
``shared/papers``; every step below is read from that code, and each place where we differ
says so.

Two variables per caption: the attribute ``A`` (the image's perceived gender, female/male) and
the task ``T`` (the set of object categories the caption mentions, a multi-hot vector over the
category list ``L``; :func:`biaslab.metrics.dba.caption_objects`). An attacker is trained
on captions with one of the two masked and predicts the masked variable from what is left:

* ``T->A`` (the authors' ``mask_mode="gender"``): gender words -> ``[MASK]`` (the word list of
  LIC, ``biaslab.data.gender``); the attacker predicts ``A``. The per-caption probability is the
  attacker's probability of the true gender, ``p_i = P^(a_i | x_i)`` (``getProbs``: no
  correctness indicator, unlike LIC's Eq. 2.9).
* ``A->T`` (``mask_mode="object"``): the words that mention a category of ``L`` (the matched
  span, plural forms and synonyms; the authors mask single object words) -> ``[OBJ]``; the
  attacker predicts ``T`` with one sigmoid per category, ``p_i = prod_l P^(t_il | x_i)``
  (``getProbs``, object mode: ``t * p + (1 - t) * (1 - p)``, product over ``L``).

Prior correction (``bayes=True``, the authors' default ``apply_bayes``): ``p_i`` is multiplied
by ``P(z_i) / P(y_i)``, ``y`` the predicted variable and ``z`` the other one, each the share of
the scored captions whose value (the exact tuple) equals caption ``i``'s
(``getProbsfromObjectOccurences``): Bayes' rule with the caption standing in for the observed
variable. ``bayes=False`` keeps the attacker's probability (the DPA-style direct estimate).
Both are returned (``DBAC`` and ``DBAC_direct``); they share the same attackers.

    lambda_X = mean_i p_i over the test captions of X (X = D: human, M: model captions)
    DBAC     = (lambda_M - lambda_D) / (lambda_M + lambda_D)         in [-1, 1]

(``normalized=True``, the authors' default; ``>0``: the model's captions make the direction's
target more predictable than the human captions do, i.e. amplification.)

Vocabulary substitution (``equalize_vocab``, ``maskType="contextual"``, ``bidirectional=True``,
``similarity_threshold=0.5``): a token of a human caption that the model captions never use is
replaced by the most similar word of the model captions' vocabulary when the cosine similarity
of their word vectors is at least ``threshold``, otherwise by the unknown token; model captions
are mapped onto the human vocabulary the same way. LIC instead maps every such word to the
unknown token (thesis 2.4), which, the DBAC authors argue, throws away context and
underestimates the dataset's bias. Word vectors: the authors use GloVe (or BERT token
embeddings); offline we embed each word alone with the packaged MiniLM BERT
(:func:`word_vectors`, mean of its word pieces' last hidden states, the authors' BERT path
without context) or a caller's ``embed``. ``substitution="constant"`` maps every such word to
the unknown token (LIC's strategy), ``"none"`` skips the step.

Protocol (decisions where we differ from the authors' code):

* Held-out scoring: the authors' ``DBAC.calcLeak`` scores the attacker on the captions it was
  trained on; we use LIC's balanced split (:func:`biaslab.metrics.lic.balanced_split`: equal
  images of each gender, ``test_ratio`` of the minority count held out, per seed), so a
  memorising attacker is not rewarded. ``test_ratio`` 0.2 is the held-out share of the
  authors' other predictability metrics (``bias_amplification/utils/config.py``,
  ``DEFAULT_TEST_SIZE``); LIC's 0.1 (thesis) left 6 test captions per gender on the default's
  200 test images.
* Vocabularies (for the substitution and the LSTM) come from the training split of the seed.
* Human captions: as LIC_D, the k-th human caption of every image forms one dataset; lambda_D
  is the mean over the first ``max_human_captions`` indices.
* Attackers: the LIC classifiers (:mod:`biaslab.models.textclf`: ``lstm``, ``bert_ft``, ``bert_pre``
  with their presets); for ``A->T`` the same networks with one output per category and a
  binary cross-entropy loss.
* Trials: the authors average 10-25 trials; here ``seeds`` (each its own split and attacker
  initialisation), reported as mean, sample std and 95 % t-interval over seeds
  (:func:`biaslab.runtime.stats.record`).
"""
from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from biaslab.models import textclf
from biaslab.data.gender import GENDERS, mask, tokenize
from biaslab.metrics.dba import OBJECT_SYNONYMS, plurals
from biaslab.metrics.settings import DIRECTIONS, DbacSettings

__all__ = ["DIRECTIONS", "COCO_CATEGORIES", "DbacSettings", "dbac", "dbac_details",
           "dbac_from_probs", "caption_probs", "mask_objects", "substitute", "word_vectors",
           "prior_ratio"]

OBJ_TOKEN = "[OBJ]"

#: the 80 MSCOCO object categories (instances annotations), the default task list ``L``.
COCO_CATEGORIES: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat",
    "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack",
    "umbrella", "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball",
    "kite", "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket",
    "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair",
    "couch", "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse",
    "remote", "keyboard", "cell phone", "microwave", "oven", "toaster", "sink",
    "refrigerator", "book", "clock", "vase", "scissors", "teddy bear", "hair drier",
    "toothbrush")


# --------------------------------------------------------------------------------------------
# captions -> masked texts and targets


def _patterns(categories: Sequence[str], synonyms: Mapping[str, str]) -> list[tuple[list, set, str]]:
    """(head tokens, last-token forms, category), longest names first so that ``baseball bat``
    is matched before ``bat`` would be."""
    pats = []
    for cat in categories:
        ct = tokenize(cat)
        if ct:
            pats.append((ct[:-1], plurals(ct[-1]), cat))
    cats = set(categories)
    for w, cat in synonyms.items():
        if cat in cats:
            wt = tokenize(w)
            if wt:
                pats.append((wt[:-1], plurals(wt[-1]), cat))
    return sorted(pats, key=lambda p: -len(p[0]))


def mask_objects(caption: str, categories: Sequence[str],
                 synonyms: Mapping[str, str] | None = None,
                 token: str = OBJ_TOKEN) -> tuple[str, set[str]]:
    """Mask every mention of a category of ``categories`` (DBAC's ``A->T`` input).

    A mention is the category's tokens (``biaslab.data.gender.tokenize``) in sequence, the last in a
    singular or plural form, or a word of ``synonyms`` (default
    :data:`biaslab.metrics.dba.OBJECT_SYNONYMS`) mapping to a category: the same matching
    as :func:`biaslab.metrics.dba.caption_objects`. Every token of a mention becomes
    ``token``; longer names win (``baseball bat`` before a synonym ``bat``).

    Returns:
        ``(masked text, categories mentioned)``: the text is space-joined tokens, e.g.
        ``"A man with two dogs."`` -> ``("a man with two [obj]", {"dog"})`` for ``["dog"]``
        (the token is lower-cased by the tokenizer).
    """
    toks = tokenize(caption)
    tok = " ".join(tokenize(token))
    pats = _patterns(categories, OBJECT_SYNONYMS if synonyms is None else synonyms)
    out, found, i = [], set(), 0
    while i < len(toks):
        for head, last, cat in pats:
            n = len(head) + 1
            if toks[i:i + n - 1] == head and i + n - 1 < len(toks) and toks[i + n - 1] in last:
                out.append(tok)
                found.add(cat)
                i += n
                break
        else:
            out.append(toks[i])
            i += 1
    return " ".join(out), found


def word_vectors(words: Sequence[str], model: str = "minilm",
                 num_threads: int | None = 1) -> dict[str, np.ndarray]:
    """Context-free word vectors from a BERT encoder: each word tokenised alone (no special
    tokens), the mean of its word pieces' last hidden states (the authors' BERT substitution
    path without a context sentence). One word per forward pass: a word's vector never
    depends on which other words shared its batch (padding and kernel blocking could move its
    last bits, and a substitution near the threshold with them). ``model``: ``"minilm"`` (packaged, offline) or a local
    directory / cached Hugging Face name (:func:`biaslab.models.textclf.resolve_model`).

    Returns:
        word -> float32 vector ``(hidden_size,)``, L2-normalised (cosine = dot product).
    """
    from biaslab.models.features import torch_threads
    words = list(dict.fromkeys(str(w) for w in words))
    memo = _VECTORS.setdefault(str(model), {})
    todo = [w for w in words if w not in memo]
    if todo:
        tok, enc = _encoder(str(model))
        with torch_threads(num_threads), torch.no_grad():
            _embed(todo, tok, enc, memo)
    return {w: memo[w] for w in words if w in memo}


#: per process: loaded encoders and the vectors already computed (eval_captioner calls DBAC
#: once per captioner on forked workers; a word is embedded once per worker)
_ENCODERS: dict[str, tuple] = {}
_VECTORS: dict[str, dict[str, np.ndarray]] = {}


def _encoder(model: str) -> tuple:
    if model not in _ENCODERS:
        enc = textclf.load_encoder(model, True)
        enc.eval()
        _ENCODERS[model] = (textclf.load_tokenizer(model), enc)
    return _ENCODERS[model]


def _embed(words: list[str], tok, enc, out: dict) -> None:
    for w in words:
        b = tok([w], add_special_tokens=False, return_tensors="pt")
        if b["input_ids"].shape[1] == 0:      # nothing the tokenizer keeps: no vector
            continue
        h = enc(**{k: v for k, v in b.items()
                   if k in ("input_ids", "attention_mask", "token_type_ids")}).last_hidden_state
        v = torch.nn.functional.normalize(h[0].mean(0), dim=0)
        out[w] = v.numpy().astype(np.float32)


def substitute(texts: Sequence[str], vocab: set[str], vectors: Mapping[str, np.ndarray] | None,
               unk: str, threshold: float = 0.5, keep: Sequence[str] = ()) -> list[str]:
    """DBAC's vocabulary substitution (``equalize_vocab``, contextual): each token of ``texts``
    not in ``vocab`` (nor in ``keep``, e.g. the mask tokens) becomes the word of ``vocab`` with
    the highest cosine similarity of ``vectors`` when that similarity is ``>= threshold``, else
    ``unk``; a token without a vector becomes ``unk``. ``vectors=None``: every such token
    becomes ``unk`` (the constant strategy, LIC's). Ties: the alphabetically first word.

    Args:
        texts: space-joined token strings.
        vocab: the target vocabulary (tokens of the other set of captions).
        vectors: word -> unit vector for the tokens of ``texts`` and of ``vocab``.
        unk: the unknown token of the attacker (``<unk>`` LSTM, ``[UNK]`` BERT).
        threshold: minimum cosine similarity (authors: 0.5).
    """
    keep = set(keep)
    cand = sorted(w for w in vocab if vectors is not None and w in vectors)
    mat = np.stack([vectors[w] for w in cand]) if cand else None
    memo: dict[str, str] = {}

    def sub(t: str) -> str:
        if t in vocab or t in keep:
            return t
        if t not in memo:
            memo[t] = unk
            if mat is not None and t in vectors:
                sims = mat @ vectors[t]
                j = int(np.argmax(sims))
                if float(sims[j]) >= threshold:
                    memo[t] = cand[j]
        return memo[t]
    return [" ".join(sub(t) for t in tokenize(s)) for s in texts]


# --------------------------------------------------------------------------------------------
# lambda and DBAC from probabilities


def prior_ratio(y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``P(z_i) / P(y_i)`` per row: ``P(v_i)`` is the share of rows whose value (the whole row,
    a tuple) equals row ``i``'s (authors' ``getProbsfromObjectOccurences``).

    Args:
        y, z: ``(n, k)`` and ``(n, m)`` arrays (one-hot gender, multi-hot objects).
    Returns:
        ``(n,)`` float64.
    """
    def freq(v):
        v = np.asarray(v)
        _, inv, cnt = np.unique(v.reshape(len(v), -1), axis=0, return_inverse=True,
                                return_counts=True)
        return cnt[inv.reshape(-1)] / len(v)
    return freq(z) / freq(y)


def caption_probs(pred: np.ndarray, target: np.ndarray, direction: str) -> np.ndarray:
    """Per-caption probability of the true value of the predicted variable.

    Args:
        pred: ``(n, 2)`` softmax over (female, male) for ``T->A``; ``(n, |L|)`` sigmoids for
            ``A->T``.
        target: ``(n, 2)`` one-hot gender or ``(n, |L|)`` multi-hot objects.
        direction: ``"T->A"`` or ``"A->T"``.
    Returns:
        ``(n,)``: ``pred[i, a_i]`` (T->A) or ``prod_l t p + (1 - t)(1 - p)`` (A->T).
    """
    pred = np.asarray(pred, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    if pred.shape != target.shape:
        raise ValueError(f"pred {pred.shape} and target {target.shape} differ in shape")
    if direction == "T->A":
        return pred[np.arange(len(pred)), target.argmax(axis=1)]
    if direction == "A->T":
        return np.prod(target * pred + (1 - target) * (1 - pred), axis=1)
    raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")


def _lambda(pred, target, other, direction: str, bayes: bool) -> float:
    p = caption_probs(pred, target, direction)
    if bayes:
        p = p * prior_ratio(target, other)
    return float(np.mean(p))


def dbac_from_probs(pred_d, target_d, other_d, pred_m, target_m, other_m,
                    direction: str, bayes: bool = True) -> dict:
    """DBAC of one trial from the attackers' test predictions (hand-checkable core).

    Args:
        pred_d, pred_m: attacker outputs on the human (D) and model (M) test captions
            (see :func:`caption_probs`).
        target_d, target_m: the predicted variable's true values (one-hot gender for T->A,
            multi-hot objects for A->T).
        other_d, other_m: the other variable (objects for T->A, gender for A->T); only used
            with ``bayes``.
    Returns:
        ``{"lambda_D", "lambda_M", "DBAC"}`` with ``DBAC = (lM - lD) / (lM + lD)`` (None when
        both lambdas are 0).
    """
    ld = _lambda(pred_d, target_d, other_d, direction, bayes)
    lm = _lambda(pred_m, target_m, other_m, direction, bayes)
    return {"lambda_D": ld, "lambda_M": lm,
            "DBAC": (lm - ld) / (lm + ld) if (lm + ld) > 0 else None}


# --------------------------------------------------------------------------------------------
# attackers


def _train_multilabel(texts: Sequence[str], Y: np.ndarray, cfg: textclf.Config, seed: int,
                      cache: textclf.PretrainedCache | None):
    """The LIC attacker network with ``|L|`` sigmoid outputs (BCE loss) for ``A->T``; returns a
    function texts -> ``(n, |L|)`` probabilities."""
    from biaslab.models.features import torch_threads
    k = Y.shape[1]
    y = torch.as_tensor(Y, dtype=torch.float32)
    loss_fn = nn.BCEWithLogitsLoss()
    with torch_threads(cfg.num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(int(seed))
        if isinstance(cfg, textclf.LSTMConfig):
            vocab = textclf.build_vocab(texts, textclf.mask_tok(cfg), cfg.max_vocab_size)
            stoi = {t: i for i, t in enumerate(vocab)}
            ids, lengths = textclf.encode_lstm(list(texts), stoi)
            net = textclf.LSTMNet(len(vocab), cfg)
            net.fc = nn.Linear(net.fc.in_features, k)
            with torch.no_grad():
                net.embedding.weight[0].zero_()
                net.embedding.weight[1].zero_()
            opt = textclf.make_optimizer(net.parameters(), cfg)
            net.train()
            for _ in range(cfg.epochs):
                batches = (textclf.bucket_batches(lengths, cfg.batch_size, gen) if cfg.bucket
                           else textclf.index_batches(len(texts), cfg.batch_size, gen))
                for idx in batches:
                    lb = lengths[idx]
                    loss = loss_fn(net(ids[idx, :int(lb.max())], lb), y[idx])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            net.eval()

            @torch.no_grad()
            def predict(xs: Sequence[str]) -> np.ndarray:
                with torch_threads(cfg.num_threads):
                    i2, l2 = textclf.encode_lstm(list(xs), stoi)
                    return torch.sigmoid(net(i2, l2)).double().numpy()
            return predict
        cache = cache if cache is not None else textclf.PretrainedCache()
        tokenizer, pristine = cache.load(cfg)
        frozen = cfg.freeze and cfg.cache_features
        encoder = pristine if cfg.freeze else copy.deepcopy(pristine)
        if not cfg.freeze:
            encoder.requires_grad_(True)
        net = textclf.BertNet(encoder, cfg)
        last = net.head.mlp[-1]
        net.head.mlp[-1] = nn.Linear(last.in_features, k)
        opt = textclf.make_optimizer(net.parameters(), cfg)
        min_size = 2 if cfg.head_batchnorm else 1
        feats = cache.features(cfg, list(texts)) if frozen else None
        enc = None if frozen else textclf.encode_bert(list(texts), tokenizer, cfg.max_seq_length)
        net.train()
        if frozen:
            net.encoder.eval()
        for _ in range(cfg.epochs):
            for idx in textclf.index_batches(len(texts), cfg.batch_size, gen, min_size):
                logits = net.head(feats[idx]) if frozen else net(textclf.bert_batch(enc, idx))
                loss = loss_fn(logits, y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        net.eval()

        @torch.no_grad()
        def predict(xs: Sequence[str]) -> np.ndarray:
            with torch_threads(cfg.num_threads):
                if frozen:
                    return torch.sigmoid(net.head(cache.features(cfg, list(xs)))).double().numpy()
                e2 = textclf.encode_bert(list(xs), tokenizer, cfg.max_seq_length)
                return torch.sigmoid(net(e2)).double().numpy()
        return predict


def _count(acc: dict, before: Sequence[str], after: Sequence[str], unk: str) -> None:
    """Tally the human-caption tokens the substitution replaced (by a word / by ``unk``)."""
    for x, y in zip(before, after):
        for a, b in zip(tokenize(x), tokenize(y)):
            acc["tokens"] += 1
            if a != b:
                acc["to_unk" if b == unk else "to_word"] += 1


def _attack(direction: str, cfg, train_x, train_y, test_x, seed: int, cache) -> np.ndarray:
    """Train one attacker on (train_x, train_y), return its outputs on test_x."""
    if direction == "T->A":
        model = textclf.train(train_x, list(np.asarray(train_y).argmax(axis=1)), cfg, seed=seed,
                              cache=cache)
        return textclf.predict_proba(model, test_x, cache=cache)
    return _train_multilabel(train_x, np.asarray(train_y), cfg, seed, cache)(test_x)


# --------------------------------------------------------------------------------------------
# the metric


def dbac(model_captions: Mapping[int, str], human_captions: Mapping[int, Sequence[str]],
         genders: Mapping[int, str], direction: str = "T->A", prior: bool = True,
         **settings: Any) -> float:
    """DBAC of one direction as one number: the mean over attacker seeds, in percentage
    points (x100 of Zhao et al.'s fraction, the unit of every bias difference in
    :mod:`biaslab.metrics`). :func:`dbac_details` gives both directions, both corrections,
    lambda_D and lambda_M, each with its CI.

    Args:
        model_captions, human_captions, genders: as :func:`dbac_details`.
        direction: ``"T->A"`` (the caption's context predicts gender) or ``"A->T"`` (gender
            predicts the caption's objects).
        prior: the authors' prior correction (``DBAC``); False: without it
            (``DBAC_direct``).
        **settings: :func:`dbac_details`' other keywords (``seeds``, ``config``,
            ``categories``, ``substitution``, ...).

    Returns:
        float, in percentage points: > 0 the model's captions carry more of the
        association than the human captions (amplification), < 0 less.

    Raises:
        ValueError: what :func:`dbac_details` raises, an unknown direction, or ``A->T``
            skipped because no caption names a category of the task list (the reason).

    A model whose scene word always follows the gender, beside human captions where it
    does 60 % of the time, amplifies the context -> gender association (a planted effect, not
    a hand-computed value: a 2-seed DBAC with a small LSTM is far above 0):

    >>> from biaslab.models import textclf
    >>> human, model, genders = {}, {}, {}
    >>> for i in range(160):
    ...     who, own, other = ("woman", "kitchen", "field") if i % 2 else ("man", "field", "kitchen")
    ...     genders[i] = "female" if i % 2 else "male"
    ...     human[i] = [f"a {who} in the {own if i % 5 < 3 else other} with a dog"]
    ...     model[i] = f"a {who} in the {own} with a dog"
    >>> small = textclf.LSTMConfig(embedding_dim=8, hidden_dim=8, epochs=10, lr=2e-2,
    ...                            batch_size=32, progress=False, num_threads=1)
    >>> dbac(model, human, genders, prior=False, seeds=2, config=small, categories=["dog"],
    ...      substitution="constant") > 10
    True
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; known: {DIRECTIONS}")
    rec = dbac_details(model_captions, human_captions, genders, directions=(direction,),
                       bayes=prior, **settings)[direction]
    if "skipped" in rec:
        raise ValueError(f"DBAC {direction}: {rec['skipped']}")
    return 100.0 * float(rec["DBAC" if prior else "DBAC_direct"]["mean"])


def dbac_details(model_captions: Mapping[int, str],
                 human_captions: Mapping[int, Sequence[str]],
                 genders: Mapping[int, str],
                 directions: Sequence[str] = DIRECTIONS,
                 classifier: str = "lstm",
                 seeds: int | Sequence[int] = 10,
                 config: textclf.Config | str | Mapping | None = None,
                 categories: Sequence[str] | None = None,
                 words: str = "lic",
                 bayes: bool = True,
                 substitution: str = "contextual",
                 threshold: float = 0.5,
                 embed: Callable[[Sequence[str]], Mapping[str, np.ndarray]] | None = None,
                 test_ratio: float = 0.2,
                 max_human_captions: int | None = 1,
                 synonyms: Mapping[str, str] | None = None,
                 progress: bool = False) -> dict:
    """DBAC in both directions with what it rests on (see the module docstring for every
    definition and decision); :func:`dbac` is one direction's number.

    Args:
        model_captions: image id -> generated caption.
        human_captions: image id -> its human captions (a str is one caption).
        genders: image id -> ``"female"``/``"male"`` (others ignored).
        directions: any of ``("T->A", "A->T")``.
        classifier: the attacker, as LIC's: ``lstm``, ``bert_ft``, ``bert_pre``.
        seeds: number of seeds (``0..n-1``) or the list; each is one split + attackers.
        config: :func:`biaslab.metrics.lic.resolve_config` (``"ci"``, ``"paper"``, a dict...).
        categories: the task list ``L`` (default :data:`COCO_CATEGORIES` minus ``person``).
        words: gender word list masked for ``T->A`` (``biaslab.data.gender.WORD_LISTS``).
        bayes: the authors' prior correction for ``DBAC`` (``DBAC_direct`` is always without).
        substitution: ``"contextual"`` (authors), ``"constant"`` (LIC's unknown token) or
            ``"none"``.
        threshold: cosine similarity threshold of the contextual substitution.
        embed: words -> unit vectors (default :func:`word_vectors` with MiniLM).
        test_ratio: held-out share of the minority count per gender (authors' 0.2; LIC 0.1).
        max_human_captions: human-caption indices averaged for lambda_D (None: all).
        synonyms: object synonyms (default ``OBJECT_SYNONYMS``).

    Returns:
        ``{direction: {"DBAC": record, "DBAC_direct": record, "lambda_D": record,
        "lambda_M": record, "per_seed": [...]}, "n_images", "n_train_per_gender",
        "n_test_per_gender", "categories", "seeds", "classifier", "bayes", "substitution",
        "threshold", "n_substituted"}`` (``n_substituted[direction]``: human-caption tokens
        seen, and those replaced by a model-vocabulary word / by the unknown token, summed
        over seeds and human-caption indices); each record is :func:`biaslab.runtime.stats.record` over
        seeds (mean, ci95, std, n). ``A->T`` is skipped (``{"skipped": reason}``) when no
        caption mentions a category of ``L``.

    Raises:
        ValueError: no usable image, a gender too small for the split, unknown direction /
            substitution.
    """
    from biaslab.runtime import stats
    from biaslab.metrics.lic import derive_seed, balanced_split, normalise_genders, \
        resolve_config
    from biaslab.runtime.progress import bar as progress_bar
    for d in directions:
        if d not in DIRECTIONS:
            raise ValueError(f"unknown direction {d!r}; known: {DIRECTIONS}")
    if substitution not in ("contextual", "constant", "none"):
        raise ValueError(f"substitution must be contextual, constant or none, got "
                         f"{substitution!r}")
    cfg = resolve_config(classifier, config)
    cfg = dataclasses.replace(cfg, mask_token="[MASK]")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ValueError("DBAC needs at least one seed")
    cats = [c for c in (COCO_CATEGORIES if categories is None else categories) if c != "person"]
    hum = {int(i): ([v] if isinstance(v, str) else list(v)) for i, v in human_captions.items()}
    g = {i: v for i, v in normalise_genders(genders).items()
         if i in model_captions and hum.get(i)}
    if not g:
        raise ValueError("DBAC: no image has a female/male label, a model caption and human "
                         "captions")
    ids = sorted(g)
    k_n = min(len(hum[i]) for i in ids)
    if max_human_captions is not None:
        k_n = min(k_n, int(max_human_captions))
    cache = textclf.PretrainedCache() if cfg.kind == "bert" else None
    unk = textclf.UNK if cfg.kind == "lstm" else cache.load(cfg)[0].unk_token
    keep = [tokenize(cfg.mask_token)[0], tokenize(OBJ_TOKEN)[0], *tokenize(unk)]
    gender_1h = {i: np.eye(2)[list(GENDERS).index(g[i])] for i in ids}

    # per direction and caption source: (masked text, target row, other row) per image
    def views(caption: str, i: int) -> dict:
        m_obj, found = mask_objects(caption, cats, synonyms)
        t = np.array([c in found for c in cats], dtype=np.float64)
        return {"T->A": (" ".join(tokenize(mask(caption, words, cfg.mask_token))),
                         gender_1h[i], t),
                "A->T": (m_obj, t, gender_1h[i])}   # the gender words stay: they are A
    model_v = {i: views(model_captions[i], i) for i in ids}
    human_v = [{i: views(hum[i][k], i) for i in ids} for k in range(k_n)]

    vectors = None
    if substitution == "contextual":
        allw = {t for v in [model_v, *human_v] for r in v.values() for d in directions
                for t in tokenize(r[d][0])} - set(keep)
        vectors = dict((embed or word_vectors)(sorted(allw)))

    results: dict = {}
    n_sub = {d: {"tokens": 0, "to_word": 0, "to_unk": 0} for d in directions}
    bar = progress_bar(total=len(seed_list) * len(directions) * (1 + k_n), desc="DBAC",
                       unit="attacker", progress=bool(progress))
    with bar:
        for d in directions:
            if d == "A->T" and not any(r[d][1].any() for r in model_v.values()) and not any(
                    r[d][1].any() for v in human_v for r in v.values()):
                results[d] = {"skipped": "no caption mentions a category of L"}
                bar.update(len(seed_list) * (1 + k_n))
                continue
            per_seed = []
            for s in seed_list:
                tr, te = balanced_split(g, s, test_ratio)

                def arrays(v, which):
                    return ([v[i][d][0] for i in which], np.stack([v[i][d][1] for i in which]),
                            np.stack([v[i][d][2] for i in which]))
                mtx, mty, _ = arrays(model_v, tr)
                mex, mey, meo = arrays(model_v, te)
                v_model = {t for x in mtx for t in tokenize(x)}
                lds, ldirs = [], []
                for k, hv in enumerate(human_v):
                    htx, hty, _ = arrays(hv, tr)
                    hex_, hey, heo = arrays(hv, te)
                    v_hum = {t for x in htx for t in tokenize(x)}
                    if substitution != "none":
                        vec = vectors if substitution == "contextual" else None
                        htx2 = substitute(htx, v_model, vec, unk, threshold, keep)
                        hex2 = substitute(hex_, v_model, vec, unk, threshold, keep)
                        _count(n_sub[d], htx + hex_, htx2 + hex2, unk)
                        htx, hex_ = htx2, hex2
                    pd_ = _attack(d, cfg, htx, hty, hex_, derive_seed(s, 11, k), cache)
                    bar.update(1)
                    lds.append((pd_, hey, heo))
                    ldirs.append(v_hum)
                v_hum_all = set().union(*ldirs) if ldirs else set()
                mtx2, mex2 = mtx, mex
                if substitution != "none":
                    vec = vectors if substitution == "contextual" else None
                    mtx2 = substitute(mtx, v_hum_all, vec, unk, threshold, keep)
                    mex2 = substitute(mex, v_hum_all, vec, unk, threshold, keep)
                pm = _attack(d, cfg, mtx2, mty, mex2, derive_seed(s, 10), cache)
                bar.update(1)
                rec = {"seed": s}
                for name, b in (("DBAC", bayes), ("DBAC_direct", False)):
                    lam_d = float(np.mean([_lambda(p, t, o, d, b) for p, t, o in lds]))
                    lam_m = _lambda(pm, mey, meo, d, b)
                    val = (lam_m - lam_d) / (lam_m + lam_d) if lam_m + lam_d > 0 else None
                    rec[name] = val
                    if name == "DBAC":
                        rec.update(lambda_D=lam_d, lambda_M=lam_m)
                    else:
                        rec.update(lambda_D_direct=lam_d, lambda_M_direct=lam_m)
                per_seed.append(rec)
            results[d] = {key: stats.record([r[key] for r in per_seed])
                          for key in ("DBAC", "DBAC_direct", "lambda_D", "lambda_M",
                                      "lambda_D_direct", "lambda_M_direct")}
            results[d]["per_seed"] = per_seed
    n_test = round(test_ratio * min(Counter(g.values())[x] for x in GENDERS))
    results.update(
        n_images=len(ids), n_images_by_gender={x: Counter(g.values())[x] for x in GENDERS},
        n_test_per_gender=n_test,
        n_train_per_gender=min(Counter(g.values())[x] for x in GENDERS) - n_test,
        n_human_indices=k_n, categories=cats, seeds=seed_list, classifier=classifier,
        bayes=bool(bayes), substitution=substitution, threshold=float(threshold),
        n_substituted=n_sub, config=textclf.config_to_dict(cfg),
        source="Nair, Tokas & Kerner, arXiv 2503.07878 (DBAC); authors' code "
               "kerner-lab/Bias-Amplification@0254e0e text/metrics.py")
    return results
