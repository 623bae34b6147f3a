"""LIC -- Leakage for Image Captioning (thesis, paper 002, ch. 2.4, Eqs. 2.7-2.11).

A sentence classifier ``f`` predicts the gender ``a`` of an image from one of its captions with
the gender words masked (Eq. 2.7). With ``s_a(y)`` the classifier's confidence (softmax
probability) for the true gender ``a``:

    LIC_D = 1/|D|  sum_{(y*, a) in D}   s*_a(y*) 1[f*(y*) = a]      (Eq. 2.9, human captions)
    LIC_M = 1/|D^| sum_{(y^, a) in D^}  s^_a(y^) 1[f^(y^) = a]      (Eq. 2.10, model captions)
    LIC   = LIC_M - LIC_D                                           (Eq. 2.11)

Each sum runs over the held-out test split; scores are reported x100, so a classifier that
guesses 50/50 on a balanced 2-class set scores about 25 (0.5 x 0.5) and a perfect, fully
confident one 100. LIC > 0 means the model amplifies the bias of the human captions.

Protocol (thesis 2.5 "Data", "LIC metric details"; the authors' code ``lstm_leakage.py``):

* Masking: every word of the word list (``biaslab.data.gender.mask``, list ``lic`` = thesis appendix
  2.9) becomes ``mask_token``; captions are then normalised to ``" ".join(tokenize(...))`` so
  LIC_M and LIC_D texts go through the same tokenisation.
* Balanced split per seed (``balanced_split``): with ``n`` = the number of images of the
  minority gender, each gender gets ``round(test_ratio * n)`` test images (Python ``round``, as
  the authors' code) and ``n - n_test`` training images, drawn at random, so the majority gender
  is subsampled to the minority count. The same split is used for LIC_M and for every LIC_D
  classifier of that seed. The split and the classifier initialisation both depend on the seed.
* LIC_D: COCO has several human captions per image; the k-th human caption of every image forms
  one dataset and gets its own classifier, and LIC_D is the mean over k (authors' code loops
  ``cap_ind in range(5)``). The number of indices is the smallest caption count among the
  images used (5 in COCO, where a few images have 6 or 7; human captions are taken in the order
  given, the CLI sorts them by annotation id), or ``max_human_captions`` if smaller.
* Vocabulary alignment (thesis 2.4 "Bias amplification"): words of the human captions that are
  not in the vocabulary of the MODEL captions become an out-of-vocabulary token before the LIC_D
  classifiers are trained and tested. The thesis defines both vocabularies "for all
  annotations and predictions in the training set": per seed, ``V_pre`` is the token set of
  the masked model captions of that seed's TRAINING images only (the test
  images' captions never shape what a classifier can read). Decision: this differs from the
  authors' code, which saved ``V_pre`` from their model captions' train and test splits
  together (``--save_model_vocab``). The replacement token is the one the classifier reads as
  unknown: ``<unk>`` for the LSTM (its vocabulary index 1) and the tokenizer's ``unk_token`` for
  BERT (``[UNK]``), as in the authors' ``bias_dataset.py``. The mask token is never replaced.
* Classifier vocabulary: each LSTM classifier builds its own vocabulary from the texts it is
  trained on (``textclf.build_vocab`` over the training split only: the human training
  captions for LIC_D, the model training captions for LIC_M); test-split words it never saw
  read as ``<unk>``. BERT uses its fixed WordPiece vocabulary.
* Images: those with a female/male label and a model caption (and, when human captions are
  given, at least one human caption: the same images for LIC_M and LIC_D).
* Seeds (paper: 10): ``seeds=n`` means seeds ``0..n-1``; a list gives them explicitly. Reported
  ``X`` is the mean over seeds and ``X_std`` the sample standard deviation (ddof=1; 0.0 for a
  single seed). ``LIC_std`` is the std of the per-seed differences ``LIC_M(s) - LIC_D(s)``
  (paired by seed, because both use the same split).
* Classifier seeds: the seed-``s`` LIC_M classifier and the LIC_D classifier of index ``k``
  are initialised with distinct seeds derived from ``(s, role, k)`` by ``numpy.SeedSequence``.
* More than two groups (gender x skin tone's four, ``groups`` of length K > 2).
  The thesis defines LIC for two groups; Eqs. 2.9-2.10 carry over unchanged with a K-way
  classifier (softmax over K, ``textclf.train(n_classes=K)``) and the balanced split takes
  ``round(test_ratio * n)`` test images of EACH of the K groups (n = the smallest group).
  Decision: what an unbiased model scores is then the chance level of a K-way guess,
  about 100 / K^2 (6.25 for four groups; 25 for two, the thesis' racial-bias reference),
  and LIC = LIC_M - LIC_D is read as for two groups. The K = 2 path is the thesis' own
  (identical classifiers and splits).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
from biaslab.runtime.progress import bar as progress_bar

from biaslab.models import textclf
from biaslab.data.gender import GENDERS, mask, tokenize

__all__ = ["lic", "lic_details", "lic_score", "balanced_split", "preprocess", "model_vocabulary",
           "align_vocabulary", "normalise_genders", "resolve_config"]


def lic_score(probs: np.ndarray, labels: np.ndarray) -> float:
    """Eqs. 2.9/2.10 on one test set, x100:
    ``100 * mean_i s_{a_i}(y_i) 1[argmax_j s_j(y_i) = a_i]``.

    Args:
        probs: ``(n, 2)`` class probabilities, columns ``(female, male)`` (``textclf.CLASSES``).
        labels: ``(n,)`` true class indices (0 = female, 1 = male).

    A tie (``p = 0.5``) is predicted as class 0 (``numpy.argmax``), a measure-zero case.

    Raises:
        ValueError: empty input, shape mismatch, labels outside ``0..k-1``.
    """
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels)
    if probs.ndim != 2 or labels.ndim != 1 or probs.shape[0] != labels.shape[0]:
        raise ValueError(f"probs must be (n, k) and labels (n,), got {probs.shape} and "
                         f"{labels.shape}")
    if probs.shape[0] == 0:
        raise ValueError("lic_score of an empty test set")
    if labels.min() < 0 or labels.max() >= probs.shape[1]:
        raise ValueError(f"labels must be in 0..{probs.shape[1] - 1}")
    labels = labels.astype(np.int64)
    correct = probs.argmax(axis=1) == labels
    conf = probs[np.arange(len(labels)), labels]
    return float(100.0 * np.mean(conf * correct))


def normalise_genders(genders: Mapping[int, str],
                      groups: Sequence[str] = GENDERS) -> dict[int, str]:
    """Keep ids whose label is one of ``groups`` (default female/male; any case, surrounding
    spaces ignored), lower-cased."""
    want = {str(k).lower() for k in groups}
    out = {}
    for i, g in genders.items():
        if isinstance(g, str) and g.strip().lower() in want:
            out[int(i)] = g.strip().lower()
    return out


def _groups(groups: Sequence[str]) -> tuple[str, ...]:
    gs = tuple(str(k).lower() for k in groups)
    if len(gs) < 2 or len(set(gs)) != len(gs):
        raise ValueError(f"LIC compares two or more distinct groups, got {groups!r}")
    return gs


def balanced_split(genders: Mapping[int, str], seed: int,
                   test_ratio: float = 0.1,
                   groups: Sequence[str] = GENDERS) -> tuple[list[int], list[int]]:
    """Balanced train/test image ids for one seed (thesis 2.5 "Data"; authors'
    ``make_train_test_split``).

    With ``n`` the minority count, each gender contributes ``round(test_ratio * n)`` test and
    ``n - n_test`` training images, sampled without replacement by
    ``numpy.random.default_rng(seed)`` from its sorted ids. Returns ``(train_ids, test_ids)``,
    each female ids first then male ids (with ``groups``: in the order of ``groups``, e.g.
    ``("dark", "light")`` for the thesis' racial-bias study, sec. 2.5.3; K > 2 groups, e.g.
    gender x skin tone's four, each give ``n_test`` and ``n - n_test``, n the smallest).

    Raises:
        ValueError: a gender has no images, or too few for a non-empty train and test split.
    """
    if not 0 < test_ratio < 1:
        raise ValueError(f"test_ratio must be in (0, 1), got {test_ratio}")
    gs = _groups(groups)
    g = normalise_genders(genders, gs)
    by = {k: sorted(i for i, v in g.items() if v == k) for k in gs}
    n = min(len(v) for v in by.values())
    n_test = round(test_ratio * n)
    n_train = n - n_test
    if n_test < 1 or n_train < 1:
        counts = ", ".join(f"{len(by[k])} {k}" for k in gs)
        raise ValueError(f"LIC needs enough images of each group for a balanced split: "
                         f"{counts} gives {n_train} train / {n_test} test per group "
                         f"(test_ratio={test_ratio})")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for k in gs:
        ids = np.asarray(by[k], dtype=np.int64)[rng.permutation(len(by[k]))]
        train += ids[:n_train].tolist()
        test += ids[n_train:n_train + n_test].tolist()
    return train, test


def _mask_form(mask_token: str) -> str:
    toks = tokenize(mask_token)
    if len(toks) != 1:
        raise ValueError(f"mask token {mask_token!r} must be a single token after "
                         f"biaslab.data.gender.tokenize, got {toks}")
    return toks[0]


def preprocess(caption: str, words: str | None = "lic", mask_token: str = "[MASK]") -> str:
    """Mask gender words (``biaslab.data.gender.mask``) and normalise to space-joined tokens:
    ``"A man's dog."`` -> ``"a [MASK] s dog"``. ``words=None``: no masking, only the
    normalisation (thesis Table 2.3: the racial-bias study's captions "are not masked")."""
    return " ".join(tokenize(caption if words is None else mask(caption, words, mask_token)))


def model_vocabulary(texts: Iterable[str]) -> set[str]:
    """Token set (``biaslab.data.gender.tokenize``) of preprocessed model captions (V_pre)."""
    return {t for s in texts for t in tokenize(s)}


def align_vocabulary(texts: Sequence[str], vocab: set[str], unk_token: str,
                     keep: Iterable[str] = ()) -> list[str]:
    """Replace every token not in ``vocab`` (nor in ``keep``, e.g. the mask token) by
    ``unk_token`` (thesis 2.4: y -> y*, words in V_ann but not in V_pre become OOV)."""
    keep = set(keep)
    return [" ".join(t if (t in vocab or t in keep) else unk_token for t in tokenize(s))
            for s in texts]


def resolve_config(classifier: str = "lstm",
                   config: textclf.Config | str | Mapping | None = None) -> textclf.Config:
    """Config for ``lic``: ``None`` -> paper defaults of ``classifier``; a preset name
    (``"paper"``/``"ci"``); a dict of overrides on the paper defaults (may hold ``preset``); or a
    ``LSTMConfig``/``BERTConfig`` used as is.

    Raises:
        ValueError: config kind does not match ``classifier``.
    """
    if config is None:
        return textclf.default_config(classifier)
    if isinstance(config, str):
        return textclf.default_config(classifier, config)
    if isinstance(config, Mapping):
        over = dict(config)
        preset = over.pop("preset", "paper")
        return textclf.default_config(classifier, preset, **over)
    want = "lstm" if classifier == "lstm" else "bert"
    if classifier not in textclf.CLASSIFIERS:
        raise ValueError(f"unknown classifier {classifier!r}; known: {list(textclf.CLASSIFIERS)}")
    if config.kind != want:
        raise ValueError(f"classifier {classifier!r} needs a {want} config, got "
                         f"{type(config).__name__}")
    return config


def derive_seed(seed: int, role: int, k: int = 0) -> int:
    """A 32-bit seed for ``(seed, role, k)`` (``numpy.random.SeedSequence``): independent
    streams for the attackers of one LIC seed."""
    return int(np.random.SeedSequence([int(seed), role, k]).generate_state(1)[0])


def _std(x: Sequence[float]) -> float:
    return float(np.std(x, ddof=1)) if len(x) > 1 else 0.0


def _score(cfg: textclf.Config, train_x, train_y, test_x, test_y, seed: int,
           cache: textclf.PretrainedCache | None = None, n_classes: int = 2) -> float:
    """Train on (train_x, train_y), score the test set by ``lic_score``."""
    model = textclf.train(train_x, train_y, cfg, seed=seed, cache=cache, n_classes=n_classes)
    return lic_score(textclf.predict_proba(model, test_x, cache=cache), np.asarray(test_y))


def lic_details(model_captions: Mapping[int, str],
                human_captions: Mapping[int, Sequence[str]] | None,
                genders: Mapping[int, str],
                classifier: str = "lstm",
                seeds: int | Sequence[int] = 10,
                config: textclf.Config | str | Mapping | None = None,
                words: str | None = "lic",
                mask_token: str = "[MASK]",
                test_ratio: float = 0.1,
                max_human_captions: int | None = None,
                progress: bool = False,
                on_seed: Callable[[dict], None] | None = None,
                workers: int | None = 1,
                groups: Sequence[str] = GENDERS) -> dict:
    """LIC, LIC_M and LIC_D (thesis Eqs. 2.9-2.11), mean and std over seeds, with the split and
    per-seed records (see module doc; :func:`lic` gives LIC alone).

    Args:
        model_captions: image id -> generated caption.
        human_captions: image id -> its human captions, or ``None`` for LIC_M only.
        genders: image id -> ``"female"``/``"male"`` (any case; other values are ignored), or
            -> one of ``groups``.
        classifier: ``lstm`` (paper main results), ``bert_ft`` or ``bert_pre``.
        seeds: number of seeds (``0..n-1``) or the list of seeds. Paper: 10.
        config: see ``resolve_config`` (``None`` = paper hyper-parameters; ``"ci"`` = fast preset).
            ``mask_token`` of the config is set to ``mask_token``.
        words: gender word list to mask (``biaslab.data.gender.WORD_LISTS``); ``None``: no masking
            (thesis Table 2.3, racial bias: "Captions are not masked").
        mask_token: replacement of gender words; must stay one token (``[MASK]``, ``<gender>``).
        test_ratio: test share of the minority count per gender (paper 0.1).
        max_human_captions: cap on the number of human-caption indices for LIC_D.
        progress: tqdm bar over the classifiers trained (their own bars follow
            ``config.progress``).
        on_seed: called after each seed with that seed's record ``{seed, LIC_M, LIC_D,
            LIC_D_per_index, LIC}`` (the CLI writes it to its partial file, so a crash after
            hours keeps the seeds already computed).
        workers: seeds computed at once on forked processes (:func:`biaslab.runtime.parallel.map_jobs`,
            one torch thread each); the result is identical to ``workers=1``. With more than
            one worker the progress bar advances per finished seed and ``on_seed`` is called
            as each seed finishes (completion order, not seed order).
        groups: the groups the classifier tells apart, class 0 first (default
            ``("female", "male")``; thesis sec. 2.5.3's racial-bias LIC: ``("dark", "light")``,
            Zhao et al. 2021's ``bb_skin``; K > 2 groups, e.g. gender x skin tone's four: a
            K-way classifier, module docstring). Unbiased is LIC_M = 25 for any two groups,
            as the split is balanced (about 100 / K^2 for K). ``n_images_by_gender`` is keyed
            by these groups.

    Returns:
        dict with ``LIC_M``, ``LIC_M_std``, ``LIC_D``, ``LIC_D_std``, ``LIC``, ``LIC_std`` (the
        last four ``None`` without human captions), ``n_images``, ``n_images_by_gender``,
        ``n_train_per_gender``, ``n_test_per_gender``, ``n_human_indices``, ``seeds``,
        ``classifier``, ``config``, ``n_dropped_without_human`` and ``per_seed``
        (list of {seed, LIC_M, LIC_D, LIC_D_per_index, LIC}).

    Raises:
        ValueError: no usable images, too few per gender, bad arguments.
    """
    cfg = resolve_config(classifier, config)
    mtok = _mask_form(mask_token)
    cfg = dataclasses.replace(cfg, mask_token=mask_token)
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ValueError("LIC needs at least one seed")

    gs = _groups(groups)
    g = {i: v for i, v in normalise_genders(genders, gs).items() if i in model_captions}
    n_dropped = 0
    if human_captions is not None:
        human_captions = {int(i): ([v] if isinstance(v, str) else list(v))
                          for i, v in human_captions.items()}
        with_h = {i: v for i, v in g.items() if human_captions.get(i)}
        n_dropped = len(g) - len(with_h)
        g = with_h
    if not g:
        raise ValueError(f"LIC: no image has both a label of {'/'.join(gs)} and a model caption"
                         + (" and human captions" if human_captions is not None else ""))
    ids = sorted(g)
    model_text = {i: preprocess(model_captions[i], words, mask_token) for i in ids}

    # BERT: pretrained weights read once, frozen-encoder features computed once per caption
    cache = textclf.PretrainedCache() if cfg.kind == "bert" else None
    human_text: list[dict[int, str]] = []
    if human_captions is not None:
        k_n = min(len(human_captions[i]) for i in ids)
        if max_human_captions is not None:
            if int(max_human_captions) < 1:
                raise ValueError(f"max_human_captions must be >= 1 (or None for all), got "
                                 f"{max_human_captions!r}")
            k_n = min(k_n, int(max_human_captions))
        unk = (textclf.UNK if cfg.kind == "lstm" else cache.load(cfg)[0].unk_token)
        for k in range(k_n):   # masked, not yet aligned (V_pre depends on the seed's split)
            human_text.append({i: preprocess(human_captions[i][k], words, mask_token)
                               for i in ids})

    label = {i: gs.index(g[i]) for i in ids}   # textclf.CLASSES order for (female, male)
    from biaslab.runtime.parallel import map_jobs, resolve_workers
    n_workers = resolve_workers(workers, len(seed_list))
    per_seed_clfs = 1 + len(human_text)
    bar = progress_bar(total=len(seed_list) * per_seed_clfs, desc=f"LIC {classifier}",
                       unit="clf", progress=bool(progress))
    # forked workers cannot move the parent's bar: it advances as their seeds finish
    tick = bar.update if n_workers == 1 else (lambda k=1: None)

    def one_seed(s: int) -> dict:
        train_ids, test_ids = balanced_split(g, s, test_ratio, gs)
        ytr = [label[i] for i in train_ids]
        yte = [label[i] for i in test_ids]
        m = _score(cfg, [model_text[i] for i in train_ids], ytr,
                   [model_text[i] for i in test_ids], yte, derive_seed(s, 0), cache, len(gs))
        tick(1)
        d_k = []
        v_pre = model_vocabulary(model_text[i] for i in train_ids) if human_text else set()
        for k, texts in enumerate(human_text):
            tr = align_vocabulary([texts[i] for i in train_ids], v_pre, unk, keep=[mtok])
            te = align_vocabulary([texts[i] for i in test_ids], v_pre, unk, keep=[mtok])
            d_k.append(_score(cfg, tr, ytr, te, yte, derive_seed(s, 1, k), cache, len(gs)))
            tick(1)
        d = float(np.mean(d_k)) if d_k else None
        rec = {"seed": s, "LIC_M": m, "LIC_D": d, "LIC_D_per_index": d_k,
               "LIC": (m - d) if d is not None else None}
        return {**rec, "_n": (len(train_ids) // len(gs), len(test_ids) // len(gs))}

    def done(i: int, r: dict) -> None:   # in this process, as each seed finishes
        if n_workers > 1:
            bar.update(per_seed_clfs)
        if on_seed is not None:
            on_seed({k: v for k, v in r.items() if k != "_n"})

    with bar:
        per_seed = map_jobs(one_seed, seed_list, n_workers, on_done=done)
    n_train, n_test = per_seed[-1]["_n"]
    per_seed = [{k: v for k, v in r.items() if k != "_n"} for r in per_seed]

    ms = [r["LIC_M"] for r in per_seed]
    out = {"LIC_M": float(np.mean(ms)), "LIC_M_std": _std(ms),
           "LIC_D": None, "LIC_D_std": None, "LIC": None, "LIC_std": None}
    if human_text:
        ds = [r["LIC_D"] for r in per_seed]
        diffs = [r["LIC"] for r in per_seed]
        out.update(LIC_D=float(np.mean(ds)), LIC_D_std=_std(ds), LIC=float(np.mean(diffs)),
                   LIC_std=_std(diffs))
    out.update(
        n_images=len(ids),
        n_images_by_gender={k: sum(1 for v in g.values() if v == k) for k in gs},
        n_train_per_gender=n_train, n_test_per_gender=n_test,
        n_human_indices=len(human_text), n_dropped_without_human=n_dropped,
        seeds=seed_list, classifier=classifier, words=words, mask_token=mask_token,
        test_ratio=test_ratio, config=textclf.config_to_dict(cfg),
        per_seed=per_seed)
    return out


def lic(model_captions: Mapping[int, str], human_captions: Mapping[int, Sequence[str]],
        genders: Mapping[int, str], **options) -> float:
    """LIC = LIC_M - LIC_D (thesis Eq. 2.11, paper 002 Eq. 4), in percentage points (x100),
    the mean over seeds: how much more a sentence classifier reads the group from the model's
    masked captions than from the human ones. Positive = the model amplifies the bias of the
    human captions.

    :func:`lic_details` gives LIC_M, LIC_D, their spread over seeds and the split, and LIC_M
    alone when there are no human captions; the protocol is in the module docstring.

    Args:
        model_captions: image id -> generated caption.
        human_captions: image id -> its human captions (LIC_D's data; required here).
        genders: image id -> group label (``"female"``/``"male"`` by default).
        **options: any keyword of :func:`lic_details` (``classifier``, ``seeds``,
            ``config``, ``words``, ``groups``, ``workers``, ...).

    Returns:
        float, in percentage points (range [-100, 100]).

    Raises:
        ValueError: ``human_captions`` is None, or as :func:`lic_details`.

    Example (model captions that name a dress or a tie by gender, human captions that do
    not: a 2-seed LIC with a small LSTM is far above 0):

    >>> objs = ["dog", "bike", "phone", "cup"]
    >>> model, human, genders = {}, {}, {}
    >>> for i in range(120):
    ...     g = "female" if i % 2 else "male"
    ...     who, wear = ("woman", "dress") if i % 2 else ("man", "tie")
    ...     model[i] = f"a {who} in a {wear} with a {objs[i % 4]}"
    ...     human[i] = [f"a {who} with a {objs[(i // 2) % 4]}"]
    ...     genders[i] = g
    >>> small = textclf.LSTMConfig(embedding_dim=8, hidden_dim=8, epochs=10, lr=2e-2,
    ...                            batch_size=32, progress=False, num_threads=1)
    >>> lic(model, human, genders, seeds=2, config=small) > 20
    True
    """
    if human_captions is None:
        raise ValueError("LIC needs the human captions (LIC_D); lic_details(..., None, ...) "
                         "gives LIC_M alone")
    return float(lic_details(model_captions, human_captions, genders, **options)["LIC"])
