# The two README commands: `make demo` (main job) and `make test` (suite). Both bootstrap the venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test soak bench baseline clean

# Spark packages (Delta Lake; the tests' MiniDFSCluster and S3 connector) are resolved from Maven Central
# once into ~/.cache/advisor/spark-packages.
# What the installers print goes to $(VENV)/install.log, shown only when a step fails.
$(STAMP): pyproject.toml advisor/engine/packages.py
	@echo "installing into $(VENV) (first run only; log: $(VENV)/install.log)"
	@test -d $(VENV) || $(PY) -m venv $(VENV)
	@( $(BIN)/pip install -q --upgrade pip && \
	   $(BIN)/pip install -q -e '.[dev]' && \
	   $(BIN)/python -m advisor.engine.session && \
	   $(BIN)/python -c "from advisor.engine import packages as p; p.extra_jars('minidfs'); p.extra_jars('s3a')" \
	 ) > $(VENV)/install.log 2>&1 || { tail -n 40 $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

demo: $(STAMP)
	@$(BIN)/advisor demo

# pytest exit code 5 (no tests collected) is turned into a failure on purpose.  Two workers, each
# with its own SparkSession, take whole test files (``--dist loadfile``: module fixtures stay shared).
test: $(STAMP)
	scripts/ensure-chromium
	$(BIN)/python -m pytest -q -m "not soak" -n 2 --dist loadfile; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$rc

soak: $(STAMP)
	$(BIN)/python -m pytest -q -m soak; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$rc

# Regenerate the committed gate baseline after an intended change to the engine or workloads/ci.yaml.
baseline: $(STAMP)
	$(BIN)/advisor --warehouse .advisor replay workloads/ci.yaml --out .advisor/runs/ci-baseline --fresh --no-report
	mkdir -p workloads/baselines/ci
	cp .advisor/runs/ci-baseline/run.json workloads/baselines/ci/run.json

clean:
	rm -rf $(VENV) .advisor
