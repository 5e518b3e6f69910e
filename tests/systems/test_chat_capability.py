"""Chat as a capability of every serving system (ServingSystem.chat) and the `chat:` block: which systems serve chat
and how, the refusals (a system without chat, a model without a chat template, an asynchronous endpoint, a caller
list naming nobody), lmi-vllm's parsers rendered as LMI reads them, architectures the container cannot load (at load
and at build), and the chat template written into an artifact."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from artifact import BuildError
from deployment import load_config
from endpoint_config import ConfigError
from systems import REGISTRY, all_systems
from systems.base import ChatCapability

ENDPOINT = """project: chat-test
endpoints:
  - name: bot
    system: {system}
    model: {model}
    instance_type: {instance}
{extra}"""


def load(
    tmp_path: Path,
    *,
    system: str = "hf-fastload",
    model: str = "EleutherAI/gpt-j-6B",
    instance: str = "ml.g5.2xlarge",
    extra: str = "",
):
    path = tmp_path / "endpoints.yaml"
    path.write_text(ENDPOINT.format(system=system, model=model, instance=instance, extra=extra))
    return load_config(path)


def refusal(tmp_path: Path, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, **kwargs)
    return str(info.value)


def model_dir(tmp_path: Path, architecture: str, chat_template: str | None = None) -> Path:
    """A local model directory as far as load reads it: config.json (and tokenizer_config.json)."""
    path = tmp_path / architecture
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": [architecture], "model_type": "x"}))
    (path / "tokenizer_config.json").write_text(json.dumps({"chat_template": chat_template} if chat_template else {}))
    return path


def test_every_system_states_whether_and_how_it_serves_chat() -> None:
    systems = all_systems()
    assert set(systems) == set(REGISTRY)
    for name, system in systems.items():
        chat = system.chat
        assert isinstance(chat, ChatCapability) and chat.note, name
        if chat.supported:
            assert chat.route in ("native", "handler"), name
        else:
            assert chat.route is None and chat.tool_calls is None and not chat.constrained_decoding, name
    served = {name: s.chat.route for name, s in systems.items() if s.chat.supported}
    # the handler route: hf-fastload's own handler parses the chat contract; every engine server answers natively
    assert served.pop("hf-fastload") == "handler" and set(served.values()) == {"native"}


def test_chat_on_a_system_without_it_names_the_systems_that_serve_it(tmp_path: Path) -> None:
    text = refusal(tmp_path, system="deepspeed-byoc", extra="    chat: {}\n")
    assert (
        "endpoint 'bot': chat: system 'deepspeed-byoc' does not serve chat: its handler implements no chat_prompt"
        in text
    )
    assert "systems that serve chat: hf-fastload, lmi-vllm, lmi-trtllm" in text


def test_a_local_model_without_a_chat_template_is_refused_unless_the_config_gives_one(tmp_path: Path) -> None:
    model = model_dir(tmp_path, "LlamaForCausalLM")
    text = refusal(tmp_path, model=str(model), extra="    chat: {}\n")
    assert f"chat: model {str(model)!r} has no chat template" in text and "give chat.template" in text
    given = load(tmp_path, model=str(model), extra='    chat: {template: "{{ messages[0].content }}"}\n')
    assert given.endpoints[0].chat.template == "{{ messages[0].content }}"
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ 'x' }}"}))
    assert load(tmp_path, model=str(model), extra="    chat: {}\n").endpoints[0].chat is not None


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ("    chat: {openai_route: {}}\n", "names nobody: give callers"),
        (
            "    chat: {openai_route: {callers: [arn:aws:iam::123456789012:group/devs]}}\n",
            "is not an IAM role or user ARN",
        ),
        (
            "    chat: {openai_route: {callers: [arn:aws:iam::123456789012:role/a, arn:aws:iam::123456789012:role/a]}}\n",
            "'arn:aws:iam::123456789012:role/a' is listed twice",
        ),
        ('    chat: {template: ""}\n', "chat.template"),
        ("    chat: {tempalte: x}\n", "chat.tempalte"),
        (
            "    invocation: {mode: async}\n    chat: {}\n",
            "chat: an asynchronous endpoint (invocation.mode async) is not served",
        ),
    ],
    ids=["nobody", "group-arn", "twice", "empty-template", "misspelt-key", "async"],
)
def test_the_chat_block_refuses_what_cannot_work(tmp_path: Path, extra: str, fragment: str) -> None:
    assert fragment in refusal(tmp_path, extra=extra)


def test_lmi_vllm_parsers_render_as_lmi_reads_them(tmp_path: Path) -> None:
    """OPTION_X -> option.x (DJL); LMI 27's VllmRbProperties reads enable_auto_tool_choice, tool_call_parser,
    enable_reasoning, reasoning_parser; the endpoint's front doors then read tool calls (CHAT_TOOL_CALLS)."""
    environment_plan = load(
        tmp_path,
        system="lmi-vllm",
        extra="    chat: {}\n    engine: {tool_call_parser: hermes, reasoning_parser: qwen3}\n",
    )
    plan = environment_plan.plans[0]
    env = plan.container_environment("bucket")
    assert {k: env[k] for k in env if "TOOL" in k or "REASONING" in k} == {
        "OPTION_ENABLE_AUTO_TOOL_CHOICE": "true",
        "OPTION_TOOL_CALL_PARSER": "hermes",
        "OPTION_ENABLE_REASONING": "true",
        "OPTION_REASONING_PARSER": "qwen3",
    }
    assert plan.chat_features.environment() == {
        "CHAT_ROUTE": "native",
        "CHAT_TOOL_CALLS": "true",
        "CHAT_CONSTRAINED_DECODING": "true",
    }
    assert (plan.smoke.chat_route, plan.smoke.chat_tools) == ("invoke", True)
    plain = load(
        tmp_path,
        system="lmi-vllm",
        extra="    chat: {openai_route: {create_role: true, assumed_by: [arn:aws:iam::111122223333:role/app]}}\n",
    ).plans[0]
    assert not any("TOOL" in k for k in plain.container_environment("bucket"))
    assert plain.chat_features.tool_calls is False and (plain.smoke.chat_route, plain.smoke.chat_tools) == (
        "openai",
        False,
    )
    assert load(tmp_path).plans[0].chat_features.environment() == {}  # no chat block: the front doors refuse chat


@pytest.mark.parametrize(
    ("system", "engine", "fragment"),
    [
        (
            "lmi-vllm",
            "{tool_call_parser: qwen3}",
            "engine.tool_call_parser: value 'qwen3' is not supported by system "
            "'lmi-vllm'; allowed: apertus, cohere_command3",
        ),
        (
            "lmi-vllm",
            "{reasoning_parser: hermes}",
            "engine.reasoning_parser: value 'hermes' is not supported by system 'lmi-vllm'; allowed: cohere_command3",
        ),
        (
            "lmi-trtllm",
            "{tool_call_parser: hermes}",
            "is not supported by system 'lmi-trtllm'; remove the key (systems that take it: lmi-vllm, vllm, sglang)",
        ),
        ("hf-fastload", "{reasoning_parser: qwen3}", "systems that take it: lmi-vllm"),
    ],
)
def test_parsers_are_refused_where_the_engine_lacks_them(
    tmp_path: Path, system: str, engine: str, fragment: str
) -> None:
    assert fragment in refusal(tmp_path, system=system, extra=f"    engine: {engine}\n")


def test_an_architecture_the_containers_transformers_does_not_know_is_refused_at_load(tmp_path: Path) -> None:
    """The issue's measured case, a Qwen3 model for a container with transformers 4.49 (hf-fastload's image before
    4.51.3), and its successor: gpt-oss for hf-fastload's transformers 4.51.3 (gpt-oss came in 4.55)."""
    gpt_oss = model_dir(tmp_path, "GptOssForCausalLM")
    text = refusal(tmp_path, model=str(gpt_oss), instance="ml.m5.xlarge")  # on a CPU: read from config.json alone
    assert (
        "has architecture 'GptOssForCausalLM': transformers 4.51.3, in the image of system 'hf-fastload', does "
        "not know it; it needs transformers >= 4.55.0; systems that serve it: lmi-vllm, vllm, sglang"
    ) in text
    text = refusal(tmp_path, model=str(gpt_oss))  # on a GPU: with the checkpoint's other facts (systems/checks.py)
    assert "transformers maps it from release 4.55.0 on; systems that serve it: lmi-vllm, vllm, sglang" in text
    assert load(tmp_path, model=str(gpt_oss), system="lmi-vllm").plans  # LMI 27's vLLM 0.23 serves it
    qwen3 = model_dir(tmp_path, "Qwen3ForCausalLM")
    assert "it needs transformers >= 4.51.0" in refusal(tmp_path, model=str(qwen3), system="deepspeed-byoc")
    assert load(tmp_path, model=str(qwen3)).plans  # hf-fastload's transformers 4.51.3 knows it
    gemma4 = model_dir(tmp_path, "Gemma4ForCausalLM")
    assert "it needs transformers >= 5.5.0" in refusal(tmp_path, model=str(gemma4), system="deepspeed-byoc")
    unknown = model_dir(tmp_path, "NoSuchForCausalLM")
    text = refusal(tmp_path, model=str(unknown), system="lmi-vllm")
    assert "vllm 0.23.0, the engine in the image of system 'lmi-vllm', does not serve it" in text
    assert "no registered system is known to serve it" in text
    assert load(tmp_path, model=str(model_dir(tmp_path, "LlamaForCausalLM"))).plans


def test_the_build_refuses_the_architecture_too() -> None:
    """A Hub model is read at build: the same check, from the files read (systems/recipe_common.check_causal_lm)."""
    from endpoint_config import EndpointSpec
    from systems.recipe_common import check_causal_lm

    ep = EndpointSpec(name="bot", system="hf-fastload", model="openai/gpt-oss-20b", instance_type="ml.g5.2xlarge")
    config = {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"]}
    with pytest.raises(BuildError, match=r"'GptOssForCausalLM': transformers 4\.51\.3.*needs transformers >= 4\.55\.0"):
        check_causal_lm(ep, config, refuse_encoder_decoder=False)
    check_causal_lm(ep.model_copy(update={"system": "lmi-vllm"}), config)


def test_the_chat_template_is_written_into_the_artifact_and_checked(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    """chat.template goes into tokenizer_config.json and must render a conversation with tools; a chat endpoint
    whose artifact ends up with no template is refused at build (Hub models are only read then)."""
    from endpoint_config import EndpointSpec
    from endpoint_config.chat import ChatSpec
    from systems.chat_template import write_chat_template

    out = tmp_path / "artifact"
    out.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json"):
        if (tiny_models["gpt2"] / name).is_file():
            shutil.copyfile(tiny_models["gpt2"] / name, out / name)
    ep = EndpointSpec(name="bot", system="hf-fastload", model="gpt2", instance_type="ml.m5.xlarge", chat=ChatSpec())
    with pytest.raises(BuildError, match="chat: model 'gpt2' has no chat template"):
        write_chat_template(ep, out)
    template = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    given = ep.model_copy(update={"chat": ChatSpec(template=template)})
    assert write_chat_template(given, out) == "config"
    assert json.loads((out / "tokenizer_config.json").read_text())["chat_template"] == template
    assert write_chat_template(ep, out) == "tokenizer"  # now the artifact's own
    broken = ep.model_copy(update={"chat": ChatSpec(template="{{ messages[0].content.nope() }}")})
    with pytest.raises(BuildError, match="chat.template: the chat template cannot render"):
        write_chat_template(broken, out)
