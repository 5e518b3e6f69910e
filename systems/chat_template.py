"""The chat template an artifact carries, for an endpoint with a `chat:` block: chat.template written into the
artifact's tokenizer_config.json (where the containers' transformers read it: 4.x and 5.x alike), a sample
conversation with tools rendered with it (systems/hf_fastload/recipe.py check_chat_template), and a refusal when
the artifact ends up with none. Used by the hf-fastload recipe and the LMI recipes (systems/djl_common/build.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import chat_contract
from artifact import BuildError
from endpoint_config import EndpointSpec
from facts.model_files import (
    UnreadableModel,
    chat_templates_of,
    check_chat_template_size,
    check_model_folder,
    read_chat_template_file,
    read_tokenizer_config,
)

from .chat import missing_template_error

# The budget of one sample render (systems/chat_template_sandbox.py). Measured on the 2-core dev machine under load:
# the tiny Qwen3's template (Qwen3's own) in 0.7 s, nearly all of it the child's start and jinja2's import; under
# 512 MiB of address space a 600 MB string fails with MemoryError in 0.6 s. A template past these is refused at build:
# every chat request would pay for it (a loop of 10^10 steps, nested ranges, 9 ** 9 ** 9, a 2 GB string).
RENDER_SECONDS = 5.0
# A lower budget from the environment, so that a test sees a looping template refused in 2 s instead of 5; a value
# above RENDER_SECONDS is refused: the budget guards every chat request, and no setting may loosen it.
RENDER_SECONDS_ENV = "CHAT_TEMPLATE_RENDER_SECONDS"
RENDER_OUTPUT_CHARS = 1_000_000
RENDER_MEMORY_BYTES = 512 * 2**20
SANDBOX = Path(__file__).with_name("chat_template_sandbox.py")


def render_seconds() -> float:
    """The render budget: RENDER_SECONDS, or a lower one in CHAT_TEMPLATE_RENDER_SECONDS."""
    text = os.environ.get(RENDER_SECONDS_ENV)
    if text is None:
        return RENDER_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= RENDER_SECONDS:  # also false for nan
        raise BuildError(
            f"environment variable {RENDER_SECONDS_ENV}: value {text!r}; allowed: a number of seconds above 0 and "
            f"at most {RENDER_SECONDS:g} (unset, the budget is {RENDER_SECONDS:g} s)"
        )
    return seconds


def render_bounded(template: str, *, source: str, messages: list[dict[str, Any]], **variables: Any) -> str:
    """`template` rendered with `messages` (and tools, add_generation_prompt, special tokens...) in a child process
    under render_seconds(), RENDER_OUTPUT_CHARS and RENDER_MEMORY_BYTES, in transformers' sandboxed environment.
    BuildError naming `source` (the model's tokenizer_config.json / chat_template.jinja, or chat.template) when it
    loops, recurses, fails, includes a file or passes a budget."""
    try:
        check_chat_template_size(template, name=source)
    except UnreadableModel as err:
        raise BuildError(str(err)) from None
    budget = render_seconds()
    sample = "a conversation with tools and a tool call" if variables.get("tools") else "a sample conversation"
    request = {
        "template": template,
        "variables": {"messages": messages, "add_generation_prompt": True, **variables},
        "output_limit": RENDER_OUTPUT_CHARS,
        "memory_limit": RENDER_MEMORY_BYTES,
    }
    try:
        done = subprocess.run(
            [sys.executable, "-I", str(SANDBOX)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=budget,
        )
    except subprocess.TimeoutExpired:
        raise BuildError(
            f"{source}: the chat template did not render {sample} within {budget:g} s (a loop "
            "or a computation without end); allowed: a template that renders in well under a second, since every "
            "chat request renders it"
        ) from None
    try:
        result = json.loads(done.stdout)
    except ValueError:
        result = {"ok": False, "error": f"the render stopped (exit status {done.returncode}): {done.stderr[-300:]}"}
    if not result.get("ok"):
        raise BuildError(
            f"{source}: the chat template cannot render {sample}: {result.get('error')}; allowed: a "
            f"Jinja template that renders OpenAI-style messages within {budget:g} s and "
            f"{RENDER_OUTPUT_CHARS:,} characters, without include, import or extends"
        )
    return str(result["text"])


def special_tokens(tokenizer_config: dict[str, Any]) -> dict[str, str]:
    """The special tokens transformers hands a chat template (bos_token, eos_token, ...), from tokenizer_config.json
    (a string, or an AddedToken object with its `content`)."""
    found = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"):
        value = tokenizer_config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            found[key] = value
    return found


def model_chat_templates(model_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """({source: template}, special tokens) of a model folder: tokenizer_config.json's chat_template(s) and a
    chat_template.jinja beside it, each read bounded (facts.model_files). UnreadableModel naming the file."""
    templates: dict[str, str] = {}
    tokens: dict[str, str] = {}
    config_path = model_dir / "tokenizer_config.json"
    if config_path.exists() or config_path.is_symlink():
        config = read_tokenizer_config(config_path)
        tokens = special_tokens(config)
        for key, text in chat_templates_of(config, name=str(config_path)).items():
            templates[f"{config_path} chat_template" + ("" if key == "default" else f" {key!r}")] = text
    jinja = model_dir / "chat_template.jinja"
    if jinja.exists() or jinja.is_symlink():
        templates[str(jinja)] = read_chat_template_file(jinja)
    return templates, tokens


def check_model_chat_templates(model_dir: Path, messages: list[dict[str, Any]], **variables: Any) -> int:
    """Every chat template a model folder carries rendered bounded (render_bounded); BuildError naming the file.
    Returns how many were rendered."""
    try:
        templates, tokens = model_chat_templates(Path(model_dir))
    except UnreadableModel as err:
        raise BuildError(str(err)) from None
    for source, template in templates.items():
        render_bounded(template, source=source, messages=messages, **tokens, **variables)
    return len(templates)


def check_served_model(model_dir: Path) -> None:
    """What a local server checks before it serves a model folder: every file through its bounded reader
    (facts.model_files.check_model_folder) and every chat template rendered under the budget with one user message;
    BuildError naming the file."""
    try:
        check_model_folder(Path(model_dir))
    except UnreadableModel as err:
        raise BuildError(str(err)) from None
    check_model_chat_templates(Path(model_dir), [{"role": "user", "content": "The capital of France?"}])


def write_chat_template(endpoint: EndpointSpec, out_dir: Path, template: str | None = None) -> str | None:
    """Give the artifact in `out_dir` its chat template (`template`, else chat.template, else the tokenizer's own)
    and check it renders. Returns where it came from ("config", "tokenizer") or None without one; BuildError when
    the endpoint asks for chat and there is none, or the template cannot render."""
    from systems.hf_fastload.recipe import SAMPLE_CHAT, check_chat_template, set_chat_template

    sample = chat_contract.parse_chat_request(SAMPLE_CHAT)
    messages, tools = sample.template_messages(), sample.template_tools()
    given_by = "chat_template given"
    if template is None and endpoint.chat:
        template, given_by = endpoint.chat.template, f"endpoint {endpoint.name!r}: chat.template"
    if template is not None:
        tokens = model_chat_templates(Path(out_dir))[1] if (Path(out_dir) / "tokenizer_config.json").exists() else {}
        render_bounded(template, source=given_by, messages=messages, tools=tools, **tokens)
        set_chat_template(Path(out_dir), template)
    else:
        try:
            check_model_chat_templates(Path(out_dir), messages, tools=tools)
        except BuildError as err:
            raise BuildError(f"endpoint {endpoint.name!r}: model {endpoint.model!r}: {err}") from None
    source = check_chat_template(Path(out_dir), given=template is not None)
    if source is None and endpoint.chat:
        raise BuildError(missing_template_error(endpoint, "its tokenizer files carry none"))
    return source


__all__ = [
    "check_served_model",
    "check_model_chat_templates",
    "model_chat_templates",
    "render_bounded",
    "write_chat_template",
]
