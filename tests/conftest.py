"""Fixtures every area uses, each made once per session: synthesized configurations (`synth`), tiny models
and their builds, and the moto server (`emulator` per module, `moto_env` per test). Each area's own fixtures are in
its folder's conftest.py; plain helpers (paths, example configs, the CLI) are in helpers.py.

Synth costs ~5 s the first time in a process and ~0.2 s after, so every configuration is synthesized once per
session and its templates shared by all tests. Everything is written under pytest's tmp dir, never into the repo.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import hermetic

# Before any test module is imported: the caller's shell no longer reaches the suite (tests/hermetic.py). Subprocesses
# write bytecode (the machine may set PYTHONDONTWRITEBYTECODE; the scrub drops it): __pycache__ is git-ignored and left
# out of every asset and build context (systems/base.py OwnContainer.never). This process never does, whatever the
# shell says: tests import artifacts' code/ from their build folders, which must stay as built.
hermetic.base()
hermetic.signals()
sys.dont_write_bytecode = True


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """While the test modules are imported, bytecode is written: pytest's assertion rewriter then caches each rewritten
    module (tests/**/__pycache__/*-pytest-*.pyc, git-ignored) and reads it back next run. Rewriting all of them cost
    ~10 s of CPU in every worker, every run (docs/design/dev-loop.md). No artifact is imported while collecting."""
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = True


import template_scan as template_scan_module
from helpers import (
    EXAMPLE_CASES,
    Synthesized,
    cdk_context,
    made_once,
    make_repository_tiny_models,
    run_dir_of,
    synthesize,
    write_fake_manifest,
)
from template_scan import ADOPTING_PREFIX, LOCAL_PREFIX, PIPELINE_PREFIX, TemplateScan, example_path

# ---------------------------------------------------------------------------------------------------- synth


def _synth_shared(config: str, env: str | None, allow_unbuilt: bool, run_dir: Path, tmp_path_factory) -> Synthesized:
    """A repository config's synth, made once per run by whichever worker asks first, under a lock; the others read
    its cdk.out back (templates as JSON; live Stack objects only if a test asks, by synthesizing again). The run folder
    is new each run, so the code cannot change under an entry; the key holds the config's bytes all the same."""
    import hashlib

    digest = hashlib.sha256(json.dumps([config, env, allow_unbuilt]).encode() + (ROOT / config).read_bytes())
    entry = run_dir / "shared-synth" / digest.hexdigest()[:24]
    outdir, done = entry / "cdk.out", entry / "stacks.json"
    with made_once(entry, done) as to_make:
        if to_make:
            made = synthesize(config, env, outdir, None, allow_unbuilt)
            done.write_text(json.dumps(sorted(made.templates)))
            return made
    names = json.loads(done.read_text())
    templates = {name: json.loads((outdir / f"{name}.template.json").read_text()) for name in names}
    return Synthesized(
        outdir,
        templates,
        resynthesize=lambda: synthesize(config, env, tmp_path_factory.mktemp("cdkout"), None, allow_unbuilt).stacks,
    )


@pytest.fixture(scope="session")
def synth(tmp_path_factory):
    """synth(config, env=None, build_root=None, allow_unbuilt=True) -> Synthesized, cached per session, and a
    repository config without a build root once per run across xdist workers (the whole-fleet checks synthesize all
    examples, and --dist loadfile may put them on both workers: docs/design/dev-loop.md)."""
    cache: dict[tuple, Synthesized] = {}
    run_dir = run_dir_of(tmp_path_factory)

    def _synth(config: str, env: str | None = None, build_root: Path | None = None, allow_unbuilt: bool = True):
        key = (config, env, str(build_root), allow_unbuilt)
        if key not in cache:
            in_repo = not Path(config).is_absolute() and (ROOT / config).is_file()
            if build_root is None and in_repo:
                cache[key] = _synth_shared(config, env, allow_unbuilt, run_dir, tmp_path_factory)
            else:
                cache[key] = synthesize(config, env, tmp_path_factory.mktemp("cdkout"), build_root, allow_unbuilt)
        return cache[key]

    return _synth


@pytest.fixture(scope="session", autouse=True)
def _repository_tiny_models_exist():
    """Every tiny model a repository config names exists before any test reads that config (helpers.py
    make_repository_tiny_models): a plan of such a config is the same whichever tests ran first."""
    make_repository_tiny_models()


@pytest.fixture(scope="session", autouse=True)
def _botocore_reads_each_service_model_once():
    """Every boto3/botocore Session makes its own data loader, which parses the service models' JSON again (the
    SageMaker model alone is several MB): the code under test makes a new session per call, so the suite parsed
    them some thousands of times. One loader per data path serves all sessions; nothing registered on botocore's
    `service-data-loaded` event changes the loaded data (botocore 1.44, boto3), so the answers are the same."""
    import botocore.loaders
    import botocore.session

    original = botocore.session.create_loader
    loaders: dict[str | None, botocore.loaders.Loader] = {}

    def shared_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
        if search_path_string not in loaders:
            loaders[search_path_string] = original(search_path_string)
        return loaders[search_path_string]

    botocore.session.create_loader = shared_loader
    yield
    botocore.session.create_loader = original


@pytest.fixture(scope="session", autouse=True)
def _sagemaker_tables_load_endpoints_once():
    """sagemaker.core.image_uris.retrieve builds a new botocore endpoint resolver, reading botocore's endpoints.json
    (~0.1 s), on every call; the image tests ask it hundreds of questions. One resolver serves them all: the
    answers are the same, only faster."""
    import functools

    try:
        from sagemaker.core import common_utils
    except ImportError:
        yield
        return
    original = common_utils._botocore_resolver
    common_utils._botocore_resolver = functools.cache(original)
    yield
    common_utils._botocore_resolver = original


@dataclass(frozen=True)
class StackEnvironment:
    """Where a synthesized stack deploys (its Stack's .account and .region, as the synth recorded them)."""

    account: str
    region: str


@pytest.fixture(scope="session")
def pipeline_synth(tmp_path_factory):
    """config/examples/pipeline.yaml with -c pipeline=true, synthesized once per run (~18 s; cdk-nag runs in synth)
    by whichever xdist worker asks first; the others read its cdk.out back: (outdir, the pipeline stack's
    StackEnvironment, pipeline template, {stage: {stack name: (template, account, template path)}})."""
    entry = run_dir_of(tmp_path_factory) / "shared-synth" / "pipeline"
    outdir, summary = entry / "cdk.out", entry / "summary.json"
    with made_once(entry, summary) as to_make:
        if to_make:
            import aws_cdk as cdk

            from stacks.pipeline_stack import add_pipeline

            app = cdk.App(context=cdk_context(), outdir=str(outdir))
            stack = add_pipeline(app, "config/examples/pipeline.yaml")
            assembly = app.synth()  # raises on any unacknowledged cdk-nag finding
            stages = {}
            for nested in ("dev-artifacts", "dev-endpoints", "prod-artifacts", "prod-endpoints"):
                sub = assembly.get_nested_assembly(f"assembly-{nested}")
                stages[nested] = {s.stack_name: [s.environment.account, s.template_full_path] for s in sub.stacks}
            summary.write_text(json.dumps({"pipeline": [stack.account, stack.region], "stages": stages}))
    made = json.loads(summary.read_text())
    stages = {
        nested: {name: (json.loads(Path(path).read_text()), account, path) for name, (account, path) in stacks.items()}
        for nested, stacks in made["stages"].items()
    }
    template = json.loads((outdir / "llm-endpoints-pipeline.template.json").read_text())
    return outdir, StackEnvironment(*made["pipeline"]), template, stages


@pytest.fixture(scope="session")
def local_built(synth, tmp_path_factory):
    """config/local.yaml synthesized with a (fake) build of its model, so without the unbuilt placeholder."""
    build_root = tmp_path_factory.mktemp("local-build")
    write_fake_manifest(build_root, "tiny-gpt2", "hf-fastload", "fp16")
    return synth("config/local.yaml", build_root=build_root, allow_unbuilt=False)


@pytest.fixture(scope="session")
def adopting(synth, tmp_path_factory):
    """prod of the hf-fastload example with adopt_kept_data: the bucket and repository kept by an earlier destroy."""
    import yaml

    raw = yaml.safe_load((ROOT / "config/examples/hf-fastload.yaml").read_text())
    raw["environments"]["prod"]["adopt_kept_data"] = True
    path = tmp_path_factory.mktemp("adopt") / "adopt.yaml"
    path.write_text(yaml.safe_dump(raw))
    return synth(str(path), "prod")


@pytest.fixture(scope="session")
def template_scan(synth, pipeline_synth, local_built, adopting, tmp_path_factory) -> TemplateScan:
    """Every template the suite synthesizes (each example in each environment, config/local.yaml built, the adopting
    variant, the pipeline and its stages' stacks), scanned once by cfn-lint and once by checkov (tests/template_scan.py).
    The tests that read it are in the xdist group "template-scan", so one worker makes it."""
    templates: dict[str, dict] = {}
    for config, env in EXAMPLE_CASES:
        for name, template in synth(config, env).templates.items():
            templates[example_path(config, env, name)] = template
    templates.update({f"{LOCAL_PREFIX}{name}.template.json": t for name, t in local_built.templates.items()})
    templates.update({f"{ADOPTING_PREFIX}{name}.template.json": t for name, t in adopting.templates.items()})
    _, _, pipeline, stages = pipeline_synth
    templates[f"{PIPELINE_PREFIX}llm-endpoints-pipeline.template.json"] = pipeline
    for stage, stacks in stages.items():
        for name, (template, _, _) in stacks.items():
            templates[f"{PIPELINE_PREFIX}{stage}/{name}.template.json"] = template
    return template_scan_module.scan(templates, tmp_path_factory.mktemp("template-scan"))


# ---------------------------------------------------------------------------------------------------- tiny models and the emulator

# tests/model_build/conftest.py's config names tiny-gpt2 too, with the same settings.
GPT2_ENDPOINT = """endpoints:
  - name: tiny-gpt2
    system: hf-fastload
    model: {model}
    instance_type: ml.m5.xlarge
    dtype: fp16
    max_shard_size: 300KB
"""


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny GPT-2 and GPT-J source models (fp32 safetensors + GPT2Tokenizer files)."""
    from model_build.tiny_models import make_tiny_model

    root = tmp_path_factory.mktemp("tiny-models")
    return {arch: make_tiny_model(arch, root / arch) for arch in ("gpt2", "gptj")}


@pytest.fixture(scope="session")
def gpt2_artifact(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    """The tiny GPT-2 built as hf-fastload in fp16, sharded (what the serving and handler tests load)."""
    from deployment import load_config
    from model_build.cli import build_endpoint

    root = tmp_path_factory.mktemp("gpt2-artifact")
    config = root / "endpoints.yaml"
    config.write_text(GPT2_ENDPOINT.format(model=tiny_models["gpt2"]))
    out = root / "tiny-gpt2"
    build_endpoint(load_config(config).endpoint("tiny-gpt2"), out, progress=False)
    return out


CHAT_ENDPOINT = """endpoints:
  - name: tiny-chat
    system: hf-fastload
    model: {model}
    instance_type: ml.m5.xlarge
    dtype: fp16
    max_shard_size: 300KB
"""


@pytest.fixture(scope="session")
def tiny_chat_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny chat models (model_build.tiny_models.CHAT_ARCHITECTURES), made on first use of each."""
    from model_build.tiny_models import make_tiny_model

    root = tmp_path_factory.mktemp("tiny-chat-models")

    class Models(dict):
        def __missing__(self, arch: str) -> Path:
            self[arch] = make_tiny_model(arch, root / arch)
            return self[arch]

    return Models()


@pytest.fixture(scope="session")
def chat_artifact(tmp_path_factory: pytest.TempPathFactory, tiny_chat_models: dict[str, Path]) -> Path:
    """The tiny Llama (hermes-style chat template, tool tokens) built as hf-fastload in fp16: the chat tests' model."""
    from deployment import load_config
    from model_build.cli import build_endpoint

    root = tmp_path_factory.mktemp("chat-artifact")
    config = root / "endpoints.yaml"
    config.write_text(CHAT_ENDPOINT.format(model=tiny_chat_models["llama"]))
    out = root / "tiny-chat"
    build_endpoint(load_config(config).endpoint("tiny-chat"), out, progress=False)
    return out


@pytest.fixture(scope="session", autouse=True)
def _in_process_builds_use_a_build_folder_of_this_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """In-process plans, builds and gates default to an empty build folder of this worker, not the repository's
    build/ (deployment.default_build_root): the end-to-end demos write build/<endpoint>/manifest.json there for
    endpoint names that examples share (minimal.yaml's, local.yaml's), so an example's plan read whichever demo had
    run before it. Subprocesses (the CLI as a user runs it, the demos, `cdk synth`) keep the repository's build/."""
    import deployment.plan as plan

    saved = plan.BUILD_ROOT
    plan.BUILD_ROOT = tmp_path_factory.mktemp("build-root")
    try:
        yield
    finally:
        plan.BUILD_ROOT = saved


@pytest.fixture(scope="session", autouse=True)
def _every_emulator_call_answered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No emulator a test started (its log under this worker's temp folder) answered a call with a server error.
    A 5xx from moto is a call it lacks or fails on; the client's SDK retries it in silence (a failed `cdk deploy`
    spent 70 s retrying two such calls until local_emulator/server.py answered them), and AWS would have answered.
    Reported at the end of the worker's session, with each request's time and the log to read."""
    yield
    from local_emulator import moto_server

    found = {
        log: errors
        for log in sorted(tmp_path_factory.getbasetemp().rglob("moto-*.log"))
        if (errors := moto_server.server_errors(log))
    }
    if found:
        pytest.fail(
            "the emulator answered calls with a server error (moto lacks or failed on them; answer them in "
            "local_emulator/server.py):\n"
            + "\n".join(f"{log}: {'; '.join(errors[:5])}" for log, errors in found.items())
        )


@pytest.fixture(scope="session")
def _moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One moto server per worker process: its start costs ~2.5 s of CPU, and 23 modules of the dev loop use one."""
    from local_emulator import moto_server

    emu = moto_server.start(tmp_path_factory.mktemp("moto"))
    yield emu
    emu.stop()


@pytest.fixture(scope="module")
def emulator(_moto_server: Any) -> Any:
    """The worker's moto server (local_emulator.moto_server.Emulator), emptied for each module as a new one would be:
    moto's reset (moto/moto_api/_internal/models.py reset: BackendDict.reset()) builds every backend anew, the
    queued SageMaker runtime answers (moto/sagemakerruntime/models.py results_queue) included."""
    if _moto_server.process.poll() is not None:
        raise RuntimeError("the worker's moto server was stopped by an earlier test; a test may stop only its own")
    _moto_server.reset()
    return _moto_server


@pytest.fixture
def moto_env(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The module's moto server, emptied, with this process's AWS clients pointed at it."""
    emulator.reset()
    for k, v in emulator.client_env().items():
        monkeypatch.setenv(k, v)
    return emulator


# ---------------------------------------------------------------------------------------------------- nothing outlives its test

# Started on a library's first use and kept for the process's life by the library itself, not by a test: jsii's node
# kernel and its stderr reader thread (aws_cdk's first import), tqdm's monitor thread (its first progress bar), multiprocessing's resource tracker.
_LIBRARY_OWNED = ("jsii", "process.stderr_sink", "tqdm_monitor", "multiprocessing.resource_tracker")


def _children() -> dict[int, str]:
    """This process's child processes: {pid: command line}."""
    found = {}
    for children in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        try:
            listed = children.read_text().split()
        except OSError:  # the thread ended meanwhile
            continue
        for pid in listed:
            try:
                found[int(pid)] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:  # gone meanwhile
                pass
    return found


_STARTED_BEFORE_THE_BODY = pytest.StashKey[tuple[set, set]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    import threading

    item.stash[_STARTED_BEFORE_THE_BODY] = (set(threading.enumerate()), set(_children()))
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """A thread or process started while a test's body ran must end with the test, its function fixtures' teardown
    included (fixtures of wider scope own what lives longer; they start it while setting up): checked after the
    teardown, with a few seconds' grace for one that is shutting down."""
    import threading
    import time

    result = yield
    if _STARTED_BEFORE_THE_BODY not in item.stash:  # the body never ran (a setup error or a skip)
        return result
    threads, children = item.stash[_STARTED_BEFORE_THE_BODY]
    deadline = time.monotonic() + 5
    while True:
        left = [t.name for t in threading.enumerate() if t not in threads and t.is_alive()]
        left += [cmd for pid, cmd in _children().items() if pid not in children]
        left = [name for name in left if not any(owner in name for owner in _LIBRARY_OWNED)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if left:
        raise AssertionError(f"{item.nodeid} left running: {left}")
    return result


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The end-to-end scenarios' reports: which container answered each system's chain and how long it took
    (tests/local/system_scenario.py records them), so a run's output says it without -s."""
    lines = [
        value
        for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", [])
        if report.when == "call"
        for name, value in getattr(report, "user_properties", [])
        if name == "scenario"
    ]
    if lines:
        terminalreporter.section("end-to-end scenarios: who answered")
        for line in sorted(lines):
            terminalreporter.write_line(line)
