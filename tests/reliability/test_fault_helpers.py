"""The shared helpers behind the adapters' fault handling: Retry-After parsing, loopback URLs."""

from __future__ import annotations

import email.utils

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain.models._common import is_loopback_url
from advisorchain.models._http.failures import retry_after_seconds


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "inf"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_read_from_the_headers(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_seconds(headers) == seconds


def test_retry_after_as_an_http_date_is_the_time_left() -> None:
    date = email.utils.formatdate(1_000_030, usegmt=True)

    assert retry_after_seconds({"retry-after": date}, now=1_000_000) == 30.0


@given(st.dictionaries(st.sampled_from(["retry-after", "retry-after-ms", "x"]), st.text(max_size=40)))
def test_retry_after_never_raises_and_is_never_negative(headers: dict[str, str]) -> None:
    seconds = retry_after_seconds(headers)

    assert seconds is None or seconds >= 0


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://127.8.9.1/v1", True),
        ("http://[::1]:11434/v1", True),
        ("http://localhost:11434/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://10.0.0.5:8000/v1", False),
        ("not a url", False),
    ],
)
def test_loopback_urls_are_recognised(url: str, local: bool) -> None:
    assert is_loopback_url(url) is local
