"""Stop strings end a generation where each engine ends it (local_runtime/stopping.py): vLLM and SGLang cut the stop
string off and answer "stop"; TGI keeps it and answers "stop_sequence". First the rules on hand-made tokens, then
the stand-in's dialects through their clients: the openai SDK on the OpenAI routes, HTTP on TGI's /generate body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from local_runtime.stand_in import StandIn, flags_of, serving, tgi_argv
from local_runtime.stopping import Ending, openai_ending, stop_strings, tgi_ending

MESSAGES = [{"role": "user", "content": "Name three colours."}]
PROMPT = "The capital of France is"
WANTED = 12


# ------------------------------------------------------------------------------------------------- the rules


def test_vllm_cuts_the_earliest_completed_stop_string_off_even_across_tokens():
    pieces = ["Hel", "lo wor", "ld!"]
    assert openai_ending(pieces, 5, ["lo w"]) == Ending("Hel", 2, "stop", "lo w")  # spans the first two tokens
    # Both complete in the second token; "lo" ends first, whatever the list's order.
    assert openai_ending(pieces, 5, ["wor", "lo"]) == Ending("Hel", 2, "stop", "lo")
    # Two that end at the same place: the first in the list (check_stop_strings breaks ties by the list's order).
    assert openai_ending(pieces, 5, ["llo", "lo"]) == Ending("He", 2, "stop", "llo")
    assert openai_ending(pieces, 5, ["lo", "llo"]) == Ending("Hel", 2, "stop", "lo")
    assert openai_ending(pieces, 5, ["!"]) == Ending("Hello world", 3, "stop", "!")


def test_without_a_match_vllm_says_length_at_the_limit_and_stop_at_the_end_of_sequence():
    assert openai_ending(["a", "b"], 2, ["z"]) == Ending("ab", 2, "length")
    assert openai_ending(["a", "b", ""], 5, []) == Ending("ab", 3, "stop")


def test_tgi_keeps_the_stop_sequence_and_matches_it_only_at_the_end_of_the_output():
    assert tgi_ending(["Hel", "lo", " world"], 5, ["lo"]) == Ending("Hello", 2, "stop_sequence", "lo")
    # A stop sequence inside one token's text, not at its end, does not stop TGI (re.escape(stop) + "$").
    assert tgi_ending(["a\nb", "c", "d"], 5, ["\n"]).finish_reason == "eos_token"
    # `$` also matches before one final newline, as Python's re does in TGI's StopSequenceCriteria.
    assert tgi_ending(["ab\n", "c", "d"], 5, ["ab"]) == Ending("ab\n", 1, "stop_sequence", "ab")


def test_tgi_checks_the_length_before_the_end_of_sequence_and_the_stop_sequences():
    assert tgi_ending(["x", "STOP"], 2, ["STOP"]) == Ending("xSTOP", 2, "length")
    assert tgi_ending(["x", ""], 3, ["x"]) == Ending("x", 1, "stop_sequence", "x")
    assert tgi_ending(["x", ""], 3, []) == Ending("x", 2, "eos_token")


@pytest.mark.parametrize(
    ("value", "parsed"), [(None, []), ("x", ["x"]), (["a", "b"], ["a", "b"]), (3, None), (["a", 1], None)]
)
def test_an_openai_stop_is_a_string_or_a_list_of_strings(value, parsed):
    assert stop_strings(value) == parsed


# --------------------------------------------------------------------------------------- through the clients


@pytest.fixture(scope="module")
def servers(tiny_chat_models: dict[str, Path]) -> Iterator[dict[str, str]]:
    """The tiny Llama behind three dialects' stand-ins (their container ports), each in this process."""
    model = tiny_chat_models["llama"]
    tgi = flags_of(tgi_argv({"HF_MODEL_ID": "/opt/ml/model"}, model))
    with (
        serving(StandIn({"--model": str(model), "--served-model-name": "tiny"}, "vllm-openai")) as vllm,
        serving(StandIn({"--model-path": str(model), "--served-model-name": "tiny"}, "sglang-http")) as sglang,
        serving(StandIn(tgi, "tgi-router")) as tgi_url,
    ):
        yield {"vllm-openai": vllm, "sglang-http": sglang, "tgi-router": tgi_url}


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)


def _stop_inside(text: str) -> tuple[str, int]:
    """Three characters from the second half of `text` that occur nowhere before, and where they start."""
    for start in range(len(text) // 2, len(text) - 2):
        stop = text[start : start + 3]
        if stop.strip() and text.find(stop) == start:
            return stop, start
    raise AssertionError(f"no stop string to pick in {text!r}: the tiny model's greedy text is too short")


@pytest.mark.parametrize(("dialect", "field"), [("vllm-openai", "stop_reason"), ("sglang-http", "matched_stop")])
def test_vllm_and_sglang_answer_the_text_before_the_stop_string(servers, dialect, field):
    client = _client(servers[dialect])
    whole = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=WANTED)  # type: ignore[arg-type]
    text = whole.choices[0].message.content or ""
    assert whole.choices[0].finish_reason in ("length", "stop")
    stop, start = _stop_inside(text)
    cut = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=WANTED, stop=[stop])  # type: ignore[arg-type]
    [choice] = cut.choices
    assert (choice.message.content, choice.finish_reason) == (text[:start], "stop")
    assert (choice.model_extra or {})[field] == stop
    assert cut.usage is not None and whole.usage is not None
    assert cut.usage.completion_tokens < whole.usage.completion_tokens
    streamed = client.chat.completions.create(
        model="tiny",
        messages=MESSAGES,  # type: ignore[arg-type]
        max_tokens=WANTED,
        stop=stop,  # one string, as OpenAI's API also takes it
        stream=True,
    )
    chunks = [chunk for chunk in streamed if chunk.choices]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == text[:start]
    assert chunks[-1].choices[0].finish_reason == "stop"


def _pieces_and_stop(url: str) -> tuple[list[str], str, int]:
    """The tiny model's greedy tokens after PROMPT (TGI's details), and a stop sequence that ends at a token: the
    output through the middle token ends with it there, and nowhere before (TGI matches only at the output's end)."""
    asked = {"max_new_tokens": WANTED, "return_full_text": False, "details": True}
    whole = httpx.post(f"{url}/invocations", json={"inputs": PROMPT, "parameters": asked}, timeout=120).json()[0]
    pieces = [token["text"] for token in whole["details"]["tokens"]]
    through = len(pieces) // 2
    stop = "".join(pieces[:through])
    assert stop.strip() and len(pieces) == WANTED, pieces
    return pieces, stop, through


def test_tgis_generate_body_stops_after_the_token_that_completes_the_sequence(servers):
    url = servers["tgi-router"]
    _, stop, through = _pieces_and_stop(url)
    asked = {"max_new_tokens": WANTED, "return_full_text": False, "details": True, "stop": [stop]}
    body = {"inputs": PROMPT, "parameters": asked}
    [answer] = httpx.post(f"{url}/invocations", json=body, timeout=120).json()
    assert answer["generated_text"] == stop
    assert (answer["details"]["finish_reason"], answer["details"]["generated_tokens"]) == ("stop_sequence", through)
    streamed = httpx.post(f"{url}/invocations", json={**body, "stream": True}, timeout=120).text
    assert streamed.count("data: ") == through and '"finish_reason": "stop_sequence"' in streamed


def test_tgis_openai_completion_keeps_the_stop_sequence(servers):
    """TGI's completion route builds the same GenerateRequest (server.rs completions): the text keeps the sequence,
    and the reason is FinishReason's own name."""
    url = servers["tgi-router"]
    _, stop, _ = _pieces_and_stop(url)
    body = {"prompt": PROMPT, "max_tokens": WANTED, "stop": [stop]}
    [choice] = httpx.post(f"{url}/invocations", json=body, timeout=120).json()["choices"]
    assert (choice["text"], choice["finish_reason"]) == (stop, "stop_sequence")
    # Without a stop, the same request runs to its length.
    [whole] = httpx.post(f"{url}/invocations", json={**body, "stop": None}, timeout=120).json()["choices"]
    assert whole["finish_reason"] == "length" and whole["text"].startswith(stop) and whole["text"] != stop


def test_tgi_refuses_a_stop_it_cannot_read_or_more_than_four(servers):
    url = servers["tgi-router"]
    one_string = httpx.post(f"{url}/v1/chat/completions", json={"messages": MESSAGES, "stop": "x"}, timeout=120)
    assert one_string.status_code == 422 and "stop" in one_string.text
    at_invocations = httpx.post(f"{url}/invocations", json={"messages": MESSAGES, "stop": "x"}, timeout=120)
    assert at_invocations.status_code == 422 and "untagged enum SagemakerRequest" in at_invocations.text
    five = httpx.post(f"{url}/invocations", json={"messages": MESSAGES, "stop": list("abcde")}, timeout=120)
    assert five.status_code == 422
    assert five.json() == {"error": "`stop` supports up to 4 stop sequences. Given: 5", "error_type": "validation"}
