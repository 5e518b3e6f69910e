"""The post-deploy smoke test (model_build/smoke.py + lambda/smoke/handler.py) against the moto server.

The endpoint stack is created with boto3 from a small template with the Model/EndpointConfig/Endpoint of an
endpoint stack (no CDK). moto's InvokeEndpoint answers with canned results set through its
/moto-api/static/sagemaker/endpoint-results API. What moto cannot produce -- a stack in UPDATE_ROLLBACK_COMPLETE,
an endpoint that is not InService -- comes from botocore's Stubber.
"""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from helpers import Session

import endpoint_runtime.smoke as smoke
from deployment import load_config
from endpoint_config import artifact_bucket_name
from local_emulator import moto_server
from model_build.cli import main
from model_build.smoke import run_smoke

ROOT = Path(__file__).resolve().parents[2]
SMOKE_HANDLER = Path(smoke.__file__)  # the checks' source file (the Lambda entry point is lambda/smoke/handler.py)
GOOD = [{"generated_text": "The capital of France is Paris."}]


def write_config(tmp_path: Path, **changes) -> Path:
    """config/local.yaml with changes to its one endpoint (and `account` for the environment)."""
    raw = yaml.safe_load((ROOT / "config" / "local.yaml").read_text())
    if "account" in changes:
        raw["environments"]["local"]["account"] = changes.pop("account")
    # moto answers no OpenAI route (/openai/v1): the chat check is tested against the local server
    # (tests/lambda/test_chat_front_doors.py, the demo); these tests are about the other checks.
    raw["endpoints"][0].pop("chat", None)
    raw["endpoints"][0].update(changes)
    if changes.get("invocation", {}).get("mode") == "async":
        raw["endpoints"][0].pop("slo", None)  # an asynchronous endpoint is not load-tested
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def environment_plan(tmp_path):
    return load_config(write_config(tmp_path), "local")


def template(endpoint_name: str) -> str:
    return json.dumps(
        {
            "Resources": {
                "Model": {
                    "Type": "AWS::SageMaker::Model",
                    "Properties": {
                        "ExecutionRoleArn": f"arn:aws:iam::{moto_server.EMULATOR_ACCOUNT}:role/sagemaker-exec",
                        "PrimaryContainer": {"Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/x:1"},
                    },
                },
                "EndpointConfig": {
                    "Type": "AWS::SageMaker::EndpointConfig",
                    "Properties": {
                        "ProductionVariants": [
                            {
                                "VariantName": "AllTraffic",
                                "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
                                "InitialInstanceCount": 1,
                                "InstanceType": "ml.m5.xlarge",
                                "InitialVariantWeight": 1.0,
                            }
                        ]
                    },
                },
                "Endpoint": {
                    "Type": "AWS::SageMaker::Endpoint",
                    "Properties": {
                        "EndpointName": endpoint_name,
                        "EndpointConfigName": {"Fn::GetAtt": ["EndpointConfig", "EndpointConfigName"]},
                    },
                },
            }
        }
    )


def deploy_stack(environment_plan, name: str = "tiny-gpt2") -> tuple[str, str]:
    """Create the endpoint stack the way `cdk deploy` would; returns (endpoint name, endpoint config name)."""
    spec = environment_plan.endpoint(name)
    stack = environment_plan.stack_name(spec.name)
    cfn = boto3.client("cloudformation")
    cfn.create_stack(StackName=stack, TemplateBody=template(environment_plan.endpoint_name(spec)))
    assert cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    endpoint = boto3.client("sagemaker").list_endpoints()["Endpoints"][0]["EndpointName"]
    return endpoint, boto3.client("sagemaker").describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]


def by_name(result) -> dict:
    return {c.name: c for c in result.checks}


# ---------------------------------------------------------------------------------------------------------------


def test_deployed_endpoint_passes(moto_env, environment_plan):
    endpoint, config = deploy_stack(environment_plan)
    moto_env.set_invoke_results([GOOD])
    result = run_smoke(environment_plan, environment_plan.plan("tiny-gpt2"))
    assert result.ok, smoke.format_checks(result.checks)
    checks = by_name(result)
    assert [c.name for c in result.checks] == ["stack", "endpoint", "status", "config", "invoke", "response", "latency"]
    # moto ignores EndpointName: the endpoint comes from the stack, and the name difference is explained.
    assert result.endpoint == endpoint != "tiny-gpt2"
    assert "the emulator names endpoints itself" in checks["endpoint"].message
    assert config in checks["config"].message
    assert result.outputs == GOOD and 0 <= result.latency_ms <= 30000


def test_rolled_back_endpoint_fails_on_config_mismatch(moto_env, environment_plan):
    """A failed blue/green update leaves the endpoint InService on another config than the stack deployed."""
    endpoint, config = deploy_stack(environment_plan)
    sm = boto3.client("sagemaker")
    model = sm.list_models()["Models"][0]["ModelName"]
    sm.create_endpoint_config(
        EndpointConfigName="previous-config",
        ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": model, "InitialInstanceCount": 1, "InstanceType": "ml.m5.xlarge"}
        ],
    )
    # moto has no UpdateEndpoint: put the endpoint back on the other config by recreating it under its name.
    sm.delete_endpoint(EndpointName=endpoint)
    sm.create_endpoint(EndpointName=endpoint, EndpointConfigName="previous-config")
    assert sm.describe_endpoint(EndpointName=endpoint)["EndpointStatus"] == "InService"
    moto_env.set_invoke_results([GOOD])
    result = run_smoke(environment_plan, environment_plan.plan("tiny-gpt2"))
    assert not result.ok
    assert [c.name for c in result.failures] == ["config"]
    msg = result.failures[0].message
    assert f"runs endpoint config previous-config, but stack llm-endpoints-local-tiny-gpt2 deployed {config}" in msg
    assert "deploy the stack again" in msg


SHAPES = [
    ({"text": "Paris"}, "got dict"),
    ([], "got an empty list"),
    ([{"text": "Paris"}], "'generated_text' is missing"),
    ([{"generated_text": 42}], "'generated_text' is int"),
    (["Paris"], "item 0 is str"),
    ([{"generated_text": "a"}, {"generated_text": None}], "item 1: 'generated_text' is NoneType"),
]


@pytest.mark.parametrize("body, expected", SHAPES)
def test_response_shape_rules(body, expected):
    assert expected in smoke.check_response_shape(body)
    assert smoke.check_response_shape(GOOD + [{"generated_text": "", "details": {}}]) is None


def test_lmi_27s_object_reply_is_the_right_shape():
    """LMI 27 answers {"inputs"} with one object (djl-serving 0.36.0-lmi27-dlc request_response_utils.py:137-146);
    the smoke test read only a list before, so an lmi-vllm endpoint failed its smoke test on AWS."""
    assert smoke.check_response_shape({"generated_text": "Paris"}) is None
    assert "'generated_text' is int" in smoke.check_response_shape({"generated_text": 42})


@pytest.mark.parametrize("body, expected", [SHAPES[0], SHAPES[2]])
def test_bad_shape_fails(moto_env, environment_plan, body, expected):
    deploy_stack(environment_plan)
    moto_env.set_invoke_results([body])
    result = run_smoke(environment_plan, environment_plan.plan("tiny-gpt2"))
    assert [c.name for c in result.failures] == ["response"]
    assert expected in result.failures[0].message and "wrong shape" in result.failures[0].message


def test_non_json_answer_fails_invoke(moto_env, environment_plan):
    deploy_stack(environment_plan)
    moto_env.set_invoke_results(["not json"])
    result = run_smoke(environment_plan, environment_plan.plan("tiny-gpt2"))
    assert [c.name for c in result.failures] == ["invoke"]
    assert "returned 502 model_error" in result.failures[0].message and "non-JSON" in result.failures[0].message
    assert by_name(result)["latency"].skipped


def test_slow_answer_exceeds_latency_budget(moto_env, tmp_path):
    environment_plan = load_config(write_config(tmp_path, smoke_test={"latency_budget_ms": 100}), "local")
    deploy_stack(environment_plan)
    moto_env.set_invoke_results([GOOD])
    runtime = smoke.make_runtime_client()
    # A slow model: every InvokeEndpoint request waits 250 ms before it is sent.
    runtime.meta.events.register("before-send.sagemaker-runtime.InvokeEndpoint", lambda **_: time.sleep(0.25))
    result = run_smoke(environment_plan, environment_plan.plan("tiny-gpt2"), runtime_client=runtime)
    assert [c.name for c in result.failures] == ["latency"]
    assert result.latency_ms >= 250
    assert "ms is over the 100 ms budget (smoke_test.latency_budget_ms, 16 new tokens)" in result.failures[0].message


def test_missing_stack(moto_env, environment_plan):
    result = run_smoke(environment_plan, environment_plan.plan("tiny-gpt2"))
    assert [c.name for c in result.checks] == ["stack"] and not result.ok
    assert (
        "llm-endpoints-local-tiny-gpt2 does not exist in region us-east-1: deploy it first" in result.checks[0].message
    )


def test_rolled_back_stack_and_endpoint_not_in_service(moto_env, environment_plan):
    """moto has no rollbacks and its endpoints are always InService: Stubber plays a rolled-back update."""
    endpoint, config = deploy_stack(environment_plan)
    stack = environment_plan.stack_name("tiny-gpt2")
    real = boto3.client("cloudformation")
    resources = real.list_stack_resources(StackName=stack)
    cfn = boto3.client("cloudformation")
    sm = boto3.client("sagemaker")
    with Stubber(cfn) as cfn_stub, Stubber(sm) as sm_stub:
        stack_desc = real.describe_stacks(StackName=stack)["Stacks"][0]
        cfn_stub.add_response(
            "describe_stacks",
            {"Stacks": [{**stack_desc, "StackStatus": "UPDATE_ROLLBACK_COMPLETE"}]},
            {"StackName": stack},
        )
        cfn_stub.add_response(
            "list_stack_resources",
            {"StackResourceSummaries": resources["StackResourceSummaries"]},
            {"StackName": stack},
        )
        desc = boto3.client("sagemaker").describe_endpoint(EndpointName=endpoint)
        desc.pop("ResponseMetadata")
        desc.pop("DataCaptureConfig", None)  # moto returns an empty one, which the API model does not allow
        sm_stub.add_response(
            "describe_endpoint",
            {**desc, "EndpointStatus": "Failed", "FailureReason": "health check"},
            {"EndpointName": endpoint},
        )
        result = run_smoke(
            environment_plan, environment_plan.plan("tiny-gpt2"), session=Session(cloudformation=cfn, sagemaker=sm)
        )
    failures = {c.name: c.message for c in result.failures}
    assert list(failures) == ["stack", "status"]
    assert "UPDATE_ROLLBACK_COMPLETE: its last deploy failed and was rolled back" in failures["stack"]
    assert "is Failed, not InService (health check)" in failures["status"]
    assert by_name(result)["invoke"].skipped


def test_wrong_account_is_refused_first(moto_env, tmp_path):
    environment_plan = load_config(write_config(tmp_path, account="111122223333"), "local")
    result = run_smoke(environment_plan, environment_plan.plan("tiny-gpt2"))
    assert [c.name for c in result.checks] == ["credentials"]
    assert "is account 111122223333, but the credentials are account 123456789012" in result.checks[0].message


# ---------------------------------------------------------------------------------------------------------------
# CLI


def test_cli_smoke_passes_and_fails(moto_env, environment_plan, capsys):
    deploy_stack(environment_plan)
    moto_env.set_invoke_results([GOOD])
    argv = ["smoke", "--config", str(environment_plan.config_path), "--endpoint", "tiny-gpt2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "PASS  config" in out and "passed in" in out and "Paris" in out
    moto_env.reset()  # stack gone
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "FAIL  stack" in captured.out
    assert captured.err.startswith(
        "error: smoke test of endpoint 'tiny-gpt2' (stack llm-endpoints-local-tiny-gpt2) failed:"
    )
    assert "Traceback" not in captured.err


def test_cli_unknown_endpoint(moto_env, capsys):
    assert main(["smoke", "--config", str(ROOT / "config" / "local.yaml"), "--endpoint", "nope"]) == 2
    assert "no endpoint named 'nope'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------
# The Lambda handler


def test_lambda_handler_reads_its_environment(moto_env, environment_plan, monkeypatch, capsys):
    endpoint, _ = deploy_stack(environment_plan)
    moto_env.set_invoke_results([GOOD])
    monkeypatch.setenv("STACK_NAME", environment_plan.stack_name("tiny-gpt2"))
    monkeypatch.setenv("ENDPOINT_NAME", "tiny-gpt2")
    monkeypatch.setenv("EMULATOR", "true")
    for key, value in {"PROMPT": "Hello", "MAX_NEW_TOKENS": "8", "LATENCY_BUDGET_MS": "30000"}.items():
        monkeypatch.setenv(key, value)
    out = smoke.handler({}, None)
    assert out["ok"] and out["endpoint"] == endpoint and out["failures"] == []
    log = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert log["message"] == "smoke" and log["ok"] and "Paris" not in json.dumps(log)  # no model text in logs
    # Without EMULATOR=true, a stack whose endpoint is not the one clients call is a failure.
    monkeypatch.delenv("EMULATOR")
    out = smoke.handler({}, None)
    assert not out["ok"] and out["failures"][0].startswith(
        "endpoint: stack llm-endpoints-local-tiny-gpt2 deployed endpoint"
    )


def test_lambda_handler_configuration_errors(monkeypatch):
    monkeypatch.delenv("STACK_NAME", raising=False)
    out = smoke.handler({}, None)
    assert not out["ok"] and "STACK_NAME is not set" in out["failures"][0]
    monkeypatch.setenv("STACK_NAME", "s")
    monkeypatch.setenv("PROMPT", "Hello")
    monkeypatch.setenv("MAX_NEW_TOKENS", "8")
    assert "LATENCY_BUDGET_MS is not set" in smoke.handler({}, None)["failures"][0]
    monkeypatch.setenv("LATENCY_BUDGET_MS", "fast")
    assert "LATENCY_BUDGET_MS must be an integer between 1 and 900000" in smoke.handler({}, None)["failures"][0]


def test_lambda_file_needs_only_stdlib_and_boto3():
    tree = ast.parse(SMOKE_HANDLER.read_text())
    roots = {
        (n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in (n.names if isinstance(n, ast.Import) else [n])
    }
    import sys

    # endpoint_runtime: the package shipped with it (tests/lambda/test_lambda_code.py checks the whole asset).
    assert roots - set(sys.stdlib_module_names) == {"boto3", "botocore", "endpoint_runtime"}


# ---------------------------------------------------------------------------------------------------------------
# Asynchronous endpoints (invocation.mode async): SageMaker refuses InvokeEndpoint there, so the smoke test submits
# the prompt as the endpoint's invoke function does and reads the answer from S3. moto's InvokeEndpointAsync writes
# the queued answer into a bucket of its own at once (local_emulator.moto_server.Emulator.set_async_results).


@pytest.fixture
def async_environment_plan(moto_env, tmp_path):
    environment_plan = load_config(write_config(tmp_path, invocation={"mode": "async"}, autoscaling=None), "local")
    env = environment_plan.environment
    boto3.client("s3").create_bucket(
        Bucket=artifact_bucket_name(environment_plan.project, "local", env.account, env.region)
    )
    return environment_plan


def _uploaded_requests(environment_plan) -> list[dict]:
    """The request payloads in the endpoint's input folder (the one the stack lets SageMaker read)."""
    env = environment_plan.environment
    s3 = boto3.client("s3")
    bucket = artifact_bucket_name(environment_plan.project, "local", env.account, env.region)
    prefix = f"async/{environment_plan.endpoint_name(environment_plan.endpoint('tiny-gpt2'))}/input/"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]
    return [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in keys]


def test_async_endpoint_is_submitted_and_its_answer_read_from_s3(moto_env, async_environment_plan):
    deploy_stack(async_environment_plan)
    moto_env.set_async_results([(False, GOOD)])
    moto_env.set_invoke_results([[{"generated_text": "from InvokeEndpoint"}]])  # what a wrong path would read
    result = run_smoke(async_environment_plan, async_environment_plan.plan("tiny-gpt2"))
    assert result.ok, smoke.format_checks(result.checks)
    checks = by_name(result)
    assert [c.name for c in result.checks] == ["stack", "endpoint", "status", "config", "invoke", "response", "latency"]
    assert checks["invoke"].message.startswith("submitted asynchronous request ")
    assert result.outputs == GOOD
    assert checks["latency"].message.endswith("<= 300000 ms budget")  # the asynchronous default
    # The payload went where the stack lets SageMaker read it, as the invoke function sends it.
    assert _uploaded_requests(async_environment_plan) == [
        {
            "inputs": "The capital of France is",
            "parameters": {"return_full_text": False, "max_new_tokens": 16, "do_sample": False},
        }
    ]


def test_async_failure_is_reported_with_sagemakers_message(moto_env, async_environment_plan):
    deploy_stack(async_environment_plan)
    moto_env.set_async_results([(True, "ModelError: the container answered 500")])
    result = run_smoke(async_environment_plan, async_environment_plan.plan("tiny-gpt2"))
    assert [c.name for c in result.failures] == ["response"]
    assert "failed asynchronous request" in result.failures[0].message
    assert "ModelError: the container answered 500" in result.failures[0].message
    assert by_name(result)["invoke"].ok and by_name(result)["latency"].skipped


def test_async_answer_not_written_within_the_budget_fails_and_says_where_to_look(moto_env, tmp_path):
    environment_plan = load_config(
        write_config(tmp_path, invocation={"mode": "async"}, autoscaling=None, smoke_test={"latency_budget_ms": 300}),
        "local",
    )
    env = environment_plan.environment
    boto3.client("s3").create_bucket(
        Bucket=artifact_bucket_name(environment_plan.project, "local", env.account, env.region)
    )
    deploy_stack(environment_plan)
    moto_env.set_async_results([(False, GOOD)])
    runtime = smoke.make_runtime_client()

    def never_written(parsed, **_):  # the request stays queued: nothing appears at the locations SageMaker names
        parsed["OutputLocation"] = parsed["OutputLocation"] + ".not-yet"
        parsed["FailureLocation"] = parsed["FailureLocation"] + ".not-yet"

    runtime.meta.events.register("after-call.sagemaker-runtime.InvokeEndpointAsync", never_written)
    started = time.monotonic()
    result = run_smoke(environment_plan, environment_plan.plan("tiny-gpt2"), runtime_client=runtime)
    assert time.monotonic() - started < 10  # polled for the budget only
    assert [c.name for c in result.failures] == ["response"]
    message = result.failures[0].message
    assert "within the 300 ms budget (smoke_test.latency_budget_ms): it is still queued or running" in message
    assert "HasBacklogWithoutCapacity" in message and "python -m model_build result --output-location s3://" in message
    assert result.latency_ms >= 300


def test_async_submit_refused_fails_invoke(moto_env, async_environment_plan):
    """The artifact bucket is gone: the payload cannot be uploaded, so nothing is submitted."""
    deploy_stack(async_environment_plan)
    env = async_environment_plan.environment
    boto3.client("s3").delete_bucket(
        Bucket=artifact_bucket_name(async_environment_plan.project, "local", env.account, env.region)
    )
    result = run_smoke(async_environment_plan, async_environment_plan.plan("tiny-gpt2"))
    assert [c.name for c in result.failures] == ["invoke"]
    assert "cannot upload the request payload (NoSuchBucket)" in result.failures[0].message
    assert by_name(result)["latency"].skipped


def test_lambda_handler_in_async_mode(moto_env, async_environment_plan, monkeypatch):
    deploy_stack(async_environment_plan)
    moto_env.set_async_results([(False, GOOD)])
    env = async_environment_plan.environment
    name = async_environment_plan.endpoint_name(async_environment_plan.endpoint("tiny-gpt2"))
    root = f"s3://{artifact_bucket_name(async_environment_plan.project, 'local', env.account, env.region)}/async/{name}"
    for key, value in {
        "STACK_NAME": async_environment_plan.stack_name("tiny-gpt2"),
        "ENDPOINT_NAME": "tiny-gpt2",
        "EMULATOR": "true",
        "INVOCATION_MODE": "async",
        "INPUT_LOCATION": f"{root}/input",
        "OUTPUT_LOCATION": f"{root}/output",
        "FAILURE_LOCATION": f"{root}/failures",
        "LATENCY_BUDGET_MS": "600000",
        "PROMPT": "Hello",
        "MAX_NEW_TOKENS": "8",
    }.items():
        monkeypatch.setenv(key, value)
    out = smoke.handler({}, None)
    assert out["ok"], out["failures"]
    assert [c["message"] for c in out["checks"] if c["name"] == "latency"][0].endswith("<= 600000 ms budget")
    assert len(_uploaded_requests(async_environment_plan)) == 1


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"INVOCATION_MODE": "batch"}, "INVOCATION_MODE must be real-time or async, got 'batch'"),
        ({"INVOCATION_MODE": "async"}, "INPUT_LOCATION must be an s3://bucket/prefix location, got ''"),
        (
            {
                "INVOCATION_MODE": "async",
                "INPUT_LOCATION": "s3://b/i",
                "OUTPUT_LOCATION": "s3://b/o",
                "FAILURE_LOCATION": "s3://b/f",
                "LATENCY_BUDGET_MS": "900001",
            },
            "LATENCY_BUDGET_MS must be between 1 and 900000, got '900001'",
        ),
        ({"LATENCY_BUDGET_MS": "0"}, "LATENCY_BUDGET_MS must be between 1 and 900000, got '0'"),
        ({"LATENCY_BUDGET_MS": "1000", "WAKE_BUDGET_MS": "later"}, "WAKE_BUDGET_MS must be"),
    ],
)
def test_lambda_handler_async_configuration_errors(monkeypatch, env, expected):
    monkeypatch.setenv("STACK_NAME", "s")
    monkeypatch.setenv("PROMPT", "Hello")
    monkeypatch.setenv("MAX_NEW_TOKENS", "8")
    for key in (
        "INVOCATION_MODE",
        "INPUT_LOCATION",
        "OUTPUT_LOCATION",
        "FAILURE_LOCATION",
        "LATENCY_BUDGET_MS",
        "WAKE_BUDGET_MS",
    ):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    out = smoke.handler({}, None)
    assert not out["ok"] and expected in out["failures"][0]


# An asynchronous endpoint that scales to zero keeps 0 instances across an update (RetainAllVariantProperties keeps the
# scaled DesiredInstanceCount): right after a deploy the prompt waits for the scale-up from zero. The smoke test
# waits the plan's wake budget then (not the latency budget), and where its caller cannot wait that long (the Lambda)
# it stops before its own end with the answer unchecked, never a failure. moto scales the variant to zero the way
# Application Auto Scaling does (UpdateEndpointWeightsAndCapacities, DesiredInstanceCount 0).


def _scaled_to_zero(tmp_path, budget_ms: int):
    environment_plan = load_config(
        write_config(
            tmp_path,
            invocation={"mode": "async"},
            smoke_test={"latency_budget_ms": budget_ms},
            autoscaling={"min_capacity": 0, "max_capacity": 1, "target_value": 1},
        ),
        "local",
    )
    env = environment_plan.environment
    boto3.client("s3").create_bucket(
        Bucket=artifact_bucket_name(environment_plan.project, "local", env.account, env.region)
    )
    endpoint, _ = deploy_stack(environment_plan)
    sm = boto3.client("sagemaker")
    sm.update_endpoint_weights_and_capacities(
        EndpointName=endpoint, DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 0}]
    )
    assert smoke.running_instances(sm.describe_endpoint(EndpointName=endpoint)) == 0
    return environment_plan


@pytest.fixture
def timers():
    """Timers a test starts, cancelled when it ends (an answer due after the test must not arrive into the next)."""
    started: list = []
    yield started
    for timer in started:
        timer.cancel()


def _answer_later(moto_env, after_s: float, timers: list):
    """A runtime client whose accepted request is answered `after_s` later (the scale-up from zero): the answer
    moto wrote at once is moved to the location SageMaker named only then."""
    import threading

    moto_env.set_async_results([(False, GOOD)])
    runtime = smoke.make_runtime_client()

    def later(parsed, **_):
        source = parsed["OutputLocation"]
        parsed["OutputLocation"] = target = source + ".after-scale-up"
        parsed["FailureLocation"] = parsed["FailureLocation"] + ".after-scale-up"

        def move():
            bucket, key = source.removeprefix("s3://").split("/", 1)
            boto3.client("s3").copy_object(
                Bucket=bucket, Key=target.split("/", 3)[3], CopySource={"Bucket": bucket, "Key": key}
            )

        timer = threading.Timer(after_s, move)
        timers.append(timer)
        timer.start()

    runtime.meta.events.register("after-call.sagemaker-runtime.InvokeEndpointAsync", later)
    return runtime


def test_an_async_endpoint_at_zero_instances_is_given_the_wake_budget(moto_env, tmp_path, timers):
    """The answer comes after the 300 ms latency budget (the scale-up): within the wake budget it passes."""
    environment_plan = _scaled_to_zero(tmp_path, budget_ms=300)
    plan = environment_plan.plan("tiny-gpt2")
    wake = plan.smoke.wake_budget_ms
    assert wake == 300 + 1000 * (2 * 60 + plan.download_timeout_s + plan.startup_timeout_s)
    result = run_smoke(environment_plan, plan, runtime_client=_answer_later(moto_env, after_s=0.5, timers=timers))
    assert result.ok, smoke.format_checks(result.checks)
    checks = by_name(result)
    assert "runs 0 instances" in checks["capacity"].message and f"up to {wake} ms" in checks["capacity"].message
    assert checks["latency"].message.endswith(f"<= {wake} ms budget (scale-up from zero included)")
    assert result.latency_ms > 300 and result.outputs == GOOD


def test_the_smoke_lambda_stops_waiting_for_a_scale_up_before_its_own_end(moto_env, tmp_path, monkeypatch, timers):
    """The Lambda may run 900 s at most, the scale-up may take longer: with 15.5 s of its own time left (0.5 s to
    wait after its 15 s margin) it returns unjudged, without failing and without hanging."""
    environment_plan = _scaled_to_zero(tmp_path, budget_ms=300)
    env, plan = environment_plan.environment, environment_plan.plan("tiny-gpt2")
    root = f"s3://{artifact_bucket_name(environment_plan.project, 'local', env.account, env.region)}/async/{plan.endpoint_name}"
    for key, value in {
        "STACK_NAME": plan.stack_name,
        "ENDPOINT_NAME": "tiny-gpt2",
        "EMULATOR": "true",
        "INVOCATION_MODE": "async",
        "INPUT_LOCATION": f"{root}/input",
        "OUTPUT_LOCATION": f"{root}/output",
        "FAILURE_LOCATION": f"{root}/failures",
        "LATENCY_BUDGET_MS": "300",
        "WAKE_BUDGET_MS": str(plan.smoke.wake_budget_ms),
        "PROMPT": "Hello",
        "MAX_NEW_TOKENS": "8",
    }.items():
        monkeypatch.setenv(key, value)

    class Context:
        aws_request_id = "r"

        @staticmethod
        def get_remaining_time_in_millis() -> int:
            return 15_500

    started = time.monotonic()
    out = smoke.handler({}, Context(), runtime_client=_answer_later(moto_env, after_s=30, timers=timers))
    assert time.monotonic() - started < 8
    assert out["ok"], out["failures"]
    checks = {c["name"]: c for c in out["checks"]}
    assert checks["response"]["skipped"] and checks["latency"]["skipped"]
    assert checks["response"]["message"].startswith(
        f"not awaited: endpoint tiny-gpt2 is scaling up from zero, which may take up to {plan.smoke.wake_budget_ms} ms"
    )
    assert "python -m model_build smoke" in checks["response"]["message"]
