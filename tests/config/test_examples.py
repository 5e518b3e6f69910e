"""Every file in config/examples/ synthesizes in every environment it defines, passes cdk-nag and cfn-lint."""

from __future__ import annotations

import json

import pytest
from helpers import EXAMPLE_CASES, ROOT

# slow: every example synthesized with cdk-nag (make test-fast leaves them out)
pytestmark = pytest.mark.slow

CASES = EXAMPLE_CASES


@pytest.mark.parametrize("config,env", CASES, ids=[f"{c.split('/')[-1]}:{e}" for c, e in CASES])
def test_example_synthesizes_with_nag_clean(all_examples, config, env):
    synthesized = all_examples[(config, env)]
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    findings = [
        v
        for plugin in report["pluginReports"]
        for v in plugin.get("violations", [])
        if not v["ruleName"].startswith("Annotation::llm-endpoints:")
    ]
    assert findings == []
    for name, template in synthesized.templates.items():
        if name.endswith("-artifacts"):
            continue
        types = {r["Type"] for r in template["Resources"].values()}
        assert {"AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::Endpoint"} <= types


def _endpoint_resources(synthesized, stack):
    resources = synthesized.templates[stack]["Resources"].values()
    by_type = {}
    for r in resources:
        by_type.setdefault(r["Type"], []).append(r)
    [model] = by_type["AWS::SageMaker::Model"]
    [config] = by_type["AWS::SageMaker::EndpointConfig"]
    [variant] = config["Properties"]["ProductionVariants"]
    return model["Properties"], variant, by_type


# The reference setups of the systems our users come from, as the example files reproduce them.
REFERENCE = {
    "djl-deepspeed.yaml": dict(
        stack="llm-endpoints-dev-gptj-deepspeed",
        image="djl-inference:0.27.0-deepspeed0.12.6-cu121",
        instance="ml.g5.12xlarge",
        timeouts=(600, 900),
        copies=2,
        legacy=True,
    ),
    "djl-accelerate.yaml": dict(
        stack="llm-endpoints-dev-gptj-accelerate",
        image="djl-inference:0.27.0-deepspeed0.12.6-cu121",
        instance="ml.g5.12xlarge",
        copies=2,
    ),
    "djl-fastertransformer.yaml": dict(
        stack="llm-endpoints-dev-flan-t5-xxl-ft",
        image="djl-inference:0.24.0-fastertransformer5.3.0-cu118",
        instance="ml.g5.12xlarge",
        timeouts=(600, 600),
        copies=1,
        legacy=True,
        staged=True,
    ),
    "lmi-vllm.yaml": dict(
        stack="llm-endpoints-dev-gptj-vllm",
        image="djl-inference:0.36.0-lmi27.0.0-cu130",
        instance="ml.g5.12xlarge",
        env={"OPTION_ASYNC_MODE": "true", "OPTION_MODEL_ID": "/opt/ml/model"},
    ),
    "lmi-trtllm.yaml": dict(
        stack="llm-endpoints-dev-mistral-trtllm",
        image="djl-inference:0.33.0-tensorrtllm0.21.0-cu128",
        instance="ml.g5.12xlarge",
        env={"OPTION_ASYNC_MODE": "true", "OPTION_MAX_SEQ_LEN": "4096", "OPTION_MAX_INPUT_LEN": "3072"},
    ),
    "hf-fastload.yaml": dict(
        stack="llm-endpoints-dev-gptj-fastload",
        image="huggingface-pytorch-inference:2.6.0-transformers4.51.3-gpu",
        instance="ml.g5.2xlarge",
        timeouts=(600, 600),
        copies=1,
    ),
    "tensorrt-byoc.yaml": dict(
        stack="llm-endpoints-dev-gpt2-tensorrt",
        own_image=True,
        instance="ml.g4dn.xlarge",
        env={"TRT_BACKEND": "tensorrt", "TRT_MAX_BATCH": "10", "TRT_MAX_SEQUENCE_LENGTH": "42"},
    ),
    "deepspeed-byoc.yaml": dict(own_image=True, instance="ml.g5.2xlarge", env={"DS_KERNEL_INJECTION": "true"}),
}


@pytest.mark.parametrize("example", sorted(REFERENCE))
def test_reference_setup(all_examples, example, synth):
    want = REFERENCE[example]
    synthesized = all_examples[(f"config/examples/{example}", "dev")]
    stack = want.get("stack") or next(n for n in synthesized.templates if not n.endswith("-artifacts"))
    model, variant, by_type = _endpoint_resources(synthesized, stack)
    container = model["PrimaryContainer"]
    image = json.dumps(container["Image"])
    if want.get("own_image"):
        assert "cdk-hnb659fds-container-assets" in image  # built from this repository (DockerImageAsset)
    else:
        assert want["image"] in image
    assert variant["InstanceType"] == want["instance"]
    assert "VolumeSizeInGB" not in variant  # every reference instance has local NVMe
    if "timeouts" in want:
        assert (
            variant["ModelDataDownloadTimeoutInSeconds"],
            variant["ContainerStartupHealthCheckTimeoutInSeconds"],
        ) == want["timeouts"]
    for key, value in want.get("env", {}).items():
        assert container["Environment"][key] == value, key
    data = json.dumps(container.get("ModelDataSource", {}))
    if want.get("staged"):
        # Weights stay in S3 for the engine to fetch; SageMaker downloads the code/ part only.
        assert data.endswith('/code/"]]}}}') and model["EnableNetworkIsolation"] is False
        staged = json.dumps(container["Environment"])
        assert '"s3://' in staged and '/weights/"' in staged
    else:
        assert "S3Prefix" in data
    messages = json.dumps(json.loads((synthesized.outdir / f"{stack}.metadata.json").read_text()))
    if "copies" in want and want["copies"] > 1:
        assert f"each instance serves {want['copies']} copies of the model" in messages
    assert ("is retired upstream" in messages) == bool(want.get("legacy"))
    from deployment import load_config

    scaled = load_config(ROOT / "config" / "examples" / example, "dev").endpoints[0].autoscaling is not None
    assert bool(by_type.get("AWS::ApplicationAutoScaling::ScalingPolicy")) == scaled


def test_invoke_function_has_the_containers_request_limits(all_examples):
    """The invoke function refuses what the model would: it gets the request_contract limits (MAX_NEW_TOKENS,
    MAX_BATCH_SIZE, MAX_INPUT_CHARS) the container's environment sets, and none the container does not; and a batch
    of at most the prompts a body its container reads (ContainerBodies.prompts_per_body: tgi, lmi-vllm)."""
    from deployment import load_config
    from request_contract import LIMIT_ENV

    one_body: dict[str, int] = {}  # stack name -> the prompts its container reads from one body
    for config, environment in all_examples:
        for plan in load_config(ROOT / config, environment).plans:
            if plan.system.bodies.prompts_per_body is not None:
                one_body[plan.stack_name] = plan.system.bodies.prompts_per_body
    assert one_body  # the lmi-vllm and tgi examples
    with_limits = 0
    for synthesized in all_examples.values():
        for name, template in synthesized.templates.items():
            resources = list(template["Resources"].values())
            # the endpoint's model (an instance pool with other engine settings has a PoolModel<priority> of its own)
            models = [
                r
                for key, r in template["Resources"].items()
                if r["Type"] == "AWS::SageMaker::Model" and "PoolModel" not in key
            ]
            if not models:
                continue
            [model] = models
            [function] = [
                r
                for r in resources
                if r["Type"] == "AWS::Lambda::Function"
                and r["Properties"].get("Handler", "").startswith("invoke/handler.")
            ]
            container = model["Properties"]["PrimaryContainer"].get("Environment", {})
            want = {k: v for k, v in container.items() if k in LIMIT_ENV}
            variables = function["Properties"]["Environment"]["Variables"]
            got = {k: v for k, v in variables.items() if k in LIMIT_ENV}
            if any(k.startswith(("SM_VLLM_", "SM_SGLANG_")) for k in container):
                # an engine's own OpenAI server bounds requests by its context (engines review F7): the functions
                # cap new tokens at the engine's max_model_len where the config sets it, characters at the body's
                from endpoint_runtime.bodies import ENGINE_MAX_INPUT_CHARS

                assert got.pop("MAX_INPUT_CHARS") == str(ENGINE_MAX_INPUT_CHARS), name
                length = container.get("SM_VLLM_MAX_MODEL_LEN") or container.get("SM_SGLANG_CONTEXT_LENGTH")
                new_tokens = got.pop("MAX_NEW_TOKENS")
                assert new_tokens == length if length else int(new_tokens) >= 1, (name, new_tokens, length)
            if name in one_body:
                batch = min(int(want.pop("MAX_BATCH_SIZE", one_body[name])), one_body[name])
                assert got.pop("MAX_BATCH_SIZE") == str(batch), name
            assert got == want, name
            with_limits += bool(want)
    assert with_limits  # the byoc examples set them (tensorrt-byoc from its engine profile)
