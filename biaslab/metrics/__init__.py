"""Bias and caption-quality metrics: pure functions over plain inputs (lists, arrays, tables).

Each metric has one front door that returns one number, and a ``*_details`` companion that
returns the number with what it was computed from (counts, per-seed or per-round values,
vocabulary), as scikit-learn pairs ``f1_score`` with ``classification_report``:

- LIC: :func:`.lic.lic` / :func:`.lic.lic_details`; percentage points.
- Leakage: :func:`.leakage.leakage` / :func:`.leakage.leakage_details`; percentage points.
- BiasAmp: :func:`.biasamp.bias_amplification` / :func:`.biasamp.bias_amplification_details`;
  percentage points.
- DBA_G, DBA_O: :func:`.dba.dba_g` / :func:`.dba.dba_g_details`, :func:`.dba.dba_o` /
  :func:`.dba.dba_o_details`; percentage points.
- DBAC: :func:`.dbac.dbac` (one direction, with or without the prior correction) /
  :func:`.dbac.dbac_details` (both directions and corrections, lambda_D, lambda_M);
  percentage points.
- Error: :func:`.captions.error` / :func:`.captions.error_by_group`; percent of images.
- Ratio: :func:`.captions.ratio` / :func:`.captions.ratio_details`; max(r, 1/r), >= 1.
- Bias@K, MaxSkew@K: :func:`.retrieval.bias_at_k`, :func:`.retrieval.max_skew_at_k` /
  :func:`.retrieval.retrieval_bias`; a signed fraction in [-1, 1] and a log ratio (nats).

One unit: every bias score that is a difference of rates or scores is in percentage points
(x100), as the papers' tables print them. Ratio is a ratio of counts and the retrieval
metrics keep their papers' own scales (Bias@K and MaxSkew@K, Wang et al. 2021 / Geyik et al.
2019). DBAC's front door asks which direction and correction; its record
(:func:`biaslab.metrics.dbac.dbac_details`) keeps Zhao et al.'s fractions, which Table 2
prints x100 (the ``scale`` of its registry entry).

Inputs are checked by :mod:`biaslab.metrics.validation` (one module: binary matrices, equal
row counts, aligned captions and labels, object pairs, retrieval cut-offs and queries);
per-group values with bootstrap intervals come from
:func:`biaslab.metrics.frame.by_group`.

Submodules: ``captions`` (Ratio, Error), ``biasamp`` (BiasAmp), ``dba`` (DBA_G, DBA_O),
``dbac`` (DBAC), ``leakage``, ``retrieval`` (Bias@K, MaxSkew@K), ``quality`` (BLEU-4, CIDEr,
METEOR, CLIPScore), ``lic`` (LIC, LIC_M, LIC_D), ``frame`` (by group), ``validation``.
"""
