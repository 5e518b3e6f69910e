"""The config blocks, limits and small derivations the stacks read, handed over by the deployment package: the one
door from endpoint_config/ to stacks/ and app.py (tests/test_architecture.py: stacks read the plan, not config
modules). A stack takes these as the types of the plan's fields (`plan.streaming` is a StreamingSpec, ...) or
as the constants a resource is sized by; a new name a stack needs is added here, not imported from endpoint_config.
What can be derived before the stack (a role name, an expiry, an API's value for a config word) is a property of the
plan or of the block instead (EndpointPlan.benchmark_role_name, .async_expiry, DataCapture.capture_modes,
ManagedBenchmark.offered_regions), so this door narrows rather than grows.
"""

from __future__ import annotations

from endpoint_config import Autoscaling
from endpoint_config.chat import OpenAIRouteSpec
from endpoint_config.engine_metrics import EngineAlarm, EngineMetrics
from endpoint_config.hosting import CopyScaling
from endpoint_config.invocation import Invocation
from endpoint_config.operations import (
    MAX_ROLLBACK_ALARMS,
    AlarmsSpec,
    AutoRollback,
    BlueGreen,
    Rolling,
    UpdatePolicySpec,
)
from endpoint_config.routing import Routing
from endpoint_config.schema import LOG_RETENTION, PipelineSpec
from endpoint_config.security import DataCapture
from endpoint_config.streaming import StreamingSpec

__all__ = [
    "MAX_ROLLBACK_ALARMS",
    "AlarmsSpec",
    "AutoRollback",
    "BlueGreen",
    "UpdatePolicySpec",
    "LOG_RETENTION",
    "Autoscaling",
    "CopyScaling",
    "DataCapture",
    "EngineAlarm",
    "EngineMetrics",
    "Invocation",
    "OpenAIRouteSpec",
    "PipelineSpec",
    "Rolling",
    "Routing",
    "StreamingSpec",
]
