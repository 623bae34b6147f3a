"""Leakage (Wang et al. 2019, "Balanced datasets are not enough"; paper 000 Eq. 7).

An attacker ``f`` predicts the protected group ``g`` from a sample's object vector ``y``.
Paper 000 sec. 3.1, Eq. (7):

    LK_M = 1/|T'| * sum_{(y, g) in T'} f_g(y) * 1[argmax_g' f_g'(y) = g]

i.e. the attacker's probability of the true group, counted only where its prediction is
correct (not plain accuracy); ``LK_D`` is "similarly computed" on ground-truth labels and
``Leakage = LK_M - LK_D``. Reported x100 (paper 000 Table 1: Leakage 7.5 ...). For two
balanced groups and an attacker that learns nothing Eq. 7 lies between 25 (calibrated 0.5
scores) and 50 (over-confident scores); plain accuracy (``acc_*``, reported alongside) is 50.

Decisions (the paper gives no attacker details):

* Attacker: MLP ``Linear -> ReLU`` x len(hidden) -> ``Linear(|G|)``, softmax output, trained
  with Adam on cross-entropy in mini-batches for a fixed number of epochs (defaults: two
  hidden layers of 128, 30 epochs, batch 128, lr 2e-3 -- chosen for speed on CPU; about 2-3 s
  for 1,000 samples x 20 objects x 5 rounds on 2 cores).
* Gender-balanced sampling (Wang et al. 2019): each round draws the same number of samples per
  group (the size of the smallest group, or ``n_per_group``) without replacement, then splits
  them, stratified, into attacker-train / attacker-test (``test_fraction``). ``LK_D`` and
  ``LK_M`` use the *same* samples and split in a round, and attackers with the same
  initialisation seed, so their difference is paired.
* ``pred_objects`` may be scores; with ``threshold`` (default 0.5) they are binarised
  (``>= threshold``), matching "input y (i.e. set of objects)"; ``threshold=None`` feeds the
  scores as they are.
* ``rounds`` rounds with seeds derived from ``seed``; reported values are means over rounds,
  ``*_std`` the population standard deviations over rounds.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

_UNDEFINED = {None, "undefined", "other", "both", "none", ""}


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


def leakage(gt_objects, pred_objects, genders, *, rounds: int = 5, seed: int = 0,
            groups: Sequence | None = None, n_per_group: int | None = None,
            test_fraction: float = 0.2, threshold: float | None = 0.5,
            hidden: Sequence[int] = (128, 128), epochs: int = 30, lr: float = 2e-3,
            batch_size: int = 128, weight_decay: float = 0.0, num_threads: int | None = 1) -> dict:
    """Leakage = LK_M - LK_D (paper 000 Eq. 7; Wang et al. 2019), x100.

    Args:
        gt_objects: array (n, |O|) of ground-truth object labels (0/1) -> ``LK_D``.
        pred_objects: array (n, |O|) of the model's predictions for the same samples (0/1 or
            scores in [0, 1]) -> ``LK_M``; binarised with ``threshold`` unless it is None.
        genders: sequence (n,) of group labels (e.g. "female"/"male"); samples whose label is
            not in ``groups`` are ignored.
        rounds: number of random balanced subsample/split/initialisation rounds (>= 1).
        seed: base seed; the result is deterministic given it.
        groups: the groups (default: the sorted distinct labels except None, "undefined",
            "other", "both", "none", "").
        n_per_group: samples drawn per group each round (default: the smallest group's size).
        test_fraction: attacker-test fraction of the balanced sample (stratified).
        threshold: binarisation threshold for ``pred_objects`` (None: use values as given).
        hidden, epochs, lr, batch_size, weight_decay: attacker MLP / Adam settings.
        num_threads: torch intra-op threads while training (restored afterwards; None: leave).

    Returns:
        dict with ``LK_D``, ``LK_M``, ``leakage`` (means over rounds, x100, Eq. 7),
        ``LK_D_std``, ``LK_M_std``, ``leakage_std``, ``acc_D``, ``acc_M`` (plain accuracy,
        x100), ``n_per_group``, ``n_train``, ``n_test``, ``rounds`` (list of per-round dicts).

    Raises:
        ValueError: misshaped inputs, fewer than two groups, too few samples per group for a
            train/test split, bad rounds/test_fraction.
    """
    import torch

    X_d = np.asarray(gt_objects, dtype=np.float32)
    X_m = np.asarray(pred_objects, dtype=np.float32)
    if X_d.ndim != 2 or X_m.shape != X_d.shape:
        raise ValueError(f"gt_objects and pred_objects must be 2-D of equal shape, got "
                         f"{X_d.shape} and {X_m.shape}")
    gen = list(genders)
    if len(gen) != X_d.shape[0]:
        raise ValueError(f"genders has {len(gen)} entries for {X_d.shape[0]} samples")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if np.isnan(X_d).any() or np.isnan(X_m).any():
        raise ValueError("object arrays contain NaN")
    if threshold is not None:
        X_m = (X_m >= threshold).astype(np.float32)
    groups, keep, lab = _groups_and_labels(gen, groups)
    idx_by_group = [np.flatnonzero(keep & (lab == k)) for k in range(len(groups))]
    smallest = min(len(ix) for ix in idx_by_group)
    n_pg = smallest if n_per_group is None else int(n_per_group)
    if n_pg > smallest:
        raise ValueError(f"n_per_group={n_pg} exceeds the smallest group ({smallest})")
    n_test_pg = int(round(n_pg * test_fraction))
    if n_test_pg < 1 or n_pg - n_test_pg < 1:
        raise ValueError(f"{n_pg} samples per group are too few for a train/test split")

    old_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    per_round = []
    try:
        for r in range(rounds):
            rng = np.random.default_rng([seed, r])
            tr, te = [], []
            for ix in idx_by_group:
                pick = rng.choice(ix, size=n_pg, replace=False)
                te.append(pick[:n_test_pg])
                tr.append(pick[n_test_pg:])
            tr, te = np.concatenate(tr), np.concatenate(te)
            kw = dict(hidden=hidden, epochs=epochs, lr=lr, batch_size=batch_size,
                      weight_decay=weight_decay, seed=int(rng.integers(2**31 - 1)))
            d = attacker_score(X_d[tr], lab[tr], X_d[te], lab[te], **kw)
            m = attacker_score(X_m[tr], lab[tr], X_m[te], lab[te], **kw)
            per_round.append({"LK_D": d["lk"], "LK_M": m["lk"], "leakage": m["lk"] - d["lk"],
                              "acc_D": d["acc"], "acc_M": m["acc"]})
    finally:
        if num_threads is not None:
            torch.set_num_threads(old_threads)

    def agg(key):
        v = np.array([p[key] for p in per_round])
        return float(v.mean()), float(v.std())

    out = {}
    for key in ("LK_D", "LK_M", "leakage", "acc_D", "acc_M"):
        out[key], out[key + "_std"] = agg(key)
    out.update({"n_per_group": n_pg, "n_train": (n_pg - n_test_pg) * len(groups),
                "n_test": n_test_pg * len(groups), "groups": groups, "rounds": per_round})
    return out
