# hookinbox: `make run` serves the quickstart on SQLite; `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# The quickstart's demo environment (its sources' secrets, the admin and API tokens: demo
# values) for `make run`, `make demo` and `make shell` only; never for the tests.
# DEMO_CONFIG and DEMO_TARGET_PORT move the demo elsewhere (the README's test does).
DEMO_CONFIG ?= $(CURDIR)/examples/quickstart.toml
DEMO_TARGET_PORT ?= 9000
DEMO_ENV := set -a && . examples/quickstart.env && HOOKINBOX_CONFIG=$(DEMO_CONFIG) && set +a
# Parallel test workers: the slow scenarios mostly wait on leases and processes.
TEST_WORKERS ?= 4

.PHONY: venv run-venv run demo shell test lint fmt bench bench-deps chaos postgres chromium clean docs \
	docs-deps examples example-crm example-video example-fastapi example-django

# version.py too: the installed metadata carries the version (pyproject reads it there).
$(STAMP): pyproject.toml src/hookinbox/version.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# `make run` needs only the package and the one extra the quickstart uses, installed with
# uv (itself installed by pip into the venv): seconds, where pip takes half a minute for
# the same set. `make venv` later adds pip and the test tools to the same .venv.
RUN_STAMP := $(VENV)/.run-stamp
$(RUN_STAMP): pyproject.toml src/hookinbox/version.py
	if ! [ $(STAMP) -nt pyproject.toml ]; then \
	  { test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV); } && \
	  { test -x $(BIN)/uv || $(PYTHON) -m pip --python $(BIN)/python install --quiet 'uv>=0.5,<1'; } && \
	  $(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[standardwebhooks]'; \
	fi
	touch $(RUN_STAMP)

run-venv: $(RUN_STAMP)

# The whole quickstart: the store, a forward target on :9000, `hookinbox serve` on :8080
# with the admin and the API on; prints the URLs and demo tokens (examples/quickstart_demo.py).
run: run-venv
	$(BIN)/python examples/quickstart_demo.py --config $(DEMO_CONFIG) --target-port $(DEMO_TARGET_PORT)

postgres:
	@scripts/ensure-postgres.sh

# The admin page's browser tests drive Debian's Chromium; never a downloaded browser.
chromium:
	@scripts/ensure-chromium.sh

test: venv postgres chromium
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --durations=15

lint: venv
	$(BIN)/ruff check src tests bench examples scripts
	$(BIN)/ruff format --check src tests examples scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

fmt: venv
	$(BIN)/ruff format src tests examples scripts
	$(BIN)/ruff check --fix src tests examples scripts

# The documentation site (mkdocs.yml, docs/), built with --strict: a broken link or a page
# missing from the nav fails. The configuration and CLI references are generated from the
# code by scripts/docs_reference.py, an mkdocs hook. The tools come from the extra `docs`.
DOCS_STAMP := $(VENV)/.docs-stamp
$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs-deps: $(DOCS_STAMP)

docs: venv docs-deps
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The peers of `make bench` (procrastinate, pgqueuer, Celery with redis-py) come from the optional extra `bench`.
BENCH_STAMP := $(VENV)/.bench-stamp
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

bench-deps: $(BENCH_STAMP)

# BENCH_ARGS: e.g. make bench BENCH_ARGS="--quick --modes drain"
bench: venv postgres bench-deps
	$(BIN)/python bench/run.py $(BENCH_ARGS)

# Signed load while PostgreSQL restarts and hookinbox processes are SIGKILLed, on a cluster
# of its own (dropped at the end), then the invariants (docs/chaos.md). Not part of `make test`.
# CHAOS_ARGS: --quick (about a minute), --store sqlite, --seed N, --json FILE, --keep-workdir.
CHAOS_ARGS ?=
chaos: venv
	PYTHONPATH=scripts $(BIN)/python -m chaos $(CHAOS_ARGS)
	PYTHONPATH=scripts $(BIN)/python -m chaos.edge

clean:
	rm -rf $(VENV) var examples/var test-output .pytest_cache .mypy_cache .ruff_cache site dist

# Each example runs with one command and prints what happened (examples/README.md).
example-crm example-video example-fastapi example-django: venv
	$(BIN)/python examples/$(@:example-%=%)/run.py

examples: example-crm example-video example-fastapi example-django

# With `make run` going in another terminal: a delivery, its duplicates, a tampered copy,
# the journal entry; the Stripe delivery's billing forward fails into a dead letter.
demo: run-venv
	@$(DEMO_ENV) && set -x && \
	$(BIN)/hookinbox send --source openai --id evt_demo_1 --type response.completed --repeat 3 --concurrent && \
	$(BIN)/hookinbox send --source openai --tamper && \
	$(BIN)/hookinbox send --source stripe --type invoice.paid --repeat 2 && \
	$(BIN)/hookinbox deliveries show evt_demo_1

# A shell with the quickstart's demo environment and .venv/bin on PATH: the README's and
# docs/quickstart.md's commands work in it as written (`exit` leaves it).
shell: run-venv
	@echo "hookinbox demo shell: HOOKINBOX_CONFIG=$(DEMO_CONFIG), demo secrets and tokens set; exit to leave"
	@$(DEMO_ENV) && PATH="$(CURDIR)/$(BIN):$$PATH" exec $${SHELL:-/bin/sh}
