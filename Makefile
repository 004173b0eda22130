# Two entry points for a fresh machine (python3.11 present): `make run` and `make test`.
# `make run` builds .venv from requirements.lock (the main job: base + embedded model + data tools, no torch);
# `make test` builds .venv-test from requirements-dev.lock (every extra: memory with torch, mcp, serve, ray, otel,
# dev). Both locks are hash-checked and hold only releases PyPI serves. Each venv first gets the pip of
# requirements-pip.lock (venv's own pip 23.2 mis-resolves extras under --require-hashes), then ThinkFlow itself.
# pip keeps no cache (--no-cache-dir): PyPI's torch brings its CUDA libraries (the test venv is 8.2 GB, .venv 1.8 GB),
# and a cached copy of every wheel would add several GB to the ~13 GB a fresh machine needs free (measured for .ci/run).
PYTHON   ?= python3.11
VENV     ?= .venv
TEST_VENV ?= .venv-test
BIN      := $(VENV)/bin
TEST_BIN := $(TEST_VENV)/bin
TASK     ?= Which product has the highest total sales? Chart sales by product.
PIP_INSTALL = python -m pip install --quiet --disable-pip-version-check --no-cache-dir

.PHONY: setup setup-test run test bench fuzz lock clean

$(BIN)/thinkflow: requirements-pip.lock requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/$(PIP_INSTALL) --require-hashes -r requirements-pip.lock
	$(BIN)/$(PIP_INSTALL) --require-hashes -r requirements.lock
	$(BIN)/$(PIP_INSTALL) --no-deps --no-build-isolation -e .
	touch $@

$(TEST_BIN)/thinkflow: requirements-pip.lock requirements-dev.lock pyproject.toml
	test -x $(TEST_BIN)/python || $(PYTHON) -m venv $(TEST_VENV)
	$(TEST_BIN)/$(PIP_INSTALL) --require-hashes -r requirements-pip.lock
	$(TEST_BIN)/$(PIP_INSTALL) --require-hashes -r requirements-dev.lock
	$(TEST_BIN)/$(PIP_INSTALL) --no-deps --no-build-isolation -e .
	touch $@

setup: $(BIN)/thinkflow

setup-test: $(TEST_BIN)/thinkflow

run: setup
	$(BIN)/thinkflow-run agents.d/data_analyst.yaml "$(TASK)" $(RUN_ARGS)

# pytest exits 5 when it collected no test: an empty selection is a failure, never green by accident.
test: setup-test
	$(TEST_BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$status

bench: setup-test
	$(TEST_BIN)/python bench/run.py

# 1 MB adversarial replies timed, then the property tests with a large example budget (FUZZ_EXAMPLES each).
FUZZ_EXAMPLES ?= 3000
fuzz: setup-test
	$(TEST_BIN)/python bench/bench_fuzz.py --examples $(FUZZ_EXAMPLES) $(FUZZ_ARGS)

# Regenerate the locks after changing dependencies in pyproject.toml. pip runs with no configuration file and
# no local wheel folder (PIP_CONFIG_FILE=/dev/null), so every pin is a release PyPI itself serves; pins already
# in a lock are kept unless `make lock UPGRADE=--upgrade`.
PIP_COMPILE_ANY = env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null $(TEST_BIN)/pip-compile --quiet --generate-hashes \
	--allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links $(UPGRADE)
PIP_COMPILE = $(PIP_COMPILE_ANY) --build-deps-for editable
lock: setup-test
	$(PIP_COMPILE) --extra local,data -o requirements.lock pyproject.toml
	$(PIP_COMPILE) --all-extras -o requirements-dev.lock pyproject.toml
	$(PIP_COMPILE_ANY) -o requirements-pip.lock requirements-pip.in

clean:
	rm -rf $(VENV) $(TEST_VENV) .thinkflow
