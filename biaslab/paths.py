"""Where the training stages put one model per training set x seed.

``data/models/<kind>/<name>/<name>-<seed>/`` and ``dvclive/<kind>/<name>/<name>-<seed>/``:
one DVC stage per training set (``<name>``: a dataset, or a model-level method) owns the
``<name>/`` directory and trains every seed into it (biaslab.parallel); the run directory keeps
the ``<name>-<seed>`` name that the overlaid DVCLive plots use to colour runs.
"""
from __future__ import annotations


def model_dir(kind: str, name: str, seed: int) -> str:
    """``data/models/<kind>/<name>/<name>-<seed>`` (kind: ``classifier`` | ``captioner``)."""
    return f"data/models/{kind}/{name}/{name}-{int(seed)}"


def live_dir(kind: str, name: str, seed: int) -> str:
    """``dvclive/<kind>/<name>/<name>-<seed>``: the run's DVCLive directory."""
    return f"dvclive/{kind}/{name}/{name}-{int(seed)}"
