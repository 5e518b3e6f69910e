"""Tokenizer files a serving image's transformers/tokenizers can read, from a tokenizer saved by any version.

Files that already suit the target are copied byte for byte; only what the target cannot read is rewritten
(tokenizer_config.json's class and special tokens, the chat template file, tokenizer.json's BPE merges and
Metaspace), and what has no equivalent is refused (BuildError). The version differences: docs/design/engines.md.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from artifact import BuildError
from facts.model_files import read_chat_template_file
from facts.models import read_json_object
from systems import recipe_common as common
from systems.images import OWN_CONTAINER_STACKS, ImagePin, PythonStack

if TYPE_CHECKING:
    from systems.base import ServingSystem

GENERIC_FAST_CLASS = "PreTrainedTokenizerFast"
# tokenizers releases that first read a format (measured with the PyPI wheels, see docs/design/engines.md).
PAIR_MERGES_SINCE = (0, 20)
NEW_METASPACE_SINCE = (0, 19)
PREPEND_SCHEME_SINCE = (0, 15)
IGNORE_MERGES_SINCE = (0, 19)  # BPE `ignore_merges` (serialized since huggingface/tokenizers PR #1504, 0.19)


@dataclass
class TokenizerExport:
    """The tokenizer files to write: name -> new text, or None to copy the source file unchanged."""

    source: Path
    files: dict[str, str | None]
    rewritten: list[str] = field(default_factory=list)  # what was changed, for the manifest

    def write(self, out_dir: Path) -> list[str]:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            if text is None:
                shutil.copy2(self.source / name, out_dir / name)
            else:
                (out_dir / name).write_text(text, encoding="utf-8")
        return sorted(self.files)


def python_stack_of(system: ServingSystem) -> PythonStack:
    """The transformers/tokenizers inside `system`'s container: its DLC's ImagePin.python_stack, or for an image
    built from this repository the pins of its Dockerfile (systems/images.py OWN_CONTAINER_STACKS)."""
    if system.image is not None:
        stack = system.image.python_stack
    else:
        stack = OWN_CONTAINER_STACKS.get(system.own_container.dockerfile) if system.own_container else None
    if stack is None:
        raise ValueError(
            f"system {system.name!r}: the transformers/tokenizers of its container are not recorded; "
            "add them to systems/images.py (ImagePin.python_stack or OWN_CONTAINER_STACKS)"
        )
    return stack


def image_python_stack(image: ImagePin) -> PythonStack:
    """The transformers/tokenizers inside the AWS image `image` (its ImagePin.python_stack)."""
    if image.python_stack is None:
        raise ValueError(
            f"image {image.repository}:{image.gpu_tag}: the transformers/tokenizers inside it are not recorded; "
            "add them to systems/images.py (ImagePin.python_stack)"
        )
    return image.python_stack


def plan_tokenizer(source: Path, stack: PythonStack, target: str) -> TokenizerExport:
    """What to write so `stack` (the image's transformers/tokenizers) reads the tokenizer in `source`.

    Raises BuildError naming the file, the value and what the target allows, before any heavy work.
    `target` names the image in messages ("transformers ==4.39.0 (djl-inference:0.27.0-...)").
    """
    present = [name for name in common.TOKENIZER_FILES if (source / name).is_file()]
    if not present:
        raise BuildError(
            f"model directory {str(source)!r} has no tokenizer files; expected tokenizer_config.json with "
            "vocab.json + merges.txt (or tokenizer.json / tokenizer.model)"
        )
    export = TokenizerExport(source=source, files=dict.fromkeys(present))
    floor = stack.transformers_floor
    if floor is not None and floor[0] < 5:
        _config_for_transformers4(export, target)
    if "tokenizer.json" in export.files and stack.tokenizers_floor < PAIR_MERGES_SINCE:
        _tokenizer_json_for(export, stack.tokenizers_floor, target)
    return export


def _config_for_transformers4(export: TokenizerExport, target: str) -> None:
    path = export.source / "tokenizer_config.json"
    if not path.is_file():
        return
    config = read_json_object(path)
    changed = []
    tokenizer_class = config.get("tokenizer_class")
    if tokenizer_class in common.TRANSFORMERS5_TOKENIZER_CLASSES:
        if "tokenizer.json" not in export.files:
            raise BuildError(
                f"{path}: tokenizer_class {tokenizer_class!r} is a transformers 5 class and there is no "
                f"tokenizer.json, so {target} cannot load it; allowed: that class with its tokenizer.json (written "
                f"for the container as {GENERIC_FAST_CLASS}), or a transformers 4.x class such as "
                f"{common.TOKENIZER_CLASS_EXAMPLES}"
            )
        config["tokenizer_class"] = GENERIC_FAST_CLASS
        changed.append(f"tokenizer_class {tokenizer_class} -> {GENERIC_FAST_CLASS}")
    elif tokenizer_class is not None and not common.TOKENIZER_CLASS_PATTERN.match(tokenizer_class):
        raise BuildError(
            f"{path}: tokenizer_class {tokenizer_class!r} is unknown to {target}; allowed: a transformers 4.x "
            f"class such as {common.TOKENIZER_CLASS_EXAMPLES}"
        )
    extra = config.get("extra_special_tokens")
    if isinstance(extra, list):
        del config["extra_special_tokens"]
        known = list(config.get("additional_special_tokens") or [])
        config["additional_special_tokens"] = known + [t for t in extra if t not in known]
        changed.append("extra_special_tokens (list) -> additional_special_tokens")
    if "chat_template.jinja" in export.files and "chat_template" not in config:
        config["chat_template"] = read_chat_template_file(export.source / "chat_template.jinja")
        del export.files["chat_template.jinja"]
        changed.append("chat_template.jinja -> tokenizer_config.json chat_template")
    if changed:
        export.files["tokenizer_config.json"] = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
        export.rewritten.append(f"tokenizer_config.json: {'; '.join(changed)}")


def _tokenizer_json_for(export: TokenizerExport, floor: tuple[int, ...], target: str) -> None:
    """Rewrite tokenizer.json in the form tokenizers `floor` reads, or refuse what it cannot express."""
    path = export.source / "tokenizer.json"
    data = read_json_object(path)
    changed: list[str] = []

    def refuse(what: str) -> BuildError:
        version = ".".join(map(str, floor))
        return BuildError(
            f"{path}: {what}, which tokenizers {version} ({target}) cannot express; allowed: a "
            "tokenizer without it, or a system whose image has a newer tokenizers"
        )

    for model in _nodes(data.get("model"), "BPE"):
        merges = model.get("merges") or []
        if merges and isinstance(merges[0], list):
            spaced = next((pair for pair in merges if any(" " in part for part in pair)), None)
            if spaced is not None:
                raise refuse(f"BPE merge {spaced!r} has a token with a space (the old format separates by spaces)")
            model["merges"] = [" ".join(pair) for pair in merges]
            changed.append("BPE merges [a, b] -> 'a b'")
        if model.get("ignore_merges") and floor < IGNORE_MERGES_SINCE:
            raise refuse("BPE ignore_merges: true (whole-word vocabulary lookups before merging)")
    if floor < NEW_METASPACE_SINCE:
        for node in _nodes(data, "Metaspace"):
            if "add_prefix_space" in node:
                continue  # already the old form
            scheme = node.pop("prepend_scheme", "always")
            if node.pop("split", True) is not True:
                raise refuse("Metaspace split: false")
            if scheme == "first" and floor < PREPEND_SCHEME_SINCE:
                raise refuse("Metaspace prepend_scheme: 'first'")
            node["add_prefix_space"] = scheme != "never"
            if floor >= PREPEND_SCHEME_SINCE:
                node["prepend_scheme"] = scheme
            changed.append("Metaspace prepend_scheme/split -> add_prefix_space")
    if changed:
        export.files["tokenizer.json"] = json.dumps(data, ensure_ascii=False) + "\n"
        export.rewritten.append(f"tokenizer.json: {'; '.join(sorted(set(changed)))}")


def _nodes(node: Any, kind: str) -> list[dict[str, Any]]:
    """Every dict with "type": `kind` in a tokenizer.json tree (Sequence pre-tokenizers/decoders nest them)."""
    found: list[dict[str, Any]] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == kind:
                found.append(item)
            stack.extend(v for k, v in item.items() if k not in ("vocab", "merges"))
        elif isinstance(item, list):
            stack.extend(item)
    return found


__all__ = ["TokenizerExport", "image_python_stack", "plan_tokenizer", "python_stack_of", "GENERIC_FAST_CLASS"]
