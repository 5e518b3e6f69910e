"""Run a converting recipe in the account: `model_build build --in-account`.

A system whose recipe converts the weights (hf-fastload's fp16 reshard, tensorrt-byoc's ONNX export, djl-*) cannot
plan from metadata and let the staging job move the Hub's own files: the converted files exist only once the recipe
ran. So the recipe runs where the bytes are cheap: the artifacts stack's recipe build project (stacks/recipe_build.py)
runs `model_build build` and `model_build publish` for one endpoint in the account, on compute sized from the model's
bytes, and this module starts it and follows its log (model_build/stage.py follow_codebuild). The build exports the
artifact's content hash (RECIPE_CONTENT_HASH, BatchGetBuilds' exportedEnvironmentVariables); this module then fetches
the published manifest.json (and the few small files the plan reads) into the build folder, marked `built_in_account`,
so the plan resolves the artifact as after a local build and `model_build publish` finds it published. A succeeded
build of the same config and endpoint whose artifact is still published is reused instead of run again. Limits,
figures and their sources: docs/design/staging.md "Converting recipes in the account".
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from deployment import EndpointPlan, EnvironmentPlan

GB = 1000**3
RECIPE_SPEC_PREFIX = "recipe-specs/"  # stacks/recipe_build.py RECIPE_SPEC_PREFIX: the project's role reads only there
# The variable the project's buildspec exports once publish succeeded (stacks/recipe_build.py CONTENT_HASH_VARIABLE).
CONTENT_HASH_VARIABLE = "RECIPE_CONTENT_HASH"
HASH = re.compile(r"[0-9a-f]{64}")
# The files of a build folder the plan reads besides manifest.json: the chat template (deployment/plan.py
# chat_by_default, systems/chat.py has_chat_template) and a planned Hub model's config (facts/models.py
# planned_model_in). Fetched with the manifest when the artifact lists them, each checked against its sha256.
PLAN_FILES = ("config.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json")
PLAN_FILE_LIMIT = 16 * 1024**2  # bytes: a config or tokenizer config, never weights
RECENT_BUILDS = 20  # ListBuildsForProject's newest ids looked at for a build to reuse (as stage.py's _running_build)
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


def checkpoint_systems() -> list[str]:
    """The registered systems that serve a checkpoint's own files (staged Hub -> S3, nothing converted)."""
    from systems import all_systems

    return [name for name, system in all_systems().items() if system.plain_checkpoint.supported]


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
            f"on a checkpoint system ({', '.join(checkpoint_systems())}: planned from metadata, staged Hub -> S3 "
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


@dataclass(frozen=True)
class InAccountResult:
    build_id: str
    content_hash: str
    reused: bool
    manifest_path: Path


def spec_key(environment_plan: EnvironmentPlan, plan: EndpointPlan) -> tuple[str, bytes]:
    """The config's key under recipe-specs/ (the endpoint and the config's sha256: the build's inputs) and its bytes."""
    body = Path(environment_plan.config_path).read_bytes()
    return f"{RECIPE_SPEC_PREFIX}{plan.name}/{hashlib.sha256(body).hexdigest()}.yaml", body


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

    check_in_account(environment_plan, plan)
    session = session or session_for(environment_plan.environment)
    bucket, s3 = _bucket(environment_plan, session)
    return _start_and_follow(
        environment_plan, plan, session, bucket, s3, quiet=quiet, out=out or sys.stdout, source_bytes=source_bytes
    )


def build_and_fetch(
    environment_plan: EnvironmentPlan,
    plan: EndpointPlan,
    build_dir: Path,
    *,
    session=None,
    quiet: bool = False,
    out: TextIO | None = None,
    source_bytes: int | None = None,
) -> InAccountResult:
    """`model_build build --in-account`: reuse a succeeded build of this config and endpoint whose artifact is
    published, else run one; then fetch its published manifest into `build_dir` (`fetch_published`)."""
    from deployment.aws import session_for

    out = out or sys.stdout
    say = (lambda text: None) if quiet else (lambda text: print(text, file=out, flush=True))
    check_in_account(environment_plan, plan)
    session = session or session_for(environment_plan.environment)
    bucket, s3 = _bucket(environment_plan, session)
    key, _ = spec_key(environment_plan, plan)
    found = reusable_build(session, environment_plan, plan, s3, bucket, f"s3://{bucket}/{key}#{plan.name}")
    if found is not None:
        build_id, content_hash = found
        say(f"[recipe] {plan.name}: build {build_id} of this config already published {content_hash[:12]}: reused")
    else:
        build_id = _start_and_follow(
            environment_plan, plan, session, bucket, s3, quiet=quiet, out=out, source_bytes=source_bytes
        )
        [build] = session.client("codebuild").batch_get_builds(ids=[build_id])["builds"]
        content_hash = exported_content_hash(build)
    path = fetch_published(s3, bucket, plan.name, content_hash, build_id, Path(build_dir))
    say(f"[recipe] {plan.name}: s3://{bucket}/{_manifest_key(plan.name, content_hash)} -> {path}")
    return InAccountResult(build_id, content_hash, found is not None, path)


def _bucket(environment_plan: EnvironmentPlan, session) -> tuple[str, Any]:
    from model_build.publish import PublishError, artifact_bucket_client

    try:
        return artifact_bucket_client(environment_plan, session=session)
    except PublishError as err:
        raise RecipeJobError(str(err)) from None


def _start_and_follow(
    environment_plan: EnvironmentPlan,
    plan: EndpointPlan,
    session,
    bucket: str,
    s3: Any,
    *,
    quiet: bool,
    out: TextIO,
    source_bytes: int | None,
) -> str:
    from model_build.stage import StageError, StagePlan, follow_codebuild

    say = (lambda text: None) if quiet else (lambda text: print(text, file=out, flush=True))
    size = source_bytes if source_bytes is not None else source_bytes_from_hub(plan)
    sized = plan_recipe_build(size, model=f"endpoint {plan.name!r} (model {plan.model!r})")
    say(f"[recipe] {plan.name}: {sized.describe()}")
    key, body = spec_key(environment_plan, plan)
    s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/yaml")
    spec_uri = f"s3://{bucket}/{key}"
    say(f"[recipe] config uploaded to {spec_uri}")
    try:
        return follow_codebuild(
            session,
            environment_plan.stack_name("artifacts"),
            spec_uri,
            f"{spec_uri}#{plan.name}",
            StagePlan(0, size, sized.timeout_minutes, 0),
            quiet=quiet,
            out=out,
            resume=_resume(environment_plan, plan),
            output="RecipeBuildProject",
            variables=build_variables(spec_uri, environment_plan.environment_name, plan.name, plan.hub_token_secret),
            compute_type=sized.compute_type,
            label="recipe",
        )
    except StageError as err:
        raise RecipeJobError(str(err)) from None


def _resume(environment_plan: EnvironmentPlan, plan: EndpointPlan) -> str:
    return (
        f"python -m model_build build --in-account --config {environment_plan.config_path} --env "
        f"{environment_plan.environment_name} --endpoint {plan.name}"
    )


def _manifest_key(endpoint: str, content_hash: str) -> str:
    from artifact.manifest import MANIFEST_NAME
    from endpoint_config import artifact_prefix

    return artifact_prefix(endpoint, content_hash) + MANIFEST_NAME


def exported_content_hash(build: dict[str, Any]) -> str:
    """The content hash a recipe build exported: BatchGetBuilds' Build.exportedEnvironmentVariables, a list of
    {name, value} (botocore's codebuild model, ExportedEnvironmentVariable), holding RECIPE_CONTENT_HASH once the
    buildspec's publish succeeded."""
    exported = {v.get("name"): v.get("value") for v in build.get("exportedEnvironmentVariables") or []}
    value = exported.get(CONTENT_HASH_VARIABLE)
    if not isinstance(value, str) or not HASH.fullmatch(value):
        found = f"{value!r}" if CONTENT_HASH_VARIABLE in exported else f"none (exported: {sorted(exported) or 'none'})"
        raise RecipeJobError(
            f"CodeBuild build {build.get('id')} ended {build.get('buildStatus')} but its exported variable "
            f"{CONTENT_HASH_VARIABLE} is {found}, not a 64-hex content hash: the artifacts stack's recipe project "
            "predates this version (deploy the artifacts stack again, then run the build again), or the build "
            "did not reach its publish"
        )
    return value


def reusable_build(
    session, environment_plan: EnvironmentPlan, plan: EndpointPlan, s3: Any, bucket: str, destination: str
) -> tuple[str, str] | None:
    """(build id, content hash) of the newest succeeded build of the project for `destination` (the config's key
    and the endpoint: the same inputs) whose artifact's manifest.json is in the bucket, else None."""
    from model_build.stage import StageError, staging_project

    try:
        project = staging_project(session, environment_plan.stack_name("artifacts"), "RecipeBuildProject")
    except StageError as err:
        raise RecipeJobError(str(err)) from None
    codebuild = session.client("codebuild")
    ids = codebuild.list_builds_for_project(projectName=project, sortOrder="DESCENDING").get("ids", [])
    if not ids:
        return None
    for build in codebuild.batch_get_builds(ids=ids[:RECENT_BUILDS])["builds"]:
        variables = build.get("environment", {}).get("environmentVariables", [])
        env = {v["name"]: v.get("value") for v in variables}
        if build.get("buildStatus") != "SUCCEEDED" or env.get("STAGING_DESTINATION") != destination:
            continue
        try:
            content_hash = exported_content_hash(build)
        except RecipeJobError:
            continue  # a build of an older buildspec: nothing exported
        if _object_exists(s3, bucket, _manifest_key(plan.name, content_hash)):
            return build["id"], content_hash
    return None


def _object_exists(s3: Any, bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def _get(s3: Any, bucket: str, key: str, what: str) -> bytes:
    from botocore.exceptions import ClientError

    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as err:
        raise RecipeJobError(
            f"cannot read s3://{bucket}/{key} ({what}): {err.response.get('Error', {}).get('Code')}"
        ) from None


def fetch_published(s3: Any, bucket: str, endpoint: str, content_hash: str, build_id: str, build_dir: Path) -> Path:
    """The published manifest.json of `content_hash` (and the PLAN_FILES it lists) into `build_dir`, which is
    replaced whole: its manifest gains `built_in_account` {"build", "bucket"}, so `model_build publish` checks the
    bucket instead of looking for files here (model_build/publish.py). Returns the manifest's path."""
    from artifact.manifest import MANIFEST_NAME, Manifest, ManifestError

    key = _manifest_key(endpoint, content_hash)
    try:
        document = json.loads(_get(s3, bucket, key, f"the manifest build {build_id} published"))
    except ValueError:
        raise RecipeJobError(f"s3://{bucket}/{key} is not JSON: inspect it; the bucket's manifest is damaged") from None
    if not isinstance(document, dict) or document.get("content_hash") != content_hash:
        raise RecipeJobError(
            f"s3://{bucket}/{key} holds content_hash {document.get('content_hash') if isinstance(document, dict) else None!r}, "
            f"not {content_hash} (build {build_id}'s): the published manifest is damaged; inspect it"
        )
    build_dir = Path(build_dir).absolute()
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{build_dir.name}.tmp-", dir=build_dir.parent))
    try:
        files = {f.get("path"): f for f in document.get("files", []) if isinstance(f, dict)}
        for name in PLAN_FILES:
            entry = files.get(name)
            if entry is None:
                continue
            if not isinstance(entry.get("size"), int) or entry["size"] > PLAN_FILE_LIMIT:
                raise RecipeJobError(f"s3://{bucket}/{key}: {name}'s size {entry.get('size')!r} is not a small file")
            body = _get(s3, bucket, key[: -len(MANIFEST_NAME)] + name, f"{name} of build {build_id}")
            if hashlib.sha256(body).hexdigest() != entry.get("sha256"):
                raise RecipeJobError(
                    f"s3://{bucket}/{key[: -len(MANIFEST_NAME)]}{name} differs from its manifest entry (sha256): the "
                    "published artifact is damaged; inspect it"
                )
            (tmp / name).write_bytes(body)
        document["built_in_account"] = {"build": build_id, "bucket": bucket}
        (tmp / MANIFEST_NAME).write_text(json.dumps(document, indent=2) + "\n")
        try:
            if Manifest.load(tmp, require_files=True).built_in_account is None:  # the block publish reads, checked
                raise ManifestError("built_in_account was not written")
        except ManifestError as err:
            raise RecipeJobError(f"s3://{bucket}/{key}: {err}") from None
        _replace_dir(tmp, build_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return build_dir / MANIFEST_NAME


def _replace_dir(new: Path, target: Path) -> None:
    """`new` in place of `target` (model_build/cli.py build_endpoint's way: the old one aside, then removed)."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.replace(target, old / target.name)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


__all__ = [
    "InAccountResult",
    "RecipeJobError",
    "RecipePlan",
    "build_and_fetch",
    "build_in_account",
    "check_in_account",
    "exported_content_hash",
    "fetch_published",
    "plan_recipe_build",
    "reusable_build",
]
