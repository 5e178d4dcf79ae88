"""The accumulator of one run: its totals, and the one place where ``UsageLimits`` are decided.

A ``RunMeter`` lives with the client request: the ChatClient makes one per request and gives it
to the request's chain, which hands it on to every chain made from it (``chain.copy``, the tool
loop's rounds, a compaction summary by the chain's own model); call and stream share it. The model
link asks it before each call (``before_request``: the limits, the prompt estimate, ``max_tokens``
lowered to the output budget) and hands it each response (``priced``: the client's ``prices``;
``after_response``: the totals and the checks); the tool loop asks it before a round's tool calls
run (``before_tool_calls``) and tells it how many ran. Nothing else counts: judges, summarizers and
sub-agents with clients of their own have meters of their own.

Without limits a model call costs the meter one counter and one ``Usage`` sum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Literal

from ._cache_points import CACHE_POINT, without_cache_point
from ._tokens import estimate_tokens
from .errors import ModelError, UsageLimitExceeded
from .messages import AssistantMessage, Message
from .model import (
    ChatClientMessageAggregator,
    ChatOptions,
    ChatResponse,
    ChatResponseMetadata,
    FinishReason,
    Prompt,
)
from .usage import Prices, Rates, RunUsage, Usage, UsageLimits, bundled_rates, tidy_usd

__all__ = ["RunMeter", "StreamTally", "limit_ending", "requested_model"]

_LENGTH = frozenset({FinishReason.LENGTH, "max_tokens", "max_output_tokens"})
When = Literal["before_request", "after_response", "before_tool_calls"]


class RunMeter:
    """One run's totals and limit checks (see the module docstring)."""

    __slots__ = (
        "_completion",
        "_cost",
        "_default_of",
        "_last",
        "_last_chunks",
        "_pending",
        "_previous",
        "_previous_tokens",
        "_prompt",
        "_rates",
        "_rates_for",
        "_read",
        "_token_limits",
        "_written",
        "changes",
        "limits",
        "parent",
        "prices",
        "reported",
        "requests",
        "tool_calls",
    )

    def __init__(
        self,
        limits: UsageLimits | None = None,
        prices: Prices | None = None,
        *,
        parent: RunMeter | None = None,
    ) -> None:
        self.limits = limits
        self.prices = prices
        self.parent = parent
        """The meter of the run this one is part of (an agent called as a tool): every count is
        added to its totals too, and its limits are checked as well as this meter's own."""
        self._pending = 0  # model calls sent and not answered yet (their cost is unknown)
        self.requests = 0
        self.tool_calls = 0
        self.changes = 0
        """How many times the totals changed (a stream's end compares it with its last chunk's)."""
        # The usage so far, as plain counters (a Usage is built when asked for).
        self._prompt = self._completion = self._read = self._written = 0
        self._cost: Decimal | None = Decimal(0)
        self.reported = False
        """True once a response reported usage (the run's usage is then what the caller gets)."""
        self._last: ChatResponse | None = None
        self._last_chunks: list[ChatResponse] | None = None
        self._previous: Sequence[Message] | None = None
        self._previous_tokens: int | None = None
        self._rates: Rates | None = None
        self._rates_for: tuple[str | None, str | None] | None = None
        self._default_of: tuple[object, int | None] | None = None
        self._token_limits = () if limits is None else limits.token_limits

    @property
    def usage(self) -> Usage:
        """The usage so far (its cost None once a response was unpriced or reported no usage, or
        while a call that was sent has no answer)."""
        cost = None if self._pending else self._cost
        return Usage(
            self._prompt,
            self._completion,
            self._read,
            self._written,
            None if cost is None else tidy_usd(cost),
        )

    def run_usage(self) -> RunUsage:
        """The totals so far."""
        return RunUsage(self.requests, self.tool_calls, self.usage)

    # -- the model link ----------------------------------------------------------------------------

    def before_request(self, prompt: Prompt, model: object) -> tuple[Prompt, str | None]:
        """Count a model call about to be sent, after checking the limits: the prompt to send
        (``max_tokens`` lowered to the output budget) and the limit that lowered it (or None).
        Raises ``UsageLimitExceeded`` (``before_request``) when the call must not be sent."""
        limits = self.limits
        lowered: str | None = None
        if limits is not None:
            self._check_before(limits)
            estimate = self._check_estimate(limits, prompt)
            prompt, lowered = self._lowered(limits, prompt, model, estimate)
        if self.parent is not None:  # the calling run's limits hold too (and it counts the call)
            prompt, _ = self.parent.before_nested_request(prompt, model)
        self.changes += 1
        self._pending += 1
        self.requests += 1
        if limits is not None:
            self._previous, self._previous_tokens = prompt.instructions, None
        return prompt, lowered

    def before_nested_request(self, prompt: Prompt, model: object) -> tuple[Prompt, str | None]:
        """``before_request`` for a call of a nested run: checked against this run's limits and
        counted in its totals, without changing what this run's own next estimate starts from."""
        previous = self._previous, self._previous_tokens
        try:
            return self.before_request(prompt, model)
        finally:
            self._previous, self._previous_tokens = previous

    def unanswered(self, error: BaseException | None = None) -> None:
        """A call counted by ``before_request`` got no response: refused by the provider (an HTTP
        error status: nothing billed), or never answered (cancelled, timed out, cut off, or
        answered something that is not a response) — then the run's cost is unknown from now on."""
        self.changes += 1
        self._pending -= 1
        if not (isinstance(error, ModelError) and error.status_code is not None):
            self._cost = None
        if self.parent is not None:
            self.parent.unanswered(error)

    def priced(self, response: ChatResponse, prompt: Prompt, model: object) -> ChatResponse:
        """``response`` priced by the client's ``prices`` (as it is when there are none, or they
        leave it to the bundled price)."""
        prices = self.prices
        meta = response.metadata
        usage = meta.usage
        if prices is None or usage is None:
            return response
        requested = requested_model(prompt, model)
        repriced = prices.reprice(usage, meta.model or requested or "", requested, meta.provider)
        return response if repriced is None else response.with_usage(repriced)

    def after_response(
        self, response: ChatResponse, prompt: Prompt, model: object, lowered: str | None
    ) -> None:
        """Add a response to the totals; with limits, raise ``UsageLimitExceeded``
        (``after_response``) when a total is over its limit, when the answer was cut short by a
        lowered ``max_tokens``, or when a limit could not be checked (no usage, no price)."""
        self._add(response.metadata.usage)
        if self.limits is not None:
            self._last, self._last_chunks = response, None
            self._check_after(response.metadata, response.finish_reason, prompt, model, lowered)

    def stream(self, prompt: Prompt, model: object, lowered: str | None) -> StreamTally:
        """What the meter keeps of one streamed answer (its ``end`` adds it to the totals)."""
        return StreamTally(self, prompt, model, lowered)

    @property
    def last_response(self) -> ChatResponse | None:
        """The run's last complete response (a stream's chunks are joined when first asked for)."""
        chunks = self._last_chunks
        if chunks is not None:
            self._last, self._last_chunks = ChatClientMessageAggregator.aggregate(chunks), None
        return self._last

    def _add(self, usage: Usage | None) -> None:
        self.changes += 1
        self._pending -= 1
        if self.parent is not None:
            self.parent._add_nested(usage)
        if usage is None:
            self._cost = None
            return
        self._prompt += usage.prompt_tokens
        self._completion += usage.completion_tokens
        self._read += usage.cache_read_tokens
        self._written += usage.cache_write_tokens
        if self._cost is not None:
            self._cost = None if usage.cost is None else self._cost + usage.cost
        self.reported = True

    def _add_nested(self, usage: Usage | None) -> None:
        """A nested run's response: added to this run's totals, then checked against its limits."""
        self._add(usage)
        if self.limits is not None and usage is not None:
            self._check_over(self.limits)

    def _check_after(
        self,
        meta: ChatResponseMetadata,
        finish: str | None,
        prompt: Prompt,
        model: object,
        lowered: str | None,
    ) -> None:
        limits = self.limits
        assert limits is not None
        usage = meta.usage
        if usage is None:
            self._previous_tokens = None
            error = self._unchecked(limits, meta, prompt, model)
            if error is not None:
                raise error
            return
        self._previous_tokens = usage.prompt_tokens
        if limits.cost_limit is not None:
            source = (meta.model, meta.provider)
            if meta.model is None or source != self._rates_for:  # the same model: the same price
                self._rates, self._rates_for = self._estimate_rates(meta, prompt, model), source
            if usage.cost is None and limits.on_unpriced == "raise":
                name = meta.model or requested_model(prompt, model)
                raise self._exceeded(
                    "cost_limit",
                    limits.cost_limit,
                    "after_response",
                    f"cannot be enforced: model {name!r} has no price (give ChatClient(prices=...) one, "
                    "or UsageLimits(on_unpriced='ignore') to go on without it)",
                )
        self._check_over(limits)
        if lowered is not None and finish in _LENGTH:
            limit = getattr(limits, lowered)
            why = "cut the answer short (max_tokens was lowered to what was left)"
            raise self._exceeded(lowered, limit, "after_response", why)

    # -- the tool loop -----------------------------------------------------------------------------

    def before_tool_calls(self, count: int) -> None:
        """Raise ``UsageLimitExceeded`` (``before_tool_calls``) when ``count`` more tool calls would
        pass ``tool_calls_limit`` (then none of them runs)."""
        if self.parent is not None:
            self.parent.before_tool_calls(count)
        limits = self.limits
        if limits is None or limits.tool_calls_limit is None or count <= 0:
            return
        if self.tool_calls + count > limits.tool_calls_limit:
            raise self._exceeded(
                "tool_calls_limit",
                limits.tool_calls_limit,
                "before_tool_calls",
                f"would be passed by the {count} tool call{'s' if count != 1 else ''} of this round "
                "(none of them ran)",
            )

    def ran_tool_calls(self, count: int) -> None:
        """``count`` tool calls ran."""
        self.tool_calls += count
        self.changes += 1
        if self.parent is not None:
            self.parent.ran_tool_calls(count)

    # -- the checks --------------------------------------------------------------------------------

    def _check_before(self, limits: UsageLimits) -> None:
        """Refuse a call when the requests are used up, or a total already reached its limit."""
        if limits.request_limit is not None and self.requests >= limits.request_limit:
            raise self._exceeded(
                "request_limit", limits.request_limit, "before_request", "was reached: no model call is left"
            )
        reached = self._token_limit_passed(or_equal=True)
        if reached is not None:
            name, limit, used = reached
            raise self._exceeded(name, limit, "before_request", f"was reached ({used:,} tokens used)")
        cost = self._cost
        if limits.cost_limit is not None and cost is not None and cost >= limits.cost_limit:
            why = f"was reached (${tidy_usd(cost):f} spent)"
            raise self._exceeded("cost_limit", limits.cost_limit, "before_request", why)

    def _check_estimate(self, limits: UsageLimits, prompt: Prompt) -> int | None:
        """The estimated tokens of the next prompt, when a limit needs them; raises when the totals
        plus the estimate would pass the input, total or cost limit."""
        input_limit, total_limit, cost_limit = (
            limits.input_tokens_limit,
            limits.total_tokens_limit,
            limits.cost_limit,
        )
        if input_limit is None and total_limit is None and cost_limit is None:
            return None
        estimate = self._estimate(prompt)
        why = f"would be passed by the next prompt (about {estimate:,} tokens)"
        if input_limit is not None and self._prompt + estimate > input_limit:
            raise self._exceeded("input_tokens_limit", input_limit, "before_request", why)
        if total_limit is not None and self._prompt + self._completion + estimate > total_limit:
            raise self._exceeded("total_tokens_limit", total_limit, "before_request", why)
        cost, rates = self._cost, self._rates
        if cost_limit is not None and cost is not None and rates is not None:
            estimated = self._estimated_cost(rates, prompt, estimate)
            if cost + estimated > cost_limit:
                shown = f"about {estimate:,} tokens, ${tidy_usd(estimated):f}"
                why = f"would be passed by the next prompt ({shown})"
                raise self._exceeded("cost_limit", cost_limit, "before_request", why)
        return estimate

    def _estimate(self, prompt: Prompt) -> int:
        """The next prompt's tokens: the previous call's reported prompt tokens plus the messages
        added since (4 characters a token), or — for the first call, or after one that reported
        none — all its messages estimated."""
        messages = prompt.instructions
        previous, tokens = self._previous, self._previous_tokens
        if previous is None or tokens is None:
            return estimate_tokens(messages)
        return tokens + estimate_tokens(_added(previous, messages))

    def _estimated_cost(self, rates: Rates, prompt: Prompt, estimate: int) -> Decimal:
        """The next prompt's estimated cost: when the previous call's last message carried a cache
        point and the new prompt begins with that call's prompt (cache points left out), the
        previous call's reported prompt tokens at the cache-read rate and the rest at the input
        rate (API.md §21); otherwise every token at the input rate."""
        previous, tokens = self._previous, self._previous_tokens
        if not previous or tokens is None or not previous[-1].metadata.get(CACHE_POINT):
            return rates.prompt_cost(estimate)
        current = prompt.instructions
        if len(current) < len(previous) or not all(
            a is b or without_cache_point(a) == without_cache_point(b)
            for a, b in zip(previous, current, strict=False)
        ):
            return rates.prompt_cost(estimate)
        rin, _, read_rate, _ = rates.for_prompt(estimate)
        cached = min(tokens, estimate)
        return tidy_usd((read_rate * cached + rin * (estimate - cached)) / 1_000_000)

    def _lowered(
        self, limits: UsageLimits, prompt: Prompt, model: object, estimate: int | None
    ) -> tuple[Prompt, str | None]:
        """The prompt with ``max_tokens`` lowered to what is left of the output and total limits
        (when that is less than the caller's value), and the limit that lowered it."""
        if limits.output_tokens_limit is None and limits.total_tokens_limit is None:
            return prompt, None
        options = prompt.options
        caller = options.max_tokens if options is not None and options.max_tokens is not None else None
        best: int | None = caller if caller is not None else self._model_default(model)
        by: str | None = None
        if limits.output_tokens_limit is not None:
            left = limits.output_tokens_limit - self._completion
            if best is None or left < best:
                best, by = left, "output_tokens_limit"
        if limits.total_tokens_limit is not None:
            left = limits.total_tokens_limit - self._prompt - self._completion - (estimate or 0)
            if best is None or left < best:
                best, by = left, "total_tokens_limit"
        if by is None or best is None:
            return prompt, None
        if best <= 0:
            raise self._exceeded(
                by, getattr(limits, by), "before_request", "leaves no output token for the next call"
            )
        return Prompt(prompt.instructions, _with_max_tokens(options, best)), by

    def _token_limit_passed(self, *, or_equal: bool) -> tuple[str, int, int] | None:
        """The first token limit the totals passed (or reached, ``or_equal``): (name, limit, used)."""
        for name, limit in self._token_limits:
            if name == "input_tokens_limit":
                used = self._prompt
            elif name == "output_tokens_limit":
                used = self._completion
            else:
                used = self._prompt + self._completion
            if used > limit or (or_equal and used == limit):
                return name, limit, used
        return None

    def _model_default(self, model: object) -> int | None:
        """The ``max_tokens`` ``model`` sends when a request sets none (looked up once per model)."""
        known = self._default_of
        if known is None or known[0] is not model:
            known = self._default_of = (model, _model_max_tokens(model))
        return known[1]

    def _check_over(self, limits: UsageLimits) -> None:
        passed = self._token_limit_passed(or_equal=False)
        if passed is not None:
            name, limit, used = passed
            raise self._exceeded(name, limit, "after_response", f"was passed ({used:,} tokens used)")
        cost = self._cost
        if limits.cost_limit is not None and cost is not None and cost > limits.cost_limit:
            why = f"was passed (${tidy_usd(cost):f} spent)"
            raise self._exceeded("cost_limit", limits.cost_limit, "after_response", why)

    def _unchecked(
        self, limits: UsageLimits, meta: ChatResponseMetadata, prompt: Prompt, model: object
    ) -> UsageLimitExceeded | None:
        """The error for a response that reported no usage while a token or cost limit is set."""
        name = meta.model or requested_model(prompt, model)
        token_limits = limits.token_limits
        if token_limits:
            limit_name, limit = token_limits[0]
            return self._exceeded(
                limit_name,
                limit,
                "after_response",
                f"cannot be checked: model {name!r} reported no token usage",
            )
        if limits.cost_limit is not None and limits.on_unpriced == "raise":
            return self._exceeded(
                "cost_limit",
                limits.cost_limit,
                "after_response",
                f"cannot be enforced: model {name!r} reported no usage to price (or "
                "UsageLimits(on_unpriced='ignore') to go on without it)",
            )
        return None

    def _estimate_rates(self, meta: ChatResponseMetadata, prompt: Prompt, model: object) -> Rates | None:
        """The price the next call's estimate uses: the client's price for this response's model
        (a mapping entry), else the bundled price of its provider (a function is never asked)."""
        requested = requested_model(prompt, model)
        name = meta.model or requested
        prices = self.prices
        if prices is not None:
            rates = prices.table_rates(name, requested)
            if rates is not None:
                return rates
        if meta.provider is None or name is None:
            return None
        return bundled_rates(meta.provider, name)

    def _exceeded(self, name: str, limit: object, when: When, why: str) -> UsageLimitExceeded:
        run = self.run_usage()
        error = UsageLimitExceeded(
            f"usage limit {name}={limit} {why}; the run so far: {run.describe()}. Raise UsageLimits."
            f"{name}, or lift the limits for one request with .usage_limits(None)",
            limit_name=name,
            limit=limit,
            run_usage=run,
            when=when,
            partial_response=self.last_response,
        )
        error._advisorchain_meter = self  # type: ignore[attr-defined]  # whose run it ended
        error._advisorchain_why = why  # type: ignore[attr-defined]  # for the ending of a finished run
        return error


class StreamTally:
    """One streamed answer as the run's meter sees it: the model link hands it every chunk
    (``chunk``) and, once the answer ended, calls ``end``.

    A provider may repeat one usage report on many chunks (the OpenAI adapter puts it on every
    text chunk decoded after it): a chunk is repriced by the client's prices only when it brings
    a new report or ends the answer, so a stream pays for pricing once or twice, not per chunk.
    """

    __slots__ = ("_finish", "_lowered", "_meter", "_model", "_priced", "_prompt", "kept", "seen")

    def __init__(self, meter: RunMeter, prompt: Prompt, model: object, lowered: str | None) -> None:
        self._meter, self._prompt, self._model, self._lowered = meter, prompt, model, lowered
        self.seen: Usage | None = None
        """The latest usage report, as the model sent it (a chunk with another one, or with a
        finish reason, is handed to ``chunk``; the others need only be ``kept``)."""
        self.kept: list[ChatResponse] | None = [] if meter.limits is not None else None
        """The answer's chunks, when limits may need the whole answer (else None)."""
        self._priced: ChatResponseMetadata | None = None  # the latest report's metadata, priced
        self._finish: str | None = None

    def chunk(self, chunk: ChatResponse) -> ChatResponse:
        """``chunk`` noted (and repriced when it brings a new usage report or ends the answer)."""
        meta = chunk.metadata
        usage, finish = meta.usage, meta.finish_reason
        if usage is not None and (usage is not self.seen or finish is not None):
            self.seen = usage
            if self._meter.prices is not None:
                chunk = self._meter.priced(chunk, self._prompt, self._model)
            self._priced = chunk.metadata
        if finish is not None:
            self._finish = finish
        if self.kept is not None:
            self.kept.append(chunk)
        return chunk

    def abandoned(self, error: BaseException | None) -> None:
        """The answer never ended (the stream failed, or its reader stopped; see ``unanswered``)."""
        self._meter.unanswered(error)

    def end(self) -> None:
        """The answer ended: add it to the run's totals, and check the limits after it."""
        meter, meta = self._meter, self._priced
        meter._add(meta.usage if meta is not None else None)
        if meter.limits is not None:
            meter._last, meter._last_chunks = None, self.kept
            meter._check_after(meta or _NO_METADATA, self._finish, self._prompt, self._model, self._lowered)


_NO_METADATA = ChatResponseMetadata()


def _with_max_tokens(options: ChatOptions | None, max_tokens: int) -> ChatOptions:
    """``options`` with ``max_tokens``: a field-for-field copy (``ChatOptions.copy`` would build the
    tool registry again, on every model call of a budgeted run)."""
    if options is None:
        return ChatOptions(max_tokens=max_tokens)
    copied = object.__new__(ChatOptions)
    for name in ChatOptions.__slots__:
        object.__setattr__(copied, name, getattr(options, name))
    object.__setattr__(copied, "max_tokens", max_tokens)
    return copied


def requested_model(prompt: Prompt, model: object) -> str | None:
    """The model name a request asks for: its options' model, else the model's ``model_name``."""
    options = prompt.options
    if options is not None and options.model:
        return options.model
    name = getattr(model, "model_name", None)
    return name if isinstance(name, str) and name else None


def _model_max_tokens(model: object) -> int | None:
    """The ``max_tokens`` a model sends when the request sets none (Anthropic's adapter always
    sends one; an OpenAI adapter's defaults may hold one), or None."""
    value = getattr(model, "max_tokens", None)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    defaults = getattr(model, "defaults", None)
    if isinstance(defaults, Mapping):
        for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            value = defaults.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _added(previous: Sequence[Message], current: Sequence[Message]) -> Sequence[Message]:
    """The messages of ``current`` that ``previous`` does not hold (the same object, or an equal
    message): what a tool round, memory or an advisor added since the previous call."""
    n = len(previous)
    if len(current) >= n and current[:n] == previous:  # a tool round: the previous prompt, extended
        return current[n:]
    seen = {id(m) for m in previous}
    by_text: dict[tuple[type, str | None], list[Message]] = {}
    for m in previous:
        by_text.setdefault((type(m), getattr(m, "text", None)), []).append(m)
    added: list[Message] = []
    for m in current:
        if id(m) in seen:
            continue
        if any(m == other for other in by_text.get((type(m), getattr(m, "text", None)), ())):
            continue
        added.append(m)
    return added


def limit_ending(
    error: UsageLimitExceeded, meter: RunMeter | None, *, after_text: bool = False
) -> ChatResponse | None:
    """The answer that ends ``meter``'s run when its limits say ``on_exceeded="finish"``: one
    generation saying which limit was hit and why, finish reason ``usageLimitExceeded``, the usage
    as far as it went (``after_text``: the run's text already went out on a stream, so the ending
    starts a paragraph of its own). None when ``error`` must propagate (``on_exceeded="raise"``, or
    another run's limit)."""
    if meter is None or id(getattr(error, "_advisorchain_meter", None)) != id(meter):
        return None  # another run's limit (a sub-agent's, a judge's) is an error like any other
    limits = meter.limits
    if limits is None or limits.on_exceeded != "finish":
        return None
    last = meter.last_response
    why = getattr(error, "_advisorchain_why", "was reached").split(" (", 1)[0]
    lead = "\n\n" if after_text else ""  # a paragraph of its own after the streamed text
    text = (
        f"{lead}I stopped: the usage limit {error.limit_name}={error.limit} {why} "
        f"({meter.run_usage().describe()})."
    )
    return ChatResponse.of(
        AssistantMessage(text),
        FinishReason.USAGE_LIMIT_EXCEEDED,
        usage=meter.usage if meter.reported else None,
        id=last.metadata.id if last is not None else None,
        model=last.metadata.model if last is not None else None,
    )
