"""Lambda entry point of the invoke function (handler ``invoke/handler.handler``).

The code lives in endpoint_runtime/invoke.py, which the smoke test and the demo import too; this function's asset
holds this file, the endpoint_runtime modules it imports and request_contract.py (stacks/lambda_asset.py).
Events, environment, IAM and answers: see endpoint_runtime/invoke.py.
"""

from endpoint_runtime.invoke import handler

__all__ = ["handler"]
