"""A fork server for the tests' CLI runs: ``python -m evalcli`` without paying for Python's start and evalcli's
imports each time.

Most end-to-end tests run the real CLI in a subprocess, about 700 runs in ``make test``; each spent 0.4-0.6 s of
CPU starting Python and importing evalcli's run path before it read its dataset. Here one server per pytest
process imports that path once and forks a child per run. The child is a real separate process: its own working
directory, environment, ``sys.path`` and file descriptors (the caller's pipes for stdout and stderr, /dev/null as
stdin), exit code and signals. It runs ``evalcli`` as ``python -m evalcli`` would (``runpy`` as ``__main__``) and
ends through the interpreter's normal shutdown, so atexit handlers, flushing and exit codes are the same.

What is imported ahead is evalcli's own modules and the libraries they import at module level; never litellm,
scipy, the embedded model or a browser (tests assert those are imported only when needed, and importing them reads
settings a test may change). The "frameworks" profile, a second server used only by the test modules that run
framework agents, imports the Agents SDK, PydanticAI and LangGraph ahead too. ``tests.conftest.run_cli`` falls back
to a fresh interpreter when the run's environment changes something read at import (``PYTHON*``, locale, typer's
and rich's switches, the frameworks' own), adds to ``PYTHONPATH``, or its folder holds a module named like a package
imported ahead; when the server printed anything while importing; and always with ``EVALCLI_TEST_FRESH=1``.

Protocol: the client connects to the server's unix socket and sends one JSON request (args, cwd, env) with its
stdout and stderr pipes' write ends as SCM_RIGHTS fds; the server forks, replies ``pid N`` and later ``exit N``
(N as ``subprocess`` reports it: negative for a signal). The server is one thread (fork from a threaded process is
unsafe) and exits when the pipe from its parent closes.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys
from typing import Any

# read at import by the libraries imported ahead, or by the interpreter at start (measured: os.environ reads during
# import_ahead): a run that changes one of these gets a fresh interpreter
IMPORT_TIME_ENV_PREFIXES = ("PYTHON", "LC_", "LANG", "TZ", "TERMINAL_WIDTH", "_TYPER", "TYPER_", "GITHUB_ACTIONS",
                            "FORCE_COLOR", "PY_COLORS", "AIOHTTP_", "PYDANTIC_")

# evalcli modules that import a framework at module level (imported by their adapters only when a target needs them)
FRAMEWORK_ADAPTERS = ("evalcli.targets.agents_usage", "evalcli.targets.langgraph", "evalcli.targets.openai_agents",
                      "evalcli.targets.pydantic_ai")
# adapters of frameworks that are optional extras (perhaps not installed): never imported ahead
OPTIONAL_ADAPTERS = ("evalcli.targets.google_adk", "evalcli.targets.strands")
FRAMEWORK_PACKAGES = {"agents", "pydantic_ai", "langgraph", "langchain_core", "langchain_openai", "openai"}

# the "frameworks" profile, for the test modules that run framework agents (``tests.conftest.FRAMEWORK_MODULES``):
# the three frameworks too, 1.1-1.6 s of CPU each to import, and what they read at import
FRAMEWORKS = ("agents", "pydantic_ai", "pydantic_ai.models.openai", "pydantic_ai.providers.openai",
              "langgraph.graph", "langgraph.prebuilt", "langchain_openai", "langchain_core.messages",
              "langchain_core.tools", "langchain.agents", *FRAMEWORK_ADAPTERS)
FRAMEWORKS_ENV_PREFIXES = ("OPENAI_AGENTS_DONT_LOG_", "OPENAI_LOG", "OPENAI_API_TYPE", "OPENAI_API_VERSION",
                           "AZURE_OPENAI_", "LANGCHAIN_", "LANGSMITH_", "LANGGRAPH_", "OTEL_", "WEBSOCKETS_",
                           "SSLKEYLOGFILE", "DEFER_PYDANTIC_BUILD", "MULTIDICT_", "YARL_", "FROZENLIST_", "PROPCACHE_")
PROFILES = {"base": (), "frameworks": FRAMEWORKS}

# capture's OpenTelemetry side: imported only once a target imported OpenTelemetry (docs/otel.md), and whether it
# was imported is what a run reads
OTEL_MODULES = ("evalcli.otel.capture_sdk", "evalcli.otel.instrument", "evalcli.otel.endpoint")
# adapters whose frameworks no profile imports (smolagents) or that live in venvs of their own (tests/framework_venvs.py)
OTHER_ADAPTERS = ("evalcli.targets.llama_index", "evalcli.targets.smolagents", "evalcli.targets.crewai")
NOT_AHEAD = (*FRAMEWORK_ADAPTERS, *OPTIONAL_ADAPTERS, *OTHER_ADAPTERS, *OTEL_MODULES, "evalcli.__main__")  # left to the profile
NEVER_AHEAD = FRAMEWORK_PACKAGES | {"smolagents", "llama_index", "crewai", "litellm", "scipy", "llama_cpp", "playwright",
                                    "numpy", "pandas", "opentelemetry"}


def import_ahead(profile: str = "base") -> None:
    """Import evalcli's modules and what they import at module level, except the heavy optional ones (and for the
    "frameworks" profile, the frameworks too)."""
    import importlib
    import pkgutil

    import evalcli
    from evalcli.store.migrations import sqlite_utils_module

    for info in pkgutil.walk_packages(evalcli.__path__, "evalcli."):
        if not info.name.startswith(NOT_AHEAD):
            importlib.import_module(info.name)
    sqlite_utils_module()
    for name in PROFILES[profile]:
        importlib.import_module(name)
    never = NEVER_AHEAD - (FRAMEWORK_PACKAGES | {"opentelemetry"} if profile == "frameworks" else set())
    leaked = {name.split(".")[0] for name in sys.modules} & never
    if leaked:
        raise SystemExit(f"cli_server: importing evalcli ahead also imported {sorted(leaked)}; add the module that "
                         "did to NOT_AHEAD")


class Server:
    def __init__(self, path: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
        self.open: dict[int, socket.socket] = {}  # fd -> a client's connection
        self.pidfds: set[int] = set()  # the children running

    def serve(self) -> dict[str, Any] | None:
        """Serve until the parent goes away (returns None), or return a request in a newly forked child."""
        while True:
            for key, _ in self.selector.select():
                kind = key.data
                if kind == "parent":
                    if not os.read(sys.stdin.fileno(), 4096):
                        return None
                elif kind == "accept":
                    conn, _ = self.listener.accept()
                    self.selector.register(conn, selectors.EVENT_READ, "request")
                    self.open[conn.fileno()] = conn
                elif kind == "request":
                    request = self.take_request(key.fileobj)  # type: ignore[arg-type]
                    if request is not None:
                        return request
                else:
                    self.reap(kind)

    def take_request(self, conn: socket.socket) -> dict[str, Any] | None:
        self.selector.unregister(conn)
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 2)
        while data and not data.endswith(b"\n"):  # the client ends its request with a newline
            more = conn.recv(1 << 16)
            if not more:
                break
            data += more
        if not data.endswith(b"\n") or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            self.open.pop(conn.fileno(), None)
            conn.close()
            return None
        request = json.loads(data)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.become_child(fds)
            return request  # type: ignore[no-any-return]
        for fd in fds:
            os.close(fd)
        conn.sendall(f"pid {pid}\n".encode())
        pidfd = os.pidfd_open(pid)
        self.pidfds.add(pidfd)
        self.selector.register(pidfd, selectors.EVENT_READ, (pidfd, conn, pid))
        return None

    def reap(self, child: tuple[int, socket.socket, int]) -> None:
        pidfd, conn, pid = child
        self.selector.unregister(pidfd)
        self.pidfds.discard(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        try:
            conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
            pass  # the client went away (a timeout): nothing to tell
        self.open.pop(conn.fileno(), None)
        conn.close()

    def become_child(self, fds: list[int]) -> None:
        """In the forked child: drop every server fd, take the caller's pipes as stdout and stderr."""
        self.selector.close()
        self.listener.close()
        for conn in self.open.values():
            conn.close()
        for pidfd in self.pidfds:
            os.close(pidfd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)


def become_run(request: dict[str, Any], base_path: list[str]) -> None:
    """Make this process what ``python -m evalcli ARGS`` started in CWD with ENV would be, then run it."""
    import importlib
    import runpy

    for name in [name for name in sys.modules if name == "tests" or name.startswith("tests.")]:
        del sys.modules[name]  # this server's own package: a run's `tests` is whatever its sys.path finds
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    extra = [entry for entry in request["env"].get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:] = [os.getcwd(), *extra, *base_path]
    importlib.invalidate_caches()
    sys.argv = ["evalcli", *request["args"]]
    runpy.run_module("evalcli", run_name="__main__", alter_sys=True)


class Client:
    """One pytest process's connection to its server, started on the first run and stopped with the process."""

    def __init__(self, env: dict[str, str], cwd: str, profile: str = "base") -> None:
        import shutil
        import subprocess
        import tempfile

        self.env = env
        self.prefixes = IMPORT_TIME_ENV_PREFIXES + (FRAMEWORKS_ENV_PREFIXES if profile == "frameworks" else ())
        self.folder = tempfile.mkdtemp(prefix="evalcli-cli-")
        self.path = os.path.join(self.folder, "s")
        self.log = os.path.join(self.folder, "server.log")
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "tests.cli_server", self.path, profile], cwd=cwd,
                                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        with open(self.log, encoding="utf-8", errors="replace") as log:
            said = log.read()
        if not ready.startswith(b"ready ") or said:
            self.process.kill()
            shutil.rmtree(self.folder, ignore_errors=True)
            raise RuntimeError(f"the CLI fork server did not start cleanly: {said.strip() or ready!r}")
        self.ahead: set[str] = set(json.loads(ready[len(b"ready "):]))  # the packages imported ahead
        self.repo = cwd

    def can_run(self, env: dict[str, str], cwd: str) -> bool:
        """Whether a run with this environment in this folder sees what a fresh interpreter would (see the module's
        docstring): nothing read at import changed, and nothing in the folder would shadow a package imported
        ahead (a fresh ``python -m`` puts the folder first on ``sys.path``)."""
        if self.process.poll() is not None or env.get("EVALCLI_TEST_FRESH") == "1":
            return False
        try:
            local = {entry.removesuffix(".py") for entry in os.listdir(cwd)}
        except OSError:
            return False
        if local & self.ahead - ({"evalcli"} if os.path.samefile(cwd, self.repo) else set()):
            return False
        if env.get("PYTHONPATH") != self.env.get("PYTHONPATH"):
            return False
        keys = {key for key in (*env, *self.env) if key.startswith(self.prefixes)}
        return all(env.get(key) == self.env.get(key) for key in keys)

    def run(self, args: list[str], cwd: str, env: dict[str, str], timeout: float) -> tuple[int, str, str]:
        """Run ``python -m evalcli ARGS`` in a forked child; stdout and stderr as ``subprocess.run(text=True)``
        gives them. Raises ``subprocess.TimeoutExpired`` (after killing the child) as ``subprocess.run`` does."""
        import locale
        import signal
        import subprocess
        import time

        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            request = json.dumps({"args": args, "cwd": cwd, "env": env}).encode() + b"\n"
            sent = socket.send_fds(conn, [request], [out_w, err_w])
            conn.sendall(request[sent:])
        finally:
            os.close(out_w)
            os.close(err_w)
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: [], conn.fileno(): []}
        selector = selectors.DefaultSelector()
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        pid = code = None
        try:
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    if pid is not None:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    raise subprocess.TimeoutExpired([sys.executable, "-m", "evalcli", *args], timeout,
                                                    b"".join(chunks[out_r]), b"".join(chunks[err_r]))
                for key, _ in selector.select(min(left, 1.0)):
                    fd = key.fd
                    data = os.read(fd, 65536)
                    if not data:
                        selector.unregister(fd)
                        continue
                    chunks[fd].append(data)
                    if fd == conn.fileno():
                        for line in b"".join(chunks[fd]).decode().splitlines():
                            word, number = line.split()
                            if word == "pid":
                                pid = int(number)
                            else:
                                code = int(number)
        finally:
            selector.close()
            os.close(out_r)
            os.close(err_r)
            conn.close()
        if code is None:
            raise RuntimeError("the CLI fork server went away during a run")
        encoding = locale.getpreferredencoding(False)

        def text(fd: int) -> str:
            return b"".join(chunks[fd]).decode(encoding).replace("\r\n", "\n").replace("\r", "\n")
        return code, text(out_r), text(err_r)

    def close(self) -> None:
        import shutil
        import subprocess

        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the server's signal to end
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def main() -> None:
    path, profile = sys.argv[1], sys.argv[2]
    own = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    base_path = sys.path[1 + len(own):]  # the interpreter's own: stdlib, site-packages and their .pth entries
    import_ahead(profile)
    server = Server(path)
    ahead = sorted({name.split(".")[0] for name in sys.modules} - set(sys.stdlib_module_names) - {"__main__", "tests"})
    print("ready " + json.dumps(ahead), flush=True)
    request = server.serve()
    if request is None:
        return
    become_run(request, base_path)  # only in a forked child: the server's loop returned its request


if __name__ == "__main__":
    main()
