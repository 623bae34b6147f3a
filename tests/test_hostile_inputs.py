"""What a careless or hostile user tries: each is refused with one line naming the file or param
(no traceback), or recorded truthfully; nothing outside the data root is opened; no connection
to the Hugging Face Hub is attempted. The datasets are written here, by hand, in COCO layout
(not by biaslab/data/synthetic)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from biaslab.data.coco import read_coco
from biaslab.runtime.io import InputError
from tests.conftest import REPO

BIASLAB = str(Path(sys.executable).with_name("biaslab"))
DVC = str(Path(sys.executable).with_name("dvc"))


def _coco(root: Path, n: int = 3, split: str = "val2017") -> Path:
    """A COCO-layout directory: ``n`` 32 x 24 JPEGs, two captions each, a person and a dog."""
    (root / "annotations").mkdir(parents=True)
    (root / "images" / split).mkdir(parents=True)
    images, caps, inst = [], [], []
    for i in range(1, n + 1):
        name = f"{i:012d}.jpg"
        Image.new("RGB", (32, 24), (20 * i, 90, 200 - 20 * i)).save(root / "images" / split / name)
        images.append({"id": i, "file_name": name, "width": 32, "height": 24})
        caps += [{"id": 10 * i, "image_id": i, "caption": "A man with a dog."},
                 {"id": 10 * i + 1, "image_id": i, "caption": "A person walking a dog."}]
        inst += [{"id": 100 * i, "image_id": i, "category_id": 1, "bbox": [1, 1, 10, 20],
                  "area": 200, "segmentation": [], "iscrowd": 0},
                 {"id": 100 * i + 1, "image_id": i, "category_id": 18, "bbox": [15, 5, 8, 8],
                  "area": 64, "segmentation": [], "iscrowd": 0}]
    (root / "annotations" / f"captions_{split}.json").write_text(
        json.dumps({"images": images, "annotations": caps}))
    (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(
        {"images": images, "annotations": inst,
         "categories": [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}]}))
    return root


def _edit(path: Path, fn) -> None:
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


def test_the_hand_written_set_reads(tmp_path):
    tables, drops = read_coco(_coco(tmp_path / "c"), progress=False)
    assert len(tables["images"]) == 3 and len(tables["captions"]) == 6 and not drops


@pytest.mark.parametrize("file,edit,names", [
    ("captions", lambda d: d["images"][1].update(id="abc"), "images[1].id = 'abc'"),
    ("captions", lambda d: d["annotations"][0].update(id="x1"), "annotations[0].id = 'x1'"),
    ("captions", lambda d: d.update(images={"1": d["images"][0]}),
     "'images' must be a list of image objects, got a JSON dict"),
    ("captions", lambda d: d["images"].append("not an object"), "images[3] must be a JSON object"),
    ("instances", lambda d: d["categories"][1].update(id="dog"), "categories[1].id = 'dog'"),
    ("instances", lambda d: d["annotations"][1].update(category_id="18b"),
     "annotations[1].category_id = '18b'"),
    ("instances", lambda d: d["categories"][0].update(name=None), "categories[0].name"),
])
def test_malformed_coco_fields_are_one_line_errors_naming_file_entry_and_field(
        tmp_path, file, edit, names):
    root = _coco(tmp_path / "c")
    path = root / "annotations" / f"{file}_val2017.json"
    _edit(path, edit)
    with pytest.raises(InputError) as e:
        read_coco(root, progress=False)
    msg = str(e.value)
    assert msg.startswith(str(path)) and names in msg and "\n" not in msg, msg


def test_prepare_prints_one_line_for_a_malformed_id(tmp_path):
    """The user's command: stage prepare on the broken set exits 1 with one line."""
    root = _coco(tmp_path / "c")
    _edit(root / "annotations" / "captions_val2017.json",
          lambda d: d["images"][0].update(id="abc"))
    work = tmp_path / "w"
    work.mkdir()
    (work / "params.yaml").write_text(f"data:\n  source: coco\n  root: {root}\n")
    r = subprocess.run([sys.executable, str(REPO / "stages" / "prepare.py")], cwd=work,
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("OPENCV")]
    assert len(lines) == 1 and "images[0].id = 'abc' is not an integer" in lines[0], r.stderr
    assert not (work / "data").exists()


def test_a_symlink_out_of_the_root_is_never_opened(tmp_path):
    """An image symlinked to a file outside data.root is dropped and counted, and an audit
    hook sees no open of the outside file; an annotation file symlinked out is refused."""
    root = _coco(tmp_path / "c")
    secret = tmp_path / "outside.jpg"
    Image.new("RGB", (32, 24)).save(secret)
    img = root / "images" / "val2017" / "000000000002.jpg"
    img.unlink()
    img.symlink_to(secret)
    probe = (f"import sys, json\nopened = []\n"
             f"sys.addaudithook(lambda ev, a: opened.append(str(a[0])) if ev == 'open' else None)\n"
             f"from biaslab.data.coco import read_coco\n"
             f"t, drops = read_coco({str(root)!r}, progress=False)\n"
             f"print(json.dumps({{'drops': drops, 'n': len(t['images']), "
             f"'outside': [o for o in opened if 'outside' in o]}}))\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    assert out == {"drops": {"image_outside_root": 1, "caption_of_dropped_image": 2,
                             "instance_unknown_or_dropped_image": 2}, "n": 2, "outside": []}
    cap = root / "annotations" / "captions_val2017.json"
    moved = tmp_path / "captions_elsewhere.json"
    cap.rename(moved)
    cap.symlink_to(moved)
    with pytest.raises(InputError, match="leaves the dataset root"):
        read_coco(root, progress=False)


def test_a_split_name_with_dots_is_refused(tmp_path):
    """``captions_...json`` names split ``..``: the images would be read from <root>/../."""
    root = _coco(tmp_path / "c")
    (root / "annotations" / "captions_val2017.json").rename(root / "annotations" /
                                                            "captions_...json")
    with pytest.raises(InputError, match=r"split name '\.\.' must be letters"):
        read_coco(root, progress=False)


def test_a_decompression_bomb_is_counted_as_too_large_not_truncated(tmp_path):
    root = _coco(tmp_path / "c", n=2)
    big = root / "images" / "val2017" / "000000000001.jpg"
    Image.new("1", (20_000, 20_000)).save(big.with_suffix(".png"))
    big.unlink()
    big.with_suffix(".png").rename(big)
    _edit(root / "annotations" / "captions_val2017.json",
          lambda d: d["images"][0].update(width=20_000, height=20_000))
    _, drops = read_coco(root, progress=False)
    assert drops == {"image_too_large": 1, "caption_of_dropped_image": 2,
                     "instance_unknown_or_dropped_image": 2}


@pytest.mark.parametrize("pred,problem", [
    ("digits", "image_id '²' is not an integer"),
    ("/dev/zero", "is not a regular file"),
    ("fifo", "is not a regular file"),
])
def test_evaluate_captions_refuses_odd_predictions_in_one_line(tmp_path, pred, problem):
    labels = tmp_path / "labels.csv"
    labels.write_text("image_id,gender\n1,male\n2,female\n")
    if pred == "digits":
        path = tmp_path / "pred.json"
        path.write_text(json.dumps([{"image_id": "²", "caption": "a man"}]))
    elif pred == "fifo":
        path = tmp_path / "pred.fifo"
        os.mkfifo(path)
    else:
        path = Path(pred)
    r = subprocess.run([BIASLAB, "evaluate-captions", "--pred", str(path), "--gender",
                        str(labels), "--out", str(tmp_path / "m.json")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert problem in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "m.json").exists()


def test_a_too_large_predictions_file_is_refused_before_reading(tmp_path, monkeypatch):
    from biaslab.metrics import files
    monkeypatch.setattr(files, "MAX_PREDICTIONS_BYTES", 10)
    p = tmp_path / "pred.json"
    p.write_text(json.dumps([{"image_id": 1, "caption": "a man riding a horse"}]))
    with pytest.raises(InputError, match="over the 0 MiB this input may have"):
        files.read_predictions(p)


def test_a_backbone_named_by_a_model_directory_is_never_fetched(tmp_path):
    """A saved DCG whose dcg.json names a Hub backbone not in the local cache: one line, and
    an audit hook sees no socket connection, even with downloads allowed."""
    probe = r'''
import json, sys
tried = []
sys.addaudithook(lambda ev, a: tried.append(str(a)) if ev == "socket.connect" else None)
from biaslab.libra import dcg
from biaslab.runtime.io import InputError
d = sys.argv[1]
s = {f: v for f, v in vars(dcg.DCGSettings()).items()}
s.update(backbone="microsoft/resnet-50", image_input="features")
open(d + "/dcg.json", "w").write(json.dumps({"format": dcg._FORMAT, "settings": s}))
try:
    dcg.load(d)
    print(json.dumps({"err": None, "tried": tried}))
except InputError as e:
    print(json.dumps({"err": str(e), "tried": tried}))
'''
    d = tmp_path / "model"
    d.mkdir()
    env = {**os.environ, "BIASLAB_ALLOW_DOWNLOADS": "1", "HF_HOME": str(tmp_path / "hf")}
    env.pop("HF_HUB_OFFLINE", None)
    r = subprocess.run([sys.executable, "-c", probe, str(d)], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["tried"] == [], out
    assert out["err"] and "not in the local Hugging Face cache" in out["err"], out


def test_every_process_starts_offline_unless_downloads_are_allowed():
    """Every Python of the venv (its start-up hook) and the entry point elsewhere (``-S``: no
    hook) start with the Hub offline; downloads need the user's consent; the user's own
    ``HF_HUB_OFFLINE`` is kept."""
    code = "import os; print(os.environ.get('HF_HUB_OFFLINE'))"
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE",
                                                            "BIASLAB_ALLOW_DOWNLOADS")}
    elsewhere = (f"import sys; sys.path[:0] = {sys.path!r}; "
                 "import biaslab.runtime.startup as s; s.start(); ")
    for args in (["-c", code], ["-S", "-c", elsewhere + code]):
        run = lambda e: subprocess.run([sys.executable, *args], cwd=REPO, env=e,  # noqa: B023
                                       capture_output=True, text=True).stdout.strip()
        assert run(env) == "1"
        assert run({**env, "BIASLAB_ALLOW_DOWNLOADS": "1"}) == "None"
        assert run({**env, "HF_HUB_OFFLINE": "0"}) == "0"


def test_a_missing_data_root_is_refused_before_dvc_writes(tmp_path):
    """`dvc exp run -S data=coco -S data.root=/nonexistent` on a clone: refused by the start-up
    guard before any stage runs, params.yaml and dvc.lock untouched; `biaslab plan` says the
    root was not found."""
    from tests.conftest import clone_worktree
    repo = tmp_path / "repo"
    env = clone_worktree(repo, "root")
    before = {f: (repo / f).read_bytes() for f in ("params.yaml", "dvc.lock")}
    r = subprocess.run([DVC, "exp", "run", "-S", "data=coco", "-S",
                        f"data.root={tmp_path / 'nonexistent'}"], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "params data.root" in r.stderr and "is not a directory" in r.stderr, r.stderr
    assert "Running stage" not in r.stdout
    assert {f: (repo / f).read_bytes() for f in before} == before
    r = subprocess.run([BIASLAB, "plan", "-S", "data=coco", "-S",
                        f"data.root={tmp_path / 'nonexistent'}"],
                       cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "not found" in r.stdout and "a run refuses" in r.stdout, r.stdout
