"""R1 of the 2026-11-27 reliability probe: chat `stop` sequences on hf-fastload must not let one request hold a model
copy's lock for minutes. transformers' own stop_strings build a StopStringCriteria, whose precompute runs over every
stop character x every vocabulary token in pure Python (5.8 s for a 64 KB body on a 785-token vocabulary, minutes
at 50,000 tokens). The handler matches stop sequences on the decoded tail of the reply instead (StopOnText): the
checks here are about what the handler computes, not how long it takes, so they hold on any machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from chat_cases import body

import chat_contract
from systems.hf_fastload.handler import inference as handler


@pytest.fixture(scope="module")
def loaded(chat_artifact: Path) -> dict:
    return handler.model_fn(str(chat_artifact))


@pytest.fixture
def no_precompute(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' StopStringCriteria (and its vocabulary-wide precompute) fails the test if anything builds it."""
    from transformers.generation import stopping_criteria

    def refuse(*args, **kwargs):
        raise AssertionError("StopStringCriteria was built: its precompute is O(stop characters x vocabulary)")

    monkeypatch.setattr(stopping_criteria.StopStringCriteria, "__init__", refuse)


def test_the_largest_accepted_stop_list_never_builds_the_vocabulary_precompute(loaded: dict, no_precompute) -> None:
    """The probe's body: 4 stop strings of ~15,900 characters (63.7 KB, under the invoke function's 64 KB cap),
    whole and streamed."""
    stops = [("ab" * 8000)[: 15_900 - i] for i in range(chat_contract.MAX_STOP)]
    data = body(max_tokens=4, temperature=0, stop=stops)
    assert len(json.dumps(data)) > 63_000
    request = chat_contract.parse_chat_request(data)  # accepted by the contract
    assert request.stop == tuple(stops)
    out = handler.predict_fn(handler.input_fn(json.dumps(data).encode(), "application/json"), loaded)
    assert out["usage"]["completion_tokens"] == 4
    raw = b"".join(handler.stream_fn({**data, "stream": True}, loaded)).decode()
    assert raw.endswith("data: [DONE]\n\n")


def test_a_stop_sequence_still_ends_generation_early(loaded: dict, no_precompute) -> None:
    free = handler.predict_fn(body(max_tokens=24, temperature=0), loaded)["choices"][0]["message"]["content"]
    stop = free[len(free) // 2 : len(free) // 2 + 3]
    out = handler.predict_fn(body(max_tokens=24, temperature=0, stop=[stop]), loaded)
    assert out["choices"][0]["message"]["content"] == free[: free.find(stop)]
    assert out["choices"][0]["finish_reason"] == "stop" and out["usage"]["completion_tokens"] < 24


def test_each_step_decodes_a_window_bounded_by_the_stop_length_not_the_vocabulary(loaded: dict) -> None:
    """StopOnText's work per generated token: one decode of at most 4 x (longest stop) + 4 tokens of the reply
    (never the prompt) and a substring search; nothing proportional to the vocabulary."""

    class CountingTokenizer:
        def __init__(self, inner) -> None:
            self.inner, self.lengths = inner, []

        def decode(self, ids, **kwargs):
            self.lengths.append(len(ids))
            return self.inner.decode(ids, **kwargs)

    tokenizer = CountingTokenizer(loaded["tokenizer"])
    prompt, reply = 7, 300
    criterion = handler.StopOnText(tokenizer, ("xyz", "a longer stop"), prompt)
    ids = torch.randint(0, loaded["tokenizer"].vocab_size, (1, prompt + reply))
    for end in range(prompt + 1, prompt + reply + 1):
        criterion(ids[:, :end], None)
    assert len(tokenizer.lengths) == reply  # one decode a step
    assert max(tokenizer.lengths) == criterion.window == 4 * len("a longer stop") + 4
    assert tokenizer.lengths[0] == 1  # the first step sees the first reply token only, not the prompt
