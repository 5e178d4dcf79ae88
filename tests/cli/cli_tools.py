"""Tools the CLI tests load with ``--tools cli_tools:...`` (the benchmark server's weather tool)."""

from __future__ import annotations

from advisorchain import tool


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: sunny, 21C"


@tool(name="get_weather", requires_approval=True)
def guarded_weather(city: str) -> str:
    """Get the current weather for a city (asks the user first)."""
    return f"{city}: sunny, 21C"


ALL = [get_weather]
NOT_A_TOOL = 42
