"""smolagents agents in the shape of its own examples: huggingface/smolagents ``examples/multiple_tools.py`` (a
``CodeAgent`` with ``stream_outputs=True`` and ``@tool`` functions, the same ones as a ``ToolCallingAgent``), their
model an ``OpenAIServerModel`` at the loopback server. The tools answer from tables instead of the web APIs the
example calls; ``get_weather`` raises for a city it does not know, and every live call is recorded."""

from __future__ import annotations

from smolagents import CodeAgent, OpenAIServerModel, ToolCallingAgent, tool

from tests.app_agents import KEY, URL, record

WEATHER = {"new york": ("sunny", 75), "paris": ("rainy", 61)}
RATES = {("USD", "EUR"): 0.9}


@tool
def get_weather(location: str, celsius: bool | None = False) -> str:
    """
    Get the current weather at the given location using the WeatherStack API.

    Args:
        location: The location (city name).
        celsius: Whether to return the temperature in Celsius (default is False, which returns Fahrenheit).
    """
    record(event="live", tool="get_weather", location=location)
    found = WEATHER.get(location.lower())
    if found is None:
        raise LookupError(f"no weather for {location}")
    return f"The current weather in {location} is {found[0]} with a temperature of {found[1]} °F."


@tool
def convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    """
    Converts a specified amount from one currency to another using the ExchangeRate-API.

    Args:
        amount: The amount of money to convert.
        from_currency: The currency code of the currency to convert from (e.g., 'USD').
        to_currency: The currency code of the currency to convert to (e.g., 'EUR').
    """
    record(event="live", tool="convert_currency", amount=amount)
    converted = amount * RATES[(from_currency, to_currency)]
    return f"{amount} {from_currency} is equal to {converted} {to_currency}."


model = OpenAIServerModel(model_id="gpt-4o-mini", api_base=URL, api_key=KEY)
tools = [convert_currency, get_weather]

code_agent = CodeAgent(tools=tools, model=model, stream_outputs=True)
calling_agent = ToolCallingAgent(tools=tools, model=model)
