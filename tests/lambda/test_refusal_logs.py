"""R3 of the 2026-11-27 reliability probe: the invoke function's log line quoted the refused value (up to 60
characters, prompt text included) although it promises never to log prompt text. Every front door logs through
endpoint_runtime.invoke.log_record, which now writes a 4xx refusal with its quoted values as "...". The caller's
own reply still names the value. The refusals here happen before any AWS call (the endpoint URL is unreachable)."""

from __future__ import annotations

import json

import pytest

from endpoint_runtime import invoke

SECRET = "my password is hunter2"


@pytest.fixture(autouse=True)
def _endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENDPOINT_NAME", "x")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # the chat variables the stack sets for an hf-fastload endpoint with chat (as the probe ran it)
    monkeypatch.setenv("CHAT_ROUTE", "handler")
    monkeypatch.setenv("CHAT_TOOL_CALLS", "true")
    monkeypatch.setenv("CHAT_CONSTRAINED_DECODING", "false")


def event(path: str, body: dict) -> dict:
    return {"rawPath": path, "requestContext": {"http": {"method": "POST"}}, "body": json.dumps(body)}


@pytest.mark.parametrize(
    "path, body",
    [
        ("/", {"inputs": "x", "parameters": {"max_new_tokens": SECRET}}),
        ("/v1/chat/completions", {"messages": SECRET}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "tools": SECRET}),
    ],
)
def test_a_refusal_is_logged_without_the_refused_value(capsys, path: str, body: dict) -> None:
    reply = invoke.handler(event(path, body))
    assert 400 <= reply["statusCode"] < 500
    assert "hunter2" in reply["body"]  # the caller's reply names what was refused
    [line] = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert line["status"] == reply["statusCode"] and line["error"]
    assert "hunter2" not in json.dumps(line), line


def test_quoted_values_go_and_the_rest_of_the_message_stays() -> None:
    message = 'parameters.max_new_tokens: must be an integer, got "my password is hunter2" (string)'
    assert invoke.without_quoted_values(message) == 'parameters.max_new_tokens: must be an integer, got "..." (string)'
    assert invoke.without_quoted_values("the endpoint's limit, got 'x'") == "the endpoint's limit, got '...'"
