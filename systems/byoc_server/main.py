"""Run the container server: `python -m byoc_server.main --handler package.module:ClassName [--port 8080]`.

In the images the handler module lies in /opt/program (on PYTHONPATH), e.g. `--handler handler:DeepSpeedHandler`.
`--uds PATH` listens on a unix socket instead of a TCP port (the `serve` script puts nginx in front on 8080).

Several processes (tensor parallelism, launched by torchrun from `serve` when BYOC_PROCESSES > 1): rank 0
serves HTTP; every other rank loads the model too and then runs the handler's `follow()` loop, which takes
part in each generate call that rank 0 starts (the handler broadcasts the request to them).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .app import create_app, model_dir_from_env


def load_handler(entry: str) -> Any:
    """Instantiate `package.module:ClassName`; ValueError names what is wrong."""
    module_name, sep, class_name = entry.partition(":")
    if not sep or not module_name or not class_name:
        raise ValueError(f"--handler {entry!r} must look like package.module:ClassName")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise ValueError(
            f"--handler {entry!r}: module {module_name!r} not found ({err}); sys.path: {sys.path}"
        ) from None
    handler_class = getattr(module, class_name, None)
    if handler_class is None:
        raise ValueError(f"--handler {entry!r}: module {module_name!r} has no attribute {class_name!r}")
    handler = handler_class()
    for method in ("load", "generate"):
        if not callable(getattr(handler, method, None)):
            raise ValueError(
                f"--handler {entry!r}: {class_name} has no {method}() method (see byoc_server.contract.Handler)"
            )
    return handler


def _port(text: str) -> int:
    port = int(text)
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is out of range; allowed: 1-65535")
    return port


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m byoc_server.main", description=__doc__.split("\n")[0])
    p.add_argument(
        "--handler", default=os.environ.get("BYOC_HANDLER"), help="package.module:ClassName (env BYOC_HANDLER)"
    )
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=_port, default=8080)
    p.add_argument("--uds", default=None, help="listen on this unix socket instead of host:port")
    p.add_argument("--model-dir", default=None, help="default: SM_MODEL_DIR or /opt/ml/model")
    p.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "info"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.handler:
        print("error: give --handler package.module:ClassName (or set BYOC_HANDLER)", file=sys.stderr)
        return 2
    try:
        handler = load_handler(args.handler)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model_dir = Path(args.model_dir) if args.model_dir else model_dir_from_env()

    rank = int(os.environ.get("RANK", "0"))
    if rank > 0:  # a tensor-parallel follower: no HTTP, it joins rank 0's generate calls
        follow = getattr(handler, "follow", None)
        if not callable(follow):
            print(f"error: RANK={rank} but {args.handler} has no follow() for multi-process serving", file=sys.stderr)
            return 2
        handler.load(model_dir)
        follow()
        return 0

    import uvicorn

    app = create_app(handler, model_dir)
    where = {"uds": args.uds} if args.uds else {"host": args.host, "port": args.port}
    # One process: the model is loaded once and owns the GPU(s); keep-alive longer than nginx's upstream reuse.
    uvicorn.run(app, **where, log_level=args.log_level.lower(), timeout_keep_alive=75, access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
