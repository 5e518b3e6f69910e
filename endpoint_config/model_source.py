"""`model_source:`, a model SageMaker reads from a JumpStart or private-hub S3 prefix: nothing to build, nothing to copy.

The Model's container then gets ModelDataSource.S3DataSource {S3Uri, S3DataType S3Prefix, CompressionType None,
HubAccessConfig {HubContentArn}} and, only with `accept_eula: true` in the config, ModelAccessConfig {AcceptEula:
true}. Sources (the shapes and words quoted in docs/design/model-source.md):
- botocore's sagemaker service model: S3ModelDataSource.HubAccessConfig (InferenceHubAccessConfig, HubContentArn
  required, HubContentArn max 255), S3ModelDataSource.ModelAccessConfig (AcceptEula required: "The AcceptEula value
  must be explicitly defined as True in order to accept the EULA that this model requires"), S3ModelUri (max 1024,
  pattern `(https|s3)://([^/]+)/?(.*)`), S3Prefix ("A valid key name prefix identified by S3Uri always ends with a
  forward slash (/)");
- cfn-lint 1.58's AWS::SageMaker::Model schema: S3DataSource {CompressionType, S3DataType, S3Uri required;
  HubAccessConfig {HubContentArn, maxLength 255}; ModelAccessConfig {AcceptEula: boolean}};
- sagemaker-core 2.27.0 (jumpstart/constants.py HUB_CONTENT_ARN_REGEX
  `arn:(.*?):sagemaker:(.*?):(.*?):hub-content/(.*?)/(.*?)/(.*?)/(.*?)$`: hub, content type, name, version;
  jumpstart/region_config.json: every region's gated_content_bucket is `jumpstart-private-cache-prod-<region>`, and
  jumpstart/types.py is_gated_model: a model in the gated bucket, or with a EULA key, is gated).
Which systems may serve one is their own fact (ServingSystem.plain_checkpoint, systems/checks.py).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import Field

from .base import Strict

if TYPE_CHECKING:
    from .schema import EndpointSpec

# HUB_CONTENT_ARN_REGEX's parts with botocore's patterns for each: HubName and HubContentName
# `[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`, HubContentVersion `\d{1,4}.\d{1,4}.\d{1,4}`, the owner `\d{12}|aws` (HubNameOrArn);
# the content type of a model is "Model" (botocore HubContentType).
_HUB_NAME = r"[a-zA-Z0-9](?:-*[a-zA-Z0-9]){0,62}"
HUB_CONTENT_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):sagemaker:(?P<region>[a-z]{2}(?:-[a-z]+)+-[0-9]):(?P<owner>aws|[0-9]{12}):"
    rf"hub-content/(?P<hub>{_HUB_NAME})/(?P<type>[A-Za-z]+)/(?P<name>{_HUB_NAME})/"
    r"(?P<version>[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,4})$"
)
S3_PREFIX_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<prefix>.+/)$")
# sagemaker-core 2.27.0 jumpstart/region_config.json: gated (EULA) JumpStart content lives in this bucket per region.
GATED_BUCKET = re.compile(r"^jumpstart-private-cache-prod-(?P<region>[a-z]{2}(?:-[a-z]+)+-[0-9])$")
PUBLIC_BUCKET = re.compile(r"^jumpstart-cache-prod-(?P<region>[a-z]{2}(?:-[a-z]+)+-[0-9])$")


class HubModelSource(Strict):
    """A JumpStart (SageMakerPublicHub) or private-hub model.

    hub_content_arn: the hub content's ARN (HubAccessConfig.HubContentArn), e.g.
      arn:aws:sagemaker:us-east-1:aws:hub-content/SageMakerPublicHub/Model/<model id>/<version>.
    s3_uri: the S3 prefix of the content's uncompressed inference artifacts (S3DataSource.S3Uri, ending in "/"): what
      DescribeHubContent's HubContentDocument names for hosting (or the SageMaker console's deploy page shows).
    accept_eula: true accepts the model's end-user license agreement (ModelAccessConfig.AcceptEula). Only the word
      true counts (the config's YAML reads only true/false as booleans); a gated model without it is refused here,
      before SageMaker would refuse it at CreateModel.
    """

    hub_content_arn: str = Field(max_length=255)
    s3_uri: str = Field(max_length=1024)
    accept_eula: bool = False

    @property
    def bucket(self) -> str:
        match = S3_PREFIX_URI.match(self.s3_uri)
        return match.group("bucket") if match else ""

    @property
    def prefix(self) -> str:
        match = S3_PREFIX_URI.match(self.s3_uri)
        return match.group("prefix") if match else ""

    @property
    def region(self) -> str | None:
        match = HUB_CONTENT_ARN.match(self.hub_content_arn)
        return match.group("region") if match else None

    @property
    def gated(self) -> bool:
        """In JumpStart's gated bucket: the model has a EULA to accept (sagemaker-core's is_gated_model)."""
        return bool(GATED_BUCKET.match(self.bucket))


def model_source_problems(ep: EndpointSpec) -> list[str]:
    """The rules on `model_source:` that need no serving system (systems/checks.py holds the system's)."""
    source = ep.model_source
    if source is None:
        return []
    where = f"endpoint {ep.name!r}: model_source"
    problems = []
    arn = HUB_CONTENT_ARN.match(source.hub_content_arn)
    if arn is None:
        problems.append(
            f"{where}.hub_content_arn: value {source.hub_content_arn!r} is not a hub content ARN; allowed: "
            "arn:<partition>:sagemaker:<region>:<aws or account id>:hub-content/<hub>/Model/<name>/<version>, the "
            "hub and name of letters, digits and '-' (1-63), the version N.N.N (botocore HubName, HubContentName, "
            "HubContentVersion; e.g. arn:aws:sagemaker:us-east-1:aws:hub-content/SageMakerPublicHub/Model/<model id>/"
            "<version>)"
        )
    elif arn.group("type") != "Model":
        problems.append(
            f"{where}.hub_content_arn: content type {arn.group('type')!r} is not a model; allowed: Model "
            "(botocore HubContentType)"
        )
    if not S3_PREFIX_URI.match(source.s3_uri):
        problems.append(
            f"{where}.s3_uri: value {source.s3_uri!r} is not an S3 prefix; allowed: s3://<bucket>/<key prefix>/ "
            "ending in '/' (S3DataType S3Prefix: \"A valid key name prefix identified by S3Uri always ends with a "
            'forward slash (/)")'
        )
    else:
        bucket_region = GATED_BUCKET.match(source.bucket) or PUBLIC_BUCKET.match(source.bucket)
        if bucket_region and arn and bucket_region.group("region") != arn.group("region"):
            problems.append(
                f"{where}.s3_uri: bucket {source.bucket!r} is JumpStart's in {bucket_region.group('region')}, the "
                f"hub content is in {arn.group('region')}; use the content's own region's bucket"
            )
        if source.gated and not source.accept_eula:
            problems.append(
                f"{where}.accept_eula: required key is missing: {source.s3_uri} lies in JumpStart's gated bucket "
                f"{source.bucket!r}, so the model has an end-user license agreement that SageMaker requires accepted "
                '(ModelAccessConfig.AcceptEula "must be explicitly defined as True"); read the license, then set '
                "model_source.accept_eula: true"
            )
    if ep.artifact_hash is not None:
        problems.append(
            f"endpoint {ep.name!r}: artifact_hash: not allowed with model_source: nothing of ours is built or "
            "published for a hub model; remove one of them"
        )
    if ep.model_data != "s3-prefix":
        problems.append(
            f"endpoint {ep.name!r}: model_data: value {ep.model_data!r} is not allowed with model_source: the hub's "
            "artifacts are an uncompressed S3 prefix; remove the key"
        )
    if ep.adapters:
        problems.append(
            f"endpoint {ep.name!r}: adapters: not offered with model_source: adapters are built, checked and "
            "published beside this project's own base artifact, which a hub model does not have; remove one of them"
        )
    return problems


__all__ = ["HubModelSource", "model_source_problems"]
