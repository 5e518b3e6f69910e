"""The `data_capture:`, `network:` and `encryption:` blocks (endpoint_config/security.py) and an environment's
`encryption.bucket_key`: valid blocks load with their defaults; each mistake is refused at load with a message naming
the file, the endpoint (or environment), the key, the value and what is allowed. Load only, no synth (fast)."""

from __future__ import annotations

import textwrap

import pytest
from helpers import ROOT

from deployment import load_config
from endpoint_config import ConfigError
from endpoint_config.security import DataCapture, Network, data_capture_prefix, network_isolation

KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
# A real-time CPU endpoint (no local NVMe on m5) and a GPU one on g5 (local NVMe).
M5 = "{{name: chat, system: hf-fastload, model: gpt2, instance_type: ml.m5.xlarge{extra}}}"
G5 = "{{name: chat, system: hf-fastload, model: EleutherAI/gpt-j-6B, instance_type: ml.g5.2xlarge{extra}}}"
# The serving system whose engine downloads its weights from S3 itself (staged weights).
FT = (
    "{{name: ft, system: djl-fastertransformer, model: google/flan-t5-xxl, instance_type: ml.g5.12xlarge, "
    "tensor_parallel_degree: 4{extra}}}"
)


def config(tmp_path, endpoint: str = M5, extra: str = "", environments: str = ""):
    path = tmp_path / "endpoints.yaml"
    path.write_text(textwrap.dedent(environments) + "endpoints:\n  - " + endpoint.format(extra=extra) + "\n")
    return path


def test_the_production_example_captures_data_in_a_created_vpc_with_a_bucket_key():
    environment_plan = load_config(ROOT / "config/examples/production.yaml", "prod")
    ep = environment_plan.endpoint("chat-vllm")
    assert ep.data_capture == DataCapture(sampling_percent=10)
    assert ep.data_capture.capture == ("input", "output")
    assert ep.network == Network(create_vpc=True) and ep.network.in_vpc
    assert ep.encryption is None  # g5: no volume key (local NVMe)
    assert environment_plan.environment.encryption.bucket_key == "create"
    # The other endpoints use none of these blocks.
    assert all(
        e.data_capture is None and e.network is None for e in environment_plan.endpoints if e.name != "chat-vllm"
    )


def test_defaults_and_given_values(tmp_path):
    [ep] = load_config(config(tmp_path)).endpoints
    assert (ep.data_capture, ep.network, ep.encryption) == (None, None, None)  # all off by default
    extra = (
        f", data_capture: {{sampling_percent: 100, capture: [output], destination: 's3://my-captures/llm/chat/', "
        f"kms_key: '{KEY}', json_content_types: [application/json, application/jsonlines]}}, "
        "network: {subnet_ids: [subnet-0123456789abcdef0, subnet-0123456789abcdef1], "
        "security_group_ids: [sg-0123456789abcdef0], network_isolation: false}, "
        f"encryption: {{volume_key: '{KEY}'}}"
    )
    [ep] = load_config(config(tmp_path, extra=extra)).endpoints
    assert ep.data_capture.destination_parts("artifacts", "chat") == ("my-captures", "llm/chat/")
    assert DataCapture(sampling_percent=5).destination_parts("artifacts", "chat") == (
        "artifacts",
        data_capture_prefix("chat"),
    )
    assert ep.network.in_vpc and not ep.network.create_vpc
    assert network_isolation(ep, system_default=True) is False  # the config's choice wins
    assert ep.encryption.volume_key == KEY  # m5 has no local storage: allowed


def test_network_isolation_defaults_to_the_systems_choice_and_may_be_turned_off_for_staged_weights(tmp_path):
    [ep] = load_config(config(tmp_path, FT, ", network: {network_isolation: false}")).endpoints
    assert network_isolation(ep, system_default=False) is False
    [ep] = load_config(config(tmp_path, FT, "")).endpoints
    assert network_isolation(ep, system_default=False) is False
    assert network_isolation(ep, system_default=True) is True


def test_a_bucket_key_arn_is_allowed_with_adopted_data(tmp_path):
    envs = f"""\
        environments:
          prod: {{retain_data: true, adopt_kept_data: true, encryption: {{bucket_key: '{KEY}'}}}}
        """
    environment_plan = load_config(config(tmp_path, environments=envs), "prod")
    assert environment_plan.environment.encryption.bucket_key == KEY


BAD = [
    # (description, endpoint, extra keys, environments, fragments of the message)
    (
        "volume key on an instance with local NVMe",
        G5,
        f", encryption: {{volume_key: '{KEY}'}}",
        "",
        [
            "endpoint 'chat'",
            "encryption.volume_key",
            KEY,
            "ml.g5.2xlarge",
            "local NVMe",
            "SageMaker refuses a KmsKeyId",
        ],
    ),
    (
        "network isolation for a system that reads S3 itself",
        FT,
        ", network: {network_isolation: true}",
        "",
        [
            "endpoint 'ft'",
            "network.network_isolation",
            "value True",
            "djl-fastertransformer",
            "downloads the model weights from S3 itself",
            "set false",
        ],
    ),
    (
        "create_vpc with given subnets",
        M5,
        ", network: {create_vpc: true, subnet_ids: [subnet-0123456789abcdef0, subnet-0123456789abcdef1], "
        "security_group_ids: [sg-0123456789abcdef0]}",
        "",
        ["endpoint 'chat'", "network", "create_vpc: true creates the VPC", "subnet_ids and security_group_ids"],
    ),
    (
        "subnets without security groups",
        M5,
        ", network: {subnet_ids: [subnet-0123456789abcdef0, subnet-0123456789abcdef1]}",
        "",
        ["endpoint 'chat'", "network", "security_group_ids: required key is missing"],
    ),
    (
        "one subnet",
        M5,
        ", network: {subnet_ids: [subnet-0123456789abcdef0], security_group_ids: [sg-0123456789abcdef0]}",
        "",
        [
            "endpoint 'chat'",
            "network",
            "subnet_ids",
            "subnet-0123456789abcdef0",
            "at least 2 subnets in different Availability Zones",
            "allowed: 2-16",
        ],
    ),
    (
        "not a subnet id",
        M5,
        ", network: {subnet_ids: [vpc-0123456789abcdef0, subnet-0123456789abcdef1], security_group_ids: [sg-01234567]}",
        "",
        ["endpoint 'chat'", "network.subnet_ids.0", "'vpc-0123456789abcdef0'", "should match pattern"],
    ),
    (
        "six security groups",
        M5,
        ", network: {subnet_ids: [subnet-01234567, subnet-89abcdef], security_group_ids: "
        "[sg-00000001, sg-00000002, sg-00000003, sg-00000004, sg-00000005, sg-00000006]}",
        "",
        ["endpoint 'chat'", "network.security_group_ids", "at most 5 items"],
    ),
    (
        "sampling 0 percent",
        M5,
        ", data_capture: {sampling_percent: 0}",
        "",
        ["endpoint 'chat'", "data_capture.sampling_percent", "value 0", "greater than or equal to 1"],
    ),
    (
        "sampling 101 percent",
        M5,
        ", data_capture: {sampling_percent: 101}",
        "",
        ["data_capture.sampling_percent", "value 101", "less than or equal to 100"],
    ),
    (
        "data capture without a sampling percent",
        M5,
        ", data_capture: {capture: [input]}",
        "",
        ["endpoint 'chat'", "data_capture.sampling_percent", "required key is missing"],
    ),
    (
        "unknown capture mode",
        M5,
        ", data_capture: {sampling_percent: 5, capture: [both]}",
        "",
        ["data_capture.capture.0", "'both'", "'input' or 'output'"],
    ),
    (
        "a capture mode twice",
        M5,
        ", data_capture: {sampling_percent: 5, capture: [input, input]}",
        "",
        ["endpoint 'chat'", "data_capture", "capture: value ['input', 'input'] names a mode twice", "input, output"],
    ),
    (
        "destination without a prefix",
        M5,
        ", data_capture: {sampling_percent: 5, destination: 's3://my-captures'}",
        "",
        ["data_capture.destination", "'s3://my-captures'", "should match pattern"],
    ),
    (
        "capture key by alias",
        M5,
        ", data_capture: {sampling_percent: 5, kms_key: 'alias/captures'}",
        "",
        ["data_capture.kms_key", "'alias/captures'", "should match pattern"],
    ),
    (
        "misspelt key",
        M5,
        ", data_capture: {sampling_percentage: 5}",
        "",
        ["data_capture", "unknown key (did you mean 'sampling_percent'?)"],
    ),
    (
        "async output key on a real-time endpoint",
        M5,
        f", encryption: {{async_output_key: '{KEY}'}}",
        "",
        ["endpoint 'chat'", "encryption.async_output_key", "invoked in real time", "make the endpoint asynchronous"],
    ),
    (
        "created bucket key with adopted data",
        M5,
        "",
        "environments:\n  prod: {retain_data: true, adopt_kept_data: true, encryption: {bucket_key: create}}\n",
        [
            "environment 'prod'",
            "encryption.bucket_key: value 'create' is not allowed with adopt_kept_data: true",
            "give that key's ARN",
        ],
    ),
    (
        "bucket key neither create nor an ARN",
        M5,
        "",
        "environments:\n  prod: {encryption: {bucket_key: 'my-key'}}\n",
        ["environment 'prod'", "encryption.bucket_key", "'my-key'"],
    ),
]


@pytest.mark.parametrize(
    ("description", "endpoint", "extra", "environments", "fragments"), BAD, ids=[b[0] for b in BAD]
)
def test_bad_security_config_is_refused_with_the_endpoint_key_value_and_what_is_allowed(
    tmp_path, description, endpoint, extra, environments, fragments
):
    path = config(tmp_path, endpoint, extra, environments)
    with pytest.raises(ConfigError) as err:
        load_config(path, "prod" if environments else None)
    message = str(err.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, f"{description}: {fragment!r} not in:\n{message}"
