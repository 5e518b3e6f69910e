"""The local containers that are not the real engine (local_runtime/byoc_container.py, stand_in.py): which systems
each kind serves, its refusal of any other, and the BYOC image's layout read from its own Dockerfile. The whole path
through each: tests/local/test_scenario_<system>.py."""

from __future__ import annotations

import pytest

from local_runtime import local_container
from local_runtime.byoc_container import ByocContainer, image_environment, program_copies
from local_runtime.process import ContainerError
from local_runtime.stand_in import StandInContainer
from systems import all_systems


@pytest.mark.parametrize(("kind", "system"), [(ByocContainer, "sglang"), (StandInContainer, "vllm")])
def test_a_kind_refuses_a_system_it_does_not_serve_naming_those_it_does(kind, system, tmp_path):
    """Each kind serves the systems whose LocalRun names it (ServingSystem.local), and names them all."""
    allowed = ", ".join(name for name, each in all_systems().items() if each.local.kind == kind.local_kind)
    assert allowed and system not in allowed.split(", ")
    with pytest.raises(ContainerError) as refused:
        kind(system, {}, tmp_path / "model", tmp_path / "work")
    message = str(refused.value)
    assert message.startswith(f"system {system!r} has no {kind.engine} container here; allowed: ")
    assert allowed in message


@pytest.mark.parametrize("system", ["deepspeed-byoc", "tensorrt-byoc"])
def test_the_byoc_program_folder_is_the_images_opt_program(system, tmp_path):
    """Each COPY into /opt/program lands in the program folder; the image's BYOC_HANDLER is the one the app loads."""
    container = ByocContainer(system, {"MAX_NEW_TOKENS": "8"}, tmp_path / "model", tmp_path / "work")
    container.stage_program()
    copies = program_copies(container.dockerfile_text)
    assert ("systems/byoc_server/", "byoc_server/") in copies and (
        "request_contract.py",
        "request_contract.py",
    ) in copies
    for _, target in copies:
        assert (container.program / target).exists(), target
    env = container.environment(tmp_path / "home")
    handler = image_environment(container.dockerfile_text)["BYOC_HANDLER"]
    module = handler.split(":")[0].replace(".", "/")
    assert env["BYOC_HANDLER"] == handler
    assert (container.program / f"{module}.py").is_file(), handler
    assert env["PYTHONPATH"] == str(container.program) and env["SM_MODEL_DIR"] == str(container.model_dir)
    assert env["MAX_NEW_TOKENS"] == "8"  # the plan's environment over the image's
    assert "AWS_ACCESS_KEY_ID" not in env  # nothing of this process's own environment


def test_hf_fastload_has_no_container_process(tmp_path):
    """Its artifact's own handler serves in local_runtime/serve.py (HANDLER_STAND_IN)."""
    from types import SimpleNamespace

    from systems import get_system

    system = get_system("hf-fastload")
    plan = SimpleNamespace(name="e", spec=None, engine=None, system=system, container_environment=lambda bucket: {})
    assert local_container(plan, tmp_path, tmp_path / "work") is None
