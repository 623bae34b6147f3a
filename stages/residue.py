"""Stage `residue`: how much of the original person the masks and the counterfactuals leave
(biaslab.counterfactual.residue; params `residue`, `masks`, `features`).

For every masked train image (the images the `masks` stage selects) and every mask shape of
`residue.shapes` (polygon: the COCO polygon dilated; box: the person's bounding box), the
selected persons are erased (omega painted grey, unfilled) and a cross-fitted gender probe on
the frozen features of the real images scores the erased image; the same probe scores the
run's counterfactuals (data/select/selected.parquet: one per (image, group), any backend).

in:  data/prepared/{images,persons}.parquet, data/labels/images.parquet, data/split.parquet,
     data/features/images*.npy, data/select/selected.parquet (+ the files it names)
out: data/residue/<shape>/<image_id>.png (the erased, unfilled images),
     metrics/residue.json:
       {n_images, n_male, n_female, folds, fill,
        probe_auc: the probe's AUC on the real images (its skill; bootstrap CI over images),
        erased_auc: {<shape>: AUC for the source gender on the erased images, CI},
        mask_fraction: {<shape>: mean share of the image erased},
        residue_bound: AUC(polygon) - AUC(box), paired bootstrap CI (an upper bound of what
                       the polygon leaves of the person: the box erases more context too),
        counterfactual: {backend, target_auc_other (AUC for the TARGET group on the other-group
                         counterfactuals: 100 = read as the new group, < 50 = as the source
                         gender), target_auc_same (the same-group counterfactuals), n_other,
                         n_same},
        counterfactual_skin (param `attribute` skin or gender_skin; the automatic
                         skin-tone check of the counterfactuals that paper 000 B.3 does with
                         human raters): {probe_auc (a cross-fitted dark-vs-light probe on the
                         masked real images with a perceived tone, each image kept only inside
                         its mask, data/residue/person/: the person, not the scene; the
                         counterfactuals likewise, data/residue/person_cf/), target_auc (AUC for the
                         TARGET tone, dark = positive, over every skin-tone counterfactual),
                         target_auc_other / target_auc_same (sources with a known tone: the
                         other / the same tone), n_real_dark, n_real_light, n_other, n_same,
                         n_unlabelled_source} or {skipped: why})
       (AUCs x100: {mean, ci95, lo, hi, n, n_boot, n_undefined}).
"""
from __future__ import annotations

import tempfile

import numpy as np
from PIL import Image
from tqdm import tqdm

from biaslab.analysis.attribute_eval import PERCEIVED, group_labels
from biaslab.data.groups import group_parts
from biaslab.classify.manifest import encode_files
from biaslab.counterfactual import residue as R
from biaslab.counterfactual.masks import MASK_SHAPES, build_masks_from_params, load_mask
from biaslab.models.features import load_features
from biaslab.runtime.io import (InputError, atomic_dir, json_number, load_params, read_parquet,
                                run_stage, stage_parser, write_json)

PREP = "data/prepared"
OUT = "data/residue"


def _check(p: dict) -> tuple[list[str], int]:
    shapes = list(p.get("shapes") or [])
    bad = [s for s in shapes if s not in MASK_SHAPES]
    if not shapes or bad:
        raise InputError("params.yaml", f"residue.shapes must list some of "
                                        f"{sorted(MASK_SHAPES)}, got {shapes}")
    folds = p.get("folds", 5)
    if not isinstance(folds, int) or folds < 2:
        raise InputError("params.yaml", f"residue.folds must be an integer >= 2, got {folds}")
    return shapes, folds


def _rounded(v):
    """Floats to 4 decimals (json_number), recursively: stable bytes for the lock."""
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, float):
        return json_number(v)
    return v


def _person_images(out, table, common: list[int], path_of: dict, sel):
    """Write ``out``/person/<image_id>.png (each masked train image with everything outside
    its mask painted grey: :func:`biaslab.counterfactual.residue.keep_only`) and
    ``out``/person_cf/<image_id>_<group>.png (the same mask kept of each selected
    counterfactual whose group has a skin-tone part). Returns those counterfactual rows with
    ``path`` pointing at the person-only images."""
    mask_of = dict(zip(table["image_id"].astype(np.int64), table["mask_path"]))
    (out / "person").mkdir()
    (out / "person_cf").mkdir()
    for i in tqdm(common, desc="residue: person only", unit="img"):
        img = np.asarray(Image.open(path_of[i]).convert("RGB"))
        Image.fromarray(R.keep_only(img, load_mask(mask_of[i]))).save(out / "person" / f"{i}.png")
    rows = sel[sel["image_id"].astype(np.int64).isin(set(common))
               & sel["group"].map(lambda g: group_parts(g)[1] is not None)]
    rows = rows.sort_values(["image_id", "group"])
    paths = []
    for r in tqdm(list(rows.itertuples(index=False)), desc="residue: person only (cf)",
                  unit="img"):
        img = np.asarray(Image.open(r.path).convert("RGB"))
        name = f"{int(r.image_id)}_{r.group}.png"
        Image.fromarray(R.keep_only(img, load_mask(mask_of[int(r.image_id)]))).save(
            out / "person_cf" / name)
        paths.append(f"{OUT}/person_cf/{name}")
    return rows.assign(path=paths)


def skin_check(common: list[int], real: np.ndarray, selected, tone: dict[int, str],
               folds: int, encode) -> dict:
    """The skin-tone check of the counterfactuals (stage docstring's
    ``counterfactual_skin``): a dark-vs-light probe cross-fitted on the features ``real`` (n,
    d) of the masked train images ``common`` (n,) that have a perceived tone (the stage passes
    the person-only images, :func:`_person_images`: on the whole image a probe reads the
    scene objects that co-occur with a tone, not the tone; ``tone``:
    {image_id: "dark" | "light"}), scoring every selected counterfactual whose group has a
    skin-tone part by the fold probe that did not see its source (the mean of the fold probes
    for a source without a tone). ``encode(paths)`` -> features (k, d). AUCs x100 for the
    TARGET tone with bootstrap 95 % CIs over counterfactuals; 100 = every new person reads
    as its target tone, 50 = the tone is not seen, below 50 = the source's shows through.
    Returns ``{"skipped": why}`` with fewer than 2 labelled images of a tone or no skin-tone
    counterfactual."""
    lab = [k for k, i in enumerate(common) if tone.get(i) in ("dark", "light")]
    dark = np.array([tone[common[k]] == "dark" for k in lab], bool)
    if dark.sum() < 2 or (~dark).sum() < 2:
        return {"skipped": f"{int(dark.sum())} dark and {int((~dark).sum())} light masked "
                           "train images have a perceived tone: the probe needs 2 of each"}
    parts = selected["group"].map(lambda g: group_parts(g)[1])
    sel = selected[parts.notna().to_numpy()]
    if len(sel) == 0:
        return {"skipped": "no selected counterfactual has a skin-tone target"}
    target = (parts[parts.notna()] == "dark").to_numpy()
    at = {common[k]: j for j, k in enumerate(lab)}
    src = np.array([at.get(int(i), -1) for i in sel["image_id"]], int)
    source_tone = np.array([tone.get(int(i)) for i in sel["image_id"]], object)
    known = src >= 0
    other = known & (target != (source_tone == "dark"))
    same = known & ~other
    p = R.cross_fit_scores(real[lab], dark, {"real": (real[lab], np.arange(len(lab))),
                                             "cf": (encode(sel["path"].tolist()), src)},
                           folds=folds, seed=0)

    def auc_of(rows):
        t = target[rows]
        return R.auc_ci(t, p["cf"][rows]) if t.any() and not t.all() else None
    return {"probe_auc": R.auc_ci(dark, p["real"]),
            "target_auc": auc_of(np.ones(len(sel), bool)),
            "target_auc_other": auc_of(other), "target_auc_same": auc_of(same),
            "n_real_dark": int(dark.sum()), "n_real_light": int((~dark).sum()),
            "n_other": int(other.sum()), "n_same": int(same.sum()),
            "n_unlabelled_source": int((~known).sum())}


def main(argv: list[str] | None = None) -> int:
    stage_parser(__doc__).parse_args([] if argv is None else argv)   # no arguments
    params = load_params()
    shapes, folds = _check(params.get("residue") or {})
    mp, fp = params["masks"], params.get("features", {})
    cache, backbone = fp.get("cache_dir", "data/cache/features"), fp.get("backbone")
    enc = dict(image_size=fp.get("image_size"), batch_size=int(fp.get("batch_size") or 32),
               executor=params.get("executor"))
    images = read_parquet(f"{PREP}/images.parquet")
    persons = read_parquet(f"{PREP}/persons.parquet")
    labels = read_parquet("data/labels/images.parquet")
    split = read_parquet("data/split.parquet")
    path_of = dict(zip(images["image_id"].astype(np.int64), images["path"]))
    attribute = params.get("attribute", "gender")
    skin_on = attribute in ("skin", "gender_skin")
    sel = read_parquet("data/select/selected.parquet")
    tables = {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            t, _ = build_masks_from_params(mp, images, persons, labels, split,
                                           f"{tmp}/{shape}", shape=shape, progress=False)
            tables[shape] = t
        common = sorted(set.intersection(*(set(t["image_id"].astype(np.int64))
                                           for t in tables.values())))
        if len(common) < 4:
            raise InputError("data/masks", f"{len(common)} masked images: too few for the "
                                           "residue check")
        gender = dict(zip(labels["image_id"].astype(np.int64), labels["gender"]))
        fractions = {}
        with atomic_dir(OUT) as out:
            for shape, t in tables.items():
                (out / shape).mkdir()
                mask_of = dict(zip(t["image_id"].astype(np.int64), t["mask_path"]))
                frac = []
                for i in tqdm(common, desc=f"residue: erase ({shape})", unit="img"):
                    img = np.asarray(Image.open(path_of[i]).convert("RGB"))
                    m = load_mask(mask_of[i])
                    frac.append(float((m > 0).mean()))
                    Image.fromarray(R.erase(img, m)).save(out / shape / f"{i}.png")
                fractions[shape] = float(np.mean(frac))
            if skin_on:   # the person alone, for the skin-tone check
                skin_sel = _person_images(out, tables["polygon" if "polygon" in tables
                                                      else shapes[0]], common, path_of, sel)
    ids, base = load_features()
    row = {int(i): k for k, i in enumerate(np.asarray(ids, np.int64))}
    missing = [i for i in common if i not in row]
    if missing:
        raise InputError("data/features/images.npy", f"{len(missing)} masked images have no "
                                                     f"features (e.g. {missing[:3]})")
    real = base[[row[i] for i in common]]
    man = np.array([gender[i] == "male" for i in common])
    src = np.arange(len(common))
    sets = {"real": (real, src)}
    for shape in shapes:
        sets[f"erased_{shape}"] = (encode_files([f"{OUT}/{shape}/{i}.png" for i in common],
                                                cache, backbone, **enc), src)
    pos = {i: k for k, i in enumerate(common)}
    sel = sel[sel["image_id"].astype(np.int64).isin(pos)].sort_values(["image_id", "group"])
    # the probe reads gender: a skin-tone target (attribute skin) sets no gender, and
    # a gender x skin target counts by its gender
    tgt = sel["group"].map(lambda g: group_parts(g)[0])
    sel = sel.assign(group=tgt)[tgt.notna().to_numpy()]
    sel_src = np.array([pos[int(i)] for i in sel["image_id"]], int)
    other = np.array([g != gender[int(i)] for i, g in zip(sel["image_id"], sel["group"])],
                     bool)
    if len(sel):
        cf = encode_files(sel["path"].tolist(), cache, backbone, **enc)
        sets["cf_other"] = (cf[other], sel_src[other])
        sets["cf_same"] = (cf[~other], sel_src[~other])
    p_man = R.cross_fit_scores(real, man, sets, folds=folds, seed=0)
    out = {"n_images": len(common), "n_male": int(man.sum()), "n_female": int((~man).sum()),
           "folds": folds, "fill": R.ERASE_FILL,
           "probe_auc": R.auc_ci(man, p_man["real"]),
           "erased_auc": {s: R.auc_ci(man, p_man[f"erased_{s}"]) for s in shapes},
           "mask_fraction": fractions}
    if "polygon" in shapes and "box" in shapes:
        out["residue_bound"] = R.auc_difference(man, p_man["erased_polygon"],
                                                p_man["erased_box"])
    if len(sel):
        target = sel["group"].to_numpy() == "male"
        out["counterfactual"] = {
            "backend": str(params.get("generate", {}).get("backend")),
            "target_auc_other": R.auc_ci(target[other], p_man["cf_other"]),
            "target_auc_same": R.auc_ci(target[~other], p_man["cf_same"]),
            "n_other": int(other.sum()), "n_same": int((~other).sum())}
    if skin_on:
        person = encode_files([f"{OUT}/person/{i}.png" for i in common], cache, backbone,
                              **enc)
        out["counterfactual_skin"] = skin_check(
            common, person, skin_sel, group_labels("skin", gender, read_parquet(PERCEIVED)),
            folds, lambda paths: encode_files(paths, cache, backbone, **enc))
    out = _rounded(out)
    write_json("metrics/residue.json", out)
    show = {k: (v.get("mean") if isinstance(v, dict) and "mean" in v else v)
            for k, v in out.items()}
    print(show)
    return 0


if __name__ == "__main__":
    run_stage(main)
