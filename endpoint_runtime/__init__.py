"""Code the Lambda functions share with the workstation CLI, importable by name (`lambda/` cannot be: a keyword).

  invoke   the invoke function's request code: validation, event shapes, error mapping (lambda/invoke)
  smoke    the post-deploy smoke checks, run by the smoke function (lambda/smoke) and `python -m model_build smoke`

Stdlib + boto3/botocore only, and nothing is imported here: each function's asset ships just the modules its
handler imports (stacks/lambda_asset.py), so this file must stay empty of imports.
"""
