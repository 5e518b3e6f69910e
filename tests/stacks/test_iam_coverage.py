"""IAM coverage: each runtime principal's synthesized identity policy allows every AWS call its code makes.

Principals, all read from config/examples/pipeline.yaml synthesized with -c pipeline=true (the `pipeline_synth`
session fixture, shared with test_pipeline_stack.py), and the code each one runs:

  invoke Lambda         lambda/invoke/handler.py `handler`, with the function's environment from the template
  smoke Lambda          lambda/smoke/handler.py `handler` (smoke_test), likewise
  stream Lambda         lambda/stream/app.py's request code (endpoint_runtime/stream.py `handle_request`), with its
                        environment from config/examples/production.yaml's chat-vllm stack (prod)
  publisher role        the model build step's commands under its profile: the `head_object` check, and
                        `python -m model_build publish` (model_build/publish.py), including a failed multipart upload
  pipeline SLO gate     the gate step's command, `python -m model_build slo-gate ...` (load_testing/gate.py:
  role                  the load test, reading and keeping results in the artifact bucket)
  benchmark caller      `python -m model_build benchmark` (load_testing/benchmark.py) with the managed policy
  policy                config/examples/production.yaml's chat-vllm stack creates; and the role SageMaker assumes for
                        the job, against what the Developer Guide says the job needs
  model-build and gate  what CodeBuild does with the step's own role: resolve the profile (sts:AssumeRole of the
  CodeBuild roles       target role, whose trust policy must name the CodeBuild role) and read the step's
                        SECRETS_MANAGER environment variables
  SageMaker execution   SageMaker itself: what AWS documents for an execution role passed to CreateModel
  role

Method. The real code runs against the local emulator (moto server) in the environment's account: moto switches to
the account of an assumed role ("The ARN can point to another account, providing an opportunity to switch
accounts": moto/sts/models.py `assume_role`), so a Lambda runs with credentials of its account, and the pipeline's
profiles (`credential_source = EcsContainer`, served here by a loopback stand-in of the container credentials
endpoint) assume the synthesized roles by their ARNs exactly as in CodeBuild. botocore event hooks on every client
record each call: service, operation, parameters, and the access key that signed it (so each call is attributed to
the identity that made it). Each call maps to the IAM action(s) it needs and the resource (and condition keys) it
addresses; the principal's policy statements, rendered from the template (Fn::Join, Ref, Fn::GetAtt, pseudo
parameters), must allow every one, or the test names the call.

Why not moto's own IAM enforcement (INITIAL_NO_AUTH_ACTION_COUNT, moto/core/authorization.py and
moto/iam/access_control.py in moto 5.2.5): it would refuse correct policies and accept wrong ones here.
  - Resources are evaluated only where a service computes them: moto/core/responses.py `call_action` passes "*"
    unless the service's responses class defines `_determine_resource` (sqs, iam and sts only). A statement scoped
    to an endpoint or stack ARN never matches "*", so every SageMaker and CloudFormation call would be denied.
  - moto/s3/responses.py ACTION_MAP authorizes HeadBucket as "s3:HeadBucket", which is no IAM action (AWS checks
    s3:ListBucket, API_HeadBucket), and answers 404 for a missing key whatever s3:ListBucket says.
  - Conditions: moto/iam/policy_conditions.py `verify_condition` passes when the request supplies no value for the
    key, so the execution role's s3:prefix condition would never be tested.
So the decision is made here, against AWS's documented mapping, while the calls come from the real code.

Resources in the template are rendered conservatively: what the template pins (names, pseudo parameters of the
stack's known account and region, a stack's own id) is rendered exactly; anything not resolvable renders to a
pattern that matches nothing, so an unknown never passes as a grant.

SSE-KMS. moto does not enforce KMS on S3, so the key a call needs is derived here: the templates say which bucket
(BucketEncryption aws:kms) and which prefixes (an endpoint config's async KmsKeyId, data capture's KmsKeyId) are
encrypted with which key, and every recorded S3 call on such an object needs kms:GenerateDataKey (writes; multipart
parts kms:Decrypt too) or kms:Decrypt (reads) on that key, through S3 (kms_needs). A static sweep adds the same for
every S3 object grant of every role in the templates (kms_gaps), so a principal whose code is not run is held to it
too.
"""

from __future__ import annotations

import base64
import copy
import functools
import io
import json
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import botocore.session
import pytest
from botocore.awsrequest import AWSResponse
from helpers import CODEBUILD_KEY, ContainerCredentials, lambda_entry, serve_in_thread

import endpoint_runtime.invoke as invoke
from deployment import load_config
from endpoint_config import artifact_bucket_name

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "config/examples/pipeline.yaml"  # relative, as the pipeline's steps name it in the source checkout
ENDPOINT = "gptj-fastload"
GOOD = [{"generated_text": "The capital of France is Paris."}]
STACK_ID_SUFFIX = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"  # CloudFormation's id part of a stack ARN: any value


# ======================================================================================================= the checker


@dataclass(frozen=True)
class Call:
    """One AWS API call as the code made it."""

    service: str  # botocore's service name: "s3", "sagemaker-runtime", "cloudformation", ...
    operation: str
    params: Mapping[str, Any]
    signer: str | None = None  # the access key id that signed the request


@dataclass(frozen=True)
class Where:
    """Partition, region and account of the principal: the code addresses its resources by name there."""

    account: str
    region: str
    partition: str = "aws"


@dataclass(frozen=True)
class Need:
    """One permission a call needs: an IAM action on a resource, with the request's condition keys."""

    action: str
    resource: str
    why: str
    context: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        extra = f" with {dict(self.context)}" if self.context else ""
        return f"{self.action} on {self.resource}{extra} (for {self.why})"


# API operation -> IAM action(s). Sources: the Service Authorization Reference's "API operations defined by Amazon S3"
# table (https://docs.aws.amazon.com/service-authorization/latest/reference/list_s3.html#list_s3-operations) and the
# S3 API reference: HeadBucket needs s3:ListBucket (API_HeadBucket), HeadObject s3:GetObject (API_HeadObject),
# CreateMultipartUpload/UploadPart/CompleteMultipartUpload s3:PutObject, AbortMultipartUpload s3:AbortMultipartUpload,
# ListObjectsV2 s3:ListBucket.
S3_ACTIONS: dict[str, tuple[str, str]] = {  # operation -> (action, "bucket" | "object")
    "HeadBucket": ("s3:ListBucket", "bucket"),
    "ListObjectsV2": ("s3:ListBucket", "bucket"),
    "HeadObject": ("s3:GetObject", "object"),
    "GetObject": ("s3:GetObject", "object"),
    "PutObject": ("s3:PutObject", "object"),
    "CreateMultipartUpload": ("s3:PutObject", "object"),
    "UploadPart": ("s3:PutObject", "object"),
    "CompleteMultipartUpload": ("s3:PutObject", "object"),
    "AbortMultipartUpload": ("s3:AbortMultipartUpload", "object"),
}
# Other services: the Service Authorization Reference names these actions as the operations (list_awscloudformation,
# list_amazonsagemaker, list_awssecuritytokenservice, list_awssecretsmanager). sagemaker-runtime authorizes with the
# sagemaker prefix, and InvokeEndpointWithResponseStream with sagemaker:InvokeEndpoint ("your IAM permissions must
# allow the sagemaker:InvokeEndpoint action", API_runtime_InvokeEndpointWithResponseStream). GetCallerIdentity
# needs no permission ("No permissions are required to perform this operation", STS API_GetCallerIdentity).
ACTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("cloudformation", "DescribeStacks"): ("cloudformation:DescribeStacks",),
    ("cloudformation", "ListStackResources"): ("cloudformation:ListStackResources",),
    ("sagemaker", "DescribeEndpoint"): ("sagemaker:DescribeEndpoint",),
    # On the component's ARN, as AWS's managed policies scope it (AmazonSageMakerModelCustomizationCoreAccess).
    ("sagemaker", "DescribeInferenceComponent"): ("sagemaker:DescribeInferenceComponent",),
    ("sagemaker-runtime", "InvokeEndpoint"): ("sagemaker:InvokeEndpoint",),
    ("sagemaker-runtime", "InvokeEndpointWithResponseStream"): ("sagemaker:InvokeEndpoint",),
    # The action the SageMaker Developer Guide's asynchronous-inference Prerequisites page names for the call
    # (async-inference-create-endpoint-prerequisites: "sagemaker:InvokeEndpointAsync").
    ("sagemaker-runtime", "InvokeEndpointAsync"): ("sagemaker:InvokeEndpointAsync",),
    ("sts", "AssumeRole"): ("sts:AssumeRole",),
    # The managed benchmark: the API operations' own names (the Service Authorization Reference lists SageMaker
    # actions by operation name; the AI benchmark rows were not read here, see docs/facts.md).
    ("sagemaker", "CreateAIBenchmarkJob"): ("sagemaker:CreateAIBenchmarkJob",),
    ("sagemaker", "DescribeAIBenchmarkJob"): ("sagemaker:DescribeAIBenchmarkJob",),
    ("sts", "GetCallerIdentity"): (),
    ("secretsmanager", "GetSecretValue"): ("secretsmanager:GetSecretValue",),
    # Starting and following a CodeBuild job (model_build/stage.py follow_codebuild): the Service Authorization
    # Reference for AWS CodeBuild (list_awscodebuild) names the actions as the operations, each on the project;
    # CloudWatch Logs' GetLogEvents (list_amazoncloudwatchlogs) on the log group's streams.
    ("codebuild", "StartBuild"): ("codebuild:StartBuild",),
    ("codebuild", "ListBuildsForProject"): ("codebuild:ListBuildsForProject",),
    ("codebuild", "BatchGetBuilds"): ("codebuild:BatchGetBuilds",),
    ("logs", "GetLogEvents"): ("logs:GetLogEvents",),
}


def needs_of(call: Call, where: Where) -> list[Need]:
    """The permissions one call needs. An operation without a mapping is an error: add it, with its source."""
    why = f"{call.service} {call.operation}"
    p = call.params
    if call.service == "s3":
        if call.operation not in S3_ACTIONS:
            raise KeyError(f"no IAM mapping for s3 {call.operation}: add it to S3_ACTIONS with its source")
        action, scope = S3_ACTIONS[call.operation]
        bucket = f"arn:{where.partition}:s3:::{p['Bucket']}"
        if scope == "bucket":
            context = {"s3:prefix": p["Prefix"]} if "Prefix" in p else {}
            return [Need(action, bucket, why, context)]
        found = [Need(action, f"{bucket}/{p['Key']}", why)]
        if call.operation == "HeadObject":
            # Without s3:ListBucket, S3 answers a HEAD of a missing key with 403 instead of 404 (API_HeadObject);
            # publish and the model build's check read 404 as "not published yet".
            found.append(Need("s3:ListBucket", bucket, f"{why} (404 for a missing key)"))
        return found
    if (call.service, call.operation) not in ACTIONS:
        raise KeyError(f"no IAM mapping for {call.service} {call.operation}: add it to ACTIONS with its source")
    if call.operation == "BatchGetBuilds":  # a build id is "<project>:<uuid>": the action on each build's project
        base = f"arn:{where.partition}:codebuild:{where.region}:{where.account}:project/"
        projects = sorted({build_id.split(":")[0] for build_id in p["ids"]})
        return [Need("codebuild:BatchGetBuilds", base + project, why) for project in projects]
    found = [Need(action, _resource_of(call, where), why) for action in ACTIONS[(call.service, call.operation)]]
    if call.operation == "CreateAIBenchmarkJob":
        # The role SageMaker assumes for the job: passing it is iam:PassRole on it (IAM User Guide, "Grant a user
        # permissions to pass a role to an AWS service").
        found.append(Need("iam:PassRole", p["RoleArn"], f"{why} (its RoleArn)"))
    if call.service == "sagemaker-runtime" and p.get("InferenceComponentName"):
        # The Service Authorization Reference lists inference-component beside the required endpoint as a resource
        # type of InvokeEndpoint (and InvokeEndpointWithResponseStream): a call naming a component needs the action
        # on the component's ARN too (iann0036/iam-dataset aws/iam_definition.json, its machine-readable copy).
        component = f"arn:{where.partition}:sagemaker:{where.region}:{where.account}:inference-component/"
        found += [
            Need(n.action, component + p["InferenceComponentName"].lower(), f"{why} (its inference component)")
            for n in found
        ]
    return found


def _resource_of(call: Call, where: Where) -> str:
    p, base = call.params, f"arn:{where.partition}:{{service}}:{where.region}:{where.account}"
    if "AIBenchmarkJobName" in p:  # the job's ARN: botocore's AIBenchmarkJobArn pattern, ai-benchmark-job/<name>
        return base.format(service="sagemaker") + f":ai-benchmark-job/{p['AIBenchmarkJobName']}"
    if call.operation == "DescribeInferenceComponent":  # SageMaker ARNs carry names in lower case
        return base.format(service="sagemaker") + f":inference-component/{p['InferenceComponentName'].lower()}"
    if "EndpointName" in p:  # SageMaker ARNs carry the endpoint name in lower case
        return base.format(service="sagemaker") + f":endpoint/{p['EndpointName'].lower()}"
    if "StackName" in p:
        name = p["StackName"]
        return (
            name
            if name.startswith("arn:")
            else base.format(service="cloudformation") + f":stack/{name}/{STACK_ID_SUFFIX}"
        )
    if "projectName" in p:
        return base.format(service="codebuild") + f":project/{p['projectName']}"
    if "logGroupName" in p:
        return base.format(service="logs") + f":log-group:{p['logGroupName']}:log-stream:{p['logStreamName']}"
    if "RoleArn" in p:
        return p["RoleArn"]
    if "SecretId" in p:
        return secret_arn(p["SecretId"], where)
    raise KeyError(f"no resource mapping for {call.service} {call.operation} {dict(p)}")


def secret_arn(secret_id: str, where: Where) -> str:
    """A secret named by ARN or by name; Secrets Manager appends six random characters to the name in the ARN."""
    if secret_id.startswith("arn:"):
        return secret_id if re.search(r"-[A-Za-z0-9]{6}$", secret_id) else f"{secret_id}-AbCdEf"
    return f"arn:{where.partition}:secretsmanager:{where.region}:{where.account}:secret:{secret_id}-AbCdEf"


# ------------------------------------------------------------------------------------------- rendering a template

NEVER = "(?!)"  # what an unresolvable value renders to: a pattern that matches nothing


@dataclass(frozen=True)
class StackContext:
    """One synthesized template and what its pseudo parameters resolve to."""

    template: Mapping[str, Any]
    stack_name: str
    where: Where

    @property
    def resources(self) -> Mapping[str, Any]:
        return self.template["Resources"]

    def find(self, type_name: str, predicate: Callable[[Mapping[str, Any]], bool] = lambda _: True) -> tuple[str, dict]:
        found = [(lid, r) for lid, r in self.resources.items() if r["Type"] == type_name and predicate(r)]
        assert len(found) == 1, f"{self.stack_name}: expected one {type_name}, found {[lid for lid, _ in found]}"
        return found[0]


def wildcard(text: str) -> str:
    """An IAM pattern (* and ?) as a regular expression."""
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text)


def render(value: Any, ctx: StackContext, *, patterns: bool = True) -> str:
    """A template value as a regular expression: literal text (IAM wildcards kept when `patterns`), pseudo
    parameters and known attributes resolved, anything else NEVER."""
    w = ctx.where
    if isinstance(value, str):
        return wildcard(value) if patterns else re.escape(value)
    if not isinstance(value, dict) or len(value) != 1:
        return NEVER
    [(fn, arg)] = value.items()
    if fn == "Fn::Join":
        sep, parts = arg
        return re.escape(sep).join(render(part, ctx, patterns=patterns) for part in parts)
    if fn == "Ref":
        pseudo = {
            "AWS::Partition": w.partition,
            "AWS::Region": w.region,
            "AWS::AccountId": w.account,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": ctx.stack_name,
        }
        if arg in pseudo:
            return re.escape(pseudo[arg])
        if arg == "AWS::StackId":
            return (
                re.escape(f"arn:{w.partition}:cloudformation:{w.region}:{w.account}:stack/{ctx.stack_name}/") + "[^/]+"
            )
        return NEVER
    if fn == "Fn::GetAtt" and arg[1] == "Arn" and arg[0] in ctx.resources:
        return _render_arn(ctx.resources[arg[0]], ctx)
    return NEVER


def _render_arn(resource: Mapping[str, Any], ctx: StackContext) -> str:
    w, props = ctx.where, resource.get("Properties", {})
    prefix = re.escape(f"arn:{w.partition}:")
    if resource["Type"] == "AWS::S3::Bucket" and "BucketName" in props:
        return prefix + re.escape("s3:::") + render(props["BucketName"], ctx, patterns=False)
    if resource["Type"] == "AWS::Logs::LogGroup" and "LogGroupName" in props:
        head = re.escape(f"logs:{w.region}:{w.account}:log-group:")
        return prefix + head + render(props["LogGroupName"], ctx, patterns=False) + re.escape(":") + ".*"
    if resource["Type"] == "AWS::IAM::Role" and "RoleName" in props:
        return prefix + re.escape(f"iam::{w.account}:role/") + render(props["RoleName"], ctx, patterns=False)
    if resource["Type"] == "AWS::KMS::Key":  # its id is generated: the logical id stands for it (created_key_arn)
        return re.escape(created_key_arn(ctx, _logical_id_of(resource, ctx)))
    return NEVER


def _logical_id_of(resource: Mapping[str, Any], ctx: StackContext) -> str:
    [lid] = [lid for lid, r in ctx.resources.items() if r is resource]
    return lid


def created_key_arn(ctx: StackContext, logical_id: str) -> str:
    """The ARN a KMS key created by the template has here: its generated key id is stood in by its logical id."""
    w = ctx.where
    return f"arn:{w.partition}:kms:{w.region}:{w.account}:key/{logical_id}"


# ------------------------------------------------------------------------------------------- evaluating policies


@dataclass(frozen=True)
class Policy:
    """The identity policy statements of one role, with the context to render them."""

    statements: Sequence[Mapping[str, Any]]
    ctx: StackContext
    name: str


def role_policy(ctx: StackContext, role_lid: str) -> Policy:
    """Inline policies of the role plus every AWS::IAM::Policy attached to it."""
    role = ctx.resources[role_lid]
    assert role["Type"] == "AWS::IAM::Role", role_lid
    assert not role["Properties"].get("ManagedPolicyArns"), f"{role_lid}: managed policies cannot be evaluated here"
    statements = [s for p in role["Properties"].get("Policies", []) for s in p["PolicyDocument"]["Statement"]]
    for r in ctx.resources.values():
        if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") and {"Ref": role_lid} in r["Properties"].get(
            "Roles", []
        ):
            statements += r["Properties"]["PolicyDocument"]["Statement"]
    return Policy(statements, ctx, f"{ctx.stack_name}/{role_lid}")


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches_action(patterns: Any, action: str) -> bool:  # action names are case-insensitive in IAM
    return any(re.fullmatch(wildcard(p), action, re.IGNORECASE) for p in _listed(patterns))


# Condition operators evaluated here (IAM User Guide, "Condition operators"); a key absent from the request does
# not match. Any other operator makes the statement not apply: never a grant by accident. ForAnyValue:StringEquals
# (a multivalued key such as kms:ResourceAliases, IAM User Guide "Multivalued context keys") holds when any of the
# request's values equals one given; a Need carries one value per key, so it is StringEquals on that value.
_OPERATORS: dict[str, bool] = {
    "StringEquals": False,
    "StringLike": True,
    "ArnEquals": True,
    "ArnLike": True,
    "ForAnyValue:StringEquals": False,
}


def _conditions_hold(conditions: Mapping[str, Any], context: Mapping[str, str], ctx: StackContext) -> bool:
    for operator, tests in conditions.items():
        if operator not in _OPERATORS:
            return False
        for key, expected in tests.items():
            if key not in context:
                return False
            pats = [render(v, ctx, patterns=_OPERATORS[operator]) for v in _listed(expected)]
            if not any(re.fullmatch(p, context[key]) for p in pats):
                return False
    return True


def _statement_applies(s: Mapping[str, Any], need: Need, ctx: StackContext) -> bool:
    if "NotAction" in s or "NotResource" in s or not _matches_action(s.get("Action", []), need.action):
        return False  # NotAction/NotResource are not used by these stacks; not evaluated, so never a grant
    if not any(re.fullmatch(render(r, ctx), need.resource) for r in _listed(s.get("Resource", []))):
        return False
    return _conditions_hold(s.get("Condition", {}), need.context, ctx)


def allows(policy: Policy, need: Need) -> bool:
    applying = [s for s in policy.statements if _statement_applies(s, need, policy.ctx)]
    return bool(applying) and all(s["Effect"] == "Allow" for s in applying)


def missing(policy: Policy, needs: Sequence[Need]) -> list[str]:
    """Every need the policy does not allow, described."""
    return sorted({str(n) for n in needs if not allows(policy, n)})


def trusts(ctx: StackContext, role_lid: str, caller_arn: str) -> bool:
    """Whether the role's trust policy lets `caller_arn` call sts:AssumeRole (an account principal stands for every
    identity of that account; conditions see aws:PrincipalArn)."""
    caller_root = re.sub(r":(role|user)/.*$", ":root", caller_arn)
    for s in ctx.resources[role_lid]["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
        principals = [render(p, ctx, patterns=False) for p in _listed(s.get("Principal", {}).get("AWS", []))]
        if (
            s["Effect"] == "Allow"
            and _matches_action(s["Action"], "sts:AssumeRole")
            and any(re.fullmatch(p, caller_arn) or re.fullmatch(p, caller_root) for p in principals)
            and _conditions_hold(s.get("Condition", {}), {"aws:PrincipalArn": caller_arn}, ctx)
        ):
            return True
    return False


# ======================================================================================================= recording


class Recorder:
    """Records every call of every botocore client created while installed, with the key that signed it."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.assumed: dict[str, str] = {}  # access key id -> role ARN, from AssumeRole answers
        self._lock = threading.Lock()

    def attach(self, events: Any) -> None:
        events.register("provide-client-params", self._on_params)
        events.register_last("request-created", self._on_signed)  # after the signer (a request-created handler)
        events.register("after-call.sts.AssumeRole", self._on_assumed)

    @staticmethod
    def _on_params(params: Mapping[str, Any], model: Any, context: dict, **_: Any) -> None:
        context["iam_coverage_call"] = (model.service_model.service_name, model.name, dict(params))

    def _on_signed(self, request: Any, **_: Any) -> None:
        stashed = getattr(request, "context", {}).get("iam_coverage_call")
        if stashed is None:
            return
        auth = request.headers.get("Authorization", b"")
        auth = auth.decode() if isinstance(auth, bytes) else auth
        key = re.search(r"Credential=([^/]+)/", auth)
        with self._lock:
            self.calls.append(Call(*stashed, signer=key.group(1) if key else None))

    def _on_assumed(self, parsed: Mapping[str, Any], context: Mapping[str, Any], **_: Any) -> None:
        if "Credentials" in parsed:
            self.assumed[parsed["Credentials"]["AccessKeyId"]] = context["iam_coverage_call"][2]["RoleArn"]

    def signed_by(self, key: str) -> list[Call]:
        return [c for c in self.calls if c.signer == key]

    def by_assumed_role(self) -> dict[str, list[Call]]:
        """Role ARN -> the calls signed with credentials of that role (each session assumes it anew)."""
        out: dict[str, list[Call]] = {}
        for call in self.calls:
            if call.signer in self.assumed:
                out.setdefault(self.assumed[call.signer], []).append(call)
        return out


@contextmanager
def recording(monkeypatch: pytest.MonkeyPatch, *fixes: Callable[[Any], None]) -> Iterator[Recorder]:
    """Record the calls of every client created inside the block; `fixes` are attached to those clients too."""
    recorder = Recorder()
    original = botocore.session.Session.create_client

    def create_client(self: botocore.session.Session, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        recorder.attach(client.meta.events)
        for fix in fixes:
            fix(client.meta.events)
        return client

    with monkeypatch.context() as m:
        m.setattr(botocore.session.Session, "create_client", create_client)
        yield recorder


# ======================================================================================================= the world


@dataclass(frozen=True)
class Env:
    """One pipeline environment: its deployment, account/region, and the synthesized templates."""

    name: str
    where: Where
    pipeline: StackContext  # the pipeline stack (CodeBuild projects and roles)
    stacks: Mapping[str, StackContext]  # stack name -> context, both stages of the environment

    @property
    def endpoint_stack(self) -> StackContext:
        return self.stacks[f"llm-endpoints-{self.name}-{ENDPOINT}"]

    @property
    def artifacts_stack(self) -> StackContext:
        return self.stacks[f"llm-endpoints-{self.name}-artifacts"]

    def role_named(self, role_arn: str) -> tuple[StackContext, str]:
        """The synthesized role whose RoleName is the ARN's name, in this environment's stacks."""
        name = role_arn.rsplit("/", 1)[-1]
        found = [
            (ctx, lid)
            for ctx in self.stacks.values()
            for lid, r in ctx.resources.items()
            if r["Type"] == "AWS::IAM::Role" and r["Properties"].get("RoleName") == name
        ]
        assert len(found) == 1, f"no single role named {name} in the {self.name} stacks: {found}"
        return found[0]

    def codebuild(self, action: str) -> tuple[dict, str, Where]:
        """(project properties, its role's logical id, where it runs) of one action of the environment's stages
        (Preflight and ModelBuild run in <env>-artifacts, the SLO gates in <env>-slo-gate; <env>-endpoints holds only
        the stack deploys, each running its stack's own smoke check)."""
        [pipeline] = [r for r in self.pipeline.resources.values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
        stages = [
            s
            for s in pipeline["Properties"]["Stages"]
            if s["Name"] in (f"{self.name}-artifacts", f"{self.name}-endpoints", f"{self.name}-slo-gate")
        ]
        [act] = [a for stage in stages for a in stage["Actions"] if a["Name"] == action]
        project = self.pipeline.resources[act["Configuration"]["ProjectName"]["Ref"]]["Properties"]
        return project, project["ServiceRole"]["Fn::GetAtt"][0], self.pipeline.where


def flat(value: Any) -> str:
    """A template string value that holds no unresolved token (buildspecs): Fn::Join of literals and partition."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(flat(p) for p in parts)
    if value == {"Ref": "AWS::Partition"}:
        return "aws"
    raise AssertionError(f"unresolved token in a buildspec: {value}")


@pytest.fixture(scope="module")
def envs(pipeline_synth) -> dict[str, Env]:
    _, pipeline_stack, pipeline_template, stages = pipeline_synth
    pipeline_where = Where(pipeline_stack.account, pipeline_stack.region)
    out = {}
    for name in ("dev", "prod"):
        env = load_config(ROOT / CONFIG, name).environment
        where = Where(env.account, env.region)
        stacks = {
            stack_name: StackContext(template, stack_name, where)
            for stage in (f"{name}-artifacts", f"{name}-endpoints")
            for stack_name, (template, _, _) in stages[stage].items()
        }
        out[name] = Env(name, where, StackContext(pipeline_template, "llm-endpoints-pipeline", pipeline_where), stacks)
    return out


def account_session(account: str, region: str) -> boto3.session.Session:
    """Credentials in `account` on the emulator (moto switches to an assumed role's account)."""
    creds = boto3.client("sts").assume_role(
        RoleArn=f"arn:aws:iam::{account}:role/iam-coverage-stand-in", RoleSessionName="iam-coverage"
    )["Credentials"]
    return boto3.session.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name=region,
    )


def deploy_endpoint_stack(session: boto3.session.Session, ctx: StackContext) -> Callable[[Any], None]:
    """What a deployed endpoint stack looks like on AWS, in the emulator; returns the fix to attach to clients.

    moto's CloudFormation names SageMaker resources itself (it ignores EndpointName), so the endpoint is also created
    under its real name through the SageMaker API on the stack's endpoint config, and ListStackResources answers
    are corrected to name it, as CloudFormation does on AWS. Everything else is moto's."""
    _, endpoint = ctx.find("AWS::SageMaker::Endpoint")
    name = endpoint["Properties"]["EndpointName"]
    account, region = ctx.where.account, ctx.where.region
    template = {
        "Resources": {
            "Model": {
                "Type": "AWS::SageMaker::Model",
                "Properties": {
                    "ExecutionRoleArn": f"arn:aws:iam::{account}:role/sagemaker-exec",
                    "PrimaryContainer": {"Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/x:1"},
                },
            },
            "EndpointConfig": {
                "Type": "AWS::SageMaker::EndpointConfig",
                "Properties": {
                    "ProductionVariants": [
                        {
                            "VariantName": "AllTraffic",
                            "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
                            "InitialInstanceCount": 1,
                            "InstanceType": "ml.m5.xlarge",
                            "InitialVariantWeight": 1.0,
                        }
                    ]
                },
            },
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {
                    "EndpointName": name,
                    "EndpointConfigName": {"Fn::GetAtt": ["EndpointConfig", "EndpointConfigName"]},
                },
            },
        }
    }
    cfn, sm = session.client("cloudformation"), session.client("sagemaker")
    cfn.create_stack(StackName=ctx.stack_name, TemplateBody=json.dumps(template))
    listed = cfn.list_stack_resources(StackName=ctx.stack_name)["StackResourceSummaries"]
    [moto_endpoint] = [r["PhysicalResourceId"] for r in listed if r["ResourceType"] == "AWS::SageMaker::Endpoint"]
    [config] = [r["PhysicalResourceId"] for r in listed if r["ResourceType"] == "AWS::SageMaker::EndpointConfig"]
    sm.create_endpoint(EndpointName=name, EndpointConfigName=config.rsplit("/", 1)[-1])
    real = f"arn:aws:sagemaker:{region}:{account}:endpoint/{name}"

    def name_the_endpoint(parsed: dict, **_: Any) -> None:
        for summary in parsed.get("StackResourceSummaries", []):
            if summary.get("PhysicalResourceId") == moto_endpoint:
                summary["PhysicalResourceId"] = real

    return lambda events: events.register("after-call.cloudformation.ListStackResources", name_the_endpoint)


def set_lambda_credentials(monkeypatch: pytest.MonkeyPatch, session: boto3.session.Session) -> str:
    """The Lambda runtime hands the function's role credentials over AWS_* variables; returns the access key."""
    creds = session.get_credentials()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", creds.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", creds.secret_key)
    monkeypatch.setenv("AWS_SESSION_TOKEN", creds.token)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    return creds.access_key


def function_environment(ctx: StackContext, handler: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Set the function's environment variables as the template gives them; returns its role's logical id."""
    _, fn = ctx.find("AWS::Lambda::Function", lambda r: r["Properties"]["Handler"] == handler)
    for key, value in fn["Properties"]["Environment"]["Variables"].items():
        monkeypatch.setenv(key, ctx.stack_name if value == {"Ref": "AWS::StackName"} else flat(value))
    return fn["Properties"]["Role"]["Fn::GetAtt"][0]


@contextmanager
def codebuild_step(project: Mapping[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """The step's shell as CodeBuild sets it up: its environment variables, the AWS profile its install commands
    write (run here with bash, HOME in tmp), and the service role's credentials over the container credentials
    endpoint, which `credential_source = EcsContainer` reads (botocore accepts AWS_CONTAINER_CREDENTIALS_FULL_URI on
    a loopback host; CodeBuild sets the relative variant). Yields the buildspec."""
    spec = json.loads(flat(project["Source"]["BuildSpec"]))
    home = tmp_path / "home"
    home.mkdir()
    for command in spec["phases"]["install"]["commands"]:
        if "~/.aws" in command:
            subprocess.run(["bash", "-c", command], check=True, env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert (home / ".aws" / "config").is_file(), "the step's install commands write no AWS profile"
    server = ThreadingHTTPServer(("127.0.0.1", 0), ContainerCredentials)
    serve_in_thread(server)
    try:
        for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("AWS_CONFIG_FILE", str(home / ".aws" / "config"))
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"http://127.0.0.1:{server.server_port}/creds")
        for variable in project["Environment"].get("EnvironmentVariables", []):
            if variable.get("Type", "PLAINTEXT") == "PLAINTEXT":
                monkeypatch.setenv(variable["Name"], flat(variable["Value"]))
        monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
        yield spec
    finally:
        server.shutdown()
        server.server_close()


def step_secret_needs(project: Mapping[str, Any], spec: Mapping[str, Any], where: Where) -> list[Need]:
    """What CodeBuild reads with the step's role before the commands run: SECRETS_MANAGER environment variables
    (project or buildspec env; value "secret-id[:json-key:...]"), https://docs.aws.amazon.com/codebuild/latest/
    userguide/build-spec-ref.html#build-spec.env.secrets-manager. Parameter Store variables are not mapped yet."""
    values = [
        flat(v["Value"])
        for v in project["Environment"].get("EnvironmentVariables", [])
        if v.get("Type") == "SECRETS_MANAGER"
    ] + list(spec.get("env", {}).get("secrets-manager", {}).values())
    assert not any(v.get("Type") == "PARAMETER_STORE" for v in project["Environment"].get("EnvironmentVariables", []))
    assert "parameter-store" not in spec.get("env", {}), "map Parameter Store variables (ssm:GetParameters) here"
    found = []
    for value in values:
        parts = value.split(":")
        secret_id = ":".join(parts[:7]) if value.startswith("arn:") else parts[0]  # an ARN holds 6 colons
        found.append(Need("secretsmanager:GetSecretValue", secret_arn(secret_id, where), f"CodeBuild secret {value}"))
    return found


def python_checks(command: str) -> list[tuple[str, list[str]]]:
    """The `python -c '<code>' ARGS` checks of a build command: (code, argv)."""
    found = []
    for match in re.finditer(r"python3? -c ('[^']*')([^;&|]*)", command):
        args = [a for a in shlex.split(match.group(2)) if not re.match(r"\d*[<>]", a)]  # redirections are no args
        found.append((shlex.split(match.group(1))[0], args))
    return found


def model_build_commands(command: str, name: str) -> list[list[str]]:
    """The argv of each `python -m model_build <name> ...` in a build command."""
    return [shlex.split(m.group(1)) for m in re.finditer(rf"python3? -m model_build ({name} [^;&|]*)", command)]


def run_python_check(code: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run a `python -c` check in this process (its clients are recorded); True when it exits 0."""
    with monkeypatch.context() as m:
        m.setattr(sys, "argv", ["-c", *argv])
        try:
            exec(compile(code, "<build command check>", "exec"), {"__name__": "__main__"})
        except botocore.exceptions.ClientError:
            return False
    return True


def principal_needs(calls: Sequence[Call], where: Where, encrypted: Sequence[Encrypted] = ()) -> list[Need]:
    """What the calls need: each call's own actions, and the KMS key use of those on SSE-KMS objects."""
    return [n for c in calls for n in [*needs_of(c, where), *kms_needs(c, where, encrypted)]]


# ------------------------------------------------------------------------------------------- SSE-KMS
# S3 User Guide, "Using server-side encryption with AWS KMS keys (SSE-KMS)" (UsingKMSEncryption.html): "To upload an
# object encrypted with an AWS KMS key to Amazon S3, you need kms:GenerateDataKey permissions on the key. To download
# an object encrypted with an AWS KMS key, you need kms:Decrypt permissions"; "Multipart upload API and permissions"
# (mpuoverview.html#mpuAndPermissions): a multipart upload under SSE-KMS needs kms:Decrypt and kms:GenerateDataKey.
# The requests reach KMS through S3 (kms:ViaService s3.<region>.amazonaws.com). HeadObject and the listings read no
# object data: none.
KMS_FOR_S3: dict[str, tuple[str, ...]] = {
    "PutObject": ("kms:GenerateDataKey",),
    "CreateMultipartUpload": ("kms:GenerateDataKey", "kms:Decrypt"),
    "UploadPart": ("kms:GenerateDataKey", "kms:Decrypt"),
    "CompleteMultipartUpload": ("kms:GenerateDataKey", "kms:Decrypt"),
    "GetObject": ("kms:Decrypt",),
}


@dataclass(frozen=True)
class KmsKey:
    arn: str
    alias: str | None = None  # a created key's alias (kms:ResourceAliases of the request)


@dataclass(frozen=True)
class Encrypted:
    """Objects under s3://bucket/prefix are encrypted with `key` (prefix "": the bucket's default encryption)."""

    bucket: str
    prefix: str
    key: KmsKey


def encrypted_locations(*contexts: StackContext) -> list[Encrypted]:
    """Every SSE-KMS location the templates set up, most specific first: buckets whose default encryption is aws:kms,
    the async answers and failures of an endpoint config with OutputConfig.KmsKeyId, data capture with KmsKeyId."""
    found: list[Encrypted] = []
    for ctx in contexts:
        for lid, r in ctx.resources.items():
            props = r.get("Properties", {})
            if r["Type"] == "AWS::S3::Bucket" and "BucketName" in props:
                for rule in props.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", []):
                    default = rule.get("ServerSideEncryptionByDefault", {})
                    if default.get("SSEAlgorithm") == "aws:kms":
                        found.append(
                            Encrypted(_resolved(props["BucketName"], ctx), "", _key(default["KMSMasterKeyID"], ctx))
                        )
            if r["Type"] == "AWS::SageMaker::EndpointConfig":
                output = props.get("AsyncInferenceConfig", {}).get("OutputConfig", {})
                if "KmsKeyId" in output:
                    for path in (output["S3OutputPath"], output["S3FailurePath"]):
                        bucket, prefix = _resolved(path, ctx).removeprefix("s3://").split("/", 1)
                        found.append(Encrypted(bucket, prefix + "/", _key(output["KmsKeyId"], ctx)))
                capture = props.get("DataCaptureConfig", {})
                if "KmsKeyId" in capture:
                    bucket, prefix = _resolved(capture["DestinationS3Uri"], ctx).removeprefix("s3://").split("/", 1)
                    found.append(Encrypted(bucket, prefix, _key(capture["KmsKeyId"], ctx)))
    return sorted(found, key=lambda e: -len(e.prefix))


def _key(value: Any, ctx: StackContext) -> KmsKey:
    """A KMS key a template names: an ARN, or a key it creates (with its alias, if it has one)."""
    if isinstance(value, str):
        return KmsKey(value)
    lid = value["Fn::GetAtt"][0] if "Fn::GetAtt" in value else value["Ref"]
    aliases = [
        r["Properties"]["AliasName"]
        for r in ctx.resources.values()
        if r["Type"] == "AWS::KMS::Alias"
        and r["Properties"]["TargetKeyId"] in ({"Ref": lid}, {"Fn::GetAtt": [lid, "Arn"]})
    ]
    return KmsKey(created_key_arn(ctx, lid), aliases[0] if aliases else None)


def kms_needs(call: Call, where: Where, encrypted: Sequence[Encrypted]) -> list[Need]:
    """The KMS key use one S3 call needs when its object is SSE-KMS encrypted (KMS_FOR_S3)."""
    if call.service != "s3" or call.operation not in KMS_FOR_S3:
        return []
    return _key_needs(
        call.params["Bucket"],
        call.params["Key"],
        KMS_FOR_S3[call.operation],
        where,
        f"s3 {call.operation} under SSE-KMS",
        encrypted,
    )


def _key_needs(
    bucket: str, key: str, kms_actions: Sequence[str], where: Where, why: str, encrypted: Sequence[Encrypted]
) -> list[Need]:
    location = next((e for e in encrypted if e.bucket == bucket and key.startswith(e.prefix)), None)
    if location is None:
        return []
    context = {"kms:ViaService": f"s3.{where.region}.amazonaws.com"}
    if location.key.alias:
        context["kms:ResourceAliases"] = location.key.alias
    return [Need(action, location.key.arn, why, context) for action in kms_actions]


def kms_gaps(policy: Policy, encrypted: Sequence[Encrypted]) -> list[str]:
    """Every S3 object write or read a role's policy allows on an SSE-KMS location whose key use it does not allow:
    the static half of the check, for principals whose code is not run (a sample key under each granted prefix)."""
    gaps = []
    for s in policy.statements:
        if s["Effect"] != "Allow":
            continue
        for operation, s3_action in (("PutObject", "s3:PutObject"), ("GetObject", "s3:GetObject")):
            if not _matches_action(s.get("Action", []), s3_action):
                continue
            for resource in _listed(s.get("Resource", [])):
                text = _sample(resource, policy.ctx)
                if text is None or not text.startswith("arn:aws:s3:::") or "/" not in text:
                    continue
                bucket, key = text.removeprefix("arn:aws:s3:::").split("/", 1)
                needs = _key_needs(
                    bucket,
                    key,
                    KMS_FOR_S3[operation],
                    policy.ctx.where,
                    f"{s3_action} on {text} under SSE-KMS",
                    encrypted,
                )
                gaps += missing(policy, needs)
    return sorted(set(gaps))


def _sample(value: Any, ctx: StackContext) -> str | None:
    """A concrete name a policy resource covers (wildcards filled in), or None when it holds an unresolved token."""
    try:
        text = _resolved(value, ctx)
    except (KeyError, TypeError):
        return None
    return text.replace("*", "x").replace("?", "x")


def actions(needs: Sequence[Need]) -> set[str]:
    return {n.action for n in needs}


# ======================================================================================================= the principals


def test_invoke_lambda_role_allows_every_call_of_the_invoke_handler(moto_env, envs, monkeypatch):
    env = envs["dev"]
    ctx = env.endpoint_stack
    role = function_environment(ctx, "invoke/handler.handler", monkeypatch)
    moto_env.set_invoke_results([GOOD], account=env.where.account)
    key = set_lambda_credentials(monkeypatch, account_session(env.where.account, env.where.region))
    invoke.reset_client()
    try:
        with recording(monkeypatch) as rec:
            answer = invoke.handler({"inputs": "The capital of France is", "parameters": {"max_new_tokens": 8}}, None)
    finally:
        invoke.reset_client()
    assert answer["statusCode"] == 200, answer
    assert rec.calls and rec.signed_by(key) == rec.calls, "every call is made with the function's credentials"
    needs = principal_needs(rec.calls, ctx.where)
    assert actions(needs) == {"sagemaker:InvokeEndpoint"}
    assert missing(role_policy(ctx, role), needs) == []


def test_smoke_lambda_role_allows_every_call_of_the_smoke_test(moto_env, envs, monkeypatch):
    env = envs["dev"]
    ctx = env.endpoint_stack
    role = function_environment(ctx, "smoke/handler.handler", monkeypatch)
    fix = deploy_endpoint_stack(account_session(env.where.account, env.where.region), ctx)
    moto_env.set_invoke_results([GOOD], account=env.where.account)
    key = set_lambda_credentials(monkeypatch, account_session(env.where.account, env.where.region))
    with recording(monkeypatch, fix) as rec:
        result = lambda_entry("smoke/handler.handler")({}, None)
    assert result["ok"], result["failures"]  # every check ran: the recorded calls are the whole code path
    assert rec.calls and rec.signed_by(key) == rec.calls
    needs = principal_needs(rec.calls, ctx.where)
    assert actions(needs) == {
        "cloudformation:DescribeStacks",
        "cloudformation:ListStackResources",
        "sagemaker:DescribeEndpoint",
        "sagemaker:InvokeEndpoint",
    }
    assert missing(role_policy(ctx, role), needs) == []


def test_smoke_check_role_allows_every_call_of_the_stacks_smoke_check(moto_env, envs, monkeypatch):
    """The stack's smoke check custom resource (endpoint_runtime/smoke_check.py): smoke_test on the endpoint, config
    and model its properties name, no stack call."""
    from endpoint_runtime import smoke_check

    env = envs["dev"]
    ctx = env.endpoint_stack
    role = function_environment(ctx, "smoke_check/handler.handler", monkeypatch)
    session = account_session(env.where.account, env.where.region)
    fix = deploy_endpoint_stack(session, ctx)
    listed = session.client("cloudformation").list_stack_resources(StackName=ctx.stack_name)["StackResourceSummaries"]
    [config] = [r["PhysicalResourceId"] for r in listed if r["ResourceType"] == "AWS::SageMaker::EndpointConfig"]
    [model] = [r["PhysicalResourceId"] for r in listed if r["ResourceType"] == "AWS::SageMaker::Model"]
    _, endpoint = ctx.find("AWS::SageMaker::Endpoint")
    props = {
        "EndpointName": endpoint["Properties"]["EndpointName"],
        "EndpointConfigName": config.rsplit("/", 1)[-1],
        "ModelNames": [model.rsplit("/", 1)[-1]],
    }
    moto_env.set_invoke_results([GOOD], account=env.where.account)
    key = set_lambda_credentials(monkeypatch, session)
    with recording(monkeypatch, fix) as rec:
        result = smoke_check.run_checks(props)
    assert result.ok, [c.message for c in result.failures]  # every check ran: the recorded calls are the whole path
    assert rec.calls and rec.signed_by(key) == rec.calls
    needs = principal_needs(rec.calls, ctx.where)
    assert actions(needs) == {"sagemaker:DescribeEndpoint", "sagemaker:InvokeEndpoint"}
    assert missing(role_policy(ctx, role), needs) == []


def test_publisher_and_model_build_roles_allow_every_call_of_the_model_build_commands(
    moto_env, envs, monkeypatch, tmp_path
):
    """The model build step's commands: the head_object check, then (the build, which needs the Hugging Face Hub,
    skipped here) `model_build publish` of a build with the pinned hash: once failing mid multipart upload (s3transfer
    aborts it: s3transfer/tasks.py CreateMultipartUploadTask adds abort_multipart_upload as failure cleanup), then
    for real; then the check again."""
    import model_build.cli as cli
    import model_build.publish as publish

    env = envs["dev"]
    monkeypatch.chdir(ROOT)  # CodeBuild runs the commands in the source checkout
    project, cb_role, cb_where = env.codebuild("ModelBuild")
    environment_plan = load_config(ROOT / CONFIG, env.name)
    spec_ep = environment_plan.endpoint(ENDPOINT)
    setup = account_session(env.where.account, env.where.region)
    setup.client("s3").create_bucket(
        Bucket=artifact_bucket_name(environment_plan.project, env.name, env.where.account, env.where.region)
    )
    monkeypatch.setattr(
        "deployment.plan.BUILD_ROOT", _fake_build(tmp_path / "build", spec_ep.name, spec_ep.artifact_hash)
    )
    # A 6 MiB file goes multipart at S3's 5 MiB minimum part size; publish's 64 MiB default would need 64 MiB.
    monkeypatch.setattr(
        publish,
        "publish_artifact",
        functools.partial(publish.publish_artifact, multipart_threshold=publish.MIN_PART_SIZE),
    )
    with codebuild_step(project, tmp_path, monkeypatch) as spec, recording(monkeypatch) as rec:
        [command] = spec["phases"]["build"]["commands"]
        [(code, argv)] = python_checks(command)
        # This endpoint converts a Hub model: the step runs `build --in-account` for it (the next test). The step
        # publishes with the same arguments an endpoint it builds itself (a checkpoint system, a local model): that
        # publish, run here, holds the publisher's publish grant.
        [build_argv] = model_build_commands(command, "build")
        publish_argv = ["publish", *[a for a in build_argv[1:] if a != "--in-account"]]
        assert not run_python_check(code, argv, monkeypatch), "nothing is published yet"
        with monkeypatch.context() as m:
            m.setattr(
                botocore.session.Session, "create_client", _failing_upload_part(botocore.session.Session.create_client)
            )
            assert cli.main(publish_argv) == 2, "the injected UploadPart failure fails the publish"
        assert cli.main(publish_argv) == 0
        assert run_python_check(code, argv, monkeypatch), "the pinned artifact's manifest.json is published"
    _check_codebuild_role(env, rec, project, spec, cb_role, cb_where)
    [(target, calls)] = rec.by_assumed_role().items()
    target_ctx, target_lid = env.role_named(target)
    assert target_ctx is env.artifacts_stack
    needs = principal_needs(calls, target_ctx.where)
    assert {(c.service, c.operation) for c in calls} == {
        ("s3", "HeadBucket"),
        ("s3", "HeadObject"),
        ("s3", "PutObject"),
        ("s3", "CreateMultipartUpload"),
        ("s3", "UploadPart"),
        ("s3", "CompleteMultipartUpload"),
        ("s3", "AbortMultipartUpload"),
        ("sts", "GetCallerIdentity"),
    }
    assert missing(role_policy(target_ctx, target_lid), needs) == []


def _exports_content_hash(content_hash: str) -> Callable[[Any], None]:
    """What CodeBuild adds and moto's CodeBuild does not (moto 5.2.5 moto/codebuild/models.py keeps no exported
    variables): the recipe buildspec's exported RECIPE_CONTENT_HASH on each succeeded build BatchGetBuilds returns
    (Build.exportedEnvironmentVariables, botocore's codebuild model)."""

    def add(parsed: dict, **_: Any) -> None:
        for build in parsed.get("builds", []):
            if build.get("buildStatus") == "SUCCEEDED":
                build["exportedEnvironmentVariables"] = [{"name": "RECIPE_CONTENT_HASH", "value": content_hash}]

    return lambda events: events.register("after-call.codebuild.BatchGetBuilds", add)


def test_publisher_role_allows_every_call_of_the_in_account_recipe_build(moto_env, envs, monkeypatch, tmp_path):
    """The model build step's command for an endpoint whose recipe converts a Hub model: the head_object check, then
    `model_build build --in-account` (model_build/recipe_job.py): the recipe project from the artifacts stack's
    output, its recent builds, the config under recipe-specs/, StartBuild, the build followed (its status, exported
    hash and log), the published manifest fetched; then the check again. moto runs no build: the artifact is put in
    the bucket beforehand as the project's publish leaves it, and the Hub's sizing (no AWS call; tested against a Hub
    mirror in tests/model_build/test_recipe_job.py) is a fixed 12 GB."""
    import hashlib

    import model_build.cli as cli
    import model_build.recipe_job as recipe_job

    env = envs["dev"]
    monkeypatch.chdir(ROOT)
    project, cb_role, cb_where = env.codebuild("ModelBuild")
    environment_plan = load_config(ROOT / CONFIG, env.name)
    plan = environment_plan.plan(ENDPOINT)
    assert plan.converts_hub_model
    setup = account_session(env.where.account, env.where.region)
    bucket = artifact_bucket_name(environment_plan.project, env.name, env.where.account, env.where.region)
    s3 = setup.client("s3")  # made before the step's profile is set, as the setup's other clients
    s3.create_bucket(Bucket=bucket)
    monkeypatch.setattr("deployment.plan.BUILD_ROOT", tmp_path / "build")
    monkeypatch.setattr(recipe_job, "source_bytes_from_hub", lambda plan: 12 * recipe_job.GB)
    recipe_project = f"{environment_plan.project}-{env.name}-recipe-build"
    assert env.artifacts_stack.template["Outputs"]["RecipeBuildProject"]["Value"] == recipe_project
    setup.client("codebuild").create_project(
        name=recipe_project,
        source={"type": "S3", "location": f"{bucket}/code.zip"},
        artifacts={"type": "NO_ARTIFACTS"},
        environment={
            "type": "LINUX_CONTAINER",
            "image": "aws/codebuild/standard:8.0",
            "computeType": "BUILD_GENERAL1_LARGE",
        },
        serviceRole=f"arn:aws:iam::{env.where.account}:role/recipe",
    )
    setup.client("cloudformation").create_stack(
        StackName=environment_plan.stack_name("artifacts"),
        TemplateBody=json.dumps(
            {
                "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
                "Outputs": {"RecipeBuildProject": {"Value": recipe_project}},
            }
        ),
    )
    prefix = f"models/{plan.name}/{plan.artifact.content_hash}/"
    with codebuild_step(project, tmp_path, monkeypatch) as spec:
        [command] = spec["phases"]["build"]["commands"]
        [(code, argv)] = python_checks(command)
        [build_argv] = model_build_commands(command, "build")
        assert "--in-account" in build_argv
        # the recipe build's publish, as it leaves the bucket (config.json last but one, manifest.json last)
        config = b'{"model_type": "gptj"}'
        files = [{"path": "config.json", "size": len(config), "sha256": hashlib.sha256(config).hexdigest()}]
        with recording(monkeypatch, _exports_content_hash(plan.artifact.content_hash)) as rec:
            assert not run_python_check(code, argv, monkeypatch), "nothing is published yet"
            s3.put_object(Bucket=bucket, Key=prefix + "config.json", Body=config)
            manifest = {"files": files, "content_hash": plan.artifact.content_hash, "system": plan.system.name}
            s3.put_object(Bucket=bucket, Key=prefix + "manifest.json", Body=json.dumps(manifest).encode())
            assert cli.main(build_argv) == 0
            assert run_python_check(code, argv, monkeypatch), "the pinned artifact's manifest.json is published"
    _check_codebuild_role(env, rec, project, spec, cb_role, cb_where)
    fetched = json.loads((tmp_path / "build" / plan.name / "manifest.json").read_text())
    assert fetched["built_in_account"]["bucket"] == bucket
    by_role = rec.by_assumed_role()
    calls = [c for role_calls in by_role.values() for c in role_calls]
    [target] = set(by_role)
    target_ctx, target_lid = env.role_named(target)
    assert target_ctx is env.artifacts_stack
    made = {(c.service, c.operation) for c in calls}
    assert made == {
        ("s3", "HeadBucket"),
        ("s3", "HeadObject"),
        ("s3", "GetObject"),
        ("s3", "PutObject"),
        ("sts", "GetCallerIdentity"),
        ("cloudformation", "DescribeStacks"),
        ("codebuild", "ListBuildsForProject"),
        ("codebuild", "BatchGetBuilds"),
        ("codebuild", "StartBuild"),
    } | ({("logs", "GetLogEvents")} & made)
    [spec_put] = [c for c in calls if c.operation == "PutObject"]
    assert spec_put.params["Key"].startswith(f"recipe-specs/{plan.name}/")
    needs = principal_needs(calls, target_ctx.where)
    assert missing(role_policy(target_ctx, target_lid), needs) == []
    # exactly: the spec prefix is the only one the publisher writes besides models/*, and not staging-specs/ for this
    assert missing(role_policy(target_ctx, target_lid), [Need("s3:PutObject", f"arn:aws:s3:::{bucket}/other/x", "t")])


def _check_codebuild_role(env: Env, rec: Recorder, project, spec, cb_role: str, cb_where: Where) -> None:
    """The step's own role: it signs only the AssumeRole of the profile's role (plus what CodeBuild reads for the
    step's secrets), its policy allows that, and the target role's trust policy names it."""
    strangers = [c for c in rec.calls if c.signer != CODEBUILD_KEY and c.signer not in rec.assumed]
    assert not strangers, f"calls made neither by the step's role nor by the role its profile assumes: {strangers}"
    own = rec.signed_by(CODEBUILD_KEY)
    assert {(c.service, c.operation) for c in own} == {("sts", "AssumeRole")}
    needs = principal_needs(own, cb_where) + step_secret_needs(project, spec, cb_where)
    assert missing(role_policy(env.pipeline, cb_role), needs) == []
    role_name = env.pipeline.resources[cb_role]["Properties"]["RoleName"]
    caller = f"arn:{cb_where.partition}:iam::{cb_where.account}:role/{role_name}"
    for target in {c.params["RoleArn"] for c in own}:
        ctx, lid = env.role_named(target)
        assert trusts(ctx, lid, caller), f"{target} does not trust {caller}"


def _fake_build(root: Path, name: str, content_hash: str) -> Path:
    """A build directory as `model_build build` leaves it, with the pinned content hash (publish checks the files
    against the manifest, and the hash against the pin, not the weights)."""
    import hashlib

    build = root / name
    build.mkdir(parents=True)
    files = {"config.json": b'{"model_type": "gptj"}', "model-00001-of-00001.safetensors": bytes(6 * 1024 * 1024)}
    entries = []
    for rel, data in files.items():
        (build / rel).write_bytes(data)
        entries.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    (build / "manifest.json").write_text(json.dumps({"files": entries, "content_hash": content_hash}))
    return root


def _failing_upload_part(create_client: Callable[..., Any]) -> Callable[..., Any]:
    """create_client whose clients answer every UploadPart with an error, without sending it."""

    def fail(model: Any, **_: Any) -> tuple[AWSResponse, dict]:
        return AWSResponse("https://s3", 500, {}, None), {"Error": {"Code": "InjectedFailure", "Message": "test"}}

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = create_client(self, *args, **kwargs)
        client.meta.events.register("before-call.s3.UploadPart", fail)
        return client

    return wrapped


@pytest.mark.parametrize("env_name", ["dev", "prod"])
def test_execution_role_allows_what_sagemaker_does_for_the_model(envs, env_name):
    """SageMaker's calls with the execution role, as AWS documents them for a role passed to CreateModel ("How to use
    SageMaker AI execution roles", CreateModel API section, https://docs.aws.amazon.com/sagemaker/latest/dg/
    sagemaker-roles.html): s3:GetObject of the model data, the ECR pull of the image (ecr:GetAuthorizationToken on
    *), CloudWatch Logs (CreateLogGroup, CreateLogStream, PutLogEvents, DescribeLogStreams) and
    cloudwatch:PutMetricData. Uncompressed S3Prefix model data is every object under the prefix (API
    S3ModelDataSource), so SageMaker lists it: s3:ListBucket with s3:prefix. The metrics namespace of endpoint
    instances is /aws/sagemaker/Endpoints (aws-cdk aws-sagemaker-alpha endpoint.ts, metricCpuUtilization & co)."""
    env = envs[env_name]
    ctx = env.endpoint_stack
    _, model = ctx.find("AWS::SageMaker::Model")
    _, endpoint = ctx.find("AWS::SageMaker::Endpoint")
    role = model["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    container = model["Properties"]["PrimaryContainer"]
    bucket, prefix = _model_data(container, ctx)
    old_prefix = re.sub(r"/[0-9a-f]{64}/", "/" + "0" * 64 + "/", prefix)  # the previous artifact, blue/green
    assert old_prefix != prefix
    image = re.fullmatch(r"(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com/([^:@]+)[:@].*", container["Image"])
    assert image, container["Image"]
    repo = f"arn:aws:ecr:{image.group(2)}:{image.group(1)}:repository/{image.group(3)}"
    group = f"arn:aws:logs:{ctx.where.region}:{ctx.where.account}:log-group:/aws/sagemaker/Endpoints/{endpoint['Properties']['EndpointName']}"
    needs = [
        Need("s3:GetObject", f"arn:aws:s3:::{bucket}/{prefix}config.json", "model data"),
        Need("s3:GetObject", f"arn:aws:s3:::{bucket}/{old_prefix}config.json", "the old fleet's model data"),
        Need("s3:ListBucket", f"arn:aws:s3:::{bucket}", "listing the model data prefix", {"s3:prefix": prefix}),
        Need("s3:ListBucket", f"arn:aws:s3:::{bucket}", "listing the old prefix", {"s3:prefix": old_prefix}),
        *(
            Need(a, repo, "image pull")
            for a in ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability")
        ),
        Need("ecr:GetAuthorizationToken", "*", "image pull"),
        # The group ARN with the trailing :* is the form CloudWatch Logs authorizes (IAM policies use it for all
        # actions but the tagging ones, iam-access-control-overview-cwl); streams are named by SageMaker.
        Need("logs:CreateLogGroup", f"{group}:*", "SageMaker may create the endpoint's log group"),
        Need("logs:DescribeLogStreams", f"{group}:*", "container logs"),
        Need("logs:CreateLogStream", f"{group}:log-stream:AllTraffic/i-0123456789abcdef0", "container logs"),
        Need("logs:PutLogEvents", f"{group}:log-stream:AllTraffic/i-0123456789abcdef0", "container logs"),
        Need("cloudwatch:PutMetricData", "*", "instance metrics", {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}),
    ]
    policy = role_policy(ctx, role)
    assert missing(policy, needs) == []
    # ... and no other endpoint's artifacts.
    other = Need("s3:GetObject", f"arn:aws:s3:::{bucket}/models/other-endpoint/{'0' * 64}/config.json", "not granted")
    assert missing(policy, [other]) == [str(other)]


def _model_data(container: Mapping[str, Any], ctx: StackContext) -> tuple[str, str]:
    """(bucket, key prefix) of the model's S3 data, the account and region pseudo parameters resolved."""
    source = container["ModelDataSource"]["S3DataSource"]
    assert (source["S3DataType"], source["CompressionType"]) == ("S3Prefix", "None")
    parts = source["S3Uri"]["Fn::Join"][1]
    text = "".join(
        p if isinstance(p, str) else {"AWS::AccountId": ctx.where.account, "AWS::Region": ctx.where.region}[p["Ref"]]
        for p in parts
    )
    bucket, _, prefix = text.removeprefix("s3://").partition("/")
    return bucket, prefix


# ------------------------------------------------------------------------------------------- asynchronous inference
# config/examples/production.yaml's summarize-async endpoint (invocation.mode async) in prod: not part of the
# pipeline example, so its template comes from the session's production synth (shared with test_async_inference.py).

ASYNC_CONFIG, ASYNC_STACK = "config/examples/production.yaml", "llm-endpoints-prod-summarize-async"


@pytest.fixture(scope="module")
def async_ctx(synth) -> StackContext:
    env = load_config(ROOT / ASYNC_CONFIG, "prod").environment
    return StackContext(synth(ASYNC_CONFIG, "prod").templates[ASYNC_STACK], ASYNC_STACK, Where(env.account, env.region))


@pytest.fixture(scope="module")
def production_contexts(synth) -> dict[str, StackContext]:
    """Every stack of config/examples/production.yaml in prod, whose artifact bucket is SSE-KMS (bucket_key: create)."""
    env = load_config(ROOT / ASYNC_CONFIG, "prod").environment
    return {
        name: StackContext(template, name, Where(env.account, env.region))
        for name, template in synth(ASYNC_CONFIG, "prod").templates.items()
    }


def _resolved(value: Any, ctx: StackContext) -> str:
    """A template string (Fn::Join of literals and pseudo parameters) as CloudFormation would resolve it."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_resolved(p, ctx) for p in parts)
    pseudo = {
        "AWS::AccountId": ctx.where.account,
        "AWS::Region": ctx.where.region,
        "AWS::Partition": ctx.where.partition,
    }
    return pseudo[value["Ref"]]


def _async_output_config(ctx: StackContext) -> tuple[str, str]:
    _, config = ctx.find("AWS::SageMaker::EndpointConfig")
    output = config["Properties"]["AsyncInferenceConfig"]["OutputConfig"]
    return _resolved(output["S3OutputPath"], ctx), _resolved(output["S3FailurePath"], ctx)


def _async_function_environment(ctx: StackContext, handler: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Set an async endpoint stack's function's environment as CloudFormation resolves it; returns its role's id."""
    _, fn = ctx.find("AWS::Lambda::Function", lambda r: r["Properties"]["Handler"] == handler)
    for key, value in fn["Properties"]["Environment"]["Variables"].items():
        monkeypatch.setenv(key, ctx.stack_name if value == {"Ref": "AWS::StackName"} else _resolved(value, ctx))
    return fn["Properties"]["Role"]["Fn::GetAtt"][0]


def _as_sagemaker_writes(moto_env, ctx: StackContext) -> Callable[[Any], None]:
    """Queue one answer in moto and make it appear where SageMaker writes it: moto puts it into a bucket of its own
    (moto/sagemakerruntime/models.py); SageMaker writes under the endpoint config's S3OutputPath ("<S3OutputPath>/
    <file>", async-inference-check-predictions). The answer is copied there (with setup credentials, not recorded) and
    the call's answer corrected to name it, as deploy_endpoint_stack corrects ListStackResources."""
    where = ctx.where
    setup = account_session(where.account, where.region).client("s3")
    setup.create_bucket(Bucket=artifact_bucket_name("llm-endpoints", "prod", where.account, where.region))
    moto_env.set_async_results([(False, GOOD)], account=where.account, region=where.region)
    output_path, failure_path = _async_output_config(ctx)

    def copy_answer(parsed: dict, **_: Any) -> None:
        source_bucket, source_key = parsed["OutputLocation"].removeprefix("s3://").split("/", 1)
        bucket, prefix = output_path.removeprefix("s3://").split("/", 1)
        key = f"{prefix}/{parsed['InferenceId']}.out"
        setup.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": source_bucket, "Key": source_key})
        parsed["OutputLocation"] = f"s3://{bucket}/{key}"
        parsed["FailureLocation"] = f"{failure_path}/{parsed['InferenceId']}-error.out"

    return lambda events: events.register("after-call.sagemaker-runtime.InvokeEndpointAsync", copy_answer)


ASYNC_CLIENT_ACTIONS = {"s3:PutObject", "sagemaker:InvokeEndpointAsync", "s3:ListBucket", "s3:GetObject"}
# The artifact bucket of production.yaml's prod is SSE-KMS: the payload upload and the answer's read use its key.
KMS_CLIENT_ACTIONS = {"kms:GenerateDataKey", "kms:Decrypt"}


def _beyond_this_endpoint(where: Where) -> list[Need]:
    """Calls an async client of summarize-async must not be able to make: the model artifacts, another endpoint's
    results, writing answers, the real-time InvokeEndpoint."""
    bucket = f"arn:aws:s3:::{artifact_bucket_name('llm-endpoints', 'prod', where.account, where.region)}"
    return [
        Need("s3:GetObject", f"{bucket}/models/summarize-async/{'0' * 64}/config.json", "not granted"),
        Need("s3:GetObject", f"{bucket}/async/prod-chat-vllm/output/x.out", "not granted"),
        Need("s3:PutObject", f"{bucket}/async/prod-summarize-async/output/x.out", "not granted"),
        Need("s3:ListBucket", bucket, "not granted", {"s3:prefix": "async/prod-chat-vllm/output/x.out"}),
        Need(
            "sagemaker:InvokeEndpoint",
            f"arn:aws:sagemaker:{where.region}:{where.account}:endpoint/prod-summarize-async",
            "not granted",
        ),
    ]


def test_async_invoke_lambda_role_allows_every_call_of_submit_and_fetch(
    moto_env, async_ctx, production_contexts, monkeypatch
):
    """The invoke function of an async endpoint (lambda/invoke's async_handler: endpoint_runtime/async_invoke.py):
    a submit (upload + InvokeEndpointAsync), then a pending and a completed result read, each with the bucket's
    KMS key (SSE-KMS)."""
    from endpoint_runtime import async_invoke

    ctx, where = async_ctx, async_ctx.where
    role = _async_function_environment(ctx, "invoke/handler.async_handler", monkeypatch)
    fix = _as_sagemaker_writes(moto_env, ctx)
    output_path, _ = _async_output_config(ctx)
    key = set_lambda_credentials(monkeypatch, account_session(where.account, where.region))
    handler = lambda_entry("invoke/handler.async_handler")  # the function's entry, as the template names it
    async_invoke.reset_clients()
    try:
        with recording(monkeypatch, fix) as rec:
            submitted = handler({"inputs": "Summarize: a fox.", "parameters": {"max_new_tokens": 8}})
            assert submitted["statusCode"] == 202, submitted
            locations = {
                k: v for k, v in json.loads(submitted["body"]).items() if k in ("output_location", "failure_location")
            }
            pending = handler({"output_location": f"{output_path}/not-yet.out"})
            done = handler(locations)
    finally:
        async_invoke.reset_clients()
    assert json.loads(pending["body"]) == {"status": "pending"}
    assert done["statusCode"] == 200 and json.loads(done["body"])["output"] == GOOD, done
    assert rec.calls and rec.signed_by(key) == rec.calls, "every call is made with the function's credentials"
    needs = principal_needs(rec.calls, where, encrypted_locations(*production_contexts.values()))
    assert actions(needs) == ASYNC_CLIENT_ACTIONS | KMS_CLIENT_ACTIONS
    policy = role_policy(ctx, role)
    assert missing(policy, needs) == []
    beyond = _beyond_this_endpoint(where)
    assert missing(policy, beyond) == sorted(str(n) for n in beyond)


def test_async_smoke_lambda_role_allows_every_call_of_the_smoke_test(
    moto_env, async_ctx, production_contexts, monkeypatch
):
    """The smoke function of an async endpoint: the stack checks, then the prompt submitted as a client does and its
    answer read from the output folder (endpoint_runtime/smoke.py `_answer_async`)."""
    ctx, where = async_ctx, async_ctx.where
    role = _async_function_environment(ctx, "smoke/handler.handler", monkeypatch)
    fixes = (
        deploy_endpoint_stack(account_session(where.account, where.region), ctx),
        _as_sagemaker_writes(moto_env, ctx),
    )
    key = set_lambda_credentials(monkeypatch, account_session(where.account, where.region))
    with recording(monkeypatch, *fixes) as rec:
        result = lambda_entry("smoke/handler.handler")({}, None)
    assert result["ok"], result["failures"]  # every check ran: the recorded calls are the whole code path
    assert rec.calls and rec.signed_by(key) == rec.calls
    needs = principal_needs(rec.calls, where, encrypted_locations(*production_contexts.values()))
    assert actions(needs) == {
        "cloudformation:DescribeStacks",
        "cloudformation:ListStackResources",
        "sagemaker:DescribeEndpoint",
        *ASYNC_CLIENT_ACTIONS,
        *KMS_CLIENT_ACTIONS,
    }
    policy = role_policy(ctx, role)
    assert missing(policy, needs) == []
    beyond = _beyond_this_endpoint(where)
    assert missing(policy, beyond) == sorted(str(n) for n in beyond)


def test_execution_role_allows_what_sagemaker_does_for_async_requests(async_ctx):
    """SageMaker, with the execution role, reads each request's payload from the input folder and writes the answer
    or the failure (multipart for large ones) under S3OutputPath / S3FailurePath (async-inference-create-endpoint-
    prerequisites: s3:GetObject, s3:PutObject, s3:AbortMultipartUpload; sns:Publish is asserted on the template in
    tests/stacks/test_async_inference.py: the topics' ARNs are generated at deploy time)."""
    ctx = async_ctx
    _, model = ctx.find("AWS::SageMaker::Model")
    policy = role_policy(ctx, model["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0])
    output_path, failure_path = _async_output_config(ctx)
    _, invoke_fn = ctx.find(
        "AWS::Lambda::Function", lambda r: r["Properties"]["Handler"] == "invoke/handler.async_handler"
    )
    input_path = _resolved(invoke_fn["Properties"]["Environment"]["Variables"]["INPUT_LOCATION"], ctx)
    arn = lambda uri: "arn:aws:s3:::" + uri.removeprefix("s3://")
    needs = [
        Need("s3:GetObject", arn(f"{input_path}/abc.json"), "the request payload"),
        Need("s3:PutObject", arn(f"{output_path}/abc.out"), "the answer"),
        Need("s3:AbortMultipartUpload", arn(f"{output_path}/abc.out"), "a failed multipart answer"),
        Need("s3:PutObject", arn(f"{failure_path}/abc-error.out"), "the failure"),
    ]
    assert missing(policy, needs) == []
    wrong = [
        Need("s3:PutObject", arn(f"{input_path}/abc.json"), "not granted"),
        Need("s3:PutObject", arn(output_path.replace("summarize-async", "chat-vllm") + "/abc.out"), "not granted"),
    ]
    assert missing(policy, wrong) == sorted(str(n) for n in wrong)


# ------------------------------------------------------------------------------------------- SSE-KMS, every role
# The static half of the KMS check: every role of every stack, whether or not its code runs here.

OUTPUT_KEY = "arn:aws:kms:us-east-1:111122223333:key/0f0e0d0c-0b0a-0908-0706-050403020100"
GIVEN_BUCKET_KEY = "arn:aws:kms:us-east-1:111122223333:key/1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809"


def _role_policies(ctx: StackContext) -> dict[str, Policy]:
    """Every role's identity policy (inline and attached; AWS managed policies grant no KMS use of our keys)."""
    out = {}
    for lid, r in ctx.resources.items():
        if r["Type"] == "AWS::IAM::Role":
            statements = [
                st for pol in r["Properties"].get("Policies", []) for st in pol["PolicyDocument"]["Statement"]
            ]
            for other in ctx.resources.values():
                if other["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") and {"Ref": lid} in other[
                    "Properties"
                ].get("Roles", []):
                    statements += other["Properties"]["PolicyDocument"]["Statement"]
            out[lid] = Policy(statements, ctx, f"{ctx.stack_name}/{lid}")
    return out


def _without_kms(policy: Policy) -> Policy:
    return Policy([st for st in policy.statements if "kms:" not in json.dumps(st.get("Action"))], policy.ctx, "no kms")


def _sweep(contexts: Mapping[str, StackContext]) -> tuple[list[str], set[str]]:
    """(gaps, the roles that hold at least one SSE-KMS object grant) over every role of `contexts`."""
    encrypted = encrypted_locations(*contexts.values())
    gaps, holders = [], set()
    for ctx in contexts.values():
        for lid, policy in _role_policies(ctx).items():
            gaps += [f"{ctx.stack_name}/{lid}: {g}" for g in kms_gaps(policy, encrypted)]
            if kms_gaps(_without_kms(policy), encrypted):  # it writes or reads SSE-KMS objects
                holders.add(f"{ctx.stack_name}/{lid}")
    return gaps, holders


def test_every_role_may_use_the_key_of_every_sse_kms_object_it_may_write_or_read(production_contexts):
    """config/examples/production.yaml (prod): the artifact bucket is SSE-KMS. The roles with object grants there
    (every execution role, the invoke and smoke functions of the async endpoint) each may use its key, through S3."""
    gaps, holders = _sweep(production_contexts)
    assert gaps == []
    stacks = {h.split("/")[0] for h in holders}
    assert stacks == {f"llm-endpoints-prod-{name}" for name in ("chat-vllm", "summarize-async", "assist-ic")}
    async_roles = {h for h in holders if h.startswith("llm-endpoints-prod-summarize-async/")}
    # the execution role, the invoke function's, the smoke function's, the artifact check's (reads the manifest), the
    # smoke check custom resource's (stacks/smoke_check.py: invokes the endpoint, whose async answers sit in the bucket)
    assert len(async_roles) == 5, async_roles


@pytest.fixture(scope="module")
def pipeline_async_stack(tmp_path_factory) -> dict[str, StackContext]:
    """summarize-async deployed by a pipeline (its smoke function, whose role LlmEndpoint.grant_smoke_test gives what
    the smoke test calls; the artifacts stack's publisher role), with an async_output_key and the bucket key given by ARN: the
    key cases production.yaml lacks. The two stacks synthesized alone (no cdk-nag: the grants are what is checked)."""
    import aws_cdk as cdk
    import yaml
    from helpers import cdk_context

    from stacks import BucketKeyRef, add_artifact_stack
    from stacks.endpoint_stack import EndpointStack
    from stacks.trusted_pipeline import TrustedPipeline

    raw = yaml.safe_load((ROOT / ASYNC_CONFIG).read_text())
    raw["environments"]["prod"]["encryption"] = {"bucket_key": GIVEN_BUCKET_KEY}
    raw["endpoints"] = [e for e in raw["endpoints"] if e["name"] == "summarize-async"]
    raw["endpoints"][0]["encryption"] = {"async_output_key": OUTPUT_KEY}
    config = tmp_path_factory.mktemp("pipeline-async") / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    environment_plan = load_config(config, "prod", build_root=config.parent / "no-build")
    plan = environment_plan.plan("summarize-async")
    app = cdk.App(context=cdk_context(), outdir=str(config.parent / "cdk.out"))
    stack = EndpointStack(
        app,
        plan.stack_name,
        plan=plan,
        image_repository=environment_plan.image_repository,
        bucket_key=BucketKeyRef.of(environment_plan),
        allow_unbuilt=True,
        env={"account": "111122223333", "region": "us-east-1"},
    )
    artifacts = add_artifact_stack(
        app, environment_plan, trusted_pipeline=TrustedPipeline("111111111111", "x-model-build")
    )
    assembly, where = app.synth(), Where("111122223333", "us-east-1")
    return {
        s.stack_name: StackContext(assembly.get_stack_by_name(s.stack_name).template, s.stack_name, where)
        for s in (stack, artifacts)
    }


def test_smoke_role_of_an_async_endpoint_may_use_both_keys(pipeline_async_stack):
    """The smoke function's role uploads the prompt under the bucket key (given by ARN) and reads the answer
    SageMaker encrypted with the async output key; the invoke function likewise."""
    ctx = pipeline_async_stack["llm-endpoints-prod-summarize-async"]
    gaps, holders = _sweep(pipeline_async_stack)
    assert gaps == []
    _, smoke_fn = ctx.find("AWS::Lambda::Function", lambda r: r["Properties"]["Handler"] == "smoke/handler.handler")
    smoke_lid = smoke_fn["Properties"]["Role"]["Fn::GetAtt"][0]
    assert f"{ctx.stack_name}/{smoke_lid}" in holders
    policy = role_policy(ctx, smoke_lid)
    output, _ = _async_output_config(ctx)
    answer = Call(
        "s3",
        "GetObject",
        {"Bucket": output.removeprefix("s3://").split("/")[0], "Key": output.split("/", 3)[3] + "/abc.out"},
    )
    encrypted = encrypted_locations(*pipeline_async_stack.values())
    needs = kms_needs(answer, ctx.where, encrypted)
    assert [(n.action, n.resource) for n in needs] == [("kms:Decrypt", OUTPUT_KEY)]
    upload = Call(
        "s3", "PutObject", {"Bucket": answer.params["Bucket"], "Key": "async/prod-summarize-async/input/x.json"}
    )
    needs += kms_needs(upload, ctx.where, encrypted)
    assert [(n.action, n.resource) for n in needs][1:] == [("kms:GenerateDataKey", GIVEN_BUCKET_KEY)]
    assert missing(policy, needs) == []
    # execution role, invoke, smoke and artifact-check functions
    assert len(holders) >= 4, holders


def test_kms_check_reports_a_client_without_the_key(production_contexts, async_ctx):
    """What the review found (B1): the async invoke role with its S3 grants and no kms:* use. Its upload and its
    read are reported, the missing key named."""
    encrypted = encrypted_locations(*production_contexts.values())
    _, fn = async_ctx.find(
        "AWS::Lambda::Function", lambda r: r["Properties"]["Handler"] == "invoke/handler.async_handler"
    )
    policy = role_policy(async_ctx, fn["Properties"]["Role"]["Fn::GetAtt"][0])
    reported = kms_gaps(_without_kms(policy), encrypted)
    assert [r.split(" on ")[0] for r in reported] == ["kms:Decrypt", "kms:Decrypt", "kms:GenerateDataKey"]
    assert all(":key/" in r and "kms:ViaService" in r for r in reported)
    assert kms_gaps(policy, encrypted) == []


# ======================================================================================================= the checker itself


def _smoke_role_policy(envs: Mapping[str, Env]) -> tuple[Policy, list[Need]]:
    """The prod smoke function's role policy and what one smoke test needs (the calls a run records)."""
    env = envs["prod"]
    ctx = env.endpoint_stack
    _, fn = ctx.find("AWS::Lambda::Function", lambda r: r["Properties"]["Handler"] == "smoke/handler.handler")
    lid = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    calls = [
        Call("cloudformation", "DescribeStacks", {"StackName": ctx.stack_name}),
        Call("cloudformation", "ListStackResources", {"StackName": ctx.stack_name}),
        Call("sagemaker", "DescribeEndpoint", {"EndpointName": f"prod-{ENDPOINT}"}),
        Call("sagemaker-runtime", "InvokeEndpoint", {"EndpointName": f"prod-{ENDPOINT}", "Body": b"{}"}),
        Call("sts", "GetCallerIdentity", {}),
    ]
    return role_policy(ctx, lid), principal_needs(calls, ctx.where)


def test_checker_reports_an_action_removed_from_a_copy_of_the_policy(envs):
    policy, needs = _smoke_role_policy(envs)
    assert missing(policy, needs) == []
    statements = copy.deepcopy(list(policy.statements))
    [stack_statement] = [s for s in statements if "cloudformation:ListStackResources" in s["Action"]]
    stack_statement["Action"] = [a for a in stack_statement["Action"] if a != "cloudformation:ListStackResources"]
    reported = missing(Policy(statements, policy.ctx, policy.name), needs)
    assert reported == [
        "cloudformation:ListStackResources on arn:aws:cloudformation:us-east-1:444455556666:stack/"
        f"llm-endpoints-prod-gptj-fastload/{STACK_ID_SUFFIX} (for cloudformation ListStackResources)"
    ]


def test_checker_reports_the_old_smoke_role_grant(envs):
    """The grant that kept prod from being promoted: DescribeStackResources, while the code calls DescribeStacks and
    ListStackResources."""
    policy, needs = _smoke_role_policy(envs)
    old = [
        {
            "Effect": "Allow",
            "Action": ["sagemaker:InvokeEndpoint", "sagemaker:DescribeEndpoint"],
            "Resource": f"arn:aws:sagemaker:us-east-1:444455556666:endpoint/prod-{ENDPOINT}",
        },
        {
            "Effect": "Allow",
            "Action": "cloudformation:DescribeStackResources",
            "Resource": f"arn:aws:cloudformation:us-east-1:444455556666:stack/{policy.ctx.stack_name}/*",
        },
    ]
    reported = missing(Policy(old, policy.ctx, "old"), needs)
    assert [r.split(" on ")[0] for r in reported] == [
        "cloudformation:DescribeStacks",
        "cloudformation:ListStackResources",
    ]


def test_checker_reports_wrong_resources_conditions_and_denies(envs):
    policy, _ = _smoke_role_policy(envs)
    where = policy.ctx.where
    other = needs_of(Call("sagemaker-runtime", "InvokeEndpoint", {"EndpointName": "prod-other"}), where)
    assert missing(policy, other) == [str(other[0])]
    other_stack = needs_of(Call("cloudformation", "DescribeStacks", {"StackName": "llm-endpoints-prod-other"}), where)
    assert missing(policy, other_stack) == [str(other_stack[0])]
    # A condition the request does not meet, and an explicit Deny, both refuse.
    listing = Need("s3:ListBucket", "arn:aws:s3:::b", "t", {"s3:prefix": "models/other/x"})
    conditioned = {
        "Effect": "Allow",
        "Action": "s3:ListBucket",
        "Resource": "arn:aws:s3:::b",
        "Condition": {"StringLike": {"s3:prefix": ["models/mine/*"]}},
    }
    assert missing(Policy([conditioned], policy.ctx, "c"), [listing]) == [str(listing)]
    assert (
        missing(
            Policy([conditioned], policy.ctx, "c"),
            [Need("s3:ListBucket", "arn:aws:s3:::b", "t", {"s3:prefix": "models/mine/x"})],
        )
        == []
    )
    deny = {"Effect": "Deny", "Action": "s3:*", "Resource": "*"}
    assert missing(Policy([conditioned, deny], policy.ctx, "d"), [listing]) == [str(listing)]


def test_trust_check_names_only_the_step_role(envs):
    env = envs["prod"]
    ctx, lid = env.role_named(f"arn:aws:iam::{env.where.account}:role/llm-endpoints-prod-{ENDPOINT}-slo")
    pipeline = f"arn:aws:iam::{env.pipeline.where.account}:role"
    assert trusts(ctx, lid, f"{pipeline}/llm-endpoints-prod-{ENDPOINT}-slo-cb")
    assert not trusts(ctx, lid, f"{pipeline}/llm-endpoints-prod-model-build")  # another role of the pipeline account
    assert not trusts(ctx, lid, f"arn:aws:iam::999999999999:role/llm-endpoints-prod-{ENDPOINT}-slo-cb")


def test_step_secrets_need_get_secret_value_on_the_secret():
    """The model build step's HF_TOKEN (pipeline.build.hf_token) arrives as a SECRETS_MANAGER variable; CDK grants
    GetSecretValue on the secret's name with Secrets Manager's six-character suffix (secret:NAME-??????)."""
    where = Where("111111111111", "us-east-1")
    arn = "arn:aws:secretsmanager:us-east-1:111111111111:secret:hf/token-AbC123"
    project = {
        "Environment": {
            "EnvironmentVariables": [
                {"Name": "HF_TOKEN", "Type": "SECRETS_MANAGER", "Value": "hf/token:token"},
                {"Name": "OTHER", "Type": "SECRETS_MANAGER", "Value": f"{arn}:key::"},
                {"Name": "AWS_PROFILE", "Type": "PLAINTEXT", "Value": "publisher"},
            ]
        }
    }
    needs = step_secret_needs(project, {}, where)
    assert [n.resource for n in needs] == [f"{arn[:-6]}AbCdEf", arn]
    ctx = StackContext({"Resources": {}}, "s", where)
    cdk_style = {
        "Effect": "Allow",
        "Action": "secretsmanager:GetSecretValue",
        "Resource": {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, ":secretsmanager:us-east-1:111111111111:secret:hf/token-??????"],
            ]
        },
    }
    assert missing(Policy([cdk_style], ctx, "cdk"), needs) == []
    assert missing(Policy([], ctx, "none"), needs[:1]) == [str(needs[0])]


def test_mapping_refuses_an_operation_it_does_not_know():
    where = Where("111111111111", "us-east-1")
    with pytest.raises(KeyError, match="no IAM mapping for s3 DeleteObject"):
        needs_of(Call("s3", "DeleteObject", {"Bucket": "b", "Key": "k"}), where)
    with pytest.raises(KeyError, match="no IAM mapping for sagemaker UpdateEndpoint"):
        needs_of(Call("sagemaker", "UpdateEndpoint", {"EndpointName": "e"}), where)
    assert [str(n) for n in needs_of(Call("s3", "HeadObject", {"Bucket": "b", "Key": "k"}), where)] == [
        "s3:GetObject on arn:aws:s3:::b/k (for s3 HeadObject)",
        "s3:ListBucket on arn:aws:s3:::b (for s3 HeadObject (404 for a missing key))",
    ]
    assert needs_of(Call("sts", "GetCallerIdentity", {}), where) == []


# ------------------------------------------------------------------------------------------- the streaming front door

STREAM_CONFIG = "config/examples/production.yaml"  # chat-vllm has streaming: {enabled: true}
STREAM_KEY = "AKIASTREAMFUNCTION01"


class _ResponseStream(BaseHTTPRequestHandler):
    """SageMaker's InvokeEndpointWithResponseStream answer on loopback (moto implements no such operation): a token
    and the summary line as event-stream PayloadParts (local_runtime/event_stream.py, what boto3 decodes)."""

    def do_POST(self) -> None:
        from local_runtime import event_stream

        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = event_stream.payload_part(b'{"token": {"text": " Paris"}}\n') + event_stream.payload_part(
            b'{"generated_text": " Paris"}\n'
        )
        self.send_response(200)
        self.send_header("Content-Type", event_stream.CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("endpoint, component", [("chat-vllm", None), ("assist-ic", "prod-assist-ic-ic")])
def test_stream_lambda_role_allows_every_call_of_the_stream_function(synth, monkeypatch, endpoint, component):
    """The stream function (handler stream/run.sh -> lambda/stream/app.py -> endpoint_runtime/stream.py
    `handle_request`) with its environment from the production example's stacks in prod: chat-vllm (a model on the
    variant) and assist-ic (an inference component, which each stream request names)."""
    from endpoint_runtime import stream

    env = load_config(ROOT / STREAM_CONFIG, "prod").environment
    stack_name = f"llm-endpoints-prod-{endpoint}"
    ctx = StackContext(synth(STREAM_CONFIG, "prod").templates[stack_name], stack_name, Where(env.account, env.region))
    role = function_environment(ctx, "stream/run.sh", monkeypatch)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ResponseStream)
    serve_in_thread(server)
    for key, value in {
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": f"http://127.0.0.1:{server.server_address[1]}",
        "AWS_ACCESS_KEY_ID": STREAM_KEY,
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": env.region,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    stream.reset_client()
    try:
        with recording(monkeypatch) as rec:
            status, _, body = stream.handle_request("POST", b'{"inputs": "The capital of France is"}')
            lines = [json.loads(line) for line in body]
    finally:
        stream.reset_client()
        server.shutdown()
        server.server_close()
    assert status == 200 and lines[-1]["generated_text"] == " Paris", lines
    assert rec.calls and rec.signed_by(STREAM_KEY) == rec.calls
    needs = principal_needs(rec.calls, ctx.where)
    assert actions(needs) == {"sagemaker:InvokeEndpoint"}  # InvokeEndpointWithResponseStream's action
    [call] = rec.calls
    assert call.operation == "InvokeEndpointWithResponseStream"
    assert call.params.get("InferenceComponentName") == component
    assert len(needs) == (2 if component else 1)  # the endpoint, and the component when one is named
    assert missing(role_policy(ctx, role), needs) == []


# ------------------------------------------------------------------------------------------- inference components
# config/examples/production.yaml's assist-ic endpoint (hosting.mode inference-components) in prod: the invoke
# function names the component (INFERENCE_COMPONENT_NAME from the template).

IC_CONFIG, IC_STACK = "config/examples/production.yaml", "llm-endpoints-prod-assist-ic"


def test_invoke_lambda_role_allows_invoking_the_inference_component(moto_env, synth, monkeypatch):
    env = load_config(ROOT / IC_CONFIG, "prod").environment
    ctx = StackContext(synth(IC_CONFIG, "prod").templates[IC_STACK], IC_STACK, Where(env.account, env.region))
    role = function_environment(ctx, "invoke/handler.handler", monkeypatch)
    moto_env.set_invoke_results([GOOD], account=ctx.where.account)
    key = set_lambda_credentials(monkeypatch, account_session(ctx.where.account, ctx.where.region))
    invoke.reset_client()
    try:
        with recording(monkeypatch) as rec:
            answer = invoke.handler({"inputs": "The capital of France is", "parameters": {"max_new_tokens": 8}}, None)
    finally:
        invoke.reset_client()
    assert answer["statusCode"] == 200, answer
    assert rec.calls and rec.signed_by(key) == rec.calls
    [call] = rec.calls
    assert call.params["InferenceComponentName"] == "prod-assist-ic-ic"
    needs = principal_needs(rec.calls, ctx.where)
    base = f"arn:aws:sagemaker:{ctx.where.region}:{ctx.where.account}"
    assert [n.resource for n in needs] == [
        f"{base}:endpoint/prod-assist-ic",
        f"{base}:inference-component/prod-assist-ic-ic",
    ]
    policy = role_policy(ctx, role)
    assert missing(policy, needs) == []
    # The checker holds a grant on the endpoint alone to be short of the component, and this role to no other one.
    endpoint_only = [{"Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": needs[0].resource}]
    assert missing(Policy(endpoint_only, ctx, "endpoint only"), needs) == [str(needs[1])]
    other = Need("sagemaker:InvokeEndpoint", f"{base}:inference-component/prod-chat-vllm-ic", "not granted")
    assert missing(policy, [other]) == [str(other)]


def test_smoke_lambda_role_allows_checking_and_invoking_the_inference_component(moto_env, synth, monkeypatch):
    """The smoke function of assist-ic: the stack checks, the `component` check (DescribeInferenceComponent, which
    moto lacks: answered before sending, after the call is signed and recorded) and the invocation naming it."""
    env = load_config(ROOT / IC_CONFIG, "prod").environment
    ctx = StackContext(synth(IC_CONFIG, "prod").templates[IC_STACK], IC_STACK, Where(env.account, env.region))
    role = function_environment(ctx, "smoke/handler.handler", monkeypatch)
    session = account_session(ctx.where.account, ctx.where.region)
    fix = deploy_endpoint_stack(session, ctx)
    [model] = [
        r["PhysicalResourceId"].rsplit("/", 1)[-1]
        for r in session.client("cloudformation").list_stack_resources(StackName=IC_STACK)["StackResourceSummaries"]
        if r["ResourceType"] == "AWS::SageMaker::Model"
    ]
    component = os.environ["INFERENCE_COMPONENT_NAME"]

    def describe_component(request: Any, **_: Any) -> Any:
        body = json.dumps(
            {
                "InferenceComponentName": component,
                "InferenceComponentStatus": "InService",
                "InferenceComponentArn": f"arn:aws:sagemaker:{ctx.where.region}:{ctx.where.account}:inference-component/{component}",
                "EndpointName": "prod-assist-ic",
                "EndpointArn": "arn:aws:sagemaker:x:1:endpoint/prod-assist-ic",
                "Specification": {"ModelName": model},
                "CreationTime": 0,
                "LastModifiedTime": 0,
            }
        ).encode()
        return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.1"}, _Body(body))

    def answer_component(events: Any) -> None:
        events.register("before-send.sagemaker.DescribeInferenceComponent", describe_component)

    moto_env.set_invoke_results([GOOD], account=ctx.where.account)
    key = set_lambda_credentials(monkeypatch, session)
    # The chat check goes through SageMaker's OpenAI route, which moto lacks: the route answers here, and gets a
    # bearer token made from the function's own credentials (its grant: tests/stacks/test_openai_route.py).
    from endpoint_runtime import openai_route

    tokens: list[str] = []

    def route_answers(url: str, token: str, request: dict, timeout_s: float = 60) -> tuple[int, Any]:
        tokens.append(token)
        return 200, {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}],
        }

    monkeypatch.setattr(openai_route, "post_chat", route_answers)
    with recording(monkeypatch, fix, answer_component) as rec:
        result = lambda_entry("smoke/handler.handler")({}, None)
    assert result["ok"], result["failures"]
    assert tokens and key in base64.b64decode(tokens[0].removeprefix(openai_route.TOKEN_PREFIX)).decode()
    assert rec.calls and rec.signed_by(key) == rec.calls
    needs = principal_needs(rec.calls, ctx.where)
    assert actions(needs) == {
        "cloudformation:DescribeStacks",
        "cloudformation:ListStackResources",
        "sagemaker:DescribeEndpoint",
        "sagemaker:DescribeInferenceComponent",
        "sagemaker:InvokeEndpoint",
    }
    policy = role_policy(ctx, role)
    assert missing(policy, needs) == []
    other = Need(
        "sagemaker:DescribeInferenceComponent",
        f"arn:aws:sagemaker:{ctx.where.region}:{ctx.where.account}:inference-component/prod-chat-vllm-ic",
        "not granted",
    )
    assert missing(policy, [other]) == [str(other)]


# ------------------------------------------------------------------------------------------------ LoRA adapters
# config/examples/lmi-vllm-lora.yaml's llama-lora (dev): two adapter inference components on the base component. A
# request naming an adapter ({"adapter": "sql"}) invokes that adapter's component; the smoke test describes and
# invokes each one.

LORA_CONFIG, LORA_STACK = "config/examples/lmi-vllm-lora.yaml", "llm-endpoints-dev-llama-lora"
LORA_ADAPTERS = {"sql": "dev-llama-lora-sql", "support": "dev-llama-lora-support"}


def test_invoke_lambda_role_allows_invoking_each_adapter_component(moto_env, synth, monkeypatch):
    env = load_config(ROOT / LORA_CONFIG, "dev").environment
    ctx = StackContext(synth(LORA_CONFIG, "dev").templates[LORA_STACK], LORA_STACK, Where(env.account, env.region))
    role = function_environment(ctx, "invoke/handler.handler", monkeypatch)
    moto_env.set_invoke_results([GOOD, GOOD], account=ctx.where.account)
    key = set_lambda_credentials(monkeypatch, account_session(ctx.where.account, ctx.where.region))
    invoke.reset_client()
    try:
        with recording(monkeypatch) as rec:
            answers = [
                invoke.handler({"inputs": "Count the rows", "parameters": {"max_new_tokens": 8}, "adapter": name}, None)
                for name in LORA_ADAPTERS
            ]
    finally:
        invoke.reset_client()
    assert [a["statusCode"] for a in answers] == [200, 200], answers
    assert rec.calls and rec.signed_by(key) == rec.calls
    assert [c.params["InferenceComponentName"] for c in rec.calls] == list(LORA_ADAPTERS.values())
    needs = principal_needs(rec.calls, ctx.where)
    base = f"arn:aws:sagemaker:{ctx.where.region}:{ctx.where.account}"
    assert {n.resource for n in needs} == {
        f"{base}:endpoint/dev-llama-lora",
        *(f"{base}:inference-component/{c}" for c in LORA_ADAPTERS.values()),
    }
    policy = role_policy(ctx, role)
    assert missing(policy, needs) == []
    # A grant on the endpoint and the base component is short of the adapters.
    base_only = [
        {
            "Effect": "Allow",
            "Action": "sagemaker:InvokeEndpoint",
            "Resource": [f"{base}:endpoint/dev-llama-lora", f"{base}:inference-component/dev-llama-lora-ic"],
        }
    ]
    assert len(missing(Policy(base_only, ctx, "base only"), needs)) == 2


def test_smoke_lambda_role_allows_checking_and_invoking_each_adapter(moto_env, synth, monkeypatch):
    """The smoke function of llama-lora: the base component's checks, then DescribeInferenceComponent and an
    invocation for each adapter component (moto has no components: described before sending, after signing)."""
    env = load_config(ROOT / LORA_CONFIG, "dev").environment
    ctx = StackContext(synth(LORA_CONFIG, "dev").templates[LORA_STACK], LORA_STACK, Where(env.account, env.region))
    role = function_environment(ctx, "smoke/handler.handler", monkeypatch)
    session = account_session(ctx.where.account, ctx.where.region)
    fix = deploy_endpoint_stack(session, ctx)
    [model] = [
        r["PhysicalResourceId"].rsplit("/", 1)[-1]
        for r in session.client("cloudformation").list_stack_resources(StackName=LORA_STACK)["StackResourceSummaries"]
        if r["ResourceType"] == "AWS::SageMaker::Model"
    ]
    base_component = os.environ["INFERENCE_COMPONENT_NAME"]

    def describe_component(request: Any, **_: Any) -> Any:
        name = json.loads(request.body)["InferenceComponentName"]
        spec = {"ModelName": model} if name == base_component else {"BaseInferenceComponentName": base_component}
        body = json.dumps(
            {
                "InferenceComponentName": name,
                "InferenceComponentStatus": "InService",
                "InferenceComponentArn": f"arn:aws:sagemaker:{ctx.where.region}:{ctx.where.account}:inference-component/{name}",
                "EndpointName": "dev-llama-lora",
                "EndpointArn": "arn:aws:sagemaker:x:1:endpoint/dev-llama-lora",
                "Specification": spec,
                "CreationTime": 0,
                "LastModifiedTime": 0,
            }
        ).encode()
        return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.1"}, _Body(body))

    def answer_components(events: Any) -> None:
        events.register("before-send.sagemaker.DescribeInferenceComponent", describe_component)

    moto_env.set_invoke_results([GOOD, GOOD, GOOD], account=ctx.where.account)
    key = set_lambda_credentials(monkeypatch, session)
    with recording(monkeypatch, fix, answer_components) as rec:
        result = lambda_entry("smoke/handler.handler")({}, None)
    assert result["ok"], result["failures"]
    assert [c["name"] for c in result["checks"]][-2:] == ["adapter sql", "adapter support"]
    assert rec.calls and rec.signed_by(key) == rec.calls
    needs = principal_needs(rec.calls, ctx.where)
    components = {n.resource.rsplit("/", 1)[-1] for n in needs if ":inference-component/" in n.resource}
    assert components == {base_component, *LORA_ADAPTERS.values()}
    assert missing(role_policy(ctx, role), needs) == []


class _Body(io.BytesIO):
    """A urllib3-like raw body for botocore's AWSResponse."""

    def stream(self, *_args: Any, **_kwargs: Any) -> Iterator[bytes]:
        yield self.getvalue()


# ------------------------------------------------------------------------------------------- the SLO gate and benchmark


def test_pipeline_slo_gate_role_allows_every_call_of_model_build_slo_gate(moto_env, envs, monkeypatch, tmp_path):
    """The SLO gate step in prod (another account): its CodeBuild role assumes the endpoint stack's gate role, which
    runs `model_build slo-gate`: config/examples/pipeline.yaml's workload through InvokeEndpoint (hf-fastload does not
    stream), an earlier result read back and the new one kept in the artifact bucket."""
    import gc

    from model_build.cli import main

    env = envs["prod"]
    monkeypatch.chdir(ROOT)  # CodeBuild runs the commands in the source checkout
    monkeypatch.setattr("deployment.plan.BUILD_ROOT", tmp_path / "build")  # the gate's build/loadtest/ copy
    # The load test's full collection before its level pauses for seconds over this process's heap (jsii, torch);
    # in CodeBuild the gate is a process of its own. Nothing here is timed.
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    project, cb_role, cb_where = env.codebuild(f"SloGate-{ENDPOINT}")
    setup = account_session(env.where.account, env.where.region)
    bucket = artifact_bucket_name("llm-endpoints", env.name, env.where.account, env.where.region)
    setup.client("s3").create_bucket(Bucket=bucket)
    earlier = f"loadtest/{ENDPOINT}/{'ab' * 32}/20260101T000000000000Z.json"
    setup.client("s3").put_object(Bucket=bucket, Key=earlier, Body=json.dumps({"levels": []}).encode())
    moto_env.set_invoke_results([GOOD] * 24, account=env.where.account)  # 16 requests + 2 warm-up
    with codebuild_step(project, tmp_path, monkeypatch) as spec, recording(monkeypatch) as rec:
        [argv] = [a for c in spec["phases"]["build"]["commands"] for a in model_build_commands(c, "slo-gate")]
        assert main(argv) == 0, "the gate passes: every call of its code path was made"
    _check_codebuild_role(env, rec, project, spec, cb_role, cb_where)
    [(target, calls)] = rec.by_assumed_role().items()
    target_ctx, target_lid = env.role_named(target)
    assert target_ctx is env.endpoint_stack
    assert {(c.service, c.operation) for c in calls} == {
        ("sts", "GetCallerIdentity"),
        ("sagemaker-runtime", "InvokeEndpoint"),
        ("s3", "ListObjectsV2"),
        ("s3", "GetObject"),
        ("s3", "PutObject"),
    }
    needs = principal_needs(calls, target_ctx.where)
    assert missing(role_policy(target_ctx, target_lid), needs) == []
    # and no further: another endpoint, or another prefix of the bucket
    other = [
        Need("sagemaker:InvokeEndpoint", f"arn:aws:sagemaker:us-east-1:{env.where.account}:endpoint/prod-other", "t"),
        Need("s3:PutObject", f"arn:aws:s3:::{bucket}/models/{ENDPOINT}/x", "t"),
        Need("s3:ListBucket", f"arn:aws:s3:::{bucket}", "t", {"s3:prefix": "models/"}),
    ]
    assert missing(role_policy(target_ctx, target_lid), other) == sorted(str(n) for n in other)


BENCH_CONFIG, BENCH_STACK, BENCH_ENDPOINT = (
    "config/examples/production.yaml",
    "llm-endpoints-prod-chat-vllm",
    "chat-vllm",
)


def test_benchmark_caller_policy_allows_every_call_of_model_build_benchmark(moto_env, synth, monkeypatch, tmp_path):
    """`python -m model_build benchmark --wait` with the caller policy the stack creates: CreateAIBenchmarkJob passing
    the benchmark role, one DescribeAIBenchmarkJob. moto has neither operation: each is answered before sending,
    after it is signed and recorded."""
    from helpers import write_fake_manifest

    from model_build.cli import main

    env = load_config(ROOT / BENCH_CONFIG, "prod").environment
    ctx = StackContext(synth(BENCH_CONFIG, "prod").templates[BENCH_STACK], BENCH_STACK, Where(env.account, env.region))
    _, caller = ctx.find("AWS::IAM::ManagedPolicy")
    policy = Policy(caller["Properties"]["PolicyDocument"]["Statement"], ctx, "BenchmarkCallerPolicy")
    write_fake_manifest(tmp_path, BENCH_ENDPOINT, "lmi-vllm", "fp16")
    requests: list[dict] = []

    def answer(request: Any, **_: Any) -> AWSResponse:
        requests.append(json.loads(request.body))
        name = requests[0]["AIBenchmarkJobName"]
        arn = f"arn:aws:sagemaker:{env.region}:{env.account}:ai-benchmark-job/{name}"
        reply = (
            {"AIBenchmarkJobArn": arn}
            if len(requests) == 1
            else {**requests[0], "AIBenchmarkJobArn": arn, "AIBenchmarkJobStatus": "Completed", "CreationTime": 0}
        )
        return AWSResponse(
            request.url, 200, {"Content-Type": "application/x-amz-json-1.1"}, _Body(json.dumps(reply).encode())
        )

    def stand_in(events: Any) -> None:
        for op in ("CreateAIBenchmarkJob", "DescribeAIBenchmarkJob"):
            events.register(f"before-send.sagemaker.{op}", answer)

    key = set_lambda_credentials(monkeypatch, account_session(env.account, env.region))
    with recording(monkeypatch, stand_in) as rec:
        assert (
            main(
                [
                    "benchmark",
                    "--config",
                    BENCH_CONFIG,
                    "--env",
                    "prod",
                    "--endpoint",
                    BENCH_ENDPOINT,
                    "--build-root",
                    str(tmp_path),
                    "--wait",
                    "5",
                ]
            )
            == 0
        )
    assert rec.calls and rec.signed_by(key) == rec.calls
    assert [c.operation for c in rec.calls] == ["GetCallerIdentity", "CreateAIBenchmarkJob", "DescribeAIBenchmarkJob"]
    create = requests[0]
    assert create["RoleArn"] == f"arn:aws:iam::{env.account}:role/llm-endpoints-prod-{BENCH_ENDPOINT}-benchmark"
    assert (
        create["AIWorkloadConfigIdentifier"]
        == load_config(ROOT / BENCH_CONFIG, "prod").plan(BENCH_ENDPOINT).managed_benchmark.workload_config_name
    )
    assert create["OutputConfig"]["S3OutputLocation"].startswith(
        f"s3://llm-endpoints-prod-artifacts-{env.account}-{env.region}/loadtest/{BENCH_ENDPOINT}/{'ab' * 32}/managed/"
    )
    needs = principal_needs(rec.calls, ctx.where)
    assert actions(needs) == {"sagemaker:CreateAIBenchmarkJob", "sagemaker:DescribeAIBenchmarkJob", "iam:PassRole"}
    assert missing(policy, needs) == []
    other_role = Need("iam:PassRole", f"arn:aws:iam::{env.account}:role/llm-endpoints-prod-chat-vllm-smoke", "t")
    assert missing(policy, [other_role]) == [str(other_role)]


def test_benchmark_role_allows_what_the_job_needs_and_trusts_sagemaker(synth, tmp_path):
    """What the Developer Guide's benchmark page asks of the job's role ("grants SageMaker AI access to your endpoint
    and output bucket"; results in output.tar.gz at the output location): InvokeEndpoint on the endpoint and the
    output written under the job's location, the bucket key through S3; nothing else, and only SageMaker may assume
    it. Which calls the job really makes only an account shows (docs/facts.md)."""
    from helpers import write_fake_manifest

    from load_testing.benchmark import benchmark_request, job_name

    write_fake_manifest(tmp_path, BENCH_ENDPOINT, "lmi-vllm", "fp16")
    environment_plan = load_config(ROOT / BENCH_CONFIG, "prod", build_root=tmp_path)
    env = environment_plan.environment
    ctx = StackContext(synth(BENCH_CONFIG, "prod").templates[BENCH_STACK], BENCH_STACK, Where(env.account, env.region))
    lid, role = ctx.find("AWS::IAM::Role", lambda r: r["Properties"].get("RoleName", "").endswith("-benchmark"))
    # trusted on behalf of this account only (F9; the rule and its sources: tests/stacks/test_iam_trusts.py)
    [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    plan = environment_plan.plan(BENCH_ENDPOINT)
    output = benchmark_request(plan, account=env.account, region=env.region, partition="aws", name=job_name(plan))[
        "OutputConfig"
    ]["S3OutputLocation"]
    object_arn = "arn:aws:s3:::" + output.removeprefix("s3://") + "output.tar.gz"
    needs = [
        Need(
            "sagemaker:InvokeEndpoint", f"arn:aws:sagemaker:{env.region}:{env.account}:endpoint/prod-chat-vllm", "job"
        ),
        Need("s3:PutObject", object_arn, "job output"),
    ]
    policy = role_policy(ctx, lid)
    assert missing(policy, needs) == []
    granted = {a for s in policy.statements for a in _listed(s["Action"])}
    assert granted == {"sagemaker:InvokeEndpoint", "s3:PutObject", "kms:Decrypt", "kms:GenerateDataKey"}
    elsewhere = Need(
        "s3:PutObject", f"arn:aws:s3:::llm-endpoints-prod-artifacts-{env.account}-{env.region}/models/x", "t"
    )
    assert missing(policy, [elsewhere]) == [str(elsewhere)]
