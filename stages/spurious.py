"""Stage `spurious` (biaslab.analysis.spurious_eval.run_spurious): spurious correlations between context and gender in the data, and whether
the contrast set removes them (paper 001 appendix D). The definitions and the
choices where paper 001 is silent are in biaslab.analysis.spurious.

* Caption clusters (app. D.1 / D.3): every image of known gender (all splits), its
  gender-neutralised captions embedded (``spurious.text_encoder``) and averaged, K-Means into
  ``spurious.clusters`` clusters, each with ΔM (points from the overall male share, Wilson 95 %
  CI) and its LDA words; a chi-square test of cluster x gender, and the clusters' predictive
  AUC (a test image's cluster's male share among the train images against its gender). The
  contrast set's source images are assigned to the same clusters, once per version.
* Gender classifiers with the gender removed (app. D.4): logistic regressions trained on the
  train split's images with every person removed (``classifier.blackout*``, as Ratio removes
  them; "background"), on the unmasked images ("image") and on the neutralised captions
  ("text"); ROC AUC on the test split's natural images and on the contrast set (stage
  contrast_set; both versions of a source with the source's persons removed), 95 % CI by
  bootstrap over images (natural) or source images (contrast), and the natural-minus-contrast
  difference (independent bootstrap).

params: spurious (clusters, lda_words, text_encoder, image_encoder, n_boot, seed, workers),
        classifier (blackout, blackout_dilate_px, blackout_fill), features (backbone,
        image_size, cache_dir), scorer.cache_dir (text features), label.words,
        eval_captioner.gender_source
in:   data/prepared/{images,persons,captions}.parquet (+ perceived_gender.parquet where the
      data has it), data/labels/images.parquet, data/split.parquet, data/contrast (stage
      contrast_set)
out:  data/spurious/ (masked/: the person-removed images; clusters.parquet: image_id, split,
      gender, cluster; scores.parquet: set (natural / contrast), image_id, group, gender,
      P(male) of each classifier), plots/spurious_clusters.csv (cluster, label, n, delta_m, lo, hi,
      words), metrics/spurious.json::

    {"clusters": {"m", "n", "overall_male_share", "encoder", "test": chi2 test, "auc": a test
                  image's cluster's train male share against its gender (ROC AUC record),
                  "rows": [...],
                  "contrast": {"n", "max_abs_delta_m"} or None},
     "classifiers": {"background" | "image" | "text": {"natural": AUC record, "contrast":
                     AUC record or None, "natural-contrast": difference or None}},
     "setup": {"n_train", "n_test", "n_contrast_sources", "gender_source", "blackout",
               "image_encoder", "text_encoder", "n_boot", "contrast_background_changed": the
               contrast versions whose person-removed image differs from their source's, of
               "contrast_background_compared" lossless (PNG) pairs (None: none comparable),
               "n_without_person_box": gendered train / test images left out of the
               classifiers (no person box to remove)}}

Data without captions (OpenImages) writes skip records, as the other retrieval stages.
"""
from __future__ import annotations

from pathlib import Path

from biaslab.analysis.spurious_eval import SpuriousSettings, run_spurious
from biaslab.runtime.io import (InputError, atomic_path, is_skipped, load_params, read_parquet,
                                run_stage, skip_without_captions, stage_parser, write_json,
                                write_parquet)

OUT = Path("data/spurious")
METRICS = "metrics/spurious.json"
PLOT = "plots/spurious_clusters.csv"


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    # params.yaml is validated by load_params (biaslab.runtime.validate.check_spurious)
    try:
        s = SpuriousSettings.from_params(params)
    except ValueError as err:
        raise InputError("params.yaml", str(err)) from None
    if skip_without_captions("spurious", [METRICS, str(OUT), PLOT]):
        return 0
    from biaslab.captioning.evaluation import read_gender_labels

    fp, cp = params.get("features") or {}, params.get("classifier") or {}
    words = (params.get("label") or {}).get("words", "lic")
    source = (params.get("eval_captioner") or {}).get("gender_source", "auto")
    cache = fp.get("cache_dir", "data/cache/features")
    enc = s.image_encoder or fp.get("backbone", "efficientnet_lite0")
    size = fp.get("image_size")
    labels, used = read_gender_labels(source)
    split = read_parquet("data/split.parquet")
    images = read_parquet("data/prepared/images.parquet")
    persons = read_parquet("data/prepared/persons.parquet")
    caps = read_parquet("data/prepared/captions.parquet").sort_values(["image_id", "caption_id"])
    pairs_path = Path("data/contrast/pairs.parquet")
    if not Path("data/contrast").exists():
        raise InputError("data/contrast", "missing: run stage contrast_set")
    pairs = None if is_skipped("data/contrast") else read_parquet(pairs_path)

    bo = {"sources": tuple(cp.get("blackout", ["box"])),
          "dilate_px": int(cp.get("blackout_dilate_px", 0)), "fill": cp.get("blackout_fill", 0)}
    out, parity, clusters, scores = run_spurious(
        s, labels, used, split, images, persons, caps, pairs, words=words, blackout=bo,
        enc=enc, size=size, cache=cache,
        text_cache=(params.get("scorer") or {}).get("cache_dir", "data/cache/text"),
        out_dir=OUT)
    write_parquet(OUT / "clusters.parquet", clusters)
    write_parquet(OUT / "scores.parquet", scores)
    # the chart's axis label: the cluster number zero-padded (a chart sorts labels as text:
    # 0, 1, 10, 11, ... otherwise) and its first salient words
    parity = parity.assign(label=[f"{int(c):02d} {' '.join(str(w).split()[:2])}"
                                  for c, w in zip(parity["cluster"], parity["words"])])
    with atomic_path(PLOT) as tmp:
        parity[["cluster", "label", "n", "delta_m", "lo", "hi", "words"]].round(4).to_csv(
            tmp, index=False)
    write_json(METRICS, out)
    b = out["classifiers"]["background"]
    print(f"spurious: chi-square p = {out['clusters']['test']['p']}; background-only AUC "
          f"natural {b['natural']['mean']}, contrast {(b['contrast'] or {}).get('mean')}")
    return 0


if __name__ == "__main__":
    run_stage(main)
