"""Stage `published_bias` (published/dvc.yaml): bias of the nine published captioners
of the LIC paper from their released outputs (biaslab.data.published; params `published`).

For every model of `published.models`: Ratio and Error (gender study, bootstrap CI over
images), BA_label (the captions' vocabulary against the images' perceived gender), LIC_M for
gender (gender words masked) and for race (Light / Dark, captions not masked), mean ± 95 % CI
(t) over `published.lic.seeds` LIC classifier seeds. The LIC jobs (model x study) run on
`published.workers` forked processes, one torch thread each.

With `published.human_captions` (a COCO captions file, or a list, holding these val2014 images, e.g.
`captions_val2014.json`) the same stage also computes LIC_D and LIC (thesis
Eqs. 2.9, 2.11; `published.lic.max_human_captions` of each image's captions, null = all, the
thesis) and BLEU-4, CIDEr, METEOR, ROUGE-L on the gender study's images (pycocoevalcap).

in:  <published.root>/<model>.{gender,race}.jsonl.gz (../shared/published-captions)
out: metrics/published.json:
       {root, words, lic: {classifier, preset, seeds}, inputs: {<file name>: sha256},
        models: {<model>: {
          name, n_images: {gender, race}, n_unlabelled: {gender, race},
          gender: {Ratio, Error (bootstrap records), n_man, n_woman, n_neutral,
                   BA_label (bootstrap record, x100), BA_label_words, BA_label_top,
                   LIC_M (record over seeds, x100), LIC_M_per_seed, n_train_per_group,
                   n_test_per_group},
          race: {LIC_M, LIC_M_per_seed, n_train_per_group, n_test_per_group, n_by_group}}}}
       with human captions also LIC_D, LIC (records) and LIC_D_per_seed per study, and
       gender.quality {BLEU-4, CIDEr, METEOR, ROUGE-L, n_images}; with `published.dbac` (null:
       off) gender.DBAC: biaslab.metrics.dbac.dbac_details' dict (both directions, prior and direct,
       lambda_D / lambda_M records over seeds) with human captions, else {"skipped": why}.

Usage: python stages/published_bias.py [--params params.yaml] [--out metrics/published.json]
"""
from __future__ import annotations

import hashlib
import sys

from biaslab.data import published as P
from biaslab.runtime.io import (InputError, ParamsError, json_number, load_params, run_stage,
                                stage_parser, write_json)
from biaslab.metrics.lic import lic_details
from biaslab.runtime.parallel import map_jobs
from biaslab.runtime.progress import bar
from biaslab.runtime.stats import record
from biaslab.runtime.validate import ParamError, check_published


def check(p: dict) -> dict:
    """Validate the `published` params group; returns it with defaults.

    Raises:
        ParamError: the dotted name of the bad param and the problem.
    """
    if not isinstance(p, dict):
        raise ParamError("published", "must be a mapping of parameters")
    check_published(p)            # the rules live in biaslab.runtime.validate (stage start too)
    lp = dict(p.get("lic") or {})
    return {**p, "models": list(p["models"]),
            "lic": {"classifier": lp.get("classifier", "lstm"), "preset": lp.get("preset", "ci"),
                    "seeds": lp.get("seeds", 3),
                    "max_human_captions": lp.get("max_human_captions")}}


def read_captions_files(files: str | list[str]) -> dict[int, list[str]]:
    """One COCO captions file or several (e.g. coco-mini's train2017 and val2017, whose ids are
    COCO 2014's) -> {image_id: captions}; an image in several files keeps every caption, file
    order. Raises InputError (biaslab.metrics.files.read_human_captions) for a bad file."""
    from biaslab.metrics.files import read_human_captions
    out: dict[int, list[str]] = {}
    for f in [files] if isinstance(files, str) else files:
        for i, caps in read_human_captions(f).items():
            out.setdefault(i, []).extend(caps)
    return out


def _dbac(df, human: dict, words: str, lp: dict, settings: dict) -> dict:
    """DBAC of one model's gender study through :func:`biaslab.metrics.evaluate.evaluate_captions`
    (``metrics=("dbac",)``: LIC's attacker, one torch thread, LIC's seeds unless
    ``published.dbac.seeds`` says otherwise): :func:`biaslab.metrics.dbac.dbac_details`'s dict, or
    ``{"skipped": reason}``."""
    from biaslab.metrics.evaluate import evaluate_captions
    preds = {int(i): str(c) for i, c in zip(df["image_id"], df["caption"])}
    return evaluate_captions(preds, P.labels(df, "gender"), human, metrics=("dbac",),
                             words=words, classifier=lp["classifier"], preset=lp["preset"],
                             seeds=lp["seeds"], num_threads=1,
                             max_human_captions=lp.get("max_human_captions"),
                             dbac=settings)["DBAC"]


def _lic_job(job: tuple[str, str], root: str, words: str, lp: dict,
             human: dict | None, dbac_settings: dict | None = None) -> dict:
    model, study = job
    df = P.read_outputs(root, model, study)
    r = lic_details(dict(zip(df["image_id"].astype(int), df["caption"].astype(str))), human,
                    P.labels(df, study), classifier=lp["classifier"], seeds=lp["seeds"],
                    config=lp["preset"], words=words if study == "gender" else None,
                    groups=P.GROUPS[study], workers=1,
                    max_human_captions=lp.get("max_human_captions"))
    extra = {} if human is None else {
        "LIC_D": record([s["LIC_D"] for s in r["per_seed"]]),
        "LIC": record([s["LIC"] for s in r["per_seed"]]),
        "LIC_D_per_seed": [s["LIC_D"] for s in r["per_seed"]],
        "n_human_indices": r["n_human_indices"],
        "n_dropped_without_human": r["n_dropped_without_human"]}
    if study == "gender" and dbac_settings is not None:
        if human is None:
            extra["DBAC"] = {"skipped": "needs the human captions of the same images "
                                        "(published.human_captions)"}
        else:
            extra["DBAC"] = _dbac(df, human, words, lp, dbac_settings)
    return {**extra, "LIC_M": record([s["LIC_M"] for s in r["per_seed"]]),
            "LIC_M_per_seed": [s["LIC_M"] for s in r["per_seed"]],
            "n_train_per_group": r["n_train_per_gender"],
            "n_test_per_group": r["n_test_per_gender"],
            "n_by_group": r["n_images_by_gender"]}


def _rounded(o):
    """Every float to 6 decimals (stable bytes across machines), non-finite -> None."""
    if isinstance(o, dict):
        return {k: _rounded(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_rounded(v) for v in o]
    if isinstance(o, (bool, str)) or o is None:
        return o
    return json_number(o, 6)


def main(argv: list[str] | None = None) -> int:
    ap = stage_parser(__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", default="metrics/published.json")
    a = ap.parse_args(argv)
    params = load_params(a.params)
    if "published" not in params:
        raise InputError(a.params, "no `published` group (python scripts/compose_params.py)")
    try:
        p = check(params["published"])
    except ParamError as e:      # as biaslab.runtime.io.load_params: one line, exit 2
        print(f"published_bias: {ParamsError(a.params, e.param, e.problem)}", file=sys.stderr)
        raise SystemExit(2) from e
    root, words, lp = str(p["root"]), str(p.get("words", "lic")), p["lic"]
    seed, n_boot = int(p.get("seed", 0)), int(p.get("n_boot", 2000))
    bp = dict(p.get("ba") or {})

    human = None
    if p.get("human_captions"):
        human = read_captions_files(p["human_captions"])
    out: dict = {"root": root, "words": words, "lic": lp, "models": {},
                 "human_captions": p.get("human_captions")}
    # the released files are not a DVC dep (see published/dvc.yaml): their digests are an out
    out["inputs"] = {}
    for m in p["models"]:
        for study in P.STUDIES:
            f = P.outputs_path(root, m, study)
            if f.is_file():
                out["inputs"][f.name] = hashlib.sha256(f.read_bytes()).hexdigest()
    for m in bar(p["models"], desc="Ratio / Error / BA_label", unit="model"):
        g, r = P.read_outputs(root, m, "gender"), P.read_outputs(root, m, "race")
        re_ = P.ratio_error(g, words, n_boot=n_boot, seed=seed)
        ba = P.ba_label(g, words, top_k=int(bp.get("top_k", 1000)),
                        min_count=int(bp.get("min_count", 100)),
                        n_boot=int(bp.get("n_boot", 1000)), seed=seed)
        out["models"][m] = {
            "name": P.MODELS[m],
            "n_images": {"gender": len(g), "race": len(r)},
            "n_unlabelled": {"gender": len(g) - len(P.labels(g, "gender")),
                             "race": len(r) - len(P.labels(r, "race"))},
            "gender": {**re_, "BA_label": ba["BA_label"], "BA_label_words": ba["words"],
                       "BA_label_top": ba["top"]},
            "race": {}}
        if human is not None:
            from biaslab.metrics.quality import close_meteor, coco_caption_scores
            pred = {int(i): c for i, c in zip(g["image_id"], g["caption"]) if human.get(int(i))}
            if not pred:
                raise InputError(str(p["human_captions"]), f"no captions of the {m} gender study's "
                                                      f"images (COCO val2014 ids)")
            q = coco_caption_scores(pred, human, ("BLEU-4", "CIDEr", "METEOR", "ROUGE-L"))
            close_meteor()      # no METEOR JVM inherited by the forked LIC workers
            out["models"][m]["gender"]["quality"] = {**q, "n_images": len(pred)}

    jobs = [(m, s) for m in p["models"] for s in P.STUDIES]
    lic_bar = bar(total=len(jobs), desc=f"LIC_M {lp['classifier']} ({lp['seeds']} seeds)",
                  unit="job")
    with lic_bar:
        res = map_jobs(lambda j: _lic_job(j, root, words, lp, human, p.get("dbac")), jobs,
                       p.get("workers", 1),
                       on_done=lambda i, r: lic_bar.update(1))
    for (m, s), r in zip(jobs, res):
        out["models"][m][s].update(r)
    write_json(a.out, _rounded(out))
    for m, d in out["models"].items():
        print(f"{d['name']:>14}: Ratio {d['gender']['Ratio']['mean']:.2f}  Error "
              f"{d['gender']['Error']['mean']:.1f}  LIC_M {d['gender']['LIC_M']['mean']:.1f} "
              f"± {d['gender']['LIC_M']['ci95']:.1f}  race LIC_M {d['race']['LIC_M']['mean']:.1f}"
              f" ± {d['race']['LIC_M']['ci95']:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    run_stage(main)
