"""lmi-vllm's chat options: the tool-call and reasoning parsers of the vLLM inside LMI 27, and the OPTION_*
variables that turn them on.

How LMI 27 serves chat (deepjavalibrary/djl-serving branch 0.36.0-lmi27-dlc,
engines/python/setup/djl_python/lmi_vllm/vllm_async_service.py): a body with "messages" becomes vLLM's
ChatCompletionRequest and is answered by vLLM's own OpenAIServingChat, built with chat_template=option.chat_template
(else the tokenizer's), enable_auto_tools=option.enable_auto_tool_choice, tool_parser=option.tool_call_parser and
reasoning_parser=option.reasoning_parser (properties_manager/vllm_rb_properties.py, VllmRbProperties); a whole reply
is vLLM's chat.completion JSON, a streamed one vLLM's chat.completion.chunk objects, one JSON object per line
(lmi_vllm/request_response_utils.py vllm_stream_output_formatter strips vLLM's "data: " framing).

The parser names are the keys of vLLM 0.23.0's registries: vllm/tool_parsers/__init__.py _TOOL_PARSERS_TO_REGISTER
and vllm/reasoning/__init__.py _REASONING_PARSERS_TO_REGISTER, read from the wheel
vllm-0.23.0-2-cp38-abi3-manylinux_2_28_x86_64.whl (sha256 872aeb7c...31c03c, the wheel systems/architectures.py's
vllm==0.23.0 table was read from). LMI 27 installs its own build 0.23.1.dev4+gcd87ce883
(serving/docker/lmi-container-requirements.txt at that branch), which could not be read here: unverified that its
registries equal 0.23.0's. LMI checks the tool parser at start when auto tool choice is on, and the reasoning parser
when option.enable_reasoning is true (VllmRbProperties.validate_tool_call_parser / validate_reasoning_parser), so a
name its vLLM lacks fails the container's start, not a request.

What vLLM 0.23.0 needs for tools (vllm/entrypoints/serve/render/serving.py render_chat): without a tool parser any
tool_choice but "none" is refused ("required" or a named function "requires --tool-call-parser to be set"), and
"auto" needs --enable-auto-tool-choice too. So a tool parser here always turns auto tool choice on.
"""

from __future__ import annotations

from typing import Literal

from endpoint_config import EndpointSpec
from systems.base import ChatCapability
from systems.djl_common.lmi import LmiEngineOptions

ToolCallParser = Literal[
    "apertus", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31", "deepseek_v32", "deepseek_v4",
    "ernie45", "functiongemma", "gemma4", "gigachat3", "glm45", "glm47", "granite", "granite-20b-fc", "granite4",
    "hermes", "hunyuan_a13b", "hy_v3", "internlm", "jamba", "kimi_k2", "lfm2", "llama3_json", "llama4_json",
    "llama4_pythonic", "longcat", "mimo", "minicpm5", "minimax", "minimax_m2", "mistral", "olmo3", "openai",
    "phi4_mini_json", "poolside_v1", "pythonic", "qwen3_coder", "qwen3_xml", "seed_oss", "step3", "step3p5", "xlam",
]  # fmt: skip
ReasoningParser = Literal[
    "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4", "ernie45", "gemma4", "glm45",
    "granite", "holo2", "hunyuan_a13b", "hy_v3", "kimi_k2", "mimo", "minimax_m2", "minimax_m2_append_think",
    "mistral", "nemotron_v3", "olmo3", "openai_gptoss", "poolside_v1", "qwen3", "seed_oss", "step3", "step3p5",
]  # fmt: skip


class LmiVllmChatOptions(LmiEngineOptions):
    """The engine options both of lmi-vllm's chat parsers add: tool_call_parser (OPTION_TOOL_CALL_PARSER, with
    OPTION_ENABLE_AUTO_TOOL_CHOICE=true) and reasoning_parser (OPTION_REASONING_PARSER, with
    OPTION_ENABLE_REASONING=true so LMI checks the name at start)."""

    tool_call_parser: ToolCallParser | None = None
    reasoning_parser: ReasoningParser | None = None

    def chat_options(self) -> dict[str, str]:
        options: dict[str, str] = {}
        if self.tool_call_parser is not None:
            options.update(enable_auto_tool_choice="true", tool_call_parser=self.tool_call_parser)
        if self.reasoning_parser is not None:
            options.update(enable_reasoning="true", reasoning_parser=self.reasoning_parser)
        return options


def parses_tool_calls(ep: EndpointSpec) -> bool:
    return LmiVllmChatOptions.model_validate(ep.engine).tool_call_parser is not None


CHAT = ChatCapability.native(
    "LMI hands a request with \"messages\" to vLLM's own chat completions (OpenAIServingChat; djl-serving "
    "0.36.0-lmi27-dlc lmi_vllm/vllm_async_service.py): the model's chat template, tool calls parsed with "
    "engine.tool_call_parser, reasoning with engine.reasoning_parser, JSON and forced tool calls by vLLM's "
    "structured outputs",
    constrained_decoding=True,
    tool_calls=parses_tool_calls,
)

__all__ = ["CHAT", "LmiVllmChatOptions", "ReasoningParser", "ToolCallParser", "parses_tool_calls"]
