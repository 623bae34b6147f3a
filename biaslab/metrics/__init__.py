"""Bias and caption-quality metrics: pure functions over plain inputs (lists, arrays, tables).

Submodules: ``captions`` (Ratio, Error), ``biasamp`` (BiasAmp, DBA_G, DBA_O), ``leakage``,
``retrieval`` (Bias@K, MaxSkew@K), ``quality`` (BLEU-4, CIDEr, METEOR, CLIPScore), ``lic``
(LIC, LIC_M, LIC_D).
"""
