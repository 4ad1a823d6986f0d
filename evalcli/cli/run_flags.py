"""The options of ``evalcli run``, and those every command shares, declared once each (typer reads them from these
annotations): what they say is the command-line reference (docs/reference/cli.md, generated)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..dbname import DEFAULT_DATABASE

HELP_OPTIONS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
"""``-h`` as well as ``--help``, and the width help is wrapped at, for every command and sub-command."""
DebugOption = Annotated[bool, typer.Option("--debug", help="Show the traceback of an internal error (a bug in evalcli).")]
DbOption = Annotated[Path, typer.Option("--db", metavar="PATH", help="SQLite file of runs (created if missing; "
                                                                     "its folder must exist).")]
DEFAULT_DB = Path(DEFAULT_DATABASE)

DatasetsArgument = Annotated[list[Path], typer.Argument(metavar="DATASET", show_default=False,
                                                        help="Dataset files (YAML, or JSONL with a header line).")]
JsonOption = Annotated[Optional[str], typer.Option("--json", metavar="PATH", help="Write the JSON result to PATH "
                                                                                  "('-' for stdout).")]
JunitOption = Annotated[Optional[Path], typer.Option(metavar="PATH", help="Write a JUnit XML report to PATH.")]
MarkdownOption = Annotated[Optional[Path], typer.Option(metavar="PATH", help="Write a Markdown summary to PATH.")]
HtmlOption = Annotated[Optional[Path], typer.Option(metavar="PATH", help="Write a self-contained HTML report to "
                                                                         "PATH.")]
NoCacheOption = Annotated[bool, typer.Option("--no-cache", help="Ask the models again instead of reusing cached "
                                                                "judge and simulator replies.")]
StrictOption = Annotated[bool, typer.Option("--strict", help="Exit 3 when the verdict is 'scored'.")]
MaxErrorsOption = Annotated[Optional[int], typer.Option(min=0, metavar="N", help="Item errors tolerated before exit "
                                                                                 "code 4 (default 0).")]
FilterOption = Annotated[Optional[str], typer.Option("--filter", metavar="REGEX", help="Regex searched in each "
                                                                                      "item's id, tags and first "
                                                                                      "input.")]
LimitOption = Annotated[Optional[int], typer.Option(min=0, metavar="N", help="Run at most N items.")]
ShardOption = Annotated[Optional[str], typer.Option(metavar="I/N", help="Run shard I of N, a stable split by item "
                                                                        "id.")]
WorkersOption = Annotated[Optional[str], typer.Option(metavar="N|auto", help="Play the run's conversations in N "
                                                     "processes (1 to 64; 'auto': one per core; default 1): one run, "
                                                     "one database, the results of one process.")]
RepeatOption = Annotated[Optional[str], typer.Option(metavar="N|auto[:MAX]", help="Play each conversation N times "
                                                     "(scores averaged; pass@k and pass^k per gate; default 1), or "
                                                     "'auto': again only while its outcome is undecided, at most MAX "
                                                     "times (default 10).")]
PassRateOption = Annotated[Optional[float], typer.Option("--pass-rate", metavar="P", help="Under repeats a gate passes "
                                                         "on a conversation when at least P of its plays passed it "
                                                         "(0 < P <= 1; default 1.0: every play).")]
TurnTimeoutOption = Annotated[Optional[float], typer.Option(min=0.001, metavar="SECONDS",
                                                            help="Seconds one call of the agent may take (default: "
                                                                 "no limit).")]
MaxCostOption = Annotated[Optional[str], typer.Option(metavar="USD", help="Start no LLM call once this much is spent "
                                                                         "(US dollars), overall or per purpose: "
                                                                         "'5' or 'judge=2,target=3,simulator=1'; "
                                                                         "exit 5 when it ends the run.")]
MaxTokensOption = Annotated[Optional[str], typer.Option(metavar="N", help="The same in tokens (in and out): '100000' "
                                                                         "or 'judge=20000,target=50000'.")]
ResumeOption = Annotated[Optional[str], typer.Option(metavar="RUN_ID", help="Continue this interrupted run, with the "
                                                                            "options it was started with.")]
RerunFailedOption = Annotated[Optional[str], typer.Option(metavar="RUN_ID", help="Run only the items that failed or "
                                                                                 "errored in this run.")]
TargetOption = Annotated[Optional[list[str]], typer.Option("--target", metavar="TARGET", help="Run against this target "
                                                                                           "instead of the dataset's: "
                                                                                           "module:attribute, "
                                                                                           "model:NAME, "
                                                                                           "mastra:URL#AGENT or "
                                                                                           "http:URL. Repeat it to "
                                                                                           "compare targets (one run "
                                                                                           "each).")]
RecordToolsOption = Annotated[Optional[Path], typer.Option("--record-tools", metavar="DIR", help="Record every tool "
                                                           "call to DIR/<dataset stem>.tape.jsonl (a dataset's "
                                                           "'tools:' replays it with 'replay: PATH').")]
HermeticOption = Annotated[bool, typer.Option("--hermetic", help="A tool call no mock or tape answers is the "
                                                                 "conversation's error (never run live).")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the verdict line and the conversations "
                                                                 "that errored (no table, no warnings).")]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Show every conversation.")]

OtelEndpointOption = Annotated[Optional[str], typer.Option("--otel-endpoint", metavar="URL", help="Send the run as "
                                                           "OpenTelemetry spans to this OTLP/HTTP receiver ('-': "
                                                           "OTEL_EXPORTER_OTLP_ENDPOINT).")]
OtelFileOption = Annotated[Optional[Path], typer.Option("--otel-file", metavar="PATH", help="Append the run as "
                                                        "OpenTelemetry spans (OTLP JSON, one request a line) to "
                                                        "PATH.")]
