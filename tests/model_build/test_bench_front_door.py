"""bench/front_door.py, as `make bench` runs it, at a few requests: the front door against the engine's own port
(real processes: the runtime `serve` configures, the bench's engine, the sglang stand-in on a tiny model), its
results table, and the vLLM row's skip where .venv-vllm is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import front_door


def _measured(record: dict) -> None:
    """Both doors, both targets, at c=1 and c=32, with numbers that came from requests."""
    assert set(record) == {"invoke", "chat stream"}
    for door in record.values():
        assert set(door["c1_ms"]) == {"engine", "front door", front_door.PIPE}
        assert all(ms["p50"] > 0 for ms in door["c1_ms"].values())
        assert door["c32_requests_per_s"]["engine"] > 0 and door["c32_requests_per_s"]["front door"] > 0
        assert door["c32_ratio"]["front door"] > 0 and door["c32_ratio"][front_door.PIPE] > 0
        assert door["c32_cpu_ms_per_request"]["front door"] > 0


def test_the_fast_engine_rows_are_measured_and_tabled(tmp_path: Path) -> None:
    lines: list[str] = []
    result = front_door.bench(tmp_path, lines.append, pairs=5, seconds=0.5, engines=(), rounds=1)
    _measured(result["doors"])
    assert result["real_engines"] == {} and len(result["loadavg_after"]) == 3
    text = "\n".join(front_door.markdown(result))
    assert "| invoke | front door |" in text and "| chat stream | engine |" in text
    assert any("invoke c=32: engine" in line for line in lines)


def test_the_vllm_row_is_skipped_naming_make_vllm_env_where_its_venv_is_missing(tmp_path, monkeypatch) -> None:
    import local_runtime.vllm_container as vllm_container

    monkeypatch.setattr(vllm_container, "VENV", tmp_path / ".venv-vllm")
    lines: list[str] = []
    record = front_door.real_engine(tmp_path, lines.append, "vllm-cpu")
    assert "make vllm-env" in record["skipped"] and "doors" not in record
    assert lines == [f"  vllm-cpu: skipped: {record['skipped']}"]
    text = "\n".join(front_door.markdown({**_empty(), "real_engines": {"vllm-cpu": record}}))
    assert "### In front of vllm" in text and "skipped: no .venv-vllm here" in text


@pytest.mark.slow
def test_the_stand_in_row_holds_32_concurrent_clients(tmp_path: Path) -> None:
    """The stand-in's own port at concurrency 32 (socketserver's backlog of 5 reset clients there) and through the
    front door, without a failed request."""
    record = front_door.real_engine(tmp_path, lambda _: None, "stand-in", pairs=2, seconds=1, rounds=1)
    assert "error" not in record, record.get("error")
    _measured(record["doors"])
    text = "\n".join(front_door.markdown({**_empty(), "real_engines": {"stand-in": record}}))
    assert "### In front of stand-in" in text and "| invoke | front door |" in text


def _empty() -> dict:
    return {"engine": "e", "front_door": "f", "pairs": 0, "seconds_per_throughput_run": 0, "doors": {}}


def test_a_before_checkout_runs_its_own_local_runtime(tmp_path: Path) -> None:
    """--front-door-before compares another checkout's local_runtime: the runtime process must import that one, not
    this checkout's (`python -m` puts its working folder, this checkout, first on sys.path; the bench runs it with
    -P). Until 2026-12-02 both rows ran this checkout's code."""
    import shutil

    before = tmp_path / "before"
    shutil.copytree(front_door.REPO / "local_runtime", before / "local_runtime")
    # The copy says where it was imported from, in a file beside it (no variable of this process reaches the child).
    with (before / "local_runtime" / "__init__.py").open("a") as init:
        init.write("\nfrom pathlib import Path as _Path\n")
        init.write("(_Path(__file__).parent.parent / 'imported-from').write_text(__file__)\n")
    started = {"before": front_door._start_runtime(tmp_path / "work", before)}
    try:
        process, port, _, _ = started["before"]
        front_door._wait(port, process)
    finally:
        front_door._stop(started)
    assert (before / "imported-from").read_text() == str(before / "local_runtime" / "__init__.py")
