"""Tapes that stay true (docs/hermetic.md): ``--record-tools`` with ``--resume`` keeps the first invocation's lines, a
tape that ``replay`` reads is part of the configuration a resume compares (by content), a tape holds no secret, and a
call refused under ``--hermetic`` is never recorded as a result. Through the real CLI, with a callable target whose
tool is an ``@evalcli.tool`` function."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import CliResult

AGENT = '''
import json, os
import evalcli


@evalcli.tool
def get_weather(city: str, api_key: str = "", tenant: str = "") -> dict:
    """The live weather service (a marker says it ran)."""
    if os.environ.get("TOOL_DISABLED"):
        raise RuntimeError("the live weather service must not be called")
    out = {"city": city, "condition": "live " + city.lower(), "temperature_f": len(city)}
    if api_key:
        out["authorised_with"] = api_key
    return out


def weather(input, **options):
    """Looks the city up with the decorated tool; breaks after the call when FAIL_CITY names the city."""
    city = input.rstrip("?").split()[-1]
    arguments = {"city": city, **{k: options[k] for k in ("api_key", "tenant") if options.get(k)}}
    try:
        value = get_weather(**arguments)
    except Exception as exc:
        value = f"failed: {type(exc).__name__}: {exc}"
    if os.environ.get("FAIL_CITY") == city:
        raise RuntimeError(f"the agent broke on {city}")
    content = value if isinstance(value, str) else json.dumps(value)
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": "c1", "content": content},
            {"role": "assistant", "content": f"{city}: {content}"}]
'''

DATA = """
data:
  - id: london
    inputs:
      - What is the weather in London?
      - And in Leeds?
  - id: paris
    input: What is the weather in Paris?
  - id: tokyo
    input: What is the weather in Tokyo?
gates:
  - includes: temperature_f
"""


def setup(workdir: Path) -> None:
    (workdir / "weather_agent.py").write_text(AGENT)


def tape_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def answers(result: CliResult) -> dict[str, list[str]]:
    return {item["id"]: [m["content"] for turn in item["turns"] for m in turn["output"]
                         if m["role"] == "assistant" and m.get("content")] for item in result.json["items"]}


def test_record_tools_on_resume_keeps_the_first_invocations_lines(write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult], workdir: Path) -> None:
    setup(workdir)
    write("weather.yaml", "target: weather_agent:weather\n" + DATA)
    whole = cli("run", "weather.yaml", "--record-tools", "whole", "--json", "-")
    assert whole.code == 0, whole.stderr
    expected = tape_lines(workdir / "whole" / "weather.tape.jsonl")
    assert [line["identity"] for line in expected] == ["id:london", "id:london", "id:paris", "id:tokyo"]

    first = cli("run", "weather.yaml", "--record-tools", "tapes", "--json", "-", env={"FAIL_CITY": "Paris"})
    assert first.code == 4, first.stderr  # paris errored after its tool call: the resume plays it again
    tape = workdir / "tapes" / "weather.tape.jsonl"
    assert [line["identity"] for line in tape_lines(tape)] == ["id:london", "id:london", "id:paris", "id:tokyo"]
    resumed = cli("run", "weather.yaml", "--resume", first.json["run_id"], "--record-tools", "tapes", "--json", "-")
    assert resumed.code == 0, resumed.stderr
    assert [item["id"] for item in resumed.json["items"]] == ["london", "paris", "tokyo"]
    # old main: the tape held paris's line only; london's and tokyo's lines from the first invocation were lost
    assert tape_lines(tape) == expected  # what one uninterrupted run records: paris's line replaced, not doubled


def test_a_replayed_tape_edited_before_a_resume_is_refused_by_its_path(write: Callable[..., Path],
                                                                       cli: Callable[..., CliResult],
                                                                       workdir: Path) -> None:
    setup(workdir)
    write("weather.yaml", "target: weather_agent:weather\n" + DATA)
    assert cli("run", "weather.yaml", "--record-tools", "tapes").code == 0
    tape = workdir / "tapes" / "weather.tape.jsonl"
    recorded = tape.read_text()
    write("replayed.yaml", "target: weather_agent:weather\ntools: {replay: tapes/weather.tape.jsonl}\n" + DATA)
    offline = {"TOOL_DISABLED": "1"}
    first = cli("run", "replayed.yaml", "--hermetic", "--json", "-", env={**offline, "FAIL_CITY": "Tokyo"})
    assert first.code == 4, first.stderr
    tape.write_text(recorded.replace("live tokyo", "edited tokyo"))
    refused = cli("run", "replayed.yaml", "--resume", first.json["run_id"], "--hermetic", env=offline)
    assert refused.code == 2, refused.stderr  # old main: accepted, the resumed run mixed two tapes
    assert "tools.tape (changed: the content of tapes/weather.tape.jsonl)" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    tape.write_text(recorded)
    resumed = cli("run", "replayed.yaml", "--resume", first.json["run_id"], "--hermetic", "--json", "-", env=offline)
    assert resumed.code == 0, resumed.stderr
    assert answers(resumed)["tokyo"] == ['Tokyo: {"city": "Tokyo", "condition": "live tokyo", "temperature_f": 5}']


def test_a_tape_holds_no_secret_and_still_replays(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                  workdir: Path) -> None:
    setup(workdir)
    secret, tenant = "wx-884422991-zulu", "acme-tenant-7731"  # the second one secret only because it is declared
    body = "secrets: [WEATHER_API_KEY, TENANT_ID]\ntarget_options: {api_key: '${WEATHER_API_KEY}', tenant: '${TENANT_ID}'}\n" + DATA
    env = {"WEATHER_API_KEY": secret, "TENANT_ID": tenant}
    write("weather.yaml", "target: weather_agent:weather\n" + body)
    recorded = cli("run", "weather.yaml", "--record-tools", "tapes", env=env)
    assert recorded.code == 0, recorded.stderr
    text = (workdir / "tapes" / "weather.tape.jsonl").read_text()
    for form in (secret, tenant, base64.b64encode(secret.encode()).decode().rstrip("="), secret.upper()):
        assert form not in text  # old main: in each line's arguments and result
    lines = tape_lines(workdir / "tapes" / "weather.tape.jsonl")
    assert lines[0]["arguments"] == {"api_key": "[redacted]", "city": "London", "tenant": "[redacted]"}
    assert lines[0]["result"]["authorised_with"] == "[redacted]"
    # the redacted tape still answers the same calls (exact: compared as the tape holds them), the tool disabled
    write("replayed.yaml", "target: weather_agent:weather\ntools: {replay: tapes/weather.tape.jsonl}\n" + body)
    replayed = cli("run", "replayed.yaml", "--hermetic", "--json", "-",
                   env={**env, "TOOL_DISABLED": "1"})
    assert replayed.code == 0, replayed.stderr
    assert [m["source"] for item in replayed.json["items"] for turn in item["turns"] for m in turn["output"]
            if m["role"] == "tool"] == ["replay"] * 4


def test_a_call_refused_under_hermetic_is_never_recorded(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                         workdir: Path) -> None:
    setup(workdir)
    mocked = "tools:\n  get_weather:\n    - when: {city: Paris}\n      returns: {condition: mocked, temperature_f: 1}\n"
    write("weather.yaml", "target: weather_agent:weather\n" + mocked + DATA)
    hermetic = cli("run", "weather.yaml", "--hermetic", "--record-tools", "tapes", "--json", "-")
    assert hermetic.code == 4, hermetic.stderr  # london and tokyo: refused
    lines = tape_lines(workdir / "tapes" / "weather.tape.jsonl")
    assert lines == [{"identity": "id:paris", "turn": 0, "call": 0, "tool": "get_weather", "arguments": {"city": "Paris"},
                      "result": {"condition": "mocked", "temperature_f": 1}}]  # old main: the refusals as errors too
    write("replayed.yaml", "target: weather_agent:weather\ntools: {replay: tapes/weather.tape.jsonl}\n" + DATA)
    replayed = cli("run", "replayed.yaml", "--json", "-")  # not hermetic: what the tape lacks runs live
    assert replayed.code == 0, replayed.stderr
    said = answers(replayed)
    assert said["london"][0] == 'London: {"city": "London", "condition": "live london", "temperature_f": 6}'
    assert "MockedToolError" not in json.dumps(said) and "--hermetic" not in json.dumps(said)
    assert said["paris"] == ['Paris: {"condition": "mocked", "temperature_f": 1}']


conversations = st.dictionaries(st.sampled_from([f"id:c{n}" for n in range(6)]),
                                st.lists(st.dictionaries(st.sampled_from(["city", "day", "q"]), st.text(max_size=6),
                                                         max_size=3), min_size=1, max_size=3), min_size=1)


def _calls(arguments: list[dict[str, Any]], refused: set[int] = frozenset()) -> list[Any]:  # type: ignore[assignment]
    from evalcli.tools import ToolCall

    return [ToolCall(0, n, "get_weather", args, "live", result={"ok": n}, refused=n in refused)
            for n, args in enumerate(arguments)]


@given(conversations, st.data())
def test_a_resumed_recording_is_the_uninterrupted_one(played: dict[str, list[dict[str, Any]]],
                                                      data: st.DataObject) -> None:
    """Whichever conversations the first invocation finished, and in whatever order any of them finished, the tape
    after the resume is the tape of one uninterrupted run (refused calls on neither)."""
    import tempfile

    from evalcli.tools import TapeRecorder

    order = {f"id:c{n}": n for n in range(6)}
    first = data.draw(st.lists(st.sampled_from(sorted(played)), unique=True))
    again = data.draw(st.lists(st.sampled_from(first), unique=True)) if first else []  # errored: played again
    refused = data.draw(st.sets(st.integers(0, 2)))
    with tempfile.TemporaryDirectory() as folder:
        whole = TapeRecorder(Path(folder) / "whole", "d.yaml", order)
        for identity in data.draw(st.permutations(sorted(played))):
            whole.add(order[identity], identity, _calls(played[identity], refused))
        expected = whole.write().read_text()
        once = TapeRecorder(Path(folder) / "tapes", "d.yaml", order)
        for identity in first:
            once.add(order[identity], identity,
                     _calls([{"stale": "yes"}] if identity in again else played[identity], refused))
        once.write()
        resumed = TapeRecorder(Path(folder) / "tapes", "d.yaml", order, resume=True)
        for identity in [i for i in played if i not in first or i in again]:
            resumed.add(order[identity], identity, _calls(played[identity], refused))
        assert resumed.write().read_text() == expected


@given(st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=8, max_size=16),
       st.text(max_size=4), st.text(max_size=4))
def test_no_secret_survives_a_tape_and_the_tape_still_answers(secret: str, before: str, after: str) -> None:
    """A secret anywhere in a call's arguments or result is on no tape (raw, any case, base64), and the tape read
    back answers the call that carried it (exact: the arguments compared as the tape holds them)."""
    import os
    import tempfile

    from evalcli.secrets import usable
    from evalcli.tools import TapeRecorder, read_tape, tape_arguments

    if not usable(secret) or secret.strip() != secret or len(secret.lower()) != len(secret):
        return  # (a secret whose lower case is longer, "İ", is the redactor's own matter: tests/test_secrets*.py)
    arguments = {"city": f"{before}{secret}{after}", "nested": {"key": [secret]}}
    os.environ["EVALCLI_TEST_PLANTED_TOKEN"] = secret  # named like a secret: the redactor knows it
    try:
        with tempfile.TemporaryDirectory() as folder:
            recorder = TapeRecorder(folder, "d.yaml")
            recorder.add(0, "id:a", _calls([arguments]))
            path = recorder.write()
            text = path.read_text(encoding="utf-8").lower()
            for form in (secret, base64.b64encode(secret.encode()).decode().rstrip("="), json.dumps(secret)[1:-1]):
                assert form.lower() not in text
            [recorded] = read_tape(path).calls["id:a"]
            assert recorded.arguments == tape_arguments(arguments)
    finally:
        del os.environ["EVALCLI_TEST_PLANTED_TOKEN"]
