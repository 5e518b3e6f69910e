"""Template assertions on asynchronous inference (stacks/async_inference.py): config/examples/production.yaml's
summarize-async endpoint in prod. What AWS does with these resources (queueing, scaling from zero, notifications) only
a real account shows; here: the properties the documented pattern needs, and least privilege."""

from __future__ import annotations

import pytest

CONFIG = "config/examples/production.yaml"
STACK = "llm-endpoints-prod-summarize-async"
ENDPOINT = "prod-summarize-async"
ACCOUNT, REGION = "111122223333", "us-east-1"
BUCKET = f"llm-endpoints-prod-artifacts-{ACCOUNT}-{REGION}"


@pytest.fixture(scope="module")
def production(synth):
    return synth(CONFIG, "prod")


@pytest.fixture(scope="module")
def resources(production):
    return production.templates[STACK]["Resources"]


def flat(value) -> str:
    """A template string with the stack's pseudo parameters resolved (Fn::Join of literals and Refs)."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(flat(p) for p in parts)
    if "Ref" in value:  # a pseudo parameter, else the logical id it names
        return {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": "aws"}.get(
            value["Ref"], value["Ref"]
        )
    return repr(value)


def of_type(resources, type_name):
    return {lid: r["Properties"] for lid, r in resources.items() if r["Type"] == type_name}


def async_topics(resources) -> set[str]:
    """The notification topics (other blocks may add topics of their own, e.g. alarms)."""
    return {lid for lid in of_type(resources, "AWS::SNS::Topic") if lid.startswith("LlmEndpointAsyncInference")}


def statements(resources, role_lid):
    [policy] = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_lid} in r["Properties"]["Roles"]
    ]
    out = []
    for s in policy:
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        res = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        out.append((tuple(sorted(actions)), tuple(sorted(flat(r) for r in res)), s.get("Condition")))
    return out


def test_endpoint_config_has_the_async_inference_config(resources):
    [config] = of_type(resources, "AWS::SageMaker::EndpointConfig").values()
    async_config = config["AsyncInferenceConfig"]
    assert async_config["ClientConfig"] == {"MaxConcurrentInvocationsPerInstance": 4}
    output = async_config["OutputConfig"]
    assert flat(output["S3OutputPath"]) == f"s3://{BUCKET}/async/{ENDPOINT}/output"
    assert flat(output["S3FailurePath"]) == f"s3://{BUCKET}/async/{ENDPOINT}/failures"
    assert async_topics(resources) == {
        output["NotificationConfig"]["SuccessTopic"]["Ref"],
        output["NotificationConfig"]["ErrorTopic"]["Ref"],
    }
    assert "IncludeInferenceResponseIn" not in output["NotificationConfig"]  # notifications carry no answers
    assert "KmsKeyId" not in output  # the bucket's own encryption (SSE-S3) applies


def test_real_time_endpoints_have_no_async_config(production):
    for stack in ("llm-endpoints-prod-chat-vllm", "llm-endpoints-prod-assist-ic"):
        for r in production.resources(stack, "AWS::SageMaker::EndpointConfig"):
            assert "AsyncInferenceConfig" not in r["Properties"]


def test_topics_accept_tls_publishes_only(resources):
    policies = of_type(resources, "AWS::SNS::TopicPolicy").values()
    protected = {
        t["Ref"]
        for p in policies
        for t in p["Topics"]
        if any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in p["PolicyDocument"]["Statement"]
        )
    }
    assert async_topics(resources) and async_topics(resources) <= protected


def test_scaling_tracks_the_backlog_and_scales_from_zero_as_documented(resources):
    [target] = of_type(resources, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 2)
    assert target["ResourceId"] == f"endpoint/{ENDPOINT}/variant/AllTraffic"
    policies = {p["PolicyType"]: p for p in of_type(resources, "AWS::ApplicationAutoScaling::ScalingPolicy").values()}
    assert set(policies) == {"TargetTrackingScaling", "StepScaling"}  # no concurrency policy on an async endpoint
    tracking = policies["TargetTrackingScaling"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking == {
        "TargetValue": 5,
        "CustomizedMetricSpecification": {
            "MetricName": "ApproximateBacklogSizePerInstance",
            "Namespace": "AWS/SageMaker",
            "Dimensions": [{"Name": "EndpointName", "Value": ENDPOINT}],
            "Statistic": "Average",
        },
        "ScaleInCooldown": 600,
        "ScaleOutCooldown": 60,
    }
    assert policies["StepScaling"]["StepScalingPolicyConfiguration"] == {
        "AdjustmentType": "ChangeInCapacity",
        "MetricAggregationType": "Average",
        "Cooldown": 300,
        "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
    }
    [(step_lid, _)] = [
        (lid, r)
        for lid, r in resources.items()
        if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy" and r["Properties"]["PolicyType"] == "StepScaling"
    ]
    [alarm] = [
        a
        for a in of_type(resources, "AWS::CloudWatch::Alarm").values()
        if a.get("MetricName") == "HasBacklogWithoutCapacity"
    ]
    assert {k: alarm[k] for k in alarm if k not in ("AlarmDescription", "Tags")} == {
        "MetricName": "HasBacklogWithoutCapacity",
        "Namespace": "AWS/SageMaker",
        "Dimensions": [{"Name": "EndpointName", "Value": ENDPOINT}],
        "Statistic": "Average",
        "Period": 60,
        "EvaluationPeriods": 2,
        "DatapointsToAlarm": 2,
        "Threshold": 1,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "TreatMissingData": "missing",
        "AlarmActions": [{"Fn::GetAtt": [step_lid, "Arn"]}],
    }


def test_execution_role_writes_only_the_result_folders_and_publishes_only_to_its_topics(resources):
    [model] = of_type(resources, "AWS::SageMaker::Model").values()
    role = model["ExecutionRoleArn"]["Fn::GetAtt"][0]
    found = statements(resources, role)
    objects = f"arn:aws:s3:::{BUCKET}/async/{ENDPOINT}"
    assert (
        ("s3:AbortMultipartUpload", "s3:PutObject"),
        (f"{objects}/failures/*", f"{objects}/output/*"),
        None,
    ) in found
    assert (("s3:GetObject",), (f"{objects}/input/*", f"arn:aws:s3:::{BUCKET}/models/summarize-async/*"), None) in found
    [publish] = [s for s in found if s[0] == ("sns:Publish",) and set(s[1]) & async_topics(resources)]
    assert set(publish[1]) - async_topics(resources) <= {lid for lid in of_type(resources, "AWS::SNS::Topic")}
    assert async_topics(resources) <= set(publish[1])
    writes = [s for s in found if any(a in ("s3:PutObject", "s3:*") for a in s[0])]
    assert len(writes) == 1, writes  # nothing else written: not the model artifacts, not the input folder


def test_invoke_function_submits_and_reads_with_least_privilege(resources):
    functions = of_type(resources, "AWS::Lambda::Function")
    [fn] = [f for f in functions.values() if f["Handler"] == "invoke/handler.async_handler"]
    env = {k: flat(v) for k, v in fn["Environment"]["Variables"].items()}
    assert {
        k: env.get(k)
        for k in (
            "INVOCATION_MODE",
            "INPUT_LOCATION",
            "OUTPUT_LOCATION",
            "FAILURE_LOCATION",
            "INVOCATION_TIMEOUT_S",
            "REQUEST_TTL_S",
        )
    } == {
        "INVOCATION_MODE": "async",  # the smoke test reads it; the handler is async_invoke's
        "INPUT_LOCATION": f"s3://{BUCKET}/async/{ENDPOINT}/input",
        "OUTPUT_LOCATION": f"s3://{BUCKET}/async/{ENDPOINT}/output",
        "FAILURE_LOCATION": f"s3://{BUCKET}/async/{ENDPOINT}/failures",
        "INVOCATION_TIMEOUT_S": "1800",
        "REQUEST_TTL_S": None,
    }
    assert env["ENDPOINT_NAME"] == ENDPOINT
    found = statements(resources, fn["Role"]["Fn::GetAtt"][0])
    objects, bucket = f"arn:aws:s3:::{BUCKET}/async/{ENDPOINT}", f"arn:aws:s3:::{BUCKET}"
    assert sorted((s for s in found if not s[0][0].startswith("logs:")), key=repr) == sorted(
        [
            (("s3:PutObject",), (f"{objects}/input/*",), None),
            (("sagemaker:InvokeEndpointAsync",), (f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{ENDPOINT}",), None),
            (("s3:GetObject",), (f"{objects}/failures/*", f"{objects}/output/*"), None),
            (("s3:ListBucket",), (bucket,), {"StringLike": {"s3:prefix": [f"async/{ENDPOINT}/output/*"]}}),
            (("s3:ListBucket",), (bucket,), {"StringLike": {"s3:prefix": [f"async/{ENDPOINT}/failures/*"]}}),
            # The bucket is SSE-KMS (prod's bucket_key: create): the upload and the reads use its key, through S3 only,
            # named by its alias (the key lives in the artifacts stack). tests/stacks/test_iam_coverage.py checks
            # every role's KMS use against the templates' encryption.
            (
                ("kms:Decrypt", "kms:GenerateDataKey"),
                (f"arn:aws:kms:{REGION}:{ACCOUNT}:key/*",),
                {
                    "StringEquals": {"kms:ViaService": f"s3.{REGION}.amazonaws.com"},
                    "ForAnyValue:StringEquals": {"kms:ResourceAliases": ["alias/llm-endpoints-prod-artifacts"]},
                },
            ),
        ],
        key=repr,
    )


def test_smoke_function_submits_and_waits_for_the_answer_within_its_budget(resources):
    """An asynchronous endpoint refuses InvokeEndpoint: the smoke function gets the invoke function's folders and
    grants (submit, read results), not InvokeEndpoint, and a timeout that covers its polling budget."""
    functions = of_type(resources, "AWS::Lambda::Function")
    [invoke] = [f for f in functions.values() if f["Handler"] == "invoke/handler.async_handler"]
    [fn] = [f for f in functions.values() if f["Handler"] == "smoke/handler.handler"]
    env = {k: flat(v) for k, v in fn["Environment"]["Variables"].items()}
    invoke_env = {k: flat(v) for k, v in invoke["Environment"]["Variables"].items()}
    for key in ("INVOCATION_MODE", "INPUT_LOCATION", "OUTPUT_LOCATION", "FAILURE_LOCATION"):
        assert env[key] == invoke_env[key], key
    assert env["LATENCY_BUDGET_MS"] == "300000"  # the asynchronous default
    # summarize-async scales to zero and keeps 0 instances across an update: after a deploy the prompt may wait for
    # the scale-up: the alarm (2 x 60 s), its download and startup timeouts (600 + 600 s), then the budget.
    assert env["WAKE_BUDGET_MS"] == str(300_000 + 1000 * (120 + 600 + 600))
    assert fn["Timeout"] == 900  # that wait + 60 s, within Lambda's 900 s (the function stops waiting before it ends)
    found = statements(resources, fn["Role"]["Fn::GetAtt"][0])
    granted = {action for actions, _, _ in found for action in actions if not action.startswith("logs:")}
    assert granted == {
        "cloudformation:DescribeStacks",
        "cloudformation:ListStackResources",
        "sagemaker:DescribeEndpoint",
        "sagemaker:InvokeEndpointAsync",
        "s3:PutObject",
        "s3:ListBucket",
        "s3:GetObject",
        "kms:Decrypt",
        "kms:GenerateDataKey",  # the SSE-KMS bucket's key, as the invoke function has it
    }
    invoke_found = statements(resources, invoke["Role"]["Fn::GetAtt"][0])

    def client_side(found) -> list:  # (action, resources, condition) of the async client's actions
        return sorted(
            (
                (a, r, c)
                for actions, r, c in found
                for a in actions
                if a.startswith(("s3:", "kms:")) or a == "sagemaker:InvokeEndpointAsync"
            ),
            key=repr,
        )

    assert client_side(found) == client_side(invoke_found)  # the same folders as the invoke function, nothing more


def test_smoke_timeout_covers_the_budget_within_lambdas_limit():
    from stacks.functions import smoke_timeout_s

    assert smoke_timeout_s(30_000) == 90  # real-time: above the invoke client's 5 s + 55 s
    assert smoke_timeout_s(60_000) == 120
    assert smoke_timeout_s(300_001) == 361  # whole seconds, rounded up
    assert smoke_timeout_s(840_000) == 900  # Lambda's maximum


def test_artifact_bucket_expires_async_payloads_and_the_configured_results(production):
    """Request payloads expire after a day (a request is dequeued within its 6 h TTL at most); answers and failures
    after summarize-async's result_retention_days (30). No rule touches another endpoint's folders or the models."""
    [bucket] = [
        r["Properties"]
        for r in production.templates["llm-endpoints-prod-artifacts"]["Resources"].values()
        if r["Type"] == "AWS::S3::Bucket" and "BucketName" in r["Properties"]
    ]
    rules = {r.get("Id"): r for r in bucket["LifecycleConfiguration"]["Rules"]}
    assert {k: (r["Prefix"], r["ExpirationInDays"]) for k, r in rules.items() if k} == {
        "summarize-async-async-input": (f"async/{ENDPOINT}/input/", 1),
        "summarize-async-async-output": (f"async/{ENDPOINT}/output/", 30),
        "summarize-async-async-failure": (f"async/{ENDPOINT}/failures/", 30),
    }
    [bucket_wide] = [r for k, r in rules.items() if not k]
    assert "Prefix" not in bucket_wide and bucket_wide["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}


def test_results_are_kept_unless_a_retention_is_set(tmp_path):
    """Without result_retention_days only the payloads expire; a real-time endpoint adds no rule at all."""
    import yaml
    from helpers import ROOT

    from deployment import load_config
    from stacks.artifact_store import async_lifecycle_rules

    raw = yaml.safe_load((ROOT / CONFIG).read_text())
    for ep in raw["endpoints"]:
        ep.get("invocation", {}).pop("result_retention_days", None)
    path = tmp_path / "production.yaml"
    path.write_text(yaml.safe_dump(raw))
    rules = async_lifecycle_rules(load_config(path, "prod"))
    assert [(r.id, r.prefix, r.expiration.to_days()) for r in rules] == [
        ("summarize-async-async-input", f"async/{ENDPOINT}/input/", 1)
    ]


def test_async_inference_refuses_a_real_time_invocation():
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam

    from endpoint_config.invocation import Invocation
    from stacks.async_inference import AsyncInference

    stack = cdk.Stack(cdk.App(), "S")
    role = iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    with pytest.raises(ValueError, match="invocation.mode must be 'async', got 'real-time'"):
        AsyncInference(
            stack,
            "A",
            endpoint_name="e",
            invocation=Invocation(),
            artifact_bucket="b",
            folders={},
            execution_role=role,
        )


def test_the_async_function_ships_exactly_its_imports(production, resources):
    """The invoke function's asset: its handler, the real-time and the async request code, the contracts."""
    from pathlib import Path

    [fn] = [
        f
        for f in of_type(resources, "AWS::Lambda::Function").values()
        if f["Handler"] == "invoke/handler.async_handler"
    ]
    key = fn["Code"]["S3Key"]
    asset_hash = (key if isinstance(key, str) else key["Fn::Sub"]).rsplit("/", 1)[-1].removesuffix(".zip")
    [directory] = [p for p in Path(production.outdir).rglob(f"asset.{asset_hash}") if p.is_dir()]
    assert sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()) == [
        "chat_contract.py",
        "endpoint_runtime/__init__.py",
        "endpoint_runtime/async_invoke.py",
        "endpoint_runtime/bodies.py",
        "endpoint_runtime/clients.py",
        "endpoint_runtime/invoke.py",
        "invoke/handler.py",
        "request_contract.py",
    ]
