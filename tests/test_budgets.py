"""Budgets (docs/reliability.md#budgets): ``--max-cost`` / ``--max-tokens``, overall or per purpose, through the real
CLI against the loopback OpenAI-compatible server, which counts what it was sent: no call of a spent purpose is sent
(a run passes a budget by at most the calls in flight, whatever the concurrency), the conversation that needed one
is ``limited``, the run is marked ``budget``, says so in every output and exits 5, ``--resume`` with a larger budget
continues it counting every earlier call, and a cost budget over an unpriced model is refused."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalcli import RunOptions, run_evals
from evalcli.llm import Budget, parse_budget
from tests.conftest import CliResult
from tests.llm_server import LLMServer, RateLimited, Reply, Request, completion


def answer(request: Request) -> Reply:
    if str(request.body.get("model")) in ("judge-m", "gpt-4o-mini"):
        return Reply(body=completion(json.dumps({"satisfied": True, "reasoning": "fine"}), prompt_tokens=30,
                                     completion_tokens=5))
    return Reply(body=completion(f"ok: {request.messages[-1]['content']}", prompt_tokens=100, completion_tokens=10))


def dataset(url: str, n: int, judge: bool = False) -> str:
    lines = ["target:", "  model: openai/target-m", f"  api_base: {url}", "concurrency: 1", "scorers:",
             "  - includes: ok"]
    if judge:
        lines.append(f'  - judge: {{criterion: It answered., model: openai/judge-m, api_base: "{url}"}}')
    lines.append("data:")
    lines += [f"  - {{id: c{i}, input: question {i}}}" for i in range(n)]
    return "\n".join(lines) + "\n"


def test_a_spent_target_budget_ends_the_run_and_a_larger_one_resumes_it(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    llm_server.responder = answer
    write("d.yaml", dataset(llm_server.url, 8))
    first = cli("run", "d.yaml", "--json", "-", "--max-tokens", "target=300")
    assert first.code == 5, first.stderr
    items = first.json["items"]
    # three calls of 110 tokens spend 300; the fourth conversation's call is not started, and none after it
    assert [i["status"] for i in items] == ["ok", "ok", "ok", "limited"]
    assert items[3]["limited"] == {"limit": "budget", "turns": 0}
    assert "the target token budget of 300 is spent (330 tokens)" in items[3]["error"]
    assert len(llm_server.requests) == 3
    assert first.json["usage"]["purposes"]["target"]["calls"] == 3
    run_id = first.json["run_id"]
    assert "BUDGET SPENT after 4 of 8 conversations" in first.stderr
    assert f"evalcli run d.yaml --resume {run_id}" in first.stderr
    row = first.db().execute("SELECT status, exit_code FROM runs").fetchone()
    assert tuple(row) == ("budget", 5)

    resumed = cli("run", "d.yaml", "--json", "-", "--resume", run_id, "--max-tokens", "target=10000")
    assert resumed.code == 0, resumed.stderr
    assert [i["status"] for i in resumed.json["items"]] == ["ok"] * 8
    assert len(llm_server.requests) == 8  # the finished conversations were kept, not asked again
    assert resumed.json["usage"]["purposes"]["target"]["calls"] == 8  # the kept ones' calls counted too
    assert tuple(resumed.db().execute("SELECT status, exit_code FROM runs").fetchone()) == ("completed", 0)


def test_a_spent_judge_budget_limits_the_conversation_that_needed_a_judge(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    llm_server.responder = answer
    write("d.yaml", dataset(llm_server.url, 4, judge=True))
    done = cli("run", "d.yaml", "--json", "-", "--max-tokens", "judge=60,target=100000", "--no-cache")
    assert done.code == 5, done.stderr
    statuses = [i["status"] for i in done.json["items"]]
    assert statuses == ["ok", "ok", "limited"], statuses
    judged = [r for r in llm_server.requests if "judge" in str(r.body.get("model"))]
    assert len(judged) == 2 and done.json["usage"]["purposes"]["judge"]["prompt_tokens"] == 60
    assert done.json["summary"]["errors"] == 1 and done.json["scores"]["includes(ok)"] == 1.0


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--max-cost", "judge=2,tagret=3", "--max-cost: 'tagret' is not a purpose (target, simulator or judge)"),
    ("--max-cost", "five", "--max-cost: 'five' is not a number"),
    ("--max-tokens", "1.5", "--max-tokens: '1.5' must be a whole number of tokens"),
    ("--max-cost", "judge=1,judge=2", "--max-cost names judge twice"),
])
def test_a_budget_that_cannot_be_read_is_exit_2_before_anything_runs(
        write: Callable[..., Path], cli: Callable[..., CliResult], flag: str, value: str, message: str) -> None:
    write("d.yaml", dataset("http://127.0.0.1:9/v1", 1))
    done = cli("run", "d.yaml", flag, value)
    assert done.code == 2 and message in done.stderr, done.stderr
    assert not (done.cwd / "evalcli.db").exists()


@given(limits=st.dictionaries(st.sampled_from([None, "target", "simulator", "judge"]), st.integers(0, 500)),
       calls=st.lists(st.tuples(st.sampled_from(["target", "simulator", "judge", "agent"]), st.integers(0, 200))))
def test_no_call_starts_once_its_budget_is_spent(limits: dict[str | None, int],
                                                 calls: list[tuple[str, int]]) -> None:
    budget = Budget(max_tokens=dict(limits))
    for purpose, tokens in calls:
        group = "target" if purpose == "agent" else purpose
        spent = [used for key, used in ((None, sum(budget.tokens.values())), (group, budget.tokens.get(group, 0)))
                 if key in limits and used >= limits[key]]
        refused = budget.refusal(purpose)
        assert (refused is not None) == bool(spent)
        if refused is None:
            budget.add(purpose, tokens, 0.0)
    for key, most in limits.items():
        # a budget is passed by at most the one call that was allowed while under it
        used = sum(budget.tokens.values()) if key is None else budget.tokens.get(key, 0)
        assert used < most + 200 or (most == 0 and used == 0)


def test_budgets_read_overall_and_per_purpose() -> None:
    assert parse_budget("5", "--max-cost", False) == {None: 5.0}
    assert parse_budget("judge=2, target=3,simulator=1", "--max-cost", False) == {"judge": 2, "target": 3,
                                                                                  "simulator": 1}
    assert parse_budget("100,judge=20", "--max-tokens", True) == {None: 100, "judge": 20}


def slow_judges(delay: float) -> Callable[[Request], Reply]:
    """Answers as ``answer`` does, each judge's answer held ``delay`` seconds so the judges overlap."""
    def respond(request: Request) -> Reply:
        if request.body.get("model") == "judge-m":
            time.sleep(delay)
        return answer(request)
    return respond


def test_a_judge_budget_holds_at_any_concurrency_once_calls_get_their_slot(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    llm_server.responder = slow_judges(0.05)
    text = dataset(llm_server.url, 64, judge=True).replace("concurrency: 1", "concurrency: 64")
    write("d.yaml", text)
    done = cli("run", "d.yaml", "--json", "-", "--max-tokens", "judge=110", "--no-cache")
    judged = [r for r in llm_server.requests if "judge" in str(r.body.get("model"))]
    # 35 tokens a judge call: the fourth one spends 110; only the calls already sent then (8 judge slots) finish
    assert len(judged) <= 4 + 8 - 1, len(judged)
    assert done.code == 5, done.stderr
    assert "BUDGET SPENT" in done.stderr
    assert tuple(done.db().execute("SELECT status, exit_code FROM runs").fetchone()) == ("budget", 5)
    limited = [i for i in done.json["items"] if i["status"] == "limited"]
    assert limited and all(i["limited"]["limit"] == "budget" for i in limited)
    assert done.json["usage"]["purposes"]["judge"]["calls"] == len(judged)


TOKENS = {"target": 110, "simulator": 110, "judge": 35}
"""What one call of each purpose costs in tokens (``answer``)."""


def purpose_dataset(url: str, purpose: str, n: int, concurrency: int) -> str:
    """``n`` conversations at ``concurrency``, each making one call of ``purpose`` (and one target call)."""
    text = dataset(url, n, judge=purpose == "judge").replace("concurrency: 1", f"concurrency: {concurrency}")
    if purpose == "simulator":
        head, _ = text.split("data:\n")
        text = head + "data:\n" + "".join(f"  - {{id: c{i}, simulate: {{goal: ask {i}, max_turns: 1, model: "
                                          f"openai/sim-m}}}}\n" for i in range(n))
    return text


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(purpose=st.sampled_from(["target", "judge", "simulator"]), concurrency=st.integers(1, 48),
       judge_concurrency=st.integers(1, 12), budget=st.integers(0, 500), n=st.integers(1, 40))
def test_a_run_passes_a_budget_by_at_most_the_calls_in_flight(
        tmp_path_factory: pytest.TempPathFactory, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch,
        purpose: str, concurrency: int, judge_concurrency: int, budget: int, n: int) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", llm_server.url)  # the simulated user's model
    llm_server.requests.clear()
    llm_server.responder = slow_judges(0.01)
    path = tmp_path_factory.mktemp("budget") / "d.yaml"
    path.write_text(purpose_dataset(llm_server.url, purpose, n, concurrency))
    options = RunOptions(judge_concurrency=judge_concurrency, use_cache=False, max_tokens={purpose: budget})
    result = run_evals(path, options=options)
    name = {"target": "target-m", "judge": "judge-m", "simulator": "sim-m"}[purpose]
    sent = sum(1 for r in llm_server.requests if r.body.get("model") == name)
    in_flight = min(concurrency, judge_concurrency) if purpose == "judge" else concurrency
    reaching = -(-budget // TOKENS[purpose])  # the calls that spend the budget
    # no call is sent once the budget is spent: only those in flight when it was may finish
    assert sent <= (reaching + in_flight - 1 if budget else 0), (sent, reaching, in_flight)
    assert result.usage["purposes"][purpose]["calls"] == sent
    items = result.items or []
    limited = [i for i in items if i.status == "limited"]
    assert all(i.stop_reason == "budget" for i in limited)
    ended = bool(limited) or len(items) < n  # a budget ended it: once spent, no new conversation starts either
    assert (result.status == "budget") == ended and (result.exit_code == 5) == ended
    assert sent + len(limited) >= len(items)  # every conversation played made its call or was stopped by the budget


def test_a_resumed_run_counts_every_attempts_calls_against_its_budget_and_in_its_totals(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    llm_server.responder = answer
    lines = ["target:", "  model: openai/target-m", f"  api_base: {llm_server.url}", "concurrency: 1",
             "scorers: [{includes: ok}]", "data:"]
    lines += [f"  - {{id: c{i}, turns: [{{input: a{i}}}, {{input: b{i}}}, {{input: c{i}}}]}}" for i in range(4)]
    write("d.yaml", "\n".join(lines) + "\n")
    # 110 tokens a call: c0 plays its 3 turns, c1 two of them (550 tokens) before the budget stops it
    first = cli("run", "d.yaml", "--json", "-", "--max-tokens", "target=500")
    assert first.code == 5, first.stderr
    assert len(llm_server.requests) == 5 and first.json["usage"]["purposes"]["target"]["calls"] == 5
    # the resumed run starts from the 550 tokens the first invocation spent (c1's two calls included): c1 is played
    # again (880), then c2 (1210), and c3's first turn is not sent
    resumed = cli("run", "d.yaml", "--json", "-", "--resume", first.json["run_id"], "--max-tokens", "target=1200")
    assert resumed.code == 5, resumed.stderr
    assert len(llm_server.requests) == 11
    assert [i["status"] for i in resumed.json["items"]] == ["ok", "ok", "ok", "limited"]
    usage = resumed.json["usage"]["purposes"]["target"]
    assert usage["calls"] == 11 and usage["prompt_tokens"] + usage["completion_tokens"] == 1210
    row = resumed.db().execute("SELECT llm_calls, prompt_tokens + completion_tokens FROM runs").fetchone()
    assert tuple(row) == (11, 1210)
    shown = cli("show", first.json["run_id"], "--json", "-")
    assert shown.json["usage"]["purposes"]["target"]["calls"] == 11
    last = cli("run", "d.yaml", "--json", "-", "--resume", first.json["run_id"], "--max-tokens", "target=5000")
    assert last.code == 0, last.stderr
    assert len(llm_server.requests) == 14 and last.json["usage"]["calls"] == 14  # every call the server answered


def test_a_cost_budget_over_a_model_without_a_price_is_refused_before_anything_runs(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    llm_server.responder = answer
    write("d.yaml", dataset(llm_server.url, 20, judge=True))
    done = cli("run", "d.yaml", "--max-cost", "0.000001")
    assert done.code == 2, done.stderr
    assert "d.yaml: --max-cost cannot be counted: litellm's price table has no price for" in done.stderr
    assert "openai/judge-m (scorer judge" in done.stderr and "openai/target-m (the target" in done.stderr
    assert "--max-tokens" in done.stderr and "Traceback" not in done.stderr
    assert not llm_server.requests and not (done.cwd / "evalcli.db").exists()
    # a budget of the purposes whose models are priced is counted: the judge is, as gpt-4o-mini
    write("d.yaml", dataset(llm_server.url, 3, judge=True).replace("openai/judge-m", "openai/gpt-4o-mini"))
    priced = cli("run", "d.yaml", "--json", "-", "--max-cost", "judge=0.000001", "--no-cache")
    assert priced.code == 5, priced.stderr
    judge = priced.json["usage"]["purposes"]["judge"]
    assert judge["calls"] == 1 and judge["cost"] > 0.000001  # one call spends it; none starts after it
    assert "the judge cost budget of $1e-06 is spent" in priced.json["items"][1]["error"]


def test_a_run_a_budget_ended_says_so_in_every_output(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    llm_server.responder = answer
    write("d.yaml", dataset(llm_server.url, 8))
    done = cli("run", "d.yaml", "--json", "-", "--markdown", "summary.md", "--html", "report.html",
               "--max-tokens", "target=300")
    assert done.code == 5, done.stderr
    words = "budget spent after 4 of 8 conversations, 4 not played"
    assert done.json["status"] == "budget"
    assert done.json["conversations"] == {"selected": 8, "played": 4, "not_played": 4}
    assert "BUDGET SPENT after 4 of 8 conversations, 4 not played" in done.stderr
    markdown = (done.cwd / "summary.md").read_text()
    assert "status **budget**" in markdown and words[0].upper() + words[1:] in markdown
    html = (done.cwd / "report.html").read_text()
    assert words in html and "budget spent · " in html
    shown = cli("show", done.json["run_id"], "--json", "-")
    assert (shown.json["status"], shown.json["conversations"]) == ("budget", done.json["conversations"])
    resumed = cli("run", "d.yaml", "--json", "-", "--resume", done.json["run_id"], "--max-tokens", "target=5000")
    assert resumed.code == 0, resumed.stderr
    assert resumed.json["status"] == "completed"
    assert resumed.json["conversations"] == {"selected": 8, "played": 8, "not_played": 0}
    assert "BUDGET SPENT" not in resumed.stderr


def test_a_call_that_waited_for_a_rate_limit_asks_the_budget_again_before_it_is_sent(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    provider = RateLimited(answer, allowed=2, delay=0.05, retry_after=0.1)
    llm_server.responder = provider
    write("d.yaml", dataset(llm_server.url, 16).replace("concurrency: 1", "concurrency: 16"))
    done = cli("run", "d.yaml", "--json", "-", "--max-tokens", "target=300")
    assert done.code == 5, done.stderr
    answered = sum(provider.answered.values())
    # the provider answers 2 at a time, 110 tokens each: the third answer spends 300, and the calls waiting out a
    # 429 then are not sent again
    assert provider.rejected > 0 and answered <= 3 + 2 - 1, (answered, provider.rejected)
    assert done.json["usage"]["purposes"]["target"]["calls"] == answered
    assert done.json["status"] == "budget"
