"""A real OTLP receiver for the export tests (docs/otel.md): Arize Phoenix's ``phoenix serve`` from its own virtual
environment (never the test's Python: Phoenix pins what evalcli's dependencies must not be held to), started on free
loopback ports in a temporary working directory; spans are read back through its REST API.

The environment is ``EVALCLI_PHOENIX_VENV`` (default ``~/.cache/evalcli-tests/phoenix-venv``), built with
``pip install arize-phoenix`` the first time (only when required). Without it the tests skip, unless
``EVALCLI_REQUIRE_PHOENIX`` is set (``.ci/run`` sets it): then they fail, so CI cannot pass without having talked to
a real receiver.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.reliability_helpers import SUBPROCESS_TIMEOUT

REQUIRE = "EVALCLI_REQUIRE_PHOENIX"
START_SECONDS = 300.0


class Unavailable(Exception):
    """Phoenix cannot be installed or started here."""


def venv() -> Path:
    return Path(os.environ.get("EVALCLI_PHOENIX_VENV") or Path.home() / ".cache" / "evalcli-tests" / "phoenix-venv")


def ensure_installed() -> Path:
    """The ``phoenix`` command of the cached environment, built the first time when ``EVALCLI_REQUIRE_PHOENIX`` is
    set (a developer's run without it skips rather than spend minutes installing)."""
    folder = venv()
    command = folder / "bin" / "phoenix"
    if command.exists():
        return command
    if not os.environ.get(REQUIRE):
        raise Unavailable(f"no Phoenix environment at {folder} (set {REQUIRE}=1 to build it, or EVALCLI_PHOENIX_VENV)")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, capture_output=True, timeout=300)
        subprocess.run([str(folder / "bin" / "pip"), "install", "-q", "arize-phoenix"], check=True,
                       capture_output=True, timeout=1800)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        raise Unavailable(f"pip install arize-phoenix into {folder} failed: {exc}") from exc
    return command


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PhoenixServer:
    """``phoenix serve`` on free 127.0.0.1 ports; ``url`` is its base URL. Use as a context manager."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PhoenixServer:
        command = ensure_installed()
        env = {**os.environ, "PHOENIX_WORKING_DIR": str(self.work), "PHOENIX_PORT": str(self.port),
               "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_HOST": "127.0.0.1",
               "PHOENIX_TELEMETRY_ENABLED": "false", "NO_PROXY": "127.0.0.1"}
        log = (self.work / "phoenix.log").open("wb")
        self.process = subprocess.Popen([str(command), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise Unavailable(f"phoenix serve exited: {(self.work / 'phoenix.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(1)
        self.__exit__()
        raise Unavailable(f"phoenix serve did not answer within {START_SECONDS:g} s")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def spans(self, project: str = "default", wanted: int = 1) -> dict[str, Any]:
        """The project's spans (``{"data": [...]}``, Phoenix's export), once at least ``wanted`` arrived."""
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT
        while True:
            with urllib.request.urlopen(f"{self.url}/v1/projects/{project}/spans?limit=1000", timeout=10) as answer:
                found: dict[str, Any] = json.loads(answer.read())
            if len(found.get("data") or ()) >= wanted or time.monotonic() > deadline:
                return found
            time.sleep(0.5)
