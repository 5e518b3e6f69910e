"""A pipeline role trusted to assume a narrow role in an environment's stack, and the fixed role names both sides use."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_iam as iam


def role_name(*parts: str) -> str:
    """A fixed IAM role name (<= 64 characters): both accounts must know it before either role exists."""
    name = "-".join(parts)
    if len(name) <= 64:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:55]}-{digest}"


@dataclass(frozen=True)
class TrustedPipeline:
    """The pipeline account and the name of its one role (a CodeBuild step's) that may assume a stack's role.

    Trust is by name (`aws:PrincipalArn`), which survives the pipeline role's re-creation, unlike a role ARN
    principal."""

    account: str
    role_name: str

    def principal(self, stack: Stack) -> iam.IPrincipal:
        return iam.AccountPrincipal(self.account).with_conditions(
            {"ArnEquals": {"aws:PrincipalArn": f"arn:{stack.partition}:iam::{self.account}:role/{self.role_name}"}}
        )


__all__ = ["TrustedPipeline", "role_name"]
