"""The Hub mirror (local_emulator/hub_mirror.py) answers huggingface_hub 2.4.0's own calls as the Hub does: the model
API with sizes and LFS sha256, downloads, safetensors headers by range, and the errors the library turns into its
exceptions. Real server on 127.0.0.1, real library, a tiny model made offline."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import huggingface_hub.constants
import pytest
from helpers import ROOT
from hermetic import python_path_env
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from local_emulator.hub_mirror import LFS_THRESHOLD, HubMirror, add_repo, write_sparse_safetensors

TOKEN = "hf_mirror_token"


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory, tiny_chat_models: dict[str, Path]) -> Path:
    root = tmp_path_factory.mktemp("hub")
    add_repo(root, "acme/tiny-qwen3", tiny_chat_models["qwen3"])
    add_repo(root, "acme/gated-qwen3", tiny_chat_models["qwen3"])
    big = add_repo(root, "acme/sparse", tiny_chat_models["qwen3"])
    write_sparse_safetensors(big / "model.safetensors", {"w": ("BF16", (65536, 65536))})
    return root


@pytest.fixture
def mirror(repos: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    # The suite runs with the Hub offline (tests/hermetic.py); these tests talk to the mirror on loopback only.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    with HubMirror(repos, token=TOKEN, gated=["acme/gated-qwen3"]) as running:
        yield running


def test_model_info_lists_sizes_lfs_sha256_and_a_commit_that_main_and_the_sha_both_resolve(mirror, tiny_chat_models):
    api = HfApi(endpoint=mirror.url)
    info = api.model_info("acme/tiny-qwen3", files_metadata=True)
    assert re.fullmatch(r"[0-9a-f]{40}", info.sha)
    siblings = {s.rfilename: s for s in info.siblings}
    source = tiny_chat_models["qwen3"]
    weights = source / "model.safetensors"
    assert siblings["model.safetensors"].size == weights.stat().st_size
    assert siblings["model.safetensors"].lfs.sha256 == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert siblings["config.json"].lfs is None
    assert siblings["config.json"].size == (source / "config.json").stat().st_size
    assert ".gitattributes" in siblings
    pinned = api.model_info("acme/tiny-qwen3", revision=info.sha, files_metadata=True)
    assert pinned.sha == info.sha
    # The same content gives the same commit; another repository of the same files, the same too.
    assert api.model_info("acme/gated-qwen3").sha == info.sha


def test_a_changed_file_makes_a_new_commit(tmp_path, tiny_chat_models, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    folder = add_repo(tmp_path, "acme/changing", tiny_chat_models["qwen3"])
    with HubMirror(tmp_path) as mirror:
        before = mirror.commit_of("acme/changing")
        (folder / "generation_config.json").write_text('{"do_sample": false}')
        after = HfApi(endpoint=mirror.url).model_info("acme/changing").sha
    assert before != after


def test_hf_hub_download_and_snapshot_download_get_the_same_bytes(mirror, tiny_chat_models, tmp_path):
    source = tiny_chat_models["qwen3"]
    path = hf_hub_download("acme/tiny-qwen3", "tokenizer.json", endpoint=mirror.url, local_dir=tmp_path / "one")
    assert Path(path).read_bytes() == (source / "tokenizer.json").read_bytes()
    # An LFS file goes through the 302 to the CDN listener, as on the Hub.
    path = hf_hub_download("acme/tiny-qwen3", "model.safetensors", endpoint=mirror.url, local_dir=tmp_path / "one")
    assert Path(path).read_bytes() == (source / "model.safetensors").read_bytes()
    assert any(status == 302 for _, url, status in mirror.requests if url.endswith("model.safetensors"))
    snapshot = Path(snapshot_download("acme/tiny-qwen3", endpoint=mirror.url, local_dir=tmp_path / "all"))
    for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
        assert (snapshot / name).read_bytes() == (source / name).read_bytes()


def test_safetensors_headers_are_read_by_range_and_counted(mirror):
    api = HfApi(endpoint=mirror.url)
    mirror.reset_counters()
    metadata = api.get_safetensors_metadata("acme/sparse")
    (shard,) = metadata.files_metadata.values()
    assert shard.tensors["w"].shape == [65536, 65536]
    assert shard.tensors["w"].dtype == "BF16"
    # The library asks for the first 100,000 bytes (hf_api.py parse_safetensors_file_metadata): an 8 GiB file, 100 kB.
    served = mirror.bytes_served["acme/sparse/model.safetensors"]
    assert served == 100_001
    size = next(s.size for s in api.model_info("acme/sparse", files_metadata=True).siblings if s.lfs)
    assert size > 65536 * 65536 * 2
    assert served < size / 10_000


def test_range_requests_answer_206_with_content_range(mirror, tiny_chat_models):
    url = f"{mirror.url}/acme/tiny-qwen3/resolve/main/tokenizer.json"
    data = (tiny_chat_models["qwen3"] / "tokenizer.json").read_bytes()
    request = urllib.request.Request(url, headers={"Range": "bytes=10-19"})
    with urllib.request.urlopen(request) as response:
        assert response.status == 206
        assert response.headers["Content-Range"] == f"bytes 10-19/{len(data)}"
        assert response.read() == data[10:20]
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(url, headers={"Range": f"bytes={len(data)}-"}))
    assert err.value.code == 416


def test_head_carries_the_headers_the_library_reads(mirror):
    api = HfApi(endpoint=mirror.url)
    info = api.model_info("acme/tiny-qwen3", files_metadata=True)
    weights = next(s for s in info.siblings if s.rfilename == "model.safetensors")
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    meta = get_hf_file_metadata(hf_hub_url("acme/tiny-qwen3", "model.safetensors", endpoint=mirror.url))
    assert (meta.commit_hash, meta.etag, meta.size) == (info.sha, weights.lfs.sha256, weights.size)
    assert meta.location.startswith(mirror.cdn_url)
    small = get_hf_file_metadata(hf_hub_url("acme/tiny-qwen3", "config.json", endpoint=mirror.url))
    config = next(s for s in info.siblings if s.rfilename == "config.json")
    assert (small.commit_hash, small.etag, small.size) == (info.sha, config.blob_id, config.size)


def test_gated_repo_needs_the_token(mirror, tmp_path):
    with pytest.raises(GatedRepoError):
        hf_hub_download("acme/gated-qwen3", "config.json", endpoint=mirror.url, local_dir=tmp_path, token=False)
    # Its model card and file list are public, as on the Hub.
    assert HfApi(endpoint=mirror.url).model_info("acme/gated-qwen3", token=False).gated == "manual"
    path = hf_hub_download("acme/gated-qwen3", "config.json", endpoint=mirror.url, local_dir=tmp_path, token=TOKEN)
    assert json.loads(Path(path).read_text())["model_type"] == "qwen3"


def test_unknown_repo_revision_and_file(mirror, tmp_path):
    api = HfApi(endpoint=mirror.url)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("acme/nothing-here", token=False)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("acme/nothing-here", token=TOKEN)  # 404 with a token, 401 without: both this error
    with pytest.raises(RevisionNotFoundError):
        api.model_info("acme/tiny-qwen3", revision="v9")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("acme/tiny-qwen3", "config.json", revision="0" * 40, endpoint=mirror.url, local_dir=tmp_path)
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download("acme/tiny-qwen3", "no-such.json", endpoint=mirror.url, local_dir=tmp_path)
    assert not api.file_exists("acme/tiny-qwen3", "no-such.json")


def test_a_sparse_checkpoint_costs_no_disk(repos):
    weights = repos / "acme" / "sparse" / "model.safetensors"
    assert weights.stat().st_size > 8 * 1024**3
    assert weights.stat().st_blocks * 512 < 1024 * 1024
    assert weights.stat().st_size > LFS_THRESHOLD


def test_cli_prints_the_endpoint_and_serves(repos):
    process = subprocess.Popen(
        [sys.executable, "-m", "local_emulator.hub_mirror", "--root", str(repos)],
        cwd=ROOT,
        env=python_path_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert "acme/tiny-qwen3" in first
        url = process.stdout.readline().strip().removeprefix("export HF_ENDPOINT=")
        with urllib.request.urlopen(f"{url}/api/models/acme/tiny-qwen3") as response:
            assert json.loads(response.read())["id"] == "acme/tiny-qwen3"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_cli_refuses_a_missing_root(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "local_emulator.hub_mirror", "--root", str(tmp_path / "absent")],
        cwd=ROOT,
        env=python_path_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "not a directory" in result.stderr and "Traceback" not in result.stderr
