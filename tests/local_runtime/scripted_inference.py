"""A stand-in code/inference.py for the tool round trip: the real hf-fastload handler (code/real_inference.py
beside it) with the model's generate scripted, because random weights cannot choose a tool.

The script: when the prompt holds no tool result, answer with a hermes tool call of the first tool the chat
template rendered (<tool_call>{"name": ..., "arguments": {"city": "Paris"}}</tool_call>); after a tool result,
answer "The tool said: <result>." Everything else (the chat template, decoding, the tool-call parser, the reply
and its stream) is the real handler's. tests/local_runtime/test_serve_chat.py installs it in a copy of the chat
artifact."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location("real_inference", Path(__file__).with_name("real_inference.py"))
real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real)

input_fn, output_fn, predict_fn, stream_fn = real.input_fn, real.output_fn, real.predict_fn, real.stream_fn


class ScriptedLM:
    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.generation_config = model.generation_config
        self.tokenizer = tokenizer

    def answer(self, prompt: str) -> str:
        results = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prompt, re.DOTALL)
        if results:
            return f"The tool said: {results[-1]}."
        name = re.search(r'"function": \{"name": "([^"]+)"', prompt)
        if name is None:
            return "No tools were offered."
        return f'<tool_call>\n{{"name": "{name.group(1)}", "arguments": {{"city": "Paris"}}}}\n</tool_call>'

    def generate(self, input_ids: Any, streamer: Any = None, **kwargs: Any) -> Any:
        import torch

        prompt = self.tokenizer.decode(input_ids[0])
        ids = self.tokenizer(self.answer(prompt), add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        new = torch.tensor([ids[: kwargs["max_new_tokens"]]])
        if streamer is not None:
            streamer.put(input_ids)
            for token in new[0]:
                streamer.put(token.reshape(1))
            streamer.end()
        return torch.cat([input_ids, new], dim=1)


def model_fn(model_dir: str, context: Any = None) -> dict:
    model = real.model_fn(model_dir, context)
    model["model"] = ScriptedLM(model["model"], model["tokenizer"])
    return model
