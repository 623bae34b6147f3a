"""Ground truth through the real code path: synthetic generator -> COCO reader -> caption labels
-> REVISE audit. With bias 0 the audit finds nothing; with strong bias it finds exactly the
planted objects."""

from biaslab.data import synthetic
from biaslab.analysis.audit_run import run_audit
from biaslab.data.coco import read_coco
from biaslab.data.labels import label_captions, label_images


def _audit(tmp_path, bias):
    root = tmp_path / f"synth-{bias}"
    synthetic.generate(root, n_images=300, bias=bias, seed=3, image_size=64)
    t, drops = read_coco(root, progress=False)
    assert drops == {}
    labels = label_images(label_captions(t["captions"]))
    return run_audit(t["images"], t["captions"], t["persons"], t["objects"], labels,
                     correction="bonferroni", alpha=0.01)


def _significant(result):
    tab = result.objects
    return set(tab.loc[tab["significant"], "category"])


def test_audit_finds_only_planted_objects(tmp_path):
    strong = _audit(tmp_path, 0.9)
    planted = set(synthetic.FEMALE_OBJECTS) | set(synthetic.MALE_OBJECTS)
    assert _significant(strong) == planted
    assert not _significant(strong) & set(synthetic.NEUTRAL_OBJECTS)


def test_audit_finds_nothing_without_bias(tmp_path):
    assert _significant(_audit(tmp_path, 0.0)) == set()
