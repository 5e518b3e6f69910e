"""The local runtime refuses what SageMaker refuses (local_runtime/sigv4.py, invoke_rules.py): unsigned and
wrong-region calls, bodies over the service model's Body max, answers past the invoke limit, unknown variants and
components, headers of endpoint kinds this project never deploys; it routes a component on every door and passes the
container's content type and custom attributes through. Real boto3 clients over real sockets; the containers are
the tiny GPT-2 artifact's handler (hf-fastload: no streaming) and a small echo container process."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import botocore.session
import httpx
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from helpers import running

from local_runtime import invoke_rules, sigv4
from local_runtime.process import ContainerHost, ProcessContainer, base_environment

ENDPOINT = "tiny-gpt2"
GENERATION = json.dumps({"inputs": "Hello", "parameters": {"max_new_tokens": 3}})


def runtime(url: str, **overrides: Any) -> Any:
    """A sagemaker-runtime client as the demo makes one: the emulator's credentials and region."""
    settings: dict[str, Any] = {
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
        **overrides,
    }
    config = settings.pop("config", Config(retries={"total_max_attempts": 1}))
    return boto3.client("sagemaker-runtime", endpoint_url=url, config=config, **settings)


@pytest.fixture(scope="module")
def server_url(gpt2_artifact: Path) -> Iterator[str]:
    from local_runtime.serve import create_app

    with running(create_app(gpt2_artifact, endpoint_name=ENDPOINT), timeout=60) as url:
        yield url


def _error(err: pytest.ExceptionInfo) -> tuple[int, str, str]:
    response = err.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"], response["Error"]["Message"]


def _both_doors(client: Any, **kwargs: Any) -> list[pytest.ExceptionInfo]:
    """InvokeEndpoint and InvokeEndpointWithResponseStream with the same arguments, each expected to be refused."""
    errors = []
    for call in (client.invoke_endpoint, client.invoke_endpoint_with_response_stream):
        with pytest.raises(botocore.exceptions.ClientError) as err:
            call(EndpointName=ENDPOINT, ContentType="application/json", Body=GENERATION, **kwargs)
        errors.append(err)
    return errors


# ------------------------------------------------------------------------------------------------- SigV4


def test_the_emulators_credentials_and_region_are_the_ones_the_check_knows() -> None:
    from local_emulator import moto_server

    environment = moto_server.Emulator(port=0, process=None, log_path=Path("unused")).client_env()  # type: ignore[arg-type]
    assert sigv4.LOCAL_REGION == moto_server.EMULATOR_REGION == environment["AWS_DEFAULT_REGION"]
    assert sigv4.LOCAL_CREDENTIALS == {environment["AWS_ACCESS_KEY_ID"]: environment["AWS_SECRET_ACCESS_KEY"]}


def test_an_unsigned_call_is_refused_on_both_doors(server_url: str) -> None:
    for err in _both_doors(runtime(server_url, config=Config(signature_version=UNSIGNED))):
        assert _error(err) == (403, "MissingAuthenticationTokenException", "Missing Authentication Token")


def test_a_call_signed_for_another_region_is_refused(server_url: str) -> None:
    for err in _both_doors(runtime(server_url, region_name="eu-west-1")):
        status, code, message = _error(err)
        assert (status, code) == (403, "InvalidSignatureException")
        assert "Credential should be scoped to a valid region" in message and "eu-west-1" in message


def test_a_wrong_secret_or_an_unknown_key_is_refused(server_url: str) -> None:
    for err in _both_doors(runtime(server_url, aws_secret_access_key="not-the-secret")):
        status, code, message = _error(err)
        assert (status, code) == (403, "InvalidSignatureException") and "signature we calculated" in message
    for err in _both_doors(runtime(server_url, aws_access_key_id="AKIAIOSFODNN7EXAMPLE")):
        assert _error(err)[:2] == (403, "UnrecognizedClientException")


def test_a_body_changed_after_signing_is_refused(server_url: str) -> None:
    url = f"{server_url}/endpoints/{ENDPOINT}/invocations"
    headers = sigv4.sign("POST", url, GENERATION.encode(), {"Content-Type": "application/json"})
    tampered = GENERATION.replace("Hello", "Hullo").encode()
    reply = httpx.post(url, content=tampered, headers=headers, timeout=30)
    assert reply.status_code == 403 and reply.headers["x-amzn-errortype"] == "InvalidSignatureException"
    reply = httpx.post(url, content=GENERATION.encode(), headers=headers, timeout=30)
    assert reply.status_code == 200, reply.text  # the same signature over the bytes it was made for


def test_a_signature_older_than_five_minutes_is_expired() -> None:
    url = "http://127.0.0.1:1/endpoints/e/invocations"
    headers = sigv4.sign("POST", url, b"{}")
    later = datetime.now(timezone.utc) + timedelta(minutes=6)
    problem = sigv4.check_signature(
        "POST", "/endpoints/e/invocations", "", list(headers.items()), b"{}", "us-east-1", now=later
    )
    assert problem is not None and problem.code == "InvalidSignatureException"
    assert problem.message.startswith("Signature expired")
    assert (
        sigv4.check_signature("POST", "/endpoints/e/invocations", "", list(headers.items()), b"{}", "us-east-1") is None
    )


def test_the_container_path_and_the_ping_take_no_signature(server_url: str) -> None:
    """SageMaker calls the container's own routes from inside the instance, unsigned."""
    assert httpx.get(f"{server_url}/ping").status_code == 200
    reply = httpx.post(f"{server_url}/invocations", content=GENERATION, headers={"Content-Type": "application/json"})
    assert reply.status_code == 200


# ------------------------------------------------------------------------------------------------- limits


def test_the_body_limit_is_the_service_models() -> None:
    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    for operation in ("InvokeEndpoint", "InvokeEndpointWithResponseStream"):
        assert (
            model.operation_model(operation).input_shape.members["Body"].metadata["max"] == invoke_rules.MAX_BODY_BYTES
        )


def test_a_body_over_the_limit_is_413_and_one_at_the_limit_reaches_the_container(server_url: str) -> None:
    client = runtime(server_url)
    over = b"x" * (invoke_rules.MAX_BODY_BYTES + 1)
    for call in (client.invoke_endpoint, client.invoke_endpoint_with_response_stream):
        with pytest.raises(botocore.exceptions.ClientError) as err:
            call(EndpointName=ENDPOINT, ContentType="application/json", Body=over)
        status, code, message = _error(err)
        assert (status, code) == (413, "413") and message == invoke_rules.BODY_TOO_LARGE_MESSAGE
    with pytest.raises(client.exceptions.ModelError) as err:  # the handler's refusal: it passed the limit
        client.invoke_endpoint(
            EndpointName=ENDPOINT, ContentType="application/json", Body=b"x" * invoke_rules.MAX_BODY_BYTES
        )
    assert err.value.response["OriginalStatusCode"] == 400


SLOW_HANDLER = textwrap.dedent(
    """
    import time

    def model_fn(model_dir):
        return {}

    def input_fn(body, content_type):
        return body

    def predict_fn(data, model):
        time.sleep(3)
        return data

    def output_fn(prediction, accept):
        return prediction
    """
)


def test_an_answer_past_the_invoke_limit_is_sagemakers_timeout_model_error(tmp_path: Path) -> None:
    from local_runtime.serve import create_app

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "inference.py").write_text(SLOW_HANDLER)
    with running(create_app(tmp_path, endpoint_name="slow", invoke_timeout_s=0.5)) as url:
        client = runtime(url)
        for call in (client.invoke_endpoint, client.invoke_endpoint_with_response_stream):
            with pytest.raises(client.exceptions.ModelError) as err:
                call(EndpointName="slow", ContentType="application/json", Body=b"{}")
            response = err.value.response
            assert response["OriginalStatusCode"] == 0
            assert response["OriginalMessage"] == invoke_rules.TIMED_OUT_MESSAGE
            assert "Received server error (0) from primary" in response["Error"]["Message"]


# ------------------------------------------------------------------------------------------------- names


def test_an_unknown_variant_is_a_validation_error_and_all_traffic_is_served(server_url: str) -> None:
    from stacks.llm_endpoint import VARIANT_NAME

    assert invoke_rules.VARIANT_NAME == VARIANT_NAME
    client = runtime(server_url)
    for err in _both_doors(client, TargetVariant="no-such-variant"):
        status, code, message = _error(err)
        assert (status, code) == (400, "ValidationError") and "no-such-variant" in message
    reply = client.invoke_endpoint(
        EndpointName=ENDPOINT, ContentType="application/json", Body=GENERATION, TargetVariant=VARIANT_NAME
    )
    assert reply["InvokedProductionVariant"] == VARIANT_NAME


def test_a_component_on_an_endpoint_without_components_is_refused(server_url: str) -> None:
    for err in _both_doors(runtime(server_url), InferenceComponentName="no-such-component"):
        assert _error(err) == (400, "ValidationError", invoke_rules.component_not_found("no-such-component"))


@pytest.mark.parametrize(
    "field, value, fragment",
    [
        ("TargetContainerHostname", "c1", "is not a multi-container endpoint"),
        ("SessionId", "NEW_SESSION", "has no stateful sessions"),
    ],
)
def test_fields_of_endpoint_kinds_never_deployed_here_are_refused(server_url: str, field, value, fragment) -> None:
    for err in _both_doors(runtime(server_url), **{field: value}):
        status, code, message = _error(err)
        assert (status, code) == (400, "ValidationError") and fragment in message


def test_target_model_is_refused_in_sagemakers_words(server_url: str) -> None:
    with pytest.raises(botocore.exceptions.ClientError) as err:
        runtime(server_url).invoke_endpoint(
            EndpointName=ENDPOINT, ContentType="application/json", Body=GENERATION, TargetModel="m.tar.gz"
        )
    assert _error(err) == (
        400,
        "ValidationError",
        f"Endpoint {ENDPOINT} is not a multi-model endpoint and does not support target model header.",
    )


def test_every_field_of_the_invoke_operations_is_in_the_table() -> None:
    """botocore's model lists the fields; invoke_rules.FIELDS says how each is treated. A field botocore adds (or
    drops) fails here until the table says what the local runtime does with it."""
    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    for operation in ("InvokeEndpoint", "InvokeEndpointWithResponseStream", "InvokeEndpointAsync"):
        members = set(model.operation_model(operation).input_shape.members)
        assert set(invoke_rules.FIELDS[operation]) == members, (
            operation,
            members ^ set(invoke_rules.FIELDS[operation]),
        )
        for field, treatment in invoke_rules.FIELDS[operation].items():
            assert treatment.split(":")[0] in ("checked", "passed", "ignored", "not served"), (operation, field)
    refused = {
        model.operation_model("InvokeEndpoint").input_shape.members[name].serialization["name"].lower()
        for name, treatment in invoke_rules.FIELDS["InvokeEndpoint"].items()
        if "refused, the endpoint" in treatment
    }
    assert refused == set(invoke_rules.REFUSED_HEADERS)


# ------------------------------------------------------------------------------------------------- hf-fastload


def test_hf_fastloads_response_stream_is_its_whole_reply_in_one_part(server_url: str) -> None:
    """The Hugging Face toolkit answers /invocations whole: InvokeEndpointWithResponseStream gets one PayloadPart
    with the same JSON document InvokeEndpoint gets, labelled with its content type."""
    client = runtime(server_url)
    reply = client.invoke_endpoint_with_response_stream(
        EndpointName=ENDPOINT, ContentType="application/json", Body=GENERATION
    )
    parts = [event["PayloadPart"]["Bytes"] for event in reply["Body"]]
    assert len(parts) == 1 and reply["ContentType"] == "application/json"
    document = json.loads(parts[0])
    assert isinstance(document, list) and isinstance(document[0]["generated_text"], str)


def test_hf_fastload_refuses_a_stream_request_on_every_door(server_url: str) -> None:
    """A body asking to stream reaches the handler's /invocations, which refuses it (400), as on AWS."""
    client = runtime(server_url)
    body = json.dumps({"inputs": "Hello", "parameters": {"max_new_tokens": 3}, "stream": True})
    for call in (client.invoke_endpoint, client.invoke_endpoint_with_response_stream):
        with pytest.raises(client.exceptions.ModelError) as err:
            call(EndpointName=ENDPOINT, ContentType="application/json", Body=body)
        assert err.value.response["OriginalStatusCode"] == 400 and "stream" in err.value.response["OriginalMessage"]


# ------------------------------------------------------------------------------------------------- pass-through

ECHO_SERVER = textwrap.dedent(
    """
    import json, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Echo(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen = {k.lower(): v for k, v in self.headers.items()}
            data = json.dumps({"path": self.path, "headers": seen, "body": body.decode()}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/csv")
            attributes = self.headers.get("X-Amzn-SageMaker-Custom-Attributes")
            if attributes:
                self.send_header("X-Amzn-SageMaker-Custom-Attributes", attributes + ";echoed")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Echo).serve_forever()
    """
)


class EchoContainer(ProcessContainer):
    """A container process that answers every POST with what it received (path, headers, body) as text/csv."""

    engine = "echo"

    def preflight(self) -> None:
        pass

    def argv(self) -> list[str]:
        return [sys.executable, "-c", ECHO_SERVER, str(self.port)]

    def environment(self, home: Path) -> dict[str, str]:
        return base_environment(home, "/usr/bin:/bin")

    def answered_by(self) -> str:
        return "echo"

    def load_adapter(self, name: str, src: Path) -> tuple[int, str]:
        return 200, f"adapter {name} loaded"


@pytest.fixture(scope="module")
def echo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from local_runtime.serve import create_app

    work = tmp_path_factory.mktemp("echo")
    host = ContainerHost(EchoContainer(work, work, ready_timeout_s=30), {"ic-adapter": work})
    app = create_app(work, endpoint_name="echo", component_name="ic-base", container_host=host)
    with running(app, timeout=60) as url:
        yield url


def _echoed(payload: bytes) -> dict[str, Any]:
    return json.loads(payload)


def test_the_containers_content_type_and_custom_attributes_come_back(echo_url: str) -> None:
    client = runtime(echo_url)
    reply = client.invoke_endpoint(
        EndpointName="echo",
        InferenceComponentName="ic-base",
        ContentType="application/json",
        Accept="text/csv",
        CustomAttributes="accept_eula=true",
        Body=b"{}",
    )
    assert reply["ContentType"] == "text/csv" and reply["CustomAttributes"] == "accept_eula=true;echoed"
    seen = _echoed(reply["Body"].read())["headers"]
    assert seen["accept"] == "text/csv" and seen["x-amzn-sagemaker-custom-attributes"] == "accept_eula=true"
    streamed = client.invoke_endpoint_with_response_stream(
        EndpointName="echo",
        InferenceComponentName="ic-base",
        ContentType="application/json",
        Accept="text/csv",
        CustomAttributes="a=1",
        Body=b"{}",
    )
    assert streamed["ContentType"] == "text/csv" and streamed["CustomAttributes"] == "a=1;echoed"
    seen = _echoed(b"".join(e["PayloadPart"]["Bytes"] for e in streamed["Body"]))["headers"]
    assert seen["accept"] == "text/csv"  # X-Amzn-SageMaker-Accept reaches the container as Accept


def test_a_components_endpoint_requires_a_known_component(echo_url: str) -> None:
    client = runtime(echo_url)
    for call in (client.invoke_endpoint, client.invoke_endpoint_with_response_stream):
        with pytest.raises(botocore.exceptions.ClientError) as err:
            call(EndpointName="echo", ContentType="application/json", Body=b"{}")
        assert _error(err) == (400, "ValidationError", invoke_rules.COMPONENT_REQUIRED_MESSAGE)
        with pytest.raises(botocore.exceptions.ClientError) as err:
            call(EndpointName="echo", ContentType="application/json", Body=b"{}", InferenceComponentName="nope")
        assert _error(err) == (400, "ValidationError", invoke_rules.component_not_found("nope"))


def test_an_adapter_component_is_routed_on_every_door(echo_url: str) -> None:
    """InvokeEndpoint, the response stream and the OpenAI route each hand the adapter component's name to the
    container (the adapter header), and the base component's calls carry none."""
    from sagemaker.core.token_generator import generate_token

    from local_runtime.process import ADAPTER_HEADER

    client = runtime(echo_url)
    header = ADAPTER_HEADER.lower()
    for component, adapter in (("ic-adapter", "ic-adapter"), ("ic-base", None)):
        reply = client.invoke_endpoint(
            EndpointName="echo", InferenceComponentName=component, ContentType="application/json", Body=b"{}"
        )
        assert _echoed(reply["Body"].read())["headers"].get(header) == adapter, component
        streamed = client.invoke_endpoint_with_response_stream(
            EndpointName="echo", InferenceComponentName=component, ContentType="application/json", Body=b"{}"
        )
        echoed = _echoed(b"".join(e["PayloadPart"]["Bytes"] for e in streamed["Body"]))
        assert echoed["headers"].get(header) == adapter, component
    with pytest.MonkeyPatch.context() as patch:
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            patch.setenv(key, "testing")
        token = generate_token(region="us-east-1")
    route = f"{echo_url}/endpoints/echo/inference-components/ic-adapter/openai/v1/chat/completions"
    reply = httpx.post(route, json={"messages": []}, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/csv")
    assert reply.json()["headers"][header] == "ic-adapter" and reply.json()["path"] == "/invocations"
    unknown = route.replace("ic-adapter", "nope")
    reply = httpx.post(unknown, json={"messages": []}, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert reply.status_code == 400 and reply.headers["x-amzn-errortype"] == "ValidationError"
