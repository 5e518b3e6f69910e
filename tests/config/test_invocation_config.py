"""The `invocation:` block (endpoint_config/invocation.py): valid async configs load with their defaults; each mistake
is refused at load with a message naming the file, the endpoint, the key, the value and what is allowed."""

from __future__ import annotations

import textwrap

import pytest
from helpers import ROOT

from deployment import load_config
from endpoint_config import ConfigError
from endpoint_config.invocation import Invocation, async_prefixes, invocation_problems

ENDPOINT = "endpoints:\n  - {{name: summ, system: hf-fastload, model: EleutherAI/gpt-j-6B, instance_type: ml.g5.2xlarge{extra}}}\n"


def config(tmp_path, extra: str = "", text: str | None = None):
    path = tmp_path / "endpoints.yaml"
    path.write_text(textwrap.dedent(text) if text is not None else ENDPOINT.format(extra=extra))
    return path


def test_the_production_example_is_async_and_scales_to_zero():
    [ep] = [
        e
        for e in load_config(ROOT / "config/examples/production.yaml", "prod").endpoints
        if e.name == "summarize-async"
    ]
    assert ep.invocation.is_async
    assert ep.invocation.max_concurrent_invocations_per_instance == 4
    assert ep.autoscaling.min_capacity == 0
    assert ep.invocation.notifications and ep.invocation.success_topic is None  # the stack creates the topics


def test_defaults_are_real_time_and_async_defaults_are_sagemakers(tmp_path):
    [ep] = load_config(config(tmp_path)).endpoints
    assert ep.invocation == Invocation() and ep.invocation.mode == "real-time"
    [ep] = load_config(config(tmp_path, ", invocation: {mode: async}")).endpoints
    assert ep.invocation.is_async
    assert ep.invocation.max_concurrent_invocations_per_instance is None  # SageMaker chooses
    assert (ep.invocation.output_path, ep.invocation.failure_path) == (None, None)  # the artifact bucket's folders
    assert async_prefixes("prod-summ") == {
        "input": "async/prod-summ/input",
        "output": "async/prod-summ/output",
        "failure": "async/prod-summ/failures",
    }


def test_given_locations_and_topics_load(tmp_path):
    text = (
        ", invocation: {mode: async, output_path: 's3://my-results/llm/out', failure_path: 's3://my-results/llm/err',"
        " success_topic: 'arn:aws:sns:us-east-1:111122223333:done', error_topic: 'arn:aws:sns:us-east-1:111122223333:failed',"
        " invocation_timeout_s: 3600, request_ttl_s: 21600, max_concurrent_invocations_per_instance: 1000}"
    )
    [ep] = load_config(config(tmp_path, text)).endpoints
    assert ep.invocation.output_path == "s3://my-results/llm/out"
    assert ep.invocation.error_topic.endswith(":failed")


BAD = [
    # (description, extra keys of the endpoint, fragments of the message)
    (
        "async-only key on a real-time endpoint",
        ", invocation: {max_concurrent_invocations_per_instance: 4}",
        [
            "endpoint 'summ'",
            "invocation",
            "max_concurrent_invocations_per_instance (value 4)",
            "only an asynchronous endpoint uses this key",
            "set mode: async or remove it",
        ],
    ),
    (
        "notifications on a real-time endpoint",
        ", invocation: {notifications: false}",
        ["endpoint 'summ'", "invocation", "notifications (value False)", "only an asynchronous endpoint"],
    ),
    (
        "max concurrent invocations 0",
        ", invocation: {mode: async, max_concurrent_invocations_per_instance: 0}",
        ["invocation.max_concurrent_invocations_per_instance", "value 0", "greater than or equal to 1"],
    ),
    (
        "max concurrent invocations 1001",
        ", invocation: {mode: async, max_concurrent_invocations_per_instance: 1001}",
        ["invocation.max_concurrent_invocations_per_instance", "value 1001", "less than or equal to 1000"],
    ),
    ("unknown mode", ", invocation: {mode: batch}", ["invocation.mode", "'batch'", "'real-time' or 'async'"]),
    (
        "min capacity 0 on a real-time endpoint",
        ", autoscaling: {min_capacity: 0, max_capacity: 2, target_value: 4}",
        [
            "endpoint 'summ'",
            "autoscaling",
            "min_capacity 0 is allowed only with invocation.mode: async",
            "allowed: 1-100",
        ],
    ),
    (
        "async with streaming",
        ", invocation: {mode: async}, streaming: {enabled: true}",
        ["endpoint 'summ'", "streaming", "only receives asynchronous invocations", "use mode: real-time"],
    ),
    (
        "output path with a trailing slash",
        ", invocation: {mode: async, output_path: 's3://my-results/out/'}",
        ["invocation.output_path", "'s3://my-results/out/'", "should match pattern"],
    ),
    (
        "output path at a bucket's root",
        ", invocation: {mode: async, failure_path: 's3://my-results'}",
        ["invocation.failure_path", "'s3://my-results'", "should match pattern"],
    ),
    (
        "topic without notifications",
        ", invocation: {mode: async, notifications: false, error_topic: 'arn:aws:sns:us-east-1:111122223333:failed'}",
        [
            "endpoint 'summ'",
            "invocation",
            "error_topic (value 'arn:aws:sns:us-east-1:111122223333:failed'): a topic is "
            "given while notifications is false",
            "allowed: notifications: true with topics, or false without",
        ],
    ),
    (
        "not a topic ARN",
        ", invocation: {mode: async, success_topic: 'arn:aws:sqs:us-east-1:111122223333:q'}",
        ["invocation.success_topic", "arn:aws:sqs", "should match pattern"],
    ),
    (
        "one location for answers and failures",
        ", invocation: {mode: async, output_path: 's3://b-1/x', failure_path: 's3://b-1/x'}",
        ["failure_path: value 's3://b-1/x' is the output_path too"],
    ),
    (
        "invocation timeout above an hour",
        ", invocation: {mode: async, invocation_timeout_s: 3601}",
        ["invocation.invocation_timeout_s", "value 3601", "less than or equal to 3600"],
    ),
    (
        "queue TTL below a minute",
        ", invocation: {mode: async, request_ttl_s: 59}",
        ["invocation.request_ttl_s", "value 59", "greater than or equal to 60"],
    ),
    (
        "result retention on a real-time endpoint",
        ", invocation: {result_retention_days: 7}",
        ["endpoint 'summ'", "result_retention_days (value 7)", "only an asynchronous endpoint uses this key"],
    ),
    (
        "result retention beside a location of your own",
        ", invocation: {mode: async, output_path: 's3://my-results/out', result_retention_days: 7}",
        [
            "result_retention_days (value 7) expires answers and failures in the artifact bucket's folders, but output_path "
            "names a location of your own: set a lifecycle rule on that bucket instead"
        ],
    ),
    (
        "result retention of 0 days",
        ", invocation: {mode: async, result_retention_days: 0}",
        ["invocation.result_retention_days", "value 0", "greater than or equal to 1"],
    ),
    (
        "real-time smoke budget above InvokeEndpoint's 60 s",
        ", smoke_test: {latency_budget_ms: 60001}",
        [
            "endpoint 'summ'",
            "smoke_test.latency_budget_ms",
            "value 60001 is above 60000",
            "allowed: 100-60000 (up to 840000 with invocation.mode: async)",
        ],
    ),
    (
        "async smoke budget above what a Lambda function can wait",
        ", invocation: {mode: async}, smoke_test: {latency_budget_ms: 840001}",
        ["smoke_test.latency_budget_ms", "value 840001", "less than or equal to 840000"],
    ),
]


@pytest.mark.parametrize("description,extra,fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_invocation_config_message(tmp_path, description, extra, fragments):
    path = config(tmp_path, extra)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message, f"{description}: {fragment!r} not in:\n{message}"
    assert str(path) in message  # names the file


def test_min_capacity_zero_with_async_loads(tmp_path):
    extra = ", invocation: {mode: async}, autoscaling: {min_capacity: 0, max_capacity: 2, target_value: 5}"
    [ep] = load_config(config(tmp_path, extra)).endpoints
    assert ep.autoscaling.min_capacity == 0


def test_async_refuses_inference_components(tmp_path):
    """Inference components are documented for real-time endpoints only, so the combination is refused."""
    path = config(
        tmp_path,
        text=(
            "endpoints:\n  - {name: summ, system: lmi-vllm, model: EleutherAI/gpt-j-6B, instance_type: ml.g5.12xlarge,"
            " invocation: {mode: async}, hosting: {mode: inference-components}}\n"
        ),
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (
        f"{path}: invalid config:\n  - endpoint 'summ': hosting.mode: value 'inference-components' cannot be combined "
        "with invocation.mode: async: SageMaker documents inference components for real-time endpoints only; allowed "
        "with async: 'endpoint' (the default)"
    )


def _endpoint(**fields):
    """An endpoint as invocation_problems reads it (a real EndpointSpec; no other rule runs)."""
    from endpoint_config import EndpointSpec

    base = dict(name="summ", system="lmi-vllm", model="m", instance_type="ml.g5.12xlarge", invocation={"mode": "async"})
    return EndpointSpec.model_validate({**base, **fields})


def test_invocation_rules_against_the_other_blocks():
    """Async excludes inference components; a real-time endpoint hosting inference components may scale its variant
    to zero (that block's own rules apply), a plain real-time one may not."""
    components = {"mode": "inference-components"}
    assert invocation_problems(_endpoint(hosting=components)) == [
        "endpoint 'summ': hosting.mode: value 'inference-components' cannot be combined with invocation.mode: async: "
        "SageMaker documents inference components for real-time endpoints only; allowed with async: 'endpoint' (the default)"
    ]
    assert invocation_problems(_endpoint()) == []
    zero = {"min_capacity": 0, "max_capacity": 2, "target_value": 4}
    assert invocation_problems(_endpoint(invocation={}, hosting=components, autoscaling=zero)) == []
    assert len(invocation_problems(_endpoint(invocation={}, autoscaling=zero))) == 1


def test_smoke_budget_defaults_by_invocation_mode(tmp_path):
    """The smoke test waits up to 30 s for a real-time answer, 300 s for an asynchronous one (queue and S3 included);
    an asynchronous endpoint may set up to 840 s, the most its smoke function's 900 s Lambda timeout leaves."""
    [ep] = load_config(config(tmp_path)).endpoints
    assert ep.smoke_test.budget_ms(ep.invocation.mode) == 30_000
    [ep] = load_config(config(tmp_path, ", invocation: {mode: async}")).endpoints
    assert ep.smoke_test.budget_ms(ep.invocation.mode) == 300_000
    [ep] = load_config(
        config(tmp_path, ", invocation: {mode: async}, smoke_test: {latency_budget_ms: 840000}")
    ).endpoints
    assert ep.smoke_test.budget_ms(ep.invocation.mode) == 840_000
