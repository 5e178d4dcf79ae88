"""The values of §17: Usage (cache counts and cost, unknown stays unknown), ModelPrice, UsageLimits
(bad input is a ValueError naming the field), RunUsage."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import ModelPrice, RunUsage, Usage, UsageLimits
from advisorchain.model import Usage as ModelUsage

counts = st.integers(min_value=0, max_value=10**9)
costs = st.one_of(st.none(), st.decimals(min_value=0, max_value=1000, places=6))
usages = st.builds(Usage, counts, counts, counts, counts, costs)


def test_old_code_that_builds_usage_from_two_counts_keeps_working() -> None:
    usage = Usage(10, 5)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (10, 5, 15)
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.cost) == (0, 0, None)
    assert ModelUsage is Usage  # the model layer re-exports the one Usage


def test_a_sum_adds_every_count_and_the_cost_when_both_are_known() -> None:
    total = Usage(10, 5, 4, 1, Decimal("0.01")) + Usage(20, 6, 2, 3, Decimal("0.02"))
    assert total == Usage(30, 11, 6, 4, Decimal("0.03"))


def test_an_unknown_cost_stays_unknown_in_a_sum_never_zero() -> None:
    assert (Usage(10, 5, cost=Decimal("0.01")) + Usage(1, 1)).cost is None
    assert (Usage(1, 1) + Usage(10, 5, cost=Decimal("0.01"))).cost is None


def test_summing_with_a_call_that_reported_no_usage_leaves_the_cost_unknown() -> None:
    total = Usage.sum([Usage(1, 2, cost=Decimal(1)), None, Usage(3, 4, cost=Decimal(2))])
    assert total == Usage(4, 6, cost=None)
    assert Usage.sum([Usage(1, 2, cost=Decimal(1)), Usage(3, 4, cost=Decimal(2))]) == Usage(
        4, 6, cost=Decimal(3)
    )
    assert Usage.sum([None, None]) is None


@given(usages, usages, usages)
def test_sums_are_associative_and_unknown_wins(a: Usage, b: Usage, c: Usage) -> None:
    assert (a + b) + c == a + (b + c)
    assert ((a + b).cost is None) == (a.cost is None or b.cost is None)


def test_a_float_cost_becomes_a_decimal_and_a_bad_one_is_refused() -> None:
    assert Usage(1, 1, cost=0.5).cost == Decimal("0.5")  # type: ignore[arg-type]
    for bad in (-1, float("nan"), "0.5", True):
        with pytest.raises(ValueError, match=r"Usage\.cost"):
            Usage(1, 1, cost=bad)  # type: ignore[arg-type]


def test_a_price_charges_cache_reads_and_writes_at_their_rates() -> None:
    # Sonnet 4.5's price: 10k in (8k of them read from the cache) and 2k out.
    sonnet = ModelPrice(Decimal(3), Decimal(15), Decimal("0.30"), Decimal("3.75"))
    assert sonnet.cost(Usage(10_000, 2_000, cache_read_tokens=8_000)) == Decimal("0.0384")
    assert sonnet.cost(Usage(10_000, 2_000)) == Decimal("0.06")
    assert sonnet.cost(Usage(10_000, 0, cache_write_tokens=10_000)) == Decimal("0.0375")


def test_a_cache_rate_left_out_is_the_input_rate() -> None:
    price = ModelPrice(2, 10)
    assert price.input_per_mtok == Decimal(2) and isinstance(price.output_per_mtok, Decimal)
    assert price.cost(Usage(1_000_000, 0, cache_read_tokens=500_000, cache_write_tokens=100_000)) == 2


@pytest.mark.parametrize(
    "fields",
    [("a", 1), (1, None), (-1, 1), (1, float("inf")), (1, 1, "x"), (1, 1, None, -2), (True, 1)],
)
def test_a_price_with_a_non_number_or_a_negative_rate_is_refused(fields: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match=r"ModelPrice\.\w+_per_mtok must be"):
        ModelPrice(*fields)  # type: ignore[arg-type]


def test_limits_are_frozen_and_default_to_none() -> None:
    limits = UsageLimits(request_limit=3, cost_limit=0.25)
    assert limits.cost_limit == Decimal("0.25")
    assert (limits.on_unpriced, limits.on_exceeded) == ("raise", "raise")
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.request_limit = 4  # type: ignore[misc]
    assert UsageLimits(1, 2, 3, 4, 5, Decimal(6)).tool_calls_limit == 5


@pytest.mark.parametrize(
    "name",
    ["request_limit", "input_tokens_limit", "output_tokens_limit", "total_tokens_limit", "tool_calls_limit"],
)
def test_a_negative_or_non_integer_limit_is_a_value_error(name: str) -> None:
    with pytest.raises(ValueError, match=f"UsageLimits.{name} must be an int >= 0"):
        UsageLimits(**{name: -1})
    with pytest.raises(ValueError, match=f"UsageLimits.{name}"):
        UsageLimits(**{name: 1.5})
    assert getattr(UsageLimits(**{name: 0}), name) == 0


def test_a_negative_or_unreadable_cost_limit_is_a_value_error() -> None:
    for bad in (-0.01, Decimal("-1"), float("nan"), "1"):
        with pytest.raises(ValueError, match=r"UsageLimits\.cost_limit"):
            UsageLimits(cost_limit=bad)  # type: ignore[arg-type]


def test_the_modes_are_checked() -> None:
    with pytest.raises(ValueError, match="on_unpriced"):
        UsageLimits(on_unpriced="warn")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_exceeded"):
        UsageLimits(on_exceeded="stop")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        UsageLimits(None, None, None, None, None, None, "ignore")  # type: ignore[misc]  # keyword-only


def test_a_run_that_made_no_call_cost_nothing() -> None:
    assert RunUsage() == RunUsage(0, 0, Usage(0, 0, cost=Decimal(0)))
