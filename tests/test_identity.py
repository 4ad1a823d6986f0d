"""A conversation is the same conversation across runs by its identity, never its position (docs/identity.md): through the
real CLI (--rerun-failed, diff, compare, report --baseline), the migration of old rows, and the invariant."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.dataset import load_dataset
from evalcli.identity import content_digest, conversation_identity, identities, pair_by_identity
from evalcli.results import ItemResult
from evalcli.store import migrations
from tests.conftest import CliResult
from tests.pytest_project import calls, run_pytest, write_project

JOKE, PARIS, ROME = "'joke=>haha'", "'Paris=>city of Paris'", "'Rome=>city of Rome'"


def dataset(*inputs: str) -> str:
    return "target: agents:scripted\ngates: [{excludes: haha}]\ndata:\n" + "".join(f"  - input: {i}\n" for i in inputs)


def played(result: CliResult) -> list[str]:
    return [item["turns"][0]["input"] for item in result.json["items"]]


def test_rerun_failed_plays_the_failed_conversation_wherever_it_moved(write: Callable[..., Path],
                                                                       cli: Callable[..., CliResult]) -> None:
    write("d.yaml", dataset(JOKE, PARIS, ROME))
    first = cli("run", "d.yaml", "--json", "-")
    assert first.code == 1
    write("d.yaml", dataset(PARIS, JOKE, ROME))  # the failing joke moved to second place
    again = cli("run", "d.yaml", "--rerun-failed", first.json["run_id"], "--json", "-")
    assert played(again) == ["joke=>haha"] and again.code == 1  # on old main: Paris, passed, exit 0


def test_rerun_failed_says_how_many_failed_conversations_no_longer_exist(write: Callable[..., Path],
                                                                         cli: Callable[..., CliResult]) -> None:
    write("d.yaml", dataset(JOKE, "'pun=>haha too'", PARIS))
    first = cli("run", "d.yaml", "--json", "-")
    write("d.yaml", dataset(PARIS, "'pun=>haha, edited'", JOKE))  # the pun was edited: another conversation
    again = cli("run", "d.yaml", "--rerun-failed", first.json["run_id"], "--json", "-")
    assert played(again) == ["joke=>haha"]
    assert "1 failed conversation of run" in again.stderr and "no longer in d.yaml" in again.stderr
    assert "re-running the 1 that still exist" in again.stderr


def test_diff_and_compare_match_by_identity_and_say_the_datasets_differ(write: Callable[..., Path],
                                                                         cli: Callable[..., CliResult]) -> None:
    write("d.yaml", dataset(PARIS, ROME))
    a = cli("run", "d.yaml", "--json", "-").json["run_id"]
    write("d.yaml", dataset(JOKE, PARIS, ROME))
    b = cli("run", "d.yaml", "--json", "-").json["run_id"]
    diff = cli("diff", a, b)
    assert diff.stdout.splitlines()[0].startswith("the runs are of different dataset contents")
    assert "item 0" not in diff.stdout  # Paris is unchanged: on old main "item 0: passed in A, fails in B"
    assert "verdict: passed -> failed" in diff.stdout and diff.code == 1  # the new joke fails: that is real
    compare = cli("compare", a, b)
    assert compare.stdout.splitlines()[0].startswith("the runs are of different dataset contents")
    differing = [line.split() for line in compare.stdout.splitlines() if line.startswith("│ ") and "excludes" in line
                 and "gate" not in line]
    # only the joke, absent from A, named by its content (its position differs between the runs)
    assert differing == [["│", '"joke=>haha"', "│", "excludes(haha)", "│", "-", "│", "FAIL", "│"]]
    html = cli("report", b, "--baseline", a, "--html", "r.html")
    assert html.code == 0
    page = (html.cwd / "r.html").read_text()
    assert "different dataset contents" in page and "0 regressed" in page and "1 new" in page


def test_an_explicit_id_with_other_content_is_changed_not_regressed(write: Callable[..., Path],
                                                                   cli: Callable[..., CliResult]) -> None:
    text = "target: agents:scripted\ngates: [{{excludes: haha}}]\ndata:\n  - {{id: capital, input: {}}}\n  - input: {}\n"
    write("d.yaml", text.format(PARIS, ROME))
    a = cli("run", "d.yaml", "--json", "-").json["run_id"]
    write("d.yaml", text.format(JOKE, ROME))  # 'capital' now names another conversation
    b = cli("run", "d.yaml", "--json", "-").json["run_id"]
    diff = cli("diff", a, b)
    assert "capital (changed)" in diff.stdout and "1 conversation changed" in diff.stdout
    assert "item capital" not in diff.stdout  # never "passed in A, fails in B"
    compare = cli("compare", a, b)
    assert "changed (the same id, other content; neither regressed nor fixed): capital" in compare.stdout
    assert not any(line.startswith(("│ capital", "| capital")) for line in compare.stdout.splitlines())


def test_old_rows_get_an_identity_by_id_or_by_what_they_asked(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for name, migration in migrations.MIGRATIONS[:6]:
        migration(conn)
        conn.execute("INSERT INTO migrations VALUES (?, 'then')", (name,))
    conn.execute("INSERT INTO runs (id, dataset, target, started_at, status) VALUES ('R', 'd', 't', 'now', 'completed')")
    for index, item_id, text in ((0, "0", "hello"), (1, "named", "hello"), (2, "2", "hello"), (3, "3", "other")):
        conn.execute("INSERT INTO items (run_id, item_index, item_id, form, status, finished_at) "
                     "VALUES ('R', ?, ?, 'input', 'ok', 'now')", (index, item_id))
        conn.execute("INSERT INTO turns (run_id, item_index, turn_index, input, output) VALUES ('R', ?, 0, ?, '[]')",
                     (index, text))
    assert migrations.apply(conn)[0] == "007_conversation_identity"  # and those after it
    found = [row[0] for row in conn.execute("SELECT identity FROM items ORDER BY item_index")]
    assert found[1] == "id:named"
    assert found[0].startswith("stored:") and found[2] == found[0] + "#2" and found[3] not in (found[0], found[2])


AGENTS = "def reply(text, **options):\n    return text\n"
leaf = st.one_of(st.integers(-5, 5), st.text("ab ", max_size=3), st.booleans())
item = st.fixed_dictionaries({"input": st.text("xyz", min_size=1, max_size=4)}, optional={
    "metadata": st.dictionaries(st.sampled_from(["k", "m"]), leaf, max_size=2),
    "target_options": st.fixed_dictionaries({}, optional={"temperature": st.integers(0, 3)}),
    "labels": st.fixed_dictionaries({"has-a": st.sampled_from([0, 1])}),
    "ground_truth": leaf,
})


def _identities(items: list[dict[str, Any]]) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "identity_agent.py").write_text(AGENTS)
        file = Path(folder) / "d.yaml"
        file.write_text(yaml.safe_dump({"target": "identity_agent:reply", "scorers": [{"id": "has-a", "scorer": {"includes": "a"}}],
                                        "data": items}))
        return [i.identity for i in load_dataset(str(file)).items]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for key, inner in value.items() for p in _leaves(inner, (*path, key))]
    return [path]


@settings(max_examples=40, deadline=None)
@given(st.lists(item, min_size=1, max_size=5), st.randoms(use_true_random=False))
def test_identity_is_content_never_position(items: list[dict[str, Any]], random: Any) -> None:
    before = _identities(items)
    assert len(set(before)) == len(before)  # identical items are numbered apart
    order = list(range(len(items)))
    random.shuffle(order)
    moved = _identities([items[n] for n in order])
    assert sorted(moved) == sorted(before)  # reordering: the same identities
    if not any("#" in identity for identity in before):  # no two items alike as resolved
        assert moved == [before[n] for n in order]  # each conversation keeps its own
    target = random.randrange(len(items))
    path = random.choice(_leaves(items[target]))
    edited = json.loads(json.dumps(items))
    holder = edited[target]
    for key in path[:-1]:
        holder = holder[key]
    old = holder[path[-1]]
    holder[path[-1]] = (1 - old) if path[0] == "labels" else (old + "x") if isinstance(old, str) else [old]
    after = _identities(edited)
    if path[0] == "labels":
        assert after == before  # a person's verdict is not the conversation
    elif _identities([edited[target]]) not in ([_identities([other])] for n, other in enumerate(items) if n != target):
        assert after[target] not in before  # any leaf of its content: another conversation
    # else: the edit made it a copy of another item (z edited to zx beside an item zx): that conversation's identity


def test_pair_by_identity_pairs_by_identity_then_lists_the_rest() -> None:
    def result(index: int, identity: str) -> ItemResult:
        return ItemResult(index, str(index), [], "input", "ok", None, None, identity=identity)

    a = [result(0, "x"), result(1, "y")]
    b = [result(0, "z"), result(1, "x")]
    assert [(p and p.index, q and q.index) for p, q in pair_by_identity(a, b)] == [(0, 1), (1, None), (None, 0)]
    assert identities([(None, "c"), ("k", "c"), (None, "c")]) == ["c", "id:k", "c#2"]
    assert conversation_identity("k", "c", 3) == "id:k"


def test_pytest_lf_replays_the_failed_conversation_wherever_it_moved(tmp_path: Path) -> None:
    def weather(*cities: str) -> str:
        return "target: agent:weather\ngates: [{includes: sunny}]\ndata:\n" + "".join(
            f"  - input: 'Weather in {city}?'\n" for city in cities)

    write_project(tmp_path, {"w.yaml": weather("Paris", "Oslo", "Rome")})
    assert run_pytest(tmp_path, "w.yaml").code == 1
    calls(tmp_path)
    write_project(tmp_path, {"w.yaml": weather("Oslo", "Paris", "Rome")})  # the failing Paris moved
    again = run_pytest(tmp_path, "w.yaml", "--lf")
    assert again.code == 1 and calls(tmp_path) == ["Weather in Paris?"]  # on old main: Oslo, by position


@given(st.dictionaries(st.dates() | st.text(max_size=4) | st.integers(-3, 3) | st.binary(max_size=3),
                       st.text(max_size=3) | st.dates() | st.frozensets(st.integers(0, 5), max_size=3), max_size=5))
def test_content_with_keys_of_any_type_safe_load_gives_has_one_digest_whatever_the_order(mapping: dict) -> None:
    reordered = dict(reversed(list(mapping.items())))
    assert content_digest({"metadata": mapping}) == content_digest({"metadata": reordered})
    if mapping:
        key = next(iter(mapping))
        assert content_digest({"metadata": mapping}) != content_digest({"metadata": {**mapping, key: "changed!"}}) \
            or mapping[key] == "changed!"


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                                        max_size=4), max_leaves=20)
ENCODER_OPTIONS = [{"sort_keys": True, "ensure_ascii": False, "separators": (",", ":"), "default": repr},  # identity
                   {"sort_keys": True, "default": repr, "ensure_ascii": False},  # the fingerprint's text
                   {"ensure_ascii": False, "default": str},  # a stored row's columns
                   {"ensure_ascii": True}]


@settings(max_examples=150, deadline=None)
@given(value=JSON_VALUES | st.builds(lambda n: {"when": complex(n, 1)}, st.integers()), options=st.sampled_from(ENCODER_OPTIONS))
def test_an_encoder_made_once_writes_what_json_dumps_writes(value: Any, options: dict[str, Any]) -> None:
    """``secret_references.c_encoder``: the one way evalcli makes an encoder once (identities, fingerprints, rows)."""
    from evalcli.secret_references import c_encoder

    try:
        expected: Any = json.JSONEncoder(**options).encode(value)
    except TypeError as exc:
        expected = type(exc)
    try:
        made: Any = c_encoder(**options)(value)
    except TypeError as exc:
        made = type(exc)
    assert made == expected
