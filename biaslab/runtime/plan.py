"""Cost model of a pipeline run: work per heavy stage x per-item rate -> wall time.

``compose(overrides)`` composes conf/ exactly as ``dvc exp run -S`` and
``scripts/compose_params.py`` do (``dvc.utils.hydra.compose_and_dump``, Hydra), ``work(params)``
counts the items (images, candidates, captions, models) and ``plan(params, gpus, gpu)`` turns
them into rows ``Row(stage, n, unit, cpu rate, gpu rate, sources, seconds)``.

Units: every rate is **items per second on one device** (one A100-class GPU, or this 2-core
machine's measured setting for the CPU column); every time is **seconds of wall time**. A stage's
GPU wall time on N GPUs is ``n / (rate_per_gpu * N)`` for item-parallel stages (features,
generate, score: shards split evenly) and ``ceil(models / N) * seconds_per_model`` for stages
whose unit is a whole model (train_*: one model per GPU, models never split).

Sources (every rate names one; nothing is invented):

* Work for ``data.source == coco`` without a local copy: COCO 2017 sizes (118,287 train2017 +
  5,000 val2017 images; 591,753 + 25,014 captions, ~5 per image; Lin et al. 2014 / cocodataset.org)
  and paper 000 sec. 3.1 (28,487 / 13,487 train / test images whose captions have gender words;
  the train images are the inpainting sources: app. A.1, 2 groups x m = 30 candidates). With
  ``data.root`` present, its ``annotations/captions_*.json`` are counted instead and the
  gendered images found with ``biaslab.data.gender.image_gender`` (params ``label``), split by
  ``split.fractions`` as stage ``split`` does (approximately: stratification rounds per gender).
* SD-2 inpainting on GPUs: paper 000 app. A.1, "6 NVIDIA A100-PCIE-40GB GPUs, ... a total of
  72 hours" for 28,487 x 2 x 30 images -> ``SD_A100_IMAGES_PER_S`` = 1,709,220 / (72 * 3600 * 6)
  = 1.099 images/s per A100. The paper gives no step count: assumed diffusers' default 50 (as
  ``generate.steps``), time proportional to steps. Ambiguity: if the 72 h also covered the
  skin-tone counterfactuals (paper 000 Table 7), the per-GPU rate is 2x higher; we take the
  stated gender run (the slower, conservative reading). Other GPU kinds: scaled by peak dense
  FP16 tensor TFLOPS (vendor datasheets, ``GPUS``), an upper bound of the real speed-up; a
  measurement in ``benchmarks/results/gpu_sd_inpaint.json`` (``benchmarks/gpu.py``) for the
  same GPU kind replaces it.
* Scoring on GPUs (``filters.clip`` / ``filters.detector`` set, models=paper): DETR-R50, 86
  GFLOPs and 28 FPS on one V100 (Carion et al. 2020, Table 1), plus CLIP ViT-B/32's image tower
  (4.4 GFLOPs at 224 px, open_clip's model profile) at DETR's measured FLOP throughput; not
  scaled up to faster GPUs (conservative). An estimate, stated as such.
* CPU rates: the measured files in ``benchmarks/results/`` (named in each row).

A stage with no rate for the chosen device shows ``-`` and its source says why; totals then
are lower bounds and say so.
"""
from __future__ import annotations

import json
import math
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from biaslab.runtime.io import InputError

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

#: COCO 2017 (cocodataset.org; captions_{train,val}2017.json annotation counts).
COCO2017 = {"train_images": 118_287, "val_images": 5_000,
            "train_captions": 591_753, "val_captions": 25_014}
#: paper 000 sec. 3.1: images whose captions have gender words (train / test).
PAPER000_GENDERED = {"train": 28_487, "test": 13_487}
#: paper 000 app. A.1: 72 h on 6 A100-PCIE-40GB for 28,487 images x 2 groups x 30 candidates.
PAPER000_SD = {"images": 28_487, "groups": 2, "m": 30, "hours": 72.0, "gpus": 6,
               "gpu": "a100", "steps_assumed": 50}
#: SD-2 inpainting images/s on one A100 (50 steps assumed), from PAPER000_SD.
SD_A100_IMAGES_PER_S = (PAPER000_SD["images"] * PAPER000_SD["groups"] * PAPER000_SD["m"]
                        / (PAPER000_SD["hours"] * 3600 * PAPER000_SD["gpus"]))
#: DETR-R50 (Carion et al. 2020, Table 1): GFLOPs, FPS on one V100.
DETR_R50 = {"gflops": 86.0, "fps_v100": 28.0}
#: CLIP ViT-B/32 image tower GFLOPs at 224 px (open_clip model profile).
CLIP_B32_GFLOPS = 4.4

#: GPU kind -> (peak dense FP16 tensor TFLOPS, vendor datasheet).
GPUS: dict[str, tuple[float, str]] = {
    "a100": (312.0, "NVIDIA A100 datasheet"),
    "h100": (989.0, "NVIDIA H100 SXM datasheet"),
    "h200": (989.0, "NVIDIA H200 datasheet (H100 compute)"),
    "v100": (125.0, "NVIDIA V100 SXM2 datasheet"),
    "l4": (121.0, "NVIDIA L4 datasheet (242 with sparsity)"),
}

CPU_MACHINE = "this machine, 2 shared cores"


# ------------------------------------------------------------------------------------------
# composition


def compose(overrides: list[str] | tuple[str, ...] = (), conf_dir: str | Path | None = None
            ) -> dict:
    """The params ``dvc exp run -S o1 -S o2 ...`` would use: conf/ composed with Hydra by the
    same call as ``scripts/compose_params.py`` (``dvc.utils.hydra.compose_and_dump``).

    Args:
        overrides: Hydra overrides ``key=value`` / ``group=option``.
        conf_dir: the conf/ directory (default: this checkout's).

    Returns: the composed params as a plain dict (params.yaml's content).

    Raises:
        InputError: an override that is malformed, names an unknown key or an unknown group
            option (Hydra's message, naming the override), or a composed value that
            ``biaslab.runtime.validate.check_params`` rejects (as every stage would at its start).
    """
    import yaml
    from dvc.utils.hydra import compose_and_dump
    from hydra.errors import HydraException
    conf = Path(conf_dir or ROOT / "conf").resolve()
    for o in overrides:
        if "=" not in o:
            raise InputError(f"-S {o}", "expected key=value (e.g. -S data=coco, "
                                        "-S generate.m=30)")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "params.yaml"
        try:
            from biaslab.runtime.paths import register_resolvers
            register_resolvers(conf.parent)        # ${repo_path:...} against this checkout
            compose_and_dump(str(out), str(conf), None, "config", str(conf.parent),
                             list(overrides))
        except HydraException as e:
            msg = str(e).split("\nConfig search path")[0].strip()
            raise InputError("-S " + " -S ".join(overrides), msg) from None
        params = yaml.safe_load(out.read_text())
    from biaslab.runtime.validate import ParamError, check_params
    try:   # the checks every stage runs at start (biaslab.runtime.io.load_params), before planning
        check_params(params, load_components=True)
    except ParamError as e:
        raise InputError("-S " + " -S ".join(overrides) if overrides else "conf/",
                         str(e)) from None
    return params


# ------------------------------------------------------------------------------------------
# work


@dataclass
class Work:
    """Item counts of one run (before ``generate.max_images``).

    Attributes:
        n_images: prepared images (features encodes each once).
        n_captions: human captions of the prepared images.
        n_train_gendered: train-split images with a gender label = inpainting sources.
        n_test_gendered: test-split images with a gender label (evaluated images).
        source: where the counts come from.
    """
    n_images: int
    n_captions: int
    n_train_gendered: int
    n_test_gendered: int
    source: str


def coco_work_documented() -> Work:
    """Full COCO 2017 counts from the documented sizes (module docstring)."""
    return Work(COCO2017["train_images"] + COCO2017["val_images"],
                COCO2017["train_captions"] + COCO2017["val_captions"],
                PAPER000_GENDERED["train"], PAPER000_GENDERED["test"],
                "COCO 2017 sizes (118,287 + 5,000 images, 591,753 + 25,014 captions); gendered "
                "train/test = paper 000 sec. 3.1 (28,487 / 13,487)")


def coco_work_from_root(root: Path, params: dict) -> Work:
    """Counts from ``root/annotations/captions_*.json`` (every split, as stage prepare reads);
    gendered images by ``biaslab.data.gender.image_gender`` with params ``label``; train/test by
    ``split.fractions`` (rounded, not per-gender stratified: within a few images of stage
    split).

    Raises:
        InputError: no captions file, or one that is not a COCO captions file.
    """
    from biaslab.metrics.files import read_human_captions
    from biaslab.data.gender import image_gender
    files = sorted((root / "annotations").glob("captions_*.json"))
    if not files:
        raise InputError(root / "annotations", "no captions_*.json (COCO layout expected)")
    caps: dict[int, list[str]] = {}
    n_images = 0
    for f in files:
        data = json.loads(f.read_text())
        n_images += len(data.get("images", []))
        for iid, cs in read_human_captions(f).items():
            caps.setdefault(iid, []).extend(cs)
    lab = params.get("label", {})
    n_g = sum(image_gender(cs, lab.get("rule", "any_mention"), lab.get("words", "lic"),
                           lab.get("k", 2)) != "undefined" for cs in caps.values())
    fr = params.get("split", {}).get("fractions", {"train": 0.7, "test": 0.2})
    return Work(n_images or len(caps), sum(map(len, caps.values())),
                round(n_g * fr.get("train", 0.0)), round(n_g * fr.get("test", 0.0)),
                f"counted in {root}/annotations ({len(files)} captions files); gendered by "
                f"label.rule={lab.get('rule')}, split by split.fractions")


#: plan rows of the caption stages (none on data without captions)
CAPTION_STAGES = ("train_captioner", "t5_finetune + bcs_synthesize", "dcg_train + dcg_apply",
                  "eval_captioner", "contrast_set")
#: MIAP (Schumann et al. 2021, arXiv 2105.02317; Google Research blog, 2021-05): exhaustive
#: person boxes with perceived gender / age presentation in "100k images containing people"
MIAP_IMAGES = 100_000


def openimages_work_documented(params: dict) -> Work:
    """OpenImages with MIAP from the documented size (:data:`MIAP_IMAGES`). Neither MIAP's
    documentation nor paper 000 gives how many of them show one gender presentation only, so
    every image counts as gendered: an upper bound of the inpainting sources and test images.
    No captions."""
    fr = params.get("split", {}).get("fractions", {"train": 0.7, "test": 0.2})
    return Work(MIAP_IMAGES, 0, round(MIAP_IMAGES * fr.get("train", 0.0)),
                round(MIAP_IMAGES * fr.get("test", 0.0)),
                "MIAP's documented 100k images with people (Schumann et al. 2021); all counted "
                "as gendered (an upper bound: the single-gender share is not documented); no "
                "captions")


def openimages_work_from_root(root: Path, params: dict) -> Work:
    """Counts from the MIAP box files under ``root`` (``open_images_extended_miap_boxes_*.csv``,
    as stage prepare reads them; the images need not be downloaded yet): images = distinct
    ImageIDs, gendered = images whose non-group boxes show one known GenderPresentation
    (``biaslab.data.openimages``' rule), split by ``split.fractions``. No captions.

    Raises:
        InputError: no MIAP file, or one without the ImageID / GenderPresentation columns.
    """
    import csv
    from biaslab.data.openimages import GENDER_PRESENTATION, find
    files = find(root, "open_images_extended_miap_boxes_*.csv")
    if not files:
        raise InputError(root, "no open_images_extended_miap_boxes_<split>.csv (OpenImages "
                               "with MIAP expected)")
    pres: dict[str, set] = {}
    for f in files:
        with open(f, newline="", encoding="utf-8") as fh:
            r = csv.DictReader(fh)
            if not {"ImageID", "GenderPresentation"} <= set(r.fieldnames or ()):
                raise InputError(f, f"needs ImageID and GenderPresentation; has {r.fieldnames}")
            for row in r:
                if (row.get("IsGroupOf") or "0").strip() in ("1", "1.0"):
                    continue
                g = GENDER_PRESENTATION.get(" ".join((row["GenderPresentation"] or "").split())
                                            .lower())
                pres.setdefault(row["ImageID"], set()).add(g)
    n_g = sum(len(s - {"unknown", None}) == 1 for s in pres.values())
    fr = params.get("split", {}).get("fractions", {"train": 0.7, "test": 0.2})
    return Work(len(pres), 0, round(n_g * fr.get("train", 0.0)),
                round(n_g * fr.get("test", 0.0)),
                f"counted in {root}'s MIAP box files ({len(files)}): {len(pres):,} images, "
                f"{n_g:,} of one gender presentation; split by split.fractions; no captions")


def _capped(w: Work, max_images: int | None) -> Work:
    """``w`` under ``data.max_images`` (stage prepare keeps that many images, a seeded random
    subset): every count scaled by ``max_images / n_images`` (expected values of the random
    subset); unchanged when the cap is null or not below ``n_images``."""
    if not max_images or int(max_images) >= w.n_images:
        return w
    f = int(max_images) / w.n_images
    return Work(int(max_images), round(w.n_captions * f), round(w.n_train_gendered * f),
                round(w.n_test_gendered * f),
                f"{w.source}; data.max_images={int(max_images)} keeps {f:.1%} of the images "
                f"(counts scaled)")


def work(params: dict, base: Path | None = None) -> Work:
    """The run's :class:`Work`: counted from ``data.root`` when it exists (relative paths
    resolve against ``base``, default the checkout), else the documented COCO 2017 sizes.

    Raises:
        InputError: ``data.source`` is not ``coco`` and ``data.root`` does not exist (the
            synthetic data exist only after stage synthesize).
    """
    data = params.get("data", {})
    root = Path(data.get("root") or "")
    if not root.is_absolute():
        root = (base or ROOT) / root
    if data.get("source") == "openimages":
        from biaslab.data.openimages import find
        if data.get("root") and find(root, "open_images_extended_miap_boxes_*.csv"):
            return _capped(openimages_work_from_root(root, params), data.get("max_images"))
        return _capped(openimages_work_documented(params), data.get("max_images"))
    if data.get("root") and (root / "annotations").is_dir():
        return _capped(coco_work_from_root(root, params), data.get("max_images"))
    if data.get("source") == "coco":
        w = coco_work_documented()
        w = replace(w, source=f"data.root {root} not found: {w.source} (a run refuses until "
                              f"the dataset is there)")
        return _capped(w, data.get("max_images"))
    raise InputError("data.root", f"{root} does not exist and data.source="
                     f"{data.get('source')!r} has no documented size; plan -S data=coco "
                     f"(documented COCO 2017 sizes) or a COCO-layout data.root")


# ------------------------------------------------------------------------------------------
# rates


@dataclass
class Rate:
    """Items per second on one device (``None`` = unknown) and where it comes from."""
    per_s: float | None
    source: str


def _read(name: str) -> dict:
    try:
        return json.loads((RESULTS / name).read_text())
    except (OSError, ValueError):
        return {}


def sd_gpu_rate(gpu: str, steps: int, batch_size: int | None = None) -> Rate:
    """SD-2 inpainting images/s on one GPU of kind ``gpu`` at ``steps`` denoising steps.

    A row of ``benchmarks/results/gpu_sd_inpaint.json`` for the same GPU kind, fp16 and
    ``steps`` (best batch size, or ``batch_size`` when given) wins; otherwise the paper-000
    derivation (module docstring), x 50/steps, x TFLOPS(gpu)/TFLOPS(A100).
    """
    bench = _read("gpu_sd_inpaint.json")
    rows = [r for r in bench.get("results", []) if "tiny" not in str(bench.get("model"))
            and r.get("dtype") == "float16" and r.get("steps") == steps
            and gpu in str(bench.get("gpu_name", "")).lower()
            and (batch_size is None or r.get("batch_size") == batch_size)]
    if rows:
        best = max(rows, key=lambda r: r["images_per_s"])
        return Rate(best["images_per_s"], f"measured: benchmarks/results/gpu_sd_inpaint.json "
                    f"({bench['gpu_name']}, fp16, batch {best['batch_size']}, {steps} steps)")
    tflops, sheet = GPUS[gpu]
    r = SD_A100_IMAGES_PER_S * PAPER000_SD["steps_assumed"] / steps * tflops / GPUS["a100"][0]
    src = (f"paper 000 app. A.1: 28,487x2x30 images in 72 h on 6 A100 = "
           f"{SD_A100_IMAGES_PER_S:.3f} img/s/A100 (50 steps assumed)")
    if steps != PAPER000_SD["steps_assumed"]:
        src += f" x 50/{steps} steps"
    if gpu != "a100":
        src += f"; x {tflops:g}/312 peak FP16 TFLOPS ({sheet}; upper bound)"
    return Rate(r, src)


def backend_rates(backend: str | None, steps: int, gpu: str) -> tuple[Rate, Rate]:
    """(CPU, GPU) candidates/s of a counterfactual backend: the diffusion backends on the GPU
    (:func:`sd_gpu_rate`; InstructPix2Pix runs SD-1.5's UNet, the width of SD-2's, 3 times per
    step for its text and image guidance against inpainting's 2: x 2/3, an estimate), the
    others on the CPU as ``benchmarks/results/generate.json`` measured them."""
    if backend in ("sd_inpaint", "instruct_pix2pix"):
        cpu = Rate(None, f"no CPU rate for {backend} at 512 px (generate.json's sd_inpaint_tiny "
                         f"is a tiny random model at 64 px, 4 steps: not representative)")
        sd = sd_gpu_rate(gpu, steps)
        if backend == "sd_inpaint":
            return cpu, sd
        return cpu, Rate(None if sd.per_s is None else sd.per_s * 2 / 3,
                         f"{sd.source}; x 2/3 for InstructPix2Pix's 3 UNet passes per step "
                         f"(estimate, not measured)")
    gj = _read("generate.json").get(backend, {})
    cpu = (Rate(gj["candidates_per_s"], f"benchmarks/results/generate.json ({backend}, "
                f"{gj.get('source')})") if "candidates_per_s" in gj else
           Rate(None, f"no measurement of backend {backend} in generate.json"))
    return cpu, Rate(None, f"backend {backend} is CPU-only")


def score_gpu_rate() -> Rate:
    """Candidates/s on one GPU for the paper-tier filters (DETR-R50 + CLIP ViT-B/32 image
    tower): ``1 / (1/28 + 1/(28 * 86/4.4))`` (module docstring; estimate)."""
    clip = DETR_R50["fps_v100"] * DETR_R50["gflops"] / CLIP_B32_GFLOPS
    r = 1.0 / (1.0 / DETR_R50["fps_v100"] + 1.0 / clip)
    return Rate(r, f"estimate: DETR-R50 28 FPS on a V100 (Carion et al. 2020 Table 1) + CLIP "
                   f"ViT-B/32 4.4 GFLOPs at DETR's FLOP rate ({clip:.0f} img/s); not scaled "
                   f"to faster GPUs")


# ------------------------------------------------------------------------------------------
# plan


@dataclass
class Row:
    """One heavy stage.

    Attributes:
        stage: dvc stage name(s).
        n: work items; unit: what an item is (images, candidates, captions, models).
        detail: how n was computed.
        cpu, gpu: per-item rates (items/s on one device; for unit ``models``: models/s).
        cpu_s: wall seconds on this machine (None = no known CPU rate).
        gpu_s: wall seconds on ``gpus`` GPUs (None = no known GPU rate).
    """
    stage: str
    n: int
    unit: str
    detail: str
    cpu: Rate
    gpu: Rate
    cpu_s: float | None = None
    gpu_s: float | None = None


def gpu_wall_s(n: int, rate: float | None, gpus: int, per_model: bool = False
               ) -> float | None:
    """Wall seconds of ``n`` items at ``rate`` items/s per GPU on ``gpus`` GPUs: item-parallel
    ``n / (rate * gpus)``; ``per_model`` (items are whole models, one per GPU at a time)
    ``ceil(n / gpus) / rate``. None when ``rate`` is None.

    Raises:
        ValueError: ``gpus`` < 1 or ``rate`` <= 0.
    """
    if gpus < 1:
        raise ValueError(f"--gpus must be >= 1, got {gpus}")
    if rate is None:
        return None
    if rate <= 0:
        raise ValueError(f"rate must be > 0 items/s, got {rate}")
    return math.ceil(n / gpus) / rate if per_model else n / (rate * gpus)


def _int(params: dict, key: str) -> int:
    sec, k = key.split(".")
    v = params.get(sec, {}).get(k)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(f"-S {key}", f"must be a positive integer, got {v!r}")
    return v


def plan(params: dict, gpus: int = 1, gpu: str = "a100", wk: Work | None = None) -> dict:
    """Per-stage work, rates and wall times of a run with ``params``.

    Args:
        params: composed params (:func:`compose`).
        gpus: number of GPUs of kind ``gpu`` (>= 1).
        gpu: a key of :data:`GPUS`.
        wk: the work counts (default :func:`work` of ``params``; tests pass a toy one).

    Returns:
        ``{"params": {...the keys used...}, "work": asdict(Work), "gpus", "gpu",
        "rows": [asdict(Row)...], "total_gpu_s", "total_cpu_s", "gpu_rows_missing",
        "cpu_rows_missing"}``; totals sum the rows with a known time (lower bounds when
        ``*_missing`` is non-empty).

    Raises:
        InputError: unknown ``gpu``, ``gpus`` < 1, non-integer ``generate.m`` etc.
    """
    if gpu not in GPUS:
        raise InputError("--gpu", f"unknown GPU kind {gpu!r}; known: {', '.join(GPUS)}")
    if gpus < 1:
        raise InputError("--gpus", f"must be >= 1, got {gpus}")
    wk = wk or work(params)
    g, c, f = params.get("generate", {}), params.get("classifier", {}), params.get("features", {})
    m, steps = _int(params, "generate.m"), _int(params, "generate.steps")
    cap = g.get("max_images")
    n_src = min(wk.n_train_gendered, cap) if cap else wk.n_train_gendered
    groups = 2                                  # binary gender (paper 000 app. A.1)
    n_cand = n_src * groups * m
    rows: list[Row] = []

    # features: every prepared image once, with features.backbone and (frozen heads) with
    # every further backbone of classifier.backbones (Table 1's column groups)
    from biaslab.classify.model import classifier_backbones
    backbones = classifier_backbones(params)
    finetune = bool(c.get("finetune"))
    key = f"threads{f.get('threads', 1)}_batch{f.get('batch_size', 1)}_images_per_s_median"
    fj = _read("features.json")
    encoded = [f.get("backbone")] + ([] if finetune else
                                     [b for b in backbones if b != f.get("backbone")])
    for b in encoded:
        feat = fj.get(b, {})
        cpu = (Rate(feat[key], f"benchmarks/results/features.json ({b}, {key})")
               if key in feat else Rate(None, f"no CPU measurement for {b} at this setting "
                                              f"in features.json"))
        rows.append(Row("features" if b == f.get("backbone") else f"features ({b})",
                        wk.n_images, "images",
                        "prepared images" + ("" if b == f.get("backbone") else
                                             " (classifier.backbones, frozen)"), cpu,
                        Rate(None, "not estimated: a frozen backbone's forward pass, "
                                   "JPEG-decode bound; runs on the host CPUs")))

    # generate
    detail = f"{n_src:,} source images x {groups} groups x m={m}"
    gen_cpu, gen_gpu = backend_rates(g.get("backend"), steps, gpu)
    rows.append(Row("generate", n_cand, "candidates", detail, gen_cpu, gen_gpu))

    # score
    flt = params.get("filters", {})
    if flt.get("clip") or flt.get("detector"):
        sc_cpu = Rate(None, "no CPU rate for CLIP/DETR scoring (score.json measures the "
                            "offline LiT scorer)")
        sc_gpu = score_gpu_rate()
    else:
        sj = _read("score.json")
        sc_cpu = (Rate(sj["candidates_per_s"], "benchmarks/results/score.json (offline "
                       "scorer, batch 1)") if "candidates_per_s" in sj
                  else Rate(None, "score.json missing"))
        sc_gpu = Rate(None, "not estimated: offline scorer on frozen features runs on the CPU")
    rows.append(Row("score", n_cand, "candidates", detail, sc_cpu, sc_gpu))

    # classifiers: whole models; CPU seconds per model linear in training rows
    cm = _read("classifier_methods.json")
    n_rows0 = cm.get("inputs", {}).get("n_train_rows")
    seeds = len(c.get("seeds", []))
    nb = len(backbones)
    for stage, names in (("train_classifier", ["erm"] * len(c.get("datasets", []))),
                         ("train_method", list(c.get("methods", [])))):
        if not names:
            continue
        times = [cm.get("methods", {}).get(nm, {}).get("median_total_s") for nm in names]
        n_models = len(names) * seeds * nb
        if finetune:   # the backbone's forward + backward on every image, every epoch
            why = (f"not measured: fine-tuning {', '.join(backbones)} end to end "
                   f"(classifier.finetune) costs about 3 forward passes per training image "
                   f"and epoch; no rate in benchmarks/results/")
            cpu, gpu_r = Rate(None, why), Rate(None, why)
        else:
            if n_rows0 and all(times):
                s_per_model = sum(times) / len(times) / n_rows0 * n_src
                cpu = Rate(1.0 / s_per_model, f"benchmarks/results/classifier_methods.json "
                           f"(median s/model at {n_rows0} rows, x {n_src:,}/{n_rows0} rows; "
                           f"linear in rows assumed; a head's cost barely depends on the "
                           f"backbone's width)")
            else:
                cpu = Rate(None, "classifier_methods.json lacks these methods")
            gpu_r = Rate(None, "not estimated: linear head on frozen features (CPU work)")
        what = "datasets" if stage == "train_classifier" else "methods"
        rows.append(Row(stage, n_models, "models",
                        f"{len(names)} {what} x {seeds} seeds x {nb} backbone(s) "
                        f"({', '.join(backbones)}{'; fine-tuned' if finetune else ''})",
                        cpu, gpu_r))

    # captioner, LIBRA, evaluation: work only unless measured for this tier; none on data
    # without captions (OpenImages: those stages write skip records)
    cp = params.get("captioner", {})
    archs = list(cp.get("archs") or ["clipcap"])
    n_cap = len(cp.get("datasets", [])) * len(cp.get("seeds", [])) * len(archs)
    tier = params.get("models", {}).get("name", "tiny")
    why = (f"no rate: models={tier} (GPT-2 / t5-base / BERT / ViLT) was not measured and no "
           f"documented throughput fits; benchmarks/results/ has tiny-tier rates only"
           if tier != "tiny" else
           "no per-item rate: stage_times_*.json time the ci scale only, not per item")
    na = Rate(None, why)
    rows.append(Row("train_captioner", n_cap, "models",
                    f"{len(cp.get('datasets', []))} datasets x {len(cp.get('seeds', []))} seeds"
                    f" x {len(archs)} arch(s) ({', '.join(archs)})", na, na))
    train_caps = round(wk.n_captions * params.get("split", {}).get("fractions", {})
                       .get("train", 0.7))
    mx = params.get("libra", {}).get("max_train_captions")
    n_t5 = min(train_caps, mx) if mx else train_caps
    rows.append(Row("t5_finetune + bcs_synthesize", n_t5, "captions",
                    "train-split captions (libra.max_train_captions)", na, na))
    rows.append(Row("dcg_train + dcg_apply", n_t5, "captions", "as t5_finetune", na, na))
    n_libra = len(archs) * len(cp.get("seeds", []))   # LIBRA on each arch's Original, per seed
    rows.append(Row("eval_captioner", wk.n_test_gendered * (n_cap + n_libra), "captions",
                    f"{wk.n_test_gendered:,} test images x ({n_cap} captioners + {n_libra} "
                    f"LIBRA outputs)", na, na))

    # contrast_set (paper 001 sec. 4): the test split's gendered images, each edited into both
    # groups' versions, contrast.m candidates each, by contrast.generate's editor (default: the
    # training counterfactuals' backend)
    cs = params.get("contrast", {})
    cg = {**g, **(cs.get("generate") or {})}
    cm_ = int(cs.get("m", 1))
    n_con = wk.n_test_gendered * groups * cm_
    cdetail = f"{wk.n_test_gendered:,} test images x {groups} groups x m={cm_}"
    con_cpu, con_gpu = backend_rates(cg.get("backend"), int(cg.get("steps", steps)), gpu)
    rows.append(Row("contrast_set", n_con, "candidates", cdetail, con_cpu, con_gpu))

    if not wk.n_captions:   # data without captions: the caption stages write skip records
        rows = [r for r in rows if r.stage not in CAPTION_STAGES]
    for r in rows:
        per_model = r.unit == "models"
        r.gpu_s = gpu_wall_s(r.n, r.gpu.per_s, gpus, per_model)
        r.cpu_s = None if r.cpu.per_s is None else r.n / r.cpu.per_s
    tot = {d: sum(getattr(r, f"{d}_s") for r in rows if getattr(r, f"{d}_s") is not None)
           for d in ("gpu", "cpu")}
    used = {"data.source": params.get("data", {}).get("source"),
            "data.root": params.get("data", {}).get("root"), "models.name": tier,
            "scale.name": params.get("scale", {}).get("name"),
            "generate.backend": g.get("backend"), "generate.m": m, "generate.steps": steps,
            "generate.max_images": cap, "classifier.backbones": backbones,
            "classifier.finetune": finetune, "filters.clip": flt.get("clip"),
            "filters.detector": flt.get("detector"), "contrast.backend": cg.get("backend"),
            "contrast.m": cm_}
    return {"params": used, "work": asdict(wk), "gpus": gpus, "gpu": gpu,
            "cpu_machine": CPU_MACHINE, "rows": [asdict(r) for r in rows],
            "total_gpu_s": tot["gpu"], "total_cpu_s": tot["cpu"],
            "gpu_rows_missing": [r.stage for r in rows if r.gpu_s is None],
            "cpu_rows_missing": [r.stage for r in rows if r.cpu_s is None]}


def fmt_duration(s: float | None) -> str:
    """Seconds -> ``"1.2 h"`` / ``"3.4 min"`` / ``"5 s"`` / ``"2.1 d"``; None -> ``"-"``."""
    if s is None:
        return "-"
    if s >= 2 * 86400:
        return f"{s / 86400:.1f} d"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.0f} s"


def _fmt_rate(r: dict, unit: str) -> str:
    if r["per_s"] is None:
        return "-"
    if unit == "models":
        return f"{1 / r['per_s']:,.0f} s/model"
    return f"{r['per_s']:,.3g} /s"


def format_plan(p: dict) -> str:
    """A readable table of :func:`plan`'s result (one line per stage, then the sources)."""
    gl = f"{p['gpus']} x {p['gpu'].upper()}"
    head = ["stage", "work", "unit", "GPU rate", f"wall on {gl}", "CPU rate", "wall on CPU"]
    body = [[r["stage"], f"{r['n']:,}", r["unit"], _fmt_rate(r["gpu"], r["unit"]),
             fmt_duration(r["gpu_s"]), _fmt_rate(r["cpu"], r["unit"]),
             fmt_duration(r["cpu_s"])] for r in p["rows"]]
    body.append(["total (known rows)", "", "", "", fmt_duration(p["total_gpu_s"]), "",
                 fmt_duration(p["total_cpu_s"])])
    w = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    line = lambda x: "  ".join(s.ljust(w[i]) if i < 3 else s.rjust(w[i])   # noqa: E731
                               for i, s in enumerate(x)).rstrip()
    pp = p["params"]
    out = [f"plan: data={pp['data.source']} scale={pp['scale.name']} models={pp['models.name']}"
           f" backend={pp['generate.backend']} m={pp['generate.m']} "
           f"steps={pp['generate.steps']}; GPU wall times on {gl}, CPU = {p['cpu_machine']}",
           f"work: {p['work']['source']}", "", line(head), line(["-" * n for n in w])]
    out += [line(x) for x in body]
    out += ["", "work detail and rate sources:"]
    for r in p["rows"]:
        out.append(f"  {r['stage']}: {r['detail']}")
        out.append(f"    GPU: {r['gpu']['source']}")
        out.append(f"    CPU: {r['cpu']['source']}")
    for d, name in (("gpu", "GPU"), ("cpu", "CPU")):
        if p[f"{d}_rows_missing"]:
            out.append(f"{name} total is a lower bound: no {name} rate for "
                       f"{', '.join(p[f'{d}_rows_missing'])}")
    return "\n".join(out)
