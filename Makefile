# Two commands do all the set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
AIPERF := .venv-aiperf
SCENARIO ?= kv-pressure
DURATION ?= 30

.PHONY: demo test test-engines test-lowest test-e2e lint typecheck contracts unit clean

$(STAMP): pyproject.toml testing/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' -e ./testing
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/infertriage diagnose --scenario $(SCENARIO) --duration $(DURATION)

lint: $(STAMP)
	$(BIN)/ruff check src testing tests benchmarks scripts
	$(BIN)/ruff format --check src testing tests benchmarks scripts

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

# pytest exits 5 when it collects no test; that is not a failure of the suite. Work stealing:
# the slow real-time runs (twins, engines' stand-ins) otherwise pile up on one worker at the
# end (a fresh clone: 797 s of pytest with xdist's default, 487 s with worksteal).
unit: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist worksteal -q -m "not e2e"; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

test: lint typecheck contracts unit

# The whole real-time runs of twins (each packaged scenario's map, the topologies', A/B,
# the browser's report of a run): 20 s or more each, kept out of `make test`; CI runs them.
test-e2e: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist worksteal -q -m e2e --durations=15

# Real engines: vLLM's CPU build and llama.cpp's llama-server, installed once into a cache
# outside the repository ($$INFERTRIAGE_ENGINE_CACHE, default ~/.cache/infertriage/engines)
# by scripts/engines/, then bench, metrics, diagnose and validate against each, one at a time.
test-engines: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,tokenizers]'
	INFERTRIAGE_ENGINES=1 $(BIN)/python -m pytest -p no:xdist -q -ra --durations=10 tests/engines
	# `--export aiperf` read back by AIPerf's own models, from a side environment (~3 min, 1.2 GB)
	test -x $(AIPERF)/bin/python || ($(PYTHON) -m venv $(AIPERF) && $(AIPERF)/bin/python -m pip install --quiet aiperf==0.13.0)
	INFERTRIAGE_AIPERF_PYTHON=$(AIPERF)/bin/python $(BIN)/python -m pytest -p no:xdist -q -ra tests/report/test_exports_tools.py

# The declared floors: every direct dependency (and the `distributed` extra's) at the lowest
# release pyproject.toml allows, pinned by scripts/floors.py, in an environment of its own;
# then the suite without its slow real-time runs (the tools of `dev` float: they are not
# what a user installs).
LOWEST := .venv-lowest
test-lowest: $(STAMP)
	rm -rf $(LOWEST)
	$(PYTHON) -m venv $(LOWEST)
	$(BIN)/python scripts/floors.py distributed > $(LOWEST)/floors.txt
	$(LOWEST)/bin/python -m pip install --quiet -c $(LOWEST)/floors.txt -e '.[dev,distributed]' -e ./testing
	$(LOWEST)/bin/python -m pip list --format=freeze | grep -iE '^(aiohttp|pydantic|typer|rich|numpy|locust|gevent)=='
	$(LOWEST)/bin/python -m pytest -n 2 --dist worksteal -q -m "not slow and not e2e"

clean:
	rm -rf $(VENV) $(LOWEST) build dist src/*.egg-info testing/*.egg-info .pytest_cache .mypy_cache .ruff_cache
