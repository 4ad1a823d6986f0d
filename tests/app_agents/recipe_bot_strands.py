"""A recipe assistant written as strands-agents/samples' ``recipe_bot`` writes one: a Strands ``Agent`` with a system
prompt and ``@tool`` functions (a web search for recipes, a lookup of a user's allergies read from the tool
context's ``invocation_state``), its model Strands' ``OpenAIModel`` at ``$OPENAI_BASE_URL`` and its default
callback handler, which prints the streamed answer."""

from __future__ import annotations

import os
import pathlib
from typing import Any

from strands import Agent, ToolContext, tool
from strands.models.openai import OpenAIModel

from evalcli import ConversationInfo

MARK = pathlib.Path(os.environ.get("RECIPE_MARK", os.devnull))
ALLERGIES = {"ada": ["peanuts"], "bo": []}


@tool
def websearch(keywords: str) -> str:
    """Search the web for recipes."""
    with MARK.open("a") as f:
        f.write(f"websearch {keywords}\n")
    if "unobtainium" in keywords:
        raise RuntimeError("the search service is down")
    return f"Top result for {keywords}: a 20-minute {keywords} recipe."


@tool(context=True)
def allergies(tool_context: ToolContext) -> str:
    """The user's allergies."""
    user = tool_context.invocation_state.get("user", "nobody")
    return ", ".join(ALLERGIES.get(user, [])) or "none"


model = OpenAIModel(client_args={"base_url": os.environ["OPENAI_BASE_URL"], "api_key": os.environ["OPENAI_API_KEY"],
                                 "max_retries": 0, "timeout": 120}, model_id="scripted")
recipe_bot = Agent(model=model, system_prompt="You are RecipeBot, a helpful cooking assistant.",
                   tools=[websearch, allergies])


def user(info: ConversationInfo) -> dict[str, Any]:
    """The app passes the signed-in user to the tools."""
    return {"invocation_state": {"user": str(info.metadata.get("user", "nobody"))}}
