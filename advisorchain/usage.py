"""What model calls use and cost, and the limits a run keeps to (API.md §17).

* ``Usage`` — the tokens of one or more model calls (cache reads and writes included in
  ``prompt_tokens``) and their ``cost`` in USD (``Decimal``; ``None`` when unknown, never 0).
* ``ModelPrice`` — a price in USD per million tokens, for ``ChatClient(prices=...)``.
* ``UsageLimits`` — the limits of one run (requests, tokens, tool calls, cost); ``RunUsage`` — a
  run's totals so far.

Pricing: the provider adapters price their own responses from ``genai-prices``' bundled data (never
fetched from the network), looked up once per provider and model and kept (a lookup costs tens of
microseconds, a price from the cache one dict read); ``ChatClient(prices=...)`` adds or overrides
prices at the model link (``Prices``). This module holds the values and the prices; the per-run
accumulator that checks the limits is ``advisorchain._run_meter``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal, TypeAlias

from ._checks import check_int
from .errors import ChainConfigurationError, UsageLimitExceeded

__all__ = ["ModelPrice", "PriceFunction", "RunUsage", "Usage", "UsageLimitExceeded", "UsageLimits"]

_MILLION = Decimal(1_000_000)


def usd(value: object, what: str) -> Decimal:
    """``value`` (a ``Decimal``, int or float) as a finite, non-negative ``Decimal`` of USD; anything
    else is a ``ChainConfigurationError`` (a ``ValueError``) naming ``what``."""
    if isinstance(value, Decimal):
        amount = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        amount = Decimal(value) if isinstance(value, int) else Decimal(repr(value))
    else:
        raise ChainConfigurationError(
            f"{what} must be a number of USD (a Decimal, int or float), got {value!r}"
        )
    if not amount.is_finite() or amount < 0:
        raise ChainConfigurationError(f"{what} must be a finite number of USD >= 0, got {value!r}")
    return amount


_ONE, _TEN = Decimal(1), Decimal(10)


def tidy_usd(amount: Decimal) -> Decimal:
    """``amount`` without trailing zeros and never in exponent form: ``Decimal('0.0384')``,
    ``Decimal('40')`` (not ``Decimal('4E+1')``)."""
    normal = amount.normalize()
    if normal >= _TEN and normal == normal.to_integral_value():
        return normal.quantize(_ONE)
    return normal


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one or more model calls (``+`` adds them up) and what it cost.

    ``prompt_tokens`` counts the whole prompt, the cached part included: ``cache_read_tokens`` were
    read from the provider's prompt cache, ``cache_write_tokens`` written to it. ``cost`` is in USD,
    ``None`` when unknown (an unpriced model, or a sum that includes one) — never a made-up 0.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: Decimal | None = None

    def __post_init__(self) -> None:
        cost = self.cost
        if cost is not None and type(cost) is not Decimal:
            object.__setattr__(self, "cost", usd(cost, "Usage.cost"))

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage | None) -> Usage:
        if other is None:
            return self
        a, b = self.cost, other.cost
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            None if a is None or b is None else tidy_usd(a + b),
        )

    def with_cost(self, cost: Decimal | None) -> Usage:
        """A copy whose ``cost`` is ``cost``."""
        return Usage(
            self.prompt_tokens, self.completion_tokens, self.cache_read_tokens, self.cache_write_tokens, cost
        )

    @staticmethod
    def sum(usages: Iterable[Usage | None]) -> Usage | None:
        """The sum of the usages that are known, or None when none is; its cost is None when any
        usage is unknown (a call that reported none may have cost something)."""
        total: Usage | None = None
        unknown = False
        for u in usages:
            if u is None:
                unknown = True
            else:
                total = u if total is None else total + u
        if unknown and total is not None and total.cost is not None:
            return total.with_cost(None)
        return total


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """A model's price in USD per million tokens (``Decimal`` or a number).

    A cache rate left ``None`` charges those tokens at the input rate. ``cost(usage)`` prices a
    ``Usage``: the uncached prompt tokens at ``input_per_mtok``, cache reads and writes at their
    rates, completion tokens at ``output_per_mtok``.

    >>> ChatClient(model, prices={"my-local-model": ModelPrice(0.5, 1.5)})
    """

    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cache_read_per_mtok: Decimal | None = None
    cache_write_per_mtok: Decimal | None = None

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok"):
            value = getattr(self, name)
            if value is not None or name in ("input_per_mtok", "output_per_mtok"):
                object.__setattr__(self, name, usd(value, f"ModelPrice.{name}"))

    def cost(self, usage: Usage) -> Decimal:
        """What ``usage`` costs at this price, in USD."""
        return _rates_of(self).cost(usage)


_Rate4: TypeAlias = tuple[Decimal, Decimal, Decimal, Decimal]
"""Input, output, cache-read and cache-write rates (USD per million tokens), all resolved."""


@dataclass(frozen=True, slots=True)
class Rates:
    """A resolved price: the four rates, and higher rates from a prompt size on (long-context tiers:
    a prompt of more than ``threshold`` tokens pays that tier's rates on all its tokens, as the
    providers and ``genai-prices`` count them)."""

    base: _Rate4
    tiers: tuple[tuple[int, _Rate4], ...] = ()

    def for_prompt(self, prompt_tokens: int) -> _Rate4:
        """The rates a prompt of ``prompt_tokens`` tokens pays."""
        rates = self.base
        for threshold, tier in self.tiers:
            if prompt_tokens > threshold:
                rates = tier
        return rates

    def prompt_cost(self, tokens: int) -> Decimal:
        """What a prompt of ``tokens`` uncached tokens costs, in USD (the limits' estimate)."""
        return self.for_prompt(tokens)[0] * tokens / _MILLION

    def cost(self, usage: Usage) -> Decimal:
        """What ``usage`` costs, in USD."""
        prompt = usage.prompt_tokens
        rin, rout, rcr, rcw = self.base if not self.tiers else self.for_prompt(prompt)
        read, write = usage.cache_read_tokens, usage.cache_write_tokens
        uncached = prompt - read - write
        total = rin * (uncached if uncached > 0 else 0) + rout * usage.completion_tokens
        if read:
            total += rcr * read
        if write:
            total += rcw * write
        return tidy_usd(total / _MILLION)


def _rates_of(price: ModelPrice) -> Rates:
    rin = price.input_per_mtok
    return Rates(
        (
            rin,
            price.output_per_mtok,
            rin if price.cache_read_per_mtok is None else price.cache_read_per_mtok,
            rin if price.cache_write_per_mtok is None else price.cache_write_per_mtok,
        )
    )


# -- the bundled prices (genai-prices) ------------------------------------------------------------------

_BUNDLED: dict[tuple[str, str], Rates | None] = {}
_BUNDLED_MAX = 4096  # model names a provider reports are few; a server inventing names cannot grow it
_BUNDLED_LOCK = threading.Lock()
_SNAPSHOT: list[Any] = []


def bundled_rates(provider: str, model: str) -> Rates | None:
    """The price of ``model`` at ``provider`` (a ``genai-prices`` provider id: ``"openai"``,
    ``"anthropic"``) from the bundled price data, or None when it has none (or ``genai-prices`` is
    not installed). Looked up once per provider and model; later calls read the cache."""
    key = (provider, model)
    try:
        return _BUNDLED[key]
    except KeyError:
        pass
    rates = _look_up(provider, model)
    with _BUNDLED_LOCK:
        if len(_BUNDLED) >= _BUNDLED_MAX:
            _BUNDLED.clear()
        _BUNDLED[key] = rates
    return rates


def _snapshot() -> Any:
    """genai-prices' bundled data as a snapshot of our own: never the one its network updater
    (``UpdatePrices``) may have installed, and nothing here ever starts that updater."""
    if not _SNAPSHOT:
        from genai_prices import data, data_snapshot

        _SNAPSHOT.append(data_snapshot.DataSnapshot(providers=data.providers, from_auto_update=False))
    return _SNAPSHOT[0]


def _look_up(provider: str, model: str) -> Rates | None:
    try:
        snapshot = _snapshot()
    except ImportError:
        return None
    try:
        _, info = snapshot.find_provider_model(model, None, provider, None)
    except LookupError:
        return None
    return _rates_from_genai(info.get_prices(datetime.now(tz=UTC)))


def _rates_from_genai(price: Any) -> Rates | None:
    """Our rates from a genai-prices ``ModelPrice`` (plain or tiered prices per token kind); None
    when it prices neither input nor output tokens (a model priced per second or per request)."""
    keys = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")
    values = [getattr(price, k, None) for k in keys]
    if values[0] is None and values[1] is None:
        return None
    thresholds = sorted({t.start for v in values if v is not None and hasattr(v, "tiers") for t in v.tiers})

    def at(threshold: int | None) -> _Rate4:
        rates = [_rate_at(v, threshold) for v in values]
        rin = rates[0]
        return (rin, rates[1], rin if values[2] is None else rates[2], rin if values[3] is None else rates[3])

    return Rates(at(None), tuple((t, at(t)) for t in thresholds))


def _rate_at(value: Any, threshold: int | None) -> Decimal:
    """A genai-prices price (a Decimal or tiered) for a prompt past ``threshold`` (None: the base)."""
    if value is None:
        return Decimal(0)
    if not hasattr(value, "tiers"):
        return Decimal(value)
    rate = Decimal(value.base)
    for tier in value.tiers:
        if threshold is not None and tier.start <= threshold:
            rate = Decimal(tier.price)
    return rate


# -- the client's prices ------------------------------------------------------------------------------

PriceFunction: TypeAlias = Callable[[str, "str | None", Usage], "Decimal | None"]
"""``fn(model, provider, usage) -> Decimal | None``: a response's cost in USD, or None to keep the
bundled price (``provider`` is None for a model that is not one of the provider adapters, or one on
another server than the provider's own)."""


class Prices:
    """``ChatClient(prices=...)``, checked once: a mapping ``{model name: ModelPrice}`` (an entry
    replaces the bundled price of that model) or a ``PriceFunction``.

    ``reprice`` gives a response's cost at the model link; ``rates`` the price the limits' estimate
    uses (a mapping entry, else the bundled price — a function is never called for an estimate).
    """

    __slots__ = ("_function", "_table")

    def __init__(self, prices: Mapping[str, ModelPrice] | PriceFunction) -> None:
        self._table: dict[str, Rates] | None = None
        self._function: PriceFunction | None = None
        if isinstance(prices, Mapping):
            self._table = {name: _rates_of(_checked_price(name, price)) for name, price in prices.items()}
        elif callable(prices):
            self._function = prices
        else:
            raise ChainConfigurationError(
                f"prices must be a mapping {{model name: ModelPrice(...)}} or a function "
                f"fn(model, provider, usage) -> Decimal | None, got {prices!r}"
            )

    def table_rates(self, *names: str | None) -> Rates | None:
        """The mapping's price for the first of ``names`` it has, or None."""
        table = self._table
        if table is not None:
            for name in names:
                if name is not None and name in table:
                    return table[name]
        return None

    def reprice(self, usage: Usage, model: str, requested: str | None, provider: str | None) -> Usage | None:
        """``usage`` with the cost these prices give it, or None when they leave it as it is.
        ``model`` is the name the response reports (else the request's), ``requested`` the
        request's. A function that raises, or returns anything but a number of USD or None, is a
        ``ChainConfigurationError`` naming the model: never a wrong cost."""
        if self._function is None:
            rates = self.table_rates(model, requested)
            return None if rates is None else usage.with_cost(rates.cost(usage))
        try:
            cost = self._function(model, provider, usage)
        except Exception as exc:
            raise ChainConfigurationError(
                f"the prices function raised {type(exc).__name__} for model {model!r} (provider "
                f"{provider!r}): {exc}; fix it, or return None for a model it does not price"
            ) from exc
        if cost is None:
            return None
        what = f"the cost the prices function returned for model {model!r} (provider {provider!r})"
        return usage.with_cost(tidy_usd(usd(cost, what)))

    @property
    def is_function(self) -> bool:
        """True when the prices are a function (never called for an estimate)."""
        return self._function is not None


def _checked_price(name: object, price: object) -> ModelPrice:
    if not isinstance(name, str) or not name:
        raise ChainConfigurationError(f"prices: a model name must be a non-empty str, got {name!r}")
    if not isinstance(price, ModelPrice):
        raise ChainConfigurationError(
            f"prices[{name!r}] must be a ModelPrice(input_per_mtok, output_per_mtok, ...), got {price!r}"
        )
    return price


def price_of(usage: Usage, provider: str | None, model: str) -> Usage:
    """``usage`` priced from the bundled data for ``model`` at ``provider`` (``cost`` None when
    there is no provider or no price): what the provider adapters do with their responses."""
    rates = bundled_rates(provider, model) if provider is not None else None
    return usage.with_cost(None if rates is None else rates.cost(usage))


# -- limits and totals --------------------------------------------------------------------------------

OnUnpriced: TypeAlias = Literal["raise", "ignore"]
OnExceeded: TypeAlias = Literal["raise", "finish"]


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """The limits of one run (one client request, tool loop and retries included). ``None`` means
    no limit. ``cost_limit`` is in USD.

    Checked before each model call (with an estimate of the prompt), after each response and before
    a round's tool calls; ``output_tokens_limit`` and ``total_tokens_limit`` also lower the call's
    ``max_tokens`` to what is left. A limit hit raises ``UsageLimitExceeded``, or, with
    ``on_exceeded="finish"``, ends the run with an answer saying which limit was hit. A cost limit
    on a model that cannot be priced raises unless ``on_unpriced="ignore"``.

    >>> ChatClient(model, usage_limits=UsageLimits(request_limit=10, cost_limit=Decimal("0.50")))
    """

    request_limit: int | None = None
    input_tokens_limit: int | None = None
    output_tokens_limit: int | None = None
    total_tokens_limit: int | None = None
    tool_calls_limit: int | None = None
    cost_limit: Decimal | float | None = None
    _: KW_ONLY
    on_unpriced: OnUnpriced = "raise"
    on_exceeded: OnExceeded = "raise"

    def __post_init__(self) -> None:
        for name in _COUNT_LIMITS:
            check_int(getattr(self, name), f"UsageLimits.{name}", minimum=0, optional=True)
        if self.cost_limit is not None:
            object.__setattr__(self, "cost_limit", usd(self.cost_limit, "UsageLimits.cost_limit"))
        if self.on_unpriced not in ("raise", "ignore"):
            raise ChainConfigurationError(
                f"UsageLimits.on_unpriced must be 'raise' or 'ignore', got {self.on_unpriced!r}"
            )
        if self.on_exceeded not in ("raise", "finish"):
            raise ChainConfigurationError(
                f"UsageLimits.on_exceeded must be 'raise' or 'finish', got {self.on_exceeded!r}"
            )

    @property
    def token_limits(self) -> tuple[tuple[str, int], ...]:
        """The token limits that are set, as (name, value)."""
        return tuple(
            (name, value)
            for name in ("input_tokens_limit", "output_tokens_limit", "total_tokens_limit")
            if (value := getattr(self, name)) is not None
        )


_COUNT_LIMITS = (
    "request_limit",
    "input_tokens_limit",
    "output_tokens_limit",
    "total_tokens_limit",
    "tool_calls_limit",
)


@dataclass(frozen=True, slots=True)
class RunUsage:
    """A run's totals so far: the model calls it sent (failed ones included), the tool calls that
    ran, and the usage summed over its responses (``usage.cost`` None as soon as one response was
    unpriced or reported no usage)."""

    requests: int = 0
    tool_calls: int = 0
    usage: Usage = Usage(cost=Decimal(0))

    def describe(self) -> str:
        """One line: requests, tool calls, tokens and cost."""
        u = self.usage
        cost = "n/a" if u.cost is None else f"${u.cost:f}"
        return (
            f"{self.requests} request{'s' if self.requests != 1 else ''}, "
            f"{self.tool_calls} tool call{'s' if self.tool_calls != 1 else ''}, "
            f"{u.prompt_tokens:,} input + {u.completion_tokens:,} output tokens, cost {cost}"
        )
