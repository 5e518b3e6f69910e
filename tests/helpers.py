"""Helpers shared by several test modules: the repository's paths and example configs, the model_build CLI, a
server app on a free localhost port, and a boto3 session for tests against the moto server (whose fixtures,
`emulator` and `moto_env`, are in tests/conftest.py).

Plain functions and classes, imported where used (`from helpers import running`); no fixtures here, so that
importing this module never collides with pytest's plugin loading.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import boto3
import httpx
import yaml
from hermetic import subprocess_env

from local_emulator.moto_server import free_port

# ---------------------------------------------------------------------------------------------------- repository

ROOT = Path(__file__).resolve().parent.parent
FAKE_HASH = "ab" * 32
# A published artifact the emulator's artifact check accepts (endpoint_runtime/artifact_check.py verifies the objects
# against the manifest): one small file, no weights (the emulator never starts a container). Pin PINNED_HASH and call
# publish_pinned_artifact once the bucket exists.
PINNED_BODY = b"not weights: the local emulator never starts a container\n"
PINNED_FILES = [{"path": "README.txt", "size": len(PINNED_BODY), "sha256": hashlib.sha256(PINNED_BODY).hexdigest()}]


def _pinned_hash() -> str:
    from artifact.manifest import content_hash

    return content_hash(PINNED_FILES)


PINNED_HASH = _pinned_hash()


def publish_pinned_artifact(s3: Any, bucket: str, prefix: str) -> None:
    """Write the pinned artifact under `prefix` (models/<endpoint>/<PINNED_HASH>/) as publish would: each file with
    its sha256 recorded, manifest.json last."""
    s3.put_object(
        Bucket=bucket, Key=prefix + "README.txt", Body=PINNED_BODY, Metadata={"sha256": PINNED_FILES[0]["sha256"]}
    )
    manifest = {"schema_version": 1, "content_hash": PINNED_HASH, "files": PINNED_FILES}
    s3.put_object(Bucket=bucket, Key=prefix + "manifest.json", Body=json.dumps(manifest).encode())


EXAMPLES = sorted((ROOT / "config" / "examples").glob("*.yaml"))
# (config path, environment) for every environment of every example (None: a file without environments).
EXAMPLE_CASES = [
    (path.relative_to(ROOT).as_posix(), env)
    for path in EXAMPLES
    for env in (list(yaml.safe_load(path.read_text()).get("environments") or {}) or [None])
]


def cdk_context() -> dict:
    """An App built in-process does not read cdk.json: merge its context so tests see what `cdk synth` sees."""
    return json.loads((ROOT / "cdk.json").read_text())["context"]


@dataclass
class Synthesized:
    outdir: Path
    templates: dict[str, dict]  # stack name -> template JSON
    # stack name -> Stack object; None when the synth was read back from another worker's cdk.out (tests/conftest.py
    # `synth`): `stacks` then synthesizes the same inputs once in this process, for the few tests that read live objects.
    live_stacks: dict[str, object] | None = None
    resynthesize: Callable[[], dict[str, object]] | None = field(default=None, repr=False)

    @property
    def stacks(self) -> dict[str, object]:
        if self.live_stacks is None:
            assert self.resynthesize is not None, "a Synthesized without stacks has a way to make them"
            self.live_stacks = self.resynthesize()
        return self.live_stacks

    def account(self, stack_name: str) -> str | None:
        """The stack's account as the cloud assembly's manifest.json names it; None for an environment-agnostic stack."""
        manifest = json.loads((self.outdir / "manifest.json").read_text())
        account = manifest["artifacts"][stack_name]["environment"].removeprefix("aws://").split("/")[0]
        return account if account.isdigit() else None

    def warnings(self, stack_name: str) -> list[str]:
        """The stack's synth warnings (Annotations.add_warning_v2, cdk-nag's), as the cloud assembly records them (the
        manifest's metadata, or the stack's own metadata file that the manifest names): read from cdk.out, so no
        live Stack is needed."""
        artifact = json.loads((self.outdir / "manifest.json").read_text())["artifacts"][stack_name]
        metadata = dict(artifact.get("metadata", {}))
        if "additionalMetadataFile" in artifact:
            metadata.update(json.loads((self.outdir / artifact["additionalMetadataFile"]).read_text()))
        return [
            entry["data"] for entries in metadata.values() for entry in entries if entry["type"] == "aws:cdk:warning"
        ]

    def template(self, stack_name: str):
        from aws_cdk.assertions import Template

        return Template.from_json(self.templates[stack_name])

    def resources(self, stack_name: str, type_name: str) -> list[dict]:
        return [r for r in self.templates[stack_name]["Resources"].values() if r["Type"] == type_name]


def repository_python_files() -> list[str]:
    """The repository's .py files, tracked or new, relative to ROOT; ignored outputs (build/, bench's raw copies) are
    not ours. git runs with the suite's explicit environment."""
    from hermetic import subprocess_env

    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*.py"],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(listed)


def run_dir_of(tmp_path_factory: Any) -> Path:
    """The folder this run's processes share: under xdist each worker's base temp is <run folder>/popen-gwN."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def made_once(entry: Path, done: Path) -> Iterator[bool]:
    """Holds entry's lock (waiting for another worker that holds it) and says whether `done` is still to be written:
    the first process to get here makes it, every later one reads what it left."""
    import fcntl

    entry.mkdir(parents=True, exist_ok=True)
    with open(entry / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when its holder dies
        yield not done.exists()


TINY_MODELS = Path("build/tiny-models")


def repository_tiny_models(root: Path = ROOT) -> list[str]:
    """The architectures whose tiny model a repository config names as its model (build/tiny-models/<arch>, which
    `make demo` makes when missing)."""
    from model_build.tiny_models import ARCHITECTURES

    named: set[str] = set()
    for path in sorted((root / "config").rglob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        endpoints = document.get("endpoints") if isinstance(document, dict) else None
        for endpoint in endpoints if isinstance(endpoints, list) else []:
            model = Path(str(endpoint.get("model", ""))) if isinstance(endpoint, dict) else Path()
            if model.parent == TINY_MODELS and model.name in ARCHITECTURES:
                named.add(model.name)
    return sorted(named)


def make_repository_tiny_models(root: Path = ROOT) -> list[str]:
    """Make each tiny model a repository config names that is missing (in this process, once per machine: the
    files are seeded, so every maker writes the same ones), and return those made. A plan reads a local model's
    folder when it is there (its size sizes the volume, its chat template turns chat on), and the session's demos
    make these folders, so without this a test's templates depended on which tests ran before it. Each is written
    beside its place and moved in whole, as the demo does (local_emulator/demo.py), so a demo running meanwhile
    never reads half of one; the worker's lock keeps the other worker from making the same one."""
    import fcntl
    import shutil
    import tempfile

    from model_build.tiny_models import make_tiny_model

    models = root / TINY_MODELS
    models.mkdir(parents=True, exist_ok=True)
    made = []
    with open(models / ".making.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for arch in repository_tiny_models(root):
            if (models / arch / "config.json").is_file():
                continue
            scratch = Path(tempfile.mkdtemp(prefix=f".{arch}-", dir=models))
            try:
                make_tiny_model(arch, scratch / "model")
                try:
                    (scratch / "model").rename(models / arch)
                    made.append(arch)
                except OSError:  # a demo made it meanwhile: the same files
                    if not (models / arch / "config.json").is_file():
                        raise
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    return made


def synthesize(
    config: str | Path, env: str | None, outdir: Path, build_root: Path | None = None, allow_unbuilt: bool = True
) -> Synthesized:
    """The app's stacks for one config and environment, synthesized in this process as `cdk synth` writes them
    (cdk-nag included: raises on an unacknowledged finding). Tests use the session-cached `synth` fixture."""
    import aws_cdk as cdk

    from deployment import load_config
    from stacks import add_stacks

    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    stacks = add_stacks(
        app, load_config(ROOT / config, env, build_root=build_root or outdir / "no-build"), allow_unbuilt=allow_unbuilt
    )
    app.synth()
    templates = {name: json.loads((outdir / f"{name}.template.json").read_text()) for name in stacks}
    return Synthesized(outdir, templates, stacks)


def synthesize_endpoint_stack(config: str | Path, env: str | None, endpoint: str) -> dict:
    """One endpoint's EndpointStack alone (no artifact stack, no cdk-nag), synthesized in this process: ~2 s where a
    whole app costs several times that. For a config written by the test itself."""
    import aws_cdk as cdk

    from deployment import load_config
    from stacks.endpoint_stack import EndpointStack

    environment_plan = load_config(config, env)
    plan = environment_plan.plan(endpoint)
    app = cdk.App(context=cdk_context())
    environment = cdk.Environment(
        account=environment_plan.environment.account, region=environment_plan.environment.region
    )
    EndpointStack(
        app,
        plan.stack_name,
        plan=plan,
        image_repository=environment_plan.image_repository,
        allow_unbuilt=True,
        env=environment,
    )
    return app.synth().get_stack_by_name(plan.stack_name).template


def cfn_lint_findings(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """What `cfn-lint --format json PATHS` prints, parsed: the steps of its `main` (cfnlint/runner/cli.py, cfn-lint
    1.58 in the venv running the suite) in this process, with the same configuration (its arguments, and .cfnlintrc
    from the working folder and HOME, which the suite's subprocesses share). A subprocess spent ~1 s of CPU starting
    Python and importing cfnlint for each call (docs/design/dev-loop.md). A broken run raises here, where the CLI's
    exit status said so."""
    from cfnlint.config import ConfigMixIn
    from cfnlint.formatters import JsonFormatter
    from cfnlint.runner import Runner

    config = ConfigMixIn(["--format", "json", *map(str, paths)])
    runner = Runner(config)
    matches = sorted(runner.run(), key=lambda m: (m.filename, m.linenumber, m.rule.id))
    return json.loads(JsonFormatter().print_matches(matches, runner.rules, config=config) or "[]")


def alarm_series(props: dict) -> list[dict]:
    """The metrics an AWS::CloudWatch::Alarm's properties watch: its one metric, or each metric of its metric-math
    expression, as {"Namespace", "MetricName", "Dimensions", "Period"}."""
    if "MetricName" in props:
        return [{k: props.get(k) for k in ("Namespace", "MetricName", "Dimensions", "Period")}]
    return [
        {**q["MetricStat"]["Metric"], "Period": q["MetricStat"]["Period"]}
        for q in props["Metrics"]
        if "MetricStat" in q
    ]


def lambda_entry(handler: str) -> Any:
    """The function a Lambda `Handler` setting names ("invoke/handler.handler"), loaded from lambda/ by path as the
    runtime loads it from the asset's root."""
    import importlib.util

    path, _, name = handler.rpartition(".")
    spec = importlib.util.spec_from_file_location(
        f"lambda_entry_{path.replace('/', '_')}", ROOT / "lambda" / f"{path}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def config_refusal(path: Path) -> str:
    """The message `deployment.load_config` refuses the config file at `path` with; it must name the file first."""
    import pytest

    from deployment import load_config
    from endpoint_config import ConfigError

    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(f"{path}: invalid config:")
    return message


# The one weights file a fake build lists: 3 GiB, so the volume it sizes is above SageMaker's minimum.
FAKE_WEIGHT_BYTES = 3 * 1024**3


def write_fake_manifest(
    build_root: Path,
    name: str,
    system: str,
    dtype: str,
    content_hash: str = FAKE_HASH,
    weight_bytes: int = FAKE_WEIGHT_BYTES,
) -> None:
    """What the stack reads from a build: system, dtype, content hash and the files with their sizes (synth needs no
    weights). It lists its files as every real build does, so the plan sizes the volume from the manifest and never
    from the source model's folder, which tests elsewhere in the session may be writing (build/tiny-models)."""
    d = build_root / name
    d.mkdir(parents=True, exist_ok=True)
    files = [{"path": "model.safetensors", "size": weight_bytes, "sha256": "ef" * 32}]
    document = {"system": system, "dtype": dtype, "files": files, "content_hash": content_hash}
    (d / "manifest.json").write_text(json.dumps(document))


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m model_build ARGS` in a subprocess, as a user runs it."""
    env = subprocess_env(PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "model_build", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=120,
    )


# ------------------------------------------------------------------------------------------- hand-made models

# A Qwen3-shaped config.json small enough to write by hand: the honest model folder the untrusted-input tests
# change one thing of (tests/config/test_untrusted_values.py, tests/model_build/test_untrusted_model_files.py).
HAND_MADE_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "layer_types": ["full_attention", "full_attention"],
    "max_position_embeddings": 512,
    "vocab_size": 793,
    "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
HAND_MADE_TEMPLATE = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"


def safetensors_bytes(header: dict | bytes, data: bytes = b"") -> bytes:
    """A safetensors file: the header's 8-byte little-endian length, the header (JSON, or raw bytes as given), data."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def write_hand_made_model(folder: Path) -> Path:
    """A model folder written by hand: HAND_MADE_CONFIG, one safetensors file of one tensor, a tokenizer config
    with a chat template. No torch, no tokenizer: a case costs the reader, not a model's load."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(HAND_MADE_CONFIG))
    tensor = {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}
    (folder / "model.safetensors").write_bytes(safetensors_bytes(tensor, b"\0" * 16))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": HAND_MADE_TEMPLATE, "eos_token": "</s>"})
    )
    return folder


# ---------------------------------------------------------------------------------------------------- HTTP


def wait_for_ping(url: str, status: int | None = 200, timeout: float = 20) -> int:
    """Poll GET {url}/ping until it answers (status None: any answer) or answers `status`; the status code."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            code = httpx.get(f"{url}/ping", timeout=2).status_code
            if status is None or code == status:
                return code
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}/ping did not answer {status or 'at all'} within {timeout} s")
        time.sleep(0.05)


def serve_in_thread(server: Any) -> threading.Thread:
    """`server.serve_forever()` in a daemon thread. It checks for shutdown() every poll_interval, 0.5 s by default:
    every fixture that stopped a server waited that long, so it polls every 20 ms."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    return thread


@contextmanager
def running(app: Any, ready: bool = True, timeout: float = 20) -> Iterator[str]:
    """uvicorn serving `app` in a thread on a free localhost port; yields its URL once /ping answers (200 with
    ready=True, anything otherwise) and stops the server on leaving the block."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ping(url, 200 if ready else None, timeout)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# ---------------------------------------------------------------------------------------------------- AWS


class Session:
    """A boto3 session whose clients are real (moto) except the ones given (e.g. a Stubber-wrapped client)."""

    def __init__(self, **clients: Any) -> None:
        self._real = boto3.session.Session()
        self._clients = clients
        self.region_name = self._real.region_name

    def client(self, name: str, **kwargs: Any) -> Any:
        return self._clients[name] if name in self._clients else self._real.client(name, **kwargs)

    def get_available_partitions(self) -> list[str]:
        return self._real.get_available_partitions()

    def get_available_regions(self, *args: Any, **kwargs: Any) -> list[str]:
        return self._real.get_available_regions(*args, **kwargs)


# ---------------------------------------------------------------------------------------------- bad bodies

# Request bodies every request entry point (the invoke Lambda, model_build's local server, byoc_server) must
# refuse with a 4xx whose message says what is wrong, never a 500: (id, body bytes, substrings of the message).
# Valid JSON that Python's json turns into trouble (lone surrogates, deep nesting, NaN, 1e999) sits beside
# plain garbage. The messages are written alike in the three servers, so one table serves all of them.
BAD_BODIES: list[tuple[str, bytes, list[str]]] = [
    (
        "lone-surrogate-in-inputs",
        b'{"inputs": "ab\\ud800"}',
        ["inputs contains a lone UTF-16 surrogate \\ud800 at character 2"],
    ),
    (
        "lone-surrogate-in-inputs-list",
        b'{"inputs": ["ok", "\\udfff"]}',
        ["inputs[1] contains a lone UTF-16 surrogate \\udfff at character 0"],
    ),
    (
        "lone-surrogate-in-parameter-string",
        b'{"inputs": "hi", "parameters": {"temperature": "x\\ud83d"}}',
        ["parameters.temperature contains a lone UTF-16 surrogate \\ud83d at character 1"],
    ),
    (
        "lone-surrogate-in-key",
        b'{"inputs": "hi", "parameters": {"\\ud800": 1}}',
        ["a key of parameters contains a lone UTF-16 surrogate \\ud800"],
    ),
    ("nested-100000-levels", b"[" * 100_000 + b"]" * 100_000, ["nested more than 32 levels deep; the limit is 32"]),
    (
        "nested-40-levels-in-inputs",
        b'{"inputs": ' + b"[" * 40 + b'"x"' + b"]" * 40 + b"}",
        ["inputs[0]", "nested more than 32 levels deep; the limit is 32"],
    ),
    ("invalid-utf8", b'{"inputs": "\xff"}', ["UTF-8", "invalid start byte"]),
    ("top-level-array", b'["hi"]', ["must be a JSON object"]),
    ("top-level-string", b'"hi"', ["must be a JSON object"]),
    ("top-level-null", b"null", ["must be a JSON object"]),
    ("huge-float", b'{"inputs": "hi", "parameters": {"temperature": 1e999}}', ["number 1e999", "out of range"]),
    (
        "huge-integer",
        b'{"inputs": "hi", "parameters": {"max_new_tokens": ' + b"9" * 5000 + b"}}",
        ["integer of 5000 digits; the limit is 40 digits"],
    ),
    ("nan-literal", b'{"inputs": "hi", "parameters": {"temperature": NaN}}', ["not valid JSON", "NaN"]),
    ("infinity-literal", b'{"inputs": "hi", "parameters": {"top_p": -Infinity}}', ["not valid JSON", "-Infinity"]),
    ("empty-body", b"", ["empty"]),
    ("blank-body", b" \n\t", ["empty"]),
    ("truncated-json", b'{"inputs": ', ["not valid JSON"]),
]

# A surrogate *pair* is valid JSON for one character above U+FFFF: the checks above must let it through.
EMOJI_BODY = b'{"inputs": "smile \\ud83d\\ude00", "parameters": {"max_new_tokens": 2}}'


# ---------------------------------------------------------------------------------------------------- tokenizers

# What a tokenizer saved by transformers 5 carries beyond the vocabulary: extra special tokens (written as a list under
# `extra_special_tokens`) and a chat template (written to chat_template.jinja).
EXTRA_SPECIAL_TOKENS = ["<|tool|>", "<|user|>"]
CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def save_tokenizer_with_transformers5(model_dir: Path) -> None:
    """Replace a tiny model's tokenizer files by what transformers 5's save_pretrained writes for a generic
    fast tokenizer: tokenizer.json (tokenizers 0.23) + tokenizer_config.json with `TokenizersBackend`,
    `extra_special_tokens` as a list, and chat_template.jinja."""
    import transformers

    original = transformers.AutoTokenizer.from_pretrained(model_dir)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        (model_dir / name).unlink(missing_ok=True)
    saved = transformers.PreTrainedTokenizerFast(
        tokenizer_object=original.backend_tokenizer,
        eos_token=original.eos_token,
        additional_special_tokens=EXTRA_SPECIAL_TOKENS,
        chat_template=CHAT_TEMPLATE,
    )
    saved.save_pretrained(model_dir)


# ---------------------------------------------------------------------------------------------------- the pipeline

PIPELINE_CONFIG = "config/examples/pipeline.yaml"
TOOLS = "111111111111"  # the pipeline's (tools) account in PIPELINE_CONFIG
HF_SECRET = {"secret": "hf/read-token", "json_key": "token"}
DOCKER_HUB_SECRET = "arn:aws:secretsmanager:us-east-1:111111111111:secret:dockerhub-AbCdEf"
CODEBUILD_KEY = "AKIACODEBUILDSTANDIN"  # the CodeBuild role's key, served by the container credentials stand-in


def environment_plans_with(**changes):
    """config/examples/pipeline.yaml with dotted keys changed (None removes one): ({env: EnvironmentPlan}, PipelineSpec)."""
    import yaml

    from deployment import parse_config, resolve

    raw = yaml.safe_load((ROOT / PIPELINE_CONFIG).read_text())
    for dotted, value in changes.items():
        target = raw
        *head, last = dotted.split(".")
        for key in head:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is None:
            target.pop(last)
        else:
            target[last] = value
    config = parse_config(raw, ROOT / PIPELINE_CONFIG)
    return {env: resolve(config, ROOT / PIPELINE_CONFIG, env) for env in config.environments}, config.pipeline


class ContainerCredentials(BaseHTTPRequestHandler):
    """The container credentials endpoint's answer (botocore ContainerProvider reads these four fields)."""

    body = json.dumps(
        {
            "AccessKeyId": CODEBUILD_KEY,
            "SecretAccessKey": "testing",
            "Token": "testing",
            "Expiration": "2099-01-01T00:00:00Z",
        }
    ).encode()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_: Any) -> None:
        pass


# checkov's canary template (tests/stacks/conftest.py writes it, tests/stacks/test_checkov.py reads its findings).
CHECKOV_CANARY = "canary/bad-artifacts.template.json"


def cdk_cli_synth(args: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    """The real CDK CLI (~10 s of node and a Python app): `cdk synth -q ARGS -o OUT` from the repository."""
    command = [str(ROOT / "node_modules/.bin/cdk"), "synth", "--no-notices", "-q", *args, "-o", str(out)]
    return subprocess.run(command, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=600)


def run_side_by_side(
    commands: dict[str, list[str]], env: dict[str, str] | None = None, cwd: Path = ROOT, timeout: float = 900
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run independent commands two at a time (the machine has two cores) and wait for all: {name: its result}. Each
    gets `env`, or the session's base environment (tests/hermetic.py); none outlives this call."""
    from concurrent.futures import ThreadPoolExecutor

    env = env if env is not None else subprocess_env()

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run, args) for name, args in commands.items()}
        return {name: future.result() for name, future in futures.items()}


def codebuild_job_world(
    stack_name: str, bucket: str, output: str, project: str, compute_type: str, account: str = "123456789012"
) -> str:
    """A CodeBuild job as the artifacts stack leaves it, in the moto server: the bucket, the project, and a stack
    whose output `output` (RecipeBuildProject, WeightsStagingProject) names it, which model_build/stage.py's
    follow_codebuild looks up. Returns the project's name."""
    import json

    import boto3

    boto3.client("s3").create_bucket(Bucket=bucket)
    boto3.client("codebuild").create_project(
        name=project,
        source={"type": "S3", "location": f"{bucket}/code.zip"},
        artifacts={"type": "NO_ARTIFACTS"},
        environment={"type": "LINUX_CONTAINER", "image": "aws/codebuild/standard:8.0", "computeType": compute_type},
        serviceRole=f"arn:aws:iam::{account}:role/{project}",
    )
    template = {
        "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {output: {"Value": project}},
    }
    boto3.client("cloudformation").create_stack(StackName=stack_name, TemplateBody=json.dumps(template))
    return project
