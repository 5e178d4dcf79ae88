"""RetryChatModel and FallbackChatModel: on scripted models for the rules, and through the real
OpenAI adapter against the scripted server for retry-after and broken connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import AssistantMessage, ChatClient, ModelError, Prompt, UserMessage
from advisorchain.model import ChatModel, ChatResponse, Generation
from advisorchain.models import FallbackChatModel, RetryChatModel
from advisorchain.models.openai import OpenAIChatModel
from advisorchain.testing import FunctionChatModel, ScriptedChatModel
from tests.support.openai_server import Reset, ScriptedServer, json_reply, sse_reply
from tests.support.payloads import openai_completion, openai_text_events


def _prompt() -> Prompt:
    return Prompt([UserMessage("hi")])


def _fast(model: ChatModel, attempts: int = 3) -> RetryChatModel:
    return RetryChatModel(model, attempts, initial_backoff=0.001, max_backoff=0.01)


async def _texts(model: ChatModel) -> list[str | None]:
    return [chunk.text async for chunk in model.stream(_prompt())]


def _chunk(text: str) -> Generation:
    return Generation(AssistantMessage(text))


def _error(status: int | None = None, error_type: str | None = None, name: str = "e") -> ModelError:
    return ModelError(name, status_code=status, error_type=error_type)


# -- RetryChatModel ----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503, 529])
async def test_retry_retries_transient_statuses(status: int) -> None:
    model = ScriptedChatModel([_error(status), "ok"])

    response = await _fast(model).call(_prompt())

    assert response.text == "ok"
    assert len(model.prompts) == 2


@pytest.mark.parametrize("error_type", ["timeout", "connection_error"])
async def test_retry_retries_timeouts_and_broken_connections(error_type: str) -> None:
    model = ScriptedChatModel([_error(error_type=error_type), "ok"])

    assert (await _fast(model).call(_prompt())).text == "ok"


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_retry_does_not_retry_client_errors(status: int) -> None:
    failure = _error(status)
    model = ScriptedChatModel([failure, "never"])

    with pytest.raises(ModelError) as caught:
        await _fast(model).call(_prompt())

    assert caught.value is failure
    assert len(model.prompts) == 1


async def test_retry_raises_the_last_error_with_the_earlier_ones_chained() -> None:
    first, second, third = _error(500, name="one"), _error(502, name="two"), _error(503, name="three")
    model = ScriptedChatModel([first, second, third, "never"])

    with pytest.raises(ModelError) as caught:
        await _fast(model).call(_prompt())

    assert caught.value is third
    assert (third.__cause__, second.__cause__) == (second, first)
    assert len(model.prompts) == 3


async def test_max_attempts_counts_every_attempt() -> None:
    model = ScriptedChatModel([_error(500)] * 5)

    with pytest.raises(ModelError):
        await _fast(model, attempts=1).call(_prompt())

    assert len(model.prompts) == 1


async def test_retry_retries_a_stream_that_failed_before_its_first_chunk() -> None:
    model = ScriptedChatModel([_error(503), "fine answer"])

    assert "".join(t or "" for t in await _texts(_fast(model))) == "fine answer"


async def test_retry_never_retries_a_stream_after_its_first_chunk() -> None:
    calls = 0

    async def stream(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        nonlocal calls
        calls += 1
        yield ChatResponse([_chunk("par")])
        raise _error(503)

    model = FunctionChatModel(lambda p: "unused", stream_fn=stream)
    seen: list[str | None] = []

    with pytest.raises(ModelError):
        async for chunk in _fast(model).stream(_prompt()):
            seen.append(chunk.text)

    assert (seen, calls) == (["par"], 1)


def test_retry_after_is_honoured_and_capped_by_max_backoff() -> None:
    retry = RetryChatModel(ScriptedChatModel([]), initial_backoff=0.5, max_backoff=4.0)

    assert retry.backoff(1, ModelError("x", status_code=429, retry_after=1.5)) == 1.5
    assert retry.backoff(1, ModelError("x", status_code=429, retry_after=120)) == 4.0


@given(attempt=st.integers(1, 30), initial=st.floats(0, 10), ceiling=st.floats(0, 60))
def test_backoff_grows_but_never_exceeds_max_backoff(attempt: int, initial: float, ceiling: float) -> None:
    retry = RetryChatModel(ScriptedChatModel([]), initial_backoff=initial, max_backoff=ceiling)

    delay = retry.backoff(attempt, ModelError("x", status_code=500))

    assert 0 <= delay <= min(ceiling, initial * 2 ** (attempt - 1))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_attempts": 0}, "max_attempts must be an int of at least 1"),
        ({"max_attempts": True}, "max_attempts must be an int"),
        ({"initial_backoff": -1}, "initial_backoff must be a finite number"),
        ({"max_backoff": float("nan")}, "max_backoff must be a finite number"),
    ],
)
def test_retry_refuses_bad_settings_naming_them(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryChatModel(ScriptedChatModel([]), **kwargs)  # type: ignore[arg-type]


def test_wrappers_refuse_what_is_not_a_chat_model() -> None:
    with pytest.raises(TypeError, match="wraps chat models"):
        RetryChatModel("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="wraps chat models"):
        FallbackChatModel(ScriptedChatModel([]), "backup")  # type: ignore[arg-type]


# -- FallbackChatModel -------------------------------------------------------------------------------


async def test_fallback_moves_to_the_next_model_on_a_model_error() -> None:
    primary, backup = ScriptedChatModel([_error(400)]), ScriptedChatModel(["from backup"])

    response = await FallbackChatModel(primary, backup).call(_prompt())

    assert response.text == "from backup"
    assert (len(primary.prompts), len(backup.prompts)) == (1, 1)


async def test_fallback_raises_the_last_error_with_the_earlier_ones_chained_when_all_fail() -> None:
    first, last = _error(500, name="first"), _error(401, name="last")

    with pytest.raises(ModelError) as caught:
        await FallbackChatModel(ScriptedChatModel([first]), ScriptedChatModel([last])).call(_prompt())

    assert caught.value is last
    assert last.__cause__ is first


async def test_fallback_does_not_swallow_other_errors() -> None:
    primary = FunctionChatModel(lambda p: 1 / 0)  # type: ignore[arg-type,return-value]
    backup = ScriptedChatModel(["never"])

    with pytest.raises(ZeroDivisionError):
        await FallbackChatModel(primary, backup).call(_prompt())

    assert backup.prompts == []


async def test_fallback_stream_moves_on_before_the_first_chunk() -> None:
    model = FallbackChatModel(ScriptedChatModel([_error(503)]), ScriptedChatModel(["backup streams"]))

    assert "".join(t or "" for t in await _texts(model)) == "backup streams"


async def test_fallback_stream_never_moves_on_after_the_first_chunk() -> None:
    async def stream(prompt: Prompt) -> AsyncIterator[ChatResponse]:
        yield ChatResponse([_chunk("half")])
        raise _error(503)

    backup = ScriptedChatModel(["never"])
    model = FallbackChatModel(FunctionChatModel(lambda p: "x", stream_fn=stream), backup)

    with pytest.raises(ModelError):
        await _texts(model)

    assert backup.prompts == []


async def test_wrappers_are_chat_models_a_client_can_use() -> None:
    model = FallbackChatModel(
        _fast(ScriptedChatModel([_error(500), _error(500), _error(500)])), ScriptedChatModel(["ok"])
    )

    assert await ChatClient(model).prompt("hi").acall().content() == "ok"
    assert isinstance(model, ChatModel)
    assert model.model_name == "scripted"


# -- through the real adapter ------------------------------------------------------------------------


def _adapter(server: ScriptedServer) -> OpenAIChatModel:
    return OpenAIChatModel(
        "fault-model", base_url=server.url + "/v1", api_key="k", max_retries=0, timeout=60
    )


class _RecordingRetry(RetryChatModel):
    """Records each wait it chose."""

    waits: list[float]

    def backoff(self, attempt: int, error: ModelError) -> float:
        delay = super().backoff(attempt, error)
        self.__dict__.setdefault("waits", []).append(delay)
        return delay


async def test_retry_waits_as_a_429_retry_after_asks_then_succeeds(server: ScriptedServer) -> None:
    server.queue(json_reply(429, {"error": {"message": "busy"}}, headers={"retry-after": "0.05"}))
    server.queue(json_reply(200, openai_completion("after the wait")))
    retry = _RecordingRetry(_adapter(server), initial_backoff=5.0, max_backoff=5.0)

    response = await retry.call(_prompt())

    assert response.text == "after the wait"
    assert retry.waits == [0.05]
    assert len(server.requests) == 2


async def test_retry_retries_a_5xx_without_retry_after_on_a_stream(server: ScriptedServer) -> None:
    server.queue(json_reply(502, {"error": {"message": "bad gateway"}}))
    server.queue(sse_reply(openai_text_events("streamed")))

    assert "".join(t or "" for t in await _texts(_fast(_adapter(server)))) == "streamed"
    assert len(server.requests) == 2


async def test_retry_retries_a_connection_reset(server: ScriptedServer) -> None:
    server.queue([Reset()], json_reply(200, openai_completion("second try")))

    assert (await _fast(_adapter(server)).call(_prompt())).text == "second try"


async def test_retry_gives_up_after_max_attempts_with_the_last_error(server: ScriptedServer) -> None:
    for _ in range(3):
        server.queue(json_reply(500, {"error": {"message": "down"}}))

    with pytest.raises(ModelError, match="down") as caught:
        await _fast(_adapter(server), attempts=3).call(_prompt())

    assert caught.value.status_code == 500
    assert len(server.requests) == 3


async def test_fallback_from_a_dead_adapter_to_a_live_one(server: ScriptedServer) -> None:
    server.queue([Reset()], json_reply(200, openai_completion("live")))

    response = await FallbackChatModel(_adapter(server), _adapter(server)).call(_prompt())

    assert response.text == "live"


async def test_retry_backoff_sleeps_can_be_cancelled() -> None:
    model = RetryChatModel(ScriptedChatModel([_error(500), "late"]), initial_backoff=30, max_backoff=30)
    task = asyncio.ensure_future(model.call(_prompt()))
    await asyncio.sleep(0.01)

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
