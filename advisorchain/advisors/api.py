"""The advisor contract, in one place to read and import from.

- ``ChatClientRequest`` / ``ChatClientResponse``: what travels the chain (defined in ``model``).
- ``CallAdvisor`` / ``StreamAdvisor``: the two link protocols; ``CallAdvisorChain`` /
  ``StreamAdvisorChain``: the immutable chains they receive (defined in ``advisors.chain``).
- ``BaseAdvisor``: ``before``/``after`` functions, safe on streams (``advisors.base``).
- ``Ordered``, ``AdvisorParams``, the ``ToolAdvisor``/``MemoryAdvisor`` markers (``advisors.vocabulary``).

This module defines nothing itself: each name has one home, listed above, and the homes import
nothing from here.
"""

from ..model import ChatClientRequest, ChatClientResponse
from .base import BaseAdvisor
from .chain import AdvisorChain, CallAdvisor, CallAdvisorChain, StreamAdvisor, StreamAdvisorChain
from .vocabulary import AdvisorParams, MemoryAdvisor, Ordered, ToolAdvisor

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
