"""The dataset YAML loader (``evalcli.dataset.yamlsrc`` on ``yamlnodes``), with libyaml and without it: the same
values as ``yaml.safe_load``, every path located where pyyaml's own nodes say it is, the same located errors,
and the safe-loading limits (alias bombs, nesting, size) on both parsers. libyaml is used where pyyaml has it."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalcli.dataset import load_dataset, yamlnodes, yamlsrc, yamlvalues
from evalcli.errors import DatasetError
from evalcli.identity import canonical_json
from tests.conftest import REPO

DOCUMENTS = {
    "plain": "a: 1\nb: [x, 'y', \"z\"]\nc: {d: null, e: ~, f: true, g: 1.5e3, h: 0x1f, i: 2024-05-01}\n",
    "anchors": "base: &b {x: 1, y: [1, 2]}\nother: *b\nlist: [&s hello, *s, *s]\n",
    "merge": "base: &b {x: 1, y: 2}\nmore: &m {z: 3}\none: {<<: *b, y: 5}\ntwo: {<<: [*b, *m], w: 0}\n",
    "tags": "s: !!str 12\ni: !!int '7'\nf: !!float '2'\nb: !!binary aGVsbG8=\nt: !!timestamp 2001-12-14t21:59:43.10-05:00\n"
            "set: !!set {a, b}\nseq: !!seq [1]\n",
    "block": "data:\n  - id: one\n    turns:\n      - input: |\n          two lines\n          here\n        gates:\n"
             "          - includes: x\n      - input: >-\n          folded\n          text\n",
    "keys": "1: one\n2.5: float\nfalse: bool\nnull: nothing\n'quoted key': q\n? complex\n: value\n",
    "unicode": "name: Zoë 🌦\nemoji: [☀, '🌧']\n",
    "empty values": "a:\nb: ''\nc: []\nd: {}\n",
    "document markers": "---\na: 1\n...\n",
    "scalar document": "just a string\n",
    "value key": "=: value\n",
    "interpolation": "model: ${EVALCLI_TEST_UNSET:-openai/gpt-4o-mini}\nlist: ['${EVALCLI_TEST_UNSET:-x}', plain]\n",
}


def repo_yaml() -> Iterator[tuple[str, str]]:
    for path in sorted([*REPO.glob("datasets/**/*.yaml"), *REPO.glob("examples/*.yaml"), REPO / "scorers.yaml",
                        REPO / "bench" / "scorers.yaml"]):
        yield str(path.relative_to(REPO)), path.read_text(encoding="utf-8")


def all_documents() -> list[tuple[str, str]]:
    return [*DOCUMENTS.items(), *repo_yaml()]


def test_libyaml_is_used_where_pyyaml_has_it() -> None:
    assert (yamlnodes.CParser is not None) == bool(getattr(yaml, "__with_libyaml__", False))


@pytest.mark.parametrize(("name", "text"), all_documents(), ids=[name for name, _ in all_documents()])
def test_values_are_those_of_safe_load(parser: str, name: str, text: str) -> None:
    data, _, used = yamlsrc.load_yaml(text, "f.yaml", env={})
    expected = interpolated(yaml.safe_load(text))
    assert data == expected
    assert [p for p in used.problems if "is not set" not in p.message] == []


def interpolated(value: Any) -> Any:
    """``${NAME:-default}`` replaced as with no variable set (by its default, else nothing); a set is the sorted list
    evalcli reads it as (docs/yaml.md)."""
    if isinstance(value, set):
        return sorted(value, key=canonical_json)
    if isinstance(value, str):
        return yamlvalues.INTERPOLATION.sub(lambda m: m.group(2) or "", value)
    if isinstance(value, dict):
        return {k: interpolated(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolated(v) for v in value]
    return value


Places = dict[tuple[Any, ...], tuple[tuple[int, int], tuple[int, int] | None]]


def reference_places(node: yaml.Node, path: tuple[Any, ...], places: Places, key: tuple[int, int] | None = None) -> Places:
    """path -> (value place, key place) for every node, from pyyaml's own composer (its marks, 1-based); a
    repeated key (a merged one overridden) is placed at its last occurrence, the value that is kept."""
    if len(path) > 12:
        return places
    places[path] = ((node.start_mark.line + 1, node.start_mark.column + 1), key)
    if isinstance(node, yaml.MappingNode):
        yaml.SafeLoader("").flatten_mapping(node)
        for key_node, value_node in node.value:
            value = yaml.SafeLoader("").construct_object(key_node)
            part = value if isinstance(value, (str, int)) else str(value)
            reference_places(value_node, (*path, part), places,
                             (key_node.start_mark.line + 1, key_node.start_mark.column + 1))
    elif isinstance(node, yaml.SequenceNode):
        for index, child in enumerate(node.value):
            reference_places(child, (*path, index), places)
    return places


@pytest.mark.parametrize(("name", "text"), all_documents(), ids=[name for name, _ in all_documents()])
def test_every_path_is_located_where_pyyaml_puts_it(parser: str, name: str, text: str) -> None:
    _, positions, _ = yamlsrc.load_yaml(text, "f.yaml", env={})
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    assert node is not None
    places = reference_places(node, (), {})
    for path, ((line, column), key_place) in places.items():
        assert positions.where(path) == f"f.yaml:{line}:{column}", path
        if key_place is not None:
            assert positions.where(path, key=True) == f"f.yaml:{key_place[0]}:{key_place[1]}", path
    assert places
    # a path the document does not have is located at its deepest existing part
    assert positions.where(("no such key", 3)) == "f.yaml:" + ":".join(map(str, (node.start_mark.line + 1,
                                                                               node.start_mark.column + 1)))


BROKEN = {
    "unclosed flow": ("target: x\ndata:\n  - input: [unclosed\n", "f.yaml:4:1"),
    "tab indent": ("a: 1\n\tb: 2\n", "f.yaml:2:1"),
    "bad indentation": ("a:\n  b: 1\n c: 2\n", "f.yaml:3:2"),
    "undefined alias": ("a: *nope\n", "f.yaml:1:4"),
    "two documents": ("a: 1\n---\nb: 2\n", "f.yaml:2:1"),
    "bad merge": ("a: {<<: 5}\n", "f.yaml:1:9"),
    "bad int tag": ("a: !!int seven\n", "f.yaml:1:4"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_documents_are_located_errors(parser: str, name: str) -> None:
    text, where = BROKEN[name]
    with pytest.raises(DatasetError) as caught:
        yamlsrc.load_yaml(text, "f.yaml", env={})
    problem = caught.value.problems[0]
    assert problem.where == where, (name, str(problem))


@pytest.mark.parametrize("prefix", ["", "name: Zoë 🌦\n"])
def test_a_control_character_is_located_by_character_not_byte(parser: str, prefix: str) -> None:
    text = prefix + "a: fine\nb: bell \x07 here\n"
    with pytest.raises(DatasetError) as caught:
        yamlsrc.load_yaml(text, "f.yaml", env={})
    line = prefix.count("\n") + 2
    assert str(caught.value.problems[0]).startswith(f"f.yaml:{line}:9: not valid YAML: control character 0x07"), \
        str(caught.value.problems[0])


def test_duplicate_keys_are_reported_at_the_second_key(parser: str) -> None:
    _, _, used = yamlsrc.load_yaml("a: 1\nb: 2\na: 3\n", "f.yaml", env={})
    assert [str(p).splitlines()[0] for p in used.problems] == ["f.yaml:3:1: duplicate key 'a'"]


@pytest.mark.parametrize("depth", [70, 5_000, 200_000])
@pytest.mark.timing
def test_deep_nesting_is_a_located_error_not_a_crash(parser: str, depth: int) -> None:
    text = "a: " + "[" * depth + "]" * depth + "\n"
    started = time.monotonic()
    with pytest.raises(DatasetError) as caught:
        yamlsrc.load_yaml(text, "f.yaml", env={})
    assert time.monotonic() - started < 10
    message = str(caught.value.problems[0])
    assert message.startswith("f.yaml:1:") and ("nested too deeply" in message or "deeper than" in message), message


def test_alias_bombs_stop_on_both_parsers(parser: str) -> None:
    names = [f"l{n}" for n in range(9)]
    lines = [f"{names[0]}: &{names[0]} [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]" for a, b in itertools.pairwise(names)]
    with pytest.raises(DatasetError, match="too many values"):
        yamlsrc.load_yaml("\n".join(lines) + "\n", "f.yaml", env={})


def test_libyaml_loads_a_large_dataset_several_times_faster(tmp_path: Path) -> None:
    if yamlnodes.CParser is None:
        pytest.skip("this pyyaml has no libyaml binding")
    items = [{"id": f"c{i}", "turns": [{"input": f"turn {t} of {i}", "gates": ["g"]} for t in range(3)]}
             for i in range(1500)]
    text = yaml.safe_dump({"target": "a:b", "data": items}, sort_keys=False)

    def cpu(run: Any) -> float:
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            run()
            best = min(best, time.process_time() - started)
        return best

    fast = cpu(lambda: yamlsrc.load_yaml(text, "f.yaml", env={}))
    pure = cpu(lambda: yaml.load(text, Loader=yaml.SafeLoader))
    assert yamlsrc.load_yaml(text, "f.yaml", env={})[0] == yaml.safe_load(text)
    assert fast * 3 < pure, (fast, pure)


def test_yaml_and_jsonl_items_know_the_line_they_start_on(tmp_path: Path) -> None:
    """What the pytest plugin points a conversation's failure at (a YAML item had none)."""
    (tmp_path / "agents.py").write_text("def echo(input, **kw):\n    return input\n")
    (tmp_path / "d.yaml").write_text("target: agents:echo\nscorers: [{includes: a}]\ndata:\n"
                                     "  - input: a\n\n  - id: two\n    inputs: [a, b]\n  # a comment\n"
                                     "  - turns:\n      - input: a\n")
    (tmp_path / "d.jsonl").write_text('{"target": "agents:echo", "scorers": [{"includes": "a"}]}\n\n'
                                      '{"input": "a"}\n{"id": "two", "inputs": ["a", "b"]}\n')
    assert [i.line for i in load_dataset(tmp_path / "d.yaml").items] == [4, 6, 9]
    assert [i.line for i in load_dataset(tmp_path / "d.jsonl").items] == [3, 4]


def test_a_registered_name_is_parsed_once_but_an_import_error_names_every_reference(tmp_path: Path) -> None:
    """A registered check named on every turn is one spec (memory flat in the turns); a registered custom scorer
    whose import fails is reported where each reference is written."""
    (tmp_path / "agents.py").write_text("def echo(input, **kw):\n    return input\n")
    (tmp_path / "scorers.yaml").write_text("scorers:\n  said-a: {includes: a}\n"
                                           "  missing: {python: {function: nowhere:check}}\n")
    turns = "    turns:\n      - {input: a, gates: [said-a]}\n      - {input: b, gates: [said-a]}\n"
    (tmp_path / "d.yaml").write_text(f"target: agents:echo\ngates: [said-a]\ndata:\n  - id: one\n{turns}"
                                     f"  - id: two\n{turns}")
    items = load_dataset(tmp_path / "d.yaml").items
    specs = [g for i in items for t in i.turns or () for g in t.gates]
    assert len(specs) == 4 and all(s is specs[0] for s in specs) and specs[0].registered
    (tmp_path / "d.yaml").write_text("target: agents:echo\ngates: [said-a]\ndata:\n"
                                     "  - turns:\n      - {input: a, scorers: [missing]}\n"
                                     "      - {input: b, scorers: [missing]}\n")
    with pytest.raises(DatasetError) as error:
        load_dataset(tmp_path / "d.yaml")
    places = [p.where for p in error.value.problems if "nowhere" in p.message]
    assert places == [f"{tmp_path / 'd.yaml'}:5:30", f"{tmp_path / 'd.yaml'}:6:30"], error.value.problems


@pytest.mark.parametrize(("written", "quoted"), [
    ("${A-x}", "${A-x}"), ("${A:?required}", "${A:?required}"), ("${ A }", "${ A }"), ("${user.name}", "${user.name}"),
    ("${1A}", "${1A}"), ("${A:-${B:-c}}", "${A:-${B:-c}}"), ("open ${", "${"), ("$${A} and ${A", "${A")])
def test_a_dollar_brace_that_is_no_interpolation_is_a_located_mistake(written: str, quoted: str) -> None:
    """Each was kept as text before (``${A:-${B:-c}}`` became ``${B:-c}``): a reader of the run would take it for an
    interpolation evalcli made, or a nested default it read (docs/datasets.md, "Environment variables")."""
    _, _, used = yamlsrc.load_yaml(f"a: 1\nb: '{written}'\n", "f.yaml", env={"A": "set", "B": "b"})
    assert [(p.where, p.message) for p in used.problems] == [("f.yaml:2:4", f"{quoted} is not an interpolation "
                                                                             "evalcli reads")]


def test_interpolations_and_escapes_evalcli_reads_stay_as_they_were() -> None:
    data, _, used = yamlsrc.load_yaml("a: '${A}-${B:-x}-$${A}-$${ A }-${C:-}'\nb: '${A:-a}b}'\n", "f.yaml",
                                      env={"A": "1"})
    assert data == {"a": "1-x-${A}-${ A }-", "b": "1b}"} and used.problems == []
