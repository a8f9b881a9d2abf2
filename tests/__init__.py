"""The tests, in folders that mirror the package (see CONTRIBUTING.md); the helpers they
serve or start are in ``support/``, the shared fixtures in ``conftest.py``."""
