# a2ui-stream: the few commands a newcomer needs. `make help` lists them.
VENV ?= .venv
PYTHON ?= python3
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install up test test-core lint kafka-jars clean

help: ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test,dev]'
	touch $@

install: $(VENV)/.installed ## create .venv and install a2ui-stream with its test extra

up: install ## run it: embedded broker + topics + worker, in the foreground (Ctrl-C stops)
	$(VENV)/bin/a2ui-stream up

test: install ## run every test (a broker is started by the harness; see README)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test-core: install ## run only the pure core tests (no broker)
	$(VENV)/bin/pytest tests/core $(PYTEST_ARGS)

lint: install ## ruff and mypy
	$(VENV)/bin/ruff check app tests
	$(VENV)/bin/mypy

kafka-jars: ## resolve Apache Kafka's jars from Maven Central into the cache (needs mvn)
	bash scripts/fetch-kafka.sh

clean: ## remove the venv and caches (not the Kafka jar cache)
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache
