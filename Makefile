# Reproducible environments for airflow-durable. See docs/dev/environments.md.
#
#   make demo          main env, then `airflow-durable demo` (real Airflow vs an offline emulator, ~1-2 min)
#   make test          main env (.venv: Airflow 3.3 + Databricks provider 7.23), then pytest
#   make test-matrix   every other matrix entry, each in .venv-<name>, same pytest command
#   make test-<name>   one matrix entry (names: $(MATRIX))
#   make envs          build every env without running tests (parallel-safe: make -j3 envs)
#   make lock          recompile requirements/*.txt from requirements/*.in (keeps pins unless
#                      an .in changed); make lock-upgrade moves every pin to the newest release
#   make docs          build the docs site strictly (any warning fails) into $(DOCS_SITE)
#   make lint          mypy airflow_durable, ruff check ., ruff format --check . (main env; tools locked)
#   make explore       the model of the task-instance lifecycle run long: EXPLORE_STEPS (default 10000)
#                      rule steps per system family, every distinct violation shrunk (docs/dev/model.md)
#   make catalogue-docs  rewrite the README/docs tables generated from airflow_durable/catalogue.py
#   make runtime-tier  the reliability matrix on PostgreSQL + CeleryExecutor + 2 triggerers, for one
#                      group of systems (RUNTIME_GROUP: unset = picked by the commit hash, all, i/n,
#                      or a comma list) and one set of phases (RUNTIME_PHASES: likewise, or all);
#                      needs the Debian packages postgresql and redis-server
#   make reliability   the whole matrix in one run (~40 min on 2 cores), then rewrite docs/reliability.json
#                      and docs/reliability.md from it
#   make release-check build the sdist and wheel into build/release/, check what they hold, install the
#                      wheel into fresh virtualenvs outside the checkout ([all], and no extra) and try it:
#                      imports, --version, check, the demo (tests/release_check.py)
#   make clean         remove every env, the uv bootstrap and the per-env AIRFLOW_HOMEs
#
# Needs only python3.11 with pip: uv is bootstrapped with pip into .venv-tools/.
# An env is rebuilt only when its lock file or pyproject.toml changed (stamp: <env>/.synced).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test
MAKEFLAGS += --no-print-directory

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null)
UV_VERSION ?= 0.13.9
TOOLS := .venv-tools
UV := $(TOOLS)/bin/uv

# Main env: name 3.3, lock requirements/airflow-3.3.txt, venv .venv
MAIN := 3.3
# Other matrix entries: lock requirements/airflow-<name>.txt, venv .venv-<name>
MATRIX := 3.2 2.11 3.3-databricks-7.16

# The reliability matrix (marker `reliability`) drives one deployment per module: it has its own
# target (runtime-tier), run without xdist.
PYTEST_ARGS ?= -ra --timeout=600 -n 2 -m "not reliability"

# Never let uv fetch a Python of its own: the machine's python3.11 is the one to use.
export UV_PYTHON_DOWNLOADS := never
export UV_NO_PROGRESS := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# Degraded entries pin Airflow's own dependencies to what they resolved to at that Airflow
# release (like Airflow's published constraints files, which this machine cannot fetch):
# requirements/constraints-<name>.txt is compiled from constraints-<name>.in with
# --exclude-newer ERA_<name>, minus every apache-airflow-providers-* (so the newer providers
# under test can be layered on top) and minus UNCONSTRAIN_<name> (packages those providers
# need newer). Without this, today's fastapi/svcs break Airflow 3.2.2's in-process execution
# API under dag.test().
ERA_3.2 := 2026-06-01T00:00:00Z
UNCONSTRAIN_3.2 := importlib-metadata
ERA_2.11 := 2026-03-15T00:00:00Z
UNCONSTRAIN_2.11 := aiohttp
ERA_ENTRIES := 3.2 2.11

# uv pip compile options shared by `make lock` and `make lock-upgrade`.
COMPILE := $(UV) pip compile --quiet --python-version 3.11 \
	--python-platform x86_64-unknown-linux-gnu --generate-hashes --no-header \
	--annotation-style line

venv_of = $(if $(filter $(MAIN),$(1)),.venv,.venv-$(1))

.PHONY: demo docs lint explore catalogue-docs runtime-tier reliability test test-matrix envs lock lock-upgrade clean uv $(addprefix test-,$(MAIN) $(MATRIX)) \
	$(addprefix env-,$(MAIN) $(MATRIX))

# --- uv bootstrap ---------------------------------------------------------------------------
uv: $(UV)
$(UV):
	@echo ">> bootstrapping uv $(UV_VERSION) into $(TOOLS) with $(PYTHON)"
	@test -n "$(PYTHON)" || { echo "make: ERROR: no python3.11 (or python3) on PATH" >&2; exit 1; }
	@"$(PYTHON)" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else \
		"make: ERROR: need Python 3.11, got " + sys.version.split()[0] + " at " + sys.executable)'
	rm -rf $(TOOLS)
	"$(PYTHON)" -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet "uv==$(UV_VERSION)"
	@$(UV) --version

# --- environments ---------------------------------------------------------------------------
# $(1) = matrix name. The stamp lives inside the venv, so deleting the venv forces a rebuild.
define ENV_template
$(call venv_of,$(1))/.synced: requirements/airflow-$(1).txt pyproject.toml | $(UV)
	@echo ">> syncing $(call venv_of,$(1)) from requirements/airflow-$(1).txt"
	@test -x $(call venv_of,$(1))/bin/python || $(UV) venv --quiet --python "$(PYTHON)" $(call venv_of,$(1))
	$(UV) pip sync --compile-bytecode --python $(call venv_of,$(1))/bin/python --require-hashes requirements/airflow-$(1).txt
	$(UV) pip install --python $(call venv_of,$(1))/bin/python --no-deps --no-build-isolation -e .
	@touch $$@

env-$(1): $(call venv_of,$(1))/.synced

test-$(1): $(call venv_of,$(1))/.synced
	@echo ">> pytest in $(call venv_of,$(1)) (matrix entry $(1))"
	@mkdir -p .airflow-home-$(1)
	@rc=0; AIRFLOW_HOME="$(CURDIR)/.airflow-home-$(1)" AIRFLOW__CORE__LOAD_EXAMPLES=False \
		$(call venv_of,$(1))/bin/python -m pytest $(PYTEST_ARGS) || rc=$$$$?; \
	if [ $$$$rc -eq 5 ]; then \
		echo "make: ERROR: pytest collected no tests in $(call venv_of,$(1)) (exit 5)" >&2; \
	elif [ $$$$rc -ne 0 ]; then \
		echo "make: ERROR: pytest failed in $(call venv_of,$(1)) (exit $$$$rc)" >&2; \
	fi; exit $$$$rc
endef
$(foreach n,$(MAIN) $(MATRIX),$(eval $(call ENV_template,$(n))))

test: test-$(MAIN)
test-matrix: $(addprefix test-,$(MATRIX))
envs: $(addprefix env-,$(MAIN) $(MATRIX))

# The demo in the main env, e.g. make demo DEMO_ARGS=--keep. For scripts, once the env exists:
# .venv/bin/airflow-durable demo --format json (stdout is then the JSON document only).
DEMO_ARGS ?=
demo: $(call venv_of,$(MAIN))/.synced
	@echo ">> airflow-durable demo $(DEMO_ARGS) (in $(call venv_of,$(MAIN)))" >&2
	@$(call venv_of,$(MAIN))/bin/airflow-durable demo $(DEMO_ARGS)

# --- runtime tier and reliability report (docs/dev/runtime-tier.md, reliability-runs.md) -----
RUNTIME_GROUP ?=
# Unset: one of two phase sets, picked by the commit hash (both do not fit CI's budget); the
# Celery-worker kill phase runs only in `make reliability` (or RUNTIME_PHASES=celerykill).
RUNTIME_PHASES ?=
RUNTIME_PYTEST_ARGS ?= -ra --timeout=3000 -p no:xdist -p no:cacheprovider -m reliability --durations=0
RUNTIME_SELECT ?=
runtime-tier: $(call venv_of,$(MAIN))/.synced
	@echo ">> runtime tier (group: $(if $(RUNTIME_GROUP),$(RUNTIME_GROUP),picked by the commit hash)," \
		"phases: $(if $(RUNTIME_PHASES),$(RUNTIME_PHASES),picked by the commit hash))"
	@mkdir -p .airflow-home-$(MAIN)
	AFD_RT_GROUP="$(RUNTIME_GROUP)" AFD_RT_PHASES="$(RUNTIME_PHASES)" AIRFLOW_HOME="$(CURDIR)/.airflow-home-$(MAIN)" \
		AIRFLOW__CORE__LOAD_EXAMPLES=False \
		$(call venv_of,$(MAIN))/bin/python -m pytest $(RUNTIME_PYTEST_ARGS) $(RUNTIME_SELECT) \
		tests/e2e_runtime/test_reliability_matrix.py

# Every cell of the matrix in one run on this machine (about 40 min on 2 cores; see
# docs/dev/reliability-runs.md), written to build/reliability/results.json; only a complete run at one
# commit with no uncommitted changes then becomes docs/reliability.json and docs/reliability.md.
RELIABILITY_RESULTS := build/reliability/results.json
reliability: $(call venv_of,$(MAIN))/.synced
	rm -rf $(dir $(RELIABILITY_RESULTS))
	@mkdir -p .airflow-home-$(MAIN) $(dir $(RELIABILITY_RESULTS))
	AFD_RT_GROUP=all AFD_RT_PHASES=all AFD_RT_RESULTS="$(CURDIR)/$(RELIABILITY_RESULTS)" \
		AIRFLOW_HOME="$(CURDIR)/.airflow-home-$(MAIN)" AIRFLOW__CORE__LOAD_EXAMPLES=False \
		$(call venv_of,$(MAIN))/bin/python -m pytest $(RUNTIME_PYTEST_ARGS) tests/e2e_runtime/test_reliability_matrix.py \
		|| echo "make: some cells failed; the results are recorded anyway" >&2
	$(call venv_of,$(MAIN))/bin/python -m tests.e2e_runtime.reliability_report --publish $(RELIABILITY_RESULTS)

# --- docs ---------------------------------------------------------------------------------
# mkdocs-material, mkdocstrings are in the main env's lock. Offline: no fonts, no inventories.
DOCS_SITE ?= site
docs: $(call venv_of,$(MAIN))/.synced
	@echo ">> mkdocs build --strict -d $(DOCS_SITE)"
	NO_MKDOCS_2_WARNING=1 $(call venv_of,$(MAIN))/bin/mkdocs build --strict -d "$(DOCS_SITE)"

# --- lint -------------------------------------------------------------------------------------
# ruff and mypy are in the main env's lock (requirements/lint.in); their settings, and the lint
# fixtures they skip (deliberately bad DAGs), are in pyproject.toml. Runs all three, fails if any did.
lint: $(call venv_of,$(MAIN))/.synced
	@rc=0; \
	echo ">> mypy airflow_durable"; $(call venv_of,$(MAIN))/bin/mypy airflow_durable || rc=1; \
	echo ">> ruff check ."; $(call venv_of,$(MAIN))/bin/ruff check . || rc=1; \
	echo ">> ruff format --check ."; $(call venv_of,$(MAIN))/bin/ruff format --check . || rc=1; \
	exit $$rc

# --- the model (tests/model, docs/dev/model.md) ----------------------------------------------
# `make test` runs a few examples per family; this runs the same state machines for EXPLORE_STEPS rule
# steps per family and prints steps, transitions taken and every violation with its minimal sequence
# (EXPLORE_ARGS: e.g. --families databricks,batch --json model.json). Exits 1 on a violation not listed
# in tests/model/known.py. Each run explores new examples (no seed is fixed).
EXPLORE_STEPS ?= 10000
EXPLORE_ARGS ?=
explore: $(call venv_of,$(MAIN))/.synced
	AIRFLOW__CORE__LOAD_EXAMPLES=False nice -n 5 $(call venv_of,$(MAIN))/bin/python -m tests.model.explore \
		--steps $(EXPLORE_STEPS) $(EXPLORE_ARGS)

# The tables between <!-- catalogue:... --> markers in README.md and docs/ (tests/test_catalogue.py
# fails when they are stale).
catalogue-docs: $(call venv_of,$(MAIN))/.synced
	$(call venv_of,$(MAIN))/bin/python -m airflow_durable.catalogue --write-docs

# --- lock files -----------------------------------------------------------------------------
# $(1) = matrix name with an ERA_ date: writes requirements/constraints-$(1).txt
define CONSTRAINTS_recipe
	@echo ">> compiling requirements/constraints-$(1).txt (apache-airflow as of $(ERA_$(1)))"
	@{ echo "# Generated by 'make lock' from constraints-$(1).in: uv pip compile --exclude-newer $(ERA_$(1)),"; \
	  echo "# minus apache-airflow-providers-* $(if $(UNCONSTRAIN_$(1)),and $(UNCONSTRAIN_$(1)),). Do not edit."; \
	  $(UV) pip compile --quiet --python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
		--no-header --no-annotate --exclude-newer $(ERA_$(1)) requirements/constraints-$(1).in \
	  | grep -v -E '^(apache-airflow-providers-[a-z0-9-]+$(foreach p,$(UNCONSTRAIN_$(1)),|$(p)))=='; \
	} > requirements/constraints-$(1).txt.tmp
	@mv requirements/constraints-$(1).txt.tmp requirements/constraints-$(1).txt

endef

lock: | $(UV)
	$(foreach n,$(ERA_ENTRIES),$(call CONSTRAINTS_recipe,$(n)))
	@for n in $(MAIN) $(MATRIX); do \
		echo ">> compiling requirements/airflow-$$n.txt"; \
		$(COMPILE) requirements/airflow-$$n.in -o requirements/airflow-$$n.txt; \
	done

lock-upgrade: | $(UV)
	$(foreach n,$(ERA_ENTRIES),$(call CONSTRAINTS_recipe,$(n)))
	@for n in $(MAIN) $(MATRIX); do \
		echo ">> compiling requirements/airflow-$$n.txt (--upgrade)"; \
		$(COMPILE) --upgrade requirements/airflow-$$n.in -o requirements/airflow-$$n.txt; \
	done

clean:
	rm -rf .venv .venv-* .airflow-home-* .pytest_cache

# --- benchmarks -------------------------------------------------------------------------------
# Durable vs upstream operators side by side, every section in one run: the published report
# (docs/benchmarks.md, docs/benchmarks.json, charts in docs/img/benchmarks/). Exits non-zero only when
# a section cannot run. Settings: docs/dev/benchmarks.md. A partial run (BENCH_ARGS=--sections ...,
# --cases ..., --storm 0) writes build/bench/ instead: only a full run is published.
BENCH_ARGS ?=
.PHONY: bench bench-quick
bench: $(call venv_of,$(MAIN))/.synced
	nice -n 10 $(call venv_of,$(MAIN))/bin/python -m bench $(BENCH_ARGS)

# A minute-long subset (one operator, no dag.test(), no real triggerer), written to build/bench-quick/
# (gitignored): it never touches the published report.
bench-quick: $(call venv_of,$(MAIN))/.synced
	nice -n 10 $(call venv_of,$(MAIN))/bin/python -m bench --quick --out build/bench-quick $(BENCH_ARGS)

# --- release check (tests/release_check.py) ---------------------------------------------------
# The distributions as users get them: built from the checkout (the wheel from the sdist), installed by
# uv into temporary virtualenvs outside it (removed afterwards), pinned to the main env's lock and
# tried there. Installs reuse uv's cache and download what it lacks.
.PHONY: release-check
release-check: $(call venv_of,$(MAIN))/.synced | $(UV)
	nice -n 10 $(call venv_of,$(MAIN))/bin/python -m tests.release_check --uv "$(UV)" --python "$(PYTHON)" \
		--constraints requirements/airflow-$(MAIN).txt --out build/release
