"""Media on UserMessage: construction rules, the JSON round trip, and each provider's own request format
on the call and the stream path; a kind the provider cannot take is a ModelError before any request."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisorchain import Media, UserMessage, message_from_dict, message_to_dict
from advisorchain.errors import ModelError
from advisorchain.model import ChatModel, Prompt
from advisorchain.models.anthropic import AnthropicChatModel
from advisorchain.models.openai import OpenAIChatModel, OpenAIResponsesChatModel
from advisorchain.replay import Cassette, replay_anthropic_client, replay_openai_client
from tests.support.scripts import scripted_answer

PNG = b"\x89PNG\r\n\x1a\nfake-image"
PDF = b"%PDF-1.7 fake document"
WAV = b"RIFF....WAVEfmt fake"
MP3 = b"ID3 fake mp3"
TEXT = "Plain notes: caf\u00e9".encode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- the Media value -------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{}, {"data": PNG, "url": "https://example.com/a.png"}])
def test_media_takes_exactly_one_of_data_and_url(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="exactly one of data="):
        Media("image/png", **kwargs)


@pytest.mark.parametrize("mime_type", ["", "png", None, "/"])
def test_media_needs_a_mime_type(mime_type: Any) -> None:
    with pytest.raises(ValueError, match="MIME type such as 'image/png'"):
        Media(mime_type, data=PNG)


def test_media_data_must_be_bytes() -> None:
    with pytest.raises(ValueError, match="data must be bytes, got str"):
        Media("image/png", data="not bytes")  # type: ignore[arg-type]


def test_media_mime_type_is_normalised_to_lower_case() -> None:
    assert Media("Image/PNG", data=PNG).mime_type == "image/png"


def test_media_repr_shows_the_size_not_the_bytes() -> None:
    assert repr(Media("image/png", data=PNG)) == f"Media('image/png', data=<{len(PNG)} bytes>)"


def test_a_user_message_stores_its_media_as_a_tuple() -> None:
    media = [Media("image/png", data=PNG)]

    assert UserMessage("look", media=media).media == (Media("image/png", data=PNG),)


@pytest.mark.parametrize("bad", [[b"raw bytes"], Media("image/png", data=PNG)])
def test_a_user_message_refuses_media_that_is_not_a_list_of_media(bad: Any) -> None:
    with pytest.raises(TypeError, match="Media"):
        UserMessage("look", media=bad)


def test_a_user_message_without_media_serialises_as_before() -> None:
    assert message_to_dict(UserMessage("hi")) == {"type": "user", "text": "hi", "metadata": {}}


media_values = st.one_of(
    st.builds(
        lambda kind, data: Media(kind, data=data),
        st.sampled_from(["image/png", "application/pdf", "audio/wav", "text/plain"]),
        st.binary(max_size=64),
    ),
    st.builds(lambda url: Media("image/jpeg", url=url), st.text(min_size=1, max_size=40).filter(str.strip)),
)


@given(st.text(max_size=30), st.lists(media_values, max_size=4))
def test_user_messages_with_media_round_trip_through_json(text: str, media: list[Media]) -> None:
    message = UserMessage(text, {"k": 1}, media)

    assert message_from_dict(json.loads(json.dumps(message_to_dict(message)))) == message


def test_stored_media_that_is_not_base64_is_a_value_error() -> None:
    stored = {
        "type": "user",
        "text": "x",
        "metadata": {},
        "media": [{"mime_type": "image/png", "data": "***"}],
    }

    with pytest.raises(ValueError, match="'image/png': field 'data' is not base64"):
        message_from_dict(stored)


# -- providers: request bodies on call and stream ---------------------------------------------------

_ENDPOINTS = {
    "openai-chat": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic": "/v1/messages",
}


def _model(provider: str) -> tuple[ChatModel, Cassette]:
    path = _ENDPOINTS[provider]
    endpoint = path.removeprefix("/v1")
    cassette = Cassette(
        [
            {
                "request": {"method": "POST", "path": path},
                "response": scripted_answer(endpoint, final=True, stream=False),
            },
            {
                "request": {"method": "POST", "path": path},
                "response": scripted_answer(endpoint, final=True, stream=True),
            },
        ],
        host="api.example.com",
    )
    if provider == "openai-chat":
        return OpenAIChatModel("m", client=replay_openai_client(cassette)), cassette
    if provider == "openai-responses":
        return OpenAIResponsesChatModel("m", client=replay_openai_client(cassette)), cassette
    return AnthropicChatModel("m", client=replay_anthropic_client(cassette)), cassette


async def _call_and_stream(model: ChatModel, prompt: Prompt) -> None:
    await model.call(prompt)
    _ = [chunk async for chunk in model.stream(prompt)]


def _user_content(provider: str, body: dict[str, Any]) -> Any:
    if provider == "openai-responses":
        return body["input"][-1]["content"]
    return body["messages"][-1]["content"]


async def test_openai_chat_sends_images_pdfs_and_audio_as_content_parts() -> None:
    model, cassette = _model("openai-chat")
    message = UserMessage(
        "What is in these?",
        media=[
            Media("image/png", data=PNG),
            Media("image/jpeg", url="https://example.com/cat.jpg"),
            Media("application/pdf", data=PDF),
            Media("audio/wav", data=WAV),
            Media("audio/mpeg", data=MP3),
        ],
    )

    await _call_and_stream(model, Prompt([message]))

    expected = [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {
            "type": "file",
            "file": {"filename": "document-3.pdf", "file_data": f"data:application/pdf;base64,{b64(PDF)}"},
        },
        {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": b64(MP3), "format": "mp3"}},
    ]
    assert [_user_content("openai-chat", r.body) for r in cassette.requests] == [expected, expected]


async def test_openai_responses_sends_images_and_pdfs_as_input_parts() -> None:
    model, cassette = _model("openai-responses")
    message = UserMessage(
        "Summarise.",
        media=[
            Media("image/webp", data=PNG),
            Media("image/png", url="https://example.com/chart.png"),
            Media("application/pdf", data=PDF),
            Media("application/pdf", url="https://example.com/report.pdf"),
        ],
    )

    await _call_and_stream(model, Prompt([message]))

    expected = [
        {"type": "input_text", "text": "Summarise."},
        {"type": "input_image", "image_url": f"data:image/webp;base64,{b64(PNG)}", "detail": "auto"},
        {"type": "input_image", "image_url": "https://example.com/chart.png", "detail": "auto"},
        {
            "type": "input_file",
            "filename": "document-3.pdf",
            "file_data": f"data:application/pdf;base64,{b64(PDF)}",
        },
        {"type": "input_file", "file_url": "https://example.com/report.pdf"},
    ]
    assert [_user_content("openai-responses", r.body) for r in cassette.requests] == [expected, expected]


async def test_anthropic_sends_images_documents_and_plain_text_as_blocks_before_the_text() -> None:
    model, cassette = _model("anthropic")
    message = UserMessage(
        "Compare them.",
        media=[
            Media("image/png", data=PNG),
            Media("image/gif", url="https://example.com/a.gif"),
            Media("application/pdf", data=PDF),
            Media("application/pdf", url="https://example.com/b.pdf"),
            Media("text/plain", data=TEXT),
        ],
    )

    await _call_and_stream(model, Prompt([message]))

    expected = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.gif"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)}},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/b.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": TEXT.decode()}},
        {"type": "text", "text": "Compare them."},
    ]
    assert [_user_content("anthropic", r.body) for r in cassette.requests] == [expected, expected]


async def test_a_user_message_without_media_is_still_sent_as_plain_text() -> None:
    model, cassette = _model("openai-chat")

    await _call_and_stream(model, Prompt([UserMessage("hi")]))

    assert [_user_content("openai-chat", r.body) for r in cassette.requests] == ["hi", "hi"]


UNSUPPORTED = [
    ("openai-chat", Media("application/pdf", url="https://example.com/a.pdf")),
    ("openai-chat", Media("audio/wav", url="https://example.com/a.wav")),
    ("openai-chat", Media("text/plain", data=TEXT)),
    ("openai-chat", Media("video/mp4", data=b"v")),
    ("openai-responses", Media("audio/wav", data=WAV)),
    ("openai-responses", Media("text/plain", data=TEXT)),
    ("anthropic", Media("audio/mpeg", data=MP3)),
    ("anthropic", Media("text/plain", url="https://example.com/a.txt")),
    ("anthropic", Media("text/plain", data=b"\xff\xfe not utf-8")),
    ("anthropic", Media("application/zip", data=b"PK")),
]


@pytest.mark.parametrize(("provider", "media"), UNSUPPORTED)
async def test_a_kind_the_provider_cannot_take_fails_before_any_call_request(
    provider: str, media: Media
) -> None:
    model, cassette = _model(provider)

    with pytest.raises(ModelError, match=media.mime_type) as caught:
        await model.call(Prompt([UserMessage("look", media=[media])]))

    assert caught.value.error_type == "unsupported_media"
    assert cassette.requests == []


@pytest.mark.parametrize(("provider", "media"), UNSUPPORTED)
async def test_a_kind_the_provider_cannot_take_fails_before_any_stream_request(
    provider: str, media: Media
) -> None:
    model, cassette = _model(provider)

    with pytest.raises(ModelError, match=r"cannot take|not UTF-8"):
        _ = [chunk async for chunk in model.stream(Prompt([UserMessage("look", media=[media])]))]

    assert cassette.requests == []
