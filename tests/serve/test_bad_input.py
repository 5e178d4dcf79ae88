"""Open-ended input to the three apps' parsers: whatever JSON arrives, the answer is a refusal naming
what is wrong (``Refusal``) or a turn to run — never another error (which would be a 500)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain.serve._http import Refusal
from advisorchain.serve.a2a import _approvals
from advisorchain.serve.agui import _input
from advisorchain.serve.agui import _turn as agui_turn
from advisorchain.serve.openai import _turn as openai_turn

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
ROLES = st.sampled_from(["system", "developer", "user", "assistant", "tool", "robot"])
MESSAGE = st.fixed_dictionaries(
    {"role": ROLES},
    optional={
        "content": JSON,
        "tool_calls": JSON,
        "tool_call_id": JSON,
    },
)
BODY = st.fixed_dictionaries(
    {},
    optional={
        "messages": st.lists(MESSAGE, max_size=4) | JSON,
        "tools": JSON,
        "temperature": JSON,
        "top_p": JSON,
        "max_tokens": JSON,
        "max_completion_tokens": JSON,
        "stop": JSON,
        "n": JSON,
    },
)


@settings(max_examples=300, deadline=None)
@given(BODY)
def test_any_openai_body_is_a_turn_or_a_refusal(body: dict[str, Any]) -> None:
    try:
        openai_turn(body, None)
    except Refusal as refusal:
        assert refusal.status == 400 and refusal.message


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {"threadId": st.text(max_size=4), "runId": st.text(max_size=4)},
        optional={"messages": JSON, "tools": JSON, "resume": JSON},
    )
    | JSON
)
def test_any_agui_body_is_a_turn_or_a_refusal(body: Any) -> None:
    try:
        agui_turn(_input(body))
    except Refusal as refusal:
        assert refusal.status in (400, 422) and refusal.message


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_any_a2a_approvals_data_is_decisions_or_a_refusal(data: Any) -> None:
    from a2a.helpers import new_data_part

    try:
        _approvals([new_data_part({"approvals": data})])
    except Refusal as refusal:
        assert refusal.status == 400
