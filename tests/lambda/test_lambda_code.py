"""Code the Lambda functions share is imported by name, and each function's asset holds exactly what it imports.

1. No module outside tests/ loads code by file path (importlib's spec_from_file_location, SourceFileLoader,
   runpy.run_path): shared code lives in packages with normal names (endpoint_runtime/).
2. Each Python function's asset in the synthesized cloud assembly holds its handler file and the files the handler
   imports, directly or not, resolved inside the asset the way the Lambda runtime resolves them (the asset's root
   on sys.path), and nothing else; every import is either such a file, the stdlib or boto3/botocore.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {"tests", "node_modules", "cdk.out", "build", "bench/raw"}
PATH_LOADERS = {"spec_from_file_location", "SourceFileLoader", "run_path"}
RUNTIME_MODULES = set(sys.stdlib_module_names) | {"boto3", "botocore"}
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _source_files():
    """The repository's Python files (tracked, or new and not ignored): git lists them without walking the venvs."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in sorted(set(listed)):
        rel, path = Path(name), ROOT / name
        if (
            rel.parts[0].startswith(".")
            or any(rel.as_posix().startswith(d + "/") for d in SKIP_DIRS)
            or not path.is_file()
        ):
            continue
        yield rel, path


def _path_loads(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in PATH_LOADERS:
                    found.append((node.lineno, alias.name))
        if name in PATH_LOADERS:
            found.append((node.lineno, name))
    return found


def test_no_module_outside_tests_loads_code_by_file_path():
    offenders = [
        f"{rel}:{line} {name}"
        for rel, path in _source_files()
        for line, name in _path_loads(ast.parse(path.read_text(), filename=str(path)))
    ]
    # local_runtime/artifact_handler.py (what serve.py and bench/gpu_ready.py call) loads a built artifact's
    # code/inference.py: the artifact's file, not this repository's code.
    offenders = [o for o in offenders if not o.startswith("local_runtime/artifact_handler.py:")]
    assert not offenders, "load these by a normal import (move shared code into a package):\n" + "\n".join(offenders)


def test_the_scan_finds_each_kind_of_path_load():
    src = (
        "import importlib.util, runpy\nfrom importlib.machinery import SourceFileLoader\n"
        "importlib.util.spec_from_file_location('m', 'p')\nrunpy.run_path('p')\n"
    )
    assert {name for _, name in _path_loads(ast.parse(src))} == PATH_LOADERS


# ---------------------------------------------------------------------------------------------------------------
# The assets


def _imports(tree: ast.AST):
    """(module, names) of every import, except those in `except ImportError:` handlers (the fallback when a
    module is not where the asset puts it); relative imports are absolute (module, level) pairs."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.ExceptHandler):
            kinds = child.type.elts if isinstance(child.type, ast.Tuple) else [child.type]
            if any(isinstance(k, ast.Name) and k.id in IMPORT_ERRORS for k in kinds):
                continue
        if isinstance(child, ast.Import):
            for alias in child.names:
                yield alias.name, [], 0
        elif isinstance(child, ast.ImportFrom):
            yield child.module or "", [a.name for a in child.names], child.level
        yield from _imports(child)


def _resolve(asset: Path, module: str) -> list[Path] | None:
    """The asset's files that importing `module` runs (packages' __init__.py too), or None if it is not there."""
    files, base = [], asset
    for part in module.split("."):
        base = base / part
        if (base / "__init__.py").is_file():
            files.append(base / "__init__.py")
        elif base.with_suffix(".py").is_file():
            files.append(base.with_suffix(".py"))
        elif not base.is_dir():
            return None
    return files


def _closure(asset: Path, entry: Path) -> tuple[set[Path], list[str]]:
    """The asset's files `entry` imports (with itself) and the imports found neither in the asset nor the runtime."""
    seen, todo, missing = {entry}, [entry], []
    while todo:
        path = todo.pop()
        for module, names, level in _imports(ast.parse(path.read_text(), filename=str(path))):
            if level:
                package = path.parent.relative_to(asset).parts[: len(path.parent.relative_to(asset).parts) - level + 1]
                module = ".".join([*package, *([module] if module else [])])
            files = _resolve(asset, module)
            if files is None:
                if module.split(".")[0] not in RUNTIME_MODULES:
                    missing.append(f"{path.relative_to(asset)}: {module}")
                continue
            for name in names:  # `from pkg import mod`: the submodule, when it is one
                files += _resolve(asset, f"{module}.{name}") or []
            for f in files:
                if f not in seen:
                    seen.add(f)
                    todo.append(f)
    return seen, missing


def _python_functions(synthesized):
    for stack, template in synthesized.templates.items():
        for logical_id, resource in template["Resources"].items():
            props = resource["Properties"] if resource["Type"] == "AWS::Lambda::Function" else None
            if props and str(props.get("Runtime", "")).startswith("python"):
                yield stack, logical_id, props


def _asset_dir(outdir: Path, props: dict) -> Path:
    key = props["Code"]["S3Key"]
    asset_hash = (key if isinstance(key, str) else key["Fn::Sub"]).rsplit("/", 1)[-1].removesuffix(".zip")
    [directory] = [p for p in outdir.rglob(f"asset.{asset_hash}") if p.is_dir()]
    return directory


@pytest.fixture(scope="module")
def local(synth):
    return synth("config/local.yaml")


def test_each_python_function_asset_holds_exactly_what_its_handler_imports(local):
    checked = {}
    for stack, logical_id, props in _python_functions(local):
        asset = _asset_dir(Path(local.outdir), props)
        module, _, _function = props["Handler"].rpartition(".")
        entry = asset / f"{module.replace('.', '/')}.py"
        assert entry.is_file(), f"{stack}/{logical_id}: handler file {entry.relative_to(asset)} is not in its asset"
        used, missing = _closure(asset, entry)
        shipped = {p for p in asset.rglob("*") if p.is_file()}
        extra = sorted(p.relative_to(asset).as_posix() for p in shipped - used)
        assert not missing, f"{stack}/{logical_id}: imports neither in the asset nor the Lambda runtime: {missing}"
        assert not extra, f"{stack}/{logical_id}: files its handler never imports: {extra}"
        checked[props["Handler"]] = sorted(p.relative_to(asset).as_posix() for p in used)
    assert {
        "smoke/handler.py",
        "endpoint_runtime/__init__.py",
        "endpoint_runtime/smoke.py",
        "endpoint_runtime/invoke.py",
    } <= set(checked["smoke/handler.handler"])
    assert any(h != "smoke/handler.handler" for h in checked), "the invoke function was checked too"


def test_the_closure_follows_imports_inside_the_asset_only(tmp_path):
    (tmp_path / "fn").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "fn" / "handler.py").write_text("import json\nfrom pkg import a\n")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text(
        "from . import b\ntry:\n    import staged\nexcept ImportError:\n    from repo import staged\nimport yaml\n"
    )
    (tmp_path / "pkg" / "b.py").write_text("import boto3\n")
    (tmp_path / "pkg" / "unused.py").write_text("")
    used, missing = _closure(tmp_path, tmp_path / "fn" / "handler.py")
    assert {p.relative_to(tmp_path).as_posix() for p in used} == {
        "fn/handler.py",
        "pkg/__init__.py",
        "pkg/a.py",
        "pkg/b.py",
    }
    assert missing == ["pkg/a.py: staged", "pkg/a.py: yaml"]
