"""A paced stand-in model server: real HTTP, a fixed time to first token and a fixed gap between tokens, so a load
generator's TTFT, ITL and throughput can be checked against known values (and against another tool's).

    python -m bench.paced_server --port 8123 --ttft-ms 50 --itl-ms 10 [--tokens 32]

Paths (any endpoint name): OpenAI chat completions (`POST /v1/chat/completions`,
`/endpoints/<ep>[/inference-components/<ic>]/openai/v1/chat/completions`), streamed as SSE `data:` chunks with usage when
`stream_options.include_usage` asks, or one JSON answer; our generation format on `/invocations` and
sagemaker-runtime's `/endpoints/<ep>/invocations` (`[{"generated_text"}]`) and
`/endpoints/<ep>/invocations-response-stream` (AWS event-stream PayloadParts of LMI JSON lines, as
local_runtime/serve.py frames them). Tokens per reply: the request's max_completion_tokens / max_tokens /
parameters.max_new_tokens, else --tokens. Token i (0-based) is sent at start + ttft + i * itl (an absolute
schedule, so sleep overshoot does not accumulate). With --ttft-ms 0 --itl-ms 0 it answers at once: the load
generator's own ceiling. A raw ASGI app under uvicorn: no framework cost in what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from typing import Any

from local_runtime import event_stream

# vLLM-style and SageMaker's OpenAI routes (SageMaker Developer Guide, realtime-endpoints-openai-compatible)
CHAT_PATH = re.compile(r"^(/endpoints/[^/]+(/inference-components/[^/]+)?/openai)?/v1/chat/completions$")
WORD = " tok"  # every token's text: one GPT-2 BPE token, so a tokenizer counts what the server says it sent


class Pacing:
    def __init__(self, ttft_s: float, itl_s: float, default_tokens: int) -> None:
        self.ttft_s, self.itl_s, self.default_tokens = ttft_s, itl_s, default_tokens

    async def tokens(self, n: int):
        """Yield token indexes 0..n-1, each at its scheduled time."""
        start = time.perf_counter()
        for i in range(n):
            delay = start + self.ttft_s + i * self.itl_s - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            yield i


def _count(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


async def _read_body(receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def _send_json(send, status: int, obj: Any, headers: list | None = None) -> None:
    data = json.dumps(obj).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
            + (headers or []),
        }
    )
    await send({"type": "http.response.body", "body": data})


def create_app(pacing: Pacing):
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        path, method = scope["path"], scope["method"]
        if method == "GET" and path in ("/ping", "/health", "/v1/models"):
            await _send_json(send, 200, {"object": "list", "data": [{"id": "paced", "object": "model"}]})
            return
        if method != "POST":
            await _send_json(send, 404, {"error": f"no route {method} {path}"})
            return
        try:
            request = json.loads(await _read_body(receive) or b"{}")
        except ValueError as err:
            await _send_json(send, 400, {"error": f"body is not JSON: {err}"})
            return
        if CHAT_PATH.match(path):
            await _chat(pacing, request, send)
        elif path.endswith("/invocations-response-stream"):
            await _lmi_stream(pacing, request, send)
        elif path.endswith("/invocations"):
            n = _count((request.get("parameters") or {}).get("max_new_tokens"), pacing.default_tokens)
            async for _ in pacing.tokens(n):
                pass
            await _send_json(
                send, 200, [{"generated_text": WORD * n}], [(b"x-amzn-invoked-production-variant", b"AllTraffic")]
            )
        else:
            await _send_json(send, 404, {"error": f"no route POST {path}"})

    return app


async def _chat(pacing: Pacing, request: dict, send) -> None:
    n = _count(request.get("max_completion_tokens", request.get("max_tokens")), pacing.default_tokens)
    created, model = int(time.time()), request.get("model", "paced")
    base = {"id": "chatcmpl-paced", "created": created, "model": model}
    usage = {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n}
    if not request.get("stream"):
        async for _ in pacing.tokens(n):
            pass
        await _send_json(
            send,
            200,
            {
                **base,
                "object": "chat.completion",
                "usage": usage,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": WORD * n}, "finish_reason": "length"}
                ],
            },
        )
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )

    async def event(obj: Any) -> None:
        await send(
            {"type": "http.response.body", "body": b"data: " + json.dumps(obj).encode() + b"\n\n", "more_body": True}
        )

    chunk = {**base, "object": "chat.completion.chunk"}
    await event({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    async for i in pacing.tokens(n):
        await event(
            {
                **chunk,
                "choices": [
                    {"index": 0, "delta": {"content": WORD}, "finish_reason": "length" if i == n - 1 else None}
                ],
            }
        )
    if (request.get("stream_options") or {}).get("include_usage"):
        await event({**chunk, "choices": [], "usage": usage})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


async def _lmi_stream(pacing: Pacing, request: dict, send) -> None:
    n = _count((request.get("parameters") or {}).get("max_new_tokens"), pacing.default_tokens)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", event_stream.CONTENT_TYPE.encode()),
                (b"x-amzn-sagemaker-content-type", b"application/jsonlines"),
            ],
        }
    )
    async for i in pacing.tokens(n):
        line = {"token": {"id": i, "text": WORD}}
        await send(
            {
                "type": "http.response.body",
                "more_body": True,
                "body": event_stream.payload_part((json.dumps(line) + "\n").encode()),
            }
        )
    final = {"generated_text": WORD * n, "details": {"finish_reason": "length", "generated_tokens": n}}
    await send({"type": "http.response.body", "body": event_stream.payload_part((json.dumps(final) + "\n").encode())})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.paced_server", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ttft-ms", type=float, default=50.0, help="time to the first token")
    p.add_argument("--itl-ms", type=float, default=10.0, help="gap between tokens")
    p.add_argument("--tokens", type=int, default=32, help="tokens per reply when the request does not say")
    args = p.parse_args(argv)
    for name in ("ttft_ms", "itl_ms"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if args.tokens < 1:
        p.error(f"--tokens must be >= 1, got {args.tokens}")
    import uvicorn

    app = create_app(Pacing(args.ttft_ms / 1000, args.itl_ms / 1000, args.tokens))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
