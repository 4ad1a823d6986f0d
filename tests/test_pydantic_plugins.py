"""A user's pydantic plugin (an installed distribution's ``pydantic`` entry point) observes the user's models, and
evalcli's own argument models are built without plugins (docs/performance.md "Before the first turn"): the real
CLI, a real distribution on the path."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO, run_cli
from tests.plugin_packages import models_seen, seeing_plugin

AGENT = '''
import os
from pydantic import BaseModel

class Forecast(BaseModel):
    sky: str

def answer(input, **kw):
    with open("env.txt", "w") as f:
        f.write(repr(os.environ.get("PYDANTIC_DISABLE_PLUGINS")))
    return "Sunny: " + Forecast.model_validate({"sky": "sun"}).sky
'''
DATASET = """
target: agent:answer
gates: [{includes: Sunny}]
scorers: [{max_tool_calls: 3}, {called_tool: weather}]
data:
  - input: hi
"""


def _project(tmp_path: Path) -> dict[str, str]:
    site = seeing_plugin(tmp_path / "site")
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text(DATASET)
    return {"PYTHONPATH": f"{site}:{tmp_path}:{REPO}", "SEEN_MODELS": str(tmp_path / "seen.jsonl")}


def test_a_users_pydantic_plugin_sees_the_users_models_not_evalclis(tmp_path: Path) -> None:
    env = _project(tmp_path)
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path, env, fresh=True)
    assert result.code in (0, 1), result.stderr
    seen = [name for _, name in models_seen(tmp_path / "seen.jsonl")]
    assert "Forecast" in seen  # the plugin was found and is used for the agent's own model
    assert not {"TextArgs", "MaxToolCallsArgs", "CalledToolArgs"} & set(seen), seen
    assert (tmp_path / "env.txt").read_text() == "None"  # the setting is as it was when the target runs


def test_a_users_own_setting_of_pydantic_plugins_is_kept(tmp_path: Path) -> None:
    env = {**_project(tmp_path), "PYDANTIC_DISABLE_PLUGINS": "seeing"}
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path, env, fresh=True)
    assert result.code in (0, 1), result.stderr
    assert not (tmp_path / "seen.jsonl").exists()  # the user turned that plugin off: nothing seen
    assert (tmp_path / "env.txt").read_text() == "'seeing'"
