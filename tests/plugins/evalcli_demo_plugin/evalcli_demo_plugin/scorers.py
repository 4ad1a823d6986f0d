"""The max_words scorer kind: one declaration, as each of evalcli's own kinds is (docs/extending.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from evalcli.results import Outcome
from evalcli.scorers import BuildContext, Kind, ScorerRun


class MaxWordsArgs(BaseModel):
    """The arguments a dataset gives: ``{max_words: 30}`` or ``{max_words: {max: 30}}``."""

    model_config = ConfigDict(extra="forbid")  # a misspelt argument is a validation error at its line

    max: int = Field(ge=1, description="The most words any assistant message may have.")


class MaxWords:
    """A scorer: ``score`` is called once per scored conversation (or turn)."""

    def __init__(self, args: MaxWordsArgs) -> None:
        self.max = args.max

    async def score(self, run: ScorerRun) -> Outcome:
        texts = [m["content"] for m in run.output if m.get("role") == "assistant" and isinstance(m.get("content"), str)]
        if not texts:
            return Outcome(not_scorable=True, reason="no assistant text")
        longest = max(len(text.split()) for text in texts)
        return Outcome(score=float(longest <= self.max), reason=f"longest assistant message: {longest} words "
                                                                f"(max {self.max})")


def build(args: MaxWordsArgs, context: BuildContext) -> MaxWords:
    return MaxWords(args)


MAX_WORDS = Kind(name="max_words", args=MaxWordsArgs, main="max", build=build,
                 summary="1 if no assistant message has more than `max` words", example="max_words: 30")
