"""The `streaming:` block of an endpoint: a front door that streams generated tokens to clients as the model
produces them (SageMaker InvokeEndpointWithResponseStream behind a Lambda function URL in RESPONSE_STREAM invoke
mode; stacks/streaming.py builds it, endpoint_runtime/stream.py is its code, docs/production.md "Streaming").

Only systems whose container streams a response can have it (STREAMING_SYSTEMS); the others are refused with the
reason (NOT_STREAMING). Imports none of ours (endpoint_config's rule), so the table names systems by their config
name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The systems whose container answers InvokeEndpointWithResponseStream token by token, with the framing it uses.
# LMI (djl-serving) streams when the request carries "stream": true, as JSON lines
# {"token": {"id", "text", "log_prob"}, ...} (deepjavalibrary/djl-serving branch 0.36.0-lmi27-dlc,
# serving/docs/lmi/user_guides/lmi_input_output_schema.md "When using streaming ... application/jsonlines"; the async
# mode both systems run builds those lines in engines/python/setup/djl_python/lmi_vllm/request_response_utils.py
# convert_completion_chunk_response_to_lmi_schema, and on branch 0.33.0-dlc, the lmi-trtllm image's,
# lmi_trtllm/request_response_utils.py does the same).
STREAMING_SYSTEMS: dict[str, str] = {
    "lmi-vllm": "LMI jsonlines",
    "lmi-trtllm": "LMI jsonlines",
}

# Why the others cannot stream, as the error says it.
NOT_STREAMING: dict[str, str] = {
    "hf-fastload": (
        "its container's Hugging Face inference toolkit answers with one whole reply (handler_service.handle returns "
        "[response]; aws/sagemaker-huggingface-inference-toolkit) and calls no streaming function"
    ),
    "deepspeed-byoc": "our own container server (systems/byoc_server) answers /invocations with one whole reply",
    "tensorrt-byoc": "our own container server (systems/byoc_server) answers /invocations with one whole reply",
    "djl-deepspeed": (
        "it runs a retired DJL image (0.27) with this project's non-streaming handler configuration; "
        "use lmi-vllm or lmi-trtllm"
    ),
    "djl-accelerate": (
        "it runs a retired DJL image with this project's non-streaming handler configuration; "
        "use lmi-vllm or lmi-trtllm"
    ),
    "djl-fastertransformer": (
        "it runs a retired DJL image (0.24) with this project's non-streaming handler configuration; "
        "use lmi-vllm or lmi-trtllm"
    ),
}


class StreamingSpec(BaseModel):
    """The streaming front door of one endpoint. Defaults: off; when on, callers sign their requests (IAM)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    # iam: the function URL's AuthType AWS_IAM, callers need lambda:InvokeFunctionUrl on it and sign with SigV4.
    # none: anyone who learns the URL can generate tokens on the GPUs you pay for; only with the acknowledgement.
    auth: Literal["iam", "none"] = "iam"
    acknowledge_unauthenticated: bool = False
    # Caps concurrent streams (and reserves that share of the account's Lambda concurrency). None: unreserved.
    reserved_concurrency: int | None = Field(None, ge=1, le=1000)
    # The function's timeout: how long one stream may last. Lambda allows at most 900 s.
    timeout_s: int = Field(300, ge=60, le=900)

    @model_validator(mode="after")
    def _auth_acknowledged(self) -> StreamingSpec:
        if self.auth == "none" and not self.acknowledge_unauthenticated:
            raise ValueError(
                "auth: value 'none' makes the function URL callable by anyone on the internet, generating on the "
                "endpoint at your cost; allowed: 'iam' (the default), or 'none' together with "
                "acknowledge_unauthenticated: true"
            )
        if self.acknowledge_unauthenticated and self.auth != "none":
            raise ValueError(
                f"acknowledge_unauthenticated: value true has no effect with auth {self.auth!r}; remove it "
                "(it belongs only beside auth: none)"
            )
        return self


def streaming_problems(endpoint: str, system: str, streaming: StreamingSpec) -> list[str]:
    """The rules that need the rest of the endpoint: streaming.enabled only on a system whose container streams.
    Inference components stream too: InvokeEndpointWithResponseStream takes InferenceComponentName ("If the endpoint
    hosts one or more inference components, this parameter specifies the name of inference component to invoke for a
    streaming response", botocore's sagemaker-runtime service model), which the front door sends."""
    if not streaming.enabled or system in STREAMING_SYSTEMS:
        return []
    reason = NOT_STREAMING.get(system, "it is not known to stream responses")
    return [
        f"endpoint {endpoint!r}: streaming.enabled: value true is not supported by system {system!r}: {reason}; "
        f"systems that stream: {', '.join(STREAMING_SYSTEMS)}"
    ]


__all__ = ["NOT_STREAMING", "STREAMING_SYSTEMS", "StreamingSpec", "streaming_problems"]
