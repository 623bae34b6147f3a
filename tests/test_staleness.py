"""Image bytes are part of the DAG. An image rewritten in place (same name, same
size) changes ``prepare``'s images table (its ``digest``), is encoded again by the feature
cache, and invalidates exactly the generate shard that holds it; other shards and features are
reused. A rewritten donor image invalidates the copy_paste shards (conservatively all)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from biaslab.data.coco import read_coco
from biaslab.counterfactual.copy_paste import CopyPasteBackend, donor_pool
from biaslab.counterfactual.generate import build_work, generate_candidates, make_prompts
from biaslab.counterfactual.masks import build_masks
from biaslab.models.features import encode_cached
from biaslab.data.labels import label_captions, label_images
from biaslab.data.synthetic import generate as make_synthetic

SHARDS = 3


class MeanColour:
    """Stand-in encoder (no model load): the mean RGB of each image; counts what it encodes."""
    name, dim, image_size = "mean_colour", 3, 8

    def __init__(self):
        self.encoded = []

    def encode(self, images, batch_size=32, progress=False):
        self.encoded += [str(p) for p in images]
        return np.stack([np.asarray(Image.open(p).convert("RGB"), np.float32).mean((0, 1))
                         for p in images])


@pytest.fixture
def synth(tmp_path):
    make_synthetic(tmp_path / "raw", n_images=24, image_size=96, seed=1)
    return tmp_path


def _pipeline(root, cache, out):
    tables, _ = read_coco(root / "raw", progress=False)
    labels = label_images(label_captions(tables["captions"]))
    masks, _ = build_masks(tables["images"], tables["persons"], labels, None, root / "png",
                           splits=None, dilate_px=2, progress=False)
    work = build_work(masks, tables["images"], tables["persons"],
                      make_prompts(tables["captions"], masks["image_id"]), shards=SHARDS)[0]
    enc = MeanColour()
    _, feats = encode_cached(tables["images"], cache, encoder=enc)
    donor_images = tables["images"][tables["images"]["image_id"] % 2 == 0]   # even ids donate
    backend = CopyPasteBackend(donor_pool(tables["persons"], donor_images, labels),
                               feather_px=1.0)
    cand, stats = generate_candidates(work, backend, out, m=1, guidance_scales=[7.5], seed=0,
                                      shards=SHARDS, progress=False,
                                      callback=lambda s, *a: computed.add(s))
    return tables, work, enc, feats, backend, stats


computed: set[int] = set()


def _rewrite(path):
    with Image.open(path) as im:
        arr = np.asarray(im.convert("RGB")).copy()
    arr[:8, :8] = 255 - arr[:8, :8]
    Image.fromarray(arr).save(path, format="JPEG", quality=95)


def test_rewritten_image_recomputes_its_features_and_shard_only(synth):
    cache, out = synth / "cache", synth / "gen"
    computed.clear()
    t1, work, enc1, f1, backend, st1 = _pipeline(synth, cache, out)
    assert st1["shards_computed"] == SHARDS and len(enc1.encoded) == len(t1["images"])
    donors = set(backend.donors["path"])
    row = work[~work["path"].isin(donors)].iloc[0]          # a source image, not a donor
    _rewrite(row["path"])

    computed.clear()
    t2, _, enc2, f2, _, st2 = _pipeline(synth, cache, out)
    # prepare: only the digest of that image changed
    a, b = t1["images"].set_index("image_id"), t2["images"].set_index("image_id")
    changed = a.index[a["digest"] != b["digest"]].tolist()
    assert changed == [row["image_id"]]
    pd.testing.assert_frame_equal(a.drop(columns="digest"), b.drop(columns="digest"))
    for name in ("captions", "persons", "objects"):
        pd.testing.assert_frame_equal(t1[name], t2[name])
    # features: that image encoded again, every other row served from the cache
    assert enc2.encoded == [row["path"]]
    pos = t2["images"].index[t2["images"]["image_id"] == row["image_id"]][0]
    assert not np.allclose(f1[pos], f2[pos])
    assert np.array_equal(np.delete(f1, pos, 0), np.delete(f2, pos, 0))
    # generate: exactly the shard holding the image
    assert computed == {int(row["shard"])}
    assert st2["shards_computed"] == 1 and st2["shards_skipped"] == SHARDS - 1


def test_rewritten_donor_image_invalidates_copy_paste_shards(synth):
    cache, out = synth / "cache", synth / "gen"
    _, work, _, _, backend, _ = _pipeline(synth, cache, out)
    donor = sorted(set(backend.donors["path"]))[0]
    _rewrite(donor)
    computed.clear()
    _, _, enc, _, _, st = _pipeline(synth, cache, out)
    assert enc.encoded == [donor]
    assert st["shards_computed"] == SHARDS                 # donors used are known only after
    computed.clear()
    _, _, enc, _, _, st = _pipeline(synth, cache, out)      # and nothing the next time
    assert enc.encoded == [] and st["shards_skipped"] == SHARDS and computed == set()
