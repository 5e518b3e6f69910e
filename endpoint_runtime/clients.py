"""The boto3 clients of the Lambda functions and the tools that import endpoint_runtime: each made once, lazily,
under a key naming its module and purpose, and reused across invocations of a warm Lambda (creating a client costs
tens of milliseconds and reads the environment). Stdlib only: every Lambda asset may ship it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_clients: dict[str, Any] = {}


def cached(key: str, make: Callable[[], Any]) -> Any:
    """The client cached under key, made by make() the first time."""
    if key not in _clients:
        _clients[key] = make()
    return _clients[key]


def forget(prefix: str) -> None:
    """Forget the clients whose key starts with prefix (tests; or after the environment changes)."""
    for key in [k for k in _clients if k.startswith(prefix)]:
        del _clients[key]
