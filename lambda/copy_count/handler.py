"""Lambda entry point of the CloudFormation custom resource Custom::KeptCopyCount (handler ``copy_count/handler.handler``):
the copy count an inference component is deployed with.

On create and update it answers Data.CopyCount: the count the component's copy autoscaling has set
(DescribeInferenceComponent RuntimeConfig.DesiredCopyCount), kept within [Floor, Ceiling], or Initial while the
component does not exist yet. The stack passes it on as the component's RuntimeConfig.CopyCount, so a deploy does not
cut a scaled-out component back to its initial count (what RetainAllVariantProperties does for a variant's instances):
CloudFormation cannot read the count itself (RuntimeConfig.CopyCount is writeOnly, DesiredCopyCount readOnly in the
AWS::SageMaker::InferenceComponent schema) and no source says it leaves the count alone. Any other error fails the
deploy instead of guessing a count. Delete does nothing.

Properties: ComponentName, Floor, Ceiling, Initial (CloudFormation passes them as strings), and whatever else the
stack adds so that this resource changes whenever the component does. The answer is a PUT of JSON to the pre-signed
ResponseURL (CloudFormation User Guide, "Custom resource response objects": Status, Reason, PhysicalResourceId,
StackId, RequestId, LogicalResourceId, Data). IAM: sagemaker:DescribeInferenceComponent on the component.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

REASON_LIMIT = 1000  # characters of an error kept in the response (the whole answer must stay small)
# Every wait bounded well inside the function's 60 s (stacks/inference_components.py KEPT_COUNT_TIMEOUT_S): an answer
# must reach CloudFormation before Lambda ends the function, or the stack waits for the resource's ServiceTimeout
# (operations review R3). botocore's defaults are 60 s connect + 60 s read (botocore/endpoint.py DEFAULT_TIMEOUT)
# and 5 attempts in legacy mode (botocore/data/_retry.json).
# Worst case here: 3 x (3 + 6) s, standard mode's backoff before attempts 2 and 3 (at most 1 s and 2 s, each raised by
# up to 5 s by x-amz-retry-after: botocore/retries/standard.py ExponentialBackoff), and 2 response PUTs of 8 s (the
# answer, then FAILED when that raised): 27 + 13 + 16 = 56 s.
CONNECT_TIMEOUT_S, READ_TIMEOUT_S, MAX_ATTEMPTS = 3, 6, 3
RESPONSE_TIMEOUT_S, RESPONSE_TRIES = 8, 2
AWS_CALLS_PER_EVENT = 1  # DescribeInferenceComponent


def client_config():
    from botocore.config import Config

    return Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
    )


def absent(err: Exception) -> bool:
    """SageMaker's answer for a component that does not exist: a ValidationException saying it "Could not find" it
    (DescribeInferenceComponent models no error of its own: botocore's sagemaker service model)."""
    error = getattr(err, "response", {}).get("Error", {})
    return (
        error.get("Code") in ("ValidationException", "ResourceNotFound")
        and "could not find" in error.get("Message", "").lower()
    )


def kept_copy_count(client: Any, component: str, *, floor: int, ceiling: int, initial: int) -> tuple[int, str]:
    """(copy count to deploy, why): the component's desired count within [floor, ceiling], or `initial` when it does
    not exist. Errors other than "does not exist" propagate."""
    if not 1 <= floor <= ceiling or not floor <= initial <= ceiling:
        raise ValueError(
            f"copy count bounds must satisfy 1 <= Floor <= Initial <= Ceiling, got {floor}, {initial}, {ceiling}"
        )
    try:
        described = client.describe_inference_component(InferenceComponentName=component)
    except Exception as err:
        if absent(err):
            return initial, f"inference component {component} does not exist yet: {initial} copies"
        raise
    desired = described.get("RuntimeConfig", {}).get("DesiredCopyCount")
    if desired is None:
        raise ValueError(f"DescribeInferenceComponent of {component} returned no RuntimeConfig.DesiredCopyCount")
    kept = min(ceiling, max(floor, int(desired)))
    return kept, f"inference component {component} runs {desired} copies (desired): keeping {kept} ({floor}-{ceiling})"


def respond(event: dict[str, Any], status: str, reason: str, data: dict[str, Any]) -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:REASON_LIMIT],
            "PhysicalResourceId": event.get("PhysicalResourceId") or event["ResourceProperties"]["ComponentName"],
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": data,
        }
    ).encode()
    # The pre-signed URL carries no content type in its signature: an empty one, as CloudFormation's cfn-response does.
    request = urllib.request.Request(
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_S) as answer:
        answer.read()


def handler(event: dict[str, Any], context: Any = None, client: Any = None) -> dict[str, Any]:
    """Answer one custom-resource event; returns what was sent (for the log and the tests)."""
    status, reason, data = "SUCCESS", "nothing to do on delete", {}
    try:
        if event["RequestType"] in ("Create", "Update"):
            props = event["ResourceProperties"]
            if client is None:
                import boto3

                client = boto3.client("sagemaker", config=client_config())
            count, reason = kept_copy_count(
                client,
                props["ComponentName"],
                floor=int(props["Floor"]),
                ceiling=int(props["Ceiling"]),
                initial=int(props["Initial"]),
            )
            data = {"CopyCount": count}
    except Exception as err:  # any failure is reported to CloudFormation, which then rolls the deploy back
        status, reason, data = "FAILED", f"{type(err).__name__}: {err}", {}
    print(json.dumps({"request": event.get("RequestType"), "status": status, "reason": reason, "data": data}))
    try:
        respond(event, status, reason, data)
    except Exception as err:  # one more answer, FAILED: a raised error would leave the stack waiting (R3)
        status, reason, data = "FAILED", f"the response could not be sent: {type(err).__name__}: {err}", {}
        respond(event, status, reason, data)
    return {"Status": status, "Reason": reason, "Data": data}


__all__ = ["absent", "handler", "kept_copy_count", "respond"]
