"""model_build.publish against a real moto S3 server: upload, skip unchanged, refuse edits, multipart, tar-gz."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile
import uuid
from pathlib import Path

import boto3
import pytest
from hermetic import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # until the repo's pytest config sets `pythonpath = .`
    sys.path.insert(0, str(ROOT))

from artifact.tarball import choose_packer, pack_tarball
from deployment import load_config
from endpoint_config import artifact_bucket_name, artifact_prefix
from model_build.publish import MiB, PublishError, publish_artifact, publish_endpoint

# slow: uploads to the emulator, a Ctrl-C mid-upload (make test-fast leaves them out)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3(emulator):
    env = emulator.client_env()
    return boto3.client(
        "s3",
        endpoint_url=emulator.url,
        region_name=emulator.region,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )


@pytest.fixture
def bucket(s3):
    name = f"test-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def _write_manifest(build: Path) -> dict:
    """What model_build writes: every file but the manifest, with size and sha256, plus a content hash."""
    files = []
    for p in sorted(build.rglob("*")):
        if p.is_file() and p.name != "manifest.json":
            data = p.read_bytes()
            files.append(
                {"path": p.relative_to(build).as_posix(), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            )
    content_hash = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    manifest = {"files": files, "content_hash": content_hash}
    (build / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def make_build(root: Path, big_bytes: int = 0) -> Path:
    build = root / f"build-{uuid.uuid4().hex[:8]}"
    (build / "code").mkdir(parents=True)
    (build / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    rnd = os.urandom(300_000)
    (build / "model-00001-of-00002.safetensors").write_bytes(rnd)
    (build / "model-00002-of-00002.safetensors").write_bytes(rnd[::-1])
    (build / "code" / "inference.py").write_text("def model_fn(model_dir):\n    return None\n")
    if big_bytes:
        (build / "big.safetensors").write_bytes(os.urandom(big_bytes))
    _write_manifest(build)
    return build


def record_writes(s3) -> list[str]:
    """Keys in the order their objects became visible (PutObject, CompleteMultipartUpload)."""
    order: list[str] = []

    def on_call(params, **kwargs):
        order.append(params["Key"])

    s3.meta.events.register("before-parameter-build.s3.PutObject", on_call, unique_id="rec-put")
    s3.meta.events.register("before-parameter-build.s3.CompleteMultipartUpload", on_call, unique_id="rec-mpu")
    return order


def unregister(s3) -> None:
    s3.meta.events.unregister("before-parameter-build.s3.PutObject", unique_id="rec-put")
    s3.meta.events.unregister("before-parameter-build.s3.CompleteMultipartUpload", unique_id="rec-mpu")


def test_upload_then_republish_skips_everything(s3, bucket, tmp_path):
    build = make_build(tmp_path)
    manifest = json.loads((build / "manifest.json").read_text())
    prefix = artifact_prefix("ep", manifest["content_hash"])
    order = record_writes(s3)
    writes: list[str] = []
    s3.meta.events.register(
        "before-call.s3.PutObject",
        lambda params, **kw: writes.append(params["headers"].get("If-None-Match")),
        unique_id="rec-inm",
    )
    try:
        first = publish_artifact(build, bucket, prefix, s3_client=s3, progress=False)
    finally:
        unregister(s3)
        s3.meta.events.unregister("before-call.s3.PutObject", unique_id="rec-inm")
    n = len(manifest["files"]) + 1
    assert (first.uploaded_files, first.skipped_files) == (n, 0)
    assert first.uploaded_bytes == sum(p.stat().st_size for p in build.rglob("*") if p.is_file())
    # manifest.json is written last: its presence marks a complete artifact.
    assert len(order) == n and order[-1] == prefix + "manifest.json"
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
    assert keys == {prefix + f["path"] for f in manifest["files"]} | {prefix + "manifest.json"}
    head = s3.head_object(Bucket=bucket, Key=prefix + "config.json")
    assert head["Metadata"]["sha256"] == next(f["sha256"] for f in manifest["files"] if f["path"] == "config.json")
    body = s3.get_object(Bucket=bucket, Key=prefix + "model-00001-of-00002.safetensors")["Body"].read()
    assert body == (build / "model-00001-of-00002.safetensors").read_bytes()

    second = publish_artifact(build, bucket, prefix, s3_client=s3, progress=False)
    assert (second.uploaded_files, second.uploaded_bytes, second.skipped_files) == (0, 0, n)

    # Every write of the prefix was conditional (If-None-Match: *): S3 refuses to replace an object that exists.
    assert set(writes) == {"*"} and len(writes) == n

    # An object replaced behind publish's back (what the bucket policy denies on AWS; the emulator does not
    # evaluate bucket policies) is not trusted, and never overwritten: publish names it (write-once).
    s3.put_object(Bucket=bucket, Key=prefix + "config.json", Body=b'{"model_type": "evil"}')
    with pytest.raises(PublishError, match=r"write-once(.|\n)*" + prefix + "config.json"):
        publish_artifact(build, bucket, prefix, s3_client=s3, progress=False)
    assert s3.get_object(Bucket=bucket, Key=prefix + "config.json")["Body"].read() == b'{"model_type": "evil"}'


def test_changed_build_dir_is_refused_naming_the_file(s3, bucket, tmp_path):
    build = make_build(tmp_path)
    shard = build / "model-00002-of-00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF  # same size, other content
    shard.write_bytes(bytes(data))
    with pytest.raises(
        PublishError, match=r"changed since it was built(.|\n)*model-00002-of-00002\.safetensors: sha256"
    ):
        publish_artifact(build, bucket, "models/ep/x/", s3_client=s3, progress=False)
    (build / "config.json").write_text("{}")
    with pytest.raises(PublishError, match=r"config\.json: size"):
        publish_artifact(build, bucket, "models/ep/x/", s3_client=s3, progress=False)
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0  # refused before anything was sent


def _edit_once(s3, operation: str, key: str, path: Path) -> dict:
    """Flip a byte of `path` in place (same size and inode, new mtime) the first time `operation` is called for
    `key`: an edit while the publish is running. Returns the state: {"done": bool, "original": bytes}."""
    state = {"done": False, "original": path.read_bytes()}

    def edit(params, **kwargs):
        if params.get("Key") == key and not state["done"]:
            state["done"] = True
            with open(path, "r+b") as f:
                f.seek(1000)
                byte = f.read(1)
                f.seek(1000)
                f.write(bytes([byte[0] ^ 0xFF]))

    s3.meta.events.register(f"before-parameter-build.s3.{operation}", edit, unique_id=f"edit-{operation}")
    return state


def _complete(s3, bucket: str, prefix: str) -> bool:
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])}
    return prefix + "manifest.json" in keys


def test_edit_during_a_multipart_upload_marks_nothing_complete(s3, bucket, tmp_path):
    """The file changes after its upload began: its multipart upload is aborted (no object carries the manifest's
    sha256 for other bytes), manifest.json is not written, and a publish of the restored file completes."""
    build = make_build(tmp_path, big_bytes=12 * MiB)
    prefix = "models/ep/edit-mid/"
    big = build / "big.safetensors"
    state = _edit_once(s3, "UploadPart", prefix + "big.safetensors", big)
    try:
        with pytest.raises(
            PublishError,
            match=r"changed since it was built \(refusing to publish while it was being "
            r"published; manifest.json was not written(.|\n)*big\.safetensors: (sha256|changed while)",
        ):
            publish_artifact(
                build, bucket, prefix, s3_client=s3, progress=False, multipart_threshold=5 * MiB, max_concurrency=2
            )
    finally:
        s3.meta.events.unregister("before-parameter-build.s3.UploadPart", unique_id="edit-UploadPart")
    assert state["done"]
    assert not _complete(s3, bucket, prefix)
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])}
    assert prefix + "big.safetensors" not in keys  # never completed
    assert not s3.list_multipart_uploads(Bucket=bucket).get("Uploads")  # and aborted, not left to linger

    big.write_bytes(state["original"])  # restored: the same bytes as built, a new mtime
    report = publish_artifact(build, bucket, prefix, s3_client=s3, progress=False, multipart_threshold=5 * MiB)
    assert prefix + "big.safetensors" in report.uploaded and report.uploaded[-1] == prefix + "manifest.json"
    assert s3.get_object(Bucket=bucket, Key=prefix + "big.safetensors")["Body"].read() == state["original"]


def test_multipart_file_edited_before_publish_is_refused_while_uploading(s3, bucket, tmp_path):
    build = make_build(tmp_path, big_bytes=12 * MiB)
    big = build / "big.safetensors"
    data = bytearray(big.read_bytes())
    data[5] ^= 0xFF  # same size: only its hash, computed while it uploads, can tell
    big.write_bytes(bytes(data))
    prefix = "models/ep/edit-before/"
    with pytest.raises(PublishError, match=r"manifest.json was not written(.|\n)*big\.safetensors: sha256"):
        publish_artifact(build, bucket, prefix, s3_client=s3, progress=False, multipart_threshold=5 * MiB)
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])}
    assert prefix + "big.safetensors" not in keys and prefix + "manifest.json" not in keys
    assert not s3.list_multipart_uploads(Bucket=bucket).get("Uploads")


def test_edit_during_a_single_request_upload_leaves_no_trusted_object(s3, bucket, tmp_path):
    """A file sent in one PutObject is hashed before it is sent; changed while it was sent, its object stays (the
    prefix is write-once), but S3's own SHA256 checksum of it differs from the manifest: the next publish never
    skips it, it names it; once an administrator deleted it, publish finishes."""
    build = make_build(tmp_path)
    prefix = "models/ep/edit-put/"
    shard = build / "model-00001-of-00002.safetensors"
    state = _edit_once(s3, "PutObject", prefix + shard.name, shard)
    try:
        with pytest.raises(
            PublishError,
            match=r"manifest.json was not written(.|\n)*model-00001-of-00002"
            r"\.safetensors: changed while it was being published",
        ):
            publish_artifact(build, bucket, prefix, s3_client=s3, progress=False)
    finally:
        s3.meta.events.unregister("before-parameter-build.s3.PutObject", unique_id="edit-PutObject")
    assert state["done"] and not _complete(s3, bucket, prefix)
    shard.write_bytes(state["original"])
    with pytest.raises(PublishError, match=r"write-once(.|\n)*" + prefix + shard.name):
        publish_artifact(build, bucket, prefix, s3_client=s3, progress=False)
    assert not _complete(s3, bucket, prefix)
    s3.delete_object(Bucket=bucket, Key=prefix + shard.name)
    report = publish_artifact(build, bucket, prefix, s3_client=s3, progress=False)
    assert prefix + shard.name in report.uploaded and _complete(s3, bucket, prefix)
    assert s3.get_object(Bucket=bucket, Key=prefix + shard.name)["Body"].read() == state["original"]


def test_multipart_upload_with_small_threshold(s3, bucket, tmp_path):
    build = make_build(tmp_path, big_bytes=12 * MiB)
    report = publish_artifact(
        build,
        bucket,
        "models/ep/mp/",
        s3_client=s3,
        progress=False,
        multipart_threshold=5 * MiB,
        max_concurrency=4,
    )
    assert report.uploaded_files == 6
    head = s3.head_object(Bucket=bucket, Key="models/ep/mp/big.safetensors")
    assert head["ETag"].strip('"').endswith("-3")  # 3 parts of 5 MiB: the multipart path ran
    assert head["ContentLength"] == 12 * MiB
    assert head["Metadata"]["sha256"] == hashlib.sha256((build / "big.safetensors").read_bytes()).hexdigest()
    body = s3.get_object(Bucket=bucket, Key="models/ep/mp/big.safetensors")["Body"].read()
    assert body == (build / "big.safetensors").read_bytes()
    again = publish_artifact(build, bucket, "models/ep/mp/", s3_client=s3, progress=False, multipart_threshold=5 * MiB)
    assert again.uploaded_files == 0  # multipart objects keep the sha256 metadata: skipped too


@pytest.mark.parametrize("packer", [None, "tar+gzip", "tarfile"])
def test_tar_gz_mode_round_trips(s3, bucket, tmp_path, packer):
    build = make_build(tmp_path)
    report = publish_artifact(
        build, bucket, "models/ep/tgz/", s3_client=s3, progress=False, model_data="tar-gz", packer=packer
    )
    assert report.uploaded == ["models/ep/tgz/model.tar.gz", "models/ep/tgz/manifest.json"]
    assert report.model_data_url == f"s3://{bucket}/models/ep/tgz/model.tar.gz"
    assert report.packer == (packer or choose_packer())
    blob = s3.get_object(Bucket=bucket, Key="models/ep/tgz/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    expected = {p.relative_to(build).as_posix(): p.read_bytes() for p in build.rglob("*") if p.is_file()}
    assert members == expected  # files at the archive root, as SageMaker extracts into /opt/ml/model
    again = publish_artifact(build, bucket, "models/ep/tgz/", s3_client=s3, progress=False, model_data="tar-gz")
    assert (again.uploaded_files, again.packer) == (0, None)  # same content hash: not even packed


def test_packers_are_deterministic_and_agree(tmp_path):
    build = make_build(tmp_path)
    names = [p.relative_to(build).as_posix() for p in build.rglob("*") if p.is_file()]
    out = {}
    for packer in ("tar+gzip", "tarfile"):
        a, b = tmp_path / f"{packer}-a.tgz", tmp_path / f"{packer}-b.tgz"
        pack_tarball(build, names, a, packer=packer)
        pack_tarball(build, names, b, packer=packer)
        assert a.read_bytes() == b.read_bytes()
        with tarfile.open(a) as tar:
            out[packer] = sorted((m.name, m.size) for m in tar.getmembers())
    assert out["tar+gzip"] == out["tarfile"]


def test_pigz_is_preferred_when_installed(tmp_path, monkeypatch):
    # This machine has no pigz: a stand-in with pigz's command line (gzip accepts -1 -n -c too) runs the path.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pigz").write_text('#!/bin/sh\nexec gzip "$@"\n')
    (bin_dir / "pigz").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert choose_packer() == "tar+pigz"
    build = make_build(tmp_path)
    dest = tmp_path / "m.tar.gz"
    assert pack_tarball(build, ["config.json", "code/inference.py"], dest) == "tar+pigz"
    with tarfile.open(dest) as tar:
        assert sorted(tar.getnames()) == ["code/inference.py", "config.json"]


def test_a_failed_packer_is_a_publish_error_and_leaves_nothing(s3, bucket, tmp_path, monkeypatch):
    # artifact/tarball.py raises TarballError (it knows nothing of publishing); publish names it as a PublishError,
    # which the CLI prints without a traceback, and removes its half-written archive.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gzip").write_text('#!/bin/sh\necho "gzip: disk full" >&2\nexit 1\n')
    (bin_dir / "gzip").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    build = make_build(tmp_path / "b")
    with pytest.raises(PublishError, match=r"packing model.tar.gz failed: .*gzip: disk full"):
        publish_artifact(
            build, bucket, "models/ep/bad/", s3_client=s3, progress=False, model_data="tar-gz", packer="tar+gzip"
        )
    assert not list(build.parent.glob(".model-tar-*"))
    assert s3.list_objects_v2(Bucket=bucket, Prefix="models/ep/bad/").get("KeyCount") == 0


def test_missing_bucket_is_named(s3, tmp_path):
    with pytest.raises(PublishError, match=r"bucket 'no-such-bucket-x' does not exist"):
        publish_artifact(make_build(tmp_path), "no-such-bucket-x", "models/ep/h/", s3_client=s3, progress=False)


# ---------------------------------------------------------------------------------------------- publish_endpoint


@pytest.fixture
def environment_plan():
    return load_config(ROOT / "config" / "local.yaml", "local")


def test_publish_endpoint_resolves_bucket_and_prefix(emulator, s3, tmp_path, environment_plan):
    ep = environment_plan.endpoints[0]
    env = environment_plan.environment
    bucket = artifact_bucket_name(environment_plan.project, environment_plan.environment_name, env.account, env.region)
    build = make_build(tmp_path)
    manifest = json.loads((build / "manifest.json").read_text())
    with emulator.activated():
        with pytest.raises(PublishError, match="deploy the artifacts stack first"):
            publish_endpoint(environment_plan, environment_plan.plan(ep.name), build, progress=False)
        s3.create_bucket(Bucket=bucket)
        try:
            report = publish_endpoint(environment_plan, environment_plan.plan(ep.name), build, progress=False)
        finally:
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
            for k in keys:
                s3.delete_object(Bucket=bucket, Key=k)
            s3.delete_bucket(Bucket=bucket)
    prefix = f"models/{ep.name}/{manifest['content_hash']}/"
    assert (report.bucket, report.prefix) == (bucket, prefix)
    assert prefix + "manifest.json" in keys
    assert report.model_data_url == f"s3://{bucket}/{prefix}"


def test_publish_endpoint_without_manifest(emulator, tmp_path, environment_plan):
    (tmp_path / "empty").mkdir()
    with emulator.activated(), pytest.raises(PublishError, match=r"run `python -m model_build build"):
        publish_endpoint(environment_plan, environment_plan.plans[0], tmp_path / "empty", progress=False)


def test_ctrl_c_stops_the_publish_cleanly(emulator, s3, tmp_path, environment_plan):
    """SIGINT to `python -m model_build publish` while a multipart upload runs: exit 130 with one line, no traceback,
    the in-flight multipart uploads aborted, no manifest.json (so nothing marks the artifact complete), and the
    process gone within seconds rather than after the remaining uploads. (s3transfer 0.19.3's
    TransferManager.shutdown(cancel=True) raised TypeError here: model_build/publish.py says why it is not used.)"""
    import signal
    import subprocess
    import time

    ep = environment_plan.endpoints[0]
    env = environment_plan.environment
    bucket = artifact_bucket_name(environment_plan.project, environment_plan.environment_name, env.account, env.region)
    build = make_build(tmp_path, big_bytes=80 * MiB)  # above the 64 MiB multipart threshold
    s3.create_bucket(Bucket=bucket)
    # Ctrl-C in a terminal reaches a process whose SIGINT is the default; a command started in the background by a
    # non-interactive shell (as a CI runner may start `make test`) inherits SIGINT ignored, and Python then leaves it
    # ignored. So the CLI runs with Python's own SIGINT handler, as from a terminal.
    as_from_a_terminal = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('model_build', run_name='__main__', alter_sys=True)"
    )
    command = [
        sys.executable,
        "-c",
        as_from_a_terminal,
        "publish",
        "--config",
        str(ROOT / "config" / "local.yaml"),
        "--env",
        "local",
        "--endpoint",
        ep.name,
        "--artifact",
        str(build),
        "--max-bandwidth",
        "4",
    ]  # ~20 s for the 80 MiB: the signal lands mid-upload on a loaded machine
    child = subprocess.Popen(
        command,
        cwd=ROOT,
        env=subprocess_env(**emulator.client_env()),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not s3.list_multipart_uploads(Bucket=bucket).get("Uploads"):
            assert child.poll() is None and time.monotonic() < deadline, "the multipart upload never started"
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        out, err = child.communicate(timeout=60)
        took = time.monotonic() - interrupted
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
        pending = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    finally:
        if child.poll() is None:
            child.kill()
        for key in [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]:
            s3.delete_object(Bucket=bucket, Key=key)
        for upload in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
        s3.delete_bucket(Bucket=bucket)
    assert child.returncode == 130, out + err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("interrupted"), err
    assert not [k for k in keys if k.endswith("manifest.json")], keys
    assert not pending, pending
    assert took < 10, f"the publish took {took:.1f} s to stop"


def test_a_failed_upload_is_named_and_nothing_is_marked_complete(s3, bucket, tmp_path):
    """One PUT refused by S3: PublishError naming the key (the cancel of the other transfers must not raise
    instead), and no manifest.json."""
    from botocore.exceptions import ClientError

    build = make_build(tmp_path)

    def refuse(params, **kwargs):
        if params.get("Key", "").endswith("config.json"):
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "denied"}}, "PutObject")

    s3.meta.events.register("before-parameter-build.s3.PutObject", refuse, unique_id="refuse-config")
    try:
        with pytest.raises(PublishError) as err:
            publish_artifact(build, bucket, "p/", s3_client=s3, progress=False)
    finally:
        s3.meta.events.unregister("before-parameter-build.s3.PutObject", unique_id="refuse-config")
    assert "failed for 1 file(s); manifest.json was not written" in str(err.value)
    assert "p/config.json: An error occurred (AccessDenied)" in str(err.value)
    assert not _complete(s3, bucket, "p/")


@pytest.mark.parametrize("value", ["0", "-3", "fast", "nan", "inf"])
def test_a_bandwidth_cap_that_is_not_a_positive_number_is_refused(value, capsys):
    from model_build.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "publish",
                "--config",
                str(ROOT / "config" / "local.yaml"),
                "--endpoint",
                "tiny-gpt2",
                "--max-bandwidth",
                value,
            ]
        )
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--max-bandwidth: must be a positive number of MiB/s, got {value!r}" in err and "Traceback" not in err
