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
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help install demo test synth clean hf-container-env deploy destroy bench

help:
	@echo "make demo   - build a tiny model, deploy it to a local AWS emulator, serve it, invoke it, destroy it"
	@echo "make test   - the test suite (CDK assertions, cfn-lint, cdk-nag, model_build, servers, emulator deploy)"
	@echo "make synth  - cdk synth the config in cdk.json (override: make synth CONFIG=path ENV=name)"
	@echo "make deploy CONFIG=path ENV=name  - preflight, build, publish, deploy, smoke-test one environment"
	@echo "make destroy CONFIG=path ENV=name - tear that environment down"
	@echo "make bench  - benchmarks: cold start, publish, serving, dev loop -> bench/results/ (~15 min)"
	@echo "make clean  - remove build outputs (build/, cdk.out/)"

# Python deps (torch pinned to the CPU wheel on this machine's disk) and the pinned CDK CLI.
$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt 2>&1 | $(QUIET_PIP)
	touch $@

node_modules/.package-lock.json: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

install: $(STAMP) node_modules/.package-lock.json

hf-container-env: $(STAMP)
	bash tests/hf_container/make_env.sh

demo: install
	$(PY) -m local_emulator.demo

test: install hf-container-env
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

CONFIG ?= config/local.yaml
synth: install
	$(CDK) synth --no-notices -c config=$(CONFIG) $(if $(ENV),-c env=$(ENV)) -c allow_unbuilt=true

deploy: install
	$(PY) -m workstation deploy --config $(CONFIG) $(if $(ENV),--env $(ENV))

destroy: install
	$(PY) -m workstation destroy --config $(CONFIG) $(if $(ENV),--env $(ENV))

bench: install
	$(PY) -m bench

clean:
	rm -rf build cdk.out
