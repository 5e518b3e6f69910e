"""The staging job, run as it runs in AWS (`python -m weights_staging`), against a real HTTP server standing in for
the Hub and the moto server's S3 and Secrets Manager: it streams and verifies, refuses corrupted bytes leaving
nothing, resumes after SIGKILL, skips verified objects, reads the token inside the job and never prints it, writes
manifest.json last and write-once, and says how far it is."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import time

import pytest
from stage_hub import BUCKET, MiB, object_sha, random_bytes

from weights_staging import job

CONFIG = {"config.json": b'{"model_type": "tiny"}\n', "tokenizer.json": b'{"version": "1.0"}\n'}


def weights(n: int = 2, size: int = 12 * MiB) -> dict[str, bytes]:
    return {f"model-{i:05d}-of-{n:05d}.safetensors": random_bytes(size, seed=i) for i in range(1, n + 1)}


def test_streams_verifies_and_writes_the_manifest_last(staging, fake_hub):
    staged = {**weights(), "small.bin": random_bytes(1000, 9)}
    st = staging(staged, CONFIG)
    done = st.run("--progress-interval", "0.2")
    assert done.returncode == 0, done.stderr
    assert st.keys() == sorted([*staged, *CONFIG, "manifest.json"])
    for path, data in staged.items():
        head = st.s3.head_object(Bucket=BUCKET, Key=st.prefix + path)
        assert head["Metadata"]["sha256"] == hashlib.sha256(data).hexdigest()
        assert object_sha(st.s3, st.prefix + path) == hashlib.sha256(data).hexdigest()
    manifest = st.s3.get_object(Bucket=BUCKET, Key=st.prefix + "manifest.json")["Body"].read()
    assert json.loads(manifest) == st.spec
    assert st.uploads() == []
    # 12 MiB with 5 MiB parts: three parts each, so the multipart path ran (no part left behind).
    assert "2 file(s) moved" not in done.stdout and "3 file(s) moved, 0 already there" in done.stdout


def test_manifest_is_the_last_write(staging, fake_hub, moto_env):
    """In-process, with an event hook on the job's own S3 client recording each write that creates an object."""
    import boto3

    st = staging(weights(), CONFIG)
    writes: list[str] = []
    session = boto3.session.Session()

    def record(params, **kwargs):
        writes.append(params["Key"].rsplit("/", 1)[-1])

    session.events.register("before-parameter-build.s3.PutObject", record)
    session.events.register("before-parameter-build.s3.CompleteMultipartUpload", record)
    job.run(st.spec_uri, st.destination, session=session, part_size=5 * MiB, interval=60, out=open("/dev/null", "w"))
    assert writes[-1] == "manifest.json" and writes.count("manifest.json") == 1
    assert sorted(writes[:-1]) == sorted(weights())


def test_a_corrupted_file_is_refused_leaving_no_object_and_no_manifest(staging, fake_hub):
    staged = weights()
    bad = sorted(staged)[1]
    fake_hub.corrupt.add(bad)
    st = staging(staged, CONFIG)
    done = st.run()
    assert done.returncode == 1
    want = hashlib.sha256(staged[bad]).hexdigest()
    served = bytes([staged[bad][0] ^ 0xFF]) + staged[bad][1:]
    assert f"{bad}: sha256 mismatch: the Hub's bytes hash to {hashlib.sha256(served).hexdigest()}" in done.stderr
    assert f"the manifest says {want}" in done.stderr
    assert "Traceback" not in done.stderr
    assert bad not in st.keys() and "manifest.json" not in st.keys()
    assert st.uploads() == []  # its multipart upload was aborted


def test_a_small_corrupted_file_is_refused_before_it_is_written(staging, fake_hub):
    staged = {"small.bin": random_bytes(2000, 3)}
    fake_hub.corrupt.add("small.bin")
    st = staging(staged, CONFIG)
    done = st.run()
    assert done.returncode == 1 and "small.bin: sha256 mismatch" in done.stderr
    assert st.keys() == sorted(CONFIG)


def test_a_rerun_skips_verified_objects_and_a_finished_prefix(staging, fake_hub):
    st = staging(weights(), CONFIG)
    assert st.run().returncode == 0
    st.s3.delete_object(Bucket=BUCKET, Key=st.prefix + "manifest.json")
    again = st.run()
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already staged and verified, skipped") == 2
    assert "0 file(s) moved, 2 already there" in again.stdout
    finished = st.run()
    assert finished.returncode == 0 and "is already complete" in finished.stdout
    # Only the spec and nothing of the weights was read from the Hub by the last two runs.
    cdn_or_resolve = [p for _, p, _ in fake_hub.seen if "safetensors" in p]
    assert len(cdn_or_resolve) == 2


def test_an_object_with_the_wrong_sha256_is_staged_again(staging, fake_hub):
    staged = weights(1)
    (path,) = staged
    st = staging(staged, CONFIG)
    st.s3.put_object(Bucket=BUCKET, Key=st.prefix + path, Body=b"stale", Metadata={"sha256": "0" * 64})
    done = st.run()
    assert done.returncode == 0, done.stderr
    assert object_sha(st.s3, st.prefix + path) == hashlib.sha256(staged[path]).hexdigest()


def test_resumes_after_sigkill(staging, fake_hub):
    """Killed mid-file: the next run aborts that file's unfinished upload, skips the finished files, and ends with
    byte-identical objects; no manifest.json until the run that finishes."""
    staged = weights(3, 8 * MiB)
    fake_hub.rate = 16 * MiB  # about 0.5 s a file
    st = staging(staged, CONFIG)
    proc = st.start("--progress-interval", "0.2")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listed = st.keys()
        if any(k.endswith(".safetensors") for k in listed) and st.uploads():
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_with = st.keys()
    assert "manifest.json" not in killed_with
    assert st.uploads(), "the kill came mid-upload"
    fake_hub.rate = None
    done = st.run()
    assert done.returncode == 0, done.stderr
    assert "aborted 1 unfinished upload(s) of an earlier run" in done.stdout
    assert "already staged and verified, skipped" in done.stdout
    for path, data in staged.items():
        assert object_sha(st.s3, st.prefix + path) == hashlib.sha256(data).hexdigest()
    assert st.uploads() == []
    assert "manifest.json" in st.keys()


def test_progress_lines_say_file_bytes_rate_and_time_left(staging, fake_hub):
    fake_hub.rate = 8 * MiB
    st = staging(weights(2, 6 * MiB), CONFIG)
    done = st.run("--progress-interval", "0.3")
    assert done.returncode == 0, done.stderr
    lines = [x for x in done.stdout.splitlines() if x.startswith("[staging] file ") and "total" in x]
    assert len(lines) >= 3
    pattern = re.compile(
        r"\[staging\] file [12]/2 model-\d+-of-00002\.safetensors: [\d.]+ (MiB|KiB|B|GiB)?/6\.00 MiB; total "
        r"[\d.]+ \w+/12\.00 MiB \([\d.]+ %\), [\d.]+ \w+/s, about (\d+[smh]\S*|unknown) left"
    )
    assert all(pattern.fullmatch(x) for x in lines), lines


def test_the_token_is_read_from_secrets_manager_and_never_printed(staging, fake_hub):
    import boto3

    token = "hf_SECRETtoken0123456789"
    fake_hub.token = token
    fake_hub.cdn = True
    boto3.client("secretsmanager").create_secret(Name="hub/token", SecretString=json.dumps({"token": token}))
    st = staging(weights(1), CONFIG, token_secret="hub/token")
    env = dict(st.env)
    assert not any(token in v for v in env.values())  # nothing in the job's environment
    done = st.run()
    assert done.returncode == 0, done.stderr
    assert token not in done.stdout + done.stderr
    assert "Hub token from secret hub/token" in done.stdout
    hub_calls = [(h, h2) for h, p, h2 in fake_hub.seen if "/resolve/" in p]
    cdn_calls = [(h, h2) for h, p, h2 in fake_hub.seen if p.startswith("/cdn/")]
    assert hub_calls and all(hd.get("Authorization") == f"Bearer {token}" for _, hd in hub_calls)
    # The redirect to the other host (the Hub's CDN) does not carry the token.
    assert cdn_calls and all("Authorization" not in hd for _, hd in cdn_calls)


def test_a_gated_model_without_a_token_says_what_to_do(staging, fake_hub):
    fake_hub.token = "hf_needed"
    st = staging(weights(1), CONFIG)
    done = st.run()
    assert done.returncode == 1
    assert "(HTTP 401): it is gated or private: store a Hub token in Secrets Manager" in done.stderr
    assert "manifest.json" not in st.keys()


def test_a_missing_secret_is_named(staging, fake_hub):
    st = staging(weights(1), CONFIG, token_secret="hub/none")
    done = st.run()
    assert done.returncode == 1
    assert "cannot read the Hub token from Secrets Manager secret 'hub/none' (ResourceNotFoundException)" in done.stderr


def test_the_build_files_must_be_uploaded_first(staging, fake_hub):
    st = staging(weights(1), CONFIG)
    st.s3.delete_object(Bucket=BUCKET, Key=st.prefix + "config.json")
    done = st.run()
    assert done.returncode == 1
    assert "config.json: missing; the manifest says 23 bytes" in done.stderr
    assert not any(k.endswith(".safetensors") for k in st.keys())


def test_a_published_prefix_is_write_once(staging, fake_hub):
    st = staging(weights(1), CONFIG)
    st.s3.put_object(Bucket=BUCKET, Key=st.prefix + "manifest.json", Body=b"{}")
    done = st.run()
    assert done.returncode == 1
    assert "exists with other content: the prefix is published and write-once" in done.stderr
    assert st.s3.get_object(Bucket=BUCKET, Key=st.prefix + "manifest.json")["Body"].read() == b"{}"


def test_moto_honours_if_none_match_on_put_object(moto_env):
    """The write-once rule rests on S3's conditional write (PutObject IfNoneMatch='*': 412 if the key exists,
    botocore's s3 model); moto 5.2.5 enforces it (moto/s3/responses.py), so the emulator shows the same."""
    import boto3
    from botocore.exceptions import ClientError

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="once")
    s3.put_object(Bucket="once", Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket="once", Key="k", Body=b"2", IfNoneMatch="*")
    assert err.value.response["Error"]["Code"] == "PreconditionFailed"


def test_the_destination_must_be_the_content_addressed_prefix(staging, fake_hub):
    st = staging(weights(1), CONFIG)
    st.prefix = "models/tiny/elsewhere/"
    done = st.run()
    assert done.returncode == 1 and "must end in the manifest's content hash" in done.stderr


# ------------------------------------------------------------------------------------------ the spec, without S3


def _spec(**staging) -> dict:
    from stage_hub import FakeHub, make_spec

    spec = make_spec(FakeHub(port=1), {"w.bin": b"x"}, {"config.json": b"{}"})
    spec["staging"].update(staging)
    return spec


@pytest.mark.parametrize(
    "change, message",
    [
        ({"hub": {"endpoint": "ftp://x", "repo_id": "a/b", "commit": "0" * 40}}, "staging.hub.endpoint 'ftp://x'"),
        ({"hub": {"endpoint": "http://x", "repo_id": "a/b", "commit": "main"}}, "staging.hub.commit 'main' must"),
        ({"files": ["nope.bin"]}, "staging.files names ['nope.bin'] that `files` does not list"),
        ({"token_secret": ""}, "staging.token_secret '' must be a Secrets Manager secret id or null"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(change, message):
    raw = json.dumps(_spec(**change)).encode()
    with pytest.raises(job.StagingError, match=re.escape(message)):
        job.parse_spec(raw, "s3://b/spec.json")


def test_an_edited_manifest_is_refused():
    spec = _spec()
    spec["files"][0]["sha256"] = "f" * 64
    with pytest.raises(job.StagingError, match="does not match its files"):
        job.parse_spec(json.dumps(spec).encode(), "spec")


def test_part_size_covers_the_file_in_10000_parts():
    assert job.part_size_for(1000) == 16 * MiB
    assert job.part_size_for(400 * 1024**3) == 41 * MiB  # 400 GiB / 10,000 = 40.96 MiB, rounded up to whole MiB
    for size in (5 * 1024**3, 123_456_789_012, job.MAX_OBJECT):
        part = job.part_size_for(size)
        assert -(-size // part) <= job.MAX_PARTS and part % MiB == 0
