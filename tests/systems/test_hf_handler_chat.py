"""The hf-fastload handler's chat path, called directly on a built tiny Llama with a hermes-style chat template:
the prompt is the template's, replies are chat.completion objects the openai package reads, streaming gives the
same text as the whole reply, tool calls are read from what the model generates, and refusals are ChatErrors.

Random weights cannot choose a tool, so for the tool-call tests the model's generate is scripted to emit a hermes
tool call (ScriptedLM): everything after generate (decoding with the tool tokens kept, cutting at the end of
sequence, the parser, the reply) is the handler's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chat_cases import CALL, OK, USER, WEATHER, body

import chat_contract
from systems.hf_fastload.handler import inference as handler


@pytest.fixture(scope="module")
def loaded(chat_artifact: Path) -> dict:
    return handler.model_fn(str(chat_artifact))


def reply(loaded: dict, data: dict) -> dict:
    from openai.types.chat import ChatCompletion

    out = handler.predict_fn(handler.input_fn(json.dumps(data).encode(), "application/json"), loaded)
    ChatCompletion.model_validate(out)  # the SDK's own model reads it
    return out


def streamed(loaded: dict, data: dict) -> list[dict]:
    from openai.types.chat import ChatCompletionChunk

    raw = b"".join(handler.stream_fn({**data, "stream": True}, loaded)).decode()
    assert raw.endswith("data: [DONE]\n\n")
    chunks = [json.loads(e[len("data: ") :]) for e in raw.split("\n\n") if e and e != "data: [DONE]"]
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    return chunks


def test_manifest_says_the_template_came_from_the_tokenizer(chat_artifact: Path) -> None:
    manifest = json.loads((chat_artifact / "manifest.json").read_text())
    assert manifest["chat_template"] == "tokenizer"
    assert (chat_artifact / "code" / "chat_contract.py").read_bytes() == Path(chat_contract.__file__).read_bytes()


def test_the_prompt_is_the_chat_template_rendering(loaded: dict) -> None:
    request = chat_contract.parse_chat_request(
        body(
            tools=[WEATHER],
            messages=[
                {"role": "system", "content": "Be brief."},
                USER,
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
            ],
            chat_template_kwargs={"enable_thinking": False},
        )
    )
    ids = handler.chat_prompt(loaded, request)["input_ids"][0].tolist()
    text = loaded["tokenizer"].decode(ids)
    assert text.startswith("<|im_start|>system\nBe brief.\n\nYou may call functions.")
    assert '{"type": "function", "function": {"name": "get_weather"' in text  # the tools, rendered
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    assert "<tool_response>\nsunny\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # enable_thinking reached the template


def test_a_greedy_reply(loaded: dict) -> None:
    out = reply(loaded, body(max_tokens=6, temperature=0))
    choice = out["choices"][0]
    assert out["object"] == "chat.completion" and out["model"] == "tiny" and out["id"].startswith("chatcmpl-")
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    prompt = handler.chat_prompt(loaded, chat_contract.parse_chat_request(OK))["input_ids"].shape[1]
    assert out["usage"]["prompt_tokens"] == prompt
    assert (choice["finish_reason"], out["usage"]["completion_tokens"]) == ("length", 6)
    assert reply(loaded, body(max_tokens=6, temperature=0))["choices"][0]["message"] == choice["message"]
    assert (
        reply(loaded, {"messages": [USER], "max_tokens": 1})["model"] == "tiny-chat"
    )  # no model asked: the endpoint's


def test_sampling_with_a_seed_is_reproducible(loaded: dict) -> None:
    first = reply(loaded, body(max_tokens=8, temperature=1.5, top_p=0.9, seed=3))["choices"][0]["message"]["content"]
    assert (
        reply(loaded, body(max_tokens=8, temperature=1.5, top_p=0.9, seed=3))["choices"][0]["message"]["content"]
        == first
    )


def test_a_stop_sequence_cuts_the_reply(loaded: dict) -> None:
    text = reply(loaded, body(max_tokens=24, temperature=0))["choices"][0]["message"]["content"]
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    out = reply(loaded, body(max_tokens=24, temperature=0, stop=[stop]))
    assert out["choices"][0]["message"]["content"] == text[: text.find(stop)]
    assert out["choices"][0]["finish_reason"] == "stop" and out["usage"]["completion_tokens"] < 24


def test_the_stream_gives_the_whole_replys_text(loaded: dict) -> None:
    data = body(max_tokens=12, temperature=0, stream_options={"include_usage": True})
    whole = reply(loaded, body(max_tokens=12, temperature=0))
    chunks = streamed(loaded, data)
    assert (
        "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        == whole["choices"][0]["message"]["content"]
    )
    assert chunks[-2]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]


# ---- tool calls on the handler's path: generate scripted, the rest the handler's -----------------------------


class ScriptedLM:
    """Stands in for the model's generate: answers `text` (tokenized by the artifact's tokenizer, then the end of
    sequence), through a streamer when given one, as transformers' generate does."""

    def __init__(self, real: Any, tokenizer: Any, text: str) -> None:
        self.generation_config = real.generation_config
        self.ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    def generate(self, input_ids: Any, streamer: Any = None, **kwargs: Any) -> Any:
        import torch

        new = torch.tensor([self.ids[: kwargs["max_new_tokens"]]])
        if streamer is not None:
            streamer.put(input_ids)
            for token in new[0]:
                streamer.put(token.reshape(1))
            streamer.end()
        return torch.cat([input_ids, new], dim=1)


TOOL_TEXT = 'Let me look. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def scripted(loaded: dict, text: str) -> dict:
    return {**loaded, "model": ScriptedLM(loaded["model"], loaded["tokenizer"], text)}


def test_a_generated_tool_call_becomes_tool_calls(loaded: dict) -> None:
    model = scripted(loaded, TOOL_TEXT)
    assert "<tool_call>" in model["tokenizer"].convert_ids_to_tokens(model["model"].ids)  # one token, not special
    out = reply(model, body(tools=[WEATHER]))
    message = out["choices"][0]["message"]
    assert out["choices"][0]["finish_reason"] == "tool_calls" and message["content"] == "Let me look. "
    [call] = message["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'} and call["type"] == "function"
    # without tools on offer the same text is plain content
    plain = reply(model, OK)["choices"][0]
    assert plain["finish_reason"] == "stop" and plain["message"]["content"] == TOOL_TEXT
    assert "tool_calls" not in plain["message"]


def test_a_streamed_tool_call(loaded: dict) -> None:
    chunks = streamed(scripted(loaded, TOOL_TEXT), body(tools=[WEATHER]))
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    calls = [t for c in chunks for t in c["choices"][0]["delta"].get("tool_calls") or []]
    assert content == "Let me look. " and [t["function"]["name"] for t in calls] == ["get_weather"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


# ---- refusals --------------------------------------------------------------------------------------------------


def refused(model: dict, data: dict, stream: bool = False) -> chat_contract.ChatError:
    with pytest.raises(chat_contract.ChatError) as info:
        if stream:
            next(iter(handler.stream_fn(data, model)))
        else:
            handler.predict_fn(data, model)
    return info.value


def test_a_model_without_a_chat_template_refuses_chat(gpt2_artifact: Path) -> None:
    assert json.loads((gpt2_artifact / "manifest.json").read_text())["chat_template"] is None
    err = refused(handler.model_fn(str(gpt2_artifact)), OK)
    assert (err.status, err.param, err.code) == (400, "messages", "chat_template_missing")
    assert "this model has no chat template" in err.message and '{"inputs": ...}' in err.message


def test_a_template_that_refuses_the_messages_is_a_400(loaded: dict) -> None:
    err = refused(loaded, body(messages=[USER, {"role": "system", "content": "late"}]))
    assert err.param == "messages" and "only the first message may be a system message" in err.message


def test_the_context_bounds_max_tokens(loaded: dict) -> None:
    err = refused(loaded, body(max_tokens=510))
    assert err.code == "context_length_exceeded" and "this model's context is 512 tokens" in err.message

    # not asked for, the reply takes what the context leaves (a long prompt leaves a few tokens)
    def long(words: int) -> dict:
        return body(temperature=0, messages=[{"role": "user", "content": "Hello " * words}])

    words = 100
    while handler.chat_prompt(loaded, chat_contract.parse_chat_request(long(words)))["input_ids"].shape[1] < 500:
        words += 4
    usage = reply(loaded, long(words))["usage"]
    assert 500 <= usage["prompt_tokens"] < 512 and usage["total_tokens"] <= 512


def test_stream_flag_and_path_must_agree(loaded: dict) -> None:
    err = refused(loaded, body(stream=True))
    assert err.param == "stream" and "hf-fastload answers whole replies only" in err.message
    err = refused(loaded, body(stream=False), stream=True)
    assert err.param == "stream" and "must be true on the streaming path" in err.message


def test_the_table_refuses_before_any_compute(loaded: dict) -> None:
    """A table case through the handler: the same ChatError as chat_contract's (the full table runs over HTTP in
    tests/local_runtime/test_serve_chat.py)."""
    err = refused(loaded, body(n=2))
    assert (err.param, err.code) == ("n", "unsupported_value")


# ---- the recipe's chat_template argument -------------------------------------------------------------------------


def _gpt2_endpoint(tiny_models: dict[str, Path]):
    """(the local config's endpoint on the tiny GPT-2, its parsed engine options): the recipe's first arguments."""
    from deployment import load_config

    plan = load_config(Path(__file__).resolve().parents[2] / "config" / "local.yaml", "local").plans[0]
    return plan.spec.model_copy(update={"model": str(tiny_models["gpt2"])}), plan.engine


def test_a_chat_template_given_to_the_recipe_serves_chat(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    """GPT-2 has no chat template (chat refused, manifest null); built with one, it serves chat with it."""
    from model_build.tiny_models import CHAT_TEMPLATE
    from systems.hf_fastload.recipe import build

    manifest = build(*_gpt2_endpoint(tiny_models), tmp_path / "with", progress=False, chat_template=CHAT_TEMPLATE)
    assert manifest["chat_template"] == "config"
    assert json.loads((tmp_path / "with" / "tokenizer_config.json").read_text())["chat_template"] == CHAT_TEMPLATE
    model = handler.model_fn(str(tmp_path / "with"))
    prompt = model["tokenizer"].decode(handler.chat_prompt(model, chat_contract.parse_chat_request(OK))["input_ids"][0])
    assert prompt == "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
    assert reply(model, body(max_tokens=3))["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{% for m in messages %}{{ raise_exception('roles must alternate') }}{% endfor %}", "roles must alternate"),
        ("{{ messages[0].content + 1 }}", "cannot render a conversation with tools and a tool call"),
        ("{% if %}", "cannot render"),
        ("Hello", "rendered the sample conversation without its messages"),
    ],
)
def test_a_chat_template_that_cannot_render_fails_the_build(
    tiny_models: dict[str, Path], tmp_path: Path, template: str, expected: str
) -> None:
    from artifact import BuildError
    from systems.hf_fastload.recipe import build

    with pytest.raises(BuildError, match=expected):
        build(*_gpt2_endpoint(tiny_models), tmp_path / "bad", progress=False, chat_template=template)
