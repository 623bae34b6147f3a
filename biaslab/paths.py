"""Where the training stages put one model per training set x seed.

``data/models/<kind>/<name>/<name>-<seed>/`` and ``dvclive/<kind>/<name>/<name>-<seed>/``:
one DVC stage per training set (``<name>``: a dataset, or a model-level method) owns the
``<name>/`` directory and trains every seed into it (biaslab.parallel); the run directory keeps
the ``<name>-<seed>`` name that the overlaid DVCLive plots use to colour runs.
"""
from __future__ import annotations


def slug(name: str) -> str:
    """A file-name-safe form of a model name (``microsoft/resnet-50`` -> ``resnet-50``; a local
    directory -> its last part): letters, digits, ``-``, ``_`` and ``.`` only."""
    last = str(name).rstrip("/").replace("\\", "/").rsplit("/", 1)[-1] or "model"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in last)


def model_dir(kind: str, name: str, seed: int, variant: str | None = None) -> str:
    """``data/models/<kind>/<name>/<name>-<seed>`` (kind: ``classifier`` | ``captioner``);
    with ``variant`` (e.g. a second classifier backbone, :func:`slug`-ed)
    ``.../<name>-<seed>-<variant>``, in the same stage-owned ``<name>/`` directory."""
    tail = f"-{slug(variant)}" if variant else ""
    return f"data/models/{kind}/{name}/{name}-{int(seed)}{tail}"


def live_dir(kind: str, name: str, seed: int, variant: str | None = None) -> str:
    """``dvclive/<kind>/<name>/<name>-<seed>[-<variant>]``: the run's DVCLive directory."""
    tail = f"-{slug(variant)}" if variant else ""
    return f"dvclive/{kind}/{name}/{name}-{int(seed)}{tail}"
