"""F7/F8 of the 2026-11-27 reliability probe: an AWS refusal no command handles (publish's HeadObject answered 403,
clean --delete's DeleteObjects denied) ended `python -m model_build` in a ClientError traceback with exit 1. Any
ClientError or BotoCoreError that escapes a command is now one error line naming the operation, AWS's code and
message, exit 2. AWS's answer is a stand-in: botocore's Stubber makes the real S3 client raise it, and the command
is replaced by one that makes that call (any command: the handling is main()'s)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from model_build import cli


def _denied(operation: str, code: str, status: int):
    def run(args) -> int:
        client = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        with Stubber(client) as stub:
            stub.add_client_error(
                operation, service_error_code=code, service_message="Access Denied", http_status_code=status
            )
            if operation == "head_object":
                client.head_object(Bucket="b", Key="k")
            else:
                client.delete_objects(Bucket="b", Delete={"Objects": [{"Key": "k"}]})
        return 0

    return run


@pytest.mark.parametrize(
    "command, operation, code, status, shown",
    [
        ("publish", "head_object", "403", 403, "AWS refused HeadObject: 403"),
        ("clean", "delete_objects", "AccessDenied", 403, "AWS refused DeleteObjects: AccessDenied: Access Denied"),
    ],
)
def test_an_unhandled_aws_refusal_is_one_error_line_and_exit_2(
    monkeypatch, capsys, tmp_path, command, operation, code, status, shown
) -> None:
    monkeypatch.setattr(cli, f"cmd_{command}", _denied(operation, code, status))
    argv = [command, "--config", str(tmp_path / "unused.yaml")] + (["--endpoint", "x"] if command == "publish" else [])
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert captured.err.startswith(f"error: {command}: {shown}"), captured.err
    assert "the command stopped there" in captured.err


def test_other_exceptions_keep_their_traceback(monkeypatch, tmp_path) -> None:
    """A bug is not dressed up as a user error."""

    def broken(args) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cli, "cmd_clean", broken)
    with pytest.raises(ZeroDivisionError):
        cli.main(["clean", "--config", str(tmp_path / "unused.yaml")])
