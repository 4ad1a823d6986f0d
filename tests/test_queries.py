"""The docs' database queries (docs/storage.md) answer their questions: each is run exactly as written, with the real
``sqlite-utils`` command, on a database of real runs of the shipped datasets."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.llm_server import LLMServer, verdict
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

QUERY = re.compile(r"<!-- query: (?P<name>[\w-]+) -->\n```sh\n(?P<body>.*?)```", re.DOTALL)
PAGE = REPO / "docs" / "storage.md"


def documented_queries() -> dict[str, list[str]]:
    """Each documented query as the argument list of its ``sqlite-utils query`` command."""
    queries = {}
    for match in QUERY.finditer(PAGE.read_text()):
        lines = [line for line in match["body"].splitlines() if not line.startswith("#")]
        queries[match["name"]] = shlex.split(" ".join(line.rstrip("\\") for line in lines))
    return queries


def run_query(args: list[str], db: Path) -> list[dict[str, object]]:
    assert args[:3] == ["sqlite-utils", "query", "evalcli.db"], args
    command = shutil.which("sqlite-utils")
    assert command, "sqlite-utils (a dependency of evalcli) installs its command"
    done = subprocess.run([command, "query", str(db), *args[3:]], capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, object]] = json.loads(done.stdout)
    return rows


def test_the_three_documented_queries(tmp_path: Path, llm_server: LLMServer) -> None:
    queries = documented_queries()
    assert set(queries) == {"failed-gate", "failing-conversations", "scorer-history"}
    llm_server.responder = lambda request: verdict(True, "Forecasts given.")
    judge = {"EVALCLI_JUDGE_MODEL": "openai/judge", "OPENAI_API_BASE": llm_server.url,
             "OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789"}
    db = tmp_path / "evalcli.db"
    for dataset in ("weather", "forgetful", "weather", "forgetful"):
        done = run_cli(["run", f"datasets/{dataset}.yaml", "--db", str(db)], REPO, env=judge)
        assert done.code in (0, 1), done.stderr
    runs = run_cli(["runs", "--db", str(db)], REPO)
    assert runs.code == 0

    assert run_query(queries["failed-gate"], db) == [{"item_id": "london-two-days", "turn_index": 1}]
    failing = run_query(queries["failing-conversations"], db)
    assert failing == [{"item_id": "london-two-days", "status": "ok", "error": None}]
    history = run_query(queries["scorer-history"], db)
    assert [row["mean"] for row in history] == [1.0, 1.0]
    assert len({row["id"] for row in history}) == 2


@pytest.mark.parametrize("name", ["failed-gate", "failing-conversations", "scorer-history"])
def test_each_query_names_what_it_answers(name: str) -> None:
    text = PAGE.read_text()
    block = text.split(f"<!-- query: {name} -->", 1)[1].split("```", 2)[1]
    assert block.splitlines()[1].startswith("# "), "each query starts with the question it answers"
