"""An hf-fastload artifact built here (transformers 5) loads and serves under the serving container's library
stack: transformers 4.49 + SageMaker HF inference toolkit 2.6 (image huggingface-pytorch-inference
2.6.0-transformers4.49.0), through the toolkit's own handler service and the artifact's code/inference.py.

The container's stack lives in its own venv (tests/hf_container/make_env.sh, ~1.5 min the first time, then
instant); the loader runs there in a subprocess. Outputs are compared within one stack (toolkit path vs. the
same handler called directly, both under 4.49); across stacks only tokenization and logits are compared,
since greedy tokens may legitimately differ between transformers 4.49 and 5.x (FACTS.md).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # until the repo's pytest config sets `pythonpath = .`
    sys.path.insert(0, str(ROOT))

MAKE_ENV = ROOT / "tests" / "hf_container" / "make_env.sh"
LOADER = ROOT / "tests" / "hf_container" / "load_with_toolkit.py"
VENV = ROOT / ".venv-hf-container"
PROMPT = "Once upon a time there was"
NEW_TOKENS = 12
# pip's words when an index cannot be reached (the only reason to skip rather than fail).
NETWORK_ERRORS = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|Name or service not known|"
    r"Connection refused|Network is unreachable|ConnectTimeoutError|ReadTimeoutError|ProxyError|SSLError"
)


@pytest.fixture(scope="module")
def container_python() -> Path:
    proc = subprocess.run(["bash", str(MAKE_ENV), str(VENV)], capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        if NETWORK_ERRORS.search(proc.stdout + proc.stderr):
            pytest.skip(f"cannot build the transformers-4.49 env: a package registry is unreachable:\n{tail}")
        pytest.fail(f"tests/hf_container/make_env.sh failed (not a network problem):\n{tail}")
    return VENV / "bin" / "python"


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    """A tiny GPT-2 built by the real recipe (fp16, as the demo config says), verified under transformers 5."""
    from endpoint_config import load_config
    from model_build.tiny_models import make_tiny_model
    from systems.hf_fastload.recipe import build

    root = tmp_path_factory.mktemp("hf-compat")
    source = make_tiny_model("gpt2", root / "source")
    endpoint = load_config(ROOT / "config" / "local.yaml", "local").endpoints[0]
    endpoint = endpoint.model_copy(update={"model": str(source)})
    build(endpoint, root / "artifact", progress=False)
    return root / "artifact"


def load_in_container(python: Path, model_dir: Path, mode: str = "both") -> tuple[int, dict, str]:
    proc = subprocess.run(
        [str(python), "-I", str(LOADER), str(model_dir), PROMPT, "--max-new-tokens", str(NEW_TOKENS), "--mode", mode],
        capture_output=True, text=True, timeout=300,
    )
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        pytest.fail(f"the loader printed no JSON (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc.returncode, result, proc.stderr


@pytest.fixture(scope="module")
def served(container_python, artifact) -> dict:
    code, result, stderr = load_in_container(container_python, artifact)
    assert code == 0, f"the artifact did not serve under transformers 4.49:\n{json.dumps(result, indent=1)}\n{stderr[-4000:]}"
    return result


def test_the_env_is_the_containers_stack(served):
    v = served["versions"]
    assert v["transformers"] == "4.49.0"
    assert v["sagemaker-huggingface-inference-toolkit"] == "2.6.0"
    assert v["tokenizers"].startswith("0.21.")


def test_toolkit_serves_the_artifact_with_its_own_handler(served, artifact):
    tk = served["toolkit"]
    assert tk["ok"] and tk["content_type"] == "application/json"
    # The toolkit imported the artifact's code/inference.py and used all four of its functions.
    assert Path(tk["user_module"]) == artifact / "code" / "inference.py"
    assert tk["used_user_functions"] == {"load": True, "preprocess": True, "predict": True, "postprocess": True}
    reply = tk["reply"]
    assert isinstance(reply, list) and len(reply) == 1
    text = reply[0]["generated_text"]
    assert isinstance(text, str) and text.strip(), f"no text generated: {reply!r}"
    assert not text.startswith(PROMPT)  # continuation only (the handler's contract)


def test_toolkit_reply_equals_the_handler_called_directly_under_449(served):
    # Same stack, same greedy request: going through the toolkit must not change the answer.
    assert served["direct"]["ok"]
    assert served["toolkit"]["reply"] == served["direct"]["reply"]
    assert served["direct"]["dtype"] == "torch.float16"  # the manifest's dtype was honoured


def test_tokens_and_logits_agree_with_transformers5(served, artifact):
    """Across stacks: the same prompt ids and (within fp16 noise) the same next-token logits."""
    import torch

    spec = importlib.util.spec_from_file_location("artifact_inference_t5", artifact / "code" / "inference.py")
    handler = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(handler)
    model = handler.load_model(artifact)
    ids = model["tokenizer"](PROMPT, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        logits = model["model"](input_ids=ids).logits[0, -1].float()
    assert ids[0].tolist() == served["direct"]["prompt_ids"]
    diff = (logits - torch.tensor(served["direct"]["last_logits"])).abs().max().item()
    assert diff <= 1e-2, f"next-token logits differ by {diff} between transformers 4.49 and {handler.transformers.__version__}"


def test_a_transformers5_only_artifact_fails_there(container_python, artifact, tmp_path):
    """The check can fail: a tokenizer saved by transformers 5 (class TokenizersBackend) loads under 5.x but
    not under 4.49, and the toolkit path reports it."""
    import transformers

    bad = tmp_path / "t5-only"
    shutil.copytree(artifact, bad)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        (bad / name).unlink(missing_ok=True)
    source_tok = transformers.AutoTokenizer.from_pretrained(artifact)
    generic = transformers.PreTrainedTokenizerFast(tokenizer_object=source_tok.backend_tokenizer, eos_token="<|endoftext|>")
    generic.save_pretrained(bad)
    assert json.loads((bad / "tokenizer_config.json").read_text())["tokenizer_class"] == "TokenizersBackend"
    assert transformers.AutoTokenizer.from_pretrained(bad)(PROMPT)["input_ids"]  # fine under transformers 5

    code, result, _ = load_in_container(container_python, bad, mode="toolkit")
    assert code != 0
    assert result["toolkit"]["ok"] is False
    assert "TokenizersBackend" in result["toolkit"]["error"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
