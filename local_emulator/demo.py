"""`make demo`: the whole chain on this machine, with no AWS account, GPU or Docker engine.

make a tiny GPT-2 offline -> model_build build -> local AWS emulator (moto) -> cdk bootstrap -> cdk deploy the
artifact stack -> model_build publish into the emulated bucket -> cdk deploy the endpoint stack -> endpoint
InService on the deployed config -> serve the artifact under the SageMaker container contract on localhost ->
prompts through lambda/invoke -> cdk destroy -> nothing of the app left. Every process it starts is stopped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import boto3

from endpoint_config import ConfigError, artifact_bucket_name, load_config

from . import moto_server
from .inventory import empty_bucket, leftovers

ROOT = Path(__file__).resolve().parent.parent
CDK = str(ROOT / "node_modules" / ".bin" / "cdk")
PROMPTS = ["The weather today is", "Infrastructure as code means"]


class DemoError(Exception):
    pass


def _step(n: int, text: str) -> float:
    print(f"\n==> [{n}] {text}", flush=True)
    return time.monotonic()


def _done(t0: float) -> None:
    print(f"    done in {time.monotonic() - t0:.1f} s", flush=True)


def _run(cmd: list[str], env: dict[str, str] | None = None, quiet: bool = False) -> str:
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise DemoError(f"`{' '.join(cmd)}` exited {result.returncode}:\n{tail}")
    if not quiet:
        lines = [ln for ln in result.stdout.strip().splitlines() if ln.strip()]
        for line in lines[-6:]:
            print(f"    {line}")
    return result.stdout


def _cdk_env(emulator: moto_server.Emulator) -> dict[str, str]:
    return {
        **os.environ,
        **emulator.client_env(),
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def _load_invoke_module():
    spec = importlib.util.spec_from_file_location("invoke_handler", ROOT / "lambda" / "invoke" / "handler.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wait_ping(url: str, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DemoError(f"the model server exited with code {process.returncode}")
        try:
            if urllib.request.urlopen(f"{url}/ping", timeout=2).status == 200:
                return
        except OSError:
            time.sleep(0.3)
    raise DemoError(f"the model server did not answer /ping within {timeout_s:.0f} s")


def run_demo(config_path: str, endpoint: str | None, port: int, keep_logs: Path) -> None:
    deployment = load_config(config_path)
    if not deployment.environment.emulator:
        raise DemoError(f"{config_path}: the demo deploys to the local emulator; its environment must set emulator: true")
    spec = deployment.endpoints[0] if endpoint is None else deployment.endpoint(endpoint)
    py = sys.executable
    ctx = ["-c", f"config={config_path}"]
    started = time.monotonic()

    t = _step(1, f"make the tiny model {spec.model} offline (random weights, locally trained tokenizer)")
    if not (ROOT / spec.model / "config.json").is_file():
        _run([py, "-m", "model_build", "tiny-model", "gpt2", "--out", spec.model])
    else:
        print(f"    {spec.model} exists")
    _done(t)

    t = _step(2, f"model_build build --endpoint {spec.name}")
    _run([py, "-m", "model_build", "build", "--config", config_path, "--endpoint", spec.name])
    manifest = json.loads((ROOT / "build" / spec.name / "manifest.json").read_text())
    print(f"    content hash {manifest['content_hash'][:16]}..., {len(manifest['files'])} files")
    _done(t)

    with ExitStack() as cleanup:
        t = _step(3, "start the local AWS emulator (moto server)")
        emulator = moto_server.start(keep_logs)
        cleanup.callback(emulator.stop)
        env = _cdk_env(emulator)
        print(f"    listening on {emulator.url}")
        _done(t)

        region = deployment.environment.region or moto_server.EMULATOR_REGION
        account = deployment.environment.account or moto_server.EMULATOR_ACCOUNT
        session = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region
        )
        with emulator.activated():
            artifacts_stack = deployment.stack_name("artifacts")
            endpoint_stack = deployment.stack_name(spec.name)

            t = _step(4, f"cdk synth, then cdk bootstrap aws://{account}/{region}")
            # One synth; deploy and destroy read that cloud assembly instead of running the app again.
            assembly = str(keep_logs / "cdk.out")
            _run([CDK, "synth", "--quiet", "--no-notices", *ctx, "-o", assembly], env)
            app = ["--app", assembly]
            _run([CDK, "bootstrap", f"aws://{account}/{region}", "--no-notices", *app], env)
            _done(t)

            t = _step(5, f"cdk deploy {artifacts_stack}")
            _run([CDK, "deploy", artifacts_stack, "--require-approval", "never", "--no-notices", *app], env)
            _done(t)

            t = _step(6, f"model_build publish --endpoint {spec.name}")
            _run([py, "-m", "model_build", "publish", "--config", config_path, "--endpoint", spec.name], env)
            _done(t)

            t = _step(7, f"cdk deploy {endpoint_stack}")
            _run([CDK, "deploy", endpoint_stack, "--exclusively", "--require-approval", "never", "--no-notices", *app], env)
            _done(t)

            t = _step(8, "check the endpoint is InService on the config the stack deployed")
            endpoint_name = deployment.endpoint_name(spec)
            sm = session.client("sagemaker")
            deployed_endpoint = _stack_physical_id(session, endpoint_stack, "AWS::SageMaker::Endpoint")
            if deployed_endpoint != endpoint_name:
                # moto ignores the EndpointName property and generates a name; AWS uses the one in the template.
                print(f"    (emulator gap: moto named the endpoint {deployed_endpoint!r}; on AWS it is {endpoint_name!r})")
            described = sm.describe_endpoint(EndpointName=deployed_endpoint)
            deployed_config = _stack_physical_id(session, endpoint_stack, "AWS::SageMaker::EndpointConfig")
            print(f"    {described['EndpointName']}: {described['EndpointStatus']}, config {described['EndpointConfigName']}")
            if described["EndpointStatus"] != "InService":
                raise DemoError(f"endpoint {endpoint_name} is {described['EndpointStatus']}, not InService")
            if described["EndpointConfigName"] != deployed_config:
                raise DemoError(
                    f"endpoint {endpoint_name} runs config {described['EndpointConfigName']}, "
                    f"but the stack deployed {deployed_config}"
                )
            model = sm.describe_model(ModelName=_stack_physical_id(session, endpoint_stack, "AWS::SageMaker::Model"))
            data_uri = model["PrimaryContainer"].get("ModelDataSource", {}).get("S3DataSource", {}).get("S3Uri", "")
            bucket = artifact_bucket_name(deployment.project, deployment.environment_name, account, region)
            keys = session.client("s3").list_objects_v2(Bucket=bucket, Prefix=data_uri.split(f"{bucket}/", 1)[-1])
            print(f"    model data {data_uri}: {keys.get('KeyCount', 0)} objects published there")
            if not keys.get("KeyCount"):
                raise DemoError(f"nothing is published under the model's data location {data_uri}")
            _done(t)

        t = _step(9, f"serve the artifact under the SageMaker container contract on 127.0.0.1:{port}")
        server_log = open(keep_logs / "serve.log", "wb")  # noqa: SIM115
        cleanup.callback(server_log.close)
        server = subprocess.Popen(
            [py, "-m", "model_build", "serve", "--config", config_path, "--endpoint", spec.name, "--port", str(port)],
            cwd=ROOT,
            stdout=server_log,
            stderr=subprocess.STDOUT,
        )
        cleanup.callback(_stop, server)
        local_url = f"http://127.0.0.1:{port}"
        _wait_ping(local_url, server)
        print(f"    GET {local_url}/ping -> 200")
        _done(t)

        t = _step(10, "send prompts through lambda/invoke (sagemaker-runtime -> the local server)")
        print("    (the tiny model has random weights: its text is noise; the path it took is the point)")
        invoke = _load_invoke_module()
        runtime = boto3.client(
            "sagemaker-runtime",
            endpoint_url=local_url,
            region_name=region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        for prompt in PROMPTS:
            payload = {"inputs": prompt, "parameters": {"max_new_tokens": 24, "do_sample": False}}
            t1 = time.monotonic()
            status, body = invoke.invoke(deployment.endpoint_name(spec), payload, client=runtime)
            wall = (time.monotonic() - t1) * 1000
            if status != 200:
                raise DemoError(f"invoke returned {status}: {body}")
            text = body["outputs"][0]["generated_text"]
            print(f"    prompt: {prompt!r}\n    output: {text!r}\n    latency: {wall:.0f} ms")
        _done(t)

        with emulator.activated():
            t = _step(11, "cdk destroy --all (after emptying the bucket, as auto-delete does on AWS)")
            removed = empty_bucket(bucket, session)
            print(f"    removed {removed} object versions from {bucket}")
            _run([CDK, "destroy", "--all", "--force", "--no-notices", *app], env)
            _done(t)

            t = _step(12, "check nothing of the app is left in the emulator")
            left = leftovers(session, stack_prefix=f"{deployment.project}-")
            for kind, names in left.items():
                print(f"    {kind:28s} {len(names)} left" + (f": {', '.join(names)}" if names else ""))
            if any(left.values()):
                raise DemoError("destroy left resources behind (listed above)")
            _done(t)
        print("\n==> stopping the model server and the emulator")
    print(f"\ndemo finished in {time.monotonic() - started:.1f} s: built, deployed, served, destroyed; nothing left.")


def _stack_physical_id(session: boto3.Session, stack: str, resource_type: str) -> str:
    pages = session.client("cloudformation").get_paginator("list_stack_resources").paginate(StackName=stack)
    resources = [r for page in pages for r in page["StackResourceSummaries"]]
    ids = [r["PhysicalResourceId"] for r in resources if r["ResourceType"] == resource_type]
    if len(ids) != 1:
        raise DemoError(f"stack {stack} has {len(ids)} resources of type {resource_type}, expected 1")
    # SageMaker resources' physical ids are ARNs (".../endpoint-config/NAME"); the APIs take the name.
    return ids[0].rsplit("/", 1)[-1]


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_emulator.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/local.yaml")
    parser.add_argument("--endpoint", default=None)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--logs", type=Path, default=ROOT / "build" / "demo-logs")
    args = parser.parse_args(argv)
    args.logs.mkdir(parents=True, exist_ok=True)
    try:
        run_demo(args.config, args.endpoint, args.port, args.logs)
    except (ConfigError, DemoError) as err:
        print(f"\ndemo failed: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # an AWS or emulator error: say what and where the logs are, no traceback
        print(f"\ndemo failed: {type(err).__name__}: {err} (logs in {args.logs})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
