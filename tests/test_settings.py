"""biaslab.runtime.settings: the one helper every settings class is built with."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biaslab.runtime.settings import at_least, block_from_params, check_type, from_params


@dataclass
class Toy:
    n: int = 2
    rate: float = 0.5
    name: str = "a"
    flag: bool = False
    limit: int | None = None


def test_defaults_values_and_overrides():
    assert from_params(Toy, None, "toy") == Toy()
    assert from_params(Toy, {"n": 5}, "toy", overrides={"n": 7, "name": None}) == Toy(n=7)
    # an override that is not a field (a caller's keyword for another config) is dropped
    assert from_params(Toy, {}, "toy", overrides={"seed": 3}) == Toy()


def test_unknown_keys_are_named_or_ignored():
    with pytest.raises(ValueError, match=r"toy: unknown key\(s\) \['nn', 'zz'\]; known: "):
        from_params(Toy, {"zz": 1, "nn": 3}, "toy")
    assert from_params(Toy, {"nn": 3, "n": 4}, "toy", unknown="ignore") == Toy(n=4)
    with pytest.raises(ValueError, match="unknown must be"):
        from_params(Toy, {}, "toy", unknown="warn")
    with pytest.raises(ValueError, match="toy must be a mapping"):
        from_params(Toy, [("n", 1)], "toy")


def test_types_by_annotation():
    assert from_params(Toy, {"rate": 1, "limit": 3}, "toy", check_types=True) == \
        Toy(rate=1, limit=3)                    # an int is a float; int | None takes an int
    for bad, key in (({"n": 1.5}, "n"), ({"n": True}, "n"), ({"rate": "x"}, "rate"),
                     ({"flag": 1}, "flag"), ({"limit": "3"}, "limit")):
        with pytest.raises(ValueError, match=rf"toy\.{key} must be "):
            from_params(Toy, bad, "toy", check_types=True)
    check_type(object(), "SomeClass", "x")      # an annotation it cannot read accepts anything


def test_block_and_bounds():
    group = {"n": 4, "datasets": ["original"], "toy": {"rate": 0.25}}
    assert block_from_params(Toy, group, "toy", ("n",), "g") == Toy(n=4, rate=0.25)
    with pytest.raises(ValueError, match=r"g\.toy: unknown key\(s\) \['n'\]"):
        block_from_params(Toy, {"toy": {"n": 3}}, "toy", ("n",), "g")   # shared key in block
    at_least(Toy(n=1), ("n",), 1, "g")
    with pytest.raises(ValueError, match=r"g\.n must be >= 1, got 0"):
        at_least(Toy(n=0), ("n", "rate"), 1, "g")


@given(st.dictionaries(st.text(min_size=1, max_size=8), st.integers(), max_size=6))
def test_any_mapping_builds_or_names_its_first_unknown_key(d):
    known = {"n", "rate", "name", "flag", "limit"}
    bad = sorted(set(d) - known)
    if bad:
        with pytest.raises(ValueError) as e:
            from_params(Toy, d, "toy")
        assert str(e.value).startswith(f"toy: unknown key(s) {bad}")
    else:
        t = from_params(Toy, d, "toy")
        assert all(getattr(t, k) == v for k, v in d.items())


def test_the_settings_classes_use_it():
    """The captioners' and LIBRA's settings name the param in their messages."""
    from biaslab.captioning import blip2, clipcap, transformer_config
    from biaslab.libra import bcs, dcg, t5
    with pytest.raises(ValueError, match=r"libra\.t5: unknown key\(s\) \['d_modle'\]"):
        t5.settings_from_dict({"d_modle": 3})
    with pytest.raises(ValueError, match=r"libra\.dcg\.hidden must be int"):
        dcg.settings_from_dict({"hidden": "3"})
    with pytest.raises(ValueError, match=r"captioner\.beam must be >= 1"):
        clipcap.config_from_params({"beam": 0, "seeds": [0]})
    with pytest.raises(ValueError, match=r"captioner\.transformer: unknown key\(s\) \['beam'\]"):
        transformer_config.config_from_params({"transformer": {"beam": 2}})
    assert blip2.config_from_params({"epochs": 3, "blip2": {"beam": 2}}).beam == 2
    assert bcs.settings_from_params({"mix": "0:1:1", "t5": {}}).mix["merged"] == 1
