"""The endpoint stack's smoke check: a CloudFormation custom resource (lambda/smoke_check/handler.py) that runs the
smoke test (endpoint_runtime/smoke.py `smoke_test`) on the endpoint the stack is deploying, after SageMaker reports
it in service (the resource depends on the endpoint, its inference component and adapters: CloudFormation waits for
each to be InService before it creates or updates what depends on it).

A failed check answers FAILED, so the stack operation fails and CloudFormation rolls the stack back to its previous
template ("If a resource fails to create or update, CloudFormation rolls back the stack": the User Guide's stack
failure options; for a custom resource, a FAILED response fails the resource: "Custom resource response objects"),
whichever tool deployed it: `cdk deploy`, `make deploy`, the pipeline. Create and Update run the checks (Update: any
of the properties changed, and they name what is checked: the endpoint, its config, models, component, the
artifact and adapter hashes, the smoke settings); Delete does nothing.

Properties: EndpointName, EndpointConfigName, ModelNames (list) and the identities that only re-run it.
Environment: the smoke function's (endpoint_runtime/smoke.py settings_from_env). IAM: what smoke_test calls without
the stack calls (stacks/llm_endpoint.py grant_smoke_check).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from endpoint_runtime import smoke

# CloudFormation shows Reason in the stack events and reads at most 4096 bytes of a response (User Guide, custom
# resource response objects).
MAX_REASON_CHARS = 1500
RESPONSE_TIMEOUT_S = 10


def respond(event: dict[str, Any], status: str, reason: str, physical_id: str) -> None:
    """PUT the custom resource response to the request's pre-signed ResponseURL (no content type: the URL is signed
    without one)."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:MAX_REASON_CHARS] or status,
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
        }
    ).encode("utf-8")
    request = urllib.request.Request(
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_S) as answer:
        answer.read()


def run_checks(props: dict[str, Any], context: Any = None, *, session=None, runtime_client=None) -> smoke.SmokeResult:
    """The smoke test of the endpoint the properties name, within the function's remaining time."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    must_end_within_ms = max(0, remaining() - smoke.LAMBDA_END_MARGIN_MS) if remaining is not None else None
    models = props.get("ModelNames") or []
    return smoke.smoke_test(
        **smoke.settings_from_env(),
        must_end_within_ms=must_end_within_ms,
        session=session,
        runtime_client=runtime_client,
        deployed=(str(props["EndpointName"]), str(props["EndpointConfigName"]), [str(m) for m in models]),
    )


def verdict(result: smoke.SmokeResult) -> tuple[str, str]:
    """(SUCCESS or FAILED, the reason CloudFormation shows): every check, failures first."""
    lines = [f"{c.label} {c.name}: {c.message}" for c in result.failures] or [
        f"{c.label} {c.name}: {c.message}" for c in result.checks
    ]
    head = f"smoke test of endpoint {result.endpoint} " + ("passed" if result.ok else "failed")
    return ("SUCCESS" if result.ok else "FAILED"), head + ": " + "; ".join(lines)


def handler(event: dict[str, Any], context: Any = None, *, session=None, runtime_client=None) -> None:
    props = event.get("ResourceProperties") or {}
    physical_id = event.get("PhysicalResourceId") or f"smoke-check-{props.get('EndpointName', 'endpoint')}"
    try:
        if event.get("RequestType") == "Delete":
            respond(event, "SUCCESS", "nothing to delete", physical_id)
            return
        result = run_checks(props, context, session=session, runtime_client=runtime_client)
        status, reason = verdict(result)
        # The checks and their messages are logged (the model's text is not): the function's log group shows the run.
        print(json.dumps({"message": "smoke_check", "request": event.get("RequestType"), **result.to_dict()}))
    except smoke.SetupError as err:
        status, reason = "FAILED", f"the smoke check is misconfigured: {err}"
        print(json.dumps({"message": "smoke_check", "problem": reason}))
    except Exception as err:  # answer anyway: CloudFormation would otherwise wait for the resource's ServiceTimeout
        status, reason = "FAILED", f"the smoke check failed to run: {type(err).__name__}: {err}"
        print(json.dumps({"message": "smoke_check", "problem": reason}))
    respond(event, status, reason, physical_id)


__all__ = ["handler", "respond", "run_checks", "verdict"]
