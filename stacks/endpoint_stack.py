"""One stack per endpoint, so each deploys, updates and rolls back on its own."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Annotations, Aws, CfnMapping, CfnOutput, Fn, Stack, Token
from constructs import Construct

from endpoint_config import Deployment, EndpointSpec, artifact_bucket_name, artifact_prefix, parse_instance_type
from systems import ServingSystem
from systems.images import DLC_REGIONS

from .llm_endpoint import ContainerImage, InvokeFunction, LlmEndpoint, ModelData
from .model_artifact import ArtifactRef

INVOKE_CODE = Path(__file__).resolve().parent.parent / "lambda" / "invoke"


class EndpointStack(Stack):
    """Keyword-only props:
      deployment: the resolved environment (project, environment name, emulator flag).
      spec: this endpoint's validated config, environment overrides applied.
      system: the serving system named by `spec.system` (image, container environment, default timeouts).
      artifact: the built artifact's content hash, which names its S3 prefix.
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
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        endpoint_name = deployment.endpoint_name(spec)
        instance = parse_instance_type(spec.instance_type)

        model_data = ModelData(
            bucket_name=artifact_bucket_name(deployment.project, deployment.environment_name, Aws.ACCOUNT_ID, Aws.REGION),
            prefix=artifact_prefix(spec.name, artifact.content_hash),
            compressed=spec.model_data == "tar-gz",
        )
        self.endpoint = LlmEndpoint(
            self,
            "LlmEndpoint",
            endpoint_name=endpoint_name,
            spec=spec,
            image=self._image(system, instance.is_gpu),
            model_data=model_data,
            environment=system.environment(spec),
            download_timeout_s=system.download_timeout_s(spec),
            startup_timeout_s=system.startup_timeout_s(spec),
        )
        self.invoke = InvokeFunction(
            self, "Invoke", endpoint=self.endpoint, code_path=str(INVOKE_CODE), log_retention_days=spec.log_retention_days
        )

        if artifact.is_placeholder:
            Annotations.of(self).add_warning_v2(
                "llm-endpoints:unbuilt-artifact",
                f"endpoint {spec.name!r} has no built artifact: synthesized for review with a placeholder prefix; "
                "do not deploy this template",
            )
        if system.legacy:
            Annotations.of(self).add_warning_v2(
                "llm-endpoints:legacy-system",
                f"system {system.name!r} is retired upstream and pinned to its last image; "
                f"the maintained replacement is {system.replacement!r}",
            )

        CfnOutput(self, "EndpointName", value=endpoint_name)
        CfnOutput(self, "InvokeFunctionName", value=self.invoke.function.function_name)
        CfnOutput(self, "ModelDataUri", value=model_data.s3_uri)

    def _image(self, system: ServingSystem, gpu: bool) -> ContainerImage:
        """The pinned image URI; where the region is only known at deploy time, a region->registry mapping."""
        pin = system.image
        tag = pin.gpu_tag if gpu else pin.cpu_tag
        if tag is None:
            raise ValueError(f"system {system.name!r} offers no CPU image; choose a GPU instance type")
        if not Token.is_unresolved(self.region):
            return ContainerImage(uri=system.image.uri(self.region, gpu=gpu), repository_arn=pin.repository_arn(self.region))
        mapping = CfnMapping(
            self,
            "ImageRegistries",
            mapping={region: {"account": pin.registry_account(region)} for region in DLC_REGIONS},
        )
        account = mapping.find_in_map(Aws.REGION, "account")
        uri = Fn.join("", [account, ".dkr.ecr.", Aws.REGION, ".", Aws.URL_SUFFIX, f"/{pin.repository}:{tag}"])
        arn = Fn.join(
            "", ["arn:", Aws.PARTITION, ":ecr:", Aws.REGION, ":", account, f":repository/{pin.repository}"]
        )
        return ContainerImage(uri=uri, repository_arn=arn)
