"""hosting.mode inference-components in the template: config/examples/production.yaml's assist-ic (scale to zero)
against chat-vllm, a model on the variant, from the same session-cached synth (cdk-nag included)."""

from __future__ import annotations

import pytest

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
    assert "ModelDataDownloadTimeoutInSeconds" not in variant and "ContainerStartupHealthCheckTimeoutInSeconds" not in variant
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
    assert props["RuntimeConfig"] == {"CopyCount": 1}
    assert props["Specification"] == {
        "ModelName": {"Fn::GetAtt": [model_lid, "ModelName"]},
        "ComputeResourceRequirements": {
            "NumberOfAcceleratorDevicesRequired": 1, "NumberOfCpuCoresRequired": 4, "MinMemoryRequiredInMb": 32768,
        },
        "StartupParameters": {"ModelDataDownloadTimeoutInSeconds": 600, "ContainerStartupHealthCheckTimeoutInSeconds": 900},
    }  # fmt: skip
    # Managed instance scaling sets the instance count: an update keeps it.
    excluded = [p["VariantPropertyType"] for p in endpoint["Properties"]["ExcludeRetainedVariantProperties"]]
    assert "DesiredInstanceCount" not in excluded
    # Its log group is owned (retention, removed on destroy) and exists before the component starts.
    logs = {lid for lid, r in of_type(ic, "AWS::Logs::LogGroup").items()
            if r["Properties"].get("LogGroupName") == f"/aws/sagemaker/InferenceComponents/{COMPONENT}"}  # fmt: skip
    assert len(logs) == 1 and logs <= set(component["DependsOn"])
    assert ic[next(iter(logs))]["DeletionPolicy"] == "Delete"


def test_copies_scale_on_concurrency_and_come_back_from_zero(ic):
    target_lid, target = one(ic, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"] == {
        "ServiceNamespace": "sagemaker", "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
        "ResourceId": f"inference-component/{COMPONENT}", "MinCapacity": 0, "MaxCapacity": 4,
        **({"Tags": target["Properties"]["Tags"]} if "Tags" in target["Properties"] else {}),
    }  # fmt: skip
    assert "RoleARN" not in target["Properties"]  # Application Auto Scaling's service-linked role
    component_lid, _ = one(ic, "AWS::SageMaker::InferenceComponent")
    assert component_lid in target["DependsOn"]
    policies = {r["Properties"]["PolicyType"]: (lid, r["Properties"])
                for lid, r in of_type(ic, "AWS::ApplicationAutoScaling::ScalingPolicy").items()}  # fmt: skip
    assert set(policies) == {"TargetTrackingScaling", "StepScaling"}
    tracking = policies["TargetTrackingScaling"][1]
    assert tracking["ScalingTargetId"] == {"Ref": target_lid}
    assert tracking["TargetTrackingScalingPolicyConfiguration"] == {
        "PredefinedMetricSpecification": {
            "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
        },
        "TargetValue": 4, "ScaleInCooldown": 300, "ScaleOutCooldown": 60,
    }  # fmt: skip
    wake_lid, wake = policies["StepScaling"]
    assert wake["ScalingTargetId"] == {"Ref": target_lid}
    assert wake["StepScalingPolicyConfiguration"] == {
        "AdjustmentType": "ChangeInCapacity", "MetricAggregationType": "Maximum", "Cooldown": 60,
        "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
    }  # fmt: skip
    [alarm] = [r["Properties"] for r in of_type(ic, "AWS::CloudWatch::Alarm").values()
               if r["Properties"].get("MetricName") == "NoCapacityInvocationFailures"]  # fmt: skip
    assert alarm["AlarmActions"] == [{"Fn::GetAtt": [wake_lid, "Arn"]}]
    assert alarm["Namespace"] == "AWS/SageMaker"
    assert alarm["Dimensions"] == [{"Name": "InferenceComponentName", "Value": COMPONENT}]
    assert (alarm["Statistic"], alarm["Period"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == ("Sum", 60, 1, 1)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)


def _functions(resources: dict) -> dict[str, dict]:
    return {r["Properties"]["Handler"]: r for r in of_type(resources, "AWS::Lambda::Function").values()}


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _policy_statements(resources: dict, role_lid: str) -> list[dict]:
    return [s for r in of_type(resources, "AWS::IAM::Policy").values() if {"Ref": role_lid} in r["Properties"]["Roles"]
            for s in r["Properties"]["PolicyDocument"]["Statement"]]  # fmt: skip


def test_invoke_and_smoke_functions_name_the_component_and_may_invoke_it(production, ic):
    functions = _functions(ic)
    for handler in ("invoke/handler.handler", "smoke/handler.handler"):
        fn = functions[handler]
        assert fn["Properties"]["Environment"]["Variables"]["INFERENCE_COMPONENT_NAME"] == COMPONENT
        role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
        granted = {
            arn for st in _policy_statements(ic, role) if "sagemaker:InvokeEndpoint" in _listed(st["Action"])
            for arn in _listed(st["Resource"])
        }  # fmt: skip
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
