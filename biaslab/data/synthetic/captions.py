"""Template captions in COCO vocabulary: the subject by gender (or a neutral one), the scene
and some of the present objects; never a word of the other gender."""
from __future__ import annotations

from biaslab.data.synthetic.world import FEMALE, MALE

# --------------------------------------------------------------------------- captions

_SUBJECT = {
    FEMALE: ["a woman", "a woman", "a young woman", "a lady", "a girl"],
    MALE: ["a man", "a man", "a young man", "a gentleman", "a boy", "a guy"],
    None: ["a person", "a person", "someone", "a young person"],
}
_PRONOUN = {FEMALE: "she", MALE: "he", None: "someone"}
_POSSESSIVE = {FEMALE: "her", MALE: "his", None: "their"}
VP = {
    "handbag": ["carrying a handbag", "holding a purse", "with a handbag"],
    "umbrella": ["holding an umbrella", "with an umbrella", "carrying an umbrella"],
    "cup": ["holding a cup", "drinking from a cup", "with a cup of coffee"],
    "cell phone": ["talking on a cell phone", "looking at a cell phone", "using a phone"],
    "tie": ["wearing a tie", "in a tie", "with a tie"],
    "sports ball": ["playing with a ball", "kicking a soccer ball", "with a ball"],
    "skateboard": ["riding a skateboard", "holding a skateboard", "with a skateboard"],
    "baseball bat": ["swinging a baseball bat", "holding a baseball bat", "with a bat"],
    "bicycle": ["next to a bicycle", "with a bike", "standing by a bicycle"],
    "dog": ["with a dog", "walking a dog", "next to a dog"],
}
NOUN = {
    "handbag": ["handbag", "purse"], "umbrella": ["umbrella"], "cup": ["cup", "coffee cup"],
    "cell phone": ["cell phone", "phone"], "tie": ["tie"], "sports ball": ["ball", "soccer ball"],
    "skateboard": ["skateboard"], "baseball bat": ["baseball bat", "bat"],
    "bicycle": ["bicycle", "bike"], "dog": ["dog"],
}
_SCENE_PP = {
    "kitchen": ["in a kitchen", "in the kitchen", "inside a kitchen", "in a small kitchen"],
    "beach": ["on a beach", "on the beach", "on a sandy beach", "near the ocean"],
    "field": ["in a field", "on a grassy field", "on the field", "on a grass field"],
    "street": ["on a street", "on a city street", "on the sidewalk", "by the road"],
}
_SCENE_NP = {"kitchen": ["a kitchen", "a small kitchen"], "beach": ["a beach", "a sandy beach"],
             "field": ["a grassy field", "a field"], "street": ["a city street", "a street"]}


def pick(rng, seq):
    """One element of ``seq``, drawn uniformly with ``rng``."""
    return seq[int(rng.integers(len(seq)))]


def article(noun):
    """``noun`` with its indefinite article (``an`` before a vowel)."""
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def template_caption(rng, gender, scene, objects, p_neutral):
    """One template caption. ``gender`` is the true gender; with probability ``p_neutral`` the
    caption is gender-neutral."""
    g = None if rng.random() < p_neutral else gender
    mentioned = []
    if objects:
        k = int(rng.choice(3, p=[0.15, 0.6, 0.25]))
        k = min(k, len(objects))
        if k:
            idx = rng.choice(len(objects), size=k, replace=False)
            mentioned = [objects[i] for i in sorted(idx)]
    np_ = pick(rng, _SUBJECT[g])
    vps = [pick(rng, VP[o]) for o in mentioned]
    if len(vps) == 2 and not all(v.split()[0].endswith("ing") for v in vps):
        # "next to a dog and swinging a bat" reads badly: list the objects instead
        vp = "with " + " and ".join(article(pick(rng, NOUN[o])) for o in mentioned)
    else:
        vp = " and ".join(vps)
    pp = pick(rng, _SCENE_PP[scene])
    t = int(rng.integers(8))
    if t == 0:
        text = f"{np_} {vp or 'standing'} {pp}"
    elif t == 1:
        text = f"{np_} {pp} {vp}" if vp else f"{np_} standing alone {pp}"
    elif t == 2:
        verb = vp if vp.split()[:1] and vp.split()[0].endswith("ing") else \
            f"standing {vp}".strip()
        text = f"{_PRONOUN[g]} is {verb} {pp}"
    elif t == 3:
        text = f"there is {np_} {vp} {pp}" if vp else f"there is {np_} {pp}"
    elif t == 4 and mentioned:
        nouns = " and ".join(pick(rng, NOUN[o]) for o in mentioned)
        text = f"{np_} standing {pp} with {_POSSESSIVE[g]} {nouns}"
    elif t == 5 and vp:
        text = f"{pick(rng, _SCENE_NP[scene])} with {np_} {vp}"
    elif t == 6:
        text = f"a photo of {np_} {vp} {pp}" if vp else f"a photo of {np_} {pp}"
    else:
        text = f"{np_} posing for a picture {pp}" + (f" {vp}" if vp else "")
    text = " ".join(text.split())
    if rng.random() < 0.6:
        text = text[0].upper() + text[1:]
    if rng.random() < 0.5:
        text += "."
    return text
