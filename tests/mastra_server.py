"""A real Mastra server for the ``mastra`` target's tests and benchmark: ``tests/mastra/server.mjs`` on Node.

The npm packages pinned in ``tests/mastra/package.json`` and ``package-lock.json`` are installed by
``tests/npm_pins.py`` (``npm ci`` into a cache folder named after the lock file's hash), once; ``make test`` does
it before the tests, and ``ensure_installed`` does it on demand. ``MastraServer`` starts the server on a free
loopback port and stops it.

    python -m tests.mastra_server --install          # install the packages (make test runs this)
    python -m tests.mastra_server --port 4111        # serve weatherAgent and forgetfulAgent on 127.0.0.1:4111
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.npm_pins import REQUIRE, Unavailable, install_command, node_missing
from tests.npm_pins import ensure_installed as _ensure_installed

HERE = Path(__file__).resolve().parent / "mastra"
FILES = ("package.json", "package-lock.json", "server.mjs")
__all__ = ["REQUIRE", "MastraServer", "Unavailable", "ensure_installed", "node_missing"]


def ensure_installed() -> Path:
    """The folder holding the server script and its ``node_modules`` (``npm ci`` the first time)."""
    return _ensure_installed(HERE, "mastra", "@mastra/core", FILES)


class MastraServer:
    """``node server.mjs`` on a free 127.0.0.1 port; ``url`` is its base URL. Use as a context manager."""

    def __init__(self, latency: float = 0.0, port: int = 0) -> None:
        self.latency = latency
        self.port = port
        self.url = ""
        self.process: subprocess.Popen[str] | None = None
        self.stderr: list[str] = []

    def __enter__(self) -> MastraServer:
        folder = ensure_installed()
        env = {**os.environ, "MASTRA_TELEMETRY_DISABLED": "1", "NODE_NO_WARNINGS": "1"}
        self.process = subprocess.Popen(["node", str(folder / "server.mjs"), "--port", str(self.port),
                                         "--latency", str(self.latency)], cwd=folder, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None and self.process.stderr is not None
        threading.Thread(target=self._drain, args=(self.process.stderr,), daemon=True).start()
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.__exit__(None, None, None)
            raise RuntimeError(f"the Mastra server did not start: {line!r} {''.join(self.stderr)[-2000:]}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        return self

    def _drain(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.stderr.append(line)
            del self.stderr[:-200]

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    @property
    def cpu_seconds(self) -> float:
        """The server process's CPU time so far (user + system), from /proc."""
        assert self.process is not None
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--install", action="store_true", help="install the npm packages, then exit")
    parser.add_argument("--port", type=int, default=4111)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds the mock model waits per call")
    args = parser.parse_args()
    if args.install:
        install_command(HERE, "mastra", "@mastra/core", "Mastra test server", FILES)
        return
    with MastraServer(args.latency, args.port) as server:
        print(f"Mastra server on {server.url} (agents: weatherAgent, forgetfulAgent); Ctrl-C stops it", flush=True)
        try:
            assert server.process is not None
            server.process.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    sys.exit(main())
