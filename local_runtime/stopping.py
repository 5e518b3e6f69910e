"""Where a generation ends, as each engine decides it, applied to the stand-in's greedy tokens.

The stand-in generates up to the asked length (or the model's end-of-sequence token) and then finds where the engine
would have stopped, token by token, as each engine's own code does:

  vLLM 0.30.0   v1/engine/detokenizer.py check_stop_strings: after each token, the stop string that completes
                earliest in the text; the text is cut before it (include_stop_str_in_output defaults to false), the
                finish reason is "stop" and `stop_reason` names the string; the end-of-sequence token is "stop" too.
                LMI 27 answers through vLLM's OpenAI server. SGLang trims the stop string the same way by default
                (no_stop_trim false) and names it in `matched_stop`; its source was not read here (unverified at
                the pinned SGLang), and its `matched_stop` for the end-of-sequence token (the token id) is not
                modelled.
  TGI 3.3.6     server/text_generation_server/utils/tokens.py StoppingCriteria: after each token, the length first,
                then the end-of-sequence token, then each stop sequence as the regex `re.escape(stop) + "$"` over the
                output so far; the text keeps the stop sequence, and the finish reason is "length", "eos_token" or
                "stop_sequence" (router/src/lib.rs FinishReason; its chat answers and whole completions write
                "eos_token" as "stop", FinishReason::format(true); a streamed completion's last chunk keeps
                "eos_token", server.rs, which the stand-in's one-chunk completion stream does not model).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Ending:
    """The text an engine returns, the tokens it generated, why it stopped, and the stop string that ended it."""

    text: str
    tokens: int
    finish_reason: str
    matched: str | None = None


def stop_strings(value: object) -> list[str] | None:
    """An OpenAI request's `stop`: absent, one string or a list of strings (None: any other value, refused)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    return None


def openai_ending(pieces: Sequence[str], wanted: int, stop: Sequence[str]) -> Ending:
    """vLLM's (and SGLang's default) ending of the tokens whose texts are `pieces`, asked for `wanted` tokens."""
    text = ""
    for count, piece in enumerate(pieces, start=1):
        text += piece
        # check_stop_strings searches from 1 - new characters - the string's length: a match ending in the new text.
        found = [(text.find(s, max(0, len(text) + 1 - len(piece) - len(s))), s) for s in stop if s]
        hits = [(index, s) for index, s in found if index != -1]
        if hits:  # the earliest end wins, ties by the list's order (min keeps the first of equals)
            index, matched = min(hits, key=lambda hit: hit[0] + len(hit[1]))
            return Ending(text[:index], count, "stop", matched)
    return Ending(text, len(pieces), "length" if len(pieces) >= wanted else "stop")


def tgi_ending(pieces: Sequence[str], wanted: int, stop: Sequence[str]) -> Ending:
    """TGI's StoppingCriteria over the tokens whose texts are `pieces`, asked for `wanted` tokens; fewer tokens than
    asked means the last one was the end-of-sequence token (the stand-in's generation stops there)."""
    patterns = [(re.compile(re.escape(s) + "$"), s) for s in stop]
    text = ""
    for count, piece in enumerate(pieces, start=1):
        text += piece
        if count >= wanted:
            return Ending(text, count, "length")
        if count == len(pieces):
            return Ending(text, count, "eos_token")
        for pattern, sequence in patterns:
            if pattern.search(text):
                return Ending(text, count, "stop_sequence", sequence)
    return Ending(text, len(pieces), "eos_token")
