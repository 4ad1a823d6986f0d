"""LlamaIndex agents in the shape of run-llama's ``docs/examples/agent/agent_workflow_basic.ipynb``: a
``FunctionAgent`` with an async ``search_web`` tool and a system prompt (streaming, its default), the same agent in
an ``AgentWorkflow``, and a ``ReActAgent``; their LLM an ``OpenAILike`` at the loopback server. The tool answers
from a table instead of Tavily; it raises for a query it has nothing on, and every live call is recorded."""

from __future__ import annotations

from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.llms.openai_like import OpenAILike

from tests.app_agents import KEY, URL, record

PAGES = {"weather in san francisco": "San Francisco: 16.1°C (61°F), partly cloudy."}


async def search_web(query: str) -> str:
    """Useful for using the web to answer questions."""
    record(event="live", tool="search_web", query=query)
    found = PAGES.get(query.lower().rstrip("?"))
    if found is None:
        raise LookupError(f"nothing found for {query}")
    return found


llm = OpenAILike(model="gpt-4o-mini", api_base=URL, api_key=KEY, is_chat_model=True, is_function_calling_model=True,
                 max_retries=0)

agent = FunctionAgent(tools=[search_web], llm=llm,
                      system_prompt="You are a helpful assistant that can search the web for information.")
workflow = AgentWorkflow(agents=[agent])
react_agent = ReActAgent(tools=[search_web], llm=llm, streaming=False)
