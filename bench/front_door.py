"""front_door: what the local runtime (local_runtime/serve.py, as `python -m model_build serve` runs it) costs over
the engine's own port, in one run: a fast engine process (a bare ASGI app under uvicorn that answers at once, so engine
time does not drown the relay) is called directly and through the runtime's doors (InvokeEndpoint SigV4-signed, the
OpenAI route streaming with a bearer token), alternating, at concurrency 1 (per-request latency, paired) and 32
(requests per second). Ratios are front door / engine."""

from __future__ import annotations

import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from local_runtime.process import ProcessContainer, base_environment

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


def _engine_main(port: int) -> None:
    import uvicorn

    uvicorn.run(engine_app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _runtime_main(port: int, engine_port: int, workdir: str) -> None:
    """The local runtime in front of the engine, exactly as `serve` configures uvicorn (serve.server_config)."""
    import uvicorn

    from local_runtime.process import ContainerHost
    from local_runtime.serve import create_app, server_config

    container = FastEngine(Path(workdir), Path(workdir), engine_port)
    app = create_app(workdir, endpoint_name=ENDPOINT, container_host=ContainerHost(container))
    uvicorn.Server(server_config(app, "127.0.0.1", port, log_level="warning")).run()


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


def _throughput(door: Door, concurrency: int, seconds: float) -> float:
    """Requests per second with `concurrency` clients calling back to back for `seconds`."""
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
        raise RuntimeError(f"{len(errors)} clients failed; first: {errors[0]}")
    return sum(counts) / (time.perf_counter() - started)


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
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"nothing answered GET /ping on port {port} within {timeout:.0f} s")


def _pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def _start_runtime(workdir: Path, root: Path) -> tuple[subprocess.Popen, int, int, Any]:
    """A local runtime process (its local_runtime package from `root`) and the engine it starts; (process, runtime
    port, engine port, log file)."""
    from local_emulator.moto_server import free_port

    engine_port, runtime_port = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": f"{root}:{REPO}" if root != REPO else str(REPO)}
    runtime_log = open(workdir / "runtime.log", "wb")
    runtime = subprocess.Popen(
        [sys.executable, "-m", "bench.front_door", "runtime", str(runtime_port), str(engine_port), str(workdir)],
        env=env,
        stdout=runtime_log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    return runtime, runtime_port, engine_port, runtime_log


def bench(
    raw: Path, log: Callable[[str], None], pairs: int = 300, seconds: float = 8.0, before: Path | None = None
) -> dict[str, Any]:
    """Engine vs front door; with `before` (a folder holding another local_runtime package, e.g. an earlier
    commit's), that runtime too, interleaved in the same run."""
    from local_runtime import sigv4

    roots = {"front door": REPO, **({"front door before": before} if before else {})}
    started = {name: _start_runtime(raw / "front-door" / name.replace(" ", "-"), root) for name, root in roots.items()}
    try:
        for name, (process, port, engine_port, _) in started.items():
            _wait(port, process)
            log(f"  {name}: runtime on :{port} in front of a bench engine on :{engine_port}")
        engine_port = started["front door"][2]
        token = _token()
        invoke_path = f"/endpoints/{ENDPOINT}/invocations"
        generation = json.dumps(GENERATION).encode()
        chat = json.dumps(CHAT).encode()
        route = f"/endpoints/{ENDPOINT}/openai/v1/chat/completions"
        bearer = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}

        def doors() -> dict[str, dict[str, Door]]:
            """Signed anew for each phase (a SigV4 signature is good for 5 minutes)."""
            out: dict[str, dict[str, Door]] = {
                "invoke": {
                    "engine": Door(engine_port, "/invocations", generation, {"Content-Type": "application/json"})
                },
                "chat stream": {
                    "engine": Door(engine_port, "/v1/chat/completions", chat, {"Content-Type": "application/json"})
                },
            }
            for name, (_, port, _, _) in started.items():
                url = f"http://127.0.0.1:{port}{invoke_path}"
                signed = sigv4.sign("POST", url, generation, {"Content-Type": "application/json"})
                out["invoke"][name] = Door(port, invoke_path, generation, signed)
                out["chat stream"][name] = Door(port, route, chat, bearer)
            return out

        out: dict[str, Any] = {
            "engine": "a bare ASGI app under uvicorn answering at once (bench/front_door.py engine_app), own process",
            "front_door": "local_runtime.serve.create_app + server_config, own process, forwarding to that engine",
            "pairs": pairs,
            "seconds_per_throughput_run": seconds,
            "doors": {},
        }
        for kind, by_target in doors().items():
            times = _latencies(by_target, pairs)
            record: dict[str, Any] = {
                "c1_ms": {
                    name: {"p50": _pct(xs, 50), "p99": _pct(xs, 99), "mean": statistics.fmean(xs)}
                    for name, xs in times.items()
                },
            }
            for name in started:
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
            out["doors"][kind] = record
        for kind in ("invoke", "chat stream"):
            rates: dict[str, list[float]] = {"engine": [], **{name: [] for name in started}}
            # CPU ms per request of the process answering (the runtime: itself; the engine: itself), at c=32: what a
            # shared, loaded machine distorts least (requests per second depend on who else is running).
            engine_pid = _children(started["front door"][0].pid)[0]
            cpu: dict[str, list[float]] = {name: [] for name in rates}
            for _ in range(2):  # alternating twice: engine, front door(s), engine, front door(s)
                by_target = doors()[kind]
                for name in rates:
                    pid = engine_pid if name == "engine" else started[name][0].pid
                    used = _cpu_s(pid)
                    rate = _throughput(by_target[name], 32, seconds / 2)
                    rates[name].append(rate)
                    cpu[name].append((_cpu_s(pid) - used) * 1000 / (rate * seconds / 2))
            record = out["doors"][kind]
            record["c32_cpu_ms_per_request"] = {name: statistics.fmean(xs) for name, xs in cpu.items()}
            record["c32_requests_per_s"] = {name: statistics.fmean(xs) for name, xs in rates.items()}
            record["c32_ratio"] = {
                name: record["c32_requests_per_s"][name] / record["c32_requests_per_s"]["engine"] for name in started
            }
            log(
                f"  {kind} c=32: engine {record['c32_requests_per_s']['engine']:.0f} req/s; "
                + "; ".join(
                    f"{name} {record['c32_requests_per_s'][name]:.0f} req/s (ratio {record['c32_ratio'][name]:.2f})"
                    for name in started
                )
                + "; CPU ms per request: "
                + ", ".join(f"{name} {ms:.2f}" for name, ms in record["c32_cpu_ms_per_request"].items())
            )
        out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        return out
    finally:
        for process, _, _, runtime_log in started.values():
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            runtime_log.close()


def markdown(fd: dict[str, Any]) -> list[str]:
    """results.md's front-door section: per door and target, c=1 p50 and its ratio, c=32 requests/s and its ratio."""
    if "error" in fd:
        return ["## Front door (local runtime) vs the engine's own port", "", f"FAILED: {fd['error']}", ""]
    lines = [
        "## Front door (local runtime) vs the engine's own port",
        "",
        f"{fd['engine']}; {fd['front_door']}. c=1: {fd['pairs']} alternating rounds; c=32: "
        f"{fd['seconds_per_throughput_run']:.0f} s per target, alternating. Ratio = front door / engine.",
        "",
        "| door | target | c=1 p50 ms | c=1 ratio | added ms (paired p50) | c=32 req/s | c=32 ratio | CPU ms/request |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, record in fd["doors"].items():
        for name, ms in record["c1_ms"].items():
            if name == "engine":
                ratio, added, ratio32 = "1", "", "1"
            else:
                ratio = f"{record['c1_ratio_p50'][name]:.2f}"
                added = f"{record['c1_added_ms_paired_p50'][name]:.2f}"
                ratio32 = f"{record['c32_ratio'][name]:.2f}"
            rate, cpu = record["c32_requests_per_s"][name], record["c32_cpu_ms_per_request"][name]
            lines.append(
                f"| {kind} | {name} | {ms['p50']:.2f} | {ratio} | {added} | {rate:.0f} | {ratio32} | {cpu:.2f} |"
            )
    return [*lines, ""]


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
    elif argv[:1] == ["runtime"]:
        _runtime_main(int(argv[1]), int(argv[2]), argv[3])
    else:
        before = Path(argv[argv.index("--before") + 1]).resolve() if "--before" in argv else None
        result = bench(REPO / "build" / "bench", lambda m: print(m, flush=True), before=before)
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
