"""Post-deploy smoke test of one endpoint stack: the Lambda handler (lambda/smoke/handler.py) and `smoke_test`,
which `python -m model_build smoke` reuses, so the checks are written once. Stdlib + boto3 + endpoint_runtime.invoke.

Checks: stack, endpoint, status, capacity, config, component, invoke, response, latency, chat, tool_call, adapter X.
Lambda environment: STACK_NAME (required), ENDPOINT_NAME, INFERENCE_COMPONENT_NAME, ADAPTER_COMPONENTS, INVOCATION_MODE
(+ INPUT/OUTPUT/FAILURE_LOCATION), PROMPT, MAX_NEW_TOKENS, LATENCY_BUDGET_MS, WAKE_BUDGET_MS, EMULATOR, SMOKE_CHAT_*;
each explained, with the IAM, timeout, result and packaging: docs/design/smoke-test.md.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import boto3
import botocore.exceptions
from botocore.config import Config

from endpoint_runtime import async_invoke, bodies, openai_route
from endpoint_runtime import invoke as invoke_module

contract = invoke_module.contract
SetupError = contract.SetupError

# The stack sets every setting from the endpoint's plan (its config bounds them); the function only refuses a broken
# environment: no budget beyond its own longest run (Lambda's 900 s). The wake budget may be longer (the function
# then stops waiting before its own end: LAMBDA_END_MARGIN_MS), within SageMaker's 3600 s download and startup
# timeouts, their alarm and the budget.
LAMBDA_MAX_RUN_MS = 900_000
WAKE_BUDGET_MAX_MS = 3 * 3_600_000
LAMBDA_END_MARGIN_MS = 15_000
# A stack in these states runs what its template says; anything else is mid-deploy, failed or rolled back.
GOOD_STACK_STATES = ("CREATE_COMPLETE", "UPDATE_COMPLETE")
ENDPOINT_TYPE = "AWS::SageMaker::Endpoint"
CONFIG_TYPE = "AWS::SageMaker::EndpointConfig"
MODEL_TYPE = "AWS::SageMaker::Model"


# ---------------------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Check:
    """One check: its name, whether it passed, and a message (on failure: what is wrong and what to do)."""

    name: str
    ok: bool
    message: str
    skipped: bool = False  # did not run (its prerequisite failed, or it does not apply); counts as passed

    @property
    def label(self) -> str:
        return "SKIP" if self.skipped else ("PASS" if self.ok else "FAIL")


def format_checks(checks: list[Check]) -> str:
    """A plain-text table: status, check name, message."""
    width = max((len(c.name) for c in checks), default=5)
    return "\n".join(f"{c.label:4}  {c.name:<{width}}  {c.message}" for c in checks)


@dataclass
class SmokeResult:
    stack: str
    endpoint: str | None = None
    latency_ms: int | None = None
    checks: list[Check] = field(default_factory=list)
    outputs: Any = None  # the model's answer, for the operator (never logged by the Lambda)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def add(self, name: str, ok: bool, message: str, skipped: bool = False) -> bool:
        self.checks.append(Check(name, ok, message, skipped))
        return ok

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "stack": self.stack,
            "endpoint": self.endpoint,
            "latency_ms": self.latency_ms,
            "checks": [asdict(c) for c in self.checks],
            "failures": [f"{c.name}: {c.message}" for c in self.failures],
        }


# ---------------------------------------------------------------------------------------------------------------
# lambda/invoke's request code (validation, error mapping), imported


def make_runtime_client(session=None, read_timeout_s: float = 55.0):
    """A sagemaker-runtime client that never retries: a retry would hide a failure and distort the latency."""
    session = session or boto3.session.Session()
    return session.client(
        "sagemaker-runtime",
        config=Config(
            connect_timeout=5, read_timeout=read_timeout_s, retries={"mode": "standard", "total_max_attempts": 1}
        ),
    )


# ---------------------------------------------------------------------------------------------------------------
# The checks


def aws_message(err: Exception) -> str:
    """An AWS error as "Code: message" (or the exception's type and text)."""
    response = getattr(err, "response", None)
    if isinstance(response, dict):
        e = response.get("Error", {})
        return f"{e.get('Code', 'error')}: {e.get('Message', '')}".strip()
    return f"{type(err).__name__}: {err}"


def _name_from_physical_id(physical_id: str) -> str:
    # SageMaker resources' physical ids are ARNs (".../endpoint-config/NAME"); the APIs take the name.
    return physical_id.rsplit("/", 1)[-1]


def check_response_shape(outputs: Any) -> str | None:
    """None when `outputs` is a non-empty list of objects with a string `generated_text`, or one such object (LMI
    27's reply to {"inputs"}: deepjavalibrary/djl-serving@0.36.0-lmi27-dlc engines/python/setup/djl_python/
    lmi_vllm/request_response_utils.py:137-146), else what is wrong."""
    if isinstance(outputs, dict) and "generated_text" in outputs:
        outputs = [outputs]
    if not isinstance(outputs, list) or not outputs:
        kind = "an empty list" if outputs == [] else type(outputs).__name__
        return (
            "expected a non-empty list of objects with a string 'generated_text' (or one such object), got "
            f"{kind}: {json.dumps(outputs)[:120]}"
        )
    for i, item in enumerate(outputs):
        if not isinstance(item, dict):
            return f"item {i} is {type(item).__name__}, not an object with 'generated_text'"
        if not isinstance(item.get("generated_text"), str):
            got = "missing" if "generated_text" not in item else type(item["generated_text"]).__name__
            return f"item {i}: 'generated_text' is {got}, expected a string (keys: {sorted(item)[:8]})"
    return None


@dataclass(frozen=True)
class _SmokeCall:
    """smoke_test's arguments, as its steps read them (smoke_test documents each; same names, same order)."""

    stack_name: str
    expected_endpoint: str | None
    prompt: str
    max_new_tokens: int
    latency_budget_ms: int
    emulator: bool
    inference_component: str | None
    async_locations: dict[str, str] | None
    wake_budget_ms: int | None
    must_end_within_ms: int | None
    chat: ChatSmoke | None
    adapters: dict[str, str] | None
    body: bodies.EndpointBody | None
    session: Any
    runtime_client: Any
    s3_client: Any


def smoke_test(
    stack_name: str,
    *,
    expected_endpoint: str | None = None,
    prompt: str,
    max_new_tokens: int,
    latency_budget_ms: int,
    emulator: bool = False,
    inference_component: str | None = None,
    async_locations: dict[str, str] | None = None,
    wake_budget_ms: int | None = None,
    must_end_within_ms: int | None = None,
    chat: ChatSmoke | None = None,
    adapters: dict[str, str] | None = None,
    body: bodies.EndpointBody | None = None,
    session=None,
    runtime_client=None,
    s3_client=None,
    deployed: tuple[str, str, list[str]] | None = None,
) -> SmokeResult:
    """Check the stack, its endpoint and one real invocation. Never raises for AWS errors: each is a failed check.

    deployed: (endpoint, endpoint config, models) as the stack's smoke custom resource names them while
    CloudFormation deploys the stack (endpoint_runtime/smoke_check.py): the stack is mid-deploy then, so its status
    and resource list are not checked; None: read them from the settled stack.

    async_locations: for an asynchronous endpoint (invocation.mode async), its s3:// input, output and failure
    folders (keys input/output/failure): the prompt is submitted with InvokeEndpointAsync and the answer polled for
    in S3 within the latency budget. None: a real-time endpoint, invoked with InvokeEndpoint.
    wake_budget_ms: the wait instead of the latency budget when the asynchronous endpoint runs 0 instances (its
    scale-up from zero included). must_end_within_ms: the caller's own time limit (the Lambda's remaining time): a
    wait for a waking endpoint that would pass it ends with the answer unchecked (skipped).
    adapters: adapter name -> adapter inference component; each is checked and invoked after the base (check_adapters).
    body: how the container takes the prompt and answers (the plan's SmokeSettings; bodies.EndpointBody); None: from
    the environment."""
    # _SmokeCall's fields are smoke_test's parameters, in order.
    call = _SmokeCall(
        stack_name,
        expected_endpoint,
        prompt,
        max_new_tokens,
        latency_budget_ms,
        emulator,
        inference_component,
        async_locations,
        wake_budget_ms,
        must_end_within_ms,
        chat,
        adapters,
        body,
        session or boto3.session.Session(),
        runtime_client,
        s3_client,
    )
    result = SmokeResult(stack=stack_name)
    sm = call.session.client("sagemaker")
    if deployed is None:
        cfn = call.session.client("cloudformation")
        if not _check_stack(result, cfn, sm, stack_name):
            return result
        deployed = _deployed_resources(result, cfn, stack_name)
        if deployed is None:
            return result
    else:
        result.add("stack", True, f"{stack_name} is being deployed: checked from inside it (its smoke custom resource)")
    endpoint, deployed_config, deployed_models = deployed
    result.endpoint = endpoint
    _check_endpoint_name(result, call, endpoint)
    described = _check_status_and_config(result, sm, stack_name, endpoint, deployed_config)
    if described is None or not _ready_to_invoke(result, call, sm, described, deployed_models):
        return result
    _invoke_and_check(result, call, sm, endpoint, described)
    return result


def _check_stack(result: SmokeResult, cfn, sm, stack_name: str) -> bool:
    """The stack's state; False when it cannot be described (nothing else can be checked)."""
    try:
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    except botocore.exceptions.ClientError as err:
        if "does not exist" in str(err):
            result.add(
                "stack",
                False,
                f"stack {stack_name} does not exist in region {sm.meta.region_name}: deploy it "
                f"first (npx cdk deploy {stack_name}), or check the region and account",
            )
        else:
            result.add("stack", False, f"cannot describe stack {stack_name}: {aws_message(err)}")
        return False
    except botocore.exceptions.BotoCoreError as err:
        result.add("stack", False, f"cannot describe stack {stack_name}: {aws_message(err)}")
        return False
    status = stack["StackStatus"]
    if status in GOOD_STACK_STATES:
        result.add("stack", True, f"{stack_name} is {status}")
    elif "ROLLBACK" in status:
        result.add(
            "stack",
            False,
            f"stack {stack_name} is {status}: its last deploy failed and was rolled back, so the "
            f"endpoint serves the previous version; read the stack events (aws cloudformation "
            f"describe-stack-events --stack-name {stack_name}), fix the cause and deploy again",
        )
    else:
        result.add(
            "stack",
            False,
            f"stack {stack_name} is {status}, not CREATE_COMPLETE or UPDATE_COMPLETE: wait for "
            f"the deploy to finish (or fix it) and run the smoke test again",
        )
    return True


def _deployed_resources(result: SmokeResult, cfn, stack_name: str) -> tuple[str, str, list[str]] | None:
    """The endpoint, endpoint config and models the stack deployed; None (a failed check) when they cannot be read
    or the stack has not exactly one endpoint and one endpoint config."""
    try:
        pages = cfn.get_paginator("list_stack_resources").paginate(StackName=stack_name)
        resources = [r for page in pages for r in page["StackResourceSummaries"]]
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as err:
        result.add("endpoint", False, f"cannot list the resources of stack {stack_name}: {aws_message(err)}")
        return None
    found = {
        t: [
            _name_from_physical_id(r["PhysicalResourceId"])
            for r in resources
            if r["ResourceType"] == t and r.get("PhysicalResourceId")
        ]
        for t in (ENDPOINT_TYPE, CONFIG_TYPE, MODEL_TYPE)
    }
    deployed_models = found.pop(MODEL_TYPE)
    for t, names in found.items():
        if len(names) != 1:
            result.add(
                "endpoint",
                False,
                f"stack {stack_name} has {len(names)} resources of type {t}, expected 1: "
                f"is it an endpoint stack of this app?",
            )
            return None
    return found[ENDPOINT_TYPE][0], found[CONFIG_TYPE][0], deployed_models


def _check_endpoint_name(result: SmokeResult, call: _SmokeCall, endpoint: str) -> None:
    expected_endpoint = call.expected_endpoint
    if expected_endpoint and endpoint.casefold() != expected_endpoint.casefold():
        if call.emulator:
            result.add(
                "endpoint", True, f"{endpoint} (the emulator names endpoints itself; on AWS it is {expected_endpoint})"
            )
        else:
            result.add(
                "endpoint",
                False,
                f"stack {call.stack_name} deployed endpoint {endpoint}, but clients call "
                f"{expected_endpoint}: the stack and the config disagree; synthesize and "
                f"deploy the stack from this config again",
            )
    else:
        result.add("endpoint", True, endpoint)


def _check_status_and_config(
    result: SmokeResult, sm, stack_name: str, endpoint: str, deployed_config: str
) -> dict[str, Any] | None:
    """The endpoint's status and the endpoint config it runs; its description, or None when it cannot be described."""
    try:
        described = sm.describe_endpoint(EndpointName=endpoint)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as err:
        result.add(
            "status",
            False,
            f"cannot describe endpoint {endpoint}: {aws_message(err)}; it may have been "
            f"deleted outside CloudFormation: deploy stack {stack_name} again",
        )
        return None
    endpoint_status = described.get("EndpointStatus")
    if endpoint_status == "InService":
        result.add("status", True, "InService")
    else:
        reason = described.get("FailureReason")
        result.add(
            "status",
            False,
            f"endpoint {endpoint} is {endpoint_status}, not InService"
            + (f" ({reason})" if reason else "")
            + ": wait for it (Creating/Updating) or read its CloudWatch logs "
            f"(/aws/sagemaker/Endpoints/{endpoint}) and redeploy (Failed)",
        )
    running = described.get("EndpointConfigName", "")
    # Compared without case: SageMaker ARNs (the physical ids) carry names in lower case.
    if running.casefold() == deployed_config.casefold():
        result.add("config", True, f"runs {running}, the config the stack deployed")
    else:
        result.add(
            "config",
            False,
            f"endpoint {endpoint} runs endpoint config {running}, but stack {stack_name} "
            f"deployed {deployed_config}: the update did not take effect (rolled back, or "
            f"changed outside CloudFormation); read the endpoint's events and logs, then "
            f"deploy the stack again",
        )
    return described


def _ready_to_invoke(
    result: SmokeResult, call: _SmokeCall, sm, described: dict[str, Any], deployed_models: list[str]
) -> bool:
    """Checks the inference component (if any); False, with the invocation skipped, when the endpoint or its
    component is not InService."""
    endpoint_status = described.get("EndpointStatus")
    in_service = endpoint_status == "InService"
    component = call.inference_component
    if component is not None:
        # The model runs as an inference component: a new model updates the component, not the endpoint config.
        # The stack's Model is named by its physical id, the model's ARN (AWS::SageMaker::Model's primaryIdentifier is
        # ModelArn in its CloudFormation registry schema, as cfn-lint ships it).
        component_ok = _check_component(result, sm, component, deployed_models, call.stack_name)
        if in_service and not component_ok:
            result.add("invoke", True, f"not run: inference component {component} is not InService", skipped=True)
            return False
    if not in_service:
        result.add("invoke", True, f"not run: endpoint is {endpoint_status}", skipped=True)
        return False
    return True


def _wake_budget(result: SmokeResult, call: _SmokeCall, endpoint: str, described: dict[str, Any]) -> tuple[int, bool]:
    """The wait for the answer and whether the endpoint wakes from zero (an asynchronous endpoint at 0 instances
    waits its wake budget, noted as the capacity check)."""
    if call.async_locations is None or running_instances(described) != 0:
        return call.latency_budget_ms, False
    budget_ms = max(call.latency_budget_ms, call.wake_budget_ms or 0)
    result.add(
        "capacity",
        True,
        (
            f"endpoint {endpoint} runs 0 instances (it scaled to zero; an update keeps the scaled count): the prompt "
            f"waits for the scale-up from zero (the HasBacklogWithoutCapacity alarm, then an instance starts), up to "
            f"{budget_ms} ms"
        ),
    )
    return budget_ms, True


def _invoke_and_check(result: SmokeResult, call: _SmokeCall, sm, endpoint: str, described: dict[str, Any]) -> None:
    """One invocation with the configured prompt, in the body the container takes (endpoint_runtime/bodies.py), its
    answer and latency checked; then the chat exchange and the adapters, where the endpoint has them."""
    budget_ms, waking = _wake_budget(result, call, endpoint, described)
    payload = generation_payload(call.prompt, call.max_new_tokens)
    try:
        body = bodies.EndpointBody.from_env() if call.body is None else call.body
    except SetupError as err:
        result.add("invoke", False, f"configuration: {err}")
        return
    # Clients call the configured name; on AWS it is the deployed one (checked above). The emulator names
    # endpoints itself but answers (or its stand-in model server answers) under the configured name.
    invoke_name = call.expected_endpoint if (call.emulator and call.expected_endpoint) else endpoint
    if call.async_locations is not None:
        answer = _answer_async(
            invoke_name,
            payload,
            call.async_locations,
            budget_ms,
            call.session,
            call.runtime_client,
            call.s3_client,
            give_up_ms=call.must_end_within_ms if waking else None,
            body=body,
        )
    else:
        answer = _answer_real_time(
            invoke_name, payload, call.session, call.runtime_client, call.inference_component, body
        )
        if answer.no_capacity and call.inference_component is not None:
            answer, budget_ms, waking = _wake_component(result, call, sm, invoke_name, payload, body)
    if not _check_answer(result, call, endpoint, answer, budget_ms, waking):
        return
    if call.chat is not None:  # the endpoint serves chat: one exchange through its clients' route
        chat_check(
            result,
            invoke_name,
            call.chat,
            session=call.session,
            runtime_client=call.runtime_client,
            inference_component=call.inference_component,
        )
    if call.adapters:
        check_adapters(
            result,
            sm,
            call.adapters,
            base=call.inference_component,
            endpoint=invoke_name,
            payload=payload,
            latency_budget_ms=call.latency_budget_ms,
            client=call.runtime_client or make_runtime_client(call.session),
            body=body,
        )


# A component at zero copies (E1): how long the smoke test waits for SageMaker to start a copy when the endpoint
# names no wake budget, and how often it asks. The request SageMaker refused is what starts one: the
# NoCapacityInvocationFailures alarm (stacks/inference_components.py) fires the step scaling policy that adds a copy;
# the SageMaker DG ("Scale an endpoint to zero instances"): "the provisioning process takes several minutes. During
# that time, any attempts to invoke the endpoint will produce an error".
COMPONENT_WAKE_DEFAULT_MS, COMPONENT_WAKE_POLL_S = 600_000, 15.0


def _wake_component(
    result: SmokeResult, call: _SmokeCall, sm, endpoint: str, payload: dict, body: bodies.EndpointBody
) -> tuple[_Answer, int, bool]:
    """SageMaker answered "no capacity": the component is scaled to zero, which is its design, not a failure. Wait
    for a copy (DescribeInferenceComponent's CurrentCopyCount) within the wake budget and the caller's own time, then
    ask again; when none comes in time, the answer is not judged and the checks say exactly what was checked."""
    component = call.inference_component
    assert component is not None  # only a component answers "no capacity"
    budget_ms = call.wake_budget_ms or COMPONENT_WAKE_DEFAULT_MS
    if call.must_end_within_ms is not None:
        budget_ms = min(budget_ms, call.must_end_within_ms)
    result.add(
        "capacity",
        True,
        f'inference component {component} runs no copy (scaled to zero): SageMaker answered "no capacity", and that '
        f"request is what its NoCapacityInvocationFailures alarm counts to start one; waiting up to {budget_ms} ms",
    )
    started = time.monotonic()
    while _elapsed_ms(started) + COMPONENT_WAKE_POLL_S * 1000 <= budget_ms:
        _sleep(COMPONENT_WAKE_POLL_S)
        try:
            described = sm.describe_inference_component(InferenceComponentName=component)
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError):
            continue
        if ((described.get("RuntimeConfig") or {}).get("CurrentCopyCount") or 0) > 0:
            answer = _answer_real_time(endpoint, payload, call.session, call.runtime_client, component, body)
            if not answer.no_capacity:
                return answer, call.latency_budget_ms, False
    waited = _elapsed_ms(started)
    return (
        _Answer(
            True,
            waited,
            invoke_message=f'SageMaker answered "no capacity" for {component} (0 copies): the endpoint is reachable',
            unawaited=(
                f"not judged: no copy of {component} started within {waited} ms; checked: the endpoint InService on the "
                f"deployed config, the component InService on the deployed model with 0 copies, and SageMaker's "
                f"no-capacity answer; the model's own answer was not checked (the first request after it wakes is)"
            ),
        ),
        budget_ms,
        True,
    )


_sleep = time.sleep


def _check_answer(
    result: SmokeResult, call: _SmokeCall, endpoint: str, answer: _Answer, budget_ms: int, waking: bool
) -> bool:
    """The invoke, response and latency checks of the answer; False when there is no answer to go on with."""
    result.latency_ms = answer.latency_ms
    if not answer.submitted_ok:
        result.add("invoke", False, f"invoking {endpoint} returned {answer.problem}")
        result.add("latency", True, "not measured: the invocation failed", skipped=True)
        return False
    result.add("invoke", True, answer.invoke_message)
    if answer.unawaited is not None:  # waking from zero for longer than the caller may wait: not a failure
        result.add("response", True, answer.unawaited, skipped=True)
        result.add("latency", True, "not measured: the endpoint was scaling up from zero", skipped=True)
        return False
    if answer.problem is not None:  # submitted, but no answer: a failed or unfinished asynchronous request
        result.add("response", False, answer.problem)
        result.add("latency", True, "not measured: no answer", skipped=True)
        return False
    result.outputs = answer.outputs
    problem = check_response_shape(result.outputs)
    if problem:
        result.add(
            "response",
            False,
            f"endpoint {endpoint} answered in the wrong shape: {problem}; the serving "
            f"container's output format does not match the text-generation contract",
        )
    else:
        result.add("response", True, f"{len(result.outputs)} generated_text item(s)")
    _check_latency(result, call, answer.latency_ms, budget_ms, waking)
    return True


def _check_latency(result: SmokeResult, call: _SmokeCall, latency_ms: int, budget_ms: int, waking: bool) -> None:
    latency_budget_ms = call.latency_budget_ms
    if waking and latency_ms <= budget_ms:
        result.add("latency", True, f"{latency_ms} ms <= {budget_ms} ms budget (scale-up from zero included)")
    elif latency_ms <= latency_budget_ms:
        result.add("latency", True, f"{latency_ms} ms <= {latency_budget_ms} ms budget")
    else:
        result.add(
            "latency",
            False,
            f"{latency_ms} ms is over the {latency_budget_ms} ms budget "
            f"(smoke_test.latency_budget_ms, {call.max_new_tokens} new tokens): check the "
            f"instance type, the engine settings and the endpoint's metrics, or raise the budget",
        )


def generation_payload(prompt: str, max_new_tokens: int) -> dict[str, Any]:
    """The smoke prompt as a generation request (greedy); invoke.invoke carries it in the container's own body."""
    return {"inputs": prompt, "parameters": {"max_new_tokens": max_new_tokens, "do_sample": False}}


def running_instances(described: dict[str, Any]) -> int | None:
    """The instances the endpoint runs now (DescribeEndpoint ProductionVariants[].CurrentInstanceCount, summed);
    None when SageMaker reports no count."""
    counts = [v["CurrentInstanceCount"] for v in described.get("ProductionVariants", []) if "CurrentInstanceCount" in v]
    return sum(counts) if counts else None


def check_adapters(
    result: SmokeResult,
    sm,
    adapters: dict[str, str],
    *,
    base: str | None,
    endpoint: str,
    payload: dict,
    latency_budget_ms: int,
    client,
    body: bodies.EndpointBody | None = None,
) -> None:
    """One check per LoRA adapter ("adapter <name>"): its adapter inference component is InService on the base
    component, and the smoke prompt sent to it (InvokeEndpoint naming the adapter's component, through
    endpoint_runtime.invoke) answers in the text-generation shape within the latency budget."""
    for name, component in sorted(adapters.items()):
        check = f"adapter {name}"
        try:
            described = sm.describe_inference_component(InferenceComponentName=component)
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as err:
            result.add(check, False, f"cannot describe adapter inference component {component}: {aws_message(err)}")
            continue
        status = described.get("InferenceComponentStatus")
        on = (described.get("Specification") or {}).get("BaseInferenceComponentName")
        if status != "InService":
            reason = described.get("FailureReason")
            result.add(
                check,
                False,
                f"adapter inference component {component} is {status}, not InService"
                + (f" ({reason})" if reason else "")
                + ": wait for it, or read the base component's logs "
                f"(/aws/sagemaker/InferenceComponents/{base}) and redeploy",
            )
            continue
        if base is not None and (on or "").casefold() != base.casefold():
            result.add(
                check,
                False,
                f"adapter inference component {component} is on base component {on}, not {base}: "
                "deploy the stack again",
            )
            continue
        answer = _answer_real_time(endpoint, payload, None, client, component, body or bodies.EndpointBody())
        problem = answer.problem if not answer.submitted_ok else check_response_shape(answer.outputs)
        if problem is None and answer.latency_ms > latency_budget_ms:
            problem = f"{answer.latency_ms} ms is over the {latency_budget_ms} ms budget (smoke_test.latency_budget_ms)"
        result.add(
            check,
            problem is None,
            f"{component}: 200 in {answer.latency_ms} ms"
            if problem is None
            else f"invoking adapter component {component}: {problem}",
        )


def _check_component(result: SmokeResult, sm, component: str, deployed_models: list[str], stack_name: str) -> bool:
    """The `component` check (hosting.mode inference-components): DescribeInferenceComponent says InService and the
    component runs the model the stack deployed (a model change updates the component in place, so the endpoint
    config check cannot see it). True when the component can serve."""
    try:
        described = sm.describe_inference_component(InferenceComponentName=component)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as err:
        result.add(
            "component",
            False,
            f"cannot describe inference component {component}: {aws_message(err)}; it may "
            f"have been deleted outside CloudFormation: deploy stack {stack_name} again",
        )
        return False
    status = described.get("InferenceComponentStatus")
    running = (described.get("Specification") or {}).get("ModelName", "")
    copies = (described.get("RuntimeConfig") or {}).get("CurrentCopyCount")
    if status != "InService":
        reason = described.get("FailureReason")
        result.add(
            "component",
            False,
            f"inference component {component} is {status}, not InService"
            + (f" ({reason})" if reason else "")
            + ": wait for it (Creating/Updating) or read its CloudWatch logs "
            f"(/aws/sagemaker/InferenceComponents/{component}) and redeploy (Failed)",
        )
        return False
    if len(deployed_models) != 1:
        result.add(
            "component",
            False,
            f"stack {stack_name} has {len(deployed_models)} resources of type {MODEL_TYPE}, "
            "expected 1: is it an endpoint stack of this app?",
        )
        return True
    if running.casefold() != deployed_models[0].casefold():
        result.add(
            "component",
            False,
            f"inference component {component} runs model {running}, but stack {stack_name} "
            f"deployed {deployed_models[0]}: the update did not take effect (rolled back, or changed outside "
            "CloudFormation); read the component's events and logs, then deploy the stack again",
        )
        return True
    result.add("component", True, f"{component} runs {running}, the model the stack deployed ({copies} copies now)")
    return True


@dataclass
class _Answer:
    """What one smoke invocation produced. submitted_ok False: the request itself was refused (`problem` says how);
    True with a `problem`: an asynchronous request that failed or did not finish within the budget."""

    submitted_ok: bool
    latency_ms: int
    invoke_message: str = ""
    outputs: Any = None
    problem: str | None = None
    unawaited: str | None = None  # why the answer was not waited for (the caller's own time ran out)
    no_capacity: bool = False  # SageMaker's "no capacity" answer: the inference component runs no copy


def _elapsed_ms(started: float) -> int:
    return int(round((time.monotonic() - started) * 1000))


def _answer_real_time(
    endpoint: str,
    payload: dict,
    session,
    runtime_client,
    inference_component: str | None,
    body: bodies.EndpointBody | None = None,
) -> _Answer:
    """InvokeEndpoint through endpoint_runtime.invoke (the invoke function's validation, body and error mapping);
    `body` None: the generation body."""
    client = runtime_client or make_runtime_client(session)
    log: dict[str, Any] = {}
    started = time.monotonic()
    status_code, answer = invoke_module.invoke(
        endpoint,
        payload,
        client=client,
        log=log,
        inference_component=inference_component,
        body=body or bodies.EndpointBody(),
    )
    wall_ms = _elapsed_ms(started)
    if status_code != 200:
        detail = f" [{log['aws_error']}]" if log.get("aws_error") else ""
        return _Answer(
            False,
            wall_ms,
            problem=f"{status_code} {answer.get('error_type')}: {answer.get('error')}{detail}",
            no_capacity=answer.get("error_type") == "no_capacity",
        )
    latency_ms = answer.get("latency_ms", wall_ms)
    return _Answer(True, latency_ms, invoke_message=f"200 in {latency_ms} ms", outputs=answer.get("outputs"))


# Polling an asynchronous answer: first look after 1 s, then 1.5 times longer each time, at most every 10 s.
ASYNC_POLL_FIRST_S, ASYNC_POLL_GROWTH, ASYNC_POLL_MAX_S = 1.0, 1.5, 10.0
# The largest answer read back: a smoke prompt's answer is a few hundred bytes.
ASYNC_MAX_RESULT_BYTES = 1024 * 1024


def _answer_async(
    endpoint: str,
    payload: dict,
    locations: dict[str, str],
    budget_ms: int,
    session,
    runtime_client,
    s3_client,
    give_up_ms: int | None = None,
    body: bodies.EndpointBody | None = None,
) -> _Answer:
    """An asynchronous endpoint refuses InvokeEndpoint: submit as its invoke function does (endpoint_runtime.
    async_invoke: the payload into the input folder, then InvokeEndpointAsync), then poll S3 for the answer or the
    failure until the budget is spent. The latency is submit to answer, queueing included. give_up_ms: stop waiting
    then without a verdict (`unawaited`), when it comes before the budget."""
    s3 = s3_client or session.client("s3")
    runtime = runtime_client or make_runtime_client(session)
    started = time.monotonic()
    body = body or bodies.EndpointBody()
    request = _submit_async(endpoint, payload, locations, s3, runtime, started, body)
    if isinstance(request, _Answer):
        return request
    if not request.output:
        return _Answer(
            True, _elapsed_ms(started), request.submitted, problem="InvokeEndpointAsync named no output location"
        )
    wait = ASYNC_POLL_FIRST_S
    while True:
        try:
            state = async_invoke.fetch_result(request.output, request.failure, s3=s3, max_bytes=ASYNC_MAX_RESULT_BYTES)
        except async_invoke.RequestError as err:
            return _Answer(
                True, _elapsed_ms(started), request.submitted, problem=f"cannot read the answer: {err.message}"
            )
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as err:
            return _Answer(
                True,
                _elapsed_ms(started),
                request.submitted,
                problem=f"cannot read the answer at {request.output}: {aws_message(err)}",
            )
        elapsed = _elapsed_ms(started)
        answer = _async_verdict(request, state, elapsed, payload, body)
        answer = answer or _async_wait_over(request, elapsed, budget_ms, give_up_ms)
        if answer is not None:
            return answer
        until = min(budget_ms, give_up_ms) if give_up_ms is not None else budget_ms
        time.sleep(min(wait, max(0.0, (until - elapsed) / 1000)))
        wait = min(wait * ASYNC_POLL_GROWTH, ASYNC_POLL_MAX_S)


@dataclass(frozen=True)
class _AsyncRequest:
    """A submitted asynchronous request: where its answer or failure will be, and the invoke check's message."""

    endpoint: str
    inference_id: str
    output: str | None
    failure: str | None

    @property
    def submitted(self) -> str:
        return f"submitted asynchronous request {self.inference_id}; SageMaker writes its answer to {self.output}"


def _submit_async(
    endpoint: str, payload: dict, locations: dict[str, str], s3, runtime, started: float, body: bodies.EndpointBody
) -> _AsyncRequest | _Answer:
    """The request as SageMaker accepted it, or the refused submit's answer."""
    log: dict[str, Any] = {}
    try:
        input_location = async_invoke.split_s3_uri(locations["input"], "input location")
    except async_invoke.RequestError as err:
        return _Answer(False, 0, problem=f"no submit: {err.message}")
    status_code, answer = async_invoke.submit(
        endpoint, payload, input_location=input_location, s3=s3, runtime=runtime, log=log, body=body
    )
    if status_code != 202:
        detail = f" [{log['aws_error']}]" if log.get("aws_error") else ""
        return _Answer(
            False,
            _elapsed_ms(started),
            problem=f"{status_code} {answer.get('error_type')}: {answer.get('error')}{detail}",
        )
    return _AsyncRequest(
        endpoint, answer["inference_id"], answer.get("output_location"), answer.get("failure_location")
    )


def _async_verdict(
    request: _AsyncRequest,
    state: dict[str, Any],
    elapsed: int,
    payload: dict,
    body: bodies.EndpointBody,
) -> _Answer | None:
    """The answer of a request SageMaker finished (completed or failed); None while it has not."""
    output, submitted = request.output, request.submitted
    if state["status"] == "completed":
        if state.get("output") is None:
            return _Answer(
                True,
                elapsed,
                submitted,
                problem=(
                    f"the answer at {output} is {state.get('size_bytes')} bytes, far more than a "
                    f"{payload['parameters']['max_new_tokens']}-token answer: read it and check the container"
                ),
            )
        try:
            outputs = body.outputs(state["output"])
        except ValueError as err:
            return _Answer(
                True, elapsed, submitted, problem=f"the answer at {output} is not a {body.kind} reply: {err}"
            )
        return _Answer(True, elapsed, submitted, outputs=outputs)
    if state["status"] == "failed":
        endpoint = request.endpoint
        return _Answer(
            True,
            elapsed,
            submitted,
            problem=(
                f"endpoint {endpoint} failed asynchronous request {request.inference_id}: "
                f"{str(state.get('error'))[:300]}; read its CloudWatch logs (/aws/sagemaker/Endpoints/{endpoint})"
            ),
        )
    return None


def _async_wait_over(request: _AsyncRequest, elapsed: int, budget_ms: int, give_up_ms: int | None) -> _Answer | None:
    """The answer when the wait is over without a verdict: the caller's time ran out (unawaited) or the budget is
    spent (a problem); None while the wait goes on."""
    output = request.output
    if give_up_ms is not None and give_up_ms < budget_ms and elapsed >= give_up_ms:
        return _Answer(
            True,
            elapsed,
            request.submitted,
            unawaited=(
                f"not awaited: endpoint {request.endpoint} is scaling up from zero, which may take up to {budget_ms} ms, "
                f"longer than this run may last ({give_up_ms} ms); run `python -m model_build smoke` (which waits "
                f"that long), or fetch the answer later with `python -m model_build result --output-location {output}`"
            ),
        )
    if elapsed >= budget_ms:
        return _Answer(
            True,
            elapsed,
            request.submitted,
            problem=(
                f"no answer to asynchronous request {request.inference_id} within the {budget_ms} ms budget "
                f"(smoke_test.latency_budget_ms): it is still queued or running. An endpoint at zero instances "
                f"starts one only after its HasBacklogWithoutCapacity alarm fires, then loads the model (minutes); "
                f"check ApproximateBacklogSize and the instance count, fetch the answer later with "
                f"`python -m model_build result --output-location {output}`, or raise the budget"
            ),
        )
    return None


# ---------------------------------------------------------------------------------------------------------------
# The chat check (an endpoint with a chat: block)


@dataclass(frozen=True)
class ChatSmoke:
    """What the chat check sends and through which route (EndpointPlan.smoke: chat_route, chat_tools).

    route: "openai", SageMaker's OpenAI route with a bearer token made from the smoke test's own credentials (the
      callers of chat.openai_route use it); "invoke", InvokeEndpoint with the chat request as the invoke function
      sends it. tools: also force one tool call (the engine has a tool-call parser). features: the endpoint's chat
      features, as the invoke function has them (chat_contract.CHAT_ENV).
    reasoning_field: where the engine puts a reasoning model's thinking (ContainerBodies.reasoning_field): a reply
      whose content is null while this field holds text is alive (the model was still thinking at max_tokens).
    extra: request fields that ask the engine to answer without thinking first (ContainerBodies.thinking_off).
    max_tokens: enough for a short answer, or for a reasoning model to show it is thinking; the forced tool call
      gets TOOL_CALL_MAX_TOKENS."""

    route: str
    tools: bool
    features: invoke_module.chat_contract.ChatFeatures
    max_tokens: int = 64
    reasoning_field: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# A forced get_weather call renders as about 20 tokens of JSON in the hermes or the harmony format.
TOOL_CALL_MAX_TOKENS = 128

# The forced call leaves the model no free text: its one argument is an enum of one value and no other property is
# allowed, so the engine's JSON grammar (vLLM 0.30.0: the tool's parameters as the request's structured output,
# vllm/tool_parsers/abstract_tool_parser.py adjust_request) fixes every character but whitespace, and a tiny
# random-weight model closes the call in budget (a tiny random Qwen3 on vLLM 0.30.0: in 54-89 of the 128 tokens,
# tests/local_runtime/test_serve_chat.py RECORDED_VLLM_TOOL_REPLY). The whitespace vLLM 0.30.0 lets the grammar allow is an engine
# setting only (--structured-outputs-config disable_any_whitespace, read by v1/structured_output/backend_xgrammar.py
# and backend_guidance.py from the engine's config; the request's own structured_outputs is replaced for a named
# tool_choice), so a request cannot ask for compact JSON: a call cut off by the budget is reported as such.
SMOKE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def chat_check(
    result: SmokeResult,
    endpoint: str,
    chat: ChatSmoke,
    *,
    session=None,
    runtime_client=None,
    inference_component: str | None = None,
) -> None:
    """Adds the check "chat" (a chat.completion with an assistant message) and, with chat.tools, "tool_call" (a
    request that names get_weather as tool_choice answers with that call and JSON-object arguments)."""
    session = session or boto3.session.Session()
    runtime = runtime_client or make_runtime_client(session)
    ask = chat_request(chat)
    status, reply, how = _chat_exchange(endpoint, ask, chat, session, runtime, inference_component)
    problem = _chat_problem(status, reply, reasoning_field=chat.reasoning_field)
    if problem is None:
        message = reply["choices"][0]["message"]
        thinking = message.get("content") is None and not message.get("tool_calls")
        shown = (
            f"reasoning only in {chat.reasoning_field}: still thinking at max_tokens {chat.max_tokens}"
            if thinking
            else "content"
        )
        result.add("chat", True, f"{how}: a chat.completion ({reply['choices'][0].get('finish_reason')}; {shown})")
    else:
        result.add("chat", False, f"{how}: {problem}")
    if not chat.tools or problem is not None:
        return
    status, reply, how = _chat_exchange(endpoint, tool_call_request(chat), chat, session, runtime, inference_component)
    problem = _chat_problem(status, reply, need_text=False) or _tool_call_problem(reply)
    result.add("tool_call", problem is None, f"{how}: {problem}" if problem else f"{how}: called get_weather")


def chat_request(chat: ChatSmoke) -> dict[str, Any]:
    """The chat check's request: one question, max_tokens, and the engine's thinking-off fields."""
    return {
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": chat.max_tokens,
        **chat.extra,
    }


def tool_call_request(chat: ChatSmoke) -> dict[str, Any]:
    """The tool_call check's request: get_weather named as tool_choice (the engine must call it)."""
    return {
        **chat_request(chat),
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [SMOKE_TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "max_tokens": TOOL_CALL_MAX_TOKENS,
    }


def _chat_exchange(
    endpoint: str, request: dict, chat: ChatSmoke, session, runtime, component: str | None
) -> tuple[int, Any, str]:
    if chat.route == "openai":
        url = openai_route.chat_url(runtime.meta.endpoint_url, endpoint, component)
        credentials = session.get_credentials()
        if credentials is None:
            return 0, "no AWS credentials to make a bearer token from", "OpenAI route"
        token = openai_route.bearer_token(credentials, runtime.meta.region_name)
        try:
            status, reply = openai_route.post_chat(url, token, request)
        except OSError as err:
            return 0, f"could not reach {url}: {err}", "OpenAI route"
        return status, reply, "OpenAI route"
    status, reply = invoke_module.invoke_chat(
        endpoint, request, client=runtime, inference_component=component, feats=chat.features
    )
    return status, reply, "InvokeEndpoint"


def _chat_problem(status: int, reply: Any, need_text: bool = True, reasoning_field: str | None = None) -> str | None:
    """None for a chat.completion whose first choice is an assistant message (with content, tool calls, or text in
    the engine's reasoning field, when need_text), else what is wrong."""
    if status != 200:
        error = reply.get("error") if isinstance(reply, dict) else None
        message = error.get("message") if isinstance(error, dict) else (error or reply)
        if status == 503 and isinstance(reply, dict) and reply.get("retry_after_s"):
            return f"503: {message} (the endpoint is starting capacity; retry after {reply['retry_after_s']} s)"
        return f"{status or 'no answer'}: {str(message)[:300]}"
    choices = reply.get("choices") if isinstance(reply, dict) else None
    message = (
        choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    )
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return f"the answer is not a chat.completion with an assistant message: {json.dumps(reply)[:200]}"
    thinking = (
        bool(reasoning_field) and isinstance(message.get(reasoning_field), str) and bool(message[reasoning_field])
    )
    if need_text and not isinstance(message.get("content"), str) and not message.get("tool_calls") and not thinking:
        return "the assistant message has neither content nor tool_calls" + (
            f" nor reasoning ({reasoning_field})" if reasoning_field else ""
        )
    return None


def _tool_call_problem(reply: dict) -> str | None:
    """None for a get_weather call with JSON-object arguments; else what the reply held: a call cut off by
    TOOL_CALL_MAX_TOKENS (finish_reason "length") with the partial call or text, or no call at all."""
    choice = reply["choices"][0]
    message = choice["message"]
    finish = choice.get("finish_reason")
    calls = message.get("tool_calls") or []
    first = calls[0] if calls and isinstance(calls[0], dict) else None
    function = first.get("function") if first is not None else None
    raw_arguments = function.get("arguments") if isinstance(function, dict) else None
    try:
        arguments = json.loads(raw_arguments) if isinstance(raw_arguments, (str, bytes, bytearray)) else None
    except ValueError:
        arguments = None
    if isinstance(function, dict) and function.get("name") == "get_weather" and isinstance(arguments, dict):
        return None
    seen = _tool_call_seen(calls, message.get("content"))
    if finish == "length":
        return (
            f"asked to call get_weather, the answer was cut off at max_tokens {TOOL_CALL_MAX_TOKENS} (finish_reason "
            f"'length') before the call closed; it held {seen}: the model spent its budget inside the call (not a "
            "tool_call_parser problem)"
        )
    if not calls:
        return (
            f"asked to call get_weather (a named tool_choice), the model answered without a tool call (finish_reason "
            f"{finish!r}; it held {seen}): check the engine's tool_call_parser"
        )
    return f"the tool call is not get_weather with JSON-object arguments (finish_reason {finish!r}): {seen}"


def _tool_call_seen(calls: list, content: Any) -> str:
    """What a tool-call reply held, for the check's message: the (partial) call, else its text, else nothing."""
    if calls:
        return f"the call {json.dumps(calls[0])[:200]}"
    if isinstance(content, str) and content.strip():
        return f"the text {content[:200]!r}"
    return "no call and no text" + (" (whitespace only)" if isinstance(content, str) and content else "")


# ---------------------------------------------------------------------------------------------------------------
# Lambda entry point


def settings_from_env() -> dict[str, Any]:
    stack = os.environ.get("STACK_NAME", "").strip()
    if not stack:
        raise SetupError("environment variable STACK_NAME is not set: this function does not know which stack to check")
    mode = os.environ.get("INVOCATION_MODE", "").strip() or "real-time"
    if mode not in ("real-time", "async"):
        raise SetupError(f"environment variable INVOCATION_MODE must be real-time or async, got {mode!r}")
    async_locations = None
    if mode == "async":
        async_locations = {}
        for key in ("input", "output", "failure"):
            name = f"{key.upper()}_LOCATION"
            value = os.environ.get(name, "").strip()
            if not value.startswith("s3://"):
                raise SetupError(f"environment variable {name} must be an s3://bucket/prefix location, got {value!r}")
            async_locations[key] = value
    return {
        "stack_name": stack,
        "expected_endpoint": os.environ.get("ENDPOINT_NAME", "").strip() or None,
        "prompt": _required("PROMPT"),
        # SMOKE_MAX_NEW_TOKENS: the smoke prompt's length where the stack sets it apart from the endpoint's limit
        "max_new_tokens": _required_int(
            "SMOKE_MAX_NEW_TOKENS" if os.environ.get("SMOKE_MAX_NEW_TOKENS", "").strip() else "MAX_NEW_TOKENS",
            1,
            contract.limits().max_new_tokens,
        ),
        "latency_budget_ms": _required_int("LATENCY_BUDGET_MS", 1, LAMBDA_MAX_RUN_MS),
        "emulator": os.environ.get("EMULATOR", "").strip().lower() == "true",
        "inference_component": os.environ.get("INFERENCE_COMPONENT_NAME", "").strip() or None,
        "async_locations": async_locations,
        "wake_budget_ms": (
            _required_int("WAKE_BUDGET_MS", 1, WAKE_BUDGET_MAX_MS)
            if os.environ.get("WAKE_BUDGET_MS", "").strip()
            else None
        ),
        "chat": chat_settings_from_env(),
        "body": bodies.EndpointBody.from_env(),
        "adapters": invoke_module.adapter_components_from_env() or None,
    }


def chat_settings_from_env() -> ChatSmoke | None:
    """SMOKE_CHAT_ROUTE (openai | invoke; unset: no chat check), SMOKE_CHAT_TOOLS (true/false) and the endpoint's
    chat features (chat_contract.CHAT_ENV), as the stack sets them from the plan."""
    route = os.environ.get("SMOKE_CHAT_ROUTE", "").strip()
    if not route:
        return None
    if route not in ("openai", "invoke"):
        raise SetupError(f"environment variable SMOKE_CHAT_ROUTE must be openai or invoke, got {route!r}")
    tools = os.environ.get("SMOKE_CHAT_TOOLS", "false").strip().lower()
    if tools not in ("true", "false"):
        raise SetupError(f"environment variable SMOKE_CHAT_TOOLS must be true or false, got {tools!r}")
    raw_extra = os.environ.get("SMOKE_CHAT_EXTRA", "").strip() or "{}"
    try:
        extra = json.loads(raw_extra)
    except ValueError:
        extra = None
    if not isinstance(extra, dict):
        raise SetupError(f"environment variable SMOKE_CHAT_EXTRA must be a JSON object, got {raw_extra[:80]!r}")
    return ChatSmoke(
        route,
        tools == "true",
        invoke_module.chat_contract.features(),
        reasoning_field=bodies.reasoning_field_from_env(),
        extra=extra,
    )


def _required(name: str) -> str:
    value = os.environ.get(name, "")
    if not value.strip():
        raise SetupError(f"environment variable {name} is not set (the stack sets it from the endpoint's smoke_test)")
    return value


def _required_int(name: str, low: int, high: int) -> int:
    _required(name)
    return contract.env_int(name, low, low, high)


def handler(event: Any, context: Any = None, *, session=None, runtime_client=None) -> dict:
    # The function's own end (Lambda context): a wait for a scale-up from zero stops before it, unjudged.
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    must_end_within_ms = max(0, remaining() - LAMBDA_END_MARGIN_MS) if remaining is not None else None
    try:
        result = smoke_test(
            **settings_from_env(), must_end_within_ms=must_end_within_ms, session=session, runtime_client=runtime_client
        ).to_dict()
    except SetupError as err:
        result = {"ok": False, "failures": [f"configuration: {err}"], "checks": []}
    # The model's text is not logged; the checks and their messages are.
    invoke_module.log_record({"message": "smoke", "request_id": getattr(context, "aws_request_id", None), **result})
    return result
