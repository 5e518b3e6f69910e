"""Lambda entry point of the post-deploy smoke test (handler ``smoke/handler.handler``).

The checks live in endpoint_runtime/smoke.py, which `python -m model_build smoke` runs too; this function's asset
holds this file and the endpoint_runtime modules it imports (stacks/lambda_asset.py). Environment, IAM, timeout
and result: see endpoint_runtime/smoke.py.
"""

from endpoint_runtime.smoke import handler

__all__ = ["handler"]
