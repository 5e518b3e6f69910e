"""The emulator's server: moto's, with Lambda functions that run and custom resources that answer.

`python -m local_emulator.server -H 127.0.0.1 -p PORT` (what moto_server.start runs) is `python -m moto.server` with
these changes, installed before the server starts:

- Invoke runs the function's deployed code (lambda_runner.py) instead of moto's Docker runner, and writes what it
  logged to the function's log group: LoggingConfig.LogGroup when the function names one, else /aws/lambda/<name>
  (what Lambda does: https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-loggroups.html).
- A custom resource (`Custom::*`, `AWS::CloudFormation::CustomResource`) gets CloudFormation's Create, Update and
  Delete requests (User Guide, "Custom resource request objects"), each answered through a ResponseURL the emulator
  serves itself. moto sends Create only, answers SUCCESS only, and goes on without waiting
  (moto/cloudformation/custom_model.py); here each request waits for the function's answer, as CloudFormation does.
- A FAILED answer fails the resource and the stack operation: the stack ends CREATE_FAILED or UPDATE_FAILED (with
  the function's Reason in the stack events), and `cdk deploy` reports the failure. What it does not do is roll back:
  moto implements no stack rollback, so the emulator ends where CloudFormation with rollback disabled ends
  (`--no-rollback`): resources created before the failure stay (docs/design/guards.md).
- What the CDK CLI asks to diagnose a failed deploy is answered (DescribeStackResources by logical ID, CloudTrail
  LookupEvents), where moto answered 500s that the CLI retried for a minute.
"""

from __future__ import annotations

import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

from . import lambda_runner

# How long a custom resource request waits for the answer after the function ended (an answer the function left to
# a process of its own): CloudFormation waits up to the resource's ServiceTimeout; the emulator does not wait for
# an answer that cannot come.
ANSWER_GRACE_S = 5


class CustomResourceFailed(Exception):
    """A custom resource answered FAILED (or not at all): CloudFormation fails the resource and the operation."""

    def __init__(self, logical_id: str, request_type: str, reason: str) -> None:
        super().__init__(f"{logical_id}: {request_type} failed: {reason}")
        self.logical_id, self.request_type, self.reason = logical_id, request_type, reason


class _Answers:
    """The ResponseURL server: custom resource answers PUT by the functions, by request id."""

    def __init__(self) -> None:
        self._answers: dict[str, dict] = {}
        self._arrived = threading.Condition()
        answers = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request_id = self.path.lstrip("/").split("?", 1)[0]
                try:
                    answer = json.loads(body)
                except ValueError:
                    answer = {"Status": "FAILED", "Reason": f"the answer is not JSON: {body[:200]!r}"}
                with answers._arrived:
                    answers._answers[request_id] = answer
                    answers._arrived.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def url(self, request_id: str) -> str:
        return f"http://127.0.0.1:{self.port}/{request_id}?local-emulator-response"

    def take(self, request_id: str, timeout_s: float) -> dict | None:
        with self._arrived:
            self._arrived.wait_for(lambda: request_id in self._answers, timeout=timeout_s)
            return self._answers.pop(request_id, None)


_answers: _Answers | None = None
_answers_lock = threading.Lock()


def answers() -> _Answers:
    global _answers
    with _answers_lock:
        if _answers is None:
            _answers = _Answers()
        return _answers


# ---------------------------------------------------------------------------------------------------------------
# Lambda: run the code


def _function_of(fn: Any) -> lambda_runner.Function:
    environment = {k: str(v) for k, v in (fn.environment_vars or {}).items()}
    return lambda_runner.Function(
        name=fn.function_name,
        arn=fn.function_arn,
        runtime=fn.run_time or "",
        handler=fn.handler or "",
        code=fn.code_bytes or b"",
        timeout_s=int(fn.timeout or lambda_runner.DEFAULT_TIMEOUT_S),
        memory_mb=int(fn.memory_size or 128),
        region=fn.region,
        environment=environment,
    )


def run_function(fn: Any, event: object, extra_env: dict[str, str] | None = None) -> lambda_runner.Invocation:
    """Invoke moto's function `fn` with `event` and keep its log lines in its log group."""
    try:
        invocation = lambda_runner.invoke(_function_of(fn), event, extra_env=extra_env)
    except lambda_runner.LambdaRunError as err:
        payload = json.dumps({"errorMessage": str(err), "errorType": "Runtime.InvalidEntrypoint"}).encode()
        invocation = lambda_runner.Invocation(payload, "Unhandled", [f"ERROR {err}"], str(uuid.uuid4()))
    _save_logs(fn, invocation)
    return invocation


def _save_logs(fn: Any, invocation: lambda_runner.Invocation) -> None:
    from moto.core.utils import unix_time_millis, utcnow

    group = getattr(fn, "local_log_group", None) or fn.logs_group_name
    backend = fn.logs_backend
    backend.ensure_log_group(group)
    date = utcnow()
    stream = f"{date.year}/{date.month:02d}/{date.day:02d}/[$LATEST]{invocation.request_id.replace('-', '')}"
    backend.create_log_stream(group, stream)
    now = unix_time_millis()
    events = [{"timestamp": now, "message": line} for line in invocation.log_lines if line.strip()]
    backend.put_log_events(group, stream, events)


def _invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
    """moto's LambdaFunction._invoke_lambda, run here: (payload, errored, log tail)."""
    invocation = run_function(self, event if event is not None else {})
    return invocation.payload.decode(), invocation.error is not None, "\n".join(invocation.log_lines[-40:])


def _invoke_unhandled(original: Any) -> Any:
    """An error the function raised, or its timeout, is X-Amz-Function-Error "Unhandled" (Lambda's Invoke reference:
    FunctionError); moto says "Handled"."""

    def invoke(self: Any, body: str, request_headers: Any, response_headers: Any) -> Any:
        answer = original(self, body, request_headers, response_headers)
        if response_headers.get("x-amz-function-error") == "Handled":
            response_headers["x-amz-function-error"] = "Unhandled"
        return answer

    return invoke


def _lambda_from_cloudformation(original: Any) -> Any:
    def create(cls: Any, resource_name: str, cloudformation_json: dict, account_id: str, region_name: str, **kw: Any):
        fn = original.__func__(cls, resource_name, cloudformation_json, account_id, region_name, **kw)
        log_group = (cloudformation_json["Properties"].get("LoggingConfig") or {}).get("LogGroup")
        fn.local_log_group = log_group
        return fn

    return classmethod(create)


def _configuration_with_logging(original: Any) -> Any:
    """GetFunction/ListFunctions show the function's LoggingConfig (moto leaves it out)."""

    def get_configuration(self: Any, *args: Any, **kwargs: Any) -> dict:
        config = original(self, *args, **kwargs)
        log_group = getattr(self, "local_log_group", None)
        if log_group:
            config["LoggingConfig"] = {"LogFormat": "Text", "LogGroup": log_group}
        return config

    return get_configuration


# ---------------------------------------------------------------------------------------------------------------
# CloudFormation: custom resources


def _request(model: Any, request_type: str, properties: dict, old_properties: dict | None = None) -> dict:
    """Send one custom resource request and wait for its answer; CustomResourceFailed unless SUCCESS."""
    from moto.awslambda.utils import get_backend

    fn = get_backend(model.account_id, model.region_name).get_function(properties["ServiceToken"])
    request_id = str(uuid.uuid4())
    event = {
        "RequestType": request_type,
        "ServiceToken": properties["ServiceToken"],
        "ResponseURL": answers().url(request_id),
        "StackId": model.stack_id,
        "RequestId": request_id,
        "LogicalResourceId": model.logical_id,
        "ResourceType": model.resource_type,
        "ResourceProperties": properties,
        **({"PhysicalResourceId": model.physical_id} if request_type != "Create" else {}),
        **({"OldResourceProperties": old_properties} if old_properties is not None else {}),
    }
    invocation = run_function(
        fn, event, extra_env={"_LOCAL_RESPONSE_HOST": "127.0.0.1", "_LOCAL_RESPONSE_PORT": str(answers().port)}
    )
    answer = answers().take(request_id, ANSWER_GRACE_S)
    if answer is None:
        why = json.loads(invocation.payload).get("errorMessage") if invocation.error else None
        raise CustomResourceFailed(
            model.logical_id,
            request_type,
            "the function ended without answering"
            + (f" ({why})" if why else "")
            + f"; CloudFormation would wait out the resource's ServiceTimeout (log group of {fn.function_name})",
        )
    if answer.get("Status") != "SUCCESS":
        raise CustomResourceFailed(model.logical_id, request_type, str(answer.get("Reason") or "FAILED"))
    model.physical_id = answer.get("PhysicalResourceId") or model.physical_id
    model.data = answer.get("Data") or {}
    model._finished = True
    return answer


def _custom_create(cls: Any, resource_name: str, cloudformation_json: dict, account_id: str, region_name: str, **kw):
    from moto.cloudformation import cloudformation_backends

    model = cls(region_name, str(uuid.uuid4()), kw["LogicalId"], resource_name)
    model.account_id, model.stack_id, model.resource_type = account_id, kw["StackId"], kw["ResourceType"]
    model.physical_id, model.properties = None, cloudformation_json["Properties"]
    stack = cloudformation_backends[account_id][region_name].get_stack(kw["StackId"])
    stack.add_custom_resource(model)
    _request(model, "Create", model.properties)
    return model


def _custom_update(
    cls: Any,
    original_resource: Any,
    new_resource_name: str,
    cloudformation_json: dict,
    account_id: str,
    region_name: str,
):
    new_properties = cloudformation_json["Properties"]
    old_physical = original_resource.physical_id
    _request(original_resource, "Update", new_properties, old_properties=original_resource.properties)
    if original_resource.physical_id != old_physical:
        # A new physical id replaces the resource: CloudFormation deletes the old one in its cleanup.
        replaced = original_resource.physical_id
        original_resource.physical_id = old_physical
        try:
            _request(original_resource, "Delete", original_resource.properties)
        finally:
            original_resource.physical_id = replaced
    original_resource.properties = new_properties
    return original_resource


def _custom_delete(self: Any, account_id: str, region_name: str) -> None:
    if not getattr(self, "deleted", False):
        _request(self, "Delete", self.properties)
        self.deleted = True


def _resources_delete(original: Any) -> Any:
    """CloudFormation deletes in reverse dependency order: a custom resource before the function that answers it and
    the resources it manages (CDK's auto-delete empties its bucket). moto deletes in no order and retries what
    failed, so a custom resource whose function went first could never be deleted: they go first here."""

    def delete(self: Any) -> None:
        from moto.cloudformation.custom_model import CustomModel

        for resource in list(self._parsed_resources.values()):
            if isinstance(resource, CustomModel):
                _custom_delete(resource, self._account_id, self._region_name)
        original(self)

    return delete


def _physical_resource_id(self: Any) -> str:
    return self.physical_id or self.resource_name


# ---------------------------------------------------------------------------------------------------------------
# CloudFormation: a failed resource fails the stack operation (no rollback)


# Stacks whose current operation failed: moto creates a template's resources lazily, on first access (its
# ResourceMap), so a describe after the failure would create what CloudFormation never did, and ask the failed custom
# resource again. Nothing more is created in them until their next operation starts.
_failed_stacks: set[str] = set()


def _fail(stack: Any, operation: str, err: CustomResourceFailed) -> None:
    reason = f"{err.request_type} of {err.logical_id} failed: {err.reason}"
    from moto.cloudformation.models import Event

    resource = stack.custom_resources.get(err.logical_id)
    stack.events.append(
        Event(
            stack_id=stack.stack_id,
            stack_name=stack.name,
            logical_resource_id=err.logical_id,
            physical_resource_id=getattr(resource, "physical_id", None) or "",
            resource_type=getattr(resource, "resource_type", "AWS::CloudFormation::CustomResource"),
            resource_status=f"{operation}_FAILED",
            resource_status_reason=err.reason,
            resource_properties=None,
        )
    )
    # CloudFormation with rollback disabled: "The following resource(s) failed to create/update: [...]"
    stack._add_stack_event(
        f"{operation}_FAILED", resource_status_reason=f"The following resource(s) failed: [{err.logical_id}]. {reason}"
    )
    stack.status = f"{operation}_FAILED"
    stack.status_reason = reason
    _failed_stacks.add(stack.stack_id)


def _execute_change_set(original: Any) -> Any:
    def execute(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        # moto's own lookup: the id, else the last change set of that name (for that stack, when named)
        change_set = self.change_sets.get(change_set_name)
        for candidate in self.change_sets.values() if change_set is None else ():
            if candidate.change_set_name == change_set_name and stack_name in (None, candidate.stack_name):
                change_set = candidate
        if change_set is not None:
            _failed_stacks.discard(change_set.stack_id)
        try:
            original(self, change_set_name, stack_name)
        except CustomResourceFailed as err:
            if change_set is None:
                raise
            stack = self.stacks[change_set.stack_id]
            _fail(stack, "CREATE" if change_set.change_set_type == "CREATE" else "UPDATE", err)
            change_set.execution_status = "EXECUTE_FAILED"
            stack.template = change_set.template

    return execute


def _stack_method(original: Any, operation: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> None:
        _failed_stacks.discard(self.stack_id)
        try:
            original(self, *args, **kwargs)
        except CustomResourceFailed as err:
            _fail(self, operation, err)

    return method


def _parsing_update(original: Any) -> Any:
    """moto retries a resource whose update raised (dependency order); a custom resource that answered FAILED is
    not asked again: the operation fails."""

    def update(self: Any, *args: Any, **kwargs: Any) -> None:
        from moto.cloudformation import parsing

        real = parsing.parse_and_update_resource

        def once(*a: Any, **kw: Any) -> Any:
            try:
                return real(*a, **kw)
            except CustomResourceFailed as err:
                raise _Stop(err) from None

        setattr(parsing, "parse_and_update_resource", once)
        try:
            original(self, *args, **kwargs)
        except _Stop as stop:
            raise stop.err from None
        finally:
            setattr(parsing, "parse_and_update_resource", real)

    return update


def _create_after_dependencies(original: Any) -> Any:
    """CloudFormation creates a resource after those it DependsOn; moto follows Ref and GetAtt only, so a custom
    resource could run before what it waits for (a log group its function writes to, the endpoint it checks), or a
    Model be created before the artifact check that guards it."""

    def create(logical_id: str, resource_json: dict, resources_map: Any, *args: Any, **kwargs: Any) -> Any:
        if resources_map.stack_id in _failed_stacks:
            return None  # the operation failed: CloudFormation creates nothing more
        depends = resource_json.get("DependsOn") or []
        for dependency in [depends] if isinstance(depends, str) else depends:
            if dependency in resources_map._resource_json_map:
                _ = resources_map[dependency]  # moto's ResourceMap creates a resource on first access
        return original(logical_id, resource_json, resources_map, *args, **kwargs)

    return create


# ---------------------------------------------------------------------------------------------------------------
# What the CDK CLI asks after a failed deploy: answered, not a 500 it retries
#
# The CLI (aws-cdk 2.1148, toolkit-lib api/diagnosing) investigates a failed custom resource: DescribeStackResources
# naming the function's logical ID, then CloudTrail LookupEvents around the failure. moto answered both with a 500
# (the first reads `logical_resource_id` off every resource, which few of its models have; the second it does not
# implement), and the CLI's SDK retried each for 20-40 s: a failed `cdk deploy` on the emulator took 70 s more.
# ListStackResources is answered the same way, each resource under its logical ID (moto gave "" for most).


def _made_resources(stack: Any, logical_id: str | None = None) -> list[SimpleNamespace]:
    """The resources the stack created (or the one named), as CloudFormation lists them: under their template logical
    ID and type. Only what moto already made: looking one up must not create it (see _failed_stacks)."""
    resources = stack.resource_map
    declared = resources._resource_json_map
    return [
        SimpleNamespace(
            logical_resource_id=name,
            physical_resource_id=getattr(model, "physical_resource_id", None),
            cf_resource_type=declared[name].get("Type"),
        )
        for name, model in resources._parsed_resources.items()
        if name in declared and name == (logical_id or name)
    ]


def _describe_stack_resources(self: Any, stack_name: str, logical_resource_id: str | None) -> tuple[Any, list]:
    """DescribeStackResources: moto reads `logical_resource_id` off each model, which few have (a 500 when one is
    named; no LogicalResourceId in each answer otherwise)."""
    stack = self.get_stack(stack_name)
    return stack, _made_resources(stack, logical_resource_id)


def _list_stack_resources(self: Any, stack_name_or_id: str) -> tuple[Any, list]:
    """ListStackResources, likewise (moto answered each LogicalResourceId "" but a function's)."""
    stack = self.get_stack(stack_name_or_id)
    return stack, _made_resources(stack)


def _lookup_events(self: Any) -> str:
    """CloudTrail LookupEvents: the emulator records no management events, so it finds none."""
    return json.dumps({"Events": []})


class _Stop(BaseException):
    """Carries a CustomResourceFailed past moto's `except Exception` retry loops."""

    def __init__(self, err: CustomResourceFailed) -> None:
        super().__init__(str(err))
        self.err = err


_installed = False


def install() -> None:
    """Patch moto (once per process)."""
    global _installed
    if _installed:
        return
    from moto.awslambda.models import LambdaFunction
    from moto.cloudformation import models as cfn_models
    from moto.cloudformation import parsing
    from moto.cloudformation.custom_model import CustomModel
    from moto.cloudtrail.responses import CloudTrailResponse

    setattr(LambdaFunction, "_invoke_lambda", _invoke_lambda)
    setattr(LambdaFunction, "invoke", _invoke_unhandled(LambdaFunction.invoke))
    setattr(
        LambdaFunction,
        "create_from_cloudformation_json",
        _lambda_from_cloudformation(LambdaFunction.create_from_cloudformation_json),
    )
    setattr(LambdaFunction, "get_configuration", _configuration_with_logging(LambdaFunction.get_configuration))
    setattr(CustomModel, "create_from_cloudformation_json", classmethod(_custom_create))
    setattr(CustomModel, "update_from_cloudformation_json", classmethod(_custom_update))
    setattr(CustomModel, "delete", _custom_delete)
    setattr(CustomModel, "physical_resource_id", property(_physical_resource_id))
    # AWS::CloudFormation::CustomResource is a custom resource as Custom::* is; moto maps only the latter.
    resource_class_from_type = parsing.resource_class_from_type
    setattr(
        parsing,
        "resource_class_from_type",
        lambda kind: CustomModel if kind == "AWS::CloudFormation::CustomResource" else resource_class_from_type(kind),
    )
    backend = cfn_models.CloudFormationBackend
    setattr(backend, "execute_change_set", _execute_change_set(backend.execute_change_set))
    setattr(backend, "describe_stack_resources", _describe_stack_resources)
    setattr(backend, "list_stack_resources", _list_stack_resources)
    setattr(CloudTrailResponse, "lookup_events", _lookup_events)
    setattr(cfn_models.Stack, "create_resources", _stack_method(cfn_models.Stack.create_resources, "CREATE"))
    setattr(cfn_models.Stack, "update", _stack_method(cfn_models.Stack.update, "UPDATE"))
    setattr(cfn_models.Stack, "delete", _stack_method(cfn_models.Stack.delete, "DELETE"))
    setattr(parsing.ResourceMap, "update", _parsing_update(parsing.ResourceMap.update))
    setattr(parsing.ResourceMap, "delete", _resources_delete(parsing.ResourceMap.delete))
    setattr(parsing, "parse_and_create_resource", _create_after_dependencies(parsing.parse_and_create_resource))
    _installed = True


def main(argv: list[str] | None = None) -> None:
    install()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
