"""The list-then-judge judges of the scorer library (docs/reference/scorers.md): ``completeness``, ``knowledge_retention``,
``grounded``.

Each makes its calls in a fixed order: first it lists (the user's intentions, the facts the user gave,
the assistant's claims) from the text it may read, then it judges every listed item in one call whose
reply must hold exactly one verdict per item. The reason keeps what was listed and each verdict.
They are declared in ``judges.py``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from pydantic import create_model

from ...records import record
from ...results import Outcome
from ..base import ScorerRun
from .engine import Verdicts, reader
from .kit import (
    EVIDENCE,
    Asking,
    Judging,
    PlainJudgeArgs,
    assistant_transcript,
    cleaned,
    conversation_transcript,
    fenced_list,
    fenced_tool_results,
    models_now,
    numbers,
    replied,
    reply_shape,
    tool_results,
    turns_of,
    user_transcript,
    verdict_lines,
)


@record(frozen=True)
class Listing:
    """A judge's first call: short sentences listed in a reply ``{field: [...]}`` read by ``model`` (named ``name``:
    the schema's name), the shape shown by ``examples`` of another conversation, never a placeholder."""

    task: str
    name: str
    field: str
    item: str
    examples: tuple[str, ...]

    @functools.cached_property
    def model(self) -> type[Verdicts]:
        fields: dict[str, Any] = {self.field: list[str]}
        return create_model(self.name, __base__=Verdicts, **fields)

    async def ask(self, asking: Asking, prompt: str) -> list[str]:
        """The items listed, asked by ``prompt`` closed with the reply's shape: trimmed, blank ones dropped; raises
        ``JudgeFailed``."""
        prompt += reply_shape(f'{{"{self.field}": [...]}}, each {self.item} in your own words. For example, from '
                              f'another conversation:\n{json.dumps({self.field: list(self.examples)})}')
        listed = await asking.ask(self.task, prompt, self.model, reader(self.model))
        return cleaned(getattr(listed, self.field))


# --- completeness -------------------------------------------------------------------------------

LIST_INTENTIONS = Listing("You list what the user wanted from the assistant.", "Intentions", "intentions", "intention",
                          ("The user wants to move to an aisle seat.", "The user asks for the fare in euros."))
JUDGE_INTENTIONS = Judging("You decide, for each of the user's intentions, whether the assistant met it.",
                           ("IntentionVerdicts", "IntentionVerdict"), "intention", "met", ("met", "not met"),
                           ("The assistant gave the forecast the user asked for.",
                            "The tool failed and the seat was never changed."))


async def completeness(asking: Asking, args: PlainJudgeArgs, run: ScorerRun) -> Outcome:
    turns = turns_of(run)
    prompt = (f"The user's messages follow. {EVIDENCE}\n{user_transcript(turns)}\n\nList the user's intentions: "
              "each distinct thing the user wanted the assistant to do, answer or provide, as one short sentence. "
              "Greetings, thanks and small talk are not intentions. If there are none, give an empty list.\n")
    intentions = await LIST_INTENTIONS.ask(asking, prompt)
    if not intentions:
        return Outcome(score=1.0, reason="No intentions listed: nothing to meet.")
    prompt = (f"The conversation follows. {EVIDENCE}\n{conversation_transcript(turns)}\n\nThe user's intentions, "
              f"as listed from the user's messages:\n{fenced_list(intentions)}\n\nFor each intention, decide whether "
              "the assistant met it by the end of the conversation: it did what was asked or gave what was wanted. "
              "A refusal, an excuse or a promise to do it later does not meet it. ")
    return await JUDGE_INTENTIONS.each(asking, prompt, intentions, "intentions", "met")




# --- knowledge_retention ------------------------------------------------------------------------

class Fact(Verdicts):
    fact: str
    turn: int


class Facts(Verdicts):
    facts: list[Fact]


LIST_FACTS_TASK = "You list the facts the user gave the assistant."
JUDGE_LAPSES = Judging("You decide, for assistant turns, whether the assistant forgot or contradicted what the user told "
                       "it.", ("LapseVerdicts", "LapseVerdict"), "turn", "lapse", ("lapse", "kept"),
                       ("It asks for the user's name again.", "It uses the date the user gave."))


def _facts_reader(user_turns: set[int]) -> Callable[[str | None], Facts | None]:
    """Facts read strictly, each naming a user turn that exists."""
    read = reader(Facts)

    def parse(text: str | None) -> Facts | None:
        facts = read(text)
        return facts if facts is not None and all(f.turn in user_turns for f in facts.facts) else None

    return parse


async def knowledge_retention(asking: Asking, args: PlainJudgeArgs, run: ScorerRun) -> Outcome:
    turns = turns_of(run)
    prompt = (f"The user's messages follow. {EVIDENCE}\n{user_transcript(turns)}\n\nList the facts the user stated "
              "that the assistant should remember later: names, preferences, numbers, dates, constraints, earlier "
              "answers. Give each as one short sentence with the number of the user turn where it first appears. "
              "Questions and requests are not facts. If there are none, give an empty list.\n"
              + reply_shape('{"facts": [...]}, each {"fact": ..., "turn": ...} with the fact in your own words and '
                            'the number of its user turn. For example, from another conversation:\n'
                            '{"facts": [{"fact": "The user is called Ana.", "turn": 1}, '
                            '{"fact": "The user is vegetarian.", "turn": 2}]}'))
    listed: Facts = await asking.ask(LIST_FACTS_TASK, prompt, Facts, _facts_reader({t.number for t in turns}))
    facts = [(f.turn, text) for f in listed.facts for text in cleaned([f.fact])]
    shown = "; ".join(f"{text} (user turn {turn})" for turn, text in facts)
    if not facts:
        return Outcome(score=1.0, reason="No facts listed: no assistant turn to judge.")
    judged = [t.number for t in replied(turns) if t.number >= min(turn for turn, _ in facts)]
    if not judged:
        return Outcome(score=1.0, reason=f"No assistant turn after the first fact.\nFacts: {shown}")
    items = [f"{text} (from user turn {turn})" for turn, text in facts]
    prompt = (f"The conversation follows. {EVIDENCE}\n{conversation_transcript(turns)}\n\nFacts the user gave, as "
              f"listed from the user's messages:\n{fenced_list(items)}\n\nFor each of assistant turns "
              f"{numbers(judged)}, decide whether it has a lapse: it forgets a fact the user had given by then (in "
              "that turn or earlier), for example by asking for it again or ignoring it, or it contradicts such a "
              "fact. A turn that needs no fact has no lapse. Give exactly one verdict for each of those turns.\n"
              + JUDGE_LAPSES.shape(judged))
    verdicts = await JUDGE_LAPSES.ask(asking, prompt, judged)
    lapses = sum(flag for flag, _ in verdicts)
    subjects = [f"assistant turn {turn}" for turn in judged]
    return Outcome(score=1 - lapses / len(judged), reason=f"{lapses} lapse{'s' if lapses != 1 else ''} in {len(judged)} "
                                                          f"judged assistant turns.\nFacts: {shown}\n"
                                                          f"{JUDGE_LAPSES.lines(subjects, verdicts)}")




# --- grounded -----------------------------------------------------------------------------------

LIST_CLAIMS = Listing("You list the factual claims the assistant made.", "Claims", "claims", "claim",
                      ("The flight to Rome leaves at 9:40.", "The fare is 120 euros."))
JUDGE_CLAIMS = Judging("You decide, for each claim the assistant made, whether its tool results support it.",
                       ("ClaimVerdicts", "ClaimVerdict"), "claim", "supported", ("supported", "not supported"),
                       ("Tool result 1 gives the same temperature.", "No tool result mentions a price."))


async def grounded(asking: Asking, args: PlainJudgeArgs, run: ScorerRun) -> Outcome:
    turns = turns_of(run)
    if not replied(turns):
        return Outcome(score=1.0, reason="No assistant text: no claims.")
    prompt = (f"The assistant's side of the conversation follows. {EVIDENCE}\n{assistant_transcript(turns)}\n\nList "
              "the factual claims in the assistant's turns: statements about the world, data or results that could be "
              "checked (not greetings, offers of help, questions, opinions or instructions). Write each as one short "
              "self-contained sentence. If there are none, give an empty list.\n")
    claims = await LIST_CLAIMS.ask(asking, prompt)
    if not claims:
        return Outcome(score=1.0, reason="No claims listed.")
    results = tool_results(run.output)
    if not results:
        rows = [("not supported", c, "there are no tool results") for c in claims]
        return Outcome(score=0.0, reason=f"0 of {len(claims)} claims supported: no tool results.\n{verdict_lines(rows)}")
    prompt = (f"The results of the assistant's tool calls follow. {EVIDENCE}\n{fenced_tool_results(results)}\n\n"
              f"Claims the assistant made, as listed from its replies:\n{fenced_list(claims)}\n\nFor each claim, "
              "decide whether the tool results support it: a result states it or directly implies it. A claim that no "
              "result mentions, or that a result contradicts, is not supported. ")
    return await JUDGE_CLAIMS.each(asking, prompt, claims, "claims", "supported by tool results")


models_now(LIST_INTENTIONS, JUDGE_INTENTIONS, JUDGE_LAPSES, LIST_CLAIMS, JUDGE_CLAIMS)
