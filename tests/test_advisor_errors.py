"""An error names the advisor it came out of (issue 11): an exception an advisor raises carries a
note naming that advisor, one the model raises names the model — never an advisor it merely
passed through — on the call and the stream path."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from advisorchain import (
    BaseAdvisor,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    ModelError,
    ScriptedChatModel,
)
from advisorchain.advisors.api import StreamAdvisorChain


class Broken(BaseAdvisor):
    order = 10

    def before(self, request: ChatClientRequest, chain: object) -> ChatClientRequest:
        raise KeyError("user_id")


class Passing(BaseAdvisor):
    order = 5


class BrokenStream:
    name = "broken stream"
    order = 10

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        async for chunk in chain.next_stream(request):
            yield chunk
            raise RuntimeError("lost my place")


def test_an_exception_an_advisor_raises_names_that_advisor() -> None:
    client = ChatClient(ScriptedChatModel(["hi"]), default_advisors=[Passing(), Broken()])

    with pytest.raises(KeyError) as caught:
        client.prompt("q").call().content()

    assert caught.value.__notes__ == ["(raised in advisor 'Broken')"]


def test_a_model_failure_names_the_model_not_the_advisors_it_passed_through() -> None:
    client = ChatClient(ScriptedChatModel([ModelError("HTTP 500")]), default_advisors=[Passing()])

    with pytest.raises(ModelError) as caught:
        client.prompt("q").call().content()

    assert caught.value.__notes__ == ["(raised in model ScriptedChatModel)"]


async def test_on_the_stream_path_an_advisors_exception_names_it() -> None:
    client = ChatClient(ScriptedChatModel(["one two"]), default_advisors=[Passing(), BrokenStream()])

    with pytest.raises(RuntimeError) as caught:
        [d async for d in client.prompt("q").astream().content()]

    assert caught.value.__notes__ == ["(raised in advisor 'broken stream')"]


async def test_on_the_stream_path_a_model_failure_names_the_model() -> None:
    client = ChatClient(ScriptedChatModel([ModelError("reset")]), default_advisors=[Passing()])

    with pytest.raises(ModelError) as caught:
        [d async for d in client.prompt("q").astream().content()]

    assert caught.value.__notes__ == ["(raised in model ScriptedChatModel)"]
