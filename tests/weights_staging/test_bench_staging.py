"""bench/staging.py's logic at a small size (the 2 GB measurement runs alone, `python -m bench.staging`): the job's
figures are read, the plain copy is timed, the kills are followed by reruns and the final objects are checked."""

from __future__ import annotations

import json

import pytest

from bench import staging as bench

pytestmark = pytest.mark.slow


def test_the_bench_measures_and_checks_at_a_small_size(tmp_path, capsys):
    out = tmp_path / "staging.json"
    assert (
        bench.main(["--size-mib", "40", "--shards", "2", "--kills", "2", "--out", str(out), "--work", str(tmp_path)])
        == 0
    )
    results = json.loads(out.read_text())
    job = results["job"]
    assert job["exit"] == 0 and job["peak_rss_mib"] > 10 and job["write_mib"] < 5
    assert results["plain_upload_file"]["seconds"] > 0 and results["ratio_job_to_plain"] > 0
    kills = results["kills"]
    assert 1 <= len(kills["runs"]) <= 2 and kills["final_exit"] == 0
    assert kills["every_object_sha256_equals_manifest"] and kills["manifest_written_only_after_all"]
    assert kills["manifest_equals_spec"] and kills["unfinished_uploads_left"] == 0
    assert results["command"].startswith("python -m bench.staging --size-mib 40")


def test_random_shards_hash_as_written(tmp_path):
    import hashlib

    path = tmp_path / "x"
    sha = bench.write_random(path, 3 * bench.MiB + 5, seed=1)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha and path.stat().st_size == 3 * bench.MiB + 5
    assert bench.write_random(tmp_path / "y", 1000, seed=1) != bench.write_random(tmp_path / "z", 1000, seed=2)
