"""Reports for CI: JUnit XML (a testcase per conversation and per turn) and a Markdown summary.

Pure functions of a run's result and its conversations; the caller writes the text where asked
(``--junit``, ``--markdown``, and ``$GITHUB_STEP_SUMMARY`` when set).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ..identity import given_name
from ..results import ItemResult, Outcome, RunResult
from ..words import inert
from .text import budget_words, fmt, gate_rule, repeat_flags, threshold_text, verdict_words, why_failed

_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
VERDICT_ICON = {"passed": "✅", "scored": "⚠️", "failed": "❌", None: "➖"}
OUTCOME_ICON = {"errors": "❌", "interrupted": "⏸️", "budget": "⏸️", "unfinished": "❌"}
"""A run with errored conversations is never shown with a green check, whatever its verdict."""


def _clean(text: str) -> str:
    """XML 1.0 cannot hold most control characters; drop them."""
    return _XML_INVALID.sub("", text)


def _missed(outcomes: dict[str, Outcome], played: ItemResult | None = None, pass_rate: float = 1.0,
            turn: bool = False) -> list[str]:
    """Each missed gate as ``gate ID: score S (needs 1)``; of a conversation ``played`` under repeats, what decided it
    (docs/verdicts.md#repeats-and-the-pass-rate), never its mean against 1 (2, 0, 2, 0 average 1 and fail):
    ``gate ID: passed 2 of 4 plays (needs every play); mean score 1`` (a per-turn gate: ``missed in a play``)."""
    lines = []
    for gate_id, outcome in outcomes.items():
        if not outcome.missed_gate:
            continue
        detail = f"gate {gate_id}: score {fmt(outcome.score)} (needs 1)"
        if played is not None and played.repeated:
            needs = "every play" if pass_rate >= 1.0 else f"at least {fmt(pass_rate)} of them"
            passes, plays = played.gate_passes.get(gate_id), played.gate_plays.get(gate_id)
            counted = (f"passed {passes} of {plays} plays" if passes is not None and plays and not turn
                       else f"missed in a play of {played.repeats}")
            detail = f"gate {gate_id}: {counted} (needs {needs}); mean score {fmt(outcome.score)}"
        if outcome.error:
            detail += f"; raised {outcome.error}"
        if outcome.reason:
            detail += f"; {outcome.reason}"
        lines.append(detail)
    return lines


def _scores_text(item_scores: dict[str, Outcome]) -> str:
    def score(o: Outcome) -> str:
        return "not scorable" if o.not_scorable else "error" if o.score is None and o.error else fmt(o.score)

    return "\n".join(f"{k}: {score(o)}" + (f" - {o.error or o.reason}" if o.error or o.reason else "")
                     for k, o in item_scores.items())


def _case(suite: ET.Element, classname: str, name: str, seconds: float) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=_clean(classname), name=_clean(name), time=f"{seconds:.3f}")


def _outcomes(case: ET.Element, gates: dict[str, Outcome], scores: dict[str, Outcome],
              played: ItemResult | None = None, pass_rate: float = 1.0, turn: bool = False) -> None:
    """A ``<failure>`` listing the missed gates, and the scores (with reasons) as ``<system-out>``."""
    missed = _missed(gates, played, pass_rate, turn)
    if missed:
        failure = ET.SubElement(case, "failure", message=_clean(missed[0]), type="GateFailed")
        failure.text = _clean("\n".join(missed))
    if scores:
        ET.SubElement(case, "system-out").text = _clean(_scores_text(scores))


class JUnitSuite:
    """One ``<testsuite>`` for a run, built as its conversations stream past (``element`` when done)."""

    def __init__(self, result: RunResult) -> None:
        self.result = result
        self.element = ET.Element("testsuite", name=_clean(result.dataset_path))
        props = ET.SubElement(self.element, "properties")
        for key, value in (("run_id", result.run_id), ("target", result.target), ("verdict", str(result.verdict)),
                           ("verdict_words", verdict_words(result))):
            ET.SubElement(props, "property", name=key, value=_clean(value))
        self.classname = re.sub(r"\.(ya?ml|jsonl)$", "", result.dataset_path).replace("/", ".")

    def item(self, item: ItemResult) -> None:
        suite, classname = self.element, self.classname
        name = given_name(item)  # as its identity holds it: two ids that differ only in secrets are two testcases
        case = _case(suite, classname, name, item.duration_ms / 1000)
        if item.stop_reason is not None:
            props = ET.SubElement(case, "properties")
            for key, value in (("form", item.form), ("stop_reason", item.stop_reason), ("turns", str(len(item.turns)))):
                ET.SubElement(props, "property", name=key, value=value)
        if item.status != "ok":
            error = ET.SubElement(case, "error", message=_clean(item.error or "error"), type="ItemError")
            error.text = _clean(item.traceback or item.error or "")
            _outcomes(case, {}, item.scores)
        else:
            _outcomes(case, item.gate_scores, item.scores, item, self.result.pass_rate)
        if item.per_turn and item.status == "ok":
            for turn in item.turns:
                turn_case = _case(suite, classname, f"{name} / turn {turn.index}", turn.duration_ms / 1000)
                _outcomes(turn_case, turn.gate_scores, turn.scores, item, self.result.pass_rate, turn=True)

    def close(self) -> ET.Element:
        suite, summary = self.element, self.result.summary
        # thresholds are aggregates, not per conversation: each missed one is one extra failing testcase
        thresholds = [(t.id, t) for t in summary.threshold_results]
        thresholds += [(f"{t.id} (turn {turn.index})", t) for turn in summary.turn_results
                       for t in turn.threshold_results]
        for name, threshold in thresholds:
            if threshold.passed:
                continue
            case = _case(suite, f"{self.classname}.thresholds", name, 0.0)
            message = f"average {fmt(threshold.average_score)} misses threshold {threshold_text(threshold.threshold)}"
            ET.SubElement(case, "failure", message=message, type="ThresholdMissed").text = message
        cases = suite.findall("testcase")
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
        suite.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
        suite.set("skipped", "0")
        suite.set("time", f"{sum(float(c.get('time') or 0) for c in cases):.3f}")
        return suite


def junit_document(suites: list[ET.Element]) -> str:
    """The whole JUnit XML file for one or more runs."""
    root = ET.Element("testsuites", name="evalcli")
    for attribute in ("tests", "failures", "errors"):
        root.set(attribute, str(sum(int(s.get(attribute) or 0) for s in suites)))
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


_MARKDOWN_ESCAPES = str.maketrans({"|": "\\|", "[": "\\[", "]": "\\]", "<": "&lt;", ">": "&gt;", "\r": " ",
                                   "\n": " "})


def markdown_text(text: str) -> str:
    """Text an agent, a tool or a scorer wrote, as one line of Markdown that reads as that text: no table cell
    ended by a ``|``, no line (a heading, a table row) begun by a line break (``\\r`` is one to Markdown), no HTML
    (a ``<!--`` that hid the rest of the summary, a ``</details>``), no link (``[text](url)``), no terminal control
    character (docs/ci.md#the-markdown-summary-shows-text-as-written)."""
    return inert(text.translate(_MARKDOWN_ESCAPES))


def _code(text: str) -> str:
    """``text`` as one Markdown code span on one line, whatever backticks it holds: fenced by a longer run of them
    (in a span, HTML and links are text already)."""
    text = inert(text.replace("\r", " ").replace("\n", " "))
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


class MarkdownSummary:
    """A Markdown section for a CI step summary or a PR comment, built as conversations stream past."""

    def __init__(self, result: RunResult) -> None:
        self.result = result
        self.problems: list[str] = []

    def item(self, item: ItemResult) -> None:
        if item.status != "ok":
            self.problems.append(f"- {_code(item.id)}: {markdown_text(why_failed(item))}")
            return
        rate = self.result.pass_rate
        missed = _missed(item.gate_scores, item, rate) + [f"turn {t.index} {m}" for t in item.turns
                                                          for m in _missed(t.gate_scores, item, rate, turn=True)]
        if missed:
            self.problems.append(f"- {_code(item.id)}{' (simulated, ' + item.stop_reason + ')' if item.stop_reason else ''}: "
                                 f"{markdown_text('; '.join(missed))}")

    def close(self) -> str:
        result, summary = self.result, self.result.summary
        icon = OUTCOME_ICON.get(result.outcome, VERDICT_ICON.get(summary.verdict, "➖"))
        lines = [f"### {icon} evalcli `{result.dataset_path}`: **{verdict_words(result)}**",
                 "",
                 f"Run `{result.run_id}` · target `{result.target}` · {summary.total_items} conversations · "
                 f"{summary.errors - summary.limited} errors"
                 + (f" · {summary.limited} limited" if summary.limited else "")
                 + (f" · status **{result.status}**" if result.status != "completed" else ""),
                 ""]
        spent = budget_words(result)
        if spent is not None:
            lines += [f"**{spent[:1].upper() + spent[1:]}**: continue with a larger `--max-cost` or `--max-tokens` and "
                      f"`evalcli run {result.dataset_path} --resume {result.run_id}`.", ""]
        if summary.gate_results:
            rule = gate_rule(result)
            if rule is not None:  # under repeats a gate's score is its mean, not what decides it
                lines += [f"Gates: {rule} (`{repeat_flags(result)}`).", ""]
            lines += ["| gate | score | |", "|---|---:|---|"]
            lines += [f"| {markdown_text(g.id)} | {fmt(g.score)} | {'✅' if g.passed else '❌'} |" for g in summary.gate_results]
            lines.append("")
        if summary.scores:
            thresholds = {t.id: t for t in summary.threshold_results}
            lines += ["| scorer | mean | threshold | |", "|---|---:|---|---|"]
            for scorer_id, mean in summary.scores.items():
                t = thresholds.get(scorer_id)
                lines.append(f"| {markdown_text(scorer_id)} | {fmt(mean)} | {threshold_text(t.threshold) if t else ''} | "
                             f"{('✅' if t.passed else '❌') if t else ''} |")
            lines.append("")
        if result.stability:
            lines += ["Stability over the `--repeat` plays: " + ", ".join(f"**{count}** {name}" for name, count
                                                                        in result.stability.items()), ""]
        if result.pass_at_k:
            lines += ["| gate | pass@k | pass^k |", "|---|---:|---:|"]
            lines += [f"| {markdown_text(g)} | {fmt(v)} | {fmt(result.pass_all_k.get(g))} |" for g, v in result.pass_at_k.items()]
            lines.append("")
        turn_lines = []
        for turn in summary.turn_results:
            parts = [f"{g.id} {fmt(g.score)} {'✅' if g.passed else '❌'}" for g in turn.gate_results]
            parts += [f"{t.id} {fmt(t.average_score)} {'✅' if t.passed else '❌'}" for t in turn.threshold_results]
            if parts:
                turn_lines.append(f"| {turn.index} | {markdown_text('; '.join(parts))} |")
        if turn_lines:
            lines += ["| turn | gates and thresholds |", "|---:|---|", *turn_lines, ""]
        problems = self.problems
        if problems:
            shown = problems[:20]
            lines += ["<details><summary>Failing conversations "
                      f"({len(problems)})</summary>", "", *shown,
                      *([f"- ... and {len(problems) - 20} more"] if len(problems) > 20 else []), "", "</details>", ""]
        return "\n".join(lines) + "\n"
