"""Engines review E2: SGLang (the sglang system, whose generation route sends a one-message chat) separates a
reasoning model's thinking into `reasoning_content` and answers `content: ""` (or null) when the thinking used the
token budget, so the generation answer was "". The generation answer now holds the reasoning, then the content, as
a completion would (docs/design/container-bodies.md), for the reply shapes of SGLang 0.5.20's serving_chat.py."""

from __future__ import annotations

import pytest

from endpoint_runtime import bodies
from systems import get_system

SGLANG = get_system("sglang")
FIELD = SGLANG.bodies.reasoning_field


def _reply(**message) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "length"}]}


def test_the_sglang_system_reads_its_reasoning_field():
    assert FIELD == "reasoning_content"


@pytest.mark.parametrize(
    "message, text",
    [
        (
            {"content": "", FIELD: "Okay, the user asks about France. The capital"},
            "Okay, the user asks about France. The capital",
        ),
        ({"content": None, FIELD: "Okay, the user"}, "Okay, the user"),
        ({"content": "Paris.", FIELD: "France's capital is Paris. "}, "France's capital is Paris. Paris."),
        ({"content": "Paris."}, "Paris."),
        ({"content": "Paris.", FIELD: None}, "Paris."),
    ],
)
def test_a_chat_reply_reads_as_its_reasoning_then_its_content(message, text):
    assert bodies.generation_outputs("openai-chat", _reply(**message), FIELD) == [{"generated_text": text}]


def test_without_a_reasoning_field_only_the_content_counts():
    reply = _reply(content="Paris.", reasoning_content="thinking")
    assert bodies.generation_outputs("openai-chat", reply, None) == [{"generated_text": "Paris."}]
    with pytest.raises(ValueError, match="holds no text"):
        bodies.generation_outputs("openai-chat", _reply(content=None), None)
