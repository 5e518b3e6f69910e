"""load_testing: measure a deployed (or local) endpoint and judge it against its service level objectives.

  loadtest    the load generator: fixed concurrency levels against SageMaker Runtime or an OpenAI-compatible route,
              per level time to first token, inter-token latency, throughput, errors and $ per million tokens
  report      the numbers of a run (percentiles, summaries, the JSON/Markdown/plot outputs) and the SLO judgement
  prices      on-demand hosting prices (the AWS Price List API, or a saved table)
  gate        the SLO gate: an endpoint's `slo:` workload run and judged after a deploy (make deploy, the pipeline)
  benchmark   SageMaker's managed benchmark (an AIPerf job) of a deployed endpoint

The commands stay `python -m model_build loadtest | slo-gate | benchmark` (model_build/cli.py registers each module's
parser); this package never imports model_build.
"""
