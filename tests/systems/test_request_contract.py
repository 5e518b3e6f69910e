"""One generation-request contract: the five places that take a request answer every request alike.

The five: the invoke Lambda (lambda/invoke/handler.py, through its handler), hf-fastload's inference.py (input_fn,
then validate_request, which predict_fn calls before any compute), the DJL model.py of djl-deepspeed/-accelerate
and of djl-fastertransformer (through handle(), with a djl_python double and the generation stubbed out) and
byoc_server (decode_body + parse_request, what its /invocations route calls). One table of requests, each with the
answer every entry point must give. All five use request_contract.py, so the table also pins the
contract itself: it is written out by hand, not derived from the module.
"""

from __future__ import annotations

import ast
import base64
import importlib.util
import io
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from helpers import BAD_BODIES, EMOJI_BODY

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "request_contract.py"

# ---- the table: (id, body, accepted) -------------------------------------------------------------------------
OK = {"inputs": "Hello"}


def P(**params: Any) -> dict:
    return {"inputs": "Hello", "parameters": params}


AT_UPPER_BOUNDS = P(
    max_new_tokens=512,
    min_new_tokens=512,
    temperature=2,
    top_p=1,
    top_k=1000,
    repetition_penalty=10,
    num_beams=8,
    do_sample=True,
    return_full_text=True,
    seed=2**32 - 1,
)
AT_LOWER_BOUNDS = P(
    max_new_tokens=1,
    min_new_tokens=0,
    temperature=0.01,
    top_p=1e-6,
    top_k=0,
    repetition_penalty=0.1,
    num_beams=1,
    do_sample=False,
    return_full_text=False,
    seed=0,
)

CASES: list[tuple[str, Any, bool]] = [
    # valid
    ("string-input", OK, True),
    ("list-input", {"inputs": ["a", "b"]}, True),
    ("batch-of-8", {"inputs": ["x"] * 8}, True),
    ("reference-input-shape", {"input": "Hello"}, True),
    ("parameters-null", {"inputs": "Hello", "parameters": None}, True),
    ("parameters-empty", {"inputs": "Hello", "parameters": {}}, True),
    ("upper-bounds", AT_UPPER_BOUNDS, True),
    ("lower-bounds", AT_LOWER_BOUNDS, True),
    ("float-as-integer-valued-number", P(temperature=1), True),
    ("surrogate-pair", EMOJI_BODY, True),
    # the request's shape
    ("unknown-top-level-key", {"inputs": "Hello", "stream": True}, False),
    ("endpoint-in-request", {"inputs": "Hello", "endpoint_name": "other"}, False),
    ("no-inputs", {"parameters": {}}, False),
    ("input-and-inputs", {"input": "a", "inputs": "b"}, False),
    ("inputs-number", {"inputs": 5}, False),
    ("inputs-null", {"inputs": None}, False),
    ("inputs-empty-string", {"inputs": ""}, False),
    ("inputs-whitespace", {"inputs": " \n"}, False),
    ("inputs-empty-list", {"inputs": []}, False),
    ("inputs-too-many", {"inputs": ["x"] * 9}, False),
    ("inputs-item-number", {"inputs": ["a", 3]}, False),
    ("inputs-item-empty", {"inputs": ["a", ""]}, False),
    ("inputs-too-long", {"inputs": "x" * 16385}, False),
    ("parameters-list", {"inputs": "Hello", "parameters": [1]}, False),
    ("parameters-string", {"inputs": "Hello", "parameters": "max_new_tokens=5"}, False),
    ("body-array", ["Hello"], False),
    # parameters nobody behind the contract honours (the invoke function used to pass them on; three containers refused)
    ("unknown-parameter", P(max_tokens=5), False),
    ("stop", P(stop=["###"]), False),
    # LiteLLM's sagemaker/ copies its transport URL into parameters: ignored, it changes nothing (IGNORED_KEYS)
    ("litellm-sagemaker-base-url", P(max_new_tokens=4, sagemaker_base_url="http://127.0.0.1:1/invocations"), True),
    ("litellm-sagemaker-base-url-top", {"inputs": "Hello", "sagemaker_base_url": "http://127.0.0.1:1"}, True),
    ("typical_p", P(typical_p=0.9), False),
    ("fastertransformer-name", P(max_seq_len=5), False),
    # each parameter: wrong type, and each side of its bounds
    ("max_new_tokens-string", P(max_new_tokens="5"), False),
    ("max_new_tokens-float", P(max_new_tokens=5.5), False),
    ("max_new_tokens-bool", P(max_new_tokens=True), False),
    ("max_new_tokens-0", P(max_new_tokens=0), False),
    ("max_new_tokens-above-cap", P(max_new_tokens=513), False),
    ("min_new_tokens-negative", P(min_new_tokens=-1), False),
    ("min_new_tokens-above-max_new_tokens", P(max_new_tokens=5, min_new_tokens=6), False),
    ("min_new_tokens-above-default-max", P(min_new_tokens=65), False),
    ("min_new_tokens-float", P(min_new_tokens=1.5), False),
    ("temperature-0", P(temperature=0), False),
    ("temperature-below-0.01", P(temperature=0.0099), False),
    ("temperature-1e-300", P(temperature=1e-300), False),
    ("temperature-above-2", P(temperature=2.01), False),
    ("temperature-string", P(temperature="hot"), False),
    ("temperature-null", P(temperature=None), False),
    ("top_p-0", P(top_p=0), False),
    ("top_p-above-1", P(top_p=1.01), False),
    ("top_p-list", P(top_p=[0.5]), False),
    ("top_k-negative", P(top_k=-1), False),
    ("top_k-above-1000", P(top_k=1001), False),
    ("top_k-float", P(top_k=5.0), False),
    ("repetition_penalty-0", P(repetition_penalty=0), False),
    ("repetition_penalty-below-0.1", P(repetition_penalty=0.099), False),
    ("repetition_penalty-above-10", P(repetition_penalty=10.5), False),
    ("repetition_penalty-bool", P(repetition_penalty=False), False),
    ("num_beams-0", P(num_beams=0), False),
    ("num_beams-above-8", P(num_beams=9), False),
    ("num_beams-float", P(num_beams=2.0), False),
    ("do_sample-string", P(do_sample="yes"), False),
    ("do_sample-int", P(do_sample=1), False),
    ("return_full_text-null", P(return_full_text=None), False),
    ("return_full_text-string", P(return_full_text="true"), False),
    ("seed-negative", P(seed=-1), False),
    ("seed-2^32", P(seed=2**32), False),
    ("seed-2^63-1", P(seed=2**63 - 1), False),
    ("seed-2^64-1", P(seed=2**64 - 1), False),
    ("seed-float", P(seed=1.0), False),
    ("seed-string", P(seed="42"), False),
    # malformed JSON
    ("duplicate-key", b'{"inputs": "a", "inputs": "b"}', False),
    ("nan-in-parameter", b'{"inputs": "a", "parameters": {"top_p": NaN}}', False),
    *[(f"bad-body-{name}", body, False) for name, body, _ in BAD_BODIES],
]


def _bytes(body: Any) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


# ---- the five entry points, each answering True (accepted) or False (refused with a 4xx) ----------------------


def _load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Runtime:
    """sagemaker-runtime stand-in for the invoke function: every forwarded request is answered."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def invoke_endpoint(self, **kwargs: Any) -> dict:
        self.sent.append(json.loads(kwargs["Body"]))
        inputs = self.sent[-1]["inputs"]
        outputs = [{"generated_text": "ok"}] * (len(inputs) if isinstance(inputs, list) else 1)  # one a prompt
        return {"Body": io.BytesIO(json.dumps(outputs).encode()), "ContentType": "application/json"}


class _DjlInput:
    """djl_python.inputs.Input double: properties and the raw body (get_as_bytes, as djl_python's)."""

    def __init__(self, body: bytes | None) -> None:
        self._body = body

    def get_properties(self) -> dict[str, str]:
        return {}

    def is_empty(self) -> bool:
        return self._body is None

    def get_as_bytes(self) -> bytearray:
        return bytearray(self._body or b"")


class _DjlOutput:
    def __init__(self) -> None:
        self.code, self.content = 200, None

    def set_code(self, code: int) -> _DjlOutput:
        self.code = code
        return self

    def set_message(self, message: str) -> _DjlOutput:
        return self

    def add_as_json(self, value: Any) -> _DjlOutput:
        self.content = json.loads(json.dumps(value))
        return self


@pytest.fixture(scope="module")
def entry_points() -> dict[str, Any]:
    """name -> answer(body bytes) -> True (accepted) / False (refused with a 4xx); anything else fails the test."""
    invoke = _load(ROOT / "endpoint_runtime" / "invoke.py", "contract_invoke")
    from systems.byoc_server import contract as byoc

    # Stand-ins for what the handlers import but request checking never uses (djl_python's Input/Output; torch
    # and transformers, which take seconds to import, for hf-fastload's module-level dtype table and version).
    djl_python = types.ModuleType("djl_python")
    djl_python.Input, djl_python.Output = _DjlInput, _DjlOutput
    torch = types.ModuleType("torch")
    torch.float16, torch.bfloat16, torch.float32 = "float16", "bfloat16", "float32"
    transformers = types.ModuleType("transformers")
    transformers.__version__ = "5.0.0"
    transformers.StoppingCriteria = object  # the base of the handler's StopOnText, defined at import
    with pytest.MonkeyPatch.context() as patch:  # only while the three modules load
        for name, module in {"djl_python": djl_python, "torch": torch, "transformers": transformers}.items():
            patch.setitem(sys.modules, name, module)
        hf = _load(ROOT / "systems" / "hf_fastload" / "handler" / "inference.py", "contract_hf")
        djl = _load(ROOT / "systems" / "djl_common" / "handler" / "model.py", "contract_djl")
        ft = _load(ROOT / "systems" / "djl_fastertransformer" / "handler" / "model.py", "contract_ft")
    # A loaded "model" and a generate that answers without one: handle() runs everything else.
    djl._model.update(stub=True)
    djl.generate = lambda model, prompts, params: [{"generated_text": "ok"} for _ in prompts]
    ft._model.update(engine="stub", model_type="gpt2")  # gpt2: FasterTransformer's GPTModel takes every parameter
    ft.generate = lambda model, prompts, params: ["ok" for _ in prompts]

    def lambda_answer(body: bytes) -> bool:
        invoke._client = _Runtime()
        event = {
            "body": base64.b64encode(body).decode(),
            "isBase64Encoded": True,
            "requestContext": {"http": {"method": "POST"}},
        }
        status = invoke.handler(event)["statusCode"]
        assert status == 200 or 400 <= status < 500, status
        return status == 200

    def hf_answer(body: bytes) -> bool:
        try:
            hf.validate_request(hf.input_fn(body, "application/json"))
        except ValueError:
            return False
        return True

    def djl_answer(module: types.ModuleType) -> Any:
        def answer(body: bytes) -> bool:
            out = module.handle(_DjlInput(body))
            assert out.code == 200 or (400 <= out.code < 500 and set(out.content) == {"error", "error_type"}), out
            return out.code == 200

        return answer

    def byoc_answer(body: bytes) -> bool:
        try:
            byoc.parse_request(byoc.decode_body(body))
        except byoc.RequestError:
            return False
        return True

    return {
        "invoke-lambda": lambda_answer,
        "hf-fastload": hf_answer,
        "djl": djl_answer(djl),
        "djl-fastertransformer": djl_answer(ft),
        "byoc-server": byoc_answer,
    }


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("MAX_NEW_TOKENS", "MAX_BATCH_SIZE", "MAX_INPUT_CHARS", "MAX_REQUEST_BYTES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ENDPOINT_NAME", "contract-test")
    return monkeypatch


def test_every_entry_point_gives_the_same_answer(entry_points: dict[str, Any], clean_env) -> None:
    disagreements = []
    for case_id, body, accepted in CASES:
        answers = {name: answer(_bytes(body)) for name, answer in entry_points.items()}
        wrong = sorted(name for name, got in answers.items() if got is not accepted)
        if wrong:
            disagreements.append(f"{case_id}: expected {'accept' if accepted else 'refuse'}, {wrong} did not")
    assert not disagreements, "\n".join(disagreements)


def test_the_limits_come_from_the_environment_for_all(entry_points: dict[str, Any], clean_env) -> None:
    """MAX_NEW_TOKENS / MAX_BATCH_SIZE / MAX_INPUT_CHARS: the endpoint's limits, read in one place by all five."""
    clean_env.setenv("MAX_NEW_TOKENS", "1024")
    clean_env.setenv("MAX_BATCH_SIZE", "2")
    clean_env.setenv("MAX_INPUT_CHARS", "10")
    table = [
        (P(max_new_tokens=1024), True),
        (P(max_new_tokens=1025), False),
        ({"inputs": ["a", "b"]}, True),
        ({"inputs": ["a", "b", "c"]}, False),
        ({"inputs": "x" * 10}, True),
        ({"inputs": "x" * 11}, False),
    ]
    for body, accepted in table:
        answers = {name: answer(_bytes(body)) for name, answer in entry_points.items()}
        assert set(answers.values()) == {accepted}, (body if len(str(body)) < 80 else str(body)[:80], answers)


def test_the_table_covers_every_parameter() -> None:
    """Each parameter of the contract has a refused case for a wrong type and for its bounds; a parameter added
    to request_contract.PARAMETERS without cases here fails."""
    import request_contract

    refused = {case_id.split("-")[0] for case_id, _, accepted in CASES if not accepted}
    assert set(request_contract.PARAMETERS) <= refused
    for name in request_contract.PARAMETERS:
        assert name in AT_UPPER_BOUNDS["parameters"] and name in AT_LOWER_BOUNDS["parameters"], name


def test_the_byoc_typed_parameters_are_the_contracts() -> None:
    import request_contract
    from systems.byoc_server.contract import GenerationParameters, parse_request

    assert set(GenerationParameters.model_fields) == set(request_contract.PARAMETERS)
    given = parse_request({"inputs": "a", "parameters": {"seed": 3}}).parameters
    assert given.model_fields_set == {"seed"} and given.max_new_tokens == request_contract.DEFAULT_MAX_NEW_TOKENS


def test_the_error_shape_is_one_for_all(entry_points: dict[str, Any], clean_env) -> None:
    import request_contract

    err = request_contract.RequestError("parameters.top_k must be between 0 and 1000, got -1")
    assert request_contract.error_body(err) == {"error": err.message, "error_type": "validation"}
    assert isinstance(err, ValueError)  # the HF toolkit answers a ValueError from input_fn/predict_fn with 400


def test_the_module_ships_alone() -> None:
    """stdlib only and Python 3.10 syntax: it runs in the Lambda runtime, the HF container, the DJL images (3.10)
    and our own images, beside the code that imports it."""
    source = CONTRACT.read_text()
    tree = ast.parse(source, feature_version=(3, 10))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {
        node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    for dockerfile in ("deepspeed_byoc", "tensorrt_byoc"):  # the build context is the repository root
        text = (ROOT / "systems" / dockerfile / "container" / "Dockerfile").read_text()
        assert "COPY request_contract.py /opt/program/request_contract.py" in text, dockerfile


def test_a_client_transport_key_is_ignored_and_said_in_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    """What LiteLLM's sagemaker/ sends, {"inputs", "parameters": {..., "sagemaker_base_url"}}: answered as without
    the key, which a log line names (as vLLM logs a field it ignores); a key that changes the answer is still refused."""
    import request_contract

    body = {"inputs": "Hello", "parameters": {"max_new_tokens": 4, "sagemaker_base_url": "http://x/invocations"}}
    with caplog.at_level("WARNING", logger="request_contract"):
        assert request_contract.validate_request(body) == (["Hello"], {"max_new_tokens": 4})
    assert "present in the request but ignored: ['parameters.sagemaker_base_url']" in caplog.text
    with pytest.raises(request_contract.RequestError, match=r"unknown parameters \['stop'\]"):
        request_contract.validate_request({"inputs": "Hello", "parameters": {"stop": ["x"], "sagemaker_base_url": "u"}})
