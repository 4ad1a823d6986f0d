"""A real Mastra server for the ``mastra`` target's tests and benchmark: ``tests/mastra/server.mjs`` on Node.

The npm packages pinned in ``tests/mastra/package.json`` and ``package-lock.json`` are installed with
``npm ci`` into a cache folder named after the lock file's hash (``$EVALCLI_TEST_CACHE``, else
``~/.cache/evalcli-tests``), once; ``make test`` does it before the tests, and ``ensure_installed`` does it
on demand. ``MastraServer`` starts the server on a free loopback port and stops it.

    python -m tests.mastra_server --install          # install the packages (make test runs this)
    python -m tests.mastra_server --port 4111        # serve weatherAgent and forgetfulAgent on 127.0.0.1:4111
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent / "mastra"
FILES = ("package.json", "package-lock.json", "server.mjs")
REQUIRE = "EVALCLI_REQUIRE_NODE"
"""Set (by ``.ci/run``) when Node must be there: the Mastra tests then fail instead of skipping without it."""


class Unavailable(Exception):
    """Node or npm is missing, or the packages cannot be installed."""


def node_missing() -> str | None:
    """Why the Mastra server cannot run here (``None`` when Node and npm are on PATH)."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not found on PATH (apt-get install nodejs npm)" if missing else None


def cache_folder() -> Path:
    """Where the packages are installed: one folder per lock file, so a changed pin installs afresh."""
    digest = hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()[:16]
    root = Path(os.environ.get("EVALCLI_TEST_CACHE") or Path.home() / ".cache" / "evalcli-tests")
    return root / f"mastra-{digest}"


def ensure_installed() -> Path:
    """The folder holding the server script and its ``node_modules`` (``npm ci`` the first time)."""
    why = node_missing()
    if why:
        raise Unavailable(why)
    folder = cache_folder()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # several test processes may ask at once
        if not (folder / "node_modules" / "@mastra" / "core").is_dir():
            staging = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=folder.parent))
            for name in ("package.json", "package-lock.json"):
                shutil.copy2(HERE / name, staging / name)
            done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=staging,
                                  capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise Unavailable(f"npm ci failed: {(done.stderr or done.stdout).strip()[-1500:]}")
            shutil.rmtree(folder, ignore_errors=True)
            staging.rename(folder)
        for name in FILES:  # the script may change without the lock changing
            shutil.copy2(HERE / name, folder / name)
    return folder


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
        why = node_missing()
        if why and not os.environ.get(REQUIRE):
            print(f"Mastra test server not installed: {why}")
            return
        print(f"Mastra test server packages in {ensure_installed()}")
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
