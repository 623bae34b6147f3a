"""The target groups of the counterfactuals per protected attribute: gender
(female, male; paper 000 sec. 2.2), skin tone (dark, light; appendix B.1) and their four
intersections ``<gender>_<skin>`` (sec. 7). Plain names, no heavy imports: the generation
loop, the donor pool and the training-set builders all parse groups with it."""
from __future__ import annotations

from biaslab.data import gender as G

#: the binarised perceived skin tones (Zhao et al. 2021's bb_skin Dark / Light).
SKIN_TONES = ("dark", "light")


def generation_groups(attribute: str = "gender") -> tuple[str, ...]:
    """The target groups g' of the counterfactuals for a protected attribute:
    ``gender`` -> (female, male) (paper 000 sec. 2.2), ``skin`` -> (dark, light) (appendix
    B.1), ``gender_skin`` -> the four ``<gender>_<skin>`` groups (sec. 7's intersectional
    extension).

    The same groups as :data:`biaslab.metrics.files.ATTRIBUTES` (a test keeps them equal);
    built here so that the shards' code digest does not take in the metrics package.

    Raises:
        ValueError: not gender, skin or gender_skin."""
    skin = SKIN_TONES
    groups = {"gender": tuple(G.GENDERS), "skin": skin,
              "gender_skin": tuple(f"{g}_{t}" for g in G.GENDERS for t in skin)}
    if attribute not in groups:
        raise ValueError(f"unknown attribute {attribute!r}; known: {list(groups)}")
    return groups[attribute]


def group_parts(group: str) -> tuple[str | None, str | None]:
    """``(gender, skin)`` of a target group: ``"female"`` -> (female, None), ``"dark"`` ->
    (None, dark), ``"male_light"`` -> (male, light).

    Raises:
        ValueError: not a group of any attribute."""
    parts = str(group).split("_")
    gender = [p for p in parts if p in G.GENDERS]
    skin = [p for p in parts if p in SKIN_TONES]
    if len(gender) + len(skin) != len(parts) or len(gender) > 1 or len(skin) > 1 \
            or (gender and skin and parts[0] not in G.GENDERS):
        raise ValueError(f"unknown group {group!r}: expected female/male, dark/light or "
                         f"<gender>_<skin>")
    return (gender[0] if gender else None), (skin[0] if skin else None)
