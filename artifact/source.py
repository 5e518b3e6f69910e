"""Where a build reads the model from: a local directory in place, or a Hugging Face Hub snapshot (the systems that
convert weights); the checkpoint systems plan a Hub model from its metadata instead (artifact/hub_source.py)."""

from __future__ import annotations

import os
import shutil
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
    patterns = list(allow_patterns or []) or None
    try:
        from huggingface_hub import snapshot_download

        from artifact.hub_source import endpoint_now

        check_room_for_download(model, revision, patterns)
        # HF_ENDPOINT as it is now, as the plan reads it (huggingface_hub reads it once, at import).
        path = snapshot_download(repo_id=model, revision=revision, allow_patterns=patterns, endpoint=endpoint_now())
    except BuildError:
        raise
    except Exception as err:  # network, auth, unknown repo, bad revision: all mean "cannot get it"
        reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        raise BuildError(
            f"model {model!r} is neither a local directory nor downloadable from the Hugging Face Hub: {reason}"
        ) from None
    return Path(path)


def free_bytes(path: Path) -> int:
    """Free bytes on the filesystem of `path` (its nearest existing parent)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def check_room_for_download(model: str, revision: str | None, patterns: list[str] | None) -> None:
    """Before a converting recipe downloads a Hub model to this machine: its files' sizes from the Hub's API (the
    metadata only: artifact/hub_source.py), and BuildError unless the Hub cache's disk holds them and, when the build
    folder is on the same disk, the artifact too (about the weights again: the recipes write the converted weights
    under build/). The message names what needs no disk here: the checkpoint systems plan a Hub model from its
    metadata and stage its weights in the account (docs/design/staging.md). A Hub the API cannot reach is left to
    snapshot_download, whose error the caller reports."""
    from huggingface_hub import constants, try_to_load_from_cache
    from huggingface_hub.utils import filter_repo_objects

    from artifact.hub_source import HubError, open_hub_model

    try:
        hub = open_hub_model(model, revision)
    except HubError:
        return
    # What the Hub cache already holds at that commit is not downloaded again.
    wanted = [
        name
        for name in filter_repo_objects(list(hub.files), allow_patterns=patterns)
        if not isinstance(try_to_load_from_cache(model, name, revision=hub.commit), str)
    ]
    source = sum(hub.files[name].size for name in wanted)
    weights = sum(hub.files[name].size for name in wanted if name.endswith((".safetensors", ".bin")))
    cache = Path(constants.HF_HUB_CACHE)
    build = Path.cwd()
    same_disk = _device(cache) == _device(build)
    need = source + (weights if same_disk else 0)
    free = free_bytes(cache)
    if need <= free and (same_disk or weights <= free_bytes(build)):
        return
    where = f"{cache}" + ("" if same_disk else f" (and {weights:,} bytes of artifact under {build})")
    raise BuildError(
        f"model {model!r}: this system's recipe converts the weights on this machine, which needs {need:,} bytes on "
        f"the disk of {where}: {source:,} bytes of Hub files to download (commit {hub.commit[:12]}) plus about {weights:,} "
        f"bytes of artifact; {free:,} bytes are free there. A Hub model needs no disk here on a checkpoint system "
        "(vllm, sglang, lmi-vllm, lmi-trtllm): `model_build build` plans it from its metadata and `model_build "
        "publish` stages its weights Hub -> S3 in the account (docs/design/staging.md). Otherwise free space, set "
        "HF_HOME to a larger disk, or build it in the pipeline's model build step with pipeline.build.compute sized "
        "for it"
    )


def _device(path: Path) -> int:
    while not path.exists() and path != path.parent:
        path = path.parent
    return os.stat(path).st_dev
