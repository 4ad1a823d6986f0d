"""docs/secrets.md as an attacker tests it: distinct secrets planted in every placement (URL userinfo and the Basic
credentials built from it, a short secret header, a cookie, secret query parameters, an interpolated and a declared
environment value), an http service that echoes every request header, its path and its body back (in a 500 and in a
200), every command and output run, and every byte they leave scanned for every secret, raw, base64- and
URL-encoded, in any letter case. The non-secret header values stay whole where they are quoted."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from tests.pytest_project import pytest_env
from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env, run_cli

PLANTED = {
    "user": "alice", "password": "pw12", "api key header": "s3cr3t", "cookie": "ck00kieVal9",
    "signature query": "SIGVAL99zz", "credential query": "AKIACRED55", "security token query": "STSTOK777q",
    "interpolated token": "envTok-4455-qq", "declared": "tenant-88x1",
    "mistyped target password": "hunter2pw", "mistyped target query key": "SECRETQ123",
}
MISTYPED = "http:ftp://bob:hunter2pw@host/x?api_key=SECRETQ123"


class Echo(BaseHTTPRequestHandler):
    """Answers every POST with what it was sent: a 500 when the input says 'fail', else a 200 whose text is it."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        seen = {"headers": dict(self.headers), "path": self.path, "body": body}
        failing = "fail" in body
        data = json.dumps(seen if failing else {"text": f"hello, you sent {json.dumps(seen)}"}).encode()
        self.send_response(500 if failing else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def dataset(port: int, *, gate: str = "hello") -> str:
    url = (f"http://alice:pw12@127.0.0.1:{port}/chat?X-Amz-Signature=SIGVAL99zz&X-Amz-Credential=AKIACRED55"
           f"&X-Amz-Security-Token=STSTOK777q&X-Amz-Date=20260101&v=2")
    return f"""
secrets: [TENANT_ID]
target:
  http:
    url: "{url}"
    headers:
      X-Api-Key: s3cr3t
      X-Auth-Token: "${{SVC_TOKEN}}"
      Cookie: sid=ck00kieVal9
      X-Api-Version: "2"
      Accept: application/json
    body: {{input: "{{{{ input }}}}", tenant: "${{TENANT_ID}}"}}
gates:
  - includes: {gate}
data:
  - {{id: echoed, input: hi there}}
  - {{id: failing, input: please fail}}
"""


def forms(secret: str) -> set[bytes]:
    """Every way the secret could be written, lower-cased (the scan is case-insensitive)."""
    raw = secret.encode()
    written = {secret, quote(secret, safe=""), quote_plus(secret), base64.b64encode(raw).decode(),
               base64.urlsafe_b64encode(raw).decode().rstrip("=")}
    return {w.lower().encode() for w in written}


def leaks(outputs: dict[str, bytes]) -> list[str]:
    found = []
    pairs = {**PLANTED, "userinfo": "alice:pw12", "mistyped userinfo": "bob:hunter2pw"}
    for where, data in outputs.items():
        lowered = data.lower()
        found += [f"{what} ({form.decode()!r}) in {where}" for what, secret in pairs.items()
                  for form in forms(secret) if form in lowered]
    return found


ENV = {"SVC_TOKEN": "envTok-4455-qq", "TENANT_ID": "tenant-88x1", "EVALCLI_LLM_RETRIES": "0"}


def test_no_planted_secret_leaves_evalcli_by_any_door(echo: int, tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(dataset(echo))
    env = cli_env(**ENV)
    outputs: dict[str, bytes] = {}

    def cli(name: str, *args: str) -> subprocess.CompletedProcess[str]:
        done = run_cli(list(args), tmp_path, env)
        outputs[f"{name}: stdout"] = done.stdout.encode()
        outputs[f"{name}: stderr"] = done.stderr.encode()
        return done

    first = cli("run", "run", "d.yaml", "--json", "out.json", "--html", "run.html", "--markdown", "run.md",
                "--junit", "junit.xml", "--verbose")
    assert first.returncode == 4, first.stderr
    wal = tmp_path / "evalcli.db-wal"
    outputs["evalcli.db-wal after the run"] = wal.read_bytes() if wal.exists() else b""
    result = json.loads((tmp_path / "out.json").read_text())
    run_id = result["run_id"]
    # the service really saw (and echoed) the secrets: redaction, not luck, keeps them out
    echoed = result["items"][0]["turns"][0]["output"][0]["content"]
    assert "[redacted]" in echoed and '"X-Api-Version": "2"' in echoed
    second = cli("run --json -", "run", "d.yaml", "--json", "-")
    assert second.returncode == 4, second.stderr
    second_id = json.loads(second.stdout)["run_id"]
    for name, args in {
        "show": ("show", run_id), "show failing": ("show", run_id, "failing"), "show echoed": ("show", run_id, "echoed"),
        "show --json": ("show", run_id, "--json", "-"), "runs": ("runs",),
        "report": ("report", run_id, "--html", "report.html", "--baseline", second_id),
        "compare": ("compare", run_id, second_id, "--html", "compare.html"),
        "diff": ("diff", run_id, second_id), "mistyped --target": ("run", "d.yaml", "--target", MISTYPED),
        "mistyped --target --debug": ("run", "d.yaml", "--target", MISTYPED, "--debug"),
        "validate": ("validate", "d.yaml"),
    }.items():
        cli(name, *args)
    assert "[redacted]" in outputs["mistyped --target: stderr"].decode(), outputs["mistyped --target: stderr"]

    # the same dataset as pytest tests: the failing conversation's text and pytest's JUnit XML
    tests = tmp_path / "as_pytest"
    tests.mkdir()
    (tests / "d.yaml").write_text(dataset(echo))
    played = subprocess.run([sys.executable, "-m", "pytest", "-p", "evalcli.pytest_plugin", "d.yaml", "-rA", "-vv",
                             "--junitxml=pytest.xml"], cwd=tests, env=pytest_env(**ENV), capture_output=True,
                            text=True, timeout=SUBPROCESS_TIMEOUT)
    assert played.returncode == 1, played.stdout + played.stderr
    assert "POST http://[redacted]@127.0.0.1" in played.stdout
    outputs["pytest"] = (played.stdout + played.stderr).encode()

    for db in (tmp_path / "evalcli.db", tests / "evalcli.db"):
        sidecar = Path(f"{db}-wal")
        outputs[f"{sidecar.name} ({db.parent.name})"] = sidecar.read_bytes() if sidecar.exists() else b""
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    for path in [*tmp_path.rglob("*")]:
        if path.is_file() and not path.name.endswith(".yaml") and "__pycache__" not in path.parts:
            outputs[str(path.relative_to(tmp_path))] = path.read_bytes()
    assert {"out.json", "run.html", "run.md", "junit.xml", "report.html", "compare.html", "evalcli.db",
            "as_pytest/pytest.xml", "as_pytest/evalcli.db"} <= set(outputs)
    assert not leaks(outputs), "\n".join(leaks(outputs))


def test_the_values_of_other_headers_are_quoted_whole(echo: int, tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text(dataset(echo))
    done = run_cli(["run", "d.yaml", "--json", "out.json"], tmp_path, cli_env(**ENV))
    assert done.returncode == 4, done.stderr
    items = {item["id"]: item for item in json.loads((tmp_path / "out.json").read_text())["items"]}
    error = items["failing"]["error"]
    reply = items["echoed"]["turns"][0]["output"][0]["content"]
    for text in (error, reply):
        assert f'"Host": "127.0.0.1:{echo}"' in text, text
        assert '"X-Api-Version": "2"' in text and '"Accept": "application/json"' in text, text
        assert '"Content-Type": "application/json"' in text, text
        assert '"X-Api-Key": "[redacted]"' in text and '"Cookie": "[redacted]"' in text, text
        assert "X-Amz-Date=20260101&v=2" in text and "X-Amz-Signature=[redacted]" in text, text
    assert '"Authorization": "Basic [redacted]"' in reply, reply  # the error's quote stops before it (300 characters)
    assert error.startswith("turn 0: POST http://[redacted]@127.0.0.1:"), error
