# The README's two commands: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat setup.cfg pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: test lint demo bench slow format clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" -q

# pytest exits 5 when it collects no test: no slow test is not a failure.
slow: $(STAMP)
	$(BIN)/python -m pytest -m slow -q -s; status=$$?; [ $$status -eq 0 ] || [ $$status -eq 5 ]

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict nous_tools
	$(BIN)/mypy --strict tests/typing

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

demo: $(STAMP)
	$(BIN)/python -m nous_tools demo

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/compare.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
