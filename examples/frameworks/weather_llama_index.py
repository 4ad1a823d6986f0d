"""The demo weather agent written with LlamaIndex: ``evalcli run datasets/frameworks/llama_index.yaml``.

``agent`` is a ``FunctionAgent`` (streaming, its default) on an ``OpenAILike`` LLM; ``get_weather`` raises for an
unknown city, which LlamaIndex reports to the model as an error result and evalcli records with ``is_error: true``.
Each conversation gets its own workflow ``Context`` (docs/targets/llama-index.md).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.llms.openai_like import OpenAILike

from examples.frameworks.weather import INSTRUCTIONS, api_key, base_url, forecast, model_name


async def get_weather(city: str, day: str = "today") -> dict[str, Any]:
    """Get the weather forecast for a city: day is "today" or "tomorrow"."""
    return forecast(city, day)


llm = OpenAILike(model=model_name(), api_base=base_url(), api_key=api_key(), is_chat_model=True,
                 is_function_calling_model=True)
agent = FunctionAgent(tools=[get_weather], llm=llm, system_prompt=INSTRUCTIONS)
