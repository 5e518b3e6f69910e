"""The emulator runs Lambda functions from their deployed code (local_emulator/server.py, lambda_runner.py): Invoke
runs the zip's handler in a subprocess of its runtime with its environment, timeout and a log group; a custom
resource gets CloudFormation's Create, Update and Delete requests, and a FAILED answer fails the stack (with no
rollback: the emulator has none)."""

from __future__ import annotations

import io
import json
import shutil
import zipfile

import boto3
import pytest
from botocore.config import Config

from local_emulator.inventory import function_runs

pytestmark = pytest.mark.emulator

PYTHON_HANDLER = """
import json, os, time, urllib.request

def handler(event, context):
    print("event", json.dumps(event, sort_keys=True), "mode", os.environ.get("MODE"))
    if event.get("sleep"):
        time.sleep(event["sleep"])
    if event.get("raise"):
        raise ValueError("told to raise")
    if "ResponseURL" in event:
        props = event["ResourceProperties"]
        failed = props.get("Fail") == "yes"
        answer = {
            "Status": "FAILED" if failed else "SUCCESS",
            "Reason": "told to fail" if failed else "",
            "PhysicalResourceId": "thing-" + props.get("Version", "1"),
            "StackId": event["StackId"], "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"], "Data": {"Name": "topic-" + props.get("Version", "1")},
        }
        body = json.dumps(answer).encode()
        urllib.request.urlopen(urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                                      headers={"Content-Type": ""})).read()
        return None
    # the repository is not on the function's path: it runs from its package alone
    try:
        import endpoint_runtime  # noqa: F401
        isolated = False
    except ImportError:
        isolated = True
    return {"echo": event, "isolated": isolated, "remaining_ms": context.get_remaining_time_in_millis(),
            "name": context.function_name}
"""

NODE_HANDLER = """
exports.handler = async (event, context) => {
  console.log('node event', JSON.stringify(event));
  if (event.raise) throw new Error('told to raise');
  return { echo: event, name: context.functionName, remaining: context.getRemainingTimeInMillis() > 0 };
};
"""


def _zip(path: str, code: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr(path, code)
    return buf.getvalue()


def _function(lam, iam, name: str, runtime: str, handler: str, code: bytes, timeout: int = 10) -> str:
    role = iam.create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    return lam.create_function(
        FunctionName=name,
        Runtime=runtime,
        Role=role,
        Handler=handler,
        Code={"ZipFile": code},
        Timeout=timeout,
        Environment={"Variables": {"MODE": "from-its-environment"}},
    )["FunctionArn"]


def _invoke(lam, name: str, event: dict) -> tuple[str | None, dict]:
    answer = lam.invoke(FunctionName=name, Payload=json.dumps(event))
    return answer.get("FunctionError"), json.loads(answer["Payload"].read())


def test_a_python_function_runs_its_zip_with_its_environment_and_logs_to_its_group(moto_env):
    session = boto3.Session(region_name=moto_env.region)
    lam, iam, logs = session.client("lambda"), session.client("iam"), session.client("logs")
    _function(lam, iam, "py-fn", "python3.14", "fn/handler.handler", _zip("fn/handler.py", PYTHON_HANDLER), timeout=2)

    error, answer = _invoke(lam, "py-fn", {"a": 1})
    assert error is None and answer["echo"] == {"a": 1} and answer["name"] == "py-fn"
    assert answer["isolated"] and 0 < answer["remaining_ms"] <= 2000
    error, answer = _invoke(lam, "py-fn", {"raise": True})
    assert error == "Unhandled" and answer["errorType"] == "ValueError" and answer["errorMessage"] == "told to raise"
    error, answer = _invoke(lam, "py-fn", {"sleep": 5})  # over its 2 s timeout
    assert error == "Unhandled" and answer["errorType"] == "Sandbox.Timedout"

    (runs,) = function_runs(lam, logs, prefix="py-fn")
    assert runs.log_group == "/aws/lambda/py-fn" and runs.runs == 3
    assert any('"a": 1' in line and "from-its-environment" in line for line in runs.lines)
    assert any("Task timed out after 2.00 seconds" in line for line in runs.lines)


@pytest.mark.skipif(shutil.which("node", path="node_modules/.bin") is None, reason="no node_modules/.bin/node")
def test_a_node_function_runs_its_zip(moto_env):
    session = boto3.Session(region_name=moto_env.region)
    lam, iam = session.client("lambda"), session.client("iam")
    _function(lam, iam, "node-fn", "nodejs22.x", "index.handler", _zip("index.js", NODE_HANDLER))
    error, answer = _invoke(lam, "node-fn", {"b": 2})
    assert error is None and answer == {"echo": {"b": 2}, "name": "node-fn", "remaining": True}
    error, answer = _invoke(lam, "node-fn", {"raise": True})
    assert error == "Unhandled" and answer["errorMessage"] == "told to raise"


def _template(token: str, version: str, fail: str) -> str:
    return json.dumps(
        {
            "Resources": {
                "Thing": {
                    "Type": "AWS::CloudFormation::CustomResource",
                    "Properties": {"ServiceToken": token, "Version": version, "Fail": fail},
                },
                # Created from the custom resource's answer: it exists only when the answer came first.
                "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"TopicName": {"Fn::GetAtt": ["Thing", "Name"]}}},
            }
        }
    )


def _change_set(cfn, stack: str, template: str, kind: str) -> dict:
    """What `cdk deploy` does: create a change set, execute it, read the stack."""
    cfn.create_change_set(StackName=stack, ChangeSetName=f"cs-{kind}", ChangeSetType=kind, TemplateBody=template)
    cfn.execute_change_set(StackName=stack, ChangeSetName=f"cs-{kind}")
    return cfn.describe_stacks(StackName=stack)["Stacks"][0]


def _requests(lam, logs) -> list[str]:
    (runs,) = function_runs(lam, logs, prefix="cr-fn")
    return [
        json.loads(line.split("event ", 1)[1].rsplit(" mode", 1)[0])["RequestType"]
        for line in runs.lines
        if line.startswith("event ")
    ]


def test_custom_resources_get_create_update_delete_and_a_failure_fails_the_stack(moto_env):
    session = boto3.Session(region_name=moto_env.region)
    lam, iam, logs = session.client("lambda"), session.client("iam"), session.client("logs")
    cfn, sns = session.client("cloudformation"), session.client("sns")
    token = _function(lam, iam, "cr-fn", "python3.14", "fn/handler.handler", _zip("fn/handler.py", PYTHON_HANDLER))

    created = _change_set(cfn, "good", _template(token, "1", "no"), "CREATE")
    assert created["StackStatus"] == "CREATE_COMPLETE"
    assert [t["TopicArn"].rsplit(":", 1)[1] for t in sns.list_topics()["Topics"]] == ["topic-1"]
    updated = _change_set(cfn, "good", _template(token, "2", "no"), "UPDATE")
    assert updated["StackStatus"] == "UPDATE_COMPLETE"
    # A new physical id replaces the resource: the old one gets its Delete.
    assert _requests(lam, logs) == ["Create", "Update", "Delete"]

    topics = len(sns.list_topics()["Topics"])
    failed = _change_set(cfn, "bad", _template(token, "1", "yes"), "CREATE")
    assert failed["StackStatus"] == "CREATE_FAILED"
    events = cfn.describe_stack_events(StackName="bad")["StackEvents"]
    assert any(
        e["LogicalResourceId"] == "Thing"
        and e["ResourceStatus"] == "CREATE_FAILED"
        and "told to fail" in e["ResourceStatusReason"]
        for e in events
    )
    assert len(sns.list_topics()["Topics"]) == topics  # the failed stack's topic was never created

    failed_update = _change_set(cfn, "good", _template(token, "3", "yes"), "UPDATE")
    assert (
        failed_update["StackStatus"] == "UPDATE_FAILED"
    )  # no rollback on the emulator: UPDATE_FAILED, not *_ROLLBACK_*
    cfn.delete_stack(StackName="good")
    assert _requests(lam, logs)[-1] == "Delete"


def test_what_the_cdk_cli_asks_after_a_failed_deploy_is_answered_at_once(moto_env):
    """The CDK CLI diagnoses a failed custom resource with DescribeStackResources naming a logical ID and CloudTrail
    LookupEvents (aws-cdk 2.1148 toolkit-lib api/diagnosing); moto answered both with 500s the CLI retried for a
    minute. Each resource is found under its template logical ID and type; one the failed stack never created is
    not created by looking it up."""
    session = boto3.Session(region_name=moto_env.region)
    lam, iam, sns = session.client("lambda"), session.client("iam"), session.client("sns")
    cfn = session.client("cloudformation", config=Config(retries={"total_max_attempts": 1}))
    token = _function(lam, iam, "cr-fn", "python3.14", "fn/handler.handler", _zip("fn/handler.py", PYTHON_HANDLER))

    assert _change_set(cfn, "good", _template(token, "1", "no"), "CREATE")["StackStatus"] == "CREATE_COMPLETE"
    [topic] = cfn.describe_stack_resources(StackName="good", LogicalResourceId="Topic")["StackResources"]
    assert (topic["LogicalResourceId"], topic["ResourceType"]) == ("Topic", "AWS::SNS::Topic")
    assert topic["PhysicalResourceId"] == sns.list_topics()["Topics"][0]["TopicArn"]
    everything = cfn.describe_stack_resources(StackName="good")["StackResources"]
    listed = cfn.list_stack_resources(StackName="good")["StackResourceSummaries"]
    for answer in (everything, listed):
        assert sorted((r["LogicalResourceId"], r["ResourceType"]) for r in answer) == [
            ("Thing", "AWS::CloudFormation::CustomResource"),
            ("Topic", "AWS::SNS::Topic"),
        ]

    assert _change_set(cfn, "bad", _template(token, "1", "yes"), "CREATE")["StackStatus"] == "CREATE_FAILED"
    topics = len(sns.list_topics()["Topics"])
    assert cfn.describe_stack_resources(StackName="bad", LogicalResourceId="Topic")["StackResources"] == []
    assert len(sns.list_topics()["Topics"]) == topics

    trail = session.client("cloudtrail", config=Config(retries={"total_max_attempts": 1}))
    assert trail.lookup_events(MaxResults=50)["Events"] == []


def test_the_calls_the_emulator_failed_are_read_from_its_log(tmp_path):
    """moto_server.server_errors, which tests/conftest.py runs over every emulator log of a session: werkzeug's
    request lines, coloured as moto's server writes them to a file; a 404 (an object not there) is an answer."""
    from local_emulator import moto_server

    log = tmp_path / "emulator.log"  # not moto-*.log: the session check would read its 500 as a real one
    log.write_text(
        '127.0.0.1 - - [03/Dec/2026 16:42:43] "POST / HTTP/1.1" 200 -\n'
        '127.0.0.1 - - [03/Dec/2026 16:42:43] "\x1b[33mHEAD /b/models/x/model.tar.gz HTTP/1.1\x1b[0m" 404 -\n'
        '127.0.0.1 - - [03/Dec/2026 16:42:44] "\x1b[35m\x1b[1mPOST / HTTP/1.1\x1b[0m" 500 -\n'
        "Traceback (most recent call last):\n"
        '127.0.0.1 - - [03/Dec/2026 16:42:45] "GET /?policy= HTTP/1.1" 501 -\n'
    )
    assert moto_server.server_errors(log) == [
        "03/Dec/2026 16:42:44 POST / 500",
        "03/Dec/2026 16:42:45 GET /?policy= 501",
    ]


def test_the_demo_names_the_calls_the_emulator_failed(tmp_path, capsys):
    """What the demo prints as it stops its emulator: each call answered with a server error, and where its log is;
    nothing when there was none."""
    from local_emulator.demo import say_emulator_gaps

    log = tmp_path / "emulator.log"  # not moto-*.log: the session check would read its 500 as a real one
    log.write_text('127.0.0.1 - - [03/Dec/2026 16:42:43] "POST / HTTP/1.1" 200 -\n')
    say_emulator_gaps(log)
    assert capsys.readouterr().out == ""
    log.write_text('127.0.0.1 - - [03/Dec/2026 16:42:44] "\x1b[35m\x1b[1mPOST / HTTP/1.1\x1b[0m" 500 -\n')
    say_emulator_gaps(log)
    said = capsys.readouterr().out
    assert "answered 1 call(s) with a server error" in said and str(log) in said
    assert "03/Dec/2026 16:42:44 POST / 500" in said
