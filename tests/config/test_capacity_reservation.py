"""Engines review E3: an ML capacity reservation (capacity.reservation_arn, CapacityReservationPreference
capacity-reservations-only) was accepted with the default blue/green update and with autoscaling above what the
reservation may hold; the first update's green fleet or a scale-out then fails to launch. Now the config says how many
instances the reservation holds (capacity.reserved_instances) and the endpoint's peak must fit, refused at load with
a message quoting botocore's service model."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import config_refusal

from deployment import load_config
from deployment.plan import quota_need
from endpoint_config.pools import reservation_peak

RESERVATION = "arn:aws:sagemaker:us-east-1:111122223333:ml-reservation/p5-capacity"
ENDPOINT = (
    "name: qwen, system: vllm, model: Qwen/Qwen3-32B, dtype: bf16, instance_type: ml.p5.4xlarge, "
    "volume_size_gb: null, engine: {max_model_len: 32768}"
)


def config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "reserved.yaml"
    path.write_text(f"endpoints:\n  - {{{ENDPOINT}, {extra}}}\n")
    return path


def test_a_reservation_needs_its_size(tmp_path):
    message = config_refusal(config(tmp_path, f"capacity: {{reservation_arn: '{RESERVATION}'}}"))
    assert "capacity.reserved_instances: required with reservation_arn" in message
    assert "up to 2 at once (instance_count 1 + a blue/green update's new fleet of 1)" in message
    assert "SageMaker creates a new fleet during the deployment while maintaining the old fleet" in message
    assert "If no capacity is available, the instances fail to launch" in message


@pytest.mark.parametrize(
    "extra, peak",
    [
        ("instance_count: 2", 4),  # blue/green, the default
        ("instance_count: 2, deployment: null", 4),  # SageMaker's default is blue/green too
        ("autoscaling: {min_capacity: 2, max_capacity: 4, target_value: 8}", 8),
        (
            "instance_count: 2, deployment: {rolling: {maximum_batch_size: {instances: 1}}}",
            4,  # the rollback batch defaults to the whole fleet
        ),
    ],
)
def test_a_reservation_smaller_than_the_peak_is_refused(tmp_path, extra, peak):
    message = config_refusal(
        config(tmp_path, f"{extra}, capacity: {{reservation_arn: '{RESERVATION}', reserved_instances: 3}}")
    )
    assert f"capacity.reserved_instances: value 3 is below the {peak} instances this endpoint runs at once" in message
    assert "deployment.rolling" in message


def test_a_rolling_update_with_small_batches_fits_a_tight_reservation(tmp_path):
    rolling = "deployment: {rolling: {maximum_batch_size: {instances: 1}, rollback_maximum_batch_size: {instances: 1}}}"
    path = config(
        tmp_path, f"instance_count: 2, {rolling}, capacity: {{reservation_arn: '{RESERVATION}', reserved_instances: 3}}"
    )
    [ep] = load_config(path).endpoints
    assert ep.capacity is not None and ep.capacity.reserved_instances == 3
    assert reservation_peak(ep) == (3, "instance_count 2 + a rolling batch of 1 (1 on rollback)")


@pytest.mark.parametrize(
    "extra",
    [
        "instance_count: 3",
        "autoscaling: {min_capacity: 1, max_capacity: 5, target_value: 8}",
        "instance_count: 4, deployment: {rolling: {maximum_batch_size: {percent: 25}}}",
        "instance_count: 4, deployment: {rolling: {maximum_batch_size: {instances: 1}, rollback_maximum_batch_size: {percent: 50}}}",
    ],
)
def test_the_peak_is_the_quota_checks_peak(tmp_path, extra):
    [ep] = load_config(
        config(tmp_path, f"{extra}, capacity: {{reservation_arn: '{RESERVATION}', reserved_instances: 100}}")
    ).endpoints
    assert reservation_peak(ep)[0] == quota_need(ep).peak
