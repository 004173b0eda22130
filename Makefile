# Two entry points for a fresh machine (python3.11 present): `make run` and `make test`.
# Both create .venv from the hash-checked lock file, then install ThinkFlow itself into it.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
TASK   ?= Which product has the highest total sales? Chart sales by product.

.PHONY: setup run test bench fuzz lock clean

$(BIN)/thinkflow: requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

setup: $(BIN)/thinkflow

run: setup
	$(BIN)/thinkflow-run agents.d/data_analyst.yaml "$(TASK)" $(RUN_ARGS)

# pytest exits 5 when it collected no test: an empty selection is a failure, never green by accident.
test: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$status

bench: setup
	$(BIN)/python bench/run.py

# 1 MB adversarial replies timed, then the property tests with a large example budget (FUZZ_EXAMPLES each).
FUZZ_EXAMPLES ?= 3000
fuzz: setup
	$(BIN)/python bench/bench_fuzz.py --examples $(FUZZ_EXAMPLES) $(FUZZ_ARGS)

# Regenerate the lock after changing dependencies in pyproject.toml.
lock:
	$(BIN)/pip-compile --generate-hashes --allow-unsafe --no-emit-index-url --no-emit-find-links \
		--extra memory,local,data,dev -o requirements.lock pyproject.toml

clean:
	rm -rf $(VENV) .thinkflow
