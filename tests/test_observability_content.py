"""Spans hold no prompt, completion or tool-argument text unless the application opts in
(API.md §9; issue 11, failure 6): a tool's failure text, which quotes argument values, and a
model's error message stay out of span status, attributes and events."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ModelError,
    ScriptedChatModel,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolExecutionError,
)
from advisorchain.observability import CAPTURE_CONTENT_ENV
from advisorchain.tools import tool
from tests.support.spans import span_exporter

SECRET = "s3cret-4111-1111"
@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """This test's spans, content capture off unless the test turns it on."""
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    yield span_exporter()


@tool
def charge(card: str) -> str:
    """Charge a card."""
    raise ValueError(f"card {card} was declined")


def _asks_to_charge() -> ScriptedChatModel:
    return ScriptedChatModel(
        [AssistantMessage(None, [ToolCall("c1", "charge", f'{{"card": "{SECRET}"}}')]), "ok"]
    )


def _texts(span: ReadableSpan) -> list[str]:
    texts = [span.status.description or ""]
    texts += [str(v) for v in (span.attributes or {}).values()]
    for event in span.events:
        texts += [str(v) for v in (event.attributes or {}).values()]
    return texts


def _leaks(exporter: InMemorySpanExporter) -> list[str]:
    return [s.name for s in exporter.get_finished_spans() if any(SECRET in t for t in _texts(s))]


def test_a_failing_tools_span_names_the_error_type_but_not_its_arguments(spans: InMemorySpanExporter) -> None:
    ChatClient(_asks_to_charge(), default_tools=[charge]).prompt("pay").call().content()

    tool_span = next(s for s in spans.get_finished_spans() if s.name == "execute_tool charge")
    assert not tool_span.status.is_ok
    assert tool_span.status.description == "ValueError"
    assert _leaks(spans) == []


def test_a_tool_error_raised_through_the_chain_leaves_no_argument_text_on_any_span(
    spans: InMemorySpanExporter,
) -> None:
    advisor = ToolCallingAdvisor(ToolCallingManager(raise_on_error=True))
    client = ChatClient(_asks_to_charge(), default_advisors=[advisor], default_tools=[charge])

    with pytest.raises(ToolExecutionError, match=SECRET):  # the caller still gets the whole message
        client.prompt("pay").call().content()

    assert len(spans.get_finished_spans()) >= 4
    assert _leaks(spans) == []


async def test_a_failing_stream_leaves_no_message_text_on_any_span(spans: InMemorySpanExporter) -> None:
    client = ChatClient(ScriptedChatModel([ModelError(f"rejected prompt mentioning {SECRET}")]))

    with pytest.raises(ModelError):
        [d async for d in client.prompt("hi").astream().content()]

    assert any(not s.status.is_ok for s in spans.get_finished_spans())
    assert _leaks(spans) == []


def test_with_the_genai_capture_switch_on_the_failure_text_is_kept(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")

    ChatClient(_asks_to_charge(), default_tools=[charge]).prompt("pay").call().content()

    tool_span = next(s for s in spans.get_finished_spans() if s.name == "execute_tool charge")
    assert SECRET in (tool_span.status.description or "")
