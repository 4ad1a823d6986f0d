"""The tool agent of the tests of tools under the dataset's control (docs/hermetic.md): ``evalcli.Agent`` against the
loopback scripted model, and a plain callable whose tool is an ``@evalcli.tool`` function. Every real tool writes a
marker file, so a mocked call that ran it anyway is seen. A pytest plugin (``tests/conftest.py``): ``agent_env``
writes the agent as ``tool_agents.py`` into the work dir and gives the environment that points it at the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.llm_server import LLMServer, scripted_weather

AGENT = '''
import asyncio, json, os, pathlib
import evalcli

MARK = pathlib.Path(__file__).with_name("ran.txt")


def get_weather(city: str, day: str = "today") -> dict:
    """Get the weather for a city."""
    with MARK.open("a") as f:
        f.write(f"get_weather {city}\\n")
    return {"city": city, "day": day, "condition": "sunny", "temperature_f": 70}


agent = evalcli.Agent(model="openai/scripted", tools=[get_weather], api_base=os.environ.get("OPENAI_BASE_URL"))


@evalcli.tool
async def lookup(key: str) -> str:
    """A tool of a plain callable target."""
    with MARK.open("a") as f:
        f.write(f"lookup {key}\\n")
    await asyncio.sleep(0.05)
    return f"live value of {key}"


async def looker(input, **options):
    """Looks the key named in the input up with the decorated tool; several conversations overlap."""
    key = input.split()[-1]
    try:
        value = await lookup(key=key)
    except Exception as exc:
        value = f"failed: {exc}"
    await asyncio.sleep(0.05)
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"key": key})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": value if isinstance(value, str) else json.dumps(value)},
            {"role": "assistant", "content": f"{key} is {value}"}]
'''


@pytest.fixture
def agent_env(workdir: Path, llm_server: LLMServer) -> dict[str, str]:
    (workdir / "tool_agents.py").write_text(AGENT)
    llm_server.responder = scripted_weather
    return {"OPENAI_BASE_URL": llm_server.url, "OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789",
            "NO_PROXY": "127.0.0.1"}
