"""The artifact manifest: what was built, from what, with which libraries, how it was verified, and the
sha256 of every file.

`content_hash` names the artifact: it is a hash over the sorted (path, sha256) pairs, so two builds with the
same bytes get the same name (and the same S3 prefix), and any changed byte gives a new one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
SCHEMA_VERSION = 1
CHUNK_BYTES = 8 * 1024 * 1024


def artifact_files(directory: Path) -> list[Path]:
    """Every regular file under `directory` except the manifest itself, sorted by relative POSIX path."""
    files = [p for p in directory.rglob("*") if p.is_file() and p.relative_to(directory).as_posix() != MANIFEST_NAME]
    return sorted(files, key=lambda p: p.relative_to(directory).as_posix())


def hash_files(directory: str | Path, progress: bool = True) -> list[dict[str, Any]]:
    """sha256 of every artifact file, with one tqdm bar over all bytes (large models take minutes)."""
    from tqdm.auto import tqdm

    root = Path(directory)
    files = artifact_files(root)
    total = sum(p.stat().st_size for p in files)
    entries = []
    with tqdm(total=total, unit="B", unit_scale=True, desc="hashing", disable=not progress) as bar:
        for path in files:
            digest = hashlib.sha256()
            with path.open("rb") as f:
                while chunk := f.read(CHUNK_BYTES):
                    digest.update(chunk)
                    bar.update(len(chunk))
            entries.append(
                {"path": path.relative_to(root).as_posix(), "size": path.stat().st_size, "sha256": digest.hexdigest()}
            )
    return entries


def content_hash(files: list[dict[str, Any]]) -> str:
    """sha256 over sorted "path\\0sha256\\n" lines: independent of file order, timestamps and the manifest."""
    digest = hashlib.sha256()
    for entry in sorted(files, key=lambda e: e["path"]):
        digest.update(f"{entry['path']}\0{entry['sha256']}\n".encode())
    return digest.hexdigest()


def write_manifest(directory: str | Path, progress: bool = True, **fields: Any) -> dict[str, Any]:
    """Hash every file in `directory` and write manifest.json with `fields` plus files and content_hash."""
    root = Path(directory)
    files = hash_files(root, progress=progress)
    manifest = {"schema_version": SCHEMA_VERSION, **fields, "files": files, "content_hash": content_hash(files)}
    (root / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return manifest


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """Read manifest.json of a built artifact; FileNotFoundError says which directory lacks one."""
    path = Path(directory) / MANIFEST_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: build the endpoint first (python -m model_build build ...)")
    return json.loads(path.read_text())


def verify_files(directory: str | Path, manifest: dict[str, Any] | None = None) -> list[str]:
    """Re-hash the artifact and list every difference from its manifest (empty list: intact)."""
    root = Path(directory)
    manifest = manifest or read_manifest(root)
    recorded = {e["path"]: e for e in manifest["files"]}
    actual = {e["path"]: e for e in hash_files(root, progress=False)}
    problems = [f"{p}: missing" for p in recorded.keys() - actual.keys()]
    problems += [f"{p}: not in the manifest" for p in actual.keys() - recorded.keys()]
    for path in recorded.keys() & actual.keys():
        if recorded[path]["size"] != actual[path]["size"] or recorded[path]["sha256"] != actual[path]["sha256"]:
            problems.append(f"{path}: size or sha256 differs from the manifest")
    if content_hash(manifest["files"]) != manifest.get("content_hash"):
        problems.append("content_hash does not match the files listed")
    return sorted(problems)
