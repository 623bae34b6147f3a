"""Stage `eval_attribute`: the captioners' bias for the run's protected attribute (param
``attribute``: gender | skin | gender_skin) -> metrics/attribute.json,
plots/attribute.csv.

Reads every captioner's test captions (data/captions/<row>-<seed>.json, written by stage
eval_captioner), the human captions (data/prepared/captions.parquet), the gender labels of
eval_captioner (``eval_captioner.gender_source``; data/prepared/perceived_gender.parquet or
data/labels/images.parquet) and the perceived skin-tone labels (the ``skin`` column of
data/prepared/perceived_gender.parquet, bb_skin Light/Dark).

For ``skin`` and ``gender_skin`` each results set gets LIC_M, LIC_D, LIC over the attribute's
groups (``biaslab.metrics.evaluate.evaluate_captions``: skin captions unmasked, thesis sec.
2.5.3; gender_skin a 4-way classifier with gender words masked) and, for gender_skin, Error
per group with the worst-group gap; rows are summarised over captioner seeds (mean, t 95 %
CI, n). For ``gender`` the metrics are eval_captioner's (metrics/captioning.json) and this
stage reports the group sizes only. Every attribute reports the captioned test images per
group and the smallest difference of a per-image rate the two smallest groups can detect
(``biaslab.analysis.attribute_eval.min_detectable_difference``).

Params: ``attribute``, ``lic`` (classifier, preset, seeds, num_threads, workers,
max_human_captions), ``label.words``, ``eval_captioner.gender_source``.

metrics/attribute.json::

    {"attribute", "groups", "gender_source", "test_images": {"n", "per_group",
     "smallest_pair", "min_detectable_difference_pp", "alpha", "power"},
     "metrics": "computed here" | "metrics/captioning.json",
     "rows": {row: {key: stats.record over captioner seeds, "per_seed": [...]}}}
"""
from __future__ import annotations

import csv
from pathlib import Path

from biaslab.analysis import attribute_eval as A
from biaslab.captioning.evaluation import gender_labels, seed_records
from biaslab.metrics.files import read_predictions
from biaslab.runtime.io import (InputError, atomic_path, load_params, read_parquet, run_stage,
                                skip_without_captions, stage_parser, write_json)
from biaslab.runtime.parallel import map_jobs
from biaslab.runtime.progress import bar as progress_bar

OUTS = ["metrics/attribute.json", "plots/attribute.csv"]


def results_sets(captions_dir: str | Path = "data/captions") -> list[tuple[str, int, Path]]:
    """``(row, seed, path)`` of every ``<row>-<seed>.json`` results file, sorted.

    Raises:
        InputError: the directory has no results file."""
    out = []
    for p in sorted(Path(captions_dir).glob("*.json")):
        row, _, seed = p.stem.rpartition("-")
        if row and seed.isdigit():
            out.append((row, int(seed), p))
    if not out:
        raise InputError(captions_dir, "no <row>-<seed>.json captions: run stage "
                                       "eval_captioner first")
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    if skip_without_captions("eval_attribute", OUTS):
        return 0
    attribute = params.get("attribute", "gender")    # load_params has checked it
    groups_of = A.attribute_groups(attribute)
    source = (params.get("eval_captioner") or {}).get("gender_source", "auto")
    per = Path(A.PERCEIVED)
    perceived = read_parquet(per) if per.exists() else None
    genders, g_used = gender_labels(source, perceived, read_parquet("data/labels/images.parquet"))
    groups = A.group_labels(attribute, genders, perceived)
    sets = results_sets()
    captioned = sorted({i for _, _, p in sets for i in read_predictions(p)})
    sizes = A.group_sizes(groups, attribute, captioned)
    summary = {"attribute": attribute, "groups": list(groups_of), "gender_source": g_used,
               "test_images": sizes}
    print(f"eval_attribute: attribute {attribute}, {sizes['n']} captioned test images with a "
          f"group: {sizes['per_group']}; smallest detectable difference "
          f"{sizes['min_detectable_difference_pp']} pp (alpha 0.05, power 0.8)")
    rows: dict[str, dict] = {}
    if attribute == "gender":
        summary["metrics"] = "metrics/captioning.json"
    else:
        summary["metrics"] = "computed here"
        lic = params["lic"]
        words = params["label"]["words"]
        caps = read_parquet("data/prepared/captions.parquet").sort_values(
            ["image_id", "caption_id"])
        human = {int(i): list(g["caption"]) for i, g in
                 caps[caps["image_id"].isin(set(captioned))].groupby("image_id")}
        metrics = ("lic", "error") if attribute == "gender_skin" else ("lic",)

        def job(item):
            from biaslab.metrics.evaluate import evaluate_captions
            _, _, path = item
            det = evaluate_captions(read_predictions(path), groups, human, metrics=metrics,
                                    words=words, classifier=lic["classifier"],
                                    preset=lic["preset"], seeds=int(lic["seeds"]),
                                    num_threads=lic.get("num_threads"),
                                    max_human_captions=lic.get("max_human_captions"),
                                    attribute=attribute)
            return A.flat_metrics(det, attribute)

        bar = progress_bar(total=len(sets), desc=f"eval_attribute {attribute}", unit="set")
        flats = map_jobs(job, sets, workers=lic.get("workers", 1),
                         on_done=lambda i, r: bar.update(1))
        bar.close()
        keys = A.metric_keys(attribute)
        by_row: dict[str, list] = {}
        for (row, seed, _), flat in zip(sets, flats):
            by_row.setdefault(row, []).append((seed, flat))
        for row, items in sorted(by_row.items()):
            rows[row] = seed_records([f for _, f in items], keys, [s for s, _ in items])
    summary["rows"] = rows
    write_json("metrics/attribute.json", summary)
    with atomic_path("plots/attribute.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["attribute", "row", "metric", "mean", "ci95", "n"])
        for row, rec in rows.items():
            for k, r in rec.items():
                if k != "per_seed":
                    w.writerow([attribute, row, k, r["mean"], r["ci95"], r["n"]])
        for g, n in sizes["per_group"].items():
            w.writerow([attribute, "test_images", g, n, "", ""])
    return 0


if __name__ == "__main__":
    run_stage(main)
