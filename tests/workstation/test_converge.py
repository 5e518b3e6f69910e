"""The environment converges on its config (workstation/converge.py, operations review F1), on the local emulator
with the real CDK CLI: two endpoints deployed, one removed from the config; deploy refuses naming it and the flag,
deletes it when told; destroy deletes every stack of the environment (orphans too) and leaves 0 stacks and 0
endpoints; the artifact stack (and the bucket a still-running endpoint reads) is never deleted while another stack
of the environment is there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import yaml
from helpers import PINNED_HASH, ROOT, publish_pinned_artifact
from hermetic import subprocess_env

from deployment import load_config
from local_emulator import moto_server
from local_emulator.inventory import leftovers
from workstation import converge
from workstation.deploy import destroy

pytestmark = [pytest.mark.emulator, pytest.mark.e2e]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory):
    """The module's emulator, whose functions' SageMaker runtime calls (each endpoint stack's smoke check) a loopback
    server answers for every endpoint (tests/local/endpoint_answers.py): the emulator runs no model."""
    from local import endpoint_answers  # tests/local/endpoint_answers.py (tests/ is on the path: pytest.ini)

    port = moto_server.free_port()
    answers = endpoint_answers.serve(
        {"AWS_ENDPOINT_URL": f"http://localhost:{port}", "AWS_REGION": moto_server.EMULATOR_REGION}
    )
    emu = moto_server.start(
        tmp_path_factory.mktemp("moto"),
        port=port,
        lambda_env={"AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": f"http://127.0.0.1:{answers.server_address[1]}"},
    )
    yield emu
    emu.stop()
    answers.shutdown()


CDK = str(ROOT / "node_modules" / ".bin" / "cdk")


def _config(path: Path, names: list[str]) -> Path:
    endpoint = {
        "system": "hf-fastload",
        "model": "gpt2",
        "dtype": "fp16",
        "instance_type": "ml.g4dn.xlarge",
        "instance_count": 1,
        "artifact_hash": PINNED_HASH,  # a small published file: the emulator never starts a container
    }
    path.write_text(
        yaml.safe_dump(
            {
                "project": "orph",
                "environments": {
                    "emu": {
                        "account": moto_server.EMULATOR_ACCOUNT,
                        "region": moto_server.EMULATOR_REGION,
                        "retain_data": False,
                        "emulator": True,
                    }
                },
                "endpoints": [{"name": n, **endpoint} for n in names],
            }
        )
    )
    return path


def _cdk(args: list[str], assembly: Path, emulator) -> None:
    result = subprocess.run(
        [CDK, *args, "--no-notices", "--app", str(assembly)],
        cwd=ROOT,
        env=subprocess_env(**emulator.client_env()),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]


@pytest.fixture(scope="module")
def both_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One config file for the module, so the session's synth cache (tests/conftest.py `synth`, keyed by path)
    synthesizes it once and every test deploys that assembly: only the emulator's state is per test."""
    return _config(tmp_path_factory.mktemp("converge") / "both.yaml", ["alpha", "beta"])


@pytest.fixture
def two_endpoints(emulator, tmp_path, synth, both_config):
    """alpha and beta deployed with `cdk deploy --all`; the config without beta."""
    emulator.reset()
    both = both_config
    assembly = synth(str(both), allow_unbuilt=False).outdir
    _cdk(["bootstrap", f"aws://{moto_server.EMULATOR_ACCOUNT}/{moto_server.EMULATOR_REGION}"], assembly, emulator)
    _cdk(["deploy", "orph-emu-artifacts", "--require-approval", "never"], assembly, emulator)
    environment_plan = load_config(both, "emu")
    bucket = environment_plan.artifact_bucket(moto_server.EMULATOR_ACCOUNT, moto_server.EMULATOR_REGION)
    with emulator.activated():
        s3 = boto3.client("s3", region_name=emulator.region)
        for plan in environment_plan.plans:  # what each stack's artifact check verifies
            publish_pinned_artifact(s3, bucket, plan.manifest_key.removesuffix("manifest.json"))
    _cdk(["deploy", "--all", "--require-approval", "never"], assembly, emulator)
    return load_config(_config(tmp_path / "alpha.yaml", ["alpha"]), "emu")


def _state(session) -> tuple[list[str], list[str]]:
    """The environment's stacks, and its endpoints by the stack that made them (CloudFormation names them
    <stack>-LlmEndpoint...-<id>)."""
    found = leftovers(session, stack_prefix="orph-")
    return found["cloudformation stacks"], [e.split("-LlmEndpoint")[0] for e in found["sagemaker endpoints"]]


def test_deploy_refuses_an_orphan_naming_it_then_deletes_it_when_told(emulator, two_endpoints, make_env):
    plan = two_endpoints
    # `python -m workstation deploy` (what `make deploy` runs) stops after preflight, before any build or deploy.
    refused = subprocess.run(
        [sys.executable, "-m", "workstation", "deploy", "--config", str(plan.config_path), "--env", "emu"],
        cwd=ROOT,
        env=make_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "orph-emu-beta (endpoint beta" in refused.stderr and "DELETE_ORPHANS=1" in refused.stderr
    assert "==> cdk" not in refused.stdout and "model_build build" not in refused.stdout
    with emulator.activated():
        session = boto3.Session(region_name=emulator.region)
        assert _state(session) == (
            ["orph-emu-alpha", "orph-emu-artifacts", "orph-emu-beta"],
            ["orph-emu-alpha", "orph-emu-beta"],
        )
        shown: list[str] = []
        with pytest.raises(converge.ConvergeError) as refused:
            converge.check_orphans(plan, session, delete=False, echo=shown.append)
        message = str(refused.value)
        assert "orph-emu-beta (endpoint beta" in message and "DELETE_ORPHANS=1" in message
        assert "--delete-orphans" in message and any("orph-emu-beta" in line for line in shown)
        assert _state(session)[0] == ["orph-emu-alpha", "orph-emu-artifacts", "orph-emu-beta"]  # nothing changed

        found = converge.check_orphans(plan, session, delete=True, echo=shown.append)
        assert [s.name for s in found] == ["orph-emu-beta"]
        converge.delete_stacks(found, session, echo=shown.append)
        assert _state(session) == (["orph-emu-alpha", "orph-emu-artifacts"], ["orph-emu-alpha"])
        assert converge.check_orphans(plan, session, delete=False) == []


def test_destroy_removes_every_stack_of_the_environment_orphans_included(emulator, two_endpoints):
    plan = two_endpoints
    with emulator.activated():
        destroy(plan, echo=lambda line: None)
        session = boto3.Session(region_name=emulator.region)
        assert _state(session) == ([], [])
        assert not [b for b in leftovers(session)["s3 buckets"] if b.startswith("orph-")]


def test_destroy_keeps_the_bucket_while_an_endpoint_still_reads_it(emulator, two_endpoints, monkeypatch):
    """A stack whose deletion did not happen (here: the orphan's DeleteStack never sent) stops destroy before the
    bucket goes."""
    plan = two_endpoints
    monkeypatch.setattr(converge, "delete_stacks", lambda stacks, session, echo=print: None)
    with emulator.activated():
        with pytest.raises(converge.ConvergeError, match=r"not deleting orph-emu-artifacts(.|\n)*orph-emu-beta"):
            destroy(plan, echo=lambda line: None)
        session = boto3.Session(region_name=emulator.region)
        assert "orph-emu-artifacts" in _state(session)[0]
        assert [b for b in leftovers(session)["s3 buckets"] if b.startswith("orph-emu-artifacts")]


def test_make_deploy_passes_delete_orphans():
    planned = subprocess.run(
        ["make", "--no-print-directory", "-n", "deploy", "CONFIG=config/local.yaml", "ENV=local", "DELETE_ORPHANS=1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert planned.returncode == 0, planned.stderr
    assert "-m workstation deploy --config config/local.yaml --env local --delete-orphans" in planned.stdout
