"""Leakage (Wang et al. 2019, "Balanced datasets are not enough"; paper 000 Eq. 7).

An attacker ``f`` predicts the protected group ``g`` from a sample's object vector ``y``.
Paper 000 sec. 3.1, Eq. (7):

    LK_M = 1/|T'| * sum_{(y, g) in T'} f_g(y) * 1[argmax_g' f_g'(y) = g]

i.e. the attacker's probability of the true group, counted only where its prediction is
correct (not plain accuracy); ``LK_D`` is "similarly computed" on ground-truth labels and
``Leakage = LK_M - LK_D``. :func:`leakage` returns it alone, :func:`leakage_details` with its
parts. Reported x100 (percentage points) (paper 000 Table 1: Leakage 7.5 ...). For two
balanced groups and an attacker that learns nothing Eq. 7 lies between 25 (calibrated 0.5
scores) and 50 (over-confident scores); plain accuracy (``acc_*``, reported alongside) is 50.

Decisions (the paper gives no attacker details):

* Attacker (:class:`Attacker`, apart from the definition's arguments): MLP ``Linear -> ReLU``
  x len(hidden) -> ``Linear(|G|)``, softmax output, trained with Adam on cross-entropy in
  mini-batches for a fixed number of epochs (defaults: two hidden layers of 128, 30 epochs,
  batch 128, lr 2e-3 -- chosen for speed on CPU; about 2-3 s for 1,000 samples x 20 objects x
  5 rounds on 2 cores).
* Train / test (paper 000 sec. 3.1: f is "trained on a training set T", Eq. 7 averages over
  the test set T'): ``LK_D``'s attacker is trained on the ground-truth objects of the
  training images and scored on those of the test images; ``LK_M``'s attacker is trained on
  the model's predictions for the training images and scored on its predictions for the test
  images (Wang et al. 2019, code ``object_multilabel/attacker.py``: the attacker is fit on
  the model's outputs for the training split and evaluated on the test split). Without a
  training set :func:`leakage` falls back to splitting the given set (``protocol:
  "holdout"``), which is not paper 000's protocol.
* Gender-balanced sampling (Wang et al. 2019): each round draws the same number of training
  samples per group (the smallest training group, or ``n_per_group``) and of test samples
  per group (the smallest test group), without replacement. ``LK_D`` and ``LK_M`` use the
  *same* rows in a round, and attackers with the same initialisation seed, so their
  difference is paired.
* ``pred_objects`` may be scores; with ``threshold`` (default 0.5) they are binarised
  (``>= threshold``), matching "input y (i.e. set of objects)"; ``threshold=None`` feeds the
  scores as they are.
* Accuracy-matched leakage (Wang et al. 2019 sec. 4.2):
  :func:`dataset_leakage_curve` perturbs the ground truth to a range of macro F1 levels and
  :func:`lk_d_at_f1` reads LK_D at a model's own F1, so ``LK_M - LK_D(F1_M)`` compares a
  model with data *as noisy as the model*; paper 000's ``LK_M - LK_D`` compares it with the
  noiseless ground truth, which a weaker model "beats" by being noisy.
* ``rounds`` rounds with seeds derived from ``seed``; reported values are means over rounds,
  ``*_std`` the sample standard deviations over rounds (the attacker's own variability; the
  uncertainty over model seeds is summarised by the caller with ``biaslab.runtime.stats``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Sequence

import numpy as np

from biaslab.metrics.validation import object_pair
from biaslab.runtime.progress import bar as progress_bar

_UNDEFINED = {None, "undefined", "other", "both", "none", ""}


@dataclasses.dataclass(frozen=True)
class Attacker:
    """The attacker of :func:`leakage`: how it is built and trained, not what Leakage is
    (paper 000 gives no attacker details; these are our choices, module docstring).

    Attributes:
        hidden: widths of the MLP's hidden layers (``Linear -> ReLU`` each), >= 1 each.
        epochs: passes over the attacker's training rows (>= 1).
        lr: Adam learning rate (> 0).
        batch_size: mini-batch rows (>= 1).
        weight_decay: Adam weight decay (>= 0).
        num_threads: torch intra-op threads while training (restored afterwards; None: leave
            torch's setting). The result does not depend on it.

    Raises:
        ValueError: a value out of its range, naming the field.
    """
    hidden: tuple[int, ...] = (128, 128)
    epochs: int = 30
    lr: float = 2e-3
    batch_size: int = 128
    weight_decay: float = 0.0
    num_threads: int | None = 1

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        if any(h < 1 for h in self.hidden):
            raise ValueError(f"Attacker.hidden must hold widths >= 1, got {self.hidden}")
        for k in ("epochs", "batch_size"):
            if int(getattr(self, k)) < 1:
                raise ValueError(f"Attacker.{k} must be >= 1, got {getattr(self, k)}")
        if not float(self.lr) > 0 or float(self.weight_decay) < 0:
            raise ValueError(f"Attacker.lr must be > 0 and weight_decay >= 0, got {self.lr} "
                             f"and {self.weight_decay}")

    def training(self) -> dict:
        """The keyword arguments of :func:`attacker_score` (every field but the threads)."""
        return dict(hidden=self.hidden, epochs=int(self.epochs), lr=float(self.lr),
                    batch_size=int(self.batch_size), weight_decay=float(self.weight_decay))


def _groups_and_labels(genders, groups) -> tuple[list, np.ndarray, np.ndarray]:
    gen = [g.item() if isinstance(g, np.generic) else g for g in genders]
    if groups is None:
        groups = sorted({g for g in gen if not _is_undefined(g)}, key=str)
    groups = list(groups)
    if len(groups) < 2:
        raise ValueError(f"need at least two groups, got {groups!r}")
    gi = {g: i for i, g in enumerate(groups)}
    keep = np.array([g in gi for g in gen], dtype=bool)
    lab = np.array([gi.get(g, -1) for g in gen], dtype=np.int64)
    return groups, keep, lab


def _is_undefined(g) -> bool:
    if g is None:
        return True
    if isinstance(g, float) and math.isnan(g):
        return True
    try:
        return g in _UNDEFINED
    except TypeError:
        return False


def _train_attacker(x, y, n_classes, hidden, epochs, lr, batch_size, weight_decay, seed):
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers, d = [], x.shape[1]
        for h in hidden:
            layers += [torch.nn.Linear(d, h), torch.nn.ReLU()]
            d = h
        layers.append(torch.nn.Linear(d, n_classes))
        model = torch.nn.Sequential(*layers)
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        gen = torch.Generator().manual_seed(seed)
        xt = torch.as_tensor(x, dtype=torch.float32)
        yt = torch.as_tensor(y, dtype=torch.long)
        n = len(xt)
        model.train()
        for _ in range(epochs):
            perm = torch.randperm(n, generator=gen)
            for s in range(0, n, batch_size):
                idx = perm[s:s + batch_size]
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
                loss.backward()
                opt.step()
    model.eval()
    return model


def _scores(model, x, y) -> tuple[float, float]:
    """(Eq. 7 score, accuracy) of an attacker on (x, y), as fractions."""
    import torch

    with torch.no_grad():
        p = torch.softmax(model(torch.as_tensor(x, dtype=torch.float32)), dim=1).numpy()
    pred = p.argmax(axis=1)
    correct = pred == y
    p_true = p[np.arange(len(y)), y]
    return float(np.mean(p_true * correct)), float(np.mean(correct))


def attacker_score(train_x, train_g, test_x, test_g, *, hidden: Sequence[int] = (128, 128),
                   epochs: int = 30, lr: float = 2e-3, batch_size: int = 128,
                   weight_decay: float = 0.0, seed: int = 0) -> dict:
    """Train one attacker on (train_x, train_g) and score it on the test set (paper 000 Eq. 7).

    Args:
        train_x, test_x: float arrays (n, d) of object vectors.
        train_g, test_g: int arrays (n,) of group indices in [0, |G|).
        hidden, epochs, lr, batch_size, weight_decay: attacker MLP / training settings.
        seed: initialisation and shuffling seed.

    Returns:
        dict ``lk`` (Eq. 7, x100) and ``acc`` (accuracy, x100).

    Raises:
        ValueError / RuntimeError from torch on misshaped inputs or group indices out of range.
    """
    train_g = np.asarray(train_g, dtype=np.int64)
    test_g = np.asarray(test_g, dtype=np.int64)
    n_classes = int(max(train_g.max(), test_g.max())) + 1
    model = _train_attacker(np.asarray(train_x, dtype=np.float32), train_g, max(n_classes, 2),
                            tuple(hidden), epochs, lr, batch_size, weight_decay, seed)
    lk, acc = _scores(model, np.asarray(test_x, dtype=np.float32), test_g)
    return {"lk": 100.0 * lk, "acc": 100.0 * acc}


#: LK_D per round, memoised by a digest of everything it depends on (see :func:`leakage`).
_DATASET_MEMO: dict[str, list[dict]] = {}
_MEMO_SIZE = 16


def _digest(*parts) -> str:
    h = hashlib.sha1()
    for p in parts:
        if isinstance(p, np.ndarray):
            h.update(str((p.dtype.str, p.shape)).encode())
            h.update(np.ascontiguousarray(p).tobytes())
        else:
            h.update(repr(p).encode())
        h.update(b"|")
    return h.hexdigest()


def leakage_details(gt_objects, pred_objects, genders, *, train_gt=None, train_pred=None,
                    train_genders=None, rounds: int = 5, seed: int = 0,
                    groups: Sequence | None = None, n_per_group: int | None = None,
                    n_test_per_group: int | None = None, test_fraction: float = 0.2,
                    threshold: float | None = 0.5, attacker: Attacker | None = None,
                    progress: bool | None = None) -> dict:
    """Leakage = LK_M - LK_D (paper 000 Eq. 7; Wang et al. 2019), x100, with its parts: LK_M,
    LK_D, their spread over rounds, the attackers' accuracy and the sampling (:func:`leakage`
    gives the number alone).

    Protocol (paper 000 sec. 3.1: the attacker "is trained on a training set T = {(y, g)}"
    and Eq. 7 averages over "the test set T'"; Wang et al. 2019, whose code trains the
    model-leakage attacker on the model's outputs for the TRAINING images and scores it on its
    outputs for the test images):

    * ``LK_D``: attacker trained on the ground-truth object vectors of the training images
      (``train_gt``), scored (Eq. 7) on the ground truth of the test images (``gt_objects``).
    * ``LK_M``: attacker trained on the model's predictions for the training images
      (``train_pred``), scored on its predictions for the test images (``pred_objects``).
      The model has seen its training images, so its predictions there are closer to the
      ground truth than on the test set -- the same choice as Wang et al. 2019.
    * Each round draws a gender-balanced sample of the training rows (``n_per_group`` per
      group, default the smallest training group) and of the test rows
      (``n_test_per_group``, default the smallest test group), both without replacement
      (Wang et al. 2019 train and evaluate attackers on gender-balanced splits), with
      ``numpy.random.default_rng([seed, round])``; LK_D and LK_M use the same rows and the
      same attacker initialisation in a round, so their difference is paired. The sampling
      depends only on the group labels, so every model evaluated on the same images gets the
      same rows.
    * Without ``train_*`` (one labelled set only, e.g. a user's own model outputs), each
      round instead splits the balanced sample of the given set, stratified, into attacker
      train / test (``test_fraction``) -- NOT the protocol of paper 000; ``protocol`` in the
      result says which was used.

    LK_D depends only on the ground truth, the genders and the settings, so it is memoised
    (by a SHA-1 of all of them, last 16 kept): evaluating several models on the same images
    trains the dataset attackers once; the attackers are deterministic, so this changes no
    number.

    Args:
        gt_objects: (n, |O|) ground-truth object labels (0/1) of the test images -> ``LK_D``.
        pred_objects: (n, |O|) the model's predictions for the same images (0/1 or scores in
            [0, 1]) -> ``LK_M``; binarised with ``threshold`` unless it is None.
        genders: (n,) group labels (e.g. "female"/"male"); samples whose label is not in
            ``groups`` are ignored (train and test alike).
        train_gt, train_pred, train_genders: the same three for the training images (all
            three or none).
        rounds: number of balanced sampling / initialisation rounds (>= 1).
        seed: base seed; the result is deterministic given it.
        groups: the groups (default: the sorted distinct test labels except None,
            "undefined", "other", "both", "none", "").
        n_per_group: training samples per group each round (default: the smallest training
            group; hold-out mode: the smallest group of the given set).
        n_test_per_group: test samples per group each round (train/test mode; default: the
            smallest test group).
        test_fraction: attacker-test fraction of the balanced sample (hold-out mode only).
        threshold: binarisation threshold of the predictions (None: use them as given).
        attacker: how the attackers are built and trained (:class:`Attacker`; default
            ``Attacker()``).
        progress: one tqdm bar on stderr over the attacker fits of all rounds (``2 * rounds``,
            ``rounds`` when the dataset attackers are memoised); True / False / None = auto
            (``biaslab.runtime.progress``: drawn on a terminal, in a log only when it runs > 10 s).
            The result does not depend on it.

    Returns:
        dict with ``LK_D``, ``LK_M``, ``leakage`` (means over rounds, x100, Eq. 7),
        ``LK_D_std``, ``LK_M_std``, ``leakage_std`` (sample std over rounds; None with one
        round), ``acc_D``, ``acc_M`` (plain accuracy, x100), ``protocol`` ("train_test" or
        "holdout"), ``n_per_group``, ``n_train``, ``n_test`` (attacker rows per round),
        ``groups``, ``rounds`` (list of per-round dicts).

    Raises:
        ValueError: misshaped inputs, only some of ``train_*``, fewer than two groups, too few
            samples per group, bad rounds / test_fraction / n_per_group.
    """
    import torch

    attacker = Attacker() if attacker is None else attacker
    if not isinstance(attacker, Attacker):
        raise ValueError(f"attacker must be a biaslab.metrics.leakage.Attacker, got "
                         f"{attacker!r}")
    num_threads = attacker.num_threads
    X_d, X_m, gen = object_pair(gt_objects, pred_objects, genders, "test")
    given = [a is not None for a in (train_gt, train_pred, train_genders)]
    if any(given) and not all(given):
        raise ValueError("give all of train_gt, train_pred and train_genders, or none")
    split_mode = not all(given)
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if split_mode and not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if threshold is not None:
        X_m = (X_m >= threshold).astype(np.float32)
    groups, keep, lab = _groups_and_labels(gen, groups)
    idx_te = [np.flatnonzero(keep & (lab == k)) for k in range(len(groups))]
    if split_mode:
        T_d, T_m, lab_tr, idx_tr = X_d, X_m, lab, idx_te
    else:
        T_d, T_m, tgen = object_pair(train_gt, train_pred, train_genders, "train")
        if T_d.shape[1] != X_d.shape[1]:
            raise ValueError(f"train objects have {T_d.shape[1]} columns, test {X_d.shape[1]}")
        if threshold is not None:
            T_m = (T_m >= threshold).astype(np.float32)
        _, keep_tr, lab_tr = _groups_and_labels(tgen, groups)
        idx_tr = [np.flatnonzero(keep_tr & (lab_tr == k)) for k in range(len(groups))]
    smallest = min(len(ix) for ix in idx_tr)
    n_pg = smallest if n_per_group is None else int(n_per_group)
    if n_pg > smallest:
        raise ValueError(f"n_per_group={n_pg} exceeds the smallest training group ({smallest})")
    if split_mode:
        n_te_pg = int(round(n_pg * test_fraction))
        n_tr_pg = n_pg - n_te_pg
        if n_te_pg < 1 or n_tr_pg < 1:
            raise ValueError(f"{n_pg} samples per group are too few for a train/test split")
    else:
        small_te = min(len(ix) for ix in idx_te)
        n_te_pg = small_te if n_test_per_group is None else int(n_test_per_group)
        if n_te_pg > small_te:
            raise ValueError(f"n_test_per_group={n_te_pg} exceeds the smallest test group "
                             f"({small_te})")
        n_tr_pg = n_pg
        if n_tr_pg < 1 or n_te_pg < 1:
            raise ValueError(f"need at least one training and one test sample per group, got "
                             f"{n_tr_pg} and {n_te_pg}")

    plan = []   # per round: (train rows, test rows, attacker seed)
    for r in range(rounds):
        rng = np.random.default_rng([seed, r])
        tr, te = [], []
        for k in range(len(groups)):
            if split_mode:
                pick = rng.choice(idx_tr[k], size=n_pg, replace=False)
                te.append(pick[:n_te_pg])
                tr.append(pick[n_te_pg:])
            else:
                tr.append(rng.choice(idx_tr[k], size=n_tr_pg, replace=False))
        if not split_mode:
            te = [rng.choice(idx_te[k], size=n_te_pg, replace=False)
                  for k in range(len(groups))]
        plan.append((np.concatenate(tr), np.concatenate(te), int(rng.integers(2**31 - 1))))
    kw = attacker.training()
    key = _digest(X_d, T_d, lab, lab_tr, split_mode, [(a, b, s) for a, b, s in plan], kw)

    old_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        d_rounds = _DATASET_MEMO.get(key)
        fits = len(plan) * (1 if d_rounds is not None else 2)
        with progress_bar(desc="leakage attackers", total=fits, unit="fit",
                          progress=progress) as bar:
            if d_rounds is None:
                d_rounds = []
                for tr, te, s in plan:
                    d_rounds.append(attacker_score(T_d[tr], lab_tr[tr], X_d[te], lab[te],
                                                   seed=s, **kw))
                    bar.update(1)
                if len(_DATASET_MEMO) >= _MEMO_SIZE:
                    _DATASET_MEMO.pop(next(iter(_DATASET_MEMO)))
                _DATASET_MEMO[key] = d_rounds
            per_round = []
            for (tr, te, s), d in zip(plan, d_rounds):
                m = attacker_score(T_m[tr], lab_tr[tr], X_m[te], lab[te], seed=s, **kw)
                bar.update(1)
                per_round.append({"LK_D": d["lk"], "LK_M": m["lk"],
                                  "leakage": m["lk"] - d["lk"],
                                  "acc_D": d["acc"], "acc_M": m["acc"]})
    finally:
        if num_threads is not None:
            torch.set_num_threads(old_threads)

    out = {}
    for k in ("LK_D", "LK_M", "leakage", "acc_D", "acc_M"):
        v = np.array([p[k] for p in per_round])
        out[k] = float(v.mean())
        out[k + "_std"] = float(v.std(ddof=1)) if len(v) > 1 else None
    out.update({"protocol": "holdout" if split_mode else "train_test", "n_per_group": n_pg,
                "n_train": n_tr_pg * len(groups), "n_test": n_te_pg * len(groups),
                "groups": groups, "rounds": per_round})
    return out


#: dataset-leakage curves of :func:`dataset_leakage_curve`, memoised like LK_D
_CURVE_MEMO: dict[str, list[dict]] = {}


def leakage(gt_objects, pred_objects, genders, **options) -> float:
    """Leakage = LK_M - LK_D (paper 000 Eq. 7; Wang et al. 2019), in percentage points (x100):
    how much more the model's object predictions reveal the group than the ground truth does.

    The mean over ``rounds`` balanced rounds; positive = the model amplifies the group signal,
    0 = it leaks as much as the data. :func:`leakage_details` gives LK_M, LK_D, their spread
    over rounds and the sampling; the protocol is documented there and in the module.

    Args:
        gt_objects: (n, |O|) ground-truth object labels (0/1) of the test images.
        pred_objects: (n, |O|) the model's predictions for them (0/1 or scores in [0, 1]).
        genders: (n,) group labels.
        **options: any keyword of :func:`leakage_details` (``train_gt``, ``train_pred``,
            ``train_genders``, ``rounds``, ``seed``, ``groups``, ``threshold``, ``attacker``,
            ...).

    Returns:
        float, in percentage points (range [-100, 100]).

    Raises:
        ValueError: as :func:`leakage_details`.

    Example (a model that copies the ground truth leaks exactly what the data leaks: LK_M
    and LK_D use the same rows and attacker seeds, so the difference is 0):

    >>> rng = np.random.default_rng(0)
    >>> g = ["female", "male"] * 20
    >>> y = (rng.random((40, 5)) < 0.5).astype(float)
    >>> leakage(y, y, g, rounds=1, attacker=Attacker(epochs=2))
    0.0
    """
    return float(leakage_details(gt_objects, pred_objects, genders, **options)["leakage"])


def macro_f1(truth, pred, threshold: float = 0.5) -> float | None:
    """Macro-averaged F1 (x100) of object predictions against the ground truth over the
    object columns (``sklearn.metrics.f1_score(average="macro", zero_division=0)``), the
    performance measure Wang et al. 2019 match leakage at. ``pred`` may be scores: binarised
    with ``>= threshold``. None for an empty set.

    Args:
        truth: (n, |O|) 0/1 ground truth; pred: (n, |O|) 0/1 or scores in [0, 1].
    """
    from sklearn.metrics import f1_score
    t = np.asarray(truth) >= 0.5
    p = np.asarray(pred) >= threshold
    if t.size == 0:
        return None
    return 100.0 * float(f1_score(t, p, average="macro", zero_division=0))


def dataset_leakage_curve(gt_objects, genders, *, train_gt, train_genders,
                          flips: Sequence[float] = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3),
                          seed: int = 0, **leakage_kwargs) -> list[dict]:
    """Dataset leakage at a performance level (Wang et al. 2019 sec. 4.2, their code
    ``object_multilabel/natural_leakage.py``): a model that is less accurate than the ground
    truth leaks less gender just by being noisier, so its LK_M is compared with the LK_D of
    ground truth made *as noisy as the model*. For each flip probability p in ``flips`` every
    label of the training and test object matrices is flipped independently with probability
    p (``numpy.random.default_rng([seed, 7919, k])`` for the k-th p), and the perturbed test
    labels' macro F1 against the truth (:func:`macro_f1`) and their LK_D (paper 000 Eq. 7,
    :func:`leakage_details`' train/test protocol with ``leakage_kwargs``) are recorded.

    Args:
        gt_objects, genders: (n, |O|) ground truth and group labels of the test images.
        train_gt, train_genders: the same for the attackers' training images.
        flips: flip probabilities in [0, 0.5] (p = 0 is the unperturbed LK_D).
        seed: base seed (perturbations and attackers); deterministic given it.

    Returns:
        ``[{"p", "f1", "LK_D", "LK_D_std"}]`` sorted by ``f1`` ascending (x100), memoised by a
        digest of all inputs.

    Raises:
        ValueError: a flip probability outside [0, 0.5], no flips, or :func:`leakage_details`'
            errors.
    """
    flips = [float(p) for p in flips]
    if not flips or any(not 0.0 <= p <= 0.5 for p in flips):
        raise ValueError(f"flips must be a non-empty list of probabilities in [0, 0.5], "
                         f"got {flips}")
    X = np.asarray(gt_objects, np.float32)
    T = np.asarray(train_gt, np.float32)
    key = _digest(X, T, repr(list(genders)), repr(list(train_genders)), flips, seed,
                  sorted(leakage_kwargs.items()))
    if key in _CURVE_MEMO:
        return [dict(r) for r in _CURVE_MEMO[key]]
    kw = {"threshold": None, "seed": seed, **leakage_kwargs}
    out = []
    for k, p in enumerate(flips):
        rng = np.random.default_rng([seed, 7919, k])
        xp = np.where(rng.random(X.shape) < p, 1.0 - X, X).astype(np.float32)
        tp = np.where(rng.random(T.shape) < p, 1.0 - T, T).astype(np.float32)
        lk = leakage_details(xp, xp, genders, train_gt=tp, train_pred=tp,
                             train_genders=train_genders, **kw)
        out.append({"p": p, "f1": macro_f1(X, xp), "LK_D": lk["LK_D"],
                    "LK_D_std": lk["LK_D_std"]})
    out.sort(key=lambda r: (r["f1"], -r["p"]))
    if len(_CURVE_MEMO) >= _MEMO_SIZE:
        _CURVE_MEMO.pop(next(iter(_CURVE_MEMO)))
    _CURVE_MEMO[key] = [dict(r) for r in out]
    return out


def lk_d_at_f1(curve: Sequence[dict], f1: float) -> tuple[float, bool]:
    """LK_D of ground truth as noisy as a model of macro F1 ``f1`` (x100): linear
    interpolation in :func:`dataset_leakage_curve`'s points. Returns ``(LK_D, clamped)``;
    ``clamped`` is True when ``f1`` lies outside the curve's F1 range (the end value is used:
    add larger flip probabilities to reach a weaker model)."""
    f = np.array([r["f1"] for r in curve], float)
    v = np.array([r["LK_D"] for r in curve], float)
    if len(f) == 0:
        raise ValueError("empty dataset-leakage curve")
    return float(np.interp(float(f1), f, v)), bool(f1 < f.min() or f1 > f.max())
