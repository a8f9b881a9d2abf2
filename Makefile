# The README's two commands: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CONFIG_SUM := $(shell cat setup.cfg pyproject.toml | cksum | cut -d' ' -f1)
STAMP := $(VENV)/.installed-$(CONFIG_SUM)
DOCS_STAMP := $(VENV)/.docs-$(CONFIG_SUM)
RELEASE_STAMP := $(VENV)/.release-$(CONFIG_SUM)
# `make demo` has a venv of its own holding the package and its dependencies only.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed-$(CONFIG_SUM)
SOURCES := $(shell find nous_tools -name '*.py' -o -name py.typed)

.PHONY: venv test lint demo bench bench-pages slow format docs docs-serve dist quickstart-matrix clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# The development venv alone (make test makes it too).
venv: $(STAMP)

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
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

$(DEMO_VENV)/bin/python:
	$(PYTHON) -m venv $(DEMO_VENV)

# `pip install .` (not editable): rebuilt when a source file changes.
$(DEMO_STAMP): $(DEMO_VENV)/bin/python setup.cfg pyproject.toml $(SOURCES)
	$(DEMO_VENV)/bin/python -m pip install --quiet .
	rm -f $(DEMO_VENV)/.installed-*
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/nous-tools demo

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	rm -f $(VENV)/.docs-*
	touch $(DOCS_STAMP)

# The documentation site, into build/site; any warning fails the build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

docs-serve: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

$(RELEASE_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[release]'
	rm -f $(VENV)/.release-*
	touch $(RELEASE_STAMP)

# The sdist, and the wheel built from it, checked by twine.
dist: $(RELEASE_STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# The wheel installed into a fresh venv per Python (3.10 to 3.13, those installed
# here), running the README's quick start from outside the source tree.
quickstart-matrix: dist
	.ci/wheel-quickstart

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/compare.py

# Every benchmark three times (about 20 minutes): benchmarks/results.json, the
# pages (RESULTS.md, docs/benchmarks.md) and the chart docs/assets/benchmarks.png.
bench-pages: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/record.py

clean:
	rm -rf $(VENV) $(DEMO_VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
