"""Drive the clients users already use against one local endpoint; run by .venv-clients' (or .venv-clients-sagemaker's)
python, never the project's: each client is the PyPI release requirements-clients*.txt pins, unchanged.

    python drive.py < spec.json    # prints one JSON line per call: {"call", "ok", "status", "error", "text"}

spec: url (the local runtime), endpoint, token (the OpenAI route's bearer token), region, native (the body the
system's container takes on /invocations), native_reply ("list", "object" or "chat": where the text is in its reply),
chat (an OpenAI chat body), clients ("main" or "sagemaker"). Credentials come from the environment (the emulator's,
testing/testing): every sagemaker-runtime call is SigV4-signed by the client's own code, as on AWS.
A call that has not answered within CALL_TIMEOUT_S is reported as hung (langchain-aws's LineIterator can spin on a
reply without a final newline: the review real-clients.md, section 1).
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


def _text_of(reply: Any, shape: str) -> str:
    """The generated text in a container's reply, read as that container documents it."""
    if shape == "list":
        return reply[0]["generated_text"]
    if shape == "object":
        return reply["generated_text"]
    if "choices" in reply and "text" in reply["choices"][0]:
        return reply["choices"][0]["text"]
    return reply["choices"][0]["message"]["content"] or ""


def _error_fields(err: BaseException) -> tuple[int | None, str]:
    """The HTTP status and message of a client's exception, whichever client raised it."""
    response = getattr(err, "response", None)
    if isinstance(response, dict) and "Error" in response:  # botocore ClientError (ModelError quotes the container)
        status = response.get("OriginalStatusCode") or response["ResponseMetadata"]["HTTPStatusCode"]
        message = response.get("OriginalMessage") or response["Error"].get("Message", "")
        return int(status), str(message)
    status = getattr(err, "status_code", None)
    if isinstance(status, int):  # openai.APIStatusError, litellm's exceptions
        body = getattr(err, "body", None)
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            return status, body["message"]
        return status, str(getattr(err, "message", err))
    found = re.search(r"\((\d{3})\)", str(err))  # a wrapped botocore error: "... error (400) when calling ..."
    return (int(found.group(1)) if found else None), str(err)


def main_clients(spec: dict[str, Any]) -> dict[str, Callable[[], str]]:
    import boto3
    import litellm
    from langchain_aws.chat_models.sagemaker_endpoint import ChatModelContentHandler, ChatSagemakerEndpoint
    from langchain_aws.llms.sagemaker_endpoint import LLMContentHandler, SagemakerEndpoint
    from langchain_core.messages import AIMessage
    from langchain_openai import ChatOpenAI
    from openai import OpenAI

    url, endpoint, region = spec["url"], spec["endpoint"], spec["region"]
    native, chat, shape = spec["native"], spec["chat"], spec["native_reply"]
    runtime = boto3.client("sagemaker-runtime", endpoint_url=url, region_name=region)
    route = f"{url}/endpoints/{endpoint}/openai/v1"
    words = chat["messages"][-1]["content"]

    def invoke(body: dict[str, Any], reply: str) -> str:
        answer = runtime.invoke_endpoint(EndpointName=endpoint, ContentType="application/json", Body=json.dumps(body))
        return _text_of(json.loads(answer["Body"].read()), reply)

    def stream(body: dict[str, Any]) -> str:
        answer = runtime.invoke_endpoint_with_response_stream(
            EndpointName=endpoint, ContentType="application/json", Body=json.dumps({**body, "stream": True})
        )
        return b"".join(event["PayloadPart"]["Bytes"] for event in answer["Body"] if "PayloadPart" in event).decode()

    class Native(LLMContentHandler):
        content_type = accepts = "application/json"

        def transform_input(self, prompt: str, model_kwargs: dict) -> bytes:
            if shape == "chat":
                return json.dumps({**chat, "messages": [{"role": "user", "content": prompt}]}).encode()
            return json.dumps({**native, "inputs": prompt}).encode()

        def transform_output(self, output: Any) -> str:
            return _text_of(json.loads(output.read()), shape)

    class Chat(ChatModelContentHandler):
        content_type = accepts = "application/json"

        def transform_input(self, prompt: Any, model_kwargs: dict) -> bytes:
            return json.dumps({**chat, "messages": prompt}).encode()

        def transform_output(self, output: Any) -> AIMessage:
            return AIMessage(content=_text_of(json.loads(output.read()), "chat"))

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
            choices = json.loads(line).get("choices") or [{}]
            return AIMessage(content=(choices[0].get("delta") or {}).get("content") or "")

    def openai_stream() -> str:
        client = OpenAI(base_url=route, api_key=spec["token"], max_retries=0)
        pieces = client.chat.completions.create(**{**chat, "model": ""}, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in pieces if c.choices)

    def chat_openai(streaming: bool) -> str:
        model = ChatOpenAI(
            base_url=route, api_key=spec["token"], model="", max_tokens=chat["max_tokens"], max_retries=0
        )
        if streaming:
            return "".join(str(chunk.content) for chunk in model.stream(words))
        return str(model.invoke(words).content)

    def litellm_call(model: str, streaming: bool = False, **extra: Any) -> str:
        reply = litellm.completion(
            model=model, messages=chat["messages"], max_tokens=chat["max_tokens"], stream=streaming, **extra
        )
        if streaming:
            return "".join(c.choices[0].delta.content or "" for c in reply if c.choices)
        return reply.choices[0].message.content or ""

    def llm() -> SagemakerEndpoint:
        return SagemakerEndpoint(endpoint_name=endpoint, client=runtime, content_handler=Native())

    def chat_sagemaker() -> ChatSagemakerEndpoint:
        return ChatSagemakerEndpoint(endpoint_name=endpoint, client=runtime, content_handler=Chat())

    invocations = f"{url}/endpoints/{endpoint}/invocations"
    return {
        "boto3 invoke_endpoint, the container's own body": lambda: invoke(native, shape),
        "boto3 invoke_endpoint, a chat body": lambda: invoke(chat, "chat"),
        "boto3 invoke_endpoint_with_response_stream, own body + stream": lambda: stream(native),
        "boto3 invoke_endpoint_with_response_stream, chat + stream": lambda: stream(chat),
        "langchain-aws SagemakerEndpoint invoke": lambda: llm().invoke(words),
        "langchain-aws ChatSagemakerEndpoint invoke": lambda: str(chat_sagemaker().invoke(words).content),
        "langchain-aws ChatSagemakerEndpoint stream": lambda: "".join(
            str(c.content)
            for c in ChatSagemakerEndpoint(endpoint_name=endpoint, client=runtime, content_handler=ChatStream()).stream(
                words
            )
        ),
        "LiteLLM sagemaker/ (sagemaker_base_url)": lambda: litellm_call(
            f"sagemaker/{endpoint}", aws_region_name=region, sagemaker_base_url=invocations
        ),
        "LiteLLM sagemaker_chat/ (sagemaker_base_url)": lambda: litellm_call(
            f"sagemaker_chat/{endpoint}", aws_region_name=region, sagemaker_base_url=invocations
        ),
        "LiteLLM openai/ on the OpenAI route": lambda: litellm_call("openai/", api_base=route, api_key=spec["token"]),
        "LiteLLM openai/ stream": lambda: litellm_call("openai/", True, api_base=route, api_key=spec["token"]),
        "LangChain ChatOpenAI invoke": lambda: chat_openai(False),
        "LangChain ChatOpenAI stream": lambda: chat_openai(True),
        "openai SDK chat.completions": lambda: (
            OpenAI(base_url=route, api_key=spec["token"], max_retries=0)
            .chat.completions.create(**{**chat, "model": ""})
            .choices[0]
            .message.content
            or ""
        ),
        "openai SDK chat.completions stream": openai_stream,
    }


def sagemaker_clients(spec: dict[str, Any]) -> dict[str, Callable[[], str]]:
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

    def stream() -> str:
        lines = predictor.predict_stream({**spec["native"], "stream": True}, iterator=LineIterator)
        return b"".join(line for line in lines).decode()

    return {
        "SageMaker SDK v2 Predictor.predict": lambda: _text_of(predictor.predict(spec["native"]), spec["native_reply"]),
        "SageMaker SDK v2 Predictor.predict_stream": stream,
    }


def main() -> int:
    spec = json.load(sys.stdin)
    calls = (sagemaker_clients if spec["clients"] == "sagemaker" else main_clients)(spec)
    signal.signal(signal.SIGALRM, _alarm)
    for name, call in calls.items():
        signal.alarm(CALL_TIMEOUT_S)
        try:
            text = call()
            result = {"call": name, "ok": bool(text), "status": 200, "error": None if text else "empty answer"}
        except Hung as err:
            result = {"call": name, "ok": False, "status": None, "error": f"hangs: {err}"}
        except Exception as err:
            traceback.print_exc(file=sys.stderr)
            status, message = _error_fields(err)
            result = {"call": name, "ok": False, "status": status, "error": f"{type(err).__name__}: {message}"}
        finally:
            signal.alarm(0)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
