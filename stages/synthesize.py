"""Stage `synthesize`: the embedded synthetic COCO-layout dataset with a planted gender-context
correlation (params `synthetic`) -> data/raw/synthetic/."""
import shutil
from pathlib import Path

from biaslab.io import load_params, write_json
from biaslab.synthetic import generate

OUT = Path("data/raw/synthetic")


def main() -> None:
    p = load_params()["synthetic"]
    # Generate into a temporary sibling and rename, so a killed run leaves no partial dataset.
    tmp = OUT.with_name(OUT.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    summary = generate(tmp, **p)
    shutil.rmtree(OUT, ignore_errors=True)
    tmp.rename(OUT)
    write_json("metrics/synthetic.json", summary)


if __name__ == "__main__":
    main()
