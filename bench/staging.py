"""Measure the staging job (weights_staging): a random-bytes checkpoint laid in the Hub mirror, staged into the moto
server's S3 by the job's own code run as CodeBuild runs it (`python -m weights_staging`, a subprocess).

    python -m bench.staging [--size-mib 2048] [--shards 8] [--kills 5] [--seed 7] [--out bench/results/staging.json]

Figures:
  - the job's peak RSS (os.wait4's ru_maxrss of the job's process) and the bytes it wrote to storage (the largest
    write_bytes of /proc/<pid>/io seen while it ran, polled every 0.1 s): both should be bounded by a few multipart
    parts, not by the model;
  - its wall time against a plain copy of the same bytes: boto3's upload_file (s3transfer, default TransferConfig)
    of each shard from local disk into the same emulator, no hashing, no Hub;
  - SIGKILL at `--kills` random points (each uniform over 5-95 % of the time the work left should take at the
    measured rate, seeded), a rerun after each, then a run to the end: every object's sha256 equals the manifest's, and manifest.json never existed after a kill
    (it is written last).
Random bytes (not zeros or sparse holes) so the sha256 the job computes costs what it costs on real weights.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MiB = 1024 * 1024
BUCKET = "bench-staging"
REPO = "bench/random-checkpoint"


def write_random(path: Path, size: int, seed: int) -> str:
    """`size` random bytes (seeded), written in 8 MiB blocks; returns their sha256."""
    rng = random.Random(seed)
    digest = hashlib.sha256()
    with path.open("wb") as f:
        left = size
        while left:
            block = rng.randbytes(min(8 * MiB, left))
            digest.update(block)
            f.write(block)
            left -= len(block)
    return digest.hexdigest()


def lay_checkpoint(root: Path, size: int, shards: int, seed: int) -> list[dict[str, Any]]:
    """The mirror's repository: `shards` random safetensors-named files of size/shards bytes, and a config.json."""
    folder = root / REPO
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        sha = write_random(folder / name, size // shards, seed + i)
        entries.append({"path": name, "size": size // shards, "sha256": sha})
    config = b'{"model_type": "bench"}\n'
    (folder / "config.json").write_bytes(config)
    entries.append({"path": "config.json", "size": len(config), "sha256": hashlib.sha256(config).hexdigest()})
    return entries


def spec_for(entries: list[dict[str, Any]], hub_url: str, commit: str) -> dict[str, Any]:
    from artifact.manifest import content_hash

    files = sorted(entries, key=lambda e: e["path"])
    return {
        "schema_version": 1,
        "endpoint": "bench",
        "model": {"source": REPO, "commit": commit},
        "files": files,
        "content_hash": content_hash(files),
        "staging": {
            "hub": {"endpoint": hub_url, "repo_id": REPO, "commit": commit},
            "files": [e["path"] for e in files if e["path"].endswith(".safetensors")],
            "token_secret": None,
        },
    }


class Job:
    """One run of the job as a subprocess, with its peak RSS and storage writes."""

    def __init__(self, spec_uri: str, destination: str, env: dict[str, str]):
        self.command = [sys.executable, "-m", "weights_staging", "--spec", spec_uri, "--destination", destination]
        self.env = env
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(self.command, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.started = time.monotonic()
        self.write_bytes = 0
        self.first_file_at: float | None = None  # when it began its first file: the start-up before is Python's

    def _poll_start(self) -> None:
        if self.first_file_at is None:
            self.log.seek(0)
            if b"from the Hub" in self.log.read():
                self.first_file_at = time.monotonic() - self.started

    def _poll_io(self) -> None:
        try:
            text = Path(f"/proc/{self.process.pid}/io").read_text()
        except OSError:
            return
        for line in text.splitlines():
            if line.startswith("write_bytes:"):
                self.write_bytes = max(self.write_bytes, int(line.split()[1]))

    def wait(self, kill_after: float | None = None) -> dict[str, Any]:
        """Wait for the job (SIGKILL it after `kill_after` seconds when given); its figures."""
        while True:
            self._poll_io()
            self._poll_start()
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                break
            if kill_after is not None and time.monotonic() - self.started >= kill_after:
                self.process.send_signal(signal.SIGKILL)
                kill_after = None
            time.sleep(0.1)
        self.process.returncode = os.waitstatus_to_exitcode(status)
        self.log.seek(0)
        output = self.log.read().decode(errors="replace")
        self.log.close()
        return {
            "startup_s": self.first_file_at or 0.0,
            "seconds": time.monotonic() - self.started,
            "exit": self.process.returncode,
            "peak_rss_mib": usage.ru_maxrss / 1024,  # KiB on Linux
            "write_mib": self.write_bytes / MiB,
            "output_tail": output.strip().splitlines()[-3:],
        }


def objects(s3, prefix: str) -> dict[str, Any]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix) :]: o for o in listed}


def object_sha256(s3, key: str) -> str:
    digest = hashlib.sha256()
    for chunk in s3.get_object(Bucket=BUCKET, Key=key)["Body"].iter_chunks(8 * MiB):
        digest.update(chunk)
    return digest.hexdigest()


def empty_prefix(s3, prefix: str) -> None:
    for key in objects(s3, prefix):
        s3.delete_object(Bucket=BUCKET, Key=prefix + key)
    for upload in s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []):
        s3.abort_multipart_upload(Bucket=BUCKET, Key=upload["Key"], UploadId=upload["UploadId"])


def measure(size: int, shards: int, kills: int, seed: int, work: Path, say=print) -> dict[str, Any]:
    import boto3

    from local_emulator import moto_server
    from local_emulator.hub_mirror import HubMirror

    hub_root = work / "hub"
    say(f"laying {size / MiB:.0f} MiB of random bytes in {shards} shard(s) under {hub_root}")
    entries = lay_checkpoint(hub_root, size, shards, seed)
    results: dict[str, Any] = {"size_mib": size / MiB, "shards": shards, "seed": seed}
    emulator = moto_server.start(work / "moto")
    try:
        with HubMirror(hub_root) as mirror, emulator.activated():
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            s3 = boto3.client("s3")
            s3.create_bucket(Bucket=BUCKET)
            spec = spec_for(entries, mirror.url, mirror.commit_of(REPO))
            prefix = f"models/bench/{spec['content_hash']}/"
            spec_key = f"staging-specs/bench/{spec['content_hash']}.json"
            raw = json.dumps(spec, indent=2).encode()
            s3.put_object(Bucket=BUCKET, Key=spec_key, Body=raw)
            config = next(e for e in entries if e["path"] == "config.json")
            s3.put_object(
                Bucket=BUCKET,
                Key=prefix + "config.json",
                Body=(hub_root / REPO / "config.json").read_bytes(),
                Metadata={"sha256": config["sha256"]},
            )
            spec_uri, destination = f"s3://{BUCKET}/{spec_key}", f"s3://{BUCKET}/{prefix}"

            say("staging the whole checkpoint once (peak RSS, storage writes, time)")
            run = Job(spec_uri, destination, env).wait()
            if run["exit"] != 0:
                raise RuntimeError(f"the job failed: {run['output_tail']}")
            results["job"] = run
            results["job"]["mib_per_s"] = size / MiB / run["seconds"]

            say("plain copy of the same bytes: boto3 upload_file (s3transfer, default TransferConfig) from disk")
            started = time.monotonic()
            for e in entries:
                if e["path"].endswith(".safetensors"):
                    s3.upload_file(str(hub_root / REPO / e["path"]), BUCKET, f"plain/{e['path']}")
            plain = time.monotonic() - started
            results["plain_upload_file"] = {"seconds": plain, "mib_per_s": size / MiB / plain}
            results["ratio_job_to_plain"] = run["seconds"] / plain
            for e in entries:
                if e["path"].endswith(".safetensors"):
                    s3.delete_object(Bucket=BUCKET, Key=f"plain/{e['path']}")

            say(f"SIGKILL at {kills} random points, a rerun after each")
            empty_prefix(s3, prefix)
            s3.put_object(
                Bucket=BUCKET,
                Key=prefix + "config.json",
                Body=(hub_root / REPO / "config.json").read_bytes(),
                Metadata={"sha256": config["sha256"]},
            )
            rng = random.Random(seed)
            staged = {e["path"]: e for e in entries if e["path"].endswith(".safetensors")}
            # Kill points spread over the whole staging: sorted random fractions of its bytes; run i is killed when,
            # at the measured rate, it should have reached fraction i (after the start-up the first run showed).
            fractions = sorted(rng.uniform(0.05, 0.95) for _ in range(kills))
            rate = size / max(run["seconds"] - run["startup_s"], 1e-3)
            kill_runs = []
            for fraction in fractions:
                present = objects(s3, prefix)
                done = sum(e["size"] for p, e in staged.items() if p in present)
                point = run["startup_s"] + max(0.5, (fraction * size - done) / rate)
                killed = Job(spec_uri, destination, env).wait(kill_after=point)
                present = objects(s3, prefix)
                kill_runs.append(
                    {
                        "kill_after_s": round(point, 2),
                        "exit": killed["exit"],  # -9: killed; 0: it finished first
                        "objects_after": sorted(present),
                        # The rule: manifest.json only once every file is there (a kill may land after the job
                        # wrote it, during its exit: then all files are there too).
                        "manifest_before_all_files": "manifest.json" in present
                        and not all(p in present for p in staged),
                        "unfinished_uploads": len(s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])),
                    }
                )
                say(f"  killed at {point:.1f} s (exit {killed['exit']}): {len(present)} object(s) there")
                if killed["exit"] == 0:
                    break
            final = Job(spec_uri, destination, env).wait()
            present = objects(s3, prefix)
            verified = {e["path"]: object_sha256(s3, prefix + e["path"]) == e["sha256"] for e in entries}
            manifest_last = all(
                present["manifest.json"]["LastModified"] >= o["LastModified"] for k, o in present.items()
            )
            manifest_body = s3.get_object(Bucket=BUCKET, Key=prefix + "manifest.json")["Body"].read()
            results["kills"] = {
                "runs": kill_runs,
                "final_exit": final["exit"],
                "final_output_tail": final["output_tail"],
                "every_object_sha256_equals_manifest": all(verified.values()),
                "manifest_written_only_after_all": not any(r["manifest_before_all_files"] for r in kill_runs)
                and manifest_last,
                "manifest_equals_spec": manifest_body == raw,
                "unfinished_uploads_left": len(s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])),
            }
    finally:
        emulator.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.staging", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "staging.json")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-staging-", dir=args.work) as work:
        results = measure(args.size_mib * MiB, args.shards, args.kills, args.seed, Path(work))
    results["command"] = "python -m bench.staging " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in results.items() if k != "kills"}, indent=2, default=str))
    print(json.dumps(results["kills"], indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
