"""DBAC's settings (Nair, Tokas & Kerner 2025; :mod:`biaslab.metrics.dbac`): the one place
their defaults and ranges live, read from params ``eval_captioner.dbac`` and
``published.dbac`` and from ``biaslab evaluate-captions --dbac-*``. Torch-free, so every
stage's params check builds them at its start (:func:`biaslab.runtime.validate_nested.
check_dbac`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from numbers import Integral, Real
from typing import Any

__all__ = ["DIRECTIONS", "SUBSTITUTIONS", "DbacSettings"]

#: DBAC's directions: text to attribute, attribute to text
DIRECTIONS = ("T->A", "A->T")
#: how a masked object word is replaced (:func:`biaslab.metrics.dbac.substitute`)
SUBSTITUTIONS = ("contextual", "constant", "none")


@dataclass(frozen=True)
class DbacSettings:
    """DBAC's settings beside its attacker (which is LIC's: ``lic.classifier`` / ``preset`` /
    ``num_threads``).

    Attributes:
        seeds: attacker seeds per direction: a count >= 1 (seeds ``0..n-1``), a non-empty
            list of distinct seeds (kept as a tuple), or None = LIC's (``lic.seeds``).
        bayes: the authors' prior correction (Bayes' rule on the attacker's probabilities).
        substitution: :data:`SUBSTITUTIONS`, how a masked object word is replaced.
        threshold: the attacker's decision threshold, in [0, 1].
        directions: a non-empty tuple of distinct :data:`DIRECTIONS`.
        test_ratio: the held-out fraction of images per attacker, in (0, 1).

    Raises:
        ValueError: ``"<field>: <problem>"`` for the first bad value.
    """
    seeds: int | tuple[int, ...] | None = None
    bayes: bool = True
    substitution: str = "contextual"
    threshold: float = 0.5
    directions: tuple[str, ...] = DIRECTIONS
    test_ratio: float = 0.2

    def __post_init__(self):
        s = self.seeds
        if isinstance(s, Sequence) and not isinstance(s, (str, bytes)):
            if not s or not all(_int(x) and x >= 0 for x in s) or len(set(s)) != len(s):
                raise ValueError(f"seeds: must be null (lic.seeds), an integer >= 1 or a "
                                 f"non-empty list of distinct seeds >= 0, got {s!r}")
            object.__setattr__(self, "seeds", tuple(int(x) for x in s))
        elif s is not None and (not _int(s) or s < 1):
            raise ValueError(f"seeds: must be null (lic.seeds), an integer >= 1 or a "
                             f"non-empty list of distinct seeds >= 0, got {s!r}")
        if not isinstance(self.bayes, bool):
            raise ValueError(f"bayes: must be true or false, got {self.bayes!r}")
        if self.substitution not in SUBSTITUTIONS:
            raise ValueError(f"substitution: must be contextual, constant or none, got "
                             f"{self.substitution!r}")
        t = self.threshold
        if not _real(t) or not 0 <= t <= 1:
            raise ValueError(f"threshold: must be a number in [0, 1], got {t!r}")
        r = self.test_ratio
        if not _real(r) or not 0 < r < 1:
            raise ValueError(f"test_ratio: must be a number in (0, 1), got {r!r}")
        d = self.directions
        if (isinstance(d, (str, bytes)) or not isinstance(d, Sequence) or not d
                or any(x not in DIRECTIONS for x in d) or len(set(d)) != len(d)):
            raise ValueError(f"directions: must be a non-empty list of distinct T->A / A->T, "
                             f"got {d!r}")
        object.__setattr__(self, "directions", tuple(d))

    @classmethod
    def from_mapping(cls, values: Any, param: str = "eval_captioner.dbac"
                     ) -> "DbacSettings | None":
        """The settings of a params mapping; None (DBAC off) for None.

        Raises:
            ValueError: ``"<param>: must be null (off) or a mapping"``, ``"<param>.<key>:
                unknown key (known: [...])"`` or ``"<param>.<field>: <problem>"``.
        """
        if values is None:
            return None
        if not isinstance(values, Mapping):
            raise ValueError(f"{param}: must be null (off) or a mapping, got {values!r}")
        known = [f.name for f in fields(cls)]
        bad = sorted(set(values) - set(known))
        if bad:
            raise ValueError(f"{param}.{bad[0]}: unknown key (known: {known})")
        try:
            return cls(**values)
        except ValueError as e:
            raise ValueError(f"{param}.{e}") from None


def _int(v: Any) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


def _real(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)
