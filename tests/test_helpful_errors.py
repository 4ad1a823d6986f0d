"""Errors a new user meets in their first minutes say what is wrong, where, and what to write instead (issue 29):
a threshold or an id written beside a check, empty labels, gates on an `input` item, output folders that do not
exist (all of them at once), and what a gate or scorer that is not registered really lacks."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.dataset import load_dataset
from evalcli.errors import DatasetError, UsageError
from tests.conftest import CliResult

REGISTRY = "scorers:\n  says-you: {includes: said}\n"


def hint_yaml(stderr: str, where: str) -> str:
    """The YAML lines of the hint of the problem at ``where`` (indented six spaces under ``  hint: ...``)."""
    block = stderr.split(f"{where}: ", 1)[1]
    lines = block.splitlines()[2:]
    kept = [line[6:] for line in lines[: next((n for n, line in enumerate(lines) if not line.startswith(" " * 6)),
                                               len(lines))]]
    assert kept, stderr
    return "\n".join(kept)


def test_a_threshold_beside_a_check_shows_the_wrapper_and_the_threshold_out_of_range_at_once(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:echo
        scorers:
          - includes: costs
            threshold: 1.2
        data:
          - input: what does it cost?
    """)
    result = cli("run", "d.yaml")
    assert result.code == 2, result.stderr
    assert "d.yaml:4:5: 'threshold' cannot be written beside 'includes': a scorer reference has one key; a " \
           "threshold goes in a wrapper around it" in result.stderr
    assert hint_yaml(result.stderr, "d.yaml:4:5") == "- scorer: {includes: costs}\n  threshold: 1.2"
    assert 'd.yaml:4:16: Minimum threshold for scorer "includes(costs)" must be a finite number between 0 and 1, ' \
           "got 1.2" in result.stderr
    assert "one-key mapping" not in result.stderr and "Traceback" not in result.stderr
    assert not (result.cwd / "evalcli.db").exists()


def test_every_two_key_shape_gets_the_rewrite_and_the_rewrite_is_valid(write: Callable[..., Path],
                                                                        cli: Callable[..., CliResult]) -> None:
    """Pasting each hint's YAML in place of the entry makes the dataset valid."""
    write("scorers.yaml", REGISTRY)
    entries = {
        "threshold": ("- includes: costs\n  threshold: 0.5", "- scorer: {includes: costs}\n  threshold: 0.5"),
        "id": ("- excludes: sorry\n  id: polite", "- scorer: {excludes: sorry}\n  id: polite"),
        "registered": ("- says-you:\n  threshold: 0.9", "- scorer: says-you\n  threshold: 0.9"),
        "bounds": ("- matches: 'said \\w+'\n  min: 0.2\n  max: 0.9",
                   "- scorer: {matches: said \\w+}\n  threshold: {min: 0.2, max: 0.9}"),
        "arguments": ("- called_tool: get_weather\n  times: 2", "- called_tool: {name: get_weather, times: 2}"),
        "both": ("- called_tool: search\n  times: 2\n  threshold: 0", "- scorer: {called_tool: {name: search, "
                                                                      "times: 2}}\n  threshold: 0"),
    }
    body = "".join(textwrap.indent(bad, "  ") + "\n" for bad, _ in entries.values())
    write("d.yaml", f"target: agents:echo\nscorers:\n{body}data:\n  - input: hi\n")
    result = cli("validate", "d.yaml")
    assert result.code == 2, result.stderr
    places = re.findall(r"^(?:error: )?(d\.yaml:\d+:\d+): .*cannot be written beside|^(?:error: )?(d\.yaml:\d+:\d+): "
                        r".* of called_tool: a scorer reference has one key", result.stderr, re.MULTILINE)
    hints = [hint_yaml(result.stderr, a or b) for a, b in places]
    assert hints == [good for _, good in entries.values()], result.stderr
    fixed = "".join(textwrap.indent(good, "  ") + "\n" for good in hints)
    write("d.yaml", f"target: agents:echo\nscorers:\n{fixed}data:\n  - input: hi\n")
    assert cli("validate", "d.yaml").code == 0


def test_a_gate_with_a_threshold_beside_it_and_other_near_misses(write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    write("scorers.yaml", REGISTRY)
    write("d.yaml", """
        target: agents:echo
        gates:
          - includes: said
            threshold: 0.4
          -
        scorers:
          - includes: a
            excludes: b
          - threshold: 0.5
        data:
          - input: hi
    """)
    result = cli("validate", "d.yaml")
    assert result.code == 2
    stderr = result.stderr
    assert "d.yaml:4:5: 'threshold' beside 'includes' in 'gates': a gate takes no threshold" in stderr
    assert hint_yaml(stderr, "d.yaml:4:5") == "- scorer: {includes: said}\n  threshold: 0.4"
    assert "remove it, or make this a scorer: under 'scorers:' write" in stderr
    assert "d.yaml:5:4: an empty entry in 'gates'" in stderr
    assert "d.yaml:8:5: one entry names 2 scorers (includes, excludes)" in stderr
    assert hint_yaml(stderr, "d.yaml:8:5") == "- includes: a\n- excludes: b"
    assert "d.yaml:9:5: 'threshold' is not a scorer: it belongs in the entry of the scorer it is for" in stderr


def test_keys_under_a_plain_list_entry_say_to_make_it_a_mapping(write: Callable[..., Path],
                                                              cli: Callable[..., CliResult]) -> None:
    write("scorers.yaml", REGISTRY)
    write("d.yaml", "target: agents:echo\nscorers:\n  - says-you\n    threshold: 0.8\ndata:\n  - input: hi\n")
    result = cli("validate", "d.yaml")
    assert result.code == 2
    assert "d.yaml:4:14: not valid YAML: mapping values are not allowed here" in result.stderr
    assert "'- says-you' (line 3) is a plain string, so it cannot have 'threshold' under it" in result.stderr
    rewrite = hint_yaml(result.stderr, "d.yaml:4:14")
    assert rewrite == "- scorer: says-you\n  threshold: 0.8"
    write("d.yaml", f"target: agents:echo\nscorers:\n{textwrap.indent(rewrite, '  ')}\ndata:\n  - input: hi\n")
    assert cli("validate", "d.yaml").code == 0
    write("e.yaml", "target: agents:echo\nscorers: [says-you]\ndata:\n  - hello\n    id: x\n")
    item = cli("validate", "e.yaml")
    assert "'- hello' (line 4) is a plain string, so it cannot have keys under it; make the entry a mapping, e.g. " \
           "'- input: hello'" in item.stderr


def test_a_threshold_in_the_registry_says_where_it_goes(write: Callable[..., Path],
                                                        cli: Callable[..., CliResult]) -> None:
    write("scorers.yaml", "scorers:\n  polite: {excludes: sorry, threshold: 0.5}\n  tool:\n    called_tool: search\n"
                          "    times: 2\n")
    write("d.yaml", "target: agents:echo\nscorers: [polite]\ndata:\n  - input: hi\n")
    result = cli("validate", "d.yaml")
    assert result.code == 2
    assert "scorers.yaml:2:29: a registered scorer is one kind with its arguments: 'threshold' is set where a " \
           "dataset uses it" in result.stderr
    assert hint_yaml(result.stderr, "scorers.yaml:2:29") == "- scorer: polite\n  threshold: 0.5"
    assert hint_yaml(result.stderr, "scorers.yaml:5:5") == "tool: {called_tool: {name: search, times: 2}}"


def test_empty_labels_say_what_to_write_naming_the_datasets_scorers(write: Callable[..., Path],
                                                                     cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:echo
        gates: [{includes: said}]
        scorers: [{excludes: sorry}]
        data:
          - input: hi
            labels: {}
          - input: there
            labels: [pass]
    """)
    result = cli("validate", "d.yaml")
    assert result.code == 2
    assert "d.yaml:6:13: item 0: 'labels' is empty: it names no scorer, so it labels nothing\n  hint: write labels: " \
           "{includes(said): pass} (pass, fail or a score from 0 to 1) for one of the dataset's gates and scorers " \
           "(includes(said), excludes(sorry)), or remove 'labels' from this conversation" in result.stderr
    assert "d.yaml:8:13: item 1: 'labels' must be a mapping of scorer id -> score, got a list" in result.stderr
    assert "must be a mapping of scorer id -> score\n" not in result.stderr


def test_empty_collections_say_what_is_wrong_where(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:echo
        scorers: []
        data:
          - id: ''
            input: hi
          - turns: [{}]
          - inputs: []
          - input: fine
            tags: []
            metadata: {}
            target_options: {}
    """)
    result = cli("validate", "d.yaml")
    assert result.code == 2
    stderr = result.stderr
    assert "d.yaml:4:9: item 0: 'id': id must not be empty" in stderr
    assert "d.yaml:6:13: item 1: turn 0 must be an object with an 'input' property: it is empty" in stderr
    assert "d.yaml:7:13: item 2: 'inputs' must be a non-empty array\n  hint: list the user's messages" in stderr
    assert "tags" not in stderr and "metadata" not in stderr and "target_options" not in stderr  # empty is fine
    write("d.yaml", "target: agents:echo\nscorers: []\ndata:\n  - input: hi\n")
    none = cli("validate", "d.yaml")
    assert "d.yaml:2:10: At least one scorer or gate must be provided: 'scorers' is empty" in none.stderr
    write("t.yaml", "target: {}\nscorers: [{includes: a}]\ndata:\n  - input: hi\n")
    assert "t.yaml:1:9: 'target' is empty" in cli("validate", "t.yaml").stderr


def test_gates_on_an_input_item_show_the_one_turn_rewrite(write: Callable[..., Path],
                                                         cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:echo
        scorers: [{includes: said}]
        data:
          - id: one
            input: hello
            gates:
              - includes: hello
          - id: two
            inputs: [hi, bye]
            scorers: [{includes: bye, threshold: 2}]
    """)
    result = cli("run", "d.yaml")
    assert result.code == 2
    stderr = result.stderr
    assert "d.yaml:6:5: item 0: 'gates' cannot be written on an 'input' item: per-turn gates belong to a turn of a " \
           "'turns:' item" in stderr
    assert "or put them in the dataset's top-level 'gates:', which apply to every conversation as a whole" in stderr
    rewrite = hint_yaml(stderr, "d.yaml:6:5")
    assert rewrite == "turns:\n  - input: hello\n    gates: [{includes: hello}]"
    assert hint_yaml(stderr, "d.yaml:10:5") == "turns:\n  - input: hi\n  - input: bye\n    scorers: [{includes: bye, " \
                                                "threshold: 2}]"
    assert "d.yaml:10:31: 'threshold' cannot be written beside 'includes'" in stderr  # the entries are checked too
    assert "unknown key 'gates'" not in stderr and not (result.cwd / "evalcli.db").exists()
    write("d.yaml", "target: agents:echo\ndata:\n  - id: one\n" + textwrap.indent(rewrite, "    ") + "\n")
    assert cli("validate", "d.yaml").code == 0
    ran = cli("run", "d.yaml")  # one turn: nothing to recall, so no memory warning follows the rewrite
    assert ran.code == 0 and "multi-turn" not in ran.stderr and "memory" not in ran.stderr, ran.stderr
    write("d.yaml", "target: agents:echo\ngates: [{includes: said}]\ndata:\n  - turns: [{input: a}, {input: b}]\n"
                    "  - simulate: {goal: g, opening: hi, max_turns: 1}\n  - input: c\n")
    assert "its 1 multi-turn conversation can recall" in cli("validate", "d.yaml").stderr + cli("run", "d.yaml").stderr


def test_gates_on_an_item_whose_text_is_a_whole_interpolation(write: Callable[..., Path],
                                                              cli: Callable[..., CliResult]) -> None:
    """A text written wholly as one ``${NAME}`` is a ``str`` subclass: the rewrite hint shows it (it was an internal
    error, exit 70, from yaml.safe_dump), a secret one by its reference."""
    write("d.yaml", """
        target: agents:echo
        data:
          - input: "${EVALCLI_TEST_UNSET_VAR}"
            gates: null
          - input: "${EVALCLI_TEST_TOKEN}"
            gates: [{includes: "${EVALCLI_TEST_TOKEN}"}]
    """)
    result = cli("validate", "d.yaml", env={"EVALCLI_TEST_TOKEN": "sk-test-9f8e7d6c5b4a39281706"})
    assert result.code == 2, result.stderr
    assert "internal error" not in result.stderr
    assert "EVALCLI_TEST_UNSET_VAR is not set" in result.stderr
    assert hint_yaml(result.stderr, "d.yaml:4:5") == "turns:\n  - input: ''\n    gates: null"
    assert "sk-test-9f8e7d6c5b4a39281706" not in result.stderr + result.stdout
    assert "${EVALCLI_TEST_TOKEN}" in hint_yaml(result.stderr, "d.yaml:6:5")


def test_every_missing_output_folder_is_named_at_once_before_anything_runs(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:echo\nscorers: [{includes: said}]\ndata:\n  - input: hi\n")
    result = cli("run", "d.yaml", "--html", "out/r.html", "--junit", "out/j.xml", "--markdown", "out/s.md",
                 "--json", "out/x.json", "--db", "runs/e.db")
    assert result.code == 2
    assert result.stderr == (
        "error: 5 output paths cannot be used:\n"
        "  --db runs/e.db: the folder runs does not exist\n"
        "  --json out/x.json: the folder out does not exist\n"
        "  --junit out/j.xml: the folder out does not exist\n"
        "  --markdown out/s.md: the folder out does not exist\n"
        "  --html out/r.html: the folder out does not exist\n"
        "  hint: create them first (mkdir -p runs out), or choose other paths\n")
    assert sorted(p.name for p in workdir.iterdir()) == ["agents.py", "d.yaml"]  # nothing run, nothing written
    calibrate = cli("calibrate", "d.yaml", "--json", "out/c.json", "--db", "out/e.db")
    assert calibrate.code == 2 and "--db out/e.db: the folder out does not exist" in calibrate.stderr \
        and "--json out/c.json: the folder out does not exist" in calibrate.stderr
    assert cli("run", "d.yaml").code == 0
    for args in (["show", "latest", "--json", "out/x.json"], ["show", "latest", "0", "--json", "out/x.json"],
                 ["report", "latest", "--html", "out/r.html"], ["compare", "latest", "latest", "--html", "out/c.html"],
                 ["merge", "evalcli.db", "--out", "out/m.db"]):
        refused = cli(*args)
        assert refused.code == 2 and f"{args[-2]} {args[-1]}: the folder out does not exist\n  hint: create it " \
                                     "first (mkdir -p out), or choose another path" in refused.stderr, refused.stderr
    assert not (workdir / "out").exists()


def test_an_unregistered_scorer_is_kept_with_the_run_and_missing_only_from_the_scores_table(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """What "not stored" loses, measured: show, diff and compare have every score; the 'scores' table (and so the HTML
    report's chart across runs) has the registered ones only. Every run says so, once."""
    write("scorers.yaml", REGISTRY)
    write("d.yaml", """
        target: agents:echo
        scorers: [says-you, {includes: hi}]
        data:
          - input: hi
          - input: bye
    """)
    plain = cli("run", "d.yaml", "--json", "-")
    assert plain.code == 0 and plain.stderr.count("not registered") == 1, plain.stderr  # said once (docs/storage.md)
    with plain.db() as conn:
        assert {r[0] for r in conn.execute("SELECT scorer_id FROM scores")} == {"says-you"}
        assert {r[0] for r in conn.execute("SELECT scorer_id FROM scorers")} == {"says-you"}
    shown = cli("show", "latest", "--json", "-").json
    assert shown["scores"] == {"says-you": 1.0, "includes(hi)": 0.5}
    assert [i["scores"]["includes(hi)"] for i in shown["items"]] == [1.0, 0.0]
    html = cli("run", "d.yaml", "--html", "r.html")
    warning = ("warning: includes(hi) of d.yaml: not registered in scorers.yaml, so the 'scores' table has no rows for "
               "it and the HTML report's chart across runs leaves it out (the run keeps the scores: show, diff, compare "
               "and the report's tables have them); 'evalcli validate d.yaml' prints the lines that register it")
    assert warning in html.stderr.splitlines(), html.stderr
    page = (html.cwd / "r.html").read_text()
    assert "Not in this chart: includes(hi). They are not registered in scorers.yaml" in page
    runs = [plain.json["run_id"], cli("show", "latest", "--json", "-").json["run_id"]]
    assert "includes(hi)" in cli("diff", *runs).stdout and "includes(hi)" in cli("compare", *runs).stdout
    listed = cli("validate", "d.yaml").stdout
    assert "1 not registered in scorers.yaml: each run keeps their scores (show, diff, compare and the reports have " \
           "them), but the 'scores' table has no rows of theirs" in listed


def test_a_secret_in_a_dataset_error_is_redacted(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:echo
        scorers:
          - scorer: {includes: "${PLAIN_NAME}"}
            threshold: 2
        data:
          - input: hi
    """)
    secret = "sk-live-0123456789abcdef"
    result = cli("validate", "d.yaml", env={"PLAIN_NAME": secret})
    # the secret is named by the variable it was read from, so the error can be copied back (docs/secrets.md)
    assert result.code == 2 and 'scorer "includes(${PLAIN_NAME})"' in result.stderr
    assert secret not in result.stdout + result.stderr


# -- invariants, on the library ----------------------------------------------------------------------------------

ARGUMENT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["includes", "excludes", "equals", "similarity"]), value=ARGUMENT,
       threshold=st.floats(0, 1), name=st.none() | st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True))
def test_the_wrapper_a_hint_shows_loads_as_what_was_meant(tmp_path_factory: pytest.TempPathFactory, kind: str,
                                                          value: str, threshold: float, name: str | None) -> None:
    """Whatever the check's argument, the rewrite in the hint, pasted in place of the entry, loads as that check with
    that threshold (and id)."""
    folder = tmp_path_factory.mktemp("wrap")
    (folder / "agents.py").write_text("def echo(input, **kw):\n    return input\n")
    entry = {kind: value, "threshold": threshold, **({"id": name} if name else {})}
    text = yaml.safe_dump({"target": "agents:echo", "scorers": [entry], "data": [{"input": "hi"}]}, sort_keys=False,
                          allow_unicode=True)
    path = folder / "d.yaml"
    path.write_text(text)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    problem = next(p for p in caught.value.problems if "cannot be written beside" in p.message)
    rewrite = "\n".join(line.removeprefix("      ") for line in problem.hint.splitlines()[1:])
    path.write_text(yaml.safe_dump({"target": "agents:echo"}) + "scorers:\n" + textwrap.indent(rewrite, "  ")
                    + "\ndata: [{input: hi}]\n")
    spec = load_dataset(path).scorers[0]
    assert spec.kind == kind and spec.threshold is not None and spec.threshold.min == threshold
    assert (spec.id == name) if name else spec.id.startswith(f"{kind}(")


@settings(max_examples=60, deadline=None)
@given(layout=st.lists(st.tuples(st.sampled_from(["--json", "--junit", "--markdown", "--html"]),
                                 st.sampled_from(["here", "a", "b", "a/deeper"]), st.sampled_from(["r", "s"])),
                       min_size=1, max_size=6))
def test_check_outputs_names_every_path_whose_folder_is_missing(tmp_path_factory: pytest.TempPathFactory,
                                                                layout: list[tuple[str, str, str]]) -> None:
    """Every path under a missing folder is named, and each missing folder is in the hint once; a folder that exists
    is never named; nothing is created."""
    from evalcli.evaluate import check_outputs

    root = tmp_path_factory.mktemp("out")
    (root / "here").mkdir()
    files = [(what, root / folder / f"{stem}.out") for what, folder, stem in layout]
    missing = [(what, path) for what, path in files if not path.parent.is_dir()]
    if not missing:
        check_outputs(files)
        assert sorted(p.name for p in root.iterdir()) == ["here"] and not any((root / "here").iterdir())
        return
    with pytest.raises(UsageError) as caught:
        check_outputs(files)
    text = str(caught.value)
    for what, path in missing:
        assert f"{what} {path}: the folder {path.parent} does not exist" in text
    made = re.search(r"\(mkdir -p ([^)]*)\)", text.split("hint: ", 1)[1])
    assert made is not None and made[1].split() == list(dict.fromkeys(str(path.parent) for _, path in missing)), text
    assert f"{root / 'here'}/" not in text
    assert sorted(p.name for p in root.iterdir()) == ["here"] and not any((root / "here").iterdir())


def test_the_json_of_show_item_to_a_missing_folder_is_a_user_error_not_a_crash(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:echo\nscorers: [{includes: said}]\ndata:\n  - input: hi\n")
    assert cli("run", "d.yaml").code == 0
    result = cli("show", "latest", "--json", "nowhere/x.json")
    assert result.code == 2 and "internal error" not in result.stderr
    assert json.loads(cli("show", "latest", "--json", "-").stdout)["scores"] == {"includes(said)": 1.0}
