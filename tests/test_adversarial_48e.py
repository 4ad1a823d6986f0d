"""Values no text can hold, sets, self-holding outputs and interrupts (issue 48's adversarial tries, continued): each
through the real CLI, against what the code before the fix did (docs/datasets.md, docs/yaml.md, docs/otel.md)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalcli.errors import lone_surrogate
from tests.conftest import REPO, CliResult, run_cli
from tests.reliability_helpers import run_cli as reliability_cli
from tests.test_memory_streams import line, turn_spans

HALF = "\\ud800"
SURROGATE = "names half of a UTF-16 surrogate pair alone, not a character"


def _refused(done: CliResult, where: str, escape: str = "\\ud800") -> None:
    assert done.code == 2, done.stderr
    assert f"{where}: the escape {escape} {SURROGATE}" in done.stderr, done.stderr
    assert "hint: write the character itself" in done.stderr and "internal error" not in done.stderr, done.stderr


@pytest.mark.parametrize("command", ["run", "validate"])
def test_a_lone_surrogate_in_a_transcript_data_file_is_a_located_error(tmp_path: Path, command: str) -> None:
    """A recorded conversation escaping half a surrogate pair (a JS exporter cutting an emoji in two) is its file,
    line and column, exit 2, nothing stored; both halves of a pair are the character (was: internal error,
    UnicodeEncodeError, exit 70)."""
    good = '{"id": "a", "messages": [{"role": "user", "content": "hi \\ud83d\\ude00"}, {"role": "assistant", "content": "ok"}]}'
    bad = '{"id": "b", "messages": [{"role": "user", "content": "caf\\\\\\ud800?"}, {"role": "assistant", "content": "ok"}]}'
    (tmp_path / "t.jsonl").write_text(f"{good}\n\n{bad}\n")
    (tmp_path / "d.yaml").write_text("gates: [{includes: ok}]\ndata_file: t.jsonl\n")
    args = [command, str(tmp_path / "d.yaml")] + (["--db", str(tmp_path / "e.db")] if command == "run" else [])
    _refused(run_cli(args, REPO, {}), f"t.jsonl:3:{bad.index(HALF) + 1}")
    assert not (tmp_path / "e.db").exists()  # refused before anything is written
    (tmp_path / "t.jsonl").write_text(good + "\n" + bad.replace(HALF, "\\udbff\\udfff") + "\n")  # U+10FFFF: a pair
    done = run_cli([*args, *(["--json", "-"] if command == "run" else [])], REPO, {})
    assert done.code == 0, done.stderr
    if command == "run":
        said = [item["turns"][0]["input"] for item in json.loads(done.stdout)["items"]]
        assert said == ["hi \U0001F600", "caf\\\U0010FFFF?"], said


def test_a_lone_surrogate_in_scripted_inputs_and_a_jsonl_dataset_is_a_located_error(workdir: Path,
                                                                                    cli: Callable[..., CliResult]) -> None:
    """Scripted inputs in a data_file, and a JSONL dataset's own items (its header line first): the same error."""
    (workdir / "in.jsonl").write_text('{"input": "fine"}\n{"input": "x\\udc00y"}\n')
    (workdir / "d.yaml").write_text("target: agents:echo\nscorers: [{includes: said}]\ndata_file: in.jsonl\n")
    _refused(cli("run", "d.yaml", "--db", "e.db"), "in.jsonl:2:13", "\\udc00")
    assert not (workdir / "e.db").exists()
    (workdir / "d.jsonl").write_text('{"target": "agents:echo", "scorers": [{"includes": "said"}]}\n'
                                     '{"input": "\\ud83dx"}\n')
    _refused(cli("validate", "d.jsonl"), "d.jsonl:2:12", "\\ud83d")


def test_a_lone_surrogate_in_a_yaml_dataset_is_a_located_error(workdir: Path, cli: Callable[..., CliResult]) -> None:
    """YAML reads ``"\\ud800"`` in double quotes into a string no text can hold (pyyaml never joins two ``\\u``
    halves): the scalar's place, exit 2 (was: internal error, exit 70). Single quotes, an escaped backslash and a
    ``\\U`` escape past U+FFFF are text."""
    (workdir / "d.yaml").write_text('target: agents:echo\nscorers: [{includes: said}]\ndata:\n  - input: ok\n'
                                    '  - input: "caf\\ud83d\\ude00"\n')
    _refused(cli("run", "d.yaml", "--db", "e.db"), "d.yaml:5:12", "\\ud83d")
    assert not (workdir / "e.db").exists()
    (workdir / "d.yaml").write_text("target: agents:echo\nscorers: [{includes: said}]\ndata:\n"
                                    "  - input: 'a\\ud800'\n  - input: \"b\\\\ud800 \\U0001F600\"\n")
    done = cli("run", "d.yaml", "--db", "e.db", "--json", "-")
    assert done.code == 0, done.stderr
    assert [i["turns"][0]["output"][-1]["content"] for i in done.json["items"]] == \
        ["You said: a\\ud800", "You said: b\\ud800 \U0001F600"]


def test_a_lone_surrogate_in_a_trace_file_is_a_located_error(tmp_path: Path) -> None:
    """An OTLP trace file, one document a line or pretty-printed: the line and column of the escape, exit 2 (was:
    internal error, exit 70)."""
    rows = [line(turn_spans(n, f"c{n}", n * 100)) for n in range(1, 4)]
    rows[1] = rows[1].replace("sunny", "sun\\ud800ny")
    (tmp_path / "traces.jsonl").write_text("".join(rows))
    (tmp_path / "d.yaml").write_text("gates: [{called_tool: get_weather}]\ndata_file: traces.jsonl\n")
    done = run_cli(["run", str(tmp_path / "d.yaml"), "--db", str(tmp_path / "e.db")], REPO, {})
    _refused(done, f"traces.jsonl:2:{rows[1].index(HALF) + 1}")
    assert not (tmp_path / "e.db").exists()
    pretty = json.dumps(json.loads(rows[1]), indent=2)
    (tmp_path / "traces.jsonl").write_text(pretty.replace("\\\\ud800", "\\ud800"))
    at = pretty.split("\n")
    number = next(n for n, text in enumerate(at, start=1) if "\\ud800" in text)
    done = run_cli(["validate", str(tmp_path / "d.yaml")], REPO, {})
    _refused(done, f"traces.jsonl:{number}:{at[number - 1].index(HALF) + 1}")


@given(st.lists(st.text(alphabet=st.sampled_from(["a", "\\", "\ud800", "\udc00", "\udbff", "\udfff", "\U0001F600",
                                                 "u", "d"]), max_size=8), max_size=3))
def test_lone_surrogate_is_found_exactly_when_json_reads_a_string_no_text_can_hold(texts: list[str]) -> None:
    """The invariant of ``errors.lone_surrogate``: it names a place exactly when ``json.loads`` of the text gives a
    string that cannot be encoded as UTF-8 (pairs, escaped backslashes before a ``u`` and a ``\\\\u`` that is text
    are not)."""
    text = json.dumps({"m": texts})

    def encodable(value: str) -> bool:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True

    assert (lone_surrogate("f", text) is None) == all(encodable(value) for value in json.loads(text)["m"])


SET_DATASET = """\
gates: [{includes: ok}]
data:
  - metadata: {labels: !!set {alpha, beta, gamma, delta, epsilon, zeta}}
    messages:
      - {role: user, content: hi}
      - role: assistant
        content: ''
        tool_calls:
          - {id: c1, type: function, function: {name: f, arguments: {tags: !!set {x1, x2, x3, x4, x5, x6}}}}
      - {role: tool, tool_call_id: c1, content: done}
      - {role: assistant, content: ok}
"""


def test_a_yaml_set_is_stored_in_one_order_whatever_the_hash_seed(tmp_path: Path) -> None:
    """A ``!!set`` in a recorded conversation's metadata and in a tool call's arguments: read as a sorted list, so
    the stored texts and the conversation's identity are the same under any ``PYTHONHASHSEED`` (the metadata was
    stored as the set's repr in the seed's order, and a set in arguments was an internal error, exit 70)."""
    (tmp_path / "d.yaml").write_text(SET_DATASET)
    stored = []
    for seed in ("1", "2", "3"):
        done = run_cli(["run", str(tmp_path / "d.yaml"), "--db", str(tmp_path / f"{seed}.db")], REPO,
                       {"PYTHONHASHSEED": seed}, fresh=True)
        assert done.code == 0, done.stderr
        with sqlite3.connect(tmp_path / f"{seed}.db") as db:
            stored.append(db.execute("SELECT identity, content, metadata FROM items").fetchall()
                          + db.execute("SELECT input, output, outcomes FROM turns").fetchall())
    assert stored[0] == stored[1] == stored[2]
    assert json.loads(stored[0][0][2]) == {"labels": ["alpha", "beta", "delta", "epsilon", "gamma", "zeta"]}
    (call,) = json.loads(stored[0][1][1])[0]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"tags": ["x1", "x2", "x3", "x4", "x5", "x6"]}


SELFISH = '''
def selfish(input, **kw):
    if input == "a dict":
        message = {"role": "assistant", "content": "x"}
        message["self"] = message
        return {"messages": [message]}
    if input == "a list":
        parts = ["a"]
        parts.append(parts)
        return [{"role": "assistant", "content": "fine", "parts": parts}]
    if input == "deep":
        deep = []
        for _ in range(5000):
            deep = [deep]
        return [{"role": "assistant", "content": deep}]
    shared = {"k": 1}
    return [{"role": "assistant", "content": "fine " + input, "a": shared, "b": [shared, shared]}]
'''


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_output_that_holds_itself_is_that_conversations_error(workdir: Path, cli: Callable[..., CliResult],
                                                                 workers: str) -> None:
    """A message holding itself (a dict, a list) or nested 5,000 deep: that conversation's error, saying where, the
    others stored and the run going on (was: the writer's RecursionError, 'could not store all of run', the
    conversations lost and exit 0). A value shared by two keys is no loop."""
    (workdir / "selfish.py").write_text(SELFISH)
    (workdir / "d.yaml").write_text("target: selfish:selfish\nscorers: [{includes: fine}]\ndata:\n  - input: one\n"
                                    "  - input: a dict\n  - input: a list\n  - input: deep\n  - input: two\n")
    done = cli("run", "d.yaml", "--db", "e.db", "--workers", workers)
    assert done.code == 4, done.stderr
    assert "could not store" not in done.stderr and "internal error" not in done.stderr, done.stderr
    with sqlite3.connect(workdir / "e.db") as db:
        rows = dict(db.execute("SELECT item_id, coalesce(error, status) FROM items").fetchall())
    assert len(rows) == 5 and list(rows.values()).count("ok") == 2, rows
    errors = sorted(error for error in rows.values() if error != "ok")
    assert errors == [f"turn 0: response message 0 {what}: it cannot be stored as JSON; return plain data (the "
                      "value's text, or a copy a JSON encoder can write)"
                      for what in ("holds itself at ['parts'][1]", "holds itself at ['self']",
                                   "nests lists and mappings deeper than 100 levels")], errors


INTERRUPTING = '''
import pathlib

def generate(input, **kw):
    flag = pathlib.Path(__file__).with_name("stop.flag")
    if input == "stop" and flag.exists():
        flag.unlink()
        raise KeyboardInterrupt
    return "fine " + input
'''


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_target_raising_keyboard_interrupt_interrupts_the_run_with_or_without_workers(tmp_path: Path,
                                                                                      workers: str) -> None:
    """A target raising ``KeyboardInterrupt`` itself: exit 130, the run ``interrupted``, what finished stored and the
    rest played by ``--resume``, in one process as with two workers (with two it was exit 70: 'a worker did not
    finish', the run ``failed``)."""
    (tmp_path / "agent.py").write_text(INTERRUPTING)
    (tmp_path / "stop.flag").write_text("")
    (tmp_path / "d.yaml").write_text("target: agent:generate\nconcurrency: 1\nscorers: [{includes: fine}]\ndata:\n" +
                                     "".join(f"  - {{id: i{n}, input: {'stop' if n == 5 else f'q{n}'}}}\n"
                                             for n in range(12)))
    done = reliability_cli(["run", "d.yaml", "--db", "e.db", "--workers", workers], tmp_path)
    assert done.returncode == 130, done.stderr
    assert "internal error" not in done.stderr and "did not finish" not in done.stderr, done.stderr
    with sqlite3.connect(tmp_path / "e.db") as db:
        (run_id, status, code), = db.execute("SELECT id, status, exit_code FROM runs").fetchall()
        stored = db.execute("SELECT count(*) FROM items WHERE status = 'ok'").fetchone()[0]
    assert (status, code) == ("interrupted", 130) and 0 < stored < 12
    assert f"--resume {run_id}" in done.stderr + done.stdout
    resumed = reliability_cli(["run", "d.yaml", "--db", "e.db", "--workers", workers, "--resume", run_id], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    with sqlite3.connect(tmp_path / "e.db") as db:
        assert db.execute("SELECT count(*), min(status) FROM items").fetchall() == [(12, "ok")]


@pytest.mark.slow
def test_the_local_model_loading_is_said_once_with_workers(tmp_path: Path) -> None:
    """Every worker loads the embedded judge model and says so: the run says it once, as one process does (it said it
    once a worker: twice with ``--workers 2``)."""
    done = run_cli(["run", str(REPO / "datasets/weather.yaml"), "--db", str(tmp_path / "w.db"), "--workers", "2"],
                   REPO, timeout=900)
    assert done.code == 0, done.stderr
    assert done.stderr.count("loading the local model local/gemma-3-270m") == 1, done.stderr
