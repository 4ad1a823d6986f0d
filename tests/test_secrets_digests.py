"""No stored digest lets a secret be confirmed offline (docs/reliability.md, "Secrets"): a conversation's identity and
content digest cover each secret as a reference to its variable (the same conversation on every machine and shard,
whatever the secret's value), and the resume fingerprint keys a secret-bearing leaf with a key kept outside the
database, so a guessable PIN cannot be tried against what the database holds."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.fingerprint import SALT, differences, fingerprint, unverifiable
from evalcli.secret_references import References
from tests.conftest import CliResult

PIN = "884422991"
OTHER = "123456789"
KEY = "digest-key-of-this-test-0f9e8d7c"

DATASET = """
secrets: [PIN]
target: agents:echo
gates: [{includes: said}]
data:
  - input: "my PIN is ${PIN}"
  - {id: named, input: "again: ${PIN}"}
"""


def everything_stored(db: Path) -> str:
    """Every value of every table, as text."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    text = " ".join(str(value) for table in tables for row in conn.execute(f"SELECT * FROM {table}") for value in row)
    conn.close()
    return text


def old_leaf_digest(salt: str, path: str, value: Any) -> str:
    """The salted leaf digest as evalcli stored it for every leaf, the salt beside it."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{salt}\0{path}\0{text}".encode()).hexdigest()[:16]


def test_no_stored_digest_confirms_a_guessed_pin(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                 workdir: Path) -> None:
    write("d.yaml", DATASET)
    first = cli("run", "d.yaml", "--json", "-", env={"PIN": PIN, "EVALCLI_DIGEST_KEY": KEY})
    assert first.code == 0, first.stderr
    second = cli("run", "d.yaml", "--json", "-", env={"PIN": OTHER, "EVALCLI_DIGEST_KEY": KEY})
    assert second.code == 0, second.stderr
    conn = sqlite3.connect(workdir / "evalcli.db")
    rows = {run: conn.execute("SELECT identity, content FROM items WHERE run_id = ? ORDER BY item_index",
                              [run]).fetchall() for run in (first.json["run_id"], second.json["run_id"])}
    config = json.loads(conn.execute("SELECT options FROM runs WHERE id = ?", [first.json["run_id"]]).fetchone()[0])
    conn.close()
    # the same conversations whatever the PIN (old main: each PIN its own identity and content digest)
    assert rows[first.json["run_id"]] == rows[second.json["run_id"]]
    assert not rows[first.json["run_id"]][0][0].startswith("id:")

    # an attacker holding the database tries candidate PINs against every digest it holds
    stored = everything_stored(workdir / "evalcli.db")
    salt = config["config"][SALT]
    for candidate in (PIN, OTHER, "000000000"):
        for path, value in (("data[0].inputs[0]", f"my PIN is {candidate}"), ("data[1].inputs[0]",
                                                                              f"again: {candidate}")):
            assert old_leaf_digest(salt, path, value) not in stored, (candidate, path)  # old main: PIN confirmed
    assert PIN not in stored and KEY not in stored

    # the resume still notices a changed PIN (same key), and names only the path
    changed = cli("run", "d.yaml", "--resume", first.json["run_id"], env={"PIN": OTHER, "EVALCLI_DIGEST_KEY": KEY})
    assert changed.code == 2, changed.stderr
    assert "data[0].inputs[0] (changed)" in changed.stderr and OTHER not in changed.stderr
    same = cli("run", "d.yaml", "--resume", first.json["run_id"], env={"PIN": PIN, "EVALCLI_DIGEST_KEY": KEY})
    assert same.code == 0, same.stderr
    # on a machine with another key the secret's value cannot be compared; the rest of the leaf still is
    elsewhere = cli("run", "d.yaml", "--resume", first.json["run_id"], env={"PIN": OTHER,
                                                                             "EVALCLI_DIGEST_KEY": KEY + "-other"})
    assert elsewhere.code == 0, elsewhere.stderr


leaf_text = st.text(st.sampled_from("ab PIN:9"), max_size=8)


@given(st.lists(st.tuples(leaf_text, st.booleans(), leaf_text), min_size=1, max_size=4),
       st.sampled_from([PIN, OTHER, "pw-9x-long"]), st.sampled_from([PIN, OTHER, "pw-9y-long"]))
@settings(max_examples=100, deadline=None)
def test_a_secret_bearing_leaf_is_keyed_and_a_changed_secret_is_noticed(
        leaves: list[tuple[str, bool, str]], secret: str, replaced: str) -> None:
    os.environ["HYPO_TOKEN"] = secret  # a secret by its variable's name, as the environment holds it
    try:
        tree = {"data": [before + (secret if holds else "") + after for before, holds, after in leaves]}
        stored = fingerprint(tree)
        salt = stored[SALT]
        for n, value in enumerate(tree["data"]):
            path = f"data[{n}]"
            whole = stored[path].split("|")[1]  # a conversation's entry: shape|digest of it|its leaves' (evalcli/fingerprint.py)
            assert (whole.count(".") == 2) == (secret in value)
            if secret in value:
                assert old_leaf_digest(salt, path, value) not in stored[path]
        assert differences(stored, tree) == [] and unverifiable(stored) == []
        edited = {"data": [v.replace(secret, replaced) for v in tree["data"]]}
        expected = [f"data[{n}] (changed)" for n, v in enumerate(tree["data"]) if secret in v and replaced != secret]
        assert differences(stored, edited) == expected
    finally:
        del os.environ["HYPO_TOKEN"]


def test_references_write_the_first_name_of_a_value() -> None:
    refs = References({"B_PIN": "4455667788", "A_PIN": "4455667788"})
    assert refs.write("pin 4455667788", escape=False) == "pin ${A_PIN}"
