#!/bin/bash
# The function's handler: the Lambda Web Adapter's wrapper (/opt/bootstrap, AWS_LAMBDA_EXEC_WRAPPER) execs
# ${LAMBDA_TASK_ROOT}/${_HANDLER} (awslabs/aws-lambda-web-adapter layer/bootstrap), i.e. this script, which starts the
# HTTP server the adapter forwards requests to. PYTHONPATH: the asset's root (endpoint_runtime/, request_contract.py)
# and the runtime's own directory, which holds the boto3 the runtime ships (as the adapter's Python zip examples
# set it, e.g. examples/fastapi-response-streaming-zip/app/run.sh).
PYTHONPATH="$LAMBDA_TASK_ROOT:$LAMBDA_RUNTIME_DIR" exec python "$LAMBDA_TASK_ROOT/stream/app.py"
