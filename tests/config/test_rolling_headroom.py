"""A component's rolling update needs room for one batch beside every running copy (operations review R5): a fully
packed component (4 copies of 1 GPU on one ml.g5.12xlarge, the review's full-ic.yaml) is refused at load, naming the
copies, the capacity and what would fit; with headroom it loads."""

from __future__ import annotations

import pytest
import yaml

from deployment import load_config
from endpoint_config import ConfigError


def write(tmp_path, *, copies=4, max_instances=1, batch=None, copy_scaling=None):
    endpoint = {
        "name": "packed",
        "system": "lmi-vllm",
        "model": "EleutherAI/gpt-j-6B",
        "dtype": "fp16",
        "instance_type": "ml.g5.12xlarge",
        "tensor_parallel_degree": 1,
        "volume_size_gb": None,
        "hosting": {
            "mode": "inference-components",
            "instance_scaling": {"min_instances": 1, "max_instances": max_instances},
            "compute": {"accelerators": 1},
            "copies": copies,
            **({"copy_scaling": copy_scaling} if copy_scaling else {}),
        },
        "deployment": {"rolling": {"maximum_batch_size": batch or {"copies": 1}}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"endpoints": [endpoint]}))
    return path


def test_a_fully_packed_component_is_refused_naming_copies_capacity_and_what_fits(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path))
    message = str(err.value)
    assert "endpoint 'packed': hosting.copies: value 4: a rolling update adds a batch of 1 new copy" in message
    assert "5 in all, but hosting.instance_scaling.max_instances 1 of ml.g5.12xlarge (4 GPUs each) hold 4" in message
    assert "Allowed: at most 3 copies with this batch, or raise max_instances to 2" in message


def test_copy_scaling_counts_its_maximum_and_a_percent_batch_is_rounded_up(tmp_path):
    scaling = {"min_copies": 2, "max_copies": 4, "target_concurrency": 4}
    with pytest.raises(ConfigError, match=r"hosting.copy_scaling.max_copies: value 4: .* a batch of 2 new copies"):
        load_config(write(tmp_path, copies=2, batch={"percent": 50}, copy_scaling=scaling))


@pytest.mark.parametrize(("copies", "max_instances"), [(3, 1), (4, 2)])
def test_a_component_with_room_for_a_batch_loads(tmp_path, copies, max_instances):
    load_config(write(tmp_path, copies=copies, max_instances=max_instances))
