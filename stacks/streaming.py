"""The streaming front door of one endpoint: a Lambda function URL (RESPONSE_STREAM, AWS_IAM) whose function
(lambda/stream, code in endpoint_runtime/stream.py) calls InvokeEndpointWithResponseStream and passes the tokens on
as they come, through the AWS Lambda Web Adapter layer (pinned: ADAPTER_LAYER_VERSION, LAYER_REGIONS). Built by
EndpointStack when the endpoint's `streaming.enabled` is true.
Why a function URL and not API Gateway, and the adapter's pin with its sources: docs/design/front-doors.md.
"""

from __future__ import annotations

from aws_cdk import (
    Annotations,
    ArnFormat,
    CfnOutput,
    Duration,
    Stack,
    Token,
)
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from deployment.config_blocks import StreamingSpec

from .functions import PythonFunction
from .lambda_asset import LAMBDA_ROOT, function_code
from .llm_endpoint import LlmEndpoint

STREAM_CODE = LAMBDA_ROOT / "stream"
ADAPTER_ACCOUNT = "753240598075"
ADAPTER_LAYER_NAME = "LambdaAdapterLayerArm64"  # the function runs on arm64 (_PythonFunction)
ADAPTER_LAYER_VERSION = 25  # v0.9.1
# The regions the adapter release workflow lists with arm64_supported (v0.9.1 .github/workflows/prod.json; see
# docs/design/front-doors.md).
LAYER_REGIONS = tuple(
    "af-south-1 ap-east-1 ap-northeast-1 ap-northeast-2 ap-northeast-3 ap-south-1 ap-southeast-1 "
    "ap-southeast-2 ap-southeast-3 ca-central-1 eu-central-1 eu-north-1 eu-south-1 eu-west-1 eu-west-2 "
    "eu-west-3 me-south-1 sa-east-1 us-east-1 us-east-2 us-west-1 us-west-2".split()
)
# The synth warning of a public streaming URL (auth none).
PUBLIC_STREAM_WARNING_ID = "llm-endpoints:public-stream-url"
# The adapter's port and the server's readiness path (lambda/stream/app.py).
ADAPTER_PORT = "8080"
READY_PATH = "/_ready"
# The longest wait for the model's next part (at most 60 s), and the stream's deadline: both end a stream with an
# error line a few seconds before the function's own timeout (streaming.timeout_s) would cut it off unannounced.
READ_TIMEOUT_S = 60
DEADLINE_MARGIN_S = 5
# The start script (the handler) must be executable: the adapter's wrapper execs it.
_EXECUTABLE = {"stream/run.sh": STREAM_CODE / "run.sh"}


def adapter_layer_arn(stack: Stack, version: int = ADAPTER_LAYER_VERSION) -> str:
    """The Web Adapter layer's ARN in `stack`'s region (a token when the region is only known at deploy time).
    ValueError for a known region where version `version` of the arm64 layer is not published."""
    region = stack.region
    if not Token.is_unresolved(region) and region not in LAYER_REGIONS:
        raise ValueError(
            f"the AWS Lambda Web Adapter layer {ADAPTER_LAYER_NAME}:{version} that streaming needs is not published "
            f"in region {region}; regions: {', '.join(LAYER_REGIONS)}"
        )
    return stack.format_arn(
        service="lambda",
        account=ADAPTER_ACCOUNT,
        resource="layer",
        resource_name=f"{ADAPTER_LAYER_NAME}:{version}",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def stream_code() -> lambda_.Code:
    """What lambda/stream/app.py imports (stacks/lambda_asset.py) plus run.sh, executable."""
    return function_code(STREAM_CODE / "app.py", executable=_EXECUTABLE)


class StreamingFrontDoor(PythonFunction):
    """The function (lambda/stream behind the Web Adapter) and its function URL.

    Keyword-only props:
      endpoint: the endpoint it streams from; its role gets exactly `endpoint.grant_invoke` (InvokeEndpoint on that
        endpoint, which also authorizes InvokeEndpointWithResponseStream) plus its own log stream.
      streaming: the endpoint's `streaming:` block (must be enabled). auth "iam" -> AuthType AWS_IAM (the default);
        "none" -> AuthType NONE, which the config accepts only with acknowledge_unauthenticated and
        reserved_concurrency, and which synth warns about.
      log_retention_days: the function's log group retention.
      adapter_layer_version: the Web Adapter layer version (default ADAPTER_LAYER_VERSION, v0.9.1).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: LlmEndpoint,
        streaming: StreamingSpec,
        log_retention_days: int,
        adapter_layer_version: int = ADAPTER_LAYER_VERSION,
    ) -> None:
        if not streaming.enabled:
            raise ValueError("StreamingFrontDoor needs a streaming: block with enabled: true")
        if streaming.auth == "none" and not streaming.acknowledge_unauthenticated:
            raise ValueError("streaming auth 'none' needs acknowledge_unauthenticated: true")
        if streaming.auth == "none" and streaming.reserved_concurrency is None:
            raise ValueError("streaming auth 'none' needs reserved_concurrency: the public URL's only cap")
        super().__init__(
            scope,
            construct_id,
            code=stream_code(),
            handler="stream/run.sh",
            environment={
                # The adapter (awslabs/aws-lambda-web-adapter README, v0.9.1 "Configurations"): the wrapper that
                # starts the handler script, streaming mode (must match the URL's invoke mode), the server's port,
                # and a readiness path the server answers 200 on.
                "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
                "AWS_LWA_INVOKE_MODE": "response_stream",
                "AWS_LWA_PORT": ADAPTER_PORT,
                "AWS_LWA_READINESS_CHECK_PATH": READY_PATH,
                "ENDPOINT_NAME": endpoint.endpoint_name,
                # hosting.mode inference-components: the component the stream names (InferenceComponentName).
                **endpoint.target_environment,
                "READ_TIMEOUT_S": str(min(READ_TIMEOUT_S, streaming.timeout_s - 2 * DEADLINE_MARGIN_S)),
                "STREAM_DEADLINE_S": str(streaming.timeout_s - DEADLINE_MARGIN_S),
                # The limits the container enforces, as the invoke function gets them.
                **endpoint.request_limits,
            },
            timeout=Duration.seconds(streaming.timeout_s),
            description=f"Streams generated tokens from SageMaker endpoint {endpoint.endpoint_name}",
            log_retention_days=log_retention_days,
            reserved_concurrency=streaming.reserved_concurrency,
        )
        stack = Stack.of(self)
        self.function.add_layers(
            lambda_.LayerVersion.from_layer_version_arn(
                self, "WebAdapter", adapter_layer_arn(stack, adapter_layer_version)
            )
        )
        endpoint.grant_invoke(self.function)
        self.url = self.function.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.AWS_IAM
            if streaming.auth == "iam"
            else lambda_.FunctionUrlAuthType.NONE,
            invoke_mode=lambda_.InvokeMode.RESPONSE_STREAM,
        )
        CfnOutput(
            self,
            "Url",
            value=self.url.url,
            description="POST a generation request; signed with SigV4 (IAM)"
            if streaming.auth == "iam"
            else "POST a generation request (unauthenticated)",
        )
        if streaming.auth == "none":
            # Said where the reviewer of the template reads: the URL grants Principal * (lambda:InvokeFunctionUrl
            # with FunctionUrlAuthType NONE), so anyone who learns it generates on the endpoint.
            Annotations.of(self).add_warning_v2(
                PUBLIC_STREAM_WARNING_ID,
                f"endpoint {endpoint.endpoint_name}: the streaming function URL has auth 'none' (Principal *): anyone "
                f"who learns the URL generates on the endpoint at your cost, at most {streaming.reserved_concurrency} "
                "streams at once (reserved_concurrency); prefer auth: iam",
            )

    def grant_invoke_url(self, grantee: iam.IGrantable) -> iam.Grant:
        """What a caller needs with auth iam: lambda:InvokeFunctionUrl and, through the URL, lambda:InvokeFunction
        ("Starting in October 2025, new function URLs will require both", https://docs.aws.amazon.com/lambda/latest/
        dg/urls-auth.html); aws-cdk-lib's FunctionUrl.grant_invoke_url grants both."""
        return self.url.grant_invoke_url(grantee)


__all__ = [
    "ADAPTER_LAYER_VERSION",
    "LAYER_REGIONS",
    "PUBLIC_STREAM_WARNING_ID",
    "StreamingFrontDoor",
    "adapter_layer_arn",
    "stream_code",
]
