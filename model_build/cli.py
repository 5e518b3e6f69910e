"""`python -m model_build`: make tiny test models, build/serve/publish one endpoint's artifact.

Commands: tiny-model, build, serve, publish, preflight, smoke, result, clean, loadtest, slo-gate, benchmark (`--help`).
User errors print one message to stderr and exit 2; a build writes a temporary directory renamed at the end.
Each command's usage, and why: docs/design/cli.md.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model_build import BuildError

if TYPE_CHECKING:
    from deployment import EndpointPlan

EXIT_USER_ERROR = 2
RESULT_PENDING = 3  # `result`: the asynchronous request has no result yet


def recipe_for(system: str) -> Any:
    """The build recipe of a serving system: the module its ServingSystem names (systems.REGISTRY)."""
    from systems import get_system

    try:
        serving_system = get_system(system)
    except KeyError as err:
        raise BuildError(err.args[0]) from None
    module = serving_system.recipe
    if module is None:
        raise BuildError(f"system {system!r} has no build recipe")
    try:
        return serving_system.load_recipe()
    except ModuleNotFoundError as err:
        if err.name and module.startswith(err.name):
            raise BuildError(f"system {system!r} has no build recipe (no module {module})") from None
        raise


def checked_engine(endpoint: Any) -> Any:
    """The engine options of an endpoint given without its plan (a test's or a script's spec): checked as the config
    load checks them (BuildError naming the first problem, before any heavy work), then parsed."""
    from systems import all_systems, get_system

    engine, problems = get_system(endpoint.system).checked_engine(
        endpoint, {name: s.engine_options for name, s in all_systems().items()}
    )
    if engine is None:
        raise BuildError(problems[0])
    return engine


def _load(args: argparse.Namespace) -> Any:
    from deployment import load_config

    return load_config(args.config, args.env, build_root=Path(args.build_root))


def _load_endpoint(args: argparse.Namespace) -> tuple[Any, Any]:
    """(the EnvironmentPlan, the endpoint's EndpointPlan)."""
    environment_plan = _load(args)
    return environment_plan, environment_plan.plan(args.endpoint)


# A build's temporary directories beside its output: `.<name>.tmp-XXXXXXXX` (the new artifact) and `.<name>.old-XXXXXXXX`
# (the previous one, for the moment between the two renames); XXXXXXXX is mkdtemp's random part.
_BUILD_DIR = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-[a-z0-9_]{8}$")
# A temporary directory younger than this is left alone even when unlocked: its build may be between mkdtemp and flock.
STALE_AFTER_S = 60


def _hold(directory: Path) -> int:
    """Lock `directory` for this build: an exclusive flock on its descriptor, which the kernel releases when the
    process ends, however it ends (kill -9 included). Returns the descriptor; closing it releases the lock."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def remove_stale_build_dirs(parent: Path) -> list[str]:
    """Remove the temporary directories killed builds left in `parent`: those no running build holds (its flock,
    `_hold`) and older than STALE_AFTER_S. A build killed between its two renames left its output's previous version
    in `.<name>.old-*` and no `<name>`: that version is put back first. Returns what was removed or restored."""
    done: list[str] = []
    for entry in sorted(parent.iterdir()) if parent.is_dir() else []:
        match = _BUILD_DIR.match(entry.name)
        if match is None or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue  # removed meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a running build's
            if time.time() - os.fstat(fd).st_mtime < STALE_AFTER_S:
                continue
            output, previous = parent / match["name"], entry / match["name"]
            if match["kind"] == "old" and not output.exists() and previous.is_dir():
                os.replace(previous, output)
                done.append(f"restored {output.name} from {entry.name}")
            shutil.rmtree(entry, ignore_errors=True)
            done.append(f"removed {entry.name}")
        finally:
            os.close(fd)
    return done


def build_endpoint(endpoint: Any, out_dir: Path, progress: bool = True, *, engine: Any = None) -> dict[str, Any]:
    """Build `endpoint` into `out_dir` atomically: into a sibling temp dir, renamed into place on success.

    engine: the endpoint's parsed engine options, from its plan (EndpointPlan.engine), handed to the recipe; None
    for an endpoint given without its plan, whose options are checked and parsed here (checked_engine).
    An existing `out_dir` is replaced only after the new build has passed its verification. The temp dirs are locked
    while the build runs; a killed build's are removed by the next build in the same directory.
    """
    recipe = recipe_for(endpoint.system)
    if engine is None:
        engine = checked_engine(endpoint)
    out_dir = Path(out_dir).absolute()
    _check_build_target(endpoint, out_dir)
    _check_local_model(endpoint)
    parent = out_dir.parent
    created: list[Path] = []
    for p in reversed([parent, *parent.parents]):
        if not p.exists():
            created.append(p)
    parent.mkdir(parents=True, exist_ok=True)
    for line in remove_stale_build_dirs(parent):
        print(f"left by a killed build in {parent}: {line}", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=parent))
    locks = [_hold(tmp)]
    try:
        manifest = recipe.build(endpoint, engine, tmp, progress=progress)
        _make_readable(tmp)
        old = None
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=parent))
            locks.append(_hold(old))
            os.replace(out_dir, old / out_dir.name)
        os.replace(tmp, out_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return manifest
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        for p in reversed(created):  # directories this build made, deepest first
            try:
                p.rmdir()
            except OSError:
                break
        from facts.models import UnreadableModel

        if isinstance(err, UnreadableModel):  # a model file that is not what it claims (config.json not JSON, ...)
            raise BuildError(f"endpoint {endpoint.name!r}: {err}; nothing was kept") from None
        if (reason := file_failure(err)) is not None:
            kept = "the previous build there is unchanged" if out_dir.exists() else "nothing was kept"
            raise BuildError(
                f"endpoint {endpoint.name!r}: the build of {out_dir} failed on a file operation: {reason}; {kept} "
                "(the partial build was removed); free space or fix the folder's permissions, then build again"
            ) from None
        raise
    finally:
        for fd in locks:
            os.close(fd)


# The errors of writing an artifact: no space, quota, file too large (RLIMIT_FSIZE), read-only, permission, I/O.
_FILE_SYSTEM_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}
)


def _check_build_target(endpoint: Any, out_dir: Path) -> None:
    """The build's folder and every folder above it are folders or absent: a file (or a symlink loop) there would
    fail the build only after its long steps, with an OS error."""
    name = getattr(endpoint, "name", out_dir.name)
    for p in [out_dir, *out_dir.parents]:
        try:
            if os.path.lexists(p) and not p.is_dir():
                what = "a symlink that does not resolve" if p.is_symlink() else "a file"
                raise BuildError(
                    f"endpoint {name!r}: the build folder {out_dir}: {p} is {what}; allowed: a folder or a "
                    "path that does not exist yet (--build-root / --out)"
                )
        except OSError as err:
            raise BuildError(f"endpoint {name!r}: the build folder {out_dir}: {p}: {err.strerror}") from None


def _check_local_model(endpoint: Any) -> None:
    """A local model folder's files read through the bounded readers (facts.model_files.check_model_folder) before
    any recipe hands them to transformers or safetensors, which read them without bounds; then its chat templates
    and the config's chat.template rendered under a budget (systems.chat_template.render_bounded), so a template
    that loops or fails is refused in the first second of the build, by its source. The recipes render again with
    their own sample conversation (tools included where the system serves them)."""
    from facts.model_files import UnreadableModel, check_model_folder
    from systems.chat_template import check_model_chat_templates, render_bounded

    # One user message: what every chat template renders (some refuse a system role, e.g. Gemma's).
    messages = [{"role": "user", "content": "The capital of France?"}]

    if getattr(endpoint, "model", None) is None:
        return  # an endpoint given without its spec (a stand-in recipe's)
    where = f"endpoint {endpoint.name!r}: model {endpoint.model!r}"
    template = endpoint.chat.template if endpoint.chat else None
    if template is not None:
        render_bounded(template, source=f"endpoint {endpoint.name!r}: chat.template", messages=messages)
    model = Path(endpoint.model).expanduser()
    if not (os.path.lexists(model) and (model.is_dir() or model.is_symlink())):
        return  # a Hub id, or a path the recipe reports as missing
    try:
        check_model_folder(model)
    except UnreadableModel as err:
        raise BuildError(f"{where}: {err}; nothing was built") from None
    if template is None:
        try:
            check_model_chat_templates(model, messages)
        except BuildError as err:
            raise BuildError(f"{where}: {err}") from None


def file_failure(err: BaseException) -> str | None:
    """What failed when a build stopped on the file system, in words, or None for any other failure: an OSError
    (no space left, quota, read-only, permission), or safetensors' error around one, whose text carries the I/O
    error ("Error while serializing: I/O error: No space left on device (os error 28)")."""
    if isinstance(err, OSError) and err.errno in _FILE_SYSTEM_ERRNOS:
        return f"{err.strerror or err}" + (f" ({err.filename})" if err.filename else "")
    text = str(err)
    if type(err).__name__ == "SafetensorError" and "I/O error" in text:
        return text
    return None


def _make_readable(directory: Path) -> None:
    """mkdtemp makes 0700 and transformers writes weights 0600; a container running as another user (or a
    local `docker run -v`) must read the artifact. Permissions are not part of the content hash."""
    directory.chmod(0o755)
    for path in directory.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


def cmd_tiny_model(args: argparse.Namespace) -> int:
    from deployment.plan import BUILD_ROOT
    from model_build.tiny_models import make_tiny_model

    out = Path(args.out or BUILD_ROOT / "tiny-models" / args.arch)
    started = time.perf_counter()
    make_tiny_model(args.arch, out)
    print(f"tiny {args.arch} model written to {out} ({time.perf_counter() - started:.1f} s)")
    return 0


def _hub_model_line(plan: EndpointPlan, verb: str) -> str | None:
    """The line `build`/`publish` print instead of working for a hub model (model_source:), else None."""
    source = plan.model_source
    if source is None:
        return None
    return (
        f"{plan.name}: nothing to {verb}: a hub model (model_source {source.hub_content_arn}); SageMaker reads "
        f"{source.s3_uri} itself"
    )


def cmd_build(args: argparse.Namespace) -> int:
    environment_plan, plan = _load_endpoint(args)
    if line := _hub_model_line(plan, "build"):
        print(line)
        return 0
    if args.in_account:
        from model_build.recipe_job import RecipeJobError, build_and_fetch

        try:
            done = build_and_fetch(
                environment_plan, plan, Path(args.out or Path(args.build_root) / plan.name), quiet=args.quiet
            )
        except RecipeJobError as err:
            raise BuildError(str(err)) from None
        how = "reused (already published)" if done.reused else "built and published"
        print(
            f"{how} {plan.name} in the account: CodeBuild build {done.build_id}, content hash "
            f"{done.content_hash[:12]}; its manifest: {done.manifest_path}"
        )
        return 0
    endpoint = plan.spec
    out = Path(args.out or Path(args.build_root) / endpoint.name)
    started = time.perf_counter()
    from model_build.adapters import check_adapter_sources

    check_adapter_sources(plan)  # a bad local adapter fails before the endpoint's artifact is written
    manifest = build_endpoint(endpoint, out, progress=not args.quiet, engine=plan.engine)
    check = manifest["verification"]
    if "max_abs_logit_diff" in check:
        verified = (
            f"max abs logit diff {check['max_abs_logit_diff']:.3g} (<= {check['tolerance']}), greedy tokens "
            f"match: {check['greedy_tokens_match']}"
        )
    else:  # a copied checkpoint (the engine systems): what was checked, by name
        verified = "verified: " + ", ".join(check)
    print(
        f"built {endpoint.name} -> {out} in {time.perf_counter() - started:.1f} s: content hash "
        f"{manifest['content_hash'][:12]}, {len(manifest['files'])} files, {verified}"
    )
    if staging := manifest.get("staging"):
        # A Hub model planned from its metadata: its weights are listed, not here (docs/design/weights.md).
        staged = [f for f in manifest["files"] if f["path"] in set(staging["files"])]
        print(
            f"planned from the Hub's metadata at commit {staging['hub']['commit']}: {len(staged)} weight files "
            f"({sum(f['size'] for f in staged) / 1e9:.2f} GB) to stage from {staging['hub']['endpoint']} into the "
            "artifact's S3 prefix; none were downloaded here"
        )
    from model_build.adapters import build_adapters

    for adapter, built in build_adapters(plan, Path(args.build_root), progress=not args.quiet):
        print(
            f"built adapter {adapter.name} of {endpoint.name}: content hash {built['content_hash'][:12]}, rank "
            f"{built['lora']['rank']} (container max {built['container']['max_rank']}), {built['verification']['fit']}"
        )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from artifact.manifest import MANIFEST_NAME, Manifest, ManifestError

    environment_plan, plan = _load_endpoint(args)
    artifact = Path(args.artifact or Path(args.build_root) / plan.name)
    try:
        manifest = Manifest.load(artifact / MANIFEST_NAME)
    except (OSError, ManifestError) as err:
        raise BuildError(f"artifact {str(artifact)!r}: {err}") from None
    if manifest.endpoint != plan.name:
        raise BuildError(
            f"artifact {str(artifact)!r} was built for endpoint {manifest.endpoint!r}, not {plan.name!r}; "
            "rebuild it or pass the right --artifact"
        )
    from local_runtime import HANDLER_STAND_IN, LocalContainerError, container_host
    from local_runtime.serve import serve
    from model_build.publish import PublishError

    try:  # the system's container where one runs here (local_runtime), else the artifact's handler
        host = container_host(
            plan, artifact, Path(args.build_root) / "containers" / plan.name, build_root=Path(args.build_root)
        )
    except (LocalContainerError, PublishError) as err:
        raise BuildError(str(err)) from None
    print(
        f"container: {HANDLER_STAND_IN if host is None else f'{plan.system.name} (starting; its engine says below)'}",
        flush=True,
    )
    # The SageMaker endpoint name (environment-prefixed), as clients of the real endpoint use it.
    # Its region (SigV4's scope; the emulator's when unset) and inference component, as SageMaker checks them.
    serve(
        artifact,
        host=args.host,
        port=args.port,
        endpoint_name=plan.endpoint_name,
        container_host=host,
        region=environment_plan.environment.region,
        component_name=plan.component_name,
    )
    return 0


def _positive_mib(text: str) -> int:
    """--max-bandwidth: MiB/s, a positive number, as bytes/s."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of MiB/s, got {text!r}")
    return int(value * 2**20)


def cmd_publish(args: argparse.Namespace) -> int:
    environment_plan, plan = _load_endpoint(args)
    if line := _hub_model_line(plan, "publish"):
        print(line)
        return 0
    artifact = Path(args.artifact or Path(args.build_root) / plan.name)
    from model_build.adapters import publish_adapters
    from model_build.publish import PublishError, publish_endpoint

    try:
        report = publish_endpoint(environment_plan, plan, artifact, max_bandwidth=args.max_bandwidth)
        adapter_reports = publish_adapters(environment_plan, plan, Path(args.build_root))
    except PublishError as err:
        raise BuildError(str(err)) from None
    summary = getattr(report, "summary", None)
    print(summary() if callable(summary) else report)
    for adapter_report in adapter_reports:
        print(adapter_report.summary())
    return 0


def cmd_stage(args: argparse.Namespace) -> int:
    from model_build.stage import cmd_stage as stage

    return stage(args)


def cmd_preflight(args: argparse.Namespace) -> int:
    from model_build.preflight import format_checks, run_preflight

    environment_plan = _load(args)
    assembly = Path(args.assembly) if args.assembly else None
    if assembly is not None and not (assembly / "manifest.json").is_file():
        raise BuildError(f"--assembly {assembly}: no manifest.json there; give a synthesized cloud assembly (cdk.out)")
    checks = run_preflight(environment_plan, assembly=assembly, only_updates=args.only_updates)
    print(format_checks(checks))
    failed = [c for c in checks if not c.ok]
    if failed:
        raise BuildError(
            f"preflight of environment {environment_plan.environment_name!r}: {len(failed)} of {len(checks)} checks failed:\n  - "
            + "\n  - ".join(f"{c.name}: {c.message}" for c in failed)
        )
    print(f"preflight of environment {environment_plan.environment_name!r}: all {len(checks)} checks passed")
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    from model_build.smoke import format_checks, run_smoke

    environment_plan, plan = _load_endpoint(args)
    result = run_smoke(environment_plan, plan)
    print(format_checks(result.checks))
    if not result.ok:
        raise BuildError(
            f"smoke test of endpoint {plan.name!r} (stack {result.stack}) failed:\n  - "
            + "\n  - ".join(f"{c.name}: {c.message}" for c in result.failures)
        )
    text = result.outputs[0]["generated_text"]
    print(f"smoke test of {result.endpoint} passed in {result.latency_ms} ms: {text[:80]!r}")
    return 0


def cmd_result(args: argparse.Namespace) -> int:
    """The result of an asynchronous request (the locations its submit returned): prints it as JSON. Exit 0 when
    completed, 1 when it failed, 3 while still pending (after --wait seconds of polling)."""
    import json

    import botocore.exceptions

    from endpoint_runtime.async_invoke import RequestError, fetch_result

    deadline = time.monotonic() + args.wait
    while True:
        try:
            result = fetch_result(args.output_location, args.failure_location, max_bytes=args.max_bytes)
        except RequestError as err:
            raise BuildError(err.message) from None
        except (botocore.exceptions.ClientError, botocore.exceptions.NoCredentialsError) as err:
            raise BuildError(f"could not read the result: {err}") from None
        if result["status"] != "pending" or time.monotonic() >= deadline:
            break
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return {"completed": 0, "failed": 1, "pending": RESULT_PENDING}[result["status"]]


def cmd_clean(args: argparse.Namespace) -> int:
    from deployment.aws import caller_account, session_for
    from model_build.clean import CleanError, delete, delete_resources, plan

    environment_plan = _load(args)
    if args.endpoint:
        environment_plan.plan(args.endpoint)  # an unknown name is a config error that lists the defined ones
    session = session_for(environment_plan.environment)
    account = caller_account(session)
    region = environment_plan.environment.region or session.region_name
    bucket = environment_plan.artifact_bucket(account, region)
    try:
        cleanups = plan(environment_plan, session, bucket, [args.endpoint] if args.endpoint else None)
    except CleanError as err:
        raise BuildError(str(err)) from None
    for cleanup in cleanups:
        print("\n".join(cleanup.lines()))
    removable = sum(len(c.remove) for c in cleanups)
    resources = sum(len(c.remove_resources) for c in cleanups)
    if not args.delete:
        print(
            f"dry run: {removable} artifact(s) in s3://{bucket}/models/ and {resources} SageMaker model(s) and "
            "endpoint config(s) would be removed; run again with --delete"
        )
        return 0
    deleted, failed = delete(session, bucket, cleanups)
    print(f"deleted {deleted} objects of {removable} artifact(s) from s3://{bucket}/models/")
    gone, refused = delete_resources(session, cleanups)
    print(f"deleted {gone} of {resources} SageMaker model(s) and endpoint config(s) no endpoint or stack uses")
    if failed:
        raise BuildError(f"S3 refused to delete {len(failed)} object(s):\n  - " + "\n  - ".join(failed[:20]))
    if refused:
        raise BuildError(f"SageMaker refused to delete {len(refused)} resource(s):\n  - " + "\n  - ".join(refused[:20]))
    return 0


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"value {text!r} is not a port number; allowed: 1-65535") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"value {port} is out of range; allowed: 1-65535")
    return port


def parser() -> argparse.ArgumentParser:
    from deployment.plan import BUILD_ROOT
    from model_build.tiny_models import ARCHITECTURES

    top = argparse.ArgumentParser(prog="python -m model_build", description=__doc__.split("\n")[0])
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    tiny = sub.add_parser("tiny-model", help="write a tiny random-weight model + tokenizer (offline)")
    tiny.add_argument("arch", choices=ARCHITECTURES)
    tiny.add_argument("--out", help="output directory (default: build/tiny-models/<arch>)")
    tiny.set_defaults(run=cmd_tiny_model)

    def config_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", required=True, help="endpoint config file (YAML)")
        p.add_argument("--env", default=None, help="environment in the config (default: the only one)")
        p.add_argument("--build-root", default=str(BUILD_ROOT), help=f"where builds are (default: {BUILD_ROOT})")

    def endpoint_args(p: argparse.ArgumentParser) -> None:
        config_args(p)
        p.add_argument("--endpoint", required=True, help="endpoint name in the config")

    build = sub.add_parser("build", help="convert, verify and hash one endpoint's model artifact")
    endpoint_args(build)
    build.add_argument("--out", help="output directory (default: <build root>/<endpoint>)")
    build.add_argument("--quiet", action="store_true", help="no progress bars")
    build.add_argument(
        "--in-account",
        action="store_true",
        help="run a converting recipe (and publish) in the account's recipe build project, sized for the model, and "
        "fetch its published manifest into the output directory",
    )
    build.set_defaults(run=cmd_build)

    serve = sub.add_parser("serve", help="serve a built artifact with the SageMaker container contract")
    endpoint_args(serve)
    serve.add_argument("--port", type=_port, default=8080)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--artifact", help="artifact directory (default: <build root>/<endpoint>)")
    serve.set_defaults(run=cmd_serve)

    publish = sub.add_parser("publish", help="upload a built artifact to the environment's artifact bucket")
    endpoint_args(publish)
    publish.add_argument("--artifact", help="artifact directory (default: <build root>/<endpoint>)")
    publish.add_argument(
        "--max-bandwidth",
        type=_positive_mib,
        metavar="MIB_PER_S",
        help="cap the upload at this many MiB/s over all transfers (a shared link); default: none",
    )
    publish.set_defaults(run=cmd_publish)

    stage = sub.add_parser(
        "stage", help="stage a metadata-only build: its weights from the Hub into the artifact bucket, in the account"
    )
    endpoint_args(stage)
    stage.add_argument("--artifact", help="build directory (default: <build root>/<endpoint>)")
    stage.add_argument("--quiet", action="store_true", help="no progress lines")
    stage.set_defaults(run=cmd_stage)

    preflight = sub.add_parser("preflight", help="check credentials, region, instance quotas and published artifacts")
    config_args(preflight)
    preflight.add_argument(
        "--assembly",
        default=None,
        help="the synthesized cloud assembly to deploy: also compare each deployed stack's template with it "
        "(a component endpoint's config must not be replaced)",
    )
    preflight.add_argument(
        "--only-updates", action="store_true", help="region, credentials and the update checks only (the pipeline's)"
    )
    preflight.set_defaults(run=cmd_preflight)

    smoke = sub.add_parser("smoke", help="after a deploy: stack state, deployed config, one prompt within budget")
    endpoint_args(smoke)
    smoke.set_defaults(run=cmd_smoke)

    result = sub.add_parser("result", help="the result of an asynchronous request: pending, completed or failed")
    result.add_argument("--output-location", required=True, help="the OutputLocation its submit returned (s3://...)")
    result.add_argument("--failure-location", default=None, help="the FailureLocation its submit returned (s3://...)")
    result.add_argument("--wait", type=float, default=0.0, help="poll this many seconds while pending (default 0)")
    result.add_argument(
        "--max-bytes",
        type=int,
        default=64 * 1024 * 1024,
        help="largest result printed (default 64 MiB; larger ones: only their size)",
    )
    result.set_defaults(run=cmd_result)

    clean = sub.add_parser(
        "clean",
        help="list (or --delete) published artifacts no endpoint pins, builds or runs, and the "
        "SageMaker models and endpoint configs no endpoint or stack uses",
    )
    config_args(clean)
    clean.add_argument("--endpoint", default=None, help="only this endpoint (default: every endpoint)")
    clean.add_argument("--delete", action="store_true", help="delete them (default: a dry run that only lists)")
    clean.set_defaults(run=cmd_clean)

    from load_testing import benchmark, gate, loadtest

    loadtest.add_parser(sub)
    gate.add_parser(sub, endpoint_args)
    benchmark.add_parser(sub, endpoint_args)
    return top


def _interrupt_on_sigterm() -> None:
    """SIGTERM (a CI job cancelled, `timeout`, `kill`) ends a command as Ctrl-C does: a KeyboardInterrupt, so the
    build's cleanup runs (build_endpoint removes its temporary folder) instead of the process dying mid-write."""
    import signal
    import threading

    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (2 for user errors, printed without a traceback)."""
    from deployment.aws import AccountError
    from endpoint_config import ConfigError

    args = parser().parse_args(argv)
    _interrupt_on_sigterm()
    try:
        return args.run(args)
    except (ConfigError, BuildError, AccountError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if (refusal := aws_refusal(err)) is None:
            raise
        print(f"error: {args.command}: {refusal}", file=sys.stderr)
        return EXIT_USER_ERROR


def aws_refusal(err: BaseException) -> str | None:
    """An AWS call that failed after botocore's retries and that no command handled (publish's HeadObject answered
    403, clean's DeleteObjects denied: reliability probe F8, F7), in words: the operation, AWS's code and message.
    None for anything else (a bug keeps its traceback)."""
    import botocore.exceptions

    if isinstance(err, botocore.exceptions.ClientError):
        error = err.response.get("Error", {})
        return (
            f"AWS refused {err.operation_name}: {error.get('Code', 'unknown')}: {error.get('Message', '')}".rstrip(": ")
            + "; the command stopped there (check the credentials' permissions and retry)"
        )
    if isinstance(err, botocore.exceptions.BotoCoreError):
        return f"an AWS call failed: {err}; the command stopped there"
    return None


if __name__ == "__main__":
    sys.exit(main())
