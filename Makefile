# hookinbox: `make run` serves the quickstart on SQLite; `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Demo secrets for the quickstart only; real deployments set their own in the environment.
QUICKSTART_SECRET     ?= whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
STRIPE_WEBHOOK_SECRET ?= whsec_quickstart_stripe_demo
GITHUB_WEBHOOK_SECRET ?= quickstart-github-demo
SHOPIFY_CLIENT_SECRET ?= quickstart-shopify-demo
SLACK_SIGNING_SECRET  ?= quickstart-slack-demo
VIDEO_WEBHOOK_SECRET  ?= quickstart-video-demo
TWILIO_AUTH_TOKEN     ?= quickstart-twilio-demo
PARTNER_API_KEY       ?= quickstart-partner-demo
LEGACY_BASIC_AUTH     ?= quickstart:legacy-demo
MUX_WEBHOOK_SECRET    ?= quickstart-mux-demo
export QUICKSTART_SECRET STRIPE_WEBHOOK_SECRET GITHUB_WEBHOOK_SECRET SHOPIFY_CLIENT_SECRET
export SLACK_SIGNING_SECRET VIDEO_WEBHOOK_SECRET TWILIO_AUTH_TOKEN PARTNER_API_KEY
export LEGACY_BASIC_AUTH MUX_WEBHOOK_SECRET
# Parallel test workers: the slow scenarios mostly wait on leases and processes.
TEST_WORKERS ?= 4

.PHONY: venv run demo test lint fmt bench bench-deps chaos postgres chromium clean docs \
	docs-deps examples example-crm example-video example-fastapi example-django

# version.py too: the installed metadata carries the version (pyproject reads it there).
$(STAMP): pyproject.toml src/hookinbox/version.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

run: venv
	mkdir -p var
	$(BIN)/hookinbox serve --config examples/quickstart.toml --log-format console

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

# The peers of `make bench` (procrastinate, pgqueuer) come from the optional extra `bench`.
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

clean:
	rm -rf $(VENV) var test-output .pytest_cache .mypy_cache .ruff_cache site dist

# Each example runs with one command and prints what happened (examples/README.md).
example-crm example-video example-fastapi example-django: venv
	$(BIN)/python examples/$(@:example-%=%)/run.py

examples: example-crm example-video example-fastapi example-django

# With `make run` going in another terminal: a delivery, its duplicate, a tampered copy.
demo: venv
	$(BIN)/hookinbox send --config examples/quickstart.toml --source openai --id evt_demo_1 --repeat 3 --concurrent
	$(BIN)/hookinbox send --config examples/quickstart.toml --source openai --tamper
	$(BIN)/hookinbox send --config examples/quickstart.toml --source stripe --type invoice.paid --repeat 2
	$(BIN)/hookinbox deliveries show evt_demo_1 --config examples/quickstart.toml
