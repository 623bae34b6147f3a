"""Write params.yaml as the Hydra composition of conf/ (the same composition `dvc exp run -S`
does), optionally with overrides: `python scripts/compose_params.py data=coco_mini`."""
import sys
from pathlib import Path

from dvc.utils.hydra import compose_and_dump

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    # DVC's plug-in path: hydra_plugins/ registers ${repo_path:...} against this checkout
    compose_and_dump(str(ROOT / "params.yaml"), str(ROOT / "conf"), None, "config", str(ROOT),
                     sys.argv[1:])
