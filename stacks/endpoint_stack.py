"""One stack per endpoint, so each deploys, updates and rolls back on its own."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import (
    Annotations,
    Aws,
    CfnMapping,
    CfnOutput,
    CfnParameter,
    CfnRule,
    CfnRuleAssertion,
    FileSystem,
    Fn,
    Stack,
    Token,
)
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

from endpoint_config import (
    BYTES_PER_PARAM,
    Deployment,
    EndpointSpec,
    artifact_bucket_name,
    artifact_prefix,
    artifact_root,
    image_repository_name,
    parse_instance_type,
)
from endpoint_config.models import model_facts
from endpoint_config.security import network_isolation
from systems import ServingSystem
from systems.checks import UNSIZED_MODEL_WARNING_ID, unsized_model_warning

from .endpoint_network import BucketKeyRef, EndpointSecurity, PrivateNetwork
from .llm_endpoint import ContainerImage, InvokeFunction, LlmEndpoint, ModelData, SmokeTestFunction
from .model_artifact import ArtifactRef
from .streaming import StreamingFrontDoor
from .trusted_pipeline import TrustedPipeline, role_name

ROOT = Path(__file__).resolve().parent.parent
LAMBDA_ROOT = ROOT / "lambda"
INVOKE_CODE = LAMBDA_ROOT / "invoke"


class EndpointStack(Stack):
    """Keyword-only props:
      deployment: the resolved environment (project, environment name, emulator flag).
      spec: this endpoint's validated config, environment overrides applied.
      system: the serving system named by `spec.system` (image, container environment, default timeouts).
      artifact: the built artifact's content hash, which names its S3 prefix.
      trusted_pipeline: None (the default) creates no role for a pipeline. Given, the stack creates the role
        `<project>-<env>-<endpoint>-smoke` (`smoke_role_name`), which only that pipeline role may assume and which may
        do what the smoke test does (`LlmEndpoint.grant_smoke_test`): what the pipeline's smoke step assumes.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        deployment: Deployment,
        spec: EndpointSpec,
        system: ServingSystem,
        artifact: ArtifactRef,
        trusted_pipeline: TrustedPipeline | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        endpoint_name = deployment.endpoint_name(spec)
        instance = parse_instance_type(spec.instance_type)

        bucket = artifact_bucket_name(deployment.project, deployment.environment_name, Aws.ACCOUNT_ID, Aws.REGION)
        prefix = artifact_prefix(spec.name, artifact.content_hash)
        environment = system.environment(spec)
        # Timeouts grow with the artifact: its size from the build's manifest, else estimated from the model.
        facts = model_facts(spec.model, spec.model_parameters)
        weight_bytes = artifact.total_bytes or (facts.parameters * BYTES_PER_PARAM[spec.dtype] if facts else None)
        if system.staged_weights_environment is not None:
            # The engine reads its weights from S3 itself; SageMaker downloads only the code/ part.
            model_data = ModelData(bucket_name=bucket, prefix=f"{prefix}code/", read_prefix=artifact_root(spec.name))
            environment = {**environment, **system.staged_weights_environment(f"s3://{bucket}/{prefix}weights/")}
        else:
            model_data = ModelData(
                bucket_name=bucket, prefix=prefix, compressed=spec.model_data == "tar-gz", read_prefix=artifact_root(spec.name)
            )
        # data_capture / network / encryption: the created VPC, and what the blocks add to the endpoint
        # (stacks/endpoint_network.py).
        self.network = (
            PrivateNetwork(self, "Network", endpoint_name=endpoint_name, log_retention_days=spec.log_retention_days)
            if spec.network is not None and spec.network.create_vpc else None
        )
        security = EndpointSecurity.resolve(
            spec, artifact_bucket=bucket, bucket_key=BucketKeyRef.of(deployment), network=self.network
        )
        self.endpoint = LlmEndpoint(
            self,
            "LlmEndpoint",
            endpoint_name=endpoint_name,
            spec=spec,
            image=self._image(system, instance.is_gpu, deployment),
            model_data=model_data,
            environment=environment,
            download_timeout_s=system.download_timeout_s(spec, weight_bytes),
            startup_timeout_s=system.startup_timeout_s(spec, weight_bytes),
            network_isolation=network_isolation(spec, system.network_isolation),
            model_copies=system.model_copies(spec, instance),
            inference_ami_version=system.inference_ami_version if instance.is_gpu else None,
            security=security,
        )
        self.invoke = InvokeFunction(
            self, "Invoke", endpoint=self.endpoint, code_path=str(INVOKE_CODE), log_retention_days=spec.log_retention_days,
            reserved_concurrency=spec.invoke_function.reserved_concurrency,
        )
        if self.network is not None:
            # The created VPC has the SageMaker Runtime endpoint: the invoke function calls the endpoint from inside.
            security.place_function(self.invoke.function)
        self.smoke = SmokeTestFunction(
            self, "SmokeTestFunction", endpoint=self.endpoint, lambda_root=str(LAMBDA_ROOT), spec=spec,
            emulator=deployment.environment.emulator,
        )
        # streaming: the function URL that streams tokens (stacks/streaming.py), in the created VPC like the invoke
        # function when the endpoint has one.
        self.stream: StreamingFrontDoor | None = None
        if spec.streaming.enabled:
            self.stream = StreamingFrontDoor(
                self, "Stream", endpoint=self.endpoint, spec=spec.streaming, log_retention_days=spec.log_retention_days
            )
            if self.network is not None:
                security.place_function(self.stream.function)

        if artifact.is_placeholder:
            Annotations.of(self).add_warning_v2(
                "llm-endpoints:unbuilt-artifact",
                f"endpoint {spec.name!r} has no built artifact: synthesized for review with a placeholder prefix; "
                "CloudFormation refuses to deploy this template",
            )
            # A template rule that fails unless the deployer says otherwise: CloudFormation evaluates rules before it
            # creates or changes anything, so a review template deployed by mistake stops at once with this message
            # (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/rules-section-structure.html).
            acknowledged = CfnParameter(
                self,
                "UnbuiltArtifactAcknowledged",
                type="String",
                default="no",
                allowed_values=["no", "yes"],
                description="This template names no built artifact (synthesized with allow_unbuilt for review).",
            )
            CfnRule(
                self,
                "RefuseUnbuiltArtifact",
                assertions=[
                    CfnRuleAssertion(
                        assert_=Fn.condition_equals(acknowledged.value_as_string, "yes"),
                        assert_description=(
                            f"Endpoint {spec.name} was synthesized with allow_unbuilt for review: it names no built "
                            "artifact. Build it (python -m model_build build) or pin artifact_hash, then synthesize again."
                        ),
                    )
                ],
            )

        if unsized := unsized_model_warning(spec, built_bytes=artifact.total_bytes):
            Annotations.of(self).add_warning_v2(UNSIZED_MODEL_WARNING_ID, unsized)
        copies = system.model_copies(spec, instance)
        if copies > 1 and not spec.hosting.uses_components:  # components: SageMaker places the copies
            Annotations.of(self).add_info(
                f"endpoint {spec.name!r}: {instance.gpu_count} GPUs of {spec.instance_type} at tensor_parallel_degree "
                f"{spec.tensor_parallel_degree}: each instance serves {copies} copies of the model"
            )
        if system.legacy:
            Annotations.of(self).add_warning_v2(
                "llm-endpoints:legacy-system",
                f"system {system.name!r} is retired upstream and pinned to its last image; "
                f"the maintained replacement is {system.replacement!r}",
            )

        CfnOutput(self, "EndpointName", value=endpoint_name)
        CfnOutput(self, "InvokeFunctionName", value=self.invoke.function.function_name)
        CfnOutput(self, "SmokeTestFunctionName", value=self.smoke.function.function_name)
        CfnOutput(self, "ModelDataUri", value=model_data.s3_uri)
        if self.endpoint.component is not None:  # hosting.mode inference-components: callers name it too
            CfnOutput(self, "InferenceComponentName", value=self.endpoint.component.component_name)

        self.smoke_role_name = role_name(deployment.project, deployment.environment_name, spec.name, "smoke")
        self.smoke_role: iam.Role | None = None
        if trusted_pipeline is not None:
            self.smoke_role = iam.Role(
                self,
                "SmokeTestRole",
                role_name=self.smoke_role_name,
                assumed_by=trusted_pipeline.principal(self),
                description=f"Assumed by the pipeline's smoke test: invokes endpoint {endpoint_name} only",
            )
            # The same grant as the smoke-test Lambda: both run `smoke_test` (endpoint_runtime/smoke.py).
            self.endpoint.grant_smoke_test(self.smoke_role)

    def _image(self, system: ServingSystem, gpu: bool, deployment: Deployment) -> ContainerImage:
        """Our own image built from the repository, or the pinned AWS image (a region->registry mapping where the
        region is only known at deploy time)."""
        if system.own_container is not None and deployment.environment.emulator:
            # The emulator cannot publish a Docker image asset (no Docker engine) and never runs containers:
            # point at the environment's own repository with a tag named by the container's source hash.
            repo = image_repository_name(deployment.project, deployment.environment_name)
            own = system.own_container
            # CDK's own asset fingerprint with the asset's excludes: the hash a DockerImageAsset of this context gets.
            fingerprint = FileSystem.fingerprint(str(ROOT), exclude=own.exclude)
            tag = f"{system.name}-{fingerprint[:16]}"
            return ContainerImage(
                uri=f"{self.account}.dkr.ecr.{self.region}.{Aws.URL_SUFFIX}/{repo}:{tag}",
                repository_arn=self.format_arn(service="ecr", resource="repository", resource_name=repo),
            )
        if system.own_container is not None:
            own = system.own_container
            asset = ecr_assets.DockerImageAsset(
                self,
                "Image",
                directory=str(ROOT),
                file=own.dockerfile,
                exclude=own.exclude,
                platform=ecr_assets.Platform.LINUX_AMD64,
            )
            return ContainerImage(uri=asset.image_uri, repository_arn=asset.repository.repository_arn)
        pin = system.image
        tag = pin.gpu_tag if gpu else pin.cpu_tag
        if tag is None:
            raise ValueError(f"system {system.name!r} offers no CPU image; choose a GPU instance type")
        if not Token.is_unresolved(self.region):
            return ContainerImage(uri=system.image.uri(self.region, gpu=gpu), repository_arn=pin.repository_arn(self.region))
        mapping = CfnMapping(
            self,
            "ImageRegistries",
            mapping={region: {"account": pin.registry_account(region)} for region in pin.available_regions},
        )
        account = mapping.find_in_map(Aws.REGION, "account")
        uri = Fn.join("", [account, ".dkr.ecr.", Aws.REGION, ".", Aws.URL_SUFFIX, f"/{pin.repository}:{tag}"])
        arn = Fn.join(
            "", ["arn:", Aws.PARTITION, ":ecr:", Aws.REGION, ":", account, f":repository/{pin.repository}"]
        )
        return ContainerImage(uri=uri, repository_arn=arn)
