"""Serving an agent to other software (API.md §20, extra ``serve``): any ChatClient — its tools,
memory, approvals, agents, guardrails and budgets — over AG-UI (front ends), A2A (other agents) and
OpenAI's Chat Completions API (every OpenAI client), each an ASGI app to run with uvicorn.

Common to the three: ``token`` (every request carries ``Authorization: Bearer <token>``), Host and
Origin checked against the hosts the server is bound to, bodies of at most 8 MiB
(``MAX_BODY_BYTES``), a bad body answered in the protocol's own error form naming the field with
nothing run, a client that goes away cancelling its run (memory stores nothing of that turn), and
two requests on one conversation taking turns.
"""

from __future__ import annotations

from ._http import MAX_BODY_BYTES
from .a2a import A2AAgentTool, a2a_app
from .agui import INTERRUPT_PREFIX, agui_app
from .openai import APPROVAL_FLAG, openai_app

__all__ = [
    "APPROVAL_FLAG",
    "INTERRUPT_PREFIX",
    "MAX_BODY_BYTES",
    "A2AAgentTool",
    "a2a_app",
    "agui_app",
    "openai_app",
]
