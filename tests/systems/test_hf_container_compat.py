"""An hf-fastload artifact built here (transformers 5) loads and serves under the serving container's library
stack: transformers 4.51.3 + SageMaker HF inference toolkit 2.6 (image huggingface-pytorch-inference
2.6.0-transformers4.51.3), through the toolkit's own handler service and the artifact's code/inference.py.
The source model's tokenizer is saved by transformers 5 (class TokenizersBackend, extra special tokens as a
list, chat_template.jinja), as a user's model saved today is: the recipe rewrites what 4.x cannot read
(systems/container_tokenizer.py). The tokenizer.json rewritten for the DJL images (tokenizers 0.14/0.15) is
loaded by those pinned tokenizers releases.

The container's stack lives in its own venv (tests/systems/hf_container/make_env.sh, ~1.5 min the first time, then
instant); the loader runs there in a subprocess. Outputs are compared within one stack (toolkit path vs. the
same handler called directly, both under 4.51); across stacks only tokenization and logits are compared,
since greedy tokens may legitimately differ between transformers 4.49 and 5.x (identical tiny GPT-J weights gave
matching forward logits but different greedy tokens under 4.49 and 5.23).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import CHAT_TEMPLATE, EXTRA_SPECIAL_TOKENS, run_side_by_side, save_tokenizer_with_transformers5
from hermetic import subprocess_env

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:  # until the repo's pytest config sets `pythonpath = .`
    sys.path.insert(0, str(ROOT))

MAKE_ENV = HERE / "hf_container" / "make_env.sh"
LOADER = HERE / "hf_container" / "load_with_toolkit.py"
VENV = ROOT / ".venv-hf-container"
PROMPT = "Once upon a time there was"
NEW_TOKENS = 12
# pip's words when an index cannot be reached (the only reason to skip rather than fail).
NETWORK_ERRORS = re.compile(
    r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|Name or service not known|"
    r"Connection refused|Network is unreachable|ConnectTimeoutError|ReadTimeoutError|ProxyError|SSLError"
)


def make_container_env() -> Path:
    proc = subprocess.run(
        ["bash", str(MAKE_ENV), str(VENV)], env=subprocess_env(), capture_output=True, text=True, timeout=1200
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        if NETWORK_ERRORS.search(proc.stdout + proc.stderr):
            pytest.skip(f"cannot build the transformers-4.51 env: a package registry is unreachable:\n{tail}")
        pytest.fail(f"tests/systems/hf_container/make_env.sh failed (not a network problem):\n{tail}")
    return VENV / "bin" / "python"


def make_source_model(root: Path) -> Path:
    """A tiny GPT-2 whose tokenizer was saved by transformers 5 (what a user's model saved today looks like)."""
    from model_build.tiny_models import make_tiny_model

    source = make_tiny_model("gpt2", root / "source")
    save_tokenizer_with_transformers5(source)
    return source


def build_artifact(source_model: Path, out: Path) -> Path:
    """The tiny GPT-2 built by the real recipe (fp16, as the demo config says), verified under transformers 5."""
    from deployment import load_config
    from systems.hf_fastload.recipe import build

    plan = load_config(ROOT / "config" / "local.yaml", "local").plans[0]
    endpoint = plan.spec.model_copy(update={"model": str(source_model), "chat": None})  # the tokenizer's own template
    build(endpoint, plan.engine, out, progress=False)
    return out


def make_transformers5_only(artifact: Path, bad: Path) -> Path:
    """The artifact with its tokenizer saved by transformers 5 as a generic class (TokenizersBackend)."""
    import transformers

    shutil.copytree(artifact, bad)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        (bad / name).unlink(missing_ok=True)
    source_tok = transformers.AutoTokenizer.from_pretrained(artifact)
    generic = transformers.PreTrainedTokenizerFast(
        tokenizer_object=source_tok.backend_tokenizer, eos_token="<|endoftext|>"
    )
    generic.save_pretrained(bad)
    return bad


def build_chat_architectures(root: Path, tiny_chat_models: dict[str, Path]) -> dict[str, str]:
    """Each tiny chat model built as hf-fastload under transformers 5: {architecture: artifact folder}."""
    from deployment import load_config
    from model_build.cli import build_endpoint
    from model_build.tiny_models import CHAT_ARCHITECTURES

    built = {}
    for arch in CHAT_ARCHITECTURES:
        config = root / f"{arch}.yaml"
        config.write_text(
            f"endpoints:\n  - name: tiny-{arch}\n    system: hf-fastload\n    model: {tiny_chat_models[arch]}\n"
            "    instance_type: ml.m5.xlarge\n    dtype: fp16\n"
        )
        build_endpoint(load_config(config).endpoint(f"tiny-{arch}"), root / arch, progress=False)
        built[arch] = str(root / arch)
    return built


@dataclass
class Prepared:
    """What was built here, and the container-stack runs on it, by name."""

    source_model: Path
    artifact: Path
    transformers5_only: Path
    tokenizers_023: dict[str, Path]
    rewritten: dict[str, dict]  # tokenizer shape -> {"files": {kind: path}, "expected": ids, "rewritten": [...]}
    runs: dict[str, subprocess.CompletedProcess[str]]


def loader_args(python: Path, model_dir: Path, *extra: str) -> list[str]:
    return [str(python), "-I", str(LOADER), str(model_dir), PROMPT, "--max-new-tokens", str(NEW_TOKENS), *extra]


@pytest.fixture(scope="module")
def prepared(request: pytest.FixtureRequest) -> Prepared:
    """Build here what the container stack is asked to load, then run each load under the container's stack:
    the artifact (toolkit and direct), the transformers-5-only copy (toolkit), a chat request,
    every tiny chat architecture, and the rewritten tokenizer.json files under both old tokenizers releases."""
    root = request.getfixturevalue("tmp_path_factory").mktemp("hf-compat")
    python = make_container_env()
    source = make_source_model(root / "source")
    artifact = build_artifact(source, root / "artifact")
    bad = make_transformers5_only(artifact, root / "t5-only")
    chat_artifact = request.getfixturevalue("chat_artifact")
    (root / "chat-archs").mkdir()
    built = build_chat_architectures(root / "chat-archs", request.getfixturevalue("tiny_chat_models"))
    tokenizers_023 = make_tokenizers_023(root / "tokenizers-023", source)
    rewritten = rewrite_every_shape(tokenizers_023, root / "rewritten")
    files = {name: shape["files"] for name, shape in rewritten.items()}
    jobs = [
        {"name": "served", "model_dir": str(artifact), "modes": ["toolkit", "direct"], "chat": False},
        {"name": "t5-only", "model_dir": str(bad), "modes": ["toolkit"], "chat": False},
        {"name": "chat", "model_dir": str(chat_artifact), "modes": ["toolkit", "direct"], "chat": True},
    ]
    jobs = [{"prompt": PROMPT, "max_new_tokens": NEW_TOKENS, **job} for job in jobs]
    jobs += [
        {
            "name": f"arch-{arch}",
            "model_dir": path,
            "modes": ["direct"],
            "chat": True,
            "prompt": "Hello",
            "max_new_tokens": 2,
        }
        for arch, path in built.items()
    ]
    (root / "jobs.json").write_text(json.dumps(jobs))
    runs = run_side_by_side(
        {
            # One process for every load: importing torch, transformers and the toolkit is most of each load's time.
            "loads": [str(python), "-I", str(LOADER), "--batch", str(root / "jobs.json")],
            **{
                f"old-tokenizers-{version}": [
                    str(python),
                    "-I",
                    "-c",
                    OLD_TOKENIZERS_SCRIPT,
                    str(VENV / "old-tokenizers" / version),
                    json.dumps(files),
                    json.dumps(SAMPLE_TEXTS),
                ]
                for version in OLD_TOKENIZERS
            },
        }
    )
    return Prepared(source, artifact, bad, tokenizers_023, rewritten, runs)


@pytest.fixture(scope="module")
def source_model(prepared: Prepared) -> Path:
    return prepared.source_model


@pytest.fixture(scope="module")
def artifact(prepared: Prepared) -> Path:
    return prepared.artifact


@pytest.fixture(scope="module")
def loads(prepared: Prepared) -> dict:
    """{"versions": the container stack's, "jobs": {job name: {mode: result}}} from the one batch of loads."""
    result = prepared.runs["loads"]
    try:
        return json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        pytest.fail(
            f"the loader printed no JSON (exit {result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
        )


def job(loads: dict, name: str) -> dict:
    """One job's results, as the loader prints them for one artifact: {"versions", mode: result, ...}."""
    return {"versions": loads["versions"], **loads["jobs"][name]}


@pytest.fixture(scope="module")
def served(loads: dict) -> dict:
    result = job(loads, "served")
    assert result["toolkit"]["ok"] and result["direct"]["ok"], (
        f"the artifact did not serve under transformers 4.51:\n{json.dumps(result, indent=1)}"
    )
    return result


def test_the_env_is_the_containers_stack(served):
    v = served["versions"]
    assert v["transformers"] == "4.51.3"
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


def test_the_transformers5_tokenizer_is_rewritten_for_4x(source_model, artifact):
    """Built from a transformers-5 save: the artifact's tokenizer_config.json names what 4.51 knows, and the
    build verified (under transformers 5) that the rewritten tokenizer gives the source's token ids."""
    source_config = json.loads((source_model / "tokenizer_config.json").read_text())
    assert source_config["tokenizer_class"] == "TokenizersBackend"
    assert source_config["extra_special_tokens"] == EXTRA_SPECIAL_TOKENS
    assert (source_model / "chat_template.jinja").is_file()
    config = json.loads((artifact / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast" and "extra_special_tokens" not in config
    assert config["additional_special_tokens"] == EXTRA_SPECIAL_TOKENS and config["chat_template"] == CHAT_TEMPLATE
    assert not (artifact / "chat_template.jinja").exists()
    # tokenizers 0.21 (transformers 4.51) reads the pair-style merges: tokenizer.json is the source's, unchanged
    assert (artifact / "tokenizer.json").read_bytes() == (source_model / "tokenizer.json").read_bytes()
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert manifest["verification"]["tokenizer_ids_match"] and len(manifest["tokenizer_rewritten"]) == 1


def test_4x_loads_the_rewritten_tokenizer_as_written(served):
    tokenizer = served["direct"]["tokenizer"]
    assert tokenizer == {
        "class": "PreTrainedTokenizerFast",
        "additional_special_tokens": EXTRA_SPECIAL_TOKENS,
        "chat_template": CHAT_TEMPLATE,
    }


def test_toolkit_reply_equals_the_handler_called_directly_under_4x(served):
    # Same stack, same greedy request: going through the toolkit must not change the answer.
    assert served["direct"]["ok"]
    assert served["toolkit"]["reply"] == served["direct"]["reply"]
    # the fp16 artifact computes in fp32 on a CPU (the handler's compute_dtype), under 4.51 as under 5.x
    assert served["direct"]["dtype"] == "torch.float32"


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
    assert diff <= 1e-2, (
        f"next-token logits differ by {diff} between transformers 4.51 and {handler.transformers.__version__}"
    )


def test_a_transformers5_only_artifact_fails_there(prepared: Prepared, loads: dict):
    """The check can fail: a tokenizer saved by transformers 5 (class TokenizersBackend) loads under 5.x but
    not under 4.51, and the toolkit path reports it."""
    import transformers

    bad = prepared.transformers5_only
    assert json.loads((bad / "tokenizer_config.json").read_text())["tokenizer_class"] == "TokenizersBackend"
    assert transformers.AutoTokenizer.from_pretrained(bad)(PROMPT)["input_ids"]  # fine under transformers 5

    result = job(loads, "t5-only")
    assert result["toolkit"]["ok"] is False
    assert "TokenizersBackend" in result["toolkit"]["error"]


# ---- chat under the container's stack -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def chat_served(loads: dict) -> dict:
    """A chat request (system + user, a tool on offer, greedy) to the tiny Llama hf-fastload artifact, through the
    toolkit and directly, under transformers 4.51."""
    result = job(loads, "chat")
    assert result["toolkit"]["ok"] and result["direct"]["ok"], (
        f"chat did not serve under transformers 4.51:\n{json.dumps(result)[-3000:]}"
    )
    return result


def test_toolkit_serves_a_chat_request_with_the_artifacts_handler(chat_served: dict, chat_artifact: Path) -> None:
    from openai.types.chat import ChatCompletion

    toolkit, direct = chat_served["toolkit"], chat_served["direct"]
    assert Path(toolkit["user_module"]) == chat_artifact / "code" / "inference.py"
    reply = ChatCompletion.model_validate(toolkit["reply"])
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == NEW_TOKENS
    assert (
        toolkit["reply"]["choices"] == direct["reply"]["choices"]
        and toolkit["reply"]["usage"] == direct["reply"]["usage"]
    )
    assert direct["stream_text"] == direct["reply"]["choices"][0]["message"]["content"]  # stream_fn under 4.51


def test_the_chat_template_and_the_model_agree_with_transformers5(chat_served: dict, chat_artifact: Path) -> None:
    """The template renders the same prompt (same ids) under 4.51 and 5.x, and the next-token logits agree: with the
    RoPE base lost from config.json (transformers 5 writes rope_parameters, 4.x reads rope_theta) they differ by
    3.2e-3 on this model (measured), so the bound is far below that."""
    import torch

    import chat_contract
    from systems.hf_fastload.handler import inference as handler

    model = handler.model_fn(str(chat_artifact))
    request = chat_contract.parse_chat_request(json.loads(loader_module().chat_body(PROMPT, NEW_TOKENS)))
    ids = handler.chat_prompt(model, request)["input_ids"]
    assert ids[0].tolist() == chat_served["direct"]["prompt_ids"]
    with torch.inference_mode():
        logits = model["model"](input_ids=ids).logits[0, -1].float()
    diff = (logits - torch.tensor(chat_served["direct"]["last_logits"])).abs().max().item()
    assert diff <= 5e-5, f"next-token logits differ by {diff} between transformers 4.51 and 5.x"
    config = json.loads((chat_artifact / "config.json").read_text())
    assert config["rope_theta"] == 500_000.0 == config["rope_parameters"]["rope_theta"]


def loader_module():
    spec = importlib.util.spec_from_file_location("loader", LOADER)
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    return loader


def test_a_generated_tool_call_is_read_under_4x(chat_served: dict) -> None:
    message = chat_served["direct"]["tool_reply"]["choices"][0]["message"]
    assert chat_served["direct"]["tool_reply"]["choices"][0]["finish_reason"] == "tool_calls"
    assert message["content"] == "Let me look. "
    assert [c["function"] for c in message["tool_calls"]] == [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]


def test_which_tiny_chat_architectures_the_container_serves(loads: dict) -> None:
    """Each tiny chat model built as hf-fastload (under transformers 5) and served a chat request under the
    container's transformers 4.51.3: all of them, Qwen3 included (4.49, the image before, predates it: "does not
    recognize this architecture"). gpt-oss (4.55) is refused before any build (tests/systems/test_system_vllm.py)."""
    from model_build.tiny_models import CHAT_ARCHITECTURES

    result = {name.removeprefix("arch-"): r["direct"] for name, r in loads["jobs"].items() if name.startswith("arch-")}
    serves = {arch for arch, r in result.items() if r["ok"] and r["reply"]["choices"][0]["finish_reason"]}
    errors = {arch: r.get("error", "served") for arch, r in result.items()}
    assert serves == set(CHAT_ARCHITECTURES) == {"llama", "qwen2", "qwen3", "mistral", "gemma2"}, errors


# ---- tokenizer.json for the DJL images' old tokenizers (0.14 / 0.15) ---------------------------------------

OLD_TOKENIZERS = ("0.14.1", "0.15.2")  # what the DJL 0.24 / 0.27 images' transformers pins resolve to (make_env.sh)
DJL_STACK_FLOOR = ">=0.14,<0.19"  # transformers 4.39.0's tokenizers requirement (systems/images.py)
SAMPLE_TEXTS = ["Once upon a time there was a small town.", "  Hello,   world!  2048 ", "The quick brown fox"]


def make_tokenizers_023(root: Path, source_model: Path) -> dict[str, Path]:
    """Model directories whose tokenizer.json tokenizers 0.23 wrote, in the three shapes the rewrite handles:
    byte-level BPE (pair merges; the transformers-5 GPT-2 save), sentencepiece-style BPE (pair merges +
    Metaspace) and Unigram (Metaspace)."""
    from tokenizers import SentencePieceBPETokenizer, SentencePieceUnigramTokenizer

    from model_build.tiny_models import CORPUS

    made = {"bpe-bytelevel": source_model}
    for name, tokenizer, vocab in (
        ("bpe-metaspace", SentencePieceBPETokenizer(), 400),
        ("unigram-metaspace", SentencePieceUnigramTokenizer(), 300),
    ):
        extra = {"unk_token": "<unk>"} if name.startswith("unigram") else {}
        tokenizer.train_from_iterator(
            [CORPUS] * 4, vocab_size=vocab, special_tokens=["<unk>"], show_progress=False, **extra
        )
        (root / name).mkdir(parents=True)
        tokenizer.save(str(root / name / "tokenizer.json"))
        made[name] = root / name
    return made


def rewrite_for(source: Path, out: Path, tokenizers_requirement: str) -> list[str]:
    from systems.container_tokenizer import plan_tokenizer
    from systems.images import PythonStack

    export = plan_tokenizer(source, PythonStack(transformers="==4.39.0", tokenizers=tokenizers_requirement), "test")
    export.write(out)
    return export.rewritten


def rewrite_every_shape(tokenizers_023: dict[str, Path], root: Path) -> dict[str, dict]:
    """Each shape rewritten for the DJL images' tokenizers floor: {shape: {"files": {"original", "rewritten"},
    "expected": the ids tokenizers 0.23 gives the original, "rewritten": what the rewrite says it changed,
    "rewritten_ids": the ids tokenizers 0.23 gives the rewrite}}."""
    from tokenizers import Tokenizer

    shapes = {}
    for name, source in tokenizers_023.items():
        out = root / name
        rewritten = rewrite_for(source, out, DJL_STACK_FLOOR)
        shapes[name] = {
            "files": {"original": str(source / "tokenizer.json"), "rewritten": str(out / "tokenizer.json")},
            "expected": [Tokenizer.from_file(str(source / "tokenizer.json")).encode(t).ids for t in SAMPLE_TEXTS],
            "rewritten": rewritten,
            "rewritten_ids": [Tokenizer.from_file(str(out / "tokenizer.json")).encode(t).ids for t in SAMPLE_TEXTS],
        }
    return shapes


# Run in the container's python with one old tokenizers release first on sys.path: every file's ids, or its error.
OLD_TOKENIZERS_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import tokenizers
from tokenizers import Tokenizer
files, texts = json.loads(sys.argv[2]), json.loads(sys.argv[3])
out = {'version': tokenizers.__version__}
for name, paths in files.items():
    for kind, path in paths.items():
        try:
            out[name + '/' + kind] = [Tokenizer.from_file(path).encode(t).ids for t in texts]
        except Exception as err:
            out[name + '/' + kind] = 'error: ' + str(err)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def tokenizers_023(prepared: Prepared) -> dict[str, Path]:
    return prepared.tokenizers_023


def test_rewritten_tokenizer_json_loads_in_old_tokenizers(prepared: Prepared):
    """tokenizers 0.14.1 and 0.15.2 cannot read what 0.23 writes; they read the rewrite and encode every sample
    exactly as 0.23 encodes the original."""
    for name, shape in prepared.rewritten.items():
        assert any(r.startswith("tokenizer.json:") for r in shape["rewritten"]), (name, shape["rewritten"])
        assert shape["rewritten_ids"] == shape["expected"], name
    for version in OLD_TOKENIZERS:
        run = prepared.runs[f"old-tokenizers-{version}"]
        assert run.returncode == 0, run.stderr[-2000:]
        result = json.loads(run.stdout)
        assert result["version"] == version
        for name, shape in prepared.rewritten.items():
            # the check can fail: the original (tokenizers 0.23's format) is refused by the old release
            assert str(result[f"{name}/original"]).startswith("error: data did not match any variant"), (version, name)
            assert result[f"{name}/rewritten"] == shape["expected"], (version, name)


def test_tokenizer_json_is_copied_unchanged_for_newer_tokenizers(tokenizers_023, tmp_path):
    for name, source in tokenizers_023.items():
        assert not any(r.startswith("tokenizer.json") for r in rewrite_for(source, tmp_path / name, ">=0.20"))
        assert (tmp_path / name / "tokenizer.json").read_bytes() == (source / "tokenizer.json").read_bytes()


def _tokenizer_dir(tmp_path: Path, data: dict, config: dict | None = None) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "tokenizer.json").write_text(json.dumps(data))
    if config is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return tmp_path


def _bpe(merges: list, **model: object) -> dict:
    return {
        "version": "1.0",
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": merges, **model},
        "pre_tokenizer": None,
        "decoder": None,
        "normalizer": None,
        "post_processor": None,
        "added_tokens": [],
    }


@pytest.mark.parametrize(
    ("data", "requirement", "expected"),
    [
        (_bpe([["a b", "c"]]), ">=0.14,<0.19", "BPE merge ['a b', 'c'] has a token with a space"),
        (_bpe(["a b"], ignore_merges=True), ">=0.14,<0.19", "BPE ignore_merges: true"),
        (
            {
                **_bpe([["a", "b"]]),
                "pre_tokenizer": {
                    "type": "Sequence",
                    "pretokenizers": [
                        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False}
                    ],
                },
            },
            ">=0.14,<0.19",
            "Metaspace split: false",
        ),
        (
            {
                **_bpe([["a", "b"]]),
                "pre_tokenizer": {
                    "type": "Metaspace",
                    "replacement": "\u2581",
                    "prepend_scheme": "first",
                    "split": True,
                },
            },
            ">=0.14,<0.15",
            "Metaspace prepend_scheme: 'first'",
        ),
    ],
)
def test_tokenizer_json_without_an_old_equivalent_is_refused(tmp_path, data, requirement, expected):
    from model_build import BuildError

    with pytest.raises(BuildError) as info:
        rewrite_for(_tokenizer_dir(tmp_path / "src", data), tmp_path / "out", requirement)
    message = str(info.value)
    assert expected in message and "tokenizer.json" in message and "tokenizers 0.14" in message
    assert "allowed:" in message and not (tmp_path / "out").exists()


def test_prepend_scheme_first_is_kept_for_tokenizers_015(tmp_path):
    data = {
        **_bpe([["a", "b"]]),
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
    }
    rewrite_for(_tokenizer_dir(tmp_path / "src", data), tmp_path / "out", ">=0.15,<0.19")
    written = json.loads((tmp_path / "out" / "tokenizer.json").read_text())
    assert written["pre_tokenizer"] == {
        "type": "Metaspace",
        "replacement": "\u2581",
        "add_prefix_space": True,
        "prepend_scheme": "first",
    }
    assert written["model"]["merges"] == ["a b"]


def test_transformers5_class_without_tokenizer_json_is_refused(tmp_path):
    from model_build import BuildError
    from systems.container_tokenizer import plan_tokenizer
    from systems.images import HF_PYTORCH_INFERENCE

    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "TokenizersBackend"}))
    (tmp_path / "vocab.json").write_text("{}")
    with pytest.raises(
        BuildError,
        match=r"tokenizer_class 'TokenizersBackend' is a transformers 5 class and there is "
        r"no tokenizer.json, so transformers 4.51.3 .*; allowed: ",
    ):
        plan_tokenizer(tmp_path, HF_PYTORCH_INFERENCE.python_stack, "transformers 4.51.3 (the serving container)")
