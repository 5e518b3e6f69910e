"""LoRA adapters as adapter inference components (`adapters:`): the config's refusals, the template of
config/examples/lmi-vllm-lora.yaml (session-cached synth, cdk-nag included; cfn-lint runs on it in
tests/config/test_examples.py), the AWS shapes it relies on, and how the invoke, stream and smoke code address an
adapter. The emulator has no inference components (moto 5.2.5: tests/local/test_teardown.py says so), so the
components are checked here on the template; their build and publish are tests/model_build/test_adapter_build.py's."""

from __future__ import annotations

import io
import json
import textwrap

import botocore.loaders
import pytest
import yaml
from botocore.response import StreamingBody
from botocore.stub import Stubber
from helpers import FAKE_HASH, ROOT, write_fake_manifest

from deployment import load_config
from deployment.adapters import deployable_adapters
from endpoint_config import ConfigError
from endpoint_config.adapters import COMPONENT_NAME_PATTERN
from endpoint_runtime import invoke, smoke

CONFIG, ENV, STACK = "config/examples/lmi-vllm-lora.yaml", "dev", "llm-endpoints-dev-llama-lora"
BASE = "dev-llama-lora-ic"
ADAPTERS = {"sql": "dev-llama-lora-sql", "support": "dev-llama-lora-support"}
GOOD = [{"generated_text": "SELECT 1"}]


@pytest.fixture(scope="module")
def lora(synth):
    return synth(CONFIG, ENV)


def of_type(resources: dict, type_name: str) -> dict[str, dict]:
    return {lid: r for lid, r in resources.items() if r["Type"] == type_name}


def split(components: dict[str, dict]) -> tuple[str, dict[str, dict]]:
    """(the base component's logical id, {adapter component name: resource})."""
    [base] = [lid for lid, r in components.items() if "ModelName" in r["Properties"]["Specification"]]
    return base, {r["Properties"]["InferenceComponentName"]: r for lid, r in components.items() if lid != base}


def artifact_url(join: dict) -> str:
    """The ArtifactUrl's Fn::Join with the account and region rendered."""
    parts = join["Fn::Join"][1]
    return "".join(
        p if isinstance(p, str) else {"AWS::AccountId": "111122223333", "AWS::Region": "us-east-1"}[p["Ref"]]
        for p in parts
    )


# -------------------------------------------------------------------------------------------------------- template


def test_each_adapter_is_an_inference_component_on_the_base_created_after_it(lora):
    resources = lora.templates[STACK]["Resources"]
    base_lid, adapters = split(of_type(resources, "AWS::SageMaker::InferenceComponent"))
    assert resources[base_lid]["Properties"]["InferenceComponentName"] == BASE
    [endpoint_lid] = of_type(resources, "AWS::SageMaker::Endpoint")
    assert sorted(adapters) == sorted(ADAPTERS.values())
    for name, component in ADAPTERS.items():
        resource = adapters[component]
        props = resource["Properties"]
        assert props["EndpointName"] == {"Fn::GetAtt": [endpoint_lid, "EndpointName"]}
        # No model, compute, copies or variant of its own: it runs in the base component's.
        assert set(props) == {"InferenceComponentName", "EndpointName", "Specification", "Tags"}
        assert set(props["Specification"]) == {"BaseInferenceComponentName", "Container"}
        assert props["Specification"]["BaseInferenceComponentName"] == BASE
        url = artifact_url(props["Specification"]["Container"]["ArtifactUrl"])
        # Unbuilt here (allow_unbuilt): the placeholder hash, under the adapter's own prefix.
        assert (
            url
            == f"s3://llm-endpoints-dev-artifacts-111122223333-us-east-1/models/llama-lora/adapters/{name}/{'0' * 64}/model.tar.gz"
        )
        # DependsOn: CloudFormation creates it after the base component and deletes it before (and after its own
        # artifact check: tests/stacks/test_adapter_artifact_check.py).
        assert base_lid in resource["DependsOn"]


def test_the_container_is_started_with_lora_sized_for_the_adapters(lora):
    [model] = of_type(lora.templates[STACK]["Resources"], "AWS::SageMaker::Model").values()
    environment = model["Properties"]["PrimaryContainer"]["Environment"]
    assert {k: v for k, v in environment.items() if "LORA" in k} == {
        "OPTION_ENABLE_LORA": "true",
        "OPTION_MAX_LORAS": "2",
        "OPTION_MAX_LORA_RANK": "16",
    }


def test_functions_know_the_adapters_and_may_invoke_and_describe_them(lora):
    resources = lora.templates[STACK]["Resources"]
    functions = of_type(resources, "AWS::Lambda::Function")
    known = [
        json.loads(f["Properties"]["Environment"]["Variables"]["ADAPTER_COMPONENTS"])
        for f in functions.values()
        if "ADAPTER_COMPONENTS" in f["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert known == [ADAPTERS, ADAPTERS, ADAPTERS]  # the invoke and smoke functions, the smoke-check custom resource
    outputs = lora.templates[STACK]["Outputs"]
    assert [json.loads(o["Value"]) for k, o in outputs.items() if k.startswith("LlmEndpointAdapters")] == [ADAPTERS]

    def granted(action: str) -> list[list]:
        found = []
        for policy in of_type(resources, "AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                if action in actions:
                    found.append(json.dumps(statement["Resource"]))
        return found

    for component in ADAPTERS.values():
        arn_tail = f":inference-component/{component}"
        # the invoke and smoke functions, and the smoke-check custom resource's function (stacks/smoke_check.py)
        assert sum(arn_tail in s for s in granted("sagemaker:InvokeEndpoint")) == 3
        # the smoke function and the smoke-check custom resource's (it waits for each adapter component)
        assert sum(arn_tail in s for s in granted("sagemaker:DescribeInferenceComponent")) == 2


def test_built_adapters_deploy_their_own_content_hash_and_unbuilt_ones_are_refused(synth, tmp_path):
    build_root = tmp_path / "build"
    write_fake_manifest(build_root, "llama-lora", "lmi-vllm", "bf16")
    with pytest.raises(ConfigError, match=r"endpoint 'llama-lora': adapter 'sql': no built adapter .* allow_unbuilt"):
        synth(CONFIG, ENV, build_root, False)
    hashes = {"sql": "a" * 64, "support": "b" * 64}
    spec = yaml.safe_load((ROOT / CONFIG).read_text())["endpoints"][0]
    for adapter in spec["adapters"]:
        d = build_root / "llama-lora.adapters" / adapter["name"]
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(
            json.dumps(
                {
                    "kind": "lora-adapter",
                    "endpoint": "llama-lora",
                    "adapter": adapter["name"],
                    "model": adapter["model"],
                    "content_hash": hashes[adapter["name"]],
                }
            )
        )
    plan = load_config(ROOT / CONFIG, ENV, build_root=build_root).plan("llama-lora")
    assert [a.artifact_url("bucket") for a in deployable_adapters(plan.adapters)] == [
        f"s3://bucket/models/llama-lora/adapters/{name}/{hashes[name]}/model.tar.gz" for name in ("sql", "support")
    ]
    # A build made for another adapter is refused by name.
    (build_root / "llama-lora.adapters" / "sql" / "manifest.json").write_text(
        json.dumps(
            {
                "kind": "lora-adapter",
                "endpoint": "llama-lora",
                "adapter": "support",
                "model": "x",
                "content_hash": FAKE_HASH,
            }
        )
    )
    plan = load_config(ROOT / CONFIG, ENV, build_root=build_root).plan("llama-lora")
    with pytest.raises(
        ConfigError, match=r"adapter 'sql': the build in .* has adapter 'support', the config says 'sql'"
    ):
        deployable_adapters(plan.adapters)


def test_the_aws_shapes_take_what_the_template_sends():
    """botocore 1.44.8's SageMaker model has the two properties the adapter components send, and the component name
    rule here is botocore's."""
    shapes = botocore.loaders.create_loader().load_service_model("sagemaker", "service-2")["shapes"]
    assert {"BaseInferenceComponentName", "Container"} <= set(shapes["InferenceComponentSpecification"]["members"])
    assert (
        "single gzip compressed tar archive"
        in shapes["InferenceComponentContainerSpecification"]["members"]["ArtifactUrl"]["documentation"]
    )
    assert (
        shapes["InferenceComponentName"]["pattern"] == COMPONENT_NAME_PATTERN
        and shapes["InferenceComponentName"]["max"] == 63
    )
    # cfn-lint's schema (additionalProperties false) checks the same two properties on the example's template:
    # tests/config/test_examples.py test_cfn_lint_passes_on_every_example_template.


# ---------------------------------------------------------------------------------------------------------- config

ENDPOINT = """\
endpoints:
  - name: chat
    system: {system}
    model: meta-llama/Llama-3.1-8B-Instruct
    instance_type: ml.g5.2xlarge
    volume_size_gb: null
    hosting: {{mode: {mode}}}
    engine: {engine}
    adapters: {adapters}
"""
TWO = [{"name": "sql", "model": "org/sql-lora"}, {"name": "support", "model": "org/support-lora"}]

# (description, fields, the expected message): each mistake refused at load with one message.
REFUSED = [
    (
        "the model on the variant",
        dict(mode="endpoint"),
        "endpoint 'chat': adapters: 2 adapter(s) need hosting.mode: inference-components (got 'endpoint'): each adapter "
        "is an adapter inference component on the endpoint's base inference component; set hosting.mode: "
        "inference-components or remove adapters",
    ),
    (
        "a name twice",
        dict(adapters=[TWO[0], {**TWO[1], "name": "sql"}]),
        "endpoint 'chat': adapters[1].name: value 'sql' is used twice; adapter names must be unique",
    ),
    (
        "the base component's name",
        dict(adapters=[{**TWO[0], "name": "ic"}]),
        "endpoint 'chat': adapters[0].name: value 'ic' is reserved: the base inference component is named "
        "'<endpoint>-ic'; choose another name",
    ),
    (
        "a system without adapters",
        dict(system="lmi-trtllm"),
        "endpoint 'chat': adapters: value (2 adapters) is not supported by system 'lmi-trtllm': no way to load LoRA "
        "adapter inference components is established for it; systems that serve LoRA adapters: lmi-vllm, vllm",
    ),
    (
        "max_lora_rank without adapters",
        dict(adapters=[], engine={"max_lora_rank": 32}),
        "endpoint 'chat': engine.max_lora_rank: value 32 applies only to LoRA adapters; add adapters: or remove the key",
    ),
    (
        "a rank vLLM does not take",
        dict(engine={"max_lora_rank": 12}),
        "endpoint 'chat': engine.max_lora_rank: value 12 is not supported by system 'lmi-vllm'; allowed: 1, 8, 16, 32, "
        "64, 128, 256, 320, 512 (or leave it out)",
    ),
]


def write(tmp_path, **fields) -> object:
    values = dict(system="lmi-vllm", mode="inference-components", engine={}, adapters=TWO) | fields
    path = tmp_path / "endpoints.yaml"
    path.write_text(
        ENDPOINT.format(**{k: json.dumps(v) if k in ("engine", "adapters") else v for k, v in values.items()})
    )
    return path


@pytest.mark.parametrize(("description", "fields", "expected"), REFUSED, ids=[r[0] for r in REFUSED])
def test_config_mistakes_are_refused_with_one_message(tmp_path, description, fields, expected):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, **fields))
    assert str(err.value).split(":\n  - ", 1)[1] == expected


def test_a_local_adapter_above_the_max_rank_is_refused_at_load_and_fits_when_raised(tmp_path):
    adapter = tmp_path / "wide"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(
        json.dumps(
            {"peft_type": "LORA", "r": 8, "rank_pattern": {"q_proj": 32}, "target_modules": ["q_proj", "v_proj"]}
        )
    )
    adapters = [{"name": "wide", "model": str(adapter)}]
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, adapters=adapters))
    assert str(err.value).endswith(
        f"endpoint 'chat': adapters[0] ('wide', '{adapter}'): rank 32 is above the container's max LoRA rank 16 (vLLM's "
        "default max_lora_rank 16); set engine.max_lora_rank: 32, or use an adapter of rank <= 16"
    )
    plan = load_config(write(tmp_path, adapters=adapters, engine={"max_lora_rank": 32})).plan("chat")
    assert plan.container_environment("bucket")["OPTION_MAX_LORA_RANK"] == "32"


def test_an_adapter_component_name_must_fit_in_every_environment(tmp_path):
    """'<endpoint>-<adapter>' at most 63 characters, where the endpoint's name carries the environment's."""
    path = write(tmp_path, adapters=[{"name": "a" * 20, "model": "org/x"}])
    path.write_text(
        "environments:\n  default12345: {region: us-east-1}\n  dev: {}\n"
        + path.read_text().replace("name: chat", f"name: {'c' * 30}")
    )
    assert load_config(path, "dev").plan("c" * 30).adapters[0].component_name == f"dev-{'c' * 30}-{'a' * 20}"  # 55
    with pytest.raises(ConfigError) as err:
        load_config(path, "default12345")
    name = f"default12345-{'c' * 30}-{'a' * 20}"
    assert str(err.value).split(":\n  - ", 1)[1] == (
        f"endpoint '{'c' * 30}': adapters[0].name: value '{'a' * 20}': its inference component name '{name}' has 64 "
        "characters, more than SageMaker's 63; allowed: an adapter name of at most 19 characters here"
    )


def test_a_pipeline_needs_each_adapter_pinned(tmp_path):
    path = write(tmp_path)
    text = path.read_text().replace("    adapters:", "    artifact_hash: " + "c" * 64 + "\n    adapters:")
    path.write_text(
        textwrap.dedent("""\
        environments: {dev: {account: "111122223333", region: us-east-1}}
        pipeline:
          connection_arn: arn:aws:codeconnections:us-east-1:111122223333:connection/abc
          repository: org/repo
          stages: [dev]
        """)
        + text
    )
    with pytest.raises(ConfigError) as err:
        load_config(path, "dev")
    assert "environment 'dev': endpoint 'chat': adapters[0].artifact_hash: required key is missing" in str(err.value)
    assert "adapters[1].artifact_hash" in str(err.value)


# ------------------------------------------------------------------------------------------- invoke, stream, smoke


def test_a_request_names_an_adapter_and_goes_to_its_component(monkeypatch):
    monkeypatch.setenv("INFERENCE_COMPONENT_NAME", BASE)
    monkeypatch.setenv("ADAPTER_COMPONENTS", json.dumps(ADAPTERS))
    request = {"inputs": "Count the rows", "parameters": {"max_new_tokens": 8}}
    assert invoke.target_component(request) == (request, BASE)
    assert invoke.target_component({**request, "adapter": "sql"}) == (request, ADAPTERS["sql"])
    for bad, shown in (("nope", "'nope'"), (3, "integer"), (None, "null")):
        with pytest.raises(invoke.RequestError) as err:
            invoke.target_component({**request, "adapter": bad})
        assert err.value.message == (
            f"adapter: value {shown} is not an adapter of this endpoint; allowed: sql, support "
            "(or leave the key out for the base model)"
        )
        assert err.value.status == 400
    monkeypatch.delenv("ADAPTER_COMPONENTS")
    with pytest.raises(invoke.RequestError, match="allowed: none"):
        invoke.target_component({**request, "adapter": "sql"})
    monkeypatch.setenv("ADAPTER_COMPONENTS", "[1]")
    with pytest.raises(invoke.SetupError, match="ADAPTER_COMPONENTS must be a JSON object"):
        invoke.target_component({**request, "adapter": "sql"})


def runtime_answer(body: object) -> dict:
    raw = json.dumps(body).encode()
    return {"Body": StreamingBody(io.BytesIO(raw), len(raw)), "ContentType": "application/json"}


def test_the_invoke_handler_sends_an_adapter_request_to_the_adapter_component(monkeypatch):
    import boto3

    monkeypatch.setenv("ENDPOINT_NAME", "dev-llama-lora")
    monkeypatch.setenv("INFERENCE_COMPONENT_NAME", BASE)
    monkeypatch.setenv("ADAPTER_COMPONENTS", json.dumps(ADAPTERS))
    client = boto3.client(
        "sagemaker-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    sent = {
        "EndpointName": "dev-llama-lora",
        "ContentType": "application/json",
        "Accept": "application/json",
        # the body the container reads: return_full_text stated (endpoint_runtime/bodies.py generation_parameters)
        "Body": json.dumps(
            {"inputs": "Count", "parameters": {"return_full_text": False, "max_new_tokens": 8}}, separators=(",", ":")
        ).encode(),
    }
    with Stubber(client) as stub:
        stub.add_response(
            "invoke_endpoint", runtime_answer(GOOD), {**sent, "InferenceComponentName": ADAPTERS["support"]}
        )
        stub.add_response("invoke_endpoint", runtime_answer(GOOD), {**sent, "InferenceComponentName": BASE})
        monkeypatch.setattr(invoke, "_client", client)
        for adapter in ("support", None):
            event = {"inputs": "Count", "parameters": {"max_new_tokens": 8}} | ({"adapter": adapter} if adapter else {})
            answer = invoke.handler(event)
            assert answer["statusCode"] == 200 and json.loads(answer["body"])["outputs"] == GOOD
        stub.assert_no_pending_responses()
        refused = invoke.handler({"inputs": "Count", "adapter": "sales"})
    assert refused["statusCode"] == 400 and "allowed: sql, support" in json.loads(refused["body"])["error"]


def test_the_stream_function_takes_the_same_adapter_key(monkeypatch):
    from endpoint_runtime import stream

    monkeypatch.setenv("ENDPOINT_NAME", "dev-llama-lora")
    monkeypatch.setenv("ADAPTER_COMPONENTS", json.dumps(ADAPTERS))
    seen = {}

    def open_stream(endpoint, payload, *, log, inference_component):
        seen.update(payload=payload, component=inference_component)
        return 200, iter([b"{}\n"])

    monkeypatch.setattr(stream, "open_stream", open_stream)
    status, _, body = stream.handle_request("POST", json.dumps({"inputs": "Count", "adapter": "sql"}).encode())
    list(body)
    assert status == 200 and seen == {"payload": {"inputs": "Count"}, "component": ADAPTERS["sql"]}
    status, _, body = stream.handle_request("POST", json.dumps({"inputs": "Count", "adapter": "x"}).encode())
    assert status == 400 and b"not an adapter of this endpoint" in body


def described(name: str, status: str = "InService", base: str = BASE) -> dict:
    return {
        "InferenceComponentName": name,
        "InferenceComponentArn": f"arn:aws:sagemaker:us-east-1:1:inference-component/{name}",
        "EndpointName": "dev-llama-lora",
        "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/dev-llama-lora",
        "InferenceComponentStatus": status,
        "Specification": {"BaseInferenceComponentName": base},
        "CreationTime": 0,
        "LastModifiedTime": 0,
    }


def test_the_smoke_test_checks_and_invokes_each_adapter():
    import boto3

    keys = dict(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    sm, runtime = boto3.client("sagemaker", **keys), boto3.client("sagemaker-runtime", **keys)
    adapters = {
        "sql": ADAPTERS["sql"],
        "support": ADAPTERS["support"],
        "stale": "dev-llama-lora-stale",
        "old": "dev-llama-lora-old",
    }
    payload = {"inputs": "Count", "parameters": {"max_new_tokens": 8, "do_sample": False}}
    with Stubber(sm) as sm_stub, Stubber(runtime) as rt_stub:
        sm_stub.add_response("describe_inference_component", described("dev-llama-lora-old", base="other-ic"))
        sm_stub.add_response("describe_inference_component", described(ADAPTERS["sql"]))
        rt_stub.add_response("invoke_endpoint", runtime_answer(GOOD), None)
        sm_stub.add_response("describe_inference_component", described("dev-llama-lora-stale", status="Failed"))
        sm_stub.add_response("describe_inference_component", described(ADAPTERS["support"]))
        rt_stub.add_response("invoke_endpoint", runtime_answer({"not": "a list"}), None)
        result = smoke.SmokeResult(stack=STACK)
        smoke.check_adapters(
            result,
            sm,
            adapters,
            base=BASE,
            endpoint="dev-llama-lora",
            payload=payload,
            latency_budget_ms=30000,
            client=runtime,
        )
    by_name = {c.name: c for c in result.checks}
    assert [c.name for c in result.checks] == ["adapter old", "adapter sql", "adapter stale", "adapter support"]
    assert by_name["adapter sql"].ok and by_name["adapter sql"].message.startswith("dev-llama-lora-sql: 200 in ")
    assert (
        not by_name["adapter old"].ok
        and "is on base component other-ic, not dev-llama-lora-ic" in by_name["adapter old"].message
    )
    assert not by_name["adapter stale"].ok and "is Failed, not InService" in by_name["adapter stale"].message
    assert not by_name["adapter support"].ok and "expected a non-empty list" in by_name["adapter support"].message
