"""Stage `synthesize`: the embedded synthetic COCO-layout dataset with a planted gender-context
correlation (params `synthetic`) -> data/raw/synthetic/.

Only the `synthetic` data profile reads it (stage `prepare` reads `${data.root}`). Under any
other profile (`data.source` != synthetic) the stage writes no images: data/raw/synthetic holds
one NOT_USED.txt and metrics/synthetic.json says why, so a run on COCO costs nothing here and
caches no dataset it never reads."""
import shutil
from pathlib import Path

from biaslab.runtime.io import load_params, run_stage, stage_parser, write_json
from biaslab.data.synthetic import generate

OUT = Path("data/raw/synthetic")


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    p, source = params["synthetic"], params["data"]["source"]
    # Generate into a temporary sibling and rename, so a killed run leaves no partial dataset.
    tmp = OUT.with_name(OUT.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if source == "synthetic":
        summary = generate(tmp, **p)
    else:
        # no path in the text: the same bytes wherever the data lies
        reason = (f"data.source is {source!r}: the pipeline reads data.root, not the embedded "
                  "synthetic dataset, so none was generated")
        tmp.mkdir(parents=True)
        (tmp / "NOT_USED.txt").write_text(reason + "\n")
        summary = {"skipped": True, "reason": reason}
    shutil.rmtree(OUT, ignore_errors=True)
    tmp.rename(OUT)
    write_json("metrics/synthetic.json", summary)
    return 0


if __name__ == "__main__":
    run_stage(main)
