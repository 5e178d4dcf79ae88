"""Several agents in one conversation: handoffs as a recursive advisor, agents as tools (API.md §18).

>>> billing = Agent("billing", instructions="You handle invoices.", description="Invoices and payments")
>>> triage = Agent("triage", instructions="Route the customer.", handoffs=[billing])
>>> client.prompt("My invoice is wrong").agent(triage).call().content()
"""

from ._advisor import HandoffAdvisor
from .agent import Agent, Handoff

__all__ = ["Agent", "Handoff", "HandoffAdvisor"]
