"""Adapters and scorer kinds come from entry points, evalcli's own as a package's (docs/extending.md): the example
plugin in tests/plugins, installed with pip into a fresh virtual environment, adds the ``parrot`` adapter and the
``max_words`` kind, which ``evalcli adapters``, ``evalcli scorers`` and a run through that environment's CLI use; a
broken or shadowing entry point is an error naming its package and entry point, never a traceback, and never
replaces a built-in. Every run is the real CLI in a fresh interpreter."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalcli.errors import PluginError
from evalcli.plugins import Entry, Names
from tests.conftest import REPO, CliResult, run_cli
from tests.doc_blocks import read_page
from tests.plugin_packages import DEMO_PLUGIN, demo_plugin, installed
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

AGENT = 'from demo_parrot import Parrot\n\npolly = Parrot("Polly", tools={"clock": lambda: "noon"})\n'
REGISTRY = "scorers:\n  short-replies: {max_words: 6}\n"
DATASET = """\
target: agent:polly
gates:
  - short-replies
scorers:
  - called_tool: clock
data:
  - id: hello
    input: Hello there
  - id: time
    inputs: [Hi, "What time is it? use clock"]
    tools:
      clock: {returns: midnight}
"""
PLAIN = "target: agent:answer\ngates: [{includes: Sunny}]\ndata: [{input: Sunny or not}]\n"
PLAIN_AGENT = "def answer(input, *, memory=None):\n    return 'Sunny.'\n"


def pyproject_entry_points(path: Path) -> dict[str, dict[str, str]]:
    points: dict[str, dict[str, str]] = tomllib.loads(path.read_text())["project"]["entry-points"]
    return points


def check_listings(adapters: dict[str, Any], scorers: dict[str, Any]) -> None:
    """The plugin's adapter and kind are listed with its package; evalcli's own with evalcli's, as declared."""
    own = pyproject_entry_points(REPO / "pyproject.toml")
    by_name = {a["name"]: a for a in adapters["adapters"]}
    assert by_name["parrot"] | {"summary": ""} == {
        "name": "parrot", "summary": "", "mapping": False, "recognises": ["demo_parrot.Parrot"],
        "package": "evalcli-demo-plugin", "version": "0.1.0", "builtin": False,
        "entry_point": "parrot = evalcli_demo_plugin:PARROT"}
    builtin = {a["name"]: a["entry_point"] for a in adapters["adapters"] if a["package"] == "evalcli"}
    assert builtin == {name: f"{name} = {value}" for name, value in own["evalcli.adapters"].items()}
    assert list(by_name)[-1] == "parrot"  # evalcli's own first
    kinds = {k["name"]: k for k in scorers["kinds"]}
    assert (kinds["max_words"]["package"], kinds["max_words"]["version"], kinds["max_words"]["builtin"]) == (
        "evalcli-demo-plugin", "0.1.0", False)
    assert kinds["max_words"]["arguments"] == [
        {"name": "max", "default": "required", "description": "The most words any assistant message may have."}]
    assert {k["entry_point"] for k in scorers["kinds"] if k["builtin"]} == {
        f"{name} = {value}" for name, value in own["evalcli.scorers"].items()}
    assert kinds["includes"]["package"] == "evalcli" and kinds["multi_turn_judge"]["aliases"] == ["judge"]


def check_run(done: CliResult, db: Path) -> None:
    """The run used the parrot adapter (a history per conversation, the mocked tool, its usage) and the kind."""
    assert done.code == 1, done.stderr  # the gate missed on one conversation
    items = {item["id"]: item for item in done.json["items"]}
    assert items["hello"]["turns"][0]["output"] == [{"role": "assistant", "content": "Polly heard: Hello there"}]
    last = items["time"]["turns"][1]["output"]
    assert last[1] == {"role": "tool", "tool_call_id": "call_1_0", "name": "clock", "content": "midnight",
                       "source": "mock"}
    assert last[2]["content"] == "Polly heard: What time is it? use clock"
    with sqlite3.connect(db) as conn:
        gates = {item: json.loads(scores) for item, scores in conn.execute("SELECT item_id, gate_scores FROM items")}
        spec = conn.execute("SELECT kind, spec FROM scorers WHERE scorer_id = 'short-replies'").fetchone()
        scores = conn.execute("SELECT s.score, s.reason FROM scores s JOIN items i USING (run_id, item_index) "
                              "WHERE s.scorer_id = 'short-replies' ORDER BY i.item_id").fetchall()
        calls = conn.execute("SELECT model, item_index, turn_index, prompt_tokens, completion_tokens FROM llm_calls "
                             "WHERE purpose = 'target' ORDER BY item_index, turn_index").fetchall()
    assert gates == {"hello": {"short-replies": 1.0}, "time": {"short-replies": 0.0}}
    assert spec[0] == "max_words" and json.loads(spec[1]) == {"kind": "max_words", "args": {"max": 6}}
    assert scores == [(1.0, "longest assistant message: 4 words (max 6)"),
                      (0.0, "longest assistant message: 8 words (max 6)")]
    # the second turn of "time" heard its history (Hi) too: 1 + 6 words in
    assert calls == [("parrot-1", 0, 0, 2, 4), ("parrot-1", 1, 0, 1, 3), ("parrot-1", 1, 1, 7, 8)]
    assert items["time"]["outcomes"]["gates"]["short-replies"]["reason"] == "longest assistant message: 8 words (max 6)"


DECLARED = st.lists(st.tuples(st.sampled_from(["evalcli", "pkg-a", "pkg-b"]),
                               st.lists(st.sampled_from(["includes", "judge", "mine", "other"]), min_size=1, max_size=3)),
                     max_size=8)


@given(DECLARED)
def test_a_name_is_given_once_and_never_replaced(declared: list[tuple[str, list[str]]]) -> None:
    """Whatever entry points declare, in whatever order: each name belongs to the first that declared it; a later one
    declaring a taken name is refused with both named, and takes none of its names (all or none)."""
    names, first = Names("scorer kind"), {}
    for number, (package, wanted) in enumerate(declared):
        entry = Entry("evalcli.scorers", f"e{number}", f"m{number}:K", package, "1.0")
        clash = next((name for name in wanted if name in first), None)
        if clash is None:
            names.claim(wanted, entry)
            first.update({name: entry for name in wanted})
            continue
        with pytest.raises(PluginError) as refused:
            names.claim(wanted, entry)
        assert f"'{clash}', which is taken by " in refused.value.message and entry.describe() in refused.value.message
        owner = first[clash]
        assert ("evalcli itself (built in)" if owner.builtin else owner.describe()) in refused.value.message
    assert names.owners == first


def test_builtins_come_from_evalcli_own_entry_points(tmp_path: Path) -> None:
    adapters = run_cli(["adapters", "--json"], tmp_path)
    scorers = run_cli(["scorers", "--json"], tmp_path)
    assert adapters.code == 0 and scorers.code == 0, adapters.stderr + scorers.stderr
    own = pyproject_entry_points(REPO / "pyproject.toml")
    assert [a["name"] for a in adapters.json["adapters"]] == sorted(own["evalcli.adapters"])
    assert all(a["package"] == "evalcli" and a["builtin"] for a in adapters.json["adapters"])
    assert {k["entry_point"].split(" = ")[0] for k in scorers.json["kinds"]} == set(own["evalcli.scorers"])
    table = run_cli(["adapters"], tmp_path)
    assert table.code == 0 and "pydantic_ai" in table.stdout and "evalcli 0.1.0" in table.stdout


def test_the_example_plugin_adds_an_adapter_and_a_scorer_kind(tmp_path: Path) -> None:
    demo_plugin(tmp_path)
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(DATASET)
    (tmp_path / "scorers.yaml").write_text(REGISTRY)
    adapters, scorers = run_cli(["adapters", "--json"], tmp_path), run_cli(["scorers", "--json"], tmp_path)
    assert adapters.code == 0 and scorers.code == 0, adapters.stderr + scorers.stderr
    check_listings(adapters.json, scorers.json)
    check_run(run_cli(["run", "d.yaml", "--json", "-", "--db", "x.db"], tmp_path), tmp_path / "x.db")


# Runs the CLI like the console script does, then reports whether the plugin's framework and adapter were imported.
PROBE = """
import atexit, json, sys
WATCHED = ["demo_parrot", "evalcli_demo_plugin.adapter", "pydantic_ai", "agents", "langgraph"]
atexit.register(lambda: print("MODULES " + json.dumps({m: m in sys.modules for m in WATCHED}), file=sys.stderr))
sys.argv = ["evalcli", *sys.argv[1:]]
from evalcli.cli import main
main()
"""


def imported(args: list[str], cwd: Path) -> tuple[int, dict[str, bool], str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    line = next((line for line in done.stderr.splitlines() if line.startswith("MODULES ")), "MODULES {}")
    return done.returncode, json.loads(line.removeprefix("MODULES ")), done.stderr


def test_listing_and_validating_import_no_framework_and_no_adapter(tmp_path: Path) -> None:
    demo_plugin(tmp_path)
    (tmp_path / "agent.py").write_text(PLAIN_AGENT)
    (tmp_path / "d.yaml").write_text(PLAIN)
    for args in (["adapters"], ["scorers"], ["validate", "d.yaml"]):
        code, modules, stderr = imported(args, tmp_path)
        assert code == 0, stderr
        assert not any(modules.values()), (args, modules)


def broken(tmp_path: Path, entry_points: dict[str, dict[str, str]], modules: dict[str, str],
           name: str = "evalcli-broken") -> None:
    """The package ``name`` installed for the runs in ``tmp_path``, beside a dataset of a plain agent."""
    installed(tmp_path, name, entry_points, modules)
    (tmp_path / "agent.py").write_text(PLAIN_AGENT)
    (tmp_path / "d.yaml").write_text(PLAIN)


def assert_refused(done: CliResult, *fragments: str) -> None:
    assert done.code == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in done.stderr, (fragment, done.stderr)


DECLARATION = """
from evalcli.targets import AdapterDeclaration
DECLARATION = AdapterDeclaration(name={name!r}, adapter={adapter!r}, summary="a thing", recognises=("evalcli_things.Thing",),
                                 install="pip install evalcli-things")
"""


@pytest.mark.parametrize(("points", "modules", "expected"), [
    ({"evalcli.adapters": {"things": "evalcli_things:DECLARATION"}}, {"evalcli_things.py": "import not_a_module\n"},
     "the entry point 'things = evalcli_things:DECLARATION' (group evalcli.adapters) of the package evalcli-broken "
     "1.0 cannot be loaded: ModuleNotFoundError: No module named 'not_a_module'"),
    ({"evalcli.adapters": {"things": "evalcli_things:DECLARATION"}}, {"evalcli_things.py": "DECLARATION = {}\n"},
     "names a dict, not an evalcli.targets.AdapterDeclaration"),
    ({"evalcli.adapters": {"things": "evalcli_things:DECLARATION"}},
     {"evalcli_things.py": DECLARATION.format(name="other", adapter="evalcli_things:X")},
     "names the adapter 'other': an adapter's entry point has its name"),
    ({"evalcli.scorers": {"counts": "evalcli_counts:KINDS"}}, {"evalcli_counts.py": "KINDS = [42]\n"},
     "the entry point 'counts = evalcli_counts:KINDS' (group evalcli.scorers) of the package evalcli-broken 1.0 "
     "names a int, not an evalcli.scorers.Kind or a list of them"),
    ({"evalcli.scorers": {"counts": "evalcli_counts:KINDS"}}, {"evalcli_counts.py": "raise RuntimeError('boom')\n"},
     "cannot be loaded: RuntimeError: boom"),
])
def test_a_broken_entry_point_is_an_error_naming_its_package(tmp_path: Path, points: dict[str, dict[str, str]],
                                                             modules: dict[str, str], expected: str) -> None:
    broken(tmp_path, points, modules)
    hint = "fix or upgrade the package evalcli-broken, or uninstall it (pip uninstall evalcli-broken)"
    listing = "adapters" if "evalcli.adapters" in points else "scorers"
    assert_refused(run_cli([listing], tmp_path), expected, hint)
    assert_refused(run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path), expected)
    assert not (tmp_path / "x.db").exists()  # nothing ran


SHADOW_KIND = """
from pydantic import BaseModel
from evalcli.scorers import Kind
class Args(BaseModel):
    value: str
KIND = Kind(name={name!r}, args=Args, main="value", summary="mine", build=lambda args, context: None)
"""


@pytest.mark.parametrize(("points", "modules", "taken"), [
    ({"evalcli.adapters": {"callable": "evalcli_things:DECLARATION"}},
     {"evalcli_things.py": DECLARATION.format(name="callable", adapter="evalcli_things:X")}, "the adapter 'callable'"),
    ({"evalcli.scorers": {"includes": "evalcli_counts:KIND"}}, {"evalcli_counts.py": SHADOW_KIND.format(name="includes")},
     "the scorer kind 'includes'"),
    ({"evalcli.scorers": {"judge": "evalcli_counts:KIND"}}, {"evalcli_counts.py": SHADOW_KIND.format(name="judge")},
     "the scorer kind 'judge'"),
])
def test_a_package_cannot_replace_a_builtin(tmp_path: Path, points: dict[str, dict[str, str]], modules: dict[str, str],
                                            taken: str) -> None:
    broken(tmp_path, points, modules)
    expected = (f"of the package evalcli-broken 1.0 declares {taken}, which is taken by evalcli itself (built in)",
                "a package cannot replace one of evalcli's own")
    assert_refused(run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path), *expected)
    assert not (tmp_path / "x.db").exists()
    assert_refused(run_cli(["adapters" if "evalcli.adapters" in points else "scorers"], tmp_path), *expected)


def test_two_packages_declaring_one_kind_are_refused(tmp_path: Path) -> None:
    broken(tmp_path, {"evalcli.scorers": {"mine": "evalcli_counts:KIND"}},
           {"evalcli_counts.py": SHADOW_KIND.format(name="max_words")}, name="evalcli-counts")
    demo_plugin(tmp_path)
    assert_refused(run_cli(["scorers"], tmp_path),
                   "the entry point 'max_words = evalcli_demo_plugin.scorers:MAX_WORDS' (group evalcli.scorers) of the "
                   "package evalcli-demo-plugin 0.1.0 declares the scorer kind 'max_words', which is taken by the entry "
                   "point 'mine = evalcli_counts:KIND' (group evalcli.scorers) of the package evalcli-counts 1.0",
                   "rename one of them")


ADAPTER_USED = "target: agent:thing\ngates: [{includes: x}]\ndata: [{input: hi}]\n"


@pytest.mark.parametrize(("adapter_module", "expected", "hint"), [
    ("raise RuntimeError('adapter boom')\n",
     "d.yaml:1:9: the entry point 'things = evalcli_things:DECLARATION' (group evalcli.adapters) of the package "
     "evalcli-broken 1.0 declares the adapter class evalcli_things_adapter:ThingAdapter, which cannot be imported: "
     "RuntimeError: adapter boom", "uninstall it (pip uninstall evalcli-broken)"),
    ("import thing_framework\n",
     "d.yaml:1:9: the things adapter (from evalcli-broken 1.0) needs a package that is not installed (thing_framework)",
     "hint: pip install evalcli-things"),
    ("class ThingAdapter:\n    pass\n",
     "declares the adapter class evalcli_things_adapter:ThingAdapter, which is not a subclass of evalcli.targets.Adapter",
     "uninstall it"),
])
def test_an_adapter_that_cannot_be_imported_is_a_validation_error_at_the_target(
        tmp_path: Path, adapter_module: str, expected: str, hint: str) -> None:
    broken(tmp_path, {"evalcli.adapters": {"things": "evalcli_things:DECLARATION"}}, {
        "evalcli_things.py": DECLARATION.format(name="things", adapter="evalcli_things_adapter:ThingAdapter") +
        "class Thing:\n    pass\n",
        "evalcli_things_adapter.py": adapter_module})
    (tmp_path / "agent.py").write_text("from evalcli_things import Thing\nthing = Thing()\n")
    (tmp_path / "d.yaml").write_text(ADAPTER_USED)
    assert_refused(run_cli(["validate", "d.yaml"], tmp_path), expected, hint)
    listing = run_cli(["adapters"], tmp_path)  # listing reads declarations only: the adapter is not imported
    assert listing.code == 0 and "evalcli-broken 1.0" in listing.stdout, listing.stderr


def test_the_docs_show_the_example_plugin_as_it_is(tmp_path: Path) -> None:
    """docs/extending.md's complete example is the plugin these tests install, file for file."""
    blocks = [block.text for block in read_page(REPO / "docs" / "extending.md").blocks]
    for path in sorted(DEMO_PLUGIN.rglob("*.py")):
        if path.name != "build_backend.py":
            assert path.read_text() in blocks, f"docs/extending.md does not show {path.relative_to(DEMO_PLUGIN)} as it is"
    project = (DEMO_PLUGIN / "pyproject.toml").read_text()
    tables = project[project.index("[project]"):]
    assert any(block.endswith(tables) for block in blocks), "docs/extending.md does not show the plugin's pyproject.toml"


def test_the_schema_has_the_kinds_of_installed_packages(tmp_path: Path) -> None:
    """``evalcli schema`` accepts the example plugin's kind once it is installed, and so the docs' datasets that use
    it validate against it (without the plugin, the same dataset is refused)."""
    import jsonschema

    documented = [block.dataset for block in read_page(REPO / "docs" / "extending.md").blocks
                  if block.dataset is not None and "demo_plugin" in block.needs]
    assert documented
    without = run_cli(["schema"], tmp_path)
    demo_plugin(tmp_path)
    with_plugin = run_cli(["schema"], tmp_path)
    assert without.code == 0 and with_plugin.code == 0, without.stderr + with_plugin.stderr
    for dataset in documented:
        assert list(jsonschema.Draft202012Validator(with_plugin.json).iter_errors(dataset)) == []
        assert list(jsonschema.Draft202012Validator(without.json).iter_errors(dataset)) != []


@pytest.mark.slow
def test_pip_installs_the_example_plugin_into_a_fresh_environment(tmp_path: Path) -> None:
    """The plugin as users install one: ``pip install -e`` into a virtual environment, then that environment's
    ``evalcli`` (this tree on its ``PYTHONPATH``) lists and runs it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True,
                   timeout=SUBPROCESS_TIMEOUT)
    python = str(venv / "bin" / "python")
    pip = subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                          "--disable-pip-version-check", "-e", str(DEMO_PLUGIN)], capture_output=True, text=True,
                         timeout=SUBPROCESS_TIMEOUT)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    work = tmp_path / "work"
    work.mkdir()
    (work / "agent.py").write_text(AGENT)
    (work / "d.yaml").write_text(DATASET)
    (work / "scorers.yaml").write_text(REGISTRY)
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "200"}

    def cli(*args: str) -> CliResult:
        done = subprocess.run([python, "-m", "evalcli", *args], cwd=work, env=env, capture_output=True, text=True,
                              timeout=SUBPROCESS_TIMEOUT)
        return CliResult(done.returncode, done.stdout, done.stderr, work)

    adapters, scorers = cli("adapters", "--json"), cli("scorers", "--json")
    assert adapters.code == 0 and scorers.code == 0, adapters.stderr + scorers.stderr
    check_listings(adapters.json, scorers.json)
    check_run(cli("run", "d.yaml", "--json", "-", "--db", "x.db"), work / "x.db")
    outside = run_cli(["adapters", "--json"], work)  # the machine's own Python does not have it
    assert "parrot" not in {a["name"] for a in outside.json["adapters"]}


@pytest.mark.parametrize("declared", [True, False])
def test_an_installed_evalcli_reads_its_own_entry_points_from_its_metadata(tmp_path: Path, declared: bool) -> None:
    """Installed (no source tree around it), evalcli's built-ins come from its metadata, as a package's do; metadata
    without them (an install older than its code) is an error saying to reinstall, not an evalcli without adapters."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "evalcli", site / "evalcli", ignore=shutil.ignore_patterns("__pycache__"))
    own = pyproject_entry_points(REPO / "pyproject.toml")
    installed(site, "evalcli", {group: own[group] for group in ("evalcli.adapters", "evalcli.scorers") if declared},
              {}, version="0.1.0")
    done = run_cli(["adapters", "--json"], tmp_path, {"PYTHONPATH": str(site)})
    if declared:
        assert done.code == 0, done.stderr
        assert {a["name"]: a["entry_point"] for a in done.json["adapters"]} == {
            name: f"{name} = {value}" for name, value in own["evalcli.adapters"].items()}
    else:
        assert_refused(done, "evalcli's own entry points are missing from its installed metadata",
                       "reinstall evalcli")


def test_a_checkouts_pyproject_is_kept_by_its_digest_and_read_again_once_edited(tmp_path: Path) -> None:
    """Run from a source tree, what its ``pyproject.toml`` declares is kept beside the compiled modules, by the digest
    of the file's bytes: the next start does not parse it (no ``tomllib``), and an edit is always read again
    (docs/performance.md "Start-up and finish")."""
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "evalcli", checkout / "evalcli", ignore=shutil.ignore_patterns("__pycache__"))
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    version = tomllib.loads(text)["project"]["version"]
    (checkout / "pyproject.toml").write_text(text, encoding="utf-8")
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": str(checkout)}
    probe = ("import json, sys; from evalcli import plugins; entries = plugins.entries(plugins.ADAPTERS); "
             "print(json.dumps([sorted({e.version for e in entries if e.builtin}), 'tomllib' in sys.modules]))")

    def started() -> tuple[list[str], bool]:
        done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=SUBPROCESS_TIMEOUT)
        assert done.returncode == 0, done.stderr[-2000:]
        versions, parsed = json.loads(done.stdout)
        return versions, parsed

    def kept() -> list[str]:
        return sorted(p.name for p in (checkout / "evalcli" / "__pycache__").glob("pyproject-entry-points-*.json"))

    assert started() == ([version], True)
    first = kept()
    assert len(first) == 1
    assert started() == ([version], False)  # read from what was kept
    (checkout / "pyproject.toml").write_text(text.replace(f'version = "{version}"', 'version = "9.9.9"', 1),
                                             encoding="utf-8")
    assert started() == (["9.9.9"], True)
    assert len(kept()) == 1 and kept() != first  # the older file is dropped
    assert started() == (["9.9.9"], False)
    (checkout / "pyproject.toml").write_text(text, encoding="utf-8")  # back as it was: read again, not remembered
    assert started() == ([version], True)
