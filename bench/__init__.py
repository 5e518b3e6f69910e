"""`make bench` / `python -m bench`: cold start, build + publish, serving and developer-loop benchmarks.

Everything runs on this machine (CPU) and writes bench/results/{results.json,results.md,*.png}; large scratch
(random-weight checkpoints, built artifacts) lives under build/bench/ (git-ignored, skipped by lint and mypy) and is reused between runs.
"""
