"""`model_source:`, a JumpStart / private-hub model with no copy of ours (endpoint_config/model_source.py,
systems/model_source.py): each refusal with its message, and what the plan carries. The ARNs and prefixes are of a
private hub in a made-up account, and of JumpStart's public hub and gated bucket in the shape sagemaker-core 2.27.0
builds them (jumpstart/constants.py HUB_CONTENT_ARN_REGEX, region_config.json); none is a real model's."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import config_refusal

from deployment import load_config
from systems import all_systems

PRIVATE_ARN = "arn:aws:sagemaker:us-east-1:123456789012:hub-content/team-hub/Model/qwen3-8b/1.0.0"
PRIVATE_URI = "s3://team-models-us-east-1/qwen3-8b/"
GATED_ARN = "arn:aws:sagemaker:us-east-1:aws:hub-content/SageMakerPublicHub/Model/meta-textgeneration-llama-3-1-8b-instruct/2.0.0"
GATED_URI = "s3://jumpstart-private-cache-prod-us-east-1/meta-textgeneration/llama-3-1-8b-instruct/artifacts/inference-prepack/v2.0.0/"


def _config(tmp_path: Path, *, system: str = "vllm", source: str, extra: str = "") -> Path:
    path = tmp_path / "hub.yaml"
    path.write_text(
        "endpoints:\n"
        f"  - name: hub\n    system: {system}\n    model: Qwen/Qwen3-8B\n    model_parameters: 8190735360\n"
        "    dtype: bf16\n    instance_type: ml.g6e.xlarge\n"
        f"    model_source: {source}\n{extra}"
    )
    return path


def test_a_private_hub_model_is_planned_with_its_prefix_and_no_artifact(tmp_path):
    [plan] = load_config(_config(tmp_path, source=f"{{hub_content_arn: {PRIVATE_ARN}, s3_uri: {PRIVATE_URI}}}")).plans
    assert plan.artifact.from_hub and plan.artifact.problem is None
    assert plan.deployable_artifact() is plan.artifact  # nothing to build first
    data = plan.model_data("our-artifact-bucket")
    assert (data.bucket_name, data.prefix, data.s3_uri) == ("team-models-us-east-1", "qwen3-8b/", PRIVATE_URI)
    assert data.hub_content_arn == PRIVATE_ARN and data.accept_eula is False
    # Sized from model_parameters as any other model: 16.4 GB at the assumed rate.
    assert plan.download_timeout_s == 600 and plan.startup_timeout_s == 900


def test_a_gated_model_without_accept_eula_is_refused_naming_the_field(tmp_path):
    message = config_refusal(_config(tmp_path, source=f"{{hub_content_arn: {GATED_ARN}, s3_uri: {GATED_URI}}}"))
    assert "endpoint 'hub': model_source.accept_eula: required key is missing" in message
    assert "JumpStart's gated bucket 'jumpstart-private-cache-prod-us-east-1'" in message
    assert "set model_source.accept_eula: true" in message


@pytest.mark.parametrize("word", ["yes", "'true'", "1", "on"])
def test_only_the_word_true_accepts_a_eula(tmp_path, word):
    source = f"{{hub_content_arn: {GATED_ARN}, s3_uri: {GATED_URI}, accept_eula: {word}}}"
    message = config_refusal(_config(tmp_path, source=source))
    assert "model_source.accept_eula" in message and "valid boolean" in message


def test_accept_eula_true_is_carried_to_the_model_data(tmp_path):
    source = f"{{hub_content_arn: {GATED_ARN}, s3_uri: {GATED_URI}, accept_eula: true}}"
    [plan] = load_config(_config(tmp_path, source=source)).plans
    assert plan.model_data("b").accept_eula is True


# The systems by their plain_checkpoint capability (ServingSystem.plain_checkpoint), from the registry.
PLAIN = [name for name, system in all_systems().items() if system.plain_checkpoint.supported]
OURS = [name for name, system in all_systems().items() if not system.plain_checkpoint.supported]


@pytest.mark.parametrize("system", OURS)
def test_systems_that_need_our_build_refuse_it_with_the_reason(tmp_path, system):
    source = f"{{hub_content_arn: {PRIVATE_ARN}, s3_uri: {PRIVATE_URI}}}"
    message = config_refusal(_config(tmp_path, system=system, source=source))
    assert f"endpoint 'hub': model_source: not supported by system {system!r}" in message
    assert "needs files this project's build writes into the artifact" in message
    assert "systems that serve a hub model's checkpoint as it is: " in message
    assert PLAIN and message.split("as it is: ")[1].startswith(", ".join(PLAIN))


@pytest.mark.parametrize("system", PLAIN)
def test_the_engine_systems_take_it(tmp_path, system):
    [plan] = load_config(
        _config(tmp_path, system=system, source=f"{{hub_content_arn: {PRIVATE_ARN}, s3_uri: {PRIVATE_URI}}}")
    ).plans
    assert plan.artifact.from_hub


@pytest.mark.parametrize(
    "source,extra,expected",
    [
        (
            f"{{hub_content_arn: arn:aws:sagemaker:us-east-1:aws:hub/SageMakerPublicHub, s3_uri: {PRIVATE_URI}}}",
            "",
            "model_source.hub_content_arn: value 'arn:aws:sagemaker:us-east-1:aws:hub/SageMakerPublicHub' is not a "
            "hub content ARN",
        ),
        (
            f"{{hub_content_arn: {PRIVATE_ARN.replace('1.0.0', 'latest')}, s3_uri: {PRIVATE_URI}}}",
            "",
            "the version N.N.N (botocore HubName, HubContentName, HubContentVersion",
        ),
        (
            f"{{hub_content_arn: {PRIVATE_ARN.replace('/Model/', '/Notebook/')}, s3_uri: {PRIVATE_URI}}}",
            "",
            "content type 'Notebook' is not a model; allowed: Model",
        ),
        (
            f"{{hub_content_arn: {PRIVATE_ARN}, s3_uri: s3://team-models/qwen3-8b/model.tar.gz}}",
            "",
            "model_source.s3_uri: value 's3://team-models/qwen3-8b/model.tar.gz' is not an S3 prefix",
        ),
        (
            f"{{hub_content_arn: {GATED_ARN}, s3_uri: {GATED_URI.replace('us-east-1', 'eu-west-1')}, accept_eula: true}}",
            "",
            "bucket 'jumpstart-private-cache-prod-eu-west-1' is JumpStart's in eu-west-1, the hub content is in us-east-1",
        ),
        (
            f"{{hub_content_arn: {PRIVATE_ARN}, s3_uri: {PRIVATE_URI}}}",
            "    artifact_hash: " + "a" * 64 + "\n",
            "artifact_hash: not allowed with model_source",
        ),
        (
            f"{{hub_content_arn: {PRIVATE_ARN}, s3_uri: {PRIVATE_URI}}}",
            "    model_data: tar-gz\n",
            "model_data: value 'tar-gz' is not allowed with model_source",
        ),
        (
            f"{{hub_content_arn: {PRIVATE_ARN}, s3_uri: {PRIVATE_URI}}}",
            "    engine: {stream_weights_from_s3: true}\n",
            "model_source: not allowed with engine.stream_weights_from_s3: true",
        ),
    ],
)
def test_each_refusal_names_the_field_and_what_is_allowed(tmp_path, source, extra, expected):
    assert expected in config_refusal(_config(tmp_path, source=source, extra=extra))


@pytest.mark.parametrize("verb", ["build", "publish"])
def test_model_build_says_there_is_nothing_to_build_or_publish(tmp_path, verb):
    from helpers import run_cli

    config = _config(tmp_path, source=f"{{hub_content_arn: {PRIVATE_ARN}, s3_uri: {PRIVATE_URI}}}")
    result = run_cli(verb, "--config", str(config), "--endpoint", "hub", "--build-root", str(tmp_path / "build"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"hub: nothing to {verb}: a hub model (model_source {PRIVATE_ARN}); SageMaker reads {PRIVATE_URI} itself"
    )
    assert not (tmp_path / "build").exists()  # nothing written


def test_preflight_checks_no_artifact_of_a_hub_model(tmp_path):
    from model_build.preflight import artifact_checks

    config = _config(tmp_path, source=f"{{hub_content_arn: {PRIVATE_ARN}, s3_uri: {PRIVATE_URI}}}")
    # No S3 call is made for it: an object without get_object would fail the check otherwise.
    assert artifact_checks(load_config(config), object(), "123456789012", "us-east-1") == []


def test_a_pipeline_needs_no_artifact_hash_for_a_hub_model(tmp_path):
    """The pipeline pins every built artifact by hash (schema.pipeline_problems); a hub model has none to pin."""
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        "environments:\n  dev: {account: '111111111111', region: us-east-1}\n"
        "pipeline:\n  connection_arn: arn:aws:codeconnections:us-east-1:111111111111:connection/abc\n"
        "  repository: team/models\n  stages: [dev]\n"
        + _config(tmp_path, source=f"{{hub_content_arn: {PRIVATE_ARN}, s3_uri: {PRIVATE_URI}}}").read_text()
    )
    [plan] = load_config(path, "dev").plans
    assert plan.artifact.from_hub
