"""DVC stage `audit`: REVISE-style gender audit of the prepared dataset (logic: biaslab.analysis.audit_run),
and the same person- and object-based measures for the run's protected attribute
(biaslab.analysis.audit_attribute).

Reads  data/prepared/{images,captions,persons,objects}.parquet, data/labels/images.parquet,
data/prepared/perceived_gender.parquet (skin tone, for attribute skin / gender_skin),
data/features/images{,_ids}.npy (the appearance test), the categories' supercategories of
<data.root>/annotations/instances_*.json, the `audit:` section, `attribute` and `data.root` of
params.yaml; writes metrics/audit.json (its "attribute" block:
biaslab.analysis.audit_attribute.attribute_audit's summary), the charts plots/audit/*.png and
the full tables plots/audit/{objects,words,distance}.csv and
plots/audit/attribute_{objects,words,supercategories,distance,appearance}.csv (per group of
the attribute; supercategories only where the data has them). Gender is the
caption-derived label of data/labels/images.parquet, as in the gender audit.

Usage (from the repository root): python stages/audit.py [--params params.yaml]
    [--prepared data/prepared] [--labels data/labels/images.parquet]
    [--metrics metrics/audit.json] [--plots plots/audit]
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from biaslab.analysis import attribute_eval, audit_attribute, audit_figures, audit_run
from biaslab.models.features import load_features
from biaslab.runtime.io import (InputError, atomic_path, load_params, read_parquet, run_stage,
                                stage_parser, write_json)
from biaslab.runtime.settings import from_params

def _write_csv(df, path: Path) -> None:
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.6g")


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--prepared", default="data/prepared")
    ap.add_argument("--labels", default="data/labels/images.parquet")
    ap.add_argument("--metrics", default="metrics/audit.json")
    ap.add_argument("--plots", default="plots/audit")
    ap.add_argument("--features", default="data/features",
                    help="images.npy / images_ids.npy of stage features (the appearance test)")
    args = ap.parse_args(argv)

    params = load_params(args.params)
    try:
        s = from_params(audit_run.AuditSettings, params.get("audit"), "audit")
    except ValueError as e:
        raise InputError(args.params, str(e)) from None
    top_k, p = int(s.top_k), s.criteria()

    prep = Path(args.prepared)
    tables = {n: read_parquet(prep / f"{n}.parquet")
              for n in ("images", "captions", "persons", "objects")}
    labels = read_parquet(args.labels)
    result = audit_run.run_audit(**tables, labels=labels, **p)

    plots = Path(args.plots)
    audit_figures.plot_audit(result, plots, top_k=top_k)
    _write_csv(result.objects, plots / "objects.csv")
    _write_csv(result.words, plots / "words.csv")
    _write_csv(result.distance_table, plots / "distance.csv")
    metrics = audit_run.audit_metrics(result, top_k=top_k)

    # the run's protected attribute (gender: the same images as above, in the per-group form)
    attribute = params.get("attribute", "gender")
    perceived = prep / "perceived_gender.parquet"
    groups = attribute_eval.group_labels(
        attribute, dict(zip(labels["image_id"].astype(int), labels["gender"])),
        read_parquet(perceived) if perceived.exists() else None)
    # the context by supercategory (the data's own category -> supercategory mapping) and the
    # appearance test (the run's frozen image features)
    feat_ids, feats = load_features(Path(args.features) / "images")
    summary, a_tables = audit_attribute.attribute_audit(
        tables["images"], tables["captions"], tables["persons"], tables["objects"], groups,
        attribute, attribute_eval.attribute_groups(attribute), top_k=top_k,
        min_count=p["min_count"], alpha=p["alpha"], correction=p["correction"],
        area=p["area"], center_norm=p["center_norm"], min_person_px=p["min_person_px"],
        distance_person=p["distance_person"],
        supercategories=audit_attribute.read_supercategories(
            (params.get("data") or {}).get("root") or "data/raw"),
        features=(feats, feat_ids),
        appearance=s.appearance)
    metrics["attribute"] = summary
    for name in ("objects", "words", "supercategories", "distance", "appearance"):
        # a section without its input (no supercategories in the data): a one-row table that
        # says why, so that every declared out exists
        t = a_tables.get(name)
        if t is None:
            t = pd.DataFrame({"skipped": [summary[name]["skipped"]]})
        _write_csv(t, plots / f"attribute_{name}.csv")
    write_json(args.metrics, metrics)
    o, w = metrics["objects"], metrics["words"]
    ao = summary["objects"]
    print(f"audit: {metrics['images']['total']} images; objects {o['n_significant']}/"
          f"{o['n_tested']} significant, words {w['n_significant']}/{w['n_tested']}; "
          f"attribute {attribute} {summary['images']}: objects {ao['n_significant']}/"
          f"{ao['n_tested']} significant; wrote {args.metrics} and {plots}/")
    return 0


if __name__ == "__main__":
    run_stage(main)
