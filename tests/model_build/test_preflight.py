"""model_build/preflight.py: STS and S3 against the moto server; Service Quotas with botocore's Stubber
(moto's Service Quotas knows only `vpc` and has no ListServiceQuotas)."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from helpers import EXAMPLE_CASES, Session

from deployment import load_config
from endpoint_config import artifact_bucket_name, artifact_prefix
from local_emulator import moto_server
from model_build.cli import main
from model_build.preflight import run_preflight

ROOT = Path(__file__).resolve().parents[2]
REGION = moto_server.EMULATOR_REGION
ACCOUNT, REGION = moto_server.EMULATOR_ACCOUNT, moto_server.EMULATOR_REGION
HASH_A, HASH_B = "a" * 64, "b" * 64


def write_config(
    tmp_path: Path,
    *,
    emulator: bool = False,
    account: str | None = ACCOUNT,
    region: str | None = REGION,
    endpoints: list[dict] | None = None,
) -> Path:
    env: dict = {"emulator": emulator}
    if account:
        env["account"] = account
    if region:
        env["region"] = region
    base = {"system": "hf-fastload", "model": "gpt2", "instance_type": "ml.g5.2xlarge"}
    endpoints = endpoints or [
        {"name": "chat", "instance_count": 1, "autoscaling": {"min_capacity": 1, "max_capacity": 2, "target_value": 4}},
        {"name": "batch", "instance_count": 1},
        {"name": "small", "instance_type": "ml.m5.xlarge", "instance_count": 2},
    ]
    raw = {"project": "pf", "environments": {"dev": env}, "endpoints": [{**base, **e} for e in endpoints]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def build(root: Path, endpoint: str, content_hash: str) -> None:
    """What a build leaves for the plan to read: its manifest (system, dtype, content hash)."""
    (root / endpoint).mkdir(parents=True, exist_ok=True)
    manifest = {"endpoint": endpoint, "system": "hf-fastload", "dtype": "fp16", "content_hash": content_hash}
    (root / endpoint / "manifest.json").write_text(json.dumps(manifest))


def planned(environment_plan, build_root: Path):
    """The deployment planned again with the builds in `build_root` (the plan reads their manifests)."""
    return load_config(environment_plan.config_path, environment_plan.environment_name, build_root=build_root)


def publish(environment_plan, endpoint: str, content_hash: str, body_hash: str | None = None) -> None:
    s3 = boto3.client("s3")
    bucket = artifact_bucket_name(environment_plan.project, environment_plan.environment_name, ACCOUNT, REGION)
    s3.create_bucket(Bucket=bucket) if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]] else None
    s3.put_object(
        Bucket=bucket,
        Key=artifact_prefix(endpoint, content_hash) + "manifest.json",
        Body=json.dumps({"content_hash": body_hash or content_hash}).encode(),
    )


def quota(instance_type: str, value: float, code: str = "L-0001") -> dict:
    return {
        "ServiceCode": "sagemaker",
        "QuotaName": f"{instance_type} for endpoint usage",
        "QuotaCode": code,
        "Value": value,
    }


def quotas_session(defaults: list[dict], applied: list[dict]):
    """Service Quotas answers through Stubber: defaults on two pages (pagination), then applied values."""
    sq = boto3.client("service-quotas", region_name=REGION)
    stub = Stubber(sq)
    half = len(defaults) // 2
    stub.add_response(
        "list_aws_default_service_quotas",
        {"Quotas": defaults[:half], "NextToken": "page2"},
        {"ServiceCode": "sagemaker"},
    )
    stub.add_response(
        "list_aws_default_service_quotas",
        {"Quotas": defaults[half:]},
        {"ServiceCode": "sagemaker", "NextToken": "page2"},
    )
    stub.add_response("list_service_quotas", {"Quotas": applied}, {"ServiceCode": "sagemaker"})
    stub.activate()
    return Session(**{"service-quotas": sq}), stub


def deploy_artifact_stack(environment_plan) -> None:
    """A stand-in artifact stack (its bucket is what publish() creates): the bucket belongs to a deployed stack."""
    boto3.client("cloudformation").create_stack(
        StackName=environment_plan.stack_name("artifacts"),
        TemplateBody=json.dumps({"Resources": {"Marker": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}),
    )


def checks_by_name(checks) -> dict:
    return {c.name: c for c in checks}


DEFAULTS = [
    quota("ml.g5.2xlarge", 0, "L-G52X"),
    quota("ml.g5.xlarge", 0, "L-G5X"),
    quota("ml.m5.xlarge", 4, "L-M5X"),
    quota("ml.c5.large", 2, "L-C5L"),
    {"ServiceCode": "sagemaker", "QuotaName": "Total domains", "QuotaCode": "L-D", "Value": 1.0},
]


# ---------------------------------------------------------------------------------------------------------------


def test_all_checks_pass(moto_env, tmp_path):
    environment_plan = load_config(write_config(tmp_path), "dev")
    for ep, h in (("chat", HASH_A), ("batch", HASH_B), ("small", HASH_A)):
        build(tmp_path / "build", ep, h)
        publish(environment_plan, ep, h)
    deploy_artifact_stack(environment_plan)
    # chat (2 + a blue/green update's 2) + batch (1 + 1) share ml.g5.2xlarge: 6. small: 2 + 2.
    session, stub = quotas_session(DEFAULTS, [quota("ml.g5.2xlarge", 6, "L-G52X")])
    checks = run_preflight(planned(environment_plan, tmp_path / "build"), session)
    stub.assert_no_pending_responses()
    assert [c.name for c in checks] == [
        "region",
        "credentials",
        "quota ml.g5.2xlarge",
        "quota ml.m5.xlarge",
        "kept data",
        "artifact chat",
        "artifact batch",
        "artifact small",
    ]
    assert all(c.ok and not c.skipped for c in checks), [c.message for c in checks if not c.ok]
    by = checks_by_name(checks)
    assert by["credentials"].message.startswith(f"account {ACCOUNT}")
    assert by["quota ml.g5.2xlarge"].message == (
        "6 >= 6 at peak (chat: 4 (autoscaling.max_capacity 2 + a blue/green update's new fleet of 2); batch: 2 "
        "(instance_count 1 + a blue/green update's new fleet of 1))"
    )


def test_quota_shortfalls_name_the_quota_and_what_to_request(moto_env, tmp_path):
    environment_plan = load_config(write_config(tmp_path), "dev")
    # g5.2xlarge: applied 2 < 3 needed (deploy fails); m5.xlarge: default 3, enough to run 2, not to update (4).
    defaults = [d if "m5" not in d["QuotaName"] else quota("ml.m5.xlarge", 3, "L-M5X") for d in DEFAULTS]
    session, _ = quotas_session(defaults, [quota("ml.g5.2xlarge", 2, "L-G52X")])
    by = checks_by_name(run_preflight(planned(environment_plan, tmp_path / "build"), session))
    g5, m5 = by["quota ml.g5.2xlarge"], by["quota ml.m5.xlarge"]
    assert not g5.ok and not m5.ok
    assert (
        "quota 'ml.g5.2xlarge for endpoint usage' (L-G52X) is 2 in us-east-1, but the endpoints run up to 3"
        in g5.message
    )
    assert "chat: 4 (autoscaling.max_capacity 2" in g5.message and "the deploy would fail" in g5.message
    assert "--quota-code L-G52X --desired-value 6 --region us-east-1" in g5.message
    assert "is 3 in us-east-1 (AWS default): enough to run (2), but not for an update, which needs 4" in m5.message
    assert "--quota-code L-M5X --desired-value 4" in m5.message


def test_instance_type_not_offered_in_region(moto_env, tmp_path):
    environment_plan = load_config(
        write_config(tmp_path, endpoints=[{"name": "big", "instance_type": "ml.g5.12xlarge"}]), "dev"
    )
    session, _ = quotas_session(DEFAULTS, [])
    by = checks_by_name(run_preflight(planned(environment_plan, tmp_path / "build"), session))
    msg = by["quota ml.g5.12xlarge"].message
    assert not by["quota ml.g5.12xlarge"].ok
    assert msg.startswith(
        "ml.g5.12xlarge is not offered for SageMaker endpoints in us-east-1 (no quota "
        "'ml.g5.12xlarge for endpoint usage')"
    )
    assert "change instance_type of big" in msg and "offered in that family: ml.g5.2xlarge, ml.g5.xlarge" in msg


def test_quotas_unreadable(moto_env, tmp_path):
    environment_plan = load_config(write_config(tmp_path), "dev")
    sq = boto3.client("service-quotas", region_name=REGION)
    with Stubber(sq) as stub:
        stub.add_client_error("list_aws_default_service_quotas", "AccessDeniedException", "not allowed")
        checks = run_preflight(planned(environment_plan, tmp_path / "build"), Session(**{"service-quotas": sq}))
    by = checks_by_name(checks)
    assert not by["quotas"].ok and "AccessDeniedException: not allowed" in by["quotas"].message
    assert "servicequotas:ListServiceQuotas" in by["quotas"].message


def test_artifact_problems(moto_env, tmp_path):
    environment_plan = load_config(
        write_config(
            tmp_path,
            endpoints=[
                {"name": "chat"},
                {"name": "pinned", "artifact_hash": HASH_B},
                {"name": "unbuilt"},
                {"name": "stale"},
            ],
        ),
        "dev",
    )
    root = tmp_path / "build"
    session, _ = quotas_session(DEFAULTS, [quota("ml.g5.2xlarge", 8, "L-G52X")])
    build(root, "chat", HASH_A)
    build(root, "stale", HASH_A)
    by = checks_by_name(run_preflight(planned(environment_plan, root), session))
    assert (
        "artifact bucket pf-dev-artifacts-123456789012-us-east-1 does not exist: deploy the artifacts stack"
        in by["artifact chat"].message
        and "npx cdk deploy" in by["artifact chat"].message
    )

    build(root, "pinned", HASH_A)  # the pin wins over the local build, as in the stack
    publish(environment_plan, "pinned", HASH_B)
    publish(environment_plan, "stale", HASH_A, body_hash=HASH_B)  # a manifest that does not match its prefix
    session, _ = quotas_session(DEFAULTS, [quota("ml.g5.2xlarge", 8, "L-G52X")])
    by = checks_by_name(run_preflight(planned(environment_plan, root), session))
    assert by["artifact pinned"].ok and "the config's artifact_hash" in by["artifact pinned"].message
    chat = by["artifact chat"]
    assert not chat.ok and f"models/chat/{HASH_A}/manifest.json does not exist" in chat.message
    assert "python -m model_build publish --config" in chat.message and "--endpoint chat" in chat.message
    assert not by["artifact unbuilt"].ok and "no built artifact" in by["artifact unbuilt"].message
    assert "python -m model_build build" in by["artifact unbuilt"].message
    assert (
        not by["artifact stale"].ok
        and "holds content hash bbbbbbbbbbbb..., not aaaaaaaaaaaa..." in by["artifact stale"].message
    )


def test_wrong_account_stops_early(moto_env, tmp_path):
    environment_plan = load_config(write_config(tmp_path, account="111122223333"), "dev")
    checks = run_preflight(planned(environment_plan, tmp_path / "build"))
    assert [(c.name, c.ok) for c in checks] == [("region", True), ("credentials", False)]
    assert "is account 111122223333, but the credentials are account 123456789012" in checks[1].message
    assert "change `account:` in the config" in checks[1].message


def test_no_credentials(moto_env, tmp_path, monkeypatch):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k)
    checks = run_preflight(planned(load_config(write_config(tmp_path), "dev"), tmp_path / "build"))
    assert [(c.name, c.ok) for c in checks] == [("region", True), ("credentials", False)]
    assert checks[1].message.startswith("no AWS credentials")


@pytest.mark.parametrize(
    "cli_region, expected",
    [
        (None, "no AWS region: set `region:` on environment 'dev'"),
        # The config's region is checked when the config loads; one from the AWS CLI settings is not.
        ("xx-nowhere-9", "xx-nowhere-9 is not a SageMaker region known to botocore"),
    ],
)
def test_region_problems(moto_env, tmp_path, monkeypatch, cli_region, expected):
    monkeypatch.delenv("AWS_REGION")
    if cli_region:
        monkeypatch.setenv("AWS_DEFAULT_REGION", cli_region)  # what botocore reads (not AWS_REGION)
    else:
        monkeypatch.delenv("AWS_DEFAULT_REGION")
    checks = run_preflight(planned(load_config(write_config(tmp_path, region=None), "dev"), tmp_path / "build"))
    assert [(c.name, c.ok) for c in checks] == [("region", False)]
    assert expected in checks[0].message


def test_cli_preflight_on_the_emulator_config(moto_env, tmp_path, capsys):
    """config/local.yaml (emulator: true): quotas are skipped; the artifact decides the exit status."""
    config = ROOT / "config" / "local.yaml"
    environment_plan = load_config(config, "local")
    argv = ["preflight", "--config", str(config), "--build-root", str(tmp_path / "build")]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "SKIP  quota ml.m5.xlarge" in captured.out and "FAIL  artifact tiny-gpt2" in captured.out
    assert captured.err.startswith(
        "error: preflight of environment 'local': 1 of 5 checks failed:\n  - artifact tiny-gpt2: "
    )
    assert "Traceback" not in captured.err

    build(tmp_path / "build", "tiny-gpt2", HASH_A)
    deploy_artifact_stack(environment_plan)
    bucket = artifact_bucket_name(environment_plan.project, "local", ACCOUNT, REGION)
    boto3.client("s3").create_bucket(Bucket=bucket)
    boto3.client("s3").put_object(
        Bucket=bucket,
        Key=artifact_prefix("tiny-gpt2", HASH_A) + "manifest.json",
        Body=json.dumps({"content_hash": HASH_A}).encode(),
    )
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "PASS  artifact tiny-gpt2" in out and "all 5 checks passed" in out


def test_before_the_artifact_stack_the_artifact_checks_are_pending(moto_env, tmp_path):
    """`make deploy` (and `make demo`) run the preflight before the artifact stack exists: its artifact checks
    are reported as pending (PEND, not a failure); they run for real after publish."""
    from model_build.preflight import ARTIFACTS_PENDING, Check, artifacts_pending, format_checks

    environment_plan = load_config(ROOT / "config" / "local.yaml", "local")
    checks = artifacts_pending(run_preflight(planned(environment_plan, tmp_path / "build")))
    pending = checks_by_name(checks)["artifact tiny-gpt2"]
    assert pending.ok and pending.label == "PEND" and pending.message == ARTIFACTS_PENDING
    report = format_checks(checks)
    assert f"PEND  artifact tiny-gpt2  {ARTIFACTS_PENDING}" in report and "FAIL" not in report
    assert "runs after the artifact stack is deployed" in ARTIFACTS_PENDING

    # A redeploy: the artifact is already published, so the same call reports it as passed.
    build(tmp_path / "build", "tiny-gpt2", HASH_A)
    publish(environment_plan, "tiny-gpt2", HASH_A)
    checks = artifacts_pending(run_preflight(planned(environment_plan, tmp_path / "build")))
    assert checks_by_name(checks)["artifact tiny-gpt2"].label == "PASS"
    # Only artifact checks wait for a later step: any other failure stays a failure.
    assert [c.label for c in artifacts_pending([Check("credentials", False, "expired")])] == ["FAIL"]


def test_make_deploy_prints_the_artifact_checks_as_pending(moto_env, monkeypatch):
    """The wiring in workstation/deploy.py: its first preflight report (what `make demo` shows) says PEND. The
    command runner is cut off at the first command after the preflight (a build or `cdk synth`)."""
    from model_build.preflight import ARTIFACTS_PENDING
    from workstation import deploy as deploy_module

    def stop(cmd: list[str], **_: object) -> str:
        raise deploy_module.DeployError(f"stopped before {Path(cmd[0]).name}")

    monkeypatch.setattr(deploy_module, "run", stop)
    lines: list[str] = []
    with pytest.raises(deploy_module.DeployError, match="stopped before"):
        deploy_module.deploy(load_config(ROOT / "config" / "local.yaml", "local"), echo=lines.append)
    assert f"PEND  artifact tiny-gpt2  {ARTIFACTS_PENDING}" in lines
    assert not [line for line in lines if line.startswith("FAIL")]


# ---- kept data (retain_data), instance-type changes under autoscaling, bootstrap version --------------------------


def _checks_named(checks, prefix):
    return [c for c in checks if c.name.startswith(prefix)]


def test_kept_bucket_and_repository_must_be_adopted_and_adoption_needs_them(moto_env, tmp_path):
    from model_build.preflight import kept_data_checks

    path = write_config(tmp_path, emulator=True)
    environment_plan = load_config(path, "dev")
    session = boto3.Session(region_name=REGION)
    [fresh] = kept_data_checks(environment_plan, session, ACCOUNT, REGION)
    assert fresh.ok and "nothing kept" in fresh.message

    bucket = artifact_bucket_name("pf", "dev", ACCOUNT, REGION)
    boto3.client("s3").create_bucket(Bucket=bucket)
    boto3.client("ecr").create_repository(repositoryName="pf-dev")
    [kept] = kept_data_checks(environment_plan, session, ACCOUNT, REGION)
    assert not kept.ok
    assert f"bucket {bucket} and repository pf-dev were kept by an earlier deploy" in kept.message
    assert "set `adopt_kept_data: true` on environment 'dev'" in kept.message

    raw = yaml.safe_load(path.read_text())
    raw["environments"]["dev"]["adopt_kept_data"] = True
    path.write_text(yaml.safe_dump(raw))
    [adopting] = kept_data_checks(load_config(path, "dev"), session, ACCOUNT, REGION)
    assert adopting.ok and adopting.message == f"adopting the kept bucket {bucket} and repository pf-dev"

    boto3.client("ecr").delete_repository(repositoryName="pf-dev")
    [missing] = kept_data_checks(load_config(path, "dev"), session, ACCOUNT, REGION)
    assert not missing.ok and "but repository pf-dev do not exist: remove adopt_kept_data" in missing.message


def test_adopting_needs_an_environment_that_retains_data(tmp_path):
    from endpoint_config import ConfigError

    raw = yaml.safe_load(write_config(tmp_path).read_text())
    raw["environments"]["dev"].update(adopt_kept_data=True, retain_data=False)
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="environment 'dev': adopt_kept_data: true uses a bucket and repository kept"):
        load_config(tmp_path / "bad.yaml", "dev")


def test_instance_type_change_on_an_autoscaled_endpoint_is_refused_with_the_two_steps(moto_env, tmp_path):
    """SageMaker refuses UpdateEndpoint changing the instance type of a variant registered with Application Auto
    Scaling: the preflight finds it (deployed config vs the file) and says how to deploy it in two steps."""
    from model_build.preflight import update_checks

    sm = boto3.client("sagemaker")
    role = f"arn:aws:iam::{ACCOUNT}:role/x"
    for name in ("dev-chat", "dev-batch"):
        sm.create_model(ModelName=name, ExecutionRoleArn=role, PrimaryContainer={"Image": "i"})
        sm.create_endpoint_config(
            EndpointConfigName=name,
            ProductionVariants=[
                {
                    "VariantName": "AllTraffic",
                    "ModelName": name,
                    "InstanceType": "ml.m5.xlarge",
                    "InitialInstanceCount": 1,
                }
            ],
        )
        sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    boto3.client("application-autoscaling").register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId="endpoint/dev-chat/variant/AllTraffic",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        MinCapacity=1,
        MaxCapacity=2,
    )
    environment_plan = load_config(write_config(tmp_path, emulator=True), "dev")  # the file says ml.g5.2xlarge for both
    checks = {c.name: c for c in update_checks(environment_plan, boto3.Session(region_name=REGION), REGION)}
    assert not checks["update chat"].ok
    assert (
        "endpoint dev-chat runs ml.m5.xlarge and is registered with Application Auto Scaling"
        in checks["update chat"].message
    )
    assert (
        "(1) set `autoscaling: null` for endpoint 'chat' (keep instance_type ml.m5.xlarge)"
        in checks["update chat"].message
    )
    assert "update batch" not in checks  # not scaled: SageMaker replaces the fleet
    assert "update small" not in checks  # not deployed


def _deployed_config(**variant) -> dict:
    """A DescribeEndpointConfig answer: a model on its variant, unless the variant names none (inference components)."""
    return {"EndpointConfigName": "c", "ProductionVariants": [{"VariantName": "AllTraffic", **variant}]}


MODEL_ON_VARIANT = _deployed_config(ModelName="m", InstanceType="ml.g5.12xlarge", InitialInstanceCount=1)
COMPONENTS = _deployed_config(
    InstanceType="ml.g5.12xlarge",
    InitialInstanceCount=1,
    ManagedInstanceScaling={"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2},
    InferenceAmiVersion="al2023-ami-sagemaker-inference-gpu-4-1",
)


@pytest.mark.parametrize(
    ("endpoint", "deployed", "fragment"),
    [
        ("summarize-async", MODEL_ON_VARIANT, "is deployed real-time; SageMaker cannot update it to asynchronous"),
        (
            "chat-vllm",
            {**MODEL_ON_VARIANT, "AsyncInferenceConfig": {"OutputConfig": {}}},
            "is deployed asynchronous; SageMaker cannot update it to real-time",
        ),
        ("chat-vllm", COMPONENTS, "is deployed with hosting.mode inference-components; changing it to endpoint"),
        ("assist-ic", MODEL_ON_VARIANT, "is deployed with hosting.mode endpoint; changing it to inference-components"),
        (
            "assist-ic",
            {
                **COMPONENTS,
                "ProductionVariants": [{**COMPONENTS["ProductionVariants"][0], "InstanceType": "ml.g6.12xlarge"}],
            },
            "hosts inference components and this deploy changes its endpoint config (instance_type 'ml.g6.12xlarge' -> "
            "'ml.g5.12xlarge')",
        ),
    ],
)
def test_updates_sagemaker_refuses_in_place_are_refused_with_what_works(endpoint, deployed, fragment):
    """Each mode switch against a deployed endpoint config (config/examples/production.yaml's three endpoints):
    refused, naming the change and the deploys that work; the deployed kind itself passes."""
    from model_build.preflight import mode_problem

    plan = load_config(ROOT / "config/examples/production.yaml", "prod").plan(endpoint)
    problem = mode_problem(plan, deployed)
    assert problem is not None and fragment in problem, problem
    assert f"destroy stack {plan.stack_name} and deploy it again" in problem
    same = {
        "summarize-async": {**MODEL_ON_VARIANT, "AsyncInferenceConfig": {}},
        "chat-vllm": MODEL_ON_VARIANT,
        "assist-ic": COMPONENTS,
    }[endpoint]
    assert mode_problem(plan, same) is None


def test_bootstrap_version_is_read_and_compared_with_what_the_templates_need(moto_env, synth):
    from workstation.deploy import DEFAULT_BOOTSTRAP_PARAMETER, bootstrap_version, required_bootstrap_version

    required, parameter = required_bootstrap_version(synth("config/examples/minimal.yaml").outdir)
    assert (required, parameter) == (6, DEFAULT_BOOTSTRAP_PARAMETER)  # every template's CheckBootstrapVersion rule
    session = boto3.Session(region_name=REGION)
    assert bootstrap_version(session) is None
    boto3.client("ssm").put_parameter(Name=parameter, Value="5", Type="String")
    assert bootstrap_version(session) == 5  # too old: `make deploy` runs `cdk bootstrap` to upgrade


def test_clean_keeps_what_is_pinned_built_or_deployed_and_deletes_only_with_the_flag(moto_env, tmp_path, capsys):
    """`model_build clean`: old content-addressed artifacts accumulate; the deployed one (the old fleet's, during an
    update) and what the next deploy publishes must stay. A dry run by default."""
    HASH_C = "c" * 64
    config = write_config(tmp_path, emulator=True, endpoints=[{"name": "chat"}])
    environment_plan = load_config(config, "dev")
    bucket = artifact_bucket_name("pf", "dev", ACCOUNT, REGION)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    for h in (HASH_A, HASH_B, HASH_C):
        for name in ("manifest.json", "model.safetensors"):
            s3.put_object(Bucket=bucket, Key=f"models/chat/{h}/{name}", Body=b"x")
    build(tmp_path / "build", "chat", HASH_B)  # what the next deploy publishes
    sm = boto3.client("sagemaker")  # the running endpoint reads HASH_C
    sm.create_model(
        ModelName="m",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
        PrimaryContainer={
            "Image": "i",
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": f"s3://{bucket}/models/chat/{HASH_C}/",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        },
    )
    sm.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.m5.xlarge", "InitialInstanceCount": 1}
        ],
    )
    sm.create_endpoint(
        EndpointName=environment_plan.endpoint_name(environment_plan.endpoint("chat")), EndpointConfigName="c"
    )
    argv = ["clean", "--config", str(config), "--env", "dev", "--build-root", str(tmp_path / "build")]

    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"keep    {HASH_B[:12]}  (built)" in out and f"keep    {HASH_C[:12]}  (deployed)" in out
    assert f"remove  {HASH_A[:12]}  (2 objects)" in out and "dry run: 1 artifact(s)" in out
    assert len(s3.list_objects_v2(Bucket=bucket)["Contents"]) == 6, "a dry run deletes nothing"

    assert main([*argv, "--delete"]) == 0
    left = {o["Key"].split("/")[2] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert left == {HASH_B, HASH_C}
    assert main([*argv, "--endpoint", "nope"]) == 2
    assert "no endpoint named 'nope'; defined: chat" in capsys.readouterr().err


def _expected_peak(spec) -> int:
    """An endpoint's instance peak, worked out here from the config as the SageMaker pages describe updates: an
    inference-component endpoint never exceeds its managed scaling's max_instances; otherwise the fleet at its largest
    plus, while updating, a whole new blue/green fleet, or a rolling batch (the whole fleet on rollback unless
    rollback_maximum_batch_size says less)."""
    import math

    if spec.hosting.mode == "inference-components":
        return spec.hosting.instance_scaling.max_instances if spec.hosting.instance_scaling else 1
    fleet = spec.autoscaling.max_capacity if spec.autoscaling else spec.instance_count
    rolling = spec.deployment.rolling if spec.deployment else None
    if rolling is None:
        return 2 * fleet

    def size(capacity):
        return capacity.instances if capacity.instances else max(1, math.ceil(capacity.percent * fleet / 100))

    back = size(rolling.rollback_maximum_batch_size) if rolling.rollback_maximum_batch_size else fleet
    return fleet + max(size(rolling.maximum_batch_size), back)


ROLLING = {
    "rolling": {
        "maximum_batch_size": {"percent": 25},
        "rollback_maximum_batch_size": {"instances": 1},
        "wait_interval_s": 300,
    },
    "auto_rollback": {"period_s": 60, "evaluation_periods": 3},
}


@pytest.mark.parametrize("case", [*[f"{c}:{e}" for c, e in EXAMPLE_CASES], "rolling"])
def test_the_quota_preflight_asks_for_is_the_plans_peak(case, tmp_path):
    """For every example config and environment (inference components included) and a rolling deployment, the
    quota figure preflight asks for is each endpoint's peak as worked out independently (_expected_peak), summed
    per instance type."""
    from model_build.preflight import Quota, quota_checks

    if case == "rolling":
        config = write_config(tmp_path, endpoints=[{"name": "big", "instance_count": 8, "deployment": ROLLING}])
        environment_plan = load_config(config, "dev")
    else:
        path, env = case.split(":")
        environment_plan = load_config(ROOT / path, None if env == "None" else env)
    need: dict[str, int] = {}
    for plan in environment_plan.plans:
        # An instance pool may take the whole fleet (docs/design/instance-pools.md): each needs the endpoint's peak.
        for instance_type in [plan.spec.instance_type, *(p.instance_type for p in plan.spec.instance_pools)]:
            need[instance_type] = need.get(instance_type, 0) + _expected_peak(plan.spec)
    quotas = {f"{t} for endpoint usage": Quota(f"{t} for endpoint usage", "L-X", 0, True) for t in need}
    for check in quota_checks(environment_plan, quotas, REGION):
        instance_type = check.name.removeprefix("quota ")
        assert f"--desired-value {need[instance_type]} " in check.message, check.message
    if case == "rolling":
        assert need == {"ml.g5.2xlarge": 8 + 2}  # 25 % of 8 forward, 1 back: not the blue/green 16


def test_an_endpoint_preflight_cannot_read_is_a_failed_update_check_not_a_new_one(moto_env):
    """Only SageMaker's "Could not find" means "not deployed yet" (the class of issue 17 item 18): with
    sagemaker:DescribeEndpoint refused by IAM (moto enforcing it), every endpoint's update check fails and says
    why, instead of passing as a first deploy."""
    import httpx

    from model_build.preflight import update_checks

    environment_plan = load_config(ROOT / "config/examples/production.yaml", "prod")
    assert (
        update_checks(environment_plan, boto3.Session(region_name=REGION), REGION) == []
    )  # none deployed: nothing to check
    iam = boto3.client("iam")
    iam.create_user(UserName="operator")
    iam.put_user_policy(
        UserName="operator",
        PolicyName="no-sagemaker",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": ["sts:GetCallerIdentity"], "Resource": "*"}],
            }
        ),
    )
    key = iam.create_access_key(UserName="operator")["AccessKey"]
    operator = boto3.Session(
        aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"], region_name=REGION
    )
    httpx.post(f"{moto_env.url}/moto-api/reset-auth", content=b"0").raise_for_status()  # from now on, IAM decides
    try:
        checks = update_checks(environment_plan, operator, REGION)
    finally:
        httpx.post(f"{moto_env.url}/moto-api/reset-auth", content=b"inf").raise_for_status()
    assert [c.name for c in checks] == [f"update {p.name}" for p in environment_plan.plans]
    assert all(not c.ok and "AccessDenied" in c.message and "unchecked" in c.message for c in checks), checks
