# a2ui-stream: the few commands a newcomer needs. `make help` lists them.
VENV ?= .venv
PYTHON ?= python3
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install up test test-core lint kafka-jars clean viewer compile

help: ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test,dev]'
	touch $@

# The live surface viewer (docs/viewer.md): built from viewer/ with npm into app/viewer_dist/,
# served by the worker at /ui/. Without npm, install goes on and /ui/ says how to build it.
VIEWER_STAMP := app/viewer_dist/BUILT
VIEWER_SOURCES := viewer/package.json viewer/package-lock.json viewer/build.mjs viewer/index.html \
	$(wildcard viewer/src/*.* viewer/src/*/*.js) schemas/a2ui-surface-v1.schema.json \
	schemas/a2ui-surface-v2-profile.schema.json

$(VIEWER_STAMP): $(VIEWER_SOURCES)
	@if command -v npm >/dev/null 2>&1; then \
		cd viewer && npm ci --no-audit --no-fund && npm run build; \
	else \
		echo "npm not found: the viewer (/ui/) is not built; install Node.js 20+ and run: make viewer"; \
	fi

viewer: ## build the live surface viewer (npm ci && npm run build in viewer/)
	cd viewer && npm ci --no-audit --no-fund && npm run build

# The admission hot path of app/core compiled with mypyc (docs/admission.md, "Speed"); without
# mypyc or a C compiler the pure-Python modules are used. app/compiled_core.py ignores the
# compiled modules as soon as any of their sources changes (until this runs again).
CORE_STAMP := app/core/compiled.json
CORE_SOURCES := $(addprefix app/core/,admission/decision.py admission/decision_outcomes.py \
	admission/decision_steps.py admission/children.py admission/cross_field.py admission/fold.py \
	admission/intake.py admission/limits.py admission/limits_envelope.py runlog/pmap.py \
	common/pointer.py admission/policy.py admission/redaction.py admission/refusal.py \
	admission/rules.py runlog/run_state.py admission/validator.py admission/validator_outputs.py \
	admission/validator_steps.py admission/validator_batch.py admission/validator_changelog.py \
	admission/validator_forks.py)

$(CORE_STAMP): $(CORE_SOURCES) scripts/compile_core.py $(VENV)/.installed
	$(VENV)/bin/python scripts/compile_core.py

compile: $(VENV)/.installed ## compile the admission core with mypyc (make install does it)
	$(VENV)/bin/python scripts/compile_core.py

install: $(VENV)/.installed $(VIEWER_STAMP) $(CORE_STAMP) ## create .venv, install a2ui-stream with its test extra, build the viewer, compile the core

up: install ## run it: embedded broker + topics + worker, in the foreground (Ctrl-C stops)
	$(VENV)/bin/a2ui-stream up

test: install ## run every test (a broker is started by the harness; see README)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test-core: install ## run only the pure core tests (no broker)
	$(VENV)/bin/pytest tests/core $(PYTEST_ARGS)

# mypy's packages (pyproject.toml) are app and tests: `mypy app` alone checks only the product.
lint: install ## ruff check, ruff format --check, mypy (strict) on app and tests
	$(VENV)/bin/ruff check app tests
	$(VENV)/bin/ruff format --check app tests
	$(VENV)/bin/mypy app tests

kafka-jars: ## resolve Apache Kafka's jars from Maven Central into the cache (needs mvn)
	bash scripts/fetch-kafka.sh

clean: ## remove the venv and caches (not the Kafka jar cache)
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache app/viewer_dist viewer/node_modules
	rm -rf app/core/*.so app/core/*/*.so app/core/mypyc-build $(CORE_STAMP)
