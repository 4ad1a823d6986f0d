"""evalcli's figures against the REAL ``runEvals`` of ``@mastra/core`` (docs/scorers.md, docs/verdicts.md), on the same
data: ``tests/mastra/runevals_parity.mjs`` runs Mastra's runEvals on Node (a real Agent over MockLanguageModelV3, code
scorers made with ``createScorer``) and the same datasets go through ``evalcli run --json`` (a Python target giving
the same replies, custom Python scorers giving the same scores). Scores, not-scorable counts, gate, threshold and
per-turn results and the verdict must be equal, key order included, except where docs/scorers.md says evalcli
deviates on purpose (a scorer that raises or returns NaN, a target that raises: Mastra rejects the whole run). Each
test failed before its fix.

Without Node the tests skip, unless ``EVALCLI_REQUIRE_NODE`` is set (then they fail), as tests/test_target_mastra.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.mastra_server import REQUIRE, Unavailable, node_missing
from tests.npm_pins import ensure_installed
from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env, run_cli

HERE = Path(__file__).resolve().parent / "mastra"
SCRIPT = "runevals_parity.mjs"

AGENT = '''import pathlib
import sys


def agent(input, **kw):
    """Answers "R:" + the question, as the Mastra agent of runevals_parity.mjs; exits the run on "stop-here" while the
    file "stop" exists (an interrupted run, docs/reliability.md)."""
    if input == "stop-here" and (pathlib.Path(__file__).parent / "stop").exists():
        sys.exit(5)
    return "R:" + input
'''

SCORERS = '''import json

from evalcli import not_scorable

TABLES = json.loads(%r)


def _look(n, run):
    """The value scorer n of the spec gives this run (the same lookup as runevals_parity.mjs's scorers)."""
    table = TABLES[n]
    if table.get("by") == "input":
        key = run.input
    elif table.get("by") == "groundTruth":
        key = json.dumps(run.ground_truth, separators=(",", ":"))
    else:
        key = "|".join(m["content"] for m in run.output if m.get("role") == "assistant" and m.get("content"))
    value = table.get("values", {}).get(key, table.get("default"))
    if value is None:
        raise RuntimeError(f"scorer {table['id']} has no value for {key!r}")
    if value == "ns":
        return not_scorable(f"not scorable on {key}")
    return value
'''


@pytest.fixture(scope="module")
def mastra() -> Path:
    """The folder of the pinned npm packages, with the parity script beside them."""
    why = node_missing()
    if why:
        if os.environ.get(REQUIRE):
            pytest.fail(f"{REQUIRE} is set but runEvals cannot run: {why}")
        pytest.skip(f"Mastra's runEvals needs Node: {why}")
    try:
        return ensure_installed(HERE, "mastra", "@mastra/core", ("package.json", "package-lock.json", SCRIPT))
    except Unavailable as exc:
        if os.environ.get(REQUIRE):
            pytest.fail(f"{REQUIRE} is set but runEvals cannot run: {exc}")
        pytest.skip(str(exc))


def runevals(folder: Path, specs: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    """Mastra's RunEvalsResult of each spec, in the shape of evalcli's JSON (or ``{"rejected": message}``)."""
    path = tmp_path / "specs.json"
    path.write_text(json.dumps(specs))
    env = {**os.environ, "MASTRA_TELEMETRY_DISABLED": "1", "NODE_NO_WARNINGS": "1"}
    done = subprocess.run(["node", str(folder / SCRIPT), str(path)], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    return [r if "rejected" in r else as_evalcli(r) for r in json.loads(done.stdout)]


def as_evalcli(r: dict[str, Any]) -> dict[str, Any]:
    """A RunEvalsResult in the keys of docs/reference/json.md (absent lists ``[]``, absent maps ``{}``, no verdict
    ``None``)."""
    def thresholds(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        return [{"id": t["id"], "passed": t["passed"], "average_score": t["averageScore"], "threshold": t["threshold"]}
                for t in rows or []]

    return {"verdict": r.get("verdict"), "scores": r["scores"],
            "summary": {"total_items": r["summary"]["totalItems"], "not_scorable": r["summary"].get("notScorable", {})},
            "gate_results": r.get("gateResults", []), "threshold_results": thresholds(r.get("thresholdResults")),
            "turn_results": [{"index": t["index"], "gate_results": t.get("gateResults", []),
                              "threshold_results": thresholds(t.get("thresholdResults")), "scores": t.get("scores", {})}
                             for t in r.get("turnResults", [])]}


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """What runEvals computes, out of evalcli's JSON result."""
    return {"verdict": result["verdict"], "scores": result["scores"],
            "summary": {"total_items": result["summary"]["total_items"],
                        "not_scorable": result["summary"]["not_scorable"]},
            "gate_results": result["gate_results"], "threshold_results": result["threshold_results"],
            "turn_results": result["turn_results"]}


def write_dataset(folder: Path, name: str, spec: dict[str, Any], **top: Any) -> Path:
    """The spec as an evalcli dataset ``NAME.yaml``, its scorers in the module ``parity_NAME``."""
    tables: list[dict[str, Any]] = []

    def ref(s: dict[str, Any]) -> dict[str, Any]:
        tables.append(s)
        return {"scorer": {"python": f"parity_{name}:s{len(tables) - 1}"}, "id": s["id"]}

    def entry(e: dict[str, Any]) -> dict[str, Any]:
        return {**ref(e["scorer"]), "threshold": e["threshold"]} if "scorer" in e else ref(e)

    def item(raw: dict[str, Any]) -> dict[str, Any]:
        if "turns" not in raw:
            return dict(raw)
        turns = [{"input": t["input"], **({"gates": [ref(g) for g in t["gates"]]} if "gates" in t else {}),
                  **({"scorers": [entry(e) for e in t["scorers"]]} if "scorers" in t else {})} for t in raw["turns"]]
        return {**{k: v for k, v in raw.items() if k != "turns"}, "turns": turns}

    dataset: dict[str, Any] = {"target": "parity_agent:agent", "concurrency": spec.get("concurrency", 1), **top}
    if "gates" in spec:
        dataset["gates"] = [ref(g) for g in spec["gates"]]
    if "scorers" in spec:
        dataset["scorers"] = [entry(e) for e in spec["scorers"]]
    dataset["data"] = [item(i) for i in spec["data"]]
    (folder / "parity_agent.py").write_text(AGENT)
    (folder / f"parity_{name}.py").write_text(SCORERS % json.dumps(tables) + "".join(
        f"\n\ndef s{n}(run):\n    return _look({n}, run)\n" for n in range(len(tables))))
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(dataset, sort_keys=False))
    return path


def numbers(value: Any) -> Any:
    """Every number a float (JSON's 1 is Python's 1.0): what is compared is values and key order, not int or float."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [numbers(v) for v in value]
    return {k: numbers(v) for k, v in value.items()}


def assert_exact(ours: dict[str, Any], theirs: dict[str, Any], what: str) -> None:
    """Equal values and equal key order (``json.dumps`` keeps the order)."""
    a, b = numbers(ours), numbers(theirs)
    assert json.dumps(a) == json.dumps(b), f"{what}:\n  evalcli: {json.dumps(a)}\n  runEvals: {json.dumps(b)}"


def run_json(folder: Path, *args: str) -> dict[str, Any]:
    done = run_cli(["run", *args, "--json", "out.json", "-q"], folder)
    assert (folder / "out.json").exists(), done.stderr
    return json.loads((folder / "out.json").read_text())


def show_json(folder: Path, db: str) -> dict[str, Any]:
    done = run_cli(["show", "latest", "--db", db, "--json", "shown.json"], folder)
    assert done.returncode == 0, done.stderr
    return json.loads((folder / "shown.json").read_text())


def t(value: Any, **more: Any) -> dict[str, Any]:
    """A scorer giving ``value`` on every run (``more``: its id, its ``values`` by key)."""
    return {"default": value, **more}


SCENARIOS: dict[str, dict[str, Any]] = {
    # thresholds at their bounds, both forms, numbers and {min, max} echoed as written
    "bounds": {"scorers": [
        {"scorer": t(0.5, id="eq"), "threshold": 0.5},
        {"scorer": t(0.5, id="range"), "threshold": {"max": 0.5, "min": 0.5}},
        {"scorer": t(0.5, id="below-max"), "threshold": {"max": 0.4}},
        {"scorer": t(0, id="zero"), "threshold": {"min": 0}},
        {"scorer": t(1, id="one"), "threshold": 1}], "data": [{"input": "a"}, {"input": "b"}]},
    # scores outside [0, 1]: a gate averaging exactly 1 from 2 and 0 (or -1 and 3) passes; thresholds compare means
    "beyond": {"gates": [{"id": "two-zero", "values": {"R:a": 2, "R:b": 0}}, {"id": "neg", "values": {"R:a": -1, "R:b": 3}}],
               "scorers": [{"scorer": t(1.5, id="big"), "threshold": {"max": 1}},
                           {"scorer": t(-0.5, id="negative"), "threshold": {"min": 0}}],
               "data": [{"input": "a"}, {"input": "b"}]},
    # not scorable everywhere: no gate or threshold result, no verdict, counted; a scorer scorable only later
    "not-scorable": {"gates": [t("ns", id="ns-gate")],
                     "scorers": [{"scorer": t("ns", id="ns"), "threshold": 0.5}, t(0.25, id="late", values={"R:a": "ns"}),
                                 t(0.5, id="first")],
                     "data": [{"input": "a"}, {"input": "b"}]},
    # a gate that raises scores 0, at the top level and per turn
    "gate-raises": {"gates": [{"id": "boom", "values": {"R:b": 1}, "default": "throw"}],
                    "data": [{"input": "a"}, {"input": "b"}, {"turns": [{"input": "x", "gates": [t("throw", id="turn-boom")]}]}]},
    # all three forms; turns of different lengths; per-turn thresholds first seen win; not scorable per turn
    "forms": {"scorers": [t(0.05, id="top", values={"R:a": 0.1, "R:p|R:q|R:r": 0.2, "R:u|R:v": 0.3, "R:m|R:n": 0.6})],
              "gates": [t(1, id="top-gate")],
              "data": [
                  {"input": "a"},
                  {"turns": [{"input": "p", "gates": [t("ns", id="X")]},
                             {"input": "q", "scorers": [{"scorer": t(0.4, id="S"), "threshold": 0.5}]},
                             {"input": "r", "gates": [t(1, id="late")]}]},
                  {"turns": [{"input": "u", "gates": [t(1, id="Y"), t(0, id="X")]},
                             {"input": "v", "scorers": [{"scorer": t(0.8, id="S"), "threshold": {"max": 0.1}}, t("ns", id="T")]}]},
                  {"inputs": ["m", "n"]},
                  {"turns": [{"input": "w"}, {"input": "z", "scorers": [t(0.9, id="S"), t(0.25, id="T")]}]}]},
    # not-scorable counts: top-level gates, per-turn ones, then top-level scorers; a gate and a scorer sharing an id
    "counts": {"gates": [t(1, id="G1", values={"R:a": "ns"}), t(1, id="Z", values={"R:c": "ns"})],
               "scorers": [t(0.5, id="A", values={"R:a": "ns"}), t("ns", id="B"),
                           {"scorer": t(0.5, id="Z", values={"R:a": "ns"}), "threshold": 0.5}],
               "data": [{"input": "a"},
                        {"turns": [{"input": "b", "gates": [t("ns", id="Z")], "scorers": [t(0.7, id="Z"), t("ns", id="T")]}]},
                        {"input": "c"}]},
    # float means summed in dataset order
    "floats": {"gates": [t(1, id="g")],
               "scorers": [{"scorer": {"id": "f", "values": {"R:a": 0.1, "R:b": 0.2, "R:c": 0.3, "R:d": 0.7, "R:e": 0.11,
                                                                 "R:f": 0.13}}, "threshold": 0.25}],
               "data": [{"input": c} for c in "abcdef"]},
    # what scorers see: the first input of a conversation, each turn's own input, the ground truth everywhere
    "seen": {"gates": [t(0, id="first-input", by="input", values={"m": 1, "p": 1})],
             "scorers": [{"scorer": t(0.125, id="truth", by="groundTruth", values={'"m"': 0.5, '{"k":1}': 0.25}),
                          "threshold": 0.3}],
             "data": [{"inputs": ["m", "n"], "ground_truth": "m"},
                      {"turns": [{"input": "p", "scorers": [t(0, id="turn-input", by="input", values={"p": 0.1, "q": 0.9})]},
                                 {"input": "q", "scorers": [t(0, id="turn-input", by="input", values={"p": 0.1, "q": 0.9})],
                                  "gates": [t(0, id="turn-truth", by="groundTruth", values={'{"k":1}': 1})]}],
                       "ground_truth": {"k": 1}}]},
    # nine conversations of one to four turns, one failing per-turn gate
    "many-turns": {"data": [{"turns": [{"input": f"i{i}t{n}", "gates": [t(1, id="g", values={"R:i1t1": 0})],
                                        "scorers": [{"scorer": {"id": "s", "values": {f"R:i{i}t{n}": ((i * 7 + n * 3) % 10) / 10}},
                                                     "threshold": 0.3}]}
                                       for n in range(i % 4 + 1)]} for i in range(9)]},
}


def test_run_json_is_runevals_exactly_key_order_included(mastra: Path, tmp_path: Path) -> None:
    """Every scenario, played at concurrency 1 and 4: the same figures as Mastra's runEvals, in the same order. Before,
    ``scores`` listed the scorers as declared, where runEvals lists them as they first scored (a scorer not scorable
    on the first conversation comes after one that was), and a ``{max, min}`` threshold was echoed reordered
    ``{min, max}`` (runEvals echoes it as written)."""
    theirs = runevals(mastra, list(SCENARIOS.values()), tmp_path)
    paths = [write_dataset(tmp_path, name.replace("-", "_"), spec) for name, spec in SCENARIOS.items()]
    for concurrency in ("1", "4"):
        done = run_cli(["run", *(p.name for p in paths), "--json", "-", "-q", "--db", f"c{concurrency}.db",
                        "--concurrency", concurrency], tmp_path)
        runs = json.loads(done.stdout)["runs"]
        assert len(runs) == len(SCENARIOS), done.stderr
        for name, ours, expected in zip(SCENARIOS, runs, theirs, strict=True):
            assert_exact(figures(ours), expected, f"{name} at concurrency {concurrency}")


def test_merged_shards_decide_gates_by_their_mean_as_runevals_and_one_run_do(mastra: Path, tmp_path: Path) -> None:
    """``merge`` recomputes a run "as if unsharded" (docs/history.md): a gate scoring 2 on one conversation and 0 on
    another averages 1 and passes, top level and per turn, in runEvals and in one evalcli run. Before, the merged run
    read each conversation's stored ``passed`` as a ``--repeat`` verdict: the gate failed with a score of 1.0 and the
    verdict was ``failed``."""
    spec = {"gates": [{"id": "two-zero", "values": {"R:a": 2, "R:b": 0}, "default": 1},
                      {"id": "neg", "values": {"R:a": -1, "R:b": 3}, "default": 1}],
            "data": [{"input": "a"}, {"input": "b"},
                     {"turns": [{"input": "p", "gates": [t(0, id="turn", values={"R:p": 2})]}]},
                     {"turns": [{"input": "q", "gates": [t(0, id="turn", values={"R:p": 2})]}]}]}
    [expected] = runevals(mastra, [spec], tmp_path)
    assert expected["verdict"] == "passed"
    path = write_dataset(tmp_path, "gates", spec)
    assert_exact(figures(run_json(tmp_path, path.name, "--db", "one.db")), expected, "one run")
    for shard in ("1/2", "2/2"):
        run_cli(["run", path.name, "--shard", shard, "--db", f"shard{shard[0]}.db", "-q"], tmp_path)
    merged = run_cli(["merge", "shard1.db", "shard2.db", "--out", "merged.db"], tmp_path)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert_exact(figures(show_json(tmp_path, "merged.db")), expected, "merged shards")


def test_a_resumed_run_decides_gates_by_their_mean_as_runevals_does(mastra: Path, tmp_path: Path) -> None:
    """A run interrupted after two conversations and resumed (docs/reliability.md) gives the uninterrupted result:
    before, the two conversations read back from the database carried their stored ``passed``, taken for a
    ``--repeat`` verdict, and a gate averaging 1.0 (2 and 0, then 1) failed the resumed run (exit 1)."""
    spec = {"gates": [{"id": "two-zero", "values": {"R:a": 2, "R:b": 0}, "default": 1}],
            "data": [{"input": "a"}, {"input": "b"}, {"input": "stop-here"}]}
    [expected] = runevals(mastra, [spec], tmp_path)
    assert expected["verdict"] == "passed"
    path = write_dataset(tmp_path, "resumed", spec)
    (tmp_path / "stop").write_text("")
    first = run_cli(["run", path.name, "--db", "r.db", "-q"], tmp_path)
    assert first.returncode == 70, first.stderr
    (tmp_path / "stop").unlink()
    run_id = first.stderr.split("--resume ")[1].split()[0]
    done = run_cli(["run", path.name, "--db", "r.db", "--resume", run_id, "--json", "out.json", "-q"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_exact(figures(json.loads((tmp_path / "out.json").read_text())), expected, "resumed run")


def test_a_threshold_bound_written_as_a_variable_is_its_number(mastra: Path, tmp_path: Path) -> None:
    """docs/datasets.md: a threshold's bound may be wholly one ``${VAR}``. Before, ``{min: '${T_MIN}'}`` passed
    validation but the result kept the variable's text, and the run ended in an internal error (comparing a float
    with text); the bounds are now the numbers, echoed as written, in the order written, as runEvals echoes them."""
    spec = {"scorers": [{"scorer": t(0.5, id="low"), "threshold": {"min": "${T_MIN}"}},
                        {"scorer": t(0.5, id="band"), "threshold": {"max": "${T_MAX}", "min": 0.1}}],
            "data": [{"input": "a"}, {"turns": [{"input": "b", "scorers": [
                {"scorer": t(0.5, id="turn"), "threshold": {"max": "${T_MAX}", "min": "${T_MIN}"}}]}]}]}
    resolved = json.loads(json.dumps(spec).replace('"${T_MIN}"', "0.25").replace('"${T_MAX}"', "0.4"))
    [expected] = runevals(mastra, [resolved], tmp_path)
    assert expected["verdict"] == "scored"
    path = write_dataset(tmp_path, "variables", spec)
    done = run_cli(["run", path.name, "--json", "out.json", "-q"], tmp_path, env=cli_env(T_MIN="0.25", T_MAX="0.4"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert_exact(figures(json.loads((tmp_path / "out.json").read_text())), expected, "thresholds from variables")


@pytest.mark.parametrize(("threshold", "message"), [
    ({"min": 0.2, "max": None}, 'Maximum threshold for scorer "q" must be a finite number between 0 and 1, got null'),
    ({"min": None}, 'Minimum threshold for scorer "q" must be a finite number between 0 and 1, got null'),
])
def test_a_null_threshold_bound_is_refused_as_runevals_refuses_it(mastra: Path, tmp_path: Path, threshold: Any,
                                                                  message: str) -> None:
    """``max:`` written with no value is no bound left out: runEvals refuses the run with this message. Before, evalcli
    dropped the bound and ran (``{min: 0.2, max: null}`` checked the minimum only, and echoed ``{min: 0.2}``)."""
    spec = {"scorers": [{"scorer": t(0.5, id="q"), "threshold": threshold}], "data": [{"input": "a"}]}
    [expected] = runevals(mastra, [spec], tmp_path)
    assert expected == {"rejected": message}
    path = write_dataset(tmp_path, "nulls", spec)
    done = run_cli(["run", path.name, "-q"], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "leave '" in done.stderr and "Traceback" not in done.stderr

