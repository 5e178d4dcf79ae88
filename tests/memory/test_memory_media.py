"""User messages with media (images, documents, sound; bytes and URLs) round-trip exactly through every
repository backend, and through a window memory over it."""

from __future__ import annotations

from typing import Any

from advisorchain import AssistantMessage, Media, MessageWindowChatMemory, UserMessage

MEDIA = (
    Media("image/png", data=b"\x89PNG\r\n\x1a\n\x00\xff binary"),
    Media("image/jpeg", url="https://example.com/cat.jpg?size=large&x=\u00e9"),
    Media("application/pdf", data=b"%PDF-1.7"),
    Media("audio/wav", data=b""),
)


def test_user_messages_with_media_round_trip_exactly_in_every_repository(repository: Any) -> None:
    messages = [UserMessage("What are these?", {"lang": "en"}, MEDIA), AssistantMessage("A cat and a chart.")]

    repository.save_all("media-chat", messages)

    assert repository.find_by_conversation_id("media-chat") == messages
    assert repository.find_by_conversation_id("media-chat")[0].media[0].data == MEDIA[0].data


def test_a_window_memory_keeps_media_when_it_appends(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository, max_messages=10)

    memory.add("c", [UserMessage("first", media=MEDIA[:1])])
    memory.add("c", [AssistantMessage("ok"), UserMessage("second", media=MEDIA[1:])])

    assert [m.media for m in memory.get("c") if isinstance(m, UserMessage)] == [MEDIA[:1], MEDIA[1:]]
