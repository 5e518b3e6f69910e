"""The AWS vLLM DLC's SM_VLLM_* -> argv rules (local_runtime/vllm_args.py), case by case from its
scripts/docker/vllm/sagemaker_args.py (aws/deep-learning-containers 19aa4751eb)."""

from __future__ import annotations

import pytest

from local_runtime.vllm_args import build_args


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SM_VLLM_MAX_MODEL_LEN": "512"}, ["--max-model-len", "512"]),
        ({"SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": " TRUE "}, ["--enable-auto-tool-choice"]),
        ({"SM_VLLM_ENFORCE_EAGER": "False"}, []),
        ({"SM_VLLM_TRUST_REMOTE_CODE": ""}, ["--trust-remote-code"]),
        ({"SM_VLLM_SERVED_MODEL_NAME": '["a", "b"]'}, ["--served-model-name", "a", "b"]),
        ({"SM_VLLM_LORA_MODULES": "[]"}, []),
        ({"SM_VLLM_X": '[1, true, null, {"k": [1, 2]}]'}, ["--x", "1", "true", "", '{"k":[1,2]}']),
        ({"SM_VLLM_X": "[not json]"}, ["--x", "[not json]"]),
        ({"SM_VLLM_SPECULATIVE_CONFIG": '{"method": "ngram"}'}, ["--speculative-config", '{"method": "ngram"}']),
        ({"SM_VLLM_LORA_MODULES": '{"name": "a"} {"name": "b"}'}, ["--lora-modules", '{"name":"a"}', '{"name":"b"}']),
        (
            {"SM_VLLM_CHAT_TEMPLATE": "{% for m in messages %}{% endfor %}"},
            ["--chat-template", "{% for m in messages %}{% endfor %}"],
        ),
        # vLLM reads these with json.loads (--middleware appends): the array stays one token
        ({"SM_VLLM_ALLOWED_ORIGINS": '["*"]'}, ["--allowed-origins", '["*"]']),
        ({"SM_VLLM_MIDDLEWARE": '["a.B"]'}, ["--middleware", '["a.B"]']),
        ({"OTHER": "1", "SM_VLLM_B": "2", "SM_VLLM_A": "1"}, ["--a", "1", "--b", "2"]),
    ],
)
def test_each_rule_of_the_entrypoint(tmp_path, env, expected):
    assert build_args(env, tmp_path / "absent") == ["--port", "8080", *expected]


def test_the_model_is_the_mounted_directory_unless_sm_vllm_model_names_one(tmp_path):
    empty, model = tmp_path / "empty", tmp_path / "model"
    empty.mkdir()
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert build_args({}, model) == ["--port", "8080", "--model", str(model)]
    assert build_args({}, empty) == ["--port", "8080"]
    assert build_args({"HF_MODEL_ID": "org/m"}, empty) == ["--port", "8080", "--model", "org/m"]
    assert build_args({"SM_VLLM_MODEL": "s3://b/p/"}, model) == ["--port", "8080", "--model", "s3://b/p/"]
