"""A Hugging Face Hub model read from its metadata only: the commit a revision resolves to, each file's size and
LFS sha256 (the Hub's model API), the small files the engines read (downloaded into a folder the caller names,
never the Hub cache), and each safetensors header (HTTP range requests). No weight byte is written anywhere.

Every call is huggingface_hub 2.4.0's own (HfApi.model_info(files_metadata=True), hf_hub_url, get_session,
build_hf_headers, hf_raise_for_status), against HF_ENDPOINT as it is when the plan runs (default
https://huggingface.co), with the token huggingface_hub finds (HF_TOKEN, or `hf auth login`'s). The Hub's answers
become HubError naming the model, the revision and what to set. Why and the measured bytes: docs/design/weights.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_ENDPOINT = "https://huggingface.co"
# The first request for a safetensors header asks for this much: the 8-byte length and, for most checkpoints, the
# whole JSON header (a Qwen3-32B shard's is about 40 kB); a longer header takes a second request for the rest.
HEADER_PROBE_BYTES = 64 * 1024
# safetensors' own bound on the header (safetensors/src/tensor.rs MAX_HEADER_SIZE), as facts/models.py reads it.
MAX_HEADER_BYTES = 100_000_000
# A file the Hub does not store in LFS has no sha256 in the API; one of these (a small index or config) is hashed
# from its bytes, held in memory. Above this, a non-LFS file is refused (the Hub refuses non-LFS files of 10 MiB+).
INLINE_HASH_LIMIT = 10 * 1024 * 1024
TIMEOUT_S = 30.0


class HubError(Exception):
    """The Hub cannot give what the plan needs; the message says which model, revision and what to do."""


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int
    sha256: str | None  # the LFS sha256 from the API; None for a file kept in git (hashed when read)
    lfs: bool


@dataclass
class HubModel:
    """One model repository at one commit: its files, the endpoint and token that read it."""

    repo_id: str
    revision: str  # as asked ("main", a tag, a sha)
    commit: str  # the 40-hex sha it resolved to
    endpoint: str
    files: dict[str, HubFile]
    gated: bool = False
    token: str | None = field(default=None, repr=False)
    bytes_read: int = 0  # response bytes this plan read from the Hub (API answers, metadata files, header ranges)

    def url(self, path: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo_id, path, revision=self.commit, endpoint=self.endpoint)

    def where(self) -> str:
        return f"model {self.repo_id!r} at revision {self.revision!r} (commit {self.commit[:12]}) on {self.endpoint}"

    def download(self, path: str, target: Path) -> str:
        """Write the file into `target` (a metadata file: small), checked against the API's size (and sha256 for an
        LFS one); returns its sha256."""
        expected = self.files[path]
        data = self._get(path)
        digest = hashlib.sha256(data).hexdigest()
        if len(data) != expected.size or (expected.sha256 is not None and digest != expected.sha256):
            raise HubError(
                f"{self.where()}: {path} came back as {len(data)} bytes with sha256 {digest[:12]}..., the Hub's API "
                f"lists {expected.size} bytes" + (f" and {expected.sha256[:12]}..." if expected.sha256 else "")
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return digest

    def sha256_of_git_file(self, path: str) -> str:
        """The sha256 of a file the Hub keeps in git (no LFS sha256 in its API): read into memory, never written."""
        if self.files[path].size > INLINE_HASH_LIMIT:
            raise HubError(f"{self.where()}: {path} is not in LFS yet {self.files[path].size:,} bytes; no sha256")
        return hashlib.sha256(self._get(path)).hexdigest()

    def safetensors_header(self, path: str) -> tuple[int, dict[str, Any]]:
        """(header length, header JSON) of one safetensors file, by range requests; HubError when it is not one."""
        size = self.files[path].size
        head = self._get(path, 0, min(size, HEADER_PROBE_BYTES) - 1) if size else b""
        if len(head) < 8:
            raise HubError(f"{self.where()}: {path} is {size} bytes, too short for a safetensors header")
        (length,) = struct.unpack("<Q", head[:8])
        if length > min(MAX_HEADER_BYTES, size - 8):
            raise HubError(
                f"{self.where()}: {path}: the header length field says {length:,} bytes, the file has {size - 8:,} "
                "after it: not a readable safetensors file"
            )
        raw = head[8 : 8 + length]
        if len(raw) < length:
            raw += self._get(path, 8 + len(raw), 8 + length - 1)
        try:
            header = json.loads(raw.decode("utf-8"))
        except ValueError as err:
            raise HubError(f"{self.where()}: {path}: the safetensors header is not UTF-8 JSON ({err})") from None
        if not isinstance(header, dict):
            raise HubError(f"{self.where()}: {path}: the safetensors header is not a JSON object")
        return length, header

    def _get(self, path: str, first: int | None = None, last: int | None = None) -> bytes:
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        headers = build_hf_headers(token=self.token)
        if first is not None:
            headers["Range"] = f"bytes={first}-{last}"
        with _hub_errors(self.repo_id, self.revision, self.endpoint, self.gated):
            response = get_session().get(self.url(path), headers=headers, timeout=TIMEOUT_S)
            hf_raise_for_status(response)
        data = response.content
        if first is not None and response.status_code != 206 and len(data) > (last or 0) - first + 1:
            # A server that ignores Range sends the whole file: refuse rather than read weights.
            raise HubError(f"{self.where()}: {path}: the server ignored the byte range (HTTP {response.status_code})")
        self.bytes_read += len(data)
        return data


def endpoint_now() -> str:
    """HF_ENDPOINT as it is now (huggingface_hub reads it once, at import), without a trailing slash."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def open_hub_model(repo_id: str, revision: str | None = None) -> HubModel:
    """Resolve `revision` (default main) to its commit and list the files with sizes and LFS sha256."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.utils import get_token

    endpoint = endpoint_now()
    asked = revision or "main"
    if constants.is_offline_mode() or _true(os.environ.get("HF_HUB_OFFLINE")):
        raise HubError(
            f"model {repo_id!r} is a Hugging Face Hub id, and HF_HUB_OFFLINE is set: the plan reads the model's "
            f"metadata from the Hub ({endpoint}); unset HF_HUB_OFFLINE, or point `model:` at a local directory"
        )
    token = get_token()
    with _hub_errors(repo_id, asked, endpoint, gated=False):
        info = HfApi(endpoint=endpoint).model_info(
            repo_id, revision=asked, files_metadata=True, token=token or False, timeout=TIMEOUT_S
        )
    if not info.sha or len(info.sha) != 40:
        raise HubError(f"model {repo_id!r} at revision {asked!r}: the Hub at {endpoint} returned no commit sha")
    files = {}
    for sibling in info.siblings or []:
        if sibling.size is None:
            raise HubError(f"model {repo_id!r}: the Hub at {endpoint} listed {sibling.rfilename} without its size")
        lfs = sibling.lfs is not None
        files[sibling.rfilename] = HubFile(
            sibling.rfilename, int(sibling.size), sibling.lfs.sha256 if sibling.lfs is not None else None, lfs
        )
    return HubModel(repo_id, asked, info.sha, endpoint, files, bool(info.gated), token)


def _true(value: str | None) -> bool:
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


class _hub_errors:
    """Turn huggingface_hub's and the network's exceptions into HubError, with what to set."""

    def __init__(self, repo_id: str, revision: str, endpoint: str, gated: bool) -> None:
        self.repo_id, self.revision, self.endpoint, self.gated = repo_id, revision, endpoint, gated

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: object) -> None:
        if err is None or isinstance(err, HubError):
            return
        from huggingface_hub import errors

        model = f"model {self.repo_id!r}"
        where = f"the Hugging Face Hub at {self.endpoint}"
        token_hint = (
            "set HF_TOKEN (or run `hf auth login`) to a token with access for the plan, and `hub_token_secret:` "
            "(a Secrets Manager secret holding that token) for the staging job"
        )
        if isinstance(err, errors.GatedRepoError):
            message = (
                f"{model} is gated on {where} and this plan has no token with access to it "
                f"(HTTP {_status(err)}): accept its terms on the model's page, then {token_hint}"
            )
        elif isinstance(err, errors.RevisionNotFoundError):
            message = f"{model} has no revision {self.revision!r} on {where}: give a branch, tag or commit it has"
        elif isinstance(err, errors.RepositoryNotFoundError):
            message = (
                f"{model} (revision {self.revision!r}) is not on {where}: check the id; a private model needs a "
                f"token: {token_hint}"
            )
        elif isinstance(err, errors.OfflineModeIsEnabled):
            message = f"{model}: HF_HUB_OFFLINE is set; unset it to plan a Hub model, or build from a local directory"
        elif isinstance(err, errors.HfHubHTTPError) and _status(err) in {401, 403}:
            message = f"{where} refused the token for {model} (HTTP {_status(err)}): {token_hint}"
        elif isinstance(err, errors.HfHubHTTPError):
            message = f"{where} answered HTTP {_status(err)} for {model}: {str(err).splitlines()[0]}"
        elif _is_network(err):
            message = (
                f"cannot reach {where} to plan {model} ({type(err).__name__}: {str(err)[:200]}): check the network "
                "or HF_ENDPOINT, or point `model:` at a local directory"
            )
        else:
            return
        raise HubError(message) from None


def _status(err: BaseException) -> int | None:
    response = getattr(err, "response", None)
    return getattr(response, "status_code", None)


def _is_network(err: BaseException) -> bool:
    import httpx2  # huggingface_hub 2.4's HTTP client (a fork of httpx)

    return isinstance(err, (httpx2.TransportError, OSError))


def read_headers(
    model: HubModel, paths: Iterable[str], progress: Callable[[str], None] | None = None
) -> dict[str, tuple[int, dict[str, Any]]]:
    """Every listed safetensors file's header, by range requests, in order (a shard is ~0.1 ms of a 1 Gbit/s link)."""
    headers = {}
    for path in paths:
        headers[path] = model.safetensors_header(path)
        if progress is not None:
            progress(path)
    return headers
