"""Stage a model's weights from the Hugging Face Hub into S3, verifying as they stream.

Reads the spec (the build's manifest.json with its `staging` section) from S3, then for each file in
`staging.files`: GET {hub}/{repo_id}/resolve/{commit}/{path} (redirects followed; the Hub token, read from Secrets
Manager here, is sent to the Hub's host only), sha256 while reading, S3 multipart upload a few parts at a time, and
CompleteMultipartUpload only when the digest equals the manifest's (else AbortMultipartUpload). Each object carries
its sha256 as object metadata (`x-amz-meta-sha256`, the convention model_build/publish.py uses), so a rerun skips
every object whose size and sha256 already match and restarts only the rest. manifest.json is written last with
PutObject If-None-Match: * (write-once), only when every listed file is there and verified.

Why each choice, the service it runs on and its limits: docs/design/staging.md.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

MiB = 1024 * 1024
GiB = 1024 * MiB
MANIFEST_NAME = "manifest.json"
# S3 multipart limits (S3 User Guide, "Amazon S3 multipart upload limits"): parts 5 MiB-5 GiB (the last may be
# smaller), at most 10,000 parts, objects up to 5 TiB (quoted in docs/design/staging.md).
MIN_PART = 5 * MiB
MAX_PART = 5 * GiB
MAX_PARTS = 10_000
MAX_OBJECT = 5 * 1024 * GiB
DEFAULT_PART = 16 * MiB
DEFAULT_INFLIGHT = 4  # parts uploading at once; memory is about (inflight + 1) parts
USER_AGENT = "weights-staging/1"
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


class StagingError(Exception):
    """The staging cannot go on. The message names the file or field and what to do; printed, no traceback."""


# ------------------------------------------------------------------------------------------------------ the spec


@dataclass(frozen=True)
class Entry:
    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Order:
    """The spec, checked: what to fetch from where, and the manifest to write at the end."""

    document: bytes  # the manifest as the build wrote it: written unchanged as manifest.json at the end
    content_hash: str
    files: tuple[Entry, ...]
    staged: tuple[Entry, ...]  # fetched from the Hub, in manifest order
    hub_endpoint: str
    repo_id: str
    commit: str
    token_secret: str | None

    @property
    def staged_bytes(self) -> int:
        return sum(e.size for e in self.staged)

    def resolve_url(self, path: str) -> str:
        return (
            f"{self.hub_endpoint.rstrip('/')}/{self.repo_id}/resolve/{self.commit}/{urllib.parse.quote(path, safe='/')}"
        )


def content_hash(entries: list[Entry] | tuple[Entry, ...]) -> str:
    """The artifact's name: sha256 over sorted "path\\0sha256\\n" lines (the rule of artifact/manifest.py, restated
    here because the job imports nothing of ours)."""
    digest = hashlib.sha256()
    for e in sorted(entries, key=lambda e: e.path):
        digest.update(f"{e.path}\0{e.sha256}\n".encode())
    return digest.hexdigest()


def parse_spec(raw: bytes, where: str) -> Order:
    """Check the spec and return it; StagingError naming the field and what is allowed otherwise."""
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise StagingError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(doc, dict):
        raise StagingError(f"{where}: not a JSON object")
    files = doc.get("files")
    if not isinstance(files, list) or not files:
        raise StagingError(f"{where}: `files` must be a non-empty list of {{path, size, sha256}}")
    entries = []
    for item in files:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            raise StagingError(f"{where}: file entry {item!r} lacks a path")
        path = item["path"]
        parts = path.split("/")
        if path.startswith("/") or ".." in parts or "" in parts or path == MANIFEST_NAME:
            raise StagingError(f"{where}: file path {path!r} is not a plain relative path")
        size, sha = item.get("size"), item.get("sha256")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0 or size > MAX_OBJECT:
            raise StagingError(f"{where}: {path}: size {size!r} must be an integer from 0 to {MAX_OBJECT} (5 TiB)")
        if not isinstance(sha, str) or not _HEX64.fullmatch(sha):
            raise StagingError(f"{where}: {path}: sha256 {sha!r} must be 64 lowercase hex digits")
        entries.append(Entry(path, size, sha))
    declared = doc.get("content_hash")
    if declared != content_hash(entries):
        raise StagingError(
            f"{where}: content_hash {declared!r} does not match its files ({content_hash(entries)}): the manifest "
            "was edited after the build; rebuild it"
        )
    staging = doc.get("staging")
    if not isinstance(staging, dict):
        raise StagingError(f"{where}: no `staging` section: this manifest has nothing to fetch from the Hub")
    hub = staging.get("hub")
    if not isinstance(hub, dict):
        raise StagingError(f"{where}: staging.hub must be an object {{endpoint, repo_id, commit}}")
    endpoint, repo_id, commit = hub.get("endpoint"), hub.get("repo_id"), hub.get("commit")
    if not isinstance(endpoint, str) or urllib.parse.urlsplit(endpoint).scheme not in ("http", "https"):
        raise StagingError(f"{where}: staging.hub.endpoint {endpoint!r} must be an http(s) URL")
    if not isinstance(repo_id, str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", repo_id):
        raise StagingError(f"{where}: staging.hub.repo_id {repo_id!r} is not a Hub repository id (owner/name)")
    if not isinstance(commit, str) or not _HEX40.fullmatch(commit):
        raise StagingError(f"{where}: staging.hub.commit {commit!r} must be a commit sha (40 hex digits)")
    names = staging.get("files")
    by_path = {e.path: e for e in entries}
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise StagingError(f"{where}: staging.files must be a list of the manifest's file paths")
    unknown = [n for n in names if n not in by_path]
    if unknown:
        raise StagingError(f"{where}: staging.files names {unknown} that `files` does not list")
    secret = staging.get("token_secret")
    if secret is not None and (not isinstance(secret, str) or not secret):
        raise StagingError(f"{where}: staging.token_secret {secret!r} must be a Secrets Manager secret id or null")
    wanted = set(names)
    return Order(
        document=raw,
        content_hash=declared,
        files=tuple(entries),
        staged=tuple(e for e in entries if e.path in wanted),
        hub_endpoint=endpoint,
        repo_id=repo_id,
        commit=commit,
        token_secret=secret,
    )


def split_s3_uri(uri: str, what: str) -> tuple[str, str]:
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise StagingError(f"{what} {uri!r} must be an s3://bucket/key URI")
    return parsed.netloc, parsed.path.lstrip("/")


def part_size_for(size: int, minimum: int = DEFAULT_PART) -> int:
    """The smallest part size >= `minimum` (a whole number of MiB) with which 10,000 parts cover `size`."""
    needed = -(-size // MAX_PARTS)
    part = max(minimum, MIN_PART, needed)
    part = -(-part // MiB) * MiB
    if part > MAX_PART:
        raise StagingError(f"a {size}-byte file needs parts above S3's 5 GiB limit")
    return part


# ------------------------------------------------------------------------------------------------------ progress


class Progress:
    """What has been staged; a thread prints one line every `interval` seconds (stdout: CloudWatch Logs on AWS)."""

    def __init__(self, total_files: int, total_bytes: int, interval: float, out=None):
        self.total_files, self.total_bytes, self.interval = total_files, total_bytes, interval
        self.out = out or sys.stdout
        self.lock = threading.Lock()
        self.done = 0  # bytes staged (skipped verified objects count, at their size)
        self.moved = 0  # bytes moved by this run
        self.index, self.name, self.file_done, self.file_size = 0, "", 0, 0
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def say(self, text: str) -> None:
        with self.lock:
            print(text, file=self.out, flush=True)

    def file(self, index: int, entry: Entry) -> None:
        with self.lock:
            self.index, self.name, self.file_done, self.file_size = index, entry.path, 0, entry.size

    def add(self, n: int, *, moved: bool = True) -> None:
        with self.lock:
            self.done += n
            self.file_done += n
            if moved:
                self.moved += n

    def line(self) -> str:
        with self.lock:
            elapsed = max(time.monotonic() - self.started, 1e-6)
            rate = self.moved / elapsed
            left = self.total_bytes - self.done
            eta = _duration(left / rate) if rate > 0 else "unknown"
            pct = 100.0 * self.done / self.total_bytes if self.total_bytes else 100.0
            return (
                f"[staging] file {self.index}/{self.total_files} {self.name}: {_size(self.file_done)}/"
                f"{_size(self.file_size)}; total {_size(self.done)}/{_size(self.total_bytes)} ({pct:.1f} %), "
                f"{_size(rate)}/s, about {eta} left"
            )

    def start(self) -> None:
        def run() -> None:
            while not self._stop.wait(self.interval):
                self.say(self.line())

        self._thread = threading.Thread(target=run, name="staging-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _size(n: float) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


# ------------------------------------------------------------------------------------------------------ the Hub


class _SameHostAuth(urllib.request.HTTPRedirectHandler):
    """Follows redirects and carries the token only to the host it was meant for: the Hub redirects large files to
    a CDN with a signed URL, which must not receive the Hub token (the token is an unredirected header, so urllib
    drops it on every redirect; this puts it back for a same-host one, e.g. a renamed repository)."""

    def __init__(self, token: str | None, host: str):
        self.token, self.host = token, host

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and self.token and urllib.parse.urlsplit(newurl).netloc == self.host:
            new.add_unredirected_header("Authorization", f"Bearer {self.token}")
        return new


class Hub:
    def __init__(self, order: Order, token: str | None, timeout: float = 60.0):
        self.order, self.token, self.timeout = order, token, timeout
        self.host = urllib.parse.urlsplit(order.hub_endpoint).netloc
        self.opener = urllib.request.build_opener(_SameHostAuth(token, self.host))

    def open(self, entry: Entry, offset: int = 0):
        url = self.order.resolve_url(entry.path)
        req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        if self.token:
            req.add_unredirected_header("Authorization", f"Bearer {self.token}")
        if offset:
            req.add_header("Range", f"bytes={offset}-")
        try:
            resp = self.opener.open(req, timeout=self.timeout)
        except urllib.error.HTTPError as err:
            raise StagingError(self._refusal(entry, err.code)) from None
        except (urllib.error.URLError, OSError) as err:
            raise StagingError(f"{entry.path}: the Hub at {self.order.hub_endpoint} did not answer ({err})") from None
        if offset and resp.status != 206:
            resp.close()
            raise StagingError(f"{entry.path}: the Hub ignored a range request (HTTP {resp.status}); cannot resume")
        return resp

    def _refusal(self, entry: Entry, code: int) -> str:
        where = f"{self.order.repo_id}@{self.order.commit[:12]} {entry.path}"
        if code in (401, 403):
            how = (
                f"the token in secret {self.order.token_secret!r} may not read it (accept the model's terms on the "
                "Hub with that account, or store another token)"
                if self.token
                else "it is gated or private: store a Hub token in Secrets Manager and name it in the config"
            )
            return f"the Hub refused {where} (HTTP {code}): {how}"
        if code == 404:
            return f"the Hub has no {where} (HTTP 404): the manifest names a file or commit the Hub does not have"
        return f"the Hub answered HTTP {code} for {where}"


class _Stream:
    """A file's bytes from the Hub, read whole parts at a time; a dropped connection is resumed by a Range request
    (a few times) instead of restarting the file."""

    RETRIES = 3

    def __init__(self, hub: Hub, entry: Entry):
        self.hub, self.entry, self.offset, self.failures = hub, entry, 0, 0
        self.resp = hub.open(entry)

    def read(self, n: int) -> bytearray:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            try:
                k = self.resp.readinto(view[got:])
            except (OSError, http.client.HTTPException) as err:  # a dropped connection (IncompleteRead, reset)
                self._reopen(err, held=got)
                continue
            if not k:
                break  # the end: a short file is found by the size check, not retried
            got += k
        view.release()
        self.offset += got
        del buf[got:]
        return buf

    def _reopen(self, err: BaseException, held: int) -> None:
        self.failures += 1
        if self.failures > self.RETRIES:
            raise StagingError(f"{self.entry.path}: the Hub connection failed {self.failures} times ({err})")
        self.resp.close()
        self.resp = self.hub.open(self.entry, self.offset + held)  # after what this read already holds

    def close(self) -> None:
        self.resp.close()


# ------------------------------------------------------------------------------------------------------ S3


def _code(err: Exception) -> str:
    return str(getattr(err, "response", {}).get("Error", {}).get("Code", ""))


def head(s3, bucket: str, key: str) -> tuple[int, str | None] | None:
    """(size, recorded sha256) of an object, None when it does not exist."""
    from botocore.exceptions import ClientError

    try:
        found = s3.head_object(Bucket=bucket, Key=key)
    except ClientError as err:
        if _code(err) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise
    return found["ContentLength"], found.get("Metadata", {}).get("sha256")


def abort_stale_uploads(s3, bucket: str, key: str) -> int:
    """Abort the unfinished multipart uploads of exactly this key (an interrupted earlier run's)."""
    aborted = 0
    pages = s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=key)
    for page in pages:
        for upload in page.get("Uploads", []):
            if upload["Key"] == key:
                s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload["UploadId"])
                aborted += 1
    return aborted


def _content_type(path: str) -> str:
    return "application/json" if path.endswith(".json") else "application/octet-stream"


class Stager:
    def __init__(
        self,
        order: Order,
        s3,
        bucket: str,
        prefix: str,
        hub: Hub,
        progress: Progress,
        *,
        part_size: int = DEFAULT_PART,
        inflight: int = DEFAULT_INFLIGHT,
    ):
        self.order, self.s3, self.bucket, self.prefix, self.hub = order, s3, bucket, prefix, hub
        self.progress, self.min_part, self.inflight = progress, part_size, max(1, inflight)

    def key(self, entry: Entry) -> str:
        return self.prefix + entry.path

    def run(self) -> str:
        """Stage every file, then write manifest.json; returns what happened, in a line."""
        manifest_key = self.prefix + MANIFEST_NAME
        if self._manifest_there(manifest_key):
            self.progress.add(self.order.staged_bytes, moved=False)
            return f"s3://{self.bucket}/{self.prefix} is already complete (its manifest.json is this spec)"
        self._check_unstaged()
        moved = skipped = 0
        for i, entry in enumerate(self.order.staged, 1):
            self.progress.file(i, entry)
            key = self.key(entry)
            if head(self.s3, self.bucket, key) == (entry.size, entry.sha256):
                self.progress.add(entry.size, moved=False)
                self.progress.say(
                    f"[staging] file {i}/{len(self.order.staged)} {entry.path}: already staged and verified, skipped"
                )
                skipped += 1
                continue
            aborted = abort_stale_uploads(self.s3, self.bucket, key)
            if aborted:
                self.progress.say(f"[staging] {entry.path}: aborted {aborted} unfinished upload(s) of an earlier run")
            self.progress.say(
                f"[staging] file {i}/{len(self.order.staged)} {entry.path}: {_size(entry.size)} from the Hub"
            )
            self.stage(entry)
            moved += 1
        self._write_manifest(manifest_key)
        return (
            f"staged s3://{self.bucket}/{self.prefix}: {moved} file(s) moved, {skipped} already there, "
            f"manifest.json written"
        )

    def _manifest_there(self, key: str) -> bool:
        if head(self.s3, self.bucket, key) is None:
            return False
        body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        if body != self.order.document:
            raise StagingError(
                f"s3://{self.bucket}/{key} exists with other content: the prefix is published and write-once; "
                "nothing was changed"
            )
        return True

    def _check_unstaged(self) -> None:
        """The files the workstation uploads (not fetched from the Hub) must be there, verified, before we start."""
        staged = {e.path for e in self.order.staged}
        missing = []
        for entry in self.order.files:
            if entry.path in staged:
                continue
            found = head(self.s3, self.bucket, self.key(entry))
            if found != (entry.size, entry.sha256):
                what = "missing" if found is None else f"size {found[0]}, sha256 {found[1]!r}"
                missing.append(f"{entry.path}: {what}; the manifest says {entry.size} bytes, sha256 {entry.sha256}")
        if missing:
            raise StagingError(
                f"the build's own files are not in s3://{self.bucket}/{self.prefix} (upload them first, as "
                "`model_build stage` does):\n  - " + "\n  - ".join(missing)
            )

    def stage(self, entry: Entry) -> None:
        part = part_size_for(entry.size, self.min_part)
        stream = _Stream(self.hub, entry)
        try:
            if entry.size <= part:
                self._single(entry, stream)
            else:
                self._multipart(entry, stream, part)
        finally:
            stream.close()

    def _mismatch(self, entry: Entry, digest: str, got: int) -> StagingError:
        if got != entry.size:
            return StagingError(
                f"{entry.path}: the Hub sent {got} bytes, the manifest says {entry.size}; nothing was written for it"
            )
        return StagingError(
            f"{entry.path}: sha256 mismatch: the Hub's bytes hash to {digest}, the manifest says {entry.sha256}; "
            "the upload was aborted and nothing was written for it"
        )

    def _single(self, entry: Entry, stream: _Stream) -> None:
        data = stream.read(entry.size + 1)  # one byte more: a longer answer is a mismatch, not a truncation
        digest = hashlib.sha256(data).hexdigest()
        if len(data) != entry.size or digest != entry.sha256:
            raise self._mismatch(entry, digest, len(data))
        self.s3.put_object(
            Bucket=self.bucket,
            Key=self.key(entry),
            Body=bytes(data),
            Metadata={"sha256": entry.sha256},
            ContentType=_content_type(entry.path),
        )
        self.progress.add(len(data))

    def _multipart(self, entry: Entry, stream: _Stream, part: int) -> None:
        key = self.key(entry)
        upload_id = self.s3.create_multipart_upload(
            Bucket=self.bucket,
            Key=key,
            # Recorded before the bytes are known: the upload completes only if they hash to it.
            Metadata={"sha256": entry.sha256},
            ContentType=_content_type(entry.path),
        )["UploadId"]
        sha = hashlib.sha256()
        got = 0
        slots = threading.BoundedSemaphore(self.inflight)  # parts read but not yet sent: bounded memory
        futures: list[Future] = []
        completed = False
        try:
            with ThreadPoolExecutor(max_workers=self.inflight, thread_name_prefix="staging-part") as pool:
                number = 0
                while True:
                    # Acquire before reading: at most `inflight` parts uploading plus the one being read.
                    slots.acquire()
                    data = stream.read(part)
                    if not data:
                        slots.release()
                        break
                    number += 1
                    if number > MAX_PARTS or got + len(data) > entry.size:
                        slots.release()
                        got += len(data)
                        break
                    sha.update(data)
                    got += len(data)
                    futures.append(pool.submit(self._upload_part, key, upload_id, number, data, slots))
                    failed = next((f for f in futures if f.done() and f.exception()), None)
                    if failed is not None:
                        raise failed.exception()  # type: ignore[misc]
                parts = [f.result() for f in futures]
            digest = sha.hexdigest()
            if got != entry.size or digest != entry.sha256:
                raise self._mismatch(entry, digest, got)
            self.s3.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
            completed = True
        finally:
            if not completed:
                for f in futures:
                    f.cancel()
                try:
                    self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
                except Exception:  # the rerun aborts it (abort_stale_uploads), and the bucket's lifecycle rule after
                    pass

    def _upload_part(self, key: str, upload_id: str, number: int, data: bytearray, slots) -> dict[str, Any]:
        try:
            answer = self.s3.upload_part(
                Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=bytes(data)
            )
            self.progress.add(len(data))
            return {"ETag": answer["ETag"], "PartNumber": number}
        finally:
            slots.release()

    def _write_manifest(self, key: str) -> None:
        """Last: every listed object is there with its size and sha256, then manifest.json, write-once."""
        from botocore.exceptions import ClientError

        wrong = [e.path for e in self.order.files if head(self.s3, self.bucket, self.key(e)) != (e.size, e.sha256)]
        if wrong:
            raise StagingError(
                f"after staging, these objects in s3://{self.bucket}/{self.prefix} do not match the manifest (size "
                f"and sha256): {wrong}; manifest.json was not written; run the staging again"
            )
        try:
            self.s3.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=self.order.document,
                Metadata={"sha256": hashlib.sha256(self.order.document).hexdigest()},
                ContentType="application/json",
                IfNoneMatch="*",  # S3 conditional write: 412 if another writer got there first
            )
        except ClientError as err:
            if _code(err) not in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                raise
            if not self._manifest_there(key):
                raise StagingError(f"s3://{self.bucket}/{key}: a conditional write conflicted; run again") from None


# ------------------------------------------------------------------------------------------------------ the job


def read_token(secretsmanager, secret_id: str) -> str:
    """The Hub token from Secrets Manager: the secret string itself, or its "token"/"HF_TOKEN" field when it is a
    JSON object. Never printed; never put in an environment."""
    from botocore.exceptions import ClientError

    try:
        value = secretsmanager.get_secret_value(SecretId=secret_id).get("SecretString")
    except ClientError as err:
        raise StagingError(
            f"cannot read the Hub token from Secrets Manager secret {secret_id!r} ({_code(err)}): create it, or let "
            "the job's role read it"
        ) from None
    if not value:
        raise StagingError(f"Secrets Manager secret {secret_id!r} has no SecretString")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        token = parsed.get("token") or parsed.get("HF_TOKEN")
        if not isinstance(token, str) or not token:
            raise StagingError(f"Secrets Manager secret {secret_id!r} is a JSON object without a `token` field")
        return token
    return value.strip()


def run(
    spec_uri: str,
    destination: str,
    *,
    session=None,
    part_size: int = DEFAULT_PART,
    inflight: int = DEFAULT_INFLIGHT,
    interval: float = 5.0,
    out=None,
    on_progress: Callable[[Progress], None] | None = None,
) -> str:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    session = session or boto3.session.Session()
    s3 = session.client("s3", config=Config(max_pool_connections=inflight + 4, retries={"mode": "standard"}))
    spec_bucket, spec_key = split_s3_uri(spec_uri, "--spec")
    bucket, prefix = split_s3_uri(destination, "--destination")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    try:
        raw = s3.get_object(Bucket=spec_bucket, Key=spec_key)["Body"].read()
    except ClientError as err:
        raise StagingError(f"cannot read the spec {spec_uri} ({_code(err)})") from None
    order = parse_spec(raw, spec_uri)
    if prefix.rstrip("/").rsplit("/", 1)[-1] != order.content_hash:
        raise StagingError(
            f"--destination {destination!r} must end in the manifest's content hash {order.content_hash}/ "
            "(the prefix is content addressed)"
        )
    token = read_token(session.client("secretsmanager"), order.token_secret) if order.token_secret else None
    progress = Progress(len(order.staged), order.staged_bytes, interval, out)
    progress.say(
        f"[staging] {order.repo_id}@{order.commit} -> s3://{bucket}/{prefix}: {len(order.staged)} file(s), "
        f"{_size(order.staged_bytes)}" + (f" (Hub token from secret {order.token_secret})" if token else "")
    )
    stager = Stager(order, s3, bucket, prefix, Hub(order, token), progress, part_size=part_size, inflight=inflight)
    progress.start()
    try:
        summary = stager.run()
    finally:
        progress.stop()
    elapsed = time.monotonic() - progress.started
    progress.say(progress.line())
    progress.say(f"[staging] done in {_duration(elapsed)}: {summary}")
    return summary


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m weights_staging", description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", default=os.environ.get("STAGING_SPEC"), help="s3:// URI of the manifest to stage")
    p.add_argument(
        "--destination",
        default=os.environ.get("STAGING_DESTINATION"),
        help="s3://bucket/models/<endpoint>/<content hash>/ to stage into",
    )
    p.add_argument("--part-size-mib", type=int, default=DEFAULT_PART // MiB, help="smallest multipart part (MiB)")
    p.add_argument("--inflight", type=int, default=DEFAULT_INFLIGHT, help="parts uploading at once")
    p.add_argument("--progress-interval", type=float, default=5.0, help="seconds between progress lines")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.spec or not args.destination:
        print("staging failed: give --spec and --destination (or STAGING_SPEC / STAGING_DESTINATION)", file=sys.stderr)
        return 2
    if args.part_size_mib < 5 or args.inflight < 1 or args.progress_interval <= 0:
        print("staging failed: --part-size-mib >= 5, --inflight >= 1, --progress-interval > 0", file=sys.stderr)
        return 2
    try:
        run(
            args.spec,
            args.destination,
            part_size=args.part_size_mib * MiB,
            inflight=args.inflight,
            interval=args.progress_interval,
        )
    except StagingError as err:
        print(f"staging failed: {err}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("staging interrupted: run it again to resume (verified objects are skipped)", file=sys.stderr)
        return 130
    return 0
