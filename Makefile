# The two README commands: `make demo` (main job) and `make test` (suite). Both bootstrap the venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test soak bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/advisor demo

# pytest exit code 5 (no tests collected) is turned into a failure on purpose.
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not soak"; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$rc

soak: $(STAMP)
	$(BIN)/python -m pytest -q -m soak; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$rc

clean:
	rm -rf $(VENV) .advisor
