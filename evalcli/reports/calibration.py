"""How ``evalcli calibrate`` prints what it measured: one row per scorer, then each scorer's confusion matrix and
every conversation where it disagrees with its label, with the scorer's reason and the command that opens it."""

from __future__ import annotations

import shlex

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..dbname import db_option
from ..run.calibrate import Calibration, ScorerCalibration
from .text import fmt, plural, scorer_errors_words


def percent(part: int, whole: int) -> str:
    """``6/12 = 50%``, or ``-`` with nothing to compare."""
    return f"{part}/{whole} = {part / whole:.0%}" if whole else "-"


def metric(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def calibration_table(calibration: Calibration) -> Table:
    """One row per calibrated scorer: labels, accuracy, kappa, MAE, the panel's Fleiss' kappa, errors."""
    table = Table(title="Agreement with the labels", title_justify="left")
    for name, justify in (("scorer", "left"), ("model", "left"), ("labels", "right"), ("accuracy", "right"),
                          ("kappa", "right"), ("MAE", "right"), ("Fleiss' kappa", "right"), ("errors", "right"),
                          ("", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    below = {id(s) for s in calibration.below()}
    for s in calibration.scorers:
        fleiss = f"{metric(s.fleiss_kappa)} ({s.raters} {'models' if s.panel else 'samples'})" if s.raters else "-"
        mark = Text("BELOW", style="bold red") if id(s) in below else Text("")
        errors = s.errors + s.not_scorable
        table.add_row(s.spec.id + (" (gate)" if s.gate else ""), s.model or "-", str(s.labels),
                      percent(s.agreed, s.compared), metric(s.kappa) if s.binary else "-",
                      "-" if s.binary else metric(s.mae), fleiss, str(errors), mark)
    return table


LEGEND = ("accuracy: a score agrees with a binary label (pass/fail) on the same side of 0.5, with a scale label within "
          "0.1; kappa: Cohen's, for binary labels; MAE: mean absolute error, for scale labels; Fleiss' kappa: how far "
          "a panel's models (or a judge's samples) agree with each other; errors: labelled conversations not compared "
          "(errors, not scorable)")


def confusion_table(s: ScorerCalibration) -> Table | None:
    if s.confusion is None or not s.compared:
        return None
    matrix = s.confusion
    table = Table(title=f"{s.spec.id}: labels (rows) against scores (columns)", title_justify="left")
    for name in ("", "scored pass (>= 0.5)", "scored fail"):
        table.add_column(name, justify="right")
    table.add_row("labelled pass", str(matrix.pass_pass), str(matrix.pass_fail))
    table.add_row("labelled fail", str(matrix.fail_pass), str(matrix.fail_fail))
    return table


def disagreements(calibration: Calibration, s: ScorerCalibration, db_path: str | None) -> Group | None:
    if not s.disagreements:
        return None
    lines: list[Text] = [Text(f"{s.spec.id} disagrees with {plural(len(s.disagreements), 'label')}:", style="bold")]
    for d in s.disagreements:
        label = "pass" if d.label == 1 and s.binary else "fail" if d.label == 0 and s.binary else fmt(d.label)
        agreement = f" ({d.agreement} samples agree)" if d.agreement else ""
        lines.append(Text.assemble(("  ", ""), (d.item_id, "bold"), f"  labelled {label}, scored {fmt(d.score)}"
                                   f"{agreement}"))
        lines.extend(Text(f"    {line}") for line in (d.reason or "(no reason)").splitlines() if line.strip())
        lines.append(Text(f"    evalcli show {calibration.run.run_id} {shlex.quote(d.item_id)}{db_option(db_path)}", style="dim"))
    return Group(*lines)


def render_calibration(console: Console, calibration: Calibration, db_path: str | None) -> None:
    """Print a calibration: the agreement table, then per scorer its confusion matrix and its disagreements."""
    run = calibration.run
    console.print()
    console.print(Text.assemble(("Calibration ", "bold"), (run.run_id, "cyan"), f"  {run.dataset_path}  ->  {run.target}"
                                f"  ({plural(run.completed, 'labelled conversation')})"), soft_wrap=True)
    console.print(calibration_table(calibration))
    console.print(Text(LEGEND, style="dim"), soft_wrap=True)
    for s in calibration.scorers:
        for part in (confusion_table(s), disagreements(calibration, s, db_path)):
            if part is not None:
                console.print(part, soft_wrap=True)
    console.print(summary_text(calibration, db_path), soft_wrap=True)


def summary_text(calibration: Calibration, db_path: str | None) -> Text:
    text = Text()
    below = calibration.below()
    if calibration.min_agreement is not None:
        wanted = f"{calibration.min_agreement:.0%}"
        if below:
            text.append("BELOW --min-agreement ", style="bold red")
            text.append(f"{wanted}: " + ", ".join(f"{s.spec.id} ({percent(s.agreed, s.compared)})" for s in below))
        else:
            text.append(f"every scorer agrees with its labels at least {wanted} of the time", style="bold green")
        text.append("\n")
    errors = calibration.run.summary.errors
    if errors:
        text.append(f"{plural(errors, 'conversation')} errored (left out of the comparison)\n", style="yellow")
    failing = scorer_errors_words(calibration.run.summary.scorer_errors)
    if failing:
        text.append(f"{failing} (left out of the comparison)\n", style="yellow")
    usage = calibration.run.usage
    if usage.get("calls"):
        text.append(f"LLM calls: {usage['calls']} (cache hits: {usage['cache_hits']})   cost: ${usage['cost']:.4f}\n")
    if db_path and not calibration.stored:
        text.append(f"run {calibration.run.run_id} stored in {db_path}; its figures not stored in table calibrations: "
                    "an interrupted calibration measured only the labelled conversations it reached", style="yellow")
    elif db_path:
        text.append(f"stored in {db_path} (run {calibration.run.run_id}; table calibrations)", style="dim")
    text.append(f"   exit code {calibration.exit_code}", style="dim")
    return text
