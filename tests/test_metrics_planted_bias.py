"""Bias metrics on the synthetic generator grow with the planted bias (3 levels): leakage of
the ground-truth objects (LK_D, paper 000 Eq. 7) and LIC_D of the human captions (thesis
Eq. 2.9). Ratio stays ~1 and Error 0: the generator is gender-balanced and its captions never
name the wrong gender."""
import pytest

from biaslab.data import synthetic
from biaslab.data.coco import read_coco
from biaslab.data.labels import label_captions, label_images
from biaslab.metrics.captions import error, ratio_details
from biaslab.metrics.leakage import leakage_details
from biaslab.metrics.lic import lic_details
from biaslab.models.objects import object_label_matrix
from biaslab.models.textclf import default_config

pytestmark = pytest.mark.slow


def _metrics(root, bias):
    synthetic.generate(root, n_images=300, bias=bias, seed=7, image_size=64)
    t, _ = read_coco(root, progress=False)
    g = label_images(label_captions(t["captions"])).set_index("image_id")["gender"]
    ids = [i for i in g.index if g[i] in ("female", "male")]
    y, _ = object_label_matrix(t["objects"], ids)
    lk = leakage_details(y, y, [g[i] for i in ids], rounds=3, seed=0)
    caps = t["captions"].sort_values("caption_id").groupby("image_id")["caption"].apply(list)
    human = {i: caps[i] for i in ids}
    res = lic_details({i: c[0] for i, c in human.items()}, human, {i: g[i] for i in ids},
                      seeds=2, config=default_config("lstm", "ci", progress=False))
    every = [c for i in ids for c in human[i]]
    every_g = [g[i] for i in ids for _ in human[i]]
    return lk["LK_D"], res["LIC_D"], ratio_details(every, every_g)["ratio"], error(every, every_g)


def test_bias_metrics_grow_with_planted_bias(tmp_path):
    out = {b: _metrics(tmp_path / str(b), b) for b in (0.0, 0.5, 0.9)}
    lk = [out[b][0] for b in (0.0, 0.5, 0.9)]
    lic_d = [out[b][1] for b in (0.0, 0.5, 0.9)]
    assert lk[0] < lk[1] < lk[2], lk
    assert lic_d[0] < lic_d[1] < lic_d[2], lic_d
    assert lic_d[0] < 40 and lic_d[2] > 45, lic_d      # chance is 25
    for b in out:
        assert out[b][2] == pytest.approx(1.0, abs=0.15) and out[b][3] == 0.0
