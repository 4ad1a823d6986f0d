"""A secret base64-encoded inside a longer payload (``base64("apiuser:" + token)``, a Basic credential, a JWT-like blob)
is redacted at every byte alignment, in both alphabets, with or without padding (docs/reliability.md, "Secrets"):
no decoding of anything evalcli writes gives the secret back."""

from __future__ import annotations

import base64
import binascii
import re
import sqlite3
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from evalcli.secrets import Redactor
from tests.reliability_helpers import cli_env, run_cli, write_project

B64_RUN = re.compile(r"[A-Za-z0-9+/_\-]+={0,2}")


def decodings(text: str) -> list[bytes]:
    """Every way a base64 reader could decode a stretch of ``text``: each run of base64 characters, from each of its
    first four positions, in both alphabets."""
    found = []
    for run in B64_RUN.findall(text):
        standard = run.rstrip("=").replace("-", "+").replace("_", "/")
        for start in range(4):
            piece = standard[start:]
            piece = piece[:-1] if len(piece) % 4 == 1 else piece + "=" * (-len(piece) % 4)
            try:
                found.append(base64.b64decode(piece, validate=True))
            except (binascii.Error, ValueError):
                continue
    return found


def reveals(text: str, secret: str) -> bool:
    return secret in text or any(secret.encode() in decoded for decoded in decodings(text))


SECRETS = ["tok-planted-0123456789abcdef", "884422991", "pässwörd-5", "s3cr3t+/?~~"]


@given(st.sampled_from(SECRETS), st.binary(max_size=11), st.binary(max_size=11), st.booleans(), st.booleans(),
       st.text("abc XYZ:.", max_size=6), st.text("abc XYZ:.", max_size=6))
@settings(max_examples=400, deadline=None)
@example("tok-planted-0123456789abcdef", b"apiuser:", b"", False, True, "Basic ", "")
def test_no_secret_survives_inside_a_base64_payload(secret: str, prefix: bytes, suffix: bytes, urlsafe: bool,
                                                    padded: bool, before: str, after: str) -> None:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    payload = encode(prefix + secret.encode() + suffix).decode()
    text = before + (payload if padded else payload.rstrip("=")) + after
    assert reveals(text, secret)  # the planted secret is there to be found
    done = Redactor([secret], env={})(text)
    assert not reveals(done, secret), (text, done)
    assert done.startswith(before[:1]) and done.endswith(after[-1:])  # the words around it stay


AGENT = """
import base64, os

def reply(input, **options):
    token = os.environ["SVC_TOKEN"]
    basic = base64.b64encode(("apiuser:" + token).encode()).decode()
    shifted = base64.urlsafe_b64encode(("ab:" + token + "?x").encode()).decode().rstrip("=")
    return f"sent Authorization: Basic {basic} and state={shifted}"
"""

DATASET = """
target: agent:reply
target_options: {token: "${SVC_TOKEN}"}
gates:
  - includes: apiuser
data:
  - {id: basic, input: log in}
"""


def test_a_token_inside_a_basic_credential_is_in_no_output(tmp_path: Path) -> None:
    token = "tok-planted-9f8e7d6c5b4a"
    write_project(tmp_path, agent=AGENT, dataset=DATASET)
    env = cli_env(SVC_TOKEN=token)
    done = run_cli(["run", "ds.yaml", "--json", "out.json", "--html", "run.html", "--markdown", "run.md",
                    "--junit", "junit.xml"], tmp_path, env)
    assert done.returncode == 1, done.stderr  # the gate looks for "apiuser", which only the payload held
    shown = run_cli(["show", "latest", "basic"], tmp_path, env)
    assert shown.returncode == 0, shown.stderr
    conn = sqlite3.connect(tmp_path / "evalcli.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    outputs = {name: (tmp_path / name).read_bytes().decode("utf-8", "replace")
               for name in ("out.json", "run.html", "run.md", "junit.xml", "evalcli.db")}
    outputs.update({"stdout": done.stdout, "stderr": done.stderr, "show": shown.stdout + shown.stderr})
    assert "Basic YXBpdXNlcjp[redacted]" in outputs["out.json"]  # old main: the whole payload, verbatim
    leaked = [name for name, text in outputs.items() if reveals(text, token)]
    assert not leaked, leaked
