"""Provider adapters and model wrappers.

The adapters are imported from their own modules (``advisorchain.models.openai``,
``advisorchain.models.anthropic``) so that each SDK is needed only when used; the wrappers
``FallbackChatModel`` and ``RetryChatModel`` need no SDK and are importable from here."""

from .wrappers import FallbackChatModel, RetryChatModel

__all__ = ["FallbackChatModel", "RetryChatModel"]
