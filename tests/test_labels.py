"""Image labels, agreement with perceived gender, stratified split."""
import pandas as pd
import pytest

from biaslab.data.labels import agreement, label_captions, label_images, stratified_split
from tests.conftest import CAPTIONS


def _caps():
    rows = [{"caption_id": i * 10 + j, "image_id": i, "caption": c}
            for i, cs in CAPTIONS.items() for j, c in enumerate(cs)]
    return pd.DataFrame(rows)


def test_label_images_counts_and_rules():
    caps = label_captions(_caps())
    imgs = label_images(caps).set_index("image_id")
    assert imgs["gender"].to_dict() == {1: "female", 2: "male", 3: "undefined", 4: "undefined"}
    assert imgs.loc[1, ["n_female", "n_male", "n_both", "n_none"]].tolist() == [2, 0, 0, 1]
    assert imgs.loc[3, "n_both"] == 1
    k2 = label_images(caps, rule="at_least_k", k=2).set_index("image_id")["gender"]
    assert k2.to_dict() == {1: "female", 2: "male", 3: "undefined", 4: "undefined"}
    k3 = label_images(caps, rule="at_least_k", k=3).set_index("image_id")["gender"]
    assert set(k3) == {"undefined"}


def test_agreement_hand_computed():
    labels = pd.DataFrame({"image_id": [1, 2, 3, 4, 5, 6],
                           "gender": ["female", "male", "male", "female", "undefined", "male"]})
    perceived = pd.DataFrame({"image_id": [1, 2, 3, 4, 5, 6],
                              "perceived_gender": ["female", "male", "female", "female",
                                                   "male", "other"]})
    a = agreement(labels, perceived)
    # compared: 1 (f,f) 2 (m,m) 3 (f->m) 4 (f,f); 5 undefined; 6 not binary
    assert a["n_compared"] == 4 and a["n_perceived_binary"] == 5
    assert a["accuracy"] == pytest.approx(0.75)
    assert a["coverage"] == pytest.approx(4 / 5)
    # kappa: po = .75, pe = (3/4*2/4) + (1/4*2/4) = .5 -> (.75-.5)/(1-.5) = .5
    assert a["cohen_kappa"] == pytest.approx(0.5)
    assert a["confusion"] == [[2, 1], [0, 1]]


def test_agreement_without_overlap_is_none():
    a = agreement(pd.DataFrame({"image_id": [1], "gender": ["male"]}),
                  pd.DataFrame({"image_id": [2], "perceived_gender": ["male"]}))
    assert a["accuracy"] is None and a["n_compared"] == 0


def test_split_is_stratified_and_deterministic():
    labels = pd.DataFrame({"image_id": range(100),
                           "gender": ["female"] * 30 + ["male"] * 50 + ["undefined"] * 20})
    fr = {"train": 0.7, "val": 0.1, "test": 0.2}
    s1 = stratified_split(labels, fr, seed=0)
    s2 = stratified_split(labels.sample(frac=1, random_state=1), fr, seed=0)
    pd.testing.assert_frame_equal(s1, s2)  # input order does not matter
    counts = s1.groupby(["gender", "split"]).size().to_dict()
    assert counts[("female", "train")] == 21 and counts[("female", "test")] == 6
    assert counts[("male", "val")] == 5 and counts[("undefined", "test")] == 4
    assert not s1.equals(stratified_split(labels, fr, seed=1))
    with pytest.raises(ValueError, match="sum to 1"):
        stratified_split(labels, {"train": 0.5, "test": 0.2}, seed=0)
