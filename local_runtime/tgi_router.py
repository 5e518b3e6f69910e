"""The stand-in's `tgi-router` dialect: POST /invocations as TGI 3.3.6's router answers it (systems/tgi), written here from
its source (huggingface/text-generation-inference, tag v3.3.6, efb94e0d; router/src/):

  sagemaker.rs  the body is, untagged, a generate request (CompatGenerateRequest: "inputs" a string, "parameters",
                "stream" a boolean), an OpenAI chat request ("messages") or an OpenAI completion request ("prompt");
                a body none of them reads is axum's JSON rejection: 422, text/plain, "Failed to deserialize the JSON
                body into the target type: data did not match any variant of untagged enum SagemakerRequest".
  server.rs     compat_generate: return_full_text defaults to the model's pipeline tag, and a model loaded from a
                local folder (HF_MODEL_ID=/opt/ml/model, no Hub info) has none, so it defaults to true (run():
                `None => true`); the answer is [{"generated_text"}] (`vec![generation]`), or with "stream": true
                server-sent events (`data: {json}` and a blank line: axum 0.7.9 in its Cargo.lock, which writes the space
                since tokio-rs/axum#2149) of StreamResponse {"index" from 1,
                "token": {"id", "text", "logprob", "special"}, "generated_text" null, "details" null}, the last one
                holding the whole text (prefixed by the prompt for return_full_text); no [DONE] after a generate
                stream. An error before streaming is 422 {"error", "error_type": "validation"}; inside a stream it
                is one event of that object (From<InferError> for Event), the reply still 200.
  validation.rs the checks and their messages, in this order: temperature, repetition_penalty, frequency_penalty,
                top_p, typical_p (each bound exclusive), top_k, max_new_tokens 0, stop sequences (at most 4, the
                launcher's max_stop_sequences), empty inputs, then the token counts: input + min(max_new_tokens,
                1024) within max_total_tokens, input within max_input_tokens.
Stop sequences end the generation as TGI's server does (local_runtime/stopping.py tgi_ending).
What it is not: TGI's sampling (the stand-in decodes greedily), grammar, truncate, best_of.
Chat and completion bodies are the stand-in's OpenAI answers, their refusals in TGI's 422 object.
"""

from __future__ import annotations

import json
from typing import Any

from .stopping import tgi_ending

JSON = "application/json"
UNTAGGED = (
    "Failed to deserialize the JSON body into the target type: data did not match any variant of untagged enum "
    "SagemakerRequest"
)
DEFAULT_GENERATION_LENGTH = 1024  # validation.rs: the most tokens one round of a request asks for
MAX_STOP_SEQUENCES = 4  # launcher/src/main.rs max_stop_sequences' default
# GenerateParameters' typed fields (lib.rs): serde refuses another JSON type, which makes the whole body match no
# variant. Unknown fields are ignored, as serde does without deny_unknown_fields.
_BOOLEANS = ("do_sample", "return_full_text", "details", "decoder_input_details", "watermark")
_UNSIGNED = ("max_new_tokens", "best_of", "truncate", "top_n_tokens", "seed")
_NUMBERS = ("temperature", "repetition_penalty", "frequency_penalty", "top_p", "typical_p")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field_reads(key: str, value: Any) -> bool:
    """Whether serde reads `value` into GenerateParameters' field `key` (null is None for the Option fields)."""
    if key in _BOOLEANS:
        return isinstance(value, bool)
    if value is None:
        return key != "stop"
    if key in _UNSIGNED:
        return _is_int(value) and value >= 0
    if key == "top_k":
        return _is_int(value)
    if key in _NUMBERS:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if key == "stop":
        return isinstance(value, list) and all(isinstance(s, str) for s in value)
    return True


def variant(body: Any) -> str | None:
    """Which SagemakerRequest variant serde reads `body` as, in its order: "generate", "chat", "completion" or None."""
    if not isinstance(body, dict):
        return None
    params = body.get("parameters", {})
    if (
        isinstance(body.get("inputs"), str)
        and isinstance(params, dict)
        and all(_field_reads(k, v) for k, v in params.items())
        and isinstance(body.get("stream", False), bool)
    ):
        return "generate"
    # ChatRequest's and CompletionRequest's `stop` is Option<Vec<String>>: one string is not read (lib.rs).
    stop = body.get("stop")
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        return None
    if isinstance(body.get("messages"), list):
        return "chat"
    prompt = body.get("prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and all(isinstance(p, str) for p in prompt)):
        return "completion"
    return None


def validation_error(message: str) -> tuple[int, Any, str]:
    return 422, {"error": message, "error_type": "validation"}, JSON


def parameter_error(params: dict[str, Any]) -> str | None:
    """validation.rs Validation::validate's parameter checks, in its order (None: they pass)."""
    checks = (
        ("temperature", lambda v: v <= 0, "`temperature` must be strictly positive"),
        ("repetition_penalty", lambda v: v <= 0, "`repetition_penalty` must be strictly positive"),
        ("frequency_penalty", lambda v: not -2 <= v <= 2, "`frequency_penalty` must be >= -2.0 and <= 2.0"),
        ("top_p", lambda v: v <= 0 or v >= 1, "`top_p` must be > 0.0 and < 1.0"),
        ("typical_p", lambda v: v <= 0 or v >= 1, "`typical_p` must be > 0.0 and < 1.0"),
        ("top_k", lambda v: v <= 0, "`top_k` must be strictly positive"),
        ("max_new_tokens", lambda v: v == 0, "`max_new_tokens` must be strictly positive"),
    )
    for key, refused, message in checks:
        if params.get(key) is not None and refused(params[key]):
            return message
    return stop_count_error(params.get("stop"))


def stop_count_error(stop: list[str] | None) -> str | None:
    """validation.rs: at most the launcher's max_stop_sequences, for a generate, chat or completion body alike."""
    if stop and len(stop) > MAX_STOP_SEQUENCES:
        return f"`stop` supports up to {MAX_STOP_SEQUENCES} stop sequences. Given: {len(stop)}"
    return None


def length_error(input_length: int, max_new_tokens: int, max_total: int, max_input: int) -> str | None:
    """validation.rs validate_input: the round's tokens within max_total_tokens, the input within max_input_tokens."""
    asked = min(max_new_tokens, DEFAULT_GENERATION_LENGTH)
    if input_length + asked > max_total:
        return (
            f"`inputs` tokens + `max_new_tokens` must be <= {max_total}. Given: {input_length} `inputs` tokens and "
            f"{asked} `max_new_tokens`"
        )
    if input_length > max_input:
        return f"`inputs` must have less than {max_input} tokens. Given: {input_length}"
    return None


def _event(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


def generate(stand_in: Any, body: dict[str, Any]) -> tuple[int, Any, str]:
    """compat_generate: (status, reply, content type)."""
    params = body.get("parameters") or {}
    streamed = bool(body.get("stream"))
    inputs = body["inputs"]
    message = parameter_error(params) or ("`inputs` cannot be empty" if not inputs else None)
    ids, wanted = None, 0
    if message is None:
        ids = stand_in.tokenizer(inputs, return_tensors="pt")["input_ids"]
        max_total, max_input = stand_in.tgi_limits()
        given = params.get("max_new_tokens")
        wanted = given if given is not None else max(max_total - ids.shape[1], 0)
        message = length_error(ids.shape[1], wanted, max_total, max_input)
    if message is not None:
        if streamed:  # generate_stream_internal: the validation error is the stream's one event
            return 200, _event({"error": message, "error_type": "validation"}).encode(), "text/event-stream"
        return validation_error(message)
    assert ids is not None  # tokenized once the parameters passed
    if wanted == 0:  # no room left in max_total_tokens: the round asks for no token
        return validation_error("`max_new_tokens` must be strictly positive")
    prefix = inputs if params.get("return_full_text", True) else ""
    generated = stand_in._tokens(ids, wanted)
    ending = tgi_ending([piece for _, piece, _ in generated], wanted, params.get("stop") or [])
    tokens = generated[: ending.tokens]
    text = prefix + ending.text
    details = {"finish_reason": ending.finish_reason, "generated_tokens": ending.tokens}
    special = set(stand_in.tokenizer.all_special_ids)
    shown = [
        {"id": token_id, "text": piece, "logprob": logprob, "special": token_id in special}
        for token_id, piece, logprob in tokens
    ]
    if not streamed:
        answer: dict[str, Any] = {"generated_text": text}
        if params.get("details"):
            answer["details"] = {**details, "seed": params.get("seed"), "prefill": [], "tokens": shown}
        return 200, [answer], JSON
    events = []
    for position, token in enumerate(shown, start=1):
        last = position == len(tokens)
        events.append(
            _event(
                {
                    "index": position,
                    "token": token,
                    "generated_text": text if last else None,
                    "details": {**details, "seed": params.get("seed"), "input_length": ids.shape[1]}
                    if last and params.get("details")
                    else None,
                }
            )
        )
    return 200, "".join(events).encode(), "text/event-stream"


def reply(stand_in: Any, body: Any, chat_route: bool = False) -> tuple[int, Any, str]:
    """POST /invocations (sagemaker_compatibility), or /v1/chat/completions (chat_route: a ChatRequest only):
    (status, reply, content type)."""
    kind = variant(body)
    if chat_route and kind != "chat":
        # serde's message names the field; a `stop` string's wording here is the stand-in's (serde adds a position).
        field = (
            "missing field `messages`" if not isinstance(body.get("messages"), list) else "stop: expected a sequence"
        )
        return (
            422,
            f"Failed to deserialize the JSON body into the target type: {field}".encode(),
            "text/plain; charset=utf-8",
        )
    if kind is None:
        return 422, UNTAGGED.encode(), "text/plain; charset=utf-8"
    if kind == "generate":
        return generate(stand_in, body)
    too_many = stop_count_error(body.get("stop"))  # the chat and completion routes build a GenerateRequest
    if too_many is not None:
        return validation_error(too_many)
    status, answer = stand_in.chat(body)
    if status != 200:
        error = answer.get("error") if isinstance(answer, dict) else answer
        return validation_error(error.get("message", str(error)) if isinstance(error, dict) else str(error))
    if body.get("stream"):
        from .stand_in import _sse

        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return 200, _sse(answer, include_usage), "text/event-stream"
    return 200, answer, JSON
