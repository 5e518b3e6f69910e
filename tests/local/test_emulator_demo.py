"""The `make demo` chain against the local emulator: deploy, publish, InService, invoke, destroy, nothing left."""

from __future__ import annotations

import re

import boto3
import pytest

from local_emulator import moto_server
from local_emulator.inventory import leftovers
from workstation.deploy import empty_bucket

pytestmark = pytest.mark.emulator


@pytest.mark.e2e
def test_demo_deploys_serves_and_destroys_leaving_nothing(demo_run, record_property):
    code, out, err, logs = demo_run
    assert code == 0, out[-4000:] + err[-4000:]
    # its own assembly, under its --logs: another demo of the same project and environment (a test's, a second
    # terminal's) synthesizing at once does not make this one's `cdk synth` fail ("Another CLI is currently synthing")
    assert (logs / "cdk.out" / "llm-endpoints-local-tiny-gpt2.template.json").is_file()
    answered = re.search(r"container: (.*)", out)
    assert answered and "stand-in" in answered.group(1), out[-4000:]
    took = re.search(r"demo finished in ([\d.]+) s", out)
    record_property("scenario", f"hf-fastload: {answered.group(1)}; whole chain {took.group(1) if took else '?'} s")
    # The demo runs what `make deploy` runs (workstation.deploy), in this order (tests/workstation/test_workstation.py checks
    # that the make targets call it).
    order = [
        s
        for s in (
            "==> preflight (",
            "==> cdk synth",
            "==> cdk deploy llm-endpoints-local-artifacts",
            "==> model_build publish tiny-gpt2",
            "==> preflight: artifacts published",
            "==> cdk deploy llm-endpoints-local-tiny-gpt2",
            "==> smoke test tiny-gpt2",
            "==> SLO gate tiny-gpt2",
        )
        if s in out
    ]
    assert len(order) == 8 and [out.index(s) for s in order] == sorted(out.index(s) for s in order)
    assert "PASS  response" in out and "PASS  config" in out
    # The stacks' Lambda functions ran on the emulator from their deployed code, as CloudFormation custom resources:
    # their log groups show it (local_emulator/server.py; the demo prints each function's runs after the deploy).
    ran = dict(re.findall(r"^      (\S+): (\d+) run\(s\) in ", out, re.MULTILINE))
    assert any("ArtifactCheckFunction" in name for name in ran), out[-4000:]
    assert any("SmokeCheckFunction" in name for name in ran), out[-4000:]
    assert any("CustomS3AutoDeleteObjectsCustomResourceProviderHandler" in name for name in ran), out[-4000:]
    assert re.search(r'SmokeCheckFunction\S+: 1 run\(s\) .*"request": "Create", "ok": true', out), out[-4000:]
    assert re.search(r'ArtifactCheckFunction\S+: 1 run\(s\) .*"message": "artifact_check"', out), out[-4000:]
    # config/local.yaml's slo: the load test against the served model, kept in the emulator's artifact bucket
    assert "PASS  every objective met" in out and "kept  s3://llm-endpoints-local-artifacts-" in out
    assert "InService" in out
    assert out.count("output: ") == 2 and "latency:" in out
    # hf-fastload does not stream (its Hugging Face toolkit answers whole replies), here as on AWS: no streamed
    # prompt, and the OpenAI route's chat comes back whole.
    assert "skipped: hf-fastload does not stream" in out and "streamed " not in out, out[-3000:]
    assert "a chat exchange through the openai SDK, whole" in out
    assert "s3 buckets                   0 left" in out
    assert "nothing left" in out


def test_inventory_sees_what_is_left(tmp_path):
    """The teardown check can fail: a resource left behind shows up in its service's list."""
    emulator = moto_server.start(tmp_path)
    try:
        with emulator.activated():
            session = boto3.Session(region_name=emulator.region)
            s3 = session.client("s3")
            s3.create_bucket(Bucket="left-behind")
            s3.put_object(Bucket="left-behind", Key="a", Body=b"x")
            session.client("logs").create_log_group(logGroupName="/aws/sagemaker/Endpoints/x")
            found = leftovers(session)
            assert found["s3 buckets"] == ["left-behind"]
            assert found["log groups"] == ["/aws/sagemaker/Endpoints/x"]
            assert empty_bucket("left-behind", session) == 1
    finally:
        emulator.stop()
