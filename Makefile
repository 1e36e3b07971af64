# The two commands: `make run` serves the shop on embedded defaults, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test lint messages bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.run-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.test-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@

node_modules/.deps: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Compiled translations are build output: made from locale/*/LC_MESSAGES/django.po.
messages: $(VENV)/.run-deps
	cd locale && ../$(BIN)/python ../manage.py compilemessages -v0

run: $(VENV)/.run-deps node_modules/.deps messages
	$(BIN)/python scripts/devstack.py

test: $(VENV)/.test-deps node_modules/.deps messages
	$(BIN)/ruff check .
	$(BIN)/python -m pytest --ignore=tests/browser $(PYTEST_ARGS)
	# The browser journey in its own process: its live server and flushed database stay apart.
	$(BIN)/python -m pytest tests/browser $(PYTEST_ARGS)

# Benchmarks: each prints the figures the README quotes and writes them to bench/results/<name>.json.
# About 5 minutes on 2 cores; needs PostgreSQL (DATABASE_URL or the local one) and Redis (CELERY_BROKER_URL).
bench: $(VENV)/.test-deps node_modules/.deps
	$(BIN)/python bench/load.py
	$(BIN)/python bench/scan_rpc_calls.py --orders 1 100 1000 10000
	$(BIN)/python bench/preflight_cpu.py

lint: $(VENV)/.test-deps
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) node_modules .run db.sqlite3 staticfiles
