"""The staging job's test parts: a real HTTP server on 127.0.0.1 that answers the Hub's resolve route (with Range, an
optional bearer token, an optional redirect to a second host as the Hub's CDN, a throttle and a corruption switch),
specs made from bytes, and a bucket on the module's moto server. The fixtures are registered by conftest.py."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from helpers import ROOT, serve_in_thread

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "tiny-org/tiny-model"
BUCKET = "staging-test-bucket"
MiB = 1024 * 1024


@dataclass
class FakeHub:
    """What the server serves and what it saw. `files`: path -> bytes; `token`: required bearer (None: open);
    `cdn`: LFS-like files (>= 1 MiB) redirect to the same server by its other name (localhost vs 127.0.0.1), as
    the Hub sends weights to its CDN; `rate`: bytes/s per response (None: as fast as it goes); `corrupt`: paths
    whose bytes are served with one byte flipped."""

    port: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    token: str | None = None
    cdn: bool = False
    rate: float | None = None
    corrupt: set[str] = field(default_factory=set)
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # (host, path, headers)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _handler(hub: FakeHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            host = self.headers.get("Host", "")
            hub.seen.append((host, self.path, dict(self.headers)))
            cdn_prefix = "/cdn/"
            if self.path.startswith(cdn_prefix):
                path = self.path[len(cdn_prefix) :]
                return self._send(path)
            prefix = f"/{REPO}/resolve/{COMMIT}/"
            if not self.path.startswith(prefix):
                return self._status(404)
            path = self.path[len(prefix) :]
            if hub.token is not None and self.headers.get("Authorization") != f"Bearer {hub.token}":
                return self._status(401)
            if path not in hub.files:
                return self._status(404)
            if hub.cdn and len(hub.files[path]) >= MiB:
                self.send_response(302)
                self.send_header("Location", f"http://localhost:{hub.port}/cdn/{path}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._send(path)

        def _status(self, code: int) -> None:
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _send(self, path: str) -> None:
            data = hub.files[path]
            if path in hub.corrupt:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            start = 0
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes="):
                start = int(rng[len("bytes=") :].split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = memoryview(data)[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            chunk = 256 * 1024
            for i in range(0, len(body), chunk):
                try:
                    self.wfile.write(body[i : i + chunk])
                except OSError:
                    return
                if hub.rate:
                    time.sleep(chunk / hub.rate)

    return Handler


@pytest.fixture
def fake_hub() -> Iterator[FakeHub]:
    hub = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    hub.port = server.server_address[1]
    thread = serve_in_thread(server)
    yield hub
    server.shutdown()
    server.server_close()
    thread.join()


def file_entry(path: str, data: bytes) -> dict[str, Any]:
    return {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def make_spec(
    hub: FakeHub, staged: dict[str, bytes], local: dict[str, bytes], token_secret: str | None = None
) -> dict[str, Any]:
    """A manifest as the metadata-only build writes it: every file listed, the staged ones named in staging.files."""
    from artifact.manifest import content_hash

    files = [file_entry(p, d) for p, d in sorted({**staged, **local}.items())]
    return {
        "schema_version": 1,
        "endpoint": "tiny",
        "model": {"source": REPO, "commit": COMMIT},
        "files": files,
        "content_hash": content_hash(files),
        "staging": {
            "hub": {"endpoint": hub.url, "repo_id": REPO, "commit": COMMIT},
            "files": sorted(staged),
            "token_secret": token_secret,
        },
    }


@dataclass
class Staging:
    """A bucket on the moto server, the spec uploaded to it, and the build's own files uploaded under the prefix."""

    s3: Any
    spec: dict[str, Any]
    spec_uri: str
    prefix: str
    env: dict[str, str]

    @property
    def destination(self) -> str:
        return f"s3://{BUCKET}/{self.prefix}"

    def command(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "weights_staging",
            "--spec",
            self.spec_uri,
            "--destination",
            self.destination,
            "--part-size-mib",
            "5",
            *extra,
        ]

    def run(self, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(*extra), env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )

    def start(self, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            self.command(*extra), env=self.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def keys(self) -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=self.prefix).get("Contents", [])
        return sorted(o["Key"][len(self.prefix) :] for o in listed)

    def uploads(self) -> list[str]:
        return [u["Key"] for u in self.s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])]


@pytest.fixture
def staging(moto_env: Any, fake_hub: FakeHub):
    """staging(staged, local, token_secret=None) -> Staging, on an empty moto server."""
    import boto3

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    env = {**os.environ, **moto_env.client_env(), "PYTHONPATH": str(ROOT)}

    def make(staged: dict[str, bytes], local: dict[str, bytes], token_secret: str | None = None) -> Staging:
        spec = make_spec(fake_hub, staged, local, token_secret)
        prefix = f"models/tiny/{spec['content_hash']}/"
        raw = json.dumps(spec, indent=2).encode()
        s3.put_object(Bucket=BUCKET, Key=f"staging/tiny/{spec['content_hash']}.json", Body=raw)
        for path, data in local.items():
            s3.put_object(
                Bucket=BUCKET, Key=prefix + path, Body=data, Metadata={"sha256": hashlib.sha256(data).hexdigest()}
            )
        fake_hub.files.update(staged)
        return Staging(s3, spec, f"s3://{BUCKET}/staging/tiny/{spec['content_hash']}.json", prefix, env)

    return make


def random_bytes(n: int, seed: int) -> bytes:
    import random

    return random.Random(seed).randbytes(n)


def object_sha(s3: Any, key: str, bucket: str = BUCKET) -> str:
    digest = hashlib.sha256()
    for chunk in s3.get_object(Bucket=bucket, Key=key)["Body"].iter_chunks(MiB):
        digest.update(chunk)
    return digest.hexdigest()
