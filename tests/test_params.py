"""params.yaml must equal the Hydra composition of conf/ (what `dvc exp run -S` writes)."""
import yaml
from dvc.utils.hydra import compose_and_dump

from tests.conftest import REPO


def test_params_yaml_is_the_composed_default(tmp_path):
    out = tmp_path / "params.yaml"
    compose_and_dump(str(out), str(REPO / "conf"), None, "config", "", [])
    assert yaml.safe_load(out.read_text()) == yaml.safe_load((REPO / "params.yaml").read_text())


def test_coco_mini_profile_switches_the_data_source(tmp_path):
    out = tmp_path / "params.yaml"
    compose_and_dump(str(out), str(REPO / "conf"), None, "config", "", ["data=coco_mini"])
    p = yaml.safe_load(out.read_text())
    assert p["data"]["source"] == "coco" and p["data"]["root"] == "../shared/coco-mini"
