"""Adversarial tests of round 51's start-up and per-turn cuts (issue 48): ``@record`` classes, the content digest
made when first asked (``dataset/contents.py``), the pyproject entry points kept in ``__pycache__`` (``plugins.py``)
and module paths built from resolved folders (``dataset/imports.py``).

The first tests show defects (they fail on the build they were written against); the rest are cases that hold and
are kept so that they keep holding. Everything is real: YAML files, CLI subprocesses, SQLite files, interpreters."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from evalcli.dataset import load_dataset
from evalcli.records import record

from .conftest import REPO, run_cli
from .reliability_helpers import SUBPROCESS_TIMEOUT

AGENT = """\
import os
os.environ["ADV51_API_KEY"] = "adv51-imported-0123456789abcdef"


def agent(input, tone="plain", **kw):
    return f"{tone} echo: {input}"
"""

DATASET = """\
target: adv51_agent:agent
gates: [{includes: echo}]
data:
  - id: named
    input: "named ${ADV51_TEXT:-with a default} ☃"
    metadata: {k: [1, 2.5, null]}
  - input: anonymous
  - id: per-turn
    turns:
      - input: first
        gates: [{includes: echo}]
      - input: second
  - id: options
    input: kind
    target_options: {tone: kind}
"""


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "adv51_agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(DATASET, encoding="utf-8")
    return tmp_path


# --- defects -------------------------------------------------------------------------------------------------------


def test_a_loaded_item_that_names_itself_has_its_content_digest_as_text(tmp_path: Path) -> None:
    """DEFECT (dataset/contents.py, ``Later``): ``load_dataset`` (public API, docs/python-api.md) gives items that
    name themselves a ``Later`` object as ``Item.content`` (typed ``str``), where the old build (997d614) gave the
    digest's text: ``json.dumps(item.content)`` raises TypeError, ``item.content[:8]`` raises, ``isinstance(...,
    str)`` is False, ``f"{item.content:>30}"`` raises, ``dataclasses.asdict(item)["content"]`` is a ``Later``."""
    dataset = load_dataset(str(_folder(tmp_path) / "d.yaml"))
    for item in dataset.items:
        assert type(item.content) is str, (item.id, type(item.content).__name__)
        assert json.loads(json.dumps(item.content)) == item.content
        assert len(item.content[:8]) == 8
        assert type(dataclasses.asdict(item)["content"]) is str


def test_a_loaded_item_pickles_and_copies_as_before(tmp_path: Path) -> None:
    """DEFECT (dataset/contents.py, ``Later``): an item that names itself no longer pickles (``Can't pickle local
    object 'secret_check.<locals>.<lambda>'``: its ``Later`` holds the load's ``Digests``, whose ``bears`` is a
    lambda), where the old build's item (and so a ``Dataset``'s items, for multiprocessing by a library caller)
    pickled; a deep copy carries the item, the secrets' references and the redactor along with it."""
    dataset = load_dataset(str(_folder(tmp_path) / "d.yaml"))
    for item in dataset.items:
        again = pickle.loads(pickle.dumps(item))
        assert again == item
        assert type(again.content) is str
        assert type(copy.deepcopy(item).content) is str


# --- cases that hold -----------------------------------------------------------------------------------------------


def _pairs(options: dict[str, Any], namespace: dict[str, Any]) -> tuple[type, type]:
    made = []
    for decorate in (dataclasses.dataclass(**options), record(**options)):
        made.append(decorate(type("C", (), dict(namespace, __module__=__name__, __qualname__="C"))))
    return made[0], made[1]


def _probe(cls: type, args: tuple[Any, ...]) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def check(name: str, fn: Any) -> None:
        try:
            seen[name] = fn()
        except Exception as exc:  # noqa: BLE001 - the exception is what is compared
            seen[name] = f"{type(exc).__name__}: {exc}"

    a, b = cls(*args), cls(*args)
    nan = float("nan")
    check("repr", lambda: repr(a))
    check("eq", lambda: (a == b, a != b, a == 1, a == a))
    check("hash", lambda: cls.__hash__ is None or hash(a) == hash(b))
    check("set", lambda: setattr(a, "x", 9))
    check("set_new", lambda: setattr(a, "other", 9))
    check("del", lambda: delattr(a, "x"))
    check("pickle", lambda: repr(pickle.loads(pickle.dumps(b))))
    check("copies", lambda: (repr(copy.copy(b)), repr(copy.deepcopy(b)), repr(dataclasses.replace(b))))
    check("nan", lambda: (cls(nan, *args[1:]) == cls(nan, *args[1:]), cls(float("nan"), *args[1:]) == cls(
        float("nan"), *args[1:])))
    check("qualnames", lambda: sorted(getattr(cls.__dict__.get(k), "__qualname__", "") for k in (
        "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__") if cls.__dict__.get(k) is not None))

    class Sub(cls):  # type: ignore[valid-type, misc]
        pass

    check("sub", lambda: (Sub(*args) == cls(*args), repr(Sub(*args))))
    check("sub_set", lambda: setattr(Sub(*args), "other", 1))
    return seen


SHAPES: list[tuple[dict[str, Any], dict[str, Any], tuple[Any, ...]]] = [
    ({}, {"__annotations__": {"x": Any, "y": list}, "x": 1, "y": dataclasses.field(default_factory=list)}, (1, [2])),
    ({"frozen": True}, {"__annotations__": {"x": Any, "y": str}, "x": 1, "y": "a"}, (1, "b")),
    ({"frozen": True}, {"__annotations__": {"x": Any}, "x": 1}, (1,)),
    ({"frozen": True, "slots": True}, {"__annotations__": {"x": Any, "y": str}, "x": 1, "y": "a"}, (1, "b")),
    ({"frozen": True}, {"__annotations__": {"x": Any, "y": str, "z": int}, "x": 1,
                        "y": dataclasses.field(default="a", compare=False), "z": dataclasses.field(default=0, hash=False)},
     (1, "b", 3)),
    ({"frozen": True}, {"__annotations__": {"x": Any}, "x": 1, "__hash__": lambda self: 7}, (1,)),
    ({}, {"__annotations__": {"x": Any}, "x": 1, "__eq__": lambda self, other: True}, (1,)),
    ({"eq": False, "frozen": True}, {"__annotations__": {"x": Any}, "x": 1}, (1,)),
    ({"frozen": True, "kw_only": True}, {"__annotations__": {"x": Any}, "x": 1}, ()),
]


@pytest.mark.parametrize("n", range(len(SHAPES)))
def test_a_record_behaves_as_the_dataclass_of_the_same_fields(n: int) -> None:
    """repr, ==/!= (NaN fields: identity as tuples compare it), hash, frozen assignment and deletion (messages
    included), pickling, copies, ``replace``, qualnames and subclasses: a record is its ``@dataclass``."""
    options, namespace, args = SHAPES[n]
    plain, made = _pairs(options, namespace)
    assert _probe(made, args) == _probe(plain, args)


def _interpreters() -> list[Path]:
    root = Path("/root/.pyenv/versions")
    found = [root / v / "bin" / "python" for v in ("3.12.1", "3.13.0")] if root.is_dir() else []
    return [p for p in found if p.exists()]


RECORDS_ON = """
import dataclasses, importlib.util, pickle, sys
spec = importlib.util.spec_from_file_location("records", sys.argv[1])
records = importlib.util.module_from_spec(spec); spec.loader.exec_module(records)
out = []
for deco in (dataclasses.dataclass(frozen=True), records.record(frozen=True)):
    C = deco(type("C", (), {"__annotations__": {"x": object, "y": str}, "x": 1, "y": "a", "__module__": "__main__",
                            "__qualname__": "C"}))
    a = C(float("nan"), "b")
    row = [repr(a), a == C(a.x, "b"), a == C(float("nan"), "b"), a == a, hash(a) == hash(C(a.x, "b"))]
    try:
        a.x = 2
    except dataclasses.FrozenInstanceError as exc:
        row.append(str(exc))
    row.append(C.__setattr__.__qualname__)
    out.append(row)
print(out[0] == out[1], out)
"""


@pytest.mark.parametrize("python", _interpreters(), ids=lambda p: p.parent.parent.name)
def test_a_record_behaves_as_a_dataclass_on_other_pythons(python: Path) -> None:
    """``records.py`` read by Python 3.12 and 3.13 (3.13 compares fields one by one and builds frozen methods
    otherwise: its ``_frozen_get_del_attr`` is not swapped) makes the classes their ``dataclasses`` make."""
    done = subprocess.run([str(python), "-c", RECORDS_ON, str(REPO / "evalcli" / "records.py")], capture_output=True,
                          text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True"), done.stdout


def test_records_and_stdlib_frozen_dataclasses_made_on_many_threads_at_once() -> None:
    """``record`` swaps ``dataclasses._frozen_get_del_attr`` while it makes a frozen class: stdlib dataclasses made
    meanwhile on other threads (user code) still refuse assignment with dataclasses' message, under their own
    qualname, and the standard function is back afterwards."""
    problems: list[str] = []
    standard = dataclasses._frozen_get_del_attr  # type: ignore[attr-defined]

    def make(k: int) -> None:
        for i in range(150):
            decorate = record(frozen=True) if (i + k) % 2 else dataclasses.dataclass(frozen=True)
            name = f"T{k}_{i}"
            cls = decorate(type(name, (), {"__annotations__": {"a": int}, "a": 0}))
            try:
                cls(1).a = 2
                problems.append(f"{name}: assigned")
            except dataclasses.FrozenInstanceError as exc:
                if str(exc) != "cannot assign to field 'a'":
                    problems.append(str(exc))
            if cls.__setattr__.__qualname__ != f"{name}.__setattr__":
                problems.append(cls.__setattr__.__qualname__)

    threads = [threading.Thread(target=make, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    assert dataclasses._frozen_get_del_attr is standard  # type: ignore[attr-defined]


def _checkout_copy(tmp_path: Path) -> Path:
    copy_root = tmp_path / "checkout"
    shutil.copytree(REPO / "evalcli", copy_root / "evalcli", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", copy_root / "pyproject.toml")
    return copy_root


def _scorer_kinds(checkout: Path) -> tuple[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(checkout), COLUMNS="200")
    done = subprocess.run([sys.executable, "-m", "evalcli", "scorers"], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr
    kept = sorted(p.name for p in (checkout / "evalcli" / "__pycache__").glob("pyproject-entry-points-*"))
    return done.stdout, kept


def test_the_kept_entry_points_follow_every_edit_of_pyproject(tmp_path: Path) -> None:
    """A checkout whose Python writes bytecode keeps what its pyproject.toml declares in ``__pycache__`` by the
    file's digest: removing an entry point, then putting it back, is seen by the next start each time, and only
    the current file's declarations are kept."""
    checkout = _checkout_copy(tmp_path)
    pyproject = checkout / "pyproject.toml"
    text = pyproject.read_text()
    line = 'python = "evalcli.scorers.builtin:PYTHON"'
    assert line in text
    first, kept = _scorer_kinds(checkout)
    assert "│ python " in first and len(kept) == 1
    pyproject.write_text(text.replace(line, "# " + line))
    without, kept_without = _scorer_kinds(checkout)
    assert "│ python " not in without and len(kept_without) == 1 and kept_without != kept
    pyproject.write_text(text)
    again, kept_again = _scorer_kinds(checkout)
    assert again == first and kept_again == kept


def _items(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT item_index, item_id, identity, content, status, gate_scores FROM items "
                            "ORDER BY item_index").fetchall()


def test_a_dataset_reached_through_symlinks_stores_what_its_real_folder_stores(tmp_path: Path) -> None:
    """``_resolved`` builds a module's real path from its folder's: a dataset folder reached through a symlinked
    folder, whose agent module is itself a symlink to a file elsewhere, runs the same agent and stores the same
    identities and digests as the real folder; two datasets with an ``agent.py`` each keep their own."""
    real = tmp_path / "real" / "sub"
    real.mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "agent_file.py").write_text(AGENT)
    (real / "adv51_agent.py").symlink_to(tmp_path / "elsewhere" / "agent_file.py")
    (real / "d.yaml").write_text(DATASET, encoding="utf-8")
    (tmp_path / "linked").symlink_to(real)
    for name, word in (("x", "echo X"), ("y", "Y")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "agent.py").write_text(f"def agent(input, **kw):\n    return {word!r} + input\n")
        (tmp_path / name / "d.yaml").write_text("target: agent:agent\ngates: [{includes: echo}]\ndata:\n"
                                                "  - input: hi\n")
    via_link = run_cli(["run", "linked/d.yaml", "x/d.yaml", "y/d.yaml", "--db", "a.db", "-q"], tmp_path, fresh=True)
    via_real = run_cli(["run", "real/sub/../sub/d.yaml", "--db", "b.db", "-q"], tmp_path, fresh=True)
    assert via_real.code == 0, via_real.stderr
    assert via_link.code == 1, via_link.stdout + via_link.stderr  # y's agent is its own: no "echo"
    with sqlite3.connect(tmp_path / "a.db") as conn:
        runs = [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY started_at")]
        stored = [conn.execute("SELECT item_index, item_id, identity, content, status, gate_scores FROM items WHERE "
                               "run_id = ? ORDER BY item_index", (run,)).fetchall() for run in runs]
    assert stored[0] == _items(tmp_path / "b.db")
    assert [row[5] for row in stored[1]] == ['{"includes(echo)": 1.0}']
    assert [row[5] for row in stored[2]] == ['{"includes(echo)": 0.0}']
