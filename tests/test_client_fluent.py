"""The ChatClient's fluent conveniences (API.md §4): prompts from a Prompt, templates with a safe
renderer, media and metadata on the user message, default templates and params, mutate(),
spec.copy(), response_entity(), chat_responses(); and read-only contexts (§3)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from advisorchain import (
    AssistantMessage,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    ChatOptions,
    ChatResponse,
    Media,
    Prompt,
    ResponseEntity,
    SystemMessage,
    Usage,
    UserMessage,
)
from advisorchain._template import render
from advisorchain.testing import FunctionChatModel, ScriptedChatModel


def _sent(model: ScriptedChatModel) -> list[object]:
    return list(model.prompts[-1].instructions)


# -- templates --------------------------------------------------------------------------------------


def test_user_and_system_templates_fill_their_placeholders() -> None:
    model = ScriptedChatModel(["ok"])
    ChatClient(model).prompt().system("You speak {lang}.", lang="Norwegian").user(
        "Weather in {city} on {day}?", city="Oslo", day="Monday"
    ).call().content()
    assert _sent(model) == [SystemMessage("You speak Norwegian."), UserMessage("Weather in Oslo on Monday?")]


def test_without_params_the_text_is_sent_verbatim() -> None:
    model = ScriptedChatModel(["ok"])
    text = 'Return {"a": 1} and {name} as is'
    ChatClient(model).prompt(text).call().content()
    assert _sent(model) == [UserMessage(text)]


def test_double_braces_are_literal_braces_and_values_are_str() -> None:
    model = ScriptedChatModel(["ok"])
    ChatClient(model).prompt().user('{{"n": {n}}}', n=3).call().content()
    assert _sent(model) == [UserMessage('{"n": 3}')]


@pytest.mark.parametrize("placeholder", ["{a.b}", "{0}", "{x!r}", "{x:>5}", "{}", "{x.__class__}", "{x[0]}"])
def test_a_placeholder_that_is_not_a_plain_name_is_refused(placeholder: str) -> None:
    client = ChatClient(ScriptedChatModel([]))
    with pytest.raises(ValueError, match="placeholder") as info:
        client.prompt().user(f"look at {placeholder}", x="secret", a="a")
    assert placeholder in str(info.value)


def test_a_missing_value_names_the_placeholder() -> None:
    with pytest.raises(ValueError, match="'city'"):
        ChatClient(ScriptedChatModel([])).prompt().user("Weather in {city}?", town="Oslo")


def test_a_user_value_is_never_formatted_again() -> None:
    model = ScriptedChatModel(["ok"])
    ChatClient(model).prompt().user("Echo {text}", text="{x.__class__} {{y}}").call().content()
    assert _sent(model) == [UserMessage("Echo {x.__class__} {{y}}")]


def test_an_unused_param_is_allowed() -> None:
    model = ScriptedChatModel(["ok"])
    ChatClient(model).prompt().user("Hi {name}", name="Ada", unused=1).call().content()
    assert _sent(model) == [UserMessage("Hi Ada")]


@given(
    st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), st.text(), max_size=5), st.text()
)
def test_rendering_never_evaluates_anything_and_round_trips_escaped_text(
    params: dict[str, str], text: str
) -> None:
    escaped = text.replace("{", "{{").replace("}", "}}")
    assert render(escaped, params) == text
    template = "".join(f"{{{k}}}|" for k in params)
    assert render(template, params) == "".join(f"{v}|" for v in params.values())


# -- defaults --------------------------------------------------------------------------------------


def test_default_templates_take_default_and_request_params_request_winning() -> None:
    model = ScriptedChatModel(["ok", "ok"])
    client = ChatClient(
        model,
        default_system="You are {persona}, answer in {lang}.",
        default_system_params={"persona": "a pirate", "lang": "English"},
        default_user="Tell me about {topic}.",
        default_user_params={"topic": "ships"},
    )
    client.prompt().call().content()
    assert _sent(model) == [
        SystemMessage("You are a pirate, answer in English."),
        UserMessage("Tell me about ships."),
    ]
    client.prompt().system_params(lang="French").user_params(topic="rum").call().content()
    assert _sent(model) == [
        SystemMessage("You are a pirate, answer in French."),
        UserMessage("Tell me about rum."),
    ]


def test_a_requests_own_text_uses_only_its_own_params() -> None:
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_system="Default {x}", default_system_params={"x": "1"})
    client.prompt("q").system("Own {y}", y="2").system_params(x="ignored").call().content()
    assert _sent(model)[0] == SystemMessage("Own 2")
    with pytest.raises(ValueError, match="'x'"):
        client.prompt("q").system("Own {x}", y="2")


def test_a_default_template_missing_a_value_fails_at_the_terminal_operation() -> None:
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_user="About {topic}", default_user_params={"other": 1})
    spec = client.prompt()  # nothing raised yet
    with pytest.raises(ValueError, match="'topic'"):
        spec.call().content()
    assert model.prompts == []


def test_a_default_template_without_params_is_sent_verbatim() -> None:
    model = ScriptedChatModel(["ok"])
    ChatClient(model, default_system="JSON like {a: 1}").prompt("q").call().content()
    assert _sent(model)[0] == SystemMessage("JSON like {a: 1}")


def test_a_prompt_object_gives_messages_and_options_and_its_system_message_wins() -> None:
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_system="default system")
    prompt = Prompt([SystemMessage("prompt system"), UserMessage("hi")], ChatOptions(temperature=0.2))
    client.prompt(prompt).call().content()
    assert _sent(model) == [SystemMessage("prompt system"), UserMessage("hi")]
    assert model.prompts[-1].options is not None and model.prompts[-1].options.temperature == 0.2
    client2 = ChatClient(ScriptedChatModel(["ok"]), default_system="default system")
    client2.prompt(Prompt([UserMessage("hi")])).call().content()
    assert client2.model.prompts[-1].instructions[0] == SystemMessage("default system")  # type: ignore[attr-defined]


def test_media_and_metadata_go_on_the_user_message() -> None:
    model = ScriptedChatModel(["a cat"])
    image = Media("image/png", data=b"\x89PNG")
    ChatClient(model).prompt().user(
        "What is in {what}?", media=[image], metadata={"source": "upload"}, what="this picture"
    ).call().content()
    assert _sent(model) == [UserMessage("What is in this picture?", {"source": "upload"}, (image,))]


# -- mutate and copy -------------------------------------------------------------------------------


def test_mutate_makes_a_new_client_and_leaves_the_original_alone() -> None:
    first, second = ScriptedChatModel(["a"]), ScriptedChatModel(["b"])
    client = ChatClient(first, default_system="Be brief.")
    other = client.mutate(model=second, default_system="Be verbose.")
    assert other.prompt("q").call().content() == "b"
    assert client.prompt("q").call().content() == "a"
    assert second.prompts[0].instructions[0] == SystemMessage("Be verbose.")
    assert first.prompts[0].instructions[0] == SystemMessage("Be brief.")


def test_mutate_covers_every_constructor_keyword_and_refuses_unknown_ones() -> None:
    import inspect

    client = ChatClient(ScriptedChatModel([]))
    keywords = [p for p in inspect.signature(ChatClient.__init__).parameters if p != "self"]
    assert sorted(client._settings) == sorted(keywords)
    with pytest.raises(TypeError, match="'temperature'"):
        client.mutate(temperature=0.5)


def test_spec_copy_is_independent() -> None:
    model = ScriptedChatModel(["one", "two", "base"])
    base = ChatClient(model).prompt().system("S").param("k", "v")
    base.copy().user("first").call().content()
    base.copy().user("second").param("k", "changed").call().content()
    base.user("base").call().content()
    assert [p.instructions[-1] for p in model.prompts] == [
        UserMessage("first"),
        UserMessage("second"),
        UserMessage("base"),
    ]
    assert base._params == {"k": "v"}


# -- response_entity -------------------------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


def test_response_entity_gives_the_entity_and_the_response_of_one_request() -> None:
    model = ScriptedChatModel(['{"name": "Oslo", "population": 700000}'])
    result = ChatClient(model).prompt("Biggest city in Norway?").call().response_entity(City)
    assert isinstance(result, ResponseEntity)
    assert result.entity == City(name="Oslo", population=700000)
    assert result.response.text == '{"name": "Oslo", "population": 700000}'
    assert len(model.prompts) == 1
    assert "JSON" in (model.prompts[0].instructions[-1].text or "")  # format instructions were added


async def test_response_entity_async_keeps_usage_beside_the_entity() -> None:
    def answer(prompt: Prompt) -> ChatResponse:
        return ChatResponse.of(AssistantMessage('["a", "b"]'), "stop", Usage(10, 3))

    client = ChatClient(FunctionChatModel(answer))
    result = await client.prompt("letters").acall().response_entity(list[str])
    assert result.entity == ["a", "b"]
    assert result.response.metadata.usage == Usage(10, 3)


def test_chat_responses_skip_context_only_chunks() -> None:
    model = ScriptedChatModel(["hello world"])
    responses = list(ChatClient(model).prompt("hi").stream().chat_responses())
    assert all(isinstance(r, ChatResponse) for r in responses)
    assert "".join(r.text or "" for r in responses) == "hello world"


# -- read-only contexts -----------------------------------------------------------------------------


def test_contexts_are_read_only_snapshots() -> None:
    given_context = {"a": 1}
    request = ChatClientRequest(Prompt([UserMessage("q")]), given_context)
    given_context["b"] = 2
    assert request.context == {"a": 1}
    copied = request.copy()
    for mutate in (
        lambda c: c.__setitem__("x", 1),
        lambda c: c.__delitem__("a"),
        lambda c: c.update(x=1),
        lambda c: c.pop("a"),
        lambda c: c.clear(),
        lambda c: c.setdefault("x", 1),
    ):
        with pytest.raises(TypeError, match="read-only"):
            mutate(copied.context)
    assert request.context == {"a": 1}
    response = ChatClientResponse(None, request.context)
    with pytest.raises(TypeError):
        response.copy().context["x"] = 1  # type: ignore[index]
    changed = request.copy(context={**request.context, "x": 1})
    assert changed.context == {"a": 1, "x": 1} and request.context == {"a": 1}


def test_sync_forms_refuse_inside_a_running_loop() -> None:
    client = ChatClient(ScriptedChatModel(["{}"]))

    async def inside() -> None:
        with pytest.raises(RuntimeError, match=r"acall\(\)\.response_entity"):
            client.prompt("q").call().response_entity(dict)

    asyncio.run(inside())
