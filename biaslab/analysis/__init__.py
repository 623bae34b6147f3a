"""What the pipeline concludes from its metrics: the dataset audit (``audit``),
the causal probe (``probe``), the control models (``controls``), the synthetic-artifact test
(``artifact``), the planted-bias sweep (``sweep``), spurious correlations (``spurious``), the
backend comparison (``backends``), the validity verdicts (``validity``) and the figures
(``figures``)."""
