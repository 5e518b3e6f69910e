"""Where a build reads the model from: a local directory in place, or a Hugging Face Hub snapshot (the systems that
convert weights); the checkpoint systems plan a Hub model from its metadata instead (artifact/hub_source.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from artifact import BuildError

# What a transformers checkpoint needs; skips other frameworks' weights (tf/flax/onnx/gguf) and repo extras.
DEFAULT_ALLOW_PATTERNS = ("*.json", "*.safetensors", "*.bin", "*.txt", "*.model", "tokenizer*")


def _looks_like_path(model: str) -> bool:
    """Hub ids are "name" or "org/name"; anything else (./x, /x, ~/x, a/b/c) is meant as a directory."""
    return model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model


def hub_model_id(model: str) -> str | None:
    """`model` as a Hub repo id, or None for a local directory (which wins when both could be meant). BuildError for
    a path that is not an existing directory, or a file."""
    local = Path(model).expanduser()
    if local.is_dir():
        return None
    if local.exists():
        raise BuildError(f"model {model!r} is a file, not a directory: point 'model' at a model directory or a Hub id")
    if _looks_like_path(model):
        raise BuildError(
            f"model {model!r} is not an existing directory (resolved to {local.resolve()}); "
            "allowed: an existing local model directory or a Hugging Face Hub id such as 'org/name'"
        )
    return model


def resolve_model_source(
    model: str, revision: str | None = None, allow_patterns: Sequence[str] | None = DEFAULT_ALLOW_PATTERNS
) -> Path:
    """Return a directory holding the model's files.

    An existing local directory is used in place (no copy). Otherwise `model` is a Hub repo id and the
    snapshot is downloaded (with huggingface_hub's progress bars) into the Hub cache, limited to
    `allow_patterns`. Raises BuildError naming the model when neither works.
    """
    local = Path(model).expanduser()
    if local.is_dir():
        return local.resolve()
    if local.exists():
        raise BuildError(f"model {model!r} is a file, not a directory: point 'model' at a model directory or a Hub id")
    if _looks_like_path(model):
        raise BuildError(
            f"model {model!r} is not an existing directory (resolved to {local.resolve()}); "
            "allowed: an existing local model directory or a Hugging Face Hub id such as 'org/name'"
        )
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(repo_id=model, revision=revision, allow_patterns=list(allow_patterns or []) or None)
    except Exception as err:  # network, auth, unknown repo, bad revision: all mean "cannot get it"
        reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        raise BuildError(
            f"model {model!r} is neither a local directory nor downloadable from the Hugging Face Hub: {reason}"
        ) from None
    return Path(path)
