# codelm: `make demo` and `make test` work on a fresh machine with Python 3.11 and the package registries.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo_out

.PHONY: install test demo bench clean

install: $(STAMP)

# Re-installs only when pyproject.toml changes; otherwise a no-op.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

test: install
	$(BIN)/python -m pytest -q tests

# Until the data and training issues land, the demo runs what exists: the model sizes, and a short
# training run of the `mini` model on synthetic tokens (the real UL2 pipeline replaces it).
demo: install
	@mkdir -p $(DEMO_DIR)
	$(BIN)/python -m model.summary --size all
	$(BIN)/python bench/train_step.py --size mini --seq 256 --batch 8 --steps 10 --output $(DEMO_DIR)/train_step_mini.json
	@echo "demo figures written to $(DEMO_DIR)/"

bench: install
	$(BIN)/python bench/train_step.py --size small --seq 512 --batch 8

clean:
	rm -rf $(VENV) $(DEMO_DIR) *.egg-info
