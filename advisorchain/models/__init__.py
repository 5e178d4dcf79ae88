"""Provider adapters: ``advisorchain.models.openai`` and ``advisorchain.models.anthropic``.

They are imported from their own modules so that each SDK is needed only when used."""
