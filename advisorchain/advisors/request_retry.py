"""RequestRetryAdvisor: retries a failed call with a changed request.

The retry ``RetryChatModel`` does resends the same request; this recursive advisor lets the request
change between attempts — a smaller ``max_tokens`` after a length error, a trimmed history after a
context overflow, another model option after a refusal. Each attempt runs ``chain.copy(self)``:
the advisors after it, then the model.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import ClassVar, TypeAlias

from .. import observability as obs
from .._checks import check_int
from .._streams import closing
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..chain.vocabulary import REQUEST_RETRY_ORDER, check_order
from ..errors import ChainConfigurationError, ModelError
from ..model import ChatClientRequest, ChatClientResponse

__all__ = ["RequestModifier", "RequestRetryAdvisor", "RetryOn"]

RequestModifier: TypeAlias = Callable[
    [ChatClientRequest, BaseException, int],
    ChatClientRequest | Awaitable[ChatClientRequest | None] | None,
]
"""``modify(request, error, attempt)``: the request to try next (built from ``request``, the one
the advisor received), or None to give up and raise ``error``. Sync or async."""

RetryOn: TypeAlias = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]
"""Which errors are retried: an exception class, a tuple of them, or a predicate."""


class RequestRetryAdvisor:
    """Retries the rest of the chain with a request changed by ``modify`` after an error.

    When the sub-chain (``chain.copy(self)``) raises an error that ``retry_on`` matches and fewer
    than ``max_attempts`` attempts were made, it calls ``modify(request, error, attempt)`` (sync or
    async): ``request`` is the request the advisor received (every retry is built from it),
    ``attempt`` the number of the attempt that just failed (1 for the first). A returned request is
    sent to the sub-chain again; ``None`` re-raises the error. When attempts run out the last error
    is raised, the earlier ones chained as its ``__context__``; errors ``retry_on`` does not match
    pass through untouched, and so do cancellation and other ``BaseException``s that are not
    ``Exception``s. On the stream path an attempt is retried only while none of its chunks has
    reached the caller. Each retry is a span event ``retry`` on the advisor's span, with attribute
    ``error.type`` (the error class's qualified name).

    At its default order it sits inside the tool loop, so each model call is retried on its own:

    >>> def smaller(request, error, attempt):
    ...     options = (request.prompt.options or ChatOptions()).copy(max_tokens=256)
    ...     return request.copy(prompt=request.prompt.copy(options=options))
    >>> ChatClient(model, default_advisors=[RequestRetryAdvisor(smaller, max_attempts=2)])
    """

    DEFAULT_ORDER: ClassVar[int] = REQUEST_RETRY_ORDER
    """Late (inner): inside the tool loop, so each model call is retried on its own."""

    def __init__(
        self,
        modify: RequestModifier,
        *,
        retry_on: RetryOn = ModelError,
        max_attempts: int = 3,
        order: int = DEFAULT_ORDER,
    ) -> None:
        if not callable(modify):
            raise ChainConfigurationError(
                f"modify must be a function (request, error, attempt) -> request or None, got {modify!r}"
            )
        self.modify = modify
        self._matches = _matcher(retry_on)
        self.retry_on = retry_on
        self.max_attempts = check_int(max_attempts, "max_attempts", minimum=1)
        self.order = check_order(order, inside=True)

    @property
    def name(self) -> str:
        """``"Request Retry Advisor"``."""
        return "Request Retry Advisor"

    async def advise_call(self, request: ChatClientRequest, chain: CallAdvisorChain) -> ChatClientResponse:
        """Call the rest of the chain; on a matching error, call it again with ``modify``'s request."""
        return await self._call(chain.copy(self), request, request, 1)

    async def _call(
        self, rest: CallAdvisorChain, received: ChatClientRequest, current: ChatClientRequest, attempt: int
    ) -> ChatClientResponse:
        # The next attempt runs inside the ``except`` block, so that its error (if any) has this
        # one as its __context__.
        try:
            return await rest.next_call(current)
        except Exception as error:
            retry = await self._next_request(received, error, attempt)
            if retry is None:
                raise
            return await self._call(rest, received, retry, attempt + 1)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Stream the rest of the chain; an attempt that failed before any chunk of it went out is
        tried again with ``modify``'s request."""
        async with closing(self._stream(chain.copy(self), request, request, 1)) as stream:
            async for chunk in stream:
                yield chunk

    async def _stream(
        self, rest: StreamAdvisorChain, received: ChatClientRequest, current: ChatClientRequest, attempt: int
    ) -> AsyncIterator[ChatClientResponse]:
        delivered = False
        try:
            async with closing(rest.next_stream(current)) as stream:
                async for chunk in stream:
                    delivered = True
                    yield chunk
        except Exception as error:
            retry = None if delivered else await self._next_request(received, error, attempt)
            if retry is None:
                raise
            async with closing(self._stream(rest, received, retry, attempt + 1)) as stream:
                async for chunk in stream:
                    yield chunk

    async def _next_request(
        self, received: ChatClientRequest, error: Exception, attempt: int
    ) -> ChatClientRequest | None:
        """The request of the next attempt, or None when ``error`` is to be raised: it does not
        match, the attempts ran out, or ``modify`` gave up."""
        if attempt >= self.max_attempts or not self._matches(error):
            return None
        retry = self.modify(received, error, attempt)
        if inspect.isawaitable(retry):
            retry = await retry
        if retry is None:
            return None
        if not isinstance(retry, ChatClientRequest):
            raise ChainConfigurationError(
                f"advisor {self.name!r}: modify returned {retry!r}; return a ChatClientRequest "
                "(e.g. request.copy(prompt=...)) or None to give up"
            )
        span = obs.current_span()
        if span is not None:
            span.add_event("retry", {"error.type": type(error).__qualname__})
        return retry

    def __repr__(self) -> str:
        return (
            f"RequestRetryAdvisor({self.modify!r}, retry_on={self.retry_on!r}, "
            f"max_attempts={self.max_attempts}, order={self.order})"
        )


def _matcher(retry_on: object) -> Callable[[BaseException], bool]:
    """``retry_on`` as a predicate; ChainConfigurationError when it is neither exception classes
    nor a function."""
    if isinstance(retry_on, type) and issubclass(retry_on, BaseException):
        kind: type[BaseException] = retry_on
        return lambda error: isinstance(error, kind)
    if isinstance(retry_on, tuple):
        if not retry_on or not all(isinstance(t, type) and issubclass(t, BaseException) for t in retry_on):
            raise ChainConfigurationError(f"retry_on must be exception classes, got the tuple {retry_on!r}")
        kinds: tuple[type[BaseException], ...] = retry_on
        return lambda error: isinstance(error, kinds)
    if callable(retry_on) and not isinstance(retry_on, type):
        predicate: Callable[[BaseException], bool] = retry_on
        return lambda error: bool(predicate(error))
    raise ChainConfigurationError(
        f"retry_on must be an exception class, a tuple of them or a function (error) -> bool, "
        f"got {retry_on!r}"
    )
