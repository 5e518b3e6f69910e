"""What the local runtime refuses where SageMaker refuses, each rule with its source, and how it treats every field of
sagemaker-runtime's invoke operations (FIELDS; tests/local_runtime/test_invoke_rules.py holds the table to botocore's
model, so a field botocore adds fails that test until it is placed here). docs/design/local-server.md has the table
of refusals.
"""

from __future__ import annotations

# botocore sagemaker-runtime 2017-05-13 service-2.json, shape BodyBlob: "max": 6291456 (InvokeEndpoint's and
# InvokeEndpointWithResponseStream's Body). botocore's validator checks only "min" (botocore/validate.py range_check),
# so the client sends anything and the service refuses: "An error occurred (413) when calling the InvokeEndpoint
# operation: HTTP content length exceeded 5246976 bytes." (aws/sagemaker-python-sdk#171, the 5 MiB limit of 2018;
# same wording, today's limit). A bare 413 without x-amzn-ErrorType: botocore names the error by the status.
MAX_BODY_BYTES = 6291456
BODY_TOO_LARGE_MESSAGE = f"HTTP content length exceeded {MAX_BODY_BYTES} bytes."

# InvokeEndpoint's documentation in the same model: "A customer's model containers must respond to requests within
# 60 seconds." Past it SageMaker answers 424 ModelError "Received server error (0) from primary with message "Your
# invocation timed out while waiting for a response from container primary. Review the latency metrics for each
# container in Amazon CloudWatch, resolve the issue, and try again."" (aws/amazon-sagemaker-examples#799,
# RamVegiraju/SageMaker-Deployment#3). The response stream's first part is held to the same limit; a stream that
# stops mid-way ends with ModelStreamError ModelInvocationTimeExceeded (the model's ModelStreamError documentation).
INVOKE_TIMEOUT_S = 60.0
TIMED_OUT_MESSAGE = (
    "Your invocation timed out while waiting for a response from container primary. Review the latency metrics for "
    "each container in Amazon CloudWatch, resolve the issue, and try again."
)

# The endpoint's one production variant (stacks/llm_endpoint.py VARIANT_NAME; InvokeEndpoint's output header
# x-Amzn-Invoked-Production-Variant names it). TargetVariant naming another is a ValidationError (wording ours:
# SageMaker's is unverified).
VARIANT_NAME = "AllTraffic"

# InferenceComponentName on an endpoint that hosts components is required: "Inference Component Name header is
# required for endpoints to which you plan to deploy inference components. Please include Inference Component Name
# header or consider using SageMaker models." (ValidationError; aws-samples/amazon-kendra-langchain-extensions#64).
COMPONENT_REQUIRED_MESSAGE = (
    "Inference Component Name header is required for endpoints to which you plan to deploy inference components. "
    "Please include Inference Component Name header or consider using SageMaker models."
)


def component_not_found(component: str) -> str:
    """An InferenceComponentName the endpoint does not host (the wording the OpenAI route's component path used;
    SageMaker's own is unverified)."""
    return f"Inference component {component} of account 123456789012 not found."


def variant_not_found(variant: str, endpoint: str) -> str:
    return f"Variant {variant} does not exist on endpoint {endpoint}; it serves {VARIANT_NAME} only."


# How the local runtime treats each member of the three operations' input shapes (botocore's sagemaker-runtime
# model). "checked": refused as SageMaker refuses; "passed": forwarded to the container as SageMaker forwards it;
# "ignored": taken and not acted on (no effect a single local container could show); "not served": the local runtime
# has no such operation (InvokeEndpointAsync answers the emulator's queue, local_emulator/).
FIELDS: dict[str, dict[str, str]] = {
    "InvokeEndpoint": {
        "EndpointName": "checked: another endpoint's name is ValidationError 'Endpoint ... not found'",
        "Body": f"checked: over {MAX_BODY_BYTES} bytes is 413; passed to the container's POST /invocations",
        "ContentType": "passed: the container's Content-Type",
        "Accept": "passed: the container's Accept",
        "CustomAttributes": "passed: X-Amzn-SageMaker-Custom-Attributes to the container, and the container's back",
        "TargetModel": "checked: refused, the endpoint is not a multi-model endpoint (ValidationError)",
        "TargetVariant": f"checked: only {VARIANT_NAME}, else ValidationError",
        "TargetContainerHostname": "checked: refused, the endpoint is not a multi-container endpoint (ValidationError)",
        "InferenceId": "ignored: SageMaker uses it for data capture, which the local runtime does not do",
        "EnableExplanations": "checked: refused, the endpoint has no Clarify explainer (ValidationError)",
        "InferenceComponentName": "checked: required on a components endpoint, refused unknown; an adapter "
        "component's name goes to the container as X-Amzn-SageMaker-Adapter-Identifier",
        "SessionId": "checked: refused, the endpoint has no stateful sessions (ValidationError)",
        "PrefixAwareId": "ignored: a routing hint across instances; one local instance",
    },
    "InvokeEndpointWithResponseStream": {
        "EndpointName": "checked: as InvokeEndpoint's",
        "Body": f"checked: over {MAX_BODY_BYTES} bytes is 413; passed to the container's POST /invocations",
        "ContentType": "passed: the container's Content-Type",
        "Accept": "passed: X-Amzn-SageMaker-Accept goes to the container as Accept",
        "CustomAttributes": "passed: as InvokeEndpoint's",
        "TargetVariant": f"checked: only {VARIANT_NAME}, else ValidationError",
        "TargetContainerHostname": "checked: refused, the endpoint is not a multi-container endpoint (ValidationError)",
        "InferenceId": "ignored: as InvokeEndpoint's",
        "InferenceComponentName": "checked: as InvokeEndpoint's, and routed the same way",
        "SessionId": "checked: refused, the endpoint has no stateful sessions (ValidationError)",
        "PrefixAwareId": "ignored: as InvokeEndpoint's",
    },
    "InvokeEndpointAsync": {
        name: "not served: the local runtime has no async door (local_emulator answers async endpoints)"
        for name in (
            "EndpointName",
            "ContentType",
            "Accept",
            "CustomAttributes",
            "InferenceId",
            "InputLocation",
            "S3OutputPathExtension",
            "Filename",
            "RequestTTLSeconds",
            "InvocationTimeoutSeconds",
            "Body",
        )
    },
}

# The request headers the local runtime refuses outright, each with the reason (the FIELDS entries that say
# "refused"): features of endpoints this project never deploys. Wording ours; SageMaker's is unverified.
# TargetModel's is SageMaker's own: "Endpoint <name> is not a multi-model endpoint and does not support target model
# header." (aws/amazon-sagemaker-examples#1026).
REFUSED_HEADERS = {
    "x-amzn-sagemaker-target-model": "is not a multi-model endpoint and does not support target model header.",
    "x-amzn-sagemaker-target-container-hostname": "is not a multi-container endpoint and does not support "
    "TargetContainerHostname.",
    "x-amzn-sagemaker-enable-explanations": "has no Clarify explainer and does not support EnableExplanations.",
    "x-amzn-sagemaker-session-id": "has no stateful sessions and does not support SessionId.",
}
