"""Start and stop a local AWS emulator (moto in server mode) and point AWS clients at it.

Used by `make demo` and by the tests. The emulator is a separate process on a free loopback port, so the
CDK CLI (Node) and boto3 (Python) talk to the same state, and stopping it leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from local_runtime.process import stop_process

# moto's fixed account id; a config's emulator environment must use it.
EMULATOR_ACCOUNT = "123456789012"
EMULATOR_REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Emulator:
    port: int
    process: subprocess.Popen
    log_path: Path
    region: str = EMULATOR_REGION
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        # "localhost", not 127.0.0.1: moto only parses path-style S3 template URLs whose host says localhost.
        return f"http://localhost:{self.port}"

    def client_env(self) -> dict[str, str]:
        """Environment for any AWS client (boto3, the CDK CLI) so that it talks to the emulator only."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            **self.extra_env,
        }

    @contextmanager
    def activated(self) -> Iterator[None]:
        """Point this process's boto3 clients at the emulator for the duration of the block."""
        saved = {k: os.environ.get(k) for k in self.client_env()}
        os.environ.update(self.client_env())
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def reset(self) -> None:
        """Forget every resource (moto's reset API), so one emulator can serve many tests."""
        req = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def set_invoke_results(self, bodies: list, account: str = EMULATOR_ACCOUNT) -> None:
        """Queue the answers moto's InvokeEndpoint gives (it never runs a model): one JSON body per call."""
        results = [
            {"Body": b if isinstance(b, str) else json.dumps(b), "ContentType": "application/json"} for b in bodies
        ]
        self._queue("endpoint-results", results, account)

    def set_async_results(
        self, results: list[tuple[bool, Any]], account: str = EMULATOR_ACCOUNT, region: str | None = None
    ) -> None:
        """Queue what moto's InvokeEndpointAsync calls produce, (is_failure, answer) each: moto writes the answer (or
        the failure text) into a bucket of its own at once and returns that output and failure location
        (moto/sagemakerruntime/models.py `invoke_endpoint_async`)."""
        queued = [
            {"is_failure": failed, "data": data if isinstance(data, str) else json.dumps(data)}
            for failed, data in results
        ]
        self._queue("async-endpoint-results", queued, account, region)

    def _queue(self, kind: str, results: list[dict], account: str, region: str | None = None) -> None:
        data = json.dumps({"account_id": account, "region": region or self.region, "results": results}).encode()
        req = urllib.request.Request(
            f"{self.url}/moto-api/static/sagemaker/{kind}",
            data=data,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(req, timeout=10).read()

    def stop(self) -> None:
        stop_process(self.process, timeout_s=10)


def start(
    log_dir: Path, port: int | None = None, timeout_s: float = 30, lambda_env: dict[str, str] | None = None
) -> Emulator:
    """Start the emulator's server (local_emulator/server.py: moto, whose Lambda functions run their deployed code).

    lambda_env: variables every function the emulator runs gets besides its own, e.g.
    AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME (boto3's per-service endpoint setting) naming the local model server, which
    answers for the endpoints the emulator never runs (the demo sets it)."""
    from .lambda_runner import EMULATOR_URL_ENV, LAMBDA_ENV_ENV

    port = port or free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"moto-{port}.log"
    log = open(log_path, "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "local_emulator.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=Path(__file__).resolve().parent.parent,
        env={
            **os.environ,
            "MOTO_ALLOW_NONEXISTENT_REGION": "false",
            # what the functions it runs talk to (lambda_runner.py)
            EMULATOR_URL_ENV: f"http://localhost:{port}",
            LAMBDA_ENV_ENV: json.dumps(lambda_env or {}),
        },
    )
    emulator = Emulator(port=port, process=process, log_path=log_path)
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the AWS emulator exited at start (code {process.returncode}); see {log_path}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).read()
            return emulator
        except OSError:
            if time.monotonic() > deadline:
                emulator.stop()
                raise RuntimeError(f"the AWS emulator did not answer within {timeout_s:.0f} s; see {log_path}")
            time.sleep(0.2)


# One request in the server's log (werkzeug's request line, ANSI colours and all): "POST / HTTP/1.1" 500 -
_REQUEST_LINE = re.compile(r'"(?:\x1b\[[0-9;]*m)*([A-Z]+ [^ "]+)[^"]*" (\d{3}) ')


def server_errors(log_path: Path) -> list[str]:
    """The requests the emulator answered with a server error (5xx), as `<time> <method path> <status>` lines of its
    log: a call moto lacks or fails on. AWS SDKs retry a 5xx with backoff (the CDK CLI's for 20-40 s a call), so a
    client waits in silence where AWS would have answered."""
    errors = []
    for line in log_path.read_text(errors="replace").splitlines():
        found = _REQUEST_LINE.search(line)
        if found and found.group(2).startswith("5"):
            stamp = line.split("[", 1)[1].split("]", 1)[0] if "[" in line else ""
            errors.append(f"{stamp} {found.group(1)} {found.group(2)}")
    return errors


@contextmanager
def running(log_dir: Path, lambda_env: dict[str, str] | None = None) -> Iterator[Emulator]:
    emulator = start(log_dir, lambda_env=lambda_env)
    try:
        yield emulator
    finally:
        emulator.stop()
