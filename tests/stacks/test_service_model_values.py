"""Every enum-like value the templates send is one the AWS API documents as supported.

cfn-lint checks CloudFormation's schemas, which accept any string for several SageMaker enums (its
AWS::SageMaker::Endpoint schema takes any VariantPropertyType). botocore's service models are the API's own: each
template property is walked against the request shape of the call CloudFormation makes with it (property names are
the API's member names), and each string sent for a member with an enum must be in the enum and must not be one the
member's documentation marks "(Not currently supported.)" (botocore 1.44.8 says so of VariantPropertyType
DataCaptureConfig, which every endpoint used to send in ExcludeRetainedVariantProperties).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import botocore.session
import pytest
from helpers import EXAMPLE_CASES

# CloudFormation resource type -> (botocore service, the request shapes of the calls its handler makes with the
# properties). Handlers' calls: cfn-lint's registry schemas (handlers.create/update permissions).
REQUESTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "AWS::SageMaker::Endpoint": ("sagemaker", ("CreateEndpointInput", "UpdateEndpointInput")),
    "AWS::SageMaker::EndpointConfig": ("sagemaker", ("CreateEndpointConfigInput",)),
    "AWS::SageMaker::Model": ("sagemaker", ("CreateModelInput",)),
    "AWS::SageMaker::InferenceComponent": (
        "sagemaker",
        ("CreateInferenceComponentInput", "UpdateInferenceComponentInput"),
    ),
    "AWS::ApplicationAutoScaling::ScalableTarget": ("application-autoscaling", ("RegisterScalableTargetRequest",)),
    "AWS::ApplicationAutoScaling::ScalingPolicy": ("application-autoscaling", ("PutScalingPolicyRequest",)),
    "AWS::CloudWatch::Alarm": ("cloudwatch", ("PutMetricAlarmInput",)),
}
NOT_SUPPORTED = re.compile(r"not\s+currently\s+supported", re.IGNORECASE)


def _models() -> dict[str, Any]:
    session = botocore.session.get_session()
    return {service: session.get_service_model(service) for service, _ in REQUESTS.values()}


MODELS = _models()


def value_documentation(documentation: str, value: str) -> str:
    """The part of a member's documentation about one enum value: from `<code>VALUE</code>` to the next list item
    or paragraph end ("" when the documentation does not describe the value)."""
    match = re.search(rf"<code>{re.escape(value)}</code>(.*?)(?:</li>|<li>|$)", documentation, re.DOTALL)
    return match.group(1) if match else ""


def problems_of(value: Any, shape: Any, path: str, documentation: str = "") -> Iterator[tuple[str, str | None]]:
    """(path, problem or None) for every string sent for an enum-valued member under `value`; CloudFormation
    intrinsics (a one-key dict of Ref/Fn::*) and members the API does not have are skipped."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Ref", "Fn::")):
        return
    if shape.type_name == "structure" and isinstance(value, Mapping):
        for key, item in value.items():
            if key in shape.members:
                member = shape.members[key]
                yield from problems_of(item, member, f"{path}.{key}", member.documentation or "")
    elif shape.type_name == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from problems_of(item, shape.member, f"{path}[{i}]", documentation)
    elif getattr(shape, "enum", None) and isinstance(value, str):
        if value not in shape.enum:
            yield path, f"value {value!r} is not in {shape.name}'s enum ({', '.join(shape.enum[:12])}, ...)"
        elif NOT_SUPPORTED.search(value_documentation(documentation, value)):
            yield path, f"value {value!r}: {shape.name} documents it as not currently supported"
        else:
            yield path, None


def template_problems(template: Mapping[str, Any]) -> tuple[list[str], set[str]]:
    """(problems, the enum-valued paths checked) of one template."""
    problems, checked = [], set()
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] not in REQUESTS:
            continue
        service, requests = REQUESTS[resource["Type"]]
        found: dict[str, str | None] = {}
        for request in requests:
            for path, problem in problems_of(resource.get("Properties", {}), MODELS[service].shape_for(request), ""):
                if path not in found or problem is None:  # supported by any of the calls is enough
                    found[path] = problem
        for path, problem in found.items():
            checked.add(resource["Type"] + re.sub(r"\[\d+\]", "[]", path))
            if problem:
                problems.append(f"{logical_id} ({resource['Type']}){path}: {problem}")
    return problems, checked


def test_every_enum_value_the_templates_send_is_documented_as_supported(synth):
    """Every example in every environment (the synths tests/config shares), every SageMaker, scaling and alarm
    resource."""
    problems, checked = [], set()
    for case in EXAMPLE_CASES:
        for stack, template in synth(*case).templates.items():
            found, paths = template_problems(template)
            problems += [f"{case[0]} ({case[1]}) {stack}: {p}" for p in found]
            checked |= paths
    assert problems == []
    # The walk reaches the values that matter (a renamed member would silently drop out of it).
    assert {
        "AWS::SageMaker::Endpoint.ExcludeRetainedVariantProperties[].VariantPropertyType",
        "AWS::SageMaker::Endpoint.DeploymentConfig.BlueGreenUpdatePolicy.TrafficRoutingConfiguration.Type",
        "AWS::SageMaker::EndpointConfig.ProductionVariants[].InstanceType",
        "AWS::SageMaker::EndpointConfig.ProductionVariants[].RoutingConfig.RoutingStrategy",
        "AWS::SageMaker::EndpointConfig.ProductionVariants[].InferenceAmiVersion",
        "AWS::SageMaker::EndpointConfig.DataCaptureConfig.CaptureOptions[].CaptureMode",
        "AWS::SageMaker::Model.PrimaryContainer.ModelDataSource.S3DataSource.S3DataType",
        "AWS::ApplicationAutoScaling::ScalableTarget.ScalableDimension",
        "AWS::CloudWatch::Alarm.ComparisonOperator",
    } <= checked, sorted(checked)


@pytest.mark.parametrize(
    "properties, expected",
    [
        (
            {"ExcludeRetainedVariantProperties": [{"VariantPropertyType": "DataCaptureConfig"}]},
            "value 'DataCaptureConfig': VariantPropertyType documents it as not currently supported",
        ),
        (
            {"ExcludeRetainedVariantProperties": [{"VariantPropertyType": "DesiredSpeed"}]},
            "value 'DesiredSpeed' is not in VariantPropertyType's enum",
        ),
    ],
)
def test_the_check_refuses_an_unsupported_or_unknown_value(properties, expected):
    template = {
        "Resources": {
            "E": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {
                    "EndpointName": "e",
                    "EndpointConfigName": {"Fn::GetAtt": ["C", "EndpointConfigName"]},
                    **properties,
                },
            }
        }
    }
    [problem] = template_problems(template)[0]
    assert problem.startswith("E (AWS::SageMaker::Endpoint).ExcludeRetainedVariantProperties[0].VariantPropertyType: ")
    assert expected in problem
    fine = {
        "Resources": {
            "E": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {"ExcludeRetainedVariantProperties": [{"VariantPropertyType": "DesiredWeight"}]},
            }
        }
    }
    assert template_problems(fine)[0] == []
