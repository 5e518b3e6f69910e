"""Import a built artifact's own code/inference.py: what local_runtime/serve.py serves and bench/gpu_ready.py
measures. Stdlib only, so a machine without the server's web stack (the lent GPU machine) loads it the same way."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HANDLER_PATH = Path("code") / "inference.py"


def load_handler(artifact_dir: Path) -> ModuleType:
    """Import the artifact's code/inference.py as a fresh module (not the repo's copy)."""
    path = Path(artifact_dir) / HANDLER_PATH
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: the artifact has no handler (rebuild it)")
    spec = importlib.util.spec_from_file_location(f"artifact_inference_{abs(hash(str(path)))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Serving leaves the artifact as it was built: no code/__pycache__ beside the files its manifest lists.
    previous, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = previous
    return module
