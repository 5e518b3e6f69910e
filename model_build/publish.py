"""Publish a built artifact directory to the environment's artifact bucket.

Content addressed: s3://<bucket>/models/<endpoint>/<content hash>/..., manifest.json uploaded LAST (its presence
marks a complete artifact). One transfer manager, unchanged objects skipped, files verified while they upload.
The layout, what makes it fast, tar-gz packing and its measurements: docs/design/publish.md.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from artifact.manifest import MANIFEST_NAME, FileEntry, Manifest, ManifestError, sha256_file
from artifact.tarball import TarballError, pack_tarball

if TYPE_CHECKING:
    from deployment import EndpointPlan, EnvironmentPlan

MiB = 1024 * 1024
TARBALL_NAME = "model.tar.gz"
# S3 refuses multipart parts below 5 MiB (except the last one).
MIN_PART_SIZE = 5 * MiB
ModelData = Literal["s3-prefix", "tar-gz"]
# (local path, key, size, object metadata)
_Item = tuple[Path, str, int, dict[str, str]]


class PublishError(Exception):
    """Publishing cannot go on. The message says what is wrong and what to do; print it, no traceback."""


@dataclass
class PublishReport:
    bucket: str
    prefix: str
    model_data: ModelData
    uploaded_files: int = 0
    uploaded_bytes: int = 0
    skipped_files: int = 0
    skipped_bytes: int = 0
    seconds: float = 0.0
    pack_seconds: float = 0.0  # tar-gz mode: time spent packing (included in `seconds`)
    packer: str | None = None
    uploaded: list[str] = field(default_factory=list)  # keys, manifest.json last
    content_hash: str = ""

    @property
    def model_data_url(self) -> str:
        """What SageMaker's ModelDataUrl / S3DataSource.S3Uri should point at."""
        if self.model_data == "tar-gz":
            return f"s3://{self.bucket}/{self.prefix}{TARBALL_NAME}"
        return f"s3://{self.bucket}/{self.prefix}"

    def summary(self) -> str:
        return (
            f"published {self.model_data_url}: uploaded {self.uploaded_files} files "
            f"({self.uploaded_bytes / MiB:.1f} MiB), skipped {self.skipped_files} unchanged "
            f"({self.skipped_bytes / MiB:.1f} MiB) in {self.seconds:.1f} s"
        )


# ---------------------------------------------------------------------------------------------- manifest


def load_manifest(build_dir: Path) -> Manifest:
    """The build dir's manifest.json (artifact.manifest.Manifest), which must list its files."""
    path = Path(build_dir) / MANIFEST_NAME
    if not path.is_file():
        raise PublishError(
            f"{build_dir} has no {MANIFEST_NAME}: it is not a finished build; "
            "run `python -m model_build build ...` first"
        )
    try:
        return Manifest.load(path, require_files=True)
    except ManifestError as err:
        raise PublishError(f"{err}; rebuild the artifact") from None


def verify_build_dir(build_dir: Path, manifest: Manifest, *, workers: int = 4) -> None:
    """Refuse a build dir whose files differ from its manifest (edited, truncated or missing since the build)."""
    problems = manifest.verify(build_dir, workers=workers)
    if problems:
        raise _changed_error(build_dir, problems)


def _changed_error(build_dir: Path, problems: list[str], *, after_upload: bool = False) -> PublishError:
    where = (
        " while it was being published; manifest.json was not written, so the artifact stays incomplete"
        if after_upload
        else ""
    )
    return PublishError(
        f"{build_dir} changed since it was built (refusing to publish{where}):\n  - "
        + "\n  - ".join(problems)
        + "\nrebuild it with `python -m model_build build ...`"
    )


# (size, mtime, inode, device): a write changes mtime, a replace (write to a temporary file + rename) the inode.
_Fingerprint = tuple[int, int, int, int]


def _fingerprint(path: Path) -> _Fingerprint | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


def _check_sizes(build_dir: Path, manifest: Manifest) -> dict[str, _Fingerprint]:
    """Every listed file is there with the manifest's size (refused before anything is sent, else); returns each
    file's fingerprint, taken now: the start of the window in which it must not change."""
    problems, prints = [], {}
    for entry in manifest.files:
        found = _fingerprint(build_dir / entry.path)
        if found is None or not (build_dir / entry.path).is_file():
            problems.append(f"{entry.path}: missing")
        elif found[0] != entry.size:
            problems.append(f"{entry.path}: size {found[0]} bytes, the manifest says {entry.size}")
        else:
            prints[entry.path] = found
    if problems:
        raise _changed_error(build_dir, problems)
    return prints


# ---------------------------------------------------------------------------------------------- S3 helpers


def _pool_size(max_concurrency: int) -> int:
    """One pooled connection per transfer thread plus HEAD requests; botocore's default pool is 10."""
    return max(10, max_concurrency + 4)


def _s3_client(max_concurrency: int):
    import boto3
    from botocore.config import Config

    return boto3.client("s3", config=Config(max_pool_connections=_pool_size(max_concurrency)))


def _existing(s3, bucket: str, key: str) -> tuple[int, str | None] | None:
    """(size, sha256) of an object, or None when it does not exist. The sha256 is the one publish recorded in the
    object's metadata, unless S3's own full-object SHA256 checksum (computed by S3 on a single-request upload sent
    with ChecksumAlgorithm SHA256) says otherwise: then S3's, so an object that differs from its record is never
    taken for published."""
    from botocore.exceptions import ClientError

    try:
        head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        if err.response.get("Error", {}).get("Code") in ("NoSuchBucket",):
            raise PublishError(f"bucket {bucket!r} does not exist") from None
        raise
    return head["ContentLength"], s3_sha256(head) or head.get("Metadata", {}).get("sha256")


def s3_sha256(head: dict) -> str | None:
    """The hex SHA-256 S3 computed over a whole object (HeadObject with ChecksumMode ENABLED), or None when S3 holds
    none for the whole object: a multipart upload's SHA256 is a checksum of the parts' checksums ("<base64>-<parts>",
    ChecksumType COMPOSITE; S3 User Guide, "Checking object integrity")."""
    import base64

    value = head.get("ChecksumSHA256")
    multipart = "-" in str(head.get("ETag", "")) or "-" in str(value)  # a multipart ETag ends in -<parts>
    if not value or multipart or head.get("ChecksumType", "FULL_OBJECT") != "FULL_OBJECT":
        return None
    return base64.b64decode(value).hex()


# Write-once: every write of a published prefix carries If-None-Match: *, so S3 refuses (412 PreconditionFailed) to
# replace an object that exists (S3 User Guide, "How to prevent object overwrites with conditional writes"; botocore's
# s3 model: PutObject and CompleteMultipartUpload take IfNoneMatch). s3transfer 0.19.3 passes no IfNoneMatch through
# its extra_args (ALLOWED_UPLOAD_ARGS), so it is added where botocore builds each request. The artifact bucket's
# policy denies any other write of models/* (stacks/artifact_store.py, write_once_statement).
_WRITE_EVENTS = ("before-parameter-build.s3.PutObject", "before-parameter-build.s3.CompleteMultipartUpload")


class _WriteOnce:
    def __init__(self, s3, prefix: str) -> None:
        self.s3, self.prefix, self.event_id = s3, prefix, f"publish-write-once-{id(self)}"

    def add_header(self, params, **kwargs) -> None:
        if str(params.get("Key", "")).startswith(self.prefix):
            params["IfNoneMatch"] = "*"

    def __enter__(self) -> _WriteOnce:
        for event in _WRITE_EVENTS:
            self.s3.meta.events.register(event, self.add_header, unique_id=self.event_id)
        return self

    def __exit__(self, *exc) -> None:
        for event in _WRITE_EVENTS:
            self.s3.meta.events.unregister(event, unique_id=self.event_id)


def _overwrite_refused(err) -> bool:
    from botocore.exceptions import ClientError

    return isinstance(err, ClientError) and err.response.get("Error", {}).get("Code") in (
        "PreconditionFailed",
        "412",
        "ConditionalRequestConflict",
    )


def _write_once_error(bucket: str, keys: list[str]) -> PublishError:
    return PublishError(
        f"s3://{bucket}: {len(keys)} object(s) of this content-addressed prefix already exist with other content, and "
        "a published prefix is write-once (never overwritten: S3 refused the write, If-None-Match):\n  - "
        + "\n  - ".join(keys)
        + "\nthe objects differ from this build's manifest: they were changed after publishing, or an earlier publish "
        "sent a file that changed while it was sent. Inspect them; an administrator may delete them (s3:DeleteObject, "
        "which publishing does not have), then publish again"
    )


def check_bucket(s3, bucket: str) -> None:
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as err:
        raise PublishError(_bucket_problem(bucket, err)) from None


def _bucket_problem(bucket: str, err) -> str:
    """What HeadBucket's refusal means, by its error code."""
    code = err.response.get("Error", {}).get("Code")
    if code in ("404", "NoSuchBucket", "NotFound"):
        return f"artifact bucket {bucket!r} does not exist"
    if code in ("403", "AccessDenied", "Forbidden"):
        return (
            f"artifact bucket {bucket!r}: access denied (it belongs to another account, or these credentials may "
            "not read it)"
        )
    return f"artifact bucket {bucket!r}: {code}: {err}"


class _Progress:
    """tqdm over bytes, fed from transfer threads (tqdm.update is not thread safe on its own)."""

    def __init__(self, total: int, enabled: bool | None, desc: str):
        from tqdm import tqdm

        # enabled=None: show the bar only on a terminal (tqdm's own rule), so CI logs stay clean.
        self._bar = tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=desc,
            disable=None if enabled is None else not enabled,
            file=sys.stderr,
            leave=False,
        )
        self._lock = threading.Lock()

    def update(self, n: int) -> None:
        with self._lock:
            self._bar.update(n)

    def close(self) -> None:
        self._bar.close()


def _transfer_config(
    max_concurrency: int, multipart_threshold: int, multipart_chunksize: int | None, max_bandwidth: int | None = None
):
    from boto3.s3.transfer import TransferConfig

    chunk = multipart_chunksize or max(MIN_PART_SIZE, min(multipart_threshold, 64 * MiB))
    return TransferConfig(
        multipart_threshold=multipart_threshold,
        multipart_chunksize=max(MIN_PART_SIZE, chunk),  # s3transfer also raises it past 10,000 parts
        max_concurrency=max_concurrency,
        use_threads=True,
        max_bandwidth=max_bandwidth,  # bytes/s over all threads (s3transfer's bandwidth limiter); None: no cap
    )


def _upload_all(
    s3, bucket: str, items: list[_Item], config, progress: _Progress, verifier: _Verifier | None = None
) -> None:
    """Upload (local path, key, size, metadata) items through one transfer manager; raise naming every failed key.
    With a verifier: each multipart upload completes only once the verifier passes its file, and a file the
    verifier refuses is left to the verifier to report (its upload was aborted or never completed)."""
    from boto3.s3.transfer import create_transfer_manager
    from s3transfer.subscribers import BaseSubscriber

    class _OnProgress(BaseSubscriber):
        def on_progress(self, future, bytes_transferred, **kwargs):
            progress.update(bytes_transferred)

    if not items:
        return
    futures = []
    failed: list[str] = []
    exists: list[str] = []
    if verifier is not None:
        s3.meta.events.register(_COMPLETE_EVENT, verifier.gate, unique_id=verifier.event_id)
    try:
        # Leaving the manager's `with` on an exception (Ctrl-C included) cancels every in-flight transfer, and
        # s3transfer aborts the multipart uploads it cancels. Not manager.shutdown(cancel=True): s3transfer 0.19.3
        # passes its flag on as the message and the message as the exception type (manager.py
        # TransferManager.shutdown), so it raises TypeError instead of cancelling.
        with create_transfer_manager(s3, config) as manager:
            for path, key, _size, metadata in items:
                extra = {"Metadata": metadata, "ContentType": _content_type(key), "ChecksumAlgorithm": "SHA256"}
                fut = manager.upload(str(path), bucket, key, extra_args=extra, subscribers=[_OnProgress()])
                futures.append((key, fut))
                if verifier is not None:
                    verifier.uploading(key, fut)
            for key, fut in futures:
                try:
                    fut.result()
                except Exception as err:  # collected and reported together below
                    if _overwrite_refused(err):
                        exists.append(key)
                    elif verifier is None or not verifier.refused(key):
                        failed.append(f"{key}: {err}")
    finally:
        if verifier is not None:
            s3.meta.events.unregister(_COMPLETE_EVENT, unique_id=verifier.event_id)
    if exists:
        raise _write_once_error(bucket, exists)
    if failed:
        raise PublishError(
            f"upload to s3://{bucket} failed for {len(failed)} file(s); manifest.json was not written, so the "
            "artifact stays incomplete; publish again to finish:\n  - " + "\n  - ".join(failed)
        )


# botocore's event before the CompleteMultipartUpload call is built: raising there fails the call, and s3transfer
# then aborts the multipart upload (s3transfer/tasks.py, CreateMultipartUploadTask's failure cleanup).
_COMPLETE_EVENT = "before-parameter-build.s3.CompleteMultipartUpload"


class _FileChanged(Exception):
    """A file differs from the manifest; raised in the completion gate so its multipart upload is aborted."""


class _Verifier:
    """Hashes files in parallel with their upload and checks each against the manifest and against its
    fingerprint at the start of the publish; gates each multipart upload's completion on that check."""

    def __init__(self, build_dir: Path, entries: dict[str, FileEntry], prints: dict[str, _Fingerprint], workers: int):
        self.build_dir, self.entries, self.prints = build_dir, entries, prints  # entries by S3 key
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="publish-hash")
        self.hashes: dict[str, Future] = {}
        self.uploads: dict[str, Any] = {}  # s3transfer TransferFutures
        self.problems: dict[str, str] = {}
        self.lock = threading.Lock()
        self.event_id = f"publish-verify-{id(self)}"

    def start(self, keys: list[str]) -> None:
        for key in keys:
            fut = self.pool.submit(sha256_file, self.build_dir / self.entries[key].path)
            self.hashes[key] = fut

            def hashed(_: Future, key: str = key) -> None:
                self._cancel_if_refused(key)

            fut.add_done_callback(hashed)

    def uploading(self, key: str, transfer_future) -> None:
        with self.lock:
            self.uploads[key] = transfer_future
        if key in self.hashes and self.hashes[key].done():
            self._cancel_if_refused(key)

    def _cancel_if_refused(self, key: str) -> None:
        """A wrong hash stops that file's upload at once instead of at its completion."""
        if self.check(key, final=False):
            with self.lock:
                upload = self.uploads.get(key)
            if upload is not None:
                upload.cancel()

    def check(self, key: str, *, final: bool = True) -> str | None:
        """The problem with this key's file (None: intact). Waits for its hash; `final` also compares the
        file's fingerprint now with the one taken at the start."""
        entry = self.entries[key]
        problem: str | None
        try:
            digest = self.hashes[key].result()
        except OSError as err:
            problem = f"{entry.path}: unreadable while being published ({err.strerror or err})"
        else:
            problem = None
            if digest != entry.sha256:
                problem = f"{entry.path}: sha256 {digest[:12]}..., the manifest says {entry.sha256[:12]}..."
            elif final and _fingerprint(self.build_dir / entry.path) != self.prints[entry.path]:
                problem = f"{entry.path}: changed while it was being published (size, mtime or inode)"
        if problem:
            with self.lock:
                self.problems.setdefault(key, problem)
        return problem

    def gate(self, params, **kwargs) -> None:
        """Before a multipart upload completes (all its parts read and sent): refuse a file that is not intact."""
        key = params.get("Key")
        if key in self.hashes and (problem := self.check(key)):
            raise _FileChanged(problem)

    def refused(self, key: str) -> bool:
        with self.lock:
            return key in self.problems

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _content_type(key: str) -> str:
    if key.endswith((".json",)):
        return "application/json"
    if key.endswith((".py", ".txt")):
        return "text/plain"
    if key.endswith(".tar.gz"):
        return "application/gzip"
    return "application/octet-stream"


# ---------------------------------------------------------------------------------------------- publish


def publish_artifact(
    build_dir: Path,
    bucket: str,
    prefix: str,
    *,
    s3_client=None,
    max_concurrency: int = 8,
    multipart_threshold: int = 64 * MiB,
    multipart_chunksize: int | None = None,
    model_data: ModelData = "s3-prefix",
    progress: bool | None = None,
    packer: str | None = None,
    manifest: Manifest | None = None,
    bucket_checked: bool = False,
    max_bandwidth: int | None = None,
    only_files: frozenset[str] | None = None,
) -> PublishReport:
    """Upload the artifact in build_dir under s3://bucket/prefix; manifest.json last. See the module doc.
    `manifest`: the build's, when the caller has loaded it; `bucket_checked`: the caller found the bucket;
    `max_bandwidth`: bytes per second for all uploads together (a shared link), None for no cap.
    `only_files`: upload just these manifest paths and not manifest.json (a staged build: the staging job fetches
    the rest from the Hub and writes manifest.json last, model_build/stage.py)."""
    started = time.monotonic()
    build_dir = Path(build_dir)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    manifest = manifest or load_manifest(build_dir)
    if only_files is not None:
        manifest = Manifest(manifest.content_hash, tuple(e for e in manifest.files if e.path in only_files))
    s3 = s3_client or _s3_client(max_concurrency)
    report = PublishReport(bucket=bucket, prefix=prefix, model_data=model_data, content_hash=manifest.content_hash)
    config = _transfer_config(max_concurrency, multipart_threshold, multipart_chunksize, max_bandwidth)
    manifest_path = build_dir / MANIFEST_NAME
    manifest_sha = sha256_file(manifest_path)
    manifest_key = prefix + MANIFEST_NAME

    if not bucket_checked:
        check_bucket(s3, bucket)
    have_manifest = _existing(s3, bucket, manifest_key)
    workers = min(4, os.cpu_count() or 1)

    verifier = None
    if model_data == "tar-gz":
        verify_build_dir(build_dir, manifest, workers=workers)  # the archive is packed from these files
        items = _tarball_items(build_dir, manifest, s3, bucket, prefix, report, packer)
    elif model_data == "s3-prefix":
        prints = _check_sizes(build_dir, manifest)
        items = _prefix_items(build_dir, manifest, s3, bucket, prefix, report, max_concurrency)
        verifier = _Verifier(build_dir, {prefix + e.path: e for e in manifest.files}, prints, workers)
    else:
        raise ValueError(f"model_data must be 's3-prefix' or 'tar-gz', not {model_data!r}")

    tmp_dirs = [p.parent for p, key, _, _ in items if key.endswith(TARBALL_NAME)]
    try:
        if verifier is not None:
            _verify_single_request_files(verifier, config.multipart_threshold)
            verifier.start([k for k in verifier.entries if k not in verifier.hashes])  # the multipart-sized rest
        bar = _Progress(sum(size for _, _, size, _ in items), progress, f"upload {prefix}")
        try:
            with _WriteOnce(s3, prefix):
                _upload_all(s3, bucket, items, config, bar, verifier)
        finally:
            bar.close()
        if verifier is not None:
            _finish_verification(verifier, items, s3, bucket, config.multipart_threshold)
    finally:
        if verifier is not None:
            verifier.close()
        for d in tmp_dirs:
            shutil.rmtree(d, ignore_errors=True)
    for _, key, size, _ in items:
        report.uploaded.append(key)
        report.uploaded_files += 1
        report.uploaded_bytes += size

    if only_files is not None:
        report.seconds = time.monotonic() - started
        return report
    # manifest.json LAST: only now is the artifact complete.
    manifest_size = manifest_path.stat().st_size
    if have_manifest == (manifest_size, manifest_sha) or (
        have_manifest is not None and _same_artifact(s3, bucket, manifest_key, manifest)
    ):
        # Published already (a rebuild of the same files writes a manifest whose other fields differ: the prefix,
        # written once, keeps the first).
        report.skipped_files += 1
        report.skipped_bytes += manifest_size
    else:
        try:
            with _WriteOnce(s3, prefix):
                s3.upload_file(
                    str(manifest_path),
                    bucket,
                    manifest_key,
                    ExtraArgs={
                        "Metadata": {"sha256": manifest_sha},
                        "ContentType": "application/json",
                        "ChecksumAlgorithm": "SHA256",
                    },
                )
        except Exception as err:
            if _overwrite_refused(err):
                raise _write_once_error(bucket, [manifest_key]) from None
            raise
        report.uploaded.append(manifest_key)
        report.uploaded_files += 1
        report.uploaded_bytes += manifest_size
    report.seconds = time.monotonic() - started
    return report


def _same_artifact(s3, bucket: str, key: str, manifest: Manifest) -> bool:
    """Whether the published manifest at `key` lists exactly this build's files (path, size, sha256)."""
    import json

    try:
        published = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        files = {(f["path"], f["size"], f["sha256"]) for f in published["files"]}
    except (ValueError, KeyError, TypeError):
        return False
    return published.get("content_hash") == manifest.content_hash and files == {
        (e.path, e.size, e.sha256) for e in manifest.files
    }


def _verify_single_request_files(verifier: _Verifier, multipart_threshold: int) -> None:
    """Files sent in one PutObject (below the multipart threshold) have no completion to gate: hash them before
    anything is sent (they are the small ones), and refuse at once if one differs."""
    small = [k for k, e in verifier.entries.items() if e.size < multipart_threshold]
    verifier.start(small)
    problems = [p for k in small if (p := verifier.check(k, final=False))]
    if problems:
        raise _changed_error(verifier.build_dir, problems)


def _finish_verification(verifier: _Verifier, items: list[_Item], s3, bucket: str, multipart_threshold: int) -> None:
    """After the uploads: every file (uploaded or skipped) hashed to the manifest's sha256 and unchanged since the
    start, else refuse manifest.json. A file sent in one request that changed after it was hashed may have been
    sent changed. Its object cannot be replaced (the prefix is write-once), but S3 computed its SHA256 checksum on
    upload, and a later publish compares that with the manifest (`_existing`), so it never skips such an object: it
    names it instead. The artifact check does the same before a deploy."""
    problems = [p for k in verifier.entries if (p := verifier.check(k))]
    if not problems:
        return
    raise _changed_error(verifier.build_dir, problems, after_upload=True)


def _prefix_items(build_dir, manifest, s3, bucket, prefix, report, max_concurrency) -> list[_Item]:
    entries = manifest.files
    with ThreadPoolExecutor(max_workers=max(1, min(max_concurrency, len(entries) or 1))) as pool:
        found = list(pool.map(lambda e: _existing(s3, bucket, prefix + e.path), entries))
    items = []
    for entry, have in zip(entries, found):
        if have == (entry.size, entry.sha256):
            report.skipped_files += 1
            report.skipped_bytes += entry.size
        else:
            items.append((build_dir / entry.path, prefix + entry.path, entry.size, {"sha256": entry.sha256}))
    return items


def _tarball_items(build_dir, manifest, s3, bucket, prefix, report, packer) -> list[_Item]:
    """Pack model.tar.gz unless an archive of this content hash is already there (then skip packing too)."""
    key = prefix + TARBALL_NAME
    from botocore.exceptions import ClientError

    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
            raise
        head = None
    if head and head.get("Metadata", {}).get("content-hash") == manifest.content_hash:
        report.skipped_files += 1
        report.skipped_bytes += head["ContentLength"]
        return []
    # Next to the build dir, not in /tmp: the archive is as large as the model, and /tmp is often a small tmpfs.
    tmp = Path(tempfile.mkdtemp(prefix=".model-tar-", dir=build_dir.resolve().parent))
    dest = tmp / TARBALL_NAME
    t0 = time.monotonic()
    names = [e.path for e in manifest.files] + [MANIFEST_NAME]
    try:
        report.packer = pack_tarball(build_dir, names, dest, packer=packer)
    except TarballError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise PublishError(str(err)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report.pack_seconds = time.monotonic() - t0
    meta = {"sha256": sha256_file(dest), "content-hash": manifest.content_hash}
    return [(dest, key, dest.stat().st_size, meta)]


def publish_endpoint(
    environment_plan: EnvironmentPlan,
    plan: EndpointPlan,
    build_dir: Path,
    *,
    session=None,
    max_concurrency: int = 8,
    progress: bool | None = None,
    max_bandwidth: int | None = None,
) -> PublishReport:
    """Publish build_dir as the artifact of one endpoint (`deployment.EndpointPlan`) of a resolved config: into the
    environment's artifact bucket, under the prefix the stack deploys."""
    from endpoint_config import artifact_prefix

    ep = plan.spec
    build_dir = Path(build_dir)
    if not (build_dir / MANIFEST_NAME).is_file():
        raise PublishError(
            f"{build_dir} has no {MANIFEST_NAME}: endpoint {ep.name!r} is not built; run `python -m model_build build "
            f"--config {environment_plan.config_path} --env {environment_plan.environment_name} --endpoint {ep.name}` first"
        )
    manifest = load_manifest(build_dir)
    if ep.artifact_hash and ep.artifact_hash != manifest.content_hash:
        raise PublishError(
            f"endpoint {ep.name!r} pins artifact_hash {ep.artifact_hash[:12]}..., but {build_dir} holds "
            f"{manifest.content_hash[:12]}...; remove the pin to publish this build, or publish the pinned build"
        )
    try:
        in_account = manifest.built_in_account
    except ManifestError as err:
        raise PublishError(str(err)) from None
    if in_account is not None:  # built and published by the recipe build: nothing here to upload
        return _check_published_in_account(environment_plan, plan, manifest, build_dir, session=session)
    if "staging" in manifest.document:  # a metadata-only build: its weights go Hub -> S3 in the account
        from model_build.stage import StageError, stage_endpoint

        try:
            return stage_endpoint(environment_plan, plan, build_dir, session=session, quiet=progress is False)
        except StageError as err:
            raise PublishError(str(err)) from None
    bucket, s3 = artifact_bucket_client(environment_plan, session=session, max_concurrency=max_concurrency)
    return publish_artifact(
        build_dir,
        bucket,
        artifact_prefix(ep.name, manifest.content_hash),
        s3_client=s3,
        max_concurrency=max_concurrency,
        model_data=ep.model_data,
        progress=progress,
        manifest=manifest,
        bucket_checked=True,
        max_bandwidth=max_bandwidth,
    )


def _check_published_in_account(
    environment_plan: EnvironmentPlan, plan: EndpointPlan, manifest: Manifest, build_dir: Path, *, session=None
) -> PublishReport:
    """A build folder `model_build build --in-account` fetched (its manifest's `built_in_account`): the recipe build
    published every file and manifest.json, last, from the account, so publish sends nothing. It checks that this
    environment's bucket holds that manifest with the same files, and reports all of them as skipped."""
    from endpoint_config import artifact_prefix

    built = manifest.built_in_account
    assert built is not None
    bucket, s3 = artifact_bucket_client(environment_plan, session=session)
    prefix = artifact_prefix(plan.name, manifest.content_hash)
    again = (
        f"run `python -m model_build build --in-account --config {environment_plan.config_path} --env "
        f"{environment_plan.environment_name} --endpoint {plan.name}` again (or build it here: remove {build_dir})"
    )
    if built.bucket != bucket:
        raise PublishError(
            f"{build_dir} was built in the account into bucket {built.bucket!r} (CodeBuild build {built.build_id}), "
            f"not this environment's {bucket!r}: {again}"
        )
    if _existing(s3, bucket, prefix + MANIFEST_NAME) is None or not _same_artifact(
        s3, bucket, prefix + MANIFEST_NAME, manifest
    ):
        raise PublishError(
            f"{build_dir} was built in the account by CodeBuild build {built.build_id}, but s3://{bucket}/{prefix}"
            f"{MANIFEST_NAME} is not there with its files (deleted since, or never finished): {again}"
        )
    mode: ModelData = "tar-gz" if plan.model_data_mode == "tar-gz" else "s3-prefix"
    report = PublishReport(bucket=bucket, prefix=prefix, model_data=mode)
    report.content_hash = manifest.content_hash
    report.skipped_files = len(manifest.files) + 1
    report.skipped_bytes = sum(e.size for e in manifest.files)
    return report


def artifact_bucket_client(
    environment_plan: EnvironmentPlan, *, session=None, max_concurrency: int = 8
) -> tuple[str, object]:
    """The environment's artifact bucket and an S3 client for it, after checking the account and that the bucket
    exists (PublishError naming what to deploy first)."""
    from botocore.config import Config
    from botocore.exceptions import ClientError

    from deployment.aws import AccountError, checked_account, session_for

    session = session or session_for(environment_plan.environment)
    region = environment_plan.environment.region or session.region_name
    if not region:
        raise PublishError("no AWS region: set `region:` on the environment in the config, or AWS_REGION")
    try:
        account = checked_account(environment_plan, session, region)
    except AccountError as err:
        raise PublishError(str(err)) from None
    bucket = environment_plan.artifact_bucket(account, region)
    s3 = session.client("s3", region_name=region, config=Config(max_pool_connections=_pool_size(max_concurrency)))
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise PublishError(_bucket_problem(bucket, err)) from None
        raise PublishError(
            f"artifact bucket {bucket!r} does not exist in account {account}, region {region}: deploy the artifacts "
            f"stack first: `npx cdk deploy -c config={environment_plan.config_path} -c env={environment_plan.environment_name} "
            f"{environment_plan.stack_name('artifacts')}`"
        ) from None
    return bucket, s3
