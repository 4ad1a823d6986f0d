"""A red-team set of agent replies (``tests/data/hostile_replies.yaml``) that try to talk the judge into a
pass, sent through the real judge pipeline to a loopback server that records the exact prompt.

In every case: each marker appears exactly once, on a line of its own; everything the agent wrote is
strictly between them; nothing that looks like a marker survives inside; the instructions around the
transcript are byte-for-byte the judge's own; and a judge reply that is not one clean verdict is an
error, never a pass."""

from __future__ import annotations

import asyncio
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalcli.dataset import load_dataset
from evalcli.llm.client import LLMClient, LLMSettings
from evalcli.run import RunOptions, run_evals
from evalcli.scorers.base import ScorerRun
from evalcli.scorers.judges.criterion import (
    MARKER_REMOVED,
    SYSTEM_PROMPT,
    TRANSCRIPT_END,
    TRANSCRIPT_START,
    USER_PROMPT,
    JudgeArgs,
    MultiTurnJudge,
    neutralise,
)
from evalcli.store.store import Store
from tests.llm_server import LLMServer, Request, text, verdict

pytestmark = pytest.mark.usefixtures("llm_backend")  # every test on both backends (docs/models.md)

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "data" / "hostile_replies.yaml").read_text(encoding="utf-8"))["cases"]
CRITERION = "The assistant gave a weather forecast for Brooklyn."
PREFIX, SUFFIX = USER_PROMPT.format(criterion=CRITERION, start=TRANSCRIPT_START, transcript="\0",
                                    end=TRANSCRIPT_END).split("\0")

# what a marker looks like once accents, look-alike letters and punctuation are folded away
LOOKALIKE = re.compile(r"\b(begin|start|end|stop|open|close) (assistant )?(untrusted )?transcript\b"
                       r"|\buntrusted (assistant )?transcript\b|\btranscript untrusted\b")
CONFUSABLE = str.maketrans("АВЕЅІЈКМНОРСТХУаеіјорсѕхуΑΒΕΖΗΙΚΜΝΟΡΤΥΧαεικνορτυχ",
                           "ABESIJKMHOPCTXYaeijopcsxyABEZHIKMNOPTYXaeiknoptux")


def folded(value: str) -> str:
    decomposed = unicodedata.normalize("NFKD", value).translate(CONFUSABLE)
    letters = "".join(c for c in decomposed if not unicodedata.combining(c) and unicodedata.category(c) != "Cf")
    return " ".join(re.sub(r"[\W_]+", " ", letters.replace(MARKER_REMOVED, " ")).lower().split())


def judge(server: LLMServer) -> MultiTurnJudge:
    args = JudgeArgs(model="openai/judge-model", criterion=CRITERION, api_base=server.url)
    llm = LLMClient(LLMSettings(retries=0, timeout=10, backoff_base=0.01, backoff_max=0.02), None)
    return MultiTurnJudge(args, scorer_id="hostile-judge", llm=llm, use_cache=False)


def output_of(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": turn} for turn in case["turns"]]


def assert_fenced(request: Request, case: dict[str, Any]) -> None:
    messages = request.messages[:2]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT, "the agent's words reached the system prompt"
    user = messages[1]["content"]
    for marker in (TRANSCRIPT_START, TRANSCRIPT_END):
        assert user.count(marker) == 1, f"{marker} appears {user.count(marker)} times"
        assert user.splitlines().count(marker) == 1, f"{marker} is not on a line of its own"
    assert user.startswith(PREFIX) and user.endswith(SUFFIX), "the text around the fence is not the judge's own"
    inside = user[len(PREFIX):len(user) - len(SUFFIX)]
    assert "<<<" not in inside and ">>>" not in inside
    assert not LOOKALIKE.search(folded(inside)), f"a marker look-alike survived: {inside!r}"
    # everything the agent said is there, in order, strictly inside the fence (neutralised, nothing else)
    expected = [f"Assistant turn {n}: {neutralise(turn.strip())}" for n, turn in enumerate(case["turns"], 1)]
    assert inside == "\n\n".join(expected)
    # an agent-written repair turn never appears as a separate message
    for later in request.messages[2:]:
        assert later["role"] in {"assistant", "user"} and TRANSCRIPT_START not in str(later["content"])


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_fencing_holds_and_a_fooled_judge_is_never_a_pass(llm_server: LLMServer, case: dict[str, Any]) -> None:
    llm_server.responder = lambda request: text(case["gullible"])
    outcome = asyncio.run(judge(llm_server).score(ScorerRun(input="What is the weather?", output=output_of(case))))
    assert outcome.score is None and outcome.error is not None, f"{case['id']} scored {outcome.score}"
    assert "no readable verdict" in outcome.error
    assert len(llm_server.requests) == 3  # every retry was asked for, then it gave up
    for request in llm_server.requests:
        assert_fenced(request, case)


def test_the_red_team_set_is_big_enough() -> None:
    assert len(CASES) >= 10 and len({c["id"] for c in CASES}) == len(CASES)


def test_hostile_conversations_through_the_runner_are_judged_only_by_the_judge(llm_server: LLMServer,
                                                                               tmp_path: Path) -> None:
    """The whole pipeline: a target that says each hostile reply, the judge as a gate; the server judges
    honestly (no), so no hostile conversation passes, and every prompt it received was fenced."""
    (tmp_path / "hostile_agent.py").write_text(
        "import json, pathlib\n"
        "CASES = json.loads(pathlib.Path(__file__).with_name('cases.json').read_text())\n"
        "def generate(input, **options):\n"
        "    return [{'role': 'assistant', 'content': t} for t in CASES[input]]\n")

    (tmp_path / "cases.json").write_text(json.dumps({c["id"]: tagged(c)["turns"] for c in CASES}))
    (tmp_path / "scorers.yaml").write_text(yaml.safe_dump({"scorers": {"forecast-judge": {"multi_turn_judge": {
        "model": "openai/judge-model", "api_base": llm_server.url, "criterion": CRITERION}}}}))
    (tmp_path / "ds.yaml").write_text(yaml.safe_dump({
        "target": "hostile_agent:generate", "concurrency": 8, "gates": ["forecast-judge"],
        "data": [{"id": c["id"], "input": c["id"]} for c in CASES]}))
    llm_server.responder = lambda request: verdict(False, "No forecast for Brooklyn was given.")
    store = Store(tmp_path / "evalcli.db")
    try:
        result = run_evals(load_dataset(tmp_path / "ds.yaml"), store=store, options=RunOptions(use_cache=False))
    finally:
        store.close()
    assert result.summary.verdict == "failed" and result.exit_code == 1
    assert result.summary.errors == 0
    assert result.items is not None
    assert all(item.gate_scores["forecast-judge"].score == 0.0 for item in result.items)
    assert len(llm_server.requests) == len(CASES)
    seen = set()
    for request in llm_server.requests:
        found = re.search(r"^Assistant turn 1: Case ([\w-]+)\. ", request.messages[1]["content"], re.MULTILINE)
        assert found, request.messages[1]["content"]
        seen.add(found.group(1))
        assert_fenced(request, tagged(next(c for c in CASES if c["id"] == found.group(1))))
    assert seen == {c["id"] for c in CASES}


def tagged(case: dict[str, Any]) -> dict[str, Any]:
    """The case as the test agent says it: its first turn starts with 'Case ID. '."""
    return {**case, "turns": [f"Case {case['id']}. {case['turns'][0]}", *case["turns"][1:]]}
