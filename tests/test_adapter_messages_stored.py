"""Every adapter's messages, a package's own included, are checked and serialised once as each turn is recorded
(docs/targets/python.md "Return value", evalcli/stored_json.py): a message the store cannot write is the
conversation's error, and a turn that failed keeps what the agent said before it only when that can be stored. The
writer used to lose such a conversation ("could not store all of run") with the run passing. A made-up adapter
package installed for the run (tests/plugin_packages.py), the real CLI, a real SQLite file."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.plugin_packages import installed

DECLARATION = '''
from evalcli.targets import AdapterDeclaration

ODD = AdapterDeclaration(name="odd", adapter="odd_adapter.adapter:OddAdapter", summary="an agent with odd messages",
                         recognises=("odd_agent.OddAgent",), install="pip install odd-adapter",
                         frameworks=("odd_agent",))
'''
ADAPTER = '''
from evalcli.targets import Adapter, Reply, TurnFailed


class OddAdapter(Adapter):
    name = "odd"

    def open(self, *, multi_turn, calls, conversation=None, item=None):
        return OddSession()


class OddSession:
    async def send(self, text):
        said = [{"role": "assistant", "content": "Sunny" + (" \\ud800" if "surrogate" in text else "")}]
        if "tuple" in text:
            said[0]["data"] = {(1, 2): "pair"}
        if "fails" in text:
            raise TurnFailed(RuntimeError("the model went away"), said)
        return Reply(said)

    async def close(self):
        pass
'''
AGENT = '''
class OddAgent:
    pass

agent = OddAgent()
'''


def _rows(db: Path) -> tuple[dict[str, str], dict[str, str]]:
    with sqlite3.connect(db) as conn:
        items = dict(conn.execute("SELECT item_id, coalesce(error, status) FROM items").fetchall())
        outputs = dict(conn.execute("SELECT item_id, output FROM turns").fetchall())
    return items, outputs


def test_a_packages_adapter_messages_the_store_cannot_write_are_the_conversations_error(
        workdir: Path, cli: Callable[..., CliResult]) -> None:
    installed(workdir, "odd-adapter", {"evalcli.adapters": {"odd": "odd_adapter:ODD"}},
              {"odd_adapter/__init__.py": DECLARATION, "odd_adapter/adapter.py": ADAPTER, "odd_agent.py": AGENT})
    (workdir / "d.yaml").write_text("target: odd_agent:agent\ngates: [{includes: Sunny}]\ndata:\n"
                                    + "".join(f"  - {{id: {name}, input: {name}}}\n" for name in
                                              ("plain", "surrogate", "tuple", "fails", "fails-surrogate")))
    done = cli("run", "d.yaml", "--db", "x.db")
    assert done.code == 4, done.stderr
    assert "could not store" not in done.stderr and "internal error" not in done.stderr, done.stderr
    items, outputs = _rows(workdir / "x.db")
    assert items["plain"] == "ok" and outputs["plain"] == '[{"role": "assistant", "content": "Sunny"}]'
    assert items["surrogate"] == ("turn 0: response message 0 holds text that is not Unicode (\\ud800, a lone "
                                  "surrogate): it cannot be stored as JSON; return plain data (the value's text, or a "
                                  "copy a JSON encoder can write)")
    assert items["tuple"].startswith("turn 0: response message 0 cannot be written as JSON (TypeError: keys must be")
    # a failed turn keeps what the agent said before the failure, when the store can write it
    assert items["fails"] == items["fails-surrogate"] == "turn 0: the target raised RuntimeError: the model went away"
    assert outputs["fails"] == '[{"role": "assistant", "content": "Sunny"}]' and outputs["fails-surrogate"] == "[]"
    assert outputs["surrogate"] == outputs["tuple"] == "[]"
