"""Benchmark: the load test (load_testing/loadtest.py) against a real tool, its own ceiling, and the front doors' cost.

1. Cross-check with AIPerf (pinned in requirements-aiperf.txt, its own venv .venv-aiperf: `make aiperf-env`): the
   paced server (bench/paced_server.py, its own process: first token after TTFT ms, then one token every ITL ms)
   answers both tools, one after the other in this run, with the same workload (synthetic prompts counted by the
   tiny GPT-2 tokenizer, fixed output tokens, concurrency levels, request count, warm-up). AIPerf counts output
   tokens from the server's usage (--use-server-token-count), as ours does. Compared: TTFT p50, TPOT (ours) with
   AIPerf's inter_token_latency (the same formula), ITL (ours) with AIPerf's inter_chunk_latency (the same),
   output tokens/s and requests/s; the pacing says what both should see. Goal: within 10 %.
2. The real local server (`python -m model_build serve` on the GPT-2 124M shape, CPU): our load test through
   sagemaker-runtime's response stream; and AIPerf with ours on its OpenAI route when the server has one.
3. The load test's ceiling: requests/s it drives against the paced server answering at once (0 ms, 1 token).
4. The front doors' added latency: the invoke function's code (endpoint_runtime/invoke.py invoke) and the stream
   function's (endpoint_runtime/stream.py open_stream, read to its end), in process with a boto3 client pointed at
   the paced server answering at once, against the same boto3 call made directly; interleaved, same run; p50/p99
   and the p50 of the paired differences. Goal: 5 ms p50 or less added.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
AIPERF = REPO / ".venv-aiperf" / "bin" / "aiperf"
ENDPOINT = "paced"


def start_paced(port: int, ttft_ms: float, itl_ms: float, tokens: int, log_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "bench.paced_server",
        "--port",
        str(port),
        "--ttft-ms",
        str(ttft_ms),
        "--itl-ms",
        str(itl_ms),
        "--tokens",
        str(tokens),
    ]
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    from bench import serving

    serving.wait_ready(url, proc, timeout)


def stop(proc: subprocess.Popen) -> None:
    from bench import serving

    serving.stop(proc)


def aiperf_version() -> str | None:
    if not AIPERF.exists():
        return None
    out = subprocess.run(
        [str(AIPERF.parent / "python"), "-c", "import importlib.metadata as m; print(m.version('aiperf'))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout.strip() or None


def run_aiperf(
    base_url: str,
    out_dir: Path,
    tokenizer: Path,
    concurrency: int,
    requests: int,
    warmup: int,
    input_tokens: int,
    output_tokens: int,
    endpoint_path: str | None = None,
    seed: int = 1,
    api_key: str | None = None,
) -> dict:
    """One AIPerf profile run; its profile_export_aiperf.json (metrics in ms, throughputs per second)."""
    cmd = [
        str(AIPERF),
        "profile",
        "--model",
        "paced",
        "--url",
        base_url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--tokenizer",
        str(tokenizer),
        "--concurrency",
        str(concurrency),
        "--request-count",
        str(requests),
        "--warmup-request-count",
        str(warmup),
        "--prompt-input-tokens-mean",
        str(input_tokens),
        "--prompt-input-tokens-stddev",
        "0",
        "--prompt-output-tokens-mean",
        str(output_tokens),
        "--prompt-output-tokens-stddev",
        "0",
        "--use-server-token-count",
        "--ui-type",
        "none",
        "--output-artifact-dir",
        str(out_dir),
        "--random-seed",
        str(seed),
        "--no-server-metrics",
        "--no-gpu-telemetry",
    ]
    if endpoint_path:
        cmd += ["--endpoint", endpoint_path]
    if api_key:
        cmd += ["--api-key", api_key]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=out_dir.parent)
    (out_dir.parent / f"{out_dir.name}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"aiperf exited {done.returncode}: {(done.stdout + done.stderr)[-800:]}")
    return json.loads((out_dir / "profile_export_aiperf.json").read_text())


def _ours(
    target: Any,
    tokenizer: Path,
    levels: list[int],
    requests: int,
    warmup: int,
    input_tokens: int,
    output_tokens: int,
    out: Path,
    stem: str,
) -> dict:
    from load_testing import loadtest
    from load_testing import report as loadtest_report

    workload = loadtest.parse_workload(
        {
            "input_tokens": {"mean": input_tokens},
            "output_tokens": {"mean": output_tokens},
            "tokenizer": str(tokenizer),
            "concurrency": levels,
            "requests": requests,
            "warmup_requests": warmup,
            "seed": 1,
        }
    )
    result = loadtest.run(target, workload, progress=False)
    loadtest_report.write_outputs(result, out, stem)
    return result


def run_ours_cli(
    base_url: str,
    out_dir: Path,
    tokenizer: Path | None,
    concurrency: int,
    requests: int,
    warmup: int,
    input_tokens: int,
    output_tokens: int,
) -> dict:
    """`python -m load_testing.loadtest` in its own process (as AIPerf runs in its own); its one level."""
    cmd = [
        sys.executable,
        "-m",
        "load_testing.loadtest",
        "--target",
        "openai",
        "--url",
        base_url,
        "--model",
        "paced",
        "--concurrency",
        str(concurrency),
        "--requests",
        str(requests),
        "--warmup",
        str(warmup),
        "--input-tokens",
        str(input_tokens),
        "--output-tokens",
        str(output_tokens),
        "--seed",
        "1",
        "--out",
        str(out_dir),
        "--quiet",
    ] + (["--tokenizer", str(tokenizer)] if tokenizer else [])
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    if done.returncode != 0:
        raise RuntimeError(f"load_testing.loadtest exited {done.returncode}: {done.stderr[-800:]}")
    return json.loads((out_dir / "loadtest.json").read_text())["levels"][0]


async def _bare_httpx_ttft(url: str, requests: int, input_tokens: int, output_tokens: int) -> list[float]:
    import httpx

    body = json.dumps(
        {
            "model": "paced",
            "messages": [{"role": "user", "content": "the " * input_tokens}],
            "max_completion_tokens": output_tokens,
            "stream": True,
        }
    ).encode()
    ttft = []
    async with httpx.AsyncClient() as client:
        for _ in range(requests):
            started, first = time.perf_counter(), None
            async with client.stream("POST", url, content=body, headers={"Content-Type": "application/json"}) as reply:
                async for raw in reply.aiter_raw():
                    if first is None and b'"content": " tok"' in raw:
                        first = time.perf_counter() - started
            assert first is not None, "the reply carried no token"
            ttft.append(first * 1000)
    return ttft


def bare_httpx_ttft(url: str, requests: int, input_tokens: int, output_tokens: int) -> dict[str, float]:
    """A control for the client's own cost: TTFT p50 of the bare httpx loop (no load-test bookkeeping), in its own
    process, one request at a time."""
    code = (
        "import asyncio, json, sys; from bench.loadtest import _bare_httpx_ttft; "
        "print(json.dumps(asyncio.run(_bare_httpx_ttft(*json.loads(sys.argv[1])))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps([url, requests, input_tokens, output_tokens])],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if done.returncode != 0:
        raise RuntimeError(f"bare httpx control failed: {done.stderr[-500:]}")
    xs = json.loads(done.stdout)
    return {"p50": statistics.median(xs), "min": min(xs), "n": len(xs)}


def compare(ours: dict, theirs: dict) -> dict[str, Any]:
    """Ours / AIPerf's, metric by metric, for one concurrency level."""
    pairs = {
        "ttft_p50_ms": (ours["ttft_ms"].get("p50"), theirs["time_to_first_token"]["p50"]),
        "tpot_p50_ms_vs_aiperf_itl": (ours["tpot_ms"].get("p50"), theirs["inter_token_latency"]["p50"]),
        "itl_p50_ms_vs_aiperf_icl": (ours["itl_ms"].get("p50"), theirs["inter_chunk_latency"]["p50"]),
        "e2e_p50_ms_vs_aiperf_request_latency": (ours["e2e_ms"].get("p50"), theirs["request_latency"]["p50"]),
        "output_tokens_per_s": (ours["output_tokens_per_s"], theirs["output_token_throughput"]["avg"]),
        "requests_per_s": (ours["requests_per_s"], theirs["request_throughput"]["avg"]),
    }
    out = {}
    for name, (a, b) in pairs.items():
        ratio = a / b if a is not None and b else None
        out[name] = {
            "ours": a,
            "aiperf": b,
            "ratio": ratio,
            "within_10pct": ratio is not None and abs(ratio - 1) <= 0.10,
        }
    # Where throughput differs at equal latency: the time each of the `concurrency` slots stays idle between one
    # reply and the next request (wall x concurrency / requests - mean request latency). AIPerf's closed loop hands
    # a credit back to its timing service and on to a worker (ZMQ) before the next request goes out.
    c, n = ours["concurrency"], ours["succeeded"]
    theirs_n = theirs["request_count"]["avg"]
    out["idle_ms_between_requests_per_slot"] = {
        "ours": ours["wall_s"] * 1000 * c / n - ours["e2e_ms"]["mean"] if n else None,
        "aiperf": theirs["benchmark_duration"]["avg"] * 1000 * c / theirs_n - theirs["request_latency"]["avg"],
        "aiperf_credit_to_start_p50_ms": (theirs.get("credit_to_start_latency") or {}).get("p50"),
    }
    return out


def cross_check(
    raw: Path,
    tokenizer: Path,
    log,
    *,
    ttft_ms: float = 50.0,
    itl_ms: float = 10.0,
    output_tokens: int = 32,
    input_tokens: int = 64,
    levels=(1, 8),
    requests: int = 48,
    warmup: int = 4,
) -> dict[str, Any]:
    from local_emulator.moto_server import free_port

    version = aiperf_version()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_paced(port, ttft_ms, itl_ms, output_tokens, raw / "paced-crosscheck.log")
    out: dict[str, Any] = {
        "server": {"ttft_ms": ttft_ms, "itl_ms": itl_ms, "output_tokens": output_tokens},
        "workload": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "levels": list(levels),
            "requests": requests,
            "warmup": warmup,
        },
        "expected": {
            "ttft_ms": ttft_ms,
            "tpot_ms": itl_ms,
            "e2e_ms": ttft_ms + (output_tokens - 1) * itl_ms,
            "output_tokens_per_s": {
                str(c): c * output_tokens / ((ttft_ms + (output_tokens - 1) * itl_ms) / 1000) for c in levels
            },
        },
        "aiperf_version": version,
        "levels": {},
    }
    try:
        wait_ready(url, proc)
        for c in levels:  # per level: ours, then AIPerf, each in its own process, back to back
            lv = run_ours_cli(
                url + "/v1", raw / f"ours-c{c}", tokenizer, c, requests, warmup, input_tokens, output_tokens
            )
            cell: dict[str, Any] = {
                "ours": {
                    k: lv[k]
                    for k in (
                        "ttft_ms",
                        "tpot_ms",
                        "itl_ms",
                        "e2e_ms",
                        "output_tokens_per_s",
                        "requests_per_s",
                        "errors",
                    )
                }
            }
            if version is None:
                cell["aiperf"] = {"skipped": "no .venv-aiperf: run `make aiperf-env`"}
            else:
                theirs = run_aiperf(
                    url, raw / f"aiperf-c{c}", tokenizer, c, requests, warmup, input_tokens, output_tokens
                )
                cell["aiperf"] = {
                    k: theirs.get(k)
                    for k in (
                        "time_to_first_token",
                        "inter_token_latency",
                        "inter_chunk_latency",
                        "request_latency",
                        "output_token_throughput",
                        "request_throughput",
                        "benchmark_duration",
                        "credit_to_start_latency",
                    )
                }
                cell["comparison"] = compare(lv, theirs)
            if c == 1:
                cell["bare_httpx_ttft_ms"] = bare_httpx_ttft(
                    url + "/v1/chat/completions", requests, input_tokens, output_tokens
                )
            out["levels"][str(c)] = cell
            log(
                f"  c={c}: ours TTFT p50 {lv['ttft_ms']['p50']:.1f} ms, TPOT {lv['tpot_ms']['p50']:.2f} ms, "
                f"{lv['output_tokens_per_s']:.0f} tok/s"
                + (
                    ""
                    if version is None
                    else f"; AIPerf {cell['aiperf']['time_to_first_token']['p50']:.1f} ms, "
                    f"{cell['aiperf']['inter_token_latency']['p50']:.2f} ms, {cell['aiperf']['output_token_throughput']['avg']:.0f} tok/s"
                )
            )
    finally:
        stop(proc)
    return out


def text_vocab_checkpoint(out: Path) -> Path:
    """GPT-2 124M's blocks (12 layers, 768 wide, random weights) with the offline tokenizer's own vocabulary:
    bench/models.py's gpt2-124m keeps GPT-2's 50257 ids, which the small tokenizer decodes to no text for almost
    every generated id, so a stream carries (and a load test can time) no text."""
    out = Path(out)
    if (out / "config.json").is_file():
        return out
    import torch
    import transformers

    from bench import models
    from model_build.tiny_models import EOS, write_gpt2_tokenizer

    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    kwargs = dict(models.SHAPES["gpt2-124m"][1])
    write_gpt2_tokenizer(tmp, kwargs["n_positions"])
    vocab = json.loads((tmp / "vocab.json").read_text())
    kwargs["vocab_size"] = len(vocab)
    eos = vocab[EOS]
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(**kwargs, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    ).eval()
    model.save_pretrained(tmp)
    tmp.rename(out)
    return out


# The chat template of config/local.yaml's tiny GPT-2 (its tokenizer has none either).
CHAT_YAML = (
    '    chat:\n      template: "{% for m in messages %}{{ m.role }}: {{ m.content }}\\n{% endfor %}'
    '{% if add_generation_prompt %}assistant:{% endif %}"\n'
)


def _measure(out: dict[str, Any], name: str, fn, log) -> None:
    """out[name] = fn(), or {"error": ...} when it raises (logged as FAILED)."""
    try:
        out[name] = fn()
    except Exception as err:
        out[name] = {"error": f"{type(err).__name__}: {err}"}
        log(f"  {name}: FAILED {type(err).__name__}: {err}")


def local_server(
    raw: Path, log, *, levels=(1, 2, 4), requests: int = 12, output_tokens: int = 32, input_tokens: int = 64
) -> dict[str, Any]:
    """GPT-2 124M's blocks served by `python -m model_build serve`: our load test on its response stream; AIPerf
    against its OpenAI route where it has one."""
    from bench import models, serving
    from load_testing import loadtest
    from local_emulator.moto_server import free_port

    source = text_vocab_checkpoint(raw / "src-gpt2-124m-textvocab").resolve()
    artifacts: dict[str, Path] = {}
    # A chat template (the tokenizer has none): without one the OpenAI route answers 400 chat_template_missing
    text = "endpoints:\n" + models.endpoint_yaml("srv-hf", source, dtype="fp32", extra=CHAT_YAML)
    log("  local server: building the GPT-2 124M-shape artifact with a chat template (reused when unchanged)")
    artifacts["hf-fastload"], _ = models.build(
        text, raw / "config-loadtest-gpt2-124m.yaml", "srv-hf", (raw / "serve-gpt2-124m-textvocab" / "srv-hf").resolve()
    )
    artifacts["hf-fastload:config"] = raw / "config-loadtest-gpt2-124m.yaml"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log(f"  local server: starting `python -m model_build serve` on {url}")
    proc = serving.start_server("hf-fastload", artifacts, port, raw / "server-loadtest-gpt2-124m.log")
    out: dict[str, Any] = {
        "model": "GPT-2 124M blocks with the offline tokenizer's vocabulary (random weights), fp32 "
        "on CPU, one torch thread"
    }
    try:
        serving.wait_ready(url, proc)
        for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
            os.environ.setdefault(k, v)
        target = loadtest.SageMakerRuntimeTarget("srv-hf", "us-east-1", url)

        def response_stream() -> dict[str, Any]:
            result = _ours(
                target,
                source,
                list(levels),
                requests,
                1,
                input_tokens,
                output_tokens,
                raw / "loadtest",
                "gpt2-124m-stream",
            )
            for lv in result["levels"]:
                log(
                    f"  gpt2-124m c={lv['concurrency']}: TTFT p50 {lv['ttft_ms'].get('p50', float('nan')):.0f} ms, "
                    f"ITL p50 {lv['itl_ms'].get('p50', float('nan')):.1f} ms, {lv['output_tokens_per_s']:.1f} tok/s, "
                    f"{lv['errors']} errors"
                )
            return result

        # Each sub-measurement is recorded on its own: one failing (an {"error": ...} record, which makes `make
        # bench` exit non-zero naming it) leaves the figures of the others in place.
        _measure(out, "ours_response_stream", response_stream, log)
        route = "/endpoints/srv-hf/openai/v1/chat/completions"
        from sagemaker.core.token_generator import generate_token

        token = generate_token(region="us-east-1")  # the route wants SageMaker's bearer token (any keys, locally)
        openai_target = loadtest.OpenAITarget(f"{url}/endpoints/srv-hf/openai/v1", "m", api_key=token)

        def openai_route() -> dict[str, Any]:
            result = _ours(
                openai_target,
                source,
                [levels[0]],
                requests,
                1,
                input_tokens,
                output_tokens,
                raw / "loadtest",
                "gpt2-124m-openai",
            )
            lv = result["levels"][0]
            if lv["errors"]:
                raise RuntimeError(f"{lv['errors']} of {lv['requests']} requests failed on {route}")
            return result

        _measure(out, "ours_openai_route", openai_route, log)
        if aiperf_version() is None:
            out["openai_route"] = {"skipped": "no .venv-aiperf: run `make aiperf-env`"}
        elif "error" not in out["ours_openai_route"]:

            def aiperf_comparison() -> dict[str, Any]:
                theirs = run_aiperf(
                    url,
                    raw / "aiperf-gpt2-124m",
                    source,
                    levels[0],
                    requests,
                    1,
                    input_tokens,
                    output_tokens,
                    endpoint_path=route,
                    api_key=token,
                )
                return {"comparison": compare(out["ours_openai_route"]["levels"][0], theirs)}

            _measure(out, "openai_route", aiperf_comparison, log)
    finally:
        stop(proc)
    return out


def ceiling(
    raw: Path,
    tokenizer: Path,
    log,
    *,
    levels=(1, 8, 32, 64),
    requests: int = 2000,
    warmup: int = 50,
    with_aiperf: bool = True,
) -> dict[str, Any]:
    """Requests/s our load test (its own process, openai target, streamed) drives against the paced server
    answering at once; AIPerf against the same server at the highest level, for reference."""
    from local_emulator.moto_server import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_paced(port, 0, 0, 1, raw / "paced-ceiling.log")
    cells: dict[str, Any] = {}
    reference: dict[str, Any] = {}
    try:
        wait_ready(url, proc)
        for c in levels:
            # no tokenizer: the server counts the one token; prompts of 16 words (AIPerf needs its tokenizer)
            lv = run_ours_cli(url + "/v1", raw / f"ceiling-c{c}", None, c, requests, warmup, 16, 1)
            cells[str(c)] = {"requests_per_s": lv["requests_per_s"], "e2e_ms": lv["e2e_ms"], "errors": lv["errors"]}
        if with_aiperf and aiperf_version() is not None:
            theirs = run_aiperf(url, raw / "aiperf-ceiling", tokenizer, levels[-1], requests, warmup, 16, 1)
            reference = {
                "concurrency": levels[-1],
                "requests_per_s": theirs["request_throughput"]["avg"],
                "request_latency_p50_ms": theirs["request_latency"]["p50"],
            }
    finally:
        stop(proc)
    log(
        "  "
        + "; ".join(f"c={c}: {v['requests_per_s']:.0f} req/s" for c, v in cells.items())
        + (f"; AIPerf c={reference['concurrency']}: {reference['requests_per_s']:.0f} req/s" if reference else "")
    )
    return {
        "target": "openai, streamed, 1 output token, paced server answering at once (own process)",
        "requests_per_level": requests,
        "levels": cells,
        "aiperf_reference": reference or None,
        "max_requests_per_s": max(v["requests_per_s"] for v in cells.values()),
    }


def _pct(xs: list[float], q: float) -> float:
    from load_testing.report import percentile

    return percentile(xs, q)


def front_doors(raw: Path, log, *, reps: int = 400, tokens: int = 8, warmup: int = 20) -> dict[str, Any]:
    """The invoke and stream functions' code in process against direct boto3 calls, same server, interleaved."""
    import boto3
    from botocore.config import Config

    from endpoint_runtime import invoke, stream
    from local_emulator.moto_server import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_paced(port, 0, 0, tokens, raw / "paced-frontdoors.log")
    payload = {"inputs": "The quick brown fox", "parameters": {"max_new_tokens": tokens}}
    body = json.dumps(payload).encode()
    stream_body = json.dumps({**payload, "stream": True}).encode()
    try:
        wait_ready(url, proc)
        client = boto3.client(
            "sagemaker-runtime",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
        )

        def direct_invoke() -> None:
            client.invoke_endpoint(
                EndpointName=ENDPOINT, ContentType="application/json", Accept="application/json", Body=body
            )["Body"].read()

        def via_invoke() -> None:
            status, answer = invoke.invoke(ENDPOINT, payload, client=client)
            assert status == 200, answer

        def direct_stream() -> None:
            reply = client.invoke_endpoint_with_response_stream(
                EndpointName=ENDPOINT, ContentType="application/json", Accept="application/jsonlines", Body=stream_body
            )
            for _ in reply["Body"]:
                pass

        def via_stream() -> None:
            status, lines = stream.open_stream(ENDPOINT, payload, client=client)
            assert status == 200, lines
            last = None
            for last in lines:
                pass
            assert last is not None and b"generated_text" in last, last

        variants = {
            "direct_invoke": direct_invoke,
            "invoke_function": via_invoke,
            "direct_stream": direct_stream,
            "stream_function": via_stream,
        }
        for fn in variants.values():  # warm-up: connections, imports
            for _ in range(warmup):
                fn()
        times: dict[str, list[float]] = {k: [] for k in variants}
        rng = random.Random(0)
        names = list(variants)
        for _ in range(reps):
            rng.shuffle(names)  # interleaved in a random order per round: drift and order effects hit all alike
            for name in names:
                t = time.perf_counter()
                variants[name]()
                times[name].append((time.perf_counter() - t) * 1000)
    finally:
        stop(proc)
    out: dict[str, Any] = {
        "server": f"paced server answering at once ({tokens} tokens), own process",
        "reps": reps,
        "ms": {},
    }
    for name, xs in times.items():
        out["ms"][name] = {"p50": _pct(xs, 50), "p99": _pct(xs, 99), "mean": statistics.fmean(xs)}
    for door, direct in (("invoke_function", "direct_invoke"), ("stream_function", "direct_stream")):
        paired = [a - b for a, b in zip(times[door], times[direct])]
        out[f"{door}_added_ms"] = {
            "p50_difference": out["ms"][door]["p50"] - out["ms"][direct]["p50"],
            "p99_difference": out["ms"][door]["p99"] - out["ms"][direct]["p99"],
            "paired_p50": _pct(paired, 50),
            "goal_5ms_p50_met": out["ms"][door]["p50"] - out["ms"][direct]["p50"] <= 5.0,
        }
        log(
            f"  {door}: p50 {out['ms'][door]['p50']:.2f} ms vs direct {out['ms'][direct]['p50']:.2f} ms "
            f"(+{out[f'{door}_added_ms']['p50_difference']:.2f} ms p50, p99 {out['ms'][door]['p99']:.2f} vs "
            f"{out['ms'][direct]['p99']:.2f})"
        )
    return out


def bench(raw: Path, reps: int, log, parts: list[str] | None = None) -> dict[str, Any]:
    """The four sub-measurements, or only `parts` of them; each one that fails is an {"error": ...} record."""
    from model_build.tiny_models import make_tiny_model

    tokenizer = raw / "src-tiny-gpt2"
    if not (tokenizer / "config.json").is_file():
        make_tiny_model("gpt2", tokenizer)
    out: dict[str, Any] = {}
    for name, fn in (
        ("cross_check", lambda: cross_check(raw, tokenizer, log)),
        ("ceiling", lambda: ceiling(raw, tokenizer, log)),
        ("front_doors", lambda: front_doors(raw, log, reps=max(reps, 5) * 80)),
        ("local_server", lambda: local_server(raw, log)),
    ):
        if parts is not None and name not in parts:
            continue
        try:
            out[name] = fn()
        except Exception as err:
            out[name] = {"error": f"{type(err).__name__}: {err}"}
            log(f"  {name}: FAILED {type(err).__name__}: {err}")
    return out
