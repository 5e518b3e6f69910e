"""The one manifest model (artifact.manifest.Manifest): load, verify and the content hash, as publish and the
stacks read it; and the one AWS account helper (deployment.aws)."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import NoCredentialsError

from artifact.manifest import Manifest, ManifestError, write_manifest
from deployment.aws import AccountError, account_mismatch, caller_account


@pytest.fixture
def built(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.safetensors").write_bytes(b"\0" * 1000)
    write_manifest(tmp_path, progress=False, system="hf-fastload", dtype="fp16")
    return tmp_path


def test_load_reads_what_write_manifest_wrote(built):
    manifest = Manifest.load(built)  # the directory or the file
    assert manifest == Manifest.load(built / "manifest.json", require_files=True)
    assert (manifest.system, manifest.dtype, manifest.total_bytes) == ("hf-fastload", "fp16", 1000 + 22)
    assert [f.path for f in manifest.files] == ["config.json", "weights/model.safetensors"]
    assert manifest.computed_content_hash() == manifest.content_hash
    assert manifest.verify(built) == []


def test_verify_names_each_changed_file(built):
    manifest = Manifest.load(built)
    (built / "config.json").write_text('{"model_type": "gpt3"}')  # same size, other bytes
    (built / "weights" / "model.safetensors").unlink()
    first, second = manifest.verify(built)
    assert first.startswith("config.json: sha256 ") and first.endswith("...") and "the manifest says" in first
    assert second == "weights/model.safetensors: missing"
    (built / "config.json").write_text("{}")
    assert manifest.verify(built)[0] == "config.json: size 2 bytes, the manifest says 22"


@pytest.mark.parametrize(
    ("document", "require_files", "message"),
    [
        ("{not json", False, "is not valid JSON"),
        ("[]", False, "is not a JSON object"),
        ({"files": []}, False, "lacks `files` or `content_hash`"),
        ({"content_hash": "a" * 64}, True, "lacks `files` or `content_hash`"),
        ({"content_hash": "a" * 64, "files": [{"path": "x"}]}, False, "lacks path, size or sha256"),
        ({"content_hash": "a" * 64, "files": [{"path": "../x", "size": 1, "sha256": "b"}]}, False, "plain relative"),
    ],
)
def test_load_refuses_a_broken_manifest(tmp_path, document, require_files, message):
    (tmp_path / "manifest.json").write_text(document if isinstance(document, str) else json.dumps(document))
    with pytest.raises(ManifestError, match=message):
        Manifest.load(tmp_path, require_files=require_files)


def test_synth_reads_a_manifest_without_files(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"system": "s", "dtype": "fp16", "content_hash": "c" * 64}))
    manifest = Manifest.load(tmp_path)
    assert manifest.files == () and manifest.total_bytes is None and manifest.content_hash == "c" * 64


def test_missing_manifest(tmp_path):
    with pytest.raises(ManifestError, match="does not exist: build the endpoint first"):
        Manifest.load(tmp_path)


class _Sts:
    def __init__(self, answer):
        self.answer = answer

    def get_caller_identity(self):
        if isinstance(self.answer, Exception):
            raise self.answer
        return {"Account": self.answer}


class _Session:
    def __init__(self, answer):
        self.answer = answer

    def client(self, name, region_name=None):
        assert name == "sts"
        return _Sts(self.answer)


def test_caller_account_and_its_errors():
    assert caller_account(_Session("123456789012")) == "123456789012"
    with pytest.raises(AccountError, match="no AWS credentials"):
        caller_account(_Session(NoCredentialsError()))


def test_account_mismatch_names_both_accounts():
    class Env:
        account = "111122223333"

    class EnvironmentPlan:
        environment, environment_name = Env(), "dev"

    assert account_mismatch(EnvironmentPlan(), "111122223333") is None
    assert account_mismatch(EnvironmentPlan(), "123456789012") == (
        "environment 'dev' is account 111122223333, but the credentials are account 123456789012; "
        "use credentials of 111122223333"
    )
