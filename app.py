#!/usr/bin/env python3
"""CDK entry point: read the config named by `-c config=PATH` (and `-c env=NAME`), add the stacks. Wiring only.

`-c pipeline=true` synthesizes the CodePipeline that deploys every environment of the file instead.
"""

import sys
from pathlib import Path

import aws_cdk as cdk

from deployment import BUILD_ROOT, ConfigError, load_config
from stacks import add_stacks
from stacks.pipeline_stack import add_pipeline


def main(app: cdk.App | None = None) -> None:
    """Synthesize into `app` (default: the App the CDK CLI configures through its environment). A bad config prints
    one message and exits 2 before anything is written."""
    app = app if app is not None else cdk.App()
    config = app.node.try_get_context("config") or "config/local.yaml"
    try:
        if str(app.node.try_get_context("pipeline")).lower() == "true":
            # The CodePipeline that deploys every environment of the file (`pipeline:` section).
            add_pipeline(app, config)
        else:
            build_root = app.node.try_get_context("build_root")
            add_stacks(
                app,
                load_config(
                    config, app.node.try_get_context("env"), build_root=Path(build_root) if build_root else BUILD_ROOT
                ),
                allow_unbuilt=str(app.node.try_get_context("allow_unbuilt")).lower() == "true",
            )
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    app.synth()


if __name__ == "__main__":
    main()
