"""Today's engine image pins (systems/images_current.py) against the `sagemaker` package's image tables. A pin newer
than its table (the DLC release records list releases before the `sagemaker` package does) is checked against the
table's newest version, whose registries it takes: the same URI but for the release in the tag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from systems import images_current
from systems.images import DLC_REGIONS, ImagePin
from systems.images_current import CURRENT_IMAGES, REGIONS_WITHOUT_ACCOUNT

# The pins defined there (HF_PYTORCH_INFERENCE is imported from systems/images.py, tested with its table).
PINS = {
    name: pin
    for name, pin in vars(images_current).items()
    if isinstance(pin, ImagePin) and name != "HF_PYTORCH_INFERENCE"
}


def _table(framework: str) -> dict:
    import sagemaker.core

    path = Path(sagemaker.core.__file__).parent / "image_uri_config" / f"{framework}.json"
    return json.loads(path.read_text())


def _table_regions(pin: ImagePin) -> set[str]:
    versions = _table(pin.sdk_framework)["inference"]["versions"][pin.table_version]
    if pin.sdk_base_framework_version:
        versions = versions[pin.sdk_base_framework_version]
    return set(versions["registries"])


@pytest.mark.parametrize("pin", list(PINS.values()), ids=list(PINS))
def test_pinned_uris_match_sagemaker_tables_in_every_region(pin):
    from sagemaker.core import image_uris

    mismatches = []
    for region in pin.available_regions:
        for instance_type, gpu in (("ml.g5.xlarge", True), ("ml.m5.xlarge", False)):
            if not gpu and pin.cpu_tag is None:
                continue
            extra = {"base_framework_version": pin.sdk_base_framework_version} if pin.sdk_base_framework_version else {}
            try:
                expected = image_uris.retrieve(
                    pin.sdk_framework,
                    region,
                    version=pin.table_version,
                    instance_type=instance_type,
                    image_scope="inference",
                    **extra,
                )
                expected = pin.from_table(expected)
            except ValueError as err:
                mismatches.append(
                    (region, instance_type, pin.uri(region, gpu=gpu), f"not in the sagemaker table: {err}")
                )
                continue
            if pin.uri(region, gpu=gpu) != expected:
                mismatches.append((region, instance_type, pin.uri(region, gpu=gpu), expected))
    assert mismatches == []


@pytest.mark.parametrize("pin", list(PINS.values()), ids=list(PINS))
def test_pins_cover_every_region_of_the_table_they_can_name(pin):
    """A pin leaves out only regions outside DLC_REGIONS (the ISO partitions) or without a known account."""
    left_out = _table_regions(pin) - set(pin.available_regions)
    assert {r for r in left_out if r in DLC_REGIONS} == set()
    assert {r for r in left_out if not r.startswith(("us-iso", "eu-isoe", "eusc-"))} <= set(REGIONS_WITHOUT_ACCOUNT)


def test_regions_without_account_are_exactly_what_the_engine_tables_add():
    from systems.images import _DLC_ACCOUNT_BY_REGION

    added = (_table_regions(images_current.VLLM_DLC) | _table_regions(images_current.SGLANG_DLC)) - set(DLC_REGIONS)
    assert set(REGIONS_WITHOUT_ACCOUNT) == added
    assert not set(REGIONS_WITHOUT_ACCOUNT) & set(_DLC_ACCOUNT_BY_REGION)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_engine_dlcs_are_gpu_only_and_the_newest_the_tables_list():
    from sagemaker.core import image_uris

    for pin in (images_current.VLLM_DLC, images_current.SGLANG_DLC):
        assert pin.cpu_tag is None
        with pytest.raises(ValueError, match="Unsupported processor: cpu"):
            image_uris.retrieve(
                pin.sdk_framework,
                "us-east-1",
                version=pin.table_version,
                instance_type="ml.m5.xlarge",
                image_scope="inference",
            )
        versions = _table(pin.sdk_framework)["inference"]["versions"]
        newest = max(versions, key=_release)
        assert pin.table_version == newest, f"{pin.sdk_framework}.json now lists {newest}: review the pin"
        if pin.sdk_table_version is not None:
            # Ahead of the table, never behind it; once the table lists the release, the override goes.
            assert pin.sdk_version not in versions, (
                f"{pin.sdk_framework}.json lists {pin.sdk_version}: drop sdk_table_version"
            )
            assert _release(pin.sdk_version) > _release(newest)
            assert pin.gpu_tag.startswith(f"{pin.sdk_version}-")
        with pytest.raises(ValueError, match="is offered for GPU instances only"):
            pin.uri("us-east-1", gpu=False)
        with pytest.raises(ValueError, match="not published in region cn-north-1"):
            pin.uri("cn-north-1", gpu=True)


def test_image_facts_name_each_pin_once_with_its_cuda_and_engine():
    from systems.engine_tables import ARCHITECTURES

    assert {facts.pin for facts in CURRENT_IMAGES} == set(PINS.values())
    for facts in CURRENT_IMAGES:
        assert facts.engine in ARCHITECTURES, facts.engine
        cuda_tag = f"cu{facts.cuda.replace('.', '')}"
        assert cuda_tag in facts.pin.gpu_tag, (facts.pin.gpu_tag, facts.cuda)
        assert f"py{facts.python.replace('.', '')}" in facts.pin.gpu_tag


def test_python_stacks_of_the_current_images():
    floors = {
        name: (pin.python_stack.transformers_floor[:2], pin.python_stack.tokenizers_floor[:2])
        for name, pin in PINS.items()
    }
    assert floors == {
        "VLLM_DLC": ((5, 10), (0, 22)),
        "SGLANG_DLC": ((5, 12), (0, 22)),
        "HF_PYTORCH_INFERENCE_4_51": ((4, 51), (0, 21)),
        "HF_PYTORCH_INFERENCE_5_5": ((5, 5), (0, 22)),
    }
    # The vLLM image's transformers is a floor from the wheel's requirements, not a read pin.
    assert [name for name, pin in PINS.items() if not pin.python_stack.verified] == ["VLLM_DLC"]
