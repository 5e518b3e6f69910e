"""Serve an artifact with the BYOC server (systems/byoc_server) and one of our handlers, on 127.0.0.1.

    python -m bench.byoc_launch {deepspeed,tensorrt} MODEL_DIR PORT
deepspeed: DeepSpeedHandler, non-injected (no CUDA here: the plain transformers model); tensorrt: TensorRTHandler on
its ONNX Runtime backend. One intra-op thread, like model_build serve, so servers compare on equal terms.
"""

from __future__ import annotations

import sys


def main() -> None:
    kind, model_dir, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import uvicorn

    from systems.byoc_server.app import create_app
    from systems.byoc_server.contract import Handler

    handler: Handler
    if kind == "deepspeed":
        import torch

        torch.set_num_threads(1)
        from systems.deepspeed_byoc.handler.handler import DeepSpeedHandler

        handler = DeepSpeedHandler()
    elif kind == "tensorrt":
        from systems.tensorrt_byoc.handler.handler import TensorRTHandler

        handler = TensorRTHandler(backend="onnxruntime")
    else:
        raise SystemExit(f"unknown handler {kind!r}; allowed: deepspeed, tensorrt")
    uvicorn.run(create_app(handler, model_dir), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
