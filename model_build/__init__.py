"""model_build: turn the model an endpoint config names into a verified, content-addressed serving artifact.

Kept light on purpose: the CDK app and the CLI's error paths import this package, so nothing here imports
torch or transformers (those load only inside the commands that need them).
"""

from __future__ import annotations


class BuildError(Exception):
    """A user-facing build failure. The message names the thing, the value and what is allowed; the CLI
    prints it as is (no traceback) and exits 2."""


__all__ = ["BuildError"]
