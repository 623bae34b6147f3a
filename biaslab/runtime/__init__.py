"""Plumbing every stage shares and no paper defines: atomic I/O and params
(``io``, ``settings``, ``validate``), where models go (``paths``), statistics (``stats``), work
across processes and machines (``parallel``, ``executor``, ``plan``), progress and logging
(``progress``, ``live``, ``runstats``), and reproducibility (``numerics``, ``provenance``,
``lockcheck``, ``guard``). Nothing here imports the data, models or analysis packages."""
