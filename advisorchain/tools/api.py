"""The tool contract (defined in ``advisorchain._tool_types``, below the model layer that carries
tools in ``ChatOptions``; this module is its home inside the ``tools`` package)."""

from .._tool_types import *  # noqa: F403
from .._tool_types import __all__ as __all__
