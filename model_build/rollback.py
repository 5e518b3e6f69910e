"""Back to what an endpoint served before a deploy whose smoke test or SLO gate failed (operations review R1).

Before `make deploy` changes an endpoint stack it takes a snapshot: the stack's template as CloudFormation holds it
(GetTemplate, TemplateStage Original), its parameters, and the artifact hashes the endpoint runs. When the new
version then fails its smoke test or SLO gate, `roll_back` updates the stack to that template again and checks
that the endpoint runs the artifact it ran before. Why this and not UpdateEndpoint to the retained previous
EndpointConfig: docs/design/rollback.md (in short: the stack stays the record of what runs, every hosting mode is
covered, and the update goes through the same guarded path as any deploy).

The snapshot is also written to disk beside the cloud assembly, so that the exact command can be printed when the
automatic rollback cannot run or does not end where it should.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model_build.clean import CleanError, in_use

if TYPE_CHECKING:
    from deployment import EndpointPlan

# What `cdk deploy` acknowledges for these stacks (IAM roles with names, no macros today): the rollback update
# needs the same (UpdateStack Capabilities, botocore's cloudformation service model).
CDK_CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
# UpdateStack's TemplateBody: "a maximum length of 51,200 bytes"; larger templates go by TemplateURL from S3
# (botocore's cloudformation service model, UpdateStack).
MAX_TEMPLATE_BODY = 51_200
# How long the rollback waits for the stack (a blue/green update with its bake can take as long as the deploy).
WAIT_DELAY_S, WAIT_MAX_ATTEMPTS = 15, 240  # 1 hour


class RollbackError(Exception):
    """The automatic rollback did not run or did not end on the previous artifact; the message says what to run."""


@dataclass
class Snapshot:
    """What an endpoint stack was before this deploy changed it."""

    stack_name: str
    endpoint: str  # the config's endpoint name
    endpoint_name: str  # the SageMaker endpoint's
    template: str  # the stack's template as CloudFormation holds it (JSON or YAML text)
    parameters: list[dict[str, str]] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)  # the artifacts the endpoint ran (empty: not known)
    template_file: str | None = None  # where `save` wrote the template (for the printed command)

    def short(self) -> str:
        return ", ".join(h[:12] for h in self.hashes) or "its previous artifact (not read)"


def take_snapshot(session: Any, plan: EndpointPlan) -> Snapshot | None:
    """The stack of `plan` (deployment.EndpointPlan) as it is now; None when there is nothing to go back to (no stack
    yet, or a first create that rolled back). RollbackError when the stack is in an unsettled status: a deploy over
    it would have no known state to return to."""
    from botocore.exceptions import BotoCoreError, ClientError

    from model_build.clean import unsettled_stack_problem

    cfn = session.client("cloudformation")
    try:
        stacks = cfn.describe_stacks(StackName=plan.stack_name)["Stacks"]
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "ValidationError" and "does not exist" in str(err):
            return None
        raise RollbackError(f"cannot read stack {plan.stack_name} before deploying it ({err})") from None
    except BotoCoreError as err:
        raise RollbackError(f"cannot read stack {plan.stack_name} before deploying it ({err})") from None
    if not stacks or stacks[0]["StackStatus"] in ("ROLLBACK_COMPLETE", "DELETE_COMPLETE"):
        return None  # a create that failed served nothing
    stack = stacks[0]
    problem = unsettled_stack_problem(plan.stack_name, stack["StackStatus"])
    if problem:
        raise RollbackError(problem.replace("; nothing was deleted", "") + "; the deploy has no version to return to")
    body = cfn.get_template(StackName=plan.stack_name, TemplateStage="Original")["TemplateBody"]
    template = body if isinstance(body, str) else json.dumps(body)
    parameters = [
        {"ParameterKey": p["ParameterKey"], "ParameterValue": p["ParameterValue"]}
        for p in stack.get("Parameters", [])
        if "ParameterValue" in p
    ]
    try:
        hashes = sorted(running_hashes(session, plan.stack_name, plan.endpoint_name, plan.name))
    except CleanError:
        hashes = []  # the rollback still restores the template; it then cannot confirm the artifact
    return Snapshot(plan.stack_name, plan.name, plan.endpoint_name, template, parameters, hashes)


def running_hashes(session: Any, stack_name: str, endpoint_name: str, endpoint: str) -> set[str]:
    """The artifact hashes the endpoint runs: by its name, else by the name its stack records (the emulator names
    endpoints itself)."""
    found = in_use(session, endpoint_name, endpoint)
    if found.configs:
        return found.hashes
    for resource in _stack_resources(session, stack_name):
        if resource["ResourceType"] == "AWS::SageMaker::Endpoint" and resource.get("PhysicalResourceId"):
            name = resource["PhysicalResourceId"].rsplit("endpoint/", 1)[-1]
            return in_use(session, name, endpoint).hashes
    return set()


def _stack_resources(session: Any, stack_name: str) -> list[dict[str, Any]]:
    pages = session.client("cloudformation").get_paginator("list_stack_resources").paginate(StackName=stack_name)
    return [r for page in pages for r in page["StackResourceSummaries"]]


def save(snapshot: Snapshot, directory: Path) -> Path:
    """Write the snapshot (and its template, for `aws cloudformation update-stack --template-body file://...`)."""
    directory.mkdir(parents=True, exist_ok=True)
    template_file = directory / f"{snapshot.stack_name}.previous.template"
    template_file.write_text(snapshot.template)
    snapshot.template_file = str(template_file)
    path = directory / f"{snapshot.stack_name}.previous.json"
    path.write_text(json.dumps(asdict(snapshot), indent=1))
    return path


def manual_command(snapshot: Snapshot, region: str | None = None) -> str:
    """The AWS CLI command that does what `roll_back` does (for a template over 51,200 bytes, after copying it to S3
    and passing --template-url instead)."""
    template = snapshot.template_file or f"<the saved template of {snapshot.stack_name}>"
    parts = [
        "aws cloudformation update-stack",
        f"--stack-name {shlex.quote(snapshot.stack_name)}",
        f"--template-body {shlex.quote('file://' + template)}",
        f"--capabilities {' '.join(CDK_CAPABILITIES)}",
    ]
    if snapshot.parameters:
        parts.append(
            "--parameters "
            + " ".join(
                shlex.quote(f"ParameterKey={p['ParameterKey']},ParameterValue={p['ParameterValue']}")
                for p in snapshot.parameters
            )
        )
    if region:
        parts.append(f"--region {region}")
    return " ".join(parts)


def roll_back(session: Any, snapshot: Snapshot, *, bucket: str | None = None) -> str:
    """Update the stack to the snapshot's template, wait, and confirm the endpoint runs the snapshot's artifacts.
    `bucket`: where a template too large for TemplateBody is put (rollback/<stack>/<sha256>.template). Returns what
    the endpoint serves now; RollbackError (naming the manual command) when it does not end there.

    CloudFormation runs the update with the role the stack already has ("If you don't specify a value, CloudFormation
    uses the role that was previously associated with the stack", UpdateStack RoleARN), as `cdk deploy` left it."""
    from botocore.exceptions import BotoCoreError, ClientError, WaiterError

    cfn = session.client("cloudformation")
    region = cfn.meta.region_name
    command = manual_command(snapshot, region)
    request: dict[str, Any] = {
        "StackName": snapshot.stack_name,
        "Capabilities": CDK_CAPABILITIES,
        "Parameters": snapshot.parameters,
    }
    body = snapshot.template.encode()
    try:
        if len(body) <= MAX_TEMPLATE_BODY:
            request["TemplateBody"] = snapshot.template
        elif bucket is None:
            raise RollbackError(
                f"the previous template of {snapshot.stack_name} is {len(body)} bytes (over UpdateStack's "
                f"{MAX_TEMPLATE_BODY}) and no bucket was given to pass it by URL; copy it to S3 and run {command} "
                "with --template-url instead of --template-body"
            )
        else:
            request["TemplateURL"] = _upload(session, bucket, snapshot, body)
        try:
            cfn.update_stack(**request)
        except ClientError as err:
            if "No updates are to be performed" not in str(err):
                raise
        cfn.get_waiter("stack_update_complete").wait(
            StackName=snapshot.stack_name, WaiterConfig={"Delay": WAIT_DELAY_S, "MaxAttempts": WAIT_MAX_ATTEMPTS}
        )
    except WaiterError as err:
        status = (err.last_response or {}).get("Stacks", [{}])[0].get("StackStatus", "unknown")
        raise RollbackError(
            f"the rollback of stack {snapshot.stack_name} ended {status} (see its events), so the endpoint may still "
            f"serve the failing artifact; when the stack has settled, run: {command}"
        ) from None
    except (ClientError, BotoCoreError) as err:
        raise RollbackError(
            f"the rollback of stack {snapshot.stack_name} could not start ({err}); the endpoint still serves the "
            f"failing artifact; run: {command}"
        ) from None
    if snapshot.hashes:
        try:
            now = running_hashes(session, snapshot.stack_name, snapshot.endpoint_name, snapshot.endpoint)
        except CleanError as err:
            raise RollbackError(
                f"stack {snapshot.stack_name} was rolled back, but what endpoint {snapshot.endpoint_name} runs "
                f"cannot be read ({err})"
            ) from None
        if now != set(snapshot.hashes):
            raise RollbackError(
                f"stack {snapshot.stack_name} was rolled back, but endpoint {snapshot.endpoint_name} runs "
                f"{', '.join(h[:12] for h in sorted(now)) or 'nothing'}, not {snapshot.short()} as before the deploy; "
                f"check it, and run: {command}"
            )
    return f"endpoint {snapshot.endpoint_name} serves {snapshot.short()} again (stack {snapshot.stack_name})"


def _upload(session: Any, bucket: str, snapshot: Snapshot, body: bytes) -> str:
    s3 = session.client("s3")
    key = f"rollback/{snapshot.stack_name}/{hashlib.sha256(body).hexdigest()}.template"
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    endpoint = s3.meta.endpoint_url
    if "amazonaws.com" in endpoint:
        return f"https://{bucket}.s3.{s3.meta.region_name}.amazonaws.com/{key}"
    # The emulator: path-style, and a host named localhost (moto parses only those template URLs).
    return f"{endpoint.replace('127.0.0.1', 'localhost')}/{bucket}/{key}"


__all__ = [
    "RollbackError",
    "Snapshot",
    "manual_command",
    "roll_back",
    "running_hashes",
    "save",
    "take_snapshot",
]
