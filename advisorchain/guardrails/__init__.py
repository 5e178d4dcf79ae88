"""Guardrails (API.md §19): checks on what goes in, what comes out and what tools are asked to do,
as advisors, on calls and streams alike — before anything unchecked reaches the caller, a tool or a
store.

A guard is a plain function ``fn(text, context) -> bool | GuardResult`` (sync or async).
``InputGuardrailAdvisor`` checks the turn's user text (beside the model call, or before it),
``OutputGuardrailAdvisor`` the answer (held whole, or released sentence by sentence), and the tool
loop's ``tool_guards`` / ``tool_result_guards`` each call's arguments and each result.
"""

from ..errors import GuardrailError, GuardrailTripped
from ..guards import Guard, GuardContext, GuardResult
from .builtins import keyword_guard, llm_guard, max_length_guard
from .input import InputGuardrailAdvisor
from .output import OutputGuardrailAdvisor
from .pii import pii_guard

__all__ = [
    "Guard",
    "GuardContext",
    "GuardResult",
    "GuardrailError",
    "GuardrailTripped",
    "InputGuardrailAdvisor",
    "OutputGuardrailAdvisor",
    "keyword_guard",
    "llm_guard",
    "max_length_guard",
    "pii_guard",
]
