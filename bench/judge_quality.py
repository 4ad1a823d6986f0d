"""How well does a model grade? Labelled conversations for every LLM judge, scored through the real kinds.

Usage: ``python bench/judge_quality.py [MODEL] [KIND ...]`` (default model ``local/gemma-3-270m``, the
embedded offline model; any litellm model string works when its API key is set; KINDs limit the run
to some judges). On a slow CPU give the local model time: ``EVALCLI_LLM_TIMEOUT=600 EVALCLI_LLM_RETRIES=0``.
Each case (``bench/judge_cases.py``) is labelled "full marks" or not; a judge agrees
when it gives full marks (score 1) exactly to the cases labelled so. Prints each case, then agreement
per judge with the confusion counts. An unreadable verdict counts as an error, never as agreement.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's evalcli, not an installed one

from judge_cases import CASES, Case  # bench/ is on sys.path when this file runs as a script

from evalcli.llm.client import LLMClient, LLMSettings
from evalcli.results import Outcome
from evalcli.scorers import kinds
from evalcli.scorers.base import ScorerRun, TurnView
from evalcli.scorers.kinds import BuildContext


async def grade(case: Case, model: str, llm: LLMClient) -> Outcome:
    """The case scored by its judge kind, built from its declaration as a dataset would build it."""
    kind = kinds.find(case.kind)
    assert kind is not None and kind.prepare is not None
    args = kind.args.model_validate(kind.prepare({**case.args, "model": model}))
    scorer = kind.build(args, BuildContext(f"bench-{case.kind}", lambda: llm, use_cache=False))
    turns = tuple(TurnView(i, user, list(output)) for i, (user, output) in enumerate(case.turns))
    output = [m for turn in turns for m in turn.output]
    run = ScorerRun(turns[0].input, output, case.extra.get("ground_truth"), None, turns,
                    case.extra.get("expected_outcome"), case.extra.get("goal"))
    return await scorer.score(run)


def verdict_of(outcome: Outcome) -> bool | None:
    """Full marks, not, or ``None`` for an error (or a not-scorable case, which a labelled case never is)."""
    if outcome.error is not None or outcome.score is None or outcome.not_scorable:
        return None
    return outcome.score >= 1


async def main(model: str, only: list[str]) -> None:
    settings = LLMSettings.from_env()  # EVALCLI_LLM_TIMEOUT=600 gives a slow local model time to answer
    settings.judge_concurrency = 1
    llm = LLMClient(settings)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"tp": 0, "tn": 0, "fp": 0, "fn": 0, "error": 0})
    started = time.monotonic()
    for case in [c for c in CASES if not only or c.kind in only]:
        outcome = await grade(case, model, llm)
        said = verdict_of(outcome)
        tally = counts[case.kind]
        if said is None:
            tally["error"] += 1
            got = "error: " + (outcome.error or "no score")[:80]
        else:
            tally[("t" if said == case.full_marks else "f") + ("p" if said else "n")] += 1
            got = f"{outcome.score:.2f}"
        want = "full marks" if case.full_marks else "less"
        print(f"{case.kind:20} {case.name:18} expected {want:10} got {got}", flush=True)
    print(f"\nmodel {model}  ({time.monotonic() - started:.0f}s)")
    print(f"{'judge':20} {'agreement':>14}  full/full  less/less  full/less  less/full  errors")
    for kind, tally in counts.items():
        total = sum(tally.values())
        agree = tally["tp"] + tally["tn"]
        print(f"{kind:20} {agree:>3}/{total:<3} = {agree / total:4.0%}  {tally['tp']:>9}  {tally['tn']:>9}  "
              f"{tally['fn']:>9}  {tally['fp']:>9}  {tally['error']:>6}")
    print("(columns: label/judge, e.g. full/less = labelled full marks, judged less)")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    asyncio.run(main(arguments[0] if arguments else "local/gemma-3-270m", arguments[1:]))
