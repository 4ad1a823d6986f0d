"""Repeated judging and panels (docs/recorded.md), in the engine every judge shares: ``samples: N`` asks one model N times
at once with distinct seeds (each in the cache key), ``models: [A, B, C]`` asks a panel once each; binary verdicts
are decided by majority and scale scores by the median, each sample's verdict and the agreement k/N are kept.
Against the loopback server, whose verdicts depend on the request: the seed for samples, the model for panels."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalcli.dataset import parse_ref
from evalcli.dataset.yamlsrc import Positions
from evalcli.llm.cache import ResponseCache
from evalcli.llm.client import LLMClient, LLMSettings
from evalcli.results import JudgeSample, Outcome
from evalcli.scorers import kinds
from evalcli.scorers.base import ScorerRun, TurnView
from evalcli.scorers.judges.criterion import JudgeArgs, MultiTurnJudge, judge_messages
from evalcli.scorers.judges.engine import response_format
from evalcli.scorers.kinds import BuildContext, Scorer
from evalcli.scorers.registry import Registry
from evalcli.store import Store
from tests.conftest import CliResult
from tests.llm_server import InFlight, LLMServer, Reply, Request, status, text

CRITERION = "The assistant gave a forecast."
RUN = ScorerRun("Weather?", [{"role": "assistant", "content": "Sunny, 18C."}],
                turns=(TurnView(0, "Weather?", [{"role": "assistant", "content": "Sunny, 18C."}]),),
                expected_outcome="The user got a forecast.")
FAST = LLMSettings(retries=0, timeout=10, backoff_base=0.01, backoff_max=0.02)


def build(server: LLMServer, kind: str, args: dict[str, Any], *, cache: ResponseCache | None = None,
          scorer_id: str = "judge", settings: LLMSettings = FAST) -> Scorer:
    declared = kinds.find(kind)
    assert declared is not None and declared.prepare is not None
    values = declared.args.model_validate(declared.prepare({**args, "api_base": server.url}))
    llm = LLMClient(settings, cache)
    return declared.build(values, BuildContext(scorer_id, lambda: llm, True))


def score(scorer: Scorer, run: ScorerRun = RUN) -> Outcome:
    return asyncio.run(scorer.score(run))


def verdict_reply(satisfied: bool, why: str = "because") -> Reply:
    return text(json.dumps({"satisfied": satisfied, "reasoning": why}))


def by_seed(satisfied: Callable[[int | None], bool]) -> Callable[[Request], Reply]:
    return lambda request: verdict_reply(satisfied(request.body.get("seed")), f"seed {request.body.get('seed')}")


def test_samples_are_asked_at_once_with_distinct_seeds_and_decided_by_majority(llm_server: LLMServer) -> None:
    waiting = InFlight(by_seed(lambda seed: seed != 2), delay=0.3)
    llm_server.responder = waiting
    outcome = score(build(llm_server, "multi_turn_judge", {"criterion": CRITERION, "model": "openai/judge-a",
                                                           "samples": 3}))
    assert waiting.peak == 3  # three calls in flight together, not three rounds
    bodies = sorted((r.body for r in llm_server.requests), key=lambda b: b["seed"])
    assert [(b["seed"], b["temperature"], b["model"]) for b in bodies] == [(1, 0.7, "judge-a"), (2, 0.7, "judge-a"),
                                                                           (3, 0.7, "judge-a")]
    assert bodies[0]["messages"] == bodies[1]["messages"] == bodies[2]["messages"]
    assert outcome.score == 1.0 and outcome.agreement == (2, 3) and outcome.agreement_text == "2/3"
    assert outcome.samples == (JudgeSample("openai/judge-a", 1, 1.0, "Criterion satisfied."),
                               JudgeSample("openai/judge-a", 2, 0.0, "Criterion not satisfied."),
                               JudgeSample("openai/judge-a", 3, 1.0, "Criterion satisfied."))
    assert outcome.reason == (f"Criterion satisfied.\n\n{CRITERION}\n\nseed 1\n\n"
                              "2 of 3 samples agree (majority: 1).\n"
                              "- sample 1 of 3 (seed 1): 1  Criterion satisfied.\n"
                              "- sample 2 of 3 (seed 2): 0  Criterion not satisfied.\n"
                              "- sample 3 of 3 (seed 3): 1  Criterion satisfied.")
    assert outcome.usage["calls"] == 3 and outcome.usage["model"] == "openai/judge-a"


def test_the_majority_may_be_not_satisfied_and_scale_applies(llm_server: LLMServer) -> None:
    llm_server.responder = by_seed(lambda seed: seed == 5)
    outcome = score(build(llm_server, "judge", {"criterion": CRITERION, "model": "openai/judge-a", "samples": 5,
                                                "scale": 10}))
    assert sorted(r.body["seed"] for r in llm_server.requests) == [1, 2, 3, 4, 5]
    assert outcome.score == 0.0 and outcome.agreement == (4, 5)
    assert [s.score for s in outcome.samples] == [0.0, 0.0, 0.0, 0.0, 10.0]
    assert outcome.reason is not None and outcome.reason.startswith("Criterion not satisfied.")


OLD_KEY = "388fcaee56c27f68a66d8b30f67b64465edcae22180234ead6a53f60dfcc90e6"
"""The cache key of this request as a judge asked once makes it, samples or not (computed for prompt version 2; version
1's, before samples existed, was 9d227d8f71421699bc58a9c94b67e5caeb6de1e9b744e261eac975d4dd3a4a7e)."""


def test_a_judge_asked_once_is_asked_and_keyed_exactly_as_before(llm_server: LLMServer, llm_cache_path: str) -> None:
    messages = judge_messages("Gave a forecast.", [{"role": "assistant", "content": "Sunny, 72F."}])
    for extra in ({}, {"samples": 1}):
        args = JudgeArgs.model_validate({"model": "openai/judge-a", "criterion": "Gave a forecast.", **extra})
        assert args.model_dump() == {"model": "openai/judge-a", "criterion": "Gave a forecast.", "scale": 1.0,
                                     "api_base": None}
        judge = MultiTurnJudge(args, scorer_id="weather-judge", llm=LLMClient())
        assert judge.cache_key(messages, None) == OLD_KEY
        fmt = response_format("openai/judge-a", "verdict", {})
        assert judge.cache_key(messages, fmt) == ResponseCache.key_for(
            model="openai/judge-a", messages=messages, temperature=0, response_format=fmt, api_base=None,
            scorer_id="weather-judge", scorer_version="2")
    cache = Store(llm_cache_path).response_cache()
    llm_server.responder = by_seed(lambda seed: True)
    once = score(build(llm_server, "judge", {"criterion": CRITERION, "model": "openai/judge-a"}, cache=cache))
    body = llm_server.requests[0].body
    assert "seed" not in body and body["temperature"] == 0 and once.samples == () and once.agreement is None
    assert once.to_json() == {"score": 1.0, "reason": f"Criterion satisfied.\n\n{CRITERION}\n\nseed None"}


def test_each_sample_has_its_own_cache_entry(llm_server: LLMServer, llm_cache_path: str) -> None:
    cache = Store(llm_cache_path).response_cache()
    llm_server.responder = by_seed(lambda seed: seed != 1)
    args = {"criterion": CRITERION, "model": "openai/judge-a", "samples": 3}
    first = score(build(llm_server, "judge", args, cache=cache))
    assert len(llm_server.requests) == 3 and cache.stats()["entries"] == 3
    again = score(build(llm_server, "judge", args, cache=cache))
    assert len(llm_server.requests) == 3 and again.usage["cache_hits"] == 3
    assert again.samples == first.samples and again.score == 1.0
    # asked once, the judge has no seed: its entry is none of the samples'
    score(build(llm_server, "judge", {**args, "samples": 1}, cache=cache))
    assert len(llm_server.requests) == 4 and cache.stats()["entries"] == 4
    # five samples: the first three are the same requests, the two new ones are asked
    score(build(llm_server, "judge", {**args, "samples": 5}, cache=cache))
    assert sorted(r.body["seed"] for r in llm_server.requests[4:]) == [4, 5]


def test_a_panel_asks_each_model_once_and_takes_the_majority(llm_server: LLMServer, llm_cache_path: str) -> None:
    cache = Store(llm_cache_path).response_cache()
    llm_server.responder = lambda request: verdict_reply(request.body["model"] != "judge-b", request.body["model"])
    panel = ["openai/judge-a", "openai/judge-b", "openai/judge-c"]
    outcome = score(build(llm_server, "judge", {"criterion": CRITERION, "models": panel}, cache=cache))
    assert sorted(r.body["model"] for r in llm_server.requests) == ["judge-a", "judge-b", "judge-c"]
    assert all("seed" not in r.body and r.body["temperature"] == 0 for r in llm_server.requests)
    assert outcome.score == 1.0 and outcome.agreement == (2, 3)
    assert [(s.model, s.seed, s.score) for s in outcome.samples] == [("openai/judge-a", None, 1.0),
                                                                     ("openai/judge-b", None, 0.0),
                                                                     ("openai/judge-c", None, 1.0)]
    assert "2 of 3 models agree (majority: 1).\n- openai/judge-a: 1  Criterion satisfied.\n- openai/judge-b: 0" \
        in (outcome.reason or "")
    assert outcome.usage["model"] == "openai/judge-a, openai/judge-b, openai/judge-c"
    # a panel member is asked as that model alone would be: the lone judge finds its reply cached
    alone = score(build(llm_server, "judge", {"criterion": CRITERION, "model": "openai/judge-b"}, cache=cache))
    assert len(llm_server.requests) == 3 and alone.score == 0.0 and alone.usage["cache_hits"] == 1


def rubric_reply(request: Request) -> Reply:
    """Both criteria met, except that seeds 2 and 4 meet only the first."""
    second = request.body.get("seed") not in (2, 4)
    return text(json.dumps({"verdicts": [{"criterion": 1, "reasoning": "r", "satisfied": True},
                                         {"criterion": 2, "reasoning": "r", "satisfied": second}]}))


@pytest.mark.parametrize(("samples", "expected", "agreement"), [(3, 1.0, (2, 3)), (5, 1.0, (3, 5))])
def test_scale_scores_take_the_median(llm_server: LLMServer, samples: int, expected: float,
                                      agreement: tuple[int, int]) -> None:
    llm_server.responder = rubric_reply
    outcome = score(build(llm_server, "rubric", {"criteria": ["Greets", "Forecasts"], "model": "openai/judge-a",
                                                 "samples": samples}))
    assert outcome.score == expected and outcome.agreement == agreement
    assert sorted(s.score or 0 for s in outcome.samples) == sorted([0.5 if n in (2, 4) else 1.0
                                                                    for n in range(1, samples + 1)])
    assert "samples agree (median: 1)" in (outcome.reason or "")


def test_a_median_between_verdicts_and_near_scores_agree(llm_server: LLMServer) -> None:
    # factuality categories by seed: A (0.4), B (0.6), B (0.6): median 0.6; 0.4 is 0.2 away, so 2/3 agree
    categories = {1: "A", 2: "B", 3: "B"}
    llm_server.responder = lambda r: text(json.dumps({"reasoning": "r", "category": categories[r.body["seed"]]}))
    outcome = score(build(llm_server, "factuality", {"reference": "18C in Paris", "model": "openai/judge-a",
                                                     "samples": 3}))
    assert outcome.score == 0.6 and outcome.agreement == (2, 3)


def test_list_then_judge_samples_keep_their_seed_for_both_calls(llm_server: LLMServer) -> None:
    def reply(request: Request) -> Reply:
        prompt = request.messages[-1]["content"]
        if "List the user's intentions" in prompt:
            return text(json.dumps({"intentions": ["Know the weather"]}))
        return text(json.dumps({"verdicts": [{"intention": 1, "reasoning": "r", "met": request.body["seed"] != 3}]}))

    llm_server.responder = reply
    outcome = score(build(llm_server, "completeness", {"model": "openai/judge-a", "samples": 3}))
    seeds = sorted(r.body["seed"] for r in llm_server.requests)
    assert seeds == [1, 1, 2, 2, 3, 3] and outcome.score == 1.0 and outcome.agreement == (2, 3)
    assert outcome.usage["calls"] == 6


def test_a_failed_sample_makes_the_whole_an_error_never_a_score(llm_server: LLMServer) -> None:
    llm_server.responder = lambda r: status(500) if r.body.get("seed") == 2 else verdict_reply(True)
    outcome = score(build(llm_server, "judge", {"criterion": CRITERION, "model": "openai/judge-a", "samples": 3}))
    assert outcome.score is None and not outcome.scored
    assert outcome.error is not None and outcome.error.startswith("sample 2 of 3 (seed 2): judge judge: model "
                                                                  "openai/judge-a failed")
    llm_server.responder = lambda r: text("no verdict here") if r.body["model"] == "judge-c" else verdict_reply(True)
    panel = score(build(llm_server, "goal_achieved", {"models": ["openai/judge-a", "openai/judge-b", "openai/judge-c"]}))
    assert panel.error is not None and panel.error.startswith("panel member openai/judge-c: judge judge: no readable "
                                                              "verdict from openai/judge-c")


def test_not_scorable_is_decided_before_any_call(llm_server: LLMServer) -> None:
    outcome = score(build(llm_server, "factuality", {"model": "openai/judge-a", "samples": 3}),
                    ScorerRun("q", [{"role": "assistant", "content": "a"}]))
    assert outcome.not_scorable and outcome.agreement is None and llm_server.requests == []


def test_judge_calls_of_all_samples_share_the_judge_slots(llm_server: LLMServer) -> None:
    waiting = InFlight(by_seed(lambda seed: True), delay=0.2)
    llm_server.responder = waiting
    settings = LLMSettings(retries=0, timeout=10, judge_concurrency=4)
    judge = build(llm_server, "judge", {"criterion": CRITERION, "model": "openai/judge-a", "samples": 3},
                  settings=settings)

    async def many() -> list[Outcome]:
        return list(await asyncio.gather(*(judge.score(RUN) for _ in range(4))))

    outcomes = asyncio.run(many())
    assert len(llm_server.requests) == 12 and all(o.score == 1.0 for o in outcomes)
    assert waiting.peak == 4  # the --judge-concurrency bound holds for samples too


JUDGE_KINDS = [("multi_turn_judge", {"criterion": "ok"}), ("rubric", {"criteria": ["ok"]}), ("completeness", {}),
               ("knowledge_retention", {}), ("role_adherence", {"role": "a pirate"}), ("grounded", {}),
               ("factuality", {}), ("goal_achieved", {})]


def parsed(ref: Any) -> tuple[Any, list[str]]:
    problems: list[Any] = []
    spec = parse_ref(ref, (), Positions("t.yaml"), Registry(), problems, gate=False)
    return spec, [p.message for p in problems]


@pytest.mark.parametrize(("kind", "args"), JUDGE_KINDS)
def test_every_judge_takes_samples_and_models(kind: str, args: dict[str, Any]) -> None:
    assert {kind for kind, _ in JUDGE_KINDS} == {k.name for k in kinds.all_kinds() if k.group == "judge"}
    plain, problems = parsed({kind: {**args, "model": "openai/x"}})
    sampled, more = parsed({kind: {**args, "model": "openai/x", "samples": 3}})
    panel, most = parsed({kind: {**args, "models": ["openai/a", "openai/b", "openai/c"]}})
    assert problems == more == most == []
    assert "samples" not in plain.args and "models" not in plain.args and plain.args["model"] == "openai/x"
    assert sampled.args["samples"] == 3 and sampled.id == plain.id  # samples do not change a default id
    assert panel.args["models"] == ["openai/a", "openai/b", "openai/c"] and "model" not in panel.args
    declared = kinds.find(kind)
    assert declared is not None
    assert [p.seed for p in declared.args.model_validate(sampled.args).points()] == [1, 2, 3]  # type: ignore[attr-defined]
    assert [p.model for p in declared.args.model_validate(panel.args).points()] == ["openai/a", "openai/b", "openai/c"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("extra", "message"), [
    ({"samples": 2}, "samples must be an odd number from 1 to 9 (a majority needs an odd count), got 2"),
    ({"samples": 0}, "samples must be an odd number from 1 to 9"),
    ({"samples": 11}, "got 11"),
    ({"samples": True}, "samples must be an odd number from 1 to 9 (a majority needs an odd count), got True"),
    ({"samples": "3"}, "samples must be an odd number from 1 to 9 (a majority needs an odd count), got '3'"),
    ({"samples": {"n": 3, "when": "often"}}, "samples' when must be 'fail' or 'always', got 'often'"),
    ({"samples": {"when": "fail"}}, "samples as a mapping is {n: N, when: fail}"),
    ({"models": ["openai/a", "openai/b"]}, "models must list an odd number of models, from 1 to 9"),
    ({"models": []}, "models must list an odd number of models"),
    ({"models": ["openai/a", "openai/a", "openai/b"]}, "models must be distinct, non-empty model names"),
    ({"models": ["openai/a", "openai/b", "openai/c"], "samples": 3}, "a panel asks each of its models once"),
    ({"models": ["openai/a"], "model": "openai/b"}, "give either 'model' or 'models' (a panel), not both"),
])
def test_samples_and_panels_are_validated(extra: dict[str, Any], message: str) -> None:
    spec, problems = parsed({"completeness": extra})
    assert spec is None and any(message in p for p in problems), problems


SAMPLED = """
scorers:
  - sampled-judge
data:
  - id: a
    transcript: [{role: user, content: "Weather?"}, {role: assistant, content: Sunny.}]
"""
REGISTRY = """
scorers:
  sampled-judge:
    multi_turn_judge:
      model: openai/judge-a
      api_base: {url}
      criterion: The assistant gave a forecast.
      samples: 3
"""


def test_samples_and_agreement_are_stored_and_shown(llm_server: LLMServer, write: Callable[..., Path],
                                                    cli: Callable[..., CliResult]) -> None:
    llm_server.responder = by_seed(lambda seed: seed != 3)
    write("scorers.yaml", REGISTRY.format(url=llm_server.url))
    write("d.yaml", SAMPLED)
    env = {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "NO_PROXY": "127.0.0.1", "EVALCLI_LLM_RETRIES": "0"}
    result = cli("run", "d.yaml", "--json", "-", env=env)
    assert result.code == 0, result.stderr
    outcome = result.json["items"][0]["outcomes"]["scorers"]["sampled-judge"]
    assert outcome["score"] == 1.0 and outcome["agreement"] == "2/3"
    assert outcome["samples"] == [{"model": "openai/judge-a", "seed": n, "score": float(n != 3),
                                   "verdict": "Criterion satisfied." if n != 3 else "Criterion not satisfied."}
                                  for n in (1, 2, 3)]
    row = result.db().execute("SELECT score, agreement, samples FROM scores WHERE scorer_id = 'sampled-judge'").fetchone()
    assert (row["score"], row["agreement"]) == (1.0, "2/3") and json.loads(row["samples"]) == outcome["samples"]
    spec = result.db().execute("SELECT spec FROM scorers WHERE scorer_id = 'sampled-judge'").fetchone()[0]
    assert json.loads(spec)["args"]["samples"] == 3
    shown = cli("show", "latest", "a")
    assert "scorer sampled-judge  1  (samples agree 2/3)" in shown.stdout
    assert "- sample 3 of 3 (seed 3): 0  Criterion not satisfied." in shown.stdout
    again = cli("show", "latest", "a", "--json", "-")
    assert again.json["item"]["outcomes"]["scorers"]["sampled-judge"]["agreement"] == "2/3"


def test_validate_checks_every_model_of_a_panel(workdir: Path) -> None:
    from evalcli.dataset import load_dataset
    from evalcli.dataset.warnings import dataset_models

    path = workdir / "d.yaml"
    path.write_text("scorers:\n  - {judge: {criterion: ok, models: [openai/a, anthropic/b, openai/c]}}\n"
                    "  - {judge: {criterion: fine, model: openai/d}}\n"
                    "data: [{transcript: [{role: user, content: hi}]}]\n")
    assert [m for m, _ in dataset_models(load_dataset(path))] == ["openai/a", "anthropic/b", "openai/c", "openai/d"]
