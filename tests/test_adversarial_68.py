"""Adversarial try 68: checks, the scorer library and custom Python scorers (docs/checks.md, docs/scorers.md),
broken as users would: the real CLI, real SQLite files. Each test failed on the main this branch started from.

- A custom scorer that changed ``run.output`` (cleared it, rewrote a message) changed what every scorer after it
  saw: ``includes(hello)`` scored 0 on a conversation that said hello.
- A custom scorer that called ``sys.exit()`` escaped the event loop: a traceback, the run ``interrupted`` and the
  exit code the scorer's own (3, which reads as ``--strict``'s "scored"), where docs/reliability.md promises the
  target's treatment (``failed``, exit 70, the conversation named, a ``--resume`` command).
- ``Score("0.5")`` scored 0.5 while a bare ``"0.5"`` was refused, and a number that is not a ``float`` or ``int``
  (``Fraction(1, 2)``, numpy's ``float32``) was refused bare but taken inside ``Score``.
- A ``scorers.yaml`` entry named like a built-in check (``used_no_tools: {includes: bye}``) silently replaced the
  check for every dataset beside it that wrote ``- used_no_tools``.
- ``json_output`` scored 0 on a fenced block with Windows line endings (```` ```json\r\n{...}\r\n``` ````).
- A ``json_output`` schema whose ``$ref`` pointed nowhere (a URL, a missing ``$defs`` entry) validated, then was
  ``_WrappedReferencingError: Unresolvable`` on every conversation (exit 4) instead of an error at its line.
- A gate scoring 0.9999999 printed ``1 FAIL``; a mean of 0.49999999 against ``threshold: 0.5`` ``0.5 FAIL``.
- A rubric whose weights add up past a float (two of ``1.0e+308``) validated, and would score NaN or 0.
- ``equals: Hello`` on ``"Hello\n"`` said ``the text "hello" is not 'Hello'``: the reason hid the whitespace.

Held up: case folding as documented (lower-cased), invalid regexes at their line, NaN/Infinity not JSON, malformed
and parallel tool calls, tool errors, not_scorable gates, left-to-right means, registry/inline id conflicts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult

AGENT = '''
import json

def agent(input: str):
    """Messages written as JSON in the input are the reply; any other input is echoed."""
    return json.loads(input) if input.startswith("[") else input
'''


def test_a_custom_scorer_that_changes_its_run_changes_nothing_another_scorer_sees(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("meddle.py", '''
        def clear(run):
            run.output.clear()
            return 1.0

        def rewrite(run):
            for message in run.output:
                message["content"] = "MUTATED"
            for turn in run.turns:
                turn.output.clear()
            run.ground_truth["city"] = "nowhere"
            return 1.0

        def reads(run):
            return 1.0 if run.ground_truth == {"city": "paris"} and run.turns[0].output else 0.0
    ''')
    write("d.yaml", '''
        target: agent:agent
        gates:
          - python: meddle:clear
          - includes: hello
        scorers:
          - python: meddle:rewrite
          - python: meddle:reads
          - {scorer: {includes: hello}, id: said-hello}
          - {scorer: {includes: mutated}, id: mutated}
        data:
          - id: a
            input: hello world
            ground_truth: {city: paris}
          - id: b
            input: hello again
            ground_truth: {city: paris}
    ''')
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    out = result.json
    assert out["verdict"] == "passed"
    assert out["scores"] == {"python(meddle:rewrite)": 1.0, "python(meddle:reads)": 1.0, "said-hello": 1.0,
                             "mutated": 0.0}
    stored = [json.loads(row[0]) for row in result.db().execute("SELECT output FROM turns ORDER BY item_index")]
    assert [m["content"] for messages in stored for m in messages] == ["hello world", "hello again"]


def test_a_custom_scorer_that_calls_sys_exit_stops_the_run_as_a_target_that_does(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("quits.py", '''
        import sys

        def quits(run):
            if "bye" in run.output[-1]["content"]:
                sys.exit(3)
            return 1.0

        async def quits_async(run):
            if "bye" in run.output[-1]["content"]:
                sys.exit(3)
            return 1.0
    ''')
    for name in ("quits", "quits_async"):
        write(f"{name}.yaml", f'''
            target: agent:agent
            concurrency: 1
            scorers:
              - python: quits:{name}
              - includes: hello
            data:
              - {{id: first, input: hello}}
              - {{id: second, input: bye now}}
        ''')
        result = cli("run", f"{name}.yaml", "--db", f"{name}.db")
        assert result.code == 70, result.stderr
        assert "Traceback" not in result.stderr and "unhandled exception" not in result.stderr, result.stderr
        assert "conversation second: ended by SystemExit(3)" in result.stderr, result.stderr
        assert "--resume" in result.stderr
        rows = result.db(f"{name}.db").execute("SELECT status FROM runs").fetchall()
        assert [r[0] for r in rows] == ["failed"]


def test_a_custom_scorer_returns_any_real_number_and_nothing_else_bare_or_in_a_score(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("odd.py", '''
        from fractions import Fraction
        from evalcli import Score, not_scorable

        def fraction(run):
            return Fraction(1, 2)

        def fraction_in_score(run):
            return Score(Fraction(1, 4), "a quarter")

        def text_in_score(run):
            return Score("0.5", "a string")

        def none_in_score(run):
            return Score(None, "nothing")

        def huge(run):
            return 10 ** 400

        def reason_mapping(run):
            return Score(0.5, {"why": "a mapping"})

        def not_scorable_number(run):
            return not_scorable(123)
    ''')
    names = ["fraction", "fraction_in_score", "text_in_score", "none_in_score", "huge", "reason_mapping",
             "not_scorable_number"]
    write("d.yaml", "target: agent:agent\nscorers:\n" + "".join(f"  - python: odd:{n}\n" for n in names)
          + "data:\n  - {id: a, input: hello}\n")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 4, result.stderr
    out = result.json
    assert out["scores"] == {"python(odd:fraction)": 0.5, "python(odd:fraction_in_score)": 0.25}
    errors = {k.removeprefix("python(odd:").removesuffix(")"): v.get("error")
              for k, v in out["items"][0]["outcomes"]["scorers"].items() if v.get("error")}
    assert errors == {
        "text_in_score": "TypeError: scorer python(odd:text_in_score) returned a Score whose score is of type "
                         "str, not a number; return a float, evalcli.Score(score, reason) or evalcli.not_scorable(reason)",
        "none_in_score": "TypeError: scorer python(odd:none_in_score) returned a Score whose score is of "
                         "type NoneType, not a number; return a float, evalcli.Score(score, reason) or "
                         "evalcli.not_scorable(reason)",
        "huge": "ValueError: scorer python(odd:huge) returned the score " + "1" + "0" * 39
                + "...: a score must be a finite number (return evalcli.not_scorable(reason) when there is "
                "nothing to score)",
        "reason_mapping": "TypeError: scorer python(odd:reason_mapping) returned a reason of type dict; a "
                          "reason is a string (or None)",
        "not_scorable_number": "TypeError: scorer python(odd:not_scorable_number) returned a reason of type "
                               "int; a reason is a string (or None)",
    }


def test_a_registered_id_that_names_a_built_in_check_must_be_that_check(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("scorers.yaml", '''
        scorers:
          used_no_tools:
            includes: bye
          no_tool_errors: no_tool_errors
          json_output:
            json_output: {schema: {type: object}}
    ''')
    write("d.yaml", '''
        target: agent:agent
        gates:
          - used_no_tools
          - no_tool_errors
        data:
          - {id: a, input: hello}
    ''')
    for command in ("validate", "run"):
        result = cli(command, "d.yaml")
        assert result.code == 2, result.stdout + result.stderr
        assert ("scorers.yaml:2:3: 'used_no_tools' is the name of a built-in check, registered here as "
                "{includes: bye}") in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert result.stderr.count("is the name of a built-in check") == 1, result.stderr  # the same kind, configured, is fine
    assert not (result.cwd / "evalcli.db").exists()


def test_json_output_reads_a_fenced_block_written_with_windows_line_endings(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("d.yaml", r'''
        target: agent:agent
        scorers:
          - scorer: {json_output: {schema: {type: object, required: [a]}}}
            id: object-with-a
        data:
          - {id: crlf, input: "```json\r\n{\"a\": 1}\r\n```"}
          - {id: crlf-bare-fence, input: "```\r\n{\"a\": 2}\r\n```\r\n"}
          - {id: lf, input: "```json\n{\"a\": 3}\n```"}
          - {id: two-blocks, input: "```json\r\n{\"a\": 1}\r\n```\r\n```json\r\n{\"a\": 1}\r\n```"}
    ''')
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    scores = {item["id"]: item["outcomes"]["scorers"]["object-with-a"]["score"] for item in result.json["items"]}
    assert scores == {"crlf": 1.0, "crlf-bare-fence": 1.0, "lf": 1.0, "two-blocks": 0.0}


def test_a_json_output_schema_whose_ref_points_nowhere_is_a_validation_error_at_its_line(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("d.yaml", '''
        target: agent:agent
        scorers:
          - scorer: {json_output: {schema: {$defs: {city: {type: string}}, $ref: "#/$defs/city"}}}
            id: a-city
          - scorer: {json_output: {schema: {$ref: "https://example.com/booking.json"}}}
            id: remote
          - scorer: {json_output: {schema: {type: object, properties: {to: {$ref: "#/$defs/town"}}}}}
            id: missing-def
        data:
          - {id: a, input: '"Paris"'}
    ''')
    for command in ("validate", "run"):
        result = cli(command, "d.yaml")
        assert result.code == 2, result.stdout + result.stderr
        assert "d.yaml:5:36:" in result.stderr and "d.yaml:7:36:" in result.stderr, result.stderr
        assert "$ref 'https://example.com/booking.json' points nowhere" in result.stderr, result.stderr
        assert "$ref '#/$defs/town' points nowhere" in result.stderr, result.stderr
        assert "d.yaml:3:" not in result.stderr and "Traceback" not in result.stderr
    assert not (result.cwd / "evalcli.db").exists()


def test_a_score_that_misses_its_bound_by_a_hair_never_reads_as_the_bound_beside_fail(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("said.py", '''
        def said(run):
            """The number the agent said."""
            return float(run.output[-1]["content"])
    ''')
    write("d.yaml", '''
        target: agent:agent
        gates:
          - python: said:said
        scorers:
          - scorer: {python: said:said}
            id: hair
            threshold: 1
          - scorer: {python: said:said}
            id: within-tolerance
            threshold: 0.9999999005
        data:
          - id: a
            turns:
              - input: "0.9999999"
                scorers: [{scorer: {python: said:said}, id: turn-hair, threshold: 1}]
    ''')
    result = cli("run", "d.yaml", "--strict")
    assert result.code == 1, result.stderr
    out = result.stdout + result.stderr
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    assert ["python(said:said)", "0.9999999", "FAIL"] in rows, out
    assert ["hair", "0.9999999", ">= 1", "FAIL"] in rows, out
    assert ["within-tolerance", "1", ">= 1", "pass"] in rows, out
    assert "FAIL turn-hair=0.9999999 (>= 1)" in out, out
    assert "gate python(said:said) scored 0.9999999" in out, out


def test_rubric_weights_that_add_up_past_a_float_are_a_validation_error(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("d.yaml", '''
        target: agent:agent
        scorers:
          - rubric:
              model: openai/gpt-4o-mini
              criteria: [{criterion: Names the city, weight: 1.0e+308}, {criterion: Gives a number, weight: 1.0e+308}]
        data:
          - {id: a, input: hi}
    ''')
    result = cli("validate", "d.yaml")
    assert result.code == 2, result.stdout + result.stderr
    assert "d.yaml:5:" in result.stderr and "weights add up to more than a number can hold" in result.stderr, \
        result.stderr


def test_equals_and_an_exact_match_show_the_whitespace_they_failed_on(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("d.yaml", r'''
        target: agent:agent
        scorers:
          - {scorer: {equals: {value: Hello, ignore_case: false}}, id: eq}
          - {scorer: {matches: {pattern: Hello, exact: true}}, id: exact}
          - {scorer: {includes: x}, id: inc}
        data:
          - {id: newline, input: "Hello\n"}
          - {id: spaces, input: "   \n "}
          - {id: two, input: "Hello  there"}
    ''')
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    reasons = {item["id"]: {k: v["reason"] for k, v in item["outcomes"]["scorers"].items()}
               for item in result.json["items"]}
    assert reasons["newline"]["eq"] == "the text \"Hello\\n\" is not 'Hello'"
    assert reasons["newline"]["exact"] == '/Hello/ does not match the whole of "Hello\\n"'
    assert reasons["spaces"] == {"eq": "the text \"   \\n \" is not 'Hello'",
                                 "exact": '/Hello/ does not match the whole of "   \\n "',
                                 "inc": "'x' not found in \"   \\n \""}
    assert reasons["two"]["eq"] == "the text \"Hello  there\" is not 'Hello'"
