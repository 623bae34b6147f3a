"""LIBRA's DCG on the published captioners of the LIC paper: each model's
released captions (`../shared/published-captions/<model>.gender.jsonl.gz`) on the images that
also lie in a COCO-layout image folder (coco-mini), debiased with a trained DCG exactly as
`biaslab libra debias` does (`biaslab.libra.debias_results`), and Ratio / Error before and
after against the released perceived-gender labels (`bb_gender`).

usage: python scripts/libra_published.py --model data/libra/dcg [--models nic oscar ...]
           [--published ../shared/published-captions] [--images ../shared/coco-mini]
           [--exclude data/prepared/images.parquet] [--out benchmarks/results/libra_published.json]

`--exclude`: images the DCG may have been trained on (default: every image of the run that
trained it, `data/prepared/images.parquet`), left out so the DCG is judged on images it never
saw. Writes a JSON object (per model: n, Ratio and Error before / after, Error's paired change
with its t 95 % CI over images, the share of captions changed) and prints a markdown table.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

MODELS = ("nic", "sat", "fc", "att2in", "updn", "transformer", "oscar", "nic_plus",
          "nic_equalizer")
GENDER = {"male": "male", "female": "female"}


def read_published(path: Path) -> tuple[dict[int, str], dict[int, str]]:
    """``{image_id: caption}`` and ``{image_id: "female" | "male"}`` of one released file
    (gzipped JSON Lines; images whose ``bb_gender`` is not Male / Female are left out).

    Raises:
        InputError: the file is missing or a line is not a JSON object with ``image_id``,
            ``caption`` and ``bb_gender``.
    """
    from biaslab.runtime.io import InputError
    if not path.is_file():
        raise InputError(path, "not found")
    caps, genders = {}, {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for k, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                iid, cap, g = int(r["image_id"]), str(r["caption"]), str(r["bb_gender"] or "")
            except (ValueError, KeyError, TypeError) as e:
                raise InputError(path, f"line {k}: not a caption record ({e})") from e
            if g.lower() in GENDER:
                caps[iid], genders[iid] = cap, GENDER[g.lower()]
    return caps, genders


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="trained DCG directory (stage dcg_train)")
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--published", default="../shared/published-captions")
    ap.add_argument("--images", default="../shared/coco-mini")
    ap.add_argument("--exclude", default="data/prepared/images.parquet")
    ap.add_argument("--cache", default="data/cache/features")
    ap.add_argument("--words", default="lic")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-images", type=int, default=None,
                    help="the first N shared images only (a quick look)")
    ap.add_argument("--out", default="benchmarks/results/libra_published.json")
    a = ap.parse_args(argv)

    import pandas as pd

    from biaslab.runtime.io import InputError
    from biaslab.libra import debias_results
    from biaslab.libra import dcg as D
    from biaslab.metrics.captions import error, error_change, ratio_details

    try:
        model = D.load(a.model, num_threads=a.threads)
    except FileNotFoundError as e:
        raise InputError(a.model, f"not a trained DCG model directory ({e})") from e
    exclude = set()
    if a.exclude and Path(a.exclude).exists():
        exclude = set(pd.read_parquet(a.exclude)["image_id"].astype(int))
    have = None
    res = {"command": "python scripts/libra_published.py " + " ".join(sys.argv[1:]),
           "model": str(a.model), "dcg": {"formulation": model.settings.formulation},
           "excluded_images": len(exclude), "models": {}}
    rows = []
    for name in a.models:
        caps, genders = read_published(Path(a.published) / f"{name}.gender.jsonl.gz")
        if have is None:      # ids of the folder's image files, once (COCO file names)
            have = {int(m.group(1)) for f in Path(a.images).rglob("*")
                    if f.suffix.lower() in (".jpg", ".jpeg", ".png")
                    and (m := re.search(r"(\d+)$", f.stem))} - exclude
        ids = sorted(i for i in caps if i in have)[:a.max_images]
        if not ids:
            raise InputError(a.images, f"no image of {name}'s captions is in this folder")
        before = {i: caps[i] for i in ids}
        g = {i: genders[i] for i in ids}
        after = debias_results(before, a.images, model, cache_dir=a.cache,
                               num_threads=a.threads)
        r_b, r_a = ratio_details(before, g, a.words), ratio_details(after, g, a.words)
        n_f = sum(v == "female" for v in g.values())
        rec = {"n": len(ids), "n_female": n_f, "Ratio_truth": (len(ids) - n_f) / max(n_f, 1),
               "Error_before": error(before, g, a.words), "Error_after": error(after, g, a.words),
               "error_change": error_change(before, after, g, a.words),
               "Ratio_before": r_b.get("ratio"), "Ratio_after": r_a.get("ratio"),
               "changed": sum(before[i] != after[i] for i in ids) / len(ids),
               "examples": [{"image_id": i, "before": before[i], "after": after[i]}
                            for i in ids if before[i] != after[i]][:5]}
        res["models"][name] = rec
        ch = rec["error_change"]
        rows.append(f"| {name} | {rec['n']} | {rec['Ratio_before']:.2f} -> "
                    f"{rec['Ratio_after']:.2f} | {rec['Error_before']:.1f} -> "
                    f"{rec['Error_after']:.1f} | {ch['mean']:+.1f} [{ch['lo']:+.1f}, "
                    f"{ch['hi']:+.1f}] | {100 * rec['changed']:.1f} % |")
        print(rows[-1], flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(a.out).with_suffix(".tmp")
    tmp.write_text(json.dumps(res, indent=2) + "\n")
    tmp.replace(a.out)
    print("\n| model | images | Ratio (man/woman) | Error | ΔError paired [95 % CI] | "
          "captions changed |\n|---|---|---|---|---|---|\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:   # InputError and friends: one line naming the file
        from biaslab.runtime.io import InputError
        if isinstance(e, InputError):
            sys.exit(f"libra_published: {e}")
        raise
