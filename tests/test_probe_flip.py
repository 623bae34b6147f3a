"""The attribute-flip probe (biaslab.analysis.probe.flip_*): test images drawn
with the person's gender or skin tone flipped, everything else kept; S > 0 when a model's
object outputs follow the planted attribute-object association."""
import numpy as np
import pandas as pd
import pytest

from biaslab.analysis import probe as P
from biaslab.data import synthetic as S
from biaslab.runtime.io import InputError, load_image

SIZE = 64


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("flip")
    S.generate(root, n_images=4, bias=0.8, seed=3, image_size=SIZE, test_images=12,
               skin_bias=0.9)
    return root


@pytest.fixture(scope="module")
def table(data, tmp_path_factory):
    return P.flip_table(data, ("gender", "skin"), 10, tmp_path_factory.mktemp("flipimg"))


def test_flip_objects_follow_the_generator_tables():
    fem, mal = P.flip_objects("gender")
    assert set(fem) == set(S.FEMALE_OBJECTS) and set(mal) == set(S.MALE_OBJECTS)
    assert P.flip_objects("skin") == (("dog",), ("bicycle",))      # (dark, light)
    with pytest.raises(ValueError, match="unknown flip dimension"):
        P.flip_objects("age")


def test_one_image_of_each_pair_is_the_test_image_and_only_the_person_changes(data, table):
    truth = S.read_truth(data)
    changed = {"gender": 0, "skin": 0}
    assert len(table) == 2 * 2 * 10
    assert set(table["pair"]) == set(range(5, 15))           # ids of the synthtest split
    for (dim, i), g in table.groupby(["attribute", "pair"]):
        assert list(g["value"]) == list(S.FLIP_VALUES[dim])
        own = truth[i][dim]
        orig = load_image(data / "images" / S.TEST_SPLIT / f"{i:012d}.png")
        img = {v: load_image(p) for v, p in zip(g["value"], g["path"])}
        assert (img[own] == orig).all()                        # pixel for pixel
        other = next(v for v in S.FLIP_VALUES[dim] if v != own)
        diff = (img[other] != orig).any(-1)
        changed[dim] += bool(diff.any())
        r = S.render_flip(i, truth[i], seed=3, image_size=SIZE, dim=dim, value=other)
        assert not diff[~(r.person_mask | S.render_scene(
            i, seed=3, image_size=SIZE, gender=truth[i]["gender"], scene=truth[i]["scene"],
            cast=truth[i]["cast"], objects=truth[i]["objects"]).person_mask)].any()
        assert set(g["gender"]) == {truth[i]["gender"]} and set(g["skin"]) == {truth[i]["skin"]}
    # the skin tone always shows (face, arms); at 64 px one body-shape flip of ten draws the
    # same pixels (image 12: the figure's outline hides the difference)
    assert changed["skin"] == 10 and changed["gender"] >= 9


def test_object_output_hand_computed():
    labels = ["bicycle", "dog", "handbag", "umbrella", "cup", "cell phone", "tie",
              "sports ball", "skateboard", "baseball bat"]
    p = np.zeros((2, len(labels)))
    p[0, labels.index("bicycle")], p[0, labels.index("dog")] = 0.9, 0.2
    p[1, labels.index("tie")] = 0.8                                 # male objects mean 0.2
    p[1, labels.index("handbag")], p[1, labels.index("cup")] = 0.4, 0.4   # female mean 0.2
    np.testing.assert_allclose(P.object_output(p, labels, "skin"), [0.7, 0.0])
    np.testing.assert_allclose(P.object_output(p, labels, "gender"), [0.0, 0.0])
    p[1, labels.index("skateboard")] = 0.4                          # male mean 0.3
    np.testing.assert_allclose(P.object_output(p, labels, "gender"), [0.0, 0.1])
    with pytest.raises(ValueError, match="no output for"):
        P.object_output(p[:, :3], labels[:3], "gender")


def test_caption_object_output_hand_computed():
    caps = ["a man riding a bike", "a woman walking a dog with a purse",
            "a person with a dog and a bicycle", "a man with a tie and a bat"]
    np.testing.assert_allclose(P.caption_object_output(caps, "skin"), [1, -1, 0, 0])
    # gender: male share - female share; "purse" names a handbag (1 of 4 female objects)
    np.testing.assert_allclose(P.caption_object_output(caps, "gender"),
                               [0, -0.25, 0, 0.5])


def _skin_reader(table, strength=1.0):
    """A 'model' that reads the person's skin tone from the pixels of each image and says
    'bicycle' for light, 'dog' for dark (strength 1: the full swing; 0: ignores skin)."""
    out = np.zeros(len(table))
    for k, (path, dim, value, skin) in enumerate(zip(table["path"], table["attribute"],
                                                    table["value"], table["skin"])):
        tone = value if dim == "skin" else skin
        out[k] = strength * (1.0 if tone == S.LIGHT else -1.0)
    return out


def test_skin_reader_scores_the_full_swing_on_skin_and_zero_on_gender(table):
    per_seed = {s: P.flip_sensitivities(table, _skin_reader(table)) for s in (0, 1, 2)}
    rec = P.summarize_flip(per_seed, "skin", n_boot=200)
    # o = P(bicycle) - P(dog): +1 light, -1 dark; s = o(light) - o(dark) = 2 on every skin pair;
    # the gender flip keeps the skin tone: 0
    assert rec["skin"]["mean"] == pytest.approx(2.0) and rec["skin"]["ci95"] == 0.0
    assert rec["gender"]["mean"] == 0.0
    assert rec["skin"]["mean_output"] == {"a": -1.0, "b": 1.0}
    assert "skin|female" not in rec                       # per-group only for gender_skin


def test_gender_skin_gives_per_group_records_and_their_gap(table):
    # a reader of skin tone among men only: the skin flip moves it for men, not for women
    men = (table["gender"] == S.MALE).to_numpy()
    per_seed = {s: P.flip_sensitivities(table, _skin_reader(table) * men) for s in (0, 1, 2)}
    rec = P.summarize_flip(per_seed, "gender_skin", n_boot=200)
    n_men = int(table.drop_duplicates(["attribute", "pair"]).query(
        "attribute == 'skin'")["gender"].eq(S.MALE).sum())
    assert 0 < n_men < 10
    assert rec["skin|male"]["mean"] == pytest.approx(2.0)
    assert rec["skin|female"]["mean"] == 0.0
    assert rec["skin"]["mean"] == pytest.approx(2.0 * n_men / 10)
    assert rec["skin|male"]["n_pairs"] + rec["skin|female"]["n_pairs"] == 10
    gap = rec["skin|gap"]
    assert gap["groups"] == [S.FEMALE, S.MALE]
    assert gap["mean"] == pytest.approx(2.0) and gap["ci95"] == 0.0   # men minus women
    # the gender flip of a skin reader is 0 in both skin groups
    assert rec["gender|light"]["mean"] == 0.0 and rec["gender|dark"]["mean"] == 0.0


def test_sensitivities_keep_sign_convention():
    t = pd.DataFrame({"attribute": ["skin"] * 4, "pair": [1, 1, 2, 2],
                      "value": ["dark", "light", "light", "dark"],
                      "gender": ["female"] * 4, "skin": ["dark", "dark", "light", "light"],
                      "path": ["x"] * 4})
    w = P.flip_sensitivities(t, [0.1, 0.4, 0.5, 0.5])
    assert list(w["sensitivity"]) == pytest.approx([0.3, 0.0])   # o(light) - o(dark)
    assert list(w["out_a"]) == [0.1, 0.5] and list(w["skin"]) == ["dark", "light"]
    with pytest.raises(ValueError, match="outputs for"):
        P.flip_sensitivities(t, [0.1])


def test_flip_table_errors(data, tmp_path):
    with pytest.raises(ValueError, match="n_images"):
        P.flip_table(data, ("skin",), 0, tmp_path)
    with pytest.raises(ValueError, match="unknown flip dimension"):
        P.flip_table(data, ("age",), 2, tmp_path)
    no_test = tmp_path / "no_test"
    S.generate(no_test, n_images=3, bias=0.8, seed=0, image_size=SIZE)
    with pytest.raises(InputError, match="no test split"):
        P.flip_table(no_test, ("gender",), 2, tmp_path)
    with pytest.raises(ValueError, match="skin must be one of"):
        S.render_flip(1, S.read_truth(no_test)[1], seed=0, image_size=SIZE, dim="skin",
                      value="female")


def test_association_sensitivity_hand_computed():
    # dark: P(bicycle) 1/2, P(dog) 2/2 -> -0.5; light: P(bicycle) 1/2, P(dog) 0 -> +0.5
    vals = ["dark", "dark", "light", "light", "unknown"]
    objs = [["dog"], ["dog", "bicycle"], ["bicycle"], [], ["dog"]]
    assert P.association_sensitivity(vals, objs, "skin") == pytest.approx(1.0)
    # the same objects with each value: no association
    assert P.association_sensitivity(["dark", "light"], [["dog"], ["dog"]], "skin") == 0.0
    assert P.association_sensitivity(["dark", "dark"], [["dog"], []], "skin") is None
    fem, mal = P.flip_objects("gender")
    # every woman with every female-associated object, every man with every male one: 2
    assert P.association_sensitivity(["female", "male"], [list(fem), list(mal)],
                                     "gender") == pytest.approx(2.0)


def test_flip_reference_finds_the_planted_skin_association_and_not_a_null_one(tmp_path):
    planted, null = tmp_path / "planted", tmp_path / "null"
    for root, sb in ((planted, 0.9), (null, 0.0)):
        S.generate(root, n_images=300, bias=0.0, seed=5, image_size=64, test_images=0,
                   skin_bias=sb)
    ref = P.flip_reference(planted, ("gender", "skin"), n_boot=300)
    assert ref["skin"]["n"] == 300 and sum(ref["skin"]["n_by_value"].values()) == 300
    assert ref["skin"]["lo"] > 0.3                      # planted: P(bicycle|light) high
    assert set(ref) == {"gender", "skin"}
    ref0 = P.flip_reference(null, ("skin",), n_boot=300)
    assert ref0["skin"]["lo"] < 0 < ref0["skin"]["hi"]
