# hookinbox: `make run` serves the quickstart on SQLite; `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# A demo secret for the quickstart only; real deployments set their own in the environment.
QUICKSTART_SECRET ?= whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
export QUICKSTART_SECRET
# Parallel test workers: the slow scenarios mostly wait on leases and processes.
TEST_WORKERS ?= 4

.PHONY: venv run test lint fmt bench postgres clean

$(STAMP): pyproject.toml
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

test: venv postgres
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --durations=15

lint: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy

fmt: venv
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

bench: venv postgres
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) var test-output .pytest_cache .mypy_cache .ruff_cache
