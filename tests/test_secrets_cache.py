"""A secret in the response cache is a reference to its variable (docs/reliability.md, "Secrets"): a simulated user
whose persona holds a declared secret says the same words on a cached re-run as on the first, and the cache file
holds no secret."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.secret_references import REFERENCE, References
from tests.conftest import CliResult
from tests.llm_server import LLMServer, Request
from tests.sim_helpers import serve, sim_env, simulator_requests

pytestmark = pytest.mark.usefixtures("llm_backend")  # every test on both backends

PIN = "884422991"

AGENT = """
import json, os

def bank(input, **options):
    with open(os.environ["HEARD_LOG"], "a") as log:
        log.write(json.dumps(input) + "\\n")
    return "Your account is unlocked." if os.environ["PIN"] in input else "Please tell me your PIN."
"""

DATASET = """
secrets: [PIN]
target: bank:bank
gates: [{includes: unlocked}]
data:
  - id: pin
    simulate:
      goal: Get the account unlocked
      persona: "A customer whose PIN is ${PIN}, who says it when asked."
      opening: Hello, my account is locked.
      max_turns: 3
"""


def says_pin(heard: str | None, request: Request) -> str:
    if heard is None:
        return "Hello."
    if "PIN" in heard:
        return f"my PIN is {PIN}, and it costs ${{PIN}} $$5"  # the reply's own "${PIN}" text stays as it was
    return "###STOP###"


def test_a_cached_simulated_user_says_the_same_words_and_the_cache_holds_no_secret(
        llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult], workdir: Path) -> None:
    serve(llm_server, says_pin)
    write("bank.py", AGENT)
    write("d.yaml", DATASET)
    heard = workdir / "heard.jsonl"
    env = sim_env(llm_server, PIN=PIN, HEARD_LOG=str(heard))
    first = cli("run", "d.yaml", "--json", "-", env=env)
    assert first.code == 0, first.stderr
    asked = len(simulator_requests(llm_server))
    first_heard = heard.read_text().splitlines()
    assert first_heard[1] == f'"my PIN is {PIN}, and it costs ${{PIN}} $$5"'
    heard.unlink()

    second = cli("run", "d.yaml", "--json", "-", env=env)
    assert len(simulator_requests(llm_server)) == asked, "the re-run is played from the cache"
    assert second.code == 0, second.stderr  # old main: the agent heard "my PIN is [redacted]" and never unlocked
    assert heard.read_text().splitlines() == first_heard

    conn = sqlite3.connect(workdir / "evalcli.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cached = " ".join(row[0] for row in conn.execute("SELECT response FROM llm_cache"))
    conn.close()
    assert "${PIN}" in cached and PIN not in cached
    assert PIN.encode() not in (workdir / "evalcli.db").read_bytes()

    other = cli("run", "d.yaml", "--json", "-", env={**env, "PIN": "123456789"})
    assert other.code == 0, other.stderr  # another PIN: the agent hears it (the cache gives the value back)
    assert len(simulator_requests(llm_server)) == asked
    assert '"my PIN is 123456789, and it costs ${PIN} $$5"' in heard.read_text()


names = st.dictionaries(st.from_regex(r"[A-Z][A-Z_]{0,5}", fullmatch=True),
                        st.text(st.sampled_from("abc019$}{-"), min_size=4, max_size=10), min_size=1, max_size=3)
pieces = st.text(st.sampled_from("ab ${}N_AM1"), max_size=8)


@given(names, st.lists(st.tuples(pieces, st.integers(0, 5)), max_size=6), pieces)
@settings(max_examples=300, deadline=None)
def test_a_stored_text_reads_back_exactly_and_holds_no_secret(secrets: dict[str, str], parts: list[tuple[str, int]],
                                                               tail: str) -> None:
    values = sorted(secrets.values())
    text = "".join(before + values[which % len(values)] for before, which in parts) + tail
    refs = References(secrets)
    kept = refs.write(text, escape=True)
    assert refs.read(kept) == text
    assert not any(value in REFERENCE.sub("", kept) for value in values), kept
