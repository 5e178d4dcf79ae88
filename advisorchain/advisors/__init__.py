"""Advisors: the contract and the chain (``api``) and the built-in advisors, one module each."""

from .api import (
    AdvisorChain,
    AdvisorParams,
    BaseAdvisor,
    CallAdvisor,
    CallAdvisorChain,
    ChatClientRequest,
    ChatClientResponse,
    MemoryAdvisor,
    Ordered,
    StreamAdvisor,
    StreamAdvisorChain,
    ToolAdvisor,
)

__all__ = [
    "AdvisorChain",
    "AdvisorParams",
    "BaseAdvisor",
    "CallAdvisor",
    "CallAdvisorChain",
    "ChatClientRequest",
    "ChatClientResponse",
    "MemoryAdvisor",
    "Ordered",
    "StreamAdvisor",
    "StreamAdvisorChain",
    "ToolAdvisor",
]
