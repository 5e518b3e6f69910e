"""The load test (load_testing/loadtest.py, report.py) against real local HTTP servers: the paced server
(bench/paced_server.py, its own process, known TTFT and gap, so the measured numbers can be checked against what
the server did) and the local container-contract server on the tiny GPT-2 artifact; errors by kind, workload and
argument errors, the SLO evaluation both ways, results kept per artifact hash, the command's exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, running
from hermetic import subprocess_env

from load_testing import loadtest
from load_testing import report as loadtest_report
from load_testing.loadtest import LoadTestError, OpenAITarget, SageMakerRuntimeTarget, parse_workload
from local_emulator.moto_server import free_port

# slow: paced servers and load-generating processes (make test-fast leaves them out)
pytestmark = pytest.mark.slow

TTFT_MS, ITL_MS, TOKENS = 40.0, 5.0, 8
E2E_MS = TTFT_MS + (TOKENS - 1) * ITL_MS


def _start_paced(ttft_ms: float, itl_ms: float, tokens: int) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    proc = subprocess.Popen(
        [
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
        ],
        cwd=ROOT,
        env=subprocess_env(PYTHONPATH=str(ROOT)),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/ping", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise
        time.sleep(0.05)


@pytest.fixture(scope="module")
def paced() -> Iterator[str]:
    proc, url = _start_paced(TTFT_MS, ITL_MS, TOKENS)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


def _workload(**changes) -> loadtest.Workload:
    values = {
        "input_tokens": {"mean": 16},
        "output_tokens": {"mean": TOKENS},
        "concurrency": [1, 4],
        "requests": 8,
        "warmup_requests": 1,
    }
    return parse_workload({**values, **changes})


@pytest.fixture(scope="module")
def openai_result(paced: str) -> dict:
    return loadtest.run(
        OpenAITarget(f"{paced}/v1", "paced"), _workload(), loadtest.Price(usd_per_hour=1.0), progress=False
    )


# ---------------------------------------------------------------------------------------------------- measuring


def _assert_paced(level: dict, concurrency: int) -> None:
    """What the paced server did (first token at 40 ms, then one every 5 ms, 8 tokens), as measured; a loaded
    2-core machine adds scheduling delay, never takes it away (the upper bounds leave room for the other xdist worker;
    the pacing itself, ITL and TPOT, is pinned tightly)."""
    assert level["errors"] == 0 and level["succeeded"] == level["requests"] == 8, level
    assert level["output_tokens_per_request"]["mean"] == TOKENS and level["output_tokens_source"] == ["server"]
    assert TTFT_MS <= level["ttft_ms"]["p50"] <= TTFT_MS + 150, level["ttft_ms"]
    assert abs(level["tpot_ms"]["p50"] - ITL_MS) <= 1.5, level["tpot_ms"]
    # the pooled gaps: their mean is the pacing; their percentiles also show the client's own scheduling (a thread or
    # the event loop that wakes late stamps several events at once), so only the mean is pinned here
    assert abs(level["itl_ms"]["mean"] - ITL_MS) <= 1.5 and level["itl_ms"]["n"] == 8 * (TOKENS - 1), level["itl_ms"]
    assert E2E_MS <= level["e2e_ms"]["p50"] <= E2E_MS + 200, level["e2e_ms"]
    assert level["ttft_ms"]["p50"] < level["e2e_ms"]["p50"]
    ideal = concurrency * TOKENS / (E2E_MS / 1000)
    assert 0.25 * ideal <= level["output_tokens_per_s"] <= 1.05 * ideal, (level["output_tokens_per_s"], ideal)
    assert level["requests_per_s"] == pytest.approx(level["output_tokens_per_s"] / TOKENS)


def test_openai_streamed_chat_measures_what_the_paced_server_did(openai_result: dict) -> None:
    levels = {lv["concurrency"]: lv for lv in openai_result["levels"]}
    assert list(levels) == [1, 4]
    for c, level in levels.items():
        _assert_paced(level, c)
    # $ per million output tokens from the hourly price: 1 $/h over the measured aggregate tokens/s
    assert levels[4]["usd_per_million_output_tokens"] == pytest.approx(
        1.0 / 3600 / levels[4]["output_tokens_per_s"] * 1e6
    )
    assert levels[4]["output_tokens_per_s"] > 2.5 * levels[1]["output_tokens_per_s"]  # concurrency 4 overlaps


def test_sagemaker_runtime_response_stream_and_invoke_endpoint(paced: str, aws_env: None) -> None:
    streamed = loadtest.run(SageMakerRuntimeTarget("any", "us-east-1", paced), _workload(), progress=False)
    for level in streamed["levels"]:
        _assert_paced(level, level["concurrency"])
    whole = loadtest.run(
        SageMakerRuntimeTarget("any", "us-east-1", paced, stream=False), _workload(concurrency=[2]), progress=False
    )["levels"][0]
    assert whole["errors"] == 0 and whole["ttft_ms"] == {"n": 0, "not_measured": "the target does not stream"}
    assert E2E_MS <= whole["e2e_ms"]["p50"] <= E2E_MS + 40
    assert whole["output_tokens_per_request"]["mean"] == TOKENS and whole["output_tokens_source"] == [
        "approximation (words)"
    ]


def test_the_local_server_on_the_tiny_gpt2_artifact(gpt2_artifact: Path, aws_env: None) -> None:
    """Through boto3 to `python -m model_build serve`'s app: the model streams exactly the asked tokens
    (min_new_tokens), counted by the server's details; prompts counted with the artifact's own tokenizer. The app's
    handler streams with its stream_fn (stream_with_handler): hf-fastload as deployed answers whole replies, and
    this test needs a container that streams LMI's JSON lines token by token in this process."""
    from local_runtime.serve import create_app

    app = create_app(gpt2_artifact, endpoint_name="tiny-gpt2")
    app.state.host.stream_with_handler = True
    with running(app) as url:
        workload = _workload(tokenizer=str(gpt2_artifact), output_tokens={"mean": 6}, requests=4, concurrency=[1, 2])
        result = loadtest.run(SageMakerRuntimeTarget("tiny-gpt2", "us-east-1", url), workload, progress=False)
        for level in result["levels"]:
            assert level["errors"] == 0 and level["output_tokens_per_request"]["mean"] == 6, level
            assert level["output_tokens_source"] == ["server"] and level["input_tokens_per_request"]["mean"] == 16
            assert 0 < level["ttft_ms"]["p50"] < level["e2e_ms"]["p50"] and level["itl_ms"]["n"] >= 4 * 3
        whole = loadtest.run(
            SageMakerRuntimeTarget("tiny-gpt2", "us-east-1", url, stream=False),
            _workload(tokenizer=str(gpt2_artifact), output_tokens={"mean": 6}, requests=3, concurrency=[1]),
            progress=False,
        )["levels"][0]
        assert whole["errors"] == 0 and whole["output_tokens_source"] == ["tokenizer"]

        # errors, each counted under its kind with an example
        refused = loadtest.run(
            SageMakerRuntimeTarget("tiny-gpt2", "us-east-1", url),
            _workload(output_tokens={"mean": 100_000}, requests=2, concurrency=[1], warmup_requests=0),
            progress=False,
        )["levels"][0]
        assert (
            refused["errors_by_kind"] == {"model_error": 2}
            and "max_new_tokens" in refused["error_examples"]["model_error"]
        )
        assert refused["error_rate"] == 1.0 and refused["output_tokens_per_s"] == 0
        other = loadtest.run(
            SageMakerRuntimeTarget("no-such-endpoint", "us-east-1", url),
            _workload(requests=2, concurrency=[1], warmup_requests=0),
            progress=False,
        )["levels"][0]
        assert other["errors_by_kind"] == {"validation": 2} and "not found" in other["error_examples"]["validation"]


def test_connection_timeout_and_http_errors_are_counted_by_kind(paced: str, aws_env: None) -> None:
    one = {"requests": 2, "concurrency": [1], "warmup_requests": 0}
    closed = f"http://127.0.0.1:{free_port()}"
    level = loadtest.run(OpenAITarget(f"{closed}/v1", "m"), _workload(**one), progress=False)["levels"][0]
    assert level["errors_by_kind"] == {"connection": 2} and level["succeeded"] == 0
    level = loadtest.run(SageMakerRuntimeTarget("ep", "us-east-1", closed), _workload(**one), progress=False)["levels"][
        0
    ]
    assert level["errors_by_kind"] == {"connection": 2}
    level = loadtest.run(OpenAITarget(f"{paced}/nowhere", "m"), _workload(**one), progress=False)["levels"][0]
    assert level["errors_by_kind"] == {"http_4xx": 2} and "HTTP 404" in level["error_examples"]["http_4xx"]
    level = loadtest.run(OpenAITarget(f"{paced}/v1", "m"), _workload(**one, request_timeout_s=0.01), progress=False)[
        "levels"
    ][0]
    assert level["errors_by_kind"] == {"timeout": 2}


def test_a_level_spread_over_load_generating_processes(paced: str) -> None:
    """Each process its own target and event loop, started together at a barrier; the records pooled."""
    level = loadtest.run(OpenAITarget(f"{paced}/v1", "paced"), _workload(concurrency=[4], processes=2), progress=False)
    level = level["levels"][0]
    assert level["processes"] == 2
    _assert_paced(level, 4)
    assert loadtest.processes_for(_workload(), 1) == 1 and loadtest.processes_for(_workload(processes=8), 3) == 3


def test_duration_mode_keeps_sending_until_the_time_is_up(paced: str) -> None:
    level = loadtest.run(
        OpenAITarget(f"{paced}/v1", "m"), _workload(requests=None, duration_s=0.6, concurrency=[2]), progress=False
    )["levels"][0]
    # 2 slots, ~75 ms a request: about 16 in 0.6 s; requests started before the end complete
    assert 8 <= level["requests"] <= 20 and level["errors"] == 0 and level["wall_s"] >= 0.6


def test_a_dataset_of_prompts_and_chat_messages(paced: str, tmp_path: Path, aws_env: None) -> None:
    data = tmp_path / "prompts.jsonl"
    data.write_text(
        '{"prompt": "Tell me about Paris", "output_tokens": 3}\n\n'
        '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}\n'
    )
    result = loadtest.run(
        OpenAITarget(f"{paced}/v1", "m"), _workload(dataset=str(data), requests=4, concurrency=[1]), progress=False
    )["levels"][0]
    assert result["errors"] == 0 and result["output_tokens_per_request"]["min"] == 3
    assert result["output_tokens_per_request"]["max"] == TOKENS
    with pytest.raises(LoadTestError, match="need the openai target"):
        loadtest.run(SageMakerRuntimeTarget("ep", "us-east-1", paced), _workload(dataset=str(data)), progress=False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json\n", "line 1: not JSON"),
        ('{"prompt": "a"}\n{"text": "b"}\n', "line 2: must be an object with exactly one of"),
        ('{"prompt": ""}\n', '"prompt" must be a non-empty string'),
        ('{"messages": [{"content": "x"}]}\n', '"messages" must be a non-empty list'),
        ('{"prompt": "a", "output_tokens": 0}\n', '"output_tokens" must be an integer >= 1, got 0'),
        ("\n", "has no prompts"),
    ],
)
def test_bad_dataset_lines_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(text)
    with pytest.raises(LoadTestError, match=message):
        loadtest.read_dataset(path)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"concurrency": [0, 4]}, r"workload.concurrency: .*every level must be 1-1024, got \[0\]"),
        ({"concurrency": [2, 2]}, "levels must be distinct"),
        ({"concurrency": []}, "workload.concurrency"),
        ({"requests": 5, "duration_s": 3}, "give requests or duration_s, not both"),
        ({"output_tokens": {"mean": 0}}, "workload.output_tokens.mean"),
        ({"input_tokens": {"mean": 8, "stddev": -1}}, "workload.input_tokens.stddev"),
        ({"concurency": [1]}, "workload.concurency: Extra inputs are not permitted"),
        ({"max_tokens_field": "n"}, "workload.max_tokens_field"),
    ],
)
def test_bad_workloads_are_refused_naming_the_key(values: dict, message: str) -> None:
    with pytest.raises(LoadTestError, match=message):
        parse_workload(values)


def test_fixed_output_lengths_from_a_container_that_reads_no_min_new_tokens_are_refused() -> None:
    """TGI and LMI 27 ignore min_new_tokens (EndpointBody.unread_parameters): a workload that asks for exact output
    lengths from one is refused naming the key to change, not run with lengths the report would misstate."""
    from endpoint_runtime.bodies import EndpointBody

    prompt = loadtest.Prompt(text="hello", messages=None, input_tokens=1, output_tokens=8)
    tgi_like = SageMakerRuntimeTarget(
        "ep", "us-east-1", body=EndpointBody(unread_parameters=frozenset({"min_new_tokens"}))
    )
    tgi_like.workload = parse_workload({})
    with pytest.raises(
        LoadTestError, match="exact_output_tokens: true needs min_new_tokens.*set exact_output_tokens: false"
    ):
        tgi_like.body(prompt)
    tgi_like.workload = parse_workload({"exact_output_tokens": False})
    assert json.loads(tgi_like.body(prompt))["parameters"] == {"return_full_text": False, "max_new_tokens": 8}


def test_the_system_names_the_body_and_what_its_container_ignores() -> None:
    """`--system NAME`: the load test of an endpoint by its name takes the body the plan would (deployment
    .endpoint_body_of): sglang's chat kind and reasoning field, tgi's unread min_new_tokens, which turns a default
    exact_output_tokens off with a note and refuses one the workload set."""
    import argparse

    parser = loadtest.configure_parser(argparse.ArgumentParser())

    def body(*args: str) -> Any:
        return loadtest.body_from_args(parser.parse_args(["--target", "sagemaker-runtime", *args]))

    sglang, tgi = body("--system", "sglang"), body("--system", "tgi")
    assert (sglang.kind, sglang.reasoning_field) == ("openai-chat", "reasoning_content")
    assert tgi.kind == "generation" and not tgi.reads("min_new_tokens")
    assert body("--prompt-body", "openai-completion") == loadtest.EndpointBody("openai-completion")
    said: list[str] = []
    fitted = loadtest.fit_workload_to_body(parse_workload({}), tgi, said.append)
    assert not fitted.exact_output_tokens and said == [
        "note: this system's container reads no min_new_tokens: output lengths are not fixed (exact_output_tokens: false)"
    ]
    with pytest.raises(LoadTestError, match="exact_output_tokens: true needs min_new_tokens"):
        loadtest.fit_workload_to_body(parse_workload({"exact_output_tokens": True}), tgi)
    assert loadtest.fit_workload_to_body(parse_workload({}), sglang).exact_output_tokens


def test_synthetic_prompts_have_the_asked_length(gpt2_artifact: Path) -> None:
    counter = loadtest.TokenCounter(gpt2_artifact)
    workload = _workload(input_tokens={"mean": 40, "stddev": 10}, output_tokens={"mean": 20, "stddev": 5})
    prompts = loadtest.make_prompts(workload, 30, 7, counter, None)
    assert len({p.input_tokens for p in prompts}) > 3 and len({p.output_tokens for p in prompts}) > 3  # spread
    assert all(abs(counter.count(p.text) - p.input_tokens) <= 2 for p in prompts)
    assert [p.text for p in loadtest.make_prompts(workload, 30, 7, counter, None)] == [p.text for p in prompts]
    plain = loadtest.make_prompts(_workload(input_tokens={"mean": 12}), 3, 1, None, None)
    assert all(len(p.text.split()) == 12 for p in plain)  # the stated approximation: a word per token
    with pytest.raises(LoadTestError, match="is not a directory"):
        loadtest.TokenCounter(gpt2_artifact / "missing")


# ---------------------------------------------------------------------------------------------------- SLO and results


def test_the_slo_passes_a_met_objective_and_names_each_miss(openai_result: dict) -> None:
    level4 = next(lv for lv in openai_result["levels"] if lv["concurrency"] == 4)
    met = {
        "concurrency": 4,
        "p95_ttft_ms": 1000,
        "p95_itl_ms": 100,
        "min_output_tokens_per_s": 50,
        "max_usd_per_million_tokens": 1000,
        "max_error_rate": 0,
    }
    assert loadtest_report.evaluate_slo(openai_result, met) == []
    missed = {
        "concurrency": 4,
        "p95_ttft_ms": 10,
        "p95_itl_ms": 1,
        "min_output_tokens_per_s": 1e6,
        "max_usd_per_million_tokens": 0.01,
    }
    misses = loadtest_report.evaluate_slo(openai_result, missed)
    assert len(misses) == 4, misses
    assert misses[0] == f"p95 TTFT at concurrency 4: {level4['ttft_ms']['p95']:.4g} ms, max 10 ms"
    assert any(m.startswith("aggregate output tokens/s at concurrency 4:") and "min 1e+06" in m for m in misses)
    # without a concurrency, latency objectives hold at every level measured
    assert len(loadtest_report.evaluate_slo(openai_result, {"p95_ttft_ms": 10})) == 2
    # what was not measured is a miss, never a pass
    assert loadtest_report.evaluate_slo(openai_result, {"concurrency": 16, "p95_ttft_ms": 1000}) == [
        "no measurement at concurrency 16 (the load test ran 1, 4)"
    ]
    unpriced = {
        **openai_result,
        "price": {"usd_per_hour": None},
        "levels": [{**lv, "usd_per_million_output_tokens": None} for lv in openai_result["levels"]],
    }
    assert (
        "not measured (no instance price given)"
        in loadtest_report.evaluate_slo(unpriced, {"concurrency": 1, "max_usd_per_million_tokens": 5})[0]
    )
    not_streamed = {
        **openai_result,
        "levels": [
            {**lv, "itl_ms": {"n": 0, "not_measured": "the target does not stream"}} for lv in openai_result["levels"]
        ],
    }
    assert (
        "not measured (the target does not stream)"
        in loadtest_report.evaluate_slo(not_streamed, {"concurrency": 1, "p95_itl_ms": 50})[0]
    )
    from pydantic import BaseModel

    class ConfigSlo(BaseModel):  # the config's own `slo:` model, as the lead's schema may define it
        concurrency: int
        p95_ttft_ms: float

    assert len(loadtest_report.evaluate_slo(openai_result, ConfigSlo(concurrency=4, p95_ttft_ms=10))) == 1
    with pytest.raises(ValueError, match="min_output_tokens_per_s needs concurrency"):
        loadtest_report.parse_slo({"min_output_tokens_per_s": 10})
    with pytest.raises(ValueError, match=r"slo.max_error_rate: .*less than or equal to 1 \(got 2\)"):
        loadtest_report.parse_slo({"max_error_rate": 2})


def test_results_are_written_and_kept_per_artifact_hash(
    openai_result: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = loadtest_report.write_outputs(openai_result, tmp_path / "out")
    data = json.loads(paths["json"].read_text(), parse_constant=lambda c: pytest.fail(f"{c} in strict JSON"))
    assert data["levels"][0]["concurrency"] == 1 and paths["plot"].read_bytes()[:4] == b"\x89PNG"
    assert "| 4 | 8 | 0 |" in paths["markdown"].read_text()
    with monkeypatch.context() as m:  # the deploy set has no matplotlib: JSON and Markdown only
        m.setitem(sys.modules, "matplotlib", None)
        assert set(loadtest_report.write_outputs(openai_result, tmp_path / "bare")) == {"json", "markdown"}
    first = loadtest_report.save_result(openai_result, tmp_path / "kept", "tiny-gpt2", "ab12" * 16)
    second = loadtest_report.save_result(openai_result, tmp_path / "kept", "tiny-gpt2", "cd34" * 16)
    assert first.parent.name == "ab12" * 16 and first.parent.parent.name == "tiny-gpt2"
    kept = loadtest_report.load_results(tmp_path / "kept", "tiny-gpt2")
    assert [(h, p) for h, p, _ in kept] == [("ab12" * 16, first), ("cd34" * 16, second)]
    assert kept[1][2]["artifact_hash"] == "cd34" * 16
    with pytest.raises(ValueError, match="is not a lowercase hex content hash"):
        loadtest_report.save_result(openai_result, tmp_path, "tiny-gpt2", "../etc")
    with pytest.raises(ValueError, match="cannot name a results folder"):
        loadtest_report.save_result(openai_result, tmp_path, "../x", "ab12" * 16)


def test_percentiles_and_stats() -> None:
    assert loadtest_report.percentile([1, 2, 3, 4], 50) == 2.5 and loadtest_report.percentile([5], 99) == 5
    s = loadtest_report.stats([4.0, 1.0, 3.0, 2.0])
    assert (s["n"], s["mean"], s["min"], s["max"], s["p50"]) == (4, 2.5, 1.0, 4.0, 2.5)
    assert loadtest_report.stats([]) == {"n": 0}


# ---------------------------------------------------------------------------------------------------- the command


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = subprocess_env(PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "load_testing.loadtest", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def test_the_command_writes_its_report_and_gates_on_the_slo(paced: str, tmp_path: Path) -> None:
    common = [
        "--target",
        "openai",
        "--url",
        f"{paced}/v1",
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--output-tokens",
        "8",
        "--input-tokens",
        "16",
        "--price-per-hour",
        "1.5",
        "--quiet",
    ]
    (tmp_path / "met.yaml").write_text("concurrency: 2\np95_ttft_ms: 2000\nmax_error_rate: 0\n")
    (tmp_path / "missed.yaml").write_text("concurrency: 2\np95_ttft_ms: 1\n")
    met = _cli(*common, "--slo", "met.yaml", "--out", "met", cwd=tmp_path)
    assert met.returncode == 0, met.stderr
    assert "| 2 | 4 | 0 |" in met.stdout and "SLO: met" in met.stdout
    assert {p.name for p in (tmp_path / "met").iterdir()} == {"loadtest.json", "loadtest.md", "loadtest.png"}
    assert json.loads((tmp_path / "met" / "loadtest.json").read_text())["price"]["total_usd_per_hour"] == 1.5
    missed = _cli(*common, "--slo", "missed.yaml", "--out", "missed", cwd=tmp_path)
    assert missed.returncode == 1 and "p95 TTFT at concurrency 2:" in missed.stderr and "max 1 ms" in missed.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "openai", "--concurrency", "1"], "error: --url is required for the openai target"),
        (["--target", "openai", "--url", "127.0.0.1:1/v1"], "error: --url must start with http:// or https://"),
        (["--target", "openai", "--url", "http://h/v1", "--concurrency", "0"], "error: workload.concurrency"),
        (["--target", "openai", "--url", "http://h/v1", "--endpoint-name", "e"], "error: --endpoint-name"),
        (["--target", "sagemaker-runtime"], "error: --endpoint-name is required"),
        (
            ["--target", "sagemaker-runtime", "--endpoint-name", "e", "--system", "nope"],
            "error: --system: system 'nope' is not one of the registered systems: ",
        ),
        (
            [
                "--target",
                "sagemaker-runtime",
                "--endpoint-name",
                "e",
                "--system",
                "tgi",
                "--prompt-body",
                "openai-chat",
            ],
            "error: give --system or --prompt-body, not both",
        ),
        (["--target", "openai", "--url", "http://h/v1", "--slo", "nope.yaml"], "error: --slo nope.yaml: No such file"),
        (
            ["--target", "openai", "--url", "http://h/v1", "--api-key-env", "LOADTEST_NO_SUCH_VAR"],
            "error: --api-key-env: environment variable LOADTEST_NO_SUCH_VAR is not set",
        ),
        (
            ["--target", "openai", "--url", "http://h/v1", "--input-tokens", "x"],
            "--input-tokens: expected MEAN or MEAN:STDDEV",
        ),
        (
            ["--target", "openai", "--url", "http://h/v1", "--price-per-hour", "-1"],
            "--price-per-hour: expected a number > 0",
        ),
        (
            ["--target", "openai", "--url", "http://h/v1", "--price-table", "p.json"],
            "error: a looked-up price needs --instance-type and --region",
        ),
        (
            [
                "--target",
                "openai",
                "--url",
                "http://h/v1",
                "--price-table",
                "p.json",
                "--instance-type",
                "ml.g5.xlarge",
                "--region",
                "us-east-1",
            ],
            "error: price: price table p.json: No such file",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_message(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        code = loadtest.main([*args, "--quiet"])
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err


def test_the_command_hooks_into_an_argparse_tree() -> None:
    import argparse

    top = argparse.ArgumentParser(prog="python -m model_build")
    loadtest.add_parser(top.add_subparsers(dest="command", required=True))
    args = top.parse_args(["loadtest", "--target", "sagemaker-runtime", "--endpoint-name", "e", "--concurrency", "1,8"])
    assert args.run is loadtest.run_args and args.concurrency == [1, 8]


# ---------------------------------------------------------------------------------------------------- prices


def _product(usd: str, unit: str = "Hrs") -> str:
    """A GetProducts PriceList item in the Price List API's product/terms layout."""
    return json.dumps(
        {
            "product": {"attributes": {"component": "Hosting", "instanceName": "ml.g5.2xlarge"}},
            "terms": {"OnDemand": {"T1": {"priceDimensions": {"D1": {"unit": unit, "pricePerUnit": {"USD": usd}}}}}},
        }
    )


def test_the_hosting_price_from_the_price_list_api_and_a_dated_table(tmp_path: Path) -> None:
    import boto3
    from botocore.stub import Stubber

    from load_testing import prices as loadtest_prices

    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    query = {
        "ServiceCode": "AmazonSageMaker",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "component", "Value": "Hosting"},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": "ml.g5.2xlarge"},
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-west-2"},
        ],
    }
    with Stubber(client) as stub:
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [_product("1.2345")]}, query)
        assert loadtest_prices.fetch_hosting_price("ml.g5.2xlarge", "us-west-2", client) == 1.2345
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []}, query)
        with pytest.raises(
            loadtest_prices.PriceError, match="returned 0 products for ml.g5.2xlarge hosting in us-west-2"
        ):
            loadtest_prices.fetch_hosting_price("ml.g5.2xlarge", "us-west-2", client)
        stub.add_client_error("get_products", "AccessDeniedException", "not authorized to pricing:GetProducts")
        with pytest.raises(loadtest_prices.PriceError, match="refused the query"):
            loadtest_prices.fetch_hosting_price("ml.g5.2xlarge", "us-west-2", client)
    with pytest.raises(loadtest_prices.PriceError, match="expected one hourly price dimension"):
        loadtest_prices.hosting_price_from_products([_product("1", unit="GB-Mo")], "t", "r")
    with pytest.raises(loadtest_prices.PriceError, match="returned 2 products"):
        loadtest_prices.hosting_price_from_products([_product("1"), _product("2")], "t", "r")

    table = loadtest_prices.write_table(tmp_path / "prices.json", {"us-west-2": {"ml.g5.2xlarge": 1.2345}})
    usd, source = loadtest_prices.price_from_table(table, "ml.g5.2xlarge", "us-west-2")
    assert usd == 1.2345 and "Price List Query API" in source and "fetched 20" in source
    with pytest.raises(loadtest_prices.PriceError, match="has no price for ml.g5.xlarge in us-west-2"):
        loadtest_prices.price_from_table(table, "ml.g5.xlarge", "us-west-2")
    with pytest.raises(loadtest_prices.PriceError, match="No such file"):
        loadtest_prices.price_from_table(tmp_path / "none.json", "ml.g5.xlarge", "us-west-2")
    args = loadtest.configure_parser(__import__("argparse").ArgumentParser()).parse_args(
        [
            "--target",
            "openai",
            "--url",
            "http://h/v1",
            "--price-table",
            str(table),
            "--instance-type",
            "ml.g5.2xlarge",
            "--region",
            "us-west-2",
            "--instance-count",
            "2",
        ]
    )
    price = loadtest.price_from_args(args)
    assert price.total_usd_per_hour == 2 * 1.2345 and price.source == source


def test_the_benchmark_sections_run_small(tmp_path: Path) -> None:
    """bench/loadtest.py's front-door overhead and ceiling, as `make bench` runs them, at a few requests, and
    their part of results.md."""
    from bench import loadtest as bench_loadtest
    from bench import report

    doors = bench_loadtest.front_doors(tmp_path, lambda _: None, reps=5, warmup=1)
    assert set(doors["ms"]) == {"direct_invoke", "invoke_function", "direct_stream", "stream_function"}
    assert all(v["p50"] > 0 for v in doors["ms"].values())
    ceiling = bench_loadtest.ceiling(
        tmp_path,
        tmp_path / "tokenizer-for-aiperf-only",
        lambda _: None,
        levels=(2,),
        requests=10,
        warmup=0,
        with_aiperf=False,
    )
    assert ceiling["levels"]["2"]["errors"] == 0 and ceiling["max_requests_per_s"] > 0
    text = "\n".join(report._loadtest_md({"front_doors": doors, "ceiling": ceiling}))
    assert "invoke_function adds" in text and "stream_function adds" in text and "Ceiling" in text


def test_a_sagemaker_bearer_token_for_the_openai_route(aws_env: None) -> None:
    """--sagemaker-token: sagemaker.core.token_generator's token from the AWS credentials, sent as the bearer."""
    import argparse

    args = loadtest.configure_parser(argparse.ArgumentParser()).parse_args(
        [
            "--target",
            "openai",
            "--sagemaker-token",
            "--region",
            "us-east-1",
            "--url",
            loadtest.sagemaker_openai_base_url("us-east-1", "dev-chat", "ic-1"),
        ]
    )
    target = loadtest.target_from_args(args)
    assert target.api_key.startswith("sagemaker-api-key-") and target.describe()["authorization"] == "bearer"
    assert target.url == (
        "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/dev-chat/inference-components/"
        "ic-1/openai/v1/chat/completions"
    )
    assert target.api_key not in json.dumps(target.describe())
