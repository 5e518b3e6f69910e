"""Stage a metadata-only build: its weights go from the Hub to the artifact bucket inside the account.

`model_build stage` (and `model_build publish` / `make deploy` for a manifest with a `staging` section):
  1. size the job from the manifest's staged bytes, or refuse before anything moves (`plan_staging`);
  2. upload the build dir's own files (publish's uploader) and the spec (the manifest) to staging-specs/;
  3. run the job and follow it until it ends: on AWS the CodeBuild project of the artifacts stack (StartBuild,
     BatchGetBuilds, its CloudWatch Logs stream); on the emulator the job's own code as a subprocess, pointed at the
     emulator exactly as this process is, its output streamed.
Why CodeBuild, the assumed rate and every limit with its source: docs/design/staging.md.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from deployment import EndpointPlan, EnvironmentPlan

ROOT = Path(__file__).resolve().parent.parent
GB = 1000**3
MiB = 1024**2
SPEC_PREFIX = "staging-specs/"  # stacks/weights_staging.py SPEC_PREFIX: the job's role may read only there
# The job's throughput from the Hub into S3 inside AWS, assumed (not measured: no AWS here). Low on purpose: the
# timeout must not cut a healthy run, and a run that times out resumes. Hub CDN and S3 limits: docs/design/staging.md.
ASSUMED_RATE_BYTES_S = 25 * 1000**2
START_MINUTES = 15  # CodeBuild provisioning, the image pull and the boto3 install, before the job starts
# StartBuild timeoutInMinutesOverride: 5-2160 (botocore's codebuild service model).
MIN_MINUTES, MAX_MINUTES = 5, 2160
# The job's memory: about (inflight + 1) parts (weights_staging/job.py DEFAULT_INFLIGHT 4, parts >= 16 MiB, at most
# 10,000 a file) plus Python and boto3; CodeBuild SMALL has 4 GiB (ProjectEnvironment.computeType documentation).
INFLIGHT, MIN_PART, MAX_PARTS = 4, 16 * MiB, 10_000
SMALL_MEMORY = 4 * 1024 * MiB
BASE_MEMORY = 200 * MiB
MAX_OBJECT = 5 * 1024**4  # S3's largest object, 5 TiB
POLL_S = 5.0
TAIL_LINES = 40


class StageError(Exception):
    """Staging cannot go on; the message says what is wrong and what to do (printed, no traceback)."""


@dataclass(frozen=True)
class StagePlan:
    files: int
    staged_bytes: int
    timeout_minutes: int
    memory_bytes: int

    def describe(self) -> str:
        return (
            f"{self.files} file(s), {self.staged_bytes / GB:.2f} GB from the Hub; job timeout {self.timeout_minutes} "
            f"min (at an assumed {ASSUMED_RATE_BYTES_S / 1000**2:.0f} MB/s + {START_MINUTES} min to start), memory "
            f"about {self.memory_bytes / MiB:.0f} MiB of CodeBuild SMALL's {SMALL_MEMORY / MiB:.0f} MiB, no disk"
        )


def _part_size(size: int) -> int:
    part = max(MIN_PART, -(-size // MAX_PARTS))
    return -(-part // MiB) * MiB


def plan_staging(document: dict[str, Any], *, where: str = "manifest.json") -> StagePlan:
    """The job's size from the manifest's staged files, or StageError before anything moves."""
    staging = document.get("staging")
    if not isinstance(staging, dict) or not isinstance(staging.get("files"), list):
        raise StageError(f"{where} has no staging section: nothing to fetch from the Hub; `model_build publish` it")
    sizes = {f["path"]: int(f["size"]) for f in document.get("files", []) if isinstance(f, dict) and "path" in f}
    missing = [p for p in staging["files"] if p not in sizes]
    if missing:
        raise StageError(f"{where}: staging.files names {missing}, which `files` does not list; rebuild it")
    staged = [sizes[p] for p in staging["files"]]
    total = sum(staged)
    too_big = [p for p in staging["files"] if sizes[p] > MAX_OBJECT]
    if too_big:
        raise StageError(f"{where}: {too_big} exceed S3's 5 TiB object limit; such a file cannot be staged")
    minutes = max(MIN_MINUTES, START_MINUTES + math.ceil(total / ASSUMED_RATE_BYTES_S / 60))
    if minutes > MAX_MINUTES:
        hours = (minutes - START_MINUTES) / 60
        raise StageError(
            f"staging {total / GB:.1f} GB needs about {hours:.0f} h at the assumed "
            f"{ASSUMED_RATE_BYTES_S / 1000**2:.0f} MB/s, over CodeBuild's 2160-minute (36 h) build limit; nothing was "
            "moved. Run the job's own code where no such limit applies (an EC2 instance in the bucket's region with "
            "the staging role's permissions: `python -m weights_staging --spec ... --destination ...`, which resumes "
            "and skips verified files), or serve a smaller checkpoint (a quantized revision)"
        )
    memory = BASE_MEMORY + (INFLIGHT + 1) * max((_part_size(s) for s in staged), default=MIN_PART)
    if memory > SMALL_MEMORY:
        raise StageError(
            f"the largest staged file needs parts of {max(map(_part_size, staged)) / MiB:.0f} MiB, about "
            f"{memory / MiB:.0f} MiB of memory, over CodeBuild SMALL's {SMALL_MEMORY / MiB:.0f} MiB"
        )
    return StagePlan(len(staged), total, minutes, memory)


# ---------------------------------------------------------------------------------------------------- staging


def stage_endpoint(
    environment_plan: EnvironmentPlan,
    plan: EndpointPlan,
    build_dir: Path,
    *,
    session=None,
    quiet: bool = False,
    out: TextIO | None = None,
):
    """Stage one endpoint's metadata-only build (`deployment.EndpointPlan` `plan`); returns publish's report with
    what was uploaded from the workstation (the job's own figures are in its output)."""
    from endpoint_config import artifact_prefix
    from model_build.publish import PublishError, artifact_bucket_client, load_manifest, publish_artifact

    out = out or sys.stdout
    say = (lambda text: None) if quiet else (lambda text: print(text, file=out, flush=True))
    build_dir = Path(build_dir)
    try:
        manifest = load_manifest(build_dir)
    except PublishError as err:
        raise StageError(str(err)) from None
    sized = plan_staging(manifest.document, where=str(build_dir / "manifest.json"))
    say(f"[stage] {plan.name}: {sized.describe()}")

    bucket, client = artifact_bucket_client(environment_plan, session=session)
    s3: Any = client
    prefix = artifact_prefix(plan.name, manifest.content_hash)
    destination = f"s3://{bucket}/{prefix}"
    staged = set(manifest.document["staging"]["files"])
    if _published(s3, bucket, prefix, build_dir):
        say(f"[stage] {destination} is already complete (its manifest.json is this build's)")
        return _report(bucket, prefix, manifest.content_hash, 0.0)
    own = frozenset(e.path for e in manifest.files if e.path not in staged)
    started = time.monotonic()
    say(f"[stage] uploading the build's own {len(own)} file(s) to {destination}")
    try:
        report = publish_artifact(
            build_dir,
            bucket,
            prefix,
            s3_client=s3,
            manifest=manifest,
            bucket_checked=True,
            only_files=own,
            progress=False if quiet else None,
        )
    except PublishError as err:
        raise StageError(str(err)) from None
    spec_key = f"{SPEC_PREFIX}{plan.name}/{manifest.content_hash}.json"
    s3.put_object(
        Bucket=bucket,
        Key=spec_key,
        Body=(build_dir / "manifest.json").read_bytes(),
        ContentType="application/json",
    )
    spec_uri = f"s3://{bucket}/{spec_key}"
    resume = (
        f"python -m model_build stage --config {environment_plan.config_path} --env "
        f"{environment_plan.environment_name} --endpoint {plan.name}"
    )
    if environment_plan.environment.emulator:
        run_locally(spec_uri, destination, quiet=quiet, out=out, resume=resume)
    else:
        from deployment.aws import session_for

        follow_codebuild(
            session or session_for(environment_plan.environment),
            environment_plan.stack_name("artifacts"),
            spec_uri,
            destination,
            sized,
            quiet=quiet,
            out=out,
            resume=resume,
        )
    report.seconds = time.monotonic() - started
    report.uploaded.append(prefix + "manifest.json")
    return report


def _report(bucket: str, prefix: str, content_hash: str, seconds: float):
    from model_build.publish import PublishReport

    return PublishReport(
        bucket=bucket, prefix=prefix, model_data="s3-prefix", content_hash=content_hash, seconds=seconds
    )


def _published(s3, bucket: str, prefix: str, build_dir: Path) -> bool:
    from botocore.exceptions import ClientError

    try:
        body = s3.get_object(Bucket=bucket, Key=prefix + "manifest.json")["Body"].read()
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return body == (build_dir / "manifest.json").read_bytes()


# ---------------------------------------------------------------------------------------------------- the emulator


def run_locally(spec_uri: str, destination: str, *, quiet: bool, out: TextIO, resume: str) -> None:
    """The job's own code as a subprocess, as CodeBuild runs it (`python -m weights_staging`), with this process's
    environment: on the emulator that points every AWS client at it (local_emulator/moto_server.py)."""
    command = [sys.executable, "-u", "-m", "weights_staging", "--spec", spec_uri, "--destination", destination]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    last: list[str] = []
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            if line.startswith("[staging] file"):
                last[:] = [line]
            if not quiet:
                print(line, file=out, flush=True)
        code = process.wait()
    except KeyboardInterrupt:
        process.terminate()
        process.wait()
        raise StageError(_interrupted(last, resume, "the staging job was stopped")) from None
    if code != 0:
        raise StageError(f"the staging job exited {code}:\n" + "\n".join(tail))


def _interrupted(last: list[str], resume: str, what: str) -> str:
    where = f"; it had reached: {last[0].removeprefix('[staging] ')}" if last else ""
    return (
        f"interrupted: {what}{where}. Resume with `{resume}`: files already staged and verified are skipped, "
        "the rest (and manifest.json, written last) follow"
    )


# ---------------------------------------------------------------------------------------------------- AWS


def staging_project(session, artifacts_stack: str, output: str = "WeightsStagingProject") -> str:
    """The artifacts stack's WeightsStagingProject output (stacks/artifact_store.py), or another project's."""
    from botocore.exceptions import ClientError

    try:
        stacks = session.client("cloudformation").describe_stacks(StackName=artifacts_stack)["Stacks"]
    except ClientError as err:
        raise StageError(f"cannot read stack {artifacts_stack}: {err}; deploy the artifacts stack first") from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    if output not in outputs:
        raise StageError(
            f"stack {artifacts_stack} has no {output} output: deploy the artifacts stack of this version "
            "first (it creates the job)"
        )
    return outputs[output]


def follow_codebuild(
    session,
    artifacts_stack: str,
    spec_uri: str,
    destination: str,
    sized: StagePlan,
    *,
    quiet: bool,
    out: TextIO,
    resume: str,
    poll_s: float = POLL_S,
    output: str = "WeightsStagingProject",
    variables: list[dict[str, str]] | None = None,
    compute_type: str | None = None,
    label: str = "stage",
) -> str:
    """Start the staging build (or follow one already running for this destination) and print its log lines until
    it ends; StageError unless it SUCCEEDED. Returns the build id. The recipe build (model_build/recipe_job.py)
    follows its own project the same way: `output` names it, `variables` and `compute_type` override its run."""
    codebuild, logs = session.client("codebuild"), session.client("logs")
    project = staging_project(session, artifacts_stack, output)
    build_id = _running_build(codebuild, project, destination)
    say = (lambda text: None) if quiet else (lambda text: print(text, file=out, flush=True))
    if build_id:
        say(f"[{label}] build {build_id} already runs for {destination}: following it")
    else:
        overrides: dict[str, Any] = {"timeoutInMinutesOverride": sized.timeout_minutes}
        if compute_type:
            overrides["computeTypeOverride"] = compute_type
        build_id = codebuild.start_build(
            projectName=project,
            environmentVariablesOverride=variables
            or [
                {"name": "STAGING_SPEC", "value": spec_uri, "type": "PLAINTEXT"},
                {"name": "STAGING_DESTINATION", "value": destination, "type": "PLAINTEXT"},
            ],
            **overrides,
        )["build"]["id"]
        say(f"[{label}] started CodeBuild build {build_id} (timeout {sized.timeout_minutes} min)")
    token: str | None = None
    last: list[str] = []
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    said_at = time.monotonic()
    group = stream = None
    try:
        while True:
            build = codebuild.batch_get_builds(ids=[build_id])["builds"][0]
            group, stream = build.get("logs", {}).get("groupName"), build.get("logs", {}).get("streamName")
            if group and stream:
                token, printed = _print_new_lines(logs, group, stream, token, tail, last, say)
                if printed:
                    said_at = time.monotonic()
            status = build["buildStatus"]
            if status != "IN_PROGRESS":
                break
            if time.monotonic() - said_at >= 10:  # the build is queued or provisioning: say so, never silent
                say(f"[{label}] build {build_id}: phase {build.get('currentPhase', 'QUEUED')}")
                said_at = time.monotonic()
            time.sleep(poll_s)
    except KeyboardInterrupt:
        raise StageError(
            _interrupted(
                last,
                resume,
                f"stopped following CodeBuild build {build_id}, which goes on in AWS (stop it with `aws codebuild "
                f"stop-build --id {build_id}`)",
            )
        ) from None
    if status != "SUCCEEDED":
        raise StageError(
            f"staging build {build_id} ended {status} (its log: CloudWatch Logs {group}/{stream}); run `{resume}` "
            "again to resume:\n" + "\n".join(tail)
        )
    return build_id


def _running_build(codebuild, project: str, destination: str) -> str | None:
    ids = codebuild.list_builds_for_project(projectName=project, sortOrder="DESCENDING").get("ids", [])[:20]
    if not ids:
        return None
    for build in codebuild.batch_get_builds(ids=ids)["builds"]:
        env = {v["name"]: v.get("value") for v in build.get("environment", {}).get("environmentVariables", [])}
        if build.get("buildStatus") == "IN_PROGRESS" and env.get("STAGING_DESTINATION") == destination:
            return build["id"]
    return None


def _print_new_lines(logs, group: str, stream: str, token: str | None, tail, last, say) -> tuple[str | None, int]:
    """Print the log stream's lines after `token`; returns the next token and how many lines were printed."""
    from botocore.exceptions import ClientError

    printed = 0
    while True:
        kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
        if token:
            kwargs["nextToken"] = token
        try:
            page = logs.get_log_events(**kwargs)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return token, printed  # the stream appears once the build starts writing
            raise
        for event in page.get("events", []):
            line = event["message"].rstrip("\n")
            tail.append(line)
            if line.startswith("[staging] file"):
                last[:] = [line]
            say(line)
            printed += 1
        following = page.get("nextForwardToken", token)
        if not page.get("events") or following == token:
            return following, printed
        token = following


def cmd_stage(args) -> int:
    """`model_build stage --config C [--env E] --endpoint N [--quiet]`."""
    from deployment import load_config
    from model_build.cli import BuildError

    environment_plan = load_config(args.config, args.env)
    plan = environment_plan.plan(args.endpoint)
    build_dir = Path(args.artifact or Path(args.build_root) / plan.name)
    try:
        report = stage_endpoint(environment_plan, plan, build_dir, quiet=args.quiet)
    except StageError as err:
        raise BuildError(str(err)) from None
    print(f"staged s3://{report.bucket}/{report.prefix} in {report.seconds:.1f} s")
    return 0


__all__ = ["StageError", "StagePlan", "cmd_stage", "plan_staging", "stage_endpoint"]
