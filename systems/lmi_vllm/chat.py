"""lmi-vllm's chat options: the tool-call and reasoning parsers of the vLLM inside LMI 27, and the OPTION_*
variables that turn them on. A tool parser always turns auto tool choice on (vLLM refuses tool_choice otherwise).

The parser names are vLLM 0.23.0's registries (that LMI 27's own vLLM build has the same is unverified); how LMI 27
serves chat, and the sources: docs/design/engines.md.
"""

from __future__ import annotations

from systems.base import ChatCapability
from systems.djl_common.lmi import LmiEngineOptions
from systems.vllm_parsers import ReasoningParser_0_23, ToolCallParser_0_23

# vLLM 0.23.0's parser names (systems/vllm_parsers.py).
ToolCallParser = ToolCallParser_0_23
ReasoningParser = ReasoningParser_0_23


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


def parses_tool_calls(engine: LmiVllmChatOptions) -> bool:
    return engine.tool_call_parser is not None


CHAT = ChatCapability.native(
    'LMI hands a request with "messages" to vLLM\'s own chat completions (OpenAIServingChat; djl-serving '
    "0.36.0-lmi27-dlc lmi_vllm/vllm_async_service.py): the model's chat template, tool calls parsed with "
    "engine.tool_call_parser, reasoning with engine.reasoning_parser, JSON and forced tool calls by vLLM's "
    "structured outputs",
    constrained_decoding=True,
    tool_calls=parses_tool_calls,
)

__all__ = ["CHAT", "LmiVllmChatOptions", "ReasoningParser", "ToolCallParser", "parses_tool_calls"]
