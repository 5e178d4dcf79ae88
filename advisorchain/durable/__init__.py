"""Durable agent runs: an agent (a ChatClient with its advisors, tools, memory and output type) run
as a Temporal workflow (``advisorchain.durable.temporal``, extra ``temporal``) or a DBOS workflow
(``advisorchain.durable.dbos``, extra ``dbos``).

The advisor chain and the tool loop run unchanged as workflow code; model calls, the agent's tool
calls and memory reads/writes become activities (Temporal) or steps (DBOS). This package imports
neither engine: import the submodule of the engine you use.
"""

__all__: list[str] = []
