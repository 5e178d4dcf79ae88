"""The kernel: the advisor contract, the chain cursor, its last link (the model call) and the run.

Kept apart from the built-in advisors (``advisorchain.advisors``), as Spring AI keeps
``advisor/api`` apart from its advisors: the kernel never imports a built-in advisor.

- ``vocabulary``: order constants, request-context keys, the ``ToolAdvisor``/``MemoryAdvisor`` markers;
- ``cursor``: ``CallAdvisor``/``StreamAdvisor`` and the immutable chains that run them;
- ``link``: the model link at the end of every chain;
- ``run``: the ``Run`` one client request owns, and running a request's chain in it;
- ``events``: what a run tells its listener;
- ``assembly``: a request's advisors, sorted and checked.
"""

from .assembly import assemble_advisors
from .cursor import (
    Advisor,
    AdvisorChain,
    CallAdvisor,
    CallAdvisorChain,
    StreamAdvisor,
    StreamAdvisorChain,
    check_advisor,
    checked_request,
    checked_response,
    collect_answer,
    is_end_of_answer,
    rebased,
)
from .events import RunEvent, RunListener
from .link import model_prompt
from .run import Run, call_run, current_run, stream_run
from .vocabulary import AdvisorParams, MemoryAdvisor, Ordered, ToolAdvisor, check_order

__all__ = [
    "Advisor",
    "AdvisorChain",
    "AdvisorParams",
    "CallAdvisor",
    "CallAdvisorChain",
    "MemoryAdvisor",
    "Ordered",
    "Run",
    "RunEvent",
    "RunListener",
    "StreamAdvisor",
    "StreamAdvisorChain",
    "ToolAdvisor",
    "assemble_advisors",
    "call_run",
    "check_advisor",
    "check_order",
    "checked_request",
    "checked_response",
    "collect_answer",
    "current_run",
    "is_end_of_answer",
    "model_prompt",
    "rebased",
    "stream_run",
]
