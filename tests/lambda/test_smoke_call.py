"""smoke_test hands its arguments to _SmokeCall by position: the fields must be its parameters, in order."""

from __future__ import annotations

import dataclasses
import inspect

from endpoint_runtime import smoke


def test_smoke_call_fields_are_smoke_tests_parameters_in_order():
    # `deployed` decides which checks run (the stack's or the names a custom resource gives), not how they run
    parameters = [p for p in inspect.signature(smoke.smoke_test).parameters if p != "deployed"]
    assert [f.name for f in dataclasses.fields(smoke._SmokeCall)] == parameters
