"""Lambda entry point of the endpoint stack's published-artifact check (handler ``artifact_check/handler.handler``):
a CloudFormation custom resource the Model waits for. The code: endpoint_runtime/artifact_check.py."""

from endpoint_runtime.artifact_check import handler

__all__ = ["handler"]
