from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import ChatClient, ChatResponse, Generation, ScriptedChatModel, Usage
from advisorchain.messages import AssistantMessage
from advisorchain.model import ChatResponseMetadata
from tests.support.advisors import Recorder


def _by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {s.name: s for s in finished}


def _response() -> ChatResponse:
    meta = ChatResponseMetadata(id="resp-1", model="scripted-1", usage=Usage(7, 3), finish_reason="stop")
    return ChatResponse([Generation(AssistantMessage("hi"), "stop")], meta)


def test_call_opens_request_advisor_and_model_spans_nested(spans: InMemorySpanExporter) -> None:
    client = ChatClient(ScriptedChatModel([_response()]), tool_calling_auto_register=False)
    client.prompt("q").advisors(Recorder("outer", 1, []), Recorder("inner", 2, [])).call().content()
    named = _by_name(spans.get_finished_spans())
    assert set(named) == {"advisorchain request", "advisor outer", "advisor inner", "chat scripted"}
    assert named["advisor outer"].parent.span_id == named["advisorchain request"].context.span_id  # type: ignore[union-attr]
    assert named["advisor inner"].parent.span_id == named["advisor outer"].context.span_id  # type: ignore[union-attr]
    assert named["chat scripted"].parent.span_id == named["advisor inner"].context.span_id  # type: ignore[union-attr]


def test_model_span_follows_the_genai_conventions(spans: InMemorySpanExporter) -> None:
    ChatClient(ScriptedChatModel([_response()]), tool_calling_auto_register=False).prompt(
        "q"
    ).call().content()
    attrs = dict(_by_name(spans.get_finished_spans())["chat scripted"].attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == "scripted"
    assert attrs["gen_ai.response.id"] == "resp-1"
    assert attrs["gen_ai.response.model"] == "scripted-1"
    assert attrs["gen_ai.usage.input_tokens"] == 7
    assert attrs["gen_ai.usage.output_tokens"] == 3
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("stop",)  # type: ignore[arg-type]


def test_stream_spans_nest_and_close_when_the_stream_ends(spans: InMemorySpanExporter) -> None:
    client = ChatClient(ScriptedChatModel(["a b c"]), tool_calling_auto_register=False)
    assert list(client.prompt("q").advisors(Recorder("outer", 1, [])).stream().content()) == ["a", " b", " c"]
    named = _by_name(spans.get_finished_spans())
    assert set(named) == {"advisorchain request", "advisor outer", "chat scripted"}
    assert named["advisor outer"].parent.span_id == named["advisorchain request"].context.span_id  # type: ignore[union-attr]
    assert named["chat scripted"].parent.span_id == named["advisor outer"].context.span_id  # type: ignore[union-attr]


def test_a_failing_model_marks_its_span_as_an_error(spans: InMemorySpanExporter) -> None:
    client = ChatClient(ScriptedChatModel([RuntimeError("down")]), tool_calling_auto_register=False)
    with pytest.raises(RuntimeError):
        client.prompt("q").call().content()
    model_span = _by_name(spans.get_finished_spans())["chat scripted"]
    assert not model_span.status.is_ok
    assert any(e.name == "exception" for e in model_span.events)


def test_a_streamed_model_call_span_is_a_client_span_with_response_attributes(
    spans: InMemorySpanExporter,
) -> None:
    client = ChatClient(ScriptedChatModel([_response()]), tool_calling_auto_register=False)
    assert list(client.prompt("q").stream().content()) == ["hi"]
    model_span = _by_name(spans.get_finished_spans())["chat scripted"]
    attrs = dict(model_span.attributes or {})
    assert model_span.kind.name == "CLIENT"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (7, 3)
    assert attrs["gen_ai.response.id"] == "resp-1"
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("stop",)  # type: ignore[arg-type]


def test_a_stream_the_consumer_stops_early_is_not_an_error(spans: InMemorySpanExporter) -> None:
    client = ChatClient(ScriptedChatModel(["a b c"]), tool_calling_auto_register=False)
    stream = client.prompt("q").advisors(Recorder("outer", 1, [])).stream().content()
    assert next(stream) == "a"
    stream.close()  # type: ignore[attr-defined]
    finished = spans.get_finished_spans()
    assert {s.name for s in finished} == {"advisorchain request", "advisor outer", "chat scripted"}
    assert all(s.status.is_unset for s in finished)
