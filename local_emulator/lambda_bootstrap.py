"""The emulator's Python Lambda runtime: import the function's handler from its unpacked package and call it once.

Run as `python -I lambda_bootstrap.py CODE_DIR HANDLER EVENT_FILE RESULT_FILE DEADLINE_MS` (lambda_runner.py). The
handler is Lambda's `<file path without .py>.<function>` (a path's slashes are package dots, as Lambda's Python
runtime reads it). The result, or Lambda's error object (errorMessage, errorType, stackTrace), goes to RESULT_FILE
as {"result": ...} or {"error": ...}; whatever the function prints is its log. Stdlib only.
"""

import importlib
import json
import os
import sys
import time
import traceback


class Context:
    """The fields and method of Lambda's Python context object that handlers use
    (https://docs.aws.amazon.com/lambda/latest/dg/python-context.html)."""

    def __init__(self, deadline_ms: int) -> None:
        self._deadline_ms = deadline_ms
        self.function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.invoked_function_arn = os.environ.get("_LOCAL_LAMBDA_FUNCTION_ARN", "")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.aws_request_id = os.environ.get("_LOCAL_LAMBDA_REQUEST_ID", "")
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


def main() -> None:
    code_dir, handler, event_path, result_path, deadline_ms = sys.argv[1:6]
    sys.path.insert(0, code_dir)
    module_name, _, function_name = handler.rpartition(".")
    with open(event_path) as f:
        event = json.load(f)
    try:
        function = getattr(importlib.import_module(module_name.replace("/", ".")), function_name)
        answer = {"result": function(event, Context(int(deadline_ms)))}
    except Exception as err:
        traceback.print_exc()
        answer = {
            "error": {
                "errorMessage": str(err),
                "errorType": type(err).__name__,
                "stackTrace": traceback.format_tb(err.__traceback__),
            }
        }
    sys.stdout.flush()
    with open(result_path, "w") as f:
        json.dump(answer, f, default=str)


if __name__ == "__main__":
    main()
