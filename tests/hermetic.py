"""The suite's environment, the same whatever shell starts it.

tests/conftest.py calls `scrub()` when it is imported (before collection imports any test module): the process keeps
only the variables a machine needs to run programs and reach its package registries (KEPT, KEPT_PREFIXES), and
everything a user's shell may hold that our code or its libraries read is gone: AWS profiles, regions, credentials and
endpoint URLs, CDK_DEFAULT_*, Hugging Face hub and cache settings, the endpoints' limit variables (MAX_INPUT_CHARS,
MAX_NEW_TOKENS, ...), PYTHON* switches. Then it sets what the tests rely on (SET): AWS config files that do not
exist, no instance metadata, the hub offline.

A subprocess of a test gets `subprocess_env(**extra)`: this base, frozen when the session started, plus what that test
names. Never `os.environ`: a test may have monkeypatched it, and what it patched must not reach another test's
child process.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from types import MappingProxyType

ROOT = Path(__file__).resolve().parent.parent

# What a machine needs to find programs and reach the package registries (this machine's pip and TLS settings).
KEPT = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "LANG",
        "LANGUAGE",
        "TMPDIR",
        "PYENV_ROOT",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
    }
)
# LC_*: locale; PIP_*: the machine's package index settings; SSL_CERT_*: TLS roots; OPENBLAS_*: set on processors
# whose older OpenBLAS builds compute wrong results; PYTEST_*: pytest-xdist's worker identity.
KEPT_PREFIXES = ("LC_", "PIP_", "SSL_CERT_", "OPENBLAS_", "PYTEST_")

_NOWHERE = Path(tempfile.gettempdir()) / "llm-endpoints-tests-no-aws-config"
SET = MappingProxyType(
    {
        # No profile, credentials or region from files: a test that needs AWS points at the local emulator itself.
        "AWS_CONFIG_FILE": str(_NOWHERE / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(_NOWHERE / "credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        # No Hugging Face Hub: every model here is made offline.
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        # The Node that package.json installs (Node 20 is end-of-life) and the venv's python3 (`cdk synth` runs
        # "python3 app.py"), before the machine's.
        "PATH": os.pathsep.join([str(ROOT / "node_modules" / ".bin"), str(ROOT / ".venv" / "bin"), os.environ["PATH"]]),
    }
)


def kept(name: str) -> bool:
    return name in KEPT or name.startswith(KEPT_PREFIXES)


def _refuse_startup_switches() -> None:
    """PYTHON* variables act when the interpreter starts, before any scrub. PYTHONWARNINGS is overridden by
    pytest.ini's filterwarnings (Python's default filters, restated); -O cannot be undone: it strips the asserts."""
    if sys.flags.optimize:
        raise RuntimeError("PYTHONOPTIMIZE (or -O) is set: it removes the tests' assert statements; unset it to test")


def scrub() -> MappingProxyType:
    """Drop every variable not kept, set SET; return the result, frozen (the base of `subprocess_env`)."""
    _refuse_startup_switches()
    for name in [n for n in os.environ if not kept(n)]:
        del os.environ[name]
    os.environ.update(SET)
    return MappingProxyType(dict(os.environ))


_BASE: MappingProxyType | None = None


def base() -> MappingProxyType:
    """The session's scrubbed environment as it was when the suite started."""
    global _BASE
    if _BASE is None:
        _BASE = scrub()
    return _BASE


def signals() -> None:
    """Ctrl-C as a terminal gives it, whatever started the suite. A command run in the background by a shell without
    job control (`cmd &` in a script, as a CI runner may start `make test`) inherits SIGINT and SIGQUIT ignored (bash
    manual, "Signals"); Python then leaves SIGINT ignored, and so does every child a test starts, so a test that sends
    its child SIGINT (bench's and publish's interrupts) waits for an exit that never comes. Restoring Python's own
    handlers here lets each child start with the defaults again (a caught signal is reset by exec)."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def subprocess_env(**extra: str) -> dict[str, str]:
    """An environment for a test's subprocess: the session's base plus `extra`, never the live os.environ."""
    return {**base(), **extra}


def python_path_env(**extra: str) -> dict[str, str]:
    """subprocess_env with the repository and tests/ importable (what pytest.ini gives this process)."""
    return subprocess_env(PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]), **extra)
