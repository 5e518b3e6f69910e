"""model_build: turn the model an endpoint config names into a verified, content-addressed serving artifact, publish
it, and run the operator CLI around it (`python -m model_build`: build, publish, preflight, smoke, clean, rollback; the
load test, SLO gate and managed benchmark come from load_testing/, the local server from local_runtime/).

Kept light on purpose: the CDK app and the CLI's error paths import this package, so nothing here imports
torch or transformers (those load only inside the commands that need them).

BuildError lives in `artifact` (the recipes in systems/ raise it too, and systems must not import model_build);
it is the same class under this name.
"""

from __future__ import annotations

from artifact import BuildError

__all__ = ["BuildError"]
