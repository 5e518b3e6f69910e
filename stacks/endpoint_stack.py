"""One stack per endpoint, so each deploys, updates and rolls back on its own: built from the endpoint's plan."""

from __future__ import annotations

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
from constructs import Construct

from deployment import EndpointPlan
from deployment.adapters import AdapterPlan, deployable_adapters
from deployment.plan import ArtifactRef
from systems.base import REPO_ROOT
from systems.checks import UNSIZED_MODEL_WARNING_ID

from .artifact_guard import PublishedArtifactCheck
from .benchmark import ManagedBenchmark, SloGateRole
from .endpoint_network import BucketKeyRef, EndpointSecurity, PrivateNetwork
from .functions import InvokeFunction, SmokeTestFunction, smoke_chat_environment, smoke_environment
from .llm_endpoint import LlmEndpoint
from .openai_route import OpenAIRouteAccess
from .sagemaker_resources import ContainerImage
from .smoke_check import EndpointSmokeCheck
from .streaming import StreamingFrontDoor
from .trusted_pipeline import TrustedPipeline, role_name


class EndpointStack(Stack):
    """Keyword-only props:
      plan: the endpoint's plan (deployment/plan.py).
      bucket_key: the environment's artifact bucket key, when the bucket is KMS-encrypted (default None).
      allow_unbuilt: synthesize an endpoint with no built artifact for review, with a placeholder prefix, a warning
        and a template rule that refuses to deploy (default False: ConfigError).
      image_repository: the environment's ECR repository, where the emulator finds our own images.
      trusted_gate: None (the default) creates no role for a pipeline. Given, an endpoint with `slo:` gets the role
        the pipeline's SLO gate step assumes, which only that pipeline role may assume (stacks/benchmark.py). (The
        pipeline runs no smoke step: the stack's own smoke check runs in its deploy, docs/design/guards.md.)
      publish_command: the exact command that publishes this endpoint's artifacts (stacks.publish_command), which the
        artifact check names when they are not published (None: its generic form).
    An endpoint with `slo.managed_benchmark` also gets its AIWorkloadConfig and benchmark role (stacks/benchmark.py).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: EndpointPlan,
        image_repository: str,
        bucket_key: BucketKeyRef | None = None,
        allow_unbuilt: bool = False,
        trusted_gate: TrustedPipeline | None = None,
        publish_command: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        artifact = plan.deployable_artifact(allow_unbuilt=allow_unbuilt)
        adapters = deployable_adapters(plan.adapters, allow_unbuilt=allow_unbuilt)
        bucket = plan.artifact_bucket(Aws.ACCOUNT_ID, Aws.REGION)
        # data_capture / network / encryption: the created VPC, and what the blocks add to the endpoint
        # (stacks/endpoint_network.py).
        self.network = (
            PrivateNetwork(
                self, "Network", endpoint_name=plan.endpoint_name, log_retention_days=plan.log_retention_days
            )
            if plan.creates_vpc
            else None
        )
        security = EndpointSecurity.resolve(plan, artifact_bucket=bucket, bucket_key=bucket_key, network=self.network)
        self.endpoint = LlmEndpoint(
            self,
            "LlmEndpoint",
            plan=plan,
            image=self._image(plan, image_repository),
            artifact_bucket=bucket,
            security=security,
        )
        if not artifact.from_hub:  # a hub model has no artifact of ours to check
            self._add_artifact_checks(
                plan, artifact, adapters, bucket=bucket, bucket_key=bucket_key, publish_command=publish_command
            )
        self._add_functions(plan, security)
        self._add_slo(plan, bucket=bucket, bucket_key=bucket_key, trusted_gate=trusted_gate)
        # chat: SageMaker's OpenAI route, its callers' grants and base URLs (stacks/openai_route.py).
        self.openai_route = (
            OpenAIRouteAccess(
                self,
                "OpenAIRoute",
                endpoint=self.endpoint,
                route=plan.openai_route,
                role_name=role_name(plan.project, plan.environment_name, plan.name, "openai"),
            )
            if plan.chat
            else None
        )

        if artifact.is_placeholder or any(a.artifact.is_placeholder for a in adapters):
            self._refuse_unbuilt(plan.name)
        self._annotate(plan)
        self._add_outputs(plan)

    def _add_artifact_checks(
        self,
        plan: EndpointPlan,
        artifact: ArtifactRef,
        adapters: tuple[AdapterPlan, ...],
        *,
        bucket: str,
        bucket_key: BucketKeyRef | None,
        publish_command: str | None = None,
    ) -> None:
        """Nothing is created for an artifact whose publish did not finish, however the stack is deployed."""
        self.artifact_check = PublishedArtifactCheck(
            self,
            "ArtifactCheck",
            bucket_name=bucket,
            manifest_key=plan.manifest_key,
            content_hash=artifact.content_hash,
            bucket_key=bucket_key,
            log_retention_days=plan.log_retention_days,
            publish_command=publish_command,
        )
        self.endpoint.model.node.add_dependency(self.artifact_check.resource)
        # Each LoRA adapter's artifact too: an unpublished one would otherwise fail only at
        # CreateInferenceComponent, after the base component started, with SageMaker's message (R6).
        adapter_components = self.endpoint.adapters
        for adapter in adapters if adapter_components is not None else ():
            check = self.artifact_check.check(
                f"Adapter-{adapter.name}",
                manifest_key=adapter.manifest_key,
                content_hash=adapter.artifact.content_hash,
            )
            assert adapter_components is not None  # the loop runs only then
            adapter_components.components[adapter.name].node.add_dependency(check)

    def _add_functions(self, plan: EndpointPlan, security: EndpointSecurity) -> None:
        """The invoke function, the smoke-test function and (streaming:) the streaming front door."""
        self.invoke = InvokeFunction(
            self,
            "Invoke",
            endpoint_name=plan.endpoint_name,
            asynchronous=plan.is_async,
            environment={**self.endpoint.request_limits, **self.endpoint.target_environment},
            log_retention_days=plan.log_retention_days,
            reserved_concurrency=plan.invoke_function.reserved_concurrency,
        )
        self.endpoint.grant_client(self.invoke.function)
        if self.network is not None:
            # The created VPC has the SageMaker Runtime endpoint: the invoke function calls the endpoint from inside.
            security.place_function(self.invoke.function)
        smoke = plan.smoke
        smoke_settings = {
            **self.endpoint.target_environment,
            **smoke_chat_environment(smoke.chat_route, smoke.chat_tools, plan.chat_features, smoke.chat_extra),
            # the body the container takes the prompt in, and its replies' reasoning field
            **plan.endpoint_body.environment(),
        }
        self.smoke = SmokeTestFunction(
            self,
            "SmokeTestFunction",
            endpoint_name=plan.endpoint_name,
            prompt=smoke.prompt,
            max_new_tokens=smoke.max_new_tokens,
            latency_budget_ms=smoke.latency_budget_ms,
            wake_budget_ms=smoke.wake_budget_ms,
            environment=smoke_settings,
            emulator=plan.emulator,
            log_retention_days=plan.log_retention_days,
        )
        self.endpoint.grant_smoke_test(self.smoke.function)
        # The same checks inside the stack: a failure fails the deploy and CloudFormation rolls it back
        # (stacks/smoke_check.py), for every tool that deploys it.
        self.smoke_check = EndpointSmokeCheck(
            self,
            "SmokeCheck",
            endpoint=self.endpoint,
            environment=smoke_environment(
                endpoint_name=plan.endpoint_name,
                prompt=smoke.prompt,
                max_new_tokens=smoke.max_new_tokens,
                latency_budget_ms=smoke.latency_budget_ms,
                wake_budget_ms=smoke.wake_budget_ms,
                environment=smoke_settings,
                emulator=plan.emulator,
            ),
            budget_ms=max(smoke.latency_budget_ms, smoke.wake_budget_ms or 0),
            identities={
                "ArtifactHash": plan.artifact.content_hash,
                "AdapterHashes": {adapter.name: adapter.artifact.content_hash for adapter in plan.adapters},
            },
            log_retention_days=plan.log_retention_days,
        )
        # streaming: the function URL that streams tokens (stacks/streaming.py), in the created VPC like the invoke
        # function when the endpoint has one.
        self.stream: StreamingFrontDoor | None = None
        if plan.streaming.enabled:
            self.stream = StreamingFrontDoor(
                self,
                "Stream",
                endpoint=self.endpoint,
                streaming=plan.streaming,
                log_retention_days=plan.log_retention_days,
            )
            if self.network is not None:
                security.place_function(self.stream.function)

    def _add_slo(
        self,
        plan: EndpointPlan,
        *,
        bucket: str,
        bucket_key: BucketKeyRef | None,
        trusted_gate: TrustedPipeline | None,
    ) -> None:
        """slo: the pipeline's gate role, and SageMaker's managed benchmark (stacks/benchmark.py)."""
        self.slo_gate: SloGateRole | None = None
        if plan.slo is not None and trusted_gate is not None:
            self.slo_gate = SloGateRole(
                self,
                "SloGate",
                plan=plan,
                endpoint=self.endpoint,
                bucket_name=bucket,
                bucket_key=bucket_key,
                trusted_pipeline=trusted_gate,
            )
        self.managed_benchmark: ManagedBenchmark | None = None
        if plan.managed_benchmark is not None:
            self.managed_benchmark = ManagedBenchmark(
                self, "ManagedBenchmark", plan=plan, endpoint=self.endpoint, bucket_name=bucket, bucket_key=bucket_key
            )

    def _annotate(self, plan: EndpointPlan) -> None:
        """The plan's warnings and notes on this stack: an unsized model, several copies per instance, a legacy
        system."""
        if plan.unsized_warning:
            Annotations.of(self).add_warning_v2(UNSIZED_MODEL_WARNING_ID, plan.unsized_warning)
        if plan.model_copies > 1 and plan.component_name is None:  # components: SageMaker places the copies
            Annotations.of(self).add_info(
                f"endpoint {plan.name!r}: {plan.instance.gpu_count} GPUs of {plan.instance_type} at tensor_parallel_degree "
                f"{plan.tensor_parallel_degree}: each instance serves {plan.model_copies} copies of the model"
            )
        if plan.system.legacy:
            Annotations.of(self).add_warning_v2(
                "llm-endpoints:legacy-system",
                f"system {plan.system.name!r} is retired upstream and pinned to its last image; "
                f"the maintained replacement is {plan.system.replacement!r}",
            )

    def _add_outputs(self, plan: EndpointPlan) -> None:
        CfnOutput(self, "EndpointName", value=plan.endpoint_name)
        CfnOutput(self, "InvokeFunctionName", value=self.invoke.function.function_name)
        CfnOutput(self, "SmokeTestFunctionName", value=self.smoke.function.function_name)
        CfnOutput(self, "ModelDataUri", value=self.endpoint.model_data.s3_uri)
        if plan.component_name is not None:  # hosting.mode inference-components: callers name it too
            CfnOutput(self, "InferenceComponentName", value=plan.component_name)

    def _refuse_unbuilt(self, name: str) -> None:
        Annotations.of(self).add_warning_v2(
            "llm-endpoints:unbuilt-artifact",
            f"endpoint {name!r} has no built artifact: synthesized for review with a placeholder prefix; "
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
                        f"Endpoint {name} was synthesized with allow_unbuilt for review: it names no built "
                        "artifact. Build it (python -m model_build build) or pin artifact_hash, then synthesize again."
                    ),
                )
            ],
        )

    def _image(self, plan: EndpointPlan, image_repository: str) -> ContainerImage:
        """Our own image built from the repository, or the pinned AWS image (a region->registry mapping where the
        region is only known at deploy time)."""
        own = plan.own_container
        if own is not None and plan.emulator:
            # The emulator cannot publish a Docker image asset (no Docker engine) and never runs containers:
            # point at the environment's own repository with a tag named by the container's source hash
            # (CDK's own asset fingerprint with the asset's excludes: the hash a DockerImageAsset gets).
            fingerprint = FileSystem.fingerprint(str(REPO_ROOT), exclude=own.exclude)
            return ContainerImage(
                uri=f"{self.account}.dkr.ecr.{self.region}.{Aws.URL_SUFFIX}/{image_repository}:{plan.system.name}-{fingerprint[:16]}",
                repository_arn=self.format_arn(service="ecr", resource="repository", resource_name=image_repository),
            )
        if own is not None:
            asset = ecr_assets.DockerImageAsset(
                self,
                "Image",
                directory=str(REPO_ROOT),
                file=own.dockerfile,
                exclude=own.exclude,
                platform=ecr_assets.Platform.LINUX_AMD64,
            )
            return ContainerImage(uri=asset.image_uri, repository_arn=asset.repository.repository_arn)
        pin, tag = plan.image, plan.image_tag
        assert pin is not None and tag is not None  # ServingSystem: exactly one of image and own_container
        if not Token.is_unresolved(self.region):
            return ContainerImage(
                uri=pin.uri(self.region, gpu=plan.instance.is_gpu), repository_arn=pin.repository_arn(self.region)
            )
        mapping = CfnMapping(
            self,
            "ImageRegistries",
            mapping={region: {"account": pin.registry_account(region)} for region in pin.available_regions},
        )
        account = mapping.find_in_map(Aws.REGION, "account")
        uri = Fn.join("", [account, ".dkr.ecr.", Aws.REGION, ".", Aws.URL_SUFFIX, f"/{pin.repository}:{tag}"])
        arn = Fn.join("", ["arn:", Aws.PARTITION, ":ecr:", Aws.REGION, ":", account, f":repository/{pin.repository}"])
        return ContainerImage(uri=uri, repository_arn=arn)
