"""The tensorrt-byoc container's model code: `engine` runs the exported GPT-2 decoder graph (TensorRT, or ONNX
Runtime as the CPU/test backend), `handler` is the byoc_server contract Handler around it.

In the image this folder is /opt/program/tensorrt_handler (BYOC_HANDLER=tensorrt_handler.handler:TensorRTHandler);
in the repository it is systems.tensorrt_byoc.handler. So: relative imports, numpy + tokenizers (+ onnxruntime or
tensorrt + cuda-python) only, never torch or transformers.
"""
