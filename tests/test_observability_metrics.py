"""GenAI client metrics through the OTel metrics API, server and request attributes on model spans,
and no content in spans unless the user opts in (read with the OTel SDK's in-memory readers)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatOptions,
    ChatResponse,
    Generation,
    ScriptedChatModel,
    ToolCall,
    Usage,
    tool,
)
from advisorchain import observability as obs
from advisorchain.model import ChatResponseMetadata
from tests.support.spans import span_exporter

_reader = InMemoryMetricReader()


@pytest.fixture(scope="module", autouse=True)
def _providers() -> None:
    if not isinstance(metrics.get_meter_provider(), MeterProvider):
        metrics.set_meter_provider(MeterProvider(metric_readers=[_reader]))


@pytest.fixture
def points() -> Iterator[InMemorySpanExporter]:
    """Fresh spans; metrics are cumulative, so each test reads only its own model name's points."""
    yield span_exporter()


def _histogram(name: str) -> list[HistogramDataPoint]:
    data = _reader.get_metrics_data()
    found: list[HistogramDataPoint] = []
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found.extend(p for p in metric.data.data_points if isinstance(p, HistogramDataPoint))
    return found


def _response(text: str = "hi") -> ChatResponse:
    meta = ChatResponseMetadata(id="r1", model="scripted-1", usage=Usage(7, 3), finish_reason="stop")
    return ChatResponse([Generation(AssistantMessage(text), "stop")], meta)


def _by_tokens(points: list[HistogramDataPoint], model: str) -> dict[str, float]:
    return {
        str(p.attributes["gen_ai.token.type"]): p.sum
        for p in points
        if p.attributes is not None and p.attributes.get("gen_ai.request.model") == model
    }


def test_a_call_records_duration_and_token_usage(points: None) -> None:
    ChatClient(ScriptedChatModel([_response()])).prompt("q").options(
        ChatOptions(model="m-call")
    ).call().content()
    durations = [
        p for p in _histogram(obs.OPERATION_DURATION) if p.attributes["gen_ai.request.model"] == "m-call"
    ]  # type: ignore[index]
    assert len(durations) == 1 and durations[0].count == 1 and durations[0].sum >= 0
    attrs = dict(durations[0].attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.response.model"] == "scripted-1"
    assert "error.type" not in attrs
    assert _by_tokens(_histogram(obs.TOKEN_USAGE), "m-call") == {"input": 7, "output": 3}


def test_a_stream_records_duration_and_token_usage_once_it_ended(points: None) -> None:
    client = ChatClient(ScriptedChatModel([_response("a b")]))
    assert "".join(client.prompt("q").options(ChatOptions(model="m-stream")).stream().content()) == "a b"
    durations = [
        p for p in _histogram(obs.OPERATION_DURATION) if p.attributes["gen_ai.request.model"] == "m-stream"
    ]  # type: ignore[index]
    assert [p.count for p in durations] == [1]
    assert _by_tokens(_histogram(obs.TOKEN_USAGE), "m-stream") == {"input": 7, "output": 3}


def test_a_failed_call_records_its_duration_with_the_error_type(points: None) -> None:
    client = ChatClient(ScriptedChatModel([RuntimeError("down")]))
    with pytest.raises(RuntimeError):
        client.prompt("q").options(ChatOptions(model="m-fail")).call().content()
    durations = [
        p for p in _histogram(obs.OPERATION_DURATION) if p.attributes["gen_ai.request.model"] == "m-fail"
    ]  # type: ignore[index]
    assert [dict(p.attributes or {})["error.type"] for p in durations] == ["RuntimeError"]
    assert _by_tokens(_histogram(obs.TOKEN_USAGE), "m-fail") == {}


def test_request_parameters_are_span_attributes(points: InMemorySpanExporter) -> None:
    options = ChatOptions(temperature=0.25, max_tokens=50, top_p=0.9, stop=["END"])
    ChatClient(ScriptedChatModel([_response()])).prompt("q").options(options).call().content()
    chat = next(s for s in points.get_finished_spans() if s.name.startswith("chat "))
    attrs = dict(chat.attributes or {})
    assert attrs["gen_ai.request.temperature"] == 0.25
    assert attrs["gen_ai.request.max_tokens"] == 50
    assert attrs["gen_ai.request.top_p"] == 0.9
    assert tuple(attrs["gen_ai.request.stop_sequences"]) == ("END",)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "address", "port"),
    [
        ("http://127.0.0.1:8123/v1", "127.0.0.1", 8123),
        ("https://api.openai.com/v1", "api.openai.com", 443),
        ("http://localhost/v1", "localhost", 80),
    ],
)
def test_server_address_and_port_come_from_the_sdk_clients_base_url(
    url: str, address: str, port: int
) -> None:
    from advisorchain.models.openai import OpenAIChatModel

    model = OpenAIChatModel("m", base_url=url, api_key="k")
    attrs = obs.model_span_attributes("m", "openai", None, obs.server_url_of(model))
    assert (attrs["server.address"], attrs["server.port"]) == (address, port)


def test_a_model_without_an_sdk_client_has_no_server_attributes() -> None:
    assert obs.server_url_of(ScriptedChatModel([])) is None
    assert "server.address" not in obs.model_span_attributes("m", None, None, None)


def test_spans_hold_no_prompt_answer_or_tool_text_by_default(
    points: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(obs.CAPTURE_CONTENT_ENV, raising=False)

    @tool
    def secret_lookup(code: str) -> str:
        """Looks a code up."""
        return "RESULT-TEXT-4711"

    model = ScriptedChatModel(
        [
            AssistantMessage(None, [ToolCall("c1", "secret_lookup", '{"code": "ARG-TEXT-42"}')]),
            "ANSWER-TEXT-99",
        ]
    )
    client = ChatClient(model, default_system="SYSTEM-TEXT-7")
    assert client.prompt("QUESTION-TEXT-13").tools(secret_lookup).call().content() == "ANSWER-TEXT-99"
    finished = points.get_finished_spans()
    assert {s.name for s in finished} >= {"chat scripted", "execute_tool secret_lookup"}
    values = [str(v) for s in finished for v in (s.attributes or {}).values()]
    values += [str(v) for s in finished for e in s.events for v in (e.attributes or {}).values()]
    for text in ("ARG-TEXT-42", "RESULT-TEXT-4711", "ANSWER-TEXT-99", "QUESTION-TEXT-13", "SYSTEM-TEXT-7"):
        assert not any(text in v for v in values), text


@pytest.mark.parametrize(
    ("value", "expected"), [("true", True), ("TRUE", True), ("false", False), ("", False)]
)
def test_content_capture_follows_the_genai_environment_variable(
    value: str, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(obs.CAPTURE_CONTENT_ENV, value)
    assert obs.content_capture_enabled() is expected


def test_set_content_capture_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(obs.CAPTURE_CONTENT_ENV, "true")
    try:
        obs.set_content_capture(False)
        assert obs.content_capture_enabled() is False
        obs.set_content_capture(None)
        assert obs.content_capture_enabled() is True
    finally:
        obs.set_content_capture(None)


def test_no_metrics_are_recorded_without_a_meter_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(obs, "metrics_enabled", lambda: False)
    monkeypatch.setattr(obs, "_histograms", lambda: calls.append("asked") or (None, None))
    obs.record_model_metrics({"gen_ai.request.model": "m"}, 0.1, _response())
    assert calls == []
