"""Data capture, private networking and encryption: the `data_capture:`, `network:` and `encryption:` blocks of an
endpoint, and an environment's `encryption:` (the artifact bucket's key).

The short source names in the comments ([DC-API], [DC-DG], [KMS-API], [HOST-VPC], [VPC-API], [ARN]) are defined
in docs/design/network.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from .base import Strict
from .s3_names import check_s3_location

if TYPE_CHECKING:
    from facts.instances import InstanceType

    from .schema import EndpointSpec

# A KMS key by its key ARN (single- or multi-Region key). Not an alias or a bare key id: the IAM statements that let
# the roles use the key name it as their resource, and an alias in a policy's Resource never matches a key
# (AWS KMS Developer Guide, "Use aliases to control access to KMS keys").
KMS_KEY_ARN_PATTERN = (
    r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/"
    r"(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$"
)
KmsKeyArn = Annotated[str, Field(pattern=KMS_KEY_ARN_PATTERN)]
# A capture destination: s3://<bucket>/<prefix>[/] (S3 bucket naming rules: 3-63 of a-z, 0-9, '.', '-'). A key
# prefix is required: the execution role may write under it only, never a whole bucket.
S3_PREFIX_URI_PATTERN = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[A-Za-z0-9!_.*'()/=-]*[A-Za-z0-9!_.*'()=-]/?$"
SUBNET_ID_PATTERN = r"^subnet-(?:[0-9a-f]{8}|[0-9a-f]{17})$"
SECURITY_GROUP_ID_PATTERN = r"^sg-(?:[0-9a-f]{8}|[0-9a-f]{17})$"
MEDIA_TYPE_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*/[a-zA-Z0-9](-*[a-zA-Z0-9.])*$"  # [DC-API] JsonContentTypes
SUBNETS_MIN, SUBNETS_MAX = 2, 16  # [HOST-VPC] two AZs at least; [VPC-API] 16 at most
SECURITY_GROUPS_MAX = 5  # [VPC-API]

# Config value -> CaptureOption.CaptureMode ([DC-API]).
CAPTURE_MODES = {"input": "Input", "output": "Output"}


def data_capture_prefix(endpoint: str) -> str:
    """Key prefix of one endpoint's captured data in the artifact bucket (the default destination)."""
    return f"data-capture/{endpoint}/"


class DataCapture(Strict):
    """`data_capture:` SageMaker writes a sample of requests and responses to S3 (EndpointConfig DataCaptureConfig).

    sampling_percent: share of requests captured (InitialSamplingPercentage; 1-100: 0 would capture nothing).
    capture: what is captured, input and/or output (CaptureOptions). Default both.
    destination: an s3://bucket/prefix URI (a prefix is required: the role may write there only); default the
      environment's artifact bucket under data-capture/<endpoint>/.
    kms_key: a KMS key ARN SageMaker encrypts the captured objects with (DataCaptureConfig.KmsKeyId); default none:
      the destination bucket's default encryption applies.
    json_content_types: request/response content types captured as JSON text rather than base64
      (CaptureContentTypeHeader.JsonContentTypes; "If no headers are specified SageMaker AI will by default base64
      encode", [DC-API]). Default application/json, what the invoke function sends.
    """

    sampling_percent: int = Field(ge=1, le=100)
    capture: tuple[Literal["input", "output"], ...] = Field(("input", "output"), min_length=1, max_length=2)
    destination: (
        Annotated[str, Field(pattern=S3_PREFIX_URI_PATTERN, max_length=512), AfterValidator(check_s3_location)] | None
    ) = None
    kms_key: KmsKeyArn | None = None
    json_content_types: tuple[Annotated[str, Field(pattern=MEDIA_TYPE_PATTERN, max_length=256)], ...] = Field(
        ("application/json",), min_length=1, max_length=10
    )

    @model_validator(mode="after")
    def _distinct(self) -> DataCapture:
        if len(set(self.capture)) != len(self.capture):
            raise ValueError(
                f"capture: value {list(self.capture)} names a mode twice; allowed: input, output (each once)"
            )
        return self

    @property
    def capture_modes(self) -> tuple[str, ...]:
        """`capture` as CaptureOption.CaptureMode values (Input, Output: CAPTURE_MODES)."""
        return tuple(CAPTURE_MODES[mode] for mode in self.capture)

    def destination_parts(self, default_bucket: str, endpoint: str) -> tuple[str, str]:
        """(bucket, key prefix ending in '/') of where captures go."""
        if self.destination is None:
            return default_bucket, data_capture_prefix(endpoint)
        bucket, _, prefix = self.destination.removeprefix("s3://").partition("/")
        return bucket, prefix.rstrip("/") + "/"


class Network(Strict):
    """`network:` where the model's containers (CfnModel VpcConfig) and the invoke function run.

    create_vpc: true creates a VPC for this endpoint: two private subnets in two Availability Zones with no route to
      the internet, an S3 gateway endpoint and a SageMaker Runtime interface endpoint (stacks/endpoint_network.py).
    subnet_ids + security_group_ids: an existing VPC's subnets (2-16, in at least two AZs) and security groups (1-5).
    network_isolation: EnableNetworkIsolation on the model (no network calls to or from the container). Default:
      the serving system's choice (on, except for systems whose engine downloads its weights from S3 itself).
    """

    create_vpc: bool = False
    subnet_ids: tuple[Annotated[str, Field(pattern=SUBNET_ID_PATTERN)], ...] = Field((), max_length=SUBNETS_MAX)
    security_group_ids: tuple[Annotated[str, Field(pattern=SECURITY_GROUP_ID_PATTERN)], ...] = Field(
        (), max_length=SECURITY_GROUPS_MAX
    )
    network_isolation: bool | None = None

    @model_validator(mode="after")
    def _one_vpc(self) -> Network:
        given = bool(self.subnet_ids or self.security_group_ids)
        if self.create_vpc and given:
            raise ValueError(
                "create_vpc: true creates the VPC, so subnet_ids and security_group_ids must be left out; "
                "give either create_vpc: true or an existing VPC's subnet_ids and security_group_ids"
            )
        if given and not (self.subnet_ids and self.security_group_ids):
            missing = "security_group_ids" if self.subnet_ids else "subnet_ids"
            raise ValueError(
                f"{missing}: required key is missing: a VPC placement needs both subnet_ids and security_group_ids "
                "(CreateModel VpcConfig)"
            )
        if self.subnet_ids and len(self.subnet_ids) < SUBNETS_MIN:
            raise ValueError(
                f"subnet_ids: value {list(self.subnet_ids)} has {len(self.subnet_ids)} subnet; SageMaker hosting needs "
                f"at least {SUBNETS_MIN} subnets in different Availability Zones (allowed: {SUBNETS_MIN}-{SUBNETS_MAX})"
            )
        for key in ("subnet_ids", "security_group_ids"):
            values = getattr(self, key)
            if len(set(values)) != len(values):
                raise ValueError(f"{key}: value {list(values)} names an id twice")
        return self

    @property
    def in_vpc(self) -> bool:
        return self.create_vpc or bool(self.subnet_ids)


class EndpointEncryption(Strict):
    """`encryption:` of an endpoint: KMS keys by ARN.

    volume_key: encrypts the ML storage volume of the endpoint's instances (EndpointConfig KmsKeyId). Refused on
      instance types with local NVMe instance storage, where CreateEndpointConfig fails with a KmsKeyId ([KMS-API];
      those volumes are encrypted by the instance's hardware).
    async_output_key: encrypts asynchronous inference results (AsyncInferenceConfig.OutputConfig.KmsKeyId); only
      for an endpoint with asynchronous invocation.
    """

    volume_key: KmsKeyArn | None = None
    async_output_key: KmsKeyArn | None = None


class EnvironmentEncryption(Strict):
    """`encryption:` of an environment. bucket_key: the artifact bucket's default encryption (SSE-KMS) key:
    `create` (a customer managed key with rotation, created with the bucket) or an existing key's ARN; default none:
    SSE-S3 (S3 managed keys), as before."""

    bucket_key: Literal["create"] | KmsKeyArn | None = None


def security_problems(ep: EndpointSpec, instance: InstanceType) -> list[str]:
    """The cross-block rules of these blocks for one endpoint. Each message names the endpoint, the key, the value
    and what is allowed."""
    problems: list[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(f"endpoint {ep.name!r}: {key}: {message}")

    encryption = ep.encryption
    if encryption is not None and encryption.volume_key is not None:
        if instance.has_local_nvme:
            bad(
                "encryption.volume_key",
                f"value {encryption.volume_key!r} is not allowed on {ep.instance_type}: it has local NVMe instance "
                "storage, which the instance's hardware encrypts, and SageMaker refuses a KmsKeyId for such types "
                "(CreateEndpointConfig fails); remove the key, or choose an instance type without local storage",
            )
    if encryption is not None and encryption.async_output_key is not None and not ep.invocation.is_async:
        bad(
            "encryption.async_output_key",
            f"value {encryption.async_output_key!r} encrypts asynchronous inference results, but the endpoint is "
            "invoked in real time; remove the key, or make the endpoint asynchronous",
        )
    return problems


def isolation_problems(ep: EndpointSpec, *, engine_reads_s3: bool) -> list[str]:
    """`network.network_isolation: true` on a system whose engine downloads its weights from S3 itself: the
    isolated container could not reach S3 (EnableNetworkIsolation: "No inbound or outbound network calls can be made
    to or from the model container", CreateModel API)."""
    network = ep.network
    if network is None or network.network_isolation is not True or not engine_reads_s3:
        return []
    return [
        f"endpoint {ep.name!r}: network.network_isolation: value True is not allowed for system {ep.system!r}: its "
        "engine downloads the model weights from S3 itself when the container starts (the staged weights/ part of "
        "the artifact), and an isolated container can make no network calls; remove the key (or set false)"
    ]


def network_isolation(ep: EndpointSpec, system_default: bool) -> bool:
    """The model's EnableNetworkIsolation: the config's choice, else the serving system's."""
    network = ep.network
    if network is not None and network.network_isolation is not None:
        return network.network_isolation
    return system_default


# ------------------------------------------------------------------------------------------------ ARNs and regions

ARN_PARTS = re.compile(r"^arn:(?P<partition>[^:]*):(?P<service>[^:]*):(?P<region>[^:]*):(?P<account>[^:]*):.+$")


def config_arns(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, ARN) of every ARN among `value`'s strings (a block's model_dump()): each key of the config that
    names an AWS resource by ARN, the ones added later included."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from config_arns(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from config_arns(v, f"{key}[{i}]")
    elif isinstance(value, str) and value.startswith("arn:"):
        yield key, value


@functools.cache
def region_partition(region: str) -> str | None:
    """The partition of a region botocore knows (aws, aws-cn, aws-us-gov, ...); None for a region it does not."""
    import botocore.exceptions
    import botocore.session

    try:
        return botocore.session.get_session().get_partition_for_region(region)
    except botocore.exceptions.UnknownRegionError:
        return None


def arn_region_problems(arns: list[tuple[str, str, str]], region: str | None, deploys: str) -> list[str]:
    """Each ARN of `arns` (who, key, ARN) that lies outside `region` or its partition ([ARN]). The services that use
    these resources (SageMaker, CloudWatch, S3, SNS, KMS, CodeBuild) run in the environment's region, and a KMS key,
    an SNS topic or a secret lives in one region. With no region known yet (the CLI's, at deploy) every regional ARN
    must name the same one. `deploys` words the region in the message ("environment 'prod' deploys to")."""
    problems: list[str] = []
    partition = region_partition(region) if region else None
    regional = [(who, key, arn, m) for who, key, arn in arns if (m := ARN_PARTS.match(arn))]
    if region is None:
        named = {m["region"] for *_, m in regional if m["region"]}
        partitions = {m["partition"] for *_, m in regional}
        if len(named) > 1 or len(partitions) > 1:
            what = (
                f"regions {', '.join(sorted(named))}"
                if len(named) > 1
                else f"partitions {', '.join(sorted(partitions))}"
            )
            listed = "; ".join(f"{who}{key}: {arn!r}" for who, key, arn, _ in regional)
            problems.append(
                f"the ARNs name {what} ({listed}), but {deploys} one region; allowed: resources of that one region "
                "(set the region in the config and they are checked against it)"
            )
        return problems
    for who, key, arn, m in regional:
        wrong = []
        if partition is not None and m["partition"] != partition:
            wrong.append(f"partition {m['partition']!r}")
        if m["region"] and m["region"] != region:
            wrong.append(f"region {m['region']!r}")
        if wrong:
            allowed = f"region {region}" + (f", partition {partition}" if partition else "")
            problems.append(
                f"{who}{key}: value {arn!r} is in {' and '.join(wrong)}, but {deploys} {region!r}; allowed: a resource "
                f"in {allowed} (the services that use it run there)"
            )
    return problems


__all__ = [
    "ARN_PARTS",
    "CAPTURE_MODES",
    "DataCapture",
    "EndpointEncryption",
    "EnvironmentEncryption",
    "KMS_KEY_ARN_PATTERN",
    "Network",
    "adopted_bucket_key_problem",
    "arn_region_problems",
    "config_arns",
    "data_capture_prefix",
    "isolation_problems",
    "network_isolation",
    "region_partition",
    "security_problems",
]


def adopted_bucket_key_problem(adopt_kept_data: bool, encryption: EnvironmentEncryption | None) -> str | None:
    """`bucket_key: create` with `adopt_kept_data: true`: an adopted bucket keeps the encryption it was created with
    and the stack creates no bucket, so a new key would encrypt nothing; the kept key is named by its ARN."""
    if adopt_kept_data and encryption is not None and encryption.bucket_key == "create":
        return (
            "encryption.bucket_key: value 'create' is not allowed with adopt_kept_data: true: the adopted bucket keeps "
            "the key it was created with; give that key's ARN (the kept environment's key, retained on destroy)"
        )
    return None
