"""evalcli's own adapters, declared as any package declares one (docs/extending.md): each is named by an entry point
of the group ``evalcli.adapters`` in evalcli's ``pyproject.toml``. This module imports no framework: every
declaration is read to recognise an agent object, and an adapter's module is imported only when a target needs it.
"""

from __future__ import annotations

import sys
from typing import Any

from .registry import AdapterDeclaration


def _is_openai_agents(obj: Any) -> bool:
    """``agents`` is a generic module name: the class must come from the ``openai-agents`` distribution."""
    module = sys.modules.get("agents")
    return module is not None and hasattr(module, "Runner") and hasattr(module, "function_tool")


CALLABLE = AdapterDeclaration(
    name="callable", adapter="evalcli.targets.callable:CallableAdapter",
    summary="a function, or an object with generate(input, *, memory=None, **options), sync or async "
            "(any object no other adapter recognises)")

PYDANTIC_AI = AdapterDeclaration(
    name="pydantic_ai", adapter="evalcli.targets.pydantic_ai:PydanticAIAdapter",
    summary="a PydanticAI agent, run with agent.run and one message history per conversation",
    recognises=("pydantic_ai.agent.abstract.AbstractAgent", "pydantic_ai.agent.AbstractAgent", "pydantic_ai.agent.Agent",
                "pydantic_ai.Agent"),
    install="pip install 'evalcli[pydantic-ai]'", frameworks=("pydantic_ai",))

OPENAI_AGENTS = AdapterDeclaration(
    name="openai_agents", adapter="evalcli.targets.openai_agents:OpenAIAgentsAdapter",
    summary="an OpenAI Agents SDK agent, run with Runner.run and one session per conversation",
    recognises=("agents.agent.Agent", "agents.agent.AgentBase"), confirms=_is_openai_agents,
    install="pip install 'evalcli[openai-agents]'", frameworks=("agents",))

LANGGRAPH = AdapterDeclaration(
    name="langgraph", adapter="evalcli.targets.langgraph:LangGraphAdapter",
    summary="a compiled LangGraph graph (create_agent too), one checkpointer thread per conversation",
    recognises=("langgraph.pregel.main.Pregel", "langgraph.pregel.Pregel"),
    install="pip install 'evalcli[langgraph]'",
    frameworks=("langgraph", "langchain", "langchain_core", "langchain_openai"))

LLAMA_INDEX = AdapterDeclaration(
    name="llama_index", adapter="evalcli.targets.llama_index:LlamaIndexAdapter",
    summary="a LlamaIndex FunctionAgent, ReActAgent or AgentWorkflow, one workflow Context per conversation",
    recognises=("llama_index.core.agent.workflow.base_agent.BaseWorkflowAgent",
                "llama_index.core.agent.workflow.multi_agent_workflow.AgentWorkflow"),
    install="pip install 'evalcli[llama-index]'", frameworks=("llama_index", "workflows"))

SMOLAGENTS = AdapterDeclaration(
    name="smolagents", adapter="evalcli.targets.smolagents:SmolagentsAdapter",
    summary="a smolagents ToolCallingAgent or CodeAgent, a copy with a fresh memory per conversation",
    recognises=("smolagents.agents.MultiStepAgent",),
    install="pip install 'evalcli[smolagents]'", frameworks=("smolagents",))

GOOGLE_ADK = AdapterDeclaration(
    name="google_adk", adapter="evalcli.targets.google_adk:GoogleADKAdapter",
    summary="a Google ADK agent (or App), run by a Runner with one ADK session per conversation",
    recognises=("google.adk.agents.base_agent.BaseAgent", "google.adk.apps.app.App"),
    install="pip install 'evalcli[google-adk]'", frameworks=("google.adk", "google.genai"))

STRANDS = AdapterDeclaration(
    name="strands", adapter="evalcli.targets.strands:StrandsAdapter",
    summary="a Strands agent, a copy of it (tools and model kept) with its own state and messages per conversation",
    recognises=("strands.agent.agent.Agent",),
    install="pip install 'evalcli[strands]'", frameworks=("strands",))

CREWAI = AdapterDeclaration(
    name="crewai", adapter="evalcli.targets.crewai:CrewAIAdapter",
    summary="a CrewAI Agent (kickoff with the conversation's messages) or a Crew (kickoff with inputs from the user "
            "message), a copy per conversation",
    recognises=("crewai.agent.core.Agent", "crewai.crew.Crew"),
    install="pip install 'evalcli[crewai]'", frameworks=("crewai",))

HTTP = AdapterDeclaration(
    name="http", adapter="evalcli.targets.http:HttpAdapter", mapping=True,
    summary="a chat endpoint over HTTP (url: ...), its request and reply shaped by templates")

MASTRA = AdapterDeclaration(
    name="mastra", adapter="evalcli.targets.mastra:MastraAdapter", mapping=True,
    summary="an agent of a Mastra server (url: ..., agent: ...), over its HTTP API")

A2A = AdapterDeclaration(
    name="a2a", adapter="evalcli.targets.a2a:A2AAdapter", mapping=True,
    summary="an agent that speaks A2A (a2a: URL): its agent card, message/send, tasks polled to completion")

MODEL = AdapterDeclaration(
    name="model", adapter="evalcli.targets.model:ModelAdapter", mapping=True,
    summary="a model (model: NAME) answering each turn through evalcli's LLM client")
