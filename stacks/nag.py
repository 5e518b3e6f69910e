"""cdk-nag (AwsSolutions) on every synth, and acknowledgements kept beside the constructs they concern."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Acknowledgment, App, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import Construct, IConstruct


def add_nag_checks(app: App) -> None:
    """Run the AwsSolutions pack at synth; any unacknowledged finding fails the synth with a report."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(
    construct: IConstruct,
    rule_ids: str | Iterable[str],
    reason: str,
    *,
    path_suffix: str | None = None,
) -> None:
    """Acknowledge specific AwsSolutions findings on one construct (and its children), each with its reason.

    `path_suffix` picks a child of `construct` by its id, for constructs CDK creates behind our back
    (for example the auto-delete-objects provider, a stack-level singleton).
    """
    ids = [rule_ids] if isinstance(rule_ids, str) else list(rule_ids)
    target: IConstruct = construct
    if path_suffix is not None:
        found = construct.node.try_find_child(path_suffix)
        if found is None:
            raise ValueError(f"no construct {path_suffix!r} under {construct.node.path}")
        target = found
    Validations.of(target).acknowledge(
        *[Acknowledgment(id=f"AwsSolutions::{rule_id}", reason=reason) for rule_id in ids]
    )


def logical_id(construct: IConstruct) -> str:
    """The logical id cdk-nag prints (as `<id>` or `<id.Arn>`) for a construct's CloudFormation resource, for
    finding ids that name a resource CDK generates (CDK Pipelines' artifact bucket and projects). CDK derives it from
    the construct path, so an acknowledgement built with it is keyed on that path, not on a copied hash."""
    cfn = construct if hasattr(construct, "logical_id") else construct.node.default_child
    stack = Stack.of(cfn)
    return stack.resolve(stack.get_logical_id(cfn))


__all__ = ["Construct", "acknowledge", "add_nag_checks", "logical_id"]
