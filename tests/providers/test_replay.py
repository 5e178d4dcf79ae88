"""advisorchain.replay: cassettes served in order to the real SDK clients, requests recorded,
surprises answered with a clear error, streams served event by event."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from advisorchain.errors import ModelError
from advisorchain.messages import UserMessage
from advisorchain.model import Prompt
from advisorchain.models.openai import OpenAIChatModel
from advisorchain.replay import (
    Cassette,
    RecordedRequest,
    cassette_transport,
    load_cassette,
    replay_openai_client,
)
from tests.providers.cassette_support import REPO_ROOT

SSE = (
    'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    'data: {"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"stop"}]}\n\n'
    "data: [DONE]\n\n"
)


def _json_interaction(text: str, path: str = "/v1/chat/completions", status: int = 200) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    body = {"id": "c1", "model": "m", "choices": [{"index": 0, "message": message}]}
    return {
        "request": {"method": "POST", "path": path, "body": {}},
        "response": {"status": status, "content_type": "application/json", "json": body},
    }


def _document(*interactions: dict[str, Any]) -> dict[str, Any]:
    return {"provider": "openai-chat", "host": "api.example.test", "interactions": list(interactions)}


def _model(cassette: Cassette, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel("m", client=replay_openai_client(cassette, **kwargs))


PROMPT = Prompt([UserMessage("hello")])


async def test_interactions_are_served_in_order() -> None:
    cassette = load_cassette(_document(_json_interaction("one"), _json_interaction("two")))
    model = _model(cassette)

    answers = [(await model.call(PROMPT)).text, (await model.call(PROMPT)).text]

    assert answers == ["one", "two"]
    cassette.assert_exhausted()


async def test_received_requests_are_recorded_with_method_path_and_json_body() -> None:
    cassette = load_cassette(_document(_json_interaction("one")))

    await _model(cassette).call(PROMPT)

    [request] = cassette.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.body["messages"] == [{"role": "user", "content": "hello"}]


async def test_an_extra_request_fails_clearly_and_is_not_retried() -> None:
    cassette = load_cassette(_document(_json_interaction("one")))
    model = _model(cassette)
    await model.call(PROMPT)

    with pytest.raises(ModelError) as caught:
        await model.call(PROMPT)

    assert caught.value.status_code == 418
    assert caught.value.error_type == "cassette_mismatch"
    assert "unexpected request #2 POST /v1/chat/completions" in str(caught.value)
    assert len(cassette.requests) == 2


async def test_a_request_to_another_path_fails_clearly() -> None:
    cassette = load_cassette(_document(_json_interaction("one", path="/v1/other")))

    with pytest.raises(ModelError, match="the cassette recorded POST /v1/other"):
        await OpenAIChatModel("m", client=replay_openai_client(cassette)).call(PROMPT)


async def test_assert_exhausted_names_unused_interactions() -> None:
    cassette = load_cassette(_document(_json_interaction("one"), _json_interaction("two")))

    await _model(cassette).call(PROMPT)

    with pytest.raises(AssertionError, match="1 of 2 recorded interactions were never requested"):
        cassette.assert_exhausted()


async def test_streamed_body_is_served_one_event_at_a_time_and_joins_back_exactly() -> None:
    interaction = {
        "request": {"method": "POST", "path": "/x", "body": {}},
        "response": {"status": 200, "content_type": "text/event-stream", "sse": SSE},
    }
    transport = cassette_transport(_document(interaction))

    async with (
        httpx2.AsyncClient(transport=transport) as client,
        client.stream("POST", "https://api.example.test/x") as response,
    ):
        pieces = [piece async for piece in response.aiter_raw()]

    assert len(pieces) == 3
    assert b"".join(pieces).decode() == SSE


async def test_extra_headers_are_added_to_every_response() -> None:
    transport = cassette_transport(_document(_json_interaction("one")), headers={"retry-after-ms": "1"})

    async with httpx2.AsyncClient(transport=transport) as client:
        response = await client.post("https://api.example.test/v1/chat/completions", json={})

    assert response.headers["retry-after-ms"] == "1"
    assert response.headers["content-type"] == "application/json"


async def test_closing_a_stream_early_closes_the_http_response() -> None:
    interaction = {
        "request": {"method": "POST", "path": "/v1/chat/completions", "body": {}},
        "response": {"status": 200, "content_type": "text/event-stream", "sse": SSE},
    }
    cassette = load_cassette(_document(interaction))
    stream = _model(cassette).stream(PROMPT)

    first = await anext(stream)
    assert cassette.open_streams == 1
    await stream.aclose()  # type: ignore[attr-defined]

    assert first.text == "Hi"
    assert cassette.open_streams == 0


def test_load_cassette_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(_document(_json_interaction("one"))))

    cassette = load_cassette(path)

    assert (cassette.name, cassette.host, cassette.remaining) == ("one.json", "api.example.test", 1)
    assert cassette.recorded_request(0) == RecordedRequest("POST", "/v1/chat/completions", {})


def test_load_cassette_passes_a_cassette_through() -> None:
    cassette = load_cassette(_document(_json_interaction("one")))

    assert load_cassette(cassette) is cassette


def test_missing_cassette_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no cassette at .*absent\.json"):
        load_cassette(tmp_path / "absent.json")


def test_cassette_that_is_not_json_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")

    with pytest.raises(ValueError, match=r"'.*bad\.json' is not valid JSON"):
        load_cassette(path)


_NO_BODY = {"request": {"method": "POST", "path": "/"}, "response": {"status": 200, "content_type": "x"}}


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"interactions": "nope"}, "must be a JSON object with an 'interactions' list"),
        ({"interactions": []}, "has no interactions"),
        (
            {"interactions": [{"request": {"method": "POST"}, "response": {}}]},
            "interaction 0: 'request' needs",
        ),
        (
            {"interactions": [{"request": {"method": "POST", "path": "/"}, "response": {"status": 200}}]},
            "interaction 0: 'response' needs 'status' and 'content_type'",
        ),
        (
            {"interactions": [_NO_BODY]},
            "needs a 'json' or an 'sse' body",
        ),
    ],
)
def test_malformed_cassette_is_a_value_error_naming_the_problem(
    document: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        load_cassette(document)


def test_importing_advisorchain_and_replay_imports_no_sdk() -> None:
    code = (
        "import sys, advisorchain, advisorchain.replay, advisorchain.testing;"
        "print(sorted(m for m in ('openai', 'anthropic', 'httpx2') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True, timeout=600
    )

    assert result.stdout.strip() == "[]"
