"""What a `model:` or `revision:` in the config may be: a local directory or a Hugging Face Hub id, and a git
revision; refused here, before any code hands the value to the file system or the Hub."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field

# A Hugging Face Hub repo id, by huggingface_hub 2.4.0's own rules (utils/_validators.py validate_repo_id): "name" or
# "namespace/name", each 1-96 of ASCII letters, digits, '-', '_', '.', not starting or ending with '-' or '.'; no
# "--" or ".."; not ending in ".git". tests/config/test_probe_configs.py compares with huggingface_hub's validator.
_HUB_PART = r"(?![-.])[A-Za-z0-9_.-]{1,96}(?<![-.])"
HUB_REPO_ID = re.compile(rf"^(?:{_HUB_PART}/)?{_HUB_PART}$")
HUB_ID_RULES = (
    "a Hugging Face Hub id, 'name' or 'namespace/name' of ASCII letters, digits, '-', '_' and '.' (each part 1-96 "
    "characters, not starting or ending with '-' or '.', no '--' or '..', not ending in '.git')"
)
# Linux's limits on a path (PATH_MAX, bytes with the final NUL) and on one name in it (NAME_MAX): a longer value
# makes every file system call fail with "File name too long".
PATH_MAX_BYTES, NAME_MAX_BYTES = 4095, 255


def is_hub_id(value: str) -> bool:
    return bool(HUB_REPO_ID.match(value)) and "--" not in value and ".." not in value and not value.endswith(".git")


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~")) or value in (".", "..") or value.count("/") > 1 or "\\" in value


def is_directory(value: str) -> bool:
    try:
        return Path(value).expanduser().is_dir()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


def _unreadable_path(value: str) -> str | None:
    """A path that exists (as a link at least) but cannot be a model folder: a symlink loop or a dangling link, a
    file, a FIFO; named here, where a later `is_dir()` would silently read it as absent."""
    path = Path(value).expanduser()
    try:
        if not os.path.lexists(path):
            return None
        mode = os.stat(path).st_mode
    except OSError as err:
        return f"is a path that cannot be followed ({err.strerror}: a symlink loop or a dangling link); allowed: a model folder"
    if not stat.S_ISDIR(mode):
        return "is a path to something that is not a folder; allowed: a model folder (config.json, weights, tokenizer)"
    return None


def check_model_reference(value: str) -> str:
    """A `model:` (or an adapter's) is a local directory or a Hub id; anything else is refused here, before any code
    hands it to the file system or the Hub. A path that does not exist yet is allowed (the build reads it)."""
    if _looks_like_path(value):
        encoded = value.encode("utf-8", "surrogatepass")
        longest = max((len(part.encode("utf-8", "surrogatepass")) for part in value.split("/")), default=0)
        if len(encoded) > PATH_MAX_BYTES or longest > NAME_MAX_BYTES or "\0" in value:
            raise ValueError(
                f"is a local path of {len(encoded)} bytes whose longest name has {longest}; allowed: a path of at "
                f"most {PATH_MAX_BYTES} bytes, each name at most {NAME_MAX_BYTES} bytes (Linux PATH_MAX, NAME_MAX)"
            )
        if (problem := _unreadable_path(value)) is not None:
            raise ValueError(problem)
        return value
    if is_directory(value) or is_hub_id(value):
        return value
    raise ValueError(
        f"is neither a local directory nor a Hub id; allowed: {HUB_ID_RULES}, or a local directory (write ./NAME "
        "for one in the current folder)"
    )


# A Hub revision is a branch, a tag or a commit (huggingface_hub passes it as a git revision). git-check-ref-format(1):
# no control characters, space, ~ ^ : ? * [ \, no "..", no "@{"; a ref is stored as a file, so each name in it is
# at most NAME_MAX bytes. Printable ASCII only here, so nothing invisible (a right-to-left override) hides in it.
REVISION = re.compile(r"^(?!.*\.\.)(?!.*@\{)[!-~]{1,255}$")
REVISION_FORBIDDEN = set(" ~^:?*[\\")


def check_revision(value: str) -> str:
    if REVISION.match(value) and not REVISION_FORBIDDEN & set(value) and not value.endswith((".", "/", ".lock")):
        return value
    raise ValueError(
        "is not a git revision; allowed: a branch, tag or commit of 1-255 printable ASCII characters without "
        "space, ~ ^ : ? * [ \\, '..' or '@{', not ending in '.', '/' or '.lock' (git-check-ref-format)"
    )


ModelReference = Annotated[
    str,
    Field(min_length=1, description="Hugging Face Hub id or local directory"),
    AfterValidator(check_model_reference),
]
Revision = Annotated[str, AfterValidator(check_revision)]
