"""A model folder is input nobody here wrote: each hostile class (the reliability review of 2026-12-02, issue 37) made here
in tmp_path, run through config loading and `python -m model_build build`, must be refused by name (file, field,
value, what is allowed), exit non-zero, print no traceback, end in time and write nothing (docs/design/untrusted-input.md).

The model folder is written by hand (tests/helpers.py write_hand_made_model: a Qwen3-shaped config.json, a
safetensors file with one tensor, a tokenizer config with a chat template): no torch, no tokenizer, so each case
costs the CLI's start and not a model's load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import HAND_MADE_CONFIG, ROOT, config_refusal, safetensors_bytes, write_hand_made_model
from hermetic import subprocess_env


def with_config(**changes: object) -> Callable[[Path], None]:
    def change(model: Path) -> None:
        (model / "config.json").write_text(json.dumps({**HAND_MADE_CONFIG, **changes}))

    return change


def with_config_text(text: str) -> Callable[[Path], None]:
    def change(model: Path) -> None:
        (model / "config.json").write_text(text)

    return change


def with_template(template: str) -> Callable[[Path], None]:
    def change(model: Path) -> None:
        (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))

    return change


def fifo(name: str) -> Callable[[Path], None]:
    def change(model: Path) -> None:
        (model / name).unlink()
        os.mkfifo(model / name)

    return change


def symlink_loop(name: str) -> Callable[[Path], None]:
    def change(model: Path) -> None:
        (model / name).unlink()
        (model / name).symlink_to(model / name)

    return change


def deep_safetensors(model: Path) -> None:
    (model / "model.safetensors").write_bytes(safetensors_bytes(b"[" * 100_000 + b"]" * 100_000))


def config_file(tmp_path: Path, model: Path, system: str = "vllm", extra: str = "") -> Path:
    path = tmp_path / "endpoints.yaml"
    path.write_text(
        "endpoints:\n"
        "  - name: ep\n"
        f"    system: {system}\n"
        f"    model: {model}\n"
        f"    instance_type: {'ml.g5.xlarge' if system != 'hf-fastload' else 'ml.m5.xlarge'}\n"
        "    dtype: fp16\n" + extra
    )
    return path


# A lower chat-template budget (systems/chat_template.py RENDER_SECONDS_ENV), for the tests that wait for a looping
# template's refusal: the same check, 2 s instead of 5 each; an honest template renders in ~0.7 s on a loaded machine.
SHORT_BUDGET = {"CHAT_TEMPLATE_RENDER_SECONDS": "2"}


def build(config: Path, build_root: Path, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m model_build build` as a user runs it, under a limit: a hang fails the test instead of the run."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "model_build", "build", "--config", str(config), "--endpoint", "ep"]
        + ["--build-root", str(build_root), "--quiet"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=subprocess_env(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", **env),
        timeout=timeout,
    )
    assert time.monotonic() - started < timeout
    return done


def assert_refused(done: subprocess.CompletedProcess[str], *words: str) -> str:
    message = done.stderr
    assert done.returncode == 2, (done.returncode, message[-2000:])
    assert "Traceback" not in message, message[-2000:]
    for word in words:
        assert word in message, (word, message[-2000:])
    return message


def nothing_written(build_root: Path) -> None:
    """No artifact, no temporary folder: a refused build leaves the build root as it found it (absent or empty)."""
    assert not build_root.exists() or not any(build_root.iterdir()), sorted(build_root.rglob("*"))


# (case, change to the model folder, what the refusal names: the file and field, the value, what is allowed)
CONFIG_CASES = [
    ("zero-heads", with_config(num_attention_heads=0), ["config.json: num_attention_heads is 0", "from 1 to"]),
    ("zero-vocab", with_config(vocab_size=0), ["config.json: vocab_size is 0", "allowed: an integer from 1"]),
    ("negative-hidden", with_config(hidden_size=-64), ["hidden_size is -64", "allowed"]),
    ("negative-kv-heads", with_config(num_key_value_heads=-1), ["num_key_value_heads is -1", "allowed"]),
    ("positions-string", with_config(max_position_embeddings="x"), ["max_position_embeddings is 'x'", "integer"]),
    (
        "positions-infinity",
        with_config_text(
            json.dumps(HAND_MADE_CONFIG).replace('"max_position_embeddings": 512', '"max_position_embeddings": 1e999')
        ),
        ["max_position_embeddings is inf", "integer"],
    ),
    ("nan", with_config_text(json.dumps(HAND_MADE_CONFIG).replace("1000000.0", "NaN")), ["a number is NaN", "finite"]),
    ("rope-string", with_config(rope_parameters="x"), ["rope_parameters is 'x'", "a JSON object or null"]),
    (
        "rope-factor-negative",
        with_config(rope_parameters={"rope_type": "yarn", "factor": -2}),
        ["rope_parameters.factor is -2", "above 0"],
    ),
    ("rope-factor-huge", with_config(rope_scaling={"type": "linear", "factor": 1e300}), ["factor is 1e+300"]),
    (
        "quantization-bits-string",
        with_config(quantization_config={"quant_method": "awq", "bits": "4"}),
        ["quantization_config.bits is '4'", "integer from 1 to 64"],
    ),
    ("quantization-string", with_config(quantization_config="fp8"), ["quantization_config is 'fp8'"]),
    ("text-config-list", with_config(text_config=[1]), ["text_config is [1]", "a JSON object"]),
    ("layer-types-short", with_config(layer_types=["full_attention"]), ["layer_types is 1 entries", "one per layer"]),
    ("architectures-empty", with_config(architectures=[]), ["architectures is []", "non-empty list"]),
    ("layers-10-to-12", with_config(num_hidden_layers=10**12), ["num_hidden_layers is 1000000000000", "to 4,096"]),
    ("heads-not-dividing", with_config(head_dim=None, num_attention_heads=3), ["a divisor of hidden_size 64"]),
    ("kv-not-dividing", with_config(num_key_value_heads=3), ["num_key_value_heads is 3", "a divisor of"]),
    ("deep-json", with_config_text("[" * 200_000 + "]" * 200_000), ["config.json: nesting", "at most 64 levels"]),
    (
        "duplicate-keys",
        with_config_text(json.dumps(HAND_MADE_CONFIG).replace("{", '{"vocab_size": 5, ', 1)),
        ["key 'vocab_size' is given twice"],
    ),
    ("not-an-object", with_config_text("[1, 2]"), ["config.json is a JSON list", "a JSON object"]),
    ("fifo-weights", fifo("model.safetensors"), ["model.safetensors is a FIFO", "a regular file"]),
    ("fifo-config", fifo("config.json"), ["config.json is a FIFO", "a regular file"]),
    ("deep-safetensors-header", deep_safetensors, ["model.safetensors header: nesting", "at most 64 levels"]),
    ("config-symlink-loop", symlink_loop("config.json"), ["config.json cannot be read", "symbolic links"]),
]


@pytest.mark.parametrize(("change", "words"), [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES])
def test_a_lying_model_folder_is_refused_at_config_load_by_file_and_field(
    tmp_path: Path, change: Callable[[Path], None], words: list[str]
) -> None:
    """What `cdk synth` and every command reads first: the config loader's checks read the model folder through
    the bounded readers, so each class is a config error naming the file, the field and the value, in time."""
    model = write_hand_made_model(tmp_path / "model")
    change(model)
    config = config_file(tmp_path, model)
    started = time.monotonic()
    message = config_refusal(config)
    assert time.monotonic() - started < 20
    assert "model:" in message
    for word in words:
        assert word in message, (word, message)


BUILD_CASES = [c for c in CONFIG_CASES if c[0] in ("layers-10-to-12", "fifo-weights", "deep-json", "zero-heads")]


@pytest.mark.parametrize(("change", "words"), [c[1:] for c in BUILD_CASES], ids=[c[0] for c in BUILD_CASES])
def test_the_build_refuses_the_hostile_folders_that_hung_or_crashed_it(
    tmp_path: Path, change: Callable[[Path], None], words: list[str]
) -> None:
    """The review's hangs (a FIFO as the weights, 10^12 layers) and tracebacks (0 heads, JSON 200,000 deep) through
    `python -m model_build build`: exit 2 with the file and field, no traceback, nothing in the build root."""
    model = write_hand_made_model(tmp_path / "model")
    change(model)
    build_root = tmp_path / "builds"
    assert_refused(build(config_file(tmp_path, model), build_root), *words)
    nothing_written(build_root)


TEMPLATE_CASES = [
    ("divides-by-zero", "{{ 1 // 0 }}", "ZeroDivisionError"),
    ("recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recurses without end"),
    ("wordwrap-zero", "{{ messages[0].content | wordwrap(0) }}", "invalid width 0"),
    ("loops-10-to-10", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "within"),
    ("two-gigabytes", '{{ "x" * 2000000000 }}', "more memory than the budget"),
    ("huge-output", '{% for i in range(100000) %}{{ "y" * 100 }}{% endfor %}', "output passes"),
    ("includes-a-file", '{% include "/etc/passwd" %}', "includes, imports or extends a file"),
    ("syntax", "{% for %}", "cannot render"),
]


@pytest.mark.parametrize(("template", "words"), [c[1:] for c in TEMPLATE_CASES], ids=[c[0] for c in TEMPLATE_CASES])
def test_a_chat_template_that_fails_or_passes_its_budget_is_refused_naming_it(
    template: str, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """systems.chat_template.render_bounded: each template class ends within the time budget as a BuildError that
    names the template's source."""
    from artifact import BuildError
    from systems.chat_template import RENDER_SECONDS, render_bounded

    if words == "within":  # a template that only the clock stops
        monkeypatch.setenv(*next(iter(SHORT_BUDGET.items())))
    started = time.monotonic()
    with pytest.raises(BuildError) as err:
        render_bounded(template, source="the-source", messages=[{"role": "user", "content": "hi there"}])
    assert time.monotonic() - started < RENDER_SECONDS + 5
    assert str(err.value).startswith("the-source: ")
    assert words in str(err.value)


@pytest.mark.parametrize("value", ["10", "0", "-1", "nan", "five", ""])
def test_the_budget_may_be_lowered_never_raised_or_garbled(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from artifact import BuildError
    from systems.chat_template import RENDER_SECONDS_ENV, render_bounded

    monkeypatch.setenv(RENDER_SECONDS_ENV, value)
    with pytest.raises(BuildError) as err:
        render_bounded("hi", source="s", messages=[{"role": "user", "content": "hi"}])
    assert str(err.value) == (
        f"environment variable CHAT_TEMPLATE_RENDER_SECONDS: value {value!r}; allowed: a number of seconds above 0 "
        "and at most 5 (unset, the budget is 5 s)"
    )


def test_an_honest_template_renders_as_transformers_renders_it_and_cheaply() -> None:
    """The sandbox is transformers' own environment (trim_blocks, lstrip_blocks, tojson, raise_exception): Qwen3's
    template gives what transformers gives. The cost is the child's start, well under the budget."""
    import transformers.utils.chat_template_utils as utils

    from model_build.tiny_models import QWEN3_THINKING_TEMPLATE
    from systems.chat_template import RENDER_SECONDS, render_bounded

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    started = time.monotonic()
    ours = render_bounded(QWEN3_THINKING_TEMPLATE, source="qwen3", messages=messages)
    took = time.monotonic() - started
    theirs = utils._compile_jinja_template(QWEN3_THINKING_TEMPLATE).render(
        messages=messages, add_generation_prompt=True
    )
    assert ours == theirs
    assert took < RENDER_SECONDS / 2


@pytest.mark.parametrize(
    ("source", "change"),
    [
        ("tokenizer_config.json chat_template", with_template("{{ 1 // 0 }}")),
        ("chat_template.jinja", lambda m: (m / "chat_template.jinja").write_text("{% include 'x' %}")),
    ],
    ids=["tokenizer-config", "jinja-file"],
)
def test_the_build_refuses_the_models_own_template_by_its_file(
    tmp_path: Path, source: str, change: Callable[[Path], None]
) -> None:
    model = write_hand_made_model(tmp_path / "model")
    change(model)
    build_root = tmp_path / "builds"
    message = assert_refused(build(config_file(tmp_path, model), build_root), "endpoint 'ep'", f"{model}/{source}")
    assert "the chat template cannot render" in message
    nothing_written(build_root)


def test_a_ten_megabyte_template_is_refused_by_size(tmp_path: Path) -> None:
    model = write_hand_made_model(tmp_path / "model")
    with_template("x" * 10_000_000)(model)
    build_root = tmp_path / "builds"
    assert_refused(
        build(config_file(tmp_path, model), build_root), "tokenizer_config.json chat_template: size is 10,000,000 bytes"
    )
    nothing_written(build_root)


def test_a_config_chat_template_that_loops_is_refused_at_build_start(tmp_path: Path) -> None:
    """The config's own chat.template is rendered bounded before any weights are read, and named as the source."""
    model = write_hand_made_model(tmp_path / "model")
    loop = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    config = config_file(tmp_path, model, extra=f"    chat:\n      template: '{loop}'\n")
    build_root = tmp_path / "builds"
    assert_refused(
        build(config, build_root, **SHORT_BUDGET), "endpoint 'ep': chat.template: the chat template did not render"
    )
    nothing_written(build_root)


def test_a_symlink_loop_as_the_model_is_refused_by_name(tmp_path: Path) -> None:
    loop = tmp_path / "model"
    loop.symlink_to(loop)
    build_root = tmp_path / "builds"
    assert_refused(build(config_file(tmp_path, loop), build_root), f"value '{loop}'", "symlink loop", "model folder")
    nothing_written(build_root)


@pytest.mark.parametrize("below", [False, True], ids=["the-file", "a-folder-in-it"])
def test_a_build_root_that_is_a_file_is_refused_by_name(tmp_path: Path, below: bool) -> None:
    model = write_hand_made_model(tmp_path / "model")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    build_root = blocker / "sub" if below else blocker
    assert_refused(build(config_file(tmp_path, model), build_root), f"{blocker} is a file", "allowed: a folder")
    assert blocker.read_text() == "not a folder"


def test_bytes_from_the_network_go_through_the_same_checks() -> None:
    """The Hub metadata planner's entry points: parse_model_json / parse_model_config and parse_safetensors_header
    over bytes already fetched (a range read of a header), with the file's size when known."""
    from facts.model_files import UnreadableModel, parse_model_config, parse_safetensors_header

    with pytest.raises(UnreadableModel, match=r"repo/config.json: num_hidden_layers is 1000000000000"):
        parse_model_config(
            json.dumps({**HAND_MADE_CONFIG, "num_hidden_layers": 10**12}).encode(), name="repo/config.json"
        )
    with pytest.raises(UnreadableModel, match="nesting is deeper than 64"):
        parse_model_config(b"{" * 10 + b"[" * 100 + b"]" * 100 + b"}" * 10, name="c.json")
    header = json.dumps({"w": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}}).encode()
    assert parse_safetensors_header(header, name="s", file_size=8 + len(header) + 8) == {"w": ("F16", [4], 0, 8)}
    with pytest.raises(UnreadableModel, match=r"data_offsets is \[0, 8\]; allowed: offsets within the file's 4 bytes"):
        parse_safetensors_header(header, name="s", file_size=8 + len(header) + 4)
    for bad, word in (
        ({"w": {"dtype": "F16", "shape": [-1], "data_offsets": [0, 8]}}, "shape is [-1]"),
        ({"w": {"dtype": "Q4", "shape": [4], "data_offsets": [0, 8]}}, "dtype is 'Q4'"),
        ({"w": {"dtype": "F16", "shape": [4], "data_offsets": [8, 0]}}, "data_offsets is [8, 0]"),
        ({"w": {"dtype": "F16", "shape": [2**40, 2**40], "data_offsets": [0, 8]}}, "at most"),
    ):
        with pytest.raises(UnreadableModel) as err:
            parse_safetensors_header(json.dumps(bad).encode(), name="s", file_size=None)
        assert word in str(err.value)


def test_honest_json_of_any_depth_a_model_uses_passes_the_depth_scan() -> None:
    """The depth scan counts brackets outside strings only: brackets inside a chat template string do not count."""
    from facts.model_files import json_depth_exceeds

    assert not json_depth_exceeds(json.dumps({"a": [[[1]]], "t": "[" * 1000}).encode())
    assert json_depth_exceeds(json.dumps({"a": [[[1]]]}).encode(), limit=3)
    assert not json_depth_exceeds(json.dumps({"a": [[1]]}).encode(), limit=3)


def test_the_depth_scan_agrees_with_the_parsed_document_on_strings_with_escapes_and_brackets() -> None:
    """Random documents whose strings hold quotes, backslashes and brackets (escaped as json.dumps escapes them): the
    scan's verdict at each limit equals the depth of the document json.loads returns."""
    import random

    from facts.model_files import json_depth_exceeds

    def depth(value: object) -> int:
        if isinstance(value, dict):
            return 1 + max(map(depth, value.values()), default=0)
        if isinstance(value, list):
            return 1 + max(map(depth, value), default=0)
        return 0

    rnd = random.Random(7)

    def document(level: int) -> object:
        if level == 0 or rnd.random() < 0.3:
            return "".join(rnd.choice('ab"\\[]{}\n') for _ in range(rnd.randint(0, 12)))
        if rnd.random() < 0.5:
            return [document(level - 1) for _ in range(rnd.randint(0, 3))]
        return {document(0): document(level - 1) for _ in range(rnd.randint(0, 3))}  # type: ignore[misc]

    for _ in range(400):
        doc = document(rnd.randint(0, 8))
        data = json.dumps(doc).encode()
        for limit in range(0, 10):
            assert json_depth_exceeds(data, limit=limit) == (depth(doc) > limit), (data, limit)


def test_a_build_stopped_by_sigterm_leaves_no_half_written_folder(tmp_path: Path) -> None:
    """SIGTERM during the build (here while the recipe renders a template that loops only on a longer conversation:
    the build's first check passes it) ends like Ctrl-C: exit 130, the temporary folder removed, nothing kept."""
    import signal

    model = write_hand_made_model(tmp_path / "model")
    loops_later = "{% if messages | length > 1 %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
    with_template(loops_later + "{% endfor %}{% endif %}{{ messages[0].content }}")(model)
    build_root = tmp_path / "builds"
    process = subprocess.Popen(
        [sys.executable, "-m", "model_build", "build", "--config", str(config_file(tmp_path, model))]
        + ["--endpoint", "ep", "--build-root", str(build_root), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=subprocess_env(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1"),
    )
    deadline = time.monotonic() + 60
    while not (build_root.exists() and any(build_root.glob(".ep.tmp-*"))):  # the build is writing
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "interrupted" in stderr
    nothing_written(build_root)


def test_a_fifo_among_the_tokenizer_files_is_refused_before_transformers_opens_it(tmp_path: Path) -> None:
    """tokenizer.json is read by transformers alone: the build's folder check still refuses a FIFO there by name."""
    from facts.model_files import UnreadableModel, check_model_folder

    model = write_hand_made_model(tmp_path / "model")
    os.mkfifo(model / "tokenizer.json")
    with pytest.raises(UnreadableModel, match=r"tokenizer.json is a FIFO; allowed: a regular file"):
        check_model_folder(model)


def test_the_local_server_refuses_a_model_whose_template_loops_before_it_serves(tmp_path: Path) -> None:
    """When serving: the local engine stand-in checks the folder and renders its templates under the budget at
    start, so a model built before these checks (or edited since) is refused by file, not at its first request."""
    from local_emulator.moto_server import free_port

    model = write_hand_made_model(tmp_path / "model")
    with_template("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")(model)
    done = subprocess.run(
        [sys.executable, "-m", "local_runtime.stand_in", "--engine", "vllm-openai", "--listen", str(free_port())]
        + ["--", "--model", str(model)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=subprocess_env(PYTHONPATH=str(ROOT), **SHORT_BUDGET),
        timeout=60,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"error: the stand-in does not serve {model}: {model}/tokenizer_config.json chat_template" in done.stderr
    assert "did not render a sample conversation within 2 s" in done.stderr
