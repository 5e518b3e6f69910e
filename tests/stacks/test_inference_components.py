"""hosting.mode inference-components in the template: config/examples/production.yaml's assist-ic (scale to zero)
against chat-vllm, a model on the variant, from the same session-cached synth (cdk-nag included); a guarded
component in a VPC (tests/stacks/conftest.py GUARDED_COMPONENT, its stack alone); and the kept copy count's
custom-resource function (lambda/copy_count) against a local stand-in of SageMaker's API and of CloudFormation's
response URL."""

from __future__ import annotations

import gzip
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import botocore.config
import pytest
from helpers import lambda_entry, serve_in_thread

CONFIG, ENV = "config/examples/production.yaml", "prod"
IC_STACK, VARIANT_STACK = "llm-endpoints-prod-assist-ic", "llm-endpoints-prod-chat-vllm"
COMPONENT = "prod-assist-ic-ic"


@pytest.fixture(scope="module")
def production(synth):
    return synth(CONFIG, ENV)


def one(resources: dict, type_name: str) -> tuple[str, dict]:
    [found] = [(lid, r) for lid, r in resources.items() if r["Type"] == type_name]
    return found


def of_type(resources: dict, type_name: str) -> dict[str, dict]:
    return {lid: r for lid, r in resources.items() if r["Type"] == type_name}


@pytest.fixture(scope="module")
def ic(production) -> dict:
    return production.templates[IC_STACK]["Resources"]


def test_endpoint_config_has_no_model_but_a_role_and_managed_instance_scaling(ic):
    _, config = one(ic, "AWS::SageMaker::EndpointConfig")
    props = config["Properties"]
    role_lid, _ = next((lid, r) for lid, r in ic.items() if r["Type"] == "AWS::IAM::Role" and "ExecutionRole" in lid)
    assert props["ExecutionRoleArn"] == {"Fn::GetAtt": [role_lid, "Arn"]}
    [variant] = props["ProductionVariants"]
    assert "ModelName" not in variant and "InitialVariantWeight" not in variant
    # The startup timeouts belong to the component; the variant carries none.
    assert (
        "ModelDataDownloadTimeoutInSeconds" not in variant
        and "ContainerStartupHealthCheckTimeoutInSeconds" not in variant
    )
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2}
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert variant["InitialInstanceCount"] == 1 and variant["InstanceType"] == "ml.g5.12xlarge"
    assert variant["VariantName"] == "AllTraffic"


def test_the_model_runs_as_one_inference_component(ic):
    component_lid, component = one(ic, "AWS::SageMaker::InferenceComponent")
    model_lid, _ = one(ic, "AWS::SageMaker::Model")
    endpoint_lid, endpoint = one(ic, "AWS::SageMaker::Endpoint")
    props = component["Properties"]
    assert props["InferenceComponentName"] == COMPONENT and props["VariantName"] == "AllTraffic"
    assert props["EndpointName"] == {"Fn::GetAtt": [endpoint_lid, "EndpointName"]}  # created after the endpoint
    # Copy scaling: the count to deploy with is the one autoscaling set, read at deploy time (KeptCopyCount).
    kept_lid, _ = one(ic, "Custom::KeptCopyCount")
    assert props["RuntimeConfig"] == {"CopyCount": {"Fn::GetAtt": [kept_lid, "CopyCount"]}}
    # deployment: null (a component that may run one copy cannot roll): neither the component nor the endpoint is
    # guarded, and no rollback alarm is left over.
    assert "DeploymentConfig" not in props and "DeploymentConfig" not in endpoint["Properties"]
    assert not [
        r
        for r in of_type(ic, "AWS::CloudWatch::Alarm").values()
        if "-rollback-" in str(r["Properties"].get("AlarmName"))
    ]
    assert props["Specification"] == {
        "ModelName": {"Fn::GetAtt": [model_lid, "ModelName"]},
        "ComputeResourceRequirements": {
            "NumberOfAcceleratorDevicesRequired": 1,
            "NumberOfCpuCoresRequired": 4,
            "MinMemoryRequiredInMb": 32768,
        },
        "StartupParameters": {
            "ModelDataDownloadTimeoutInSeconds": 600,
            "ContainerStartupHealthCheckTimeoutInSeconds": 900,
        },
        # A copy added to an instance that holds one already reuses the model and image there.
        "DataCacheConfig": {"EnableCaching": True},
    }
    # Managed instance scaling sets the instance count: an update keeps it.
    excluded = [p["VariantPropertyType"] for p in endpoint["Properties"]["ExcludeRetainedVariantProperties"]]
    assert "DesiredInstanceCount" not in excluded
    # Its log group is owned (retention, removed on destroy) and exists before the component starts.
    logs = {
        lid
        for lid, r in of_type(ic, "AWS::Logs::LogGroup").items()
        if r["Properties"].get("LogGroupName") == f"/aws/sagemaker/InferenceComponents/{COMPONENT}"
    }
    assert len(logs) == 1 and logs <= set(component["DependsOn"])
    assert ic[next(iter(logs))]["DeletionPolicy"] == "Delete"


def test_copies_scale_on_concurrency_and_come_back_from_zero(ic):
    target_lid, target = one(ic, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"] == {
        "ServiceNamespace": "sagemaker",
        "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
        "ResourceId": f"inference-component/{COMPONENT}",
        "MinCapacity": 0,
        "MaxCapacity": 4,
        **({"Tags": target["Properties"]["Tags"]} if "Tags" in target["Properties"] else {}),
    }
    assert "RoleARN" not in target["Properties"]  # Application Auto Scaling's service-linked role
    component_lid, _ = one(ic, "AWS::SageMaker::InferenceComponent")
    assert component_lid in target["DependsOn"]
    policies = {
        r["Properties"]["PolicyType"]: (lid, r["Properties"])
        for lid, r in of_type(ic, "AWS::ApplicationAutoScaling::ScalingPolicy").items()
    }
    assert set(policies) == {"TargetTrackingScaling", "StepScaling"}
    tracking = policies["TargetTrackingScaling"][1]
    assert tracking["ScalingTargetId"] == {"Ref": target_lid}
    assert tracking["TargetTrackingScalingPolicyConfiguration"] == {
        "PredefinedMetricSpecification": {
            "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
        },
        "TargetValue": 4,
        "ScaleInCooldown": 300,
        "ScaleOutCooldown": 60,
    }
    wake_lid, wake = policies["StepScaling"]
    assert wake["ScalingTargetId"] == {"Ref": target_lid}
    assert wake["StepScalingPolicyConfiguration"] == {
        "AdjustmentType": "ChangeInCapacity",
        "MetricAggregationType": "Maximum",
        "Cooldown": 60,
        "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
    }
    [alarm] = [
        r["Properties"]
        for r in of_type(ic, "AWS::CloudWatch::Alarm").values()
        if r["Properties"].get("MetricName") == "NoCapacityInvocationFailures"
    ]
    assert alarm["AlarmActions"] == [{"Fn::GetAtt": [wake_lid, "Arn"]}]
    assert alarm["Namespace"] == "AWS/SageMaker"
    assert alarm["Dimensions"] == [{"Name": "InferenceComponentName", "Value": COMPONENT}]
    assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (
        "Sum",
        60,
        1,
        1,
    )
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)


def _functions(resources: dict) -> dict[str, dict]:
    return {r["Properties"]["Handler"]: r for r in of_type(resources, "AWS::Lambda::Function").values()}


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _policy_statements(resources: dict, role_lid: str) -> list[dict]:
    return [
        s
        for r in of_type(resources, "AWS::IAM::Policy").values()
        if {"Ref": role_lid} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_invoke_and_smoke_functions_name_the_component_and_may_invoke_it(production, ic):
    functions = _functions(ic)
    for handler in ("invoke/handler.handler", "smoke/handler.handler"):
        fn = functions[handler]
        assert fn["Properties"]["Environment"]["Variables"]["INFERENCE_COMPONENT_NAME"] == COMPONENT
        role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
        granted = {
            arn
            for st in _policy_statements(ic, role)
            if "sagemaker:InvokeEndpoint" in _listed(st["Action"])
            for arn in _listed(st["Resource"])
        }
        # The endpoint (required by InvokeEndpoint) and the component the call names: nothing else.
        assert granted == {
            "arn:aws:sagemaker:us-east-1:111122223333:endpoint/prod-assist-ic",
            f"arn:aws:sagemaker:us-east-1:111122223333:inference-component/{COMPONENT}",
        }
    assert production.templates[IC_STACK]["Outputs"]["InferenceComponentName"]["Value"] == COMPONENT


def test_a_model_on_the_variant_has_none_of_it(production):
    resources = production.templates[VARIANT_STACK]["Resources"]
    assert not of_type(resources, "AWS::SageMaker::InferenceComponent")
    [variant] = one(resources, "AWS::SageMaker::EndpointConfig")[1]["Properties"]["ProductionVariants"]
    assert "ModelName" in variant and "ManagedInstanceScaling" not in variant
    assert "ExecutionRoleArn" not in one(resources, "AWS::SageMaker::EndpointConfig")[1]["Properties"]
    for fn in _functions(resources).values():
        assert "INFERENCE_COMPONENT_NAME" not in fn["Properties"].get("Environment", {}).get("Variables", {})
    assert "InferenceComponentName" not in production.templates[VARIANT_STACK]["Outputs"]


# ------------------------------------------------------------------------------------ the kept copy count (item 7)


def test_each_deploy_keeps_the_copy_count_autoscaling_set(ic):
    """CloudFormation re-sends RuntimeConfig.CopyCount with every update of the component and cannot read the count
    autoscaling set (CopyCount writeOnly, DesiredCopyCount readOnly in cfn-lint's schema): the count comes from a
    custom resource that reads it at deploy time, within copy_scaling's range and never 0."""
    kept_lid, kept = one(ic, "Custom::KeptCopyCount")
    model_lid, _ = one(ic, "AWS::SageMaker::Model")
    props = kept["Properties"]
    function_lid = props["ServiceToken"]["Fn::GetAtt"][0]
    assert {k: v for k, v in props.items() if k not in ("ServiceToken", "Revision")} == {
        "ComponentName": COMPONENT,
        "Floor": 1,
        "Ceiling": 4,
        "Initial": 1,
        # A new model is an update of the component: the count is read again first.
        "ModelName": {"Fn::GetAtt": [model_lid, "ModelName"]},
        # CloudFormation waits 5 minutes for the answer, not its default hour (tests/stacks/test_custom_resource_timeouts.py)
        "ServiceTimeout": "300",  # as CDK's CustomResource writes it
    }
    function = ic[function_lid]["Properties"]
    assert function["Handler"] == "copy_count/handler.handler"
    assert callable(lambda_entry(function["Handler"]))
    # Its role may describe this component and write its own logs, nothing else; the policy exists before the call.
    role = function["Role"]["Fn::GetAtt"][0]
    actions = {a: st["Resource"] for st in _policy_statements(ic, role) for a in _listed(st["Action"])}
    assert actions.pop("sagemaker:DescribeInferenceComponent") == (
        f"arn:aws:sagemaker:us-east-1:111122223333:inference-component/{COMPONENT}"
    )
    assert set(actions) == {"logs:CreateLogStream", "logs:PutLogEvents"}
    policies = [lid for lid, r in of_type(ic, "AWS::IAM::Policy").items() if {"Ref": role} in r["Properties"]["Roles"]]
    assert set(policies) <= set(kept["DependsOn"])


def test_the_count_is_read_again_whenever_the_component_changes(guarded_component):
    """The custom resource updates (and reads the count) whenever anything of the component but its count changes:
    the model by name, the rest by a revision of its settings, so no update of the component sends a stale count."""
    from stacks.inference_components import KeptCopyCount

    _, kept = one(guarded_component["Resources"], "Custom::KeptCopyCount")
    props = kept["Properties"]
    assert (props["Floor"], props["Ceiling"], props["Initial"]) == (2, 8, 2)
    assert len(props["Revision"]) == 16
    from aws_cdk import App, Stack

    with pytest.raises(ValueError, match="need 1 <= floor <= initial <= ceiling, got 2, 1, 8"):
        KeptCopyCount(
            Stack(App(), "S"),
            "K",
            component_name="c",
            component_arn="arn",
            floor=2,
            ceiling=8,
            initial=1,
            revision="r",
            model_name="m",
            log_retention_days=30,
        )


class _SageMakerAndCloudFormation(BaseHTTPRequestHandler):
    """SageMaker's JSON API (one DescribeInferenceComponent answer, set per test) and CloudFormation's pre-signed
    response URL (PUT), on one local port."""

    answer: tuple[int, dict] = (200, {})
    calls: list[dict] = []
    responses: list[dict] = []

    def _body(self) -> bytes:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        return gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body

    def do_POST(self) -> None:
        type(self).calls.append({"target": self.headers["X-Amz-Target"], **json.loads(self._body())})
        status, payload = type(self).answer
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self) -> None:
        type(self).responses.append(json.loads(self._body()))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def local_services():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SageMakerAndCloudFormation)
    serve_in_thread(server)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


NOT_FOUND = (400, {"__type": "ValidationException", "message": f'Could not find inference component "{COMPONENT}".'})
DENIED = (
    400,
    {"__type": "AccessDeniedException", "message": "not authorized to perform: sagemaker:DescribeInferenceComponent"},
)


def _described(desired: int) -> tuple[int, dict]:
    return 200, {
        "InferenceComponentName": COMPONENT,
        "RuntimeConfig": {"DesiredCopyCount": desired, "CurrentCopyCount": desired},
    }


@pytest.mark.parametrize(
    ("request_type", "answer", "bounds", "status", "count", "reason"),
    [
        ("Update", _described(3), ("1", "4", "1"), "SUCCESS", 3, "runs 3 copies (desired): keeping 3 (1-4)"),
        (
            "Update",
            _described(0),
            ("1", "4", "1"),
            "SUCCESS",
            1,
            "runs 0 copies (desired): keeping 1 (1-4)",
        ),  # scaled to zero
        ("Update", _described(9), ("1", "4", "1"), "SUCCESS", 4, "keeping 4 (1-4)"),  # copy_scaling lowered
        ("Create", NOT_FOUND, ("1", "4", "2"), "SUCCESS", 2, "does not exist yet: 2 copies"),
        ("Create", _described(3), ("1", "4", "1"), "SUCCESS", 3, "keeping 3"),  # the resource added to a running stack
        ("Update", DENIED, ("1", "4", "1"), "FAILED", None, "AccessDeniedException"),
        ("Update", _described(3), ("3", "2", "2"), "FAILED", None, "1 <= Floor <= Initial <= Ceiling, got 3, 2, 2"),
        ("Delete", DENIED, ("1", "4", "1"), "SUCCESS", None, "nothing to do on delete"),
    ],
)
def test_the_kept_copy_count_function(local_services, request_type, answer, bounds, status, count, reason):
    handler = lambda_entry("copy_count/handler.handler")
    state = _SageMakerAndCloudFormation
    state.answer, state.calls, state.responses = answer, [], []
    client = boto3.client(
        "sagemaker",
        endpoint_url=local_services,
        region_name="us-east-1",
        aws_access_key_id="k",
        aws_secret_access_key="s",
        config=botocore.config.Config(retries={"max_attempts": 1}),
    )
    floor, ceiling, initial = bounds
    event = {
        "RequestType": request_type,
        "ResponseURL": f"{local_services}/response?signed",
        "StackId": "arn:stack",
        "RequestId": "r-1",
        "LogicalResourceId": "KeptCopyCount",
        "ResourceProperties": {
            "ServiceToken": "arn:fn",
            "ComponentName": COMPONENT,
            "Floor": floor,
            "Ceiling": ceiling,
            "Initial": initial,
            "Revision": "abc",
            "ModelName": "m",
        },
        **({"PhysicalResourceId": COMPONENT} if request_type != "Create" else {}),
    }
    handler(event, None, client=client)
    [sent] = state.responses
    assert sent["Status"] == status and reason in sent["Reason"], sent
    assert (sent["PhysicalResourceId"], sent["RequestId"], sent["LogicalResourceId"]) == (
        COMPONENT,
        "r-1",
        "KeptCopyCount",
    )
    assert sent["Data"] == ({"CopyCount": count} if count is not None else {})
    described = [c for c in state.calls if c["target"] == "SageMaker.DescribeInferenceComponent"]
    assert described == (
        []
        if request_type == "Delete" or status == "FAILED" and "Floor" in reason
        else [{"target": "SageMaker.DescribeInferenceComponent", "InferenceComponentName": COMPONENT}]
    )


# ------------------------------------------------------------------------------------ guarded model updates (item 4)


def test_a_guarded_component_rolls_in_copies_with_alarms_on_its_own_metrics(guarded_component):
    from helpers import alarm_series

    resources = guarded_component["Resources"]
    component_lid, component = one(resources, "AWS::SageMaker::InferenceComponent")
    _, endpoint = one(resources, "AWS::SageMaker::Endpoint")
    config = component["Properties"]["DeploymentConfig"]
    names = [
        "prod-guarded-ic-rollback-5xx-rate",
        "prod-guarded-ic-rollback-model-errors",
        "prod-guarded-ic-rollback-latency-p99",
    ]
    assert config == {
        "RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1}, "WaitIntervalInSeconds": 600},
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": n} for n in names]},
    }
    # A model update does not change the endpoint config: the endpoint carries no guard of its own.
    assert "DeploymentConfig" not in endpoint["Properties"]
    alarms = {
        r["Properties"]["AlarmName"]: (lid, r["Properties"])
        for lid, r in of_type(resources, "AWS::CloudWatch::Alarm").items()
        if "-rollback-" in str(r["Properties"].get("AlarmName"))
    }
    assert sorted(alarms) == sorted(names)
    for lid, props in alarms.values():
        assert lid in component["DependsOn"]  # in place before the update they guard
        assert "AlarmActions" not in props
        for series in alarm_series(props):
            assert series["Namespace"] == "AWS/SageMaker"
            assert series["Dimensions"] == [{"Name": "InferenceComponentName", "Value": "prod-guarded-ic-ic"}]
    # The execution role may read exactly those alarms.
    [statement] = [
        st
        for r in of_type(resources, "AWS::IAM::Policy").values()
        for st in r["Properties"]["PolicyDocument"]["Statement"]
        if st["Action"] == "cloudwatch:DescribeAlarms"
    ]
    assert sorted(str(a).rsplit(":", 1)[-1] for a in _listed(statement["Resource"])) == sorted(names)


def _schema(type_name: str) -> dict:
    """cfn-lint's copy of the CloudFormation registry schema (found without importing cfnlint: ~4 s)."""
    import importlib.util

    [package] = importlib.util.find_spec("cfnlint").submodule_search_locations
    providers = Path(package) / "data" / "schemas" / "providers" / "us-east-1.json"
    digest = json.loads(providers.read_text())[type_name]
    return json.loads((providers.parent.parent / "resources" / f"{digest}.json").read_text())


def test_every_component_caches_its_model_as_cloudformation_and_sagemaker_name_it(ic, guarded_component):
    """Specification.DataCacheConfig.EnableCaching, checked against cfn-lint 1.58's AWS::SageMaker::InferenceComponent
    schema and botocore's InferenceComponentDataCacheConfig (required member EnableCaching), on both components."""
    import jsonschema

    schema = _schema("AWS::SageMaker::InferenceComponent")
    shape = boto3.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"
    ).meta.service_model.shape_for("InferenceComponentDataCacheConfig")
    for resources in (ic, guarded_component["Resources"]):
        _, component = one(resources, "AWS::SageMaker::InferenceComponent")
        cache = component["Properties"]["Specification"]["DataCacheConfig"]
        assert cache == {"EnableCaching": True}
        spec_schema = schema["definitions"]["InferenceComponentSpecification"]
        assert spec_schema["properties"]["DataCacheConfig"] == {
            "$ref": "#/definitions/InferenceComponentDataCacheConfig"
        }
        jsonschema.Draft7Validator(schema["definitions"]["InferenceComponentDataCacheConfig"]).validate(cache)
        assert set(shape.required_members) == set(cache)


def test_the_component_deployment_config_is_what_cloudformation_and_sagemaker_accept(guarded_component):
    """Against cfn-lint 1.58's AWS::SageMaker::InferenceComponent schema (property names and types) and botocore
    1.44.8's InferenceComponentDeploymentConfig (required members, enum and ranges, the batch as 5-50 % of the copy
    count at every count an update can meet: KeptCopyCount's Floor-Ceiling)."""
    import jsonschema

    resources = guarded_component["Resources"]
    _, component = one(resources, "AWS::SageMaker::InferenceComponent")
    config = component["Properties"]["DeploymentConfig"]
    schema = _schema("AWS::SageMaker::InferenceComponent")
    assert "/properties/DeploymentConfig" in schema["writeOnlyProperties"]
    # Validated as the schema gives it (its other definitions hold patterns Python's re cannot compile: unchecked).
    jsonschema.Draft7Validator(
        {**schema["definitions"]["InferenceComponentDeploymentConfig"], "definitions": schema["definitions"]}
    ).validate(config)
    # boto3's default session caches the service model the other tests load as well.
    model = boto3.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"
    ).meta.service_model
    deployment_shape = model.shape_for("InferenceComponentDeploymentConfig")
    assert set(deployment_shape.required_members) <= set(config)
    rolling, rolling_shape = config["RollingUpdatePolicy"], deployment_shape.members["RollingUpdatePolicy"]
    assert set(rolling_shape.required_members) <= set(rolling)
    wait = rolling_shape.members["WaitIntervalInSeconds"].metadata
    assert wait["min"] <= rolling["WaitIntervalInSeconds"] <= wait["max"]
    batch = rolling["MaximumBatchSize"]
    assert batch["Type"] in rolling_shape.members["MaximumBatchSize"].members["Type"].enum
    assert "between 5% to 50% of the copy count" in rolling_shape.members["MaximumBatchSize"].documentation
    _, kept = one(resources, "Custom::KeptCopyCount")
    for copies in (kept["Properties"]["Floor"], kept["Properties"]["Ceiling"]):
        share = 100 * batch["Value"] / copies if batch["Type"] == "COPY_COUNT" else batch["Value"]
        assert 5 <= share <= 50, (copies, batch)


# ------------------------------------------------------------------------------------ network placement (item 5)


def test_every_component_endpoint_config_carries_the_models_network_placement(production, guarded_component):
    """The instances of a component endpoint are placed from its endpoint config before any model is attached: the
    VpcConfig, network isolation and role the Model has are on the endpoint config too (as sagemaker-core's
    endpoint_from_production_variants writes them), for every component endpoint synthesized here."""
    templates = {**production.templates, "guarded": guarded_component}
    checked = []
    for name, template in templates.items():
        resources = template["Resources"]
        if not of_type(resources, "AWS::SageMaker::InferenceComponent"):
            continue
        _, model = one(resources, "AWS::SageMaker::Model")
        _, config = one(resources, "AWS::SageMaker::EndpointConfig")
        for key in ("VpcConfig", "EnableNetworkIsolation", "ExecutionRoleArn"):
            assert config["Properties"].get(key) == model["Properties"].get(key), (name, key)
        checked.append((name, "VpcConfig" in model["Properties"]))
    # Both kinds were seen: a component in a VPC and one without.
    assert {vpc for _, vpc in checked} == {True, False}, checked
