"""Drive the clients users already use against one local endpoint; run by .venv-clients' (or .venv-clients-sagemaker's)
python, never the project's: each client is the PyPI release requirements-clients*.txt pins, unchanged.

    python drive.py main|sagemaker < specs.jsonl
    # per spec line: one JSON line per call ({"call", "ok", "status", "error", "text"}), then {"finished": true}

The argument picks the clients (main: boto3, langchain-aws, LiteLLM, LangChain, openai; sagemaker: the SageMaker SDK
v2, in its own venv). The process reads one system's spec per line until stdin closes, importing its clients once.

spec: url (the local runtime), endpoint, token (the OpenAI route's bearer token), region, native (the body the
system's container takes on /invocations: tests/real_clients.py builds it from the registry), native_kind (its
kind: generation, openai-completion or openai-chat), generation_reply ("list" or "object": how a generation reply
holds its text), reasoning_field (a chat message's reasoning field, or null), chat (an OpenAI chat body). Each
result also says what the call needs of the container ("needs": chat, stream) and holds the first characters of the
text read ("text"). Credentials come from the environment (the emulator's,
testing/testing): every sagemaker-runtime call is SigV4-signed by the client's own code, as on AWS. A call that has
not answered within CALL_TIMEOUT_S is reported as hung (langchain-aws's LineIterator can spin on a reply without a
final newline: the review real-clients.md, section 1).
"""

from __future__ import annotations

import json
import re
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

CALL_TIMEOUT_S = 45


class Hung(Exception):
    pass


def _alarm(*_: Any) -> None:
    raise Hung(f"no answer within {CALL_TIMEOUT_S} s")


def _text_of(reply: Any, kind: str, generation_reply: str = "list", reasoning_field: str | None = None) -> str:
    """The generated text in a container's reply to a body of `kind`, read as the system declares it."""
    if kind == "generation":
        return (reply[0] if generation_reply == "list" else reply)["generated_text"]
    choice = reply["choices"][0]
    if kind == "openai-completion":
        return choice["text"]
    message = choice["message"]
    reasoning = message.get(reasoning_field) if reasoning_field else None
    return (reasoning or "") + (message.get("content") or "")


def _with_prompt(body: dict[str, Any], kind: str, prompt: str) -> dict[str, Any]:
    """`body` (of `kind`) carrying `prompt` instead."""
    if kind == "generation":
        return {**body, "inputs": prompt}
    if kind == "openai-completion":
        return {**body, "prompt": prompt}
    return {**body, "messages": [{"role": "user", "content": prompt}]}


def _container_message(text: str) -> str:
    """The message in a container's error body ({"error": {"message"}}, {"error": "..."}), else the body."""
    try:
        body = json.loads(text)
    except ValueError:
        return text
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return error if isinstance(error, str) else text


def _error_fields(err: BaseException) -> tuple[int | None, str]:
    """The HTTP status and message of a client's exception, whichever client raised it."""
    response = getattr(err, "response", None)
    if isinstance(response, dict) and "Error" in response:  # botocore ClientError (ModelError quotes the container)
        status = response.get("OriginalStatusCode") or response["ResponseMetadata"]["HTTPStatusCode"]
        message = response.get("OriginalMessage") or response["Error"].get("Message", "")
        return int(status), _container_message(str(message))
    status = getattr(err, "status_code", None)
    if isinstance(status, int) and "'424 Failed Dependency'" in str(err):
        # LiteLLM reports the runtime's 424 ModelError (the container refused the body) as its own 503
        return 424, str(getattr(err, "message", err))
    if isinstance(status, int):  # openai.APIStatusError, litellm's exceptions
        body = getattr(err, "body", None)  # the openai SDK's: the reply's "error" where it has one, else the reply
        body = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(body, str):  # {"error": "..."} (DJL's handlers)
            return status, body
        for key in ("message", "detail"):  # OpenAI's error, FastAPI's {"detail"}
            if isinstance(body, dict) and isinstance(body.get(key), str):
                return status, f"{body[key]} ({status})" if key == "detail" else body[key]
        return status, str(getattr(err, "message", err))
    found = re.search(r"\((\d{3})\)", str(err))  # a wrapped botocore error: "... error (400) when calling ..."
    return (int(found.group(1)) if found else None), str(err)


Calls = dict[str, tuple[tuple[str, ...], Callable[[], str]]]  # call -> (what it needs of the container, the call)
CHAT, STREAM, CHAT_STREAM = ("chat",), ("stream",), ("chat", "stream")


def main_clients(spec: dict[str, Any]) -> Calls:
    import boto3
    import litellm
    from langchain_aws.chat_models.sagemaker_endpoint import ChatModelContentHandler, ChatSagemakerEndpoint
    from langchain_aws.llms.sagemaker_endpoint import LLMContentHandler, SagemakerEndpoint
    from langchain_core.messages import AIMessage
    from langchain_openai import ChatOpenAI
    from openai import OpenAI

    url, endpoint, region = spec["url"], spec["endpoint"], spec["region"]
    native, kind, chat = spec["native"], spec["native_kind"], spec["chat"]
    generation_reply, reasoning_field = spec["generation_reply"], spec["reasoning_field"]
    # The OpenAI fields every client below sends itself; the rest of the chat body (a reasoning model's thinking
    # switch) goes as the clients' extra body.
    messages, max_tokens = chat["messages"], chat["max_tokens"]
    extra = {key: value for key, value in chat.items() if key not in ("messages", "max_tokens")}
    runtime = boto3.client("sagemaker-runtime", endpoint_url=url, region_name=region)
    route = f"{url}/endpoints/{endpoint}/openai/v1"
    words = messages[-1]["content"]

    def read(reply: Any, body_kind: str) -> str:
        return _text_of(reply, body_kind, generation_reply, reasoning_field)

    def invoke(body: dict[str, Any], body_kind: str) -> str:
        answer = runtime.invoke_endpoint(EndpointName=endpoint, ContentType="application/json", Body=json.dumps(body))
        return read(json.loads(answer["Body"].read()), body_kind)

    def stream(body: dict[str, Any]) -> str:
        answer = runtime.invoke_endpoint_with_response_stream(
            EndpointName=endpoint, ContentType="application/json", Body=json.dumps({**body, "stream": True})
        )
        return b"".join(event["PayloadPart"]["Bytes"] for event in answer["Body"] if "PayloadPart" in event).decode()

    class Native(LLMContentHandler):
        content_type = accepts = "application/json"

        def transform_input(self, prompt: str, model_kwargs: dict) -> bytes:
            return json.dumps(_with_prompt(native, kind, prompt)).encode()

        def transform_output(self, output: Any) -> str:
            return read(json.loads(output.read()), kind)

    class Chat(ChatModelContentHandler):
        content_type = accepts = "application/json"

        def transform_input(self, prompt: Any, model_kwargs: dict) -> bytes:
            return json.dumps({**chat, "messages": prompt}).encode()

        def transform_output(self, output: Any) -> AIMessage:
            return AIMessage(content=read(json.loads(output.read()), "openai-chat"))

    class ChatStream(ChatModelContentHandler):
        """The streaming handler a user writes for an OpenAI-style container: "stream": true in the body, and each
        line is an SSE event ("data: {...}") or a JSON line, holding a chat.completion.chunk."""

        content_type = accepts = "application/json"

        def transform_input(self, prompt: Any, model_kwargs: dict) -> bytes:
            return json.dumps({**chat, "messages": prompt, "stream": True}).encode()

        def transform_output(self, output: Any) -> AIMessage:
            line = (output if isinstance(output, bytes) else output.read()).decode().strip()
            line = line.removeprefix("data:").strip()
            if not line or line == "[DONE]":
                return AIMessage(content="")
            delta = ((json.loads(line).get("choices") or [{}])[0].get("delta")) or {}
            return AIMessage(
                content=(delta.get(reasoning_field) if reasoning_field else "") or delta.get("content") or ""
            )

    def delta_text(delta: Any) -> str:
        """A streamed chunk's text: its content, or its reasoning where the engine separates it."""
        reasoning = (delta.model_extra or {}).get(reasoning_field) if reasoning_field else None
        return (reasoning or "") + (delta.content or "")

    def openai_client() -> Any:
        return OpenAI(base_url=route, api_key=spec["token"], max_retries=0)

    def openai_chat() -> str:
        reply = openai_client().chat.completions.create(
            model="", messages=messages, max_tokens=max_tokens, extra_body=extra or None
        )
        message = reply.choices[0].message
        reasoning = (message.model_extra or {}).get(reasoning_field) if reasoning_field else None
        return (reasoning or "") + (message.content or "")

    def openai_stream() -> str:
        pieces = openai_client().chat.completions.create(
            model="", messages=messages, max_tokens=max_tokens, stream=True, extra_body=extra or None
        )
        return "".join(delta_text(c.choices[0].delta) for c in pieces if c.choices)

    def chat_openai(streaming: bool) -> str:
        model = ChatOpenAI(
            base_url=route,
            api_key=spec["token"],
            model="",
            max_tokens=max_tokens,
            max_retries=0,
            extra_body=extra or None,
        )
        if streaming:
            return "".join(str(chunk.content) for chunk in model.stream(words))
        return str(model.invoke(words).content)

    def litellm_call(model: str, streaming: bool = False, **settings: Any) -> str:
        if extra:
            settings["extra_body"] = extra
        reply = litellm.completion(model=model, messages=messages, max_tokens=max_tokens, stream=streaming, **settings)
        if streaming:
            return "".join(c.choices[0].delta.content or "" for c in reply if c.choices)
        message = reply.choices[0].message
        return (getattr(message, "reasoning_content", None) or "") + (message.content or "")

    def llm() -> SagemakerEndpoint:
        return SagemakerEndpoint(endpoint_name=endpoint, client=runtime, content_handler=Native())

    def chat_sagemaker(handler: ChatModelContentHandler) -> ChatSagemakerEndpoint:
        return ChatSagemakerEndpoint(endpoint_name=endpoint, client=runtime, content_handler=handler)

    invocations = f"{url}/endpoints/{endpoint}/invocations"
    return {
        "boto3 invoke_endpoint, the container's own body": ((), lambda: invoke(native, kind)),
        "boto3 invoke_endpoint, a chat body": (CHAT, lambda: invoke(chat, "openai-chat")),
        "boto3 invoke_endpoint_with_response_stream, own body + stream": (STREAM, lambda: stream(native)),
        "boto3 invoke_endpoint_with_response_stream, chat + stream": (CHAT_STREAM, lambda: stream(chat)),
        "langchain-aws SagemakerEndpoint invoke": ((), lambda: llm().invoke(words)),
        "langchain-aws ChatSagemakerEndpoint invoke": (
            CHAT,
            lambda: str(chat_sagemaker(Chat()).invoke(words).content),
        ),
        "langchain-aws ChatSagemakerEndpoint stream": (
            CHAT_STREAM,
            lambda: "".join(str(c.content) for c in chat_sagemaker(ChatStream()).stream(words)),
        ),
        # LiteLLM's sagemaker/ sends a TGI body {"inputs", "parameters"} whatever the container takes.
        "LiteLLM sagemaker/ (sagemaker_base_url)": (
            (),
            lambda: litellm_call(f"sagemaker/{endpoint}", aws_region_name=region, sagemaker_base_url=invocations),
        ),
        "LiteLLM sagemaker_chat/ (sagemaker_base_url)": (
            CHAT,
            lambda: litellm_call(f"sagemaker_chat/{endpoint}", aws_region_name=region, sagemaker_base_url=invocations),
        ),
        "LiteLLM openai/ on the OpenAI route": (
            CHAT,
            lambda: litellm_call("openai/", api_base=route, api_key=spec["token"]),
        ),
        "LiteLLM openai/ stream": (
            CHAT_STREAM,
            lambda: litellm_call("openai/", True, api_base=route, api_key=spec["token"]),
        ),
        "LangChain ChatOpenAI invoke": (CHAT, lambda: chat_openai(False)),
        "LangChain ChatOpenAI stream": (CHAT_STREAM, lambda: chat_openai(True)),
        "openai SDK chat.completions": (CHAT, openai_chat),
        "openai SDK chat.completions stream": (CHAT_STREAM, openai_stream),
    }


def sagemaker_clients(spec: dict[str, Any]) -> Calls:
    """The SageMaker Python SDK v2's Predictor (its own venv: sagemaker 2.x pins importlib-metadata<7, LiteLLM >=8)."""
    import boto3
    import sagemaker
    from sagemaker.deserializers import JSONDeserializer
    from sagemaker.iterators import LineIterator
    from sagemaker.predictor import Predictor
    from sagemaker.serializers import JSONSerializer

    boto_session = boto3.Session(region_name=spec["region"])
    runtime = boto_session.client("sagemaker-runtime", endpoint_url=spec["url"])
    session = sagemaker.Session(boto_session=boto_session, sagemaker_runtime_client=runtime)
    predictor = Predictor(
        spec["endpoint"], sagemaker_session=session, serializer=JSONSerializer(), deserializer=JSONDeserializer()
    )

    def predict() -> str:
        reply = predictor.predict(spec["native"])
        return _text_of(reply, spec["native_kind"], spec["generation_reply"], spec["reasoning_field"])

    def stream() -> str:
        lines = predictor.predict_stream({**spec["native"], "stream": True}, iterator=LineIterator)
        return b"".join(line for line in lines).decode()

    return {
        "SageMaker SDK v2 Predictor.predict": ((), predict),
        "SageMaker SDK v2 Predictor.predict_stream": (STREAM, stream),
    }


def run(spec: dict[str, Any], clients: str) -> None:
    """Every call of `clients` against one system's endpoint: a JSON line per call, then {"finished": true}."""
    calls = (sagemaker_clients if clients == "sagemaker" else main_clients)(spec)
    for name, (needs, call) in calls.items():
        signal.alarm(CALL_TIMEOUT_S)
        try:
            text = call()
            # A whole reply read from its declared field is an answer even when the tiny model's text is empty; a
            # stream that yields no text at all is a stream the client could not read.
            ok = isinstance(text, str) and (bool(text) or "stream" not in needs)
            result = {
                "call": name,
                "ok": ok,
                "status": 200,
                "error": None if ok else "no text read",
                "text": str(text)[:80],
            }
        except Hung as err:
            result = {"call": name, "ok": False, "status": None, "error": f"hangs: {err}"}
        except Exception as err:
            traceback.print_exc(file=sys.stderr)
            status, message = _error_fields(err)
            result = {"call": name, "ok": False, "status": status, "error": f"{type(err).__name__}: {message}"}
        finally:
            signal.alarm(0)
        print(json.dumps({**result, "needs": list(needs)}), flush=True)
    print(json.dumps({"finished": True}), flush=True)


def main() -> int:
    """drive.py main|sagemaker: one system's spec per line of stdin, until it closes (the clients are imported
    once, by the first spec)."""
    signal.signal(signal.SIGALRM, _alarm)
    for line in sys.stdin:
        if line.strip():
            run(json.loads(line), sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
