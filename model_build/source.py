"""Where a build reads the model from: moved to artifact.source (the recipes in systems/ use it too); the same
functions under their old names."""

from __future__ import annotations

from artifact.source import DEFAULT_ALLOW_PATTERNS, resolve_model_source

__all__ = ["DEFAULT_ALLOW_PATTERNS", "resolve_model_source"]
