"""The published-artifact check (stacks/artifact_guard.py, endpoint_runtime/artifact_check.py): the template makes
the Model wait for it and gives its function exactly the read it makes; the handler, against the emulator's S3 and
answering a real HTTP server in CloudFormation's place, passes a published artifact and fails every other case with
the reason CloudFormation shows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest
from helpers import ROOT, lambda_entry, serve_in_thread

from deployment import load_config

CONFIG, ENV = "config/examples/production.yaml", "prod"
HASH = "ab" * 32


@pytest.fixture(scope="module")
def production(synth):
    return synth(CONFIG, ENV)


def _check_and_model(template: dict) -> tuple[str, dict, dict]:
    resources = template["Resources"]
    [(check_id, check)] = [
        (k, r)
        for k, r in resources.items()
        if r["Type"] == "AWS::CloudFormation::CustomResource" and "ManifestKey" in r["Properties"]
    ]
    [model] = [r for r in resources.values() if r["Type"] == "AWS::SageMaker::Model"]
    return check_id, check, model


def test_every_model_waits_for_its_artifacts_manifest(production):
    environment_plan = load_config(ROOT / CONFIG, ENV)
    for plan in environment_plan.plans:
        template = production.templates[plan.stack_name]
        check_id, check, model = _check_and_model(template)
        assert check_id in model["DependsOn"], plan.name
        props = check["Properties"]
        assert props["ManifestKey"] == plan.manifest_key and props["ContentHash"] == plan.artifact.content_hash
        assert "Fn::Join" in json.dumps(props["Bucket"])  # the bucket of the deploying account and region
        # the one command a plain `cdk deploy` user runs when the artifact is not published (issue 33 item 2)
        assert props["PublishCommand"] == (
            f"python -m model_build publish --config {CONFIG} --env {ENV} --endpoint {plan.name}"
        )


def test_the_check_may_read_its_artifact_and_nothing_else(production):
    """s3:GetObject on the artifact's prefix (the manifest and each listed object's HeadObject), s3:ListBucket of that
    prefix only, KMS through S3 for the bucket key production.yaml creates, and its own logs."""
    environment_plan = load_config(ROOT / CONFIG, ENV)
    plan = environment_plan.plans[0]
    resources = production.templates[plan.stack_name]["Resources"]
    _, check, _ = _check_and_model(production.templates[plan.stack_name])
    [function_id] = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::Lambda::Function" and check["Properties"]["ServiceToken"] == {"Fn::GetAtt": [k, "Arn"]}
    ]
    role_id = resources[function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    actions: dict[str, list] = {}
    for policy in [r for r in resources.values() if r["Type"] == "AWS::IAM::Policy"]:
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                for action in [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]:
                    actions.setdefault(action, []).append(statement["Resource"])
    # it reads: the bucket key's Decrypt, never GenerateDataKey (that is for writers)
    assert sorted(actions) == [
        "kms:Decrypt",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "s3:GetObject",
        "s3:ListBucket",
    ]
    [objects_arn] = actions["s3:GetObject"]
    prefix = plan.manifest_key.rsplit("/", 1)[0]
    assert json.dumps(objects_arn).endswith(f'/{prefix}/*"]]}}')


def test_the_emulator_stack_has_the_check_too(synth):
    """The local emulator runs Lambda-backed custom resources (local_emulator/server.py): config/local.yaml's endpoint
    stack has the artifact check, and its Model waits for it, as on AWS."""
    local = synth("config/local.yaml", "local")
    resources = local.templates["llm-endpoints-local-tiny-gpt2"]["Resources"]
    checks = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::CloudFormation::CustomResource" and "ManifestKey" in r["Properties"]
    ]
    [model] = [r for r in resources.values() if r["Type"] == "AWS::SageMaker::Model"]
    assert checks and set(checks) <= set(model["DependsOn"])


class _CloudFormation:
    """A real HTTP server in CloudFormation's place: records the PUT response the handler sends."""

    def __init__(self) -> None:
        self.responses: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.responses.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        serve_in_thread(self.server)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/response?X-Amz-Signature=x"


@pytest.fixture
def cloudformation() -> Iterator[_CloudFormation]:
    cf = _CloudFormation()
    yield cf
    cf.server.shutdown()


def _event(cf: _CloudFormation, request_type: str, bucket: str, key: str, content_hash: str = HASH) -> dict:
    return {
        "RequestType": request_type,
        "ResponseURL": cf.url,
        "StackId": "arn:aws:cloudformation:us-east-1:1:stack/s/1",
        "RequestId": "r-1",
        "LogicalResourceId": "ArtifactCheck",
        "ResourceType": "AWS::CloudFormation::CustomResource",
        "ResourceProperties": {
            "ServiceToken": "arn",
            "Bucket": bucket,
            "ManifestKey": key,
            "ContentHash": content_hash,
        },
    }


def test_the_artifact_bucket_refuses_every_unconditional_write_of_models(production):
    """Write-once (F9): the bucket policy denies s3:PutObject on models/* (PutObject and CompleteMultipartUpload)
    without If-None-Match, exempting the multipart calls that take no such header (S3 User Guide, "Enforce
    conditional writes on Amazon S3 buckets")."""
    [policy] = [
        r
        for r in production.templates["llm-endpoints-prod-artifacts"]["Resources"].values()
        if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"]["Bucket"] == {"Ref": "ArtifactBucket"}
    ]
    [statement] = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "PublishedArtifactsAreWriteOnce"
    ]
    assert (statement["Effect"], statement["Principal"], statement["Action"]) == ("Deny", {"AWS": "*"}, "s3:PutObject")
    assert statement["Condition"] == {
        "Null": {"s3:if-none-match": "true"},
        "Bool": {"s3:ObjectCreationOperation": "true"},
    }
    assert json.dumps(statement["Resource"]).endswith('/models/*"]]}')


def test_the_check_hashes_a_files_list_as_the_build_does():
    """endpoint_runtime may not import artifact/ (the Lambda asset does not ship it): its copy of the rule agrees."""
    from artifact.manifest import content_hash
    from endpoint_runtime.artifact_check import files_hash

    files = [
        {"path": "b/model.safetensors", "size": 3, "sha256": "cd" * 32},
        {"path": "a.json", "size": 1, "sha256": "ef" * 32},
    ]
    assert files_hash([(f["path"], f["size"], f["sha256"]) for f in files]) == content_hash(files)


def test_the_handler_holds_the_objects_to_the_manifest(moto_env, cloudformation, monkeypatch, tmp_path):
    """A real publish (model_build/publish.py) passes; then each way the objects can differ from the manifest fails,
    naming the file: a missing object, one of another size, one whose recorded sha256 differs, one whose bytes S3
    hashed differently, and a files list edited under the same content hash."""
    from artifact.manifest import write_manifest
    from endpoint_runtime import artifact_check, clients
    from model_build.publish import publish_artifact

    monkeypatch.setattr(clients, "_clients", {})
    s3 = boto3.client("s3")
    bucket = "objects-bucket"
    s3.create_bucket(Bucket=bucket)
    build = tmp_path / "build"
    (build / "code").mkdir(parents=True)
    (build / "config.json").write_text('{"model_type": "gpt2"}')
    (build / "model.safetensors").write_bytes(b"\0" * 4096)
    (build / "code" / "inference.py").write_text("def model_fn(d):\n    return d\n")
    manifest = write_manifest(build, progress=False)
    content_hash = manifest["content_hash"]
    prefix = f"models/chat/{content_hash}/"
    key = prefix + "manifest.json"
    publish_artifact(build, bucket, prefix, s3_client=s3, progress=False)

    def answer() -> dict:
        artifact_check.handler(_event(cloudformation, "Create", bucket, key, content_hash))
        return cloudformation.responses.pop()

    assert answer()["Status"] == "SUCCESS"

    def broken(change) -> str:
        original = s3.get_object(Bucket=bucket, Key=prefix + "config.json")
        body, meta = original["Body"].read(), original["Metadata"]
        change()
        response = answer()
        s3.put_object(Bucket=bucket, Key=prefix + "config.json", Body=body, Metadata=meta)  # put back
        assert response["Status"] == "FAILED", response
        return response["Reason"]

    assert "config.json missing" in broken(lambda: s3.delete_object(Bucket=bucket, Key=prefix + "config.json"))
    reason = broken(
        lambda: s3.put_object(Bucket=bucket, Key=prefix + "config.json", Body=b"{}", Metadata={"sha256": "0"})
    )
    assert "config.json is 2 bytes, the manifest says 22" in reason
    same_size = b'{"model_type": "evil"}'[:22].ljust(22)
    reason = broken(lambda: s3.put_object(Bucket=bucket, Key=prefix + "config.json", Body=same_size))
    assert "config.json was recorded with sha256 None" in reason
    sha = next(f["sha256"] for f in manifest["files"] if f["path"] == "config.json")
    reason = broken(
        lambda: s3.put_object(
            Bucket=bucket,
            Key=prefix + "config.json",
            Body=same_size,
            Metadata={"sha256": sha},
            ChecksumAlgorithm="SHA256",
        )
    )
    assert "config.json: S3's SHA-256 of the object is" in reason
    assert answer()["Status"] == "SUCCESS"

    edited = {**manifest, "files": [f for f in manifest["files"] if f["path"] != "code/inference.py"]}
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(edited).encode())
    assert "its files list hashes to" in answer()["Reason"]


def test_the_handler_passes_a_published_artifact_and_fails_every_other_case(moto_env, cloudformation, monkeypatch):
    from endpoint_runtime import artifact_check, clients

    s3 = boto3.client("s3")
    bucket, key = "guard-bucket", f"models/chat/{HASH}/manifest.json"
    s3.create_bucket(Bucket=bucket)
    monkeypatch.setattr(clients, "_clients", {})

    def answer(event: dict) -> dict:
        artifact_check.handler(event)
        response = cloudformation.responses.pop()
        assert (response["RequestId"], response["LogicalResourceId"]) == ("r-1", "ArtifactCheck")
        return response

    missing = answer(_event(cloudformation, "Create", bucket, key))
    assert missing["Status"] == "FAILED"
    assert f"is not published: s3://{bucket}/{key} does not exist" in missing["Reason"]
    assert "python -m model_build publish" in missing["Reason"]
    # the stack's PublishCommand is the command the reason names, exactly (a plain `cdk deploy` user runs it); run
    # through the function's entry point as Lambda loads it (lambda/artifact_check/handler.py)
    command = "python -m model_build publish --config config/examples/production.yaml --env prod --endpoint chat"
    named = _event(cloudformation, "Create", bucket, key)
    named["ResourceProperties"]["PublishCommand"] = command
    lambda_entry("artifact_check/handler.handler")(named)
    reason = cloudformation.responses.pop()["Reason"]
    assert f"publish it with `{command}`, then deploy again" in reason and "CONFIG" not in reason

    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps({"content_hash": "cd" * 32}).encode())
    other = answer(_event(cloudformation, "Update", bucket, key))
    assert other["Status"] == "FAILED" and "names content hash cdcdcdcdcdcd..., not abababababab..." in other["Reason"]

    s3.put_object(Bucket=bucket, Key=key, Body=b"[1, 2]")
    assert "is not a manifest" in answer(_event(cloudformation, "Create", bucket, key))["Reason"]

    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps({"content_hash": HASH, "files": []}).encode())
    empty = answer(_event(cloudformation, "Create", bucket, key))
    assert empty["Status"] == "FAILED" and "lists no valid files" in empty["Reason"]
    files = [{"path": "config.json", "size": 2, "sha256": "cd" * 32}]
    from endpoint_runtime.artifact_check import files_hash

    listed = files_hash([("config.json", 2, "cd" * 32)])
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps({"content_hash": listed, "files": files}).encode())
    s3.put_object(Bucket=bucket, Key=f"models/chat/{HASH}/config.json", Body=b"{}", Metadata={"sha256": "cd" * 32})
    published = answer(_event(cloudformation, "Create", bucket, key, listed))
    assert published["Status"] == "SUCCESS" and published["PhysicalResourceId"] == f"{bucket}/{key}"

    gone = _event(cloudformation, "Delete", "no-such-bucket", key)  # Delete never reads S3
    gone["PhysicalResourceId"] = f"{bucket}/{key}"
    assert answer(gone) == {**answer(gone), "Status": "SUCCESS", "PhysicalResourceId": f"{bucket}/{key}"}

    denied = answer(_event(cloudformation, "Create", "no-such-bucket", key))
    assert denied["Status"] == "FAILED" and "cannot read s3://no-such-bucket/" in denied["Reason"]


def test_a_broken_event_still_gets_an_answer(cloudformation):
    """CloudFormation waits up to an hour for an answer that never comes: any failure answers FAILED."""
    from endpoint_runtime import artifact_check

    event = _event(cloudformation, "Create", "b", "k")
    del event["ResourceProperties"]["ContentHash"]
    artifact_check.handler(event)
    [response] = cloudformation.responses
    assert response["Status"] == "FAILED" and "the artifact check failed: KeyError" in response["Reason"]
