"""The environment converges on its config (issue 33 item 3, operations review F1).

Every stack of an environment carries the tags `llm-endpoints:project` and `llm-endpoints:environment`
(stacks/__init__.py tag_environment; CDK passes a stack's tags to CloudFormation, which lists them with the stack in
DescribeStacks). So the environment's stacks are found by those tags, not by the config, and a stack the config no
longer names (an endpoint removed from the file) is an orphan: it keeps serving, and billing, from the artifact
bucket.

- `make deploy` shows the orphans and refuses, naming them and the flag that deletes them (`--delete-orphans`,
  `make deploy ... DELETE_ORPHANS=1`); with the flag it deletes them after the config's stacks deployed.
- `make destroy` deletes every endpoint stack of the environment, orphans included, before anything that holds data,
  and refuses to delete the artifact stack (whose bucket `retain_data: false` deletes with its objects) while any
  other stack of the environment is still there: nothing still running loses the model it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deployment import EnvironmentPlan

PROJECT_TAG, ENVIRONMENT_TAG, ENDPOINT_TAG = (
    "llm-endpoints:project",
    "llm-endpoints:environment",
    "llm-endpoints:endpoint",
)
# CloudFormation's waiter for DeleteStack (botocore cloudformation waiters-2.json stack_delete_complete: every 30 s, up
# to 120 times); a SageMaker endpoint's deletion takes minutes.
DELETE_WAIT = {"Delay": 15, "MaxAttempts": 240}


class ConvergeError(Exception):
    """The environment does not match its config and the user has not said what to do; the message says what to run."""


@dataclass(frozen=True)
class EnvironmentStack:
    name: str
    status: str
    endpoint: str | None  # the llm-endpoints:endpoint tag: the endpoint it serves (None: the artifact stack)

    def describe(self) -> str:
        what = f"endpoint {self.endpoint}" if self.endpoint else "no endpoint tag"
        return f"{self.name} ({what}, {self.status})"


def environment_stacks(environment_plan: EnvironmentPlan, session: Any) -> list[EnvironmentStack]:
    """Every stack of the account and region that carries this environment's project and environment tags."""
    cfn = session.client("cloudformation")
    found = []
    for page in cfn.get_paginator("describe_stacks").paginate():
        for stack in page["Stacks"]:
            tags = {t["Key"]: t["Value"] for t in stack.get("Tags") or []}
            if (
                tags.get(PROJECT_TAG) == environment_plan.project
                and tags.get(ENVIRONMENT_TAG) == environment_plan.environment_name
                and stack["StackStatus"] != "DELETE_COMPLETE"
            ):
                found.append(EnvironmentStack(stack["StackName"], stack["StackStatus"], tags.get(ENDPOINT_TAG)))
    return sorted(found, key=lambda s: s.name)


def config_stack_names(environment_plan: EnvironmentPlan) -> set[str]:
    return {environment_plan.stack_name("artifacts")} | {plan.stack_name for plan in environment_plan.plans}


def orphans(environment_plan: EnvironmentPlan, session: Any) -> list[EnvironmentStack]:
    """The environment's stacks that its config no longer names."""
    named = config_stack_names(environment_plan)
    return [s for s in environment_stacks(environment_plan, session) if s.name not in named]


def refusal(environment_plan: EnvironmentPlan, found: list[EnvironmentStack]) -> str:
    config, env = environment_plan.config_path, environment_plan.environment_name
    return (
        f"environment {env} has {len(found)} stack(s) that {config} no longer names; they keep running (and billing) "
        "and read the artifact bucket:\n  - "
        + "\n  - ".join(s.describe() for s in found)
        + f"\nadd them back to the config, or delete them: `make deploy CONFIG={config} ENV={env} DELETE_ORPHANS=1` "
        f"(python -m workstation deploy --config {config} --env {env} --delete-orphans)"
    )


def check_orphans(
    environment_plan: EnvironmentPlan, session: Any, *, delete: bool, echo: Callable[[str], None] = print
) -> list[EnvironmentStack]:
    """Before a deploy: the orphans, shown; ConvergeError unless `delete` (then the caller deletes them once the
    config's stacks are deployed, with `delete_stacks`)."""
    found = orphans(environment_plan, session)
    if not found:
        return []
    echo(f"==> {len(found)} stack(s) of environment {environment_plan.environment_name} not in the config:")
    for stack in found:
        echo(f"    {stack.describe()}")
    if not delete:
        raise ConvergeError(refusal(environment_plan, found))
    return found


def delete_stacks(stacks: list[EnvironmentStack], session: Any, *, echo: Callable[[str], None] = print) -> None:
    """DeleteStack each (CloudFormation deletes its endpoint, model and config), then wait for all of them."""
    cfn = session.client("cloudformation")
    for stack in stacks:
        echo(f"==> delete stack {stack.describe()}")
        cfn.delete_stack(StackName=stack.name)
    for stack in stacks:
        try:
            cfn.get_waiter("stack_delete_complete").wait(StackName=stack.name, WaiterConfig=DELETE_WAIT)
        except Exception as err:  # botocore WaiterError: the stack ended DELETE_FAILED or the wait ran out
            raise ConvergeError(
                f"stack {stack.name} was not deleted ({err}); see its events: `aws cloudformation "
                f"describe-stack-events --stack-name {stack.name}`"
            ) from None
        echo(f"    deleted {stack.name}")


def destroy_orphans_first(
    environment_plan: EnvironmentPlan, session: Any, *, echo: Callable[[str], None] = print
) -> None:
    """`make destroy`'s first step: the environment's stacks the config no longer names, deleted."""
    found = orphans(environment_plan, session)
    if found:
        echo(f"==> {len(found)} stack(s) of environment {environment_plan.environment_name} not in the config")
        delete_stacks(found, session, echo=echo)


def refuse_while_readers_run(environment_plan: EnvironmentPlan, session: Any) -> None:
    """Before the artifact stack (and its bucket) goes: every other stack of the environment is gone, else
    ConvergeError naming them (F1: the bucket of a still-running endpoint's model was deleted)."""
    artifacts = environment_plan.stack_name("artifacts")
    running = [s for s in environment_stacks(environment_plan, session) if s.name != artifacts]
    if running:
        raise ConvergeError(
            f"not deleting {artifacts} (its bucket holds the models): these stacks of environment "
            f"{environment_plan.environment_name} still run and read it:\n  - "
            + "\n  - ".join(s.describe() for s in running)
            + "\ndelete them (see their events if their deletion failed), then run `make destroy` again"
        )


__all__ = [
    "ENDPOINT_TAG",
    "ENVIRONMENT_TAG",
    "PROJECT_TAG",
    "ConvergeError",
    "EnvironmentStack",
    "check_orphans",
    "delete_stacks",
    "destroy_orphans_first",
    "environment_stacks",
    "orphans",
    "refuse_while_readers_run",
]
