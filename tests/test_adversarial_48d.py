"""Issue 48's speed changes (one secret search a conversation, the relative configuration fingerprint, the play
path's cuts) broken as an adversary would, each through the real CLI (docs/secrets.md, docs/identity.md)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult

UNICODE_AGENT = '''
import os


def answer(input, **kw):
    if "boom" in input:
        raise RuntimeError("failed with " + os.environ["UNI_TOKEN"])
    return "the key is " + os.environ["UNI_TOKEN"] + " and " + os.environ["UNI_TOKEN"].lower()
'''


def dumped(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return "\\n".join(conn.iterdump())


def test_a_secret_whose_lower_case_is_longer_is_redacted_everywhere(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """A secret holding ``İ`` (its lower case ``i̇`` is two characters) was looked for only in its lower-cased form,
    and a text holding ``İ`` is searched case-insensitively as written, where ``İ`` never matches ``i̇``: the secret
    reached the terminal, the database and every report as the agent wrote it. Now the form as written is looked
    for too."""
    secret = "PASSİWORD77x"
    write("uniagent.py", UNICODE_AGENT)
    write("d.yaml", "target: uniagent:answer\ngates: [{excludes: nothing}]\n"
          "data:\n  - {id: said, input: hi}\n  - {id: raised, input: boom}\n")
    done = cli("run", "d.yaml", "--json", "out.json", "--markdown", "out.md", "--junit", "out.xml",
               env={"UNI_TOKEN": secret})
    assert done.code == 4, done.stderr
    shown = cli("show", "last", "said", env={"UNI_TOKEN": secret})
    texts = {"stdout": done.stdout, "stderr": done.stderr, "show": shown.stdout + shown.stderr,
             "database": dumped(done.cwd / "evalcli.db"),
             **{name: (done.cwd / name).read_text() for name in ("out.json", "out.md", "out.xml")}}
    for where, text in texts.items():
        assert secret.lower() not in text.lower(), where
        assert "WORD77x".lower() not in text.lower(), where
    assert "[redacted]" in texts["database"]


CAPITALS_AGENT = '''
import os


def answer(input, **kw):
    return "SHOUTED: " + os.environ["SHOP_TOKEN"].upper()
'''


def test_a_secret_whose_capitals_are_longer_is_redacted_in_capitals(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """``straße``'s capitals are ``STRASSE`` (longer): the secret was looked for in any case letter by letter, never as
    ``SS``, so an agent that shouted the secret stored and printed it. Now its capitals are a form of it."""
    secret = "straße-key-4411"
    write("capsagent.py", CAPITALS_AGENT)
    write("d.yaml", "target: capsagent:answer\ngates: [{includes: SHOUTED}]\ndata:\n  - {id: loud, input: hi}\n")
    done = cli("run", "d.yaml", "--json", "out.json", env={"SHOP_TOKEN": secret})
    assert done.code == 0, done.stderr
    shown = cli("show", "last", "loud", env={"SHOP_TOKEN": secret})
    texts = {"stdout": done.stdout, "show": shown.stdout + shown.stderr, "database": dumped(done.cwd / "evalcli.db"),
             "out.json": (done.cwd / "out.json").read_text()}
    for where, text in texts.items():
        assert "strasse-key-4411" not in text.lower(), where
    assert "SHOUTED: [redacted]" in texts["database"]
