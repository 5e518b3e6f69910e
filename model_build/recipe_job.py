"""Run a converting recipe in the account: `model_build build --in-account`.

A system whose recipe converts the weights (hf-fastload's fp16 reshard, tensorrt-byoc's ONNX export, djl-*) cannot
plan from metadata and let the staging job move the Hub's own files: the converted files exist only once the recipe
ran. So the recipe runs where the bytes are cheap: the artifacts stack's recipe build project (stacks/recipe_build.py)
runs `model_build build` and `model_build publish` for one endpoint in the account, on compute sized from the model's
bytes, and this module starts it and follows its log (model_build/stage.py follow_codebuild). Limits, figures and
their sources: docs/design/staging.md "Converting recipes in the account".
"""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from deployment import EndpointPlan, EnvironmentPlan

GB = 1000**3
RECIPE_SPEC_PREFIX = "recipe-specs/"  # stacks/recipe_build.py RECIPE_SPEC_PREFIX: the project's role reads only there
# On-demand LINUX_CONTAINER compute the job may use, smallest first: (type, disk bytes, memory GiB). Disk: LARGE's
# 128 GB from the CodeBuild User Guide, "Build environment compute modes and types" (on-demand environment types);
# 2XLARGE's 824 GB of SSD and both memory figures from botocore's codebuild model (ProjectEnvironment.computeType).
COMPUTE = (("BUILD_GENERAL1_LARGE", 128 * GB, 16), ("BUILD_GENERAL1_2XLARGE", 824 * GB, 144))
# The build venv (requirements-build.txt: torch's CPU wheel, transformers) and the image's own use of the disk,
# assumed (not measured in CodeBuild): room kept free beside the model.
VENV_BYTES = 20 * GB
# A converted artifact is at most twice its source (a bf16 checkpoint exported to fp32 ONNX; an fp16 reshard of fp32
# weights halves it): the disk holds the Hub download and the artifact together.
ARTIFACT_FACTOR = 2
# A recipe may hold the whole model in memory (a transformers load before the reshard or export), assumed: memory
# of the source's bytes plus Python, torch and the tokenizer.
BASE_MEMORY_BYTES = 2 * GB
GiB = 1024**3
# Download, write and upload, each over the bytes, at an assumed 25 MB/s (model_build/stage.py's staging rate: not
# measured, no AWS here); low on purpose so a healthy run is not cut.
ASSUMED_RATE_BYTES_S = 25 * 1000**2
START_MINUTES = 30  # provisioning, the image pull and `make venv-build` (torch, transformers) before the recipe
MIN_MINUTES, MAX_MINUTES = 5, 2160  # StartBuild timeoutInMinutesOverride (botocore's codebuild model)


class RecipeJobError(Exception):
    """The recipe cannot run in the account; the message says what and what to do (printed, no traceback)."""


@dataclass(frozen=True)
class RecipePlan:
    source_bytes: int
    disk_bytes: int
    compute_type: str
    compute_disk: int
    timeout_minutes: int

    def describe(self) -> str:
        return (
            f"{self.source_bytes / GB:.2f} GB from the Hub; disk needed about {self.disk_bytes / GB:.0f} GB (source + "
            f"up to {ARTIFACT_FACTOR}x artifact + {VENV_BYTES / GB:.0f} GB venv): CodeBuild {self.compute_type} "
            f"({self.compute_disk / GB:.0f} GB); timeout {self.timeout_minutes} min (at an assumed "
            f"{ASSUMED_RATE_BYTES_S / 1000**2:.0f} MB/s + {START_MINUTES} min to start)"
        )


def plan_recipe_build(source_bytes: int, *, model: str = "the model") -> RecipePlan:
    """The job's compute and timeout from the source's bytes, or RecipeJobError before anything starts."""
    artifact = ARTIFACT_FACTOR * source_bytes
    disk = source_bytes + artifact + VENV_BYTES
    memory = source_bytes + BASE_MEMORY_BYTES
    fits = [(kind, room) for kind, room, gib in COMPUTE if disk <= room and memory <= gib * GiB]
    if not fits:
        biggest, room, gib = COMPUTE[-1]
        raise RecipeJobError(
            f"{model}: its recipe needs about {disk / GB:.0f} GB of disk ({source_bytes / GB:.0f} GB from the Hub, up "
            f"to {artifact / GB:.0f} GB of converted artifact, {VENV_BYTES / GB:.0f} GB for the build venv) and "
            f"{memory / GB:.0f} GB of memory (the model loaded whole), over CodeBuild {biggest}'s {room / GB:.0f} GB "
            f"of disk or {gib} GiB of memory, the largest on-demand compute; nothing was started. Serve it "
            "on a checkpoint system (vllm, sglang, lmi-vllm, lmi-trtllm: planned from metadata, staged Hub -> S3 "
            "with no disk), or build it on a machine with that much disk and `model_build publish` it"
        )
    kind, room = fits[0]
    moved = source_bytes + 2 * artifact
    minutes = max(MIN_MINUTES, START_MINUTES + math.ceil(moved / ASSUMED_RATE_BYTES_S / 60))
    if minutes > MAX_MINUTES:
        raise RecipeJobError(
            f"{model}: moving about {moved / GB:.0f} GB at the assumed {ASSUMED_RATE_BYTES_S / 1000**2:.0f} MB/s needs "
            f"{minutes} min, over CodeBuild's 2160-minute build limit; nothing was started"
        )
    return RecipePlan(source_bytes, disk, kind, room, minutes)


def source_bytes_from_hub(plan: EndpointPlan) -> int:
    """The bytes the recipe downloads: the sum of the Hub's file sizes at the pinned revision (metadata only,
    artifact/hub_source.py), limited to the download's allow patterns."""
    from huggingface_hub.utils import filter_repo_objects

    from artifact.hub_source import HubError, open_hub_model
    from artifact.source import DEFAULT_ALLOW_PATTERNS

    try:
        hub = open_hub_model(plan.model, plan.revision)
    except HubError as err:
        raise RecipeJobError(f"endpoint {plan.name!r}: cannot size model {plan.model!r} from the Hub: {err}") from None
    names = filter_repo_objects(list(hub.files), allow_patterns=list(DEFAULT_ALLOW_PATTERNS))
    return sum(hub.files[name].size for name in names)


def check_in_account(environment_plan: EnvironmentPlan, plan: EndpointPlan) -> None:
    """Refuse, with what works instead, an endpoint the recipe job is not for."""
    from artifact.source import hub_model_id

    if environment_plan.environment.emulator:
        raise RecipeJobError(
            f"environment {environment_plan.environment_name!r} is the local emulator, which has no CodeBuild: build "
            f"there without --in-account (`python -m model_build build --config {environment_plan.config_path} --env "
            f"{environment_plan.environment_name} --endpoint {plan.name}`; its model is local)"
        )
    if plan.model_source is not None:
        raise RecipeJobError(f"endpoint {plan.name!r}: a hub model (model_source): there is nothing to build")
    if plan.system.plain_checkpoint.supported:
        raise RecipeJobError(
            f"endpoint {plan.name!r}: system {plan.system.name!r} serves the checkpoint's own files: `model_build "
            "build` plans it from the Hub's metadata and `model_build publish` stages it in the account; --in-account "
            "is for systems whose recipe converts the weights"
        )
    if hub_model_id(plan.model) is None:
        raise RecipeJobError(
            f"endpoint {plan.name!r}: model {plan.model!r} is a local directory, which the job in the account "
            "cannot read: build it here without --in-account"
        )


def build_variables(
    spec_uri: str, environment_name: str, endpoint: str, hub_token_secret: str | None
) -> list[dict[str, str]]:
    """StartBuild's environment overrides: what stacks/recipe_build.py's buildspec reads. The Hub token, when the
    config names one, as a SECRETS_MANAGER variable: CodeBuild reads it with the project's role, and huggingface_hub
    reads HF_TOKEN; it goes into no model's environment."""
    variables = [
        {"name": "RECIPE_CONFIG", "value": spec_uri, "type": "PLAINTEXT"},
        {"name": "RECIPE_ENV", "value": environment_name, "type": "PLAINTEXT"},
        {"name": "RECIPE_ENDPOINT", "value": endpoint, "type": "PLAINTEXT"},
        # follow_codebuild's "already running" match: one build per config and endpoint at a time
        {"name": "STAGING_DESTINATION", "value": f"{spec_uri}#{endpoint}", "type": "PLAINTEXT"},
    ]
    if hub_token_secret:
        variables.append({"name": "HF_TOKEN", "value": hub_token_secret, "type": "SECRETS_MANAGER"})
    return variables


def build_in_account(
    environment_plan: EnvironmentPlan,
    plan: EndpointPlan,
    *,
    session=None,
    quiet: bool = False,
    out: TextIO | None = None,
    source_bytes: int | None = None,
) -> str:
    """Size the job, upload the config as its spec, start the recipe build and follow it; returns the build id."""
    from deployment.aws import session_for
    from model_build.publish import PublishError, artifact_bucket_client
    from model_build.stage import StageError, StagePlan, follow_codebuild

    out = out or sys.stdout
    say = (lambda text: None) if quiet else (lambda text: print(text, file=out, flush=True))
    check_in_account(environment_plan, plan)
    size = source_bytes if source_bytes is not None else source_bytes_from_hub(plan)
    sized = plan_recipe_build(size, model=f"endpoint {plan.name!r} (model {plan.model!r})")
    say(f"[recipe] {plan.name}: {sized.describe()}")
    session = session or session_for(environment_plan.environment)
    try:
        bucket, s3 = artifact_bucket_client(environment_plan, session=session)
    except PublishError as err:
        raise RecipeJobError(str(err)) from None
    body = Path(environment_plan.config_path).read_bytes()
    key = f"{RECIPE_SPEC_PREFIX}{plan.name}/{hashlib.sha256(body).hexdigest()}.yaml"
    s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/yaml")  # type: ignore[attr-defined]
    spec_uri = f"s3://{bucket}/{key}"
    say(f"[recipe] config uploaded to {spec_uri}")
    resume = (
        f"python -m model_build build --in-account --config {environment_plan.config_path} --env "
        f"{environment_plan.environment_name} --endpoint {plan.name}"
    )
    try:
        return follow_codebuild(
            session,
            environment_plan.stack_name("artifacts"),
            spec_uri,
            f"{spec_uri}#{plan.name}",
            StagePlan(0, size, sized.timeout_minutes, 0),
            quiet=quiet,
            out=out,
            resume=resume,
            output="RecipeBuildProject",
            variables=build_variables(spec_uri, environment_plan.environment_name, plan.name, plan.hub_token_secret),
            compute_type=sized.compute_type,
            label="recipe",
        )
    except StageError as err:
        raise RecipeJobError(str(err)) from None


__all__ = ["RecipeJobError", "RecipePlan", "build_in_account", "check_in_account", "plan_recipe_build"]
