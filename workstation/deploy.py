"""`make deploy ENV=dev` / `make destroy ENV=dev`: deploy from a workstation, in the order that works.

deploy:  preflight (region, credentials, quotas) -> model_build build for endpoints with no local build and no
         pinned hash -> one `cdk synth` -> `cdk bootstrap` when the account has no CDKToolkit stack -> deploy the
         artifact stack -> on a real account, `model_build build --in-account` for the unbuilt endpoints whose recipe
         converts a Hub model (the recipe runs in the account's recipe build project; a published build of the same
         config is reused; its manifest lands in build/<endpoint>/), then `cdk synth` again, now with their hashes
         (docs/design/staging.md) -> publish every artifact (unchanged files are skipped; one built in the account is
         only checked in the bucket) -> preflight again (now the
         artifacts must be in the bucket with the right hash) -> deploy the endpoint stacks (each stack's smoke check
         custom resource tests its endpoint; a failure fails the stack and CloudFormation rolls it back:
         stacks/smoke_check.py) -> the smoke test's table of each endpoint -> the SLO gate of each endpoint with
         `slo:` (a load test judged against its objectives, load_testing/gate.py; a miss exits non-zero and rolls
         nothing back: docs/design/guards.md).
         Stacks of the environment the config no longer names stop the deploy (or, with --delete-orphans, are
         deleted after it: workstation/converge.py).
destroy: delete every endpoint stack of the environment (found by its tags, those the config no longer names
         included) -> none left to read it: `cdk destroy` of the artifact stack (CDK's auto-delete custom resource
         empties a bucket that is not retained, on the local emulator too).
Each step prints what it does; the first failure stops with one message and a non-zero exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import boto3

from deployment import EndpointPlan, EnvironmentPlan, load_config
from deployment.aws import caller_account, session_for
from workstation import converge

ROOT = Path(__file__).resolve().parent.parent
CDK = str(ROOT / "node_modules" / ".bin" / "cdk")


class DeployError(Exception):
    pass


def cdk_env() -> dict[str, str]:
    """The CDK CLI's environment: the Node package.json installs (node_modules/.bin: Node 20 is end-of-life) and this
    venv's python first on PATH (cdk.json runs `python3 app.py`), no telemetry."""
    path = os.pathsep.join(
        [str(ROOT / "node_modules" / ".bin"), str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    )
    return {**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true", "PATH": path}


def run(cmd: list[str], *, echo: Callable[[str], None] = print, tail: int = 40, heartbeat_s: float = 10.0) -> str:
    """Run a command from the repository root and echo its output (stdout and stderr) line by line as it comes, so
    a long step (a build, staging the weights, `cdk deploy`) shows its progress live; a step silent for
    `heartbeat_s` is said to be still running, so the terminal is never silent longer. On failure raise with the
    last `tail` lines (kept bounded, not the whole output). Returns those last lines."""
    import queue
    import threading
    import time
    from collections import deque

    shown = " ".join(Path(c).name if c == CDK else c for c in cmd)
    process = subprocess.Popen(
        cmd, cwd=ROOT, env=cdk_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, name="deploy-run-output", daemon=True).start()
    last: deque[str] = deque(maxlen=tail)
    started = time.monotonic()
    while True:
        try:
            line = lines.get(timeout=heartbeat_s)
        except queue.Empty:
            echo(f"    ... `{shown}` still running ({time.monotonic() - started:.0f} s)")
            continue
        if line is None:
            break
        if line.strip():
            last.append(line)
            echo(f"    {line}")
    code = process.wait()
    if code != 0:
        raise DeployError(f"`{shown}` exited {code}:\n" + "\n".join(list(last)[-25:]))
    return "\n".join(last)


def _context(environment_plan: EnvironmentPlan) -> list[str]:
    return ["-c", f"config={environment_plan.config_path}", "-c", f"env={environment_plan.environment_name}"]


def _session(environment_plan: EnvironmentPlan) -> boto3.Session:
    return session_for(environment_plan.environment)


def _failed(checks, *, skip_artifacts: bool) -> list[str]:
    return [
        f"{c.name}: {c.message}" for c in checks if not c.ok and not (skip_artifacts and c.name.startswith("artifact"))
    ]


def deploy(
    environment_plan: EnvironmentPlan,
    *,
    echo: Callable[[str], None] = print,
    runtime_client=None,
    delete_orphans: bool = False,
    before_endpoints: Callable[[EnvironmentPlan], None] | None = None,
    assembly_dir: Path | None = None,
) -> None:
    """Deploy one environment. `runtime_client`: the sagemaker-runtime client the smoke test invokes through
    (default: the real service; the demo passes one pointed at the model served on localhost). `delete_orphans`:
    delete the environment's stacks the config no longer names once the config's are deployed; without it their
    existence stops the deploy before anything changes (workstation/converge.py). `before_endpoints`: called once the
    artifacts are published, before the endpoint stacks deploy (the demo starts serving a staged artifact there, as
    SageMaker downloads the model data when it creates the endpoint). `assembly_dir`: where `cdk synth` writes
    (default cdk.out/<project>-<environment>, which destroy and clean read again; a demo passes its own, so two
    demos of one project and environment on their own emulators do not synthesize into one folder at once)."""
    from model_build.preflight import artifacts_pending, run_preflight
    from model_build.smoke import format_checks

    py = sys.executable
    config, env_name = str(environment_plan.config_path), environment_plan.environment_name
    session = _session(environment_plan)

    echo(f"==> preflight ({environment_plan.project}, environment {env_name})")
    checks = artifacts_pending(run_preflight(environment_plan, session))  # PEND, not FAIL: their stack comes later
    for line in format_checks(checks).splitlines():
        echo(line)
    problems = _failed(checks, skip_artifacts=True)
    if problems:
        raise DeployError("preflight failed:\n  - " + "\n  - ".join(problems))
    orphans = converge.check_orphans(environment_plan, session, delete=delete_orphans, echo=echo)

    environment_plan = build_locally(environment_plan, echo=echo)
    in_account = in_account_builds(environment_plan)
    # An endpoint stack names its artifact's S3 prefix, so it cannot be synthesized before its hash is known: with
    # builds to run in the account, the first synth takes their placeholders (allow_unbuilt), only the artifacts stack
    # (which reads no hash) deploys from it, and a second synth follows the builds.
    assembly = synth(environment_plan, echo=echo, allow_unbuilt=bool(in_account), assembly_dir=assembly_dir)
    app = ["--app", str(assembly)]
    bootstrap(environment_plan, session, assembly, echo=echo)

    artifacts_stack = environment_plan.stack_name("artifacts")
    recreate_abandoned_first_deploys(
        session, [artifacts_stack, *(plan.stack_name for plan in environment_plan.plans)], echo=echo
    )
    echo(f"==> cdk deploy {artifacts_stack}")
    run(
        [CDK, "deploy", artifacts_stack, "--exclusively", "--require-approval", "never", "--no-notices", *app],
        echo=echo,
    )
    if in_account:
        deployed = _template(assembly, artifacts_stack)
        environment_plan = build_in_account(environment_plan, in_account, echo=echo)
        assembly = synth(environment_plan, echo=echo, assembly_dir=assembly_dir)
        app = ["--app", str(assembly)]
        if _template(assembly, artifacts_stack) != deployed:
            raise DeployError(
                f"the second synth changed stack {artifacts_stack}, which deployed from the first: deploy again"
            )

    for plan in environment_plan.plans:
        if plan.artifact.from_hub:  # model_source: SageMaker reads the hub's own S3 prefix
            echo(f"==> {plan.name}: a hub model (model_source): nothing to build or publish")
        if plan.artifact.source == "manifest":
            echo(f"==> model_build publish {plan.name}")
            run(
                [py, "-m", "model_build", "publish", "--config", config, "--env", env_name, "--endpoint", plan.name],
                echo=echo,
            )

    echo("==> preflight: artifacts published, and what the synthesized templates would replace")
    problems = _failed(run_preflight(environment_plan, session, assembly=assembly), skip_artifacts=False)
    if problems:
        raise DeployError("the artifacts are not where the endpoint stacks will look:\n  - " + "\n  - ".join(problems))

    if before_endpoints is not None:
        before_endpoints(environment_plan)
    endpoint_stacks = [plan.stack_name for plan in environment_plan.plans]
    # Each stack checks its own endpoint while CloudFormation deploys it (its smoke check custom resource,
    # stacks/smoke_check.py): a failed check fails that stack and CloudFormation rolls it back, so `cdk deploy` exits
    # non-zero naming it, and a stack that updated before another failed has passed its own check.
    echo(f"==> cdk deploy {' '.join(endpoint_stacks)} (each stack smoke-tests its endpoint; a failure rolls it back)")
    run(
        [CDK, "deploy", *endpoint_stacks, "--exclusively", "--require-approval", "never", "--no-notices", *app],
        echo=echo,
    )
    check_deployed(environment_plan, session=session, runtime_client=runtime_client, echo=echo)
    echo(f"deployed {len(endpoint_stacks)} endpoint(s) to environment {env_name}")
    converge.delete_stacks(orphans, session, echo=echo)


def _unbuilt(plan: EndpointPlan) -> bool:
    """`build` builds an endpoint's LoRA adapters after its model: one unbuilt adapter rebuilds the endpoint."""
    return plan.artifact.problem is not None or any(a.artifact.problem is not None for a in plan.adapters)


def in_account_builds(environment_plan: EnvironmentPlan) -> list[str]:
    """The unbuilt endpoints whose recipe converts a Hub model, on a real account: the recipe build in the account
    runs them (model_build/recipe_job.py), after the artifacts stack that holds its project deploys. On the emulator
    (no CodeBuild; its models are local) they build here."""
    if environment_plan.environment.emulator:
        return []
    return [plan.name for plan in environment_plan.plans if _unbuilt(plan) and plan.converts_hub_model]


def build_locally(environment_plan: EnvironmentPlan, *, echo: Callable[[str], None] = print) -> EnvironmentPlan:
    """`model_build build` of every unbuilt endpoint but those built in the account; the plan again after any."""
    config, env_name = str(environment_plan.config_path), environment_plan.environment_name
    skip = set(in_account_builds(environment_plan))
    unbuilt = [plan.name for plan in environment_plan.plans if _unbuilt(plan) and plan.name not in skip]
    for name in unbuilt:
        echo(f"==> model_build build {name}")
        run(
            [sys.executable, "-m", "model_build", "build", "--config", config, "--env", env_name, "--endpoint", name]
            + ["--quiet"],
            echo=echo,
        )
    # plan again: the builds' manifests name the artifacts now
    return load_config(environment_plan.config_path, env_name) if unbuilt else environment_plan


def build_in_account(
    environment_plan: EnvironmentPlan, names: list[str], *, echo: Callable[[str], None] = print
) -> EnvironmentPlan:
    """`model_build build --in-account` of each endpoint (its build's log lines echoed as they come): reused where a
    succeeded build of the same config is published, else built; each leaves the published manifest in
    build/<endpoint>/, so the plan, loaded again, names its content hash, and publish finds it in the bucket."""
    config, env_name = str(environment_plan.config_path), environment_plan.environment_name
    for name in names:
        echo(f"==> model_build build --in-account {name} (the recipe runs in the account's recipe build project)")
        run(
            [sys.executable, "-m", "model_build", "build", "--in-account", "--config", config, "--env", env_name]
            + ["--endpoint", name],
            echo=echo,
        )
    environment_plan = load_config(environment_plan.config_path, env_name)
    left = [plan.name for plan in environment_plan.plans if plan.name in names and plan.artifact.problem is not None]
    if left:
        raise DeployError(f"after the builds in the account, still no artifact for: {', '.join(left)}")
    return environment_plan


def synth(
    environment_plan: EnvironmentPlan,
    *,
    echo: Callable[[str], None] = print,
    allow_unbuilt: bool = False,
    assembly_dir: Path | None = None,
) -> Path:
    """`cdk synth` into the environment's assembly (or `assembly_dir`); `allow_unbuilt`: placeholders for endpoints
    not built yet."""
    assembly = assembly_dir or _assembly(environment_plan)
    extra = ["-c", "allow_unbuilt=true"] if allow_unbuilt else []
    why = " (endpoints built in the account later take placeholders)" if allow_unbuilt else ""
    echo(f"==> cdk synth{why}")
    run([CDK, "synth", "--quiet", "--no-notices", *_context(environment_plan), *extra, "-o", str(assembly)], echo=echo)
    return assembly


def bootstrap(
    environment_plan: EnvironmentPlan, session: boto3.Session, assembly: Path, *, echo: Callable[[str], None] = print
) -> None:
    """`cdk bootstrap` when the account has no CDKToolkit stack, or one older than the templates need."""
    account = caller_account(session)
    region = environment_plan.environment.region or session.region_name
    required, parameter = required_bootstrap_version(assembly)
    have = bootstrap_version(session, parameter)
    if have is not None and have >= required:
        return
    why = (
        "no CDKToolkit stack yet" if have is None else f"CDKToolkit is version {have}, these templates need {required}"
    )
    echo(f"==> cdk bootstrap aws://{account}/{region} ({why})")
    run([CDK, "bootstrap", f"aws://{account}/{region}", "--no-notices", "--app", str(assembly)], echo=echo)
    have = bootstrap_version(session, parameter)
    if have is None or have < required:
        raise DeployError(
            f"cdk bootstrap left {parameter} at {have}; the templates need version {required} or later: run "
            f"`npx cdk bootstrap aws://{account}/{region}` with credentials that may update the CDKToolkit stack"
        )


def recreate_abandoned_first_deploys(
    session: boto3.Session, stack_names: list[str], *, echo: Callable[[str], None] = print
) -> list[str]:
    """Delete each stack a first deploy left REVIEW_IN_PROGRESS with no change set executing, so this deploy creates
    it again; returns their names. `cdk deploy` creates a new stack with CreateChangeSet (the stack appears,
    REVIEW_IN_PROGRESS: "Ongoing creation of one or more stacks with an expected StackId but without any templates or
    resources", CloudFormation User Guide, stack status codes), then ExecuteChangeSet: a deploy interrupted between the
    two leaves a stack that holds nothing and that the next deploy would stumble on. One whose change set is executing
    belongs to a deploy still running: DeployError."""
    cfn = session.client("cloudformation")
    deleted = []
    for name in stack_names:
        try:
            status = cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"]
        except cfn.exceptions.ClientError as err:
            if "does not exist" in str(err):
                continue
            raise
        if status != "REVIEW_IN_PROGRESS":
            continue
        change_sets = cfn.list_change_sets(StackName=name).get("Summaries", [])
        running = [c["ChangeSetName"] for c in change_sets if c.get("ExecutionStatus") == "EXECUTE_IN_PROGRESS"]
        if running:
            raise DeployError(
                f"stack {name} is being created by another deploy (change set {running[0]} is executing): "
                "wait for it to finish, then deploy again"
            )
        echo(
            f"==> {name} was left REVIEW_IN_PROGRESS by an interrupted first deploy (no change set executing, "
            "nothing created): deleting it so this deploy creates it again"
        )
        cfn.delete_stack(StackName=name)
        cfn.get_waiter("stack_delete_complete").wait(StackName=name, WaiterConfig={"Delay": 5, "MaxAttempts": 120})
        deleted.append(name)
    return deleted


def check_deployed(
    environment_plan: EnvironmentPlan,
    *,
    session: boto3.Session,
    runtime_client=None,
    echo: Callable[[str], None] = print,
) -> None:
    """After the deploy: the smoke test's table for each endpoint (its stack's smoke check passed already), then
    the SLO gate of each endpoint with `slo:` (load_testing/gate.py). A miss is DeployError naming each endpoint and
    objective; nothing is rolled back: the endpoint passed its smoke check and serves the new version, and the
    message says how to return to the previous one (docs/design/guards.md, "The SLO gate")."""
    failed = smoke_tests(environment_plan, session=session, runtime_client=runtime_client, echo=echo)
    failed.update(
        slo_misses(environment_plan, session=session, runtime_client=runtime_client, echo=echo, skip=set(failed))
    )
    if failed:
        raise DeployError(
            "\n".join(failed.values())
            + "\n  the endpoint(s) above serve the version this deploy made (each passed its stack's smoke check); "
            "to return to the previous one, deploy the previous config (its artifact_hash) again"
        )


def smoke_tests(
    environment_plan: EnvironmentPlan,
    *,
    session: boto3.Session,
    runtime_client=None,
    echo: Callable[[str], None] = print,
) -> dict[str, str]:
    """Smoke-test every endpoint: {endpoint: why} for those that failed."""
    from model_build.smoke import format_checks, run_smoke

    failed = {}
    for plan in environment_plan.plans:
        echo(f"==> smoke test {plan.name}")
        result = run_smoke(environment_plan, plan, session=session, runtime_client=runtime_client)
        for line in format_checks(result.checks).splitlines():
            echo(line)
        if not result.ok:
            failed[plan.name] = (
                f"smoke test of {plan.name} failed: {'; '.join(c.message for c in result.checks if not c.ok)}"
            )
    return failed


def slo_misses(
    environment_plan: EnvironmentPlan,
    *,
    session: boto3.Session,
    runtime_client=None,
    echo: Callable[[str], None] = print,
    skip: frozenset[str] | set[str] = frozenset(),
) -> dict[str, str]:
    """The SLO gate of every endpoint with `slo:` (but those in `skip`: a load test of an endpoint that failed its
    smoke test says nothing): {endpoint: why} for each missed objective or gate that could not run (the message has
    the numbers and the last kept result that met them). `runtime_client`: the sagemaker-runtime client the smoke
    test used; the load test sends to the same URL (the demo's local server)."""
    from load_testing.gate import run_gate
    from load_testing.loadtest import LoadTestError

    endpoint_url = runtime_client.meta.endpoint_url if runtime_client is not None else None
    missed = {}
    for plan in environment_plan.plans:
        if plan.slo is None or plan.name in skip:
            continue
        echo(f"==> SLO gate {plan.name} (load test at concurrency {', '.join(map(str, plan.slo.levels))})")
        try:
            gate = run_gate(environment_plan, plan, session=session, endpoint_url=endpoint_url)
        except LoadTestError as err:
            missed[plan.name] = f"SLO gate of {plan.name}: {err}"
            continue
        except Exception as err:  # a gate that could not judge is a failed gate
            missed[plan.name] = f"SLO gate of {plan.name} could not run: {type(err).__name__}: {err}"
            continue
        for line in gate.lines():
            echo(line)
        if not gate.ok:
            missed[plan.name] = gate.message()
    return missed


def slo_gates(
    environment_plan: EnvironmentPlan,
    *,
    session: boto3.Session,
    runtime_client=None,
    echo: Callable[[str], None] = print,
) -> None:
    """The SLO gate of every endpoint with `slo:`: DeployError naming every miss."""
    missed = slo_misses(environment_plan, session=session, runtime_client=runtime_client, echo=echo)
    if missed:
        raise DeployError("\n".join(missed.values()))


def empty_bucket(bucket: str, session: boto3.Session | None = None) -> int:
    """Delete every object version and delete marker (what CDK's auto-delete custom resource does): the
    emulator's leftover checks use it to clean up what they made."""
    s3 = (session or boto3.Session()).resource("s3")
    versions = s3.Bucket(bucket).object_versions
    count = sum(1 for _ in versions.all())
    versions.delete()
    return count


def destroy(
    environment_plan: EnvironmentPlan, *, echo: Callable[[str], None] = print, assembly_dir: Path | None = None
) -> None:
    """Every endpoint stack of the environment first (found by its tags: those the config no longer names, which
    the CLI cannot name, by DeleteStack), then, once none is left to read it, the artifact stack with its bucket
    (workstation/converge.py, F1). retain_data: false: CDK's auto-delete custom resource empties the bucket before
    CloudFormation deletes it, on the local emulator too (local_emulator/server.py runs its Lambda).
    `assembly_dir`: the one the deploy synthesized into (deploy's)."""
    session = _session(environment_plan)
    env = environment_plan.environment
    artifacts = environment_plan.stack_name("artifacts")
    converge.delete_stacks(converge.orphans(environment_plan, session), session, echo=echo)
    # The assembly the last deploy synthesized, else a fresh synth (which needs no build for destroying).
    assembly = assembly_dir or _assembly(environment_plan)
    app = (
        ["--app", str(assembly)]
        if (assembly / "manifest.json").is_file()
        else [*_context(environment_plan), "-c", "allow_unbuilt=true"]
    )
    endpoint_stacks = [plan.stack_name for plan in environment_plan.plans]
    echo(f"==> cdk destroy {' '.join(endpoint_stacks)}")
    run([CDK, "destroy", *endpoint_stacks, "--exclusively", "--force", "--no-notices", *app], echo=echo)
    converge.refuse_while_readers_run(environment_plan, session)
    echo(f"==> cdk destroy {artifacts}")
    run([CDK, "destroy", artifacts, "--exclusively", "--force", "--no-notices", *app], echo=echo)
    if env.retain_data:
        echo("    kept (retain_data: true): the artifact bucket, its access-log bucket and the image repository")


def _template(assembly: Path, stack_name: str) -> str | None:
    path = assembly / f"{stack_name}.template.json"
    return path.read_text() if path.is_file() else None


def _assembly(environment_plan: EnvironmentPlan) -> Path:
    return ROOT / "cdk.out" / f"{environment_plan.project}-{environment_plan.environment_name}"


# The SSM parameter the CDK bootstrap stack writes its version to (qualifier hnb659fds unless customized).
DEFAULT_BOOTSTRAP_PARAMETER = "/cdk-bootstrap/hnb659fds/version"


def required_bootstrap_version(assembly: Path) -> tuple[int, str]:
    """The bootstrap version the synthesized stacks need, and the SSM parameter that holds the deployed one, from the
    cloud assembly's manifest (`requiresBootstrapStackVersion` / `bootstrapStackVersionSsmParameter` of each stack:
    the same check every template's CheckBootstrapVersion rule makes at deploy time)."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    needs = [
        (
            int(a["properties"].get("requiresBootstrapStackVersion", 0)),
            a["properties"].get("bootstrapStackVersionSsmParameter", DEFAULT_BOOTSTRAP_PARAMETER),
        )
        for a in manifest.get("artifacts", {}).values()
        if a.get("type") == "aws:cloudformation:stack"
    ]
    return max(needs, default=(0, DEFAULT_BOOTSTRAP_PARAMETER))


def bootstrap_version(session: boto3.Session, parameter: str = DEFAULT_BOOTSTRAP_PARAMETER) -> int | None:
    """The deployed CDK bootstrap version (the SSM parameter the CDKToolkit stack writes), None when not bootstrapped."""
    ssm = session.client("ssm")
    try:
        return int(ssm.get_parameter(Name=parameter)["Parameter"]["Value"])
    except ssm.exceptions.ParameterNotFound:
        return None


def main(argv: list[str] | None = None) -> int:
    import argparse

    from endpoint_config import ConfigError

    parser = argparse.ArgumentParser(prog="python -m workstation", description="deploy or destroy one environment")
    parser.add_argument("action", choices=["deploy", "destroy"])
    parser.add_argument("--config", default="config/local.yaml")
    parser.add_argument("--env", default=None)
    parser.add_argument(
        "--delete-orphans",
        action="store_true",
        help="deploy: delete the environment's stacks the config no longer names (without it, deploy refuses)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines, only errors")
    args = parser.parse_args(argv)
    echo: Callable[[str], None] = (lambda text: None) if args.quiet else print
    try:
        environment_plan = load_config(args.config, args.env)
        if args.action == "deploy":
            deploy(environment_plan, echo=echo, delete_orphans=args.delete_orphans)
        else:
            destroy(environment_plan, echo=echo)
    except (ConfigError, DeployError, converge.ConvergeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # an AWS error: say what, without a traceback
        print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    return 0


__all__ = [
    "DeployError",
    "check_deployed",
    "deploy",
    "destroy",
    "empty_bucket",
    "main",
    "recreate_abandoned_first_deploys",
    "slo_gates",
    "slo_misses",
    "smoke_tests",
]
