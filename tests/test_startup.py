"""Start-up stays light: ``evalcli --help`` and a check-only run never import litellm, aiohttp or openai (model
calls need them), nor jsonschema, nor jinja2 (which only ``json_output`` with a schema and the HTML report need),
and a check-only run does not import sqlite-utils (it migrates old databases; a new one gets at once the schema its
migrations make; when it is imported, it is without numpy). A plain run and ``validate`` import no OpenTelemetry
export, CI-file, ``evalcli view`` or table-drawing module, no scorer kind's module that no reference names (the
built-in kinds are known by name, ``evalcli.scorers.builtin.TABLE``), nothing that reads traces (a data file of
traces), captures spans (an agent that emits them) or simulates users (a ``simulate`` item), nor the dataset file's
models (``evalcli.dataset.files``, ``fields``: a plain top level and plain items are read without them), nor seeded
faults (``evalcli.tools.faults`` and ``statistics``: a dataset without ``faults:``) nor ``html``
(``secrets.html_escape``), and typer builds only
the command named (docs/performance.md "Start-up and finish"). A run whose turns make HTTP requests imports aiohttp before its clock
starts, not at its first request. A ``--quiet`` run imports no rich (nor the transcripts' and plain text's
reports, nor any report: they are fed after the run) before its first turn, a run that calls no model neither
the LLM client, its response cache, litellm's table nor the embedded model's modules, nor does a plain one import
tapes, a resume's reading or the adapters' message builders; it collects no garbage between parsing its command
line and its first turn (it freezes what it loaded first); an import scope resolves each module's file once
however often it is entered (by its folder's real path). Which modules got
imported is checked in a subprocess; no timing is asserted here (``make bench`` measures time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

# Runs the CLI like the console script does, then reports which heavy modules were imported.
PROBE = """
import atexit, json, sys
HEAVY = ["litellm", "sqlite_utils", "numpy", "jsonschema", "jinja2", "aiohttp", "openai"]
# what only an export, CI files, a table or another command needs: a --quiet run that passes and validate never
# import them
EXTRA = ["xml.etree.ElementTree", "http.client", "urllib.request", "evalcli.reports.otel", "evalcli.otel.endpoint",
         "evalcli.reports.ci", "click", "pluggy", "dateutil", "getpass", "rich.table", "rich.panel",
         "evalcli.scorers.judges", "evalcli.scorers.checks.tools", "evalcli.scorers.checks.agents",
         "evalcli.scorers.custom", "evalcli.otel.ingest", "evalcli.otel.turn_capture", "evalcli.otel.readers",
         "evalcli.otel.spans", "evalcli.run.simulated", "evalcli.dataset.files", "evalcli.dataset.fields", "html",
         "evalcli.tools.faults", "statistics"]
# what validate and run do not use (evalcli/lazy.py): the runner, store and reports, comparison and calibration
PARTS = ["scipy", "opentelemetry", "evalcli.run", "evalcli.store", "evalcli.evaluate", "evalcli.reports",
         "evalcli.reports.html", "evalcli.run.calibrate", "evalcli.store.compare", "evalcli.store.diff",
         "evalcli.store.merge", "evalcli.store.paired", "evalcli.reports.compare", "evalcli.reports.diff",
         "evalcli.llm.client", "evalcli.llm.cache", "sqlite3"]
atexit.register(lambda: print("MODULES " + json.dumps({m: m in sys.modules for m in HEAVY}), file=sys.stderr))
atexit.register(lambda: print("PARTS " + json.dumps({m: m in sys.modules for m in PARTS}), file=sys.stderr))
atexit.register(lambda: print("EXTRA " + json.dumps({m: m in sys.modules for m in EXTRA}), file=sys.stderr))
sys.argv = ["evalcli", *sys.argv[1:]]
from evalcli.cli import main
main()
"""


def imported(args: list[str], cwd: Path, which: str = "MODULES") -> tuple[int, dict[str, bool]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT)
    line = next(line for line in done.stderr.splitlines() if line.startswith(which + " "))
    return done.returncode, json.loads(line.removeprefix(which + " "))


def _weather(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("async def answer(input, *, memory=None):\n    return 'Sunny in Brooklyn.'\n")
    (tmp_path / "d.yaml").write_text("target: agent:answer\ngates: [{includes: Sunny}]\ndata:\n  - input: Hi\n")


def test_validate_imports_neither_the_runner_nor_the_store_nor_the_reports(tmp_path: Path) -> None:
    _weather(tmp_path)
    code, modules = imported(["validate", "d.yaml"], tmp_path)
    assert code == 0
    assert not any(modules.values()), modules
    code, parts = imported(["validate", "d.yaml"], tmp_path, "PARTS")
    assert not any(parts.values()), parts
    code, extra = imported(["validate", "d.yaml"], tmp_path, "EXTRA")
    assert not any(extra.values()), extra


def test_a_run_imports_no_comparison_diff_merge_or_calibration(tmp_path: Path) -> None:
    _weather(tmp_path)
    code, parts = imported(["run", "d.yaml", "--db", str(tmp_path / "x.db")], tmp_path, "PARTS")
    assert code == 0
    assert parts["evalcli.run"] and parts["evalcli.store"] and parts["evalcli.reports"], parts  # what it uses
    unused = {m: v for m, v in parts.items() if m not in ("evalcli.run", "evalcli.store", "evalcli.evaluate",
                                                          "evalcli.reports", "sqlite3")}
    assert not any(unused.values()), unused
    code, extra = imported(["run", "d.yaml", "--db", str(tmp_path / "y.db"), "--quiet"], tmp_path, "EXTRA")
    assert code == 0
    assert not any(extra.values()), extra  # a new database, no export, no CI file


def test_help_imports_no_heavy_module(tmp_path: Path) -> None:
    code, modules = imported(["--help"], tmp_path)
    assert code == 0
    assert not any(modules.values()), modules


def test_check_only_run_imports_neither_litellm_nor_sqlite_utils(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(
        "async def answer(input, *, memory=None):\n"
        "    return [{'role': 'assistant', 'content': 'Sunny in Brooklyn.'}]\n"
    )
    (tmp_path / "scorers.yaml").write_text("scorers:\n  mentions-brooklyn:\n    includes: Brooklyn\n")
    (tmp_path / "d.jsonl").write_text(
        '{"target": "agent:answer", "gates": ["mentions-brooklyn"], "scorers": [{"excludes": "rain"}]}\n'
        '{"input": "Weather?"}\n'
        '{"inputs": ["Hi", "Weather?"]}\n'
        '{"turns": [{"input": "Hi"}, {"input": "Weather?", "gates": [{"includes": "sunny"}]}]}\n'
    )
    code, modules = imported(["run", "d.jsonl", "--db", str(tmp_path / "x.db")], tmp_path)
    assert code == 0
    assert not any(modules.values()), modules  # a new database gets its schema without sqlite-utils
    code, modules = imported(["run", "d.jsonl", "--db", str(tmp_path / "x.db")], tmp_path)
    assert code == 0
    assert not any(modules.values()), modules


# Runs a dataset through the library and reports, at the run's start and at its first turn, whether aiohttp was
# imported; then checks that numpy can still be imported after sqlite-utils was imported without it.
AT_START = """
import json, sys
from evalcli import run_evals
from evalcli.run import Events
from evalcli.store import Store

seen = {}

class Seen(Events):
    def started(self, run_id, total, done):
        seen["at_start"] = "aiohttp" in sys.modules
    def item_done(self, result):
        seen.setdefault("error", result.error)

run_evals(sys.argv[1], store=Store(sys.argv[2]), events=Seen())
import numpy
print("SEEN " + json.dumps(seen))
"""


def _seen(tmp_path: Path, dataset: str) -> dict[str, object]:
    (tmp_path / "d.yaml").write_text(dataset)
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", AT_START, str(tmp_path / "d.yaml"), str(tmp_path / "x.db")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("SEEN "))
    return dict(json.loads(line.removeprefix("SEEN ")))


def test_an_http_target_run_imports_aiohttp_before_its_clock_starts(tmp_path: Path) -> None:
    # the endpoint refuses connections: the turn fails, but the import happened before the run started
    seen = _seen(tmp_path, "target: {http: {url: 'http://127.0.0.1:9/chat'}}\ngates: [{includes: Sunny}]\ndata:\n  - input: Hi\n")
    assert seen["at_start"] is True
    assert "cannot connect" in str(seen["error"])


def test_a_callable_target_run_does_not_import_aiohttp(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("def answer(input, *, memory=None):\n    return 'Sunny.'\n")
    seen = _seen(tmp_path, "target: agent:answer\ngates: [{includes: Sunny}]\ndata:\n  - input: Hi\n")
    assert seen["at_start"] is False


def test_a_new_database_gets_the_schema_its_migrations_make(tmp_path: Path) -> None:
    import sqlite3

    from evalcli.store import migrations, migrations_schema

    assert migrations.schema_module_text() == Path(migrations_schema.__file__).read_text(encoding="utf-8"), \
        "run python -m evalcli.store.migrations after adding a migration"
    one_by_one, at_once = sqlite3.connect(":memory:", isolation_level=None), sqlite3.connect(tmp_path / "x.db")
    at_once.isolation_level = None
    assert migrations.apply(one_by_one, fresh=False) == migrations.apply(at_once) == [n for n, _ in migrations.MIGRATIONS]
    master = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid"
    assert list(one_by_one.execute(master)) == list(at_once.execute(master))
    assert migrations.pending(at_once) == [] and migrations.apply(at_once) == []


def test_a_database_with_a_table_is_migrated_one_by_one(tmp_path: Path) -> None:
    import sqlite3

    from evalcli.store import migrations

    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    assert migrations.create_current(conn) == []  # not empty: never rebuilt at once
    assert migrations.apply(conn) == [n for n, _ in migrations.MIGRATIONS]
    fresh = sqlite3.connect(":memory:", isolation_level=None)
    migrations.apply(fresh)
    master = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
    assert list(conn.execute(master)) == list(fresh.execute(master))


def test_typer_builds_only_the_command_named_and_the_same_one() -> None:
    import typer.main

    from evalcli.cli.app import app, invoked

    whole = typer.main.get_command(app)
    names = list(whole.commands)  # type: ignore[attr-defined]
    assert {"run", "validate", "cache", "labels"} <= set(names)
    for name in names:
        only = typer.main.get_command(invoked([name, "--help"]))
        assert list(only.commands) == [name]  # type: ignore[attr-defined]
        ctx = whole.make_context("evalcli", [name, "--help"], resilient_parsing=True)
        sub, full = only.commands[name], whole.commands[name]  # type: ignore[attr-defined]
        assert sub.get_help(ctx) == full.get_help(ctx)
        assert [p.opts for p in sub.params] == [p.opts for p in full.params]
    for argv in ([], ["--version"], ["rnu"], ["--help"]):
        assert invoked(argv) is app


# Resolves a judge and a check first (their modules imported then), then lists every kind as `evalcli scorers` does.
LISTING = """
import json
from evalcli.scorers import builtin, kinds
first = [kinds.find(name).name for name in ("rubric", "judge", "includes")]
listed = [(k.name, list(k.aliases), k.group) for k in kinds.all_kinds()]
print("LISTED " + json.dumps({"first": first, "listed": listed, "names": kinds.names(),
                              "bare": kinds.no_argument_kinds()}))
"""


def test_the_built_in_kinds_known_by_name_are_those_their_modules_declare() -> None:
    from evalcli.plugins import SCORERS, entries, load_path
    from evalcli.scorers import builtin, kinds

    for attribute, rows in builtin.TABLE.items():
        declared = getattr(builtin, attribute)  # every module of the list imported, in the table's order
        assert [(k.name, k.aliases) for k in declared] == [(name, aliases) for name, aliases, _ in rows]
        entry = next(e for e in entries(SCORERS) if e.value.endswith(f":{attribute}"))
        for name, _, path in rows:
            value = load_path(path, entry)
            assert name in [k.name for k in (value if isinstance(value, list | tuple) else [value])]
    eager = sorted((*builtin.CHECKS, *builtin.JUDGES, *builtin.PYTHON), key=lambda k: kinds.GROUP_ORDER.index(k.group))
    assert kinds.all_kinds(builtin_only=True) == eager


def test_every_kind_is_listed_in_the_same_order_whichever_was_resolved_first(tmp_path: Path) -> None:
    from evalcli.scorers import builtin, kinds

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", LISTING], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("LISTED ")).removeprefix("LISTED "))
    eager = sorted((*builtin.CHECKS, *builtin.JUDGES, *builtin.PYTHON), key=lambda k: kinds.GROUP_ORDER.index(k.group))
    assert seen["first"] == ["rubric", "multi_turn_judge", "includes"]
    assert seen["listed"] == [[k.name, list(k.aliases), k.group] for k in eager]
    assert seen["names"] == [name for k in eager for name in (k.name, *k.aliases)]
    assert seen["bare"] == [k.name for k in eager if k.main is None and not any(
        f.is_required() for f in k.args.model_fields.values())]


# The console script's `evalcli run`, whose target records at its first turn which modules were imported, and how many
# collections the garbage collector made since the command started.
FIRST_TURN = """
import gc, json, sys
sys.argv = ["evalcli", *sys.argv[1:]]
from evalcli.cli import main
BEFORE = sum(s["collections"] for s in gc.get_stats())
main()
"""
FIRST_TURN_AGENT = """
import gc, json, sys
seen = {}
def answer(input, *, memory=None):
    if not seen:
        seen.update({m: m in sys.modules for m in ("rich", "rich.console", "evalcli.reports.plain",
                                                    "evalcli.reports.transcript", "evalcli.reports",
                                                    "evalcli.reports.json", "evalcli.reports.terminal",
                                                    "evalcli.llm.client", "evalcli.llm.cache", "evalcli.llm.catalog",
                                                    "evalcli.llm.local_model", "evalcli.llm.ratelimit",
                                                    "evalcli.tools.tape", "evalcli.run.resume",
                                                    "evalcli.targets.openai_format")})
        seen["collections"] = sum(s["collections"] for s in gc.get_stats()) - sys.modules["__main__"].BEFORE
        with open("seen.json", "w") as f:
            json.dump(seen, f)
    return "Sunny in Brooklyn."
"""


def test_a_quiet_run_imports_no_rich_and_collects_nothing_before_its_first_turn(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(FIRST_TURN_AGENT)
    (tmp_path / "d.yaml").write_text("target: agent:answer\ngates: [{includes: Sunny}]\ndata:\n  - input: Hi\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", FIRST_TURN, "run", "d.yaml", "--db", "x.db", "--quiet"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "verdict: passed" in done.stdout  # the report imports rich after the run
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert not any(seen.values()), seen


# An agent whose last conversation waits, while the run goes on, until rich's console and evalcli's reports are
# imported: only the report's own import thread, started when the first conversation is done, can import them meanwhile.
WAITING_AGENT = """
import json, sys, time
WANTED = ("rich.console", "evalcli.reports", "evalcli.reports.terminal")
def answer(input, *, memory=None):
    if input == "last":
        deadline = time.monotonic() + 20
        while not all(name in sys.modules for name in WANTED) and time.monotonic() < deadline:
            time.sleep(0.01)
        with open("seen.json", "w") as f:
            json.dump({name: name in sys.modules for name in WANTED}, f)
    return "Sunny in Brooklyn."
"""


def test_a_quiet_run_imports_its_report_while_conversations_still_play(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(WAITING_AGENT)
    (tmp_path / "d.yaml").write_text("target: agent:answer\nconcurrency: 1\ngates: [{includes: Sunny}]\ndata:\n"
                                     "  - input: first\n  - input: last\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "evalcli", "run", "d.yaml", "--db", "x.db", "--quiet"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "verdict: passed" in done.stdout
    assert json.loads((tmp_path / "seen.json").read_text()) == {"rich.console": True, "evalcli.reports": True,
                                                                 "evalcli.reports.terminal": True}


def test_a_module_file_is_resolved_once_however_often_a_scope_is_entered(tmp_path: Path, monkeypatch) -> None:
    from evalcli.dataset import ImportScope

    resolved: list[str] = []
    real = Path.resolve

    def counted(self: Path, strict: bool = False) -> Path:
        resolved.append(str(self))
        return real(self, strict)

    (tmp_path / "scoped_agent_module.py").write_text("X = 1\n")
    scope = ImportScope([tmp_path])  # its folders resolved as it is made
    monkeypatch.setattr(Path, "resolve", counted)
    for _ in range(3):
        with scope:
            import scoped_agent_module  # noqa: F401 - imported in the scope, kept as its own
    assert resolved and len(resolved) == len(set(resolved)), sorted(f for f in set(resolved) if resolved.count(f) > 1)
    # a module's file by its folder's real path, each folder resolved once: no file that is not a link is resolved
    assert not [f for f in resolved if f.endswith(".py")], resolved


def test_a_module_files_real_path_is_what_path_resolve_gives(tmp_path: Path) -> None:
    from evalcli.dataset.imports import _resolved

    (tmp_path / "real" / "pkg").mkdir(parents=True)
    (tmp_path / "real" / "pkg" / "mod.py").write_text("X = 1\n")
    (tmp_path / "real" / "other.py").write_text("X = 1\n")
    (tmp_path / "linked").symlink_to(tmp_path / "real")  # a linked folder
    (tmp_path / "real" / "pkg" / "alias.py").symlink_to(tmp_path / "real" / "other.py")  # a linked file
    (tmp_path / "real" / "pkg" / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    files = [tmp_path / "linked" / "pkg" / "mod.py", tmp_path / "linked" / "pkg" / "alias.py",
             tmp_path / "real" / "pkg" / "dangling.py", tmp_path / "linked" / "missing" / "m.py",
             tmp_path / "real" / "pkg" / ".." / "other.py", Path(os.__file__), Path("relative.py")]
    for file in files:
        assert _resolved(str(file)) == str(file.resolve()), file
