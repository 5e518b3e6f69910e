"""Serve one request from an artifact directory the way the SageMaker Hugging Face container does.

Run INSIDE .venv-hf-container (tests/systems/hf_container/make_env.sh): transformers 4.51.3 + inference toolkit 2.6.

    .venv-hf-container/bin/python -I tests/systems/hf_container/load_with_toolkit.py ARTIFACT_DIR "prompt" \
        [--max-new-tokens 16] [--mode toolkit|direct|both]
    .venv-hf-container/bin/python -I tests/systems/hf_container/load_with_toolkit.py --batch JOBS.json

toolkit: the real `HuggingFaceHandlerService` is initialized with a real MMS `Context` (mms.service.Service
    builds it, as the model server does) whose `model_dir` is the artifact; the toolkit puts `<model_dir>/code`
    on sys.path, imports the artifact's own `inference.py` and wires its model_fn/input_fn/predict_fn/output_fn.
    The request goes through `handle()` exactly as MMS hands it over (batch of one, body bytes, headers via
    mms' RequestProcessor), so decoding, content-type handling and error wrapping are the toolkit's.
direct: the same `code/inference.py` imported on its own (no toolkit), its four functions called in order,
    plus the prompt's token ids, last-position logits and what the tokenizer loaded as, for cross-checks.
--chat: the request is an OpenAI chat request with a tool on offer (the artifact's chat template renders it);
    direct mode adds the streamed reply's text (stream_fn's SSE) and the reply to a scripted generate that emits a
    hermes tool call (everything after generate is the handler's: decoding, the parser, the reply).

Prints one JSON object on stdout: {"versions": {...}, "toolkit": {...}, "direct": {...}}; each part has
"ok" and either "reply" (the decoded JSON reply) or "error". Exit status 0 only when every mode run is ok.
Logs go to stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
import time
import traceback
from pathlib import Path


def versions() -> dict[str, str]:
    from importlib.metadata import version

    names = (
        "transformers",
        "tokenizers",
        "huggingface-hub",
        "safetensors",
        "torch",
        "sagemaker-huggingface-inference-toolkit",
        "sagemaker-inference",
        "multi-model-server",
    )
    return {n: version(n) for n in names}


def request_body(prompt: str, max_new_tokens: int) -> bytes:
    return json.dumps(
        {
            "inputs": prompt,
            "parameters": {"max_new_tokens": max_new_tokens, "min_new_tokens": max_new_tokens, "do_sample": False},
        }
    ).encode()


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
TOOL_TEXT = 'Let me look. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def chat_body(prompt: str, max_new_tokens: int) -> bytes:
    return json.dumps(
        {
            "model": "tiny",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}],
            "tools": [WEATHER],
            "max_tokens": max_new_tokens,
            "temperature": 0,
        }
    ).encode()


class ScriptedLM:
    """The model's generate, scripted to answer TOOL_TEXT then the end of sequence (random weights cannot)."""

    def __init__(self, real, tokenizer) -> None:
        self.generation_config = real.generation_config
        self.ids = tokenizer(TOOL_TEXT, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    def generate(self, input_ids, streamer=None, **kwargs):
        import torch

        return torch.cat([input_ids, torch.tensor([self.ids[: kwargs["max_new_tokens"]]])], dim=1)


def run_toolkit(model_dir: Path, body: bytes) -> dict:
    from mms.metrics.metrics_store import MetricsStore
    from mms.service import Service
    from sagemaker_huggingface_inference_toolkit.handler_service import HuggingFaceHandlerService

    handler = HuggingFaceHandlerService()
    # What mms.model_loader.MmsModelLoader does for a class-based handler: Service(...) owns the Context.
    service = Service("model", str(model_dir), None, handler.handle, None, 1)
    context = service.context
    context.metrics = MetricsStore("load", "model")
    t0 = time.perf_counter()
    handler.initialize(context)  # MMS calls this at worker start; it loads code/inference.py + model_fn
    load_s = time.perf_counter() - t0
    user_module = sys.modules.get("inference")
    # One request as the MMS frontend sends it (mms.service.Service.predict's batch format).
    batch = [
        {
            "requestId": b"req-1",
            "parameters": [{"name": "body", "contentType": "application/json", "value": body}],
            "headers": [
                {"name": b"Content-Type", "value": b"application/json"},
                {"name": b"Accept", "value": b"application/json"},
            ],
        }
    ]
    headers, input_batch, req_id_map = Service.retrieve_data_for_inference(batch)
    context.request_ids = req_id_map
    context.request_processor = headers
    context.metrics = MetricsStore(req_id_map, "model")
    t0 = time.perf_counter()
    reply = handler.handle(input_batch, context)  # raises mms PredictionException(message, 400) on error
    predict_s = time.perf_counter() - t0
    return {
        "ok": True,
        "reply": json.loads(reply[0]),
        "content_type": context.get_response_content_type(0),
        "user_module": getattr(user_module, "__file__", None),
        "used_user_functions": {
            name: getattr(getattr(handler, name), "__module__", None) == "inference"
            for name in ("load", "preprocess", "predict", "postprocess")
        },
        "load_s": round(load_s, 3),
        "predict_s": round(predict_s, 3),
    }


def run_direct(model_dir: Path, body: bytes) -> dict:
    import torch

    if str(model_dir / "code") not in sys.path:  # as the toolkit does: the artifact's code/ first on sys.path
        sys.path.insert(0, str(model_dir / "code"))
    spec = importlib.util.spec_from_file_location("artifact_inference_direct", model_dir / "code" / "inference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.model_fn(str(model_dir))
    data = module.input_fn(body, "application/json")
    reply = json.loads(module.output_fn(module.predict_fn(data, model), "application/json"))
    chat: dict = {}
    if "messages" in data:
        request = module.chat_contract.parse_chat_request(data)
        ids = module.chat_prompt(model, request)["input_ids"].cpu()
        events = b"".join(module.stream_fn({**data, "stream": True}, model)).decode().split("\n\n")
        chunks = [json.loads(e[len("data: ") :]) for e in events if e.startswith("data: {")]
        chat["stream_text"] = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        scripted = {**model, "model": ScriptedLM(model["model"], model["tokenizer"])}
        chat["tool_reply"] = module.predict_fn({**data, "max_tokens": 64}, scripted)  # room for the whole call
    else:
        ids = model["tokenizer"](data["inputs"], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        logits = model["model"](input_ids=ids.to(model["device"])).logits[0, -1].float().cpu()
    return {
        "ok": True,
        "reply": reply,
        "prompt_ids": ids[0].tolist(),
        "last_logits": [round(float(x), 5) for x in logits],
        "dtype": str(next(model["model"].parameters()).dtype),
        **chat,
        "tokenizer": {
            "class": type(model["tokenizer"]).__name__,
            "additional_special_tokens": list(model["tokenizer"].additional_special_tokens),
            "chat_template": getattr(model["tokenizer"], "chat_template", None),
        },
    }


def forget_artifact_modules() -> None:
    """Before the next artifact in the same process: drop what the last one's code/ put on sys.path and in sys.modules
    (the toolkit imports the user module by the name "inference"; the handler imports the two contracts by name)."""
    for name in ("inference", "chat_contract", "request_contract", "artifact_inference_direct"):
        sys.modules.pop(name, None)
    sys.path[:] = [p for p in sys.path if not p.endswith("/code")]
    importlib.invalidate_caches()


def run_batch(jobs: list[dict]) -> dict:
    """Several loads in one process (the imports of torch, transformers and the toolkit are most of each one's time):
    each job {"name", "model_dir", "prompt", "max_new_tokens", "modes": [...], "chat": bool} -> its result by mode."""
    results: dict = {}
    for job in jobs:
        forget_artifact_modules()
        body = (chat_body if job["chat"] else request_body)(job["prompt"], job["max_new_tokens"])
        results[job["name"]] = {}
        for mode in job["modes"]:
            try:
                results[job["name"]][mode] = (run_toolkit if mode == "toolkit" else run_direct)(
                    Path(job["model_dir"]).resolve(), body
                )
            except Exception as err:
                traceback.print_exc(file=sys.stderr)
                results[job["name"]][mode] = {"ok": False, "error": f"{type(err).__name__}: {err}"[:2000]}
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", type=Path, nargs="?")
    ap.add_argument("prompt", nargs="?")
    ap.add_argument("--batch", type=Path, help="a JSON file of jobs (run_batch); prints {versions, jobs}")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--mode", choices=("toolkit", "direct", "both"), default="both")
    ap.add_argument("--chat", action="store_true", help="send an OpenAI chat request instead")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    torch_threads()
    if args.batch:
        print(json.dumps({"versions": versions(), "jobs": run_batch(json.loads(args.batch.read_text()))}))
        return 0
    body = (chat_body if args.chat else request_body)(args.prompt, args.max_new_tokens)
    result: dict = {"versions": versions()}
    modes = ("toolkit", "direct") if args.mode == "both" else (args.mode,)
    for mode in modes:
        try:
            result[mode] = (run_toolkit if mode == "toolkit" else run_direct)(args.model_dir.resolve(), body)
        except Exception as err:
            traceback.print_exc(file=sys.stderr)
            result[mode] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    print(json.dumps(result))
    return 0 if all(result[m]["ok"] for m in modes) else 1


def torch_threads() -> None:
    import torch

    torch.set_num_threads(1)  # the test machines have 2 cores: one worker, one thread (more only contend)


if __name__ == "__main__":
    sys.exit(main())
