"""The typed ModelErrors an adapter raises on its own, before any request: what a provider cannot
take (a media kind, an option it lacks, a non-streamed answer too long to wait for) is an
UnsupportedRequestError that still carries its ``error_type``."""

from __future__ import annotations

import pytest

from advisorchain import Media, ModelError, Prompt, UnsupportedRequestError, UserMessage
from advisorchain.model import ChatOptions
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.models.openai import OpenAIChatModel, OpenAIResponsesChatModel
from advisorchain.testing import forbid_model_requests


async def test_a_media_kind_the_provider_does_not_take_is_unsupported_before_any_request() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    prompt = Prompt([UserMessage("listen", media=[Media("audio/ogg", data=b"OggS")])])

    with pytest.raises(UnsupportedRequestError) as caught:
        await model.call(prompt)
    assert caught.value.error_type == "unsupported_media"
    assert isinstance(caught.value, ModelError)


async def test_stop_sequences_on_the_responses_api_are_unsupported() -> None:
    model = OpenAIResponsesChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="k")

    with pytest.raises(UnsupportedRequestError, match="no stop sequences") as caught:
        await model.call(Prompt([UserMessage("hi")], ChatOptions(stop=["END"])))
    assert caught.value.error_type == "unsupported_option"


async def test_a_non_streamed_anthropic_answer_that_may_take_over_ten_minutes_is_refused_as_the_sdk_does() -> (
    None
):
    model = AnthropicChatModel(
        "claude-x", base_url="https://api.anthropic.invalid", api_key="k", max_tokens=200_000
    )

    with forbid_model_requests(), pytest.raises(UnsupportedRequestError, match="use stream") as caught:
        await model.call(Prompt([UserMessage("write a book")]))
    assert caught.value.error_type == "unsupported_option"
