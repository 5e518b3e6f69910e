"""The artifact manifest: moved to artifact.manifest (the recipes in systems/ write it too); the same functions
under their old names, and the typed `Manifest` (load, verify, content hash) every reader uses."""

from __future__ import annotations

from artifact.manifest import (
    CHUNK_BYTES,
    MANIFEST_NAME,
    SCHEMA_VERSION,
    FileEntry,
    Manifest,
    ManifestError,
    artifact_files,
    content_hash,
    hash_files,
    read_manifest,
    sha256_file,
    verify_files,
    write_manifest,
)

__all__ = [
    "CHUNK_BYTES", "MANIFEST_NAME", "SCHEMA_VERSION", "FileEntry", "Manifest", "ManifestError", "artifact_files",
    "content_hash", "hash_files", "read_manifest", "sha256_file", "verify_files", "write_manifest",
]
