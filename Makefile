# The two commands of the README: `make book` and `make test`. Both install the locked
# environment into .venv/ when it is missing or older than the lock file.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOBS ?= 2

# Every notebook and test runs offline, headless, one torch thread per parallel worker.
export HF_DATASETS_OFFLINE := 1
export HF_HUB_OFFLINE := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: bench book test smoke lint format browser-test seeds env lock clean

env: $(STAMP)

# Bytecode is written as modules are first imported, not for every installed file: the book
# imports a third of what it installs (torch's and transformers' tests, most of sympy and
# transformers' thousands of model files never), and compiling all of it took about 50 s of CPU
# (`compileall`; pip's own compile pass about twice that), against 11 s for one process importing
# every chapter and its frameworks from nothing (processes that start together, such as the test
# workers, may each compile a module once). So pip installs with --no-compile, and every command
# here runs with PYTHONDONTWRITEBYTECODE unset (where it is set, imports would never write
# bytecode and would compile torch and Lightning from source in every kernel). Python writes each
# file atomically, into .venv and the git-ignored __pycache__ folders.
unexport PYTHONDONTWRITEBYTECODE

# The pip that Python 3.11's venv brings (23.2) took 33 s to resolve the lock file's 208 pins here;
# pip 26.3 takes 10 s and installs the same packages (`pip freeze` of both venvs is identical).
PIP_VERSION := 26.3

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check pip==$(PIP_VERSION)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -e .
	@touch $(STAMP)

book: $(STAMP)
	@status=0; \
	$(BIN)/reprobook run --jobs $(JOBS) || status=$$?; \
	$(BIN)/reprobook ledger || status=$$?; \
	$(BIN)/reprobook book || status=1; \
	exit $$status

# Unit and runner tests plus every notebook through nbval (each notebook once; a chapter's
# notebooks in order on one worker, a test file on one worker: tests/conftest.py), in kernels
# forked from a server that imported torch and Lightning once per worker (reprobook.kernels);
# tests/slurm starts a one-node Slurm cluster as root when Debian's slurmctld, slurmd and munge are
# installed (.ci/run installs them), and skips, saying why, when they are not;
# then the book's structure with warnings as errors (from the committed notebooks: nothing runs
# twice), then that book in a real browser. `make smoke` runs beside the ledger, the book and the
# browser test, which read nothing it writes (they share the cores: together about 30 s sooner
# than one after the other); its log is printed at the end, and any of the four failing fails
# the target.
TEST_RESULTS := $(CURDIR)/_build/test-results
test: $(STAMP) lint
	REPROBOOK_RESULTS=$(TEST_RESULTS) REPROBOOK_THREADS=1 OMP_NUM_THREADS=1 \
	  $(BIN)/python -m pytest tests notebooks --ignore=tests/browser --nbval-lax --nbval-kernel-name reprobook-warm \
	  --nbval-cell-timeout=600 -n $(JOBS) --dist loadfile -q -rs
	@mkdir -p _build; status=0; \
	REPROBOOK_RESULTS=$(TEST_RESULTS) $(MAKE) --no-print-directory smoke >_build/smoke.log 2>&1 & \
	smoke=$$!; \
	echo "make smoke: running beside the ledger, the book and the browser test (_build/smoke.log)"; \
	REPROBOOK_RESULTS=$(TEST_RESULTS) $(BIN)/reprobook ledger || status=1; \
	REPROBOOK_RESULTS=$(TEST_RESULTS) $(BIN)/reprobook book --source-only || status=1; \
	$(MAKE) --no-print-directory browser-test || status=1; \
	wait $$smoke || { status=1; echo "make smoke FAILED:"; }; \
	cat _build/smoke.log; \
	exit $$status

# The full profile's code path of every chapter with its sizes cut to seconds on CPU, on tiny
# fixtures of its inputs built offline under _build/fixtures (models of the real architecture
# with random weights, a few rows in the datasets' schemas). Its values are never verdicts: run
# it before spending GPU hours. torchvision has no CPU build for the locked torch, so chapter 15
# runs its toy detector there, chosen by the parameter and recorded as a stand-in. Its kernels
# are forked from a server that imported torch and Lightning once (about half its time).
smoke: $(STAMP)
	$(BIN)/reprobook run --profile smoke --jobs $(JOBS) --no-progress --warm-kernels -p detector=toy

# One style: ruff's linter and formatter (pyproject.toml; notebooks/ruff.toml narrows the
# notebooks to the book's 88-character column). `make format` applies the formatter's changes.
LINTED := lib tests tools notebooks
lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

format: $(STAMP)
	$(BIN)/ruff check --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)

# The built book in headless Chromium over HTTP on 127.0.0.1, offline (tests/browser). Skips, and
# says why, without Chromium (Debian's chromium; .ci/run installs it). SITE= tests another build.
SITE ?= $(CURDIR)/_build/site-check/_build/html
browser-test: $(STAMP)
	REPROBOOK_SITE=$(SITE) $(BIN)/python -m pytest tests/browser -q -rs -p no:cacheprovider

# Seed stability: every chapter at seed 0 and at seed 1 (kept apart under _build/tagged/seed1),
# then both runs' verdicts side by side; exits non-zero when a verdict flipped.
# The book cold (no checkpoints, every notebook executed), two notebooks at a time, then each
# notebook's wall time, import time and peak memory against the budgets (`reprobook times`).
# A benchmark, not a test: read it with the load averages it prints.
bench: $(STAMP)
	rm -rf _build/tagged/bench
	REPROBOOK_CHECKPOINTS=$(CURDIR)/_build/tagged/bench/checkpoints \
	  $(BIN)/reprobook run --force --jobs $(JOBS) --no-progress --tag bench || true
	$(BIN)/reprobook times --tag bench

seeds: $(STAMP)
	$(BIN)/reprobook run --jobs $(JOBS) --no-progress
	$(BIN)/reprobook run --jobs $(JOBS) --no-progress -p seed=1
	$(BIN)/reprobook ledger --compare default seed1

# Re-resolve the lock file from requirements.in (review the diff before committing it).
lock:
	rm -rf _build/lockenv && $(PYTHON) -m venv _build/lockenv
	_build/lockenv/bin/python -m pip install --quiet pip==$(PIP_VERSION)
	_build/lockenv/bin/python -m pip install --quiet -r requirements.in
	{ sed -n '1,3p' requirements.lock; _build/lockenv/bin/python -m pip freeze | sed 's/+cpu//'; } > requirements.lock.new
	mv requirements.lock.new requirements.lock

clean:
	rm -rf _build
