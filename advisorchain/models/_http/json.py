"""JSON in and out of the HTTP stack: ``advisorchain._json`` (orjson when installed, the stdlib
otherwise, same results), whose home is below every layer so that the tool manager reads a model's
tool arguments with it too."""

from __future__ import annotations

from ..._json import FAST, dumps, has_long_digits, loads, loads_short

__all__ = ["FAST", "dumps", "has_long_digits", "loads", "loads_short"]
