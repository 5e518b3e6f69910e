"""The AWS session of an environment and the account its credentials belong to: one helper for every command
that talks to AWS from a workstation or CodeBuild (publish, smoke, deploy/destroy, the demo).

boto3 is imported when a function runs: the CDK app and the CLI's error paths import model_build without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deployment import EnvironmentPlan


class AccountError(Exception):
    """The credentials give no account, or the wrong one; the message says what to do."""


def session_for(environment: Any = None, *, region: str | None = None):
    """A boto3 session in the environment's region (`endpoint_config.Environment`; None: the AWS CLI settings')."""
    import boto3

    return boto3.session.Session(region_name=region or getattr(environment, "region", None))


def caller_account(session: Any, region: str | None = None) -> str:
    """The account of the session's credentials (sts get-caller-identity). Raises AccountError."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        return session.client("sts", region_name=region).get_caller_identity()["Account"]
    except NoCredentialsError:
        raise AccountError("no AWS credentials: configure a profile (AWS_PROFILE) or AWS_* variables") from None
    except (ClientError, BotoCoreError) as err:
        raise AccountError(f"cannot resolve the AWS account (sts get-caller-identity): {err}") from None


def account_mismatch(environment_plan: EnvironmentPlan, account: str) -> str | None:
    """What is wrong when the environment names an account and the credentials are another one's, else None."""
    want = environment_plan.environment.account
    if not want or want == account:
        return None
    return (
        f"environment {environment_plan.environment_name!r} is account {want}, but the credentials are account {account}; "
        f"use credentials of {want}"
    )


def checked_account(environment_plan: EnvironmentPlan, session: Any, region: str | None = None) -> str:
    """The credentials' account, which must be the environment's when it names one. Raises AccountError."""
    account = caller_account(session, region)
    problem = account_mismatch(environment_plan, account)
    if problem:
        raise AccountError(problem)
    return account


__all__ = ["AccountError", "account_mismatch", "caller_account", "checked_account", "session_for"]
