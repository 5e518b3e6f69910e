"""The clients users already use, unchanged, against every registered system's local container behind the local
runtime: boto3, the SageMaker SDK v2 Predictor, langchain-aws, LiteLLM's sagemaker/, sagemaker_chat/ and openai/
providers, LangChain's ChatOpenAI and the openai SDK (tests/clients/drive.py, run by .venv-clients' python; `make
clients-env`). Each call's outcome is a cell of docs/clients.md's table: works, refused (the status and the reason
the refusal names), the container cannot (a stream or a chat asked of a container without it), or fails. The
table is what the suite found: a client or a container that changes its answer fails here until the stored cells
and the table are rewritten (`make clients-table`: PYTEST_CLIENTS_TABLE_WRITE=1).

Which systems, and what each container takes and answers, come from the registry (tests/real_clients.py): every
system whose local container starts in seconds (its own handler, our own server, the stand-in) is driven here, on
the artifact its recipe builds from its tiny scenario config; the real vLLM engine is driven by
tests/local/test_vllm_scenario.py while the engine it starts is up; a system with neither is listed with why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import real_clients
from helpers import running

from systems import all_systems

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not real_clients.venvs_present(), reason=real_clients.MISSING_VENVS)]

DRIVEN = sorted(name for name, system in all_systems().items() if real_clients.not_driven(system) is None)
HERE = "tests/clients/test_real_clients.py"


@pytest.fixture(scope="module")
def token() -> str:
    from sagemaker.core.token_generator import generate_token

    with pytest.MonkeyPatch.context() as patch:
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            patch.setenv(key, "testing")
        patch.delenv("AWS_SESSION_TOKEN", raising=False)
        return generate_token(region=real_clients.REGION)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """architecture -> a tiny model of it, made once."""
    from model_build.tiny_models import make_tiny_model

    root = tmp_path_factory.mktemp("tiny")

    class Models(dict[str, Path]):
        def __missing__(self, architecture: str) -> Path:
            self[architecture] = make_tiny_model(architecture, root / architecture)
            return self[architecture]

    return Models()


def _app(system: Any, tiny_models: dict[str, Path], root: Path) -> tuple[Any, Any, str]:
    """(the local runtime's app for the system's tiny endpoint, its plan, what answers): the system's tiny config
    with the tiny model made here, the artifact its recipe builds, and the container the local runtime starts for
    it (local_runtime.container_host; None: the artifact's own handler), as `model_build serve` runs them."""
    import yaml

    from deployment import load_config
    from local_runtime import HANDLER_STAND_IN, container_host
    from local_runtime.serve import create_app
    from model_build.cli import build_endpoint

    path = real_clients.tiny_config(system)
    assert path is not None
    config = yaml.safe_load(path.read_text())
    config["endpoints"] = [e for e in config["endpoints"] if e["system"] == system.name][:1]
    config["endpoints"][0]["model"] = str(tiny_models[Path(config["endpoints"][0]["model"]).name])
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    plan = load_config(root / "config.yaml", build_root=root / "build").plans[0]
    artifact = root / "build" / plan.name
    build_endpoint(plan.spec, artifact, progress=False, engine=plan.engine)
    host = container_host(plan, artifact, root / "container")
    app = create_app(artifact, endpoint_name=plan.endpoint_name, region=real_clients.REGION, container_host=host)
    return app, plan, HANDLER_STAND_IN if host is None else host.container.answered_by()


Found = tuple[dict[str, dict[str, dict[str, Any]]], list[str]]


@pytest.fixture(scope="module")
def found(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, token: str) -> Found:
    """(system -> call -> the driver's result, for every system driven here, one container at a time; how the
    cells differ from the stored ones)."""
    results: dict[str, dict[str, dict[str, Any]]] = {}
    differences: list[str] = []
    with real_clients.Drivers() as drivers:  # the clients imported once for every system
        for name in DRIVEN:
            system = all_systems()[name]
            app, plan, answered = _app(system, tiny_models, tmp_path_factory.mktemp(name))
            with running(app, timeout=600) as url:
                results[name] = drivers.drive(real_clients.spec_for(system, url, plan.endpoint_name, token))
            differences += real_clients.record(system, results[name], answered, HERE)
    return results, differences


def test_every_client_got_an_answer_or_a_refusal_naming_why(found: Found) -> None:
    """Every call reached a verdict on every system driven here; the ones that carry the project's promises work:
    the container's own body through boto3 and the SageMaker SDK, and the chat clients where the system chats."""
    registry = all_systems()
    for name in DRIVEN:
        system, calls = registry[name], found[0][name]
        assert all(result["needs"] is not None for result in calls.values())
        promised = ["boto3 invoke_endpoint, the container's own body", "SageMaker SDK v2 Predictor.predict"]
        if system.chat.supported:
            promised += ["openai SDK chat.completions", "LangChain ChatOpenAI invoke"]
        for call in promised:
            assert calls[call]["ok"], (name, call, calls[call])
        if not system.streaming.supported:  # a stream request is the container's 400, not a stream
            stream = calls["boto3 invoke_endpoint_with_response_stream, own body + stream"]
            assert not stream["ok"] and stream["status"] == 400, (name, stream)


def test_the_stored_cells_are_what_the_clients_did(found: Found) -> None:
    differences = found[1]
    assert not differences, (
        "the clients answered differently from tests/clients/found/: run make clients-table and read the diff\n"
        + "\n".join(differences)
    )


def test_every_stored_system_is_registered_and_the_table_is_the_stored_cells() -> None:
    """docs/clients.md's generated block is built from tests/clients/found/ for every registered system (a system
    not driven is listed with why); a stored file of a system no longer registered is stale."""
    registry = all_systems()
    stale = sorted(set(real_clients.stored()) - set(registry))
    assert not stale, f"tests/clients/found/ holds systems no longer registered: {stale}"
    text = real_clients.DOC.read_text()
    assert real_clients.generated_block(text) == "\n".join(real_clients.table()), (
        "docs/clients.md's table differs from tests/clients/found/: run make clients-table and read the diff"
    )
    for name, system in registry.items():
        assert f"### `{name}`" in text, name
        if name not in real_clients.stored():
            assert real_clients.not_driven(system) is not None, f"{name} is driven here but has no stored cells"


def test_a_cell_names_the_refusal_and_the_containers_limit() -> None:
    """The verdicts the table can hold, on results of each kind."""
    cell = real_clients.cell
    refused = {"ok": False, "status": 400, "error": "ClientError: unknown request keys ['x']", "needs": []}
    assert cell(refused, True, True) == "refused 400: unknown request keys ['x']"
    assert cell({**refused, "needs": ["stream"]}, False, True).startswith("the container cannot: it does not stream")
    assert cell({**refused, "needs": ["chat"]}, True, False).startswith("the container cannot: it serves no chat")
    assert cell({**refused, "needs": ["chat"]}, True, True).startswith("refused 400")
    assert cell({"ok": True, "status": 200, "error": None, "needs": []}, True, True) == "works"
    assert cell({"ok": False, "status": 200, "error": "empty answer", "needs": []}, True, True).startswith("fails:")
    hung = {"ok": False, "status": None, "error": "hangs: no answer within 45 s", "needs": []}
    assert cell(hung, True, True) == "fails: the client hangs (no answer within 45 s)"
    assert real_clients._reason("X: at http://127.0.0.1:4242/endpoints") == "at <runtime>/endpoints"
    assert [real_clients.verdict(c) for c in ("works", "refused 400: x", "the container cannot: y", "fails: z")] == [
        "works",
        "refused",
        "cannot",
        "fails",
    ]


def test_the_driver_reads_each_declared_reply_shape() -> None:
    """drive.py reads a reply as the system declares it (ContainerBodies.generation_reply, the body kind, the
    reasoning field), for every shape a registered system declares."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("drive", real_clients.DRIVER)
    assert spec is not None and spec.loader is not None
    drive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(drive)
    replies = {
        ("generation", "list"): [{"generated_text": "Paris"}],
        ("generation", "object"): {"generated_text": "Paris"},
        ("openai-completion", "list"): {"choices": [{"text": "Paris"}]},
        ("openai-chat", "list"): {"choices": [{"message": {"content": "Paris"}}]},
    }
    for system in all_systems().values():
        kind, shape = system.bodies.prompt_kind, system.bodies.generation_reply
        reply = replies[(kind, shape if kind == "generation" else "list")]
        assert drive._text_of(json.loads(json.dumps(reply)), kind, shape, system.bodies.reasoning_field) == "Paris"
    thinking = {"choices": [{"message": {"content": None, "reasoning": "Hmm"}}]}
    assert drive._text_of(thinking, "openai-chat", "list", "reasoning") == "Hmm"


def test_a_system_without_a_tiny_config_or_with_a_slow_engine_is_listed_with_why() -> None:
    """A future system with no tiny scenario config is listed, not skipped silently; the real engine is driven by
    its scenario; a system with a tiny config is driven here."""
    import dataclasses

    registry = all_systems()
    some = next(system for system in registry.values() if system.local.kind == "stand-in")
    assert real_clients.not_driven(some) is None and real_clients.tiny_config(some) is not None
    future = dataclasses.replace(some, name="future-system")
    assert "no tiny config for it (config/scenarios/future-system.yaml)" in (real_clients.not_driven(future) or "")
    engine = dataclasses.replace(some, local=dataclasses.replace(some.local, kind="engine"))
    assert "tests/local/test_vllm_scenario.py" in (real_clients.not_driven(engine) or "")
