"""The scripted simulated user shipped in examples/frameworks/scripted_user.py plays the users of
datasets/simulated.yaml offline, from each request's own messages, and serves OpenAI's Chat Completions format."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from examples.frameworks import scripted_user
from tests.conftest import REPO, run_cli
from tests.llm_server import LLMServer, Reply, Request, text, verdict
from tests.sim_helpers import SIM_NAME, sim_env


def test_it_plays_both_users_of_the_simulated_example_to_their_goal(llm_server: LLMServer, tmp_path: Path) -> None:
    def respond(request: Request) -> Reply:
        if request.body.get("model") == SIM_NAME:  # what the shipped server answers, computed by the same function
            return text(scripted_user.next_user_message(request.messages))
        return verdict(True, "A forecast was given.")  # the goal_achieved judge

    llm_server.responder = respond
    env = {**sim_env(llm_server), "EVALCLI_JUDGE_MODEL": "openai/judge-model"}
    result = run_cli(["run", "datasets/simulated.yaml", "--db", str(tmp_path / "e.db"), "--json", "-"], REPO, env)
    assert result.code == 0, result.stderr
    out = result.json
    turns = [[(t["input"], t["simulated"]) for t in item["turns"]] for item in out["items"]]
    assert turns == [
        [("Hi! What will the weather be like this weekend in my favourite city?", False), ("Paris.", True)],
        [("Do I need an umbrella tomorrow?", True), ("London.", True), ("And tomorrow?", True)],
    ]
    assert [i["stop_reason"] for i in out["items"]] == ["user_stop", "user_stop"]
    assert out["items"][1]["turns"][-1]["output"][-1]["content"] == "Tomorrow in London: cloudy, 57°F."
    assert out["verdict"] == "passed"


def test_the_module_serves_chat_completions_on_loopback(tmp_path: Path) -> None:
    server = subprocess.Popen([sys.executable, "-m", "examples.frameworks.scripted_user", "--port", "0"], cwd=REPO,
                              stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[-1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        instructions = ("You are role-playing a human user.\n\nYour goal in this conversation:\nFind out whether you "
                        "need an umbrella in London tomorrow.\n\nWho you are:\nTerse.\n\nWhat you know (share each "
                        "detail only when asked):\n- city: London\n\nHow to reply:\n- ...")
        body = {"model": "scripted-user", "messages": [{"role": "system", "content": instructions},
                                                        {"role": "user", "content": "[The conversation starts now.]"}]}
        request = urllib.request.Request(url + "/chat/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            reply = json.loads(response.read())
        assert reply["choices"][0]["message"] == {"role": "assistant", "content": "Do I need an umbrella tomorrow?"}
    finally:
        server.terminate()
        server.wait(timeout=10)
