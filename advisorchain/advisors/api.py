"""The advisor contract, in one place to read and import from.

- ``ChatClientRequest`` / ``ChatClientResponse``: what travels the chain (defined in ``model``).
- ``CallAdvisor`` / ``StreamAdvisor``: the two link protocols; ``CallAdvisorChain`` /
  ``StreamAdvisorChain``: the immutable chains they receive (defined in ``chain.cursor``, the kernel).
- ``BaseAdvisor``: ``before``/``after`` functions, safe on streams (``advisors.base``).
- ``Ordered``, ``AdvisorParams``, the ``ToolAdvisor``/``MemoryAdvisor`` markers (``chain.vocabulary``).

This module defines nothing itself: each name has one home, listed above, and the homes import
nothing from here.
"""

from ..chain import AdvisorChain, CallAdvisor, CallAdvisorChain, StreamAdvisor, StreamAdvisorChain
from ..chain.vocabulary import AdvisorParams, MemoryAdvisor, Ordered, ToolAdvisor
from ..model import ChatClientRequest, ChatClientResponse
from .base import BaseAdvisor

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
