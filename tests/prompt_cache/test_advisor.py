"""PromptCacheAdvisor (API.md §21): its marks, its cache key, the cache report and ``cache_miss``,
memory without marks, and the budget's estimate of a cached prefix — through a ChatClient, on the
call and the stream path, with the real Anthropic adapter on a loopback server that emulates
prefix caching where the provider's counts matter."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisorchain import (
    AdvisorParams,
    AssistantMessage,
    BaseAdvisor,
    CacheReport,
    ChatClient,
    ChatClientMessageAggregator,
    ChatClientRequest,
    ChatClientResponse,
    ChatMemory,
    ChatOptions,
    ChatResponse,
    ChatResponseMetadata,
    FunctionChatModel,
    Generation,
    InMemoryChatMemoryRepository,
    Message,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    ModelPrice,
    Prompt,
    PromptCacheAdvisor,
    SystemMessage,
    ToolCall,
    Usage,
    UsageLimitExceeded,
    UsageLimits,
    UserMessage,
)
from advisorchain.advisors import CacheReport as AdvisorsCacheReport
from advisorchain.advisors import PromptCacheAdvisor as AdvisorsPromptCacheAdvisor
from advisorchain.advisors import prompt_cache
from advisorchain.tools.function import tool
from tests.support.anthropic_cache import CacheEmulator
from tests.support.openai_server import running_server

anthropic = pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
from advisorchain.models.anthropic import AnthropicChatModel  # noqa: E402

SYSTEM = "You are the release assistant. " * 200


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _rounds(n: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An answer script: a tool call per round until ``n`` rounds ran, then text."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        done = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return {"tool": "lookup", "input": {"key": f"k{done}"}} if done < n else {"text": "done"}

    return reply


async def _run(client: ChatClient, spec: Any, *, stream: bool) -> ChatClientResponse:
    if stream:
        chunks = [c async for c in spec.astream().chat_client_responses()]
        whole = ChatClientMessageAggregator.aggregate_responses(chunks)
        assert whole.context == chunks[-1].context  # what the stream ends with
        return whole
    response: ChatClientResponse = await spec.acall().chat_client_response()
    return response


# -- construction and exports ---------------------------------------------------------------------------


def test_the_advisor_and_the_report_are_exported_from_the_advisors_and_the_top_level() -> None:
    assert PromptCacheAdvisor is AdvisorsPromptCacheAdvisor and CacheReport is AdvisorsCacheReport
    assert PromptCacheAdvisor.DEFAULT_ORDER == 2**31 - 1 - 100
    assert PromptCacheAdvisor().order == PromptCacheAdvisor.DEFAULT_ORDER


@pytest.mark.parametrize("ttl", ["10m", "5M", "", None, 300])
def test_a_ttl_other_than_5m_or_1h_is_a_value_error_naming_it(ttl: Any) -> None:
    with pytest.raises(
        ValueError, match=r"PromptCacheAdvisor\(ttl=\.\.\.\).*" + repr(ttl).replace("(", r"\(")
    ):
        PromptCacheAdvisor(ttl=ttl)


def test_the_report_is_a_frozen_value() -> None:
    report = CacheReport(90, 10, 100)
    with pytest.raises(AttributeError):
        report.read_tokens = 1  # type: ignore[misc]
    assert report == CacheReport(90, 10, 100, None, None) and report.cached_share == 0.9


# -- marks -----------------------------------------------------------------------------------------------


def _request(
    messages: list[Message], options: ChatOptions | None = None, **context: Any
) -> ChatClientRequest:
    return ChatClientRequest(Prompt(messages, options), context)


def test_it_marks_the_last_system_message_and_the_last_message_with_its_ttl() -> None:
    messages: list[Message] = [
        SystemMessage("a"),
        SystemMessage("b", {"origin": "mine"}),
        UserMessage("q", {"cache_point": "5m"}),
    ]
    out = PromptCacheAdvisor(ttl="1h").prepare(_request(messages)).prompt.instructions
    assert out[0] == SystemMessage("a")
    assert out[1] == SystemMessage("b", {"origin": "mine", "cache_point": "1h"})
    assert out[2] == UserMessage("q", {"cache_point": "1h"})  # its ttl over the caller's value


def test_it_keeps_the_newest_two_of_the_callers_other_marks_and_takes_off_the_rest() -> None:
    messages: list[Message] = [UserMessage(f"m{i}", {"cache_point": "5m", "i": i}) for i in range(5)]
    messages.append(UserMessage("last"))
    out = PromptCacheAdvisor().prepare(_request(messages)).prompt.instructions
    assert [m.metadata for m in out[:5]] == [
        {"i": 0},
        {"i": 1},
        {"i": 2},
        {"cache_point": "5m", "i": 3},
        {"cache_point": "5m", "i": 4},
    ]
    assert out[5].metadata == {"cache_point": "5m"}


_MESSAGES = st.lists(
    st.tuples(
        st.sampled_from(["system", "user", "assistant"]),
        st.text(max_size=5),
        st.sampled_from([None, "5m", "1h"]),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(_MESSAGES, st.sampled_from(["5m", "1h"]))
def test_marks_never_change_text_or_other_metadata_and_stay_within_four(spec: list[Any], ttl: Any) -> None:
    kinds = {"system": SystemMessage, "user": UserMessage, "assistant": AssistantMessage}
    messages: list[Message] = [
        kinds[kind](text, {"k": i, **({"cache_point": mark} if mark else {})})
        for i, (kind, text, mark) in enumerate(spec)
    ]
    out = PromptCacheAdvisor(ttl=ttl).prepare(_request(messages)).prompt.instructions
    assert len(out) == len(messages)
    for before, after in zip(messages, out, strict=True):
        assert type(before) is type(after) and before.text == after.text
        assert {k: v for k, v in after.metadata.items() if k != "cache_point"} == {
            k: v for k, v in before.metadata.items() if k != "cache_point"
        }
    marked = [i for i, m in enumerate(out) if "cache_point" in m.metadata]
    assert len(marked) <= 4
    if messages:
        assert out[-1].metadata["cache_point"] == ttl
        systems = [i for i, m in enumerate(messages) if isinstance(m, SystemMessage)]
        if systems:
            assert out[systems[-1]].metadata["cache_point"] == ttl
        callers = [i for i, m in enumerate(messages) if "cache_point" in m.metadata]
        own = {len(messages) - 1, *(systems[-1:])}
        kept = [i for i in callers if i not in own][-2:]
        assert set(marked) == own | set(kept)


# -- the cache key ---------------------------------------------------------------------------------------


def _digest(kind: str, *parts: str) -> str:
    hasher = hashlib.sha256(kind.encode())
    for part in parts:
        hasher.update(b"\0" + part.encode())
    return "advisorchain-" + hasher.hexdigest()[:32]


def test_the_cache_key_is_a_digest_of_the_conversation_id_never_the_id() -> None:
    request = _request([UserMessage("q")], **{ChatMemory.CONVERSATION_ID: "customer-42"})
    key = PromptCacheAdvisor().prepare(request).prompt.options.cache_key  # type: ignore[union-attr]
    assert key == _digest("conversation", "customer-42")
    assert "customer-42" not in (key or "")
    assert PromptCacheAdvisor().prepare(request).prompt.options.cache_key == key  # type: ignore[union-attr]


def test_without_a_conversation_the_key_is_a_digest_of_the_system_text_and_the_tool_names() -> None:
    options = ChatOptions(tool_callbacks=[lookup])
    request = _request([SystemMessage("old"), SystemMessage("rules"), UserMessage("q")], options)
    out = PromptCacheAdvisor().prepare(request).prompt.options
    assert out is not None and out.cache_key == _digest("prompt", "rules", "lookup")
    assert out.tool_callbacks == options.tool_callbacks


def test_a_key_the_caller_gave_is_kept() -> None:
    request = _request([UserMessage("q")], ChatOptions(cache_key="mine"), **{ChatMemory.CONVERSATION_ID: "c"})
    assert PromptCacheAdvisor().prepare(request).prompt.options.cache_key == "mine"  # type: ignore[union-attr]


# -- the report, on the real adapter with emulated caching ------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_loop_reads_each_rounds_prefix_from_the_cache(stream: bool) -> None:
    emulator = CacheEmulator(_rounds(6))
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        client = ChatClient(model, default_system=SYSTEM, default_advisors=[PromptCacheAdvisor()])
        last = await _run(client, client.prompt("release 1.2").tools(lookup), stream=stream)
    usages = emulator.usages
    assert len(usages) == 7
    assert usages[0]["cache_read_input_tokens"] == 0 and usages[0]["cache_creation_input_tokens"] > 0
    for before, now in itertools.pairwise(usages):
        assert (
            now["cache_read_input_tokens"]
            == before["cache_read_input_tokens"] + before["cache_creation_input_tokens"]
        )
    report = last.context[AdvisorParams.CACHE_REPORT]
    final = usages[-1]
    total = sum(final[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
    assert report == CacheReport(
        final["cache_read_input_tokens"], final["cache_creation_input_tokens"], total
    )
    keys = {b.get("metadata", {}).get("user_id") for b in emulator.bodies}
    assert keys == {None}  # no cache key goes to Anthropic


class _Stamp(BaseAdvisor):
    """Writes a different timestamp into the system text from its ``from_call``-th call on (a bust)."""

    order = 10

    def __init__(self, from_call: int) -> None:
        self.calls = 0
        self.from_call = from_call

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.calls += 1
        if self.calls < self.from_call:
            return request
        messages = [
            SystemMessage(f"{m.text} Now: call {self.calls}.") if isinstance(m, SystemMessage) else m
            for m in request.prompt.instructions
        ]
        return request.copy(prompt=request.prompt.copy(instructions=messages))


def _events(spans: Any, name: str = "cache_miss") -> list[dict[str, Any]]:
    return [
        dict(e.attributes or {})
        for s in spans.get_finished_spans()
        if s.name.startswith("chat ")
        for e in s.events
        if e.name == name
    ]


@pytest.fixture(params=["traced", "untraced"])
def tracing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, spans: Any) -> Any:
    """Both ways the advisor reports: inside the model span (spans recorded) or after the call."""
    traced = request.param == "traced"
    monkeypatch.setattr(prompt_cache, "_traced", lambda: traced)
    return spans if traced else None


def _miss_events(tracing: Any) -> list[dict[str, Any]] | None:
    return None if tracing is None else _events(tracing)


async def _turns(client: ChatClient, texts: Sequence[str], *, stream: bool) -> list[CacheReport]:
    turns = [
        await _run(client, client.prompt(text).param(ChatMemory.CONVERSATION_ID, "c"), stream=stream)
        for text in texts
    ]
    return [t.context[AdvisorParams.CACHE_REPORT] for t in turns]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_changed_system_text_is_a_cache_miss_naming_the_message_and_the_advisor(
    stream: bool, tracing: Any
) -> None:
    emulator = CacheEmulator(lambda body: {"text": "ok"})
    stamp = _Stamp(from_call=3)
    memory = MessageChatMemoryAdvisor(MessageWindowChatMemory(InMemoryChatMemoryRepository()))
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        client = ChatClient(
            model, default_system=SYSTEM, default_advisors=[memory, stamp, PromptCacheAdvisor()]
        )
        reports = await _turns(client, ("one", "two", "three"), stream=stream)
    assert reports[1].read_tokens > 0 and reports[1].changed_index is None
    assert reports[2].read_tokens == 0
    assert (reports[2].changed_index, reports[2].changed_by) == (0, "_Stamp")
    events = _miss_events(tracing)
    if events is not None:
        assert events == [
            {
                "advisorchain.cache.index": 0,
                "advisorchain.cache.role": "system",
                "advisorchain.cache.changed_by": "_Stamp",
            }
        ]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_memory_window_that_drops_old_messages_names_memory(stream: bool, tracing: Any) -> None:
    emulator = CacheEmulator(lambda body: {"text": "ok"})
    memory = MessageChatMemoryAdvisor(MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=4))
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        client = ChatClient(model, default_system=SYSTEM, default_advisors=[memory, PromptCacheAdvisor()])
        # Growing questions: the prompt grows even when the window drops the oldest turn.
        reports = await _turns(client, [f"q{i} " + "more " * (40 * i) for i in range(4)], stream=stream)
    assert [r.changed_index for r in reports[:2]] == [None, None]
    dropped = [r for r in reports if r.changed_index is not None]
    assert dropped and all(
        (r.changed_index, r.changed_by) == (1, "MessageChatMemoryAdvisor") for r in dropped
    )
    events = _miss_events(tracing)
    if events is not None:
        assert len(events) == len(dropped)
        assert all(e["advisorchain.cache.role"] == "user" for e in events)


class _ToolOrder(BaseAdvisor):
    """Reverses the tool definitions from its ``from_call``-th call on."""

    order = PromptCacheAdvisor.DEFAULT_ORDER - 10

    def __init__(self, from_call: int) -> None:
        self.calls, self.from_call = 0, from_call

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.calls += 1
        options = request.prompt.options
        if self.calls < self.from_call or options is None:
            return request
        reordered = options.copy(tool_callbacks=tuple(reversed(options.tool_callbacks)))
        return request.copy(prompt=request.prompt.copy(options=reordered))


@tool
def other(key: str) -> str:
    """Another tool."""
    return key


@pytest.mark.parametrize("stream", [False, True])
async def test_reordered_tools_are_a_change_before_the_first_message(stream: bool, tracing: Any) -> None:
    emulator = CacheEmulator(_rounds(3))
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        client = ChatClient(
            model, default_system=SYSTEM, default_advisors=[_ToolOrder(3), PromptCacheAdvisor()]
        )
        last = await _run(client, client.prompt("go").tools(lookup, other), stream=stream)
    assert emulator.usages[2]["cache_read_input_tokens"] == 0  # the tools come first: nothing read
    report = last.context[AdvisorParams.CACHE_REPORT]
    assert report.read_tokens > 0  # the round after reads again
    events = _miss_events(tracing)
    if events is not None:
        assert events == [
            {
                "advisorchain.cache.tools": True,
                "advisorchain.cache.index": 0,
                "advisorchain.cache.role": "system",
                "advisorchain.cache.changed_by": "_ToolOrder",
            }
        ]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_change_in_the_callers_own_input_names_no_advisor(stream: bool, tracing: Any) -> None:
    emulator = CacheEmulator(lambda body: {"text": "ok"})
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        client = ChatClient(model, default_system=SYSTEM, default_advisors=[PromptCacheAdvisor()])
        first = [UserMessage("first question " * 30), AssistantMessage("first answer")]
        edited = [UserMessage("first question, edited " * 30), AssistantMessage("first answer")]
        later = [UserMessage("second"), AssistantMessage("ok")]
        for messages in (
            [*first, UserMessage("second")],
            [*first, *later, UserMessage("third " * 40)],
            [*edited, *later, UserMessage("fourth " * 80)],  # the caller rewrote its first message
        ):
            spec = client.prompt().messages(*messages).param(ChatMemory.CONVERSATION_ID, "mine")
            last = await _run(client, spec, stream=stream)
    report = last.context[AdvisorParams.CACHE_REPORT]
    assert (report.changed_index, report.changed_by) == (1, None)
    events = _miss_events(tracing)
    if events is not None:
        assert events == [{"advisorchain.cache.index": 1, "advisorchain.cache.role": "user"}]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_expired_cache_is_a_miss_that_names_no_message(stream: bool, spans: Any) -> None:
    emulator = CacheEmulator(_rounds(2))
    advisor = PromptCacheAdvisor()

    def expire_after_first(body: dict[str, Any]) -> dict[str, Any]:
        if len(emulator.bodies) == 2:
            emulator.written.clear()  # the next request finds nothing written
        return _rounds(2)(body)

    emulator.reply = expire_after_first
    with running_server(emulator) as server:
        model = AnthropicChatModel("claude-x", base_url=server.url, api_key="k")
        client = ChatClient(model, default_system=SYSTEM, default_advisors=[advisor])
        last = await _run(client, client.prompt("go").tools(lookup), stream=stream)
    assert emulator.usages[2]["cache_read_input_tokens"] == 0
    assert _events(spans) == [{}]
    assert last.context[AdvisorParams.CACHE_REPORT].changed_index is None


@pytest.mark.parametrize("stream", [False, True])
async def test_a_model_that_reports_no_cache_fields_gets_a_report_of_zeros_and_no_event(
    stream: bool, spans: Any
) -> None:
    def answer(prompt: Prompt) -> ChatResponse:
        usage = Usage(10 * len(prompt.instructions), 2)
        return ChatResponse((Generation(AssistantMessage("ok"), "stop"),), ChatResponseMetadata(usage=usage))

    client = ChatClient(FunctionChatModel(answer), default_advisors=[PromptCacheAdvisor()])
    last = await _run(client, client.prompt("q"), stream=stream)
    assert last.context[AdvisorParams.CACHE_REPORT] == CacheReport(0, 0, 10)
    assert _events(spans) == []


@pytest.mark.parametrize("stream", [False, True])
async def test_a_model_that_reports_no_usage_gets_an_empty_report(stream: bool) -> None:
    client = ChatClient(FunctionChatModel(lambda prompt: "ok"), default_advisors=[PromptCacheAdvisor()])
    last = await _run(client, client.prompt("q"), stream=stream)
    assert last.context[AdvisorParams.CACHE_REPORT] == CacheReport(0, 0, 0)


# -- memory never stores a mark ----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_memory_stores_messages_without_their_cache_points(stream: bool) -> None:
    repository = InMemoryChatMemoryRepository()
    memory = MessageChatMemoryAdvisor(MessageWindowChatMemory(repository))
    seen: list[Prompt] = []

    def answer(prompt: Prompt) -> AssistantMessage:
        seen.append(prompt)
        return AssistantMessage("ok", (), {"note": "kept"})

    client = ChatClient(FunctionChatModel(answer), default_advisors=[memory, PromptCacheAdvisor()])
    question = UserMessage("remember me", {"cache_point": "1h", "tag": "t"})
    await _run(
        client, client.prompt().messages(question).param(ChatMemory.CONVERSATION_ID, "c"), stream=stream
    )
    assert seen[0].instructions[-1].metadata["cache_point"] == "5m"  # the model saw the advisor's mark
    stored = repository.find_by_conversation_id("c")
    assert stored and all("cache_point" not in m.metadata for m in stored)
    assert stored[0] == UserMessage("remember me", {"tag": "t"})


# -- the budget's estimate prices the cached prefix at the cache-read rate ---------------------------------


def _priced_loop(prompt_tokens: list[tuple[int, int]]) -> FunctionChatModel:
    """Two tool rounds and an answer; each call reports (prompt tokens, cache-read tokens)."""
    calls = iter(prompt_tokens)

    def answer(prompt: Prompt) -> ChatResponse:
        done = sum(1 for m in prompt.instructions if isinstance(m, AssistantMessage))
        message = (
            AssistantMessage(None, (ToolCall(f"c{done}", "lookup", '{"key": "k"}'),))
            if done < 2
            else AssistantMessage("done")
        )
        tokens, read = next(calls)
        usage = Usage(tokens, 0, read)
        return ChatResponse((Generation(message, None),), ChatResponseMetadata(model="m", usage=usage))

    return FunctionChatModel(answer)


CALLS = [(100, 0), (120, 100), (140, 120)]
"""Each call reads the previous one's prompt from the cache: $100, then $30, then $32 spent."""

PRICES = {"m": ModelPrice(input_per_mtok=1_000_000, output_per_mtok=0, cache_read_per_mtok=100_000)}
"""$1 a prompt token, $0.10 a cached one."""


@pytest.mark.parametrize("stream", [False, True])
async def test_the_estimate_prices_the_expected_cached_prefix_at_the_cache_read_rate(stream: bool) -> None:
    limits = UsageLimits(cost_limit=Decimal(240))
    cached = ChatClient(
        _priced_loop(CALLS),
        prices=PRICES,
        usage_limits=limits,
        default_advisors=[PromptCacheAdvisor()],
    )
    last = await _run(cached, cached.prompt("q").tools(lookup), stream=stream)
    assert last.chat_response is not None and last.chat_response.text == "done"

    plain = ChatClient(_priced_loop(CALLS), prices=PRICES, usage_limits=limits)
    with pytest.raises(UsageLimitExceeded) as raised:
        await _run(plain, plain.prompt("q").tools(lookup), stream=stream)
    # Priced at the input rate, the third prompt (about 135 tokens) would pass $240 after $130 spent.
    assert raised.value.when == "before_request" and raised.value.limit_name == "cost_limit"
    assert raised.value.run_usage.requests == 2


# -- the CLI -------------------------------------------------------------------------------------------------


def test_the_usage_line_shows_the_cached_share_when_the_run_used_the_cache() -> None:
    from advisorchain.cli._display import usage_line

    assert "91% cached" in usage_line(Usage(1000, 10, 915, 40))
    assert "0% cached" in usage_line(Usage(1000, 10, 0, 900))
    assert "cached" not in usage_line(Usage(1000, 10))


def test_cache_adds_the_advisor_with_its_defaults() -> None:
    from advisorchain.cli._agent import agent_client
    from advisorchain.tools import ToolCallingManager

    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    model = FunctionChatModel(lambda prompt: "ok")
    with_cache = agent_client(model, None, [], memory, ToolCallingManager(), cache=True)
    without = agent_client(model, None, [], memory, ToolCallingManager())
    found = [a for a in with_cache.default_advisors if isinstance(a, PromptCacheAdvisor)]
    assert len(found) == 1 and found[0].ttl == "5m" and found[0].order == PromptCacheAdvisor.DEFAULT_ORDER
    assert not any(isinstance(a, PromptCacheAdvisor) for a in without.default_advisors)
