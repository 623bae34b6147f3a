"""Deterministic synthetic dataset in official COCO layout with a planted gender-context bias.

This is the pipeline's embedded default data source: it needs no network and no pretrained
weights, and it gives ground truth. With ``bias = 0`` gender is independent of every context
attribute (objects, scene, colour cast), so bias metrics must read "unbiased"; they must grow
with ``bias``.

Every image shows exactly one person drawn with PIL. Gender is balanced in the training pool
(``ceil(n/2)`` female, ``floor(n/2)`` male, seeded shuffle); an optional separate test split
(``test_images``, COCO split ``synthtest``) has ``test_gender_ratio`` men per woman (COCO's
test set: 2.3). Both genders have the same silhouette and colours; gender is visible only in the
direction of the tunic's accent stripes (renderer version 3: a uniform fill
over the person must not look like either gender, and the person's box must not tell gender):

* female: horizontal stripes;
* male: vertical stripes.

Head, hair, torso outline, arms, legs, shoes and every colour palette are shared; no part is
drawn rectangular or in a gender-specific colour (:func:`figures._figure` gives the
measurements).

Skin, hair and clothing colours, arm pose, position and size are drawn from the *same*
distributions for both genders. The person stands in a placement box that covers 10-35 % of the
image (uniform; aspect 0.8 : 1, feet below the horizon when there is room); the figure is as tall
as the box and horizontally centred in it, so its own bounding box is narrower (its width depends
on the body shape and the arms). Objects avoid the placement box when they can.

Planted structure, for gender ``g`` and bias ``b`` in [0, 1] (``s = +1`` if the attribute is
associated with ``g``, ``-1`` if with the other gender, ``0`` if neutral):

(a) **Labeled objects** (real COCO ids and names, boxes + polygons in ``instances_synth.json``):
    ``P(object present | g) = P_OBJECT * (1 + s * b)`` with ``P_OBJECT = 0.35`` (so at most
    0.665, the clamp to [0, 1] never triggers), independently per object.
    Female-associated: handbag, umbrella, cup, cell phone. Male-associated: tie, sports ball,
    skateboard, baseball bat. Neutral (``s = 0``): bicycle, dog.
(b) **Scene** (background; named in captions, not in instances):
    ``P(scene group associated with g | g) = (1 + b) / 2``, split evenly between the two scenes
    of the group, so each scene has probability ``(1 + s * b) / 4``. Female-associated: kitchen,
    beach; male-associated: field, street.
(c) **Unlabeled attribute**: a global colour cast (the whole image is blended with an orange
    ("warm") or a blue ("cool") tint, ``CAST_STRENGTH``):
    ``P(warm | female) = (1 + b) / 2``, ``P(warm | male) = (1 - b) / 2``. The cast appears in no
    annotation and no caption: resampling on labels cannot see it (Hirota et al., "Resampled
    Datasets Are Not Enough", EMNLP 2024 -- paper 000 -- sec. 2.1). It is recorded only in the
    returned summary and in ``annotations/synth_truth.csv``.

(d) **Skin tone** (the second protected attribute): the person's skin colour is drawn
    from a shared palette (``N_LIGHT`` light tones, as many dark ones) by the first draw of
    the ``appearance`` stream, so it is light or dark with probability 1/2, independently of
    gender (:func:`appearance_skin`); ``bb_skin`` carries it (Light / Dark). The planted
    skin-tone bias ``b_t`` (``skin_bias``, default 0) acts on the gender-neutral objects only
    (``SKIN_OBJECT_ASSOCIATION``: bicycle with light, dog with dark skin):
    ``P(present | t) = P_OBJECT * (1 + s_t * b_t)``, so the gender bias and the skin-tone bias
    act on disjoint objects and each keeps its own ground truth. With ``b_t = 0`` every draw is
    the one made before skin tone was planted.

With ``b = 0`` all three are independent of gender. All draws are independent Bernoulli /
categorical draws given gender, so e.g. the expected difference
``P(female-associated object | female) - P(... | male)`` is ``2 * P_OBJECT * b`` and the scene-
and cast-group differences are ``b``.

Captions (``captions_per_image`` per image, template based, COCO vocabulary) name the scene and
some of the present objects. Each caption independently uses a gender-neutral subject
("a person", "someone", possessive "their") with probability ``p_no_gender_word``, otherwise
words of the person's true gender from ``biaslab.data.gender.WORD_LISTS["lic"]`` (woman, lady, girl,
she, her / man, gentleman, boy, guy, he, his). A caption never contains a word of the other
gender.

Output layout (``out_dir``), readable by ``biaslab.data.coco.read_coco`` (split name ``synth``)::

    annotations/captions_synth.json          COCO captions
    annotations/instances_synth.json         COCO instances (person + objects, polygons)
    annotations/person_keypoints_synth.json  COCO keypoints (17, from the drawn figure)
    annotations/perceived_gender_skin.csv    image_id,bb_gender,bb_skin (Male/Female, Light/Dark)
    annotations/image_labels.json            {"description", "labels": {id: [category names]}}
    annotations/synth_truth.csv              image_id,gender,scene,cast,objects (';'-joined),skin
    annotations/image_attributes.csv         image_id,scene,cast (read by biaslab.data.coco)
    annotations/synth_params.json            generator arguments + renderer version
    images/synth/<12-digit id>.png           the images (ids start at 1)
    probe/pairs.csv                          probe manifest (PROBE_COLUMNS), if probe_pairs
    probe/images/<attr>_<pair>_<value>.png   probe images (value: female/male-associated)
    README.md                                what was planted, with the realised counts

Annotations: one person per image; ``bbox`` = [x, y, w, h] of the polygon points (pixels),
``segmentation`` = one polygon per drawn body/object part (COCO list of flat lists), ``area`` =
area of the union mask (pycocotools), ``iscrowd`` 0; the person's 17 keypoints (COCO order, the
figure faces the viewer so ``left_*`` is on the image right) come from the figure geometry, all
with visibility 2. Person and keypoint annotations share ids.

Randomness: each image draws from independent, separately seeded streams
(``SeedSequence([seed, 0x5EED, image key, stream, slot])``): ``scene`` (background and horizon),
``placement`` (the person's placement box, drawn before and independently of the figure),
``order`` (drawing order of the objects), ``object`` slot k (size, position and colours of the
k-th drawn object), ``appearance`` (colours and arm pose of the person; the same draws for both
genders) and ``captions``. The planted truth (gender, objects, scene, cast) comes from
:func:`sample_truth`. Hence :func:`render_scene` re-draws the *same* scene with a person of
another gender and/or appearance, and only pixels inside the union of the two persons' masks
change (the ``render`` counterfactual backend, ``biaslab.counterfactual.render``).

Probe pairs (``probe_pairs`` > 0; the causal attribute-sensitivity probe, ``biaslab.analysis.probe``):
for each planted attribute in ``PROBE_ATTRIBUTES`` (``objects``: ``PROBE_OBJECTS``
female-associated objects vs as many male-associated ones in the same slots; ``scene``: a
female- vs a male-associated scene; ``cast``: warm vs cool) and each pair, two images that are
identical except for that attribute (same person, same placement; :func:`probe_specs`). They
are written to ``probe/`` only, never into the COCO annotations, so they never enter training.

Every file is written atomically; the same arguments give byte-identical files.

Modules (this package re-exports their public names):

* ``world``: what is planted (objects, scenes, casts, their associations), keypoints, splits;
* ``figures``: the person (palettes, polygons, the unit figure, its placement);
* ``scenes``: objects and backgrounds;
* ``captions``: the caption grammar;
* ``render``: one image from its truth and seeded streams; the probe and neutral images;
* ``writers``: :func:`generate`, the COCO-layout files, manifests and README;
* ``readers``: reading a generated set back.
"""
from __future__ import annotations

from biaslab.data.synthetic.world import (CASTS, CAST_ASSOCIATION, CAST_STRENGTH, COCO_CATEGORY_IDS,
                                          DARK, FEMALE, FEMALE_OBJECTS, FEMALE_SCENES, KEYPOINT_NAMES,
                                          MALE, MALE_OBJECTS, MALE_SCENES, MIN_IMAGE_SIZE,
                                          NEUTRAL_OBJECTS, OBJECTS, OBJECT_ASSOCIATION, PARAMS_FILE,
                                          PLAIN, P_OBJECT, RENDER_VERSION, SCENES,
                                          SCENE_ASSOCIATION, SKELETON, SKIN_OBJECT_ASSOCIATION,
                                          SKIN_TONES, LIGHT, SPLIT, TEST_SPLIT)
from biaslab.data.synthetic.figures import (ENVELOPE_HALF_WIDTH, N_LIGHT, STRIPE_PERIOD, TORSO,
                                            skin_tone_of)
from biaslab.data.synthetic.render import (FLIP_VALUES, NEUTRAL_MANIFEST, PROBE_ATTRIBUTES,
                                           PROBE_COLUMNS, PROBE_MANIFEST, PROBE_OBJECTS,
                                           Rendering, appearance_skin, probe_specs, render_flip,
                                           render_neutral, render_probe, render_scene, sample_truth)
from biaslab.data.synthetic.writers import (generate, test_gender_counts)
from biaslab.data.synthetic.readers import (read_generator_params, read_neutral, read_probe,
                                            read_truth)

__all__ = ["CASTS", "CAST_ASSOCIATION", "CAST_STRENGTH", "COCO_CATEGORY_IDS", "DARK", "FEMALE",
           "LIGHT", "N_LIGHT", "SKIN_OBJECT_ASSOCIATION", "SKIN_TONES", "appearance_skin",
           "skin_tone_of",
           "FEMALE_OBJECTS", "FEMALE_SCENES", "KEYPOINT_NAMES", "MALE", "MALE_OBJECTS",
           "MALE_SCENES", "MIN_IMAGE_SIZE", "NEUTRAL_OBJECTS", "OBJECTS", "OBJECT_ASSOCIATION",
           "PARAMS_FILE", "PLAIN", "P_OBJECT", "RENDER_VERSION", "SCENES", "SCENE_ASSOCIATION",
           "SKELETON", "SPLIT", "TEST_SPLIT", "ENVELOPE_HALF_WIDTH", "STRIPE_PERIOD", "TORSO",
           "NEUTRAL_MANIFEST", "PROBE_ATTRIBUTES", "PROBE_COLUMNS", "PROBE_MANIFEST",
           "PROBE_OBJECTS", "Rendering", "probe_specs", "render_neutral", "render_probe",
           "render_scene", "render_flip", "FLIP_VALUES", "sample_truth", "generate",
           "test_gender_counts",
           "read_generator_params", "read_neutral", "read_probe", "read_truth"]
