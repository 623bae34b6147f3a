"""Code is part of every cache key. ``source_digest`` follows a module's
imports (lazy and relative ones too) inside its package; an edit of the generate backend or of
the feature code changes generate's shard fingerprints and the feature cache directory, so a
stale result is never served after a code change -- with no version constant to bump."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from biaslab.runtime.provenance import import_closure, source_digest

REPO = Path(__file__).resolve().parents[1]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


@pytest.fixture
def toy_pkg(tmp_path, monkeypatch):
    root = tmp_path / "src"
    _write(root / "toypkg/__init__.py", "")
    _write(root / "toypkg/a.py", """
        import json

        def f():
            from toypkg import b   # lazy, as make_backend's backend imports
            return b.g()
        """)
    _write(root / "toypkg/b.py", "from .sub.c import z\n\ndef g():\n    return z\n")
    _write(root / "toypkg/sub/__init__.py", "")
    _write(root / "toypkg/sub/c.py", "z = 1\n")
    _write(root / "toypkg/d.py", "unused = True\n")
    monkeypatch.syspath_prepend(str(root))
    source_digest.cache_clear()
    yield root
    source_digest.cache_clear()
    for m in [m for m in sys.modules if m.startswith("toypkg")]:
        del sys.modules[m]


def test_closure_follows_lazy_and_relative_imports_within_the_package(toy_pkg):
    assert list(import_closure("toypkg.a")) == ["toypkg", "toypkg.a", "toypkg.b", "toypkg.sub",
                                                 "toypkg.sub.c"]


def test_digest_changes_with_an_imported_module_only(toy_pkg):
    before = source_digest("toypkg.a")
    (toy_pkg / "toypkg/d.py").write_text("unused = False\n")        # not imported by a
    source_digest.cache_clear()
    assert source_digest("toypkg.a") == before
    (toy_pkg / "toypkg/sub/c.py").write_text("z = 2\n")              # imported two levels down
    source_digest.cache_clear()
    after = source_digest("toypkg.a")
    assert after != before and len(after) == 64


def test_unknown_module_is_a_clear_error():
    with pytest.raises(ValueError, match="no_such_module"):
        import_closure("no_such_module")


def test_generate_and_features_closures_cover_their_backends_and_preprocessing():
    gen = import_closure("biaslab.counterfactual.generate")
    for m in ("biaslab.counterfactual.render", "biaslab.counterfactual.copy_paste",
              "biaslab.counterfactual.sd_inpaint", "biaslab.data.synthetic"):
        assert m in gen
    assert {"biaslab.models.features", "biaslab.runtime.numerics"} <= set(import_closure("biaslab.models.features"))


def test_param_validation_is_not_in_the_digests():
    """biaslab.runtime.validate only accepts or rejects params: a new check must not re-key every
    generate shard and feature (it did, through biaslab.runtime.io.load_params)."""
    for m in ("biaslab.counterfactual.generate", "biaslab.models.features"):
        closure = import_closure(m)
        assert "biaslab.runtime.io" in closure and "biaslab.runtime.validate" not in closure


def test_generate_lists_every_file_of_its_code_digest_as_a_dvc_dep():
    """The code digest is stored in every shard's metadata, i.e. in generate's output bytes:
    a file in the digest that DVC does not watch could change those bytes without DVC
    re-running the stage, and a fresh clone would then disagree with the committed lock."""
    import yaml
    deps = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["generate"]["deps"]
    files = {str(p.relative_to(REPO)) for p in
             import_closure("biaslab.counterfactual.generate").values()}
    dirs = [d.rstrip("/") + "/" for d in deps if (REPO / d).is_dir()]
    assert {f for f in files - set(deps) if not f.startswith(tuple(dirs))} == set()


SCRIPT = """
import hashlib, json, sys
from pathlib import Path
import biaslab
from biaslab.data.coco import read_coco
from biaslab.counterfactual.copy_paste import CopyPasteBackend, donor_pool
from biaslab.counterfactual.generate import build_work, generate_candidates, make_prompts
from biaslab.counterfactual.masks import build_masks
from biaslab.models.features import cache_key
from biaslab.data.labels import label_captions, label_images
from biaslab.data.synthetic import generate as make_synthetic

root = Path(sys.argv[1])
if not (root / "raw").exists():
    make_synthetic(root / "raw", n_images=16, image_size=96, seed=1)
tables, _ = read_coco(root / "raw", progress=False)
labels = label_images(label_captions(tables["captions"]))
masks, _ = build_masks(tables["images"], tables["persons"], labels, None, root / "png",
                       splits=None, dilate_px=2, progress=False)
work = build_work(masks, tables["images"], tables["persons"],
                  make_prompts(tables["captions"], masks["image_id"]), shards=2)[0]
backend = CopyPasteBackend(donor_pool(tables["persons"], tables["images"], labels),
                           feather_px=1.0)
cand, stats = generate_candidates(work, backend, root / "gen", m=1, guidance_scales=[7.5],
                                  seed=0, shards=2, progress=False)
h = hashlib.sha256()
for p in sorted(cand["path"]):
    h.update(Path(p).read_bytes())
print(json.dumps({"package": biaslab.__file__, "computed": stats["shards_computed"],
                  "skipped": stats["shards_skipped"], "pixels": h.hexdigest(),
                  "feature_cache": cache_key("efficientnet_lite0", 224)}))
"""

INVERT = """

# test_provenance: a user's edit of the backend -- invert its output
_generate_before_edit = CopyPasteBackend.generate


def _inverted(self, *args, **kwargs):
    return [(255 - arr, donors) for arr, donors in _generate_before_edit(self, *args, **kwargs)]


CopyPasteBackend.generate = _inverted
"""


def test_an_edited_backend_recomputes_the_shards_and_an_edited_encoder_the_features(tmp_path):
    """A stale cache: invert a backend's output in its source and run again. Before,
    every shard was skipped as finished and the stale pixels kept; now the shard fingerprints
    change, every shard is recomputed and the pixels are new. An unchanged re-run still
    resumes (nothing recomputed). The same for the feature cache's directory name."""
    src = tmp_path / "src"
    shutil.copytree(REPO / "biaslab", src / "biaslab",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "run.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(src)}

    def run():
        r = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path / "data")],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    first = run()
    assert first["package"].startswith(str(src))        # the copy, not the installed package
    assert first["computed"] == 2
    again = run()
    assert again["computed"] == 0 and again["pixels"] == first["pixels"]

    with open(src / "biaslab/counterfactual/copy_paste.py", "a") as f:
        f.write(INVERT)
    edited = run()
    assert edited["computed"] == 2 and edited["pixels"] != first["pixels"]
    assert edited["feature_cache"] == first["feature_cache"]   # features.py untouched

    with open(src / "biaslab/models/features.py", "a") as f:
        f.write("\nIMAGENET_MEAN = (0.5, 0.5, 0.5)  # test_provenance: an edited preprocessing\n")
    assert run()["feature_cache"] != first["feature_cache"]
