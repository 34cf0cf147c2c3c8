# One entry point for every task. `make run` and `make test` work on a fresh clone:
# the first target that needs it creates .venv and installs the pinned dependencies.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LISTEN ?= 127.0.0.1:50051
DATA_DIR ?= ./var/toolnexus

.PHONY: venv proto proto-check run test test-fast lint typecheck check demo dev-model clean

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . -e clients/python
	touch $(STAMP)

proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

proto-check: $(STAMP)
	$(BIN)/python scripts/gen_proto.py --check

run: $(STAMP)
	$(BIN)/toolnexus-daemon serve --listen $(LISTEN) --data-dir $(DATA_DIR)

dev-model: $(STAMP)
	$(BIN)/toolnexus-daemon dev-model --listen 127.0.0.1:8099

test: proto-check
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check toolnexus_daemon clients/python tests examples scripts

typecheck: $(STAMP)
	$(BIN)/mypy toolnexus_daemon clients/python/toolnexus_client

check: proto-check lint typecheck test

demo: $(STAMP)
	$(BIN)/python examples/run_demo.py

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
