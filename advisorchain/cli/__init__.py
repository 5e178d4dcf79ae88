"""The ``advisorchain`` command line: ``chat`` (interactive or one-shot, tools, MCP, sessions,
``--trace``), ``sessions list|show|delete``, ``demo``, ``eval`` and ``--version``."""

from __future__ import annotations

from .app import app, main

__all__ = ["app", "main"]
