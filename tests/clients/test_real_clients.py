"""The clients users already use, unchanged, against each system's local container behind the local runtime: boto3,
the SageMaker SDK v2 Predictor, langchain-aws, LiteLLM's sagemaker/, sagemaker_chat/ and openai/ providers, LangChain's
ChatOpenAI and the openai SDK (tests/clients/drive.py, run by .venv-clients' python; `make clients-env`). Each call's
outcome is a cell of docs/clients.md's table: works, refused (the status and the reason the refusal names), or the
container cannot (a stream from a container that does not stream). The table is what this suite found: a client or a
container that changes its answer fails the last test until docs/clients.md is regenerated
(`make clients-table`, which reruns this suite with PYTEST_CLIENTS_TABLE_WRITE=1).

Systems: hf-fastload (the artifact's own handler, as the Hugging Face toolkit runs it), lmi-vllm and sglang (the
stand-in's processes, local_runtime/stand_in.py), all on the tiny Llama. The real vLLM is not here: its engine takes
one to ten minutes to start on this machine (tests/scenarios run it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import running

REPO = Path(__file__).resolve().parents[2]
MAIN_PYTHON = REPO / ".venv-clients" / "bin" / "python"
SAGEMAKER_PYTHON = REPO / ".venv-clients-sagemaker" / "bin" / "python"
DRIVER = Path(__file__).with_name("drive.py")
DOC = REPO / "docs" / "clients.md"
RAW = REPO / "build" / "clients" / "results.json"
BEGIN, END = "<!-- generated: clients by tests/clients/test_real_clients.py -->", "<!-- /generated: clients -->"
REGION = "us-east-1"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (MAIN_PYTHON.exists() and SAGEMAKER_PYTHON.exists()),
        reason="the clients' venvs are missing: make clients-env",
    ),
]

GENERATION = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 8, "min_new_tokens": 2}}
CHAT = {"messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 8}
# system -> (the body its container takes on /invocations, where its reply holds the text)
SYSTEMS: dict[str, tuple[dict[str, Any], str]] = {
    "hf-fastload": (GENERATION, "list"),  # the toolkit's [{"generated_text"}]
    "lmi-vllm": (GENERATION, "object"),  # LMI 27's {"generated_text"} (stand_in.py LMI27)
    "sglang": (CHAT, "chat"),  # SGLang's /invocations takes a chat request only
}


def _endpoint(system: str) -> str:
    return f"local-tiny-{system}"


@pytest.fixture(scope="module")
def token() -> str:
    from sagemaker.core.token_generator import generate_token

    with pytest.MonkeyPatch.context() as patch:
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            patch.setenv(key, "testing")
        patch.delenv("AWS_SESSION_TOKEN", raising=False)
        return generate_token(region=REGION)


def _serve(system: str, chat_artifact: Path, llama: Path, work: Path) -> Any:
    from local_runtime.process import ContainerHost
    from local_runtime.serve import create_app
    from local_runtime.stand_in import StandInContainer

    if system == "hf-fastload":
        return create_app(chat_artifact, endpoint_name=_endpoint(system))
    container = StandInContainer(system, {}, llama, work, ready_timeout_s=300)
    return create_app(llama, endpoint_name=_endpoint(system), container_host=ContainerHost(container))


def _drive(python: Path, spec: dict[str, Any]) -> list[dict[str, Any]]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        # LiteLLM fetches its model-price map from GitHub at import unless told to use its bundled copy.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    done = subprocess.run(
        [str(python), str(DRIVER)], input=json.dumps(spec), capture_output=True, text=True, env=env, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def found(
    chat_artifact: Path, tiny_chat_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, token: str
) -> dict[str, dict[str, dict[str, Any]]]:
    """call -> system -> the driver's result, for every system and client."""
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for system, (native, shape) in SYSTEMS.items():
        app = _serve(system, chat_artifact, tiny_chat_models["llama"], tmp_path_factory.mktemp(system))
        with running(app, timeout=300) as url:
            spec = {
                "url": url,
                "endpoint": _endpoint(system),
                "token": token,
                "region": REGION,
                "native": native,
                "native_reply": shape,
                "chat": CHAT,
            }
            for python, clients in ((MAIN_PYTHON, "main"), (SAGEMAKER_PYTHON, "sagemaker")):
                for result in _drive(python, {**spec, "clients": clients}):
                    results.setdefault(result["call"], {})[system] = result
    RAW.parent.mkdir(parents=True, exist_ok=True)
    RAW.write_text(json.dumps(results, indent=1))  # every client's whole answer or error, for reading a cell's cause
    return results


def _reason(error: str) -> str:
    """A refusal's message as a table cell: the client's exception names dropped, ports and long tails cut."""
    message = error.split(": ", 1)[-1]
    message = re.sub(r"^litellm\.\w+: \w+ - ", "", message)  # LiteLLM's own prefix ("litellm.X: SagemakerException - ")
    message = re.sub(r"\s*For more information check: \S+", "", message)  # httpx's pointer to MDN (via LiteLLM)
    message = re.sub(r"http://127\.0\.0\.1:\d+", "<runtime>", message)
    message = re.sub(r"\s+", " ", message).strip()
    return message if len(message) <= 160 else message[:157] + "..."


def cell(result: dict[str, Any], streams: bool, call: str) -> str:
    """works / refused (status: reason) / the container cannot / fails (anything else, with what happened)."""
    if result["ok"]:
        return "works"
    status, error = result["status"], result["error"] or ""
    if status == 200:
        return "fails: answered 200, and the client read no text from it"
    if error.startswith("hangs"):
        return f"fails: the client hangs ({_reason(error)})"
    if "stream" in call and not streams and status == 400:
        return f"the container cannot: it does not stream (400: {_reason(error)})"
    if status is not None and 400 <= status < 500:
        return f"refused {status}: {_reason(error)}"
    return f"fails ({status}): {_reason(error)}"


def table(found: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    from systems import all_systems

    registry = all_systems()
    header = ["client / call", *(f"`{system}`" for system in SYSTEMS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for call, per_system in found.items():
        cells = [
            cell(per_system[system], registry[system].streaming.supported, call).replace("|", "\\|")
            for system in SYSTEMS
        ]
        lines.append("| " + " | ".join([call, *cells]) + " |")
    return lines


def _generated_block(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")


def test_every_client_got_an_answer_or_a_refusal_naming_why(found: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Every call reached a verdict on every system; the ones that carry the project's promises work."""
    assert all(set(per_system) == set(SYSTEMS) for per_system in found.values())
    for system in SYSTEMS:
        for call in (
            "boto3 invoke_endpoint, the container's own body",
            "openai SDK chat.completions",
            "LangChain ChatOpenAI invoke",
            "SageMaker SDK v2 Predictor.predict",
        ):
            assert found[call][system]["ok"], (call, system, found[call][system])
    # hf-fastload does not stream (its toolkit has no streaming hook): a stream request is its 400, not a stream.
    stream = found["boto3 invoke_endpoint_with_response_stream, own body + stream"]["hf-fastload"]
    assert not stream["ok"] and stream["status"] == 400 and "stream" in stream["error"]


def test_docs_clients_table_is_what_the_suite_found(found: dict[str, dict[str, dict[str, Any]]]) -> None:
    lines = "\n".join(table(found))
    text = DOC.read_text()
    if os.environ.get("PYTEST_CLIENTS_TABLE_WRITE") == "1":
        start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
        DOC.write_text(text[:start] + "\n" + lines + "\n" + text[end:])
        text = DOC.read_text()
    assert _generated_block(text) == lines, (
        "docs/clients.md's table differs from what the clients did: run make clients-table and read the diff"
    )


def test_a_cell_names_the_refusal_and_the_containers_limit() -> None:
    """The verdicts the table can hold, on results of each kind."""
    refused = {"ok": False, "status": 400, "error": "ClientError: unknown request keys ['sagemaker_base_url']"}
    assert cell(refused, True, "LiteLLM sagemaker/") == "refused 400: unknown request keys ['sagemaker_base_url']"
    assert cell(refused, False, "boto3 stream").startswith("the container cannot: it does not stream (400")
    assert cell({"ok": True, "status": 200, "error": None}, True, "x") == "works"
    hung = {"ok": False, "status": None, "error": "hangs: no answer within 45 s"}
    assert cell(hung, True, "x") == "fails: the client hangs (no answer within 45 s)"
    assert _reason("X: at http://127.0.0.1:4242/endpoints") == "at <runtime>/endpoints"
