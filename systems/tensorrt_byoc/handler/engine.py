"""Execution backends for the exported decoder graph (`decoder.onnx`, see systems/tensorrt_byoc/recipe.py).

TRT_BACKEND: `tensorrt` (production; the engine is built at container start and cached in TRT_ENGINE_CACHE_DIR,
keyed by GPU, TensorRT version, ONNX sha256, profile and precision) or `onnxruntime` (the fallback, the CPU tests).
The graph's inputs and outputs, and why the engine is built at start: docs/design/engines.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np

log = logging.getLogger("tensorrt_byoc.engine")

GRAPH_FILE = "decoder.onnx"
PROFILE_FILE = "tensorrt_profile.json"
INPUT_NAMES = ("input_ids", "position_ids", "attention_bias", "past_key_values")
OUTPUT_NAMES = ("logits", "present_key_values")
BACKENDS = ("tensorrt", "onnxruntime")
DEFAULT_CACHE_DIR = "/opt/ml/engine-cache"
HASH_CHUNK = 8 * 1024 * 1024


class Backend(Protocol):
    name: str

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the graph once; feeds and results are host numpy arrays named as above."""


def graph_files(model_dir: Path) -> list[Path]:
    """decoder.onnx plus its external-data file(s) when the weights were saved outside the graph."""
    return sorted(p for p in Path(model_dir).iterdir() if p.name.startswith(GRAPH_FILE))


def onnx_sha256(model_dir: Path) -> str:
    """One sha256 over the graph files, taken from manifest.json when the artifact has one (no re-hashing of
    hundreds of MB at every start), else computed."""
    model_dir = Path(model_dir)
    files = graph_files(model_dir)
    recorded: dict[str, str] = {}
    manifest = model_dir / "manifest.json"
    if manifest.is_file():
        recorded = {e["path"]: e["sha256"] for e in json.loads(manifest.read_text()).get("files", [])}
    digest = hashlib.sha256()
    for path in files:
        sha = recorded.get(path.name)
        if sha is None:
            h = hashlib.sha256()
            with path.open("rb") as f:
                while chunk := f.read(HASH_CHUNK):
                    h.update(chunk)
            sha = h.hexdigest()
        digest.update(f"{path.name}\0{sha}\n".encode())
    return digest.hexdigest()


def profile_shapes(profile: dict[str, Any], info: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    """min/opt/max shapes of every graph input for one TensorRT optimisation profile.

    seq: prompt tokens at prefill (up to max_sequence_length), 1 per decode step; past: 1 (the dummy slot) to
    max_sequence_length; total = past + seq up to max_sequence_length + 1. opt is the decode step (seq 1) at
    opt_batch and half the length, where serving spends most of its time.
    """
    b_min, b_max = profile["min_batch"], profile["max_batch"]
    b_opt = profile.get("opt_batch") or b_min
    n = profile["max_sequence_length"]
    layers, heads, head_dim = info["num_layers"], info["num_heads"], info["head_dim"]
    past_opt = max(1, n // 2)

    def kv(batch: int, past: int) -> list[int]:
        return [layers, 2, batch, heads, past, head_dim]

    return {
        "input_ids": {"min": [b_min, 1], "opt": [b_opt, 1], "max": [b_max, n]},
        "position_ids": {"min": [b_min, 1], "opt": [b_opt, 1], "max": [b_max, n]},
        "attention_bias": {"min": [b_min, 1, 1, 2], "opt": [b_opt, 1, 1, past_opt + 1], "max": [b_max, 1, n, n + 1]},
        "past_key_values": {"min": kv(b_min, 1), "opt": kv(b_opt, past_opt), "max": kv(b_max, n)},
    }


# --------------------------------------------------------------------------------------------- ONNX Runtime
class OnnxRuntimeBackend:
    name = "onnxruntime"

    def __init__(self, model_dir: Path) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        threads = int(os.environ.get("ORT_INTRA_OP_THREADS", "0"))
        if threads:
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        available = ort.get_available_providers()
        providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]
        self.session = ort.InferenceSession(str(Path(model_dir) / GRAPH_FILE), options, providers=providers)
        self.providers = self.session.get_providers()

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.session.run(list(OUTPUT_NAMES), {k: feeds[k] for k in INPUT_NAMES})
        return dict(zip(OUTPUT_NAMES, outputs))


# --------------------------------------------------------------------------------------------- TensorRT
def _cudart() -> Any:
    try:
        from cuda.bindings import runtime as cudart  # cuda-python >= 12.6
    except ImportError:
        from cuda import cudart  # older cuda-python
    return cudart


def _check(result: Any) -> Any:
    """cuda-python calls return (err, *values); raise on an error, return the value(s)."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA call failed: {err}")
    return values[0] if len(values) == 1 else values


def engine_cache_key(gpu: str, trt_version: str, graph_sha256: str, shapes: dict, precision: str) -> str:
    blob = json.dumps(
        {"gpu": gpu, "tensorrt": trt_version, "onnx_sha256": graph_sha256, "profile": shapes, "precision": precision},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class TensorRTBackend:
    """Builds (or loads from the cache) a TensorRT engine for this GPU, then runs it with cuda-python buffers.

    Buffers are allocated once at the profile's maximum shapes; each run copies the inputs in and the outputs
    out (the KV cache goes through the host between steps: simple, and small for GPT-2 at this profile).
    """

    name = "tensorrt"

    def __init__(
        self, model_dir: Path, info: dict[str, Any], profile: dict[str, Any], cache_dir: Path, precision: str
    ) -> None:
        import tensorrt as trt

        self.trt = trt
        self.cudart = cudart = _cudart()
        self.logger = trt.Logger(trt.Logger.WARNING)
        device = _check(cudart.cudaGetDevice())
        props = _check(cudart.cudaGetDeviceProperties(device))
        gpu_name = props.name.decode() if isinstance(props.name, bytes) else str(props.name)
        gpu = f"{gpu_name.strip(chr(0))} sm_{props.major}{props.minor}"
        self.shapes = profile_shapes(profile, info)
        key = engine_cache_key(gpu, trt.__version__, onnx_sha256(model_dir), self.shapes, precision)
        self.engine_path = Path(cache_dir) / f"decoder-{key[:24]}.engine"
        self.cache_hit = False
        serialized = self._load_or_build(Path(model_dir), precision, gpu, key)
        self.runtime = trt.Runtime(self.logger)
        self.engine = self.runtime.deserialize_cuda_engine(serialized)
        if self.engine is None:
            raise RuntimeError(f"TensorRT could not deserialize {self.engine_path}")
        self.context = self.engine.create_execution_context()
        self.stream = _check(cudart.cudaStreamCreate())
        self.buffers: dict[str, tuple[int, int]] = {}  # name -> (device pointer, capacity in bytes)
        for name in (*INPUT_NAMES, *OUTPUT_NAMES):
            self.buffers[name] = self._allocate(name, info)

    # -- engine cache
    def _load_or_build(self, model_dir: Path, precision: str, gpu: str, key: str) -> bytes:
        import fcntl

        self.engine_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.engine_path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits for the first build, then reuses it
            if self.engine_path.is_file():
                self.cache_hit = True
                log.info("TensorRT engine cache hit: %s (%s)", self.engine_path, gpu)
                return self.engine_path.read_bytes()
            log.info("building the TensorRT engine for %s (cache miss, key %s); this takes minutes", gpu, key[:24])
            started = time.perf_counter()
            serialized = self._build(model_dir, precision)
            tmp = self.engine_path.with_suffix(f".tmp-{os.getpid()}")
            tmp.write_bytes(serialized)
            os.replace(tmp, self.engine_path)  # never a half-written engine under the final name
            meta = {
                "key": key,
                "gpu": gpu,
                "tensorrt": self.trt.__version__,
                "precision": precision,
                "profile": self.shapes,
                "build_seconds": round(time.perf_counter() - started, 1),
            }
            self.engine_path.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
            log.info("TensorRT engine built in %.0f s: %s", meta["build_seconds"], self.engine_path)
            return serialized

    def _build(self, model_dir: Path, precision: str) -> bytes:
        trt = self.trt
        builder = trt.Builder(self.logger)
        major = int(trt.__version__.split(".")[0])
        flags = 0 if major >= 10 else 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
        network = builder.create_network(flags)
        parser = trt.OnnxParser(network, self.logger)
        if not parser.parse_from_file(str(model_dir / GRAPH_FILE)):  # reads external data next to the graph
            errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise RuntimeError(f"TensorRT could not parse {GRAPH_FILE}: {errors}")
        config = builder.create_builder_config()
        workspace_gb = float(os.environ.get("TRT_WORKSPACE_GB", "2"))
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_gb * (1 << 30)))
        if precision == "fp16" and builder.platform_has_fast_fp16:
            config.set_flag(trt.BuilderFlag.FP16)
        elif precision == "bf16" and hasattr(trt.BuilderFlag, "BF16"):
            config.set_flag(trt.BuilderFlag.BF16)
        profile = builder.create_optimization_profile()
        for name, s in self.shapes.items():
            profile.set_shape(name, s["min"], s["opt"], s["max"])
        config.add_optimization_profile(profile)
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            raise RuntimeError("TensorRT engine build failed (see the TensorRT log above)")
        return bytes(serialized)

    # -- execution
    def _max_shape(self, name: str, info: dict[str, Any]) -> list[int]:
        if name in self.shapes:
            return self.shapes[name]["max"]
        batch, n = self.shapes["input_ids"]["max"]
        if name == "logits":
            return [batch, n, info["vocab_size"]]
        return [info["num_layers"], 2, batch, info["num_heads"], n + 1, info["head_dim"]]

    def _allocate(self, name: str, info: dict[str, Any]) -> tuple[int, int]:
        dtype = np.dtype(self.trt.nptype(self.engine.get_tensor_dtype(name)))
        nbytes = int(np.prod(self._max_shape(name, info))) * dtype.itemsize
        return int(_check(self.cudart.cudaMalloc(nbytes))), nbytes

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        cudart, kind = self.cudart, self.cudart.cudaMemcpyKind
        for name in INPUT_NAMES:
            dtype = np.dtype(self.trt.nptype(self.engine.get_tensor_dtype(name)))
            array = np.ascontiguousarray(feeds[name], dtype=dtype)
            pointer, capacity = self.buffers[name]
            if array.nbytes > capacity:
                raise ValueError(
                    f"{name} shape {array.shape} is beyond the engine profile (max {self.shapes[name]['max']})"
                )
            self.context.set_input_shape(name, array.shape)
            self.context.set_tensor_address(name, pointer)
            _check(
                cudart.cudaMemcpyAsync(
                    pointer, array.ctypes.data, array.nbytes, kind.cudaMemcpyHostToDevice, self.stream
                )
            )
        results = {}
        for name in OUTPUT_NAMES:
            self.context.set_tensor_address(name, self.buffers[name][0])
        if not self.context.execute_async_v3(int(self.stream)):
            raise RuntimeError("TensorRT execution failed")
        for name in OUTPUT_NAMES:
            shape = tuple(self.context.get_tensor_shape(name))
            out = np.empty(shape, dtype=np.dtype(self.trt.nptype(self.engine.get_tensor_dtype(name))))
            _check(
                cudart.cudaMemcpyAsync(
                    out.ctypes.data, self.buffers[name][0], out.nbytes, kind.cudaMemcpyDeviceToHost, self.stream
                )
            )
            results[name] = out
        _check(cudart.cudaStreamSynchronize(self.stream))
        return {k: v.astype(np.float32, copy=False) for k, v in results.items()}

    def __del__(self) -> None:
        for pointer, _ in getattr(self, "buffers", {}).values():
            try:
                self.cudart.cudaFree(pointer)
            except Exception:
                pass


def open_backend(model_dir: Path, info: dict[str, Any], profile: dict[str, Any], name: str | None = None) -> Backend:
    """The backend TRT_BACKEND names (default tensorrt). No silent fallback: asking for tensorrt where it cannot
    be imported is an error that says so (the server reports it on /ping and in the log)."""
    name = (name or os.environ.get("TRT_BACKEND") or "tensorrt").strip().lower()
    if name not in BACKENDS:
        raise ValueError(f"TRT_BACKEND={name!r} is not a backend; allowed: {', '.join(BACKENDS)}")
    if name == "onnxruntime":
        return OnnxRuntimeBackend(model_dir)
    try:
        import tensorrt  # noqa: F401
    except ImportError as err:
        raise RuntimeError(
            f"TRT_BACKEND=tensorrt but the tensorrt Python package cannot be imported ({err}); run in the "
            "tensorrt-byoc image on a GPU instance, or set TRT_BACKEND=onnxruntime"
        ) from None
    cache_dir = Path(os.environ.get("TRT_ENGINE_CACHE_DIR") or DEFAULT_CACHE_DIR)
    precision = os.environ.get("TRT_PRECISION") or info.get("serving_dtype", "fp16")
    return TensorRTBackend(model_dir, info, profile, cache_dir, precision)
