"""The base of every config block: unknown keys are errors, and a parsed block never changes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A misspelt key must not be silently ignored; a validated block is a value."""

    model_config = ConfigDict(extra="forbid", frozen=True)


__all__ = ["Strict"]
