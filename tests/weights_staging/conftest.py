"""The staging job's fixtures (defined in stage_hub.py, which the tests also import for its plain helpers)."""

from stage_hub import fake_hub, staging

__all__ = ["fake_hub", "staging"]
