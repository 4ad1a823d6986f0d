"""Custom Python scorers for the registry example of docs/scorers.md (``tone: {python: examples.scorers:tone}``).

A custom scorer is a function of a ``ScorerRun`` returning a float, ``Score(score, reason)`` or
``not_scorable(reason)``; sync or async.
"""

from __future__ import annotations

from evalcli import Score, ScorerRun, not_scorable
from evalcli.messages import assistant_texts

RUDE = ("stupid", "obviously", "as i already said", "whatever")


def tone(run: ScorerRun) -> Score | object:
    """1 when the assistant's last reply has none of a few rude phrases, else 0."""
    texts = assistant_texts(run.output)
    if not texts:
        return not_scorable("the assistant said nothing")
    found = [phrase for phrase in RUDE if phrase in texts[-1].lower()]
    if found:
        return Score(0.0, f"rude phrases in the last reply: {', '.join(found)}")
    return Score(1.0, "no rude phrase in the last reply")
