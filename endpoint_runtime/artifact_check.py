"""The endpoint stack's guard against an artifact that is not (completely, or faithfully) published: a CloudFormation
custom resource the SageMaker Model depends on. `model_build publish` writes manifest.json last, so its presence marks a
complete artifact; an interrupted publish leaves none. The check then holds the objects to the manifest, not only its
hash string (operations review F9):
- the manifest names the plan's content hash, and its files list hashes to it (the rule of artifact/manifest.py
  content_hash: sha256 over the sorted "path\0sha256\n" lines), so the list cannot be edited under the same name;
- every listed file is an object under the prefix with the listed size and the sha256 publish recorded with it
  (x-amz-meta-sha256), and, where S3 computed a SHA-256 over the whole object (a single-request upload sent with
  ChecksumAlgorithm SHA256), that checksum equals the listed sha256 too;
- a tar-gz artifact (model.tar.gz beside the manifest instead of the files) is that one object, named for the content
  hash (x-amz-meta-content-hash) and, where S3 has one, with its recorded sha256 as S3's checksum.
S3 keeps no whole-object SHA-256 of a multipart upload (its checksum is one of the parts' checksums), and re-reading
tens of GB does not fit a Lambda's minutes: for those objects the check rests on what publish verified before it let
the upload complete (model_build/publish.py) and on the prefix being write-once (the bucket policy,
stacks/artifact_store.py). Any failure fails the resource, and CloudFormation stops before it creates or changes the
Model, whichever way the stack is deployed (`make deploy`, the pipeline, a plain `cdk deploy`).

Environment: none. Properties of the resource: Bucket, ManifestKey, ContentHash, and PublishCommand (optional: the
exact command that publishes this artifact, which the stack writes from the config path and environment it was
synthesized with, so a user who ran a plain `cdk deploy` first is told the one command to run). IAM: s3:GetObject on the artifact's
prefix (the manifest, HeadObject of each file) and s3:ListBucket limited to the prefix (without it S3 answers 403, not
404, for a missing key), and kms:Decrypt on the bucket's key when it has one. Protocol: the custom resource request
and response objects of the CloudFormation User Guide ("Custom resources", request/response reference); the answer
goes to the request's pre-signed ResponseURL with an HTTP PUT.
"""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from endpoint_runtime import clients

# CloudFormation shows Reason in the stack events; it stops reading responses above 4096 bytes (User Guide, custom
# resource response objects), so the reason is kept well under it.
MAX_REASON_CHARS = 1000
# Every wait bounded inside the function's timeout (stacks/artifact_guard.py): an answer must reach CloudFormation
# before Lambda ends the function, or the stack waits for the resource's ServiceTimeout (operations review R3).
# botocore's defaults are 60 s connect + 60 s read (botocore/endpoint.py DEFAULT_TIMEOUT) and 5 attempts in legacy
# mode (botocore/data/_retry.json).
# Worst case here: 3 x (3 + 6) s, standard mode's backoff before attempts 2 and 3 (at most 1 s and 2 s, each raised by
# up to 5 s by x-amz-retry-after: botocore/retries/standard.py ExponentialBackoff), and 2 response PUTs of 8 s (the
# answer, then FAILED when that raised): 27 + 13 = 40 s per call, + 16 s.
CONNECT_TIMEOUT_S, READ_TIMEOUT_S, MAX_ATTEMPTS = 3, 6, 3
RESPONSE_TIMEOUT_S, RESPONSE_TRIES = 8, 2
# GetObject of the manifest, HeadObject of model.tar.gz, then the files' HeadObject calls HEAD_WORKERS at a time: two
# rounds cover an artifact of up to 2 x HEAD_WORKERS files (a 32B model has 17 shards and a dozen configs). The
# function's timeout (stacks/artifact_guard.py, 180 s) holds this worst case: 4 x 40 s + 16 s = 176 s.
HEAD_WORKERS = 32
AWS_CALLS_PER_EVENT = 4
TARBALL_NAME = "model.tar.gz"  # model_build/publish.py TARBALL_NAME: a tar-gz artifact's one object


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


def publication_problem(
    s3: Any, bucket: str, manifest_key: str, content_hash: str, publish_command: str | None = None
) -> str | None:
    """Why the artifact under s3://bucket/manifest_key is not deployable, or None when its manifest is published
    and names `content_hash`. `publish_command`: the command the message names (default: the generic form)."""
    from botocore.exceptions import BotoCoreError, ClientError

    where = f"s3://{bucket}/{manifest_key}"
    command = publish_command or "python -m model_build publish --config CONFIG --env ENV --endpoint NAME"
    publish = f"publish it with `{command}`"
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
        manifest = json.loads(body)
        found = manifest.get("content_hash")
    except (ValueError, AttributeError):
        return f"{where} is not a manifest (not a JSON object); {publish}, then deploy again"
    if found != content_hash:
        return (
            f"{where} names content hash {str(found)[:12]}..., not {content_hash[:12]}...; {publish}, then deploy again"
        )
    files = _listed_files(manifest)
    if files is None:
        return f"{where} lists no valid files (each needs path, size and sha256); {publish}, then deploy again"
    if files_hash(files) != content_hash:
        return (
            f"{where}: its files list hashes to {files_hash(files)[:12]}..., not the content hash it names "
            f"({content_hash[:12]}...): the manifest was changed after the build; rebuild and {publish}"
        )
    prefix = manifest_key[: -len("manifest.json")] if manifest_key.endswith("manifest.json") else ""
    problems = object_problems(s3, bucket, prefix, files, content_hash)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        return f"s3://{bucket}/{prefix} does not hold what {where} lists: {shown}"
    return None


def _listed_files(manifest: Any) -> list[tuple[str, int, str]] | None:
    """(path, size, sha256) of every file the manifest lists, or None when the list is missing or malformed."""
    try:
        files = [(str(f["path"]), int(f["size"]), str(f["sha256"])) for f in manifest["files"]]
    except (KeyError, TypeError, ValueError):
        return None
    return files if files else None


def files_hash(files: list[tuple[str, int, str]]) -> str:
    """The content hash of a files list: artifact/manifest.py content_hash's rule (this package may not import
    artifact/, which the Lambda asset does not ship; tests/stacks/test_artifact_guard.py holds the two equal)."""
    digest = hashlib.sha256()
    for path, _size, sha in sorted(files):
        digest.update(f"{path}\0{sha}\n".encode())
    return digest.hexdigest()


def _s3_sha256(head: dict[str, Any]) -> str | None:
    """S3's own SHA-256 of the whole object (hex), or None where S3 holds none (multipart: composite checksum)."""
    value = head.get("ChecksumSHA256")
    multipart = "-" in str(head.get("ETag", "")) or "-" in str(value)
    if not value or multipart or head.get("ChecksumType", "FULL_OBJECT") != "FULL_OBJECT":
        return None
    return base64.b64decode(value).hex()


def _head(s3: Any, bucket: str, key: str) -> dict[str, Any] | str:
    """HeadObject of one key (with S3's checksum), or why it cannot be read."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")  # type: ignore[no-any-return]
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        return "missing" if code in ("NoSuchKey", "404", "NotFound") else f"cannot be read ({code or err})"
    except BotoCoreError as err:
        return f"cannot be read ({err})"


def object_problems(
    s3: Any, bucket: str, prefix: str, files: list[tuple[str, int, str]], content_hash: str
) -> list[str]:
    """What differs between the objects under `prefix` and the manifest's files (empty: every one is there as listed)."""
    tarball = _head(s3, bucket, prefix + TARBALL_NAME)
    if isinstance(tarball, dict):
        meta = tarball.get("Metadata", {})
        if meta.get("content-hash") != content_hash:
            return [f"{TARBALL_NAME} is for content hash {str(meta.get('content-hash'))[:12]}..."]
        checksum = _s3_sha256(tarball)
        if checksum is not None and checksum != meta.get("sha256"):
            return [
                f"{TARBALL_NAME}: S3's SHA-256 {checksum[:12]}... is not its recorded {str(meta.get('sha256'))[:12]}..."
            ]
        return []
    with ThreadPoolExecutor(max_workers=HEAD_WORKERS) as pool:
        heads = list(pool.map(lambda f: _head(s3, bucket, prefix + f[0]), files))
    problems = []
    for (path, size, sha), head in zip(files, heads):
        if isinstance(head, str):
            problems.append(f"{path} {head}")
        elif head.get("ContentLength") != size:
            problems.append(f"{path} is {head.get('ContentLength')} bytes, the manifest says {size}")
        elif head.get("Metadata", {}).get("sha256") != sha:
            problems.append(
                f"{path} was recorded with sha256 {str(head.get('Metadata', {}).get('sha256'))[:12]}..., the manifest says {sha[:12]}..."
            )
        elif (checksum := _s3_sha256(head)) is not None and checksum != sha:
            problems.append(
                f"{path}: S3's SHA-256 of the object is {checksum[:12]}..., the manifest says {sha[:12]}..."
            )
    return problems


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
            props.get("PublishCommand"),
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
