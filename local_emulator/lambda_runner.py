"""Run a Lambda function's deployed code package on this machine, as Lambda runs it.

moto's Lambda runs code only in Docker (moto/awslambda/models.py `_invoke_lambda`), which this machine has not, so
the emulator (local_emulator/server.py) runs it here instead: the function's deployed zip, unpacked, in a subprocess
of the runtime it names (a `python3.*` function with this venv's python, a `nodejs*` function with the Node that
package.json installs), through a small bootstrap that imports the handler and passes the event and a context
(lambda_bootstrap.py / lambda_bootstrap.js). The process gets the function's environment variables, Lambda's own
(AWS_LAMBDA_FUNCTION_NAME, ...), the emulator's endpoint and credentials, and the function's timeout; what it prints
is the function's log, which the emulator writes to the function's CloudWatch Logs group. The repository is not on
the process's import path: a function runs from what its package holds, as on AWS.

Node functions find the AWS SDK for JavaScript v3 as Lambda's Node runtimes provide it (require('@aws-sdk/...'),
https://docs.aws.amazon.com/lambda/latest/dg/lambda-nodejs.html "Runtime-included SDK versions"): here from
node_modules (package.json's devDependencies), or the folder LOCAL_LAMBDA_NODE_PATH names.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
PYTHON_BOOTSTRAP = HERE / "lambda_bootstrap.py"
NODE_BOOTSTRAP = HERE / "lambda_bootstrap.js"
# The emulator's URL and the settings every function gets on it (set by moto_server.start in the server's environment).
EMULATOR_URL_ENV = "LOCAL_EMULATOR_URL"
LAMBDA_ENV_ENV = "LOCAL_EMULATOR_LAMBDA_ENV"
NODE_PATH_ENV = "LOCAL_LAMBDA_NODE_PATH"
# Lambda's default timeout when a function names none (CreateFunction Timeout: "The default is 3 seconds").
DEFAULT_TIMEOUT_S = 3
_unpack_lock = threading.Lock()


class LambdaRunError(Exception):
    """The function could not be started at all (no code, a runtime this machine cannot run)."""


@dataclass(frozen=True)
class Function:
    """What Lambda knows of a function when it invokes it."""

    name: str
    arn: str
    runtime: str
    handler: str
    code: bytes  # the deployed .zip
    timeout_s: int = DEFAULT_TIMEOUT_S
    memory_mb: int = 128
    region: str = "us-east-1"
    environment: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Invocation:
    """The outcome of one invocation: the function's JSON result (or Lambda's error object), the error kind as
    Lambda's X-Amz-Function-Error header says it ("Unhandled"), and every line it logged."""

    payload: bytes
    error: str | None
    log_lines: list[str]
    request_id: str


def code_directory(code: bytes, cache: Path | None = None) -> Path:
    """The function's zip unpacked (once per content: the folder is named by its sha256)."""
    if not code:
        raise LambdaRunError("the function has no code package")
    digest = hashlib.sha256(code).hexdigest()
    base = cache or Path(tempfile.gettempdir()) / f"local-lambda-{os.getuid()}"
    target = base / digest
    with _unpack_lock:
        if not target.is_dir():
            scratch = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=_made(base)))
            with zipfile.ZipFile(io.BytesIO(code)) as archive:
                for info in archive.infolist():
                    archive.extract(info, scratch)
                    mode = info.external_attr >> 16
                    if mode and not info.is_dir():  # the zip keeps each file's mode (a start script's 755)
                        os.chmod(scratch / info.filename, mode & 0o777)
            scratch.rename(target)
    return target


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _command(function: Function, code_dir: Path, event_path: Path, result_path: Path, deadline_ms: int) -> list[str]:
    args = [str(code_dir), function.handler, str(event_path), str(result_path), str(deadline_ms)]
    if function.runtime.startswith("python"):
        return [sys.executable, "-I", str(PYTHON_BOOTSTRAP), *args]
    if function.runtime.startswith("nodejs"):
        node = shutil.which("node", path=str(ROOT / "node_modules" / ".bin")) or shutil.which("node")
        if node is None:
            raise LambdaRunError(f"function {function.name}: runtime {function.runtime} needs node; none found")
        return [node, str(NODE_BOOTSTRAP), *args]
    raise LambdaRunError(
        f"function {function.name}: runtime {function.runtime!r} is not one the emulator runs (python3.*, nodejs*)"
    )


def _environment(function: Function, request_id: str, extra: dict[str, str]) -> dict[str, str]:
    """Lambda's reserved variables, the function's own, the emulator's endpoint and credentials."""
    emulator_url = os.environ.get(EMULATOR_URL_ENV, "")
    settings = json.loads(os.environ.get(LAMBDA_ENV_ENV, "") or "{}")
    node_path = os.environ.get(NODE_PATH_ENV) or str(ROOT / "node_modules")
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        "HOME": tempfile.gettempdir(),
        "NODE_PATH": node_path,
        "AWS_LAMBDA_FUNCTION_NAME": function.name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function.name}",
        "AWS_EXECUTION_ENV": f"AWS_Lambda_{function.runtime}",
        "_HANDLER": function.handler,
        "AWS_REGION": function.region,
        "AWS_DEFAULT_REGION": function.region,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        **({"AWS_ENDPOINT_URL": emulator_url} if emulator_url else {}),
        **settings,
        **function.environment,
        **extra,
        "_LOCAL_LAMBDA_REQUEST_ID": request_id,
        "_LOCAL_LAMBDA_FUNCTION_ARN": function.arn,
    }


def invoke(function: Function, event: object, *, extra_env: dict[str, str] | None = None) -> Invocation:
    """Run the function once with `event`, within its timeout; never raises for what the function does."""
    request_id = str(uuid.uuid4())
    code_dir = code_directory(function.code)
    started = time.monotonic()
    deadline_ms = int(time.time() * 1000) + function.timeout_s * 1000
    log = [f"START RequestId: {request_id} Version: $LATEST"]
    payload: object
    error: str | None
    with tempfile.TemporaryDirectory(prefix="local-lambda-run-") as scratch:
        event_path, result_path = Path(scratch) / "event.json", Path(scratch) / "result.json"
        event_path.write_text(json.dumps(event))
        command = _command(function, code_dir, event_path, result_path, deadline_ms)
        try:
            done = subprocess.run(
                command,
                cwd=code_dir,
                env=_environment(function, request_id, extra_env or {}),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=function.timeout_s,
            )
            output, timed_out, code = done.stdout, False, done.returncode
        except subprocess.TimeoutExpired as expired:
            output, timed_out, code = expired.stdout or b"", True, None
        log.extend(output.decode("utf-8", errors="replace").splitlines())
        elapsed_ms = (time.monotonic() - started) * 1000
        if timed_out:
            message = f"Task timed out after {function.timeout_s:.2f} seconds"
            log.append(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {request_id} {message}")
            payload, error = {"errorMessage": message, "errorType": "Sandbox.Timedout"}, "Unhandled"
        elif result_path.is_file():
            answer = json.loads(result_path.read_text())
            payload, error = (answer["error"], "Unhandled") if "error" in answer else (answer["result"], None)
        else:
            payload = {"errorMessage": f"the runtime exited with code {code}", "errorType": "Runtime.ExitError"}
            error = "Unhandled"
    log.append(f"END RequestId: {request_id}")
    log.append(f"REPORT RequestId: {request_id}\tDuration: {elapsed_ms:.2f} ms\tMemory Size: {function.memory_mb} MB")
    return Invocation(json.dumps(payload).encode(), error, log, request_id)


__all__ = ["Function", "Invocation", "LambdaRunError", "code_directory", "invoke"]
