"""Chat per serving system: the ChatCapability values the systems state (lmi-vllm's is systems/lmi_vllm/chat.py)
and the rules an endpoint's `chat:` block meets (`chat_problems`, run by systems.checks with the others).

Which front door reaches which container path (docs/chat.md): our invoke and stream functions send a chat request
to InvokeEndpoint / InvokeEndpointWithResponseStream, which SageMaker delivers to the container's POST /invocations
(SageMaker DG, "Use your own inference code with hosting services": "SageMaker AI ... sends POST requests to
/invocations"); every chat system answers chat there. SageMaker's OpenAI route: which container path it forwards to
is not stated in the SageMaker Developer Guide ("Invoke endpoints with OpenAI-compatible APIs") or the launch blog
(2026-05-21), which say only that the answer comes "as is from the container"; unverified, so `chat_problems` warns
nothing but `openai_route_note` says which door is proven for the system.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from endpoint_config import EndpointSpec
from facts.model_files import UnreadableModel, read_tokenizer_config

from .base import ChatCapability, ServingSystem

HF_HANDLER_CHAT = ChatCapability.handler(
    "code/inference.py renders the tokenizer's chat template (or chat.template) with the request's tools and "
    "answers a chat.completion on /invocations, reading hermes-style <tool_call> JSON as tool calls; the Hugging "
    "Face inference toolkit answers whole replies only (no streaming)"
)
# LMI 0.33 (branch 0.33.0-dlc, engines/python/setup/djl_python/lmi_trtllm/trtllm_async_service.py openai_chat):
# "messages" are rendered with the tokenizer's chat template, but each message keeps only its role and content
# (parse_chat_message_content), so an assistant's tool_calls and a tool result's tool_call_id are lost, and nothing
# there parses tool calls out of the text: plain chat only.
LMI_TRTLLM_CHAT: ChatCapability[Any] = ChatCapability.native(
    "LMI 0.33 answers \"messages\" with TensorRT-LLM's chat post-processing after the tokenizer's chat template "
    "(lmi_trtllm/trtllm_async_service.py openai_chat); it keeps each message's role and content only, so tool "
    "calls are not served",
    constrained_decoding=False,
    tool_calls=None,
)
LEGACY_DJL_NO_CHAT: ChatCapability[Any] = ChatCapability.no(
    "a legacy system pinned to a retired DJL image; chat is not built or tested for it (lmi-vllm serves chat)"
)
BYOC_NO_CHAT: ChatCapability[Any] = ChatCapability.no(
    "its handler implements no chat_prompt, so systems/byoc_server answers chat requests 400 chat_not_supported"
)


def has_chat_template(model_dir: Path) -> bool:
    """Whether a local model directory carries a chat template (tokenizer_config.json "chat_template", or
    chat_template.jinja / chat_template.json, which transformers reads beside it)."""
    if (model_dir / "chat_template.jinja").is_file() or (model_dir / "chat_template.json").is_file():
        return True
    config = model_dir / "tokenizer_config.json"
    try:  # read bounded (facts/model_files.py)
        document = read_tokenizer_config(config) if os.path.lexists(config) else {}
    except UnreadableModel:
        return True  # it may carry one: chat stays on, and chat_problems reports why the file cannot be read
    return bool(document.get("chat_template"))


def chat_problems(ep: EndpointSpec, system: ServingSystem, systems: dict[str, ServingSystem]) -> list[str]:
    """An endpoint's `chat:` block against its system: the system must serve chat, and a local model without a
    chat template needs chat.template (a Hub model is checked at build, when its files are read)."""
    if not ep.chat:  # unset (on by default only where it can be: deployment/plan.py chat_by_default) or false
        return []
    if not system.chat.supported:
        serving = ", ".join(name for name, s in systems.items() if s.chat.supported) or "none"
        return [
            f"endpoint {ep.name!r}: chat: system {ep.system!r} does not serve chat: {system.chat.note}; "
            f"systems that serve chat: {serving}"
        ]
    model_dir = Path(ep.model)
    if ep.chat.template is None and model_dir.is_dir() and os.path.lexists(model_dir / "tokenizer_config.json"):
        read_tokenizer_config(model_dir / "tokenizer_config.json")  # UnreadableModel: a problem of `model:`
    if ep.chat.template is None and model_dir.is_dir() and not has_chat_template(model_dir):
        return [
            f"endpoint {ep.name!r}: chat: model {ep.model!r} has no chat template (no chat_template in "
            "tokenizer_config.json, no chat_template.jinja), so chat requests cannot be rendered; give "
            "chat.template (a Jinja chat template), or remove chat"
        ]
    return []


def missing_template_error(ep: EndpointSpec, where: str) -> str:
    """The build's refusal when the artifact it wrote has no chat template and the endpoint asks for chat."""
    return (
        f"endpoint {ep.name!r}: chat: model {ep.model!r} has no chat template ({where}), so chat requests "
        "cannot be rendered; give chat.template (a Jinja chat template) in the config, or remove chat"
    )


__all__ = [
    "BYOC_NO_CHAT",
    "HF_HANDLER_CHAT",
    "LEGACY_DJL_NO_CHAT",
    "LMI_TRTLLM_CHAT",
    "chat_problems",
    "has_chat_template",
    "missing_template_error",
]
