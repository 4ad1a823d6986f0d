"""Virtual environments of their own for the frameworks whose pins clash with the suite's (docs/development.md):
llama-index-llms-openai pins ``openai<3``, so it cannot share the test Python. Each extra (``evalcli[llama-index]``)
is installed with pip into a venv in a cache folder named after
the extra and a hash of its requirements (``$EVALCLI_TEST_CACHE``, else ``~/.cache/evalcli-tests``), once; the tests
run the CLI with that venv's Python and the working tree on ``PYTHONPATH``.

``make test`` builds them before the tests (``python -m tests.framework_venvs --install``). Without a network a venv
cannot be built and its tests skip, saying why, unless ``EVALCLI_REQUIRE_VENVS`` is set (``.ci/run`` sets it): then
they fail.

    python -m tests.framework_venvs --install            # build every framework venv (make test runs this)
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REQUIRE = "EVALCLI_REQUIRE_VENVS"
"""Set (by ``.ci/run``) when the framework venvs must be built: their tests then fail instead of skipping."""
EXTRAS = ("llama-index", "crewai", "strands")
"""The extras that get a venv (``make test`` builds each)."""


class Unavailable(Exception):
    """The venv cannot be built (no network, a failed install)."""


def folder_of(extra: str) -> Path:
    """One folder per set of requirements (evalcli's and the extra's): another change to pyproject.toml reuses it."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = json.dumps([project["dependencies"], project["optional-dependencies"][extra]])
    digest = hashlib.sha256(wanted.encode()).hexdigest()[:16]
    root = Path(os.environ.get("EVALCLI_TEST_CACHE") or Path.home() / ".cache" / "evalcli-tests")
    return root / f"venv-{extra}-{digest}"


def ensure_venv(extra: str) -> Path:
    """The Python of the venv holding ``evalcli[extra]`` (built the first time: ``pip install '.[extra]'``)."""
    folder = folder_of(extra)
    python = folder / "bin" / "python"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # several test processes may ask at once
        if (folder / "ready").exists():
            return python
        staging = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=folder.parent))
        try:
            subprocess.run([sys.executable, "-m", "venv", str(staging)], check=True, capture_output=True, timeout=300)
            source = Path(tempfile.mkdtemp(prefix="evalcli-src-"))  # a copy: pip builds in it, never in the checkout
            try:
                shutil.copytree(REPO, source / "evalcli", ignore=shutil.ignore_patterns(
                    ".git", "site", "*.db", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "node_modules"))
                done = subprocess.run([str(staging / "bin" / "python"), "-m", "pip", "install", "-q",
                                       "--disable-pip-version-check", f"{source / 'evalcli'}[{extra}]"],
                                      capture_output=True, text=True, timeout=1800)
            finally:
                shutil.rmtree(source, ignore_errors=True)
            if done.returncode != 0:
                raise Unavailable(f"pip install 'evalcli[{extra}]' failed: {(done.stderr or done.stdout).strip()[-1500:]}")
            (staging / "ready").write_text(extra)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
        # a venv's scripts name its folder: the renamed venv is run as `bin/python -m ...`, which needs none of them
    return python


def venv_or_skip(extra: str) -> Path:
    """For a test fixture: the venv's Python; a skip saying why it cannot be built (a failure under ``REQUIRE``)."""
    try:
        return ensure_venv(extra)
    except (Unavailable, subprocess.SubprocessError, OSError) as exc:
        if os.environ.get(REQUIRE):
            raise
        pytest.skip(f"no venv with evalcli[{extra}]: {exc}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--install", action="store_true", help="build every framework venv")
    if not parser.parse_args().install:
        parser.print_help()
        return
    # built side by side: each is mostly pip waiting on downloads and unpacking, and each has a folder of its own
    with ThreadPoolExecutor(max_workers=len(EXTRAS)) as pool:
        built = {extra: pool.submit(ensure_venv, extra) for extra in EXTRAS}
    for extra, future in built.items():
        try:
            print(f"evalcli[{extra}] in {future.result().parent.parent}")
        except Unavailable as exc:
            if os.environ.get(REQUIRE):
                raise SystemExit(str(exc)) from None
            print(f"evalcli[{extra}] not installed: {exc}")


if __name__ == "__main__":
    main()
