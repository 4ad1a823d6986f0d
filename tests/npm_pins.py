"""npm packages the tests pin (a folder with ``package.json`` and ``package-lock.json``), installed with ``npm ci``
into a cache folder named after the lock file's hash (``$EVALCLI_TEST_CACHE``, else ``~/.cache/evalcli-tests``),
once: ``make test`` installs them before the tests (``python -m tests.mastra_server --install``, ``python -m
tests.yaml_suite --install``), so the tests themselves never reach the network.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

REQUIRE = "EVALCLI_REQUIRE_NODE"
"""Set (by ``.ci/run``) when Node must be there: tests needing these packages then fail instead of skipping."""


class Unavailable(Exception):
    """Node or npm is missing, or the packages cannot be installed."""


def node_missing() -> str | None:
    """Why npm packages cannot be installed or run here (``None`` when Node and npm are on PATH)."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not found on PATH (apt-get install nodejs npm)" if missing else None


def cache_folder(pins: Path, name: str) -> Path:
    """Where the packages pinned in ``pins`` are installed: one folder per lock file, so a changed pin installs
    afresh."""
    digest = hashlib.sha256((pins / "package-lock.json").read_bytes()).hexdigest()[:16]
    root = Path(os.environ.get("EVALCLI_TEST_CACHE") or Path.home() / ".cache" / "evalcli-tests")
    return root / f"{name}-{digest}"


def ensure_installed(pins: Path, name: str, marker: str, files: tuple[str, ...] = ()) -> Path:
    """The folder holding ``pins``' packages in ``node_modules`` (``npm ci`` the first time, until ``marker``, a path
    inside ``node_modules``, exists) and a fresh copy of ``files`` from ``pins``."""
    why = node_missing()
    if why:
        raise Unavailable(why)
    folder = cache_folder(pins, name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # several test processes may ask at once
        if not (folder / "node_modules" / marker).exists():
            staging = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=folder.parent))
            for pinned in ("package.json", "package-lock.json"):
                shutil.copy2(pins / pinned, staging / pinned)
            done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=staging,
                                  capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise Unavailable(f"npm ci failed: {(done.stderr or done.stdout).strip()[-1500:]}")
            shutil.rmtree(folder, ignore_errors=True)
            staging.rename(folder)
        for copied in files:  # a script may change without the lock changing
            shutil.copy2(pins / copied, folder / copied)
    return folder


def install_command(pins: Path, name: str, marker: str, what: str, files: tuple[str, ...] = ()) -> None:
    """``--install``: install the packages, or say why not (an error when ``REQUIRE`` is set)."""
    why = node_missing()
    if why and not os.environ.get(REQUIRE):
        print(f"{what} not installed: {why}")
        return
    print(f"{what} packages in {ensure_installed(pins, name, marker, files)}")
