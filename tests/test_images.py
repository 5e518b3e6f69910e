"""The pinned image table against the image tables bundled in the `sagemaker` package (offline JSON)."""

from __future__ import annotations

import pytest

from endpoint_config import SYSTEM_NAMES
from systems import get_system
from systems.images import DLC_REGIONS, HF_PYTORCH_INFERENCE


@pytest.mark.parametrize("pin", [HF_PYTORCH_INFERENCE], ids=lambda p: p.repository)
def test_pinned_uris_match_sagemaker_tables_in_every_region(pin):
    from sagemaker.core import image_uris

    mismatches = []
    for region in DLC_REGIONS:
        for instance_type, gpu in (("ml.g5.xlarge", True), ("ml.m5.xlarge", False)):
            if not gpu and pin.cpu_tag is None:
                continue
            expected = image_uris.retrieve(
                pin.sdk_framework,
                region,
                version=pin.sdk_version,
                base_framework_version=pin.sdk_base_framework_version,
                instance_type=instance_type,
                image_scope="inference",
            )
            if pin.uri(region, gpu=gpu) != expected:
                mismatches.append((region, instance_type, pin.uri(region, gpu=gpu), expected))
    assert mismatches == []


def test_every_system_has_a_pinned_image():
    for name in SYSTEM_NAMES:
        system = get_system(name)
        assert system.image.gpu_tag and ":" not in system.image.gpu_tag
        assert system.name == name
