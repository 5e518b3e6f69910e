"""The stand-in's tgi-router dialect answers /invocations as TGI 3.3.6's router does (local_runtime/tgi_router.py, each rule
with its source file): server-sent events, return_full_text's default for a local model, the untagged body match,
the validation errors and the length limits from the launcher's variables."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from endpoint_runtime import stream
from local_runtime import tgi_router
from local_runtime.stand_in import StandIn, flags_of, serving, tgi_argv

PROMPT = "The capital of France is"
MAX_TOTAL, MAX_INPUT = 64, 40


@pytest.fixture(scope="module")
def url(tiny_chat_models: dict[str, Path]) -> Iterator[str]:
    env = {"HF_MODEL_ID": "/opt/ml/model", "MAX_TOTAL_TOKENS": str(MAX_TOTAL), "MAX_INPUT_TOKENS": str(MAX_INPUT)}
    flags = flags_of(tgi_argv(env, tiny_chat_models["llama"]))
    with serving(StandIn(flags, "tgi-router")) as base:
        yield base


def post(url: str, body: object, path: str = "/invocations") -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=120)


def events(reply: httpx.Response) -> list[dict]:
    """The data of each server-sent event, in order; every event is `data: {json}` and a blank line."""
    assert reply.headers["content-type"].startswith("text/event-stream"), reply.headers
    blocks = reply.text.split("\n\n")
    assert blocks[-1] == "", reply.text  # each event ends with its blank line
    assert all(block.startswith("data: ") for block in blocks[:-1]), reply.text
    data = [block.removeprefix("data: ") for block in blocks[:-1]]
    return [d if d == "[DONE]" else json.loads(d) for d in data]


def test_the_launchers_variables_become_the_stand_ins_limits():
    argv = tgi_argv({"HF_MODEL_ID": "/opt/ml/model", "MAX_TOTAL_TOKENS": "2048", "MAX_INPUT_TOKENS": "1024"}, Path("m"))
    assert argv == ["--model", "m", "--max-model-len", "2048", "--max-input-tokens", "1024"]
    assert tgi_argv({"HF_MODEL_ID": "/opt/ml/model"}, Path("m")) == ["--model", "m"]


def test_a_generate_stream_is_server_sent_token_events_the_last_holding_the_text(url):
    """server.rs generate_stream_internal: index from 1, each token {"id", "text", "logprob", "special"},
    generated_text and details null until the last event; no [DONE]; the full text (return_full_text defaults to
    true for a model without a pipeline tag) on the last."""
    reply = post(url, {"inputs": PROMPT, "parameters": {"max_new_tokens": 5}, "stream": True})
    assert reply.status_code == 200
    found = events(reply)
    assert [e["index"] for e in found] == list(range(1, len(found) + 1)) and found
    assert all(set(e["token"]) == {"id", "text", "logprob", "special"} for e in found), found
    assert all(e["generated_text"] is None and e["details"] is None for e in found[:-1]), found
    assert found[-1]["generated_text"] == PROMPT + "".join(e["token"]["text"] for e in found)
    assert "[DONE]" not in reply.text
    # the project's own stream reader takes these events as they are
    splitter = stream.LineSplitter()
    texts = [stream.token_text(stream.parse_line(line)) for line in splitter.feed(reply.content)]
    assert "".join(t for t in texts if t) == "".join(e["token"]["text"] for e in found if not e["token"]["special"])


def test_a_whole_generate_reply_is_a_list_with_the_prompt_unless_asked_otherwise(url):
    """compat_generate: [{"generated_text"}]; return_full_text defaults to true here (run(): no pipeline tag)."""
    full = post(url, {"inputs": PROMPT, "parameters": {"max_new_tokens": 4}})
    assert full.status_code == 200
    [answer] = full.json()
    assert answer["generated_text"].startswith(PROMPT)
    bare = post(url, {"inputs": PROMPT, "parameters": {"max_new_tokens": 4, "return_full_text": False}}).json()
    assert bare == [{"generated_text": answer["generated_text"][len(PROMPT) :]}]
    detailed = post(url, {"inputs": PROMPT, "parameters": {"max_new_tokens": 4, "details": True}}).json()[0]
    assert detailed["details"]["generated_tokens"] == len(detailed["details"]["tokens"]) == 4


@pytest.mark.parametrize(
    "body",
    [
        {"inputs": [PROMPT, PROMPT]},  # CompatGenerateRequest.inputs is a String
        {"inputs": PROMPT, "parameters": {"max_new_tokens": -1}},  # Option<u32>
        {"inputs": PROMPT, "parameters": {"do_sample": "yes"}},
        {"inputs": PROMPT, "stream": "true"},
        {"input": PROMPT},
        [PROMPT],
    ],
    ids=["inputs-list", "negative-max-new-tokens", "do-sample-string", "stream-string", "input-key", "a-list"],
)
def test_a_body_no_variant_reads_is_axums_422_in_plain_text(url, body):
    reply = post(url, body)
    assert (reply.status_code, reply.text) == (422, tgi_router.UNTAGGED)
    assert reply.headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize(
    "parameters, message",
    [
        ({"top_p": 1.0}, "`top_p` must be > 0.0 and < 1.0"),
        ({"top_k": 0}, "`top_k` must be strictly positive"),
        ({"temperature": 0}, "`temperature` must be strictly positive"),
        ({"max_new_tokens": 0}, "`max_new_tokens` must be strictly positive"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "`stop` supports up to 4 stop sequences. Given: 5"),
        ({"max_new_tokens": MAX_TOTAL}, f"`inputs` tokens + `max_new_tokens` must be <= {MAX_TOTAL}. Given: "),
    ],
    ids=["top-p-1", "top-k-0", "temperature-0", "max-new-tokens-0", "five-stops", "past-max-total-tokens"],
)
def test_validation_errors_are_422_before_a_stream_and_an_event_inside_one(url, parameters, message):
    """validation.rs's messages; server.rs: a whole reply's error is 422 {"error", "error_type"}, a stream's is its
    one event in a 200 reply, which the project's stream reader raises as the model's error."""
    whole = post(url, {"inputs": PROMPT, "parameters": parameters})
    assert whole.status_code == 422 and whole.json()["error_type"] == "validation", whole.text
    assert whole.json()["error"].startswith(message), whole.text
    streamed = post(url, {"inputs": PROMPT, "parameters": parameters, "stream": True})
    assert streamed.status_code == 200
    [event] = events(streamed)
    assert event == whole.json()
    with pytest.raises(stream.ModelStreamFailed, match=re.escape(message)):
        stream.token_text(event)


def test_an_input_over_max_input_tokens_is_refused_naming_the_limit_and_the_count(url, tiny_chat_models):
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_chat_models["llama"])
    prompt = "word " * 22
    count = len(tokenizer(prompt)["input_ids"])
    # within max_total_tokens with its one new token, past max_input_tokens: the input limit is the one named
    assert MAX_INPUT < count < MAX_TOTAL - 1, count
    reply = post(url, {"inputs": prompt, "parameters": {"max_new_tokens": 1}})
    assert (reply.status_code, reply.json()) == (
        422,
        {"error": f"`inputs` must have less than {MAX_INPUT} tokens. Given: {count}", "error_type": "validation"},
    )


def test_chat_and_completion_bodies_answer_openais_shapes_and_the_chat_route_takes_chat_only(url):
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
    assert post(url, chat).json()["object"] == "chat.completion"
    assert post(url, chat, "/v1/chat/completions").json()["object"] == "chat.completion"
    assert post(url, {"prompt": PROMPT, "max_tokens": 3}).json()["object"] == "text_completion"
    chunks = events(post(url, {**chat, "stream": True}))
    assert chunks[-1] == "[DONE]" and chunks[0]["object"] == "chat.completion.chunk"  # chat streams end with [DONE]
    refused = post(url, {"inputs": PROMPT}, "/v1/chat/completions")
    assert refused.status_code == 422 and "missing field `messages`" in refused.text


def contract_edges() -> list[dict]:
    """Each parameter's smallest and largest accepted value (request_contract.PARAMETERS), with sampling on and off,
    and every parameter at once at each end."""
    import math

    import request_contract

    limits = request_contract.limits({"MAX_NEW_TOKENS": "8"})
    ends: list[dict] = [{}, {}]
    found = []
    for name, spec in request_contract.PARAMETERS.items():
        if spec.kind == "boolean":
            values: list = [False, True]
        else:
            low = spec.low + (1 if spec.kind == "integer" else 0) if spec.low_open else spec.low
            low = math.nextafter(spec.low, math.inf) if spec.low_open and spec.kind == "number" else low
            values = [low, getattr(limits, spec.high) if isinstance(spec.high, str) else spec.high]
        for end, value in zip(ends, values, strict=True):
            end[name] = value
        for value in values:
            for sample in (True, False):
                found.append({name: value, **({} if name == "do_sample" else {"do_sample": sample})})
    for end in ends:
        end["min_new_tokens"] = min(end["min_new_tokens"], end["max_new_tokens"])
    return found + ends


def test_every_request_the_contract_accepts_reaches_tgi_as_a_body_it_serves(url, monkeypatch, tmp_path):
    """The front doors' body for a tgi endpoint (endpoint_runtime/invoke.py validate_payload, bodies.EndpointBody, in
    the environment the plan gives the functions: MAX_BATCH_SIZE 1, UNREAD_PARAMETERS): TGI's router serves every
    edge of the contract, a one-item list included, and answers with the prompt only where return_full_text asks
    for it (the contract's default stated false); what TGI would ignore is refused first, naming it."""
    from deployment import load_config
    from endpoint_runtime import bodies, invoke
    from request_contract import RequestError

    examples = Path(__file__).resolve().parents[2] / "config" / "examples"
    [plan] = load_config(examples / "tgi.yaml", "dev", build_root=tmp_path).plans
    for key, value in {**plan.front_door_environment, "MAX_NEW_TOKENS": "8"}.items():
        monkeypatch.setenv(key, value)
    refused, ignored = {}, []
    for parameters in contract_edges():
        try:
            sent = invoke.validate_payload({"inputs": [PROMPT], "parameters": parameters})
            body = bodies.EndpointBody.from_env().request(sent)  # as the front doors read it
        except RequestError as err:
            ignored.append(str(err).split(":")[0])
            continue
        reply = post(url, body)
        echoed = reply.status_code == 200 and reply.json()[0]["generated_text"].startswith(PROMPT)
        if reply.status_code != 200 or echoed != bool(parameters.get("return_full_text")):
            refused[json.dumps(parameters)] = (body, reply.status_code, reply.text[:200])
    assert not refused, refused
    assert set(ignored) == {"parameters.min_new_tokens", "parameters.num_beams"}, ignored
