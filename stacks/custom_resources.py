"""Every custom resource answers CloudFormation in bounded time (operations review R3).

CloudFormation waits for a custom resource's answer up to its ServiceTimeout: "an integer from 1 to 3600", default
3600 s (the AWS::CloudFormation::CustomResource reference; the cfn-lint 1.58 schema's ServiceTimeout). A function that
ends without answering (killed at its timeout) holds the stack that hour, and its rollback another. Our own custom
resources set theirs (stacks/artifact_guard.py CUSTOM_RESOURCE_TIMEOUT_S); this aspect gives CDK's own ones a
ServiceTimeout just above their function's: Custom::S3AutoDeleteObjects (the buckets' auto_delete_objects) runs on
CDK's provider function with a 900 s timeout in aws-cdk-lib 2.273. tests/stacks/test_custom_resource_timeouts.py
checks every custom resource of every synthesized template against its function's timeout, so a new one without a
ServiceTimeout, or a CDK provider whose timeout grows, fails there.
"""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, IAspect
from constructs import IConstruct

# CDK's custom resource types -> ServiceTimeout (s): their provider function's timeout plus a minute for the answer.
CDK_CUSTOM_RESOURCE_TIMEOUTS_S = {"Custom::S3AutoDeleteObjects": 900 + 60}


@jsii.implements(IAspect)
class CustomResourceTimeouts:
    def visit(self, node: IConstruct) -> None:
        if isinstance(node, CfnResource) and node.cfn_resource_type in CDK_CUSTOM_RESOURCE_TIMEOUTS_S:
            node.add_property_override("ServiceTimeout", CDK_CUSTOM_RESOURCE_TIMEOUTS_S[node.cfn_resource_type])


__all__ = ["CDK_CUSTOM_RESOURCE_TIMEOUTS_S", "CustomResourceTimeouts"]
