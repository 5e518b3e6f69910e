"""A Lambda function's code asset built from exactly the files its handler imports.

A function's entry file lives in lambda/<function>/; the code it shares with other functions and with the
workstation CLI lives in importable packages of this repository (endpoint_runtime/). `function_code` follows the
entry file's imports (an AST scan, transitively) to the repository's own modules and ships those, at their
package paths, next to the entry file: `lambda/smoke/handler.py` + `endpoint_runtime/smoke.py` ... becomes
`smoke/handler.py`, `endpoint_runtime/__init__.py`, `endpoint_runtime/smoke.py`, .... Anything else a module imports
must come with the Lambda runtime (stdlib, boto3/botocore); `local_imports` says which imports are the repository's.
A top-level module of ours (`import request_contract`, TOP_LEVEL_MODULES) is shipped at the asset's root, where
the same import finds it. An import in an `except ImportError:` handler is an optional fallback and is not followed.

The asset is built by a local bundling step (plain Python, no Docker engine) and named by a hash of the files it
holds, so it changes exactly when one of them does.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import shutil
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

ROOT = Path(__file__).resolve().parent.parent
LAMBDA_ROOT = ROOT / "lambda"
# Our top-level modules (stdlib only; the contracts every entry point ships), shipped at the asset's root.
TOP_LEVEL_MODULES = frozenset(p.stem for p in ROOT.glob("*_contract.py"))
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _module_file(name: str) -> Path | None:
    """The repository file of module `name` (a package's __init__.py), or None when it is not one of ours."""
    if name in TOP_LEVEL_MODULES:
        return ROOT / f"{name}.py"
    base = ROOT.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file() and len(name.split(".")) > 1:
        return base.with_suffix(".py")
    return None


def _package_of(path: Path) -> str | None:
    """The dotted package a repository file belongs to (None for a file outside a package, e.g. an entry file)."""
    parent = path.parent
    if not (parent / "__init__.py").is_file():
        return None
    return ".".join(parent.relative_to(ROOT).parts)


def _import_nodes(node: ast.AST):
    """Every Import/ImportFrom under `node`, except those in `except ImportError:` handlers. A walk with its own
    stack: a recursive generator handed each node up through one generator frame per level of nesting."""
    stack = [node]
    while stack:
        for child in ast.iter_child_nodes(stack.pop()):
            if isinstance(child, ast.ExceptHandler) and _catches_import_error(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            stack.append(child)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id in _IMPORT_ERRORS for k in kinds)


def local_imports(path: Path) -> set[Path]:
    """The repository files `path` imports directly: modules, their packages' __init__.py, and for
    `from pkg import name` the submodule `pkg/name.py` when there is one."""
    names: set[str] = set()
    for level, module, aliases in _imports(path.read_text(), str(path)):
        if level is None:
            names.update(aliases)
            continue
        # `from . import x` has no module (ast.ImportFrom.module is None); `from x import y` has level 0.
        prefix: list[str] = []
        if level:
            package = _package_of(path)
            if package is None:
                raise ValueError(f"{path}: relative import outside a package")
            parts = package.split(".")
            prefix = parts[: len(parts) - level + 1]
        base = ".".join(prefix + ([module] if module else []))
        names.add(base)
        names.update(f"{base}.{alias}" for alias in aliases)
    found: set[Path] = set()
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__.py and a/b/__init__.py too
            module_file = _module_file(".".join(parts[:i]))
            if module_file is not None:
                found.add(module_file)
    return found


@functools.lru_cache(maxsize=256)
def _imports(text: str, filename: str) -> tuple[tuple[int | None, str | None, tuple[str, ...]], ...]:
    """The import statements of a module's source `text`: (None, None, names) for `import names`, (level, module,
    names) for `from module import names`. Cached by the text: every function of every endpoint ships the same
    shared modules, and parsing them again for each was most of a synth's CPU time (docs/design/dev-loop.md)."""
    found: list[tuple[int | None, str | None, tuple[str, ...]]] = []
    for node in _import_nodes(ast.parse(text, filename=filename)):
        if isinstance(node, ast.Import):
            found.append((None, None, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module, tuple(alias.name for alias in node.names)))
    return tuple(found)


def asset_files(entry: Path) -> dict[str, Path]:
    """Asset path -> repository file: the entry file at `<its folder>/<name>` and every repository module it
    imports, directly or not, at its package path."""
    entry = entry.resolve()
    files = {f"{entry.parent.name}/{entry.name}": entry}
    todo, seen = [entry], {entry}
    while todo:
        for module in local_imports(todo.pop()):
            if module not in seen:
                seen.add(module)
                todo.append(module)
                files[module.relative_to(ROOT).as_posix()] = module
    return dict(sorted(files.items()))


@jsii.implements(ILocalBundling)
class _CopyFiles:
    def __init__(self, files: dict[str, Path], executable: frozenset[str]) -> None:
        self._files = files
        self._executable = executable

    def try_bundle(self, output_dir: str, *args, **options) -> bool:
        out = Path(output_dir)
        for relative, source in self._files.items():
            target = out / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)  # follows links: the asset holds the file's bytes
            os.chmod(target, 0o755 if relative in self._executable else 0o644)  # the zip keeps each file's mode
        return True


def function_code(entry: Path, executable: dict[str, Path] | None = None) -> lambda_.Code:
    """The code asset of the function whose entry file is `entry` (handler `<folder>/<file stem>.<function>`), plus
    `executable` (asset path -> file), shipped with mode 755 (a start script the Lambda Web Adapter execs)."""
    executable = executable or {}
    files = dict(sorted({**asset_files(entry), **executable}.items()))
    digest = hashlib.sha256()
    for relative, source in files.items():
        mode = b"755" if relative in executable else b"644"
        digest.update(relative.encode() + b"\0" + mode + b"\0" + source.read_bytes() + b"\0")
    return lambda_.Code.from_asset(
        str(entry.parent),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=digest.hexdigest(),
        bundling=BundlingOptions(
            image=DockerImage.from_registry("unused"), local=_CopyFiles(files, frozenset(executable))
        ),
    )


__all__ = ["LAMBDA_ROOT", "asset_files", "function_code", "local_imports"]
