"""`python -m model_build loadtest`: drive an endpoint at fixed concurrency levels and report, per level, time to
first token, inter-token latency, end-to-end latency (p50/p90/p95/p99), output tokens/s per request and in
aggregate, requests/s, errors by kind and $ per million output tokens (definitions: load_testing/report.py).

Targets
  openai             an OpenAI-compatible base URL (SageMaker's route: https://runtime.sagemaker.<region>.amazonaws.com
                     /endpoints/<ep>/openai/v1 with a bearer token; vLLM-style servers: http://host:port/v1); streamed
                     chat completions (SSE) over httpx, asyncio.
  sagemaker-runtime  boto3 InvokeEndpointWithResponseStream (LMI JSON lines in PayloadParts, read with
                     endpoint_runtime/stream.py) or InvokeEndpoint (end-to-end latency and output tokens only), our
                     {"inputs", "parameters"} request, optional InferenceComponentName and endpoint_url (the local
                     server, local_runtime/serve.py); one thread per request in flight.
Workload: synthetic prompts (input/output token mean and stddev; counted with a tokenizer directory, else one common
English word per token, a stated approximation) or a JSONL dataset ({"prompt"} or {"messages"} per line, optional
"output_tokens"); concurrency levels; a request count or a duration per level; warm-up requests per level, not
measured. Exit status: 0, 1 when an SLO given with --slo is missed, 2 for a user error (one message, no traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from endpoint_config.slo import TokenDistribution
from endpoint_runtime.bodies import EndpointBody
from load_testing.report import RequestRecord, evaluate_slo, parse_slo, summarize_level, write_outputs

EXIT_SLO_MISSED = 1
EXIT_USER_ERROR = 2
MAX_CONCURRENCY = 1024
ERROR_TEXT_CHARS = 300
JSON_CONTENT = {"Content-Type": "application/json"}

DEFINITIONS = {
    "ttft_ms": "request sent -> first streamed event carrying output text",
    "itl_ms": "gaps between consecutive streamed events (SSE events, LMI lines) carrying output text, each stamped "
    "when its bytes arrived, pooled over requests (AIPerf: inter_chunk_latency)",
    "tpot_ms": "per request (last text event - first text event) / (output tokens - 1) (AIPerf: inter_token_latency)",
    "e2e_ms": "request sent -> reply complete",
    "output_tokens_per_s": "output tokens of successful requests / (first request sent -> last reply complete)",
    "output_tokens_per_s_per_request": "output tokens / e2e, per request",
    "usd_per_million_output_tokens": "hourly price x instances / 3600 / output_tokens_per_s x 1e6",
}


TARGETS: dict[str, Any] = {}  # kind -> target class (a load-generating process rebuilds its target by kind)


class LoadTestError(Exception):
    """A user error: bad workload, target or arguments. Printed as one line, exit 2."""


# ---------------------------------------------------------------------------------------------------------------
# Workload


class Workload(BaseModel):
    """What to send. `input_tokens` shapes synthetic prompts (ignored with a dataset); `output_tokens` is what each
    request asks for unless its dataset line says `output_tokens`."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: TokenDistribution = TokenDistribution(mean=128)
    output_tokens: TokenDistribution = TokenDistribution(mean=64)
    dataset: Path | None = None
    tokenizer: Path | None = None
    concurrency: list[int] = Field(default=[1], min_length=1)
    requests: int | None = Field(default=None, ge=1, le=10_000_000)
    duration_s: float | None = Field(default=None, gt=0, le=86_400)
    warmup_requests: int = Field(default=0, ge=0, le=100_000)
    seed: int = 0
    request_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    # Our format: min_new_tokens = max_new_tokens, so a model that stops early (random tiny weights) still
    # produces the asked length. OpenAI-compatible servers have no standard field for it: use extra_body
    # (e.g. vLLM's {"ignore_eos": true}) where the server supports one.
    exact_output_tokens: bool = True
    parameters: dict[str, Any] = {}  # merged into our format's "parameters"
    extra_body: dict[str, Any] = {}  # merged into every OpenAI request body
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    processes: int | None = Field(default=None, ge=1, le=256)  # load-generating processes; None: processes_for()
    # The whole run (warm-up and every level) ends by then: a request unanswered at the deadline is recorded as an
    # error of kind "deadline", a level not started is not measured, and the result says deadline_passed.
    deadline_s: float | None = Field(default=None, gt=0, le=86_400)

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, value: list[int]) -> list[int]:
        bad = [c for c in value if not 1 <= c <= MAX_CONCURRENCY]
        if bad:
            raise ValueError(f"every level must be 1-{MAX_CONCURRENCY}, got {bad}")
        if len(set(value)) != len(value):
            raise ValueError(f"levels must be distinct, got {value}")
        return value

    @model_validator(mode="after")
    def _count_or_duration(self) -> Workload:
        if self.requests is not None and self.duration_s is not None:
            raise ValueError("give requests or duration_s, not both")
        return self

    def requests_at(self, concurrency: int) -> int | None:
        """Requests measured at a level: `requests`, or (neither given) max(10, 2 x concurrency), AIPerf's default
        for synthetic data; None in duration mode."""
        if self.duration_s is not None:
            return None
        return self.requests if self.requests is not None else max(10, 2 * concurrency)


def parse_workload(value: dict[str, Any], where: str = "workload") -> Workload:
    try:
        return Workload.model_validate(value)
    except ValidationError as err:
        problems = [
            f"{where}.{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']} (got {e.get('input')!r})"
            for e in err.errors()
        ]
        raise LoadTestError("; ".join(problems)) from None


class TokenCounter:
    """Counts and cuts text in tokens with a tokenizer directory: tokenizer.json through `tokenizers`, else
    transformers' AutoTokenizer (vocab.json + merges.txt and the like)."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        if not path.is_dir():
            raise LoadTestError(f"tokenizer: {path} is not a directory (give a tokenizer or model directory)")
        self.path = path
        try:
            if (path / "tokenizer.json").is_file():
                from tokenizers import Tokenizer

                fast = Tokenizer.from_file(str(path / "tokenizer.json"))
                self._encode = lambda text: fast.encode(text, add_special_tokens=False).ids
                self._decode = fast.decode
            else:
                from transformers import AutoTokenizer

                slow = AutoTokenizer.from_pretrained(str(path))
                self._encode = lambda text: slow.encode(text, add_special_tokens=False)
                self._decode = slow.decode
        except ImportError as err:
            raise LoadTestError(
                f"tokenizer: counting tokens needs the {err.name} package (requirements-build.txt), "
                f"or leave the tokenizer out for the word approximation"
            ) from None
        except (OSError, ValueError) as err:
            raise LoadTestError(f"tokenizer: {path} could not be loaded: {err}") from None

    def count(self, text: str) -> int:
        return len(self._encode(text))

    def cut(self, text: str, tokens: int) -> str:
        return self._decode(self._encode(text)[:tokens])


# Short common English words, each one GPT-2 BPE token with its leading space: without a tokenizer, a prompt of n
# "tokens" is n of them (an approximation; the report says which counting was used).
WORDS = (
    "the of and to in is it for on with as at by from this that be are was have not but or an all we can "
    "one has more will about time if they out up so what when make like their some then them into over "
    "only new other just also back after use two how our work first well way even want because any these "
    "give day most us very long good great little world year still last right"
).split()


@dataclass
class Prompt:
    text: str | None  # a prompt (our format, or one user message in chat)
    messages: list[dict[str, Any]] | None  # chat messages (openai target only)
    input_tokens: int | None
    output_tokens: int


def _synthetic_text(rng: random.Random, tokens: int, counter: TokenCounter | None) -> str:
    words = [rng.choice(WORDS) for _ in range(tokens if counter is None else tokens + tokens // 2 + 8)]
    text = " ".join(words)
    return text if counter is None else counter.cut(text, tokens)


def read_dataset(path: Path) -> list[dict[str, Any]]:
    """JSONL: one object per line with "prompt" (a string) or "messages" (chat messages), optional
    "output_tokens" (int >= 1). Blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise LoadTestError(f"dataset: {path} does not exist")
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"dataset {path} line {number}"
        try:
            obj = json.loads(line)
        except ValueError as err:
            raise LoadTestError(f"{where}: not JSON ({err})") from None
        if not isinstance(obj, dict) or (("prompt" in obj) == ("messages" in obj)):
            raise LoadTestError(f'{where}: must be an object with exactly one of "prompt" or "messages"')
        if "prompt" in obj and (not isinstance(obj["prompt"], str) or not obj["prompt"]):
            raise LoadTestError(f'{where}: "prompt" must be a non-empty string, got {obj["prompt"]!r}')
        if "messages" in obj:
            msgs = obj["messages"]
            if (
                not isinstance(msgs, list)
                or not msgs
                or not all(isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in msgs)
            ):
                raise LoadTestError(f'{where}: "messages" must be a non-empty list of {{"role", "content"}} objects')
        out = obj.get("output_tokens")
        if out is not None and (not isinstance(out, int) or isinstance(out, bool) or out < 1):
            raise LoadTestError(f'{where}: "output_tokens" must be an integer >= 1, got {out!r}')
        entries.append(obj)
    if not entries:
        raise LoadTestError(f"dataset: {path} has no prompts")
    return entries


def make_prompts(
    workload: Workload, count: int, seed: int, counter: TokenCounter | None, dataset: list[dict[str, Any]] | None
) -> list[Prompt]:
    """`count` prompts: synthetic from the seed, or the dataset's entries in order (cycled)."""
    rng = random.Random(seed)
    prompts = []
    for i in range(count):
        if dataset is None:
            n_in = workload.input_tokens.sample(rng)
            prompts.append(Prompt(_synthetic_text(rng, n_in, counter), None, n_in, workload.output_tokens.sample(rng)))
            continue
        entry = dataset[i % len(dataset)]
        out = entry.get("output_tokens") or workload.output_tokens.sample(rng)
        if "prompt" in entry:
            n_in = counter.count(entry["prompt"]) if counter else len(entry["prompt"].split())
            prompts.append(Prompt(entry["prompt"], None, n_in, out))
        else:
            joined = " ".join(str(m.get("content", "")) for m in entry["messages"])
            prompts.append(
                Prompt(None, entry["messages"], counter.count(joined) if counter else len(joined.split()), out)
            )
    return prompts


# ---------------------------------------------------------------------------------------------------------------
# Targets


def _register(cls: Any) -> Any:
    TARGETS[cls.kind] = cls
    return cls


def sagemaker_openai_base_url(region: str, endpoint: str, inference_component: str | None = None) -> str:
    """SageMaker's OpenAI-compatible route (SageMaker Developer Guide, realtime-endpoints-openai-compatible)."""
    component = f"/inference-components/{inference_component}" if inference_component else ""
    return f"https://runtime.sagemaker.{region}.amazonaws.com/endpoints/{endpoint}{component}/openai/v1"


def _short(text: Any) -> str:
    text = str(text)
    return text if len(text) <= ERROR_TEXT_CHARS else text[:ERROR_TEXT_CHARS] + "..."


def _http_kind(status: int) -> str:
    return "throttled" if status == 429 else f"http_{status // 100}xx"


@_register
class OpenAITarget:
    """Chat completions at `base_url` + /chat/completions, streamed (SSE) unless stream=False."""

    kind = "openai"

    def __init__(self, base_url: str, model: str, api_key: str | None = None, stream: bool = True) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise LoadTestError(f"--url must start with http:// or https://, got {base_url!r}")
        self.arguments = {"base_url": base_url, "model": model, "api_key": api_key, "stream": stream}
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key, self.streaming = model, api_key, stream
        self.client: Any = None
        self.workload: Workload | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "url": self.url,
            "model": self.model,
            "stream": self.streaming,
            "authorization": "bearer" if self.api_key else "none",
            "description": f"OpenAI chat completions {self.url} (model {self.model}"
            f"{', streamed' if self.streaming else ''})",
        }

    async def open(self, concurrency: int, workload: Workload) -> None:
        import httpx

        self.workload = workload
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self.client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(workload.request_timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()

    def body(self, prompt: Prompt) -> dict[str, Any]:
        workload = self.workload
        assert workload is not None, "open() first"
        messages = prompt.messages or [{"role": "user", "content": prompt.text}]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            workload.max_tokens_field: prompt.output_tokens,
            "stream": self.streaming,
        }
        if self.streaming:
            body["stream_options"] = {"include_usage": True}
        return {**body, **workload.extra_body}

    async def send(self, prompt: Prompt) -> RequestRecord:
        import httpx

        body = json.dumps(self.body(prompt)).encode()  # encoded before the clock starts
        record = RequestRecord(start=time.perf_counter(), end=0.0, input_tokens=prompt.input_tokens)
        texts: list[str] = []
        usage: dict[str, Any] = {}
        try:
            async with self.client.stream("POST", self.url, content=body, headers=JSON_CONTENT) as reply:
                if reply.status_code != 200:
                    detail = (await reply.aread()).decode("utf-8", "replace")
                    record.error_kind, record.error = (
                        _http_kind(reply.status_code),
                        _short(f"HTTP {reply.status_code}: {detail}"),
                    )
                elif self.streaming:
                    # Raw bytes, stamped as they arrive (before any parsing): each SSE event carrying text gets the
                    # arrival time of the bytes that completed it, as AIPerf stamps its messages.
                    # Read to the end even after [DONE]: a reply left unread closes its connection, and the next
                    # request would pay a new TCP connection inside its time to first token.
                    rest, finished = b"", False
                    async for raw in reply.aiter_raw():
                        arrived = time.perf_counter()
                        if finished:
                            continue
                        *lines, rest = (rest + raw).split(b"\n")
                        for line in lines:
                            if not line.startswith(b"data:"):
                                continue
                            data = line[5:].strip()
                            if data == b"[DONE]":
                                finished = True
                                break
                            obj = json.loads(data)
                            if obj.get("error"):
                                record.error_kind, record.error = "model_error", _short(obj["error"])
                                finished = True
                                break
                            usage = obj.get("usage") or usage
                            # Reasoning is output too: vLLM 0.30.0 streams it as delta.reasoning (entrypoints/
                            # generate/base/protocol.py DeltaMessage), SGLang 0.5.20 as delta.reasoning_content.
                            text = "".join(
                                (c.get("delta") or {}).get("content")
                                or (c.get("delta") or {}).get("reasoning")
                                or (c.get("delta") or {}).get("reasoning_content")
                                or ""
                                for c in obj.get("choices") or []
                            )
                            if text:
                                record.chunk_times.append(arrived)
                                texts.append(text)
                else:
                    obj = json.loads(await reply.aread())
                    usage = obj.get("usage") or {}
                    texts = [(c.get("message") or {}).get("content") or "" for c in obj.get("choices") or []]
        except httpx.TimeoutException as err:
            record.error_kind, record.error = (
                "timeout",
                f"{type(err).__name__} after {time.perf_counter() - record.start:.1f} s",
            )
        except httpx.TransportError as err:
            record.error_kind, record.error = "connection", _short(f"{type(err).__name__}: {err}")
        except (ValueError, AttributeError, TypeError) as err:  # a reply that is not the OpenAI shape
            record.error_kind, record.error = "bad_reply", _short(f"{type(err).__name__}: {err}")
        record.end = time.perf_counter()
        if record.ok:
            _keep_output(
                record, "".join(texts), usage.get("completion_tokens"), len(record.chunk_times), "stream-chunks"
            )
        return record


def _keep_output(record: RequestRecord, text: str, server_count: Any, line_count: int, line_source: str) -> None:
    """What the output tokens are counted from, after the level (count_output): counting is kept out of the
    measured loop, and out of the load-generating processes."""
    if isinstance(server_count, int) and not isinstance(server_count, bool) and server_count >= 0:
        record.output_tokens, record.output_tokens_source = server_count, "server"
    else:
        record.output_text, record.line_count, record.line_source = text, line_count, line_source


def count_output(record: RequestRecord, counter: TokenCounter | None) -> None:
    """Output tokens, best source first: the server's own count (kept while measuring), a tokenizer, one token per
    streamed line or chunk, one per word (approximation)."""
    if not record.ok or record.output_tokens is not None:
        return
    text = record.output_text or ""
    if counter is not None:
        record.output_tokens, record.output_tokens_source = counter.count(text), "tokenizer"
    elif record.line_count:
        record.output_tokens, record.output_tokens_source = record.line_count, record.line_source
    else:
        record.output_tokens, record.output_tokens_source = len(text.split()), "approximation (words)"
    record.output_text = None


@_register
class SageMakerRuntimeTarget:
    """InvokeEndpointWithResponseStream (stream=True) or InvokeEndpoint through boto3, one thread per request."""

    kind = "sagemaker-runtime"

    def __init__(
        self,
        endpoint_name: str,
        region: str | None = None,
        endpoint_url: str | None = None,
        inference_component: str | None = None,
        stream: bool = True,
        session: Any = None,
        body: EndpointBody | None = None,
    ) -> None:
        if not endpoint_name:
            raise LoadTestError("--endpoint-name is required for the sagemaker-runtime target")
        self.arguments = {
            "endpoint_name": endpoint_name,
            "region": region,
            "endpoint_url": endpoint_url,
            "inference_component": inference_component,
            "stream": stream,
            "body": body,
        }
        # How the endpoint's container takes a prompt (the system's ContainerBodies, through the plan): its body
        # kind, the field its chat replies put reasoning in (counted as output: the model generated it), and the
        # parameters it does not read.
        self.endpoint_body = body or EndpointBody()
        self.endpoint_name, self.region, self.endpoint_url = endpoint_name, region, endpoint_url
        self.inference_component, self.streaming = inference_component, stream
        # A boto3 session to make the client from (the caller's credentials, already resolved); a load-generating
        # process of its own makes a new one from `spec`.
        self.session = session
        self.client: Any = None
        self.executor: ThreadPoolExecutor | None = None
        self.workload: Workload | None = None

    def describe(self) -> dict[str, Any]:
        op = "InvokeEndpointWithResponseStream" if self.streaming else "InvokeEndpoint"
        ic = f", component {self.inference_component}" if self.inference_component else ""
        return {
            "kind": self.kind,
            "endpoint": self.endpoint_name,
            "inference_component": self.inference_component,
            "region": self.region,
            "endpoint_url": self.endpoint_url,
            "stream": self.streaming,
            "prompt_body": self.endpoint_body.kind,
            "description": f"sagemaker-runtime {op} {self.endpoint_name}{ic} ({self.endpoint_body.kind} bodies)"
            + (f" at {self.endpoint_url}" if self.endpoint_url else ""),
        }

    async def open(self, concurrency: int, workload: Workload) -> None:
        import boto3
        import botocore.exceptions
        from botocore.config import Config

        self.workload = workload
        # No retries: a load test reports what the endpoint answered. One pooled connection per request in flight.
        config = Config(
            connect_timeout=10,
            read_timeout=workload.request_timeout_s,
            max_pool_connections=concurrency,
            retries={"mode": "standard", "total_max_attempts": 1},
        )
        session = self.session or boto3.session.Session(region_name=self.region)
        if session.get_credentials() is None:  # every request would fail the same way: say it once, before
            raise LoadTestError(
                "sagemaker-runtime: no AWS credentials found (environment, profile or role); the "
                "local server needs any, e.g. AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing"
            )
        try:
            self.client = session.client("sagemaker-runtime", endpoint_url=self.endpoint_url, config=config)
        except (botocore.exceptions.NoRegionError, ValueError) as err:
            raise LoadTestError(f"sagemaker-runtime client: {err} (give --region)") from None
        self.executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="loadtest")

    async def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=False)

    def body(self, prompt: Prompt) -> bytes:
        """One prompt as a generation request, in the body the container takes (endpoint_runtime/bodies.py)."""
        from endpoint_runtime import bodies

        if prompt.text is None:
            raise LoadTestError(
                'the sagemaker-runtime target sends {"inputs": prompt}: a dataset line with '
                '"messages" needs the openai target'
            )
        workload = self.workload
        assert workload is not None, "open() first"
        params: dict[str, Any] = {"max_new_tokens": prompt.output_tokens}
        if workload.exact_output_tokens:
            if not self.endpoint_body.reads("min_new_tokens"):
                raise _exact_lengths_unread()
            params["min_new_tokens"] = prompt.output_tokens
        request: dict[str, Any] = {"inputs": prompt.text, "parameters": {**params, **workload.parameters}}
        # "stream": true is how LMI and the engines' OpenAI servers are asked to stream (endpoint_runtime/stream.py)
        try:
            body = self.endpoint_body.request(request, stream=self.streaming)
        except (bodies.request_contract.RequestError, bodies.request_contract.SetupError) as err:
            raise LoadTestError(f"workload parameters: {err}") from None
        if self.streaming and self.endpoint_body.kind != bodies.GENERATION:
            body["stream_options"] = {"include_usage": True}  # the engine's own count of output tokens
        return json.dumps(body).encode()

    async def send(self, prompt: Prompt) -> RequestRecord:
        body = self.body(prompt)
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._call, body, prompt)

    def _call(self, body: bytes, prompt: Prompt) -> RequestRecord:
        import botocore.exceptions

        from endpoint_runtime import stream

        component = {"InferenceComponentName": self.inference_component} if self.inference_component else {}
        record = RequestRecord(start=time.perf_counter(), end=0.0, input_tokens=prompt.input_tokens)
        try:
            if self.streaming:
                reply = self.client.invoke_endpoint_with_response_stream(
                    EndpointName=self.endpoint_name,
                    ContentType="application/json",
                    Accept="application/jsonlines",
                    Body=body,
                    **component,
                )
                splitter, texts, lines, server_count = stream.LineSplitter(), [], 0, None
                for event in reply["Body"]:
                    part = event.get("PayloadPart")
                    if part is None:
                        continue
                    arrived = time.perf_counter()
                    for raw in splitter.feed(part.get("Bytes", b"")):
                        obj = stream.parse_line(raw)
                        if obj is None:
                            continue
                        text = stream.token_text(obj, self.endpoint_body.reasoning_field)
                        details = obj.get("details")
                        if isinstance(details, dict) and isinstance(details.get("generated_tokens"), int):
                            server_count = details["generated_tokens"]
                        usage = obj.get("usage")  # an OpenAI server's last chunk (stream_options.include_usage)
                        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                            server_count = usage["completion_tokens"]
                        if text:  # one token per line (LMI's framing), stamped with its part's arrival
                            texts.append(text)
                            lines += 1
                            record.chunk_times.append(arrived)
                record.end = time.perf_counter()
                _keep_output(record, "".join(texts), server_count, lines, "stream-lines")
            else:
                reply = self.client.invoke_endpoint(
                    EndpointName=self.endpoint_name,
                    ContentType="application/json",
                    Accept="application/json",
                    Body=body,
                    **component,
                )
                raw = reply["Body"].read()
                record.end = time.perf_counter()
                outputs = self.endpoint_body.outputs(json.loads(raw))
                items = outputs if isinstance(outputs, list) else [outputs]
                text = "".join(str(o.get("generated_text", "")) for o in items if isinstance(o, dict))
                _keep_output(record, text, None, 0, "")
        except stream.ModelStreamFailed as err:
            record.error_kind, record.error = "model_error", _short(err)
        except botocore.exceptions.ClientError as err:
            error = (err.response or {}).get("Error", {})
            code = error.get("Code", "") or type(err).__name__
            kinds = {
                "ModelError": "model_error",
                "ModelStreamError": "model_error",
                "ThrottlingException": "throttled",
                "ValidationError": "validation",
                "ModelNotReadyException": "not_ready",
                "ServiceUnavailable": "not_ready",
                "InternalStreamFailure": "aws_error",
            }
            record.error_kind, record.error = (
                kinds.get(code, "aws_error"),
                _short(f"{code}: {error.get('Message', err)}"),
            )
        except (botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectTimeoutError) as err:
            record.error_kind, record.error = "timeout", _short(err)
        except botocore.exceptions.NoCredentialsError as err:
            record.error_kind, record.error = "credentials", _short(err)
        except (
            botocore.exceptions.EndpointConnectionError,
            botocore.exceptions.ConnectionError,
            botocore.exceptions.HTTPClientError,
        ) as err:
            record.error_kind, record.error = "connection", _short(f"{type(err).__name__}: {err}")
        except (ValueError, UnicodeDecodeError) as err:  # a line or a reply that is not JSON
            record.error_kind, record.error = "bad_reply", _short(f"{type(err).__name__}: {err}")
        if record.end == 0.0 or not record.ok:
            record.end = time.perf_counter()
        return record


# ---------------------------------------------------------------------------------------------------------------
# Running


class Price(BaseModel):
    """The instance's hourly price (USD) and how many instances serve the endpoint; `source` says where the price
    came from (shown in the report). No price: no $ per million tokens."""

    model_config = ConfigDict(extra="forbid")

    usd_per_hour: float | None = Field(default=None, gt=0)
    instance_count: int = Field(default=1, ge=1, le=100)
    instance_type: str | None = None
    source: str | None = None

    @property
    def total_usd_per_hour(self) -> float | None:
        return None if self.usd_per_hour is None else self.usd_per_hour * self.instance_count


def _past(stop_at: float | None) -> bool:
    return stop_at is not None and time.time() >= stop_at


async def _send(target: Any, prompt: Prompt, stop_at: float | None) -> RequestRecord:
    """One request, cut at `stop_at` (epoch seconds: the run's deadline, shared by its processes)."""
    if stop_at is None:
        return await target.send(prompt)
    start = time.perf_counter()
    try:
        return await asyncio.wait_for(target.send(prompt), timeout=max(0.0, stop_at - time.time()))
    except asyncio.TimeoutError:
        return RequestRecord(
            start=start, end=time.perf_counter(), error_kind="deadline", error="unanswered at the run's deadline"
        )


async def _warm_up(target: Any, warmup: list[Prompt], concurrency: int, stop_at: float | None = None) -> None:
    queue = list(reversed(warmup))

    async def worker() -> None:
        while queue and not _past(stop_at):
            await _send(target, queue.pop(), stop_at)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(queue)))))


async def _measure(
    target: Any,
    prompts: list[Prompt],
    concurrency: int,
    count: int | None,
    duration_s: float | None,
    on_done: Any = None,
    stop_at: float | None = None,
) -> list[RequestRecord]:
    """`concurrency` requests in flight until `count` were sent or `duration_s` passed (requests started before
    the end complete), and none after `stop_at` (the run's deadline: requests in flight then are cut)."""
    records: list[RequestRecord] = []
    issued = 0
    deadline = None if duration_s is None else time.perf_counter() + duration_s

    async def worker() -> None:
        nonlocal issued
        while (count is not None and issued < count) or (deadline is not None and time.perf_counter() < deadline):
            if _past(stop_at):
                return
            prompt = prompts[issued % len(prompts)]
            issued += 1
            records.append(await _send(target, prompt, stop_at))
            if on_done is not None:
                on_done()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return records


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _process_level(
    kind: str,
    arguments: dict,
    workload_json: str,
    prompts: list[Prompt],
    concurrency: int,
    count: int | None,
    warmup: list[Prompt],
    barrier: Any,
    done: Any,
    results: Any,
    stop_at: float | None = None,
) -> None:
    """One load-generating process's share of a level: its own target and event loop; warm up, wait for the
    others at the barrier, measure, hand the records back."""
    workload = Workload.model_validate_json(workload_json)
    target = TARGETS[kind](**arguments)

    def one_done() -> None:
        with done.get_lock():
            done.value += 1

    async def go() -> list[RequestRecord]:
        await target.open(concurrency, workload)
        try:
            await _warm_up(target, warmup, concurrency, stop_at)
            await asyncio.get_running_loop().run_in_executor(None, barrier.wait)
            return await _measure(target, prompts, concurrency, count, workload.duration_s, one_done, stop_at)
        finally:
            await target.close()

    gc.collect()
    gc.freeze()
    try:
        results.put(asyncio.run(go()))
    except BaseException as err:  # the parent reports it; a broken barrier releases the others
        barrier.abort()
        results.put(f"{type(err).__name__}: {err}")


def processes_for(workload: Workload, concurrency: int) -> int:
    """Load-generating processes for a level: `processes`, else one per 4 requests in flight up to the CPU count.
    One event loop parses every stream's events; at 8 streams on a 2-core machine it delayed the first token by
    tens of ms more than AIPerf's client did (bench/loadtest.py), so the streams are spread over processes."""
    if workload.processes is not None:
        return min(workload.processes, concurrency)
    return max(1, min(os.cpu_count() or 1, math.ceil(concurrency / 4)))


def _run_level_in_processes(
    target: Any,
    workload: Workload,
    prompts: list[Prompt],
    concurrency: int,
    count: int | None,
    warmup: list[Prompt],
    processes: int,
    progress: bool,
    stop_at: float | None = None,
) -> list[RequestRecord]:
    import multiprocessing
    import queue as queue_module

    from tqdm import tqdm

    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads (torch, tqdm)
    barrier, done, results = ctx.Barrier(processes), ctx.Value("i", 0), ctx.Queue()
    shares = _split(concurrency, processes)
    counts = _split(count, processes) if count is not None else [None] * processes
    warmups = [warmup[i::processes] for i in range(processes)]
    workers = [
        ctx.Process(
            target=_process_level,
            daemon=True,
            args=(
                target.kind,
                target.arguments,
                workload.model_dump_json(),
                prompts[i::processes] or prompts,
                shares[i],
                counts[i],
                warmups[i],
                barrier,
                done,
                results,
                stop_at,
            ),
        )
        for i in range(processes)
    ]
    for w in workers:
        w.start()
    records: list[RequestRecord] = []
    failures: list[str] = []
    bar = tqdm(
        total=count,
        desc=f"concurrency {concurrency} ({processes} processes)",
        unit="req",
        file=sys.stderr,
        disable=not progress,
        leave=False,
    )
    try:
        received = 0
        while received < processes:
            try:
                got = results.get(timeout=0.2)
            except queue_module.Empty:
                if not any(w.is_alive() for w in workers) and results.empty():
                    failures.append("a load-generating process exited without its results")
                    break
                bar.update(done.value - bar.n)
                continue
            received += 1
            if isinstance(got, str):
                failures.append(got)
            else:
                records += got
    finally:
        bar.close()
        for w in workers:
            w.join(timeout=10)
            if w.is_alive():
                w.kill()
    if failures:
        raise LoadTestError(f"concurrency {concurrency}: a load-generating process failed: {failures[0]}")
    return records


def run(target: Any, workload: Workload, price: Price | None = None, progress: bool = True) -> dict[str, Any]:
    """Run every concurrency level of the workload against the target; the result (JSON-able dict)."""
    from tqdm import tqdm

    price = price or Price()
    counter = TokenCounter(workload.tokenizer) if workload.tokenizer else None
    dataset = read_dataset(workload.dataset) if workload.dataset else None
    if dataset is not None and isinstance(target, SageMakerRuntimeTarget) and any("messages" in e for e in dataset):
        raise LoadTestError(
            f'dataset {workload.dataset}: lines with "messages" need the openai target; the '
            f'sagemaker-runtime target sends {{"inputs": prompt}}'
        )
    started = datetime.now(timezone.utc)
    stop_at = None if workload.deadline_s is None else time.time() + workload.deadline_s
    levels = []

    async def in_this_process(
        c: int, prompts: list[Prompt], count: int | None, warmup: list[Prompt]
    ) -> list[RequestRecord]:
        await target.open(c, workload)
        try:
            await _warm_up(target, warmup, c, stop_at)
            bar = tqdm(
                total=count, desc=f"concurrency {c}", unit="req", file=sys.stderr, disable=not progress, leave=False
            )
            try:
                return await _measure(target, prompts, c, count, workload.duration_s, lambda: bar.update(1), stop_at)
            finally:
                bar.close()
        finally:
            await target.close()

    for c in workload.concurrency:
        if _past(stop_at):
            break  # not measured: the result says deadline_passed
        count = workload.requests_at(c)
        pool = count if count is not None else max(64, 8 * c)
        prompts = make_prompts(workload, pool, workload.seed * 1_000_003 + c, counter, dataset)
        warmup = make_prompts(workload, workload.warmup_requests, workload.seed * 1_000_003 - c, counter, dataset)
        processes = processes_for(workload, c)
        if processes > 1:
            records = _run_level_in_processes(target, workload, prompts, c, count, warmup, processes, progress, stop_at)
        else:
            # The objects alive now (a large heap where torch or transformers are imported) are frozen out of the
            # cyclic garbage collector, whose full passes over them would otherwise pause the event loop.
            gc.collect()
            gc.freeze()
            try:
                records = asyncio.run(in_this_process(c, prompts, count, warmup))
            finally:
                gc.unfreeze()
        for record in records:
            count_output(record, counter)
        level = summarize_level(c, records, target.streaming, price.total_usd_per_hour)
        level["processes"] = processes
        levels.append(level)
    if workload.dataset:
        source = f"dataset {workload.dataset}"
    else:
        source = (
            f"synthetic prompts of {workload.input_tokens.mean} +- {workload.input_tokens.stddev:g} input tokens "
            f"({'counted with the tokenizer ' + str(workload.tokenizer) if counter else 'approximation: one common English word per token'})"
        )
    amount = (
        f"{workload.requests_at(workload.concurrency[0]) if workload.requests else 'max(10, 2 x concurrency)'} requests"
        if workload.duration_s is None
        else f"{workload.duration_s:g} s"
    )
    description = (
        f"{source}; {workload.output_tokens.mean} +- {workload.output_tokens.stddev:g} output tokens asked; "
        f"concurrency {', '.join(map(str, workload.concurrency))}; {amount} per level after "
        f"{workload.warmup_requests} warm-up requests"
    )
    return {
        "tool": "python -m model_build loadtest",
        "schema_version": 1,
        "started_at": started.isoformat(timespec="seconds"),
        "seconds": (datetime.now(timezone.utc) - started).total_seconds(),
        "target": target.describe(),
        "workload": {**json.loads(workload.model_dump_json()), "description": description},
        "price": {**price.model_dump(), "total_usd_per_hour": price.total_usd_per_hour},
        "levels": levels,
        # the deadline (s) when it cut the run: a request cut or a level not run (evaluate_slo: a miss)
        "deadline_passed": workload.deadline_s
        if _past(stop_at) or any(lv.get("errors_by_kind", {}).get("deadline") for lv in levels)
        else None,
        "definitions": DEFINITIONS,
    }


# ---------------------------------------------------------------------------------------------------------------
# Command line


def _distribution(text: str) -> dict[str, Any]:
    mean, _, stddev = text.partition(":")
    try:
        return {"mean": int(mean), "stddev": float(stddev or 0)}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MEAN or MEAN:STDDEV (e.g. 128 or 128:16), got {text!r}") from None


def _levels(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers (e.g. 1,4,8), got {text!r}") from None


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def configure_parser(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    t = p.add_argument_group("target")
    t.add_argument("--target", choices=("openai", "sagemaker-runtime"), required=True)
    t.add_argument("--url", help="openai: base URL ending before /chat/completions (e.g. http://127.0.0.1:8000/v1)")
    # vLLM 0.30.0 answers 404 for a `model` that is not one of its served names, and any request with an empty one
    # (entrypoints/serve/engine/serving.py _is_model_supported); SGLang does not check it.
    t.add_argument(
        "--model",
        default="",
        help="openai: the model field (default empty: the served model; through SageMaker's OpenAI route the "
        "endpoint's name also works for vllm, which serves it)",
    )
    t.add_argument(
        "--api-key-env",
        default=None,
        help="openai: environment variable holding a bearer token (default: OPENAI_API_KEY when set)",
    )
    t.add_argument(
        "--sagemaker-token",
        action="store_true",
        help="openai: a SageMaker bearer token from the AWS credentials (sagemaker.core.token_generator)",
    )
    t.add_argument("--endpoint-name", help="sagemaker-runtime: the endpoint")
    t.add_argument("--inference-component", help="sagemaker-runtime: InferenceComponentName")
    t.add_argument("--region", default=None, help="AWS region (default: the AWS configuration's)")
    t.add_argument("--endpoint-url", default=None, help="sagemaker-runtime: another runtime URL (the local server)")
    t.add_argument("--no-stream", action="store_true", help="one reply per request: end-to-end latency only")
    t.add_argument(
        "--prompt-body",
        default="generation",
        choices=("generation", "openai-completion", "openai-chat"),
        help="sagemaker-runtime: the body the container takes a prompt in (the system's; `slo-gate` reads it from "
        "the config): generation {inputs, parameters} (default), openai-completion (vllm), openai-chat (sglang)",
    )
    t.add_argument(
        "--system",
        default=None,
        help="sagemaker-runtime: the endpoint's serving system (a config's `system:`, e.g. vllm, sglang, tgi): the body "
        "its container takes, where its replies put reasoning, and the parameters it does not read (instead of "
        "--prompt-body; `slo-gate` reads it from the config)",
    )
    w = p.add_argument_group("workload (flags override --workload)")
    w.add_argument("--workload", type=Path, help="YAML/JSON file with the workload keys (input_tokens, ...)")
    w.add_argument("--input-tokens", type=_distribution, help="MEAN[:STDDEV] synthetic prompt tokens (default 128)")
    w.add_argument("--output-tokens", type=_distribution, help="MEAN[:STDDEV] tokens asked per request (default 64)")
    w.add_argument("--dataset", type=Path, help='JSONL of {"prompt"} or {"messages"} lines')
    w.add_argument("--tokenizer", type=Path, help="tokenizer directory for counting tokens")
    w.add_argument("--concurrency", type=_levels, help="levels, e.g. 1,4,8 (default 1)")
    w.add_argument("--requests", type=int, help="requests per level (default max(10, 2 x concurrency))")
    w.add_argument("--duration", type=_positive_float, dest="duration_s", help="seconds per level instead of a count")
    w.add_argument("--warmup", type=int, dest="warmup_requests", help="warm-up requests per level (default 0)")
    w.add_argument("--seed", type=int)
    w.add_argument(
        "--processes",
        type=int,
        help="load-generating processes per level (default: one per 4 in flight, up to the CPU count)",
    )
    w.add_argument("--timeout", type=_positive_float, dest="request_timeout_s", help="per request, s (default 120)")
    c = p.add_argument_group("cost and objectives")
    c.add_argument("--price-per-hour", type=_positive_float, help="the instance's USD per hour (wins over the others)")
    c.add_argument("--instance-type", help="the endpoint's instance type, e.g. ml.g5.2xlarge (for a looked-up price)")
    c.add_argument(
        "--price-list-api",
        action="store_true",
        help="look the on-demand hosting price up in the AWS Price List API (pricing:GetProducts)",
    )
    c.add_argument("--price-table", type=Path, help="dated price table (JSON) to read, or to keep a looked-up price in")
    c.add_argument("--instance-count", type=int, default=1, help="instances behind the endpoint (default 1)")
    c.add_argument(
        "--slo",
        type=Path,
        help="YAML/JSON with p95_ttft_ms, p95_itl_ms, p95_e2e_ms, min_output_tokens_per_s, "
        "concurrency, max_usd_per_million_tokens, max_error_rate (a config's slo: "
        "block; its usd_per_hour prices when no price flag does): exit 1 if missed",
    )
    p.add_argument("--out", type=Path, default=Path("build/loadtest"), help="where loadtest.{json,md,png} go")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _read_mapping(path: Path, what: str) -> dict[str, Any]:
    import yaml

    try:
        value = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise LoadTestError(f"{what} {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise LoadTestError(f"{what} {path}: not YAML/JSON: {err}") from None
    if not isinstance(value, dict):
        raise LoadTestError(f"{what} {path}: must be a mapping of keys, got {type(value).__name__}")
    return value


def target_from_args(args: argparse.Namespace) -> Any:
    if args.target == "openai":
        if not args.url:
            raise LoadTestError("--url is required for the openai target")
        if args.endpoint_name or args.inference_component or args.endpoint_url:
            raise LoadTestError(
                "--endpoint-name, --inference-component and --endpoint-url are for the sagemaker-runtime "
                "target; the openai target takes --url"
            )
        api_key = None
        if args.sagemaker_token:
            try:
                from sagemaker.core.token_generator import generate_token
            except ImportError:
                raise LoadTestError(
                    "--sagemaker-token needs the sagemaker-core package (requirements-dev.txt)"
                ) from None
            try:
                api_key = generate_token(region=args.region)
            except (ValueError, RuntimeError) as err:
                raise LoadTestError(f"--sagemaker-token: {err}") from None
        elif args.api_key_env:
            api_key = os.environ.get(args.api_key_env)
            if not api_key:
                raise LoadTestError(f"--api-key-env: environment variable {args.api_key_env} is not set")
        else:
            api_key = os.environ.get("OPENAI_API_KEY") or None
        return OpenAITarget(args.url, args.model, api_key, stream=not args.no_stream)
    if args.url or args.sagemaker_token:
        raise LoadTestError("--url and --sagemaker-token are for the openai target")
    return SageMakerRuntimeTarget(
        args.endpoint_name,
        args.region,
        args.endpoint_url,
        args.inference_component,
        stream=not args.no_stream,
        body=body_from_args(args),
    )


def body_from_args(args: argparse.Namespace) -> EndpointBody:
    """The sagemaker-runtime target's body: the --system's (deployment.endpoint_body_of), else --prompt-body's kind
    alone (no reasoning field, every parameter read)."""
    if getattr(args, "system", None) is None:
        return EndpointBody(args.prompt_body)
    if args.prompt_body != "generation":
        raise LoadTestError("give --system or --prompt-body, not both (the system names its body kind)")
    from deployment import ConfigError, endpoint_body_of

    try:
        return endpoint_body_of(args.system)
    except ConfigError as err:
        raise LoadTestError(f"--system: {err}") from None


def _exact_lengths_unread() -> LoadTestError:
    return LoadTestError(
        "exact_output_tokens: true needs min_new_tokens, which this endpoint's container does not read (its "
        "generation body has no such field); set exact_output_tokens: false"
    )


def fit_workload_to_body(workload: Workload, body: EndpointBody, echo: Any = print) -> Workload:
    """A workload whose default exact_output_tokens (min_new_tokens) the container does not read asks no fixed
    lengths, said once (as the SLO gate does); one that set it true is refused, naming the key."""
    if not workload.exact_output_tokens or body.reads("min_new_tokens"):
        return workload
    if "exact_output_tokens" in workload.model_fields_set:
        raise _exact_lengths_unread()
    echo(
        "note: this system's container reads no min_new_tokens: output lengths are not fixed (exact_output_tokens: false)"
    )
    return workload.model_copy(update={"exact_output_tokens": False})


def workload_from_args(args: argparse.Namespace) -> Workload:
    values = _read_mapping(args.workload, "--workload") if args.workload else {}
    for key in (
        "input_tokens",
        "output_tokens",
        "dataset",
        "tokenizer",
        "concurrency",
        "requests",
        "duration_s",
        "warmup_requests",
        "seed",
        "request_timeout_s",
        "processes",
    ):
        if getattr(args, key, None) is not None:
            values[key] = getattr(args, key)
    if args.duration_s is not None and args.requests is None:
        values.pop("requests", None)
    if args.requests is not None and args.duration_s is None:
        values.pop("duration_s", None)
    return parse_workload(values)


def price_from_args(args: argparse.Namespace) -> Price:
    """--price-per-hour, else the Price List API (kept in --price-table when given), else --price-table; none: no
    price (and no $ per million tokens)."""
    from load_testing import prices

    count, kind = args.instance_count, args.instance_type
    if args.price_per_hour is not None:
        return Price(
            usd_per_hour=args.price_per_hour,
            instance_count=count,
            instance_type=kind,
            source="given (--price-per-hour)",
        )
    if not (args.price_list_api or args.price_table):
        return Price(instance_count=count, instance_type=kind)
    if not kind or not args.region:
        raise LoadTestError("a looked-up price needs --instance-type and --region")
    try:
        if args.price_list_api:
            usd = prices.fetch_hosting_price(kind, args.region)
            if args.price_table:
                table = json.loads(args.price_table.read_text()) if args.price_table.is_file() else {"prices": {}}
                table.get("prices", {}).setdefault(args.region, {})[kind] = usd
                prices.write_table(args.price_table, table["prices"])
            source = f"{prices.SOURCE}, fetched {datetime.now(timezone.utc).date().isoformat()}"
        else:
            usd, source = prices.price_from_table(args.price_table, kind, args.region)
    except (prices.PriceError, ValueError) as err:
        raise LoadTestError(f"price: {err}") from None
    return Price(usd_per_hour=usd, instance_count=count, instance_type=kind, source=source)


def run_args(args: argparse.Namespace) -> int:
    """The command: run, write loadtest.{json,md,png} under --out, print the Markdown, judge --slo."""
    try:
        workload = workload_from_args(args)
        slo = parse_slo(_read_mapping(args.slo, "--slo"), "--slo") if args.slo else None
        if args.instance_count < 1:
            raise LoadTestError(f"--instance-count must be >= 1, got {args.instance_count}")
        price = price_from_args(args)
        if price.usd_per_hour is None and slo is not None and slo.usd_per_hour is not None:
            price = Price(
                usd_per_hour=slo.usd_per_hour,
                instance_count=args.instance_count,
                instance_type=args.instance_type,
                source=f"{args.slo}: usd_per_hour",
            )
        target = target_from_args(args)
        if isinstance(target, SageMakerRuntimeTarget):
            workload = fit_workload_to_body(workload, target.endpoint_body)
        result = run(target, workload, price, progress=not args.quiet)
        if slo is not None:
            result["slo"] = slo.model_dump()
            result["slo_misses"] = evaluate_slo(result, slo)
        paths = write_outputs(result, args.out)
    except (LoadTestError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    print(paths["markdown"].read_text())
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    if result.get("slo_misses"):
        print("SLO missed:\n" + "\n".join(f"  - {m}" for m in result["slo_misses"]), file=sys.stderr)
        return EXIT_SLO_MISSED
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """`python -m model_build loadtest`: one line in model_build/cli.py's parser()."""
    p = subparsers.add_parser("loadtest", help="drive an endpoint at concurrency levels: TTFT, ITL, tokens/s, $/Mtok")
    configure_parser(p)
    p.set_defaults(run=run_args)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = configure_parser(
        argparse.ArgumentParser(prog="python -m model_build loadtest", description=__doc__.splitlines()[0])
    ).parse_args(argv)
    try:
        return run_args(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "LoadTestError",
    "OpenAITarget",
    "Price",
    "Prompt",
    "SageMakerRuntimeTarget",
    "TokenCounter",
    "Workload",
    "add_parser",
    "main",
    "make_prompts",
    "parse_workload",
    "read_dataset",
    "run",
    "run_args",
    "sagemaker_openai_base_url",
]
