"""Chat is on by default where the system serves chat and the model has a chat template; `chat:` then only changes
it, `chat: false` turns it off, and a model without a template gets chat only when asked, refused with the reason
(deployment/plan.py chat_by_default, systems/chat.py chat_problems)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from engine_configs import build, endpoint_yaml, load, refusals

from deployment.plan import chat_by_default
from systems import all_systems

CHAT_SYSTEMS = sorted(name for name, system in all_systems().items() if system.chat.supported)
GPU = "ml.g6e.xlarge"


def _without_template(tmp_path: Path, source: Path) -> Path:
    model = tmp_path / "no-template"
    shutil.copytree(source, model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    (model / "chat_template.jinja").unlink(missing_ok=True)
    return model


@pytest.mark.parametrize("system", ["vllm", "sglang", "hf-fastload"])
def test_on_where_the_model_has_a_template(system, tmp_path, tiny_chat_models):
    plan = load(tmp_path, endpoint_yaml("t", system, str(tiny_chat_models["qwen3"]), GPU)).plans[0]
    assert plan.spec.chat is not None and plan.spec.chat.template is None
    assert plan.chat_features.route == plan.system.chat.route and plan.smoke.chat_route == "invoke"
    assert plan.chat_features.environment()["CHAT_ROUTE"] == plan.system.chat.route


def test_the_block_only_changes_it_and_false_turns_it_off(tmp_path, tiny_chat_models):
    model = str(tiny_chat_models["qwen3"])
    given = "    chat: {template: \"{% for m in messages %}{{ m['content'] }}{% endfor %}\"}\n"
    changed = load(tmp_path, endpoint_yaml("t", "vllm", model, GPU, extra=given)).plans[0]
    assert changed.spec.chat.template.startswith("{% for m in messages %}")
    off = load(tmp_path, endpoint_yaml("t", "vllm", model, GPU, extra="    chat: false\n")).plans[0]
    assert off.spec.chat is None and off.chat_features.route is None and off.smoke.chat_route is None


def test_off_without_a_template_and_refused_when_asked(tmp_path, tiny_chat_models):
    model = _without_template(tmp_path, tiny_chat_models["qwen3"])
    plan = load(tmp_path, endpoint_yaml("t", "vllm", str(model), GPU)).plans[0]
    assert plan.spec.chat is None and plan.chat_features.route is None
    message = refusals(tmp_path, endpoint_yaml("t", "vllm", str(model), GPU, extra="    chat: {}\n"))
    assert "has no chat template" in message and "so chat requests cannot be rendered" in message


def test_off_where_the_system_serves_no_chat_or_the_endpoint_is_asynchronous(tmp_path, tiny_chat_models):
    model = str(tiny_chat_models["llama"])
    byoc = load(tmp_path, endpoint_yaml("t", "deepspeed-byoc", model, "ml.g5.xlarge", dtype="fp16")).plans[0]
    assert byoc.spec.chat is None
    asynchronous = "    invocation: {mode: async}\n"
    plan = load(tmp_path, endpoint_yaml("t", "hf-fastload", model, GPU, extra=asynchronous)).plans[0]
    assert plan.spec.chat is None


def test_a_hub_model_gets_chat_once_its_built_artifact_shows_a_template(tmp_path, tiny_chat_models):
    """A Hub model's files are read at build: before, no chat; the artifact with a template turns it on."""
    plan, _, out = build(tmp_path, endpoint_yaml("t", "vllm", str(tiny_chat_models["qwen3"]), GPU), "built")
    hub = plan.spec.model_copy(update={"model": "Qwen/Qwen3-32B", "chat": None})
    assert chat_by_default(hub, plan.system, None).chat is None
    assert chat_by_default(hub, plan.system, out).chat is not None
    bare = _without_template(tmp_path / "bare", out)
    assert chat_by_default(hub, plan.system, bare).chat is None
