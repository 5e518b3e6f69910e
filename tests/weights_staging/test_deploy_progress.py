"""`make deploy` shows each step's output as it comes (workstation/deploy.py run()): a long step's progress lines
reach the terminal live, a silent step is said to be still running at least every 10 s, a failure names the command
with its last lines (a bounded tail), and `--quiet` silences it all."""

from __future__ import annotations

import sys
import time

import pytest

from workstation.deploy import DeployError, main, run

SCRIPT = "import sys, time\nfor i in range(3):\n    print(f'step {i}', flush=True)\n    time.sleep(0.4)\n"


def test_lines_arrive_while_the_command_runs():
    seen: list[tuple[float, str]] = []
    started = time.monotonic()
    run([sys.executable, "-c", SCRIPT], echo=lambda text: seen.append((time.monotonic() - started, text)))
    assert [t for _, t in seen] == ["    step 0", "    step 1", "    step 2"]
    # The first line is shown before the command ends (about 1.2 s), not all at once at its exit.
    assert seen[0][0] < seen[-1][0] - 0.5


def test_a_silent_step_says_it_is_still_running():
    seen: list[str] = []
    run([sys.executable, "-c", "import time; time.sleep(0.7)"], echo=seen.append, heartbeat_s=0.2)
    assert len(seen) >= 2 and all("still running" in s for s in seen)
    assert seen[0].startswith("    ... `") and "s)" in seen[0]


def test_a_failure_names_the_command_and_keeps_a_bounded_tail():
    noisy = "import sys\nfor i in range(500):\n    print(f'line {i}')\nsys.exit(3)\n"
    with pytest.raises(DeployError) as err:
        run([sys.executable, "-c", noisy], echo=lambda text: None)
    message = str(err.value)
    assert "exited 3:" in message and "line 499" in message and "line 400" not in message
    assert message.split("exited 3:\n")[1].splitlines() == [f"line {i}" for i in range(475, 500)]


def test_quiet_prints_nothing_but_errors(capsys, tmp_path):
    missing = tmp_path / "none.yaml"
    assert main(["deploy", "--config", str(missing), "--quiet"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "error:" in out.err
