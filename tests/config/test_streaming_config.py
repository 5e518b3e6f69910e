"""The `streaming:` block: defaults, bounds, the unauthenticated-URL acknowledgement, and the systems and hosting
modes that cannot stream, each refused with a message naming endpoint, key, value and what is allowed."""

from __future__ import annotations

import textwrap

import botocore.session
import pytest
from pydantic import ValidationError

from deployment import load_config
from endpoint_config import ConfigError
from endpoint_config.streaming import StreamingSpec

LMI = """\
endpoints:
  - name: chat
    system: {system}
    model: EleutherAI/gpt-j-6B
    instance_type: ml.g5.12xlarge
    streaming: {streaming}
"""


def load(tmp_path, system: str = "lmi-vllm", streaming: str = "{enabled: true}"):
    path = tmp_path / "endpoints.yaml"
    path.write_text(textwrap.dedent(LMI.format(system=system, streaming=streaming)))
    return load_config(path)


def test_defaults_off_iam_300_s():
    spec = StreamingSpec()
    assert (spec.enabled, spec.auth, spec.reserved_concurrency, spec.timeout_s) == (False, "iam", None, 300)


def test_an_lmi_endpoint_streams(tmp_path):
    [ep] = load(tmp_path, streaming="{enabled: true, reserved_concurrency: 20, timeout_s: 600}").endpoints
    assert ep.streaming.enabled and ep.streaming.reserved_concurrency == 20 and ep.streaming.timeout_s == 600


@pytest.mark.parametrize("system", ["hf-fastload", "tensorrt-byoc"])
def test_a_system_whose_container_does_not_stream_is_refused(tmp_path, system):
    instance = "ml.g5.2xlarge"
    path = tmp_path / "endpoints.yaml"
    path.write_text(LMI.format(system=system, streaming="{enabled: true}").replace("ml.g5.12xlarge", instance))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert f"endpoint 'chat': streaming.enabled: value true is not supported by system '{system}'" in str(
        err.value
    ) and "systems that stream: lmi-vllm, lmi-trtllm" in str(err.value)
    # Off, the same endpoint loads: the rule is about streaming only.
    path.write_text(LMI.format(system=system, streaming="{enabled: false}").replace("ml.g5.12xlarge", instance))
    assert load_config(path).endpoints


def test_auth_none_needs_the_acknowledgement(tmp_path):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, streaming="{enabled: true, auth: none}")
    assert "endpoint 'chat': streaming: auth: value 'none' makes the function URL callable by anyone" in str(err.value)
    assert "acknowledge_unauthenticated: true" in str(err.value)
    [ep] = load(
        tmp_path, streaming="{enabled: true, auth: none, acknowledge_unauthenticated: true, reserved_concurrency: 5}"
    ).endpoints
    assert ep.streaming.auth == "none" and ep.streaming.reserved_concurrency == 5


def test_auth_none_needs_a_cap_on_concurrent_streams(tmp_path):
    """A public URL (Principal *) without reserved concurrency could take the account's whole unreserved Lambda
    concurrency and keep the GPUs busy: refused, naming the key, the value and what is allowed."""
    with pytest.raises(ConfigError) as err:
        load(tmp_path, streaming="{enabled: true, auth: none, acknowledge_unauthenticated: true}")
    message = str(err.value)
    assert (
        "endpoint 'chat': streaming: reserved_concurrency: value None with auth 'none' leaves a public URL" in message
    )
    assert "allowed: 1-1000 (the most streams at once), or auth: iam" in message


def test_the_acknowledgement_without_auth_none_is_refused():
    with pytest.raises(ValidationError, match="acknowledge_unauthenticated: value true has no effect with auth 'iam'"):
        StreamingSpec(enabled=True, acknowledge_unauthenticated=True)


@pytest.mark.parametrize(
    ("streaming", "needle"),
    [
        (
            "{enabled: true, timeout_s: 901}",
            "streaming.timeout_s: value 901: Input should be less than or equal to 900",
        ),
        (
            "{enabled: true, reserved_concurrency: 0}",
            "streaming.reserved_concurrency: value 0: Input should be greater than or equal to 1",
        ),
        ("{enabled: true, auth: sigv4}", "streaming.auth: value 'sigv4': Input should be 'iam' or 'none'"),
        ("{enabled: true, stream_mode: sse}", "streaming.stream_mode: unknown key"),
    ],
)
def test_bounds_and_unknown_keys(tmp_path, streaming, needle):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, streaming=streaming)
    assert f"endpoint 'chat': {needle}" in str(err.value), str(err.value)


def test_inference_components_stream(tmp_path):
    """InvokeEndpointWithResponseStream takes InferenceComponentName (botocore's service model), so a streaming system
    on inference components loads."""
    assert (
        "InferenceComponentName"
        in botocore.session.get_session()
        .get_service_model("sagemaker-runtime")
        .operation_model("InvokeEndpointWithResponseStream")
        .input_shape.members
    )
    components = "\n    hosting: {mode: inference-components}"
    path = tmp_path / "endpoints.yaml"
    path.write_text(LMI.format(system="lmi-vllm", streaming="{enabled: true}") + components)
    assert load_config(path).plan("chat").component_name == "chat-ic"
