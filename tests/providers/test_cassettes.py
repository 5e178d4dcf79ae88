"""Every recorded cassette, replayed through the real SDK clients into the adapters.

For each cassette the adapter is driven through every recorded request as a client would drive it
(cassette_support.replay_run). Two checks per cassette: the answers it parsed (text, tool calls
with exact arguments and ids, finish reason, usage, reasoning kept out of the text, errors as
ModelError), and the requests it built (the same conversation as the recording — roles, text,
tool-call ids and arguments, tool-result pairing, order — the same tools and the same other fields).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.providers.cassette_support import (
    Round,
    anthropic_view,
    cassette_dir,
    cassette_names,
    openai_view,
    read,
    recorded_body,
    replay_run,
    tools_view,
    top_level,
)

# Both Anthropic SDK warnings are about the recorded model names, not about the adapter.
pytestmark = [
    pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Using Claude with .* is deprecated:UserWarning"),
]

MADE_UP = "<made up>"
"""In an expected tool call: the provider sent an empty id, so the adapter made one up."""


@dataclass(frozen=True)
class Answer:
    """What the adapter must make of one recorded answer."""

    text: str | None = None
    ends: str | None = None  # for long answers: ``text`` is the start, ``ends`` the end
    calls: tuple[tuple[str, str, str], ...] = ()
    finish: str = "stop"
    usage: tuple[int, int] | None = None
    reasoning: str | None = None  # the start of metadata["reasoning"]


@dataclass(frozen=True)
class Failure:
    """The ModelError the adapter must raise for one recorded failure."""

    status: int
    error_type: str | None
    message: str


EXPECTED: dict[str, list[Answer | Failure]] = {
    # -- OpenAI --------------------------------------------------------------------------------
    "openai_text_simple.json": [Answer("The capital of France is Paris.", usage=(14, 7))],
    "openai_tool_call_roundtrip.json": [
        Answer(
            calls=(("call_bhZkmIKKItNGJ41whHUHB7p9", "get_temperature", '{"city":"Tokyo"}'),),
            finish="tool_calls",
            usage=(50, 15),
        ),
        Answer("The temperature in Tokyo is currently 20.0 degrees Celsius.", usage=(75, 15)),
    ],
    "openai_parallel_tool_calls_roundtrip.json": [
        Answer(
            calls=(
                ("call_jYdIdRZHxZTn5bWCq5jlMrJi", "delete_file", '{"path": ".env"}'),
                ("call_TmlTVWQbzrXCZ4jNsCVNbNqu", "create_file", '{"path": "test.txt"}'),
            ),
            finish="tool_calls",
            usage=(71, 46),
        ),
        Answer(
            "The file `.env` has been deleted and `test.txt` has been created successfully.", usage=(133, 19)
        ),
    ],
    "openai_json_schema_output.json": [
        Answer(
            calls=(("call_PkRGedQNRFUzJp2R7dO7avWR", "get_user_country", "{}"),),
            finish="tool_calls",
            usage=(71, 12),
        ),
        Answer('{"city":"Mexico City","country":"Mexico"}', usage=(92, 15)),
    ],
    "openai_error_400_unsupported_system_role.json": [
        Failure(400, "invalid_request_error", "does not support 'system' with this model")
    ],
    "openai_error_404_model_not_found.json": [
        Failure(404, "invalid_request_error", "The model `gpt-5.2-proo` does not exist")
    ],
    "openai_stream_text.json": [Answer("The capital of Mexico is Mexico City.", usage=(14, 8))],
    "openai_stream_tool_call_roundtrip.json": [
        Answer(
            calls=(("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", '{"country":"UK"}'),),
            finish="tool_calls",
            usage=(53, 15),
        ),
        Answer("The capital of the UK is London.", usage=(78, 9)),
    ],
    "openai_stream_parallel_tool_calls.json": [
        Answer(
            calls=(
                ("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", "{}"),
                ("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name", "{}"),
            ),
            finish="tool_calls",
            usage=(364, 40),
        ),
        Answer(
            calls=(("call_LwxJUB9KppVyogRRLQsamRJv", "get_weather", '{"city":"Mexico City"}'),),
            finish="tool_calls",
            usage=(423, 15),
        ),
        Answer(
            calls=(
                (
                    "call_CCGIWaMeYWmxOQ91orkmTvzn",
                    "final_result",
                    '{"answers":[{"label":"Capital","answer":"The capital of Mexico is Mexico City."},'
                    '{"label":"Weather","answer":"The weather in Mexico City is currently sunny."},'
                    '{"label":"Product Name","answer":"The product name is Pydantic AI."}]}',
                ),
            ),
            finish="tool_calls",
            usage=(448, 62),
        ),
    ],
    "gemini_openai_compat_tool_call_empty_id.json": [
        Answer(calls=((MADE_UP, "get_current_time", "{}"),), finish="tool_calls", usage=(35, 12)),
        Answer("The current time is Noon.", usage=(66, 6)),
    ],
    "deepseek_parallel_tool_calls_reasoning.json": [
        Answer(
            "Let me load the dice rolling capability!",
            calls=(("call_00_sXqYgMESDht75NCLLZtt9804", "load_capability", '{"id": "DICE_ROLL"}'),),
            finish="tool_calls",
            usage=(563, 116),
            reasoning="The user wants to play a dice game.",
        ),
        Answer(
            "Let me get your name and roll the die!",
            calls=(
                ("call_00_6edlnw3Z1MgeMfey687g8451", "get_player_name", "{}"),
                ("call_01_km02sac7sHxNDPATKLZy7705", "roll_dice", "{}"),
            ),
            finish="tool_calls",
            usage=(875, 79),
            reasoning="Great, now I have access to the dice roll tool.",
        ),
        Answer(
            "🎉 **Congratulations, Anne!** You're a winner!",
            ends="Lucky you! 🎲",
            usage=(976, 61),
            reasoning="The player's name is Anne",
        ),
    ],
    "deepseek_stream_reasoning_text.json": [
        Answer(
            "Hello there! 😊 How can I help you today?",
            usage=(6, 212),
            reasoning='Hmm, the user just said "Hello".',
        )
    ],
    "groq_parallel_tool_calls_short_ids.json": [
        Answer(
            calls=(
                ("rew01jq49", "get_weather", '{"city":"Paris"}'),
                ("gbpypqxpx", "final_result", '{"city":"Paris","summary":"Current weather in Paris"}'),
            ),
            finish="tool_calls",
            usage=(779, 65),
        )
    ],
    "groq_error_400_tool_use_failed_then_retry.json": [
        Failure(400, "invalid_request_error", "Tool call validation failed"),
        Answer(
            calls=(("fc_311ba17b-89f9-48d3-8fd9-7e74a1264855", "get_something_by_name", '{"name":"test"}'),),
            finish="tool_calls",
            usage=(301, 52),
            reasoning="We need to call with correct param: name",
        ),
        Answer(
            "The first call failed due to missing and extra parameters, as expected.",
            ends='returned: "Something with name: test".',
            usage=(336, 96),
            reasoning="We need to respond to user request.",
        ),
    ],
    "groq_stream_error_event_tool_use_failed.json": [
        Failure(400, "invalid_request_error", "Tool call validation failed"),
        Answer(
            calls=(
                ("fc_bfb39741-3748-4def-9886-a93fc9c64a90", "get_something_by_name", '{"name":"example"}'),
            ),
            finish="tool_calls",
            usage=(304, 49),
            reasoning="We need to call the function with correct parameter",
        ),
        Answer(
            "The tool returned the expected result for the valid call.",
            usage=(339, 58),
            reasoning="The user wants to test error handling",
        ),
    ],
    "groq_json_schema_output.json": [
        Answer('{"city":"Mexico City","country":"Mexico"}', usage=(178, 94), reasoning="The user asks:")
    ],
    "openrouter_tool_call_mistral.json": [
        Answer(
            calls=(("3sniiMddS", "divide", '{"numerator": 123, "denominator": 456, "on_inf": "infinity"}'),),
            finish="tool_calls",
            usage=(134, 43),
        )
    ],
    "openrouter_error_429_retries.json": [Failure(429, None, "Provider returned error")],
    "openrouter_stream_error_in_chunk.json": [Failure(400, None, "Token limit reached")],
    "mistral_text_tool_calls_null.json": [
        Answer("Hello! 😊 How can I assist you today?", ends="I'm here for you!", usage=(4, 36))
    ],
    "huggingface_text_nulls.json": [
        Answer(
            "Hello! How can I assist you with the image of the potato?",
            ends="information about it?",
            usage=(269, 27),
        )
    ],
    "ollama_prompted_retry_then_tool_call.json": [
        Answer(
            "Paris.",
            usage=(134, 122),
            reasoning='We need to answer question: "What is the capital of France?"',
        ),
        Answer(
            calls=(("call_o2vnpxrw", "final_result", '{"city":"Paris","country":"France"}'),),
            finish="tool_calls",
            usage=(206, 194),
            reasoning='The conversation: user asked "What is the capital of France?"',
        ),
    ],
    "crusoe_stream_text_usage.json": [Answer("1, 2, 3, 4, 5", usage=(46, 14))],
    "snowflake_stream_no_finish_reason.json": [Answer("4", usage=(22, 5))],
    # -- Anthropic -----------------------------------------------------------------------------
    "anthropic_text_simple.json": [Answer("The capital of France is Paris.", usage=(20, 10))],
    "anthropic_json_schema_output.json": [
        Answer('{"city":"London","country":"United Kingdom","population":9002488}', usage=(196, 19))
    ],
    "anthropic_parallel_tool_use_roundtrip.json": [
        Answer(
            "I'll help you find out who is the youngest",
            ends="compare their ages.",
            calls=(
                ("toolu_0167cfEnoQaPviGdVXA95zcu", "retrieve_entity_info", '{"name": "Alice"}'),
                ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "retrieve_entity_info", '{"name": "Bob"}'),
                ("toolu_01XFyAjstT3966qvRynZyVPo", "retrieve_entity_info", '{"name": "Charlie"}'),
                ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "retrieve_entity_info", '{"name": "Daisy"}'),
            ),
            finish="tool_calls",
            usage=(423, 202),
        ),
        Answer(
            "Based on the retrieved information",
            ends="youngest among the four family members.",
            usage=(771, 77),
        ),
    ],
    "anthropic_sequential_tool_use_run.json": [
        Answer(
            "I'll help you find the capital city using the available tools.",
            calls=(("toolu_01Ttepb9joVoQFHP568v7UAL", "country_source", "{}"),),
            finish="tool_calls",
            usage=(628, 50),
        ),
        Answer(
            calls=(("toolu_011j5uC2Tg3TZJo3nmLtJ8Mm", "capital_lookup", '{"country": "Japan"}'),),
            finish="tool_calls",
            usage=(691, 53),
        ),
        Answer("Capital: Tokyo", usage=(757, 6)),
    ],
    "anthropic_tool_use_with_thinking_roundtrip.json": [
        Answer(
            "I'll help you find the largest city in your country.",
            ends="which country you're from.",
            calls=(("toolu_01YGzqpRE16Vricda3Aqcejo", "get_user_country", "{}"),),
            finish="tool_calls",
            usage=(398, 155),
            reasoning='The user is asking about the largest city in "the user country".',
        ),
        Answer(
            "Based on the information that you're from Mexico", ends="center of Mexico.", usage=(566, 126)
        ),
    ],
    "anthropic_error_400_invalid_request.json": [
        Failure(400, "invalid_request_error", "This model does not support effort level 'xhigh'")
    ],
    "anthropic_error_404_model_not_found.json": [Failure(404, "not_found_error", "model: claude-sonet-4-5")],
    "anthropic_stream_text.json": [Answer("2", usage=(20, 5))],
    "anthropic_stream_thinking_text.json": [
        Answer(
            "Here are the basic steps for safely crossing the street:",
            ends="safety over speed when crossing streets.",
            usage=(43, 282),
            reasoning="This is a straightforward question about pedestrian safety.",
        )
    ],
    "anthropic_stream_redacted_thinking.json": [
        Answer(
            "I notice that you've sent what appears to be",
            ends="a legitimate task or question?",
            usage=(92, 189),
        )
    ],
    "anthropic_stream_tool_use_roundtrip.json": [
        Answer(
            # two text blocks around a server tool call, joined as streamed
            "Let me search for a tool that can provide current exchange rate information."
            "I found the right tool!",
            ends="USD to EUR exchange rate for you.",
            calls=(
                (
                    "toolu_01EFn5wTNBYA8Reni8rbmnHT",
                    "get_exchange_rate",
                    '{"from_currency": "USD", "to_currency": "EUR"}',
                ),
            ),
            finish="tool_calls",
            usage=(1591, 175),
        ),
        Answer(
            "The current exchange rate is **1 USD = 0.92 EUR**.", ends="throughout the day.", usage=(1007, 59)
        ),
    ],
    "anthropic_stream_server_tool_code_execution.json": [
        Answer(
            "I'll calculate that expression for you right away!",
            ends="Final Answer: **-428,330,955.97745**",
            usage=(4714, 304),
            reasoning="Let me calculate this mathematical expression.",
        )
    ],
}


def _all_cassettes() -> list[str]:
    return cassette_names("openai-chat") + cassette_names("anthropic-messages")


def _params(*, streamed: bool = False) -> list[object]:
    names = [n for n in _all_cassettes() if not streamed or recorded_body(n, 0).get("stream")]
    if names:
        return names
    reason = f"no cassette folder at {cassette_dir()} (set ADVISORCHAIN_CASSETTES to its path)"
    return [pytest.param("absent", marks=pytest.mark.skip(reason=reason))]


def test_every_cassette_has_expectations() -> None:
    names = _all_cassettes()
    if not names:
        pytest.skip(f"no cassette folder at {cassette_dir()} (set ADVISORCHAIN_CASSETTES to its path)")
    assert sorted(EXPECTED) == sorted(names)


@pytest.mark.parametrize("name", _params())
async def test_adapter_parses_every_recorded_answer(name: str) -> None:
    rounds, _ = await replay_run(name)
    assert len(rounds) == len(EXPECTED[name])
    for got, want in zip(rounds, EXPECTED[name], strict=True):
        if isinstance(want, Failure):
            _check_failure(got, want)
        else:
            _check_answer(got, want)


@pytest.mark.parametrize("name", _params())
async def test_adapter_sends_the_recorded_conversation(name: str) -> None:
    _, cassette = await replay_run(name)
    cassette.assert_exhausted()
    provider = read(name)["provider"]
    for index, request in enumerate(cassette.requests):
        sent, recorded = request.body, recorded_body(name, index)
        if provider == "openai-chat":
            # Gemini sent an empty id: the adapter's made-up id must pair the call with its result.
            relabel = name.startswith("gemini")
            assert openai_view(sent["messages"], relabel_ids=relabel) == openai_view(
                recorded["messages"], relabel_ids=relabel
            )
        else:
            assert anthropic_view(sent["messages"]) == anthropic_view(recorded["messages"])
        assert tools_view(sent) == tools_view(recorded)
        assert top_level(sent) == top_level(recorded)


@pytest.mark.parametrize("name", _params(streamed=True))
async def test_stream_chunks_carry_text_first_and_everything_else_last(name: str) -> None:
    rounds, _ = await replay_run(name)
    for got in (r for r in rounds if r.error is None):
        *deltas, last = got.chunks
        assert all(c.finish_reason is None and not c.has_tool_calls() and c.text for c in deltas)
        assert last.text is None
        assert last.finish_reason is not None
        assert last.metadata.usage is not None


def _check_failure(got: Round, want: Failure) -> None:
    assert got.response is None, f"expected a ModelError, the adapter answered {got.response!r}"
    assert got.error is not None
    assert got.error.status_code == want.status
    assert got.error.error_type == want.error_type
    assert want.message in str(got.error)


def _check_answer(got: Round, want: Answer) -> None:
    assert got.error is None, f"unexpected {got.error!r}"
    response = got.response
    assert response is not None and response.result is not None
    message = response.result.output
    if want.ends is None:
        assert message.text == want.text
    else:
        assert message.text is not None and want.text is not None
        assert message.text.startswith(want.text) and message.text.endswith(want.ends)
    _check_calls([(c.id, c.name, c.arguments) for c in message.tool_calls], list(want.calls))
    assert response.finish_reason == want.finish == response.result.finish_reason
    usage = response.metadata.usage
    assert ((usage.prompt_tokens, usage.completion_tokens) if usage else None) == want.usage
    reasoning = message.metadata.get("reasoning")
    if want.reasoning is None:
        assert reasoning is None
    else:
        assert isinstance(reasoning, str) and reasoning.startswith(want.reasoning)
        assert reasoning not in (message.text or "")


def _check_calls(got: list[tuple[str, str, str]], want: list[tuple[str, str, str]]) -> None:
    assert len(got) == len(want)
    for (got_id, *got_rest), (want_id, *want_rest) in zip(got, want, strict=True):
        assert got_rest == want_rest
        if want_id == MADE_UP:
            assert got_id.startswith("call_") and len(got_id) > len("call_")
        else:
            assert got_id == want_id
