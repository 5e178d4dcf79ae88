"""Implementations of one agent run, one module per library, each with the same ``Impl`` shape.

An ``Impl(base_url, model, options)`` has ``async run(prompt) -> str`` (the final answer),
``async stream(prompt) -> str`` (the joined text deltas) and ``async aclose()``. Each module names
the distributions whose versions the report shows in ``PACKAGES``.
"""
