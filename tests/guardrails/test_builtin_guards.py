"""The built-in guards: pii_guard (checksums, formats, other scripts; hypothesis for the open-ended
input), keyword_guard, max_length_guard and llm_guard (a judge with a structured verdict)."""

from __future__ import annotations

import json
import random
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import (
    ChatClient,
    GuardContext,
    GuardrailError,
    GuardrailTripped,
    GuardResult,
    InputGuardrailAdvisor,
    ScriptedChatModel,
    keyword_guard,
    llm_guard,
    max_length_guard,
    pii_guard,
)
from advisorchain.guardrails.pii import find_pii, luhn_valid, mod97_valid, redact_pii
from advisorchain.guards import guard_name

OUT = GuardContext("output")


def luhn_complete(body: str) -> str:
    """``body`` with the check digit that makes it pass Luhn."""
    for d in "0123456789":
        if luhn_valid(body + d):
            return body + d
    raise AssertionError(body)


def iban_with_checksum(country: str, bban: str) -> str:
    moved = bban + country + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in moved)) % 97
    return f"{country}{check:02d}{bban}"


async def redact(text: str, **kwargs: object) -> GuardResult:
    return await pii_guard(**kwargs)(text, OUT)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("mail ada.lovelace+x@example.co.uk now", "mail [EMAIL] now"),
        ("call +33 6 12 34 56 78.", "call [PHONE]."),
        ("call (555) 123-4567 today", "call [PHONE] today"),
        ("call 020 7946 0958", "call [PHONE]"),
        ("pay with 4111-1111-1111-1111", "pay with [CREDIT_CARD]"),
        ("pay with 4111111111111111", "pay with [CREDIT_CARD]"),
        ("IBAN DE89 3704 0044 0532 0130 00 please", "IBAN [IBAN] please"),
        ("IBAN GB82WEST12345698765432.", "IBAN [IBAN]."),
        ("server 192.168.1.20 and 2001:db8::8a2e:370:7334", "server [IP_ADDRESS] and [IP_ADDRESS]"),
        ("localhost ::1 too", "localhost [IP_ADDRESS] too"),
    ],
)
async def test_pii_is_redacted_with_its_token(text: str, redacted: str) -> None:
    result = await redact(text)
    assert result.passed and result.replacement == redacted


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112 fails Luhn",
        "IBAN DE89 3704 0044 0532 0130 01 fails mod-97",
        "version 1.2.3 and 2.50 EUR, on 2024-01-15 at 12:30:45",
        "order 1234567 (7 digits)",
        "no personal data here",
        "",
    ],
)
async def test_text_without_pii_passes_unchanged(text: str) -> None:
    assert await redact(text) == GuardResult(True)


async def test_block_trips_naming_the_kinds_and_never_quoting_them() -> None:
    result = await redact("mail ada@example.com or 4111 1111 1111 1111", action="block")
    assert not result.passed
    assert result.message == "the text holds personal data (email, credit_card)"
    assert "ada" not in (result.message or "") and "4111" not in (result.message or "")


async def test_only_the_kinds_asked_for_are_found() -> None:
    result = await redact("mail ada@example.com, call +33 6 12 34 56 78", kinds=("phone",))
    assert result.replacement == "mail ada@example.com, call [PHONE]"


def test_pii_guard_checks_its_settings_and_is_named_after_its_function() -> None:
    with pytest.raises(ValueError, match="kinds"):
        pii_guard(kinds=("ssn",))
    with pytest.raises(TypeError, match="kinds"):
        pii_guard(kinds="email")
    with pytest.raises(ValueError, match="action"):
        pii_guard(action="mask")  # type: ignore[arg-type]
    assert guard_name(pii_guard()) == "pii_guard"
    assert guard_name(keyword_guard(["x"])) == "keyword_guard"
    assert guard_name(max_length_guard(3)) == "max_length_guard"


@given(st.text(alphabet=string.digits, min_size=12, max_size=18), st.sampled_from([" ", "-", ""]))
def test_any_card_number_with_a_valid_luhn_checksum_is_redacted(body: str, separator: str) -> None:
    number = luhn_complete(body)
    grouped = separator.join(number[i : i + 4] for i in range(0, len(number), 4))
    text, found = redact_pii(f"card: {grouped}.", ("credit_card",))
    assert text == "card: [CREDIT_CARD]." and found == ("credit_card",)


@given(st.text(alphabet=string.digits, min_size=13, max_size=19), st.sampled_from([" ", "-", ""]))
def test_a_card_like_number_that_fails_luhn_is_left_alone(number: str, separator: str) -> None:
    if luhn_valid(number):
        number = number[:-1] + str((int(number[-1]) + 1) % 10)
    assert not luhn_valid(number)
    grouped = separator.join(number[i : i + 4] for i in range(0, len(number), 4))
    text = f"ref {grouped} ok"
    assert redact_pii(text) == (text, ())


@given(
    st.sampled_from(["DE", "FR", "GB", "NL", "ES"]),
    st.text(alphabet=string.digits + string.ascii_uppercase, min_size=10, max_size=29),
    st.sampled_from(string.digits),
    st.booleans(),
)
def test_any_iban_with_a_valid_checksum_is_redacted_and_a_wrong_checksum_is_left_alone(
    country: str, bban: str, last: str, grouped: bool
) -> None:
    iban = iban_with_checksum(country, bban + last)  # ends with a digit, as account numbers do
    assert mod97_valid(iban)
    shown = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4)) if grouped else iban
    assert redact_pii(f"to {shown} now", ("iban",))[0] == "to [IBAN] now"
    wrong = iban[:2] + f"{(int(iban[2:4]) + 1) % 100:02d}" + iban[4:]
    if not mod97_valid(wrong):
        shown = " ".join(wrong[i : i + 4] for i in range(0, len(wrong), 4)) if grouped else wrong
        assert redact_pii(f"to {shown} now", ("iban",)) == (f"to {shown} now", ())


# Letters, marks and punctuation of scripts other than Latin (no ASCII digits, no "@").
OTHER_SCRIPTS = st.text(
    alphabet=st.characters(
        whitelist_categories=("Lo", "Ll", "Lu", "Mn", "Nd", "Po", "Zs"),
        blacklist_characters="@:.+-()",
        min_codepoint=0x0370,
    ),
    max_size=80,
)


@given(OTHER_SCRIPTS)
def test_text_in_other_scripts_is_left_alone(text: str) -> None:
    assert redact_pii(text) == (text, ())


@given(OTHER_SCRIPTS, OTHER_SCRIPTS)
def test_pii_inside_text_in_other_scripts_is_found_and_the_rest_kept(before: str, after: str) -> None:
    text = f"{before} ada@example.com {after}"
    assert redact_pii(text) == (f"{before} [EMAIL] {after}", ("email",))


@given(
    st.lists(
        st.sampled_from(
            ["Hi there. ", "Mail x@y.org now. ", "Card 4111 1111 1111 1111! ", "ok\n\n", "2.50. "]
        ),
        max_size=30,
    )
)
def test_the_incremental_scan_answers_as_a_scan_of_the_whole_text(parts: list[str]) -> None:
    guard = pii_guard()
    released = ""
    for part in parts:  # as a sentence-mode output guard asks it: the released text, then more
        text = released + part
        released, _ = guard._scan(text)
        assert released == redact_pii(text)[0]
    assert released == redact_pii("".join(parts))[0]


def test_overlapping_finds_keep_one() -> None:
    assert find_pii("x ada@1.2.3.4.example.com y") == [(2, 25, "email")]


async def test_keyword_guard_matches_whole_words_case_insensitively() -> None:
    guard = keyword_guard(["pass word", "hack"], message="No.")
    assert await guard("how to HACK it", OUT) == GuardResult(False, "No.")
    assert await guard("a pass word here", OUT) == GuardResult(False, "No.")
    assert await guard("hackathon and shack", OUT) == GuardResult(True)
    with pytest.raises(ValueError, match="non-blank"):
        keyword_guard(["ok", " "])
    with pytest.raises(TypeError, match="sequence"):
        keyword_guard("hack")


async def test_max_length_guard_trips_past_its_limit() -> None:
    guard = max_length_guard(5)
    assert await guard("12345", OUT) == GuardResult(True)
    result = await guard("123456", OUT)
    assert not result.passed and result.message == "the text is longer than 5 characters"
    with pytest.raises(ValueError):
        max_length_guard(-1)


async def test_llm_guard_asks_the_judge_for_a_structured_verdict() -> None:
    judge = ScriptedChatModel(
        [
            json.dumps({"violates": True, "reason": "medical advice"}),
            json.dumps({"violates": False, "reason": "fine"}),
        ]
    )
    guard = llm_guard(judge, "No medical advice.", name="policy")
    client = ChatClient(
        ScriptedChatModel(["answer"]), default_advisors=[InputGuardrailAdvisor(guard, parallel=False)]
    )
    with pytest.raises(GuardrailTripped) as info:
        await client.prompt("what pill should I take?").acall().content()
    assert info.value.guard == "policy" and info.value.message == "medical advice"
    asked = judge.prompts[0].last_user_message
    assert asked is not None and "No medical advice." in asked.text and "what pill" in asked.text
    assert await client.prompt("hello").acall().content() == "answer"


async def test_llm_guard_fails_closed_on_a_verdict_that_never_parses() -> None:
    judge = ScriptedChatModel(["not json"] * 4)
    guard = llm_guard(judge, "Be nice.")
    with pytest.raises(GuardrailError) as info:
        await guard("x", OUT)
    assert info.value.guard == "llm_guard"
    with pytest.raises(ValueError, match="policy"):
        llm_guard(judge, " ")


def test_random_text_round_trips_unchanged_apart_from_its_finds() -> None:
    rng = random.Random(7)
    words = ["alpha", "beta", "2.50", "v1.2", "x@y.org", "+1 202 555 0147", "call", "42."]
    for _ in range(200):
        text = "; ".join(rng.choice(words) for _ in range(12))  # numbers that touch are one number
        redacted, _ = redact_pii(text)
        assert redacted.replace("[EMAIL]", "x@y.org").replace("[PHONE]", "+1 202 555 0147") == text
