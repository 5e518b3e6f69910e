"""The clients users already use, driven against one system's local container: shared by the client suite
(tests/clients/test_real_clients.py, every system whose container starts in seconds) and the vLLM scenario
(tests/local/test_vllm_scenario.py, which drives them while the real engine it started is up).

What each system's container takes and how its reply reads come from the registry (systems/base.py ContainerBodies:
the body kind one prompt travels in, the shape of a generation reply, the reasoning field; ServingSystem.streaming
and .chat: whether it streams and serves chat), never from a list kept here. What the clients did is stored per
system in tests/clients/found/<system>.json (the cells) and build/clients/<system>.json (every whole answer or
error); docs/clients.md's table is built from the stored cells, so each test checks its own systems' cells and the
table, and either can rewrite both (PYTEST_CLIENTS_TABLE_WRITE=1, `make clients-table`).
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MAIN_PYTHON = REPO / ".venv-clients" / "bin" / "python"
SAGEMAKER_PYTHON = REPO / ".venv-clients-sagemaker" / "bin" / "python"
DRIVER = REPO / "tests" / "clients" / "drive.py"
DOC = REPO / "docs" / "clients.md"
FOUND = REPO / "tests" / "clients" / "found"
RAW = REPO / "build" / "clients"
BEGIN, END = "<!-- generated: clients by tests/real_clients.py -->", "<!-- /generated: clients -->"
REGION = "us-east-1"
WRITE = os.environ.get("PYTEST_CLIENTS_TABLE_WRITE") == "1"
MISSING_VENVS = "the clients' venvs are missing: make clients-env"

# One prompt as the generation contract words it; each system's container gets it in the body kind it takes
# (endpoint_runtime/bodies.py prompt_body, as every client of ours builds it).
GENERATION_REQUEST = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 8, "min_new_tokens": 2}}
CHAT = {"messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 8}


def venvs_present() -> bool:
    return MAIN_PYTHON.exists() and SAGEMAKER_PYTHON.exists()


def spec_for(system: Any, url: str, endpoint: str, token: str) -> dict[str, Any]:
    """What the driver needs about one endpoint: its URL and name, the route's bearer token, and the system's
    registry facts (the body its container takes, where its reply holds the text, whether it streams and chats)."""
    from endpoint_runtime import bodies

    declared = system.bodies
    kind = declared.prompt_kind
    return {
        "url": url,
        "endpoint": endpoint,
        "token": token,
        "region": REGION,
        "native": bodies.prompt_body(kind, GENERATION_REQUEST),
        "native_kind": kind,
        "generation_reply": declared.generation_reply,
        "reasoning_field": declared.reasoning_field,
        # the fields that ask a reasoning model to answer at once (8 tokens of thinking read as no answer)
        "chat": {**CHAT, **(declared.thinking_off or {})},
    }


# What the drivers run with: nothing of the suite's environment but a home and the emulator's fake credentials.
DRIVER_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": os.environ.get("HOME", "/tmp"),
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    # LiteLLM fetches its model-price map from GitHub at import unless told to use its bundled copy.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "NO_PROXY": "127.0.0.1,localhost",
}
# One system's calls, all of them (each is bounded by drive.py's CALL_TIMEOUT_S): past this the driver is stopped.
SYSTEM_TIMEOUT_S = 900


class Drivers:
    """drive.py in both client venvs, started once and handed one system's spec at a time (a JSON line each; it
    answers a line per call, then {"finished": true}). Importing LiteLLM, LangChain and the SageMaker SDK costs
    ~10 s of CPU per pair of processes, so the client suite pays it once, not once per system."""

    def __init__(self) -> None:
        self._processes: list[tuple[subprocess.Popen[bytes], Any, bytearray]] = []

    def __enter__(self) -> Drivers:
        for python in (MAIN_PYTHON, SAGEMAKER_PYTHON):
            errors = tempfile.TemporaryFile()  # a file, not a pipe: a driver's tracebacks must never block it
            process = subprocess.Popen(
                [str(python), str(DRIVER), "main" if python == MAIN_PYTHON else "sagemaker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=DRIVER_ENV,
            )
            self._processes.append((process, errors, bytearray()))
        return self

    def __exit__(self, *_: object) -> None:
        for process, errors, _ in self._processes:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            errors.close()

    def drive(self, spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """call -> the driver's result, from both client venvs."""
        results: dict[str, dict[str, Any]] = {}
        for process, errors, buffer in self._processes:
            assert process.stdin is not None
            process.stdin.write(json.dumps(spec).encode() + b"\n")
            process.stdin.flush()
            deadline = time.monotonic() + SYSTEM_TIMEOUT_S
            while (line := self._line(process, errors, buffer, deadline)) != b'{"finished": true}':
                if line.startswith(b"{"):  # LiteLLM prints its own notes to stdout too
                    result = json.loads(line)
                    results[result["call"]] = result
        return results

    @staticmethod
    def _line(process: subprocess.Popen[bytes], errors: Any, buffer: bytearray, deadline: float) -> bytes:
        assert process.stdout is not None
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
                process.kill()
                raise AssertionError(f"{process.args[1:]}: no answer within {SYSTEM_TIMEOUT_S} s")
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                errors.seek(0)
                raise AssertionError(f"{process.args[1:]} exited {process.wait()}: {errors.read()[-3000:]!r}")
            buffer += chunk
        line, _, rest = bytes(buffer).partition(b"\n")
        buffer[:] = rest
        return line.strip()


def drive(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """call -> the driver's result, from both client venvs, for one system (drivers started for it alone)."""
    with Drivers() as drivers:
        return drivers.drive(spec)


def _reason(error: str) -> str:
    """A refusal's message as a table cell: the client's exception names dropped, ports and long tails cut."""
    message = error.split(": ", 1)[-1]
    message = re.sub(r"^litellm\.\w+: \w+ - ", "", message)  # LiteLLM's own prefix ("litellm.X: SagemakerException - ")
    message = re.sub(r"\s*For more information check: \S+", "", message)  # httpx's pointer to MDN (via LiteLLM)
    message = re.sub(r"http://127\.0\.0\.1:\d+", "<runtime>", message)
    message = re.sub(r"\s+", " ", message).strip()
    return message if len(message) <= 160 else message[:157] + "..."


def cell(result: dict[str, Any], streams: bool, chats: bool) -> str:
    """works / refused (status: reason) / the container cannot (a stream or a chat asked of a container without
    it) / fails (anything else, with what happened)."""
    if result["ok"]:
        return "works"
    status, error, needs = result["status"], result["error"] or "", result["needs"]
    if status == 200:
        return "fails: answered 200, and the client read no text from it"
    if error.startswith("hangs"):
        return f"fails: the client hangs ({_reason(error)})"
    refused = status is not None and 400 <= status < 500
    if refused and "chat" in needs and not chats:
        return f"the container cannot: it serves no chat ({status}: {_reason(error)})"
    if refused and "stream" in needs and not streams:
        return f"the container cannot: it does not stream ({status}: {_reason(error)})"
    if refused:
        return f"refused {status}: {_reason(error)}"
    return f"fails ({status}): {_reason(error)}"


def verdict(text: str) -> str:
    """A cell in the overview: its first words."""
    for short in ("works", "refused", "the container cannot", "fails", "not driven"):
        if text.startswith(short):
            return short.replace("the container ", "")
    return text


def cells_of(system: Any, found: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {call: cell(result, system.streaming.supported, system.chat.supported) for call, result in found.items()}


def record(system: Any, found: dict[str, dict[str, Any]], container: str, driven_by: str) -> list[str]:
    """Keep what the clients did on `system` (build/clients/<system>.json: whole answers; in write mode also
    tests/clients/found/<system>.json: the cells); the differences from the stored cells, for the caller to assert
    on (none in write mode)."""
    RAW.mkdir(parents=True, exist_ok=True)
    (RAW / f"{system.name}.json").write_text(json.dumps(found, indent=1))
    stored = {"container": container, "driven_by": driven_by, "cells": cells_of(system, found)}
    path = FOUND / f"{system.name}.json"
    if WRITE:
        FOUND.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stored, indent=1) + "\n")
        write_table()
        return []
    before = json.loads(path.read_text()) if path.is_file() else {"cells": {}}
    calls = sorted(set(before["cells"]) | set(stored["cells"]))
    return [
        f"{system.name}, {call}: stored {before['cells'].get(call)!r}, found {stored['cells'].get(call)!r}"
        for call in calls
        if before["cells"].get(call) != stored["cells"].get(call)
    ]


def not_driven(system: Any) -> str | None:
    """Why the client suite drives no container of `system` itself, None where it does."""
    if system.local.kind == "engine":
        return (
            "its container is the real engine, whose start takes minutes here: tests/local/test_vllm_scenario.py "
            "drives the clients while its engine is up"
        )
    if tiny_config(system) is None:
        return f"no tiny config for it (config/scenarios/{system.name}.yaml), so no artifact to serve"
    return None


def tiny_config(system: Any) -> Path | None:
    """The config of the system's tiny scenario (its tiny model and engine settings): config/scenarios/<name>.yaml,
    else `make demo`'s default config/local.yaml where that is the system's."""
    import yaml

    scenario = REPO / "config" / "scenarios" / f"{system.name}.yaml"
    if scenario.is_file():
        return scenario
    demo = REPO / "config" / "local.yaml"
    systems = {endpoint["system"] for endpoint in yaml.safe_load(demo.read_text())["endpoints"]}
    return demo if systems == {system.name} else None


def stored() -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(FOUND.glob("*.json"))}


def table() -> list[str]:
    """docs/clients.md's generated block: an overview (a row per call, a column per registered system) and each
    system's cells in full, from the stored cells."""
    from systems import all_systems

    registry = all_systems()
    kept = stored()
    calls = list(dict.fromkeys(call for each in kept.values() for call in each["cells"]))
    names = list(registry)
    lines = ["| client / call | " + " | ".join(f"`{name}`" for name in names) + " |", "|---" * (len(names) + 1) + "|"]
    for call in calls:
        row = [verdict(kept[name]["cells"].get(call, "not driven")) if name in kept else "not driven" for name in names]
        lines.append(f"| {call} | " + " | ".join(row) + " |")
    for name, system in registry.items():
        lines += ["", f"### `{name}`", ""]
        if name not in kept:
            lines.append(f"Not driven: {not_driven(system) or 'not run yet (make clients-table)'}.")
            continue
        lines += [
            f"Its container here: {kept[name]['container']}. Driven by `{kept[name]['driven_by']}`.",
            "",
            "| client / call | what happened |",
            "|---|---|",
        ]
        lines += [f"| {call} | {text.replace('|', chr(92) + '|')} |" for call, text in kept[name]["cells"].items()]
    return lines


def generated_block(text: str) -> str:
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip("\n")


def write_table() -> None:
    text = DOC.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOC.write_text(text[:start] + "\n" + "\n".join(table()) + "\n" + text[end:])
