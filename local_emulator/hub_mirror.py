"""A Hugging Face Hub mirror on 127.0.0.1: model repositories made offline, served over the part of the Hub's HTTP
API that huggingface_hub 2.4.0 calls, so a build, a plan or a staging job runs against it with only HF_ENDPOINT set.

What it answers, as the Hub does (read from huggingface_hub 2.4.0: hf_api.py model_info / list_repo_tree /
parse_safetensors_file_metadata, file_download.py get_hf_file_metadata / http_get, utils/_http.py
hf_raise_for_status and _httpx2_follow_hub_redirects_with_backoff):
- `GET /api/models/{repo}` and `/api/models/{repo}/revision/{rev}`: id, sha (the commit), gated, siblings (with
  `?blobs=true`: size, blobId and, for LFS files, `lfs: {sha256, size, pointerSize}`);
- `GET /api/models/{repo}/tree/{rev}[/{path}]` (snapshot_download's listing; `recursive` honoured);
- `HEAD`/`GET /{repo}/resolve/{rev}/{path}`, with a single HTTP Range (206) and the headers the library reads:
  X-Repo-Commit, ETag (the git blob sha1) or X-Linked-Etag (the LFS sha256), X-Linked-Size, Content-Length,
  Accept-Ranges. An LFS file answers 302 to a second listener on another port, as the Hub sends LFS files to its
  CDN host: the library reads the file's metadata from the 302 itself and follows it only to GET the bytes
  (a redirect to another origin is not followed by its HEAD, and httpx drops the Authorization header there, so the
  CDN URL carries its own signature, as the Hub's signed CDN URLs do);
- errors with the Hub's `X-Error-Code`/`X-Error-Message` headers, which huggingface_hub turns into its exceptions:
  GatedRepo (401 without a token, 403 with a token that has no access) -> GatedRepoError, RepoNotFound (401 without
  a token, 404 with one) -> RepositoryNotFoundError, RevisionNotFound -> RevisionNotFoundError, EntryNotFound ->
  RemoteEntryNotFoundError, a token the mirror does not know -> 401 "Invalid credentials in Authorization header".

Repositories live under `root/<org>/<name>/` as plain files (add_repo lays one from a model directory). Which files
are LFS follows the Hub: the default .gitattributes patterns (*.safetensors, *.bin, ...) and any file of 10 MiB or
more (the Hub refuses larger non-LFS files). A repository's commit is the sha1 of its file list (path, size, sha256
or git blob id), so the same content gives the same commit and any change a new one; "main" and that sha resolve.
A repository may ship `.mirror-lfs.json` ({path: {"sha256": ..., "size": ...}}) declaring the sha256 of files it does
not want hashed: sparse files (header + a hole, write_sparse_safetensors) stand for a 65 GB checkpoint at no disk or
hashing cost. Every byte of every response body is counted per file (`bytes_served`), so a test measures what a
client read.

Run alone: `python -m local_emulator.hub_mirror --root DIR [--add org/name=MODEL_DIR] [--port N] [--token T]
[--gated org/name]`; it prints the HF_ENDPOINT to export.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import socket
import struct
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

SIDECAR = ".mirror-lfs.json"
# The Hub refuses a non-LFS file of 10 MiB or more (git push limit, hf.co/docs/hub/repositories-getting-started).
LFS_THRESHOLD = 10 * 1024 * 1024
# The patterns of the .gitattributes the Hub writes into every new repository (the ones a model repo meets).
LFS_PATTERNS = (
    "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.mlmodel", "*.model",
    "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb", "*.pickle", "*.pkl", "*.pt", "*.pth",
    "*.rar", "*.safetensors", "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*",
)  # fmt: skip
GITATTRIBUTES = "".join(f"{pattern} filter=lfs diff=lfs merge=lfs -text\n" for pattern in LFS_PATTERNS)
CHUNK = 1024 * 1024
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def is_lfs(path: str, size: int) -> bool:
    name = path.rsplit("/", 1)[-1]
    return size >= LFS_THRESHOLD or any(fnmatch.fnmatch(name, pattern) for pattern in LFS_PATTERNS)


def git_blob_sha1(data: bytes) -> str:
    """git's object id of a blob (what the Hub reports as blobId / oid, and as ETag of a non-LFS file)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file a repository stores in place of an LFS file (git-lfs spec v1)."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass(frozen=True)
class MirrorFile:
    path: str
    disk: Path
    size: int
    blob_id: str  # git blob sha1 of the content, or of the LFS pointer
    sha256: str | None  # LFS files only

    @property
    def lfs(self) -> bool:
        return self.sha256 is not None

    def sibling(self, blobs: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {"rfilename": self.path}
        if blobs:
            entry |= {"size": self.size, "blobId": self.blob_id}
            if self.sha256 is not None:
                pointer = len(lfs_pointer(self.sha256, self.size))
                entry["lfs"] = {"sha256": self.sha256, "size": self.size, "pointerSize": pointer}
        return entry

    def tree_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "oid": self.blob_id, "size": self.size, "path": self.path}
        if self.sha256 is not None:
            pointer = len(lfs_pointer(self.sha256, self.size))
            entry["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": pointer}
        return entry

    @property
    def etag(self) -> str:
        return self.sha256 or self.blob_id


@dataclass(frozen=True)
class MirrorRepo:
    repo_id: str
    commit: str
    files: dict[str, MirrorFile]


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


class _Repos:
    """The repositories under root, scanned on request and cached while their files' (size, mtime) stay the same."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple, MirrorRepo]] = {}
        self._hashes: dict[tuple[str, int, int], str] = {}

    def get(self, repo_id: str) -> MirrorRepo | None:
        if not _REPO_ID.match(repo_id) or any(part in {".", ".."} for part in repo_id.split("/")):
            return None
        folder = self.root / repo_id
        if not folder.is_dir():
            return None
        listing = [
            (name, p)
            for p in sorted(folder.rglob("*"))
            if p.is_file() and (name := _rel(p, folder)) != SIDECAR and not name.startswith((".git/", ".cache/"))
        ]
        sidecar_path = folder / SIDECAR
        signature = tuple((name, p.stat().st_size, p.stat().st_mtime_ns) for name, p in listing) + (
            (SIDECAR, sidecar_path.stat().st_mtime_ns) if sidecar_path.is_file() else (),
        )
        with self._lock:
            cached = self._cache.get(repo_id)
            if cached is not None and cached[0] == signature:
                return cached[1]
        declared = json.loads(sidecar_path.read_text()) if sidecar_path.is_file() else {}
        files: dict[str, MirrorFile] = {}
        for name, disk in listing:
            size = disk.stat().st_size
            if is_lfs(name, size):
                sha256 = self._lfs_sha256(name, disk, size, declared.get(name))
                files[name] = MirrorFile(name, disk, size, git_blob_sha1(lfs_pointer(sha256, size)), sha256)
            else:
                files[name] = MirrorFile(name, disk, size, git_blob_sha1(disk.read_bytes()), None)
        commit = hashlib.sha1(
            b"hub-mirror commit\n"
            + b"".join(f"{f.path}\0{f.size}\0{f.sha256 or f.blob_id}\n".encode() for f in files.values())
        ).hexdigest()
        repo = MirrorRepo(repo_id, commit, files)
        with self._lock:
            self._cache[repo_id] = (signature, repo)
        return repo

    def _lfs_sha256(self, name: str, disk: Path, size: int, declared: Any) -> str:
        if declared is not None:
            if (
                not isinstance(declared, dict)
                or declared.get("size") != size
                or not re.fullmatch(r"[0-9a-f]{64}", str(declared.get("sha256", "")))
            ):
                raise ValueError(
                    f"{disk.parent}/{SIDECAR}: entry {name!r} must be {{'sha256': 64 hex, 'size': {size}}} "
                    f"(the file's size on disk); got {declared!r}"
                )
            return str(declared["sha256"])
        key = (str(disk), size, disk.stat().st_mtime_ns)
        with self._lock:
            known = self._hashes.get(key)
        if known is None:
            known = _sha256_of(disk)
            with self._lock:
                self._hashes[key] = known
        return known


def _rel(path: Path, folder: Path) -> str:
    return path.relative_to(folder).as_posix()


def _parse_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """(start, end inclusive) of a single `bytes=` range, None for no header, "bad" for an unsatisfiable one."""
    if not header:
        return None
    match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if not match or (not match.group(1) and not match.group(2)):
        return "bad"
    first, last = match.groups()
    if not first:
        length = int(last)
        if length == 0:
            return "bad"
        return max(0, size - length), size - 1
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or end < start:
        return "bad"
    return start, end


class HubMirror:
    """The mirror's two listeners (the Hub and its CDN) on 127.0.0.1, in threads of this process.

    `with HubMirror(root, token="hf_x", gated=["org/gated"]) as mirror:` then point HF_ENDPOINT at `mirror.url`.
    `mirror.bytes_served` maps "repo_id/path" to the body bytes sent for that file (HEADs and API answers count
    under their own keys "api:..." so a test can tell them apart); `mirror.requests` lists (method, path, status).
    Both are updated before the bytes leave, so a client that has its answer sees them (a connection the client
    drops mid-body counts what was about to be written).
    """

    def __init__(
        self, root: Path, token: str | None = None, gated: Iterable[str] = (), host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.root = Path(root)
        self.token = token
        self.gated = frozenset(gated)
        self.repos = _Repos(self.root)
        self.bytes_served: dict[str, int] = {}
        self.requests: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        self._signing_key = secrets.token_bytes(32)
        # Fault injection for tests: answer every ranged request with the whole file (200), as a server without
        # range support would.
        self.ignore_range = False
        self._hub = ThreadingHTTPServer((host, port), _handler(self, cdn=False))
        self._cdn = ThreadingHTTPServer((host, 0), _handler(self, cdn=True))
        # Clients keep connections open (httpx pools them): stop() shuts each down, then joins its thread.
        self.connections: set[Any] = set()
        for server in (self._hub, self._cdn):
            server.daemon_threads = False
            server.block_on_close = True
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        host, port = self._hub.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def cdn_url(self) -> str:
        host, port = self._cdn.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> HubMirror:
        for server in (self._hub, self._cdn):
            # serve_forever checks for shutdown() every poll_interval (0.5 s by default): stop() waits for it twice
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="hub-mirror", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        if not self._threads:
            return  # never started, or stopped already
        self._threads, threads = [], self._threads
        for server in (self._hub, self._cdn):
            server.shutdown()
        with self._lock:
            open_connections = list(self.connections)
        for connection in open_connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for server in (self._hub, self._cdn):
            server.server_close()  # joins the connections' threads
        for thread in threads:
            thread.join(timeout=5)

    def __enter__(self) -> HubMirror:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- counters

    def count(self, key: str, n: int) -> None:
        with self._lock:
            self.bytes_served[key] = self.bytes_served.get(key, 0) + n

    def log(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.requests.append((method, path, status))

    def reset_counters(self) -> None:
        with self._lock:
            self.bytes_served.clear()
            self.requests.clear()

    def file_bytes(self, repo_id: str | None = None) -> int:
        """Body bytes sent of repository files (resolve and CDN), for one repository or all."""
        with self._lock:
            return sum(
                n
                for key, n in self.bytes_served.items()
                if not key.startswith("api:") and (repo_id is None or key.startswith(repo_id + "/"))
            )

    def total_bytes(self) -> int:
        with self._lock:
            return sum(self.bytes_served.values())

    def commit_of(self, repo_id: str) -> str:
        repo = self.repos.get(repo_id)
        if repo is None:
            raise KeyError(repo_id)
        return repo.commit

    # ---------------------------------------------------------------- signing (the CDN's URLs)

    def sign(self, repo_id: str, commit: str, path: str) -> str:
        message = f"{repo_id}\0{commit}\0{path}".encode()
        return hmac.new(self._signing_key, message, hashlib.sha256).hexdigest()

    def signature_ok(self, repo_id: str, commit: str, path: str, signature: str) -> bool:
        return hmac.compare_digest(self.sign(repo_id, commit, path), signature)


class _HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def _handler(mirror: HubMirror, cdn: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "hub-mirror"

        def setup(self) -> None:
            super().setup()
            with mirror._lock:
                mirror.connections.add(self.connection)

        def finish(self) -> None:
            with mirror._lock:
                mirror.connections.discard(self.connection)
            with suppress(OSError):
                super().finish()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the mirror's own log is mirror.requests

        def do_HEAD(self) -> None:
            self._dispatch(head=True)

        def do_GET(self) -> None:
            self._dispatch(head=False)

        def _dispatch(self, head: bool) -> None:
            split = urlsplit(self.path)
            try:
                if cdn:
                    self._cdn(split.path, parse_qs(split.query), head)
                elif split.path.startswith("/api/models/"):
                    self._api(split.path[len("/api/models/") :], parse_qs(split.query), head)
                elif "/resolve/" in split.path:
                    self._resolve(split.path.lstrip("/"), head)
                else:
                    raise _HubError(404, "Not Found")
            except _HubError as err:
                self._error(err, head)
            except (BrokenPipeError, ConnectionResetError):
                pass

        # ------------------------------------------------------------ auth and lookups

        def _bearer(self) -> str | None:
            header = self.headers.get("Authorization", "")
            return header[len("Bearer ") :].strip() if header.startswith("Bearer ") else None

        def _check_token(self) -> str | None:
            token = self._bearer()
            # A mirror with no token knows no user: a caller's token (one meant for the real Hub, say) is ignored.
            if token is not None and mirror.token is not None and token != mirror.token:
                raise _HubError(401, "Invalid credentials in Authorization header")
            return token

        def _repo(self, repo_id: str) -> MirrorRepo:
            token = self._check_token()
            repo = mirror.repos.get(repo_id)
            if repo is None:
                # The Hub answers 401 to an anonymous caller (a private repo's existence is not told), 404 otherwise.
                raise _HubError(404 if token else 401, "Repository not found", "RepoNotFound")
            return repo

        def _revision(self, repo: MirrorRepo, revision: str) -> None:
            if revision not in {"main", "refs/heads/main", repo.commit}:
                raise _HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

        def _file_access(self, repo: MirrorRepo) -> None:
            if repo.repo_id not in mirror.gated:
                return
            if self._bearer() is None:
                raise _HubError(
                    401,
                    f"Access to model {repo.repo_id} is restricted. You must have access to it and be authenticated "
                    "to access it. Please log in.",
                    "GatedRepo",
                )
            if mirror.token is None or self._bearer() != mirror.token:
                raise _HubError(403, f"Access to model {repo.repo_id} is restricted.", "GatedRepo")

        # ------------------------------------------------------------ /api/models/...

        def _api(self, rest: str, query: dict[str, list[str]], head: bool) -> None:
            rest = rest.rstrip("/")
            revision = "main"
            tree_path: str | None = None
            if "/tree/" in rest:
                repo_id, _, after = rest.partition("/tree/")
                revision, _, tree_path = after.partition("/")
                revision, tree_path = unquote(revision), unquote(tree_path)
            elif "/revision/" in rest:
                repo_id, _, revision = rest.partition("/revision/")
                revision = unquote(revision)
            else:
                repo_id = rest
            repo_id = unquote(repo_id)
            repo = self._repo(repo_id)
            self._revision(repo, revision)
            body: Any
            if tree_path is not None:
                recursive = query.get("recursive", ["false"])[0].lower() in {"1", "true"}
                body = _tree(repo, tree_path, recursive)
                if body is None:
                    raise _HubError(404, f"{tree_path} does not exist on {revision}", "EntryNotFound")
            else:
                blobs = query.get("blobs", ["false"])[0].lower() in {"1", "true"}
                body = {
                    "_id": repo.commit[:24],
                    "id": repo.repo_id,
                    "modelId": repo.repo_id,
                    "author": repo.repo_id.split("/")[0] if "/" in repo.repo_id else None,
                    "sha": repo.commit,
                    "private": False,
                    "gated": "manual" if repo.repo_id in mirror.gated else False,
                    "disabled": False,
                    "tags": [],
                    "siblings": [f.sibling(blobs) for f in repo.files.values()],
                }
            data = json.dumps(body).encode()
            self._send(200, data, {"Content-Type": "application/json; charset=utf-8"}, head, f"api:{repo_id}")

        # ------------------------------------------------------------ /{repo}/resolve/{rev}/{path}

        def _resolve(self, rest: str, head: bool) -> None:
            repo_id, _, after = rest.partition("/resolve/")
            revision, _, path = after.partition("/")
            repo_id, revision, path = unquote(repo_id), unquote(revision), unquote(path)
            repo = self._repo(repo_id)
            self._revision(repo, revision)
            self._file_access(repo)
            file = repo.files.get(path)
            if file is None:
                raise _HubError(404, "Entry not found", "EntryNotFound")
            headers = {"X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
            if file.lfs:
                signature = mirror.sign(repo.repo_id, repo.commit, path)
                location = f"{mirror.cdn_url}/repos/{quote(repo.repo_id)}/{repo.commit}/{quote(path)}?sig={signature}"
                headers |= {
                    "Location": location,
                    "X-Linked-Etag": f'"{file.sha256}"',
                    "X-Linked-Size": str(file.size),
                    "ETag": f'"{file.blob_id}"',
                }
                self._send(302, b"", headers, head, f"api:{repo_id}")
                return
            headers["ETag"] = f'"{file.blob_id}"'
            self._send_file(file, headers, head, f"{repo_id}/{path}")

        # ------------------------------------------------------------ the CDN listener

        def _cdn(self, url_path: str, query: dict[str, list[str]], head: bool) -> None:
            match = re.fullmatch(r"/repos/(.+)/([0-9a-f]{40})/(.+)", url_path)
            if match is None:
                raise _HubError(404, "Not Found")
            repo_id, commit, path = unquote(match.group(1)), match.group(2), unquote(match.group(3))
            if not mirror.signature_ok(repo_id, commit, path, query.get("sig", [""])[0]):
                raise _HubError(403, "Request signature does not match")
            repo = mirror.repos.get(repo_id)
            file = repo.files.get(path) if repo is not None and repo.commit == commit else None
            if file is None:
                raise _HubError(404, "Not Found")
            self._send_file(file, {"ETag": f'"{file.etag}"', "Accept-Ranges": "bytes"}, head, f"{repo_id}/{path}")

        # ------------------------------------------------------------ responses

        def _send_file(self, file: MirrorFile, headers: dict[str, str], head: bool, key: str) -> None:
            wanted = None if mirror.ignore_range else _parse_range(self.headers.get("Range"), file.size)
            if isinstance(wanted, str):  # "bad"
                self._send(416, b"", {**headers, "Content-Range": f"bytes */{file.size}"}, head, key)
                return
            start, end = (0, file.size - 1) if wanted is None else wanted
            length = max(0, end - start + 1)
            status = 200 if wanted is None else 206
            self.send_response(status)
            for name, value in {**headers, "Content-Type": "application/octet-stream"}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(length))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{file.size}")
            mirror.log(self.command, self.path, status)  # before the client can have the answer
            self.end_headers()
            if head or length == 0:
                return
            with file.disk.open("rb") as f:
                f.seek(start)
                left = length
                while left:
                    block = f.read(min(CHUNK, left))
                    if not block:
                        break
                    # Counted before it is sent: a client that has read it all may look at the counter at once.
                    mirror.count(key, len(block))
                    self.wfile.write(block)
                    left -= len(block)

        def _send(self, status: int, body: bytes, headers: Mapping[str, str], head: bool, key: str) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            mirror.log(self.command, self.path, status)  # before the client can have the answer
            self.end_headers()
            if not head and body:
                mirror.count(key, len(body))
                self.wfile.write(body)

        def _error(self, err: _HubError, head: bool) -> None:
            headers = {"Content-Type": "application/json; charset=utf-8", "X-Error-Message": err.message}
            if err.code:
                headers["X-Error-Code"] = err.code
            self._send(err.status, json.dumps({"error": err.message}).encode(), headers, head, "api:errors")

    return Handler


def _tree(repo: MirrorRepo, path: str, recursive: bool) -> list[dict[str, Any]] | None:
    prefix = f"{path.strip('/')}/" if path.strip("/") else ""
    if prefix and not any(name.startswith(prefix) for name in repo.files):
        return None
    entries: list[dict[str, Any]] = []
    folders: set[str] = set()
    for name, file in repo.files.items():
        if not name.startswith(prefix):
            continue
        inside = name[len(prefix) :]
        parts = inside.split("/")
        for depth in range(1, len(parts)):
            folder = prefix + "/".join(parts[:depth])
            if folder not in folders and (recursive or depth == 1):
                folders.add(folder)
                oid = hashlib.sha1(f"{repo.commit}\0{folder}".encode()).hexdigest()
                entries.append({"type": "directory", "oid": oid, "size": 0, "path": folder})
        if recursive or len(parts) == 1:
            entries.append(file.tree_entry())
    return entries


# ------------------------------------------------------------------------------------------- laying repositories


def add_repo(root: Path, repo_id: str, source_dir: Path, *, gitattributes: bool = True) -> Path:
    """Lay `source_dir`'s files as the repository `repo_id` under `root` (replacing one there); returns its folder.

    A `.gitattributes` like the one the Hub writes into new repositories is added (as a real repository has one).
    Files are copied; a sparse file keeps its holes only where the filesystem's copy does (use
    write_sparse_safetensors in the repository folder for huge test weights, with its sidecar entry).
    """
    if not _REPO_ID.match(repo_id):
        raise ValueError(f"repo_id {repo_id!r}: allowed 'name' or 'org/name' of letters, digits, '.', '_', '-'")
    source_dir = Path(source_dir)
    if not source_dir.is_dir():
        raise ValueError(f"source_dir {source_dir}: not a directory")
    folder = Path(root) / repo_id
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(source_dir, folder, ignore=shutil.ignore_patterns(".git", "__pycache__", ".cache"))
    if gitattributes and not (folder / ".gitattributes").exists():
        (folder / ".gitattributes").write_text(GITATTRIBUTES)
    return folder


def write_sparse_safetensors(
    path: Path,
    tensors: Mapping[str, tuple[str, Iterable[int]]],
    metadata: Mapping[str, str] | None = None,
    true_sha256: bool = False,
) -> str:
    """Write a safetensors file whose header is real and whose data is a hole (no disk: the filesystem stores no
    blocks for it, reads give zeros), declare it in its repository's sidecar and return the sha256 declared.

    With `true_sha256` the value is the content's real sha256 (the header, then the zeros hashed: about 1.5 GB/s of
    CPU), so a client that verifies what it streams (a staging job) accepts it; without, it is a fixed stand-in
    derived from the header and size, which costs nothing and serves any client that only reads metadata.
    `tensors` maps a name to (dtype, shape) in the order the data is laid; dtypes as safetensors names them.
    """
    sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
    header: dict[str, Any] = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        dims = [int(d) for d in shape]
        count = 1
        for d in dims:
            count *= d
        nbytes = count * sizes[dtype]
        header[name] = {"dtype": dtype, "shape": dims, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes
    prefix = struct.pack("<Q", len(raw)) + raw
    size = len(prefix) + offset
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.write(prefix)
        f.truncate(size)
    if true_sha256:
        digest = hashlib.sha256(prefix)
        zeros = bytes(8 * CHUNK)
        left = offset
        while left:
            step = min(left, len(zeros))
            digest.update(zeros[:step] if step < len(zeros) else zeros)
            left -= step
        sha256 = digest.hexdigest()
    else:
        sha256 = hashlib.sha256(b"sparse stand-in\0" + prefix + b"\0%d" % size).hexdigest()
    declare_lfs(path, sha256, size)
    return sha256


def declare_lfs(path: Path, sha256: str, size: int) -> None:
    """Record `path`'s sha256 in the sidecar of the repository folder holding it (the nearest .gitattributes, or
    the file's own folder)."""
    path = Path(path).resolve()
    folder = next((p for p in path.parents if (p / ".gitattributes").is_file()), path.parent)
    sidecar = folder / SIDECAR
    entries = json.loads(sidecar.read_text()) if sidecar.is_file() else {}
    entries[path.relative_to(folder).as_posix()] = {"sha256": sha256, "size": size}
    sidecar.write_text(json.dumps(entries, indent=1, sort_keys=True))


def iter_repos(root: Path) -> Iterator[str]:
    """The repository ids laid under root (org/name folders, or name folders holding files)."""
    root = Path(root)
    for first in sorted(p for p in root.iterdir() if p.is_dir()):
        if any(p.is_file() for p in first.iterdir()):
            yield first.name
        for second in sorted(p for p in first.iterdir() if p.is_dir()):
            if any(p.is_file() for p in second.iterdir()):
                yield f"{first.name}/{second.name}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local_emulator.hub_mirror",
        description="Serve model repositories under --root as a Hugging Face Hub on 127.0.0.1 (see the module's doc).",
    )
    parser.add_argument("--root", type=Path, required=True, help="folder of repositories: ROOT/<org>/<name>/files")
    parser.add_argument("--port", type=int, default=0, help="port of the Hub listener (default: a free one)")
    parser.add_argument("--token", default=None, help="the token that opens gated repositories (Bearer)")
    parser.add_argument("--gated", action="append", default=[], help="a repository id that needs the token")
    parser.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="ORG/NAME=DIR",
        help="lay the model directory DIR as repository ORG/NAME under --root first (add_repo)",
    )
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"hub_mirror: --root {args.root}: not a directory", file=sys.stderr)
        return 2
    for item in args.add:
        repo_id, _, source = item.partition("=")
        try:
            add_repo(args.root, repo_id, Path(source))
        except ValueError as err:
            print(f"hub_mirror: --add {item}: {err}", file=sys.stderr)
            return 2
    try:
        mirror = HubMirror(args.root, token=args.token, gated=args.gated, port=args.port)
    except OSError as err:
        print(f"hub_mirror: cannot listen on 127.0.0.1:{args.port}: {err.strerror}", file=sys.stderr)
        return 2
    with mirror:
        repos = list(iter_repos(args.root))
        print(f"hub mirror: {len(repos)} repositories under {args.root}: {', '.join(repos) or '(none)'}")
        print(f"export HF_ENDPOINT={mirror.url}", flush=True)
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
