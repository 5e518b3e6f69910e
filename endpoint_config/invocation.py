"""The `invocation:` block of an endpoint: real-time (the default) or SageMaker asynchronous inference.

Each fact is cited where it is used; the sources in full: docs/design/async-inference.md.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from .base import Strict
from .s3_names import check_s3_location

if TYPE_CHECKING:
    from .schema import EndpointSpec

INVOCATION_MODES = ("real-time", "async")
# The `hosting.mode` value of an endpoint whose models run as inference components.
INFERENCE_COMPONENTS = "inference-components"
# botocore sagemaker MaxConcurrentInvocationsPerInstance: {"min": 1, "max": 1000}.
MAX_CONCURRENT_INVOCATIONS_BOUNDS = (1, 1000)
# sagemaker-runtime InvokeEndpointAsync: InvocationTimeoutSeconds 1-3600 (SageMaker's default 900 s),
# RequestTTLSeconds 60-21600 (SageMaker's default 6 hours).
INVOCATION_TIMEOUT_BOUNDS = (1, 3600)
REQUEST_TTL_BOUNDS = (60, 21600)
# botocore DestinationS3Uri: at most 512 characters. A location must name a key prefix inside a bucket (the execution
# role may write only there) and end without "/": SageMaker writes "<S3OutputPath>/<file>" (the outputLocation of the
# notification example in "Check prediction results", async-inference-check-predictions.html).
S3_PATH_PATTERN = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[^\s]*[^/\s]$"
S3Path = Annotated[str, Field(pattern=S3_PATH_PATTERN, max_length=512), AfterValidator(check_s3_location)]
# botocore SnsTopicArn's pattern, with the region required (a topic always has one).
SNS_TOPIC_PATTERN = r"^arn:aws[a-z\-]*:sns:[a-z0-9\-]+:[0-9]{12}:[a-zA-Z0-9_.-]{1,256}$"
# The smoke test's latency budget by invocation mode (schema.SmokeTest.budget_ms): a real-time answer comes within
# InvokeEndpoint's 60 s or not at all; an asynchronous answer is polled for in S3 by the smoke function, whose Lambda
# timeout is at most 900 s (Lambda Developer Guide, "Configure Lambda function timeout": "up to a maximum value of 900
# seconds"), 60 s of it kept for the other checks. invocation_problems enforces the real-time bound.
SMOKE_BUDGET_DEFAULT_MS = {"real-time": 30_000, "async": 300_000}
SMOKE_BUDGET_MAX_MS = {"real-time": 60_000, "async": 840_000}
# The fields only an async endpoint uses: set in real-time mode they would be silently ignored, so they are refused.
ASYNC_ONLY = (
    "max_concurrent_invocations_per_instance",
    "output_path",
    "failure_path",
    "success_topic",
    "error_topic",
    "invocation_timeout_s",
    "request_ttl_s",
    "result_retention_days",
)
# A request payload is read when SageMaker dequeues the request: at most RequestTTLSeconds (21600) after the submit,
# and runs for at most InvocationTimeoutSeconds (3600) (the sagemaker-runtime bounds above). One day, S3 lifecycle's
# smallest expiration ("The value must be a non-zero positive integer", S3 API reference, LifecycleExpiration Days,
# https://docs.aws.amazon.com/AmazonS3/latest/API/API_LifecycleExpiration.html), outlives both.
INPUT_RETENTION_DAYS = 1
RESULT_RETENTION_BOUNDS = (1, 3650)


class Invocation(Strict):
    """How clients call the endpoint.

    mode: real-time (default: InvokeEndpoint, answers within SageMaker's 60 s) or async (InvokeEndpointAsync: the
      request is queued, its payload read from S3, the answer written to S3; up to an hour per request).
    max_concurrent_invocations_per_instance: requests SageMaker sends one instance's container at once (1-1000;
      default None: SageMaker chooses).
    output_path / failure_path: where SageMaker writes answers and failures, s3://bucket/prefix without a trailing
      "/" (default None: s3://<the environment's artifact bucket>/async/<endpoint>/output and .../failures).
    notifications: true (default) announces each answer and failure on SNS: success_topic / error_topic when given
      (topic ARNs), else a topic the stack creates; false: no notifications (then no topic may be given).
    invocation_timeout_s: how long one request may run (1-3600; default None: SageMaker's 900 s), sent by the
      invoke function with every request.
    request_ttl_s: how long a request may wait in the queue (60-21600; default None: SageMaker's 6 hours), likewise.
    result_retention_days: expire answers and failures this many days after SageMaker writes them (1-3650; default
      None: kept until deleted). Only for the artifact bucket's folders (refused with output_path / failure_path).
      Request payloads in the input folder always expire after INPUT_RETENTION_DAYS (the artifact stack's lifecycle).
    """

    mode: Literal["real-time", "async"] = "real-time"
    max_concurrent_invocations_per_instance: int | None = Field(
        None, ge=MAX_CONCURRENT_INVOCATIONS_BOUNDS[0], le=MAX_CONCURRENT_INVOCATIONS_BOUNDS[1]
    )
    output_path: S3Path | None = None
    failure_path: S3Path | None = None
    notifications: bool = True
    success_topic: str | None = Field(None, pattern=SNS_TOPIC_PATTERN, max_length=2048)
    error_topic: str | None = Field(None, pattern=SNS_TOPIC_PATTERN, max_length=2048)
    invocation_timeout_s: int | None = Field(None, ge=INVOCATION_TIMEOUT_BOUNDS[0], le=INVOCATION_TIMEOUT_BOUNDS[1])
    request_ttl_s: int | None = Field(None, ge=REQUEST_TTL_BOUNDS[0], le=REQUEST_TTL_BOUNDS[1])
    result_retention_days: int | None = Field(None, ge=RESULT_RETENTION_BOUNDS[0], le=RESULT_RETENTION_BOUNDS[1])

    @model_validator(mode="after")
    def _consistent(self) -> Invocation:
        if self.mode == "real-time":
            given = [k for k in ASYNC_ONLY if getattr(self, k) is not None]
            given += [] if self.notifications else ["notifications"]  # not the default: meant for an async endpoint
            if given:
                one = len(given) == 1
                raise ValueError(
                    f"{', '.join(f'{k} (value {getattr(self, k)!r})' for k in given)}: only an asynchronous endpoint "
                    f"uses {'this key' if one else 'these keys'}; set mode: async or remove {'it' if one else 'them'}"
                )
        if not self.notifications:
            given = [k for k in ("success_topic", "error_topic") if getattr(self, k) is not None]
            if given:
                raise ValueError(
                    f"{', '.join(f'{k} (value {getattr(self, k)!r})' for k in given)}: a topic is given while "
                    "notifications is false; allowed: notifications: true with topics, or false without"
                )
        if self.result_retention_days is not None and (self.output_path or self.failure_path):
            own = ", ".join(k for k in ("output_path", "failure_path") if getattr(self, k))
            raise ValueError(
                f"result_retention_days (value {self.result_retention_days}) expires answers and failures in the artifact "
                f"bucket's folders, but {own} names a location of your own: set a lifecycle rule on that bucket "
                "instead, or remove result_retention_days"
            )
        if self.output_path is not None and self.output_path == self.failure_path:
            raise ValueError(
                f"failure_path: value {self.failure_path!r} is the output_path too; answers and failures "
                "need separate locations (fetching a result tells them apart by location)"
            )
        return self

    @property
    def is_async(self) -> bool:
        return self.mode == "async"


def split_s3_path(uri: str) -> tuple[str, str]:
    """s3://bucket/key/prefix -> (bucket, "key/prefix")."""
    match = re.fullmatch(r"s3://([^/]+)/(.+)", uri)
    if match is None:
        raise ValueError(f"not an s3://bucket/prefix location: {uri!r}")
    return match.group(1), match.group(2)


def async_prefixes(endpoint_name: str) -> dict[str, str]:
    """Key prefixes of one endpoint's asynchronous traffic in the artifact bucket (no trailing "/"): where the
    invoke function uploads request payloads, and the default answer and failure locations."""
    root = f"async/{endpoint_name}"
    return {"input": f"{root}/input", "output": f"{root}/output", "failure": f"{root}/failures"}


def async_location_uris(invocation: Invocation, *, endpoint_name: str, artifact_bucket: str) -> dict[str, str]:
    """The s3://bucket/prefix folders of one asynchronous endpoint, keyed input / output / failure: output_path and
    failure_path when given, else folders of the environment's artifact bucket under async/<endpoint>/ (the input
    folder always is: the invoke and smoke functions upload there). One source for the stack (stacks/async_inference.py)
    and the workstation's smoke test (model_build/smoke.py)."""
    default = async_prefixes(endpoint_name)
    given = {"output": invocation.output_path, "failure": invocation.failure_path}
    return {key: given.get(key) or f"s3://{artifact_bucket}/{prefix}" for key, prefix in default.items()}


def invocation_problems(ep: EndpointSpec) -> list[str]:
    """The rules of `invocation:` that involve the rest of the endpoint (one message per problem, each naming the
    endpoint, the key, the value and what is allowed)."""
    problems: list[str] = []
    invocation = ep.invocation

    def bad(key: str, message: str) -> None:
        problems.append(f"endpoint {ep.name!r}: {key}: {message}")

    scaling = ep.autoscaling
    hosting_mode = ep.hosting.mode
    if invocation.is_async:
        # An async endpoint "can only receive asynchronous invocations" (async-inference.html): a response stream
        # (InvokeEndpointWithResponseStream) is a real-time invocation.
        if ep.streaming.enabled:
            bad(
                "streaming",
                "an asynchronous endpoint (invocation.mode: async) only receives asynchronous "
                "invocations, so SageMaker cannot stream its answers; remove streaming or use mode: real-time",
            )
        # Inference components are documented for real-time inference only ("Deploy models for real-time
        # inference"; the scale-to-zero page's inference-component procedure); no AWS page found here describes an
        # asynchronous endpoint hosting them, so the combination is refused rather than deployed untested.
        if hosting_mode == INFERENCE_COMPONENTS:
            bad(
                "hosting.mode",
                f"value {hosting_mode!r} cannot be combined with invocation.mode: async: SageMaker "
                "documents inference components for real-time endpoints only; allowed with async: 'endpoint' (the default)",
            )
    else:
        budget, most = ep.smoke_test.latency_budget_ms, SMOKE_BUDGET_MAX_MS
        if budget is not None and budget > most["real-time"]:
            bad(
                "smoke_test.latency_budget_ms",
                f"value {budget} is above {most['real-time']}: a real-time "
                f"invocation answers within InvokeEndpoint's 60 s or not at all; allowed: 100-{most['real-time']} "
                f"(up to {most['async']} with invocation.mode: async)",
            )
    if (
        not invocation.is_async
        and scaling is not None
        and scaling.min_capacity == 0
        and hosting_mode != INFERENCE_COMPONENTS
    ):
        # Real-time endpoints scale to zero only when they host inference components (endpoint-auto-scaling-zero-
        # instances.html); an async endpoint queues requests while at zero (async-inference-autoscale.html).
        bad(
            "autoscaling",
            "min_capacity 0 is allowed only with invocation.mode: async (SageMaker queues its "
            "requests while no instance runs); a real-time endpoint needs at least 1 (allowed: 1-100)",
        )
    return problems


__all__ = [
    "ASYNC_ONLY",
    "INPUT_RETENTION_DAYS",
    "INVOCATION_MODES",
    "Invocation",
    "SMOKE_BUDGET_DEFAULT_MS",
    "SMOKE_BUDGET_MAX_MS",
    "async_location_uris",
    "async_prefixes",
    "invocation_problems",
    "split_s3_path",
]
