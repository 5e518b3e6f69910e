"""Build the hf-fastload artifact of one endpoint, and prove it serves what the source model computes.

The artifact: config readable by transformers 4.49, sharded safetensors (or opt-in torch-save model.pt), tokenizer
files, code/inference.py with the contracts, manifest.json. Verification runs the handler's own loader on the
written artifact and compares logits and greedy tokens with the source model. Layout, chat: docs/design/engines.md.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import chat_contract
import request_contract
from artifact import BuildError
from artifact.source import resolve_model_source
from endpoint_config import EndpointSpec
from systems import recipe_common as common
from systems.chat_template import write_chat_template
from systems.container_tokenizer import image_python_stack, plan_tokenizer
from systems.hf_fastload import HfFastloadEngineOptions
from systems.images import HF_CONTAINER_TRANSFORMERS, HF_PYTORCH_INFERENCE

HANDLER_SOURCE = Path(__file__).parent / "handler" / "inference.py"
TOLERANCE = common.TOLERANCE  # the shared table (compare_with_source reads it); tests tighten it through this module
TORCH_SAVE_FILE = "model.pt"


# A conversation that exercises what chat templates branch on: a system message, tools, an assistant tool call,
# its result. The build renders it with the artifact's template (check_chat_template).
SAMPLE_CHAT = {
    "messages": [
        {"role": "system", "content": "You are brief."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": "sunny, 21 C", "tool_call_id": "call_1"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ],
}


def build(
    endpoint: EndpointSpec,
    engine: HfFastloadEngineOptions,
    out_dir: Path,
    progress: bool = True,
    chat_template: str | None = None,
) -> dict[str, Any]:
    """Write the verified artifact of `endpoint` into `out_dir` (empty or absent) and return its manifest.

    engine: the endpoint's parsed options (EndpointPlan.engine); engine.decode is the container's, not the build's.

    chat_template: a Jinja chat template that replaces the tokenizer's (or gives one to a tokenizer without).
    The caller (model_build.cli) builds into a temporary directory and renames it on success, so a
    failure here never leaves a half-written artifact in place.
    """
    source = resolve_model_source(endpoint.model, endpoint.revision)
    tokenizer_export = plan_tokenizer(source, image_python_stack(HF_PYTORCH_INFERENCE), common.HF_CONTAINER_TARGET)
    source_config = common.read_model_config(source)
    common.check_causal_lm(endpoint, source_config, refuse_encoder_decoder=False, serves="AutoModelForCausalLM models")

    import torch

    from systems.hf_fastload.handler import inference as handler

    out_dir = Path(out_dir)
    chat: dict[str, str | None] = {}

    def write_weights(model: Any, _tokenizer: Any) -> None:
        if endpoint.weights_format == "safetensors":
            model.save_pretrained(out_dir, max_shard_size=endpoint.max_shard_size, safe_serialization=True)
        else:
            print(
                f"endpoint {endpoint.name!r}: weights_format 'torch-save' writes a pickled whole model: loading it "
                "executes code from the file, is slower than safetensors and needs the same transformers version",
                file=sys.stderr,
            )
            model.config.save_pretrained(out_dir)
            if model.generation_config is not None:
                model.generation_config.save_pretrained(out_dir)
            torch.save(model, out_dir / TORCH_SAVE_FILE)
        common.config_for_container(out_dir, endpoint.dtype)

    def write_code(_model: Any, _tokenizer: Any) -> None:
        tokenizer_export.write(out_dir)
        (out_dir / "code").mkdir(exist_ok=True)
        shutil.copyfile(HANDLER_SOURCE, out_dir / "code" / "inference.py")
        shutil.copyfile(request_contract.__file__, out_dir / "code" / "request_contract.py")  # inference.py imports it
        shutil.copyfile(chat_contract.__file__, out_dir / "code" / "chat_contract.py")  # and this one
        # chat_template, else the config's chat.template; a chat endpoint without one is refused (systems/chat_template.py)
        chat["source"] = write_chat_template(endpoint, out_dir, chat_template)

    def reload() -> tuple[Any, Any]:
        loaded = handler.load_model(
            out_dir, dtype=handler.TORCH_DTYPES[endpoint.dtype], weights_format=endpoint.weights_format
        )
        return loaded["model"], loaded["tokenizer"]

    return common.run_recipe(
        endpoint,
        out_dir,
        progress,
        source=source,
        write=[(f"write {endpoint.weights_format}", write_weights), ("tokenizer + handler", write_code)],
        reload=reload,
        fields=lambda: {
            "dtype": endpoint.dtype,
            # what the handler computes in (GPU: the stored dtype; CPU: fp32, bf16 stays on a native-bf16 CPU);
            # the verification above ran in the stored dtype
            "compute_dtype": handler.compute_dtype_rule(endpoint.dtype),
            "weights_format": endpoint.weights_format,
            "max_shard_size": endpoint.max_shard_size,
            "libraries": common.library_versions(),
            "target_container": {
                "image_repository": HF_PYTORCH_INFERENCE.repository,
                "image_tag_gpu": HF_PYTORCH_INFERENCE.gpu_tag,
                "image_tag_cpu": HF_PYTORCH_INFERENCE.cpu_tag,
                "transformers": HF_CONTAINER_TRANSFORMERS,
            },
            "tokenizer_rewritten": tokenizer_export.rewritten,
            "chat_template": chat["source"],  # "tokenizer", "config" or None: no chat
        },
    )


def set_chat_template(out_dir: Path, template: str) -> None:
    """Put `template` into the artifact's tokenizer_config.json (where transformers 4.49 reads it), in place of
    the tokenizer's own (a chat_template.jinja would win over it in 4.49, so it goes)."""
    import json

    from facts.models import read_json_object

    path = out_dir / "tokenizer_config.json"
    config = read_json_object(path) if path.is_file() else {}
    config["chat_template"] = template
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / "chat_template.jinja").unlink(missing_ok=True)


def check_chat_template(out_dir: Path, given: bool) -> str | None:
    """Render SAMPLE_CHAT with the artifact's tokenizer and chat template, as the handler will; BuildError when
    it cannot. Returns where the template came from ("config" when given, "tokenizer"), or None without one."""
    import jinja2
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(out_dir)
    if not getattr(tokenizer, "chat_template", None):
        return None
    request = chat_contract.parse_chat_request(SAMPLE_CHAT)
    try:
        text = tokenizer.apply_chat_template(
            request.template_messages(), tools=request.template_tools(), add_generation_prompt=True, tokenize=False
        )
    except (jinja2.exceptions.TemplateError, TypeError) as err:
        where = "the chat_template given" if given else "the tokenizer's chat template"
        raise BuildError(
            f"{where} cannot render a conversation with tools and a tool call: "
            f"{type(err).__name__}: {err}; allowed: a Jinja template that renders OpenAI-style messages, "
            "tool_calls and tool results"
        ) from None
    if "Paris" not in text:
        raise BuildError(
            "the chat template rendered the sample conversation without its messages; allowed: a "
            "template that renders each message's content"
        )
    return "config" if given else "tokenizer"
