"""What the generator plants (module docstring of :mod:`biaslab.data.synthetic`): the
gender labels, the objects with their COCO ids, the scenes and casts with their associated
gender, the keypoint layout, the split names and the renderer version."""
from __future__ import annotations

import re

FEMALE, MALE = "female", "male"
#: Perceived skin tone, binarised as in Zhao et al. 2021's ``bb_skin`` (Light / Dark).
LIGHT, DARK = "light", "dark"
SKIN_TONES = (LIGHT, DARK)

#: Base presence probability of every object (``p`` in the module docstring).
P_OBJECT = 0.35
#: Blend weight of the warm/cool tint (0 = no cast, 1 = flat tint colour).
CAST_STRENGTH = 0.18
#: Smallest accepted ``image_size`` (pixels); below it figures and objects become too small.
MIN_IMAGE_SIZE = 64

#: Objects drawn, with their real COCO category ids.
COCO_CATEGORY_IDS = {
    "person": 1, "bicycle": 2, "dog": 18, "umbrella": 28, "handbag": 31, "tie": 32,
    "sports ball": 37, "baseball bat": 39, "skateboard": 41, "cup": 47, "cell phone": 77,
}
SUPERCATEGORY = {
    "person": "person", "bicycle": "vehicle", "dog": "animal", "umbrella": "accessory",
    "handbag": "accessory", "tie": "accessory", "sports ball": "sports",
    "baseball bat": "sports", "skateboard": "sports", "cup": "kitchen",
    "cell phone": "electronic",
}
FEMALE_OBJECTS = ("handbag", "umbrella", "cup", "cell phone")
MALE_OBJECTS = ("tie", "sports ball", "skateboard", "baseball bat")
NEUTRAL_OBJECTS = ("bicycle", "dog")
#: The second protected attribute's planted context: the gender-neutral objects are
#: associated with a skin tone, so the skin-tone bias and the gender bias act on disjoint
#: objects and each keeps its own ground truth.
SKIN_OBJECT_ASSOCIATION = {"bicycle": LIGHT, "dog": DARK}
#: Object names in COCO-id order (the column order of the presence matrix).
OBJECTS = tuple(sorted(FEMALE_OBJECTS + MALE_OBJECTS + NEUTRAL_OBJECTS,
                       key=COCO_CATEGORY_IDS.__getitem__))
#: object name -> "female" / "male" / "neutral"
OBJECT_ASSOCIATION = {**{o: FEMALE for o in FEMALE_OBJECTS}, **{o: MALE for o in MALE_OBJECTS},
                      **{o: "neutral" for o in NEUTRAL_OBJECTS}}

FEMALE_SCENES = ("kitchen", "beach")
MALE_SCENES = ("field", "street")
SCENES = FEMALE_SCENES + MALE_SCENES
#: Background of the mask-neutrality images only (a uniform grey; never in the dataset).
PLAIN = "plain"
SCENE_ASSOCIATION = {**{s: FEMALE for s in FEMALE_SCENES}, **{s: MALE for s in MALE_SCENES}}
#: Cast -> associated gender.
CASTS = ("warm", "cool")
CAST_ASSOCIATION = {"warm": FEMALE, "cool": MALE}
CAST_TINT = {"warm": (255, 150, 40), "cool": (40, 130, 255)}

KEYPOINT_NAMES = (
    "nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
    "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
    "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle",
)
SKELETON = [[16, 14], [14, 12], [17, 15], [15, 13], [12, 13], [6, 12], [7, 13], [6, 7], [6, 8],
            [7, 9], [8, 10], [9, 11], [2, 3], [1, 2], [1, 3], [2, 4], [3, 5], [4, 6], [5, 7]]

SPLIT = "synth"
#: COCO split of the separate test set (``generate(test_images=...)``).
TEST_SPLIT = "synthtest"
FILE_RE = re.compile(r"^\d{12}\.png$")
PROBE_RE = re.compile(r"^[a-z]+_\d{4,}_(female|male)\.png$")
#: Generator parameters of a dataset, read by the ``render`` counterfactual backend.
PARAMS_FILE = "annotations/synth_params.json"
#: Bump when the same arguments draw different pixels (the render backend checks it).
RENDER_VERSION = 3
