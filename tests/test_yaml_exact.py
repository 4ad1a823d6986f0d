"""Datasets load exactly as ``yaml.safe_load`` reads them (docs/yaml.md, issue 33), item by item: tags on scalars,
mappings and sequences, keys of every type, the documents libyaml refuses and pyyaml reads (and the other way
round), errors on safe_load's line, nested merges, and merge keys counted before they are expanded; through the
loader and through the real CLI. A hypothesis test states the rule: whatever YAML pyyaml can emit, with any tags,
loads as safe_load loads it. The deliberate differences are listed in ``DIFFERENCES``, each with why.
"""

from __future__ import annotations

import itertools
import os
import re
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalcli.dataset import yamlsrc
from evalcli.errors import DatasetError
from tests.conftest import CliResult
from tests.yaml_reference import compare, evalcli_load, safe_load

LOADS = {
    "!!set is a sorted list": "tags: !!set {x, y}\n",
    "!!omap and !!pairs are lists of pairs": "o: !!omap [{a: 1}, {b: 2}]\np: !!pairs [{a: 1}, {a: 2}]\n",
    "dates and datetimes as keys": "2024-01-01: new year\n2024-01-02 10:30:00: later\nwhen: 2024-05-01\n",
    "a !!binary key is bytes": "? !!binary aGVsbG8=\n: hello\n",
    "'!' alone is resolved as a plain scalar": "a: !\nb: ! \nc: ! 12\n",
    "a scalar tag on a mapping reads its '=' key": "a: !!str {=: x}\n",
    "a merge inside a merged mapping is no duplicate": "top: {<<: &m {<<: {a: 1}, a: 2}}\nother: *m\n",
    "a mapping tagged !!merge is a merge key": "{? !!merge {x: y} : [], a: 1}\n",
    # libyaml refuses these; pyyaml's own parser reads them
    "a tab starting a block scalar's line": "input: |\n  \tmake\n",
    "a tab starting a folded scalar's line": "x: >\n  \ta\n",
    "a tab starting a block scalar in a list": "- |\n \tfoo\n",
    "an unknown directive": "%FOO bar baz\n---\na: 1\n",
    "%YAML 1.3": "%YAML 1.3\n---\na: 1\n",
    "an omitted value in a flow mapping": "{omitted value:,}\n",
    "a byte order mark starting a key": "a: 1\n\ufeffb: 2\n",
    "a byte order mark after the first one": "\ufeff\ufeffa\n",
}
"""Documents safe_load loads: evalcli gives the same values, with the same types (each differed before)."""

RAISES = {
    "!!str on a mapping": "a: 1\nb: !!str {x: 1}\n",
    "!!map on a sequence": "a: 1\nb: !!map [1]\n",
    "an unknown tag on a sequence": "a: 1\nb: !foo [1]\n",
    "a list as a key": "a: 1\n? [x, y]\n: 2\n",
    "the first error breadth first, as safe_load constructs": "a: [[!!int x]]\nb: !!int y\n",
    "an unclosed flow mapping at the end": "- {b#\\",
    "an unclosed flow sequence over lines": "[[\\\n'\\n''\\U0001\\u00e9\\x4",
    # libyaml reads these; pyyaml's own parser (safe_load's) refuses them
    "a tab inside a plain scalar": "a: b\tc\n",
    "a question mark in a flow scalar": "[a?b]\n",
    "a flow indicator in a tag": "[!!str,x]\n",
    "a comment glued to a block scalar's header": "x: |#c\n  a\n",
    "a comment glued to a directive": "%YAML 1.1#x\n---\na\n",
    "a tab after a document start": "---\tscalar\n",
    # libyaml reads a tag handle of other than word characters as the handle '!' (the value then fails to construct,
    # lines before); pyyaml's scanner refuses the handle where it is
    "a tag handle holding '='": "a: !!int x\nb: !=!int 3\n",
    "a collection tag handle holding '.'": "a: !!int x\nb: !.x!seq\n - c\n",
    # libyaml places an empty value in a flow mapping at the next token; safe_load's merge error names the ':' line
    "a merge of an empty value in a flow mapping": "{a: 1,\n<<:\n}\n",
}
"""Documents safe_load refuses: evalcli refuses them with an error on the same line (each loaded, or erred on
another line, before)."""

GUARDS = {
    "an unknown escape": 'a: 1\nb: "x\ny \\q z"\nc: 2\n',
    "an escape past U+10FFFF": 'a: 1\nb: "\\U00110000"\n',
    "a tab inside quotes and a comment": "a: 'x\ty'  # a\tb\nb: \"\t\"\n",
    "a multi-document file": "a: 1\n---\nb: 2\n",
}
"""Cases that already agreed before, kept from changing."""


@pytest.mark.parametrize("name", [*LOADS, *RAISES, *GUARDS])
def test_the_loader_reads_each_document_as_safe_load_does(parser: str, name: str) -> None:
    text = {**LOADS, **RAISES, **GUARDS}[name]
    verdict, expected, got = compare(text)
    assert verdict in ("equal", "errors matched"), (verdict, expected, got)
    if name in LOADS:
        assert expected.ok
    elif name in RAISES:
        assert not expected.ok and got.line is not None


def test_collection_tags_and_keys_keep_their_types(parser: str) -> None:
    value = evalcli_load(LOADS["!!set is a sorted list"] + LOADS["!!omap and !!pairs are lists of pairs"] +
                         LOADS["dates and datetimes as keys"] + LOADS["a !!binary key is bytes"])
    assert value.ok
    data = value.value
    assert data["tags"] == ["x", "y"] and data["o"] == [("a", 1), ("b", 2)] and data["p"] == [("a", 1), ("a", 2)]
    assert [type(k).__name__ for k in data] == ["str", "str", "str", "date", "datetime", "str", "bytes"]


DIFFERENCES: dict[str, tuple[str, str, str]] = {
    "duplicate key": ("a: 1\nb: 2\na: 3\n", "f.yaml:3:1: duplicate key 'a'",
                      "a key written twice in one mapping is a mistake in a dataset: safe_load keeps the last"),
    "equal keys of two types": ("1: one\ntrue: yes\n", "f.yaml:2:1: duplicate key True",
                                "true and 1 are one key to Python (and to safe_load, which keeps the last)"),
    "interpolation": ("model: ${EVALCLI_YAML_TEST_UNSET:-gpt}\n", "",
                      "${VAR} and ${VAR:-default} in string values are replaced (safe_load keeps the text)"),
    "nesting deeper than 64": ("a: " + "[" * 70 + "]" * 70 + "\n", "nested too deeply",
                               "a dataset is never that deep: the limit keeps a small file from costing much"),
    "a recursive alias": ("&a [*a]\n", "nesting deeper than 64 levels",
                          "a value that contains itself cannot be a dataset (safe_load makes a recursive list)"),
    "surrogate escapes": ('a: ok\nb: "\\ud83d\\ude00"\n', "f.yaml:2:4: the escape \\ud83d names half of a UTF-16 surrogate",
                          "pyyaml reads each \\u escape alone: a string no text (nor the database) can hold"),
    "an alias bomb": ("l0: &l0 [lol, lol]\n" + "".join(f"l{n + 1}: &l{n + 1} [{', '.join([f'*l{n}'] * 10)}]\n"
                                                     for n in range(5)), "too many values",
                      "100,000 values reached again through aliases is the budget (safe_load shares them)"),
}
"""What evalcli does on purpose otherwise than safe_load (docs/yaml.md says so too)."""


@pytest.mark.parametrize("name", list(DIFFERENCES))
def test_the_deliberate_differences(parser: str, name: str) -> None:
    text, expected, _why = DIFFERENCES[name]
    assert safe_load(text).ok, "safe_load reads it: the difference is evalcli's"
    try:
        data, _, used = yamlsrc.load_yaml(text, "f.yaml", env={})
    except DatasetError as exc:
        assert expected and expected in str(exc), str(exc)
        return
    if name == "interpolation":
        assert data == {"model": "gpt"} and not used.problems
    else:
        assert [str(p).splitlines()[0] for p in used.problems] == [expected]


def merge_bomb(levels: int) -> str:
    """Nested ``<<: [&aN {...}, *aN x8]``: each level merges nine copies of the one below, 9^levels pairs where
    pyyaml copies every merged pair (6.0.3); 6.0.4 keeps one of each (the same key node), so it is no bomb there."""
    inner = "{k: v}"
    for n in range(levels):
        inner = f"{{<<: [&a{n} {inner}, {', '.join([f'*a{n}'] * 8)}]}}"
    return f"top: {inner}\n"


def copies_every_merged_pair() -> bool:
    """Whether the installed pyyaml copies a mapping merged twice twice (6.0.3) or once (6.0.4), as its own
    ``flatten_mapping`` does it."""
    root = yaml.compose("b: &b {k: 1}\nx: {<<: [*b, *b]}\n", Loader=yaml.SafeLoader)
    assert isinstance(root, yaml.MappingNode)
    merging = root.value[1][1]
    yaml.SafeLoader("").flatten_mapping(merging)
    return len(merging.value) == 2


@pytest.mark.parametrize("levels", [9, 10, 12])
@pytest.mark.timing
def test_a_merge_key_bomb_is_refused_before_it_is_expanded(parser: str, levels: int) -> None:
    """Refused where pyyaml would expand it; where pyyaml keeps one copy of each merged pair, read as it reads it.
    Either way within a fraction of a second and a few megabytes."""
    text = merge_bomb(levels)
    assert len(text) < 700
    tracemalloc.start()
    started = time.process_time()
    try:
        if copies_every_merged_pair():
            with pytest.raises(DatasetError, match=r"^f\.yaml:1:\d+: the document expands to too many values "
                                                   r"through merge keys"):
                yamlsrc.load_yaml(text, "f.yaml", env={})
        else:
            assert yamlsrc.load_yaml(text, "f.yaml", env={})[0] == {"top": {"k": "v"}}
        seconds = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 0.5 and peak < 8 * 2**20, (seconds, peak)


def test_merges_within_the_budget_load_as_safe_load_reads_them(parser: str) -> None:
    for levels in (1, 2, 3, 4):
        assert compare(merge_bomb(levels))[0] == "equal"


# -- through the CLI -------------------------------------------------------------------------------------------

TRUTH = """\
import yaml
from evalcli import Score
from tests.yaml_reference import same

def same_as_safe_load(run):
    with open("d.yaml", encoding="utf-8") as f:
        expected = yaml.safe_load(f)["data"][0]["ground_truth"]
    return Score(1.0 if same(run.ground_truth, expected) else 0.0, repr(run.ground_truth))
"""

GROUND_TRUTH = """\
      tags: !!set {x, y}
      order: !!omap [{a: 1}, {b: 2}]
      raw: !!binary aGVsbG8=
      2024-01-01: new year
      ? !!binary aGVsbG8=
      : bytes key
      when: 2024-05-01
      empty: !
      merged: {<<: &m {<<: {a: 1}, a: 2}}
      again: *m
      build: |
        all:
        \tcc -o app main.c
"""


def dataset(write: Callable[..., Path], truth: str, header: str = "") -> Path:
    write("truth.py", TRUTH)
    return write("d.yaml", f"{header}target: agents:echo\nscorers: [{{python: 'truth:same_as_safe_load'}}]\n"
                           f"data:\n  - id: one\n    input: hello\n    ground_truth:\n{truth}")


def test_the_cli_hands_scorers_the_values_safe_load_gives(write: Callable[..., Path],
                                                          cli: Callable[..., CliResult]) -> None:
    path = dataset(write, GROUND_TRUTH)
    assert "\t" in path.read_text()
    done = cli("run", "d.yaml", "--json", "out.json", "--db", "t.db")
    assert done.code == 0, done.stderr
    import json

    outcome = json.loads((path.parent / "out.json").read_text())["items"][0]["outcomes"]["scorers"]
    (only,) = outcome.values()
    assert only["score"] == 1.0, only["reason"]
    assert "'tags': ['x', 'y']" in only["reason"]
    assert "datetime.date(2024, 1, 1): 'new year'" in only["reason"] and "b'hello': 'bytes key'" in only["reason"]


@pytest.mark.parametrize("header", ["%FOO bar baz\n---\n", "%YAML 1.3\n---\n"])
def test_the_cli_accepts_directives_libyaml_refuses(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                    header: str) -> None:
    dataset(write, "      a: 1\n", header)
    done = cli("validate", "d.yaml")
    assert done.code == 0, done.stderr
    assert "d.yaml: ok (1 item" in done.stdout


@pytest.mark.parametrize("name", ["!!str on a mapping", "an unknown tag on a sequence", "a list as a key",
                                  "the first error breadth first, as safe_load constructs"])
def test_the_cli_refuses_what_safe_load_refuses_on_its_line(write: Callable[..., Path],
                                                           cli: Callable[..., CliResult], name: str) -> None:
    truth = "".join(f"      {line}\n" for line in RAISES[name].splitlines())
    path = dataset(write, truth)
    expected = safe_load(path.read_text())
    assert not expected.ok and expected.line
    done = cli("validate", "d.yaml")
    assert done.code == 2, done.stdout + done.stderr
    assert re.search(rf"d\.yaml:{expected.line}:\d+: ", done.stderr), (expected, done.stderr)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


@pytest.mark.timing
def test_the_cli_refuses_a_merge_key_bomb_at_once(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    truth = merge_bomb(10).removeprefix("top: ").strip()
    write("bomb.yaml", f"target: agents:echo\nscorers: [{{includes: x}}]\ndata:\n  - input: q\n    ground_truth: {truth}\n")
    started = time.monotonic()
    done = cli("validate", "bomb.yaml")
    if copies_every_merged_pair():
        assert done.code == 2 and "bomb.yaml:5:" in done.stderr and "merge keys" in done.stderr, done.stderr
    else:  # pyyaml 6.0.4 merges one copy of each pair: no bomb
        assert done.code == 0 and "bomb.yaml: ok" in done.stdout, done.stdout + done.stderr
    assert time.monotonic() - started < 20  # the CLI's start-up on a busy machine; the loading is milliseconds


# -- the rule, stated over generated documents ---------------------------------------------------------------

TAGS = [None] * 12 + ["tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:binary",
        "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:set", "tag:yaml.org,2002:omap", "tag:yaml.org,2002:pairs",
        "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:merge", "tag:yaml.org,2002:value",
        "!", "!foo"]
SCALARS = st.sampled_from(["", "x", "1", "-2", "0x1f", "1_000", "1.5", ".inf", ".NaN", "~", "null", "true", "yes",
                           "Off", "2024-01-01", "2001-12-14 21:59:43.10 -5", "aGVsbG8=", "<<", "=", "a b", "é ☀",
                           "a\tb", "multi\nline", "#", "?x", "*", "%", "${X:-d}"])

# EVALCLI_FUZZ_EXAMPLES=5000 for a deeper search than the suite's quick one
FUZZ = settings(max_examples=int(os.environ.get("EVALCLI_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@st.composite
def nodes(draw: st.DrawFn, depth: int = 0) -> yaml.Node:
    """A pyyaml node tree with random tags, styles and shapes (mappings of one pair, as !!omap wants, included)."""
    kind = draw(st.sampled_from(["scalar"] * 3 + (["sequence", "mapping", "pair"] if depth < 4 else [])))
    tag = draw(st.sampled_from(TAGS))
    flow = draw(st.booleans())
    if kind == "scalar":
        value = draw(SCALARS)
        style = draw(st.sampled_from([None, None, "'", '"', "|", ">"]))
        resolved = yaml.SafeLoader("").resolve(yaml.ScalarNode, value, (True, False))
        return yaml.ScalarNode(tag or resolved if style is None else tag or "tag:yaml.org,2002:str", value,
                               style=style)
    if kind == "sequence":
        items = draw(st.lists(nodes(depth + 1), max_size=4))
        return yaml.SequenceNode(tag or "tag:yaml.org,2002:seq", items, flow_style=flow)
    size = 1 if kind == "pair" else draw(st.integers(0, 4))
    keys = draw(st.lists(nodes(depth + 1) if draw(st.booleans()) else st.builds(
        lambda v: yaml.ScalarNode("tag:yaml.org,2002:str", v), st.text(max_size=5)), min_size=size, max_size=size))
    return yaml.MappingNode(tag or "tag:yaml.org,2002:map", [(k, draw(nodes(depth + 1))) for k in keys],
                            flow_style=flow)


def emitted(node: yaml.Node) -> str | None:
    try:
        return yaml.serialize(node, allow_unicode=True)
    except yaml.YAMLError:  # a shape the emitter cannot write (a block scalar inside a flow collection...)
        return None


def agrees(text: str) -> None:
    verdict, expected, got = compare(text)
    if verdict == "evalcli refuses" and "duplicate key" in got.message:
        return  # DIFFERENCES: a key written twice (equal as values) is reported
    refused = verdict == "evalcli refuses" and "interpolation" in got.message
    if "${" in text and (verdict == "values differ" or refused):
        return  # DIFFERENCES: interpolation (a ${ that is none is refused)
    assert verdict in ("equal", "errors matched"), (text, verdict, expected, got)


@FUZZ
@given(node=nodes())
def test_any_emitted_document_with_any_tags_loads_as_safe_load_reads_it(parser: str, node: yaml.Node) -> None:
    text = emitted(node)
    if text is not None:
        agrees(text)


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats() | st.text(max_size=12)
    | st.dates() | st.datetimes() | st.binary(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.text(max_size=6) | st.integers(-5, 5) | st.booleans() | st.dates() | st.binary(max_size=4), children,
        max_size=4) | st.frozensets(st.text(max_size=4), max_size=3).map(set),
    max_leaves=15)


@FUZZ
@given(value=VALUES, flow=st.sampled_from([None, False, True]), width=st.sampled_from([20, 80, 1000]))
def test_safe_dump_output_loads_as_safe_load_reads_it(parser: str, value: Any, flow: bool | None, width: int) -> None:
    agrees(yaml.safe_dump(value, default_flow_style=flow, width=width, allow_unicode=True))


def test_the_old_limits_still_hold_on_the_new_paths(parser: str) -> None:
    """A document read by pyyaml's own parser (a tab in a plain scalar sends it there) keeps every bound."""
    names = [f"l{n}" for n in range(9)]
    lines = [f"{names[0]}: &{names[0]} [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]" for a, b in itertools.pairwise(names)]
    with pytest.raises(DatasetError, match="too many values"):
        yamlsrc.load_yaml("%YAML 1.1\n---\n" + "\n".join(lines) + "\n", "f.yaml", env={})


def test_a_file_read_by_pyyamls_own_parser_keeps_its_positions(write: Callable[..., Path],
                                                               cli: Callable[..., CliResult]) -> None:
    """A directive sends the file to pyyaml's parser: evalcli's own mistakes are still located where they are."""
    body = "target: agents:echo\nscorers: [{includes: x}]\ndata:\n  - input: q\n    bogus: 1\n"
    for name, text, line in [("plain.yaml", body, 5), ("directive.yaml", "%YAML 1.1\n---\n" + body, 7)]:
        write(name, text)
        done = cli("validate", name)
        assert done.code == 2 and f"{name}:{line}:5: unknown key 'bogus'" in done.stderr, done.stderr


def test_a_question_in_a_flow_mapping_is_refused_with_what_to_write(write: Callable[..., Path],
                                                                    cli: Callable[..., CliResult]) -> None:
    """The error people meet most (safe_load refuses it; libyaml read it): its line, and how to write it instead."""
    write("q.yaml", "target: agents:echo\nscorers: [{includes: x}]\ndata:\n  - {id: a, input: Is it sunny?}\n")
    done = cli("validate", "q.yaml")
    assert done.code == 2 and "q.yaml:4:31: not valid YAML: expected ',' or '}', but got '?'" in done.stderr
    assert "quote the value ('Is it sunny?'), or write the item in block style" in done.stderr, done.stderr
    write("q.yaml", "target: agents:echo\nscorers: [{includes: x}]\ndata:\n  - {id: a, input: 'Is it sunny?'}\n"
                    "  - id: b\n    input: Is it sunny?\n")
    assert cli("validate", "q.yaml").code == 0


MERGE_KEYS = ["a", "ab", "b", "abc", "'a'", '"ab"', "x y", "é", '"\\x62"', "k1", "<<"]
"""Keys of a merge document: one-character and longer, plain and quoted (pyyaml 6.0.4 keeps a merged pair only if
no pair merged before it has the very same key object, which one-character strings are)."""


@st.composite
def merge_documents(draw: st.DrawFn) -> str:
    """Mappings that merge earlier ones (``<<: *mN``, ``<<: [*mN, *mM]``, an anchored mapping merged inline that
    itself merges), keys overlapping between them, each also read on its own through an alias."""
    lines: list[str] = []
    anchors: list[str] = []
    for n in range(draw(st.integers(1, 6))):
        own = draw(st.lists(st.sampled_from(MERGE_KEYS[:-1]), max_size=3,
                            unique_by=lambda k: yaml.safe_load(k)))  # a key written twice is an error of evalcli's
        pairs = [f"{key}: v{n}{i}" for i, key in enumerate(own)]
        if anchors:
            merged = draw(st.lists(st.sampled_from(anchors), min_size=1, max_size=3))
            form = draw(st.sampled_from(["one", "list", "inline"]))
            if form == "one":
                pairs.insert(draw(st.integers(0, len(pairs))), f"<<: *{merged[0]}")
            elif form == "list":
                pairs.insert(draw(st.integers(0, len(pairs))), f"<<: [{', '.join('*' + m for m in merged)}]")
            else:
                pairs.insert(0, f"<<: &i{n} {{<<: *{merged[0]}, {draw(st.sampled_from(MERGE_KEYS[:-1]))}: w{n}}}")
                anchors.append(f"i{n}")
        lines.append(f"m{n}: &m{n} {{{', '.join(pairs)}}}")
        anchors.append(f"m{n}")
    lines.append(f"again: [{', '.join('*' + a for a in anchors)}]")
    return "\n".join(lines) + "\n"


@FUZZ
@given(text=merge_documents())
def test_any_merge_document_loads_as_the_installed_pyyamls_safe_load_reads_it(parser: str, text: str) -> None:
    """pyyaml 6.0.3 and 6.0.4 read some of these differently: evalcli reads them as the one installed does."""
    agrees(text)
