# Helios Dashboard — the two commands a user needs are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HELIOS_DATA_DIR ?= data
export HELIOS_DATA_DIR
STAMP := $(VENV)/.installed
DEMO := $(HELIOS_DATA_DIR)/helios-synth/meta.json
BUNDLED := $(HELIOS_DATA_DIR)/philly/meta.json $(HELIOS_DATA_DIR)/alibaba/meta.json

.PHONY: install run dev test lint demo bundled bench clean

install: $(STAMP) ## create .venv and install the project with its dependencies (idempotent)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m sim.slurm.warm  # compiles the Slurm twin once (about a minute) into numba's cache
	touch $(STAMP)

$(DEMO): | $(STAMP)
	$(BIN)/helios demo

demo: $(DEMO) ## build the bundled synthetic Helios dataset if it is missing

$(BUNDLED): | $(STAMP)
	$(BIN)/helios bundled --quiet

bundled: $(BUNDLED) ## build the philly and alibaba datasets from the public traces in data/public if missing

PORT ?= 8050

# As production serves it (gunicorn.conf.py), on loopback only: the one local user is admin, which the server allows
# only because it listens on 127.0.0.1. No line per request unless HELIOS_ACCESS_LOG=1.
run: install demo bundled ## serve the dashboard on http://127.0.0.1:8050 with gunicorn (PORT=8060 for another port)
	@echo "Helios Dashboard on http://127.0.0.1:$(PORT)/ (gunicorn with gunicorn.conf.py; Ctrl-C stops it)"
	@HELIOS_BIND_HOST=127.0.0.1 PORT=$(PORT) HELIOS_ANONYMOUS_ROLE=$${HELIOS_ANONYMOUS_ROLE:-admin} \
	  HELIOS_ACCESS_LOG=$${HELIOS_ACCESS_LOG:-0} $(BIN)/gunicorn -c gunicorn.conf.py app:server

dev: install demo bundled ## for work on the code: Flask's development server with hot reload and Dash's dev tools
	HELIOS_ANONYMOUS_ROLE=$${HELIOS_ANONYMOUS_ROLE:-admin} $(BIN)/helios serve --host 127.0.0.1 --port $(PORT) --debug

# Test workers (pytest-xdist): whole files per worker, the longest first; one of the three runs the real-Slurm files,
# which mostly wait, while two keep the cores busy (tests/conftest.py). TEST_WORKERS=0 runs the suite in one
# process. The 15 slowest tests are listed at the end, to watch CI's 10-minute budget.
TEST_WORKERS ?= 3

test: install demo bundled ## run the whole test suite (builds the bundled datasets first if missing)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15 $(PYTEST_ARGS)

lint: install ## ruff, and the import contracts of docs/architecture.md
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

bench: install demo ## run the performance benchmarks and print their figures
	for b in synth ingest queries sim ces dashboard whatif load faults slurm_append scale; do \
	  test ! -f bench/$$b.py || $(BIN)/python bench/$$b.py || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
