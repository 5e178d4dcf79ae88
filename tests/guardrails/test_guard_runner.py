"""A guard: a plain function (sync in a worker thread, async on the loop) answering a bool or a
GuardResult; junk and failures fail closed; names, contexts, spans; several guards at once."""

from __future__ import annotations

import asyncio
import threading

import pytest

from advisorchain import (
    AdvisorChainError,
    ChatClient,
    GuardContext,
    GuardrailError,
    GuardrailTripped,
    GuardResult,
    InputGuardrailAdvisor,
    ScriptedChatModel,
)
from advisorchain.guards import guard_name, run_guards

INPUT = GuardContext("input")


async def test_a_sync_guard_runs_in_a_worker_thread_and_an_async_one_on_the_loop() -> None:
    seen: dict[str, int] = {}

    def sync_guard(text: str, context: GuardContext) -> bool:
        seen["sync"] = threading.get_ident()
        return True

    async def async_guard(text: str, context: GuardContext) -> bool:
        seen["async"] = threading.get_ident()
        return True

    verdict = await run_guards((sync_guard, async_guard), "hi", INPUT)
    assert verdict.passed and verdict.text == "hi"
    assert seen["async"] == threading.get_ident()
    assert seen["sync"] != threading.get_ident()


@pytest.mark.parametrize(
    ("answer", "passed", "text"),
    [
        (True, True, "hi"),
        (False, False, "hi"),
        (GuardResult(True), True, "hi"),
        (GuardResult(False, "no"), False, "hi"),
        (GuardResult(True, replacement="HI"), True, "HI"),
    ],
)
async def test_bool_and_guard_result_answers(answer: object, passed: bool, text: str) -> None:
    verdict = await run_guards((lambda t, c: answer,), "hi", INPUT)
    assert verdict.passed is passed
    assert verdict.text == text


@pytest.mark.parametrize("junk", [None, 1, "yes", 0.0, [True]])
async def test_a_guard_that_answers_junk_fails_closed(junk: object) -> None:
    def junky(text: str, context: GuardContext) -> object:
        return junk

    with pytest.raises(GuardrailError) as info:
        await run_guards((junky,), "hi", INPUT)
    assert info.value.guard == "junky" and info.value.kind == "input"
    assert "junky" in str(info.value) and "bool or a GuardResult" in str(info.value)


async def test_a_guard_that_raises_fails_closed_with_its_error_as_cause() -> None:
    async def broken(text: str, context: GuardContext) -> bool:
        raise KeyError("secret text")

    with pytest.raises(GuardrailError) as info:
        await run_guards((broken,), "my secret text", INPUT)
    assert isinstance(info.value.__cause__, KeyError)
    assert "secret" not in str(info.value)  # the error names the guard, never the text


def test_guardrail_tripped_and_guardrail_error_are_two_unrelated_errors() -> None:
    assert issubclass(GuardrailTripped, AdvisorChainError) and issubclass(GuardrailError, AdvisorChainError)
    assert not issubclass(GuardrailTripped, GuardrailError) and not issubclass(
        GuardrailError, GuardrailTripped
    )


def test_guard_result_checks_its_fields() -> None:
    with pytest.raises(ValueError, match="replacement"):
        GuardResult(False, replacement="x")
    with pytest.raises(TypeError):
        GuardResult("yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        GuardResult(True, message=3)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        GuardResult(True).passed = False  # type: ignore[misc]


def test_a_guards_name_is_its_name_attribute_else_its_function_name() -> None:
    def plain(text: str, context: GuardContext) -> bool:
        return True

    class Named:
        name = "custom"

        def __call__(self, text: str, context: GuardContext) -> bool:
            return True

    class NotAStr:
        name = 3

        def __call__(self, text: str, context: GuardContext) -> bool:
            return True

    assert guard_name(plain) == "plain"
    assert guard_name(Named()) == "custom"
    assert guard_name(NotAStr()) == "NotAStr"


def test_the_guard_context_is_a_read_only_mapping_with_only_what_is_known() -> None:
    context = GuardContext("tool_call", tool_name="t", tool_call_id="c1", conversation_id="u1")
    assert dict(context) == {
        "kind": "tool_call",
        "conversation_id": "u1",
        "tool_name": "t",
        "tool_call_id": "c1",
    }
    assert context.agent is None and "agent" not in context
    assert context.kind == "tool_call" and context["tool_name"] == "t"
    with pytest.raises(TypeError):
        context["kind"] = "input"  # type: ignore[index]
    with pytest.raises(ValueError, match="kind"):
        GuardContext("answer")  # type: ignore[arg-type]


async def test_guards_run_concurrently() -> None:
    started = asyncio.Event()

    async def waits(text: str, context: GuardContext) -> bool:
        await started.wait()  # would never end if the guards ran one after another
        return True

    async def starts(text: str, context: GuardContext) -> bool:
        started.set()
        return True

    verdict = await asyncio.wait_for(run_guards((waits, starts), "hi", INPUT), 30)
    assert verdict.passed


async def test_the_first_trip_cancels_the_guards_still_running() -> None:
    cancelled = asyncio.Event()

    async def forever(text: str, context: GuardContext) -> bool:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return True

    async def trips(text: str, context: GuardContext) -> GuardResult:
        return GuardResult(False, "no")

    verdict = await asyncio.wait_for(run_guards((forever, trips), "hi", INPUT), 30)
    assert verdict.tripped is not None and verdict.tripped[0] == "trips"
    assert cancelled.is_set()


async def test_replacements_of_several_guards_all_apply() -> None:
    def no_a(text: str, context: GuardContext) -> GuardResult:
        return GuardResult(True, replacement=text.replace("a", "_")) if "a" in text else GuardResult(True)

    def no_b(text: str, context: GuardContext) -> GuardResult:
        return GuardResult(True, replacement=text.replace("b", "_")) if "b" in text else GuardResult(True)

    verdict = await run_guards((no_a, no_b), "abc", INPUT)
    assert verdict.passed and verdict.text == "__c"


async def test_each_guard_run_is_a_span_with_kind_and_verdict_and_never_the_text(spans: object) -> None:
    def on_topic(text: str, context: GuardContext) -> bool:
        return True

    def strict(text: str, context: GuardContext) -> bool:
        return False

    client = ChatClient(ScriptedChatModel(["fine"]), default_advisors=[InputGuardrailAdvisor(on_topic)])
    await client.prompt("a secret question").acall().content()
    blocked = ChatClient(
        ScriptedChatModel(["x"]), default_advisors=[InputGuardrailAdvisor(strict, parallel=False)]
    )
    with pytest.raises(GuardrailTripped):
        await blocked.prompt("a secret question").acall().content()
    finished = spans.get_finished_spans()  # type: ignore[attr-defined]
    guard_spans = {s.name: s for s in finished if s.name.startswith("guardrail ")}
    assert guard_spans["guardrail on_topic"].attributes["advisorchain.guardrail.kind"] == "input"
    assert guard_spans["guardrail on_topic"].attributes["advisorchain.guardrail.passed"] is True
    assert guard_spans["guardrail strict"].attributes["advisorchain.guardrail.passed"] is False
    for s in finished:
        assert all("secret" not in str(v) for v in (s.attributes or {}).values())


async def test_a_failing_guards_span_says_not_passed(spans: object) -> None:
    def broken(text: str, context: GuardContext) -> bool:
        raise RuntimeError("boom")

    with pytest.raises(GuardrailError):
        await run_guards((broken,), "hi", INPUT)
    (span,) = [s for s in spans.get_finished_spans() if s.name == "guardrail broken"]  # type: ignore[attr-defined]
    assert span.attributes["advisorchain.guardrail.passed"] is False
