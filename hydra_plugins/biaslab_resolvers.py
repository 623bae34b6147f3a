"""Hydra plug-in module found by DVC's composition (``dvc exp run``; DVC scans
``hydra_plugins/`` at the repository root, ``hydra.plugins_path``): registers the project's
OmegaConf resolvers (``biaslab.runtime.paths.register_resolvers``) so that conf/ can write
``${repo_path:../shared/coco-mini}``."""
from pathlib import Path

from biaslab.runtime.paths import register_resolvers

register_resolvers(Path(__file__).resolve().parents[1])   # the repository DVC composes
