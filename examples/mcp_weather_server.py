"""A weather MCP server (the ``mcp`` package's server, FastMCP's successor ``MCPServer``), for the MCP examples of
docs/hermetic.md and evalcli's tests.

``python -m examples.mcp_weather_server`` serves over stdio; ``python -m examples.mcp_weather_server --http --port
8766`` over streamable HTTP at ``http://127.0.0.1:8766/mcp``. Every time one of its tools really runs it appends a
line to the file ``WEATHER_MCP_LOG`` names (when set), so a test sees which calls reached the server.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather")


def _ran(line: str) -> None:
    log = os.environ.get("WEATHER_MCP_LOG")
    if log:
        with Path(log).open("a", encoding="utf-8") as f:
            f.write(line + "\n")


@server.tool()
def get_weather(city: str, day: str = "today") -> dict[str, object]:
    """Get the weather for a city.

    Args:
        city: The city.
        day: today or tomorrow.
    """
    _ran(f"get_weather {city} {day}")
    return {"city": city, "day": day, "condition": "windy", "temperature_f": 61}


@server.tool()
def get_alerts(city: str) -> str:
    """Weather alerts for a city."""
    _ran(f"get_alerts {city}")
    return f"no alerts for {city}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, default=8766)
    args = parser.parse_args()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
