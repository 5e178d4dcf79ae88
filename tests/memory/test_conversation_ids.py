"""One rule for conversation ids, on every store and through the request param: a non-empty str
of at most 1,000 characters with no NUL and no lone surrogate. Any other id is a
ChainConfigurationError naming the rule, raised before anything is stored — never a driver's
UnicodeEncodeError or a database error."""

from __future__ import annotations

from typing import Any

import pytest

from advisorchain import (
    ChainConfigurationError,
    ChatClient,
    ChatMemory,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    UserMessage,
)
from advisorchain.testing import ScriptedChatModel

BAD_IDS = [
    pytest.param("", id="empty"),
    pytest.param(None, id="None"),
    pytest.param(7, id="int"),
    pytest.param("a\x00b", id="NUL"),
    pytest.param("lone \ud800 surrogate", id="lone-surrogate"),
    pytest.param("\udfff", id="lone-low-surrogate"),
    pytest.param("x" * 1001, id="1001-chars"),
    pytest.param("y" * 1_000_000, id="1MB"),
]
GOOD_IDS = ["x" * 1000, "user-42/ünïcødé 🌍", " "]
RULE = "non-empty str of at most 1,000 characters with no NUL and no lone surrogate"


@pytest.mark.parametrize("bad", BAD_IDS)
def test_every_repository_refuses_an_id_outside_the_rule_and_stores_nothing(
    repository: Any, bad: object
) -> None:
    for call in (
        lambda: repository.save_all(bad, [UserMessage("hi")]),
        lambda: repository.find_by_conversation_id(bad),
        lambda: repository.delete_by_conversation_id(bad),
    ):
        with pytest.raises(ChainConfigurationError, match=RULE) as caught:
            call()
        assert len(str(caught.value)) < 400  # a 1 MB id is not echoed whole

    assert repository.find_conversation_ids() == []


@pytest.mark.parametrize("good", GOOD_IDS)
def test_every_repository_keeps_an_id_inside_the_rule(repository: Any, good: str) -> None:
    repository.save_all(good, [UserMessage("hi")])

    assert repository.find_by_conversation_id(good) == [UserMessage("hi")]
    assert repository.find_conversation_ids() == [good]


@pytest.mark.parametrize("bad", BAD_IDS[3:])
async def test_the_request_param_is_checked_before_the_model_is_called(repository: Any, bad: str) -> None:
    model = ScriptedChatModel(["never"])
    memory = MessageWindowChatMemory(repository)
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])

    with pytest.raises(ChainConfigurationError, match=RULE):
        await client.prompt("hi").param(ChatMemory.CONVERSATION_ID, bad).acall().content()

    assert model.prompts == []
    assert repository.find_conversation_ids() == []


@pytest.mark.parametrize("bad", BAD_IDS)
def test_the_memory_and_its_advisor_take_the_same_rule(bad: object) -> None:
    memory = MessageWindowChatMemory()
    with pytest.raises(ChainConfigurationError, match=RULE):
        memory.add(bad, [UserMessage("hi")])  # type: ignore[arg-type]
    with pytest.raises(ChainConfigurationError, match=RULE):
        MessageChatMemoryAdvisor(memory, conversation_id=bad)  # type: ignore[arg-type]
