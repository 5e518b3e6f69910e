"""The weights staging job: streams a model's files from the Hugging Face Hub into the content-addressed S3 prefix,
inside the account (docs/design/staging.md). Stdlib + boto3 only, and nothing of ours: this package is the job's
whole code, shipped as its own asset and run as `python -m weights_staging --spec s3://... --destination s3://...`."""
