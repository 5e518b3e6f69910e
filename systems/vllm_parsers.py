"""vLLM's chat parser names (--tool-call-parser, --reasoning-parser) in the two releases the pinned images ship:
0.30.0, the AWS vLLM DLC's (systems/vllm), and 0.23.0, the release nearest LMI 27's own vLLM build (systems/lmi_vllm).
Each is the keys of that release's parser registries (the files are named where the systems use them); most names
are in both, so they are written once and each release's Literal adds its own.
"""

from __future__ import annotations

from typing import Literal

# The tool-call parsers of both releases.
_TOOL_CALL_PARSERS_0_23_AND_0_30 = Literal[
    "apertus",
    "cohere_command3",
    "cohere_command4",
    "deepseek_v3",
    "deepseek_v31",
    "deepseek_v32",
    "deepseek_v4",
    "ernie45",
    "functiongemma",
    "gemma4",
    "gigachat3",
    "glm45",
    "glm47",
    "granite",
    "granite-20b-fc",
    "granite4",
    "hermes",
    "hunyuan_a13b",
    "hy_v3",
    "internlm",
    "jamba",
    "kimi_k2",
    "lfm2",
    "llama3_json",
    "llama4_json",
    "llama4_pythonic",
    "longcat",
    "mimo",
    "minicpm5",
    "minimax_m2",
    "mistral",
    "olmo3",
    "openai",
    "phi4_mini_json",
    "poolside_v1",
    "pythonic",
    "qwen3_coder",
    "qwen3_xml",
    "seed_oss",
    "step3",
    "step3p5",
    "xlam",
]
# The names vLLM 0.30.0 added both a tool-call and a reasoning parser under (none of them is in 0.23.0).
_PARSER_PAIRS_ADDED_IN_0_30 = Literal[
    "deepseek_v41",
    "hy_v4",
    "inkling",
    "k2_horizon",
    "kimi_k3",
    "ling3",
    "minimax_m3",
    "muse_glimmer",
]
# Tool-call parsers of vLLM 0.23.0 (one dropped before 0.30.0) and of 0.30.0.
ToolCallParser_0_23 = Literal[
    _TOOL_CALL_PARSERS_0_23_AND_0_30,
    "minimax",
]
ToolCallParser_0_30 = Literal[_TOOL_CALL_PARSERS_0_23_AND_0_30, _PARSER_PAIRS_ADDED_IN_0_30, "dots"]
# Reasoning parsers of vLLM 0.23.0; 0.30.0 has all of them and more.
ReasoningParser_0_23 = Literal[
    "cohere_command3",
    "cohere_command4",
    "deepseek_r1",
    "deepseek_v3",
    "deepseek_v4",
    "ernie45",
    "gemma4",
    "glm45",
    "granite",
    "holo2",
    "hunyuan_a13b",
    "hy_v3",
    "kimi_k2",
    "mimo",
    "minimax_m2",
    "minimax_m2_append_think",
    "mistral",
    "nemotron_v3",
    "olmo3",
    "openai_gptoss",
    "poolside_v1",
    "qwen3",
    "seed_oss",
    "step3",
    "step3p5",
]
ReasoningParser_0_30 = Literal[ReasoningParser_0_23, _PARSER_PAIRS_ADDED_IN_0_30, "glm47"]
# 0.31.0 adds one reasoning parser; its tool-call parsers are 0.30.0's (tools/generate_architectures.py --check).
ReasoningParser_0_31 = Literal[ReasoningParser_0_30, "granite_thinking_parser"]

__all__ = [
    "ReasoningParser_0_23",
    "ReasoningParser_0_30",
    "ReasoningParser_0_31",
    "ToolCallParser_0_23",
    "ToolCallParser_0_30",
]
