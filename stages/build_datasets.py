"""Stage `build_datasets`: training-set variants original / oversample / subsample / augment /
synthetic (paper 000 Eqs. 2-3) and matched (a random subset of original of sub-sampling's size
and gender counts: its capacity control; params `datasets`, `label.words`) -> data/datasets/<name>.parquet
manifests, metrics/datasets.json (per variant: sizes, group sizes, object and hidden-attribute
skew; `sources`: how many train images every variant draws on; `oversample.tradeoff`: the
smallest skew bound per repeat cap) and plots/datasets/oversample_tradeoff.png.

The variants are the entries of `biaslab.registry.DATASETS` (builders in biaslab/data/variants.py):
every built-in one, then each installed plug-in variant that `classifier.datasets`,
`captioner.datasets` or `artifact.datasets` names.

Param `attribute`: for skin / gender_skin the counterfactuals are of that
attribute's groups (stage generate), every manifest gets a `group` column (the originals': the
perceived group of data/prepared/perceived_gender.parquet, None where the image has none) and
S_augment adds the groups other than the image's own (every group where it has none). The
resampling baselines (oversample, subsample and the size-matched control) balance the
attribute's groups: they need each image's group, so the images without one are left out
(paper 000 appendix B.1's point; `unlabelled_left_out` in metrics/datasets.json)."""

from biaslab.data import datasets as D
from biaslab import registry
from biaslab.analysis.figures import oversample_tradeoff, skew_by_dataset
from biaslab.runtime.io import (InputError, load_params, read_parquet, run_stage, stage_parser,
                                write_json, write_parquet)
from biaslab.data.variants import VariantContext


def variant_names(params: dict) -> list[str]:
    """Every built-in variant (registration order), then the other registered names that the
    training and artifact lists ask for (first mention order). Raises InputError naming an
    unknown one."""
    names = [n for n in registry.DATASETS.names() if registry.DATASETS.builtin(n)]
    for group in ("classifier", "captioner", "artifact"):
        for n in (params.get(group) or {}).get("datasets") or []:
            if n not in registry.DATASETS:
                raise InputError("params.yaml", f"{group}.datasets: unknown training set {n!r}; "
                                                f"registered: {registry.DATASETS.names()}")
            if n not in names:
                names.append(n)
    return names

PREP = "data/prepared"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    p = params["datasets"]
    d = D.original(read_parquet(f"{PREP}/images.parquet"), read_parquet(f"{PREP}/captions.parquet"),
                   read_parquet(f"{PREP}/objects.parquet"), read_parquet("data/labels/images.parquet"),
                   read_parquet("data/split.parquet"), splits=p["splits"])
    attribute = params.get("attribute", "gender")
    if attribute != "gender":   # each original's perceived group
        from biaslab.analysis.attribute_eval import PERCEIVED, group_labels
        groups = group_labels(attribute, dict(zip(d["image_id"], d["gender"])),
                              read_parquet(PERCEIVED))
        d = d.assign(group=[groups.get(int(i)) for i in d["image_id"]])
    cf = D.counterfactuals(read_parquet("data/select/selected.parquet"), d,
                           words=params["label"]["words"])
    sources = {"train_gendered": len(d), "with_counterfactuals": 0, "used": len(d),
               "same_sources": bool(p["same_sources"])}
    d_cf, cf = D.same_sources(d, cf)
    sources["with_counterfactuals"] = len(d_cf)
    if p["same_sources"]:
        d = d_cf
        sources["used"] = len(d)
    if len(d) == 0:
        raise SystemExit("build_datasets: no training image has counterfactuals for every group")
    ctx = VariantContext(original=d, counterfactuals=cf, params=p)
    variants = {name: ctx.variant(name) for name in variant_names(params)}
    attributes = read_parquet(f"{PREP}/attributes.parquet")
    attributes = attributes if attributes.shape[1] > 1 else None
    metrics = {}
    for name, m in variants.items():
        write_parquet(f"data/datasets/{name}.parquet", m)
        c = D.cooccurrence(m, attributes)
        metrics[name] = {k: v for k, v in c.items()
                         if not isinstance(v, dict)}  # flat summary; full counts below
        if "max_skew" in m.attrs:
            metrics[name]["max_skew_bound"] = m.attrs["max_skew"]
        if "group" in m.columns and "n_unlabelled" in m.attrs:
            metrics[name]["unlabelled_left_out"] = int(m.attrs["n_unlabelled"])
        metrics[name]["counts"] = {k: v for k, v in c.items() if isinstance(v, dict)}
        if "group" in m.columns:   # samples per group of the attribute (None: no label)
            metrics[name]["by_group"] = {str(g): int(n) for g, n in m["group"].fillna(
                "none").value_counts().sort_index().items()}
    cols = [c for c in attributes.columns if c != "image_id"] if attributes is not None else []
    skew_by_dataset({label: {n: m.get(f"{label}_mean_abs_skew") for n, m in metrics.items()}
                     for label in ["objects"] + cols}, "plots/datasets/skew.png")
    # what a repeat cap costs in balance on this data: the cap used is one
    # point of this curve, so a reader can see what a larger one would buy
    caps = sorted({1, 2, 5, 10, 20, 50, 100, 200, 500}
                  | ({int(p["max_copies"])} if p["max_copies"] is not None else set()))
    curve = D.oversample_tradeoff(d, caps=(*caps, None), max_factor=p["max_factor"],
                                  seed=p["seed"])
    metrics["oversample"]["tradeoff"] = {  # keyed by cap: DVC flattens dicts, not lists
        ("none" if r["max_copies"] is None else str(r["max_copies"])):
            {k: v for k, v in r.items() if k != "max_copies"} for r in curve}
    oversample_tradeoff(curve, "plots/datasets/oversample_tradeoff.png", used=p["max_copies"])
    metrics["sources"] = sources
    write_json("metrics/datasets.json", metrics)
    for n, m in metrics.items():
        print(n, {k: v for k, v in m.items() if k not in ("counts", "tradeoff")})
    return 0


if __name__ == "__main__":
    run_stage(main)
