"""Lambda entry points of the invoke function: `invoke/handler.handler` for a real-time endpoint,
`invoke/handler.async_handler` for an asynchronous one (submit and fetch; the stack picks by the endpoint's
invocation mode). The code lives in endpoint_runtime/invoke.py and async_invoke.py, which the smoke test and the demo
import too; this function's asset holds this file, the endpoint_runtime modules it imports and request_contract.py
(stacks/lambda_asset.py). Events, environment, IAM and answers: see those modules.
"""

from endpoint_runtime.async_invoke import handler as async_handler
from endpoint_runtime.invoke import handler

__all__ = ["async_handler", "handler"]
