"""The engine systems (vllm, sglang) as inference components that scale to zero, and LoRA adapters on vllm as adapter
inference components: config/examples/engine-components.yaml, synthesized once (session-cached, cdk-nag included;
cfn-lint and checkov scan it with every example, tests/template_scan.py), its templates read here; and the config mistakes around them, each refused at load with one message. The emulator has no inference
components (tests/stacks/test_adapters.py says why), so this is the template's check; the adapter loading itself is
tests/local/test_vllm_adapters.py's, on the real vLLM engine."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers import ROOT

from deployment import load_config
from endpoint_config import ConfigError
from systems.sglang.options import ENGINE_VERSION as SGLANG_VERSION

CONFIG, ENV, PROJECT = "config/examples/engine-components.yaml", "dev", "llm-endpoints"
VLLM, SGLANG = "vllm-lora", "sglang-ic"
ADAPTERS = {"sql": "dev-vllm-lora-sql", "support": "dev-vllm-lora-support"}


def stack(endpoint: str) -> str:
    return f"{PROJECT}-{ENV}-{endpoint}"


def of_type(resources: dict, type_name: str) -> dict[str, dict]:
    return {lid: r for lid, r in resources.items() if r["Type"] == type_name}


@pytest.fixture(scope="module")
def templates(synth) -> dict[str, dict]:
    return synth(CONFIG, ENV).templates


def base_and_adapters(resources: dict) -> tuple[str, dict[str, dict]]:
    """(the base component's logical id, {adapter component name: resource})."""
    components = of_type(resources, "AWS::SageMaker::InferenceComponent")
    [base] = [lid for lid, r in components.items() if "ModelName" in r["Properties"]["Specification"]]
    return base, {r["Properties"]["InferenceComponentName"]: r for lid, r in components.items() if lid != base}


@pytest.mark.parametrize("endpoint", [VLLM, SGLANG])
def test_each_engine_runs_as_a_component_that_scales_to_zero(templates, endpoint):
    resources = templates[stack(endpoint)]["Resources"]
    [config] = of_type(resources, "AWS::SageMaker::EndpointConfig").values()
    [variant] = config["Properties"]["ProductionVariants"]
    assert "ModelName" not in variant
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2}
    base, _ = base_and_adapters(resources)
    spec = resources[base]["Properties"]["Specification"]
    assert resources[base]["Properties"]["InferenceComponentName"] == f"{ENV}-{endpoint}-ic"
    assert spec["ComputeResourceRequirements"]["NumberOfAcceleratorDevicesRequired"] == 1
    [copies] = [
        t["Properties"]
        for t in of_type(resources, "AWS::ApplicationAutoScaling::ScalableTarget").values()
        if t["Properties"]["ScalableDimension"] == "sagemaker:inference-component:DesiredCopyCount"
    ]
    assert (copies["MinCapacity"], copies["MaxCapacity"]) == (0, 2)
    # Woken from zero by the NoCapacityInvocationFailures alarm (stacks/inference_components.py).
    alarms = of_type(resources, "AWS::CloudWatch::Alarm").values()
    assert any(a["Properties"].get("MetricName") == "NoCapacityInvocationFailures" for a in alarms)


def test_vllm_adapters_are_components_on_the_base_with_their_own_artifacts(templates):
    resources = templates[stack(VLLM)]["Resources"]
    base, adapters = base_and_adapters(resources)
    [endpoint_lid] = of_type(resources, "AWS::SageMaker::Endpoint")
    assert sorted(adapters) == sorted(ADAPTERS.values())
    for name, component in ADAPTERS.items():
        resource = adapters[component]
        props = resource["Properties"]
        # No model, compute, copies or variant of its own: it runs in the base component's engine.
        assert set(props) == {"InferenceComponentName", "EndpointName", "Specification", "Tags"}
        assert props["EndpointName"] == {"Fn::GetAtt": [endpoint_lid, "EndpointName"]}
        assert set(props["Specification"]) == {"BaseInferenceComponentName", "Container"}
        assert props["Specification"]["BaseInferenceComponentName"] == f"{ENV}-{VLLM}-ic"
        url = json.dumps(props["Specification"]["Container"]["ArtifactUrl"])
        assert f"/models/{VLLM}/adapters/{name}/{'0' * 64}/model.tar.gz" in url  # unbuilt: the placeholder hash
        assert base in resource["DependsOn"]


def test_the_base_engine_is_started_with_lora_and_sagemakers_adapter_routes(templates):
    def lora_environment(endpoint: str) -> dict[str, str]:
        [model] = of_type(templates[stack(endpoint)]["Resources"], "AWS::SageMaker::Model").values()
        environment = model["Properties"]["PrimaryContainer"]["Environment"]
        return {k: v for k, v in environment.items() if "LORA" in k}

    assert lora_environment(VLLM) == {
        "SM_VLLM_ENABLE_LORA": "true",  # --enable-lora
        "SM_VLLM_MAX_LORAS": "2",  # both adapters in one batch
        "SM_VLLM_MAX_LORA_RANK": "32",  # engine.max_lora_rank
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true",  # SageMaker's POST /adapters
    }
    assert lora_environment(SGLANG) == {}


# ---------------------------------------------------------------------------------------------------------- config


def write(tmp_path, endpoint: str = VLLM, **fields) -> object:
    """The config with one endpoint, `fields` replacing its keys (None removes one)."""
    config = yaml.safe_load((ROOT / CONFIG).read_text())
    [spec] = [e for e in config["endpoints"] if e["name"] == endpoint]
    config["endpoints"] = [spec]
    for key, value in fields.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    path = tmp_path / "endpoints.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


TWO = [{"name": "sql", "model": "org/sql-lora"}, {"name": "support", "model": "org/support-lora"}]
REFUSED = [
    (
        "a rank vLLM does not take",
        dict(engine={"max_lora_rank": 12}),
        f"endpoint '{VLLM}': engine.max_lora_rank: value 12 is not supported by system 'vllm'; allowed: 1, 8, 16, 32, "
        "64, 128, 256, 320, 512 (or leave it out)",
    ),
    (
        "adapters on the variant",
        dict(hosting={"mode": "endpoint"}),
        f"endpoint '{VLLM}': adapters: 2 adapter(s) need hosting.mode: inference-components (got 'endpoint'): each "
        "adapter is an adapter inference component on the endpoint's base inference component; set hosting.mode: "
        "inference-components or remove adapters",
    ),
    (
        "adapters on sglang",
        dict(endpoint=SGLANG, adapters=TWO),
        f"endpoint '{SGLANG}': adapters: value (2 adapters) is not supported by system 'sglang': SGLang "
        f"{SGLANG_VERSION} has no SageMaker POST /adapters route and ignores the X-Amzn-SageMaker-Adapter-Identifier "
        "header (sglang/srt/entrypoints/http_server.py serves only /ping and /invocations for SageMaker), so an adapter "
        "inference component could neither be loaded nor invoked; use system vllm for adapters; systems that serve "
        "LoRA adapters: lmi-vllm, vllm",
    ),
    (
        "a LoRA size without LoRA",
        dict(adapters=None, engine={"max_lora_rank": 32}),
        f"endpoint '{VLLM}': engine.max_lora_rank: value 32 applies only with LoRA on; add adapters: (or enable_lora: "
        "true), or remove the key",
    ),
    (
        "LoRA turned off under adapters",
        dict(engine={"enable_lora": False}),
        f"endpoint '{VLLM}': engine.enable_lora: value False is not allowed with adapters: (2 adapter inference "
        "components) vLLM serves LoRA adapters only with --enable-lora; allowed: true, or leave the key out",
    ),
    (
        "SageMaker's adapter routes turned off",
        dict(engine={"allow_runtime_lora_updating": False}),
        f"endpoint '{VLLM}': engine.allow_runtime_lora_updating: value False is not allowed with adapters: (2 adapter "
        "inference components) SageMaker hands each adapter to the container through POST /adapters, which vLLM "
        "registers only with VLLM_ALLOW_RUNTIME_LORA_UPDATING; allowed: true, or leave the key out",
    ),
]


@pytest.mark.parametrize(("description", "fields", "expected"), REFUSED, ids=[r[0] for r in REFUSED])
def test_config_mistakes_are_refused_with_one_message(tmp_path, description, fields, expected):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, **fields))
    assert str(err.value).split(":\n  - ", 1)[1] == expected


def test_a_local_adapter_above_the_max_rank_is_refused_and_fits_when_raised(tmp_path):
    adapter = tmp_path / "wide"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "r": 64, "target_modules": ["q_proj", "v_proj"]})
    )
    adapters = [{"name": "wide", "model": str(adapter)}]
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, adapters=adapters, engine={}))
    assert str(err.value).split(":\n  - ", 1)[1] == (
        f"endpoint '{VLLM}': adapters[0] ('wide', '{adapter}'): rank 64 is above the container's max LoRA rank 16 "
        "(vLLM's default max_lora_rank 16); set engine.max_lora_rank: 64, or use an adapter of rank <= 16"
    )
    environment = load_config(write(tmp_path, adapters=adapters, engine={"max_lora_rank": 64, "max_loras": 1}))
    assert {k: v for k, v in environment.plan(VLLM).container_environment("bucket").items() if "LORA" in k} == {
        "SM_VLLM_ENABLE_LORA": "true",
        "SM_VLLM_MAX_LORAS": "1",
        "SM_VLLM_MAX_LORA_RANK": "64",
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true",
    }
