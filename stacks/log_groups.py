"""Log groups the stacks own: a retention from the config and deleted with the stack."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs
from constructs import Construct

from deployment.config_blocks import LOG_RETENTION


def retention(days: int) -> logs.RetentionDays:
    """jsii names RetentionDays members, not day counts: LOG_RETENTION maps one to the other (the config allows only
    these values)."""
    if days not in LOG_RETENTION:
        raise ValueError(
            f"log retention {days} days is not one CloudWatch Logs offers; allowed: {', '.join(map(str, LOG_RETENTION))}"
        )
    return logs.RetentionDays[LOG_RETENTION[days]]


def owned_log_group(
    scope: Construct, construct_id: str, *, retention_days: int, name: str | None = None
) -> logs.LogGroup:
    """A log group this stack owns (destroy removes it), named `name` when the service writes to a fixed one."""
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=name,
        retention=retention(retention_days),
        removal_policy=RemovalPolicy.DESTROY,
    )


__all__ = ["owned_log_group", "retention"]
