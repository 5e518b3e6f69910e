"""The pipeline's CodeBuild steps, run exactly as the synthesized buildspecs list them, in a clean shell.

The last review found a synth step that ran `npx cdk synth` outside the virtual environment: CodeBuild's shell had
no aws_cdk, so the pipeline failed on every run while every test passed here. This module takes the buildspec of
each CodeBuild project in the synthesized pipeline template and runs its install and build commands, in phase
order, with `sh -e` (CodeBuild's default shell on Linux, failing on the first command that fails), in a fresh
copy of the repository (the files git would check out, nothing built), with a clean environment: no virtualenv on
PATH, a new HOME, only the system python3 and node, and what the step's own commands install.

What stands in for CodeBuild's world here, and why:
  PyPI           a wheelhouse downloaded from PyPI by `make test` (.venv-wheelhouse), given to pip with
                 PIP_FIND_LINKS + PIP_NO_INDEX; PIP_NO_COMPILE=0 (pip's spelling of "do not byte-compile") saves
                 half a minute and changes nothing a step runs
  npm            npm's own cache (prefer-offline)
  AWS            the local emulator (moto server, AWS_ENDPOINT_URL), and the container credentials endpoint that
                 `credential_source = EcsContainer` profiles read, served on loopback
  runtimes       the machine's python3 and node, standing in for the pinned runtime-versions (checked against the
                 image's runtime table by tests/stacks/test_image_references.py)

How far each step runs here: Synth completely (its cdk.out is checked); SloGate until it reads the artifact bucket
the emulator lacks (so it must fail with the gate's own message, not an import error); ModelBuild completely for an artifact that is already published (the emulator's bucket
holds its manifest); the self-mutation and asset projects install their pinned CLIs, which must read this
assembly (`cdk ls`, `cdk-assets ls`). Tests runs `make test` itself, which is this suite (so it is not rerun).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from http.server import ThreadingHTTPServer
from pathlib import Path

import boto3
import pytest
from helpers import ROOT, ContainerCredentials, serve_in_thread
from hermetic import base as base_env

from local_emulator import moto_server

pytestmark = [pytest.mark.emulator, pytest.mark.slow]

CONFIG = "config/examples/pipeline.yaml"
WHEELHOUSE = ROOT / ".venv-wheelhouse"
PHASES = ("install", "pre_build", "build", "post_build")


def _flat(value) -> str:
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_flat(p) for p in parts)
    return {"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}.get(value.get("Ref"), json.dumps(value))


def _projects(template: dict) -> dict[str, dict]:
    """CodeBuild projects by the pipeline action that runs them (Synth, Tests, ModelBuild@dev-artifacts, ...)."""
    [pipeline] = [r for r in template["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
    by_action = {}
    for stage in pipeline["Properties"]["Stages"]:
        for action in stage["Actions"]:
            ref = action["Configuration"].get("ProjectName", {})
            if isinstance(ref, dict) and "Ref" in ref:
                by_action[f"{action['Name']}@{stage['Name']}"] = template["Resources"][ref["Ref"]]["Properties"]
    return by_action


def _script(spec: dict) -> str:
    return "\n".join(c for phase in PHASES for c in spec["phases"].get(phase, {}).get("commands", []))


# What decides what the steps install: a checkout is reused (with the venv and node_modules its steps made) only while
# these are unchanged, so a warm run skips the install but never runs on what another set of requirements installed.
INSTALL_INPUTS = ("Makefile", "requirements.txt", "requirements-build.txt", "package.json", "package-lock.json")
CHECKOUTS = ROOT / ".venv-buildspecs"


def _tree_files() -> list[str]:
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    return [name for name in listed if name and (ROOT / name).is_file()]


def make_checkout() -> Path:
    """The files a `git clone` of this working tree would have (tracked and untracked-but-not-ignored), in a folder
    named by the hash of the install inputs. A new hash gets a new folder, so a step's own install commands create its
    venv and node_modules from nothing; an unchanged one keeps them (pip's first install and the first import of
    aws_cdk cost most of a minute), while every other file is refreshed from the working tree."""
    import hashlib

    digest = hashlib.sha256(b"".join((ROOT / name).read_bytes() for name in INSTALL_INPUTS)).hexdigest()[:16]
    dest = CHECKOUTS / digest / "repo"
    for old in CHECKOUTS.glob("*"):
        if old.is_dir() and old.name != digest:
            shutil.rmtree(old, ignore_errors=True)
    files = _tree_files()
    keep = {".venv", "node_modules"}
    if dest.is_dir():  # drop what the working tree no longer has (and last run's outputs), keep the installs
        wanted = set(files)
        for path in sorted(dest.rglob("*"), reverse=True):
            rel = path.relative_to(dest)
            if rel.parts[0] in keep:
                continue
            if path.is_file() and rel.as_posix() not in wanted:
                path.unlink()
        shutil.rmtree(dest / "cdk.out", ignore_errors=True)
    for name in files:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    return dest


# How this machine reaches the registries (its CA bundle): CodeBuild has its own; nothing of the project's.
NETWORK_VARIABLES = ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "PIP_CERT")


def _network_env() -> dict[str, str]:
    return {k: base_env()[k] for k in NETWORK_VARIABLES if k in base_env()}


def _shell_env(home: Path) -> dict[str, str]:
    """CodeBuild's shell without AWS: no virtualenv on PATH, a new HOME, pip on the wheelhouse, npm on its cache."""
    return {
        **_network_env(),
        "HOME": str(home),
        "PATH": os.pathsep.join([str(Path(sys.base_prefix) / "bin"), "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
        "PIP_NO_INDEX": "1",
        "PIP_NO_COMPILE": "0",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "npm_config_cache": str(Path(base_env()["HOME"]) / ".npm"),
        "npm_config_prefer_offline": "true",
        "npm_config_audit": "false",
        "npm_config_fund": "false",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
    }


def _clean_env(home: Path, project: dict, aws) -> dict[str, str]:
    emulator, credentials_uri = aws
    env = {
        **_shell_env(home),
        "AWS_ENDPOINT_URL": emulator.url,
        "AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION": emulator.url.replace("127.0.0.1", "localhost"),
        "AWS_REGION": emulator.region,
        "AWS_DEFAULT_REGION": emulator.region,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": credentials_uri,
    }
    for variable in project["Environment"].get("EnvironmentVariables", []):
        if variable.get("Type", "PLAINTEXT") == "PLAINTEXT":
            env[variable["Name"]] = _flat(variable["Value"])
    return env


def run_step(project: dict, checkout: Path, aws, home: Path) -> subprocess.CompletedProcess:
    spec = json.loads(_flat(project["Source"]["BuildSpec"]))
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        ["sh", "-e", "-c", _script(spec)],
        cwd=checkout,
        env=_clean_env(home, project, aws),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _install_step_clis(
    projects: dict, stage_suffix: str, home: Path, checkout: Path
) -> tuple[dict[str, str], list[dict]]:
    """Run the install commands of the projects of one pipeline stage (UpdatePipeline, Assets) into an npm prefix:
    (the environment to run the installed CLIs with, each install's outcome)."""
    prefix = home / "npm-global"
    env = {
        **_network_env(),
        "HOME": str(home),
        "PATH": f"{prefix / 'bin'}:{checkout / 'node_modules' / '.bin'}:/usr/bin:/bin",
        "npm_config_prefix": str(prefix),
        "npm_config_cache": str(Path(base_env()["HOME"]) / ".npm"),
        "npm_config_prefer_offline": "true",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
    }
    installs = sorted(
        {
            c
            for name, project in projects.items()
            if name.endswith(stage_suffix)
            for c in json.loads(_flat(project["Source"]["BuildSpec"]))["phases"]["install"]["commands"]
        }
    )
    home.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for command in installs:
        installed = subprocess.run(["sh", "-e", "-c", command], env=env, capture_output=True, text=True, timeout=300)
        outcomes.append(_outcome(installed, command=command))
    return env, outcomes


def _outcome(result: subprocess.CompletedProcess, **facts: object) -> dict:
    return {"returncode": result.returncode, "output": result.stdout + result.stderr, **facts}


# ---------------------------------------------------------------------------------------------------- the steps
# Run in order by run_steps() (the `steps` fixture); each returns what its test checks. A step that needs an earlier one's output (the assembly) follows it.


def clean_shell(projects: dict, checkout: Path, aws, home: Path) -> dict:
    """The premise: what the old synth command ran (`python3 app.py`) cannot import aws_cdk in this shell."""
    result = subprocess.run(
        ["sh", "-e", "-c", "python3 -c 'import aws_cdk'"],
        cwd=checkout,
        env=_clean_env(home, {"Environment": {}}, aws),
        capture_output=True,
        text=True,
    )
    return _outcome(result)


def synth(projects: dict, checkout: Path, aws, home: Path) -> dict:
    spec = json.loads(_flat(projects["Synth@Build"]["Source"]["BuildSpec"]))
    result = run_step(projects["Synth@Build"], checkout, aws, home)
    site = checkout / ".venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    return _outcome(
        result,
        template_written=(checkout / "cdk.out" / "llm-endpoints-pipeline.template.json").is_file(),
        torch_installed=(site / "torch").exists(),
        install_commands=spec["phases"]["install"]["commands"],
    )


def slo_gate(projects: dict, checkout: Path, aws, home: Path) -> dict:
    return _outcome(run_step(projects["SloGate-gptj-fastload@dev-slo-gate"], checkout, aws, home))


def model_build(projects: dict, checkout: Path, aws, home: Path) -> dict:
    import yaml

    emulator, _ = aws
    raw = yaml.safe_load((ROOT / CONFIG).read_text())
    env = raw["environments"]["dev"]
    [endpoint] = raw["endpoints"]
    bucket = f"{raw['project']}-dev-artifacts-{env['account']}-{env['region']}"
    key = f"models/{endpoint['name']}/{endpoint['artifact_hash']}/manifest.json"
    with emulator.activated():
        s3 = boto3.client("s3", region_name=emulator.region)
        s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=bucket, Key=key, Body=b"{}")
    result = run_step(projects["ModelBuild@dev-artifacts"], checkout, aws, home)
    return _outcome(
        result,
        published=f"s3://{bucket}/{key}",
        endpoint=endpoint["name"],
        build_set_installed=(checkout / ".venv" / ".build").exists(),
    )


def self_mutation(projects: dict, checkout: Path, aws, home: Path) -> dict:
    """`npm install -g aws-cdk@<pin>` (CDK Pipelines installed `aws-cdk@2` by default); the deploy needs AWS, so the
    CLI lists the assembly the synth step wrote instead."""
    env, installs = _install_step_clis(projects, "@UpdatePipeline", home, checkout)
    if any(i["returncode"] for i in installs):
        return {"installs": installs}
    listed = subprocess.run(
        ["cdk", "ls", "--app", str(checkout / "cdk.out")], env=env, capture_output=True, text=True, cwd=home
    )
    return {"installs": installs, "listed": _outcome(listed)}


def asset_projects(projects: dict, checkout: Path, aws, home: Path) -> dict:
    """The asset projects' own install commands, then their cdk-assets on every asset manifest the synth step wrote."""
    env, installs = _install_step_clis(projects, "@Assets", home, checkout)
    if any(i["returncode"] for i in installs):
        return {"installs": installs}
    manifests = sorted((checkout / "cdk.out").rglob("*.assets.json"))
    listed = {
        str(m.relative_to(checkout)): _outcome(
            subprocess.run(["cdk-assets", "--path", str(m), "ls"], env=env, capture_output=True, text=True)
        )
        for m in manifests
    }
    return {"installs": installs, "listed": listed}


STEPS = [clean_shell, synth, slo_gate, model_build, self_mutation, asset_projects]


def run_steps(workdir: Path, checkout: Path, projects: dict) -> dict[str, dict]:
    """Every step in order against one emulator and one credentials endpoint: {step: its outcome, or its traceback}."""
    import traceback

    emulator = moto_server.start(workdir / "moto")
    server = ThreadingHTTPServer(("127.0.0.1", 0), ContainerCredentials)
    serve_in_thread(server)
    aws = (emulator, f"http://127.0.0.1:{server.server_port}/creds")
    outcomes: dict[str, dict] = {}
    try:
        for step in STEPS:
            try:
                outcomes[step.__name__] = step(projects, checkout, aws, workdir / step.__name__)
            except Exception:  # reported to the step's test, which fails with it
                outcomes[step.__name__] = {"error": traceback.format_exc()}
    finally:
        server.shutdown()
        server.server_close()
        emulator.stop()
    return outcomes


@pytest.fixture(scope="module")
def steps(pipeline_synth, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every step's outcome, run in a copy of the checkout (the first run after the install inputs change installs
    from nothing: about a minute more)."""
    checkout = make_checkout()
    return run_steps(tmp_path_factory.mktemp("buildspecs"), checkout, _projects(pipeline_synth[2]))


def outcome(steps: dict[str, dict], name: str) -> dict:
    assert "error" not in steps[name], steps[name].get("error")
    return steps[name]


# ---------------------------------------------------------------------------------------------------- the tests


def test_the_clean_shell_has_no_virtualenv_and_no_aws_cdk(steps):
    """The premise: what the old synth command ran (`python3 app.py`) cannot import aws_cdk in this shell."""
    result = outcome(steps, "clean_shell")
    assert result["returncode"] != 0 and "No module named 'aws_cdk'" in result["output"]


def test_synth_step_synthesizes_the_pipeline_in_a_clean_shell(steps):
    from stacks.pipeline_stack import SYNTH_INSTALL

    result = outcome(steps, "synth")
    assert result["returncode"] == 0, result["output"][-4000:]
    assert result["install_commands"] == [SYNTH_INSTALL]
    assert result["template_written"]
    assert not result["torch_installed"], "synth installs the deploy set only"


def test_slo_gate_step_runs_the_gate_with_the_assumed_role(steps):
    """Its venv (the deploy set: the load test needs nothing more), its AWS profile and `model_build slo-gate`: it
    gets as far as reading earlier results from the environment's artifact bucket, which the emulator does not have,
    and stops with that, before any request is sent."""
    result = outcome(steps, "slo_gate")
    output = result["output"]
    assert result["returncode"] == 2, output[-3000:]
    assert "Traceback" not in output and "No module named" not in output, output[-3000:]
    assert "error: SLO gate of endpoint 'gptj-fastload'" in output and "NoSuchBucket" in output, output[-3000:]


def test_model_build_step_skips_a_published_artifact_without_installing_the_build_set(steps):
    result = outcome(steps, "model_build")
    assert result["returncode"] == 0, result["output"][-3000:]
    assert f"{result['endpoint']}: {result['published']} is published" in result["output"]
    assert not result["build_set_installed"], "nothing to build: the build set is not installed"


def _installed(result: dict) -> None:
    for install in result["installs"]:
        assert install["returncode"] == 0, f"{install['command']}: {install['output'][-2000:]}"
    assert result["installs"], "no install command in the stage"


def test_self_mutation_installs_the_pinned_cli_which_reads_this_assembly(steps):
    """`npm install -g aws-cdk@<pin>` (CDK Pipelines installed `aws-cdk@2` by default); the deploy needs AWS, so the
    CLI lists the assembly the synth step wrote instead."""
    result = outcome(steps, "self_mutation")
    _installed(result)
    listed = result["listed"]
    assert listed["returncode"] == 0 and "llm-endpoints-pipeline" in listed["output"], listed["output"]


def test_asset_projects_install_a_cdk_assets_that_reads_this_assembly(steps):
    """The asset projects' own install commands, then their cdk-assets on every asset manifest the synth step wrote:
    a cloud assembly schema newer than the pinned cdk-assets reads fails here ("Maximum schema version supported is
    54.x.x, but found 55.0.0" with aws-cdk-lib 2.275)."""
    result = outcome(steps, "asset_projects")
    _installed(result)
    assert result["listed"]
    for manifest, listed in result["listed"].items():
        assert listed["returncode"] == 0, (manifest, listed["output"])
