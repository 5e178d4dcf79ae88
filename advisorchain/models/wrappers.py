"""Chat models that wrap other chat models: ``RetryChatModel`` tries again after a transient
provider failure, ``FallbackChatModel`` moves on to the next model.

>>> model = FallbackChatModel(RetryChatModel(primary), backup)      # doctest: +SKIP

Both are ChatModels (call and stream) and never run tools. A stream is retried, or moves on,
only before its first chunk was delivered: once the caller has seen part of an answer, a failure
is raised as it is. Turn off the SDK's own retries (``max_retries=0``) when you wrap a provider
model in ``RetryChatModel``, or both will retry.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .._streams import close_stream
from ..errors import ModelConnectionError, ModelError
from ..model import ChatModel, ChatResponse, Prompt

__all__ = ["FallbackChatModel", "RetryChatModel"]

_log = logging.getLogger("advisorchain.models")

RETRIED_STATUS_CODES = frozenset({408, 409, 429})
"""HTTP statuses RetryChatModel retries, besides every status of 500 and above."""

RETRIED_ERROR_TYPES = frozenset({"timeout", "connection_error"})
"""``ModelError.error_type`` values of failures that never reached an answer (retried), for
ModelErrors made by hand rather than as ``ModelConnectionError``s."""


def is_retryable(error: ModelError) -> bool:
    """True for a failure worth trying again: status 408, 409, 429 or >= 500, a timeout, or a
    broken connection (a ``ModelConnectionError``)."""
    status = error.status_code
    if status is not None and (status in RETRIED_STATUS_CODES or status >= 500):
        return True
    return isinstance(error, ModelConnectionError) or error.error_type in RETRIED_ERROR_TYPES


def _check_model(model: object, wrapper: str) -> ChatModel:
    if not (callable(getattr(model, "call", None)) and callable(getattr(model, "stream", None))):
        raise TypeError(f"{wrapper} wraps chat models (objects with call and stream), got {model!r}")
    return model  # type: ignore[return-value]


def _chain(errors: Sequence[ModelError]) -> ModelError:
    """The last error, each one chained to the one before it (``__cause__``). One error object
    raised more than once (a test double's) is chained once, so the chain has no cycle."""
    unique = list({id(e): e for e in reversed(errors)}.values())[::-1]
    for earlier, later in itertools.pairwise(unique):
        later.__cause__ = earlier
    return errors[-1]


class FallbackChatModel:
    """Tries ``primary``, then each of ``fallbacks`` in turn, moving on after a ``ModelError``.

    When every model failed, the last ``ModelError`` is raised with the earlier ones chained
    (``__cause__``). A stream moves on only before its first chunk was delivered.
    """

    def __init__(self, primary: ChatModel, *fallbacks: ChatModel) -> None:
        self.models: tuple[ChatModel, ...] = tuple(
            _check_model(m, "FallbackChatModel") for m in (primary, *fallbacks)
        )

    @property
    def model_name(self) -> str | None:
        """The primary model's name (the one asked first)."""
        return getattr(self.models[0], "model_name", None)

    @property
    def provider(self) -> str | None:
        """The primary model's provider."""
        return getattr(self.models[0], "provider", None)

    def __repr__(self) -> str:
        return f"FallbackChatModel({', '.join(repr(m) for m in self.models)})"

    async def call(self, prompt: Prompt) -> ChatResponse:
        """The first answer one of the models gives."""
        errors: list[ModelError] = []
        for model in self.models:
            try:
                return await model.call(prompt)
            except ModelError as exc:
                errors.append(exc)
                _log.warning("%r failed (%s); trying the next model", model, exc)
        raise _chain(errors)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """The stream of the first model that delivers a chunk."""
        errors: list[ModelError] = []
        for model in self.models:
            failed = await _failed_before_first_chunk(model.stream(prompt))
            if isinstance(failed, ModelError):
                errors.append(failed)
                _log.warning("%r failed (%s); trying the next model", model, failed)
                continue
            try:
                async for chunk in failed:
                    yield chunk
            finally:
                await close_stream(failed)
            return
        raise _chain(errors)


class RetryChatModel:
    """Calls ``model`` again after a transient failure: ``ModelError``s with status 408, 409, 429 or
    >= 500, timeouts and broken connections.

    ``max_attempts`` counts every attempt (the first included). The wait before attempt *n* + 1 is
    ``initial_backoff * 2 ** (n - 1)`` seconds with jitter, at most ``max_backoff``; when the
    provider said how long to wait (``ModelError.retry_after``) that wait is used, also capped by
    ``max_backoff``. When attempts run out, the last ``ModelError`` is raised with the earlier ones
    chained. A stream is retried only before its first chunk was delivered.
    """

    def __init__(
        self,
        model: ChatModel,
        max_attempts: int = 3,
        *,
        initial_backoff: float = 0.5,
        max_backoff: float = 8.0,
    ) -> None:
        if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
            raise ValueError(
                f"max_attempts must be an int of at least 1 (all attempts), got {max_attempts!r}"
            )
        for name, value in (("initial_backoff", initial_backoff), ("max_backoff", max_backoff)):
            if not _is_seconds(value):
                raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
        self.model = _check_model(model, "RetryChatModel")
        self.max_attempts = max_attempts
        self.initial_backoff = float(initial_backoff)
        self.max_backoff = float(max_backoff)

    @property
    def model_name(self) -> str | None:
        """The wrapped model's name."""
        return getattr(self.model, "model_name", None)

    @property
    def provider(self) -> str | None:
        """The wrapped model's provider."""
        return getattr(self.model, "provider", None)

    def __repr__(self) -> str:
        return f"RetryChatModel({self.model!r}, max_attempts={self.max_attempts})"

    def backoff(self, attempt: int, error: ModelError) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based) before the next one."""
        if error.retry_after is not None:
            return min(max(error.retry_after, 0.0), self.max_backoff)
        ceiling = min(self.initial_backoff * 2 ** (attempt - 1), self.max_backoff)
        return random.uniform(ceiling / 2, ceiling)

    async def _after_failure(self, attempt: int, error: ModelError, errors: list[ModelError]) -> None:
        """Record ``error``; raise the chained errors when it is final, else wait for the next try."""
        errors.append(error)
        if attempt >= self.max_attempts or not is_retryable(error):
            raise _chain(errors)
        delay = self.backoff(attempt, error)
        _log.warning(
            "%r failed on attempt %d of %d (%s); retrying in %.2f s",
            self.model,
            attempt,
            self.max_attempts,
            error,
            delay,
        )
        await asyncio.sleep(delay)

    async def call(self, prompt: Prompt) -> ChatResponse:
        """The model's answer, retried after transient failures."""
        errors: list[ModelError] = []
        for attempt in range(1, self.max_attempts + 1):
            try:
                return await self.model.call(prompt)
            except ModelError as exc:
                await self._after_failure(attempt, exc, errors)
        raise _chain(errors)  # unreachable: the last attempt's failure is raised above

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """The model's stream, retried after a transient failure before its first chunk."""
        errors: list[ModelError] = []
        for attempt in range(1, self.max_attempts + 1):
            started = await _failed_before_first_chunk(self.model.stream(prompt))
            if isinstance(started, ModelError):
                await self._after_failure(attempt, started, errors)
                continue
            try:
                async for chunk in started:
                    yield chunk
            finally:
                await close_stream(started)
            return
        raise _chain(errors)  # unreachable, as in call()


def _is_seconds(value: Any) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )


async def _failed_before_first_chunk(
    source: AsyncIterator[ChatResponse],
) -> ModelError | AsyncIterator[ChatResponse]:
    """The ModelError ``source`` raised before its first chunk (``source`` closed), or an iterator
    of all its chunks, the first one included, that closes ``source`` when done."""
    try:
        first = await anext(source)
    except StopAsyncIteration:
        await close_stream(source)
        return _chunks(None, source)
    except ModelError as exc:
        await close_stream(source)
        return exc
    except BaseException:
        await close_stream(source)
        raise
    return _chunks(first, source)


async def _chunks(
    first: ChatResponse | None, source: AsyncIterator[ChatResponse]
) -> AsyncIterator[ChatResponse]:
    try:
        if first is None:
            return
        yield first
        async for chunk in source:
            yield chunk
    finally:
        await close_stream(source)
