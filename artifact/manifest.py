"""The artifact manifest: what was built, from what, with which libraries, how it was verified, and the
sha256 of every file.

`content_hash` names the artifact: it is a hash over the sorted (path, sha256) pairs, so two builds with the
same bytes get the same name (and the same S3 prefix), and any changed byte gives a new one.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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


def write_manifest(
    directory: str | Path, progress: bool = True, remote_files: list[dict[str, Any]] | None = None, **fields: Any
) -> dict[str, Any]:
    """Hash every file in `directory` and write manifest.json with `fields` plus files and content_hash.

    `remote_files`: entries ({path, size, sha256}) of files that are not in `directory` but belong to the artifact
    (a Hub model's weights, listed with the Hub's values and moved by the staging job): listed and hashed into
    content_hash like the others, so the name is the one a full local copy gets."""
    root = Path(directory)
    files = hash_files(root, progress=progress)
    if remote_files:
        local = {entry["path"] for entry in files}
        clash = sorted(local & {entry["path"] for entry in remote_files})
        if clash:
            raise ValueError(f"{root}: {', '.join(clash)} both written here and listed as staged")
        files = sorted(
            [*files, *({k: e[k] for k in ("path", "size", "sha256")} for e in remote_files)], key=lambda e: e["path"]
        )
    manifest = {"schema_version": SCHEMA_VERSION, **fields, "files": files, "content_hash": content_hash(files)}
    (root / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return manifest


# ---------------------------------------------------------------------------------------------------------------
# The typed manifest: the one reader (publish and the stacks' synth load it here). Stdlib only: synth imports it.


@dataclass(frozen=True)
class HubStaging:
    """A Hub model's `staging` block: the files a job fetches from the Hub at a pinned commit into the artifact's S3
    prefix (each checked against its manifest entry's sha256), and the Secrets Manager secret holding the token."""

    endpoint: str  # the Hub's URL (HF_ENDPOINT when planned, else https://huggingface.co)
    repo_id: str
    commit: str  # 40 hex
    files: tuple[FileEntry, ...]  # the manifest entries the job fetches
    token_secret: str | None


@dataclass(frozen=True)
class InAccountBuild:
    """A manifest's `built_in_account` block: the artifact was built and published by the recipe build in the account
    (model_build/recipe_job.py), and this build folder holds its manifest only (and the small files the plan reads):
    `model_build publish` checks that the bucket holds it instead of uploading files."""

    build_id: str  # the CodeBuild build that published it
    bucket: str  # the artifact bucket it was published to


class ManifestError(ValueError):
    """A manifest.json that cannot be used; the message names the file and what is wrong with it."""


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative POSIX path inside the artifact
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """A built artifact's manifest.json. `document` is the whole JSON object (build facts, verification, ...)."""

    content_hash: str
    files: tuple[FileEntry, ...] = ()
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    path: Path | None = None

    @property
    def system(self) -> str | None:
        return self.document.get("system")

    @property
    def endpoint(self) -> str | None:
        """The config name of the endpoint the artifact was built for."""
        return self.document.get("endpoint")

    @property
    def dtype(self) -> str | None:
        return self.document.get("dtype")

    @property
    def compute_dtype(self) -> dict[str, str | None]:
        """The dtype the serving handler computes in, per device kind: {"gpu": ..., "cpu": ...} (hf-fastload
        writes `compute_dtype`; a bf16 artifact adds "cpu_native_bf16": "bf16", the dtype on a CPU with native
        bf16). Manifests written before the field computed in their storage dtype everywhere, so that is what
        an old manifest reads as."""
        given = self.document.get("compute_dtype")
        if isinstance(given, dict):
            return {str(k): v for k, v in given.items()}
        return {"gpu": self.dtype, "cpu": self.dtype}

    @property
    def commit(self) -> str | None:
        """The Hub commit a Hub model was planned at (None for a local directory's build)."""
        model = self.document.get("model")
        commit = model.get("commit") if isinstance(model, dict) else None
        return commit if isinstance(commit, str) else None

    @property
    def staging(self) -> HubStaging | None:
        """The files still to fetch from the Hub, or None when the build holds every file (a local directory's)."""
        block = self.document.get("staging")
        if block is None:
            return None
        where = self.path or MANIFEST_NAME
        hub = block.get("hub") if isinstance(block, dict) else None
        if not isinstance(hub, dict) or not all(isinstance(hub.get(k), str) for k in ("endpoint", "repo_id", "commit")):
            raise ManifestError(f"{where}: staging.hub must hold endpoint, repo_id and commit strings")
        if len(hub["commit"]) != 40 or any(c not in "0123456789abcdef" for c in hub["commit"]):
            raise ManifestError(f"{where}: staging.hub.commit {hub['commit']!r} is not a 40-hex commit sha")
        names = block.get("files")
        by_path = {f.path: f for f in self.files}
        if not isinstance(names, list) or not all(isinstance(n, str) and n in by_path for n in names):
            raise ManifestError(f"{where}: staging.files must list paths of the manifest's files")
        secret = block.get("token_secret")
        if secret is not None and not isinstance(secret, str):
            raise ManifestError(f"{where}: staging.token_secret must be a secret name or ARN, or null")
        return HubStaging(hub["endpoint"], hub["repo_id"], hub["commit"], tuple(by_path[n] for n in names), secret)

    @property
    def built_in_account(self) -> InAccountBuild | None:
        """Where the artifact was built and published in the account, or None for a build made here."""
        block = self.document.get("built_in_account")
        if block is None:
            return None
        if not isinstance(block, dict) or not all(
            isinstance(block.get(k), str) and block[k] for k in ("build", "bucket")
        ):
            raise ManifestError(
                f"{self.path or MANIFEST_NAME}: built_in_account must hold the build id and bucket as strings, got "
                f"{block!r}; fetch it again with `python -m model_build build --in-account ...`"
            )
        return InAccountBuild(block["build"], block["bucket"])

    @property
    def built_files(self) -> tuple[FileEntry, ...]:
        """The files the build folder holds (every file but the staged ones): what publish uploads from it."""
        staging = self.staging
        staged = {f.path for f in staging.files} if staging else set()
        return tuple(f for f in self.files if f.path not in staged)

    @property
    def staged_bytes(self) -> int:
        """The bytes the staging job moves (0 without staging)."""
        staging = self.staging
        return sum(f.size for f in staging.files) if staging else 0

    @property
    def total_bytes(self) -> int | None:
        """The artifact's size (None when the manifest lists no files)."""
        return sum(f.size for f in self.files) or None

    @classmethod
    def load(cls, path: str | Path, *, require_files: bool = False) -> Manifest:
        """Read and check manifest.json (a file, or the artifact directory holding it). Raises ManifestError.

        `require_files`: the manifest must list its files (publishing needs them; synth needs only the hash)."""
        path = Path(path)
        if path.is_dir():
            path = path / MANIFEST_NAME
        if not path.is_file():
            raise ManifestError(f"{path} does not exist: build the endpoint first (python -m model_build build ...)")
        try:
            document = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ManifestError(f"{path} is not valid JSON ({err})") from None
        if not isinstance(document, dict):
            raise ManifestError(f"{path} is not a JSON object")
        files = document.get("files")
        if not isinstance(document.get("content_hash"), str) or (require_files and not isinstance(files, list)):
            raise ManifestError(f"{path} lacks `files` or `content_hash`")
        entries = []
        for entry in files if isinstance(files, list) else []:
            if not isinstance(entry, dict) or not {"path", "size", "sha256"} <= set(entry):
                raise ManifestError(f"{path}: file entry {entry!r} lacks path, size or sha256")
            rel = Path(entry["path"])
            if rel.is_absolute() or ".." in rel.parts or entry["path"] == MANIFEST_NAME:
                raise ManifestError(f"{path}: file entry {entry['path']!r} is not a plain relative path")
            entries.append(FileEntry(entry["path"], int(entry["size"]), entry["sha256"]))
        return cls(document["content_hash"], tuple(entries), document, path)

    def computed_content_hash(self) -> str:
        """The content hash of the files listed (equal to `content_hash` for an intact manifest)."""
        return content_hash([{"path": f.path, "sha256": f.sha256} for f in self.files])

    def verify(self, directory: str | Path, *, workers: int = 4, unlisted: bool = False) -> list[str]:
        """Re-hash every listed file under `directory`: one line per file that is missing or differs (empty: intact).
        `unlisted`: also one line per file there the manifest does not list, and one if the content hash does not
        match the files listed."""
        root = Path(directory)
        extra = []
        if unlisted:
            listed = {f.path for f in self.files}
            extra = [
                f"{p.relative_to(root).as_posix()}: not in the manifest"
                for p in artifact_files(root)
                if p.relative_to(root).as_posix() not in listed
            ]
            if self.computed_content_hash() != self.content_hash:
                extra.append("content_hash does not match the files listed")

        def check(entry: FileEntry) -> str | None:
            file = root / entry.path
            if not file.is_file():
                return f"{entry.path}: missing"
            size = file.stat().st_size
            if size != entry.size:
                return f"{entry.path}: size {size} bytes, the manifest says {entry.size}"
            digest = sha256_file(file)
            if digest != entry.sha256:
                return f"{entry.path}: sha256 {digest[:12]}..., the manifest says {entry.sha256[:12]}..."
            return None

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return [p for p in pool.map(check, self.files) if p] + extra


def sha256_file(path: str | Path) -> str:
    """sha256 of one file, read in CHUNK_BYTES blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()
