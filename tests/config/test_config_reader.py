"""Reading the config file: its bounds (alias bombs, size, depth, bytes), duplicate keys, strict values, name collisions
across environments and ARNs outside the environment's region, each refused with one message naming the file, the
line, the key, the value and what is allowed; and the same message, without a traceback and with nothing written,
through every entry point that reads a config (cdk synth, the pipeline synth, model_build, make deploy)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from deployment import load_config, pipeline_region_problems
from endpoint_config import ConfigError
from endpoint_config.base import Strict
from endpoint_config.yaml_reader import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES

ENDPOINT = """\
  - name: gptj
    system: hf-fastload
    model: EleutherAI/gpt-j-6B
    instance_type: ml.g5.2xlarge
"""
ENDPOINTS = "endpoints:\n" + ENDPOINT


def environments(*names: str, region: str = "us-east-1", extra: str = "") -> str:
    body = "".join(f"  {n}:\n    account: '111122223333'\n    region: {region}\n{extra}" for n in names)
    return "environments:\n" + body


# Nine aliases of the level below, nine levels deep: 9**9 (387 million) values once expanded, in 400 bytes; the issue's
# 779-byte file of this shape grew to 6 GiB.
ALIAS_BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi"))
    + ENDPOINTS
)
MERGE_BOMB = (
    "a: &a {k: v}\n"
    + "".join(f"{b}: &{b} {{<<: [{', '.join([f'*{a}'] * 9)}]}}\n" for a, b in zip("abcdefgh", "bcdefghi"))
    + ENDPOINTS
)
NOT_UTF8 = ENDPOINTS.replace("EleutherAI/gpt-j-6B", "caf\xe9").encode("latin-1")

# (id, file content, environment, fragments of the one message after "<file>: ")
BAD_FILES = [
    ("alias bomb", ALIAS_BOMB, None, [f"grows past {MAX_NODES} values once its aliases (*name) and merge keys"]),
    ("merge-key bomb", MERGE_BOMB, None, [f"grows past {MAX_NODES} values", "merge keys (<<)"]),
    ("alias cycle", "a: &a [1, *a]\n" + ENDPOINTS, None, ["line 1: an alias refers to the node that contains it"]),
    (
        "deep nesting",
        "a: " + "[" * 60 + "]" * 60 + "\n" + ENDPOINTS,
        None,
        [f"line 1, column {MAX_DEPTH + 3}: the data nests deeper than {MAX_DEPTH} levels"],
    ),
    (
        "deep through aliases",
        "a: &a [1]\n" + "".join(f"a{i}: &a{i} [*{'a' if i == 0 else f'a{i - 1}'}]\n" for i in range(45)) + ENDPOINTS,
        None,
        [f"levels deep once its aliases are expanded; allowed: {MAX_DEPTH}"],
    ),
    ("too large", ENDPOINTS + "#" * MAX_FILE_BYTES + "\n", None, ["larger than 128 KiB; allowed: at most 128 KiB"]),
    (
        "not UTF-8",
        NOT_UTF8,
        None,
        ["line 4, column 15: byte 0xe9 is not UTF-8 (the line reads 'model: caf\ufffd'); allowed: UTF-8 text"],
    ),
    ("UTF-16", "\ufeff".encode("utf-16-le") + ENDPOINTS.encode("utf-16-le"), None, ["UTF-16", "allowed: UTF-8 text"]),
    (
        "control character",
        ENDPOINTS.replace("gpt-j-6B", "gpt-j\x00"),
        None,
        ["line 4, column 28: character U+0000 is not allowed in YAML"],
    ),
    (
        "not YAML",
        ENDPOINTS + "  - [unclosed\n",
        None,
        [
            "line 7, column 1: not valid YAML: expected ',' or ']', but got '<stream end>' (while parsing a flow "
            "sequence that starts at line 6, column 5)"
        ],
    ),
    (
        "duplicate key in an environment",
        environments("prod") + "    account: '444455556666'\n" + ENDPOINTS,
        "prod",
        ["line 5, column 5: key 'account' is given twice in one mapping (lines 3 and 5)"],
    ),
    (
        "duplicate key in an endpoint",
        ENDPOINTS + "    instance_type: ml.g5.12xlarge\n",
        None,
        ["line 6, column 5: key 'instance_type' is given twice in one mapping (lines 5 and 6)"],
    ),
    (
        "duplicate top-level key",
        ENDPOINTS + ENDPOINTS,
        None,
        ["key 'endpoints' is given twice in one mapping (lines 1 and 6)"],
    ),
    (
        "quoted boolean",
        environments("prod", extra="    retain_data: 'no'\n") + ENDPOINTS,
        "prod",
        [
            "environment 'prod': retain_data: value 'no': Input should be a valid boolean; allowed: true or false (line 5)"
        ],
    ),
    (
        "YAML 1.1 boolean",
        environments("prod", extra="    retain_data: no\n") + ENDPOINTS,
        "prod",
        [
            "environment 'prod': retain_data: value 'no': Input should be a valid boolean; allowed: true or false (line 5)"
        ],
    ),
    (
        "quoted integer",
        ENDPOINTS + "    instance_count: '2'\n",
        None,
        [
            "endpoint 'gptj': instance_count: value '2': Input should be a valid integer; allowed: a whole number, written "
            "without quotes (line 6)"
        ],
    ),
    (
        "float for an integer",
        ENDPOINTS + "    instance_count: 2.0\n",
        None,
        ["endpoint 'gptj': instance_count: value 2.0: Input should be a valid integer"],
    ),
    (
        "quoted number",
        ENDPOINTS + "    autoscaling: {max_capacity: 2, target_value: '4'}\n",
        None,
        ["endpoint 'gptj': autoscaling.target_value: value '4': Input should be a valid number; allowed: a number"],
    ),
    (
        "quoted boolean in a block",
        ENDPOINTS + "    streaming: {enabled: 'true'}\n",
        None,
        ["endpoint 'gptj': streaming.enabled: value 'true': Input should be a valid boolean"],
    ),
    (
        "number for text",
        "environments:\n  prod:\n    account: 111122223333\n" + ENDPOINTS,
        "prod",
        [
            "environment 'prod': account: value 111122223333: Input should be a valid string; allowed: text: write it in "
            "quotes (YAML reads an unquoted 111122223333 as a number) (line 3)"
        ],
    ),
    (
        "quoted engine option",
        ENDPOINTS + "    engine: {max_batch_size: '8'}\n",
        None,
        ["endpoint 'gptj': engine.max_batch_size: value '8': Input should be a valid integer"],
    ),
    (
        "stack and endpoint names collide across environments",
        environments("prod", "prod-a")
        + "endpoints:\n"
        + ENDPOINT.replace("gptj", "a-chat")
        + ENDPOINT.replace("gptj", "chat"),
        "prod",
        [
            "environment 'prod', endpoint 'a-chat' and environment 'prod-a', endpoint 'chat' both make the stack "
            "'llm-endpoints-prod-a-chat'",
            "both make the SageMaker endpoint 'prod-a-chat'",
        ],
    ),
    (
        "component names collide across environments",
        environments("prod", "prod-a")
        + "endpoints:\n"
        + "".join(
            ENDPOINT.replace("gptj", name).replace("hf-fastload", "lmi-vllm").replace("EleutherAI/gpt-j-6B", "gpt2")
            + "    hosting: {mode: inference-components}\n"
            for name in ("a-chat", "chat")
        ),
        "prod",
        [
            "environment 'prod', endpoint 'a-chat' and environment 'prod-a', endpoint 'chat' both make the "
            "inference component 'prod-a-chat-ic'"
        ],
    ),
    (
        "endpoint named as the artifact stack",
        ENDPOINTS.replace("gptj", "artifacts"),
        None,
        [
            "the artifact stack and endpoint 'artifacts' both make the stack 'llm-endpoints-default-artifacts'",
            "rename the endpoint",
        ],
    ),
    (
        "topic in another region",
        environments("prod") + ENDPOINTS + "    alarms: {topic_arn: 'arn:aws:sns:eu-west-1:111122223333:ops'}\n",
        "prod",
        [
            "endpoint 'gptj': alarms.topic_arn: value 'arn:aws:sns:eu-west-1:111122223333:ops' is in region "
            "'eu-west-1', but environment 'prod' deploys to 'us-east-1'; allowed: a resource in region us-east-1, "
            "partition aws"
        ],
    ),
    (
        "key in another partition",
        environments("prod") + ENDPOINTS + "    data_capture: {sampling_percent: 10, kms_key: "
        "'arn:aws-cn:kms:cn-north-1:111122223333:key/0a1b2c3d-4e5f-6789-abcd-ef0123456789'}\n",
        "prod",
        [
            "endpoint 'gptj': data_capture.kms_key: value 'arn:aws-cn:kms:cn-north-1:",
            "is in partition 'aws-cn' and region 'cn-north-1', but environment 'prod' deploys to 'us-east-1'",
        ],
    ),
    (
        "bucket key in another region",
        environments(
            "prod",
            extra="    encryption: {bucket_key: "
            "'arn:aws:kms:us-west-2:111122223333:key/0a1b2c3d-4e5f-6789-abcd-ef0123456789'}\n",
        )
        + ENDPOINTS,
        "prod",
        ["environment 'prod': encryption.bucket_key: value 'arn:aws:kms:us-west-2:", "is in region 'us-west-2'"],
    ),
    (
        "ARNs in two regions, region left to the CLI",
        "environments:\n  prod:\n    encryption: {bucket_key: "
        "'arn:aws:kms:us-west-2:111122223333:key/0a1b2c3d-4e5f-6789-abcd-ef0123456789'}\n"
        + ENDPOINTS
        + "    alarms: {topic_arn: 'arn:aws:sns:eu-west-1:111122223333:ops'}\n",
        "prod",
        ["the ARNs name regions eu-west-1, us-west-2", "but environment 'prod' deploys to one region"],
    ),
]


def write(directory: Path, content: str | bytes) -> Path:
    path = directory / "endpoints.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize("content,env,fragments", [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_bad_file_is_refused_with_one_message(tmp_path, content, env, fragments):
    path = write(tmp_path, content)
    started = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        load_config(path, env)
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    for fragment in fragments:
        assert fragment in message, message
    # Bounded: neither reading nor the message grows with what the aliases would expand to.
    assert time.perf_counter() - started < 5 and len(message) < 2000


def test_aliases_and_merge_keys_within_bounds_work(tmp_path):
    """Repeating a block is what aliases are for: an anchored endpoint merged into a second one, a shared alarms block."""
    path = write(
        tmp_path,
        environments("prod")
        + """\
endpoints:
  - &base
    name: chat
    system: hf-fastload
    model: EleutherAI/gpt-j-6B
    instance_type: ml.g5.2xlarge
    alarms: &alarms {errors_5xx_rate: 0.02, topic_arn: 'arn:aws:sns:us-east-1:111122223333:ops'}
  - <<: *base
    name: chat-large
    instance_type: ml.g5.4xlarge
""",
    )
    chat, large = load_config(path, "prod").endpoints
    assert (large.name, large.instance_type, large.model, large.system) == (
        "chat-large",
        "ml.g5.4xlarge",
        "EleutherAI/gpt-j-6B",
        "hf-fastload",
    )
    assert large.alarms == chat.alarms and large.alarms.errors_5xx_rate == 0.02


def test_yaml_12_scalars_true_false_only_and_no_sexagesimal_or_octal(tmp_path):
    """YAML 1.2's core schema: true/false are the booleans; 010 is ten and 1:30 is text (YAML 1.1: 8 and 90)."""
    from endpoint_config.yaml_reader import parse_yaml

    data = parse_yaml("a: yes\nb: off\nc: 010\nd: '1:30'\ne: 1:30\nf: 2024-01-01\ng: True\nh: 1e3\ni: 0x10\n").data
    assert data == {
        "a": "yes",
        "b": "off",
        "c": 10,
        "d": "1:30",
        "e": "1:30",
        "f": "2024-01-01",
        "g": True,
        "h": 1000.0,
        "i": 16,
    }
    loaded = load_config(write(tmp_path, environments("prod", extra="    retain_data: false\n") + ENDPOINTS), "prod")
    assert loaded.environment.retain_data is False


def test_a_huge_value_is_shown_cut_short(tmp_path):
    """An error names the value, never the whole of a large one."""
    path = write(tmp_path, ENDPOINTS + "    revision: [" + ", ".join(["x" * 200] * 300) + "]\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value).removeprefix(f"{path}: invalid config:\n  - ")
    assert message.startswith("endpoint 'gptj': revision: value ['xxx") and len(message) < 400, message


def _config_models() -> set[type]:
    """Every pydantic model a config file is validated against: the schema's blocks and every system's engine options."""
    from pydantic import BaseModel

    from endpoint_config import AppConfig
    from endpoint_config.loader import _model_in
    from systems import all_systems

    seen: set[type] = set()
    todo: list[type] = [AppConfig, *(s.engine_options for s in all_systems().values())]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for field in model.model_fields.values():
            nested = _model_in(field.annotation)
            if nested is not None and issubclass(nested, BaseModel):
                todo.append(nested)
    return seen


def test_every_config_block_is_strict():
    """The class check: every block (a new one included) derives from Strict, so no value is converted between kinds."""
    models = _config_models()
    assert len(models) > 20
    loose = sorted(m.__name__ for m in models if not issubclass(m, Strict) or not m.model_config.get("strict"))
    assert not loose, f"config blocks not derived from endpoint_config.base.Strict: {loose}"


def test_pipeline_arns_must_be_in_the_pipelines_region():
    from helpers import environment_plans_with

    environment_plans, pipeline = environment_plans_with(
        **{
            "pipeline.connection_arn": "arn:aws:codeconnections:eu-west-1:111111111111:connection/0a1b2c3d-4e5f-6789-abcd-ef0123456789"
        }
    )
    [problem] = pipeline_region_problems(environment_plans, pipeline, "us-east-1")
    assert problem.startswith("pipeline.connection_arn: value 'arn:aws:codeconnections:eu-west-1:")
    assert "is in region 'eu-west-1', but the pipeline deploys to 'us-east-1'" in problem


# ---------------------------------------------------------------------------------------------------- entry points

# One bad file per class, each through every entry point that reads a config.
ENTRY_FILES = {
    c[0]: c
    for c in BAD_FILES
    if c[0]
    in (
        "alias bomb",
        "not UTF-8",
        "not YAML",
        "duplicate key in an environment",
        "quoted boolean",
        "stack and endpoint names collide across environments",
        "topic in another region",
    )
}


def _cdk_app(monkeypatch, path: Path, env: str | None, out: Path, *, pipeline: bool) -> int:
    """app.py's main() in this process, on the App `cdk synth -c config=PATH [-c env=ENV] [-c pipeline=true]` makes."""
    import aws_cdk as cdk

    import app
    from stacks import pipeline_stack

    context = {"config": str(path), **({"env": env} if env else {}), **({"pipeline": "true"} if pipeline else {})}
    monkeypatch.setattr(pipeline_stack, "ROOT", path.parent)  # the pipeline reads configs inside the repository
    with pytest.raises(SystemExit) as exited:
        app.main(cdk.App(context=context, outdir=str(out)))
    return exited.value.code


def _model_build(command: str):
    def run(monkeypatch, path: Path, env: str | None, out: Path) -> int:
        from model_build.cli import main

        endpoint = [] if command in ("preflight", "clean") else ["--endpoint", "gptj"]
        return main(
            [command, "--config", str(path), "--build-root", str(out), *(["--env", env] if env else []), *endpoint]
        )

    return run


def _make_deploy(monkeypatch, path: Path, env: str | None, out: Path) -> int:
    from workstation.deploy import main

    return main(["deploy", "--config", str(path), *(["--env", env] if env else [])])


ENTRY_POINTS = {
    "cdk synth": lambda mp, path, env, out: _cdk_app(mp, path, env, out, pipeline=False),
    "cdk synth -c pipeline=true": lambda mp, path, env, out: _cdk_app(mp, path, env, out, pipeline=True),
    **{f"model_build {c}": _model_build(c) for c in ("build", "publish", "preflight", "clean", "smoke", "serve")},
    "make deploy": _make_deploy,
}


@pytest.mark.parametrize("case", list(ENTRY_FILES))
def test_every_entry_point_prints_the_message_exits_2_and_writes_nothing(monkeypatch, capsys, tmp_path, case):
    _, content, env, fragments = ENTRY_FILES[case]
    path = write(tmp_path, content)
    for name, run in ENTRY_POINTS.items():
        out = tmp_path / "out"
        out.mkdir()
        assert run(monkeypatch, path, env, out) == 2, name
        captured = capsys.readouterr()
        assert "Traceback" not in captured.out + captured.err, name
        assert captured.err.startswith(f"error: {path}: ") and captured.err.count("error:") == 1, (name, captured.err)
        assert all(f in captured.err for f in fragments), (name, captured.err)
        assert not list(out.iterdir()), name
        out.rmdir()
