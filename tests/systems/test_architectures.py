"""The generated architecture tables (systems/engine_tables/*.json): what can be checked offline. The whole tables are
regenerated and compared by `python tools/generate_architectures.py --check` (it downloads the engines' wheels)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from hermetic import subprocess_env

from systems import all_systems, engine_tables
from systems.checks import engine_of
from systems.engine_tables import ARCHITECTURES, CLI_FLAGS, SOURCES, TRANSFORMERS_CAUSAL_LM, TRANSFORMERS_FIRST_RELEASE
from systems.images import HF_CONTAINER_TRANSFORMERS
from systems.images_current import SGLANG_ENGINE, VLLM_ENGINE

ROOT = Path(__file__).resolve().parents[2]
MAKE_ENV = ROOT / "tests" / "systems" / "hf_container" / "make_env.sh"
VENV = ROOT / ".venv-hf-container"

# The engine whose registry decides whether a system's container can load an architecture, from the registry: its
# ServingSystem.model_registry where an engine registry decides, else the engine its pinned image records
# (systems/images_current.py). Systems without one: lmi-trtllm (TensorRT-LLM 0.21's registry is in a wheel on
# pypi.nvidia.com, not readable here) and the legacy DJL / own-container systems (pinned recipes).
SYSTEM_ENGINES = {
    name: engine
    for name, system in all_systems().items()
    if (engine := system.model_registry or engine_of(system)) is not None
}
# config.json `architectures` of the models the example configs deploy: the class transformers'
# MODEL_FOR_CAUSAL_LM_MAPPING_NAMES gives for each model's model_type (gptj, gpt2, mistral, llama, qwen3,
# qwen3_moe, gpt_oss, mixtral, gemma3_text). The Hub is not reachable here; a new example model must be added.
EXAMPLE_MODEL_ARCHITECTURES = {
    "EleutherAI/gpt-j-6B": "GPTJForCausalLM",
    "openai-community/gpt2": "GPT2LMHeadModel",
    "gpt2": "GPT2LMHeadModel",
    "mistralai/Mistral-7B-Instruct-v0.3": "MistralForCausalLM",
    "meta-llama/Llama-3.1-8B-Instruct": "LlamaForCausalLM",
    "Qwen/Qwen3-32B": "Qwen3ForCausalLM",
    "Qwen/Qwen3-30B-A3B": "Qwen3MoeForCausalLM",
    "build/tiny-models/qwen3_thinking": "Qwen3ForCausalLM",  # the tiny Qwen3 model_build tiny-model writes
    "openai/gpt-oss-20b": "GptOssForCausalLM",
    "openai/gpt-oss-120b": "GptOssForCausalLM",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "MixtralForCausalLM",
}


# What the container's transformers maps: its version and MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, as JSON.
MAPPING_SCRIPT = (
    "import json, transformers; from transformers.models.auto.modeling_auto import "
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as m; print(json.dumps([transformers.__version__, dict(m)]))"
)


@pytest.mark.slow
def test_hf_fastload_table_is_the_containers_mapping():
    """The generated transformers table of hf-fastload's image equals the mapping its transformers holds (the venv
    with the container's transformers, built by make_env.sh; instant once built)."""
    env = subprocess_env()
    proc = subprocess.run(["bash", str(MAKE_ENV), str(VENV)], env=env, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        if re.search(r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution", tail):
            pytest.skip(f"cannot build the transformers-4.51 env: a package registry is unreachable:\n{tail}")
        pytest.fail(f"tests/systems/hf_container/make_env.sh failed:\n{tail}")
    run = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", MAPPING_SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    version, mapping = json.loads(run.stdout)
    assert version == HF_CONTAINER_TRANSFORMERS == "4.51.3"
    assert TRANSFORMERS_CAUSAL_LM[version] == mapping
    assert ARCHITECTURES[f"transformers=={version}"] == frozenset(mapping.values())


def test_tables_are_sorted_and_stamped():
    """Every data file is written sorted, and each engine key names the wheel (file and sha256) it was read from."""
    for path in sorted(engine_tables.DATA_DIR.glob("*.json")):
        data = json.loads(path.read_text())
        assert data["generated_by"].startswith("tools/generate_architectures.py"), path.name
        for name, table in data["tables"].items():
            values = table["values"]
            assert list(values) == sorted(values), (path.name, name)
    assert set(SOURCES) == set(ARCHITECTURES)
    for key, source in SOURCES.items():
        project, version = key.split("==")
        assert re.match(rf"{project}-{re.escape(version)}-\S+\.whl sha256:[0-9a-f]{{64}} ", source), source
    assert set(CLI_FLAGS) == {k for k in ARCHITECTURES if not k.startswith("transformers")}


def test_tables_agree_with_each_other():
    for version, mapping in TRANSFORMERS_CAUSAL_LM.items():
        assert ARCHITECTURES[f"transformers=={version}"] == frozenset(mapping.values())
    # The first-release table names only classes the oldest pinned image lacks, at releases after it.
    assert not set(TRANSFORMERS_FIRST_RELEASE) & ARCHITECTURES["transformers==4.49.0"]
    for cls, first in TRANSFORMERS_FIRST_RELEASE.items():
        for version in TRANSFORMERS_CAUSAL_LM:
            present = cls in ARCHITECTURES[f"transformers=={version}"]
            later = tuple(map(int, version.split("."))) >= tuple(map(int, first.split(".")))
            if present:
                assert later, (cls, first, version)
    # What the issue names: Qwen3 needs transformers >= 4.51 (measured: a Qwen3 artifact fails under 4.49).
    assert TRANSFORMERS_FIRST_RELEASE["Qwen3ForCausalLM"] == "4.51.0"
    assert "Qwen3ForCausalLM" not in ARCHITECTURES["transformers==4.49.0"]
    assert "Qwen3ForCausalLM" in ARCHITECTURES["transformers==4.51.3"]


def _example_endpoints() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted((ROOT / "config" / "examples").glob("*.yaml")):
        for endpoint in yaml.safe_load(path.read_text()).get("endpoints", []):
            found.append((path.name, endpoint["system"], endpoint["model"]))
    return found


def test_every_example_model_is_served_by_its_systems_engine():
    checked = 0
    for example, system, model in _example_endpoints():
        if system not in SYSTEM_ENGINES:
            continue
        assert model in EXAMPLE_MODEL_ARCHITECTURES, f"{example}: add {model}'s architecture to this test's table"
        engine = SYSTEM_ENGINES[system]
        assert EXAMPLE_MODEL_ARCHITECTURES[model] in ARCHITECTURES[engine], (example, system, model, engine)
        checked += 1
    assert checked >= 3


def test_architectures_of_issue_19_models_where_each_engine_has_them():
    """Which pinned engine serves which of today's model families: these facts the compatibility check rests on."""
    wanted = sorted(set(EXAMPLE_MODEL_ARCHITECTURES.values()) - {"GPT2LMHeadModel"})
    served = {key: [a for a in wanted if a in names] for key, names in ARCHITECTURES.items()}
    assert served[VLLM_ENGINE] == served[SGLANG_ENGINE] == served["transformers==5.5.3"] == wanted
    assert set(wanted) - set(served["transformers==4.49.0"]) == {
        "GptOssForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
    }
    assert set(wanted) - set(served["transformers==4.51.3"]) == {"GptOssForCausalLM"}  # added in 4.55.0
    assert TRANSFORMERS_FIRST_RELEASE["GptOssForCausalLM"] == "4.55.0"


def test_each_profiled_system_checks_against_the_engine_its_image_holds():
    """The compatibility checks read each system's engine from systems/images_current.py; it is the engine whose
    table this file holds for the system, and what its profile names."""
    from systems.images import HF_CONTAINER_TRANSFORMERS

    systems = all_systems()
    profiled = {name for name, system in systems.items() if system.profile is not None}
    assert profiled and profiled <= set(SYSTEM_ENGINES)
    for name in profiled:
        assert engine_of(systems[name]) == SYSTEM_ENGINES[name], name
    assert SYSTEM_ENGINES["hf-fastload"] == f"transformers=={HF_CONTAINER_TRANSFORMERS}"
    assert SYSTEM_ENGINES["lmi-vllm"] == "vllm==0.23.0"  # LMI 0.36.0-lmi27 ships vLLM 0.23.1.dev4+gcd87ce883
