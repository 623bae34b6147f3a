"""Where the training stages put one model per training set x seed.

``data/models/<kind>/<name>/<name>-<seed>/`` and ``dvclive/<kind>/<name>/<name>-<seed>/``:
one DVC stage per training set (``<name>``: a dataset, or a model-level method) owns the
``<name>/`` directory and trains every seed into it (biaslab.runtime.parallel); the run directory keeps
the ``<name>-<seed>`` name that the overlaid DVCLive plots use to colour runs.
"""
from __future__ import annotations

import os
from pathlib import Path


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


def repo_path(rel: str, root: str | os.PathLike | None = None) -> str:
    """``rel`` as an absolute, normalised path against the repository ``root`` (default: the
    nearest directory at or above the working directory that holds ``.dvc``). The Hydra
    resolver ``${repo_path:...}`` of conf/data: DVC runs queued and
    ``--temp`` experiments in a copy under ``.dvc/tmp/exps/``, where a relative data root
    outside the repository (``../shared/coco-mini``) or an untracked one (``data/raw/coco``)
    does not exist; composed to an absolute path it names the same data from every copy. An
    absolute ``rel`` is returned normalised."""
    if root is None:
        from biaslab.runtime.guard import repo_root
        cwd = Path.cwd().resolve()
        root = repo_root(cwd) or cwd
    return os.path.normpath(os.path.join(root, os.path.expanduser(str(rel))))


def register_resolvers(root: str | os.PathLike | None = None) -> None:
    """Register the OmegaConf resolver ``repo_path`` (:func:`repo_path` against ``root``, the
    repository whose conf/ is composed; replaces an earlier registration)."""
    from omegaconf import OmegaConf
    base = None if root is None else str(Path(root).resolve())
    OmegaConf.register_new_resolver("repo_path", lambda rel: repo_path(rel, base),
                                    replace=True)
