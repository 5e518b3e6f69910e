"""Helpers shared by several test modules: a server app on a free localhost port, and a boto3 session for
tests against the moto server (whose fixtures, `emulator` and `moto_env`, are in conftest_model.py).

Plain functions and classes, imported where used (`from helpers import running`); no fixtures here, so that
importing this module never collides with pytest's plugin loading.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import httpx

from local_emulator.moto_server import free_port

# ---------------------------------------------------------------------------------------------------- HTTP


def wait_for_ping(url: str, status: int | None = 200, timeout: float = 20) -> int:
    """Poll GET {url}/ping until it answers (status None: any answer) or answers `status`; the status code."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            code = httpx.get(f"{url}/ping", timeout=2).status_code
            if status is None or code == status:
                return code
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}/ping did not answer {status or 'at all'} within {timeout} s")
        time.sleep(0.05)


@contextmanager
def running(app: Any, ready: bool = True, timeout: float = 20) -> Iterator[str]:
    """uvicorn serving `app` in a thread on a free localhost port; yields its URL once /ping answers (200 with
    ready=True, anything otherwise) and stops the server on leaving the block."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ping(url, 200 if ready else None, timeout)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# ---------------------------------------------------------------------------------------------------- AWS


class Session:
    """A boto3 session whose clients are real (moto) except the ones given (e.g. a Stubber-wrapped client)."""

    def __init__(self, **clients: Any) -> None:
        self._real = boto3.session.Session()
        self._clients = clients
        self.region_name = self._real.region_name

    def client(self, name: str, **kwargs: Any) -> Any:
        return self._clients[name] if name in self._clients else self._real.client(name, **kwargs)

    def get_available_partitions(self) -> list[str]:
        return self._real.get_available_partitions()

    def get_available_regions(self, *args: Any, **kwargs: Any) -> list[str]:
        return self._real.get_available_regions(*args, **kwargs)
