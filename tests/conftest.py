"""Shared fixtures: a tiny COCO-layout directory written from scratch."""
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]


#: Test files that run a whole pipeline. scripts/test.sh runs files on 2 xdist workers in
#: collection order: the default's `dvc repro` (~2,000 s with its experiments) starts first,
#: the short files (mostly one core) fill the other worker beside it, and the foreign-data
#: (~1,050 s) and OpenImages (~480 s) runs come last, so that two pipelines (each on 2 workers)
#: overlap as little as possible. An earlier order (the three pipelines first) ran the
#: default and the foreign run side by side: the foreign run took ~2,600 s instead of 1,019 s.
FIRST = ("test_pipeline.py",)
LAST = ("test_foreign_data.py", "test_openimages.py")


def pytest_collection_modifyitems(config, items):
    """:data:`FIRST` files first, :data:`LAST` files last (stable: the rest keep their
    order)."""
    def rank(item):
        name = Path(str(item.fspath)).name
        return 0 if name in FIRST else 2 if name in LAST else 1
    items[:] = sorted(items, key=rank)


def run_checked(args, cwd, env) -> str:
    """Run a command; fail the test with its output's tail unless it exits 0. Returns
    stdout + stderr."""
    import subprocess
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(args)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout + r.stderr


def clone_worktree(dst: Path, message: str, drop: tuple[str, ...] = ()) -> dict:
    """Copy the working tree (tracked and untracked, not ignored files) to ``dst``, less the
    paths in ``drop``, commit it in a fresh git repository and point its DVC cache at the
    working tree's (so its outputs land where a later run finds them). Returns the
    environment for commands run there (this venv first on PATH, no DVC analytics, a git
    identity)."""
    import os
    import shutil
    import subprocess
    import sys
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (REPO / f).is_file() and f not in drop:
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, dst / f)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    run_checked(["git", "init", "-q"], dst, env)
    run_checked(["git", "add", "-A"], dst, env)
    run_checked(["git", "commit", "-qm", message], dst, env)
    run_checked(["dvc", "cache", "dir", "--local", str(REPO / ".dvc" / "cache")], dst, env)
    return env


def plugin_overrides(params: dict) -> list[str]:
    """The ``-S`` overrides that name examples/biaslab-example-plugin's components beside the
    built-in ones of ``params`` (the composed params.yaml): training set ``reweighted``,
    model-level method ``label_smoothing``, caption post-processors ``neutral`` and the learned
    ``context_neutral``."""
    def listed(xs):
        return "[" + ",".join(xs) + "]"
    return [f"classifier.datasets={listed([*params['classifier']['datasets'], 'reweighted'])}",
            f"captioner.datasets={listed([*params['captioner']['datasets'], 'reweighted'])}",
            f"artifact.datasets={listed([*params['artifact']['datasets'], 'reweighted'])}",
            f"classifier.methods={listed([*params['classifier']['methods'], 'label_smoothing'])}",
            "eval_captioner.postprocessors=" + listed(
                [*params['eval_captioner']['postprocessors'], 'neutral', 'context_neutral'])]


def plugin_column_overrides(params: dict) -> list[str]:
    """The ``-S`` overrides that name the example plug-in's column components: filter
    ``sharpness`` (weight 1, beside ``filters.names``) and captioning metric ``types``. Apart
    from :func:`plugin_overrides` because a filter changes which candidates are selected, so
    every counterfactual row, not only the plug-in's."""
    names = [*params["filters"]["names"], "sharpness"]
    weights = [*params["filters"]["weights"], 1]
    return [f"filters.names=[{','.join(names)}]",
            f"filters.weights=[{','.join(str(w) for w in weights)}]",
            "eval_captioner.metrics=[types]"]


def install_example_plugin(tmp: Path) -> str:
    """pip-install examples/biaslab-example-plugin into ``tmp/site`` (a directory for
    PYTHONPATH beside biaslab, not this repository) and return that directory."""
    import shutil
    import subprocess
    import sys
    src = tmp / "plugin-src"
    shutil.copytree(REPO / "examples" / "biaslab-example-plugin", src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "--target", str(tmp / "site"),
                    str(src)], check=True, capture_output=True, text=True)
    return str(tmp / "site")


def run_profile_in_clone(base: Path, name: str, overrides: list[str],
                         extra_env: dict | None = None) -> tuple[Path, str]:
    """Clone the working tree to ``base/repo`` (``clone_worktree``) and run
    ``dvc exp run -S <override> ...`` there under ``benchmarks/stage_times.py --name <name>``,
    as a user would. With ``BIASLAB_E2E_OUT`` set (CI), its ``tables.md`` and stage times are
    copied there as ``<name>_tables.md`` and ``<name>_stage_times_<name>.json``. Returns the
    clone and the run's output."""
    import os
    import shutil
    import sys
    dst = base / "repo"
    # the working tree's cache: nothing of the default is reused (other data), but the
    # run's outputs land where a second run finds them
    env = {**clone_worktree(dst, name), **(extra_env or {})}
    args = [x for o in overrides for x in ("-S", o)]
    out = run_checked([sys.executable, "benchmarks/stage_times.py", "--name", name, "--",
                       "dvc", "exp", "run", *args], dst, env)
    export = os.environ.get("BIASLAB_E2E_OUT")
    if export:   # CI prints this run's tables and stage times beside the default's
        Path(export).mkdir(parents=True, exist_ok=True)
        for f in ("plots/report/tables.md", f"benchmarks/results/stage_times_{name}.json"):
            shutil.copy2(dst / f, Path(export) / f"{name}_{Path(f).name}")
    return dst, out


COCO_MINI = REPO.parent / "shared" / "coco-mini"

CAPTIONS = {
    1: ["A woman holding an umbrella.", "A lady with an umbrella", "A person in the rain"],
    2: ["A man riding a skateboard", "A guy on a skateboard", "Someone skating"],
    3: ["A man and a woman at a table", "Two people eating", "A couple at dinner"],
    4: ["A dog on a couch", "A brown dog", "A dog sleeping"],
}


def write_tiny_coco(root: Path, split: str = "val2017") -> Path:
    """4 images (female, male, both, none by captions), persons with a polygon or keypoints,
    one object, a perceived-gender CSV."""
    (root / "annotations").mkdir(parents=True)
    (root / "images" / split).mkdir(parents=True)
    images, caps, anns = [], [], []
    for iid in CAPTIONS:
        fn = f"{iid:012d}.jpg"
        Image.fromarray(np.full((40, 60, 3), iid * 40, np.uint8)).save(root / "images" / split / fn)
        images.append({"id": iid, "file_name": fn, "width": 60, "height": 40})
        for j, c in enumerate(CAPTIONS[iid]):
            caps.append({"id": iid * 10 + j, "image_id": iid, "caption": c})
    anns = [
        {"id": 101, "image_id": 1, "category_id": 1, "bbox": [10, 5, 20, 30], "area": 600,
         "iscrowd": 0, "segmentation": [[10, 5, 30, 5, 30, 35, 10, 35]]},
        {"id": 102, "image_id": 2, "category_id": 1, "bbox": [5, 5, 20, 30], "area": 600,
         "iscrowd": 0, "segmentation": []},
        {"id": 103, "image_id": 1, "category_id": 28, "bbox": [30, 2, 10, 10], "area": 100,
         "iscrowd": 0, "segmentation": [[30, 2, 40, 2, 40, 12, 30, 12]]},
    ]
    cats = [{"id": 1, "name": "person", "supercategory": "person"},
            {"id": 28, "name": "umbrella", "supercategory": "accessory"},
            {"id": 41, "name": "skateboard", "supercategory": "sports"}]
    kp = [{"id": 900, "image_id": 2, "category_id": 1, "bbox": [6, 6, 18, 28], "area": 500,
           "iscrowd": 0, "num_keypoints": 17, "keypoints": [10, 10, 2] * 17}]
    (root / "annotations" / f"captions_{split}.json").write_text(
        json.dumps({"images": images, "annotations": caps}))
    (root / "annotations" / f"instances_{split}.json").write_text(
        json.dumps({"images": images, "annotations": anns, "categories": cats}))
    (root / "annotations" / f"person_keypoints_{split}.json").write_text(
        json.dumps({"images": images, "annotations": kp, "categories": cats[:1]}))
    (root / "annotations" / "image_labels.json").write_text(
        json.dumps({"description": "t", "labels": {"2": ["person", "skateboard"]}}))
    (root / "annotations" / "perceived_gender_skin.csv").write_text(
        "image_id,bb_gender,bb_skin\n1,Female,Light\n2,Male,\n3,Both,\n99,Male,\n")
    return root


def synthetic_masked_set(root: Path, n_images: int, seed: int, image_size: int = 96,
                         **generate_kw) -> dict:
    """A synthetic dataset in ``root/raw`` read back as the prepared tables, with caption
    labels, the masks of every gendered image (PNGs in ``root/png``) and the generator's
    truth: the input of the counterfactual backends' tests."""
    from biaslab.counterfactual.masks import build_masks
    from biaslab.data import synthetic as S
    from biaslab.data.coco import read_coco
    from biaslab.data.labels import label_captions, label_images
    S.generate(root / "raw", n_images=n_images, seed=seed, image_size=image_size,
               **generate_kw)
    tables, _ = read_coco(root / "raw", progress=False)
    labels = label_images(label_captions(tables["captions"]))
    masks, _ = build_masks(tables["images"], tables["persons"], labels, None, root / "png",
                           splits=None, dilate_px=2, progress=False)
    return {"root": root, "tables": tables, "labels": labels, "masks": masks,
            "truth": S.read_truth(root / "raw")}


def write_generate_inputs(dst: Path, synth: dict, masks: bool = True) -> None:
    """Stage ``generate``'s inputs under ``dst``: data/prepared/{images,persons,captions},
    data/labels/images, data/split (75 / 25 stratified) and, with ``masks``,
    data/masks/masks.parquet."""
    from biaslab.data.labels import stratified_split
    (dst / "data/prepared").mkdir(parents=True)
    (dst / "data/labels").mkdir(parents=True)
    for name in ("images", "persons", "captions"):
        synth["tables"][name].to_parquet(dst / f"data/prepared/{name}.parquet")
    synth["labels"].to_parquet(dst / "data/labels/images.parquet")
    stratified_split(synth["labels"], {"train": 0.75, "test": 0.25}, 0).to_parquet(
        dst / "data/split.parquet")
    if masks:
        (dst / "data/masks").mkdir(parents=True)
        synth["masks"].to_parquet(dst / "data/masks/masks.parquet")


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a test module (``pytestmark = pytest.mark.usefixtures(
    "one_torch_thread")``): tiny matrices on a shared 2-core machine run fastest and most
    predictably on one; the previous count is restored after the module."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def tiny_coco(tmp_path):
    return write_tiny_coco(tmp_path / "coco")
