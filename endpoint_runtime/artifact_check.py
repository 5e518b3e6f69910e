"""The endpoint stack's guard against an artifact that is not (completely) published: a CloudFormation custom
resource the SageMaker Model depends on. `model_build publish` writes manifest.json last, so its presence marks a
complete artifact; an interrupted publish leaves none. With no manifest, or one for another content hash, the
resource fails and CloudFormation stops before it creates or changes the Model, whichever way the stack is
deployed (`make deploy`, the pipeline, a plain `cdk deploy`).

Environment: none. Properties of the resource: Bucket, ManifestKey, ContentHash. IAM: s3:GetObject on the manifest
key (and kms:Decrypt on the bucket's key when it has one). Protocol: the custom resource request and response
objects of the CloudFormation User Guide ("Custom resources", request/response reference); the answer goes to the
request's pre-signed ResponseURL with an HTTP PUT.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from endpoint_runtime import clients

# CloudFormation shows Reason in the stack events; it stops reading responses above 4096 bytes (User Guide, custom
# resource response objects), so the reason is kept well under it.
MAX_REASON_CHARS = 1000
# Every wait bounded well inside the function's 60 s (stacks/artifact_guard.py): an answer must reach CloudFormation
# before Lambda ends the function, or the stack waits for the resource's ServiceTimeout (operations review R3).
# botocore's defaults are 60 s connect + 60 s read (botocore/endpoint.py DEFAULT_TIMEOUT) and 5 attempts in legacy
# mode (botocore/data/_retry.json).
# Worst case here: 3 x (3 + 6) s, standard mode's backoff before attempts 2 and 3 (at most 1 s and 2 s, each raised by
# up to 5 s by x-amz-retry-after: botocore/retries/standard.py ExponentialBackoff), and 2 response PUTs of 8 s (the
# answer, then FAILED when that raised): 27 + 13 + 16 = 56 s.
CONNECT_TIMEOUT_S, READ_TIMEOUT_S, MAX_ATTEMPTS = 3, 6, 3
RESPONSE_TIMEOUT_S, RESPONSE_TRIES = 8, 2
AWS_CALLS_PER_EVENT = 1  # GetObject of the manifest


def client_config():
    from botocore.config import Config

    return Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
    )


def _make_s3_client() -> Any:
    import boto3

    return boto3.client("s3", config=client_config())


def publication_problem(s3: Any, bucket: str, manifest_key: str, content_hash: str) -> str | None:
    """Why the artifact under s3://bucket/manifest_key is not deployable, or None when its manifest is published
    and names `content_hash`."""
    from botocore.exceptions import BotoCoreError, ClientError

    where = f"s3://{bucket}/{manifest_key}"
    publish = "publish it with `python -m model_build publish --config CONFIG --env ENV --endpoint NAME`"
    try:
        body = s3.get_object(Bucket=bucket, Key=manifest_key)["Body"].read()
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchKey", "404", "NotFound"):
            return (
                f"the artifact {content_hash[:12]}... is not published: {where} does not exist (publish writes it "
                f"last, so an interrupted or missing publish leaves none); {publish}, then deploy again"
            )
        return f"cannot read {where} ({code or err}); the deploy stops until the artifact's manifest can be read"
    except BotoCoreError as err:
        return f"cannot read {where} ({err}); the deploy stops until the artifact's manifest can be read"
    try:
        found = json.loads(body).get("content_hash")
    except (ValueError, AttributeError):
        return f"{where} is not a manifest (not a JSON object); {publish}, then deploy again"
    if found != content_hash:
        return (
            f"{where} names content hash {str(found)[:12]}..., not {content_hash[:12]}...; {publish}, then deploy again"
        )
    return None


def respond(event: dict[str, Any], status: str, reason: str = "") -> None:
    """PUT the custom resource response to the request's pre-signed URL."""
    physical = (
        event.get("PhysicalResourceId")
        or f"{event['ResourceProperties'].get('Bucket')}/{event['ResourceProperties'].get('ManifestKey')}"
    )
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:MAX_REASON_CHARS] or status,
            "PhysicalResourceId": physical,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
        }
    ).encode("utf-8")
    # The pre-signed URL is signed without a content type: send none (an empty header, as the User Guide's example).
    request = urllib.request.Request(
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with urllib.request.urlopen(
        request, timeout=RESPONSE_TIMEOUT_S
    ) as answer:  # the pre-signed URL CloudFormation gave
        answer.read()


def handler(event: dict[str, Any], context: Any = None) -> None:
    """Create and Update check the manifest; Delete always succeeds (nothing was made)."""
    try:
        if event.get("RequestType") == "Delete":
            respond(event, "SUCCESS")
            return
        props = event["ResourceProperties"]
        problem = publication_problem(
            clients.cached("artifact_check:s3", _make_s3_client),
            props["Bucket"],
            props["ManifestKey"],
            props["ContentHash"],
        )
        print(
            json.dumps(
                {
                    "message": "artifact_check",
                    "manifest": f"s3://{props['Bucket']}/{props['ManifestKey']}",
                    "problem": problem,
                }
            )
        )
        respond(event, "FAILED" if problem else "SUCCESS", problem or "")
    except Exception as err:  # answer anyway: CloudFormation would otherwise wait an hour for the response
        respond(event, "FAILED", f"the artifact check failed: {type(err).__name__}: {err}")
