"""Spurious correlations between context and gender (paper 001 appendix D).

Two analyses, both on gender-labelled images with the explicit gender information removed:

* **Caption clusters** (app. D.1, D.3, Table 5): each image's gender-neutralised captions are
  embedded by a sentence encoder and averaged (``f_n = 1/K sum_k f_n^k``), the images are
  clustered into ``M`` clusters with K-Means, and each cluster gets its deviation from gender
  parity ``ΔM`` (:func:`cluster_parity`) and its salient words by Latent Dirichlet Allocation
  (:func:`salient_words`). Whether the clusters deviate from parity more than chance:
  :func:`cluster_auc` (a test image's cluster's male share among the train images predicts
  its gender: ROC AUC with a CI), beside a chi-square test of independence
  (:func:`parity_test`, descriptive).
* **Gender classifiers without gender** (app. D.4, Table 7's "Spurious BG correlations"):
  a classifier trained on person-masked images (background only) or on gender-neutralised
  captions predicts the gender label; its ROC AUC on unseen natural images measures the
  spurious signal (paper 001: 63.4 % for person-masked images, 78.0 % for neutralised
  captions, 71.9 % for unmasked images; chance 50 %). On a contrast set (each source image
  once per gender, background fixed) the background-only classifier must fall to chance
  (:func:`gender_auc` with ``groups``, :func:`auc_difference`).

Choices where paper 001 is silent or where this repository differs (each tested in
tests/test_spurious.py):

* Sentence encoder: latent semantic analysis of the captions in the default tier
  (:func:`lsa_embeddings`, no model pass); any ``features.TextEncoder`` by name (the offline
  ``minilm``, paper 001's ``roberta-base`` in the paper tier) through the same code path.
* ``ΔM`` is in percentage points: 100 x (male share of the cluster's gendered images - male
  share of all gendered images), paper 001 Fig. 2 / Table 5; its 95 % CI is the cluster
  share's Wilson interval (``scipy.stats.binomtest``) minus the overall share (held fixed).
* Salient words: one LDA (scikit-learn, ``M`` topics, batch learning, seeded) is fitted on the
  images' neutralised caption paragraphs (English stop words and words in more than half the
  images dropped); a cluster's words are the top words of the topic with the highest mean
  weight over the cluster's images. Paper 001 names LDA but not how topics map to clusters.
* The classifiers are scikit-learn logistic regressions on frozen features (standardised;
  ``C`` = 1), the default tier's linear probes, where paper 001 fine-tunes a ResNet-50 and a
  BERT-base. Trained on the train split, evaluated on the test split (paper 001: COCO train
  and val with undefined images dropped).
* Persons are removed as the Ratio protocol removes them (``classifier.blackout*``: boxes,
  dilated, filled with the mean colour), not with black pixels as paper 001: a black box
  imitated the synthetic generator's male torso.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from biaslab.runtime import stats

GENDERS = ("female", "male")


def _gender_y(genders: Sequence[str]) -> np.ndarray:
    """1 for "male", 0 for "female"; ValueError on anything else."""
    g = np.asarray([str(x) for x in genders])
    bad = ~np.isin(g, GENDERS)
    if bad.any():
        raise ValueError(f"gender must be 'female' or 'male', got {g[bad][0]!r}")
    return (g == "male").astype(np.int64)


def mean_embeddings(emb: np.ndarray, owner: Sequence[int], ids: Sequence[int]) -> np.ndarray:
    """Per-image mean of caption embeddings (paper 001 app. D.1: ``f_n = 1/K sum_k f_n^k``).

    Args:
        emb: float (c, d), one row per caption.
        owner: (c,) the image id of each caption.
        ids: (n,) the image ids wanted, in output order.

    Returns:
        float32 (n, d).

    Raises:
        ValueError: lengths differ, or an id in ``ids`` has no caption.
    """
    emb = np.asarray(emb, np.float64)
    owner = np.asarray(owner, np.int64)
    if len(emb) != len(owner):
        raise ValueError(f"{len(emb)} embeddings for {len(owner)} caption owners")
    codes, uniq = pd.factorize(owner)
    sums = np.zeros((len(uniq), emb.shape[1]))
    np.add.at(sums, codes, emb)
    counts = np.bincount(codes, minlength=len(uniq))
    pos = pd.Index(uniq).get_indexer(np.asarray(ids, np.int64))
    if (pos < 0).any():
        raise ValueError(f"image {np.asarray(ids)[pos < 0][0]} has no caption")
    return (sums[pos] / counts[pos, None]).astype(np.float32)


def caption_clusters(features: np.ndarray, m: int = 20, seed: int = 0) -> tuple[np.ndarray, object]:
    """K-Means clusters of per-image caption embeddings (paper 001 app. D.1, ``M = 20``).

    Args:
        features: float (n, d), n >= m.
        m: number of clusters.
        seed: K-Means' ``random_state`` (10 initialisations, the best kept).

    Returns:
        ``(labels, model)``: int64 (n,) in [0, m) and the fitted ``sklearn.cluster.KMeans``
        (``model.predict`` assigns new images, e.g. a contrast set's sources).

    Raises:
        ValueError: fewer images than clusters, or m < 2.
    """
    from sklearn.cluster import KMeans
    x = np.asarray(features, np.float64)
    if m < 2 or len(x) < m:
        raise ValueError(f"need at least m >= 2 images for m clusters: {len(x)} images, m = {m}")
    model = KMeans(n_clusters=int(m), n_init=10, random_state=int(seed)).fit(x)
    return model.labels_.astype(np.int64), model


def cluster_parity(labels: Sequence[int], genders: Sequence[str], m: int,
                   overall: float | None = None) -> pd.DataFrame:
    """Each cluster's deviation from gender parity (paper 001 app. D.3, Table 5's ``ΔM``).

    ``ΔM = 100 x (n_male / n in the cluster - overall male share)``, percentage points; its
    95 % CI is the Wilson interval of the cluster's share (``scipy.stats.binomtest``) minus the
    overall share, held fixed.

    Args:
        labels: (n,) cluster of each image, in [0, m).
        genders: (n,) "female" / "male".
        m: number of clusters (empty clusters get n = 0 and None entries).
        overall: the reference male share in [0, 1]; default the share over all n images.

    Returns:
        DataFrame, one row per cluster 0..m-1: ``cluster, n, n_male, n_female, male_share,
        delta_m, lo, hi`` (shares in [0, 1], ``delta_m``/``lo``/``hi`` in points).

    Raises:
        ValueError: lengths differ, a gender other than female / male, a label outside [0, m).
    """
    from scipy.stats import binomtest
    lab = np.asarray(labels, np.int64)
    y = _gender_y(genders)
    if len(lab) != len(y):
        raise ValueError(f"{len(lab)} cluster labels for {len(y)} genders")
    if len(lab) and (lab.min() < 0 or lab.max() >= m):
        raise ValueError(f"cluster labels must lie in [0, {m}), got {lab.min()}..{lab.max()}")
    ref = float(y.mean()) if overall is None else float(overall)
    rows = []
    for c in range(int(m)):
        yc = y[lab == c]
        n, k = int(len(yc)), int(yc.sum())
        if n == 0:
            rows.append({"cluster": c, "n": 0, "n_male": 0, "n_female": 0, "male_share": None,
                         "delta_m": None, "lo": None, "hi": None})
            continue
        ci = binomtest(k, n).proportion_ci(confidence_level=stats.LEVEL, method="wilson")
        rows.append({"cluster": c, "n": n, "n_male": k, "n_female": n - k,
                     "male_share": k / n, "delta_m": 100.0 * (k / n - ref),
                     "lo": 100.0 * (ci.low - ref), "hi": 100.0 * (ci.high - ref)})
    return pd.DataFrame(rows, columns=["cluster", "n", "n_male", "n_female", "male_share",
                                       "delta_m", "lo", "hi"])


def parity_test(labels: Sequence[int], genders: Sequence[str]) -> dict:
    """Chi-square test of independence of cluster and gender (``scipy.stats.chi2_contingency``
    on the clusters x {female, male} table, empty clusters dropped): are the clusters' gender
    shares more different than sampling alone makes them?

    Returns:
        ``{"chi2", "dof", "p", "n", "clusters"}``; ``p`` None where fewer than two clusters or
        one gender only (no test).
    """
    from scipy.stats import chi2_contingency
    lab = np.asarray(labels, np.int64)
    y = _gender_y(genders)
    tab = pd.crosstab(lab, y).reindex(columns=[0, 1], fill_value=0)
    tab = tab[tab.sum(axis=1) > 0]
    out = {"chi2": None, "dof": None, "p": None, "n": int(len(lab)), "clusters": int(len(tab))}
    if len(tab) < 2 or (tab.sum(axis=0) == 0).any():
        return out
    r = chi2_contingency(tab.to_numpy())
    out.update({"chi2": float(r.statistic), "dof": int(r.dof), "p": float(r.pvalue)})
    return out


def cluster_auc(train_labels: Sequence[int], train_genders: Sequence[str],
                test_labels: Sequence[int], test_genders: Sequence[str],
                n_boot: int = 1000, seed: int = 0) -> dict:
    """Do the clusters deviate from parity? As a number with an interval: each test image is
    scored with its cluster's male share among the train images (a cluster without train
    images: the train images' overall share), and the ROC AUC of that score against the test
    images' genders is taken (:func:`gender_auc`, bootstrap over test images). Clusters at
    parity give every image the same score, AUC 0.5; the further their shares spread, the
    higher. The clusters come from captions alone (no label), so fitting them on every image
    leaks nothing; the shares come from the train split only.

    Raises:
        ValueError: lengths differ, a gender other than female / male.
    """
    ltr = np.asarray(train_labels, np.int64)
    ytr = _gender_y(train_genders)
    if len(ltr) != len(ytr):
        raise ValueError(f"{len(ltr)} train cluster labels for {len(ytr)} genders")
    share = pd.Series(ytr).groupby(ltr).mean()
    score = pd.Series(np.asarray(test_labels, np.int64)).map(share) \
        .fillna(float(ytr.mean()) if len(ytr) else 0.5).to_numpy(np.float64)
    return gender_auc(score, test_genders, n_boot=n_boot, seed=seed)


def salient_words(docs: Sequence[str], labels: Sequence[int], m: int, n_words: int = 10,
                  seed: int = 0) -> list[list[str]]:
    """Salient words of each cluster by LDA (paper 001 app. D.1 / D.3: top 10 words).

    One ``LatentDirichletAllocation`` with ``m`` topics (batch, ``random_state=seed``) is fitted
    on ``docs`` (one document per image: its neutralised captions joined), counted by
    ``CountVectorizer`` with English stop words and words in more than half the documents
    dropped; a cluster's words are the ``n_words`` highest-weight words of the topic with the
    highest mean document weight over the cluster's images (ties: the lower topic). Empty
    clusters get [].

    Raises:
        ValueError: lengths differ.
    """
    from sklearn.decomposition import LatentDirichletAllocation
    from sklearn.feature_extraction.text import CountVectorizer
    lab = np.asarray(labels, np.int64)
    if len(lab) != len(docs):
        raise ValueError(f"{len(lab)} cluster labels for {len(docs)} documents")
    try:
        cv = CountVectorizer(stop_words="english", max_df=0.5)
        counts = cv.fit_transform([str(d) for d in docs])
    except ValueError:                       # every word is a stop word or too common
        return [[] for _ in range(int(m))]
    lda = LatentDirichletAllocation(n_components=int(m), learning_method="batch",
                                    random_state=int(seed))
    theta = lda.fit_transform(counts)
    vocab = np.asarray(cv.get_feature_names_out())
    out = []
    for c in range(int(m)):
        rows = theta[lab == c]
        if not len(rows):
            out.append([])
            continue
        topic = int(np.argmax(rows.mean(axis=0)))
        order = np.argsort(-lda.components_[topic], kind="stable")[:int(n_words)]
        out.append([str(w) for w in vocab[order]])
    return out


def fit_gender_classifier(x: np.ndarray, genders: Sequence[str], seed: int = 0):
    """A logistic-regression gender classifier on frozen features (paper 001 app. D.4, as a
    linear probe): ``StandardScaler`` then ``LogisticRegression(C=1, lbfgs)``.

    Args:
        x: float (n, d) features; genders: (n,) "female" / "male", both present.

    Returns:
        the fitted scikit-learn pipeline (``predict_proba(x)[:, 1]`` = P(male)).

    Raises:
        ValueError: one gender only, lengths differ.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    y = _gender_y(genders)
    x = np.asarray(x, np.float64)
    if len(x) != len(y):
        raise ValueError(f"{len(x)} feature rows for {len(y)} genders")
    if len(np.unique(y)) < 2:
        raise ValueError("the training set has one gender only: no classifier")
    return make_pipeline(StandardScaler(), LogisticRegression(
        C=1.0, max_iter=5000, random_state=int(seed))).fit(x, y)


def _auc(y: np.ndarray, s: np.ndarray) -> float:
    """ROC AUC as the Mann-Whitney statistic (midranks for ties, ``scipy.stats.rankdata``):
    equal to ``sklearn.metrics.roc_auc_score`` (tests/test_spurious.py checks it) at about a
    hundredth of its cost, which the bootstrap's thousands of resamples need (60 s vs 0.5 s
    on the default). NaN with one class only."""
    from scipy.stats import rankdata
    y, s = np.ravel(y).astype(bool), np.ravel(s).astype(np.float64)
    n1 = int(y.sum())
    n0 = len(y) - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    r = rankdata(s)
    return float((r[y].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def lsa_embeddings(texts: Sequence[str], dim: int = 100, seed: int = 0) -> np.ndarray:
    """Sentence embeddings by latent semantic analysis: scikit-learn's ``TfidfVectorizer``
    (sublinear tf) then ``TruncatedSVD`` to ``min(dim, vocabulary - 1)`` dimensions (seeded),
    rows L2-normalised. The default tier's caption encoder for the clusters and the text
    classifier (``spurious.text_encoder: lsa``): paper 001 embeds with RoBERTa, available here
    by name (``roberta-base``, or the offline ``minilm``) at the cost of a transformer pass
    over every caption (MiniLM: 32 s for the default's 2,600 captions on one thread).

    Returns float32 (n, d). Raises ValueError for an empty vocabulary."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    x = TfidfVectorizer(sublinear_tf=True).fit_transform([str(t) for t in texts])
    k = max(1, min(int(dim), x.shape[1] - 1))
    z = TruncatedSVD(n_components=k, random_state=int(seed)).fit_transform(x)
    z /= np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
    return z.astype(np.float32)


def gender_auc(scores: Sequence[float], genders: Sequence[str], groups: Sequence | None = None,
               n_boot: int = 1000, seed: int = 0) -> dict:
    """ROC AUC (``sklearn.metrics.roc_auc_score``) of P(male) against the gender labels, with a
    percentile-bootstrap 95 % CI (``biaslab.runtime.stats.bootstrap``) over images, or over ``groups``
    (a contrast set's source images: both versions resampled together).

    Returns:
        ``stats.bootstrap``'s record (``mean``, ``lo``, ``hi``, ``ci95``, ``n`` = images or
        groups), AUC in [0, 1] (0.5 = chance); ``mean`` None with one gender only.

    Raises:
        ValueError: lengths differ, a gender other than female / male.
    """
    y = _gender_y(genders)
    s = np.asarray(scores, np.float64)
    if len(s) != len(y):
        raise ValueError(f"{len(s)} scores for {len(y)} genders")
    if groups is None:
        return stats.bootstrap(_auc, y, s, n_boot=n_boot, seed=seed)
    ys, ss = _grouped(groups, y, s)
    return stats.bootstrap(lambda a, b: _auc(np.concatenate(a), np.concatenate(b)), ys, ss,
                           n_boot=n_boot, seed=seed)


def _grouped(groups, *arrays) -> list[np.ndarray]:
    """Arrays split by group (first-appearance order) into object arrays of sub-arrays."""
    codes, _ = pd.factorize(pd.Series(list(groups)))
    order = np.argsort(codes, kind="stable")
    cuts = np.flatnonzero(np.diff(codes[order])) + 1
    out = []
    for a in arrays:
        parts = np.split(np.asarray(a)[order], cuts)
        obj = np.empty(len(parts), dtype=object)
        obj[:] = parts
        out.append(obj)
    return out


def auc_difference(a: tuple, b: tuple, n_boot: int = 1000, seed: int = 0) -> dict:
    """AUC on set ``a`` minus AUC on set ``b`` (two independent samples: each resampled on its
    own, percentile-bootstrap 95 % CI).

    Args:
        a, b: ``(scores, genders, groups_or_None)`` each, as :func:`gender_auc` takes them.

    Returns:
        ``{"mean", "lo", "hi", "ci95", "n"}`` (``n`` = the smaller sample's units); None
        entries when either AUC is undefined.
    """
    def units(t):
        s, g, grp = t
        y, s = _gender_y(g), np.asarray(s, np.float64)
        if grp is None:
            grp = np.arange(len(y))
        return _grouped(grp, y, s)
    ua, ub = units(a), units(b)
    full = _auc(np.concatenate(list(ua[0])), np.concatenate(list(ua[1]))) - \
        _auc(np.concatenate(list(ub[0])), np.concatenate(list(ub[1])))
    out = {"mean": None, "lo": None, "hi": None, "ci95": None,
           "n": int(min(len(ua[0]), len(ub[0])))}
    if not np.isfinite(full):
        return out
    out["mean"] = float(full)
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(int(n_boot)):
        ia = rng.integers(0, len(ua[0]), len(ua[0]))
        ib = rng.integers(0, len(ub[0]), len(ub[0]))
        reps.append(_auc(np.concatenate(list(ua[0][ia])), np.concatenate(list(ua[1][ia]))) -
                    _auc(np.concatenate(list(ub[0][ib])), np.concatenate(list(ub[1][ib]))))
    r = np.asarray(reps)
    r = r[np.isfinite(r)]
    if len(r) < n_boot / 2:
        return out
    lo, hi = np.quantile(r, [(1 - stats.LEVEL) / 2, (1 + stats.LEVEL) / 2])
    out.update({"lo": float(lo), "hi": float(hi), "ci95": float(max(full - lo, hi - full, 0))})
    return out
