"""Lambda entry point of the endpoint stack's smoke check (handler ``smoke_check/handler.handler``): a CloudFormation
custom resource that runs the smoke test after SageMaker reports the endpoint in service, so a failure fails the
stack and CloudFormation rolls it back. The code: endpoint_runtime/smoke_check.py (the checks: endpoint_runtime/smoke.py).
"""

from endpoint_runtime.smoke_check import handler

__all__ = ["handler"]
