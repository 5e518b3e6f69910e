"""Teardown: every example's endpoints deployed to the local emulator with the real CDK CLI, then destroyed;
nothing of the app may be left. An environment that retains data keeps exactly its buckets and repository.

Each scenario starts from an empty emulator (the module's, reset) and takes tens of seconds, mostly waiting on the
CDK CLI.

The emulator knows no g5/g6 instance types, so GPU types are mapped to the g4dn size with the same GPU count;
artifacts are pinned by hash (the emulator never starts a container, so no weights are needed).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import boto3
import endpoint_answers
import pytest
import yaml
from helpers import PINNED_HASH, ROOT, publish_pinned_artifact
from hermetic import subprocess_env

from local_emulator import moto_server
from local_emulator.demo_config import engine_options_of, tiny_context_cap
from local_emulator.inventory import leftovers

pytestmark = [pytest.mark.emulator, pytest.mark.e2e]

CDK = str(ROOT / "node_modules" / ".bin" / "cdk")
EMULATOR_TYPES = {
    "ml.g5.xlarge": "ml.g4dn.xlarge",
    "ml.g5.2xlarge": "ml.g4dn.2xlarge",
    "ml.g5.12xlarge": "ml.g4dn.12xlarge",
}


def combined_emulator_config(retain_data: bool) -> dict:
    """All endpoints of all example files in one emulator environment."""
    endpoints, seen = [], {}
    for path in sorted((ROOT / "config" / "examples").glob("*.yaml")):
        for ep in yaml.safe_load(path.read_text())["endpoints"]:
            if ep["name"] in seen:  # the same endpoint in two examples (hf-fastload.yaml, pipeline.yaml)
                assert ep["system"] == seen[ep["name"]], f"two example endpoints named {ep['name']!r}: rename one"
                continue
            seen[ep["name"]] = ep["system"]
            if ep.get("adapters"):
                # LoRA adapters are adapter inference components on the base component: neither can exist here
                # (below). What would be left, the model on a variant, is what assist-ic (production.yaml) deploys,
                # and an 8 B model does not fit the T4 that stands in for its GPU here.
                continue
            if ep["system"] in ("vllm", "sglang"):
                # Their CUDA 13 images need an Ampere or newer GPU (systems/checks.py refuses a T4 or V100), and the
                # endpoint config types moto 5.2.5 takes stop at g4dn and p3 (moto/sagemaker/models.py
                # FakeEndpointConfig.validate_instance_type): no type stands in. Their stacks hold the same resource
                # types as lmi-vllm's.
                continue
            ep = {**ep, "artifact_hash": PINNED_HASH}
            if ep.get("model_source") is None and ep.get("dtype") == "bf16":
                # The T4 that stands in for an A10G computes no bf16, and a bf16 example's model (8 B, tgi.yaml) does
                # not fit it (both refused at load); the stack's resources do not depend on the model, so a small
                # known model in fp16 stands in.
                ep["model"], ep["dtype"] = "openai-community/gpt2", "fp16"
                # Its engine's context options fitted as the demo fits them to a tiny model (tgi.yaml's
                # max_total_tokens 8192 is beyond gpt2's 1,024 positions, refused at load).
                engine = ep.get("engine") or {}
                options = engine_options_of(ep)
                ep["engine"] = {key: tiny_context_cap(options, key, value) or value for key, value in engine.items()}
            ep["instance_type"] = EMULATOR_TYPES.get(ep["instance_type"], ep["instance_type"])
            ep.pop("volume_size_gb", None)
            # hosting.mode inference-components deploys as a model on the variant here: moto 5.2.5 has no
            # AWS::SageMaker::InferenceComponent (moto/cloudformation/parsing.py `parse_resource` warns and skips a
            # type it does not know; moto/sagemaker/models.py has no inference component API), so the component, its
            # scaling target and everything naming it could not be created, nor their teardown checked.
            ep.pop("hosting", None)
            # network.create_vpc deploys here but cannot be destroyed: moto (5.2.5, and its main branch at 0af643a)
            # deletes no AWS::EC2::RouteTable, VPCEndpoint or FlowLog of a stack (none of them has a
            # delete_from_cloudformation_json: moto/ec2/models/route_tables.py, vpcs.py VPCEndPoint, flow_logs.py), and
            # its delete_vpc refuses a VPC that still has a second route table. The endpoint is placed in a VPC by id
            # instead: the model's VpcConfig is still deployed and destroyed, nothing of a VPC is created.
            if (ep.get("network") or {}).get("create_vpc"):
                ep["network"] = {
                    **ep["network"],
                    "create_vpc": False,
                    "subnet_ids": ["subnet-00000001", "subnet-00000002"],
                    "security_group_ids": ["sg-00000001"],
                }
            # the OpenAI route's callers are existing roles (their policy is attached to them), which the emulator
            # lacks: the route's created role stands in (its grants, deploy and destroy are the same kind)
            if (ep.get("chat") or {}).get("openai_route"):
                route = {"create_role": True, "assumed_by": ["arn:aws:iam::123456789012:role/chat-app"]}
                ep["chat"] = {**ep["chat"], "openai_route": route}
            endpoints.append(ep)
    return {
        "project": "teardown",
        "environments": {
            "emu": {
                "account": moto_server.EMULATOR_ACCOUNT,
                "region": moto_server.EMULATOR_REGION,
                "retain_data": retain_data,
                "emulator": True,
            }
        },
        "endpoints": endpoints,
    }


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory):
    """The module's emulator, whose functions' SageMaker runtime calls (each endpoint stack's smoke check) a loopback
    server answers for every endpoint (endpoint_answers.py): the emulator runs no model."""
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


def _publish_manifests(config: Path, emulator: moto_server.Emulator) -> None:
    """What `model_build publish` writes for each pinned artifact (tests/helpers.py publish_pinned_artifact: a small
    file and its manifest, last), which each endpoint stack's artifact check verifies before the Model is created (no
    weights: the emulator never starts a container)."""
    from deployment import load_config

    environment_plan = load_config(config, "emu")
    bucket = environment_plan.artifact_bucket(moto_server.EMULATOR_ACCOUNT, moto_server.EMULATOR_REGION)
    with emulator.activated():
        s3 = boto3.client("s3", region_name=emulator.region)
        for plan in environment_plan.plans:
            publish_pinned_artifact(s3, bucket, plan.manifest_key.removesuffix("manifest.json"))


def _cdk(args: list[str], assembly: Path, emulator: moto_server.Emulator) -> subprocess.CompletedProcess:
    """The real CDK CLI against the emulator, on an already synthesized cloud assembly."""
    env = subprocess_env(**emulator.client_env())  # the venv's python3 is on its PATH (tests/hermetic.py)
    result = subprocess.run(
        [CDK, *args, "--no-notices", "--app", str(assembly)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a hang fails the scenario, not the session
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return result


def test_every_example_endpoint_deploys_and_destroys_leaving_nothing(emulator, tmp_path, synth):
    emulator.reset()
    config = tmp_path / "all-examples.yaml"
    spec = combined_emulator_config(retain_data=False)
    config.write_text(yaml.safe_dump(spec))
    assembly = synth(str(config), allow_unbuilt=False).outdir  # in-process, as `cdk synth` would write it
    _cdk(["bootstrap", f"aws://{moto_server.EMULATOR_ACCOUNT}/{moto_server.EMULATOR_REGION}"], assembly, emulator)
    _cdk(["deploy", "teardown-emu-artifacts", "--require-approval", "never"], assembly, emulator)
    _publish_manifests(config, emulator)
    _cdk(["deploy", "--all", "--require-approval", "never"], assembly, emulator)
    with emulator.activated():
        session = boto3.Session(region_name=emulator.region)
        deployed = leftovers(session, stack_prefix="teardown-")
        assert len(deployed["cloudformation stacks"]) == 1 + len(spec["endpoints"])
        assert len(deployed["sagemaker endpoints"]) == len(spec["endpoints"])
        assert len(deployed["sagemaker models"]) == len(spec["endpoints"])
        streamed = sum(1 for ep in spec["endpoints"] if (ep.get("streaming") or {}).get("enabled"))
        # invoke, smoke, stream; the artifact and smoke checks; CDK's auto-delete
        assert len(deployed["lambda functions"]) == 4 * len(spec["endpoints"]) + streamed + 1
        assert any(g.startswith("/aws/sagemaker/Endpoints/emu-") for g in deployed["log groups"])
        # The asynchronous example (production.yaml's summarize-async): moto creates its endpoint config with the
        # AsyncInferenceConfig from the template (moto/sagemaker/models.py FakeEndpointConfig
        # create_from_cloudformation_json reads AsyncInferenceConfig); its scaling resources are skipped like all.
        sm = session.client("sagemaker")
        outputs = [
            sm.describe_endpoint_config(EndpointConfigName=c["EndpointConfigName"])
            .get("AsyncInferenceConfig", {})
            .get("OutputConfig", {})
            .get("S3OutputPath", "")
            for c in sm.list_endpoint_configs(MaxResults=100)["EndpointConfigs"]
        ]
        assert [o for o in outputs if o] == [
            "s3://teardown-emu-artifacts-123456789012-us-east-1/async/emu-summarize-async/output"
        ]
        _cdk(["destroy", "--all", "--force"], assembly, emulator)
        endpoint_answers.remove_bucket(session)  # the answers server's own, not the app's
        left = leftovers(session, stack_prefix="teardown-")
    assert {kind: names for kind, names in left.items() if names} == {}


def test_an_environment_that_retains_data_keeps_exactly_its_buckets_and_repository(emulator, tmp_path, synth):
    emulator.reset()
    config = tmp_path / "retain.yaml"
    spec = combined_emulator_config(retain_data=True)
    spec["endpoints"] = spec["endpoints"][:1]
    config.write_text(yaml.safe_dump(spec))
    assembly = synth(str(config), allow_unbuilt=False).outdir  # in-process, as `cdk synth` would write it
    _cdk(["bootstrap", f"aws://{moto_server.EMULATOR_ACCOUNT}/{moto_server.EMULATOR_REGION}"], assembly, emulator)
    _cdk(["deploy", "teardown-emu-artifacts", "--require-approval", "never"], assembly, emulator)
    _publish_manifests(config, emulator)
    _cdk(["deploy", "--all", "--require-approval", "never"], assembly, emulator)
    kept_bucket = "teardown-emu-artifacts-123456789012-us-east-1"
    with emulator.activated():
        boto3.client("s3", region_name=emulator.region).put_object(
            Bucket=kept_bucket, Key="models/x/keep.txt", Body=b"1"
        )
    _cdk(["destroy", "--all", "--force"], assembly, emulator)
    with emulator.activated():
        session = boto3.Session(region_name=emulator.region)
        left = {kind: names for kind, names in leftovers(session, stack_prefix="teardown-").items() if names}
        buckets = left.pop("s3 buckets")
        assert left == {"ecr repositories": ["teardown-emu"]}
        assert len(buckets) == 2 and kept_bucket in buckets
        assert any("accesslogs" in b for b in buckets)

        # Deploying again: creating the named bucket fails (already exists); the preflight says so and how to adopt.
        from deployment import load_config
        from model_build.preflight import kept_data_checks

        environment_plan = load_config(config, "emu")
        [kept] = kept_data_checks(environment_plan, session, moto_server.EMULATOR_ACCOUNT, emulator.region)
        assert not kept.ok and "set `adopt_kept_data: true` on environment 'emu'" in kept.message
    spec["environments"]["emu"]["adopt_kept_data"] = True
    config = tmp_path / "retain-adopt.yaml"  # a new file: the session's synth cache is keyed by path
    config.write_text(yaml.safe_dump(spec))
    adopted = synth(str(config), allow_unbuilt=False).outdir
    _cdk(["deploy", "teardown-emu-artifacts", "--require-approval", "never"], adopted, emulator)
    with emulator.activated():
        [ok] = kept_data_checks(load_config(config, "emu"), session, moto_server.EMULATOR_ACCOUNT, emulator.region)
        assert ok.ok and "is deployed" in ok.message
        body = session.client("s3").get_object(Bucket=kept_bucket, Key="models/x/keep.txt")["Body"].read()
        assert body == b"1", "the adopted bucket keeps its contents"
        # Removed without `cdk destroy` (the adopting stack references the bucket and repository by name and creates
        # neither, as tests/stacks/test_stacks.py asserts on its template): the kept data is cleaned up below.
        session.client("cloudformation").delete_stack(StackName="teardown-emu-artifacts")
        # Clean up what was kept, so later tests on this emulator start empty.
        for bucket in buckets:
            session.resource("s3").Bucket(bucket).object_versions.delete()
            session.client("s3").delete_bucket(Bucket=bucket)
        session.client("ecr").delete_repository(repositoryName="teardown-emu", force=True)
