"""artifact: what a built serving artifact is, and what building one needs, for both sides that handle it.

The serving systems' recipes (systems/*/recipe.py) build artifacts; model_build runs them, publishes and serves
the result. Both import this package, which imports nothing of ours:

  BuildError   a user-facing build failure (model_build's CLI prints it and exits 2)
  source       where a build reads the model from (a local directory or a Hugging Face Hub snapshot)
  manifest     manifest.json: the files, their sha256 and the content hash that names the artifact

Kept light: nothing here imports torch or transformers.
"""

from __future__ import annotations


class BuildError(Exception):
    """A user-facing build failure. The message names the thing, the value and what is allowed; the CLI
    prints it as is (no traceback) and exits 2."""


__all__ = ["BuildError"]
