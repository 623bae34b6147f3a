"""Check that every stage of dvc.yaml lists the library modules its script can import.

    python scripts/stage_deps.py            # exit 1 and name each stage's missing modules
    python scripts/stage_deps.py --write    # add them to dvc.yaml (comments kept)

The closure is static (biaslab/runtime/stagedeps.py): the script's ``biaslab`` imports,
followed through every module they import. Modules loaded by name are checked by the
end-to-end test from the imports the stages actually made."""
import argparse
import sys
from pathlib import Path

from biaslab.runtime.stagedeps import missing_deps, write_missing

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="add the missing deps to dvc.yaml")
    ap.add_argument("--dvc-yaml", default=str(REPO / "dvc.yaml"))
    a = ap.parse_args(argv)
    if a.write:
        added = write_missing(a.dvc_yaml)
        for stage, files in added.items():
            print(f"{stage}: added {len(files)}: {', '.join(files)}")
        print(f"{a.dvc_yaml}: {sum(map(len, added.values()))} deps added to {len(added)} stages")
        return 0
    missing = missing_deps(a.dvc_yaml)
    for stage, files in missing.items():
        print(f"{a.dvc_yaml}: stage {stage}: imports, but does not list: {', '.join(files)}")
    if missing:
        print("run `python scripts/stage_deps.py --write` to add them", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
